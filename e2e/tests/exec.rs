//! `kubectl exec` and `kubectl attach` end to end: the pinned kubectl 1.32 speaks websocket
//! (`v5.channel.k8s.io`) to the kubelab API server, which splices it to the node agent, which
//! translates it to SPDY on a real private containerd's streaming server. Covered: output,
//! stdin to EOF, exit codes, stderr, a tty with its size, attach to a container's stdin, and the
//! errors for a wrong container, a container that is not running, an unscheduled pod and a
//! completed one.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use e2e::process::Output;
use e2e::nodelab::{BUSYBOX, Components, NodeLab, RUN_TIMEOUT};

// This file's lab: the shared one plus what only these tests need.
e2e::node_lab!(Lab);

async fn lab(node: &str, octet: u8) -> Lab {
    Lab(NodeLab::start(node, octet, Components::default()).await)
}

impl Lab {
    async fn wait_phase(&self, name: &str, phase: &str) {
        self.wait_pod(name, phase, RUN_TIMEOUT, |p| e2e::nodelab::phase(p) == phase).await;
    }

    /// A pod on our node with one busybox container `main` running `command` (plus `extra`
    /// lines, indented as fields of the container).
    fn pod(&self, name: &str, command: &str, extra: &str, restart: &str) {
        let yaml = format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  nodeName: {node}\n  restartPolicy: {restart}\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: {BUSYBOX}\n    command: [sh, -c, {command:?}]\n{extra}",
            node = self.node
        );
        let o = self.api.kubectl_with(&["apply", "-f", "-"], &[], Some(&yaml));
        if !o.success {
            self.fail(&format!("kubectl apply failed:\n{}", o.describe()));
        }
    }

    fn kubectl_in(&self, args: &[&str], stdin: &str) -> Output {
        self.api.kubectl_with(args, &[], Some(stdin))
    }

    /// kubectl's command line, for running it under `script` (which gives it a terminal).
    fn kubectl_line(&self, args: &[&str]) -> String {
        let bin = e2e::apiserver::kubectl_bin().expect("kubectl");
        let quoted: Vec<String> = args.iter().map(|a| format!("'{}'", a.replace('\'', r"'\''"))).collect();
        format!("{} -s {} --request-timeout=20s {}", bin.display(), self.api.url(), quoted.join(" "))
    }

    fn home(&self) -> PathBuf {
        self.api.root().join("home")
    }
}

