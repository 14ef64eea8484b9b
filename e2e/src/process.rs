//! One child process, logs in files, stopped by PID.
//!
//! Why files and not pipes: a pipe nobody reads fills up and blocks the child, and a
//! test that fails wants the *tail* of the log, which a file keeps for free.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::STOP_GRACE;

/// A running child process. Killed (SIGKILL) and reaped on drop.
#[derive(Debug)]
pub struct Process {
    name: String,
    child: Child,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Process {
    /// Starts `program args…` with stdout/stderr appended to `<log_dir>/stdout.log` and
    /// `<log_dir>/stderr.log` (appended, so a restarted member keeps its history).
    pub fn spawn(
        name: &str,
        program: &Path,
        args: &[String],
        log_dir: &Path,
        env: &[(String, String)],
    ) -> anyhow::Result<Self> {
        std::fs::create_dir_all(log_dir)?;
        let stdout = log_dir.join("stdout.log");
        let stderr = log_dir.join("stderr.log");
        let open = |p: &Path| File::options().create(true).append(true).open(p);
        let mut cmd = Command::new(program);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(open(&stdout)?)
            .stderr(open(&stderr)?);
        for (k, v) in env {
            cmd.env(k, v);
        }
        // If the test process is killed (a nextest timeout sends SIGKILL), take the child
        // with it instead of leaving a store listening on a reserved port. Note the signal
        // fires when the *spawning thread* exits: spawn from long-lived threads.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .map_err(|e| anyhow::anyhow!("spawning {}: {e}", program.display()))?;
        Ok(Self {
            name: name.to_string(),
            child,
            stdout,
            stderr,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Has the process exited (without reaping more than once)?
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGKILL and reap: a crash, as far as the process can tell.
    pub fn kill9(&mut self) {
        if self.exited().is_none() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }

    /// SIGTERM, wait up to [`STOP_GRACE`] ([`crate::scaled`]) for a clean exit, then SIGKILL. Returns the exit
    /// status (None if it had to be killed).
    pub fn terminate(&mut self) -> Option<ExitStatus> {
        if let Some(st) = self.exited() {
            return Some(st);
        }
        // The PID is ours and not yet reaped, so it cannot have been recycled.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let grace = crate::scaled(STOP_GRACE);
        let start = Instant::now();
        while start.elapsed() < grace {
            if let Some(st) = self.exited() {
                return Some(st);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!(
            "[e2e] {} (pid {}) ignored SIGTERM for {grace:?}; killing",
            self.name,
            self.pid()
        );
        self.kill9();
        None
    }

    /// The last `lines` lines of stderr and stdout, labelled.
    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.name, &self.stdout, &self.stderr, lines)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// The last `lines` lines of a process's log files.
pub fn log_tail(name: &str, stdout: &Path, stderr: &Path, lines: usize) -> String {
    let mut out = String::new();
    for (what, p) in [("stderr", stderr), ("stdout", stdout)] {
        let text = std::fs::read_to_string(p).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        if all.is_empty() {
            continue;
        }
        let from = all.len().saturating_sub(lines);
        out.push_str(&format!(
            "----- {name} {what} ({}), last {} lines -----\n",
            p.display(),
            all.len() - from
        ));
        for l in &all[from..] {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

/// The result of running a command-line client (etcdctl, kubectl) to completion.
#[derive(Debug)]
pub struct Output {
    pub success: bool,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub command: String,
}

impl Output {
    /// stdout if the command succeeded, else an error carrying everything we know.
    pub fn ok(self) -> anyhow::Result<String> {
        if self.success {
            Ok(self.stdout)
        } else {
            anyhow::bail!(
                "`{}` failed ({:?})\nstdout: {}\nstderr: {}",
                self.command,
                self.code,
                self.stdout,
                self.stderr
            )
        }
    }

    /// Everything known about the run, for a failure message.
    pub fn describe(&self) -> String {
        format!(
            "`{}` exited {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.command, self.code, self.stdout, self.stderr
        )
    }
}

/// Runs `program args…` to completion, failing with its stderr unless it exits 0; returns stdout
/// (the tools a harness prepares with: openssl, htpasswd, skopeo, tar).
pub fn run_ok(program: &str, args: &[&str]) -> anyhow::Result<String> {
    use anyhow::Context as _;
    let out = std::process::Command::new(program).args(args).output().with_context(|| format!("running {program}"))?;
    anyhow::ensure!(out.status.success(), "{program} {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `cmd` to completion: `stdin` is written to it (then closed), stdout and stderr are read as
/// they come. A run past `deadline` is killed and comes back with no exit status (callers pass
/// a [`crate::scaled`] deadline, and name it in their messages).
pub fn run_to_completion(
    mut cmd: std::process::Command,
    stdin: Option<&str>,
    deadline: std::time::Duration,
) -> std::io::Result<(Option<ExitStatus>, String, String)> {
    use std::io::Write;
    use std::process::Stdio;
    cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn()?;
    if let (Some(input), Some(mut w)) = (stdin, child.stdin.take()) {
        w.write_all(input.as_bytes())?;
        // Dropping `w` closes stdin: `etcdctl txn` and `kubectl -f -` read until EOF.
    }
    let out = crate::background::read_all(child.stdout.take().expect("stdout is piped"));
    let err = crate::background::read_all(child.stderr.take().expect("stderr is piped"));
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break Some(st);
        }
        if start.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    Ok((status, out.join().unwrap_or_default(), err.join().unwrap_or_default()))
}

/// Whether transparent huge pages are allowed for process `pid` (`THP_enabled` in
/// `/proc/<pid>/status`: 0 once the process set `PR_SET_THP_DISABLE`). None if it is gone.
pub fn thp_enabled(pid: u32) -> Option<bool> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let value = status.lines().find_map(|l| l.strip_prefix("THP_enabled:"))?;
    Some(value.trim() != "0")
}

/// The PIDs of `pid`'s children (from every thread's `/proc/<pid>/task/<tid>/children`).
pub fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|s| s.split_whitespace().filter_map(|c| c.parse().ok()).collect::<Vec<u32>>())
        .collect()
}
