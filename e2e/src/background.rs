//! A client command running in the background (`kubectl get -w`, `etcdctl watch`), whose output
//! the test reads line by line with deadlines ([`crate::scaled`]).

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// Reads `r` to the end on a thread; the handle yields everything read.
pub fn read_all(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = r.read_to_string(&mut s);
        s
    })
}

fn forward_lines(r: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// A background client (`kubectl get -w`, `etcdctl watch`): its stdout and stderr arrive line
/// by line. Killed on drop.
pub struct Background {
    child: Child,
    lines: mpsc::Receiver<String>,
    /// Every stdout line received so far.
    pub seen: Vec<String>,
    err_lines: mpsc::Receiver<String>,
    /// Every stderr line received so far.
    pub seen_err: Vec<String>,
    pub command: String,
}

impl Background {
    /// Waits until some stdout line satisfies `pred`; returns that line.
    pub fn expect_line(&mut self, what: &str, deadline: Duration, pred: impl Fn(&str) -> bool) -> anyhow::Result<String> {
        first_match(&self.lines, &mut self.seen, &self.command, what, "", deadline, pred)
    }

    /// Waits until `n` stdout lines (counted over everything seen so far) satisfy `pred`.
    pub fn expect_count(
        &mut self,
        what: &str,
        n: usize,
        deadline: Duration,
        pred: impl Fn(&str) -> bool,
    ) -> anyhow::Result<()> {
        let deadline = crate::scaled(deadline);
        let start = Instant::now();
        loop {
            if self.seen.iter().filter(|l| pred(l)).count() >= n {
                return Ok(());
            }
            let left = deadline.saturating_sub(start.elapsed());
            match self.lines.recv_timeout(left.max(Duration::from_millis(1))) {
                Ok(l) => self.seen.push(l),
                Err(_) => bail!(
                    "`{}` did not print {n} lines of {what} within {deadline:?}; it printed {:#?}",
                    self.command,
                    self.seen
                ),
            }
        }
    }

    /// Waits for the process to exit by itself: (success, stdout lines, stderr).
    pub fn wait_exit(mut self, deadline: Duration) -> anyhow::Result<(bool, Vec<String>, String)> {
        let deadline = crate::scaled(deadline);
        let start = Instant::now();
        let status = loop {
            if let Some(st) = self.child.try_wait()? {
                break st;
            }
            if start.elapsed() > deadline {
                bail!(
                    "`{}` still running after {deadline:?}; stdout so far {:?}",
                    self.command,
                    self.seen
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let (lines, stderr) = self.stop();
        Ok((status.success(), lines, stderr))
    }

    /// Kills the process (SIGKILL: it is ours) and returns (stdout lines, stderr).
    pub fn stop(mut self) -> (Vec<String>, String) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        while let Ok(l) = self.lines.recv_timeout(Duration::from_millis(200)) {
            self.seen.push(l);
        }
        while let Ok(l) = self.err_lines.recv_timeout(Duration::from_millis(200)) {
            self.seen_err.push(l);
        }
        (std::mem::take(&mut self.seen), self.seen_err.join("\n"))
    }

    /// Waits until some stderr line satisfies `pred` (e.g. kubectl's `-v=6` request log).
    pub fn expect_stderr_line(&mut self, what: &str, deadline: Duration, pred: impl Fn(&str) -> bool) -> anyhow::Result<String> {
        first_match(&self.err_lines, &mut self.seen_err, &self.command, what, " on stderr", deadline, pred)
    }
}

/// Waits until a line of `lines` (those already in `seen` first) satisfies `pred`.
fn first_match(
    lines: &mpsc::Receiver<String>,
    seen: &mut Vec<String>,
    command: &str,
    what: &str,
    stream: &str,
    deadline: Duration,
    pred: impl Fn(&str) -> bool,
) -> anyhow::Result<String> {
    let deadline = crate::scaled(deadline);
    let start = Instant::now();
    let mut checked = 0;
    loop {
        if let Some(l) = seen[checked..].iter().find(|l| pred(l)) {
            return Ok(l.clone());
        }
        checked = seen.len();
        let left = deadline.saturating_sub(start.elapsed());
        match lines.recv_timeout(left.max(Duration::from_millis(1))) {
            Ok(l) => seen.push(l),
            Err(_) => bail!("`{command}` did not print {what}{stream} within {deadline:?}; it printed {seen:#?}"),
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Background {
    /// Starts `cmd` (shown in messages as `shown`) with its output piped to the test.
    pub fn spawn(mut cmd: Command, shown: String) -> anyhow::Result<Background> {
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().with_context(|| format!("spawning {shown}"))?;
        let lines = forward_lines(child.stdout.take().context("no stdout pipe")?);
        let err_lines = forward_lines(child.stderr.take().context("no stderr pipe")?);
        Ok(Background { child, lines, seen: Vec::new(), err_lines, seen_err: Vec::new(), command: shown })
    }

    /// Waits until the stdout lines received so far contain `expected` as consecutive lines.
    pub fn expect_lines(&mut self, expected: &[&str], deadline: Duration) -> anyhow::Result<()> {
        let deadline = crate::scaled(deadline);
        let start = Instant::now();
        loop {
            if self.seen.windows(expected.len()).any(|w| w.iter().zip(expected).all(|(a, b)| a == b)) {
                return Ok(());
            }
            let left = deadline.saturating_sub(start.elapsed());
            match self.lines.recv_timeout(left.max(Duration::from_millis(1))) {
                Ok(l) => self.seen.push(l),
                Err(_) => bail!("`{}` did not print {expected:?} within {deadline:?}; it printed {:?}", self.command, self.seen),
            }
        }
    }
}
