//! Mirrors the secret part of pkg/apis/core/validation/validation.go: ValidateSecret and
//! ValidateSecretUpdate.

use apimachinery::validation::{FieldError, is_dns1123_subdomain};
use serde_json::Value;

use super::configmap::{MAX_SECRET_SIZE, base64_decoded_len, validate_data_keys, values_size};
use super::validate_object_meta;

/// ValidateSecret: metadata, the keys of `data` (by then `stringData` has been folded in), and the
/// size of its values together (at most 1 MiB, decoded).
pub fn validate_secret(obj: &Value) -> Vec<FieldError> {
    let mut errs = validate_object_meta(obj, true, is_dns1123_subdomain);
    errs.extend(validate_data_keys(obj, &["data"]));
    if values_size(obj.get("data"), base64_decoded_len) > MAX_SECRET_SIZE {
        errs.push(FieldError::too_long("data", MAX_SECRET_SIZE));
    }
    errs
}

/// ValidateSecretUpdate: the new secret is valid, and its `type` is the old one's.
pub fn validate_secret_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = validate_secret(new);
    if new.get("type") != old.get("type") {
        errs.push(FieldError::invalid("type", new.get("type").unwrap_or(&Value::Null), "field is immutable"));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_data_of_a_secret_holds_at_most_one_mebibyte_decoded() {
        let secret = |bytes: usize| json!({"metadata": {"name": "big"}, "data": {"a": "QUJD".repeat(bytes / 3)}});
        let too_long = |obj: &Value| validate_secret(obj).into_iter().filter(|e| e.field == "data").map(|e| e.message).collect::<Vec<_>>();
        assert!(too_long(&secret(MAX_SECRET_SIZE - 1)).is_empty());
        assert_eq!(too_long(&secret(MAX_SECRET_SIZE + 2)), ["Too long: must have at most 1048576 bytes"]);
    }
}
