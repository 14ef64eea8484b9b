//! Mirrors kubernetes-csi/csi-lib-utils' connection/connection.go (how the sidecars dial the
//! driver) and the driver side of it, csi-driver-host-path's pkg/hostpath/server.go (a gRPC
//! server on a unix socket): CSI is gRPC over a unix socket named by a `unix://` endpoint.

use std::path::{Path, PathBuf};

use tokio_stream::wrappers::UnixListenerStream;
use tracing::Instrument as _;

use crate::error::{Error, Result};

/// The path of a CSI endpoint: `unix:///csi/csi.sock` (as `--endpoint` and `--csi-address` take
/// it), `unix:/csi/csi.sock`, or a bare absolute path. Other schemes (`tcp://`) are not served.
pub fn parse_endpoint(endpoint: &str) -> Result<PathBuf> {
    let path = match endpoint.split_once("://") {
        Some(("unix", rest)) => rest,
        Some((scheme, _)) => return Err(Error::Config(format!("endpoint {endpoint:?}: scheme {scheme:?} not supported (only unix://)"))),
        None => endpoint.strip_prefix("unix:").unwrap_or(endpoint),
    };
    if path.is_empty() || !path.starts_with('/') {
        return Err(Error::Config(format!("endpoint {endpoint:?}: want unix:///absolute/path")));
    }
    Ok(PathBuf::from(path))
}

/// A channel to the gRPC server on the unix socket `path`, connecting lazily (the sidecars start
/// with the driver and may dial before it listens) and again after each broken connection.
pub fn connect(path: &Path) -> tonic::transport::Channel {
    let path = path.to_path_buf();
    // The URI is a placeholder: the connector ignores it and dials the socket.
    tonic::transport::Endpoint::from_static("http://[::1]:50051").connect_with_connector_lazy(tower::service_fn(move |_: tonic::transport::Uri| {
        let path = path.clone();
        async move { Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(tokio::net::UnixStream::connect(path).await?)) }
    }))
}

/// Binds a unix socket at `path` for a gRPC server: the parent directory made, a stale socket of
/// an earlier run removed first (as the driver and node-driver-registrar do at start).
pub fn listen(path: &Path) -> Result<UnixListenerStream> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    match std::fs::remove_file(path) {
        Ok(()) => tracing::info!(target: "csi", socket = %path.display(), "removed a stale socket"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io(path, e)),
    }
    let listener = tokio::net::UnixListener::bind(path).map_err(|e| Error::io(path, e))?;
    Ok(UnixListenerStream::new(listener))
}

/// A sidecar's call to the driver, as a span whose step is the RPC, on target `csi_sidecar`
/// (`RUST_LOG=csi_sidecar=debug` shows them). Not `csi`: that target is the node agent's calls,
/// which are steps of a pod in `kubelab trace`; a sidecar's call belongs to no pod. A failure
/// keeps its status.
pub async fn call<T>(
    rpc: &'static str,
    driver: &str,
    volume: &str,
    fut: impl std::future::Future<Output = std::result::Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T> {
    let span = tracing::info_span!(target: "csi_sidecar", "csi", step = rpc, driver = %driver, volume = %volume, error = tracing::field::Empty);
    match fut.instrument(span.clone()).await {
        Ok(r) => Ok(r.into_inner()),
        Err(status) => {
            span.record("error", status.message());
            Err(Error::Csi { rpc, status })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        let cases: &[(&str, Option<&str>)] = &[
            ("unix:///csi/csi.sock", Some("/csi/csi.sock")),
            ("unix:/csi/csi.sock", Some("/csi/csi.sock")),
            ("/csi/csi.sock", Some("/csi/csi.sock")),
            ("tcp://127.0.0.1:10000", None),
            ("unix://relative.sock", None),
            ("", None),
        ];
        for (input, want) in cases {
            let got = parse_endpoint(input).ok();
            assert_eq!(got.as_deref(), want.map(Path::new), "{input}");
        }
    }
}
