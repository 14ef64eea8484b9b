//! Mirrors k8s.io/apimachinery/pkg/api/errors/errors.go: the API server's errors, and their one
//! wire form, a `metav1.Status`. Handlers return `Error`; the HTTP edge turns it into a Status with
//! the HTTP code, reason and details kubectl expects.

use serde_json::{Value, json};

/// One cause of a 422 Invalid (a field and what is wrong with it).
#[derive(Debug, Clone, PartialEq)]
pub struct Cause {
    pub field: String,
    pub reason: String,
    pub message: String,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{kind} \"{name}\" not found")]
    NotFound { kind: String, name: String },
    #[error("{kind} \"{name}\" already exists")]
    AlreadyExists { kind: String, name: String },
    #[error("Operation cannot be fulfilled on {kind} \"{name}\": {message}")]
    Conflict { kind: String, name: String, message: String },
    #[error("{kind_singular} \"{name}\" is invalid: {}", summarize(.causes))]
    Invalid { kind: String, kind_singular: String, name: String, causes: Vec<Cause> },
    #[error("{0}")]
    BadRequest(String),
    /// A well-formed request that cannot be carried out (a JSON patch whose test fails).
    #[error("{0}")]
    Unprocessable(String),
    #[error("{0}")]
    Forbidden(String),
    /// The request's credentials name nobody (or there are none and anonymous requests are off).
    #[error("Unauthorized")]
    Unauthorized,
    /// The authorizers did not allow the request (`responsewriters.Forbidden`): the message names
    /// the user, the verb and what it was asked on, as kube-apiserver words it.
    #[error("{message}")]
    ForbiddenRequest { group: String, resource: String, name: String, message: String },
    #[error("{0}")]
    MethodNotAllowed(String),
    #[error("the body of the request was in an unknown format - accepted media types include: {0}")]
    UnsupportedMediaType(String),
    /// Nothing the client offered in `Accept` can be written.
    #[error("only the following media types are accepted: {0}")]
    NotAcceptable(String),
    #[error("the server could not find the requested resource")]
    NoRoute,
    /// The body is larger than `--max-request-bytes`, or the object larger than the store takes
    /// (etcd's `--max-request-bytes`, kubelab store's gRPC message limit): 413.
    #[error("Request entity too large: {0}")]
    TooLarge(String),
    #[error("too old resource version: {requested} ({oldest})")]
    Expired { requested: i64, oldest: i64 },
    #[error("{0}")]
    Gone(String),
    /// 429: try again later. `causes` say why (an eviction refused by a disruption budget: reason
    /// `DisruptionBudget`); `retry_after_seconds` > 0 goes into the Status and a `Retry-After`
    /// header, as Kubernetes' NewTooManyRequests does.
    #[error("{message}")]
    TooManyRequests { message: String, causes: Vec<Cause>, retry_after_seconds: u32 },
    /// The request did not finish in time (its handler may still finish the work).
    #[error("Timeout: {0}")]
    Timeout(String),
    /// The store did not answer or failed: 503, and the server recovers when it returns.
    #[error("storage is unavailable: {0}")]
    Unavailable(String),
    /// A proxied backend cannot be reached or chosen (errors.NewServiceUnavailable): 503.
    #[error("{0}")]
    ServiceUnavailable(String),
    #[error("{0}")]
    Internal(String),
}

impl Cause {
    /// A metav1.StatusCause: `field` only when there is one (Go's omitempty).
    fn to_json(&self) -> Value {
        let mut c = json!({"reason": self.reason, "message": self.message});
        if !self.field.is_empty() {
            c["field"] = json!(self.field);
        }
        c
    }
}

