//! The hands-on exercises of `docs/labs/`, run the way each page tells a reader to run them, on
//! one Docker Compose lab (`deploy/lab/lab`), and checked for what each page says to observe.
//!
//! One `#[tokio::test]` brings the lab up once (bringing it up costs more than all the exercises
//! together) and runs the exercises in sequence, one async fn each, named after its page. The
//! order differs from the pages': the exercises that disturb the cluster come last, and each
//! one leaves the lab as it found it (or heals it) for the next:
//!
//! | fn | page | disturbs |
//! | --- | --- | --- |
//! | [`ex01_schedule_a_pod`] | 01-schedule-a-pod.md | nothing |
//! | [`ex03_mirror_pod`] | 03-mirror-pod.md | a mirror pod (recreated) |
//! | [`ex04_broken_static_pod`] | 04-broken-static-pod.md | node3's scheduler (restored) |
//! | [`ex05_fill_a_node`] | 05-fill-a-node.md | node3's CPU (freed) |
//! | [`ex06_pleg_sees_a_container_die`] | 06-pleg-container-death.md | one container (restarted) |
//! | [`ex08_one_packet`] | 08-one-packet.md | nothing (its Deployment, Service and client removed) |
//! | [`ex07_deployment_survives_a_node`] | 07-deployment-survives-a-node.md | node2, or node3 when no replica ran on node2 (started again) |
//! | [`ex02_store_leader_election`] | 02-store-leader-election.md | a whole node (started again) |
//! | [`ex10_chaos`] | 10-chaos.md | every node, killed or cut off in turn for a minute (all back) |
//!
//! The lab runs with `KUBELAB_RUST_LOG=info,kubelet::pleg=debug`, as the README asks readers to
//! start it, so that exercise 06 can show PLEG's own log line.

use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use chrono::Utc;
use e2e::lab::{Lab, NODES, secs};
use e2e::poll_until;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, BufReader, Lines};
use tokio::process::{Child, ChildStderr, ChildStdout};

/// The nodes' log filter: info, plus PLEG's one line per event (exercise 06).
const RUST_LOG: &str = "info,kubelet::pleg=debug";
/// How long a pod gets to run (three control planes share two cores with other work).
const RUN_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a log line, an event or a recreated object gets to show up.
const SHOW_TIMEOUT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(500);
const BUSYBOX: &str = "docker.io/library/busybox:1.36";
/// Where the lab's node agents read static pod manifests (node-entrypoint.sh).
const MANIFESTS: &str = "/etc/kubelab/manifests";

// ---- helpers ----

/// A busybox pod in `default`, as the pages write them: pinned to `node` when given, with a CPU
/// request when given.
fn pod(name: &str, node: Option<&str>, command: &[&str], cpu: Option<&str>) -> String {
    let mut container = json!({"name": "main", "image": BUSYBOX, "imagePullPolicy": "Never", "command": command});
    if let Some(cpu) = cpu {
        container["resources"] = json!({"requests": {"cpu": cpu}});
    }
    let mut spec = json!({"terminationGracePeriodSeconds": 1, "containers": [container]});
    if let Some(node) = node {
        spec["nodeSelector"] = json!({"kubernetes.io/hostname": node});
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}).to_string()
}

/// Exercise 01's pod, reused by 06.
fn hello() -> String {
    pod("hello", None, &["sh", "-c", "echo hello from $(hostname); sleep 100000"], None)
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

/// Waits until pod `ns/name` is Running with a container ID; returns it.
async fn wait_running(lab: &Lab, ns: &str, name: &str) -> anyhow::Result<Value> {
    poll_until(&format!("{ns}/{name} Running"), RUN_TIMEOUT, POLL, || async {
        let p = lab.get_json("node1", &["pod", "-n", ns, name]).await?;
        let running = str_at(&p, "/status/phase") == "Running" && !str_at(&p, "/status/containerStatuses/0/containerID").is_empty();
        Ok(running.then_some(p))
    })
    .await
}

/// (reason, message, count) of the events about pod `name` in `default`.
async fn events(lab: &Lab, name: &str) -> anyhow::Result<Vec<(String, String, u64)>> {
    let selector = format!("involvedObject.name={name}");
    let v = lab.get_json("node1", &["events", "-n", "default", "--field-selector", &selector]).await?;
    Ok(v["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| (str_at(e, "/reason").to_string(), str_at(e, "/message").to_string(), e["count"].as_u64().unwrap_or(1)))
        .collect())
}

/// Polls the node agent's log since `since` until `want` holds for one line; returns that line.
async fn agent_log_line(lab: &Lab, node: &str, since: chrono::DateTime<Utc>, what: &str, want: impl Fn(&str) -> bool) -> anyhow::Result<String> {
    poll_until(&format!("{node}'s agent to log {what}"), SHOW_TIMEOUT, POLL, || async {
        let log = lab.agent_log_since(node, since).await?;
        Ok(log.lines().find(|l| want(l)).map(str::to_string))
    })
    .await
}

/// The container ID without its `containerd://` prefix.
fn bare_id(container_id: &str) -> &str {
    container_id.rsplit("://").next().unwrap_or(container_id)
}

/// `kubectl get … -w` in the background, read line by line as kubectl prints them. It runs with
/// `-v=6`, which logs each request kubectl makes to stderr (stdout, what the pages show, is the
/// same), so that a test can tell when its watch is open.
struct KubectlWatch {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    seen: Vec<String>,
    log: Lines<BufReader<ChildStderr>>,
    logged: Vec<String>,
}

impl KubectlWatch {
    fn start(lab: &Lab, via: &str, args: &[&str]) -> anyhow::Result<KubectlWatch> {
        let mut cmd = tokio::process::Command::from(lab.kubectl_command(via));
        cmd.args(args).arg("-v=6").stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
        let mut child = cmd.spawn().context("starting kubectl get -w")?;
        let stdout = child.stdout.take().context("kubectl's stdout")?;
        let stderr = child.stderr.take().context("kubectl's stderr")?;
        Ok(KubectlWatch { child, lines: BufReader::new(stdout).lines(), seen: Vec::new(), log: BufReader::new(stderr).lines(), logged: Vec::new() })
    }

    /// Reads stdout until a line satisfies `want`; returns every line read so far.
    async fn until(&mut self, timeout: Duration, want: impl Fn(&str) -> bool) -> anyhow::Result<&[String]> {
        if let Err(e) = read_until(&mut self.lines, &mut self.seen, timeout, want).await {
            let what = format!("kubectl -w printed nothing wanted in {timeout:?}: {:?}", self.seen);
            return Err(self.failed(e, what).await);
        }
        Ok(&self.seen)
    }

    /// Waits until kubectl's watch of `path` is open: its `-v=6` line for the watch request's
    /// response (which the API server sends before any event).
    async fn watching(&mut self, path: &str, timeout: Duration) -> anyhow::Result<()> {
        let want = |l: &str| l.contains(&format!("{path}?")) && l.contains("watch=true") && l.contains("200 OK");
        if let Err(e) = read_until(&mut self.log, &mut self.logged, timeout, want).await {
            let what = format!("kubectl -w logged no open watch of {path} in {timeout:?}: {:?}", self.logged);
            return Err(self.failed(e, what).await);
        }
        Ok(())
    }

    /// Why reading failed: `timed_out` for a timeout; for kubectl's exit, what it said on stderr.
    async fn failed(&mut self, e: ReadError, timed_out: String) -> anyhow::Error {
        match e {
            ReadError::TimedOut => anyhow::anyhow!(timed_out),
            ReadError::Io(e) => e.into(),
            ReadError::Ended => {
                while let Ok(Some(l)) = self.log.next_line().await {
                    self.logged.push(l);
                }
                let status = self.child.wait().await.map(|s| s.to_string()).unwrap_or_default();
                anyhow::anyhow!("kubectl -w ended ({status}) after {:?}; its stderr: {}", self.seen, self.logged.join("\n"))
            }
        }
    }

    async fn stop(mut self) {
        // Our own child, by its handle.
        let _ = self.child.kill().await;
    }
}

enum ReadError {
    TimedOut,
    Ended,
    Io(std::io::Error),
}

/// Reads `lines` into `seen` until one satisfies `want`.
async fn read_until<R: tokio::io::AsyncBufRead + Unpin>(lines: &mut Lines<R>, seen: &mut Vec<String>, timeout: Duration, want: impl Fn(&str) -> bool) -> Result<(), ReadError> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let line = match tokio::time::timeout_at(deadline, lines.next_line()).await {
            Err(_) => return Err(ReadError::TimedOut),
            Ok(Err(e)) => return Err(ReadError::Io(e)),
            Ok(Ok(None)) => return Err(ReadError::Ended),
            Ok(Ok(Some(line))) => line,
        };
        let done = want(&line);
        seen.push(line);
        if done {
            return Ok(());
        }
    }
}

