//! Mirrors pkg/apis/core/v1/helper: what is computed from a core/v1 object rather than stored.

pub mod node_affinity;
pub mod persistentvolume;
pub mod qos;
pub mod toleration;

pub use node_affinity::match_required_node_affinity;
pub use qos::{PodQOSClass, compute_pod_qos};
pub use toleration::{find_untolerated, tolerates};
