//! Mirrors pkg/controller/statefulset/stateful_set_control.go: the StatefulSet update algorithm
//! (defaultStatefulSetControl). Given a set and the pods it owns, one pass
//! ([`StatefulSetControl::update_stateful_set`]):
//! 1. Lists the set's ControllerRevisions (adopting orphans its selector matches) and sorts them.
//! 2. Finds the update revision — the revision of the current template: the newest revision if
//!    it already holds it, an older equal one re-numbered as the newest (a rollback), or a new
//!    one ([`revision_action`]) — and the current revision (`status.currentRevision`, or the
//!    update revision when there is none).
//! 3. Decides what to do with the pods ([`plan`], pure): the ordinals `[start, start+replicas)`
//!    are the replicas — a missing one is created, a failed or succeeded one deleted and created
//!    again, one that lost its identity given it back; pods beyond are condemned and deleted,
//!    the highest ordinal first. With `podManagementPolicy: OrderedReady` everything goes one
//!    at a time, each step waiting until every lower ordinal is Running, Ready and available
//!    (and each scale-down until the higher ones are gone); with `Parallel` all at once. Then,
//!    for a RollingUpdate, the pod with the highest ordinal at or above the partition that is
//!    not at the update revision is deleted (to be created at the update revision), once every
//!    pod above it is healthy again.
//! 4. Carries the plan out (in order, stopping at the first failure; Parallel in slow-start
//!    batches) — a pod's claims are created before it (not while one still belongs to an earlier
//!    pod of its name), a condemned pod's claims get the owners the retention policy gives before
//!    it is deleted ([`StatefulPodControl`]) — and writes the status ([`compute_status`], [`complete_rolling_update`]) when it
//!    changed ([`inconsistent_status`]).
//! 5. Deletes the oldest revisions no pod uses beyond `revisionHistoryLimit`
//!    ([`revisions_to_truncate`]).

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;

use super::stateful_pod_control::{StatefulPodControl, reference};
use super::stateful_set_status_updater::StatefulSetStatusUpdater;
use super::stateful_set_utils::{
    allows_burst, apply_revision, identity_matches, in_ordinal_range, is_healthy, is_rolling_update, is_running_and_available, is_running_and_ready,
    is_terminating, new_revision, new_versioned_pod, ordinal_of, partition_of, phase, pod_revision, replicas_of, start_ordinal, storage_matches,
};
use crate::controller_ref_manager::ControllerRefManager;
use crate::controller_utils::controller_ref;
use crate::error::{Error, Result};
use crate::history::{History, equal_revision, find_equal_revisions, next_revision, sort_controller_revisions};

const TARGET: &str = "controllers::statefulset";
/// The largest batch of a Parallel pass (`MaxBatchSize`).
const MAX_BATCH_SIZE: usize = 500;

/// One write the update algorithm decided on; pods are named by ordinal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// A failed (or succeeded) replica: deleted, and created again at the revision its ordinal
    /// gets.
    Recreate { ordinal: i32, failed: bool },
    /// A missing replica.
    Create { ordinal: i32 },
    /// A replica whose name label or claim volumes are not its ordinal's.
    UpdateIdentity { ordinal: i32 },
    /// A pod beyond the replicas (scale down).
    DeleteCondemned { ordinal: i32 },
    /// A replica at an old revision (RollingUpdate).
    DeleteForUpdate { ordinal: i32 },
}

/// What the pass waits for when it stops early (for the log, and the tests).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wait {
    /// The pod of this ordinal to go.
    Terminating(i32),
    /// The pod of this ordinal to be Running and Ready.
    Ready(i32),
    /// The pod of this ordinal to be available (Ready for `minReadySeconds`).
    Available(i32),
    /// The pod just created or deleted to be seen.
    Progress(i32),
}

/// The decision of one pass: the steps for the replicas, then for the condemned pods, then the
/// update, in order; `wait` says why the pass stopped, if it did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    pub replicas: Vec<Step>,
    pub condemned: Vec<Step>,
    pub update: Option<Step>,
    pub wait: Option<Wait>,
}

