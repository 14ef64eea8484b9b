//! Mirrors Kubernetes' pkg/apis/core/v1/defaults.go, plus the pod defaults of create-time admission.
//!
//! What `kubectl get pod -o yaml` shows that the user never wrote comes from three places, applied
//! in this order on create:
//!
//! 1. Defaulting (`SetDefaults_*` in defaults.go), run when the request body is decoded:
//!    restartPolicy, dnsPolicy, probe timings, imagePullPolicy, volume modes…
//! 2. Mutating admission: ServiceAccount (`serviceAccountName: default`), Priority (`priority: 0`)
//!    and DefaultTolerationSeconds (the two 300-second NoExecute tolerations).
//! 3. The pod strategy's `PrepareForCreate`: the client's status is replaced by
//!    `{phase: Pending, qosClass: …}`.
//!
//! [`default_pod`] does all three. [`qos_class`] mirrors `pkg/apis/core/v1/helper/qos`.
//!
//! Implementation caveats (left out on purpose):
//! - Quantities are not canonicalized (`SetDefaults_ResourceList` rounds to milli-units and the
//!   serializer rewrites `1000m` as `1`); they are kept as written.
//! - Pod-level resources are not defaulted from the containers' (`defaultPodRequests`,
//!   `defaultPodLimits`, `defaultHugePagePodLimits`), though [`qos_class`] honours them.
//! - Ephemeral containers are not defaulted: they arrive only through the `ephemeralcontainers`
//!   subresource, never on create.
//! - The ServiceAccount plugin's token volume (`kube-api-access-xxxxx` and its mounts) is not added.
//! - Priority knows only the built-in classes; any other `priorityClassName` is left for the caller
//!   to resolve. There is no global-default PriorityClass.
//! - Legacy in-tree volume defaults (iSCSI, RBD, AzureDisk, ScaleIO…) are not applied.

use k8s_openapi::api::core::v1::{
    Container, HTTPGetAction, Namespace, NamespaceSpec, NamespaceStatus, Node, ObjectFieldSelector,
    Pod, PodCondition, PodSecurityContext, PodSpec, PodStatus, Probe, ResourceRequirements, Secret,
    Toleration, Volume,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::collections::BTreeMap;

/// `v1.DefaultTerminationGracePeriodSeconds`.
pub const DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS: i64 = 30;
/// `v1.DefaultSchedulerName`.
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";
/// `v1.TerminationMessagePathDefault`.
pub const TERMINATION_MESSAGE_PATH_DEFAULT: &str = "/dev/termination-log";
/// 0644: the mode of files projected from ConfigMaps, Secrets, the downward API and projections.
pub const DEFAULT_VOLUME_MODE: i32 = 0o644;
/// `serviceaccount.DefaultServiceAccountName`.
pub const DEFAULT_SERVICE_ACCOUNT_NAME: &str = "default";
/// DefaultTolerationSeconds' `--default-not-ready-toleration-seconds` and
/// `--default-unreachable-toleration-seconds`: how long a pod stays bound to a node that stopped
/// being Ready before the taint manager evicts it.
pub const DEFAULT_TOLERATION_SECONDS: i64 = 300;
/// The taint the node lifecycle controller puts on a node whose Ready condition is False.
pub const TAINT_NODE_NOT_READY: &str = "node.kubernetes.io/not-ready";
/// The taint the node lifecycle controller puts on a node whose Ready condition is Unknown.
pub const TAINT_NODE_UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// Pods with this annotation mirror a static pod; the ServiceAccount plugin leaves them alone.
pub const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// The namespace label the API server maintains (`v1.LabelMetadataName`).
pub const LABEL_METADATA_NAME: &str = "kubernetes.io/metadata.name";
/// The finalizer the namespace controller removes once a namespace is empty.
pub const FINALIZER_KUBERNETES: &str = "kubernetes";
/// Priority values of the two built-in PriorityClasses.
pub const SYSTEM_CLUSTER_CRITICAL: (&str, i32) = ("system-cluster-critical", 2_000_000_000);
pub const SYSTEM_NODE_CRITICAL: (&str, i32) = ("system-node-critical", 2_000_001_000);

/// Defaults a pod on create as the real API server does (see the module docs for the steps).
pub fn default_pod(pod: &mut Pod) {
    // Step 1: defaulting (SetDefaults_Pod, SetDefaults_PodSpec and the per-type functions).
    let spec = pod.spec.get_or_insert_with(PodSpec::default);
    set_defaults_pod_spec(spec);

    // Step 2: mutating admission.
    let is_mirror = pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_POD_ANNOTATION));
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
        qos_class: Some(qos_class(pod).to_string()),
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

