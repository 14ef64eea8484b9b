//! Mirrors etcd's `v3rpc/watch.go` + `mvcc/watchable_store.go`: many watches on one stream.
//!
//! Each stream has one task. It subscribes to the state machine's broadcast of applied revisions
//! before anything else, so no revision can slip between a watch's catch-up from history and its
//! live events: catch-up reads history up to the current revision under the state machine's lock
//! (no revision is applied meanwhile) and the live events at or below it are skipped.
//!
//! A slow client never slows the store or other watchers: the broadcast keeps a bounded number of
//! revisions, and a stream that falls further behind is told it *lagged*; its watches then catch
//! up from history, like etcd's unsynced watchers. Memory stays bounded either way.
//!
//! A snapshot from the leader replaces the key space without broadcasting the revisions it
//! brought; its marker makes every watch catch up from history the same way (etcd's
//! `watchableStore.Restore`). A watch whose start revision is still ahead waits for it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use proto::etcd::*;
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use crate::apply::WatchBatch;
use crate::error::Error;
use crate::mvcc::in_range;
use crate::server::Node;

pub struct WatchService {
    pub node: Node,
}

/// Most events in one response when catching up from history.
const MAX_EVENTS_PER_RESPONSE: usize = 1000;

struct Watcher {
    key: Vec<u8>,
    range_end: Vec<u8>,
    prev_kv: bool,
    no_put: bool,
    no_delete: bool,
    progress_notify: bool,
    /// The first revision this watcher has not been sent yet.
    next_rev: i64,
}

impl Watcher {
    fn wants(&self, ev: &PbEvent) -> bool {
        let Some(kv) = &ev.kv else { return false };
        let filtered = (ev.r#type == event_type::PUT && self.no_put) || (ev.r#type == event_type::DELETE && self.no_delete);
        !filtered && in_range(&kv.key, &self.key, &self.range_end)
    }

    fn shape(&self, ev: &PbEvent) -> PbEvent {
        let mut ev = ev.clone();
        if !self.prev_kv {
            ev.prev_kv = None;
        }
        ev
    }
}

struct WatchStream {
    node: Node,
    tx: mpsc::Sender<Result<PbWatchResponse, Status>>,
    watches: BTreeMap<i64, Watcher>,
    next_id: i64,
}

/// The client went away: the stream's task ends.
struct Gone;

impl WatchStream {
    async fn send(&self, resp: PbWatchResponse) -> Result<(), Gone> {
        self.tx.send(Ok(resp)).await.map_err(|_| Gone)
    }

    async fn run(mut self, mut input: Streaming<PbWatchRequest>, mut events: broadcast::Receiver<Arc<WatchBatch>>) {
        let interval = self.node.config().watch_progress_notify_interval;
        let mut progress = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval.max(Duration::from_millis(10)));
        loop {
            let r = tokio::select! {
                req = input.message() => match req {
                    Ok(Some(req)) => self.handle(req).await,
                    _ => return,
                },
                batch = events.recv() => match batch {
                    Ok(batch) if batch.restored => self.catch_up_all().await,
                    Ok(batch) => self.dispatch(&batch).await,
                    Err(broadcast::error::RecvError::Lagged(_)) => self.catch_up_all().await,
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                _ = progress.tick() => self.progress_notify().await,
            };
            if r.is_err() {
                return;
            }
        }
    }

    async fn handle(&mut self, req: PbWatchRequest) -> Result<(), Gone> {
        match req.request_union {
            Some(PbWatchRequestUnion::CreateRequest(c)) => {
                let id = if c.watch_id != 0 { c.watch_id } else { self.auto_id() };
                if self.watches.contains_key(&id) {
                    let rev = self.current_revision();
                    return self
                        .send(PbWatchResponse {
                            header: self.node.header(rev),
                            watch_id: id,
                            created: true,
                            canceled: true,
                            cancel_reason: "etcdserver: duplicate watch ID".into(),
                            ..Default::default()
                        })
                        .await;
                }
                let w = Watcher {
                    key: c.key,
                    range_end: c.range_end,
                    prev_kv: c.prev_kv,
                    no_put: c.filters.contains(&filter_type::NOPUT),
                    no_delete: c.filters.contains(&filter_type::NODELETE),
                    progress_notify: c.progress_notify,
                    next_rev: c.start_revision,
                };
                self.create(id, w).await
            }
            Some(PbWatchRequestUnion::CancelRequest(c)) => {
                self.watches.remove(&c.watch_id);
                let rev = self.current_revision();
                self.send(PbWatchResponse { header: self.node.header(rev), watch_id: c.watch_id, canceled: true, ..Default::default() })
                    .await
            }
            Some(PbWatchRequestUnion::ProgressRequest(_)) => {
                let rev = self.watches.values().map(|w| w.next_rev - 1).min().unwrap_or_else(|| self.current_revision());
                self.send(PbWatchResponse { header: self.node.header(rev), watch_id: -1, ..Default::default() }).await
            }
            None => Ok(()),
        }
    }