/// A `kubectl get pods` row's columns: NAME READY STATUS RESTARTS AGE (RESTARTS may read
/// `1 (2s ago)`, so only the first four are taken at their positions).
fn row(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// Waits until the three members answer and one leads; returns (leader, its term).
async fn store_settled(lab: &Lab, via: &str, timeout: Duration) -> anyhow::Result<(String, u64)> {
    poll_until("three store members and a leader", timeout, Duration::from_secs(1), || async {
        let m = lab.store_members(via).await?;
        let leader = m.iter().find(|m| m.is_leader()).map(|m| (m.node.clone(), m.term));
        Ok(leader.filter(|_| m.len() == 3))
    })
    .await
}

// ---- the exercises ----

/// 01: watch a pod being scheduled and started (`kubectl get pods -w`, events, `kubelab trace`).
async fn ex01_schedule_a_pod(lab: &Lab) -> anyhow::Result<()> {
    let mut watch = KubectlWatch::start(lab, "node1", &["get", "pods", "-w"])?;
    // With no pod yet kubectl prints nothing: wait for its watch to open instead, or the first
    // row could already be past Pending.
    watch.watching("/api/v1/namespaces/default/pods", SHOW_TIMEOUT).await?;
    lab.apply("node1", &hello()).await?;
    let lines = watch.until(RUN_TIMEOUT, |l| row(l).first() == Some(&"hello") && row(l).get(2) == Some(&"Running")).await?;
    let statuses: Vec<String> = lines.iter().map(|l| row(l)).filter(|r| r.first() == Some(&"hello")).filter_map(|r| r.get(2).map(|s| s.to_string())).collect();
    watch.stop().await;
    ensure!(statuses.first().map(String::as_str) == Some("Pending"), "the watch should start at Pending: {statuses:?}");
    eprintln!("[labs] 01: kubectl get pods -w saw {statuses:?}");

    let p = wait_running(lab, "default", "hello").await?;
    let node = str_at(&p, "/spec/nodeName").to_string();
    let ip = str_at(&p, "/status/podIP").to_string();
    let index = NODES.iter().position(|n| *n == node).context("hello ran on no lab node")? + 1;
    ensure!(ip.starts_with(&format!("10.244.{index}.")), "hello's IP {ip} is not in {node}'s pod CIDR");

    // The events, one per hop: scheduler, then the node agent.
    let evs = poll_until("hello's events", SHOW_TIMEOUT, POLL, || async {
        let e = events(lab, "hello").await?;
        Ok(["Scheduled", "Pulled", "Created", "Started"].iter().all(|r| e.iter().any(|(reason, _, _)| reason == r)).then_some(e))
    })
    .await?;
    let scheduled = evs.iter().find(|(r, _, _)| r == "Scheduled").map(|(_, m, _)| m.clone()).unwrap_or_default();
    ensure!(scheduled == format!("Successfully assigned default/hello to {node}"), "Scheduled event: {scheduled:?}");

    let logs = lab.kubectl_ok("node1", &["logs", "hello"]).await?;
    ensure!(logs.contains("hello from hello"), "kubectl logs hello: {logs:?}");

    // kubelab trace: the API server's, the scheduler's and the node agent's steps in one table.
    let trace = poll_until("kubelab trace pod/hello with the node agent's steps", SHOW_TIMEOUT, POLL, || async {
        let text = kubelab_trace(lab, &["pod/hello"]).await?;
        Ok(text.contains("StartContainer").then_some(text))
    })
    .await?;
    for step in ["store write", "schedule_one", "bind", "step5_run_pod_sandbox", "step7_container", "StartContainer"] {
        ensure!(trace.contains(step), "kubelab trace lacks {step:?}:\n{trace}");
    }
    let bind = trace.lines().find(|l| l.contains(" bind ")).unwrap_or_default();
    ensure!(bind.contains(&format!("node={node}")), "the bind step should name {node}: {bind:?}");
    ensure!(
        trace.lines().any(|l| l.contains("step5_run_pod_sandbox") && l.contains(&node) && l.contains(&format!("pod_ip={ip}"))),
        "the sandbox step should run on {node} and give {ip}:\n{trace}"
    );
    Ok(())
}

/// 03: delete a mirror pod; the node agent makes a new one, and the static pod never stops.
async fn ex03_mirror_pod(lab: &Lab) -> anyhow::Result<()> {
    let (node, name) = ("node3", "scheduler-node3");
    let before = wait_running(lab, "kube-system", name).await?;
    let uid = str_at(&before, "/metadata/uid").to_string();
    let cid = str_at(&before, "/status/containerStatuses/0/containerID").to_string();
    let restarts = before.pointer("/status/containerStatuses/0/restartCount").and_then(Value::as_u64);
    let hash = str_at(&before, "/metadata/annotations/kubernetes.io~1config.hash");
    ensure!(!hash.is_empty() && str_at(&before, "/metadata/annotations/kubernetes.io~1config.mirror") == hash, "{name} should carry config.mirror = config.hash");
    ensure!(str_at(&before, "/metadata/ownerReferences/0/kind") == "Node", "a mirror pod is owned by its Node");

    let since = Utc::now();
    lab.kubectl_ok("node1", &["delete", "pod", "-n", "kube-system", name]).await?;
    let after = poll_until(&format!("a new mirror pod {name}"), SHOW_TIMEOUT, POLL, || async {
        let p = lab.get_json("node1", &["pod", "-n", "kube-system", name]).await?;
        let fresh = str_at(&p, "/metadata/uid") != uid && str_at(&p, "/status/phase") == "Running";
        Ok(fresh.then_some(p))
    })
    .await?;
    let new_uid = str_at(&after, "/metadata/uid").to_string();
    ensure!(str_at(&after, "/status/containerStatuses/0/containerID") == cid, "the static pod's container must not have been restarted");
    ensure!(after.pointer("/status/containerStatuses/0/restartCount").and_then(Value::as_u64) == restarts, "restart count changed");
    agent_log_line(lab, node, since, "created mirror pod", |l| l.contains("kubelet::mirror") && l.contains("created mirror pod") && l.contains(&new_uid)).await?;
    eprintln!("[labs] 03: {name} {uid} → {new_uid}, container {} kept", bare_id(&cid));
    Ok(())
}

/// 04: break a static pod manifest twice (bad YAML, then an invalid pod), then fix it.
async fn ex04_broken_static_pod(lab: &Lab) -> anyhow::Result<()> {
    let node = "node3";
    let path = format!("{MANIFESTS}/scheduler.yaml");
    let others = ["store-node3", "apiserver-node3", "controller-manager-node3"];
    let snapshot = || async {
        let mut s = Vec::new();
        for o in others {
            let p = lab.get_json("node1", &["pod", "-n", "kube-system", o]).await?;
            s.push((o, str_at(&p, "/status/containerStatuses/0/containerID").to_string(), p.pointer("/status/containerStatuses/0/restartCount").and_then(Value::as_u64)));
        }
        Ok::<_, anyhow::Error>(s)
    };
    let others_before = snapshot().await?;
    let before = wait_running(lab, "kube-system", "scheduler-node3").await?;
    let old_cid = str_at(&before, "/status/containerStatuses/0/containerID").to_string();
    lab.exec_ok(node, &["cp", &path, "/root/scheduler.yaml.good"]).await?;

    // Break 1: not YAML any more. The agent says so once, and the pod and its mirror go.
    let since = Utc::now();
    lab.exec_ok(node, &["sed", "-i", "s/^spec:/spec: [/", &path]).await?;
    let warn = agent_log_line(lab, node, since, "the bad YAML", |l| l.contains("WARN") && l.contains("could not read static pod manifest; skipped") && l.contains("invalid YAML")).await?;
    ensure!(warn.contains(&format!("path={path}")), "the warning should name the file: {warn}");
    poll_until("scheduler-node3's mirror pod gone", SHOW_TIMEOUT, POLL, || async {
        let out = lab.kubectl("node1", &["get", "pod", "-n", "kube-system", "scheduler-node3"], None).await?;
        Ok(String::from_utf8_lossy(&out.stderr).contains("NotFound").then_some(()))
    })
    .await?;
    agent_log_line(lab, node, since, "the mirror pod's removal", |l| l.contains("deleting the mirror pod of a static pod that is gone") && l.contains("scheduler-node3")).await?;
    let tasks = lab.exec_ok(node, &["ctr", "-n", "k8s.io", "tasks", "ls"]).await?;
    ensure!(!tasks.contains(bare_id(&old_cid)), "the scheduler's container still runs:\n{tasks}");

    // Break 2: YAML, but not a valid pod (no image). The message names the field.
    let since = Utc::now();
    let script = format!("sed 's/image: .*/image: \"\"/' /root/scheduler.yaml.good > {path}.tmp && mv {path}.tmp {path}");
    lab.exec_ok(node, &["sh", "-c", &script]).await?;
    agent_log_line(lab, node, since, "the invalid pod", |l| l.contains("could not read static pod manifest; skipped") && l.contains("invalid pod: spec.containers[0].image: Required value")).await?;

    // The other static pods on node3 never noticed.
    ensure!(snapshot().await? == others_before, "the other static pods on {node} changed");

    // Fix: the pod comes back (a new container), with a new mirror pod.
    lab.exec_ok(node, &["cp", "/root/scheduler.yaml.good", &path]).await?;
    let back = wait_running(lab, "kube-system", "scheduler-node3").await?;
    ensure!(str_at(&back, "/status/containerStatuses/0/containerID") != old_cid, "the restored scheduler should run in a new container");
    ensure!(snapshot().await? == others_before, "the other static pods on {node} changed");
    Ok(())
}

/// The message kube-scheduler gives for a pod pinned to a full node among three.
const FULL_NODE_MESSAGE: &str = "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector.";

/// 05: fill node3's CPU, watch a pod that needs a little more stay Pending with FailedScheduling,
/// then free the CPU and watch it scheduled.
async fn ex05_fill_a_node(lab: &Lab) -> anyhow::Result<()> {
    let node = "node3";
    let n = lab.get_json("node1", &["node", node]).await?;
    let cpu = str_at(&n, "/status/allocatable/cpu").to_string();
    ensure!(!cpu.is_empty(), "{node} reports no allocatable cpu");
    lab.apply("node1", &pod("filler", Some(node), &["sleep", "100000"], Some(&cpu))).await?;
    wait_running(lab, "default", "filler").await.context("filler (requests all of node3's allocatable CPU: does another pod on node3 request CPU?)")?;

    lab.apply("node1", &pod("one-more", Some(node), &["sleep", "100000"], Some("100m"))).await?;
    poll_until("one-more's FailedScheduling event", SHOW_TIMEOUT, POLL, || async {
        let e = events(lab, "one-more").await?;
        Ok(e.iter().any(|(r, m, _)| r == "FailedScheduling" && m == FULL_NODE_MESSAGE).then_some(()))
    })
    .await?;
    let p = lab.get_json("node1", &["pod", "one-more"]).await?;
    ensure!(str_at(&p, "/status/phase") == "Pending" && str_at(&p, "/spec/nodeName").is_empty(), "one-more should be Pending and unbound");
    let cond = p["status"]["conditions"].as_array().into_iter().flatten().find(|c| c["type"] == "PodScheduled").cloned().unwrap_or_default();
    ensure!(cond["status"] == "False" && cond["reason"] == "Unschedulable" && cond["message"] == FULL_NODE_MESSAGE, "PodScheduled condition: {cond}");

    // Room again: the scheduler's queue moves the pod back when a pod on the node is deleted.
    lab.kubectl_ok("node1", &["delete", "pod", "filler"]).await?;
    let p = wait_running(lab, "default", "one-more").await?;
    ensure!(str_at(&p, "/spec/nodeName") == node, "one-more should run on {node}");
    let e = events(lab, "one-more").await?;
    ensure!(e.iter().any(|(r, m, _)| r == "Scheduled" && m == &format!("Successfully assigned default/one-more to {node}")), "no Scheduled event: {e:?}");
    lab.kubectl_ok("node1", &["delete", "pod", "one-more", "--wait=false"]).await?;
    Ok(())
}

/// 06: kill a container's process behind the node agent's back; PLEG's relist notices, the pod
/// worker restarts it, and the status records the death.
async fn ex06_pleg_sees_a_container_die(lab: &Lab) -> anyhow::Result<()> {
    lab.apply("node1", &hello()).await?;
    let p = wait_running(lab, "default", "hello").await?;
    let node = str_at(&p, "/spec/nodeName").to_string();
    let cid = str_at(&p, "/status/containerStatuses/0/containerID").to_string();
    let restarts = p.pointer("/status/containerStatuses/0/restartCount").and_then(Value::as_u64).unwrap_or(0);
    let started_before: u64 = events(lab, "hello").await?.iter().filter(|(r, _, _)| r == "Started").map(|(_, _, c)| c).sum();

    let mut watch = KubectlWatch::start(lab, "node1", &["get", "pod", "hello", "-w"])?;
    // The first row is the current state: the watch is open.
    watch.until(SHOW_TIMEOUT, |l| row(l).first() == Some(&"hello")).await?;
    let since = Utc::now();
    lab.exec_ok(&node, &["ctr", "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", bare_id(&cid)]).await?;
    let want = (restarts + 1).to_string();
    let lines = watch.until(RUN_TIMEOUT, |l| row(l).get(2) == Some(&"Running") && row(l).get(3) == Some(&want.as_str())).await?.to_vec();
    watch.stop().await;
    eprintln!("[labs] 06: kubectl get pod hello -w: {lines:?}");

    let died = agent_log_line(lab, &node, since, "PLEG's ContainerDied", |l| l.contains("kubelet::pleg") && l.contains("PLEG event") && l.contains("event=ContainerDied") && l.contains(bare_id(&cid))).await?;
    eprintln!("[labs] 06: {died}");
    let p = lab.get_json("node1", &["pod", "hello"]).await?;
    let s = &p["status"]["containerStatuses"][0];
    ensure!(s["restartCount"].as_u64() == Some(restarts + 1), "restartCount: {s}");
    ensure!(s["lastState"]["terminated"]["exitCode"] == 137, "lastState should record the SIGKILL (exit code 137): {s}");
    ensure!(s["lastState"]["terminated"]["containerID"] == cid.as_str(), "lastState should name the killed container: {s}");
    let new_cid = s["containerID"].as_str().unwrap_or_default().to_string();
    ensure!(new_cid != cid && !new_cid.is_empty(), "a new container should run: {s}");
    agent_log_line(lab, &node, since, "PLEG's ContainerStarted", |l| l.contains("PLEG event") && l.contains("event=ContainerStarted") && l.contains(bare_id(&new_cid))).await?;
    poll_until("a second Started event", SHOW_TIMEOUT, POLL, || async {
        let started: u64 = events(lab, "hello").await?.iter().filter(|(r, _, _)| r == "Started").map(|(_, _, c)| c).sum();
        Ok((started > started_before).then_some(()))
    })
    .await?;
    Ok(())
}

/// 02: kill the node of the store's raft leader; the other two elect a new leader at a higher
/// term and keep serving writes and pods; the node comes back as a follower and catches up.
async fn ex02_store_leader_election(lab: &Lab) -> anyhow::Result<()> {
    let (leader, term) = store_settled(lab, "node1", SHOW_TIMEOUT).await?;
    let survivor = NODES.iter().find(|n| **n != leader).copied().context("no other node")?;
    eprintln!("[labs] 02: store leader {leader} at term {term}; asking {survivor}");

    let killed = Instant::now();
    lab.script_ok(&["kill", &leader]).await?;
    // Writes through a surviving node's API server.
    poll_until(&format!("a write via {survivor}"), SHOW_TIMEOUT, Duration::from_millis(250), || async {
        let out = lab.kubectl(survivor, &["create", "configmap", "written-after-the-kill", "--from-literal=k=v"], None).await?;
        let err = String::from_utf8_lossy(&out.stderr);
        ensure!(out.status.success() || err.contains("AlreadyExists"), "{}", err.trim());
        Ok(Some(()))
    })
    .await?;
    let write_gap = killed.elapsed();
    // A write needs a leader, so there is one by now; ask until the answer is settled.
    let (new_leader, new_term) = poll_until("a new leader among the two survivors", SHOW_TIMEOUT, Duration::from_secs(1), || async {
        let members = lab.store_members(survivor).await?;
        ensure!(members.len() == 2, "two members should answer: {members:?}");
        Ok(members.iter().find(|m| m.is_leader() && m.node != leader).map(|m| (m.node.clone(), m.term)))
    })
    .await?;
    ensure!(new_term > term, "the new leader's term {new_term} should be above {term}");
    let log = lab.component_log(&new_leader, "store").await?;
    ensure!(log.contains(&format!("became leader at term {new_term}")), "{new_leader}'s store log lacks the election");
    eprintln!("[labs] 02: {new_leader} leads at term {new_term}; a write went through {} after the kill", secs(write_gap));

    // The rest of the control plane carries on: a new pod is scheduled and started.
    lab.apply(survivor, &pod("after-failover", Some(survivor), &["sleep", "100000"], None)).await?;
    poll_until("after-failover Running", RUN_TIMEOUT, POLL, || async {
        let p = lab.get_json(survivor, &["pod", "after-failover"]).await?;
        Ok((str_at(&p, "/status/phase") == "Running").then_some(()))
    })
    .await?;

    // Back: the old leader rejoins as a follower of the new term and serves what it missed.
    lab.script_ok(&["start", &leader]).await?;
    let (_, term_after) = store_settled(lab, survivor, Duration::from_secs(120)).await?;
    ensure!(term_after >= new_term, "the term went back: {term_after} < {new_term}");
    // Answering `endpoint status` comes a moment before hearing from the leader.
    poll_until(&format!("{leader}'s store a follower at term {new_term} or later"), SHOW_TIMEOUT, POLL, || async {
        let log = lab.component_log(&leader, "store").await?;
        let terms = log.lines().filter_map(|l| l.split("became follower at term ").nth(1)).filter_map(|t| t.split_whitespace().next()?.parse::<u64>().ok());
        Ok(terms.into_iter().any(|t| t >= new_term).then_some(()))
    })
    .await?;
    poll_until(&format!("the write via {leader}'s own API server"), Duration::from_secs(120), Duration::from_secs(1), || async {
        let v = lab.get_json(&leader, &["configmaps"]).await?;
        Ok(v["items"].as_array().into_iter().flatten().any(|c| c["metadata"]["name"] == "written-after-the-kill").then_some(()))
    })
    .await?;
    poll_until("three nodes Ready", Duration::from_secs(120), Duration::from_secs(1), || async {
        let r = lab.node_readiness(survivor).await?;
        Ok((r.len() == 3 && r.values().all(|s| s == "True")).then_some(()))
    })
    .await?;
    Ok(())
}

/// The lab's pod toleration of an unreachable node (write-manifests.sh).
const LAB_TOLERATION_SECONDS: u64 = 30;

/// Pods of `app=web` by phase of life: (name, node, ready, terminating, pod-template-hash).
async fn web_pods(lab: &Lab, via: &str) -> anyhow::Result<Vec<(String, String, bool, bool, String)>> {
    let v = lab.get_json(via, &["pods", "-l", "app=web"]).await?;
    Ok(v["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let ready = p["status"]["conditions"].as_array().into_iter().flatten().any(|c| c["type"] == "Ready" && c["status"] == "True");
            (
                str_at(p, "/metadata/name").to_string(),
                str_at(p, "/spec/nodeName").to_string(),
                ready,
                !p["metadata"]["deletionTimestamp"].is_null(),
                str_at(p, "/metadata/labels/pod-template-hash").to_string(),
            )
        })
        .collect())
}

