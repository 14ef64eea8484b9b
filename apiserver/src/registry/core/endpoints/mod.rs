//! Mirrors pkg/registry/core/endpoint: the v1 Endpoints resource, written by the Endpoints
//! controller (and, for `default/kubernetes`, by the API servers themselves) for clients older
//! than EndpointSlices.

pub mod printer;
pub mod strategy;
