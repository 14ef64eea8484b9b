//! Real kubectl against `kubelab apiserver` for `rbac.authorization.k8s.io/v1`: Roles,
//! ClusterRoles, RoleBindings and ClusterRoleBindings, with every kubectl 1.27 to 1.33.
//!
//! - `roles_and_bindings`: discovery and `explain`; `kubectl create role`, `create clusterrole`
//!   (resource names, non-resource URLs, `--aggregation-rule`), `create rolebinding` (to a
//!   ClusterRole, for a service account, a user and a group), `create clusterrolebinding` (sent
//!   as protobuf by kubectl 1.32 and later, as JSON before), read back as JSON, as `get` tables
//!   (NAME and CREATED AT for roles; NAME, ROLE and AGE for bindings, USERS, GROUPS and
//!   SERVICEACCOUNTS with `-o wide`) and by `describe`; `set subject` adds a subject.
//! - `invalid_objects_are_refused`: 422 with Kubernetes' field paths and messages (a name that is
//!   no path segment, a namespaced rule on a URL, a rule without verbs, a ClusterRoleBinding to
//!   a Role, subjects of unknown kinds or without a namespace, an empty aggregation rule), and
//!   what is defaulted instead of refused (the API groups a binding leaves out).
//! - `role_ref_cannot_change`: `replace` and `patch` of a binding's `roleRef` refused with "cannot
//!   change roleRef"; its subjects may change; a `roleRef` sent without its group is no change.
//! - `aggregation` (with the controller manager): a ClusterRole with an `aggregationRule` takes
//!   the rules of labelled ClusterRoles created after it, in name order, written by a server-side
//!   apply of the aggregation controller; keeps them when they are edited by hand; loses those of
//!   a role deleted or unlabelled.
//!
//! Each test, `kubectl_1_<minor>::<scenario>`, starts its own cluster on a one-member kubelab
//! store.

use std::time::Duration;

use e2e::apiserver::{ApiCluster, ApiOptions, Output};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::Api;
use reqwest::Method;
use serde_json::{Value, json};

/// How long the aggregation controller may take to catch up with a change.
const AGGREGATION_TIMEOUT: Duration = Duration::from_secs(20);

macro_rules! matrix {
    ($($name:ident),* $(,)?) => {
        matrix!(@version kubectl_1_27 27; $($name),*);
        matrix!(@version kubectl_1_28 28; $($name),*);
        matrix!(@version kubectl_1_29 29; $($name),*);
        matrix!(@version kubectl_1_30 30; $($name),*);
        matrix!(@version kubectl_1_31 31; $($name),*);
        matrix!(@version kubectl_1_32 32; $($name),*);
        matrix!(@version kubectl_1_33 33; $($name),*);
    };
    (@version $module:ident $minor:literal; $($name:ident),*) => {
        mod $module { $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name($minor).await }
        )* }
    };
}

matrix!(roles_and_bindings, invalid_objects_are_refused, role_ref_cannot_change, aggregation);

async fn start(minor: u32, controller_manager: bool) -> ApiCluster {
    let opts = ApiOptions { kubectl_minor: Some(minor), controller_manager, ..ApiOptions::default() };
    ApiCluster::start(opts).await.unwrap_or_else(|e| panic!("starting the API server cluster: {e:#}"))
}

fn assert_contains(c: &ApiCluster, what: &str, haystack: &str, needle: &str) {
    if !haystack.contains(needle) {
        c.fail(&format!("{what}: expected {needle:?} in:\n{haystack}"));
    }
}

fn get_json(c: &ApiCluster, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend(["-o", "json"]);
    let out = c.kubectl_ok(&a);
    serde_json::from_str(&out).unwrap_or_else(|e| c.fail(&format!("kubectl {} is not JSON ({e}):\n{out}", a.join(" "))))
}

/// `kubectl create -f` of `yaml`, written to `file`: kubectl's output.
fn create_file(c: &ApiCluster, file: &str, yaml: &str) -> Output {
    let p = c.write_file(file, yaml);
    c.kubectl(&["create", "-f", p.to_str().expect("utf-8 path")])
}

