//! Real kubectl against a secure `kubelab apiserver` for `certificates.k8s.io/v1`
//! CertificateSigningRequests, with every kubectl 1.27 to 1.33 on one cluster (RBAC, client
//! certificates): a user with the right to request certificates (but not to approve or sign
//! them) and the cluster's admin (`system:masters`).
//!
//! For each kubectl, `certificate_signing_requests`:
//! 1. the user creates a request from YAML (a real PKCS#10 request made here with rcgen):
//!    `kubectl get csr` shows it Pending, requested by the user, with its signer and duration;
//! 2. the user may not approve it (403: CertificateApproval's "user not permitted to approve");
//!    the admin approves one with `kubectl certificate approve` and denies another with `deny`;
//! 3. a request whose `spec.request` is no PEM CERTIFICATE REQUEST is a 422 naming the field;
//!    one for the API server's client signer in `system:masters` a 403
//!    (CertificateSubjectRestriction);
//! 4. the user may not write the certificate through `/status` (403: CertificateSigning's "user
//!    not permitted to sign"); the admin may, and the request reads `Approved,Issued`.

use base64::Engine;
use e2e::apiserver::{ApiCluster, ApiOptions, KUBECTL_MINORS, Output};

const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";

/// What the requesting user may do: request, read, and update the approval and status
/// subresources — which RBAC lets through and the certificate plugins then judge.
const REQUESTER_ROLE: &str = "apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: csr-requester
rules:
- apiGroups: [certificates.k8s.io]
  resources: [certificatesigningrequests, certificatesigningrequests/approval, certificatesigningrequests/status]
  verbs: [create, get, list, watch, update, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: csr-requester
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: csr-requester}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: jane}
";

