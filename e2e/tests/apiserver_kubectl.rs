//! Real kubectl against `kubelab apiserver`: everything in kubectl's wire contract that needs no
//! node agent, with every kubectl a user may have, 1.27 to 1.33.
//!
//! (A long file on purpose: one `matrix!` runs every scenario with every kubectl, so the
//! scenarios live together, one `async fn` each, in the order kubectl's commands are learned.)
//!
//! Each scenario is an `async fn(Run)`. The default kubectl (1.32) runs every scenario twice,
//! as `kubectl_1_32::<scenario>::kubelab` (a one-member kubelab store) and `…::etcd` (three real
//! etcd 3.4 members): the API server must not care which store it runs on, and the etcd run
//! checks the test itself. Every other version runs the same scenarios, unchanged, on the kubelab
//! store: `kubectl_1_27::<scenario>::kubelab` … `kubectl_1_33::…`. Each test starts its own
//! cluster. A failure prints the kubectl command, its stdout and stderr, and the API server's log
//! tail. The kubectls come from scripts/fetch-kubectl.sh (`make deps`); a missing one fails.

use std::time::{Duration, Instant};

use e2e::Flavor;
use e2e::apiserver::{ApiCluster, ApiOptions};
use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::Method;
use serde_json::{Value, json};

/// One run of a scenario: which store, which kubectl.
#[derive(Clone, Copy, Debug)]
struct Run {
    flavor: Flavor,
    kubectl: u32,
}

impl Run {
    fn options(self) -> ApiOptions {
        ApiOptions { kubectl_minor: Some(self.kubectl), ..ApiOptions::for_flavor(self.flavor) }
    }
}

/// The scenarios, as `kubectl_1_<minor>::<scenario>::<store>` (so that
/// `cargo nextest run -p e2e -E 'test(/kubectl_1_29::/)'` runs one version).
macro_rules! matrix {
    ($($name:ident),* $(,)?) => {
        mod kubectl_1_32 { $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn kubelab() { super::super::$name(super::super::Run { flavor: e2e::Flavor::Kubelab, kubectl: 32 }).await }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn etcd() { super::super::$name(super::super::Run { flavor: e2e::Flavor::Etcd, kubectl: 32 }).await }
            }
        )* }
        matrix!(@kubelab_only kubectl_1_27 27; $($name),*);
        matrix!(@kubelab_only kubectl_1_28 28; $($name),*);
        matrix!(@kubelab_only kubectl_1_29 29; $($name),*);
        matrix!(@kubelab_only kubectl_1_30 30; $($name),*);
        matrix!(@kubelab_only kubectl_1_31 31; $($name),*);
        matrix!(@kubelab_only kubectl_1_33 33; $($name),*);
    };
    (@kubelab_only $module:ident $minor:literal; $($name:ident),*) => {
        mod $module { $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn kubelab() { super::super::$name(super::super::Run { flavor: e2e::Flavor::Kubelab, kubectl: $minor }).await }
            }
        )* }
    };
}

matrix!(
    version_and_api_resources,
    get_outputs_and_selectors,
    get_watch_prints_changes,
    describe_pod_and_node,
    create_and_generators,
    apply_client_side_and_server_side,
    label_annotate_replace_edit,
    patch_types,
    delete_pods_and_wait,
    namespace_deletion_removes_contents,
    system_namespaces_cannot_be_deleted,
    unknown_fields,
    explain_and_openapi,
    cordon_and_uncordon,
    drain_evicts_pods,
    wait_for_condition,
    binding_through_http,
    request_errors,
    logs_without_node_agent,
    survives_store_outage,
    content_negotiation,
    dry_run_writes_nothing,
    workload_api,
    service_api,
);

async fn start(run: Run) -> ApiCluster {
    start_with(run.options()).await
}

async fn start_with(opts: ApiOptions) -> ApiCluster {
    ApiCluster::start(opts)
        .await
        .unwrap_or_else(|e| panic!("starting the API server cluster: {e:#}"))
}

fn pod_yaml(name: &str, labels: &[(&str, &str)]) -> String {
    let mut l = String::new();
    for (k, v) in labels {
        l.push_str(&format!("    {k}: \"{v}\"\n"));
    }
    let labels = if l.is_empty() {
        String::new()
    } else {
        format!("  labels:\n{l}")
    };
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n{labels}spec:\n  containers:\n  - name: main\n    image: busybox:1.36\n    command: [\"sleep\", \"3600\"]\n"
    )
}

const NODE_YAML: &str = "apiVersion: v1\nkind: Node\nmetadata:\n  name: node-a\n  labels:\n    kubernetes.io/hostname: node-a\nspec: {}\n";

/// `kubectl create -f` of `yaml` (written to a file named `file`).
fn create(c: &ApiCluster, file: &str, yaml: &str) -> String {
    let p = c.write_file(file, yaml);
    c.kubectl_ok(&["create", "-f", p.to_str().expect("utf-8 path")])
}

fn parse_json(c: &ApiCluster, what: &str, text: &str) -> Value {
    serde_json::from_str(text)
        .unwrap_or_else(|e| c.fail(&format!("{what} is not JSON ({e}):\n{text}")))
}

fn get_json(c: &ApiCluster, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend(["-o", "json"]);
    let out = c.kubectl_ok(&a);
    parse_json(c, &format!("kubectl {}", a.join(" ")), &out)
}

/// The NAME column of `kubectl get … --no-headers` (or of `-o name`), sorted.
fn names(c: &ApiCluster, args: &[&str]) -> Vec<String> {
    let mut a = args.to_vec();
    a.extend(["-o", "name"]);
    let mut v: Vec<String> = c
        .kubectl_ok(&a)
        .lines()
        .map(|l| l.rsplit('/').next().unwrap_or(l).to_string())
        .filter(|l| !l.is_empty())
        .collect();
    v.sort();
    v
}

fn assert_contains(c: &ApiCluster, what: &str, haystack: &str, needle: &str) {
    if !haystack.contains(needle) {
        c.fail(&format!("{what}: expected {needle:?} in:\n{haystack}"));
    }
}

/// Polls `f` every 100 ms until it returns Some, for at most `deadline`.
async fn eventually<T>(
    c: &ApiCluster,
    what: &str,
    deadline: Duration,
    mut f: impl FnMut() -> Option<T>,
) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        if start.elapsed() > deadline {
            c.fail(&format!("timed out after {deadline:?} waiting for {what}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// POST pods/NAME/binding to `node`: (status, body).
async fn bind(c: &ApiCluster, ns: &str, pod: &str, node: &str) -> (u16, String) {
    let body = json!({"apiVersion":"v1","kind":"Binding","metadata":{"name":pod},"target":{"apiVersion":"v1","kind":"Node","name":node}});
    c.request(
        Method::POST,
        &format!("/api/v1/namespaces/{ns}/pods/{pod}/binding"),
        Some(body.to_string().into_bytes()),
        None,
    )
    .await
    .unwrap_or_else(|e| c.fail(&format!("binding {pod}: {e:#}")))
}

// ---------------------------------------------------------------------------------------------

async fn version_and_api_resources(run: Run) {
    let c = start(run).await;
    // kubectl 1.27 prints the whole version.Info here, later ones the short form: both carry
    // the server's gitVersion.
    let out = c.kubectl_ok(&["version"]);
    assert_contains(&c, "kubectl version", &out, "Server Version: ");
    assert_contains(&c, "kubectl version", &out, "v1.32.0-kubelab");
    let v = parse_json(
        &c,
        "version -o json",
        &c.kubectl_ok(&["version", "-o", "json"]),
    );
    assert_eq!(v["clientVersion"]["minor"], run.kubectl.to_string(), "{v}");
    assert_eq!(v["serverVersion"]["major"], "1", "{v}");
    assert_eq!(v["serverVersion"]["minor"], "32", "{v}");

    let out = c.kubectl_ok(&["api-resources"]);
    // NAME SHORTNAMES APIVERSION NAMESPACED KIND
    for (name, short, version, namespaced, kind) in [
        ("pods", "po", "v1", "true", "Pod"),
        ("nodes", "no", "v1", "false", "Node"),
        ("namespaces", "ns", "v1", "false", "Namespace"),
        ("configmaps", "cm", "v1", "true", "ConfigMap"),
        ("secrets", "", "v1", "true", "Secret"),
        ("serviceaccounts", "sa", "v1", "true", "ServiceAccount"),
        ("events", "ev", "v1", "true", "Event"),
        ("leases", "", "coordination.k8s.io/v1", "true", "Lease"),
        ("deployments", "deploy", "apps/v1", "true", "Deployment"),
        ("replicasets", "rs", "apps/v1", "true", "ReplicaSet"),
        ("statefulsets", "sts", "apps/v1", "true", "StatefulSet"),
        ("daemonsets", "ds", "apps/v1", "true", "DaemonSet"),
        ("controllerrevisions", "", "apps/v1", "true", "ControllerRevision"),
        ("jobs", "", "batch/v1", "true", "Job"),
        ("cronjobs", "cj", "batch/v1", "true", "CronJob"),
        ("poddisruptionbudgets", "pdb", "policy/v1", "true", "PodDisruptionBudget"),
    ] {
        let want: Vec<&str> = [name, short, version, namespaced, kind]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect();
        let found = out.lines().any(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            cols == want
        });
        if !found {
            c.fail(&format!("api-resources lacks the row {want:?}:\n{out}"));
        }
    }
    // `drain` needs the eviction subresource under policy/v1.
    let (code, body) = c.get("/apis").await.expect("GET /apis");
    assert_eq!(code, 200, "{body}");
    assert_contains(&c, "GET /apis", &body, "policy");
}

async fn get_outputs_and_selectors(run: Run) {
    let c = start(run).await;
    create(
        &c,
        "web.yaml",
        &pod_yaml("web", &[("app", "web"), ("tier", "front")]),
    );
    create(&c, "db.yaml", &pod_yaml("db", &[("app", "db")]));
    create(&c, "bare.yaml", &pod_yaml("bare", &[]));
    c.kubectl_ok(&["create", "namespace", "other"]);
    let p = c.write_file("other.yaml", &pod_yaml("elsewhere", &[("app", "web")]));
    c.kubectl_ok(&["create", "-n", "other", "-f", p.to_str().expect("utf-8")]);

    // Table: the header and pod columns, wide adds IP and NODE.
    let out = c.kubectl_ok(&["get", "pods"]);
    let header: Vec<&str> = out
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE"],
        "{out}"
    );
    let web = out
        .lines()
        .find(|l| l.starts_with("web "))
        .unwrap_or_else(|| c.fail(&format!("no web row:\n{out}")));
    let cols: Vec<&str> = web.split_whitespace().collect();
    assert_eq!(&cols[1..4], ["0/1", "Pending", "0"], "{out}");
    let out = c.kubectl_ok(&["get", "pods", "-o", "wide"]);
    for col in ["IP", "NODE", "NOMINATED NODE", "READINESS GATES"] {
        assert_contains(
            &c,
            "get pods -o wide header",
            out.lines().next().unwrap_or(""),
            col,
        );
    }

    // yaml and json round-trip the object.
    let y = c.kubectl_ok(&["get", "pod", "web", "-o", "yaml"]);
    let v: Value = serde_norway::from_str(&y)
        .unwrap_or_else(|e| c.fail(&format!("-o yaml is not YAML ({e}):\n{y}")));
    assert_eq!(v["kind"], "Pod", "{y}");
    assert_eq!(v["apiVersion"], "v1", "{y}");
    assert_eq!(v["metadata"]["labels"]["tier"], "front", "{y}");
    assert!(
        v["metadata"]["uid"].as_str().is_some_and(|u| !u.is_empty()),
        "{y}"
    );
    let j = get_json(&c, &["get", "pods"]);
    assert_eq!(j["kind"], "List", "{j}");
    assert_eq!(j["items"].as_array().map(|a| a.len()), Some(3), "{j}");

    // -A shows the NAMESPACE column and every namespace.
    let out = c.kubectl_ok(&["get", "pods", "-A"]);
    assert!(out.starts_with("NAMESPACE"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("other ") && l.contains("elsewhere")),
        "get -A:\n{out}"
    );
    assert_eq!(
        names(&c, &["get", "pods", "-A"]),
        ["bare", "db", "elsewhere", "web"]
    );

    // Label selectors.
    for (sel, want) in [
        ("app=web", vec!["web"]),
        ("app!=web", vec!["bare", "db"]),
        ("app in (web,db)", vec!["db", "web"]),
        ("app notin (web)", vec!["bare", "db"]),
        ("tier", vec!["web"]),
        ("!tier", vec!["bare", "db"]),
        ("app,!tier", vec!["db"]),
    ] {
        let got = names(&c, &["get", "pods", "-l", sel]);
        if got != want {
            c.fail(&format!("get pods -l {sel:?}: got {got:?}, want {want:?}"));
        }
    }
    assert_eq!(
        names(&c, &["get", "pods", "-A", "-l", "app=web"]),
        ["elsewhere", "web"]
    );
    let out = c.kubectl_ok(&["get", "pods", "--show-labels", "-l", "app=db"]);
    assert_contains(&c, "--show-labels", &out, "app=db");

    // Field selectors.
    for (sel, want) in [
        ("metadata.name=db", vec!["db"]),
        ("metadata.name!=db", vec!["bare", "web"]),
        ("status.phase=Pending", vec!["bare", "db", "web"]),
        ("status.phase!=Pending", vec![]),
        ("spec.nodeName=", vec!["bare", "db", "web"]),
    ] {
        let got = names(&c, &["get", "pods", "--field-selector", sel]);
        if got != want {
            c.fail(&format!(
                "get pods --field-selector {sel:?}: got {got:?}, want {want:?}"
            ));
        }
    }
    assert_eq!(
        names(
            &c,
            &[
                "get",
                "pods",
                "-A",
                "--field-selector",
                "metadata.namespace=other"
            ]
        ),
        ["elsewhere"]
    );
    let err = c.kubectl_err(
        &["get", "pods", "--field-selector", "spec.bogus=x"],
        "field label not supported",
    );
    assert_contains(&c, "unsupported field selector", &err, "spec.bogus");

    // Chunked lists honour `continue`.
    assert_eq!(
        names(&c, &["get", "pods", "--chunk-size", "1"]),
        ["bare", "db", "web"]
    );
}

async fn get_watch_prints_changes(run: Run) {
    let c = start(run).await;
    create(&c, "first.yaml", &pod_yaml("first", &[]));
    let mut w = c.kubectl_spawn(&["get", "pods", "-w"]);
    let deadline = Duration::from_secs(20);
    w.expect_line("the first pod", deadline, |l| l.starts_with("first "))
        .unwrap_or_else(|e| c.fail(&format!("{e:#}")));
    create(&c, "second.yaml", &pod_yaml("second", &[]));
    w.expect_line(
        "the second pod, created after the watch started",
        deadline,
        |l| l.starts_with("second "),
    )
    .unwrap_or_else(|e| c.fail(&format!("{e:#}")));
    c.kubectl_ok(&["label", "pod", "first", "seen=yes"]);
    // The modification arrives as another `first` row.
    w.expect_count("`first` rows (ADDED, then MODIFIED)", 2, deadline, |l| {
        l.starts_with("first ")
    })
    .unwrap_or_else(|e| c.fail(&format!("{e:#}")));
    // A deletion (immediate: the pod is unscheduled) arrives as a last `second` row.
    c.kubectl_ok(&["delete", "pod", "second"]);
    w.expect_count("`second` rows (ADDED, then DELETED)", 2, deadline, |l| {
        l.starts_with("second ")
    })
    .unwrap_or_else(|e| c.fail(&format!("{e:#}")));
    // Nothing else should arrive: give a duplicate a moment to show up.
    let _ = w.expect_count(
        "nothing more",
        usize::MAX,
        Duration::from_millis(500),
        |_| true,
    );
    let (lines, stderr) = w.stop();
    // A Table without metadata.resourceVersion makes kubectl print each row twice.
    let firsts = lines.iter().filter(|l| l.starts_with("first ")).count();
    let seconds = lines.iter().filter(|l| l.starts_with("second ")).count();
    assert!(
        firsts == 2 && seconds == 2,
        "get -w printed rows twice or missed one (first {firsts}, second {seconds}): {lines:#?}\nstderr: {stderr}"
    );
    let headers = lines.iter().filter(|l| l.starts_with("NAME")).count();
    assert_eq!(headers, 1, "one header expected: {lines:#?}");
}

async fn describe_pod_and_node(run: Run) {
    let c = start(run).await;
    create(&c, "web.yaml", &pod_yaml("web", &[("app", "web")]));
    create(&c, "node.yaml", NODE_YAML);
    let out = c.kubectl_ok(&["describe", "pod", "web"]);
    for needle in [
        "Name:",
        "web",
        "Namespace:",
        "default",
        "Labels:",
        "app=web",
        "Status:",
        "Pending",
        "Containers:",
        "main:",
        "busybox:1.36",
        "Events:",
    ] {
        assert_contains(&c, "describe pod web", &out, needle);
    }
    // describe finds events by involvedObject.{name,namespace,uid}.
    let uid = get_json(&c, &["get", "pod", "web"])["metadata"]["uid"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let ev = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "web.e2e1", "namespace": "default"},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "web", "namespace": "default", "uid": uid},
        "reason": "Testing", "message": "hello from the e2e test", "type": "Normal",
        "source": {"component": "e2e"}, "count": 1,
        "firstTimestamp": "2026-01-02T03:04:05Z", "lastTimestamp": "2026-01-02T03:04:05Z"
    });
    let (code, body) = c
        .request(
            Method::POST,
            "/api/v1/namespaces/default/events",
            Some(ev.to_string().into_bytes()),
            None,
        )
        .await
        .expect("POST event");
    assert_eq!(code, 201, "creating an event: {body}");
    let out = c.kubectl_ok(&["describe", "pod", "web"]);
    assert_contains(
        &c,
        "describe pod web with an event",
        &out,
        "hello from the e2e test",
    );
    assert_contains(&c, "describe pod web with an event", &out, "Testing");
    let out = c.kubectl_ok(&["get", "events"]);
    assert_contains(&c, "get events", &out, "hello from the e2e test");
    let (code, body) = bind(&c, "default", "web", "node-a").await;
    assert_eq!(code, 201, "binding: {body}");
    let out = c.kubectl_ok(&["describe", "node", "node-a"]);
    for needle in [
        "Name:",
        "node-a",
        "Labels:",
        "kubernetes.io/hostname=node-a",
        "Non-terminated Pods:",
        "web",
        "Events:",
    ] {
        assert_contains(&c, "describe node node-a", &out, needle);
    }
    let out = c.kubectl_ok(&["get", "nodes"]);
    let header: Vec<&str> = out
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "STATUS", "ROLES", "AGE", "VERSION"],
        "{out}"
    );
}

