//! The Job and TTL-after-finished controllers of `kubelab controller-manager`, end to end on a
//! kubelab store + API server. There is no kubelet: the test stands in for one, posting pods
//! Running, Succeeded or Failed through `pods/<name>/status` (the pods stay unscheduled, which
//! the Job controller does not mind). With kubectl 1.27 and 1.33:
//! - completion: `kubectl create job` runs one pod; Succeeded, the Job completes and
//!   `kubectl wait --for=condition=complete` returns; a Job of 3 completions runs 2 pods at a
//!   time, each created with the controller reference and the `batch.kubernetes.io/job-tracking`
//!   finalizer, which a finished pod loses once counted; `SuccessCriteriaMet` then `Complete`,
//!   `3/3` in `kubectl get`, the events in `kubectl describe`; an Indexed Job's pods carry their
//!   index (annotation, label, hostname) and `completedIndexes` follows them.
//! - failure: a pod failing twice with `backoffLimit: 1` fails the Job (`BackoffLimitExceeded`),
//!   the replacement coming only after the 10 s failure backoff; `activeDeadlineSeconds` fails
//!   a Job (`DeadlineExceeded`), its running pods deleted and counted as failed; a pod deleted
//!   by hand counts as a failure too and goes once its finalizer is taken off.
//! - suspend and resume: suspending deletes the pods (not counted as failures) with the
//!   `Suspended` condition; resuming creates them again and restarts the clock. A Job deleted
//!   with `--cascade=orphan` leaves its pod, which loses the finalizer.
//! - TTL after finished: a finished Job with `ttlSecondsAfterFinished: 2` is deleted, with its
//!   pods, a couple of seconds after it finished.

use std::time::{Duration, Instant};

use e2e::apiserver::{ApiCluster, ApiOptions};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

const FINALIZER: &str = "batch.kubernetes.io/job-tracking";
const INDEX: &str = "batch.kubernetes.io/job-completion-index";
/// How long a controller may take to act on what the test did, on a loaded machine.
const ACT: Duration = Duration::from_secs(20);

/// kubectl 1.`minor` with a fresh HOME: (success, stdout + stderr).
fn kubectl_of(c: &ApiCluster, minor: u32, args: &[&str]) -> (bool, String) {
    let bin = e2e::apiserver::kubectl_for(minor).expect("kubectl");
    let home = c.root().join(format!("home-{minor}"));
    std::fs::create_dir_all(&home).expect("home");
    let out = std::process::Command::new(&bin)
        .env_clear()
        .env("HOME", &home)
        .env("KUBECONFIG", home.join("no-kubeconfig"))
        .arg("-s")
        .arg(c.url())
        .arg("--request-timeout=20s")
        .args(args)
        .output()
        .expect("run kubectl");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    eprintln!("[kubectl 1.{minor}] {} -> {:?}", args.join(" "), out.status.code());
    (out.status.success(), text)
}

fn kubectl_ok(c: &ApiCluster, minor: u32, args: &[&str]) -> String {
    let (ok, out) = kubectl_of(c, minor, args);
    if !ok {
        c.fail(&format!("kubectl 1.{minor} {}:\n{out}", args.join(" ")));
    }
    out
}

/// Creates a Job from YAML through kubectl; its uid.
async fn apply(c: &ApiCluster, minor: u32, jobs: &Api<Job>, name: &str, yaml: &str) -> String {
    let file = c.write_file(&format!("{name}.yaml"), yaml);
    kubectl_ok(c, minor, &["apply", "-f", &file.display().to_string()]);
    jobs.get(name).await.expect("get job").metadata.uid.expect("uid")
}

fn job_yaml(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\nspec:\n{spec}  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: c\n        image: busybox\n"
    )
}

