//! The member's configuration from etcd-named flags, and the identities derived from it.
//!
//! A member's id is a hash of its name and the cluster token, and the cluster's id a hash of the
//! sorted member ids: both stay the same whatever URLs the members are reached at. The data
//! directory records both; starting on a data directory of another member or another cluster is
//! refused (etcd's "member ... has already been bootstrapped" class of errors).
//!
//! A URL's scheme decides TLS, as in etcd: `https://` client URLs are served with
//! [`Config::client_tls_info`], `https://` peer URLs (listened on or dialed) with
//! [`Config::peer_tls_info`]; an `https://` URL without a certificate and key is refused with
//! etcd's error, and `http://` stays plain whatever certificates are given.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::tlsinfo::TlsInfo;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    pub name: String,
    pub id: u64,
    pub peer_urls: Vec<String>,
}

#[derive(Clone, Debug)]
pub struct Config {
    pub name: String,
    pub data_dir: PathBuf,
    pub listen_client_urls: Vec<String>,
    pub advertise_client_urls: Vec<String>,
    pub listen_peer_urls: Vec<String>,
    pub initial_cluster: Vec<Peer>,
    /// `true` for `--initial-cluster-state new`.
    pub new_cluster: bool,
    pub cluster_token: String,
    pub snapshot_count: u64,
    pub max_request_bytes: usize,
    pub listen_metrics_urls: Vec<String>,
    pub heartbeat_interval: Duration,
    pub election_timeout: Duration,
    /// Interval of progress notifications to watches that ask for them.
    pub watch_progress_notify_interval: Duration,
    /// `--cert-file`, `--key-file`, `--trusted-ca-file`, `--client-cert-auth`: the client port.
    pub client_tls_info: TlsInfo,
    /// `--peer-cert-file`, `--peer-key-file`, `--peer-trusted-ca-file`,
    /// `--peer-client-cert-auth`: the peer port and the connections to the peers.
    pub peer_tls_info: TlsInfo,
    /// `--quota-backend-bytes`: past this size the member raises the NOSPACE alarm and refuses
    /// writes that grow the database; 0 is etcd's default (2 GiB), a negative value no quota
    /// ([`crate::quota`]).
    pub quota_backend_bytes: i64,
    /// `--auto-compaction-mode`: `periodic` or `revision` ([`crate::v3compactor`]).
    pub auto_compaction_mode: String,
    /// `--auto-compaction-retention`: for `periodic`, a duration (`30m`, `1h30m`) or a bare
    /// number of hours; for `revision`, how many revisions to keep. `0` turns it off.
    pub auto_compaction_retention: String,
}

/// etcd's defaults for the maintenance flags: the default quota, auto-compaction off.
pub const DEFAULT_AUTO_COMPACTION_MODE: &str = "periodic";
pub const DEFAULT_AUTO_COMPACTION_RETENTION: &str = "0";

/// FNV-1a: a stable hash (std's `DefaultHasher` may change between Rust releases).
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for p in parts {
        for b in p.iter().chain(b"\0") {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x100000001b3);
        }
    }
    h.max(1) // raft reserves 0 for "none"
}

pub fn member_id(name: &str, token: &str) -> u64 {
    fnv1a(&[name.as_bytes(), token.as_bytes()])
}

/// The id of the cluster `members` found: a hash of their sorted member ids.
pub fn cluster_id(members: &[Peer]) -> u64 {
    let mut ids: Vec<u64> = members.iter().map(|p| p.id).collect();
    ids.sort_unstable();
    let bytes: Vec<[u8; 8]> = ids.iter().map(|i| i.to_be_bytes()).collect();
    let parts: Vec<&[u8]> = bytes.iter().map(|b| b.as_slice()).collect();
    fnv1a(&parts)
}

impl Config {
    pub fn member_id(&self) -> u64 {
        member_id(&self.name, &self.cluster_token)
    }

    pub fn cluster_id(&self) -> u64 {
        cluster_id(&self.initial_cluster)
    }

    pub fn voters(&self) -> Vec<u64> {
        self.initial_cluster.iter().map(|p| p.id).collect()
    }

    pub fn peers(&self) -> impl Iterator<Item = &Peer> {
        let me = self.member_id();
        self.initial_cluster.iter().filter(move |p| p.id != me)
    }

