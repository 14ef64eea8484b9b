//! The storage API with real kubectl (1.27 and 1.33) against `kubelab apiserver`: PersistentVolumes,
//! PersistentVolumeClaims, StorageClasses, CSIDrivers, CSINodes and VolumeAttachments created,
//! listed with Kubernetes' columns, described; their defaults, their immutable fields; and the
//! DefaultStorageClass and StorageObjectInUseProtection admission plugins. No node agent and no
//! controller: nothing binds or attaches here.

use e2e::apiserver::{ApiCluster, ApiOptions};
use serde_json::Value;

const OBJECTS: &str = r#"
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: hostpath.csi.kubelab.io
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: fast
provisioner: hostpath.csi.kubelab.io
---
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata:
  name: hostpath.csi.kubelab.io
spec: {}
---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata:
  name: n1
spec:
  drivers:
  - name: hostpath.csi.kubelab.io
    nodeID: n1
    topologyKeys: ["topology.hostpath.csi.kubelab.io/node"]
---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: pv1
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  csi: {driver: hostpath.csi.kubelab.io, volumeHandle: h1}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: storage.k8s.io/v1
kind: VolumeAttachment
metadata:
  name: csi-0123
spec:
  attacher: hostpath.csi.kubelab.io
  nodeName: n1
  source: {persistentVolumeName: pv1}
"#;

async fn start(minor: u32) -> ApiCluster {
    ApiCluster::start(ApiOptions { kubectl_minor: Some(minor), ..ApiOptions::default() }).await.expect("an API server")
}

fn json(api: &ApiCluster, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&api.kubectl_ok(&all)).unwrap_or_else(|e| api.fail(&format!("{args:?}: {e}")))
}

/// The header line kubectl prints for `kind`.
fn header(api: &ApiCluster, kind: &str, wide: bool) -> Vec<String> {
    let mut args = vec!["get", kind];
    if wide {
        args.extend(["-o", "wide"]);
    }
    let out = api.kubectl_ok(&args);
    out.lines().next().unwrap_or_default().split_whitespace().map(str::to_string).collect()
}

