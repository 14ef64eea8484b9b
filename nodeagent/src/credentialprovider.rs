//! Mirrors kubelet's pkg/credentialprovider (config.go's `ReadDockerConfigFile`, keyring.go): the
//! registry credentials a node has of its own, used for a pull when the pod's pull secrets have
//! none for the image's registry. As kubelet, it reads the first docker `config.json` found in
//! `<root-dir>/config.json` (kubelet's preferred path), `./config.json`,
//! `$HOME/.docker/config.json` and `/.docker/config.json`; else the first old-style
//! `.dockercfg` in the same directories. Read at every pull, so a changed file counts at once.
//!
//! Both formats of a pull secret are read here too: `kubernetes.io/dockerconfigjson`
//! (`{"auths": {<registry>: {…}}}`) and `kubernetes.io/dockercfg` (the `auths` map alone).

use std::path::{Path, PathBuf};

/// The directories kubelet looks in, in its order.
fn search_dirs(root_dir: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![root_dir.to_path_buf()];
    if let Ok(cwd) = std::env::current_dir() {
        dirs.push(cwd);
    }
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join(".docker"));
    }
    dirs.push(PathBuf::from("/.docker"));
    dirs
}

/// The node's credentials, as one `{"auths": …}` document (none when no file has any).
pub(crate) fn node_docker_config(root_dir: &Path) -> Option<serde_json::Value> {
    let dirs = search_dirs(root_dir);
    let read = |path: PathBuf| -> Option<serde_json::Value> {
        let text = std::fs::read(&path).ok()?;
        match serde_json::from_slice(&text) {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::warn!(target: "kubelet::credentialprovider", path = %path.display(), error = %e, "unreadable docker config; skipped");
                None
            }
        }
    };
    dirs.iter().find_map(|d| read(d.join("config.json"))).or_else(|| dirs.iter().find_map(|d| read(d.join(".dockercfg")).map(from_dockercfg)))
}

/// A `.dockercfg` (the `auths` map alone) as a `.dockerconfigjson`.
pub(crate) fn from_dockercfg(auths: serde_json::Value) -> serde_json::Value {
    serde_json::json!({ "auths": auths })
}

/// The docker config a pull secret holds, by the key its type keeps it under: `.dockerconfigjson`
/// (`kubernetes.io/dockerconfigjson`), else `.dockercfg` (`kubernetes.io/dockercfg`).
pub(crate) fn secret_docker_config(data: &std::collections::BTreeMap<String, k8s_openapi::ByteString>) -> Option<serde_json::Value> {
    if let Some(b) = data.get(".dockerconfigjson") {
        return serde_json::from_slice(&b.0).ok();
    }
    data.get(".dockercfg").and_then(|b| serde_json::from_slice(&b.0).ok()).map(from_dockercfg)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;

    use super::*;

    #[test]
    fn both_secret_formats() {
        let json = BTreeMap::from([(".dockerconfigjson".to_string(), ByteString(br#"{"auths":{"r:5000":{"auth":"dTpw"}}}"#.to_vec()))]);
        assert_eq!(secret_docker_config(&json), Some(serde_json::json!({"auths": {"r:5000": {"auth": "dTpw"}}})));
        let cfg = BTreeMap::from([(".dockercfg".to_string(), ByteString(br#"{"r:5000":{"auth":"dTpw"}}"#.to_vec()))]);
        assert_eq!(secret_docker_config(&cfg), Some(serde_json::json!({"auths": {"r:5000": {"auth": "dTpw"}}})));
        let garbage = BTreeMap::from([(".dockerconfigjson".to_string(), ByteString(b"{".to_vec()))]);
        assert_eq!(secret_docker_config(&garbage), None);
        assert_eq!(secret_docker_config(&BTreeMap::new()), None);
    }

    #[test]
    fn the_root_dirs_config_comes_first() {
        let root = tempfile::tempdir().expect("tempdir");
        assert!(node_docker_config(root.path()).is_none_or(|v| v.get("auths").is_some()), "only files of the machine's may be found");
        std::fs::write(root.path().join(".dockercfg"), r#"{"old:1":{"auth":"eDp5"}}"#).expect("write");
        std::fs::write(root.path().join("config.json"), r#"{"auths":{"new:1":{"auth":"eDp5"}}}"#).expect("write");
        assert_eq!(node_docker_config(root.path()), Some(serde_json::json!({"auths": {"new:1": {"auth": "eDp5"}}})));
    }
}
