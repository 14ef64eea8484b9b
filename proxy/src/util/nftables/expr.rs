//! Mirrors nft's src/netlink_linearize.c: each [`Stmt`] of a rule lowered to the kernel's
//! expressions, the small virtual machine nf_tables runs for every packet.
//!
//! Expressions pass values through registers: a load (`payload`, `meta`, `ct`, `fib`,
//! `numgen`) writes one, and a `cmp`, `bitwise`, `lookup`, `nat` or `meta set` reads it. A
//! verdict (`immediate` to the verdict register, or a verdict map's `lookup`) ends the rule.
//! `ip daddr 10.0.0.0/8` is thus:
//!
//! ```text
//!   payload  network header + 16, 4 bytes  → reg 8
//!   bitwise  reg 8 & 255.0.0.0             → reg 8
//!   cmp      reg 8 == 10.0.0.0
//! ```
//!
//! Registers are addressed as 4-byte slots (NFT_REG32_00 = 8 onwards), so a concatenated key
//! (`ip daddr . meta l4proto . th dport`) is its fields in consecutive slots, each zero-padded
//! to 4 bytes: 12 bytes, which is also how a set's elements of that key are laid out. Loads
//! zero the slot's unused bytes, so a 1-byte protocol compares equal to `proto 0 0 0`.
//!
//! Byte order: packet fields are loaded as they are on the wire (big-endian); values the kernel
//! computes (`meta mark`, `ct state`, `fib … type`, `numgen`) are host-endian u32s.

use std::ops::Deref;

use super::buf::{Buf, NFTA_DATA_VALUE, NFTA_LIST_ELEM};
use super::{ChainType, Hook, Key, KeyValue, Stmt, Verdict};
use crate::serviceport::Protocol;

// linux/netfilter/nf_tables.h: enum nft_registers
const NFT_REG_VERDICT: u32 = 0;
const NFT_REG32_00: u32 = 8;

