//! Mirrors kubelet's config/file.go and config/common.go: static pods from the manifest directory
//! (`--pod-manifest-path`).
//!
//! Every file ending in `.yaml`, `.yml` or `.json` (hidden files ignored) holds one Pod. The
//! directory is read at start and then every [`super::FILE_CHECK_FREQUENCY`]; after each read
//! the source sends the whole set if it differs from the last one it sent (and always the first
//! time, so that the merger knows this source has reported). Kubelet watches the directory with
//! inotify; a small directory polled once a second costs a few syscalls and reads in one obvious
//! loop, without the rename/atomic-write corner cases of inotify.
//!
//! A file that does not parse or validate is logged at warn with its path and the error — once
//! per distinct content, not once a second — and skipped: it never stops the agent and never
//! takes the other static pods with it. A missing directory is an empty set (it may be created
//! later); a directory that cannot be read for another reason keeps the last set.
//!
//! What turns a manifest into a static pod ([`static_pod_from_value`], common.go's
//! applyDefaults, then the defaulting and validation of the API's core types, as kubelet runs
//! them):
//! 1. UID: the manifest's own if it has one, else a hash of the parsed object, the node name and
//!    the file path (kubelet hashes the same three). The same manifest gives the same UID across
//!    restarts; an edit gives a new UID, so the old pod is removed and the new one added.
//! 2. name `<name>-<node>`, namespace `default` if empty, `spec.nodeName` = this node.
//! 3. annotations `kubernetes.io/config.hash` = UID and `kubernetes.io/config.source`.
//! 4. file pods only: a toleration of every NoExecute taint, so node problems never evict them.
//! 5. the pod defaulting ([`api::core::v1::defaults::set_defaults_pod`]) and create validation
//!    ([`api::core::validation::validate_pod_create`]) the API server also runs, so that a static
//!    pod's spec reads as the API server would store it and a manifest the API server would
//!    refuse is refused here too. Only the defaulting functions run, not the API server's
//!    mutating admission: as in kubelet's config/common.go, a static pod gets no
//!    serviceAccountName, no priority and no 300 s not-ready/unreachable tolerations on its node.
//!    Its mirror pod gets the priority and the tolerations when the API server admits it (the
//!    ServiceAccount plugin leaves mirror pods alone).
//!
//! Implementation caveats:
//! - Kubelet reads every non-hidden file whatever its extension; kubelab only the three above,
//!   so that editor backups (`pod.yaml~`) are not read as pods.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use api::core::v1::defaults::set_defaults_pod;
use api::core::validation::validate_pod_create;
use api::pod::kubelet_types::{CONFIG_HASH_ANNOTATION_KEY, CONFIG_SOURCE_ANNOTATION_KEY, FILE_SOURCE};
use k8s_openapi::api::core::v1::{Pod, Toleration};
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use super::{FILE_CHECK_FREQUENCY, SourceUpdate, fnv128_hex};

/// Runs the file source until `shutdown` turns true or the merger is gone.
pub(crate) async fn run(dir: PathBuf, node_name: String, tx: mpsc::Sender<SourceUpdate>, mut shutdown: watch::Receiver<bool>) {
    let mut last: Option<Vec<Pod>> = None;
    // (path, hash of the bytes) of broken files already reported.
    let mut reported: HashSet<(PathBuf, String)> = HashSet::new();
    let mut dir_error_reported = false;
    let mut tick = tokio::time::interval(FILE_CHECK_FREQUENCY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
        let (d, n) = (dir.clone(), node_name.clone());
        let read = match tokio::task::spawn_blocking(move || load_dir(&d, &n)).await {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(target: "kubelet::config", error = %e, "reading the manifest directory panicked");
                continue;
            }
        };
        let pods = match read {
            Ok(DirRead { pods, broken }) => {
                dir_error_reported = false;
                for b in broken {
                    if reported.insert((b.path.clone(), b.content_hash)) {
                        tracing::warn!(target: "kubelet::config", path = %b.path.display(), error = %b.error, "could not read static pod manifest; skipped");
                    }
                }
                pods
            }
            Err(e) => {
                if !dir_error_reported {
                    tracing::warn!(target: "kubelet::config", path = %dir.display(), error = %e, "could not read the manifest directory; keeping the static pods read before");
                    dir_error_reported = true;
                }
                continue;
            }
        };
        if last.as_ref() != Some(&pods) {
            tracing::debug!(target: "kubelet::config", source = FILE_SOURCE, pods = pods.len(), "static pod manifests changed");
            if tx.send(SourceUpdate { source: FILE_SOURCE, pods: pods.clone() }).await.is_err() {
                return;
            }
            last = Some(pods);
        }
    }
}

