//! Mirrors etcd's `etcdserver/cluster_util.go`: how a member that `member add` added learns the
//! cluster it joins, and how a follower hands a promotion to the leader.
//!
//! A member started with `--initial-cluster-state existing` on an empty data directory asks the
//! other members of `--initial-cluster`, at their peer URLs, for the member list (etcd's
//! `GetClusterFromRemotePeers`; etcd asks its peer HTTP endpoint `/members`, we ask the Cluster
//! gRPC service every peer port also serves). The answer gives the cluster's ID and, matched by
//! peer URLs against `--initial-cluster` ([`assign_id`], etcd's `ValidateClusterAndAssignIDs`),
//! this member's own ID: the one `member add` made. A member that already started (it published
//! a name) is refused: it lost its data, and raft cannot take it back under the same ID.

use std::sync::Arc;
use std::time::Duration;

use proto::etcd::*;
use tonic::Status;

use crate::config::{Config, Peer};
use crate::error::{Error, Result};

/// What a joining member learned from the cluster.
#[derive(Clone, Debug)]
pub struct Joined {
    pub id: u64,
    pub cluster_id: u64,
    /// Every member, with its peer URLs (names are not needed to dial them).
    pub members: Vec<Peer>,
}

const DIAL_TIMEOUT: Duration = Duration::from_secs(2);

async fn channel(url: &str, tls: Option<Arc<rustls::ClientConfig>>) -> Result<tonic::transport::Channel> {
    // TLS is the connector's (as in the transport), so tonic is given the URL as http://.
    let (url, tls) = match url.strip_prefix("https://") {
        Some(rest) => (format!("http://{rest}"), tls),
        None => (url.to_string(), None),
    };
    let endpoint = tonic::transport::Endpoint::from_shared(url.clone())
        .map_err(|e| Error::Config(format!("bad peer URL {url}: {e}")))?
        .connect_timeout(DIAL_TIMEOUT)
        .timeout(DIAL_TIMEOUT);
    let connector = tower::service_fn(move |uri| crate::netutil::dial(uri, tls.clone()));
    Ok(endpoint.connect_with_connector(connector).await?)
}

