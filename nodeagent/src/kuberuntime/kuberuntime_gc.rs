//! Mirrors kubelet's kuberuntime/kuberuntime_gc.go: container garbage collection.
//!
//! Every restart of a container leaves the dead instance behind in the runtime (and its log
//! file on disk); every new sandbox leaves the old one. Once a minute (and when the eviction
//! manager needs disk back) [`ContainerGc::garbage_collect`] removes:
//!
//! 1. dead containers beyond the newest [`GcPolicy::max_per_pod_container`] of each
//!    (pod, container name) — the newest dead one stays for `kubectl logs --previous` — together
//!    with their log files;
//! 2. every dead container of a pod no source wants any more;
//! 3. sandboxes that are not ready and hold no container: all of them for a pod that is gone,
//!    all but the newest for a pod that still exists;
//! 4. the log directories of pods that are gone and have nothing left in the runtime.
//!
//! The decision ([`compute_gc`]) is a pure function of what the runtime lists, table-tested
//! below. Running containers and ready sandboxes are never touched: stopping things is the pod
//! workers' job (housekeeping in [`crate::kubelet::pods`] kills running pods nobody wants, and a
//! removed pod's worker removes its containers at once). GC is the backstop that catches what
//! those leave behind — dead restarts, sandboxes of earlier attempts, a removal that failed or
//! was cut short by an agent restart.
//!
//! Pods that "no longer exist" are judged only once every pod source has delivered its pods
//! (`sources_ready`), as kubelet's `allSourcesReady`: right after a restart the API server's
//! pods are not known yet, and their dead containers must survive.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_cri::v1 as api;

use crate::container as kc;
use crate::cri::RemoteRuntime;
use crate::error::Result;

/// How many dead instances of each container are kept (kubelet's
/// `--maximum-dead-containers-per-container`, default 1).
pub(crate) const MAX_PER_POD_CONTAINER: usize = 1;

/// How often the agent collects garbage (kubelet's ContainerGCPeriod).
pub(crate) const CONTAINER_GC_PERIOD: std::time::Duration = std::time::Duration::from_secs(60);

/// kubelet's GCPolicy (MinAge is 0 by default and kubelab has no global MaxContainers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GcPolicy {
    pub(crate) max_per_pod_container: usize,
}

impl Default for GcPolicy {
    fn default() -> GcPolicy {
        GcPolicy { max_per_pod_container: MAX_PER_POD_CONTAINER }
    }
}

/// A container as GC sees it (containerGCInfo).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GcContainer {
    pub(crate) id: String,
    pub(crate) pod_uid: String,
    pub(crate) name: String,
    pub(crate) sandbox_id: String,
    pub(crate) created_at: i64,
    pub(crate) running: bool,
}

/// A sandbox as GC sees it (sandboxGCInfo).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GcSandbox {
    pub(crate) id: String,
    pub(crate) pod_uid: String,
    pub(crate) created_at: i64,
    pub(crate) ready: bool,
}

/// What one pass removes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct GcPlan {
    pub(crate) containers: Vec<String>,
    pub(crate) sandboxes: Vec<String>,
}

/// The pure decision of one GC pass. `pod_exists(uid)` says whether some source still wants
/// the pod; it is consulted only when `sources_ready`.
pub(crate) fn compute_gc(
    containers: &[GcContainer],
    sandboxes: &[GcSandbox],
    pod_exists: impl Fn(&str) -> bool,
    sources_ready: bool,
    policy: GcPolicy,
) -> GcPlan {
    let gone = |uid: &str| sources_ready && !pod_exists(uid);
    let mut plan = GcPlan::default();

    // Steps 1 and 2: dead containers by (pod, name), newest first (evictContainers).
    let mut groups: BTreeMap<(&str, &str), Vec<&GcContainer>> = BTreeMap::new();
    for c in containers.iter().filter(|c| !c.running) {
        groups.entry((c.pod_uid.as_str(), c.name.as_str())).or_default().push(c);
    }
    for ((uid, _), mut dead) in groups {
        dead.sort_by(|a, b| b.created_at.cmp(&a.created_at).then_with(|| b.id.cmp(&a.id)));
        let keep = if gone(uid) { 0 } else { policy.max_per_pod_container };
        plan.containers.extend(dead.iter().skip(keep).map(|c| c.id.clone()));
    }

    // Step 3: sandboxes (evictSandboxes). One is active while ready or while any container that
    // stays after this pass belongs to it.
    let removed: HashSet<&str> = plan.containers.iter().map(String::as_str).collect();
    let holding: HashSet<&str> =
        containers.iter().filter(|c| !removed.contains(c.id.as_str())).map(|c| c.sandbox_id.as_str()).collect();
    let mut by_pod: BTreeMap<&str, Vec<&GcSandbox>> = BTreeMap::new();
    for s in sandboxes {
        by_pod.entry(s.pod_uid.as_str()).or_default().push(s);
    }
    for (uid, mut list) in by_pod {
        list.sort_by(|a, b| b.created_at.cmp(&a.created_at).then_with(|| b.id.cmp(&a.id)));
        let keep = if gone(uid) { 0 } else { 1 };
        plan.sandboxes.extend(
            list.iter().skip(keep).filter(|s| !s.ready && !holding.contains(s.id.as_str())).map(|s| s.id.clone()),
        );
    }
    plan
}