/// A PEM CERTIFICATE REQUEST for `CN=<cn>, O=<org>` from a fresh key.
fn csr_pem(cn: &str, org: &str) -> String {
    let key = rcgen::KeyPair::generate().expect("a key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.distinguished_name.push(rcgen::DnType::CommonName, cn);
    params.distinguished_name.push(rcgen::DnType::OrganizationName, org);
    params.serialize_request(&key).expect("a request").pem().expect("PEM")
}

/// A PEM CERTIFICATE, as a signer would write it.
fn certificate_pem() -> String {
    let key = rcgen::KeyPair::generate().expect("a key");
    rcgen::CertificateParams::new(vec!["jane".to_string()]).expect("params").self_signed(&key).expect("a certificate").pem()
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn csr_yaml(name: &str, signer: &str, request_pem: &str) -> String {
    format!(
        "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata:\n  name: {name}\nspec:\n  request: {}\n  signerName: {signer}\n  expirationSeconds: 86400\n  usages: [client auth]\n",
        b64(request_pem)
    )
}

fn ok(o: Output) -> String {
    assert!(o.success, "{}", o.describe());
    o.stdout
}

fn refused(o: Output, needles: &[&str]) {
    assert!(!o.success, "expected a refusal: {}", o.describe());
    for needle in needles {
        assert!(o.stderr.contains(needle), "expected {needle:?} in: {}", o.describe());
    }
}

/// The words of `kubectl get csr <name>`'s header and row.
fn get_csr(api: &ApiCluster, minor: u32, kubeconfig: &std::path::Path, name: &str) -> (Vec<String>, Vec<String>) {
    let out = ok(api.kubectl_kubeconfig(minor, kubeconfig, &["get", "csr", name]));
    let mut lines = out.lines().map(|l| l.split_whitespace().map(String::from).collect::<Vec<_>>());
    let header = lines.next().unwrap_or_default();
    let row = lines.next().unwrap_or_else(|| panic!("no row in:\n{out}"));
    (header, row)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_signing_requests() {
    let api = ApiCluster::start(ApiOptions { secure: true, ..ApiOptions::default() }).await.expect("a secure API server");
    let admin = api.pki_dir().join("admin.conf");
    let jane = api.user_kubeconfig("jane", &["dev"]);
    let role = api.write_file("csr-requester.yaml", REQUESTER_ROLE);
    ok(api.kubectl_kubeconfig(33, &admin, &["apply", "-f", role.to_str().expect("utf-8")]));
    api.wait_for("jane's binding to be seen", std::time::Duration::from_secs(30), || {
        let o = api.kubectl_kubeconfig(33, &jane, &["get", "csr"]);
        async move { if o.success { Ok(()) } else { Err(o.describe()) } }
    })
    .await;

    for minor in KUBECTL_MINORS {
        let (a, b) = (format!("jane-{minor}-a"), format!("jane-{minor}-b"));
        // 1. Requested by jane, whatever the YAML says of its requestor; Pending.
        for name in [&a, &b] {
            let file = api.write_file(&format!("{name}.yaml"), &csr_yaml(name, CLIENT_SIGNER, &csr_pem("jane", "dev")));
            ok(api.kubectl_kubeconfig(minor, &jane, &["create", "-f", file.to_str().expect("utf-8")]));
        }
        let (header, row) = get_csr(&api, minor, &admin, &a);
        assert_eq!(header, ["NAME", "AGE", "SIGNERNAME", "REQUESTOR", "REQUESTEDDURATION", "CONDITION"], "kubectl 1.{minor}");
        let cells: Vec<&str> = [0, 2, 3, 4, 5].iter().map(|&i| row[i].as_str()).collect();
        assert_eq!(cells, [a.as_str(), CLIENT_SIGNER, "jane", "24h", "Pending"], "kubectl 1.{minor}");
        let groups = ok(api.kubectl_kubeconfig(minor, &admin, &["get", "csr", &a, "-o", "jsonpath={.spec.groups}"]));
        assert!(groups.contains("dev") && groups.contains("system:authenticated"), "kubectl 1.{minor}: groups {groups}");

        // 2. jane may not approve; the admin approves one and denies the other.
        refused(
            api.kubectl_kubeconfig(minor, &jane, &["certificate", "approve", &a]),
            &[&format!("certificatesigningrequests.certificates.k8s.io \"{a}\" is forbidden: user not permitted to approve requests with signerName \"{CLIENT_SIGNER}\"")],
        );
        ok(api.kubectl_kubeconfig(minor, &admin, &["certificate", "approve", &a]));
        ok(api.kubectl_kubeconfig(minor, &admin, &["certificate", "deny", &b]));
        assert_eq!(get_csr(&api, minor, &admin, &a).1[5], "Approved", "kubectl 1.{minor}");
        assert_eq!(get_csr(&api, minor, &jane, &b).1[5], "Denied", "kubectl 1.{minor}");
        let reason = ok(api.kubectl_kubeconfig(minor, &admin, &["get", "csr", &a, "-o", "jsonpath={.status.conditions[0].reason}"]));
        assert_eq!(reason, "KubectlApprove", "kubectl 1.{minor}");

        // 3. A request that is no CSR: 422 with the field; system:masters from the client signer: 403.
        let bad = format!("bad-{minor}");
        let file = api.write_file(&format!("{bad}.yaml"), &csr_yaml(&bad, CLIENT_SIGNER, "not a pem"));
        refused(
            api.kubectl_kubeconfig(minor, &jane, &["create", "-f", file.to_str().expect("utf-8")]),
            &[&format!("\"{bad}\" is invalid"), "spec.request: Invalid value: []byte{0x6e, 0x6f, 0x74,", "PEM block type must be CERTIFICATE REQUEST"],
        );
        let masters = format!("masters-{minor}");
        let file = api.write_file(&format!("{masters}.yaml"), &csr_yaml(&masters, CLIENT_SIGNER, &csr_pem("jane", "system:masters")));
        refused(
            api.kubectl_kubeconfig(minor, &jane, &["create", "-f", file.to_str().expect("utf-8")]),
            &[&format!("\"{masters}\" is forbidden: use of {CLIENT_SIGNER} signer with system:masters group is not allowed")],
        );

        // 4. Writing the certificate needs `sign` on the signer: jane is refused, the admin not.
        let patch = format!("{{\"status\":{{\"certificate\":\"{}\"}}}}", b64(&certificate_pem()));
        let status_patch = ["patch", "csr", &a, "--subresource=status", "--type=merge", "-p", &patch];
        refused(
            api.kubectl_kubeconfig(minor, &jane, &status_patch),
            &[&format!("\"{a}\" is forbidden: user not permitted to sign requests with signerName \"{CLIENT_SIGNER}\"")],
        );
        ok(api.kubectl_kubeconfig(minor, &admin, &status_patch));
        assert_eq!(get_csr(&api, minor, &jane, &a).1[5], "Approved,Issued", "kubectl 1.{minor}");
        let certificate = ok(api.kubectl_kubeconfig(minor, &jane, &["get", "csr", &a, "-o", "jsonpath={.status.certificate}"]));
        let pem = base64::engine::general_purpose::STANDARD.decode(certificate.trim()).expect("base64");
        assert!(String::from_utf8_lossy(&pem).starts_with("-----BEGIN CERTIFICATE-----"), "kubectl 1.{minor}");
        // Once set, the certificate stays.
        let another = format!("{{\"status\":{{\"certificate\":\"{}\"}}}}", b64(&certificate_pem()));
        refused(
            api.kubectl_kubeconfig(minor, &admin, &["patch", "csr", &a, "--subresource=status", "--type=merge", "-p", &another]),
            &["status.certificate: Forbidden: updates may not modify existing certificate content"],
        );
    }
}
