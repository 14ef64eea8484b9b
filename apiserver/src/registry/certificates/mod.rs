//! Mirrors pkg/registry/certificates: the resources of `certificates.k8s.io`.

pub mod certificatesigningrequest;
