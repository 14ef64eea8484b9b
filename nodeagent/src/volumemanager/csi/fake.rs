//! A fake CSI driver for the unit tests (as kubelet's pkg/volume/csi/fake): the Node service and
//! the plugin registration service on unix sockets, recording every call. Its NodeStageVolume and
//! NodePublishVolume mount a small tmpfs (the tests run as root), so that the agent's "already
//! mounted" checks and its teardown see real mounts. Compiled for the tests only.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use proto::csi::v1 as csi;
use proto::csi::v1::node_server::{Node, NodeServer};
use proto::pluginregistration as reg;
use proto::pluginregistration::registration_server::{Registration, RegistrationServer};
use tokio_stream::wrappers::UnixListenerStream;
use tonic::{Request, Response, Status};

use crate::volumemanager::mount;

/// The fake driver's Node service.
#[derive(Clone, Default)]
pub(crate) struct FakeNode {
    /// Whether it reports STAGE_UNSTAGE_VOLUME.
    pub(crate) stage_unstage: bool,
    /// Every call: `"NodePublishVolume <volume_id> <target_path> ro=<readonly>"`, ….
    pub(crate) calls: Arc<Mutex<Vec<String>>>,
    /// The last NodePublishVolume request.
    pub(crate) last_publish: Arc<Mutex<Option<csi::NodePublishVolumeRequest>>>,
}

impl FakeNode {
    pub(crate) fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn record(&self, call: String) {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).push(call);
    }
}

fn mount_tmpfs(path: &str) -> Result<(), Status> {
    let path = Path::new(path);
    std::fs::create_dir_all(path).map_err(|e| Status::internal(e.to_string()))?;
    if !mount::is_mount_point(path).map_err(|e| Status::internal(e.to_string()))? {
        mount::mount_tmpfs(path, Some(1 << 20)).map_err(|e| Status::internal(e.to_string()))?;
    }
    Ok(())
}

fn unmount_and_remove(path: &str) -> Result<(), Status> {
    let path = Path::new(path);
    if path.exists() && mount::is_mount_point(path).map_err(|e| Status::internal(e.to_string()))? {
        mount::unmount(path).map_err(|e| Status::internal(e.to_string()))?;
    }
    match std::fs::remove_dir(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Status::internal(e.to_string())),
    }
}

#[tonic::async_trait]
impl Node for FakeNode {
    async fn node_stage_volume(&self, r: Request<csi::NodeStageVolumeRequest>) -> Result<Response<csi::NodeStageVolumeResponse>, Status> {
        let r = r.into_inner();
        self.record(format!("NodeStageVolume {} {}", r.volume_id, r.staging_target_path));
        mount_tmpfs(&r.staging_target_path)?;
        Ok(Response::new(csi::NodeStageVolumeResponse {}))
    }

    async fn node_unstage_volume(&self, r: Request<csi::NodeUnstageVolumeRequest>) -> Result<Response<csi::NodeUnstageVolumeResponse>, Status> {
        let r = r.into_inner();
        self.record(format!("NodeUnstageVolume {} {}", r.volume_id, r.staging_target_path));
        let p = Path::new(&r.staging_target_path);
        if p.exists() && mount::is_mount_point(p).map_err(|e| Status::internal(e.to_string()))? {
            mount::unmount(p).map_err(|e| Status::internal(e.to_string()))?;
        }
        Ok(Response::new(csi::NodeUnstageVolumeResponse {}))
    }

    async fn node_publish_volume(&self, r: Request<csi::NodePublishVolumeRequest>) -> Result<Response<csi::NodePublishVolumeResponse>, Status> {
        let r = r.into_inner();
        self.record(format!("NodePublishVolume {} {} ro={}", r.volume_id, r.target_path, r.readonly));
        if self.stage_unstage && r.staging_target_path.is_empty() {
            return Err(Status::failed_precondition("staging_target_path missing"));
        }
        mount_tmpfs(&r.target_path)?;
        *self.last_publish.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
        Ok(Response::new(csi::NodePublishVolumeResponse {}))
    }

    async fn node_unpublish_volume(&self, r: Request<csi::NodeUnpublishVolumeRequest>) -> Result<Response<csi::NodeUnpublishVolumeResponse>, Status> {
        let r = r.into_inner();
        self.record(format!("NodeUnpublishVolume {} {}", r.volume_id, r.target_path));
        unmount_and_remove(&r.target_path)?;
        Ok(Response::new(csi::NodeUnpublishVolumeResponse {}))
    }

