//! Mirrors the options of k8s.io/apimachinery/pkg/apis/meta/v1 (ListOptions, DeleteOptions,
//! CreateOptions/UpdateOptions/PatchOptions' `dryRun`, checked as its validation package's
//! `ValidateDryRun` does) and the continue token of k8s.io/apiserver/pkg/storage/continue.go: what
//! a list, watch, write or delete asks for, and where a paged list resumes.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::error::{Cause, Error, Result};

/// Options of a list or watch (metav1.ListOptions).
#[derive(Debug, Default, Clone)]
pub struct ListOptions {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub limit: i64,
    pub continue_token: Option<String>,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
    pub watch: bool,
    pub allow_watch_bookmarks: bool,
    pub send_initial_events: bool,
    pub timeout_seconds: Option<u64>,
}

/// metav1.DeletionPropagation's values.
pub const PROPAGATION_POLICIES: [&str; 3] = ["Foreground", "Background", "Orphan"];
/// The garbage collector's finalizers (metav1.FinalizerOrphanDependents, FinalizerDeleteDependents).
pub const FINALIZER_ORPHAN: &str = "orphan";
pub const FINALIZER_FOREGROUND: &str = "foregroundDeletion";

/// The one dry-run stage there is (`metav1.DryRunAll`): every stage of the write but the store's.
pub const DRY_RUN_ALL: &str = "All";

/// The `dryRun` option every write takes (metav1.CreateOptions, UpdateOptions, PatchOptions,
/// DeleteOptions): the stages to run without their effect. Any value makes the request a dry run
/// (k8s.io/apiserver's `dryrun.IsDryRun`); [`DryRun::validate`] keeps the values to `All`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DryRun(pub Vec<String>);

impl DryRun {
    /// `?dryRun=All` (an empty value is no value, as Go's query decoding leaves it).
    pub fn from_query(q: &HashMap<String, String>) -> Self {
        DryRun(q.get("dryRun").filter(|v| !v.is_empty()).map(|v| vec![v.clone()]).unwrap_or_default())
    }

    /// A body's `dryRun: ["All"]` (DeleteOptions; an Eviction's `deleteOptions`).
    fn from_json(v: &Value) -> Self {
        let values = v.get("dryRun").and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect());
        DryRun(values.unwrap_or_default())
    }

    pub fn is_dry_run(&self) -> bool {
        !self.0.is_empty()
    }

    /// Every value must be `All`; otherwise the request is a 422 Invalid of its options' kind
    /// (`CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ...`), as the
    /// handlers answer when `ValidateCreateOptions` and its siblings fail.
    pub fn validate(&self, options_kind: &str) -> Result<()> {
        if self.0.iter().all(|v| v == DRY_RUN_ALL) {
            return Ok(());
        }
        // Go's `%#v` of the []string the value was decoded into.
        let quoted: Vec<String> = self.0.iter().map(|v| json!(v).to_string()).collect();
        let message = format!("Unsupported value: []string{{{}}}: supported values: \"{DRY_RUN_ALL}\"", quoted.join(", "));
        Err(Error::Invalid {
            kind: options_kind.into(),
            kind_singular: format!("{options_kind}.meta.k8s.io"),
            name: String::new(),
            causes: vec![Cause { field: "dryRun".into(), reason: "FieldValueNotSupported".into(), message }],
        })
    }
}

/// The options of a create, update or patch that kubelab acts on beyond the query parameters
/// read where they are used (`fieldManager`, `fieldValidation`, `force`): metav1.CreateOptions,
/// UpdateOptions and PatchOptions, which clients send in the query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteOptions {
    pub dry_run: DryRun,
}

impl WriteOptions {
    /// The options of the query, validated; `kind` names them in an error (`CreateOptions`,
    /// `UpdateOptions`, `PatchOptions`).
    pub fn from_query(kind: &str, q: &HashMap<String, String>) -> Result<Self> {
        let dry_run = DryRun::from_query(q);
        dry_run.validate(kind)?;
        let causes = validate_write_query(q);
        if !causes.is_empty() {
            return Err(Error::Invalid { kind: kind.into(), kind_singular: format!("{kind}.meta.k8s.io"), name: String::new(), causes });
        }
        Ok(Self { dry_run })
    }

    pub fn is_dry_run(&self) -> bool {
        self.dry_run.is_dry_run()
    }
}

/// metav1.FieldManagerMaxLength.
pub const FIELD_MANAGER_MAX_LENGTH: usize = 128;

