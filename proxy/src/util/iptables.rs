//! Mirrors Kubernetes' pkg/util/iptables/iptables.go: the `iptables`, `iptables-save` and
//! `iptables-restore` commands, run as child processes (they are blocking: call them from
//! `spawn_blocking` or a thread of their own).
//!
//! A runner may carry a command prefix (`ip netns exec <name>`): the tests and the benchmark
//! run the same code against a network namespace of their own, never the host's tables.

use std::io::Write as _;
use std::process::{Command, Stdio};

use crate::error::{Error, Result};

#[derive(Clone, Debug, Default)]
pub struct Iptables {
    prefix: Vec<String>,
}

/// A table kube-proxy writes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    Nat,
    Filter,
}

impl Table {
    pub fn name(self) -> &'static str {
        match self {
            Table::Nat => "nat",
            Table::Filter => "filter",
        }
    }
}

impl Iptables {
    /// Commands run in this process's network namespace.
    pub fn new() -> Iptables {
        Iptables::default()
    }

    /// Commands run in the named network namespace (`ip netns exec <name> …`).
    pub fn in_netns(name: &str) -> Iptables {
        Iptables { prefix: vec!["ip".into(), "netns".into(), "exec".into(), name.into()] }
    }

    /// A fake for unit tests: each command runs as `sh -c <script> <program> <args…>` (the
    /// script sees the program as `$0`, the rules as its stdin), never the real iptables.
    #[cfg(test)]
    pub(crate) fn fake(script: &str) -> Iptables {
        Iptables { prefix: vec!["sh".into(), "-c".into(), script.into()] }
    }

    fn command(&self, program: &str) -> Command {
        match self.prefix.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(program);
                c
            }
            None => Command::new(program),
        }
    }

    fn run(&self, program: &str, args: &[&str], stdin: Option<&str>) -> Result<(bool, String, String)> {
        let line = format!("{} {}", program, args.join(" "));
        let err = |message: String| Error::Iptables { command: line.clone(), message };
        let mut cmd = self.command(program);
        cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
        let mut child = cmd.spawn().map_err(|e| err(e.to_string()))?;
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(text.as_bytes()).map_err(|e| err(format!("writing the rules: {e}")))?;
        }
        let out = child.wait_with_output().map_err(|e| err(e.to_string()))?;
        Ok((out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned()))
    }

    /// `iptables-restore --noflush`: only the chains the text declares are flushed and rewritten;
    /// every other rule (the built-in chains', other programs' chains) stays.
    pub fn restore(&self, text: &str) -> Result<()> {
        let (ok, _, stderr) = self.run("iptables-restore", &["-w", "--noflush"], Some(text))?;
        if !ok {
            return Err(Error::Iptables { command: "iptables-restore -w --noflush".into(), message: stderr.trim().to_string() });
        }
        Ok(())
    }

    /// `iptables-save -t <table>`.
    pub fn save(&self, table: Table) -> Result<String> {
        let (ok, stdout, stderr) = self.run("iptables-save", &["-t", table.name()], None)?;
        if !ok {
            return Err(Error::Iptables { command: format!("iptables-save -t {}", table.name()), message: stderr.trim().to_string() });
        }
        Ok(stdout)
    }

    /// The chains `table` has, as iptables-save lists them (`:NAME POLICY [p:b]`).
    pub fn chains(&self, table: Table) -> Result<Vec<String>> {
        Ok(chains_in_save(&self.save(table)?))
    }

    /// `EnsureRule`: adds the rule (at the top with `prepend`) unless it is there already.
    /// Returns whether it was there.
    pub fn ensure_rule(&self, table: Table, chain: &str, rule: &[&str], prepend: bool) -> Result<bool> {
        let mut check = vec!["-w", "-t", table.name(), "-C", chain];
        check.extend_from_slice(rule);
        if self.run("iptables", &check, None)?.0 {
            return Ok(true);
        }
        let mut add = vec!["-w", "-t", table.name(), if prepend { "-I" } else { "-A" }, chain];
        add.extend_from_slice(rule);
        let (ok, _, stderr) = self.run("iptables", &add, None)?;
        if !ok {
            return Err(Error::Iptables { command: format!("iptables {}", add.join(" ")), message: stderr.trim().to_string() });
        }
        Ok(false)
    }

    /// `DeleteRule`, repeated until the rule is gone (a crash between a check and an insert may
    /// have added it twice). A rule or chain that is not there is no error.
    pub fn delete_rule(&self, table: Table, chain: &str, rule: &[&str]) -> Result<()> {
        let mut del = vec!["-w", "-t", table.name(), "-D", chain];
        del.extend_from_slice(rule);
        for _ in 0..16 {
            if !self.run("iptables", &del, None)?.0 {
                break;
            }
        }
        Ok(())
    }
}

/// The chain names in iptables-save output.
pub fn chains_in_save(save: &str) -> Vec<String> {
    save.lines().filter_map(|l| l.strip_prefix(':')).filter_map(|l| l.split_whitespace().next()).map(str::to_string).collect()
}
