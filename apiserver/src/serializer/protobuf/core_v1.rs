//! Mirrors k8s.io/api/core/v1/generated.proto: the messages of the kinds kubectl's typed
//! generators send (`kubectl create namespace|configmap|secret|serviceaccount|service`, `kubectl expose`) and the pod
//! template inside the workloads they send (`kubectl create deployment|job|cronjob`), field
//! numbers as in that file.
//!
//! The pod template is modelled only in part: what kubectl's generators fill in, what the server's
//! defaulting adds (a `job --from=cronjob/x` sends the CronJob's defaulted template back), and the
//! other plain scalars, strings and maps of PodSpec and Container. Nested structures (volumes,
//! probes, affinity, tolerations, a container's securityContext, env `valueFrom`…) are not:
//! prost would drop them silently, so `decode` refuses a workload whose bytes do not round-trip.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::intstr::IntOrString;
use super::json::Fields;
use super::meta_v1::ObjectMeta;
use super::resource::Quantity;

/// `v1.Namespace`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Namespace {
    #[prost(message, optional, tag = "1")]
    pub(super) metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub(super) spec: Option<NamespaceSpec>,
    #[prost(message, optional, tag = "3")]
    pub(super) status: Option<NamespaceStatus>,
}

impl Namespace {
    pub(super) fn to_json(&self) -> Map<String, Value> {
        let mut f = Fields::with_metadata(&self.metadata);
        // Go writes struct-valued spec and status even when empty (`"spec": {}`); so do we.
        f.message("spec", &self.spec, NamespaceSpec::to_json);
        f.message("status", &self.status, NamespaceStatus::to_json);
        f.0
    }
}

/// `v1.NamespaceSpec`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct NamespaceSpec {
    #[prost(string, repeated, tag = "1")]
    pub(super) finalizers: Vec<String>,
}

impl NamespaceSpec {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.strings("finalizers", &self.finalizers);
        f.into_json()
    }
}

/// `v1.NamespaceStatus` (field 2, conditions, is skipped: the namespace controller writes it).
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct NamespaceStatus {
    #[prost(string, optional, tag = "1")]
    pub(super) phase: Option<String>,
}

impl NamespaceStatus {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.string("phase", &self.phase);
        f.into_json()
    }
}

/// `v1.ConfigMap`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ConfigMap {
    #[prost(message, optional, tag = "1")]
    pub(super) metadata: Option<ObjectMeta>,
    #[prost(bool, optional, tag = "4")]
    pub(super) immutable: Option<bool>,
    #[prost(btree_map = "string, string", tag = "2")]
    pub(super) data: BTreeMap<String, String>,
    #[prost(btree_map = "string, bytes", tag = "3")]
    pub(super) binary_data: BTreeMap<String, Vec<u8>>,
}

impl ConfigMap {
    pub(super) fn to_json(&self) -> Map<String, Value> {
        let mut f = Fields::with_metadata(&self.metadata);
        f.ptr_bool("immutable", self.immutable);
        f.string_map("data", &self.data);
        f.bytes_map("binaryData", &self.binary_data);
        f.0
    }
}

/// `v1.Secret`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Secret {
    #[prost(message, optional, tag = "1")]
    pub(super) metadata: Option<ObjectMeta>,
    #[prost(bool, optional, tag = "5")]
    pub(super) immutable: Option<bool>,
    #[prost(btree_map = "string, bytes", tag = "2")]
    pub(super) data: BTreeMap<String, Vec<u8>>,
    #[prost(btree_map = "string, string", tag = "4")]
    pub(super) string_data: BTreeMap<String, String>,
    #[prost(string, optional, tag = "3")]
    pub(super) r#type: Option<String>,
}

impl Secret {
    pub(super) fn to_json(&self) -> Map<String, Value> {
        let mut f = Fields::with_metadata(&self.metadata);
        f.ptr_bool("immutable", self.immutable);
        f.bytes_map("data", &self.data);
        f.string_map("stringData", &self.string_data);
        f.string("type", &self.r#type);
        f.0
    }
}

/// `v1.ServiceAccount`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ServiceAccount {
    #[prost(message, optional, tag = "1")]
    pub(super) metadata: Option<ObjectMeta>,
    #[prost(message, repeated, tag = "2")]
    pub(super) secrets: Vec<ObjectReference>,
    #[prost(message, repeated, tag = "3")]
    pub(super) image_pull_secrets: Vec<LocalObjectReference>,
    #[prost(bool, optional, tag = "4")]
    pub(super) automount_service_account_token: Option<bool>,
}

