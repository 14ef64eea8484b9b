//! `kubelab trace pod/<name>`: a pod's journey from `kubectl apply` to Running, as one timeline
//! of the steps every component took, with their real timings. The API server gathers the steps
//! (its own, the scheduler's and the node agent's) at `/debug/trace/namespaces/<ns>/pods/<name>`;
//! this command shows them as a table, a mermaid sequence diagram or JSON, or follows the next pod
//! created live. For a pod a controller made, it follows the controller ownerReferences up
//! (Pod → ReplicaSet → Deployment) and shows each link: when it was made, by which client, and
//! the owner's event saying why ([`owner_chain`]).
//!
//! `kubelab trace svc/<name>`: a Service's journey the same way, from
//! `/debug/trace/namespaces/<ns>/services/<name>`: the writes of the Service and of its
//! EndpointSlices (the EndpointSlice controller's), the watch events that carried them to each
//! node's proxy, and each proxy's sync that wrote the Service's rules.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::Args;
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta};
use kube::api::{Api, DynamicObject, ListParams, WatchEvent, WatchParams};
use kube::core::GroupVersionKind;
use podtrace::Step;
use podtrace::render::{Hop, Timeline};

#[derive(Args)]
pub struct TraceArgs {
    /// The pod (`pod/<name>`, `pods/<name>` or just `<name>`) or the Service (`svc/<name>`,
    /// `service/<name>`). Not needed with --follow.
    pub pod: Option<String>,
    /// The object's namespace.
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
    /// Print a mermaid sequenceDiagram (paste it into any Markdown viewer that renders mermaid).
    #[arg(long, conflicts_with = "json")]
    pub mermaid: bool,
    /// Print the timeline as JSON.
    #[arg(long)]
    pub json: bool,
    /// Wait for the next pod created in the namespace and print its steps as they happen.
    #[arg(long, conflicts_with_all = ["mermaid", "json"])]
    pub follow: bool,
    /// Trace a pod or Service that is gone by its UID (only the API server's own steps remain then).
    #[arg(long)]
    pub uid: Option<String>,
    /// The kubeconfig to reach the API server ($KUBECONFIG, else ~/.kube/config).
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// The API server's URL, instead of a kubeconfig.
    #[arg(long, short = 's', alias = "master")]
    pub server: Option<String>,
}

pub async fn run(args: TraceArgs) -> anyhow::Result<()> {
    let kubeconfig = args.kubeconfig.clone().or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".kube/config")));
    let conn = client::Connection::from_flags(args.server.clone(), kubeconfig).context("reaching the API server")?;
    let kube = client::client_as(&conn, "kubelab-trace").await.context("reaching the API server")?;
    if args.follow {
        return follow(&kube, &args.namespace).await;
    }
    let Some(target) = &args.pod else { bail!("which pod or Service? kubelab trace pod/<name> or svc/<name> [-n namespace], or --follow") };
    let (resource, name) = target_of(target)?;
    let mut timeline = fetch(&kube, &args.namespace, resource, name, args.uid.as_deref()).await?;
    if args.uid.is_none() && resource == "pods" {
        match owner_chain(&kube, &args.namespace, name).await {
            Ok(chain) => timeline.owners = chain,
            Err(e) => timeline.warnings.push(format!("following the pod's owners: {e:#}")),
        }
    }
    let out = if args.json {
        timeline.json()
    } else if args.mermaid {
        timeline.mermaid()
    } else {
        timeline.table()
    };
    print!("{out}");
    if !out.ends_with('\n') {
        println!();
    }
    Ok(())
}

