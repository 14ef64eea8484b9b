//! # nodeagent — kubelab's kubelet
//!
//! Turns the pods bound to this node into running containers on containerd, through the CRI.
//! The flow, in the order the seed article tells it (and the modules that carry each step):
//!
//! 1. **Pod sources** ([`config`]): the API server (a watch of pods with
//!    `spec.nodeName=<node>`), the static manifest directory and an HTTP URL, merged into one
//!    desired set of pods. Static pods are defaulted and validated by the `api` crate, as the API
//!    server defaults and validates the others.
//! 2. **Admission** ([`lifecycle::predicate`]): does the pod fit what is left of the node?
//! 3. **The sync loop** ([`kubelet::sync_loop`]): syncLoop hands every update, PLEG event,
//!    probe change and eviction to the pod's worker, and runs housekeeping every 2 s
//!    ([`kubelet::pods`]: orphaned pods, mirror pods, cgroups and directories). Which pods are
//!    wanted is the pod manager's ([`pod::pod_manager`]).
//! 4. **Pod workers** ([`pod_workers`]): one actor per pod UID with a serial mailbox. A worker
//!    calls the Kubelet only through the [`pod_workers::PodSyncer`] trait (kubelet's
//!    `podSyncer`): SyncPod, SyncTerminatingPod, SyncTerminatedPod.
//! 5. **SyncPod** ([`kubelet`]): eight steps — pod cgroup ([`cm`]), data directory
//!    ([`kubelet::getters`]), volumes ([`volumemanager`], with service account tokens from
//!    [`token`], and persistentVolumeClaims staged and published by their CSI driver through
//!    [`volumemanager::csi`], after its VolumeAttachment is attached), pull secrets ([`credentialprovider`] reads both formats), then the runtime
//!    manager ([`kuberuntime::kuberuntime_manager`], where `compute_pod_actions` decides): sandbox
//!    with CNI ([`kuberuntime::kuberuntime_sandbox`], [`network`]), init containers in order, app
//!    containers in parallel ([`kuberuntime::kuberuntime_container`], each with its Services'
//!    environment variables from [`envvars`]), each image first made present
//!    ([`kuberuntime::kuberuntime_image`]: the pull policy, a CRI pull when it must, tried with
//!    every credential whose key matches the image — the pod's pull secrets, then the node's
//!    docker config, then the credential provider exec plugins ([`credentialprovider`]: host
//!    globs, path prefixes, longest key first) — one at a time or several ([`images::puller`]),
//!    back-off); then the status ([`status`]).
//! 6. **PLEG** ([`pleg`]): relists the runtime every second and wakes the worker of any pod whose
//!    containers changed.
//! 7. **Status manager** ([`status`]): the source of truth for pod status, written to the API
//!    server's `pods/status`.
//! 8. **Node status** ([`nodestatus`]): registration, a Lease renewed every 10 s, conditions,
//!    `volumesInUse` (the CSI volumes the node's pods use).
//! 9. **HTTPS server** ([`server`]): container logs, exec and attach, port-forward (carried to
//!    containerd's CRI PortForward, which dials inside the pod's network namespace), `/healthz`,
//!    `/pods`, `/metrics` — over TLS ([`server::tls`]), each request authenticated (client
//!    certificate, a bearer token the API server reviews, or anonymous) and authorized (always,
//!    or by a SubjectAccessReview on `nodes/<subresource>`) first ([`server::auth`]).
//! 10. **Garbage collection and eviction**: dead containers and sandboxes every minute
//!     ([`kuberuntime::kuberuntime_gc`]), unused images when the image filesystem fills
//!     ([`images::image_gc_manager`]), and the eviction manager ([`eviction`]), which reports
//!     memory/disk/PID pressure as node conditions, refuses pods under pressure, and evicts one
//!     pod per interval when a hard threshold is met. It reads the node through the stats
//!     provider ([`stats`], which the node status reads too) and acts through an active-pods
//!     and a kill-pod function: it does not know the Kubelet.
//! 11. **Probes** ([`prober`]): one worker per container and probe; a changed result resyncs the
//!     pod, whose status takes `ready`/`started` from it and whose containers are killed when
//!     their liveness or startup probe fails.
//! 12. **Plugin registration** ([`pluginmanager`]): CSI drivers announce themselves with a
//!     socket in `<root>/plugins_registry/`; the plugin manager asks it GetInfo, and the CSI
//!     handler ([`volumemanager::csi::registration_handler`]) remembers the driver's endpoint,
//!     asks the driver NodeGetInfo and publishes the answer in the node's CSINode, its
//!     `csi.volume.kubernetes.io/nodeid` annotation and its topology labels
//!     ([`volumemanager::csi::nodeinfomanager`]).
//!
//! What a pod means — its QoS class, whether it is static, a mirror, critical or terminal, its UID
//! and restart policy — is asked of the `api` crate ([`api::pod`],
//! [`api::core::v1::helper::qos`]), which the API server, the scheduler and the controllers
//! share.
//!
//! The order of work at start ([`run()`]): TLS bootstrap when `--bootstrap-kubeconfig` is given
//! and `--kubeconfig` has no good client certificate ([`certificate::bootstrap`]: a
//! CertificateSigningRequest for `system:node:<name>`, waited for, stored in `--cert-dir` as
//! `kubelet-client-current.pem`, and `--kubeconfig` written for it), connect to the runtime, import images, write the CNI
//! config, create the QoS cgroups, start the status manager, node status, the plugin manager
//! (once the Node is registered, with the node's empty CSINode), PLEG, the pod sources,
//! the Kubelet (built from one [`kubelet::Dependencies`], its image manager with the credential
//! provider plugins registered, [`credentialprovider::plugin`]; [`Options::validate`] refuses a
//! config kubelet would refuse, before anything starts), the HTTPS server, garbage collection
//! and the eviction manager, then run the sync loop until shutdown.
//!
//! ## Failpoints (tests only)
//! With the `failpoints` feature (the `kubelab-failpoints` binary; never `kubelab`), [`failpoint`]
//! puts etcd's gofail failpoints between the steps of SyncPod and of a pod's end, for the
//! crash-restart test (`e2e/tests/nodeagent_crash.rs`): `KUBELAB_FAILPOINTS=name=1*panic` ends
//! the agent right there. Without the feature every site compiles to nothing.
//!
//! ## Public surface
//! Everything else is `pub(crate)`. What other crates use:
//! - [`run()`], its [`Options`] and [`system`] (the actix System it runs in): `kubelab
//!   nodeagent` and `kubelab up`.
//! - [`Error`] and [`Result`].
//! - [`cri`]: [`cri::RemoteRuntime`] (the CRI client), [`cri::api`] (the CRI messages) and
//!   [`cri::containerd_config`] (the containerd configuration the agent expects): `kubelab
//!   containerd-config`, `kubelab up` and the end-to-end tests' private containerd.
//! - [`images`]: [`images::ImageImporter`] and [`images::parse_imported`] (image tarballs into
//!   containerd), [`images::ImageGcPolicy`] (`--image-gc-*`), [`images::PullOptions`]
//!   (`--serialize-image-pulls`, `--max-parallel-image-pulls`).
//! - [`network::cni`]: [`network::cni::PodCidr`] (with its gateway), [`network::cni::bridge_name`]
//!   and [`network::cni::write_conflist`]: `kubelab up` makes the bridge early, for the cluster
//!   DNS to listen on.
//! - [`cm`]: [`cm::CgroupDriver`] (`--cgroup-driver`, and [`cm::CgroupDriver::detect`], which
//!   containerd's configs ask to set `SystemdCgroup` to match), [`cm::CgroupVersion`],
//!   [`cm::cgroup_version`] (which hierarchy the host mounts) and [`cm::check_host`].
//! - [`server`]: [`server::tls::TlsOptions`] and [`server::auth::AuthOptions`] with
//!   [`server::auth::AuthorizationMode`] (the port's certificate and who may call it).
//! - [`eviction`]: [`eviction::Config`] with its [`eviction::Threshold`]s,
//!   [`eviction::parse_threshold_config`] (`--eviction-hard`, failing with an
//!   [`eviction::ThresholdError`]) and [`eviction::DEFAULT_EVICTION_HARD`].
//!
//! The fake CRI runtime (`cri::fake`) the unit tests drive the agent with, and the fake CSI driver
//! and registrar (`volumemanager::csi::fake`), are compiled for the unit tests only: nothing
//! outside this crate uses them, and the binary does not contain them.
//!
//! ## Implementation caveats
//! - cgroups ([`cm`]): v1 with the cgroupfs driver, v2 with the cgroupfs or the systemd driver;
//!   not systemd on v1.
//! - Garbage collection ([`kuberuntime::kuberuntime_gc`], [`images::image_gc_manager`]) and
//!   eviction ([`eviction`]) know hard thresholds only.
//! - Probes ([`prober`]) have their own caveats.
//! - Pod DNS ([`network::dns`]): ClusterFirst pods get `--cluster-dns`; without it they get the
//!   node's resolv.conf, as the kubelet does. The node's resolv.conf is read once, at start.
//! - The termination message file (`terminationMessagePath`) is not mounted.
//! - Secrets and configMaps are read from the API server on every sync (no watch-based cache).
//! - Volumes ([`volumemanager`]): CSI persistent volumes only among the network volume types, set
//!   up in the pod's sync (a VolumeAttachment is waited for 15 s a sync, not 10 minutes in a
//!   reconciler); see [`volumemanager::csi`]'s caveats. The plugin registry directory is polled
//!   every second ([`pluginmanager`]: no inotify).
//! - The HTTPS server ([`server::auth`]): a client certificate of another CA fails the handshake
//!   (the kubelet answers 401); only the stable subresources are authorized (no fine-grained
//!   `nodes/pods`, `nodes/healthz`); a self-signed serving certificate is never rotated and none
//!   is asked for by CSR; no read-only port.
//! - TLS bootstrap ([`certificate`]) runs once, at start: no client certificate rotation
//!   (`--rotate-certificates`), a request named by `generateName` rather than the kubelet's
//!   digest of key, subject and usages, and no wait for the API server's `/healthz` first.
//! - Image pulls ([`kuberuntime::kuberuntime_image`], [`credentialprovider`]): credential
//!   provider plugins get no service account token (`tokenAttributes` is refused, as kubelet
//!   refuses it with its feature gate off); `--image-credential-provider-config` is one file, not
//!   a directory of them; runs waiting on a plugin's run for the same image share its answer
//!   through the cache only, so a failed run is run again by each. Pull secrets are told apart by
//!   their key, not their `type`, and one that is not JSON is skipped with a warning (kubelet
//!   fails the pull). Docker Hub credentials go to containerd without a server address
//!   (containerd pulls Docker Hub's images from another host than it names).

