//! Mirrors pkg/apis/core/v1/defaults.go: the `SetDefaults_*` functions, run on every object the
//! API server decodes and on every static pod the node agent reads.
//!
//! Defaulting fills in what the user may leave out and every reader relies on: restartPolicy,
//! dnsPolicy, probe timings, imagePullPolicy, volume modes, requests taken from limits… It changes
//! nothing that is already set, so running it twice gives the same object. What the API server
//! adds on create beyond this (a service account, a priority, the 300-second tolerations, the
//! Pending status) is admission and the strategy's, not defaulting: see the crate docs.

use k8s_openapi::api::core::v1::{
    Container, HTTPGetAction, Namespace, NamespaceStatus, Node, ObjectFieldSelector, Pod, PodSecurityContext, PodSpec,
    PodTemplateSpec, Probe, ResourceRequirements, Secret, Service, SessionAffinityConfig, ClientIPConfig, Volume,
};
use k8s_openapi::api::core::v1::Endpoints;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeMap;

use super::well_known::{
    DEFAULT_SCHEDULER_NAME, DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS, DEFAULT_VOLUME_MODE, LABEL_METADATA_NAME,
    TERMINATION_MESSAGE_PATH_DEFAULT,
};

/// SetObjectDefaults_Pod: SetDefaults_Pod, SetDefaults_PodSpec and the defaults of everything in
/// the spec (containers, probes, volumes). A pod without a spec gets an empty one, defaulted.
pub fn set_defaults_pod(pod: &mut Pod) {
    set_defaults_pod_spec(pod.spec.get_or_insert_with(PodSpec::default));
}

