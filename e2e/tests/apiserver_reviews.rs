//! The review APIs, which are asked and answered but never stored: `kubectl auth can-i` (and
//! `--list`) and `kubectl auth whoami` with every kubectl 1.27 to 1.33 over HTTPS with client
//! certificates (1.32 and later send the reviews as protobuf; 1.27 knows SelfSubjectReview only
//! as `v1beta1`), with and without impersonation (`--as`, `--as-group`), and SubjectAccessReview, LocalSubjectAccessReview and SelfSubjectRulesReview
//! as an administrator and a component send them, with Kubernetes' answers to a question that
//! cannot be asked (422, 400), by someone who may not ask it (403), or with a method a review
//! does not take (405).

use std::time::Duration;

use e2e::apiserver::{ApiCluster, ApiOptions, KUBECTL_MINORS};
use reqwest::Method;
use serde_json::{Value, json};

/// How long the controller manager may take to aggregate `edit`, and the watch caches to see a
/// new binding.
const POLICY_TIMEOUT: Duration = Duration::from_secs(60);

async fn start() -> ApiCluster {
    ApiCluster::start(ApiOptions { secure: true, controller_manager: true, ..ApiOptions::default() }).await.expect("a secure API server")
}

/// A cluster with namespace `team`, where group `devs` may edit; and jane's kubeconfig (group
/// `devs`), once `edit` has its aggregated rules and jane holds them.
async fn with_team() -> (ApiCluster, std::path::PathBuf) {
    let api = start().await;
    let admin = api.pki_dir().join("admin.conf");
    for args in [&["create", "namespace", "team"][..], &["create", "rolebinding", "devs-edit", "--clusterrole=edit", "--group=devs", "-n", "team"]] {
        let o = api.kubectl_kubeconfig(33, &admin, args);
        assert!(o.success, "{}", o.describe());
    }
    let jane = api.user_kubeconfig("jane", &["devs"]);
    api.wait_for("jane to be allowed to create pods in team", POLICY_TIMEOUT, || {
        let o = api.kubectl_kubeconfig(33, &jane, &["auth", "can-i", "create", "pods", "-n", "team"]);
        async move { if o.stdout.trim() == "yes" { Ok(()) } else { Err(o.describe()) } }
    })
    .await;
    (api, jane)
}

