//! A kube-rs `watcher` + `reflector` on pods against `kubelab apiserver`: its cache must stay
//! equal to what the API server lists, through ordinary changes, a store restart, and a watch
//! window that no longer reaches back far enough (410 Gone → relist).
//!
//! Run twice, like the kubectl suite: `apiserver_watch::kubelab` on a one-member kubelab store
//! and `apiserver_watch::etcd` on three real etcd 3.4 members.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use e2e::Flavor;
use e2e::apiserver::{ApiCluster, ApiOptions};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};

mod apiserver_watch_list {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn kubelab() {
        super::watch_list(e2e::Flavor::Kubelab).await
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn etcd() {
        super::watch_list(e2e::Flavor::Etcd).await
    }
}

mod apiserver_watch_selector {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn kubelab() {
        super::selector_transitions(e2e::Flavor::Kubelab).await
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn etcd() {
        super::selector_transitions(e2e::Flavor::Etcd).await
    }
}

mod apiserver_watch {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn kubelab() {
        super::reflector_converges(e2e::Flavor::Kubelab).await
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn etcd() {
        super::reflector_converges(e2e::Flavor::Etcd).await
    }
}

mod apiserver_compaction {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn kubelab() {
        super::history_is_compacted(e2e::Flavor::Kubelab).await
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn etcd() {
        super::history_is_compacted(e2e::Flavor::Etcd).await
    }
}

/// With `--etcd-compaction-interval 1s` the API server compacts the store's history to the
/// revision it saw one interval earlier, counting compactions in `compact_rev_key`'s version
/// (kube-apiserver's scheme): an old revision of an object is gone from the store, the current
/// one is still read and written.
async fn history_is_compacted(flavor: Flavor) {
    let opts = ApiOptions { extra_args: vec!["--etcd-compaction-interval".into(), "1s".into()], ..ApiOptions::for_flavor(flavor) };
    let c = ApiCluster::start(opts).await.expect("cluster");
    c.kubectl_ok(&["create", "configmap", "history", "--from-literal=v=1"]);
    let mut etcd = e2e::connect(&c.store.client_endpoints(), e2e::RPC_TIMEOUT).await.expect("store client");
    let key = "/registry/configmaps/default/history";
    let first = etcd.get(key, None).await.expect("get").kvs()[0].mod_revision();
    for v in 2..=3 {
        c.kubectl_ok(&["patch", "configmap", "history", "-p", &format!("{{\"data\":{{\"v\":\"{v}\"}}}}")]);
    }
    // The first attempt has nothing to compact (it only notes the revision); the next ones do.
    let deadline = Instant::now() + Duration::from_secs(30);
    let compacted = loop {
        let r = etcd.get(key, Some(etcd_client::GetOptions::new().with_revision(first))).await;
        match r {
            Err(e) if e.to_string().contains("compacted") => break e.to_string(),
            other => assert!(Instant::now() < deadline, "revision {first} of {key} still readable after 30 s: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let counter = etcd.get("compact_rev_key", None).await.expect("get compact_rev_key");
    let version = counter.kvs().first().map(|kv| kv.version()).unwrap_or(0);
    assert!(version >= 2, "compact_rev_key version {version} after a compaction ({compacted})");
    assert_eq!(c.kubectl_ok(&["get", "configmap", "history", "-o", "jsonpath={.data.v}"]), "3");
    c.kubectl_ok(&["patch", "configmap", "history", "-p", "{\"data\":{\"v\":\"4\"}}"]);
    assert_eq!(c.kubectl_ok(&["get", "configmap", "history", "-o", "jsonpath={.data.v}"]), "4");
}

/// How long the reflector gets to catch up after each phase.
const CONVERGE: Duration = Duration::from_secs(30);

fn pod(name: &str, gen_label: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "watched", "gen": gen_label}},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}
    }))
    .expect("a valid Pod")
}

/// name → (resourceVersion, `gen` label).
type View = BTreeMap<String, (String, String)>;

fn view<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> View {
    pods.into_iter()
        .map(|p| {
            let m = &p.metadata;
            let label = m
                .labels
                .as_ref()
                .and_then(|l| l.get("gen").cloned())
                .unwrap_or_default();
            (
                m.name.clone().unwrap_or_default(),
                (m.resource_version.clone().unwrap_or_default(), label),
            )
        })
        .collect()
}

/// What the watcher task saw: how many times it (re)listed, and its errors.
#[derive(Default)]
struct Seen {
    inits: AtomicUsize,
    errors: Mutex<Vec<String>>,
}

impl Seen {
    fn errors(&self) -> Vec<String> {
        self.errors.lock().map(|e| e.clone()).unwrap_or_default()
    }
}

/// Waits until the reflector's store equals a fresh list from the API server and holds
/// exactly the pods named in `expect` (name → `gen` label).
async fn converge(
    c: &ApiCluster,
    phase: &str,
    api: &Api<Pod>,
    reader: &Store<Pod>,
    seen: &Seen,
    expect: &BTreeMap<String, String>,
) {
    let start = Instant::now();
    let mut last;
    loop {
        let listed = tokio::time::timeout(e2e::RPC_TIMEOUT, api.list(&ListParams::default())).await;
        match listed {
            Ok(Ok(list)) => {
                let truth = view(&list.items);
                let cached = view(reader.state().iter().map(|p| p.as_ref()));
                let names: BTreeMap<String, String> = truth
                    .iter()
                    .map(|(k, (_, g))| (k.clone(), g.clone()))
                    .collect();
                if &names != expect {
                    c.fail(&format!(
                        "{phase}: the API server lists {names:?}, the test expected {expect:?}"
                    ));
                }
                if cached == truth {
                    eprintln!(
                        "[e2e] {phase}: reflector converged after {:?}",
                        start.elapsed()
                    );
                    return;
                }
                last = format!("reflector {cached:?}\nAPI server {truth:?}");
            }
            Ok(Err(e)) => last = format!("list: {e}"),
            Err(_) => last = "list timed out".into(),
        }
        if start.elapsed() > CONVERGE {
            c.fail(&format!(
                "{phase}: the reflector did not converge within {CONVERGE:?}:\n{last}\nwatcher (re)lists: {}, watcher errors: {:#?}",
                seen.inits.load(Ordering::SeqCst),
                seen.errors()
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Retries `f` (an API call) for a while: right after a store restart the first requests may fail.
async fn retry<T, F, Fut>(c: &ApiCluster, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let start = Instant::now();
    loop {
        match tokio::time::timeout(e2e::RPC_TIMEOUT, f()).await {
            Ok(Ok(v)) => return v,
            Ok(Err(e)) if start.elapsed() > Duration::from_secs(20) => {
                c.fail(&format!("{what}: {e}"))
            }
            Err(_) if start.elapsed() > Duration::from_secs(20) => {
                c.fail(&format!("{what}: timed out"))
            }
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Opens a raw watch from `rv` and returns its first event.
async fn first_watch_event(c: &ApiCluster, rv: &str) -> Value {
    let url = format!(
        "{}/api/v1/namespaces/default/pods?watch=true&resourceVersion={rv}",
        c.url()
    );
    let fut = async {
        let resp = c.http_streaming().get(&url).send().await?;
        let code = resp.status().as_u16();
        let mut body = resp.bytes_stream();
        let mut buf = Vec::new();
        while let Some(chunk) = body.next().await {
            buf.extend_from_slice(&chunk?);
            if let Some(i) = buf.iter().position(|b| *b == b'\n') {
                buf.truncate(i);
                break;
            }
        }
        anyhow::Ok((code, String::from_utf8_lossy(&buf).into_owned()))
    };
    match tokio::time::timeout(Duration::from_secs(10), fut).await {
        Ok(Ok((200, line))) => serde_json::from_str(&line).unwrap_or_else(|e| {
            c.fail(&format!(
                "GET {url}: the first line is not JSON ({e}): {line}"
            ))
        }),
        Ok(Ok((code, body))) => c.fail(&format!(
            "GET {url}: expected 200 and an ERROR event, got {code}: {body}"
        )),
        Ok(Err(e)) => c.fail(&format!("GET {url}: {e:#}")),
        Err(_) => c.fail(&format!("GET {url}: no event within 10 s")),
    }
}

async fn reflector_converges(flavor: Flavor) {
    let mut c = ApiCluster::start(ApiOptions::for_flavor(flavor))
        .await
        .unwrap_or_else(|e| panic!("starting the API server cluster: {e:#}"));
    let client = c
        .kube_client()
        .unwrap_or_else(|e| c.fail(&format!("kube client: {e:#}")));
    let api: Api<Pod> = Api::namespaced(client, "default");

    let (reader, writer) = reflector::store::<Pod>();
    let seen = Arc::new(Seen::default());
    let task = {
        let seen = seen.clone();
        let stream = watcher(api.clone(), watcher::Config::default())
            .default_backoff()
            .reflect(writer);
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(ev) = stream.next().await {
                match ev {
                    Ok(watcher::Event::Init) => {
                        seen.inits.fetch_add(1, Ordering::SeqCst);
                    }
                    Ok(_) => {}
                    Err(e) => {
                        eprintln!("[e2e] watcher error: {e}");
                        if let Ok(mut v) = seen.errors.lock() {
                            v.push(e.to_string());
                        }
                    }
                }
            }
        })
    };
    if tokio::time::timeout(Duration::from_secs(20), reader.wait_until_ready())
        .await
        .is_err()
    {
        c.fail(&format!(
            "the reflector did not finish its first list within 20 s; watcher errors: {:#?}",
            seen.errors()
        ));
    }

    // Phase 1: creates, updates, deletes.
    let mut expect = BTreeMap::new();
    let pp = PostParams::default();
    let dp = DeleteParams::default();
    let ps = PatchParams::default();
    let mut first_rv = String::new();
    for i in 0..5 {
        let name = format!("p{i}");
        let obj = pod(&name, "1");
        let created = retry(&c, &format!("create {name}"), || api.create(&pp, &obj)).await;
        if i == 0 {
            first_rv = created
                .metadata
                .resource_version
                .clone()
                .unwrap_or_default();
        }
        expect.insert(name, "1".to_string());
    }
    for name in ["p1", "p2"] {
        let patch = Patch::Merge(json!({"metadata": {"labels": {"gen": "2"}}}));
        retry(&c, &format!("patch {name}"), || {
            api.patch(name, &ps, &patch)
        })
        .await;
        expect.insert(name.to_string(), "2".to_string());
    }
    retry(&c, "delete p4", || api.delete("p4", &dp)).await;
    expect.remove("p4");
    converge(
        &c,
        "phase 1 (create/update/delete)",
        &api,
        &reader,
        &seen,
        &expect,
    )
    .await;

    // Phase 2: the store restarts under the API server; changes after it must still arrive.
    c.restart_store()
        .await
        .unwrap_or_else(|e| c.fail(&format!("restarting the store: {e:#}")));
    for name in ["p5", "p6"] {
        let obj = pod(name, "3");
        retry(&c, &format!("create {name}"), || api.create(&pp, &obj)).await;
        expect.insert(name.to_string(), "3".to_string());
    }
    let patch = Patch::Merge(json!({"metadata": {"labels": {"gen": "4"}}}));
    retry(&c, "patch p0", || api.patch("p0", &ps, &patch)).await;
    expect.insert("p0".to_string(), "4".to_string());
    for name in ["p1", "p5"] {
        retry(&c, &format!("delete {name}"), || api.delete(name, &dp)).await;
        expect.remove(name);
    }
    converge(
        &c,
        "phase 2 (after a store restart)",
        &api,
        &reader,
        &seen,
        &expect,
    )
    .await;

    // Phase 3: 410 Gone. With the API server down, delete p2 behind its back and compact the
    // store; the restarted API server's watch window then starts after every version the
    // reflector knows, so the reflector's re-watch gets 410 and must relist to notice p2 is gone.
    let inits_before = seen.inits.load(Ordering::SeqCst);
    c.stop_apiserver();
    {
        let mut etcd = e2e::connect(&c.store.client_endpoints(), e2e::RPC_TIMEOUT)
            .await
            .unwrap_or_else(|e| c.fail(&format!("etcd client: {e:#}")));
        let del = etcd
            .delete("/registry/pods/default/p2", None)
            .await
            .unwrap_or_else(|e| c.fail(&format!("deleting p2 in the store: {e}")));
        if del.deleted() != 1 {
            c.fail(&format!(
                "/registry/pods/default/p2 was not in the store (deleted {})",
                del.deleted()
            ));
        }
        let rev = del.header().map(|h| h.revision()).unwrap_or(0);
        etcd.compact(rev, None)
            .await
            .unwrap_or_else(|e| c.fail(&format!("compacting the store at {rev}: {e}")));
        eprintln!("[e2e] deleted p2 directly in the store and compacted at revision {rev}");
    }
    expect.remove("p2");
    c.start_apiserver()
        .await
        .unwrap_or_else(|e| c.fail(&format!("restarting the API server: {e:#}")));

    // A raw watch from before the window: one ERROR event carrying a 410 Status.
    let ev = first_watch_event(&c, &first_rv).await;
    if ev["type"] != "ERROR" || ev["object"]["kind"] != "Status" || ev["object"]["code"] != 410 {
        c.fail(&format!(
            "watch from resourceVersion {first_rv} (older than the window): expected an ERROR event with a 410 Status, got {ev}"
        ));
    }
    assert_eq!(ev["object"]["reason"], "Expired", "{ev}");

    converge(
        &c,
        "phase 3 (after 410 and relist)",
        &api,
        &reader,
        &seen,
        &expect,
    )
    .await;
    let inits_after = seen.inits.load(Ordering::SeqCst);
    if !seen
        .errors()
        .iter()
        .any(|e| e.contains("Expired") || e.contains("410"))
    {
        c.fail(&format!(
            "the watcher never saw the 410 Expired; its errors: {:#?}",
            seen.errors()
        ));
    }
    if inits_after <= inits_before {
        c.fail(&format!(
            "the watcher converged without relisting ({inits_before} lists before, {inits_after} after); errors: {:#?}",
            seen.errors()
        ));
    }
    // And it keeps following live changes after the relist.
    let obj = pod("p7", "5");
    retry(&c, "create p7", || api.create(&pp, &obj)).await;
    expect.insert("p7".to_string(), "5".to_string());
    converge(
        &c,
        "phase 3 (live after relist)",
        &api,
        &reader,
        &seen,
        &expect,
    )
    .await;
    task.abort();
}

/// WatchList (`sendInitialEvents=true`): the initial ADDED events end with a BOOKMARK annotated
/// `k8s.io/initial-events-end`, and kube-rs's streaming-list watcher fills its store from it.
async fn watch_list(flavor: Flavor) {
    let c = ApiCluster::start(ApiOptions::for_flavor(flavor))
        .await
        .unwrap_or_else(|e| panic!("starting the API server cluster: {e:#}"));
    let client = c
        .kube_client()
        .unwrap_or_else(|e| c.fail(&format!("kube client: {e:#}")));
    let api: Api<Pod> = Api::namespaced(client, "default");
    let pp = PostParams::default();
    let mut expect = BTreeMap::new();
    for name in ["w0", "w1", "w2"] {
        let obj = pod(name, "1");
        retry(&c, &format!("create {name}"), || api.create(&pp, &obj)).await;
        expect.insert(name.to_string(), "1".to_string());
    }

    // Raw: three ADDED, then the bookmark.
    let url = format!(
        "{}/api/v1/namespaces/default/pods?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
        c.url()
    );
    let fut = async {
        let resp = c.http_streaming().get(&url).send().await?;
        anyhow::ensure!(resp.status().as_u16() == 200, "status {}", resp.status());
        let mut body = resp.bytes_stream();
        let mut buf = Vec::new();
        let mut events: Vec<Value> = Vec::new();
        while let Some(chunk) = body.next().await {
            buf.extend_from_slice(&chunk?);
            while let Some(i) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=i).collect();
                let ev: Value = serde_json::from_slice(&line)?;
                let done = ev["type"] == "BOOKMARK";
                events.push(ev);
                if done {
                    return Ok(events);
                }
            }
        }
        anyhow::bail!("the stream ended without a BOOKMARK after {events:?}")
    };
    let events = match tokio::time::timeout(Duration::from_secs(10), fut).await {
        Ok(Ok(ev)) => ev,
        Ok(Err(e)) => c.fail(&format!("GET {url}: {e:#}")),
        Err(_) => c.fail(&format!(
            "GET {url}: no BOOKMARK within 10 s (a WatchList client would hang)"
        )),
    };
    let added: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "ADDED")
        .filter_map(|e| e["object"]["metadata"]["name"].as_str())
        .collect();
    let bookmark = events.last().cloned().unwrap_or(Value::Null);
    if added.len() != 3
        || events.len() != 4
        || bookmark["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"] != "true"
    {
        c.fail(&format!(
            "WatchList: expected 3 ADDED then an initial-events-end BOOKMARK, got {events:#?}"
        ));
    }
    assert_eq!(bookmark["object"]["kind"], "Pod", "{bookmark}");

    // kube-rs with streaming lists.
    let (reader, writer) = reflector::store::<Pod>();
    let seen = Arc::new(Seen::default());
    let stream = watcher(api.clone(), watcher::Config::default().streaming_lists())
        .default_backoff()
        .reflect(writer);
    let task = {
        let seen = seen.clone();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(ev) = stream.next().await {
                if let Err(e) = ev
                    && let Ok(mut v) = seen.errors.lock()
                {
                    v.push(e.to_string());
                }
            }
        })
    };
    if tokio::time::timeout(Duration::from_secs(20), reader.wait_until_ready())
        .await
        .is_err()
    {
        c.fail(&format!(
            "the streaming-list reflector was not ready within 20 s; watcher errors: {:#?}",
            seen.errors()
        ));
    }
    converge(&c, "streaming list", &api, &reader, &seen, &expect).await;
    let obj = pod("w3", "2");
    retry(&c, "create w3", || api.create(&pp, &obj)).await;
    expect.insert("w3".to_string(), "2".to_string());
    let dp = DeleteParams::default();
    retry(&c, "delete w0", || api.delete("w0", &dp)).await;
    expect.remove("w0");
    converge(
        &c,
        "streaming list, live changes",
        &api,
        &reader,
        &seen,
        &expect,
    )
    .await;
    task.abort();
}

/// Reads `n` watch events (one JSON object a line) from `GET url`, within 10 s.
async fn read_events(c: &ApiCluster, resp: reqwest::Response, n: usize) -> Vec<Value> {
    let fut = async {
        let mut body = resp.bytes_stream();
        let mut buf = Vec::new();
        let mut events: Vec<Value> = Vec::new();
        while events.len() < n {
            let Some(chunk) = body.next().await else {
                anyhow::bail!("the stream ended after {events:?}");
            };
            buf.extend_from_slice(&chunk?);
            while let Some(i) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=i).collect();
                events.push(serde_json::from_slice(&line)?);
            }
        }
        Ok(events)
    };
    match tokio::time::timeout(Duration::from_secs(10), fut).await {
        Ok(Ok(ev)) => ev,
        Ok(Err(e)) => c.fail(&format!("reading {n} watch events: {e:#}")),
        Err(_) => c.fail(&format!("reading {n} watch events: timed out after 10 s")),
    }
}