async fn create_and_generators(run: Run) {
    let c = start(run).await;
    let out = create(&c, "web.yaml", &pod_yaml("web", &[]));
    assert_contains(&c, "create -f", &out, "pod/web created");
    let p = c.work_dir().join("web.yaml");
    let err = c.kubectl_err(
        &["create", "-f", p.to_str().expect("utf-8")],
        "AlreadyExists",
    );
    assert_contains(&c, "second create", &err, "pods \"web\" already exists");

    // The generators send protobuf bodies.
    assert_contains(
        &c,
        "create namespace",
        &c.kubectl_ok(&["create", "namespace", "team-a"]),
        "namespace/team-a created",
    );
    let out = c.kubectl_ok(&[
        "create",
        "configmap",
        "settings",
        "-n",
        "team-a",
        "--from-literal=color=blue",
        "--from-literal=size=10",
    ]);
    assert_contains(&c, "create configmap", &out, "configmap/settings created");
    let out = c.kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "creds",
        "-n",
        "team-a",
        "--from-literal=password=hunter2",
    ]);
    assert_contains(&c, "create secret", &out, "secret/creds created");
    let out = c.kubectl_ok(&["create", "serviceaccount", "robot", "-n", "team-a"]);
    assert_contains(
        &c,
        "create serviceaccount",
        &out,
        "serviceaccount/robot created",
    );

    let ns = get_json(&c, &["get", "namespace", "team-a"]);
    assert_eq!(ns["status"]["phase"], "Active", "{ns}");
    let cm = get_json(&c, &["get", "configmap", "settings", "-n", "team-a"]);
    assert_eq!(cm["data"], json!({"color":"blue","size":"10"}), "{cm}");
    let s = get_json(&c, &["get", "secret", "creds", "-n", "team-a"]);
    assert_eq!(s["data"]["password"], "aHVudGVyMg==", "{s}");
    assert_eq!(s["type"], "Opaque", "{s}");
    let sa = get_json(&c, &["get", "serviceaccount", "robot", "-n", "team-a"]);
    assert_eq!(sa["metadata"]["name"], "robot", "{sa}");
    // A namespace being deleted (no controller manager here to finish it) takes no new content.
    c.kubectl_ok(&["create", "namespace", "closing"]);
    c.kubectl_ok(&["delete", "namespace", "closing", "--wait=false"]);
    let out = c.kubectl_ok(&["get", "namespace", "closing"]);
    assert_contains(&c, "a namespace being deleted", &out, "Terminating");
    c.kubectl_err(
        &["create", "configmap", "late", "-n", "closing"],
        "unable to create new content in namespace closing because it is being terminated",
    );

    // The generators print the server's message themselves (no "(AlreadyExists)").
    c.kubectl_err(
        &["create", "configmap", "settings", "-n", "team-a"],
        "configmaps \"settings\" already exists",
    );
    let (code, body) = c
        .request(
            Method::POST,
            "/api/v1/namespaces/team-a/configmaps",
            Some(
                json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings"}})
                    .to_string()
                    .into_bytes(),
            ),
            None,
        )
        .await
        .expect("POST configmap");
    let s: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    assert!(
        code == 409 && s["reason"] == "AlreadyExists",
        "duplicate POST: {code} {body}"
    );
}

