//! Mirrors apimachinery's pkg/util/validation/validation.go (name and label checks),
//! pkg/util/validation/field/errors.go (FieldError) and pkg/api/validation/objectmeta.go.
//!
//! The `is_*` functions return a list of messages, empty when the value is valid, worded exactly
//! as Kubernetes words them, because kubectl shows them to the user verbatim. Kubernetes checks
//! with regular expressions; we check the same grammars by hand (the regex is still quoted in the
//! messages, as Kubernetes does).

use std::fmt;

use serde_json::Value;

pub const DNS1123_LABEL_MAX_LENGTH: usize = 63;
pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;
pub const QUALIFIED_NAME_MAX_LENGTH: usize = 63;
pub const LABEL_VALUE_MAX_LENGTH: usize = 63;
/// Annotations of one object may hold at most 256 KiB of keys plus values.
pub const TOTAL_ANNOTATION_SIZE_LIMIT_B: usize = 256 * 1024;

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_ERR_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERR_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// validation.go's `MaxLenError`.
pub fn max_len_error(length: usize) -> String {
    format!("must be no more than {length} characters")
}

/// validation.go's `EmptyError`.
pub fn empty_error() -> String {
    "must be non-empty".to_string()
}

/// validation.go's `RegexError`. Its odd spacing ("'a',  or 'b'") is Kubernetes' own and is kept,
/// since users and tests compare these strings.
pub fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let mut s = format!("{msg} (e.g. ");
    for (i, ex) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push_str(&format!("'{ex}', "));
    }
    s.push_str(&format!("regex used for validation is '{fmt}')"));
    s
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn matches_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && alnum(b[0])
        && alnum(b[b.len() - 1])
        && b.iter().all(|&c| alnum(c) || c == b'-')
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn matches_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// Validates a DNS-1123 label (namespace names, most resource names in `core/v1` like Service).
pub fn is_dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_LABEL_MAX_LENGTH));
    }
    if !matches_dns1123_label(value) {
        errs.push(regex_error(
            DNS1123_LABEL_ERR_MSG,
            DNS1123_LABEL_FMT,
            &["my-name", "123-abc"],
        ));
    }
    errs
}

