//! Mirrors k8s.io/apiserver/pkg/storage/cacher: one store watch per resource type, fanned out to
//! every HTTP watcher.
//!
//! The cache lists its prefix once, then follows a single store watch, keeping the current
//! objects and a window of recent events. A thousand watchers of pods cost the store one watch.
//! A watcher starting at resourceVersion N gets the events after N from the window (or 410 Gone
//! when N is older than the window), then live events. Each watcher has a bounded queue: one that
//! does not keep up is cut off (its stream ends; the client re-watches from its last version),
//! so it can neither block the others nor grow memory.
//!
//! When the store watch breaks (a store member restarts, a leader changes, the connection drops),
//! the cache watches again from the revision after the last one it holds: the store replays what
//! happened meanwhile, so watchers see every change exactly once and never notice. Only when that
//! history is gone (compacted) does it list again, as the cacher's reflector does; a relist cannot
//! say what happened in between, so every watcher is ended (the cacher's `terminateAllWatchers`)
//! and the window starts afresh at the list's revision: a client that resumes from before it gets
//! an honest 410 Gone and lists, rather than a summary of the gap posing as its history.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use etcd_client::EventType as StoreEvent;
use serde_json::Value;
use tokio::sync::{Notify, mpsc};

use crate::error::{Error, Result};
use super::store::{Storage, with_resource_version};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

#[derive(Debug)]
pub struct WatchEvent {
    pub kind: EventType,
    pub object: Arc<Value>,
    /// The object before this change, for selectors that stop or start matching.
    pub prev: Option<Arc<Value>>,
    pub revision: i64,
    /// The event as a JSON watch line, encoded once however many watchers receive it (the
    /// cacher's `cachingObject` does the same).
    pub line: std::sync::OnceLock<bytes::Bytes>,
}

impl WatchEvent {
    pub fn new(kind: EventType, object: Arc<Value>, prev: Option<Arc<Value>>, revision: i64) -> Self {
        Self { kind, object, prev, revision, line: std::sync::OnceLock::new() }
    }

    /// `{"type": ..., "object": ...}` and a newline, encoded on first use.
    pub fn json_line(&self) -> bytes::Bytes {
        self.line
            .get_or_init(|| {
                let mut v = format!("{{\"type\":\"{}\",\"object\":", self.kind.as_str()).into_bytes();
                let _ = serde_json::to_writer(&mut v, &*self.object);
                v.extend_from_slice(b"}\n");
                bytes::Bytes::from(v)
            })
            .clone()
    }
}

/// Which objects a watcher wants; evaluated on the object and its previous state.
pub type Filter = Arc<dyn Fn(&Value) -> bool + Send + Sync>;

struct Watcher {
    tx: mpsc::Sender<Arc<WatchEvent>>,
    filter: Filter,
}

struct State {
    objects: BTreeMap<String, (Arc<Value>, i64)>,
    events: VecDeque<Arc<WatchEvent>>,
    /// Every change up to this store revision is reflected in `objects`.
    revision: i64,
    /// `events` holds every change after this revision: a watcher may resume from here on.
    window_start: i64,
    ready: bool,
    watchers: Vec<Watcher>,
}

pub struct WatchCache {
    pub resource: &'static str,
    prefix: String,
    capacity: usize,
    queue: usize,
    state: RwLock<State>,
    updated: Notify,
    /// Asks the sync loop for a progress notification now (a reader waits for a revision).
    progress_wanted: Notify,
}

/// What a new watcher receives first, and where live events arrive.
pub struct Subscription {
    pub initial: Vec<Arc<WatchEvent>>,
    pub revision: i64,
    pub events: mpsc::Receiver<Arc<WatchEvent>>,
}

/// Why [`WatchCache::follow`] stopped.
enum Lost {
    /// The store no longer has the history after the cache's revision: list again.
    Compacted(Error),
    /// The watch broke (connection, member restart, leader change); whether it had delivered
    /// anything first (then the next attempt starts without backoff).
    Broken(Error, bool),
}