/// SetDefaults_PodSpec, SetDefaults_Pod and everything they reach (containers, probes, volumes).
pub fn set_defaults_pod_spec(spec: &mut PodSpec) {
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

/// A workload's pod template (a Deployment's, a Job's…): its spec, if it has one, defaulted as a
/// pod's ([`set_defaults_pod_spec`]); a template without a spec gets none made up.
pub fn set_defaults_pod_template_spec(t: &mut PodTemplateSpec) {
    if let Some(spec) = t.spec.as_mut() {
        set_defaults_pod_spec(spec);
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

/// SetDefaults_Namespace and SetDefaults_NamespaceStatus: the `kubernetes.io/metadata.name` label
/// always names the namespace (whatever the client wrote there), and a namespace is Active until
/// it is deleted. A namespace without a name yet (`generateName`) gets the label once named.
pub fn set_defaults_namespace(ns: &mut Namespace) {
    if let Some(name) = ns.metadata.name.clone().filter(|n| !n.is_empty()) {
        ns.metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(LABEL_METADATA_NAME.to_string(), name);
    }
    let status = ns.status.get_or_insert_with(NamespaceStatus::default);
    set_if_none(&mut status.phase, "Active");
}

/// SetDefaults_NodeStatus: a node that reports capacity but no allocatable can use all of it.
/// (SetDefaults_Node itself is empty since `externalID` went away.)
pub fn set_defaults_node(node: &mut Node) {
    if let Some(status) = node.status.as_mut()
        && status.allocatable.is_none()
    {
        status.allocatable = status.capacity.clone();
    }
}

/// SetDefaults_Secret.
pub fn set_defaults_secret(s: &mut Secret) {
    set_if_none(&mut s.type_, "Opaque");
}

/// SetDefaults_Service: a ClusterIP Service with no session affinity, each port TCP and aimed at
/// the same port on the pods; the traffic policies Cluster; a ClientIP affinity of three hours.
/// The cluster IPs and IP families are the allocator's, on create (the API server's service
/// storage), not defaults.
pub fn set_defaults_service(svc: &mut Service) {
    let spec = svc.spec.get_or_insert_with(Default::default);
    set_if_none(&mut spec.session_affinity, "None");
    if spec.session_affinity.as_deref() == Some("None") {
        spec.session_affinity_config = None;
    }
    if spec.session_affinity.as_deref() == Some("ClientIP") {
        let config = spec.session_affinity_config.get_or_insert_with(SessionAffinityConfig::default);
        let client_ip = config.client_ip.get_or_insert_with(ClientIPConfig::default);
        if client_ip.timeout_seconds.is_none() {
            client_ip.timeout_seconds = Some(DEFAULT_CLIENT_IP_SERVICE_AFFINITY_SECONDS);
        }
    }
    set_if_none(&mut spec.type_, "ClusterIP");
    for port in spec.ports.iter_mut().flatten() {
        set_if_none(&mut port.protocol, "TCP");
        let unset = match &port.target_port {
            None => true,
            Some(IntOrString::Int(0)) => true,
            Some(IntOrString::String(s)) => s.is_empty(),
            Some(IntOrString::Int(_)) => false,
        };
        if unset {
            port.target_port = Some(IntOrString::Int(port.port));
        }
    }
    let type_ = spec.type_.clone().unwrap_or_default();
    if type_ == "NodePort" || type_ == "LoadBalancer" {
        set_if_none(&mut spec.external_traffic_policy, "Cluster");
    }
    if type_ != "ExternalName" {
        set_if_none(&mut spec.internal_traffic_policy, "Cluster");
    }
    if type_ == "LoadBalancer" && spec.allocate_load_balancer_node_ports.is_none() {
        spec.allocate_load_balancer_node_ports = Some(true);
    }
}

/// SetDefaults_Endpoints: each port TCP.
pub fn set_defaults_endpoints(ep: &mut Endpoints) {
    for subset in ep.subsets.iter_mut().flatten() {
        for port in subset.ports.iter_mut().flatten() {
            set_if_none(&mut port.protocol, "TCP");
        }
    }
}

/// Three hours: how long a ClientIP affinity lasts unless the Service says (`timeoutSeconds`).
pub const DEFAULT_CLIENT_IP_SERVICE_AFFINITY_SECONDS: i32 = 10800;

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
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use serde_json::json;

    /// One container, and nothing that defaulting fills in.
    fn minimal() -> serde_json::Value {
        json!({"metadata": {"name": "web"}, "spec": {"containers": [{"name": "app", "image": "busybox:1.36"}]}})
    }

    /// The pod `json` describes, after [`set_defaults_pod`].
    fn defaulted(json: serde_json::Value) -> Pod {
        let mut p: Pod = serde_json::from_value(json).expect("test pod is valid");
        set_defaults_pod(&mut p);
        p
    }

    fn spec(p: &Pod) -> &PodSpec {
        p.spec.as_ref().expect("defaulted pod has a spec")
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
        let c = &s.containers[0];
        assert_eq!(c.image_pull_policy.as_deref(), Some("IfNotPresent"));
        assert_eq!(
            c.termination_message_path.as_deref(),
            Some("/dev/termination-log")
        );
        assert_eq!(c.termination_message_policy.as_deref(), Some("File"));
        assert_eq!(c.resources, Some(ResourceRequirements::default()));
        // What admission and the API server's PrepareForCreate add is not defaulting: a pod
        // defaulted only here (a static pod on its node) has none of it.
        assert_eq!(s.service_account_name, None);
        assert_eq!(s.priority, None);
        assert_eq!(s.tolerations, None);
        assert_eq!(p.status, None);
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

    #[test]
    fn namespace_defaults() {
        let mut ns: Namespace =
            serde_json::from_value(json!({"metadata": {"name": "team-a"}})).expect("valid");
        set_defaults_namespace(&mut ns);
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
        set_defaults_namespace(&mut ns);
        assert_eq!(ns, again, "idempotent");

        let mut ns: Namespace = serde_json::from_value(json!({
            "metadata": {"name": "b", "labels": {"kubernetes.io/metadata.name": "spoofed", "team": "x"}},
            "status": {"phase": "Terminating"}})).expect("valid");
        set_defaults_namespace(&mut ns);
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
        set_defaults_namespace(&mut nameless);
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
        set_defaults_node(&mut node);
        let status = node.status.as_ref().expect("status");
        assert_eq!(status.allocatable, status.capacity);

        let mut node: Node = serde_json::from_value(json!({"metadata": {"name": "n1"},
            "status": {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "3500m"}}}))
        .expect("valid");
        set_defaults_node(&mut node);
        let allocatable = node
            .status
            .as_ref()
            .and_then(|s| s.allocatable.as_ref())
            .expect("allocatable");
        assert_eq!(allocatable.get("cpu"), Some(&Quantity("3500m".into())));

        let mut bare = Node::default();
        set_defaults_node(&mut bare);
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
            set_defaults_secret(&mut s);
            assert_eq!(s.type_.as_deref(), Some(want), "{given:?}");
        }
    }
}
