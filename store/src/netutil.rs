//! Socket options of the store's TCP connections: accepted ones (client and peer ports) and the
//! ones a member dials to its peers. Mirrors etcd's `client/pkg/transport` (the socket options
//! its listeners and dialers set).
//!
//! Two options, each for a delay measured on this project's machines:
//! - **Nagle's algorithm off** (`TCP_NODELAY`). With it, a response larger than a segment waits
//!   for the client's delayed ACK (40 ms) before its last piece leaves.
//! - **No BBR on loopback.** BBR paces what a connection sends at the rate it has measured and
//!   keeps in flight only about twice the bandwidth-delay product. On loopback the delay is a few
//!   microseconds, so that is two segments: a 300 kB range response went out in 128 kB bursts, and
//!   after each the member waited for an ACK that the client delays up to 40 ms. One range read
//!   in fifty took 10 to 100 ms instead of 2 (BENCHMARKS.md). There is no network on loopback for
//!   congestion control to protect, so such connections use CUBIC (Linux's default), or Reno
//!   where CUBIC cannot be had. A machine's own choice stands for every other connection.
//!
//! And TLS, as etcd's listeners and dialers add it for `https://` URLs: [`accept`] hands out
//! connections whose handshake is done (one that fails is logged and never reaches the server,
//! etcd's "rejected connection"), [`dial`] makes one to a peer. Either way a connection is a
//! [`Conn`], plain or TLS, so that the servers and the transport have one type for both.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::{Arc, Once};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// How long a TLS handshake may take before the connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshakes in progress at once on one listener; more connections wait to be accepted.
const MAX_HANDSHAKES: usize = 256;

/// A connection of the store's: plain TCP, or TLS over TCP (`T` is tokio-rustls' server or
/// client stream).
#[derive(Debug)]
pub enum Conn<T> {
    Plain(TcpStream),
    Tls(Box<T>),
}

/// An accepted connection.
pub type Accepted = Conn<tokio_rustls::server::TlsStream<TcpStream>>;
/// A connection dialed to a peer.
pub type Dialed = Conn<tokio_rustls::client::TlsStream<TcpStream>>;

impl<T: AsyncRead + Unpin> AsyncRead for Conn<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Conn<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Conn::Plain(s) => s.is_write_vectored(),
            Conn::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_flush(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

impl tonic::transport::server::Connected for Accepted {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        match self {
            Conn::Plain(s) => s.connect_info(),
            Conn::Tls(s) => s.get_ref().0.connect_info(),
        }
    }
}

/// The connections of a listener, tuned ([`tune`]) and, with `tls`, past their handshake. A
/// client the handshake refuses (no certificate, or one the trusted CA did not sign, under
/// `--client-cert-auth`) is logged and dropped; slow handshakes do not hold up others.
pub fn accept(listener: TcpListener, tls: Option<TlsAcceptor>, what: &'static str) -> impl futures::Stream<Item = io::Result<Accepted>> {
    use futures::StreamExt;
    tokio_stream::wrappers::TcpListenerStream::new(listener)
        .map(move |s| {
            let tls = tls.clone();
            async move {
                let s = match s {
                    Ok(s) => s,
                    Err(e) => return Some(Err(e)),
                };
                if let Err(e) = tune(&s) {
                    return Some(Err(e));
                }
                let Some(tls) = tls else { return Some(Ok(Conn::Plain(s))) };
                let remote = s.peer_addr().ok();
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.accept(s)).await {
                    Ok(Ok(t)) => Some(Ok(Conn::Tls(Box::new(t)))),
                    Ok(Err(e)) => {
                        tracing::warn!(target: "store::tls", port = what, remote = ?remote, error = %e, "rejected connection");
                        None
                    }
                    Err(_) => {
                        tracing::warn!(target: "store::tls", port = what, remote = ?remote, "rejected connection: TLS handshake timed out");
                        None
                    }
                }
            }
        })
        .buffer_unordered(MAX_HANDSHAKES)
        .filter_map(futures::future::ready)
}

