//! Mirrors the options of k8s.io/apimachinery/pkg/apis/meta/v1 (ListOptions, checked as
//! meta/internalversion/validation's `ValidateListOptions` does; DeleteOptions,
//! CreateOptions/UpdateOptions/PatchOptions' `dryRun`, checked as its validation package's
//! `ValidateDryRun` does) and the continue token of k8s.io/apiserver/pkg/storage/continue.go: what
//! a list, watch, write or delete asks for, and where a paged list resumes; and the reading of a
//! boolean query parameter (apimachinery's `Convert_Slice_string_To_bool`).

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::error::{Cause, Error, Result};

/// A boolean query value as kube-apiserver's parameter codec reads it
/// (`runtime.Convert_Slice_string_To_bool`, also behind every `*bool` option): `0` and `false`
/// in any case are false; every other value is true — `True` (the Python client's), `maybe`,
/// and the empty one (`?watch=`, `?watch`) among them. A boolean parameter is never a 400.
/// (Not Go's `strconv.ParseBool`, which refuses `maybe` and reads `f` as false.)
pub fn parse_bool(v: &str) -> bool {
    !(v == "0" || v.eq_ignore_ascii_case("false"))
}

/// An integer query parameter, as the parameter codec reads one (`Convert_Slice_string_To_int64`
/// and its pointer form): absent or empty is None; anything else that is not an integer is a
/// 400 with `strconv.ParseInt`'s message.
pub fn int_param<T: std::str::FromStr>(q: &HashMap<String, String>, name: &str) -> Result<Option<T>> {
    match q.get(name).map(String::as_str) {
        None | Some("") => Ok(None),
        Some(v) => v.parse().map(Some).map_err(|_| Error::BadRequest(format!("strconv.ParseInt: parsing {}: invalid syntax", json!(v)))),
    }
}

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
    /// A `*bool` in Go: set to false is not unset ([`ListOptions::validate`] tells them apart).
    pub send_initial_events: Option<bool>,
    pub timeout_seconds: Option<u64>,
}

/// metav1.ResourceVersionMatch's values.
pub const RESOURCE_VERSION_MATCH_EXACT: &str = "Exact";
pub const RESOURCE_VERSION_MATCH_NOT_OLDER_THAN: &str = "NotOlderThan";

impl ListOptions {
    /// ValidateListOptions, with the WatchList feature on (kubelab serves `sendInitialEvents`):
    /// which combinations of `resourceVersion`, `resourceVersionMatch`, `continue` and
    /// `sendInitialEvents` a list and a watch take. Every violation is a cause of one 422
    /// (`ListOptions.meta.k8s.io "" is invalid: ...`), as the handlers answer with
    /// `errors.NewInvalid` of the `meta.k8s.io` kind `ListOptions`.
    pub fn validate(&self) -> Result<()> {
        let causes = if self.watch { self.watch_violations() } else { self.list_violations() };
        if causes.is_empty() {
            return Ok(());
        }
        Err(Error::Invalid { kind: "ListOptions".into(), kind_singular: "ListOptions.meta.k8s.io".into(), name: String::new(), causes })
    }

