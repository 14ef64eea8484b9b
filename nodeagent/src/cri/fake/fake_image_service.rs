//! Mirrors cri-api's pkg/apis/testing/fake_image_service.go: the fake's ImageService, answered
//! from the images the fake node has ([`super::FakeRuntime::add_image`]).

use std::collections::HashMap;

use k8s_cri::v1 as api;
use k8s_cri::v1::image_service_server::ImageService;
use tonic::{Request, Response, Status};

use super::{FakeRuntime, normalize_image, now_nanos};

#[tonic::async_trait]
impl ImageService for FakeRuntime {
    async fn list_images(&self, request: Request<api::ListImagesRequest>) -> Result<Response<api::ListImagesResponse>, Status> {
        let state = self.begin("ListImages")?;
        let wanted = request.into_inner().filter.and_then(|f| f.image).map(|i| i.image).filter(|i| !i.is_empty());
        let images = match wanted {
            Some(name) => state.image(&name).cloned().into_iter().collect(),
            None => state.images.values().cloned().collect(),
        };
        Ok(Response::new(api::ListImagesResponse { images }))
    }

    async fn image_status(
        &self,
        request: Request<api::ImageStatusRequest>,
    ) -> Result<Response<api::ImageStatusResponse>, Status> {
        let state = self.begin("ImageStatus")?;
        let name = request.into_inner().image.map(|i| i.image).unwrap_or_default();
        // An unknown image is an empty answer, not an error: "not present" is a normal state.
        let image = state.image(&name).cloned();
        Ok(Response::new(api::ImageStatusResponse { image, info: HashMap::new() }))
    }

    async fn pull_image(&self, request: Request<api::PullImageRequest>) -> Result<Response<api::PullImageResponse>, Status> {
        let pull_allowed = self.begin("PullImage")?.pull_allowed;
        let name = request.into_inner().image.map(|i| i.image).unwrap_or_default();
        if !pull_allowed {
            let reference = normalize_image(&name);
            return Err(Status::unknown(format!(
                "failed to pull and unpack image {reference:?}: failed to resolve reference {reference:?}: \
                 dial tcp: lookup registry: no such host (fake runtime: pulls are disabled)"
            )));
        }
        self.add_image(&name);
        let image_ref = self.state().image(&name).map(|i| i.id.clone()).unwrap_or_default();
        Ok(Response::new(api::PullImageResponse { image_ref }))
    }

    async fn remove_image(&self, request: Request<api::RemoveImageRequest>) -> Result<Response<api::RemoveImageResponse>, Status> {
        let mut state = self.begin("RemoveImage")?;
        let name = request.into_inner().image.map(|i| i.image).unwrap_or_default();
        if let Some(id) = state.image(&name).map(|i| i.id.clone()) {
            state.images.retain(|_, i| i.id != id);
        }
        Ok(Response::new(api::RemoveImageResponse {}))
    }

    async fn image_fs_info(&self, _: Request<api::ImageFsInfoRequest>) -> Result<Response<api::ImageFsInfoResponse>, Status> {
        let state = self.begin("ImageFsInfo")?;
        let used: u64 = state.images.values().map(|i| i.size).sum();
        let usage = api::FilesystemUsage {
            timestamp: now_nanos(),
            fs_id: Some(api::FilesystemIdentifier { mountpoint: "/var/lib/fake-cri".into() }),
            used_bytes: Some(api::UInt64Value { value: used }),
            inodes_used: Some(api::UInt64Value { value: state.images.len() as u64 }),
        };
        Ok(Response::new(api::ImageFsInfoResponse { image_filesystems: vec![usage], container_filesystems: vec![] }))
    }
}

