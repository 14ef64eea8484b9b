//! Mirrors pkg/controller/cronjob/utils.go: the CronJob controller's decisions, as pure
//! functions of the CronJob, its Jobs and an injected "now".
//!
//! - [`next_in_zone`]: robfig/cron's `Schedule.Next` in a named time zone — the first instant
//!   after a time whose wall clock in that zone matches the schedule (a time skipped by a
//!   daylight-saving jump does not run that day; one repeated when clocks go back runs twice).
//! - [`most_recent_schedule_time`]: the latest schedule time not yet run, and how many were
//!   missed; [`next_schedule_time`] adds `startingDeadlineSeconds`;
//!   [`next_schedule_time_duration`] is when to look again.
//! - [`concurrency_action`]: what `concurrencyPolicy` does about the Jobs still running.
//! - [`jobs_to_remove`]: which finished Jobs the history limits delete (the oldest started).
//! - [`job_from_template`]: the Job a schedule time creates (name, annotation, owner).

use std::collections::BTreeMap;
use std::time::Duration;

use api::batch::cron::Schedule;
use chrono::{DateTime, FixedOffset, Utc};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::controller_utils::controller_ref;

/// The annotation a scheduled Job carries: its schedule time, RFC 3339 in the CronJob's zone
/// (`batchv1.CronJobScheduledTimestampAnnotation`).
pub const SCHEDULED_TIMESTAMP_ANNOTATION: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// Added to every requeue so the sync lands just after the schedule time, not just before it
/// (Kubernetes' `nextScheduleDelta`).
pub const NEXT_SCHEDULE_DELTA: Duration = Duration::from_millis(100);

/// More missed start times than this are not worth listing: the clock is probably wrong
/// (Kubernetes picked 100 as "more than 80 hourly runs over a long weekend").
pub const MANY_MISSED: i64 = 100;

/// How many schedule times went by unrun (Kubernetes' `missedSchedules`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missed {
    None,
    Few,
    /// More than [`MANY_MISSED`]: the `TooManyMissedTimes` warning.
    Many,
}

/// What the schedule arithmetic needs of a CronJob.
#[derive(Clone, Debug)]
pub struct ScheduleState {
    pub created: Timestamp,
    pub last_schedule_time: Option<Timestamp>,
    pub starting_deadline_seconds: Option<i64>,
}

impl ScheduleState {
    pub fn of(cj: &CronJob) -> ScheduleState {
        ScheduleState {
            created: cj.metadata.creation_timestamp.as_ref().map(|t| t.0).unwrap_or(Timestamp::UNIX_EPOCH),
            last_schedule_time: cj.status.as_ref().and_then(|s| s.last_schedule_time.as_ref()).map(|t| t.0),
            starting_deadline_seconds: cj.spec.starting_deadline_seconds,
        }
    }
}

/// The zone a CronJob's schedule is read in: `spec.timeZone` from the tz database, or the
/// controller manager's local zone when it has none (as kube-controller-manager does). The
/// error is the `UnknownTimeZone` event's cause.
pub fn schedule_zone(time_zone: Option<&str>) -> Result<TimeZone, String> {
    match time_zone {
        None => Ok(TimeZone::system()),
        Some(name) => TimeZone::get(name).map_err(|e| e.to_string()),
    }
}

/// The zone of the scheduled-timestamp annotation: `spec.timeZone`, else UTC (Kubernetes
/// formats it in `time.LoadLocation("")`, which is UTC, not the local zone).
pub fn annotation_zone(time_zone: Option<&str>) -> Result<TimeZone, String> {
    match time_zone {
        None => Ok(TimeZone::UTC),
        Some(name) => TimeZone::get(name).map_err(|e| e.to_string()),
    }
}

fn to_chrono(t: Timestamp) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(t.as_second(), t.subsec_nanosecond().max(0) as u32)
}

fn from_chrono(t: DateTime<Utc>) -> Option<Timestamp> {
    Timestamp::new(t.timestamp(), t.timestamp_subsec_nanos() as i32).ok()
}

