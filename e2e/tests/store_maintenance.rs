//! The store's maintenance operations driven by real `etcdctl` (Debian's 3.4): a snapshot saved
//! from a running cluster and restored into a new three-member cluster that serves the same keys
//! at the same revision; the NOSPACE alarm of `--quota-backend-bytes` listed, survived and
//! disarmed after `etcdctl compaction` and `etcdctl defrag`; and auto-compaction seen through a
//! read at a revision it compacted. `E2E_STORE=etcd` runs the same tests against real etcd 3.4
//! (restoring with its own `etcdctl snapshot restore`), to check the tests themselves.

use std::path::{Path, PathBuf};
use std::time::Duration;

use e2e::etcdctl::{Etcdctl, Output};
use e2e::{Flavor, StoreCluster, StoreOptions, flavor_from_env, poll_until};

/// The value given after `--flag` on member `i`'s command line.
fn flag(c: &StoreCluster, i: usize, name: &str) -> String {
    let line = c.command_line(i);
    let mut words = line.split(' ');
    let want = format!("--{name}");
    while let Some(w) = words.next() {
        if w == want {
            return words.next().unwrap_or_default().to_string();
        }
    }
    panic!("member {i} has no {want}: {line}");
}

/// `snapshot restore` of `file` into `data_dir` for member `i` of `c`, with the flags the member
/// starts with: `kubelab store snapshot restore`, or for real etcd 3.4 its `etcdctl snapshot
/// restore` (etcdutl came with 3.5).
fn restore(c: &StoreCluster, i: usize, file: &Path, data_dir: &Path) -> anyhow::Result<Output> {
    let args = vec![
        file.display().to_string(),
        format!("--name={}", flag(c, i, "name")),
        format!("--initial-cluster={}", flag(c, i, "initial-cluster")),
        format!("--initial-cluster-token={}", flag(c, i, "initial-cluster-token")),
        format!("--initial-advertise-peer-urls={}", flag(c, i, "initial-advertise-peer-urls")),
        format!("--data-dir={}", data_dir.display()),
    ];
    match c.opts.flavor {
        Flavor::Kubelab => {
            let mut cmd = std::process::Command::new(e2e::kubelab_bin()?);
            cmd.args(["store", "snapshot", "restore"]).args(&args).env("NO_COLOR", "1");
            let shown = format!("kubelab store snapshot restore {}", args.join(" "));
            let (status, stdout, stderr) = e2e::process::run_to_completion(cmd, None, e2e::scaled(Duration::from_secs(60)))?;
            let status = status.ok_or_else(|| anyhow::anyhow!("`{shown}` did not finish"))?;
            eprintln!("[test] {shown} -> {status}");
            Ok(Output { success: status.success(), code: status.code(), stdout, stderr, command: shown })
        }
        Flavor::Etcd => {
            let args: Vec<&str> = ["snapshot", "restore"].into_iter().chain(args.iter().map(String::as_str)).collect();
            Etcdctl::new(&[])?.run(&args)
        }
    }
}

