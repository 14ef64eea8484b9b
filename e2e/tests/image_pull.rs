//! Pulling images from a registry, end to end: a private registry (Debian's distribution
//! registry, HTTPS and a password, `e2e::registry`) holds the project's busybox image under a name
//! no node has, and the node agent pulls it through CRI `PullImage` with the credentials
//! Kubernetes would use:
//! - without credentials the pull fails with the registry's refusal in the message, the
//!   container waits in ErrImagePull, then ImagePullBackOff, with kubelet's events;
//! - with the password in a `kubernetes.io/dockerconfigjson` Secret named by the pod's
//!   `imagePullSecrets` the pod runs (events `Pulling`, then `Pulled … in Xs (Ys including
//!   waiting). Image size: N bytes.`);
//! - with the Secret on the pod's ServiceAccount instead, the API server copies it into the pod
//!   and the pod runs; with an old-style `kubernetes.io/dockercfg` Secret too; and with no secret
//!   but the node's own `config.json` (kubelet's credential provider);
//! - `IfNotPresent` then uses the image on the node, and `Always` pulls it again;
//! - `kubelab trace --mermaid` draws the pull as containerd's round trip to the registry.

use std::collections::BTreeMap;

use e2e::nodelab::{Components, NodeLab, RUN_TIMEOUT, phase};
use e2e::registry::Registry;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Event, Pod, Secret, ServiceAccount};
use kube::api::{Api, ListParams, PostParams};

e2e::node_lab!(Lab);

/// The node, which the pods name (no scheduler runs).
const NODE: &str = "node-pull";

fn pod(name: &str, image: &str, policy: &str, pull_secret: Option<&str>, service_account: Option<&str>) -> Pod {
    let mut spec = serde_json::json!({
        "nodeName": NODE,
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "app", "image": image, "imagePullPolicy": policy, "command": ["sh", "-c", "echo pulled-and-running; sleep 100000"]}]
    });
    if let Some(s) = pull_secret {
        spec["imagePullSecrets"] = serde_json::json!([{"name": s}]);
    }
    if let Some(sa) = service_account {
        spec["serviceAccountName"] = serde_json::json!(sa);
        spec["automountServiceAccountToken"] = serde_json::json!(false);
    }
    serde_json::from_value(serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec})).expect("a pod")
}

fn secret(name: &str, type_: &str, key: &str, value: String) -> Secret {
    Secret {
        metadata: kube::api::ObjectMeta { name: Some(name.into()), namespace: Some("default".into()), ..Default::default() },
        type_: Some(type_.into()),
        data: Some(BTreeMap::from([(key.to_string(), ByteString(value.into_bytes()))])),
        ..Default::default()
    }
}

/// The waiting reason and message of the pod's container.
fn waiting(p: &Pod) -> Option<(String, String)> {
    let s = p.status.as_ref()?.container_statuses.as_ref()?.first()?.state.as_ref()?.waiting.as_ref()?;
    Some((s.reason.clone().unwrap_or_default(), s.message.clone().unwrap_or_default()))
}

impl Lab {
    /// (reason, message) of the pod's events, oldest first.
    async fn events(&self, name: &str) -> Vec<(String, String)> {
        let events: Api<Event> = Api::namespaced(self.client.clone(), "default");
        let list = events.list(&ListParams::default().fields(&format!("involvedObject.name={name}"))).await.expect("events");
        let mut items = list.items;
        items.sort_by_key(|e| e.first_timestamp.clone().map(|t| t.0));
        items.into_iter().map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default())).collect()
    }

    async fn wait_event(&self, name: &str, what: &str, want: impl Fn(&str, &str) -> bool) -> Vec<(String, String)> {
        let what = format!("pod {name}: event {what}");
        self.wait_until(&what, RUN_TIMEOUT, || async {
            let events = self.events(name).await;
            if events.iter().any(|(r, m)| want(r, m)) {
                return Ok(Some(events));
            }
            anyhow::bail!("events so far: {events:?}")
        })
        .await
    }
}

/// `Pulled` as kubelet 1.30+ words a pull: `Successfully pulled image "<image>" in 1.234s (1.234s
/// including waiting). Image size: 1234 bytes.`
fn is_pulled_message(m: &str, image: &str) -> bool {
    let Some(rest) = m.strip_prefix(&format!("Successfully pulled image {image:?} in ")) else { return false };
    let Some((took, rest)) = rest.split_once(" (") else { return false };
    let Some((waited, rest)) = rest.split_once(" including waiting). Image size: ") else { return false };
    // Go's durations, truncated to milliseconds: 32ms, 1.201s, 1m2.5s.
    let secs = |s: &str| {
        let n = s.strip_suffix("ms").or_else(|| s.strip_suffix('s')).unwrap_or("x");
        let n = n.split_once('m').map_or(n, |(m, rest)| if m.parse::<u64>().is_ok() { rest } else { "x" });
        n.parse::<f64>().is_ok()
    };
    secs(took) && secs(waited) && rest.strip_suffix(" bytes.").is_some_and(|n| n.parse::<u64>().is_ok_and(|n| n > 0))
}

