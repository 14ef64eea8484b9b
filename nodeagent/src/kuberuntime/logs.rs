//! Mirrors kubelet's pkg/kubelet/kuberuntime/logs/logs.go: turns a container's CRI log file into
//! what `kubectl logs` shows.
//!
//! The runtime (containerd's shim) writes one record a line:
//!
//! ```text
//! 2024-05-01T10:00:00.123456789Z stdout F hello world
//! 2024-05-01T10:00:01.000000001Z stderr P first 16 KiB of a long line…
//! 2024-05-01T10:00:01.000000002Z stderr F …and its end
//! ```
//!
//! `F` ends a line; `P` is a partial chunk (the runtime splits lines over 16 KiB, and flushes
//! output that has no newline yet). Reading a log is then:
//!
//! 1. Note the file's length when the request arrives: a read that does not follow shows the log
//!    as it was then, so lines the container writes meanwhile cannot make `tailLines=2` answer
//!    three. With `tailLines`, find where the last N *full* lines of that much begin (a line split
//!    into P chunks counts once).
//! 2. Parse each record, drop lines older than `sinceTime`, join chunks back into lines, prefix
//!    each line with its timestamp when asked, and cut the output at `limitBytes`.
//! 3. When following, at the end of the file wait for more: poll the file every
//!    [`FOLLOW_POLL_INTERVAL`] and ask every [`STATE_CHECK_PERIOD`] whether the container is still
//!    running. Once it is not, read what is left and stop. Stop too when the reader goes away.
//!
//! All file I/O goes through `tokio::fs` or `spawn_blocking`, so a big log never stalls the
//! executor. Caveat: log rotation is not followed (the agent does not rotate logs yet); a
//! follower keeps reading the file it opened.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::io::{BufRead, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use chrono::{DateTime, SecondsFormat, Utc};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::sync::mpsc;

use crate::error::{Error, Result};

/// How often a follower looks for lines appended to the file. kubelet waits on inotify; a poll
/// this short is as prompt for a person watching `kubectl logs -f` and needs no watcher.
pub(crate) const FOLLOW_POLL_INTERVAL: Duration = Duration::from_millis(100);

/// How often a follower at the end of the file asks the runtime whether the container still runs
/// (kubelet's stateCheckPeriod is 5 s; one CRI `ContainerStatus` a second is cheap).
pub(crate) const STATE_CHECK_PERIOD: Duration = Duration::from_secs(1);

/// Output is sent in chunks of at most about this size, and always before waiting for more
/// input, so a follower sees each line as soon as it is read.
const OUTPUT_CHUNK: usize = 32 * 1024;

/// What `kubectl logs` asked for (the query parameters of `pods/log`, kubelet's `LogOptions`).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct LogOptions {
    /// Keep streaming until the container stops (`follow`).
    pub(crate) follow: bool,
    /// Only the last N full lines (`tailLines`); `None` (or a negative number) means all.
    pub(crate) tail_lines: Option<i64>,
    /// Stop after this many bytes of output (`limitBytes`).
    pub(crate) limit_bytes: Option<i64>,
    /// Prefix each line with its RFC 3339 timestamp (`timestamps`).
    pub(crate) timestamps: bool,
    /// Only lines logged at or after this instant (`sinceTime`, or now − `sinceSeconds`).
    pub(crate) since_time: Option<DateTime<Utc>>,
    /// The previous instance of the container (`previous`): chosen by the caller, which opens
    /// that instance's file; [`ContainerLog::stream`] does not look at it.
    pub(crate) previous: bool,
}

/// A query-string boolean as Kubernetes reads one: absent is false, and any value other than
/// `0`, `f`, `false`, `n`, `no` (any case) is true — so a bare `?follow` follows.
fn query_bool(value: &str) -> bool {
    !["0", "f", "false", "n", "no"].iter().any(|f| value.eq_ignore_ascii_case(f))
}

