//! Mirrors pkg/apis/certificates/helpers.go: what a kubelet's client and serving certificate
//! requests must be, in Kubernetes' words — the approver recognizes node client requests by
//! [`validate_kubelet_client_csr`], the signers refuse what their signer name does not allow.

use std::collections::BTreeSet;

use pki::CertificateRequest;

const NODE_USER_PREFIX: &str = "system:node:";
const NODES_GROUP: &str = "system:nodes";

/// `usagesToSet`: a request's `spec.usages` without order or repeats.
pub fn usages_to_set(usages: &[String]) -> BTreeSet<&str> {
    usages.iter().map(String::as_str).collect()
}

fn set<'a>(items: &[&'a str]) -> BTreeSet<&'a str> {
    items.iter().copied().collect()
}

/// Go prints a sorted string list as `[a b c]`.
fn go_list(items: &BTreeSet<&str>) -> String {
    format!("[{}]", items.iter().copied().collect::<Vec<_>>().join(" "))
}

/// `ValidateKubeletClientCSR`: `O=[system:nodes]` exactly, no alternative names,
/// `CN=system:node:<name>`, usages exactly {digital signature, client auth}, with or without
/// key encipherment.
pub fn validate_kubelet_client_csr(req: &CertificateRequest, usages: &BTreeSet<&str>) -> Result<(), String> {
    if req.subject.organizations != [NODES_GROUP] {
        return Err("subject organization is not system:nodes".into());
    }
    if !req.dns_names.is_empty() {
        return Err("DNS subjectAltNames are not allowed".into());
    }
    if !req.email_addresses.is_empty() {
        return Err("Email subjectAltNames are not allowed".into());
    }
    if !req.ip_addresses.is_empty() {
        return Err("IP subjectAltNames are not allowed".into());
    }
    if !req.uris.is_empty() {
        return Err("URI subjectAltNames are not allowed".into());
    }
    if !req.subject.common_name.starts_with(NODE_USER_PREFIX) {
        return Err("subject common name does not begin with system:node:".into());
    }
    let with_rsa = set(&["digital signature", "key encipherment", "client auth"]);
    if *usages != with_rsa && *usages != set(&["digital signature", "client auth"]) {
        return Err(format!("usages did not match {}", go_list(&with_rsa)));
    }
    Ok(())
}

/// `ValidateKubeletServingCSR`: `O=[system:nodes]` exactly, at least one DNS name or IP
/// address and no e-mail or URI, usages exactly {digital signature, server auth}, with or
/// without key encipherment, `CN=system:node:<name>`.
pub fn validate_kubelet_serving_csr(req: &CertificateRequest, usages: &BTreeSet<&str>) -> Result<(), String> {
    if req.subject.organizations != [NODES_GROUP] {
        return Err("subject organization is not system:nodes".into());
    }
    if req.dns_names.is_empty() && req.ip_addresses.is_empty() {
        return Err("DNS or IP subjectAltName is required".into());
    }
    if !req.email_addresses.is_empty() {
        return Err("Email subjectAltNames are not allowed".into());
    }
    if !req.uris.is_empty() {
        return Err("URI subjectAltNames are not allowed".into());
    }
    let with_rsa = set(&["digital signature", "key encipherment", "server auth"]);
    if *usages != with_rsa && *usages != set(&["digital signature", "server auth"]) {
        return Err(format!("usages did not match {}", go_list(&with_rsa)));
    }
    if !req.subject.common_name.starts_with(NODE_USER_PREFIX) {
        return Err("subject common name does not begin with system:node:".into());
    }
    Ok(())
}

