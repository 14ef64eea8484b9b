//! Container probes end to end: `kubelab nodeagent` on a real private containerd, with a kubelab
//! store and API server, driven by the pinned kubectl.
//!
//! - An exec liveness probe that starts failing gets the container killed and restarted, with
//!   the Unhealthy and Killing events `kubectl describe` shows; a tcpSocket liveness probe on a
//!   closed port does the same.
//! - An exec readiness probe flips the pod's Ready condition both ways (`kubectl wait`), within
//!   about a second of the probe's result; an httpGet readiness probe (busybox httpd, named port)
//!   does the same while a passing tcpSocket liveness probe leaves the container alone; a
//!   startup probe holds Ready back until it succeeds.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use e2e::nodelab::{BUSYBOX, Components, NodeLab, RUN_TIMEOUT};

// This file's lab: the shared one plus what only these tests need.
e2e::node_lab!(Lab);

async fn lab(node: &str, octet: u8) -> Lab {
    Lab(NodeLab::start(node, octet, Components::default()).await)
}

impl Lab {
    /// A pod bound to this node (no scheduler) with one busybox container named `app`.
    fn create(&self, name: &str, script: &str, container_extra: &str) {
        let yaml = format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  nodeName: {}\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sh, -c, '{script}']\n{container_extra}",
            self.node
        );
        let o = self.api.kubectl_with(&["apply", "-f", "-"], &[], Some(&yaml));
        if !o.success {
            self.fail(&format!("kubectl apply failed:\n{}", o.describe()));
        }
    }

    /// `kubectl wait --for=<cond> pod/<name>`; how long it took.
    fn kubectl_wait(&self, name: &str, cond: &str) -> Duration {
        let start = Instant::now();
        let o = self.api.kubectl(&["wait", &format!("--for={cond}"), &format!("pod/{name}"), &e2e::timeout_flag(45)]);
        if !o.success {
            self.fail(&format!("kubectl wait {cond} pod/{name} failed:\n{}", o.describe()));
        }
        start.elapsed()
    }

    /// `kubectl describe pod` until its output contains every one of `needles`.
    async fn wait_describe(&self, name: &str, needles: &[&str]) -> String {
        let what = format!("kubectl describe pod {name} showing {needles:?}");
        self.wait_until(&what, RUN_TIMEOUT, || async {
            let o = self.api.kubectl(&["describe", "pod", name]);
            anyhow::ensure!(o.success && needles.iter().all(|n| o.stdout.contains(n)), "{}", o.describe());
            Ok(Some(o.stdout))
        })
        .await
    }
}

fn container_status(p: &Pod) -> k8s_openapi::api::core::v1::ContainerStatus {
    p.status.as_ref().and_then(|s| s.container_statuses.as_ref()).and_then(|cs| cs.first().cloned()).unwrap_or_default()
}

fn restarts(p: &Pod) -> i32 {
    container_status(p).restart_count
}

