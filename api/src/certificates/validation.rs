//! Mirrors pkg/apis/certificates/validation/validation.go: what makes a CertificateSigningRequest
//! valid on create, and what each of its three update paths may change.
//!
//! 1. `validateCertificateSigningRequest`, on every write: metadata (any name that can be a path
//!    segment), a request that parses and is signed by its own key, usages given, known and
//!    unique, a qualified signerName (never the legacy one), `expirationSeconds` of at least
//!    600, conditions that say something (a type; `True` only for Approved, Denied and Failed;
//!    Approved and Denied not both; no type twice), and a `status.certificate` of CERTIFICATE
//!    PEM blocks only.
//! 2. `validateCertificateSigningRequestUpdate`, on every update: no Approved, Denied or Failed
//!    condition removed; Approved and Denied added or changed only through `/approval`; the
//!    certificate set only through `/status`, and never changed once set.
//!
//! What was already wrong in the stored object is tolerated on its updates (its duplicate
//! condition types, its unknown usages...), as Kubernetes' `getValidationOptions` does for
//! objects written by older servers.

use std::collections::HashSet;

use apimachinery::validation::{
    DNS1123_LABEL_MAX_LENGTH, DNS1123_SUBDOMAIN_MAX_LENGTH, FieldError, is_dns1123_label, is_dns1123_subdomain, is_valid_path_segment_name,
};
use serde_json::{Value, json};
use x509_parser::pem::Pem;

use super::helpers::{
    CERTIFICATE_APPROVED, CERTIFICATE_BLOCK_TYPE, CERTIFICATE_DENIED, CERTIFICATE_FAILED, LEGACY_UNKNOWN_SIGNER_NAME, bytes_field, conditions,
    find_conditions, parse_csr,
};
use crate::core::validation::validate_object_meta;

/// Every key usage a request may ask for (`allValidUsages`).
pub const ALL_VALID_USAGES: &[&str] = &[
    "signing",
    "digital signature",
    "content commitment",
    "key encipherment",
    "key agreement",
    "data encipherment",
    "cert sign",
    "crl sign",
    "encipher only",
    "decipher only",
    "any",
    "server auth",
    "client auth",
    "code signing",
    "email protection",
    "s/mime",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "timestamping",
    "ocsp signing",
    "microsoft sgc",
    "netscape sgc",
];

/// The condition types whose status may only be True (`trueConditionTypes`).
const TRUE_CONDITION_TYPES: &[&str] = &[CERTIFICATE_APPROVED, CERTIFICATE_DENIED, CERTIFICATE_FAILED];

/// What a write may do beyond the common rules (`certificateValidationOptions`): what only some
/// update paths may, and what is tolerated because the stored object already has it.
#[derive(Clone, Copy, Debug, Default)]
struct Options {
    allow_setting_approval_conditions: bool,
    allow_setting_certificate: bool,
    allow_both_approved_and_denied: bool,
    allow_legacy_signer_name: bool,
    allow_duplicate_condition_types: bool,
    allow_empty_condition_type: bool,
    allow_arbitrary_certificate: bool,
    allow_unknown_usages: bool,
    allow_duplicate_usages: bool,
}

/// ValidateCertificateSigningRequestCreate.
pub fn validate_certificate_signing_request_create(csr: &Value) -> Vec<FieldError> {
    validate(csr, options(csr, None))
}

/// ValidateCertificateSigningRequestUpdate: an update of the object itself (only its metadata
/// changes: the strategy keeps its spec and status).
pub fn validate_certificate_signing_request_update(new: &Value, old: &Value) -> Vec<FieldError> {
    validate_update(new, old, options(new, Some(old)))
}

/// ValidateCertificateSigningRequestStatusUpdate: `/status` may set the certificate.
pub fn validate_certificate_signing_request_status_update(new: &Value, old: &Value) -> Vec<FieldError> {
    validate_update(new, old, Options { allow_setting_certificate: true, ..options(new, Some(old)) })
}

/// ValidateCertificateSigningRequestApprovalUpdate: `/approval` may add Approved or Denied.
pub fn validate_certificate_signing_request_approval_update(new: &Value, old: &Value) -> Vec<FieldError> {
    validate_update(new, old, Options { allow_setting_approval_conditions: true, ..options(new, Some(old)) })
}

