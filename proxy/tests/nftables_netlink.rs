//! The nf_tables netlink client against the kernel, in network namespaces this test creates
//! (`kubelab-nft-<pid>-<tag>`), never the host's tables: every op and statement accepted, errors
//! naming their op with nothing applied, real packets through DNAT and REJECT rules, and the
//! time a large transaction takes.

mod support;

use std::collections::BTreeSet;
use std::io::{ErrorKind, Write as _};
use std::net::Ipv4Addr;
use std::process::Command;
use std::time::{Duration, Instant};

use proxy::serviceport::Protocol;
use proxy::util::nftables::{BaseChain, ChainType, Element, Hook, Key, KeyValue, Nftables, Op, Rule, Set, Stmt, Transaction, Verdict};
use proxy::{Error, Ipv4Cidr};
use support::{Netns, serve};

const TABLE: &str = "kube-proxy";

/// A netlink client for the table in namespace `ns`.
fn netlink(ns: &Netns) -> Nftables {
    Nftables::in_netns(TABLE, &ns.0).expect("a netlink socket in the namespace")
}

fn privileged() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let ip = Command::new("ip").arg("-V").output().is_ok_and(|o| o.status.success());
    if !(root && ip) {
        eprintln!("skipped: needs root and ip (network namespaces)");
    }
    root && ip
}

fn cidr(s: &str) -> Ipv4Cidr {
    Ipv4Cidr::parse(s).expect("a CIDR")
}

fn ip(s: &str) -> Ipv4Addr {
    s.parse().expect("an address")
}

fn chain(name: &str) -> Op {
    Op::AddChain { name: name.into(), base: None, comment: None }
}

fn base(name: &str, kind: ChainType, hook: Hook, priority: i32) -> Op {
    Op::AddChain { name: name.into(), base: Some(BaseChain { kind, hook, priority }), comment: Some(format!("{name} hook")) }
}

fn rule(chain: &str, stmts: Vec<Stmt>) -> Op {
    Op::AddRule { chain: chain.into(), rule: Rule { stmts, comment: None } }
}

fn set(name: &str, key: Key, map: bool) -> Op {
    Op::AddSet(Set { name: name.into(), key, map, timeout: None, comment: Some(format!("the {name} set")) })
}

fn jump(c: &str) -> Stmt {
    Stmt::Verdict(Verdict::Jump(c.into()))
}

fn to(key: KeyValue, v: Verdict) -> Element {
    Element { key, verdict: Some(v) }
}

fn key(k: KeyValue) -> Element {
    Element { key: k, verdict: None }
}

fn goto(c: &str) -> Verdict {
    Verdict::Goto(c.into())
}

/// A `numgen random mod N` map named `name`, empty (elements come once the chains exist).
fn pick_map(name: &str, n: u32) -> Op {
    Op::AddSet(Set { name: name.into(), key: Key::Numgen(n), map: true, timeout: None, comment: None })
}

/// Its elements: `i : goto chains[i]`.
fn picks(name: &str, chains: &[&str]) -> Op {
    Op::AddElements { set: name.into(), elements: chains.iter().zip(0..).map(|(c, i)| to(KeyValue::Number(i), goto(c))).collect() }
}

const SVC: &str = "service-ULMVA6XW-default/web/tcp/http";
const EP_A: &str = "endpoint-5OJB2KTY-default/web/tcp/http__10.244.1.5/8080";
const EP_B: &str = "endpoint-GTQKDAPS-default/web/tcp/http__10.244.1.6/8080";
const AFFINITY_A: &str = "affinity-5OJB2KTY-default/web/tcp/http__10.244.1.5/8080";

