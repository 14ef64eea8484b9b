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
//! - [`informers`]: local copies of the storage objects the volume plugins read
//!   (PersistentVolumes, PersistentVolumeClaims, StorageClasses, CSINodes), kept by watches.
//! - [`framework`]: the extension points and the runtime that runs the plugins.
//! - [`plugins`]: one plugin a file. The default profile, in kube-scheduler's order:
//!   SchedulingGates, NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts,
//!   NodeResourcesFit, VolumeRestrictions, NodeVolumeLimits, VolumeBinding, PodTopologySpread,
//!   InterPodAffinity, NodeResourcesBalancedAllocation, DefaultBinder.
//! - [`schedule_one`]: one pod's scheduling cycle (filter, score, select, assume, reserve) and its
//!   binding cycle (PreBind, bind, then events and status).
//! - [`config`]: the KubeSchedulerConfiguration file.
//!
//! ## Volumes
//! A pod's PersistentVolumeClaims weigh in the choice of its node, as in kube-scheduler:
//! 1. VolumeRestrictions: a ReadWriteOncePod claim another pod uses rules the pod out.
//! 2. NodeVolumeLimits: a node takes no more volumes of a CSI driver than its CSINode's
//!    `allocatable.count`.
//! 3. VolumeBinding: a bound claim's PV must admit the node (node affinity); an unbound
//!    WaitForFirstConsumer claim needs an available PV there, or a class that can provision there.
//!    Reserve assumes the choice; PreBind writes it (PV claimRef, or the claim's
//!    `volume.kubernetes.io/selected-node` for the provisioner) and waits until every claim is
//!    bound — up to `bindTimeoutSeconds` (600) — before the pod is bound.
//!
//! ## Implementation caveats
//! - No preemption: the PostFilter extension point exists, but no plugin fills it, so a
//!   high-priority pod that fits nowhere waits like any other.
//! - One profile; no extenders, no Permit/PostBind plugins, no ImageLocality, no VolumeZone, no
//!   extended resources (only cpu, memory, ephemeral-storage and pods).
//! - Volume plugins: no VolumeBinding Score (kube-scheduler's capacity scoring, off by default
//!   there too) and no storage capacity check (CSIStorageCapacity, CSIDriver.storageCapacity); no
//!   generic ephemeral volumes (`ephemeral:` claims are not looked at); no in-tree volume types
//!   or CSI migration (only CSI PVs count towards node limits, and only CSINode's limits apply);
//!   VolumeRestrictions checks ReadWriteOncePod only (kubelab has none of the in-tree disks it
//!   also checks). A binding
//!   cycle waiting in PreBind holds one of the 64 binding slots, so 64 pods waiting for their
//!   volumes at once hold up the scheduling loop until one of them is done. The queue has
//!   no queueing hints, so a storage event moves back every pod a volume plugin rejected, not
//!   only the pods using that object.
//! - PV, PVC, StorageClass and CSINode watches that the API server answers with 404 (not served)
//!   or 403 (not allowed) count as synced and empty, so scheduling starts; they keep retrying
//!   with backoff and fill in once they succeed.
//! - PodTopologySpread has no cluster-level default constraints (Kubernetes' defaults spread a
//!   pod by the Services and ReplicaSets that select it).
//!
//! ## Public surface
//! - [`run`] and [`Options`] (`kubelab scheduler`, `kubelab up`), [`Profile`] and [`config`] (the
//!   configuration file).
//! - [`framework`] and [`plugins`]: the node agent admits pods with the same Filter plugins
//!   (NodeName, NodePorts, NodeAffinity, TaintToleration, resources), as kubelet's
//!   lifecycle/predicate.go imports kube-scheduler's. [`informers`] is public because a
//!   [`framework::runtime::Framework`] is built over one.
//! - Everything else (queue, cache, the scheduling and binding cycles, event handlers, metrics)
//!   is the crate's own.
#![allow(rustdoc::private_intra_doc_links)] // the tour names private modules; read it in the source

pub mod config;
pub mod framework;
pub mod plugins;
pub(crate) mod cache;
pub(crate) mod eventhandlers;
pub mod informers;
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
    let informers = informers::Informers::default();
    let framework = framework::runtime::Framework::new(&profile, Some(client.clone()), &informers).map_err(Error::Config)?;
    tracing::info!(target: "scheduler", scheduler_name = profile.scheduler_name, plugins = ?profile.plugins, "starting");
    let sched = scheduler::Scheduler::new(framework, client.clone(), metrics, informers);
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
/// loop (started once every watch has listed, so that the first pods see every node and claim).
async fn run_scheduler(sched: Arc<scheduler::Scheduler>, client: kube::Client) {
    let mut synced = Vec::new();
    let mut channel = || {
        let (tx, rx) = tokio::sync::watch::channel(false);
        synced.push(rx);
        tx
    };
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(sched.clone().watch_pods(client.clone(), channel()));
    tasks.spawn(sched.clone().watch_nodes(client.clone(), channel()));
    tasks.spawn(sched.clone().watch_persistent_volumes(client.clone(), channel()));
    tasks.spawn(sched.clone().watch_persistent_volume_claims(client.clone(), channel()));
    tasks.spawn(sched.clone().watch_storage_classes(client.clone(), channel()));
    tasks.spawn(sched.clone().watch_csi_nodes(client, channel()));
    for mut rx in synced {
        let _ = rx.wait_for(|s| *s).await;
    }
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
