//! Mirrors pkg/controller/disruption/disruption.go: keeps each PodDisruptionBudget's status —
//! how many of its pods are healthy, how many must be, and so how many may be disrupted now —
//! which the API server's eviction subresource reads and decrements
//! (`apiserver/src/registry/core/pod/eviction.rs`).
//!
//! For each budget (a key in the work queue; budget and pod events add it):
//! 1. Its pods: those of its namespace its selector matches (`{}` every pod, `null` none).
//! 2. How many are expected and how many must stay healthy ([`desired_healthy`]): an integer
//!    `minAvailable` counts the pods themselves; a percentage, or any `maxUnavailable`, is taken
//!    of the replicas their controllers want (a ReplicaSet's, or its Deployment's; a
//!    StatefulSet's; a ReplicationController's), read from the API server.
//! 3. Evictions the API server recorded in `disruptedPods` stay counted as gone for two minutes
//!    ([`DELETION_TIMEOUT`]) unless the pod is seen being deleted ([`build_disrupted_pod_map`]);
//!    the budget is looked at again when the first such entry runs out.
//! 4. Healthy = Ready, not being deleted, not just evicted; `disruptionsAllowed` = healthy −
//!    desired (never below 0, 0 with no expected pods); the `DisruptionAllowed` condition says
//!    SufficientPods or InsufficientPods, and the status is written (through `status`) when it
//!    changed, with `observedGeneration`, which the eviction waits for.
//! 5. When step 2 fails (a pod without a controller, a controller gone) the budget fails safe:
//!    nothing allowed, condition reason SyncFailed, and an event says why.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::ApiResource;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::workqueue::WorkQueue;

/// How long an eviction the API server recorded counts the pod as gone while it is not seen
/// being deleted (Kubernetes' `DeletionTimeout`).
pub const DELETION_TIMEOUT: Duration = Duration::from_secs(120);
const TARGET: &str = "controllers::disruption";

type Key = (String, String);

pub struct DisruptionController {
    /// Lists and watches for the caches: the controller manager's own client (see
    /// [`crate::controller_context`]).
    informers: kube::Client,
    /// Everything else: the controller's own client.
    client: kube::Client,
    recorder: client::record::EventRecorder,
}

impl DisruptionController {
    pub fn new(informers: kube::Client, client: kube::Client) -> Self {
        let recorder = client::record::EventRecorder::new(client.clone(), "controllermanager", None);
        Self { informers, client, recorder }
    }

    /// Watches budgets and pods into caches; one worker syncs the budgets the events name.
    pub async fn run(self) -> Result<()> {
        let (pdbs, pdbs_w) = reflector::store::<PodDisruptionBudget>();
        let (pods, pods_w) = reflector::store::<Pod>();
        let queue: WorkQueue<Key> = WorkQueue::new();
        let informer_client = self.informers.clone();
        let informers = async {
            let on_pdb = |pdb: &PodDisruptionBudget| queue.add(key_of(&pdb.metadata));
            let on_pod = |pod: &Pod| {
                for pdb in pdbs.state() {
                    if pdb.metadata.namespace == pod.metadata.namespace && selects(&pdb, pod) {
                        queue.add(key_of(&pdb.metadata));
                    }
                }
            };
            tokio::join!(
                drive("poddisruptionbudgets", reflector::reflector(pdbs_w, watcher(Api::<PodDisruptionBudget>::all(informer_client.clone()), watcher::Config::default())), on_pdb),
                drive("pods", reflector::reflector(pods_w, watcher(Api::<Pod>::all(informer_client.clone()), watcher::Config::default())), on_pod),
            );
        };
        let work = async {
            if pdbs.wait_until_ready().await.is_err() || pods.wait_until_ready().await.is_err() {
                return;
            }
            tracing::info!(target: TARGET, "caches synced; keeping disruption budgets' status");
            for pdb in pdbs.state() {
                queue.add(key_of(&pdb.metadata));
            }
            while let Some(key) = queue.get().await {
                match self.sync(&pdbs, &pods, &key).await {
                    Ok(recheck) => {
                        queue.forget(&key);
                        if let Some(after) = recheck {
                            queue.add_after(key.clone(), after);
                        }
                    }
                    Err(e) => {
                        tracing::warn!(target: TARGET, pdb = %format!("{}/{}", key.0, key.1), error = %e, "sync failed; will retry");
                        queue.add_rate_limited(key.clone());
                    }
                }
                queue.done(&key);
            }
        };
        tokio::select! {
            () = informers => {}
            () = work => {}
        }
        Ok(())
    }

