//! Mirrors pkg/apis/apps/v1/defaults.go: the `SetDefaults_*` functions of the apps/v1 kinds.
//!
//! What a workload leaves out is filled in here so the controllers never guess: one replica, a
//! rolling update, ten old revisions kept. Set fields are left alone, so defaulting twice gives
//! the same object. Each also defaults its pod template's spec as a pod's would be
//! ([`set_defaults_pod_template_spec`]), since the generated SetObjectDefaults reaches into the template.

use k8s_openapi::api::apps::v1::{
    DaemonSet, DaemonSetUpdateStrategy, Deployment, DeploymentStrategy, ReplicaSet,
    RollingUpdateDaemonSet, RollingUpdateDeployment, RollingUpdateStatefulSetStrategy, StatefulSet,
    StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetUpdateStrategy,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::core::v1::defaults::set_defaults_pod_template_spec;

/// How many old ReplicaSets or ControllerRevisions a workload keeps when it does not say.
pub const DEFAULT_REVISION_HISTORY_LIMIT: i32 = 10;
/// How long a Deployment may make no progress before its Progressing condition turns False.
pub const DEFAULT_PROGRESS_DEADLINE_SECONDS: i32 = 600;

/// SetDefaults_Deployment: one replica, a RollingUpdate strategy of 25% unavailable and 25%
/// surge, ten old ReplicaSets kept, a ten-minute progress deadline.
pub fn set_defaults_deployment(d: &mut Deployment) {
    let spec = &mut d.spec;
    spec.replicas.get_or_insert(1);
    let strategy = spec.strategy.get_or_insert_with(DeploymentStrategy::default);
    let type_ = strategy.type_.get_or_insert_with(String::new);
    if type_.is_empty() {
        *type_ = "RollingUpdate".to_string();
    }
    if type_ == "RollingUpdate" {
        let ru = strategy.rolling_update.get_or_insert_with(RollingUpdateDeployment::default);
        ru.max_unavailable.get_or_insert_with(|| IntOrString::String("25%".to_string()));
        ru.max_surge.get_or_insert_with(|| IntOrString::String("25%".to_string()));
    }
    spec.revision_history_limit.get_or_insert(DEFAULT_REVISION_HISTORY_LIMIT);
    spec.progress_deadline_seconds.get_or_insert(DEFAULT_PROGRESS_DEADLINE_SECONDS);
    set_defaults_pod_template_spec(&mut spec.template);
}

/// SetDefaults_ReplicaSet: one replica.
pub fn set_defaults_replica_set(rs: &mut ReplicaSet) {
    rs.spec.replicas.get_or_insert(1);
    if let Some(t) = rs.spec.template.as_mut() {
        set_defaults_pod_template_spec(t);
    }
}

/// SetDefaults_DaemonSet: a RollingUpdate strategy of one unavailable pod and no surge, ten old
/// ControllerRevisions kept.
pub fn set_defaults_daemon_set(ds: &mut DaemonSet) {
    let spec = &mut ds.spec;
    let strategy = spec.update_strategy.get_or_insert_with(DaemonSetUpdateStrategy::default);
    let type_ = strategy.type_.get_or_insert_with(String::new);
    if type_.is_empty() {
        *type_ = "RollingUpdate".to_string();
    }
    if type_ == "RollingUpdate" {
        let ru = strategy.rolling_update.get_or_insert_with(RollingUpdateDaemonSet::default);
        ru.max_unavailable.get_or_insert(IntOrString::Int(1));
        ru.max_surge.get_or_insert(IntOrString::Int(0));
    }
    spec.revision_history_limit.get_or_insert(DEFAULT_REVISION_HISTORY_LIMIT);
    set_defaults_pod_template_spec(&mut spec.template);
}

/// SetDefaults_StatefulSet: one replica started in order (OrderedReady), a RollingUpdate
/// strategy from partition 0, ten old ControllerRevisions kept, and PVCs retained both when the
/// set is deleted and when it is scaled down.
pub fn set_defaults_stateful_set(ss: &mut StatefulSet) {
    let spec = &mut ss.spec;
    let policy = spec.pod_management_policy.get_or_insert_with(String::new);
    if policy.is_empty() {
        *policy = "OrderedReady".to_string();
    }
    let strategy = spec.update_strategy.get_or_insert_with(StatefulSetUpdateStrategy::default);
    if strategy.type_.as_deref().is_none_or(str::is_empty) {
        strategy.type_ = Some("RollingUpdate".to_string());
        // Only a type defaulted here brings a rollingUpdate with it; an explicit RollingUpdate
        // without one means "no partition", and is left so.
        strategy.rolling_update.get_or_insert_with(RollingUpdateStatefulSetStrategy::default);
    }
    if strategy.type_.as_deref() == Some("RollingUpdate")
        && let Some(ru) = strategy.rolling_update.as_mut()
    {
        ru.partition.get_or_insert(0);
    }
    let retention = spec
        .persistent_volume_claim_retention_policy
        .get_or_insert_with(StatefulSetPersistentVolumeClaimRetentionPolicy::default);
    for field in [&mut retention.when_deleted, &mut retention.when_scaled] {
        if field.as_deref().is_none_or(str::is_empty) {
            *field = Some("Retain".to_string());
        }
    }
    spec.replicas.get_or_insert(1);
    spec.revision_history_limit.get_or_insert(DEFAULT_REVISION_HISTORY_LIMIT);
    set_defaults_pod_template_spec(&mut spec.template);
}


#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// A template with one container and nothing defaulting fills in.
    fn template() -> Value {
        json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}})
    }

    fn spec_of(obj: Value) -> Value {
        obj["spec"].clone()
    }

    #[test]
    fn deployment_defaults() {
        let mut d: Deployment =
            serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template()}}))
                .expect("test deployment");
        set_defaults_deployment(&mut d);
        let spec = spec_of(serde_json::to_value(&d).expect("serializes"));
        assert_eq!(spec["replicas"], json!(1));
        assert_eq!(spec["strategy"], json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}));
        assert_eq!(spec["revisionHistoryLimit"], json!(10));
        assert_eq!(spec["progressDeadlineSeconds"], json!(600));
        assert_eq!(spec["template"]["spec"]["restartPolicy"], json!("Always"));
        assert_eq!(spec["template"]["spec"]["containers"][0]["imagePullPolicy"], json!("IfNotPresent"));
        assert!(spec.get("minReadySeconds").is_none() && spec.get("paused").is_none());
    }

    #[test]
    fn deployment_keeps_what_is_set() {
        let mut d: Deployment = serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": {
            "replicas": 0, "revisionHistoryLimit": 2, "progressDeadlineSeconds": 30,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 3}},
            "selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {}}}}))
        .expect("test deployment");
        set_defaults_deployment(&mut d);
        let spec = spec_of(serde_json::to_value(&d).expect("serializes"));
        assert_eq!(spec["replicas"], json!(0));
        assert_eq!(spec["revisionHistoryLimit"], json!(2));
        assert_eq!(spec["progressDeadlineSeconds"], json!(30));
        assert_eq!(spec["strategy"]["rollingUpdate"], json!({"maxSurge": 3, "maxUnavailable": "25%"}));
        // No template spec: none is made up.
        assert!(spec["template"].get("spec").is_none());

        let mut recreate: Deployment = serde_json::from_value(json!({"metadata": {}, "spec": {
            "strategy": {"type": "Recreate"}, "selector": {}, "template": {}}}))
        .expect("test deployment");
        set_defaults_deployment(&mut recreate);
        assert_eq!(spec_of(serde_json::to_value(&recreate).expect("serializes"))["strategy"], json!({"type": "Recreate"}));
    }

    #[test]
    fn replica_set_defaults() {
        let mut rs: ReplicaSet = serde_json::from_value(json!({"metadata": {}, "spec": {"selector": {}, "template": template()}})).expect("test rs");
        set_defaults_replica_set(&mut rs);
        let spec = spec_of(serde_json::to_value(&rs).expect("serializes"));
        assert_eq!(spec["replicas"], json!(1));
        assert_eq!(spec["template"]["spec"]["dnsPolicy"], json!("ClusterFirst"));
        assert!(spec.get("minReadySeconds").is_none());

        let mut zero: ReplicaSet = serde_json::from_value(json!({"metadata": {}, "spec": {"replicas": 0, "selector": {}}})).expect("test rs");
        set_defaults_replica_set(&mut zero);
        assert_eq!(zero.spec.replicas, Some(0));
    }

    #[test]
    fn daemon_set_defaults() {
        let mut ds: DaemonSet = serde_json::from_value(json!({"metadata": {}, "spec": {"selector": {}, "template": template()}})).expect("test ds");
        set_defaults_daemon_set(&mut ds);
        let spec = spec_of(serde_json::to_value(&ds).expect("serializes"));
        assert_eq!(spec["updateStrategy"], json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}));
        assert_eq!(spec["revisionHistoryLimit"], json!(10));
        assert_eq!(spec["template"]["spec"]["schedulerName"], json!("default-scheduler"));

        let mut on_delete: DaemonSet = serde_json::from_value(json!({"metadata": {}, "spec": {
            "selector": {}, "template": {}, "updateStrategy": {"type": "OnDelete"}, "revisionHistoryLimit": 1}}))
        .expect("test ds");
        set_defaults_daemon_set(&mut on_delete);
        let spec = spec_of(serde_json::to_value(&on_delete).expect("serializes"));
        assert_eq!(spec["updateStrategy"], json!({"type": "OnDelete"}));
        assert_eq!(spec["revisionHistoryLimit"], json!(1));
    }

    #[test]
    fn stateful_set_defaults() {
        let mut ss: StatefulSet = serde_json::from_value(json!({"metadata": {}, "spec": {"selector": {}, "template": template()}})).expect("test ss");
        set_defaults_stateful_set(&mut ss);
        let spec = spec_of(serde_json::to_value(&ss).expect("serializes"));
        assert_eq!(spec["replicas"], json!(1));
        assert_eq!(spec["podManagementPolicy"], json!("OrderedReady"));
        assert_eq!(spec["updateStrategy"], json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}));
        assert_eq!(spec["revisionHistoryLimit"], json!(10));
        assert_eq!(spec["persistentVolumeClaimRetentionPolicy"], json!({"whenDeleted": "Retain", "whenScaled": "Retain"}));
        assert_eq!(spec["template"]["spec"]["terminationGracePeriodSeconds"], json!(30));
        assert!(spec.get("serviceName").is_none() && spec.get("minReadySeconds").is_none());
    }

    #[test]
    fn stateful_set_keeps_what_is_set() {
        let mut ss: StatefulSet = serde_json::from_value(json!({"metadata": {}, "spec": {
            "replicas": 3, "podManagementPolicy": "Parallel", "revisionHistoryLimit": 0,
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete"},
            "selector": {}, "template": {}}}))
        .expect("test ss");
        set_defaults_stateful_set(&mut ss);
        let spec = spec_of(serde_json::to_value(&ss).expect("serializes"));
        assert_eq!(spec["replicas"], json!(3));
        assert_eq!(spec["podManagementPolicy"], json!("Parallel"));
        assert_eq!(spec["revisionHistoryLimit"], json!(0));
        assert_eq!(spec["updateStrategy"], json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}));
        assert_eq!(spec["persistentVolumeClaimRetentionPolicy"], json!({"whenDeleted": "Delete", "whenScaled": "Retain"}));

        // An explicit RollingUpdate without rollingUpdate stays without one; OnDelete gets none.
        for strategy in [json!({"type": "RollingUpdate"}), json!({"type": "OnDelete"})] {
            let mut ss: StatefulSet =
                serde_json::from_value(json!({"metadata": {}, "spec": {"updateStrategy": strategy.clone(), "selector": {}, "template": {}}})).expect("test ss");
            set_defaults_stateful_set(&mut ss);
            assert_eq!(spec_of(serde_json::to_value(&ss).expect("serializes"))["updateStrategy"], strategy);
        }
    }
}