/// The rest of ValidateCreateOptions (and its Update and Patch siblings) on the query:
/// `fieldManager` (ValidateFieldManager: at most 128 bytes, printable) and `fieldValidation`
/// (ValidateFieldValidation: one of "", Ignore, Strict, Warn — the sorted set Go prints).
fn validate_write_query(q: &HashMap<String, String>) -> Vec<Cause> {
    let mut causes = Vec::new();
    let manager = q.get("fieldManager").map(String::as_str).unwrap_or("");
    if manager.len() > FIELD_MANAGER_MAX_LENGTH {
        causes.push(Cause { field: "fieldManager".into(), reason: "FieldValueTooLong".into(), message: format!("Too long: must have at most {FIELD_MANAGER_MAX_LENGTH} bytes") });
    }
    if let Some((i, c)) = manager.chars().enumerate().find(|(_, c)| c.is_control()) {
        causes.push(Cause {
            field: "fieldManager".into(),
            reason: "FieldValueInvalid".into(),
            message: format!("Invalid value: {}: invalid character U+{:04X} (at position {i})", json!(manager), u32::from(c)),
        });
    }
    let validation = q.get("fieldValidation").map(String::as_str).unwrap_or("");
    if !["", "Ignore", "Strict", "Warn"].contains(&validation) {
        causes.push(Cause {
            field: "fieldValidation".into(),
            reason: "FieldValueNotSupported".into(),
            message: format!("Unsupported value: {}: supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"", json!(validation)),
        });
    }
    causes
}

/// Options of a delete (metav1.DeleteOptions).
#[derive(Debug, Default, Clone)]
pub struct DeleteOptions {
    pub grace_period_seconds: Option<i64>,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
    pub propagation_policy: Option<String>,
    /// The deprecated `orphanDependents` (true: Orphan, false: Background).
    pub orphan_dependents: Option<bool>,
    /// Everything a delete does (preconditions, the graceful marking, admission) but the write.
    pub dry_run: DryRun,
}

impl DeleteOptions {
    pub fn from_json(v: &Value) -> Self {
        Self {
            grace_period_seconds: v.get("gracePeriodSeconds").and_then(Value::as_i64),
            precondition_uid: v.pointer("/preconditions/uid").and_then(Value::as_str).map(String::from),
            precondition_resource_version: v.pointer("/preconditions/resourceVersion").and_then(Value::as_str).map(String::from),
            propagation_policy: v.get("propagationPolicy").and_then(Value::as_str).map(String::from),
            orphan_dependents: v.get("orphanDependents").and_then(Value::as_bool),
            dry_run: DryRun::from_json(v),
        }
    }

    /// The options of a DELETE: its body's, with what the query sets and the body does not
    /// (`gracePeriodSeconds` from the query wins, as it always has here); validated as
    /// `ValidateDeleteOptions` validates `dryRun`.
    pub fn from_request(body: Option<&Value>, q: &HashMap<String, String>) -> Result<Self> {
        let mut opts = body.map(Self::from_json).unwrap_or_default();
        if let Some(g) = q.get("gracePeriodSeconds").and_then(|g| g.parse().ok()) {
            opts.grace_period_seconds = Some(g);
        }
        if !opts.dry_run.is_dry_run() {
            opts.dry_run = DryRun::from_query(q);
        }
        if opts.propagation_policy.is_none() {
            opts.propagation_policy = q.get("propagationPolicy").cloned();
        }
        if opts.orphan_dependents.is_none() {
            opts.orphan_dependents = q.get("orphanDependents").and_then(|v| v.parse().ok());
        }
        opts.dry_run.validate("DeleteOptions")?;
        opts.validate_propagation()?;
        Ok(opts)
    }

    /// ValidateDeleteOptions' part on propagation: a known policy, and not both it and the
    /// deprecated `orphanDependents`.
    pub fn validate_propagation(&self) -> Result<()> {
        let invalid = |field: &str, reason: &str, message: String| Error::Invalid {
            kind: "DeleteOptions".into(),
            kind_singular: "DeleteOptions.meta.k8s.io".into(),
            name: String::new(),
            causes: vec![Cause { field: field.into(), reason: reason.into(), message }],
        };
        if let (Some(orphan), Some(_)) = (self.orphan_dependents, &self.propagation_policy) {
            return Err(invalid("orphanDependents", "FieldValueInvalid", format!("Invalid value: {orphan}: OrphanDependents and DeletionPropagation cannot be both set")));
        }
        if let Some(p) = &self.propagation_policy
            && !PROPAGATION_POLICIES.contains(&p.as_str())
        {
            return Err(invalid(
                "propagationPolicy",
                "FieldValueNotSupported",
                format!("Unsupported value: {}: supported values: \"Foreground\", \"Background\", \"Orphan\"", json!(p)),
            ));
        }
        Ok(())
    }

    pub fn is_dry_run(&self) -> bool {
        self.dry_run.is_dry_run()
    }
}

/// A continue token: the list's revision and the key to resume at (Kubernetes' format).
pub fn encode_continue(rev: i64, start: &str) -> String {
    let raw = serde_json::to_vec(&json!({"v": "meta.k8s.io/v1", "rv": rev, "start": start})).unwrap_or_default();
    serde_json::to_value(k8s_openapi::ByteString(raw)).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default()
}

pub fn decode_continue(token: &str) -> Result<(i64, String)> {
    let bad = || Error::BadRequest("continue key is not valid: illegal base64 data".into());
    let bytes: k8s_openapi::ByteString = serde_json::from_value(json!(token)).map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&bytes.0).map_err(|_| bad())?;
    let rev = v.get("rv").and_then(Value::as_i64).ok_or_else(bad)?;
    let start = v.get("start").and_then(Value::as_str).ok_or_else(bad)?.to_string();
    Ok((rev, start))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn field_manager_and_field_validation_are_validated_as_kube_apiserver_does() {
        // What the fuzzing found: `fieldValidation=Bogus` and a 200-byte fieldManager were taken.
        let e = WriteOptions::from_query("CreateOptions", &query(&[("fieldValidation", "Bogus")])).expect_err("Bogus");
        assert_eq!(e.code(), 422);
        assert_eq!(e.to_string(), r#"CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Bogus": supported values: "", "Ignore", "Strict", "Warn""#);
        let long = "m".repeat(129);
        let e = WriteOptions::from_query("PatchOptions", &query(&[("fieldManager", &long)])).expect_err("too long");
        assert_eq!(e.to_string(), r#"PatchOptions.meta.k8s.io "" is invalid: fieldManager: Too long: must have at most 128 bytes"#);
        assert_eq!(e.to_status()["details"]["causes"][0]["reason"], "FieldValueTooLong");
        let e = WriteOptions::from_query("UpdateOptions", &query(&[("fieldManager", "a\u{7}b")])).expect_err("a bell");
        assert!(e.to_string().ends_with("invalid character U+0007 (at position 1)"), "{e}");
        for ok in [[("fieldManager", "m".repeat(128)), ("fieldValidation", "Strict".to_string())], [("fieldManager", String::new()), ("fieldValidation", String::new())]] {
            let q: HashMap<String, String> = ok.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
            assert!(WriteOptions::from_query("CreateOptions", &q).is_ok(), "{q:?}");
        }
    }

    #[test]
    fn dry_run_comes_from_the_query_and_must_be_all() {
        assert!(!WriteOptions::from_query("CreateOptions", &query(&[])).expect("no options").is_dry_run());
        assert!(!WriteOptions::from_query("CreateOptions", &query(&[("dryRun", "")])).expect("empty").is_dry_run());
        assert!(WriteOptions::from_query("PatchOptions", &query(&[("dryRun", "All")])).expect("All").is_dry_run());
        let e = WriteOptions::from_query("CreateOptions", &query(&[("dryRun", "Foo")])).expect_err("Foo");
        assert_eq!(e.code(), 422);
        assert_eq!(e.to_string(), r#"CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: []string{"Foo"}: supported values: "All""#);
        let status = e.to_status();
        assert_eq!(status["reason"], "Invalid");
        assert_eq!(status["details"]["kind"], "CreateOptions");
        assert_eq!(status["details"]["causes"][0]["reason"], "FieldValueNotSupported");
        assert_eq!(status["details"]["causes"][0]["field"], "dryRun");
        let two = DryRun(vec!["All".into(), "Bar".into()]).validate("DeleteOptions").expect_err("Bar");
        assert!(two.to_string().ends_with(r#"Unsupported value: []string{"All", "Bar"}: supported values: "All""#), "{two}");
    }

    #[test]
    fn delete_options_come_from_the_body_and_the_query() {
        let body = json!({"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 5, "dryRun": ["All"],
                          "preconditions": {"uid": "u1", "resourceVersion": "9"}, "propagationPolicy": "Background"});
        let opts = DeleteOptions::from_request(Some(&body), &query(&[])).expect("valid");
        assert!(opts.is_dry_run(), "kubectl delete --dry-run=server sends it in the body");
        assert_eq!(opts.grace_period_seconds, Some(5));
        assert_eq!(opts.precondition_uid.as_deref(), Some("u1"));
        assert_eq!(opts.precondition_resource_version.as_deref(), Some("9"));
        assert_eq!(opts.propagation_policy.as_deref(), Some("Background"));

        let opts = DeleteOptions::from_request(None, &query(&[("dryRun", "All"), ("gracePeriodSeconds", "0")])).expect("valid");
        assert!(opts.is_dry_run(), "no body: the query's");
        assert_eq!(opts.grace_period_seconds, Some(0));
        let opts = DeleteOptions::from_request(Some(&json!({"gracePeriodSeconds": 5})), &query(&[("dryRun", "All")])).expect("valid");
        assert!(opts.is_dry_run(), "what the body does not set, the query does");
        assert!(!DeleteOptions::from_request(Some(&json!({})), &query(&[])).expect("valid").is_dry_run());

        let e = DeleteOptions::from_request(Some(&json!({"dryRun": ["Foo"]})), &query(&[])).expect_err("Foo");
        assert_eq!(e.to_string(), r#"DeleteOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: []string{"Foo"}: supported values: "All""#);
        assert!(DeleteOptions::from_request(None, &query(&[("dryRun", "Foo")])).is_err());
    }
}
