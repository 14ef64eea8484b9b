//! Mirrors kubelet's images/image_manager.go (EnsureImageExists) and kuberuntime_image.go: the
//! pull policy, pulls through CRI with the credentials kubelet would use (the pod's pull secrets,
//! which hold its ServiceAccount's too, then the node's own, [`crate::credentialprovider`]), one
//! at a time or several ([`crate::images::puller`]), the Pulling / Pulled / Failed / BackOff
//! events in kubelet's words, and ImagePullBackOff between failed pulls (per pod and image, 10 s
//! doubling to 5 min).

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ::api::core::v1::defaults::default_image_pull_policy;
use k8s_cri::v1 as api;
use k8s_openapi::api::core::v1::{Container, Pod};

use tracing::Instrument as _;

use crate::cri::RemoteRuntime;
use crate::events::{self, Recorder};
use crate::flowcontrol::Backoff;
use crate::images::puller::{PullOptions, Puller};

/// Why a container's image is not there; the reason shows as the container's waiting reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ImageError {
    pub(crate) reason: &'static str,
    pub(crate) message: String,
}

pub(crate) const ERR_IMAGE_PULL: &str = "ErrImagePull";
pub(crate) const IMAGE_PULL_BACK_OFF: &str = "ImagePullBackOff";
pub(crate) const ERR_IMAGE_NEVER_PULL: &str = "ErrImageNeverPull";
pub(crate) const INVALID_IMAGE_NAME: &str = "InvalidImageName";

/// What to do about an image, decided from the policy and whether it is present.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PullDecision {
    UsePresent,
    Pull,
    NeverPullMissing,
}

/// The container's pull policy, or the one defaulting would give it if the spec leaves it out
/// (Always for `:latest` or no tag, IfNotPresent otherwise).
pub(crate) fn pull_policy(container: &Container) -> &str {
    match container.image_pull_policy.as_deref() {
        Some(p) if !p.is_empty() => p,
        _ => default_image_pull_policy(container.image.as_deref().unwrap_or_default()),
    }
}

pub(crate) fn decide(policy: &str, present: bool) -> PullDecision {
    match (policy, present) {
        ("Always", _) => PullDecision::Pull,
        ("Never", true) | ("IfNotPresent", true) => PullDecision::UsePresent,
        ("Never", false) => PullDecision::NeverPullMissing,
        _ => PullDecision::Pull,
    }
}

/// Credentials for `image` from `.dockerconfigjson` secrets (kubelet's credentialprovider):
/// the entry whose registry host matches the image's.
pub(crate) fn auth_for_image(image: &str, docker_configs: &[serde_json::Value]) -> Option<api::AuthConfig> {
    let registry = image_registry(image);
    for cfg in docker_configs {
        let auths = cfg.get("auths").and_then(|a| a.as_object())?;
        for (server, entry) in auths {
            let host = server.trim_start_matches("https://").trim_start_matches("http://");
            let host = host.split('/').next().unwrap_or(host);
            let matches = host == registry || (registry == "docker.io" && host == "index.docker.io");
            if !matches {
                continue;
            }
            let s = |k: &str| entry.get(k).and_then(|v| v.as_str()).unwrap_or_default().to_string();
            // containerd's CRI hands the credentials only to the registry host this URL names
            // (ParseAuth: `url.Parse(ServerAddress).Host`), so it must be a URL of the image's
            // registry. Docker Hub's images are pulled from registry-1.docker.io, whatever the
            // entry's key: for them it is left empty (no check).
            let server_address = if registry == "docker.io" { String::new() } else { format!("https://{registry}") };
            return Some(api::AuthConfig {
                username: s("username"),
                password: s("password"),
                auth: s("auth"),
                server_address,
                identity_token: s("identitytoken"),
                registry_token: s("registrytoken"),
            });
        }
    }
    None
}

/// The registry host of an image reference (`docker.io` when it names none).
pub(crate) fn image_registry(image: &str) -> &str {
    match image.split_once('/') {
        Some((first, _)) if first.contains('.') || first.contains(':') || first == "localhost" => first,
        _ => "docker.io",
    }
}

