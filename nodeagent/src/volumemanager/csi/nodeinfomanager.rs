//! Mirrors pkg/volume/csi/nodeinfomanager/nodeinfomanager.go: what the API server learns about
//! the CSI drivers of this node.
//!
//! - The node's **CSINode** (named as the node, owned by it): created empty when the agent starts
//!   ([`NodeInfoManager::initialize_csi_node`]), one `spec.drivers[]` entry per registered driver
//!   (its node ID, its topology keys, `allocatable.count` from `max_volumes_per_node`). The
//!   scheduler and the external provisioner read it.
//! - The **Node**: the annotation `csi.volume.kubernetes.io/nodeid` (a JSON map driver → node
//!   ID) and one label per topology segment the driver reports.
//!
//! The object changes are pure functions ([`with_driver`], [`without_driver`],
//! [`node_id_annotation`], [`topology_labels`]); the manager reads, applies them and writes,
//! retrying a conflicting CSINode update.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::{CSINode, CSINodeDriver, CSINodeSpec, VolumeNodeResources};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use crate::error::{Error, Result};

/// The Node annotation listing each driver's node ID.
pub(crate) const ANNOTATION_KEY_NODE_ID: &str = "csi.volume.kubernetes.io/nodeid";
/// How often a conflicting CSINode update is retried.
const UPDATE_RETRIES: usize = 5;

/// A driver as NodeGetInfo describes this node to it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct DriverNodeInfo {
    pub(crate) node_id: String,
    pub(crate) max_volumes_per_node: i64,
    /// Topology segments: key → this node's value.
    pub(crate) topology: BTreeMap<String, String>,
}

/// `csi.volume.kubernetes.io/nodeid` with `driver`'s entry set to `node_id` (`Some`) or removed
/// (`None`). `Ok(None)` when no driver is left (the annotation goes).
pub(crate) fn node_id_annotation(existing: Option<&str>, driver: &str, node_id: Option<&str>) -> Result<Option<String>> {
    let mut ids: BTreeMap<String, String> = match existing {
        Some(text) if !text.is_empty() => serde_json::from_str(text)
            .map_err(|e| Error::PluginRegistration(format!("failed to parse node annotation {ANNOTATION_KEY_NODE_ID}: {e}")))?,
        _ => BTreeMap::new(),
    };
    match node_id {
        Some(id) => {
            ids.insert(driver.to_string(), id.to_string());
        }
        None => {
            ids.remove(driver);
        }
    }
    if ids.is_empty() {
        return Ok(None);
    }
    serde_json::to_string(&ids).map(Some).map_err(|e| Error::Invalid(e.to_string()))
}

/// The labels to add for the driver's topology; an existing label with another value is an error
/// (kubelet refuses to move a node between topology segments).
pub(crate) fn topology_labels(existing: Option<&BTreeMap<String, String>>, topology: &BTreeMap<String, String>) -> Result<BTreeMap<String, String>> {
    let mut add = BTreeMap::new();
    for (key, value) in topology {
        match existing.and_then(|l| l.get(key)) {
            Some(v) if v == value => {}
            Some(v) => {
                return Err(Error::PluginRegistration(format!(
                    "detected topology value collision: driver reported {key:?}:{value:?} but existing label is {key:?}:{v:?}"
                )));
            }
            None => {
                add.insert(key.clone(), value.clone());
            }
        }
    }
    Ok(add)
}

/// The CSINode with `driver`'s entry in place of any earlier one.
pub(crate) fn with_driver(mut csi_node: CSINode, driver: &str, info: &DriverNodeInfo) -> CSINode {
    let entry = CSINodeDriver {
        name: driver.to_string(),
        node_id: info.node_id.clone(),
        topology_keys: Some(info.topology.keys().cloned().collect()),
        allocatable: (info.max_volumes_per_node > 0).then(|| VolumeNodeResources {
            count: Some(i32::try_from(info.max_volumes_per_node).unwrap_or(i32::MAX)),
        }),
    };
    let drivers = &mut csi_node.spec.drivers;
    match drivers.iter_mut().find(|d| d.name == driver) {
        Some(d) => *d = entry,
        None => drivers.push(entry),
    }
    csi_node
}