impl LogOptions {
    /// Parse `kubectl logs`' query parameters, validated as the API server validates
    /// `PodLogOptions` (an invalid value is [`Error::LogOptions`], a 400 for the caller).
    pub(crate) fn from_query(query: &HashMap<String, String>) -> Result<LogOptions> {
        let flag = |key: &str| query.get(key).is_some_and(|v| query_bool(v));
        let int = |key: &str| -> Result<Option<i64>> {
            query
                .get(key)
                .map(|v| v.parse::<i64>().map_err(|_| Error::LogOptions(format!("{key}: Invalid value: {v:?}: must be an integer"))))
                .transpose()
        };
        let positive = |key: &str, v: Option<i64>| match v {
            Some(n) if n < 1 => Err(Error::LogOptions(format!("{key}: Invalid value: {n}: must be greater than 0"))),
            _ => Ok(v),
        };
        let tail_lines = int("tailLines")?;
        if let Some(n) = tail_lines.filter(|n| *n < 0) {
            return Err(Error::LogOptions(format!("tailLines: Invalid value: {n}: must be greater than or equal to 0")));
        }
        let limit_bytes = positive("limitBytes", int("limitBytes")?)?;
        let since_seconds = positive("sinceSeconds", int("sinceSeconds")?)?;
        let since_time = query
            .get("sinceTime")
            .map(|v| {
                DateTime::parse_from_rfc3339(v)
                    .map(|t| t.with_timezone(&Utc))
                    .map_err(|e| Error::LogOptions(format!("sinceTime: Invalid value: {v:?}: {e}")))
            })
            .transpose()?;
        let since_time = match (since_seconds, since_time) {
            (Some(_), Some(_)) => {
                return Err(Error::LogOptions("at most one of `sinceTime` or `sinceSeconds` may be specified".into()));
            }
            (Some(secs), None) => Some(Utc::now() - chrono::Duration::seconds(secs)),
            (None, t) => t,
        };
        Ok(LogOptions {
            follow: flag("follow"),
            tail_lines,
            limit_bytes,
            timestamps: flag("timestamps"),
            since_time,
            previous: flag("previous"),
        })
    }
}

/// Which of the container's output streams a record came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LogStream {
    Stdout,
    Stderr,
}

/// One parsed record of a CRI log file.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct LogRecord<'a> {
    pub(crate) timestamp: DateTime<Utc>,
    pub(crate) stream: LogStream,
    /// A `P` chunk: the line continues in the next record.
    pub(crate) partial: bool,
    /// The text, without the line's newline.
    pub(crate) message: &'a [u8],
}

/// Parse one line of a CRI log file (without its trailing newline):
/// `<RFC3339Nano> <stdout|stderr> <P|F>[:<more tags>] <message>`.
pub(crate) fn parse_cri_line(line: &[u8]) -> Result<LogRecord<'_>> {
    let invalid = |what: &'static str| Error::LogLine { what, line: String::from_utf8_lossy(line).into_owned() };
    let mut fields = line.splitn(4, |b| *b == b' ');
    let (Some(ts), Some(stream), Some(tag)) = (fields.next(), fields.next(), fields.next()) else {
        return Err(invalid("too few fields"));
    };
    // An empty full line is written as "<ts> <stream> F " — or, by some writers, without the space.
    let message = fields.next().unwrap_or_default();
    let timestamp = std::str::from_utf8(ts)
        .ok()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .ok_or_else(|| invalid("bad timestamp"))?
        .with_timezone(&Utc);
    let stream = match stream {
        b"stdout" => LogStream::Stdout,
        b"stderr" => LogStream::Stderr,
        _ => return Err(invalid("unknown stream")),
    };
    let partial = match tag.split(|b| *b == b':').next() {
        Some(b"P") => true,
        Some(b"F") => false,
        _ => return Err(invalid("unknown tag")),
    };
    Ok(LogRecord { timestamp, stream, partial, message })
}

/// The byte offset at which the last `n` full lines of a CRI log begin (step 1). Lines split into
/// `P` chunks count once; an unfinished line at the end (chunks with no `F` yet) is not counted
/// and is read after the `n` lines. Scans forward: log files are bounded by rotation, and a
/// forward scan needs no care about records cut by a block boundary.
fn tail_start(reader: impl BufRead, n: usize) -> std::io::Result<u64> {
    let mut reader = reader;
    // Offsets where a full line starts; the last one is the start of whatever follows the last F.
    let mut starts = VecDeque::from([0u64]);
    let mut offset = 0u64;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let read = reader.read_until(b'\n', &mut buf)?;
        if read == 0 || !buf.ends_with(b"\n") {
            break;
        }
        offset += read as u64;
        let is_full = parse_cri_line(&buf[..buf.len() - 1]).is_ok_and(|r| !r.partial);
        if is_full {
            starts.push_back(offset);
            if starts.len() > n + 1 {
                starts.pop_front();
            }
        }
    }
    Ok(starts.front().copied().unwrap_or(0))
}

