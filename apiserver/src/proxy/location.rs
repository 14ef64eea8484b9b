//! Mirrors `SplitSchemeNamePort` of k8s.io/apimachinery/pkg/util/net/http.go and the path split
//! of the proxy handlers: what a `…/<id>/proxy/<path>` request names — an optional scheme, the
//! object's name, an optional port — and the path to ask the backend for.

use crate::error::{Error, Result};

/// `id` as `name`, `name:port` or `scheme:name:port` (scheme `http` or `https`, default http).
pub fn split_scheme_name_port(id: &str) -> Result<(&str, &str, &str)> {
    let bad = || Error::BadRequest(format!("invalid request {id:?}"));
    let parts: Vec<&str> = id.split(':').collect();
    let (scheme, name, port) = match parts.as_slice() {
        [name] => ("", *name, ""),
        [name, port] => ("", *name, *port),
        [scheme, name, port] => (*scheme, *name, *port),
        _ => return Err(bad()),
    };
    if name.is_empty() || !matches!(scheme, "" | "http" | "https") {
        return Err(bad());
    }
    Ok((if scheme.is_empty() { "http" } else { scheme }, name, port))
}

/// The path after `/<id>/proxy` in `path` (`/` when nothing follows).
pub fn proxy_path<'a>(path: &'a str, id: &str) -> &'a str {
    let marker = format!("/{id}/proxy");
    match path.find(&marker) {
        Some(at) => {
            let rest = &path[at + marker.len()..];
            if rest.is_empty() { "/" } else { rest }
        }
        None => "/",
    }
}

/// `host:port` with IPv6 addresses bracketed.
pub fn join_host_port(host: &str, port: &str) -> String {
    let host = if host.contains(':') { format!("[{host}]") } else { host.to_string() };
    if port.is_empty() { host } else { format!("{host}:{port}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_paths_and_hosts() {
        assert_eq!(split_scheme_name_port("web").expect("ok"), ("http", "web", ""));
        assert_eq!(split_scheme_name_port("web:8080").expect("ok"), ("http", "web", "8080"));
        assert_eq!(split_scheme_name_port("https:web:443").expect("ok"), ("https", "web", "443"));
        assert_eq!(split_scheme_name_port("http:web:").expect("ok"), ("http", "web", ""));
        assert!(split_scheme_name_port("ftp:web:21").is_err());
        assert!(split_scheme_name_port(":80").is_err());
        assert!(split_scheme_name_port("a:b:c:d").is_err());

        assert_eq!(proxy_path("/api/v1/namespaces/d/pods/web:80/proxy/a/b", "web:80"), "/a/b");
        assert_eq!(proxy_path("/api/v1/namespaces/d/pods/web:80/proxy/", "web:80"), "/");
        assert_eq!(proxy_path("/api/v1/namespaces/d/pods/web:80/proxy", "web:80"), "/");
        assert_eq!(proxy_path("/api/v1/nodes/n1/proxy/healthz", "n1"), "/healthz");

        assert_eq!(join_host_port("10.0.0.1", "80"), "10.0.0.1:80");
        assert_eq!(join_host_port("fd00::1", "80"), "[fd00::1]:80");
        assert_eq!(join_host_port("10.0.0.1", ""), "10.0.0.1");
    }
}