/// Congestion control algorithms a loopback connection is moved to from BBR, best first. Reno
/// is built into every Linux kernel and allowed to unprivileged processes.
const LOOPBACK_ALGORITHMS: [&str; 2] = ["cubic", "reno"];

/// Sets the options above on a connection, accepted or dialed.
pub fn tune(stream: &TcpStream) -> io::Result<()> {
    stream.set_nodelay(true)?;
    if stream.peer_addr()?.ip().is_loopback() {
        avoid_bbr(stream);
    }
    Ok(())
}

/// Dials a peer's URL with the options above and, with `tls`, makes a TLS connection to it
/// whose certificate must name the URL's host: the connector of the peer transport's channels.
pub async fn dial(uri: tonic::transport::Uri, tls: Option<Arc<rustls::ClientConfig>>) -> io::Result<hyper_util::rt::TokioIo<Dialed>> {
    let invalid = || io::Error::new(io::ErrorKind::InvalidInput, format!("no host and port in peer URL {uri}"));
    let host = uri.host().ok_or_else(invalid)?.trim_start_matches('[').trim_end_matches(']');
    let port = uri.port_u16().ok_or_else(invalid)?;
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port)).await?.collect();
    let stream = TcpStream::connect(&addrs[..]).await?;
    tune(&stream)?;
    let Some(tls) = tls else { return Ok(hyper_util::rt::TokioIo::new(Conn::Plain(stream))) };
    let name = rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("peer URL {uri}: {e}")))?;
    let stream = tokio::time::timeout(HANDSHAKE_TIMEOUT, TlsConnector::from(tls).connect(name, stream))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))??;
    Ok(hyper_util::rt::TokioIo::new(Conn::Tls(Box::new(stream))))
}

/// Moves a connection off BBR. Nothing changes when it does not use BBR, and a refusal is only
/// logged: the connection works either way, only slower for large responses.
fn avoid_bbr(stream: &TcpStream) {
    static LOGGED: Once = Once::new();
    let fd = stream.as_raw_fd();
    match congestion_control(fd) {
        Ok(current) if current.starts_with("bbr") => {
            let chosen = LOOPBACK_ALGORITHMS.into_iter().find(|a| set_congestion_control(fd, a).is_ok());
            LOGGED.call_once(|| match chosen {
                Some(a) => tracing::info!(target: "store::net", from = %current, to = a, "loopback connections do not use BBR (its pacing stalls large responses)"),
                None => tracing::warn!(target: "store::net", current = %current, "could not move loopback connections off BBR; large responses will be slow"),
            });
        }
        Ok(_) => {}
        Err(e) => tracing::debug!(target: "store::net", error = %e, "cannot read the connection's congestion control"),
    }
}

/// The connection's congestion control algorithm (`TCP_CONGESTION`).
pub fn congestion_control(fd: i32) -> io::Result<String> {
    let mut name = [0u8; 16];
    let mut len = name.len() as libc::socklen_t;
    // SAFETY: `name` is writable for `len` bytes, and the kernel writes at most that many.
    let r = unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, name.as_mut_ptr().cast(), &mut len) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    let name = &name[..len as usize];
    let end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
    Ok(String::from_utf8_lossy(&name[..end]).into_owned())
}

