//! Mirrors pkg/controller/deployment/sync.go: what every rollout step uses — finding (or
//! creating) the new ReplicaSet and keeping revisions, scaling a ReplicaSet with its
//! annotations and event, proportional scaling when `replicas` changes mid-rollout, the paused
//! case, the cleanup of old ReplicaSets, and the status write.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PostParams};

use super::deployment_controller::{DeploymentController, Sets, TARGET, key_of};
use super::progress::{self, PAUSED, RESUMED, calculate_status, condition, set_condition, update_progressing};
use super::util::{
    DESIRED_REPLICAS_ANNOTATION, MAX_REPLICAS_ANNOTATION, POD_TEMPLATE_HASH, REVISION_ANNOTATION, compute_hash, copied_annotations, equal_ignore_hash, max_revision,
    max_surge, reference, replicas, revision, rs_replicas, scaled_all,
};
use crate::controller_utils::controller_ref;
use crate::error::{Error, Result};

/// The default `revisionHistoryLimit`.
pub const DEFAULT_REVISION_HISTORY_LIMIT: i32 = 10;
/// How many times a status update that met a Conflict is tried again on a fresh read of the
/// same generation (client-go's `retry.DefaultRetry` tries five times; the queue retries after).
const STATUS_UPDATE_RETRIES: usize = 3;

/// How a scale reads in its event (`Scaled up replica set web-x from 1 to 3`).
pub fn scaling_message(name: &str, from: i32, to: i32) -> String {
    let how = if to > from { "up" } else { "down" };
    format!("Scaled {how} replica set {name} from {from} to {to}")
}

/// Proportional scaling (scale): how many replicas each active ReplicaSet gets when the
/// Deployment's size changes mid-rollout. `sets` are (current size) of the active ReplicaSets,
/// newest first; `allowed` is replicas + maxSurge. Each takes its share of the difference, the
/// rounding leftover going to the first (largest when growing).
pub fn proportional_sizes(sizes: &[i32], allowed: i32) -> Vec<i32> {
    let total: i32 = sizes.iter().sum();
    let to_add = allowed - total;
    if total == 0 || to_add == 0 {
        return sizes.to_vec();
    }
    let mut out: Vec<i32> = sizes.iter().map(|s| s + (i64::from(*s) * i64::from(to_add) / i64::from(total)) as i32).collect();
    let added: i32 = out.iter().sum::<i32>() - total;
    // The leftover goes to the largest set (the first of equals).
    let leftover = to_add - added;
    if leftover != 0
        && let Some(i) = (0..out.len()).max_by_key(|i| (sizes[*i], std::cmp::Reverse(*i)))
    {
        out[i] = (out[i] + leftover).max(0);
    }
    out.iter().map(|s| (*s).max(0)).collect()
}

impl DeploymentController {
    fn note(&self, d: &Deployment, reason: &str, message: String) {
        self.notes.lock().unwrap_or_else(|e| e.into_inner()).insert(key_of(d), (reason.into(), message));
    }