fn assert_output(lab: &Lab, o: &Output, stdout: &str, code: i32) {
    if o.stdout != stdout || o.code != Some(code) {
        lab.fail(&format!("expected stdout {stdout:?} and exit code {code}:\n{}", o.describe()));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn exec_output_stdin_exit_codes_tty_and_errors() {
    let lab = lab("node-exec", 45).await;
    lab.pod("shell", "sleep 3600", "", "Always");
    lab.wait_phase("shell", "Running").await;

    // Output, and the command's arguments arrive as they were given.
    let o = lab.api.kubectl(&["exec", "shell", "--", "echo", "hello"]);
    assert_output(&lab, &o, "hello\n", 0);
    let o = lab.api.kubectl(&["exec", "shell", "-c", "main", "--", "sh", "-c", "echo \"$0 $1\"", "a b", "c"]);
    assert_output(&lab, &o, "a b c\n", 0);

    // stdin to its end: `cat` sees EOF (websocket close-stream → SPDY FIN) and exits 0.
    let o = lab.kubectl_in(&["exec", "-i", "shell", "--", "cat"], "hi\n");
    assert_output(&lab, &o, "hi\n", 0);
    let big: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
    let o = lab.kubectl_in(&["exec", "-i", "shell", "--", "wc", "-l"], &big);
    if o.stdout.trim() != "20000" || !o.success {
        lab.fail(&format!("200 KB of stdin did not all arrive:\n{}", o.describe()));
    }

    // Exit codes become kubectl's, and stderr stays apart from stdout.
    let o = lab.api.kubectl(&["exec", "shell", "--", "sh", "-c", "exit 3"]);
    assert_output(&lab, &o, "", 3);
    let o = lab.api.kubectl(&["exec", "shell", "--", "sh", "-c", "echo out; echo err >&2; exit 1"]);
    assert_output(&lab, &o, "out\n", 1);
    assert!(o.stderr.contains("err\n"), "stderr lost:\n{}", o.describe());
    let o = lab.api.kubectl(&["exec", "shell", "--", "/no/such/binary"]);
    assert!(!o.success, "a missing binary must fail:\n{}", o.describe());

    // A tty under `script`: the container sees a terminal of the size kubectl's terminal has
    // (sent as a resize message), and its output comes with \r\n. The resize may land a moment
    // after the command starts: it waits for it (up to 10 s), then prints what it has.
    let await_size = "i=0; while [ \"$(stty size)\" != '33 111' ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; tty; stty size";
    let line = lab.kubectl_line(&["exec", "-it", "shell", "--", "sh", "-c", await_size]);
    let mut cmd = Command::new("script");
    cmd.env_clear()
        .env("HOME", lab.home())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("KUBECONFIG", lab.home().join("no-kubeconfig"))
        .args(["-qec", &format!("stty rows 33 cols 111; {line}"), "/dev/null"]);
    let (status, stdout, stderr) = e2e::process::run_to_completion(cmd, Some(""), Duration::from_secs(60)).expect("script");
    if !(status.is_some_and(|s| s.success()) && stdout.contains("/dev/pts/") && stdout.contains("33 111\r\n")) {
        lab.fail(&format!("exec -it under script: {status:?}\n--- stdout ---\n{stdout:?}\n--- stderr ---\n{stderr}"));
    }

    // Errors, each in words a person can act on.
    let o = lab.api.kubectl(&["exec", "shell", "-c", "nope", "--", "true"]);
    if o.success || !o.stderr.contains("nope") {
        lab.fail(&format!("exec into a container that does not exist:\n{}", o.describe()));
    }
    // Scheduled, but its container waits behind an init container that never ends.
    let waiting = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: waiting\nspec:\n  nodeName: {}\n  terminationGracePeriodSeconds: 1\n  initContainers:\n  - name: init\n    image: {BUSYBOX}\n    command: [sleep, '3600']\n  containers:\n  - name: main\n    image: {BUSYBOX}\n    command: [sleep, '3600']\n",
        lab.node
    );
    assert!(lab.kubectl_in(&["apply", "-f", "-"], &waiting).success);
    lab.wait_phase("waiting", "Pending").await;
    let o = lab.api.kubectl(&["exec", "waiting", "-c", "main", "--", "true"]);
    if o.success || !o.stderr.contains("container not found (\"main\")") {
        lab.fail(&format!("exec into a container that is not running:\n{}", o.describe()));
    }
    // Never scheduled.
    let unscheduled = format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: nowhere\nspec:\n  containers:\n  - name: main\n    image: {BUSYBOX}\n");
    assert!(lab.kubectl_in(&["apply", "-f", "-"], &unscheduled).success);
    let o = lab.api.kubectl(&["exec", "nowhere", "--", "true"]);
    if o.success || !o.stderr.contains("pod nowhere does not have a host assigned") {
        lab.fail(&format!("exec into an unscheduled pod:\n{}", o.describe()));
    }
    // Completed.
    lab.pod("done", "true", "", "Never");
    lab.wait_phase("done", "Succeeded").await;
    let o = lab.api.kubectl(&["exec", "done", "--", "true"]);
    if o.success || !o.stderr.contains("completed pod") {
        lab.fail(&format!("exec into a completed pod:\n{}", o.describe()));
    }
    let o = lab.api.kubectl(&["exec", "missing", "--", "true"]);
    if o.success || !o.stderr.contains("pods \"missing\" not found") {
        lab.fail(&format!("exec into a pod that does not exist:\n{}", o.describe()));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn attach_reaches_a_containers_stdin_and_output() {
    let lab = lab("node-attach", 46).await;
    // The container reads its stdin (kept open by containerd) and answers each line; with
    // stdinOnce the first attach's EOF closes it, so the loop ends and so does the attach.
    lab.pod(
        "echoer",
        "while read l; do echo got:$l; done; echo bye",
        "    stdin: true\n    stdinOnce: true\n",
        "Never",
    );
    lab.wait_phase("echoer", "Running").await;
    let o = lab.kubectl_in(&["attach", "-i", "echoer", "-c", "main"], "hello\nworld\n");
    if !o.success || o.stdout != "got:hello\ngot:world\nbye\n" {
        lab.fail(&format!("attach -i:\n{}", o.describe()));
    }
    lab.wait_phase("echoer", "Succeeded").await;
    let o = lab.api.kubectl(&["attach", "echoer"]);
    if o.success || !o.stderr.contains("completed pod") {
        lab.fail(&format!("attach to a completed pod:\n{}", o.describe()));
    }
}