/// The signer's `validAPIServerClientUsages`: client auth required; digital signature and key
/// encipherment allowed; nothing else.
pub fn valid_api_server_client_usages(usages: &[String]) -> Result<(), String> {
    let mut has_client_auth = false;
    for u in usages {
        match u.as_str() {
            "digital signature" | "key encipherment" => {}
            "client auth" => has_client_auth = true,
            other => return Err(format!("invalid usage for client certificate: {other}")),
        }
    }
    if !has_client_auth {
        return Err("missing required usage for client certificate: client auth".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pki::Subject;

    fn req(cn: &str, orgs: &[&str]) -> CertificateRequest {
        CertificateRequest {
            subject: Subject { common_name: cn.into(), organizations: orgs.iter().map(|o| o.to_string()).collect() },
            ..Default::default()
        }
    }

    fn usages(u: &[&str]) -> Vec<String> {
        u.iter().map(|s| s.to_string()).collect()
    }

    /// isNodeClientCert's cases, as Kubernetes' sarapprove_test.go lists them.
    #[test]
    fn kubelet_client_requests() {
        let good = req("system:node:n1", &["system:nodes"]);
        let ok = usages(&["digital signature", "key encipherment", "client auth"]);
        let check = |r: &CertificateRequest, u: &[String]| validate_kubelet_client_csr(r, &usages_to_set(u));
        assert_eq!(check(&good, &ok), Ok(()));
        assert_eq!(check(&good, &usages(&["client auth", "digital signature"])), Ok(()), "without key encipherment (ECDSA)");
        assert_eq!(check(&good, &usages(&["client auth", "digital signature", "client auth"])), Ok(()), "repeats do not matter");
        let usage_err = Err("usages did not match [client auth digital signature key encipherment]".to_string());
        assert_eq!(check(&good, &usages(&["client auth"])), usage_err);
        assert_eq!(check(&good, &usages(&["digital signature", "key encipherment", "client auth", "server auth"])), usage_err);
        assert_eq!(check(&req("system:node:n1", &["system:nodes", "other"]), &ok), Err("subject organization is not system:nodes".into()));
        assert_eq!(check(&req("system:node:n1", &[]), &ok), Err("subject organization is not system:nodes".into()));
        assert_eq!(check(&req("alice", &["system:nodes"]), &ok), Err("subject common name does not begin with system:node:".into()));
        let with = |f: fn(&mut CertificateRequest)| {
            let mut r = good.clone();
            f(&mut r);
            check(&r, &ok)
        };
        assert_eq!(with(|r| r.dns_names = vec!["n1".into()]), Err("DNS subjectAltNames are not allowed".into()));
        assert_eq!(with(|r| r.ip_addresses = vec!["10.0.0.1".parse().unwrap()]), Err("IP subjectAltNames are not allowed".into()));
        assert_eq!(with(|r| r.email_addresses = vec!["a@b".into()]), Err("Email subjectAltNames are not allowed".into()));
        assert_eq!(with(|r| r.uris = vec!["spiffe://x".into()]), Err("URI subjectAltNames are not allowed".into()));
    }

    #[test]
    fn kubelet_serving_requests() {
        let mut good = req("system:node:n1", &["system:nodes"]);
        good.ip_addresses = vec!["10.0.0.1".parse().unwrap()];
        let check = |r: &CertificateRequest, u: &[&str]| validate_kubelet_serving_csr(r, &usages_to_set(&usages(u)));
        assert_eq!(check(&good, &["digital signature", "key encipherment", "server auth"]), Ok(()));
        assert_eq!(check(&good, &["digital signature", "server auth"]), Ok(()));
        assert_eq!(check(&good, &["digital signature", "client auth"]), Err("usages did not match [digital signature key encipherment server auth]".into()));
        assert_eq!(check(&req("system:node:n1", &["system:nodes"]), &["digital signature", "server auth"]), Err("DNS or IP subjectAltName is required".into()));
        let mut stranger = good.clone();
        stranger.subject.common_name = "web".into();
        assert_eq!(check(&stranger, &["digital signature", "server auth"]), Err("subject common name does not begin with system:node:".into()));
    }

    #[test]
    fn api_server_client_usages() {
        assert_eq!(valid_api_server_client_usages(&usages(&["client auth"])), Ok(()));
        assert_eq!(valid_api_server_client_usages(&usages(&["digital signature", "key encipherment", "client auth"])), Ok(()));
        assert_eq!(valid_api_server_client_usages(&usages(&["client auth", "server auth"])), Err("invalid usage for client certificate: server auth".into()));
        assert_eq!(valid_api_server_client_usages(&usages(&["digital signature"])), Err("missing required usage for client certificate: client auth".into()));
    }
}