/// The CSINode without `driver`'s entry; `None` if it had none (nothing to write).
pub(crate) fn without_driver(mut csi_node: CSINode, driver: &str) -> Option<CSINode> {
    let before = csi_node.spec.drivers.len();
    csi_node.spec.drivers.retain(|d| d.name != driver);
    (csi_node.spec.drivers.len() != before).then_some(csi_node)
}

/// A new CSINode for `node`, owned by it, with no drivers.
pub(crate) fn new_csi_node(node: &Node) -> CSINode {
    let name = node.metadata.name.clone().unwrap_or_default();
    CSINode {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            owner_references: node.metadata.uid.clone().map(|uid| {
                vec![OwnerReference { api_version: "v1".into(), kind: "Node".into(), name, uid, ..Default::default() }]
            }),
            ..Default::default()
        },
        spec: CSINodeSpec { drivers: vec![] },
        ..Default::default()
    }
}

/// Keeps the CSINode and the Node of this node in step with its registered drivers.
#[derive(Clone)]
pub(crate) struct NodeInfoManager {
    node_name: String,
    client: kube::Client,
}

impl NodeInfoManager {
    pub(crate) fn new(node_name: String, client: kube::Client) -> NodeInfoManager {
        NodeInfoManager { node_name, client }
    }

    fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    fn csi_nodes(&self) -> Api<CSINode> {
        Api::all(self.client.clone())
    }