    /// A list: a match needs a resourceVersion and no continue, is one of the two (or empty),
    /// and Exact is not for "0"; `sendInitialEvents` is for watches only.
    fn list_violations(&self) -> Vec<Cause> {
        let mut causes = Vec::new();
        let matching = self.resource_version_match.as_deref().unwrap_or("");
        if !matching.is_empty() {
            if self.resource_version.as_deref().unwrap_or("").is_empty() {
                causes.push(forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden unless resourceVersion is provided"));
            }
            if self.has_continue() {
                causes.push(forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"));
            }
            if matching != RESOURCE_VERSION_MATCH_EXACT && matching != RESOURCE_VERSION_MATCH_NOT_OLDER_THAN {
                causes.push(not_supported("resourceVersionMatch", matching, &[RESOURCE_VERSION_MATCH_EXACT, RESOURCE_VERSION_MATCH_NOT_OLDER_THAN, ""]));
            }
            if matching == RESOURCE_VERSION_MATCH_EXACT && self.resource_version.as_deref() == Some("0") {
                causes.push(forbidden("resourceVersionMatch", "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""));
            }
        }
        if self.send_initial_events.is_some() {
            causes.push(forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"));
        }
        causes
    }

    /// A watch (validateWatchOptions): `sendInitialEvents` and `resourceVersionMatch=NotOlderThan`
    /// go together, and a match takes no continue.
    fn watch_violations(&self) -> Vec<Cause> {
        let mut causes = Vec::new();
        let matching = self.resource_version_match.as_deref().unwrap_or("");
        if self.send_initial_events.is_some() && matching != RESOURCE_VERSION_MATCH_NOT_OLDER_THAN {
            causes.push(forbidden("resourceVersionMatch", "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"));
        }
        if !matching.is_empty() {
            if self.send_initial_events.is_none() {
                causes.push(forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"));
            }
            if matching != RESOURCE_VERSION_MATCH_NOT_OLDER_THAN {
                causes.push(not_supported("resourceVersionMatch", matching, &[RESOURCE_VERSION_MATCH_NOT_OLDER_THAN]));
            }
            if self.has_continue() {
                causes.push(forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"));
            }
        }
        causes
    }

    fn has_continue(&self) -> bool {
        self.continue_token.as_deref().is_some_and(|c| !c.is_empty())
    }
}

/// field.Forbidden's cause.
fn forbidden(field: &str, detail: &str) -> Cause {
    Cause { field: field.into(), reason: "FieldValueForbidden".into(), message: format!("Forbidden: {detail}") }
}

/// field.NotSupported's cause: the value and the supported ones, quoted.
fn not_supported(field: &str, value: &str, supported: &[&str]) -> Cause {
    let supported: Vec<String> = supported.iter().map(|v| json!(v).to_string()).collect();
    Cause { field: field.into(), reason: "FieldValueNotSupported".into(), message: format!("Unsupported value: {}: supported values: {}", json!(value), supported.join(", ")) }
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

    /// A patch's options (ValidatePatchOptions): [`WriteOptions::from_query`]'s checks, after
    /// the patch type's own — `force` only on an apply patch, and an apply patch names its
    /// `fieldManager`. Every violation is a cause of one 422, as kube-apiserver's PatchResource
    /// answers before it reads the object.
    pub fn for_patch(q: &HashMap<String, String>, apply: bool) -> Result<Self> {
        let mut causes = Vec::new();
        if !apply && q.contains_key("force") {
            causes.push(Cause { field: "force".into(), reason: "FieldValueForbidden".into(), message: "Forbidden: may not be specified for non-apply patch".into() });
        }
        if apply && q.get("fieldManager").is_none_or(|m| m.is_empty()) {
            causes.push(Cause { field: "fieldManager".into(), reason: "FieldValueRequired".into(), message: "Required value: is required for apply patch".into() });
        }
        let options = Self::from_query("PatchOptions", q);
        if causes.is_empty() {
            return options;
        }
        if let Err(Error::Invalid { causes: more, .. }) = options {
            causes.extend(more);
        }
        Err(Error::Invalid { kind: "PatchOptions".into(), kind_singular: "PatchOptions.meta.k8s.io".into(), name: String::new(), causes })
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
        if let Some(g) = int_param(q, "gracePeriodSeconds")? {
            opts.grace_period_seconds = Some(g);
        }
        if !opts.dry_run.is_dry_run() {
            opts.dry_run = DryRun::from_query(q);
        }
        if opts.propagation_policy.is_none() {
            opts.propagation_policy = q.get("propagationPolicy").cloned();
        }
        if opts.orphan_dependents.is_none() {
            // A `*bool`, read as every boolean parameter is (`?orphanDependents=0` is false).
            opts.orphan_dependents = q.get("orphanDependents").map(|v| parse_bool(v));
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
    fn list_options_are_validated_as_kube_apiserver_validates_them() {
        // What the fuzzing found: `resourceVersionMatch=Bogus` was taken (and read as NotOlderThan).
        let opts = |watch: bool, rv: &str, matching: &str, cont: &str, initial: Option<bool>| ListOptions {
            watch,
            resource_version: Some(rv.to_string()),
            resource_version_match: Some(matching.to_string()),
            continue_token: Some(cont.to_string()),
            send_initial_events: initial,
            ..Default::default()
        };
        let forbidden_rv = "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided";
        let forbidden_continue = "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided";
        let bogus_list = r#"resourceVersionMatch: Unsupported value: "Bogus": supported values: "Exact", "NotOlderThan", """#;
        let bogus_watch = r#"resourceVersionMatch: Unsupported value: "Bogus": supported values: "NotOlderThan""#;
        let needs_initial = "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided";
        let needs_not_older = "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan";
        let cases: Vec<(ListOptions, Vec<&str>)> = vec![
            (ListOptions::default(), vec![]),
            (opts(false, "5", "Exact", "", None), vec![]),
            (opts(false, "0", "NotOlderThan", "", None), vec![]),
            (opts(false, "", "", "", None), vec![]),
            (opts(false, "5", "Bogus", "", None), vec![bogus_list]),
            (opts(false, "5", "exact", "", None), vec![r#"resourceVersionMatch: Unsupported value: "exact": supported values: "Exact", "NotOlderThan", """#]),
            (opts(false, "", "Exact", "", None), vec![forbidden_rv]),
            (opts(false, "", "Bogus", "tok", None), vec![forbidden_rv, forbidden_continue, bogus_list]),
            (opts(false, "0", "Exact", "", None), vec![r#"resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0""#]),
            (opts(false, "", "", "", Some(true)), vec!["sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"]),
            (opts(true, "", "", "", None), vec![]),
            (opts(true, "", "NotOlderThan", "", Some(true)), vec![]),
            (opts(true, "7", "NotOlderThan", "", Some(false)), vec![]),
            (opts(true, "", "", "", Some(true)), vec![needs_not_older]),
            (opts(true, "", "NotOlderThan", "", None), vec![needs_initial]),
            (opts(true, "5", "Exact", "", None), vec![needs_initial, r#"resourceVersionMatch: Unsupported value: "Exact": supported values: "NotOlderThan""#]),
            (opts(true, "5", "Bogus", "tok", Some(true)), vec![needs_not_older, bogus_watch, forbidden_continue]),
        ];
        for (o, want) in cases {
            let got = match o.validate() {
                Ok(()) => Vec::new(),
                Err(e) => {
                    assert_eq!((e.code(), e.reason()), (422, "Invalid"), "{o:?}");
                    let status = e.to_status();
                    assert_eq!((status["details"]["kind"].as_str(), status["details"]["name"].as_str()), (Some("ListOptions"), Some("")));
                    let causes = status["details"]["causes"].as_array().cloned().unwrap_or_default();
                    causes.iter().map(|c| format!("{}: {}", c["field"].as_str().unwrap_or(""), c["message"].as_str().unwrap_or(""))).collect()
                }
            };
            assert_eq!(got, want, "{o:?}");
        }
        let one = opts(false, "5", "Bogus", "", None).validate().expect_err("Bogus");
        assert_eq!(one.to_string(), format!("ListOptions.meta.k8s.io \"\" is invalid: {bogus_list}"));
        let two = opts(false, "", "Bogus", "", None).validate().expect_err("two causes");
        assert_eq!(two.to_string(), format!("ListOptions.meta.k8s.io \"\" is invalid: [{forbidden_rv}, {bogus_list}]"));
    }

    #[test]
    fn patch_options_are_validated_for_the_patch_type() {
        // kube-apiserver: `force` on a merge patch and an apply patch without a fieldManager are
        // 422s of PatchOptions (kubelab took the first and answered the second 400).
        let e = WriteOptions::for_patch(&query(&[("force", "true")]), false).expect_err("force on a merge patch");
        assert_eq!((e.code(), e.to_string().as_str()), (422, r#"PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch"#));
        let e = WriteOptions::for_patch(&query(&[("force", "false")]), false).expect_err("any value is set");
        assert_eq!(e.code(), 422);
        let e = WriteOptions::for_patch(&query(&[]), true).expect_err("no fieldManager");
        assert_eq!((e.code(), e.to_string().as_str()), (422, r#"PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch"#));
        let e = WriteOptions::for_patch(&query(&[("fieldManager", ""), ("fieldValidation", "Bogus")]), true).expect_err("two causes");
        assert_eq!(e.to_status()["details"]["causes"].as_array().map(Vec::len), Some(2));
        assert!(WriteOptions::for_patch(&query(&[("fieldManager", "m"), ("force", "true")]), true).is_ok());
        assert!(WriteOptions::for_patch(&query(&[("dryRun", "All")]), false).expect("a merge patch").is_dry_run());
    }

    #[test]
    fn orphan_dependents_in_the_query_is_a_boolean_parameter() {
        for (value, want) in [("true", true), ("1", true), ("", true), ("yes", true), ("false", false), ("FALSE", false), ("0", false)] {
            let opts = DeleteOptions::from_request(None, &query(&[("orphanDependents", value)])).expect("valid");
            assert_eq!(opts.orphan_dependents, Some(want), "orphanDependents={value}");
        }
        assert_eq!(DeleteOptions::from_request(None, &query(&[])).expect("valid").orphan_dependents, None);
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

        // A grace period that is not an integer is a 400, as the parameter codec answers, not
        // a delete with the default one; an empty one is absent.
        let e = DeleteOptions::from_request(None, &query(&[("gracePeriodSeconds", "soon")])).expect_err("soon");
        assert!(matches!(&e, Error::BadRequest(m) if m == r#"strconv.ParseInt: parsing "soon": invalid syntax"#), "{e}");
        assert_eq!(DeleteOptions::from_request(None, &query(&[("gracePeriodSeconds", "")])).expect("valid").grace_period_seconds, None);
    }
}