/// SetDefaults_PodSpec, SetDefaults_Pod and everything they reach (containers, probes, volumes).
fn set_defaults_pod_spec(spec: &mut PodSpec) {
    set_if_none(&mut spec.dns_policy, "ClusterFirst");
    set_if_none(&mut spec.restart_policy, "Always");
    spec.security_context
        .get_or_insert_with(PodSecurityContext::default);
    spec.termination_grace_period_seconds
        .get_or_insert(DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS);
    set_if_none(&mut spec.scheduler_name, DEFAULT_SCHEDULER_NAME);
    spec.enable_service_links.get_or_insert(true);
    // The v1 → internal conversion reads the deprecated `serviceAccount` when the new field is empty.
    if is_empty(&spec.service_account_name) && !is_empty(&spec.service_account) {
        spec.service_account_name = spec.service_account.clone();
    }

    let host_network = spec.host_network.unwrap_or(false);
    for c in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        set_defaults_container(c, host_network);
    }
    for v in spec.volumes.iter_mut().flatten() {
        set_defaults_volume(v);
    }
}

/// SetDefaults_Container, plus the parts of SetDefaults_Pod that are per container.
fn set_defaults_container(c: &mut Container, host_network: bool) {
    if is_empty(&c.image_pull_policy) {
        c.image_pull_policy =
            Some(default_image_pull_policy(c.image.as_deref().unwrap_or("")).to_string());
    }
    set_if_none(
        &mut c.termination_message_path,
        TERMINATION_MESSAGE_PATH_DEFAULT,
    );
    set_if_none(&mut c.termination_message_policy, "File");
    for port in c.ports.iter_mut().flatten() {
        set_if_none(&mut port.protocol, "TCP");
        // With the host's network the container port is the host port.
        if host_network && port.host_port.unwrap_or(0) == 0 {
            port.host_port = Some(port.container_port);
        }
    }
    // Go's Resources is a struct, not a pointer: it always serializes, as `{}` at least.
    let resources = c
        .resources
        .get_or_insert_with(ResourceRequirements::default);
    default_requests_to_limits(resources);
    for env in c.env.iter_mut().flatten() {
        if let Some(field_ref) = env.value_from.as_mut().and_then(|v| v.field_ref.as_mut()) {
            set_defaults_object_field_selector(field_ref);
        }
    }
    for probe in [
        &mut c.liveness_probe,
        &mut c.readiness_probe,
        &mut c.startup_probe,
    ]
    .into_iter()
    .flatten()
    {
        set_defaults_probe(probe);
    }
    if let Some(lifecycle) = c.lifecycle.as_mut() {
        for handler in [&mut lifecycle.post_start, &mut lifecycle.pre_stop]
            .into_iter()
            .flatten()
        {
            if let Some(http) = handler.http_get.as_mut() {
                set_defaults_http_get_action(http);
            }
        }
    }
}

/// `IfNotPresent` for a pinned image; `Always` for `:latest` or an image with neither tag nor
/// digest (which means `:latest`). An image that does not parse gets `IfNotPresent`, as
/// Kubernetes ignores the parse error here and leaves the complaint to validation.
pub fn default_image_pull_policy(image: &str) -> &'static str {
    match parse_image_reference(image) {
        Some((Some("latest"), _)) | Some((None, None)) => "Always",
        _ => "IfNotPresent",
    }
}

