//! Mirrors kubelet's pkg/credentialprovider/plugin/config.go: the CredentialProviderConfig file
//! of `--image-credential-provider-config` (kubelet.config.k8s.io, YAML or JSON), decoded
//! strictly and validated as kubelet validates it.

use std::time::Duration;

use apimachinery::validation::FieldError;
use serde::Deserialize;
use serde_json::Value;

/// The config's group, kubelet's `kubeletconfig.GroupName`.
pub(crate) const GROUP_NAME: &str = "kubelet.config.k8s.io";
const CONFIG_VERSIONS: [&str; 3] = ["v1", "v1alpha1", "v1beta1"];

/// The request/response API versions a provider may speak (kubelet's `apiVersions`), sorted as
/// kubelet lists them in its error.
pub(crate) const API_VERSIONS: [&str; 3] =
    ["credentialprovider.kubelet.k8s.io/v1", "credentialprovider.kubelet.k8s.io/v1alpha1", "credentialprovider.kubelet.k8s.io/v1beta1"];

/// `CredentialProviderConfig`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct CredentialProviderConfig {
    #[serde(default)]
    pub(crate) providers: Vec<CredentialProvider>,
}

/// `CredentialProvider`: one exec plugin.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct CredentialProvider {
    /// The executable's file name in `--image-credential-provider-bin-dir`.
    #[serde(default)]
    pub(crate) name: String,
    /// Globs of the images it answers for (as keyring keys are matched).
    #[serde(default)]
    pub(crate) match_images: Vec<String>,
    /// How long its answers are kept when it says nothing (`metav1.Duration`, Go's syntax).
    #[serde(default, deserialize_with = "deserialize_duration")]
    pub(crate) default_cache_duration: Option<GoDuration>,
    /// The CredentialProviderRequest/Response version it speaks.
    #[serde(default)]
    pub(crate) api_version: String,
    #[serde(default)]
    pub(crate) args: Vec<String>,
    #[serde(default)]
    pub(crate) env: Vec<ExecEnvVar>,
    /// Service account tokens for the plugin: kubelab has not got them (see the caveats).
    #[serde(default)]
    pub(crate) token_attributes: Option<Value>,
}

/// `ExecEnvVar`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExecEnvVar {
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) value: String,
}

/// A Go `time.Duration`, signed, as `metav1.Duration` reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GoDuration {
    pub(crate) negative: bool,
    pub(crate) duration: Duration,
}

fn deserialize_duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<GoDuration>, D::Error> {
    let s = Option::<String>::deserialize(d)?;
    s.map(|s| parse_go_duration(&s).map_err(serde::de::Error::custom)).transpose()
}

/// Go's `time.ParseDuration`: `[-+]` then numbers with units (`1h30m`, `1.5s`, `300ms`), or `0`.
pub(crate) fn parse_go_duration(s: &str) -> Result<GoDuration, String> {
    let bad = || format!("time: invalid duration {}", Value::from(s));
    let (negative, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Ok(GoDuration { negative, duration: Duration::ZERO });
    }
    if rest.is_empty() {
        return Err(bad());
    }
    let mut nanos: f64 = 0.0;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let n: f64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "" => return Err(format!("time: missing unit in duration {}", Value::from(s))),
            u => return Err(format!("time: unknown unit {} in duration {}", Value::from(u), Value::from(s))),
        };
        nanos += n * scale;
        rest = &rest[unit_len..];
    }
    if nanos > i64::MAX as f64 {
        return Err(bad());
    }
    Ok(GoDuration { negative: negative && nanos > 0.0, duration: Duration::from_nanos(nanos as u64) })
}

/// `decode`: YAML or JSON (JSON is YAML), strictly — an unknown field is an error, as with
/// kubelet's strict codec — of kind CredentialProviderConfig in kubelet.config.k8s.io.
pub(crate) fn decode(data: &str) -> Result<CredentialProviderConfig, String> {
    let mut v: Value = serde_norway::from_str(data).map_err(|e| e.to_string())?;
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or_default().to_string();
    let api_version = v.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_string();
    if api_version.is_empty() {
        return Err(format!("Object 'apiVersion' is missing in '{v}'"));
    }
    if kind.is_empty() {
        return Err(format!("Object 'Kind' is missing in '{v}'"));
    }
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version.as_str()));
    if kind != "CredentialProviderConfig" {
        return Err(format!("failed to decode {} (wrong Kind)", Value::from(kind.as_str())));
    }
    if group != GROUP_NAME {
        return Err(format!("failed to decode CredentialProviderConfig, unexpected Group: {group}"));
    }
    if !CONFIG_VERSIONS.contains(&version) {
        return Err(format!("no kind \"CredentialProviderConfig\" is registered for version \"{api_version}\""));
    }
    // Checked: what is left is the config's own fields.
    if let Value::Object(m) = &mut v {
        m.remove("kind");
        m.remove("apiVersion");
    }
    serde_json::from_value(v).map_err(|e| format!("strict decoding error: {e}"))
}

