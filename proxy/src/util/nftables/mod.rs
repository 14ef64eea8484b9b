//! Mirrors sigs.k8s.io/knftables (kube-proxy's nftables client): a [`Transaction`] of operations
//! on one table, applied atomically. knftables writes `nft -f` text and runs the `nft` command;
//! kubelab speaks the kernel's nf_tables netlink protocol itself ([`netlink`]), one batch per
//! transaction, so a sync costs the kernel's commit and not a command that first reads back the
//! whole table. The types here are the rules as kube-proxy's nftables proxier writes them; each
//! displays as the `nft` line it stands for (`nft list table ip kube-proxy` prints the same).
//!
//! IPv4 only (family `ip`), and only the statements kube-proxy's nftables mode uses.

mod buf;
mod display;
mod expr;
pub mod netlink;

pub use netlink::Nftables;

use std::net::Ipv4Addr;
use std::time::Duration;

use crate::serviceport::Protocol;
use crate::util::cidr::Ipv4Cidr;

/// A base chain's hook, as `type <filter|nat> hook <hook> priority <n>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BaseChain {
    pub kind: ChainType,
    pub hook: Hook,
    pub priority: i32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChainType {
    Filter,
    Nat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hook {
    Prerouting,
    Input,
    Forward,
    Output,
    Postrouting,
}

/// The packet field a lookup or a match reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Key {
    /// `ip saddr`
    Saddr,
    /// `ip daddr`
    Daddr,
    /// `ip daddr . meta l4proto . th dport` (a Service's cluster IP, protocol and port)
    DaddrProtoPort,
    /// `meta l4proto . th dport` (a node port)
    ProtoPort,
    /// `numgen random mod N`: a number below N, the key of the map a [`Stmt::NumgenVmap`]
    /// looks up (never loaded from the packet).
    Numgen(u32),
}

/// One element's key, in the shape of its set's [`Key`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KeyValue {
    Addr(Ipv4Addr),
    AddrProtoPort(Ipv4Addr, Protocol, u16),
    ProtoPort(Protocol, u16),
    /// A [`Key::Numgen`] map's key.
    Number(u32),
}

/// A map's value (kube-proxy's maps are all verdict maps).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verdict {
    Jump(String),
    Goto(String),
    Accept,
    Drop,
    Return,
}

/// A named set or verdict map of the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Set {
    pub name: String,
    pub key: Key,
    /// A verdict map (`type … : verdict`) rather than a set.
    pub map: bool,
    /// Elements expire this long after they were added or last updated (`flags dynamic,timeout;
    /// timeout 10800s`: ClientIP affinity's sets, filled by [`Stmt::UpdateSet`]).
    pub timeout: Option<Duration>,
    pub comment: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Element {
    pub key: KeyValue,
    /// For a map: what the key maps to.
    pub verdict: Option<Verdict>,
}

/// One statement of a rule; a rule is a list of them, matched left to right as nft does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stmt {
    /// `ip saddr 10.244.1.5` / `ip daddr != 10.244.0.0/16`: `field` is [`Key::Saddr`] or
    /// [`Key::Daddr`].
    Ip { field: Key, negate: bool, net: Ipv4Cidr },
    /// `meta l4proto tcp`
    L4Proto(Protocol),
    /// `tcp dport 80` (a dport match; the protocol must be matched before it)
    Dport(Protocol, u16),
    /// `ip daddr @cluster-ips` / `ip daddr != @nodeport-ips`: `key` is the set's key.
    InSet { key: Key, set: String, negate: bool },
    /// `ip daddr . meta l4proto . th dport vmap @service-ips`
    Vmap { key: Key, map: String },
    /// `fib saddr type local` / `fib daddr type local` / `… != local`: `field` is
    /// [`Key::Saddr`] or [`Key::Daddr`].
    FibLocal { field: Key, negate: bool },
    /// `ct state new`
    CtStateNew,
    /// `meta mark & 0x4000 == 0`
    MarkUnset(u32),
    /// `meta mark set meta mark | 0x4000`
    MarkOr(u32),
    /// `meta mark set meta mark ^ 0x4000`
    MarkXor(u32),
    /// `numgen random mod N vmap @map`: a named map keyed by [`Key::Numgen`] (kube-proxy writes
    /// an anonymous map, `vmap { 0 : goto a, … }`; the kernel binds each anonymous set by
    /// walking the whole transaction, which makes a full sync of a thousand Services quadratic).
    NumgenVmap { modulus: u32, map: String },
    /// `update @set { ip saddr }` (the set has a timeout: the element's clock restarts).
    UpdateSet { set: String, key: Key },
    /// `masquerade fully-random` / `masquerade`
    Masquerade { fully_random: bool },
    /// `meta l4proto tcp dnat to 10.244.1.5:8080`
    Dnat { proto: Protocol, addr: Ipv4Addr, port: u16 },
    /// `reject` (ICMP port unreachable, as iptables' REJECT)
    Reject,
    /// `counter`
    Counter,
    Verdict(Verdict),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub stmts: Vec<Stmt>,
    pub comment: Option<String>,
}

/// One operation of a transaction. Chains, sets and rules belong to the [`Nftables`] handle's
/// table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// `add table ip <name>` (no error if it exists).
    AddTable { comment: Option<String> },
    /// `delete table ip <name>`: everything in it goes with it. An error if it does not exist.
    DeleteTable,
    /// `add chain ip <table> <name> [{ type … hook … priority … ; }]` (no error if it exists).
    AddChain { name: String, base: Option<BaseChain>, comment: Option<String> },
    /// `flush chain`: its rules removed, the chain kept.
    FlushChain(String),
    /// `delete chain`: must be empty (flushed earlier in the same transaction) and unreferenced.
    DeleteChain(String),
    /// `add rule ip <table> <chain> <stmts>` — appended at the chain's end.
    AddRule { chain: String, rule: Rule },
    /// `add set` / `add map` (no error if it exists with the same type).
    AddSet(Set),
    /// `flush set` / `flush map`: every element removed.
    FlushSet(String),
    DeleteSet(String),
    /// `add element ip <table> <set> { … }` (no error for elements already there).
    AddElements { set: String, elements: Vec<Element> },
    /// `delete element …`: an error for an element not there.
    DeleteElements { set: String, elements: Vec<Element> },
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Transaction {
    pub ops: Vec<Op>,
}

impl Transaction {
    pub fn new() -> Transaction {
        Transaction::default()
    }

    pub fn push(&mut self, op: Op) {
        self.ops.push(op);
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}