    /// Steps 1–5 for one budget; when to look again (a recorded eviction running out).
    async fn sync(&self, pdbs: &Store<PodDisruptionBudget>, pods: &Store<Pod>, key: &Key) -> Result<Option<Duration>> {
        let Some(pdb) = pdbs.get(&reflector::ObjectRef::new(&key.1).within(&key.0)) else { return Ok(None) };
        // Step 1.
        let mine: Vec<std::sync::Arc<Pod>> =
            pods.state().into_iter().filter(|p| p.metadata.namespace.as_deref() == Some(key.0.as_str()) && selects(&pdb, p)).collect();
        if mine.is_empty() {
            self.recorder.event(reference(&pdb), client::record::WARNING, "NoPods", "No matching pods found");
        }
        // Step 2.
        let spec = pdb.spec.clone().unwrap_or_default();
        let needs_scale = spec.max_unavailable.is_some() || matches!(spec.min_available, Some(IntOrString::String(_)));
        let scale = if needs_scale && !mine.is_empty() { self.controllers_scale(&key.0, &mine).await } else { Ok(0) };
        let desired = scale.and_then(|scale| desired_healthy(&spec, mine.len() as i32, scale).map_err(SyncFailure::Message));
        let (expected, desired) = match desired {
            Ok(d) => d,
            Err(failure) => {
                // Step 5.
                let msg = failure.to_string();
                self.recorder.event(reference(&pdb), client::record::WARNING, "CalculateExpectedPodCountFailed", format!("Failed to calculate the number of expected pods: {msg}"));
                return self.fail_safe(&pdb, &msg).await.map(|()| None);
            }
        };
        // Steps 3 and 4.
        let now = Timestamp::now();
        let recorded = pdb.status.as_ref().and_then(|s| s.disrupted_pods.clone()).unwrap_or_default();
        let (disrupted, recheck) = build_disrupted_pod_map(&mine, &recorded, now);
        let healthy = count_healthy(&mine, &disrupted);
        let status = compute_status(&pdb, expected, desired, healthy, disrupted, now);
        if Some(&status) != pdb.status.as_ref() {
            self.write_status(&pdb, status).await?;
        }
        Ok(recheck)
    }

    /// The replicas the pods' controllers want, each controller counted once (the ReplicaSets
    /// of one Deployment are that Deployment).
    async fn controllers_scale(&self, namespace: &str, pods: &[std::sync::Arc<Pod>]) -> std::result::Result<i32, SyncFailure> {
        let mut owners_seen = std::collections::HashSet::new();
        let mut by_controller: BTreeMap<String, i32> = BTreeMap::new();
        for pod in pods {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let Some(owner) = pod.metadata.owner_references.iter().flatten().find(|o| o.controller == Some(true)) else {
                return Err(SyncFailure::Message(format!("found no controller ref for pod \"{name}\"")));
            };
            if !owners_seen.insert(owner.uid.clone()) {
                continue;
            }
            let (uid, replicas) = self.scale_of(namespace, &owner.api_version, &owner.kind, &owner.name, &owner.uid).await?;
            by_controller.insert(uid, replicas);
        }
        Ok(by_controller.values().sum())
    }