    /// The node's CSINode exists (created empty if missing).
    pub(crate) async fn initialize_csi_node(&self) -> Result<CSINode> {
        if let Some(existing) = self.csi_nodes().get_opt(&self.node_name).await? {
            return Ok(existing);
        }
        let node = self.nodes().get(&self.node_name).await?;
        match self.csi_nodes().create(&PostParams::default(), &new_csi_node(&node)).await {
            Ok(created) => {
                tracing::info!(target: "kubelet::csi", node = %self.node_name, "created the node's CSINode");
                Ok(created)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(self.csi_nodes().get(&self.node_name).await?),
            Err(e) => Err(e.into()),
        }
    }

    /// InstallCSIDriver: the Node's annotation and topology labels, then the CSINode entry.
    pub(crate) async fn install_csi_driver(&self, driver: &str, info: &DriverNodeInfo) -> Result<()> {
        let node = self.nodes().get(&self.node_name).await?;
        let annotations = node.metadata.annotations.as_ref();
        let ids = node_id_annotation(annotations.and_then(|a| a.get(ANNOTATION_KEY_NODE_ID)).map(String::as_str), driver, Some(&info.node_id))?;
        let labels = topology_labels(node.metadata.labels.as_ref(), &info.topology)?;
        let patch = json!({"metadata": {"annotations": {ANNOTATION_KEY_NODE_ID: ids}, "labels": labels}});
        self.nodes().patch(&self.node_name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
        self.update_csi_node(|n| Some(with_driver(n, driver, info))).await
    }

    /// UninstallCSIDriver: the driver's CSINode entry and node ID go (its topology labels stay,
    /// as kubelet leaves them).
    pub(crate) async fn uninstall_csi_driver(&self, driver: &str) -> Result<()> {
        self.update_csi_node(|n| without_driver(n, driver)).await?;
        let node = self.nodes().get(&self.node_name).await?;
        let existing = node.metadata.annotations.as_ref().and_then(|a| a.get(ANNOTATION_KEY_NODE_ID));
        if existing.is_none() {
            return Ok(());
        }
        let ids = node_id_annotation(existing.map(String::as_str), driver, None)?;
        let patch = json!({"metadata": {"annotations": {ANNOTATION_KEY_NODE_ID: ids}}});
        self.nodes().patch(&self.node_name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
        Ok(())
    }

    /// Read, change (`None`: nothing to change), replace; a conflict reads again.
    async fn update_csi_node(&self, change: impl Fn(CSINode) -> Option<CSINode>) -> Result<()> {
        let mut last = None;
        for _ in 0..UPDATE_RETRIES {
            let current = self.initialize_csi_node().await?;
            let Some(updated) = change(current) else { return Ok(()) };
            match self.csi_nodes().replace(&self.node_name, &PostParams::default(), &updated).await {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(s)) if s.code == 409 => last = Some(kube::Error::Api(s)),
                Err(e) => return Err(e.into()),
            }
        }
        Err(last.map(Error::from).unwrap_or_else(|| Error::PluginRegistration("CSINode update kept conflicting".into())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_id_annotation_table() -> Result<()> {
        assert_eq!(node_id_annotation(None, "a", Some("n1"))?.as_deref(), Some(r#"{"a":"n1"}"#));
        assert_eq!(node_id_annotation(Some(r#"{"b":"x"}"#), "a", Some("n1"))?.as_deref(), Some(r#"{"a":"n1","b":"x"}"#));
        assert_eq!(node_id_annotation(Some(r#"{"a":"old"}"#), "a", Some("n1"))?.as_deref(), Some(r#"{"a":"n1"}"#));
        assert_eq!(node_id_annotation(Some(r#"{"a":"n1","b":"x"}"#), "a", None)?.as_deref(), Some(r#"{"b":"x"}"#));
        assert_eq!(node_id_annotation(Some(r#"{"a":"n1"}"#), "a", None)?, None);
        assert!(node_id_annotation(Some("not json"), "a", Some("n1")).is_err());
        Ok(())
    }

    #[test]
    fn topology_labels_table() {
        let key = "topology.hostpath.csi.kubelab.io/node";
        let topo = BTreeMap::from([(key.to_string(), "node-a".to_string())]);
        let have = |v: &str| BTreeMap::from([(key.to_string(), v.to_string())]);
        assert_eq!(topology_labels(None, &topo).ok(), Some(topo.clone()));
        assert_eq!(topology_labels(Some(&have("node-a")), &topo).ok(), Some(BTreeMap::new()));
        let err = topology_labels(Some(&have("node-b")), &topo).expect_err("collision");
        assert!(err.to_string().contains("detected topology value collision"), "{err}");
    }

    #[test]
    fn csi_node_drivers() {
        let node = Node {
            metadata: ObjectMeta { name: Some("node-a".into()), uid: Some("u1".into()), ..Default::default() },
            ..Default::default()
        };
        let empty = new_csi_node(&node);
        assert_eq!(empty.metadata.name.as_deref(), Some("node-a"));
        let owner = &empty.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!((owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()), ("Node", "node-a", "u1"));
        assert!(empty.spec.drivers.is_empty());

        let info = DriverNodeInfo {
            node_id: "node-a".into(),
            max_volumes_per_node: 0,
            topology: BTreeMap::from([("topology.hostpath.csi.kubelab.io/node".into(), "node-a".into())]),
        };
        let one = with_driver(empty.clone(), "d", &info);
        assert_eq!(one.spec.drivers.len(), 1);
        assert_eq!(one.spec.drivers[0].topology_keys, Some(vec!["topology.hostpath.csi.kubelab.io/node".to_string()]));
        assert_eq!(one.spec.drivers[0].allocatable, None, "0 means no limit reported");
        let again = with_driver(one.clone(), "d", &DriverNodeInfo { max_volumes_per_node: 8, ..info.clone() });
        assert_eq!(again.spec.drivers.len(), 1, "replaced, not appended");
        assert_eq!(again.spec.drivers[0].allocatable.as_ref().and_then(|a| a.count), Some(8));
        assert_eq!(without_driver(again, "d").map(|n| n.spec.drivers.len()), Some(0));
        assert!(without_driver(empty, "d").is_none(), "nothing to remove");
    }
}