// enum nft_expr_attributes
const NFTA_EXPR_NAME: u16 = 1;
const NFTA_EXPR_DATA: u16 = 2;
// enum nft_data_attributes, enum nft_verdict_attributes
const NFTA_DATA_VERDICT: u16 = 2;
const NFTA_VERDICT_CODE: u16 = 1;
const NFTA_VERDICT_CHAIN: u16 = 2;
// enum nft_immediate_attributes
const NFTA_IMMEDIATE_DREG: u16 = 1;
const NFTA_IMMEDIATE_DATA: u16 = 2;
// enum nft_payload_attributes, enum nft_payload_bases
const NFTA_PAYLOAD_DREG: u16 = 1;
const NFTA_PAYLOAD_BASE: u16 = 2;
const NFTA_PAYLOAD_OFFSET: u16 = 3;
const NFTA_PAYLOAD_LEN: u16 = 4;
const NFT_PAYLOAD_NETWORK_HEADER: u32 = 1;
const NFT_PAYLOAD_TRANSPORT_HEADER: u32 = 2;
// enum nft_cmp_attributes, enum nft_cmp_ops
const NFTA_CMP_SREG: u16 = 1;
const NFTA_CMP_OP: u16 = 2;
const NFTA_CMP_DATA: u16 = 3;
const NFT_CMP_EQ: u32 = 0;
const NFT_CMP_NEQ: u32 = 1;
// enum nft_bitwise_attributes (no NFTA_BITWISE_OP: mask-and-xor is the default)
const NFTA_BITWISE_SREG: u16 = 1;
const NFTA_BITWISE_DREG: u16 = 2;
const NFTA_BITWISE_LEN: u16 = 3;
const NFTA_BITWISE_MASK: u16 = 4;
const NFTA_BITWISE_XOR: u16 = 5;
// enum nft_lookup_attributes, enum nft_lookup_flags
const NFTA_LOOKUP_SET: u16 = 1;
const NFTA_LOOKUP_SREG: u16 = 2;
const NFTA_LOOKUP_DREG: u16 = 3;
const NFTA_LOOKUP_SET_ID: u16 = 4;
const NFTA_LOOKUP_FLAGS: u16 = 5;
const NFT_LOOKUP_F_INV: u32 = 1;
// enum nft_dynset_attributes, enum nft_dynset_ops
const NFTA_DYNSET_SET_NAME: u16 = 1;
const NFTA_DYNSET_OP: u16 = 3;
const NFTA_DYNSET_SREG_KEY: u16 = 4;
const NFT_DYNSET_OP_UPDATE: u32 = 1;
// enum nft_meta_attributes, enum nft_meta_keys
const NFTA_META_DREG: u16 = 1;
const NFTA_META_KEY: u16 = 2;
const NFTA_META_SREG: u16 = 3;
const NFT_META_MARK: u32 = 3;
const NFT_META_L4PROTO: u32 = 16;
// enum nft_ct_attributes, enum nft_ct_keys
const NFTA_CT_DREG: u16 = 1;
const NFTA_CT_KEY: u16 = 2;
const NFT_CT_STATE: u32 = 0;
/// linux/netfilter/nf_conntrack_common.h: NF_CT_STATE_BIT(IP_CT_NEW) = 1 << (2 + 1).
const NF_CT_STATE_BIT_NEW: u32 = 8;
// enum nft_fib_attributes, enum nft_fib_result, enum nft_fib_flags
const NFTA_FIB_DREG: u16 = 1;
const NFTA_FIB_RESULT: u16 = 2;
const NFTA_FIB_FLAGS: u16 = 3;
const NFT_FIB_RESULT_ADDRTYPE: u32 = 3;
const NFTA_FIB_F_SADDR: u32 = 1;
const NFTA_FIB_F_DADDR: u32 = 2;
/// linux/rtnetlink.h: an address of this host.
const RTN_LOCAL: u32 = 2;
// enum nft_ng_attributes, enum nft_ng_types
const NFTA_NG_DREG: u16 = 1;
const NFTA_NG_MODULUS: u16 = 2;
const NFTA_NG_TYPE: u16 = 3;
const NFT_NG_RANDOM: u32 = 1;
// enum nft_masq_attributes; linux/netfilter/nf_nat.h
const NFTA_MASQ_FLAGS: u16 = 1;
const NF_NAT_RANGE_PROTO_RANDOM_FULLY: u32 = 0x10;
// enum nft_nat_attributes, enum nft_nat_types (the kernel infers NF_NAT_RANGE_MAP_IPS and
// NF_NAT_RANGE_PROTO_SPECIFIED from the registers given)
const NFTA_NAT_TYPE: u16 = 1;
const NFTA_NAT_FAMILY: u16 = 2;
const NFTA_NAT_REG_ADDR_MIN: u16 = 3;
const NFTA_NAT_REG_PROTO_MIN: u16 = 5;
const NFT_NAT_DNAT: u32 = 1;
const NFPROTO_IPV4: u32 = 2;
// enum nft_reject_attributes, enum nft_reject_types; linux/icmp.h
const NFTA_REJECT_TYPE: u16 = 1;
const NFTA_REJECT_ICMP_CODE: u16 = 2;
const NFT_REJECT_ICMP_UNREACH: u32 = 0;
const ICMP_PORT_UNREACH: u8 = 3;
// linux/netfilter.h: verdicts; nf_tables.h: enum nft_verdicts
const NF_DROP: u32 = 0;
const NF_ACCEPT: u32 = 1;
const NFT_JUMP: i32 = -3;
const NFT_GOTO: i32 = -4;
const NFT_RETURN: i32 = -5;
// linux/netfilter.h: enum nf_inet_hooks
const NF_INET_PRE_ROUTING: u32 = 0;
const NF_INET_LOCAL_IN: u32 = 1;
const NF_INET_FORWARD: u32 = 2;
const NF_INET_LOCAL_OUT: u32 = 3;
const NF_INET_POST_ROUTING: u32 = 4;