    /// Kubernetes' finders: a ReplicaSet (or the Deployment controlling it), a StatefulSet or a
    /// ReplicationController, by name, checked against the owner reference's uid.
    async fn scale_of(&self, namespace: &str, api_version: &str, kind: &str, name: &str, uid: &str) -> std::result::Result<(String, i32), SyncFailure> {
        if !matches!(kind, "ReplicaSet" | "StatefulSet" | "ReplicationController" | "Deployment") {
            return Err(SyncFailure::Message(format!("{kind} {namespace}/{name} is not a controller whose scale is known (ReplicaSet, Deployment, StatefulSet, ReplicationController)")));
        }
        let Some(obj) = self.get(namespace, api_version, kind, name).await? else {
            return Err(SyncFailure::Message(format!("{kind} {namespace}/{name} does not exist")));
        };
        if obj.metadata.uid.as_deref() != Some(uid) {
            return Err(SyncFailure::Message(format!("{kind} {namespace}/{name} has another uid than its pods' owner reference")));
        }
        if kind == "ReplicaSet"
            && let Some(dep) = obj.metadata.owner_references.iter().flatten().find(|o| o.controller == Some(true) && o.kind == "Deployment")
        {
            return Box::pin(self.scale_of(namespace, &dep.api_version, "Deployment", &dep.name, &dep.uid)).await;
        }
        let replicas = obj.data.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1);
        Ok((uid.to_string(), i32::try_from(replicas).unwrap_or(i32::MAX)))
    }

    async fn get(&self, namespace: &str, api_version: &str, kind: &str, name: &str) -> std::result::Result<Option<DynamicObject>, SyncFailure> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let plural = format!("{}s", kind.to_lowercase());
        let ar = ApiResource { group: group.into(), version: version.into(), api_version: api_version.into(), kind: kind.into(), plural };
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), namespace, &ar);
        api.get_opt(name).await.map_err(|e| SyncFailure::Api(Error::Kube(e)))
    }

    /// Step 5: nothing may be disrupted while the budget cannot be computed.
    async fn fail_safe(&self, pdb: &PodDisruptionBudget, message: &str) -> Result<()> {
        let mut status = pdb.status.clone().unwrap_or_default();
        status.disruptions_allowed = Some(0);
        status.observed_generation = pdb.metadata.generation;
        set_condition(&mut status, false, "SyncFailed", message, Timestamp::now());
        if Some(&status) != pdb.status.as_ref() {
            self.write_status(pdb, status).await?;
        }
        Ok(())
    }

    async fn write_status(&self, pdb: &PodDisruptionBudget, status: PodDisruptionBudgetStatus) -> Result<()> {
        let (ns, name) = key_of(&pdb.metadata);
        let api: Api<PodDisruptionBudget> = Api::namespaced(self.client.clone(), &ns);
        let mut updated = pdb.clone();
        tracing::debug!(target: TARGET, pdb = %format!("{ns}/{name}"), allowed = status.disruptions_allowed, healthy = status.current_healthy, desired = status.desired_healthy, expected = status.expected_pods, "status");
        updated.status = Some(status);
        match api.replace_status(&name, &PostParams::default(), &updated).await {
            Ok(_) => Ok(()),
            // The budget changed or went meanwhile: its event brings it back.
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
            Err(e) => Err(Error::Kube(e)),
        }
    }
}

/// Why step 2 failed: a budget that cannot be computed, or the API server away.
#[derive(Debug, thiserror::Error)]
enum SyncFailure {
    #[error("{0}")]
    Message(String),
    #[error(transparent)]
    Api(Error),
}

fn key_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Key {
    (meta.namespace.clone().unwrap_or_default(), meta.name.clone().unwrap_or_default())
}

fn reference(pdb: &PodDisruptionBudget) -> ObjectReference {
    client::record::object_reference("policy/v1", "PodDisruptionBudget", &pdb.metadata)
}

/// Step 1's test: the budget's selector matches the pod's labels (`{}` every pod, `null` or a
/// selector that does not parse none).
fn selects(pdb: &PodDisruptionBudget, pod: &Pod) -> bool {
    let selector = pdb.spec.as_ref().and_then(|s| s.selector.as_ref()).map(|s| serde_json::to_value(s).unwrap_or(Value::Null)).unwrap_or(Value::Null);
    let labels: BTreeMap<String, String> = pod.metadata.labels.clone().unwrap_or_default();
    apimachinery::labels::Selector::from_label_selector(&selector).is_ok_and(|sel| sel.matches(&labels))
}

/// Step 2: (expected pods, desired healthy) from the spec, the number of matching pods and the
/// replicas their controllers want. Percentages of `maxUnavailable` round up, of `minAvailable`
/// round up too (GetScaledValueFromIntOrPercent with roundUp).
pub fn desired_healthy(spec: &k8s_openapi::api::policy::v1::PodDisruptionBudgetSpec, pods: i32, scale: i32) -> std::result::Result<(i32, i32), String> {
    if let Some(max) = &spec.max_unavailable {
        let unavailable = scaled(max, scale)?;
        return Ok((scale, (scale - unavailable).max(0)));
    }
    match &spec.min_available {
        Some(IntOrString::Int(n)) => Ok((pods, *n)),
        Some(min @ IntOrString::String(_)) => Ok((scale, scaled(min, scale)?)),
        None => Ok((0, 0)),
    }
}

fn scaled(v: &IntOrString, total: i32) -> std::result::Result<i32, String> {
    match v {
        IntOrString::Int(n) => Ok(*n),
        IntOrString::String(s) => {
            let pct: i64 = s.strip_suffix('%').and_then(|p| p.parse().ok()).ok_or_else(|| format!("invalid value for IntOrString: invalid value {s:?}: must be an integer or a percentage"))?;
            Ok(i32::try_from((pct * i64::from(total) + 99) / 100).unwrap_or(i32::MAX))
        }
    }
}