async fn apply_client_side_and_server_side(run: Run) {
    let c = start(run).await;
    let v1 = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  labels:\n    stage: one\ndata:\n  color: blue\n  keep: \"yes\"\n";
    let p = c.write_file("app.yaml", v1);
    let f = p.to_str().expect("utf-8").to_string();
    assert_contains(
        &c,
        "first apply",
        &c.kubectl_ok(&["apply", "-f", &f]),
        "configmap/app created",
    );
    let cm = get_json(&c, &["get", "cm", "app"]);
    let last = cm["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
        .as_str()
        .unwrap_or_else(|| c.fail(&format!("no last-applied annotation after apply: {cm}")))
        .to_string();
    assert_contains(&c, "last-applied", &last, "\"color\":\"blue\"");

    // Change a value, drop a key and a label: the three-way merge removes what was applied before.
    let v2 = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  labels:\n    stage: two\ndata:\n  color: green\n";
    c.write_file("app.yaml", v2);
    assert_contains(
        &c,
        "second apply",
        &c.kubectl_ok(&["apply", "-f", &f]),
        "configmap/app configured",
    );
    let cm = get_json(&c, &["get", "cm", "app"]);
    assert_eq!(cm["data"], json!({"color":"green"}), "{cm}");
    assert_eq!(cm["metadata"]["labels"]["stage"], "two", "{cm}");
    let last = cm["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert_contains(
        &c,
        "last-applied after the change",
        &last,
        "\"color\":\"green\"",
    );
    assert!(
        !last.contains("keep"),
        "last-applied still holds the removed key: {last}"
    );
    assert_contains(
        &c,
        "apply unchanged",
        &c.kubectl_ok(&["apply", "-f", &f]),
        "configmap/app unchanged",
    );

    // A pod through client-side apply too (strategic merge on containers by name).
    let pod = c.write_file("pod.yaml", &pod_yaml("applied", &[("v", "1")]));
    c.kubectl_ok(&["apply", "-f", pod.to_str().expect("utf-8")]);
    c.write_file("pod.yaml", &pod_yaml("applied", &[("v", "2")]));
    c.kubectl_ok(&["apply", "-f", pod.to_str().expect("utf-8")]);
    let p = get_json(&c, &["get", "pod", "applied"]);
    assert_eq!(p["metadata"]["labels"]["v"], "2", "{p}");
    assert_eq!(
        p["spec"]["containers"].as_array().map(|a| a.len()),
        Some(1),
        "{p}"
    );

    // Server-side apply creates when absent and records the manager `kubectl`.
    let ssa = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: \"1\"\n";
    let p = c.write_file("ssa.yaml", ssa);
    let out = c.kubectl_ok(&["apply", "--server-side", "-f", p.to_str().expect("utf-8")]);
    assert_contains(
        &c,
        "apply --server-side",
        &out,
        "configmap/ssa serverside-applied",
    );
    let cm = get_json(&c, &["get", "cm", "ssa", "--show-managed-fields"]);
    assert_eq!(cm["data"], json!({"a":"1"}), "{cm}");
    let mf = cm["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let applied = mf
        .iter()
        .find(|m| m["manager"] == "kubectl" && m["operation"] == "Apply");
    if applied.is_none() {
        c.fail(&format!(
            "no managedFields entry {{manager: kubectl, operation: Apply}}: {cm}"
        ));
    }
    c.write_file(
        "ssa.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: \"2\"\n  b: \"3\"\n",
    );
    c.kubectl_ok(&["apply", "--server-side", "-f", p.to_str().expect("utf-8")]);
    let cm = get_json(&c, &["get", "cm", "ssa"]);
    assert_eq!(cm["data"], json!({"a":"2","b":"3"}), "{cm}");

    // Another manager changing a field kubectl owns: a conflict, unless forced.
    c.write_file(
        "ssa.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: \"9\"\n",
    );
    let err = c.kubectl_err(
        &[
            "apply",
            "--server-side",
            "--field-manager=other",
            "-f",
            p.to_str().expect("utf-8"),
        ],
        "conflict",
    );
    assert_contains(&c, "server-side apply conflict", &err, "kubectl");
    c.kubectl_ok(&[
        "apply",
        "--server-side",
        "--field-manager=other",
        "--force-conflicts",
        "-f",
        p.to_str().expect("utf-8"),
    ]);
    let cm = get_json(&c, &["get", "cm", "ssa"]);
    assert_eq!(cm["data"]["a"], "9", "{cm}");
}

async fn label_annotate_replace_edit(run: Run) {
    let c = start(run).await;
    create(&c, "web.yaml", &pod_yaml("web", &[("app", "web")]));
    assert_contains(
        &c,
        "label",
        &c.kubectl_ok(&["label", "pod", "web", "env=prod"]),
        "pod/web labeled",
    );
    assert_contains(
        &c,
        "annotate",
        &c.kubectl_ok(&["annotate", "pod", "web", "note=hello"]),
        // kubectl 1.27 prints "annotate" here, later ones "annotated".
        "pod/web annotate",
    );
    let p = get_json(&c, &["get", "pod", "web"]);
    assert_eq!(
        p["metadata"]["labels"],
        json!({"app":"web","env":"prod"}),
        "{p}"
    );
    assert_eq!(p["metadata"]["annotations"]["note"], "hello", "{p}");
    // Without --overwrite an existing label is refused (client-side), with it replaced.
    c.kubectl_err(&["label", "pod", "web", "env=dev"], "already has a value");
    c.kubectl_ok(&["label", "pod", "web", "env=dev", "--overwrite"]);
    c.kubectl_ok(&["label", "pod", "web", "env-"]);
    c.kubectl_ok(&["annotate", "pod", "web", "note-"]);
    let p = get_json(&c, &["get", "pod", "web"]);
    assert_eq!(p["metadata"]["labels"], json!({"app":"web"}), "{p}");
    assert!(p["metadata"]["annotations"].get("note").is_none(), "{p}");
    // --resource-version puts metadata.resourceVersion in the merge patch: a stale one is a conflict.
    let err = c.kubectl_err(
        &["label", "pod", "web", "x=y", "--resource-version", "1"],
        "the object has been modified",
    );
    assert_contains(&c, "label with a stale resourceVersion", &err, "Conflict");

    // replace with a stale resourceVersion.
    let y = c.kubectl_ok(&["get", "pod", "web", "-o", "yaml"]);
    let stale = c.write_file("stale.yaml", &y);
    c.kubectl_ok(&["label", "pod", "web", "bump=1"]);
    let err = c.kubectl_err(
        &["replace", "-f", stale.to_str().expect("utf-8")],
        "the object has been modified",
    );
    assert_contains(&c, "replace with a stale resourceVersion", &err, "Conflict");
    // A fresh replace works.
    let fresh = c
        .kubectl_ok(&["get", "pod", "web", "-o", "yaml"])
        .replace("app: web", "app: replaced");
    let fresh = c.write_file("fresh.yaml", &fresh);
    assert_contains(
        &c,
        "replace",
        &c.kubectl_ok(&["replace", "-f", fresh.to_str().expect("utf-8")]),
        "pod/web replaced",
    );
    let p = get_json(&c, &["get", "pod", "web"]);
    assert_eq!(p["metadata"]["labels"]["app"], "replaced", "{p}");

    // edit: the "editor" is a script that rewrites a label in the file kubectl hands it.
    let script = c.write_file(
        "editor.sh",
        "#!/bin/sh\nsed -i 's/app: replaced/app: edited/' \"$1\"\n",
    );
    set_executable(&script);
    let ed = script.to_str().expect("utf-8");
    let o = c.kubectl_with(
        &["edit", "pod", "web"],
        &[("KUBE_EDITOR", ed), ("EDITOR", ed)],
        None,
    );
    if !o.success || !o.stdout.contains("pod/web edited") {
        c.fail(&format!("kubectl edit:\n{}", o.describe()));
    }
    let p = get_json(&c, &["get", "pod", "web"]);
    assert_eq!(p["metadata"]["labels"]["app"], "edited", "{p}");
    // An edit that changes nothing: "Edit cancelled, no changes made."
    let noop = c.write_file("noop.sh", "#!/bin/sh\ntrue\n");
    set_executable(&noop);
    let o = c.kubectl_with(
        &["edit", "pod", "web"],
        &[("KUBE_EDITOR", noop.to_str().expect("utf-8"))],
        None,
    );
    if !o.success || !o.stderr.contains("Edit cancelled") {
        c.fail(&format!("kubectl edit without changes:\n{}", o.describe()));
    }
}

async fn patch_types(run: Run) {
    let c = start(run).await;
    let two = pod_yaml("web", &[("app", "web")]).replace(
        "    command: [\"sleep\", \"3600\"]\n",
        "    command: [\"sleep\", \"3600\"]\n    env:\n    - name: A\n      value: \"1\"\n  - name: side\n    image: busybox:1.36\n",
    );
    create(&c, "web.yaml", &two);
    // Strategic merge: containers merge by name; the other container and the other fields stay.
    c.kubectl_ok(&[
        "patch",
        "pod",
        "web",
        "-p",
        r#"{"spec":{"containers":[{"name":"side","image":"busybox:1.37"}]}}"#,
    ]);
    let p = get_json(&c, &["get", "pod", "web"]);
    let containers = p["spec"]["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let names: Vec<&str> = containers
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["main", "side"], "{p}");
    assert_eq!(containers[0]["image"], "busybox:1.36", "{p}");
    assert_eq!(containers[0]["command"], json!(["sleep", "3600"]), "{p}");
    assert_eq!(
        containers[0]["env"],
        json!([{"name":"A","value":"1"}]),
        "{p}"
    );
    assert_eq!(containers[1]["image"], "busybox:1.37", "{p}");
    // Pod specs are immutable but for images (and a few more): changing env is Forbidden.
    let err = c.kubectl_err(
        &[
            "patch",
            "pod",
            "web",
            "-p",
            r#"{"spec":{"containers":[{"name":"main","env":[{"name":"B","value":"2"}]}]}}"#,
        ],
        "is invalid",
    );
    assert_contains(
        &c,
        "patching a pod's env",
        &err,
        "Forbidden: pod updates may not change fields",
    );
    // JSON merge patch replaces lists whole; JSON patch edits by path.
    c.kubectl_ok(&[
        "patch",
        "pod",
        "web",
        "--type=merge",
        "-p",
        r#"{"metadata":{"labels":{"merged":"yes"}}}"#,
    ]);
    c.kubectl_ok(&["patch", "pod", "web", "--type=json", "-p", r#"[{"op":"add","path":"/metadata/labels/json","value":"yes"},{"op":"remove","path":"/metadata/labels/app"}]"#]);
    let p = get_json(&c, &["get", "pod", "web"]);
    assert_eq!(
        p["metadata"]["labels"],
        json!({"merged":"yes","json":"yes"}),
        "{p}"
    );
    // A JSON patch whose test fails is rejected and changes nothing.
    let o = c.kubectl(&["patch", "pod", "web", "--type=json", "-p", r#"[{"op":"test","path":"/metadata/labels/json","value":"no"},{"op":"add","path":"/metadata/labels/x","value":"1"}]"#]);
    if o.success {
        c.fail(&format!(
            "a JSON patch with a failing test op succeeded:\n{}",
            o.describe()
        ));
    }
    let p = get_json(&c, &["get", "pod", "web"]);
    assert!(p["metadata"]["labels"].get("x").is_none(), "{p}");
}

fn set_executable(p: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

async fn delete_pods_and_wait(run: Run) {
    let c = start(run).await;
    create(&c, "node.yaml", NODE_YAML);
    create(&c, "bound.yaml", &pod_yaml("bound", &[]));
    create(&c, "loose.yaml", &pod_yaml("loose", &[]));
    let (code, body) = bind(&c, "default", "bound", "node-a").await;
    assert_eq!(code, 201, "binding: {body}");

    // Unscheduled: grace is forced to 0, so the pod is gone at once.
    let out = c.kubectl_ok(&["delete", "pod", "loose", "--timeout=20s"]);
    assert_contains(&c, "delete unbound pod", &out, "pod \"loose\" deleted");
    c.kubectl_err(&["get", "pod", "loose"], "NotFound");

    // Bound: graceful; with no node agent to finish it, it stays Terminating.
    let out = c.kubectl_ok(&["delete", "pod", "bound", "--wait=false"]);
    assert_contains(&c, "delete bound pod", &out, "pod \"bound\" deleted");
    let p = get_json(&c, &["get", "pod", "bound"]);
    assert!(p["metadata"]["deletionTimestamp"].is_string(), "{p}");
    assert_eq!(p["metadata"]["deletionGracePeriodSeconds"], 30, "{p}");
    let out = c.kubectl_ok(&["get", "pod", "bound"]);
    assert_contains(&c, "get a pod being deleted", &out, "Terminating");

    // wait --for=delete times out while it is still there…
    let o = c.kubectl(&["wait", "--for=delete", "pod/bound", "--timeout=2s"]);
    if o.success || !o.stderr.contains("timed out waiting") {
        c.fail(&format!(
            "wait --for=delete of a Terminating pod should time out:\n{}",
            o.describe()
        ));
    }
    // …and returns once a forced delete removes it. `-v=6` logs its requests: delete only once
    // its watch is open, or it may find the pod already gone and print nothing.
    let mut w = c.kubectl_spawn(&["wait", "--for=delete", "pod/bound", "--timeout=30s", "-v=6"]);
    w.expect_stderr_line("its watch request", Duration::from_secs(20), |l| {
        l.contains("watch=true")
    })
    .unwrap_or_else(|e| c.fail(&format!("{e:#}")));
    let o = c.kubectl(&["delete", "pod", "bound", "--grace-period=0", "--force"]);
    if !o.success || !o.stderr.contains("Immediate deletion does not wait") {
        c.fail(&format!("forced delete:\n{}", o.describe()));
    }
    let (ok, lines, stderr) = w
        .wait_exit(Duration::from_secs(35))
        .unwrap_or_else(|e| c.fail(&format!("{e:#}")));
    if !ok || !lines.iter().any(|l| l.contains("pod/bound condition met")) {
        c.fail(&format!(
            "wait --for=delete: ok {ok}, stdout {lines:?}, stderr {stderr}"
        ));
    }
    c.kubectl_err(&["get", "pod", "bound"], "NotFound");
    // wait on something already gone succeeds at once.
    c.kubectl_ok(&["wait", "--for=delete", "pod/bound", "--timeout=5s"]);
}

async fn namespace_deletion_removes_contents(run: Run) {
    let c = start_with(ApiOptions {
        controller_manager: true,
        ..run.options()
    })
    .await;
    c.kubectl_ok(&["create", "namespace", "doomed"]);
    for i in 0..3 {
        c.kubectl_ok(&[
            "create",
            "configmap",
            &format!("cm-{i}"),
            "-n",
            "doomed",
            "--from-literal=k=v",
        ]);
    }
    let p = c.write_file("pod.yaml", &pod_yaml("inside", &[]));
    c.kubectl_ok(&["create", "-n", "doomed", "-f", p.to_str().expect("utf-8")]);
    let out = c.kubectl_ok(&["delete", "namespace", "doomed", "--timeout=30s"]);
    assert_contains(&c, "delete namespace", &out, "namespace \"doomed\" deleted");
    eventually(
        &c,
        "namespace doomed to disappear",
        Duration::from_secs(30),
        || {
            let o = c.kubectl(&["get", "namespace", "doomed"]);
            (!o.success && o.stderr.contains("NotFound")).then_some(())
        },
    )
    .await;
    let (code, body) = c
        .get("/api/v1/namespaces/doomed/configmaps")
        .await
        .expect("list configmaps");
    let items = serde_json::from_str::<Value>(&body)
        .ok()
        .and_then(|v| v["items"].as_array().map(|a| a.len()));
    if code != 200 || items != Some(0) {
        c.fail(&format!(
            "configmaps of the deleted namespace: {code} {body}"
        ));
    }
    let (code, body) = c
        .get("/api/v1/namespaces/doomed/pods")
        .await
        .expect("list pods");
    let items = serde_json::from_str::<Value>(&body)
        .ok()
        .and_then(|v| v["items"].as_array().map(|a| a.len()));
    if code != 200 || items != Some(0) {
        c.fail(&format!("pods of the deleted namespace: {code} {body}"));
    }
    // The name can be used again.
    c.kubectl_ok(&["create", "namespace", "doomed"]);
}

async fn system_namespaces_cannot_be_deleted(run: Run) {
    let c = start(run).await;
    // The system namespaces are immortal (kube-apiserver's NamespaceLifecycle admission).
    for ns in ["default", "kube-system", "kube-public"] {
        let err = c.kubectl_err(&["delete", "namespace", ns, "--wait=false"], "Forbidden");
        assert_contains(
            &c,
            &format!("delete namespace {ns}"),
            &err,
            &format!("namespaces \"{ns}\" is forbidden: this namespace may not be deleted"),
        );
    }
}

async fn cordon_and_uncordon(run: Run) {
    let c = start(run).await;
    create(&c, "node.yaml", NODE_YAML);
    assert_contains(
        &c,
        "cordon",
        &c.kubectl_ok(&["cordon", "node-a"]),
        "node/node-a cordoned",
    );
    let n = get_json(&c, &["get", "node", "node-a"]);
    assert_eq!(n["spec"]["unschedulable"], true, "{n}");
    let out = c.kubectl_ok(&["get", "nodes"]);
    assert_contains(&c, "get nodes after cordon", &out, "SchedulingDisabled");
    assert_contains(
        &c,
        "uncordon",
        &c.kubectl_ok(&["uncordon", "node-a"]),
        "node/node-a uncordoned",
    );
    let n = get_json(&c, &["get", "node", "node-a"]);
    assert!(
        n["spec"]["unschedulable"].is_null() || n["spec"]["unschedulable"] == false,
        "{n}"
    );
    let out = c.kubectl_ok(&["get", "nodes"]);
    assert!(
        !out.contains("SchedulingDisabled"),
        "still cordoned:\n{out}"
    );
}

async fn drain_evicts_pods(run: Run) {
    let c = start(run).await;
    create(&c, "node.yaml", NODE_YAML);
    for name in ["a", "b"] {
        create(&c, &format!("{name}.yaml"), &pod_yaml(name, &[]));
        let (code, body) = bind(&c, "default", name, "node-a").await;
        assert_eq!(code, 201, "binding {name}: {body}");
    }
    create(&c, "elsewhere.yaml", &pod_yaml("elsewhere", &[]));
    // Bare pods need --force; grace 0 so that no node agent is needed to finish the deletion.
    let out = c.kubectl_ok(&[
        "drain",
        "node-a",
        "--force",
        "--grace-period=0",
        "--timeout=40s",
    ]);
    for needle in [
        "node/node-a cordoned",
        "evicting pod default/a",
        "evicting pod default/b",
        "pod/a evicted",
        "pod/b evicted",
        "node/node-a drained",
    ] {
        assert_contains(&c, "kubectl drain", &out, needle);
    }
    assert_eq!(names(&c, &["get", "pods"]), ["elsewhere"]);
    let n = get_json(&c, &["get", "node", "node-a"]);
    assert_eq!(n["spec"]["unschedulable"], true, "{n}");
    // The eviction subresource answers 201 with a Status.
    create(&c, "c.yaml", &pod_yaml("c", &[]));
    let ev = json!({"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"c","namespace":"default"},"deleteOptions":{"gracePeriodSeconds":0}});
    let (code, body) = c
        .request(
            Method::POST,
            "/api/v1/namespaces/default/pods/c/eviction",
            Some(ev.to_string().into_bytes()),
            None,
        )
        .await
        .expect("POST eviction");
    assert_eq!(code, 201, "eviction: {body}");
    c.kubectl_err(&["get", "pod", "c"], "NotFound");
}

async fn wait_for_condition(run: Run) {
    let c = start(run).await;
    create(&c, "web.yaml", &pod_yaml("web", &[]));
    let o = c.kubectl(&["wait", "--for=condition=Ready", "pod/web", "--timeout=2s"]);
    if o.success || !o.stderr.contains("timed out waiting") {
        c.fail(&format!(
            "wait for Ready on a pending pod should time out:\n{}",
            o.describe()
        ));
    }
    let w = c.kubectl_spawn(&["wait", "--for=condition=Ready", "pod/web", "--timeout=30s"]);
    // What a node agent would write: the Ready condition, through the status subresource.
    let status = json!({"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-02T03:04:05Z"}
    ]}});
    let (code, body) = c
        .request(
            Method::PATCH,
            "/api/v1/namespaces/default/pods/web/status",
            Some(status.to_string().into_bytes()),
            Some("application/merge-patch+json"),
        )
        .await
        .expect("PATCH pods/web/status");
    assert_eq!(code, 200, "status patch: {body}");
    let (ok, lines, stderr) = w
        .wait_exit(Duration::from_secs(35))
        .unwrap_or_else(|e| c.fail(&format!("{e:#}")));
    if !ok || !lines.iter().any(|l| l.contains("pod/web condition met")) {
        c.fail(&format!(
            "wait --for=condition=Ready: ok {ok}, stdout {lines:?}, stderr {stderr}"
        ));
    }
    let out = c.kubectl_ok(&["get", "pod", "web"]);
    assert_contains(&c, "get a running pod", &out, "Running");
    c.kubectl_ok(&[
        "wait",
        "--for=jsonpath={.status.phase}=Running",
        "pod/web",
        "--timeout=10s",
    ]);
}

async fn binding_through_http(run: Run) {
    let c = start(run).await;
    create(&c, "web.yaml", &pod_yaml("web", &[]));
    let (code, body) = bind(&c, "default", "web", "node-a").await;
    assert_eq!(code, 201, "first binding: {body}");
    let p = get_json(&c, &["get", "pod", "web"]);
    assert_eq!(p["spec"]["nodeName"], "node-a", "{p}");
    let conds = p["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        conds
            .iter()
            .any(|c| c["type"] == "PodScheduled" && c["status"] == "True"),
        "no PodScheduled=True condition: {p}"
    );
    let out = c.kubectl_ok(&["get", "pod", "web", "-o", "wide"]);
    assert_contains(&c, "get -o wide after binding", &out, "node-a");
    assert_eq!(
        names(
            &c,
            &["get", "pods", "--field-selector", "spec.nodeName=node-a"]
        ),
        ["web"]
    );
    let (code, body) = bind(&c, "default", "web", "node-b").await;
    assert_eq!(code, 409, "second binding: {body}");
    let s: Value = serde_json::from_str(&body)
        .unwrap_or_else(|e| c.fail(&format!("409 body is not JSON ({e}): {body}")));
    assert_eq!(s["kind"], "Status", "{s}");
    assert_eq!(s["code"], 409, "{s}");
    let (code, body) = bind(&c, "default", "ghost", "node-a").await;
    assert_eq!(code, 404, "binding a missing pod: {body}");
}

/// A request whose answer must be a Status with `code`; returns the Status.
async fn expect_status(
    c: &ApiCluster,
    method: Method,
    path: &str,
    body: Vec<u8>,
    code: u16,
) -> Value {
    let (got, text) = c
        .request(
            method.clone(),
            path,
            (!body.is_empty()).then_some(body),
            None,
        )
        .await
        .unwrap_or_else(|e| c.fail(&format!("{method} {path}: {e:#}")));
    let s: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    if got != code || s["kind"] != "Status" || s["code"] != code {
        c.fail(&format!(
            "{method} {path}: expected a Status with code {code}, got {got}: {text}"
        ));
    }
    s
}

async fn request_errors(run: Run) {
    let c = start_with(ApiOptions {
        max_request_bytes: Some(64 * 1024),
        ..run.options()
    })
    .await;
    let pods = "/api/v1/namespaces/default/pods";

    // 422 with field causes: an invalid name, a pod without containers.
    let bad = pod_yaml("Bad_Name", &[]);
    let p = c.write_file("bad.yaml", &bad);
    let err = c.kubectl_err(&["create", "-f", p.to_str().expect("utf-8")], "is invalid");
    assert_contains(&c, "invalid name", &err, "The Pod \"Bad_Name\" is invalid");
    assert_contains(&c, "invalid name", &err, "metadata.name");
    let s = expect_status(&c, Method::POST, pods, json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":"Bad_Name"},"spec":{"containers":[{"name":"c","image":"x"}]}}).to_string().into_bytes(), 422).await;
    assert_eq!(s["reason"], "Invalid", "{s}");
    let causes = s["details"]["causes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        causes.iter().any(|c| c["field"] == "metadata.name"),
        "no metadata.name cause: {s}"
    );
    let empty = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: empty\nspec:\n  containers: []\n";
    let p = c.write_file("empty.yaml", empty);
    let err = c.kubectl_err(&["create", "-f", p.to_str().expect("utf-8")], "is invalid");
    assert_contains(&c, "no containers", &err, "spec.containers");
    let s = expect_status(&c, Method::POST, pods, json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":"empty"},"spec":{"containers":[]}}).to_string().into_bytes(), 422).await;
    let causes = s["details"]["causes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        causes.iter().any(|c| c["field"] == "spec.containers"),
        "no spec.containers cause: {s}"
    );

    // Malformed JSON → 400; a body whose kind does not match the URL → 400.
    let s = expect_status(
        &c,
        Method::POST,
        pods,
        b"{\"apiVersion\":\"v1\",\"kind\":".to_vec(),
        400,
    )
    .await;
    assert_eq!(s["reason"], "BadRequest", "{s}");
    expect_status(
        &c,
        Method::POST,
        pods,
        json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}})
            .to_string()
            .into_bytes(),
        400,
    )
    .await;

    // The name or namespace in the body must match the URL; the body must be JSON (or YAML/protobuf).
    let s = expect_status(&c, Method::PUT, &format!("{pods}/other"), json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"spec":{"containers":[{"name":"c","image":"x"}]}}).to_string().into_bytes(), 400).await;
    assert_contains(
        &c,
        "name mismatch",
        s["message"].as_str().unwrap_or(""),
        "does not match the name on the URL",
    );
    let s = expect_status(&c, Method::POST, pods, json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"kube-system"},"spec":{"containers":[{"name":"c","image":"x"}]}}).to_string().into_bytes(), 400).await;
    assert_contains(
        &c,
        "namespace mismatch",
        s["message"].as_str().unwrap_or(""),
        "does not match the namespace",
    );
    let (code, text) = c
        .request(
            Method::POST,
            pods,
            Some(b"hello".to_vec()),
            Some("text/plain"),
        )
        .await
        .expect("POST text/plain");
    if code != 415 {
        c.fail(&format!(
            "POST with Content-Type text/plain: expected 415, got {code}: {text}"
        ));
    }
    // An unknown resource: a 404 Status, and kubectl says it has no such type.
    expect_status(
        &c,
        Method::GET,
        "/api/v1/namespaces/default/widgets",
        Vec::new(),
        404,
    )
    .await;
    c.kubectl_err(
        &["get", "widgets"],
        "the server doesn't have a resource type \"widgets\"",
    );

    // A body over --max-request-bytes → 413.
    let big = "x".repeat(100 * 1024);
    let cm =
        json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big"},"data":{"blob":big}});
    let s = expect_status(
        &c,
        Method::POST,
        "/api/v1/namespaces/default/configmaps",
        cm.to_string().into_bytes(),
        413,
    )
    .await;
    assert_eq!(s["reason"], "RequestEntityTooLarge", "{s}");
    let p = c.write_file("big.json", &cm.to_string());
    let err = c.kubectl_err(&["create", "-f", p.to_str().expect("utf-8")], "large");
    assert!(
        err.to_lowercase().contains("request entity too large"),
        "{err}"
    );

    // Creating in a namespace that does not exist → 404.
    c.kubectl_err(
        &["create", "configmap", "x", "-n", "nowhere"],
        "namespaces \"nowhere\" not found",
    );
    let p = c.write_file("lost.yaml", &pod_yaml("lost", &[]));
    c.kubectl_err(
        &["create", "-n", "nowhere", "-f", p.to_str().expect("utf-8")],
        "NotFound",
    );
    let s = expect_status(
        &c,
        Method::POST,
        "/api/v1/namespaces/nowhere/configmaps",
        json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}})
            .to_string()
            .into_bytes(),
        404,
    )
    .await;
    assert_eq!(s["reason"], "NotFound", "{s}");

    // Reading something absent: a 404 Status kubectl prints as NotFound.
    let err = c.kubectl_err(&["get", "pod", "nope"], "NotFound");
    assert_contains(&c, "get missing", &err, "pods \"nope\" not found");
}

