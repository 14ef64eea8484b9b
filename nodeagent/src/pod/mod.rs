//! Mirrors kubelet's pkg/kubelet/pod: the pod manager ([`pod_manager`]), which holds the pods the
//! agent admitted and the mirror pods of its static pods, and the client that creates and deletes
//! those mirror pods ([`mirror_client`]). Which pods are static (from a file or URL, not the API
//! server) and which are their mirrors in the API server is the `api` crate's
//! [`api::pod::kubelet_types`].

pub(crate) mod mirror_client;
pub(crate) mod pod_manager;

pub(crate) use pod_manager::PodManager;