/// A table in the shape of kube-proxy's, with every op and every statement at least once; the
/// statements sit where the kernel allows them (DNAT reached from nat output, masquerade from
/// nat postrouting, reject from filter output), so its hook checks run too.
fn everything() -> Transaction {
    let mut tx = Transaction::new();
    for op in [
        Op::AddTable { comment: Some("rules for kube-proxy".into()) },
        base("nat-prerouting", ChainType::Nat, Hook::Prerouting, -100),
        base("nat-output", ChainType::Nat, Hook::Output, -100),
        base("nat-postrouting", ChainType::Nat, Hook::Postrouting, 100),
        base("filter-output", ChainType::Filter, Hook::Output, -110),
        base("filter-input", ChainType::Filter, Hook::Input, -110),
        base("filter-forward", ChainType::Filter, Hook::Forward, -110),
        chain("services"),
        chain("mark-for-masquerade"),
        chain("masquerading"),
        chain("reject-chain"),
        chain("cluster-ips-check"),
        chain("external-X"),
        chain(SVC),
        chain(EP_A),
        chain(EP_B),
        chain("temporary"),
        set("cluster-ips", Key::Daddr, false),
        set("nodeport-ips", Key::Daddr, false),
        set("service-ips", Key::DaddrProtoPort, true),
        set("service-nodeports", Key::ProtoPort, true),
        set("no-endpoint-services", Key::DaddrProtoPort, true),
        set("temporary-set", Key::Saddr, false),
        Op::AddSet(Set { name: AFFINITY_A.into(), key: Key::Saddr, map: false, timeout: Some(Duration::from_secs(10800)), comment: None }),
        pick_map(SVC, 2),
        picks(SVC, &[EP_A, EP_B]),
        // Chains and sets are flushed before they are written, as a full sync does.
        Op::FlushChain("services".into()),
        Op::FlushChain(SVC.into()),
        Op::FlushSet("service-ips".into()),
        rule("nat-prerouting", vec![jump("services")]),
        rule("nat-output", vec![jump("services")]),
        rule("nat-postrouting", vec![jump("masquerading")]),
        rule("filter-output", vec![Stmt::CtStateNew, Stmt::Vmap { key: Key::DaddrProtoPort, map: "no-endpoint-services".into() }]),
        rule("filter-output", vec![Stmt::CtStateNew, jump("cluster-ips-check")]),
        rule("filter-input", vec![Stmt::CtStateNew, Stmt::FibLocal { field: Key::Daddr, negate: false }, Stmt::Counter, Stmt::Verdict(Verdict::Accept)]),
        rule(
            "filter-forward",
            vec![Stmt::FibLocal { field: Key::Saddr, negate: true }, Stmt::L4Proto(Protocol::Udp), Stmt::Dport(Protocol::Udp, 53), Stmt::Verdict(Verdict::Accept)],
        ),
        rule("services", vec![Stmt::Vmap { key: Key::DaddrProtoPort, map: "service-ips".into() }]),
        rule(
            "services",
            vec![
                Stmt::FibLocal { field: Key::Daddr, negate: false },
                Stmt::InSet { key: Key::Daddr, set: "nodeport-ips".into(), negate: false },
                Stmt::Vmap { key: Key::ProtoPort, map: "service-nodeports".into() },
            ],
        ),
        rule("mark-for-masquerade", vec![Stmt::MarkOr(0x4000)]),
        rule("masquerading", vec![Stmt::MarkUnset(0x4000), Stmt::Verdict(Verdict::Return)]),
        rule("masquerading", vec![Stmt::MarkXor(0x4000)]),
        rule("masquerading", vec![Stmt::Masquerade { fully_random: true }]),
        rule("masquerading", vec![Stmt::Masquerade { fully_random: false }]),
        rule("reject-chain", vec![Stmt::Reject]),
        rule(
            "cluster-ips-check",
            vec![
                Stmt::Ip { field: Key::Daddr, negate: false, net: cidr("10.96.0.0/12") },
                Stmt::InSet { key: Key::Daddr, set: "cluster-ips".into(), negate: true },
                Stmt::Verdict(Verdict::Drop),
            ],
        ),
        rule("external-X", vec![Stmt::InSet { key: Key::Saddr, set: "nodeport-ips".into(), negate: true }, jump("mark-for-masquerade")]),
        rule("external-X", vec![Stmt::Verdict(goto(SVC))]),
        rule(SVC, vec![Stmt::Ip { field: Key::Saddr, negate: true, net: cidr("10.244.0.0/16") }, jump("mark-for-masquerade")]),
        rule(SVC, vec![Stmt::InSet { key: Key::Saddr, set: AFFINITY_A.into(), negate: false }, Stmt::Verdict(goto(EP_A))]),
        rule(SVC, vec![Stmt::NumgenVmap { modulus: 2, map: SVC.into() }]),
        Op::AddRule {
            chain: EP_A.into(),
            rule: Rule {
                stmts: vec![Stmt::Ip { field: Key::Saddr, negate: false, net: cidr("10.244.1.5/32") }, jump("mark-for-masquerade")],
                comment: Some("hairpin".into()),
            },
        },
        rule(EP_A, vec![Stmt::UpdateSet { set: AFFINITY_A.into(), key: Key::Saddr }, Stmt::Dnat { proto: Protocol::Tcp, addr: ip("10.244.1.5"), port: 8080 }]),
        rule(EP_B, vec![Stmt::Counter, Stmt::Dnat { proto: Protocol::Tcp, addr: ip("10.244.1.6"), port: 8080 }]),
        rule("temporary", vec![Stmt::Counter]),
        Op::AddElements { set: "cluster-ips".into(), elements: ["10.96.0.10", "10.96.0.11", "10.96.0.99"].map(|a| key(KeyValue::Addr(ip(a)))).into() },
        Op::AddElements { set: "nodeport-ips".into(), elements: vec![key(KeyValue::Addr(ip("192.168.77.2")))] },
        Op::AddElements {
            set: "service-ips".into(),
            elements: vec![
                to(KeyValue::AddrProtoPort(ip("10.96.0.10"), Protocol::Tcp, 80), goto(SVC)),
                to(KeyValue::AddrProtoPort(ip("10.96.0.11"), Protocol::Udp, 53), goto(SVC)),
            ],
        },
        Op::AddElements { set: "service-nodeports".into(), elements: vec![to(KeyValue::ProtoPort(Protocol::Tcp, 30080), goto("external-X"))] },
        Op::AddElements {
            set: "no-endpoint-services".into(),
            elements: vec![
                to(KeyValue::AddrProtoPort(ip("10.96.0.12"), Protocol::Tcp, 80), goto("reject-chain")),
                to(KeyValue::AddrProtoPort(ip("10.96.0.13"), Protocol::Sctp, 80), Verdict::Drop),
            ],
        },
        Op::AddElements { set: "temporary-set".into(), elements: vec![key(KeyValue::Addr(ip("1.2.3.4")))] },
        Op::DeleteElements { set: "cluster-ips".into(), elements: vec![key(KeyValue::Addr(ip("10.96.0.99")))] },
        Op::FlushChain("temporary".into()),
        Op::DeleteChain("temporary".into()),
        Op::FlushSet("temporary-set".into()),
        Op::DeleteSet("temporary-set".into()),
    ] {
        tx.push(op);
    }
    tx
}

