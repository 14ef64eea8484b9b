//! Mirrors pkg/controller/statefulset/stateful_set_status_updater.go: writes a StatefulSet's
//! status through `statefulsets/<name>/status`, retrying a conflict on a fresh read (the
//! status is the controller's to write; a conflict only means the spec or metadata moved on).

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetStatus};
use kube::api::{Api, PostParams};

use crate::error::{Error, Result};

/// How often a conflicting write is tried again (client-go's `retry.DefaultRetry`).
const RETRIES: usize = 5;

/// StatefulSetStatusUpdater (realStatefulSetStatusUpdater).
#[derive(Clone)]
pub struct StatefulSetStatusUpdater {
    client: kube::Client,
}

impl StatefulSetStatusUpdater {
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    /// UpdateStatefulSetStatus: `status` becomes the set's status (its conditions, which this
    /// controller does not set, are kept). A set gone meanwhile needs no status.
    pub async fn update_stateful_set_status(&self, set: &StatefulSet, status: &StatefulSetStatus) -> Result<()> {
        let name = set.metadata.name.clone().unwrap_or_default();
        let api: Api<StatefulSet> = Api::namespaced(self.client.clone(), set.metadata.namespace.as_deref().unwrap_or_default());
        let mut set = set.clone();
        for attempt in 1..=RETRIES {
            let mut status = status.clone();
            status.conditions = set.status.as_ref().and_then(|s| s.conditions.clone());
            set.status = Some(status);
            match api.replace_status(&name, &PostParams::default(), &set).await {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
                Err(kube::Error::Api(s)) if s.code == 409 && attempt < RETRIES => {
                    match api.get_opt(&name).await.map_err(Error::Kube)? {
                        Some(fresh) => set = fresh,
                        None => return Ok(()),
                    }
                }
                Err(e) => return Err(Error::Kube(e)),
            }
        }
        // Each attempt returns or reads afresh; the last one returns.
        Ok(())
    }
}