async fn unknown_fields(run: Run) {
    let c = start(run).await;
    let pods = "/api/v1/namespaces/default/pods";
    // Unknown fields: a warning with --validate=warn (created), an error with --validate=strict.
    let unknown = pod_yaml("odd", &[]).replace("spec:\n", "spec:\n  bogusField: 1\n");
    let p = c.write_file("odd.yaml", &unknown);
    let o = c.kubectl(&[
        "create",
        "--validate=warn",
        "-f",
        p.to_str().expect("utf-8"),
    ]);
    if !o.success
        || !o.stderr.contains("Warning: unknown field")
        || !o.stderr.contains("spec.bogusField")
    {
        c.fail(&format!(
            "create with an unknown field and --validate=warn: expected a warning and success\n{}",
            o.describe()
        ));
    }
    let warning = o.stderr.clone();
    c.kubectl_ok(&["delete", "pod", "odd", "--grace-period=0", "--force"]);
    let err = c.kubectl_err(
        &[
            "create",
            "--validate=strict",
            "-f",
            p.to_str().expect("utf-8"),
        ],
        "unknown field",
    );
    assert_contains(&c, "strict validation", &err, "spec.bogusField");
    let (code, text) = c
        .request(
            Method::POST,
            &format!("{pods}?fieldValidation=Strict"),
            Some(
                serde_json::to_vec(&serde_norway::from_str::<Value>(&unknown).expect("yaml"))
                    .expect("json"),
            ),
            None,
        )
        .await
        .expect("POST strict");
    if code != 400 || !text.contains("unknown field") {
        c.fail(&format!(
            "fieldValidation=Strict with an unknown field: expected 400, got {code}: {text}"
        ));
    }

    // kube-apiserver's exact wording of the warning (checked last, being cosmetic).
    assert_contains(
        &c,
        "the unknown-field warning",
        &warning,
        "Warning: unknown field \"spec.bogusField\"",
    );
}

