//! Mirrors pkg/probe/tcp: a TCP connection opened within the timeout is success; the
//! connection is closed at once, nothing is sent.

use std::time::Duration;

use tokio::net::TcpStream;

use super::Outcome;

/// Connect to `host:port` within `timeout`.
pub(crate) async fn probe(host: &str, port: u16, timeout: Duration) -> (Outcome, String) {
    let addr = if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
    match tokio::time::timeout(timeout, TcpStream::connect(&addr)).await {
        Ok(Ok(_stream)) => (Outcome::Success, String::new()),
        Ok(Err(e)) => (Outcome::Failure, format!("dial tcp {addr}: {e}")),
        Err(_) => (Outcome::Failure, format!("dial tcp {addr}: i/o timeout")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn open_port_succeeds_closed_port_fails() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let (o, _) = probe("127.0.0.1", port, Duration::from_secs(1)).await;
        assert_eq!(o, Outcome::Success);

        drop(listener);
        let (o, out) = probe("127.0.0.1", port, Duration::from_secs(1)).await;
        assert_eq!(o, Outcome::Failure);
        assert!(out.starts_with(&format!("dial tcp 127.0.0.1:{port}:")), "{out}");
    }
}