/// The revision in the header of `etcdctl get key -w json` (and the key's mod_revision, if any).
fn get_json(ctl: &Etcdctl, key: &str, extra: &[&str]) -> anyhow::Result<(i64, Option<(i64, String)>)> {
    let mut args = vec!["get", key, "-w", "json"];
    args.extend_from_slice(extra);
    let out = ctl.run(&args)?.ok()?;
    let v: serde_json::Value = serde_json::from_str(&out)?;
    let rev = v["header"]["revision"].as_i64().unwrap_or_default();
    let kv = v["kvs"].as_array().and_then(|k| k.first()).map(|kv| {
        use base64::Engine as _;
        let value = base64::engine::general_purpose::STANDARD.decode(kv["value"].as_str().unwrap_or_default()).unwrap_or_default();
        (kv["mod_revision"].as_i64().unwrap_or_default(), String::from_utf8_lossy(&value).into_owned())
    });
    Ok((rev, kv))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_saved_snapshot_restores_into_a_new_three_member_cluster_at_the_same_revision() {
    let flavor = flavor_from_env();
    let old = StoreCluster::start(3, StoreOptions::for_flavor(flavor)).await.expect("start cluster");
    let ctl = Etcdctl::new(&old.client_endpoints()).unwrap();
    let mut client = old.client(0).await.unwrap();
    for i in 0..200 {
        client.put(format!("/registry/pods/default/p{i:03}"), format!("pod-{i}"), None).await.unwrap();
    }
    ctl.run(&["put", "/registry/configmaps/kube-system/c", "by-etcdctl"]).unwrap().ok().unwrap();
    ctl.run(&["del", "/registry/pods/default/p000"]).unwrap().ok().unwrap();
    let (rev, kv) = get_json(&ctl, "/registry/pods/default/p123", &[]).unwrap();
    let (mod_rev, value) = kv.expect("the key exists");
    assert_eq!(value, "pod-123");

    // `etcdctl snapshot save` from one member.
    let file = old.root().join("backup.db");
    let saved = Etcdctl::new(&[old.endpoint(1)]).unwrap().run(&["snapshot", "save", &file.display().to_string()]).unwrap();
    let out = saved.ok().unwrap();
    assert!(out.contains(&format!("Snapshot saved at {}", file.display())), "{out}");
    let size = std::fs::metadata(&file).unwrap().len();
    assert_eq!(size % 512, 32, "a payload of whole 512-byte blocks, then the sha256: {size} bytes");
    let old_cluster = old.status(0).await.unwrap().header().unwrap().cluster_id();
    let backup = std::fs::read(&file).unwrap();
    drop(client);
    drop(old);

    // A new cluster: other token (so other member and cluster ids), fresh ports; its members are
    // stopped at once, their data directories replaced by restored ones, and started again.
    let opts = StoreOptions { token: "kubelab-e2e-restored".into(), wait_healthy: false, ..StoreOptions::for_flavor(flavor) };
    let mut new = StoreCluster::spawn(3, opts).unwrap();
    for i in 0..3 {
        new.kill9(i);
    }
    let file = new.root().join("backup.db");
    std::fs::write(&file, &backup).unwrap();
    // A corrupt copy is refused, with etcd's message.
    let mut bytes = backup.clone();
    bytes[600] ^= 0x55;
    let corrupt = new.root().join("corrupt.db");
    std::fs::write(&corrupt, &bytes).unwrap();
    let refused = restore(&new, 0, &corrupt, &new.root().join("corrupt-restore")).unwrap();
    assert!(!refused.success, "a corrupt snapshot was restored: {}", refused.stdout);
    assert!(refused.stderr.contains("expected sha256 ["), "{}", refused.stderr);
    for i in 0..3 {
        let data: PathBuf = new.member(i).data_dir();
        if flavor == Flavor::Kubelab {
            // A data directory in use is refused (real etcd 3.4 says "data-dir ... exists").
            std::fs::create_dir_all(&data).unwrap();
            std::fs::write(data.join("leftover"), b"x").unwrap();
            let refused = restore(&new, i, &file, &data).unwrap();
            assert!(!refused.success);
            assert!(refused.stderr.contains("not empty or could not be read"), "{}", refused.stderr);
        }
        let _ = std::fs::remove_dir_all(&data);
        restore(&new, i, &file, &data).unwrap().ok().unwrap();
    }
    for i in 0..3 {
        new.restart(i).unwrap();
    }
    new.wait_healthy().await.expect("the restored cluster elects a leader");

    // Every member serves the data at the revision it was saved at.
    for i in 0..3 {
        let member = Etcdctl::new(&[new.endpoint(i)]).unwrap();
        let (at, kv) = get_json(&member, "/registry/pods/default/p123", &["--consistency=s"]).unwrap();
        assert_eq!(at, rev, "member {i} serves the saved revision");
        assert_eq!(kv, Some((mod_rev, "pod-123".to_string())), "member {i}");
        assert_eq!(get_json(&member, "/registry/pods/default/p000", &["--consistency=s"]).unwrap().1, None, "the delete is kept");
        let all = member.run(&["get", "/registry/pods/", "--prefix", "--consistency=s", "-w", "json"]).unwrap().ok().unwrap();
        let all: serde_json::Value = serde_json::from_str(&all).unwrap();
        assert_eq!(all["count"].as_i64(), Some(199), "member {i}");
    }
    let ctl = Etcdctl::new(&new.client_endpoints()).unwrap();
    assert_eq!(get_json(&ctl, "/registry/configmaps/kube-system/c", &[]).unwrap().1.unwrap().1, "by-etcdctl");
    ctl.run(&["put", "after-restore", "1"]).unwrap().ok().unwrap();
    let (next, _) = get_json(&ctl, "after-restore", &[]).unwrap();
    assert_eq!(next, rev + 1, "the new cluster goes on from the saved revision");
    let new_cluster = new.status(0).await.unwrap().header().unwrap().cluster_id();
    assert_ne!(new_cluster, old_cluster, "a new cluster, not the old one");
}

/// `dbSize` of every member, from `etcdctl endpoint status -w json`.
fn db_sizes(ctl: &Etcdctl) -> Vec<u64> {
    let out = ctl.run(&["endpoint", "status", "-w", "json"]).unwrap().ok().unwrap();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v.as_array().unwrap().iter().map(|m| m["Status"]["dbSize"].as_u64().unwrap_or_default()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nospace_is_listed_and_disarmed_after_compaction_and_defrag() {
    let flavor = flavor_from_env();
    const QUOTA: u64 = 6 << 20;
    let opts = StoreOptions { extra_args: vec!["--quota-backend-bytes".into(), QUOTA.to_string()], ..StoreOptions::for_flavor(flavor) };
    let c = StoreCluster::start(3, opts).await.expect("start cluster");
    let ctl = Etcdctl::new(&c.client_endpoints()).unwrap();
    let empty = db_sizes(&ctl);

    // Fill it through member 0 until a write is refused (the size on disk follows the writes).
    let mut client = c.client(0).await.unwrap();
    let value = vec![b'v'; 64 * 1024];
    let mut refused = None;
    for i in 0..1000 {
        if let Err(e) = client.put(format!("fill/{i:04}"), value.clone(), None).await {
            refused = Some(e.to_string());
            break;
        }
    }
    let refused = refused.expect("a 6 MiB quota refuses writes before 64 MiB are written");
    assert!(refused.contains("etcdserver: mvcc: database space exceeded"), "{refused}");

    // etcdctl sees the alarm, and its writes refused; reads and deletes go on.
    let list = ctl.run(&["alarm", "list"]).unwrap().ok().unwrap();
    assert!(list.contains("alarm:NOSPACE"), "{list}");
    let put = ctl.run(&["put", "small", "1"]).unwrap();
    assert!(!put.success && put.stderr.contains("etcdserver: mvcc: database space exceeded"), "{}", put.stderr);
    let get = ctl.run(&["get", "fill/0000", "--print-value-only"]).unwrap().ok().unwrap();
    assert_eq!(get.trim().len(), value.len());
    let deleted = ctl.run(&["del", "fill/", "--prefix"]).unwrap().ok().unwrap();
    assert!(deleted.trim().parse::<u64>().unwrap() > 10, "{deleted}");

    // Compact, defragment every member, disarm: writes are accepted again.
    let (rev, _) = get_json(&ctl, "fill/0000", &[]).unwrap();
    ctl.run(&["compaction", &rev.to_string()]).unwrap().ok().unwrap();
    let full = db_sizes(&ctl);
    let defrag = ctl.run(&["defrag"]).unwrap().ok().unwrap();
    assert_eq!(defrag.matches("Finished defragmenting etcd member").count(), 3, "{defrag}");
    let defragmented = db_sizes(&ctl);
    eprintln!("[test] {flavor} db sizes: empty {empty:?}, full {full:?}, defragmented {defragmented:?}");
    for (f, d) in full.iter().zip(&defragmented) {
        assert!(d * 2 < *f, "defrag gave the space back: {full:?} → {defragmented:?}");
        assert!(*d < QUOTA);
    }
    assert!(!ctl.run(&["put", "small", "1"]).unwrap().success, "still capped until disarmed");
    let disarmed = ctl.run(&["alarm", "disarm"]).unwrap().ok().unwrap();
    assert!(disarmed.contains("alarm:NOSPACE"), "{disarmed}");
    assert_eq!(ctl.run(&["alarm", "list"]).unwrap().ok().unwrap().trim(), "");
    ctl.run(&["put", "small", "1"]).unwrap().ok().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn periodic_auto_compaction_compacts_revisions_older_than_the_retention() {
    let flavor = flavor_from_env();
    let opts = StoreOptions {
        extra_args: ["--auto-compaction-mode", "periodic", "--auto-compaction-retention", "2s"].map(String::from).to_vec(),
        ..StoreOptions::for_flavor(flavor)
    };
    let c = StoreCluster::start(3, opts).await.expect("start cluster");
    let ctl = Etcdctl::new(&c.client_endpoints()).unwrap();
    ctl.run(&["put", "k", "first"]).unwrap().ok().unwrap();
    let (first, _) = get_json(&ctl, "k", &[]).unwrap();
    assert_eq!(get_json(&ctl, "k", &[&format!("--rev={first}")]).unwrap().1.unwrap().1, "first");
    // Writes go on; within a few retention periods the leader compacts past `first`.
    let compacted = poll_until("revision compacted by auto-compaction", Duration::from_secs(30), Duration::from_millis(300), || {
        let ctl = ctl.clone();
        async move {
            ctl.run(&["put", "k", "later"])?.ok()?;
            let out = ctl.run(&["get", "k", &format!("--rev={first}")])?;
            Ok((!out.success).then_some(out.stderr))
        }
    })
    .await
    .unwrap();
    assert!(compacted.contains("mvcc: required revision has been compacted"), "{compacted}");
    assert_eq!(get_json(&ctl, "k", &[]).unwrap().1.unwrap().1, "later", "the current value is kept");
}
