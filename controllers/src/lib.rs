//! # controllers — kubelab's kube-controller-manager
//!
//! Control loops that keep the cluster converging on what its objects say, each talking only to
//! the API server, as kube-controller-manager's do. Run by `kubelab controller-manager`.
//!
//! - [`namespace`]: empties a namespace being deleted, then lets it go.
//! - [`nodelifecycle`]: notices nodes whose kubelet went silent (no Lease renewal, no status post
//!   for `--node-monitor-grace-period`), sets their conditions to Unknown, taints them
//!   `node.kubernetes.io/unreachable` (or `not-ready` when the kubelet itself says Ready=False)
//!   and marks their pods not ready; takes the taints away when the kubelet is back.
//! - [`tainteviction`]: deletes the pods of a node with a `NoExecute` taint they do not tolerate,
//!   or once their `tolerationSeconds` (300 s by default, from admission) have run out.
//! - [`replicaset`]: keeps each ReplicaSet's pods at `spec.replicas` — creating in slow-start
//!   batches, deleting the worst first, adopting matching orphans and releasing what no longer
//!   matches ([`controller_ref_manager`]), with expectations so that no sync acts twice on
//!   pods its caches have not shown yet ([`controller_utils`]); writes ready and available
//!   replicas.
//! - [`deployment`]: rolls a Deployment from its old ReplicaSets to the one of its current
//!   template — RollingUpdate within `maxSurge`/`maxUnavailable`, or Recreate — with revisions,
//!   proportional scaling, pause, cleanup to `revisionHistoryLimit`, and the Available and
//!   Progressing conditions `kubectl rollout status` reads.
//! - [`job`]: runs a Job's pods until `completions` succeeded (`parallelism` at a time,
//!   NonIndexed or Indexed), each held by the `batch.kubernetes.io/job-tracking` finalizer
//!   until counted through `status.uncountedTerminatedPods`; replaces failed pods after an
//!   exponential backoff; fails the Job past `backoffLimit` or `activeDeadlineSeconds`
//!   (`FailureTarget`, then `Failed`), completes it (`SuccessCriteriaMet`, then `Complete`);
//!   suspends and resumes it.
//! - [`ttlafterfinished`]: deletes finished Jobs (foreground, with their pods) once their
//!   `ttlSecondsAfterFinished` has passed.
//! - [`cronjob`]: creates a Job from each CronJob's template at every time of its schedule, read
//!   on the wall clock of its `timeZone` (the system tz database); `startingDeadlineSeconds`,
//!   `concurrencyPolicy` (Allow, Forbid, Replace), `suspend`, the status' active Jobs and last
//!   schedule and success times, and the history limits on finished Jobs.
//! - [`daemon`]: keeps one pod of each DaemonSet on every node that should run one (its
//!   nodeSelector, required node affinity and tolerated taints, as the scheduler would judge),
//!   pinned by node affinity for the scheduler to bind; replaces failed pods with backoff; rolls
//!   a new template node by node (RollingUpdate within `maxUnavailable`/`maxSurge`, or OnDelete)
//!   through ControllerRevisions ([`history`]), cleaned to `revisionHistoryLimit`.
//! - [`statefulset`]: keeps each StatefulSet's pods `<set>-<ordinal>`, with stable hostnames and
//!   labels, at `spec.replicas` — one at a time in ordinal order, each waiting for the ones
//!   below to be Ready (`OrderedReady`), or all at once (`Parallel`) — recreating failed ones,
//!   and rolls them to a new template from the highest ordinal down to the partition, with
//!   ControllerRevisions ([`history`]) for `kubectl rollout history` and `undo`. Each pod's
//!   claims (`<template>-<set>-<ordinal>`, from `volumeClaimTemplates`) are created before it
//!   and owned as `persistentVolumeClaimRetentionPolicy` says (ownerless with Retain).
//! - [`endpointslice`]: keeps, for each Service with a selector (not ExternalName), the
//!   `discovery.k8s.io/v1` EndpointSlices that list its pods — one endpoint per pod with an IP,
//!   its `ready`/`serving`/`terminating` conditions, node, zone, hostname and pod — grouped by the
//!   ports their `targetPort` resolves to, at most `--max-endpoints-per-slice` (100) a slice,
//!   updated in place with as little churn as it can; a Service without endpoints keeps one
//!   empty slice.
//! - [`endpoint`]: keeps, for each such Service, the v1 Endpoints named as it (ready and
//!   not-ready addresses in subsets by port, at most 1,000 addresses, then truncated); deletes
//!   the Endpoints of a deleted Service.
//! - [`clusterroleaggregation`]: gives each ClusterRole with an `aggregationRule` the rules of
//!   every ClusterRole its selectors match (how `admin`, `edit` and `view` take in the rules
//!   labelled `aggregate-to-…`), written by a server-side apply of `rules`.
//! - [`certificates`]: the root CA certificate publisher, which keeps a ConfigMap
//!   `kube-root-ca.crt` holding the cluster's CA bundle (`ca.crt`) in every namespace that is not
//!   terminating, for pods to verify the API server with; the CA comes from `--root-ca-file`, or
//!   the kubeconfig's `certificate-authority-data`. And the certificate signing request
//!   controllers of TLS bootstrap: the approver (`csrapproving`) approves a kubelet's request
//!   for a node client certificate when a SubjectAccessReview as its requester allows it; the
//!   signer (`csrsigning`) issues approved requests of the built-in signers with the cluster CA
//!   (`--cluster-signing-cert-file`/`--cluster-signing-key-file`, `--cluster-signing-duration`),
//!   failing those its signer's rules refuse; the cleaner (`csrcleaner`) deletes old ones.
//! - [`bootstrap`]: the token cleaner (`tokencleaner`, off by default), which deletes bootstrap
//!   token Secrets once their `expiration` passes.
//! - [`volume`]: the controllers of persistent storage. The PersistentVolume binder
//!   (`persistentvolume-binder`) binds each claim to the smallest Available volume that fits it
//!   (class, access modes, volume mode, selector, size; a volume or claim pre-bound by name), or
//!   hands it to its class's external provisioner (`volume.kubernetes.io/storage-provisioner`)
//!   — for a WaitForFirstConsumer class only once the scheduler has chosen a node — and binds the
//!   volume made for it; it moves volumes through Available, Bound, Released and Failed and claims
//!   through Pending, Bound and Lost, and reclaims a Released volume (Retain keeps it, Delete is
//!   the external provisioner's). The attach-detach controller (`attachdetach`) creates a
//!   VolumeAttachment for each CSI volume a scheduled pod uses on its node (when the driver needs
//!   attaching), deletes it once no pod there needs it and the node has stopped using it, and keeps
//!   the node's `status.volumesAttached`. The protection controllers (`pvc-protection`,
//!   `pv-protection`) take their finalizers off a deleted claim no scheduled pod uses and a deleted
//!   volume no longer Bound.
//! - [`names`]: the controllers' names and `--controllers`, which chooses those that run.
//! - [`garbagecollector`]: deletes objects whose owners are all gone, orphans the dependents of
//!   an owner deleted with `propagationPolicy: Orphan`, and lets a foreground-deleted owner go
//!   once its blocking dependents have.
//! - [`disruption`]: keeps each PodDisruptionBudget's status (healthy, desired, allowed
//!   disruptions), which the API server's eviction reads and decrements.
//! - [`history`]: the ControllerRevisions in which the DaemonSet and StatefulSet controllers
//!   keep the templates they rolled out (named by a hash of their data, numbered, re-used on a
//!   rollback).
//! - [`workqueue`]: client-go's work queue, from which the informer-driven controllers' workers
//!   take keys (each key once, never by two workers, later or with backoff when asked).
//! - [`clientbuilder`]: the client each controller gets — the controller manager's own, or with
//!   `--use-service-account-credentials` one that authenticates as the controller's service
//!   account `kube-system/<name>` (a TokenRequest token renewed before it expires), so that the
//!   API server allows it only what the RBAC role `system:controller:<name>` allows.
//! - [`controller_context`]: what each controller is started with (kube-controller-manager's
//!   `ControllerContext`): the client it lists and watches with — always the controller
//!   manager's own, as Kubernetes' shared informers — and the [`clientbuilder`] whose client it
//!   does everything else with.
//!
//! ## The flow of [`run`]
//! 1. Connect to the API server; check `--controllers`; read the root CA to publish
//!    (`--root-ca-file` once, or the kubeconfig's CA data; none: the publisher is not started,
//!    and one line says so) and the CA to sign with (both `--cluster-signing-*-file`s, once;
//!    without them the CSR signer is not started, and one line says so). Choose
//!    how controllers get their clients ([`clientbuilder`]); the watches and leader election
//!    always use the controller manager's own ([`controller_context`]).
//! 2. With `--leader-elect`, wait to hold the Lease `kube-system/kube-controller-manager`
//!    (client-go's leader election): several replicas may run, one acts. Without it, act at once.
//! 3. Run every controller `--controllers` turns on concurrently, each with its own watches (as
//!    the controller manager) and its own client for the rest, until shutdown — or until
//!    leadership is lost, which is an error: the process exits (and is restarted) rather than
//!    risk two active replicas, as kube-controller-manager does.
//! 4. On shutdown, give the Lease up (client-go's ReleaseOnCancel), so a standby takes over at
//!    once instead of after the lease duration.
//!
//! ## Implementation caveats
//! - Twenty-four controllers (namespace, node lifecycle, taint eviction, disruption, ReplicaSet,
//!   Deployment, DaemonSet, StatefulSet, Job, TTL-after-finished, CronJob, Endpoints,
//!   EndpointSlice, ClusterRole aggregation, garbage collector, root CA certificate publisher,
//!   CSR approving, signing and cleaning, bootstrap token cleaner, PersistentVolume binder,
//!   attach-detach, PVC and PV protection): no EndpointSlice mirroring, service account, service
//!   account token, bootstrap signer (accepted in `--controllers`, not run), pod garbage collector
//!   (a pod bound to a deleted node stays), volume expansion, ephemeral volume or
//!   selinux-warning controllers.
//! - The PersistentVolume binder has no in-tree volume plugins: it provisions only through
//!   external provisioners (a class whose provisioner is `kubernetes.io/…` fails with
//!   `ProvisioningFailed`), and it deletes or recycles nothing itself — Delete of a volume no
//!   external provisioner made, and Recycle, end in Failed with Kubernetes' messages. A class
//!   without `volumeBindingMode` counts as Immediate (the API server defaults it). No CSI
//!   migration, VolumeAttributesClass, `pv.kubernetes.io/migrated-to` handling beyond standing
//!   down, no metrics. Its caches are the watches' (Kubernetes also stores its own writes in them
//!   at once): a decision taken on a cache that lags its last write fails on the resourceVersion
//!   and is retried with backoff. It resyncs every volume and claim every 15 s
//!   (`--pvclaimbinder-sync-period`, not a flag here), so the events of a waiting claim
//!   (`ExternalProvisioning`, `WaitForFirstConsumer`) repeat, as in Kubernetes.
//! - The attach-detach controller handles CSI PersistentVolumes only (no in-tree attachable
//!   plugins, no inline CSI volumes); it manages every node (Kubernetes only those annotated
//!   `volumes.kubernetes.io/controller-managed-attach-detach`); it never force-detaches a volume a
//!   node still reports in use (no `maxWaitForUnmountDuration`); its state is recomputed from the
//!   caches on every change rather than kept as desired and actual states of the world; it records
//!   `SuccessfulAttachVolume` and Multi-Attach `FailedAttachVolume` events, not a VolumeAttachment's
//!   `attachError`. Node status is written by a JSON merge patch of `volumesAttached` (Kubernetes
//!   uses a strategic merge patch).
//! - The PVC protection controller counts a scheduled pod that names a claim as using it whatever
//!   the pod's phase (as Kubernetes does: a finished pod holds its claim until it is deleted).
//! - The CSR controllers need the API server's `certificates.k8s.io/v1`; without it their
//!   watches fail and retry. One signing controller signs for the four built-in signers with
//!   one CA (Kubernetes runs one per signer and has per-signer `--cluster-signing-*-cert-file`
//!   flags, not here); the CA is read once (Kubernetes reloads changed files); a request whose
//!   subject has several organizations fails (pki signs one at most; Kubernetes signs it). The
//!   approver and signer record no events. The token cleaner
//!   watches `kube-system`'s Secrets only (Kubernetes' informer holds all).
//! - The garbage collector discovers resources once, at start (Kubernetes re-discovers every
//!   30 s, so a kind added later is not collected until a restart); it watches whole objects,
//!   not their metadata only; it verifies an owner by a live GET each time it judges a dependent
//!   (Kubernetes trusts its graph for owners it has seen); it keeps no "absent owner" cache.
//! - The pod-template-hash is FNV-32a of the template's JSON (Kubernetes hashes Go's printed
//!   form of it), so a template's ReplicaSet name differs from a real cluster's. The revision
//!   annotation is written by an update of the Deployment (Kubernetes writes it through
//!   `deployments/status`, whose update keeps annotations there and ignores them here); a status
//!   update that meets a Conflict is retried on a fresh read of the same generation (Kubernetes
//!   leaves it to the queue). No `rollbackTo` (extensions/v1beta1's
//!   server-side rollback): `kubectl rollout undo` rolls back on the client, as it does for apps/v1.
//! - The ReplicaSet controller does not set `status.terminatingReplicas`, orders surplus pods
//!   without Kubernetes' co-location rank (pods sharing a node with others of the set), and keeps
//!   its own pod cache (as every controller here does).
//! - The disruption controller knows the scale of ReplicaSets (and their Deployments),
//!   StatefulSets and ReplicationControllers only (Kubernetes also asks any controller's `scale`
//!   subresource), and does not take the `DisruptionTarget` condition off pods whose eviction
//!   never happened (Kubernetes' stale-disruption queue).
//! - Taint eviction counts a pod's tolerance from the later of the taint's `timeAdded` and the
//!   pod's binding (both stored, so a restart gives nobody a fresh five minutes); Kubernetes
//!   counts from when its taint manager saw the two together. It looks every second, so an
//!   eviction is up to a second late. Each controller keeps its own caches (two pod watches
//!   where Kubernetes shares one informer).
//! - Zone disruption follows Kubernetes' states and rates ([`zone_disruption`]), but a node
//!   waiting for its zone's token is retried on the next monitor pass (every
//!   `--node-monitor-period`) rather than from a queue polled every 100 ms. No
//!   `--node-startup-grace-period` (a node that never posted a status gets the ordinary grace
//!   period), no `NetworkUnavailable` handling beyond its taint.
//! - The taints that follow node conditions are set on the monitor pass (every
//!   `--node-monitor-period`), not also on each node update as Kubernetes does: up to one period
//!   late.
//! - The Job controller has no `podFailurePolicy`, `backoffLimitPerIndex`/`maxFailedIndexes`,
//!   `successPolicy`, `podReplacementPolicy` (terminating pods are never waited for before a
//!   replacement) or `managedBy`; it sets `status.terminating` always. Pod events queue the
//!   Job at once (Kubernetes batches them for a second). Adopting an orphan and adding the
//!   tracking finalizer are two patches (Kubernetes makes one); a released pod keeps the
//!   finalizer until the orphan-pod pass takes it off. The failure backoff is remembered in
//!   memory (as in Kubernetes: a restarted controller replaces failed pods at once); while it
//!   runs, `status.active` keeps the pods that run (Kubernetes writes 0).
//! - The TTL-after-finished controller handles Jobs only (as Kubernetes') and records no events.
//! - The CronJob controller takes a CronJob's Jobs by the uid in their controller reference
//!   (Kubernetes by its name only), queues only a Job's current controller when the reference
//!   changes, and sets `lastSuccessfulTime` in the sync that sees the Job complete (Kubernetes in
//!   the one after). It runs five workers (no `--concurrent-cron-job-syncs`), writes no
//!   `cronjob_job_creation_skew_duration_seconds` metric, and a create refused in a terminating
//!   namespace is a `FailedCreate` event like any other failure. A schedule is read on the wall
//!   clock of its zone: a time skipped by a daylight-saving jump does not run that day, one
//!   repeated when clocks go back runs twice.
//! - The DaemonSet controller names revisions by a hash of their data (the history's hash, where
//!   Kubernetes' DaemonSet controller hashes the template), lists them from the API server on
//!   each sync instead of watching them, and queues every DaemonSet when a node is deleted; a pod
//!   bound to a deleted node stays (no pod garbage collector).
//! - The StatefulSet controller reads a pod's claims with live GETs when it creates the pod or
//!   deletes a condemned one (Kubernetes reads a claim informer's cache), and applies
//!   `persistentVolumeClaimRetentionPolicy` to a pod's claims only then (Kubernetes also checks
//!   every replica's claims on each sync, so a policy changed later reaches existing claims only
//!   when their pods are recreated or condemned); a claim still owned by an earlier pod of the
//!   same name stops the pass with an error (retried with backoff) until it is gone. Rolling updates
//!   have no `maxUnavailable` (alpha in Kubernetes): one pod at a time. It applies a revision by
//!   taking its template (the patch replaces the template whole) rather than by a strategic
//!   merge, and lists the revisions from the API server on each sync (Kubernetes reads an
//!   informer's cache).
//! - The EndpointSlice controller sets no topology hints (`trafficDistribution`, topology-aware
//!   routing), no `last-change-trigger-time` annotation on slices and records no events; it reads
//!   an endpoint's zone from its node's label at each sync (a node relabelled later does not
//!   queue its Services). It knows its own writes by the resourceVersion each returned
//!   (Kubernetes by the slice's generation), and trusts such an expectation for 30 s at most.
//!   The order of endpoints within a slice is by address (Kubernetes' is a hash set's).
//! - The Endpoints controller records no events (`FailedToCreateEndpoint`,
//!   `FailedToUpdateEndpoint`), sorts addresses by IP and subsets by ports (Kubernetes by hash),
//!   and compares the truncated subsets with the stored ones (Kubernetes compares the untruncated
//!   ones, so an over-capacity Endpoints is rewritten on every sync). Neither controller
//!   publishes a pod's hostname only for headless Services: as in Kubernetes, a matching
//!   `subdomain` is enough. An empty selector counts as none.
//! - The root CA certificate publisher does not start without a CA (Kubernetes publishes an
//!   empty bundle); it checks that the bundle holds a PEM certificate without parsing it, takes
//!   CA data from the kubeconfig but not a `certificate-authority` file (as Kubernetes' client
//!   configuration's `CAData`), and reads the CA once (a new one needs a restart, as in
//!   Kubernetes). It watches only the ConfigMaps named `kube-root-ca.crt` (Kubernetes' informer
//!   holds all), skips a namespace its cache shows gone or terminating instead of trying the
//!   create, takes AlreadyExists as done (Kubernetes retries), and writes no
//!   `root_ca_cert_publisher_*` metrics. kubelab's NamespaceLifecycle admission refuses a
//!   create in a terminating namespace without the `NamespaceTerminating` cause Kubernetes looks
//!   for, so the refusal is known by its message too.
//! - The controllers keep their caches in memory and rebuild them on each start; a new leader
//!   gives every node a fresh grace period (as Kubernetes does).
//! - With `--use-service-account-credentials`, each renewal of a token reads the service account
//!   (and creates it if it is gone) but does not create `kube-system` when missing (Kubernetes
//!   does). A 401 asks for a new token at once unless the token is younger than ten seconds
//!   (Kubernetes' ResetTokenOlderThan compares with the request's start).
//!   Through `--master` to the API server's insecure port the flag changes nothing the API server
//!   looks at: that port authenticates no one (every request is `system:unsecured`).
//!
//! ## Public surface
//! [`run`], [`Options`], [`Connection`], [`Error`]/[`Result`], the default Lease name,
//! `--max-endpoints-per-slice` ([`DEFAULT_MAX_ENDPOINTS_PER_SLICE`]) and
//! `--cluster-signing-duration` ([`DEFAULT_CLUSTER_SIGNING_DURATION`]), [`names`], and
//! [`nodelifecycle`]'s options (its timings, which the end-to-end tests shorten),
//! [`zone_disruption`]'s rates, [`workqueue`], [`certificates`] (the `kube-root-ca.crt`
//! names and the root CA's lookup; the CSR controllers and their pure deciders) and
//! [`bootstrap`] (the token cleaner and `get_expiration`).
#![allow(rustdoc::private_intra_doc_links)] // the tour names private modules; read it in the source