/// The pods `uid` controls (being deleted or not), sorted by name.
async fn pods_of(pods: &Api<Pod>, uid: &str) -> Vec<Pod> {
    let mut v: Vec<Pod> = pods
        .list(&ListParams::default())
        .await
        .expect("list pods")
        .items
        .into_iter()
        .filter(|p| p.metadata.owner_references.iter().flatten().any(|r| r.controller == Some(true) && r.uid == uid))
        .collect();
    v.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    v
}

fn name(p: &Pod) -> String {
    p.metadata.name.clone().unwrap_or_default()
}

fn phase(p: &Pod) -> String {
    p.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default()
}

fn has_finalizer(p: &Pod) -> bool {
    p.metadata.finalizers.iter().flatten().any(|f| f == FINALIZER)
}

/// Active as the controller counts: not finished, not being deleted.
fn active(pods: &[Pod]) -> Vec<Pod> {
    pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none() && !matches!(phase(p).as_str(), "Succeeded" | "Failed")).cloned().collect()
}

/// Waits for exactly `n` active pods of the Job.
async fn wait_active(c: &ApiCluster, pods: &Api<Pod>, uid: &str, n: usize) -> Vec<Pod> {
    c.wait_for(&format!("{n} active pods"), ACT, || async {
        let all = pods_of(pods, uid).await;
        let a = active(&all);
        if a.len() == n { Ok(a) } else { Err(format!("{:?}", all.iter().map(|p| (name(p), phase(p), p.metadata.deletion_timestamp.is_some())).collect::<Vec<_>>())) }
    })
    .await
}

/// What a kubelet posts: Running and Ready, or the pod's end with its container's exit.
async fn set_phase(pods: &Api<Pod>, pod: &str, phase: &str) {
    let now = Timestamp::now().to_string();
    let status = match phase {
        "Running" => json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
                            "containerStatuses": [{"name": "c", "image": "busybox", "imageID": "", "ready": true, "restartCount": 0, "state": {"running": {"startedAt": now}}}]}),
        _ => {
            let code = if phase == "Succeeded" { 0 } else { 1 };
            json!({"phase": phase, "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": now}],
                   "containerStatuses": [{"name": "c", "image": "busybox", "imageID": "", "ready": false, "restartCount": 0,
                                          "state": {"terminated": {"exitCode": code, "reason": if code == 0 { "Completed" } else { "Error" }, "startedAt": now, "finishedAt": now}}}]})
        }
    };
    pods.patch_status(pod, &PatchParams::default(), &Patch::Merge(&json!({"status": status}))).await.expect("post pod status");
}

/// The Job's (active, succeeded, failed) and its conditions as `Type=Status/Reason`.
fn summary(job: &Job) -> ((i32, i32, i32), Vec<String>) {
    let s = job.status.clone().unwrap_or_default();
    let conds = s.conditions.unwrap_or_default().iter().map(|c| format!("{}={}/{}", c.type_, c.status, c.reason.clone().unwrap_or_default())).collect();
    ((s.active.unwrap_or(0), s.succeeded.unwrap_or(0), s.failed.unwrap_or(0)), conds)
}

/// Waits until the Job has condition `type_` True; the Job then.
async fn wait_condition(c: &ApiCluster, jobs: &Api<Job>, job: &str, type_: &str, timeout: Duration) -> Job {
    c.wait_for(&format!("{job} {type_}"), timeout, || async {
        let j = jobs.get(job).await.map_err(|e| e.to_string())?;
        let has = j.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|cs| cs.iter().any(|c| c.type_ == type_ && c.status == "True"));
        if has { Ok(j) } else { Err(format!("{:?}", summary(&j))) }
    })
    .await
}

