//! Mirrors pkg/controller/deployment/recreate.go: a Recreate rollout — every old pod gone before
//! any new one starts.
//!
//! 1. Scale every old ReplicaSet to 0; if one changed, stop here.
//! 2. Wait until no pod of an old ReplicaSet is left running (a pod's deletion queues the
//!    Deployment again).
//! 3. Create the new ReplicaSet if there is none, and scale it to the replicas.
//! 4. Once complete, clean up old ReplicaSets beyond `revisionHistoryLimit`; write the status.

use k8s_openapi::api::apps::v1::Deployment;

use super::deployment_controller::{DeploymentController, Sets};
use super::util::{replicas, rs_replicas, scaled_all};
use crate::error::Result;

impl DeploymentController {
    pub(super) async fn rollout_recreate(&self, d: &Deployment, sets: Sets) -> Result<Option<std::time::Duration>> {
        let (new_rs, mut olds) = self.get_all_replica_sets_and_sync_revision(d, sets, false).await?;
        // Step 1.
        let mut scaled = false;
        for rs in olds.iter_mut() {
            if rs_replicas(rs) != 0 {
                *rs = self.scale_replica_set(rs, 0, d).await?;
                scaled = true;
            }
        }
        if scaled {
            return self.sync_rollout_status(d, &scaled_all(&olds, new_rs.as_ref()), new_rs.as_ref()).await;
        }
        // Step 2.
        if self.old_pods_running(&olds) {
            return self.sync_rollout_status(d, &scaled_all(&olds, new_rs.as_ref()), new_rs.as_ref()).await;
        }
        // Step 3.
        let new_rs = match new_rs {
            Some(rs) => rs,
            None => {
                let sets = Sets { all: olds.clone() };
                match self.get_all_replica_sets_and_sync_revision(d, sets, true).await?.0 {
                    Some(rs) => rs,
                    None => return Ok(None),
                }
            }
        };
        let new_rs = if rs_replicas(&new_rs) != replicas(d) { self.scale_replica_set(&new_rs, replicas(d), d).await? } else { new_rs };
        // Step 4.
        let all = scaled_all(&olds, Some(&new_rs));
        if self.complete_now(d, &all, Some(&new_rs)) {
            self.cleanup_deployment(d, &olds).await?;
        }
        self.sync_rollout_status(d, &all, Some(&new_rs)).await
    }
}
