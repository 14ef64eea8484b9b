//! The nemesis: faults injected while the clients run. Mirrors etcd's
//! `tests/robustness/failpoint/` (`failpoint.go` the loop, `kill.go`, `network.go` for
//! partitions and message loss, `gofail.go` for failpoints in the server's code, `cluster.go`
//! for a member replaced after losing its disk; a power loss is its `kill.go` on lazyfs).
//!
//! One fault at a time: inject it, hold it a moment, recover, and wait until the cluster is
//! healthy again before the next, as etcd's robustness suite does — so that every fault is
//! one a three-member cluster promises to ride out.

use std::fmt;
use std::time::Duration;

use anyhow::Context;

use super::history::{Clock, Time};
use super::traffic::Rng;
use crate::StoreCluster;

/// A kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    /// kill -9 of the leader, restarted a moment later.
    KillLeader,
    /// kill -9 of a follower, restarted a moment later.
    KillFollower,
    /// SIGSTOP of the leader for a few seconds (longer than an election), then SIGCONT.
    PauseLeader,
    PauseFollower,
    /// The leader cut off from both others, both ways.
    PartitionLeader,
    PartitionFollower,
    /// Everything the leader sends is lost; what it receives arrives.
    LeaderLosesOutbound,
    /// Everything sent to a follower is lost; what it sends arrives.
    FollowerLosesInbound,
    /// The leader's WAL fsync takes 300 ms for a few seconds (failpoint `walBeforeSync`).
    SlowFsyncLeader,
    /// The leader's WAL fdatasync fails (failpoint `walBeforeSync=return`, EIO): the member
    /// stops, as etcd does on a failed fsync, and is restarted.
    FailingFsyncLeader,
    /// A follower's fdatasync reports a failure after syncing (failpoint `walAfterSync=return`).
    FailingFsyncFollower,
    /// A follower crashes just before saving a Ready's entries (failpoint `raftBeforeSave`).
    CrashBeforeSaveFollower,
    /// The leader crashes right after saving, before sending (failpoint `raftAfterSave`).
    CrashAfterSaveLeader,
    /// The leader loses its disk and is replaced ([`StoreCluster::replace`]): killed, wiped,
    /// removed, added back under a new member ID, and caught up from the new leader.
    ReplaceLeader,
    ReplaceFollower,
    /// The leader loses power ([`StoreCluster::power_loss`]): kill -9, and every byte it wrote
    /// without fsyncing is dropped (lazyfs's `clear-cache`); restarted a moment later.
    PowerLossLeader,
    PowerLossFollower,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Fault::KillLeader => "kill -9 leader",
            Fault::KillFollower => "kill -9 follower",
            Fault::PauseLeader => "SIGSTOP leader",
            Fault::PauseFollower => "SIGSTOP follower",
            Fault::PartitionLeader => "partition leader",
            Fault::PartitionFollower => "partition follower",
            Fault::LeaderLosesOutbound => "leader's messages lost",
            Fault::FollowerLosesInbound => "follower's incoming messages lost",
            Fault::SlowFsyncLeader => "slow fsync on leader",
            Fault::FailingFsyncLeader => "failing fsync on leader",
            Fault::FailingFsyncFollower => "failing fsync on follower",
            Fault::CrashBeforeSaveFollower => "crash before save (follower)",
            Fault::CrashAfterSaveLeader => "crash after save (leader)",
            Fault::ReplaceLeader => "leader loses its disk, replaced",
            Fault::ReplaceFollower => "follower loses its disk, replaced",
            Fault::PowerLossLeader => "power loss of leader (unsynced writes dropped)",
            Fault::PowerLossFollower => "power loss of follower (unsynced writes dropped)",
        };
        f.write_str(s)
    }
}

impl Fault {
    pub const ALL: [Fault; 17] = [
        Fault::KillLeader,
        Fault::KillFollower,
        Fault::PauseLeader,
        Fault::PauseFollower,
        Fault::PartitionLeader,
        Fault::PartitionFollower,
        Fault::LeaderLosesOutbound,
        Fault::FollowerLosesInbound,
        Fault::SlowFsyncLeader,
        Fault::FailingFsyncLeader,
        Fault::FailingFsyncFollower,
        Fault::CrashBeforeSaveFollower,
        Fault::CrashAfterSaveLeader,
        Fault::ReplaceLeader,
        Fault::ReplaceFollower,
        Fault::PowerLossLeader,
        Fault::PowerLossFollower,
    ];

