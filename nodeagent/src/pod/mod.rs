//! Mirrors kubelet's pkg/kubelet/pod: the client that creates and deletes the mirror pods of
//! static pods. Which pods are static (from a file or URL, not the API server) and which are
//! their mirrors in the API server is the `api` crate's [`api::pod::kubelet_types`].

pub mod mirror_client;

pub use mirror_client::{create_mirror_pod, delete_mirror_pod, mirror_matches, mirror_pod_hash, static_pod_hash};
