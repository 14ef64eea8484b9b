//! `kubectl port-forward` end to end, with every pinned kubectl 1.27–1.33 (each with a fresh
//! HOME): kubectl → the kubelab API server's `pods/portforward` (spliced) → the node agent's
//! `/portForward` → containerd's CRI PortForward streaming server, which dials the port inside
//! the pod's network namespace. Covered: bytes both ways, two connections at once, a server bound
//! only to 127.0.0.1 in the pod, a port nobody listens on (kubectl's error; every kubectl
//! then ends the session itself), `port-forward svc/…`, and the error for a missing pod — over plain
//! SPDY (kubectl ≤ 1.30, taken off the API server's listener and tunnelled to the agent in a
//! websocket) and over kubectl's websocket tunnel (1.31+, spliced).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use e2e::background::Background;
use e2e::nodelab::{BUSYBOX, Components, NodeLab, RUN_TIMEOUT};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

e2e::node_lab!(Lab);

/// The pod's servers: an echo server on every address, an HTTP server on 127.0.0.1 only.
const ECHO_PORT: u16 = 9000;
const LOOPBACK_HTTP_PORT: u16 = 8081;
/// Nobody listens there.
const DEAD_PORT: u16 = 9999;
const LOOPBACK_PAGE: &str = "hello-from-loopback";

impl Lab {
    fn apply(&self, yaml: &str) {
        let o = self.api.kubectl_with(&["apply", "-f", "-"], &[], Some(yaml));
        if !o.success {
            self.fail(&format!("kubectl apply failed:\n{}", o.describe()));
        }
    }

    /// `kubectl.1.<minor> port-forward <args>` in the background, with a fresh HOME.
    fn port_forward(&self, minor: u32, home: &Path, env: &[(&str, &str)], args: &[&str]) -> Background {
        let bin = e2e::apiserver::kubectl_for(minor).expect("kubectl");
        let mut cmd = Command::new(&bin);
        cmd.env_clear()
            .env("HOME", home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("KUBECONFIG", home.join("no-kubeconfig"))
            .args(["-s", &self.api.url(), "port-forward", "--address", "127.0.0.1"])
            .args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let shown = format!("{}kubectl.1.{minor} port-forward {}", env.iter().map(|(k, v)| format!("{k}={v} ")).collect::<String>(), args.join(" "));
        Background::spawn(cmd, shown).expect("spawn kubectl port-forward")
    }
}

/// Port-forward sessions the API server has logged so far: (plain SPDY tunnelled, websocket spliced).
fn api_log_counts(lab: &Lab) -> (usize, usize) {
    let log = std::fs::read_to_string(lab.api.root().join("apiserver").join("stderr.log")).unwrap_or_default();
    (log.matches("SPDY port-forward tunnelled").count(), log.matches("upgraded path=\"/portForward/").count())
}

/// Write `data` on a fresh connection to `port` and read `want` bytes back.
async fn echo(port: u16, data: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut s = tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(("127.0.0.1", port))).await??;
    s.write_all(data).await?;
    let mut got = vec![0u8; data.len()];
    tokio::time::timeout(Duration::from_secs(20), s.read_exact(&mut got)).await??;
    Ok(got)
}

/// An HTTP/1.0 GET of `/` through `port`: the whole answer.
async fn http_get(port: u16) -> anyhow::Result<String> {
    let mut s = tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(("127.0.0.1", port))).await??;
    s.write_all(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n").await?;
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut got)).await??;
    Ok(String::from_utf8_lossy(&got).to_string())
}

