//! # scheduler — kubelab's kube-scheduler
//!
//! Assigns each pending pod a node, talking only to the API server. The layout mirrors
//! kube-scheduler's pkg/scheduler:
//!
//! - [`scheduling_queue`]: activeQ (priority, then age), backoffQ (1 s doubling to 10 s per pod) and
//!   the unschedulable pods, moved back when a cluster event could make them fit; pods a PreEnqueue
//!   plugin gates (scheduling gates) wait outside them until an update of their own frees them.
//! - [`cache`]: nodes and the pods on them, including *assumed* pods (decided but not yet seen
//!   bound), and the per-cycle [`cache::Snapshot`].
//! - [`framework`]: the extension points and the runtime that runs the plugins.
//! - [`plugins`]: one plugin a file.
//! - [`schedule_one`]: one pod's scheduling cycle (filter, score, select, assume, reserve) and its
//!   binding cycle (bind, then events and status).
//! - [`config`]: the KubeSchedulerConfiguration file.
//!
//! ## Implementation caveats
//! - No preemption: the PostFilter extension point exists, but no plugin fills it, so a
//!   high-priority pod that fits nowhere waits like any other.
//! - One profile; no extenders, no Permit/PreBind/PostBind plugins, no volume plugins (kubelab has no
//!   PersistentVolumes), no ImageLocality, no extended resources (only cpu, memory,
//!   ephemeral-storage and pods).
//! - PodTopologySpread has no cluster-level default constraints (Kubernetes' defaults spread a
//!   pod by the Services and ReplicaSets that select it).
//!
//! ## Public surface
//! - [`run`] and [`Options`] (`kubelab scheduler`, `kubelab up`), [`Profile`] and [`config`] (the
//!   configuration file).
//! - [`framework`] and [`plugins`]: the node agent admits pods with the same Filter plugins
//!   (NodeName, NodePorts, NodeAffinity, TaintToleration, resources), as kubelet's
//!   lifecycle/predicate.go imports kube-scheduler's.
//! - Everything else (queue, cache, the scheduling and binding cycles, event handlers, metrics)
//!   is the crate's own.
#![allow(rustdoc::private_intra_doc_links)] // the tour names private modules; read it in the source

pub mod config;
pub mod framework;
pub mod plugins;
pub(crate) mod cache;
pub(crate) mod eventhandlers;
pub(crate) mod metrics;
pub(crate) mod schedule_one;
pub(crate) mod scheduler;
pub(crate) mod scheduling_queue;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

pub use config::Profile;

/// `kubelab scheduler`'s options, named after kube-scheduler's flags.
#[derive(Clone, Debug)]
pub struct Options {
    pub connection: client::Connection,
    /// `--config`: a KubeSchedulerConfiguration file; the default profile without one.
    pub config: Option<PathBuf>,
    /// `--scheduler-name`: overrides the profile's schedulerName.
    pub scheduler_name: Option<String>,
    /// `--leader-elect`.
    pub leader_elect: bool,
    /// `--leader-elect-resource-namespace` / `-name` (kube-system / kube-scheduler).
    pub lease_namespace: String,
    pub lease_name: String,
    /// Where `/healthz` and `/metrics` are served (`--bind-address`, `--port`).
    pub listen: SocketAddr,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Client(#[from] client::Error),
    #[error(transparent)]
    LeadershipLost(#[from] client::leaderelection::LeadershipLost),
    #[error("serving /healthz and /metrics on {0}: {1}")]
    Listen(SocketAddr, std::io::Error),
}

/// The effective profile: the config file (if any) with `--scheduler-name` applied.
pub fn load_profile(opts: &Options) -> Result<Profile, Error> {
    let mut profile = match &opts.config {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| Error::Config(format!("--config {}: {e}", path.display())))?;
            Profile::parse(&text).map_err(|e| Error::Config(format!("--config {}: {e}", path.display())))?
        }
        None => Profile::default(),
    };
    if let Some(name) = &opts.scheduler_name {
        profile.scheduler_name = name.clone();
    }
    Ok(profile)
}

/// Runs the scheduler until `shutdown` completes (or leadership is lost, which is an error: the
/// process exits and is restarted, as kube-scheduler does).
pub async fn run(opts: Options, shutdown: impl std::future::Future<Output = ()>) -> Result<(), Error> {
    let profile = load_profile(&opts)?;
    let client = client::client_as(&opts.connection, "kube-scheduler").await?;
    let metrics = metrics::Metrics::new();
    let listener = tokio::net::TcpListener::bind(opts.listen).await.map_err(|e| Error::Listen(opts.listen, e))?;
    if let Ok(addr) = listener.local_addr() {
        plugins::default_binder::set_debug_endpoint(addr);
    }
    let serve = tokio::spawn(metrics::serve(listener, metrics.clone()));
    let framework = framework::runtime::Framework::new(&profile, Some(client.clone())).map_err(Error::Config)?;
    tracing::info!(target: "scheduler", scheduler_name = profile.scheduler_name, plugins = ?profile.plugins, "starting");
    let sched = scheduler::Scheduler::new(framework, client.clone(), metrics);
    let work = run_scheduler(sched.clone(), client.clone());
    tokio::pin!(shutdown);
    let result = if opts.leader_elect {
        let mut cfg = client::leaderelection::Config::new(&opts.lease_namespace, &opts.lease_name);
        cfg.identity = format!("{}_{}", client::hostname(), cfg.identity.rsplit('_').next().unwrap_or_default());
        let mut elector = client::leaderelection::LeaderElector::new(client.clone(), cfg);
        tracing::info!(target: "scheduler", identity = elector.identity(), "waiting to lead {}/{}", opts.lease_namespace, opts.lease_name);
        let r = tokio::select! {
            r = elector.run(work) => r.map(|_| ()).map_err(Error::from),
            () = &mut shutdown => Ok(()),
        };
        sched.queue.close();
        elector.release().await;
        r
    } else {
        tokio::select! {
            () = work => {}
            () = &mut shutdown => {}
        }
        sched.queue.close();
        Ok(())
    };
    serve.abort();
    result
}

/// Everything the active scheduler runs: the watches, the housekeeping timers and the scheduling
/// loop (started once both watches have listed, so that the first pods see every node).
async fn run_scheduler(sched: Arc<scheduler::Scheduler>, client: kube::Client) {
    let (pods_tx, mut pods_synced) = tokio::sync::watch::channel(false);
    let (nodes_tx, mut nodes_synced) = tokio::sync::watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(sched.clone().watch_pods(client.clone(), pods_tx));
    tasks.spawn(sched.clone().watch_nodes(client, nodes_tx));
    let _ = pods_synced.wait_for(|s| *s).await;
    let _ = nodes_synced.wait_for(|s| *s).await;
    tracing::info!(target: "scheduler", "caches synced; scheduling");
    tasks.spawn(sched.clone().run_housekeeping());
    let rt = tokio::runtime::Handle::current();
    let looped = sched.clone();
    let scheduling = tokio::task::spawn_blocking(move || looped.run_loop(rt));
    struct CloseOnDrop(Arc<scheduler::Scheduler>);
    impl Drop for CloseOnDrop {
        fn drop(&mut self) {
            self.0.queue.close();
        }
    }
    let _close = CloseOnDrop(sched);
    let _ = scheduling.await;
}
