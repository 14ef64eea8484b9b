//! Mirrors k8s.io/apiserver/plugin/pkg/audit/log/backend.go: Events as JSON lines, appended to
//! `--audit-log-path` (created 0600 if missing) or written to standard output (`-`).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;
use std::sync::Mutex;

use serde_json::Value;

pub struct Backend {
    out: Mutex<Box<dyn Write + Send>>,
}

impl Backend {
    pub fn open(path: &Path) -> Result<Backend, String> {
        let out: Box<dyn Write + Send> = if path == Path::new("-") {
            Box::new(std::io::stdout())
        } else {
            let file: File = OpenOptions::new().create(true).append(true).mode(0o600).open(path).map_err(|e| format!("--audit-log-path {}: {e}", path.display()))?;
            Box::new(file)
        };
        Ok(Backend { out: Mutex::new(out) })
    }

    /// Writes one Event as a line; a write that fails is logged (the request goes on, as with
    /// kube-apiserver's blocking log backend once its write returns an error).
    pub fn process(&self, event: &Value) {
        let mut line = event.to_string();
        line.push('\n');
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = out.write_all(line.as_bytes()).and_then(|()| out.flush()) {
            tracing::error!(target: "apiserver::audit", error = %e, "writing an audit event");
        }
    }
}
