//! Mirrors kubelet's pkg/credentialprovider/config.go: the docker config formats
//! (`config.json`'s `{"auths": …}` and the older `.dockercfg`, the `auths` map alone), their
//! entries (an `auth` field decoded into username and password, as `DockerConfigEntry`'s
//! UnmarshalJSON does), and `ReadDockerConfigFile`, which finds the node's own.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::Deserialize;

/// `DockerConfig`: credentials by registry URL (`https://index.docker.io/v1/`,
/// `registry.example.com:5000/team`, `*.example.com`). The keyring sorts the keys itself.
pub(crate) type DockerConfig = BTreeMap<String, DockerConfigEntry>;

/// `DockerConfigEntry`: what one key of a docker config holds, with `auth` already decoded.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "DockerConfigEntryWithAuth")]
pub(crate) struct DockerConfigEntry {
    pub(crate) username: String,
    pub(crate) password: String,
    pub(crate) email: String,
}

/// `dockerConfigEntryWithAuth`: an entry as written. Unknown fields (`identitytoken`,
/// `serveraddress`) are ignored, as kubelet ignores them.
#[derive(Deserialize)]
struct DockerConfigEntryWithAuth {
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    email: Option<String>,
    #[serde(default)]
    auth: Option<String>,
}

impl TryFrom<DockerConfigEntryWithAuth> for DockerConfigEntry {
    type Error = String;
    fn try_from(e: DockerConfigEntryWithAuth) -> Result<Self, String> {
        let mut entry = DockerConfigEntry { username: e.username.unwrap_or_default(), password: e.password.unwrap_or_default(), email: e.email.unwrap_or_default() };
        // An `auth` field wins over `username`/`password`, as in kubelet.
        if let Some(auth) = e.auth.filter(|a| !a.is_empty()) {
            (entry.username, entry.password) = decode_docker_config_field_auth(&auth)?;
        }
        Ok(entry)
    }
}

/// `decodeDockerConfigFieldAuth`: `base64(username:password)`, padded or not.
pub(crate) fn decode_docker_config_field_auth(field: &str) -> Result<(String, String), String> {
    let engine = if field.trim().ends_with('=') { &base64::engine::general_purpose::STANDARD } else { &base64::engine::general_purpose::STANDARD_NO_PAD };
    let decoded = engine.decode(field).map_err(|e| format!("illegal base64 data: {e}"))?;
    let decoded = String::from_utf8_lossy(&decoded);
    match decoded.split_once(':') {
        Some((u, p)) => Ok((u.to_string(), p.to_string())),
        None => Err("must be formatted as base64(username:password)".into()),
    }
}

/// `DockerConfigJSON`: `config.json` and a `kubernetes.io/dockerconfigjson` secret.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct DockerConfigJson {
    #[serde(default)]
    pub(crate) auths: DockerConfig,
}

/// `readDockerConfigJSONFileFromBytes`.
pub(crate) fn read_docker_config_json_from_bytes(b: &[u8]) -> Result<DockerConfig, serde_json::Error> {
    serde_json::from_slice::<DockerConfigJson>(b).map(|c| c.auths)
}

/// `readDockerConfigFileFromBytes` (a `.dockercfg`: the map alone).
pub(crate) fn read_docker_config_file_from_bytes(b: &[u8]) -> Result<DockerConfig, serde_json::Error> {
    serde_json::from_slice(b)
}