/// getValidationOptions: what the stored object already gets away with.
fn options(new: &Value, old: Option<&Value>) -> Options {
    let Some(old) = old else { return Options::default() };
    let types: Vec<&str> = conditions(old).iter().map(|c| c.get("type").and_then(Value::as_str).unwrap_or("")).collect();
    let unique: HashSet<&str> = types.iter().copied().collect();
    let usages: Vec<&str> =
        old.pointer("/spec/usages").and_then(Value::as_array).map(|u| u.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    let old_certificate = bytes_field(old, "/status/certificate");
    Options {
        allow_both_approved_and_denied: types.contains(&CERTIFICATE_APPROVED) && types.contains(&CERTIFICATE_DENIED),
        allow_legacy_signer_name: old.pointer("/spec/signerName").and_then(Value::as_str) == Some(LEGACY_UNKNOWN_SIGNER_NAME),
        allow_duplicate_condition_types: unique.len() != types.len(),
        allow_empty_condition_type: types.contains(&""),
        allow_arbitrary_certificate: bytes_field(new, "/status/certificate") == old_certificate || validate_certificate(&old_certificate).is_err(),
        allow_unknown_usages: usages.iter().any(|u| !ALL_VALID_USAGES.contains(u)),
        allow_duplicate_usages: usages.iter().collect::<HashSet<_>>().len() != usages.len(),
        ..Options::default()
    }
}

/// The name rule (`ValidateCertificateRequestName`: "we don't care what you call your
/// certificate requests"), but for what no object's name may be (a path segment).
fn any_name(name: &str) -> Vec<String> {
    is_valid_path_segment_name(name)
}

/// Step 1 (`validateCertificateSigningRequest`).
fn validate(csr: &Value, opts: Options) -> Vec<FieldError> {
    let mut errs = validate_object_meta(csr, false, any_name);
    let request = bytes_field(csr, "/spec/request");
    if let Err(e) = parse_csr(&request) {
        errs.push(FieldError::invalid_shown("spec.request", &go_bytes(&request), &e));
    }
    let usages: Vec<&Value> = csr.pointer("/spec/usages").and_then(Value::as_array).map(|u| u.iter().collect()).unwrap_or_default();
    if usages.is_empty() {
        errs.push(FieldError::required("spec.usages", ""));
    }
    if !opts.allow_unknown_usages {
        let mut supported = ALL_VALID_USAGES.to_vec();
        supported.sort_unstable();
        for (i, usage) in usages.iter().enumerate() {
            if !usage.as_str().is_some_and(|u| ALL_VALID_USAGES.contains(&u)) {
                errs.push(FieldError::not_supported(&format!("spec.usages[{i}]"), usage, &supported));
            }
        }
    }
    if !opts.allow_duplicate_usages {
        let mut seen = HashSet::new();
        for (i, usage) in usages.iter().enumerate() {
            if !seen.insert(usage.to_string()) {
                errs.push(FieldError::duplicate(&format!("spec.usages[{i}]"), usage));
            }
        }
    }
    let signer_name = csr.pointer("/spec/signerName").and_then(Value::as_str).unwrap_or("");
    if !opts.allow_legacy_signer_name && signer_name == LEGACY_UNKNOWN_SIGNER_NAME {
        errs.push(FieldError::invalid("spec.signerName", &json!(signer_name), "the legacy signerName is not allowed via this API version"));
    } else {
        errs.extend(validate_signer_name("spec.signerName", signer_name));
    }
    if let Some(seconds) = csr.pointer("/spec/expirationSeconds").and_then(Value::as_i64)
        && seconds < 600
    {
        errs.push(FieldError::invalid("spec.expirationSeconds", &json!(seconds), "may not specify a duration less than 600 seconds (10 minutes)"));
    }
    errs.extend(validate_conditions(csr, opts));
    if !opts.allow_arbitrary_certificate
        && let Err(e) = validate_certificate(&bytes_field(csr, "/status/certificate"))
    {
        errs.push(FieldError::invalid("status.certificate", &json!("<certificate data>"), &e));
    }
    errs
}

/// validateConditions.
fn validate_conditions(csr: &Value, opts: Options) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut seen = HashSet::new();
    let (mut approved, mut denied) = (false, false);
    for (i, c) in conditions(csr).iter().enumerate() {
        let path = |f: &str| format!("status.conditions[{i}].{f}");
        let t = c.get("type").and_then(Value::as_str).unwrap_or("");
        let status = c.get("status").and_then(Value::as_str).unwrap_or("");
        if !opts.allow_empty_condition_type && t.is_empty() {
            errs.push(FieldError::required(&path("type"), ""));
        }
        let allowed: &[&str] = if TRUE_CONDITION_TYPES.contains(&t) { &["True"] } else { &["False", "True", "Unknown"] };
        if status.is_empty() {
            errs.push(FieldError::required(&path("status"), ""));
        } else if !allowed.contains(&status) {
            errs.push(FieldError::not_supported(&path("status"), &json!(status), allowed));
        }
        if !opts.allow_both_approved_and_denied {
            let exclusive = "Approved and Denied conditions are mutually exclusive";
            if t == CERTIFICATE_APPROVED {
                approved = true;
                if denied {
                    errs.push(FieldError::invalid(&path("type"), &json!(t), exclusive));
                }
            } else if t == CERTIFICATE_DENIED {
                denied = true;
                if approved {
                    errs.push(FieldError::invalid(&path("type"), &json!(t), exclusive));
                }
            }
        }
        if !opts.allow_duplicate_condition_types && !seen.insert(t) {
            errs.push(FieldError::duplicate(&path("type"), &json!(t)));
        }
    }
    errs
}