    /// getAllReplicaSetsAndSyncRevision: the new ReplicaSet (the oldest whose template is the
    /// Deployment's, ignoring the hash label; created when asked and missing) and the old ones.
    /// The new one carries the highest revision, and the Deployment that revision.
    pub(super) async fn get_all_replica_sets_and_sync_revision(&self, d: &Deployment, sets: Sets, create: bool) -> Result<(Option<ReplicaSet>, Vec<ReplicaSet>)> {
        let mut all = sets.all;
        all.sort_by(|a, b| a.metadata.creation_timestamp.as_ref().map(|t| t.0).cmp(&b.metadata.creation_timestamp.as_ref().map(|t| t.0)));
        let new_idx = all.iter().position(|rs| rs.spec.template.as_ref().is_some_and(|t| equal_ignore_hash(t, &d.spec.template)));
        let existing = new_idx.map(|i| all.remove(i));
        let olds = all;
        let new_revision = max_revision(&olds) + 1;
        let ns = d.metadata.namespace.clone().unwrap_or_default();
        let sets_api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), &ns);
        let new_rs = match existing {
            Some(rs) => {
                // Its revision is the newest; its annotations and minReadySeconds follow the Deployment's.
                let mut updated = rs.clone();
                let annotations = updated.metadata.annotations.get_or_insert_with(BTreeMap::new);
                for (k, v) in copied_annotations(d) {
                    annotations.insert(k, v);
                }
                if revision(&rs.metadata) < new_revision {
                    annotations.insert(REVISION_ANNOTATION.into(), new_revision.to_string());
                }
                updated.spec.min_ready_seconds = d.spec.min_ready_seconds;
                let rs = if updated.metadata.annotations != rs.metadata.annotations || updated.spec.min_ready_seconds != rs.spec.min_ready_seconds {
                    sets_api.replace(rs.metadata.name.as_deref().unwrap_or_default(), &PostParams::default(), &updated).await.map_err(Error::Kube)?
                } else {
                    rs
                };
                if d.status.as_ref().and_then(|s| condition(s, "Progressing")).is_none() {
                    self.note(d, progress::FOUND_NEW_RS, format!("Found new replica set \"{}\"", rs.metadata.name.as_deref().unwrap_or_default()));
                }
                Some(rs)
            }
            None if create => Some(self.create_new_replica_set(d, &olds, new_revision).await?),
            None => None,
        };
        if let Some(rs) = &new_rs {
            self.sync_deployment_revision(d, revision(&rs.metadata)).await?;
        }
        Ok((new_rs, olds))
    }

    /// The new ReplicaSet `<deployment>-<hash>`: the template with the hash label (in its
    /// labels, selector and pod labels), the Deployment's annotations and the new revision,
    /// sized by [`super::util::new_rs_new_replicas`]. A name taken by another template is a
    /// hash collision: `status.collisionCount` goes up and the next sync picks another name.
    async fn create_new_replica_set(&self, d: &Deployment, olds: &[ReplicaSet], new_revision: i64) -> Result<ReplicaSet> {
        let ns = d.metadata.namespace.clone().unwrap_or_default();
        let collision = d.status.as_ref().and_then(|s| s.collision_count);
        let hash = compute_hash(&d.spec.template, collision);
        let name = format!("{}-{hash}", d.metadata.name.as_deref().unwrap_or_default());
        let mut template = d.spec.template.clone();
        template.metadata.get_or_insert_with(Default::default).labels.get_or_insert_with(BTreeMap::new).insert(POD_TEMPLATE_HASH.into(), hash.clone());
        let mut selector = d.spec.selector.clone();
        selector.match_labels.get_or_insert_with(BTreeMap::new).insert(POD_TEMPLATE_HASH.into(), hash.clone());
        let mut labels = d.spec.template.metadata.as_ref().and_then(|m| m.labels.clone()).unwrap_or_default();
        labels.insert(POD_TEMPLATE_HASH.into(), hash);
        let all_spec: i32 = olds.iter().map(rs_replicas).sum();
        let size = super::util::new_rs_new_replicas(d, all_spec, 0);
        let mut annotations = copied_annotations(d);
        annotations.insert(REVISION_ANNOTATION.into(), new_revision.to_string());
        annotations.insert(DESIRED_REPLICAS_ANNOTATION.into(), replicas(d).to_string());
        annotations.insert(MAX_REPLICAS_ANNOTATION.into(), (replicas(d) + max_surge(d)).to_string());
        let rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(ns.clone()),
                labels: Some(labels),
                annotations: Some(annotations),
                owner_references: Some(vec![controller_ref("apps/v1", "Deployment", &d.metadata)]),
                ..ObjectMeta::default()
            },
            spec: ReplicaSetSpec { replicas: Some(size), min_ready_seconds: d.spec.min_ready_seconds, selector, template: Some(template) },
            status: None,
        };
        let api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), &ns);
        match api.create(&PostParams::default(), &rs).await {
            Ok(created) => {
                tracing::info!(target: TARGET, deployment = %key_of(d), replicaset = %name, replicas = size, "created new ReplicaSet");
                if size > 0 {
                    self.recorder.event(reference(d), client::record::NORMAL, "ScalingReplicaSet", scaling_message(&name, 0, size));
                }
                self.note(d, progress::NEW_RS_CREATED, format!("Created new replica set \"{name}\""));
                Ok(created)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {
                // Ours already (a cache behind our own create)? Otherwise a collision.
                if let Some(there) = api.get_opt(&name).await.map_err(Error::Kube)?
                    && there.metadata.owner_references.iter().flatten().any(|r| Some(&r.uid) == d.metadata.uid.as_ref())
                    && there.spec.template.as_ref().is_some_and(|t| equal_ignore_hash(t, &d.spec.template))
                {
                    return Ok(there);
                }
                let mut status = d.status.clone().unwrap_or_default();
                status.collision_count = Some(collision.unwrap_or(0) + 1);
                self.write_status(d, status).await?;
                Err(Error::Kube(kube::Error::Api(s)))
            }
            Err(e) => {
                self.recorder.event(reference(d), client::record::WARNING, "FailedCreate", format!("Failed to create new replica set \"{name}\": {e}"));
                Err(Error::Kube(e))
            }
        }
    }

    /// The Deployment's own revision annotation follows its new ReplicaSet's.
    async fn sync_deployment_revision(&self, d: &Deployment, rev: i64) -> Result<()> {
        let current = d.metadata.annotations.as_ref().and_then(|a| a.get(REVISION_ANNOTATION)).cloned();
        if current.as_deref() == Some(rev.to_string().as_str()) {
            return Ok(());
        }
        let api: Api<Deployment> = Api::namespaced(self.client.clone(), d.metadata.namespace.as_deref().unwrap_or_default());
        // An update with the cached resourceVersion, as Kubernetes' (its role allows `update`,
        // not `patch`): a Conflict goes back to the queue, whose next sync reads a fresh cache.
        let mut updated = d.clone();
        updated.metadata.annotations.get_or_insert_with(BTreeMap::new).insert(REVISION_ANNOTATION.into(), rev.to_string());
        match api.replace(d.metadata.name.as_deref().unwrap_or_default(), &PostParams::default(), &updated).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(Error::Kube(e)),
        }
    }

    /// scaleReplicaSet: `rs` at `size`, with the Deployment's desired and maximum replicas in its
    /// annotations; an event when the size changes.
    pub(super) async fn scale_replica_set(&self, rs: &ReplicaSet, size: i32, d: &Deployment) -> Result<ReplicaSet> {
        let mut updated = rs.clone();
        updated.spec.replicas = Some(size);
        let annotations = updated.metadata.annotations.get_or_insert_with(BTreeMap::new);
        annotations.insert(DESIRED_REPLICAS_ANNOTATION.into(), replicas(d).to_string());
        annotations.insert(MAX_REPLICAS_ANNOTATION.into(), (replicas(d) + max_surge(d)).to_string());
        if updated.spec.replicas == rs.spec.replicas && updated.metadata.annotations == rs.metadata.annotations {
            return Ok(rs.clone());
        }
        let name = rs.metadata.name.clone().unwrap_or_default();
        let api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), rs.metadata.namespace.as_deref().unwrap_or_default());
        let written = api.replace(&name, &PostParams::default(), &updated).await.map_err(Error::Kube)?;
        let from = rs_replicas(rs);
        if from != size {
            tracing::info!(target: TARGET, deployment = %key_of(d), replicaset = %name, from, to = size, "scaled");
            self.recorder.event(reference(d), client::record::NORMAL, "ScalingReplicaSet", scaling_message(&name, from, size));
        }
        Ok(written)
    }

    /// A scaling event (sync.go's scale): the one active ReplicaSet takes the new size; with a
    /// saturated new one, the old ones go to zero; mid-rollout, every active one takes its share.
    pub(super) async fn sync_scale(&self, d: &Deployment, sets: Sets) -> Result<Option<std::time::Duration>> {
        let (new_rs, mut olds) = self.get_all_replica_sets_and_sync_revision(d, sets, false).await?;
        let mut all: Vec<ReplicaSet> = scaled_all(&olds, new_rs.as_ref());
        let active: Vec<usize> = (0..all.len()).filter(|i| rs_replicas(&all[*i]) > 0).collect();
        let want = replicas(d);
        if active.len() <= 1 {
            // FindActiveOrLatest.
            let target = active.first().copied().or_else(|| new_rs.as_ref().map(|_| all.len() - 1)).or_else(|| all.len().checked_sub(1));
            if let Some(i) = target {
                all[i] = self.scale_replica_set(&all[i], want, d).await?;
            }
        } else if let Some(new) = new_rs.as_ref().filter(|n| rs_replicas(n) == want && n.status.as_ref().and_then(|s| s.available_replicas).unwrap_or(0) >= want) {
            let _ = new;
            for rs in olds.iter_mut() {
                *rs = self.scale_replica_set(rs, 0, d).await?;
            }
            all = scaled_all(&olds, new_rs.as_ref());
        } else {
            // Newest first, so the new ReplicaSet takes a rounding leftover among equals.
            let mut order = active.clone();
            order.sort_by(|a, b| all[*b].metadata.creation_timestamp.as_ref().map(|t| t.0).cmp(&all[*a].metadata.creation_timestamp.as_ref().map(|t| t.0)));
            let sizes: Vec<i32> = order.iter().map(|i| rs_replicas(&all[*i])).collect();
            let allowed = if want > 0 { want + max_surge(d) } else { 0 };
            let new_sizes = proportional_sizes(&sizes, allowed);
            for (i, size) in order.into_iter().zip(new_sizes) {
                all[i] = self.scale_replica_set(&all[i], size, d).await?;
            }
        }
        let new_now = new_rs.as_ref().and_then(|n| all.iter().find(|r| r.metadata.uid == n.metadata.uid).cloned());
        self.sync_rollout_status(d, &all, new_now.as_ref()).await
    }

    /// A paused Deployment: scaling and cleanup only, and the Progressing condition says paused.
    pub(super) async fn sync_paused(&self, d: &Deployment, sets: Sets) -> Result<Option<std::time::Duration>> {
        if super::deployment_controller::is_scaling_event(d, &sets.all) {
            return self.sync_scale(d, sets).await;
        }
        let (new_rs, olds) = self.get_all_replica_sets_and_sync_revision(d, sets, false).await?;
        self.cleanup_deployment(d, &olds).await?;
        self.sync_rollout_status(d, &scaled_all(&olds, new_rs.as_ref()), new_rs.as_ref()).await
    }

    /// Whether the rollout is complete with these ReplicaSets.
    pub(super) fn complete_now(&self, d: &Deployment, all: &[ReplicaSet], new_rs: Option<&ReplicaSet>) -> bool {
        let refs: Vec<&ReplicaSet> = all.iter().collect();
        progress::deployment_complete(d, &calculate_status(d, &refs, new_rs, Timestamp::now()))
    }

    /// cleanupDeployment: the old ReplicaSets without pods beyond `revisionHistoryLimit`, the
    /// lowest revisions first.
    pub(super) async fn cleanup_deployment(&self, d: &Deployment, olds: &[ReplicaSet]) -> Result<()> {
        let limit = d.spec.revision_history_limit.unwrap_or(DEFAULT_REVISION_HISTORY_LIMIT).max(0) as usize;
        let mut idle: Vec<&ReplicaSet> = olds
            .iter()
            .filter(|rs| {
                let s = rs.status.clone().unwrap_or_default();
                rs_replicas(rs) == 0 && s.replicas == 0 && s.observed_generation >= rs.metadata.generation && rs.metadata.deletion_timestamp.is_none()
            })
            .collect();
        if idle.len() <= limit {
            return Ok(());
        }
        idle.sort_by_key(|rs| revision(&rs.metadata));
        let api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), d.metadata.namespace.as_deref().unwrap_or_default());
        for rs in &idle[..idle.len() - limit] {
            let name = rs.metadata.name.clone().unwrap_or_default();
            tracing::info!(target: TARGET, deployment = %key_of(d), replicaset = %name, "deleting old ReplicaSet beyond revisionHistoryLimit");
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(Error::Kube(e)),
            }
        }
        Ok(())
    }

    /// syncRolloutStatus: the status from the ReplicaSets, the Progressing condition (or the
    /// paused one), written when it changed; when to look again for the progress deadline.
    pub(super) async fn sync_rollout_status(&self, d: &Deployment, all: &[ReplicaSet], new_rs: Option<&ReplicaSet>) -> Result<Option<std::time::Duration>> {
        let now = Timestamp::now();
        let refs: Vec<&ReplicaSet> = all.iter().collect();
        let old = d.status.clone().unwrap_or_default();
        let mut status = calculate_status(d, &refs, new_rs, now);
        if let Some((reason, message)) = self.notes.lock().unwrap_or_else(|e| e.into_inner()).remove(&key_of(d)) {
            set_condition(&mut status, "Progressing", "True", &reason, message, now);
        }
        let paused = d.spec.paused == Some(true);
        let cur_reason = condition(&status, "Progressing").and_then(|c| c.reason.clone());
        if paused {
            if cur_reason.as_deref() != Some(PAUSED) {
                set_condition(&mut status, "Progressing", "Unknown", PAUSED, "Deployment is paused".into(), now);
            }
        } else if cur_reason.as_deref() == Some(PAUSED) {
            set_condition(&mut status, "Progressing", "Unknown", RESUMED, "Deployment is resumed".into(), now);
        } else {
            update_progressing(d, &old, &mut status, new_rs, now);
        }
        let requeue = if paused { None } else { progress::requeue_for_deadline(d, &status, now) };
        if Some(&status) != d.status.as_ref() {
            self.write_status(d, status).await?;
        }
        Ok(requeue)
    }

    /// An update of the status subresource (Kubernetes' `UpdateStatus`) with the cached
    /// resourceVersion. A Conflict — often this sync's own revision annotation, written just
    /// before — is met by a fresh read: of the same generation (the spec the status was computed
    /// from), the status goes onto it, up to [`STATUS_UPDATE_RETRIES`] times; of a newer one, the
    /// Conflict goes back to the queue.
    async fn write_status(&self, d: &Deployment, status: DeploymentStatus) -> Result<()> {
        let api: Api<Deployment> = Api::namespaced(self.client.clone(), d.metadata.namespace.as_deref().unwrap_or_default());
        let name = d.metadata.name.as_deref().unwrap_or_default();
        let mut current = d.clone();
        let mut retries = 0;
        loop {
            current.status = Some(status.clone());
            match api.replace_status(name, &PostParams::default(), &current).await {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
                Err(kube::Error::Api(s)) if s.code == 409 && retries < STATUS_UPDATE_RETRIES => {
                    retries += 1;
                    match api.get_opt(name).await.map_err(Error::Kube)? {
                        None => return Ok(()),
                        Some(fresh) if fresh.metadata.generation == d.metadata.generation => current = fresh,
                        Some(_) => return Err(Error::Kube(kube::Error::Api(s))),
                    }
                }
                Err(e) => return Err(Error::Kube(e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_mid_rollout_is_proportional() {
        // (sizes newest first, replicas + surge) -> sizes
        let cases: [(&[i32], i32, &[i32]); 5] = [
            (&[2, 4], 9, &[3, 6]),    // 6 -> 9: half as many again each
            (&[3, 3], 7, &[4, 3]),    // the leftover to the first of equals (the newest)
            (&[5, 5], 4, &[2, 2]),    // shrinking
            (&[0, 4], 8, &[0, 8]),
            (&[2, 2], 4, &[2, 2]),
        ];
        for (sizes, allowed, want) in cases {
            assert_eq!(proportional_sizes(sizes, allowed), want, "{sizes:?} -> {allowed}");
        }
        assert_eq!(scaling_message("web-x", 1, 3), "Scaled up replica set web-x from 1 to 3");
        assert_eq!(scaling_message("web-x", 3, 0), "Scaled down replica set web-x from 3 to 0");
    }
}
