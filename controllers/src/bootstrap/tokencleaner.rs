//! Mirrors pkg/controller/bootstrap/tokencleaner.go: `tokencleaner`, which deletes bootstrap
//! tokens once they expire. A bootstrap token (what `kubeadm token create` makes, and what a
//! joining kubelet authenticates with until it has its own certificate) is a Secret of type
//! `bootstrap.kubernetes.io/token` in `kube-system`; its `expiration` data, RFC 3339, says until
//! when it is good (the API server's authenticator refuses it after that, whether or not the
//! Secret is gone).
//!
//! A token Secret added or updated queues its key; one sync ([`TokenCleaner::sync`]):
//! 1. Read the Secret from the cache; gone, or not a bootstrap token: nothing to do.
//! 2. Expired ([`get_expiration`]; an `expiration` that cannot be read counts as expired):
//!    delete it, with a precondition on its UID (NotFound and Conflict are not errors).
//! 3. Not yet: queue it again for when it expires. No `expiration`: it never does.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Preconditions};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};

use crate::error::{Error, Result};
use crate::workqueue::WorkQueue;

/// The controller's name (kube-controller-manager's `tokencleaner`).
pub const NAME: &str = "tokencleaner";
const TARGET: &str = "controllers::tokencleaner";
/// Where bootstrap tokens live (`TokenCleanerOptions.TokenSecretNamespace`'s default).
pub const TOKEN_SECRET_NAMESPACE: &str = "kube-system";
/// A bootstrap token's Secret type (`bootstrapapi.SecretTypeBootstrapToken`).
pub const SECRET_TYPE_BOOTSTRAP_TOKEN: &str = "bootstrap.kubernetes.io/token";
/// The data key of its expiry (`bootstrapapi.BootstrapTokenExpirationKey`).
pub const BOOTSTRAP_TOKEN_EXPIRATION_KEY: &str = "expiration";

/// cluster-bootstrap's `GetExpiration`: the time left before the token expires, or `None` once
/// it has (or when its `expiration` is no RFC 3339 time); `Some(None)` when it has none.
pub fn get_expiration(secret: &Secret, now: Timestamp) -> Option<Option<Duration>> {
    let Some(raw) = secret.data.as_ref().and_then(|d| d.get(BOOTSTRAP_TOKEN_EXPIRATION_KEY)).filter(|v| !v.0.is_empty()) else {
        return Some(None);
    };
    let expiration = std::str::from_utf8(&raw.0).ok()?.parse::<Timestamp>().ok()?;
    let left = expiration.duration_since(now);
    if left.is_negative() || left.is_zero() {
        return None;
    }
    Some(Some(Duration::from_secs_f64(left.as_secs_f64())))
}

fn is_bootstrap_token(secret: &Secret) -> bool {
    secret.type_.as_deref() == Some(SECRET_TYPE_BOOTSTRAP_TOKEN) && secret.metadata.namespace.as_deref() == Some(TOKEN_SECRET_NAMESPACE)
}

pub struct TokenCleaner {
    informers: kube::Client,
    client: kube::Client,
}

impl TokenCleaner {
    pub fn new(informers: kube::Client, client: kube::Client) -> Self {
        Self { informers, client }
    }

    /// Watches the Secrets of `kube-system` (Kubernetes' informer holds them all and filters by
    /// type, as this does); one worker syncs the keys queued.
    pub async fn run(self) -> Result<()> {
        let (secrets, secrets_w) = reflector::store::<Secret>();
        let queue: WorkQueue<String> = WorkQueue::new();
        let informer = async {
            let api = Api::<Secret>::namespaced(self.informers.clone(), TOKEN_SECRET_NAMESPACE);
            let mut stream = std::pin::pin!(reflector::reflector(secrets_w, watcher(api, watcher::Config::default())).default_backoff());
            while let Some(ev) = stream.next().await {
                match ev {
                    Ok(watcher::Event::Apply(s) | watcher::Event::InitApply(s)) if is_bootstrap_token(&s) => {
                        queue.add(s.metadata.name.unwrap_or_default());
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(target: TARGET, error = %e, "watch failed; retrying"),
                }
            }
        };
        let work = async {
            if secrets.wait_until_ready().await.is_err() {
                return;
            }
            while let Some(name) = queue.get().await {
                match self.sync(&secrets, &name, &queue).await {
                    Ok(()) => queue.forget(&name),
                    Err(e) => {
                        tracing::warn!(target: TARGET, secret = %name, error = %e, "sync failed; will retry");
                        queue.add_rate_limited(name.clone());
                    }
                }
                queue.done(&name);
            }
        };
        tokio::select! {
            () = informer => {}
            () = work => {}
        }
        Ok(())
    }

    /// Steps 1–3 for the Secret `kube-system/<name>`.
    async fn sync(&self, secrets: &Store<Secret>, name: &str, queue: &WorkQueue<String>) -> Result<()> {
        // Step 1.
        let Some(secret) = secrets.get(&ObjectRef::new(name).within(TOKEN_SECRET_NAMESPACE)) else { return Ok(()) };
        if !is_bootstrap_token(&secret) {
            return Ok(());
        }
        match get_expiration(&secret, Timestamp::now()) {
            // Step 2.
            None => {
                tracing::info!(target: TARGET, secret = %format!("{TOKEN_SECRET_NAMESPACE}/{name}"), "deleting expired secret");
                let params = DeleteParams {
                    preconditions: secret.metadata.uid.clone().map(|uid| Preconditions { uid: Some(uid), resource_version: None }),
                    ..DeleteParams::default()
                };
                match Api::<Secret>::namespaced(self.client.clone(), TOKEN_SECRET_NAMESPACE).delete(name, &params).await {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(s)) if s.is_not_found() || s.code == 409 => Ok(()),
                    Err(e) => Err(Error::Kube(e)),
                }
            }
            // Step 3.
            Some(Some(left)) => {
                queue.add_after(name.to_string(), left);
                Ok(())
            }
            Some(None) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn token(expiration: Option<&str>) -> Secret {
        let mut secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": "bootstrap-token-abcdef", "namespace": "kube-system"},
            "type": "bootstrap.kubernetes.io/token", "data": {"token-id": "YWJjZGVm"},
        }))
        .expect("a Secret");
        if let (Some(data), Some(e)) = (secret.data.as_mut(), expiration) {
            data.insert("expiration".into(), k8s_openapi::ByteString(e.as_bytes().to_vec()));
        }
        secret
    }

    #[test]
    fn expiry() {
        let now: Timestamp = "2027-01-15T08:00:00Z".parse().expect("t");
        assert_eq!(get_expiration(&token(None), now), Some(None), "no expiration: never");
        assert_eq!(get_expiration(&token(Some("2027-01-15T09:00:00Z")), now), Some(Some(Duration::from_secs(3600))));
        assert_eq!(get_expiration(&token(Some("2027-01-15T10:00:00+02:00")), now), None, "an offset is honoured: 08:00Z, now");
        assert_eq!(get_expiration(&token(Some("2027-01-15T07:59:59Z")), now), None);
        assert_eq!(get_expiration(&token(Some("tomorrow")), now), None, "unreadable: expired");
        assert_eq!(get_expiration(&token(Some("2027-01-15 09:00")), now), None, "not RFC 3339");
        assert!(is_bootstrap_token(&token(None)));
        let mut opaque = token(None);
        opaque.type_ = Some("Opaque".into());
        assert!(!is_bootstrap_token(&opaque));
    }
}
