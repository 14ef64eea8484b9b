//! Mirrors cmd/kube-controller-manager/names/controller_names.go and `IsControllerEnabled`
//! (cmd/kube-controller-manager/app/controllermanager.go): the names `--controllers` takes and
//! which controllers it starts.
//!
//! `--controllers` is a list: `*` turns on every controller that is on by default, `foo` turns
//! `foo` on, `-foo` turns it off; the first entry naming a controller wins. Each controller has
//! a canonical name and (most) an older alias; both are accepted. The bootstrap token cleaner is
//! off by default (kubeadm turns it on with `--controllers=*,bootstrapsigner,tokencleaner`).

/// Every controller kubelab runs, as `(name, alias)`; `""` for none.
pub const CONTROLLERS: &[(&str, &str)] = &[
    (NAMESPACE, "namespace"),
    (NODE_LIFECYCLE, "nodelifecycle"),
    (TAINT_EVICTION, ""),
    (DISRUPTION, "disruption"),
    (REPLICASET, "replicaset"),
    (DEPLOYMENT, "deployment"),
    (DAEMONSET, "daemonset"),
    (STATEFULSET, "statefulset"),
    (JOB, "job"),
    (TTL_AFTER_FINISHED, "ttl-after-finished"),
    (CRONJOB, "cronjob"),
    (ENDPOINTS, "endpoint"),
    (ENDPOINTSLICE, "endpointslice"),
    (CLUSTERROLE_AGGREGATION, "clusterrole-aggregation"),
    (GARBAGE_COLLECTOR, "garbagecollector"),
    (ROOT_CA_CERTIFICATE_PUBLISHER, "root-ca-cert-publisher"),
    (CSR_SIGNING, "csrsigning"),
    (CSR_APPROVING, "csrapproving"),
    (CSR_CLEANER, "csrcleaner"),
    (TOKEN_CLEANER, "tokencleaner"),
    (PERSISTENT_VOLUME_BINDER, "persistentvolume-binder"),
    (PERSISTENT_VOLUME_ATTACH_DETACH, "attachdetach"),
    (PERSISTENT_VOLUME_CLAIM_PROTECTION, "pvc-protection"),
    (PERSISTENT_VOLUME_PROTECTION, "pv-protection"),
];
/// Controllers Kubernetes has and kubelab does not run: accepted in `--controllers` (so that
/// kubeadm's flags work), and ignored.
pub const NOT_IMPLEMENTED: &[(&str, &str)] = &[(BOOTSTRAP_SIGNER, "bootstrapsigner")];
/// Off unless named (Kubernetes' `ControllersDisabledByDefault`).
pub const DISABLED_BY_DEFAULT: &[&str] = &[BOOTSTRAP_SIGNER, TOKEN_CLEANER];

pub const NAMESPACE: &str = "namespace-controller";
pub const NODE_LIFECYCLE: &str = "node-lifecycle-controller";
pub const TAINT_EVICTION: &str = "taint-eviction-controller";
pub const DISRUPTION: &str = "disruption-controller";
pub const REPLICASET: &str = "replicaset-controller";
pub const DEPLOYMENT: &str = "deployment-controller";
pub const DAEMONSET: &str = "daemonset-controller";
pub const STATEFULSET: &str = "statefulset-controller";
pub const JOB: &str = "job-controller";
pub const TTL_AFTER_FINISHED: &str = "ttl-after-finished-controller";
pub const CRONJOB: &str = "cronjob-controller";
pub const ENDPOINTS: &str = "endpoints-controller";
pub const ENDPOINTSLICE: &str = "endpointslice-controller";
pub const CLUSTERROLE_AGGREGATION: &str = "clusterrole-aggregation-controller";
pub const GARBAGE_COLLECTOR: &str = "garbage-collector-controller";
pub const ROOT_CA_CERTIFICATE_PUBLISHER: &str = "root-ca-certificate-publisher-controller";
pub const CSR_SIGNING: &str = "certificatesigningrequest-signing-controller";
pub const CSR_APPROVING: &str = "certificatesigningrequest-approving-controller";
pub const CSR_CLEANER: &str = "certificatesigningrequest-cleaner-controller";
pub const TOKEN_CLEANER: &str = "token-cleaner-controller";
pub const BOOTSTRAP_SIGNER: &str = "bootstrap-signer-controller";
pub const PERSISTENT_VOLUME_BINDER: &str = "persistentvolume-binder-controller";
pub const PERSISTENT_VOLUME_ATTACH_DETACH: &str = "persistentvolume-attach-detach-controller";
pub const PERSISTENT_VOLUME_CLAIM_PROTECTION: &str = "persistentvolumeclaim-protection-controller";
pub const PERSISTENT_VOLUME_PROTECTION: &str = "persistentvolume-protection-controller";