/// `kubectl explain` (through OpenAPI v3, and v2 where the version can), `/openapi/v2` itself
/// (JSON, protobuf, ETag, 406), and a client-side `apply` whose patch kubectl computes from the
/// schemas' patch strategies.
async fn explain_and_openapi(run: Run) {
    let c = start(run).await;

    // Explain through the version's default path (v3 from 1.27 on).
    let containers = c.kubectl_ok(&["explain", "pod.spec.containers"]);
    assert_contains(&c, "explain pod.spec.containers", &containers, "KIND:");
    assert_contains(&c, "explain pod.spec.containers", &containers, "List of containers belonging to the pod.");
    assert_contains(&c, "explain pod.spec.containers", &containers, "image\t<string>");
    assert_contains(&c, "explain pod.spec.containers", &containers, "name\t<string> -required-");
    let recursive = c.kubectl_ok(&["explain", "pods", "--recursive"]);
    assert_contains(&c, "explain pods --recursive", &recursive, "Pod is a collection of containers");
    assert_contains(&c, "explain pods --recursive", &recursive, "containerPort\t<integer>");
    assert_contains(&c, "explain pods --recursive", &recursive, "nodeName\t<string>");
    if recursive.lines().any(|l| l.trim_start().starts_with("metadata\t") && l.contains("-required-")) {
        c.fail(&format!("a Pod's metadata is not required in Kubernetes' schema:\n{recursive}"));
    }
    let lease = c.kubectl_ok(&["explain", "lease.spec.holderIdentity"]);
    assert_contains(&c, "explain lease.spec.holderIdentity", &lease, "Lease");
    assert_contains(&c, "explain lease.spec.holderIdentity", &lease, "holderIdentity contains the identity of the holder");
    assert_contains(&c, "explain lease.spec.holderIdentity", &lease, "<string>");
    let taints = c.kubectl_ok(&["explain", "node.spec.taints"]);
    assert_contains(&c, "explain node.spec.taints", &taints, "If specified, the node's taints.");
    assert_contains(&c, "explain node.spec.taints", &taints, "effect\t<string> -required-");
    c.kubectl_err(&["explain", "pod.spec.noSuchField"], "noSuchField");

    // Explain through OpenAPI v2 (kubectl decodes the protobuf form).
    let o = c.kubectl(&["explain", "pod.spec.containers", "--output=plaintext-openapiv2"]);
    if o.success {
        assert_contains(&c, "explain --output=plaintext-openapiv2", &o.stdout, "containers <[]Object>");
        assert_contains(&c, "explain --output=plaintext-openapiv2", &o.stdout, "List of containers belonging to the pod.");
        assert_contains(&c, "explain --output=plaintext-openapiv2", &o.stdout, "image\t<string>");
        let lease = c.kubectl_ok(&["explain", "lease.spec.leaseDurationSeconds", "--output=plaintext-openapiv2"]);
        assert_contains(&c, "explain lease (v2)", &lease, "leaseDurationSeconds <integer>");
        assert_contains(&c, "explain lease (v2)", &lease, "VERSION:  coordination.k8s.io/v1");
        let node = c.kubectl_ok(&["explain", "nodes", "--recursive", "--output=plaintext-openapiv2"]);
        assert_contains(&c, "explain nodes --recursive (v2)", &node, "unschedulable\t<boolean>");
    } else if !o.stderr.contains("plaintext-openapiv2") {
        c.fail(&format!("explain --output=plaintext-openapiv2\n{}", o.describe()));
    }

    // The document itself.
    let http = reqwest::Client::new();
    let get = |accept: &str, etag: Option<&str>| {
        let mut r = http.get(format!("{}/openapi/v2", c.url())).header("Accept", accept);
        if let Some(t) = etag {
            r = r.header("If-None-Match", t);
        }
        r.send()
    };
    let json = get("application/json", None).await.expect("GET /openapi/v2");
    assert_eq!(json.status().as_u16(), 200);
    assert_eq!(json.headers()["content-type"], "application/json");
    let etag = json.headers().get("etag").and_then(|e| e.to_str().ok()).map(String::from).unwrap_or_else(|| c.fail("no ETag on /openapi/v2"));
    let doc: Value = json.json().await.expect("a JSON document");
    assert_eq!(doc["swagger"], "2.0");
    assert_eq!(doc["definitions"]["io.k8s.api.core.v1.Pod"]["x-kubernetes-group-version-kind"], json!([{"group": "", "version": "v1", "kind": "Pod"}]));
    assert_eq!(doc["definitions"]["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]["x-kubernetes-patch-merge-key"], "name");
    let lease_op = &doc["paths"]["/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"]["patch"];
    assert_eq!(lease_op["x-kubernetes-action"], "patch");
    assert_eq!(lease_op["x-kubernetes-group-version-kind"], json!({"group": "coordination.k8s.io", "version": "v1", "kind": "Lease"}));
    let unchanged = get("application/json", Some(&etag)).await.expect("GET with If-None-Match");
    assert_eq!(unchanged.status().as_u16(), 304);
    let pb = get("application/com.github.proto-openapi.spec.v2@v1.0+protobuf", None).await.expect("GET protobuf");
    assert_eq!(pb.status().as_u16(), 200);
    assert_eq!(pb.headers()["content-type"], "application/com.github.proto-openapi.spec.v2.v1.0+protobuf");
    assert_eq!(pb.headers().get("etag").and_then(|e| e.to_str().ok()), Some(etag.as_str()), "one ETag for both encodings");
    assert!(pb.bytes().await.expect("body").first() == Some(&0x0a), "a protobuf Document starts with field 1 (swagger)");
    let refused = get("application/yaml", None).await.expect("GET yaml");
    assert_eq!(refused.status().as_u16(), 406);

    // Client-side apply computes its patch from the schemas: a finalizer dropped from the file
    // must be deleted (a list merged as a set), not merged back in.
    let cm = |finalizers: &str| format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fin\n  finalizers: [{finalizers}]\ndata:\n  k: v\n");
    let p = c.write_file("fin.yaml", &cm("\"example.com/a\", \"example.com/b\""));
    c.kubectl_ok(&["apply", "-f", p.to_str().expect("utf-8")]);
    let p = c.write_file("fin.yaml", &cm("\"example.com/a\""));
    c.kubectl_ok(&["apply", "-f", p.to_str().expect("utf-8")]);
    let live = get_json(&c, &["get", "configmap", "fin"]);
    assert_eq!(live["metadata"]["finalizers"], json!(["example.com/a"]), "apply removes the finalizer the file dropped");
    c.kubectl_ok(&["patch", "configmap", "fin", "--type=merge", "-p", "{\"metadata\":{\"finalizers\":null}}"]);

    // Default validation still reports a truly unknown field.
    let bogus = pod_yaml("bogus", &[]).replace("spec:\n", "spec:\n  bogusField: 1\n");
    let p = c.write_file("bogus.yaml", &bogus);
    let err = c.kubectl_err(&["apply", "-f", p.to_str().expect("utf-8")], "unknown field");
    assert_contains(&c, "apply with an unknown field", &err, "spec.bogusField");
}

async fn logs_without_node_agent(run: Run) {
    let c = start(run).await;
    create(&c, "node.yaml", NODE_YAML);
    create(&c, "web.yaml", &pod_yaml("web", &[]));
    let (code, body) = bind(&c, "default", "web", "node-a").await;
    assert_eq!(code, 201, "binding: {body}");
    let start = Instant::now();
    let o = c.kubectl(&["logs", "web"]);
    let took = start.elapsed();
    if o.success || took > Duration::from_secs(25) || o.stderr.trim().is_empty() {
        c.fail(&format!("logs of a pod whose node has no agent must fail clearly and quickly (took {took:?}):\n{}", o.describe()));
    }
    // kubectl 1.27 first warns that the (deliberately absent) kubeconfig is missing.
    assert!(
        o.stderr.lines().any(|l| l.starts_with("Error from server")),
        "not a server Status: {}",
        o.describe()
    );
    // A wrong container name: kubectl checks it itself; the server answers 400 before any node is asked.
    c.kubectl_err(
        &["logs", "web", "-c", "nope"],
        "container nope is not valid for pod web",
    );
    let s = expect_status(
        &c,
        Method::GET,
        "/api/v1/namespaces/default/pods/web/log?container=nope",
        Vec::new(),
        400,
    )
    .await;
    assert_contains(
        &c,
        "log of a wrong container",
        s["message"].as_str().unwrap_or(""),
        "container nope is not valid for pod web",
    );
    // An unscheduled pod has nowhere to get logs from.
    create(&c, "loose.yaml", &pod_yaml("loose", &[]));
    let start = Instant::now();
    let o = c.kubectl(&["logs", "loose"]);
    if o.success || start.elapsed() > Duration::from_secs(25) {
        c.fail(&format!(
            "logs of an unscheduled pod must fail quickly:\n{}",
            o.describe()
        ));
    }
}

async fn survives_store_outage(run: Run) {
    let mut c = start(run).await;
    c.kubectl_ok(&["create", "configmap", "before", "--from-literal=k=v"]);
    c.stop_store();

    // A read that needs the store: a 503 Status, promptly.
    let started = Instant::now();
    let (code, body) = c
        .get("/api/v1/namespaces/default/configmaps")
        .await
        .unwrap_or_else(|e| c.fail(&format!("list while the store is down: {e:#}")));
    let s: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    if code != 503 || s["kind"] != "Status" || s["code"] != 503 {
        c.fail(&format!(
            "list while the store is down: expected a 503 Status, got {code} after {:?}: {body}",
            started.elapsed()
        ));
    }
    let (code, body) = c
        .request(
            Method::POST,
            "/api/v1/namespaces/default/configmaps",
            Some(
                json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"during"}})
                    .to_string()
                    .into_bytes(),
            ),
            None,
        )
        .await
        .unwrap_or_else(|e| c.fail(&format!("create while the store is down: {e:#}")));
    if code != 503 {
        c.fail(&format!(
            "create while the store is down: expected 503, got {code}: {body}"
        ));
    }
    let o = c.kubectl(&["create", "configmap", "during", "--from-literal=k=v"]);
    if o.success || o.stderr.trim().is_empty() {
        c.fail(&format!(
            "kubectl create while the store is down must fail clearly:\n{}",
            o.describe()
        ));
    }
    let (code, _) = c
        .get("/readyz")
        .await
        .unwrap_or_else(|e| c.fail(&format!("/readyz: {e:#}")));
    assert_ne!(code, 200, "/readyz is 200 with the store down");
    assert!(
        c.apiserver_alive(),
        "the API server exited when the store went away"
    );

    c.start_store()
        .await
        .unwrap_or_else(|e| c.fail(&format!("restarting the store: {e:#}")));
    eventually(
        &c,
        "kubectl get to work again after the store came back",
        Duration::from_secs(10),
        || {
            let o = c.kubectl(&["get", "configmap", "before", "-o", "name"]);
            (o.success && o.stdout.trim() == "configmap/before").then_some(())
        },
    )
    .await;
    c.kubectl_ok(&["create", "configmap", "after", "--from-literal=k=v"]);
    let (code, body) = c.get("/readyz").await.expect("/readyz");
    assert_eq!(code, 200, "{body}");
}

/// GET `path` with `Accept: accept`: the code, the Content-Type and the body.
async fn get_accepting(c: &ApiCluster, path: &str, accept: &str) -> (u16, String, String) {
    let url = format!("{}{path}", c.url());
    let resp = reqwest::Client::new()
        .get(&url)
        .header("Accept", accept)
        .send()
        .await
        .unwrap_or_else(|e| c.fail(&format!("GET {url} ({accept}): {e}")));
    let code = resp.status().as_u16();
    let ct = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let body = resp.text().await.unwrap_or_else(|e| c.fail(&format!("reading GET {url}: {e}")));
    (code, ct, body)
}