impl ServiceAccount {
    pub(super) fn to_json(&self) -> Map<String, Value> {
        let mut f = Fields::with_metadata(&self.metadata);
        f.list("secrets", &self.secrets, ObjectReference::to_json);
        f.list(
            "imagePullSecrets",
            &self.image_pull_secrets,
            LocalObjectReference::to_json,
        );
        f.ptr_bool(
            "automountServiceAccountToken",
            self.automount_service_account_token,
        );
        f.0
    }
}

/// `v1.ObjectReference`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ObjectReference {
    #[prost(string, optional, tag = "1")]
    pub(super) kind: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub(super) namespace: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub(super) name: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub(super) uid: Option<String>,
    #[prost(string, optional, tag = "5")]
    pub(super) api_version: Option<String>,
    #[prost(string, optional, tag = "6")]
    pub(super) resource_version: Option<String>,
    #[prost(string, optional, tag = "7")]
    pub(super) field_path: Option<String>,
}

impl ObjectReference {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.string("kind", &self.kind);
        f.string("namespace", &self.namespace);
        f.string("name", &self.name);
        f.string("uid", &self.uid);
        f.string("apiVersion", &self.api_version);
        f.string("resourceVersion", &self.resource_version);
        f.string("fieldPath", &self.field_path);
        f.into_json()
    }
}

/// `v1.LocalObjectReference`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct LocalObjectReference {
    #[prost(string, optional, tag = "1")]
    pub(super) name: Option<String>,
}

impl LocalObjectReference {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.string("name", &self.name);
        f.into_json()
    }
}

/// `v1.PodTemplateSpec`: a workload's `template`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct PodTemplateSpec {
    #[prost(message, optional, tag = "1")]
    pub(super) metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub(super) spec: Option<PodSpec>,
}

impl PodTemplateSpec {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::with_metadata(&self.metadata);
        f.message("spec", &self.spec, PodSpec::to_json);
        f.into_json()
    }
}

/// `v1.PodSpec`, in part (see the module docs). `hostNetwork`, `hostPID` and `hostIPC` are plain
/// `bool`s in Go, so Go writes them to protobuf even when false.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct PodSpec {
    #[prost(message, repeated, tag = "2")]
    pub(super) containers: Vec<Container>,
    #[prost(string, optional, tag = "3")]
    pub(super) restart_policy: Option<String>,
    #[prost(int64, optional, tag = "4")]
    pub(super) termination_grace_period_seconds: Option<i64>,
    #[prost(int64, optional, tag = "5")]
    pub(super) active_deadline_seconds: Option<i64>,
    #[prost(string, optional, tag = "6")]
    pub(super) dns_policy: Option<String>,
    #[prost(btree_map = "string, string", tag = "7")]
    pub(super) node_selector: BTreeMap<String, String>,
    #[prost(string, optional, tag = "8")]
    pub(super) service_account_name: Option<String>,
    #[prost(string, optional, tag = "9")]
    pub(super) service_account: Option<String>,
    #[prost(string, optional, tag = "10")]
    pub(super) node_name: Option<String>,
    #[prost(bool, optional, tag = "11")]
    pub(super) host_network: Option<bool>,
    #[prost(bool, optional, tag = "12")]
    pub(super) host_pid: Option<bool>,
    #[prost(bool, optional, tag = "13")]
    pub(super) host_ipc: Option<bool>,
    #[prost(message, optional, tag = "14")]
    pub(super) security_context: Option<PodSecurityContext>,
    #[prost(message, repeated, tag = "15")]
    pub(super) image_pull_secrets: Vec<LocalObjectReference>,
    #[prost(string, optional, tag = "16")]
    pub(super) hostname: Option<String>,
    #[prost(string, optional, tag = "17")]
    pub(super) subdomain: Option<String>,
    #[prost(string, optional, tag = "19")]
    pub(super) scheduler_name: Option<String>,
    #[prost(message, repeated, tag = "20")]
    pub(super) init_containers: Vec<Container>,
    #[prost(bool, optional, tag = "21")]
    pub(super) automount_service_account_token: Option<bool>,
    #[prost(string, optional, tag = "24")]
    pub(super) priority_class_name: Option<String>,
    #[prost(int32, optional, tag = "25")]
    pub(super) priority: Option<i32>,
    #[prost(bool, optional, tag = "27")]
    pub(super) share_process_namespace: Option<bool>,
    #[prost(string, optional, tag = "29")]
    pub(super) runtime_class_name: Option<String>,
    #[prost(bool, optional, tag = "30")]
    pub(super) enable_service_links: Option<bool>,
    #[prost(string, optional, tag = "31")]
    pub(super) preemption_policy: Option<String>,
    #[prost(btree_map = "string, message", tag = "32")]
    pub(super) overhead: BTreeMap<String, Quantity>,
    #[prost(bool, optional, tag = "35")]
    pub(super) set_hostname_as_fqdn: Option<bool>,
    #[prost(bool, optional, tag = "37")]
    pub(super) host_users: Option<bool>,
    #[prost(message, optional, tag = "40")]
    pub(super) resources: Option<ResourceRequirements>,
    #[prost(string, optional, tag = "41")]
    pub(super) hostname_override: Option<String>,
}

