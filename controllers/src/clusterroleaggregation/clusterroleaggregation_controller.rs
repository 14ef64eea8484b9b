//! Mirrors pkg/controller/clusterroleaggregation/clusterroleaggregation_controller.go: a
//! ClusterRole with an `aggregationRule` holds the rules of every ClusterRole its selectors
//! match, kept up to date as those come, go and change.
//!
//! This is how the default `admin`, `edit` and `view` roles grow: a ClusterRole labelled
//! `rbac.authorization.k8s.io/aggregate-to-view: "true"` (a CRD's author ships one) adds its
//! rules to `view`, with no one editing `view` itself.
//!
//! Which ClusterRoles depend on which is not tracked: any ClusterRole event queues every
//! aggregated ClusterRole (there are few), as Kubernetes' does. One sync
//! ([`ClusterRoleAggregationController::sync_cluster_role`]):
//! 1. Read the ClusterRole from the cache; gone, or without an `aggregationRule`: nothing to do.
//! 2. Compute its rules ([`aggregated_rules`]): for each selector in turn, the ClusterRoles it
//!    matches, by name, itself left out; each of their rules once, in the order first met.
//! 3. Already its rules: nothing to do.
//! 4. Write them with a server-side apply of `rules` alone, as field manager
//!    [`FIELD_MANAGER`], forced: the rules are the controller's, whoever wrote them before. A
//!    server without server-side apply (415) gets an update of the whole object instead.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::workqueue::WorkQueue;

const TARGET: &str = "controllers::clusterroleaggregation";
/// Workers syncing at once (kube-controller-manager starts this controller with five).
pub const WORKERS: usize = 5;
/// The field manager of the controller's applies: it owns an aggregated ClusterRole's `rules`.
pub const FIELD_MANAGER: &str = "clusterrole-aggregation-controller";

pub struct ClusterRoleAggregationController {
    /// Lists and watches for the caches: the controller manager's own client (see
    /// [`crate::controller_context`]).
    informers: kube::Client,
    /// Everything else: the controller's own client.
    client: kube::Client,
}

/// Step 2: the rules `role` aggregates from `all` (every ClusterRole), or why a selector does not
/// parse (validation keeps such a role out of the store). For each selector, in order, the
/// ClusterRoles it matches, sorted by name, `role` itself skipped; each of their rules unless an
/// equal one is already in.
pub fn aggregated_rules(role: &ClusterRole, all: &[Arc<ClusterRole>]) -> Result<Vec<PolicyRule>, apimachinery::error::Error> {
    let mut rules: Vec<PolicyRule> = Vec::new();
    let name = role.metadata.name.as_deref().unwrap_or_default();
    let selectors = role.aggregation_rule.iter().flat_map(|a| a.cluster_role_selectors.iter().flatten());
    for selector in selectors {
        let selector = apimachinery::labels::Selector::from_label_selector(&serde_json::to_value(selector).unwrap_or(Value::Null))?;
        let mut matched: Vec<&ClusterRole> = all
            .iter()
            .map(|r| r.as_ref())
            .filter(|r| r.metadata.name.as_deref().unwrap_or_default() != name)
            .filter(|r| selector.matches(&r.metadata.labels.clone().unwrap_or_default()))
            .collect();
        matched.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        for rule in matched.into_iter().flat_map(|r| r.rules.iter().flatten()) {
            if !rules.iter().any(|r| same_rule(r, rule)) {
                rules.push(rule.clone());
            }
        }
    }
    Ok(rules)
}

/// Whether two lists of rules are the same (`equality.Semantic.DeepEqual`: a missing list and
/// an empty one are equal, order counts).
pub fn same_rules(a: &[PolicyRule], b: &[PolicyRule]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_rule(x, y))
}

fn same_rule(a: &PolicyRule, b: &PolicyRule) -> bool {
    let list = |v: &Option<Vec<String>>| v.clone().unwrap_or_default();
    a.verbs == b.verbs
        && list(&a.api_groups) == list(&b.api_groups)
        && list(&a.resources) == list(&b.resources)
        && list(&a.resource_names) == list(&b.resource_names)
        && list(&a.non_resource_urls) == list(&b.non_resource_urls)
}

impl ClusterRoleAggregationController {
    pub fn new(informers: kube::Client, client: kube::Client) -> Self {
        Self { informers, client }
    }