/// Every media type a client offers is considered in order; 406 only when none can be served.
async fn content_negotiation(run: Run) {
    let c = start(run).await;
    // Aggregated discovery in the version offered: v2beta1 (kubectl 1.27-1.29), v2 (1.30 on).
    for (accept, version) in [
        ("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json", "v2beta1"),
        ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json", "v2"),
    ] {
        for path in ["/api", "/apis"] {
            let (code, ct, body) = get_accepting(&c, path, accept).await;
            let doc = parse_json(&c, path, &body);
            assert_eq!(code, 200, "{path}: {body}");
            assert_eq!(ct, format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"), "{path}");
            assert_eq!(doc["apiVersion"], format!("apidiscovery.k8s.io/{version}"), "{path}: {body}");
            let resources: Vec<&str> = doc["items"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|g| g["versions"][0]["resources"].as_array().into_iter().flatten())
                .filter_map(|r| r["resource"].as_str())
                .collect();
            let want = if path == "/api" { "pods" } else { "leases" };
            assert!(resources.contains(&want), "{path} as {version} lists no {want}: {body}");
        }
    }
    // Aggregated discovery offered only as protobuf, which is not written: the legacy documents.
    let (code, _, body) = get_accepting(&c, "/apis", "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json").await;
    assert_eq!((code, parse_json(&c, "/apis", &body)["kind"].as_str()), (200, Some("APIGroupList")), "{body}");
    let (code, _, body) = get_accepting(&c, "/api", "").await;
    assert_eq!((code, parse_json(&c, "/api", &body)["kind"].as_str()), (200, Some("APIVersions")), "{body}");

    // Objects: the first servable type wins; protobuf is passed over.
    let (code, ct, body) = get_accepting(&c, "/api/v1/namespaces/default", "application/vnd.kubernetes.protobuf, application/json").await;
    assert_eq!((code, ct.as_str(), parse_json(&c, "ns", &body)["kind"].as_str()), (200, "application/json", Some("Namespace")), "{body}");
    let (code, _, body) = get_accepting(&c, "/api/v1/namespaces", "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io, application/json;as=Table;v=v1;g=meta.k8s.io, application/json").await;
    assert_eq!((code, parse_json(&c, "namespaces", &body)["kind"].as_str()), (200, Some("Table")), "{body}");
    let (code, ct, body) = get_accepting(&c, "/api/v1/namespaces/default", "application/yaml").await;
    let doc: Value = serde_norway::from_str(&body).unwrap_or_else(|e| c.fail(&format!("not YAML ({e}): {body}")));
    assert_eq!((code, ct.as_str(), doc["metadata"]["name"].as_str()), (200, "application/yaml", Some("default")), "{body}");
    // Metadata only (metadata informers, `kube`'s list_metadata): the object's metadata, no spec.
    let (code, _, body) = get_accepting(&c, "/api/v1/namespaces", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1").await;
    let list = parse_json(&c, "namespaces", &body);
    assert_eq!((code, list["kind"].as_str(), list["apiVersion"].as_str()), (200, Some("PartialObjectMetadataList"), Some("meta.k8s.io/v1")), "{body}");
    let default = list["items"].as_array().into_iter().flatten().find(|i| i["metadata"]["name"] == "default").cloned().unwrap_or(Value::Null);
    assert_eq!((default["kind"].as_str(), default.get("spec").is_none()), (Some("PartialObjectMetadata"), true), "{body}");
    let (code, _, body) = get_accepting(&c, "/api/v1/namespaces/default", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1").await;
    assert_eq!((code, parse_json(&c, "ns", &body)["metadata"]["name"].as_str()), (200, Some("default")), "{body}");

    // An error is written in the negotiated type too.
    let (code, _, body) = get_accepting(&c, "/api/v1/namespaces/default/pods/missing", "application/yaml").await;
    let doc: Value = serde_norway::from_str(&body).unwrap_or_else(|e| c.fail(&format!("not YAML ({e}): {body}")));
    assert_eq!((code, doc["kind"].as_str(), doc["reason"].as_str()), (404, Some("Status"), Some("NotFound")), "{body}");

    // Nothing servable: 406 with a Status naming what is.
    for (path, accept) in [
        ("/api/v1/namespaces", "application/vnd.kubernetes.protobuf"),
        ("/api/v1/namespaces/default", "text/html, application/json;as=PartialObjectMetadata;v=v1beta1;g=meta.k8s.io"),
        ("/api/v1/namespaces?watch=true", "application/yaml"),
        ("/apis", "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"),
    ] {
        let (code, _, body) = get_accepting(&c, path, accept).await;
        let s = parse_json(&c, path, &body);
        assert_eq!((code, s["kind"].as_str(), s["reason"].as_str()), (406, Some("Status"), Some("NotAcceptable")), "{path} ({accept}): {body}");
        assert_contains(&c, "406", s["message"].as_str().unwrap_or(""), "only the following media types are accepted: application/json");
    }
    // What kubectl itself sends works with this kubectl.
    let out = c.kubectl_ok(&["get", "ns", "default", "-o", "name"]);
    assert_contains(&c, "get ns", &out, "namespace/default");
}

// ---------------------------------------------------------------------------------------------
// Server-side dry run: every write answers as it would, and nothing is written.

/// A raw watch of a collection, read one event (one JSON line) at a time.
struct RawWatch {
    url: String,
    body: BoxStream<'static, reqwest::Result<Vec<u8>>>,
    buf: Vec<u8>,
}

impl RawWatch {
    /// Watches `collection` (a path) from `rv`.
    async fn open(c: &ApiCluster, collection: &str, rv: &str) -> RawWatch {
        let url = format!("{}{collection}?watch=true&resourceVersion={rv}", c.url());
        let resp = c
            .http_streaming()
            .get(&url)
            .send()
            .await
            .unwrap_or_else(|e| c.fail(&format!("GET {url}: {e:#}")));
        if resp.status().as_u16() != 200 {
            c.fail(&format!("GET {url}: {}", resp.status()));
        }
        let body = resp.bytes_stream().map(|chunk| chunk.map(|b| b.to_vec())).boxed();
        RawWatch { url, body, buf: Vec::new() }
    }

    /// The next event, within 10 s.
    async fn next(&mut self, c: &ApiCluster) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(i) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                let text = String::from_utf8_lossy(&line).into_owned();
                return parse_json(c, &format!("an event of {}", self.url), &text);
            }
            match tokio::time::timeout_at(deadline, self.body.next()).await {
                Ok(Some(Ok(chunk))) => self.buf.extend_from_slice(&chunk),
                Ok(Some(Err(e))) => c.fail(&format!("watch {}: {e:#}", self.url)),
                Ok(None) => c.fail(&format!("watch {} ended", self.url)),
                Err(_) => c.fail(&format!("watch {}: no event within 10 s", self.url)),
            }
        }
    }
}

/// `kubectl get <what> -o json`'s resourceVersion.
fn resource_version(c: &ApiCluster, what: &[&str]) -> String {
    let v = get_json(c, what);
    v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_else(|| c.fail(&format!("no resourceVersion: {v}")))
        .to_string()
}

/// A raw request that must answer `code` with a JSON body (an object or a Status); returns it.
async fn expect_json(c: &ApiCluster, method: Method, path: &str, body: Option<Value>, content_type: Option<&str>, code: u16) -> Value {
    let (got, text) = c
        .request(method.clone(), path, body.map(|b| b.to_string().into_bytes()), content_type)
        .await
        .unwrap_or_else(|e| c.fail(&format!("{method} {path}: {e:#}")));
    if got != code {
        c.fail(&format!("{method} {path}: expected {code}, got {got}: {text}"));
    }
    parse_json(c, &format!("{method} {path}"), &text)
}

