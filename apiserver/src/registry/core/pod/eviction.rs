//! Mirrors pkg/registry/core/pod/storage/eviction.go's EvictionREST: `POST pods/<name>/eviction`
//! deletes the pod unless that would break its PodDisruptionBudget, in which case it answers 429
//! and the client (`kubectl drain`) retries. It is a dry run when the eviction's
//! `deleteOptions.dryRun` or the request's `?dryRun` says so (what `kubectl drain
//! --dry-run=server` sends is the former); when both are set they must agree.
//!
//! 1. Read the pod. A pod that is Pending, finished (Succeeded or Failed) or already being
//!    deleted disrupts nothing more: delete it without looking at budgets (with the pod's
//!    resourceVersion as a precondition unless it is finished or going, so that it cannot have
//!    become Ready in between). A conflict reads the pod again (up to 20 times).
//! 2. Find the budgets of its namespace whose selector matches it: none → delete; more than one
//!    → 500, which Kubernetes does not support either.
//! 3. A pod that is not Ready counts for nothing: with `unhealthyPodEvictionPolicy: AlwaysAllow`,
//!    or when the budget is met anyway (`currentHealthy >= desiredHealthy > 0`, the default
//!    IfHealthyBudget), delete it with its resourceVersion as precondition (a conflict → 429).
//! 4. Otherwise take one disruption from the budget ([`check_and_decrement`]): 429 while the
//!    disruption controller has not seen the budget's generation or none is allowed, 403 when its
//!    status is broken; else `disruptionsAllowed - 1` and the pod in `disruptedPods`, written
//!    to the budget's status (a conflict reads the budget again, up to 20 times).
//! 5. Delete the pod.

use futures::future::LocalBoxFuture;
use serde_json::{Value, json};

use crate::error::{Cause, Error, Result};
use crate::registry::generic::options::{DeleteOptions, DryRun, ListOptions, WriteOptions};
use crate::registry::generic::rest::RestRequest;
use crate::registry::generic::store::{Registry, now_rfc3339};

/// How often a conflicting write is retried (Kubernetes' EvictionsRetry: 20 steps of 10 ms).
const EVICTION_RETRIES: usize = 20;
const EVICTION_RETRY_DELAY: std::time::Duration = std::time::Duration::from_millis(10);
/// `MaxDisruptedPodSize`: evictions the disruption controller has not yet confirmed.
pub const MAX_DISRUPTED_POD_SIZE: usize = 2000;
/// The StatusCause type of a refusal (policyv1.DisruptionBudgetCause).
pub const DISRUPTION_BUDGET_CAUSE: &str = "DisruptionBudget";
const REFUSED: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

/// `POST pods/<name>/eviction` (rest.Creater).
pub fn create(r: RestRequest<'_>, eviction: Value, opts: WriteOptions) -> LocalBoxFuture<'_, Result<Option<Value>>> {
    Box::pin(async move {
        if let Some(named) = eviction.pointer("/metadata/name").and_then(Value::as_str)
            && named != r.name
        {
            return Err(Error::BadRequest("name in URL does not match name in Eviction object".into()));
        }
        let mut delete = DeleteOptions::from_json(eviction.get("deleteOptions").unwrap_or(&Value::Null));
        delete.dry_run.validate("DeleteOptions")?;
        delete.dry_run = propagate_dry_run(&delete.dry_run, &opts.dry_run)?;
        let budgets = r.registries.get("policy", "v1", "poddisruptionbudgets");
        evict(r.registry, budgets.as_deref(), r.namespace, r.name, &delete).await.map(|()| None)
    })
}

async fn evict(pods: &Registry, budgets: Option<&Registry>, namespace: &str, name: &str, delete: &DeleteOptions) -> Result<()> {
    let caller_precondition = delete.precondition_resource_version.is_some();
    // Step 1.
    let mut attempt = 0;
    let pod = loop {
        let pod = pods.get(Some(namespace), name).await?;
        if !can_ignore_pdb(&pod) {
            break pod;
        }
        let mut opts = delete.clone();
        if should_enforce_resource_version(&pod) && !caller_precondition {
            opts.precondition_resource_version = resource_version(&pod);
        }
        match pods.delete(Some(namespace), name, &opts).await {
            Err(e) if e.code() == 409 && !caller_precondition && attempt < EVICTION_RETRIES => {
                attempt += 1;
                tokio::time::sleep(EVICTION_RETRY_DELAY).await;
            }
            r => return r.map(|_| ()),
        }
    };
    // Step 2.
    let matching = match budgets {
        Some(budgets) => matching_budgets(budgets, namespace, &pod).await?,
        None => Vec::new(),
    };
    if matching.len() > 1 {
        return Err(Error::Internal("This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.".into()));
    }
    let Some(budget) = matching.into_iter().next() else {
        return pods.delete(Some(namespace), name, delete).await.map(|_| ());
    };
    let budget_name = budget.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
    // Step 3.
    if !is_pod_ready(&pod) && unhealthy_pod_may_go(&budget) {
        let mut opts = delete.clone();
        if !caller_precondition {
            opts.precondition_resource_version = resource_version(&pod);
        }
        return match pods.delete(Some(namespace), name, &opts).await {
            // It became Ready meanwhile: let the client ask again.
            Err(e) if e.code() == 409 && !caller_precondition => Err(still_processing(&budget_name)),
            r => r.map(|_| ()),
        };
    }
    // Step 4.
    let budgets = budgets.ok_or_else(|| Error::Internal("no PodDisruptionBudget store".into()))?;
    let mut budget = budget;
    let mut attempt = 0;
    loop {
        let updated = check_and_decrement(&budget, name, &now_rfc3339(), delete.dry_run.is_dry_run())?;
        if delete.dry_run.is_dry_run() {
            break;
        }
        match budgets.update(Some(namespace), &budget_name, updated, Some("status")).await {
            Ok(_) => break,
            Err(e) if e.code() == 409 && attempt < EVICTION_RETRIES => {
                attempt += 1;
                tokio::time::sleep(EVICTION_RETRY_DELAY).await;
                budget = budgets.get(Some(namespace), &budget_name).await?;
            }
            Err(e) if e.code() == 409 => {
                return Err(Error::Timeout(format!("couldn't update PodDisruptionBudget \"{budget_name}\" due to conflicts")));
            }
            Err(e) => return Err(e),
        }
    }
    // Step 5.
    pods.delete(Some(namespace), name, delete).await.map(|_| ())
}

/// canIgnorePDB: the pod disrupts nothing more by going.
fn can_ignore_pdb(pod: &Value) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed" | "Pending") || pod.pointer("/metadata/deletionTimestamp").is_some()
}

