//! Mirrors k8s.io/apiserver/pkg/server/options/encryptionconfig/config.go (and the validation of
//! apis/apiserver/validation): `--encryption-provider-config`, an `apiserver.config.k8s.io/v1`
//! EncryptionConfiguration, read once at start into a [`PrefixTransformers`] per resource.
//!
//! 1. Parse the YAML (or JSON) and check its kind.
//! 2. Validate every rule: resources named, providers listed, each provider exactly one of
//!    `aescbc`, `secretbox`, `identity` (`aesgcm` and `kms` are refused: kubelab has neither),
//!    each key named (uniquely within its provider) and of its cipher's length.
//! 3. Build each rule's providers in order, each key its own prefixed transformer.
//! 4. [`EncryptionConfig::transformer_for`] gives a resource the first rule that names it (`secrets`,
//!    `deployments.apps`, `*.` for every core resource, `*.apps`, `*.*` for all).

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use base64::Engine as _;
use serde::Deserialize;

use crate::storage::value::encrypt::aes::{CbcTransformer, aescbc_prefix};
use crate::storage::value::encrypt::identity::IdentityTransformer;
use crate::storage::value::encrypt::secretbox::{self, SecretboxTransformer, secretbox_prefix};
use crate::storage::value::{PrefixTransformer, PrefixTransformers};

const API_VERSION: &str = "apiserver.config.k8s.io/v1";
const KIND: &str = "EncryptionConfiguration";