/// The pod's servers start a moment after it turns Running: retry the first echo.
async fn first_echo(lab: &Lab, port: u16) {
    let mut last = None;
    for _ in 0..40 {
        match echo(port, b"first\n").await {
            Ok(got) if got == b"first\n" => return,
            Ok(got) => last = Some(format!("echoed {got:?}")),
            Err(e) => last = Some(e.to_string()),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    lab.fail(&format!("no echo through port-forward on {port}: {last:?}"));
}

#[tokio::test(flavor = "multi_thread")]
async fn port_forward_pods_and_services_with_every_kubectl() {
    let lab = Lab(NodeLab::start("node-portforward", 77, Components::default()).await);
    let script = format!(
        "mkdir -p /www && echo {LOOPBACK_PAGE} > /www/index.html && httpd -p 127.0.0.1:{LOOPBACK_HTTP_PORT} -h /www && exec nc -ll -p {ECHO_PORT} -e cat"
    );
    lab.apply(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: pf\n  labels: {{app: pf}}\nspec:\n  nodeName: {node}\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: {BUSYBOX}\n    command: [sh, -c, {script:?}]\n    ports:\n    - {{name: echo, containerPort: {ECHO_PORT}}}\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: pf-svc\nspec:\n  selector: {{app: pf}}\n  ports:\n  - {{name: echo, port: 80, targetPort: echo}}\n",
        node = lab.node
    ));
    lab.wait_pod("pf", "Running", RUN_TIMEOUT, |p| e2e::nodelab::phase(p) == "Running").await;

    // Every kubectl as it comes (SPDY up to 1.30, websocket-tunnelled SPDY from 1.31), and the
    // switch each way: 1.30 opting in to websockets, 1.33 opting out.
    let mut cases: Vec<(u32, &[(&str, &str)])> = e2e::apiserver::KUBECTL_MINORS.iter().map(|&m| (m, &[][..])).collect();
    cases.push((30, &[("KUBECTL_PORT_FORWARD_WEBSOCKETS", "true")]));
    cases.push((33, &[("KUBECTL_PORT_FORWARD_WEBSOCKETS", "false")]));
    let mut report = Vec::new();
    for (minor, env) in cases {
        let started = std::time::Instant::now();
        let home = tempfile::tempdir().expect("home");
        let ports = e2e::ports::reserve_n(4).expect("ports");
        let [echo_local, http_local, dead_local, svc_local] = [ports[0].port, ports[1].port, ports[2].port, ports[3].port];
        drop(ports);
        let pod_args = [
            "pod/pf".to_string(),
            format!("{echo_local}:{ECHO_PORT}"),
            format!("{http_local}:{LOOPBACK_HTTP_PORT}"),
            format!("{dead_local}:{DEAD_PORT}"),
        ];
        let pod_args: Vec<&str> = pod_args.iter().map(String::as_str).collect();
        let (spdy_before, ws_before) = api_log_counts(&lab);
        let mut pf = lab.port_forward(minor, home.path(), env, &pod_args);

        let forwarding = format!("Forwarding from 127.0.0.1:{echo_local} -> {ECHO_PORT}");
        if let Err(e) = pf.expect_line("the forwarding line", Duration::from_secs(30), |l| l == forwarding) {
            let (_, stderr) = pf.stop();
            lab.fail(&format!("kubectl 1.{minor}: {e}\nstderr: {stderr}"));
        }
        first_echo(&lab, echo_local).await;

        // Two connections at once, each with its own bytes.
        let mut a = TcpStream::connect(("127.0.0.1", echo_local)).await.expect("connect a");
        let mut b = TcpStream::connect(("127.0.0.1", echo_local)).await.expect("connect b");
        b.write_all(b"from b\n").await.expect("write b");
        a.write_all(b"from a\n").await.expect("write a");
        let (mut got_a, mut got_b) = ([0u8; 7], [0u8; 7]);
        tokio::time::timeout(Duration::from_secs(20), b.read_exact(&mut got_b)).await.expect("b in time").expect("read b");
        tokio::time::timeout(Duration::from_secs(20), a.read_exact(&mut got_a)).await.expect("a in time").expect("read a");
        assert_eq!((&got_a, &got_b), (b"from a\n", b"from b\n"), "kubectl 1.{minor}");
        // 256 KiB each way on one connection.
        let big: Vec<u8> = (0..256 * 1024).map(|i| (i % 251) as u8).collect();
        let got = echo(echo_local, &big).await.unwrap_or_else(|e| lab.fail(&format!("kubectl 1.{minor}: 256 KiB echo: {e}")));
        assert!(got == big, "kubectl 1.{minor}: the 256 KiB came back changed");
        drop((a, b));

        // A server bound to the pod's 127.0.0.1 only.
        let page = http_get(http_local).await.unwrap_or_else(|e| lab.fail(&format!("kubectl 1.{minor}: loopback http: {e}")));
        assert!(page.contains(LOOPBACK_PAGE), "kubectl 1.{minor}: {page}");

        // Nobody listens: the connection ends, kubectl says why, the session goes on.
        let mut dead = TcpStream::connect(("127.0.0.1", dead_local)).await.expect("connect dead");
        let _ = dead.write_all(b"anyone?\n").await;
        let mut sink = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(20), dead.read_to_end(&mut sink)).await.expect("the dead connection ends");
        if let Err(e) = pf.expect_stderr_line("the forwarding error", Duration::from_secs(20), |l| l.contains(&format!("{DEAD_PORT}")) && l.contains("refused")) {
            lab.fail(&format!("kubectl 1.{minor}: {e}"));
        }
        // Every kubectl here (client-go's handleConnection) then closes the whole port-forward
        // connection itself and exits: the API server and the agent only see it go.
        let (_, _, stderr) = pf.wait_exit(Duration::from_secs(30)).unwrap_or_else(|e| lab.fail(&format!("kubectl 1.{minor} should end the session after the error: {e}")));
        let pod_secs = started.elapsed();
        // Which way it came, by the API server's log: kubectl 1.31+ would fall back to SPDY if the
        // websocket were refused, so passing alone does not show the websocket path works.
        let spdy = env.is_empty() && minor <= 30 || env.iter().any(|(_, v)| *v == "false");
        let (spdy_now, ws_now) = api_log_counts(&lab);
        if (spdy_now - spdy_before, ws_now - ws_before) != (usize::from(spdy), usize::from(!spdy)) {
            lab.fail(&format!(
                "kubectl 1.{minor} {env:?}: expected one {} session; the API server logged {} SPDY and {} websocket ones",
                if spdy { "SPDY" } else { "websocket" },
                spdy_now - spdy_before,
                ws_now - ws_before
            ));
        }

        // svc/…: kubectl picks the pod and the target port itself.
        let svc_args = ["svc/pf-svc".to_string(), format!("{svc_local}:80")];
        let svc_args: Vec<&str> = svc_args.iter().map(String::as_str).collect();
        let mut pf = lab.port_forward(minor, home.path(), env, &svc_args);
        let forwarding = format!("Forwarding from 127.0.0.1:{svc_local} -> {ECHO_PORT}");
        if let Err(e) = pf.expect_line("the forwarding line", Duration::from_secs(30), |l| l == forwarding) {
            let (_, stderr) = pf.stop();
            lab.fail(&format!("kubectl 1.{minor} svc: {e}\nstderr: {stderr}"));
        }
        first_echo(&lab, svc_local).await;
        drop(pf);
        report.push(format!("1.{minor} {env:?}: pod {pod_secs:?}, with svc {:?} (stderr lines: {})", started.elapsed(), stderr.lines().count()));
    }

    // Errors: a pod that does not exist, from the API server's 404.
    let home = tempfile::tempdir().expect("home");
    let pf = lab.port_forward(33, home.path(), &[], &["pod/missing", "12345:80"]);
    let (ok, _, stderr) = pf.wait_exit(Duration::from_secs(30)).expect("kubectl exits");
    if ok || !stderr.contains("pods \"missing\" not found") {
        lab.fail(&format!("port-forward to a missing pod:\n{stderr}"));
    }
    eprintln!("[portforward] {}", report.join("\n[portforward] "));
}