/// A replica slot as the plan sees it: an existing pod, or one this pass creates (unhealthy,
/// at the revision its ordinal gets).
enum Slot<'a> {
    Existing(&'a Pod),
    New { revision: &'a str },
}

/// Which revision a new pod of `ordinal` gets (the rule of [`new_versioned_pod`]).
fn new_pod_revision<'a>(set: &StatefulSet, ordinal: i32, current: &'a str, update: &'a str) -> &'a str {
    let start = start_ordinal(set);
    let below = is_rolling_update(set)
        && match partition_of(set) {
            None => ordinal < start + set.status.as_ref().and_then(|s| s.current_replicas).unwrap_or(0),
            Some(p) => ordinal < start + p,
        };
    if below { current } else { update }
}

/// Steps 3 of updateStatefulSet, pure: what to do with `pods` (the set's, with any ordinal) at
/// `now`. `set` is the set as stored (its own template is the update revision's).
pub fn plan(set: &StatefulSet, pods: &[&Pod], current_revision: &str, update_revision: &str, now: Timestamp) -> Plan {
    let start = start_ordinal(set);
    let min_ready = set.spec.min_ready_seconds.unwrap_or(0);
    let mut out = Plan::default();
    // Partition the pods: the replicas by ordinal, the condemned highest first; pods without
    // an ordinal are left alone.
    let mut replicas: Vec<Option<&Pod>> = vec![None; replicas_of(set) as usize];
    let mut condemned: Vec<&Pod> = Vec::new();
    for &p in pods {
        let ordinal = ordinal_of(p);
        if in_ordinal_range(set, ordinal) {
            replicas[(ordinal - start) as usize] = Some(p);
        } else if ordinal >= 0 {
            condemned.push(p);
        }
    }
    condemned.sort_by_key(|p| std::cmp::Reverse(ordinal_of(p)));
    // The first unhealthy pod: a replica (a missing one counts), else the lowest condemned.
    let first_unhealthy: Option<i32> = replicas
        .iter()
        .enumerate()
        .find(|(_, p)| p.is_none_or(|p| !is_healthy(p)))
        .map(|(i, _)| start + i as i32)
        .or_else(|| condemned.iter().rev().find(|p| !is_healthy(p)).map(|p| ordinal_of(p)));
    if set.metadata.deletion_timestamp.is_some() {
        return out;
    }
    let monotonic = !allows_burst(set);

    // The replicas, lowest ordinal first (processReplica).
    let mut slots: Vec<Slot> = Vec::with_capacity(replicas.len());
    for (i, replica) in replicas.iter().enumerate() {
        let ordinal = start + i as i32;
        let pod = match replica {
            Some(p) if matches!(phase(p), "Failed" | "Succeeded") => {
                out.replicas.push(Step::Recreate { ordinal, failed: phase(p) == "Failed" });
                None
            }
            Some(p) => Some(*p),
            None => {
                out.replicas.push(Step::Create { ordinal });
                None
            }
        };
        let Some(p) = pod else {
            slots.push(Slot::New { revision: new_pod_revision(set, ordinal, current_revision, update_revision) });
            if monotonic {
                out.wait = Some(Wait::Progress(ordinal));
                return out;
            }
            continue;
        };
        slots.push(Slot::Existing(p));
        if monotonic {
            let wait = if is_terminating(p) {
                Some(Wait::Terminating(ordinal))
            } else if !is_running_and_ready(p) {
                Some(Wait::Ready(ordinal))
            } else if !is_running_and_available(p, min_ready, now) {
                Some(Wait::Available(ordinal))
            } else {
                None
            };
            if wait.is_some() {
                out.wait = wait;
                return out;
            }
        }
        if !identity_matches(set, p) || !storage_matches(set, p) {
            out.replicas.push(Step::UpdateIdentity { ordinal });
        }
    }

    // The condemned, highest ordinal first (processCondemned): in order, each waits for the
    // ones above it to go and for the pods below to be healthy, unless it is itself the first
    // unhealthy pod.
    for p in &condemned {
        let ordinal = ordinal_of(p);
        if is_terminating(p) {
            if monotonic {
                out.wait = Some(Wait::Terminating(ordinal));
                return out;
            }
            continue;
        }
        if monotonic && first_unhealthy != Some(ordinal) {
            if !is_running_and_ready(p) {
                out.wait = Some(Wait::Ready(ordinal));
                return out;
            }
            if !is_running_and_available(p, min_ready, now) {
                out.wait = Some(Wait::Available(ordinal));
                return out;
            }
        }
        out.condemned.push(Step::DeleteCondemned { ordinal });
        if monotonic {
            out.wait = Some(Wait::Progress(ordinal));
            return out;
        }
    }

    // OnDelete: pods change revision only when someone deletes them.
    if !is_rolling_update(set) {
        return out;
    }
    // The rolling update: from the highest ordinal down to the partition, the first pod not at
    // the update revision is deleted; an unhealthy one on the way is waited for.
    let update_min = partition_of(set).unwrap_or(0).max(0) as usize;
    for target in (update_min..slots.len()).rev() {
        let ordinal = start + target as i32;
        let (revision, terminating, healthy) = match &slots[target] {
            Slot::Existing(p) => (pod_revision(p), is_terminating(p), is_healthy(p)),
            Slot::New { revision } => (*revision, false, false),
        };
        if revision != update_revision && !terminating {
            out.update = Some(Step::DeleteForUpdate { ordinal });
            out.wait = Some(Wait::Progress(ordinal));
            return out;
        }
        if !healthy {
            out.wait = Some(Wait::Ready(ordinal));
            return out;
        }
    }
    out
}

/// computeReplicaStatus over `pods`: the counts of the status. A pod counts as a replica once
/// created; as current or updated by its revision label unless terminating.
pub fn compute_status(pods: &[&Pod], min_ready_seconds: i32, current_revision: &str, update_revision: &str, now: Timestamp) -> StatefulSetStatus {
    let mut s = StatefulSetStatus::default();
    let (mut ready, mut available, mut current, mut updated) = (0, 0, 0, 0);
    for p in pods {
        let created = !phase(p).is_empty();
        if created {
            s.replicas += 1;
        }
        if is_running_and_ready(p) {
            ready += 1;
            if is_running_and_available(p, min_ready_seconds, now) {
                available += 1;
            }
        }
        if created && !is_terminating(p) {
            let revision = pod_revision(p);
            if revision == current_revision {
                current += 1;
            }
            if revision == update_revision {
                updated += 1;
            }
        }
    }
    s.ready_replicas = Some(ready);
    s.available_replicas = Some(available);
    s.current_replicas = Some(current);
    s.updated_replicas = Some(updated);
    s.current_revision = Some(current_revision.to_string());
    s.update_revision = Some(update_revision.to_string());
    s
}

/// completeRollingUpdate: once every replica is updated and ready, the update revision becomes
/// the current one.
pub fn complete_rolling_update(set: &StatefulSet, status: &mut StatefulSetStatus) {
    let updated = status.updated_replicas.unwrap_or(0);
    if is_rolling_update(set) && updated == status.replicas && status.ready_replicas.unwrap_or(0) == status.replicas {
        status.current_replicas = Some(updated);
        status.current_revision = status.update_revision.clone();
    }
}

/// inconsistentStatus: whether `status` differs from what the set says (a newer generation, a
/// count, a revision).
pub fn inconsistent_status(set: &StatefulSet, status: &StatefulSetStatus) -> bool {
    let old = set.status.clone().unwrap_or_default();
    let n = |v: Option<i32>| v.unwrap_or(0);
    status.observed_generation.unwrap_or(0) > old.observed_generation.unwrap_or(0)
        || status.replicas != old.replicas
        || n(status.current_replicas) != n(old.current_replicas)
        || n(status.ready_replicas) != n(old.ready_replicas)
        || n(status.updated_replicas) != n(old.updated_replicas)
        || n(status.available_replicas) != n(old.available_replicas)
        || status.current_revision != old.current_revision
        || status.update_revision != old.update_revision
        || n(status.collision_count) != n(old.collision_count)
}

/// What step 2 does for the update revision, given the sorted revisions and the revision of
/// the current template.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RevisionAction {
    /// The newest revision (this index) already holds the template.
    Newest(usize),
    /// An older revision (this index) holds it: it becomes the newest (a rollback).
    Renumber(usize),
    /// No revision holds it.
    Create,
}

