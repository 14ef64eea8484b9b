//! Mirrors cri-api's pkg/apis/testing/fake_runtime_service.go: the fake's RuntimeService —
//! sandboxes, containers, exec — answered from the fake node's state ([`super::FakeRuntime`]).

use std::collections::HashMap;
use std::path::Path;

use futures::stream::BoxStream;
use k8s_cri::v1 as api;
use k8s_cri::v1::runtime_service_server::RuntimeService;
use tonic::{Request, Response, Status};

use super::{
    Container, FakeRuntime, SIGKILL_EXIT_CODE, Sandbox, exit, invalid, is_host_network, labels_match, now_nanos, to_container,
    to_sandbox,
};

#[tonic::async_trait]
impl RuntimeService for FakeRuntime {
    async fn version(&self, _: Request<api::VersionRequest>) -> Result<Response<api::VersionResponse>, Status> {
        self.check("Version")?;
        Ok(Response::new(api::VersionResponse {
            version: "0.1.0".into(),
            runtime_name: "fake".into(),
            runtime_version: "0.0.0".into(),
            runtime_api_version: "v1".into(),
        }))
    }

    async fn run_pod_sandbox(
        &self,
        request: Request<api::RunPodSandboxRequest>,
    ) -> Result<Response<api::RunPodSandboxResponse>, Status> {
        let mut state = self.begin("RunPodSandbox")?;
        let req = request.into_inner();
        let config = req.config.ok_or_else(|| invalid("sandbox config"))?;
        let meta = config.metadata.clone().ok_or_else(|| invalid("sandbox config metadata"))?;
        let host_network = is_host_network(&config);
        if host_network && !config.hostname.is_empty() {
            return Err(Status::unknown(
                "failed to create containerd task: unable to set hostname without a private UTS namespace",
            ));
        }
        let taken = state.sandboxes.values().any(|s| s.status.metadata.as_ref() == Some(&meta));
        if taken {
            let name = format!("{}_{}_{}_{}", meta.name, meta.namespace, meta.uid, meta.attempt);
            return Err(Status::unknown(format!("failed to reserve sandbox name {name:?}: name is reserved")));
        }
        let id = state.new_id();
        let ip = if host_network { String::new() } else { state.new_ip() };
        let namespace_options = config
            .linux
            .as_ref()
            .and_then(|l| l.security_context.as_ref())
            .and_then(|s| s.namespace_options.clone());
        let status = api::PodSandboxStatus {
            id: id.clone(),
            metadata: Some(meta),
            state: api::PodSandboxState::SandboxReady as i32,
            created_at: now_nanos(),
            network: Some(api::PodSandboxNetworkStatus { ip, additional_ips: vec![] }),
            linux: Some(api::LinuxPodSandboxStatus {
                namespaces: Some(api::Namespace { options: namespace_options }),
            }),
            labels: config.labels,
            annotations: config.annotations,
            runtime_handler: req.runtime_handler,
        };
        state.sandboxes.insert(id.clone(), Sandbox { status, log_directory: config.log_directory });
        Ok(Response::new(api::RunPodSandboxResponse { pod_sandbox_id: id }))
    }

    async fn stop_pod_sandbox(
        &self,
        request: Request<api::StopPodSandboxRequest>,
    ) -> Result<Response<api::StopPodSandboxResponse>, Status> {
        let mut state = self.begin("StopPodSandbox")?;
        let id = request.into_inner().pod_sandbox_id;
        let sandbox = state.sandbox_mut(&id)?;
        sandbox.status.state = api::PodSandboxState::SandboxNotready as i32;
        if let Some(net) = sandbox.status.network.as_mut() {
            net.ip.clear();
        }
        for c in state.containers.values_mut().filter(|c| c.pod_sandbox_id == id) {
            exit(c, SIGKILL_EXIT_CODE);
        }
        Ok(Response::new(api::StopPodSandboxResponse {}))
    }

    async fn remove_pod_sandbox(
        &self,
        request: Request<api::RemovePodSandboxRequest>,
    ) -> Result<Response<api::RemovePodSandboxResponse>, Status> {
        let mut state = self.begin("RemovePodSandbox")?;
        let id = request.into_inner().pod_sandbox_id;
        state.sandboxes.remove(&id);
        state.containers.retain(|_, c| c.pod_sandbox_id != id);
        Ok(Response::new(api::RemovePodSandboxResponse {}))
    }

