//! What the proxy's network-namespace tests share: commands, namespaces of their own (deleted
//! when dropped, also when a test fails), and TCP servers and clients inside them. Never the
//! host's namespace.

#![allow(dead_code)] // each test binary uses its part

use std::io::{ErrorKind, Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd as _;
use std::process::Command;
use std::time::Duration;

/// Runs a command; its stdout, or a panic with its stderr.
pub fn sh(args: &[&str]) -> String {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A network namespace of this test (`kubelab-proxy-<pid>-<tag>`, loopback up), deleted on drop.
pub struct Netns(pub String);

impl Netns {
    pub fn new(tag: &str) -> Netns {
        let ns = Netns(format!("kubelab-proxy-{}-{tag}", std::process::id()));
        sh(&["ip", "netns", "add", &ns.0]);
        ns.exec(&["ip", "link", "set", "lo", "up"]);
        ns
    }

    pub fn exec(&self, args: &[&str]) -> String {
        let mut full = vec!["ip", "netns", "exec", &self.0];
        full.extend_from_slice(args);
        sh(&full)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// Runs `f` on a thread inside network namespace `ns` (sockets it makes stay there).
pub fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/var/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        // SAFETY: setns on this thread only, with a namespace file we hold open.
        assert_eq!(unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) }, 0, "setns {path}");
        f()
    })
    .join()
    .expect("netns thread")
}

/// A server in `ns` on `addr` that answers every connection with `name`.
pub fn serve(ns: &str, addr: &'static str, name: &'static str) {
    let listener = in_netns(ns, move || TcpListener::bind(addr).unwrap_or_else(|e| panic!("bind {addr}: {e}")));
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let _ = conn.write_all(name.as_bytes());
        }
    });
}

/// Connects from `ns` to `to`, giving up on connecting after `timeout`: the server's name, or
/// the error kind.
pub fn call(ns: &str, to: &str, timeout: Duration) -> Result<String, ErrorKind> {
    let to: SocketAddr = to.parse().expect("an address");
    in_netns(ns, move || {
        let mut s = TcpStream::connect_timeout(&to, timeout).map_err(|e| e.kind())?;
        s.set_read_timeout(Some(Duration::from_secs(2))).expect("timeout");
        let mut out = String::new();
        s.read_to_string(&mut out).map_err(|e| e.kind())?;
        Ok(out)
    })
}