impl PodSpec {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.list("initContainers", &self.init_containers, Container::to_json);
        f.required_list("containers", &self.containers, Container::to_json);
        f.string("restartPolicy", &self.restart_policy);
        f.ptr_int(
            "terminationGracePeriodSeconds",
            self.termination_grace_period_seconds,
        );
        f.ptr_int("activeDeadlineSeconds", self.active_deadline_seconds);
        f.string("dnsPolicy", &self.dns_policy);
        f.string_map("nodeSelector", &self.node_selector);
        f.string("serviceAccountName", &self.service_account_name);
        f.string("serviceAccount", &self.service_account);
        f.ptr_bool(
            "automountServiceAccountToken",
            self.automount_service_account_token,
        );
        f.string("nodeName", &self.node_name);
        f.bool("hostNetwork", self.host_network);
        f.bool("hostPID", self.host_pid);
        f.bool("hostIPC", self.host_ipc);
        f.ptr_bool("shareProcessNamespace", self.share_process_namespace);
        f.message(
            "securityContext",
            &self.security_context,
            PodSecurityContext::to_json,
        );
        f.list(
            "imagePullSecrets",
            &self.image_pull_secrets,
            LocalObjectReference::to_json,
        );
        f.string("hostname", &self.hostname);
        f.string("subdomain", &self.subdomain);
        f.string("schedulerName", &self.scheduler_name);
        f.string("priorityClassName", &self.priority_class_name);
        f.ptr_int("priority", self.priority.map(i64::from));
        f.ptr_string("runtimeClassName", &self.runtime_class_name);
        f.ptr_bool("enableServiceLinks", self.enable_service_links);
        f.ptr_string("preemptionPolicy", &self.preemption_policy);
        f.map("overhead", &self.overhead, Quantity::to_json);
        f.ptr_bool("setHostnameAsFQDN", self.set_hostname_as_fqdn);
        f.ptr_bool("hostUsers", self.host_users);
        f.message("resources", &self.resources, ResourceRequirements::to_json);
        f.ptr_string("hostnameOverride", &self.hostname_override);
        f.into_json()
    }
}

/// `v1.PodSecurityContext`, its scalar fields (the server's defaulting adds an empty one to every
/// pod template, so a CronJob read back carries it).
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct PodSecurityContext {
    #[prost(int64, optional, tag = "2")]
    pub(super) run_as_user: Option<i64>,
    #[prost(bool, optional, tag = "3")]
    pub(super) run_as_non_root: Option<bool>,
    #[prost(int64, repeated, packed = "false", tag = "4")]
    pub(super) supplemental_groups: Vec<i64>,
    #[prost(int64, optional, tag = "5")]
    pub(super) fs_group: Option<i64>,
    #[prost(int64, optional, tag = "6")]
    pub(super) run_as_group: Option<i64>,
    #[prost(string, optional, tag = "9")]
    pub(super) fs_group_change_policy: Option<String>,
    #[prost(string, optional, tag = "12")]
    pub(super) supplemental_groups_policy: Option<String>,
    #[prost(string, optional, tag = "13")]
    pub(super) se_linux_change_policy: Option<String>,
}