/// Step 2 (`validateCertificateSigningRequestUpdate`).
fn validate_update(new: &Value, old: &Value, opts: Options) -> Vec<FieldError> {
    let mut errs = validate(new, opts);
    for t in [CERTIFICATE_APPROVED, CERTIFICATE_DENIED, CERTIFICATE_FAILED] {
        if find_conditions(new, t).len() < find_conditions(old, t).len() {
            errs.push(FieldError::forbidden("status.conditions", &format!("updates may not remove a condition of type {t:?}")));
        }
    }
    if !opts.allow_setting_approval_conditions {
        for t in [CERTIFICATE_APPROVED, CERTIFICATE_DENIED] {
            let (old_conditions, new_conditions) = (find_conditions(old, t), find_conditions(new, t));
            if new_conditions.len() > old_conditions.len() {
                errs.push(FieldError::forbidden("status.conditions", &format!("updates may not add a condition of type {t:?}")));
            } else if new_conditions.len() == old_conditions.len() && new_conditions != old_conditions {
                errs.push(FieldError::forbidden("status.conditions", &format!("updates may not modify a condition of type {t:?}")));
            }
        }
    }
    let (new_certificate, old_certificate) = (bytes_field(new, "/status/certificate"), bytes_field(old, "/status/certificate"));
    if new_certificate != old_certificate {
        if !opts.allow_setting_certificate {
            errs.push(FieldError::forbidden("status.certificate", "updates may not set certificate content"));
        } else if !old_certificate.is_empty() {
            errs.push(FieldError::forbidden("status.certificate", "updates may not modify existing certificate content"));
        }
    }
    errs
}

/// validateCertificate: none, or one or more CERTIFICATE PEM blocks that each parse.
pub fn validate_certificate(pem: &[u8]) -> Result<(), String> {
    if pem.is_empty() {
        return Ok(());
    }
    let mut blocks = 0;
    for block in Pem::iter_from_buffer(pem) {
        let Ok(block) = block else { break };
        if block.label != CERTIFICATE_BLOCK_TYPE {
            return Err(format!("only CERTIFICATE PEM blocks are allowed, found {:?}", block.label));
        }
        blocks += 1;
        let mut der = block.contents.as_slice();
        while !der.is_empty() {
            let (rest, _) = x509_parser::parse_x509_certificate(der).map_err(|e| format!("x509: malformed certificate: {e}"))?;
            der = rest;
        }
        if block.contents.is_empty() {
            return Err("found CERTIFICATE PEM block containing 0 certificates".into());
        }
    }
    if blocks == 0 {
        return Err("must contain at least one CERTIFICATE PEM block".into());
    }
    Ok(())
}