/// Turns records into output (step 2) and sends it.
struct LogWriter<'a> {
    opts: &'a LogOptions,
    out: mpsc::Sender<Bytes>,
    buf: BytesMut,
    /// Bytes still allowed by `limitBytes`.
    remaining: Option<u64>,
    /// The last record was a `P` chunk, so the next one continues its line.
    mid_line: bool,
    /// The current line is older than `sinceTime` (decided on its first chunk).
    skipping: bool,
}

impl LogWriter<'_> {
    /// Add a record to the output; false once `limitBytes` is used up.
    fn push(&mut self, record: &LogRecord<'_>) -> bool {
        let starts_line = !self.mid_line;
        self.mid_line = record.partial;
        if starts_line {
            self.skipping = self.opts.since_time.is_some_and(|since| record.timestamp < since);
        }
        if self.skipping {
            return true;
        }
        if starts_line && self.opts.timestamps {
            let prefix = format!("{} ", record.timestamp.to_rfc3339_opts(SecondsFormat::Nanos, true));
            if !self.write(prefix.as_bytes()) {
                return false;
            }
        }
        self.write(record.message) && (record.partial || self.write(b"\n"))
    }

    /// Append within `limitBytes`; false once the limit is reached.
    fn write(&mut self, bytes: &[u8]) -> bool {
        match &mut self.remaining {
            None => {
                self.buf.extend_from_slice(bytes);
                true
            }
            Some(left) => {
                let take = bytes.len().min(usize::try_from(*left).unwrap_or(usize::MAX));
                self.buf.extend_from_slice(&bytes[..take]);
                *left -= take as u64;
                *left > 0
            }
        }
    }

    /// Send what is buffered; false when the receiver is gone.
    async fn flush(&mut self) -> bool {
        if self.buf.is_empty() {
            return !self.out.is_closed();
        }
        self.out.send(self.buf.split().freeze()).await.is_ok()
    }
}

/// An open container log file, opened before anything is streamed so that a missing file can
/// still be answered with an error status.
pub(crate) struct ContainerLog {
    path: PathBuf,
    file: tokio::fs::File,
    /// The file's length when it was opened: where a read that does not follow stops.
    len: u64,
}

impl ContainerLog {
    pub(crate) async fn open(path: &Path) -> Result<ContainerLog> {
        let file = tokio::fs::File::open(path).await.map_err(|e| Error::io(path, e))?;
        let len = file.metadata().await.map_err(|e| Error::io(path, e))?.len();
        Ok(ContainerLog { path: path.to_path_buf(), file, len })
    }

