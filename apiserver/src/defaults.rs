//! The API server's create-time pod and namespace mutations beyond defaulting: Kubernetes'
//! ServiceAccount, Priority and DefaultTolerationSeconds mutating admission plugins
//! (plugin/pkg/admission/…) and the pod and namespace strategies' `PrepareForCreate`.
//!
//! What `kubectl get pod -o yaml` shows that the user never wrote comes from three places, applied
//! in this order on create:
//!
//! 1. Defaulting (`SetDefaults_*`, in the `api` crate: [`api::core::v1::defaults`]), run when the
//!    request body is decoded: restartPolicy, dnsPolicy, probe timings, imagePullPolicy, volume
//!    modes…
//! 2. Mutating admission (here): ServiceAccount (`serviceAccountName: default`), Priority
//!    (`priority: 0`) and DefaultTolerationSeconds (the two 300-second NoExecute tolerations).
//! 3. The pod strategy's `PrepareForCreate` (here): the client's status is replaced by
//!    `{phase: Pending, qosClass: …}` ([`api::core::v1::helper::qos::compute_pod_qos`]).
//!
//! [`default_pod`] does all three. Only the API server runs steps 2 and 3: the node agent defaults
//! a static pod (step 1) and leaves the rest to the API server, which does it to the mirror pod.
//!
//! Implementation caveats (left out on purpose; the defaulting caveats are the `api` crate's):
//! - The ServiceAccount plugin's token volume (`kube-api-access-xxxxx` and its mounts) is not added.
//! - Priority knows only the built-in classes; any other `priorityClassName` is left for the caller
//!   to resolve. There is no global-default PriorityClass.

use api::core::v1::defaults::{set_defaults_namespace, set_defaults_pod};
use api::core::v1::helper::qos::compute_pod_qos;
use api::core::v1::well_known::{FINALIZER_KUBERNETES, TAINT_NODE_NOT_READY, TAINT_NODE_UNREACHABLE};
use api::pod::is_mirror_pod;
use api::scheduling::{SYSTEM_CLUSTER_CRITICAL, SYSTEM_NODE_CRITICAL};
use k8s_openapi::api::core::v1::{Namespace, NamespaceSpec, Pod, PodCondition, PodSpec, PodStatus, Toleration};

/// `serviceaccount.DefaultServiceAccountName`.
pub const DEFAULT_SERVICE_ACCOUNT_NAME: &str = "default";
/// DefaultTolerationSeconds' `--default-not-ready-toleration-seconds` and
/// `--default-unreachable-toleration-seconds`: how long a pod stays bound to a node that stopped
/// being Ready before the taint manager evicts it.
pub const DEFAULT_TOLERATION_SECONDS: i64 = 300;

/// Defaults a pod on create as the real API server does (see the module docs for the steps).
pub fn default_pod(pod: &mut Pod) {
    // Step 1: defaulting (SetDefaults_Pod, SetDefaults_PodSpec and the per-type functions).
    set_defaults_pod(pod);
    let is_mirror = is_mirror_pod(pod);
    let spec = pod.spec.get_or_insert_with(PodSpec::default);

    // Step 2: mutating admission.
    if !is_mirror {
        admit_service_account(spec);
    }
    admit_priority(spec);
    admit_default_toleration_seconds(spec);

    // Step 3: the strategy's PrepareForCreate. Status is the kubelet's to write: whatever the
    // client sent is dropped.
    let gated = spec
        .scheduling_gates
        .as_ref()
        .is_some_and(|g| !g.is_empty());
    let mut status = PodStatus {
        phase: Some("Pending".to_string()),
        qos_class: Some(compute_pod_qos(pod).as_str().to_string()),
        ..PodStatus::default()
    };
    if gated {
        status.conditions = Some(vec![PodCondition {
            type_: "PodScheduled".to_string(),
            status: "False".to_string(),
            reason: Some("SchedulingGated".to_string()),
            message: Some("Scheduling is blocked due to non-empty scheduling gates".to_string()),
            ..PodCondition::default()
        }]);
    }
    pod.status = Some(status);
}