    /// Watches ClusterRoles into a cache; [`WORKERS`] workers sync the aggregated ones queued.
    pub async fn run(self) -> Result<()> {
        let (roles, roles_w) = reflector::store::<ClusterRole>();
        let queue: WorkQueue<String> = WorkQueue::new();
        let informer = async {
            let stream = reflector::reflector(roles_w, watcher(Api::<ClusterRole>::all(self.informers.clone()), watcher::Config::default())).default_backoff();
            let mut stream = std::pin::pin!(stream);
            while let Some(ev) = stream.next().await {
                match ev {
                    // Each object of the first list is not queued by itself: once the list is
                    // whole (InitDone), every aggregated role is, against a complete cache.
                    Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_) | watcher::Event::InitDone) => enqueue_aggregated(&roles, &queue),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(target: TARGET, error = %e, "watch failed; retrying"),
                }
            }
        };
        let work = async {
            if roles.wait_until_ready().await.is_err() {
                return;
            }
            let worker = || async {
                while let Some(name) = queue.get().await {
                    match self.sync_cluster_role(&roles, &name).await {
                        Ok(()) => queue.forget(&name),
                        Err(e) => {
                            tracing::warn!(target: TARGET, clusterrole = %name, error = %e, "aggregation failed; will retry");
                            queue.add_rate_limited(name.clone());
                        }
                    }
                    queue.done(&name);
                }
            };
            futures::future::join_all((0..WORKERS).map(|_| worker())).await;
        };
        tokio::select! {
            () = informer => {}
            () = work => {}
        }
        Ok(())
    }

    /// Steps 1–4 for one ClusterRole.
    async fn sync_cluster_role(&self, roles: &Store<ClusterRole>, name: &str) -> Result<()> {
        // Step 1.
        let Some(role) = roles.get(&ObjectRef::new(name)) else { return Ok(()) };
        if role.aggregation_rule.is_none() {
            return Ok(());
        }
        // Step 2.
        let rules = match aggregated_rules(&role, &roles.state()) {
            Ok(rules) => rules,
            // Kubernetes retries this with backoff; only a write can mend the selector, and a
            // write queues the role again anyway.
            Err(e) => {
                tracing::warn!(target: TARGET, clusterrole = name, error = %e, "aggregationRule has a selector that does not parse; skipped");
                return Ok(());
            }
        };
        // Step 3.
        if same_rules(&rules, role.rules.as_deref().unwrap_or_default()) {
            return Ok(());
        }
        // Step 4.
        tracing::info!(target: TARGET, clusterrole = name, rules = rules.len(), "writing aggregated rules");
        let api: Api<ClusterRole> = Api::all(self.client.clone());
        match api.patch(name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(apply_configuration(name, &rules))).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 415 => {
                let mut updated = (*role).clone();
                updated.rules = Some(rules);
                api.replace(name, &PostParams::default(), &updated).await.map(|_| ()).map_err(Error::Kube)
            }
            Err(e) => Err(Error::Kube(e)),
        }
    }
}

/// Queues every ClusterRole that has an `aggregationRule` (client-go's `enqueue` here).
fn enqueue_aggregated(roles: &Store<ClusterRole>, queue: &WorkQueue<String>) {
    for role in roles.state() {
        if role.aggregation_rule.is_some()
            && let Some(name) = &role.metadata.name
        {
            queue.add(name.clone());
        }
    }
}

