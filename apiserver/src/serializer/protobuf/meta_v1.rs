//! Mirrors k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto: the messages kubectl's protobuf
//! bodies carry (object metadata, times, label selectors, delete options), field numbers as in that file.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::json::Fields;

/// `metav1.ObjectMeta` (field 17, managedFields, is skipped: the server computes it).
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ObjectMeta {
    #[prost(string, optional, tag = "1")]
    pub(super) name: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub(super) generate_name: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub(super) namespace: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub(super) self_link: Option<String>,
    #[prost(string, optional, tag = "5")]
    pub(super) uid: Option<String>,
    #[prost(string, optional, tag = "6")]
    pub(super) resource_version: Option<String>,
    #[prost(int64, optional, tag = "7")]
    pub(super) generation: Option<i64>,
    #[prost(message, optional, tag = "8")]
    pub(super) creation_timestamp: Option<Time>,
    #[prost(message, optional, tag = "9")]
    pub(super) deletion_timestamp: Option<Time>,
    #[prost(int64, optional, tag = "10")]
    pub(super) deletion_grace_period_seconds: Option<i64>,
    #[prost(btree_map = "string, string", tag = "11")]
    pub(super) labels: BTreeMap<String, String>,
    #[prost(btree_map = "string, string", tag = "12")]
    pub(super) annotations: BTreeMap<String, String>,
    #[prost(message, repeated, tag = "13")]
    pub(super) owner_references: Vec<OwnerReference>,
    #[prost(string, repeated, tag = "14")]
    pub(super) finalizers: Vec<String>,
}

impl ObjectMeta {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.string("name", &self.name);
        f.string("generateName", &self.generate_name);
        f.string("namespace", &self.namespace);
        f.string("selfLink", &self.self_link);
        f.string("uid", &self.uid);
        f.string("resourceVersion", &self.resource_version);
        f.int("generation", self.generation);
        f.time("creationTimestamp", &self.creation_timestamp);
        f.time("deletionTimestamp", &self.deletion_timestamp);
        f.ptr_int(
            "deletionGracePeriodSeconds",
            self.deletion_grace_period_seconds,
        );
        f.string_map("labels", &self.labels);
        f.string_map("annotations", &self.annotations);
        f.list(
            "ownerReferences",
            &self.owner_references,
            OwnerReference::to_json,
        );
        f.strings("finalizers", &self.finalizers);
        f.into_json()
    }
}

/// `metav1.OwnerReference`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct OwnerReference {
    #[prost(string, optional, tag = "5")]
    pub(super) api_version: Option<String>,
    #[prost(string, optional, tag = "1")]
    pub(super) kind: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub(super) name: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub(super) uid: Option<String>,
    #[prost(bool, optional, tag = "6")]
    pub(super) controller: Option<bool>,
    #[prost(bool, optional, tag = "7")]
    pub(super) block_owner_deletion: Option<bool>,
}

impl OwnerReference {
    pub(super) fn to_json(&self) -> Value {
        // apiVersion, kind, name and uid are required (no omitempty) in the Go struct.
        let mut f = Fields::default();
        f.required_string("apiVersion", &self.api_version);
        f.required_string("kind", &self.kind);
        f.required_string("name", &self.name);
        f.required_string("uid", &self.uid);
        f.ptr_bool("controller", self.controller);
        f.ptr_bool("blockOwnerDeletion", self.block_owner_deletion);
        f.into_json()
    }
}

/// `metav1.Time`, encoded like `google.protobuf.Timestamp`. Both fields zero is the zero time.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Time {
    #[prost(int64, optional, tag = "1")]
    pub(super) seconds: Option<i64>,
    #[prost(int32, optional, tag = "2")]
    pub(super) nanos: Option<i32>,
}

impl Time {
    /// RFC 3339 in UTC at whole seconds, as `metav1.Time` marshals to JSON; `None` for the zero time.
    pub(super) fn to_rfc3339(&self) -> Option<String> {
        let seconds = self.seconds.unwrap_or(0);
        if seconds == 0 && self.nanos.unwrap_or(0) == 0 {
            return None;
        }
        let (days, second_of_day) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
        let (year, month, day) = civil_from_days(days);
        let (hour, minute, second) = (
            second_of_day / 3600,
            second_of_day % 3600 / 60,
            second_of_day % 60,
        );
        Some(format!(
            "{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}Z"
        ))
    }
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day); Howard Hinnant's
/// `civil_from_days`, which counts in 400-year eras starting on March 1st.
pub(super) fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `metav1.LabelSelector`: a workload's `selector`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct LabelSelector {
    #[prost(btree_map = "string, string", tag = "1")]
    pub(super) match_labels: BTreeMap<String, String>,
    #[prost(message, repeated, tag = "2")]
    pub(super) match_expressions: Vec<LabelSelectorRequirement>,
}