/// The resource (`pods` or `services`) and name: `pod/x`, `pods/x`, `po/x` or `x`; `svc/x`,
/// `service/x` or `services/x`. Another resource is an error, not a silent guess.
fn target_of(arg: &str) -> anyhow::Result<(&'static str, &str)> {
    match arg.split_once('/') {
        None if !arg.is_empty() => Ok(("pods", arg)),
        Some(("pod" | "pods" | "po", name)) if !name.is_empty() => Ok(("pods", name)),
        Some(("svc" | "service" | "services", name)) if !name.is_empty() => Ok(("services", name)),
        Some((_, "")) | None => bail!("{arg:?} names no object: use pod/<name> or svc/<name>"),
        Some((kind, _)) => bail!("kubelab trace follows pods and Services only, not {kind:?}: use pod/<name> or svc/<name>"),
    }
}

async fn fetch(kube: &kube::Client, namespace: &str, resource: &str, name: &str, uid: Option<&str>) -> anyhow::Result<Timeline> {
    let mut path = format!("/debug/trace/namespaces/{namespace}/{resource}/{name}");
    if let Some(uid) = uid {
        path.push_str(&format!("?uid={uid}"));
    }
    let req = http::Request::get(&path).body(Vec::new()).context("building the request")?;
    let text = kube.request_text(req).await.map_err(|e| match e {
        kube::Error::Api(s) if s.code == 404 => {
            let what = if resource == "services" { "Service" } else { "pod" };
            anyhow::anyhow!("{what} {namespace}/{name} not found (a deleted {what} can be traced with --uid)")
        }
        e => anyhow::anyhow!("GET {path}: {e}"),
    })?;
    serde_json::from_str(&text).with_context(|| format!("the API server's answer to {path} is not a timeline"))
}

/// How many owners up a chain is followed (Deployment → ReplicaSet → Pod is two; a CronJob's
/// pod three).
const MAX_OWNER_HOPS: usize = 5;

/// The pod's chain of controllers, top-most first, ending with the pod: each link's controller
/// ownerReference is read (its kind resolved through discovery) until an object has none, is
/// gone, or is not readable. Each link below the top gets the event in which its owner's
/// controller reported making it (the earliest event about the owner whose message names it:
/// `SuccessfulCreate`, `ScalingReplicaSet`).
async fn owner_chain(kube: &kube::Client, namespace: &str, pod: &str) -> anyhow::Result<Vec<Hop>> {
    let p = Api::<Pod>::namespaced(kube.clone(), namespace).get(pod).await.context("reading the pod")?;
    let mut chain = vec![hop_of("Pod", &p.metadata)];
    let mut meta = p.metadata;
    while chain.len() <= MAX_OWNER_HOPS {
        let Some(owner) = meta.owner_references.iter().flatten().find(|r| r.controller == Some(true)).cloned() else { break };
        let (group, version) = owner.api_version.split_once('/').unwrap_or(("", &owner.api_version));
        let gvk = GroupVersionKind::gvk(group, version, &owner.kind);
        let Ok((resource, caps)) = kube::discovery::pinned_kind(kube, &gvk).await else { break };
        let api: Api<DynamicObject> = match caps.scope {
            kube::discovery::Scope::Namespaced => Api::namespaced_with(kube.clone(), namespace, &resource),
            kube::discovery::Scope::Cluster => Api::all_with(kube.clone(), &resource),
        };
        let Some(obj) = api.get_opt(&owner.name).await.with_context(|| format!("reading {}/{}", owner.kind, owner.name))? else { break };
        if obj.metadata.uid.as_deref() != Some(owner.uid.as_str()) {
            break; // a namesake, not the owner
        }
        // Why the owner made the link below it.
        let events = Api::<Event>::namespaced(kube.clone(), namespace)
            .list(&ListParams::default().fields(&format!("involvedObject.uid={}", owner.uid)))
            .await
            .context("listing the owner's events")?;
        if let Some(child) = chain.last_mut() {
            explain(child, &events.items);
        }
        chain.push(hop_of(&owner.kind, &obj.metadata));
        meta = obj.metadata;
    }
    chain.reverse();
    Ok(chain)
}

