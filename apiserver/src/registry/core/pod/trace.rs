//! Mirrors no Kubernetes file (Kubernetes leaves this to an OpenTelemetry collector): kubelab's
//! `GET /debug/trace/namespaces/<ns>/pods/<name>[?uid=<uid>]`, one pod's journey through the
//! cluster, for `kubelab trace`. The pod's, so it lives with the pod's other subresource-like code
//! (server.rs routes to it). Built the way pods/log is: the API server answers with its own
//! steps, asks the store what it did for the revisions of the pod's writes (each member's
//! `kubelab.debugpb.Trace` service on its client port; a real etcd has none, and the trace goes
//! without), and fetches the rest from the scheduler that bound the pod (the address it put on
//! the binding) and from the node agent that runs it (the node's address), each at
//! `/debug/trace/pods/<uid>`.

use actix_web::{HttpRequest, HttpResponse, web};
use std::time::Duration;

use chrono::DateTime;
use podtrace::Step;
use proto::debugpb::RevisionsRequest;
use proto::debugpb::trace_client::TraceClient;
use podtrace::render::Timeline;
use api::core::v1::well_known::MIRROR_POD_ANNOTATION_KEY;
use serde_json::Value;

use super::strategy::PODS;
use crate::registry::generic::rest::Registries;
use crate::registry::generic::strategy::ResourceInfo;
use crate::error::{Error, Result};
use crate::registry::core::node::kubelet_client::node_agent_url;
use crate::registry::core::node::strategy::NODES;

/// The annotation a scheduler puts on its bindings (the registry copies a binding's
/// annotations onto the pod, as Kubernetes' BindingREST does): where its steps can be fetched.
pub const SCHEDULER_ENDPOINT_ANNOTATION: &str = "kubelab.io/scheduler-debug-endpoint";

/// The components whose steps the API server's own recorder answers for.
pub const OWN_COMPONENTS: &[&str] = &["apiserver", "store"];

/// `GET /debug/trace/namespaces/<namespace>/pods/<name>`: what the API server, the store members,
/// the scheduler and the node agent recorded of the pod.
pub async fn serve(req: &HttpRequest, registries: &Registries, http: &reqwest::Client, namespace: &str, name: &str) -> HttpResponse {
    let uid = uid_param(req);
    respond(gather(registries, http, namespace, name, uid).await)
}

/// The traced object and its UID; an object that is gone, by the `?uid=` given (None then),
/// else 404.
pub(crate) async fn traced_object(registries: &Registries, info: &ResourceInfo, namespace: &str, name: &str, uid: Option<String>) -> Result<(Option<Value>, String)> {
    match (registries.of(info).get(Some(namespace), name).await, uid) {
        (Ok(o), _) => {
            let uid = o.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default().to_string();
            Ok((Some(o), uid))
        }
        (Err(Error::NotFound { .. }), Some(uid)) => Ok((None, uid)),
        (Err(e), _) => Err(e),
    }
}

/// The `?uid=` of a trace request: a deleted object is traced by it.
pub(crate) fn uid_param(req: &HttpRequest) -> Option<String> {
    web::Query::<std::collections::HashMap<String, String>>::from_query(req.query_string()).ok().and_then(|q| q.get("uid").cloned())
}

/// A timeline as JSON, or the error as a Status.
pub(crate) fn respond(t: Result<Timeline>) -> HttpResponse {
    match t {
        Ok(t) => HttpResponse::Ok().content_type("application/json").body(t.json()),
        Err(e) => HttpResponse::build(actix_web::http::StatusCode::from_u16(e.code()).unwrap_or(actix_web::http::StatusCode::INTERNAL_SERVER_ERROR))
            .content_type("application/json")
            .body(e.to_status().to_string()),
    }
}

async fn gather(registries: &Registries, http: &reqwest::Client, namespace: &str, name: &str, uid: Option<String>) -> Result<Timeline> {
    let pods = registries.of(&PODS);
    // A pod that is gone can still be traced by its UID: only this process's steps remain
    // reachable then (its node and scheduler are no longer known).
    let (pod, uid) = traced_object(registries, &PODS, namespace, name, uid).await?;
    let mut steps = podtrace::recorder().steps(&uid, OWN_COMPONENTS);
    let mut warnings = Vec::new();
    let (store, store_warnings) = store_steps(pods.storage.endpoints(), pods.storage.tls(), &steps).await;
    steps.extend(store);
    warnings.extend(store_warnings);
    if let Some(pod) = &pod {
        if let Some(ep) = pod.pointer("/metadata/annotations").and_then(|a| a.get(SCHEDULER_ENDPOINT_ANNOTATION)).and_then(Value::as_str) {
            match fetch(http, ep, &format!("pods/{uid}")).await {
                Ok(s) => steps.extend(s),
                Err(e) => warnings.push(format!("scheduler at {ep}: {e}")),
            }
        }
        // A mirror pod's steps on the node are those of the static pod it mirrors, whose UID the
        // mirror annotation carries.
        let agent_uid = pod
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(MIRROR_POD_ANNOTATION_KEY))
            .and_then(Value::as_str)
            .unwrap_or(&uid)
            .to_string();
        if agent_uid != uid {
            steps.extend(podtrace::recorder().steps(&agent_uid, OWN_COMPONENTS));
        }
        let node_name = pod.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or_default();
        if !node_name.is_empty() {
            let base = match registries.of(&NODES).get(None, node_name).await {
                Ok(node) => node_agent_url(&node),
                Err(e) => {
                    warnings.push(format!("node {node_name}: {e}"));
                    None
                }
            };
            if let Some(base) = base {
                match fetch(http, &base, &format!("pods/{agent_uid}")).await {
                    Ok(s) => steps.extend(s.into_iter().map(|s| Step { node: Some(node_name.to_string()), ..s })),
                    Err(e) => warnings.push(format!("node agent of {node_name} at {base}: {e}")),
                }
            }
        }
    }
    let mut t = Timeline::new(namespace, name, &uid, steps);
    t.warnings = warnings;
    Ok(t)
}