    /// Stream the log to `out` as `opts` asks. `still_running` is asked, when following, whether
    /// the container still runs (a CRI `ContainerStatus` in the server). Returns when the log is
    /// done, `limitBytes` is reached or the receiver of `out` is dropped.
    pub(crate) async fn stream<F, Fut>(self, opts: &LogOptions, out: mpsc::Sender<Bytes>, mut still_running: F) -> Result<()>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = bool>,
    {
        let path = self.path;
        let io_err = |e| Error::io(&path, e);
        let (mut file, len) = (self.file, self.len);

        // Step 1: position the file at the start of the last N lines of the first `len` bytes.
        let mut start = 0;
        if let Some(n) = opts.tail_lines.and_then(|n| usize::try_from(n).ok()) {
            let std_file = file.into_std().await;
            let (std_file, tail) = tokio::task::spawn_blocking(move || -> std::io::Result<(std::fs::File, u64)> {
                let mut f = &std_file;
                let start = tail_start(std::io::BufReader::new(f.take(len)), n)?;
                f.seek(SeekFrom::Start(start))?;
                Ok((std_file, start))
            })
            .await
            .map_err(|e| io_err(std::io::Error::other(e)))?
            .map_err(io_err)?;
            (file, start) = (tokio::fs::File::from_std(std_file), tail);
        }
        // Without `follow`, stop where the file ended when the request arrived.
        let readable = if opts.follow { u64::MAX } else { len.saturating_sub(start) };

        let mut writer = LogWriter {
            opts,
            out,
            buf: BytesMut::new(),
            remaining: opts.limit_bytes.map(|n| n.max(0) as u64),
            mid_line: false,
            skipping: false,
        };
        if writer.remaining == Some(0) {
            return Ok(());
        }
        let mut reader = BufReader::with_capacity(64 * 1024, file.take(readable));
        let mut line = Vec::new();
        let mut last_state_check: Option<Instant> = None;
        // The container has stopped: read to the end once more, then finish.
        let mut draining = false;
        loop {
            reader.read_until(b'\n', &mut line).await.map_err(io_err)?;
            if line.ends_with(b"\n") {
                // Step 2: one complete record.
                line.pop();
                match parse_cri_line(&line) {
                    Ok(record) => {
                        if !writer.push(&record) {
                            writer.flush().await;
                            return Ok(());
                        }
                    }
                    Err(e) => tracing::warn!(target: "kubelet::logs", path = %path.display(), error = %e, "skipping unparsable log line"),
                }
                line.clear();
                if writer.buf.len() >= OUTPUT_CHUNK && !writer.flush().await {
                    return Ok(());
                }
                continue;
            }

            // End of the file; `line` holds any record the runtime is still writing.
            if !writer.flush().await {
                return Ok(());
            }
            if !opts.follow || draining {
                // Nothing more will come: a last record without its newline is still shown.
                if let Ok(record) = parse_cri_line(&line) {
                    writer.push(&record);
                    writer.flush().await;
                }
                return Ok(());
            }
            // Step 3: follow.
            if last_state_check.is_none_or(|t| t.elapsed() >= STATE_CHECK_PERIOD) {
                last_state_check = Some(Instant::now());
                if !still_running().await {
                    draining = true;
                    continue;
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(FOLLOW_POLL_INTERVAL) => {}
                _ = writer.out.closed() => return Ok(()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    /// Open the log at `path` and stream it to `out`, as the HTTP server does.
    async fn read_logs<F, Fut>(path: &Path, opts: &LogOptions, out: mpsc::Sender<Bytes>, still_running: F) -> Result<()>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = bool>,
    {
        ContainerLog::open(path).await?.stream(opts, out, still_running).await
    }

    fn ts(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).expect("timestamp").with_timezone(&Utc)
    }

    /// The test log: three full lines, the middle one split into chunks, and an empty line.
    const LOG: &str = "\
2024-05-01T10:00:00.000000001Z stdout F one
2024-05-01T10:00:01.5Z stderr P tw
2024-05-01T10:00:01.6Z stderr P o-
2024-05-01T10:00:01.7Z stderr F two
2024-05-01T10:00:02Z stdout F 
2024-05-01T10:00:03.123456789Z stdout F three
";

    fn write_log(content: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().expect("temp file");
        f.write_all(content.as_bytes()).expect("write");
        f
    }

    async fn read(content: &str, opts: LogOptions) -> String {
        let f = write_log(content);
        let (tx, mut rx) = mpsc::channel(4);
        let reader = tokio::spawn({
            let path = f.path().to_path_buf();
            async move { read_logs(&path, &opts, tx, || async { false }).await }
        });
        let mut out = Vec::new();
        while let Some(chunk) = rx.recv().await {
            out.extend_from_slice(&chunk);
        }
        reader.await.expect("join").expect("read_logs");
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn parses_records() {
        let r = parse_cri_line(b"2024-05-01T10:00:00.123456789Z stderr P: a b ").expect("parse");
        assert_eq!(r.timestamp, ts("2024-05-01T10:00:00.123456789Z"));
        assert_eq!((r.stream, r.partial, r.message), (LogStream::Stderr, true, b"a b ".as_slice()));
        let r = parse_cri_line(b"2024-05-01T12:00:00+02:00 stdout F:x hi").expect("tag with more tags");
        assert_eq!((r.timestamp, r.partial, r.message), (ts("2024-05-01T10:00:00Z"), false, b"hi".as_slice()));
        assert_eq!(parse_cri_line(b"2024-05-01T10:00:00Z stdout F").expect("empty").message, b"");
        for bad in ["", "2024-05-01T10:00:00Z stdout", "yesterday stdout F x", "2024-05-01T10:00:00Z stdin F x", "2024-05-01T10:00:00Z stdout X x"] {
            assert!(parse_cri_line(bad.as_bytes()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn query_parameters() {
        let q = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<HashMap<_, _>>();
        let opts = LogOptions::from_query(&q(&[
            ("follow", "true"),
            ("tailLines", "10"),
            ("limitBytes", "100"),
            ("timestamps", "1"),
            ("sinceTime", "2024-05-01T10:00:00Z"),
            ("previous", "false"),
        ]))
        .expect("valid");
        assert_eq!(
            opts,
            LogOptions {
                follow: true,
                tail_lines: Some(10),
                limit_bytes: Some(100),
                timestamps: true,
                since_time: Some(ts("2024-05-01T10:00:00Z")),
                previous: false,
            }
        );
        assert_eq!(LogOptions::from_query(&q(&[])).expect("empty"), LogOptions::default());
        assert!(LogOptions::from_query(&q(&[("follow", "")])).expect("bare flag").follow);
        let since = LogOptions::from_query(&q(&[("sinceSeconds", "60")])).expect("sinceSeconds").since_time.expect("set");
        let age = Utc::now() - since;
        assert!(age >= chrono::Duration::seconds(60) && age < chrono::Duration::seconds(70), "{age}");
        for bad in [
            q(&[("tailLines", "-1")]),
            q(&[("tailLines", "ten")]),
            q(&[("limitBytes", "0")]),
            q(&[("sinceSeconds", "0")]),
            q(&[("sinceTime", "yesterday")]),
            q(&[("sinceTime", "2024-05-01T10:00:00Z"), ("sinceSeconds", "5")]),
        ] {
            assert!(matches!(LogOptions::from_query(&bad), Err(Error::LogOptions(_))), "{bad:?}");
        }
    }

    #[tokio::test]
    async fn joins_partial_lines() {
        assert_eq!(read(LOG, LogOptions::default()).await, "one\ntwo-two\n\nthree\n");
    }

    #[tokio::test]
    async fn timestamps_prefix_each_line_once() {
        let opts = LogOptions { timestamps: true, ..Default::default() };
        assert_eq!(
            read(LOG, opts).await,
            "2024-05-01T10:00:00.000000001Z one\n\
             2024-05-01T10:00:01.500000000Z two-two\n\
             2024-05-01T10:00:02.000000000Z \n\
             2024-05-01T10:00:03.123456789Z three\n"
        );
    }

    #[tokio::test]
    async fn tail_counts_full_lines() {
        let tail = |n| LogOptions { tail_lines: Some(n), ..Default::default() };
        assert_eq!(read(LOG, tail(0)).await, "");
        assert_eq!(read(LOG, tail(1)).await, "three\n");
        assert_eq!(read(LOG, tail(3)).await, "two-two\n\nthree\n");
        assert_eq!(read(LOG, tail(4)).await, LOG_TEXT);
        assert_eq!(read(LOG, tail(100)).await, LOG_TEXT);
        // An unfinished line at the end is not one of the N, but is shown after them.
        let unfinished = format!("{LOG}2024-05-01T10:00:04Z stdout P four\n");
        assert_eq!(read(&unfinished, tail(1)).await, "three\nfour");
    }

    const LOG_TEXT: &str = "one\ntwo-two\n\nthree\n";

    #[tokio::test]
    async fn a_read_without_follow_ends_where_the_file_ended_when_it_was_opened() {
        let mut f = write_log(LOG);
        let opened = ContainerLog::open(f.path()).await.expect("open");
        let again = ContainerLog::open(f.path()).await.expect("open");
        // The container writes a line after the request arrived and before it is read.
        f.write_all(b"2024-05-01T10:00:04Z stdout F four\n").expect("append");
        for (log, opts, want) in [
            (opened, LogOptions { tail_lines: Some(2), ..Default::default() }, "\nthree\n"),
            (again, LogOptions::default(), LOG_TEXT),
        ] {
            let (tx, mut rx) = mpsc::channel(4);
            log.stream(&opts, tx, || async { false }).await.expect("stream");
            let mut out = Vec::new();
            while let Some(chunk) = rx.recv().await {
                out.extend_from_slice(&chunk);
            }
            assert_eq!(String::from_utf8(out).expect("utf-8"), want, "{opts:?}");
        }
    }

    #[tokio::test]
    async fn since_drops_older_lines_whole() {
        // The chunked line began before 10:00:01.6 and is dropped entirely, not cut.
        let opts = LogOptions { since_time: Some(ts("2024-05-01T10:00:01.6Z")), ..Default::default() };
        assert_eq!(read(LOG, opts).await, "\nthree\n");
        let opts = LogOptions { since_time: Some(ts("2024-05-01T10:00:01.5Z")), ..Default::default() };
        assert_eq!(read(LOG, opts).await, "two-two\n\nthree\n");
    }

    #[tokio::test]
    async fn limit_bytes_truncates() {
        let limit = |n| LogOptions { limit_bytes: Some(n), ..Default::default() };
        assert_eq!(read(LOG, limit(6)).await, "one\ntw");
        assert_eq!(read(LOG, limit(4)).await, "one\n");
        assert_eq!(read(LOG, limit(1000)).await, LOG_TEXT);
        let opts = LogOptions { limit_bytes: Some(10), timestamps: true, ..Default::default() };
        assert_eq!(read(LOG, opts).await, "2024-05-01");
    }

    #[tokio::test]
    async fn skips_garbage_and_shows_a_last_line_without_newline() {
        let content = "garbage\n2024-05-01T10:00:00Z stdout F ok\n2024-05-01T10:00:01Z stdout F last";
        assert_eq!(read(content, LogOptions::default()).await, "ok\nlast\n");
    }

    #[tokio::test]
    async fn missing_file_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (tx, _rx) = mpsc::channel(1);
        let err = read_logs(&dir.path().join("nope.log"), &LogOptions::default(), tx, || async { false })
            .await
            .expect_err("missing");
        assert!(matches!(err, Error::Io { .. }), "{err}");
    }

    async fn recv(rx: &mut mpsc::Receiver<Bytes>) -> Option<Bytes> {
        tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.expect("output in time")
    }

    #[tokio::test]
    async fn follow_streams_appended_lines_until_the_container_stops() {
        let f = write_log("2024-05-01T10:00:00Z stdout F before\n");
        let path = f.path().to_path_buf();
        let running = Arc::new(AtomicBool::new(true));
        let (tx, mut rx) = mpsc::channel(4);
        let opts = LogOptions { follow: true, ..Default::default() };
        let reader = tokio::spawn({
            let running = running.clone();
            let path = path.clone();
            async move {
                read_logs(&path, &opts, tx, move || {
                    let running = running.load(Ordering::SeqCst);
                    async move { running }
                })
                .await
            }
        });
        assert_eq!(recv(&mut rx).await.as_deref(), Some(b"before\n".as_slice()));

        // Appended in two writes, the second completing the record: nothing is shown half-written.
        let mut file = std::fs::OpenOptions::new().append(true).open(&path).expect("open for append");
        file.write_all(b"2024-05-01T10:00:05Z stdout P app").expect("append");
        file.flush().expect("flush");
        // Three polls of the file see the partial record, and none may pass it on.
        let partial_kept = || matches!(rx.try_recv(), Err(mpsc::error::TryRecvError::Empty));
        crate::testing::hold_for("a partial record to stay unsent", FOLLOW_POLL_INTERVAL * 3, partial_kept).await;
        file.write_all(b"ended \n2024-05-01T10:00:05Z stdout F line\n").expect("append");
        assert_eq!(recv(&mut rx).await.as_deref(), Some(b"appended line\n".as_slice()));

        // The container exits after one last line: it is read, then the stream ends.
        file.write_all(b"2024-05-01T10:00:06Z stderr F bye\n").expect("append");
        running.store(false, Ordering::SeqCst);
        let mut rest = Vec::new();
        while let Some(chunk) = recv(&mut rx).await {
            rest.extend_from_slice(&chunk);
        }
        assert_eq!(rest, b"bye\n");
        reader.await.expect("join").expect("read_logs");
    }

    #[tokio::test]
    async fn follow_stops_when_the_receiver_is_dropped() {
        let f = write_log("2024-05-01T10:00:00Z stdout F only\n");
        let (tx, mut rx) = mpsc::channel(4);
        let path = f.path().to_path_buf();
        let opts = LogOptions { follow: true, ..Default::default() };
        let reader = tokio::spawn(async move { read_logs(&path, &opts, tx, || async { true }).await });
        assert_eq!(rx.recv().await.as_deref(), Some(b"only\n".as_slice()));
        drop(rx);
        tokio::time::timeout(Duration::from_secs(2), reader)
            .await
            .expect("reader stops once nobody listens")
            .expect("join")
            .expect("read_logs");
    }
}