async fn dry_run_writes_nothing(run: Run) {
    let c = start(run).await;
    let pods = "/api/v1/namespaces/default/pods";
    create(&c, "node.yaml", NODE_YAML);
    create(&c, "web.yaml", &pod_yaml("web", &[]));
    create(&c, "a.yaml", &pod_yaml("a", &[]));
    let (code, body) = bind(&c, "default", "a", "node-a").await;
    assert_eq!(code, 201, "binding a: {body}");
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  k: v\n";
    let cm_changed = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  k: changed\n";
    let cm_path = c.write_file("cm.yaml", cm);
    c.kubectl_ok(&["apply", "-f", cm_path.to_str().expect("utf-8")]);
    create(&c, "team.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team\n");
    let objects: [&[&str]; 5] = [
        &["get", "pod", "web"],
        &["get", "pod", "a"],
        &["get", "node", "node-a"],
        &["get", "configmap", "cm"],
        &["get", "namespace", "team"],
    ];
    let before: Vec<String> = objects.iter().map(|o| resource_version(&c, o)).collect();
    // Watches from now: the first event each sees must be the real write at the end.
    let list = expect_json(&c, Method::GET, pods, None, None, 200).await;
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap_or_else(|| c.fail(&format!("no resourceVersion: {list}"))).to_string();
    let mut watches = Vec::new();
    for collection in ["/api/v1/namespaces/default/pods", "/api/v1/nodes", "/api/v1/namespaces/default/configmaps", "/api/v1/namespaces"] {
        watches.push(RawWatch::open(&c, collection, &rv).await);
    }

    // kubectl --dry-run=server: create, apply (client- and server-side), replace, patch, label,
    // annotate, delete, drain.
    let dry = "--dry-run=server";
    let path = |name: &str, text: &str| c.write_file(name, text).to_str().expect("utf-8").to_string();
    let web2 = path("web2.yaml", &pod_yaml("web2", &[]));
    let out = c.kubectl_ok(&["create", "-f", &web2, dry]);
    assert_contains(&c, "create --dry-run=server", &out, "pod/web2 created (server dry run)");
    let web = path("web-again.yaml", &pod_yaml("web", &[]));
    c.kubectl_err(&["create", "-f", &web, dry], "AlreadyExists");
    c.kubectl_err(&["create", "-f", &web2, "-n", "nowhere", dry], "namespaces \"nowhere\" not found");
    let changed = path("cm-changed.yaml", cm_changed);
    let out = c.kubectl_ok(&["apply", "-f", &changed, dry]);
    assert_contains(&c, "apply --dry-run=server", &out, "configmap/cm configured (server dry run)");
    let out = c.kubectl_ok(&["apply", "--server-side", "--force-conflicts", "-f", &changed, dry]);
    assert_contains(&c, "apply --server-side --dry-run=server", &out, "configmap/cm serverside-applied (server dry run)");
    let cm2 = path("cm2.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm2\ndata:\n  k: v\n");
    let out = c.kubectl_ok(&["apply", "--server-side", "-f", &cm2, dry]);
    assert_contains(&c, "apply --server-side of a new object", &out, "configmap/cm2 serverside-applied (server dry run)");
    let out = c.kubectl_ok(&["replace", "-f", &changed, dry]);
    assert_contains(&c, "replace --dry-run=server", &out, "configmap/cm replaced (server dry run)");
    let out = c.kubectl_ok(&["replace", "-f", &changed, dry, "-o", "json"]);
    let replaced = parse_json(&c, "replace -o json", &out);
    assert_eq!(replaced["data"]["k"], "changed", "the answer is the replaced object: {replaced}");
    for (kind, patch) in [
        ("strategic", r#"{"metadata":{"labels":{"x":"y"}}}"#),
        ("merge", r#"{"metadata":{"labels":{"x":"y"}}}"#),
        ("json", r#"[{"op":"add","path":"/metadata/labels","value":{"x":"y"}}]"#),
    ] {
        let out = c.kubectl_ok(&["patch", "pod", "web", "--type", kind, "-p", patch, dry, "-o", "json"]);
        let patched = parse_json(&c, &format!("patch --type {kind} -o json"), &out);
        assert_eq!(patched["metadata"]["labels"]["x"], "y", "{kind}: the answer is the patched pod: {patched}");
        assert_eq!(patched["metadata"]["resourceVersion"], before[0].as_str(), "{kind}: at the current version: {patched}");
    }
    let out = c.kubectl_ok(&["label", "pod", "web", "x=y", dry]);
    assert_contains(&c, "label --dry-run=server", &out, "pod/web labeled (server dry run)");
    let out = c.kubectl_ok(&["annotate", "pod", "web", "a=b", dry]);
    // kubectl 1.27 prints "annotate" here, later ones "annotated".
    assert_contains(&c, "annotate --dry-run=server", &out, "pod/web annotate");
    assert_contains(&c, "annotate --dry-run=server", &out, "(server dry run)");
    let out = c.kubectl_ok(&["delete", "pod", "a", dry]);
    assert_contains(&c, "delete --dry-run=server", &out, "pod \"a\" deleted (server dry run)");
    let out = c.kubectl_ok(&["delete", "configmap", "cm", dry]);
    assert_contains(&c, "delete --dry-run=server", &out, "configmap \"cm\" deleted (server dry run)");
    let out = c.kubectl_ok(&["drain", "node-a", "--force", "--grace-period=0", "--timeout=20s", dry]);
    for needle in ["node/node-a cordoned (server dry run)", "evicting pod default/a (server dry run)", "node/node-a drained (server dry run)"] {
        assert_contains(&c, "drain --dry-run=server", &out, needle);
    }

    // Raw HTTP: what kubectl has no --dry-run for, the body's dryRun, and invalid values.
    let all = json!({"apiVersion": "v1", "kind": "DeleteOptions", "dryRun": ["All"]});
    let marked = expect_json(&c, Method::DELETE, &format!("{pods}/a"), Some(all.clone()), None, 200).await;
    assert!(marked["metadata"]["deletionTimestamp"].is_string(), "a graceful delete answers the marked pod: {marked}");
    assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], 30, "{marked}");
    let gone = expect_json(&c, Method::DELETE, &format!("{pods}/web?dryRun=All"), None, None, 200).await;
    assert_eq!(gone["metadata"]["name"], "web", "an unscheduled pod would go at once: {gone}");
    let precondition = json!({"dryRun": ["All"], "preconditions": {"uid": "not-the-uid"}});
    expect_status(&c, Method::DELETE, &format!("{pods}/a"), precondition.to_string().into_bytes(), 409).await;
    let list = expect_json(&c, Method::DELETE, pods, Some(all.clone()), None, 200).await;
    let mut listed: Vec<&str> = list["items"].as_array().map(|i| i.iter().filter_map(|p| p["metadata"]["name"].as_str()).collect()).unwrap_or_default();
    listed.sort();
    assert_eq!(listed, ["a", "web"], "deletecollection answers what it would delete: {list}");
    let list = expect_json(&c, Method::DELETE, "/api/v1/namespaces/default/configmaps?dryRun=All", None, None, 200).await;
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1), "{list}");
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "web"}, "target": {"kind": "Node", "name": "node-a"}});
    expect_json(&c, Method::POST, &format!("{pods}/web/binding?dryRun=All"), Some(binding), None, 201).await;
    let bound_again = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "a"}, "target": {"kind": "Node", "name": "node-b"}});
    expect_status(&c, Method::POST, &format!("{pods}/a/binding?dryRun=All"), bound_again.to_string().into_bytes(), 409).await;
    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "a", "namespace": "default"}, "deleteOptions": {"dryRun": ["All"]}});
    expect_json(&c, Method::POST, &format!("{pods}/a/eviction"), Some(eviction), None, 201).await;
    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "a", "namespace": "default"}});
    expect_json(&c, Method::POST, &format!("{pods}/a/eviction?dryRun=All"), Some(eviction.clone()), None, 201).await;
    let mut running = get_json(&c, &["get", "pod", "web"]);
    running["status"]["phase"] = json!("Running");
    let status = expect_json(&c, Method::PUT, &format!("{pods}/web/status?dryRun=All"), Some(running), None, 200).await;
    assert_eq!(status["status"]["phase"], "Running", "the answer is the updated status: {status}");
    let patch = json!({"status": {"phase": "Failed"}});
    let status = expect_json(&c, Method::PATCH, &format!("{pods}/web/status?dryRun=All"), Some(patch), Some("application/merge-patch+json"), 200).await;
    assert_eq!(status["status"]["phase"], "Failed", "{status}");
    let finalize = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}, "spec": {"finalizers": []}});
    let ns = expect_json(&c, Method::PUT, "/api/v1/namespaces/team/finalize?dryRun=All", Some(finalize), None, 200).await;
    assert_eq!(ns["spec"]["finalizers"], json!([]), "{ns}");
    let stale = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "resourceVersion": "1"}, "data": {"k": "x"}});
    expect_status(&c, Method::PUT, "/api/v1/namespaces/default/configmaps/cm?dryRun=All", stale.to_string().into_bytes(), 409).await;

    let unsupported = "Unsupported value: []string{\"Foo\"}: supported values: \"All\"";
    let new_cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm3"}});
    let invalid = [
        (Method::POST, "/api/v1/namespaces/default/configmaps?dryRun=Foo".to_string(), new_cm.to_string(), "CreateOptions"),
        (Method::PUT, "/api/v1/namespaces/default/configmaps/cm?dryRun=Foo".to_string(), new_cm.to_string(), "UpdateOptions"),
        (Method::DELETE, format!("{pods}/a"), json!({"dryRun": ["Foo"]}).to_string(), "DeleteOptions"),
        (Method::DELETE, format!("{pods}?dryRun=Foo"), String::new(), "DeleteOptions"),
        (Method::POST, format!("{pods}/a/eviction?dryRun=Foo"), eviction.to_string(), "CreateOptions"),
    ];
    for (method, path, body, kind) in invalid {
        let s = expect_status(&c, method.clone(), &path, body.into_bytes(), 422).await;
        let message = s["message"].as_str().unwrap_or("");
        assert!(message.contains(unsupported) && message.starts_with(&format!("{kind}.meta.k8s.io")), "{method} {path}: {s}");
        assert_eq!(s["details"]["causes"][0]["field"], "dryRun", "{s}");
    }
    let (code, text) = c
        .request(Method::PATCH, &format!("{pods}/web?dryRun=Foo"), Some(b"{}".to_vec()), Some("application/merge-patch+json"))
        .await
        .unwrap_or_else(|e| c.fail(&format!("PATCH ?dryRun=Foo: {e:#}")));
    assert!(code == 422 && text.contains("PatchOptions.meta.k8s.io"), "PATCH ?dryRun=Foo: {code} {text}");

    // Nothing changed, nothing appeared...
    let after: Vec<String> = objects.iter().map(|o| resource_version(&c, o)).collect();
    assert_eq!(after, before, "the resourceVersions of {objects:?}");
    assert_eq!(names(&c, &["get", "pods"]), ["a", "web"]);
    assert_eq!(names(&c, &["get", "configmaps"]), ["cm"]);
    let a = get_json(&c, &["get", "pod", "a"]);
    assert!(a["metadata"]["deletionTimestamp"].is_null(), "{a}");
    let n = get_json(&c, &["get", "node", "node-a"]);
    assert!(n["spec"]["unschedulable"].is_null(), "{n}");
    // ...and no watch saw anything before the real writes that follow.
    c.kubectl_ok(&["label", "pod", "web", "marker=real"]);
    c.kubectl_ok(&["label", "node", "node-a", "marker=real"]);
    c.kubectl_ok(&["label", "configmap", "cm", "marker=real"]);
    c.kubectl_ok(&["label", "namespace", "team", "marker=real"]);
    for w in &mut watches {
        let event = w.next(&c).await;
        assert_eq!(event["type"], "MODIFIED", "{}: {event}", w.url);
        assert_eq!(event["object"]["metadata"]["labels"]["marker"], "real", "{}: the first event is the real write: {event}", w.url);
    }
}

// ---------------------------------------------------------------------------------------------

