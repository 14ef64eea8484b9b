//! The EndpointSlice and Endpoints controllers of `kubelab controller-manager`, end to end on a
//! kubelab store + API server. There is no kubelet: the test stands in for one, creating pods
//! already bound to a node and posting their IP and Ready condition through
//! `pods/<name>/status`.
//! - a Service's pods: one EndpointSlice (`web-<suffix>`, owned by the Service, labelled with its
//!   name and the controller's, IPv4, its port resolved from the pods' named container port)
//!   with ready / serving / terminating per pod, and the Endpoints `web` with ready and
//!   not-ready addresses; a pod going not ready, more pods, a terminating pod (in the slice as
//!   terminating, gone from the Endpoints), a pod removed — each updating the same slice in
//!   place; a slice deleted or emptied by hand is put back; pods whose named port resolves to
//!   another number get a slice of their own; a headless Service publishes hostnames and is
//!   labelled headless; a deleted Service takes its Endpoints and (through the garbage
//!   collector) its slices with it.
//! - 105 pods make two slices (100 + 5); a Service without pods keeps one empty slice; a Service
//!   without a selector and an ExternalName Service are left alone — the slice and Endpoints a
//!   user wrote for the former stay as written.

use std::collections::BTreeMap;
use std::time::Duration;

use e2e::apiserver::{ApiCluster, ApiOptions};
use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// How long a controller may take to act on what the test did, on a loaded machine.
const ACT: Duration = Duration::from_secs(20);
const SERVICE_NAME: &str = "kubernetes.io/service-name";
const MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";

/// Creates a pod bound to `n1` labelled `app=<app>`, its container port `http` numbered `port`,
/// then posts it Running with `ip`, Ready or not.
async fn make_pod(pods: &Api<Pod>, name: &str, app: &str, ip: &str, port: i32, ready: bool, extra_spec: Value) {
    let mut spec = json!({
        "nodeName": "n1",
        "containers": [{"name": "c", "image": "busybox", "ports": [{"name": "http", "containerPort": port}]}],
    });
    if let (Some(s), Some(extra)) = (spec.as_object_mut(), extra_spec.as_object()) {
        s.extend(extra.clone());
    }
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": name, "labels": {"app": app}}, "spec": spec})).expect("pod");
    pods.create(&PostParams::default(), &pod).await.expect("create pod");
    post_status(pods, name, ip, ready).await;
}

/// Posts the pod Running with `ip` and its Ready condition, as a kubelet does.
async fn post_status(pods: &Api<Pod>, name: &str, ip: &str, ready: bool) {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let status = if ready { "True" } else { "False" };
    let patch = json!({"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
        "conditions": [{"type": "Ready", "status": status, "lastTransitionTime": now}]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("post pod status");
}

fn service(name: &str, selector: Option<&str>, target_port: Value, extra_spec: Value) -> Service {
    let mut spec = json!({"ports": [{"name": "http", "port": 80, "targetPort": target_port}]});
    if let Some(app) = selector {
        spec["selector"] = json!({"app": app});
    }
    if let (Some(s), Some(extra)) = (spec.as_object_mut(), extra_spec.as_object()) {
        s.extend(extra.clone());
    }
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {"tier": "front"}}, "spec": spec})).expect("service")
}

async fn slices_of(slices: &Api<EndpointSlice>, svc: &str) -> Result<Vec<EndpointSlice>, String> {
    let mut v = slices.list(&ListParams::default().labels(&format!("{SERVICE_NAME}={svc}"))).await.map_err(|e| e.to_string())?.items;
    v.sort_by_key(|s| s.metadata.name.clone());
    Ok(v)
}

/// An endpoint as `<pod>=<address>:<ready><serving><terminating>` (each `T` or `F`).
fn endpoint_line(e: &k8s_openapi::api::discovery::v1::Endpoint) -> String {
    let c = e.conditions.clone().unwrap_or_default();
    let b = |v: Option<bool>| if v == Some(true) { 'T' } else { 'F' };
    let pod = e.target_ref.as_ref().and_then(|r| r.name.clone()).unwrap_or_default();
    format!("{pod}={}:{}{}{}", e.addresses.join(","), b(c.ready), b(c.serving), b(c.terminating))
}