/// A component's steps at `<base>/debug/trace/<what>` (`pods/<uid>`, `services/<uid>`).
pub(crate) async fn fetch(http: &reqwest::Client, base: &str, what: &str) -> std::result::Result<Vec<Step>, String> {
    let url = format!("{}/debug/trace/{what}", base.trim_end_matches('/'));
    let resp = http.get(&url).send().await.map_err(|e| format!("not answering: {e}"))?;
    if !resp.status().is_success() {
        return Err(format!("{} from {url}", resp.status()));
    }
    resp.json::<Vec<Step>>().await.map_err(|e| format!("a reply that is not a list of steps: {e}"))
}

/// How long the store's members get to answer for their revisions.
const STORE_TIMEOUT: Duration = Duration::from_secs(2);

/// What each store member did for the revisions of the pod's store writes (the `store write`
/// steps carry the key and the revision the write got). Members that do not have the debug
/// service (a real etcd) are skipped silently; members that do not answer are warned about.
pub(crate) async fn store_steps(endpoints: &[String], tls: Option<&etcd_client::TlsOptions>, steps: &[Step]) -> (Vec<Step>, Vec<String>) {
    let writes: Vec<(i64, &str)> = steps
        .iter()
        .filter(|s| s.component == "apiserver" && s.name == "store write" && s.error.is_none())
        .filter_map(|s| Some((s.fields.get("revision")?.parse().ok()?, s.fields.get("key").map_or("", String::as_str))))
        .filter(|(rev, _)| *rev > 0)
        .collect();
    if writes.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let asked = RevisionsRequest { revisions: writes.iter().map(|(r, _)| *r).collect() };
    let answers = futures::future::join_all(endpoints.iter().map(|ep| {
        let asked = asked.clone();
        async move { (ep, tokio::time::timeout(STORE_TIMEOUT, ask_member(ep, tls, asked)).await) }
    }))
    .await;
    let (mut out, mut warnings) = (Vec::new(), Vec::new());
    for (ep, answer) in answers {
        let reply = match answer {
            Ok(Ok(r)) => r,
            Ok(Err(s)) if s.code() == tonic::Code::Unimplemented => continue,
            Ok(Err(s)) => {
                warnings.push(format!("store member at {ep}: {}", s.message()));
                continue;
            }
            Err(_) => {
                warnings.push(format!("store member at {ep}: no answer within {STORE_TIMEOUT:?}"));
                continue;
            }
        };
        for rs in reply.steps {
            // A revision the member recorded for another key is not this pod's write (a write
            // that lost its compare reports the current revision, someone else's).
            let key = rs.fields.get("key").map_or("", String::as_str);
            if !writes.iter().any(|(rev, k)| *rev == rs.revision && (k.is_empty() || *k == key)) {
                continue;
            }
            let mut step = Step {
                component: "store".into(),
                name: rs.name.into(),
                start: DateTime::from_timestamp_nanos(rs.start_unix_nanos),
                end: DateTime::from_timestamp_nanos(rs.end_unix_nanos),
                fields: rs.fields.into_iter().map(|(k, v)| (k.into(), v)).collect(),
                error: None,
                node: None,
            }
            .with_field("revision", rs.revision);
            step.fields.entry("member".into()).or_insert_with(|| reply.member.clone());
            out.push(step);
        }
    }
    (out, warnings)
}

/// One member's answer. `--etcd-servers` may name a member without a scheme, as etcdctl allows.
async fn ask_member(endpoint: &str, tls: Option<&etcd_client::TlsOptions>, asked: RevisionsRequest) -> std::result::Result<proto::debugpb::RevisionsResponse, tonic::Status> {
    let url = if endpoint.contains("://") { endpoint.to_string() } else { format!("http://{endpoint}") };
    let mut channel = tonic::transport::Endpoint::from_shared(url.clone()).map_err(|e| tonic::Status::invalid_argument(e.to_string()))?;
    // An https:// member is asked with the API server's etcd client certificate.
    if let (true, Some(tls)) = (url.starts_with("https://"), tls) {
        channel = channel.tls_config(tls.clone()).map_err(|e| tonic::Status::invalid_argument(e.to_string()))?;
    }
    let channel = channel
        .connect_timeout(STORE_TIMEOUT)
        .connect()
        .await
        .map_err(|e| tonic::Status::unavailable(format!("not answering: {e}")))?;
    Ok(TraceClient::new(channel).revisions(asked).await?.into_inner())
}