/// The pod UID of a log directory `<namespace>_<name>_<uid>` (names cannot hold `_`).
pub(crate) fn log_dir_pod_uid(dir_name: &str) -> Option<&str> {
    dir_name.rsplit_once('_').map(|(_, uid)| uid).filter(|u| !u.is_empty())
}

/// Whether some pod source still wants the pod with this UID: what GC asks of the rest of the
/// agent (kubelet's podStateProvider, given to its container GC when it is built).
pub(crate) type PodExistsFunc = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// Runs GC passes against the runtime.
pub(crate) struct ContainerGc {
    runtime: RemoteRuntime,
    logs_root: PathBuf,
    policy: GcPolicy,
    pod_exists: PodExistsFunc,
    /// One pass at a time: the periodic loop and the eviction manager both call in.
    running: tokio::sync::Mutex<()>,
}

impl ContainerGc {
    pub(crate) fn new(runtime: RemoteRuntime, logs_root: PathBuf, policy: GcPolicy, pod_exists: PodExistsFunc) -> ContainerGc {
        ContainerGc { runtime, logs_root, policy, pod_exists, running: tokio::sync::Mutex::new(()) }
    }

    /// GarbageCollect: list, decide, remove. Returns what was removed.
    pub(crate) async fn garbage_collect(&self, sources_ready: bool) -> Result<GcPlan> {
        let pod_exists = &*self.pod_exists;
        let _one = self.running.lock().await;
        let containers: Vec<GcContainer> = self.runtime.list_containers(None).await?.iter().filter_map(to_gc_container).collect();
        let sandboxes: Vec<GcSandbox> = self.runtime.list_pod_sandbox(None).await?.iter().filter_map(to_gc_sandbox).collect();
        let plan = compute_gc(&containers, &sandboxes, pod_exists, sources_ready, self.policy);

        for id in &plan.containers {
            // The log path is known only from the status: read it before the container goes.
            let log = match self.runtime.container_status(id).await {
                Ok(s) => (!s.log_path.is_empty()).then(|| PathBuf::from(s.log_path)),
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(e),
            };
            let c = containers.iter().find(|c| &c.id == id);
            tracing::info!(target: "kuberuntime::gc", container = %id, name = c.map(|c| c.name.as_str()).unwrap_or(""), pod_uid = c.map(|c| c.pod_uid.as_str()).unwrap_or(""), "removing a dead container");
            self.runtime.remove_container(id).await?;
            if let Some(log) = log {
                remove_container_log(&log).await;
            }
        }
        for id in &plan.sandboxes {
            tracing::info!(target: "kuberuntime::gc", sandbox = %id, "removing a dead sandbox");
            self.runtime.remove_pod_sandbox(id).await?;
        }

        // Step 4: log directories of pods that are gone and have nothing left in the runtime.
        if sources_ready {
            let left: HashSet<String> = containers
                .iter()
                .filter(|c| !plan.containers.contains(&c.id))
                .map(|c| c.pod_uid.clone())
                .chain(sandboxes.iter().filter(|s| !plan.sandboxes.contains(&s.id)).map(|s| s.pod_uid.clone()))
                .collect();
            let root = self.logs_root.clone();
            let dirs = tokio::task::spawn_blocking(move || list_dirs(&root)).await.unwrap_or_default();
            for d in dirs {
                let name = d.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                let Some(uid) = log_dir_pod_uid(&name) else { continue };
                if !pod_exists(uid) && !left.contains(uid) {
                    tracing::info!(target: "kuberuntime::gc", pod_uid = %uid, dir = %d.display(), "removing the log directory of a pod that is gone");
                    let _ = tokio::fs::remove_dir_all(&d).await;
                }
            }
        }
        Ok(plan)
    }
}

