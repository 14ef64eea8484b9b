//! The real server on 127.0.0.1, its index fed in-process, asked over UDP and TCP with
//! hickory's client; names outside the cluster go to an upstream resolver this test starts on
//! loopback.

use std::net::{Ipv4Addr, SocketAddr};
use std::str::FromStr as _;
use std::time::Duration;

use hickory_net::client::{Client, ClientHandle as _};
use hickory_net::runtime::TokioRuntimeProvider;
use hickory_net::tcp::TcpClientStream;
use hickory_net::udp::UdpClientStream;
use hickory_proto::op::{Message, MessageType, ResponseCode};
use hickory_proto::rr::rdata::A;
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};

use dns::index::{Index, SharedIndex};
use dns::object::Port;
use dns::object::endpoint::{EndpointAddress, EndpointSlice};
use dns::object::service::Service;

/// What the upstream resolver knows: one name, and a second one it answers over UDP only
/// truncated (TC, no records), so the forwarder must ask again over TCP.
const UPSTREAM_NAME: &str = "upstream.test.";
const TRUNCATED_NAME: &str = "big.test.";
const UPSTREAM_IP: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 42);

/// The upstream's answer to a query message.
fn upstream_answer(query: &[u8], tcp: bool) -> Option<Vec<u8>> {
    let q = Message::from_vec(query).ok()?;
    let mut r = Message::new(q.metadata.id, MessageType::Response, q.metadata.op_code);
    r.metadata.recursion_desired = q.metadata.recursion_desired;
    r.metadata.recursion_available = true;
    r.queries = q.queries.clone();
    match q.queries.first() {
        Some(query) if query.query_type() == RecordType::A && query.name().to_ascii() == UPSTREAM_NAME => {
            r.answers.push(Record::from_rdata(query.name().clone(), 30, RData::A(A(UPSTREAM_IP))));
        }
        Some(query) if query.query_type() == RecordType::A && query.name().to_ascii() == TRUNCATED_NAME => {
            if tcp {
                r.answers.push(Record::from_rdata(query.name().clone(), 30, RData::A(A(UPSTREAM_IP))));
            } else {
                r.metadata.truncation = true;
            }
        }
        _ => r.metadata.response_code = ResponseCode::NXDomain,
    }
    r.to_vec().ok()
}