impl PodSecurityContext {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.ptr_int("runAsUser", self.run_as_user);
        f.ptr_int("runAsGroup", self.run_as_group);
        f.ptr_bool("runAsNonRoot", self.run_as_non_root);
        f.ints("supplementalGroups", &self.supplemental_groups);
        f.ptr_string("supplementalGroupsPolicy", &self.supplemental_groups_policy);
        f.ptr_int("fsGroup", self.fs_group);
        f.ptr_string("fsGroupChangePolicy", &self.fs_group_change_policy);
        f.ptr_string("seLinuxChangePolicy", &self.se_linux_change_policy);
        f.into_json()
    }
}

/// `v1.Container`, in part (see the module docs). `resources` is a struct, not a pointer, in Go:
/// it is on the wire and in the JSON even when empty.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Container {
    #[prost(string, optional, tag = "1")]
    pub(super) name: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub(super) image: Option<String>,
    #[prost(string, repeated, tag = "3")]
    pub(super) command: Vec<String>,
    #[prost(string, repeated, tag = "4")]
    pub(super) args: Vec<String>,
    #[prost(string, optional, tag = "5")]
    pub(super) working_dir: Option<String>,
    #[prost(message, repeated, tag = "6")]
    pub(super) ports: Vec<ContainerPort>,
    #[prost(message, repeated, tag = "7")]
    pub(super) env: Vec<EnvVar>,
    #[prost(message, optional, tag = "8")]
    pub(super) resources: Option<ResourceRequirements>,
    #[prost(string, optional, tag = "13")]
    pub(super) termination_message_path: Option<String>,
    #[prost(string, optional, tag = "14")]
    pub(super) image_pull_policy: Option<String>,
    #[prost(bool, optional, tag = "16")]
    pub(super) stdin: Option<bool>,
    #[prost(bool, optional, tag = "17")]
    pub(super) stdin_once: Option<bool>,
    #[prost(bool, optional, tag = "18")]
    pub(super) tty: Option<bool>,
    #[prost(string, optional, tag = "20")]
    pub(super) termination_message_policy: Option<String>,
    #[prost(string, optional, tag = "24")]
    pub(super) restart_policy: Option<String>,
}

impl Container {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.required_string("name", &self.name);
        f.string("image", &self.image);
        f.strings("command", &self.command);
        f.strings("args", &self.args);
        f.string("workingDir", &self.working_dir);
        f.list("ports", &self.ports, ContainerPort::to_json);
        f.list("env", &self.env, EnvVar::to_json);
        f.message("resources", &self.resources, ResourceRequirements::to_json);
        f.ptr_string("restartPolicy", &self.restart_policy);
        f.string("terminationMessagePath", &self.termination_message_path);
        f.string("terminationMessagePolicy", &self.termination_message_policy);
        f.string("imagePullPolicy", &self.image_pull_policy);
        f.bool("stdin", self.stdin);
        f.bool("stdinOnce", self.stdin_once);
        f.bool("tty", self.tty);
        f.into_json()
    }
}

/// `v1.ContainerPort`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ContainerPort {
    #[prost(string, optional, tag = "1")]
    pub(super) name: Option<String>,
    #[prost(int32, optional, tag = "2")]
    pub(super) host_port: Option<i32>,
    #[prost(int32, optional, tag = "3")]
    pub(super) container_port: Option<i32>,
    #[prost(string, optional, tag = "4")]
    pub(super) protocol: Option<String>,
    #[prost(string, optional, tag = "5")]
    pub(super) host_ip: Option<String>,
}

impl ContainerPort {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.string("name", &self.name);
        f.int("hostPort", self.host_port.map(i64::from));
        f.required_int("containerPort", self.container_port.map(i64::from));
        f.string("protocol", &self.protocol);
        f.string("hostIP", &self.host_ip);
        f.into_json()
    }
}

/// `v1.EnvVar`, without `valueFrom` (a nested source: such a body does not round-trip).
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct EnvVar {
    #[prost(string, optional, tag = "1")]
    pub(super) name: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub(super) value: Option<String>,
}

impl EnvVar {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.required_string("name", &self.name);
        f.string("value", &self.value);
        f.into_json()
    }
}

/// `v1.ResourceRequirements`: limits and requests map resource names to quantities.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ResourceRequirements {
    #[prost(btree_map = "string, message", tag = "1")]
    pub(super) limits: BTreeMap<String, Quantity>,
    #[prost(btree_map = "string, message", tag = "2")]
    pub(super) requests: BTreeMap<String, Quantity>,
    #[prost(message, repeated, tag = "3")]
    pub(super) claims: Vec<ResourceClaim>,
}