    /// Checks the flags hang together.
    pub fn validate(&self) -> Result<()> {
        if self.name.is_empty() {
            return Err(Error::Config("--name must not be empty".into()));
        }
        if !self.initial_cluster.iter().any(|p| p.name == self.name) {
            return Err(Error::Config(format!(
                "--initial-cluster has no member named {:?} (the --name of this member)",
                self.name
            )));
        }
        let mut names: Vec<&str> = self.initial_cluster.iter().map(|p| p.name.as_str()).collect();
        names.sort_unstable();
        if names.windows(2).any(|w| w[0] == w[1]) {
            return Err(Error::Config("--initial-cluster names a member twice".into()));
        }
        for u in self.listen_client_urls.iter().chain(&self.listen_peer_urls).chain(&self.listen_metrics_urls) {
            parse_url(u)?;
        }
        // etcd's errors for an https URL without a certificate (embed/etcd.go and the peer
        // listener of client/pkg/transport).
        for u in self.listen_client_urls.iter().chain(&self.advertise_client_urls) {
            if is_https(u) && self.client_tls_info.is_empty() {
                return Err(Error::Config(format!(
                    "TLS key/cert (--cert-file, --key-file) must be provided for client url {u} with HTTPS scheme"
                )));
            }
        }
        let peer_urls = self.initial_cluster.iter().flat_map(|p| &p.peer_urls);
        for u in self.listen_peer_urls.iter().chain(peer_urls) {
            if is_https(u) && self.peer_tls_info.is_empty() {
                let host = u.trim_start_matches("https://").trim_end_matches('/');
                return Err(Error::Config(format!("cannot listen on TLS for {host}: KeyFile and CertFile are not presented")));
            }
        }
        for u in &self.listen_metrics_urls {
            if is_https(u) {
                return Err(Error::Config(format!("{u:?}: --listen-metrics-urls are served over plain http only")));
            }
        }
        if self.snapshot_count == 0 {
            return Err(Error::Config("--snapshot-count must be at least 1".into()));
        }
        if self.election_timeout < self.heartbeat_interval * 5 {
            return Err(Error::Config("--election-timeout must be at least 5 times --heartbeat-interval".into()));
        }
        AutoCompaction::parse(&self.auto_compaction_mode, &self.auto_compaction_retention)?;
        Ok(())
    }
}

/// Parses `name=url,name=url,...` (a name may appear with several URLs, as in etcd).
pub fn parse_initial_cluster(s: &str, token: &str) -> Result<Vec<Peer>> {
    let mut peers: Vec<Peer> = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (name, url) = item
            .split_once('=')
            .ok_or_else(|| Error::Config(format!("--initial-cluster item {item:?} is not name=url")))?;
        parse_url(url)?;
        match peers.iter_mut().find(|p| p.name == name) {
            Some(p) => p.peer_urls.push(url.to_string()),
            None => peers.push(Peer { name: name.to_string(), id: member_id(name, token), peer_urls: vec![url.to_string()] }),
        }
    }
    if peers.is_empty() {
        return Err(Error::Config("--initial-cluster is empty".into()));
    }
    Ok(peers)
}

/// Whether a URL asks for TLS.
pub fn is_https(url: &str) -> bool {
    url.starts_with("https://")
}

/// Parses an `http://host:port` or `https://host:port` URL into a socket address (names are
/// resolved).
pub fn parse_url(url: &str) -> Result<SocketAddr> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or_else(|| Error::Config(format!("{url:?}: only http:// and https:// URLs are supported")))?;
    let hostport = rest.trim_end_matches('/');
    use std::net::ToSocketAddrs;
    hostport
        .to_socket_addrs()
        .map_err(|e| Error::Config(format!("{url:?}: {e}")))?
        .next()
        .ok_or_else(|| Error::Config(format!("{url:?}: no address")))
}

pub fn split_urls(s: &str) -> Vec<String> {
    s.split(',').map(str::trim).filter(|u| !u.is_empty()).map(String::from).collect()
}


// `--auto-compaction-mode` and `--auto-compaction-retention`, parsed as etcd's embed config
// parses them; carried out by [`crate::v3compactor`].

/// etcd's `CompactorModePeriodic` and `CompactorModeRevision`.
pub const MODE_PERIODIC: &str = "periodic";
pub const MODE_REVISION: &str = "revision";
/// What `--auto-compaction-mode` and `--auto-compaction-retention` ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutoCompaction {
    Periodic(Duration),
    Revision(i64),
}

