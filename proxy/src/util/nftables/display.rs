//! Mirrors knftables' objects.go (`writeOperation`): every op as the `nft` command line it stands
//! for, so that a transaction reads as an `nft -f` file and an error names its op as nft would
//! print it. Ops do not know their table, so they are displayed for one:
//! `tx.display("kube-proxy")`, `op.display(nft.table())`.

use std::collections::HashSet;
use std::fmt;
use std::time::Duration;

use super::expr;
use super::{BaseChain, Element, Hook, Key, KeyValue, Op, Rule, Set, Stmt, Transaction, Verdict};

impl Op {
    /// The op as one `nft` line for table `ip <table>` (`add rule ip kube-proxy services …`).
    /// Alone, an op that names a set only (flush, delete) cannot tell a map from a set and says
    /// `set`; in a transaction's text it says `map` for the maps the transaction adds.
    pub fn display<'a>(&'a self, table: &'a str) -> impl fmt::Display + 'a {
        OpLine { op: self, table, map: false }
    }
}

impl Transaction {
    /// The transaction as an `nft -f` file for table `ip <table>`: one op a line.
    pub fn display<'a>(&'a self, table: &'a str) -> impl fmt::Display + 'a {
        TransactionText { tx: self, table }
    }
}

struct TransactionText<'a> {
    tx: &'a Transaction,
    table: &'a str,
}

impl fmt::Display for TransactionText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // nft refuses `flush set` for a map: name the maps this transaction declares.
        let maps: HashSet<&str> = self.tx.ops.iter().filter_map(|op| if let Op::AddSet(s) = op { s.map.then_some(s.name.as_str()) } else { None }).collect();
        for op in &self.tx.ops {
            let map = matches!(op, Op::FlushSet(name) | Op::DeleteSet(name) if maps.contains(name.as_str()));
            writeln!(f, "{}", OpLine { op, table: self.table, map })?;
        }
        Ok(())
    }
}

struct OpLine<'a> {
    op: &'a Op,
    table: &'a str,
    /// The set a flush or delete names is a map.
    map: bool,
}

impl OpLine<'_> {
    fn kind(&self) -> &'static str {
        if self.map { "map" } else { "set" }
    }
}

impl fmt::Display for OpLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = Name(self.table);
        match self.op {
            Op::AddTable { comment } => {
                write!(f, "add table ip {t}")?;
                if let Some(c) = comment {
                    write!(f, " {{ comment {} ; }}", Quoted(c))?;
                }
                Ok(())
            }
            Op::DeleteTable => write!(f, "delete table ip {t}"),
            Op::AddChain { name, base, comment } => {
                write!(f, "add chain ip {t} {}", Name(name))?;
                if base.is_some() || comment.is_some() {
                    f.write_str(" {")?;
                    if let Some(BaseChain { kind, hook, priority }) = base {
                        write!(f, " type {} hook {} priority {priority} ;", expr::chain_type_name(*kind), hook_name(*hook))?;
                    }
                    if let Some(c) = comment {
                        write!(f, " comment {} ;", Quoted(c))?;
                    }
                    f.write_str(" }")?;
                }
                Ok(())
            }
            Op::FlushChain(name) => write!(f, "flush chain ip {t} {}", Name(name)),
            Op::DeleteChain(name) => write!(f, "delete chain ip {t} {}", Name(name)),
            Op::AddRule { chain, rule } => write!(f, "add rule ip {t} {} {rule}", Name(chain)),
            Op::AddSet(set) => write_set(f, t, set),
            Op::FlushSet(name) => write!(f, "flush {} ip {t} {}", self.kind(), Name(name)),
            Op::DeleteSet(name) => write!(f, "delete {} ip {t} {}", self.kind(), Name(name)),
            Op::AddElements { set, elements } => write_elements(f, "add", t, set, elements),
            Op::DeleteElements { set, elements } => write_elements(f, "delete", t, set, elements),
        }
    }
}