    async fn pod_sandbox_status(
        &self,
        request: Request<api::PodSandboxStatusRequest>,
    ) -> Result<Response<api::PodSandboxStatusResponse>, Status> {
        let mut state = self.begin("PodSandboxStatus")?;
        let id = request.into_inner().pod_sandbox_id;
        let status = state.sandbox_mut(&id)?.status.clone();
        Ok(Response::new(api::PodSandboxStatusResponse {
            status: Some(status),
            timestamp: now_nanos(),
            ..Default::default()
        }))
    }

    async fn list_pod_sandbox(
        &self,
        request: Request<api::ListPodSandboxRequest>,
    ) -> Result<Response<api::ListPodSandboxResponse>, Status> {
        let state = self.begin("ListPodSandbox")?;
        let filter = request.into_inner().filter.unwrap_or_default();
        let items = state
            .sandboxes
            .values()
            .map(|s| &s.status)
            .filter(|s| filter.id.is_empty() || s.id == filter.id)
            .filter(|s| filter.state.as_ref().is_none_or(|want| s.state == want.state))
            .filter(|s| labels_match(&filter.label_selector, &s.labels))
            .map(to_sandbox)
            .collect();
        Ok(Response::new(api::ListPodSandboxResponse { items }))
    }

    async fn create_container(
        &self,
        request: Request<api::CreateContainerRequest>,
    ) -> Result<Response<api::CreateContainerResponse>, Status> {
        let mut state = self.begin("CreateContainer")?;
        let req = request.into_inner();
        let config = req.config.ok_or_else(|| invalid("container config"))?;
        let meta = config.metadata.clone().ok_or_else(|| invalid("container config metadata"))?;
        let sandbox = state.sandbox_mut(&req.pod_sandbox_id)?;
        let pod = sandbox.status.metadata.clone().unwrap_or_default();
        let log_directory = sandbox.log_directory.clone();
        let reserved_name = format!("{}_{}_{}_{}_{}", meta.name, pod.name, pod.namespace, pod.uid, meta.attempt);
        if state.containers.values().any(|c| c.reserved_name == reserved_name) {
            return Err(Status::unknown(format!(
                "failed to reserve container name {reserved_name:?}: name {reserved_name:?} is reserved"
            )));
        }
        let image_name = config.image.as_ref().map(|i| i.image.clone()).unwrap_or_default();
        let image = state
            .image(&image_name)
            .cloned()
            .ok_or_else(|| Status::not_found(format!("failed to get image {image_name:?}: not found")))?;
        let log_path = if log_directory.is_empty() || config.log_path.is_empty() {
            String::new()
        } else {
            Path::new(&log_directory).join(&config.log_path).display().to_string()
        };
        let id = state.new_id();
        let status = api::ContainerStatus {
            id: id.clone(),
            metadata: Some(meta),
            state: api::ContainerState::ContainerCreated as i32,
            created_at: now_nanos(),
            image: config.image,
            image_ref: image.id.clone(),
            image_id: image.id,
            labels: config.labels,
            annotations: config.annotations,
            mounts: config.mounts,
            log_path,
            ..Default::default()
        };
        state.containers.insert(id.clone(), Container { pod_sandbox_id: req.pod_sandbox_id, reserved_name, status });
        Ok(Response::new(api::CreateContainerResponse { container_id: id }))
    }

    async fn start_container(
        &self,
        request: Request<api::StartContainerRequest>,
    ) -> Result<Response<api::StartContainerResponse>, Status> {
        let mut state = self.begin("StartContainer")?;
        let id = request.into_inner().container_id;
        let sandbox_id = state.container_mut(&id)?.pod_sandbox_id.clone();
        let ready = state
            .sandboxes
            .get(&sandbox_id)
            .is_some_and(|s| s.status.state == api::PodSandboxState::SandboxReady as i32);
        if !ready {
            return Err(Status::unknown(format!("sandbox container {sandbox_id:?} is not running")));
        }
        let c = state.container_mut(&id)?;
        if c.status.state != api::ContainerState::ContainerCreated as i32 {
            let name = api::ContainerState::try_from(c.status.state).map_or("UNKNOWN", |s| s.as_str_name());
            return Err(Status::unknown(format!("container {id:?} is in {name} state")));
        }
        c.status.state = api::ContainerState::ContainerRunning as i32;
        c.status.started_at = now_nanos();
        Ok(Response::new(api::StartContainerResponse {}))
    }

    async fn stop_container(
        &self,
        request: Request<api::StopContainerRequest>,
    ) -> Result<Response<api::StopContainerResponse>, Status> {
        let mut state = self.begin("StopContainer")?;
        let req = request.into_inner();
        state.stop_requests.push((req.container_id.clone(), req.timeout));
        let c = state.container_mut(&req.container_id)?;
        // A grace period: the process handles SIGTERM and exits cleanly. None: SIGKILL.
        exit(c, if req.timeout > 0 { 0 } else { SIGKILL_EXIT_CODE });
        Ok(Response::new(api::StopContainerResponse {}))
    }

