//! # client — kubelab's client-go
//!
//! What every component that talks to the API server shares, as client-go provides it to
//! Kubernetes' components:
//! - [`Connection`] and [`client`]: a kubeconfig file or a plain `--master` URL.
//! - [`leaderelection`]: several replicas, one active, on a coordination.k8s.io Lease
//!   (client-go's `tools/leaderelection`).
//! - [`record`]: an event recorder that never blocks its caller and folds repeats into a count
//!   (client-go's `tools/record`).
//! - [`token_source`]: a bearer token renewed in the background before it expires, and a client
//!   that authenticates with it alone (client-go's `transport/token_source.go`; what
//!   kube-controller-manager's `--use-service-account-credentials` gives each controller).
//!
//! Its whole public surface is these, plus [`client_as`] (a client that names its component in
//! its User-Agent), [`config_as`] (the configuration it is built from), [`hostname`] and
//! [`Error`].

pub mod leaderelection;
pub mod record;
pub mod token_source;

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Config(String),
    #[error("API server: {0}")]
    Kube(#[source] kube::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Whether retrying later may succeed (the API server was away or busy).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Kube(_))
    }
}

/// How to reach the API server: a kubeconfig file, or a plain URL (`--master`).
#[derive(Clone, Debug)]
pub enum Connection {
    Kubeconfig(PathBuf),
    Master(String),
}

impl Connection {
    /// From the `--master` and `--kubeconfig` flags every component takes; `--master` wins.
    pub fn from_flags(master: Option<String>, kubeconfig: Option<PathBuf>) -> Result<Connection> {
        match (master, kubeconfig) {
            (Some(url), _) => Ok(Connection::Master(url)),
            (None, Some(path)) => Ok(Connection::Kubeconfig(path)),
            (None, None) => Err(Error::Config("one of --kubeconfig or --master is required".into())),
        }
    }
}

/// A kube client for `conn`, introducing itself as plain `kubelab`.
pub async fn client(conn: &Connection) -> Result<kube::Client> {
    client_as(conn, "kubelab").await
}

/// A kube client for `conn` that sends `User-Agent: <component>/<version>`, as Kubernetes'
/// components do: the API server tells its watchers apart by it (`kubelab trace` shows which
/// component a watch event went to).
pub async fn client_as(conn: &Connection, component: &str) -> Result<kube::Client> {
    kube::Client::try_from(config_as(conn, component).await?).map_err(Error::Kube)
}

/// The configuration [`client_as`] builds its client from: the API server's URL and CA, the
/// credentials of `conn`, and the User-Agent of `component`.
pub async fn config_as(conn: &Connection, component: &str) -> Result<kube::Config> {
    let mut config = match conn {
        Connection::Master(url) => {
            kube::Config::new(url.parse().map_err(|e| Error::Config(format!("--master {url:?}: {e}")))?)
        }
        Connection::Kubeconfig(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| Error::Config(format!("--kubeconfig {}: {e}", path.display())))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| Error::Config(format!("--kubeconfig {}: {e}", path.display())))?
        }
    };
    let agent = format!("{component}/v{}", env!("CARGO_PKG_VERSION"));
    let agent = http::HeaderValue::from_str(&agent).map_err(|e| Error::Config(format!("user agent {agent:?}: {e}")))?;
    config.headers.push((http::header::USER_AGENT, agent));
    Ok(config)
}

/// This host's name, for leader identities and event sources.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}
