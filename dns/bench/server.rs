//! The DNS server of `kubelab dns` with an index of N ClusterIP Services fed in-process (no API
//! server), for dns/bench/run.sh: `bench-server <listen> <services>`. It serves until SIGTERM
//! or Ctrl-C, and stops by itself after ten minutes at most.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use dns::index::Index;
use dns::object::Port;
use dns::object::service::Service;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let listen: std::net::SocketAddr = args.next().ok_or("usage: bench-server <listen> <services>")?.parse()?;
    let count: u32 = args.next().ok_or("usage: bench-server <listen> <services>")?.parse()?;
    let mut index = Index::default();
    for i in 0..count {
        index.upsert_service(Service {
            namespace: "bench".into(),
            name: format!("svc-{i}"),
            cluster_ips: vec![std::net::Ipv4Addr::from(0x0a60_0000 + i + 1).into()],
            headless: false,
            external_name: None,
            ports: vec![Port { name: "http".into(), protocol: "tcp".into(), port: 80 }],
        });
    }
    let listeners = dns::Listeners::bind(listen, "127.0.0.1:0".parse()?).await?;
    let (_ready, ready_rx) = tokio::sync::watch::channel(true);
    let opts = dns::Options { upstreams: vec![], ..Default::default() };
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let stop = async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
            _ = tokio::time::sleep(Duration::from_secs(600)) => {}
        }
    };
    eprintln!("bench-server: {count} services on {}", listeners.dns_addr()?);
    dns::serve(&opts, listeners, Arc::new(RwLock::new(index)), ready_rx, stop).await?;
    Ok(())
}