/// Step 2's decision (getStatefulSetRevisions).
pub fn revision_action(revisions: &[ControllerRevision], candidate: &ControllerRevision) -> RevisionAction {
    let equal = find_equal_revisions(revisions, candidate);
    let Some(last_equal) = equal.last() else { return RevisionAction::Create };
    let index = revisions.iter().position(|r| std::ptr::eq(r, *last_equal)).unwrap_or(0);
    match revisions.last() {
        Some(newest) if equal_revision(newest, last_equal) => RevisionAction::Newest(revisions.len() - 1),
        _ => RevisionAction::Renumber(index),
    }
}

/// Step 5's decision (truncateHistory): the revisions (sorted, oldest first) to delete — the
/// oldest of those that are neither current, nor the update revision, nor any pod's, beyond
/// `limit`.
pub fn revisions_to_truncate<'a>(revisions: &'a [ControllerRevision], live: &BTreeSet<String>, limit: i32) -> Vec<&'a ControllerRevision> {
    let history: Vec<&ControllerRevision> = revisions.iter().filter(|r| !live.contains(r.metadata.name.as_deref().unwrap_or_default())).collect();
    let excess = history.len().saturating_sub(limit.max(0) as usize);
    history.into_iter().take(excess).collect()
}

/// defaultStatefulSetControl: the algorithm, with the writes it needs.
#[derive(Clone)]
pub struct StatefulSetControl {
    client: kube::Client,
    pod_control: StatefulPodControl,
    status_updater: StatefulSetStatusUpdater,
    history: History,
}

impl StatefulSetControl {
    pub fn new(client: kube::Client) -> Self {
        Self { pod_control: StatefulPodControl::new(client.clone()), status_updater: StatefulSetStatusUpdater::new(client.clone()), history: History::new(client.clone()), client }
    }