/// Step 3: the recorded evictions still counted (pod present, not seen being deleted, recorded
/// less than [`DELETION_TIMEOUT`] ago), and when the first of them runs out.
pub fn build_disrupted_pod_map(pods: &[std::sync::Arc<Pod>], recorded: &BTreeMap<String, Time>, now: Timestamp) -> (BTreeMap<String, Time>, Option<Duration>) {
    let timeout = SignedDuration::try_from(DELETION_TIMEOUT).unwrap_or(SignedDuration::MAX);
    let mut kept = BTreeMap::new();
    let mut recheck: Option<Duration> = None;
    for pod in pods {
        let name = pod.metadata.name.clone().unwrap_or_default();
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let Some(at) = recorded.get(&name) else { continue };
        let expected_deletion = at.0.checked_add(timeout).unwrap_or(at.0);
        if expected_deletion <= now {
            tracing::warn!(target: TARGET, pod = %name, expected = %expected_deletion, "pod was expected to be deleted after its eviction but it wasn't; counting it again");
            continue;
        }
        let left = Duration::try_from(expected_deletion.duration_since(now)).unwrap_or_default();
        recheck = Some(recheck.map_or(left, |r| r.min(left)));
        kept.insert(name, at.clone());
    }
    (kept, recheck)
}

/// Step 4's count: Ready, not being deleted, not just evicted.
pub fn count_healthy(pods: &[std::sync::Arc<Pod>], disrupted: &BTreeMap<String, Time>) -> i32 {
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| !disrupted.contains_key(p.metadata.name.as_deref().unwrap_or_default()))
        .filter(|p| api::pod::is_pod_ready(p))
        .count() as i32
}

/// Step 4: the status to write.
pub fn compute_status(pdb: &PodDisruptionBudget, expected: i32, desired: i32, healthy: i32, disrupted: BTreeMap<String, Time>, now: Timestamp) -> PodDisruptionBudgetStatus {
    let allowed = if expected <= 0 { 0 } else { (healthy - desired).max(0) };
    let mut status = pdb.status.clone().unwrap_or_default();
    status.current_healthy = Some(healthy);
    status.desired_healthy = Some(desired);
    status.expected_pods = Some(expected);
    status.disruptions_allowed = Some(allowed);
    status.disrupted_pods = if disrupted.is_empty() { None } else { Some(disrupted) };
    status.observed_generation = pdb.metadata.generation;
    let (ok, reason) = if allowed > 0 { (true, "SufficientPods") } else { (false, "InsufficientPods") };
    set_condition(&mut status, ok, reason, "", now);
    status
}

/// meta.SetStatusCondition for `DisruptionAllowed`: the transition time moves only with the status.
fn set_condition(status: &mut PodDisruptionBudgetStatus, ok: bool, reason: &str, message: &str, now: Timestamp) {
    let value = if ok { "True" } else { "False" };
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let observed = status.observed_generation;
    match conditions.iter_mut().find(|c| c.type_ == "DisruptionAllowed") {
        Some(c) => {
            if c.status != value {
                c.status = value.into();
                c.last_transition_time = Time(now);
            }
            c.reason = reason.into();
            c.message = message.into();
            c.observed_generation = observed;
        }
        None => conditions.push(Condition {
            type_: "DisruptionAllowed".into(),
            status: value.into(),
            reason: reason.into(),
            message: message.into(),
            observed_generation: observed,
            last_transition_time: Time(now),
        }),
    }
}

