//! Mirrors kubelet's pkg/kubelet/pluginmanager: how plugins running on the node (here CSI
//! drivers, through their node-driver-registrar) make themselves known to the node agent.
//!
//! A plugin serves the plugin registration service (`pluginregistration.Registration`) on a
//! socket in `<root>/plugins_registry/`. The plugin manager, until shutdown:
//! 1. **Watches** the directory ([`plugin_watcher`]): the sockets in it, each with the time it
//!    appeared, are the desired state of the world.
//! 2. **Reconciles** ([`reconciler`]) it with the plugins it registered (the actual state): a new
//!    (or re-created) socket is registered, a vanished one unregistered.
//! 3. **Registers** one plugin ([`operation_executor`]): GetInfo on its socket; the handler of
//!    its type (only `CSIPlugin`: [`crate::volumemanager::csi::registration_handler`]) validates
//!    and registers it; NotifyRegistrationStatus tells the plugin the verdict. Unregistering
//!    calls the handler's DeRegisterPlugin.
//!
//! ## Implementation caveats
//! - The directory is polled every [`Options::poll_period`] (1 s): the agent has no inotify
//!   (fsnotify) dependency. A socket is noticed within a second of appearing.
//! - Only the `CSIPlugin` type has a handler; a `DevicePlugin` is refused (NotifyRegistrationStatus
//!   with the error), as a kubelet without that handler would.
//! - A failed registration is retried with a back-off doubling from 1 s to 2 min, for as long as
//!   the socket stays (kubelet retries on every reconcile, every second).

pub(crate) mod operation_executor;
pub(crate) mod plugin_watcher;
pub(crate) mod reconciler;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::watch;

use crate::error::Result;

/// `<root>/plugins_registry`: where plugins put their registration sockets.
pub(crate) const PLUGINS_REGISTRY_DIR: &str = "plugins_registry";
/// The plugin type whose handler is the CSI volume plugin.
pub(crate) const CSI_PLUGIN_TYPE: &str = "CSIPlugin";

/// `<root>/plugins_registry`.
pub(crate) fn plugins_registry_dir(root: &Path) -> PathBuf {
    root.join(PLUGINS_REGISTRY_DIR)
}

/// Timings, shrunk by the tests.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    /// How often the registry directory is read.
    pub(crate) poll_period: Duration,
    /// How long GetInfo and NotifyRegistrationStatus may take.
    pub(crate) call_timeout: Duration,
    /// The first and the longest wait before a failed registration is tried again.
    pub(crate) retry_backoff: (Duration, Duration),
}

impl Default for Options {
    fn default() -> Options {
        Options {
            poll_period: Duration::from_secs(1),
            call_timeout: Duration::from_secs(10),
            retry_backoff: (Duration::from_secs(1), Duration::from_secs(120)),
        }
    }
}

/// What a plugin type's consumer does with its plugins (kubelet's cache.PluginHandler). The
/// CSI volume plugin is the one implementation the agent runs; the tests give a fake.
pub(crate) trait PluginHandler: Send + Sync {
    /// Whether the plugin can be registered (its versions): an error refuses it.
    fn validate_plugin(&self, name: &str, endpoint: &str, versions: &[String]) -> Result<()>;
    /// Register it: from now on the agent uses `endpoint`.
    fn register_plugin<'a>(&'a self, name: &'a str, endpoint: &'a str, versions: &'a [String]) -> BoxFuture<'a, Result<()>>;
    /// Its socket went away.
    fn deregister_plugin<'a>(&'a self, name: &'a str) -> BoxFuture<'a, ()>;
}

/// Runs the plugin manager over `<root>/plugins_registry` until `shutdown` turns true, with
/// `csi` as the `CSIPlugin` handler.
pub(crate) async fn run(root: PathBuf, csi: Arc<dyn PluginHandler>, opts: Options, mut shutdown: watch::Receiver<bool>) {
    let dir = plugins_registry_dir(&root);
    if let Err(e) = tokio::fs::create_dir_all(&dir).await {
        tracing::warn!(target: "kubelet::pluginmanager", dir = %dir.display(), error = %e, "cannot create the plugin registry directory");
    }
    tracing::info!(target: "kubelet::pluginmanager", dir = %dir.display(), "plugin manager started");
    let mut reconciler = reconciler::Reconciler::new(csi, opts.clone());
    let mut tick = tokio::time::interval(opts.poll_period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            r = shutdown.changed() => if r.is_err() || *shutdown.borrow() { return },
        }
        let d = dir.clone();
        let desired = match tokio::task::spawn_blocking(move || plugin_watcher::scan(&d)).await {
            Ok(Ok(desired)) => desired,
            Ok(Err(e)) => {
                tracing::warn!(target: "kubelet::pluginmanager", dir = %dir.display(), error = %e, "reading the plugin registry directory");
                continue;
            }
            Err(e) => {
                tracing::warn!(target: "kubelet::pluginmanager", error = %e, "plugin watcher task");
                continue;
            }
        };
        reconciler.reconcile(&desired, tokio::time::Instant::now()).await;
    }
}