/// `DefaultDockerConfigJSONPaths` and `DefaultDockercfgPaths`: the directories searched for
/// `config.json` and for `.dockercfg`, in kubelet's order. The preferred path is `--root-dir`
/// (kubelet's `SetPreferredDockercfgPath`); `.dockercfg` is looked for in `$HOME` and `/`,
/// `config.json` in `$HOME/.docker` and `/.docker`.
fn search_paths(root_dir: &Path, json: bool) -> Vec<PathBuf> {
    let mut dirs = vec![root_dir.to_path_buf()];
    if let Ok(cwd) = std::env::current_dir() {
        dirs.push(cwd);
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let root = PathBuf::from("/");
    if json {
        dirs.extend(home.map(|h| h.join(".docker")));
        dirs.push(root.join(".docker"));
    } else {
        dirs.extend(home);
        dirs.push(root);
    }
    dirs
}

/// `ReadDockerConfigFile`: the first valid `config.json` of the search path, else the first
/// valid `.dockercfg`; none: an empty config. Read at every pull, so a changed file counts at
/// once. Blocking file I/O: callers run it off the executor.
pub(crate) fn read_docker_config_file(root_dir: &Path) -> DockerConfig {
    let read = |path: PathBuf, parse: fn(&[u8]) -> Result<DockerConfig, serde_json::Error>| -> Option<DockerConfig> {
        let bytes = std::fs::read(&path).ok()?;
        match parse(&bytes) {
            Ok(cfg) => Some(cfg),
            Err(e) => {
                tracing::warn!(target: "kubelet::credentialprovider", path = %path.display(), error = %e, "unreadable docker config; skipped");
                None
            }
        }
    };
    search_paths(root_dir, true)
        .into_iter()
        .find_map(|d| read(d.join("config.json"), read_docker_config_json_from_bytes))
        .or_else(|| search_paths(root_dir, false).into_iter().find_map(|d| read(d.join(".dockercfg"), read_docker_config_file_from_bytes)))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_decode_auth() {
        // (entry, want (username, password), or a piece of the error)
        type Want = Result<(&'static str, &'static str), &'static str>;
        let cases: &[(&str, Want)] = &[
            (r#"{"auth":"Zm9vOmJhcg=="}"#, Ok(("foo", "bar"))),
            (r#"{"auth":"Zm9vOmJhcg"}"#, Ok(("foo", "bar"))),
            (r#"{"username":"u","password":"p"}"#, Ok(("u", "p"))),
            (r#"{"username":"u","password":"p","auth":"Zm9vOmJhcg=="}"#, Ok(("foo", "bar"))),
            (r#"{"auth":"Zm9vOmJhcjpiYXo="}"#, Ok(("foo", "bar:baz"))),
            (r#"{"auth":"","identitytoken":"t"}"#, Ok(("", ""))),
            (r#"{"username":null}"#, Ok(("", ""))),
            (r#"{"auth":"Zm9vYmFy"}"#, Err("must be formatted as base64(username:password)")),
            (r#"{"auth":"!!"}"#, Err("illegal base64 data")),
        ];
        for (json, want) in cases {
            let got = serde_json::from_str::<DockerConfigEntry>(json);
            match (got, want) {
                (Ok(e), Ok((u, p))) => assert_eq!((e.username.as_str(), e.password.as_str()), (*u, *p), "{json}"),
                (Err(e), Err(msg)) => assert!(e.to_string().contains(msg), "{json}: {e}"),
                (got, want) => panic!("{json}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn the_root_dirs_config_json_comes_first() {
        let root = tempfile::tempdir().expect("tempdir");
        std::fs::write(root.path().join(".dockercfg"), r#"{"old:1":{"auth":"eDp5"}}"#).expect("write");
        // A `.dockercfg` counts when no `config.json` is found (the machine's own may be).
        if !search_paths(root.path(), true).iter().any(|d| d.join("config.json").exists()) {
            assert!(read_docker_config_file(root.path()).contains_key("old:1"));
        }
        std::fs::write(root.path().join("config.json"), r#"{"auths":{"new:1":{"auth":"eDp5"}}}"#).expect("write");
        let cfg = read_docker_config_file(root.path());
        assert_eq!(cfg.keys().collect::<Vec<_>>(), ["new:1"]);
        assert_eq!(cfg["new:1"], DockerConfigEntry { username: "x".into(), password: "y".into(), email: String::new() });
    }
}
