//! Mirrors k8s.io/apiserver/pkg/endpoints/handlers/watch.go: a watch is a chunked response of
//! newline-delimited events `{"type": ..., "object": ...}`, fed from the watch cache.

use std::time::Duration;

use actix_web::{HttpRequest, HttpResponse};
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::error::{Error, Result};
use crate::endpoints::negotiation::Output;
use crate::endpoints::request::{client_name, partial_object_metadata};
use crate::printers::tablegenerator;
use crate::registry::generic::options::ListOptions;
use crate::registry::generic::store::Registry;
use crate::storage::store::with_resource_version;
use crate::storage::watch_cache::{EventType, WatchEvent, event_for};

/// How often an idle watch that allows bookmarks gets one.
const BOOKMARK_INTERVAL: Duration = Duration::from_secs(10);

/// The watch line for `e` as `kind`: the event's shared encoding when the watcher sees the event
/// as it is, a fresh one otherwise (a Table, metadata only, or a selector transition).
fn event_line(e: &WatchEvent, kind: EventType, shaped: bool, shape: &dyn Fn(&Value) -> Value) -> Bytes {
    if !shaped && kind == e.kind {
        return e.json_line();
    }
    line(kind.as_str(), shape(&object_for(e, kind)))
}

fn line(kind: &str, object: Value) -> Bytes {
    let mut v = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
    v.push(b'\n');
    Bytes::from(v)
}

/// `GET .../<resource>?watch=true`.
pub fn watch(req: &HttpRequest, reg: &Registry, namespace: Option<&str>, opts: &ListOptions, output: Output) -> Result<HttpResponse> {
    let info = reg.info();
    // Each event's object is written in the negotiated form.
    let shaped = output != Output::Json;
    let shape = move |obj: &Value| -> Value {
        match output {
            Output::Table => {
                let rv = obj.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or("").to_string();
                tablegenerator::table(info.printer, std::slice::from_ref(obj), &rv, None, chrono::Utc::now())
            }
            Output::Metadata => partial_object_metadata(obj),
            Output::Json | Output::Yaml => obj.clone(),
        }
    };
    // Who watches, for `kubelab trace`: the client's user agent without its version.
    let watcher: Option<String> = reg.strategy.traced().then(|| client_name(req));
    let (tx, rx) = mpsc::channel::<std::result::Result<Bytes, std::io::Error>>(64);
    let subscription = match reg.watch(namespace, opts) {
        Ok(s) => s,
        // Too old a resourceVersion is an ERROR event in a 200 stream: reflectors relist on it.
        Err(e @ Error::Expired { .. }) => {
            let _ = tx.try_send(Ok(line("ERROR", e.to_status())));
            drop(tx);
            return Ok(stream_response(rx));
        }
        Err(e) => return Err(e),
    };
    let (mut sub, filter) = subscription;
    let cache = reg.cache.clone();
    let bookmarks = opts.allow_watch_bookmarks;
    let initial_end = opts.send_initial_events == Some(true);
    let timeout = opts.timeout_seconds.map(Duration::from_secs);
    let bookmark = move |rv: i64, initial_end: bool| {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        line("BOOKMARK", json!({"kind": info.kind, "apiVersion": info.api_version(), "metadata": meta}))
    };
    actix_web::rt::spawn(async move {
        let deadline = watch_deadline(tokio::time::Instant::now(), timeout);
        let mut last_rev = 0;
        for e in sub.initial.drain(..) {
            let kind = if e.kind == EventType::Added { Some(EventType::Added) } else { event_for(&e, &*filter) };
            if let Some(kind) = kind {
                last_rev = last_rev.max(e.revision);
                if tx.send(Ok(event_line(&e, kind, shaped, &shape))).await.is_err() {
                    return;
                }
            }
        }
        if initial_end && tx.send(Ok(bookmark(sub.revision.max(last_rev), true))).await.is_err() {
            return;
        }
        let mut next_bookmark = next_bookmark_time(tokio::time::Instant::now(), deadline);
        loop {
            let bookmark_due = async {
                match next_bookmark {
                    Some(t) if bookmarks => tokio::time::sleep_until(t).await,
                    _ => std::future::pending().await,
                }
            };
            let until_deadline = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                e = sub.events.recv() => {
                    // None: the cache cut this watcher off; the client re-watches from its last version.
                    let Some(e) = e else { return };
                    if let Some(kind) = event_for(&e, &*filter) {
                        last_rev = e.revision;
                        if tx.send(Ok(event_line(&e, kind, shaped, &shape))).await.is_err() {
                            return;
                        }
                        if let Some(watcher) = &watcher {
                            record_sent(&e, kind, watcher);
                        }
                    }
                }
                _ = bookmark_due => {
                    next_bookmark = next_bookmark_time(tokio::time::Instant::now(), deadline);
                    // Everything up to the cache's revision is already queued for this watcher.
                    let rev = cache.revision();
                    loop {
                        let e = match sub.events.try_recv() {
                            Ok(e) => e,
                            Err(tokio::sync::mpsc::error::TryRecvError::Empty) => break,
                            // Cut off (a relist, or this watcher fell behind): the cache's
                            // revision is not this watcher's, so no bookmark may claim it.
                            Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => return,
                        };
                        if let Some(kind) = event_for(&e, &*filter) {
                            last_rev = e.revision;
                            if tx.send(Ok(event_line(&e, kind, shaped, &shape))).await.is_err() {
                                return;
                            }
                        }
                    }
                    if rev > last_rev {
                        last_rev = rev;
                        if tx.send(Ok(bookmark(rev, false))).await.is_err() {
                            return;
                        }
                    }
                }
                _ = until_deadline => return,
                _ = tx.closed() => return,
            }
        }
    });
    Ok(stream_response(rx))
}