/// Why a manifest (a file, or a URL's body) is not a static pod. The message is what the source
/// logs with the file's path or the URL.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ManifestError {
    #[error("not UTF-8: {0}")]
    NotUtf8(#[source] std::str::Utf8Error),
    #[error("invalid JSON: {0}")]
    Json(#[source] serde_json::Error),
    #[error("invalid YAML: {0}")]
    Yaml(#[source] serde_norway::Error),
    #[error("the manifest is not an object")]
    NotAnObject,
    #[error("expected kind Pod, got {0}")]
    Kind(String),
    #[error("expected apiVersion v1, got {0}")]
    ApiVersion(String),
    /// The object does not decode as a Pod (a field of the wrong type, …).
    #[error("not a valid Pod: {0}")]
    NotAPod(#[source] serde_json::Error),
    /// A decoded pod could not be encoded again (for its UID, or for validation).
    #[error("{0}")]
    Encode(#[source] serde_json::Error),
    #[error("metadata.name: Required value: name is required")]
    NoName,
    /// What the API server's create validation says of the pod, one message per field.
    #[error("invalid pod: {}", .0.join("; "))]
    Validation(Vec<String>),
    /// One item of a PodList (the HTTP source), by its index.
    #[error("items[{index}]: {source}")]
    Item {
        index: usize,
        #[source]
        source: Box<ManifestError>,
    },
}

/// A manifest that could not be turned into a pod.
#[derive(Debug)]
pub(crate) struct BrokenManifest {
    pub(crate) path: PathBuf,
    pub(crate) error: String,
    /// Hash of the file's bytes: the same broken content is reported once.
    pub(crate) content_hash: String,
}

/// What one read of the directory found.
#[derive(Debug, Default)]
pub(crate) struct DirRead {
    /// The static pods, sorted by file name.
    pub(crate) pods: Vec<Pod>,
    pub(crate) broken: Vec<BrokenManifest>,
}

/// Whether the file is one this source reads: a visible `.yaml`, `.yml` or `.json` file.
fn is_manifest(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else { return false };
    !name.starts_with('.') && [".yaml", ".yml", ".json"].iter().any(|ext| name.ends_with(ext))
}

/// Reads and decodes every manifest in `dir` (blocking: call it from `spawn_blocking`). A
/// missing directory is an empty set; other directory errors are returned.
pub(crate) fn load_dir(dir: &Path, node_name: &str) -> std::io::Result<DirRead> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(DirRead::default()),
        Err(e) => return Err(e),
    };
    let mut paths: Vec<PathBuf> = Vec::new();
    for entry in entries {
        let entry = entry?;
        let path = entry.path();
        // Follows symlinks, as kubelet does (a manifest may be a link into a config checkout).
        if is_manifest(&path) && std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
            paths.push(path);
        }
    }
    paths.sort();
    let mut out = DirRead::default();
    for path in paths {
        let content = match std::fs::read(&path) {
            Ok(c) => c,
            // Removed between the listing and the read: it is simply gone.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                out.broken.push(BrokenManifest { error: e.to_string(), content_hash: String::new(), path });
                continue;
            }
        };
        match decode_manifest(&content, &path, node_name) {
            Ok(pod) => out.pods.push(pod),
            Err(e) => out.broken.push(BrokenManifest { error: e.to_string(), content_hash: fnv128_hex(&[&content]), path }),
        }
    }
    Ok(out)
}