/// The tag and digest of an image reference (`[domain/]path[:tag][@digest]`), or `None` if it is
/// not a valid reference. A simplified `docker/reference.ParseNormalizedNamed`.
fn parse_image_reference(image: &str) -> Option<(Option<&str>, Option<&str>)> {
    let (named, digest) = match image.split_once('@') {
        Some((n, d)) => {
            let (algorithm, hex) = d.split_once(':')?;
            if algorithm.is_empty() || hex.is_empty() {
                return None;
            }
            (n, Some(d))
        }
        None => (image, None),
    };
    // A ':' after the last '/' starts the tag; one before it belongs to a registry's port.
    let last_slash = named.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match named[last_slash..].rfind(':') {
        Some(i) => (&named[..last_slash + i], Some(&named[last_slash + i + 1..])),
        None => (named, None),
    };
    if let Some(t) = tag {
        let valid_tag = t.len() <= 128
            && t.chars()
                .next()
                .is_some_and(|ch| ch.is_ascii_alphanumeric() || ch == '_')
            && t.chars()
                .all(|ch| ch.is_ascii_alphanumeric() || "_.-".contains(ch));
        if !valid_tag {
            return None;
        }
    }
    // The first component is a registry if it looks like a host (has '.' or ':', is localhost,
    // or has capitals); the repository path after it must be lower case.
    let path = match name.split_once('/') {
        Some((first, rest))
            if first.contains(['.', ':'])
                || first == "localhost"
                || first.chars().any(|c| c.is_ascii_uppercase()) =>
        {
            rest
        }
        _ => name,
    };
    let valid_path = !path.is_empty()
        && path.split('/').all(|component| {
            !component.is_empty()
                && component
                    .chars()
                    .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || "._-".contains(ch))
        });
    valid_path.then_some((tag, digest))
}

/// SetDefaults_Pod: a resource with a limit but no request gets the limit as its request. Done for
/// pods only (not templates), so a template's requests stay as written.
fn default_requests_to_limits(resources: &mut ResourceRequirements) {
    let Some(limits) = resources.limits.as_ref().filter(|l| !l.is_empty()) else {
        return;
    };
    let requests = resources.requests.get_or_insert_with(BTreeMap::new);
    for (name, value) in limits {
        requests
            .entry(name.clone())
            .or_insert_with(|| value.clone());
    }
}

/// SetDefaults_Probe, and the defaults of the handler inside it.
fn set_defaults_probe(p: &mut Probe) {
    zero_to(&mut p.timeout_seconds, 1);
    zero_to(&mut p.period_seconds, 10);
    zero_to(&mut p.success_threshold, 1);
    zero_to(&mut p.failure_threshold, 3);
    if let Some(http) = p.http_get.as_mut() {
        set_defaults_http_get_action(http);
    }
    if let Some(grpc) = p.grpc.as_mut() {
        // `+default=""`: the empty service name asks for the server's overall health.
        grpc.service.get_or_insert_with(String::new);
    }
}

fn set_defaults_http_get_action(h: &mut HTTPGetAction) {
    set_if_none(&mut h.path, "/");
    set_if_none(&mut h.scheme, "HTTP");
}

fn set_defaults_object_field_selector(f: &mut ObjectFieldSelector) {
    set_if_none(&mut f.api_version, "v1");
}

/// SetDefaults_Volume and the defaults of each volume source.
fn set_defaults_volume(v: &mut Volume) {
    // A volume that names no source at all is an emptyDir. Serializing is the sure way to ask
    // "is every source field unset?" across the 30-odd sources; a volume that cannot be serialized
    // is left alone for validation to reject.
    let no_source = serde_json::to_value(&*v)
        .ok()
        .and_then(|json| json.as_object().map(|o| o.keys().all(|k| k == "name")))
        .unwrap_or(false);
    if no_source {
        v.empty_dir = Some(Default::default());
    }
    if let Some(image) = v.image.as_mut()
        && is_empty(&image.pull_policy)
    {
        // An image volume (ImageVolume) is pulled by the same rule as a container image.
        image.pull_policy =
            Some(default_image_pull_policy(image.reference.as_deref().unwrap_or("")).to_string());
    }
    if let Some(s) = v.secret.as_mut() {
        s.default_mode.get_or_insert(DEFAULT_VOLUME_MODE);
    }
    if let Some(cm) = v.config_map.as_mut() {
        cm.default_mode.get_or_insert(DEFAULT_VOLUME_MODE);
    }
    if let Some(d) = v.downward_api.as_mut() {
        d.default_mode.get_or_insert(DEFAULT_VOLUME_MODE);
        for item in d.items.iter_mut().flatten() {
            if let Some(f) = item.field_ref.as_mut() {
                set_defaults_object_field_selector(f);
            }
        }
    }
    if let Some(p) = v.projected.as_mut() {
        p.default_mode.get_or_insert(DEFAULT_VOLUME_MODE);
        for source in p.sources.iter_mut().flatten() {
            if let Some(token) = source.service_account_token.as_mut() {
                token.expiration_seconds.get_or_insert(3600);
            }
            for item in source
                .downward_api
                .iter_mut()
                .flat_map(|d| d.items.iter_mut().flatten())
            {
                if let Some(f) = item.field_ref.as_mut() {
                    set_defaults_object_field_selector(f);
                }
            }
        }
    }
    if let Some(h) = v.host_path.as_mut() {
        // HostPathUnset: no check of what is at the path.
        h.type_.get_or_insert_with(String::new);
    }
}