/// The first activation of `sched` strictly after `t`, reading its minutes, hours and days on
/// the wall clock of `tz`; `None` if it never fires.
///
/// Between two of the zone's transitions the offset is fixed, so the schedule is searched at
/// that offset; a result at or past the next transition is not what the wall clock read then,
/// so the search starts again from the transition at the new offset.
pub fn next_in_zone(sched: &Schedule, t: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
    if let Schedule::Every(_) = sched {
        // A fixed interval is the same in every zone.
        return from_chrono(sched.next_after(to_chrono(t)?)?);
    }
    let mut from = t;
    let mut segment = t;
    // A schedule searched over five years meets at most a few transitions a year.
    for _ in 0..64 {
        let offset = FixedOffset::east_opt(tz.to_offset(segment).seconds())?;
        let candidate = from_chrono(sched.next_after_in(to_chrono(from)?, offset)?)?;
        match tz.following(segment).next().map(|tr| tr.timestamp()) {
            Some(tr) if tr <= candidate => {
                segment = tr;
                // Strictly after a second before the transition: the transition's own minute
                // is a candidate.
                from = from.max(tr.checked_sub(SignedDuration::from_secs(1)).ok()?);
            }
            _ => return Some(candidate),
        }
    }
    None
}

/// mostRecentScheduleTime: from the later of the CronJob's creation and its last schedule time
/// (and, with `include_deadline`, `now - startingDeadlineSeconds`), the most recent schedule
/// time not after `now`, if any, and how many went by. Returns the earliest time looked from
/// too. An error when two consecutive schedule times are less than a second apart (a schedule
/// that never fires, such as `0 0 30 2 *`, gives none at all instead).
pub fn most_recent_schedule_time(
    st: &ScheduleState,
    now: Timestamp,
    sched: &Schedule,
    tz: &TimeZone,
    include_deadline: bool,
) -> Result<(Timestamp, Option<Timestamp>, Missed), String> {
    let mut earliest = st.last_schedule_time.unwrap_or(st.created);
    if include_deadline && let Some(secs) = st.starting_deadline_seconds {
        // Nothing before the deadline is going to be started anyway.
        let deadline = now.checked_sub(SignedDuration::from_secs(secs)).unwrap_or(now);
        earliest = earliest.max(deadline);
    }
    let Some(t1) = next_in_zone(sched, earliest, tz) else { return Ok((earliest, None, Missed::None)) };
    if now < t1 {
        return Ok((earliest, None, Missed::None));
    }
    let Some(t2) = next_in_zone(sched, t1, tz) else { return Ok((earliest, Some(t1), Missed::None)) };
    if now < t2 {
        return Ok((earliest, Some(t1), Missed::None));
    }
    // Several went by: estimate how many from the interval between the first two (exact for
    // regular schedules, close for irregular ones), then walk the last stretch exactly.
    let between = t2.duration_since(t1).as_secs_f64().round() as i64;
    if between < 1 {
        return Err("time difference between two schedules is less than 1 second".into());
    }
    let elapsed = now.duration_since(t1).as_secs();
    let missed = elapsed / between + 1;
    let potential_earliest = t1.checked_add(SignedDuration::from_secs((missed - 2) * between)).unwrap_or(t1);
    let mut most_recent = None;
    let mut t = next_in_zone(sched, potential_earliest, tz);
    while let Some(at) = t
        && at <= now
    {
        most_recent = Some(at);
        t = next_in_zone(sched, at, tz);
    }
    let many = if missed > MANY_MISSED { Missed::Many } else { Missed::Few };
    Ok((earliest, most_recent, many))
}

/// nextScheduleTime: the schedule time to run now, if any — the most recent unmet one, the
/// deadline taken into account — with the missed count for the `TooManyMissedTimes` warning.
pub fn next_schedule_time(st: &ScheduleState, now: Timestamp, sched: &Schedule, tz: &TimeZone) -> Result<(Option<Timestamp>, Missed), String> {
    let (_, most_recent, missed) = most_recent_schedule_time(st, now, sched, tz, true)?;
    match most_recent {
        Some(t) if t <= now => Ok((Some(t), missed)),
        _ => Ok((None, missed)),
    }
}

