//! Mirrors kubelet's pkg/kubelet/server: the node agent's HTTP endpoints (`/healthz`, `/pods`,
//! `/metrics`, `/containerLogs/…`, `/exec/…`, `/attach/…`), served by actix-web on `--address:--port`.

pub mod exec;
pub mod host_interface;
#[allow(clippy::module_inception)]
pub mod server;
pub mod spdy;
pub mod websocket;

pub use host_interface::Provider;
pub use server::serve;