pub mod bootstrap;
pub mod certificates;
pub(crate) mod clientbuilder;
pub(crate) mod clusterroleaggregation;
pub(crate) mod controller_context;
pub(crate) mod controller_ref_manager;
pub(crate) mod controller_utils;
pub(crate) mod cronjob;
pub(crate) mod daemon;
pub(crate) mod deployment;
pub(crate) mod disruption;
pub(crate) mod endpoint;
pub(crate) mod endpointslice;
pub mod error;
pub(crate) mod garbagecollector;
pub(crate) mod history;
pub(crate) mod job;
pub mod names;
pub(crate) mod namespace;
pub mod nodelifecycle;
pub(crate) mod replicaset;
pub(crate) mod statefulset;
pub(crate) mod tainteviction;
pub(crate) mod ttlafterfinished;
pub(crate) mod volume;
pub mod workqueue;
pub mod zone_disruption;

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

pub use error::{Error, Result};

pub use client::Connection;

/// Where the leader election Lease lives by default (kube-controller-manager's
/// `--leader-elect-resource-namespace` / `--leader-elect-resource-name`).
pub const DEFAULT_LEASE_NAMESPACE: &str = "kube-system";
pub const DEFAULT_LEASE_NAME: &str = "kube-controller-manager";
/// `--max-endpoints-per-slice`'s default: the most endpoints the EndpointSlice controller puts in
/// one slice.
pub const DEFAULT_MAX_ENDPOINTS_PER_SLICE: usize = endpointslice::DEFAULT_MAX_ENDPOINTS_PER_SLICE;
/// `--cluster-signing-duration`'s default: 8760h, a year.
pub const DEFAULT_CLUSTER_SIGNING_DURATION: Duration = certificates::signer::signer::DEFAULT_CLUSTER_SIGNING_DURATION;

