//! The CronJob controller end to end: `kubelab controller-manager` on a kubelab store + API
//! server, with no node agent and no Job controller — the test marks a Job finished itself,
//! through `jobs/<name>/status`, as the Job controller would.
//!
//! Every wait for a schedule time costs up to a minute, so one test shares two minute
//! boundaries among several CronJobs created together (kubectl 1.27 and 1.33 and the API):
//! - before the first boundary: `kubectl create job --from=cronjob/x` makes a Job the
//!   controller calls unexpected; finished Jobs beyond a suspended CronJob's history limits are
//!   deleted, the oldest first; a `timeZone` the API server knows but the controller manager's
//!   own tz database lacks gives `UnknownTimeZone`;
//! - at the first boundary (within ~70 s of `kubectl create cronjob x --schedule='* * * * *'`):
//!   Jobs named `<cronjob>-<minutes since the epoch>`, with the controller reference, the
//!   scheduled-timestamp annotation in the CronJob's zone and the template's labels; the status'
//!   `active` and `lastScheduleTime`; x's Job, marked Complete, leaves `active`
//!   (`SawCompletedJob`) and sets `lastSuccessfulTime`; then x is suspended;
//! - at the second boundary: the Forbid CronJob whose Job still runs starts none
//!   (`JobAlreadyActive`), the Replace one deletes its running Job and starts a new one, the
//!   suspended x starts none, the unknown zone still none.

use std::path::Path;
use std::time::Duration;

use e2e::apiserver::{ApiCluster, ApiOptions};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::jiff::tz::{Offset, TimeZone};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const ANNOTATION: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";
/// How long after a minute boundary its Jobs may take on a loaded machine.
const FIRE_SLACK: Duration = Duration::from_secs(15);

/// kubectl 1.`minor` (not the cluster's pinned one) with a fresh HOME: (success, stdout + stderr).
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

/// Minutes since the epoch: the suffix of the Job a schedule time makes.
fn minutes(t: Timestamp) -> i64 {
    t.as_second().div_euclid(60)
}

/// When minute `m` starts.
fn minute_start(m: i64) -> Timestamp {
    Timestamp::from_second(m * 60).expect("timestamp")
}

/// How long from now until `FIRE_SLACK` after minute `m` starts.
fn until_fired(m: i64) -> Duration {
    let left = minute_start(m).duration_since(Timestamp::now());
    Duration::try_from(left).unwrap_or(Duration::ZERO) + FIRE_SLACK
}

fn cron_job(name: &str, extra_spec: Value) -> CronJob {
    let mut v = json!({
        "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
        "spec": {"schedule": "* * * * *", "jobTemplate": {
            "metadata": {"labels": {"cron": name}, "annotations": {"from": "template"}},
            "spec": {"template": {"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox"}]}}}
        }}
    });
    if let (Some(spec), Some(extra)) = (v["spec"].as_object_mut(), extra_spec.as_object()) {
        spec.extend(extra.clone());
    }
    serde_json::from_value(v).expect("cronjob")
}

/// The names of the Jobs whose controller is the CronJob `cj`, sorted.
async fn jobs_of(jobs: &Api<Job>, cj: &str) -> Result<Vec<String>, String> {
    let list = jobs.list(&ListParams::default()).await.map_err(|e| e.to_string())?;
    let mut names: Vec<String> = list
        .items
        .into_iter()
        .filter(|j| j.metadata.owner_references.iter().flatten().any(|r| r.kind == "CronJob" && r.name == cj && r.controller == Some(true)))
        .filter(|j| j.metadata.deletion_timestamp.is_none())
        .filter_map(|j| j.metadata.name)
        .collect();
    names.sort();
    Ok(names)
}

/// (reason, message) of the events about the CronJob `cj`.
async fn events_of(events: &Api<Event>, cj: &str) -> Result<Vec<(String, String)>, String> {
    let list = events.list(&ListParams::default()).await.map_err(|e| e.to_string())?;
    Ok(list
        .items
        .into_iter()
        .filter(|e| e.involved_object.kind.as_deref() == Some("CronJob") && e.involved_object.name.as_deref() == Some(cj))
        .map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
        .collect())
}

