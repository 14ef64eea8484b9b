//! Mirrors kubelet's pkg/credentialprovider/plugin (plugin.go, plugins.go): the kubelet
//! credential provider exec plugins of `--image-credential-provider-config` and
//! `--image-credential-provider-bin-dir`.
//!
//! For an image matching one of a provider's `matchImages` (as keyring keys match,
//! [`super::keyring::urls_match_str`]):
//! 1. Its answer is taken from the provider's cache if one is kept for the image, its registry
//!    or everything (the three `cacheKeyType`s, looked for in that order).
//! 2. Else `<bin-dir>/<name> args…` runs with the agent's environment plus `env`, gets a
//!    CredentialProviderRequest (`{"kind":"CredentialProviderRequest","apiVersion":…,
//!    "image":…}`) on stdin, and must print a CredentialProviderResponse of the same apiVersion
//!    within [`EXEC_PLUGIN_TIMEOUT`]. Concurrent requests for one image run it once.
//! 3. The answer's `auth` (keyring keys to username/password) is kept for `cacheDuration`
//!    (none given: the provider's `defaultCacheDuration`; zero: not kept) under the key its
//!    `cacheKeyType` says.
//!
//! All providers' answers form one keyring, looked up as the node's other credentials are. A
//! provider that fails or times out is logged and gives nothing: the pull goes on with the
//! other credentials, as kubelet's does.

pub(crate) mod config;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use apimachinery::validation::FieldError;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt as _;

use self::config::{CredentialProvider, GoDuration};
use super::config::{DockerConfig, DockerConfigEntry};
use super::keyring::{BasicDockerKeyring, urls_match_str};

/// kubelet's catch-all timeout for a plugin run: room for a plugin to retry a failed request,
/// but no plugin runs forever.
pub(crate) const EXEC_PLUGIN_TIMEOUT: Duration = Duration::from_secs(60);

/// The cache key of a `Global` answer.
const GLOBAL_CACHE_KEY: &str = "global";

/// The request/response group (`credentialproviderapi.GroupName`).
const CREDENTIAL_PROVIDER_GROUP: &str = "credentialprovider.kubelet.k8s.io";

/// Why the plugins cannot be registered: the node agent refuses to start, with kubelet's words.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RegisterError {
    #[error("plugin binary directory {} did not exist", .0.display())]
    BinDirMissing(PathBuf),
    #[error("error inspecting binary directory {}: {source}", path.display())]
    BinDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("credential provider config path is empty")]
    ConfigPathEmpty,
    #[error("unable to read external registry credential provider configuration from {:?}: {source}", path.display().to_string())]
    ReadConfig {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("error decoding config {:?}: {message}", path.display().to_string())]
    Decode { path: PathBuf, message: String },
    #[error("failed to validate credential provider config: {}", apimachinery::error::aggregate(&.0.iter().map(ToString::to_string).collect::<Vec<_>>()))]
    Invalid(Vec<FieldError>),
    #[error("plugin binary executable {} did not exist", .0.display())]
    BinMissing(PathBuf),
    #[error("error inspecting binary executable {}: {why}", path.display())]
    Bin { path: PathBuf, why: String },
}

/// Why a plugin gave no answer for an image (logged; the pull goes on without it).
#[derive(Debug, thiserror::Error)]
pub(crate) enum PluginError {
    #[error("error execing credential provider plugin {name} for image {image}: {source}")]
    Spawn {
        name: String,
        image: String,
        #[source]
        source: std::io::Error,
    },
    #[error("error execing credential provider plugin {name} for image {image}: context deadline exceeded")]
    Timeout { name: String, image: String },
    #[error("error execing credential provider plugin {name} for image {image}: {status}: {stderr}")]
    Failed { name: String, image: String, status: String, stderr: String },
    #[error("error reading GVK from response: {0}")]
    Gvk(String),
    #[error("apiVersion from credential plugin response did not match expected apiVersion:{expected}, actual apiVersion:{actual}")]
    ApiVersion { expected: String, actual: String },
    #[error("failed to decode CredentialProviderResponse, unexpected Kind: {0:?}")]
    Kind(String),
    #[error("failed to decode CredentialProviderResponse, unexpected Group: {0}")]
    Group(String),
    /// The decoder's own error is not kept: it may quote the credentials.
    #[error("error decoding credential provider plugin response from stdout")]
    Decode,
    #[error("credential provider plugin did not return a valid cacheKeyType: {0:?}")]
    CacheKeyType(String),
}

