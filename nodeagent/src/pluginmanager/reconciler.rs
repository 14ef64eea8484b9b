//! Mirrors pkg/kubelet/pluginmanager/reconciler/reconciler.go: the actual state of the world (the
//! plugins the agent registered) brought to the desired one (the sockets in the directory).
//!
//! [`actions`] is the decision, pure: a socket that is gone, or was re-created since it was
//! registered, is unregistered; a socket not registered (or re-created) is registered.
//! Unregistering comes first, so a restarted driver is registered afresh.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::operation_executor::{self, RegisteredPlugin};
use super::plugin_watcher::DesiredState;
use super::{Options, PluginHandler};

/// One step of the reconciliation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    Unregister(PathBuf),
    Register(PathBuf),
}

/// What to do to bring `actual` (socket → the creation time it was registered with) to `desired`.
pub(crate) fn actions(desired: &DesiredState, actual: &BTreeMap<PathBuf, SystemTime>) -> Vec<Action> {
    let mut out = Vec::new();
    for (path, registered_at) in actual {
        if desired.get(path) != Some(registered_at) {
            out.push(Action::Unregister(path.clone()));
        }
    }
    for (path, created_at) in desired {
        if actual.get(path) != Some(created_at) {
            out.push(Action::Register(path.clone()));
        }
    }
    out
}

/// A registration that failed: not tried again before `next` (unless the socket is re-created).
#[derive(Clone, Debug)]
struct Failure {
    created_at: SystemTime,
    next: Instant,
    backoff: Duration,
}

/// The actual state of the world and the way to change it.
pub(crate) struct Reconciler {
    csi: Arc<dyn PluginHandler>,
    opts: Options,
    registered: BTreeMap<PathBuf, (SystemTime, RegisteredPlugin)>,
    failures: BTreeMap<PathBuf, Failure>,
}

impl Reconciler {
    pub(crate) fn new(csi: Arc<dyn PluginHandler>, opts: Options) -> Reconciler {
        Reconciler { csi, opts, registered: BTreeMap::new(), failures: BTreeMap::new() }
    }

    /// The registered plugins' names, by socket.
    #[cfg(test)]
    pub(crate) fn registered(&self) -> BTreeMap<PathBuf, String> {
        self.registered.iter().map(|(p, (_, r))| (p.clone(), r.name.clone())).collect()
    }