fn summarize(causes: &[Cause]) -> String {
    let parts: Vec<String> = causes.iter().map(|c| if c.field.is_empty() { c.message.clone() } else { format!("{}: {}", c.field, c.message) }).collect();
    if parts.len() == 1 { parts[0].clone() } else { format!("[{}]", parts.join(", ")) }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A 429 with only a message.
    pub fn too_many_requests(message: impl Into<String>) -> Self {
        Error::TooManyRequests { message: message.into(), causes: Vec::new(), retry_after_seconds: 0 }
    }

    /// The `Retry-After` header's seconds, when the error suggests a wait.
    pub fn retry_after_seconds(&self) -> Option<u32> {
        match self {
            Error::TooManyRequests { retry_after_seconds, .. } if *retry_after_seconds > 0 => Some(*retry_after_seconds),
            _ => None,
        }
    }

    pub fn not_found(kind: &str, name: &str) -> Self {
        Error::NotFound { kind: kind.into(), name: name.into() }
    }

    pub fn code(&self) -> u16 {
        match self {
            Error::NotFound { .. } | Error::NoRoute => 404,
            Error::AlreadyExists { .. } | Error::Conflict { .. } => 409,
            Error::Invalid { .. } | Error::Unprocessable(_) => 422,
            Error::BadRequest(_) => 400,
            Error::Forbidden(_) | Error::ForbiddenRequest { .. } => 403,
            Error::Unauthorized => 401,
            Error::MethodNotAllowed(_) => 405,
            Error::UnsupportedMediaType(_) => 415,
            Error::NotAcceptable(_) => 406,
            Error::TooLarge(_) => 413,
            Error::Expired { .. } | Error::Gone(_) => 410,
            Error::TooManyRequests { .. } => 429,
            Error::Timeout(_) => 504,
            Error::Unavailable(_) | Error::ServiceUnavailable(_) => 503,
            Error::Internal(_) => 500,
        }
    }

    pub fn reason(&self) -> &'static str {
        match self {
            Error::NotFound { .. } | Error::NoRoute => "NotFound",
            Error::AlreadyExists { .. } => "AlreadyExists",
            Error::Conflict { .. } => "Conflict",
            Error::Invalid { .. } | Error::Unprocessable(_) => "Invalid",
            Error::BadRequest(_) => "BadRequest",
            Error::Forbidden(_) | Error::ForbiddenRequest { .. } => "Forbidden",
            Error::Unauthorized => "Unauthorized",
            Error::MethodNotAllowed(_) => "MethodNotAllowed",
            Error::UnsupportedMediaType(_) => "UnsupportedMediaType",
            Error::NotAcceptable(_) => "NotAcceptable",
            Error::TooLarge(_) => "RequestEntityTooLarge",
            Error::Expired { .. } => "Expired",
            Error::Gone(_) => "Gone",
            Error::TooManyRequests { .. } => "TooManyRequests",
            Error::Timeout(_) => "Timeout",
            Error::Unavailable(_) | Error::ServiceUnavailable(_) => "ServiceUnavailable",
            Error::Internal(_) => "InternalError",
        }
    }

    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Unavailable(_) | Error::Conflict { .. })
    }

    /// The `metav1.Status` for this error.
    pub fn to_status(&self) -> Value {
        let mut details = serde_json::Map::new();
        match self {
            Error::NotFound { kind, name } | Error::AlreadyExists { kind, name } | Error::Conflict { kind, name, .. } => {
                details.insert("name".into(), json!(name));
                details.insert("kind".into(), json!(kind));
            }
            Error::Invalid { kind, name, causes, .. } => {
                details.insert("name".into(), json!(name));
                details.insert("kind".into(), json!(kind));
                details.insert(
                    "causes".into(),
                    causes.iter().map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field})).collect(),
                );
            }
            Error::ForbiddenRequest { group, resource, name, .. } => {
                // Go's omitempty: a non-resource request's details are an empty object.
                for (key, value) in [("name", name), ("group", group), ("kind", resource)] {
                    if !value.is_empty() {
                        details.insert(key.into(), json!(value));
                    }
                }
            }
            Error::TooManyRequests { causes, retry_after_seconds, .. } => {
                if !causes.is_empty() {
                    details.insert("causes".into(), causes.iter().map(Cause::to_json).collect());
                }
                if *retry_after_seconds > 0 {
                    details.insert("retryAfterSeconds".into(), json!(retry_after_seconds));
                }
            }
            _ => {}
        }
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": self.reason(),
            "code": self.code(),
        });
        // Kubernetes' timeout carries its (zero) retry-after in details, which JSON leaves empty.
        if !details.is_empty() || matches!(self, Error::Timeout(_) | Error::ForbiddenRequest { .. }) {
            status["details"] = Value::Object(details);
        }
        status
    }
}