/// `CredentialProviderRequest`, in the order Go's encoder writes it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CredentialProviderRequest<'a> {
    kind: &'static str,
    api_version: &'a str,
    image: &'a str,
}

/// `CredentialProviderResponse`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct CredentialProviderResponse {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    pub(crate) cache_key_type: String,
    #[serde(default, deserialize_with = "deserialize_duration")]
    pub(crate) cache_duration: Option<GoDuration>,
    #[serde(default)]
    pub(crate) auth: Option<HashMap<String, ResponseAuthConfig>>,
}

fn deserialize_duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<GoDuration>, D::Error> {
    let s = Option::<String>::deserialize(d)?;
    s.map(|s| config::parse_go_duration(&s).map_err(serde::de::Error::custom)).transpose()
}

/// A response's `AuthConfig`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResponseAuthConfig {
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
}

/// `execPlugin`: how to run one provider.
#[derive(Debug)]
pub(crate) struct ExecPlugin {
    name: String,
    api_version: String,
    plugin_bin_dir: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    /// [`EXEC_PLUGIN_TIMEOUT`]; tests shrink it.
    timeout: Duration,
}

impl ExecPlugin {
    /// `ExecPlugin`: `ENV=… <bin-dir>/<name> args… <<<request`, its response checked.
    async fn exec_plugin(&self, image: &str) -> Result<CredentialProviderResponse, PluginError> {
        tracing::debug!(target: "kubelet::credentialprovider", plugin = %self.name, image, "getting image credentials from external exec plugin");
        let request = CredentialProviderRequest { kind: "CredentialProviderRequest", api_version: &self.api_version, image };
        // Serialising three strings cannot fail.
        let mut data = serde_json::to_vec(&request).unwrap_or_default();
        data.push(b'\n');
        let mut cmd = tokio::process::Command::new(self.plugin_bin_dir.join(&self.name));
        // The agent's own environment is kept (kubelet#102750), the config's `env` over it.
        cmd.args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let (name, img) = (self.name.clone(), image.to_string());
        let run = async {
            let mut child = cmd.spawn()?;
            if let Some(mut stdin) = child.stdin.take() {
                // A plugin may exit without reading its request.
                match stdin.write_all(&data).await {
                    Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => return Err(e),
                    _ => {}
                }
            }
            child.wait_with_output().await
        };
        // On timeout the future is dropped, and with it the child, which kill_on_drop kills.
        let output = match tokio::time::timeout(self.timeout, run).await {
            Err(_) => return Err(PluginError::Timeout { name, image: img }),
            Ok(Err(source)) => return Err(PluginError::Spawn { name, image: img, source }),
            Ok(Ok(o)) => o,
        };
        if !output.status.success() {
            use std::os::unix::process::ExitStatusExt as _;
            // As Go's exec.ExitError prints it.
            let status = match (output.status.code(), output.status.signal()) {
                (Some(code), _) => format!("exit status {code}"),
                (None, Some(sig)) => format!("signal {sig}"),
                (None, None) => output.status.to_string(),
            };
            return Err(PluginError::Failed { name, image: img, status, stderr: String::from_utf8_lossy(&output.stderr).trim_end().to_string() });
        }
        decode_response(&output.stdout, &self.api_version)
    }
}

/// The response's apiVersion must be the one asked for (read before decoding); then
/// `decodeResponse`: decoded strictly, of kind CredentialProviderResponse in its group.
fn decode_response(stdout: &[u8], api_version: &str) -> Result<CredentialProviderResponse, PluginError> {
    let v: serde_json::Value = serde_json::from_slice(stdout).map_err(|e| PluginError::Gvk(e.to_string()))?;
    let actual = v.get("apiVersion").and_then(|a| a.as_str()).unwrap_or_default();
    if actual != api_version {
        return Err(PluginError::ApiVersion { expected: api_version.into(), actual: actual.into() });
    }
    let r: CredentialProviderResponse = serde_json::from_value(v).map_err(|_| PluginError::Decode)?;
    if r.kind != "CredentialProviderResponse" {
        return Err(PluginError::Kind(r.kind));
    }
    let group = r.api_version.split_once('/').map_or("", |(g, _)| g);
    if group != CREDENTIAL_PROVIDER_GROUP {
        return Err(PluginError::Group(group.into()));
    }
    Ok(r)
}

