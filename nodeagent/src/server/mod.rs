//! Mirrors kubelet's pkg/kubelet/server: the node agent's HTTP endpoints (`/healthz`, `/pods`,
//! `/metrics`, `/containerLogs/…`, `/exec/…`, `/attach/…`,
//! `/portForward/…`), served by actix-web on `--address:--port`.

pub(crate) mod exec;
pub(crate) mod host_interface;
pub(crate) mod portforward;
#[allow(clippy::module_inception)]
pub(crate) mod server;
pub(crate) mod spdy;
pub(crate) mod websocket;

pub(crate) use host_interface::Provider;
pub(crate) use server::serve;