/// shouldEnforceResourceVersion: every pod but a finished or departing one could become Ready
/// between the read and the delete.
fn should_enforce_resource_version(pod: &Value) -> bool {
    !(matches!(phase(pod), "Succeeded" | "Failed") || pod.pointer("/metadata/deletionTimestamp").is_some())
}

fn phase(pod: &Value) -> &str {
    pod.pointer("/status/phase").and_then(Value::as_str).unwrap_or("")
}

fn resource_version(obj: &Value) -> Option<String> {
    obj.pointer("/metadata/resourceVersion").and_then(Value::as_str).map(String::from)
}

/// podutil.IsPodReady: the Ready condition is True.
pub fn is_pod_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

/// Step 3's test: an unready pod may go without taking a disruption.
fn unhealthy_pod_may_go(budget: &Value) -> bool {
    if budget.pointer("/spec/unhealthyPodEvictionPolicy").and_then(Value::as_str) == Some("AlwaysAllow") {
        return true;
    }
    let (current, desired) = (status_int(budget, "currentHealthy"), status_int(budget, "desiredHealthy"));
    current >= desired && desired > 0
}

fn status_int(budget: &Value, field: &str) -> i64 {
    budget.pointer(&format!("/status/{field}")).and_then(Value::as_i64).unwrap_or(0)
}

/// The budgets in the pod's namespace whose selector matches its labels. A budget whose selector
/// does not parse matches nothing; `{}` matches every pod (policy/v1), `null` none.
async fn matching_budgets(budgets: &Registry, namespace: &str, pod: &Value) -> Result<Vec<Value>> {
    let list = budgets.list(Some(namespace), &ListOptions::default()).await?;
    Ok(list
        .items
        .iter()
        .filter(|b| selects(b, pod))
        .map(|b| (**b).clone())
        .collect())
}

fn selects(budget: &Value, pod: &Value) -> bool {
    apimachinery::labels::Selector::from_label_selector(budget.pointer("/spec/selector").unwrap_or(&Value::Null))
        .is_ok_and(|sel| sel.matches_object(pod))
}

/// The 429 while the disruption controller has not caught up with the budget (10 s hint).
fn still_processing(budget: &str) -> Error {
    Error::TooManyRequests {
        message: REFUSED.into(),
        causes: vec![Cause { field: String::new(), reason: DISRUPTION_BUDGET_CAUSE.into(), message: format!("The disruption budget {budget} is still being processed by the server.") }],
        retry_after_seconds: 10,
    }
}