/// Validates a DNS-1035 label (Service names: a DNS-1123 label that starts with a letter, so a
/// Service's name is also a valid environment-variable prefix and DNS name).
pub fn is_dns1035_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_LABEL_MAX_LENGTH));
    }
    if !(matches_dns1123_label(value) && value.as_bytes()[0].is_ascii_lowercase()) {
        errs.push(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
            "[a-z]([-a-z0-9]*[a-z0-9])?",
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// IsValidPortNum: a port number in 1–65535.
pub fn is_valid_port_num(port: i64) -> Vec<String> {
    if (1..=65535).contains(&port) { Vec::new() } else { vec!["must be between 1 and 65535, inclusive".to_string()] }
}

/// IsValidPortName: an IANA_SVC_NAME — at most 15 characters, lower case letters, digits and '-',
/// at least one letter, no '-' at either end or twice in a row (a named container port, a
/// Service's targetPort by name).
pub fn is_valid_port_name(port: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if port.len() > 15 {
        errs.push(max_len_error(15));
    }
    if !port.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-') {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".to_string());
    }
    if !port.bytes().any(|c| c.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".to_string());
    }
    if port.contains("--") {
        errs.push("must not contain consecutive hyphens".to_string());
    }
    if port.starts_with('-') || port.ends_with('-') {
        errs.push("must not begin or end with a hyphen".to_string());
    }
    errs
}

/// Validates a DNS-1123 subdomain (pod, node, configmap names; the prefix of a qualified name).
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if !value.split('.').all(matches_dns1123_label) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_ERR_MSG,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// Mirrors pkg/api/validation/path/name.go's `IsValidPathSegmentName`: the loosest name rule,
/// that the name can stand as one segment of a URL path or a store key — not `.` or `..`, no
/// `/` or `%`. The RBAC kinds name their objects by it (`ValidateRBACName`), so a Role may be
/// called `system:controller:job` where a pod could not.
pub fn is_valid_path_segment_name(name: &str) -> Vec<String> {
    for illegal in [".", ".."] {
        if name == illegal {
            return vec![format!("may not be '{illegal}'")];
        }
    }
    ["/", "%"].iter().filter(|c| name.contains(*c)).map(|c| format!("may not contain '{c}'")).collect()
}

/// Validates a qualified name: label and annotation keys, finalizers. An optional DNS subdomain
/// prefix ends with '/': `example.com/MyName`.
pub fn is_qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push(format!("prefix part {}", empty_error()));
            } else {
                errs.extend(
                    is_dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_ERR_MSG, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push(format!("name part {}", empty_error()));
    } else if name.len() > QUALIFIED_NAME_MAX_LENGTH {
        errs.push(format!(
            "name part {}",
            max_len_error(QUALIFIED_NAME_MAX_LENGTH)
        ));
    }
    if !matches_qualified_name_part(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_ERR_MSG,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// Validates a label value: empty, or up to 63 characters of `[-A-Za-z0-9_.]` starting and ending
/// alphanumeric.
pub fn is_valid_label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_VALUE_MAX_LENGTH {
        errs.push(max_len_error(LABEL_VALUE_MAX_LENGTH));
    }
    if !value.is_empty() && !matches_qualified_name_part(value) {
        errs.push(regex_error(
            LABEL_VALUE_ERR_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// Validates an IPv4 or IPv6 address. Stricter than Kubernetes' legacy parser, which still
/// accepts IPv4 octets with leading zeros ("010.0.0.1").
pub fn is_valid_ip(value: &str) -> Vec<String> {
    match value.parse::<std::net::IpAddr>() {
        Ok(_) => Vec::new(),
        Err(_) => vec!["must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)".to_string()],
    }
}

/// field.ErrorType: why a field is invalid. `reason_str()` is the `StatusCause.reason` string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldErrorReason {
    Required,
    Invalid,
    Duplicate,
    NotSupported,
    Forbidden,
    TooLong,
    TooMany,
}

impl FieldErrorReason {
    pub fn reason_str(&self) -> &'static str {
        match self {
            FieldErrorReason::Required => "FieldValueRequired",
            FieldErrorReason::Invalid => "FieldValueInvalid",
            FieldErrorReason::Duplicate => "FieldValueDuplicate",
            FieldErrorReason::NotSupported => "FieldValueNotSupported",
            FieldErrorReason::Forbidden => "FieldValueForbidden",
            FieldErrorReason::TooLong => "FieldValueTooLong",
            FieldErrorReason::TooMany => "FieldValueTooMany",
        }
    }

    /// field.ErrorType.String(): the words that open the message.
    fn words(&self) -> &'static str {
        match self {
            FieldErrorReason::Required => "Required value",
            FieldErrorReason::Invalid => "Invalid value",
            FieldErrorReason::Duplicate => "Duplicate value",
            FieldErrorReason::NotSupported => "Unsupported value",
            FieldErrorReason::Forbidden => "Forbidden",
            FieldErrorReason::TooLong => "Too long",
            FieldErrorReason::TooMany => "Too many",
        }
    }
}

/// field.Error: one invalid field. `message` is field.Error's `ErrorBody()` (what goes into a
/// `StatusCause.message`); `Display` adds the field path in front, as field.Error's `Error()` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub reason: FieldErrorReason,
    pub message: String,
}

/// Formats a bad value as ErrorBody does: strings quoted (Go's `%q`), numbers and bools bare,
/// anything else as JSON.
fn format_value(value: &Value) -> String {
    match value {
        Value::String(s) => quote(s),
        Value::Null => "null".to_string(),
        other => other.to_string(),
    }
}

/// Go's `%q` for the strings names and labels are made of; JSON escaping agrees with it there.
fn quote(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

impl FieldError {
    fn new(
        field: &str,
        reason: FieldErrorReason,
        value: Option<&Value>,
        detail: &str,
    ) -> FieldError {
        let mut message = match value {
            Some(v) => format!("{}: {}", reason.words(), format_value(v)),
            None => reason.words().to_string(),
        };
        if !detail.is_empty() {
            message.push_str(": ");
            message.push_str(detail);
        }
        FieldError {
            field: field.to_string(),
            reason,
            message,
        }
    }

    pub fn reason_str(&self) -> &'static str {
        self.reason.reason_str()
    }

    /// `field.Required`: `Required value` (+ `: <detail>`).
    pub fn required(field: &str, detail: &str) -> FieldError {
        FieldError::new(field, FieldErrorReason::Required, None, detail)
    }

    /// `field.Invalid`: `Invalid value: "Foo_Bar": <detail>`.
    pub fn invalid(field: &str, value: &Value, detail: &str) -> FieldError {
        FieldError::new(field, FieldErrorReason::Invalid, Some(value), detail)
    }

    /// `field.Invalid` of a value Go prints with `%#v` (a struct, a list), given already
    /// formatted (`rbac.RoleRef{APIGroup:"…", Kind:"…", Name:"…"}`).
    pub fn invalid_shown(field: &str, shown: &str, detail: &str) -> FieldError {
        FieldError { field: field.to_string(), reason: FieldErrorReason::Invalid, message: format!("Invalid value: {shown}: {detail}") }
    }

    /// `field.Duplicate`: `Duplicate value: "x"`.
    pub fn duplicate(field: &str, value: &Value) -> FieldError {
        FieldError::new(field, FieldErrorReason::Duplicate, Some(value), "")
    }

    /// `field.NotSupported`: `Unsupported value: "x": supported values: "a", "b"`.
    pub fn not_supported(field: &str, value: &Value, supported: &[&str]) -> FieldError {
        let detail = if supported.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = supported.iter().map(|s| quote(s)).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        FieldError::new(field, FieldErrorReason::NotSupported, Some(value), &detail)
    }

    /// `field.Forbidden`: `Forbidden: <detail>`.
    pub fn forbidden(field: &str, detail: &str) -> FieldError {
        FieldError::new(field, FieldErrorReason::Forbidden, None, detail)
    }

    /// `field.TooLong`: "Too long: must have at most N bytes" (the value is not echoed back).
    pub fn too_long(field: &str, max_bytes: usize) -> FieldError {
        FieldError::new(
            field,
            FieldErrorReason::TooLong,
            None,
            &format!("must have at most {max_bytes} bytes"),
        )
    }

    /// `field.TooMany`: "Too many: 5: must have at most 3 items".
    pub fn too_many(field: &str, actual: usize, max: usize) -> FieldError {
        FieldError::new(
            field,
            FieldErrorReason::TooMany,
            Some(&Value::from(actual)),
            &format!("must have at most {max} items"),
        )
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// objectmeta.go's `maskTrailingDash`: a generateName prefix may end in '-' because a random
/// suffix follows it, so the last dash is masked before validating the prefix as a name.
fn mask_trailing_dash(name: &str) -> String {
    match name.strip_suffix('-') {
        Some(rest) if !rest.is_empty() => format!("{rest}a"),
        _ => name.to_string(),
    }
}

/// objectmeta.go's `ValidateObjectMeta`: checks `meta` (the object's `metadata`) and returns
/// every problem found, with field paths under `path` (usually `"metadata"`).
///
/// Steps, as in Kubernetes:
/// 1. `generateName` must be a valid name prefix; `name` is required unless `generateName` is set,
///    and must satisfy `name_validator`.
/// 2. Namespaced kinds need a DNS-1123 label `namespace`; cluster-scoped kinds must not have one.
/// 3. `generation` must not be negative.
/// 4. Label keys are qualified names, label values valid label values.
/// 5. Annotation keys are qualified names (checked lower-cased) and keys plus values total at most
///    256 KiB.
/// 6. Finalizers are qualified names.
pub fn validate_object_meta(
    meta: &Value,
    namespaced: bool,
    name_validator: fn(&str) -> Vec<String>,
    path: &str,
) -> Vec<FieldError> {
    let child = |c: &str| {
        if path.is_empty() {
            c.to_string()
        } else {
            format!("{path}.{c}")
        }
    };
    let mut errs = Vec::new();
    let str_field = |k: &str| meta.get(k).and_then(Value::as_str).unwrap_or("");

    // Step 1: name and generateName.
    let name = str_field("name");
    let generate_name = str_field("generateName");
    if !generate_name.is_empty() {
        for msg in name_validator(&mask_trailing_dash(generate_name)) {
            errs.push(FieldError::invalid(
                &child("generateName"),
                &Value::from(generate_name),
                &msg,
            ));
        }
    }
    if name.is_empty() {
        if generate_name.is_empty() {
            errs.push(FieldError::required(
                &child("name"),
                "name or generateName is required",
            ));
        }
    } else {
        for msg in name_validator(name) {
            errs.push(FieldError::invalid(
                &child("name"),
                &Value::from(name),
                &msg,
            ));
        }
    }

    // Step 2: namespace.
    let namespace = str_field("namespace");
    if namespaced {
        if namespace.is_empty() {
            errs.push(FieldError::required(&child("namespace"), ""));
        } else {
            for msg in is_dns1123_label(namespace) {
                errs.push(FieldError::invalid(
                    &child("namespace"),
                    &Value::from(namespace),
                    &msg,
                ));
            }
        }
    } else if !namespace.is_empty() {
        errs.push(FieldError::forbidden(
            &child("namespace"),
            "not allowed on this type",
        ));
    }

    // Step 3: generation.
    if let Some(g) = meta.get("generation").and_then(Value::as_i64)
        && g < 0
    {
        errs.push(FieldError::invalid(
            &child("generation"),
            &Value::from(g),
            "must be greater than or equal to 0",
        ));
    }

    // Step 4: labels.
    errs.extend(validate_labels(meta.get("labels"), &child("labels")));

    // Step 5: annotations.
    errs.extend(validate_annotations(meta.get("annotations"), &child("annotations")));

    // Step 6: finalizers.
    if let Some(finalizers) = meta.get("finalizers").and_then(Value::as_array) {
        for (i, f) in finalizers.iter().enumerate() {
            let s = f.as_str().unwrap_or("");
            for msg in is_qualified_name(s) {
                errs.push(FieldError::invalid(
                    &format!("{}[{i}]", child("finalizers")),
                    f,
                    &msg,
                ));
            }
        }
    }
    errs
}

/// ValidateLabels (step 4 of [`validate_object_meta`], and a pod template's labels): keys are
/// qualified names, values valid label values.
pub fn validate_labels(labels: Option<&Value>, labels_path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(labels) = labels.and_then(Value::as_object) {
        for (k, v) in labels {
            for msg in is_qualified_name(k) {
                errs.push(FieldError::invalid(labels_path, &Value::from(k.as_str()), &msg));
            }
            match v.as_str() {
                Some(s) => {
                    for msg in is_valid_label_value(s) {
                        errs.push(FieldError::invalid(labels_path, v, &msg));
                    }
                }
                None => errs.push(FieldError::invalid(labels_path, v, "label values must be strings")),
            }
        }
    }
    errs
}

/// ValidateAnnotations (step 5 of [`validate_object_meta`], and a pod template's annotations):
/// keys are qualified names (checked lower-cased); keys plus values total at most 256 KiB.
pub fn validate_annotations(annotations: Option<&Value>, annotations_path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(annotations) = annotations.and_then(Value::as_object) {
        let mut total = 0;
        for (k, v) in annotations {
            for msg in is_qualified_name(&k.to_lowercase()) {
                errs.push(FieldError::invalid(annotations_path, &Value::from(k.as_str()), &msg));
            }
            total += k.len() + v.as_str().map_or(0, str::len);
        }
        if total > TOTAL_ANNOTATION_SIZE_LIMIT_B {
            errs.push(FieldError::too_long(annotations_path, TOTAL_ANNOTATION_SIZE_LIMIT_B));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
    const NAME_PART_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

    #[test]
    fn dns1123_subdomain() {
        let long = "a".repeat(254);
        let cases: Vec<(&str, Vec<String>)> = vec![
            ("web", vec![]),
            ("example.com", vec![]),
            ("a-b.c-d.e", vec![]),
            ("0", vec![]),
            ("Foo_Bar", vec![SUBDOMAIN_MSG.into()]),
            ("", vec![SUBDOMAIN_MSG.into()]),
            ("-a", vec![SUBDOMAIN_MSG.into()]),
            ("a.", vec![SUBDOMAIN_MSG.into()]),
            ("a..b", vec![SUBDOMAIN_MSG.into()]),
            (&long, vec!["must be no more than 253 characters".into()]),
        ];
        for (input, want) in cases {
            assert_eq!(is_dns1123_subdomain(input), want, "{input:?}");
        }
    }

    #[test]
    fn path_segment_name() {
        let cases: Vec<(&str, Vec<&str>)> = vec![
            ("system:controller:job", vec![]),
            ("Upper_Case.ok", vec![]),
            ("...", vec![]),
            (".", vec!["may not be '.'"]),
            ("..", vec!["may not be '..'"]),
            ("a/b", vec!["may not contain '/'"]),
            ("50%/x", vec!["may not contain '/'", "may not contain '%'"]),
        ];
        for (input, want) in cases {
            assert_eq!(is_valid_path_segment_name(input), want, "{input:?}");
        }
    }

    #[test]
    fn dns1123_label() {
        let long = "a".repeat(64);
        let cases: Vec<(&str, Vec<String>)> = vec![
            ("default", vec![]),
            ("kube-system", vec![]),
            ("a.b", vec![LABEL_MSG.into()]),
            ("A", vec![LABEL_MSG.into()]),
            ("a-", vec![LABEL_MSG.into()]),
            (&long, vec!["must be no more than 63 characters".into()]),
        ];
        for (input, want) in cases {
            assert_eq!(is_dns1123_label(input), want, "{input:?}");
        }
    }

    #[test]
    fn qualified_name() {
        let long = "a".repeat(64);
        let long_name = format!("example.com/{long}");
        let cases: Vec<(&str, Vec<String>)> = vec![
            ("app", vec![]),
            ("App.Kubernetes_io-x", vec![]),
            ("app.kubernetes.io/name", vec![]),
            ("kubernetes.io/hostname", vec![]),
            ("a b", vec![NAME_PART_MSG.into()]),
            ("-app", vec![NAME_PART_MSG.into()]),
            ("", vec!["name part must be non-empty".into(), NAME_PART_MSG.into()]),
            ("/app", vec!["prefix part must be non-empty".into()]),
            ("Example.com/app", vec![format!("prefix part {SUBDOMAIN_MSG}")]),
            (&long, vec!["name part must be no more than 63 characters".into()]),
            (&long_name, vec!["name part must be no more than 63 characters".into()]),
            (
                "a/b/c",
                vec!["a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".into()],
            ),
        ];
        for (input, want) in cases {
            assert_eq!(is_qualified_name(input), want, "{input:?}");
        }
    }

    #[test]
    fn label_value() {
        let long = "a".repeat(64);
        let cases: Vec<(&str, Vec<String>)> = vec![
            ("", vec![]),
            ("web", vec![]),
            ("My_Value.1-2", vec![]),
            ("x y", vec![LABEL_VALUE_MSG.into()]),
            ("_x", vec![LABEL_VALUE_MSG.into()]),
            ("a/b", vec![LABEL_VALUE_MSG.into()]),
            (&long, vec!["must be no more than 63 characters".into()]),
        ];
        for (input, want) in cases {
            assert_eq!(is_valid_label_value(input), want, "{input:?}");
        }
    }

    #[test]
    fn ip() {
        let cases = [
            ("10.0.0.1", true),
            ("2001:db8::ffff", true),
            ("::1", true),
            ("10.0.0", false),
            ("", false),
            ("10.0.0.256", false),
            ("abc", false),
        ];
        for (input, ok) in cases {
            assert_eq!(is_valid_ip(input).is_empty(), ok, "{input:?}");
        }
    }

    #[test]
    fn field_error_messages() {
        let cases = [
            (
                FieldError::invalid("metadata.name", &json!("Foo_Bar"), SUBDOMAIN_MSG),
                "FieldValueInvalid",
                format!("metadata.name: Invalid value: \"Foo_Bar\": {SUBDOMAIN_MSG}"),
            ),
            (
                FieldError::required("metadata.namespace", ""),
                "FieldValueRequired",
                "metadata.namespace: Required value".into(),
            ),
            (
                FieldError::required("metadata.name", "name or generateName is required"),
                "FieldValueRequired",
                "metadata.name: Required value: name or generateName is required".into(),
            ),
            (
                FieldError::duplicate("spec.containers[1].name", &json!("x")),
                "FieldValueDuplicate",
                "spec.containers[1].name: Duplicate value: \"x\"".into(),
            ),
            (
                FieldError::not_supported("spec.restartPolicy", &json!("x"), &["a", "b"]),
                "FieldValueNotSupported",
                "spec.restartPolicy: Unsupported value: \"x\": supported values: \"a\", \"b\""
                    .into(),
            ),
            (
                FieldError::forbidden("metadata.namespace", "not allowed on this type"),
                "FieldValueForbidden",
                "metadata.namespace: Forbidden: not allowed on this type".into(),
            ),
            (
                FieldError::too_long("metadata.annotations", 262144),
                "FieldValueTooLong",
                "metadata.annotations: Too long: must have at most 262144 bytes".into(),
            ),
            (
                FieldError::too_many("spec.x", 5, 3),
                "FieldValueTooMany",
                "spec.x: Too many: 5: must have at most 3 items".into(),
            ),
            (
                FieldError::invalid(
                    "spec.replicas",
                    &json!(-1),
                    "must be greater than or equal to 0",
                ),
                "FieldValueInvalid",
                "spec.replicas: Invalid value: -1: must be greater than or equal to 0".into(),
            ),
        ];
        for (err, reason, want) in cases {
            assert_eq!(err.reason_str(), reason);
            assert_eq!(err.to_string(), want);
        }
    }

    #[test]
    fn object_meta() {
        let big = "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT_B);
        let cases: Vec<(Value, bool, Vec<String>)> = vec![
            (json!({"name": "web", "namespace": "default"}), true, vec![]),
            (json!({"generateName": "web-", "namespace": "default"}), true, vec![]),
            (json!({"name": "node-1"}), false, vec![]),
            (json!({"namespace": "default"}), true, vec!["metadata.name: Required value: name or generateName is required".to_string()]),
            (json!({"name": "web"}), true, vec!["metadata.namespace: Required value".to_string()]),
            (json!({"name": "n", "namespace": "default"}), false, vec!["metadata.namespace: Forbidden: not allowed on this type".to_string()]),
            (
                json!({"name": "Foo_Bar", "namespace": "default"}),
                true,
                vec![format!("metadata.name: Invalid value: \"Foo_Bar\": {SUBDOMAIN_MSG}")],
            ),
            (
                json!({"generateName": "Web-", "namespace": "default"}),
                true,
                vec![format!("metadata.generateName: Invalid value: \"Web-\": {SUBDOMAIN_MSG}")],
            ),
            (
                json!({"name": "web", "namespace": "Default"}),
                true,
                vec![format!("metadata.namespace: Invalid value: \"Default\": {LABEL_MSG}")],
            ),
            (
                json!({"name": "web", "namespace": "d", "labels": {"a b": "ok", "ok": "x y"}}),
                true,
                vec![
                    format!("metadata.labels: Invalid value: \"a b\": {NAME_PART_MSG}"),
                    format!("metadata.labels: Invalid value: \"x y\": {LABEL_VALUE_MSG}"),
                ],
            ),
            (json!({"name": "web", "namespace": "d", "annotations": {"Kubernetes.io/Change-Cause": "x"}}), true, vec![]),
            (
                json!({"name": "web", "namespace": "d", "annotations": {"a": big}}),
                true,
                vec!["metadata.annotations: Too long: must have at most 262144 bytes".to_string()],
            ),
            (
                json!({"name": "web", "namespace": "d", "generation": -1}),
                true,
                vec!["metadata.generation: Invalid value: -1: must be greater than or equal to 0".to_string()],
            ),
            (
                json!({"name": "web", "namespace": "d", "finalizers": ["kubernetes.io/pv-protection", "bad/x/y"]}),
                true,
                vec!["metadata.finalizers[1]: Invalid value: \"bad/x/y\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".to_string()],
            ),
        ];
        for (meta, namespaced, want) in cases {
            let got: Vec<String> =
                validate_object_meta(&meta, namespaced, is_dns1123_subdomain, "metadata")
                    .iter()
                    .map(|e| e.to_string())
                    .collect();
            assert_eq!(got, want, "{meta}");
        }
    }
}
