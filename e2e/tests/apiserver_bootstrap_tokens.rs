//! Bootstrap tokens (`--enable-bootstrap-token-auth`) on the API server's secure port, with
//! every kubectl 1.27 to 1.33: a `bootstrap.kubernetes.io/token` Secret in kube-system, as
//! `kubeadm token create` writes it, makes its token the user `system:bootstrap:<token-id>` in
//! `system:bootstrappers` and the token's extra groups; the wrong secret, an expired token and
//! one not marked for authentication are 401 Unauthorized.

use std::time::Duration;

use e2e::apiserver::{ApiCluster, ApiOptions, KUBECTL_MINORS};
use serde_json::{Value, json};

const POLICY_TIMEOUT: Duration = Duration::from_secs(60);

/// `kubectl create secret` for the token `<id>.<secret>`, with the data keys `extra` adds.
fn create_token_secret(api: &ApiCluster, id: &str, secret: &str, extra: &[(&str, &str)]) {
    let name = format!("bootstrap-token-{id}");
    let mut args = vec!["create".to_string(), "secret".into(), "generic".into(), name, "-n".into(), "kube-system".into()];
    args.push("--type=bootstrap.kubernetes.io/token".into());
    for (k, v) in [("token-id", id), ("token-secret", secret)].iter().chain(extra) {
        args.push(format!("--from-literal={k}={v}"));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = api.kubectl_kubeconfig(33, &api.pki_dir().join("admin.conf"), &args);
    assert!(o.success, "{}", o.describe());
}

#[tokio::test]
async fn bootstrap_tokens_authenticate_as_system_bootstrap() {
    let options = ApiOptions { secure: true, extra_args: vec!["--enable-bootstrap-token-auth".into()], ..ApiOptions::default() };
    let api = ApiCluster::start(options).await.expect("a secure API server");
    let auth = [("usage-bootstrap-authentication", "true"), ("usage-bootstrap-signing", "true")];
    let groups = ("auth-extra-groups", "system:bootstrappers:kubeadm:default-node-token");
    let future = ("expiration", "2099-01-01T00:00:00Z");
    create_token_secret(&api, "abcdef", "0123456789abcdef", &[auth[0], auth[1], groups, future]);
    create_token_secret(&api, "xpired", "0123456789abcdef", &[auth[0], groups, ("expiration", "2020-01-01T00:00:00Z")]);
    create_token_secret(&api, "nouse1", "0123456789abcdef", &[auth[1], groups]);

    // 1. The token is its user, in its groups, with every kubectl (whoami's review is allowed to
    //    every authenticated user by the default policy).
    let good = api.token_kubeconfig("bootstrap", "abcdef.0123456789abcdef");
    api.wait_for("the token's Secret and the default policy", POLICY_TIMEOUT, || {
        let o = api.kubectl_kubeconfig(33, &good, &["auth", "whoami"]);
        async move { if o.success { Ok(()) } else { Err(o.describe()) } }
    })
    .await;
    for minor in KUBECTL_MINORS {
        let o = api.kubectl_kubeconfig(minor, &good, &["auth", "whoami", "-o", "json"]);
        assert!(o.success, "kubectl 1.{minor}: {}", o.describe());
        let review: Value = serde_json::from_str(&o.stdout).expect("JSON");
        let user = &review["status"]["userInfo"];
        assert_eq!(user["username"], "system:bootstrap:abcdef", "kubectl 1.{minor}: {user}");
        assert_eq!(
            user["groups"],
            json!(["system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token", "system:authenticated"]),
            "kubectl 1.{minor}"
        );
        // Authenticated, and no more: RBAC gives system:bootstrappers nothing by default.
        let o = api.kubectl_kubeconfig(minor, &good, &["get", "pods"]);
        assert!(o.stderr.contains(r#"User "system:bootstrap:abcdef" cannot list resource "pods""#), "kubectl 1.{minor}: {}", o.describe());
    }

    // 2. Tokens that are not good are refused, not anonymous.
    for (what, token) in [
        ("the wrong secret", "abcdef.0123456789abcdee"),
        ("an expired token", "xpired.0123456789abcdef"),
        ("a token not marked usage-bootstrap-authentication", "nouse1.0123456789abcdef"),
        ("a token without its Secret", "zzzzzz.0123456789abcdef"),
    ] {
        let kubeconfig = api.token_kubeconfig(&token[..6], token);
        for minor in [27, 33] {
            let o = api.kubectl_kubeconfig(minor, &kubeconfig, &["auth", "whoami"]);
            assert!(!o.success && o.stderr.contains("Unauthorized"), "{what}, kubectl 1.{minor}: {}", o.describe());
        }
    }

    // 3. Deleting the Secret revokes the token.
    let o = api.kubectl_kubeconfig(33, &api.pki_dir().join("admin.conf"), &["delete", "secret", "bootstrap-token-abcdef", "-n", "kube-system"]);
    assert!(o.success, "{}", o.describe());
    api.wait_for("the deleted token to stop working", POLICY_TIMEOUT, || {
        let o = api.kubectl_kubeconfig(33, &good, &["auth", "whoami"]);
        async move { if o.stderr.contains("Unauthorized") { Ok(()) } else { Err(o.describe()) } }
    })
    .await;
}

#[tokio::test]
async fn bootstrap_tokens_are_off_by_default() {
    let api = ApiCluster::start(ApiOptions { secure: true, ..ApiOptions::default() }).await.expect("a secure API server");
    create_token_secret(&api, "abcdef", "0123456789abcdef", &[("usage-bootstrap-authentication", "true")]);
    let o = api.kubectl_kubeconfig(33, &api.token_kubeconfig("bootstrap", "abcdef.0123456789abcdef"), &["auth", "whoami"]);
    assert!(!o.success && o.stderr.contains("Unauthorized"), "{}", o.describe());
}
