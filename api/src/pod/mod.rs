//! Mirrors pkg/api/v1/pod and pkg/kubelet/types: helpers over a pod that the API server, the
//! scheduler, the controllers and the node agent share.

pub mod kubelet_types;
pub mod util;

pub use kubelet_types::{is_critical_pod, is_mirror_pod, is_static_pod};
pub use util::{
    app_containers, full_name, init_containers, is_pod_phase_terminal, is_pod_ready, is_pod_terminal, is_restartable_init_container, pod_priority,
    restart_policy, uid,
};
