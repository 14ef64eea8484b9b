//! Mirrors kubelet's pkg/kubelet/server: the node agent's HTTP endpoints (`/healthz`, `/pods`,
//! `/metrics`, `/containerLogs/…`, `/exec/…`, `/attach/…`,
//! `/portForward/…`), served by actix-web over TLS ([`tls`]) on `--address:--port`, each request
//! authenticated and authorized first ([`auth`]).

pub mod auth;
pub(crate) mod exec;
pub(crate) mod host_interface;
pub(crate) mod portforward;
#[allow(clippy::module_inception)]
pub(crate) mod server;
pub(crate) mod spdy;
pub mod tls;
pub(crate) mod websocket;

pub(crate) use host_interface::Provider;
pub(crate) use server::serve;