async fn storage_kinds(minor: u32) {
    let api = start(minor).await;
    let o = api.kubectl_with(&["apply", "-f", "-"], &[], Some(OBJECTS));
    assert!(o.success, "kubectl 1.{minor}: {}", o.describe());

    // Discovery: the short names, scopes and groups.
    let resources = api.kubectl_ok(&["api-resources"]);
    for (name, short) in [("persistentvolumes", "pv"), ("persistentvolumeclaims", "pvc"), ("storageclasses", "sc")] {
        let line = resources.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_else(|| api.fail(&format!("no {name} in\n{resources}")));
        assert!(line.split_whitespace().any(|w| w == short), "kubectl 1.{minor}: {line}");
    }
    for name in ["csidrivers", "csinodes", "volumeattachments"] {
        assert!(resources.lines().any(|l| l.starts_with(&format!("{name} ")) && l.contains("storage.k8s.io/v1")), "kubectl 1.{minor}: {name}:\n{resources}");
    }

    // Kubernetes' columns.
    let words = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    assert_eq!(header(&api, "pv", false), words("NAME CAPACITY ACCESS MODES RECLAIM POLICY STATUS CLAIM STORAGECLASS VOLUMEATTRIBUTESCLASS REASON AGE"), "kubectl 1.{minor}");
    assert_eq!(header(&api, "pvc", true), words("NAME STATUS VOLUME CAPACITY ACCESS MODES STORAGECLASS VOLUMEATTRIBUTESCLASS AGE VOLUMEMODE"), "kubectl 1.{minor}");
    assert_eq!(header(&api, "sc", false), words("NAME PROVISIONER RECLAIMPOLICY VOLUMEBINDINGMODE ALLOWVOLUMEEXPANSION AGE"), "kubectl 1.{minor}");
    assert_eq!(header(&api, "csidriver", false), words("NAME ATTACHREQUIRED PODINFOONMOUNT STORAGECAPACITY TOKENREQUESTS REQUIRESREPUBLISH MODES AGE"), "kubectl 1.{minor}");
    assert_eq!(header(&api, "csinode", false), words("NAME DRIVERS AGE"), "kubectl 1.{minor}");
    assert_eq!(header(&api, "volumeattachment", false), words("NAME ATTACHER PV NODE ATTACHED AGE"), "kubectl 1.{minor}");
    let sc = api.kubectl_ok(&["get", "sc"]);
    assert!(sc.lines().any(|l| l.starts_with("standard (default)") && l.contains("WaitForFirstConsumer")), "kubectl 1.{minor}:\n{sc}");
    assert!(sc.lines().any(|l| l.starts_with("fast ") && l.contains("Delete") && l.contains("Immediate")), "kubectl 1.{minor}: defaults:\n{sc}");
    let pv = api.kubectl_ok(&["get", "pv", "pv1", "--no-headers"]);
    assert_eq!(words(&pv)[..5], words("pv1 1Gi RWO Retain Pending")[..], "kubectl 1.{minor}");
    let pvc = api.kubectl_ok(&["get", "pvc", "data", "--no-headers"]);
    assert_eq!(words(&pvc)[..4], words("data Pending standard <unset>")[..], "kubectl 1.{minor}: {pvc}");

    // Defaults and admission.
    let claim = json(&api, &["get", "pvc", "data"]);
    assert_eq!(claim["spec"]["storageClassName"], "standard", "kubectl 1.{minor}: DefaultStorageClass");
    assert_eq!(claim["spec"]["volumeMode"], "Filesystem");
    assert_eq!(claim["metadata"]["finalizers"], serde_json::json!(["kubernetes.io/pvc-protection"]));
    let volume = json(&api, &["get", "pv", "pv1"]);
    assert_eq!(volume["metadata"]["finalizers"], serde_json::json!(["kubernetes.io/pv-protection"]));
    assert_eq!(volume["spec"]["persistentVolumeReclaimPolicy"], "Retain");
    assert_eq!(volume["status"]["phase"], "Pending");
    let driver = json(&api, &["get", "csidriver", "hostpath.csi.kubelab.io"]);
    assert_eq!(driver["spec"]["attachRequired"], true);
    assert_eq!(driver["spec"]["volumeLifecycleModes"], serde_json::json!(["Persistent"]));
    assert_eq!(driver["spec"]["fsGroupPolicy"], "ReadWriteOnceWithFSType");
    let explicit = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: none}\nspec:\n  storageClassName: \"\"\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n";
    let o = api.kubectl_with(&["create", "-f", "-"], &[], Some(explicit));
    assert!(o.success, "{}", o.describe());
    assert_eq!(json(&api, &["get", "pvc", "none"])["spec"]["storageClassName"], "", "an explicit empty class stays empty");

    // Reapplying is a no-op (defaults on update), and describe works.
    let o = api.kubectl_with(&["apply", "-f", "-"], &[], Some(OBJECTS));
    assert!(o.success, "kubectl 1.{minor}: reapply: {}", o.describe());
    for (kind, name) in [("pv", "pv1"), ("pvc", "data"), ("sc", "standard"), ("csidriver", "hostpath.csi.kubelab.io"), ("csinode", "n1"), ("volumeattachment", "csi-0123")] {
        let out = api.kubectl_ok(&["describe", kind, name]);
        assert!(out.contains(name), "kubectl 1.{minor}: describe {kind}: {out}");
    }

    // Immutable fields.
    api.kubectl_err(&["patch", "sc", "standard", "-p", r#"{"provisioner":"other.example.com"}"#], "updates to provisioner are forbidden");
    api.kubectl_err(&["patch", "pvc", "data", "-p", r#"{"spec":{"accessModes":["ReadWriteMany"]}}"#], "spec is immutable after creation");
    api.kubectl_err(&["patch", "pv", "pv1", "-p", r#"{"spec":{"csi":{"volumeHandle":"h2"}}}"#], "spec.persistentvolumesource is immutable after creation");
    api.kubectl_err(&["patch", "csidriver", "hostpath.csi.kubelab.io", "-p", r#"{"spec":{"attachRequired":false}}"#], "field is immutable");
    api.kubectl_err(&["patch", "volumeattachment", "csi-0123", "-p", r#"{"spec":{"nodeName":"n2"}}"#], "field is immutable");
    // The status goes through its subresource only.
    api.kubectl_ok(&["patch", "volumeattachment", "csi-0123", "--subresource=status", "--type=merge", "-p", r#"{"status":{"attached":true}}"#]);
    let va = api.kubectl_ok(&["get", "volumeattachment", "csi-0123", "--no-headers"]);
    assert_eq!(words(&va)[..5], words("csi-0123 hostpath.csi.kubelab.io pv1 n1 true")[..], "kubectl 1.{minor}");

    // A delete only marks a protected claim: it is Terminating until its finalizer goes.
    api.kubectl_ok(&["delete", "pvc", "data", "--wait=false"]);
    let pvc = api.kubectl_ok(&["get", "pvc", "data", "--no-headers"]);
    assert_eq!(words(&pvc)[1], "Terminating", "kubectl 1.{minor}: {pvc}");
}

#[tokio::test]
async fn storage_kinds_kubectl_1_33() {
    storage_kinds(33).await;
}

#[tokio::test]
async fn storage_kinds_kubectl_1_27() {
    storage_kinds(27).await;
}

/// Two classes marked default: the newest wins.
#[tokio::test]
async fn default_storage_class_picks_the_newest_default() {
    let api = start(33).await;
    let class = |name: &str| format!("apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: {name}\n  annotations: {{storageclass.kubernetes.io/is-default-class: \"true\"}}\nprovisioner: p.example.com\n");
    let claim = |name: &str| format!("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: {name}}}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {{requests: {{storage: 1Gi}}}}\n");
    let o = api.kubectl_with(&["create", "-f", "-"], &[], Some(&claim("before")));
    assert!(o.success, "{}", o.describe());
    assert!(json(&api, &["get", "pvc", "before"])["spec"].get("storageClassName").is_none(), "no default class: no class");
    for (name, pause) in [("older", true), ("newer", false)] {
        let o = api.kubectl_with(&["create", "-f", "-"], &[], Some(&class(name)));
        assert!(o.success, "{}", o.describe());
        if pause {
            // creationTimestamp has a one-second resolution.
            tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
        }
    }
    // The watch cache of classes may lag the create by a moment.
    api.wait_for("the newest default class to be used", std::time::Duration::from_secs(20), || {
        let name = format!("c{}", std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or_default());
        let o = api.kubectl_with(&["create", "-f", "-"], &[], Some(&claim(&name)));
        let got = if o.success { json(&api, &["get", "pvc", &name])["spec"]["storageClassName"].clone() } else { Value::Null };
        async move { if got == "newer" { Ok(()) } else { Err(format!("{got} ({})", o.describe())) } }
    })
    .await;
}