/// When a watch that allows bookmarks gets its next one (cacher.go `nextBookmarkTime`): after
/// [`BOOKMARK_INTERVAL`], or 2 s before the watch's own deadline if that comes first, so that a
/// client whose watch times out knows how far it got; none once even that has passed.
/// When a watch with `timeoutSeconds` ends: None (never) for a timeout past what the clock can
/// hold — `timeoutSeconds=18446744073709551615` once panicked the worker adding it to now.
fn watch_deadline(now: tokio::time::Instant, timeout: Option<Duration>) -> Option<tokio::time::Instant> {
    now.checked_add(timeout?)
}

fn next_bookmark_time(now: tokio::time::Instant, deadline: Option<tokio::time::Instant>) -> Option<tokio::time::Instant> {
    let heartbeat = now + BOOKMARK_INTERVAL;
    let Some(deadline) = deadline else { return Some(heartbeat) };
    let pretimeout = deadline.checked_sub(Duration::from_secs(2))?;
    let at = heartbeat.min(pretimeout);
    (at > now).then_some(at)
}

/// A watch event of a traced object handed to a watcher's stream is a step of that object: the
/// hop from the API server to the scheduler or the node agent (a pod), or to each node's proxy
/// (a Service, its EndpointSlices). Once per watcher name and revision: the controller manager's
/// many informers (every one a watch of pods) are one hop.
fn record_sent(e: &WatchEvent, kind: EventType, watcher: &str) {
    let Some(uid) = podtrace::trace_uid(&e.object) else { return };
    let step = podtrace::Step::instant("apiserver", "watch event sent", chrono::Utc::now())
        .with_field("type", kind.as_str())
        .with_field("watcher", watcher)
        .with_field("revision", e.revision);
    podtrace::recorder().record_once(uid, step);
}

/// The object a watcher is shown: an object that stopped matching the watcher's selector is
/// reported DELETED as it was before the change, at the change's resourceVersion (the cacher does
/// the same).
fn object_for(e: &WatchEvent, kind: EventType) -> Value {
    match (&e.prev, kind, e.kind) {
        (Some(prev), EventType::Deleted, EventType::Modified) => with_resource_version((**prev).clone(), e.revision),
        _ => (*e.object).clone(),
    }
}

fn stream_response(rx: mpsc::Receiver<std::result::Result<Bytes, std::io::Error>>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .insert_header(("Transfer-Encoding", "chunked"))
        .streaming(ReceiverStream::new(rx))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bookmark_comes_before_the_watch_times_out() {
        let now = tokio::time::Instant::now();
        assert_eq!(next_bookmark_time(now, None), Some(now + BOOKMARK_INTERVAL));
        // timeoutSeconds=4: 2 s before the end, well before the interval.
        assert_eq!(next_bookmark_time(now, Some(now + Duration::from_secs(4))), Some(now + Duration::from_secs(2)));
        // A long watch: the interval first.
        assert_eq!(next_bookmark_time(now, Some(now + Duration::from_secs(300))), Some(now + BOOKMARK_INTERVAL));
        // Within the last 2 s: no more.
        assert_eq!(next_bookmark_time(now, Some(now + Duration::from_secs(1))), None);
    }

    #[test]
    fn a_timeout_past_the_clock_is_no_deadline_not_a_panic() {
        let now = tokio::time::Instant::now();
        assert_eq!(watch_deadline(now, Some(Duration::from_secs(5))), Some(now + Duration::from_secs(5)));
        assert_eq!(watch_deadline(now, None), None);
        assert_eq!(watch_deadline(now, Some(Duration::from_secs(u64::MAX))), None);
        assert_eq!(watch_deadline(now, Some(Duration::from_secs(i64::MAX as u64))), None);
    }
}
