//! lazyfs (src/bin/lazyfs/) proven with real processes: what it holds is visible through the
//! mount, `clear-cache` drops exactly what was never synced, and the kernel does not hand the
//! dropped bytes back from its own page cache. Then the point of it: a `kubelab store` member on
//! lazyfs, `kill -9`ed and its unsynced data dropped (a power cut, not just a crash), comes back
//! with every write it acknowledged (etcd's robustness suite runs its members on lazyfs alike).
//!
//! The harness's side of it is [`e2e::lazyfs`]; the robustness runs mount their members through
//! it too ([`e2e::StoreOptions::lazyfs`]).

use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Duration;

use e2e::lazyfs::Lazyfs;
use e2e::writers::{Writers, wait_member_has};
use e2e::{StoreCluster, StoreOptions};

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn write_file(path: &Path, data: &[u8], fsync: bool) {
    let mut f = std::fs::File::create(path).unwrap_or_else(|e| panic!("creating {}: {e}", path.display()));
    f.write_all(data).expect("write");
    if fsync {
        f.sync_all().expect("fsync");
    }
}

/// Shows what was read as text in an assertion.
fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn clear_cache_drops_exactly_the_unsynced_data() {
    let tmp = tempfile::Builder::new().prefix("kubelab-e2e-lazyfs-").tempdir().expect("tempdir");
    let (backing, mnt) = (tmp.path().join("backing"), tmp.path().join("mnt"));
    std::fs::create_dir_all(&backing).expect("backing dir");
    std::fs::create_dir_all(&mnt).expect("mount dir");
    let fs = Lazyfs::start(&backing, &mnt, &tmp.path().join("control.sock"), tmp.path()).expect("start lazyfs");
    let (a, b, c, c_tmp) = (mnt.join("a"), mnt.join("b"), mnt.join("c"), mnt.join("c.tmp"));

    // A: written and fsynced, then extended without a sync.
    write_file(&a, b"synced-A", true);
    std::fs::OpenOptions::new().append(true).open(&a).expect("open a").write_all(b"+unsynced-tail").expect("extend a");
    // B: written, never synced.
    write_file(&b, b"unsynced-B", false);
    // C: synced empty, then replaced by a rename of a temporary file that was never synced.
    write_file(&c, b"", true);
    write_file(&c_tmp, b"new-C", false);
    std::fs::rename(&c_tmp, &c).expect("rename c.tmp over c");
    // D: in a new directory, the file and the directory fsynced.
    let d = mnt.join("d");
    std::fs::create_dir(&d).expect("mkdir d");
    write_file(&d.join("f"), b"durable", true);
    std::fs::File::open(&d).expect("open d").sync_all().expect("fsync d");
    // W: what the store's WAL does: preallocate, pwrite at offsets, fdatasync some of it.
    let w = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(mnt.join("w")).expect("create w");
    // SAFETY: fallocate on an open descriptor.
    assert_eq!(unsafe { libc::fallocate(std::os::fd::AsRawFd::as_raw_fd(&w), 0, 0, 4096) }, 0, "fallocate");
    w.write_all_at(b"rec1", 0).expect("pwrite rec1");
    w.sync_data().expect("fdatasync w");
    w.write_all_at(b"rec2", 4).expect("pwrite rec2");

    // Through the mount, everything written is there; on the backing files, only what was synced.
    assert_eq!(text(&read(&a)), "synced-A+unsynced-tail");
    assert_eq!(std::fs::metadata(&a).expect("stat a").len(), 22);
    assert_eq!(text(&read(&b)), "unsynced-B");
    assert_eq!(text(&read(&c)), "new-C");
    assert!(!c_tmp.exists(), "c.tmp was renamed away");
    assert_eq!(&read(&mnt.join("w"))[..8], b"rec1rec2");
    assert_eq!(text(&read(&backing.join("a"))), "synced-A", "unsynced bytes must not reach the backing file");
    assert_eq!(read(&backing.join("b")), b"");
    assert_eq!(read(&backing.join("c")), b"", "the rename reached the backing directory, the data did not");
    let unsynced = ("+unsynced-tail".len() + "unsynced-B".len() + "new-C".len() + "rec2".len()) as u64;
    assert_eq!(fs.status().expect("status"), (unsynced, 4));

    // A reader that holds B open across the drop must not get the dropped bytes from the
    // kernel's page cache either (it read them, so the kernel has them).
    let held = std::fs::File::open(&b).expect("open b");
    let mut buf = [0u8; 64];
    assert_eq!(held.read_at(&mut buf, 0).expect("read b"), 10);

    assert_eq!(fs.clear_cache().expect("clear-cache"), unsynced);
    assert_eq!(fs.status().expect("status"), (0, 0));

    assert_eq!(held.read_at(&mut buf, 0).expect("read b again"), 0, "B read {:?} after clear-cache", text(&buf));
    drop(held);
    assert_eq!(text(&read(&a)), "synced-A", "A is what was fsynced");
    assert_eq!(std::fs::metadata(&a).expect("stat a").len(), 8, "A's size is the synced one");
    assert_eq!(read(&b), b"", "B was never synced");
    assert_eq!(read(&c), b"", "C was renamed over, but its data never synced");
    assert!(!c_tmp.exists());
    assert_eq!(text(&read(&d.join("f"))), "durable");
    let w_now = read(&mnt.join("w"));
    assert_eq!((w_now.len(), &w_now[..8]), (4096, &b"rec1\0\0\0\0"[..]), "the preallocated size stays, rec2 is gone");

    // Writes after the drop work as before, and a clean unmount writes back what is cached.
    write_file(&mnt.join("e"), b"after", false);
    assert_eq!(fs.status().expect("status"), (5, 1));
    fs.unmount().expect("unmount");
    assert_eq!(text(&read(&backing.join("e"))), "after");
}