    /// Steps 1–5 for one set and the pods it owns; the status written (or that would have been).
    pub async fn update_stateful_set(&self, set: &StatefulSet, pods: &[Arc<Pod>], selector: &apimachinery::labels::Selector) -> Result<StatefulSetStatus> {
        // Step 1.
        let mut revisions = self.list_revisions(set, selector).await?;
        sort_controller_revisions(&mut revisions);
        // Step 2.
        let (current, update, collision_count) = self.revisions(set, &revisions).await?;
        // Steps 3 and 4.
        let result = self.update_pods_and_status(set, pods, &current, &update, collision_count).await;
        // Step 5, whatever became of the pass.
        let mut live: BTreeSet<String> = pods.iter().map(|p| pod_revision(p).to_string()).collect();
        live.extend([current.metadata.name.clone().unwrap_or_default(), update.metadata.name.clone().unwrap_or_default()]);
        let limit = set.spec.revision_history_limit.unwrap_or(10);
        for r in revisions_to_truncate(&revisions, &live, limit) {
            tracing::info!(target: TARGET, statefulset = %set.metadata.name.as_deref().unwrap_or_default(), revision = %r.metadata.name.as_deref().unwrap_or_default(), "deleting old revision");
            self.history.delete_controller_revision(r).await?;
        }
        result
    }

    /// processReplica's creation: not while a claim of the pod's ordinal still belongs to an
    /// earlier pod of that name (PodClaimIsStale) — the pass stops and is retried.
    async fn create_unless_stale(&self, set: &StatefulSet, pod: &Pod) -> Result<()> {
        if self.pod_control.pod_claim_is_stale(set, pod).await? {
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            return Err(Error::Message(format!("pod {name} has a stale PersistentVolumeClaim (owned by an earlier pod of that name); waiting for it to be deleted")));
        }
        self.pod_control.create_stateful_pod(set, pod).await
    }

    /// Step 1 (ListRevisions and adoptOrphanRevisions): the revisions the set's selector
    /// matches that it controls, orphans adopted.
    async fn list_revisions(&self, set: &StatefulSet, selector: &apimachinery::labels::Selector) -> Result<Vec<ControllerRevision>> {
        let ns = set.metadata.namespace.clone().unwrap_or_default();
        let uid = set.metadata.uid.clone().unwrap_or_default();
        let found = self.history.list_controller_revisions(&ns, &uid, &selector.to_string()).await?;
        let manager = ControllerRefManager {
            api: Api::<ControllerRevision>::namespaced(self.client.clone(), &ns),
            owner: controller_ref("apps/v1", "StatefulSet", &set.metadata),
            owner_deleting: set.metadata.deletion_timestamp.is_some(),
            selector,
        };
        let sets: Api<StatefulSet> = Api::namespaced(self.client.clone(), &ns);
        let name = set.metadata.name.clone().unwrap_or_default();
        let can_adopt = || async move {
            match sets.get_opt(&name).await.map_err(Error::Kube)? {
                Some(fresh) => Ok(fresh.metadata.uid.as_deref() == Some(uid.as_str()) && fresh.metadata.deletion_timestamp.is_none()),
                None => Ok(false),
            }
        };
        let claimed = manager.claim(found.into_iter().map(Arc::new).collect(), can_adopt).await?;
        Ok(claimed.into_iter().map(Arc::unwrap_or_clone).collect())
    }

    /// Step 2 (getStatefulSetRevisions): the current revision, the update revision and the
    /// collision count.
    async fn revisions(&self, set: &StatefulSet, revisions: &[ControllerRevision]) -> Result<(ControllerRevision, ControllerRevision, i32)> {
        let mut collision_count = set.status.as_ref().and_then(|s| s.collision_count).unwrap_or(0);
        let candidate = new_revision(set, next_revision(revisions), collision_count);
        let update = match revision_action(revisions, &candidate) {
            RevisionAction::Newest(i) => revisions[i].clone(),
            RevisionAction::Renumber(i) => self.history.update_controller_revision(&revisions[i], candidate.revision.unwrap_or(1)).await?,
            RevisionAction::Create => self.history.create_controller_revision(&set.metadata, &candidate, &mut collision_count).await?,
        };
        let wanted = set.status.as_ref().and_then(|s| s.current_revision.clone());
        let current = revisions.iter().find(|r| r.metadata.name.is_some() && r.metadata.name == wanted).cloned().unwrap_or_else(|| update.clone());
        Ok((current, update, collision_count))
    }