impl ResourceRequirements {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.map("limits", &self.limits, Quantity::to_json);
        f.map("requests", &self.requests, Quantity::to_json);
        f.list("claims", &self.claims, ResourceClaim::to_json);
        f.into_json()
    }
}

/// `v1.ResourceClaim`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ResourceClaim {
    #[prost(string, optional, tag = "1")]
    pub(super) name: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub(super) request: Option<String>,
}

impl ResourceClaim {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.required_string("name", &self.name);
        f.string("request", &self.request);
        f.into_json()
    }
}

// Here rather than with the other rules in json.rs: every kind of this file starts with its
// metadata.
impl Fields {
    /// Every object kind starts with `metadata`, which Go writes even when empty.
    pub(super) fn with_metadata(metadata: &Option<ObjectMeta>) -> Self {
        let mut f = Fields::default();
        let metadata = metadata
            .as_ref()
            .map_or_else(|| Value::Object(Map::new()), ObjectMeta::to_json);
        f.0.insert("metadata".into(), metadata);
        f
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// `Container{Name: name, Image: image}` as Go marshals it (plain strings and bools written,
    /// `resources` as an empty message).
    pub(in super::super) fn go_container(name: &str, image: &str) -> Container {
        Container {
            name: Some(name.into()),
            image: Some(image.into()),
            working_dir: Some(String::new()),
            resources: Some(ResourceRequirements::default()),
            termination_message_path: Some(String::new()),
            image_pull_policy: Some(String::new()),
            stdin: Some(false),
            stdin_once: Some(false),
            tty: Some(false),
            termination_message_policy: Some(String::new()),
            ..Default::default()
        }
    }

    /// `PodSpec{Containers: containers}` as Go marshals it.
    pub(in super::super) fn go_pod_spec(containers: Vec<Container>) -> PodSpec {
        PodSpec {
            containers,
            restart_policy: Some(String::new()),
            dns_policy: Some(String::new()),
            service_account_name: Some(String::new()),
            service_account: Some(String::new()),
            node_name: Some(String::new()),
            host_network: Some(false),
            host_pid: Some(false),
            host_ipc: Some(false),
            hostname: Some(String::new()),
            subdomain: Some(String::new()),
            scheduler_name: Some(String::new()),
            priority_class_name: Some(String::new()),
            ..Default::default()
        }
    }

    /// A `resource.Quantity`.
    pub(in super::super) fn quantity(text: &str) -> Quantity {
        Quantity {
            string: Some(text.into()),
        }
    }
}

/// `v1.Service` (`kubectl create service`, `kubectl expose`): modelled whole but for the status'
/// load-balancer ingress and conditions, which a client never sends; `decode` refuses one whose
/// bytes do not round-trip.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Service {
    #[prost(message, optional, tag = "1")]
    pub(super) metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub(super) spec: Option<ServiceSpec>,
    #[prost(message, optional, tag = "3")]
    pub(super) status: Option<ServiceStatus>,
}

impl Service {
    pub(super) fn to_json(&self) -> Map<String, Value> {
        let mut f = Fields::with_metadata(&self.metadata);
        f.message("spec", &self.spec, ServiceSpec::to_json);
        f.message("status", &self.status, |_| Value::Object(Map::new()));
        f.0
    }
}

/// `v1.ServiceSpec`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ServiceSpec {
    #[prost(message, repeated, tag = "1")]
    pub(super) ports: Vec<ServicePort>,
    #[prost(btree_map = "string, string", tag = "2")]
    pub(super) selector: BTreeMap<String, String>,
    #[prost(string, optional, tag = "3")]
    pub(super) cluster_ip: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub(super) r#type: Option<String>,
    #[prost(string, repeated, tag = "5")]
    pub(super) external_ips: Vec<String>,
    #[prost(string, optional, tag = "7")]
    pub(super) session_affinity: Option<String>,
    #[prost(string, optional, tag = "8")]
    pub(super) load_balancer_ip: Option<String>,
    #[prost(string, repeated, tag = "9")]
    pub(super) load_balancer_source_ranges: Vec<String>,
    #[prost(string, optional, tag = "10")]
    pub(super) external_name: Option<String>,
    #[prost(string, optional, tag = "11")]
    pub(super) external_traffic_policy: Option<String>,
    #[prost(int32, optional, tag = "12")]
    pub(super) health_check_node_port: Option<i32>,
    #[prost(bool, optional, tag = "13")]
    pub(super) publish_not_ready_addresses: Option<bool>,
    #[prost(message, optional, tag = "14")]
    pub(super) session_affinity_config: Option<SessionAffinityConfig>,
    #[prost(string, optional, tag = "17")]
    pub(super) ip_family_policy: Option<String>,
    #[prost(string, repeated, tag = "18")]
    pub(super) cluster_ips: Vec<String>,
    #[prost(string, repeated, tag = "19")]
    pub(super) ip_families: Vec<String>,
    #[prost(bool, optional, tag = "20")]
    pub(super) allocate_load_balancer_node_ports: Option<bool>,
    #[prost(string, optional, tag = "21")]
    pub(super) load_balancer_class: Option<String>,
    #[prost(string, optional, tag = "22")]
    pub(super) internal_traffic_policy: Option<String>,
    #[prost(string, optional, tag = "23")]
    pub(super) traffic_distribution: Option<String>,
}

