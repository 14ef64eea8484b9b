//! The store on https with client certificate authentication (etcd's `--cert-file`,
//! `--key-file`, `--trusted-ca-file`, `--client-cert-auth` and their `--peer-` forms), with the
//! etcd certificates `kubelab certs generate` makes in kubeadm's layout, driven by Debian's
//! `etcdctl` and by kubectl through an API server given `--etcd-cafile`, `--etcd-certfile` and
//! `--etcd-keyfile`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use e2e::apiserver::{ApiCluster, ApiOptions, kubelab_certs};
use e2e::etcdctl::Etcdctl;
use e2e::{StoreCluster, StoreOptions, StoreTls};

/// A PKI made by `kubelab certs generate` in `dir`.
fn pki(dir: &Path) -> StoreTls {
    kubelab_certs(&["generate", "--cert-dir", &dir.display().to_string(), "--node-name", "store-tls"]);
    StoreTls { pki: dir.to_path_buf() }
}

/// A three-member cluster on https, with client and peer certificate authentication.
async fn tls_cluster(tls: &StoreTls) -> StoreCluster {
    let opts = StoreOptions { proxy: false, tls: Some(tls.clone()), ..StoreOptions::default() };
    StoreCluster::start(3, opts).await.expect("a TLS cluster elects a leader")
}

fn etcdctl(endpoints: &[String]) -> Etcdctl {
    Etcdctl::new(endpoints).unwrap_or_else(|e| panic!("{e:#}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_cluster_with_peer_cert_auth_elects_a_leader_and_serves_only_clients_of_its_ca() {
    let dir = tempfile::tempdir().unwrap();
    let tls = pki(&dir.path().join("pki"));
    let c = tls_cluster(&tls).await;
    // Raft messages travelled between the members over TLS: they agree on a leader.
    let leader = c.leader().await.expect("a leader");
    eprintln!("[test] leader is member-{leader}");

    // Written through one member with the etcd CA and a client certificate of it, read back
    // from every member alone (serializable: each one's own copy).
    let ca = tls.etcd("ca.crt");
    let (cert, key) = (tls.etcd("healthcheck-client.crt"), tls.etcd("healthcheck-client.key"));
    let ctl = etcdctl(&[c.endpoint(0)]).with_tls(&ca, Some((&cert, &key)));
    let out = ctl.run(&["put", "/tls/greeting", "hello"]).and_then(|o| o.ok()).unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(out.trim(), "OK");
    // Endpoints as host:port too (etcdctl 3.4 then takes TLS from --cacert/--cert/--key).
    let host_port = |i: usize| c.endpoint(i).trim_start_matches("https://").to_string();
    for i in 0..c.len() {
        let ctl = ctl.with_endpoints(&[host_port(i)]);
        let got = e2e::poll_until("the write on every member", Duration::from_secs(10), Duration::from_millis(100), || {
            let ctl = ctl.clone();
            async move {
                let out = ctl.run(&["get", "/tls/greeting", "--consistency=s"])?.ok()?;
                Ok((out.trim() == "/tls/greeting\nhello").then_some(out))
            }
        })
        .await
        .unwrap_or_else(|e| panic!("member-{i}: {e:#}"));
        eprintln!("[test] member-{i}: {}", got.trim().replace('\n', " "));
    }

    let all: Vec<String> = (0..c.len()).map(host_port).collect();
    // etcdctl 3.4 writes its health lines to stderr.
    let health = ctl.with_endpoints(&all).run(&["endpoint", "health"]).expect("etcdctl runs");
    assert!(health.success && health.stderr.matches("is healthy").count() == 3, "{}", health.describe());

    // No client certificate: refused at the handshake.
    let refused = ctl.with_tls(&ca, None).run(&["get", "/tls/greeting"]).expect("etcdctl runs");
    assert!(!refused.success, "a client without a certificate was served: {}", refused.describe());
    eprintln!("[test] without --cert/--key: {}", refused.stderr.trim());

    // A client certificate another CA signed: refused too.
    let other = pki(&dir.path().join("other"));
    let foreign = ctl.with_tls(&ca, Some((&other.etcd("healthcheck-client.crt"), &other.etcd("healthcheck-client.key"))));
    let refused = foreign.run(&["get", "/tls/greeting"]).expect("etcdctl runs");
    assert!(!refused.success, "a client of another CA was served: {}", refused.describe());

    // Plain HTTP to the TLS port gets nothing.
    let plain = etcdctl(&[c.endpoint(0).replace("https://", "http://")]);
    let refused = plain.run(&["get", "/tls/greeting"]).expect("etcdctl runs");
    assert!(!refused.success, "plain HTTP was served on the TLS port: {}", refused.describe());

    // The peer port takes only members of the peer CA: a client certificate of another CA is
    // refused at the handshake, one of the etcd CA gets HTTP/2 spoken to it.
    let peer_port = c.member(0).peer_port;
    let theirs = tls_read(peer_port, &ca, Some((&other.etcd("peer.crt"), &other.etcd("peer.key")))).await;
    assert!(theirs.is_err(), "the peer port served a certificate of another CA: {theirs:?}");
    let none = tls_read(peer_port, &ca, None).await;
    assert!(none.is_err(), "the peer port served a client without a certificate: {none:?}");
    let ours = tls_read(peer_port, &ca, Some((&tls.etcd("peer.crt"), &tls.etcd("peer.key")))).await;
    assert!(ours.is_ok_and(|n| n > 0), "the peer port refused a member's certificate");
}

/// Opens a TLS connection to 127.0.0.1:`port` (verifying it against `ca`, presenting
/// `client`), sends HTTP/2's connection preface, and reads: how many bytes the server answered.
async fn tls_read(port: u16, ca: &Path, client: Option<(&Path, &Path)>) -> std::io::Result<usize> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider).with_safe_default_protocol_versions().unwrap().with_root_certificates(roots);
    let mut config = match client {
        Some((cert, key)) => {
            let chain = CertificateDer::pem_file_iter(cert).unwrap().map(Result::unwrap).collect();
            builder.with_client_auth_cert(chain, PrivateKeyDer::from_pem_file(key).unwrap()).unwrap()
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config)).connect(name, tcp).await?;
    tls.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00").await?;
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(5), tls.read(&mut buf)).await.map_err(|_| std::io::Error::other("no answer"))??;
    if n == 0 {
        return Err(std::io::Error::other("closed without an answer"));
    }
    Ok(n)
}