/// `cacheEntry`.
#[derive(Debug)]
struct CacheEntry {
    credentials: DockerConfig,
    expires_at: Instant,
}

/// `pluginProvider`: one provider, its cache and its runs.
#[derive(Debug)]
pub(crate) struct PluginProvider {
    match_images: Vec<String>,
    default_cache_duration: Duration,
    plugin: ExecPlugin,
    /// Answers by cache key. A std Mutex: only looked at and changed, never held across an await.
    cache: Mutex<HashMap<String, CacheEntry>>,
    /// kubelet's singleflight: one run per image at a time; the others wait, then find the
    /// answer in the cache.
    inflight: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// `parseRegistry`: an image's registry host (with its port).
fn parse_registry(image: &str) -> &str {
    image.split('/').next().unwrap_or(image)
}

impl PluginProvider {
    fn new(plugin_bin_dir: &Path, p: &CredentialProvider, timeout: Duration) -> PluginProvider {
        PluginProvider {
            match_images: p.match_images.clone(),
            default_cache_duration: p.default_cache_duration.map_or(Duration::ZERO, |d| d.duration),
            plugin: ExecPlugin {
                name: p.name.clone(),
                api_version: p.api_version.clone(),
                plugin_bin_dir: plugin_bin_dir.to_path_buf(),
                args: p.args.clone(),
                env: p.env.iter().map(|e| (e.name.clone(), e.value.clone())).collect(),
                timeout,
            },
            cache: Mutex::default(),
            inflight: Mutex::default(),
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.plugin.name
    }

    /// `isImageAllowed`.
    fn is_image_allowed(&self, image: &str) -> bool {
        self.match_images.iter().any(|m| urls_match_str(m, image).unwrap_or(false))
    }

    /// `getCachedCredentials`: by image, then registry, then the global key. Expired answers go
    /// first (kubelet purges every 15 minutes; the map is small enough to do it every time).
    fn cached_credentials(&self, image: &str, now: Instant) -> Option<DockerConfig> {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache.retain(|_, e| now <= e.expires_at);
        [image, parse_registry(image), GLOBAL_CACHE_KEY].iter().find_map(|k| cache.get(*k)).map(|e| e.credentials.clone())
    }

    /// `provide` (steps in the module's doc): the provider's credentials for `image` (a
    /// repository, as [`super::parse_image_name`] gives it), `now` being the time.
    pub(crate) async fn provide(&self, image: &str, now: Instant) -> Result<DockerConfig, PluginError> {
        if !self.is_image_allowed(image) {
            return Ok(DockerConfig::new());
        }
        // Step 1: the cache.
        if let Some(c) = self.cached_credentials(image, now) {
            return Ok(c);
        }
        let gate = self.inflight.lock().unwrap_or_else(|e| e.into_inner()).entry(image.to_string()).or_default().clone();
        let turn = gate.lock().await;
        let answer = match self.cached_credentials(image, now) {
            Some(c) => Ok(c),
            // Step 2: run the plugin.
            None => self.plugin.exec_plugin(image).await.and_then(|r| self.keep(image, r, now)),
        };
        drop(turn);
        self.inflight.lock().unwrap_or_else(|e| e.into_inner()).retain(|_, g| Arc::strong_count(g) > 1);
        answer
    }

    /// Step 3: the answer as a docker config, kept as long as it says.
    fn keep(&self, image: &str, response: CredentialProviderResponse, now: Instant) -> Result<DockerConfig, PluginError> {
        let cache_key = match response.cache_key_type.as_str() {
            "Image" => image,
            "Registry" => parse_registry(image),
            "Global" => GLOBAL_CACHE_KEY,
            other => return Err(PluginError::CacheKeyType(other.to_string())),
        };
        let credentials: DockerConfig = response
            .auth
            .unwrap_or_default()
            .into_iter()
            .map(|(k, a)| (k, DockerConfigEntry { username: a.username, password: a.password, email: String::new() }))
            .collect();
        let duration = match response.cache_duration {
            // An explicit zero (or less): not kept at all.
            Some(d) if d.negative || d.duration.is_zero() => return Ok(credentials),
            Some(d) => d.duration,
            None if self.default_cache_duration.is_zero() => return Ok(credentials),
            None => self.default_cache_duration,
        };
        let entry = CacheEntry { credentials: credentials.clone(), expires_at: now + duration };
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).insert(cache_key.to_string(), entry);
        Ok(credentials)
    }
}

/// plugins.go's registered providers, and `externalCredentialProviderKeyring`: all their
/// answers for an image as one keyring. Empty without `--image-credential-provider-config`.
#[derive(Clone, Debug, Default)]
pub(crate) struct CredentialProviders {
    providers: Vec<Arc<PluginProvider>>,
}

impl CredentialProviders {
    /// `RegisterCredentialProviderPlugins`: the bin dir must exist, the config decode and
    /// validate, each provider's executable exist. Blocking file I/O: called at start.
    pub(crate) fn register(config_path: &Path, plugin_bin_dir: &Path) -> Result<CredentialProviders, RegisterError> {
        Self::register_with_timeout(config_path, plugin_bin_dir, EXEC_PLUGIN_TIMEOUT)
    }

