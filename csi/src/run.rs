//! The `kubelab csi-hostpath` process: what a csi-driver-host-path DaemonSet pod runs as four
//! containers (the driver, node-driver-registrar, external-provisioner, external-attacher), as
//! tasks of one process that share a shutdown signal.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use proto::csi::v1 as csi;
use tonic::transport::Server;

use crate::connection;
use crate::error::{Error, Result};
use crate::hostpath::{self, HostPath};
use crate::registrar::{self, Registrar};
use crate::{attacher, provisioner};

/// Where the process works; [`Options::new`] gives kubelab's defaults.
#[derive(Clone, Debug)]
pub struct Options {
    /// The CSI driver name.
    pub driver_name: String,
    /// The driver's CSI socket (`--endpoint`).
    pub endpoint: PathBuf,
    /// The kubelet's (node agent's) root directory: the registration socket goes to its
    /// `plugins_registry/`.
    pub kubelet_root_dir: PathBuf,
    /// The driver's CSI socket as the kubelet reaches it (`--kubelet-registration-path`; default
    /// [`Options::endpoint`]: same host, same mount namespace).
    pub kubelet_registration_path: Option<PathBuf>,
    /// This node: the driver's node id, and the node whose claims and attachments the sidecars
    /// handle.
    pub node_id: String,
    /// The volumes and the state file.
    pub state_dir: PathBuf,
    /// NodeGetInfo's `max_volumes_per_node` (0: unlimited).
    pub max_volumes_per_node: i64,
    /// The API server, for the provisioner and attacher; without it only the driver and the
    /// registrar run.
    pub connection: Option<client::Connection>,
}

/// The kubelet root directory kubelab's node agent uses by default (its `--root-dir`).
pub const DEFAULT_KUBELET_ROOT_DIR: &str = "/var/lib/kubelab";
/// Where volumes are kept by default (csi-driver-host-path keeps them in `/csi-data-dir`).
pub const DEFAULT_STATE_DIR: &str = "/var/lib/csi-hostpath-data";

impl Options {
    /// kubelab's defaults for `node_id`: the socket in `<kubelet root>/plugins/<driver>/`.
    pub fn new(node_id: impl Into<String>) -> Options {
        let root = PathBuf::from(DEFAULT_KUBELET_ROOT_DIR);
        Options {
            driver_name: crate::DRIVER_NAME.to_string(),
            endpoint: registrar::default_csi_socket_path(&root, crate::DRIVER_NAME),
            kubelet_root_dir: root,
            kubelet_registration_path: None,
            node_id: node_id.into(),
            state_dir: PathBuf::from(DEFAULT_STATE_DIR),
            max_volumes_per_node: 0,
            connection: None,
        }
    }
}

impl Default for Options {
    fn default() -> Options {
        Options::new(client::hostname().to_lowercase())
    }
}

/// Runs the driver, the registrar and (with a connection) the provisioner and attacher until
/// `shutdown` completes, then stops them all and removes the sockets.
pub async fn run(opts: Options, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<()> {
    // Step 1: the driver and its state.
    let driver = HostPath::new(hostpath::Config {
        driver_name: opts.driver_name.clone(),
        vendor_version: crate::VENDOR_VERSION.to_string(),
        node_id: opts.node_id.clone(),
        state_dir: opts.state_dir.clone(),
        max_volumes_per_node: opts.max_volumes_per_node,
    })?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stopped = move || {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };

    // Step 2: the CSI socket, before the registrar tells the kubelet where it is.
    let incoming = connection::listen(&opts.endpoint)?;
    let csi_server = Server::builder()
        .add_service(csi::identity_server::IdentityServer::new(driver.clone()))
        .add_service(csi::controller_server::ControllerServer::new(driver.clone()))
        .add_service(csi::node_server::NodeServer::new(driver))
        .serve_with_incoming_shutdown(incoming, stopped());
    tracing::info!(target: "csi", driver = %opts.driver_name, endpoint = %opts.endpoint.display(), node = %opts.node_id, "CSI driver listening");

    // Step 3: the registrar.
    let reg_socket = registrar::registration_socket_path(&opts.kubelet_root_dir, &opts.driver_name);
    let reg = Registrar {
        driver_name: opts.driver_name.clone(),
        endpoint: opts.kubelet_registration_path.clone().unwrap_or_else(|| opts.endpoint.clone()),
    };
    let reg_incoming = connection::listen(&reg_socket)?;
    let reg_server = Server::builder()
        .add_service(proto::pluginregistration::registration_server::RegistrationServer::new(reg))
        .serve_with_incoming_shutdown(reg_incoming, stopped());
    tracing::info!(target: "csi::registrar", socket = %reg_socket.display(), "registration socket listening");

    // Step 4: the sidecars that talk to the API server, each a client of the driver's socket.
    let mut sidecars = tokio::task::JoinSet::new();
    if let Some(conn) = &opts.connection {
        let kube = client::client_as(conn, "csi-hostpath").await?;
        let channel = connection::connect(&opts.endpoint);
        let recorder = client::record::EventRecorder::new(kube.clone(), &format!("{}_{}", opts.driver_name, opts.node_id), Some(opts.node_id.clone()));
        let p = Arc::new(provisioner::Provisioner {
            client: kube.clone(),
            csi: csi::controller_client::ControllerClient::new(channel.clone()),
            driver: opts.driver_name.clone(),
            node: opts.node_id.clone(),
            recorder,
        });
        sidecars.spawn(provisioner::run(p, stopped()));
        let a = Arc::new(attacher::Attacher {
            client: kube,
            csi: csi::controller_client::ControllerClient::new(channel),
            driver: opts.driver_name.clone(),
            node: opts.node_id.clone(),
            node_id: opts.node_id.clone(),
        });
        sidecars.spawn(attacher::run(a, stopped()));
    }

    // Step 5: wait for the signal (or a server's failure), tell everyone, wait for everyone.
    let servers = async {
        let (c, r) = tokio::join!(csi_server, reg_server);
        c.map_err(|source| Error::Serve { what: "the CSI socket".into(), source })?;
        r.map_err(|source| Error::Serve { what: "the registration socket".into(), source })
    };
    tokio::pin!(servers);
    let mut result = tokio::select! {
        r = &mut servers => Some(r),
        _ = shutdown => None,
    };
    let _ = stop_tx.send(true);
    if result.is_none() {
        result = Some(servers.await);
    }
    while sidecars.join_next().await.is_some() {}
    // The registration socket going away is how the kubelet learns the plugin is gone.
    for path in [&reg_socket, &opts.endpoint] {
        let _ = std::fs::remove_file(path);
    }
    tracing::info!(target: "csi", "stopped");
    result.unwrap_or(Ok(()))
}