    /// Steps 3 and 4 (updateStatefulSet, updateStatefulSetStatus).
    async fn update_pods_and_status(&self, set: &StatefulSet, pods: &[Arc<Pod>], current: &ControllerRevision, update: &ControllerRevision, collision_count: i32) -> Result<StatefulSetStatus> {
        let set_name = set.metadata.name.clone().unwrap_or_default();
        let current_set = apply_revision(set, current);
        let update_set = apply_revision(set, update);
        let (current_name, update_name) = (current.metadata.name.clone().unwrap_or_default(), update.metadata.name.clone().unwrap_or_default());
        let now = Timestamp::now();
        let views: Vec<&Pod> = pods.iter().map(|p| p.as_ref()).collect();
        // Step 3.
        let plan = plan(set, &views, &current_name, &update_name, now);
        tracing::debug!(target: TARGET, statefulset = %set_name, ?plan, "planned");
        if let Some(wait) = &plan.wait {
            tracing::debug!(target: TARGET, statefulset = %set_name, ?wait, "waiting");
        }
        // Step 4: carry it out.
        let by_ordinal = |ordinal: i32| pods.iter().find(|p| ordinal_of(p) == ordinal).map(|p| p.as_ref());
        let run = |step: Step| {
            let (current_set, update_set, current_name, update_name, set_name) = (&current_set, &update_set, &current_name, &update_name, &set_name);
            async move {
                match step {
                    Step::Recreate { ordinal, failed } => {
                        if let Some(p) = by_ordinal(ordinal) {
                            let pod = p.metadata.name.clone().unwrap_or_default();
                            let ns = set.metadata.namespace.clone().unwrap_or_default();
                            let (reason, type_, how) = if failed { ("RecreatingFailedPod", client::record::WARNING, "failed") } else { ("RecreatingTerminatedPod", client::record::NORMAL, "terminated") };
                            self.pod_control.recorder().event(reference(set), type_, reason, format!("StatefulSet {ns}/{set_name} is recreating {how} Pod {pod}"));
                            self.pod_control.delete_stateful_pod(set, p).await?;
                        }
                        self.create_unless_stale(set, &new_versioned_pod(current_set, update_set, current_name, update_name, ordinal)).await
                    }
                    Step::Create { ordinal } => self.create_unless_stale(set, &new_versioned_pod(current_set, update_set, current_name, update_name, ordinal)).await,
                    Step::UpdateIdentity { ordinal } => match by_ordinal(ordinal) {
                        Some(p) => self.pod_control.update_stateful_pod(update_set, p).await,
                        None => Ok(()),
                    },
                    Step::DeleteCondemned { ordinal } | Step::DeleteForUpdate { ordinal } => match by_ordinal(ordinal) {
                        Some(p) => {
                            if matches!(step, Step::DeleteCondemned { .. }) {
                                // The claims of a condemned pod first take the owners its
                                // retention policy gives (WhenScaled=Delete: the pod, so they go
                                // with it).
                                self.pod_control.update_pod_claim_for_retention_policy(update_set, p).await?;
                            }
                            tracing::info!(target: TARGET, statefulset = %set_name, pod = %p.metadata.name.as_deref().unwrap_or_default(), ?step, "terminating pod");
                            self.pod_control.delete_stateful_pod(set, p).await
                        }
                        None => Ok(()),
                    },
                }
            }
        };
        let monotonic = !allows_burst(set);
        let mut result: Result<()> = Ok(());
        for phase in [plan.replicas.clone(), plan.condemned.clone(), plan.update.clone().into_iter().collect()] {
            result = if monotonic {
                let mut r = Ok(());
                for step in phase {
                    r = run(step).await;
                    if r.is_err() {
                        break;
                    }
                }
                r
            } else {
                slow_start(phase, &run).await
            };
            if result.is_err() {
                break;
            }
        }
        // The status, over the pods as they were minus those recreated; a pod deleted for the
        // update no longer counts as current.
        let recreated: BTreeSet<i32> = plan.replicas.iter().filter_map(|s| if let Step::Recreate { ordinal, .. } = s { Some(*ordinal) } else { None }).collect();
        let counted: Vec<&Pod> = views.iter().copied().filter(|p| ordinal_of(p) >= 0 && !recreated.contains(&ordinal_of(p))).collect();
        let mut status = compute_status(&counted, set.spec.min_ready_seconds.unwrap_or(0), &current_name, &update_name, now);
        if result.is_ok() && matches!(plan.update, Some(Step::DeleteForUpdate { .. })) {
            status.current_replicas = status.current_replicas.map(|n| n - 1);
        }
        status.observed_generation = set.metadata.generation;
        status.collision_count = Some(collision_count);
        complete_rolling_update(set, &mut status);
        let written = if inconsistent_status(set, &status) { self.status_updater.update_stateful_set_status(set, &status).await } else { Ok(()) };
        result?;
        written?;
        Ok(status)
    }
}

