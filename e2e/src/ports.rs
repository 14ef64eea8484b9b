//! Loopback ports that stay ours for the life of a test process.
//!
//! Binding `127.0.0.1:0` and closing the socket is not enough here: nextest runs test
//! binaries in parallel processes, and a member restarted after `kill -9` must get the
//! same port back later. So a port is *reserved* with a file in a shared directory
//! (`$TMPDIR/kubelab-e2e-ports/<port>`, created with O_EXCL and holding our PID; a file
//! whose PID is dead is taken over) and picked below the kernel's ephemeral range
//! (32768+), where outgoing connections never land.

use std::fs::OpenOptions;
use std::io::Write;
use std::net::TcpListener;
use std::path::PathBuf;

const LOW: u16 = 12000;
const HIGH: u16 = 32000;
/// `make up` uses 2379/2380, 22379/22380 and 32379/32380; keep out of their way.
const AVOID: &[u16] = &[22379, 22380];

/// A reserved port; the reservation is released on drop.
#[derive(Debug)]
pub struct Port {
    pub port: u16,
    file: PathBuf,
}

impl Drop for Port {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.file);
    }
}

fn dir() -> PathBuf {
    std::env::temp_dir().join("kubelab-e2e-ports")
}

fn pid_alive(pid: i32) -> bool {
    // kill(pid, 0) probes existence without sending anything.
    pid > 0 && unsafe { libc::kill(pid, 0) } == 0
}

fn try_reserve(port: u16) -> Option<Port> {
    if AVOID.contains(&port) {
        return None;
    }
    let file = dir().join(port.to_string());
    let create = || OpenOptions::new().write(true).create_new(true).open(&file);
    let mut f = match create() {
        Ok(f) => f,
        Err(_) => {
            // Stale reservation from a process that died without cleaning up?
            let holder = std::fs::read_to_string(&file)
                .ok()?
                .trim()
                .parse::<i32>()
                .ok()?;
            if pid_alive(holder) {
                return None;
            }
            std::fs::remove_file(&file).ok()?;
            create().ok()?
        }
    };
    let _ = write!(f, "{}", std::process::id());
    let reserved = Port { port, file };
    // Someone outside the harness may be listening there.
    TcpListener::bind(("127.0.0.1", port)).ok()?;
    Some(reserved)
}

/// Reserves one free loopback port.
pub fn reserve() -> anyhow::Result<Port> {
    std::fs::create_dir_all(dir())?;
    // Start at a pseudo-random offset so parallel processes rarely contend.
    let seed = std::process::id() as u64 ^ nanos();
    let span = (HIGH - LOW) as u64;
    for i in 0..span {
        let port = LOW + ((seed.wrapping_mul(2654435761) + i * 7919) % span) as u16;
        if let Some(p) = try_reserve(port) {
            return Ok(p);
        }
    }
    anyhow::bail!("no free loopback port in {LOW}..{HIGH}")
}

/// Reserves `n` free loopback ports.
pub fn reserve_n(n: usize) -> anyhow::Result<Vec<Port>> {
    (0..n).map(|_| reserve()).collect()
}

fn nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() as u64 ^ d.as_secs())
        .unwrap_or(0)
}