// nft's datatype ids (src/datatype.h), kept by the kernel as a set's key type for `nft list`;
// a concatenation's is its fields' ids, each shifted in by TYPE_BITS (concat_subtype_add).
pub(super) const TYPE_INTEGER: u32 = 4;
const TYPE_IPADDR: u32 = 7;
const TYPE_INET_PROTOCOL: u32 = 12;
const TYPE_INET_SERVICE: u32 = 13;
const TYPE_BITS: u32 = 6;

pub(super) fn hook_number(hook: Hook) -> u32 {
    match hook {
        Hook::Prerouting => NF_INET_PRE_ROUTING,
        Hook::Input => NF_INET_LOCAL_IN,
        Hook::Forward => NF_INET_FORWARD,
        Hook::Output => NF_INET_LOCAL_OUT,
        Hook::Postrouting => NF_INET_POST_ROUTING,
    }
}

pub(super) fn chain_type_name(kind: ChainType) -> &'static str {
    match kind {
        ChainType::Filter => "filter",
        ChainType::Nat => "nat",
    }
}

/// The IP protocol number (`meta l4proto`).
fn proto_number(p: Protocol) -> u8 {
    match p {
        Protocol::Tcp => 6,
        Protocol::Udp => 17,
        Protocol::Sctp => 132,
    }
}

/// A set's key length: 4 bytes a field.
pub(super) fn key_len(key: Key) -> u32 {
    match key {
        Key::Saddr | Key::Daddr => 4,
        Key::DaddrProtoPort => 12,
        Key::ProtoPort => 8,
        Key::Numgen(_) => 4,
    }
}

/// A set's key type, as nft names it (`ipv4_addr . inet_proto . inet_service`).
pub(super) fn key_type(key: Key) -> u32 {
    let concat = |types: &[u32]| types.iter().fold(0, |t, sub| (t << TYPE_BITS) | sub);
    match key {
        Key::Saddr | Key::Daddr => TYPE_IPADDR,
        Key::DaddrProtoPort => concat(&[TYPE_IPADDR, TYPE_INET_PROTOCOL, TYPE_INET_SERVICE]),
        Key::ProtoPort => concat(&[TYPE_INET_PROTOCOL, TYPE_INET_SERVICE]),
        Key::Numgen(_) => TYPE_INTEGER,
    }
}

/// An element's key, laid out as the registers a lookup of that key reads.
pub(super) struct KeyBytes {
    bytes: [u8; 12],
    len: usize,
}

impl Deref for KeyBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

pub(super) fn key_bytes(kv: &KeyValue) -> KeyBytes {
    let mut bytes = [0; 12];
    let len = match *kv {
        KeyValue::Addr(a) => {
            bytes[..4].copy_from_slice(&a.octets());
            4
        }
        KeyValue::AddrProtoPort(a, p, port) => {
            bytes[..4].copy_from_slice(&a.octets());
            bytes[4] = proto_number(p);
            bytes[8..10].copy_from_slice(&port.to_be_bytes());
            12
        }
        KeyValue::ProtoPort(p, port) => {
            bytes[0] = proto_number(p);
            bytes[4..6].copy_from_slice(&port.to_be_bytes());
            8
        }
        // numgen writes a host-endian u32.
        KeyValue::Number(i) => {
            bytes[..4].copy_from_slice(&i.to_ne_bytes());
            4
        }
    };
    KeyBytes { bytes, len }
}

/// A verdict as the kernel codes it: the code, and the chain of a jump or goto.
pub(super) type VerdictParts<'a> = (u32, Option<&'a str>);

pub(super) fn verdict_parts(v: &Verdict) -> VerdictParts<'_> {
    match v {
        Verdict::Accept => (NF_ACCEPT, None),
        Verdict::Drop => (NF_DROP, None),
        Verdict::Return => (NFT_RETURN as u32, None),
        Verdict::Jump(c) => (NFT_JUMP as u32, Some(c)),
        Verdict::Goto(c) => (NFT_GOTO as u32, Some(c)),
    }
}

