//! Mirrors k8s.io/apimachinery/pkg/util/intstr/generated.proto: `IntOrString`, the type of a
//! Deployment's `maxSurge`/`maxUnavailable` and a PodDisruptionBudget's `minAvailable`.

use serde_json::Value;

use super::json::Fields;

/// `intstr.Type` value that marks the string form (`intstr.String`); `0` is `intstr.Int`.
const STRING: i64 = 1;

/// `intstr.IntOrString`. Go always writes all three fields; `type` says which one is meant.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct IntOrString {
    #[prost(int64, optional, tag = "1")]
    pub(super) r#type: Option<i64>,
    #[prost(int32, optional, tag = "2")]
    pub(super) int_val: Option<i32>,
    #[prost(string, optional, tag = "3")]
    pub(super) str_val: Option<String>,
}

impl IntOrString {
    /// `IntOrString.MarshalJSON`: a JSON string for the string form (`"25%"`), else a number.
    pub(super) fn to_json(&self) -> Value {
        if self.r#type == Some(STRING) {
            Value::String(self.str_val.clone().unwrap_or_default())
        } else {
            Value::from(self.int_val.unwrap_or(0))
        }
    }
}

// Here rather than with the other rules in json.rs: `IntOrString` is a message of this file.
impl Fields {
    /// `*intstr.IntOrString`: written whenever present, as a number or a string.
    pub(super) fn int_or_string(&mut self, key: &str, value: &Option<IntOrString>) {
        if let Some(value) = value {
            self.put(key, value.to_json());
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// `intstr.FromInt32(n)` as Go encodes it.
    pub(in super::super) fn int(n: i32) -> IntOrString {
        IntOrString {
            r#type: Some(0),
            int_val: Some(n),
            str_val: Some(String::new()),
        }
    }

    /// `intstr.FromString(s)` as Go encodes it.
    pub(in super::super) fn string(s: &str) -> IntOrString {
        IntOrString {
            r#type: Some(STRING),
            int_val: Some(0),
            str_val: Some(s.into()),
        }
    }

    #[test]
    fn int_or_string_json_follows_type() {
        assert_eq!(int(0).to_json(), Value::from(0));
        assert_eq!(int(3).to_json(), Value::from(3));
        assert_eq!(string("25%").to_json(), Value::from("25%"));
        // A numeric-looking string stays a string: `type` decides, not the text.
        assert_eq!(string("2").to_json(), Value::from("2"));
    }
}
