//! A TCP proxy mesh for network partitions between store members.
//!
//! Member `i` reaches member `j` through its own proxy `i→j` (member i's
//! `--initial-cluster` names j by that proxy's address), so each direction of each
//! member pair can be cut on its own. Cutting a proxy drops its live connections and
//! closes every new one as soon as it is accepted — to the member it looks like a peer
//! that is down.
//!
//! The mesh runs on its own thread with its own tokio runtime: it keeps forwarding
//! even while a test's runtime is busy, and outlives member restarts.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use tokio::io::copy_bidirectional;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::ports::Port;

#[derive(Clone, Default)]
struct Cuts {
    members: BTreeSet<usize>,
    links: BTreeSet<(usize, usize)>,
}

struct Link {
    from: usize,
    to: usize,
    listen: Port,
    open: watch::Sender<bool>,
}

/// Proxies for every ordered pair of members.
pub struct ProxyMesh {
    links: Vec<Link>,
    /// Members currently cut off, and single directions cut (from, to). A std Mutex: held only
    /// to flip a few flags, never across `.await`.
    partitioned: Mutex<Cuts>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ProxyMesh {
    /// Starts proxies for `n` members; `peer_port[j]` is where member j really listens.
    pub fn start(peer_ports: &[u16]) -> anyhow::Result<Self> {
        let n = peer_ports.len();
        let mut links = Vec::new();
        let mut listeners = Vec::new();
        for from in 0..n {
            for (to, &to_port) in peer_ports.iter().enumerate() {
                if from == to {
                    continue;
                }
                let listen = crate::ports::reserve()?;
                let l = std::net::TcpListener::bind(("127.0.0.1", listen.port))?;
                l.set_nonblocking(true)?;
                let (open, open_rx) = watch::channel(true);
                let target: SocketAddr = ([127, 0, 0, 1], to_port).into();
                listeners.push((l, target, open_rx));
                links.push(Link {
                    from,
                    to,
                    listen,
                    open,
                });
            }
        }
        let (shutdown, shutdown_rx) = tokio::sync::oneshot::channel();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let thread = std::thread::Builder::new()
            .name("e2e-proxy".into())
            .spawn(move || {
                rt.block_on(async move {
                    for (l, target, open_rx) in listeners {
                        match TcpListener::from_std(l) {
                            Ok(l) => {
                                tokio::spawn(serve(l, target, open_rx));
                            }
                            Err(e) => eprintln!("[e2e] proxy listener: {e}"),
                        }
                    }
                    let _ = shutdown_rx.await;
                });
            })?;
        Ok(Self {
            links,
            partitioned: Mutex::new(Cuts::default()),
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// The port member `from` uses to reach member `to`.
    pub fn port(&self, from: usize, to: usize) -> u16 {
        self.links
            .iter()
            .find(|l| l.from == from && l.to == to)
            .map(|l| l.listen.port)
            .expect("no proxy for this member pair")
    }

    /// Cuts member `i` off: proxies i→* and *→i.
    pub fn partition(&self, i: usize) {
        self.cuts().members.insert(i);
        self.apply();
    }

    /// Cuts what member `i` sends (proxies i→*), not what it receives.
    pub fn cut_from(&self, i: usize) {
        let targets: Vec<(usize, usize)> = self.links.iter().filter(|l| l.from == i).map(|l| (l.from, l.to)).collect();
        self.cuts().links.extend(targets);
        self.apply();
    }

    /// Cuts what member `i` receives (proxies *→i), not what it sends.
    pub fn cut_to(&self, i: usize) {
        let sources: Vec<(usize, usize)> = self.links.iter().filter(|l| l.to == i).map(|l| (l.from, l.to)).collect();
        self.cuts().links.extend(sources);
        self.apply();
    }

    /// Undoes [`partition`](Self::partition) and the one-way cuts for member `i`.
    pub fn heal(&self, i: usize) {
        {
            let mut c = self.cuts();
            c.members.remove(&i);
            c.links.retain(|(from, to)| *from != i && *to != i);
        }
        self.apply();
    }

    /// Heals every member.
    pub fn heal_all(&self) {
        *self.cuts() = Cuts::default();
        self.apply();
    }

    fn cuts(&self) -> std::sync::MutexGuard<'_, Cuts> {
        self.partitioned.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn apply(&self) {
        let cut = self.cuts().clone();
        for l in &self.links {
            let open = !cut.members.contains(&l.from) && !cut.members.contains(&l.to) && !cut.links.contains(&(l.from, l.to));
            l.open.send_replace(open);
        }
    }
}

impl Drop for ProxyMesh {
    fn drop(&mut self) {
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn serve(listener: TcpListener, target: SocketAddr, open: watch::Receiver<bool>) {
    loop {
        let Ok((inbound, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        if !*open.borrow() {
            drop(inbound); // refused: closed right after accept
            continue;
        }
        tokio::spawn(forward(inbound, target, open.clone()));
    }
}

async fn forward(mut inbound: TcpStream, target: SocketAddr, mut open: watch::Receiver<bool>) {
    let _ = inbound.set_nodelay(true);
    let Ok(Ok(mut outbound)) =
        tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(target)).await
    else {
        return; // target down: the caller sees its connection closed
    };
    let _ = outbound.set_nodelay(true);
    tokio::select! {
        _ = copy_bidirectional(&mut inbound, &mut outbound) => {}
        _ = open.wait_for(|open| !*open) => {}
    }
    // Both streams drop here: the live connection is cut.
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// An echo server standing in for a member's peer port.
    async fn echo() -> (u16, tokio::task::JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = l.local_addr().expect("addr").port();
        let h = tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        (port, h)
    }

    async fn roundtrip(port: u16) -> std::io::Result<()> {
        let mut s = TcpStream::connect(("127.0.0.1", port)).await?;
        s.write_all(b"ping").await?;
        let mut buf = [0u8; 4];
        tokio::time::timeout(Duration::from_secs(2), s.read_exact(&mut buf))
            .await
            .map_err(|_| std::io::Error::other("timeout"))??;
        assert_eq!(&buf, b"ping");
        Ok(())
    }

    #[tokio::test]
    async fn partition_cuts_live_and_new_connections_and_heal_restores() {
        let (p0, _a) = echo().await;
        let (p1, _b) = echo().await;
        let (p2, _c) = echo().await;
        let mesh = ProxyMesh::start(&[p0, p1, p2]).expect("mesh");
        roundtrip(mesh.port(0, 1))
            .await
            .expect("0→1 before the partition");

        let mut live = TcpStream::connect(("127.0.0.1", mesh.port(2, 0)))
            .await
            .expect("connect 2→0");
        live.write_all(b"ping").await.expect("write");
        let mut buf = [0u8; 4];
        live.read_exact(&mut buf).await.expect("echo");

        mesh.partition(0);
        // The live connection into member 0 is cut: EOF or reset.
        let n = tokio::time::timeout(Duration::from_secs(2), live.read(&mut buf))
            .await
            .expect("cut promptly");
        assert!(
            matches!(n, Ok(0) | Err(_)),
            "live connection survived the partition: {n:?}"
        );
        assert!(roundtrip(mesh.port(0, 1)).await.is_err(), "0→1 must be cut");
        assert!(roundtrip(mesh.port(1, 0)).await.is_err(), "1→0 must be cut");
        roundtrip(mesh.port(1, 2)).await.expect("1→2 is untouched");
        roundtrip(mesh.port(2, 1)).await.expect("2→1 is untouched");

        mesh.heal(0);
        roundtrip(mesh.port(0, 1)).await.expect("0→1 after heal");
        roundtrip(mesh.port(2, 0)).await.expect("2→0 after heal");
    }
}
