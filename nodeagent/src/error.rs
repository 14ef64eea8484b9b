//! The node agent's errors. Converted to an HTTP status or an Event reason only at the edges.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A CRI call failed (containerd answered with an error, or could not be reached). Written as
    /// Go's gRPC writes a status (`rpc error: code = Unknown desc = …`), which is how kubelet's
    /// messages (ErrImagePull, CreateContainerError) show a runtime's error; the call is in `op`
    /// (and in the CRI call's debug log).
    #[error("rpc error: code = {} desc = {}", go_code_name(source.code()), source.message())]
    Cri {
        op: &'static str,
        #[source]
        source: tonic::Status,
    },
    /// The container runtime endpoint could not be dialled.
    #[error("connecting to the container runtime at {endpoint}: {source}")]
    Connect {
        endpoint: String,
        #[source]
        source: tonic::transport::Error,
    },
    #[error("API server: {0}")]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Client(#[from] client::Error),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Input that cannot be used as it is (a path or mount option with a NUL byte, a static pod
    /// without its config hash), where no caller needs to tell one case from another.
    #[error("{0}")]
    Invalid(String),
    /// Something the pod needs is not there yet (a configMap, a secret, an image): retried.
    #[error("{0}")]
    NotReady(String),
    /// A volume as the pod spec writes it cannot be set up: a type or medium kubelab does not
    /// support, a field missing or out of range (an item's path or mode, `sizeLimit`), a key or
    /// field it names that is not there, a configMap or secret a static pod cannot read. Retried
    /// with every sync, as kubelet retries SetUp: the pod may be changed.
    #[error("{0}")]
    VolumeSpec(String),
    /// A pod UID that cannot name a directory or a cgroup (empty, `.`, `..`, or with a `/`):
    /// nothing of the pod is created or removed on the host.
    #[error("{0}")]
    UnusableUid(String),
    /// A probe as the container spec writes it cannot be run (no handler, a gRPC probe, an exec
    /// probe without a command, a port the container does not name or out of range): the probe
    /// errors, as kubelet's does, and its result stays unknown.
    #[error("{0}")]
    ProbeSpec(String),
    /// The HTTP client the probes use could not be built (TLS set-up).
    #[error("building the HTTP probe client: {0}")]
    ProbeClient(#[source] reqwest::Error),
    /// TLS bootstrap (`--bootstrap-kubeconfig`) could not get the node its client certificate:
    /// a kubeconfig or certificate file that cannot be read or written, a request denied or
    /// failed, or no certificate in time.
    #[error("{0}")]
    CertificateBootstrap(String),
    /// A flag the node agent cannot start with (`--pod-cidr`, `--image-gc-*`,
    /// `--housekeeping-interval`, the TLS files, a webhook mode without an API server); the
    /// message names the flag.
    #[error("{0}")]
    InvalidFlag(String),
    /// A host the node agent cannot manage the cgroups of (none mounted, controllers not
    /// delegated, the systemd driver without systemd); the message names the fix.
    #[error("{0}")]
    UnsupportedHost(String),
    /// A call to systemd over D-Bus failed (the systemd cgroup driver).
    #[error("systemd {op}: {message}")]
    Systemd { op: &'static str, message: String },
    /// The container runtime did not answer within the start-up wait.
    #[error(
        "the container runtime at {endpoint} is not answering ({source}); is containerd running with its CRI plugin, and is --container-runtime-endpoint right?"
    )]
    RuntimeUnavailable {
        endpoint: String,
        #[source]
        source: Box<Error>,
    },
    /// A command the agent runs (`ip route …`) exited with a failure.
    #[error("{command}: {status} {stderr}")]
    Command { command: String, status: std::process::ExitStatus, stderr: String },
    /// A filesystem whose size could not be read (`statvfs` failed).
    #[error("could not measure the {what} at {}", path.display())]
    Measure { what: &'static str, path: PathBuf },
    /// Blocking work moved off the executor (`spawn_blocking`) panicked or was cancelled.
    #[error("{0}")]
    Task(#[from] tokio::task::JoinError),
    /// A log request's options are out of range (the `pods/log` query; a 400 for the caller).
    #[error("{0}")]
    LogOptions(String),
    /// A line of a CRI log file that is not `<time> <stream> <tag> <message>`.
    #[error("CRI log line: {what}: {line:?}")]
    LogLine { what: &'static str, line: String },
    /// A volume of a pod could not be set up. The message is the one kubelet's FailedMount event
    /// carries, so the caller can use it as is: the operation that failed
    /// (`MountVolume.SetUp`, and for CSI volumes also `MountVolume.WaitForAttach` and
    /// `MountVolume.MountDevice`), the volume (the pod's volume name, or the PersistentVolume's
    /// for a claim, as kubelet names it); `source` keeps the class (NotReady, VolumeSpec, Io, Csi, …).
    #[error("{operation} failed for volume \"{volume}\" : {source}")]
    Volume {
        operation: &'static str,
        volume: String,
        #[source]
        source: Box<Error>,
    },
    /// A CSI call failed (the driver answered with an error, or did not answer in time). Written
    /// as grpc-go writes a status, as kubelet's volume events show a driver's error.
    #[error("rpc error: code = {} desc = {}", go_code_name(source.code()), source.message())]
    Csi {
        op: &'static str,
        #[source]
        source: tonic::Status,
    },
    /// A CSI driver's or a plugin registration socket could not be dialled.
    #[error("connecting to {endpoint}: {source}")]
    CsiConnect {
        endpoint: String,
        #[source]
        source: tonic::transport::Error,
    },
    /// A plugin (`plugins_registry/` socket) was refused: unknown type, no supported version, a
    /// driver that failed NodeGetInfo or whose node information could not be stored.
    #[error("{0}")]
    PluginRegistration(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io { path: path.into(), source }
    }

    pub(crate) fn cri(op: &'static str, source: tonic::Status) -> Error {
        Error::Cri { op, source }
    }

    /// Whether the CRI answered NOT_FOUND (a container or sandbox already gone).
    pub fn is_not_found(&self) -> bool {
        match self {
            Error::Cri { source, .. } => source.code() == tonic::Code::NotFound,
            Error::Kube(kube::Error::Api(s)) => s.code == 404,
            _ => false,
        }
    }
}

/// A gRPC code's name as grpc-go writes it (`codes.Code.String()`): tonic's names, but for
/// `Canceled`, which Go spells with one l.
fn go_code_name(code: tonic::Code) -> String {
    match code {
        tonic::Code::Cancelled => "Canceled".into(),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cri_errors_read_as_grpc_go_writes_them() {
        let e = Error::cri("pull_image", tonic::Status::unknown("failed to pull and unpack image"));
        assert_eq!(e.to_string(), "rpc error: code = Unknown desc = failed to pull and unpack image");
        let e = Error::cri("stop_container", tonic::Status::cancelled("context canceled"));
        assert_eq!(e.to_string(), "rpc error: code = Canceled desc = context canceled");
        let e = Error::cri("create_container", tonic::Status::deadline_exceeded("too slow"));
        assert_eq!(e.to_string(), "rpc error: code = DeadlineExceeded desc = too slow");
    }
}