/// nextScheduleTimeDuration: how long until the sync after the next schedule time (plus
/// [`NEXT_SCHEDULE_DELTA`]); `None` when the schedule never fires again.
pub fn next_schedule_time_duration(st: &ScheduleState, now: Timestamp, sched: &Schedule, tz: &TimeZone) -> Option<Duration> {
    let from = match most_recent_schedule_time(st, now, sched, tz, false) {
        Ok((_, Some(t), _)) => t,
        // Nothing missed: the next one after the earliest time looked from.
        Ok((earliest, None, Missed::None)) => earliest,
        // Missed ones, or a broken schedule: aim at the next one from now.
        Ok((_, None, _)) | Err(_) => now,
    };
    let next = next_in_zone(sched, from, tz)?;
    let until = next.duration_since(now) + SignedDuration::try_from(NEXT_SCHEDULE_DELTA).ok()?;
    Some(Duration::try_from(until).unwrap_or(Duration::ZERO))
}

/// What `concurrencyPolicy` does at a schedule time (step 8 of the sync).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConcurrencyAction {
    /// Create the Job, whatever runs.
    Create,
    /// Forbid with a Job still active: skip this time (`JobAlreadyActive`).
    Skip,
    /// Replace with Jobs still active: delete them, then create.
    ReplaceThenCreate,
}

pub fn concurrency_action(policy: Option<&str>, active: usize) -> ConcurrencyAction {
    match policy {
        Some("Forbid") if active > 0 => ConcurrencyAction::Skip,
        Some("Replace") if active > 0 => ConcurrencyAction::ReplaceThenCreate,
        _ => ConcurrencyAction::Create,
    }
}

/// getFinishedStatus: the condition type (`Complete` or `Failed`) that is True, if any.
pub fn finished_status(job: &Job) -> Option<&str> {
    job.status.as_ref()?.conditions.as_ref()?.iter().find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True").map(|c| c.type_.as_str())
}

pub fn is_job_finished(job: &Job) -> bool {
    finished_status(job).is_some()
}

/// removeOldestJobs: of the finished Jobs of one kind, those beyond `limit`, the oldest
/// started first (Jobs never started count as the newest; ties by name).
pub fn jobs_to_remove<'a>(jobs: &[&'a Job], limit: i32) -> Vec<&'a Job> {
    let excess = jobs.len() as i64 - i64::from(limit.max(0));
    if excess <= 0 {
        return Vec::new();
    }
    let mut sorted: Vec<&Job> = jobs.to_vec();
    sorted.sort_by(|a, b| {
        let start = |j: &Job| j.status.as_ref().and_then(|s| s.start_time.as_ref()).map(|t| t.0);
        match (start(a), start(b)) {
            (Some(x), Some(y)) if x != y => x.cmp(&y),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            _ => a.metadata.name.cmp(&b.metadata.name),
        }
    });
    sorted.truncate(excess as usize);
    sorted
}

/// getJobName: `<cronjob>-<schedule time in minutes since the epoch>`, the same for the same
/// time, so that one time never makes two Jobs.
pub fn job_name(cron_job: &str, scheduled: Timestamp) -> String {
    format!("{cron_job}-{}", scheduled.as_second().div_euclid(60))
}

/// RFC 3339 in `tz`, as Go's `time.RFC3339` prints it (whole seconds, `Z` for UTC).
pub fn format_rfc3339(t: Timestamp, tz: &TimeZone) -> String {
    let offset = tz.to_offset(t);
    let dt = offset.to_datetime(t);
    let secs = offset.seconds();
    let zone = if secs == 0 {
        "Z".to_string()
    } else {
        let sign = if secs < 0 { '-' } else { '+' };
        format!("{sign}{:02}:{:02}", secs.abs() / 3600, secs.abs() % 3600 / 60)
    };
    format!("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}{zone}", dt.year(), dt.month(), dt.day(), dt.hour(), dt.minute(), dt.second())
}

