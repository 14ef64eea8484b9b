//! Mirrors pkg/apis/core/v1 (and the constants of k8s.io/api/core/v1).

pub mod defaults;
pub mod helper;
pub mod persistentvolume_defaults;
pub mod well_known;
