//! # client — kubelab's client-go
//!
//! What every component that talks to the API server shares, as client-go provides it to
//! Kubernetes' components:
//! - [`Connection`] and [`client`]: a kubeconfig file, a plain `--master` URL, or the pod's own
//!   service account (client-go's `rest.InClusterConfig`).
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

/// How to reach the API server: a kubeconfig file, a plain URL (`--master`), or, in a pod, as
/// the pod's service account.
#[derive(Clone, Debug)]
pub enum Connection {
    Kubeconfig(PathBuf),
    Master(String),
    /// client-go's `rest.InClusterConfig`: `https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT`,
    /// verified with the projected `ca.crt`, authenticated with the projected token, which is
    /// read again as the node agent rotates it (both under
    /// `/var/run/secrets/kubernetes.io/serviceaccount`).
    InCluster,
}

/// The variable the node agent sets in every container (with `KUBERNETES_SERVICE_PORT`): the
/// `kubernetes` Service's cluster IP.
const SERVICE_HOST_ENV: &str = "KUBERNETES_SERVICE_HOST";

impl Connection {
    /// From the `--master` and `--kubeconfig` flags every component takes; `--master` wins. With
    /// neither, in a pod (`KUBERNETES_SERVICE_HOST` is set), the pod's service account, as
    /// client-go's `BuildConfigFromFlags("", "")` falls back to `InClusterConfig`.
    pub fn from_flags(master: Option<String>, kubeconfig: Option<PathBuf>) -> Result<Connection> {
        Connection::from_flags_in(master, kubeconfig, std::env::var_os(SERVICE_HOST_ENV).is_some_and(|v| !v.is_empty()))
    }

    fn from_flags_in(master: Option<String>, kubeconfig: Option<PathBuf>, in_pod: bool) -> Result<Connection> {
        match (master, kubeconfig) {
            (Some(url), _) => Ok(Connection::Master(url)),
            (None, Some(path)) => Ok(Connection::Kubeconfig(path)),
            (None, None) if in_pod => Ok(Connection::InCluster),
            (None, None) => Err(Error::Config(format!("one of --kubeconfig or --master is required (outside a pod: ${SERVICE_HOST_ENV} is not set)"))),
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
        Connection::InCluster => kube::Config::incluster().map_err(|e| Error::Config(format!("the pod's service account: {e}")))?,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_from_flags() {
        let master = || Some("http://a".to_string());
        let kubeconfig = || Some(PathBuf::from("k.conf"));
        assert!(matches!(Connection::from_flags_in(master(), kubeconfig(), true), Ok(Connection::Master(u)) if u == "http://a"));
        assert!(matches!(Connection::from_flags_in(None, kubeconfig(), true), Ok(Connection::Kubeconfig(p)) if p == std::path::Path::new("k.conf")));
        assert!(matches!(Connection::from_flags_in(None, None, true), Ok(Connection::InCluster)));
        let err = Connection::from_flags_in(None, None, false).unwrap_err().to_string();
        assert!(err.contains("one of --kubeconfig or --master is required"), "{err}");
    }
}