/// checkAndDecrement: the budget as it is after this eviction takes one disruption, or why it
/// cannot. A dry run changes only the count (it records no disrupted pod).
pub fn check_and_decrement(budget: &Value, pod: &str, now: &str, dry_run: bool) -> Result<Value> {
    let name = budget.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let generation = budget.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0);
    if status_int(budget, "observedGeneration") < generation {
        return Err(still_processing(name));
    }
    let allowed = status_int(budget, "disruptionsAllowed");
    if allowed < 0 {
        return Err(Error::Forbidden(format!("poddisruptionbudget.policy \"{name}\" is forbidden: pdb disruptions allowed is negative")));
    }
    let disrupted = budget.pointer("/status/disruptedPods").and_then(Value::as_object).map_or(0, |m| m.len());
    if disrupted > MAX_DISRUPTED_POD_SIZE {
        return Err(Error::Forbidden(format!(
            "poddisruptionbudget.policy \"{name}\" is forbidden: DisruptedPods map too big - too many evictions not confirmed by PDB controller"
        )));
    }
    if allowed == 0 {
        return Err(Error::TooManyRequests {
            message: REFUSED.into(),
            causes: vec![Cause {
                field: String::new(),
                reason: DISRUPTION_BUDGET_CAUSE.into(),
                message: format!(
                    "The disruption budget {name} needs {} healthy pods and has {} currently",
                    status_int(budget, "desiredHealthy"),
                    status_int(budget, "currentHealthy")
                ),
            }],
            retry_after_seconds: 0,
        });
    }
    let mut budget = budget.clone();
    budget["status"]["disruptionsAllowed"] = json!(allowed - 1);
    if allowed - 1 == 0 {
        set_disruption_allowed_condition(&mut budget, now);
    }
    if !dry_run {
        if !budget["status"]["disruptedPods"].is_object() {
            budget["status"]["disruptedPods"] = json!({});
        }
        budget["status"]["disruptedPods"][pod] = json!(now);
    }
    Ok(budget)
}

/// pdbhelper.UpdateDisruptionAllowedCondition: `DisruptionAllowed` True (SufficientPods) while a
/// disruption is allowed, else False (InsufficientPods); the transition time moves only when the
/// status does.
pub fn set_disruption_allowed_condition(budget: &mut Value, now: &str) {
    let allowed = status_int(budget, "disruptionsAllowed") > 0;
    let (status, reason) = if allowed { ("True", "SufficientPods") } else { ("False", "InsufficientPods") };
    let observed = status_int(budget, "observedGeneration");
    let mut conditions = budget.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    match conditions.iter_mut().find(|c| c["type"] == "DisruptionAllowed") {
        Some(c) => {
            if c["status"] != status {
                c["lastTransitionTime"] = json!(now);
            }
            c["status"] = json!(status);
            c["reason"] = json!(reason);
            c["message"] = json!("");
            c["observedGeneration"] = json!(observed);
        }
        None => conditions.push(json!({"type": "DisruptionAllowed", "status": status, "reason": reason, "message": "", "observedGeneration": observed, "lastTransitionTime": now})),
    }
    budget["status"]["conditions"] = json!(conditions);
}

