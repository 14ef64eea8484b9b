//! Mirrors printCSIDriver in pkg/printers/internalversion/printers.go: NAME, ATTACHREQUIRED,
//! PODINFOONMOUNT, STORAGECAPACITY, TOKENREQUESTS, REQUIRESREPUBLISH, MODES, AGE.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::printers::fields::{age, arr_at, get, name, str_at};
use crate::printers::tablegenerator::{Column, Printer, age_col, col, name_col};

pub struct CSIDriverPrinter;

/// A `*bool` as printed: its value, `default` when nil.
fn bool_or(obj: &Value, field: &str, default: bool) -> Value {
    get(obj, &["spec", field]).and_then(Value::as_bool).unwrap_or(default).into()
}

impl Printer for CSIDriverPrinter {
    fn columns(&self) -> Vec<Column> {
        vec![
            name_col(),
            col("AttachRequired", "boolean", "attachRequired indicates this CSI volume driver requires an attach operation.", 0),
            col("PodInfoOnMount", "boolean", "podInfoOnMount indicates this CSI volume driver requires additional pod information during mount operations.", 0),
            col("StorageCapacity", "boolean", "storageCapacity indicates that the CSI volume driver wants pod scheduling to consider the storage capacity.", 0),
            col("TokenRequests", "string", "tokenRequests indicates the CSI driver needs pods' service account tokens it is mounting volume for.", 0),
            col("RequiresRepublish", "boolean", "requiresRepublish indicates the CSI driver wants NodePublishVolume being periodically called.", 0),
            col("Modes", "string", "volumeLifecycleModes defines what kind of volumes this CSI volume driver supports.", 0),
            age_col(),
        ]
    }

    fn row(&self, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let modes: Vec<&str> = arr_at(obj, &["spec", "volumeLifecycleModes"]).iter().filter_map(Value::as_str).collect();
        let modes = if modes.is_empty() { "<none>".to_string() } else { modes.join(",") };
        let tokens = match get(obj, &["spec", "tokenRequests"]).and_then(Value::as_array) {
            None => "<unset>".to_string(),
            Some(requests) => requests.iter().map(|r| str_at(r, &["audience"])).collect::<Vec<_>>().join(","),
        };
        vec![
            name(obj).into(),
            bool_or(obj, "attachRequired", true),
            bool_or(obj, "podInfoOnMount", false),
            bool_or(obj, "storageCapacity", false),
            tokens.into(),
            bool_or(obj, "requiresRepublish", false),
            modes.into(),
            age(obj, now).into(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::CSIDriverPrinter;
    use crate::printers::tablegenerator::testing::{assert_printer, object};

    #[test]
    fn csi_driver_cells() {
        let defaulted = object(json!({"spec": {"attachRequired": true, "podInfoOnMount": false, "storageCapacity": false, "requiresRepublish": false, "volumeLifecycleModes": ["Persistent"]}}));
        let tokens = object(json!({"spec": {"attachRequired": false, "tokenRequests": [{"audience": "a"}, {"audience": "b"}], "volumeLifecycleModes": ["Persistent", "Ephemeral"]}}));
        let bare = object(json!({"spec": {}}));
        assert_printer(
            &CSIDriverPrinter,
            &[
                (defaulted, vec![json!("x"), json!(true), json!(false), json!(false), json!("<unset>"), json!(false), json!("Persistent"), json!("10s")]),
                (tokens, vec![json!("x"), json!(false), json!(false), json!(false), json!("a,b"), json!(false), json!("Persistent,Ephemeral"), json!("10s")]),
                (bare, vec![json!("x"), json!(true), json!(false), json!(false), json!("<unset>"), json!(false), json!("<none>"), json!("10s")]),
            ],
            &[("Name", 0), ("AttachRequired", 0), ("PodInfoOnMount", 0), ("StorageCapacity", 0), ("TokenRequests", 0), ("RequiresRepublish", 0), ("Modes", 0), ("Age", 0)],
        );
    }
}
