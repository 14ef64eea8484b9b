//! Mirrors pkg/registry/authorization/selfsubjectrulesreview/rest.go: "what may I do in this
//! namespace?" (`kubectl auth can-i --list`) — the rules the authorizers can list for the
//! request's user in `spec.namespace` ([`crate::authorization::authorizer::Authorizer::rules_for`]).
//! The answer is the status alone: Kubernetes does not echo the spec. `incomplete` says an
//! authorizer may allow more than it listed; `evaluationError` names what could not be read (a
//! binding to a missing role).

use apimachinery::error::aggregate;
use k8s_openapi::api::authorization::v1::SelfSubjectRulesReview;
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::printers::tablegenerator::DefaultTableConvertor;
use crate::registry::generic::rest::ReviewRequest;
use crate::registry::generic::strategy::ResourceInfo;
use crate::registry::generic::typed::Typed;

pub static SELFSUBJECTRULESREVIEWS: ResourceInfo = ResourceInfo {
    group: "authorization.k8s.io",
    version: "v1",
    kind: "SelfSubjectRulesReview",
    plural: "selfsubjectrulesreviews",
    singular: "selfsubjectrulesreview",
    namespaced: false,
    short_names: &[],
    storage_name: "",
    subresources: &[],
    categories: &[],
    codec: &Typed::<SelfSubjectRulesReview>::NEW,
    printer: &DefaultTableConvertor,
};

/// The rules, as a new review holding only its status.
pub fn create(r: &ReviewRequest<'_>, obj: Value) -> Result<Value> {
    let namespace = obj.pointer("/spec/namespace").and_then(Value::as_str).unwrap_or("");
    if namespace.is_empty() {
        return Err(Error::BadRequest("no namespace on request".into()));
    }
    let rules = r.authorizer.rules_for(r.user, namespace);
    let mut status = json!({"resourceRules": rules.resource_rules, "nonResourceRules": rules.non_resource_rules, "incomplete": rules.incomplete});
    if !rules.evaluation_errors.is_empty() {
        status["evaluationError"] = json!(aggregate(&rules.evaluation_errors));
    }
    Ok(json!({"kind": "SelfSubjectRulesReview", "metadata": {}, "spec": {}, "status": status}))
}
