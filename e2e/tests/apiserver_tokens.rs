//! Bearer tokens on the API server's secure port, with every kubectl 1.27 to 1.33: service
//! account tokens issued by TokenRequest (`kubectl create token`, sent as protobuf by 1.32 and
//! later), authenticating as the account with its groups, authorized by RBAC (a `view` binding
//! lets it list and not create, with Kubernetes' 403), bound to a pod and dying with it, checked
//! by TokenReview; the refusals of a token that cannot be issued (too short, bound to a pod of
//! another account) or is not good (tampered, unknown: 401); and static tokens of
//! `--token-auth-file`.

use std::time::Duration;

use e2e::apiserver::{ApiCluster, ApiOptions, KUBECTL_MINORS};
use serde_json::{Value, json};

const POLICY_TIMEOUT: Duration = Duration::from_secs(60);

async fn start(extra_args: Vec<String>) -> ApiCluster {
    ApiCluster::start(ApiOptions { secure: true, controller_manager: true, extra_args, ..ApiOptions::default() }).await.expect("a secure API server")
}

fn admin_ok(api: &ApiCluster, args: &[&str]) -> String {
    let o = api.kubectl_kubeconfig(33, &api.pki_dir().join("admin.conf"), args);
    assert!(o.success, "{}", o.describe());
    o.stdout
}