/// `apiserver.config.k8s.io/v1` EncryptionConfiguration, as written.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EncryptionConfiguration {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    resources: Vec<ResourceConfiguration>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResourceConfiguration {
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    providers: Vec<ProviderConfiguration>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderConfiguration {
    aescbc: Option<KeysConfiguration>,
    secretbox: Option<KeysConfiguration>,
    identity: Option<serde_json::Value>,
    aesgcm: Option<serde_json::Value>,
    kms: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeysConfiguration {
    #[serde(default)]
    keys: Vec<Key>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Key {
    #[serde(default)]
    name: String,
    #[serde(default)]
    secret: String,
}

/// Which resources a rule names: `<resource>[.<group>]`, or `*.<group>` (`*.` the core group,
/// `*.*` every group).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct GroupResource {
    group: String,
    resource: String,
}

impl GroupResource {
    fn parse(s: &str) -> Result<Self, String> {
        if s == "*" {
            return Err("resource '*' is not valid: use '*.' for every core resource or '*.*' for all".into());
        }
        // schema.ParseGroupResource: everything after the first dot is the group.
        let (resource, group) = s.split_once('.').unwrap_or((s, ""));
        if resource.is_empty() || (group == "*" && resource != "*") {
            return Err(format!("resource {s:?} is not a resource, '<resource>.<group>', '*.<group>' or '*.*'"));
        }
        Ok(Self { group: group.to_string(), resource: resource.to_string() })
    }

    fn matches(&self, group: &str, resource: &str) -> bool {
        (self.group == "*" || self.group == group) && (self.resource == "*" || self.resource == resource)
    }
}

/// The configuration, read and validated: each rule's resources and its providers.
pub struct EncryptionConfig {
    rules: Vec<(Vec<GroupResource>, Arc<PrefixTransformers>)>,
}

impl EncryptionConfig {
    /// Reads `--encryption-provider-config`; every error names the file and what is wrong.
    pub fn from_file(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("--encryption-provider-config {}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("--encryption-provider-config {}: {e}", path.display()))
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        // Step 1: parse and check the kind.
        let config: EncryptionConfiguration = serde_norway::from_str(text).map_err(|e| format!("error while parsing file: {e}"))?;
        if config.api_version != API_VERSION || config.kind != KIND {
            return Err(format!("not an {API_VERSION} {KIND} (apiVersion {:?}, kind {:?})", config.api_version, config.kind));
        }
        if config.resources.is_empty() {
            return Err("resources: Required value: at least one resource rule is required".into());
        }
        let mut seen = HashSet::new();
        let mut rules = Vec::new();
        for (i, rule) in config.resources.iter().enumerate() {
            // Step 2: what the rule covers, each resource once in the whole file.
            let field = format!("resources[{i}]");
            if rule.resources.is_empty() {
                return Err(format!("{field}.resources: Required value: at least one resource is required"));
            }
            let mut resources = Vec::new();
            for (j, r) in rule.resources.iter().enumerate() {
                let parsed = GroupResource::parse(r).map_err(|e| format!("{field}.resources[{j}]: Invalid value: {e}"))?;
                if !seen.insert(parsed.clone()) {
                    return Err(format!("{field}.resources[{j}]: Duplicate value: {r:?}"));
                }
                resources.push(parsed);
            }
            // Step 3: the providers, in order.
            if rule.providers.is_empty() {
                return Err(format!("{field}.providers: Required value: at least one provider is required"));
            }
            let mut transformers = Vec::new();
            for (j, provider) in rule.providers.iter().enumerate() {
                transformers.extend(provider_transformers(provider, &format!("{field}.providers[{j}]"))?);
            }
            rules.push((resources, Arc::new(PrefixTransformers::new(transformers))));
        }
        Ok(Self { rules })
    }

    /// Step 4: the providers of the first rule naming `resource` of `group` (`""` the core group);
    /// `None`: stored as it is.
    pub fn transformer_for(&self, group: &str, resource: &str) -> Option<Arc<PrefixTransformers>> {
        self.rules.iter().find(|(rs, _)| rs.iter().any(|r| r.matches(group, resource))).map(|(_, t)| t.clone())
    }
}

/// A configuration that encrypts `secrets` with a fresh random 256-bit aescbc key named
/// `key_name`, then reads what was stored before it with identity (the kube-apiserver docs'
/// first example; `kubelab up` writes it once).
pub fn generate_aescbc(key_name: &str) -> Result<String, String> {
    let mut key = [0u8; 32];
    aws_lc_rs::rand::fill(&mut key).map_err(|_| "no random bytes for an encryption key".to_string())?;
    let secret = base64::engine::general_purpose::STANDARD.encode(key);
    Ok(format!(
        "apiVersion: {API_VERSION}
kind: {KIND}
resources:
  - resources:
      - secrets
    providers:
      - aescbc:
          keys:
            - name: {key_name}
              secret: {secret}
      - identity: {{}}
"
    ))
}

/// One provider element: exactly one kind, each of its keys a transformer, in order.
fn provider_transformers(p: &ProviderConfiguration, field: &str) -> Result<Vec<PrefixTransformer>, String> {
    let set = [p.aescbc.is_some(), p.secretbox.is_some(), p.identity.is_some(), p.aesgcm.is_some(), p.kms.is_some()];
    match set.iter().filter(|s| **s).count() {
        0 => return Err(format!("{field}: Invalid value: provider does not contain any of the expected providers: aescbc, secretbox, identity")),
        1 => {}
        _ => return Err(format!("{field}: Invalid value: more than one provider specified in a single element, should split into different list elements")),
    }
    if p.aesgcm.is_some() || p.kms.is_some() {
        let which = if p.aesgcm.is_some() { "aesgcm" } else { "kms" };
        return Err(format!("{field}.{which}: Unsupported value: kubelab has the aescbc, secretbox and identity providers only"));
    }
    if p.identity.is_some() {
        return Ok(vec![PrefixTransformer::new(Vec::new(), Box::new(IdentityTransformer))]);
    }
    let (kind, keys) = match (&p.aescbc, &p.secretbox) {
        (Some(keys), _) => ("aescbc", keys),
        (_, Some(keys)) => ("secretbox", keys),
        _ => unreachable!("one provider is set"),
    };
    if keys.keys.is_empty() {
        return Err(format!("{field}.{kind}.keys: Required value: at least one key is required"));
    }
    let mut names = HashSet::new();
    let mut out = Vec::new();
    for (k, key) in keys.keys.iter().enumerate() {
        let field = format!("{field}.{kind}.keys[{k}]");
        if key.name.is_empty() {
            return Err(format!("{field}.name: Required value: key name is required"));
        }
        // The name is part of the prefix, which a colon would end early.
        if key.name.contains(':') {
            return Err(format!("{field}.name: Invalid value: {:?}: should not contain ':'", key.name));
        }
        if !names.insert(key.name.as_str()) {
            return Err(format!("{field}.name: Duplicate value: {:?}", key.name));
        }
        if key.secret.is_empty() {
            return Err(format!("{field}.secret: Required value: key material is required"));
        }
        let secret = base64::engine::general_purpose::STANDARD
            .decode(key.secret.trim())
            .map_err(|e| format!("{field}.secret: Invalid value: REDACTED: secrets must be base64 encoded: {e}"))?;
        out.push(match kind {
            "aescbc" => {
                let t = CbcTransformer::new(&key.name, &secret).ok_or_else(|| {
                    format!("{field}.secret: Invalid value: REDACTED: secret is not of the expected length, got {}, expected one of [16 24 32]", secret.len())
                })?;
                PrefixTransformer::new(aescbc_prefix(&key.name), Box::new(t))
            }
            _ => {
                let t = SecretboxTransformer::new(&key.name, &secret).ok_or_else(|| {
                    format!("{field}.secret: Invalid value: REDACTED: secret is not of the expected length, got {}, expected {}", secret.len(), secretbox::KEY_LEN)
                })?;
                PrefixTransformer::new(secretbox_prefix(&key.name), Box::new(t))
            }
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY32: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="; // 32 bytes
    const KEY16: &str = "MDEyMzQ1Njc4OWFiY2RlZg=="; // 16 bytes

    fn config(body: &str) -> Result<EncryptionConfig, String> {
        EncryptionConfig::parse(&format!("apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n{body}"))
    }

    #[test]
    fn reads_the_kubernetes_docs_example() {
        let c = config(&format!(
            "resources:
  - resources: [secrets, configmaps]
    providers:
      - aescbc:
          keys:
            - name: key1
              secret: {KEY32}
            - name: key2
              secret: {KEY16}
      - secretbox:
          keys:
            - name: box
              secret: {KEY32}
      - identity: {{}}
  - resources: ['*.apps']
    providers:
      - identity: {{}}
"
        ))
        .unwrap();
        let secrets = c.transformer_for("", "secrets").unwrap();
        assert!(secrets.transform_to_storage(b"x", b"").unwrap().starts_with(b"k8s:enc:aescbc:v1:key1:"));
        assert!(c.transformer_for("", "configmaps").is_some());
        assert!(c.transformer_for("", "pods").is_none());
        assert_eq!(c.transformer_for("apps", "deployments").unwrap().transform_to_storage(b"x", b"").unwrap(), b"x");
        // A group-qualified name is not the core resource.
        assert!(c.transformer_for("other", "secrets").is_none());
    }

    #[test]
    fn a_generated_configuration_reads_back() {
        let text = generate_aescbc("key1").unwrap();
        assert_ne!(text, generate_aescbc("key1").unwrap());
        let c = EncryptionConfig::parse(&text).unwrap();
        let secrets = c.transformer_for("", "secrets").unwrap();
        assert!(secrets.transform_to_storage(b"x", b"").unwrap().starts_with(b"k8s:enc:aescbc:v1:key1:"));
        assert_eq!(secrets.transform_from_storage(b"{}", b"").unwrap().data, b"{}");
    }

    #[test]
    fn wildcards_and_the_first_rule_win() {
        let c = config(&format!(
            "resources:
  - resources: [configmaps]
    providers: [{{identity: {{}}}}]
  - resources: ['*.']
    providers: [{{secretbox: {{keys: [{{name: a, secret: {KEY32}}}]}}}}]
  - resources: ['*.*']
    providers: [{{aescbc: {{keys: [{{name: b, secret: {KEY32}}}]}}}}]
"
        ))
        .unwrap();
        assert_eq!(c.transformer_for("", "configmaps").unwrap().transform_to_storage(b"x", b"").unwrap(), b"x");
        assert!(c.transformer_for("", "secrets").unwrap().transform_to_storage(b"x", b"").unwrap().starts_with(b"k8s:enc:secretbox:v1:a:"));
        assert!(c.transformer_for("batch", "jobs").unwrap().transform_to_storage(b"x", b"").unwrap().starts_with(b"k8s:enc:aescbc:v1:b:"));
    }

    #[test]
    fn refuses_what_kubernetes_refuses() {
        let with = |providers: &str| config(&format!("resources:\n  - resources: [secrets]\n    providers: {providers}\n"));
        for (providers, says) in [
            (format!("[{{aescbc: {{keys: [{{name: k, secret: {KEY32}}}]}}, identity: {{}}}}]"), "more than one provider"),
            ("[{}]".to_string(), "does not contain any of the expected providers"),
            ("[]".to_string(), "at least one provider"),
            ("[{aescbc: {keys: [{name: k, secret: MDEy}]}}]".to_string(), "got 3, expected one of [16 24 32]"),
            (format!("[{{secretbox: {{keys: [{{name: k, secret: {KEY16}}}]}}}}]"), "got 16, expected 32"),
            (format!("[{{aescbc: {{keys: [{{name: '', secret: {KEY32}}}]}}}}]"), "key name is required"),
            (format!("[{{aescbc: {{keys: [{{name: k, secret: {KEY32}}}, {{name: k, secret: {KEY16}}}]}}}}]"), "Duplicate value: \"k\""),
            ("[{aescbc: {keys: [{name: k, secret: '!!'}]}}]".to_string(), "must be base64"),
            ("[{aescbc: {keys: []}}]".to_string(), "at least one key"),
            ("[{kms: {name: x}}]".to_string(), "kms: Unsupported value"),
            ("[{aesgcm: {keys: []}}]".to_string(), "aesgcm: Unsupported value"),
        ] {
            let err = with(&providers).err().unwrap_or_else(|| panic!("{providers} was accepted"));
            assert!(err.contains(says), "{providers}: {err}");
            assert!(!err.contains(KEY32), "{err}");
        }
        let err = config("resources:\n  - resources: [secrets, secrets]\n    providers: [{identity: {}}]\n").err().unwrap();
        assert!(err.contains("resources[0].resources[1]: Duplicate value"), "{err}");
        let err = config("resources:\n  - resources: ['*']\n    providers: [{identity: {}}]\n").err().unwrap();
        assert!(err.contains("'*.*'"), "{err}");
        let err = EncryptionConfig::parse("apiVersion: v1\nkind: ConfigMap\n").err().unwrap();
        assert!(err.contains("not an apiserver.config.k8s.io/v1 EncryptionConfiguration"), "{err}");
    }
}