const DEPLOYMENT_YAML: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: web\n        image: busybox:1.36\n        command: [sleep, \"3600\"]\n";

/// The workload kinds without their controllers: stored with Kubernetes' defaults, printed with
/// kubectl's columns, scaled through the scale subresource, refused as Kubernetes refuses them.
async fn workload_api(run: Run) {
    let c = start(run).await;
    assert_contains(&c, "create -f deployment", &create(&c, "web.yaml", DEPLOYMENT_YAML), "deployment.apps/web created");
    let d = get_json(&c, &["get", "deployment", "web"]);
    assert_eq!(d["spec"]["strategy"], json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}), "{d}");
    assert_eq!((d["spec"]["revisionHistoryLimit"].clone(), d["spec"]["progressDeadlineSeconds"].clone()), (json!(10), json!(600)), "{d}");
    assert_eq!(d["spec"]["template"]["spec"]["restartPolicy"], "Always", "{d}");
    assert_eq!((d["metadata"]["generation"].clone(), d["status"].clone()), (json!(1), json!({})), "{d}");

    // kubectl's columns, from the server's Table.
    let out = c.kubectl_ok(&["get", "deploy"]);
    let header: Vec<&str> = out.lines().next().unwrap_or("").split_whitespace().collect();
    assert_eq!(header, ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"], "{out}");
    let row: Vec<&str> = out.lines().nth(1).unwrap_or("").split_whitespace().collect();
    assert_eq!(row[..4], ["web", "0/3", "0", "0"], "{out}");
    let wide = c.kubectl_ok(&["get", "deploy", "web", "-o", "wide"]);
    for needle in ["CONTAINERS", "IMAGES", "SELECTOR", "busybox:1.36", "app=web"] {
        assert_contains(&c, "get deploy -o wide", &wide, needle);
    }

    // The scale subresource: kubectl scale patches it, or reads it and writes it back with a
    // precondition; a spec change bumps the generation.
    assert_contains(&c, "scale", &c.kubectl_ok(&["scale", "deployment", "web", "--replicas=5"]), "deployment.apps/web scaled");
    let d = get_json(&c, &["get", "deployment", "web"]);
    assert_eq!((d["spec"]["replicas"].clone(), d["metadata"]["generation"].clone()), (json!(5), json!(2)), "{d}");
    c.kubectl_err(&["scale", "deployment", "web", "--current-replicas=4", "--replicas=6"], "Expected replicas to be 4, was 5");
    assert_contains(&c, "scale with a precondition", &c.kubectl_ok(&["scale", "deployment", "web", "--current-replicas=5", "--replicas=0"]), "scaled");
    let scale = get_json(&c, &["get", "deployment", "web", "--subresource=scale"]);
    assert_eq!((scale["kind"].clone(), scale["apiVersion"].clone()), (json!("Scale"), json!("autoscaling/v1")), "{scale}");
    assert_eq!((scale["spec"].clone(), scale["status"]["selector"].clone()), (json!({}), json!("app=web")), "{scale}");
    let (code, body) = c
        .request(Method::PUT, "/apis/apps/v1/namespaces/default/deployments/web/scale", Some(json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web"}, "spec": {"replicas": -1}}).to_string().into_bytes()), None)
        .await
        .unwrap_or_else(|e| c.fail(&format!("PUT scale: {e:#}")));
    assert_eq!(code, 422, "{body}");
    assert_contains(&c, "a negative scale", &body, "spec.replicas: Invalid value: -1: must be greater than or equal to 0");

    // The status is the controller's: an update of the object leaves it, /status changes only it.
    c.kubectl_ok(&["patch", "deployment", "web", "--subresource=status", "--type=merge", "-p", r#"{"status":{"replicas":2,"readyReplicas":1},"spec":{"replicas":9}}"#]);
    let d = get_json(&c, &["get", "deployment", "web"]);
    assert_eq!((d["status"]["readyReplicas"].clone(), d["spec"]["replicas"].clone()), (json!(1), json!(0)), "{d}");

    // What Kubernetes refuses.
    let bad = DEPLOYMENT_YAML.replace("name: web\n", "name: bad\n").replace("labels: {app: web}", "labels: {app: other}");
    let err = c.kubectl_err(&["create", "-f", c.write_file("bad.yaml", &bad).to_str().expect("utf-8")], "is invalid");
    assert_contains(&c, "a selector that misses the template", &err, "The Deployment \"bad\" is invalid: spec.template.metadata.labels: Invalid value:");
    assert_contains(&c, "a selector that misses the template", &err, "`selector` does not match template `labels`");
    let err = c.kubectl_err(&["patch", "deployment", "web", "--type=merge", "-p", r#"{"spec":{"selector":{"matchLabels":{"app":"x"}},"template":{"metadata":{"labels":{"app":"x"}}}}}"#], "is invalid");
    assert_contains(&c, "a changed selector", &err, "field is immutable");

    // Jobs get a generated selector; cron jobs a schedule that must parse; budgets one of two.
    let job = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: pi\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: pi\n        image: busybox:1.36\n        command: [echo, hi]\n";
    create(&c, "job.yaml", job);
    let j = get_json(&c, &["get", "job", "pi"]);
    let uid = j["metadata"]["uid"].as_str().unwrap_or_default().to_string();
    assert_eq!(j["spec"]["selector"], json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}), "{j}");
    assert_eq!(j["spec"]["template"]["metadata"]["labels"]["batch.kubernetes.io/job-name"], "pi", "{j}");
    assert_eq!((j["spec"]["backoffLimit"].clone(), j["spec"]["completions"].clone(), j["spec"]["parallelism"].clone()), (json!(6), json!(1), json!(1)), "{j}");
    let out = c.kubectl_ok(&["get", "jobs"]);
    assert_eq!(out.lines().next().unwrap_or("").split_whitespace().collect::<Vec<_>>(), ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"], "{out}");
    let bad_job = job.replace("name: pi\n", "name: forever\n").replace("restartPolicy: Never", "restartPolicy: Always");
    let err = c.kubectl_err(&["create", "-f", c.write_file("forever.yaml", &bad_job).to_str().expect("utf-8")], "is invalid");
    assert_contains(&c, "a job that restarts always", &err, "spec.template.spec.restartPolicy: Unsupported value: \"Always\"");

    let cron = "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: hello\nspec:\n  schedule: \"*/1 * * * *\"\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: OnFailure\n          containers:\n          - name: hello\n            image: busybox:1.36\n            command: [date]\n";
    create(&c, "cron.yaml", cron);
    let cj = get_json(&c, &["get", "cronjob", "hello"]);
    assert_eq!((cj["spec"]["concurrencyPolicy"].clone(), cj["spec"]["successfulJobsHistoryLimit"].clone()), (json!("Allow"), json!(3)), "{cj}");
    let out = c.kubectl_ok(&["get", "cj"]);
    assert_contains(&c, "get cj", &out, "*/1 * * * *");
    let err = c.kubectl_err(&["create", "-f", c.write_file("never.yaml", &cron.replace("name: hello", "name: never").replace("*/1 * * * *", "61 * * * *")).to_str().expect("utf-8")], "is invalid");
    assert_contains(&c, "a schedule out of range", &err, "spec.schedule");

    let pdb = "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: web\nspec:\n  minAvailable: 2\n  selector:\n    matchLabels: {app: web}\n";
    create(&c, "pdb.yaml", pdb);
    let out = c.kubectl_ok(&["get", "pdb"]);
    assert_eq!(out.lines().next().unwrap_or("").split_whitespace().collect::<Vec<_>>(), ["NAME", "MIN", "AVAILABLE", "MAX", "UNAVAILABLE", "ALLOWED", "DISRUPTIONS", "AGE"], "{out}");
    assert_eq!(out.lines().nth(1).unwrap_or("").split_whitespace().take(4).collect::<Vec<_>>(), ["web", "2", "N/A", "0"], "{out}");
    let err = c.kubectl_err(&["create", "-f", c.write_file("both.yaml", &pdb.replace("name: web", "name: both").replace("  minAvailable: 2\n", "  minAvailable: 2\n  maxUnavailable: 1\n")).to_str().expect("utf-8")], "is invalid");
    assert_contains(&c, "a budget with both", &err, "minAvailable and maxUnavailable cannot be both set");

    // kubectl's generators (protobuf bodies from 1.28 on).
    assert_contains(&c, "create deployment", &c.kubectl_ok(&["create", "deployment", "gen", "--image=busybox:1.36", "--replicas=2", "--port=80", "--", "sleep", "3600"]), "deployment.apps/gen created");
    let d = get_json(&c, &["get", "deployment", "gen"]);
    assert_eq!((d["spec"]["replicas"].clone(), d["spec"]["selector"].clone()), (json!(2), json!({"matchLabels": {"app": "gen"}})), "{d}");
    assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["ports"], json!([{"containerPort": 80, "protocol": "TCP"}]), "{d}");
    assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["command"], json!(["sleep", "3600"]), "{d}");
    assert_contains(&c, "create job", &c.kubectl_ok(&["create", "job", "once", "--image=busybox:1.36", "--", "echo", "hi"]), "job.batch/once created");
    assert_eq!(get_json(&c, &["get", "job", "once"])["spec"]["template"]["spec"]["restartPolicy"], "Never");
    assert_contains(&c, "create cronjob", &c.kubectl_ok(&["create", "cronjob", "tick", "--image=busybox:1.36", "--schedule=*/5 * * * *", "--", "date"]), "cronjob.batch/tick created");
    assert_contains(&c, "create job --from", &c.kubectl_ok(&["create", "job", "tick-now", "--from=cronjob/tick"]), "job.batch/tick-now created");
    let j = get_json(&c, &["get", "job", "tick-now"]);
    assert_eq!(j["metadata"]["ownerReferences"][0]["name"], "tick", "{j}");
    assert_eq!(j["spec"]["template"]["spec"]["containers"][0]["command"], json!(["date"]), "{j}");
    assert_contains(&c, "create pdb", &c.kubectl_ok(&["create", "pdb", "gen", "--selector=app=gen", "--max-unavailable=25%"]), "poddisruptionbudget.policy/gen created");
    assert_eq!(get_json(&c, &["get", "pdb", "gen"])["spec"]["maxUnavailable"], "25%");

    // `kubectl get all` lists the workloads (the `all` category).
    let all = c.kubectl_ok(&["get", "all"]);
    for needle in ["deployment.apps/web", "job.batch/pi", "cronjob.batch/hello"] {
        assert_contains(&c, "get all", &all, needle);
    }

    // A server-side dry run answers the defaulted object and stores nothing.
    let dry = parse_json(&c, "create --dry-run=server", &c.kubectl_ok(&["create", "-f", c.write_file("dry.yaml", &DEPLOYMENT_YAML.replace("name: web\n", "name: dry\n")).to_str().expect("utf-8"), "--dry-run=server", "-o", "json"]));
    assert_eq!(dry["spec"]["progressDeadlineSeconds"], 600, "{dry}");
    c.kubectl_err(&["get", "deployment", "dry"], "NotFound");
}

/// Services without a proxy: the cluster IP and node port pools (what kubectl's generators and
/// `kubectl expose` send, in protobuf), kubectl's columns, what Kubernetes refuses, what a delete
/// gives back, and the API server's own `default/kubernetes` Service.
async fn service_api(run: Run) {
    let c = start(run).await;
    // The API server's own Service, at the first address of the range.
    let svc = eventually(&c, "the default/kubernetes Service", Duration::from_secs(20), || {
        let o = c.kubectl(&["get", "service", "kubernetes", "-o", "json"]);
        o.success.then(|| parse_json(&c, "get service kubernetes", &o.stdout))
    })
    .await;
    assert_eq!((svc["spec"]["clusterIP"].clone(), svc["spec"]["ports"][0]["port"].clone()), (json!("10.96.0.1"), json!(443)), "{svc}");
    assert_eq!(get_json(&c, &["get", "endpointslice", "kubernetes"])["metadata"]["labels"]["kubernetes.io/service-name"], "kubernetes");

    // kubectl expose: the selector is the Deployment's, the cluster IP is allocated.
    create(&c, "web.yaml", DEPLOYMENT_YAML);
    assert_contains(&c, "expose", &c.kubectl_ok(&["expose", "deployment", "web", "--port=80", "--target-port=8080"]), "service/web exposed");
    let web = get_json(&c, &["get", "service", "web"]);
    let ip = web["spec"]["clusterIP"].as_str().unwrap_or_default().to_string();
    let addr: std::net::Ipv4Addr = ip.parse().unwrap_or_else(|_| c.fail(&format!("cluster IP {ip:?}: {web}")));
    assert!(addr.octets()[0] == 10 && (96..112).contains(&addr.octets()[1]) && ip != "10.96.0.1", "{web}");
    assert_eq!(web["spec"]["clusterIPs"], json!([ip]), "{web}");
    assert_eq!((web["spec"]["ipFamilies"].clone(), web["spec"]["ipFamilyPolicy"].clone()), (json!(["IPv4"]), json!("SingleStack")), "{web}");
    assert_eq!(web["spec"]["ports"], json!([{"port": 80, "protocol": "TCP", "targetPort": 8080}]), "{web}");
    assert_eq!((web["spec"]["selector"].clone(), web["spec"]["sessionAffinity"].clone(), web["spec"]["type"].clone()), (json!({"app": "web"}), json!("None"), json!("ClusterIP")), "{web}");

    // kubectl create service, each type.
    c.kubectl_ok(&["create", "service", "nodeport", "np", "--tcp=80:8080", "--node-port=30080"]);
    c.kubectl_ok(&["create", "service", "clusterip", "hl", "--clusterip=None"]);
    c.kubectl_ok(&["create", "service", "externalname", "ext", "--external-name=db.example.com"]);
    c.kubectl_ok(&["create", "service", "loadbalancer", "lb", "--tcp=443:8443"]);
    let out = c.kubectl_ok(&["get", "services", "-o", "wide"]);
    let header: Vec<&str> = out.lines().next().unwrap_or("").split_whitespace().collect();
    assert_eq!(header, ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE", "SELECTOR"], "{out}");
    let row = |name: &str| -> Vec<String> {
        out.lines().find(|l| l.split_whitespace().next() == Some(name)).unwrap_or("").split_whitespace().map(str::to_string).collect()
    };
    assert_eq!(row("np")[1..5], ["NodePort".to_string(), row("np")[2].clone(), "<none>".into(), "80:30080/TCP".into()], "{out}");
    assert_eq!(row("hl")[1..5], ["ClusterIP", "None", "<none>", "<none>"].map(String::from), "{out}");
    assert_eq!(row("ext")[1..5], ["ExternalName", "<none>", "db.example.com", "<none>"].map(String::from), "{out}");
    assert_eq!(row("lb")[3], "<pending>", "{out}");
    assert!(row("lb")[4].starts_with("443:3"), "{out}");
    assert_eq!(row("web")[1..5], ["ClusterIP".to_string(), ip.clone(), "<none>".into(), "80/TCP".into()], "{out}");

    // What the pools refuse, and what a delete gives back.
    let err = c.kubectl_err(&["create", "service", "nodeport", "np2", "--tcp=81:8080", "--node-port=30080"], "is invalid");
    assert_contains(&c, "a node port taken", &err, "spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated");
    let taken = format!("apiVersion: v1\nkind: Service\nmetadata:\n  name: twin\nspec:\n  clusterIP: {ip}\n  ports:\n  - port: 80\n");
    let err = c.kubectl_err(&["create", "-f", c.write_file("twin.yaml", &taken).to_str().expect("utf-8")], "is invalid");
    assert_contains(&c, "a cluster IP taken", &err, &format!("failed to allocate IP {ip}: provided IP is already allocated"));
    let err = c.kubectl_err(&["create", "service", "clusterip", "far", "--tcp=80", "--clusterip=1.2.3.4"], "is invalid");
    assert_contains(&c, "an address outside the range", &err, "the provided IP (1.2.3.4) is not in the valid range. The range of valid IPs is 10.96.0.0/12");
    let err = c.kubectl_err(&["patch", "service", "web", "-p", r#"{"spec":{"clusterIP":"10.96.0.99"}}"#], "is invalid");
    assert_contains(&c, "a changed cluster IP", &err, "may not change once set");
    let err = c.kubectl_err(&["create", "service", "clusterip", "1bad", "--tcp=80"], "is invalid");
    assert_contains(&c, "a name that is no DNS-1035 label", &err, "a DNS-1035 label must consist of lower case alphanumeric characters");
    c.kubectl_ok(&["delete", "service", "np", "web"]);
    c.kubectl_ok(&["create", "service", "nodeport", "np2", "--tcp=81:8080", "--node-port=30080"]);
    c.kubectl_ok(&["create", "-f", c.write_file("twin.yaml", &taken).to_str().expect("utf-8")]);
    assert_eq!(get_json(&c, &["get", "service", "twin"])["spec"]["clusterIP"], json!(ip));

    // An apply that leaves out what the server allocated keeps it; a NodePort turned ClusterIP
    // gives its node port back.
    let np2 = "apiVersion: v1\nkind: Service\nmetadata:\n  name: np2\nspec:\n  type: NodePort\n  ports:\n  - name: 81-8080\n    port: 81\n    targetPort: 8080\n  selector: {app: np2}\n";
    c.kubectl_ok(&["apply", "--server-side", "--force-conflicts", "-f", c.write_file("np2.yaml", np2).to_str().expect("utf-8")]);
    assert_eq!(get_json(&c, &["get", "service", "np2"])["spec"]["ports"][0]["nodePort"], json!(30080));
    c.kubectl_ok(&["patch", "service", "np2", "--type=merge", "-p", r#"{"spec":{"type":"ClusterIP"}}"#]);
    let p = get_json(&c, &["get", "service", "np2"]);
    assert_eq!((p["spec"]["ports"][0].get("nodePort").cloned(), p["spec"].get("externalTrafficPolicy").cloned()), (None, None), "{p}");
    c.kubectl_ok(&["create", "service", "nodeport", "np3", "--tcp=82:8080", "--node-port=30080"]);

    // Endpoints and EndpointSlices are plain resources here (their controllers are the
    // controller manager's); loopback addresses are refused.
    let ep = "apiVersion: v1\nkind: Endpoints\nmetadata:\n  name: manual\nsubsets:\n- addresses: [{ip: 127.0.0.1}]\n  ports: [{port: 80}]\n";
    let err = c.kubectl_err(&["create", "-f", c.write_file("ep.yaml", ep).to_str().expect("utf-8")], "is invalid");
    assert_contains(&c, "a loopback endpoint", &err, "may not be in the loopback range");
    let slice = "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: manual-1\n  labels: {kubernetes.io/service-name: manual}\naddressType: IPv4\nendpoints:\n- addresses: [10.244.0.9]\n  conditions: {ready: true}\nports:\n- port: 80\n";
    create(&c, "slice.yaml", slice);
    let out = c.kubectl_ok(&["get", "endpointslices", "-l", "kubernetes.io/service-name=manual"]);
    let header: Vec<&str> = out.lines().next().unwrap_or("").split_whitespace().collect();
    assert_eq!(header, ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"], "{out}");
    assert_contains(&c, "get endpointslices", &out, "10.244.0.9");
    assert_eq!(get_json(&c, &["get", "endpointslice", "manual-1"])["ports"][0]["protocol"], "TCP");
}