async fn wait_event(c: &ApiCluster, events: &Api<Event>, cj: &str, reason: &str, message: &str, timeout: Duration) {
    c.wait_for(&format!("event {reason} {message:?} on cronjob {cj}"), timeout, || async {
        let seen = events_of(events, cj).await?;
        if seen.iter().any(|(r, m)| r == reason && m.starts_with(message)) { Ok(()) } else { Err(format!("{seen:?}")) }
    })
    .await
}

/// (active Job names, lastScheduleTime, lastSuccessfulTime) of a CronJob's status.
fn status_of(cj: &CronJob) -> (Vec<String>, Option<Timestamp>, Option<Timestamp>) {
    let s = cj.status.clone().unwrap_or_default();
    let active = s.active.unwrap_or_default().into_iter().filter_map(|r| r.name).collect();
    (active, s.last_schedule_time.map(|t| t.0), s.last_successful_time.map(|t| t.0))
}

/// Marks a Job finished as the Job controller does: start and completion times, the
/// SuccessCriteriaMet/Complete (or FailureTarget/Failed) conditions.
async fn finish_job(jobs: &Api<Job>, name: &str, started: Timestamp, complete: bool) -> Job {
    let done = started.checked_add(SignedDuration::from_secs(30)).expect("time");
    let cond = |t: &str, reason: &str| json!({"type": t, "status": "True", "reason": reason, "lastProbeTime": done.to_string(), "lastTransitionTime": done.to_string()});
    let status = if complete {
        json!({"startTime": started.to_string(), "completionTime": done.to_string(), "succeeded": 1, "ready": 0, "terminating": 0,
               "conditions": [cond("SuccessCriteriaMet", "CompletionsReached"), cond("Complete", "CompletionsReached")]})
    } else {
        json!({"startTime": started.to_string(), "failed": 1, "ready": 0, "terminating": 0,
               "conditions": [cond("FailureTarget", "BackoffLimitExceeded"), cond("Failed", "BackoffLimitExceeded")]})
    };
    jobs.patch_status(name, &PatchParams::default(), &Patch::Merge(&json!({"status": status}))).await.expect("job status")
}

