//! Mirrors k8s.io/apimachinery/pkg/util/proxy: passing a client's request on to a backend.
//! - [`upgradeaware`]: an upgrade (exec, attach, port-forward) spliced to a node agent.

pub mod upgradeaware;
