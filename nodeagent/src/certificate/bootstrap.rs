//! Mirrors pkg/kubelet/certificate/bootstrap/bootstrap.go (`LoadClientCert`): TLS bootstrap. A
//! node that has only a bootstrap token (`--bootstrap-kubeconfig`) asks the API server for its
//! client certificate, and writes the `--kubeconfig` it runs with from then on.
//!
//! 1. `--kubeconfig` is still good — it exists and its client certificate is there and not
//!    expired ([`client_config_validity`]): nothing to do.
//! 2. Otherwise connect with the bootstrap kubeconfig, and take a private key: the current
//!    certificate's (`<cert-dir>/kubelet-client-current.pem`), else the one a failed attempt
//!    left in `<cert-dir>/kubelet-client.key.tmp`, else a new one kept there until the end.
//! 3. Make a PKCS#10 request for `CN=system:node:<node-name>, O=system:nodes` with it
//!    ([`pki::make_csr`]) and create a CertificateSigningRequest for the signer
//!    `kubernetes.io/kube-apiserver-client-kubelet` ([`super::csr`]).
//! 4. Wait (an hour at most) until the controller manager approves and signs it.
//! 5. Store the certificate and key as `<cert-dir>/kubelet-client-<timestamp>.pem` behind the
//!    `kubelet-client-current.pem` symlink ([`super::certificate_store`]), remove the temporary
//!    key, and write `--kubeconfig`: the bootstrap kubeconfig's server and CA, and the symlink as
//!    both client certificate and key.

use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, Utc};
use kube::config::{AuthInfo, Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext};

use super::certificate_store::{FileStore, KUBELET_CLIENT_PAIR, Pair, write_private};
use super::csr::{KUBE_APISERVER_CLIENT_KUBELET_SIGNER_NAME, USAGE_CLIENT_AUTH, USAGE_DIGITAL_SIGNATURE};
use crate::error::{Error, Result};

/// `tmpPrivateKeyFile`: the key of a request not yet answered, kept across restarts so a
/// retried request asks for the same key.
pub(crate) const TMP_PRIVATE_KEY_FILE: &str = "kubelet-client.key.tmp";
/// How long to wait for the certificate (requestNodeCertificate's hour).
pub(crate) const CERTIFICATE_WAIT_TIMEOUT: Duration = Duration::from_secs(3600);
/// The group and user name prefix of node client certificates (the Node authorizer's).
const NODES_GROUP: &str = "system:nodes";
const NODE_USER_PREFIX: &str = "system:node:";

/// Whether `--kubeconfig` can be used as it is (`isClientConfigStillValid`).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Validity {
    Valid,
    /// No such file: bootstrap.
    Missing,
    /// Unreadable, no client certificate, or an expired one: bootstrap (the reason is logged).
    Invalid(String),
}

/// Step 1: `isClientConfigStillValid` at `now`.
pub(crate) fn client_config_validity(kubeconfig_path: &Path, now: DateTime<Utc>) -> Validity {
    if !kubeconfig_path.exists() {
        return Validity::Missing;
    }
    let path = kubeconfig_path.display();
    let kc = match Kubeconfig::read_from(kubeconfig_path) {
        Ok(kc) => kc,
        Err(e) => return Validity::Invalid(format!("unable to read existing bootstrap client config from {path}: {e}")),
    };
    let cert_pem = match client_certificate_pem(&kc) {
        Ok(pem) => pem,
        Err(e) => return Validity::Invalid(format!("unable to load TLS configuration from existing bootstrap client config read from {path}: {e}")),
    };
    let certs = match pki::parse_certs_pem(&cert_pem, "client certificate") {
        Ok(certs) => certs,
        Err(e) => return Validity::Invalid(format!("unable to load TLS certificates from existing bootstrap client config read from {path}: {e}")),
    };
    for der in &certs {
        match pki::parse_der(der) {
            Ok(info) if now > info.not_after => {
                return Validity::Invalid(format!("part of the existing bootstrap client certificate in {path} is expired: {}", info.not_after));
            }
            Ok(_) => {}
            Err(e) => return Validity::Invalid(format!("unable to load TLS certificates from existing bootstrap client config read from {path}: {e}")),
        }
    }
    Validity::Valid
}