/// Crash-and-power-cut rounds of the store test.
const ROUNDS: usize = 3;

/// A one-member store on lazyfs ([`StoreOptions::lazyfs`]), `rounds` times: writes, a power
/// loss in the middle of them (kill -9, then clear-cache), a restart; every write acknowledged
/// so far must be there after it. `env` is the member's extra environment (an injected bug).
async fn power_cuts(rounds: usize, env: Vec<(String, String)>) -> anyhow::Result<()> {
    let failpoints = !env.is_empty();
    let opts = StoreOptions { proxy: false, lazyfs: true, failpoints, env, ..StoreOptions::default() };
    let mut c = StoreCluster::start(1, opts).await?;
    let mut acked = std::collections::BTreeMap::new();
    for round in 0..rounds {
        let writers = Writers::start(c.client_endpoints(), 4, &format!("/lazyfs/{round}/"));
        writers.wait_for_more(300, Duration::from_secs(60)).await?;
        let dropped = c.power_loss(0)?;
        let (round_acked, errors) = writers.stop().await;
        eprintln!("[test] round {round}: {} writes acknowledged before the power loss ({errors} errors), {dropped} unsynced bytes dropped", round_acked.len());
        anyhow::ensure!(round_acked.len() >= 300, "only {} acknowledged", round_acked.len());
        acked.extend(round_acked);
        c.restart(0)?;
        c.wait_healthy().await.map_err(|e| e.context(format!("round {round}: the member does not start again after its power loss")))?;
        wait_member_has(&c.endpoint(0), "/lazyfs/", &acked, Duration::from_secs(15))
            .await
            .map_err(|e| e.context(format!("round {round}: acknowledged writes lost in the power loss")))?;
        eprintln!("[test] round {round}: all {} acknowledged writes are there", acked.len());
    }
    // And the member still writes.
    let mut client = c.client(0).await?;
    client.put("/lazyfs/after", "restart", None).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn store_on_lazyfs_keeps_acknowledged_writes_across_power_losses() {
    power_cuts(ROUNDS, Vec::new()).await.expect("every acknowledged write survives kill -9 + clear-cache");
}

/// The check can fail: with the WAL's fdatasync skipped (`bugSkipFsync`), a power loss takes
/// writes the store acknowledged, and the rounds must say so.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_store_that_skips_fsync_is_caught() {
    let e = power_cuts(ROUNDS, vec![("KUBELAB_FAILPOINTS".into(), "bugSkipFsync=return".into())]).await.expect_err("bugSkipFsync must lose acknowledged writes");
    eprintln!("[test] caught: {e:#}");
    let e = format!("{e:#}");
    assert!(e.contains("acknowledged writes lost") || e.contains("does not start again"), "{e}");
}
