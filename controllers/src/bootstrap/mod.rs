//! Mirrors pkg/controller/bootstrap: of its controllers (the bootstrap signer, which signs the
//! `cluster-info` ConfigMap with each token, and the token cleaner), kubelab runs the token
//! cleaner ([`tokencleaner`]).

pub mod tokencleaner;
