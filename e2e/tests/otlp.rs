//! `--otlp-endpoint` end to end: the store, API server, scheduler and a node agent (on a private
//! containerd) export to an OTLP/HTTP receiver inside this test, which decodes what arrives as
//! a collector would (`ExportTraceServiceRequest` protobuf on POST /v1/traces). A pod created
//! with kubectl carries its create request's trace context in an annotation, and the
//! scheduler's and the node agent's spans for it join that trace, each under its component's
//! service name. A second API server started with a batch delay of ten minutes shows that the
//! spans still queued go out when a component stops on SIGTERM.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use e2e::apiserver::{ApiCluster, ApiOptions};
use e2e::nodeagent::{NodeAgent, NodeAgentOptions};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message as _;

const NODE: &str = "node-otlp";
const ANNOTATION: &str = "kubelab.io/trace-context";

/// One span as the receiver got it.
#[derive(Clone, Debug)]
struct Span {
    service: String,
    name: String,
    trace_id: String,
    span_id: String,
    /// Empty for a root span.
    parent_id: String,
    attributes: BTreeMap<String, String>,
}

impl Span {
    fn attr(&self, key: &str) -> &str {
        self.attributes.get(key).map(String::as_str).unwrap_or("")
    }
}

#[derive(Clone, Default)]
struct Received {
    spans: Arc<Mutex<Vec<Span>>>,
    /// Requests that were not OTLP/HTTP protobuf.
    refused: Arc<Mutex<Vec<String>>>,
}

impl Received {
    fn spans(&self) -> Vec<Span> {
        self.spans.lock().expect("receiver lock").clone()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn text(v: Option<&AnyValue>) -> String {
    match v.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn attributes(kvs: &[KeyValue]) -> BTreeMap<String, String> {
    kvs.iter().map(|kv| (kv.key.clone(), text(kv.value.as_ref()))).collect()
}

/// POST /v1/traces, as an OTLP/HTTP collector serves it.
async fn receive(State(r): State<Received>, headers: HeaderMap, body: axum::body::Bytes) -> StatusCode {
    let content_type = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    if content_type != "application/x-protobuf" {
        r.refused.lock().expect("receiver lock").push(format!("content-type {content_type:?}"));
        return StatusCode::UNSUPPORTED_MEDIA_TYPE;
    }
    let req = match ExportTraceServiceRequest::decode(body) {
        Ok(req) => req,
        Err(e) => {
            r.refused.lock().expect("receiver lock").push(format!("undecodable: {e}"));
            return StatusCode::BAD_REQUEST;
        }
    };
    let mut spans = r.spans.lock().expect("receiver lock");
    for rs in req.resource_spans {
        let resource = rs.resource.map(|r| attributes(&r.attributes)).unwrap_or_default();
        let service = resource.get("service.name").cloned().unwrap_or_default();
        for ss in rs.scope_spans {
            for s in ss.spans {
                spans.push(Span {
                    service: service.clone(),
                    name: s.name,
                    trace_id: hex(&s.trace_id),
                    span_id: hex(&s.span_id),
                    parent_id: hex(&s.parent_span_id),
                    attributes: attributes(&s.attributes),
                });
            }
        }
    }
    StatusCode::OK
}

/// The receiver on a free loopback port; its base URL is what `--otlp-endpoint` takes.
async fn start_receiver() -> (Received, String) {
    let received = Received::default();
    let app = axum::Router::new().route("/v1/traces", axum::routing::post(receive)).with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the receiver");
    let addr = listener.local_addr().expect("receiver address");
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            eprintln!("[otlp receiver] {e}");
        }
    });
    (received, format!("http://{addr}"))
}

