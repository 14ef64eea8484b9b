//! Mirrors pkg/controller/statefulset/stateful_pod_control.go: the StatefulSet controller's
//! writes to pods — create, give back identity and storage, delete — each recorded as an event
//! on the set (`SuccessfulCreate` "create Pod web-0 in StatefulSet web successful",
//! `FailedCreate` "... failed error: ...", and likewise for update and delete); and to their
//! claims: those of `volumeClaimTemplates` are created before the pod ("create Claim data-web-0
//! Pod web-0 in StatefulSet web success"), and given the owners the retention policy asks for
//! after it ([`StatefulPodControl::update_pod_claim_for_retention_policy`]).

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, PostParams};

use super::stateful_set_utils::{
    claim_owner_up_to_date, has_stale_pod_owner_ref, has_unexpected_controller, ordinal_of, persistent_volume_claims, retention_policy, storage_matches, update_claim_owner_refs,
    update_identity, update_storage, identity_matches,
};
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

/// The reason and message of a claim event (recordClaimEvent).
pub fn claim_event(verb: &str, set: &str, pod: &str, claim: &str, err: Option<&str>) -> (&'static str, String, String) {
    let mut title = verb.to_string();
    if let Some(first) = title.get_mut(..1) {
        first.make_ascii_uppercase();
    }
    match err {
        None => (client::record::NORMAL, format!("Successful{title}"), format!("{verb} Claim {claim} Pod {pod} in StatefulSet {set} success")),
        Some(e) => (client::record::WARNING, format!("Failed{title}"), format!("{verb} Claim {claim} for Pod {pod} in StatefulSet {set} failed error: {e}")),
    }
}

