//! `kubelab dns`: connect, watch, serve (CoreDNS's main with the default Corefile).

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::forward::{Forwarder, parse_resolv_conf};
use crate::index::SharedIndex;
use crate::kubernetes::Zone;
use crate::metrics::Metrics;
use crate::server::Handler;

/// How long an idle TCP client may keep its connection (CoreDNS: 10 s read timeout).
pub const TCP_IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// What `kubelab dns` takes (see its flags in src/main.rs).
#[derive(Clone, Debug)]
pub struct Options {
    /// UDP and TCP, one address (`--listen`, default 0.0.0.0:53).
    pub listen: SocketAddr,
    /// `/health`, `/ready` and `/metrics` (`--health-listen`, default 127.0.0.1:8181).
    pub health_listen: SocketAddr,
    /// `--cluster-domain`, default cluster.local.
    pub cluster_domain: String,
    /// `--ttl`, seconds, default 5 (CoreDNS's kubernetes plugin default).
    pub ttl: u32,
    /// `--resolv-conf`: where the upstream resolvers come from.
    pub resolv_conf: PathBuf,
    /// `--upstream`: resolvers with their ports, instead of the resolv.conf's (CoreDNS's
    /// `forward . <to>...`).
    pub upstreams: Vec<SocketAddr>,
    /// How long each upstream has to answer.
    pub upstream_timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            listen: ([0, 0, 0, 0], 53).into(),
            health_listen: ([127, 0, 0, 1], 8181).into(),
            cluster_domain: crate::DEFAULT_CLUSTER_DOMAIN.into(),
            ttl: crate::DEFAULT_TTL,
            resolv_conf: "/etc/resolv.conf".into(),
            upstreams: vec![],
            upstream_timeout: crate::forward::DEFAULT_UPSTREAM_TIMEOUT,
        }
    }
}

/// The bound sockets: the UDP socket and TCP listener share a port.
pub struct Listeners {
    pub udp: tokio::net::UdpSocket,
    pub tcp: tokio::net::TcpListener,
    pub health: tokio::net::TcpListener,
}

impl Listeners {
    /// Binds `listen` for UDP and TCP and `health_listen`. Port 0 picks a port free for both.
    pub async fn bind(listen: SocketAddr, health_listen: SocketAddr) -> Result<Listeners> {
        let health = tokio::net::TcpListener::bind(health_listen).await.map_err(|e| Error::io(format!("bind {health_listen}"), e))?;
        let mut tries = 0;
        loop {
            let tcp = tokio::net::TcpListener::bind(listen).await.map_err(|e| Error::io(format!("bind tcp {listen}"), e))?;
            let addr = tcp.local_addr().map_err(|e| Error::io("tcp local address", e))?;
            match tokio::net::UdpSocket::bind(addr).await {
                Ok(udp) => return Ok(Listeners { udp, tcp, health }),
                // Port 0 gave a TCP port whose UDP twin is taken: try another.
                Err(_) if listen.port() == 0 && tries < 20 => tries += 1,
                Err(e) => return Err(Error::io(format!("bind udp {addr}"), e)),
            }
        }
    }

    pub fn dns_addr(&self) -> Result<SocketAddr> {
        self.tcp.local_addr().map_err(|e| Error::io("local address", e))
    }

    pub fn health_addr(&self) -> Result<SocketAddr> {
        self.health.local_addr().map_err(|e| Error::io("local address", e))
    }
}

/// Runs `kubelab dns` until `shutdown`: the watches of the API server at `connection` feed the
/// index the server answers from.
pub async fn run(opts: Options, connection: client::Connection, shutdown: impl Future<Output = ()>) -> Result<()> {
    let client = client::client_as(&connection, "kubelab-dns").await?;
    let listeners = Listeners::bind(opts.listen, opts.health_listen).await?;
    let index = SharedIndex::default();
    let (synced_tx, synced_rx) = tokio::sync::watch::channel(false);
    let watches = tokio::spawn(crate::controller::run(client, index.clone(), synced_tx));
    let result = serve(&opts, listeners, index, synced_rx, shutdown).await;
    watches.abort();
    result
}

/// Serves DNS from `index` on `listeners` until `shutdown`; `ready` says when `/ready` answers
/// OK. The in-process seam: [`run`] feeds the index from the API server, a test by hand.
pub async fn serve(
    opts: &Options,
    listeners: Listeners,
    index: SharedIndex,
    ready: tokio::sync::watch::Receiver<bool>,
    shutdown: impl Future<Output = ()>,
) -> Result<()> {
    let zone = Zone::new(&opts.cluster_domain, opts.ttl).map_err(|e| Error::Config(format!("--cluster-domain {:?}: {e}", opts.cluster_domain)))?;
    let upstreams = if opts.upstreams.is_empty() {
        let resolv = tokio::fs::read_to_string(&opts.resolv_conf).await.unwrap_or_else(|e| {
            tracing::warn!(target: "dns::forward", path = %opts.resolv_conf.display(), error = %e, "cannot read; names outside the cluster get SERVFAIL");
            String::new()
        });
        parse_resolv_conf(&resolv)
    } else {
        opts.upstreams.clone()
    };
    let forwarder = Forwarder::new(upstreams, opts.upstream_timeout);
    let metrics = Metrics::new();
    let dns_addr = listeners.dns_addr()?;
    let health_addr = listeners.health_addr()?;
    tracing::info!(
        target: "dns",
        listen = %dns_addr,
        health = %health_addr,
        domain = %zone.domain(),
        upstreams = ?forwarder.upstreams(),
        "serving"
    );
    let health = tokio::spawn(crate::metrics::serve(listeners.health, metrics.clone(), ready));
    let handler = Handler { zone, index, forwarder, metrics: Arc::clone(&metrics) };
    let readers = std::thread::available_parallelism().map_or(1, usize::from);
    let udp = crate::udp::Readers::start(listeners.udp, readers, &handler);
    let mut server = hickory_server::Server::new(handler);
    server.register_listener(listeners.tcp, TCP_IDLE_TIMEOUT, 64);
    shutdown.await;
    health.abort();
    udp.stop();
    server.shutdown_gracefully().await.map_err(|e| Error::Serve(e.to_string()))?;
    Ok(())
}
