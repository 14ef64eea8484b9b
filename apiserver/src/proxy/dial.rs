//! Mirrors k8s.io/apimachinery/pkg/util/proxy/dial.go: a connection of the API server's own to a
//! backend, plain or over TLS, for the upgrades it splices ([`super::upgradeaware::proxy`],
//! [`super::streamtunnel::dial`]).
//!
//! 1. Dial `host:port` (at most [`DIAL_TIMEOUT`]).
//! 2. With a TLS configuration, shake hands with the host's name as the server name, presenting
//!    the configuration's client certificate; the configuration decides whether the backend's
//!    certificate is verified (the kubelet client's `--kubelet-certificate-authority`).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::error::{Error, Result};

/// Dialling a backend, TLS handshake included.
pub const DIAL_TIMEOUT: Duration = Duration::from_secs(10);

/// How a backend is reached: plain TCP, or TLS with a client configuration.
#[derive(Clone)]
pub struct Dialer {
    tls: Option<TlsConnector>,
}

impl Dialer {
    pub fn plain() -> Dialer {
        Dialer { tls: None }
    }

    pub fn tls(config: Arc<rustls::ClientConfig>) -> Dialer {
        Dialer { tls: Some(TlsConnector::from(config)) }
    }

    /// Steps 1 and 2: a connection to `authority` (`host:port`, an IPv6 host in brackets).
    /// Failures read as Kubernetes' `error dialing backend: …`.
    pub async fn dial(&self, authority: &str) -> Result<Stream> {
        let dial_err = |e: io::Error| Error::Internal(format!("error dialing backend: {e}"));
        let connect = async {
            // Step 1.
            let tcp = TcpStream::connect(authority).await?;
            tcp.set_nodelay(true)?;
            // Step 2.
            let Some(tls) = &self.tls else { return Ok(Stream::Plain(tcp)) };
            let host = authority.rsplit_once(':').map_or(authority, |(h, _)| h).trim_start_matches('[').trim_end_matches(']');
            let name = ServerName::try_from(host.to_string()).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{host}: {e}")))?;
            Ok(Stream::Tls(Box::new(tls.connect(name, tcp).await?)))
        };
        tokio::time::timeout(DIAL_TIMEOUT, connect)
            .await
            .map_err(|_| Error::Internal(format!("error dialing backend: timed out connecting to {authority}")))?
            .map_err(dial_err)
    }
}

/// A dialled connection.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Stream {
    fn io(self: Pin<&mut Self>) -> Pin<&mut (dyn AsyncReadWrite + Send)> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s),
            Stream::Tls(s) => Pin::new(s.as_mut()),
        }
    }
}

trait AsyncReadWrite: AsyncRead + AsyncWrite + Unpin {}
impl<T: AsyncRead + AsyncWrite + Unpin> AsyncReadWrite for T {}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        self.io().poll_read(cx, buf)
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.io().poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.io().poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.io().poll_shutdown(cx)
    }
}
