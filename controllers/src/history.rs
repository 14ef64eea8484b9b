//! Mirrors pkg/controller/history/controller_history.go: the ControllerRevisions through which
//! the DaemonSet and StatefulSet controllers remember the templates they have rolled out. A
//! revision holds a patch that restores its parent's template (`data`), a number (`revision`,
//! higher is newer) and, in its name and its `controller-revision-hash` label, a hash of that
//! data, so that the same template always lands in the same revision.
//!
//! What a controller does with it:
//! 1. List the revisions of its parent ([`History::list_controller_revisions`]: those its
//!    selector matches that it controls, or that no one controls) and claim them with
//!    [`crate::controller_ref_manager::ControllerRefManager`] (adopting orphans, releasing what
//!    no longer matches), then sort them ([`sort_controller_revisions`]).
//! 2. Build the revision of the current template ([`new_controller_revision`]) and look for an
//!    equal one ([`find_equal_revisions`]): the newest equal one is re-numbered to the next
//!    revision if it is not already the newest ([`History::update_controller_revision`]) — a
//!    rollback re-uses its old revision — otherwise the new one is created
//!    ([`History::create_controller_revision`], which steps the parent's collision count when
//!    a different revision already has the name).
//! 3. Delete the oldest revisions no pod uses beyond `revisionHistoryLimit`
//!    ([`History::delete_controller_revision`]).

use std::cmp::Ordering;
use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::Value;

use crate::controller_utils::{controller_of, safe_encoded_fnv32a};
use crate::error::{Error, Result};

/// The label a revision and the pods made from it carry (`ControllerRevisionHashLabel`).
pub const CONTROLLER_REVISION_HASH_LABEL: &str = "controller-revision-hash";

/// The longest parent-name prefix of a revision's name: 253 less the hash and its dash.
const MAX_PREFIX: usize = 223;

/// HashControllerRevision: FNV-32a of the revision's data (its JSON) and, when given, the
/// collision count in decimal, safe-encoded. The hash depends on the data only, not on the
/// revision's number or labels.
pub fn hash_controller_revision(revision: &ControllerRevision, probe: Option<i32>) -> String {
    let data = revision.data.0.to_string();
    let probe = probe.map(|p| p.to_string()).unwrap_or_default();
    safe_encoded_fnv32a(&[data.as_bytes(), probe.as_bytes()])
}

/// ControllerRevisionName: `<prefix>-<hash>`, the prefix cut to 223 characters.
pub fn controller_revision_name(prefix: &str, hash: &str) -> String {
    let cut = prefix.char_indices().nth(MAX_PREFIX).map_or(prefix.len(), |(i, _)| i);
    format!("{}-{hash}", &prefix[..cut])
}

/// NewControllerRevision: a revision of `parent` holding `data`, with the template's labels, the
/// parent as its controller (`owner`), its number, and the name and hash label of its data and
/// the parent's collision count.
pub fn new_controller_revision(
    parent: &ObjectMeta,
    owner: OwnerReference,
    template_labels: &BTreeMap<String, String>,
    data: Value,
    revision: i64,
    collision_count: Option<i32>,
) -> ControllerRevision {
    let mut cr = ControllerRevision {
        metadata: ObjectMeta {
            namespace: parent.namespace.clone(),
            labels: Some(template_labels.clone()),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        data: RawExtension(data),
        revision: Some(revision),
    };
    let hash = hash_controller_revision(&cr, collision_count);
    cr.metadata.name = Some(controller_revision_name(parent.name.as_deref().unwrap_or_default(), &hash));
    cr.metadata.labels.get_or_insert_with(BTreeMap::new).insert(CONTROLLER_REVISION_HASH_LABEL.into(), hash);
    cr
}

fn hash_label(cr: &ControllerRevision) -> Option<&str> {
    cr.metadata.labels.as_ref()?.get(CONTROLLER_REVISION_HASH_LABEL).map(String::as_str).filter(|h| !h.is_empty())
}

/// EqualRevision: the same data — and, when both carry a hash label, the same hash (a cheap
/// first test; two revisions that differ only in the collision count are different).
pub fn equal_revision(a: &ControllerRevision, b: &ControllerRevision) -> bool {
    if let (Some(x), Some(y)) = (hash_label(a), hash_label(b))
        && x != y
    {
        return false;
    }
    a.data.0 == b.data.0
}

/// FindEqualRevisions: the revisions equal to `needle`, in the order given.
pub fn find_equal_revisions<'a>(revisions: &'a [ControllerRevision], needle: &ControllerRevision) -> Vec<&'a ControllerRevision> {
    revisions.iter().filter(|r| equal_revision(r, needle)).collect()
}

