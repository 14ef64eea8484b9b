//! Mirrors plugin/pkg/auth/authorizer/node: the Node authorization mode (`--authorization-mode=
//! Node,RBAC`), which lets each node's agent read what its own pods use and nothing else.
//!
//! A node is a user named `system:node:<nodeName>` in the group `system:nodes`
//! ([`crate::authentication::user::node_identity`], shared with the NodeRestriction admission
//! plugin). For it, [`node_authorizer::NodeAuthorizer`] allows a get of a secret, configmap or
//! claim, or a token for a service account, only when a pod bound to the node (`spec.nodeName`)
//! uses it ([`graph`], reading the pods' watch cache through [`listers`]); its heartbeat Lease
//! only under its own name; and otherwise what every node may do (its pods, nodes, events,
//! services). Which pods and which node it may write is NodeRestriction's to narrow
//! ([`crate::admission::node_restriction`]). For any other user it has no opinion.
//!
//! Implementation caveats:
//! - No graph: each decision about a secret, configmap, claim or token walks the pods of the
//!   object's namespace in the watch cache (Kubernetes keeps an indexed graph updated by
//!   informers and finds a path in it), so its cost grows with the namespace's pods.
//! - kubelab serves no PersistentVolumeClaims or PersistentVolumes: a claim a pod names is
//!   related to its node, but no volume is (a claim's `spec.volumeName` is never read), and
//!   VolumeAttachments, ResourceClaims and ClusterTrustBundles have no vertex at all.
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