    fn auto_id(&mut self) -> i64 {
        while self.watches.contains_key(&self.next_id) {
            self.next_id += 1;
        }
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn current_revision(&self) -> i64 {
        self.node.state_machine().read().expect("state machine lock").kv.current_revision()
    }

    async fn create(&mut self, id: i64, mut w: Watcher) -> Result<(), Gone> {
        // Catch up from history under the lock: no revision is applied meanwhile.
        let (current, history) = {
            let sm = self.node.state_machine().read().expect("state machine lock");
            let current = sm.kv.current_revision();
            let history = if w.next_rev > 0 && w.next_rev <= current {
                // INJECTED BUG, for the robustness tests only (`failpoints` feature, set with
                // `bugWatchSkip=return`): an off-by-one, the catch-up from history starts one
                // revision after the watch's start revision, whose events are never sent.
                let from = if injected_bug!("bugWatchSkip") { w.next_rev + 1 } else { w.next_rev };
                Some(sm.kv.events_between(from, current, &w.key, &w.range_end))
            } else {
                None
            };
            (current, history)
        };
        self.send(PbWatchResponse { header: self.node.header(current), watch_id: id, created: true, ..Default::default() })
            .await?;
        match history {
            Some(Err(Error::Compacted { compact_revision })) => {
                return self.send_compacted(id, current, compact_revision).await;
            }
            Some(Ok(events)) => {
                let events: Vec<PbEvent> = events.iter().filter(|e| w.wants(e)).map(|e| w.shape(e)).collect();
                self.send_events(id, current, events).await?;
                w.next_rev = current + 1;
            }
            Some(Err(_)) => unreachable!("events_between only fails with Compacted"),
            None if w.next_rev <= 0 => w.next_rev = current + 1,
            None => {} // a future start revision: live events from it on
        }
        self.watches.insert(id, w);
        Ok(())
    }

    async fn send_compacted(&self, id: i64, current: i64, compact_revision: i64) -> Result<(), Gone> {
        self.send(PbWatchResponse {
            header: self.node.header(current),
            watch_id: id,
            canceled: true,
            compact_revision,
            cancel_reason: Error::Compacted { compact_revision }.to_string(),
            ..Default::default()
        })
        .await
    }

    /// Sends events in responses of bounded size, never splitting one revision.
    async fn send_events(&self, id: i64, rev: i64, events: Vec<PbEvent>) -> Result<(), Gone> {
        let mut chunk: Vec<PbEvent> = Vec::new();
        for ev in events {
            let ev_rev = ev.kv.as_ref().map_or(0, |kv| kv.mod_revision);
            let last_rev = chunk.last().and_then(|e| e.kv.as_ref()).map_or(0, |kv| kv.mod_revision);
            if chunk.len() >= MAX_EVENTS_PER_RESPONSE && ev_rev != last_rev {
                let events = std::mem::take(&mut chunk);
                self.send(PbWatchResponse { header: self.node.header(rev), watch_id: id, events, ..Default::default() }).await?;
            }
            chunk.push(ev);
        }
        if !chunk.is_empty() {
            self.send(PbWatchResponse { header: self.node.header(rev), watch_id: id, events: chunk, ..Default::default() })
                .await?;
        }
        Ok(())
    }

    async fn dispatch(&mut self, batch: &WatchBatch) -> Result<(), Gone> {
        let mut out = Vec::new();
        for (id, w) in self.watches.iter_mut() {
            if batch.revision < w.next_rev {
                continue;
            }
            w.next_rev = batch.revision + 1;
            let events: Vec<PbEvent> = batch.events.iter().filter(|e| w.wants(e)).map(|e| w.shape(e)).collect();
            if !events.is_empty() {
                out.push(PbWatchResponse { header: self.node.header(batch.revision), watch_id: *id, events, ..Default::default() });
            }
        }
        for resp in out {
            self.send(resp).await?;
        }
        Ok(())
    }

    /// The stream fell too far behind the broadcast, or a snapshot replaced the key space:
    /// every watch catches up from history. One whose start revision is still ahead keeps
    /// waiting for it.
    async fn catch_up_all(&mut self) -> Result<(), Gone> {
        let ids: Vec<i64> = self.watches.keys().copied().collect();
        for id in ids {
            let (current, result) = {
                let w = &self.watches[&id];
                let sm = self.node.state_machine().read().expect("state machine lock");
                let current = sm.kv.current_revision();
                if w.next_rev > current {
                    continue;
                }
                // The same injected bug as `create`'s (tests only): the revision the stream
                // resumes at is skipped.
                let from = if injected_bug!("bugWatchSkip") { w.next_rev + 1 } else { w.next_rev };
                (current, sm.kv.events_between(from, current, &w.key, &w.range_end))
            };
            match result {
                Ok(events) => {
                    let w = self.watches.get_mut(&id).expect("present");
                    w.next_rev = current + 1;
                    let events: Vec<PbEvent> = events.iter().filter(|e| w.wants(e)).map(|e| w.shape(e)).collect();
                    self.send_events(id, current, events).await?;
                }
                Err(Error::Compacted { compact_revision }) => {
                    self.watches.remove(&id);
                    self.send_compacted(id, current, compact_revision).await?;
                }
                Err(_) => unreachable!("events_between only fails with Compacted"),
            }
        }
        Ok(())
    }

    async fn progress_notify(&self) -> Result<(), Gone> {
        for (id, w) in &self.watches {
            if w.progress_notify {
                self.send(PbWatchResponse { header: self.node.header(w.next_rev - 1), watch_id: *id, ..Default::default() })
                    .await?;
            }
        }
        Ok(())
    }
}

#[tonic::async_trait]
impl PbWatchService for WatchService {
    type WatchStream = ReceiverStream<Result<PbWatchResponse, Status>>;

    async fn watch(&self, req: Request<Streaming<PbWatchRequest>>) -> Result<Response<Self::WatchStream>, Status> {
        super::refuse_learner(&self.node)?;
        let input = req.into_inner();
        let (tx, rx) = mpsc::channel(256);
        let events = self.node.state_machine().read().expect("state machine lock").subscribe();
        let stream = WatchStream { node: self.node.clone(), tx, watches: BTreeMap::new(), next_id: 0 };
        tokio::spawn(stream.run(input, events));
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}