    async fn node_get_volume_stats(&self, _: Request<csi::NodeGetVolumeStatsRequest>) -> Result<Response<csi::NodeGetVolumeStatsResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn node_get_capabilities(&self, _: Request<csi::NodeGetCapabilitiesRequest>) -> Result<Response<csi::NodeGetCapabilitiesResponse>, Status> {
        use csi::node_service_capability::{Rpc, Type, rpc};
        let capabilities = if self.stage_unstage {
            vec![csi::NodeServiceCapability { r#type: Some(Type::Rpc(Rpc { r#type: rpc::Type::StageUnstageVolume as i32 })) }]
        } else {
            vec![]
        };
        Ok(Response::new(csi::NodeGetCapabilitiesResponse { capabilities }))
    }

    async fn node_get_info(&self, _: Request<csi::NodeGetInfoRequest>) -> Result<Response<csi::NodeGetInfoResponse>, Status> {
        self.record("NodeGetInfo".into());
        Ok(Response::new(csi::NodeGetInfoResponse {
            node_id: "fake-node".into(),
            max_volumes_per_node: 0,
            accessible_topology: Some(csi::Topology {
                segments: [("topology.fake/node".to_string(), "fake-node".to_string())].into(),
            }),
        }))
    }
}

/// The fake driver's registration service (what node-driver-registrar serves).
#[derive(Clone, Default)]
pub(crate) struct FakeRegistration {
    pub(crate) info: reg::PluginInfo,
    /// Every NotifyRegistrationStatus received.
    pub(crate) statuses: Arc<Mutex<Vec<reg::RegistrationStatus>>>,
}

#[tonic::async_trait]
impl Registration for FakeRegistration {
    async fn get_info(&self, _: Request<reg::InfoRequest>) -> Result<Response<reg::PluginInfo>, Status> {
        Ok(Response::new(self.info.clone()))
    }

    async fn notify_registration_status(&self, r: Request<reg::RegistrationStatus>) -> Result<Response<reg::RegistrationStatusResponse>, Status> {
        self.statuses.lock().unwrap_or_else(|e| e.into_inner()).push(r.into_inner());
        Ok(Response::new(reg::RegistrationStatusResponse {}))
    }
}

/// Serves `node` on `socket` until the test's runtime ends.
pub(crate) fn serve_node(socket: &Path, node: FakeNode) -> std::io::Result<()> {
    let incoming = UnixListenerStream::new(tokio::net::UnixListener::bind(socket)?);
    tokio::spawn(tonic::transport::Server::builder().add_service(NodeServer::new(node)).serve_with_incoming(incoming));
    Ok(())
}

/// Serves `registration` on `socket` until the test's runtime ends.
pub(crate) fn serve_registration(socket: &Path, registration: FakeRegistration) -> std::io::Result<()> {
    let incoming = UnixListenerStream::new(tokio::net::UnixListener::bind(socket)?);
    tokio::spawn(
        tonic::transport::Server::builder().add_service(RegistrationServer::new(registration)).serve_with_incoming(incoming),
    );
    Ok(())
}

/// A plugin handler that records what the plugin manager asks of it.
#[derive(Default)]
pub(crate) struct FakeHandler {
    pub(crate) events: Mutex<Vec<String>>,
    pub(crate) registered: Mutex<BTreeMap<String, PathBuf>>,
}

impl crate::pluginmanager::PluginHandler for FakeHandler {
    fn validate_plugin(&self, name: &str, _endpoint: &str, versions: &[String]) -> crate::Result<()> {
        super::registration_handler::validate(name, versions).map(drop)
    }

    fn register_plugin<'a>(&'a self, name: &'a str, endpoint: &'a str, _: &'a [String]) -> futures::future::BoxFuture<'a, crate::Result<()>> {
        Box::pin(async move {
            self.events.lock().unwrap_or_else(|e| e.into_inner()).push(format!("register {name} {endpoint}"));
            self.registered.lock().unwrap_or_else(|e| e.into_inner()).insert(name.into(), endpoint.into());
            Ok(())
        })
    }

    fn deregister_plugin<'a>(&'a self, name: &'a str) -> futures::future::BoxFuture<'a, ()> {
        Box::pin(async move {
            self.events.lock().unwrap_or_else(|e| e.into_inner()).push(format!("deregister {name}"));
            self.registered.lock().unwrap_or_else(|e| e.into_inner()).remove(name);
        })
    }
}

/// A fake API server: answers GETs from a table of path → JSON object (404 for anything else),
/// enough for a kube client to read claims, volumes, CSIDrivers and VolumeAttachments. One
/// request per connection, answered with `Connection: close`.
#[derive(Clone, Default)]
pub(crate) struct FakeApiServer {
    objects: Arc<Mutex<BTreeMap<String, serde_json::Value>>>,
}

impl FakeApiServer {
    /// Serves GETs of `object` at `path` (`/api/v1/namespaces/ns/persistentvolumeclaims/data`).
    pub(crate) fn set<T: serde::Serialize>(&self, path: &str, object: &T) {
        let value = serde_json::to_value(object).expect("serializable object");
        self.objects.lock().unwrap_or_else(|e| e.into_inner()).insert(path.into(), value);
    }

    /// Starts serving on 127.0.0.1; returns a client of it.
    pub(crate) async fn start(&self) -> std::io::Result<kube::Client> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let objects = self.objects.clone();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let objects = objects.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match conn.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&buf);
                    let path = head.split_whitespace().nth(1).unwrap_or("/").split('?').next().unwrap_or("/").to_string();
                    let found = objects.lock().unwrap_or_else(|e| e.into_inner()).get(&path).cloned();
                    let (code, body) = match found {
                        Some(v) => ("200 OK", v.to_string()),
                        None => (
                            "404 Not Found",
                            serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404, "message": format!("{path} not found")}).to_string(),
                        ),
                    };
                    let response = format!(
                        "HTTP/1.1 {code}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = conn.write_all(response.as_bytes()).await;
                    let _ = conn.shutdown().await;
                });
            }
        });
        let config = kube::Config::new(format!("http://{addr}").parse().expect("uri"));
        kube::Client::try_from(config).map_err(std::io::Error::other)
    }
}
