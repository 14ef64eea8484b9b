//! The watches (controller.rs) against a stand-in API server on loopback: a list of Services and
//! EndpointSlices, then a watch that adds, changes and deletes. The index follows, and `synced`
//! turns true once both lists are in.

use std::time::Duration;

use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::routing::get;
use futures::StreamExt as _;
use serde_json::{Value, json};
use tokio::sync::mpsc;

type Events = std::sync::Arc<tokio::sync::Mutex<Option<mpsc::Receiver<Value>>>>;

fn service(name: &str, ip: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": "default", "resourceVersion": "1"},
           "spec": {"clusterIP": ip, "clusterIPs": [ip], "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}})
}

fn slice(name: &str, service: &str, ip: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": "default", "resourceVersion": "1",
                        "labels": {"kubernetes.io/service-name": service}},
           "addressType": "IPv4",
           "endpoints": [{"addresses": [ip], "conditions": {"ready": true}}],
           "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]})
}

/// A list, or with `watch=true` the events the test sends (one watch per resource).
async fn serve(kind: &'static str, items: Vec<Value>, query: Option<String>, events: Events) -> axum::response::Response {
    if query.unwrap_or_default().split('&').any(|p| p == "watch=true") {
        let rx = events.lock().await.take();
        let stream = match rx {
            Some(rx) => tokio_stream_from(rx).boxed(),
            // A second watch (after a timeout) gets nothing and stays open.
            None => futures::stream::pending().boxed(),
        };
        return axum::response::Response::new(Body::from_stream(stream));
    }
    let list = json!({"kind": kind, "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": items});
    axum::response::Response::new(Body::from(list.to_string()))
}

fn tokio_stream_from(rx: mpsc::Receiver<Value>) -> impl futures::Stream<Item = Result<String, std::io::Error>> + Send {
    futures::stream::unfold(rx, |mut rx| async move {
        let ev = rx.recv().await?;
        Some((Ok(format!("{ev}\n")), rx))
    })
    .chain(futures::stream::pending())
}

#[tokio::test]
async fn the_index_follows_the_lists_and_the_watches() {
    let (svc_tx, svc_rx) = mpsc::channel(8);
    let (slice_tx, slice_rx) = mpsc::channel(8);
    let svc_events: Events = std::sync::Arc::new(tokio::sync::Mutex::new(Some(svc_rx)));
    let slice_events: Events = std::sync::Arc::new(tokio::sync::Mutex::new(Some(slice_rx)));
    let app = axum::Router::new()
        .route(
            "/api/v1/services",
            get(|State((s, _)): State<(Events, Events)>, RawQuery(q)| serve("ServiceList", vec![service("web", "10.96.0.10")], q, s)),
        )
        .route(
            "/apis/discovery.k8s.io/v1/endpointslices",
            get(|State((_, e)): State<(Events, Events)>, RawQuery(q)| {
                serve("EndpointSliceList", vec![slice("web-1", "web", "10.244.0.5")], q, e)
            }),
        )
        .with_state((svc_events, slice_events));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let fake = tokio::spawn(async move { axum::serve(listener, app).await });

    let client = client::client(&client::Connection::Master(url)).await.expect("client");
    let index = dns::index::SharedIndex::default();
    let (synced_tx, mut synced) = tokio::sync::watch::channel(false);
    let watches = tokio::spawn(dns::controller::run(client, index.clone(), synced_tx));

    tokio::time::timeout(Duration::from_secs(10), synced.wait_for(|s| *s)).await.expect("synced in time").expect("synced");
    {
        let i = index.read().unwrap();
        assert_eq!(i.service("default", "web").map(|s| s.cluster_ips.len()), Some(1));
        assert_eq!(i.slices_of("default", "web").map(|s| s.addresses.len()).sum::<usize>(), 1);
    }

    // Watch events: a new Service and its slice, then the first Service goes.
    svc_tx.send(json!({"type": "ADDED", "object": service("db", "10.96.0.11")})).await.expect("send");
    slice_tx.send(json!({"type": "ADDED", "object": slice("db-1", "db", "10.244.0.6")})).await.expect("send");
    svc_tx.send(json!({"type": "DELETED", "object": service("web", "10.96.0.10")})).await.expect("send");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let done = {
            let i = index.read().unwrap();
            i.service("default", "db").is_some() && i.service("default", "web").is_none() && i.slices_of("default", "db").count() == 1
        };
        if done {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the watch events did not reach the index");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(index.read().unwrap().service_by_ip("10.96.0.10".parse().unwrap()).is_none());
    watches.abort();
    fake.abort();
}