/// A kubectl table cut into cells at the header's column starts (a column starts where the
/// header has a name after two spaces: names such as CREATED AT hold one), so that empty cells
/// stay in their place. The first row is the header.
fn table(out: &str) -> Vec<Vec<String>> {
    let mut lines = out.lines().filter(|l| !l.trim().is_empty());
    let Some(header) = lines.next() else { return Vec::new() };
    let bytes = header.as_bytes();
    let starts: Vec<usize> = (0..bytes.len()).filter(|&i| bytes[i] != b' ' && (i == 0 || (i >= 2 && &bytes[i - 2..i] == b"  "))).collect();
    let cut = |line: &str| -> Vec<String> {
        starts
            .iter()
            .enumerate()
            .map(|(k, &s)| {
                let e = starts.get(k + 1).copied().unwrap_or(line.len()).min(line.len());
                line.get(s.min(e)..e).unwrap_or("").trim().to_string()
            })
            .collect()
    };
    std::iter::once(header).chain(lines).map(cut).collect()
}

/// The table of `kubectl get …`, checked to have the `columns` header.
fn get_table(c: &ApiCluster, args: &[&str], columns: &[&str]) -> Vec<Vec<String>> {
    let out = c.kubectl_ok(args);
    let t = table(&out);
    if t.first().map(|h| h.iter().map(String::as_str).collect::<Vec<_>>()) != Some(columns.to_vec()) {
        c.fail(&format!("kubectl {}: expected the columns {columns:?}:\n{out}", args.join(" ")));
    }
    t[1..].to_vec()
}

/// The row whose first cell is `name`.
fn row<'a>(c: &ApiCluster, rows: &'a [Vec<String>], name: &str) -> &'a [String] {
    rows.iter().find(|r| r[0] == name).unwrap_or_else(|| c.fail(&format!("no row {name} in {rows:?}")))
}

/// `out` has a line made of exactly these whitespace-separated words (describe's layout
/// changes its spacing with the longest cell).
fn assert_line(c: &ApiCluster, what: &str, out: &str, words: &[&str]) {
    if !out.lines().any(|l| l.split_whitespace().eq(words.iter().copied())) {
        c.fail(&format!("{what}: expected a line {words:?} in:\n{out}"));
    }
}

fn assert_age(c: &ApiCluster, cell: &str) {
    let unit = cell.trim_start_matches(|ch: char| ch.is_ascii_digit());
    if cell.len() == unit.len() || !["s", "m"].contains(&unit) {
        c.fail(&format!("expected an age (like 3s), got {cell:?}"));
    }
}