/// Every endpoint of the slices, sorted.
fn endpoint_lines(slices: &[EndpointSlice]) -> Vec<String> {
    let mut v: Vec<String> = slices.iter().flat_map(|s| s.endpoints.iter().flatten().map(endpoint_line)).collect();
    v.sort();
    v
}

/// The Endpoints as (ready IPs, not-ready IPs, ports), each sorted.
fn endpoints_summary(ep: &Endpoints) -> (Vec<String>, Vec<String>, Vec<i32>) {
    let subsets = ep.subsets.clone().unwrap_or_default();
    let mut ready: Vec<String> = subsets.iter().flat_map(|s| s.addresses.iter().flatten().map(|a| a.ip.clone())).collect();
    let mut not_ready: Vec<String> = subsets.iter().flat_map(|s| s.not_ready_addresses.iter().flatten().map(|a| a.ip.clone())).collect();
    let mut ports: Vec<i32> = subsets.iter().flat_map(|s| s.ports.iter().flatten().map(|p| p.port)).collect();
    ready.sort();
    not_ready.sort();
    ports.sort();
    ports.dedup();
    (ready, not_ready, ports)
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Waits until the Service's slices list exactly `want` (see [`endpoint_line`]); the slices.
async fn wait_endpoints(c: &ApiCluster, slices: &Api<EndpointSlice>, svc: &str, want: &[&str]) -> Vec<EndpointSlice> {
    let want = strings(want);
    c.wait_for(&format!("{svc}'s slices list {want:?}"), ACT, || async {
        let got = slices_of(slices, svc).await?;
        if endpoint_lines(&got) == want { Ok(got) } else { Err(format!("{:?}", endpoint_lines(&got))) }
    })
    .await
}

/// Waits until the Endpoints `svc` holds (ready, not ready, ports).
async fn wait_endpoints_object(c: &ApiCluster, endpoints: &Api<Endpoints>, svc: &str, ready: &[&str], not_ready: &[&str], ports: &[i32]) -> Endpoints {
    let want = (strings(ready), strings(not_ready), ports.to_vec());
    c.wait_for(&format!("Endpoints {svc} = {want:?}"), ACT, || async {
        let ep = endpoints.get_opt(svc).await.map_err(|e| e.to_string())?.ok_or("no Endpoints yet")?;
        let got = endpoints_summary(&ep);
        if got == want { Ok(ep) } else { Err(format!("{got:?}")) }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_get_endpointslices_and_endpoints_that_follow_their_pods() {
    let c = ApiCluster::start(ApiOptions { controller_manager: true, ..ApiOptions::default() }).await.expect("start the cluster");
    let client = c.kube_client().expect("client");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), "default");

    // Two Ready pods and one not, then the Service, its targetPort the container port's name.
    make_pod(&pods, "a", "web", "10.1.0.1", 8080, true, json!({})).await;
    make_pod(&pods, "b", "web", "10.1.0.2", 8080, true, json!({})).await;
    make_pod(&pods, "c", "web", "10.1.0.3", 8080, false, json!({})).await;
    let svc = services.create(&PostParams::default(), &service("web", Some("web"), json!("http"), json!({}))).await.expect("create service");
    let svc_uid = svc.metadata.uid.clone().expect("uid");
    let first = wait_endpoints(&c, &slices, "web", &["a=10.1.0.1:TTF", "b=10.1.0.2:TTF", "c=10.1.0.3:FFF"]).await;
    assert_eq!(first.len(), 1, "one slice");
    let slice = &first[0];
    let slice_name = slice.metadata.name.clone().expect("name");
    assert!(slice_name.starts_with("web-") && slice_name.len() > "web-".len(), "generated name: {slice_name}");
    assert_eq!(slice.address_type, "IPv4");
    let labels = slice.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get(MANAGED_BY).map(String::as_str), Some("endpointslice-controller.k8s.io"));
    assert_eq!(labels.get("tier").map(String::as_str), Some("front"), "the Service's labels");
    let owner = &slice.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str(), owner.controller), ("Service", "web", svc_uid.as_str(), Some(true)));
    let port = &slice.ports.as_ref().expect("ports")[0];
    assert_eq!((port.name.as_deref(), port.port, port.protocol.as_deref()), (Some("http"), Some(8080), Some("TCP")));
    let a = slice.endpoints.iter().flatten().find(|e| e.addresses == ["10.1.0.1"]).expect("a's endpoint");
    assert_eq!(a.node_name.as_deref(), Some("n1"));
    let r = a.target_ref.as_ref().expect("targetRef");
    assert_eq!((r.kind.as_deref(), r.namespace.as_deref(), r.name.as_deref()), (Some("Pod"), Some("default"), Some("a")));
    assert!(r.uid.is_some());
    let ep = wait_endpoints_object(&c, &endpoints, "web", &["10.1.0.1", "10.1.0.2"], &["10.1.0.3"], &[8080]).await;
    assert_eq!(ep.metadata.labels.as_ref().and_then(|l| l.get("tier")).map(String::as_str), Some("front"));
    assert!(ep.metadata.annotations.as_ref().is_some_and(|a| a.contains_key("endpoints.kubernetes.io/last-change-trigger-time")), "{:?}", ep.metadata.annotations);
    let addr = ep.subsets.as_ref().and_then(|s| s[0].addresses.as_ref()).map(|a| a[0].clone()).expect("an address");
    assert_eq!((addr.node_name.as_deref(), addr.target_ref.as_ref().and_then(|r| r.name.as_deref())), (Some("n1"), Some("a")));
    let listed = c.kubectl_ok(&["get", "endpointslices", "-l", "kubernetes.io/service-name=web"]);
    assert!(listed.contains(&slice_name) && listed.contains("IPv4"), "{listed}");

    // b goes not ready: the same slice is updated in place, the Endpoints moves its address.
    post_status(&pods, "b", "10.1.0.2", false).await;
    let now = wait_endpoints(&c, &slices, "web", &["a=10.1.0.1:TTF", "b=10.1.0.2:FFF", "c=10.1.0.3:FFF"]).await;
    assert_eq!(now.iter().map(|s| s.metadata.name.clone().unwrap_or_default()).collect::<Vec<_>>(), [slice_name.clone()]);
    wait_endpoints_object(&c, &endpoints, "web", &["10.1.0.1"], &["10.1.0.2", "10.1.0.3"], &[8080]).await;

    // Scaling up: the new pods fill the same slice.
    post_status(&pods, "b", "10.1.0.2", true).await;
    make_pod(&pods, "d", "web", "10.1.0.4", 8080, true, json!({})).await;
    make_pod(&pods, "e", "web", "10.1.0.5", 8080, true, json!({})).await;
    let now = wait_endpoints(&c, &slices, "web", &["a=10.1.0.1:TTF", "b=10.1.0.2:TTF", "c=10.1.0.3:FFF", "d=10.1.0.4:TTF", "e=10.1.0.5:TTF"]).await;
    assert_eq!(now.iter().map(|s| s.metadata.name.clone().unwrap_or_default()).collect::<Vec<_>>(), [slice_name.clone()]);
    wait_endpoints_object(&c, &endpoints, "web", &["10.1.0.1", "10.1.0.2", "10.1.0.4", "10.1.0.5"], &["10.1.0.3"], &[8080]).await;

    // A terminating pod (graceful delete; no kubelet finishes it): in the slice as terminating
    // and serving, not ready; gone from the Endpoints.
    pods.delete("d", &DeleteParams::default()).await.expect("delete d");
    wait_endpoints(&c, &slices, "web", &["a=10.1.0.1:TTF", "b=10.1.0.2:TTF", "c=10.1.0.3:FFF", "d=10.1.0.4:FTT", "e=10.1.0.5:TTF"]).await;
    wait_endpoints_object(&c, &endpoints, "web", &["10.1.0.1", "10.1.0.2", "10.1.0.5"], &["10.1.0.3"], &[8080]).await;
    // Gone for good (and c scaled away): out of the slice.
    for name in ["d", "c"] {
        pods.delete(name, &DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() }).await.expect("force delete");
    }
    let now = wait_endpoints(&c, &slices, "web", &["a=10.1.0.1:TTF", "b=10.1.0.2:TTF", "e=10.1.0.5:TTF"]).await;
    assert_eq!(now.iter().map(|s| s.metadata.name.clone().unwrap_or_default()).collect::<Vec<_>>(), [slice_name.clone()]);
    wait_endpoints_object(&c, &endpoints, "web", &["10.1.0.1", "10.1.0.2", "10.1.0.5"], &[], &[8080]).await;

    // A slice emptied by hand is filled again; one deleted by hand is made again.
    let mut emptied = now[0].clone();
    emptied.endpoints = Some(Vec::new());
    slices.replace(&slice_name, &PostParams::default(), &emptied).await.expect("empty the slice by hand");
    wait_endpoints(&c, &slices, "web", &["a=10.1.0.1:TTF", "b=10.1.0.2:TTF", "e=10.1.0.5:TTF"]).await;
    slices.delete(&slice_name, &DeleteParams::default()).await.expect("delete the slice by hand");
    let back = wait_endpoints(&c, &slices, "web", &["a=10.1.0.1:TTF", "b=10.1.0.2:TTF", "e=10.1.0.5:TTF"]).await;
    assert_eq!(back.len(), 1);
    assert_ne!(back[0].metadata.name.as_deref(), Some(slice_name.as_str()), "a new slice");

    // A pod whose named port is another number: a slice of its own, a subset of its own.
    make_pod(&pods, "f", "web", "10.1.0.6", 9090, true, json!({})).await;
    let two = wait_endpoints(&c, &slices, "web", &["a=10.1.0.1:TTF", "b=10.1.0.2:TTF", "e=10.1.0.5:TTF", "f=10.1.0.6:TTF"]).await;
    let mut by_port: Vec<(i32, usize)> = two.iter().map(|s| (s.ports.as_ref().and_then(|p| p[0].port).unwrap_or(0), s.endpoints.as_ref().map_or(0, Vec::len))).collect();
    by_port.sort();
    assert_eq!(by_port, [(8080, 3), (9090, 1)]);
    let ep = wait_endpoints_object(&c, &endpoints, "web", &["10.1.0.1", "10.1.0.2", "10.1.0.5", "10.1.0.6"], &[], &[8080, 9090]).await;
    assert_eq!(ep.subsets.as_ref().map(Vec::len), Some(2));

    // A headless Service: hostnames of the pods whose subdomain names it, the headless label.
    make_pod(&pods, "h0", "db", "10.1.1.1", 5432, true, json!({"hostname": "h0", "subdomain": "db"})).await;
    services.create(&PostParams::default(), &service("db", Some("db"), json!(5432), json!({"clusterIP": "None"}))).await.expect("create headless service");
    let db = wait_endpoints(&c, &slices, "db", &["h0=10.1.1.1:TTF"]).await;
    assert_eq!(db[0].endpoints.as_ref().unwrap()[0].hostname.as_deref(), Some("h0"));
    assert_eq!(db[0].metadata.labels.as_ref().and_then(|l| l.get("service.kubernetes.io/headless")).map(String::as_str), Some(""));
    let ep = wait_endpoints_object(&c, &endpoints, "db", &["10.1.1.1"], &[], &[5432]).await;
    assert_eq!(ep.subsets.as_ref().and_then(|s| s[0].addresses.as_ref()).and_then(|a| a[0].hostname.as_deref()), Some("h0"));
    assert_eq!(ep.metadata.labels.as_ref().and_then(|l| l.get("service.kubernetes.io/headless")).map(String::as_str), Some(""));

    // The Service deleted: its Endpoints go, and its slices with it (the garbage collector).
    services.delete("web", &DeleteParams::default()).await.expect("delete service");
    c.wait_for("web's Endpoints and slices gone", ACT, || async {
        let ep = endpoints.get_opt("web").await.map_err(|e| e.to_string())?;
        let left = slices_of(&slices, "web").await?;
        if ep.is_none() && left.is_empty() { Ok(()) } else { Err(format!("endpoints {}, {} slices", ep.is_some(), left.len())) }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slices_split_at_100_and_services_the_controllers_do_not_manage_are_left_alone() {
    let c = ApiCluster::start(ApiOptions { controller_manager: true, ..ApiOptions::default() }).await.expect("start the cluster");
    let client = c.kube_client().expect("client");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), "default");

    // 105 pods: a slice of 100 and one of 5; all 105 in the Endpoints.
    services.create(&PostParams::default(), &service("big", Some("big"), json!(8080), json!({}))).await.expect("create service");
    for i in 0..105 {
        make_pod(&pods, &format!("big-{i}"), "big", &format!("10.2.{}.{}", i / 100, i % 100 + 1), 8080, true, json!({})).await;
    }
    c.wait_for("two slices of 100 and 5", ACT, || async {
        let got = slices_of(&slices, "big").await?;
        let mut sizes: Vec<usize> = got.iter().map(|s| s.endpoints.as_ref().map_or(0, Vec::len)).collect();
        sizes.sort();
        if sizes == [5, 100] { Ok(()) } else { Err(format!("{sizes:?}")) }
    })
    .await;
    c.wait_for("105 ready addresses", ACT, || async {
        let ep = endpoints.get_opt("big").await.map_err(|e| e.to_string())?.ok_or("no Endpoints yet")?;
        let n = endpoints_summary(&ep).0.len();
        if n == 105 { Ok(()) } else { Err(format!("{n}")) }
    })
    .await;

    // No pods: one empty slice, and Endpoints without subsets.
    services.create(&PostParams::default(), &service("empty", Some("nothing"), json!(8080), json!({}))).await.expect("create service");
    let placeholder = c.wait_for("one empty slice", ACT, || async {
        let got = slices_of(&slices, "empty").await?;
        if got.len() == 1 && got[0].endpoints.as_ref().is_none_or(Vec::is_empty) { Ok(got) } else { Err(format!("{} slices: {:?}", got.len(), endpoint_lines(&got))) }
    })
    .await;
    wait_endpoints_object(&c, &endpoints, "empty", &[], &[], &[]).await;
    c.hold_for("the placeholder stays as it is", Duration::from_secs(2), || async {
        let got = slices_of(&slices, "empty").await?;
        if got.len() == 1 && got[0].metadata.resource_version == placeholder[0].metadata.resource_version { Ok(()) } else { Err(format!("{got:?}")) }
    })
    .await;

    // No selector: the user's own slice and Endpoints stay as written. ExternalName: nothing.
    make_pod(&pods, "m", "manual", "10.3.0.1", 8080, true, json!({})).await;
    services.create(&PostParams::default(), &service("manual", None, json!(8080), json!({}))).await.expect("create selectorless service");
    let user_slice: EndpointSlice = serde_json::from_value(json!({
        "metadata": {"name": "manual-1", "labels": {SERVICE_NAME: "manual"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": [{"addresses": ["192.0.2.10"]}],
    }))
    .expect("slice");
    slices.create(&PostParams::default(), &user_slice).await.expect("create the user's slice");
    let user_endpoints: Endpoints = serde_json::from_value(json!({
        "metadata": {"name": "manual"},
        "subsets": [{"addresses": [{"ip": "192.0.2.10"}], "ports": [{"name": "http", "port": 8080}]}],
    }))
    .expect("endpoints");
    endpoints.create(&PostParams::default(), &user_endpoints).await.expect("create the user's Endpoints");
    let mut ext = service("ext", Some("manual"), json!(8080), json!({"type": "ExternalName", "externalName": "db.example.test"}));
    ext.spec.as_mut().expect("spec").ports = None;
    services.create(&PostParams::default(), &ext).await.expect("create ExternalName service");
    c.hold_for("unmanaged Services' endpoints as their users left them", Duration::from_secs(3), || async {
        let manual = slices_of(&slices, "manual").await?;
        let ep = endpoints.get_opt("manual").await.map_err(|e| e.to_string())?.ok_or("the user's Endpoints went")?;
        let ext_slices = slices_of(&slices, "ext").await?;
        let ext_ep = endpoints.get_opt("ext").await.map_err(|e| e.to_string())?;
        let manual_lines: Vec<BTreeMap<&str, String>> =
            manual.iter().map(|s| BTreeMap::from([("name", s.metadata.name.clone().unwrap_or_default()), ("eps", format!("{:?}", endpoint_lines(std::slice::from_ref(s))))])).collect();
        let ok = manual.len() == 1 && endpoint_lines(&manual) == ["=192.0.2.10:FFF"] && endpoints_summary(&ep).0 == ["192.0.2.10"] && ext_slices.is_empty() && ext_ep.is_none();
        if ok { Ok(()) } else { Err(format!("manual {manual_lines:?}, Endpoints {:?}, ext {} slices, Endpoints {}", endpoints_summary(&ep), ext_slices.len(), ext_ep.is_some())) }
    })
    .await;
}