/// ValidateSignerName (pkg/apis/core/validation): `<domain>/<path>`, the domain of at least two
/// DNS labels, the path of DNS subdomains.
pub fn validate_signer_name(field: &str, signer_name: &str) -> Vec<FieldError> {
    if signer_name.is_empty() {
        return vec![FieldError::required(field, "")];
    }
    let segments: Vec<&str> = signer_name.split('/').collect();
    let [domain, path] = segments[..] else {
        let why = "must be a fully qualified domain and path of the form 'example.com/signer-name'";
        return vec![FieldError::invalid(field, &json!(signer_name), why)];
    };
    let mut errs = Vec::new();
    if domain.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(FieldError::too_long(field, DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    let labels: Vec<&str> = domain.split('.').collect();
    // The first bad label is reported alone: the others' errors would read the same.
    if let Some((label, label_errs)) = labels.iter().map(|l| (l, is_dns1123_label(l))).find(|(_, e)| !e.is_empty()) {
        for e in label_errs {
            errs.push(FieldError::invalid(field, &json!(domain), &format!("validating label {label:?}: {e}")));
        }
    }
    if labels.len() < 2 {
        errs.push(FieldError::invalid(field, &json!(domain), "should be a domain with at least two segments separated by dots"));
    }
    let max_path = DNS1123_SUBDOMAIN_MAX_LENGTH + DNS1123_LABEL_MAX_LENGTH + 1;
    if path.len() > max_path {
        errs.push(FieldError::too_long(field, max_path));
    }
    if let Some((label, label_errs)) = path.split('.').map(|l| (l, is_dns1123_subdomain(l))).find(|(_, e)| !e.is_empty()) {
        for e in label_errs {
            errs.push(FieldError::invalid(field, &json!(path), &format!("validating label {label:?}: {e}")));
        }
    }
    errs
}

/// A `[]byte` as Go's `%#v` prints it, which is how a bad request shows in the error:
/// `[]byte{0x2d, 0x2d}`.
fn go_bytes(b: &[u8]) -> String {
    let hex: Vec<String> = b.iter().map(|x| format!("0x{x:x}")).collect();
    format!("[]byte{{{}}}", hex.join(", "))
}

#[cfg(test)]
mod tests {
    use base64::Engine;

    use super::*;

    fn b64(s: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    /// A request for `CN=<cn>, O=<orgs>` from a fresh key, in PEM (rcgen keeps one value of each
    /// attribute: the last organization).
    fn csr_pem(cn: &str, orgs: &[&str]) -> String {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params.distinguished_name.push(rcgen::DnType::CommonName, cn);
        for o in orgs {
            params.distinguished_name.push(rcgen::DnType::OrganizationName, *o);
        }
        params.serialize_request(&key).expect("request").pem().expect("pem")
    }

    fn certificate_pem() -> String {
        let key = rcgen::KeyPair::generate().expect("key");
        rcgen::CertificateParams::new(vec!["x".to_string()]).expect("params").self_signed(&key).expect("cert").pem()
    }

    fn csr(request: &str) -> Value {
        json!({"metadata": {"name": "c1"}, "spec": {"request": b64(request.as_bytes()), "signerName": "example.com/signer",
               "usages": ["client auth"]}})
    }

    fn fields(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(|e| format!("{}: {}", e.field, e.message)).collect()
    }

    #[test]
    fn a_request_is_parsed_and_its_subject_read() {
        let pem = csr_pem("jane", &["dev"]);
        let parsed = parse_csr(pem.as_bytes()).expect("parses");
        assert_eq!((parsed.common_name.as_str(), parsed.organizations), ("jane", vec!["dev".to_string()]));
        assert_eq!(parse_csr(certificate_pem().as_bytes()), Err("PEM block type must be CERTIFICATE REQUEST".into()));
        assert_eq!(parse_csr(b"nonsense"), Err("PEM block type must be CERTIFICATE REQUEST".into()));
        let garbage = "-----BEGIN CERTIFICATE REQUEST-----\naGVsbG8=\n-----END CERTIFICATE REQUEST-----\n";
        assert!(parse_csr(garbage.as_bytes()).expect_err("malformed").starts_with("x509: malformed certificate request"));
    }

    #[test]
    fn create_validation_table() {
        let good = csr(&csr_pem("jane", &[]));
        assert_eq!(fields(&validate_certificate_signing_request_create(&good)), Vec::<String>::new());
        let with = |f: &dyn Fn(&mut Value)| {
            let mut c = good.clone();
            f(&mut c);
            fields(&validate_certificate_signing_request_create(&c))
        };
        let cases: Vec<(&str, Vec<String>, &str)> = vec![
            ("bad pem", with(&|c| c["spec"]["request"] = json!(b64(b"-")))
                , "spec.request: Invalid value: []byte{0x2d}: PEM block type must be CERTIFICATE REQUEST"),
            ("no usages", with(&|c| c["spec"]["usages"] = json!([])), "spec.usages: Required value"),
            ("unknown usage", with(&|c| c["spec"]["usages"] = json!(["client auth", "flying"])), "spec.usages[1]: Unsupported value: \"flying\": supported values: \"any\", \"cert sign\""),
            ("duplicate usage", with(&|c| c["spec"]["usages"] = json!(["client auth", "client auth"])), "spec.usages[1]: Duplicate value: \"client auth\""),
            ("no signer", with(&|c| c["spec"]["signerName"] = json!("")), "spec.signerName: Required value"),
            ("unqualified signer", with(&|c| c["spec"]["signerName"] = json!("signer")),
                "spec.signerName: Invalid value: \"signer\": must be a fully qualified domain and path of the form 'example.com/signer-name'"),
            ("one-label domain", with(&|c| c["spec"]["signerName"] = json!("example/signer")),
                "spec.signerName: Invalid value: \"example\": should be a domain with at least two segments separated by dots"),
            ("legacy signer", with(&|c| c["spec"]["signerName"] = json!("kubernetes.io/legacy-unknown")),
                "spec.signerName: Invalid value: \"kubernetes.io/legacy-unknown\": the legacy signerName is not allowed via this API version"),
            ("short expiration", with(&|c| c["spec"]["expirationSeconds"] = json!(599)),
                "spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 600 seconds (10 minutes)"),
            ("approved and denied", with(&|c| c["status"] = json!({"conditions": [{"type": "Approved", "status": "True"}, {"type": "Denied", "status": "True"}]})),
                "status.conditions[1].type: Invalid value: \"Denied\": Approved and Denied conditions are mutually exclusive"),
            ("approved false", with(&|c| c["status"] = json!({"conditions": [{"type": "Approved", "status": "False"}]})),
                "status.conditions[0].status: Unsupported value: \"False\": supported values: \"True\""),
            ("no status", with(&|c| c["status"] = json!({"conditions": [{"type": "Custom"}]})), "status.conditions[0].status: Required value"),
            ("duplicate type", with(&|c| c["status"] = json!({"conditions": [{"type": "Failed", "status": "True"}, {"type": "Failed", "status": "True"}]})),
                "status.conditions[1].type: Duplicate value: \"Failed\""),
            ("key as certificate", with(&|c| c["status"] = json!({"certificate": b64(b"-----BEGIN PRIVATE KEY-----\naGVsbG8=\n-----END PRIVATE KEY-----\n")})),
                "status.certificate: Invalid value: \"<certificate data>\": only CERTIFICATE PEM blocks are allowed, found \"PRIVATE KEY\""),
            ("no pem certificate", with(&|c| c["status"] = json!({"certificate": b64(b"hello")})),
                "status.certificate: Invalid value: \"<certificate data>\": must contain at least one CERTIFICATE PEM block"),
        ];
        for (case, errs, want) in cases {
            assert!(errs.iter().any(|e| e.starts_with(want)), "{case}: {errs:?} has no {want:?}");
        }
    }

    #[test]
    fn each_update_path_changes_only_its_part() {
        let old = csr(&csr_pem("jane", &[]));
        let approved = {
            let mut c = old.clone();
            c["status"] = json!({"conditions": [{"type": "Approved", "status": "True", "reason": "KubectlApprove"}]});
            c
        };
        let forbidden_add = "status.conditions: Forbidden: updates may not add a condition of type \"Approved\"";
        assert_eq!(fields(&validate_certificate_signing_request_status_update(&approved, &old)), vec![forbidden_add]);
        assert_eq!(fields(&validate_certificate_signing_request_update(&approved, &old)), vec![forbidden_add]);
        assert!(validate_certificate_signing_request_approval_update(&approved, &old).is_empty());
        assert_eq!(
            fields(&validate_certificate_signing_request_approval_update(&old, &approved)),
            vec!["status.conditions: Forbidden: updates may not remove a condition of type \"Approved\""]
        );

        let mut issued = approved.clone();
        issued["status"]["certificate"] = json!(b64(certificate_pem().as_bytes()));
        assert!(validate_certificate_signing_request_status_update(&issued, &approved).is_empty());
        assert_eq!(
            fields(&validate_certificate_signing_request_approval_update(&issued, &approved)),
            vec!["status.certificate: Forbidden: updates may not set certificate content"]
        );
        let mut reissued = issued.clone();
        reissued["status"]["certificate"] = json!(b64(certificate_pem().as_bytes()));
        assert_eq!(
            fields(&validate_certificate_signing_request_status_update(&reissued, &issued)),
            vec!["status.certificate: Forbidden: updates may not modify existing certificate content"]
        );
    }

    #[test]
    fn what_the_stored_object_already_has_is_tolerated_on_update() {
        let mut old = csr(&csr_pem("jane", &[]));
        old["spec"]["usages"] = json!(["flying", "flying"]);
        old["status"] = json!({"conditions": [{"type": "Custom", "status": "True"}, {"type": "Custom", "status": "True"}]});
        let mut new = old.clone();
        new["metadata"]["labels"] = json!({"a": "b"});
        assert_eq!(fields(&validate_certificate_signing_request_update(&new, &old)), Vec::<String>::new());
        assert!(!validate_certificate_signing_request_create(&new).is_empty());
    }
}
