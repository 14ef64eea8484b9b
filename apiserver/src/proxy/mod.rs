//! Mirrors k8s.io/apimachinery/pkg/util/proxy and k8s.io/apiserver/pkg/util/proxy: passing a
//! client's connection on to a node agent.
//! - [`upgradeaware`]: a websocket upgrade (exec, attach, port-forward) spliced to the agent.
//! - [`upgradeaware::proxy_http`]: a plain request (pods, services, nodes `/proxy`) passed on;
//!   [`location`] reads what its id names.
//! - [`streamtunnel`]: a plain SPDY upgrade (kubectl ≤ 1.30 port-forward), taken off the
//!   listener before actix-web sees it, carried to the agent inside a websocket.
//! - [`dial`]: the connections of the upgrades, plain or TLS (to a node agent: the kubelet
//!   client's, with the API server's client certificate).

pub mod dial;
pub mod location;
pub mod streamtunnel;
pub mod upgradeaware;
