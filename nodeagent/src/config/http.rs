//! Mirrors kubelet's config/http.go: static pods served at `--manifest-url`.
//!
//! The URL is fetched at start and then every [`super::HTTP_CHECK_FREQUENCY`]. The body is one
//! Pod or a PodList, in YAML or JSON; each pod is made a static pod as the file source does
//! ([`super::file::static_pod_from_value`]; its UID hashes the object, the URL and the node).
//! A fetch that fails (unreachable, non-2xx, unparsable) keeps the last set and is logged at
//! warn once per outage. An empty body is an empty set, as in kubelet: a server with nothing to
//! run says so by answering nothing.
//!
//! Unlike file pods, HTTP pods get no blanket NoExecute toleration (kubelet adds it only for
//! files).

use std::time::Duration;

use api::pod::kubelet_types::HTTP_SOURCE;
use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use super::file::{ManifestError, parse_object, static_pod_from_value};
use super::{HTTP_CHECK_FREQUENCY, Outage, SourceUpdate};

/// A manifest bigger than this is refused rather than read into memory.
pub(crate) const MAX_BODY_BYTES: usize = 10 << 20;
/// One fetch may take this long.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs the HTTP source until `shutdown` turns true or the merger is gone.
pub(crate) async fn run(url: String, node_name: String, tx: mpsc::Sender<SourceUpdate>, shutdown: watch::Receiver<bool>) {
    run_every(url, node_name, tx, shutdown, HTTP_CHECK_FREQUENCY).await;
}

/// [`run`] with the period as a parameter, for tests.
pub(crate) async fn run_every(
    url: String,
    node_name: String,
    tx: mpsc::Sender<SourceUpdate>,
    mut shutdown: watch::Receiver<bool>,
    period: Duration,
) {
    let client = match reqwest::Client::builder().timeout(FETCH_TIMEOUT).build() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(target: "kubelet::config", url, error = %e, "cannot build an HTTP client; the manifest URL is not read");
            return;
        }
    };
    let mut last: Option<Vec<Pod>> = None;
    let mut outage = Outage::default();
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
        let pods = match fetch(&client, &url, &node_name).await {
            Ok(pods) => {
                if outage.recovered() {
                    tracing::info!(target: "kubelet::config", url, "manifest URL readable again");
                }
                pods
            }
            Err(e) => {
                if outage.failed() {
                    tracing::warn!(target: "kubelet::config", url, error = %e, "could not read the manifest URL; keeping the static pods read before");
                }
                continue;
            }
        };
        if last.as_ref() != Some(&pods) {
            if tx.send(SourceUpdate { source: HTTP_SOURCE, pods: pods.clone() }).await.is_err() {
                return;
            }
            last = Some(pods);
        }
    }
}

async fn fetch(client: &reqwest::Client, url: &str, node_name: &str) -> Result<Vec<Pod>, String> {
    let resp = client.get(url).send().await.map_err(|e| e.to_string())?;
    let status = resp.status();
    if !status.is_success() {
        return Err(format!("{url}: HTTP {status}"));
    }
    if resp.content_length().is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return Err(format!("{url}: body larger than {MAX_BODY_BYTES} bytes"));
    }
    let body = resp.bytes().await.map_err(|e| e.to_string())?;
    if body.len() > MAX_BODY_BYTES {
        return Err(format!("{url}: body larger than {MAX_BODY_BYTES} bytes"));
    }
    // Parsing and hashing a big list is CPU work: off the executor.
    let (url, node) = (url.to_string(), node_name.to_string());
    tokio::task::spawn_blocking(move || decode_body(&body, &url, &node)).await.map_err(|e| e.to_string())?.map_err(|e| e.to_string())
}