/// The steps of a Parallel pass in batches of 1, 2, 4, … (up to [`MAX_BATCH_SIZE`]), stopping
/// after a batch with a failure (slowStartBatch).
async fn slow_start<F, Fut>(steps: Vec<Step>, run: &F) -> Result<()>
where
    F: Fn(Step) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let mut steps = steps.into_iter();
    let mut batch = 1;
    loop {
        let chunk: Vec<Step> = steps.by_ref().take(batch).collect();
        if chunk.is_empty() {
            return Ok(());
        }
        let results = futures::future::join_all(chunk.into_iter().map(run)).await;
        if let Some(e) = results.into_iter().find_map(|r| r.err()) {
            return Err(e);
        }
        batch = (batch * 2).min(MAX_BATCH_SIZE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::CONTROLLER_REVISION_HASH_LABEL;
    use serde_json::{Value, json};

    const NOW: &str = "2026-12-03T00:01:00Z";

    fn set(v: Value) -> StatefulSet {
        let mut base = json!({"metadata": {"name": "web", "namespace": "default", "uid": "u1", "generation": 2},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "podManagementPolicy": "OrderedReady",
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}},
                     "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}}});
        json_patch::merge(&mut base, &v);
        serde_json::from_value(base).expect("set")
    }

    /// A pod of the set: `state` is "ready" (Running and Ready since a minute), "fresh" (Ready
    /// for 10 s), "pending", "running" (not ready), "failed", "succeeded", "terminating"
    /// (ready, being deleted) or "nolabel" (ready, pod-name label lost); `rev` its revision.
    fn pod(ordinal: i32, state: &str, rev: &str) -> Pod {
        let name = format!("web-{ordinal}");
        let mut labels = json!({"app": "web", CONTROLLER_REVISION_HASH_LABEL: rev});
        if state != "nolabel" {
            labels[super::super::stateful_set_utils::STATEFUL_SET_POD_NAME_LABEL] = json!(name);
        }
        let (phase, ready_since) = match state {
            "ready" | "terminating" | "nolabel" => ("Running", Some("2026-12-03T00:00:00Z")),
            "fresh" => ("Running", Some("2026-12-03T00:00:50Z")),
            "running" => ("Running", None),
            "pending" => ("Pending", None),
            "failed" => ("Failed", None),
            "succeeded" => ("Succeeded", None),
            other => panic!("state {other}"),
        };
        let mut v = json!({"metadata": {"name": name, "namespace": "default", "labels": labels}, "spec": {"containers": []}, "status": {"phase": phase}});
        if let Some(t) = ready_since {
            v["status"]["conditions"] = json!([{"type": "Ready", "status": "True", "lastTransitionTime": t}]);
        }
        if state == "terminating" {
            v["metadata"]["deletionTimestamp"] = json!("2026-12-03T00:00:59Z");
        }
        serde_json::from_value(v).expect("pod")
    }

    fn run(s: &StatefulSet, pods: &[Pod]) -> Plan {
        let views: Vec<&Pod> = pods.iter().collect();
        plan(s, &views, "cur", "upd", NOW.parse().expect("now"))
    }

    use Step::*;

    /// (what, set, pods) -> (replica steps, condemned steps, wait).
    type ScaleCase<'a> = (&'a str, &'a StatefulSet, Vec<Pod>, Vec<Step>, Vec<Step>, Option<Wait>);
    /// (what, set, pods) -> (update step, wait).
    type UpdateCase<'a> = (&'a str, &'a StatefulSet, Vec<Pod>, Option<Step>, Option<Wait>);

    #[test]
    fn ordered_ready_creates_and_deletes_one_at_a_time() {
        let ordered = set(json!({}));
        let parallel = set(json!({"spec": {"podManagementPolicy": "Parallel"}}));
        let slow = set(json!({"spec": {"minReadySeconds": 30}}));
        let one = set(json!({"spec": {"replicas": 1}}));
        let parallel_one = set(json!({"spec": {"replicas": 1, "podManagementPolicy": "Parallel"}}));
        let p = |o, st| pod(o, st, "upd");
        let cases: Vec<ScaleCase> = vec![
            ("empty: web-0 first", &ordered, vec![], vec![Create { ordinal: 0 }], vec![], Some(Wait::Progress(0))),
            ("web-0 pending: wait", &ordered, vec![p(0, "pending")], vec![], vec![], Some(Wait::Ready(0))),
            ("web-0 running, not ready: wait", &ordered, vec![p(0, "running")], vec![], vec![], Some(Wait::Ready(0))),
            ("web-0 ready: web-1", &ordered, vec![p(0, "ready")], vec![Create { ordinal: 1 }], vec![], Some(Wait::Progress(1))),
            ("a gap is filled in order", &ordered, vec![p(0, "ready"), p(2, "ready")], vec![Create { ordinal: 1 }], vec![], Some(Wait::Progress(1))),
            ("not yet available: wait", &slow, vec![p(0, "fresh")], vec![], vec![], Some(Wait::Available(0))),
            ("available: go on", &slow, vec![p(0, "ready")], vec![Create { ordinal: 1 }], vec![], Some(Wait::Progress(1))),
            ("terminating replica: wait", &ordered, vec![p(0, "terminating")], vec![], vec![], Some(Wait::Terminating(0))),
            ("failed: recreated", &ordered, vec![p(0, "ready"), p(1, "failed"), p(2, "ready")], vec![Recreate { ordinal: 1, failed: true }], vec![], Some(Wait::Progress(1))),
            ("succeeded: recreated", &ordered, vec![p(0, "succeeded")], vec![Recreate { ordinal: 0, failed: false }], vec![], Some(Wait::Progress(0))),
            ("lost identity: restored, go on", &ordered, vec![p(0, "nolabel"), p(1, "ready")], vec![UpdateIdentity { ordinal: 0 }, Create { ordinal: 2 }], vec![], Some(Wait::Progress(2))),
            ("scale down: highest first", &one, vec![p(0, "ready"), p(1, "ready"), p(2, "ready")], vec![], vec![DeleteCondemned { ordinal: 2 }], Some(Wait::Progress(2))),
            ("scale down waits for the one going", &one, vec![p(0, "ready"), p(1, "ready"), p(2, "terminating")], vec![], vec![], Some(Wait::Terminating(2))),
            ("scale down waits for an unready replica", &one, vec![p(0, "running"), p(1, "ready")], vec![], vec![], Some(Wait::Ready(0))),
            ("an unready condemned pod that is the first unhealthy goes", &one, vec![p(0, "ready"), p(1, "ready"), p(2, "running")], vec![], vec![DeleteCondemned { ordinal: 2 }], Some(Wait::Progress(2))),
            ("an unready condemned pod below another waits", &one, vec![p(0, "ready"), p(1, "running"), p(2, "running")], vec![], vec![], Some(Wait::Ready(2))),
            ("parallel: all at once", &parallel, vec![], vec![Create { ordinal: 0 }, Create { ordinal: 1 }, Create { ordinal: 2 }], vec![], Some(Wait::Ready(2))),
            ("parallel: past unready pods", &parallel, vec![p(0, "pending"), p(1, "failed")], vec![Recreate { ordinal: 1, failed: true }, Create { ordinal: 2 }], vec![], Some(Wait::Ready(2))),
            (
                "parallel: scale down at once",
                &parallel_one,
                vec![p(0, "pending"), p(1, "running"), p(2, "terminating"), p(3, "ready")],
                vec![],
                vec![DeleteCondemned { ordinal: 3 }, DeleteCondemned { ordinal: 1 }],
                Some(Wait::Ready(0)),
            ),
            ("steady", &ordered, vec![p(0, "ready"), p(1, "ready"), p(2, "ready")], vec![], vec![], None),
        ];
        for (what, s, pods, replicas, condemned, wait) in cases {
            let got = run(s, &pods);
            assert_eq!((got.replicas, got.condemned, got.update, got.wait), (replicas, condemned, None, wait), "{what}");
        }
        // A set being deleted only has its status written.
        let deleting = set(json!({"metadata": {"deletionTimestamp": "2026-12-03T00:00:00Z"}}));
        assert_eq!(run(&deleting, &[]), Plan::default());
    }

    #[test]
    fn the_rolling_update_replaces_from_the_top_down_to_the_partition() {
        let rolling = set(json!({}));
        let partitioned = set(json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 2}}, "replicas": 4}}));
        let on_delete = set(json!({"spec": {"updateStrategy": {"type": "OnDelete", "rollingUpdate": null}}}));
        let parallel = set(json!({"spec": {"podManagementPolicy": "Parallel"}}));
        let p = pod;
        let cases: Vec<UpdateCase> = vec![
            ("all old: the highest first", &rolling, vec![p(0, "ready", "cur"), p(1, "ready", "cur"), p(2, "ready", "cur")], Some(DeleteForUpdate { ordinal: 2 }), Some(Wait::Progress(2))),
            ("top updated and ready: the next", &rolling, vec![p(0, "ready", "cur"), p(1, "ready", "cur"), p(2, "ready", "upd")], Some(DeleteForUpdate { ordinal: 1 }), Some(Wait::Progress(1))),
            ("an old pod being deleted is waited for", &rolling, vec![p(0, "ready", "cur"), p(1, "terminating", "cur"), p(2, "ready", "upd")], None, Some(Wait::Terminating(1))),
            ("all updated", &rolling, vec![p(0, "ready", "upd"), p(1, "ready", "upd"), p(2, "ready", "upd")], None, None),
            (
                "the partition keeps 0 and 1",
                &partitioned,
                vec![p(0, "ready", "cur"), p(1, "ready", "cur"), p(2, "ready", "upd"), p(3, "ready", "upd")],
                None,
                None,
            ),
            (
                "above the partition, from the top",
                &partitioned,
                vec![p(0, "ready", "cur"), p(1, "ready", "cur"), p(2, "ready", "cur"), p(3, "ready", "cur")],
                Some(DeleteForUpdate { ordinal: 3 }),
                Some(Wait::Progress(3)),
            ),
            ("OnDelete: nothing", &on_delete, vec![p(0, "ready", "cur"), p(1, "ready", "cur"), p(2, "ready", "cur")], None, None),
            ("parallel: waits for the new pod", &parallel, vec![p(0, "ready", "cur"), p(1, "ready", "cur"), p(2, "pending", "upd")], None, Some(Wait::Ready(2))),
            ("parallel: an unhealthy updated pod on top blocks", &parallel, vec![p(0, "ready", "cur"), p(1, "ready", "upd"), p(2, "running", "upd")], None, Some(Wait::Ready(2))),
        ];
        for (what, s, pods, update, wait) in cases {
            let got = run(s, &pods);
            assert_eq!((got.replicas, got.condemned, got.update, got.wait), (vec![], vec![], update, wait), "{what}");
        }
    }

    #[test]
    fn status_counts_and_completes_the_rollout() {
        let s = set(json!({"spec": {"minReadySeconds": 30}}));
        let now: Timestamp = NOW.parse().expect("now");
        let pods = [pod(0, "ready", "cur"), pod(1, "fresh", "upd"), pod(2, "terminating", "upd"), pod(3, "pending", "upd")];
        let views: Vec<&Pod> = pods.iter().collect();
        let st = compute_status(&views, 30, "cur", "upd", now);
        let counts = |st: &StatefulSetStatus| (st.replicas, st.ready_replicas, st.available_replicas, st.current_replicas, st.updated_replicas);
        assert_eq!(counts(&st), (4, Some(3), Some(2), Some(1), Some(2)));
        // Every replica updated and ready: the update revision becomes current.
        let done = [pod(0, "ready", "upd"), pod(1, "ready", "upd")];
        let views: Vec<&Pod> = done.iter().collect();
        let mut st = compute_status(&views, 0, "cur", "upd", now);
        assert_eq!(st.current_replicas, Some(0));
        complete_rolling_update(&s, &mut st);
        assert_eq!((st.current_replicas, st.current_revision.as_deref()), (Some(2), Some("upd")));
        // Not while one is unready, nor under OnDelete.
        let mut partial = compute_status(&[&pod(0, "ready", "upd"), &pod(1, "running", "upd")], 0, "cur", "upd", now);
        complete_rolling_update(&s, &mut partial);
        assert_eq!(partial.current_revision.as_deref(), Some("cur"));
        let mut on_delete = compute_status(&views, 0, "cur", "upd", now);
        complete_rolling_update(&set(json!({"spec": {"updateStrategy": {"type": "OnDelete", "rollingUpdate": null}}})), &mut on_delete);
        assert_eq!(on_delete.current_revision.as_deref(), Some("cur"));
        // Written only when it differs.
        let mut written = s.clone();
        written.status = Some(st.clone());
        assert!(inconsistent_status(&s, &st));
        assert!(!inconsistent_status(&written, &st));
        let mut newer = st.clone();
        newer.observed_generation = Some(9);
        assert!(inconsistent_status(&written, &newer));
    }

    #[test]
    fn revisions_found_renumbered_or_created_and_truncated() {
        let image = |i: &str| set(json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": i}]}}}}));
        let mut revs = vec![new_revision(&image("a"), 1, 0), new_revision(&image("b"), 2, 0)];
        sort_controller_revisions(&mut revs);
        assert_eq!(revision_action(&revs, &new_revision(&image("b"), 3, 0)), RevisionAction::Newest(1));
        assert_eq!(revision_action(&revs, &new_revision(&image("a"), 3, 0)), RevisionAction::Renumber(0));
        assert_eq!(revision_action(&revs, &new_revision(&image("c"), 3, 0)), RevisionAction::Create);
        assert_eq!(revision_action(&[], &new_revision(&image("c"), 1, 0)), RevisionAction::Create);
        // Truncation keeps the live ones and the newest `limit` of the rest.
        let all: Vec<ControllerRevision> = ["a", "b", "c", "d", "e"].iter().enumerate().map(|(i, im)| new_revision(&image(im), i as i64 + 1, 0)).collect();
        let name = |i: usize| all[i].metadata.name.clone().unwrap_or_default();
        let live: BTreeSet<String> = [name(0), name(4)].into();
        let gone = |limit| revisions_to_truncate(&all, &live, limit).iter().map(|r| r.revision.unwrap_or(0)).collect::<Vec<_>>();
        assert_eq!(gone(10), Vec::<i64>::new());
        assert_eq!(gone(1), vec![2, 3]);
        assert_eq!(gone(0), vec![2, 3, 4]);
    }
}
