//! Mirrors pkg/probe/exec and the kubelet's ExecSync path (prober.go newExecInContainer): run
//! the probe's command inside the container through CRI ExecSync, within `timeoutSeconds`.

use std::time::Duration;

use super::Outcome;
use crate::cri::RemoteRuntime;
use crate::error::{Error, Result};

/// How long past the probe's own timeout the agent waits for the runtime to answer ExecSync
/// (the runtime enforces the timeout; this guards against a runtime that hangs).
pub(crate) const EXEC_SLACK: Duration = Duration::from_secs(2);

/// Run `cmd` in container `container_id`. Exit code 0 → Success; another code → Failure with
/// the command's output; the runtime's timeout (DEADLINE_EXCEEDED) → Failure "command … timed
/// out". Any other runtime error is an error: the worker throws that result away.
pub(crate) async fn probe(runtime: &RemoteRuntime, container_id: &str, cmd: &[String], timeout: Duration) -> Result<(Outcome, String)> {
    let timed_out = || (Outcome::Failure, format!("command {cmd:?} timed out"));
    let call = runtime.exec_sync(container_id, cmd.to_vec(), timeout);
    let (exit_code, stdout, stderr) = match tokio::time::timeout(timeout + EXEC_SLACK, call).await {
        Err(_) => return Ok(timed_out()),
        Ok(Err(Error::Cri { source, .. })) if source.code() == tonic::Code::DeadlineExceeded => return Ok(timed_out()),
        Ok(Err(e)) => return Err(e),
        Ok(Ok(r)) => r,
    };
    // stdout then stderr, as the kubelet's CombinedOutput shows them.
    let mut out = stdout;
    out.extend_from_slice(&stderr);
    let output = super::truncate_output(&out);
    if exit_code == 0 { Ok((Outcome::Success, output)) } else { Ok((Outcome::Failure, output)) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cri::fake::FakeRuntime;
    use k8s_cri::v1 as api;

    /// A running container in the fake runtime; returns its ID.
    async fn running_container(rt: &RemoteRuntime) -> String {
        let sandbox = api::PodSandboxConfig {
            metadata: Some(api::PodSandboxMetadata { name: "p".into(), uid: "u".into(), namespace: "default".into(), attempt: 0 }),
            ..Default::default()
        };
        let sb = rt.run_pod_sandbox(sandbox.clone(), "").await.expect("sandbox");
        let config = api::ContainerConfig {
            metadata: Some(api::ContainerMetadata { name: "c".into(), attempt: 0 }),
            image: Some(api::ImageSpec { image: "docker.io/library/busybox:1.36".into(), ..Default::default() }),
            ..Default::default()
        };
        let id = rt.create_container(&sb, config, sandbox).await.expect("create");
        rt.start_container(&id).await.expect("start");
        id
    }

    #[tokio::test]
    async fn exit_codes_timeouts_and_errors() {
        let dir = tempfile::tempdir().expect("tmp");
        let (fake, server) = FakeRuntime::start(dir.path()).await.expect("fake CRI");
        fake.add_image("docker.io/library/busybox:1.36");
        let rt = RemoteRuntime::connect(&server.endpoint()).await.expect("connect");
        let id = running_container(&rt).await;
        let cmd = vec!["cat".to_string(), "/tmp/healthy".to_string()];
        let t = Duration::from_secs(1);

        fake.set_exec_result(&id, 0, "ok\n");
        assert_eq!(probe(&rt, &id, &cmd, t).await.expect("probe"), (Outcome::Success, "ok\n".into()));

        fake.set_exec_result(&id, 1, "cat: can't open '/tmp/healthy': No such file or directory\n");
        let (o, out) = probe(&rt, &id, &cmd, t).await.expect("probe");
        assert_eq!(o, Outcome::Failure);
        assert!(out.contains("No such file"), "{out}");

        fake.inject_error("ExecSync", tonic::Status::deadline_exceeded("timeout 1s exceeded"));
        let (o, out) = probe(&rt, &id, &cmd, t).await.expect("probe");
        assert_eq!(o, Outcome::Failure);
        assert!(out.contains("timed out"), "{out}");

        fake.inject_error("ExecSync", tonic::Status::unavailable("runtime away"));
        assert!(probe(&rt, &id, &cmd, t).await.is_err(), "a runtime error is an error, not a failure");

        let last = fake.exec_calls().pop().expect("an ExecSync call");
        assert_eq!(last, (id.clone(), cmd.clone(), 1), "container, command and timeout reach the runtime");
    }
}
