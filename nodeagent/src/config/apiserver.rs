//! Mirrors kubelet's config/apiserver.go: the pods the API server has bound to this node.
//!
//! A list and watch of pods with the field selector `spec.nodeName=<node>` (kube's `watcher`:
//! it relists after errors and "410 Gone", with backoff) feeds a local map of UID → pod. After a
//! change the source sends the whole map as one snapshot, batched: it waits until the watch has
//! been quiet for [`BATCH_QUIET`] (at most [`BATCH_MAX_DELAY`] after the first change), so that a
//! burst — the initial list, a Deployment scaled to fifty — is one snapshot, not fifty. A relist
//! is applied as a whole once it is complete (`InitDone`), so a pod deleted while the watch was
//! down disappears then.
//!
//! When the API server is away the watcher's errors are logged at warn once per outage and the
//! last set stands: an error never turns into an empty snapshot, which would stop every pod on
//! the node.

use std::collections::BTreeMap;
use std::time::Duration;

use api::pod::kubelet_types::APISERVER_SOURCE;
use api::pod::uid;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::{Outage, SourceUpdate};

/// How long the watch must be quiet before a snapshot is sent.
pub(crate) const BATCH_QUIET: Duration = Duration::from_millis(10);
/// The longest a change waits for quiet: a steady trickle of events still gets through.
pub(crate) const BATCH_MAX_DELAY: Duration = Duration::from_millis(100);

/// Runs the API server source until `shutdown` turns true or the merger is gone.
pub(crate) async fn run(client: kube::Client, node_name: String, tx: mpsc::Sender<SourceUpdate>, mut shutdown: watch::Receiver<bool>) {
    let api: Api<Pod> = Api::all(client);
    let config = watcher::Config::default().fields(&format!("spec.nodeName={node_name}"));
    let mut stream = watcher(api, config).default_backoff().boxed();
    let mut pods: BTreeMap<String, Pod> = BTreeMap::new();
    // A relist in progress: replaces `pods` once complete.
    let mut relist: Option<BTreeMap<String, Pod>> = None;
    let mut outage = Outage::default();
    // When the pending snapshot is due: the first change's time plus the max delay, and the
    // latest change's time plus the quiet period.
    let mut pending: Option<(Instant, Instant)> = None;
    loop {
        let due = pending.map(|(first, last)| (first + BATCH_MAX_DELAY).min(last + BATCH_QUIET));
        tokio::select! {
            ev = stream.next() => {
                let Some(ev) = ev else { return };
                let changed = match ev {
                    Ok(ev) => {
                        if outage.recovered() {
                            tracing::info!(target: "kubelet::config", source = APISERVER_SOURCE, "pod watch reconnected");
                        }
                        apply_event(&mut pods, &mut relist, ev)
                    }
                    Err(e) => {
                        if outage.failed() {
                            tracing::warn!(target: "kubelet::config", source = APISERVER_SOURCE, error = %e, "pod watch failed; keeping the pods known so far and retrying");
                        }
                        false
                    }
                };
                if changed {
                    let now = Instant::now();
                    pending = Some(pending.map_or((now, now), |(first, _)| (first, now)));
                }
            }
            () = sleep_until(due) => {
                pending = None;
                let snapshot: Vec<Pod> = pods.values().cloned().collect();
                tracing::debug!(target: "kubelet::config", source = APISERVER_SOURCE, pods = snapshot.len(), "snapshot");
                if tx.send(SourceUpdate { source: APISERVER_SOURCE, pods: snapshot }).await.is_err() {
                    return;
                }
            }
            _ = shutdown.changed() => {
                if *shutdown.borrow() {
                    return;
                }
            }
        }
    }
}

async fn sleep_until(due: Option<Instant>) {
    match due {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// Applies one watcher event to the map; true when a snapshot is due. A completed relist always
/// is (even an empty one: the source must report once, and an empty node is a real answer).
fn apply_event(pods: &mut BTreeMap<String, Pod>, relist: &mut Option<BTreeMap<String, Pod>>, ev: watcher::Event<Pod>) -> bool {
    match ev {
        watcher::Event::Init => {
            *relist = Some(BTreeMap::new());
            false
        }
        watcher::Event::InitApply(p) => {
            relist.get_or_insert_with(BTreeMap::new).insert(uid(&p).to_string(), p);
            false
        }
        watcher::Event::InitDone => {
            *pods = relist.take().unwrap_or_default();
            true
        }
        watcher::Event::Apply(p) => {
            let id = uid(&p).to_string();
            let changed = pods.get(&id) != Some(&p);
            pods.insert(id, p);
            changed
        }
        watcher::Event::Delete(p) => pods.remove(uid(&p)).is_some(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(uid: &str, rv: &str) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": uid, "uid": uid, "resourceVersion": rv}})).expect("pod")
    }

    #[test]
    fn events_and_relists() {
        let mut pods = BTreeMap::new();
        let mut relist = None;
        assert!(!apply_event(&mut pods, &mut relist, watcher::Event::Init));
        assert!(!apply_event(&mut pods, &mut relist, watcher::Event::InitApply(pod("a", "1"))));
        assert!(pods.is_empty(), "a relist is applied only once complete");
        assert!(apply_event(&mut pods, &mut relist, watcher::Event::InitDone));
        assert_eq!(pods.keys().collect::<Vec<_>>(), vec!["a"]);

        assert!(apply_event(&mut pods, &mut relist, watcher::Event::Apply(pod("b", "2"))));
        assert!(!apply_event(&mut pods, &mut relist, watcher::Event::Apply(pod("b", "2"))), "the same object again");
        assert!(apply_event(&mut pods, &mut relist, watcher::Event::Apply(pod("b", "3"))));
        assert!(apply_event(&mut pods, &mut relist, watcher::Event::Delete(pod("a", "4"))));
        assert!(!apply_event(&mut pods, &mut relist, watcher::Event::Delete(pod("a", "4"))));

        // A relist after an outage drops what was deleted meanwhile, even to empty.
        apply_event(&mut pods, &mut relist, watcher::Event::Init);
        assert!(apply_event(&mut pods, &mut relist, watcher::Event::InitDone));
        assert!(pods.is_empty());
    }
}