async fn roles_and_bindings(minor: u32) {
    let c = start(minor, false).await;

    // Discovery: four resources, no short names.
    let rows = get_table(&c, &["api-resources", "--api-group=rbac.authorization.k8s.io"], &["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]);
    let want = [
        ["clusterrolebindings", "", "rbac.authorization.k8s.io/v1", "false", "ClusterRoleBinding"],
        ["clusterroles", "", "rbac.authorization.k8s.io/v1", "false", "ClusterRole"],
        ["rolebindings", "", "rbac.authorization.k8s.io/v1", "true", "RoleBinding"],
        ["roles", "", "rbac.authorization.k8s.io/v1", "true", "Role"],
    ];
    assert_eq!(rows, want.map(|r| r.map(String::from).to_vec()).to_vec(), "api-resources");
    let out = c.kubectl_ok(&["explain", "role"]);
    assert_line(&c, "explain role", &out, &["KIND:", "Role"]);
    assert_contains(&c, "explain role", &out, "rules");
    let out = c.kubectl_ok(&["explain", "clusterrole.aggregationRule"]);
    assert_contains(&c, "explain clusterrole.aggregationRule", &out, "clusterRoleSelectors");

    // The generators (protobuf bodies from kubectl 1.32 on).
    c.kubectl_ok(&["create", "namespace", "team-a"]);
    for (args, created) in [
        (vec!["create", "role", "pod-reader", "-n", "team-a", "--verb=get,list,watch", "--resource=pods,pods/log"], "role.rbac.authorization.k8s.io/pod-reader created"),
        (vec!["create", "role", "scaler", "-n", "team-a", "--verb=update", "--resource=deployments.apps/scale", "--resource-name=web"], "role.rbac.authorization.k8s.io/scaler created"),
        (vec!["create", "clusterrole", "healthz-reader", "--verb=get", "--non-resource-url=/healthz", "--non-resource-url=/livez"], "clusterrole.rbac.authorization.k8s.io/healthz-reader created"),
        (vec!["create", "clusterrole", "monitoring", "--aggregation-rule=rbac.example.com/aggregate-to-monitoring=true"], "clusterrole.rbac.authorization.k8s.io/monitoring created"),
        (
            vec!["create", "rolebinding", "viewers", "-n", "team-a", "--clusterrole=view", "--serviceaccount=team-a:robot", "--user=jane", "--group=devs"],
            "rolebinding.rbac.authorization.k8s.io/viewers created",
        ),
        (vec!["create", "rolebinding", "readers", "-n", "team-a", "--role=pod-reader", "--user=joe"], "rolebinding.rbac.authorization.k8s.io/readers created"),
        (
            vec!["create", "clusterrolebinding", "healthz", "--clusterrole=healthz-reader", "--group=system:authenticated", "--serviceaccount=kube-system:probe"],
            "clusterrolebinding.rbac.authorization.k8s.io/healthz created",
        ),
    ] {
        let out = c.kubectl_ok(&args);
        assert_contains(&c, &args.join(" "), &out, created);
    }

    // As stored.
    let role = get_json(&c, &["get", "role", "pod-reader", "-n", "team-a"]);
    assert_eq!(role["rules"], json!([{"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list", "watch"]}]), "{role}");
    let role = get_json(&c, &["get", "role", "scaler", "-n", "team-a"]);
    assert_eq!(role["rules"], json!([{"apiGroups": ["apps"], "resources": ["deployments/scale"], "resourceNames": ["web"], "verbs": ["update"]}]), "{role}");
    let cr = get_json(&c, &["get", "clusterrole", "healthz-reader"]);
    assert_eq!(cr["rules"], json!([{"nonResourceURLs": ["/healthz", "/livez"], "verbs": ["get"]}]), "{cr}");
    let cr = get_json(&c, &["get", "clusterrole", "monitoring"]);
    assert_eq!(cr["aggregationRule"], json!({"clusterRoleSelectors": [{"matchLabels": {"rbac.example.com/aggregate-to-monitoring": "true"}}]}), "{cr}");
    assert!(cr.get("rules").is_none_or(|r| r.is_null() || r == &json!([])), "no controller manager, so no rules yet: {cr}");
    let rb = get_json(&c, &["get", "rolebinding", "viewers", "-n", "team-a"]);
    assert_eq!(rb["roleRef"], json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}), "{rb}");
    let mut subjects: Vec<Value> = rb["subjects"].as_array().cloned().unwrap_or_default();
    subjects.sort_by_key(|s| s["kind"].to_string());
    assert_eq!(
        subjects,
        vec![
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "devs"}),
            json!({"kind": "ServiceAccount", "name": "robot", "namespace": "team-a"}),
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "jane"}),
        ],
        "{rb}"
    );

    // Tables.
    let rows = get_table(&c, &["get", "roles", "-n", "team-a"], &["NAME", "CREATED AT"]);
    assert_eq!(rows.iter().map(|r| r[0].as_str()).collect::<Vec<_>>(), ["pod-reader", "scaler"]);
    for r in &rows {
        if chrono::DateTime::parse_from_rfc3339(&r[1]).is_err() || !r[1].ends_with('Z') {
            c.fail(&format!("CREATED AT is not an RFC 3339 UTC time: {r:?}"));
        }
    }
    let rows = get_table(&c, &["get", "clusterroles"], &["NAME", "CREATED AT"]);
    row(&c, &rows, "healthz-reader");
    row(&c, &rows, "monitoring");
    let rows = get_table(&c, &["get", "rolebindings", "-n", "team-a"], &["NAME", "ROLE", "AGE"]);
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(row(&c, &rows, "readers")[1], "Role/pod-reader");
    assert_eq!(row(&c, &rows, "viewers")[1], "ClusterRole/view");
    assert_age(&c, &row(&c, &rows, "viewers")[2]);
    let wide = ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"];
    let rows = get_table(&c, &["get", "rolebindings", "-n", "team-a", "-o", "wide"], &wide);
    assert_eq!(row(&c, &rows, "viewers")[3..], ["jane", "devs", "team-a/robot"]);
    assert_eq!(row(&c, &rows, "readers")[3..], ["joe", "", ""]);
    let rows = get_table(&c, &["get", "clusterrolebinding", "healthz", "-o", "wide"], &wide);
    assert_eq!(rows[0][1], "ClusterRole/healthz-reader");
    assert_eq!(rows[0][3..], ["", "system:authenticated", "kube-system/probe"]);
    let rows = get_table(&c, &["get", "clusterrolebindings"], &["NAME", "ROLE", "AGE"]);
    assert_eq!(row(&c, &rows, "healthz")[1], "ClusterRole/healthz-reader");

    // describe.
    let out = c.kubectl_ok(&["describe", "role", "pod-reader", "-n", "team-a"]);
    assert_line(&c, "describe role", &out, &["Name:", "pod-reader"]);
    assert_line(&c, "describe role", &out, &["Resources", "Non-Resource", "URLs", "Resource", "Names", "Verbs"]);
    assert_line(&c, "describe role", &out, &["pods", "[]", "[]", "[get", "list", "watch]"]);
    assert_line(&c, "describe role", &out, &["pods/log", "[]", "[]", "[get", "list", "watch]"]);
    let out = c.kubectl_ok(&["describe", "role", "scaler", "-n", "team-a"]);
    assert_line(&c, "describe role", &out, &["deployments.apps/scale", "[]", "[web]", "[update]"]);
    let out = c.kubectl_ok(&["describe", "clusterrole", "healthz-reader"]);
    assert_line(&c, "describe clusterrole", &out, &["[/healthz]", "[]", "[get]"]);
    assert_line(&c, "describe clusterrole", &out, &["[/livez]", "[]", "[get]"]);
    let out = c.kubectl_ok(&["describe", "rolebinding", "viewers", "-n", "team-a"]);
    assert_line(&c, "describe rolebinding", &out, &["Kind:", "ClusterRole"]);
    assert_line(&c, "describe rolebinding", &out, &["Name:", "view"]);
    assert_line(&c, "describe rolebinding", &out, &["User", "jane"]);
    assert_line(&c, "describe rolebinding", &out, &["Group", "devs"]);
    assert_line(&c, "describe rolebinding", &out, &["ServiceAccount", "robot", "team-a"]);
    let out = c.kubectl_ok(&["describe", "clusterrolebinding", "healthz"]);
    assert_line(&c, "describe clusterrolebinding", &out, &["Name:", "healthz-reader"]);
    assert_line(&c, "describe clusterrolebinding", &out, &["ServiceAccount", "probe", "kube-system"]);

    // `set subject` patches the subjects in.
    c.kubectl_ok(&["set", "subject", "rolebinding", "readers", "-n", "team-a", "--user=ann", "--serviceaccount=team-a:robot"]);
    let rows = get_table(&c, &["get", "rolebinding", "readers", "-n", "team-a", "-o", "wide"], &wide);
    assert_eq!(rows[0][1], "Role/pod-reader");
    assert_eq!(rows[0][3..], ["joe, ann", "", "team-a/robot"]);

    // And gone.
    c.kubectl_ok(&["delete", "role", "pod-reader", "-n", "team-a"]);
    c.kubectl_ok(&["delete", "clusterrolebinding", "healthz"]);
    let out = c.kubectl_ok(&["get", "roles", "-n", "team-a", "-o", "name"]);
    assert_eq!(out.lines().collect::<Vec<_>>(), ["role.rbac.authorization.k8s.io/scaler"], "{out}");
    c.kubectl_err(&["get", "clusterrolebinding", "healthz"], r#"clusterrolebindings.rbac.authorization.k8s.io "healthz" not found"#);
}