#[tokio::test]
async fn kubectl_auth_can_i_and_whoami() {
    let (api, jane) = with_team().await;
    let admin = api.pki_dir().join("admin.conf");
    for minor in KUBECTL_MINORS {
        let can_i = |kubeconfig, args: &[&str]| {
            let mut all = vec!["auth", "can-i"];
            all.extend(args);
            api.kubectl_kubeconfig(minor, kubeconfig, &all)
        };
        // can-i answers on stdout, and with its exit code.
        let o = can_i(&admin, &["*", "*"]);
        assert!(o.success && o.stdout.trim() == "yes", "kubectl 1.{minor}: the admin may do anything: {}", o.describe());
        let o = can_i(&jane, &["create", "pods", "-n", "team"]);
        assert!(o.success && o.stdout.trim() == "yes", "kubectl 1.{minor}: {}", o.describe());
        let o = can_i(&jane, &["create", "pods", "-n", "default"]);
        assert_eq!((o.code, o.stdout.trim()), (Some(1), "no"), "kubectl 1.{minor}: {}", o.describe());
        let o = can_i(&jane, &["delete", "clusterroles"]);
        assert_eq!((o.code, o.stdout.trim()), (Some(1), "no"), "kubectl 1.{minor}: {}", o.describe());
        let o = can_i(&jane, &["get", "/healthz"]);
        assert!(o.success && o.stdout.trim() == "yes", "kubectl 1.{minor}: a path of system:public-info-viewer: {}", o.describe());

        // --list: jane's rules in team, as kubectl tabulates them.
        let o = can_i(&jane, &["--list", "-n", "team"]);
        assert!(o.success, "kubectl 1.{minor}: {}", o.describe());
        let pods = o.stdout.lines().find(|l| l.starts_with("pods ")).unwrap_or_else(|| panic!("kubectl 1.{minor}: no pods row:\n{}", o.stdout));
        assert!(pods.contains("create") && pods.contains("delete"), "kubectl 1.{minor}: {pods}");
        assert!(o.stdout.lines().any(|l| l.starts_with("selfsubjectaccessreviews.authorization.k8s.io")), "kubectl 1.{minor}: {}", o.stdout);
        let o = can_i(&jane, &["--list", "-n", "default"]);
        assert!(o.success && !o.stdout.lines().any(|l| l.starts_with("pods ")), "kubectl 1.{minor}: nothing on pods outside team: {}", o.describe());

        // whoami: the certificate's CN and O, and system:authenticated.
        let o = api.kubectl_kubeconfig(minor, &jane, &["auth", "whoami", "-o", "json"]);
        assert!(o.success, "kubectl 1.{minor}: {}", o.describe());
        let review: Value = serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("kubectl 1.{minor}: {e}: {}", o.stdout));
        assert_eq!(review["status"]["userInfo"], json!({"username": "jane", "groups": ["devs", "system:authenticated"]}), "kubectl 1.{minor}");
        let version = if minor == 27 { "authentication.k8s.io/v1beta1" } else { "authentication.k8s.io/v1" };
        assert_eq!(review["apiVersion"], version, "kubectl 1.{minor}");
        let o = api.kubectl_kubeconfig(minor, &admin, &["auth", "whoami"]);
        assert!(o.success && o.stdout.contains("kubernetes-admin") && o.stdout.contains("[system:masters system:authenticated]"), "kubectl 1.{minor}: {}", o.describe());

        // Impersonation: the admin may act as anyone, and is then judged as them; jane may not.
        let o = can_i(&admin, &["create", "pods", "-n", "team", "--as=jane", "--as-group=devs", "--as-group=system:authenticated"]);
        assert!(o.success && o.stdout.trim() == "yes", "kubectl 1.{minor}: {}", o.describe());
        // With groups given, the user has those only: not system:authenticated, so it may not
        // even ask (as in Kubernetes).
        let o = can_i(&admin, &["create", "pods", "-n", "team", "--as=jane", "--as-group=devs"]);
        assert!(o.stderr.contains(r#"User "jane" cannot create resource "selfsubjectaccessreviews""#), "kubectl 1.{minor}: {}", o.describe());
        let o = can_i(&admin, &["create", "pods", "-n", "team", "--as=jane"]);
        assert_eq!(o.stdout.trim(), "no", "kubectl 1.{minor}: jane without her group: {}", o.describe());
        let o = api.kubectl_kubeconfig(minor, &admin, &["auth", "whoami", "--as=system:serviceaccount:team:reader", "-o", "jsonpath={.status.userInfo.groups}"]);
        assert_eq!(o.stdout, r#"["system:serviceaccounts","system:serviceaccounts:team","system:authenticated"]"#, "kubectl 1.{minor}: {}", o.describe());
        let o = api.kubectl_kubeconfig(minor, &jane, &["get", "pods", "-n", "team", "--as=bob"]);
        assert!(
            o.stderr.contains(r#"users "bob" is forbidden: User "jane" cannot impersonate resource "users" in API group "" at the cluster scope"#),
            "kubectl 1.{minor}: {}",
            o.describe()
        );
    }

    // Without credentials, nobody may ask: system:basic-user is bound to system:authenticated.
    let anonymous = api.https_client(None);
    let url = format!("{}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", api.secure_url());
    let body = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}});
    let resp = anonymous.post(&url).json(&body).send().await.expect("POST");
    assert_eq!(resp.status().as_u16(), 403);
    let status: Value = resp.json().await.expect("a Status");
    assert_eq!(
        status["message"],
        r#"selfsubjectaccessreviews.authorization.k8s.io is forbidden: User "system:anonymous" cannot create resource "selfsubjectaccessreviews" in API group "authorization.k8s.io" at the cluster scope"#
    );
}

