//! Mirrors the container arithmetic of k8s.io/component-helpers/resource: requests and limits as
//! numbers (nano-units), ready to add up.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// Requests as the API server stores them after defaulting: a resource with a limit but no
/// request gets the limit as its request. Applied here too, because a pod from a manifest file or
/// a test may not have been defaulted. Quantities that do not parse are left out (the API server
/// validates them).
pub fn effective_requests(resources: Option<&ResourceRequirements>) -> BTreeMap<&str, i128> {
    let mut out = limits(resources);
    out.extend(parsed(resources.and_then(|r| r.requests.as_ref())));
    out
}

/// Limits, parsed (nano-units).
pub fn limits(resources: Option<&ResourceRequirements>) -> BTreeMap<&str, i128> {
    parsed(resources.and_then(|r| r.limits.as_ref()))
}

/// A resource list, parsed (nano-units); unparseable quantities left out.
pub fn parsed(list: Option<&BTreeMap<String, Quantity>>) -> BTreeMap<&str, i128> {
    list.into_iter()
        .flatten()
        .filter_map(|(name, q)| Some((name.as_str(), apimachinery::resource::parse_quantity_nanos(&q.0)?)))
        .collect()
}