/// A label-selector watch reports an object that stops matching as DELETED — carrying the
/// object as it was (still matching), at the new resourceVersion, as kube-apiserver's cacher
/// does — and one that starts matching as ADDED.
async fn selector_transitions(flavor: Flavor) {
    let c = ApiCluster::start(ApiOptions::for_flavor(flavor))
        .await
        .unwrap_or_else(|e| panic!("starting the API server cluster: {e:#}"));
    let client = c
        .kube_client()
        .unwrap_or_else(|e| c.fail(&format!("kube client: {e:#}")));
    let api: Api<Pod> = Api::namespaced(client, "default");
    let mut obj = pod("sel", "1");
    if let Some(l) = obj.metadata.labels.as_mut() {
        l.insert("app".into(), "web".into());
    }
    let pp = PostParams::default();
    let created = retry(&c, "create sel", || api.create(&pp, &obj)).await;
    let rv = created
        .metadata
        .resource_version
        .clone()
        .unwrap_or_default();
    let url = format!(
        "{}/api/v1/namespaces/default/pods?watch=true&resourceVersion={rv}&labelSelector=app%3Dweb",
        c.url()
    );
    let resp = c
        .http_streaming()
        .get(&url)
        .send()
        .await
        .unwrap_or_else(|e| c.fail(&format!("GET {url}: {e}")));
    assert_eq!(resp.status().as_u16(), 200, "GET {url}");
    let ps = PatchParams::default();
    let to_db = Patch::Merge(json!({"metadata": {"labels": {"app": "db"}}}));
    let moved = retry(&c, "relabel to db", || api.patch("sel", &ps, &to_db)).await;
    let to_web = Patch::Merge(json!({"metadata": {"labels": {"app": "web"}}}));
    let back = retry(&c, "relabel to web", || api.patch("sel", &ps, &to_web)).await;
    let events = read_events(&c, resp, 2).await;
    let summary: Vec<(String, Value, Value)> = events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap_or("").to_string(),
                e["object"]["metadata"]["labels"]["app"].clone(),
                e["object"]["metadata"]["resourceVersion"].clone(),
            )
        })
        .collect();
    let want = vec![
        (
            "DELETED".to_string(),
            json!("web"),
            json!(moved.metadata.resource_version),
        ),
        (
            "ADDED".to_string(),
            json!("web"),
            json!(back.metadata.resource_version),
        ),
    ];
    if summary != want {
        c.fail(&format!(
            "label-selector watch: expected (type, app label, resourceVersion) {want:?}, got {summary:?}\n{events:#?}"
        ));
    }
}
