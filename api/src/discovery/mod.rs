//! Mirrors pkg/apis/discovery: the EndpointSlice kind, where the EndpointSlice controller writes
//! which pods back a Service and what kube-proxy and cluster DNS read.

pub mod validation;
