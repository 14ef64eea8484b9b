//! Mirrors kubelet's pkg/kubelet/pod and the static-pod helpers of kubelet/types: which pods are
//! static (from a file or URL, not the API server), which are their mirrors in the API server,
//! and the client that creates and deletes those mirrors.

pub mod mirror_client;

pub use mirror_client::{
    create_mirror_pod, delete_mirror_pod, is_mirror_pod, is_static_pod, mirror_matches, mirror_pod_hash, static_pod_hash,
};