/// Waits until `pick` finds what it wants among the spans received so far.
async fn until<T>(received: &Received, what: &str, mut pick: impl FnMut(&[Span]) -> Option<T>) -> T {
    for _ in 0..240 {
        if let Some(t) = pick(&received.spans()) {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let got: Vec<String> = received.spans().iter().map(|s| format!("{} {} {} pod_uid={}", s.service, s.name, s.trace_id, s.attr("pod_uid"))).collect();
    panic!("no {what} within 60 s; received:\n{}\nrefused: {:?}", got.join("\n"), received.refused.lock().expect("receiver lock"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pods_spans_reach_an_otlp_receiver_as_one_trace() {
    if let Err(e) = e2e::containerd::prerequisites() {
        panic!("the OTLP test needs: {e}");
    }
    let (received, endpoint) = start_receiver().await;
    let otlp = vec!["--otlp-endpoint".to_string(), endpoint.clone()];
    let mut api = ApiCluster::start(ApiOptions { extra_args: otlp.clone(), store_args: otlp.clone(), ..ApiOptions::default() }).await.expect("store + API server");
    api.start_scheduler(&["--otlp-endpoint", &endpoint]).expect("scheduler");
    let agent = NodeAgent::start(api.root(), NodeAgentOptions { master: Some(api.url()), node_name: NODE, pod_cidr_octet: 57, extra: otlp.clone() })
        .await
        .expect("node agent");
    api.wait_node_ready(NODE).await;

    api.kubectl_ok(&["run", "traced", "--image=docker.io/library/busybox:1.36", "--restart=Never", "--", "sleep", "3600"]);
    api.kubectl_ok(&["wait", "--for=condition=Ready", "pod/traced", "--timeout=60s"]);
    let (code, body) = api.get("/api/v1/namespaces/default/pods/traced").await.expect("GET the pod");
    assert_eq!(code, 200, "{body}");
    let pod: serde_json::Value = serde_json::from_str(&body).expect("pod JSON");
    let uid = pod["metadata"]["uid"].as_str().expect("the pod's uid").to_string();

    // 1. The pod carries its create request's W3C trace context.
    let traceparent = pod["metadata"]["annotations"][ANNOTATION].as_str().unwrap_or_else(|| panic!("no {ANNOTATION} annotation: {pod}")).to_string();
    let parts: Vec<&str> = traceparent.split('-').collect();
    assert!(parts.len() == 4 && parts[0] == "00" && parts[1].len() == 32 && parts[2].len() == 16, "not a traceparent: {traceparent}");
    let (trace_id, create_span) = (parts[1].to_string(), parts[2].to_string());

    // 2. That span is the API server's create request, under the API server's service name,
    // with its steps (decode, admission, store write) inside it.
    let create = until(&received, "the API server's create request", |spans| spans.iter().find(|s| s.span_id == create_span && s.trace_id == trace_id).cloned()).await;
    assert_eq!(
        (create.service.as_str(), create.name.as_str(), create.attr("verb"), create.attr("resource"), create.attr("pod_uid"), create.parent_id.as_str()),
        ("apiserver", "request", "POST", "pods", uid.as_str(), ""),
        "{create:?}"
    );
    let write = until(&received, "the create request's store write", |spans| spans.iter().find(|s| s.name == "store write" && s.parent_id == create.span_id).cloned()).await;
    assert_eq!((write.trace_id.as_str(), write.attr("pod_uid")), (trace_id.as_str(), uid.as_str()), "{write:?}");

    // 3. The scheduler's cycle and binding for the pod continue the create request's trace.
    let schedule = until(&received, "scheduler schedule_one span", |spans| {
        spans.iter().find(|s| s.service == "kube-scheduler" && s.name == "schedule_one" && s.attr("pod_uid") == uid).cloned()
    })
    .await;
    assert_eq!(schedule.trace_id, trace_id, "schedule_one in another trace: {schedule:?}");
    assert_eq!(schedule.parent_id, create_span, "schedule_one's parent is the create request: {schedule:?}");
    assert_eq!(schedule.attr("node"), NODE);
    let bind = until(&received, "scheduler bind span", |spans| spans.iter().find(|s| s.service == "kube-scheduler" && s.name == "bind" && s.attr("pod_uid") == uid).cloned()).await;
    assert_eq!(bind.trace_id, trace_id, "{bind:?}");

    // 4. The node agent's sync, its steps and the CRI calls inside them, in the same trace.
    let sandbox_call = until(&received, "kubelet's RunPodSandbox CRI span", |spans| {
        spans.iter().find(|s| s.service == "kubelet" && s.name == "cri" && s.attr("step") == "RunPodSandbox" && s.trace_id == trace_id).cloned()
    })
    .await;
    let spans = received.spans();
    let by_id = |id: &str| spans.iter().find(|s| s.span_id == id).cloned();
    let step5 = by_id(&sandbox_call.parent_id).unwrap_or_else(|| panic!("the CRI call's parent was not exported: {sandbox_call:?}"));
    assert_eq!((step5.service.as_str(), step5.name.as_str(), step5.attr("pod_uid")), ("kubelet", "step5_run_pod_sandbox", uid.as_str()));
    assert!(step5.attr("pod_ip").starts_with("10.244.57."), "{step5:?}");
    let sync = by_id(&step5.parent_id).unwrap_or_else(|| panic!("step 5's parent was not exported: {step5:?}"));
    assert_eq!((sync.name.as_str(), sync.trace_id.as_str(), sync.parent_id.as_str()), ("sync_pod", trace_id.as_str(), create_span.as_str()), "{sync:?}");

    // 5. Only pod spans: no CRI call outside a pod (PLEG's relist runs every second); and every
    // span under one of the components' service names.
    let spans = received.spans();
    let stray: Vec<&Span> = spans.iter().filter(|s| s.name == "cri" && s.parent_id.is_empty()).collect();
    assert!(stray.is_empty(), "CRI calls outside every pod were exported: {stray:?}");
    let services: std::collections::BTreeSet<&str> = spans.iter().map(|s| s.service.as_str()).collect();
    assert!(services.iter().all(|s| ["apiserver", "kube-scheduler", "kubelet", "etcd"].contains(s)), "{services:?}");
    assert!(received.refused.lock().expect("receiver lock").is_empty(), "{:?}", received.refused.lock().expect("receiver lock"));

    // 6. The last spans go out when a component stops: an API server whose batches would wait
    // ten minutes creates a pod and is stopped at once; its create request still arrives.
    let port = e2e::ports::reserve().expect("a port").port;
    let args: Vec<String> = [
        "apiserver",
        "--etcd-servers",
        &api.store.client_endpoints().join(","),
        "--insecure-port",
        &port.to_string(),
        "--secure-port",
        "0",
        "--otlp-endpoint",
        &endpoint,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let env = [("NO_COLOR".to_string(), "1".to_string()), ("OTEL_BSP_SCHEDULE_DELAY".to_string(), "600000".to_string())];
    let bin = e2e::kubelab_bin().expect("kubelab binary");
    let mut second = e2e::process::Process::spawn("apiserver-2", &bin, &args, &api.root().join("apiserver-2"), &env).expect("second API server");
    let url = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let mut ready = false;
    for _ in 0..200 {
        if http.get(format!("{url}/readyz")).send().await.is_ok_and(|r| r.status().is_success()) {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ready, "the second API server never became ready:\n{}", second.log_tail(30));
    let late = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "late"},
        "spec": {"containers": [{"name": "c", "image": "docker.io/library/busybox:1.36", "command": ["sleep", "3600"]}]}
    });
    let resp = http.post(format!("{url}/api/v1/namespaces/default/pods")).json(&late).send().await.expect("POST the pod");
    assert_eq!(resp.status().as_u16(), 201);
    let late: serde_json::Value = resp.json().await.expect("the created pod");
    let late_uid = late["metadata"]["uid"].as_str().expect("uid").to_string();
    let late_parent = late["metadata"]["annotations"][ANNOTATION].as_str().unwrap_or_else(|| panic!("no {ANNOTATION}: {late}")).to_string();
    let status = second.terminate();
    assert!(status.is_some_and(|s| s.success()), "the second API server did not stop cleanly ({status:?}):\n{}", second.log_tail(30));
    let spans = received.spans();
    assert!(
        spans.iter().any(|s| s.service == "apiserver" && s.name == "request" && s.attr("pod_uid") == late_uid && late_parent.contains(&s.span_id)),
        "the stopped API server's last create request was never sent:\n{}",
        second.log_tail(30)
    );
    drop(agent);
}
