//! Encryption of Secrets at rest (`--encryption-provider-config`), seen from outside: kubectl
//! writes and reads a Secret as ever, while the store — read with Debian's etcdctl, and on disk
//! (a snapshot of etcd; kubelab's store's data directory) — holds only `k8s:enc:aescbc:v1:<key>:` and ciphertext. A key rotation (the new
//! key first, the old one second, then every Secret replaced) rewrites the data with the new key;
//! a configuration without the data's key answers its GET with a 500 naming the key, and leaves the
//! data where it is for a configuration that has it.

use base64::Engine as _;
use e2e::apiserver::{ApiCluster, ApiOptions};
use e2e::Flavor;
use e2e::etcdctl::Etcdctl;

const KEY: &str = "/registry/secrets/default/db";
const PLAINTEXT: &str = "hunter2-s3cr3t-value";

fn key(seed: u8) -> String {
    base64::engine::general_purpose::STANDARD.encode([seed; 32])
}

/// An EncryptionConfiguration for secrets with these aescbc keys, in order, then identity.
fn config(keys: &[(&str, u8)]) -> String {
    let keys: String = keys.iter().map(|(name, seed)| format!("            - name: {name}\n              secret: {}\n", key(*seed))).collect();
    format!(
        "apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
  - resources:
      - secrets
    providers:
      - aescbc:
          keys:
{keys}      - identity: {{}}
"
    )
}

fn raw(etcdctl: &Etcdctl, key: &str) -> Vec<u8> {
    // `-w json` gives the value as base64: the ciphertext is not text.
    let out = etcdctl.run(&["get", key, "-w", "json"]).expect("etcdctl get");
    assert!(out.success, "{}", out.describe());
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("etcdctl's JSON");
    let value = v["kvs"][0]["value"].as_str().unwrap_or_else(|| panic!("no value at {key}: {}", out.stdout));
    base64::engine::general_purpose::STANDARD.decode(value).expect("base64")
}