/// `kubectl create job` (1.27): one pod, with the controller reference and the finalizer;
/// Succeeded, the Job completes and `kubectl wait` (1.27 and 1.33) sees it. A Job of 3
/// completions, 2 at a time (1.33): a third pod only after a success; the finalizer comes off
/// each finished pod; `SuccessCriteriaMet` then `Complete` with 3 succeeded. An Indexed Job's
/// pods carry their index and `completedIndexes` follows them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_run_their_pods_to_completion() {
    let c = ApiCluster::start(ApiOptions { controller_manager: true, ..ApiOptions::default() }).await.expect("start the cluster");
    let client = c.kube_client().expect("client");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");

    // kubectl create job: one pod, held by the finalizer while it runs.
    kubectl_ok(&c, 27, &["create", "job", "hello", "--image=busybox", "--", "echo", "hi"]);
    let hello = jobs.get("hello").await.expect("job").metadata.uid.expect("uid");
    let first = wait_active(&c, &pods, &hello, 1).await.remove(0);
    let pod_name = name(&first);
    assert!(pod_name.starts_with("hello-") && pod_name.len() == "hello-".len() + 5, "generated name: {pod_name}");
    let owner = &first.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str(), owner.controller, owner.block_owner_deletion), ("Job", "hello", Some(true), Some(true)));
    set_phase(&pods, &pod_name, "Running").await;
    c.wait_for("hello running, ready, with the finalizer", ACT, || async {
        let j = jobs.get("hello").await.map_err(|e| e.to_string())?;
        let p = pods.get(&pod_name).await.map_err(|e| e.to_string())?;
        let s = j.status.clone().unwrap_or_default();
        if s.active == Some(1) && s.ready == Some(1) && s.start_time.is_some() && has_finalizer(&p) { Ok(()) } else { Err(format!("{:?} finalizers {:?}", summary(&j), p.metadata.finalizers)) }
    })
    .await;
    set_phase(&pods, &pod_name, "Succeeded").await;
    let (ok, out) = kubectl_of(&c, 27, &["wait", "--for=condition=complete", "job/hello", "--timeout=20s"]);
    assert!(ok && out.contains("condition met"), "{out}");
    let (ok, out) = kubectl_of(&c, 33, &["wait", "--for=condition=complete", "job/hello", "--timeout=20s"]);
    assert!(ok && out.contains("condition met"), "{out}");
    let j = jobs.get("hello").await.expect("job");
    assert_eq!(summary(&j).0, (0, 1, 0));
    let p = pods.get(&pod_name).await.expect("the finished pod stays");
    assert!(!has_finalizer(&p), "the counted pod lost the finalizer: {:?}", p.metadata.finalizers);

    // 3 completions, 2 at a time.
    let work = apply(&c, 33, &jobs, "work", &job_yaml("work", "  completions: 3\n  parallelism: 2\n")).await;
    let two = wait_active(&c, &pods, &work, 2).await;
    assert!(two.iter().all(has_finalizer), "every pod starts with the finalizer");
    set_phase(&pods, &name(&two[0]), "Running").await;
    set_phase(&pods, &name(&two[0]), "Succeeded").await;
    let next = c.wait_for("one counted, a third pod", ACT, || async {
        let j = jobs.get("work").await.map_err(|e| e.to_string())?;
        let all = pods_of(&pods, &work).await;
        let a = active(&all);
        if summary(&j).0 == (2, 1, 0) && a.len() == 2 { Ok(a) } else { Err(format!("{:?}, {} active", summary(&j), a.len())) }
    })
    .await;
    assert!(!has_finalizer(&pods.get(&name(&two[0])).await.expect("pod")), "the first finished pod lost the finalizer");
    for p in &next {
        set_phase(&pods, &name(p), "Succeeded").await;
    }
    let j = wait_condition(&c, &jobs, "work", "Complete", ACT).await;
    let (counts, conds) = summary(&j);
    assert_eq!(counts, (0, 3, 0));
    assert_eq!(conds, ["SuccessCriteriaMet=True/CompletionsReached", "Complete=True/CompletionsReached"]);
    let s = j.status.clone().unwrap_or_default();
    assert!(s.completion_time.is_some() && s.uncounted_terminated_pods.as_ref().is_none_or(|u| u.succeeded.as_ref().is_none_or(Vec::is_empty)), "{s:?}");
    assert!(pods_of(&pods, &work).await.iter().all(|p| !has_finalizer(p)), "no pod keeps the finalizer");
    let table = kubectl_ok(&c, 33, &["get", "job", "work"]);
    assert!(table.lines().nth(1).is_some_and(|l| l.contains("3/3")), "COMPLETIONS 3/3:\n{table}");
    let described = kubectl_ok(&c, 27, &["describe", "job", "work"]);
    for want in ["SuccessfulCreate", "Created pod: work-", "Completed", "Job completed", "job-controller", "3 Succeeded"] {
        assert!(described.contains(want), "{want:?} in:\n{described}");
    }

    // Indexed: one pod per index; completedIndexes as ranges.
    let idx = apply(&c, 33, &jobs, "idx", &job_yaml("idx", "  completions: 3\n  parallelism: 3\n  completionMode: Indexed\n")).await;
    let three = wait_active(&c, &pods, &idx, 3).await;
    let mut by_index: Vec<(String, String)> = Vec::new();
    for p in &three {
        let ix = p.metadata.annotations.as_ref().and_then(|a| a.get(INDEX)).cloned().expect("index annotation");
        assert_eq!(p.metadata.labels.as_ref().and_then(|l| l.get(INDEX)), Some(&ix), "index label");
        assert_eq!(p.spec.as_ref().and_then(|s| s.hostname.clone()), Some(format!("idx-{ix}")));
        assert!(name(p).starts_with(&format!("idx-{ix}-")), "{}", name(p));
        by_index.push((ix, name(p)));
    }
    by_index.sort();
    assert_eq!(by_index.iter().map(|(ix, _)| ix.as_str()).collect::<Vec<_>>(), ["0", "1", "2"]);
    set_phase(&pods, &by_index[0].1, "Succeeded").await;
    set_phase(&pods, &by_index[1].1, "Succeeded").await;
    c.wait_for("completedIndexes 0,1", ACT, || async {
        let j = jobs.get("idx").await.map_err(|e| e.to_string())?;
        let s = j.status.clone().unwrap_or_default();
        if s.completed_indexes.as_deref() == Some("0,1") && s.succeeded == Some(2) { Ok(()) } else { Err(format!("{:?} {:?}", s.completed_indexes, s.succeeded)) }
    })
    .await;
    set_phase(&pods, &by_index[2].1, "Succeeded").await;
    let j = wait_condition(&c, &jobs, "idx", "Complete", ACT).await;
    assert_eq!(j.status.and_then(|s| s.completed_indexes).as_deref(), Some("0-2"));
}