/// Seconds from the container's start to the last transition of the pod's `cond` condition.
fn transition_after_start(p: &Pod, cond: &str) -> i64 {
    let started = container_status(p).state.and_then(|s| s.running).and_then(|r| r.started_at).map(|t| t.0.as_second());
    let transition = p
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == cond).cloned())
        .and_then(|c| c.last_transition_time)
        .map(|t| t.0.as_second());
    match (started, transition) {
        (Some(s), Some(t)) => t - s,
        _ => i64::MIN,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn failing_liveness_probes_restart_the_container() {
    let lab = lab("probe-a", 41).await;

    // exec: healthy for 5 s, then `cat /tmp/healthy` fails; two failures in a row kill it.
    lab.create(
        "liveness-exec",
        "touch /tmp/healthy; sleep 5; rm -f /tmp/healthy; sleep 3600",
        "    livenessProbe:\n      exec: {command: [cat, /tmp/healthy]}\n      periodSeconds: 1\n      failureThreshold: 2\n",
    );
    // tcpSocket: nothing listens on 9999.
    lab.create(
        "liveness-tcp",
        "sleep 3600",
        "    livenessProbe:\n      tcpSocket: {port: 9999}\n      initialDelaySeconds: 2\n      periodSeconds: 1\n      failureThreshold: 1\n",
    );

    let p = lab.wait_pod("liveness-exec", "a restart", Duration::from_secs(90), |p| restarts(p) >= 1).await;
    let c = container_status(&p);
    let last = c.last_state.and_then(|s| s.terminated).unwrap_or_default();
    assert_eq!(last.exit_code, 137, "killed (sh ignores SIGTERM: SIGKILL after the grace period): {last:?}");
    let out = lab
        .wait_describe(
            "liveness-exec",
            &["Unhealthy", "Liveness probe failed: cat: can't open '/tmp/healthy'", "Container app failed liveness probe, will be restarted"],
        )
        .await;
    assert!(out.contains("Killing"), "the kill is an event too:\n{out}");
    // The restarted container is healthy again for 5 s: it runs.
    lab.wait_pod("liveness-exec", "running again", RUN_TIMEOUT, |p| {
        container_status(p).state.is_some_and(|s| s.running.is_some())
    })
    .await;

    lab.wait_pod("liveness-tcp", "a restart", Duration::from_secs(90), |p| restarts(p) >= 1).await;
    lab.wait_describe("liveness-tcp", &["Liveness probe failed: dial tcp 10.244.41.", ":9999: ", "failed liveness probe, will be restarted"]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn readiness_probes_flip_ready_both_ways() {
    let lab = lab("probe-b", 42).await;
    // On a slower machine (E2E_SLOWDOWN) a probe's exec or GET takes longer than the default
    // one-second timeout, so the timeout, the windows and the bounds all stretch by the factor.
    let k = e2e::slowdown() as i64;
    let (window, start_delay) = (15 * k, 6 * k);
    let timeout = format!("      timeoutSeconds: {k}\n");

    // exec: ready while /tmp/ready exists (`window` s), then not ready.
    lab.create(
        "ready-exec",
        &format!("touch /tmp/ready; sleep {window}; rm -f /tmp/ready; sleep 3600"),
        &format!("    readinessProbe:\n      exec: {{command: [test, -f, /tmp/ready]}}\n      periodSeconds: 1\n      failureThreshold: 1\n{timeout}"),
    );
    // httpGet on a named port: busybox httpd serves /healthz for `window` s, then 404. The
    // tcpSocket liveness probe on the same port keeps passing.
    lab.create(
        "ready-http",
        &format!("mkdir -p /www; echo ok > /www/healthz; (sleep {window}; rm -f /www/healthz) & exec httpd -f -p 8080 -h /www"),
        &format!("    ports: [{{name: http, containerPort: 8080}}]\n    readinessProbe:\n      httpGet: {{path: /healthz, port: http}}\n      periodSeconds: 1\n      failureThreshold: 1\n{timeout}    livenessProbe:\n      tcpSocket: {{port: 8080}}\n      periodSeconds: 1\n{timeout}"),
    );
    // startup: /tmp/started appears after `start_delay` s; no readiness probe, so Ready follows
    // "started".
    lab.create(
        "slow-start",
        &format!("sleep {start_delay}; touch /tmp/started; sleep 3600"),
        &format!("    startupProbe:\n      exec: {{command: [test, -f, /tmp/started]}}\n      periodSeconds: 1\n      failureThreshold: {}\n{timeout}", 60 * k),
    );

    lab.kubectl_wait("ready-exec", "condition=Ready");
    lab.kubectl_wait("ready-http", "condition=Ready");
    let p = lab.pods().get("ready-exec").await.expect("get");
    assert!(container_status(&p).ready);
    let ready_after = transition_after_start(&p, "Ready");
    assert!((0..=3 * k).contains(&ready_after), "Ready {ready_after} s after the container started");

    lab.kubectl_wait("ready-exec", "condition=Ready=false");
    lab.kubectl_wait("ready-http", "condition=Ready=false");
    for name in ["ready-exec", "ready-http"] {
        let p = lab.pods().get(name).await.expect("get");
        let c = container_status(&p);
        assert!(!c.ready && c.started == Some(true), "{name}: running, not ready: {c:?}");
        // The file goes at `window` s; one failed probe a second later is enough; the status
        // write follows at once. Seconds are whole on both clocks: allow 1 s each way.
        let not_ready_after = transition_after_start(&p, "Ready");
        assert!((window - 1..=window + 3 * k).contains(&not_ready_after), "{name}: Ready=False {not_ready_after} s after the container started");
        assert_eq!(transition_after_start(&p, "ContainersReady"), not_ready_after, "{name}: ContainersReady flips with Ready");
        assert_eq!(restarts(&p), 0, "{name}: readiness never restarts a container");
    }
    lab.wait_describe("ready-exec", &["Readiness probe failed"]).await;
    lab.wait_describe("ready-http", &["Readiness probe failed: HTTP probe failed with statuscode: 404"]).await;

    // The startup probe: not started (so not ready) for about `start_delay` s, then both.
    lab.kubectl_wait("slow-start", "condition=Ready");
    let p = lab.pods().get("slow-start").await.expect("get");
    assert_eq!(container_status(&p).started, Some(true));
    let ready_after = transition_after_start(&p, "Ready");
    assert!((start_delay - 1..=start_delay + 3 * k).contains(&ready_after), "slow-start Ready {ready_after} s after the container started");
}