/// A resolver on loopback, UDP and TCP on one port, until the test ends.
async fn start_upstream() -> SocketAddr {
    let (tcp, udp) = loop {
        let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind upstream");
        if let Ok(udp) = tokio::net::UdpSocket::bind(tcp.local_addr().expect("addr")).await {
            break (tcp, udp);
        }
    };
    let addr = udp.local_addr().expect("addr");
    tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        while let Ok((n, from)) = udp.recv_from(&mut buf).await {
            if let Some(bytes) = upstream_answer(&buf[..n], false) {
                let _ = udp.send_to(&bytes, from).await;
            }
        }
    });
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        while let Ok((mut conn, _)) = tcp.accept().await {
            tokio::spawn(async move {
                while let Ok(len) = conn.read_u16().await {
                    let mut query = vec![0u8; usize::from(len)];
                    if conn.read_exact(&mut query).await.is_err() {
                        return;
                    }
                    let Some(bytes) = upstream_answer(&query, true) else { return };
                    let Ok(len) = u16::try_from(bytes.len()) else { return };
                    if conn.write_all(&len.to_be_bytes()).await.is_err() || conn.write_all(&bytes).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

fn index() -> SharedIndex {
    let mut i = Index::default();
    let port = |name: &str, port: u16| Port { name: name.into(), protocol: "tcp".into(), port };
    let svc = |name: &str| Service {
        namespace: "default".into(),
        name: name.into(),
        cluster_ips: vec![],
        headless: false,
        external_name: None,
        ports: vec![],
    };
    i.upsert_service(Service { cluster_ips: vec!["10.96.0.10".parse().unwrap()], ports: vec![port("http", 80)], ..svc("web") });
    i.upsert_service(Service { headless: true, ports: vec![port("pg", 5432)], ..svc("db") });
    i.upsert_service(Service { external_name: Some("upstream.test".into()), ..svc("ext") });
    i.upsert_slice(EndpointSlice {
        namespace: "default".into(),
        name: "db-abc".into(),
        service: "db".into(),
        addresses: vec![
            EndpointAddress { ip: "10.244.0.5".parse().unwrap(), hostname: Some("db-0".into()) },
            EndpointAddress { ip: "10.244.0.6".parse().unwrap(), hostname: None },
        ],
        ports: vec![port("pg", 5432)],
    });
    // 60 endpoints: more A records than fit in 512 bytes.
    i.upsert_service(Service { headless: true, ports: vec![port("http", 80)], ..svc("many") });
    i.upsert_slice(EndpointSlice {
        namespace: "default".into(),
        name: "many-abc".into(),
        service: "many".into(),
        addresses: (1..=60).map(|n| EndpointAddress { ip: Ipv4Addr::new(10, 244, 1, n).into(), hostname: None }).collect(),
        ports: vec![port("http", 80)],
    });
    std::sync::Arc::new(std::sync::RwLock::new(i))
}

struct Running {
    dns: SocketAddr,
    health: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    server: tokio::task::JoinHandle<dns::Result<()>>,
    ready: tokio::sync::watch::Sender<bool>,
}

async fn start(upstreams: Vec<SocketAddr>) -> Running {
    let opts = dns::Options { upstreams, upstream_timeout: Duration::from_millis(500), ..Default::default() };
    let listeners = dns::Listeners::bind("127.0.0.1:0".parse().unwrap(), "127.0.0.1:0".parse().unwrap()).await.expect("bind");
    let (dns, health) = (listeners.dns_addr().unwrap(), listeners.health_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (ready, ready_rx) = tokio::sync::watch::channel(false);
    let server = tokio::spawn(async move {
        dns::serve(&opts, listeners, index(), ready_rx, async {
            let _ = stopped.await;
        })
        .await
    });
    Running { dns, health, stop: Some(stop), server, ready }
}

impl Running {
    async fn stop(mut self) {
        let _ = self.stop.take().map(|s| s.send(()));
        tokio::time::timeout(Duration::from_secs(10), self.server).await.expect("stops").expect("joins").expect("serves");
    }
}

async fn udp_client(addr: SocketAddr) -> Client<TokioRuntimeProvider> {
    let conn = UdpClientStream::builder(addr, TokioRuntimeProvider::default()).with_timeout(Some(Duration::from_secs(5))).build();
    let (client, bg) = Client::<TokioRuntimeProvider>::from_sender(conn);
    tokio::spawn(bg);
    client
}

async fn tcp_client(addr: SocketAddr) -> Client<TokioRuntimeProvider> {
    let (stream, sender) = TcpClientStream::new(addr, None, Some(Duration::from_secs(5)), TokioRuntimeProvider::new());
    let (client, bg) = Client::<TokioRuntimeProvider>::new(stream.await.expect("tcp connect"), sender);
    tokio::spawn(bg);
    client
}

/// The response code and each answer's data as text, sorted.
async fn ask(client: &mut Client<TokioRuntimeProvider>, name: &str, qtype: RecordType) -> (ResponseCode, Vec<String>) {
    let r = client.query(Name::from_str(name).expect("name"), DNSClass::IN, qtype).await.expect("an answer");
    let mut data: Vec<String> = r.answers.iter().map(|r| r.data.to_string()).collect();
    data.sort();
    (r.metadata.response_code, data)
}

const OK: ResponseCode = ResponseCode::NoError;

#[tokio::test]
async fn answers_cluster_names_over_udp_and_tcp_and_forwards_the_rest() {
    let upstream = start_upstream().await;
    let server = start(vec![upstream]).await;
    for mut c in [udp_client(server.dns).await, tcp_client(server.dns).await] {
        assert_eq!(ask(&mut c, "web.default.svc.cluster.local.", RecordType::A).await, (OK, vec!["10.96.0.10".into()]));
        assert_eq!(
            ask(&mut c, "_http._tcp.web.default.svc.cluster.local.", RecordType::SRV).await,
            (OK, vec!["0 100 80 web.default.svc.cluster.local.".into()])
        );
        assert_eq!(ask(&mut c, "db.default.svc.cluster.local.", RecordType::A).await, (OK, vec!["10.244.0.5".into(), "10.244.0.6".into()]));
        assert_eq!(ask(&mut c, "db-0.db.default.svc.cluster.local.", RecordType::A).await, (OK, vec!["10.244.0.5".into()]));
        assert_eq!(ask(&mut c, "ext.default.svc.cluster.local.", RecordType::A).await, (OK, vec!["upstream.test.".into()]));
        assert_eq!(ask(&mut c, "10-244-3-7.default.pod.cluster.local.", RecordType::A).await, (OK, vec!["10.244.3.7".into()]));
        assert_eq!(ask(&mut c, "nope.default.svc.cluster.local.", RecordType::A).await, (ResponseCode::NXDomain, vec![]));
        assert_eq!(ask(&mut c, "web.default.svc.cluster.local.", RecordType::AAAA).await, (OK, vec![]), "NODATA");
        assert_eq!(ask(&mut c, "10.0.96.10.in-addr.arpa.", RecordType::PTR).await, (OK, vec!["web.default.svc.cluster.local.".into()]));
    }
    // Forwarded, over the client's protocol; a truncated UDP answer is asked again over TCP.
    for mut c in [udp_client(server.dns).await, tcp_client(server.dns).await] {
        assert_eq!(ask(&mut c, UPSTREAM_NAME, RecordType::A).await, (OK, vec![UPSTREAM_IP.to_string()]));
        assert_eq!(ask(&mut c, TRUNCATED_NAME, RecordType::A).await, (OK, vec![UPSTREAM_IP.to_string()]));
        assert_eq!(ask(&mut c, "other.test.", RecordType::A).await, (ResponseCode::NXDomain, vec![]), "the upstream's NXDOMAIN");
    }

    // /health at once, /ready once the index is in.
    let get = |path: &'static str| {
        let addr = server.health;
        async move {
            use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
            let mut s = tokio::net::TcpStream::connect(addr).await.expect("health connect");
            s.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").as_bytes()).await.expect("write");
            let mut body = String::new();
            s.read_to_string(&mut body).await.expect("read");
            body
        }
    };
    assert!(get("/health").await.starts_with("HTTP/1.1 200"));
    assert!(get("/ready").await.starts_with("HTTP/1.1 503"));
    server.ready.send_replace(true);
    assert!(get("/ready").await.starts_with("HTTP/1.1 200"));
    let metrics = get("/metrics").await;
    assert!(metrics.contains(r#"coredns_dns_requests_total{proto="tcp",type="A"}"#), "{metrics}");
    assert!(metrics.contains("coredns_dns_request_duration_seconds_bucket"), "{metrics}");
    assert!(metrics.contains(r#"coredns_dns_responses_total{plugin="forward",rcode="NXDOMAIN"} 2"#), "{metrics}");
    server.stop().await;
}

#[tokio::test]
async fn an_upstream_that_does_not_answer_is_servfail() {
    // A loopback port nobody serves: bound, then closed.
    let dead = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr");
    let server = start(vec![dead]).await;
    for mut c in [udp_client(server.dns).await, tcp_client(server.dns).await] {
        assert_eq!(ask(&mut c, UPSTREAM_NAME, RecordType::A).await.0, ResponseCode::ServFail);
        assert_eq!(ask(&mut c, "web.default.svc.cluster.local.", RecordType::A).await.0, OK, "the cluster's names still answer");
    }
    server.stop().await;
}

/// A query message for `name` A, with `id`, as bytes (no EDNS: a 512-byte UDP client).
fn query_bytes(id: u16, name: &str) -> Vec<u8> {
    let mut m = Message::query();
    m.metadata.id = id;
    m.metadata.recursion_desired = true;
    m.add_query(hickory_proto::op::Query::query(Name::from_str(name).expect("name"), RecordType::A));
    m.to_vec().expect("encode")
}

/// Sends `bytes` over UDP and returns the reply, or None if none came within 300 ms.
async fn udp_exchange(socket: &tokio::net::UdpSocket, server: SocketAddr, bytes: &[u8]) -> Option<Message> {
    socket.send_to(bytes, server).await.expect("send");
    let mut buf = vec![0u8; 65535];
    let (len, _) = tokio::time::timeout(Duration::from_millis(300), socket.recv_from(&mut buf)).await.ok()?.expect("recv");
    Some(Message::from_vec(&buf[..len]).expect("a DNS message"))
}

#[tokio::test]
async fn udp_truncates_to_the_clients_buffer_refuses_malformed_messages_and_ignores_responses() {
    let server = start(vec![]).await;
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.expect("bind");
    let name = "many.default.svc.cluster.local.";

    // 60 A records do not fit in 512 bytes: TC set, and what is sent fits; TCP gets them all.
    let reply = udp_exchange(&socket, server.dns, &query_bytes(7, name)).await.expect("a reply");
    assert_eq!(reply.metadata.id, 7);
    assert!(reply.metadata.truncation, "TC set: {reply:?}");
    assert!(reply.to_vec().unwrap().len() <= 512);
    assert!(reply.answers.len() < 60);
    let mut tcp = tcp_client(server.dns).await;
    assert_eq!(ask(&mut tcp, name, RecordType::A).await.1.len(), 60);
    // With EDNS and a 4,096-byte buffer, all of them over UDP.
    let mut big = Message::from_vec(&query_bytes(8, name)).unwrap();
    let mut edns = hickory_proto::op::Edns::new();
    edns.set_max_payload(4096);
    big.set_edns(edns);
    let reply = udp_exchange(&socket, server.dns, &big.to_vec().unwrap()).await.expect("a reply");
    assert!(!reply.metadata.truncation);
    assert_eq!(reply.answers.len(), 60);

    // A header that promises a question the message does not hold: FORMERR, with its ID.
    let mut cut = query_bytes(9, name);
    cut.truncate(20);
    let reply = udp_exchange(&socket, server.dns, &cut).await.expect("a reply");
    assert_eq!((reply.metadata.id, reply.metadata.response_code), (9, ResponseCode::FormErr));
    // Fewer bytes than a header: no DNS message, no reply.
    assert!(udp_exchange(&socket, server.dns, &[0, 1, 2]).await.is_none());

    // A response sent to the server is not answered (nothing to bounce off it)…
    let mut response = Message::from_vec(&query_bytes(10, name)).unwrap();
    response.metadata.message_type = MessageType::Response;
    assert!(udp_exchange(&socket, server.dns, &response.to_vec().unwrap()).await.is_none());
    // …and the socket still serves.
    let reply = udp_exchange(&socket, server.dns, &query_bytes(11, "web.default.svc.cluster.local.")).await.expect("a reply");
    assert_eq!((reply.metadata.id, reply.answers.len()), (11, 1));
    server.stop().await;
}
