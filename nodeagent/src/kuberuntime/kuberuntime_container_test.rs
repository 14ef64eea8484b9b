//! Mirrors kuberuntime_container_test.go: the kill path (preStop hook inside the grace period,
//! a deadline that moves earlier) and the postStart hook, against the fake CRI runtime.
//!
//! Real time, not tokio's paused clock: the fake runtime answers over a real unix socket, and a
//! paused clock would jump past timeouts while the socket I/O is pending. The timings are seconds
//! and the bounds are generous.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;

use super::kuberuntime_container::{self as kcont, Deadline, KillTarget};
use super::kuberuntime_container::EnvObjects;
use super::{RuntimeManager, SyncInputs};
use crate::container::ContainerState;
use crate::cri::RemoteRuntime;
use crate::cri::fake::{ExecScript, FakeRuntime, FakeServer};
use crate::events::Recorder;
use crate::volumemanager::MountedVolumes;

const IMAGE: &str = "docker.io/library/busybox:1.36";

struct Env {
    fake: FakeRuntime,
    _server: FakeServer,
    manager: RuntimeManager,
    _dir: tempfile::TempDir,
}

async fn env() -> Env {
    let dir = tempfile::tempdir().expect("tmp");
    let (fake, server) = FakeRuntime::start(dir.path()).await.expect("fake CRI");
    fake.add_image(IMAGE);
    let rt = RemoteRuntime::connect(&server.endpoint()).await.expect("connect");
    let manager = RuntimeManager::new(rt, Recorder::default(), dir.path().join("logs"), Default::default());
    Env { fake, _server: server, manager, _dir: dir }
}

/// A pod with one container `app` whose lifecycle is `lifecycle` (YAML flow mapping).
fn pod(grace: i64, lifecycle: &str) -> Pod {
    serde_norway::from_str(&format!(
        "metadata: {{name: web, namespace: default, uid: u1}}\n\
         spec:\n  terminationGracePeriodSeconds: {grace}\n  containers:\n  - name: app\n    image: {IMAGE}\n    lifecycle: {lifecycle}\n"
    ))
    .expect("pod yaml")
}

/// Run the pod's sandbox and containers once; returns the runtime's view afterwards.
async fn start(e: &Env, pod: &Pod) -> (super::kuberuntime_manager::PodSyncResult, crate::container::PodStatus) {
    let status = e.manager.get_pod_status("u1", "web", "default").await.expect("status");
    let volumes = MountedVolumes::default();
    let env_objects = EnvObjects::default();
    let inputs = SyncInputs {
        volumes: &volumes,
        env_objects: &env_objects,
        pull_secrets: &[],
        etc_hosts: None,
        cgroup_parent: String::new(),
        host_ip: "10.0.0.1".into(),
        probes: Default::default(),
    };
    let result = e.manager.sync_pod(pod, &status, &inputs).await;
    (result, e.manager.get_pod_status("u1", "web", "default").await.expect("status"))
}

fn position(calls: &[String], op: &str) -> usize {
    calls.iter().position(|c| c == op).unwrap_or_else(|| panic!("no {op} in {calls:?}"))
}

#[test]
fn stop_timeout_table() {
    let now = Instant::now();
    let at = |ms: u64, forced: bool| Deadline { at: now + Duration::from_millis(ms), forced };
    let cases = [
        (at(10_000, false), 10),
        (at(7_300, false), 8),
        (at(1_000, false), 2),
        (at(0, false), 2),
        (at(900, true), 1),
        (at(0, true), 0),
        (at(5_000, true), 5),
    ];
    for (d, want) in cases {
        assert_eq!(d.stop_timeout(now).as_secs(), want, "{d:?}");
    }
    assert!(at(10_000, false).is_shortened_by(&at(5_000, false)));
    assert!(!at(5_000, false).is_shortened_by(&at(10_000, false)));
    assert!(at(1_000, false).is_shortened_by(&at(1_000, true)), "forcing the same deadline shortens it");
}

#[tokio::test]
async fn pre_stop_runs_first_and_its_time_comes_off_the_grace_period() {
    let e = env().await;
    let p = pod(4, "{preStop: {exec: {command: [drain]}}}");
    e.fake.script_exec(&["drain"], ExecScript { delay: Duration::from_millis(1200), ..Default::default() });
    let (_, status) = start(&e, &p).await;
    assert_eq!(status.running_containers().count(), 1);
    e.fake.clear_calls();

    let started = Instant::now();
    e.manager.kill_pod(Some(&p), &status, Duration::from_secs(4)).await.expect("kill");
    let took = started.elapsed();

    let calls = e.fake.calls();
    assert!(position(&calls, "ExecSync") < position(&calls, "StopContainer"), "{calls:?}");
    // 4 s grace − 1.2 s of hook = 2.8 s, rounded up to whole seconds.
    let stops = e.fake.stop_requests();
    assert_eq!(stops.iter().map(|(_, t)| *t).collect::<Vec<_>>(), vec![3], "{stops:?}");
    assert!(took >= Duration::from_millis(1200) && took < Duration::from_secs(3), "{took:?}");
}

