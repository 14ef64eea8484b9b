//! Mirrors pkg/controller/garbagecollector/graph.go: the dependency graph — one node per object
//! that owns or is owned, keyed by uid, with its owner references and its dependents — and the
//! pure decisions taken on it.

use std::collections::{HashMap, HashSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

/// Who an object is (objectReference: enough to GET it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub api_version: String,
    pub kind: String,
    /// Empty for a cluster-scoped object.
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

#[derive(Clone, Debug)]
pub struct Node {
    pub identity: Identity,
    pub owners: Vec<OwnerReference>,
    pub dependents: HashSet<String>,
    /// Has a deletionTimestamp.
    pub being_deleted: bool,
    /// Being deleted in the foreground: waits for its blocking dependents.
    pub deleting_dependents: bool,
    /// Known only from a dependent's owner reference, not yet seen by a watch.
    pub virtual_: bool,
}

/// The graph (uidToNode).
#[derive(Default, Debug)]
pub struct Graph {
    pub nodes: HashMap<String, Node>,
}

/// What changed in the graph that a worker must look at: uids for attemptToDelete and
/// attemptToOrphan.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Work {
    pub delete: Vec<String>,
    pub orphan: Vec<String>,
}

impl Graph {
    /// processGraphChanges for an added or updated object. `scope_of(kind)` says whether an
    /// owner's kind is namespaced (an owner reference does not say).
    pub fn observe(&mut self, identity: Identity, owners: Vec<OwnerReference>, finalizers: &[String], being_deleted: bool, namespaced_owner: impl Fn(&OwnerReference) -> bool) -> Work {
        let mut work = Work::default();
        let uid = identity.uid.clone();
        let deleting_dependents = being_deleted && finalizers.iter().any(|f| f == "foregroundDeletion");
        let orphaning = being_deleted && finalizers.iter().any(|f| f == "orphan");
        let old_owners: Vec<OwnerReference> = self.nodes.get(&uid).filter(|n| !n.virtual_).map(|n| n.owners.clone()).unwrap_or_default();
        let was_deleting_dependents = self.nodes.get(&uid).is_some_and(|n| n.deleting_dependents);
        let node = self.nodes.entry(uid.clone()).or_insert_with(|| Node {
            identity: identity.clone(),
            owners: Vec::new(),
            dependents: HashSet::new(),
            being_deleted: false,
            deleting_dependents: false,
            virtual_: false,
        });
        if node.virtual_ {
            // Seen for real now: the owner exists.
            node.virtual_ = false;
            node.identity = identity.clone();
        }
        node.owners = owners.clone();
        node.being_deleted = being_deleted;
        node.deleting_dependents = deleting_dependents;
        // Owners removed: this node is no longer their dependent.
        for gone in old_owners.iter().filter(|o| !owners.iter().any(|n| n.uid == o.uid)) {
            if let Some(owner) = self.nodes.get_mut(&gone.uid) {
                owner.dependents.remove(&uid);
                // A foreground owner may have been waiting for this one.
                if owner.deleting_dependents {
                    work.delete.push(gone.uid.clone());
                }
            }
        }
        // Owners added: link, creating virtual owners that must be verified.
        for o in owners.iter().filter(|o| !old_owners.iter().any(|n| n.uid == o.uid)) {
            let owner = self.nodes.entry(o.uid.clone()).or_insert_with(|| {
                work.delete.push(o.uid.clone());
                Node {
                    identity: Identity {
                        api_version: o.api_version.clone(),
                        kind: o.kind.clone(),
                        namespace: if namespaced_owner(o) { identity.namespace.clone() } else { String::new() },
                        name: o.name.clone(),
                        uid: o.uid.clone(),
                    },
                    owners: Vec::new(),
                    dependents: HashSet::new(),
                    being_deleted: false,
                    deleting_dependents: false,
                    virtual_: true,
                }
            });
            owner.dependents.insert(uid.clone());
            // Its owner may be waiting for dependents, or be gone already.
            if owner.deleting_dependents || owner.virtual_ {
                work.delete.push(uid.clone());
            }
        }
        if deleting_dependents && !was_deleting_dependents {
            // Foreground: every dependent is looked at, and the owner itself.
            let deps: Vec<String> = self.nodes.get(&uid).map(|n| n.dependents.iter().cloned().collect()).unwrap_or_default();
            work.delete.extend(deps);
            work.delete.push(uid.clone());
        } else if deleting_dependents {
            work.delete.push(uid.clone());
        }
        if orphaning {
            work.orphan.push(uid);
        }
        work
    }