/// getJobFromTemplate2: the Job for schedule time `scheduled` — the template's labels,
/// annotations and spec, the scheduled-timestamp annotation in `tz`, the deterministic name and
/// the CronJob as its controller.
pub fn job_from_template(cj: &CronJob, scheduled: Timestamp, tz: &TimeZone) -> Job {
    let template = cj.spec.job_template.clone();
    let meta = template.metadata.unwrap_or_default();
    let mut annotations: BTreeMap<String, String> = meta.annotations.unwrap_or_default();
    annotations.insert(SCHEDULED_TIMESTAMP_ANNOTATION.into(), format_rfc3339(scheduled, tz));
    Job {
        metadata: ObjectMeta {
            name: Some(job_name(cj.metadata.name.as_deref().unwrap_or_default(), scheduled)),
            namespace: cj.metadata.namespace.clone(),
            labels: meta.labels,
            annotations: Some(annotations),
            owner_references: Some(vec![controller_ref("batch/v1", "CronJob", &cj.metadata)]),
            ..ObjectMeta::default()
        },
        spec: template.spec,
        status: None,
    }
}

/// The reference `status.active` keeps of a Job (`ref.GetReference`).
pub fn job_reference(job: &Job) -> ObjectReference {
    client::record::object_reference("batch/v1", "Job", &job.metadata)
}

pub fn in_active_list(cj: &CronJob, uid: &str) -> bool {
    cj.status.as_ref().and_then(|s| s.active.as_ref()).is_some_and(|a| a.iter().any(|r| r.uid.as_deref() == Some(uid)))
}

pub fn in_active_list_by_name(cj: &CronJob, namespace: &str, name: &str) -> bool {
    cj.status
        .as_ref()
        .and_then(|s| s.active.as_ref())
        .is_some_and(|a| a.iter().any(|r| r.name.as_deref() == Some(name) && r.namespace.as_deref().unwrap_or(namespace) == namespace))
}

