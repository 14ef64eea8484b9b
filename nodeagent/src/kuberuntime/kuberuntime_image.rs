//! Mirrors kubelet's images/image_manager.go (EnsureImageExists) and kuberuntime_image.go: the
//! pull policy, pulls through CRI with the credentials kubelet would use (the pod's pull secrets,
//! which hold its ServiceAccount's too, then the node's docker config and credential provider
//! plugins, [`crate::credentialprovider`]), each tried in turn until one works, one pull at a
//! time or several ([`crate::images::puller`]), the Pulling / Pulled / Failed / BackOff events in
//! kubelet's words, and ImagePullBackOff between failed pulls (per pod and image, 10 s doubling
//! to 5 min).

use std::future::Future;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ::api::core::v1::defaults::default_image_pull_policy;
use k8s_cri::v1 as api;
use k8s_openapi::api::core::v1::{Container, Pod};

use tracing::Instrument as _;

use crate::credentialprovider::{AuthConfig, NodeCredentials};
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

/// A credential as CRI takes it.
fn cri_auth(cred: &AuthConfig, image: &str) -> api::AuthConfig {
    let registry = image_registry(image);
    // containerd's CRI hands the credentials only to the registry host this URL names
    // (ParseAuth: `url.Parse(ServerAddress).Host`), so it must be a URL of the image's
    // registry. Docker Hub's images are pulled from registry-1.docker.io, whatever the
    // entry's key: for them it is left empty (no check).
    let server_address = if registry == "docker.io" { String::new() } else { format!("https://{registry}") };
    api::AuthConfig { username: cred.username.clone(), password: cred.password.clone(), server_address, ..Default::default() }
}

/// kuberuntime_image.go's PullImage: without credentials one anonymous pull; else each
/// credential in turn until a pull works, the failures aggregated (`[a, b]`) if none does.
async fn pull_with_credentials<F, Fut>(image: &str, creds: &[AuthConfig], mut pull: F) -> Result<String, String>
where
    F: FnMut(Option<api::AuthConfig>) -> Fut,
    Fut: Future<Output = crate::Result<String>>,
{
    if creds.is_empty() {
        tracing::debug!(target: "kuberuntime", image, "pulling image without credentials");
        return pull(None).await.map_err(|e| e.to_string());
    }
    let mut errs = vec![];
    for cred in creds {
        match pull(Some(cri_auth(cred, image))).await {
            Ok(image_ref) => return Ok(image_ref),
            Err(e) => errs.push(e.to_string()),
        }
    }
    Err(apimachinery::error::aggregate(&errs))
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
    /// The node's own registry credentials (its docker config, looked for from `--root-dir`
    /// first, and its credential provider plugins); default: none (tests).
    credentials: NodeCredentials,
}

impl ImageManager {
    pub(crate) fn new(runtime: RemoteRuntime, recorder: Recorder) -> ImageManager {
        ImageManager {
            runtime,
            recorder,
            backoff: Mutex::new(Backoff::new(Duration::from_secs(10), Duration::from_secs(300))),
            puller: Puller::new(&PullOptions::default()),
            credentials: NodeCredentials::default(),
        }
    }

    /// `--serialize-image-pulls`/`--max-parallel-image-pulls`, the node's credentials
    /// directory (`--root-dir`) and its credential provider plugins
    /// (`--image-credential-provider-config`, `--image-credential-provider-bin-dir`).
    pub(crate) fn configure(&mut self, pulls: &PullOptions, root_dir: PathBuf, providers: crate::credentialprovider::plugin::CredentialProviders) {
        self.puller = Puller::new(pulls);
        self.credentials = NodeCredentials { docker_config_dir: Some(root_dir), providers };
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
                let creds = match self.credentials.lookup(image, pull_secrets).await {
                    Ok(c) => c,
                    Err(e) => {
                        self.backoff.lock().unwrap_or_else(|e| e.into_inner()).next(&key, Instant::now());
                        let message = format!("Failed to pull image {image:?}: {e}");
                        self.recorder.pod_event(pod, field, events::WARNING, events::FAILED_TO_PULL_IMAGE, &message);
                        return Err(ImageError { reason: ERR_IMAGE_PULL, message });
                    }
                };
                let turn = self.puller.turn().await;
                // A step of the pod for `kubelab trace`: the registry round trip (the CRI
                // PullImage call inside it), with the image, its registry and its size.
                let uid = pod.metadata.uid.as_deref().unwrap_or_default();
                let span = tracing::info_span!(target: "kubelet::images", "image_pull", pod_uid = %uid, image = %image, registry = %image_registry(image), bytes = tracing::field::Empty, error = tracing::field::Empty);
                let start = Instant::now();
                let pulled = pull_with_credentials(image, &creds, |auth| self.runtime.pull_image(image, auth, Some(sandbox_config.clone()))).instrument(span.clone()).await;
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

    #[tokio::test]
    async fn every_credential_is_tried_in_turn() {
        let cred = |u: &str| AuthConfig { username: u.into(), password: "p".into(), email: String::new() };
        let creds = [cred("wrong"), cred("right"), cred("never")];
        let tried = Mutex::new(vec![]);
        let pull = |auth: Option<api::AuthConfig>| {
            let user = auth.as_ref().map(|a| a.username.clone()).unwrap_or_default();
            tried.lock().expect("lock").push(user.clone());
            async move {
                match user.as_str() {
                    "right" => Ok("sha256:abc".to_string()),
                    _ => Err(crate::Error::NotReady(format!("denied to {user:?}"))),
                }
            }
        };
        assert_eq!(pull_with_credentials("r.io/app", &creds, pull).await, Ok("sha256:abc".into()));
        assert_eq!(*tried.lock().expect("lock"), ["wrong", "right"]);
        // None works: every failure, aggregated.
        assert_eq!(pull_with_credentials("r.io/app", &[cred("a"), cred("b")], pull).await, Err(r#"[denied to "a", denied to "b"]"#.into()));
        // No credentials: one anonymous pull, its error as it is.
        assert_eq!(pull_with_credentials("r.io/app", &[], pull).await, Err(r#"denied to """#.into()));
    }

    #[test]
    fn cri_auth_names_the_images_registry() {
        let cred = AuthConfig { username: "u".into(), password: "p".into(), email: String::new() };
        let hub = cri_auth(&cred, "busybox:1.36");
        assert_eq!((hub.username.as_str(), hub.password.as_str(), hub.server_address.as_str()), ("u", "p", ""));
        let private = cri_auth(&cred, "registry.example.com:5000/team/app:v1");
        assert_eq!(private.server_address, "https://registry.example.com:5000", "a URL containerd parses, naming the image's registry");
    }
}