/// The applied configuration: the ClusterRole's name and its `rules`, nothing else (no rules at
/// all when there are none, as the Go apply configuration leaves an empty list out, which
/// gives up the controller's ownership of them).
fn apply_configuration(name: &str, rules: &[PolicyRule]) -> Value {
    let mut obj = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name}});
    if !rules.is_empty() {
        obj["rules"] = serde_json::to_value(rules).unwrap_or(Value::Null);
    }
    obj
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(name: &str, labels: Value, rules: Value) -> Arc<ClusterRole> {
        Arc::new(serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "rules": rules})).expect("a ClusterRole"))
    }

    fn aggregated(name: &str, selectors: Value, labels: Value) -> ClusterRole {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "aggregationRule": {"clusterRoleSelectors": selectors}})).expect("a ClusterRole")
    }

    fn rule(verbs: &[&str], resources: &[&str]) -> Value {
        json!({"verbs": verbs, "apiGroups": [""], "resources": resources})
    }

    fn rules(v: Value) -> Vec<PolicyRule> {
        serde_json::from_value(v).expect("rules")
    }

    #[test]
    fn the_union_of_the_matched_roles_rules() {
        let view = json!({"rbac.example.com/aggregate-to-view": "true"});
        let edit = json!({"rbac.example.com/aggregate-to-edit": "true"});
        let all = vec![
            // Out of name order on purpose: the matched roles are taken by name.
            role("pods-view", view.clone(), json!([rule(&["get", "list"], &["pods"])])),
            role("configmaps-view", view.clone(), json!([rule(&["get"], &["configmaps"]), rule(&["get", "list"], &["pods"])])),
            role("pods-edit", edit.clone(), json!([rule(&["create"], &["pods"])])),
            role("unlabelled", json!({}), json!([rule(&["delete"], &["secrets"])])),
            role("no-rules", view.clone(), json!(null)),
        ];
        let by_view = json!([{"matchLabels": view}]);
        let by_edit_then_view = json!([{"matchLabels": edit}, {"matchLabels": view}]);
        let by_expression = json!([{"matchExpressions": [{"key": "rbac.example.com/aggregate-to-edit", "operator": "Exists"}]}]);
        // (selectors, the aggregated role's own labels, the rules it gets)
        let cases = [
            (by_view.clone(), json!({}), json!([rule(&["get"], &["configmaps"]), rule(&["get", "list"], &["pods"])])),
            (by_edit_then_view, json!({}), json!([rule(&["create"], &["pods"]), rule(&["get"], &["configmaps"]), rule(&["get", "list"], &["pods"])])),
            (by_expression, json!({}), json!([rule(&["create"], &["pods"])])),
            (json!([{"matchLabels": {"nobody": "has-this"}}]), json!({}), json!([])),
            // `{}` matches every ClusterRole but the aggregated one itself.
            (json!([{}]), json!({}), json!([
                rule(&["get"], &["configmaps"]), rule(&["get", "list"], &["pods"]),
                rule(&["create"], &["pods"]), rule(&["delete"], &["secrets"]),
            ])),
            // An aggregated role that its own selector matches does not feed itself.
            (by_view, view.clone(), json!([rule(&["get"], &["configmaps"]), rule(&["get", "list"], &["pods"])])),
        ];
        for (selectors, labels, want) in cases {
            let mut all = all.clone();
            let target = aggregated("agg", selectors.clone(), labels);
            // It is in the cache too, with rules of its own that must not count.
            let mut stored = target.clone();
            stored.rules = Some(rules(json!([rule(&["*"], &["*"])])));
            all.push(Arc::new(stored));
            let got = aggregated_rules(&target, &all).expect("selectors parse");
            assert_eq!(got, rules(want), "{selectors}");
        }
    }

    #[test]
    fn a_selector_that_does_not_parse_is_an_error() {
        let target = aggregated("agg", json!([{"matchExpressions": [{"key": "a", "operator": "Around"}]}]), json!({}));
        assert!(aggregated_rules(&target, &[]).is_err());
    }

    #[test]
    fn rules_compare_with_missing_lists_as_empty() {
        let written = rules(json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": []}]));
        let read = rules(json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]));
        assert!(same_rules(&written, &read));
        assert!(same_rules(&[], &[]));
        let other = rules(json!([{"verbs": ["get"], "apiGroups": ["apps"], "resources": ["pods"]}]));
        assert!(!same_rules(&written, &other));
        let reordered = rules(json!([rule(&["list"], &["pods"]), rule(&["get"], &["pods"])]));
        let ordered = rules(json!([rule(&["get"], &["pods"]), rule(&["list"], &["pods"])]));
        assert!(!same_rules(&reordered, &ordered));
        assert!(!same_rules(&ordered, &ordered[..1]));
    }

    #[test]
    fn the_apply_configuration_holds_the_rules_alone() {
        let r = rules(json!([rule(&["get"], &["pods"])]));
        assert_eq!(
            apply_configuration("view", &r),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "view"},
                   "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]})
        );
        assert_eq!(apply_configuration("view", &[]).get("rules"), None);
    }
}
