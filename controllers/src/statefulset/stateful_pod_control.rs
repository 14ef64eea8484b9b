//! Mirrors pkg/controller/statefulset/stateful_pod_control.go: the StatefulSet controller's
//! writes to pods — create, give back identity and storage, delete — each recorded as an event
//! on the set (`SuccessfulCreate` "create Pod web-0 in StatefulSet web successful",
//! `FailedCreate` "... failed error: ...", and likewise for update and delete).

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::api::{Api, DeleteParams, PostParams};

use super::stateful_set_utils::{identity_matches, storage_matches, update_identity, update_storage};
use crate::error::{Error, Result};

/// How often an identity update is tried again on a conflict (client-go's `retry.DefaultRetry`).
const UPDATE_RETRIES: usize = 5;

/// StatefulPodControl (realStatefulPodControl).
#[derive(Clone)]
pub struct StatefulPodControl {
    client: kube::Client,
    recorder: client::record::EventRecorder,
}

/// The set as its events name it.
pub fn reference(set: &StatefulSet) -> ObjectReference {
    client::record::object_reference("apps/v1", "StatefulSet", &set.metadata)
}

/// The reason and message of a pod event (recordPodEvent): `Successful<Verb>` /
/// `Failed<Verb>`.
pub fn pod_event(verb: &str, set: &str, pod: &str, err: Option<&str>) -> (&'static str, String, String) {
    let mut title = verb.to_string();
    if let Some(first) = title.get_mut(..1) {
        first.make_ascii_uppercase();
    }
    match err {
        None => (client::record::NORMAL, format!("Successful{title}"), format!("{verb} Pod {pod} in StatefulSet {set} successful")),
        Some(e) => (client::record::WARNING, format!("Failed{title}"), format!("{verb} Pod {pod} in StatefulSet {set} failed error: {e}")),
    }
}

fn message_of(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}

impl StatefulPodControl {
    pub fn new(client: kube::Client) -> Self {
        let recorder = client::record::EventRecorder::new(client.clone(), "statefulset-controller", None);
        Self { client, recorder }
    }

    /// The recorder, for the set's own events (recreating a failed pod).
    pub fn recorder(&self) -> &client::record::EventRecorder {
        &self.recorder
    }

    fn api(&self, set: &StatefulSet) -> Api<Pod> {
        Api::namespaced(self.client.clone(), set.metadata.namespace.as_deref().unwrap_or_default())
    }

    fn record(&self, verb: &str, set: &StatefulSet, pod: &str, err: Option<&kube::Error>) {
        let msg = err.map(message_of);
        let (type_, reason, message) = pod_event(verb, set.metadata.name.as_deref().unwrap_or_default(), pod, msg.as_deref());
        self.recorder.event(reference(set), type_, &reason, message);
    }

    /// CreateStatefulPod. A pod that already exists is an error (the cache has not shown it
    /// yet; the sync is retried). The claims of `volumeClaimTemplates` are not created here (see
    /// the crate's caveats).
    pub async fn create_stateful_pod(&self, set: &StatefulSet, pod: &Pod) -> Result<()> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let result = self.api(set).create(&PostParams::default(), pod).await;
        self.record("create", set, &name, result.as_ref().err());
        result.map(|_| ()).map_err(Error::Kube)
    }

    /// UpdateStatefulPod: gives the pod back the identity and storage of its ordinal, retrying
    /// on a conflict with a fresh read; nothing is written when both already match.
    pub async fn update_stateful_pod(&self, set: &StatefulSet, pod: &Pod) -> Result<()> {
        let api = self.api(set);
        let name = pod.metadata.name.clone().unwrap_or_default();
        let mut pod = pod.clone();
        for _ in 0..UPDATE_RETRIES {
            let mut consistent = true;
            if !identity_matches(set, &pod) {
                update_identity(set, &mut pod);
                consistent = false;
            }
            if !storage_matches(set, &pod) {
                update_storage(set, &mut pod);
                consistent = false;
            }
            if consistent {
                return Ok(());
            }
            match api.replace(&name, &PostParams::default(), &pod).await {
                Ok(_) => {
                    self.record("update", set, &name, None);
                    return Ok(());
                }
                Err(kube::Error::Api(s)) if s.code == 409 => match api.get_opt(&name).await.map_err(Error::Kube)? {
                    Some(fresh) => pod = fresh,
                    None => return Ok(()),
                },
                Err(e) => {
                    self.record("update", set, &name, Some(&e));
                    return Err(Error::Kube(e));
                }
            }
        }
        Ok(())
    }

    /// DeleteStatefulPod (one already gone is not an error).
    pub async fn delete_stateful_pod(&self, set: &StatefulSet, pod: &Pod) -> Result<()> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        match self.api(set).delete(&name, &DeleteParams::default()).await {
            Ok(_) => {
                self.record("delete", set, &name, None);
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => {
                self.record("delete", set, &name, Some(&e));
                Err(Error::Kube(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_worded_as_kube_controller_manager_words_them() {
        let cases = [
            ("create", None, ("Normal", "SuccessfulCreate", "create Pod web-0 in StatefulSet web successful")),
            ("delete", None, ("Normal", "SuccessfulDelete", "delete Pod web-0 in StatefulSet web successful")),
            ("update", Some("boom"), ("Warning", "FailedUpdate", "update Pod web-0 in StatefulSet web failed error: boom")),
        ];
        for (verb, err, (t, reason, message)) in cases {
            let (gt, gr, gm) = pod_event(verb, "web", "web-0", err);
            assert_eq!((gt, gr.as_str(), gm.as_str()), (t, reason, message));
        }
    }
}
