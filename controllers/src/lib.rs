//! # controllers — kubelab's kube-controller-manager
//!
//! Control loops that keep the cluster converging on what its objects say, each talking only to
//! the API server, as kube-controller-manager's do. Run by `kubelab controller-manager`.
//!
//! - [`namespace`]: empties a namespace being deleted, then lets it go.
//!
//! ## Implementation caveats
//! - No leader election yet: run one controller manager per cluster.
//! - Only the namespace controller exists; node lifecycle arrives with the lab.

pub mod error;
pub mod namespace;

pub use error::{Error, Result};

pub use client::Connection;

/// Runs every controller until `shutdown` completes.
pub async fn run(conn: Connection, shutdown: impl std::future::Future<Output = ()>) -> Result<()> {
    let client = client::client(&conn).await?;
    tokio::select! {
        r = namespace::NamespaceController::new(client).run() => r,
        _ = shutdown => Ok(()),
    }
}