fn write_set(f: &mut fmt::Formatter<'_>, t: Name<'_>, set: &Set) -> fmt::Result {
    let kind = if set.map { "map" } else { "set" };
    match set.key {
        // nft has no datatype name for numgen's number: it declares such a map by the expression.
        Key::Numgen(_) => write!(f, "add {kind} ip {t} {} {{ typeof {}", Name(&set.name), set.key)?,
        key => write!(f, "add {kind} ip {t} {} {{ type {}", Name(&set.name), key_type_name(key))?,
    }
    if set.map {
        f.write_str(" : verdict")?;
    }
    f.write_str(" ;")?;
    if let Some(timeout) = set.timeout {
        write!(f, " flags dynamic,timeout ; timeout {} ;", Seconds(timeout))?;
    }
    if let Some(c) = &set.comment {
        write!(f, " comment {} ;", Quoted(c))?;
    }
    f.write_str(" }")
}

fn write_elements(f: &mut fmt::Formatter<'_>, verb: &str, t: Name<'_>, set: &str, elements: &[Element]) -> fmt::Result {
    write!(f, "{verb} element ip {t} {} ", Name(set))?;
    braced(f, elements.iter().map(|e| e as &dyn fmt::Display))
}

/// `{ a, b, c }` (`{ }` when empty).
fn braced<'a>(f: &mut fmt::Formatter<'_>, items: impl Iterator<Item = &'a dyn fmt::Display>) -> fmt::Result {
    f.write_str("{")?;
    for (i, item) in items.enumerate() {
        f.write_str(if i == 0 { " " } else { ", " })?;
        write!(f, "{item}")?;
    }
    f.write_str(" }")
}

fn hook_name(hook: Hook) -> &'static str {
    match hook {
        Hook::Prerouting => "prerouting",
        Hook::Input => "input",
        Hook::Forward => "forward",
        Hook::Output => "output",
        Hook::Postrouting => "postrouting",
    }
}

/// A set's `type`, in nft's datatype names.
fn key_type_name(key: Key) -> &'static str {
    match key {
        Key::Saddr | Key::Daddr => "ipv4_addr",
        Key::DaddrProtoPort => "ipv4_addr . inet_proto . inet_service",
        Key::ProtoPort => "inet_proto . inet_service",
        Key::Numgen(_) => "integer",
    }
}

/// A table, chain or set name: bare, as nft prints it, when nft's scanner reads it as one word
/// (`({letter}|[_.])({letter}|{digit}|[/\-_.])*`, so kube-proxy's `endpoint-…/tcp/…__10.0.0.1/80`
/// is fine), else in double quotes so that a reader sees where it ends. nft itself (1.0.6) takes
/// no quoted chain or set name, nor a bare one that is a keyword of its (`mark`, `filter`): such
/// names work over netlink, but their lines are not valid `nft -f` input.
pub(super) struct Name<'a>(pub(super) &'a str);

impl fmt::Display for Name<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut chars = self.0.chars();
        let bare = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '.')
            && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '-' | '_' | '.'));
        if bare { f.write_str(self.0) } else { write!(f, "\"{}\"", self.0) }
    }
}

struct Quoted<'a>(&'a str);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{}\"", self.0)
    }
}

/// `10800s`, or `1500ms` when not whole seconds.
struct Seconds(Duration);

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.subsec_millis() == 0 { write!(f, "{}s", self.0.as_secs()) } else { write!(f, "{}ms", self.0.as_millis()) }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Jump(c) => write!(f, "jump {}", Name(c)),
            Verdict::Goto(c) => write!(f, "goto {}", Name(c)),
            Verdict::Accept => f.write_str("accept"),
            Verdict::Drop => f.write_str("drop"),
            Verdict::Return => f.write_str("return"),
        }
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Key::Saddr => "ip saddr",
            Key::Daddr => "ip daddr",
            Key::DaddrProtoPort => "ip daddr . meta l4proto . th dport",
            Key::ProtoPort => "meta l4proto . th dport",
            Key::Numgen(n) => return write!(f, "numgen random mod {n}"),
        })
    }
}

