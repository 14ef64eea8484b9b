//! `kubelab csi-hostpath` against a real `kubelab apiserver`, with no controller manager and no
//! scheduler: the test plays the PV binder, the scheduler and the attach-detach controller by
//! hand, and checks what the driver's external-provisioner and external-attacher do.
//! 1. A claim annotated for the driver and selected for this node → CreateVolume (a directory in
//!    the state dir) and a PV `pvc-<uid>` with Kubernetes' fields, and the claim's events
//!    `Provisioning` and `ProvisioningSucceeded`. A claim of an Immediate class without a node is
//!    taken for this node (`volume.kubernetes.io/selected-node`) and provisioned too.
//! 2. A VolumeAttachment for this node → the attacher's finalizer and `status.attached: true`;
//!    deleted → detached and gone.
//! 3. The PV released → DeleteVolume (the directory goes) and the PV deleted, the provisioner's
//!    finalizer removed.

use std::path::Path;
use std::time::{Duration, Instant};

use e2e::apiserver::{ApiCluster, ApiOptions};
use e2e::process::Process;
use k8s_openapi::api::core::v1::{Event, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{StorageClass, VolumeAttachment};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

const DRIVER: &str = "hostpath.csi.kubelab.io";

async fn eventually<T, F, Fut>(what: &str, driver: &Process, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(t) = f().await {
            return t;
        }
        if Instant::now() > deadline {
            panic!("timed out waiting for {what}\n{}", driver.log_tail(60));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn from<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).expect("a valid object")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provisioner_and_attacher_against_the_api_server() {
    let api = ApiCluster::start(ApiOptions::default()).await.expect("an API server");
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state");
    let args: Vec<String> = [
        "csi-hostpath",
        "--master",
        &api.url(),
        "--nodeid",
        "n1",
        "--endpoint",
        &format!("unix://{}", dir.path().join("csi.sock").display()),
        "--kubelet-root-dir",
        &dir.path().join("kubelet").to_string_lossy(),
        "--state-dir",
        &state.to_string_lossy(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let bin = e2e::kubelab_bin().expect("the kubelab binary");
    let driver = Process::spawn("csi-hostpath", &bin, &args, &dir.path().join("logs"), &[]).expect("kubelab csi-hostpath");
    let client = api.kube_client().expect("client");

    // Step 1: the class, and a claim as the binder and the scheduler leave it.
    let classes: Api<StorageClass> = Api::all(client.clone());
    classes
        .create(&PostParams::default(), &from(json!({
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "standard"},
            "provisioner": DRIVER, "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Delete",
            "parameters": {"csi.storage.k8s.io/fstype": "xfs", "kind": "dir"}, "mountOptions": ["noatime"]
        })))
        .await
        .expect("StorageClass");
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let claim = claims
        .create(&PostParams::default(), &from(json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "annotations": {
                "volume.kubernetes.io/storage-provisioner": DRIVER,
                "volume.kubernetes.io/selected-node": "n1"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "standard", "resources": {"requests": {"storage": "16Mi"}}}
        })))
        .await
        .expect("PersistentVolumeClaim");
    let uid = claim.metadata.uid.clone().expect("uid");
    let pv_name = format!("pvc-{uid}");
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let pv = eventually("the provisioned PV", &driver, || async { pvs.get_opt(&pv_name).await.ok().flatten() }).await;
    let spec = pv.spec.clone().expect("spec");
    let src = spec.csi.clone().expect("spec.csi");
    assert_eq!((src.driver.as_str(), src.fs_type.as_deref()), (DRIVER, Some("xfs")));
    assert_eq!(src.volume_attributes.as_ref().and_then(|a| a.get("kind")).map(String::as_str), Some("dir"));
    assert!(state.join("volumes").join(&src.volume_handle).is_dir(), "CreateVolume made the directory");
    assert_eq!(spec.capacity.as_ref().and_then(|c| c.get("storage")).map(|q| q.0.as_str()), Some("16Mi"));
    assert_eq!(spec.persistent_volume_reclaim_policy.as_deref(), Some("Delete"));
    assert_eq!(spec.mount_options, Some(vec!["noatime".to_string()]));
    assert_eq!(spec.storage_class_name.as_deref(), Some("standard"));
    let claim_ref = spec.claim_ref.clone().expect("claimRef");
    assert_eq!((claim_ref.name.as_deref(), claim_ref.uid.as_deref()), (Some("data"), Some(uid.as_str())));
    let term = serde_json::to_value(&spec.node_affinity).expect("json");
    assert_eq!(term["required"]["nodeSelectorTerms"][0]["matchExpressions"][0], json!({"key": "topology.hostpath.csi.kubelab.io/node", "operator": "In", "values": ["n1"]}));
    assert_eq!(pv.metadata.annotations.as_ref().and_then(|a| a.get("pv.kubernetes.io/provisioned-by")).map(String::as_str), Some(DRIVER));
    assert!(pv.metadata.finalizers.iter().flatten().any(|f| f == "external-provisioner.volume.kubernetes.io/finalizer"));
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let reasons = eventually("the claim's events", &driver, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        let reasons: Vec<String> = list.items.iter().filter(|e| e.involved_object.uid.as_deref() == Some(uid.as_str())).filter_map(|e| e.reason.clone()).collect();
        reasons.iter().any(|r| r == "ProvisioningSucceeded").then_some(reasons)
    })
    .await;
    assert!(reasons.iter().any(|r| r == "Provisioning"), "{reasons:?}");
    let succeeded = events.list(&ListParams::default()).await.expect("events").items.into_iter().find(|e| e.reason.as_deref() == Some("ProvisioningSucceeded"));
    assert_eq!(succeeded.and_then(|e| e.message), Some(format!("Successfully provisioned volume {pv_name}")));

    // Step 1 for an Immediate class: no node selected; the provisioner takes the claim for its node.
    classes
        .create(&PostParams::default(), &from(json!({
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "now"},
            "provisioner": DRIVER, "volumeBindingMode": "Immediate"
        })))
        .await
        .expect("StorageClass now");
    let quick = claims
        .create(&PostParams::default(), &from(json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "quick", "annotations": {"volume.kubernetes.io/storage-provisioner": DRIVER}},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "now", "resources": {"requests": {"storage": "1Mi"}}}
        })))
        .await
        .expect("PersistentVolumeClaim quick");
    let quick_pv = format!("pvc-{}", quick.metadata.uid.clone().expect("uid"));
    let quick_pv = eventually("the immediate claim's PV", &driver, || async { pvs.get_opt(&quick_pv).await.ok().flatten() }).await;
    assert_eq!(quick_pv.spec.and_then(|s| s.csi).map(|c| c.fs_type), Some(Some("ext4".to_string())), "the default fsType");
    let quick = claims.get("quick").await.expect("claim quick");
    assert_eq!(quick.metadata.annotations.as_ref().and_then(|a| a.get("volume.kubernetes.io/selected-node")).map(String::as_str), Some("n1"));

    // Step 2: attach, then detach.
    let vas: Api<VolumeAttachment> = Api::all(client.clone());
    vas.create(&PostParams::default(), &from(json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": "csi-test"},
        "spec": {"attacher": DRIVER, "nodeName": "n1", "source": {"persistentVolumeName": pv_name}}
    })))
    .await
    .expect("VolumeAttachment");
    let va = eventually("the attachment", &driver, || async {
        vas.get_opt("csi-test").await.ok().flatten().filter(|va| va.status.as_ref().is_some_and(|s| s.attached))
    })
    .await;
    assert!(va.metadata.finalizers.iter().flatten().any(|f| f == "external-attacher/hostpath-csi-kubelab-io"), "{:?}", va.metadata);
    let volumes_file = std::fs::read_to_string(state.join("state.json")).expect("state file");
    assert!(volumes_file.contains("\"n1\""), "ControllerPublishVolume recorded the node: {volumes_file}");
    vas.delete("csi-test", &DeleteParams::default()).await.expect("delete the attachment");
    eventually("the detach", &driver, || async { vas.get_opt("csi-test").await.ok().flatten().is_none().then_some(()) }).await;

    // Step 3: the binder releases the PV; the provisioner deletes the volume and the PV.
    claims.delete("data", &DeleteParams::default()).await.expect("delete the claim");
    pvs.patch_status(&pv_name, &PatchParams::default(), &Patch::Merge(json!({"status": {"phase": "Released"}})))
        .await
        .expect("the PV released");
    let dir_of = |p: &Path| p.join("volumes").join(&src.volume_handle);
    eventually("DeleteVolume", &driver, || async { (!dir_of(&state).exists()).then_some(()) }).await;
    let gone = eventually("the PV deleted", &driver, || async {
        match pvs.get_opt(&pv_name).await.ok()? {
            None => Some(None),
            // The pv-protection controller is not running: its finalizer may hold the object.
            Some(pv) if pv.metadata.deletion_timestamp.is_some() => Some(Some(pv)),
            Some(_) => None,
        }
    })
    .await;
    if let Some(pv) = gone {
        assert!(!pv.metadata.finalizers.iter().flatten().any(|f| f == "external-provisioner.volume.kubernetes.io/finalizer"), "{:?}", pv.metadata);
    }
}