impl AutoCompaction {
    /// Parses the two flags as etcd's `parseCompactionRetention` does: a bare number is hours
    /// (periodic) or revisions (revision), anything else a Go duration. `None`: retention 0, off.
    pub fn parse(mode: &str, retention: &str) -> Result<Option<Self>> {
        if mode != MODE_PERIODIC && mode != MODE_REVISION {
            return Err(Error::Config(format!("unknown auto-compaction-mode {mode:?}")));
        }
        let parsed = match retention.parse::<i64>() {
            Ok(n) if n >= 0 => match mode {
                MODE_REVISION => Self::Revision(n),
                _ => Self::Periodic(Duration::from_secs(n as u64 * 3600)),
            },
            _ => {
                let d = parse_go_duration(retention)
                    .map_err(|e| Error::Config(format!("error parsing CompactionRetention: {e}")))?;
                match mode {
                    // etcd reads a duration given to revision mode as nanoseconds: a count.
                    MODE_REVISION => Self::Revision(d.as_nanos() as i64),
                    _ => Self::Periodic(d),
                }
            }
        };
        Ok(match parsed {
            Self::Periodic(d) if d.is_zero() => None,
            Self::Revision(0) => None,
            p => Some(p),
        })
    }
}

/// Go's `time.ParseDuration`: a sequence of decimal numbers with units (`1h30m`, `1.5h`, `300ms`).
pub fn parse_go_duration(s: &str) -> std::result::Result<Duration, String> {
    let invalid = || format!("time: invalid duration {s:?}");
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let mut rest = s;
    let mut total = 0f64;
    if rest.is_empty() {
        return Err(invalid());
    }
    while !rest.is_empty() {
        let num_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(|| format!("time: missing unit in duration {s:?}"))?;
        let n: f64 = rest[..num_end].parse().map_err(|_| invalid())?;
        rest = &rest[num_end..];
        let unit_end = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let unit = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            u => return Err(format!("time: unknown unit {u:?} in duration {s:?}")),
        };
        total += n * unit;
        rest = &rest[unit_end..];
    }
    Ok(Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_depend_on_names_and_token_not_urls() {
        let a = parse_initial_cluster("a=http://127.0.0.1:1,b=http://127.0.0.1:2", "t").unwrap();
        let b = parse_initial_cluster("a=http://127.0.0.1:7,b=http://127.0.0.1:8", "t").unwrap();
        assert_eq!(a.iter().map(|p| p.id).collect::<Vec<_>>(), b.iter().map(|p| p.id).collect::<Vec<_>>());
        assert_ne!(member_id("a", "t"), member_id("a", "u"));
        assert!(parse_initial_cluster("a:http://x", "t").is_err());
        assert!(parse_initial_cluster("a=unix://x", "t").is_err());
        assert!(parse_initial_cluster("a=https://127.0.0.1:1", "t").is_ok());
    }

    fn config(client: &str, peer: &str) -> Config {
        Config {
            name: "a".into(),
            data_dir: PathBuf::from("unused"),
            listen_client_urls: vec![client.into()],
            advertise_client_urls: vec![client.into()],
            listen_peer_urls: vec![peer.into()],
            initial_cluster: parse_initial_cluster(&format!("a={peer}"), "t").unwrap(),
            new_cluster: true,
            cluster_token: "t".into(),
            snapshot_count: 10,
            max_request_bytes: 1024,
            listen_metrics_urls: Vec::new(),
            heartbeat_interval: Duration::from_millis(100),
            election_timeout: Duration::from_millis(1000),
            watch_progress_notify_interval: Duration::from_secs(600),
            client_tls_info: TlsInfo::default(),
            peer_tls_info: TlsInfo::peer(),
            quota_backend_bytes: 0,
            auto_compaction_mode: DEFAULT_AUTO_COMPACTION_MODE.into(),
            auto_compaction_retention: DEFAULT_AUTO_COMPACTION_RETENTION.into(),
        }
    }

    #[test]
    fn an_https_url_needs_a_certificate_and_key_as_in_etcd() {
        config("http://127.0.0.1:1", "http://127.0.0.1:2").validate().unwrap();
        let err = config("https://127.0.0.1:1", "http://127.0.0.1:2").validate().unwrap_err().to_string();
        assert!(err.contains("TLS key/cert (--cert-file, --key-file) must be provided for client url https://127.0.0.1:1 with HTTPS scheme"), "{err}");
        let err = config("http://127.0.0.1:1", "https://127.0.0.1:2").validate().unwrap_err().to_string();
        assert!(err.contains("cannot listen on TLS for 127.0.0.1:2: KeyFile and CertFile are not presented"), "{err}");
        let mut c = config("https://127.0.0.1:1", "https://127.0.0.1:2");
        let files = |side| TlsInfo { side, cert_file: Some("c".into()), key_file: Some("k".into()), ..TlsInfo::default() };
        c.client_tls_info = files(crate::tlsinfo::Side::Client);
        c.peer_tls_info = files(crate::tlsinfo::Side::Peer);
        c.validate().unwrap();
    }
}