impl fmt::Display for KeyValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyValue::Addr(a) => write!(f, "{a}"),
            KeyValue::AddrProtoPort(a, p, port) => write!(f, "{a} . {} . {port}", p.lower()),
            KeyValue::ProtoPort(p, port) => write!(f, "{} . {port}", p.lower()),
            KeyValue::Number(i) => write!(f, "{i}"),
        }
    }
}

impl fmt::Display for Element {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.key)?;
        if let Some(v) = &self.verdict {
            write!(f, " : {v}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Stmt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let not = |negate: bool| if negate { "!= " } else { "" };
        match self {
            Stmt::Ip { field, negate, net } => {
                write!(f, "{field} {}", not(*negate))?;
                if net.prefix == 32 { write!(f, "{}", net.network) } else { write!(f, "{net}") }
            }
            Stmt::L4Proto(p) => write!(f, "meta l4proto {}", p.lower()),
            Stmt::Dport(p, port) => write!(f, "{} dport {port}", p.lower()),
            Stmt::InSet { key, set, negate } => write!(f, "{key} {}@{}", not(*negate), Name(set)),
            Stmt::Vmap { key, map } => write!(f, "{key} vmap @{}", Name(map)),
            Stmt::FibLocal { field, negate } => {
                let which = if *field == Key::Saddr { "saddr" } else { "daddr" };
                write!(f, "fib {which} type {}local", not(*negate))
            }
            Stmt::CtStateNew => f.write_str("ct state new"),
            Stmt::MarkUnset(m) => write!(f, "meta mark & {m:#x} == 0"),
            Stmt::MarkOr(m) => write!(f, "meta mark set meta mark | {m:#x}"),
            Stmt::MarkXor(m) => write!(f, "meta mark set meta mark ^ {m:#x}"),
            Stmt::NumgenVmap { modulus, map } => write!(f, "numgen random mod {modulus} vmap @{}", Name(map)),
            Stmt::UpdateSet { set, key } => write!(f, "update @{} {{ {key} }}", Name(set)),
            Stmt::Masquerade { fully_random: true } => f.write_str("masquerade fully-random"),
            Stmt::Masquerade { fully_random: false } => f.write_str("masquerade"),
            Stmt::Dnat { proto, addr, port } => write!(f, "meta l4proto {} dnat to {addr}:{port}", proto.lower()),
            Stmt::Reject => f.write_str("reject"),
            Stmt::Counter => f.write_str("counter"),
            Stmt::Verdict(v) => write!(f, "{v}"),
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.stmts.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{s}")?;
        }
        if let Some(c) = &self.comment {
            write!(f, " comment {}", Quoted(c))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;
    use crate::serviceport::Protocol;
    use crate::util::cidr::Ipv4Cidr;
    use crate::util::nftables::ChainType;

    fn goto(c: &str) -> Verdict {
        Verdict::Goto(c.to_string())
    }

    #[test]
    fn a_transaction_reads_as_an_nft_file() {
        let svc = "service-ULMVA6XW-default/web/tcp/http";
        let ep = "endpoint-5OJB2KTY-default/web/tcp/http__10.244.1.5/8080";
        let mut tx = Transaction::new();
        tx.push(Op::AddTable { comment: Some("rules for kube-proxy".into()) });
        tx.push(Op::AddChain { name: "services".into(), base: None, comment: None });
        tx.push(Op::AddChain {
            name: "nat-prerouting".into(),
            base: Some(BaseChain { kind: ChainType::Nat, hook: Hook::Prerouting, priority: -100 }),
            comment: None,
        });
        let comment = Some("ClusterIP, ExternalIP and LoadBalancer IP traffic".into());
        tx.push(Op::AddSet(Set { name: "service-ips".into(), key: Key::DaddrProtoPort, map: true, timeout: None, comment }));
        tx.push(Op::AddSet(Set { name: "affinity-X".into(), key: Key::Saddr, map: false, timeout: Some(Duration::from_secs(10800)), comment: None }));
        tx.push(Op::AddSet(Set { name: svc.into(), key: Key::Numgen(2), map: true, timeout: None, comment: None }));
        tx.push(Op::AddRule { chain: "services".into(), rule: Rule { stmts: vec![Stmt::Vmap { key: Key::DaddrProtoPort, map: "service-ips".into() }], comment: None } });
        tx.push(Op::AddRule {
            chain: svc.into(),
            rule: Rule {
                stmts: vec![
                    Stmt::Ip { field: Key::Saddr, negate: true, net: Ipv4Cidr::parse("10.244.0.0/16").unwrap() },
                    Stmt::Verdict(Verdict::Jump("mark-for-masquerade".into())),
                ],
                comment: None,
            },
        });
        tx.push(Op::AddRule { chain: svc.into(), rule: Rule { stmts: vec![Stmt::NumgenVmap { modulus: 2, map: svc.into() }], comment: None } });
        tx.push(Op::AddRule {
            chain: ep.into(),
            rule: Rule {
                stmts: vec![
                    Stmt::Ip { field: Key::Saddr, negate: false, net: Ipv4Cidr::parse("10.244.1.5/32").unwrap() },
                    Stmt::Verdict(Verdict::Jump("mark-for-masquerade".into())),
                ],
                comment: Some("hairpin".into()),
            },
        });
        let stmts = vec![Stmt::UpdateSet { set: "affinity-X".into(), key: Key::Saddr }, Stmt::Dnat { proto: Protocol::Tcp, addr: Ipv4Addr::new(10, 244, 1, 5), port: 8080 }];
        tx.push(Op::AddRule { chain: ep.into(), rule: Rule { stmts, comment: None } });
        tx.push(Op::AddRule { chain: "mark-for-masquerade".into(), rule: Rule { stmts: vec![Stmt::MarkOr(0x4000)], comment: None } });
        tx.push(Op::AddRule {
            chain: "masquerading".into(),
            rule: Rule { stmts: vec![Stmt::MarkUnset(0x4000), Stmt::Verdict(Verdict::Return)], comment: None },
        });
        tx.push(Op::AddRule {
            chain: "filter-input".into(),
            rule: Rule {
                stmts: vec![
                    Stmt::CtStateNew,
                    Stmt::FibLocal { field: Key::Daddr, negate: false },
                    Stmt::InSet { key: Key::Daddr, set: "nodeport-ips".into(), negate: true },
                    Stmt::Verdict(Verdict::Drop),
                ],
                comment: None,
            },
        });
        tx.push(Op::AddElements {
            set: "service-ips".into(),
            elements: vec![
                Element { key: KeyValue::AddrProtoPort(Ipv4Addr::new(10, 96, 0, 1), Protocol::Tcp, 443), verdict: Some(goto(svc)) },
                Element { key: KeyValue::ProtoPort(Protocol::Udp, 30053), verdict: Some(goto("x y")) },
            ],
        });
        tx.push(Op::AddElements { set: svc.into(), elements: vec![Element { key: KeyValue::Number(0), verdict: Some(goto(ep)) }, Element { key: KeyValue::Number(1), verdict: Some(goto("endpoint-B")) }] });
        tx.push(Op::DeleteElements { set: "cluster-ips".into(), elements: vec![Element { key: KeyValue::Addr(Ipv4Addr::new(10, 96, 0, 1)), verdict: None }] });
        tx.push(Op::FlushChain(svc.into()));
        tx.push(Op::DeleteChain(ep.into()));
        tx.push(Op::FlushSet("service-ips".into()));
        tx.push(Op::DeleteSet("affinity-X".into()));
        tx.push(Op::DeleteTable);
        let want = "\
add table ip kube-proxy { comment \"rules for kube-proxy\" ; }
add chain ip kube-proxy services
add chain ip kube-proxy nat-prerouting { type nat hook prerouting priority -100 ; }
add map ip kube-proxy service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment \"ClusterIP, ExternalIP and LoadBalancer IP traffic\" ; }
add set ip kube-proxy affinity-X { type ipv4_addr ; flags dynamic,timeout ; timeout 10800s ; }
add map ip kube-proxy service-ULMVA6XW-default/web/tcp/http { typeof numgen random mod 2 : verdict ; }
add rule ip kube-proxy services ip daddr . meta l4proto . th dport vmap @service-ips
add rule ip kube-proxy service-ULMVA6XW-default/web/tcp/http ip saddr != 10.244.0.0/16 jump mark-for-masquerade
add rule ip kube-proxy service-ULMVA6XW-default/web/tcp/http numgen random mod 2 vmap @service-ULMVA6XW-default/web/tcp/http
add rule ip kube-proxy endpoint-5OJB2KTY-default/web/tcp/http__10.244.1.5/8080 ip saddr 10.244.1.5 jump mark-for-masquerade comment \"hairpin\"
add rule ip kube-proxy endpoint-5OJB2KTY-default/web/tcp/http__10.244.1.5/8080 update @affinity-X { ip saddr } meta l4proto tcp dnat to 10.244.1.5:8080
add rule ip kube-proxy mark-for-masquerade meta mark set meta mark | 0x4000
add rule ip kube-proxy masquerading meta mark & 0x4000 == 0 return
add rule ip kube-proxy filter-input ct state new fib daddr type local ip daddr != @nodeport-ips drop
add element ip kube-proxy service-ips { 10.96.0.1 . tcp . 443 : goto service-ULMVA6XW-default/web/tcp/http, udp . 30053 : goto \"x y\" }
add element ip kube-proxy service-ULMVA6XW-default/web/tcp/http { 0 : goto endpoint-5OJB2KTY-default/web/tcp/http__10.244.1.5/8080, 1 : goto endpoint-B }
delete element ip kube-proxy cluster-ips { 10.96.0.1 }
flush chain ip kube-proxy service-ULMVA6XW-default/web/tcp/http
delete chain ip kube-proxy endpoint-5OJB2KTY-default/web/tcp/http__10.244.1.5/8080
flush map ip kube-proxy service-ips
delete set ip kube-proxy affinity-X
delete table ip kube-proxy
";
        assert_eq!(tx.display("kube-proxy").to_string(), want);
    }

    #[test]
    fn every_statement_has_its_nft_words() {
        let cases = [
            (Stmt::L4Proto(Protocol::Sctp), "meta l4proto sctp"),
            (Stmt::Dport(Protocol::Udp, 53), "udp dport 53"),
            (Stmt::InSet { key: Key::Daddr, set: "cluster-ips".into(), negate: false }, "ip daddr @cluster-ips"),
            (Stmt::Vmap { key: Key::ProtoPort, map: "service-nodeports".into() }, "meta l4proto . th dport vmap @service-nodeports"),
            (Stmt::FibLocal { field: Key::Saddr, negate: true }, "fib saddr type != local"),
            (Stmt::MarkXor(0x4000), "meta mark set meta mark ^ 0x4000"),
            (Stmt::Masquerade { fully_random: true }, "masquerade fully-random"),
            (Stmt::Masquerade { fully_random: false }, "masquerade"),
            (Stmt::Reject, "reject"),
            (Stmt::Counter, "counter"),
            (Stmt::Verdict(Verdict::Accept), "accept"),
            (Stmt::Ip { field: Key::Daddr, negate: false, net: Ipv4Cidr::parse("0.0.0.0/0").unwrap() }, "ip daddr 0.0.0.0/0"),
        ];
        for (stmt, want) in cases {
            assert_eq!(stmt.to_string(), want);
        }
    }

    #[test]
    fn names_are_quoted_only_when_nft_needs_it() {
        for (name, want) in [
            ("services", "services"),
            ("endpoint-5OJB2KTY-default/web/tcp/http__10.244.1.5/8080", "endpoint-5OJB2KTY-default/web/tcp/http__10.244.1.5/8080"),
            ("_x.y", "_x.y"),
            ("1abc", "\"1abc\""),
            ("a b", "\"a b\""),
            ("a:b", "\"a:b\""),
            ("", "\"\""),
        ] {
            assert_eq!(Name(name).to_string(), want);
        }
    }
}