/// `kubelab controller-manager`'s options, named after kube-controller-manager's flags.
#[derive(Clone, Debug)]
pub struct Options {
    pub connection: Connection,
    /// `--leader-elect`.
    pub leader_elect: bool,
    /// `--leader-elect-resource-namespace` / `-name`.
    pub lease_namespace: String,
    pub lease_name: String,
    /// `--node-monitor-period`, `--node-monitor-grace-period`.
    pub node_lifecycle: nodelifecycle::Options,
    /// `--max-endpoints-per-slice`.
    pub max_endpoints_per_slice: usize,
    /// `--root-ca-file`: the PEM CA bundle published in every namespace as `kube-root-ca.crt`;
    /// without it, the kubeconfig's `certificate-authority-data`.
    pub root_ca_file: Option<PathBuf>,
    /// `--use-service-account-credentials`: each controller authenticates as its own service
    /// account `kube-system/<controller>` ([`clientbuilder`]) instead of as the controller
    /// manager, for everything but its watches ([`controller_context`]).
    pub use_service_account_credentials: bool,
    /// `--controllers`: which controllers run ([`names`]); `*` is every one on by default.
    pub controllers: Vec<String>,
    /// `--cluster-signing-cert-file` / `--cluster-signing-key-file`: the CA the CSR signer signs
    /// with; without both, the signer does not run.
    pub cluster_signing_cert_file: Option<PathBuf>,
    pub cluster_signing_key_file: Option<PathBuf>,
    /// `--cluster-signing-duration`: the longest certificate the signer issues.
    pub cluster_signing_duration: Duration,
}