    /// processGraphChanges for a deleted object: it leaves the graph, its dependents are looked
    /// at (their owner is gone), and so are owners deleting in the foreground.
    pub fn forget(&mut self, uid: &str) -> Work {
        let mut work = Work::default();
        let Some(node) = self.nodes.remove(uid) else { return work };
        for d in &node.dependents {
            work.delete.push(d.clone());
        }
        for o in &node.owners {
            if let Some(owner) = self.nodes.get_mut(&o.uid) {
                owner.dependents.remove(uid);
                if owner.deleting_dependents {
                    work.delete.push(o.uid.clone());
                }
            }
        }
        // A node nobody owns and that is still linked as dependent keeps existing as virtual.
        if !node.dependents.is_empty() {
            let mut v = node;
            v.virtual_ = true;
            v.owners.clear();
            v.being_deleted = false;
            v.deleting_dependents = false;
            work.delete.push(uid.to_string());
            self.nodes.insert(uid.to_string(), v);
        }
        work
    }

    /// An object a live read found absent (a virtual owner never seen, or one whose deletion the
    /// watch has not shown yet) leaves the graph: its dependents are looked at (their owner is
    /// gone), and so are its owners deleting in the foreground — the watch's delete event for it
    /// will find nothing left to do, so this is the only time they hear of it.
    pub fn remove_absent(&mut self, uid: &str) -> Work {
        let mut work = Work::default();
        let Some(node) = self.nodes.remove(uid) else { return work };
        work.delete.extend(node.dependents.iter().cloned());
        for o in &node.owners {
            if let Some(owner) = self.nodes.get_mut(&o.uid) {
                owner.dependents.remove(uid);
                if owner.deleting_dependents {
                    work.delete.push(o.uid.clone());
                }
            }
        }
        work
    }

    /// The dependents that still block a foreground owner's deletion: those whose reference to
    /// it has `blockOwnerDeletion`.
    pub fn blocking_dependents(&self, owner: &str) -> Vec<String> {
        let Some(node) = self.nodes.get(owner) else { return Vec::new() };
        node.dependents
            .iter()
            .filter(|d| self.nodes.get(*d).is_some_and(|n| n.owners.iter().any(|o| o.uid == owner && o.block_owner_deletion == Some(true))))
            .cloned()
            .collect()
    }
}

/// How an owner reference stands (classifyReferences).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnerState {
    /// Exists and is not being deleted in the foreground.
    Solid,
    /// Does not exist (or a different object has its name now).
    Dangling,
    /// Exists and is being deleted in the foreground, waiting for its dependents.
    WaitingForDependentsDeletion,
}

/// What to do with a dependent, given its owners' states (attemptToDeleteItem's decision).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Some owner is solid: keep it, dropping the references to the other owners (their uids).
    Keep { drop_references: Vec<String> },
    /// No owner left: delete it, with this propagation policy.
    Delete { policy: &'static str },
}