/// Pulls images for pods, with a backoff per (pod, image) after failures.
pub(crate) struct ImageManager {
    runtime: RemoteRuntime,
    recorder: Recorder,
    backoff: Mutex<Backoff>,
    puller: Puller,
    /// `--root-dir`, where the node's own registry credentials are looked for first; none: the
    /// node has none (tests).
    credentials_dir: Option<PathBuf>,
}

impl ImageManager {
    pub(crate) fn new(runtime: RemoteRuntime, recorder: Recorder) -> ImageManager {
        ImageManager {
            runtime,
            recorder,
            backoff: Mutex::new(Backoff::new(Duration::from_secs(10), Duration::from_secs(300))),
            puller: Puller::new(&PullOptions::default()),
            credentials_dir: None,
        }
    }

    /// `--serialize-image-pulls`/`--max-parallel-image-pulls`, and the node's credentials
    /// directory (`--root-dir`).
    pub(crate) fn configure(&mut self, pulls: &PullOptions, root_dir: PathBuf) {
        self.puller = Puller::new(pulls);
        self.credentials_dir = Some(root_dir);
    }

    /// Make sure `container`'s image is on the node; returns the image reference to create the
    /// container from.
    pub(crate) async fn ensure_image_exists(
        &self,
        pod: &Pod,
        container: &Container,
        pull_secrets: &[serde_json::Value],
        sandbox_config: &api::PodSandboxConfig,
    ) -> Result<String, ImageError> {
        let image = container.image.as_deref().unwrap_or_default();
        let field = Some(events::container_field_path(pod, &container.name));
        if image.is_empty() || image.contains(char::is_whitespace) {
            let message = format!("Failed to apply default image tag {image:?}: couldn't parse image name {image:?}: invalid reference format");
            self.recorder.pod_event(pod, field, events::WARNING, events::FAILED_TO_PULL_IMAGE, &message);
            return Err(ImageError { reason: INVALID_IMAGE_NAME, message });
        }
        let present = match self.runtime.image_status(image).await {
            Ok(status) => status.map(|i| i.id),
            Err(e) => {
                let message = format!("Failed to inspect image {image:?}: {e}");
                self.recorder.pod_event(pod, field, events::WARNING, events::FAILED_TO_PULL_IMAGE, &message);
                return Err(ImageError { reason: "ImageInspectError", message });
            }
        };
        match decide(pull_policy(container), present.is_some()) {
            PullDecision::UsePresent => {
                let message = format!("Container image {image:?} already present on machine");
                self.recorder.pod_event(pod, field, events::NORMAL, events::PULLED_IMAGE, message);
                Ok(present.unwrap_or_default())
            }
            PullDecision::NeverPullMissing => {
                let message =
                    format!("Container image {image:?} is not present with pull policy of Never");
                self.recorder.pod_event(pod, field, events::WARNING, events::ERR_IMAGE_NEVER_PULL_POLICY, &message);
                Err(ImageError { reason: ERR_IMAGE_NEVER_PULL, message })
            }
            PullDecision::Pull => {
                let key = format!("{}/{image}", pod.metadata.uid.as_deref().unwrap_or_default());
                let now = Instant::now();
                if let Some(left) = self.in_backoff(&key, now) {
                    let message = format!("Back-off pulling image {image:?}");
                    self.recorder.pod_event(pod, field, events::NORMAL, events::BACK_OFF_PULL_IMAGE, &message);
                    tracing::debug!(target: "kuberuntime", image, left_ms = left.as_millis() as u64, "image pull in backoff");
                    return Err(ImageError { reason: IMAGE_PULL_BACK_OFF, message });
                }
                self.recorder.pod_event(pod, field.clone(), events::NORMAL, events::PULLING_IMAGE, format!("Pulling image {image:?}"));
                let requested = Instant::now();
                // The pod's pull secrets first (the ServiceAccount's are among them: the API server
                // copied them in), then the node's own.
                let auth = auth_for_image(image, pull_secrets).or_else(|| {
                    let node = self.credentials_dir.as_deref().and_then(crate::credentialprovider::node_docker_config)?;
                    auth_for_image(image, &[node])
                });
                let turn = self.puller.turn().await;
                // A step of the pod for `kubelab trace`: the registry round trip (the CRI
                // PullImage call inside it), with the image, its registry and its size.
                let uid = pod.metadata.uid.as_deref().unwrap_or_default();
                let span = tracing::info_span!(target: "kubelet::images", "image_pull", pod_uid = %uid, image = %image, registry = %image_registry(image), bytes = tracing::field::Empty, error = tracing::field::Empty);
                let start = Instant::now();
                let pulled = self.runtime.pull_image(image, auth, Some(sandbox_config.clone())).instrument(span.clone()).await;
                let (took, waited) = (start.elapsed(), requested.elapsed());
                drop(turn);
                match pulled {
                    Ok(image_ref) => {
                        self.backoff.lock().unwrap_or_else(|e| e.into_inner()).reset(&key);
                        // kubelet: the size ImageStatus reports of what was pulled.
                        let size = self.runtime.image_status(&image_ref).await.ok().flatten().map_or(0, |i| i.size);
                        span.record("bytes", size);
                        drop(span);
                        let ms = |d: Duration| crate::format::go_duration(Duration::from_millis(d.as_millis() as u64));
                        let message = format!("Successfully pulled image {image:?} in {} ({} including waiting). Image size: {size} bytes.", ms(took), ms(waited));
                        self.recorder.pod_event(pod, field, events::NORMAL, events::PULLED_IMAGE, message);
                        Ok(image_ref)
                    }
                    Err(e) => {
                        span.record("error", tracing::field::display(&e));
                        drop(span);
                        self.backoff.lock().unwrap_or_else(|e| e.into_inner()).next(&key, Instant::now());
                        let message = format!("Failed to pull image {image:?}: {e}");
                        self.recorder.pod_event(pod, field, events::WARNING, events::FAILED_TO_PULL_IMAGE, &message);
                        Err(ImageError { reason: ERR_IMAGE_PULL, message })
                    }
                }
            }
        }
    }

