//! Mirrors pkg/controller/deployment/rolling.go: a RollingUpdate rollout. Each sync takes one
//! step and returns; the ReplicaSets' status changes bring the next sync.
//!
//! 1. Scale the new ReplicaSet up as far as `maxSurge` allows ([`super::util::new_rs_new_replicas`]);
//!    if it grew, stop here.
//! 2. Scale the old ReplicaSets down as far as `maxUnavailable` allows ([`plan_old_scale_down`]):
//!    first their unhealthy pods (those not available cost no availability), then available
//!    ones while more than `replicas - maxUnavailable` pods stay available.
//! 3. Once the rollout is complete, delete the old ReplicaSets beyond `revisionHistoryLimit`;
//!    then write the status.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};

use super::deployment_controller::{DeploymentController, Sets};
use super::util::{max_unavailable, new_rs_new_replicas, replicas, rs_replicas, scaled_all};
use crate::error::Result;

/// What step 2 sees of one ReplicaSet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RsView {
    pub spec: i32,
    pub available: i32,
}

pub fn view(rs: &ReplicaSet) -> RsView {
    RsView { spec: rs_replicas(rs), available: rs.status.as_ref().and_then(|s| s.available_replicas).unwrap_or(0) }
}

/// Step 1's target for the new ReplicaSet, if it should change.
pub fn plan_new_scale(d: &Deployment, all_spec: i32, new: RsView) -> Option<i32> {
    let want = replicas(d);
    let target = if new.spec > want { want } else { new_rs_new_replicas(d, all_spec, new.spec) };
    (target != new.spec).then_some(target)
}

/// Step 2 (reconcileOldReplicaSets): the new size of each old ReplicaSet that shrinks, by index.
/// `olds` are sorted oldest first.
pub fn plan_old_scale_down(d: &Deployment, olds: &[RsView], new: Option<RsView>) -> Vec<(usize, i32)> {
    let old_spec: i32 = olds.iter().map(|r| r.spec).sum();
    if old_spec == 0 {
        return Vec::new();
    }
    let new = new.unwrap_or(RsView { spec: 0, available: 0 });
    let all_spec = old_spec + new.spec;
    let min_available = replicas(d) - max_unavailable(d);
    let new_unavailable = (new.spec - new.available).max(0);
    let max_scaled_down = all_spec - min_available - new_unavailable;
    if max_scaled_down <= 0 {
        return Vec::new();
    }
    let mut sizes: Vec<i32> = olds.iter().map(|r| r.spec).collect();
    // Unhealthy pods first (cleanupUnhealthyReplicas).
    let mut cleaned = 0;
    for (i, r) in olds.iter().enumerate() {
        if cleaned >= max_scaled_down {
            break;
        }
        let unhealthy = (r.spec - r.available).max(0);
        let n = unhealthy.min(max_scaled_down - cleaned);
        sizes[i] -= n;
        cleaned += n;
    }
    // Then available ones while enough stay available (scaleDownOldReplicaSetsForRollingUpdate).
    let available: i32 = olds.iter().map(|r| r.available).sum::<i32>() + new.available;
    let mut total = (available - min_available).max(0).min(max_scaled_down - cleaned);
    for size in &mut sizes {
        if total == 0 {
            break;
        }
        let n = (*size).min(total);
        *size -= n;
        total -= n;
    }
    sizes.iter().enumerate().filter(|(i, s)| **s != olds[*i].spec).map(|(i, s)| (i, *s)).collect()
}

