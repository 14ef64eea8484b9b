//! Mirrors kubelet's pkg/credentialprovider: the registry credentials an image pull is tried
//! with, and in which order.
//!
//! For a pull of an image, as kubelet's image manager does it:
//! 1. The image is reduced to its repository ([`parse_image_name`]: `busybox:1.36` →
//!    `docker.io/library/busybox`), which is what keyring keys are matched against.
//! 2. The pod's pull secrets form one keyring ([`secrets`]; the ServiceAccount's secrets are
//!    among them).
//! 3. The node's own: the docker config found from `--root-dir` ([`config`]'s
//!    `ReadDockerConfigFile`, read at every pull), then the answers of the credential provider
//!    exec plugins whose `matchImages` the image matches ([`plugin`]:
//!    `--image-credential-provider-config`, `--image-credential-provider-bin-dir`).
//! 4. Each keyring is looked up ([`keyring`]: host globs, port, path prefix, longest key
//!    first, Docker Hub's aliases) and the results joined in that order (`UnionDockerKeyring`).
//!    The pull tries every credential in turn until one works; with none it pulls anonymously.

pub(crate) mod config;
pub(crate) mod keyring;
pub(crate) mod plugin;
pub(crate) mod secrets;

use std::path::PathBuf;

pub(crate) use self::keyring::AuthConfig;
pub(crate) use self::secrets::secret_docker_config;

/// Docker's default registry and the prefix of its official images
/// (distribution/reference's `defaultDomain`, `legacyDefaultDomain`, `officialRepoPrefix`).
const DEFAULT_DOMAIN: &str = "docker.io";
const LEGACY_DEFAULT_DOMAIN: &str = "index.docker.io";
const OFFICIAL_REPO_PREFIX: &str = "library/";

/// pkg/util/parsers' `ParseImageName`: the repository to pull (`ParseNormalizedNamed(image).Name()`),
/// without tag or digest, its registry made explicit. None: not an image reference.
pub(crate) fn parse_image_name(image: &str) -> Option<String> {
    // The digest, then the tag (a colon after the last slash).
    let name = image.split('@').next().unwrap_or_default();
    let name = match name.rfind(':') {
        Some(i) if !name[i..].contains('/') => &name[..i],
        _ => name,
    };
    if name.is_empty() || name.contains(char::is_whitespace) {
        return None;
    }
    // splitDockerDomain.
    let (mut domain, mut remainder) = match name.split_once('/') {
        Some((first, rest)) if first.contains(['.', ':']) || first == "localhost" || first.to_lowercase() != first => (first, rest.to_string()),
        _ => (DEFAULT_DOMAIN, name.to_string()),
    };
    if domain == LEGACY_DEFAULT_DOMAIN {
        domain = DEFAULT_DOMAIN;
    }
    if domain == DEFAULT_DOMAIN && !remainder.contains('/') {
        remainder = format!("{OFFICIAL_REPO_PREFIX}{remainder}");
    }
    // A repository name is lower case ("repository name must be lowercase").
    if remainder.is_empty() || remainder.to_lowercase() != remainder {
        return None;
    }
    Some(format!("{domain}/{remainder}"))
}

/// The node's own credentials: its docker config and its credential provider plugins.
#[derive(Clone, Debug, Default)]
pub(crate) struct NodeCredentials {
    /// `--root-dir`, the first place a docker config is looked for; none: no docker config
    /// (tests).
    pub(crate) docker_config_dir: Option<PathBuf>,
    /// The registered plugins (none without `--image-credential-provider-config`).
    pub(crate) providers: plugin::CredentialProviders,
}

impl NodeCredentials {
    /// Steps 1–4: every credential to try for `image`, in order. Fails when a pull secret's
    /// entries do not decode, as kubelet's `MakeDockerKeyring` does.
    pub(crate) async fn lookup(&self, image: &str, pull_secrets: &[serde_json::Value]) -> Result<Vec<AuthConfig>, String> {
        // Step 1.
        let Some(repo) = parse_image_name(image) else { return Ok(vec![]) };
        // Step 2.
        let pod = secrets::make_docker_keyring(pull_secrets).map_err(|e| format!("invalid image pull secret: {e}"))?;
        // Step 3: the docker config (file I/O, off the executor), then the plugins.
        let mut node = keyring::BasicDockerKeyring::default();
        if let Some(dir) = self.docker_config_dir.clone() {
            match tokio::task::spawn_blocking(move || config::read_docker_config_file(&dir)).await {
                Ok(cfg) => node.add(&cfg),
                Err(e) => tracing::warn!(target: "kubelet::credentialprovider", error = %e, "reading the node's docker config"),
            }
        }
        let external = self.providers.keyring(&repo).await;
        // Step 4.
        Ok(keyring::union_lookup(&[&pod, &node, &external], &repo))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_names_as_parsers_parse_them() {
        for (image, want) in [
            ("busybox", Some("docker.io/library/busybox")),
            ("busybox:1.36", Some("docker.io/library/busybox")),
            ("busybox@sha256:abcd", Some("docker.io/library/busybox")),
            ("team/app:v1", Some("docker.io/team/app")),
            ("docker.io/busybox", Some("docker.io/library/busybox")),
            ("index.docker.io/team/app", Some("docker.io/team/app")),
            ("localhost/app", Some("localhost/app")),
            ("localhost:5000/app:v1", Some("localhost:5000/app")),
            ("registry.example.com:5000/team/app:v1", Some("registry.example.com:5000/team/app")),
            ("Registry/app", Some("Registry/app")),
            ("Busybox", None),
            ("", None),
            ("bad name", None),
        ] {
            assert_eq!(parse_image_name(image).as_deref(), want, "{image:?}");
        }
    }

    #[tokio::test]
    async fn secrets_before_the_nodes_own() {
        let root = tempfile::tempdir().expect("tempdir");
        std::fs::write(root.path().join("config.json"), r#"{"auths":{"https://index.docker.io/v1/":{"username":"node","password":"p"},"r.io":{"username":"node-r","password":"p"}}}"#)
            .expect("write");
        let node = NodeCredentials { docker_config_dir: Some(root.path().to_path_buf()), providers: Default::default() };
        let secret = serde_json::json!({"auths": {"r.io/team": {"username": "pod", "password": "p"}, "docker.io": {"username": "pod-hub", "password": "p"}}});
        let users = |c: Vec<AuthConfig>| c.into_iter().map(|a| a.username).collect::<Vec<_>>();
        assert_eq!(users(node.lookup("r.io/team/app:v1", std::slice::from_ref(&secret)).await.expect("lookup")), ["pod", "node-r"]);
        assert_eq!(users(node.lookup("r.io/other", std::slice::from_ref(&secret)).await.expect("lookup")), ["node-r"]);
        // `busybox` is docker.io/library/busybox: the secret's `docker.io` key matches it
        // directly; the node's `index.docker.io` as Docker Hub's default.
        assert_eq!(users(node.lookup("busybox", std::slice::from_ref(&secret)).await.expect("lookup")), ["pod-hub", "node"]);
        assert!(node.lookup("quay.io/x", &[secret]).await.expect("lookup").is_empty());
    }
}