/// The ServiceAccount admission plugin's defaulting: every pod runs as some service account.
/// `serviceAccount` is the deprecated alias the API keeps in step with `serviceAccountName`.
fn admit_service_account(spec: &mut PodSpec) {
    if is_empty(&spec.service_account_name) {
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
    set_if_none(&mut spec.preemption_policy, "PreemptLowerPriority");
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
    if let Some(name) = ns.metadata.name.clone().filter(|n| !n.is_empty()) {
        ns.metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(LABEL_METADATA_NAME.to_string(), name);
    }
    let spec = ns.spec.get_or_insert_with(NamespaceSpec::default);
    let finalizers = spec.finalizers.get_or_insert_with(Vec::new);
    if !finalizers.iter().any(|f| f == FINALIZER_KUBERNETES) {
        finalizers.push(FINALIZER_KUBERNETES.to_string());
    }
    let status = ns.status.get_or_insert_with(NamespaceStatus::default);
    set_if_none(&mut status.phase, "Active");
}

/// SetDefaults_NodeStatus: a node that reports capacity but no allocatable can use all of it.
/// (SetDefaults_Node itself is empty since `externalID` went away.)
pub fn default_node(node: &mut Node) {
    if let Some(status) = node.status.as_mut()
        && status.allocatable.is_none()
    {
        status.allocatable = status.capacity.clone();
    }
}

/// SetDefaults_Secret.
pub fn default_secret(s: &mut Secret) {
    set_if_none(&mut s.type_, "Opaque");
}

/// The pod's QoS class (pkg/apis/core/v1/helper/qos `ComputePodQOS`), from cpu and memory only.
/// Each container (init containers included) gets a class of its own, and the pod's is:
/// - BestEffort: every container is BestEffort (no cpu or memory requested or limited).
/// - Guaranteed: every container is Guaranteed (cpu and memory limited, requests equal to limits).
/// - Burstable: anything else, including a mix of the two.
///
/// When the pod sets pod-level `spec.resources` (PodLevelResources), they alone decide.
pub fn qos_class(pod: &Pod) -> &'static str {
    let Some(spec) = pod.spec.as_ref() else {
        return "BestEffort";
    };
    if let Some(resources) = spec.resources.as_ref() {
        return resource_qos(Some(resources));
    }
    let mut pod_qos = None;
    for c in spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
    {
        match (resource_qos(c.resources.as_ref()), pod_qos) {
            ("Burstable", _) => return "Burstable",
            (qos, None) => pod_qos = Some(qos),
            (qos, Some(seen)) if qos != seen => return "Burstable",
            _ => {}
        }
    }
    pod_qos.unwrap_or("BestEffort")
}

/// The class of one set of requests and limits (Kubernetes' `resourceQOS`). A quantity that does
/// not parse counts as zero: validation rejects it anyway.
fn resource_qos(resources: Option<&ResourceRequirements>) -> &'static str {
    let requests = resources.and_then(|r| r.requests.as_ref());
    let limits = resources.and_then(|r| r.limits.as_ref());
    if requests.is_none_or(BTreeMap::is_empty) && limits.is_none_or(BTreeMap::is_empty) {
        return "BestEffort";
    }
    let amount = |list: Option<&BTreeMap<String, Quantity>>, name: &str| {
        list.and_then(|l| l.get(name))
            .and_then(|q| apimachinery::resource::parse_quantity_nanos(&q.0))
            .unwrap_or(0)
    };
    let mut qos = None;
    for name in ["cpu", "memory"] {
        let (request, limit) = (amount(requests, name), amount(limits, name));
        if request != limit {
            return "Burstable";
        }
        let class = if request == 0 {
            "BestEffort"
        } else {
            "Guaranteed"
        };
        match qos {
            None => qos = Some(class),
            Some(seen) if seen != class => return "Burstable",
            _ => {}
        }
    }
    qos.unwrap_or("BestEffort")
}