/// `--controllers` with aliases replaced by canonical names (a `-` kept); an unknown name is an
/// error in Kubernetes' words.
pub fn canonical(controllers: &[String]) -> Result<Vec<String>, String> {
    controllers
        .iter()
        .map(|c| {
            if c == "*" {
                return Ok(c.clone());
            }
            let (minus, name) = match c.strip_prefix('-') {
                Some(n) => ("-", n),
                None => ("", c.as_str()),
            };
            CONTROLLERS
                .iter()
                .chain(NOT_IMPLEMENTED)
                .find(|(canon, alias)| name == *canon || (!alias.is_empty() && name == *alias))
                .map(|(canon, _)| format!("{minus}{canon}"))
                .ok_or_else(|| format!("{c:?} is not in the list of known controllers"))
        })
        .collect()
}

/// `IsControllerEnabled`: named wins, `-named` loses, else on with `*` unless off by default.
/// `controllers` must be [`canonical`].
pub fn is_controller_enabled(name: &str, controllers: &[String]) -> bool {
    let mut has_star = false;
    for c in controllers {
        if c == name {
            return true;
        }
        if c.strip_prefix('-') == Some(name) {
            return false;
        }
        has_star |= c == "*";
    }
    has_star && !DISABLED_BY_DEFAULT.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(s: &str) -> Vec<String> {
        canonical(&s.split(',').map(String::from).collect::<Vec<_>>()).expect("known names")
    }

    #[test]
    fn which_controllers_run() {
        let default = list("*");
        assert!(is_controller_enabled(CSR_APPROVING, &default));
        assert!(is_controller_enabled(NAMESPACE, &default));
        assert!(!is_controller_enabled(TOKEN_CLEANER, &default), "off by default");
        // kubeadm's.
        let kubeadm = list("*,bootstrapsigner,tokencleaner");
        assert!(is_controller_enabled(TOKEN_CLEANER, &kubeadm) && is_controller_enabled(CSR_SIGNING, &kubeadm));
        let some = list("-csrapproving,*,namespace-controller");
        assert!(!is_controller_enabled(CSR_APPROVING, &some) && is_controller_enabled(CSR_CLEANER, &some));
        let only = list("tokencleaner");
        assert!(is_controller_enabled(TOKEN_CLEANER, &only) && !is_controller_enabled(NAMESPACE, &only), "no star: only those named");
        let volumes = list("persistentvolume-binder,attachdetach,pvc-protection,pv-protection");
        assert_eq!(volumes, [PERSISTENT_VOLUME_BINDER, PERSISTENT_VOLUME_ATTACH_DETACH, PERSISTENT_VOLUME_CLAIM_PROTECTION, PERSISTENT_VOLUME_PROTECTION]);
        assert!(is_controller_enabled(PERSISTENT_VOLUME_BINDER, &default) && is_controller_enabled(PERSISTENT_VOLUME_ATTACH_DETACH, &default));
        assert_eq!(canonical(&["csrsigner".to_string()]), Err("\"csrsigner\" is not in the list of known controllers".into()));
    }
}