/// The controller manager's own tz database, lacking zones the API server's has (as when the two
/// run on machines with different tz data): only these.
fn small_tz_database(dir: &Path, zones: &[&str]) {
    for zone in zones {
        let to = dir.join(zone);
        std::fs::create_dir_all(to.parent().expect("parent")).expect("tz dir");
        std::fs::copy(Path::new("/usr/share/zoneinfo").join(zone), &to).expect("copy zone");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cron_jobs_create_jobs_on_schedule() {
    let tzdir = tempfile::tempdir().expect("tzdir");
    small_tz_database(tzdir.path(), &["UTC", "Etc/UTC", "Asia/Kolkata"]);
    let c = ApiCluster::start(ApiOptions {
        controller_manager: true,
        controller_manager_env: vec![("TZDIR".into(), tzdir.path().display().to_string())],
        ..ApiOptions::default()
    })
    .await
    .expect("start the cluster");
    let client = c.kube_client().expect("client");
    let cron_jobs: Api<CronJob> = Api::namespaced(client.clone(), "default");
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let ok = |minor: u32, args: &[&str]| {
        let (ok, out) = kubectl_of(&c, minor, args);
        assert!(ok, "kubectl 1.{minor} {}:\n{out}", args.join(" "));
        out
    };

    // Create everything early in a minute, so that every CronJob's first time is the next one.
    let second = Timestamp::now().as_second().rem_euclid(60);
    if !(1..=35).contains(&second) {
        tokio::time::sleep(Duration::from_secs((61 - second) as u64 % 60 + 1)).await;
    }
    let created = Timestamp::now();
    let m1 = minutes(created) + 1;
    let m2 = m1 + 1;
    ok(27, &["create", "cronjob", "x", "--image=busybox", "--schedule=* * * * *"]);
    ok(33, &["create", "cronjob", "forbid", "--image=busybox", "--schedule=* * * * *"]);
    ok(33, &["patch", "cronjob", "forbid", "--type=merge", "-p", r#"{"spec":{"concurrencyPolicy":"Forbid"}}"#]);
    let pp = PostParams::default();
    cron_jobs.create(&pp, &cron_job("replace", json!({"concurrencyPolicy": "Replace", "timeZone": "Asia/Kolkata"}))).await.expect("replace");
    cron_jobs.create(&pp, &cron_job("paris", json!({"timeZone": "Europe/Paris"}))).await.expect("paris");
    let history = cron_jobs
        .create(&pp, &cron_job("history", json!({"suspend": true, "successfulJobsHistoryLimit": 2, "failedJobsHistoryLimit": 1})))
        .await
        .expect("history");

    // kubectl create job --from: a Job controlled by x that x did not schedule.
    ok(33, &["create", "job", "manual", "--from=cronjob/x"]);
    let manual = jobs.get("manual").await.expect("manual");
    let owner = manual.metadata.owner_references.clone().unwrap_or_default();
    assert!(owner.iter().any(|r| r.kind == "CronJob" && r.name == "x" && r.controller == Some(true)), "{owner:?}");
    wait_event(&c, &events, "x", "UnexpectedJob", "Saw a job that the controller did not create or forgot: manual", Duration::from_secs(20)).await;

    // History limits: five finished Jobs of the suspended CronJob; the oldest started Complete
    // one and the older Failed one go.
    let history_uid = history.metadata.uid.clone().expect("uid");
    let ago = |m: i64| created.checked_sub(SignedDuration::from_mins(m)).expect("time");
    let finished = [("h-1", 30, true), ("h-2", 20, true), ("h-3", 10, true), ("h-4", 25, false), ("h-5", 15, false)];
    let mut newest_success = None;
    for (name, started, complete) in finished {
        let job: Job = serde_json::from_value(json!({
            "metadata": {"name": name, "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "history", "uid": history_uid, "controller": true, "blockOwnerDeletion": true}]},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}
        }))
        .expect("job");
        jobs.create(&pp, &job).await.expect("create history job");
        let done = finish_job(&jobs, name, ago(started), complete).await;
        if name == "h-3" {
            newest_success = done.status.and_then(|s| s.completion_time).map(|t| t.0);
        }
    }
    c.wait_for("history limited to 2 complete and 1 failed Jobs", Duration::from_secs(20), || async {
        let names = jobs_of(&jobs, "history").await?;
        if names == ["h-2", "h-3", "h-5"] { Ok(()) } else { Err(format!("{names:?}")) }
    })
    .await;
    wait_event(&c, &events, "history", "SuccessfulDelete", "Deleted job h-1", Duration::from_secs(10)).await;
    wait_event(&c, &events, "history", "SuccessfulDelete", "Deleted job h-4", Duration::from_secs(10)).await;
    c.wait_for("history's lastSuccessfulTime", Duration::from_secs(10), || async {
        let got = status_of(&cron_jobs.get("history").await.map_err(|e| e.to_string())?).2;
        if got.is_some() && got == newest_success { Ok(()) } else { Err(format!("{got:?}, want {newest_success:?}")) }
    })
    .await;

    // A zone the API server accepts but the controller manager cannot load.
    wait_event(&c, &events, "paris", "UnknownTimeZone", "invalid timeZone: \"Europe/Paris\"", Duration::from_secs(20)).await;

    // The first minute boundary: x, forbid and replace each start a Job.
    let name = |cj: &str, m: i64| format!("{cj}-{m}");
    for cj in ["x", "forbid", "replace"] {
        let want = name(cj, m1);
        c.wait_for(&format!("{want} created"), until_fired(m1), || async {
            let names = jobs_of(&jobs, cj).await?;
            if names.contains(&want) { Ok(()) } else { Err(format!("{names:?}")) }
        })
        .await;
    }
    assert!(Timestamp::now().duration_since(created) < SignedDuration::from_secs(60 + FIRE_SLACK.as_secs() as i64), "x fired late");
    let x1 = jobs.get(&name("x", m1)).await.expect("x job");
    let owner = &x1.metadata.owner_references.clone().unwrap_or_default()[0];
    let x = cron_jobs.get("x").await.expect("x");
    assert_eq!((owner.kind.as_str(), owner.name.as_str(), Some(owner.uid.as_str()), owner.controller), ("CronJob", "x", x.metadata.uid.as_deref(), Some(true)));
    let at = minute_start(m1);
    let ann = x1.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(ann.get(ANNOTATION).map(String::as_str), Some(at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string().as_str()), "{ann:?}");
    let r1 = jobs.get(&name("replace", m1)).await.expect("replace job");
    let ann = r1.metadata.annotations.clone().unwrap_or_default();
    let kolkata = at.to_zoned(TimeZone::fixed(Offset::from_seconds(5 * 3600 + 1800).expect("offset")));
    assert_eq!(ann.get(ANNOTATION), Some(&kolkata.strftime("%Y-%m-%dT%H:%M:%S+05:30").to_string()), "{ann:?}");
    assert_eq!(ann.get("from").map(String::as_str), Some("template"));
    assert_eq!(r1.metadata.labels.clone().unwrap_or_default().get("cron").map(String::as_str), Some("replace"));
    for cj in ["x", "forbid", "replace"] {
        let want = name(cj, m1);
        c.wait_for(&format!("{cj}'s status naming {want}"), Duration::from_secs(10), || async {
            let got = status_of(&cron_jobs.get(cj).await.map_err(|e| e.to_string())?);
            if got.0 == [want.clone()] && got.1 == Some(at) { Ok(()) } else { Err(format!("{got:?}")) }
        })
        .await;
        wait_event(&c, &events, cj, "SuccessfulCreate", &format!("Created job {want}"), Duration::from_secs(10)).await;
    }
    let (ok_get, table) = kubectl_of(&c, 27, &["get", "cronjobs"]);
    assert!(ok_get && table.contains("SCHEDULE") && table.contains("replace"), "{table}");

    // x's Job completes (as the Job controller would say); then x is suspended.
    let x1_done = finish_job(&jobs, &name("x", m1), at, true).await;
    let x1_completion = x1_done.status.and_then(|s| s.completion_time).map(|t| t.0);
    wait_event(&c, &events, "x", "SawCompletedJob", &format!("Saw completed job: {}, condition: Complete", name("x", m1)), Duration::from_secs(10)).await;
    c.wait_for("x's completed Job out of active, lastSuccessfulTime set", Duration::from_secs(10), || async {
        let got = status_of(&cron_jobs.get("x").await.map_err(|e| e.to_string())?);
        if got.0.is_empty() && got.2 == x1_completion { Ok(()) } else { Err(format!("{got:?}")) }
    })
    .await;
    ok(27, &["patch", "cronjob", "x", "-p", r#"{"spec":{"suspend":true}}"#]);

    // The second minute boundary.
    let (r1_name, r2_name) = (name("replace", m1), name("replace", m2));
    c.wait_for("replace's Job replaced", until_fired(m2), || async {
        let names = jobs_of(&jobs, "replace").await?;
        if names == [r2_name.clone()] { Ok(()) } else { Err(format!("{names:?}")) }
    })
    .await;
    wait_event(&c, &events, "replace", "SuccessfulDelete", &format!("Deleted job {r1_name}"), Duration::from_secs(10)).await;
    c.wait_for("replace's status naming only the new Job", Duration::from_secs(10), || async {
        let got = status_of(&cron_jobs.get("replace").await.map_err(|e| e.to_string())?);
        if got.0 == [r2_name.clone()] && got.1 == Some(minute_start(m2)) { Ok(()) } else { Err(format!("{got:?}")) }
    })
    .await;
    wait_event(&c, &events, "forbid", "JobAlreadyActive", "Not starting job because prior execution is running and concurrency policy is Forbid", Duration::from_secs(10)).await;
    let settled = minute_start(m2).checked_add(SignedDuration::from_secs(5)).expect("time");
    if let Ok(wait) = Duration::try_from(settled.duration_since(Timestamp::now())) {
        tokio::time::sleep(wait).await;
    }
    assert_eq!(jobs_of(&jobs, "forbid").await.expect("forbid jobs"), [name("forbid", m1)], "Forbid keeps one Job");
    let f = status_of(&cron_jobs.get("forbid").await.expect("forbid"));
    assert_eq!((f.0, f.1), (vec![name("forbid", m1)], Some(at)), "Forbid's status unchanged");
    assert_eq!(jobs_of(&jobs, "x").await.expect("x jobs"), ["manual".to_string(), name("x", m1)], "suspended x starts nothing");
    assert_eq!(status_of(&cron_jobs.get("x").await.expect("x")).1, Some(at));
    assert_eq!(jobs_of(&jobs, "paris").await.expect("paris jobs"), Vec::<String>::new());
    assert_eq!(jobs_of(&jobs, "history").await.expect("history jobs"), ["h-2", "h-3", "h-5"]);
    let (ok_get, table) = kubectl_of(&c, 33, &["get", "cronjob", "x"]);
    assert!(ok_get && table.contains("True"), "x shown suspended:\n{table}");
}