async fn invalid_objects_are_refused(minor: u32) {
    let c = start(minor, false).await;

    // The generators: the name is the one thing kubectl leaves to the server.
    c.kubectl_err(&["create", "role", "a%b", "--verb=get", "--resource=pods"], r#"The Role "a%b" is invalid: metadata.name: Invalid value: "a%b": may not contain '%'"#);
    c.kubectl_err(&["create", "clusterrole", "..", "--verb=get", "--resource=pods"], r#"metadata.name: Invalid value: "..": may not be '..'"#);

    // Manifests: (file, manifest, the messages).
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "urls-in-a-role.yaml",
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: urls}\nrules:\n- verbs: [get]\n  nonResourceURLs: [/healthz]\n",
            &[r#"The Role "urls" is invalid: rules[0].nonResourceURLs: Invalid value: []string{"/healthz"}: namespaced rules cannot apply to non-resource URLs"#],
        ),
        (
            "no-verbs.yaml",
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: lazy}\nrules:\n- apiGroups: ['']\n  resources: [pods]\n",
            &[r#"The ClusterRole "lazy" is invalid: rules[0].verbs: Required value: verbs must contain at least one value"#],
        ),
        (
            "both.yaml",
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: both}\nrules:\n- verbs: [get]\n  resources: [pods]\n  nonResourceURLs: [/metrics]\n",
            &[r#"rules[0].nonResourceURLs: Invalid value: []string{"/metrics"}: rules cannot apply to both regular resources and non-resource URLs"#],
        ),
        (
            "empty-aggregation.yaml",
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: empty}\naggregationRule: {}\n",
            &["aggregationRule.clusterRoleSelectors: Required value: at least one clusterRoleSelector required if aggregationRule is non-nil"],
        ),
        (
            "crb-to-a-role.yaml",
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: to-role}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-reader}\nsubjects:\n- {kind: ServiceAccount, name: robot}\n",
            &[
                r#"The ClusterRoleBinding "to-role" is invalid:"#,
                r#"roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole""#,
                "subjects[0].namespace: Required value",
            ],
        ),
        (
            "robot.yaml",
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: robots}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}\nsubjects:\n- {kind: Robot, name: r2}\n- {kind: User, apiGroup: example.com, name: jane}\n",
            &[
                r#"subjects[0].kind: Unsupported value: "Robot": supported values: "ServiceAccount", "User", "Group""#,
                r#"subjects[1].apiGroup: Unsupported value: "example.com": supported values: "rbac.authorization.k8s.io""#,
            ],
        ),
        (
            "other-group.yaml",
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: elsewhere}\nroleRef: {apiGroup: example.com, kind: Widget, name: w}\n",
            &[
                r#"roleRef.apiGroup: Unsupported value: "example.com": supported values: "rbac.authorization.k8s.io""#,
                r#"roleRef.kind: Unsupported value: "Widget": supported values: "Role", "ClusterRole""#,
            ],
        ),
    ];
    for (file, yaml, messages) in cases {
        let o = create_file(&c, file, yaml);
        if o.success || !messages.iter().all(|m| o.stderr.contains(m)) {
            c.fail(&format!("{file}: expected a refusal with {messages:?}:\n{}", o.describe()));
        }
    }
    let out = c.kubectl_ok(&["get", "roles,rolebindings", "-o", "name"]);
    assert_eq!(out.trim(), "", "nothing invalid was stored");
    let out = c.kubectl_ok(&["get", "clusterroles,clusterrolebindings", "-o", "name"]);
    for name in ["/..", "/lazy", "/both", "/empty", "/to-role"] {
        assert!(!out.lines().any(|l| l.ends_with(name)), "nothing invalid was stored: {out}");
    }

    // The status itself: 422 Invalid, one cause per field.
    let body = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "b"},
                      "roleRef": {"kind": "Role", "name": "a/b"}, "subjects": [{"kind": "ServiceAccount", "apiGroup": "rbac.authorization.k8s.io"}]});
    let (code, text) = c
        .request(Method::POST, "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings", Some(body.to_string().into_bytes()), None)
        .await
        .expect("POST a RoleBinding");
    let status: Value = serde_json::from_str(&text).unwrap_or_else(|e| c.fail(&format!("not JSON ({e}): {text}")));
    assert_eq!((code, &status["reason"]), (422, &json!("Invalid")), "{status}");
    let causes: Vec<(&str, &str)> = status["details"]["causes"]
        .as_array()
        .map(|cs| cs.iter().map(|c| (c["field"].as_str().unwrap_or(""), c["reason"].as_str().unwrap_or(""))).collect())
        .unwrap_or_default();
    assert_eq!(
        causes,
        [("roleRef.name", "FieldValueInvalid"), ("subjects[0].name", "FieldValueRequired"), ("subjects[0].apiGroup", "FieldValueNotSupported")],
        "{status}"
    );

    // Defaulted rather than refused: the groups a binding leaves out.
    let o = create_file(
        &c,
        "groups-left-out.yaml",
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: defaulted}\nroleRef: {kind: ClusterRole, name: view}\nsubjects:\n- {kind: User, name: jane}\n- {kind: Group, name: devs}\n- {kind: ServiceAccount, name: robot}\n",
    );
    if !o.success {
        c.fail(&format!("a binding without groups is defaulted:\n{}", o.describe()));
    }
    let rb = get_json(&c, &["get", "rolebinding", "defaulted"]);
    assert_eq!(rb["roleRef"]["apiGroup"], "rbac.authorization.k8s.io", "{rb}");
    let groups: Vec<&Value> = rb["subjects"].as_array().map(|s| s.iter().map(|s| &s["apiGroup"]).collect()).unwrap_or_default();
    assert_eq!(groups, [&json!("rbac.authorization.k8s.io"), &json!("rbac.authorization.k8s.io"), &Value::Null], "{rb}");
}

