//! Mirrors k8s.io/api/core/v1/generated.proto: the messages of the kinds kubectl's typed
//! generators send (`kubectl create namespace|configmap|secret|serviceaccount`), field numbers as
//! in that file.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::json::Fields;
use super::meta_v1::ObjectMeta;

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
