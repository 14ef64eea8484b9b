//! Mirrors k8s.io/api/apps/v1/generated.proto: the Deployment `kubectl create deployment` sends,
//! field numbers as in that file.
//!
//! Go holds `spec`, `status`, `template` and `strategy` as structs, not pointers: they are on the
//! wire and in the JSON even when empty. `replicas` is a `*int32`, so a present 0 is kept.

use serde_json::{Map, Value};

use super::core_v1::PodTemplateSpec;
use super::intstr::IntOrString;
use super::json::Fields;
use super::meta_v1::{LabelSelector, ObjectMeta};

/// `apps/v1.Deployment`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Deployment {
    #[prost(message, optional, tag = "1")]
    pub(super) metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub(super) spec: Option<DeploymentSpec>,
    #[prost(message, optional, tag = "3")]
    pub(super) status: Option<DeploymentStatus>,
}

impl Deployment {
    pub(super) fn to_json(&self) -> Map<String, Value> {
        let mut f = Fields::with_metadata(&self.metadata);
        f.message("spec", &self.spec, DeploymentSpec::to_json);
        f.message("status", &self.status, DeploymentStatus::to_json);
        f.0
    }
}

/// `apps/v1.DeploymentSpec`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct DeploymentSpec {
    #[prost(int32, optional, tag = "1")]
    pub(super) replicas: Option<i32>,
    #[prost(message, optional, tag = "2")]
    pub(super) selector: Option<LabelSelector>,
    #[prost(message, optional, tag = "3")]
    pub(super) template: Option<PodTemplateSpec>,
    #[prost(message, optional, tag = "4")]
    pub(super) strategy: Option<DeploymentStrategy>,
    #[prost(int32, optional, tag = "5")]
    pub(super) min_ready_seconds: Option<i32>,
    #[prost(int32, optional, tag = "6")]
    pub(super) revision_history_limit: Option<i32>,
    #[prost(bool, optional, tag = "7")]
    pub(super) paused: Option<bool>,
    #[prost(int32, optional, tag = "9")]
    pub(super) progress_deadline_seconds: Option<i32>,
}

impl DeploymentSpec {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.ptr_int("replicas", self.replicas.map(i64::from));
        f.message("selector", &self.selector, LabelSelector::to_json);
        f.message("template", &self.template, PodTemplateSpec::to_json);
        f.message("strategy", &self.strategy, DeploymentStrategy::to_json);
        f.int("minReadySeconds", self.min_ready_seconds.map(i64::from));
        f.ptr_int(
            "revisionHistoryLimit",
            self.revision_history_limit.map(i64::from),
        );
        f.bool("paused", self.paused);
        f.ptr_int(
            "progressDeadlineSeconds",
            self.progress_deadline_seconds.map(i64::from),
        );
        f.into_json()
    }
}

/// `apps/v1.DeploymentStrategy`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct DeploymentStrategy {
    #[prost(string, optional, tag = "1")]
    pub(super) r#type: Option<String>,
    #[prost(message, optional, tag = "2")]
    pub(super) rolling_update: Option<RollingUpdateDeployment>,
}

impl DeploymentStrategy {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.string("type", &self.r#type);
        f.message(
            "rollingUpdate",
            &self.rolling_update,
            RollingUpdateDeployment::to_json,
        );
        f.into_json()
    }
}

/// `apps/v1.RollingUpdateDeployment`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct RollingUpdateDeployment {
    #[prost(message, optional, tag = "1")]
    pub(super) max_unavailable: Option<IntOrString>,
    #[prost(message, optional, tag = "2")]
    pub(super) max_surge: Option<IntOrString>,
}

impl RollingUpdateDeployment {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.int_or_string("maxUnavailable", &self.max_unavailable);
        f.int_or_string("maxSurge", &self.max_surge);
        f.into_json()
    }
}

/// `apps/v1.DeploymentStatus`, without `conditions`. Its counters are plain integers in Go, so
/// even an empty status carries them on the wire (as zeros).
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct DeploymentStatus {
    #[prost(int64, optional, tag = "1")]
    pub(super) observed_generation: Option<i64>,
    #[prost(int32, optional, tag = "2")]
    pub(super) replicas: Option<i32>,
    #[prost(int32, optional, tag = "3")]
    pub(super) updated_replicas: Option<i32>,
    #[prost(int32, optional, tag = "4")]
    pub(super) available_replicas: Option<i32>,
    #[prost(int32, optional, tag = "5")]
    pub(super) unavailable_replicas: Option<i32>,
    #[prost(int32, optional, tag = "7")]
    pub(super) ready_replicas: Option<i32>,
    #[prost(int32, optional, tag = "8")]
    pub(super) collision_count: Option<i32>,
    #[prost(int32, optional, tag = "9")]
    pub(super) terminating_replicas: Option<i32>,
}