async fn role_ref_cannot_change(minor: u32) {
    let c = start(minor, false).await;
    c.kubectl_ok(&["create", "rolebinding", "rb", "--clusterrole=view", "--user=jane"]);
    c.kubectl_ok(&["create", "clusterrolebinding", "crb", "--clusterrole=view", "--group=devs"]);

    // replace with another roleRef.
    let mut rb = get_json(&c, &["get", "rolebinding", "rb"]);
    rb["roleRef"]["name"] = json!("edit");
    let p = c.write_file("rb-edit.json", &rb.to_string());
    c.kubectl_err(
        &["replace", "-f", p.to_str().expect("utf-8")],
        r#"The RoleBinding "rb" is invalid: roleRef: Invalid value: rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", Kind:"ClusterRole", Name:"edit"}: cannot change roleRef"#,
    );
    rb["roleRef"] = json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "view"});
    let p = c.write_file("rb-role.json", &rb.to_string());
    c.kubectl_err(&["replace", "-f", p.to_str().expect("utf-8")], r#"rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", Kind:"Role", Name:"view"}: cannot change roleRef"#);

    // patch, of either binding.
    c.kubectl_err(
        &["patch", "clusterrolebinding", "crb", "--type=merge", "-p", r#"{"roleRef":{"name":"cluster-admin"}}"#],
        r#"The ClusterRoleBinding "crb" is invalid: roleRef: Invalid value: rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", Kind:"ClusterRole", Name:"cluster-admin"}: cannot change roleRef"#,
    );
    c.kubectl_err(&["patch", "rolebinding", "rb", "--type=json", "-p", r#"[{"op":"replace","path":"/roleRef/name","value":"admin"}]"#], "cannot change roleRef");

    // The subjects may change; a roleRef without its group is the same roleRef (defaulted).
    let mut rb = get_json(&c, &["get", "rolebinding", "rb"]);
    rb["subjects"] = json!([{"kind": "User", "name": "joe"}]);
    rb["roleRef"] = json!({"kind": "ClusterRole", "name": "view"});
    let p = c.write_file("rb-subjects.json", &rb.to_string());
    c.kubectl_ok(&["replace", "-f", p.to_str().expect("utf-8")]);
    let rb = get_json(&c, &["get", "rolebinding", "rb"]);
    assert_eq!(rb["roleRef"], json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}), "{rb}");
    assert_eq!(rb["subjects"], json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "joe"}]), "{rb}");
    let crb = get_json(&c, &["get", "clusterrolebinding", "crb"]);
    assert_eq!(crb["roleRef"]["name"], "view", "{crb}");
}