/// `backoffLimit: 1`: the first failure is replaced only after the 10 s backoff; the second
/// fails the Job (FailureTarget, then Failed, BackoffLimitExceeded, and the event).
/// `activeDeadlineSeconds: 3`: the running pods are deleted, counted as failed, and the Job
/// fails with DeadlineExceeded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_fail_past_their_backoff_limit_or_deadline() {
    let c = ApiCluster::start(ApiOptions { controller_manager: true, ..ApiOptions::default() }).await.expect("start the cluster");
    let client = c.kube_client().expect("client");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");

    let flaky = apply(&c, 27, &jobs, "flaky", &job_yaml("flaky", "  backoffLimit: 1\n")).await;
    let first = wait_active(&c, &pods, &flaky, 1).await.remove(0);
    // The deadline Job runs meanwhile.
    let slow = apply(&c, 33, &jobs, "slow", &job_yaml("slow", "  parallelism: 2\n  completions: 4\n  activeDeadlineSeconds: 3\n")).await;
    let gone = apply(&c, 27, &jobs, "gone", &job_yaml("gone", "  backoffLimit: 0\n")).await;
    set_phase(&pods, &name(&first), "Failed").await;
    let failed_at = Instant::now();
    c.wait_for("the failure counted", ACT, || async {
        let j = jobs.get("flaky").await.map_err(|e| e.to_string())?;
        if summary(&j).0 == (0, 0, 1) { Ok(()) } else { Err(format!("{:?}", summary(&j))) }
    })
    .await;
    let second = wait_active(&c, &pods, &flaky, 1).await.remove(0);
    let waited = failed_at.elapsed();
    assert!(waited >= Duration::from_secs(8), "the replacement came after the backoff, not {waited:?}");
    assert_ne!(name(&second), name(&first));

    // The deadline: both pods deleted, counted as failed.
    let j = wait_condition(&c, &jobs, "slow", "Failed", ACT).await;
    let (counts, conds) = summary(&j);
    assert_eq!(counts, (0, 0, 2), "{conds:?}");
    assert_eq!(conds, ["FailureTarget=True/DeadlineExceeded", "Failed=True/DeadlineExceeded"]);
    c.wait_for("the slow pods gone", ACT, || async {
        let left = pods_of(&pods, &slow).await;
        if left.is_empty() { Ok(()) } else { Err(format!("{:?}", left.iter().map(name).collect::<Vec<_>>())) }
    })
    .await;

    // A pod deleted before it finished: counted as a failure, its finalizer taken off so it goes.
    let doomed = wait_active(&c, &pods, &gone, 1).await.remove(0);
    kubectl_ok(&c, 33, &["delete", "pod", &name(&doomed), "--wait=false"]);
    let j = wait_condition(&c, &jobs, "gone", "Failed", ACT).await;
    assert_eq!(summary(&j), ((0, 0, 1), vec!["FailureTarget=True/BackoffLimitExceeded".to_string(), "Failed=True/BackoffLimitExceeded".to_string()]));
    c.wait_for("the deleted pod gone", ACT, || async {
        match pods.get_opt(&name(&doomed)).await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(p) => Err(format!("still there, finalizers {:?}", p.metadata.finalizers)),
        }
    })
    .await;

    set_phase(&pods, &name(&second), "Failed").await;
    let j = wait_condition(&c, &jobs, "flaky", "Failed", ACT).await;
    let (counts, conds) = summary(&j);
    assert_eq!(counts, (0, 0, 2));
    assert_eq!(conds, ["FailureTarget=True/BackoffLimitExceeded", "Failed=True/BackoffLimitExceeded"]);
    let (ok, out) = kubectl_of(&c, 33, &["wait", "--for=condition=failed", "job/flaky", "--timeout=10s"]);
    assert!(ok, "{out}");
    let described = kubectl_ok(&c, 33, &["describe", "job", "flaky"]);
    for want in ["BackoffLimitExceeded", "Job has reached the specified backoff limit", "2 Failed"] {
        assert!(described.contains(want), "{want:?} in:\n{described}");
    }
    let described = kubectl_ok(&c, 27, &["describe", "job", "slow"]);
    for want in ["DeadlineExceeded", "Job was active longer than specified deadline", "SuccessfulDelete"] {
        assert!(described.contains(want), "{want:?} in:\n{described}");
    }
    assert!(pods_of(&pods, &flaky).await.iter().all(|p| !has_finalizer(p)), "the failed pods were released");
}