/// The ServiceAccount admission plugin's defaulting: every pod runs as some service account.
/// `serviceAccount` is the deprecated alias the API keeps in step with `serviceAccountName`.
fn admit_service_account(spec: &mut PodSpec) {
    if spec.service_account_name.as_deref().is_none_or(str::is_empty) {
        spec.service_account_name = Some(DEFAULT_SERVICE_ACCOUNT_NAME.to_string());
    }
    spec.service_account = spec.service_account_name.clone();
}

/// The Priority admission plugin, for a cluster with only the built-in PriorityClasses and no
/// global default: no class means priority 0. A class we do not know is left for the caller to
/// resolve (the real plugin looks it up and rejects the pod if it does not exist).
fn admit_priority(spec: &mut PodSpec) {
    let class = spec.priority_class_name.as_deref().unwrap_or("");
    let priority = match class {
        "" => 0,
        c if c == SYSTEM_CLUSTER_CRITICAL.0 => SYSTEM_CLUSTER_CRITICAL.1,
        c if c == SYSTEM_NODE_CRITICAL.0 => SYSTEM_NODE_CRITICAL.1,
        _ => return,
    };
    spec.priority = Some(priority);
    if spec.preemption_policy.as_deref().is_none_or(str::is_empty) {
        spec.preemption_policy = Some("PreemptLowerPriority".to_string());
    }
}

/// DefaultTolerationSeconds: tolerate a not-ready or unreachable node for five minutes, unless the
/// pod already tolerates that taint's NoExecute effect in some way (an empty key or effect
/// matches every key or effect).
fn admit_default_toleration_seconds(spec: &mut PodSpec) {
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    let tolerates = |taint: &str| {
        tolerations.iter().any(|t| {
            let key = t.key.as_deref().unwrap_or("");
            let effect = t.effect.as_deref().unwrap_or("");
            (key == taint || key.is_empty()) && (effect == "NoExecute" || effect.is_empty())
        })
    };
    let missing: Vec<&str> = [TAINT_NODE_NOT_READY, TAINT_NODE_UNREACHABLE]
        .into_iter()
        .filter(|taint| !tolerates(taint))
        .collect();
    for taint in missing {
        tolerations.push(Toleration {
            key: Some(taint.to_string()),
            operator: Some("Exists".to_string()),
            effect: Some("NoExecute".to_string()),
            toleration_seconds: Some(DEFAULT_TOLERATION_SECONDS),
            value: None,
        });
    }
}