/// A labelled part of the `monitoring` ClusterRole: its manifest.
fn part_yaml(name: &str, rules: &str) -> String {
    format!("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {name}\n  labels:\n    rbac.example.com/aggregate-to-monitoring: \"true\"\nrules:\n{rules}")
}

const ENDPOINTS_RULE: &str = "- apiGroups: ['']\n  resources: [endpoints, services]\n  verbs: [get, list, watch]\n";

/// Waits until ClusterRole `name` holds exactly `rules` (`[]` for none).
async fn wait_for_rules(c: &ApiCluster, roles: &Api<ClusterRole>, name: &str, rules: Value) {
    c.wait_for(&format!("clusterrole {name} with the rules {rules}"), AGGREGATION_TIMEOUT, || async {
        let role = roles.get(name).await.map_err(|e| e.to_string())?;
        let got = serde_json::to_value(role.rules.unwrap_or_default()).map_err(|e| e.to_string())?;
        if got == rules { Ok(()) } else { Err(format!("rules {got}")) }
    })
    .await;
}

async fn aggregation(minor: u32) {
    let c = start(minor, true).await;
    let roles: Api<ClusterRole> = Api::all(c.kube_client().expect("client"));
    let endpoints = json!({"apiGroups": [""], "resources": ["endpoints", "services"], "verbs": ["get", "list", "watch"]});
    let pods = json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]});

    // The aggregated role first, then a labelled part: the part's rules arrive.
    c.kubectl_ok(&["create", "clusterrole", "monitoring", "--aggregation-rule=rbac.example.com/aggregate-to-monitoring=true"]);
    let o = create_file(&c, "endpoints.yaml", &part_yaml("monitoring-endpoints", ENDPOINTS_RULE));
    if !o.success {
        c.fail(&format!("creating a labelled ClusterRole:\n{}", o.describe()));
    }
    wait_for_rules(&c, &roles, "monitoring", json!([endpoints])).await;
    // Written by the controller's server-side apply: it owns the rules.
    let cr = get_json(&c, &["get", "clusterrole", "monitoring", "--show-managed-fields"]);
    let managers: Vec<(&str, &str)> = cr["metadata"]["managedFields"]
        .as_array()
        .map(|m| m.iter().map(|e| (e["manager"].as_str().unwrap_or(""), e["operation"].as_str().unwrap_or(""))).collect())
        .unwrap_or_default();
    assert!(managers.contains(&("clusterrole-aggregation-controller", "Apply")), "{managers:?}");

    // A second part, made by the generators and labelled afterwards: the union, by name.
    c.kubectl_ok(&["create", "clusterrole", "monitoring-pods", "--verb=get,list", "--resource=pods"]);
    c.kubectl_ok(&["label", "clusterrole", "monitoring-pods", "rbac.example.com/aggregate-to-monitoring=true"]);
    wait_for_rules(&c, &roles, "monitoring", json!([endpoints, pods])).await;
    let out = c.kubectl_ok(&["describe", "clusterrole", "monitoring"]);
    assert_line(&c, "describe clusterrole monitoring", &out, &["pods", "[]", "[]", "[get", "list]"]);
    assert_line(&c, "describe clusterrole monitoring", &out, &["endpoints", "[]", "[]", "[get", "list", "watch]"]);

    // Rules edited by hand are put back.
    c.kubectl_ok(&["patch", "clusterrole", "monitoring", "--type=merge", "-p", r#"{"rules":[{"apiGroups":[""],"resources":["secrets"],"verbs":["get"]}]}"#]);
    wait_for_rules(&c, &roles, "monitoring", json!([endpoints, pods])).await;

    // A part deleted, then one unlabelled: their rules go.
    c.kubectl_ok(&["delete", "clusterrole", "monitoring-endpoints"]);
    wait_for_rules(&c, &roles, "monitoring", json!([pods])).await;
    c.kubectl_ok(&["label", "clusterrole", "monitoring-pods", "rbac.example.com/aggregate-to-monitoring-"]);
    wait_for_rules(&c, &roles, "monitoring", json!([])).await;
}
