//! Mirrors etcd's `etcdserver/api/etcdhttp` (health.go, metrics.go): the plain HTTP server on
//! `--listen-metrics-urls`, with `/health` as etcd answers it and the Prometheus `/metrics`.

use crate::server::Node;

/// Serves `/health` (etcd's JSON: 200 with a leader, 503 without) and `/metrics`.
pub async fn serve(listener: tokio::net::TcpListener, node: Node, mut shutdown: tokio::sync::watch::Receiver<bool>) -> std::io::Result<()> {
    use axum::{Router, http::StatusCode, routing::get};
    let n1 = node.clone();
    let app = Router::new()
        .route(
            "/health",
            get(move || {
                let node = n1.clone();
                async move {
                    if node.status().leader != 0 {
                        (StatusCode::OK, "{\"health\":\"true\"}")
                    } else {
                        (StatusCode::SERVICE_UNAVAILABLE, "{\"health\":\"false\",\"reason\":\"no leader\"}")
                    }
                }
            }),
        )
        .route("/metrics", get(move || {
            let node = node.clone();
            async move { node.metrics().render() }
        }));
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            let _ = shutdown.wait_for(|s| *s).await;
        })
        .await
}
