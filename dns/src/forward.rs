//! Mirrors CoreDNS's plugin/forward (forward.go, connect.go) as the default Corefile uses it,
//! `forward . /etc/resolv.conf`: a question outside the cluster domain goes, unchanged, to the
//! node's resolvers, tried in order (CoreDNS's `policy sequential`), over the protocol the client
//! used; a UDP answer that comes back truncated is asked again over TCP. When none answers, the
//! client gets SERVFAIL.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use hickory_proto::op::Message;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpStream, UdpSocket};

use crate::error::{Error, Result};

/// How long one upstream has to answer before the next is tried (CoreDNS's read timeout is 2 s).
pub const DEFAULT_UPSTREAM_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Clone, Debug)]
pub struct Forwarder {
    upstreams: Vec<SocketAddr>,
    timeout: Duration,
}

impl Forwarder {
    pub fn new(upstreams: Vec<SocketAddr>, timeout: Duration) -> Forwarder {
        Forwarder { upstreams, timeout }
    }

    pub fn upstreams(&self) -> &[SocketAddr] {
        &self.upstreams
    }

    /// The answer of the first upstream that gives one. `query` is the client's message as it
    /// came; the answer keeps its ID.
    pub async fn forward(&self, query: &[u8], tcp: bool) -> Result<Message> {
        if self.upstreams.is_empty() {
            return Err(Error::Upstream("no upstream resolver configured".into()));
        }
        let mut last = String::new();
        for upstream in &self.upstreams {
            let attempt = async {
                let mut answer = if tcp { exchange_tcp(*upstream, query).await? } else { exchange_udp(*upstream, query).await? };
                if answer.metadata.truncation && !tcp {
                    answer = exchange_tcp(*upstream, query).await?;
                }
                Ok::<_, std::io::Error>(answer)
            };
            match tokio::time::timeout(self.timeout, attempt).await {
                Ok(Ok(answer)) => return Ok(answer),
                Ok(Err(e)) => last = format!("{upstream}: {e}"),
                Err(_) => last = format!("{upstream}: no answer in {:?}", self.timeout),
            }
            tracing::debug!(target: "dns::forward", upstream = %upstream, error = %last, "upstream failed");
        }
        Err(Error::Upstream(last))
    }
}

async fn exchange_udp(upstream: SocketAddr, query: &[u8]) -> std::io::Result<Message> {
    let local: SocketAddr = if upstream.is_ipv4() { ([0, 0, 0, 0], 0).into() } else { ([0u16; 8], 0).into() };
    let socket = UdpSocket::bind(local).await?;
    socket.connect(upstream).await?;
    socket.send(query).await?;
    let mut buf = vec![0u8; 65535];
    loop {
        let n = socket.recv(&mut buf).await?;
        let answer = decode(&buf[..n])?;
        // A stray datagram with another ID is not our answer.
        if query.len() >= 2 && answer.metadata.id == u16::from_be_bytes([query[0], query[1]]) {
            return Ok(answer);
        }
    }
}

async fn exchange_tcp(upstream: SocketAddr, query: &[u8]) -> std::io::Result<Message> {
    let mut stream = TcpStream::connect(upstream).await?;
    let len = u16::try_from(query.len()).map_err(|_| std::io::Error::other("query too long"))?;
    stream.write_all(&len.to_be_bytes()).await?;
    stream.write_all(query).await?;
    let n = stream.read_u16().await?;
    let mut buf = vec![0u8; usize::from(n)];
    stream.read_exact(&mut buf).await?;
    decode(&buf)
}

fn decode(bytes: &[u8]) -> std::io::Result<Message> {
    Message::from_vec(bytes).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))
}

/// The `nameserver` lines of a resolv.conf, on port 53 (at most three are read, as the libc
/// resolver reads them).
pub fn parse_resolv_conf(text: &str) -> Vec<SocketAddr> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.split(['#', ';']).next().unwrap_or_default().split_whitespace();
            match (f.next(), f.next()) {
                // A scoped IPv6 address (fe80::1%eth0) is left out: the scope cannot be parsed.
                (Some("nameserver"), Some(addr)) => addr.parse::<IpAddr>().ok().map(|ip| SocketAddr::new(ip, 53)),
                _ => None,
            }
        })
        .take(3)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nameservers_come_from_resolv_conf() {
        let text = "# generated\nsearch example.com\nnameserver 10.0.0.2\nnameserver ::1 # local\noptions ndots:2\nnameserver bogus\n";
        let want: Vec<SocketAddr> = vec!["10.0.0.2:53".parse().unwrap(), "[::1]:53".parse().unwrap()];
        assert_eq!(parse_resolv_conf(text), want);
    }

    #[tokio::test]
    async fn no_upstream_is_an_error() {
        let f = Forwarder::new(vec![], DEFAULT_UPSTREAM_TIMEOUT);
        assert!(matches!(f.forward(&[0, 1], false).await, Err(Error::Upstream(_))));
    }
}