    fn in_backoff(&self, key: &str, now: Instant) -> Option<Duration> {
        self.backoff.lock().unwrap_or_else(|e| e.into_inner()).remaining_since_last(key, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(image: &str, policy: Option<&str>) -> Container {
        Container { name: "c".into(), image: Some(image.into()), image_pull_policy: policy.map(String::from), ..Default::default() }
    }

    #[test]
    fn default_pull_policy_follows_the_tag() {
        for (image, want) in [
            ("busybox", "Always"),
            ("busybox:latest", "Always"),
            ("busybox:1.36", "IfNotPresent"),
            ("localhost:5000/app", "Always"),
            ("localhost:5000/app:v1", "IfNotPresent"),
            ("busybox@sha256:abcd", "IfNotPresent"),
        ] {
            assert_eq!(pull_policy(&c(image, None)), want, "{image}");
        }
        assert_eq!(pull_policy(&c("busybox", Some("Never"))), "Never");
    }

    #[test]
    fn pull_decisions() {
        assert_eq!(decide("Always", true), PullDecision::Pull);
        assert_eq!(decide("IfNotPresent", true), PullDecision::UsePresent);
        assert_eq!(decide("IfNotPresent", false), PullDecision::Pull);
        assert_eq!(decide("Never", true), PullDecision::UsePresent);
        assert_eq!(decide("Never", false), PullDecision::NeverPullMissing);
    }

    #[test]
    fn credentials_match_the_registry() {
        let cfg = serde_json::json!({"auths": {
            "https://index.docker.io/v1/": {"username": "u", "password": "p"},
            "registry.example.com:5000": {"auth": "dTpw"}
        }});
        let a = auth_for_image("busybox:1.36", std::slice::from_ref(&cfg)).expect("docker hub");
        assert_eq!((a.username.as_str(), a.password.as_str()), ("u", "p"));
        assert_eq!(a.server_address, "");
        let b = auth_for_image("registry.example.com:5000/team/app:v1", std::slice::from_ref(&cfg)).expect("private");
        assert_eq!(b.auth, "dTpw");
        assert_eq!(b.server_address, "https://registry.example.com:5000", "a URL containerd parses, naming the image's registry");
        assert!(auth_for_image("quay.io/x/y", &[cfg]).is_none());
    }
}
