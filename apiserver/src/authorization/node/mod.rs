//! Mirrors plugin/pkg/auth/authorizer/node: the Node authorization mode (`--authorization-mode=
//! Node,RBAC`), which lets each node's agent read what its own pods use and nothing else.
//!
//! A node is a user named `system:node:<nodeName>` in the group `system:nodes`
//! ([`crate::authentication::user::node_identity`], shared with the NodeRestriction admission
//! plugin). For it, [`node_authorizer::NodeAuthorizer`] allows a get of a secret, configmap or
//! claim, or a token for a service account, only when a pod bound to the node (`spec.nodeName`)
//! uses it ([`graph`], reading the pods' watch cache through [`listers`]) — and so the volumes
//! bound to those claims, and the VolumeAttachments for the node; its heartbeat Lease and its
//! CSINode only under its own name; and otherwise what every node may do (its pods, nodes, events,
//! services). Which pods and which node it may write is NodeRestriction's to narrow
//! ([`crate::admission::node_restriction`]). For any other user it has no opinion.
//!
//! Implementation caveats:
//! - No graph: each decision about a secret, configmap, claim, volume or token walks the pods of
//!   the object's namespace in the watch cache (Kubernetes keeps an indexed graph updated by
//!   informers and finds a path in it), so its cost grows with the namespace's pods. A volume is
//!   found in the PersistentVolume watch cache and followed through its `spec.claimRef`; a
//!   VolumeAttachment in its own watch cache, by its `spec.nodeName`. An object created a moment
//!   ago and not yet in a watch cache is refused (no opinion) until it is.
//! - A volume's own secrets (a CSI volume's `nodePublishSecretRef` on the PV) have no edge;
//!   ResourceClaims and ClusterTrustBundles have no vertex at all.
//! - A node may create a CSINode of any name as far as this authorizer knows (it sees no name on
//!   a create): NodeRestriction refuses another node's, as in Kubernetes.
//! - Leases: Kubernetes' Node authorizer allows a node the leases of every namespace, leaving
//!   NodeRestriction to check the name; kubelab allows only `kube-node-lease`, and refuses
//!   another node's name there already when the request names one.
//! - The rules every node holds are `NodeRules` (the `system:node` ClusterRole's) with what
//!   kubelab's node agent also needs: events.k8s.io events, a list and watch of endpoints,
//!   endpointslices; and a delete of nodes, which NodeRestriction keeps to the node's own.
//! - A node's rules are not listed: SelfSubjectRulesReview says they are incomplete, as
//!   Kubernetes does.

pub mod graph;
pub mod listers;
pub mod node_authorizer;
