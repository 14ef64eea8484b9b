//! Mirrors k8s.io/apiserver/pkg/server/secure_serving.go (and deprecated_insecure_serving.go):
//! the server's two listeners and what happens to a connection before HTTP sees it.
//!
//! 1. The secure port (`--secure-port`, 6443) speaks TLS with the serving certificate
//!    (`--tls-cert-file`, `--tls-private-key-file`), asking for a client certificate signed by
//!    `--client-ca-file` but taking none too (Go's `RequestClientCert`); the insecure port
//!    (`--insecure-port`, off unless given) speaks plain HTTP.
//! 2. A TLS connection's client certificate is verified once, when the connection is made, and
//!    what it says is kept with the connection ([`Connection`]) for the authentication filter.
//! 3. The first request line is read (into [`Conn`]'s buffer, which then replays it): kubectl's
//!    SPDY port-forward is taken off here (see `registry/core/pod/portforward.rs`), everything
//!    else goes to actix-web.

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

use crate::authentication::request::x509::Verifier;
use crate::authentication::request::{ClientCertificate, Connection};

/// How long a TLS handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a new connection may take to send its request line before it goes to actix anyway.
const REQUEST_LINE_TIMEOUT: Duration = Duration::from_secs(10);
/// How much of a connection's start is read to find its request line.
const REQUEST_LINE_MAX: usize = 2048;

/// What the secure port serves with.
#[derive(Clone)]
pub struct Tls {
    acceptor: TlsAcceptor,
    client_ca: Option<Verifier>,
}

impl Tls {
    /// From the serving certificate and key files and the client CA, if any. HTTP/1.1 only:
    /// kubectl's exec, attach and port-forward upgrade an HTTP/1.1 connection.
    pub fn new(cert_file: &Path, key_file: &Path, client_ca: Option<Verifier>) -> Result<Tls, String> {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert_file)
            .and_then(|certs| certs.collect::<Result<_, _>>())
            .map_err(|e| format!("--tls-cert-file {}: {e}", cert_file.display()))?;
        if chain.is_empty() {
            return Err(format!("--tls-cert-file {}: no certificate in it", cert_file.display()));
        }
        let key = PrivateKeyDer::from_pem_file(key_file).map_err(|e| format!("--tls-private-key-file {}: {e}", key_file.display()))?;
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let verifier = match &client_ca {
            Some(ca) => ca.handshake_verifier(),
            None => WebPkiClientVerifier::no_client_auth(),
        };
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .map_err(|e| format!("--tls-cert-file {} with --tls-private-key-file {}: {e}", cert_file.display(), key_file.display()))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Tls { acceptor: TlsAcceptor::from(Arc::new(config)), client_ca })
    }
}

/// A connection as the server accepted it: its stream, what it says about the client, and the
/// bytes already read from it, which reads give back first.
pub struct Conn {
    io: Io,
    read: BytesMut,
    pub connection: Connection,
}

enum Io {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

impl Conn {
    /// Steps 1 and 2: a new connection on the insecure port (`tls` None) or the secure one.
    pub async fn accept(tcp: TcpStream, tls: Option<&Tls>) -> io::Result<Conn> {
        let _ = tcp.set_nodelay(true);
        let Some(tls) = tls else {
            return Ok(Conn { io: Io::Plain(tcp), read: BytesMut::new(), connection: Connection::Insecure });
        };
        let stream = tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.acceptor.accept(tcp))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))??;
        let certificate = match (stream.get_ref().1.peer_certificates(), &tls.client_ca) {
            (Some(chain), Some(ca)) if !chain.is_empty() => match ca.authenticate_chain(chain) {
                Ok(Some(user)) => ClientCertificate::Verified(user),
                Ok(None) => ClientCertificate::None,
                Err(reason) => ClientCertificate::Rejected(reason),
            },
            _ => ClientCertificate::None,
        };
        Ok(Conn { io: Io::Tls(Box::new(stream)), read: BytesMut::new(), connection: Connection::Tls(certificate) })
    }

    /// Step 3: reads until the first request line is in (or the client pauses, or sends more
    /// than a request line's worth) and returns what was read; reads give it back afterwards.
    pub async fn request_line(&mut self) -> &[u8] {
        let read = async {
            let mut buf = [0u8; REQUEST_LINE_MAX];
            while self.read.len() < REQUEST_LINE_MAX && !self.read.windows(2).any(|w| w == b"\r\n") {
                let want = REQUEST_LINE_MAX - self.read.len();
                match self.io_mut().read(&mut buf[..want]).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => self.read.extend_from_slice(&buf[..n]),
                }
            }
        };
        let _ = tokio::time::timeout(REQUEST_LINE_TIMEOUT, read).await;
        &self.read
    }

    fn io_mut(&mut self) -> Pin<&mut dyn AsyncReadWrite> {
        match &mut self.io {
            Io::Plain(s) => Pin::new(s),
            Io::Tls(s) => Pin::new(s.as_mut()),
        }
    }
}

trait AsyncReadWrite: AsyncRead + AsyncWrite + Unpin {}
impl<T: AsyncRead + AsyncWrite + Unpin> AsyncReadWrite for T {}

impl AsyncRead for Conn {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.read.is_empty() {
            let n = this.read.len().min(buf.remaining());
            buf.put_slice(&this.read[..n]);
            this.read.advance(n);
            return Poll::Ready(Ok(()));
        }
        this.io_mut().poll_read(cx, buf)
    }
}

impl AsyncWrite for Conn {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.get_mut().io_mut().poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().io_mut().poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().io_mut().poll_shutdown(cx)
    }

    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        self.get_mut().io_mut().poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        match &self.io {
            Io::Plain(s) => s.is_write_vectored(),
            Io::Tls(s) => s.is_write_vectored(),
        }
    }
}