    async fn remove_container(
        &self,
        request: Request<api::RemoveContainerRequest>,
    ) -> Result<Response<api::RemoveContainerResponse>, Status> {
        let mut state = self.begin("RemoveContainer")?;
        state.containers.remove(&request.into_inner().container_id);
        Ok(Response::new(api::RemoveContainerResponse {}))
    }

    async fn list_containers(
        &self,
        request: Request<api::ListContainersRequest>,
    ) -> Result<Response<api::ListContainersResponse>, Status> {
        let state = self.begin("ListContainers")?;
        let filter = request.into_inner().filter.unwrap_or_default();
        let containers = state
            .containers
            .iter()
            .filter(|(id, _)| filter.id.is_empty() || **id == filter.id)
            .filter(|(_, c)| filter.pod_sandbox_id.is_empty() || c.pod_sandbox_id == filter.pod_sandbox_id)
            .filter(|(_, c)| filter.state.as_ref().is_none_or(|want| c.status.state == want.state))
            .filter(|(_, c)| labels_match(&filter.label_selector, &c.status.labels))
            .map(|(id, c)| to_container(id, c))
            .collect();
        Ok(Response::new(api::ListContainersResponse { containers }))
    }

    async fn container_status(
        &self,
        request: Request<api::ContainerStatusRequest>,
    ) -> Result<Response<api::ContainerStatusResponse>, Status> {
        let mut state = self.begin("ContainerStatus")?;
        let status = state.container_mut(&request.into_inner().container_id)?.status.clone();
        Ok(Response::new(api::ContainerStatusResponse { status: Some(status), info: HashMap::new() }))
    }

    async fn update_container_resources(
        &self,
        request: Request<api::UpdateContainerResourcesRequest>,
    ) -> Result<Response<api::UpdateContainerResourcesResponse>, Status> {
        let mut state = self.begin("UpdateContainerResources")?;
        let req = request.into_inner();
        let c = state.container_mut(&req.container_id)?;
        c.status.resources = Some(api::ContainerResources { linux: req.linux, ..Default::default() });
        Ok(Response::new(api::UpdateContainerResourcesResponse {}))
    }

    async fn reopen_container_log(
        &self,
        request: Request<api::ReopenContainerLogRequest>,
    ) -> Result<Response<api::ReopenContainerLogResponse>, Status> {
        let mut state = self.begin("ReopenContainerLog")?;
        let id = request.into_inner().container_id;
        if state.container_mut(&id)?.status.state != api::ContainerState::ContainerRunning as i32 {
            return Err(Status::unknown("container is not running"));
        }
        Ok(Response::new(api::ReopenContainerLogResponse {}))
    }

    async fn exec_sync(&self, request: Request<api::ExecSyncRequest>) -> Result<Response<api::ExecSyncResponse>, Status> {
        let req = request.into_inner();
        // The command "runs" without the state locked, so other calls go on meanwhile.
        let (script, result) = {
            let mut state = self.begin("ExecSync")?;
            state.exec_calls.push((req.container_id.clone(), req.cmd.clone(), req.timeout));
            let c = state.container_mut(&req.container_id)?;
            if c.status.state != api::ContainerState::ContainerRunning as i32 {
                return Err(Status::unknown(format!("container {:?} is not running", req.container_id)));
            }
            (state.exec_scripts.get(&req.cmd).cloned(), state.exec_results.get(&req.container_id).cloned())
        };
        if let Some((exit_code, stdout)) = result {
            return Ok(Response::new(api::ExecSyncResponse { stdout, stderr: vec![], exit_code }));
        }
        let Some(script) = script else {
            return Ok(Response::new(api::ExecSyncResponse { stdout: req.cmd.join(" ").into_bytes(), stderr: vec![], exit_code: 0 }));
        };
        let timeout = std::time::Duration::from_secs(req.timeout.max(0) as u64);
        if req.timeout > 0 && script.delay > timeout {
            tokio::time::sleep(timeout).await;
            return Err(Status::deadline_exceeded(format!("timeout {}s exceeded: context deadline exceeded", req.timeout)));
        }
        tokio::time::sleep(script.delay).await;
        Ok(Response::new(api::ExecSyncResponse {
            stdout: script.stdout.into_bytes(),
            stderr: script.stderr.into_bytes(),
            exit_code: script.exit_code,
        }))
    }

