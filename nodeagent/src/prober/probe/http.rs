//! Mirrors pkg/probe/http (http.go, request.go): GET a URL on the pod; a status in 200..400 is
//! success.
//!
//! As in Kubernetes:
//! - HTTPS certificates are not verified (a probe checks health, not identity).
//! - Redirects to the same host are followed, up to 10; a redirect to another host is not
//!   followed, and the 3xx answer counts as success with a warning ("Probe terminated
//!   redirects").
//! - No connection is kept alive between probes, and no proxy is used.
//! - The request carries `User-Agent: kube-probe/<major>.<minor>` and `Accept: */*` unless the
//!   probe's httpHeaders set them; a `Host` header replaces the URL's host.
//! - A connection error or timeout is a failure whose output is the error.

use std::time::Duration;

use k8s_openapi::api::core::v1::HTTPHeader;
use reqwest::header::{ACCEPT, HeaderMap, HeaderName, HeaderValue, USER_AGENT};

use super::Outcome;

/// The User-Agent of probes: the Kubernetes version this agent speaks.
pub(crate) const PROBE_USER_AGENT: &str = "kube-probe/1.32";

/// At most this many redirects are followed (net/http's default, kept by the kubelet).
pub(crate) const MAX_REDIRECTS: usize = 10;

/// The client every HTTP probe uses. Cheap to clone.
pub(crate) fn new_client() -> reqwest::Result<reqwest::Client> {
    let policy = reqwest::redirect::Policy::custom(|attempt| {
        let first_host = attempt.previous().first().and_then(|u| u.host_str().map(str::to_owned));
        if attempt.url().host_str().map(str::to_owned) != first_host {
            // Not followed: the 3xx is the answer (a Warning).
            attempt.stop()
        } else if attempt.previous().len() >= MAX_REDIRECTS {
            attempt.error(format!("stopped after {MAX_REDIRECTS} redirects"))
        } else {
            attempt.follow()
        }
    });
    reqwest::Client::builder()
        .tls_danger_accept_invalid_certs(true)
        .redirect(policy)
        // kubelet's probe transport sets DisableKeepAlives: a probe every few seconds to every
        // pod must not leave idle sockets behind.
        .pool_max_idle_per_host(0)
        .no_proxy()
        .build()
}

/// `scheme://host:port/path`, with IPv6 hosts in brackets and the path given a leading `/`
/// (kubelet's formatURL).
pub(crate) fn format_url(scheme: &str, host: &str, port: u16, path: &str) -> String {
    let host = if host.contains(':') && !host.starts_with('[') { format!("[{host}]") } else { host.to_string() };
    let path = if path.starts_with('/') { path.to_string() } else { format!("/{path}") };
    format!("{}://{host}:{port}{path}", scheme.to_ascii_lowercase())
}

/// The request headers: the probe's own, plus the defaults it did not set.
fn headers(probe_headers: &[HTTPHeader]) -> std::result::Result<HeaderMap, String> {
    let mut h = HeaderMap::new();
    for ph in probe_headers {
        let name = HeaderName::from_bytes(ph.name.as_bytes()).map_err(|e| format!("header name {:?}: {e}", ph.name))?;
        let value = HeaderValue::from_str(&ph.value).map_err(|e| format!("header {:?} value: {e}", ph.name))?;
        h.append(name, value);
    }
    if !h.contains_key(USER_AGENT) {
        h.insert(USER_AGENT, HeaderValue::from_static(PROBE_USER_AGENT));
    }
    if !h.contains_key(ACCEPT) {
        h.insert(ACCEPT, HeaderValue::from_static("*/*"));
    }
    Ok(h)
}

/// GET `url` within `timeout` and judge the answer.
pub(crate) async fn probe(client: &reqwest::Client, url: &str, probe_headers: &[HTTPHeader], timeout: Duration) -> (Outcome, String) {
    let headers = match headers(probe_headers) {
        Ok(h) => h,
        Err(e) => return (Outcome::Failure, e),
    };
    let req = client.get(url).headers(headers).timeout(timeout);
    let mut resp = match req.send().await {
        Ok(r) => r,
        Err(e) => return (Outcome::Failure, describe(url, &e)),
    };
    let code = resp.status().as_u16();
    let mut body = Vec::new();
    while body.len() < super::super::MAX_PROBE_OUTPUT {
        match resp.chunk().await {
            Ok(Some(c)) => body.extend_from_slice(&c),
            Ok(None) => break,
            Err(e) => return (Outcome::Failure, describe(url, &e)),
        }
    }
    let body = super::truncate_output(&body);
    match code {
        200..=299 => (Outcome::Success, body),
        300..=399 => (Outcome::Warning, format!("Probe terminated redirects, Response body: {body}")),
        _ => (Outcome::Failure, format!("HTTP probe failed with statuscode: {code}")),
    }
}