/// One unary call of etcd's Cluster service at a peer URL.
async fn call<Req, Resp>(url: &str, tls: Option<Arc<rustls::ClientConfig>>, method: &'static str, req: Req) -> Result<Resp, Status>
where
    Req: prost::Message + Send + Sync + 'static,
    Resp: prost::Message + Default + Send + Sync + 'static,
{
    let ch = channel(url, tls).await.map_err(|e| Status::unavailable(e.to_string()))?;
    let mut grpc = tonic::client::Grpc::new(ch);
    grpc.ready().await.map_err(|e| Status::unavailable(e.to_string()))?;
    let path = http::uri::PathAndQuery::from_static(method);
    let codec = tonic_prost::ProstCodec::<Req, Resp>::default();
    Ok(grpc.unary(tonic::Request::new(req), path, codec).await?.into_inner())
}

/// The member list as the member at peer URL `url` holds it.
pub async fn member_list(url: &str, tls: Option<Arc<rustls::ClientConfig>>) -> Result<PbMemberListResponse, Status> {
    call(url, tls, "/etcdserverpb.Cluster/MemberList", PbMemberListRequest { linearizable: false }).await
}

/// Asks the leader, at its peer URL, to promote learner `id` (etcd's `promoteMemberHTTP`).
pub async fn member_promote(url: &str, tls: Option<Arc<rustls::ClientConfig>>, id: u64) -> Result<PbMemberPromoteResponse, Status> {
    call(url, tls, "/etcdserverpb.Cluster/MemberPromote", PbMemberPromoteRequest { id }).await
}

/// etcd's `ValidateClusterAndAssignIDs` plus the started check of `GetClusterFromRemotePeers`'s
/// caller: `local` is `--initial-cluster`, `remote` the cluster's member list; returns this
/// member's ID (`name`'s entry, matched by peer URLs). `founding_id` is the ID this member had
/// if it founded the cluster (its name and the token's hash, [`crate::config::member_id`]).
pub fn assign_id(name: &str, founding_id: u64, local: &[Peer], remote: &[PbMember]) -> Result<u64> {
    // This member before it lost its data: a founding member under the ID its flags give, or a
    // started member by its name (checked first: the cluster may list peer URLs differently,
    // as behind a proxy).
    if let Some(me) = remote.iter().find(|r| r.id == founding_id || r.name == name) {
        return Err(already_bootstrapped(me.id));
    }
    if local.len() != remote.len() {
        return Err(Error::Config(format!(
            "member count is unequal: --initial-cluster has {} members, the cluster has {}",
            local.len(),
            remote.len()
        )));
    }
    let sorted = |u: &[String]| {
        let mut u = u.to_vec();
        u.sort();
        u
    };
    let mut mine = None;
    for l in local {
        let Some(r) = remote.iter().find(|r| sorted(&r.peer_ur_ls) == sorted(&l.peer_urls)) else {
            return Err(Error::Config(format!(
                "could not find {:?} ({}) in the cluster's member list: add it with `member add` first",
                l.peer_urls, l.name
            )));
        };
        if l.name == name {
            mine = Some(r);
        }
    }
    let me = mine.ok_or_else(|| Error::Config(format!("--initial-cluster has no member named {name:?}")))?;
    if !me.name.is_empty() {
        return Err(already_bootstrapped(me.id));
    }
    Ok(me.id)
}

fn already_bootstrapped(id: u64) -> Error {
    Error::Config(format!(
        "member {id:x} has already been bootstrapped: it cannot rejoin with an empty data directory under the identity it had (--initial-cluster-state existing); remove it and add it again (`member remove`, `member add`), or start it with the data directory it had"
    ))
}

/// Asks the other members of `--initial-cluster`, one after the other, for the member list, and
/// finds this member in it (see the module docs).
pub async fn join(cfg: &Config, tls: Option<Arc<rustls::ClientConfig>>) -> Result<Joined> {
    let mut last = String::from("no other member in --initial-cluster");
    let mine: Vec<String> = cfg.initial_cluster.iter().filter(|p| p.name == cfg.name).flat_map(|p| p.peer_urls.clone()).collect();
    for p in cfg.initial_cluster.iter().filter(|p| p.name != cfg.name) {
        for url in p.peer_urls.iter().filter(|u| !mine.contains(u)) {
            match member_list(url, tls.clone()).await {
                Ok(r) => {
                    let id = assign_id(&cfg.name, cfg.member_id(), &cfg.initial_cluster, &r.members)?;
                    let cluster_id = r.header.map(|h| h.cluster_id).unwrap_or_default();
                    let members = r
                        .members
                        .iter()
                        .map(|m| Peer { name: m.name.clone(), id: m.id, peer_urls: m.peer_ur_ls.clone() })
                        .collect();
                    tracing::info!(target: "store::membership", member = %format!("{id:x}"), cluster = %format!("{cluster_id:x}"), from = %url, "joining an existing cluster");
                    return Ok(Joined { id, cluster_id, members });
                }
                Err(e) => last = format!("{url}: {}", e.message()),
            }
        }
    }
    Err(Error::Config(format!("cannot fetch cluster info from peer urls: {last}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(name: &str, url: &str) -> Peer {
        Peer { name: name.into(), id: 0, peer_urls: vec![url.into()] }
    }

    fn remote(id: u64, name: &str, url: &str) -> PbMember {
        PbMember { id, name: name.into(), peer_ur_ls: vec![url.into()], ..Default::default() }
    }

    #[test]
    fn a_joining_member_finds_its_id_by_peer_urls() {
        let local = [peer("a", "http://a:1"), peer("d", "http://d:1")];
        let list = [remote(7, "a", "http://a:1"), remote(9, "", "http://d:1")];
        assert_eq!(assign_id("d", 1, &local, &list).unwrap(), 9);
        let e = assign_id("d", 1, &local, &[remote(7, "a", "http://a:1")]).unwrap_err().to_string();
        assert!(e.contains("member count is unequal"), "{e}");
        let e = assign_id("d", 1, &local, &[remote(7, "a", "http://a:1"), remote(9, "", "http://x:1")]).unwrap_err().to_string();
        assert!(e.contains("could not find"), "{e}");
        // The member started before: it lost its data and cannot come back under its ID, even
        // if the cluster lists its peer URLs differently.
        let e = assign_id("a", 1, &local, &list).unwrap_err().to_string();
        assert!(e.contains("member 7 has already been bootstrapped"), "{e}");
        let elsewhere = [remote(7, "a", "http://proxy:9"), remote(9, "", "http://d:1")];
        let e = assign_id("a", 1, &local, &elsewhere).unwrap_err().to_string();
        assert!(e.contains("member 7 has already been bootstrapped"), "{e}");
        // A founding member that lost its data before it published its name.
        let unpublished = [remote(7, "", "http://proxy:9"), remote(9, "", "http://d:1")];
        let e = assign_id("a", 7, &local, &unpublished).unwrap_err().to_string();
        assert!(e.contains("member 7 has already been bootstrapped"), "{e}");
    }
}