pub fn delete_from_active_list(cj: &mut CronJob, uid: &str) {
    if let Some(active) = cj.status.as_mut().and_then(|s| s.active.as_mut()) {
        active.retain(|r| r.uid.as_deref() != Some(uid));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }
    fn sched(s: &str) -> Schedule {
        Schedule::parse(s).unwrap()
    }
    fn zone(name: &str) -> TimeZone {
        TimeZone::get(name).unwrap()
    }
    fn state(created: &str, last: Option<&str>, deadline: Option<i64>) -> ScheduleState {
        ScheduleState { created: ts(created), last_schedule_time: last.map(ts), starting_deadline_seconds: deadline }
    }

    #[test]
    fn next_in_zone_reads_the_wall_clock_of_the_zone() {
        let ny = zone("America/New_York");
        let cases = [
            // Plain UTC.
            ("0 9 * * *", "UTC", "2026-03-01T10:00:00Z", "2026-03-02T09:00:00Z"),
            // 09:00 in New York in winter (UTC-5) and in summer (UTC-4).
            ("0 9 * * *", "America/New_York", "2026-01-10T00:00:00Z", "2026-01-10T14:00:00Z"),
            ("0 9 * * *", "America/New_York", "2026-07-10T00:00:00Z", "2026-07-10T13:00:00Z"),
            // Across the spring-forward day (2026-03-08 02:00 EST -> 03:00 EDT): 09:00 is EDT.
            ("0 9 * * *", "America/New_York", "2026-03-07T15:00:00Z", "2026-03-08T13:00:00Z"),
            // 02:30 does not exist on that day: the next run is the day after, 02:30 EDT.
            ("30 2 * * *", "America/New_York", "2026-03-08T05:00:00Z", "2026-03-09T06:30:00Z"),
            // Fall back (2026-11-01 02:00 EDT -> 01:00 EST): 01:30 happens twice, both run.
            ("30 1 * * *", "America/New_York", "2026-11-01T04:00:00Z", "2026-11-01T05:30:00Z"),
            ("30 1 * * *", "America/New_York", "2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z"),
            ("30 1 * * *", "America/New_York", "2026-11-01T06:30:00Z", "2026-11-02T06:30:00Z"),
            // Every minute runs through the jump without a gap in real time.
            ("* * * * *", "America/New_York", "2026-03-08T06:59:00Z", "2026-03-08T07:00:00Z"),
            // Half-hour zones and the southern hemisphere.
            ("0 0 * * *", "Asia/Kolkata", "2026-05-01T00:00:00Z", "2026-05-01T18:30:00Z"),
            ("0 12 * * *", "Australia/Sydney", "2026-01-15T00:00:00Z", "2026-01-15T01:00:00Z"),
            // A fixed interval ignores the zone.
            ("@every 90s", "America/New_York", "2026-03-08T06:59:30.5Z", "2026-03-08T07:01:00Z"),
        ];
        for (s, tz, from, want) in cases {
            assert_eq!(next_in_zone(&sched(s), ts(from), &zone(tz)), Some(ts(want)), "{s} in {tz} after {from}");
        }
        assert_eq!(next_in_zone(&sched("0 0 30 2 *"), ts("2026-01-01T00:00:00Z"), &ny), None);
    }

    #[test]
    fn most_recent_unmet_time_and_missed_count() {
        let utc = TimeZone::UTC;
        let (every_min, hourly) = (&sched("* * * * *"), &sched("0 * * * *"));
        // (state, now, schedule, with the deadline, the time to run, missed)
        type Case<'a> = (ScheduleState, &'a str, &'a Schedule, bool, Option<&'a str>, Missed);
        let cases: Vec<Case> = vec![
            // Created mid-minute, before the first time: nothing yet.
            (state("2026-05-01T10:00:30Z", None, None), "2026-05-01T10:00:50Z", every_min, true, None, Missed::None),
            // The first time came: it is the one.
            (state("2026-05-01T10:00:30Z", None, None), "2026-05-01T10:01:05Z", every_min, true, Some("2026-05-01T10:01:00Z"), Missed::None),
            // Already run at 10:01: nothing until 10:02.
            (state("2026-05-01T10:00:30Z", Some("2026-05-01T10:01:00Z"), None), "2026-05-01T10:01:40Z", every_min, true, None, Missed::None),
            // Three went by since the last run: only the most recent is run.
            (state("2026-05-01T10:00:30Z", Some("2026-05-01T10:01:00Z"), None), "2026-05-01T10:04:10Z", every_min, true, Some("2026-05-01T10:04:00Z"), Missed::Few),
            // Hourly, down for a long weekend (74 missed): still few.
            (state("2026-05-01T00:00:00Z", Some("2026-05-01T17:00:00Z"), None), "2026-05-04T19:30:00Z", hourly, true, Some("2026-05-04T19:00:00Z"), Missed::Few),
            // Every minute, 3 hours behind: too many.
            (state("2026-05-01T00:00:00Z", Some("2026-05-01T07:00:00Z"), None), "2026-05-01T10:00:30Z", every_min, true, Some("2026-05-01T10:00:00Z"), Missed::Many),
            // ... unless a starting deadline bounds where to look from.
            (state("2026-05-01T00:00:00Z", Some("2026-05-01T07:00:00Z"), Some(200)), "2026-05-01T10:00:30Z", every_min, true, Some("2026-05-01T10:00:00Z"), Missed::Few),
            // ... which the requeue arithmetic leaves out.
            (state("2026-05-01T00:00:00Z", Some("2026-05-01T07:00:00Z"), Some(200)), "2026-05-01T10:00:30Z", every_min, false, Some("2026-05-01T10:00:00Z"), Missed::Many),
            // A deadline of 10 s, 30 s after the time: nothing left to run.
            (state("2026-05-01T10:00:30Z", Some("2026-05-01T10:01:00Z"), Some(10)), "2026-05-01T10:02:30Z", every_min, true, None, Missed::None),
        ];
        for (st, now, s, deadline, want, missed) in cases {
            let (_, got, m) = most_recent_schedule_time(&st, ts(now), s, &utc, deadline).unwrap();
            assert_eq!((got, m), (want.map(ts), missed), "{st:?} now {now} deadline {deadline}");
        }
    }

    #[test]
    fn next_schedule_time_is_past_or_none() {
        let utc = TimeZone::UTC;
        let s = sched("*/5 * * * *");
        let st = state("2026-05-01T10:00:00Z", Some("2026-05-01T10:05:00Z"), None);
        assert_eq!(next_schedule_time(&st, ts("2026-05-01T10:09:59Z"), &s, &utc).unwrap(), (None, Missed::None));
        assert_eq!(next_schedule_time(&st, ts("2026-05-01T10:10:00Z"), &s, &utc).unwrap(), (Some(ts("2026-05-01T10:10:00Z")), Missed::None));
        // In a zone: 09:00 Europe/Berlin (UTC+2 in summer) is 07:00Z.
        let berlin = zone("Europe/Berlin");
        let daily = sched("0 9 * * *");
        let st = state("2026-06-01T00:00:00Z", None, None);
        assert_eq!(next_schedule_time(&st, ts("2026-06-01T07:00:01Z"), &daily, &berlin).unwrap().0, Some(ts("2026-06-01T07:00:00Z")));
        assert_eq!(next_schedule_time(&st, ts("2026-06-01T06:59:59Z"), &daily, &berlin).unwrap().0, None);
    }

    #[test]
    fn requeue_delay_table() {
        let utc = TimeZone::UTC;
        let s = sched("* * * * *");
        let delta = NEXT_SCHEDULE_DELTA;
        let cases = [
            // Just ran 10:01, now 10:01:00.2: the 10:02 one, 59.8 s away.
            (state("2026-05-01T10:00:30Z", Some("2026-05-01T10:01:00Z"), None), "2026-05-01T10:01:00.2Z", Duration::from_millis(59_800) + delta),
            // Never ran, created 10:00:30: the 10:01 one.
            (state("2026-05-01T10:00:30Z", None, None), "2026-05-01T10:00:40Z", Duration::from_secs(20) + delta),
            // Missed ones (a Forbid skip, say): the one after now.
            (state("2026-05-01T10:00:30Z", Some("2026-05-01T10:01:00Z"), None), "2026-05-01T10:03:30Z", Duration::from_secs(30) + delta),
        ];
        for (st, now, want) in cases {
            assert_eq!(next_schedule_time_duration(&st, ts(now), &s, &utc), Some(want), "{st:?} now {now}");
        }
        // Hourly in Kolkata (+05:30): the next :00 local is a :30 UTC.
        let st = state("2026-05-01T10:00:00Z", None, None);
        assert_eq!(next_schedule_time_duration(&st, ts("2026-05-01T10:00:00Z"), &sched("0 * * * *"), &zone("Asia/Kolkata")), Some(Duration::from_secs(1800) + delta));
        assert_eq!(next_schedule_time_duration(&st, ts("2026-05-01T10:00:00Z"), &sched("0 0 30 2 *"), &utc), None);
    }

    #[test]
    fn concurrency_policy_table() {
        let cases = [
            (None, 0, ConcurrencyAction::Create),
            (Some("Allow"), 3, ConcurrencyAction::Create),
            (Some("Forbid"), 0, ConcurrencyAction::Create),
            (Some("Forbid"), 1, ConcurrencyAction::Skip),
            (Some("Replace"), 0, ConcurrencyAction::Create),
            (Some("Replace"), 2, ConcurrencyAction::ReplaceThenCreate),
        ];
        for (policy, active, want) in cases {
            assert_eq!(concurrency_action(policy, active), want, "{policy:?} with {active} active");
        }
    }

    fn job(name: &str, start: Option<&str>, cond: Option<&str>) -> Job {
        let mut j = json!({"metadata": {"name": name}, "status": {}});
        if let Some(s) = start {
            j["status"]["startTime"] = json!(s);
        }
        if let Some(c) = cond {
            j["status"]["conditions"] = json!([{"type": "SuccessCriteriaMet", "status": "True"}, {"type": c, "status": "True"}]);
        }
        serde_json::from_value(j).unwrap()
    }

    #[test]
    fn finished_status_reads_the_conditions() {
        assert_eq!(finished_status(&job("a", None, Some("Complete"))), Some("Complete"));
        assert_eq!(finished_status(&job("a", None, Some("Failed"))), Some("Failed"));
        assert_eq!(finished_status(&job("a", None, None)), None);
        let not_yet: Job = serde_json::from_value(json!({"metadata": {"name": "a"}, "status": {"conditions": [{"type": "Complete", "status": "False"}]}})).unwrap();
        assert!(!is_job_finished(&not_yet));
    }

    #[test]
    fn history_limits_remove_the_oldest_started() {
        let a = job("a", Some("2026-05-01T10:03:00Z"), Some("Complete"));
        let b = job("b", Some("2026-05-01T10:01:00Z"), Some("Complete"));
        let c = job("c", Some("2026-05-01T10:02:00Z"), Some("Complete"));
        let d = job("d", None, Some("Complete"));
        let e = job("e", Some("2026-05-01T10:01:00Z"), Some("Complete"));
        let names = |v: Vec<&Job>| v.iter().map(|j| j.metadata.name.clone().unwrap()).collect::<Vec<_>>();
        let cases: Vec<(Vec<&Job>, i32, Vec<&str>)> = vec![
            (vec![&a, &b, &c], 3, vec![]),
            (vec![&a, &b, &c], 5, vec![]),
            (vec![&a, &b, &c], 2, vec!["b"]),
            (vec![&a, &b, &c], 1, vec!["b", "c"]),
            (vec![&a, &b, &c], 0, vec!["b", "c", "a"]),
            // Never started counts as newest.
            (vec![&d, &a, &b], 1, vec!["b", "a"]),
            // Same start: by name.
            (vec![&e, &b, &a], 1, vec!["b", "e"]),
            (vec![], 0, vec![]),
        ];
        for (jobs, limit, want) in cases {
            assert_eq!(names(jobs_to_remove(&jobs, limit)), want, "limit {limit}");
        }
    }

    #[test]
    fn job_from_template_names_annotates_and_owns() {
        let cj: CronJob = serde_json::from_value(json!({
            "metadata": {"name": "backup", "namespace": "ns", "uid": "u-1"},
            "spec": {"schedule": "0 9 * * *", "timeZone": "Europe/Berlin", "jobTemplate": {
                "metadata": {"labels": {"app": "b"}, "annotations": {"note": "x"}},
                "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "OnFailure"}}}
            }}
        }))
        .unwrap();
        let at = ts("2026-06-01T07:00:00Z");
        let job = job_from_template(&cj, at, &zone("Europe/Berlin"));
        assert_eq!(job.metadata.name.as_deref(), Some(format!("backup-{}", at.as_second() / 60).as_str()));
        assert_eq!(job.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(job.metadata.labels.unwrap()["app"], "b");
        let ann = job.metadata.annotations.unwrap();
        assert_eq!(ann["note"], "x");
        assert_eq!(ann[SCHEDULED_TIMESTAMP_ANNOTATION], "2026-06-01T09:00:00+02:00");
        let owner = &job.metadata.owner_references.unwrap()[0];
        assert_eq!((owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str(), owner.controller), ("CronJob", "backup", "u-1", Some(true)));
        assert!(job.spec.is_some());
        assert_eq!(format_rfc3339(at, &TimeZone::UTC), "2026-06-01T07:00:00Z");
        assert_eq!(format_rfc3339(at, &zone("America/St_Johns")), "2026-06-01T04:30:00-02:30");
        assert_eq!(job_name("x", ts("1970-01-01T00:02:59Z")), "x-2");
    }

    #[test]
    fn zones_load_from_the_database() {
        assert!(schedule_zone(Some("Europe/Berlin")).is_ok());
        assert!(schedule_zone(Some("Mars/Olympus_Mons")).is_err());
        assert!(schedule_zone(None).is_ok());
        assert_eq!(annotation_zone(None).unwrap(), TimeZone::UTC);
    }

    #[test]
    fn active_list_helpers() {
        let mut cj: CronJob = serde_json::from_value(json!({
            "metadata": {"name": "x", "namespace": "ns"},
            "spec": {"schedule": "* * * * *", "jobTemplate": {}},
            "status": {"active": [{"kind": "Job", "namespace": "ns", "name": "x-1", "uid": "a"}, {"kind": "Job", "namespace": "ns", "name": "x-2", "uid": "b"}]}
        }))
        .unwrap();
        assert!(in_active_list(&cj, "a"));
        assert!(in_active_list_by_name(&cj, "ns", "x-2"));
        assert!(!in_active_list_by_name(&cj, "other", "x-2"));
        delete_from_active_list(&mut cj, "a");
        assert!(!in_active_list(&cj, "a"));
        assert!(in_active_list(&cj, "b"));
    }
}