impl Options {
    /// Kubernetes' defaults (no leader election, as kubelab runs one replica unless asked).
    pub fn new(connection: Connection) -> Options {
        Options {
            connection,
            leader_elect: false,
            lease_namespace: DEFAULT_LEASE_NAMESPACE.into(),
            lease_name: DEFAULT_LEASE_NAME.into(),
            node_lifecycle: nodelifecycle::Options::default(),
            max_endpoints_per_slice: DEFAULT_MAX_ENDPOINTS_PER_SLICE,
            root_ca_file: None,
            use_service_account_credentials: false,
            controllers: vec!["*".into()],
            cluster_signing_cert_file: None,
            cluster_signing_key_file: None,
            cluster_signing_duration: DEFAULT_CLUSTER_SIGNING_DURATION,
        }
    }
}

/// Runs every controller until `shutdown` completes (steps 1–4 above).
pub async fn run(opts: Options, shutdown: impl Future<Output = ()>) -> Result<()> {
    // Step 1.
    let config = client::config_as(&opts.connection, "kube-controller-manager").await?;
    let client = kube::Client::try_from(config.clone()).map_err(client::Error::Kube)?;
    let client_builder = if opts.use_service_account_credentials {
        clientbuilder::ControllerClientBuilder::ServiceAccount { root: client.clone(), config }
    } else {
        clientbuilder::ControllerClientBuilder::Simple(client.clone())
    };
    let ctx = controller_context::ControllerContext { informers: client.clone(), client_builder };
    let controllers = names::canonical(&opts.controllers).map_err(Error::Flag)?;
    let root_ca = certificates::rootcacertpublisher::root_ca(opts.root_ca_file.as_deref(), &opts.connection).await?;
    if root_ca.is_none() {
        tracing::info!(target: "controllers", "not starting root-ca-cert-publisher: no --root-ca-file, and no certificate-authority-data in the kubeconfig");
    }
    // The signer's CA, read once (Kubernetes reloads the files when they change).
    let signing_ca = match (&opts.cluster_signing_cert_file, &opts.cluster_signing_key_file) {
        _ if !names::is_controller_enabled(names::CSR_SIGNING, &controllers) => None,
        (Some(cert), Some(key)) => Some(std::sync::Arc::new(certificates::signer::signer::Signer::load_ca(cert, key)?)),
        _ => {
            tracing::info!(target: "controllers", "not starting csrsigning: no --cluster-signing-cert-file and --cluster-signing-key-file");
            None
        }
    };
    let started = Started {
        node_lifecycle: opts.node_lifecycle.clone(),
        max_endpoints_per_slice: opts.max_endpoints_per_slice,
        root_ca,
        signing_ca,
        cluster_signing_duration: opts.cluster_signing_duration,
        controllers,
    };
    // On the heap: the joined controllers make a future of hundreds of kilobytes, which a debug
    // build would copy into every frame that moves it (the select, the elector) until the main
    // thread's stack runs out.
    let work = Box::pin(run_controllers(ctx, started));
    tokio::pin!(shutdown);
    if !opts.leader_elect {
        return tokio::select! {
            r = work => r,
            () = &mut shutdown => Ok(()),
        };
    }
    // Step 2.
    let cfg = client::leaderelection::Config::new(&opts.lease_namespace, &opts.lease_name);
    let mut elector = client::leaderelection::LeaderElector::new(client, cfg);
    tracing::info!(target: "controllers", identity = elector.identity(), lease = %format!("{}/{}", opts.lease_namespace, opts.lease_name), "waiting to lead");
    // Step 3.
    let result = tokio::select! {
        r = elector.run(work) => r.map_err(Error::from).and_then(|r| r),
        () = &mut shutdown => Ok(()),
    };
    // Step 4 (the controllers were dropped with the select: nothing acts after the release).
    elector.release().await;
    result
}

