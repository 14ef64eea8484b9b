//! Mirrors kubelet's pkg/kubelet/pod: the pod manager ([`pod_manager`]), which holds the pods the
//! agent admitted and the mirror pods of its static pods, and the client that creates and deletes
//! those mirror pods ([`mirror_client`]). Which pods are static (from a file or URL, not the API
//! server) and which are their mirrors in the API server is the `api` crate's
//! [`api::pod::kubelet_types`].

pub mod mirror_client;
pub mod pod_manager;

pub use mirror_client::{create_mirror_pod, delete_mirror_pod, mirror_matches, mirror_pod_hash, static_pod_hash};
pub(crate) use pod_manager::PodManager;