/// The current context's user's client certificate, from its file or its data.
fn client_certificate_pem(kc: &Kubeconfig) -> std::result::Result<Vec<u8>, String> {
    let user = current_context(kc)?.user.clone().unwrap_or_default();
    let auth = kc.auth_infos.iter().find(|a| a.name == user).and_then(|a| a.auth_info.as_ref()).ok_or(format!("no user {user:?}"))?;
    if let Some(data) = &auth.client_certificate_data {
        use base64::Engine as _;
        return base64::engine::general_purpose::STANDARD.decode(data.trim()).map_err(|e| format!("client-certificate-data: {e}"));
    }
    let file = auth.client_certificate.as_ref().ok_or("no client certificate")?;
    std::fs::read(file).map_err(|e| format!("{file}: {e}"))
}

fn current_context(kc: &Kubeconfig) -> std::result::Result<&Context, String> {
    let name = kc.current_context.as_deref().unwrap_or_default();
    kc.contexts.iter().find(|c| c.name == name).and_then(|c| c.context.as_ref()).ok_or(format!("context {name:?} not found"))
}

/// The current context's cluster of the bootstrap kubeconfig (with its CA file made absolute, as
/// kube's loader does).
fn bootstrap_cluster(bootstrap_path: &Path) -> Result<Cluster> {
    let invalid = |e: String| Error::CertificateBootstrap(format!("unable to load bootstrap kubeconfig: {}: {e}", bootstrap_path.display()));
    let kc = Kubeconfig::read_from(bootstrap_path).map_err(|e| invalid(e.to_string()))?;
    let name = current_context(&kc).map_err(invalid)?.cluster.clone();
    kc.clusters.into_iter().find(|c| c.name == name).and_then(|c| c.cluster).ok_or_else(|| invalid(format!("cluster {name:?} not found")))
}

/// Step 5's kubeconfig (`writeKubeconfigFromBootstrapping`): the bootstrap cluster's server and
/// CA (its file if it names one, else its data), the store's `current` file as certificate and
/// key.
pub(crate) fn write_kubeconfig_from_bootstrapping(cluster: &Cluster, kubeconfig_path: &Path, pem_path: &Path) -> Result<()> {
    let ca_data = if cluster.certificate_authority.is_some() { None } else { cluster.certificate_authority_data.clone() };
    let pem = pem_path.display().to_string();
    let kc = Kubeconfig {
        api_version: Some("v1".into()),
        kind: Some("Config".into()),
        clusters: vec![NamedCluster {
            name: "default-cluster".into(),
            cluster: Some(Cluster {
                server: cluster.server.clone(),
                insecure_skip_tls_verify: cluster.insecure_skip_tls_verify,
                certificate_authority: cluster.certificate_authority.clone(),
                certificate_authority_data: ca_data,
                ..Default::default()
            }),
            ..Default::default()
        }],
        auth_infos: vec![NamedAuthInfo {
            name: "default-auth".into(),
            auth_info: Some(AuthInfo { client_certificate: Some(pem.clone()), client_key: Some(pem), ..Default::default() }),
            ..Default::default()
        }],
        contexts: vec![NamedContext {
            name: "default-context".into(),
            context: Some(Context {
                cluster: "default-cluster".into(),
                user: Some("default-auth".into()),
                namespace: Some("default".into()),
                ..Default::default()
            }),
            ..Default::default()
        }],
        current_context: Some("default-context".into()),
        ..Default::default()
    };
    let yaml = serde_norway::to_string(&kc).map_err(|e| Error::CertificateBootstrap(format!("kubeconfig {}: {e}", kubeconfig_path.display())))?;
    if let Some(dir) = kubeconfig_path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    // It names a key file, not a key: 0600 as clientcmd.WriteToFile writes it anyway.
    write_private(kubeconfig_path, yaml.as_bytes()).map_err(|e| Error::io(kubeconfig_path, e))
}