#[tokio::test]
async fn service_account_tokens() {
    let api = start(Vec::new()).await;
    admin_ok(&api, &["create", "namespace", "team"]);
    admin_ok(&api, &["create", "serviceaccount", "reader", "-n", "team"]);
    admin_ok(&api, &["create", "rolebinding", "reader-view", "--clusterrole=view", "--serviceaccount=team:reader", "-n", "team"]);
    let admin = api.pki_dir().join("admin.conf");

    // 1. Every kubectl issues a token; the token is the account, in its groups; view lets it read.
    for minor in KUBECTL_MINORS {
        let o = api.kubectl_kubeconfig(minor, &admin, &["create", "token", "reader", "-n", "team"]);
        assert!(o.success, "kubectl 1.{minor}: {}", o.describe());
        let kubeconfig = api.token_kubeconfig(&format!("reader-{minor}"), o.stdout.trim());
        api.wait_for("view to be aggregated and the binding seen", POLICY_TIMEOUT, || {
            let o = api.kubectl_kubeconfig(minor, &kubeconfig, &["get", "pods", "-n", "team"]);
            async move { if o.success { Ok(()) } else { Err(o.describe()) } }
        })
        .await;
        let o = api.kubectl_kubeconfig(minor, &kubeconfig, &["create", "configmap", "x", "-n", "team"]);
        assert!(
            o.stderr.contains(r#"configmaps is forbidden: User "system:serviceaccount:team:reader" cannot create resource "configmaps" in API group "" in the namespace "team""#),
            "kubectl 1.{minor}: {}",
            o.describe()
        );
        let o = api.kubectl_kubeconfig(minor, &kubeconfig, &["auth", "whoami", "-o", "json"]);
        assert!(o.success, "kubectl 1.{minor}: {}", o.describe());
        let review: Value = serde_json::from_str(&o.stdout).expect("JSON");
        let user = &review["status"]["userInfo"];
        assert_eq!(user["username"], "system:serviceaccount:team:reader", "kubectl 1.{minor}");
        assert_eq!(user["groups"], json!(["system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"]), "kubectl 1.{minor}");
        assert!(user["extra"]["authentication.kubernetes.io/credential-id"][0].as_str().is_some_and(|c| c.starts_with("JTI=")), "kubectl 1.{minor}: {user}");
    }

    // 2. What cannot be issued.
    let o = api.kubectl_kubeconfig(33, &admin, &["create", "token", "reader", "-n", "team", "--duration=5m"]);
    assert!(o.stderr.contains("spec.expirationSeconds: Invalid value: 300: may not specify a duration less than 10 minutes"), "{}", o.describe());
    let o = api.kubectl_kubeconfig(33, &admin, &["create", "token", "nobody", "-n", "team"]);
    assert!(o.stderr.contains(r#"serviceaccounts "nobody" not found"#), "{}", o.describe());
    let pod = |name: &str, account: &str| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "team"}, "spec": {"serviceAccountName": account, "containers": [{"name": "c", "image": "busybox"}]}});
    admin_ok(&api, &["create", "serviceaccount", "writer", "-n", "team"]);
    for (name, account) in [("web", "reader"), ("other", "writer")] {
        let p = api.write_file(&format!("{name}.json"), &pod(name, account).to_string());
        admin_ok(&api, &["create", "-f", p.to_str().expect("utf-8")]);
    }
    let o = api.kubectl_kubeconfig(33, &admin, &["create", "token", "reader", "-n", "team", "--bound-object-kind=Pod", "--bound-object-name=other"]);
    assert!(o.stderr.contains(r#"cannot bind token for serviceaccount "reader" to pod running with different serviceaccount name."#), "{}", o.describe());

    // 3. A token bound to a pod names it, and dies with it.
    let o = api.kubectl_kubeconfig(30, &admin, &["create", "token", "reader", "-n", "team", "--bound-object-kind=Pod", "--bound-object-name=web"]);
    assert!(o.success, "{}", o.describe());
    let bound = o.stdout.trim().to_string();
    let kubeconfig = api.token_kubeconfig("bound", &bound);
    let o = api.kubectl_kubeconfig(33, &kubeconfig, &["auth", "whoami", "-o", "jsonpath={.status.userInfo.extra.authentication\\.kubernetes\\.io/pod-name}"]);
    assert_eq!(o.stdout, r#"["web"]"#, "{}", o.describe());

    // 4. TokenReview: whose token is it?
    let review = |token: &str| {
        let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}});
        let p = api.write_file("review.json", &body.to_string());
        let out = admin_ok(&api, &["create", "--validate=false", "-f", p.to_str().expect("utf-8"), "-o", "json"]);
        serde_json::from_str::<Value>(&out).expect("JSON")["status"].clone()
    };
    let status = review(&bound);
    assert_eq!((status["authenticated"].as_bool(), status["user"]["username"].as_str()), (Some(true), Some("system:serviceaccount:team:reader")), "{status}");
    assert_eq!(status["audiences"], json!([e2e::apiserver::SERVICE_ACCOUNT_ISSUER]));
    assert_eq!(review("not-a-token")["error"], "invalid bearer token");

    admin_ok(&api, &["delete", "pod", "web", "-n", "team", "--grace-period=0", "--force"]);
    api.wait_for("the bound token to stop working", POLICY_TIMEOUT, || {
        let o = api.kubectl_kubeconfig(33, &kubeconfig, &["auth", "whoami"]);
        async move { if o.stderr.contains("Unauthorized") { Ok(()) } else { Err(o.describe()) } }
    })
    .await;
    assert_eq!(review(&bound)["error"], "service account token has been invalidated");

    // 5. A tampered token is refused, not anonymous.
    let (header, rest) = bound.split_once('.').expect("a JWT");
    let signature = rest.split_once('.').expect("a JWT").1;
    let forged = format!("{header}.{}.{signature}", base64_url(br#"{"iss":"https://kubernetes.default.svc.cluster.local","sub":"system:serviceaccount:kube-system:admin"}"#));
    let o = api.kubectl_kubeconfig(33, &api.token_kubeconfig("forged", &forged), &["get", "pods", "-n", "team"]);
    assert!(o.stderr.contains("Unauthorized"), "{}", o.describe());
}

/// base64url without padding, as a JWT's parts are written.
fn base64_url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

#[tokio::test]
async fn static_tokens_of_a_token_file() {
    let dir = tempfile::tempdir().expect("a directory");
    let file = dir.path().join("tokens.csv");
    std::fs::write(&file, "st4tic-t0ken,alice,u-alice,\"ops,devs\"\n").expect("the token file");
    let api = start(vec!["--token-auth-file".into(), file.display().to_string()]).await;
    let alice = api.token_kubeconfig("alice", "st4tic-t0ken");
    api.wait_for("the default policy to reach the authorizer", POLICY_TIMEOUT, || {
        let o = api.kubectl_kubeconfig(33, &alice, &["auth", "whoami"]);
        async move { if o.success { Ok(()) } else { Err(o.describe()) } }
    })
    .await;
    for minor in KUBECTL_MINORS {
        let o = api.kubectl_kubeconfig(minor, &alice, &["auth", "whoami"]);
        assert!(o.success && o.stdout.contains("alice") && o.stdout.contains("[ops devs system:authenticated]"), "kubectl 1.{minor}: {}", o.describe());
        let o = api.kubectl_kubeconfig(minor, &alice, &["get", "pods"]);
        assert!(o.stderr.contains(r#"User "alice" cannot list resource "pods""#), "kubectl 1.{minor}: {}", o.describe());
    }
    let o = api.kubectl_kubeconfig(33, &api.token_kubeconfig("wrong", "wr0ng"), &["get", "pods"]);
    assert!(o.stderr.contains("Unauthorized"), "{}", o.describe());
}