#[tokio::test(flavor = "multi_thread")]
async fn pulls_from_a_private_registry() {
    if let Err(e) = e2e::registry::prerequisites() {
        panic!("the image pull tests need: {e}");
    }
    let lab = Lab(NodeLab::start(NODE, 105, Components::default()).await);
    let registry = Registry::start(&lab.api.root().join("registry")).await.expect("the registry");
    let image = registry.push(&e2e::containerd::image_tar("busybox.tar").expect("busybox.tar"), "private/busybox:1.36").expect("skopeo copy");
    nodeagent::cri::containerd_config::write_registry_host(&lab.agent.containerd().registry_config_path(), &registry.host(), &registry.ca_file()).expect("hosts.toml");
    let pods = lab.pods();
    let secrets: Api<Secret> = Api::namespaced(lab.client.clone(), "default");
    let pp = PostParams::default();

    // 1. No credentials: the registry refuses, the container waits in ErrImagePull, then in
    //    ImagePullBackOff, and the events say so.
    pods.create(&pp, &pod("no-secret", &image, "IfNotPresent", None, None)).await.expect("create");
    let p = lab.wait_pod("no-secret", "ErrImagePull", RUN_TIMEOUT, |p| waiting(p).is_some_and(|(r, _)| r == "ErrImagePull")).await;
    let (_, message) = waiting(&p).unwrap_or_default();
    assert!(message.contains("401 Unauthorized") && message.contains(&image), "the refusal: {message}\nregistry log:\n{}", registry.log());
    lab.wait_pod("no-secret", "ImagePullBackOff", RUN_TIMEOUT, |p| waiting(p).is_some_and(|(r, m)| r == "ImagePullBackOff" && m == format!("Back-off pulling image {image:?}"))).await;
    let events = lab.events("no-secret").await;
    assert!(events.iter().any(|(r, m)| r == "Pulling" && m == &format!("Pulling image {image:?}")), "{events:?}");
    assert!(events.iter().any(|(r, m)| r == "Failed" && m.starts_with(&format!("Failed to pull image {image:?}: ")) && m.contains("401 Unauthorized")), "{events:?}");
    assert!(events.iter().any(|(r, m)| r == "Failed" && m == "Error: ErrImagePull"), "{events:?}");
    lab.wait_event("no-secret", "BackOff", |r, m| r == "BackOff" && m == format!("Back-off pulling image {image:?}")).await;

    // 2. A wrong password is refused the same way.
    secrets.create(&pp, &secret("wrong", "kubernetes.io/dockerconfigjson", ".dockerconfigjson", registry.dockerconfigjson("not-the-password"))).await.expect("secret");
    pods.create(&pp, &pod("wrong-secret", &image, "IfNotPresent", Some("wrong"), None)).await.expect("create");
    let p = lab.wait_pod("wrong-secret", "ErrImagePull", RUN_TIMEOUT, |p| waiting(p).is_some_and(|(r, _)| r == "ErrImagePull" || r == "ImagePullBackOff")).await;
    assert_eq!(phase(&p), "Pending");

    // 3. The password in the pod's imagePullSecrets: pulled, and running.
    secrets.create(&pp, &secret("regcred", "kubernetes.io/dockerconfigjson", ".dockerconfigjson", registry.dockerconfigjson(registry.password()))).await.expect("secret");
    pods.create(&pp, &pod("with-secret", &image, "IfNotPresent", Some("regcred"), None)).await.expect("create");
    lab.wait_running("with-secret").await;
    let events = lab.wait_event("with-secret", "Pulled", |r, m| r == "Pulled" && is_pulled_message(m, &image)).await;
    assert!(events.iter().any(|(r, m)| r == "Pulling" && m == &format!("Pulling image {image:?}")), "{events:?}");
    // `kubelab trace` draws the pull: containerd's round trip to the registry, with the size.
    let out = std::process::Command::new(e2e::kubelab_bin().expect("kubelab"))
        .args(["trace", "pod/with-secret", "--mermaid", "--server", &lab.api.url()])
        .env_remove("KUBECONFIG")
        .output()
        .expect("kubelab trace");
    let mermaid = String::from_utf8_lossy(&out.stdout);
    assert!(mermaid.contains("participant R as Image Registry") && mermaid.contains(&format!("CR->>R: image_pull {image} ")) && mermaid.contains(" bytes "), "kubelab trace --mermaid:\n{mermaid}\n{}", String::from_utf8_lossy(&out.stderr));

    // 4. IfNotPresent uses the image now on the node; Always pulls again (with the password).
    pods.create(&pp, &pod("if-not-present", &image, "IfNotPresent", None, None)).await.expect("create");
    lab.wait_running("if-not-present").await;
    let events = lab.events("if-not-present").await;
    assert!(events.iter().any(|(r, m)| r == "Pulled" && m == &format!("Container image {image:?} already present on machine")), "{events:?}");
    assert!(!events.iter().any(|(r, _)| r == "Pulling"), "{events:?}");
    pods.create(&pp, &pod("always", &image, "Always", Some("regcred"), None)).await.expect("create");
    lab.wait_running("always").await;
    lab.wait_event("always", "Pulled again", |r, m| r == "Pulled" && is_pulled_message(m, &image)).await;
    // Always without the password: the image on the node does not help.
    pods.create(&pp, &pod("always-no-secret", &image, "Always", None, None)).await.expect("create");
    lab.wait_pod("always-no-secret", "ErrImagePull", RUN_TIMEOUT, |p| waiting(p).is_some_and(|(r, _)| r == "ErrImagePull" || r == "ImagePullBackOff")).await;

    // 5. The Secret on the ServiceAccount: the API server copies it into the pod, which pulls
    //    with it (an image the node does not have yet: another repository).
    let other = registry.push(&e2e::containerd::image_tar("busybox.tar").expect("busybox.tar"), "private/busybox-sa:1.36").expect("skopeo copy");
    let accounts: Api<ServiceAccount> = Api::namespaced(lab.client.clone(), "default");
    let sa: ServiceAccount = serde_json::from_value(serde_json::json!({"metadata": {"name": "puller"}, "imagePullSecrets": [{"name": "regcred"}]})).expect("sa");
    accounts.create(&pp, &sa).await.expect("service account");
    pods.create(&pp, &pod("via-account", &other, "IfNotPresent", None, Some("puller"))).await.expect("create");
    let p = lab.wait_running("via-account").await;
    let names: Vec<String> = p.spec.and_then(|s| s.image_pull_secrets).unwrap_or_default().into_iter().map(|r| r.name).collect();
    assert_eq!(names, ["regcred"], "the account's pull secret in the pod");

    // 6. An old-style .dockercfg Secret (`kubernetes.io/dockercfg`: the auths map alone).
    let third = registry.push(&e2e::containerd::image_tar("busybox.tar").expect("busybox.tar"), "private/busybox-cfg:1.36").expect("skopeo copy");
    let auths: serde_json::Value = serde_json::from_str(&registry.dockerconfigjson(registry.password())).expect("json");
    secrets.create(&pp, &secret("oldcred", "kubernetes.io/dockercfg", ".dockercfg", auths["auths"].to_string())).await.expect("secret");
    pods.create(&pp, &pod("dockercfg", &third, "IfNotPresent", Some("oldcred"), None)).await.expect("create");
    lab.wait_running("dockercfg").await;

    // 7. No pull secret at all, but the node has the password (`<root-dir>/config.json`, what
    //    kubelet reads first): the node's own credentials are used.
    let fourth = registry.push(&e2e::containerd::image_tar("busybox.tar").expect("busybox.tar"), "private/busybox-node:1.36").expect("skopeo copy");
    let root_dir = lab.api.root().join(format!("node-{NODE}")).join("root");
    std::fs::write(root_dir.join("config.json"), registry.dockerconfigjson(registry.password())).expect("the node's config.json");
    pods.create(&pp, &pod("node-credentials", &fourth, "IfNotPresent", None, None)).await.expect("create");
    lab.wait_running("node-credentials").await;
}

#[test]
fn pulled_messages() {
    let image = "127.0.0.1:5000/private/busybox:1.36";
    assert!(is_pulled_message(&format!("Successfully pulled image {image:?} in 1.201s (1.201s including waiting). Image size: 1191424 bytes."), image));
    assert!(is_pulled_message(&format!("Successfully pulled image {image:?} in 32ms (1m2.5s including waiting). Image size: 1 bytes."), image));
    assert!(!is_pulled_message(&format!("Successfully pulled image {image:?} in 1.201s"), image));
    assert!(!is_pulled_message(&format!("Successfully pulled image {image:?} in soon (32ms including waiting). Image size: 1 bytes."), image));
    assert!(!is_pulled_message(&format!("Container image {image:?} already present on machine"), image));
}