/// Every file under `dir`, with its bytes.
fn files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("the store's data directory").flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.push((path.display().to_string(), bytes));
        }
    }
    out
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test]
async fn secrets_are_encrypted_at_rest_and_keys_rotate() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("encryption-config.yaml");
    std::fs::write(&file, config(&[("key1", 1)])).expect("writing the configuration");
    let mut api = ApiCluster::start(ApiOptions {
        extra_args: vec!["--encryption-provider-config".into(), file.display().to_string()],
        ..ApiOptions::default()
    })
    .await
    .expect("an API server with encryption at rest");
    let etcdctl = Etcdctl::new(&api.store.client_endpoints()).expect("etcdctl");

    // 1. A Secret is written encrypted with the first key; a ConfigMap, not listed, is not.
    api.kubectl_ok(&["create", "secret", "generic", "db", &format!("--from-literal=password={PLAINTEXT}")]);
    api.kubectl_ok(&["create", "configmap", "plain", "--from-literal=k=visible-value"]);
    let stored = raw(&etcdctl, KEY);
    assert!(stored.starts_with(b"k8s:enc:aescbc:v1:key1:"), "{}", String::from_utf8_lossy(&stored));
    let b64 = base64::engine::general_purpose::STANDARD.encode(PLAINTEXT);
    assert!(!contains(&stored, PLAINTEXT.as_bytes()) && !contains(&stored, b64.as_bytes()) && !contains(&stored, b"\"kind\""));
    assert!(contains(&raw(&etcdctl, "/registry/configmaps/default/plain"), b"visible-value"));

    // 2. kubectl reads it back, from the store and from the watch cache's list.
    let got = api.kubectl_ok(&["get", "secret", "db", "-o", "jsonpath={.data.password}"]);
    assert_eq!(got, b64);
    let listed = api.kubectl_ok(&["get", "secrets", "-o", "jsonpath={.items[*].metadata.name}", "--chunk-size=0"]);
    assert!(listed.split(' ').any(|n| n == "db"), "{listed}");

    // 3. What the store keeps on disk holds no plaintext of it: with etcd, a snapshot
    //    (`etcdctl snapshot save`); kubelab's store has no Maintenance.Snapshot, so there every
    //    file of its data directory (the WAL and the database) is read.
    let on_disk: Vec<(String, Vec<u8>)> = if api.opts.flavor == Flavor::Etcd {
        let snapshot = dir.path().join("store.db");
        let endpoint = api.store.client_endpoints()[0].clone();
        let out = etcdctl.with_endpoints(&[endpoint]).run(&["snapshot", "save", &snapshot.display().to_string()]).expect("etcdctl snapshot save");
        assert!(out.success, "{}", out.describe());
        vec![(snapshot.display().to_string(), std::fs::read(&snapshot).expect("the snapshot"))]
    } else {
        files(&api.store.member(0).data_dir())
    };
    let everything: Vec<u8> = on_disk.iter().flat_map(|(_, b)| b.iter().copied()).collect();
    assert!(contains(&everything, b"k8s:enc:aescbc:v1:key1:"), "the encrypted Secret is on disk");
    assert!(contains(&everything, b"visible-value"), "the ConfigMap is on disk in plain text");
    for (file, bytes) in &on_disk {
        assert!(!contains(bytes, PLAINTEXT.as_bytes()) && !contains(bytes, b64.as_bytes()), "{file} has the Secret's value in plain text");
    }

    // 4. Rotation: key2 first, key1 still read; a replace of every Secret rewrites with key2.
    std::fs::write(&file, config(&[("key2", 2), ("key1", 1)])).expect("writing the configuration");
    api.restart_apiserver().await.expect("restart with key2 first");
    assert_eq!(api.kubectl_ok(&["get", "secret", "db", "-o", "jsonpath={.data.password}"]), b64);
    assert!(raw(&etcdctl, KEY).starts_with(b"k8s:enc:aescbc:v1:key1:"), "nothing is rewritten by itself");
    let all = api.kubectl_ok(&["get", "secrets", "-A", "-o", "json"]);
    let o = api.kubectl_with(&["replace", "-f", "-"], &[], Some(&all));
    assert!(o.success, "{}", o.describe());
    let stored = raw(&etcdctl, KEY);
    assert!(stored.starts_with(b"k8s:enc:aescbc:v1:key2:"), "{}", String::from_utf8_lossy(&stored));
    assert!(!contains(&stored, PLAINTEXT.as_bytes()));

    // 5. Without key2, the Secret is a 500 that says which key is missing; its data stays.
    let only_key1 = config(&[("key1", 1)]);
    std::fs::write(&file, &only_key1).expect("writing the configuration");
    api.restart_apiserver().await.expect("restart without key2");
    let (code, body) = api.get("/api/v1/namespaces/default/secrets/db").await.expect("GET the secret");
    assert_eq!(code, 500, "{body}");
    assert!(body.contains("no matching prefix found") && body.contains("k8s:enc:aescbc:v1:key2:") && body.contains(KEY), "{body}");
    let err = api.kubectl_err(&["get", "secret", "db"], "no matching prefix found");
    assert!(err.contains("InternalError") || err.contains("Internal error"), "{err}");
    assert_eq!(raw(&etcdctl, KEY), stored, "the unreadable data is left as it was");

    // 6. With key2 back, it reads again.
    std::fs::write(&file, config(&[("key2", 2), ("key1", 1)])).expect("writing the configuration");
    api.restart_apiserver().await.expect("restart with key2 back");
    assert_eq!(api.kubectl_ok(&["get", "secret", "db", "-o", "jsonpath={.data.password}"]), b64);

    // 7. A configuration Kubernetes would refuse stops the server at start, saying why.
    std::fs::write(&file, only_key1.replace(&key(1), &base64::engine::general_purpose::STANDARD.encode([1u8; 20]))).expect("writing the configuration");
    api.stop_apiserver();
    api.start_apiserver().await.expect_err("a 20-byte aescbc key is refused");
    let log = std::fs::read_to_string(api.root().join("apiserver/stderr.log")).expect("the API server's log");
    assert!(log.contains("--encryption-provider-config") && log.contains("got 20, expected one of [16 24 32]"), "{log}");
}
