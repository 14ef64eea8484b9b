//! Debian's `etcdctl` (package etcd-client, API v3) as a test client.
//!
//! Every invocation is bounded: etcdctl's own `--dial-timeout`/`--command-timeout`, and a
//! hard deadline after which the harness kills it.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, bail};

pub use crate::background::Background;

/// Hard limit for one etcdctl run.
pub const RUN_DEADLINE: Duration = Duration::from_secs(30);

/// `$ETCDCTL_BIN`, else `/usr/bin/etcdctl`; a clear error pointing at `make deps` if absent.
pub fn etcdctl_bin() -> anyhow::Result<PathBuf> {
    let bin = std::env::var_os("ETCDCTL_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/etcdctl"));
    anyhow::ensure!(
        bin.exists(),
        "etcdctl not found at {} — run `make deps` (installs Debian's etcd-client) or set ETCDCTL_BIN",
        bin.display()
    );
    Ok(bin)
}

pub use crate::process::Output;

/// etcdctl bound to a set of endpoints.
#[derive(Clone, Debug)]
pub struct Etcdctl {
    bin: PathBuf,
    endpoints: String,
    /// `--cacert`, `--cert`, `--key` and their values, for https:// endpoints.
    tls: Vec<String>,
}

impl Etcdctl {
    pub fn new(endpoints: &[String]) -> anyhow::Result<Self> {
        Ok(Self {
            bin: etcdctl_bin()?,
            endpoints: endpoints.join(","),
            tls: Vec::new(),
        })
    }

    /// The same etcdctl verifying the server against `cacert` and, with `cert_key`, presenting
    /// that client certificate.
    pub fn with_tls(&self, cacert: &std::path::Path, cert_key: Option<(&std::path::Path, &std::path::Path)>) -> Self {
        let mut tls = vec![format!("--cacert={}", cacert.display())];
        if let Some((cert, key)) = cert_key {
            tls.push(format!("--cert={}", cert.display()));
            tls.push(format!("--key={}", key.display()));
        }
        Self { tls, ..self.clone() }
    }

    /// The same etcdctl pointed at other endpoints.
    pub fn with_endpoints(&self, endpoints: &[String]) -> Self {
        Self {
            bin: self.bin.clone(),
            endpoints: endpoints.join(","),
            tls: self.tls.clone(),
        }
    }

    fn command(&self, args: &[&str]) -> (Command, String) {
        let mut cmd = Command::new(&self.bin);
        cmd.env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", self.endpoints))
            .arg("--dial-timeout=5s")
            .arg("--command-timeout=10s")
            .args(&self.tls)
            .args(args);
        let tls: String = self.tls.iter().map(|t| format!("{t} ")).collect();
        let shown = format!(
            "ETCDCTL_API=3 etcdctl --endpoints={} {tls}{}",
            self.endpoints,
            args.join(" ")
        );
        (cmd, shown)
    }

    /// Runs `etcdctl args…` to completion.
    pub fn run(&self, args: &[&str]) -> anyhow::Result<Output> {
        self.run_stdin(args, None)
    }

    /// Runs `etcdctl args…` with `stdin` fed to it (for `txn`).
    pub fn run_stdin(&self, args: &[&str], stdin: Option<&str>) -> anyhow::Result<Output> {
        let (cmd, shown) = self.command(args);
        let deadline = crate::scaled(RUN_DEADLINE);
        let (status, stdout, stderr) =
            crate::process::run_to_completion(cmd, stdin, deadline).with_context(|| format!("running {shown}"))?;
        let Some(status) = status else { bail!("`{shown}` did not finish within {deadline:?}") };
        eprintln!("[etcdctl] {shown} -> {status}");
        Ok(Output {
            success: status.success(),
            code: status.code(),
            stdout,
            stderr,
            command: shown,
        })
    }

    /// Starts `etcdctl args…` in the background (for `watch`); its stdout arrives line by line.
    pub fn spawn(&self, args: &[&str]) -> anyhow::Result<Background> {
        let (cmd, shown) = self.command(args);
        let bg = Background::spawn(cmd, shown.clone())?;
        eprintln!("[etcdctl] started in background: {shown}");
        Ok(bg)
    }
}