/// attemptToDeleteItem's decision for an object with these owner states. `has_dependents`: the
/// object owns something itself; `own_finalizers`: its orphan/foregroundDeletion choice.
pub fn decide(states: &[(String, OwnerState)], has_dependents: bool, own_finalizers: &[String]) -> Verdict {
    let solid = states.iter().any(|(_, s)| *s == OwnerState::Solid);
    if solid {
        let drop_references = states.iter().filter(|(_, s)| *s != OwnerState::Solid).map(|(u, _)| u.clone()).collect();
        return Verdict::Keep { drop_references };
    }
    let waiting = states.iter().any(|(_, s)| *s == OwnerState::WaitingForDependentsDeletion);
    let policy = if waiting && has_dependents {
        "Foreground"
    } else if own_finalizers.iter().any(|f| f == "orphan") {
        "Orphan"
    } else if own_finalizers.iter().any(|f| f == "foregroundDeletion") {
        "Foreground"
    } else {
        "Background"
    };
    Verdict::Delete { policy }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(uid: &str) -> Identity {
        Identity { api_version: "v1".into(), kind: "ConfigMap".into(), namespace: "default".into(), name: uid.into(), uid: uid.into() }
    }

    fn owner(uid: &str, block: bool) -> OwnerReference {
        OwnerReference { api_version: "v1".into(), kind: "ConfigMap".into(), name: uid.into(), uid: uid.into(), controller: None, block_owner_deletion: Some(block) }
    }

    #[test]
    fn the_graph_follows_owner_references() {
        let mut g = Graph::default();
        // A dependent seen before its owner: the owner is virtual, to be verified.
        let w = g.observe(id("dep"), vec![owner("own", true)], &[], false, |_| true);
        assert!(g.nodes["own"].virtual_);
        assert_eq!(w.delete, ["own", "dep"]);
        // The owner is seen: real now.
        g.observe(id("own"), vec![], &[], false, |_| true);
        assert!(!g.nodes["own"].virtual_ && g.nodes["own"].dependents.contains("dep"));
        assert_eq!(g.blocking_dependents("own"), ["dep"]);
        // Foreground deletion of the owner: its dependents and itself are looked at.
        let w = g.observe(id("own"), vec![], &["foregroundDeletion".into()], true, |_| true);
        assert_eq!(w.delete, ["dep", "own"]);
        // The dependent goes: the owner is looked at again (it may finish).
        let w = g.forget("dep");
        assert_eq!(w.delete, ["own"]);
        assert!(g.blocking_dependents("own").is_empty());
        // A dependent found absent by a live read before its delete event arrives: the foreground
        // owner hears of it then (the delete event finds nothing left).
        g.observe(id("dep2"), vec![owner("own", true)], &[], false, |_| true);
        assert_eq!(g.blocking_dependents("own"), ["dep2"]);
        let w = g.remove_absent("dep2");
        assert_eq!(w.delete, ["own"]);
        assert!(g.blocking_dependents("own").is_empty());
        assert!(g.forget("dep2").delete.is_empty());
        // Orphaning.
        let w = g.observe(id("o2"), vec![], &["orphan".into()], true, |_| true);
        assert_eq!(w.orphan, ["o2"]);
        // An owner deleted while dependents remain: they are looked at.
        g.observe(id("d3"), vec![owner("o3", false)], &[], false, |_| true);
        g.observe(id("o3"), vec![], &[], false, |_| true);
        let w = g.forget("o3");
        assert!(w.delete.contains(&"d3".to_string()));
    }

    #[test]
    fn what_becomes_of_a_dependent() {
        use OwnerState::*;
        let s = |v: &[(&str, OwnerState)]| v.iter().map(|(u, st)| (u.to_string(), *st)).collect::<Vec<_>>();
        assert_eq!(decide(&s(&[("a", Solid), ("b", Dangling)]), false, &[]), Verdict::Keep { drop_references: vec!["b".into()] });
        assert_eq!(decide(&s(&[("a", Solid)]), false, &[]), Verdict::Keep { drop_references: vec![] });
        assert_eq!(decide(&s(&[("a", Dangling)]), false, &[]), Verdict::Delete { policy: "Background" });
        assert_eq!(decide(&s(&[("a", WaitingForDependentsDeletion)]), true, &[]), Verdict::Delete { policy: "Foreground" });
        assert_eq!(decide(&s(&[("a", WaitingForDependentsDeletion)]), false, &[]), Verdict::Delete { policy: "Background" });
        assert_eq!(decide(&s(&[("a", Dangling)]), true, &["orphan".into()]), Verdict::Delete { policy: "Orphan" });
    }
}