/// One manifest file's bytes (YAML or JSON) → its static pod.
pub(crate) fn decode_manifest(content: &[u8], path: &Path, node_name: &str) -> Result<Pod, ManifestError> {
    let obj = parse_object(content)?;
    static_pod_from_value(obj, FILE_SOURCE, &path.display().to_string(), node_name)
}

/// YAML or JSON bytes to a JSON value. JSON is tried first when the text looks like JSON, so its
/// errors name JSON positions.
pub(crate) fn parse_object(content: &[u8]) -> Result<Value, ManifestError> {
    let text = std::str::from_utf8(content).map_err(ManifestError::NotUtf8)?;
    if text.trim_start().starts_with('{') {
        serde_json::from_str(text).map_err(ManifestError::Json)
    } else {
        serde_norway::from_str(text).map_err(ManifestError::Yaml)
    }
}

/// Turns one decoded manifest object into a static pod (see the module docs for the steps).
/// `source_ref` is the file path or the URL, which goes into the UID.
pub(crate) fn static_pod_from_value(obj: Value, source: &'static str, source_ref: &str, node_name: &str) -> Result<Pod, ManifestError> {
    if !obj.is_object() {
        return Err(ManifestError::NotAnObject);
    }
    match obj.get("kind").and_then(Value::as_str) {
        None | Some("Pod") => {}
        Some(kind) => return Err(ManifestError::Kind(kind.to_string())),
    }
    match obj.get("apiVersion").and_then(Value::as_str) {
        None | Some("v1") => {}
        Some(v) => return Err(ManifestError::ApiVersion(v.to_string())),
    }
    // Step 1: the UID, from the object as written (before any defaulting of ours).
    let canonical = serde_json::to_vec(&obj).map_err(ManifestError::Encode)?;
    let mut pod: Pod = serde_json::from_value(obj).map_err(ManifestError::NotAPod)?;
    let uid = match pod.metadata.uid.clone().filter(|u| !u.is_empty()) {
        Some(u) => u,
        None => fnv128_hex(&[&canonical, format!("host:{node_name}").as_bytes(), format!("{source}:{source_ref}").as_bytes()]),
    };
    pod.metadata.uid = Some(uid.clone());

    // Step 2: name, namespace, node.
    let name = pod.metadata.name.clone().unwrap_or_default();
    if name.is_empty() {
        return Err(ManifestError::NoName);
    }
    pod.metadata.name = Some(format!("{name}-{}", node_name.to_lowercase()));
    if pod.metadata.namespace.as_deref().is_none_or(str::is_empty) {
        pod.metadata.namespace = Some("default".to_string());
    }
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.node_name = Some(node_name.to_string());

    // Step 3: where it came from.
    let annotations = pod.metadata.annotations.get_or_insert_with(BTreeMap::new);
    annotations.insert(CONFIG_HASH_ANNOTATION_KEY.to_string(), uid);
    annotations.insert(CONFIG_SOURCE_ANNOTATION_KEY.to_string(), source.to_string());

    // Step 4: file pods tolerate every NoExecute taint (AddOrUpdateTolerationInPod).
    if source == FILE_SOURCE {
        let all_no_execute = Toleration {
            operator: Some("Exists".to_string()),
            effect: Some("NoExecute".to_string()),
            ..Toleration::default()
        };
        let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
        if !tolerations.contains(&all_no_execute) {
            tolerations.push(all_no_execute);
        }
    }

    // Step 5: defaulting and validation, as the API server runs them.
    set_defaults_pod(&mut pod);
    let value = serde_json::to_value(&pod).map_err(ManifestError::Encode)?;
    let errs = validate_pod_create(&value);
    if !errs.is_empty() {
        return Err(ManifestError::Validation(errs.iter().map(ToString::to_string).collect()));
    }
    Ok(pod)
}

#[cfg(test)]
mod tests {
    use super::*;

