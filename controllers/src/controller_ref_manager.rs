//! Mirrors pkg/controller/controller_ref_manager.go: which objects a controller owns. An object
//! belongs to the controller its controller ownerReference names; a controller adopts the
//! orphans its selector matches and releases the objects it owns that its selector no longer
//! matches. Generic over the owned kind (`K`): the ReplicaSet controller claims Pods with it, a
//! Deployment controller would claim ReplicaSets.
//!
//! For each candidate ([`claim_decision`], pure):
//! 1. owned by another controller → ignored;
//! 2. owned by us and matching → ours; owned by us and no longer matching → released (unless we
//!    are being deleted: then it stays ours until the garbage collector's turn);
//! 3. an orphan that matches, not being deleted, while we are not being deleted → adopted, after
//!    a fresh read of the owner confirms it still exists with the same uid and is not being
//!    deleted (`canAdopt`: the cache may be stale, and adopting for a controller that is gone
//!    would orphan the object again at once).
//!
//! Adoption and release are JSON patches that first test the object's resourceVersion (or the
//! ownerReference's uid), so they never overwrite what someone else changed meanwhile; a refused
//! patch just leaves the object for the next sync.

use std::collections::BTreeMap;
use std::fmt::Debug;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::controller_utils::controller_of;
use crate::error::{Error, Result};

/// What to do with one candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    Ignore,
    Owned,
    Release,
    Adopt,
}

/// Steps 1–3 for one object, given the owner's uid and whether it is being deleted.
pub fn claim_decision(owner_uid: &str, owner_deleting: bool, controller: Option<&OwnerReference>, matches: bool, object_deleting: bool) -> Claim {
    match controller {
        Some(r) if r.uid != owner_uid => Claim::Ignore,
        Some(_) if matches => Claim::Owned,
        Some(_) if owner_deleting => Claim::Owned,
        Some(_) => Claim::Release,
        None if !matches || owner_deleting || object_deleting => Claim::Ignore,
        None => Claim::Adopt,
    }
}

/// A controller claiming objects of kind `K`.
pub struct ControllerRefManager<'a, K> {
    pub api: Api<K>,
    /// The controller reference adopted objects get.
    pub owner: OwnerReference,
    pub owner_deleting: bool,
    pub selector: &'a apimachinery::labels::Selector,
}

impl<K> ControllerRefManager<'_, K>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    /// ClaimObjects: the candidates that are ours after adoption and release. `can_adopt` is
    /// asked once, before the first adoption.
    pub async fn claim<F, Fut>(&self, candidates: Vec<std::sync::Arc<K>>, can_adopt: F) -> Result<Vec<std::sync::Arc<K>>>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<bool>>,
    {
        let mut can_adopt = Some(can_adopt);
        let mut adoptable: Option<bool> = None;
        let mut claimed = Vec::new();
        for obj in candidates {
            let labels: BTreeMap<String, String> = obj.labels().clone();
            let decision = claim_decision(&self.owner.uid, self.owner_deleting, controller_of(obj.meta()), self.selector.matches(&labels), obj.meta().deletion_timestamp.is_some());
            match decision {
                Claim::Ignore => {}
                Claim::Owned => claimed.push(obj),
                Claim::Release => self.release(&obj).await?,
                Claim::Adopt => {
                    if adoptable.is_none()
                        && let Some(check) = can_adopt.take()
                    {
                        adoptable = Some(check().await?);
                    }
                    if adoptable == Some(true)
                        && let Some(adopted) = self.adopt(&obj).await?
                    {
                        claimed.push(std::sync::Arc::new(adopted));
                    }
                }
            }
        }
        Ok(claimed)
    }

    /// AdoptPod: our controller reference added, if the object has not changed since it was read.
    async fn adopt(&self, obj: &K) -> Result<Option<K>> {
        let name = obj.name_any();
        let mut ops = vec![json!({"op": "test", "path": "/metadata/resourceVersion", "value": obj.meta().resource_version.clone().unwrap_or_default()})];
        if obj.meta().owner_references.is_some() {
            ops.push(json!({"op": "add", "path": "/metadata/ownerReferences/-", "value": self.owner}));
        } else {
            ops.push(json!({"op": "add", "path": "/metadata/ownerReferences", "value": [self.owner]}));
        }
        let patch: json_patch::Patch = serde_json::from_value(json!(ops)).map_err(|e| Error::Kube(kube::Error::SerdeError(e)))?;
        match self.api.patch(&name, &PatchParams::default(), &Patch::<()>::Json(patch)).await {
            Ok(o) => {
                tracing::info!(target: "controllers::controller_ref_manager", object = %name, owner = %self.owner.name, kind = %self.owner.kind, "adopted");
                Ok(Some(o))
            }
            // Gone, or changed meanwhile (the test failed): the next sync sees it anew.
            Err(kube::Error::Api(s)) if matches!(s.code, 404 | 409 | 422) => Ok(None),
            Err(e) => Err(Error::Kube(e)),
        }
    }

    /// ReleasePod: our controller reference removed (tested by uid at its index).
    async fn release(&self, obj: &K) -> Result<()> {
        let name = obj.name_any();
        let Some(i) = obj.meta().owner_references.iter().flatten().position(|r| r.uid == self.owner.uid) else { return Ok(()) };
        let mut ops = json!([
            {"op": "test", "path": format!("/metadata/ownerReferences/{i}/uid"), "value": self.owner.uid},
            {"op": "remove", "path": format!("/metadata/ownerReferences/{i}")},
        ]);
        // Its only reference: the field goes too (Kubernetes omits an empty list).
        if obj.meta().owner_references.as_ref().is_some_and(|r| r.len() == 1)
            && let Some(a) = ops.as_array_mut()
        {
            a.push(json!({"op": "remove", "path": "/metadata/ownerReferences"}));
        }
        let patch: json_patch::Patch = serde_json::from_value(ops).map_err(|e| Error::Kube(kube::Error::SerdeError(e)))?;
        match self.api.patch(&name, &PatchParams::default(), &Patch::<()>::Json(patch)).await {
            Ok(_) => {
                tracing::info!(target: "controllers::controller_ref_manager", object = %name, owner = %self.owner.name, kind = %self.owner.kind, "released");
                Ok(())
            }
            Err(kube::Error::Api(s)) if matches!(s.code, 404 | 409 | 422) => Ok(()),
            Err(e) => Err(Error::Kube(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn who_owns_what() {
        let ours = OwnerReference { uid: "me".into(), controller: Some(true), ..OwnerReference::default() };
        let theirs = OwnerReference { uid: "other".into(), controller: Some(true), ..OwnerReference::default() };
        // (controller, matches, object deleting, owner deleting) -> decision
        let cases = [
            (Some(&theirs), true, false, false, Claim::Ignore),
            (Some(&ours), true, false, false, Claim::Owned),
            (Some(&ours), false, false, false, Claim::Release),
            (Some(&ours), false, false, true, Claim::Owned),
            (None, true, false, false, Claim::Adopt),
            (None, false, false, false, Claim::Ignore),
            (None, true, true, false, Claim::Ignore),
            (None, true, false, true, Claim::Ignore),
        ];
        for (controller, matches, object_deleting, owner_deleting, want) in cases {
            assert_eq!(claim_decision("me", owner_deleting, controller, matches, object_deleting), want, "{controller:?} {matches} {object_deleting} {owner_deleting}");
        }
    }
}