/// `kubectl create -f` of a review as the administrator (kubectl 1.33): the answer as JSON.
/// `--validate=false`: kubectl finds no PATCH of a review in OpenAPI, so it validates on its own
/// side, which starts by listing CRDs, an API kubelab does not serve.
fn ask(api: &ApiCluster, file: &str, review: &Value) -> Value {
    let path = api.write_file(file, &review.to_string());
    let o = api.kubectl_kubeconfig(33, &api.pki_dir().join("admin.conf"), &["create", "--validate=false", "-f", path.to_str().expect("utf-8"), "-o", "json"]);
    assert!(o.success, "{}", o.describe());
    serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", o.stdout))
}

/// The same, refused: kubectl's error.
fn refused(api: &ApiCluster, kubeconfig: &std::path::Path, file: &str, review: &Value) -> String {
    let path = api.write_file(file, &review.to_string());
    let o = api.kubectl_kubeconfig(33, kubeconfig, &["create", "--validate=false", "-f", path.to_str().expect("utf-8")]);
    assert!(!o.success, "{}", o.describe());
    o.stderr
}

fn sar(spec: Value) -> Value {
    json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec})
}

fn lsar(namespace: &str, spec: Value) -> Value {
    json!({"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview", "metadata": {"namespace": namespace}, "spec": spec})
}