    pub(crate) async fn reconcile(&mut self, desired: &DesiredState, now: Instant) {
        self.failures.retain(|path, f| desired.get(path) == Some(&f.created_at));
        let actual: BTreeMap<PathBuf, SystemTime> = self.registered.iter().map(|(p, (t, _))| (p.clone(), *t)).collect();
        for action in actions(desired, &actual) {
            match action {
                Action::Unregister(path) => {
                    if let Some((_, plugin)) = self.registered.remove(&path) {
                        tracing::info!(target: "kubelet::pluginmanager", socket = %path.display(), plugin = %plugin.name, "unregistering plugin");
                        operation_executor::unregister_plugin(&plugin, self.csi.as_ref()).await;
                    }
                }
                Action::Register(path) => {
                    let Some(&created_at) = desired.get(&path) else { continue };
                    if self.failures.get(&path).is_some_and(|f| now < f.next) {
                        continue;
                    }
                    match operation_executor::register_plugin(&path, self.csi.as_ref(), self.opts.call_timeout).await {
                        Ok(plugin) => {
                            tracing::info!(target: "kubelet::pluginmanager", socket = %path.display(), plugin = %plugin.name, r#type = %plugin.r#type, "plugin registered");
                            self.failures.remove(&path);
                            self.registered.insert(path, (created_at, plugin));
                        }
                        Err(e) => {
                            let (first, max) = self.opts.retry_backoff;
                            let backoff = self.failures.get(&path).map_or(first, |f| (f.backoff * 2).min(max));
                            tracing::warn!(target: "kubelet::pluginmanager", socket = %path.display(), error = %e, retry_in_s = backoff.as_secs_f64(), "plugin registration failed");
                            self.failures.insert(path, Failure { created_at, next: now + backoff, backoff });
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(s)
    }

    /// A fake driver's registration socket appears: GetInfo, the handler registers it, the plugin
    /// hears it is registered. A plugin of a type without a handler is refused and told why. The
    /// socket goes: the handler deregisters it.
    #[tokio::test]
    async fn registers_and_unregisters_through_the_socket() -> crate::Result<()> {
        use crate::volumemanager::csi::fake::{FakeHandler, FakeRegistration, serve_registration};
        use proto::pluginregistration::PluginInfo;

        let dir = tempfile::tempdir().map_err(|e| crate::Error::io("tempdir", e))?;
        let info = |r#type: &str, name: &str| PluginInfo {
            r#type: r#type.into(),
            name: name.into(),
            endpoint: format!("/var/lib/kubelab/plugins/{name}/csi.sock"),
            supported_versions: vec!["1.0.0".into()],
        };
        let good = FakeRegistration { info: info("CSIPlugin", "fake.csi.kubelab.io"), ..Default::default() };
        let bad = FakeRegistration { info: info("DevicePlugin", "gpu"), ..Default::default() };
        let good_sock = dir.path().join("fake.csi.kubelab.io-reg.sock");
        let bad_sock = dir.path().join("gpu-reg.sock");
        serve_registration(&good_sock, good.clone()).map_err(|e| crate::Error::io(&good_sock, e))?;
        serve_registration(&bad_sock, bad.clone()).map_err(|e| crate::Error::io(&bad_sock, e))?;

        let handler = Arc::new(FakeHandler::default());
        let mut reconciler = Reconciler::new(handler.clone(), Options::default());
        let now = Instant::now();
        reconciler.reconcile(&super::super::plugin_watcher::scan(dir.path())?, now).await;
        assert_eq!(reconciler.registered().into_values().collect::<Vec<_>>(), vec!["fake.csi.kubelab.io".to_string()]);
        let statuses = good.statuses.lock().unwrap_or_else(|e| e.into_inner()).clone();
        assert_eq!(statuses.len(), 1);
        assert!(statuses[0].plugin_registered && statuses[0].error.is_empty(), "{statuses:?}");
        let refused = bad.statuses.lock().unwrap_or_else(|e| e.into_inner()).clone();
        assert_eq!(refused.len(), 1);
        assert!(!refused[0].plugin_registered);
        assert!(refused[0].error.contains("no handler registered for plugin type: DevicePlugin"), "{refused:?}");

        // Nothing new: nothing happens (the refused one waits for its back-off).
        reconciler.reconcile(&super::super::plugin_watcher::scan(dir.path())?, now).await;
        assert_eq!(good.statuses.lock().unwrap_or_else(|e| e.into_inner()).len(), 1);
        assert_eq!(bad.statuses.lock().unwrap_or_else(|e| e.into_inner()).len(), 1);

        std::fs::remove_file(&good_sock).map_err(|e| crate::Error::io(&good_sock, e))?;
        reconciler.reconcile(&super::super::plugin_watcher::scan(dir.path())?, now).await;
        assert!(reconciler.registered().is_empty());
        let events = handler.events.lock().unwrap_or_else(|e| e.into_inner()).clone();
        assert_eq!(
            events,
            vec!["register fake.csi.kubelab.io /var/lib/kubelab/plugins/fake.csi.kubelab.io/csi.sock".to_string(), "deregister fake.csi.kubelab.io".to_string()]
        );
        Ok(())
    }

    #[test]
    fn actions_table() {
        let p = |s: &str| PathBuf::from(s);
        let map = |v: &[(&str, u64)]| v.iter().map(|(k, s)| (p(k), t(*s))).collect::<BTreeMap<_, _>>();
        type Case = (BTreeMap<PathBuf, SystemTime>, BTreeMap<PathBuf, SystemTime>, Vec<Action>);
        let cases: Vec<Case> = vec![
            (map(&[]), map(&[]), vec![]),
            (map(&[("a", 1)]), map(&[]), vec![Action::Register(p("a"))]),
            (map(&[("a", 1)]), map(&[("a", 1)]), vec![]),
            (map(&[]), map(&[("a", 1)]), vec![Action::Unregister(p("a"))]),
            // Re-created: unregister, then register again.
            (map(&[("a", 2)]), map(&[("a", 1)]), vec![Action::Unregister(p("a")), Action::Register(p("a"))]),
            (map(&[("a", 1), ("b", 1)]), map(&[("b", 1), ("c", 1)]), vec![Action::Unregister(p("c")), Action::Register(p("a"))]),
        ];
        for (desired, actual, want) in cases {
            assert_eq!(actions(&desired, &actual), want, "desired {desired:?} actual {actual:?}");
        }
    }
}
