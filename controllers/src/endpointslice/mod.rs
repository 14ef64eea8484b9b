//! Mirrors pkg/controller/endpointslice and staging/src/k8s.io/endpointslice: the EndpointSlice
//! controller ([`endpointslice_controller`]), its pure reconciler ([`reconciler`]), how a pod
//! becomes an endpoint ([`utils`]) and the record of its own writes
//! ([`endpointslice_tracker`]).

pub mod endpointslice_controller;
pub mod endpointslice_tracker;
pub mod reconciler;
pub mod utils;

pub use endpointslice_controller::{DEFAULT_MAX_ENDPOINTS_PER_SLICE, EndpointSliceController};