/// Step 2's key: the current pair's, else the temporary file's, else a new one written there
/// (`keyutil.LoadOrGenerateKeyFile`).
pub(crate) fn load_or_generate_key(store: &FileStore, tmp_key_path: &Path) -> Result<String> {
    if let Ok(current) = store.current() {
        return Ok(current.key_pem);
    }
    match std::fs::read_to_string(tmp_key_path) {
        Ok(pem) => return Ok(pem),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io(tmp_key_path, e)),
    }
    tracing::info!(target: "kubelet::certificate", path = %tmp_key_path.display(), "No valid private key and/or certificate found, creating a new one");
    let pem = pki::make_private_key_pem().map_err(|e| Error::CertificateBootstrap(format!("generating a private key: {e}")))?;
    if let Some(dir) = tmp_key_path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    pki::write_key(tmp_key_path, pem.as_bytes()).map_err(|e| Error::CertificateBootstrap(e.to_string()))?;
    Ok(pem)
}

/// `LoadClientCert`: the five steps above. Runs before anything else of the node agent.
pub(crate) async fn load_client_cert(kubeconfig_path: &Path, bootstrap_path: &Path, cert_dir: &Path, node_name: &str) -> Result<()> {
    // Step 1.
    let (kubeconfig, bootstrap, dir) = (kubeconfig_path.to_path_buf(), bootstrap_path.to_path_buf(), cert_dir.to_path_buf());
    let validity = blocking(move || Ok(client_config_validity(&kubeconfig, Utc::now()))).await?;
    match validity {
        Validity::Valid => {
            tracing::info!(target: "kubelet::certificate", path = %kubeconfig_path.display(), "Kubeconfig exists and is valid, skipping bootstrap");
            return Ok(());
        }
        Validity::Missing => {}
        Validity::Invalid(reason) => tracing::warn!(target: "kubelet::certificate", %reason, "the kubeconfig cannot be used as it is"),
    }
    tracing::info!(target: "kubelet::certificate", bootstrap = %bootstrap_path.display(), "Using bootstrap kubeconfig to generate TLS client cert, key and kubeconfig file");

    // Step 2.
    let cluster = {
        let bootstrap = bootstrap.clone();
        blocking(move || bootstrap_cluster(&bootstrap)).await?
    };
    let client = client::client_as(&client::Connection::Kubeconfig(bootstrap), "kubelet").await?;
    let tmp_key = dir.join(TMP_PRIVATE_KEY_FILE);
    let key_pem = {
        let (dir, tmp_key) = (dir.clone(), tmp_key.clone());
        blocking(move || load_or_generate_key(&FileStore::new(KUBELET_CLIENT_PAIR, &dir), &tmp_key)).await?
    };

    // Step 3 (`requestNodeCertificate`). kubelab's keys are ECDSA: no key encipherment usage,
    // which is for RSA keys only.
    let cn = format!("{NODE_USER_PREFIX}{node_name}");
    let csr_pem = pki::make_csr(&key_pem, &cn, &[NODES_GROUP])
        .map_err(|e| Error::CertificateBootstrap(format!("unable to generate certificate request: {e}")))?;
    let usages = [USAGE_DIGITAL_SIGNATURE, USAGE_CLIENT_AUTH];
    let (name, uid) =
        super::csr::request_certificate(client.clone(), &csr_pem, "node-csr-", KUBE_APISERVER_CLIENT_KUBELET_SIGNER_NAME, &usages).await?;

    // Step 4.
    tracing::info!(target: "kubelet::certificate", csr = %name, "Waiting for client certificate to be issued");
    let cert = super::csr::wait_for_certificate(client, &name, &uid, CERTIFICATE_WAIT_TIMEOUT).await?;
    let cert_pem = String::from_utf8(cert).map_err(|_| Error::CertificateBootstrap(format!("the certificate of csr {name:?} is not PEM")))?;

    // Step 5.
    let kubeconfig = kubeconfig_path.to_path_buf();
    let pem_path = blocking(move || {
        let store = FileStore::new(KUBELET_CLIENT_PAIR, &dir);
        let written = store.update(&Pair { cert_pem, key_pem }, Utc::now()).map_err(Error::CertificateBootstrap)?;
        match std::fs::remove_file(&tmp_key) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(target: "kubelet::certificate", path = %tmp_key.display(), error = %e, "Failed cleaning up private key file"),
        }
        write_kubeconfig_from_bootstrapping(&cluster, &kubeconfig, &store.current_path())?;
        Ok(written)
    })
    .await?;
    tracing::info!(target: "kubelet::certificate", certificate = %pem_path.display(), kubeconfig = %kubeconfig_path.display(), "client certificate issued; kubeconfig written");
    Ok(())
}

