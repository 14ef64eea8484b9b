//! `kubelab controller-manager --controllers=*,tokencleaner` end to end on a kubelab store + API
//! server: the bootstrap token cleaner deletes a bootstrap token Secret (type
//! `bootstrap.kubernetes.io/token` in `kube-system`) whose `expiration` has passed, and one that
//! expires a few seconds later once it does (queued for its expiry, with no other event); it
//! keeps a token still valid, one without an expiration, and an Opaque Secret with an
//! `expiration` key.
//!
//! The CSR approver and signer need the `certificates.k8s.io` API, which the API server does not
//! serve yet; their end-to-end test comes with it.

use std::time::{Duration, Instant};

use e2e::apiserver::{ApiCluster, ApiOptions};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, PostParams};
use serde_json::json;

fn secret(name: &str, type_: &str, expiration: Option<Timestamp>) -> Secret {
    let mut string_data = json!({"token-id": &name[name.len() - 6..], "token-secret": "0123456789abcdef", "usage-bootstrap-authentication": "true"});
    if let Some(t) = expiration {
        string_data["expiration"] = json!(t.to_string());
    }
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": "kube-system"},
        "type": type_,
        "stringData": string_data,
    }))
    .expect("a Secret")
}

async fn exists(secrets: &Api<Secret>, name: &str) -> bool {
    secrets.get_opt(name).await.expect("get secret").is_some()
}

async fn wait_gone(c: &ApiCluster, secrets: &Api<Secret>, name: &str, timeout: Duration) -> Duration {
    let start = Instant::now();
    while exists(secrets, name).await {
        assert!(start.elapsed() < timeout, "{name} still there after {timeout:?}\n{}", c.log_tails(40));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    start.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_cleaner_deletes_expired_bootstrap_tokens() {
    let c = ApiCluster::start(ApiOptions {
        controller_manager: true,
        controller_manager_args: vec!["--controllers".into(), "*,tokencleaner".into()],
        ..ApiOptions::default()
    })
    .await
    .expect("start the cluster");
    let client = c.kube_client().expect("client");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces.get_opt("kube-system").await.expect("get kube-system").is_none() {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "kube-system"}})).expect("a Namespace");
        namespaces.create(&PostParams::default(), &ns).await.expect("create kube-system");
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "kube-system");
    let now = Timestamp::now();
    let token = "bootstrap.kubernetes.io/token";
    let in_secs = |s: i64| now.checked_add(SignedDuration::from_secs(s)).expect("a time");
    for s in [
        secret("bootstrap-token-expird", token, Some(in_secs(-3600))),
        secret("bootstrap-token-valid1", token, Some(in_secs(3600))),
        secret("bootstrap-token-forevr", token, None),
        secret("bootstrap-token-soon01", token, Some(in_secs(6))),
        secret("not-a-token-opaque", "Opaque", Some(in_secs(-3600))),
    ] {
        secrets.create(&PostParams::default(), &s).await.expect("create secret");
    }

    // Expired already: deleted as soon as the cleaner sees it.
    wait_gone(&c, &secrets, "bootstrap-token-expird", Duration::from_secs(30)).await;
    assert!(exists(&secrets, "bootstrap-token-soon01").await, "not yet expired");
    // Expires six seconds after the test's start: deleted then, from the queue, without an event.
    wait_gone(&c, &secrets, "bootstrap-token-soon01", Duration::from_secs(30)).await;
    let gone_after = Timestamp::now().duration_since(now);
    assert!(gone_after >= SignedDuration::from_secs(6), "deleted {gone_after:?} after the start, before it expired");
    for kept in ["bootstrap-token-valid1", "bootstrap-token-forevr", "not-a-token-opaque"] {
        assert!(exists(&secrets, kept).await, "{kept} was deleted\n{}", c.log_tails(40));
    }
}
