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

use std::path::PathBuf;

/// How to reach the API server: a kubeconfig file, or a plain URL (`--master`).
#[derive(Clone, Debug)]
pub enum Connection {
    Kubeconfig(PathBuf),
    Master(String),
}

/// A kube client for `conn`.
pub async fn client(conn: &Connection) -> Result<kube::Client> {
    let config = match conn {
        Connection::Master(url) => kube::Config::new(url.parse().map_err(|e| Error::Config(format!("--master {url:?}: {e}")))?),
        Connection::Kubeconfig(path) => {
            let kc = kube::config::Kubeconfig::read_from(path).map_err(|e| Error::Config(format!("--kubeconfig {}: {e}", path.display())))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| Error::Config(format!("--kubeconfig {}: {e}", path.display())))?
        }
    };
    kube::Client::try_from(config).map_err(Error::Kube)
}

/// Runs every controller until `shutdown` completes.
pub async fn run(conn: Connection, shutdown: impl std::future::Future<Output = ()>) -> Result<()> {
    let client = client(&conn).await?;
    tokio::select! {
        r = namespace::NamespaceController::new(client).run() => r,
        _ = shutdown => Ok(()),
    }
}