impl DeploymentStatus {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.int("observedGeneration", self.observed_generation);
        f.int("replicas", self.replicas.map(i64::from));
        f.int("updatedReplicas", self.updated_replicas.map(i64::from));
        f.int("readyReplicas", self.ready_replicas.map(i64::from));
        f.int("availableReplicas", self.available_replicas.map(i64::from));
        f.int(
            "unavailableReplicas",
            self.unavailable_replicas.map(i64::from),
        );
        f.ptr_int(
            "terminatingReplicas",
            self.terminating_replicas.map(i64::from),
        );
        f.ptr_int("collisionCount", self.collision_count.map(i64::from));
        f.into_json()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::super::core_v1::tests::{go_container, go_pod_spec, quantity};
    use super::super::core_v1::{ContainerPort, EnvVar, ResourceRequirements};
    use super::super::intstr::tests::{int, string};
    use super::super::meta_v1::LabelSelectorRequirement;
    use super::super::meta_v1::tests::go_meta;
    use super::super::tests::{body, decode_ok};
    use super::*;

    #[test]
    fn deployment_with_rolling_update_resources_and_zero_replicas() {
        let labels = BTreeMap::from([("app".to_string(), "web".to_string())]);
        let container = super::super::core_v1::Container {
            ports: vec![ContainerPort {
                name: Some("http".into()),
                host_port: Some(0),
                container_port: Some(8080),
                protocol: Some("TCP".into()),
                host_ip: Some(String::new()),
            }],
            env: vec![
                EnvVar {
                    name: Some("MODE".into()),
                    value: Some("prod".into()),
                },
                EnvVar {
                    name: Some("EMPTY".into()),
                    value: Some(String::new()),
                },
            ],
            resources: Some(ResourceRequirements {
                limits: BTreeMap::from([
                    ("cpu".into(), quantity("500m")),
                    ("memory".into(), quantity("64Mi")),
                ]),
                requests: BTreeMap::from([("cpu".into(), quantity("250m"))]),
                claims: vec![],
            }),
            ..go_container("web", "nginx:1.27")
        };
        let deployment = Deployment {
            metadata: Some(ObjectMeta {
                labels: labels.clone(),
                ..go_meta("web")
            }),
            spec: Some(DeploymentSpec {
                replicas: Some(0),
                selector: Some(LabelSelector {
                    match_labels: labels.clone(),
                    match_expressions: vec![LabelSelectorRequirement {
                        key: Some("tier".into()),
                        operator: Some("In".into()),
                        values: vec!["front".into(), "edge".into()],
                    }],
                }),
                template: Some(PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels,
                        ..go_meta("")
                    }),
                    spec: Some(super::super::core_v1::PodSpec {
                        host_network: Some(true),
                        termination_grace_period_seconds: Some(0),
                        node_selector: BTreeMap::from([("disk".into(), "ssd".into())]),
                        ..go_pod_spec(vec![container])
                    }),
                }),
                strategy: Some(DeploymentStrategy {
                    r#type: Some("RollingUpdate".into()),
                    rolling_update: Some(RollingUpdateDeployment {
                        max_unavailable: Some(string("25%")),
                        max_surge: Some(int(1)),
                    }),
                }),
                min_ready_seconds: Some(0),
                revision_history_limit: Some(10),
                paused: Some(false),
                progress_deadline_seconds: Some(600),
            }),
            status: Some(DeploymentStatus {
                observed_generation: Some(2),
                replicas: Some(1),
                updated_replicas: Some(0),
                available_replicas: Some(0),
                unavailable_replicas: Some(1),
                ready_replicas: Some(0),
                collision_count: Some(0),
                terminating_replicas: None,
            }),
        };
        assert_eq!(
            decode_ok(&body("apps/v1", "Deployment", &deployment)),
            json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "labels": {"app": "web"}},
                "spec": {
                    "replicas": 0,
                    "selector": {"matchLabels": {"app": "web"},
                                 "matchExpressions": [{"key": "tier", "operator": "In",
                                                       "values": ["front", "edge"]}]},
                    "template": {
                        "metadata": {"labels": {"app": "web"}},
                        "spec": {
                            "containers": [{
                                "name": "web", "image": "nginx:1.27",
                                "ports": [{"name": "http", "containerPort": 8080,
                                           "protocol": "TCP"}],
                                "env": [{"name": "MODE", "value": "prod"}, {"name": "EMPTY"}],
                                "resources": {"limits": {"cpu": "500m", "memory": "64Mi"},
                                              "requests": {"cpu": "250m"}},
                            }],
                            "hostNetwork": true,
                            "terminationGracePeriodSeconds": 0,
                            "nodeSelector": {"disk": "ssd"},
                        },
                    },
                    "strategy": {"type": "RollingUpdate",
                                 "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 1}},
                    "revisionHistoryLimit": 10,
                    "progressDeadlineSeconds": 600,
                },
                "status": {"observedGeneration": 2, "replicas": 1, "unavailableReplicas": 1,
                           "collisionCount": 0},
            })
        );
    }
}