/// utilerrors.NewAggregate's message: one error as it is, several in brackets.
fn aggregate(errs: Vec<String>) -> Result<()> {
    match errs.len() {
        0 => Ok(()),
        1 => Err(Error::Message(errs.into_iter().next().unwrap_or_default())),
        _ => Err(Error::Message(format!("[{}]", errs.join(", ")))),
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

    fn claims(&self, set: &StatefulSet) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.client.clone(), set.metadata.namespace.as_deref().unwrap_or_default())
    }

    fn record(&self, verb: &str, set: &StatefulSet, pod: &str, err: Option<&kube::Error>) {
        let msg = err.map(message_of);
        self.record_message(verb, set, pod, msg.as_deref());
    }

    fn record_message(&self, verb: &str, set: &StatefulSet, pod: &str, err: Option<&str>) {
        let (type_, reason, message) = pod_event(verb, set.metadata.name.as_deref().unwrap_or_default(), pod, err);
        self.recorder.event(reference(set), type_, &reason, message);
    }

    fn record_claim(&self, verb: &str, set: &StatefulSet, pod: &Pod, claim: &str, err: Option<&str>) {
        let (type_, reason, message) = claim_event(verb, set.metadata.name.as_deref().unwrap_or_default(), pod.metadata.name.as_deref().unwrap_or_default(), claim, err);
        self.recorder.event(reference(set), type_, &reason, message);
    }

    /// CreateStatefulPod: the pod's claims first, then the pod, then the claims' owners as the
    /// retention policy wants them. A pod that already exists is an error without an event (the
    /// cache has not shown it yet; the sync is retried).
    pub async fn create_stateful_pod(&self, set: &StatefulSet, pod: &Pod) -> Result<()> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        if let Err(e) = self.create_persistent_volume_claims(set, pod).await {
            self.record_message("create", set, &name, Some(&e.to_string()));
            return Err(e);
        }
        let result = self.api(set).create(&PostParams::default(), pod).await;
        if let Err(kube::Error::Api(s)) = &result
            && s.code == 409
        {
            return result.map(|_| ()).map_err(Error::Kube);
        }
        if result.is_ok()
            && let Err(e) = self.update_pod_claim_for_retention_policy(set, pod).await
        {
            self.record_message("update", set, &name, Some(&e.to_string()));
            return Err(e);
        }
        self.record("create", set, &name, result.as_ref().err());
        result.map(|_| ()).map_err(Error::Kube)
    }

    /// createPersistentVolumeClaims: each claim of the pod's ordinal that does not exist is
    /// created; one being deleted is an error (the pod waits for it to go and be made anew).
    pub async fn create_persistent_volume_claims(&self, set: &StatefulSet, pod: &Pod) -> Result<()> {
        let api = self.claims(set);
        let mut errs = Vec::new();
        for claim in persistent_volume_claims(set, ordinal_of(pod)).into_values() {
            let name = claim.metadata.name.clone().unwrap_or_default();
            match api.get_opt(&name).await {
                Ok(None) => match api.create(&PostParams::default(), &claim).await {
                    Ok(_) => self.record_claim("create", set, pod, &name, None),
                    Err(e) => {
                        let already = matches!(&e, kube::Error::Api(s) if s.code == 409);
                        let msg = message_of(&e);
                        errs.push(format!("failed to create PVC {name}: {msg}"));
                        if !already {
                            self.record_claim("create", set, pod, &name, Some(&msg));
                        }
                    }
                },
                Ok(Some(existing)) => {
                    if existing.metadata.deletion_timestamp.is_some() {
                        errs.push(format!("pvc {name} is being deleted"));
                    }
                }
                Err(e) => {
                    let msg = message_of(&e);
                    errs.push(format!("failed to retrieve PVC {name}: {msg}"));
                    self.record_claim("create", set, pod, &name, Some(&msg));
                }
            }
        }
        aggregate(errs)
    }

    /// PodClaimIsStale: with WhenScaled=Delete, a claim of the pod's ordinal owned by an earlier
    /// pod of the same name is on its way out; the pod is not created until it has gone.
    pub async fn pod_claim_is_stale(&self, set: &StatefulSet, pod: &Pod) -> Result<bool> {
        if retention_policy(set).1 == "Retain" {
            return Ok(false);
        }
        let api = self.claims(set);
        for name in persistent_volume_claims(set, ordinal_of(pod)).into_values().filter_map(|c| c.metadata.name) {
            if let Some(claim) = api.get_opt(&name).await.map_err(Error::Kube)?
                && has_stale_pod_owner_ref(&claim, pod)
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// UpdatePodClaimForRetentionPolicy: each existing claim of the pod gets the owner
    /// references the retention policy asks for ([`update_claim_owner_refs`]); a claim another
    /// controller holds gets a `ConflictingController` event and is left alone.
    pub async fn update_pod_claim_for_retention_policy(&self, set: &StatefulSet, pod: &Pod) -> Result<()> {
        let api = self.claims(set);
        let pod_name = pod.metadata.name.clone().unwrap_or_default();
        for name in persistent_volume_claims(set, ordinal_of(pod)).into_values().filter_map(|c| c.metadata.name) {
            let claim = match api.get_opt(&name).await {
                Ok(Some(c)) => c,
                // Picked up in a later pass.
                Ok(None) => continue,
                Err(_) => return Err(Error::Message(format!("could not retrieve claim {name} for {pod_name} when checking PVC deletion policy"))),
            };
            if has_unexpected_controller(&claim, set, pod) {
                let msg = format!("PersistentVolumeClaim {name} has a conflicting OwnerReference that acts as a manging controller, the retention policy is ignored for this claim");
                self.recorder.event(reference(set), client::record::WARNING, "ConflictingController", msg);
                continue;
            }
            if !claim_owner_up_to_date(&claim, set, pod) {
                let mut updated = claim.clone();
                updated.metadata.owner_references = Some(update_claim_owner_refs(&claim, set, pod));
                api.replace(&name, &PostParams::default(), &updated)
                    .await
                    .map_err(|e| Error::Message(format!("could not update claim {name} for delete policy ownerRefs: {}", message_of(&e))))?;
            }
        }
        Ok(())
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
                if let Err(e) = self.create_persistent_volume_claims(set, &pod).await {
                    self.record_message("update", set, &name, Some(&e.to_string()));
                    return Err(e);
                }
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
        let cases = [
            ("create", None, ("Normal", "SuccessfulCreate", "create Claim data-web-0 Pod web-0 in StatefulSet web success")),
            ("create", Some("boom"), ("Warning", "FailedCreate", "create Claim data-web-0 for Pod web-0 in StatefulSet web failed error: boom")),
        ];
        for (verb, err, (t, reason, message)) in cases {
            let (gt, gr, gm) = claim_event(verb, "web", "web-0", "data-web-0", err);
            assert_eq!((gt, gr.as_str(), gm.as_str()), (t, reason, message));
        }
        assert!(aggregate(vec![]).is_ok());
        assert_eq!(aggregate(vec!["a".into()]).map_err(|e| e.to_string()), Err("a".to_string()));
        assert_eq!(aggregate(vec!["a".into(), "b".into()]).map_err(|e| e.to_string()), Err("[a, b]".to_string()));
    }
}