/// A link as its own metadata tells it: creation time and the client of its first
/// managedFields entry.
fn hop_of(kind: &str, meta: &ObjectMeta) -> Hop {
    Hop {
        kind: kind.to_string(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        at: meta.creation_timestamp.as_ref().and_then(|t| t.0.to_string().parse().ok()),
        created_by: creator(meta),
        ..Hop::default()
    }
}

/// Who created the object, as far as its managedFields tell: the earliest manager that wrote its
/// spec (a controller that later writes only annotations or status is not its creator; entries
/// carry whole seconds, so "earliest" alone cannot tell them apart), else the earliest at all.
fn creator(meta: &ObjectMeta) -> Option<String> {
    let entries: Vec<&ManagedFieldsEntry> = meta.managed_fields.iter().flatten().collect();
    let wrote_spec = |m: &ManagedFieldsEntry| m.subresource.as_deref().unwrap_or_default().is_empty() && m.fields_v1.as_ref().is_some_and(|f| f.0.get("f:spec").is_some());
    let earliest = |it: Vec<&ManagedFieldsEntry>| it.into_iter().min_by_key(|m| m.time.as_ref().map(|t| t.0)).and_then(|m| m.manager.clone());
    earliest(entries.iter().copied().filter(|m| wrote_spec(m)).collect()).or_else(|| earliest(entries))
}

/// Fills in the event that reported making `child`: the earliest of `events` whose message
/// names it (as a whole word: `web-1` must not match `web-10`). Its time, microsecond-precise,
/// replaces the creationTimestamp's whole second.
fn explain(child: &mut Hop, events: &[Event]) {
    let names = |e: &&Event| e.message.as_deref().is_some_and(|m| m.split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '.')).any(|w| w == child.name));
    let when = |e: &Event| e.event_time.as_ref().map(|t| t.0.to_string()).or_else(|| e.first_timestamp.as_ref().map(|t| t.0.to_string()));
    let Some(e) = events.iter().filter(names).min_by_key(|e| when(e)) else { return };
    child.controller = e.reporting_component.clone().filter(|c| !c.is_empty()).or_else(|| e.source.as_ref().and_then(|s| s.component.clone()));
    child.reason = e.reason.clone();
    child.message = e.message.clone();
    if let Some(t) = when(e).and_then(|t| t.parse().ok()) {
        child.at = Some(t);
    }
}