impl LabelSelector {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.string_map("matchLabels", &self.match_labels);
        f.list(
            "matchExpressions",
            &self.match_expressions,
            LabelSelectorRequirement::to_json,
        );
        f.into_json()
    }
}

/// `metav1.LabelSelectorRequirement`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct LabelSelectorRequirement {
    #[prost(string, optional, tag = "1")]
    pub(super) key: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub(super) operator: Option<String>,
    #[prost(string, repeated, tag = "3")]
    pub(super) values: Vec<String>,
}

impl LabelSelectorRequirement {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.required_string("key", &self.key);
        f.required_string("operator", &self.operator);
        f.strings("values", &self.values);
        f.into_json()
    }
}

/// `metav1.DeleteOptions`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct DeleteOptions {
    #[prost(int64, optional, tag = "1")]
    pub(super) grace_period_seconds: Option<i64>,
    #[prost(message, optional, tag = "2")]
    pub(super) preconditions: Option<Preconditions>,
    #[prost(bool, optional, tag = "3")]
    pub(super) orphan_dependents: Option<bool>,
    #[prost(string, optional, tag = "4")]
    pub(super) propagation_policy: Option<String>,
    #[prost(string, repeated, tag = "5")]
    pub(super) dry_run: Vec<String>,
}

impl DeleteOptions {
    pub(super) fn to_json(&self) -> Map<String, Value> {
        let mut f = Fields::default();
        // A present gracePeriodSeconds of 0 means "delete now", so it is a pointer in Go.
        f.ptr_int("gracePeriodSeconds", self.grace_period_seconds);
        f.message("preconditions", &self.preconditions, Preconditions::to_json);
        f.ptr_bool("orphanDependents", self.orphan_dependents);
        f.ptr_string("propagationPolicy", &self.propagation_policy);
        f.strings("dryRun", &self.dry_run);
        f.0
    }
}

/// `metav1.Preconditions`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Preconditions {
    #[prost(string, optional, tag = "1")]
    pub(super) uid: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub(super) resource_version: Option<String>,
}

impl Preconditions {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.ptr_string("uid", &self.uid);
        f.ptr_string("resourceVersion", &self.resource_version);
        f.into_json()
    }
}

// Here rather than with the other rules in json.rs: `metav1.Time` is a message of this file.
impl Fields {
    /// `metav1.Time`: RFC 3339; the zero time stays out (Go would write `null`).
    pub(super) fn time(&mut self, key: &str, value: &Option<Time>) {
        if let Some(text) = value.as_ref().and_then(Time::to_rfc3339) {
            self.put(key, Value::String(text));
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// `ObjectMeta{Name: name}` as Go marshals it: every plain string and integer is written, zero
    /// or not, and the zero `creationTimestamp` as an empty message.
    pub(in super::super) fn go_meta(name: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            generate_name: Some(String::new()),
            namespace: Some(String::new()),
            self_link: Some(String::new()),
            uid: Some(String::new()),
            resource_version: Some(String::new()),
            generation: Some(0),
            creation_timestamp: Some(Time::default()),
            ..Default::default()
        }
    }

    #[test]
    fn rfc3339_times() {
        let cases = [
            (0, 0, None),
            (0, 1, Some("1970-01-01T00:00:00Z")),
            (1_767_323_045, 500, Some("2026-01-02T03:04:05Z")),
            (951_782_400, 0, Some("2000-02-29T00:00:00Z")),
            (-1, 0, Some("1969-12-31T23:59:59Z")),
            (253_402_300_799, 0, Some("9999-12-31T23:59:59Z")),
        ];
        for (seconds, nanos, want) in cases {
            let time = Time {
                seconds: Some(seconds),
                nanos: Some(nanos),
            };
            assert_eq!(time.to_rfc3339().as_deref(), want, "{seconds}s {nanos}ns");
        }
    }
}
