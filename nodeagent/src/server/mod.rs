//! Mirrors kubelet's pkg/kubelet/server: the node agent's HTTP endpoints (`/healthz`, `/pods`,
//! `/metrics`, `/containerLogs/…`), served by actix-web on `--address:--port`.

#[allow(clippy::module_inception)]
pub mod server;

pub use server::{Provider, serve};