impl DeploymentController {
    /// rolloutRolling: steps 1–3.
    pub(super) async fn rollout_rolling(&self, d: &Deployment, sets: Sets) -> Result<Option<std::time::Duration>> {
        let (new_rs, olds) = self.get_all_replica_sets_and_sync_revision(d, sets, true).await?;
        let all_spec: i32 = olds.iter().map(rs_replicas).sum::<i32>() + new_rs.as_ref().map_or(0, rs_replicas);
        // Step 1.
        if let Some(new) = &new_rs
            && let Some(target) = plan_new_scale(d, all_spec, view(new))
        {
            let scaled = self.scale_replica_set(new, target, d).await?;
            return self.sync_rollout_status(d, &scaled_all(&olds, Some(&scaled)), Some(&scaled)).await;
        }
        // Step 2.
        let mut olds_sorted = olds.clone();
        olds_sorted.sort_by(|a, b| a.metadata.creation_timestamp.as_ref().map(|t| t.0).cmp(&b.metadata.creation_timestamp.as_ref().map(|t| t.0)));
        let views: Vec<RsView> = olds_sorted.iter().map(view).collect();
        let plan = plan_old_scale_down(d, &views, new_rs.as_ref().map(view));
        if !plan.is_empty() {
            for (i, size) in plan {
                olds_sorted[i] = self.scale_replica_set(&olds_sorted[i], size, d).await?;
            }
            return self.sync_rollout_status(d, &scaled_all(&olds_sorted, new_rs.as_ref()), new_rs.as_ref()).await;
        }
        // Step 3.
        let all = scaled_all(&olds, new_rs.as_ref());
        if self.complete_now(d, &all, new_rs.as_ref()) {
            self.cleanup_deployment(d, &olds).await?;
        }
        self.sync_rollout_status(d, &all, new_rs.as_ref()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn d(replicas: i32, surge: i32, unavailable: i32) -> Deployment {
        serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": {"replicas": replicas, "selector": {},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}}, "template": {}}}))
        .expect("deployment")
    }

    fn v(spec: i32, available: i32) -> RsView {
        RsView { spec, available }
    }

    #[test]
    fn the_new_replica_set_grows_by_the_surge() {
        // 3 replicas, surge 1: old 3 + new 0 → new 1; then (after old shrinks to 2) new 2 …
        assert_eq!(plan_new_scale(&d(3, 1, 0), 3, v(0, 0)), Some(1));
        assert_eq!(plan_new_scale(&d(3, 1, 0), 4, v(1, 0)), None);
        assert_eq!(plan_new_scale(&d(3, 1, 0), 3, v(1, 1)), Some(2));
        assert_eq!(plan_new_scale(&d(3, 1, 0), 3, v(3, 3)), None);
        assert_eq!(plan_new_scale(&d(2, 1, 0), 5, v(5, 5)), Some(2), "scaled down to the replicas");
    }

    #[test]
    fn old_replica_sets_shrink_within_the_unavailability() {
        // 3 replicas, surge 1, unavailable 0: old 3 (all available), new 1 not yet available.
        assert_eq!(plan_old_scale_down(&d(3, 1, 0), &[v(3, 3)], Some(v(1, 0))), vec![]);
        // new pod available: one old may go.
        assert_eq!(plan_old_scale_down(&d(3, 1, 0), &[v(3, 3)], Some(v(1, 1))), vec![(0, 2)]);
        // unavailable 1, no surge: one old goes before any new pod exists.
        assert_eq!(plan_old_scale_down(&d(3, 0, 1), &[v(3, 3)], Some(v(0, 0))), vec![(0, 2)]);
        // Unhealthy old pods go first and cost nothing: old 3 with 1 available, new 1 available
        // (4 pods, 3 must stay: one may go, an unhealthy one).
        assert_eq!(plan_old_scale_down(&d(3, 1, 0), &[v(3, 1)], Some(v(1, 1))), vec![(0, 2)]);
        // Two old sets, oldest first.
        assert_eq!(plan_old_scale_down(&d(4, 1, 1), &[v(1, 1), v(3, 3)], Some(v(1, 1))), vec![(0, 0), (1, 2)]);
        // Nothing old left.
        assert_eq!(plan_old_scale_down(&d(3, 1, 0), &[v(0, 0)], Some(v(3, 3))), vec![]);
    }
}