/// Runs one informer's stream, calling `on_change` for every object it applies or deletes; the
/// watcher retries by itself (with backoff), errors are logged.
async fn drive<K>(what: &'static str, stream: impl Stream<Item = watcher::Result<watcher::Event<K>>>, on_change: impl Fn(&K)) {
    let mut stream = std::pin::pin!(stream.default_backoff());
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o) | watcher::Event::Delete(o)) => on_change(&o),
            Ok(_) => {}
            Err(e) => tracing::warn!(target: TARGET, resource = what, error = %e, "watch failed; retrying"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::policy::v1::PodDisruptionBudgetSpec;
    use serde_json::json;
    use std::sync::Arc;

    fn spec(v: Value) -> PodDisruptionBudgetSpec {
        serde_json::from_value(v).expect("spec")
    }

    #[test]
    fn desired_healthy_from_each_kind_of_budget() {
        // (spec, matching pods, controllers' replicas) -> (expected, desired)
        let cases = [
            (json!({"minAvailable": 2}), 3, 0, Ok((3, 2))),
            (json!({"minAvailable": "50%"}), 3, 5, Ok((5, 3))),
            (json!({"minAvailable": "100%"}), 3, 3, Ok((3, 3))),
            (json!({"maxUnavailable": 1}), 3, 4, Ok((4, 3))),
            (json!({"maxUnavailable": "25%"}), 3, 5, Ok((5, 3))),
            (json!({"maxUnavailable": 10}), 3, 4, Ok((4, 0))),
            (json!({}), 3, 0, Ok((0, 0))),
        ];
        for (s, pods, scale, want) in cases {
            assert_eq!(desired_healthy(&spec(s.clone()), pods, scale), want, "{s}");
        }
        assert!(desired_healthy(&spec(json!({"maxUnavailable": "x%"})), 3, 3).is_err());
    }

    fn pod(name: &str, ready: bool, deleting: bool) -> Arc<Pod> {
        let mut p = json!({"metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
                           "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}});
        if deleting {
            p["metadata"]["deletionTimestamp"] = json!("2026-12-03T00:00:00Z");
        }
        Arc::new(serde_json::from_value(p).expect("pod"))
    }

    #[test]
    fn recorded_evictions_count_for_two_minutes_unless_the_pod_is_seen_going() {
        let now: Timestamp = "2026-12-03T00:10:00Z".parse().expect("time");
        let at = |s: &str| Time(s.parse().expect("time"));
        let pods = [pod("a", true, false), pod("b", true, false), pod("c", true, true), pod("d", true, false)];
        let recorded: BTreeMap<String, Time> = [
            ("a".to_string(), at("2026-12-03T00:09:30Z")), // 30 s ago: kept, 90 s left
            ("b".to_string(), at("2026-12-03T00:07:00Z")), // 3 min ago: ran out
            ("c".to_string(), at("2026-12-03T00:09:50Z")), // being deleted: dropped
            ("gone".to_string(), at("2026-12-03T00:09:59Z")), // no such pod: dropped
        ]
        .into();
        let (kept, recheck) = build_disrupted_pod_map(&pods, &recorded, now);
        assert_eq!(kept.keys().collect::<Vec<_>>(), ["a"]);
        assert_eq!(recheck, Some(Duration::from_secs(90)));
        // Healthy: b and d (a was just evicted, c is going).
        assert_eq!(count_healthy(&pods, &kept), 2);
        let unready = [pod("x", false, false), pod("y", true, false)];
        assert_eq!(count_healthy(&unready, &BTreeMap::new()), 1);
    }

    #[test]
    fn the_status_allows_what_is_above_the_desired_count() {
        let now: Timestamp = "2026-12-03T00:10:00Z".parse().expect("time");
        let pdb: PodDisruptionBudget = serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "default", "generation": 2}, "spec": {"minAvailable": 2}})).expect("pdb");
        // (expected, desired, healthy) -> (allowed, condition status, reason)
        let cases = [(3, 2, 3, 1, "True", "SufficientPods"), (3, 2, 2, 0, "False", "InsufficientPods"), (3, 2, 1, 0, "False", "InsufficientPods"), (0, 0, 2, 0, "False", "InsufficientPods")];
        for (expected, desired, healthy, allowed, cond, reason) in cases {
            let s = compute_status(&pdb, expected, desired, healthy, BTreeMap::new(), now);
            assert_eq!(s.disruptions_allowed, Some(allowed), "{expected} {desired} {healthy}");
            assert_eq!((s.current_healthy, s.desired_healthy, s.expected_pods, s.observed_generation), (Some(healthy), Some(desired), Some(expected), Some(2)));
            let c = &s.conditions.as_ref().expect("conditions")[0];
            assert_eq!((c.type_.as_str(), c.status.as_str(), c.reason.as_str()), ("DisruptionAllowed", cond, reason));
        }
        // The transition time stays while the status does.
        let mut first = pdb.clone();
        first.status = Some(compute_status(&pdb, 3, 2, 2, BTreeMap::new(), now));
        let later: Timestamp = "2026-12-03T00:20:00Z".parse().expect("time");
        let again = compute_status(&first, 3, 2, 2, BTreeMap::new(), later);
        assert_eq!(again.conditions.expect("c")[0].last_transition_time, Time(now));
    }

    #[test]
    fn selectors_of_budgets() {
        let pdb = |sel: Value| -> PodDisruptionBudget { serde_json::from_value(json!({"metadata": {"name": "b"}, "spec": {"selector": sel}})).expect("pdb") };
        let p = pod("a", true, false);
        assert!(selects(&pdb(json!({"matchLabels": {"app": "web"}})), &p));
        assert!(!selects(&pdb(json!({"matchLabels": {"app": "db"}})), &p));
        assert!(selects(&pdb(json!({})), &p));
        let none: PodDisruptionBudget = serde_json::from_value(json!({"metadata": {"name": "b"}, "spec": {}})).expect("pdb");
        assert!(!selects(&none, &p));
    }
}
