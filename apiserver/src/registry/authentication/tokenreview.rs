//! Mirrors pkg/registry/authentication/tokenreview/storage.go: "whose token is this?" — the
//! server's bearer token authenticators asked about `spec.token`, for `spec.audiences` (else the
//! API's): `status.authenticated`, the user (with `system:authenticated`), the audiences it was
//! checked for, or the error. What a component that takes tokens of its own asks (a node agent
//! about a caller of its API); `system:auth-delegator` holders and administrators may ask.

use k8s_openapi::api::authentication::v1::TokenReview;
use serde_json::{Map, Value, json};

use crate::authentication::token::TokenAuthenticator;
use crate::error::{Error, Result};
use crate::printers::tablegenerator::DefaultTableConvertor;
use crate::registry::generic::rest::ReviewRequest;
use crate::registry::generic::strategy::ResourceInfo;
use crate::registry::generic::typed::Typed;

pub static TOKENREVIEWS: ResourceInfo = ResourceInfo {
    group: "authentication.k8s.io",
    version: "v1",
    kind: "TokenReview",
    plural: "tokenreviews",
    singular: "tokenreview",
    namespaced: false,
    short_names: &[],
    storage_name: "",
    subresources: &[],
    categories: &[],
    codec: &Typed::<TokenReview>::NEW,
    printer: &DefaultTableConvertor,
};

/// The review, with its status.
pub fn create(r: &ReviewRequest<'_>, mut obj: Value) -> Result<Value> {
    let token = obj.pointer("/spec/token").and_then(Value::as_str).unwrap_or("").to_string();
    if token.is_empty() {
        return Err(Error::BadRequest("token is required for TokenReview in authentication.k8s.io".into()));
    }
    let asked: Vec<String> = obj.pointer("/spec/audiences").and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect()).unwrap_or_default();
    let audiences = if asked.is_empty() { r.authenticator.audiences.clone() } else { asked };
    let mut status = Map::new();
    match r.authenticator.tokens.authenticate_token(&token, &audiences) {
        Ok(Some(user)) => {
            status.insert("authenticated".into(), json!(true));
            status.insert("user".into(), user.with_authenticated_group().to_json());
            status.insert("audiences".into(), json!(audiences));
        }
        Ok(None) => {
            status.insert("user".into(), json!({}));
            status.insert("error".into(), json!("invalid bearer token"));
        }
        Err(e) => {
            status.insert("user".into(), json!({}));
            status.insert("error".into(), json!(e));
        }
    }
    obj["status"] = Value::Object(status);
    Ok(obj)
}
