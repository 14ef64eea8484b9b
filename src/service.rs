//! `kubelab up --install-service`: `kubelab up` as a systemd service, the way k3s installs itself.
//!
//! The unit runs the same `kubelab up` with the other flags given, and carries what a node's
//! service needs from systemd:
//! - `Delegate=yes`: the service's cgroup subtree is the service's own. systemd enables the
//!   controllers for it and leaves the cgroups made below it alone; without it, systemd may
//!   reshuffle processes and controllers of cgroups it believes it owns.
//! - `KillMode=process`: stopping or restarting the service stops `kubelab up` only (which stops
//!   the pods and containerd itself, in order); systemd does not kill the containers' processes
//!   behind its back.
//! - no task or file limits (`TasksMax=infinity`, `LimitNOFILE`), restart on failure.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

use crate::up::UpArgs;

/// Where the unit is written.
pub const UNIT_PATH: &str = "/etc/systemd/system/kubelab.service";

/// The unit's text for `exe up args…`.
pub fn unit(exe: &Path, args: &[String]) -> String {
    let quoted: Vec<String> = args.iter().map(|a| systemd_quote(a)).collect();
    format!(
        "# Written by `kubelab up --install-service`.
[Unit]
Description=kubelab: a Kubernetes-compatible cluster on this machine (kubelab up)
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
ExecStart={exe} up {args}
Delegate=yes
KillMode=process
TimeoutStopSec=120
Restart=on-failure
RestartSec=5
TasksMax=infinity
LimitNOFILE=1048576

[Install]
WantedBy=multi-user.target
",
        exe = systemd_quote(&exe.display().to_string()),
        args = quoted.join(" ")
    )
}

/// A word of an `ExecStart=` line: quoted when it holds a space, a quote or a backslash; `%` and
/// `$` are doubled so systemd does not expand them.
fn systemd_quote(word: &str) -> String {
    let escaped = word.replace('%', "%%").replace('$', "$$");
    if escaped.chars().any(|c| c.is_whitespace() || c == '"' || c == '\\' || c == '\'') {
        format!("\"{}\"", escaped.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        escaped
    }
}

/// The `kubelab up` flags the service runs with: the ones given, without `--install-service`, with
/// the image directory made explicit (the default is found next to the binary of *this* run).
fn service_args(given: impl Iterator<Item = String>, image_dir: &Path, has_image_dir: bool) -> Vec<String> {
    let mut args: Vec<String> = given.filter(|a| a != "--install-service").collect();
    if !has_image_dir {
        args.push("--image-dir".into());
        args.push(image_dir.display().to_string());
    }
    args
}

/// Writes [`UNIT_PATH`], reloads systemd and enables and starts the service.
pub fn install(args: &UpArgs, image_dir: &Path) -> anyhow::Result<()> {
    if !Path::new("/run/systemd/system").is_dir() {
        bail!("--install-service needs systemd as the init system, and this machine was not booted by systemd: run `kubelab up` from a root shell instead");
    }
    let exe: PathBuf = std::env::current_exe().context("finding this binary")?.canonicalize()?;
    let image_dir = image_dir.canonicalize().with_context(|| format!("image directory {}", image_dir.display()))?;
    // Everything after `up` on our own command line.
    let given = std::env::args().skip_while(|a| a != "up").skip(1);
    let text = unit(&exe, &service_args(given, &image_dir, args.image_dir.is_some()));
    std::fs::write(UNIT_PATH, &text).with_context(|| format!("writing {UNIT_PATH}"))?;
    for cmd in [vec!["daemon-reload"], vec!["enable", "--now", "kubelab.service"]] {
        let status = Command::new("systemctl").args(&cmd).status().with_context(|| format!("systemctl {}", cmd.join(" ")))?;
        if !status.success() {
            bail!("systemctl {} failed ({status}); see `journalctl -u kubelab`", cmd.join(" "));
        }
    }
    println!("kubelab up runs as kubelab.service ({UNIT_PATH}, Delegate=yes).");
    println!("  follow it:   journalctl -u kubelab -f");
    println!("  stop it:     systemctl stop kubelab     (the cluster's state stays in {})", args.data_dir.display());
    println!("  remove it:   systemctl disable --now kubelab && rm {UNIT_PATH}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unit_delegates_and_runs_the_same_flags() {
        let args = service_args(
            ["--data-dir", "/var/lib/kube lab", "--install-service", "--port", "8080"].into_iter().map(String::from),
            Path::new("/opt/images"),
            false,
        );
        assert_eq!(args, ["--data-dir", "/var/lib/kube lab", "--port", "8080", "--image-dir", "/opt/images"]);
        let text = unit(Path::new("/usr/local/bin/kubelab"), &args);
        assert!(text.contains("\nExecStart=/usr/local/bin/kubelab up --data-dir \"/var/lib/kube lab\" --port 8080 --image-dir /opt/images\n"), "{text}");
        for line in ["Delegate=yes", "KillMode=process", "WantedBy=multi-user.target"] {
            assert!(text.lines().any(|l| l == line), "{line}");
        }
        assert_eq!(systemd_quote("50%"), "50%%");
        assert_eq!(systemd_quote("a\"b"), "\"a\\\"b\"");
    }
}
