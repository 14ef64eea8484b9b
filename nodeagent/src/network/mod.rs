//! Pod networking. The kubelet leaves it to the runtime's CNI; kubelab's agent also writes the
//! CNI configuration for its `--pod-cidr` ([`cni`]), the job a network add-on does in Kubernetes.

pub mod cni;
pub(crate) mod host_gw;