#[tokio::test]
async fn access_and_rules_reviews() {
    let (api, jane) = with_team().await;
    let admin = api.pki_dir().join("admin.conf");

    // 1. Discovery: create-only resources, one POST each in OpenAPI (kubectl explain).
    let o = api.kubectl_kubeconfig(33, &admin, &["api-resources", "--api-group=authorization.k8s.io", "-o", "wide"]);
    assert!(o.success, "{}", o.describe());
    for (name, namespaced) in [("localsubjectaccessreviews", "true"), ("selfsubjectaccessreviews", "false"), ("selfsubjectrulesreviews", "false"), ("subjectaccessreviews", "false")] {
        let row = o.stdout.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no {name}:\n{}", o.stdout));
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!((cells[2], cells[4]), (namespaced, "create"), "{row}");
    }
    let o = api.kubectl_kubeconfig(33, &admin, &["explain", "selfsubjectaccessreview.spec.resourceAttributes"]);
    assert!(o.success && o.stdout.contains("namespace"), "{}", o.describe());

    // 2. SubjectAccessReview: about anyone, the spec's user and groups taken as given.
    let asked = ask(&api, "sar-user.json", &sar(json!({"user": "jane", "groups": ["devs"], "resourceAttributes": {"namespace": "team", "verb": "list", "resource": "pods"}})));
    assert_eq!(asked["status"], json!({"allowed": true, "reason": r#"RBAC: allowed by RoleBinding "devs-edit/team" of ClusterRole "edit" to Group "devs""#}));
    let asked = ask(&api, "sar-nogroup.json", &sar(json!({"user": "jane", "resourceAttributes": {"namespace": "team", "verb": "list", "resource": "pods"}})));
    assert_eq!(asked["status"], json!({"allowed": false}), "jane without her group holds nothing");
    let healthz = |groups: Value| sar(json!({"user": "jane", "groups": groups, "nonResourceAttributes": {"path": "/healthz", "verb": "get"}}));
    assert_eq!(ask(&api, "sar-path.json", &healthz(json!([])))["status"]["allowed"], false, "no group adds system:authenticated");
    assert_eq!(ask(&api, "sar-path-auth.json", &healthz(json!(["system:authenticated"])))["status"]["allowed"], true);

    // 3. Questions that cannot be asked: 422 with Kubernetes' field messages.
    let e = refused(&api, &admin, "sar-nobody.json", &sar(json!({"resourceAttributes": {"verb": "get", "resource": "pods"}})));
    assert!(e.contains(r#"The SubjectAccessReview "" is invalid: spec.user: Invalid value: "": at least one of user or group must be specified"#), "{e}");
    let both = sar(json!({"user": "jane", "resourceAttributes": {"verb": "get"}, "nonResourceAttributes": {"path": "/healthz", "verb": "get"}}));
    let e = refused(&api, &admin, "sar-both.json", &both);
    assert!(e.contains(r#"spec.nonResourceAttributes: Invalid value: authorization.NonResourceAttributes{Path:"/healthz", Verb:"get"}: cannot be specified in combination with resourceAttributes"#), "{e}");

    // 4. Who may ask about others: not jane (system:auth-delegator is not hers).
    let e = refused(&api, &jane, "sar-by-jane.json", &sar(json!({"user": "bob", "resourceAttributes": {"verb": "get", "resource": "pods"}})));
    assert!(
        e.contains(r#"subjectaccessreviews.authorization.k8s.io is forbidden: User "jane" cannot create resource "subjectaccessreviews" in API group "authorization.k8s.io" at the cluster scope"#),
        "{e}"
    );

    // 5. LocalSubjectAccessReview: in its own namespace only.
    let asked = ask(&api, "lsar.json", &lsar("team", json!({"groups": ["devs"], "resourceAttributes": {"namespace": "team", "verb": "create", "resource": "pods"}})));
    assert_eq!(asked["status"]["allowed"], true, "{asked}");
    let e = refused(&api, &admin, "lsar-other.json", &lsar("team", json!({"groups": ["devs"], "resourceAttributes": {"namespace": "default", "verb": "create", "resource": "pods"}})));
    assert!(e.contains(r#"spec.resourceAttributes.namespace: Invalid value: "default": must match metadata.namespace"#), "{e}");
    let body = lsar("default", json!({"groups": ["devs"], "resourceAttributes": {"namespace": "default", "verb": "get"}}));
    let (code, text) = api.request(Method::POST, "/apis/authorization.k8s.io/v1/namespaces/team/localsubjectaccessreviews", Some(body.to_string().into_bytes()), None).await.expect("POST");
    assert_eq!(code, 400, "{text}");
    assert!(text.contains("the namespace of the provided object does not match the namespace sent on the request"), "{text}");

    // 6. A review takes a create and nothing else; it has no other path.
    let (code, text) = api.get("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews").await.expect("GET");
    assert_eq!(code, 405, "{text}");
    let (code, _) = api.get("/apis/authorization.k8s.io/v1/localsubjectaccessreviews").await.expect("GET");
    assert_eq!(code, 404, "a namespaced review has no cluster-wide path");

    // 7. SelfSubjectRulesReview: a binding to a role that does not exist grants nothing and is
    //    named in evaluationError (the insecure port's superuser is in system:masters).
    let o = api.kubectl_kubeconfig(33, &admin, &["create", "rolebinding", "ghost", "--role=ghost", "--group=system:masters", "-n", "team"]);
    assert!(o.success, "{}", o.describe());
    let ssrr = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": "team"}});
    let status = api
        .wait_for("the ghost binding to reach the authorizer", POLICY_TIMEOUT, || {
            let body = ssrr.to_string().into_bytes();
            let api = &api;
            async move {
                let (code, text) = api.request(Method::POST, "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", Some(body), None).await.map_err(|e| e.to_string())?;
                let v: Value = serde_json::from_str(&text).map_err(|e| format!("{code}: {e}: {text}"))?;
                if v["status"]["evaluationError"].is_string() { Ok(v["status"].clone()) } else { Err(text) }
            }
        })
        .await;
    assert_eq!(status["evaluationError"], r#"role.rbac.authorization.k8s.io "ghost" not found"#);
    assert_eq!(status["incomplete"], false);
    assert!(status["resourceRules"].as_array().is_some_and(|r| r.contains(&json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}))), "cluster-admin's rule: {status}");
    let (code, text) = api.request(Method::POST, "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", Some(br#"{"spec":{}}"#.to_vec()), None).await.expect("POST");
    assert_eq!((code, text.contains("no namespace on request")), (400, true), "{text}");
}
