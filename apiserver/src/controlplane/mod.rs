//! Mirrors pkg/controlplane/controller and pkg/controlplane/reconcilers: what the API servers
//! keep in the cluster about themselves — the `default/kubernetes` Service, and its endpoints,
//! one per live API server ([`kubernetesservice`]).

pub mod kubernetesservice;
