//! Kubelet TLS bootstrap end to end, as `kubeadm join` does it: an administrator makes a
//! bootstrap token (`kubelab token create`), a new node agent starts with nothing but a bootstrap
//! kubeconfig holding it, asks for its client certificate with a CertificateSigningRequest, the
//! controller manager approves it (a SubjectAccessReview on certificatesigningrequests/nodeclient,
//! which kubeadm's binding grants the token's group) and signs it with the cluster CA, and the
//! node agent joins as `system:node:<name>` under the Node authorizer, runs a pod, and starts
//! again on its certificate without asking anew. A token that is wrong or gone lets nothing in.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use e2e::apiserver::{ApiCluster, ApiOptions};
use e2e::nodeagent::{NodeAgent, NodeAgentOptions};

/// `kubelab token <args>` with the administrator's kubeconfig: (success, stdout, stderr).
fn kubelab_token(admin: &Path, args: &[&str]) -> (bool, String, String) {
    let bin = e2e::kubelab_bin().expect("the kubelab binary");
    let out = Command::new(bin).arg("token").args(args).arg("--kubeconfig").arg(admin).output().expect("running kubelab token");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The subject of the first certificate in a PEM file, as openssl prints it.
fn subject_of(pem: &Path) -> String {
    let out = Command::new("openssl").args(["x509", "-noout", "-subject", "-nameopt", "compat", "-in"]).arg(pem).output().expect("openssl");
    assert!(out.status.success(), "openssl x509 {}: {}", pem.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_node_joins_with_a_bootstrap_token() {
    if let Err(e) = e2e::containerd::prerequisites() {
        panic!("the node agent tests need: {e}");
    }
    let options = ApiOptions { secure: true, controller_manager: true, extra_args: vec!["--enable-bootstrap-token-auth".into()], ..ApiOptions::default() };
    let api = ApiCluster::start(options).await.expect("store + API server");
    let admin = api.user_kubeconfig("kubernetes-admin", &["system:masters"]);
    // kubeadm's TLS bootstrap RBAC (phases/bootstraptoken/node/tlsbootstrap.go), which `kubelab
    // up` applies at every start: the default node token's group may ask for and have approved a
    // node client certificate, and get Nodes; nodes may have their renewals approved.
    let (ok, _, err) = kubelab_token(&admin, &["rbac"]);
    assert!(ok, "kubelab token rbac: {err}");

    // 1. The token, and the kubeconfig kubeadm join would write for the kubelet.
    let dir = api.root().join("joiner");
    std::fs::create_dir_all(&dir).unwrap();
    let bootstrap = dir.join("bootstrap-kubelet.conf");
    let (ok, out, err) = kubelab_token(&admin, &["create", "--description", "e2e join", "--bootstrap-kubeconfig", bootstrap.to_str().unwrap()]);
    assert!(ok, "kubelab token create: {err}");
    let token = out.trim().to_string();
    let id = token.split('.').next().unwrap().to_string();
    assert!(token.len() == 23 && token.as_bytes()[6] == b'.', "kubelab token create printed {out:?}");
    let (ok, out, err) = kubelab_token(&admin, &["list"]);
    assert!(ok, "kubelab token list: {err}");
    let line = out.lines().find(|l| l.starts_with(&token)).unwrap_or_else(|| api.fail(&format!("kubelab token list has no {token}:\n{out}")));
    for want in ["signing,authentication", "e2e join", "system:bootstrappers:kubeadm:default-node-token", "23h"] {
        assert!(line.contains(want), "kubelab token list: {want:?} missing from {line:?}");
    }
    let (ok, _, err) = kubelab_token(&admin, &["create", &token]);
    assert!(!ok && err.contains(&format!("a token with id \"{id}\" already exists")), "a second create of the same token: {err}");
    let (ok, _, err) = kubelab_token(&admin, &["create", "--groups", "system:masters"]);
    assert!(!ok && err.contains("bootstrap group \"system:masters\" is invalid"), "a token in system:masters: {err}");

    // 2. A node agent with only the bootstrap kubeconfig joins.
    let kubeconfig = dir.join("kubelet.conf");
    let cert_dir = dir.join("pki");
    let flags = |bootstrap: &Path| -> Vec<String> {
        [("--bootstrap-kubeconfig", bootstrap), ("--kubeconfig", kubeconfig.as_path()), ("--cert-dir", cert_dir.as_path())]
            .iter()
            .flat_map(|(f, p)| [f.to_string(), p.display().to_string()])
            .collect()
    };
    let mut agent = NodeAgent::start(api.root(), NodeAgentOptions { master: None, node_name: "joiner", pod_cidr_octet: 91, extra: flags(&bootstrap) }).await.expect("node agent");
    let fail = |msg: &str, agent: &NodeAgent| -> ! { api.fail(&format!("{msg}\n{}", agent.log_tail(80))) };
    for _ in 0..240 {
        if api.kubectl(&["get", "node", "joiner"]).success {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    api.wait_node_ready("joiner").await;

    // Its request: made by the token's user, approved by the controller manager, issued.
    let csrs = api.kubectl_ok(&["get", "csr", "-o", "jsonpath={range .items[*]}{.metadata.name} {.spec.signerName} {.spec.username} {.status.conditions[0].type} {.status.conditions[0].reason}{\"\\n\"}{end}"]);
    let want = format!("kubernetes.io/kube-apiserver-client-kubelet system:bootstrap:{id} Approved AutoApproved");
    let csr_lines: Vec<&str> = csrs.lines().filter(|l| !l.is_empty()).collect();
    if csr_lines.len() != 1 || !csr_lines[0].starts_with("node-csr-") || !csr_lines[0].ends_with(&want) {
        fail(&format!("CertificateSigningRequests: want one node-csr-… {want}, got:\n{csrs}"), &agent);
    }
    let table = api.kubectl_ok(&["get", "csr"]);
    assert!(table.contains("Approved,Issued") && table.contains(&format!("system:bootstrap:{id}")), "kubectl get csr:\n{table}");

    // What it keeps: the certificate store and a kubeconfig naming it, for CN=system:node:joiner.
    let current = cert_dir.join("kubelet-client-current.pem");
    assert!(current.exists(), "no {}", current.display());
    let subject = subject_of(&current);
    assert!(subject.contains("CN=system:node:joiner") && subject.contains("O=system:nodes"), "the node's client certificate: {subject}");
    let kc = std::fs::read_to_string(&kubeconfig).unwrap_or_else(|e| fail(&format!("{}: {e}", kubeconfig.display()), &agent));
    assert!(kc.contains("kubelet-client-current.pem") && !kc.contains(&token), "the node's kubeconfig:\n{kc}");

    // 3. It acts as its node: a pod bound to it runs (the Node authorizer gives it its pod).
    api.kubectl_ok(&["run", "joined", "--image=docker.io/library/busybox:1.36", "--restart=Never", "--overrides", r#"{"spec":{"nodeName":"joiner"}}"#, "--", "sleep", "3600"]);
    let mut running = false;
    for _ in 0..240 {
        if api.kubectl(&["get", "pod", "joined", "-o", "jsonpath={.status.phase}"]).stdout.trim() == "Running" {
            running = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    if !running {
        fail("the pod on the joined node never ran", &agent);
    }

    // 4. Started again (the token deleted meanwhile), it runs on its certificate: no new request.
    let (ok, out, err) = kubelab_token(&admin, &["delete", &id]);
    assert!(ok && out.contains(&format!("bootstrap token \"{id}\" deleted")), "kubelab token delete: {out}{err}");
    agent.restart().expect("restart the node agent");
    api.wait_node_ready("joiner").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let names = api.kubectl_ok(&["get", "csr", "-o", "name"]);
    assert_eq!(names.lines().count(), 1, "a restart asked for another certificate:\n{names}");

    // 5. A node with a token the server does not know is let in nowhere: its agent stops with
    //    the 401, and nothing is registered.
    let stranger_dir = api.root().join("stranger");
    std::fs::create_dir_all(&stranger_dir).unwrap();
    let stranger_conf = stranger_dir.join("bootstrap-kubelet.conf");
    std::fs::write(&stranger_conf, std::fs::read_to_string(&bootstrap).unwrap().replace(&token, "zzzzzz.zzzzzzzzzzzzzzzz")).unwrap();
    let (ok, _, _) = kubelab_token(&admin, &["list"]);
    assert!(ok);
    let stranger = Command::new(e2e::kubelab_bin().unwrap())
        .args(["nodeagent", "--node-name", "stranger", "--container-runtime-endpoint", "unix:///nonexistent.sock", "--root-dir"])
        .arg(stranger_dir.join("root"))
        .arg("--bootstrap-kubeconfig")
        .arg(&stranger_conf)
        .arg("--kubeconfig")
        .arg(stranger_dir.join("kubelet.conf"))
        .arg("--cert-dir")
        .arg(stranger_dir.join("pki"))
        .output()
        .expect("kubelab nodeagent");
    let err = String::from_utf8_lossy(&stranger.stderr);
    assert!(!stranger.status.success() && err.contains("Unauthorized"), "a node agent with an unknown token: {:?}\n{err}", stranger.status);
    assert!(!stranger_dir.join("kubelet.conf").exists(), "a kubeconfig was written for an unknown token");
    assert!(!api.kubectl(&["get", "node", "stranger"]).success, "a node with an unknown token registered");
    assert_eq!(api.kubectl_ok(&["get", "csr", "-o", "name"]).lines().count(), 1);
}