/// Suspend (1.27) deletes the pods, not counting them as failures, and sets Suspended; resume
/// (1.33) creates them again and restarts the clock. A finished Job with
/// `ttlSecondsAfterFinished: 2` goes, with its pods, after about 2 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_suspend_resume_and_expire_after_their_ttl() {
    let c = ApiCluster::start(ApiOptions { controller_manager: true, ..ApiOptions::default() }).await.expect("start the cluster");
    let client = c.kube_client().expect("client");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");

    let short = apply(&c, 27, &jobs, "short", &job_yaml("short", "  ttlSecondsAfterFinished: 2\n")).await;
    let paused = apply(&c, 33, &jobs, "paused", &job_yaml("paused", "  parallelism: 2\n  completions: 2\n")).await;

    // TTL: completes, then goes with its pod.
    let p = wait_active(&c, &pods, &short, 1).await.remove(0);
    set_phase(&pods, &name(&p), "Succeeded").await;
    wait_condition(&c, &jobs, "short", "Complete", ACT).await;
    let finished = Instant::now();
    c.wait_for("the short Job and its pod deleted", ACT, || async {
        let j = jobs.get_opt("short").await.map_err(|e| e.to_string())?;
        let left = pods_of(&pods, &short).await;
        if j.is_none() && left.is_empty() { Ok(()) } else { Err(format!("job {:?}, pods {:?}", j.map(|j| summary(&j)), left.iter().map(name).collect::<Vec<_>>())) }
    })
    .await;
    assert!(finished.elapsed() >= Duration::from_secs(1), "deleted only after the TTL ({:?})", finished.elapsed());
    let log = std::fs::read_to_string(c.root().join("controller-manager").join("stderr.log")).unwrap_or_default();
    assert!(log.contains("cleaning up Job"), "the TTL controller says so:\n{log}");

    // Suspend: the pods go, not as failures.
    let before = wait_active(&c, &pods, &paused, 2).await;
    let started = jobs.get("paused").await.expect("job").status.and_then(|s| s.start_time).expect("startTime");
    kubectl_ok(&c, 27, &["patch", "job", "paused", "--type=merge", "-p", r#"{"spec":{"suspend":true}}"#]);
    let j = wait_condition(&c, &jobs, "paused", "Suspended", ACT).await;
    assert_eq!(summary(&j).1, ["Suspended=True/JobSuspended"]);
    c.wait_for("the suspended Job's pods gone", ACT, || async {
        let left = pods_of(&pods, &paused).await;
        let j = jobs.get("paused").await.map_err(|e| e.to_string())?;
        if left.is_empty() && summary(&j).0 == (0, 0, 0) { Ok(()) } else { Err(format!("{:?} {:?}", summary(&j), left.iter().map(name).collect::<Vec<_>>())) }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Resume: new pods, the clock restarted.
    kubectl_ok(&c, 33, &["patch", "job", "paused", "--type=merge", "-p", r#"{"spec":{"suspend":false}}"#]);
    let after = wait_active(&c, &pods, &paused, 2).await;
    assert!(after.iter().all(|p| !before.iter().any(|b| name(b) == name(p))), "new pods");
    let j = c.wait_for("resumed", ACT, || async {
        let j = jobs.get("paused").await.map_err(|e| e.to_string())?;
        if summary(&j).1 == ["Suspended=False/JobResumed"] { Ok(j) } else { Err(format!("{:?}", summary(&j))) }
    })
    .await;
    let restarted = j.status.and_then(|s| s.start_time).expect("startTime");
    assert!(restarted.0 > started.0, "startTime reset on resume: {started:?} -> {restarted:?}");
    // Orphaned (the Job deleted with --cascade=orphan): the pod stays, free of the finalizer.
    let left = apply(&c, 27, &jobs, "left", &job_yaml("left", "")).await;
    let p = wait_active(&c, &pods, &left, 1).await.remove(0);
    assert!(has_finalizer(&p));
    kubectl_ok(&c, 33, &["delete", "job", "left", "--cascade=orphan"]);
    c.wait_for("the orphaned pod released", ACT, || async {
        let p = pods.get(&name(&p)).await.map_err(|e| e.to_string())?;
        if p.metadata.owner_references.as_ref().is_none_or(Vec::is_empty) && !has_finalizer(&p) { Ok(()) } else { Err(format!("owners {:?}, finalizers {:?}", p.metadata.owner_references, p.metadata.finalizers)) }
    })
    .await;

    let described = kubectl_ok(&c, 33, &["describe", "job", "paused"]);
    for want in ["Suspended", "Job suspended", "Resumed", "Job resumed", "SuccessfulDelete"] {
        assert!(described.contains(want), "{want:?} in:\n{described}");
    }
}