// Every item is `pub(crate)` unless it is on the public surface listed above.
#![warn(unreachable_pub)]
// The tour links the internal modules it walks through: read it with
// `cargo doc -p nodeagent --document-private-items`.
#![allow(rustdoc::private_intra_doc_links)]

// First: the modules after it use its `failpoint!` macro.
#[macro_use]
pub(crate) mod failpoint;
pub(crate) mod certificate;
pub mod cm;
pub(crate) mod config;
pub(crate) mod container;
pub(crate) mod credentialprovider;
pub(crate) mod envvars;
pub mod cri;
mod error;
pub(crate) mod events;
pub mod eviction;
pub(crate) mod flowcontrol;
pub(crate) mod format;
pub mod images;
pub(crate) mod kubelet;
pub(crate) mod kuberuntime;
pub(crate) mod lifecycle;
pub(crate) mod metrics;
pub mod network;
pub(crate) mod nodestatus;
pub(crate) mod pleg;
pub(crate) mod pluginmanager;
pub(crate) mod pod;
pub(crate) mod pod_workers;
pub(crate) mod prober;
mod run;
pub mod server;
pub(crate) mod stats;
pub(crate) mod status;
pub(crate) mod token;
pub(crate) mod volumemanager;

#[cfg(test)]
mod testing;

pub use error::{Error, Result};
pub use run::{Options, run, system};