/// SetDefaults_Namespace and SetDefaults_NamespaceStatus, plus the namespace strategy's
/// PrepareForCreate (the `kubernetes` finalizer that makes deletion wait for the namespace
/// controller).
pub fn default_namespace(ns: &mut Namespace) {
    set_defaults_namespace(ns);
    let spec = ns.spec.get_or_insert_with(NamespaceSpec::default);
    let finalizers = spec.finalizers.get_or_insert_with(Vec::new);
    if !finalizers.iter().any(|f| f == FINALIZER_KUBERNETES) {
        finalizers.push(FINALIZER_KUBERNETES.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use serde_json::json;

    fn pod_from(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).expect("test pod is valid")
    }

    fn defaulted(json: serde_json::Value) -> Pod {
        let mut p = pod_from(json);
        default_pod(&mut p);
        p
    }

    fn spec(p: &Pod) -> &PodSpec {
        p.spec.as_ref().expect("defaulted pod has a spec")
    }

    fn minimal() -> serde_json::Value {
        json!({"metadata": {"name": "web"}, "spec": {"containers": [{"name": "app", "image": "busybox:1.36"}]}})
    }

    #[test]
    fn admission_and_status_on_create() {
        let p = defaulted(minimal());
        let s = spec(&p);
        assert_eq!(s.priority, Some(0));
        assert_eq!(s.preemption_policy.as_deref(), Some("PreemptLowerPriority"));
        assert_eq!(s.service_account_name.as_deref(), Some("default"));
        assert_eq!(s.service_account.as_deref(), Some("default"));
        let status = p.status.as_ref().expect("status");
        assert_eq!(status.phase.as_deref(), Some("Pending"));
        assert_eq!(status.qos_class.as_deref(), Some("BestEffort"));
        assert_eq!(status.conditions, None);
    }

    #[test]
    fn pod_spec_defaults_keep_what_is_set() {
        let p = defaulted(json!({"metadata": {"name": "web"}, "spec": {
            "restartPolicy": "Never", "dnsPolicy": "Default", "terminationGracePeriodSeconds": 0,
            "schedulerName": "mine", "securityContext": {"runAsUser": 1000}, "enableServiceLinks": false,
            "serviceAccountName": "builder", "serviceAccount": "stale",
            "containers": [{"name": "app", "image": "busybox", "imagePullPolicy": "Never",
                "terminationMessagePath": "/tmp/msg", "terminationMessagePolicy": "FallbackToLogsOnError"}]}}));
        let s = spec(&p);
        assert_eq!(s.restart_policy.as_deref(), Some("Never"));
        assert_eq!(s.dns_policy.as_deref(), Some("Default"));
        assert_eq!(s.termination_grace_period_seconds, Some(0));
        assert_eq!(s.scheduler_name.as_deref(), Some("mine"));
        assert_eq!(
            s.security_context.as_ref().and_then(|c| c.run_as_user),
            Some(1000)
        );
        assert_eq!(s.enable_service_links, Some(false));
        assert_eq!(s.service_account_name.as_deref(), Some("builder"));
        assert_eq!(
            s.service_account.as_deref(),
            Some("builder"),
            "the deprecated field mirrors the new one"
        );
        let c = &s.containers[0];
        assert_eq!(c.image_pull_policy.as_deref(), Some("Never"));
        assert_eq!(c.termination_message_path.as_deref(), Some("/tmp/msg"));
        assert_eq!(
            c.termination_message_policy.as_deref(),
            Some("FallbackToLogsOnError")
        );
    }

    #[test]
    fn service_account_from_deprecated_field_and_mirror_pods() {
        let mut j = minimal();
        j["spec"]["serviceAccount"] = "legacy".into();
        let p = defaulted(j);
        assert_eq!(spec(&p).service_account_name.as_deref(), Some("legacy"));
        assert_eq!(spec(&p).service_account.as_deref(), Some("legacy"));

        let mut mirror = minimal();
        mirror["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "abc"});
        let p = defaulted(mirror);
        assert_eq!(
            spec(&p).service_account_name,
            None,
            "the ServiceAccount plugin skips mirror pods"
        );
        assert_eq!(spec(&p).service_account, None);
    }

    #[test]
    fn priority_table() {
        // (priorityClassName, priority, preemptionPolicy)
        let cases = [
            (None, Some(0), Some("PreemptLowerPriority")),
            (Some(""), Some(0), Some("PreemptLowerPriority")),
            (
                Some("system-node-critical"),
                Some(2_000_001_000),
                Some("PreemptLowerPriority"),
            ),
            (
                Some("system-cluster-critical"),
                Some(2_000_000_000),
                Some("PreemptLowerPriority"),
            ),
            (Some("batch-low"), None, None),
        ];
        for (class, priority, policy) in cases {
            let mut j = minimal();
            if let Some(c) = class {
                j["spec"]["priorityClassName"] = c.into();
            }
            let p = defaulted(j);
            assert_eq!(spec(&p).priority, priority, "{class:?}");
            assert_eq!(spec(&p).preemption_policy.as_deref(), policy, "{class:?}");
        }
    }

    #[test]
    fn ports_env_and_resources() {
        let p = defaulted(
            json!({"spec": {"containers": [{"name": "app", "image": "nginx:1",
            "ports": [{"containerPort": 80}, {"containerPort": 53, "protocol": "UDP"}],
            "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                    {"name": "X", "valueFrom": {"fieldRef": {"apiVersion": "v2", "fieldPath": "metadata.name"}}},
                    {"name": "PLAIN", "value": "1"}],
            "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "100m"}}}]}}),
        );
        let c = &spec(&p).containers[0];
        let ports = c.ports.as_ref().expect("ports");
        assert_eq!(ports[0].protocol.as_deref(), Some("TCP"));
        assert_eq!(ports[1].protocol.as_deref(), Some("UDP"));
        assert_eq!(
            ports[0].host_port, None,
            "hostPort is defaulted only with hostNetwork"
        );
        let env = c.env.as_ref().expect("env");
        let api_version = |i: usize| {
            env[i]
                .value_from
                .as_ref()
                .and_then(|v| v.field_ref.as_ref())
                .and_then(|f| f.api_version.clone())
        };
        assert_eq!(api_version(0).as_deref(), Some("v1"));
        assert_eq!(api_version(1).as_deref(), Some("v2"));
        assert!(env[2].value_from.is_none());
        let r = c.resources.as_ref().expect("resources");
        let requests = r.requests.as_ref().expect("requests");
        assert_eq!(
            requests.get("cpu"),
            Some(&Quantity("100m".into())),
            "an explicit request stays"
        );
        assert_eq!(
            requests.get("memory"),
            Some(&Quantity("128Mi".into())),
            "a missing request takes the limit"
        );
        assert_eq!(
            p.status.as_ref().and_then(|s| s.qos_class.as_deref()),
            Some("Burstable")
        );

        // Limits only: requests copy them all, and the pod becomes Guaranteed.
        let p = defaulted(
            json!({"spec": {"containers": [{"name": "app", "image": "nginx:1",
            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}),
        );
        let r = spec(&p).containers[0]
            .resources
            .as_ref()
            .expect("resources");
        assert_eq!(r.requests, r.limits);
        assert_eq!(
            p.status.as_ref().and_then(|s| s.qos_class.as_deref()),
            Some("Guaranteed")
        );

        // Requests only: nothing is copied the other way.
        let p = defaulted(
            json!({"spec": {"containers": [{"name": "app", "image": "nginx:1",
            "resources": {"requests": {"memory": "1Gi"}}}]}}),
        );
        let r = spec(&p).containers[0]
            .resources
            .as_ref()
            .expect("resources");
        assert_eq!(r.limits, None);
    }

    fn toleration(key: &str, op: &str, effect: &str, seconds: Option<i64>) -> serde_json::Value {
        let mut t = json!({"operator": op});
        if !key.is_empty() {
            t["key"] = key.into();
        }
        if !effect.is_empty() {
            t["effect"] = effect.into();
        }
        if let Some(s) = seconds {
            t["tolerationSeconds"] = s.into();
        }
        t
    }

    #[test]
    fn default_toleration_seconds_table() {
        let not_ready = toleration(TAINT_NODE_NOT_READY, "Exists", "NoExecute", Some(300));
        let unreachable = toleration(TAINT_NODE_UNREACHABLE, "Exists", "NoExecute", Some(300));
        // (case, tolerations given, tolerations after)
        let cases = vec![
            (
                "none",
                json!(null),
                vec![not_ready.clone(), unreachable.clone()],
            ),
            (
                "unrelated toleration kept first",
                json!([toleration("gpu", "Exists", "NoSchedule", None)]),
                vec![
                    toleration("gpu", "Exists", "NoSchedule", None),
                    not_ready.clone(),
                    unreachable.clone(),
                ],
            ),
            (
                "own not-ready toleration",
                json!([toleration(
                    TAINT_NODE_NOT_READY,
                    "Exists",
                    "NoExecute",
                    Some(10)
                )]),
                vec![
                    toleration(TAINT_NODE_NOT_READY, "Exists", "NoExecute", Some(10)),
                    unreachable.clone(),
                ],
            ),
            (
                "own unreachable toleration without effect",
                json!([toleration(TAINT_NODE_UNREACHABLE, "Exists", "", None)]),
                vec![
                    toleration(TAINT_NODE_UNREACHABLE, "Exists", "", None),
                    not_ready.clone(),
                ],
            ),
            (
                "not-ready but only NoSchedule does not count",
                json!([toleration(
                    TAINT_NODE_NOT_READY,
                    "Exists",
                    "NoSchedule",
                    None
                )]),
                vec![
                    toleration(TAINT_NODE_NOT_READY, "Exists", "NoSchedule", None),
                    not_ready.clone(),
                    unreachable.clone(),
                ],
            ),
            (
                "tolerate everything",
                json!([toleration("", "Exists", "", None)]),
                vec![toleration("", "Exists", "", None)],
            ),
            (
                "tolerate every NoExecute taint",
                json!([toleration("", "Exists", "NoExecute", None)]),
                vec![toleration("", "Exists", "NoExecute", None)],
            ),
        ];
        for (case, given, want) in cases {
            let mut j = minimal();
            if !given.is_null() {
                j["spec"]["tolerations"] = given;
            }
            let p = defaulted(j);
            let got = serde_json::to_value(&spec(&p).tolerations).expect("serializes");
            assert_eq!(got, json!(want), "{case}");
        }
    }

    #[test]
    fn status_is_replaced_and_gates_add_a_condition() {
        let mut j = minimal();
        j["status"] = json!({"phase": "Running", "podIP": "10.0.0.9"});
        j["spec"]["schedulingGates"] = json!([{"name": "example.com/wait"}]);
        let p = defaulted(j);
        let status = p.status.as_ref().expect("status");
        assert_eq!(status.phase.as_deref(), Some("Pending"));
        assert_eq!(status.pod_ip, None);
        let conditions = status.conditions.as_ref().expect("conditions");
        assert_eq!(conditions.len(), 1);
        assert_eq!(
            (
                conditions[0].type_.as_str(),
                conditions[0].status.as_str(),
                conditions[0].reason.as_deref()
            ),
            ("PodScheduled", "False", Some("SchedulingGated"))
        );
    }

    #[test]
    fn pod_without_spec_is_defaulted() {
        let p = defaulted(json!({"metadata": {"name": "x"}}));
        assert_eq!(spec(&p).restart_policy.as_deref(), Some("Always"));
        assert_eq!(
            p.status.as_ref().and_then(|s| s.qos_class.as_deref()),
            Some("BestEffort")
        );
    }

    #[test]
    fn defaulting_is_idempotent() {
        let once = defaulted(
            json!({"spec": {"containers": [{"name": "app", "image": "a:1",
            "resources": {"limits": {"cpu": "1"}}, "livenessProbe": {"httpGet": {"port": 80}}}],
            "volumes": [{"name": "v"}]}}),
        );
        let mut twice = once.clone();
        default_pod(&mut twice);
        assert_eq!(once, twice);
    }

    #[test]
    fn namespace_finalizer_on_create() {
        let mut ns: Namespace =
            serde_json::from_value(json!({"metadata": {"name": "team-a"}})).expect("valid");
        default_namespace(&mut ns);
        assert_eq!(
            ns.spec.as_ref().and_then(|s| s.finalizers.clone()),
            Some(vec!["kubernetes".to_string()])
        );
        let again = ns.clone();
        default_namespace(&mut ns);
        assert_eq!(ns, again, "idempotent: the finalizer is not added twice");

        let mut ns: Namespace = serde_json::from_value(json!({
            "metadata": {"name": "b"}, "spec": {"finalizers": ["example.com/keep"]}})).expect("valid");
        default_namespace(&mut ns);
        assert_eq!(
            ns.spec.as_ref().and_then(|s| s.finalizers.clone()),
            Some(vec![
                "example.com/keep".to_string(),
                "kubernetes".to_string()
            ])
        );
    }
}