    const WEB_YAML: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: c\n    image: busybox\n";
    const DB_JSON: &str = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "db", "namespace": "data"},
        "spec": {"containers": [{"name": "c", "image": "docker.io/library/postgres:16", "ports": [{"containerPort": 5432}]}]}}"#;

    fn names(r: &DirRead) -> Vec<String> {
        r.pods.iter().map(|p| p.metadata.name.clone().unwrap_or_default()).collect()
    }

    fn uid_of<'a>(r: &'a DirRead, name: &str) -> &'a str {
        r.pods.iter().find(|p| p.metadata.name.as_deref() == Some(name)).and_then(|p| p.metadata.uid.as_deref()).unwrap_or("")
    }

    #[test]
    fn static_pod_defaults() {
        let pod = decode_manifest(WEB_YAML.as_bytes(), Path::new("/etc/kubelab/manifests/web.yaml"), "node1").expect("pod");
        let uid = pod.metadata.uid.clone().expect("uid");
        assert_eq!(uid.len(), 32);
        assert_eq!(pod.metadata.name.as_deref(), Some("web-node1"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("default"));
        let a = pod.metadata.annotations.as_ref().expect("annotations");
        assert_eq!(a.get(CONFIG_HASH_ANNOTATION_KEY), Some(&uid));
        assert_eq!(a.get(CONFIG_SOURCE_ANNOTATION_KEY).map(String::as_str), Some("file"));
        let spec = pod.spec.as_ref().expect("spec");
        assert_eq!(spec.node_name.as_deref(), Some("node1"));
        assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
        assert_eq!(spec.dns_policy.as_deref(), Some("ClusterFirst"));
        assert_eq!(spec.termination_grace_period_seconds, Some(30));
        let c = &spec.containers[0];
        assert_eq!(c.image_pull_policy.as_deref(), Some("Always"), "no tag means :latest");
        assert_eq!(c.termination_message_path.as_deref(), Some("/dev/termination-log"));
        assert_eq!(c.termination_message_policy.as_deref(), Some("File"));
        let tolerations = spec.tolerations.as_ref().expect("tolerations");
        assert!(tolerations.iter().any(|t| t.key.is_none() && t.operator.as_deref() == Some("Exists") && t.effect.as_deref() == Some("NoExecute")));
        assert!(api::pod::is_static_pod(&pod));

        // Deterministic, and tied to node and path.
        let again = decode_manifest(WEB_YAML.as_bytes(), Path::new("/etc/kubelab/manifests/web.yaml"), "node1").expect("pod");
        assert_eq!(again.metadata.uid, Some(uid.clone()));
        let other_node = decode_manifest(WEB_YAML.as_bytes(), Path::new("/etc/kubelab/manifests/web.yaml"), "node2").expect("pod");
        assert_ne!(other_node.metadata.uid, Some(uid.clone()));
        let other_path = decode_manifest(WEB_YAML.as_bytes(), Path::new("/etc/kubelab/manifests/web2.yaml"), "node1").expect("pod");
        assert_ne!(other_path.metadata.uid, Some(uid));

        let db = decode_manifest(DB_JSON.as_bytes(), Path::new("db.json"), "n1").expect("pod");
        assert_eq!(db.metadata.namespace.as_deref(), Some("data"));
        let c = &db.spec.as_ref().expect("spec").containers[0];
        assert_eq!(c.image_pull_policy.as_deref(), Some("IfNotPresent"));
        assert_eq!(c.ports.as_ref().expect("ports")[0].protocol.as_deref(), Some("TCP"));
    }

    #[test]
    fn broken_manifests_are_refused() {
        let cases = [
            ("not: [yaml", "invalid YAML"),
            ("{\"kind\": ", "invalid JSON"),
            ("apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n", "expected kind Pod"),
            ("kind: Pod\nmetadata:\n  name: web\nspec:\n  containers: []\n", "spec.containers"),
            ("kind: Pod\nspec:\n  containers:\n  - name: c\n    image: i\n", "metadata.name"),
            ("kind: Pod\nmetadata:\n  name: web\nspec:\n  restartPolicy: Sometimes\n  containers:\n  - name: c\n    image: i\n", "spec.restartPolicy"),
            ("kind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: c\n", "spec.containers[0].image"),
        ];
        for (text, want) in cases {
            let err = decode_manifest(text.as_bytes(), Path::new("x.yaml"), "n1").expect_err(text).to_string();
            assert!(err.contains(want), "{text:?}: {err}");
        }
    }

    #[test]
    fn directory_lifecycle() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        let missing = d.join("not-yet");
        assert!(load_dir(&missing, "n1").expect("missing dir").pods.is_empty());

        std::fs::write(d.join("web.yaml"), WEB_YAML).expect("write");
        std::fs::write(d.join("db.json"), DB_JSON).expect("write");
        std::fs::write(d.join(".hidden.yaml"), WEB_YAML).expect("write");
        std::fs::write(d.join("notes.txt"), "hello").expect("write");
        std::fs::write(d.join("web.yaml~"), WEB_YAML).expect("write");
        std::fs::create_dir(d.join("sub.yaml")).expect("mkdir");
        let first = load_dir(d, "n1").expect("read");
        assert_eq!(names(&first), vec!["db-n1", "web-n1"]);
        assert!(first.broken.is_empty());
        let web_uid = uid_of(&first, "web-n1").to_string();

        // Unchanged → same UIDs.
        let again = load_dir(d, "n1").expect("read");
        assert_eq!(uid_of(&again, "web-n1"), web_uid);

        // Edited → new UID.
        std::fs::write(d.join("web.yaml"), WEB_YAML.replace("busybox", "busybox:1.36")).expect("write");
        let edited = load_dir(d, "n1").expect("read");
        assert_ne!(uid_of(&edited, "web-n1"), web_uid);
        assert_eq!(uid_of(&edited, "db-n1"), uid_of(&first, "db-n1"));

        // A broken file is reported and the others are kept.
        std::fs::write(d.join("bad.yaml"), "kind: Pod\nmetadata: [").expect("write");
        let with_bad = load_dir(d, "n1").expect("read");
        assert_eq!(names(&with_bad), vec!["db-n1", "web-n1"]);
        assert_eq!(with_bad.broken.len(), 1);
        assert_eq!(with_bad.broken[0].path, d.join("bad.yaml"));

        // Deleted → gone.
        std::fs::remove_file(d.join("web.yaml")).expect("rm");
        let deleted = load_dir(d, "n1").expect("read");
        assert_eq!(names(&deleted), vec!["db-n1"]);
    }

    #[tokio::test]
    async fn source_sends_snapshots_on_change() {
        let dir = tempfile::tempdir().expect("tempdir");
        let manifests = dir.path().join("manifests");
        let (tx, mut rx) = mpsc::channel(4);
        let (stop_tx, stop_rx) = watch::channel(false);
        let task = tokio::spawn(run(manifests.clone(), "n1".into(), tx, stop_rx));
        let first = rx.recv().await.expect("first snapshot");
        assert_eq!((first.source, first.pods.len()), (FILE_SOURCE, 0), "a missing directory is an empty set");

        std::fs::create_dir(&manifests).expect("mkdir");
        std::fs::write(manifests.join("web.yaml"), WEB_YAML).expect("write");
        let second = tokio::time::timeout(std::time::Duration::from_secs(5), rx.recv()).await.expect("in time").expect("snapshot");
        assert_eq!(second.pods.len(), 1);

        // A broken file alone changes nothing: no snapshot.
        std::fs::write(manifests.join("bad.json"), "{").expect("write");
        assert!(tokio::time::timeout(std::time::Duration::from_millis(2500), rx.recv()).await.is_err());

        stop_tx.send(true).expect("stop");
        tokio::time::timeout(std::time::Duration::from_secs(5), task).await.expect("stops").expect("join");
    }
}