impl ServiceSpec {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.list("ports", &self.ports, ServicePort::to_json);
        f.string_map("selector", &self.selector);
        f.string("clusterIP", &self.cluster_ip);
        f.strings("clusterIPs", &self.cluster_ips);
        f.string("type", &self.r#type);
        f.strings("externalIPs", &self.external_ips);
        f.string("sessionAffinity", &self.session_affinity);
        f.string("loadBalancerIP", &self.load_balancer_ip);
        f.strings("loadBalancerSourceRanges", &self.load_balancer_source_ranges);
        f.string("externalName", &self.external_name);
        f.string("externalTrafficPolicy", &self.external_traffic_policy);
        f.int("healthCheckNodePort", self.health_check_node_port.map(i64::from));
        f.bool("publishNotReadyAddresses", self.publish_not_ready_addresses);
        f.message("sessionAffinityConfig", &self.session_affinity_config, SessionAffinityConfig::to_json);
        f.strings("ipFamilies", &self.ip_families);
        f.ptr_string("ipFamilyPolicy", &self.ip_family_policy);
        f.ptr_bool("allocateLoadBalancerNodePorts", self.allocate_load_balancer_node_ports);
        f.ptr_string("loadBalancerClass", &self.load_balancer_class);
        f.ptr_string("internalTrafficPolicy", &self.internal_traffic_policy);
        f.ptr_string("trafficDistribution", &self.traffic_distribution);
        f.into_json()
    }
}

/// `v1.ServicePort`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ServicePort {
    #[prost(string, optional, tag = "1")]
    pub(super) name: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub(super) protocol: Option<String>,
    #[prost(int32, optional, tag = "3")]
    pub(super) port: Option<i32>,
    #[prost(message, optional, tag = "4")]
    pub(super) target_port: Option<IntOrString>,
    #[prost(int32, optional, tag = "5")]
    pub(super) node_port: Option<i32>,
    #[prost(string, optional, tag = "6")]
    pub(super) app_protocol: Option<String>,
}

impl ServicePort {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.string("name", &self.name);
        f.string("protocol", &self.protocol);
        f.ptr_string("appProtocol", &self.app_protocol);
        f.required_int("port", self.port.map(i64::from));
        // `targetPort` has omitempty: Go leaves out its zero value (the int 0).
        if let Some(t) = self.target_port.as_ref().filter(|t| t.to_json() != Value::from(0)) {
            f.put("targetPort", t.to_json());
        }
        f.int("nodePort", self.node_port.map(i64::from));
        f.into_json()
    }
}

/// `v1.SessionAffinityConfig`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct SessionAffinityConfig {
    #[prost(message, optional, tag = "1")]
    pub(super) client_ip: Option<ClientIpConfig>,
}

impl SessionAffinityConfig {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.message("clientIP", &self.client_ip, |c: &ClientIpConfig| {
            let mut f = Fields::default();
            f.ptr_int("timeoutSeconds", c.timeout_seconds.map(i64::from));
            f.into_json()
        });
        f.into_json()
    }
}

/// `v1.ClientIPConfig`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ClientIpConfig {
    #[prost(int32, optional, tag = "1")]
    pub(super) timeout_seconds: Option<i32>,
}

/// `v1.ServiceStatus`: what a client sends is empty (its `loadBalancer`, an empty message).
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ServiceStatus {
    #[prost(message, optional, tag = "1")]
    pub(super) load_balancer: Option<LoadBalancerStatus>,
}

/// `v1.LoadBalancerStatus`, as a client sends it: without ingress points.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct LoadBalancerStatus {}