    pub(crate) fn register_with_timeout(config_path: &Path, plugin_bin_dir: &Path, timeout: Duration) -> Result<CredentialProviders, RegisterError> {
        if let Err(e) = std::fs::metadata(plugin_bin_dir) {
            return Err(match e.kind() {
                std::io::ErrorKind::NotFound => RegisterError::BinDirMissing(plugin_bin_dir.to_path_buf()),
                _ => RegisterError::BinDir { path: plugin_bin_dir.to_path_buf(), source: e },
            });
        }
        if config_path.as_os_str().is_empty() {
            return Err(RegisterError::ConfigPathEmpty);
        }
        let data = std::fs::read_to_string(config_path).map_err(|source| RegisterError::ReadConfig { path: config_path.to_path_buf(), source })?;
        let cfg = config::decode(&data).map_err(|message| RegisterError::Decode { path: config_path.to_path_buf(), message })?;
        let errs = config::validate_credential_provider_config(&cfg);
        if !errs.is_empty() {
            return Err(RegisterError::Invalid(errs));
        }
        let mut providers = vec![];
        for p in &cfg.providers {
            // exec.LookPath of a path: it must be a file someone may execute.
            let bin = plugin_bin_dir.join(&p.name);
            match std::fs::metadata(&bin) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(RegisterError::BinMissing(bin)),
                Err(e) => return Err(RegisterError::Bin { path: bin, why: e.to_string() }),
                Ok(m) if m.is_dir() => return Err(RegisterError::Bin { path: bin, why: "is a directory".into() }),
                Ok(m) => {
                    use std::os::unix::fs::PermissionsExt as _;
                    if m.permissions().mode() & 0o111 == 0 {
                        return Err(RegisterError::Bin { path: bin, why: "permission denied".into() });
                    }
                }
            }
            tracing::info!(target: "kubelet::credentialprovider", plugin = %p.name, "registered credential provider");
            providers.push(Arc::new(PluginProvider::new(plugin_bin_dir, p, timeout)));
        }
        Ok(CredentialProviders { providers })
    }

    /// `externalCredentialProviderKeyring.Lookup`: every provider asked (in the config's
    /// order), their answers added to one keyring, the keyring looked up. A provider that fails
    /// is logged, as kubelet logs it, and adds nothing.
    pub(crate) async fn keyring(&self, image: &str) -> BasicDockerKeyring {
        let mut keyring = BasicDockerKeyring::default();
        for p in &self.providers {
            match p.provide(image, Instant::now()).await {
                Ok(cfg) => keyring.add(&cfg),
                Err(e) => {
                    tracing::warn!(target: "kubelet::credentialprovider", plugin = %p.name(), image, error = %e, "Failed getting credential from external registry credential provider")
                }
            }
        }
        keyring
    }

    /// The providers, for tests that ask one directly.
    #[cfg(test)]
    pub(crate) fn providers(&self) -> &[Arc<PluginProvider>] {
        &self.providers
    }
}

/// What a lookup gives, for tests: the usernames in order.
#[cfg(test)]
pub(crate) fn usernames(creds: &[super::AuthConfig]) -> Vec<String> {
    creds.iter().map(|c| c.username.clone()).collect()
}

#[cfg(test)]
mod tests;
