//! Mirrors k8s.io/apimachinery/pkg/api/resource/generated.proto: `Quantity`, the values of a
//! container's resource limits and requests.

use serde_json::Value;

/// `resource.Quantity`: Go marshals it as its canonical string (`"500m"`, `"64Mi"`) in field 1.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Quantity {
    #[prost(string, optional, tag = "1")]
    pub(super) string: Option<String>,
}

impl Quantity {
    /// `Quantity.MarshalJSON`: the same string, as a JSON string.
    pub(super) fn to_json(&self) -> Value {
        Value::String(self.string.clone().unwrap_or_default())
    }
}