/// File work off the async executor.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f).await.map_err(|e| Error::CertificateBootstrap(format!("bootstrap task: {e}")))?
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::{Arc, Mutex};

    use super::*;

    /// The path a kubeconfig's relative file reference resolves to.
    fn abs(path: &Path) -> PathBuf {
        std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
    }

    fn signed(cn: &str) -> pki::CertAndKey {
        let ca = pki::CertificateAuthority::new("kubernetes").expect("a CA");
        let config = pki::Config { common_name: cn.into(), organizations: vec![NODES_GROUP.into()], usages: vec![pki::Usage::ClientAuth], ..Default::default() };
        ca.sign(&config).expect("signed")
    }

    fn bootstrap_kubeconfig(dir: &Path) -> PathBuf {
        std::fs::write(dir.join("ca.crt"), signed("kubernetes-ca").cert_pem).expect("a CA file");
        let path = dir.join("bootstrap-kubelet.conf");
        let text = "apiVersion: v1\nkind: Config\nclusters:\n- name: lab\n  cluster:\n    server: https://127.0.0.1:6443\n    certificate-authority: ca.crt\nusers:\n- name: tls-bootstrap-token-user\n  user:\n    token: abcdef.0123456789abcdef\ncontexts:\n- name: ctx\n  context:\n    cluster: lab\n    user: tls-bootstrap-token-user\ncurrent-context: ctx\n";
        std::fs::write(&path, text).expect("the bootstrap kubeconfig");
        path
    }

    #[test]
    fn bootstrap_is_needed_without_a_good_client_certificate() {
        let dir = tempfile::tempdir().expect("a directory");
        let kubeconfig = dir.path().join("kubelet.conf");
        let now = Utc::now();
        // Missing.
        assert_eq!(client_config_validity(&kubeconfig, now), Validity::Missing);
        // A token, no certificate (the bootstrap kubeconfig itself).
        let token_only = bootstrap_kubeconfig(dir.path());
        assert!(matches!(client_config_validity(&token_only, now), Validity::Invalid(r) if r.contains("no client certificate")));
        // Not a kubeconfig.
        std::fs::write(&kubeconfig, "{not yaml: [").expect("written");
        assert!(matches!(client_config_validity(&kubeconfig, now), Validity::Invalid(r) if r.starts_with("unable to read existing bootstrap client config")));
        // A certificate in the store: fine now, expired in two years.
        let store = FileStore::new(KUBELET_CLIENT_PAIR, &dir.path().join("pki"));
        let pair = signed("system:node:n1");
        store.update(&Pair { cert_pem: pair.cert_pem, key_pem: pair.key_pem }, now).expect("stored");
        let cluster = bootstrap_cluster(&token_only).expect("the cluster");
        write_kubeconfig_from_bootstrapping(&cluster, &kubeconfig, &store.current_path()).expect("written");
        assert_eq!(client_config_validity(&kubeconfig, now), Validity::Valid);
        let later = now + chrono::Duration::days(2 * 365);
        assert!(matches!(client_config_validity(&kubeconfig, later), Validity::Invalid(r) if r.contains("is expired")));
        // A certificate file that went away.
        std::fs::remove_file(store.current_path()).expect("removed");
        assert!(matches!(client_config_validity(&kubeconfig, now), Validity::Invalid(_)));
    }

    #[tokio::test]
    async fn the_written_kubeconfig_names_the_store_and_the_bootstrap_server() {
        let dir = tempfile::tempdir().expect("a directory");
        let bootstrap = bootstrap_kubeconfig(dir.path());
        let kubeconfig = dir.path().join("kubelet.conf");
        let store = FileStore::new(KUBELET_CLIENT_PAIR, &dir.path().join("pki"));
        let pair = signed("system:node:n1");
        store.update(&Pair { cert_pem: pair.cert_pem.clone(), key_pem: pair.key_pem }, Utc::now()).expect("stored");
        write_kubeconfig_from_bootstrapping(&bootstrap_cluster(&bootstrap).expect("the cluster"), &kubeconfig, &store.current_path()).expect("written");

        let kc = Kubeconfig::read_from(&kubeconfig).expect("a kubeconfig");
        let cluster = kc.clusters[0].cluster.as_ref().expect("a cluster");
        assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:6443"));
        assert_eq!(cluster.certificate_authority.as_deref(), Some(abs(&dir.path().join("ca.crt")).to_str().expect("utf-8")), "the CA file, made absolute");
        let auth = kc.auth_infos[0].auth_info.as_ref().expect("a user");
        let current = store.current_path().display().to_string();
        assert_eq!((auth.client_certificate.as_deref(), auth.client_key.as_deref()), (Some(current.as_str()), Some(current.as_str())));
        assert!(auth.token.is_none(), "the bootstrap token is not carried over");
        // kube (the node agent's client) loads it: the CA, and the identity from the one PEM file.
        let config = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await.expect("loadable");
        assert_eq!(config.cluster_url.to_string(), "https://127.0.0.1:6443/");
        assert!(kube::Client::try_from(config).is_ok(), "a client with the certificate and key");
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(std::fs::metadata(&kubeconfig).expect("written").permissions().mode() & 0o777, 0o600);
    }

    /// A fake API server for one CertificateSigningRequest, under `#[cfg(test)]` only: a create
    /// answers with the request named `node-csr-test` (uid `u1`); a list gives it pending; a watch
    /// sends one MODIFIED event with `status`. Every request is recorded (request line, the
    /// Authorization header, the body).
    async fn fake_apiserver(status: serde_json::Value, seen: Arc<Mutex<Vec<(String, String, String)>>>) -> String {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            let created = Arc::new(Mutex::new(serde_json::Value::Null));
            while let Ok((mut sock, _)) = listener.accept().await {
                let (status, seen, created) = (status.clone(), seen.clone(), created.clone());
                tokio::spawn(async move {
                    // One request a connection is enough for kube's client; read its head and body.
                    let mut data = Vec::new();
                    let mut buf = [0u8; 8192];
                    let head_end = loop {
                        let n = sock.read(&mut buf).await.unwrap_or(0);
                        if n == 0 {
                            return;
                        }
                        data.extend_from_slice(&buf[..n]);
                        if let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                            break i + 4;
                        }
                    };
                    let head = String::from_utf8_lossy(&data[..head_end]).to_string();
                    let header = |name: &str| {
                        head.lines().find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim().to_string()))
                    };
                    let length: usize = header("content-length").and_then(|l| l.parse().ok()).unwrap_or(0);
                    while data.len() < head_end + length {
                        let n = sock.read(&mut buf).await.unwrap_or(0);
                        if n == 0 {
                            break;
                        }
                        data.extend_from_slice(&buf[..n]);
                    }
                    let body = String::from_utf8_lossy(&data[head_end..]).to_string();
                    let line = head.lines().next().unwrap_or_default().to_string();
                    seen.lock().expect("lock").push((line.clone(), header("authorization").unwrap_or_default(), body.clone()));
                    let (code, answer) = if line.starts_with("POST ") {
                        let mut csr: serde_json::Value = serde_json::from_str(&body).expect("a JSON request");
                        csr["metadata"] = serde_json::json!({"name": "node-csr-test", "uid": "u1", "resourceVersion": "1"});
                        *created.lock().expect("lock") = csr.clone();
                        ("201 Created", csr.to_string())
                    } else if line.contains("watch=true") {
                        let mut csr = created.lock().expect("lock").clone();
                        csr["metadata"]["resourceVersion"] = "2".into();
                        csr["status"] = status;
                        ("200 OK", format!("{}\n", serde_json::json!({"type": "MODIFIED", "object": csr})))
                    } else {
                        let csr = created.lock().expect("lock").clone();
                        let list = serde_json::json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequestList", "metadata": {"resourceVersion": "1"}, "items": [csr]});
                        ("200 OK", list.to_string())
                    };
                    let resp = format!("HTTP/1.1 {code}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}", answer.len());
                    let _ = sock.write_all(resp.as_bytes()).await;
                });
            }
        });
        format!("http://{addr}")
    }

    fn token_kubeconfig(dir: &Path, server: &str) -> PathBuf {
        let path = dir.join("bootstrap-kubelet.conf");
        let text = format!("apiVersion: v1\nkind: Config\nclusters:\n- name: lab\n  cluster:\n    server: {server}\nusers:\n- name: tls-bootstrap-token-user\n  user:\n    token: abcdef.0123456789abcdef\ncontexts:\n- name: ctx\n  context:\n    cluster: lab\n    user: tls-bootstrap-token-user\ncurrent-context: ctx\n");
        std::fs::write(&path, text).expect("the bootstrap kubeconfig");
        path
    }

    #[tokio::test]
    async fn a_node_without_a_certificate_requests_one_and_writes_its_kubeconfig() {
        let dir = tempfile::tempdir().expect("a directory");
        let issued = signed("system:node:n1").cert_pem;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let status = serde_json::json!({
            "conditions": [{"type": "Approved", "status": "True", "reason": "AutoApproved", "message": "Auto approving kubelet client certificate after SubjectAccessReview."}],
            "certificate": base64_of(&issued),
        });
        let server = fake_apiserver(status, seen.clone()).await;
        let bootstrap = token_kubeconfig(dir.path(), &server);
        let (kubeconfig, cert_dir) = (dir.path().join("kubelet.conf"), dir.path().join("pki"));
        load_client_cert(&kubeconfig, &bootstrap, &cert_dir, "n1").await.expect("bootstrapped");

        // The request: the bootstrap token, generateName, the signer, the usages, a PKCS#10 request.
        let requests = seen.lock().expect("lock").clone();
        let (line, auth, body) = requests.iter().find(|(l, _, _)| l.starts_with("POST ")).expect("a create");
        assert!(line.starts_with("POST /apis/certificates.k8s.io/v1/certificatesigningrequests"), "{line}");
        assert_eq!(auth, "Bearer abcdef.0123456789abcdef");
        let csr: serde_json::Value = serde_json::from_str(body).expect("JSON");
        assert_eq!(csr["metadata"]["generateName"], "node-csr-");
        assert_eq!(csr["spec"]["signerName"], "kubernetes.io/kube-apiserver-client-kubelet");
        assert_eq!(csr["spec"]["usages"], serde_json::json!(["digital signature", "client auth"]));
        let request = String::from_utf8(base64_decode(csr["spec"]["request"].as_str().expect("base64"))).expect("PEM");
        assert!(request.starts_with("-----BEGIN CERTIFICATE REQUEST-----"), "{request}");
        assert!(requests.iter().any(|(l, _, _)| l.contains("watch=true") && l.contains("fieldSelector=metadata.name%3Dnode-csr-test")), "{requests:?}");

        // The store, the temporary key gone, and a kubeconfig that is now valid.
        let current = cert_dir.join("kubelet-client-current.pem");
        let target = std::fs::read_link(&current).expect("a symlink");
        assert!(target.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("kubelet-client-2") && n.ends_with(".pem")), "{target:?}");
        let stored = std::fs::read_to_string(&current).expect("the pair");
        assert!(stored.starts_with(issued.trim_end()) && stored.contains("PRIVATE KEY-----"), "{stored}");
        assert!(!cert_dir.join(TMP_PRIVATE_KEY_FILE).exists());
        assert_eq!(client_config_validity(&kubeconfig, Utc::now()), Validity::Valid);
        let kc = Kubeconfig::read_from(&kubeconfig).expect("a kubeconfig");
        assert_eq!(kc.clusters[0].cluster.as_ref().and_then(|c| c.server.as_deref()), Some(server.as_str()));

        // A second start finds the kubeconfig good and asks for nothing.
        let before = seen.lock().expect("lock").len();
        load_client_cert(&kubeconfig, &bootstrap, &cert_dir, "n1").await.expect("nothing to do");
        assert_eq!(seen.lock().expect("lock").len(), before);
    }

    #[tokio::test]
    async fn a_denied_request_stops_the_agent_with_the_reason() {
        let dir = tempfile::tempdir().expect("a directory");
        let status = serde_json::json!({"conditions": [{"type": "Denied", "status": "True", "reason": "NotOurNode", "message": "no such machine"}]});
        let server = fake_apiserver(status, Arc::new(Mutex::new(Vec::new()))).await;
        let bootstrap = token_kubeconfig(dir.path(), &server);
        let (kubeconfig, cert_dir) = (dir.path().join("kubelet.conf"), dir.path().join("pki"));
        let err = load_client_cert(&kubeconfig, &bootstrap, &cert_dir, "n1").await.expect_err("denied").to_string();
        assert_eq!(err, "certificate signing request is denied, reason: NotOurNode, message: no such machine");
        assert!(!kubeconfig.exists());
        assert!(cert_dir.join(TMP_PRIVATE_KEY_FILE).exists(), "the key is kept for the next attempt");
    }

    fn base64_of(s: &str) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    fn base64_decode(s: &str) -> Vec<u8> {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.decode(s).expect("base64")
    }

    #[test]
    fn the_key_is_the_current_pairs_else_the_temporary_files() {
        let dir = tempfile::tempdir().expect("a directory");
        let store = FileStore::new(KUBELET_CLIENT_PAIR, &dir.path().join("pki"));
        let tmp = dir.path().join("pki").join(TMP_PRIVATE_KEY_FILE);
        let first = load_or_generate_key(&store, &tmp).expect("a new key");
        assert_eq!(std::fs::read_to_string(&tmp).expect("kept"), first);
        assert_eq!(load_or_generate_key(&store, &tmp).expect("the same key"), first, "a retried request reuses the key");
        let pair = signed("system:node:n1");
        store.update(&Pair { cert_pem: pair.cert_pem, key_pem: pair.key_pem.clone() }, Utc::now()).expect("stored");
        assert_eq!(load_or_generate_key(&store, &tmp).expect("the current key").trim(), pair.key_pem.trim());
        // The key makes a request for the node's name.
        assert!(pki::make_csr(&first, "system:node:n1", &[NODES_GROUP]).expect("a CSR").starts_with("-----BEGIN CERTIFICATE REQUEST-----"));
    }
}