/// `validateCredentialProviderConfig`, with kubelet's field paths and words. The service
/// account token attributes are refused as kubelet refuses them with their feature gate off.
pub(crate) fn validate_credential_provider_config(config: &CredentialProviderConfig) -> Vec<FieldError> {
    let mut errs = vec![];
    if config.providers.is_empty() {
        errs.push(FieldError::required("providers", "at least 1 item in plugins is required"));
    }
    let mut seen = std::collections::HashSet::new();
    for p in &config.providers {
        let name = Value::from(p.name.as_str());
        if p.name.contains('/') {
            errs.push(FieldError::invalid("providers.name", &name, "provider name cannot contain '/'"));
        }
        if p.name.contains(' ') {
            errs.push(FieldError::invalid("providers.name", &name, "provider name cannot contain spaces"));
        }
        if p.name == "." {
            errs.push(FieldError::invalid("providers.name", &name, "provider name cannot be '.'"));
        }
        if p.name == ".." {
            errs.push(FieldError::invalid("providers.name", &name, "provider name cannot be '..'"));
        }
        if !seen.insert(p.name.as_str()) {
            errs.push(FieldError::duplicate("providers.name", &name));
        }
        if p.api_version.is_empty() {
            errs.push(FieldError::required("providers.apiVersion", ""));
        } else if !API_VERSIONS.contains(&p.api_version.as_str()) {
            errs.push(FieldError::not_supported("providers.apiVersion", &Value::from(p.api_version.as_str()), &API_VERSIONS));
        }
        if p.match_images.is_empty() {
            errs.push(FieldError::required("providers.matchImages", "at least 1 item in matchImages is required"));
        }
        for m in &p.match_images {
            if let Err(e) = super::super::keyring::parse_schemeless_url(m) {
                errs.push(FieldError::invalid("providers.matchImages", &Value::from(m.as_str()), &format!("match image is invalid: {e}")));
            }
        }
        match p.default_cache_duration {
            None => errs.push(FieldError::required("providers.defaultCacheDuration", "")),
            Some(d) if d.negative => errs.push(FieldError::invalid_shown(
                "providers.defaultCacheDuration",
                // A metav1.Duration prints as its String(), unquoted.
                &format!("-{}", crate::format::go_duration(d.duration)),
                "must be greater than or equal to 0",
            )),
            Some(_) => {}
        }
        if p.token_attributes.is_some() {
            errs.push(FieldError::forbidden(
                "providers.tokenAttributes",
                "tokenAttributes is not supported when KubeletServiceAccountTokenForCredentialProviders feature gate is disabled",
            ));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(name: &str) -> CredentialProvider {
        CredentialProvider {
            name: name.into(),
            match_images: vec!["*.registry.io".into()],
            default_cache_duration: Some(GoDuration { negative: false, duration: Duration::from_secs(60) }),
            api_version: API_VERSIONS[0].into(),
            ..Default::default()
        }
    }

    /// plugin/config_test.go's Test_validateCredentialProviderConfig, by the error each case gives.
    #[test]
    fn validation_is_kubelets() {
        let with = |f: fn(&mut CredentialProvider)| {
            let mut p = provider("foobar");
            f(&mut p);
            vec![p]
        };
        let cases: Vec<(&str, Vec<CredentialProvider>, Vec<&str>)> = vec![
            ("no providers", vec![], vec!["providers: Required value: at least 1 item in plugins is required"]),
            ("valid", vec![provider("foobar"), provider("other")], vec![]),
            ("no matchImages", with(|p| p.match_images.clear()), vec!["providers.matchImages: Required value: at least 1 item in matchImages is required"]),
            (
                "invalid matchImages",
                with(|p| p.match_images = vec!["%invalid%".into()]),
                vec![r#"providers.matchImages: Invalid value: "%invalid%": match image is invalid: parse "https://%invalid%": invalid URL escape "%in""#],
            ),
            ("no defaultCacheDuration", with(|p| p.default_cache_duration = None), vec!["providers.defaultCacheDuration: Required value"]),
            (
                "negative defaultCacheDuration",
                with(|p| p.default_cache_duration = Some(GoDuration { negative: true, duration: Duration::from_secs(60) })),
                vec![r#"providers.defaultCacheDuration: Invalid value: -1m0s: must be greater than or equal to 0"#],
            ),
            ("zero defaultCacheDuration", with(|p| p.default_cache_duration = Some(GoDuration { negative: false, duration: Duration::ZERO })), vec![]),
            ("name with /", with(|p| p.name = "foo/../bar".into()), vec![r#"providers.name: Invalid value: "foo/../bar": provider name cannot contain '/'"#]),
            ("name with space", with(|p| p.name = "foo bar".into()), vec![r#"providers.name: Invalid value: "foo bar": provider name cannot contain spaces"#]),
            ("name .", with(|p| p.name = ".".into()), vec![r#"providers.name: Invalid value: ".": provider name cannot be '.'"#]),
            ("name ..", with(|p| p.name = "..".into()), vec![r#"providers.name: Invalid value: "..": provider name cannot be '..'"#]),
            ("duplicate names", vec![provider("foobar"), provider("foobar")], vec![r#"providers.name: Duplicate value: "foobar""#]),
            ("no apiVersion", with(|p| p.api_version.clear()), vec!["providers.apiVersion: Required value"]),
            (
                "unsupported apiVersion",
                with(|p| p.api_version = "credentialprovider.kubelet.k8s.io/v1gamma1".into()),
                vec![
                    r#"providers.apiVersion: Unsupported value: "credentialprovider.kubelet.k8s.io/v1gamma1": supported values: "credentialprovider.kubelet.k8s.io/v1", "credentialprovider.kubelet.k8s.io/v1alpha1", "credentialprovider.kubelet.k8s.io/v1beta1""#,
                ],
            ),
            (
                "tokenAttributes",
                with(|p| p.token_attributes = Some(serde_json::json!({"serviceAccountTokenAudience": "a"}))),
                vec!["providers.tokenAttributes: Forbidden: tokenAttributes is not supported when KubeletServiceAccountTokenForCredentialProviders feature gate is disabled"],
            ),
        ];
        for (name, providers, want) in cases {
            let got: Vec<String> = validate_credential_provider_config(&CredentialProviderConfig { providers }).iter().map(|e| e.to_string()).collect();
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn decoding() {
        let yaml = "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n- name: ecr\n  matchImages: ['*.dkr.ecr.*.amazonaws.com']\n  defaultCacheDuration: 12h\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n  args: [get-credentials]\n  env: [{name: AWS_PROFILE, value: temp}]\n";
        let c = decode(yaml).expect("yaml");
        assert_eq!(c.providers[0].name, "ecr");
        assert_eq!(c.providers[0].default_cache_duration, Some(GoDuration { negative: false, duration: Duration::from_secs(12 * 3600) }));
        assert_eq!(c.providers[0].env[0].value, "temp");
        let json = r#"{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"CredentialProviderConfig","providers":[{"name":"a","matchImages":["r.io"],"defaultCacheDuration":"0s","apiVersion":"credentialprovider.kubelet.k8s.io/v1"}]}"#;
        assert_eq!(decode(json).expect("json").providers[0].match_images, ["r.io"]);
        for (data, want) in [
            (r#"{"apiVersion":"kubelet.config.k8s.io/v1","kind":"KubeletConfiguration"}"#, r#"failed to decode "KubeletConfiguration" (wrong Kind)"#),
            (r#"{"apiVersion":"other.io/v1","kind":"CredentialProviderConfig"}"#, "unexpected Group: other.io"),
            (r#"{"kind":"CredentialProviderConfig"}"#, "Object 'apiVersion' is missing"),
            (r#"{"apiVersion":"kubelet.config.k8s.io/v1","kind":"CredentialProviderConfig","providers":[{"nmae":"a"}]}"#, "unknown field `nmae`"),
            (r#"{"apiVersion":"kubelet.config.k8s.io/v1","kind":"CredentialProviderConfig","providers":[{"defaultCacheDuration":"12"}]}"#, "time: missing unit in duration"),
        ] {
            let e = decode(data).expect_err(data);
            assert!(e.contains(want), "{data}: {e}");
        }
    }

    #[test]
    fn go_durations() {
        for (s, want) in [("0", Some((false, 0))), ("12h", Some((false, 43_200_000))), ("1m30s", Some((false, 90_000))), ("1.5s", Some((false, 1_500))), ("-1m", Some((true, 60_000))), ("+5ms", Some((false, 5))), ("", None), ("5", None), ("5d", None)] {
            let got = parse_go_duration(s).ok().map(|d| (d.negative, d.duration.as_millis() as u64));
            assert_eq!(got, want, "{s:?}");
        }
    }
}