#[test]
fn an_https_url_without_a_certificate_and_a_missing_file_are_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let bin = e2e::kubelab_bin().unwrap();
    let run = |extra: &[&str]| {
        let data = dir.path().join("data");
        let out = Command::new(&bin)
            .args(["store", "--name", "tls", "--data-dir"])
            .arg(&data)
            .args(["--listen-client-urls", "https://127.0.0.1:0", "--listen-peer-urls", "http://127.0.0.1:0"])
            .args(extra)
            .output()
            .unwrap();
        assert!(!out.status.success(), "kubelab store {extra:?} started");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = run(&[]);
    assert!(err.contains("TLS key/cert (--cert-file, --key-file) must be provided for client url https://127.0.0.1:0 with HTTPS scheme"), "{err}");
    let missing: PathBuf = dir.path().join("server.crt");
    let err = run(&["--cert-file", &missing.display().to_string(), "--key-file", "/dev/null"]);
    assert!(err.contains(&format!("--cert-file {}", missing.display())), "{err}");
    // A member that dials https:// peers needs the peer CA to verify them.
    let tls = pki(&dir.path().join("pki"));
    let f = |name: &str| tls.etcd(name).display().to_string();
    let (cert, key) = (f("server.crt"), f("server.key"));
    let (peer_cert, peer_key) = (f("peer.crt"), f("peer.key"));
    let err = run(&[
        "--cert-file", &cert, "--key-file", &key,
        "--initial-cluster", "tls=http://127.0.0.1:0,other=https://127.0.0.1:1",
        "--peer-cert-file", &peer_cert, "--peer-key-file", &peer_key,
    ]);
    assert!(err.contains("--peer-trusted-ca-file is needed"), "{err}");
    assert!(!dir.path().join("data").exists(), "the data directory was made before the flags were checked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_reaches_a_tls_store_with_etcd_cafile_certfile_keyfile_and_serves_kubectl() {
    let c = ApiCluster::start(ApiOptions { store_tls: true, ..ApiOptions::default() }).await.expect("API server on a TLS store");
    assert!(c.store.endpoint(0).starts_with("https://"));
    c.kubectl(&["create", "configmap", "over-tls", "--from-literal=k=v"]).ok().unwrap_or_else(|e| panic!("{e:#}"));
    let out = c.kubectl(&["get", "configmap", "over-tls", "-o", "jsonpath={.data.k}"]).ok().unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(out, "v");

    // The object is in the store, as etcdctl with the API server's etcd client certificate sees.
    let pki = c.root().join("pki");
    let ctl = etcdctl(&c.store.client_endpoints())
        .with_tls(&pki.join("etcd/ca.crt"), Some((&pki.join("apiserver-etcd-client.crt"), &pki.join("apiserver-etcd-client.key"))));
    let keys = ctl.run(&["get", "/registry/configmaps/default/over-tls", "--keys-only"]).and_then(|o| o.ok()).unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(keys.trim(), "/registry/configmaps/default/over-tls");

    // A missing --etcd-cafile stops the API server at start, naming the flag and the file.
    let missing = c.root().join("nope/ca.crt");
    let out = Command::new(e2e::kubelab_bin().unwrap())
        .args(["apiserver", "--etcd-servers", &c.store.endpoint(0), "--secure-port", "0", "--insecure-port", "0", "--etcd-cafile"])
        .arg(&missing)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains(&format!("--etcd-cafile {}", missing.display())), "{err}");
}
