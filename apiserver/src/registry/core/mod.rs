//! Mirrors pkg/registry/core: the resources of the core group (`/api/v1`), one folder each.

pub mod configmap;
pub mod endpoints;
pub mod event;
pub mod namespace;
pub mod node;
pub mod persistentvolume;
pub mod persistentvolumeclaim;
pub mod pod;
pub mod secret;
pub mod service;
pub mod serviceaccount;
