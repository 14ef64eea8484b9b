//! Mirrors the configMap part of pkg/apis/core/validation/validation.go: ValidateConfigMap, and
//! the key rule (apimachinery's IsConfigMapKey) it shares with secrets.

use apimachinery::validation::{FieldError, is_dns1123_subdomain};
use serde_json::{Value, json};

use super::validate_object_meta;

/// core.MaxSecretSize: the most a ConfigMap's or a Secret's values may hold together, 1 MiB.
pub const MAX_SECRET_SIZE: usize = 1024 * 1024;

/// ValidateConfigMap: metadata, the keys of `data` and `binaryData`, and the size of their values
/// together (at most [`MAX_SECRET_SIZE`]; Go's `field.NewPath("")` prints as `[]`).
pub fn validate_config_map(obj: &Value) -> Vec<FieldError> {
    let mut errs = validate_object_meta(obj, true, is_dns1123_subdomain);
    errs.extend(validate_data_keys(obj, &["data", "binaryData"]));
    let strings = values_size(obj.get("data"), |v| v.len());
    let bytes = values_size(obj.get("binaryData"), base64_decoded_len);
    if strings + bytes > MAX_SECRET_SIZE {
        errs.push(FieldError::too_long("[]", MAX_SECRET_SIZE));
    }
    errs
}

/// The sum of `size` over the string values of the map at `field`.
pub(super) fn values_size(field: Option<&Value>, size: impl Fn(&str) -> usize) -> usize {
    field.and_then(Value::as_object).map_or(0, |m| m.values().filter_map(Value::as_str).map(&size).sum())
}

/// How many bytes a base64 string (a `[]byte` in JSON) decodes to.
pub(super) fn base64_decoded_len(s: &str) -> usize {
    let padding = s.bytes().rev().take_while(|b| *b == b'=').count();
    (s.len() / 4 * 3 + (s.len() % 4) * 3 / 4).saturating_sub(padding.min(2))
}

/// Keys of configMap and secret data: `[-._a-zA-Z0-9]+`, not `.` or `..`. Each key becomes a file
/// name when the object is mounted as a volume.
pub(super) fn validate_data_keys(obj: &Value, fields: &[&str]) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for f in fields {
        if let Some(map) = obj.get(*f).and_then(Value::as_object) {
            for k in map.keys() {
                let ok = !k.is_empty() && k.len() <= 253 && k != "." && k != ".." && !k.starts_with("..")
                    && k.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
                if !ok {
                    errs.push(FieldError::invalid(
                        &format!("{f}[{k}]"),
                        &json!(k),
                        "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                    ));
                }
            }
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_values_of_a_config_map_hold_at_most_one_mebibyte_together() {
        // What the fuzzing found: a 3 MB value passed validation and reached the store, which
        // refused it. kube-apiserver answers 422: `[]: Too long: must have at most 1048576 bytes`.
        let cm = |data: usize, binary: usize| json!({"metadata": {"name": "big"}, "data": {"a": "x".repeat(data)}, "binaryData": {"b": "QUJD".repeat(binary / 3)}});
        for (obj, too_long) in [(cm(MAX_SECRET_SIZE, 0), false), (cm(MAX_SECRET_SIZE + 1, 0), true), (cm(MAX_SECRET_SIZE - 3, 3), false), (cm(MAX_SECRET_SIZE - 2, 3), true), (cm(3_000_000, 0), true)] {
            let errs: Vec<_> = validate_config_map(&obj).into_iter().filter(|e| e.field == "[]").collect();
            assert_eq!(errs.len(), usize::from(too_long), "{errs:?}");
            if too_long {
                assert_eq!(errs[0].message, "Too long: must have at most 1048576 bytes");
            }
        }
        assert_eq!([base64_decoded_len(""), base64_decoded_len("QQ=="), base64_decoded_len("QUI="), base64_decoded_len("QUJD"), base64_decoded_len("QUJDRA")], [0, 1, 2, 3, 4]);
    }
}
