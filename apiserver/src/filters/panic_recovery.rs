//! Mirrors k8s.io/apiserver/pkg/server/filters/wrap.go (WithPanicRecovery): a handler that panics
//! is answered 500 with a `metav1.Status` and logged, and the server goes on serving. Without it
//! the connection would just close. (Kubernetes answers in plain text; a Status reads the same in
//! kubectl and is what every other error here is.)

use std::panic::AssertUnwindSafe;

use actix_web::{HttpRequest, HttpResponse};
use futures::FutureExt as _;

use crate::endpoints::request::error_response;
use crate::error::Error;

/// The message of the 500, as kube-apiserver words it.
pub const PANIC_MESSAGE: &str = "This request caused apiserver to panic. Look in the logs for details.";

/// Runs `handler`; a panic in it becomes a 500.
pub async fn with_panic_recovery(req: &HttpRequest, handler: impl Future<Output = HttpResponse>) -> HttpResponse {
    // Unwind safety: what a handler shares with others (the watch caches, the metrics) sits
    // behind locks that a panic leaves consistent or poisoned, never half-written; Kubernetes
    // makes the same bet when it recovers.
    match AssertUnwindSafe(handler).catch_unwind().await {
        Ok(resp) => resp,
        Err(panic) => {
            let what = panic.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| panic.downcast_ref::<String>().cloned()).unwrap_or_default();
            tracing::error!(target: "apiserver", method = %req.method(), path = req.path(), panic = what, "a request's handler panicked");
            error_response(&Error::Internal(PANIC_MESSAGE.into()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[actix_rt::test]
    async fn a_panicking_handler_yields_a_500_status() {
        let req = actix_web::test::TestRequest::get().uri("/api/v1/namespaces/default/pods").to_http_request();
        let resp = with_panic_recovery(&req, async { panic!("boom") }).await;
        assert_eq!(resp.status().as_u16(), 500);
        assert_eq!(resp.headers().get("content-type").and_then(|v| v.to_str().ok()), Some("application/json"));
        let body = actix_web::body::to_bytes(resp.into_body()).await.expect("a body");
        let status: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(
            status,
            serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                               "message": PANIC_MESSAGE, "reason": "InternalError", "code": 500})
        );

        let fine = with_panic_recovery(&req, async { HttpResponse::Ok().finish() }).await;
        assert_eq!(fine.status().as_u16(), 200);
    }
}