/// Go's error text is `Get "<url>": <cause>`; reqwest's chain of causes says the same.
fn describe(url: &str, e: &reqwest::Error) -> String {
    let mut s = format!("Get {url:?}:");
    let mut cause: Option<&dyn std::error::Error> = Some(e);
    let mut last = String::new();
    while let Some(c) = cause {
        last = c.to_string();
        cause = c.source();
    }
    if e.is_timeout() {
        s.push_str(" context deadline exceeded (Client.Timeout exceeded while awaiting headers)");
    } else {
        s.push(' ');
        s.push_str(&last);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A tiny HTTP/1.1 server: answers each request with what `route` returns for its path and
    /// records the request heads it saw.
    async fn serve(route: fn(&str, u16) -> String) -> (u16, Arc<Mutex<Vec<String>>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let seen = Arc::new(Mutex::new(vec![]));
        let s = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let s = s.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0; 4096];
                    let mut n = 0;
                    while !buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                        match sock.read(&mut buf[n..]).await {
                            Ok(0) | Err(_) => return,
                            Ok(k) => n += k,
                        }
                    }
                    let head = String::from_utf8_lossy(&buf[..n]).into_owned();
                    let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                    s.lock().unwrap_or_else(|e| e.into_inner()).push(head);
                    let _ = sock.write_all(route(&path, port).as_bytes()).await;
                });
            }
        });
        (port, seen)
    }

    fn answer(status: &str, extra: &str, body: &str) -> String {
        format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n{extra}\r\n{body}", body.len())
    }

    fn route(path: &str, port: u16) -> String {
        match path {
            "/healthz" => answer("200 OK", "", "ok"),
            "/bad" => answer("500 Internal Server Error", "", "boom"),
            "/local-redirect" => answer("302 Found", "Location: /healthz\r\n", ""),
            "/loop" => answer("302 Found", "Location: /loop\r\n", ""),
            // 127.0.0.1 and localhost are different hosts to the probe.
            "/away" => answer("301 Moved Permanently", &format!("Location: http://localhost:{port}/healthz\r\n"), "moved"),
            "/slow" => String::new(),
            _ => answer("404 Not Found", "", ""),
        }
    }

    #[tokio::test]
    async fn status_codes_redirects_headers_and_errors() {
        let (port, seen) = serve(route).await;
        let client = new_client().expect("client");
        let t = Duration::from_secs(2);
        let url = |p: &str| format_url("HTTP", "127.0.0.1", port, p);

        assert_eq!(probe(&client, &url("healthz"), &[], t).await, (Outcome::Success, "ok".into()));
        assert_eq!(probe(&client, &url("/bad"), &[], t).await.0, Outcome::Failure);
        assert_eq!(probe(&client, &url("/bad"), &[], t).await.1, "HTTP probe failed with statuscode: 500");
        assert_eq!(probe(&client, &url("/nope"), &[], t).await.0, Outcome::Failure);
        assert_eq!(probe(&client, &url("/local-redirect"), &[], t).await, (Outcome::Success, "ok".into()), "same-host redirects are followed");
        let (o, out) = probe(&client, &url("/away"), &[], t).await;
        assert_eq!((o, out.as_str()), (Outcome::Warning, "Probe terminated redirects, Response body: moved"));
        assert_eq!(probe(&client, &url("/loop"), &[], t).await.0, Outcome::Failure, "a redirect loop stops after 10");

        // The defaults, and the probe's own headers.
        let custom = [HTTPHeader { name: "X-Probe".into(), value: "yes".into() }, HTTPHeader { name: "Accept".into(), value: "text/plain".into() }];
        seen.lock().unwrap_or_else(|e| e.into_inner()).clear();
        probe(&client, &url("/healthz"), &[], t).await;
        probe(&client, &url("/healthz"), &custom, t).await;
        let heads = seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let lower: Vec<String> = heads.iter().map(|h| h.to_ascii_lowercase()).collect();
        assert!(lower[0].contains("user-agent: kube-probe/1.32") && lower[0].contains("accept: */*"), "{}", heads[0]);
        assert!(lower[1].contains("x-probe: yes") && lower[1].contains("accept: text/plain") && !lower[1].contains("accept: */*"), "{}", heads[1]);

        // A server that never answers: a failure after the timeout.
        let started = std::time::Instant::now();
        let (o, out) = probe(&client, &url("/slow"), &[], Duration::from_millis(300)).await;
        assert_eq!(o, Outcome::Failure, "{out}");
        assert!(started.elapsed() < Duration::from_secs(2));

        // Nobody listening.
        let free = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        let (o, out) = probe(&client, &format_url("http", "127.0.0.1", free, "/"), &[], t).await;
        assert_eq!(o, Outcome::Failure);
        assert!(out.starts_with(&format!("Get \"http://127.0.0.1:{free}/\":")), "{out}");
    }

    #[test]
    fn urls_are_formatted_like_kubelets() {
        assert_eq!(format_url("HTTPS", "10.0.0.1", 443, "healthz"), "https://10.0.0.1:443/healthz");
        assert_eq!(format_url("http", "fd00::1", 80, "/x?y=1"), "http://[fd00::1]:80/x?y=1");
        assert_eq!(format_url("http", "10.0.0.1", 80, ""), "http://10.0.0.1:80/");
    }

    /// HTTPS with a self-signed certificate: not verified, so the probe succeeds. Uses the
    /// `openssl` command (s_server) as the server.
    #[tokio::test]
    async fn https_does_not_verify_certificates() {
        let dir = tempfile::tempdir().expect("tmp");
        let (key, cert) = (dir.path().join("key.pem"), dir.path().join("cert.pem"));
        let made = std::process::Command::new("openssl")
            .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=probe-test"])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .stderr(std::process::Stdio::null())
            .status()
            .expect("the openssl command (Debian's openssl package) runs");
        assert!(made.success(), "openssl req");
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        let mut server = std::process::Command::new("openssl")
            .args(["s_server", "-quiet", "-www", "-accept", &port.to_string()])
            .arg("-key")
            .arg(&key)
            .arg("-cert")
            .arg(&cert)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("openssl s_server");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
            assert!(std::time::Instant::now() < deadline, "s_server did not listen");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let client = new_client().expect("client");
        let (o, out) = probe(&client, &format_url("HTTPS", "127.0.0.1", port, "/"), &[], Duration::from_secs(5)).await;
        let _ = server.kill();
        let _ = server.wait();
        assert_eq!(o, Outcome::Success, "{out}");
    }
}
