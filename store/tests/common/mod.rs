//! The in-process member the store's integration tests share: its flags, `store::run` on a tokio
//! task, a client once it answers, and a clean stop. Each test file takes what it needs.
#![allow(dead_code)]

use std::time::Duration;

use etcd_client::Client;
use tokio::sync::oneshot;

/// A free port on loopback.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Two free ports for a member's client and peer listeners: both held until both are chosen, so
/// the kernel cannot hand out the same one twice (it did: the peer listener then failed with
/// "Address already in use").
pub fn free_ports() -> (u16, u16) {
    let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let b = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    (a.local_addr().unwrap().port(), b.local_addr().unwrap().port())
}

/// A member's flags: client URL on `client`, `peers` its `--initial-cluster` (name, peer URL; its
/// own among them), `existing` its `--initial-cluster-state`, `token` the cluster token.
pub fn config(name: &str, dir: &std::path::Path, client: u16, peers: &[(&str, String)], existing: bool, token: &str) -> store::Config {
    let initial: Vec<String> = peers.iter().map(|(n, u)| format!("{n}={u}")).collect();
    let me = peers.iter().find(|(n, _)| *n == name).expect("the member among its peers").1.clone();
    store::Config {
        name: name.into(),
        data_dir: dir.to_path_buf(),
        listen_client_urls: vec![format!("http://127.0.0.1:{client}")],
        advertise_client_urls: vec![format!("http://127.0.0.1:{client}")],
        listen_peer_urls: vec![me],
        initial_cluster: store::config::parse_initial_cluster(&initial.join(","), token).unwrap(),
        new_cluster: !existing,
        cluster_token: token.into(),
        snapshot_count: 1000,
        max_request_bytes: 1536 * 1024,
        listen_metrics_urls: vec![],
        heartbeat_interval: Duration::from_millis(50),
        election_timeout: Duration::from_millis(500),
        watch_progress_notify_interval: Duration::from_secs(600),
        client_tls_info: store::tlsinfo::TlsInfo::default(),
        peer_tls_info: store::tlsinfo::TlsInfo::peer(),
        quota_backend_bytes: 0,
        auto_compaction_mode: store::config::DEFAULT_AUTO_COMPACTION_MODE.into(),
        auto_compaction_retention: store::config::DEFAULT_AUTO_COMPACTION_RETENTION.into(),
    }
}

/// A one-member cluster's flags, on free ports.
pub fn single(name: &str, dir: &std::path::Path, token: &str) -> store::Config {
    let (client, peer) = free_ports();
    config(name, dir, client, &[(name, format!("http://127.0.0.1:{peer}"))], false, token)
}

pub struct Member {
    pub endpoint: String,
    stop: Option<oneshot::Sender<()>>,
    pub task: tokio::task::JoinHandle<store::Result<()>>,
}

/// Runs a member until [`Member::stop`].
pub fn start(cfg: store::Config) -> Member {
    let endpoint = cfg.advertise_client_urls[0].clone();
    let (tx, rx) = oneshot::channel();
    let task = tokio::spawn(store::run(cfg, async move {
        let _ = rx.await;
    }));
    Member { endpoint, stop: Some(tx), task }
}

/// What a member must answer before [`Member::client_when`] hands out its client.
pub enum Ready {
    /// Its port takes a connection.
    Listening,
    /// It serves a linearizable read.
    Reads,
    /// It commits a write (the key `ready`).
    Writes,
}

impl Member {
    /// A client, once the member answers as `ready` says (5 s at most).
    pub async fn client_when(&mut self, ready: Ready) -> Client {
        for _ in 0..100 {
            if let Ok(mut c) = Client::connect([self.endpoint.as_str()], None).await {
                let ok = match ready {
                    Ready::Listening => true,
                    Ready::Reads => c.get("ready", None).await.is_ok(),
                    Ready::Writes => c.put("ready", "1", None).await.is_ok(),
                };
                if ok {
                    return c;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if self.task.is_finished() {
            panic!("store at {} stopped: {:?}", self.endpoint, (&mut self.task).await);
        }
        panic!("store at {} never became ready", self.endpoint);
    }

    /// Stops the member and waits until it has, failing on an error.
    pub async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.task.await.unwrap().unwrap();
    }
}
