//! Mirrors pkg/apis/core/v1/helper: what is computed from a core/v1 object rather than stored.

pub mod qos;
pub mod toleration;

pub use qos::{PodQOSClass, compute_pod_qos};
pub use toleration::{find_untolerated, tolerates};