/// A verdict as nested data (`immediate`'s and a map element's value).
pub(super) fn verdict_data(b: &mut Buf, ty: u16, (code, chain): VerdictParts<'_>) {
    let data = b.nest(ty);
    let verdict = b.nest(NFTA_DATA_VERDICT);
    b.be32(NFTA_VERDICT_CODE, code);
    if let Some(c) = chain {
        b.str(NFTA_VERDICT_CHAIN, c);
    }
    b.end_nest(verdict);
    b.end_nest(data);
}

/// Writes a rule's expressions (the contents of NFTA_RULE_EXPRESSIONS).
pub(super) fn rule(b: &mut Buf, stmts: &[Stmt]) {
    for s in stmts {
        stmt(b, s);
    }
}

fn stmt(b: &mut Buf, s: &Stmt) {
    const R: u32 = NFT_REG32_00;
    match s {
        Stmt::Ip { field, negate, net } => {
            payload(b, R, NFT_PAYLOAD_NETWORK_HEADER, addr_offset(*field), 4);
            if net.prefix < 32 {
                let mask = if net.prefix == 0 { 0 } else { u32::MAX << (32 - net.prefix) };
                bitwise(b, R, mask.to_be_bytes(), [0; 4]);
            }
            cmp(b, R, op(*negate), &net.network.octets());
        }
        Stmt::L4Proto(p) => l4proto(b, *p),
        Stmt::Dport(_, port) => {
            payload(b, R, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2);
            cmp(b, R, NFT_CMP_EQ, &port.to_be_bytes());
        }
        Stmt::InSet { key, set, negate } => {
            load_key(b, *key);
            lookup(b, set, None, R, None, *negate);
        }
        Stmt::Vmap { key, map } => {
            load_key(b, *key);
            lookup(b, map, None, R, Some(NFT_REG_VERDICT), false);
        }
        Stmt::FibLocal { field, negate } => {
            let flags = if *field == Key::Saddr { NFTA_FIB_F_SADDR } else { NFTA_FIB_F_DADDR };
            expr(b, "fib", |b| {
                b.be32(NFTA_FIB_DREG, R);
                b.be32(NFTA_FIB_RESULT, NFT_FIB_RESULT_ADDRTYPE);
                b.be32(NFTA_FIB_FLAGS, flags);
            });
            cmp(b, R, op(*negate), &RTN_LOCAL.to_ne_bytes());
        }
        Stmt::CtStateNew => {
            expr(b, "ct", |b| {
                b.be32(NFTA_CT_DREG, R);
                b.be32(NFTA_CT_KEY, NFT_CT_STATE);
            });
            bitwise(b, R, NF_CT_STATE_BIT_NEW.to_ne_bytes(), [0; 4]);
            cmp(b, R, NFT_CMP_NEQ, &[0; 4]);
        }
        Stmt::MarkUnset(m) => {
            meta_load(b, R, NFT_META_MARK);
            bitwise(b, R, m.to_ne_bytes(), [0; 4]);
            cmp(b, R, NFT_CMP_EQ, &[0; 4]);
        }
        // mark | m is (mark & !m) ^ m; mark ^ m is (mark & all) ^ m.
        Stmt::MarkOr(m) => {
            meta_load(b, R, NFT_META_MARK);
            bitwise(b, R, (!m).to_ne_bytes(), m.to_ne_bytes());
            meta_set(b, NFT_META_MARK, R);
        }
        Stmt::MarkXor(m) => {
            meta_load(b, R, NFT_META_MARK);
            bitwise(b, R, u32::MAX.to_ne_bytes(), m.to_ne_bytes());
            meta_set(b, NFT_META_MARK, R);
        }
        Stmt::NumgenVmap { modulus, map } => {
            load_key(b, Key::Numgen(*modulus));
            lookup(b, map, None, R, Some(NFT_REG_VERDICT), false);
        }
        // The element's timeout is the set's.
        Stmt::UpdateSet { set, key } => {
            load_key(b, *key);
            expr(b, "dynset", |b| {
                b.str(NFTA_DYNSET_SET_NAME, set);
                b.be32(NFTA_DYNSET_OP, NFT_DYNSET_OP_UPDATE);
                b.be32(NFTA_DYNSET_SREG_KEY, R);
            });
        }
        Stmt::Masquerade { fully_random } => expr(b, "masq", |b| {
            if *fully_random {
                b.be32(NFTA_MASQ_FLAGS, NF_NAT_RANGE_PROTO_RANDOM_FULLY);
            }
        }),
        Stmt::Dnat { proto, addr, port } => {
            l4proto(b, *proto);
            immediate(b, R, &addr.octets());
            immediate(b, R + 1, &port.to_be_bytes());
            expr(b, "nat", |b| {
                b.be32(NFTA_NAT_TYPE, NFT_NAT_DNAT);
                b.be32(NFTA_NAT_FAMILY, NFPROTO_IPV4);
                b.be32(NFTA_NAT_REG_ADDR_MIN, R);
                b.be32(NFTA_NAT_REG_PROTO_MIN, R + 1);
            });
        }
        // ICMP port unreachable, as iptables' REJECT (a TCP connect() sees ECONNREFUSED).
        Stmt::Reject => expr(b, "reject", |b| {
            b.be32(NFTA_REJECT_TYPE, NFT_REJECT_ICMP_UNREACH);
            b.u8(NFTA_REJECT_ICMP_CODE, ICMP_PORT_UNREACH);
        }),
        Stmt::Counter => expr(b, "counter", |_| {}),
        Stmt::Verdict(v) => expr(b, "immediate", |b| {
            b.be32(NFTA_IMMEDIATE_DREG, NFT_REG_VERDICT);
            verdict_data(b, NFTA_IMMEDIATE_DATA, verdict_parts(v));
        }),
    }
}

