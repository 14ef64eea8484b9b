//! Mirrors kubelet's pkg/credentialprovider/secrets/secrets.go: a pod's image pull secrets
//! (`kubernetes.io/dockerconfigjson`'s `{"auths": {…}}` and `kubernetes.io/dockercfg`'s map
//! alone) as one keyring, looked up before the node's own credentials.

use std::collections::BTreeMap;

use super::config::read_docker_config_json_from_bytes;
use super::keyring::BasicDockerKeyring;

/// The docker config a pull secret holds, by the key its type keeps it under:
/// `.dockerconfigjson`, else `.dockercfg` (made a `.dockerconfigjson`). None: neither, or not
/// JSON.
pub(crate) fn secret_docker_config(data: &BTreeMap<String, k8s_openapi::ByteString>) -> Option<serde_json::Value> {
    let parse = |key: &str, b: &k8s_openapi::ByteString| match serde_json::from_slice::<serde_json::Value>(&b.0) {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::warn!(target: "kubelet::credentialprovider", key, error = %e, "image pull secret is not JSON; skipped");
            None
        }
    };
    if let Some(b) = data.get(".dockerconfigjson").filter(|b| !b.0.is_empty()) {
        return parse(".dockerconfigjson", b);
    }
    let cfg = data.get(".dockercfg").filter(|b| !b.0.is_empty()).and_then(|b| parse(".dockercfg", b))?;
    Some(serde_json::json!({ "auths": cfg }))
}

/// `MakeDockerKeyring`'s first half: every pull secret's entries in one keyring, so that the
/// most specific key of any secret is tried first. A secret whose entries do not decode (an
/// `auth` that is not `base64(user:password)`) fails the pull, as in kubelet.
pub(crate) fn make_docker_keyring(pull_secrets: &[serde_json::Value]) -> Result<BasicDockerKeyring, serde_json::Error> {
    let mut keyring = BasicDockerKeyring::default();
    for secret in pull_secrets {
        // The configs were JSON already; the round trip decodes their entries.
        keyring.add(&read_docker_config_json_from_bytes(secret.to_string().as_bytes())?);
    }
    Ok(keyring)
}

#[cfg(test)]
mod tests {
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
    fn all_secrets_form_one_keyring() {
        let a = serde_json::json!({"auths": {"r.io": {"username": "a", "password": "p"}}});
        let b = serde_json::json!({"auths": {"r.io/team": {"username": "b", "password": "p"}}});
        let k = make_docker_keyring(&[a, b]).expect("keyring");
        // The second secret's key is more specific: tried first.
        let users: Vec<String> = k.lookup("r.io/team/app").into_iter().map(|c| c.username).collect();
        assert_eq!(users, ["b", "a"]);
        let bad = serde_json::json!({"auths": {"r.io": {"auth": "bm9jb2xvbg=="}}});
        assert!(make_docker_keyring(&[bad]).expect_err("no colon").to_string().contains("base64(username:password)"));
    }
}
