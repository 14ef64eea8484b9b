//! Mirrors pkg/controller/certificates: of its controllers (CSR signing, approving and cleaning,
//! the root CA publisher), kubelab runs the root CA certificate publisher
//! ([`rootcacertpublisher`]), which puts the cluster's CA bundle in every namespace.

pub mod rootcacertpublisher;