/// The proxy subresources through kubectl (`get --raw` and `kubectl proxy`): pods/proxy to the
/// pod's IP, services/proxy to a ready endpoint from the Service's EndpointSlices (the controller
/// manager writes them), nodes/proxy to the node agent; and an error each.
#[tokio::test(flavor = "multi_thread")]
async fn proxy_subresources_through_kubectl() {
    let lab = Lab(NodeLab::start("node-proxy", 78, Components { controller_manager: true, ..Components::default() }).await);
    let script = format!("mkdir -p /www && echo {LOOPBACK_PAGE} > /www/index.html && exec httpd -f -p 8082 -h /www");
    lab.apply(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  labels: {{app: web}}\nspec:\n  nodeName: {node}\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: {BUSYBOX}\n    command: [sh, -c, {script:?}]\n    ports:\n    - {{name: http, containerPort: 8082}}\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  selector: {{app: web}}\n  ports:\n  - {{name: http, port: 80, targetPort: http}}\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: empty\nspec:\n  selector: {{app: nobody}}\n  ports:\n  - {{name: http, port: 80}}\n",
        node = lab.node
    ));
    lab.wait_pod("web", "Running", RUN_TIMEOUT, |p| e2e::nodelab::phase(p) == "Running").await;

    let started = std::time::Instant::now();
    // pods/proxy, with the port and without (the first declared); retried while httpd starts.
    let raw = |path: &str| lab.api.kubectl(&["get", "--raw", path]);
    let mut o = raw("/api/v1/namespaces/default/pods/web:8082/proxy/");
    for _ in 0..40 {
        if o.success {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        o = raw("/api/v1/namespaces/default/pods/web:8082/proxy/");
    }
    if !o.success || !o.stdout.contains(LOOPBACK_PAGE) {
        lab.fail(&format!("pods/proxy:\n{}", o.describe()));
    }
    let o = raw("/api/v1/namespaces/default/pods/http:web:/proxy/index.html");
    if !o.success || !o.stdout.contains(LOOPBACK_PAGE) {
        lab.fail(&format!("pods/proxy with the scheme and the first declared port:\n{}", o.describe()));
    }
    let o = raw("/api/v1/namespaces/default/pods/web:9998/proxy/");
    if o.success || !o.stderr.contains("error trying to reach service") {
        lab.fail(&format!("pods/proxy to a port nobody listens on:\n{}", o.describe()));
    }
    let o = raw("/api/v1/namespaces/default/pods/nope:80/proxy/");
    if o.success || !o.stderr.contains("pods \"nope\" not found") {
        lab.fail(&format!("pods/proxy to a missing pod:\n{}", o.describe()));
    }

    // services/proxy, once the EndpointSlice has the ready pod.
    let mut o = raw("/api/v1/namespaces/default/services/web:http/proxy/");
    for _ in 0..80 {
        if o.success {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        o = raw("/api/v1/namespaces/default/services/web:http/proxy/");
    }
    if !o.success || !o.stdout.contains(LOOPBACK_PAGE) {
        lab.fail(&format!("services/proxy:\n{}", o.describe()));
    }
    let o = raw("/api/v1/namespaces/default/services/empty:http/proxy/");
    if o.success || !o.stderr.contains("no endpoints available for service \"empty\"") {
        lab.fail(&format!("services/proxy without endpoints:\n{}", o.describe()));
    }
    let o = raw("/api/v1/namespaces/default/services/web:nope/proxy/");
    if o.success || !o.stderr.contains("no service port \"nope\" found for service \"web\"") {
        lab.fail(&format!("services/proxy to a port the Service lacks:\n{}", o.describe()));
    }

    // nodes/proxy to the agent.
    let o = raw(&format!("/api/v1/nodes/{}/proxy/healthz", lab.node));
    if !o.success || o.stdout.trim() != "ok" {
        lab.fail(&format!("nodes/proxy healthz:\n{}", o.describe()));
    }
    let o = raw(&format!("/api/v1/nodes/{}/proxy/pods", lab.node));
    if !o.success || !o.stdout.contains("\"PodList\"") {
        lab.fail(&format!("nodes/proxy pods:\n{}", o.describe()));
    }
    let o = raw("/api/v1/nodes/nope/proxy/healthz");
    if o.success || !o.stderr.contains("nodes \"nope\" not found") {
        lab.fail(&format!("nodes/proxy to a missing node:\n{}", o.describe()));
    }

    // kubectl proxy in front of it all.
    let port = e2e::ports::reserve().expect("port");
    let local = port.port;
    drop(port);
    let bin = e2e::apiserver::kubectl_bin().expect("kubectl");
    let home = tempfile::tempdir().expect("home");
    let mut cmd = Command::new(&bin);
    cmd.env_clear()
        .env("HOME", home.path())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("KUBECONFIG", home.path().join("no-kubeconfig"))
        .args(["-s", &lab.api.url(), "proxy", "--address", "127.0.0.1", "--port", &local.to_string()]);
    let mut proxy = Background::spawn(cmd, format!("kubectl proxy --port {local}")).expect("kubectl proxy");
    proxy.expect_line("Starting to serve", Duration::from_secs(20), |l| l.contains("Starting to serve")).expect("kubectl proxy serves");
    for path in ["/api/v1/namespaces/default/pods/web:8082/proxy/", "/api/v1/namespaces/default/services/web:http/proxy/"] {
        let body = reqwest::get(format!("http://127.0.0.1:{local}{path}")).await.expect("through kubectl proxy").text().await.expect("body");
        assert!(body.contains(LOOPBACK_PAGE), "{path}: {body}");
    }
    drop(proxy);
    eprintln!("[proxy] all checks in {:?}", started.elapsed());
}
