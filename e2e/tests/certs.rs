//! `kubelab certs` end to end, as kubeadm's `init phase certs`/`phase kubeconfig`, `certs
//! check-expiration` and `kubeconfig user` are used: the binary makes a cluster's PKI from
//! flags, keeps all of it on a second run, issues the API server's certificate again (alone)
//! when its names change, shows the expiry tables, and prints a user's kubeconfig that the
//! pinned kubectl reads.

use std::os::unix::fs::PermissionsExt as _;
use std::process::Command;

use e2e::apiserver::kubelab_certs as certs;

fn count(out: &str, word: &str) -> usize {
    out.lines().filter(|l| l.contains(word)).count()
}

#[test]
fn generate_keep_renew_check_and_a_users_kubeconfig() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let pki = dir.path().join("pki");
    let pki_dir = pki.to_str().expect("utf-8");
    let generate = |extra: &[&str]| {
        let mut args = vec!["generate", "--cert-dir", pki_dir, "--node-name", "cp", "--node", "cp=127.0.0.1", "--node", "n1=127.0.0.2"];
        args.extend(extra);
        certs(&args)
    };

    // 12 certificates (3 CAs), the service account key pair, 8 kubeconfigs.
    let first = generate(&[]);
    assert_eq!((count(&first, "Generating"), count(&first, "Using the existing")), (21, 0), "{first}");
    for (file, mode) in [("ca.key", 0o600), ("ca.crt", 0o644), ("etcd/peer.key", 0o600), ("sa.key", 0o600), ("admin.conf", 0o600), ("kubelet-n1.conf", 0o600)] {
        let meta = std::fs::metadata(pki.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(meta.permissions().mode() & 0o777, mode, "{file}");
    }

    let second = generate(&[]);
    assert_eq!((count(&second, "Using the existing"), count(&second, "Generating"), count(&second, "Renewing")), (21, 0, 0), "{second}");

    let third = generate(&["--apiserver-cert-extra-sans", "lab.local"]);
    let renewed: Vec<&str> = third.lines().filter(|l| l.contains("Renewing")).collect();
    assert_eq!(renewed.len(), 1, "{third}");
    assert!(renewed[0].starts_with("[certs] Renewing \"apiserver\" certificate and key: DNS names changed"), "{third}");

    let tables = certs(&["check-expiration", "--cert-dir", pki_dir]);
    let mut lines = tables.lines();
    let header: Vec<&str> = lines.next().expect("a header").split("   ").map(str::trim).filter(|c| !c.is_empty()).collect();
    assert_eq!(header, ["CERTIFICATE", "EXPIRES", "RESIDUAL TIME", "CERTIFICATE AUTHORITY", "EXTERNALLY MANAGED"]);
    let rows: Vec<Vec<&str>> = lines.by_ref().take_while(|l| !l.is_empty()).map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows.len(), 17, "{tables}");
    for row in &rows {
        // name, "Dec 04, 2027 20:34 UTC" (five words), residual time, CA, externally managed
        assert_eq!(row.len(), 9, "{row:?}");
        assert!(row[6] == "364d" || row[6] == "365d", "{row:?}");
        assert_eq!(row[8], "no", "{row:?}");
    }
    assert!(rows.iter().any(|r| r[0] == "kubelet-n1.conf" && r[7] == "ca"), "{tables}");
    assert!(rows.iter().any(|r| r[0] == "etcd-peer" && r[7] == "etcd-ca"), "{tables}");
    let cas: Vec<(&str, &str)> = lines.skip(1).map(|l| l.split_whitespace().collect::<Vec<_>>()).map(|c| (c[0], c[6])).collect();
    assert_eq!(cas, [("ca", "9y"), ("etcd-ca", "9y"), ("front-proxy-ca", "9y")], "{tables}");

    let jane = certs(&["kubeconfig", "--cert-dir", pki_dir, "--client-name", "jane", "--org", "devs", "--server", "https://cp:6443"]);
    let path = dir.path().join("jane.conf");
    std::fs::write(&path, jane).expect("writing jane.conf");
    let kubectl = e2e::apiserver::kubectl_for(33).expect("kubectl 1.33");
    let view = |jsonpath: &str| {
        let out = Command::new(&kubectl)
            .env("HOME", dir.path())
            .arg("--kubeconfig")
            .arg(&path)
            .args(["config", "view", "--raw", "-o", &format!("jsonpath={jsonpath}")])
            .output()
            .expect("running kubectl");
        assert!(out.status.success(), "kubectl config view: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(view("{.current-context}"), "jane@kubernetes");
    assert_eq!(view("{.clusters[0].cluster.server}"), "https://cp:6443");
    assert!(!view("{.users[0].user.client-key-data}").is_empty());
}