/// Waits for the next pod created in `namespace`, then prints each step once, as the components
/// record it, until the pod has settled (Running and ready, or finished) and nothing new came
/// for two seconds.
async fn follow(kube: &kube::Client, namespace: &str) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(kube.clone(), namespace);
    let rv = pods.list_metadata(&Default::default()).await.context("listing pods")?.metadata.resource_version.unwrap_or_default();
    eprintln!("waiting for the next pod created in namespace {namespace} …");
    let mut events = pods.watch(&WatchParams::default(), &rv).await.context("watching pods")?.boxed();
    let name = loop {
        match events.try_next().await.context("watching pods")? {
            Some(WatchEvent::Added(p)) => break p.metadata.name.unwrap_or_default(),
            Some(_) => {}
            None => bail!("the pod watch ended before a pod was created"),
        }
    };
    drop(events);
    let mut seen: HashSet<(String, String, i64)> = HashSet::new();
    let mut origin = None;
    let mut quiet_since = tokio::time::Instant::now();
    println!("pod {namespace}/{name}");
    loop {
        let t = fetch(kube, namespace, "pods", &name, None).await?;
        origin = origin.or(t.origin);
        let mut new = false;
        for s in &t.steps {
            let key = (s.component.to_string(), s.name.to_string(), s.start.timestamp_micros());
            if seen.insert(key) {
                new = true;
                print_step(s, origin);
            }
        }
        if new {
            quiet_since = tokio::time::Instant::now();
        }
        let settled = match pods.get_opt(&name).await? {
            None => true,
            Some(p) => {
                let status = p.status.unwrap_or_default();
                let phase = status.phase.unwrap_or_default();
                let ready = status.conditions.unwrap_or_default().iter().any(|c| c.type_ == "Ready" && c.status == "True");
                phase == "Succeeded" || phase == "Failed" || (phase == "Running" && ready)
            }
        };
        if settled && quiet_since.elapsed() > Duration::from_secs(2) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn print_step(s: &Step, origin: Option<chrono::DateTime<chrono::Utc>>) {
    let offset = origin.map(|o| (s.start - o).num_microseconds().unwrap_or(0) as f64 / 1000.0).unwrap_or(0.0);
    let dur = s.duration().num_microseconds().unwrap_or(0) as f64 / 1000.0;
    let mut detail: Vec<String> = s.fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
    if let Some(e) = &s.error {
        detail.insert(0, format!("FAILED: {e}"));
    }
    println!("+{offset:>9.1}ms {dur:>9.1}ms  {:<10} {:<8} {:<28} {}", s.component, s.node.as_deref().unwrap_or("-"), s.name, detail.join(" "));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(message: &str, at: &str, reason: &str) -> Event {
        let t: k8s_openapi::jiff::Timestamp = at.parse().expect("time");
        Event {
            message: Some(message.into()),
            reason: Some(reason.into()),
            reporting_component: Some("replicaset-controller".into()),
            event_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(t)),
            ..Event::default()
        }
    }

    #[test]
    fn the_event_that_made_a_link_names_it_as_a_whole_word() {
        let mut hop = Hop { kind: "Pod".into(), name: "web-1".into(), ..Hop::default() };
        let events = vec![
            event("Created pod: web-10", "2026-12-03T08:00:00.100Z", "SuccessfulCreate"),
            event("Deleted pod: web-1", "2026-12-03T08:00:05Z", "SuccessfulDelete"),
            event("Created pod: web-1", "2026-12-03T08:00:00.250Z", "SuccessfulCreate"),
        ];
        explain(&mut hop, &events);
        assert_eq!(hop.reason.as_deref(), Some("SuccessfulCreate"));
        assert_eq!(hop.message.as_deref(), Some("Created pod: web-1"));
        assert_eq!(hop.controller.as_deref(), Some("replicaset-controller"));
        assert_eq!(hop.at.map(|t| t.to_rfc3339()), Some("2026-12-03T08:00:00.250+00:00".into()));
        let mut lone = Hop { name: "other".into(), ..Hop::default() };
        explain(&mut lone, &events);
        assert_eq!(lone.reason, None, "no event names it");
    }

    #[test]
    fn the_creator_is_who_wrote_the_spec_first() {
        let entry = |manager: &str, spec: bool, sub: Option<&str>| {
            let fields = if spec { serde_json::json!({"f:spec": {}}) } else { serde_json::json!({"f:metadata": {"f:annotations": {}}}) };
            serde_json::json!({"manager": manager, "operation": "Update", "time": "2026-12-03T08:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": fields, "subresource": sub})
        };
        let meta = |entries: Vec<serde_json::Value>| -> ObjectMeta { serde_json::from_value(serde_json::json!({"managedFields": entries})).expect("meta") };
        // The controller annotated it in the same second and wrote its status: not the creator.
        let m = meta(vec![entry("kube-controller-manager", false, None), entry("kube-controller-manager", true, Some("status")), entry("kubectl-create", true, None)]);
        assert_eq!(creator(&m).as_deref(), Some("kubectl-create"));
        let m = meta(vec![entry("kube-controller-manager", false, None)]);
        assert_eq!(creator(&m).as_deref(), Some("kube-controller-manager"), "no spec writer: the earliest");
        assert_eq!(creator(&ObjectMeta::default()), None);
    }

    #[test]
    fn pod_and_service_arguments() {
        for (arg, want) in [("pod/web", ("pods", "web")), ("pods/web", ("pods", "web")), ("web", ("pods", "web")), ("svc/web", ("services", "web")), ("service/web", ("services", "web"))] {
            assert_eq!(target_of(arg).ok(), Some(want), "{arg}");
        }
        for arg in ["deployment/web", "pod/", "svc/", ""] {
            assert!(target_of(arg).is_err(), "{arg}");
        }
    }
}