/// The eviction's dry-run (`propagateDryRun`): the body's, or the request's when the body has
/// none; both set, they must be the same.
fn propagate_dry_run(body: &DryRun, request: &DryRun) -> Result<DryRun> {
    if !body.is_dry_run() {
        return Ok(request.clone());
    }
    if request.is_dry_run() && request != body {
        // Go's `%v` of the two []string.
        return Err(Error::BadRequest(format!("Non-matching dry-run options in request and content: [{}] and [{}]", request.0.join(" "), body.0.join(" "))));
    }
    Ok(body.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(generation: i64, observed: i64, allowed: i64, desired: i64, current: i64) -> Value {
        json!({"metadata": {"name": "web", "generation": generation},
               "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
               "status": {"observedGeneration": observed, "disruptionsAllowed": allowed, "desiredHealthy": desired, "currentHealthy": current, "expectedPods": 3}})
    }

    #[test]
    fn an_eviction_takes_one_disruption_or_is_refused() {
        let now = "2026-12-03T00:00:00Z";
        // One allowed: taken, the pod recorded, the condition turns False.
        let after = check_and_decrement(&budget(1, 1, 1, 2, 3), "web-a", now, false).expect("allowed");
        assert_eq!(after["status"]["disruptionsAllowed"], 0);
        assert_eq!(after["status"]["disruptedPods"]["web-a"], now);
        assert_eq!(after["status"]["conditions"][0]["reason"], "InsufficientPods");
        // A dry run takes the count but records no pod.
        let dry = check_and_decrement(&budget(1, 1, 2, 1, 3), "web-a", now, true).expect("allowed");
        assert_eq!(dry["status"]["disruptionsAllowed"], 1);
        assert!(dry["status"].get("disruptedPods").is_none());
        // None allowed: 429 with the budget's figures as the cause.
        let e = check_and_decrement(&budget(1, 1, 0, 2, 2), "web-a", now, false).expect_err("refused");
        assert_eq!(e.code(), 429);
        assert_eq!(e.to_string(), REFUSED);
        let st = e.to_status();
        assert_eq!(st["reason"], "TooManyRequests");
        assert_eq!(st["details"]["causes"][0], json!({"reason": "DisruptionBudget", "message": "The disruption budget web needs 2 healthy pods and has 2 currently"}));
        assert!(st["details"].get("retryAfterSeconds").is_none());
        // The controller has not seen the new generation: 429 with a 10 s hint.
        let e = check_and_decrement(&budget(2, 1, 1, 2, 3), "web-a", now, false).expect_err("not observed");
        assert_eq!((e.code(), e.retry_after_seconds()), (429, Some(10)));
        assert!(e.to_status()["details"]["causes"][0]["message"].as_str().unwrap_or("").contains("still being processed"));
        // A broken status: 403.
        assert_eq!(check_and_decrement(&budget(1, 1, -1, 2, 3), "web-a", now, false).expect_err("negative").code(), 403);
        let mut full = budget(1, 1, 1, 2, 3);
        full["status"]["disruptedPods"] = Value::Object((0..=MAX_DISRUPTED_POD_SIZE).map(|i| (format!("p{i}"), json!(now))).collect());
        assert_eq!(check_and_decrement(&full, "web-a", now, false).expect_err("too many").code(), 403);
    }

    #[test]
    fn which_pods_skip_the_budget() {
        let pod = |phase: &str, deleting: bool, ready: bool| {
            let mut p = json!({"metadata": {"name": "p", "labels": {"app": "web"}}, "status": {"phase": phase, "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}});
            if deleting {
                p["metadata"]["deletionTimestamp"] = json!("2026-12-03T00:00:00Z");
            }
            p
        };
        let cases = [
            ("Running", false, true, false, true),
            ("Pending", false, false, true, true),
            ("Succeeded", false, false, true, false),
            ("Failed", false, false, true, false),
            ("Running", true, true, true, false),
        ];
        for (phase, deleting, ready, ignore, enforce) in cases {
            let p = pod(phase, deleting, ready);
            assert_eq!(can_ignore_pdb(&p), ignore, "{phase} deleting={deleting}");
            assert_eq!(should_enforce_resource_version(&p), enforce, "{phase} deleting={deleting}");
            assert_eq!(is_pod_ready(&p), ready);
        }
        // Selectors: matchLabels, `{}` (every pod), null (none), a broken one (none).
        let b = |sel: Value| json!({"spec": {"selector": sel}});
        let p = pod("Running", false, true);
        assert!(selects(&b(json!({"matchLabels": {"app": "web"}})), &p));
        assert!(!selects(&b(json!({"matchLabels": {"app": "db"}})), &p));
        assert!(selects(&b(json!({})), &p));
        assert!(!selects(&b(Value::Null), &p));
        assert!(!selects(&b(json!({"matchExpressions": [{"key": "app", "operator": "Bogus"}]})), &p));
        // An unready pod goes free when the budget is met anyway, or always with AlwaysAllow.
        assert!(unhealthy_pod_may_go(&budget(1, 1, 0, 2, 2)));
        assert!(!unhealthy_pod_may_go(&budget(1, 1, 0, 2, 1)));
        assert!(!unhealthy_pod_may_go(&budget(1, 1, 0, 0, 0)));
        let mut always = budget(1, 1, 0, 2, 1);
        always["spec"]["unhealthyPodEvictionPolicy"] = json!("AlwaysAllow");
        assert!(unhealthy_pod_may_go(&always));
    }

    #[test]
    fn the_eviction_is_a_dry_run_when_either_says_so_and_both_agree() {
        let all = DryRun(vec!["All".into()]);
        let none = DryRun::default();
        assert_eq!(propagate_dry_run(&none, &none).expect("ok"), none);
        assert_eq!(propagate_dry_run(&all, &none).expect("ok"), all, "kubectl drain --dry-run=server: the body's");
        assert_eq!(propagate_dry_run(&none, &all).expect("ok"), all, "?dryRun=All");
        assert_eq!(propagate_dry_run(&all, &all).expect("ok"), all);
        let twice = DryRun(vec!["All".into(), "All".into()]);
        let e = propagate_dry_run(&twice, &all).expect_err("they differ");
        assert_eq!(e.code(), 400);
        assert_eq!(e.to_string(), "Non-matching dry-run options in request and content: [All] and [All All]");
    }
}
