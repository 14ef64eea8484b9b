//! Mirrors pkg/volume/csi/csi_client.go: the node agent's calls to a CSI driver's Node service.
//!
//! Each call dials the driver's unix socket (as kubelet's csiDriverClient does: a driver may be
//! restarted between two calls), is bounded by [`CSI_TIMEOUT`], and is a tracing span on target
//! `csi` named by its RPC (`step = "NodePublishVolume"`, with the driver and the volume handle).
//! The span opens inside the pod's step (`step3_volumes`, or the pod's termination), so `kubelab
//! trace` shows a pod's CSI calls beside its CRI calls.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use proto::csi::v1 as csi;
use proto::csi::v1::node_client::NodeClient;
use tonic::transport::{Channel, Endpoint};
use tracing::Instrument as _;

use crate::error::{Error, Result};

/// How long one CSI call may take (kubelet's csiTimeout).
pub(crate) const CSI_TIMEOUT: Duration = Duration::from_secs(120);

/// Dials a unix socket as a gRPC channel.
pub(crate) async fn dial(socket: &Path) -> Result<Channel> {
    let endpoint = socket.display().to_string();
    let err = |source| Error::CsiConnect { endpoint: endpoint.clone(), source };
    Endpoint::from_shared(format!("unix://{endpoint}"))
        .map_err(err)?
        .connect_timeout(Duration::from_secs(10))
        .connect()
        .await
        .map_err(err)
}

/// One CSI call as a span of the pod's trace: `step` is the RPC's name. Failures are recorded on
/// the span and mapped to [`Error::Csi`].
pub(crate) async fn traced<T>(
    step: &'static str,
    driver: &str,
    volume: &str,
    call: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    let span = tracing::info_span!(target: "csi", "csi", step, driver, volume, error = tracing::field::Empty);
    let start = Instant::now();
    let res = match tokio::time::timeout(CSI_TIMEOUT, call.instrument(span.clone())).await {
        Ok(r) => r,
        Err(_) => Err(Error::Csi { op: step, source: tonic::Status::deadline_exceeded("context deadline exceeded") }),
    };
    let ms = start.elapsed().as_secs_f64() * 1e3;
    match &res {
        Ok(_) => tracing::debug!(target: "csi", op = step, driver, volume, ms, "CSI call"),
        Err(e) => {
            span.record("error", tracing::field::display(e));
            tracing::debug!(target: "csi", op = step, driver, volume, ms, error = %e, "CSI call failed");
        }
    }
    res
}

fn status(op: &'static str) -> impl Fn(tonic::Status) -> Error {
    move |source| Error::Csi { op, source }
}

/// What the agent asks of a driver's NodeGetCapabilities.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct NodeCapabilities {
    /// STAGE_UNSTAGE_VOLUME: the driver wants NodeStageVolume before NodePublishVolume.
    pub(crate) stage_unstage: bool,
    /// SINGLE_NODE_MULTI_WRITER: the driver tells the two single-node access modes apart.
    pub(crate) single_node_multi_writer: bool,
}

/// The Node service of one registered driver.
#[derive(Clone, Debug)]
pub(crate) struct CsiClient {
    driver: String,
    endpoint: PathBuf,
}

/// The arguments of NodeStageVolume and NodePublishVolume that come from the volume.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct VolumeArgs {
    pub(crate) volume_handle: String,
    pub(crate) capability: csi::VolumeCapability,
    pub(crate) publish_context: HashMap<String, String>,
    pub(crate) volume_context: HashMap<String, String>,
}

impl CsiClient {
    pub(crate) fn new(driver: &str, endpoint: PathBuf) -> CsiClient {
        CsiClient { driver: driver.to_string(), endpoint }
    }

    async fn node(&self) -> Result<NodeClient<Channel>> {
        Ok(NodeClient::new(dial(&self.endpoint).await?))
    }

    pub(crate) async fn node_get_info(&self) -> Result<csi::NodeGetInfoResponse> {
        traced("NodeGetInfo", &self.driver, "", async {
            let mut node = self.node().await?;
            Ok(node.node_get_info(csi::NodeGetInfoRequest {}).await.map_err(status("NodeGetInfo"))?.into_inner())
        })
        .await
    }

    pub(crate) async fn node_get_capabilities(&self) -> Result<NodeCapabilities> {
        use csi::node_service_capability::{Type, rpc};
        let resp = traced("NodeGetCapabilities", &self.driver, "", async {
            let mut node = self.node().await?;
            Ok(node
                .node_get_capabilities(csi::NodeGetCapabilitiesRequest {})
                .await
                .map_err(status("NodeGetCapabilities"))?
                .into_inner())
        })
        .await?;
        let has = |want: rpc::Type| {
            resp.capabilities.iter().any(|c| matches!(c.r#type, Some(Type::Rpc(r)) if r.r#type == want as i32))
        };
        Ok(NodeCapabilities {
            stage_unstage: has(rpc::Type::StageUnstageVolume),
            single_node_multi_writer: has(rpc::Type::SingleNodeMultiWriter),
        })
    }

    pub(crate) async fn node_stage_volume(
        &self,
        args: &VolumeArgs,
        staging_target_path: &Path,
        secrets: HashMap<String, String>,
    ) -> Result<()> {
        let req = csi::NodeStageVolumeRequest {
            volume_id: args.volume_handle.clone(),
            publish_context: args.publish_context.clone(),
            staging_target_path: staging_target_path.display().to_string(),
            volume_capability: Some(args.capability.clone()),
            secrets,
            volume_context: args.volume_context.clone(),
        };
        traced("NodeStageVolume", &self.driver, &args.volume_handle, async {
            self.node().await?.node_stage_volume(req).await.map_err(status("NodeStageVolume")).map(drop)
        })
        .await
    }

    pub(crate) async fn node_unstage_volume(&self, volume_handle: &str, staging_target_path: &Path) -> Result<()> {
        let req = csi::NodeUnstageVolumeRequest {
            volume_id: volume_handle.to_string(),
            staging_target_path: staging_target_path.display().to_string(),
        };
        traced("NodeUnstageVolume", &self.driver, volume_handle, async {
            self.node().await?.node_unstage_volume(req).await.map_err(status("NodeUnstageVolume")).map(drop)
        })
        .await
    }

    pub(crate) async fn node_publish_volume(
        &self,
        args: &VolumeArgs,
        staging_target_path: Option<&Path>,
        target_path: &Path,
        readonly: bool,
        secrets: HashMap<String, String>,
    ) -> Result<()> {
        let req = csi::NodePublishVolumeRequest {
            volume_id: args.volume_handle.clone(),
            publish_context: args.publish_context.clone(),
            staging_target_path: staging_target_path.map(|p| p.display().to_string()).unwrap_or_default(),
            target_path: target_path.display().to_string(),
            volume_capability: Some(args.capability.clone()),
            readonly,
            secrets,
            volume_context: args.volume_context.clone(),
        };
        traced("NodePublishVolume", &self.driver, &args.volume_handle, async {
            self.node().await?.node_publish_volume(req).await.map_err(status("NodePublishVolume")).map(drop)
        })
        .await
    }

    pub(crate) async fn node_unpublish_volume(&self, volume_handle: &str, target_path: &Path) -> Result<()> {
        let req = csi::NodeUnpublishVolumeRequest {
            volume_id: volume_handle.to_string(),
            target_path: target_path.display().to_string(),
        };
        traced("NodeUnpublishVolume", &self.driver, volume_handle, async {
            self.node().await?.node_unpublish_volume(req).await.map_err(status("NodeUnpublishVolume")).map(drop)
        })
        .await
    }
}