fn sorted(v: Vec<String>) -> BTreeSet<String> {
    v.into_iter().collect()
}

#[test]
fn nftables_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Nftables>();
}

#[test]
fn every_op_and_statement_is_accepted() {
    if !privileged() {
        return;
    }
    let ns = Netns::new("all");
    let nft = netlink(&ns);
    assert!(!nft.table_exists().expect("table_exists"));
    assert_eq!(nft.list_chains().expect("list_chains"), Vec::<String>::new());
    assert_eq!(nft.list_sets().expect("list_sets"), Vec::<String>::new());

    let tx = everything();
    let bytes = nft.apply(&tx).unwrap_or_else(|e| panic!("{e}\n{}", tx.display(TABLE)));
    assert!(bytes > 0);
    assert!(nft.table_exists().expect("table_exists"));
    let want_chains: BTreeSet<String> = [
        "nat-prerouting", "nat-output", "nat-postrouting", "filter-output", "filter-input", "filter-forward", "services",
        "mark-for-masquerade", "masquerading", "reject-chain", "cluster-ips-check", "external-X", SVC, EP_A, EP_B,
    ]
    .map(String::from)
    .into();
    assert_eq!(sorted(nft.list_chains().expect("list_chains")), want_chains);
    let want_sets: BTreeSet<String> =
        ["cluster-ips", "nodeport-ips", "service-ips", "service-nodeports", "no-endpoint-services", AFFINITY_A, SVC].map(String::from).into();
    assert_eq!(sorted(nft.list_sets().expect("list_sets")), want_sets, "every named set and map (no deleted set)");

    // The same again, as the next full sync: tables, chains (with their comments and hooks),
    // sets and elements that exist are no error.
    nft.apply(&tx).expect("the same transaction again");
    assert_eq!(sorted(nft.list_chains().expect("list_chains")), want_chains);

    // Endpoint B goes: the Service's chain rewritten without it, B's chain flushed and
    // deleted, a Service's map element deleted — one transaction.
    let mut tx = Transaction::new();
    tx.push(Op::FlushChain(SVC.into()));
    tx.push(rule(SVC, vec![Stmt::NumgenVmap { modulus: 1, map: SVC.into() }]));
    tx.push(Op::DeleteElements { set: SVC.into(), elements: vec![key(KeyValue::Number(1))] });
    tx.push(Op::FlushChain(EP_B.into()));
    tx.push(Op::DeleteChain(EP_B.into()));
    tx.push(Op::DeleteElements { set: "service-ips".into(), elements: vec![key(KeyValue::AddrProtoPort(ip("10.96.0.11"), Protocol::Udp, 53))] });
    nft.apply(&tx).unwrap_or_else(|e| panic!("{e}\n{}", tx.display(TABLE)));
    let chains = sorted(nft.list_chains().expect("list_chains"));
    assert!(!chains.contains(EP_B) && chains.contains(EP_A), "{chains:?}");
    assert_eq!(chains.len(), want_chains.len() - 1);

    // Deleting the element again fails: it is gone.
    let err = nft.apply(&tx).expect_err("deleting a deleted chain and element");
    assert!(matches!(err, Error::Nftables { .. }), "{err}");

    let mut tx = Transaction::new();
    tx.push(Op::DeleteTable);
    nft.apply(&tx).expect("delete table");
    assert!(!nft.table_exists().expect("table_exists"));
    assert!(nft.list_chains().expect("list_chains").is_empty());
    assert!(nft.list_sets().expect("list_sets").is_empty());
}

