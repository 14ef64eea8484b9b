//! `kubelab trace pod/<name>`: a pod's journey from `kubectl apply` to Running, as one timeline
//! of the steps every component took, with their real timings. The API server gathers the steps
//! (its own, the scheduler's and the node agent's) at `/debug/trace/namespaces/<ns>/pods/<name>`;
//! this command shows them as a table, a mermaid sequence diagram or JSON, or follows the next pod
//! created live.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::Args;
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, WatchEvent, WatchParams};
use podtrace::Step;
use podtrace::render::Timeline;

#[derive(Args)]
pub struct TraceArgs {
    /// The pod: `pod/<name>`, `pods/<name>` or just `<name>`. Not needed with --follow.
    pub pod: Option<String>,
    /// The pod's namespace.
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
    /// Trace a pod that is gone by its UID (only the API server's own steps remain then).
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
    let Some(pod) = &args.pod else { bail!("which pod? kubelab trace pod/<name> [-n namespace], or --follow") };
    let name = pod_name(pod)?;
    let timeline = fetch(&kube, &args.namespace, name, args.uid.as_deref()).await?;
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

/// `pod/x`, `pods/x`, `po/x` or `x`; another resource is an error, not a silent guess.
fn pod_name(arg: &str) -> anyhow::Result<&str> {
    match arg.split_once('/') {
        None => Ok(arg),
        Some(("pod" | "pods" | "po", name)) if !name.is_empty() => Ok(name),
        Some((kind, _)) => bail!("kubelab trace follows pods only, not {kind:?}: use pod/<name>"),
    }
}

async fn fetch(kube: &kube::Client, namespace: &str, name: &str, uid: Option<&str>) -> anyhow::Result<Timeline> {
    let mut path = format!("/debug/trace/namespaces/{namespace}/pods/{name}");
    if let Some(uid) = uid {
        path.push_str(&format!("?uid={uid}"));
    }
    let req = http::Request::get(&path).body(Vec::new()).context("building the request")?;
    let text = kube.request_text(req).await.map_err(|e| match e {
        kube::Error::Api(s) if s.code == 404 => anyhow::anyhow!("pod {namespace}/{name} not found (a deleted pod can be traced with --uid)"),
        e => anyhow::anyhow!("GET {path}: {e}"),
    })?;
    serde_json::from_str(&text).with_context(|| format!("the API server's answer to {path} is not a timeline"))
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
        let t = fetch(kube, namespace, &name, None).await?;
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

    #[test]
    fn pod_arguments() {
        assert_eq!(pod_name("pod/web").ok(), Some("web"));
        assert_eq!(pod_name("pods/web").ok(), Some("web"));
        assert_eq!(pod_name("web").ok(), Some("web"));
        assert!(pod_name("deployment/web").is_err());
        assert!(pod_name("pod/").is_err());
    }
}
