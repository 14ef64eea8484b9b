//! Mirrors pkg/registry/discovery: the resources of `discovery.k8s.io/v1` — EndpointSlices, where
//! the EndpointSlice controller writes the pods behind each Service and kube-proxy and cluster
//! DNS read them.

pub mod endpointslice;