/// Where nft is installed (it is not needed), it reads the transaction's text as valid nft
/// input and lists the table the netlink client wrote.
#[test]
fn nft_reads_what_was_written() {
    if !privileged() || !Command::new("nft").arg("--version").output().is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: needs root and nft");
        return;
    }
    let ns = Netns::new("nft");
    let tx = everything();
    // `nft -c` checks the file against the (empty) ruleset of the namespace without applying it.
    let text = tx.display(TABLE).to_string();
    let mut child = Command::new("ip")
        .args(["netns", "exec", &ns.0, "nft", "-c", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("nft");
    child.stdin.take().expect("stdin").write_all(text.as_bytes()).expect("write");
    let out = child.wait_with_output().expect("nft");
    assert!(out.status.success(), "nft -c -f rejects the text:\n{}\n{text}", String::from_utf8_lossy(&out.stderr));

    netlink(&ns).apply(&tx).expect("apply");
    let listed = ns.exec(&["nft", "list", "table", "ip", TABLE]);
    eprintln!("{listed}");
    for want in [
        "type nat hook prerouting priority dstnat; policy accept;",
        "type nat hook output priority -100; policy accept;",
        "type filter hook output priority -110; policy accept;",
        "ip daddr . meta l4proto . th dport vmap @service-ips",
        "numgen random mod 2 vmap @service-ULMVA6XW-default/web/tcp/http",
        "0 : goto endpoint-5OJB2KTY-default/web/tcp/http__10.244.1.5/8080",
        "1 : goto endpoint-GTQKDAPS-default/web/tcp/http__10.244.1.6/8080",
        "10.96.0.10 . tcp . 80 : goto service-ULMVA6XW-default/web/tcp/http",
        "type ipv4_addr . inet_proto . inet_service : verdict",
        "meta mark set meta mark | 0x00004000",
        "meta mark set meta mark ^ 0x00004000",
        "ct state new",
        "fib daddr type local",
        "fib saddr type != local",
        "ip saddr != 10.244.0.0/16 jump mark-for-masquerade",
        "ip saddr 10.244.1.5 jump mark-for-masquerade comment \"hairpin\"",
        "update @affinity-5OJB2KTY-default/web/tcp/http__10.244.1.5/8080 { ip saddr }",
        "dnat to 10.244.1.5:8080",
        "masquerade fully-random",
        "udp dport 53",
        "reject",
        "timeout 3h",
        "comment \"the service-ips set\"",
        "ip daddr != @cluster-ips drop",
    ] {
        assert!(listed.contains(want), "nft list lacks {want:?}");
    }
}

#[test]
fn an_error_names_its_op_and_nothing_is_applied() {
    if !privileged() {
        return;
    }
    let ns = Netns::new("err");
    let nft = netlink(&ns);

    // A new table whose rule jumps to a chain that does not exist: nothing at all is created.
    let mut tx = Transaction::new();
    tx.push(Op::AddTable { comment: None });
    tx.push(chain("a"));
    let bad = Op::AddRule { chain: "a".into(), rule: Rule { stmts: vec![Stmt::Counter, jump("nowhere")], comment: Some("bad".into()) } };
    tx.push(bad.clone());
    tx.push(chain("b"));
    match nft.apply(&tx) {
        Err(Error::Nftables { op, message }) => {
            assert_eq!(op, "add rule ip kube-proxy a counter jump nowhere comment \"bad\"");
            assert_eq!(op, bad.display(TABLE).to_string());
            assert!(message.starts_with("No such file or directory"), "{message}");
        }
        other => panic!("expected an nftables error, got {other:?}"),
    }
    assert!(!nft.table_exists().expect("table_exists"), "nothing of the failed transaction is applied");

    // With the table there: a failure leaves it as it was.
    let mut tx = Transaction::new();
    tx.push(Op::AddTable { comment: None });
    tx.push(chain("a"));
    tx.push(set("cluster-ips", Key::Daddr, false));
    let many: Vec<Element> = (0..3000u32).map(|i| key(KeyValue::Addr(Ipv4Addr::from(0x0a60_0000 + i)))).collect();
    tx.push(Op::AddElements { set: "cluster-ips".into(), elements: many.clone() });
    nft.apply(&tx).expect("setup");

    // Deleting 3,000 elements (several messages), one of which is not there: the error names
    // that element, and none is deleted.
    let mut doomed = many.clone();
    doomed[2500] = key(KeyValue::Addr(ip("10.200.0.1")));
    let mut tx = Transaction::new();
    tx.push(chain("c"));
    tx.push(Op::DeleteElements { set: "cluster-ips".into(), elements: doomed });
    match nft.apply(&tx) {
        Err(Error::Nftables { op, message }) => {
            assert_eq!(op, "delete element ip kube-proxy cluster-ips { 10.200.0.1 }");
            assert!(message.contains("No such file or directory"), "{message}");
        }
        other => panic!("expected an nftables error, got {other:?}"),
    }
    assert_eq!(nft.list_chains().expect("list_chains"), vec!["a".to_string()], "chain c was not added");
    let mut tx = Transaction::new();
    tx.push(Op::DeleteElements { set: "cluster-ips".into(), elements: many });
    nft.apply(&tx).expect("every element is still there");

    // A chain something jumps to cannot be deleted.
    let mut tx = Transaction::new();
    tx.push(chain("target"));
    tx.push(rule("a", vec![jump("target")]));
    nft.apply(&tx).expect("jump");
    let mut tx = Transaction::new();
    tx.push(Op::DeleteChain("target".into()));
    let err = nft.apply(&tx).expect_err("a chain in use");
    assert_eq!(err.to_string(), "delete chain ip kube-proxy target: Device or resource busy (a rule or a map element still jumps to the chain)");
    assert!(err.is_retryable());

    // The socket is still in step: the next transaction's answer is its own.
    assert!(nft.table_exists().expect("table_exists"));
    let mut tx = Transaction::new();
    tx.push(Op::FlushChain("a".into()));
    tx.push(Op::DeleteChain("target".into()));
    nft.apply(&tx).expect("flushed first, the chain goes");
}

/// Connects from `ns` to `to` (2 s to connect).
fn call(ns: &str, to: &str) -> Result<String, ErrorKind> {
    support::call(ns, to, Duration::from_secs(2))
}

/// ```text
///   client 10.99.0.1/24 (veth0) ──── (veth1) 10.99.0.2/24 server: :8080 answers "8080", :8081 "8081"
/// ```
/// In the client, 10.96.0.10:80 is a Service: DNAT to one of the two servers, picked by numgen;
/// 10.96.0.10:81 has no endpoints: rejected. 10.96.0.0/12 is routed into the veth, so nothing
/// leaves for anywhere else.
#[test]
fn packets_follow_the_rules() {
    if !privileged() {
        return;
    }
    let (client, server) = (Netns::new("pc"), Netns::new("ps"));
    client.exec(&["ip", "link", "add", "veth0", "type", "veth", "peer", "name", "veth1", "netns", &server.0]);
    client.exec(&["ip", "addr", "add", "10.99.0.1/24", "dev", "veth0"]);
    client.exec(&["ip", "link", "set", "veth0", "up"]);
    client.exec(&["ip", "route", "add", "10.96.0.0/12", "dev", "veth0"]);
    server.exec(&["ip", "addr", "add", "10.99.0.2/24", "dev", "veth1"]);
    server.exec(&["ip", "link", "set", "veth1", "up"]);
    serve(&server.0, "10.99.0.2:8080", "8080");
    serve(&server.0, "10.99.0.2:8081", "8081");
    assert_eq!(call(&client.0, "10.99.0.2:8081"), Ok("8081".into()), "the lab itself works");

    let mut tx = Transaction::new();
    for op in [
        Op::AddTable { comment: None },
        Op::AddChain { name: "nat-output".into(), base: Some(BaseChain { kind: ChainType::Nat, hook: Hook::Output, priority: -100 }), comment: None },
        Op::AddChain { name: "filter-output".into(), base: Some(BaseChain { kind: ChainType::Filter, hook: Hook::Output, priority: -110 }), comment: None },
        chain("services"),
        chain(SVC),
        chain(EP_A),
        chain(EP_B),
        chain("reject-chain"),
        set("service-ips", Key::DaddrProtoPort, true),
        set("no-endpoint-services", Key::DaddrProtoPort, true),
        pick_map(SVC, 2),
        picks(SVC, &[EP_A, EP_B]),
        rule("nat-output", vec![jump("services")]),
        rule("services", vec![Stmt::Vmap { key: Key::DaddrProtoPort, map: "service-ips".into() }]),
        rule(SVC, vec![Stmt::NumgenVmap { modulus: 2, map: SVC.into() }]),
        rule(EP_A, vec![Stmt::Dnat { proto: Protocol::Tcp, addr: ip("10.99.0.2"), port: 8080 }]),
        rule(EP_B, vec![Stmt::Dnat { proto: Protocol::Tcp, addr: ip("10.99.0.2"), port: 8081 }]),
        rule("filter-output", vec![Stmt::CtStateNew, Stmt::Vmap { key: Key::DaddrProtoPort, map: "no-endpoint-services".into() }]),
        rule("reject-chain", vec![Stmt::Reject]),
        Op::AddElements { set: "service-ips".into(), elements: vec![to(KeyValue::AddrProtoPort(ip("10.96.0.10"), Protocol::Tcp, 80), goto(SVC))] },
        Op::AddElements {
            set: "no-endpoint-services".into(),
            elements: vec![to(KeyValue::AddrProtoPort(ip("10.96.0.10"), Protocol::Tcp, 81), goto("reject-chain"))],
        },
    ] {
        tx.push(op);
    }
    netlink(&client).apply(&tx).unwrap_or_else(|e| panic!("{e}\n{}", tx.display(TABLE)));

    let answers: BTreeSet<String> = (0..40).map(|_| call(&client.0, "10.96.0.10:80").unwrap_or_else(|e| panic!("10.96.0.10:80: {e:?}"))).collect();
    assert_eq!(answers, ["8080".to_string(), "8081".to_string()].into(), "numgen spreads connections over both endpoints");

    let start = Instant::now();
    assert_eq!(call(&client.0, "10.96.0.10:81"), Err(ErrorKind::ConnectionRefused), "a port without endpoints is rejected");
    assert!(start.elapsed() < Duration::from_secs(1), "refused at once, not timed out: {:?}", start.elapsed());
}

/// 1,000 Service chains of 10 rules, each with an endpoint chain, and 10,000 map elements: the
/// size of a full sync of 1,000 Services. The time is printed, not asserted (the machine varies).
#[test]
fn a_large_transaction_applies() {
    if !privileged() {
        return;
    }
    const CHAINS: usize = 1000;
    const RULES: usize = 10;
    const ELEMENTS: u32 = 10_000;
    let ns = Netns::new("big");
    let nft = netlink(&ns);

    let full_sync = || {
        let mut tx = Transaction::new();
        tx.push(Op::AddTable { comment: Some("rules for kube-proxy".into()) });
        tx.push(Op::AddChain { name: "nat-output".into(), base: Some(BaseChain { kind: ChainType::Nat, hook: Hook::Output, priority: -100 }), comment: None });
        tx.push(chain("services"));
        tx.push(chain("mark-for-masquerade"));
        tx.push(Op::FlushChain("services".into()));
        tx.push(Op::FlushChain("mark-for-masquerade".into()));
        tx.push(set("service-ips", Key::DaddrProtoPort, true));
        tx.push(Op::FlushSet("service-ips".into()));
        tx.push(rule("nat-output", vec![jump("services")]));
        tx.push(rule("services", vec![Stmt::Vmap { key: Key::DaddrProtoPort, map: "service-ips".into() }]));
        tx.push(rule("mark-for-masquerade", vec![Stmt::MarkOr(0x4000)]));
        for c in 0..CHAINS {
            let svc = format!("service-{c:08}-default/svc-{c}/tcp/http");
            let ep = format!("endpoint-{c:08}-default/svc-{c}/tcp/http__10.244.{}.{}/8080", c / 250, c % 250 + 1);
            for name in [&svc, &ep] {
                tx.push(chain(name));
                tx.push(Op::FlushChain(name.clone()));
            }
            tx.push(pick_map(&svc, 1));
            tx.push(Op::FlushSet(svc.clone()));
            tx.push(picks(&svc, &[&ep]));
            for r in 0..RULES - 2 {
                tx.push(Op::AddRule {
                    chain: svc.clone(),
                    rule: Rule {
                        stmts: vec![
                            Stmt::Ip { field: Key::Saddr, negate: true, net: cidr("10.244.0.0/16") },
                            Stmt::L4Proto(Protocol::Tcp),
                            Stmt::Dport(Protocol::Tcp, 80 + r as u16),
                            jump("mark-for-masquerade"),
                        ],
                        comment: Some(format!("rule {r}")),
                    },
                });
            }
            tx.push(rule(&svc, vec![Stmt::NumgenVmap { modulus: 1, map: svc.clone() }]));
            tx.push(rule(&ep, vec![Stmt::Dnat { proto: Protocol::Tcp, addr: Ipv4Addr::from(0x0af4_0000 + c as u32), port: 8080 }]));
        }
        let service = |c: usize| format!("service-{c:08}-default/svc-{c}/tcp/http");
        let elements = (0..ELEMENTS).map(|i| to(KeyValue::AddrProtoPort(Ipv4Addr::from(0x0a60_0000 + i), Protocol::Tcp, 80), goto(&service(i as usize % CHAINS)))).collect();
        tx.push(Op::AddElements { set: "service-ips".into(), elements });
        tx
    };

    let tx = full_sync();
    for round in ["first full sync", "second full sync (everything exists, flushed and rewritten)"] {
        let start = Instant::now();
        let bytes = nft.apply(&tx).unwrap_or_else(|e| panic!("{round}: {e}"));
        let took = start.elapsed();
        eprintln!(
            "{round}: {} ops, {CHAINS}×2 chains, {} rules, {ELEMENTS} map elements, {:.1} MB batch: applied in {:.1} ms",
            tx.ops.len(),
            CHAINS * RULES,
            bytes as f64 / 1e6,
            took.as_secs_f64() * 1e3
        );
    }
    assert_eq!(nft.list_chains().expect("list_chains").len(), 2 * CHAINS + 3);

    // A partial sync: a chain added and one deleted, the Service's map pointed at the new one, two
    // elements of service-ips.
    let mut tx = Transaction::new();
    let (old_svc, old_ep) = ("service-00000007-default/svc-7/tcp/http", "endpoint-00000007-default/svc-7/tcp/http__10.244.0.8/8080");
    tx.push(chain("endpoint-new"));
    tx.push(rule("endpoint-new", vec![Stmt::Dnat { proto: Protocol::Tcp, addr: ip("10.244.9.9"), port: 8080 }]));
    tx.push(Op::DeleteElements { set: old_svc.into(), elements: vec![key(KeyValue::Number(0))] });
    tx.push(picks(old_svc, &["endpoint-new"]));
    tx.push(Op::FlushChain(old_ep.into()));
    tx.push(Op::DeleteChain(old_ep.into()));
    tx.push(Op::DeleteElements { set: "service-ips".into(), elements: vec![key(KeyValue::AddrProtoPort(ip("10.96.0.7"), Protocol::Tcp, 80))] });
    tx.push(Op::AddElements { set: "service-ips".into(), elements: vec![to(KeyValue::AddrProtoPort(ip("10.96.200.7"), Protocol::Tcp, 80), goto(old_svc))] });
    let start = Instant::now();
    nft.apply(&tx).unwrap_or_else(|e| panic!("partial: {e}"));
    eprintln!("partial sync ({} ops): applied in {:.2} ms", tx.ops.len(), start.elapsed().as_secs_f64() * 1e3);
    let start = Instant::now();
    let chains = nft.list_chains().expect("list_chains");
    eprintln!("list_chains ({} chains): {:.1} ms", chains.len(), start.elapsed().as_secs_f64() * 1e3);
    assert!(chains.iter().any(|c| c == "endpoint-new") && !chains.iter().any(|c| c == old_ep));
}