fn set_congestion_control(fd: i32, algorithm: &str) -> io::Result<()> {
    // SAFETY: the kernel reads `algorithm.len()` bytes of the name.
    let r = unsafe {
        libc::setsockopt(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, algorithm.as_ptr().cast(), algorithm.len() as libc::socklen_t)
    };
    if r != 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A loopback pair: the accepted end and the dialed end.
    async fn pair() -> (TcpStream, TcpStream) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (dialed, accepted) = tokio::join!(TcpStream::connect(addr), l.accept());
        (accepted.unwrap().0, dialed.unwrap())
    }

    #[tokio::test]
    async fn a_loopback_connection_is_moved_off_bbr_and_any_other_is_left_alone() {
        let (accepted, dialed) = pair().await;
        let before = congestion_control(accepted.as_raw_fd()).unwrap();
        tune(&accepted).unwrap();
        assert!(accepted.nodelay().unwrap());
        let after = congestion_control(accepted.as_raw_fd()).unwrap();
        if before.starts_with("bbr") {
            assert!(LOOPBACK_ALGORITHMS.contains(&after.as_str()), "still {after}");
        } else {
            assert_eq!(after, before, "a machine's choice other than BBR stands");
        }

        // Forced onto BBR where the kernel has it: tuning moves it off.
        if set_congestion_control(dialed.as_raw_fd(), "bbr").is_ok() {
            tune(&dialed).unwrap();
            let now = congestion_control(dialed.as_raw_fd()).unwrap();
            assert!(LOOPBACK_ALGORITHMS.contains(&now.as_str()), "still {now}");
        }
    }

    #[tokio::test]
    async fn a_tls_listener_with_client_cert_auth_hands_out_only_clients_of_its_ca() {
        use futures::StreamExt;
        use crate::tlsinfo::{Side, TlsInfo};
        let dir = tempfile::tempdir().unwrap();
        let (ca, cert, key) = crate::tlsinfo::tests::write_pki(dir.path());
        let info = TlsInfo { side: Side::Peer, cert_file: Some(cert), key_file: Some(key), trusted_ca_file: Some(ca.clone()), client_cert_auth: true };
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri: tonic::transport::Uri = format!("http://{}", l.local_addr().unwrap()).parse().unwrap();
        let mut accepted = Box::pin(accept(l, Some(TlsAcceptor::from(info.server_config().unwrap())), "peer"));

        // A client that trusts the CA but has no certificate of its own: its side of the
        // handshake ends, the listener's refuses it and hands out nothing.
        let mut roots = rustls::RootCertStore::empty();
        use rustls::pki_types::pem::PemObject;
        roots.add(rustls::pki_types::CertificateDer::from_pem_file(&ca).unwrap()).unwrap();
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut anonymous = rustls::ClientConfig::builder_with_provider(provider).with_safe_default_protocol_versions().unwrap().with_root_certificates(roots).with_no_client_auth();
        anonymous.alpn_protocols = vec![b"h2".to_vec()];
        let (refused, next) =
            tokio::join!(dial(uri.clone(), Some(Arc::new(anonymous))), tokio::time::timeout(Duration::from_millis(500), accepted.next()));
        assert!(matches!(refused.unwrap().inner(), Conn::Tls(_)));
        assert!(next.is_err(), "a client without a certificate was handed out");

        // A member's certificate: handed out, past its handshake.
        let (dialed, got) = tokio::join!(dial(uri, Some(info.client_config().unwrap())), accepted.next());
        assert!(matches!(dialed.unwrap().inner(), Conn::Tls(_)));
        let got = got.expect("a connection").expect("accepted");
        let Conn::Tls(t) = &got else { panic!("a plain connection on a TLS listener") };
        assert!(t.get_ref().1.peer_certificates().is_some_and(|c| !c.is_empty()));
    }

    #[tokio::test]
    async fn dial_connects_to_a_peer_url_with_nagle_off() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri: tonic::transport::Uri = format!("http://{}", l.local_addr().unwrap()).parse().unwrap();
        let io = dial(uri, None).await.unwrap();
        let Conn::Plain(s) = io.inner() else { panic!("plain without TLS") };
        assert!(s.nodelay().unwrap());
        let no_port: tonic::transport::Uri = "http://127.0.0.1".parse().unwrap();
        assert_eq!(dial(no_port, None).await.unwrap_err().kind(), io::ErrorKind::InvalidInput);
    }
}