    async fn exec(&self, _: Request<api::ExecRequest>) -> Result<Response<api::ExecResponse>, Status> {
        self.check("Exec")?;
        Err(Status::unimplemented("the fake runtime has no streaming server"))
    }

    async fn attach(&self, _: Request<api::AttachRequest>) -> Result<Response<api::AttachResponse>, Status> {
        self.check("Attach")?;
        Err(Status::unimplemented("the fake runtime has no streaming server"))
    }

    async fn port_forward(&self, _: Request<api::PortForwardRequest>) -> Result<Response<api::PortForwardResponse>, Status> {
        self.check("PortForward")?;
        Err(Status::unimplemented("the fake runtime has no streaming server"))
    }

    async fn container_stats(
        &self,
        _: Request<api::ContainerStatsRequest>,
    ) -> Result<Response<api::ContainerStatsResponse>, Status> {
        self.check("ContainerStats")?;
        Err(Status::unimplemented("the fake runtime keeps no stats"))
    }

    async fn list_container_stats(
        &self,
        _: Request<api::ListContainerStatsRequest>,
    ) -> Result<Response<api::ListContainerStatsResponse>, Status> {
        self.check("ListContainerStats")?;
        Err(Status::unimplemented("the fake runtime keeps no stats"))
    }

    async fn pod_sandbox_stats(
        &self,
        _: Request<api::PodSandboxStatsRequest>,
    ) -> Result<Response<api::PodSandboxStatsResponse>, Status> {
        self.check("PodSandboxStats")?;
        Err(Status::unimplemented("the fake runtime keeps no stats"))
    }

    async fn list_pod_sandbox_stats(
        &self,
        _: Request<api::ListPodSandboxStatsRequest>,
    ) -> Result<Response<api::ListPodSandboxStatsResponse>, Status> {
        self.check("ListPodSandboxStats")?;
        Err(Status::unimplemented("the fake runtime keeps no stats"))
    }

    async fn update_runtime_config(
        &self,
        _: Request<api::UpdateRuntimeConfigRequest>,
    ) -> Result<Response<api::UpdateRuntimeConfigResponse>, Status> {
        // The kubelet sends the node's pod CIDR here; containerd accepts it, so does the fake.
        self.check("UpdateRuntimeConfig")?;
        Ok(Response::new(api::UpdateRuntimeConfigResponse {}))
    }

    async fn status(&self, _: Request<api::StatusRequest>) -> Result<Response<api::StatusResponse>, Status> {
        self.check("Status")?;
        let condition = |t: &str| api::RuntimeCondition { r#type: t.to_string(), status: true, ..Default::default() };
        Ok(Response::new(api::StatusResponse {
            status: Some(api::RuntimeStatus { conditions: vec![condition("RuntimeReady"), condition("NetworkReady")] }),
            ..Default::default()
        }))
    }

    async fn checkpoint_container(
        &self,
        _: Request<api::CheckpointContainerRequest>,
    ) -> Result<Response<api::CheckpointContainerResponse>, Status> {
        self.check("CheckpointContainer")?;
        Err(Status::unimplemented("method CheckpointContainer not implemented"))
    }

    type GetContainerEventsStream = BoxStream<'static, Result<api::ContainerEventResponse, Status>>;

    async fn get_container_events(
        &self,
        _: Request<api::GetEventsRequest>,
    ) -> Result<Response<Self::GetContainerEventsStream>, Status> {
        self.check("GetContainerEvents")?;
        Err(Status::unimplemented("method GetContainerEvents not implemented"))
    }

    async fn list_metric_descriptors(
        &self,
        _: Request<api::ListMetricDescriptorsRequest>,
    ) -> Result<Response<api::ListMetricDescriptorsResponse>, Status> {
        self.check("ListMetricDescriptors")?;
        Err(Status::unimplemented("method ListMetricDescriptors not implemented"))
    }

    async fn list_pod_sandbox_metrics(
        &self,
        _: Request<api::ListPodSandboxMetricsRequest>,
    ) -> Result<Response<api::ListPodSandboxMetricsResponse>, Status> {
        self.check("ListPodSandboxMetrics")?;
        Err(Status::unimplemented("method ListPodSandboxMetrics not implemented"))
    }

    async fn runtime_config(
        &self,
        _: Request<api::RuntimeConfigRequest>,
    ) -> Result<Response<api::RuntimeConfigResponse>, Status> {
        self.check("RuntimeConfig")?;
        Err(Status::unimplemented("method RuntimeConfig not implemented"))
    }
}