fn op(negate: bool) -> u32 {
    if negate { NFT_CMP_NEQ } else { NFT_CMP_EQ }
}

/// The offset of `ip saddr` / `ip daddr` in the IPv4 header.
fn addr_offset(field: Key) -> u32 {
    if field == Key::Saddr { 12 } else { 16 }
}

/// Loads a key into the registers from NFT_REG32_00 on, one 4-byte slot a field.
fn load_key(b: &mut Buf, key: Key) {
    const R: u32 = NFT_REG32_00;
    match key {
        Key::Saddr | Key::Daddr => payload(b, R, NFT_PAYLOAD_NETWORK_HEADER, addr_offset(key), 4),
        Key::DaddrProtoPort => {
            payload(b, R, NFT_PAYLOAD_NETWORK_HEADER, addr_offset(Key::Daddr), 4);
            meta_load(b, R + 1, NFT_META_L4PROTO);
            payload(b, R + 2, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2);
        }
        Key::ProtoPort => {
            meta_load(b, R, NFT_META_L4PROTO);
            payload(b, R + 1, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2);
        }
        Key::Numgen(modulus) => expr(b, "numgen", |b| {
            b.be32(NFTA_NG_DREG, R);
            b.be32(NFTA_NG_MODULUS, modulus);
            b.be32(NFTA_NG_TYPE, NFT_NG_RANDOM);
        }),
    }
}

/// One expression: NFTA_LIST_ELEM { NFTA_EXPR_NAME, NFTA_EXPR_DATA { … } }.
fn expr(b: &mut Buf, name: &str, data: impl FnOnce(&mut Buf)) {
    let e = b.nest(NFTA_LIST_ELEM);
    b.str(NFTA_EXPR_NAME, name);
    let d = b.nest(NFTA_EXPR_DATA);
    data(b);
    b.end_nest(d);
    b.end_nest(e);
}

fn payload(b: &mut Buf, dreg: u32, base: u32, offset: u32, len: u32) {
    expr(b, "payload", |b| {
        b.be32(NFTA_PAYLOAD_DREG, dreg);
        b.be32(NFTA_PAYLOAD_BASE, base);
        b.be32(NFTA_PAYLOAD_OFFSET, offset);
        b.be32(NFTA_PAYLOAD_LEN, len);
    });
}

fn meta_load(b: &mut Buf, dreg: u32, key: u32) {
    expr(b, "meta", |b| {
        b.be32(NFTA_META_DREG, dreg);
        b.be32(NFTA_META_KEY, key);
    });
}