    /// Whether this fault can be injected into `c`: cuts need the proxy mesh, a replacement
    /// needs its absence, failpoints need the failpoint build, power losses lazyfs.
    pub fn applies_to(self, c: &StoreCluster) -> bool {
        match self {
            Fault::PartitionLeader | Fault::PartitionFollower | Fault::LeaderLosesOutbound | Fault::FollowerLosesInbound => c.has_proxy(),
            Fault::ReplaceLeader | Fault::ReplaceFollower => !c.has_proxy(),
            Fault::PowerLossLeader | Fault::PowerLossFollower => c.opts.lazyfs,
            Fault::SlowFsyncLeader
            | Fault::FailingFsyncLeader
            | Fault::FailingFsyncFollower
            | Fault::CrashBeforeSaveFollower
            | Fault::CrashAfterSaveLeader => c.opts.failpoints,
            _ => true,
        }
    }
}

/// One fault as injected.
#[derive(Clone, Debug)]
pub struct Injected {
    pub fault: Fault,
    pub member: usize,
    pub at: Time,
    pub recovered: Time,
    /// Whether the cluster was healthy again afterwards (within the wait).
    pub healthy_after: bool,
}

/// Picks a follower other than the leader.
fn follower(c: &StoreCluster, leader: usize, rng: &mut Rng) -> usize {
    let others: Vec<usize> = (0..c.len()).filter(|i| *i != leader).collect();
    others[rng.below(others.len() as u64) as usize]
}

/// Injects `fault` and recovers from it. `hold` is how long a pause, cut or slow disk lasts.
pub async fn inject(c: &mut StoreCluster, fault: Fault, rng: &mut Rng, clock: &Clock, hold: Duration) -> anyhow::Result<Injected> {
    let leader = c.leader().await.context("finding the leader")?;
    let member = match fault {
        Fault::KillLeader
        | Fault::PauseLeader
        | Fault::PartitionLeader
        | Fault::LeaderLosesOutbound
        | Fault::SlowFsyncLeader
        | Fault::FailingFsyncLeader
        | Fault::CrashAfterSaveLeader
        | Fault::ReplaceLeader
        | Fault::PowerLossLeader => leader,
        _ => follower(c, leader, rng),
    };
    let at = clock.now();
    match fault {
        Fault::KillLeader | Fault::KillFollower => {
            c.kill9(member);
            tokio::time::sleep(hold / 2).await;
            c.restart(member)?;
        }
        Fault::PauseLeader | Fault::PauseFollower => {
            c.pause(member);
            tokio::time::sleep(hold).await;
            c.resume(member);
        }
        Fault::PartitionLeader | Fault::PartitionFollower => {
            c.partition(member)?;
            tokio::time::sleep(hold).await;
            c.heal(member)?;
        }
        Fault::LeaderLosesOutbound => {
            c.cut_outbound(member)?;
            tokio::time::sleep(hold).await;
            c.heal(member)?;
        }
        Fault::FollowerLosesInbound => {
            c.cut_inbound(member)?;
            tokio::time::sleep(hold).await;
            c.heal(member)?;
        }
        Fault::SlowFsyncLeader => {
            c.set_failpoint(member, "walBeforeSync", "sleep(300)").await?;
            tokio::time::sleep(hold).await;
            c.set_failpoint(member, "walBeforeSync", "off").await?;
        }
        Fault::CrashBeforeSaveFollower | Fault::CrashAfterSaveLeader | Fault::FailingFsyncLeader | Fault::FailingFsyncFollower => {
            let (name, term) = match fault {
                Fault::CrashBeforeSaveFollower => ("raftBeforeSave", "panic"),
                Fault::CrashAfterSaveLeader => ("raftAfterSave", "panic"),
                Fault::FailingFsyncLeader => ("walBeforeSync", "return"),
                _ => ("walAfterSync", "return"),
            };
            c.set_failpoint(member, name, term).await?;
            // It fires on the member's next Ready with entries, i.e. the next write; the member
            // then exits (a panic, or the WAL writer's failure ending it).
            let deadline = std::time::Instant::now() + crate::scaled(Duration::from_secs(10));
            while !c.has_exited(member) && std::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            anyhow::ensure!(c.has_exited(member), "failpoint {name}={term} did not end member-{member} within 10 s");
            c.kill9(member); // reap it
            tokio::time::sleep(hold / 2).await;
            c.restart(member)?;
        }
        Fault::ReplaceLeader | Fault::ReplaceFollower => c.replace(member).await?,
        Fault::PowerLossLeader | Fault::PowerLossFollower => {
            c.power_loss(member)?;
            tokio::time::sleep(hold / 2).await;
            c.restart(member)?;
        }
    }
    let recovered = clock.now();
    let healthy_after = c.wait_healthy().await.is_ok();
    Ok(Injected { fault, member, at, recovered, healthy_after })
}
