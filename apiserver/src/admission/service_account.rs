//! Mirrors the ServiceAccount admission plugin (plugin/pkg/admission/serviceaccount/admission.go):
//! every pod runs as some service account — `default` unless it names one. Mirror pods are left
//! alone: their node agent created them, not a user.

use api::pod::is_mirror_pod;
use k8s_openapi::api::core::v1::{Pod, PodSpec};

use super::interfaces::PodCreate;
use crate::registry::core::serviceaccount::strategy::DEFAULT_SERVICE_ACCOUNT_NAME;

pub const NAME: &str = "ServiceAccount";

/// The plugin, for the chain.
pub const PLUGIN: PodCreate = PodCreate { name: NAME, admit: admit_pod };

pub fn admit_pod(pod: &mut Pod) {
    if is_mirror_pod(pod) {
        return;
    }
    admit_service_account(pod.spec.get_or_insert_with(PodSpec::default));
}

/// Every pod runs as some service account. `serviceAccount` is the deprecated alias the API keeps
/// in step with `serviceAccountName`.
fn admit_service_account(spec: &mut PodSpec) {
    if spec.service_account_name.as_deref().is_none_or(str::is_empty) {
        spec.service_account_name = Some(DEFAULT_SERVICE_ACCOUNT_NAME.to_string());
    }
    spec.service_account = spec.service_account_name.clone();
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::admission::interfaces::testing::{admitted, minimal};

    #[test]
    fn service_account_from_deprecated_field_and_mirror_pods() {
        let s = admitted(&PLUGIN, minimal());
        assert_eq!(s.service_account_name.as_deref(), Some("default"));
        assert_eq!(s.service_account.as_deref(), Some("default"));

        let mut j = minimal();
        j["spec"]["serviceAccount"] = "legacy".into();
        let s = admitted(&PLUGIN, j);
        assert_eq!(s.service_account_name.as_deref(), Some("legacy"));
        assert_eq!(s.service_account.as_deref(), Some("legacy"));

        let mut mirror = minimal();
        mirror["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "abc"});
        let s = admitted(&PLUGIN, mirror);
        assert_eq!(s.service_account_name, None, "the ServiceAccount plugin skips mirror pods");
        assert_eq!(s.service_account, None);
    }
}