fn set_if_none(field: &mut Option<String>, value: &str) {
    if is_empty(field) {
        *field = Some(value.to_string());
    }
}

fn zero_to(field: &mut Option<i32>, value: i32) {
    if field.unwrap_or(0) == 0 {
        *field = Some(value);
    }
}

/// Go's `== ""` for an optional string: unset and empty are the same thing.
fn is_empty(field: &Option<String>) -> bool {
    field.as_deref().is_none_or(str::is_empty)
}

#[cfg(test)]
mod tests {
    use super::*;
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
    fn pod_spec_defaults() {
        let p = defaulted(minimal());
        let s = spec(&p);
        assert_eq!(s.restart_policy.as_deref(), Some("Always"));
        assert_eq!(s.dns_policy.as_deref(), Some("ClusterFirst"));
        assert_eq!(s.termination_grace_period_seconds, Some(30));
        assert_eq!(s.scheduler_name.as_deref(), Some("default-scheduler"));
        assert_eq!(s.security_context, Some(PodSecurityContext::default()));
        assert_eq!(s.enable_service_links, Some(true));
        assert_eq!(s.priority, Some(0));
        assert_eq!(s.preemption_policy.as_deref(), Some("PreemptLowerPriority"));
        assert_eq!(s.service_account_name.as_deref(), Some("default"));
        assert_eq!(s.service_account.as_deref(), Some("default"));
        let c = &s.containers[0];
        assert_eq!(c.image_pull_policy.as_deref(), Some("IfNotPresent"));
        assert_eq!(
            c.termination_message_path.as_deref(),
            Some("/dev/termination-log")
        );
        assert_eq!(c.termination_message_policy.as_deref(), Some("File"));
        assert_eq!(c.resources, Some(ResourceRequirements::default()));
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
    fn image_pull_policy_table() {
        let cases = [
            ("busybox", "Always"),
            ("busybox:latest", "Always"),
            ("busybox:1.36", "IfNotPresent"),
            ("registry:5000/busybox", "Always"),
            ("registry:5000/busybox:1.36", "IfNotPresent"),
            ("registry:5000/busybox:latest", "Always"),
            ("localhost/team/app", "Always"),
            ("docker.io/library/busybox:1.36", "IfNotPresent"),
            (
                "busybox@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                "IfNotPresent",
            ),
            (
                "busybox:latest@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                "Always",
            ),
            (
                "busybox:1.36@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                "IfNotPresent",
            ),
            // Unparseable references: Kubernetes ignores the error and picks IfNotPresent.
            ("", "IfNotPresent"),
            ("BusyBox", "IfNotPresent"),
            ("busybox:", "IfNotPresent"),
            ("busybox@", "IfNotPresent"),
            ("busybox:-bad", "IfNotPresent"),
        ];
        for (image, want) in cases {
            assert_eq!(default_image_pull_policy(image), want, "{image:?}");
            let mut j = minimal();
            j["spec"]["containers"][0]["image"] = image.into();
            j["spec"]["initContainers"] = json!([{"name": "init", "image": image}]);
            let p = defaulted(j);
            assert_eq!(
                spec(&p).containers[0].image_pull_policy.as_deref(),
                Some(want),
                "{image:?}"
            );
            let init = &spec(&p).init_containers.as_ref().expect("init containers")[0];
            assert_eq!(
                init.image_pull_policy.as_deref(),
                Some(want),
                "init {image:?}"
            );
        }
        // A container without any image field.
        let p = defaulted(json!({"spec": {"containers": [{"name": "app"}]}}));
        assert_eq!(
            spec(&p).containers[0].image_pull_policy.as_deref(),
            Some("IfNotPresent")
        );
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

    #[test]
    fn host_network_defaults_host_ports() {
        let p = defaulted(
            json!({"spec": {"hostNetwork": true, "containers": [{"name": "app", "image": "a:1",
            "ports": [{"containerPort": 8080}, {"containerPort": 9090, "hostPort": 9091}]}]}}),
        );
        let ports = spec(&p).containers[0].ports.as_ref().expect("ports");
        assert_eq!(ports[0].host_port, Some(8080));
        assert_eq!(ports[1].host_port, Some(9091));
    }

    #[test]
    fn probe_defaults() {
        let p = defaulted(
            json!({"spec": {"containers": [{"name": "app", "image": "a:1",
            "livenessProbe": {"httpGet": {"port": 8080}},
            "readinessProbe": {"tcpSocket": {"port": 80}, "periodSeconds": 2, "timeoutSeconds": 0, "failureThreshold": 5},
            "startupProbe": {"grpc": {"port": 9000}},
            "lifecycle": {"preStop": {"httpGet": {"port": 80, "path": "/quit", "scheme": "HTTPS"}},
                          "postStart": {"httpGet": {"port": 80}}}}]}}),
        );
        let c = &spec(&p).containers[0];
        let live = c.liveness_probe.as_ref().expect("liveness");
        assert_eq!(
            (
                live.timeout_seconds,
                live.period_seconds,
                live.success_threshold,
                live.failure_threshold
            ),
            (Some(1), Some(10), Some(1), Some(3))
        );
        assert_eq!(live.initial_delay_seconds, None);
        let http = live.http_get.as_ref().expect("httpGet");
        assert_eq!(
            (http.scheme.as_deref(), http.path.as_deref()),
            (Some("HTTP"), Some("/"))
        );
        let ready = c.readiness_probe.as_ref().expect("readiness");
        assert_eq!(
            (
                ready.timeout_seconds,
                ready.period_seconds,
                ready.success_threshold,
                ready.failure_threshold
            ),
            (Some(1), Some(2), Some(1), Some(5))
        );
        let startup = c.startup_probe.as_ref().expect("startup");
        assert_eq!(
            startup.grpc.as_ref().and_then(|g| g.service.as_deref()),
            Some("")
        );
        let lifecycle = c.lifecycle.as_ref().expect("lifecycle");
        let pre = lifecycle
            .pre_stop
            .as_ref()
            .and_then(|h| h.http_get.as_ref())
            .expect("preStop");
        assert_eq!(
            (pre.scheme.as_deref(), pre.path.as_deref()),
            (Some("HTTPS"), Some("/quit"))
        );
        let post = lifecycle
            .post_start
            .as_ref()
            .and_then(|h| h.http_get.as_ref())
            .expect("postStart");
        assert_eq!(post.scheme.as_deref(), Some("HTTP"));
    }

    #[test]
    fn volume_defaults() {
        let p = defaulted(
            json!({"spec": {"containers": [{"name": "app", "image": "a:1"}], "volumes": [
                {"name": "scratch"},
                {"name": "cm", "configMap": {"name": "settings"}},
                {"name": "cm-mode", "configMap": {"name": "settings", "defaultMode": 256}},
                {"name": "sec", "secret": {"secretName": "creds"}},
                {"name": "down", "downwardAPI": {"items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}},
                {"name": "proj", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "token"}},
                    {"downwardAPI": {"items": [{"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}]}},
                {"name": "host", "hostPath": {"path": "/var/log"}},
                {"name": "tmp", "emptyDir": {"medium": "Memory"}},
                {"name": "model", "image": {"reference": "models/llm"}},
                {"name": "model-pinned", "image": {"reference": "models/llm:v1"}},
                {"name": "model-never", "image": {"reference": "models/llm:latest", "pullPolicy": "Never"}},
            ]}}),
        );
        let v = spec(&p).volumes.as_ref().expect("volumes");
        assert_eq!(
            v[0].empty_dir,
            Some(Default::default()),
            "a volume without a source is an emptyDir"
        );
        assert_eq!(
            v[1].config_map.as_ref().and_then(|c| c.default_mode),
            Some(420)
        );
        assert_eq!(
            v[2].config_map.as_ref().and_then(|c| c.default_mode),
            Some(256)
        );
        assert_eq!(v[3].secret.as_ref().and_then(|s| s.default_mode), Some(420));
        let down = v[4].downward_api.as_ref().expect("downwardAPI");
        assert_eq!(down.default_mode, Some(420));
        let items = down.items.as_ref().expect("items");
        assert_eq!(
            items[0]
                .field_ref
                .as_ref()
                .and_then(|f| f.api_version.as_deref()),
            Some("v1")
        );
        let proj = v[5].projected.as_ref().expect("projected");
        assert_eq!(proj.default_mode, Some(420));
        let sources = proj.sources.as_ref().expect("sources");
        assert_eq!(
            sources[0]
                .service_account_token
                .as_ref()
                .and_then(|t| t.expiration_seconds),
            Some(3600)
        );
        let proj_items = sources[1]
            .downward_api
            .as_ref()
            .and_then(|d| d.items.as_ref())
            .expect("items");
        assert_eq!(
            proj_items[0]
                .field_ref
                .as_ref()
                .and_then(|f| f.api_version.as_deref()),
            Some("v1")
        );
        assert_eq!(
            v[6].host_path.as_ref().and_then(|h| h.type_.as_deref()),
            Some("")
        );
        assert_eq!(v[6].empty_dir, None);
        assert_eq!(
            v[7].empty_dir.as_ref().and_then(|e| e.medium.as_deref()),
            Some("Memory")
        );
        let pull = |i: usize| v[i].image.as_ref().and_then(|im| im.pull_policy.as_deref());
        assert_eq!(pull(8), Some("Always"), "no tag means :latest");
        assert_eq!(pull(9), Some("IfNotPresent"));
        assert_eq!(pull(10), Some("Never"));
        assert_eq!(v[8].empty_dir, None);
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

    fn qos(
        containers: serde_json::Value,
        init: serde_json::Value,
        pod_level: serde_json::Value,
    ) -> &'static str {
        let mut spec = json!({"containers": containers});
        if !init.is_null() {
            spec["initContainers"] = init;
        }
        if !pod_level.is_null() {
            spec["resources"] = pod_level;
        }
        qos_class(&pod_from(json!({"spec": spec})))
    }

    #[test]
    fn qos_class_table() {
        let c = |resources: serde_json::Value| json!({"name": "c", "resources": resources});
        let full = json!({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}});
        let null = serde_json::Value::Null;
        // (case, containers, init containers, pod-level resources, class)
        let cases = vec![
            (
                "nothing",
                json!([c(json!({}))]),
                null.clone(),
                null.clone(),
                "BestEffort",
            ),
            (
                "no containers",
                json!([]),
                null.clone(),
                null.clone(),
                "BestEffort",
            ),
            (
                "only other resources",
                json!([c(
                    json!({"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}})
                )]),
                null.clone(),
                null.clone(),
                "BestEffort",
            ),
            (
                "zero quantities",
                json!([c(json!({"requests": {"cpu": "0", "memory": "0"}}))]),
                null.clone(),
                null.clone(),
                "BestEffort",
            ),
            (
                "requests equal limits",
                json!([c(full.clone())]),
                null.clone(),
                null.clone(),
                "Guaranteed",
            ),
            (
                "equal in different units",
                json!([c(
                    json!({"requests": {"cpu": "1000m", "memory": "1024Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}})
                )]),
                null.clone(),
                null.clone(),
                "Guaranteed",
            ),
            (
                "limits only (not defaulted yet)",
                json!([c(json!({"limits": {"cpu": "1", "memory": "1Gi"}}))]),
                null.clone(),
                null.clone(),
                "Burstable",
            ),
            (
                "requests below limits",
                json!([c(
                    json!({"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}})
                )]),
                null.clone(),
                null.clone(),
                "Burstable",
            ),
            (
                "cpu limit only",
                json!([c(json!({"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}))]),
                null.clone(),
                null.clone(),
                "Burstable",
            ),
            (
                "requests only",
                json!([c(json!({"requests": {"memory": "64Mi"}}))]),
                null.clone(),
                null.clone(),
                "Burstable",
            ),
            (
                "one guaranteed, one empty",
                json!([c(full.clone()), c(json!({}))]),
                null.clone(),
                null.clone(),
                "Burstable",
            ),
            (
                "init container counts",
                json!([c(full.clone())]),
                json!([c(json!({"requests": {"cpu": "100m"}}))]),
                null.clone(),
                "Burstable",
            ),
            (
                "guaranteed init container",
                json!([c(full.clone())]),
                json!([c(full.clone())]),
                null.clone(),
                "Guaranteed",
            ),
            (
                "init makes a best-effort pod burstable",
                json!([c(json!({}))]),
                json!([c(json!({"requests": {"cpu": "1m"}}))]),
                null.clone(),
                "Burstable",
            ),
            (
                "pod level guaranteed",
                json!([c(json!({}))]),
                null.clone(),
                full.clone(),
                "Guaranteed",
            ),
            (
                "pod level requests only",
                json!([c(full.clone())]),
                null.clone(),
                json!({"requests": {"cpu": "1"}}),
                "Burstable",
            ),
            (
                "pod level cpu only",
                json!([c(json!({}))]),
                null.clone(),
                json!({"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}),
                "Burstable",
            ),
            (
                "empty pod-level resources still decide",
                json!([c(full.clone())]),
                null.clone(),
                json!({}),
                "BestEffort",
            ),
            (
                "extended resources do not matter",
                json!([c(
                    json!({"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}, "limits": {"cpu": "1", "memory": "1Gi"}})
                )]),
                null.clone(),
                null.clone(),
                "Guaranteed",
            ),
            (
                "unparseable quantity counts as zero",
                json!([c(json!({"requests": {"cpu": "lots"}}))]),
                null.clone(),
                null.clone(),
                "BestEffort",
            ),
        ];
        for (case, containers, init, pod_level, want) in cases {
            assert_eq!(qos(containers, init, pod_level), want, "{case}");
        }
        assert_eq!(qos_class(&Pod::default()), "BestEffort");
    }

    #[test]
    fn namespace_defaults() {
        let mut ns: Namespace =
            serde_json::from_value(json!({"metadata": {"name": "team-a"}})).expect("valid");
        default_namespace(&mut ns);
        assert_eq!(
            ns.spec.as_ref().and_then(|s| s.finalizers.clone()),
            Some(vec!["kubernetes".to_string()])
        );
        assert_eq!(
            ns.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Active")
        );
        assert_eq!(
            ns.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_METADATA_NAME))
                .map(String::as_str),
            Some("team-a")
        );
        let again = ns.clone();
        default_namespace(&mut ns);
        assert_eq!(ns, again, "idempotent: the finalizer is not added twice");

        let mut ns: Namespace = serde_json::from_value(json!({
            "metadata": {"name": "b", "labels": {"kubernetes.io/metadata.name": "spoofed", "team": "x"}},
            "spec": {"finalizers": ["example.com/keep"]}, "status": {"phase": "Terminating"}})).expect("valid");
        default_namespace(&mut ns);
        assert_eq!(
            ns.spec.as_ref().and_then(|s| s.finalizers.clone()),
            Some(vec![
                "example.com/keep".to_string(),
                "kubernetes".to_string()
            ])
        );
        assert_eq!(
            ns.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Terminating")
        );
        let labels = ns.metadata.labels.as_ref().expect("labels");
        assert_eq!(
            labels.get(LABEL_METADATA_NAME).map(String::as_str),
            Some("b"),
            "the label always tells the truth"
        );
        assert_eq!(labels.get("team").map(String::as_str), Some("x"));

        let mut nameless = Namespace::default();
        default_namespace(&mut nameless);
        assert_eq!(
            nameless.metadata.labels, None,
            "generateName namespaces get the label later"
        );
    }

    #[test]
    fn node_defaults() {
        let mut node: Node = serde_json::from_value(json!({"metadata": {"name": "n1"},
            "status": {"capacity": {"cpu": "4", "memory": "8Gi"}}}))
        .expect("valid");
        default_node(&mut node);
        let status = node.status.as_ref().expect("status");
        assert_eq!(status.allocatable, status.capacity);

        let mut node: Node = serde_json::from_value(json!({"metadata": {"name": "n1"},
            "status": {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "3500m"}}}))
        .expect("valid");
        default_node(&mut node);
        let allocatable = node
            .status
            .as_ref()
            .and_then(|s| s.allocatable.as_ref())
            .expect("allocatable");
        assert_eq!(allocatable.get("cpu"), Some(&Quantity("3500m".into())));

        let mut bare = Node::default();
        default_node(&mut bare);
        assert_eq!(bare, Node::default());
    }

    #[test]
    fn secret_defaults() {
        let cases = [
            (None, "Opaque"),
            (Some(""), "Opaque"),
            (Some("kubernetes.io/tls"), "kubernetes.io/tls"),
        ];
        for (given, want) in cases {
            let mut s = Secret {
                type_: given.map(str::to_string),
                ..Secret::default()
            };
            default_secret(&mut s);
            assert_eq!(s.type_.as_deref(), Some(want), "{given:?}");
        }
    }
}