#[tokio::test]
async fn a_slow_pre_stop_is_cut_off_and_the_stop_still_happens() {
    let e = env().await;
    let p = pod(1, "{preStop: {exec: {command: [hang]}}}");
    e.fake.script_exec(&["hang"], ExecScript { delay: Duration::from_secs(60), ..Default::default() });
    let (_, status) = start(&e, &p).await;

    let started = Instant::now();
    e.manager.kill_pod(Some(&p), &status, Duration::from_secs(1)).await.expect("kill");
    let took = started.elapsed();

    assert!(took >= Duration::from_secs(1) && took < Duration::from_secs(3), "the hook is abandoned at the grace period: {took:?}");
    // Nothing left of the grace period: the container still gets the 2 s minimum.
    assert_eq!(e.fake.stop_requests().iter().map(|(_, t)| *t).collect::<Vec<_>>(), vec![2]);
    let after = e.manager.get_pod_status("u1", "web", "default").await.expect("status");
    assert_eq!(after.containers.first().map(|c| c.state), Some(ContainerState::Exited));
}

#[tokio::test]
async fn a_forced_deadline_abandons_the_hook_and_stops_with_one_second() {
    let e = env().await;
    let p = pod(30, "{preStop: {sleep: {seconds: 60}}}");
    let (_, status) = start(&e, &p).await;

    let (tx, rx) = tokio::sync::watch::channel(Deadline::after(Duration::from_secs(30), false));
    let shorten = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        tx.send_replace(Deadline::after(Duration::from_secs(1), true));
    };
    let started = Instant::now();
    let (killed, ()) = tokio::join!(e.manager.kill_pod_until(Some(&p), &status, rx), shorten);
    killed.expect("kill");
    let took = started.elapsed();

    assert!(took < Duration::from_secs(2), "a forced kill does not wait for the hook: {took:?}");
    assert_eq!(e.fake.stop_requests().iter().map(|(_, t)| *t).collect::<Vec<_>>(), vec![1]);
}

#[tokio::test]
async fn a_shorter_grace_period_cuts_a_running_hook_at_the_new_deadline() {
    let e = env().await;
    let p = pod(60, "{preStop: {exec: {command: [hang]}}}");
    e.fake.script_exec(&["hang"], ExecScript { delay: Duration::from_secs(60), ..Default::default() });
    let (_, status) = start(&e, &p).await;
    let containers = status.running_containers().map(|c| (c.id.clone(), c.name.clone())).collect::<Vec<_>>();
    let (id, name) = containers.first().cloned().expect("running container");

    let (tx, rx) = tokio::sync::watch::channel(Deadline::after(Duration::from_secs(60), false));
    let shorten = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        tx.send_replace(Deadline::after(Duration::from_secs(1), false));
    };
    let target = KillTarget { pod: Some(&p), container_id: &id, name: &name, message: "Stopping container app", pod_ips: &[] };
    let recorder = Recorder::default();
    let started = Instant::now();
    let (killed, ()) = tokio::join!(kcont::kill_container(&e.manager.runtime, &e.manager.hooks, &recorder, target, rx), shorten);
    killed.expect("kill");
    let took = started.elapsed();

    assert!(took >= Duration::from_secs(1) && took < Duration::from_secs(3), "cut at the new deadline: {took:?}");
    assert_eq!(e.fake.stop_requests().iter().map(|(_, t)| *t).collect::<Vec<_>>(), vec![2]);
}

#[tokio::test]
async fn a_failed_post_start_hook_kills_the_container_and_the_restart_policy_applies() {
    let e = env().await;
    let p = pod(5, "{postStart: {exec: {command: [setup]}}}");
    e.fake.script_exec(&["setup"], ExecScript { exit_code: 1, stderr: "no config".into(), ..Default::default() });

    let (result, status) = start(&e, &p).await;
    let (reason, message) = result.waiting_reasons.get("app").cloned().expect("a waiting reason for app");
    assert_eq!(reason, super::kuberuntime_manager::POST_START_HOOK_ERROR);
    assert!(message.contains("exited with 1: no config"), "{message}");
    assert_eq!(status.containers.first().map(|c| c.state), Some(ContainerState::Exited), "killed after the hook failed");
    let calls = e.fake.calls();
    assert!(position(&calls, "StartContainer") < position(&calls, "ExecSync"));
    assert!(position(&calls, "ExecSync") < position(&calls, "StopContainer"));
    assert_eq!(e.fake.stop_requests().iter().map(|(_, t)| *t).collect::<Vec<_>>(), vec![5], "the pod's grace period");

    // restartPolicy Always: the next sync starts attempt 1 (and its hook succeeds this time).
    e.fake.script_exec(&["setup"], ExecScript::default());
    let (result, status) = start(&e, &p).await;
    assert!(result.waiting_reasons.is_empty(), "{:?}", result.waiting_reasons);
    let running: Vec<_> = status.running_containers().collect();
    assert_eq!(running.len(), 1);
    assert_eq!(running[0].restart_count, 1);
}