fn meta_set(b: &mut Buf, key: u32, sreg: u32) {
    expr(b, "meta", |b| {
        b.be32(NFTA_META_KEY, key);
        b.be32(NFTA_META_SREG, sreg);
    });
}

/// `meta l4proto <p>`
fn l4proto(b: &mut Buf, p: Protocol) {
    meta_load(b, NFT_REG32_00, NFT_META_L4PROTO);
    cmp(b, NFT_REG32_00, NFT_CMP_EQ, &[proto_number(p)]);
}

fn value(b: &mut Buf, ty: u16, data: &[u8]) {
    let n = b.nest(ty);
    b.attr(NFTA_DATA_VALUE, data);
    b.end_nest(n);
}

fn cmp(b: &mut Buf, sreg: u32, op: u32, data: &[u8]) {
    expr(b, "cmp", |b| {
        b.be32(NFTA_CMP_SREG, sreg);
        b.be32(NFTA_CMP_OP, op);
        value(b, NFTA_CMP_DATA, data);
    });
}

/// reg = (reg & mask) ^ xor, on 4 bytes.
fn bitwise(b: &mut Buf, reg: u32, mask: [u8; 4], xor: [u8; 4]) {
    expr(b, "bitwise", |b| {
        b.be32(NFTA_BITWISE_SREG, reg);
        b.be32(NFTA_BITWISE_DREG, reg);
        b.be32(NFTA_BITWISE_LEN, 4);
        value(b, NFTA_BITWISE_MASK, &mask);
        value(b, NFTA_BITWISE_XOR, &xor);
    });
}

fn lookup(b: &mut Buf, set: &str, set_id: Option<u32>, sreg: u32, dreg: Option<u32>, invert: bool) {
    expr(b, "lookup", |b| {
        b.str(NFTA_LOOKUP_SET, set);
        b.be32(NFTA_LOOKUP_SREG, sreg);
        if let Some(d) = dreg {
            b.be32(NFTA_LOOKUP_DREG, d);
        }
        if let Some(id) = set_id {
            b.be32(NFTA_LOOKUP_SET_ID, id);
        }
        if invert {
            b.be32(NFTA_LOOKUP_FLAGS, NFT_LOOKUP_F_INV);
        }
    });
}

fn immediate(b: &mut Buf, dreg: u32, data: &[u8]) {
    expr(b, "immediate", |b| {
        b.be32(NFTA_IMMEDIATE_DREG, dreg);
        value(b, NFTA_IMMEDIATE_DATA, data);
    });
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    #[test]
    fn key_types_combine_as_nft_does() {
        assert_eq!(key_type(Key::Daddr), 7);
        assert_eq!(key_type(Key::ProtoPort), (12 << 6) | 13);
        assert_eq!(key_type(Key::DaddrProtoPort), (((7 << 6) | 12) << 6) | 13);
    }

    #[test]
    fn element_keys_pad_each_field_to_four_bytes() {
        let a = Ipv4Addr::new(10, 96, 0, 1);
        assert_eq!(&*key_bytes(&KeyValue::Addr(a)), &[10, 96, 0, 1]);
        assert_eq!(&*key_bytes(&KeyValue::AddrProtoPort(a, Protocol::Tcp, 443)), &[10, 96, 0, 1, 6, 0, 0, 0, 1, 187, 0, 0]);
        assert_eq!(&*key_bytes(&KeyValue::ProtoPort(Protocol::Udp, 30053)), &[17, 0, 0, 0, 0x75, 0x65, 0, 0]);
        for (kv, key) in [
            (KeyValue::Addr(a), Key::Daddr),
            (KeyValue::AddrProtoPort(a, Protocol::Sctp, 1), Key::DaddrProtoPort),
            (KeyValue::ProtoPort(Protocol::Tcp, 1), Key::ProtoPort),
        ] {
            assert_eq!(key_bytes(&kv).len() as u32, key_len(key));
        }
    }
}
