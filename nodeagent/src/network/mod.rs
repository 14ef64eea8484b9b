//! Pod networking. The kubelet leaves it to the runtime's CNI; kubelab's agent also writes the
//! CNI configuration for its `--pod-cidr` ([`cni`]), the job a network add-on does in Kubernetes.
//! Each pod's resolv.conf comes from [`dns`], by its `dnsPolicy`.

pub mod cni;
pub(crate) mod dns;
pub(crate) mod host_gw;