/// A manifest URL's body → its static pods. A Pod or a PodList (anything with `items`); every
/// item must be valid, or the whole body is refused (a half-applied list would remove pods the
/// server meant to keep).
pub(crate) fn decode_body(body: &[u8], url: &str, node_name: &str) -> Result<Vec<Pod>, ManifestError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Vec::new());
    }
    let obj = parse_object(body)?;
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    let items = match obj.get("items") {
        Some(Value::Array(items)) if kind != "Pod" => items.clone(),
        Some(Value::Null) | None if kind == "PodList" => Vec::new(),
        _ => return static_pod_from_value(obj, HTTP_SOURCE, url, node_name).map(|p| vec![p]),
    };
    items
        .into_iter()
        .enumerate()
        .map(|(index, item)| {
            static_pod_from_value(item, HTTP_SOURCE, url, node_name).map_err(|e| ManifestError::Item { index, source: Box::new(e) })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const POD: &str = "kind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: c\n    image: busybox:1.36\n";
    const LIST: &str = r#"{"kind": "PodList", "apiVersion": "v1", "items": [
        {"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}},
        {"metadata": {"name": "b"}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}}]}"#;

    #[test]
    fn bodies() {
        let one = decode_body(POD.as_bytes(), "http://x/m", "n1").expect("pod");
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].metadata.name.as_deref(), Some("web-n1"));
        let a = one[0].metadata.annotations.as_ref().expect("annotations");
        assert_eq!(a.get(api::pod::kubelet_types::CONFIG_SOURCE_ANNOTATION_KEY).map(String::as_str), Some("http"));
        let tolerations = one[0].spec.as_ref().and_then(|s| s.tolerations.clone()).unwrap_or_default();
        assert!(!tolerations.iter().any(|t| t.key.is_none()), "no blanket toleration for HTTP pods");

        let list = decode_body(LIST.as_bytes(), "http://x/m", "n1").expect("list");
        let names: Vec<_> = list.iter().map(|p| p.metadata.name.clone().unwrap_or_default()).collect();
        assert_eq!(names, vec!["a-n1", "b-n1"]);
        assert_ne!(list[0].metadata.uid, list[1].metadata.uid);
        // Another URL, another UID.
        let elsewhere = decode_body(POD.as_bytes(), "http://y/m", "n1").expect("pod");
        assert_ne!(elsewhere[0].metadata.uid, one[0].metadata.uid);

        assert!(decode_body(b"  \n", "http://x/m", "n1").expect("empty").is_empty());
        assert!(decode_body(br#"{"kind": "PodList", "items": null}"#, "u", "n1").expect("empty list").is_empty());
        let bad = decode_body(LIST.replace("\"b\"", "\"B!\"").as_bytes(), "u", "n1").expect_err("invalid item").to_string();
        assert!(bad.starts_with("items[1]"), "{bad}");
    }

    /// A tiny HTTP server: answers every request with the body `bodies` holds now (a status of
    /// 500 when it is None), counting requests.
    async fn serve(body: Arc<std::sync::Mutex<Option<String>>>, hits: Arc<AtomicUsize>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let mut buf = [0u8; 4096];
                let _ = sock.read(&mut buf).await;
                hits.fetch_add(1, Ordering::SeqCst);
                let current = body.lock().expect("lock").clone();
                let resp = match current {
                    Some(b) => format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{b}", b.len()),
                    None => "HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_string(),
                };
                let _ = sock.write_all(resp.as_bytes()).await;
            }
        });
        format!("http://{addr}/manifest")
    }

    async fn wait(rx: &mut mpsc::Receiver<SourceUpdate>) -> SourceUpdate {
        tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.expect("in time").expect("snapshot")
    }

    #[tokio::test]
    async fn source_keeps_last_set_on_errors() {
        let body = Arc::new(std::sync::Mutex::new(Some(POD.to_string())));
        let hits = Arc::new(AtomicUsize::new(0));
        let url = serve(body.clone(), hits.clone()).await;
        let (tx, mut rx) = mpsc::channel(4);
        let (stop_tx, stop_rx) = watch::channel(false);
        let task = tokio::spawn(run_every(url, "n1".into(), tx, stop_rx, Duration::from_millis(50)));
        let first = wait(&mut rx).await;
        assert_eq!((first.source, first.pods.len()), (HTTP_SOURCE, 1));

        // The server fails: no snapshot, the last set stands.
        *body.lock().expect("lock") = None;
        let before = hits.load(Ordering::SeqCst);
        assert!(tokio::time::timeout(Duration::from_millis(300), rx.recv()).await.is_err());
        assert!(hits.load(Ordering::SeqCst) > before, "it kept polling");

        // Back with a list.
        *body.lock().expect("lock") = Some(LIST.to_string());
        let third = wait(&mut rx).await;
        assert_eq!(third.pods.len(), 2);

        stop_tx.send(true).expect("stop");
        tokio::time::timeout(Duration::from_secs(5), task).await.expect("stops").expect("join");
    }
}