impl From<etcd_client::Error> for Error {
    /// A store that refuses a request for its size is up and answering: the request is the
    /// problem (413), not the store (503), and retrying it would fail the same way.
    fn from(e: etcd_client::Error) -> Self {
        match &e {
            etcd_client::Error::GRpcStatus(s) if is_too_large_for_the_store(s.message()) => {
                Error::TooLarge(format!("the object is larger than the store accepts: {}", s.message()))
            }
            _ => Error::Unavailable(e.to_string()),
        }
    }
}

/// etcd's "etcdserver: request is too large" (past its `--max-request-bytes`) and gRPC's own
/// "decoded message length too large" (past a server's message size limit).
fn is_too_large_for_the_store(message: &str) -> bool {
    message.contains("request is too large") || message.contains("message length too large")
}

impl From<apimachinery::Error> for Error {
    fn from(e: apimachinery::Error) -> Self {
        Error::BadRequest(e.to_string())
    }
}

impl actix_web::ResponseError for Error {
    fn status_code(&self) -> actix_web::http::StatusCode {
        actix_web::http::StatusCode::from_u16(self.code()).unwrap_or(actix_web::http::StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn error_response(&self) -> actix_web::HttpResponse {
        actix_web::HttpResponse::build(self.status_code()).content_type("application/json").json(self.to_status())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_read_as_kubernetes_writes_them() {
        let s = Error::not_found("pods", "x").to_status();
        assert_eq!(s["message"], "pods \"x\" not found");
        assert_eq!((s["code"].as_u64(), s["reason"].as_str()), (Some(404), Some("NotFound")));
        assert_eq!(s["details"]["kind"], "pods");
        let inv = Error::Invalid {
            kind: "Pod".into(),
            kind_singular: "Pod".into(),
            name: "x".into(),
            causes: vec![Cause { field: "metadata.name".into(), reason: "FieldValueInvalid".into(), message: "Invalid value: \"X\"".into() }],
        };
        assert_eq!(inv.to_string(), "Pod \"x\" is invalid: metadata.name: Invalid value: \"X\"");
        assert_eq!(inv.to_status()["details"]["causes"][0]["field"], "metadata.name");
    }

    #[test]
    fn a_write_too_large_for_the_store_is_a_413_not_a_503() {
        // What the fuzzing found: a 3 MB string in a Lease passed validation and the store
        // refused it, which was answered as "storage is unavailable".
        let grpc = |code, msg: &str| Error::from(etcd_client::Error::GRpcStatus(tonic::Status::new(code, msg)));
        for e in [
            grpc(tonic::Code::OutOfRange, "Error, decoded message length too large: found 3000549 bytes, the limit is: 2097152 bytes"),
            grpc(tonic::Code::InvalidArgument, "etcdserver: request is too large"),
        ] {
            let s = e.to_status();
            assert_eq!((s["code"].as_u64(), s["reason"].as_str()), (Some(413), Some("RequestEntityTooLarge")), "{s}");
            assert!(s["message"].as_str().is_some_and(|m| m.starts_with("Request entity too large: the object is larger than the store accepts")), "{s}");
        }
        let down = grpc(tonic::Code::Unavailable, "transport error");
        assert_eq!((down.code(), down.reason()), (503, "ServiceUnavailable"));
        assert_eq!(Error::TooLarge("limit is 3145728".into()).to_string(), "Request entity too large: limit is 3145728");
    }
}