impl WatchCache {
    /// `capacity`: events kept for watchers that resume; `queue`: events a watcher may lag.
    pub fn new(resource: &'static str, prefix: String, capacity: usize, queue: usize) -> Arc<Self> {
        Arc::new(Self {
            resource,
            prefix,
            capacity,
            queue,
            state: RwLock::new(State {
                objects: BTreeMap::new(),
                events: VecDeque::new(),
                revision: 0,
                window_start: 0,
                ready: false,
                watchers: Vec::new(),
            }),
            updated: Notify::new(),
            progress_wanted: Notify::new(),
        })
    }

    /// Follows the store forever: list, then watch; when the watch breaks, watch again from the
    /// revision after the cache's; list again only when the store no longer has that history.
    pub async fn run(self: Arc<Self>, storage: Storage) {
        let mut backoff = Duration::from_millis(100);
        // The revision the cache holds every change up to, once listed: a watch resumes after it.
        let mut resume: Option<i64> = None;
        loop {
            let from = match resume {
                Some(rev) => rev,
                None => match self.relist(&storage).await {
                    Ok(rev) => rev,
                    Err(e) => {
                        tracing::warn!(target: "apiserver::watch_cache", resource = self.resource, error = %e, "listing the store failed; retrying");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(2));
                        continue;
                    }
                },
            };
            match self.follow(&storage, from).await {
                Lost::Compacted(e) => {
                    tracing::warn!(target: "apiserver::watch_cache", resource = self.resource, revision = from, error = %e, "the store's history is compacted past the cache; relisting and ending every watcher");
                    resume = None;
                }
                Lost::Broken(e, delivered) => {
                    let at = self.revision();
                    tracing::warn!(target: "apiserver::watch_cache", resource = self.resource, error = %e, resume_after = at, "store watch lost; watching again from where the cache is");
                    resume = Some(at);
                    if delivered {
                        backoff = Duration::from_millis(100);
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
            }
        }
    }

    /// Lists the prefix and replaces the cache with it; returns the list's revision.
    async fn relist(&self, storage: &Storage) -> Result<i64> {
        let list = storage.list_for_cache(&self.prefix).await?;
        self.replace(list.items.into_iter().map(|s| (s.key, s.value, s.mod_revision)).collect(), list.revision);
        Ok(list.revision)
    }

    /// Applies the store's events after `from` until the watch breaks.
    async fn follow(&self, storage: &Storage, from: i64) -> Lost {
        let mut stream = match storage.watch(&self.prefix, from + 1).await {
            Ok(s) => s,
            Err(e) => return Lost::Broken(e, false),
        };
        let mut delivered = false;
        // etcd before 3.4.31/3.5.13 may answer a progress request on a watch still catching up
        // with the store's current revision, ahead of events it has yet to send (etcd #15220): the
        // cache would claim, and resume after, a revision whose events it never got. There, as
        // Kubernetes does, no progress is requested; the store's own periodic notifications,
        // sent only to watches that have caught up, still advance it.
        let request_progress = storage.progress_notify_reliable().await;
        let mut progress = tokio::time::interval(Duration::from_secs(5));
        loop {
            tokio::select! {
                msg = stream.message() => {
                    let resp = match msg {
                        Ok(Some(resp)) => resp,
                        Ok(None) => return Lost::Broken(Error::Unavailable("store watch ended".into()), delivered),
                        Err(e) => return Lost::Broken(e.into(), delivered),
                    };
                    if resp.canceled() {
                        let e = Error::Unavailable(format!("store watch cancelled: {}", resp.cancel_reason()));
                        // etcd cancels a watch whose start revision is compacted, naming the
                        // compaction revision.
                        return if resp.compact_revision() > 0 { Lost::Compacted(e) } else { Lost::Broken(e, delivered) };
                    }
                    delivered = true;
                    let rev = resp.header().map_or(0, |h| h.revision());
                    if resp.created() {
                        // Its revision is the store's at creation: the events up to it are still
                        // to come, so it says nothing yet about this cache's progress.
                        continue;
                    }
                    if resp.events().is_empty() {
                        self.advance(rev); // a progress notification
                        continue;
                    }
                    for e in resp.events() {
                        let Some(kv) = e.kv() else { continue };
                        let key = String::from_utf8_lossy(kv.key()).into_owned();
                        let rev = kv.mod_revision();
                        match e.event_type() {
                            // Transformed from storage (decrypted) as a get's value is.
                            StoreEvent::Put => match storage.decode(kv.key(), kv.value(), rev) {
                                Ok(stored) => self.apply(key, Some(stored.value), rev),
                                Err(err) => tracing::error!(target: "apiserver::watch_cache", key, error = %err, "undecodable object skipped"),
                            },
                            StoreEvent::Delete => self.apply(key, None, rev),
                        }
                    }
                }
                _ = self.progress_wanted.notified(), if request_progress => {
                    let _ = stream.request_progress().await;
                }
                _ = progress.tick(), if request_progress => {
                    // Ask for the store's revision so bookmarks and "not older than" lists advance
                    // even when this resource does not change.
                    let _ = stream.request_progress().await;
                }
            }
        }
    }

    /// Replaces the whole state after a (re)list (the watch cache's Replace): the window starts
    /// afresh at `revision` and every watcher is ended, since what changed before it is unknown.
    fn replace(&self, items: Vec<(String, Value, i64)>, revision: i64) {
        let mut st = self.state.write().expect("watch cache lock");
        let mut fresh: BTreeMap<String, (Arc<Value>, i64)> = BTreeMap::new();
        for (k, v, r) in items {
            fresh.insert(k, (Arc::new(v), r));
        }
        if !st.watchers.is_empty() {
            tracing::info!(target: "apiserver::watch_cache", resource = self.resource, watchers = st.watchers.len(), revision, "relisted: ending every watcher");
        }
        // Dropping a watcher's sender ends its HTTP stream; the client watches again from its last
        // version and, that being before the new window, is told 410 Gone.
        st.watchers.clear();
        st.events.clear();
        st.window_start = revision;
        st.objects = fresh;
        st.revision = revision;
        st.ready = true;
        drop(st);
        self.updated.notify_waiters();
    }

    fn apply(&self, key: String, object: Option<Value>, revision: i64) {
        let mut st = self.state.write().expect("watch cache lock");
        let prev = st.objects.get(&key).map(|(v, _)| v.clone());
        let event = match object {
            Some(v) => {
                let v = Arc::new(v);
                st.objects.insert(key, (v.clone(), revision));
                let kind = if prev.is_some() { EventType::Modified } else { EventType::Added };
                WatchEvent::new(kind, v, prev, revision)
            }
            None => {
                st.objects.remove(&key);
                let Some(prev) = prev else { return };
                // A deleted object carries the revision of its deletion.
                let gone = with_resource_version((*prev).clone(), revision);
                WatchEvent::new(EventType::Deleted, Arc::new(gone), Some(prev), revision)
            }
        };
        st.revision = st.revision.max(revision);
        Self::publish(&mut st, Arc::new(event), self.capacity);
        drop(st);
        self.updated.notify_waiters();
    }

    fn advance(&self, revision: i64) {
        let mut st = self.state.write().expect("watch cache lock");
        if revision > st.revision {
            st.revision = revision;
        }
        drop(st);
        self.updated.notify_waiters();
    }

    fn publish(st: &mut State, e: Arc<WatchEvent>, capacity: usize) {
        st.watchers.retain(|w| {
            if !(w.filter)(&e.object) && !e.prev.as_ref().is_some_and(|p| (w.filter)(p)) {
                return !w.tx.is_closed();
            }
            // A full queue means the watcher cannot keep up: cut it off.
            w.tx.try_send(e.clone()).is_ok()
        });
        st.events.push_back(e);
        while st.events.len() > capacity {
            if let Some(gone) = st.events.pop_front() {
                st.window_start = st.window_start.max(gone.revision);
            }
        }
    }

    /// Waits until the cache is at least at `revision` (bounded).
    pub async fn wait_until(&self, revision: i64) -> Result<()> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
        loop {
            let notified = self.updated.notified();
            {
                let st = self.state.read().expect("watch cache lock");
                if st.ready && st.revision >= revision {
                    return Ok(());
                }
            }
            // The store's revision may have moved through other resources' writes: ask the store
            // where this watch stands rather than wait for the next periodic progress.
            self.progress_wanted.notify_one();
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Err(Error::too_many_requests(format!(
                    "Too large resource version: {revision}, current: {}",
                    self.revision()
                )));
            }
            let _ = tokio::time::timeout_at(deadline.min(now + Duration::from_millis(50)), notified).await;
        }
    }

    pub fn revision(&self) -> i64 {
        self.state.read().expect("watch cache lock").revision
    }

    pub fn is_ready(&self) -> bool {
        self.state.read().expect("watch cache lock").ready
    }

    /// One object by its store key, if the cache has it.
    pub fn get(&self, key: &str) -> Option<Arc<Value>> {
        let st = self.state.read().expect("watch cache lock");
        if !st.ready {
            return None;
        }
        st.objects.get(key).map(|(v, _)| v.clone())
    }

    /// The objects matching `filter`, with the cache's revision.
    pub fn list(&self, filter: &dyn Fn(&Value) -> bool) -> (Vec<Arc<Value>>, i64) {
        let st = self.state.read().expect("watch cache lock");
        (st.objects.values().filter(|(v, _)| filter(v)).map(|(v, _)| v.clone()).collect(), st.revision)
    }

    /// Visits the objects whose keys start with `prefix` (one namespace's), in key order, under
    /// the cache's read lock, until `visit` returns false. Nothing when the cache is not ready.
    /// For readers on every request (the RBAC authorizer): no object is cloned.
    pub fn visit_prefix(&self, prefix: &str, visit: &mut dyn FnMut(&Value) -> bool) {
        let st = self.state.read().expect("watch cache lock");
        if !st.ready {
            return;
        }
        for (key, (object, _)) in st.objects.range::<str, _>((std::ops::Bound::Included(prefix), std::ops::Bound::Unbounded)) {
            if !key.starts_with(prefix) || !visit(object) {
                break;
            }
        }
    }

    /// Starts a watcher after `revision` (None: the current state as ADDED events first).
    pub fn subscribe(&self, revision: Option<i64>, filter: Filter) -> Result<Subscription> {
        let mut st = self.state.write().expect("watch cache lock");
        if !st.ready {
            return Err(Error::Unavailable(format!("the {} cache is not ready yet", self.resource)));
        }
        let (tx, rx) = mpsc::channel(self.queue);
        let initial: Vec<Arc<WatchEvent>> = match revision {
            None => st
                .objects
                .values()
                .filter(|(v, _)| filter(v))
                .map(|(v, r)| Arc::new(WatchEvent::new(EventType::Added, v.clone(), None, *r)))
                .collect(),
            Some(rv) => {
                // Events after `rv` must all still be in the window.
                if rv < st.window_start {
                    return Err(Error::Expired { requested: rv, oldest: st.window_start });
                }
                st.events
                    .iter()
                    .filter(|e| e.revision > rv)
                    .filter(|e| filter(&e.object) || e.prev.as_ref().is_some_and(|p| filter(p)))
                    .cloned()
                    .collect()
            }
        };
        let revision = st.revision;
        st.watchers.push(Watcher { tx, filter });
        Ok(Subscription { initial, revision, events: rx })
    }

    pub fn watcher_count(&self) -> usize {
        self.state.read().expect("watch cache lock").watchers.len()
    }
}