/// 07: a Deployment of six replicas over three nodes; node2 dies and its pods are replaced on
/// the other two within the lab's toleration plus a minute; a rolling update never leaves fewer
/// than `replicas - maxUnavailable` pods Ready (sampled every second).
async fn ex07_deployment_survives_a_node(lab: &Lab) -> anyhow::Result<()> {
    lab.kubectl_ok("node1", &["create", "deployment", "web", "--image=docker.io/library/busybox:1.36", "--replicas=6", "--", "sleep", "100000"]).await?;
    lab.kubectl_ok("node1", &["rollout", "status", "deployment/web", "--timeout=180s"]).await?;
    let pods = web_pods(lab, "node1").await?;
    let on = |node: &str| pods.iter().filter(|p| p.1 == node).count();
    eprintln!("[labs] 07: six replicas: node1 {}, node2 {}, node3 {}", on("node1"), on("node2"), on("node3"));
    ensure!(pods.len() == 6 && pods.iter().all(|p| p.2), "six Ready pods: {pods:?}");
    // The page kills node2; when the scheduler put none of the six there (it may: its default
    // spreading only scores), a node that runs some, as the page says.
    let victim = if on("node2") > 0 { "node2" } else { "node3" };
    ensure!(on(victim) > 0, "the scheduler spread the replicas, so {victim} runs some: {pods:?}");
    let survivors = if victim == "node2" { "node1 and node3" } else { "node1 and node2" };
    let p = lab.get_json("node1", &["pod", &pods[0].0]).await?;
    let unreachable = p["spec"]["tolerations"].as_array().into_iter().flatten().find(|t| t["key"] == "node.kubernetes.io/unreachable").cloned().unwrap_or_default();
    ensure!(unreachable["tolerationSeconds"].as_u64() == Some(LAB_TOLERATION_SECONDS), "the lab's pods tolerate an unreachable node for {LAB_TOLERATION_SECONDS} s: {unreachable}");
    let doomed: Vec<String> = pods.iter().filter(|p| p.1 == victim).map(|p| p.0.clone()).collect();

    // The victim dies: marked, tainted, its pods evicted after their toleration, replaced elsewhere.
    let killed = Instant::now();
    lab.script_ok(&["kill", victim]).await?;
    let replaced = poll_until(&format!("six Ready replicas on {survivors}"), Duration::from_secs(LAB_TOLERATION_SECONDS + 90), Duration::from_secs(1), || async {
        let pods = match web_pods(lab, "node1").await {
            Ok(p) => p,
            Err(e) => {
                eprintln!("[labs] 07: {e:#}"); // the API server may be briefly busy with the lost member
                return Ok(None);
            }
        };
        let serving: Vec<_> = pods.iter().filter(|p| p.2 && !p.3 && p.1 != victim).collect();
        Ok((serving.len() == 6).then(|| killed.elapsed()))
    })
    .await?;
    let node = lab.get_json("node1", &["node", victim]).await?;
    let taints: Vec<String> = node["spec"]["taints"].as_array().into_iter().flatten().map(|t| format!("{}:{}", str_at(t, "/key"), str_at(t, "/effect"))).collect();
    ensure!(taints.iter().any(|t| t == "node.kubernetes.io/unreachable:NoExecute"), "{victim} is tainted unreachable: {taints:?}");
    let evs = lab.get_json("node1", &["events", "--field-selector", "reason=TaintManagerEviction"]).await?;
    for pod in &doomed {
        ensure!(evs["items"].as_array().into_iter().flatten().any(|e| str_at(e, "/involvedObject/name") == pod), "{pod} was evicted by the taint manager");
    }
    eprintln!("[labs] 07: {victim} killed; its {} pods replaced on {survivors} after {}", doomed.len(), secs(replaced));
    ensure!(replaced <= Duration::from_secs(LAB_TOLERATION_SECONDS + 60), "replaced after {}, more than the toleration plus a minute", secs(replaced));

    // The victim comes back; its node agent finishes the evicted pods.
    lab.script_ok(&["start", victim]).await?;
    poll_until(&format!("three nodes Ready, {victim}'s old pods gone"), Duration::from_secs(180), Duration::from_secs(1), || async {
        let r = lab.node_readiness("node1").await?;
        let pods = web_pods(lab, "node1").await?;
        Ok((r.len() == 3 && r.values().all(|s| s == "True") && !pods.iter().any(|p| doomed.contains(&p.0))).then_some(()))
    })
    .await?;

    // A rolling update, sampled every 200 ms (the page's loop samples every second; a rollout
    // here can take two): never fewer than 6 - 1 Ready (maxUnavailable 25 % of 6, rounded down).
    let done = std::sync::atomic::AtomicBool::new(false);
    let rollout = async {
        let started = Instant::now();
        let r = async {
            lab.kubectl_ok("node1", &["set", "env", "deployment/web", "VERSION=2"]).await?;
            lab.kubectl_ok("node1", &["rollout", "status", "deployment/web", "--timeout=180s"]).await
        }
        .await;
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        r.map(|_| started.elapsed())
    };
    let sample = async {
        let (mut fewest, mut samples) = (usize::MAX, 0);
        while !done.load(std::sync::atomic::Ordering::Relaxed) {
            if let Ok(pods) = web_pods(lab, "node1").await {
                fewest = fewest.min(pods.iter().filter(|p| p.2 && !p.3).count());
                samples += 1;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        (fewest, samples)
    };
    let (took, (fewest, samples)) = tokio::join!(rollout, sample);
    let took = took?;
    let pods = web_pods(lab, "node1").await?;
    let live: Vec<_> = pods.iter().filter(|p| !p.3).collect();
    ensure!(live.len() == 6 && live.iter().all(|p| p.2 && p.4 == live[0].4), "six Ready pods of one template after the rollout: {pods:?}");
    eprintln!("[labs] 07: rolling update in {}: fewest Ready pods in {samples} samples: {fewest}", secs(took));
    ensure!(samples >= 3 && fewest >= 5, "at least 5 of 6 pods Ready throughout the rollout: fewest {fewest} in {samples} samples");
    lab.kubectl_ok("node1", &["delete", "deployment", "web"]).await?;
    Ok(())
}

/// 08: one packet's path — the client's resolv.conf and `nslookup` of web's name (the cluster DNS behind
/// 10.96.0.10), node1's KUBE-SERVICES → KUBE-SVC (probabilities) → KUBE-SEP (DNAT) chains for
/// `default/web`, the host-gw route to a pod on another node, requests answered by all three
/// pods; then the terminating endpoint: a pod with a preStop hook is deleted and, while the hook
/// runs, its slice entry is `ready=false serving=true terminating=true` and its KUBE-SEP chain is
/// gone from node1's KUBE-SVC chain while requests keep succeeding; `kubelab trace svc/web`
/// shows every node's proxy syncing it.
async fn ex08_one_packet(lab: &Lab) -> anyhow::Result<()> {
    let web = "mkdir -p /www; hostname > /www/index.html; exec httpd -f -p 8080 -h /www";
    lab.kubectl_ok("node1", &["create", "deployment", "web", &format!("--image={BUSYBOX}"), "--replicas=3", "--", "sh", "-c", web]).await?;
    lab.kubectl_ok("node1", &["rollout", "status", "deployment/web", "--timeout=120s"]).await?;
    lab.kubectl_ok("node1", &["expose", "deployment", "web", "--port=80", "--target-port=8080"]).await?;
    let overrides = r#"{"spec":{"nodeSelector":{"kubernetes.io/hostname":"node1"}}}"#;
    lab.kubectl_ok("node1", &["run", "client", &format!("--image={BUSYBOX}"), &format!("--overrides={overrides}"), "--", "sleep", "100000"]).await?;
    wait_running(lab, "default", "client").await?;
    let pods = lab.kubectl_ok("node1", &["get", "pods", "-l", "app=web", "-o", "wide"]).await?;
    eprintln!("[labs] 08: the pods:\n{pods}");
    let cluster_ip = lab.kubectl_ok("node1", &["get", "service", "web", "-o", "jsonpath={.spec.clusterIP}"]).await?;

    // 1. DNS.
    let resolv = lab.kubectl_ok("node1", &["exec", "client", "--", "cat", "/etc/resolv.conf"]).await?;
    eprintln!("[labs] 08: resolv.conf:\n{resolv}");
    ensure!(resolv.contains("nameserver 10.96.0.10"), "the client's nameserver is the kube-dns Service: {resolv}");
    // busybox's nslookup does not walk the search list: the whole name.
    let looked = poll_until("nslookup web.default.svc.cluster.local", SHOW_TIMEOUT, POLL, || async {
        let out = lab.kubectl_ok("node1", &["exec", "client", "--", "nslookup", "web.default.svc.cluster.local"]).await?;
        Ok(out.contains(&cluster_ip).then_some(out))
    })
    .await?;
    eprintln!("[labs] 08: nslookup web.default.svc.cluster.local:\n{looked}");

    // 2. The chains on node1.
    let line = poll_until("default/web in node1's KUBE-SERVICES", SHOW_TIMEOUT, POLL, || async {
        let services = lab.exec_ok("node1", &["iptables", "-t", "nat", "-S", "KUBE-SERVICES"]).await?;
        Ok(services.lines().find(|l| l.contains("default/web cluster IP")).map(str::to_string))
    })
    .await?;
    eprintln!("[labs] 08: {line}");
    let svc_chain = line.rsplit(' ').next().unwrap_or_default().to_string();
    ensure!(svc_chain.starts_with("KUBE-SVC-"), "{line}");
    let chain = lab.exec_ok("node1", &["iptables", "-t", "nat", "-S", &svc_chain]).await?;
    eprintln!("[labs] 08: {svc_chain}:\n{chain}");
    let seps: Vec<String> = chain.lines().filter_map(|l| l.rsplit(' ').next().filter(|c| c.starts_with("KUBE-SEP-")).map(str::to_string)).collect();
    ensure!(seps.len() == 3 && chain.contains("--probability 0.33333"), "three endpoints, the first at 1/3: {chain}");
    let sep = lab.exec_ok("node1", &["iptables", "-t", "nat", "-S", &seps[0]]).await?;
    eprintln!("[labs] 08: {}:\n{sep}", seps[0]);
    ensure!(sep.contains("-j DNAT") && sep.contains(":8080"), "{sep}");

    // The rest of the Service range is refused on the node.
    let net = lab.exec_ok("node1", &["iptables", "-S", "KUBELAB-SERVICE-RANGE"]).await?;
    eprintln!("[labs] 08: {net}");
    ensure!(net.contains("-d 10.96.0.0/12") && net.contains("-j REJECT"), "{net}");
    let out = lab.kubectl("node1", &["exec", "client", "--", "wget", "-q", "-O", "-", "http://10.111.222.33/"], None).await?;
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    eprintln!("[labs] 08: an address no Service has: {err}");
    ensure!(!out.status.success() && err.contains("Connection refused"), "refused: {err}");

    // 3. The route to a pod on another node.
    let p = lab.get_json("node1", &["pods", "-l", "app=web"]).await?;
    let remote = p["items"].as_array().into_iter().flatten().find(|p| str_at(p, "/spec/nodeName") != "node1").context("a web pod off node1")?;
    let (ip, node) = (str_at(remote, "/status/podIP").to_string(), str_at(remote, "/spec/nodeName").to_string());
    let route = lab.exec_ok("node1", &["ip", "route", "get", &ip]).await?;
    eprintln!("[labs] 08: ip route get {ip} (on {node}):\n{route}");
    ensure!(route.contains(" via 172.31.250."), "{route}");

    // 4. Every pod answers.
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..30 {
        if seen.len() == 3 {
            break;
        }
        seen.insert(lab.kubectl_ok("node1", &["exec", "client", "--", "wget", "-q", "-O", "-", "http://web"]).await?.trim().to_string());
    }
    eprintln!("[labs] 08: answered by {seen:?}");
    ensure!(seen.len() == 3, "three pods answer: {seen:?}");

    // 5. The terminating endpoint, with a preStop hook that keeps a pod serving for 20 s.
    let patch = r#"{"spec":{"template":{"spec":{"terminationGracePeriodSeconds":30,"containers":[{"name":"busybox","lifecycle":{"preStop":{"exec":{"command":["sleep","20"]}}}}]}}}}"#;
    lab.kubectl_ok("node1", &["patch", "deployment", "web", "--patch", patch]).await?;
    lab.kubectl_ok("node1", &["rollout", "status", "deployment/web", "--timeout=180s"]).await?;
    // The old pods leave within their 30 s grace period (httpd, PID 1, ignores SIGTERM).
    only_pods_left(lab, "app=web", 3).await?;
    let victim = lab.kubectl_ok("node1", &["get", "pods", "-l", "app=web", "-o", "jsonpath={.items[0].metadata.name}"]).await?;
    let victim_ip = lab.kubectl_ok("node1", &["get", "pod", &victim, "-o", "jsonpath={.status.podIP}"]).await?;
    let deleted_at = chrono::Utc::now();
    lab.kubectl_ok("node1", &["delete", "pod", &victim, "--wait=false"]).await?;
    let conds = "jsonpath={range .items[*].endpoints[*]}{.addresses[0]} ready={.conditions.ready} serving={.conditions.serving} terminating={.conditions.terminating}{\"\\n\"}{end}";
    let during = poll_until("the deleted pod terminating in the slice", Duration::from_secs(15), POLL, || async {
        let out = lab.kubectl_ok("node1", &["get", "endpointslices", "-l", "kubernetes.io/service-name=web", "-o", conds]).await?;
        Ok(out.lines().any(|l| l.starts_with(&format!("{victim_ip} ready=false serving=true terminating=true"))).then_some(out))
    })
    .await?;
    eprintln!("[labs] 08: while {victim}'s preStop runs:\n{during}");
    let nat = poll_until("the terminating endpoint out of the rules", Duration::from_secs(15), POLL, || async {
        let out = lab.exec_ok("node1", &["iptables", "-t", "nat", "-S"]).await?;
        Ok((!out.contains(&format!("-j DNAT --to-destination {victim_ip}:8080"))).then_some(()))
    })
    .await;
    nat?;
    let answers = lab.kubectl_ok("node1", &["exec", "client", "--", "wget", "-q", "-O", "-", "http://web"]).await?;
    eprintln!("[labs] 08: a request while it terminates: {}", answers.trim());
    ensure!(answers.trim() != victim, "the terminating pod gets no new connection");

    // 6. The trip, timed: after the delete, every node's proxy synced a terminating endpoint
    // (the victim's: it stays terminating for its 20 s hook).
    poll_until("kubelab trace svc/web with each node's sync of the terminating endpoint", SHOW_TIMEOUT, POLL, || async {
        let json: Value = serde_json::from_str(&kubelab_trace(lab, &["svc/web", "--json"]).await?)?;
        let steps = json["steps"].as_array().cloned().unwrap_or_default();
        let synced = |node: &str| {
            steps.iter().any(|s| {
                let after = s["start"].as_str().and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok()).is_some_and(|t| t.to_utc() >= deleted_at);
                let terminating = s["fields"]["endpoints"].as_str().and_then(|e| e.split(", ").nth(1)?.strip_suffix(" terminating")?.parse::<u32>().ok());
                s["component"] == "proxy" && s["node"] == node && after && terminating.is_some_and(|n| n >= 1)
            })
        };
        Ok(["node1", "node2", "node3"].iter().all(|n| synced(n)).then_some(()))
    })
    .await?;
    let trace = kubelab_trace(lab, &["svc/web"]).await?;
    eprintln!("[labs] 08: kubelab trace svc/web (the victim deleted at {deleted_at}):\n{trace}");
    ensure!(trace.starts_with("service default/web (uid "), "{trace}");
    ensure!(trace.contains("request") && trace.contains("verb=POST") && trace.contains("resource=services"), "kubectl's create of the Service:\n{trace}");
    lab.kubectl_ok("node1", &["delete", "service", "web"]).await?;
    lab.kubectl_ok("node1", &["delete", "deployment", "web"]).await?;
    lab.kubectl_ok("node1", &["delete", "pod", "client", "--grace-period=1"]).await?;
    only_pods_left(lab, "app=web", 0).await?;
    Ok(())
}

/// `lab chaos` for a minute, as the page runs it for longer: faults, then every invariant held,
/// and the report on stdout is the one written to the lab's directory.
async fn ex10_chaos(lab: &Lab) -> anyhow::Result<()> {
    let out = lab.script_ok(&["chaos", "--duration", "60s", "--seed", "10"]).await?;
    eprintln!("[labs] 10: the chaos report:\n{out}");
    ensure!(out.starts_with("kubelab lab chaos: seed 10, 60s of faults"), "{out}");
    let faults: usize = out.lines().find_map(|l| l.strip_prefix("faults (")?.strip_suffix("):")?.parse().ok()).context("no fault count")?;
    ensure!(faults >= 2, "a minute should hold at least one fault and its end: {faults}\n{out}");
    let writes = out.lines().find(|l| l.starts_with("writes: ")).context("no writes line")?;
    ensure!(writes.ends_with("missing: none") && !writes.starts_with("writes: 0 "), "{writes}");
    ensure!(out.contains("pods running twice: 0;") && out.contains("result: every invariant held"), "{out}");
    // And the check is not blind: it saw ready pods run (the workload has four; one may be
    // restarting after the last fault, and so not ready, when it looks).
    let seen: usize = out.split("ready pods seen running on their nodes: ").nth(1).and_then(|r| r.split(',').next()?.parse().ok()).context("no count of pods seen")?;
    ensure!(seen >= 2, "the check saw only {seen} ready pods running\n{out}");
    let saved = std::fs::read_to_string(lab.kubeconfig().with_file_name("chaos-report.txt"))?;
    ensure!(saved == out, "the saved report differs from what was printed:\n{saved}");
    lab.kubectl_ok("node1", &["delete", "namespace", "chaos", "--wait=false"]).await?;
    Ok(())
}

/// `kubelab trace <args>` against node1's API server, as a learner on the host runs it (with the
/// lab's kubeconfig in `$KUBECONFIG`, as `lab up` tells them).
async fn kubelab_trace(lab: &Lab, args: &[&str]) -> anyhow::Result<String> {
    let mut cmd = std::process::Command::new(e2e::kubelab_bin()?);
    cmd.arg("trace").args(args).env("KUBECONFIG", lab.kubeconfig()).stdin(Stdio::null());
    let out = tokio::task::spawn_blocking(move || cmd.output()).await??;
    ensure!(out.status.success(), "kubelab trace {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Waits until exactly `n` pods match `selector` (terminating ones included).
async fn only_pods_left(lab: &Lab, selector: &str, n: usize) -> anyhow::Result<()> {
    poll_until(&format!("{n} pods with {selector}"), Duration::from_secs(90), POLL, || async {
        let v = lab.get_json("node1", &["pods", "-l", selector]).await?;
        Ok((v["items"].as_array().map_or(0, Vec::len) == n).then_some(()))
    })
    .await
}

async fn run<F: std::future::Future<Output = anyhow::Result<()>>>(name: &str, exercise: F) {
    let start = Instant::now();
    if let Err(e) = exercise.await {
        panic!("exercise {name} failed: {e:#}");
    }
    println!("  exercise {name}: {}", secs(start.elapsed()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lab_exercises() {
    let mut lab = Lab::up_with_env(&[("KUBELAB_RUST_LOG", RUST_LOG)]).await.expect("lab up");
    let start = Instant::now();
    println!("lab exercises:");
    run("01-schedule-a-pod", ex01_schedule_a_pod(&lab)).await;
    run("03-mirror-pod", ex03_mirror_pod(&lab)).await;
    run("04-broken-static-pod", ex04_broken_static_pod(&lab)).await;
    run("05-fill-a-node", ex05_fill_a_node(&lab)).await;
    run("06-pleg-container-death", ex06_pleg_sees_a_container_die(&lab)).await;
    run("08-one-packet", ex08_one_packet(&lab)).await;
    run("07-deployment-survives-a-node", ex07_deployment_survives_a_node(&lab)).await;
    run("02-store-leader-election", ex02_store_leader_election(&lab)).await;
    run("10-chaos", ex10_chaos(&lab)).await;
    println!("  all exercises: {}", secs(start.elapsed()));
    lab.down();
}
