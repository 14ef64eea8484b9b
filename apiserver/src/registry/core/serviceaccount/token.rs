//! Mirrors pkg/registry/core/serviceaccount/storage/token.go: `POST
//! serviceaccounts/<name>/token` (TokenRequest, `kubectl create token`): a token for the account,
//! for the audiences asked (else the API's), for `expirationSeconds` (3600 unless asked; at
//! least 10 minutes; at most `--service-account-max-token-expiration`), bound to a Pod or a
//! Secret of the namespace if asked — a pod must run as this account, and the token dies with
//! the object. Answered 201 with the TokenRequest, its status holding the token and when it
//! expires. A dry run answers without a token.

use apimachinery::validation::FieldError;
use futures::future::LocalBoxFuture;
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::registry::generic::options::WriteOptions;
use crate::registry::generic::rest::{RestRequest, SubresourceRest};
use crate::registry::generic::strategy::{ResourceInfo, causes};
use crate::registry::generic::store::now_rfc3339;
use crate::registry::generic::typed::Typed;
use crate::printers::tablegenerator::DefaultTableConvertor;
use crate::serviceaccount::claims::{Bound, claims};

/// The subresource the service account's own code serves.
pub const SUBRESOURCES: &[(&str, SubresourceRest)] = &[("token", SubresourceRest::Create(create))];

/// What a TokenRequest is, for its 422 (`TokenRequest.authentication.k8s.io "reader" is invalid`).
static TOKENREQUESTS: ResourceInfo = ResourceInfo {
    group: "authentication.k8s.io",
    version: "v1",
    kind: "TokenRequest",
    plural: "tokenrequests",
    singular: "tokenrequest",
    namespaced: true,
    short_names: &[],
    storage_name: "",
    subresources: &[],
    categories: &[],
    codec: &Typed::<k8s_openapi::api::authentication::v1::TokenRequest>::NEW,
    printer: &DefaultTableConvertor,
};

/// `SetDefaults_TokenRequestSpec`.
const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
const MIN_EXPIRATION_SECONDS: i64 = 10 * 60;
const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;

pub fn create(r: RestRequest<'_>, request: Value, opts: WriteOptions) -> LocalBoxFuture<'_, Result<Option<Value>>> {
    Box::pin(async move {
        let Some(issuer) = r.token_issuer else { return Err(Error::NoRoute) };
        let (namespace, name) = (r.namespace, r.name);
        let s = |p: &str| request.pointer(p).and_then(Value::as_str).unwrap_or("");
        if !s("/metadata/namespace").is_empty() && s("/metadata/namespace") != namespace {
            return Err(Error::BadRequest(format!("namespace of TokenRequest ({:?}) did not match namespace of ServiceAccount ({namespace:?})", s("/metadata/namespace"))));
        }
        if !s("/metadata/name").is_empty() && s("/metadata/name") != name {
            return Err(Error::BadRequest(format!("name of TokenRequest ({:?}) did not match name of ServiceAccount ({name:?})", s("/metadata/name"))));
        }
        let mut expiration = request.pointer("/spec/expirationSeconds").and_then(Value::as_i64).unwrap_or(DEFAULT_EXPIRATION_SECONDS);
        let errs = validate_expiration(expiration);
        if !errs.is_empty() {
            return Err(TOKENREQUESTS.invalid(name, causes(errs)));
        }
        if issuer.max_expiration_seconds > 0 {
            expiration = expiration.min(issuer.max_expiration_seconds);
        }
        let account = r.registry.get(Some(namespace), name).await?;
        let audiences: Vec<String> = match request.pointer("/spec/audiences").and_then(Value::as_array) {
            Some(a) if !a.is_empty() => a.iter().filter_map(Value::as_str).map(String::from).collect(),
            _ => issuer.audiences.clone(),
        };
        let bound_ref = request.pointer("/spec/boundObjectRef").filter(|b| b.is_object());
        let bound = match bound_ref {
            Some(b) => Some(bound_object(&r, b, name).await?),
            None => None,
        };
        let now = chrono::Utc::now().timestamp();
        let mut spec = json!({"audiences": audiences, "expirationSeconds": expiration});
        if let Some(b) = bound_ref {
            spec["boundObjectRef"] = b.clone();
        }
        let mut answer = json!({
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": now_rfc3339()},
            "spec": spec,
            "status": {"token": "", "expirationTimestamp": rfc3339(now + expiration)},
        });
        if opts.is_dry_run() {
            return Ok(Some(answer));
        }
        let bound = bound.as_ref().map(|(kind, bound_name, uid)| Bound { kind, name: bound_name, uid });
        let token = issuer.generator.generate_token(claims(&account, &audiences, now, expiration, bound)).map_err(Error::Internal)?;
        answer["status"]["token"] = json!(token);
        Ok(Some(answer))
    })
}

/// `ValidateTokenRequest`'s bounds on the token's life.
fn validate_expiration(seconds: i64) -> Vec<FieldError> {
    let field = "spec.expirationSeconds";
    if seconds < MIN_EXPIRATION_SECONDS {
        return vec![FieldError::invalid(field, &json!(seconds), "may not specify a duration less than 10 minutes")];
    }
    if seconds > MAX_EXPIRATION_SECONDS {
        return vec![FieldError::invalid(field, &json!(seconds), "may not specify a duration larger than 2^32 seconds")];
    }
    Vec::new()
}

/// The object a token is to be bound to — its kind, name and uid — as it is now: a Pod running
/// as the account, or a Secret, of the account's namespace.
async fn bound_object(r: &RestRequest<'_>, reference: &Value, account: &str) -> Result<(String, String, String)> {
    let s = |k: &str| reference.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let (kind, api_version, name, uid) = (s("kind"), s("apiVersion"), s("name"), s("uid"));
    let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
    let resource = match (group, kind.as_str()) {
        ("", "Pod") => "pods",
        ("", "Secret") => "secrets",
        _ => {
            let gvk = if group.is_empty() { format!("/{api_version}, Kind={kind}") } else { format!("{api_version}, Kind={kind}") };
            return Err(Error::BadRequest(format!("cannot bind token to object of type {gvk}")));
        }
    };
    let registry = r.registries.get("", "v1", resource).ok_or(Error::NoRoute)?;
    let object = registry.get(Some(r.namespace), &name).await?;
    if kind == "Pod" && object.pointer("/spec/serviceAccountName").and_then(Value::as_str) != Some(account) {
        return Err(Error::BadRequest(format!("cannot bind token for serviceaccount {account:?} to pod running with different serviceaccount name.")));
    }
    let actual = object.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("").to_string();
    if !uid.is_empty() && uid != actual {
        let message = format!("the UID in the bound object reference ({uid}) does not match the UID in record. The object might have been deleted and then recreated");
        return Err(Error::Conflict { kind, name, message });
    }
    Ok((kind, name, actual))
}

fn rfc3339(seconds: i64) -> String {
    chrono::DateTime::from_timestamp(seconds, 0).unwrap_or_default().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}