/// What [`run_controllers`] starts the controllers with, read in step 1.
struct Started {
    node_lifecycle: nodelifecycle::Options,
    max_endpoints_per_slice: usize,
    root_ca: Option<String>,
    signing_ca: Option<std::sync::Arc<pki::CertificateAuthority>>,
    cluster_signing_duration: Duration,
    /// `--controllers`, canonical.
    controllers: Vec<String>,
}

/// A controller's run when `--controllers` turns it on; its client is asked for only then.
async fn run_if(enabled: bool, run: impl Future<Output = Result<()>>) -> Result<()> {
    if enabled { run.await } else { Ok(()) }
}

/// Every controller `--controllers` turns on, concurrently (the root CA publisher when there is
/// a CA to publish, the CSR signer when there is one to sign with), each watching with `ctx`'s
/// informer client and acting with the client `ctx` gives it under its Kubernetes service
/// account name; the first error ends them all.
async fn run_controllers(ctx: controller_context::ControllerContext, s: Started) -> Result<()> {
    let on = |name: &str| names::is_controller_enabled(name, &s.controllers);
    let running: Vec<&str> = names::CONTROLLERS
        .iter()
        .map(|(name, _)| *name)
        .filter(|n| on(n))
        .filter(|n| *n != names::ROOT_CA_CERTIFICATE_PUBLISHER || s.root_ca.is_some())
        .filter(|n| *n != names::CSR_SIGNING || s.signing_ca.is_some())
        .collect();
    tracing::info!(target: "controllers", controllers = %running.join(", "), "starting controllers");
    let ctx = &ctx;
    tokio::try_join!(
        Box::pin(run_if(on(names::NAMESPACE), async { namespace::NamespaceController::new(ctx.informers.clone(), ctx.client("namespace-controller").await?).run().await })),
        Box::pin(run_if(on(names::NODE_LIFECYCLE), async {
            nodelifecycle::NodeLifecycleController::new(ctx.informers.clone(), ctx.client("node-controller").await?, s.node_lifecycle.clone()).run().await
        })),
        // As in Kubernetes, the taint eviction controller uses the node controller's account
        // (and so its role): there is no taint-eviction-controller role.
        Box::pin(run_if(on(names::TAINT_EVICTION), async {
            tainteviction::TaintEvictionController::new(ctx.informers.clone(), ctx.client("node-controller").await?).run().await
        })),
        Box::pin(run_if(on(names::DISRUPTION), async {
            disruption::DisruptionController::new(ctx.informers.clone(), ctx.client("disruption-controller").await?).run().await
        })),
        Box::pin(run_if(on(names::REPLICASET), async {
            replicaset::ReplicaSetController::new(ctx.informers.clone(), ctx.client("replicaset-controller").await?).run().await
        })),
        Box::pin(run_if(on(names::DEPLOYMENT), async {
            deployment::DeploymentController::new(ctx.informers.clone(), ctx.client("deployment-controller").await?).run().await
        })),
        Box::pin(run_if(on(names::DAEMONSET), async {
            daemon::DaemonSetsController::new(ctx.informers.clone(), ctx.client("daemon-set-controller").await?).run().await
        })),
        Box::pin(run_if(on(names::STATEFULSET), async {
            statefulset::StatefulSetController::new(ctx.informers.clone(), ctx.client("statefulset-controller").await?).run().await
        })),
        Box::pin(run_if(on(names::JOB), async { job::JobController::new(ctx.informers.clone(), ctx.client("job-controller").await?).run().await })),
        Box::pin(run_if(on(names::TTL_AFTER_FINISHED), async {
            ttlafterfinished::TtlAfterFinishedController::new(ctx.informers.clone(), ctx.client("ttl-after-finished-controller").await?).run().await
        })),
        Box::pin(run_if(on(names::CRONJOB), async {
            cronjob::CronJobController::new(ctx.informers.clone(), ctx.client("cronjob-controller").await?).run().await
        })),
        Box::pin(run_if(on(names::ENDPOINTS), async {
            endpoint::EndpointsController::new(ctx.informers.clone(), ctx.client("endpoint-controller").await?).run().await
        })),
        Box::pin(run_if(on(names::ENDPOINTSLICE), async {
            endpointslice::EndpointSliceController::new(ctx.informers.clone(), ctx.client("endpointslice-controller").await?, s.max_endpoints_per_slice)
                .run()
                .await
        })),
        Box::pin(run_if(on(names::CLUSTERROLE_AGGREGATION), async {
            clusterroleaggregation::ClusterRoleAggregationController::new(ctx.informers.clone(), ctx.client("clusterrole-aggregation-controller").await?)
                .run()
                .await
        })),
        Box::pin(run_if(on(names::ROOT_CA_CERTIFICATE_PUBLISHER), async {
            match &s.root_ca {
                Some(ca) => {
                    certificates::rootcacertpublisher::Publisher::new(ctx.informers.clone(), ctx.client("root-ca-cert-publisher").await?, ca.clone())
                        .run()
                        .await
                }
                None => Ok(()),
            }
        })),
        Box::pin(run_if(on(names::GARBAGE_COLLECTOR), async {
            garbagecollector::GarbageCollector::new(ctx.informers.clone(), ctx.client("generic-garbage-collector").await?).run().await
        })),
        // The three CSR controllers act as one account, as in Kubernetes.
        Box::pin(run_if(on(names::CSR_APPROVING), async {
            certificates::approver::sarapprove::SarApprover::controller(ctx.informers.clone(), ctx.client("certificate-controller").await?).run().await
        })),
        Box::pin(run_if(on(names::CSR_SIGNING), async {
            match &s.signing_ca {
                Some(ca) => {
                    let client = ctx.client("certificate-controller").await?;
                    certificates::signer::signer::Signer::controller(ctx.informers.clone(), client, ca.clone(), s.cluster_signing_duration).run().await
                }
                None => Ok(()),
            }
        })),
        Box::pin(run_if(on(names::CSR_CLEANER), async {
            certificates::cleaner::cleaner::CsrCleanerController::new(ctx.informers.clone(), ctx.client("certificate-controller").await?).run().await
        })),
        Box::pin(run_if(on(names::TOKEN_CLEANER), async {
            bootstrap::tokencleaner::TokenCleaner::new(ctx.informers.clone(), ctx.client("token-cleaner").await?).run().await
        })),
        Box::pin(run_if(on(names::PERSISTENT_VOLUME_BINDER), async {
            volume::persistentvolume::PersistentVolumeController::new(ctx.informers.clone(), ctx.client("persistent-volume-binder").await?).run().await
        })),
        Box::pin(run_if(on(names::PERSISTENT_VOLUME_ATTACH_DETACH), async {
            volume::attachdetach::AttachDetachController::new(ctx.informers.clone(), ctx.client("attachdetach-controller").await?).run().await
        })),
        Box::pin(run_if(on(names::PERSISTENT_VOLUME_CLAIM_PROTECTION), async {
            volume::pvcprotection::PvcProtectionController::new(ctx.informers.clone(), ctx.client("pvc-protection-controller").await?).run().await
        })),
        Box::pin(run_if(on(names::PERSISTENT_VOLUME_PROTECTION), async {
            volume::pvprotection::PvProtectionController::new(ctx.informers.clone(), ctx.client("pv-protection-controller").await?).run().await
        })),
    )?;
    Ok(())
}