/// What a watcher should be told about an event, given its filter: objects that start matching
/// are ADDED, objects that stop matching are DELETED (as the cacher does).
pub fn event_for(e: &WatchEvent, filter: &dyn Fn(&Value) -> bool) -> Option<EventType> {
    let now = filter(&e.object);
    let before = e.prev.as_ref().is_some_and(|p| filter(p));
    match (e.kind, before, now) {
        (EventType::Deleted, true, _) => Some(EventType::Deleted),
        (EventType::Deleted, false, _) => None,
        (_, false, true) => Some(EventType::Added),
        (_, true, true) => Some(e.kind),
        (_, true, false) => Some(EventType::Deleted),
        (_, false, false) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, app: &str) -> Value {
        json!({"metadata": {"name": name, "labels": {"app": app}}})
    }

    fn app_is(app: &'static str) -> Filter {
        Arc::new(move |v: &Value| v["metadata"]["labels"]["app"] == app)
    }

    #[tokio::test]
    async fn watchers_resume_from_the_window_or_get_410() {
        let c = WatchCache::new("pods", "/p/".into(), 3, 10);
        c.replace(vec![], 10);
        for (i, n) in ["a", "b", "c", "d"].iter().enumerate() {
            c.apply(format!("/p/{n}"), Some(pod(n, "web")), 11 + i as i64);
        }
        // The window holds revisions 12..=14.
        let s = c.subscribe(Some(11), app_is("web")).unwrap();
        assert_eq!(s.initial.iter().map(|e| e.revision).collect::<Vec<_>>(), vec![12, 13, 14]);
        assert!(matches!(c.subscribe(Some(10), app_is("web")), Err(Error::Expired { .. })));
        let s = c.subscribe(None, app_is("web")).unwrap();
        assert_eq!(s.initial.len(), 4);
        assert!(s.initial.iter().all(|e| e.kind == EventType::Added));
    }

    #[tokio::test]
    async fn a_watcher_that_does_not_keep_up_is_cut_off_and_others_continue() {
        let c = WatchCache::new("pods", "/p/".into(), 100, 2);
        c.replace(vec![], 1);
        let mut fast = c.subscribe(Some(1), app_is("web")).unwrap();
        let slow = c.subscribe(Some(1), app_is("web")).unwrap();
        for i in 0..5 {
            c.apply(format!("/p/{i}"), Some(pod(&i.to_string(), "web")), 2 + i);
            assert!(fast.events.recv().await.is_some());
        }
        assert_eq!(c.watcher_count(), 1, "the slow watcher was dropped");
        drop(slow);
    }

    #[test]
    fn selector_transitions_become_added_and_deleted() {
        let web = app_is("web");
        let e = |kind, prev: Option<Value>, now: Value| WatchEvent::new(kind, Arc::new(now), prev.map(Arc::new), 1);
        assert_eq!(event_for(&e(EventType::Modified, Some(pod("x", "db")), pod("x", "web")), &*web), Some(EventType::Added));
        assert_eq!(event_for(&e(EventType::Modified, Some(pod("x", "web")), pod("x", "db")), &*web), Some(EventType::Deleted));
        assert_eq!(event_for(&e(EventType::Modified, Some(pod("x", "db")), pod("x", "db")), &*web), None);
        assert_eq!(event_for(&e(EventType::Deleted, Some(pod("x", "web")), pod("x", "web")), &*web), Some(EventType::Deleted));
    }

    #[tokio::test]
    async fn a_relist_ends_every_watcher_and_starts_a_new_window() {
        let c = WatchCache::new("pods", "/p/".into(), 100, 10);
        c.replace(vec![("/p/a".into(), pod("a", "web"), 2), ("/p/b".into(), pod("b", "web"), 3)], 3);
        c.apply("/p/a".into(), Some(pod("a", "web")), 4);
        let mut s = c.subscribe(Some(3), app_is("web")).unwrap();
        assert_eq!(s.initial.len(), 1);
        // History lost: the store's state at 7 says nothing of what happened between 4 and 7.
        c.replace(vec![("/p/b".into(), pod("b", "web"), 5), ("/p/c".into(), pod("c", "web"), 6)], 7);
        assert!(s.events.recv().await.is_none(), "a watcher outlived the relist");
        assert_eq!(c.watcher_count(), 0);
        assert!(matches!(c.subscribe(Some(4), app_is("web")), Err(Error::Expired { requested: 4, oldest: 7 })));
        let s = c.subscribe(Some(7), app_is("web")).unwrap();
        assert!(s.initial.is_empty());
        let (items, rev) = c.list(&|_| true);
        assert_eq!((items.len(), rev), (2, 7));
    }
}
