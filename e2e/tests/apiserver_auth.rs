//! The API server's secure port: HTTPS with the PKI `kubelab certs` makes, client certificates
//! authenticating users, RBAC with the default policy authorizing them — driven by every kubectl
//! (1.27–1.33) with kubeconfigs, and by plain HTTPS requests for what kubectl cannot show
//! (anonymous requests, a certificate from another CA).

use e2e::apiserver::{ApiCluster, ApiOptions, KUBECTL_MINORS, kubelab_certs as certs};
use serde_json::Value;

async fn start() -> ApiCluster {
    ApiCluster::start(ApiOptions { secure: true, controller_manager: true, ..ApiOptions::default() }).await.expect("a secure API server")
}

async fn get(client: &reqwest::Client, url: &str) -> (u16, String) {
    let resp = client.get(url).send().await.unwrap_or_else(|e| panic!("GET {url}: {e:?}"));
    let code = resp.status().as_u16();
    (code, resp.text().await.unwrap_or_default())
}

fn status(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("a Status, not {body:?}: {e}"))
}

#[tokio::test]
async fn kubectl_over_https_with_client_certificates_and_rbac() {
    let api = start().await;
    let admin = api.pki_dir().join("admin.conf");

    // 1. Every kubectl reaches the secure port with the admin kubeconfig (O=system:masters).
    for minor in KUBECTL_MINORS {
        let o = api.kubectl_kubeconfig(minor, &admin, &["get", "namespace", "kube-system", "-o", "name"]);
        assert!(o.success && o.stdout.trim() == "namespace/kube-system", "kubectl 1.{minor} as admin: {}", o.describe());
    }

    // 2. The default policy is there: roles, bindings, and view aggregated from its parts.
    let o = api.kubectl_kubeconfig(33, &admin, &["get", "clusterrolebinding", "cluster-admin", "-o", "jsonpath={.subjects[0].name}"]);
    assert_eq!(o.stdout, "system:masters", "{}", o.describe());
    api.wait_for("the view ClusterRole to have its aggregated rules", std::time::Duration::from_secs(60), || {
        let o = api.kubectl_kubeconfig(33, &admin, &["get", "clusterrole", "view", "-o", "jsonpath={.rules[*].resources}"]);
        async move { if o.success && o.stdout.contains("pods") { Ok(()) } else { Err(o.describe()) } }
    })
    .await;

    // 3. jane (group devs) may read pods in "team" only, through a RoleBinding to view.
    assert!(api.kubectl_kubeconfig(33, &admin, &["create", "namespace", "team"]).success);
    let o = api.kubectl_kubeconfig(33, &admin, &["create", "rolebinding", "devs-view", "--clusterrole=view", "--group=devs", "-n", "team"]);
    assert!(o.success, "{}", o.describe());
    let jane = api.user_kubeconfig("jane", &["devs"]);
    for minor in KUBECTL_MINORS {
        let o = api.kubectl_kubeconfig(minor, &jane, &["get", "pods", "-n", "team"]);
        assert!(o.success, "kubectl 1.{minor}: jane lists pods in team: {}", o.describe());
        let o = api.kubectl_kubeconfig(minor, &jane, &["create", "configmap", "x", "-n", "team"]);
        assert!(!o.success, "kubectl 1.{minor}: jane may not create");
        assert!(
            o.stderr.contains(r#"configmaps is forbidden: User "jane" cannot create resource "configmaps" in API group "" in the namespace "team""#),
            "kubectl 1.{minor}: {}",
            o.describe()
        );
        let o = api.kubectl_kubeconfig(minor, &jane, &["get", "pods", "-n", "default"]);
        assert!(
            o.stderr.contains(r#"pods is forbidden: User "jane" cannot list resource "pods" in API group "" in the namespace "default""#),
            "kubectl 1.{minor}: {}",
            o.describe()
        );
    }

    // 4. Without credentials: what system:public-info-viewer allows, and 403 for the rest.
    let anonymous = api.https_client(None);
    let base = api.secure_url();
    for path in ["/version", "/healthz", "/readyz", "/livez"] {
        assert_eq!(get(&anonymous, &format!("{base}{path}")).await.0, 200, "anonymous GET {path}");
    }
    let (code, body) = get(&anonymous, &format!("{base}/api/v1/pods")).await;
    assert_eq!(code, 403, "{body}");
    let s = status(&body);
    assert_eq!(s["message"], r#"pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" at the cluster scope"#);
    assert_eq!((s["reason"].as_str(), s["details"]["kind"].as_str()), (Some("Forbidden"), Some("pods")));
    let (code, body) = get(&anonymous, &format!("{base}/openapi/v2")).await;
    assert_eq!((code, status(&body)["message"].as_str()), (403, Some(r#"forbidden: User "system:anonymous" cannot get path "/openapi/v2""#)));

    // 5. A client certificate of another CA is a 401, not anonymous.
    let other = api.work_dir().join("other-pki");
    certs(&["generate", "--cert-dir", other.to_str().expect("utf-8"), "--server", "https://127.0.0.1:1"]);
    let mut identity = std::fs::read(other.join("apiserver-kubelet-client.crt")).expect("a client certificate");
    identity.extend(std::fs::read(other.join("apiserver-kubelet-client.key")).expect("its key"));
    let (code, body) = get(&api.https_client(Some(identity)), &format!("{base}/api/v1/namespaces")).await;
    assert_eq!((code, status(&body)["reason"].as_str()), (401, Some("Unauthorized")), "{body}");

    // 6. The insecure port is still a superuser's.
    assert_eq!(api.get("/api/v1/namespaces/team").await.expect("GET").0, 200);
}

/// RBAC's escalation checks: jane, an admin of namespace team, may write roles and bindings there
/// but grant only what she holds — unless she may `bind` the role (or `escalate`).
#[tokio::test]
async fn roles_and_bindings_grant_only_what_their_writer_holds() {
    let api = start().await;
    let admin = api.pki_dir().join("admin.conf");
    for args in [&["create", "namespace", "team"][..], &["create", "rolebinding", "jane-admin", "--clusterrole=admin", "--user=jane", "-n", "team"]] {
        let o = api.kubectl_kubeconfig(33, &admin, args);
        assert!(o.success, "{}", o.describe());
    }
    let jane = api.user_kubeconfig("jane", &[]);
    api.wait_for("admin to be aggregated and jane to hold it", std::time::Duration::from_secs(60), || {
        let o = api.kubectl_kubeconfig(33, &jane, &["auth", "can-i", "create", "rolebindings", "-n", "team"]);
        async move { if o.stdout.trim() == "yes" { Ok(()) } else { Err(o.describe()) } }
    })
    .await;
    // kubectl 1.27 sends these as JSON, 1.33 as protobuf.
    for minor in [27, 33] {
        let run = |args: &[&str]| api.kubectl_kubeconfig(minor, &jane, args);
        let o = run(&["create", "role", &format!("pod-reader-{minor}"), "--verb=get,list", "--resource=pods", "-n", "team"]);
        assert!(o.success, "kubectl 1.{minor}: a role within what jane holds: {}", o.describe());
        let o = run(&["create", "role", &format!("node-reader-{minor}"), "--verb=get", "--resource=nodes", "-n", "team"]);
        let want = format!(
            "roles.rbac.authorization.k8s.io \"node-reader-{minor}\" is forbidden: user \"jane\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{{APIGroups:[\"\"], Resources:[\"nodes\"], Verbs:[\"get\"]}}"
        );
        assert!(o.stderr.contains(&want), "kubectl 1.{minor}: {}", o.describe());
        let o = run(&["create", "rolebinding", &format!("view-{minor}"), "--clusterrole=view", "--user=bob", "-n", "team"]);
        assert!(o.success, "kubectl 1.{minor}: jane holds all of view in team: {}", o.describe());
        let o = run(&["create", "rolebinding", &format!("root-{minor}"), "--clusterrole=cluster-admin", "--user=bob", "-n", "team"]);
        assert!(
            o.stderr.contains(&format!(r#"rolebindings.rbac.authorization.k8s.io "root-{minor}" is forbidden: user "jane" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held"#)),
            "kubectl 1.{minor}: {}",
            o.describe()
        );
        let o = run(&["create", "rolebinding", &format!("ghost-{minor}"), "--clusterrole=ghost", "--user=bob", "-n", "team"]);
        assert!(o.stderr.contains(r#"clusterrole.rbac.authorization.k8s.io "ghost" not found"#), "kubectl 1.{minor}: {}", o.describe());
    }
    // With `bind` on cluster-admin in team, she may grant it there (and only there).
    for args in [
        &["create", "clusterrole", "bind-cluster-admin", "--verb=bind", "--resource=clusterroles", "--resource-name=cluster-admin"][..],
        &["create", "rolebinding", "jane-binds", "--clusterrole=bind-cluster-admin", "--user=jane", "-n", "team"],
    ] {
        let o = api.kubectl_kubeconfig(33, &admin, args);
        assert!(o.success, "{}", o.describe());
    }
    api.wait_for("jane to hold bind", std::time::Duration::from_secs(30), || {
        let o = api.kubectl_kubeconfig(33, &jane, &["create", "rolebinding", "root", "--clusterrole=cluster-admin", "--user=bob", "-n", "team"]);
        async move { if o.success { Ok(()) } else { Err(o.describe()) } }
    })
    .await;
    let o = api.kubectl_kubeconfig(33, &jane, &["create", "clusterrolebinding", "root", "--clusterrole=cluster-admin", "--user=bob"]);
    assert!(!o.success, "no cluster-wide grant: {}", o.describe());
}

/// The audit log (`--audit-policy-file`, `--audit-log-path`): who did what and what came of it,
/// as audit.k8s.io/v1 Events, at the level the first matching rule gives.
#[tokio::test]
async fn an_audit_log_records_who_did_what() {
    let dir = tempfile::tempdir().expect("a directory");
    let (policy, log) = (dir.path().join("audit-policy.yaml"), dir.path().join("audit.log"));
    let rules = "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: None\n  nonResourceURLs: [\"/healthz*\", \"/readyz*\", \"/livez*\"]\n- level: None\n  users: [\"system:unsecured\"]\n- level: Request\n  resources:\n  - group: \"\"\n    resources: [\"configmaps\"]\n- level: Metadata\n";
    std::fs::write(&policy, rules).expect("the policy");
    let args = vec!["--audit-policy-file".into(), policy.display().to_string(), "--audit-log-path".into(), log.display().to_string()];
    let api = ApiCluster::start(ApiOptions { secure: true, extra_args: args, ..ApiOptions::default() }).await.expect("a secure API server");
    let admin = api.pki_dir().join("admin.conf");
    let jane = api.user_kubeconfig("jane", &[]);
    let o = api.kubectl_kubeconfig(33, &admin, &["create", "configmap", "settings", "--from-literal=a=b"]);
    assert!(o.success, "{}", o.describe());
    let o = api.kubectl_kubeconfig(27, &jane, &["delete", "configmap", "settings"]);
    assert!(!o.success, "{}", o.describe());
    let anonymous = api.https_client(None);
    assert_eq!(get(&anonymous, &format!("{}/healthz", api.secure_url())).await.0, 200);

    let events: Vec<Value> = std::fs::read_to_string(&log).expect("the audit log").lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    assert!(events.iter().all(|e| e["kind"] == "Event" && e["apiVersion"] == "audit.k8s.io/v1" && e["stage"] == "ResponseComplete"), "RequestReceived is omitted");
    assert!(!events.iter().any(|e| e["requestURI"].as_str().is_some_and(|u| u.starts_with("/healthz"))), "level None");
    assert!(!events.iter().any(|e| e["user"]["username"] == "system:unsecured"), "the harness's own requests are not audited");
    let find = |verb: &str, user: &str| {
        events
            .iter()
            .find(|e| e["verb"] == verb && e["objectRef"]["resource"] == "configmaps" && e["user"]["username"] == user)
            .unwrap_or_else(|| panic!("no {verb} of configmaps by {user} in {events:#?}"))
    };
    let created = find("create", "kubernetes-admin");
    assert_eq!(created["level"], "Request");
    assert_eq!((created["objectRef"]["namespace"].as_str(), created["responseStatus"]["code"].as_i64()), (Some("default"), Some(201)));
    assert_eq!(created["requestObject"]["data"], serde_json::json!({"a": "b"}), "the body, at level Request");
    assert_eq!(created["annotations"]["authorization.k8s.io/decision"], "allow");
    assert_eq!(created["annotations"]["authorization.k8s.io/reason"], "allowed as a member of system:masters");
    let refused = find("delete", "jane");
    assert_eq!((refused["objectRef"]["name"].as_str(), refused["responseStatus"]["code"].as_i64()), (Some("settings"), Some(403)));
    assert_eq!(refused["responseStatus"]["reason"], "Forbidden");
    assert_eq!(refused["annotations"]["authorization.k8s.io/decision"], "forbid");
    assert!(refused["userAgent"].as_str().is_some_and(|a| a.starts_with("kubectl")), "{refused}");
    assert_eq!(refused["sourceIPs"], serde_json::json!(["127.0.0.1"]));
}