/// byRevision: oldest first — by number, then creation time, then name.
pub fn sort_controller_revisions(revisions: &mut [ControllerRevision]) {
    revisions.sort_by(|a, b| {
        a.revision
            .unwrap_or(0)
            .cmp(&b.revision.unwrap_or(0))
            .then_with(|| match (&a.metadata.creation_timestamp, &b.metadata.creation_timestamp) {
                (Some(x), Some(y)) => x.0.cmp(&y.0),
                _ => Ordering::Equal,
            })
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
}

/// NextRevision: one more than the highest number (1 for the first revision).
pub fn next_revision(revisions: &[ControllerRevision]) -> i64 {
    revisions.iter().filter_map(|r| r.revision).max().unwrap_or(0) + 1
}

/// realHistory: ControllerRevisions read and written through the API server.
#[derive(Clone)]
pub struct History {
    client: kube::Client,
}

impl History {
    pub fn new(client: kube::Client) -> History {
        History { client }
    }

    fn api(&self, namespace: &str) -> Api<ControllerRevision> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// ListControllerRevisions: the revisions in `namespace` that `selector` (a label selector
    /// in its query form) matches and that the parent `parent_uid` controls or that no one
    /// controls (candidates for adoption).
    pub async fn list_controller_revisions(&self, namespace: &str, parent_uid: &str, selector: &str) -> Result<Vec<ControllerRevision>> {
        let list = self.api(namespace).list(&ListParams::default().labels(selector)).await.map_err(Error::Kube)?;
        Ok(list.items.into_iter().filter(|r| controller_of(&r.metadata).is_none_or(|c| c.uid == parent_uid)).collect())
    }

    /// CreateControllerRevision: creates `revision` under the name its data and
    /// `*collision_count` give. When that name is taken by a revision with the same data, that
    /// one is the answer; when by a different one (a hash collision), the count is stepped and
    /// the name computed again — the caller stores the new count in the parent's status, so the
    /// next sync finds the same name.
    pub async fn create_controller_revision(&self, parent: &ObjectMeta, revision: &ControllerRevision, collision_count: &mut i32) -> Result<ControllerRevision> {
        let namespace = parent.namespace.as_deref().unwrap_or_default();
        let api = self.api(namespace);
        loop {
            let mut clone = revision.clone();
            let hash = hash_controller_revision(revision, Some(*collision_count));
            clone.metadata.name = Some(controller_revision_name(parent.name.as_deref().unwrap_or_default(), &hash));
            clone.metadata.namespace = Some(namespace.to_string());
            clone.metadata.labels.get_or_insert_with(BTreeMap::new).insert(CONTROLLER_REVISION_HASH_LABEL.into(), hash);
            let name = clone.metadata.name.clone().unwrap_or_default();
            match api.create(&PostParams::default(), &clone).await {
                Ok(created) => return Ok(created),
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    let existing = api.get(&name).await.map_err(Error::Kube)?;
                    if existing.data.0 == clone.data.0 {
                        return Ok(existing);
                    }
                    tracing::info!(target: "controllers::history", revision = %name, collision_count = *collision_count, "hash collision, stepping the collision count");
                    *collision_count = collision_count.saturating_add(1);
                }
                Err(e) => return Err(Error::Kube(e)),
            }
        }
    }

    /// UpdateControllerRevision: gives an existing revision a new number (a rollback to an old
    /// template makes its revision the newest). A conflicting write is retried on a fresh read.
    pub async fn update_controller_revision(&self, revision: &ControllerRevision, new_revision: i64) -> Result<ControllerRevision> {
        let namespace = revision.metadata.namespace.as_deref().unwrap_or_default();
        let name = revision.metadata.name.as_deref().unwrap_or_default();
        let api = self.api(namespace);
        let mut current = revision.clone();
        loop {
            if current.revision == Some(new_revision) {
                return Ok(current);
            }
            current.revision = Some(new_revision);
            match api.replace(name, &PostParams::default(), &current).await {
                Ok(updated) => return Ok(updated),
                Err(kube::Error::Api(s)) if s.code == 409 => current = api.get(name).await.map_err(Error::Kube)?,
                Err(e) => return Err(Error::Kube(e)),
            }
        }
    }

    /// DeleteControllerRevision (one already gone counts as deleted).
    pub async fn delete_controller_revision(&self, revision: &ControllerRevision) -> Result<()> {
        let namespace = revision.metadata.namespace.as_deref().unwrap_or_default();
        let name = revision.metadata.name.as_deref().unwrap_or_default();
        match self.api(namespace).delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(Error::Kube(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parent() -> ObjectMeta {
        ObjectMeta { name: Some("web".into()), namespace: Some("default".into()), uid: Some("u1".into()), ..ObjectMeta::default() }
    }

    fn owner() -> OwnerReference {
        crate::controller_utils::controller_ref("apps/v1", "StatefulSet", &parent())
    }

    fn rev(image: &str, n: i64, collision: Option<i32>) -> ControllerRevision {
        let labels = BTreeMap::from([("app".to_string(), "web".to_string())]);
        let data = json!({"spec": {"template": {"$patch": "replace", "spec": {"containers": [{"name": "c", "image": image}]}}}});
        new_controller_revision(&parent(), owner(), &labels, data, n, collision)
    }

    #[test]
    fn a_revision_is_named_by_its_data_and_the_collision_count() {
        let a = rev("nginx:1", 1, None);
        let name = a.metadata.name.clone().unwrap();
        let hash = hash_label(&a).unwrap().to_string();
        assert_eq!(name, format!("web-{hash}"));
        assert!(hash.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)), "{hash}");
        assert_eq!(a.metadata.labels.as_ref().unwrap()["app"], "web", "template labels kept");
        assert_eq!(a.metadata.owner_references.as_ref().unwrap()[0].uid, "u1");
        // The number does not change the hash; the data and the collision count do.
        assert_eq!(rev("nginx:1", 7, None).metadata.name, a.metadata.name);
        assert_ne!(rev("nginx:2", 1, None).metadata.name, a.metadata.name);
        assert_ne!(rev("nginx:1", 1, Some(1)).metadata.name, a.metadata.name);
        assert_eq!(hash_controller_revision(&a, Some(0)), hash_controller_revision(&a, Some(0)));
        assert_ne!(hash_controller_revision(&a, Some(0)), hash_controller_revision(&a, None), "a probe of 0 is written");
    }

    #[test]
    fn long_parent_names_are_cut() {
        let long = "a".repeat(300);
        let name = controller_revision_name(&long, "xyz");
        assert_eq!(name.len(), 223 + 4);
        assert!(name.ends_with("-xyz"));
    }

    #[test]
    fn equality_is_by_data_and_hash() {
        let a = rev("nginx:1", 1, None);
        let b = rev("nginx:1", 5, None);
        let c = rev("nginx:2", 2, None);
        assert!(equal_revision(&a, &b));
        assert!(!equal_revision(&a, &c));
        // Same data under another collision count: different hash labels, not equal.
        assert!(!equal_revision(&a, &rev("nginx:1", 1, Some(3))));
        // Without labels only the data counts.
        let mut bare = b.clone();
        bare.metadata.labels = None;
        assert!(equal_revision(&a, &bare));
        let all = vec![a.clone(), c.clone(), b.clone()];
        let found = find_equal_revisions(&all, &a);
        assert_eq!(found.iter().map(|r| r.revision).collect::<Vec<_>>(), vec![Some(1), Some(5)]);
    }

    #[test]
    fn sorting_and_the_next_number() {
        let mut rs = vec![rev("c", 3, None), rev("a", 1, None), rev("b", 1, None)];
        // Same number, no creation time: by name.
        sort_controller_revisions(&mut rs);
        assert_eq!(rs.iter().map(|r| r.revision).collect::<Vec<_>>(), vec![Some(1), Some(1), Some(3)]);
        assert!(rs[0].metadata.name < rs[1].metadata.name);
        assert_eq!(next_revision(&rs), 4);
        assert_eq!(next_revision(&[]), 1);
    }
}