fn list_dirs(root: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(root)
        .map(|es| es.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// The container's log file and its rotated siblings (`0.log`, `0.log.<timestamp>`…).
async fn remove_container_log(log: &Path) {
    let (Some(dir), Some(name)) = (log.parent(), log.file_name().map(|n| n.to_string_lossy().into_owned())) else { return };
    if let Ok(mut entries) = tokio::fs::read_dir(dir).await {
        while let Ok(Some(e)) = entries.next_entry().await {
            let n = e.file_name().to_string_lossy().into_owned();
            if n == name || n.starts_with(&format!("{name}.")) {
                let _ = tokio::fs::remove_file(e.path()).await;
            }
        }
    }
}

fn to_gc_container(c: &api::Container) -> Option<GcContainer> {
    Some(GcContainer {
        id: c.id.clone(),
        pod_uid: c.labels.get(kc::POD_UID_LABEL)?.clone(),
        name: c.labels.get(kc::CONTAINER_NAME_LABEL).cloned().or_else(|| c.metadata.as_ref().map(|m| m.name.clone()))?,
        sandbox_id: c.pod_sandbox_id.clone(),
        created_at: c.created_at,
        running: c.state == api::ContainerState::ContainerRunning as i32,
    })
}

fn to_gc_sandbox(s: &api::PodSandbox) -> Option<GcSandbox> {
    Some(GcSandbox {
        id: s.id.clone(),
        pod_uid: s.labels.get(kc::POD_UID_LABEL)?.clone(),
        created_at: s.created_at,
        ready: s.state == api::PodSandboxState::SandboxReady as i32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(id: &str, pod: &str, name: &str, sandbox: &str, created: i64, running: bool) -> GcContainer {
        GcContainer { id: id.into(), pod_uid: pod.into(), name: name.into(), sandbox_id: sandbox.into(), created_at: created, running }
    }

    fn s(id: &str, pod: &str, created: i64, ready: bool) -> GcSandbox {
        GcSandbox { id: id.into(), pod_uid: pod.into(), created_at: created, ready }
    }

    #[test]
    fn gc_selection_table() {
        struct Case {
            name: &'static str,
            containers: Vec<GcContainer>,
            sandboxes: Vec<GcSandbox>,
            existing: &'static [&'static str],
            sources_ready: bool,
            want: GcPlan,
        }
        let plan = |cs: &[&str], ss: &[&str]| GcPlan {
            containers: cs.iter().map(|s| s.to_string()).collect(),
            sandboxes: ss.iter().map(|s| s.to_string()).collect(),
        };
        let cases = vec![
            Case {
                name: "a crashing container: the newest dead instance stays, older ones go",
                containers: vec![
                    c("c1", "p", "app", "sb", 1, false),
                    c("c2", "p", "app", "sb", 2, false),
                    c("c3", "p", "app", "sb", 3, false),
                    c("c4", "p", "app", "sb", 4, true),
                ],
                sandboxes: vec![s("sb", "p", 0, true)],
                existing: &["p"],
                sources_ready: true,
                want: plan(&["c2", "c1"], &[]),
            },
            Case {
                name: "each container name counts on its own",
                containers: vec![c("a1", "p", "a", "sb", 1, false), c("b1", "p", "b", "sb", 2, false), c("b0", "p", "b", "sb", 0, false)],
                sandboxes: vec![s("sb", "p", 0, true)],
                existing: &["p"],
                sources_ready: true,
                want: plan(&["b0"], &[]),
            },
            Case {
                name: "a pod that is gone: every dead container and every dead sandbox",
                containers: vec![c("c1", "gone", "app", "sb1", 1, false), c("c2", "gone", "app", "sb2", 2, false)],
                sandboxes: vec![s("sb1", "gone", 1, false), s("sb2", "gone", 2, false)],
                existing: &[],
                sources_ready: true,
                want: plan(&["c2", "c1"], &["sb2", "sb1"]),
            },
            Case {
                name: "a pod that is gone but still running something: only the dead parts",
                containers: vec![c("c1", "gone", "app", "sb1", 1, true), c("c0", "gone", "init", "sb1", 0, false)],
                sandboxes: vec![s("sb1", "gone", 1, true)],
                existing: &[],
                sources_ready: true,
                want: plan(&["c0"], &[]),
            },
            Case {
                name: "sources not ready: an unknown pod is not judged gone",
                containers: vec![c("c1", "later", "app", "sb1", 1, false), c("c0", "later", "app", "sb1", 0, false)],
                sandboxes: vec![s("sb1", "later", 1, false), s("sb0", "later", 0, false)],
                existing: &[],
                sources_ready: false,
                want: plan(&["c0"], &["sb0"]),
            },
            Case {
                name: "an existing pod: dead sandboxes beyond the newest go, unless a kept container is in one",
                containers: vec![c("c-old", "p", "app", "sb1", 1, false), c("c-new", "p", "app", "sb3", 3, true)],
                sandboxes: vec![s("sb1", "p", 1, false), s("sb2", "p", 2, false), s("sb3", "p", 3, true)],
                existing: &["p"],
                sources_ready: true,
                want: plan(&[], &["sb2"]),
            },
            Case {
                name: "a not-ready newest sandbox of an existing pod stays",
                containers: vec![],
                sandboxes: vec![s("sb1", "p", 1, false), s("sb2", "p", 2, false)],
                existing: &["p"],
                sources_ready: true,
                want: plan(&[], &["sb1"]),
            },
        ];
        for case in cases {
            let got = compute_gc(&case.containers, &case.sandboxes, |u| case.existing.contains(&u), case.sources_ready, GcPolicy::default());
            assert_eq!(got, case.want, "{}", case.name);
        }
    }

    #[test]
    fn log_directory_names() {
        assert_eq!(log_dir_pod_uid("default_web_1234-abcd"), Some("1234-abcd"));
        assert_eq!(log_dir_pod_uid("nounderscore"), None);
        assert_eq!(log_dir_pod_uid("ns_name_"), None);
    }

    /// Against the fake CRI: a container that crashed three times keeps exactly one dead
    /// instance, and its log file; the older ones' logs are gone.
    #[tokio::test]
    async fn crashing_container_keeps_one_dead_instance_with_its_log() {
        use crate::cri::fake::FakeRuntime;
        let dir = tempfile::tempdir().expect("tmp");
        let (fake, server) = FakeRuntime::start(dir.path()).await.expect("fake CRI");
        fake.add_image("busybox:1.36");
        let rt = RemoteRuntime::connect(&server.endpoint()).await.expect("connect");
        let logs = dir.path().join("logs");
        let pod_logs = logs.join("default_web_u1");
        let labels = std::collections::HashMap::from([(kc::POD_UID_LABEL.to_string(), "u1".to_string())]);
        let sandbox_config = api::PodSandboxConfig {
            metadata: Some(api::PodSandboxMetadata { name: "web".into(), uid: "u1".into(), namespace: "default".into(), attempt: 0 }),
            log_directory: pod_logs.to_string_lossy().into_owned(),
            labels: labels.clone(),
            ..Default::default()
        };
        let sb = rt.run_pod_sandbox(sandbox_config.clone(), "").await.expect("sandbox");
        let mut ids = vec![];
        for attempt in 0..3u32 {
            let mut l = labels.clone();
            l.insert(kc::CONTAINER_NAME_LABEL.into(), "app".into());
            let config = api::ContainerConfig {
                metadata: Some(api::ContainerMetadata { name: "app".into(), attempt }),
                image: Some(api::ImageSpec { image: "busybox:1.36".into(), ..Default::default() }),
                log_path: format!("app/{attempt}.log"),
                labels: l,
                ..Default::default()
            };
            let id = rt.create_container(&sb, config, sandbox_config.clone()).await.expect("create");
            rt.start_container(&id).await.expect("start");
            fake.exit_container(&id, 1);
            std::fs::create_dir_all(pod_logs.join("app")).expect("mkdir");
            std::fs::write(pod_logs.join(format!("app/{attempt}.log")), "crashed\n").expect("log");
            ids.push(id);
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
        let gc = ContainerGc::new(rt.clone(), logs.clone(), GcPolicy::default(), Arc::new(|u: &str| u == "u1"));
        let plan = gc.garbage_collect(true).await.expect("gc");
        assert_eq!(plan.containers, vec![ids[1].clone(), ids[0].clone()]);
        let left: Vec<String> = fake.containers().into_iter().map(|c| c.id).collect();
        assert_eq!(left, vec![ids[2].clone()], "exactly one dead instance stays");
        assert!(pod_logs.join("app/2.log").exists(), "the kept instance's log stays for --previous");
        assert!(!pod_logs.join("app/0.log").exists() && !pod_logs.join("app/1.log").exists());

        // The pod is deleted: the rest goes, sandbox and log directory too.
        rt.stop_pod_sandbox(&sb).await.expect("stop sandbox");
        let gc = ContainerGc::new(rt.clone(), logs.clone(), GcPolicy::default(), Arc::new(|_: &str| false));
        gc.garbage_collect(true).await.expect("gc");
        assert!(fake.containers().is_empty() && fake.sandboxes().is_empty());
        assert!(!pod_logs.exists(), "the log directory of a gone pod is removed");
    }
}
