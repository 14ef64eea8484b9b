//! Mirrors knftables' nftables.go (the client kube-proxy's nftables mode applies its transactions
//! with), but speaks the kernel's nf_tables netlink protocol itself, as nft does underneath
//! (nftables' src/mnl.c): no `nft` command, no libnftnl.
//!
//! A [`Transaction`] becomes one **batch** on a NETLINK_NETFILTER socket:
//!
//! ```text
//!   NFNL_MSG_BATCH_BEGIN (res_id NFNL_SUBSYS_NFTABLES)
//!   NFT_MSG_NEWTABLE / NEWCHAIN / DELRULE / NEWRULE / NEWSET / NEWSETELEM / …   one or more per op
//!   NFNL_MSG_BATCH_END
//! ```
//!
//! The kernel applies a batch all or nothing: it checks every message, and commits only if none
//! failed. The whole batch must arrive in one `sendmsg` (the kernel aborts a batch whose skb ends
//! before BATCH_END), so the socket's send buffer is raised to the batch's size, as nft does.
//!
//! **Replies.** The kernel handles a batch inside our `sendmsg` call, and answers only what
//! failed: an error carries the failing message's sequence number, which maps back to its op (a
//! full sync of ~50,000 messages would otherwise be ~50,000 acknowledgements). The last message
//! of the batch also asks for an acknowledgement (`NLM_F_ACK`): its answer, ack or error, comes
//! after everything else the batch produced, so once it is read — and the queue drained, as nft
//! drains it — nothing of this batch is left for the next apply to mistake for its own.

use std::fmt;
use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use super::buf::{Buf, MAX_NEST, NFTA_DATA_VALUE, NFTA_LIST_ELEM, NLA_HDRLEN};
use super::{expr, Element, Key, Op, Set, Transaction};
use crate::error::{Error, Result};

// linux/netlink.h
const NLMSG_HDRLEN: usize = 16;
const NLA_TYPE_MASK: u16 = 0x3fff;
const NLMSG_ERROR: u16 = 0x2;
const NLMSG_DONE: u16 = 0x3;
const NLM_F_REQUEST: u16 = 0x01;
const NLM_F_ACK: u16 = 0x04;
const NLM_F_DUMP_INTR: u16 = 0x10;
const NLM_F_DUMP: u16 = 0x300;
const NLM_F_CREATE: u16 = 0x400;
const NLM_F_APPEND: u16 = 0x800;
/// In an error: only the request's header is echoed (NETLINK_CAP_ACK).
const NLM_F_CAPPED: u16 = 0x100;
/// In an error: extended-ack attributes follow the echoed request.
const NLM_F_ACK_TLVS: u16 = 0x200;
const NLMSGERR_ATTR_MSG: u16 = 1;
const NLMSGERR_ATTR_OFFS: u16 = 2;
// setsockopt(SOL_NETLINK, …): errors echo only the failing message's header, and carry the
// kernel's message and the offset of the attribute it objects to.
const SOL_NETLINK: libc::c_int = 270;
const NETLINK_CAP_ACK: libc::c_int = 10;
const NETLINK_EXT_ACK: libc::c_int = 11;

// linux/netfilter/nfnetlink.h
const NFNL_MSG_BATCH_BEGIN: u16 = 0x10;
const NFNL_MSG_BATCH_END: u16 = 0x11;
const NFNL_SUBSYS_NFTABLES: u16 = 10;
const NFGENMSG_LEN: usize = 4;
/// linux/netfilter.h: the `ip` family.
const NFPROTO_IPV4: u8 = 2;

// linux/netfilter/nf_tables.h: enum nf_tables_msg_types
const NFT_MSG_NEWTABLE: u16 = 0;
const NFT_MSG_GETTABLE: u16 = 1;
const NFT_MSG_DELTABLE: u16 = 2;
const NFT_MSG_NEWCHAIN: u16 = 3;
const NFT_MSG_GETCHAIN: u16 = 4;
const NFT_MSG_DELCHAIN: u16 = 5;
const NFT_MSG_NEWRULE: u16 = 6;
const NFT_MSG_DELRULE: u16 = 8;
const NFT_MSG_NEWSET: u16 = 9;
const NFT_MSG_GETSET: u16 = 10;
const NFT_MSG_DELSET: u16 = 11;
const NFT_MSG_NEWSETELEM: u16 = 12;
const NFT_MSG_DELSETELEM: u16 = 14;

// enum nft_table_attributes
const NFTA_TABLE_NAME: u16 = 1;
const NFTA_TABLE_USERDATA: u16 = 6;
// enum nft_chain_attributes, enum nft_hook_attributes
const NFTA_CHAIN_TABLE: u16 = 1;
const NFTA_CHAIN_NAME: u16 = 3;
const NFTA_CHAIN_HOOK: u16 = 4;
const NFTA_CHAIN_POLICY: u16 = 5;
const NFTA_CHAIN_TYPE: u16 = 7;
const NFTA_CHAIN_USERDATA: u16 = 12;
const NFTA_HOOK_HOOKNUM: u16 = 1;
const NFTA_HOOK_PRIORITY: u16 = 2;
// enum nft_rule_attributes
const NFTA_RULE_TABLE: u16 = 1;
const NFTA_RULE_CHAIN: u16 = 2;
const NFTA_RULE_EXPRESSIONS: u16 = 4;
const NFTA_RULE_USERDATA: u16 = 7;
// enum nft_set_attributes, enum nft_set_desc_attributes, enum nft_set_flags
const NFTA_SET_TABLE: u16 = 1;
const NFTA_SET_NAME: u16 = 2;
const NFTA_SET_FLAGS: u16 = 3;
const NFTA_SET_KEY_TYPE: u16 = 4;
const NFTA_SET_KEY_LEN: u16 = 5;
const NFTA_SET_DATA_TYPE: u16 = 6;
const NFTA_SET_ID: u16 = 10;
const NFTA_SET_TIMEOUT: u16 = 11;
const NFTA_SET_USERDATA: u16 = 13;
const NFT_SET_ANONYMOUS: u32 = 0x1;
const NFT_SET_MAP: u32 = 0x8;
const NFT_SET_TIMEOUT: u32 = 0x10;
const NFT_SET_EVAL: u32 = 0x20;
/// enum nft_data_types: a map's values are verdicts.
const NFT_DATA_VERDICT: u32 = 0xffff_ff00;
// enum nft_set_elem_list_attributes, enum nft_set_elem_attributes, enum nft_list_attributes
const NFTA_SET_ELEM_LIST_TABLE: u16 = 1;
const NFTA_SET_ELEM_LIST_SET: u16 = 2;
const NFTA_SET_ELEM_LIST_ELEMENTS: u16 = 3;
const NFTA_SET_ELEM_KEY: u16 = 1;
const NFTA_SET_ELEM_DATA: u16 = 2;
/// linux/netfilter.h: a base chain's policy.
const NF_ACCEPT: u32 = 1;

// libnftnl's udata.h: user data is a list of (type u8, length u8, value) that the kernel keeps
// for nft; a comment is type 0 for tables, chains and rules, 7 for sets.
const NFTNL_UDATA_COMMENT: u8 = 0;
const NFTNL_UDATA_SET_KEYBYTEORDER: u8 = 0;
const NFTNL_UDATA_SET_COMMENT: u8 = 7;

/// The socket's receive buffer: room for the errors of a batch in which every message fails.
const RCVBUF: usize = 8 << 20;
/// Long enough for any dump datagram and any error (errors echo only the failing header).
const RECV_CHUNK: usize = 256 << 10;
/// How long a reply may take before the socket is given up on (the kernel answers a batch
/// within our `sendmsg`; this only bounds a kernel that never answers).
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// A handle on table `ip <table>` of one network namespace. Usable from several threads: the
/// socket and its buffers sit behind a mutex (a netlink socket is one conversation; the
/// proxier applies one transaction at a time anyway).
pub struct Nftables {
    table: String,
    netns: Option<String>,
    conn: Mutex<Conn>,
}

impl fmt::Debug for Nftables {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Nftables").field("table", &self.table).field("netns", &self.netns).finish_non_exhaustive()
    }
}

impl Nftables {
    /// Operations go to table `ip <table>` of this process's network namespace.
    pub fn new(table: &str) -> Result<Nftables> {
        let fd = open_socket().map_err(|e| io_error("open a NETLINK_NETFILTER socket", &e))?;
        Ok(Nftables::with_socket(table, None, fd))
    }

    /// … of the named network namespace (`/run/netns/<name>`, as `ip netns add` makes it). The
    /// socket is opened by a short-lived thread that enters the namespace: a netlink socket
    /// stays in the namespace it was created in, and this process's threads stay where they are.
    pub fn in_netns(table: &str, netns: &str) -> Result<Nftables> {
        let path = format!("/run/netns/{netns}");
        let opened = std::thread::spawn(move || -> io::Result<OwnedFd> {
            let ns = std::fs::File::open(&path)?;
            // SAFETY: setns on this thread only, with a namespace file we hold open; the thread
            // ends right after opening the socket.
            if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(io::Error::last_os_error());
            }
            open_socket()
        })
        .join();
        let what = format!("open a NETLINK_NETFILTER socket in network namespace {netns}");
        match opened {
            Ok(Ok(fd)) => Ok(Nftables::with_socket(table, Some(netns.to_string()), fd)),
            Ok(Err(e)) => Err(io_error(&what, &e)),
            Err(_) => Err(Error::Nftables { op: what, message: "the thread opening it panicked".into() }),
        }
    }

    fn with_socket(table: &str, netns: Option<String>, fd: OwnedFd) -> Nftables {
        let conn = Conn { fd, seq: initial_seq(), sndbuf: 0, batch: Batch::default(), rbuf: vec![0; RECV_CHUNK] };
        Nftables { table: table.to_string(), netns, conn: Mutex::new(conn) }
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    /// Applies every op in one batch: all of them or, if the kernel refuses one, none. The
    /// batch's size in bytes on success. On failure, [`Error::Nftables`] whose `op` is the
    /// failing op as its nft line (for elements, the element the kernel refused) and whose
    /// message is the kernel's error, with a hint where the cause is known.
    pub fn apply(&self, tx: &Transaction) -> Result<usize> {
        if tx.is_empty() {
            return Ok(0);
        }
        let mut conn = self.lock();
        conn.apply(&self.table, tx)
    }

    /// Whether the table exists (NFT_MSG_GETTABLE).
    pub fn table_exists(&self) -> Result<bool> {
        let mut conn = self.lock();
        let table = &self.table;
        match conn.request(NFT_MSG_GETTABLE, |b| b.str(NFTA_TABLE_NAME, table)) {
            Ok(()) => Ok(true),
            Err(Failure::Kernel(e)) if e == libc::ENOENT => Ok(false),
            Err(f) => Err(f.into_error(&format!("list table ip {}", display_name(table)))),
        }
    }

    /// The names of the table's chains (an NFT_MSG_GETCHAIN dump, filtered to this table).
    pub fn list_chains(&self) -> Result<Vec<String>> {
        let mut conn = self.lock();
        conn.dump(NFT_MSG_GETCHAIN, NFTA_CHAIN_TABLE, &self.table, |attrs| {
            let (mut table, mut name) = (None, None);
            for (ty, v) in attributes(attrs) {
                match ty {
                    NFTA_CHAIN_TABLE => table = Some(string(v)),
                    NFTA_CHAIN_NAME => name = Some(string(v)),
                    _ => {}
                }
            }
            name.filter(|_| table == Some(self.table.as_str())).map(str::to_string)
        })
        .map_err(|f| f.into_error(&format!("list chains ip {}", display_name(&self.table))))
    }

    /// The names of the table's named sets and maps (an NFT_MSG_GETSET dump; anonymous sets,
    /// which `nft` makes for inline `{ … }` sets and kubelab never does, are left out).
    pub fn list_sets(&self) -> Result<Vec<String>> {
        let mut conn = self.lock();
        let listed = conn.dump(NFT_MSG_GETSET, NFTA_SET_TABLE, &self.table, |attrs| {
            let (mut table, mut name, mut flags) = (None, None, 0);
            for (ty, v) in attributes(attrs) {
                match ty {
                    NFTA_SET_TABLE => table = Some(string(v)),
                    NFTA_SET_NAME => name = Some(string(v)),
                    NFTA_SET_FLAGS if v.len() == 4 => flags = u32::from_be_bytes([v[0], v[1], v[2], v[3]]),
                    _ => {}
                }
            }
            name.filter(|_| table == Some(self.table.as_str()) && flags & NFT_SET_ANONYMOUS == 0).map(str::to_string)
        });
        match listed {
            Ok(names) => Ok(names),
            // A set dump names its table, and the kernel refuses one of a table that is not there.
            Err(Failure::Kernel(e)) if e == libc::ENOENT => Ok(Vec::new()),
            Err(f) => Err(f.into_error(&format!("list sets ip {}", display_name(&self.table)))),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Conn> {
        // A panic mid-apply leaves nothing to repair: every apply starts its buffers afresh and
        // skips replies that are not its own.
        self.conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// What the kernel refused, or why it could not be asked.
enum Failure {
    Kernel(i32),
    Io(io::Error),
}

impl Failure {
    fn into_error(self, op: &str) -> Error {
        match self {
            Failure::Kernel(errno) => Error::Nftables { op: op.to_string(), message: errno_text(errno) },
            Failure::Io(e) => io_error(op, &e),
        }
    }
}

/// Where a message of the batch came from: the op (or [`BATCH`]), where it starts in the batch
/// buffer, and for element messages the index of its first element in the op.
#[derive(Clone, Copy)]
struct Sent {
    op: usize,
    at: usize,
    first_element: usize,
}

/// The batch's own messages (BATCH_BEGIN): errors the kernel reports for the batch as a whole,
/// such as a failed commit, carry its sequence number.
const BATCH: usize = usize::MAX;

/// One error the kernel reported for a message of the batch.
struct Refusal {
    seq_index: usize,
    errno: i32,
    /// The kernel's own words (extended ack), if it gave any.
    text: Option<String>,
    /// The offset of the refused attribute in the message (extended ack).
    offset: Option<usize>,
}

/// The socket and the buffers reused from one apply to the next.
struct Conn {
    fd: OwnedFd,
    /// The next sequence number; every message gets its own, so replies map back to messages.
    seq: u32,
    /// The send buffer the socket has now (what SO_SNDBUF reads back).
    sndbuf: usize,
    batch: Batch,
    rbuf: Vec<u8>,
}

/// A transaction encoded as one batch, and where each of its messages came from.
#[derive(Default)]
struct Batch {
    buf: Buf,
    /// By sequence number − the batch's first (BATCH_BEGIN's): where each message came from.
    sent: Vec<Sent>,
}

impl Batch {
    /// Writes the batch, its messages numbered from `base`: BATCH_BEGIN, the ops' messages (the
    /// last asking for an acknowledgement), BATCH_END. The number of messages before BATCH_END,
    /// or 1 if no op has anything to send.
    fn encode(&mut self, base: u32, table: &str, tx: &Transaction) -> Result<usize> {
        let mut w = Writer { buf: &mut self.buf, sent: &mut self.sent, base, table, op: BATCH, next_set_id: 1 };
        w.buf.bytes.clear();
        w.sent.clear();
        w.begin_batch(NFNL_MSG_BATCH_BEGIN);
        for (i, op) in tx.ops.iter().enumerate() {
            w.op = i;
            w.buf.overflow = false;
            w.op(op);
            if w.buf.overflow {
                return Err(Error::Nftables {
                    op: op.display(table).to_string(),
                    message: "too large for one netlink attribute (64 KiB): split it".into(),
                });
            }
        }
        let count = w.sent.len();
        if count == 1 {
            return Ok(count);
        }
        // The last message of the batch asks for an acknowledgement: its answer (ack or error)
        // says the kernel went through the whole batch.
        let last = w.sent[count - 1].at;
        w.buf.or_flags(last, NLM_F_ACK);
        w.op = BATCH;
        w.begin_batch(NFNL_MSG_BATCH_END);
        Ok(count)
    }
}

impl Conn {
    fn apply(&mut self, table: &str, tx: &Transaction) -> Result<usize> {
        let base = self.seq;
        let count = self.batch.encode(base, table, tx)?;
        if count == 1 {
            // Every op was empty (element lists with no elements): nothing to ask the kernel.
            return Ok(0);
        }
        self.seq = base.wrapping_add(count as u32 + 1);
        let len = self.batch.buf.bytes.len();

        let what = || format!("transaction ({} operations, {len} bytes)", tx.ops.len());
        self.ensure_sndbuf(len).map_err(|e| io_error(&what(), &e))?;
        send(&self.fd, &self.batch.buf.bytes).map_err(|e| io_error(&what(), &e))?;

        // The kernel has handled the batch by now, inside our sendmsg: its answer is queued on
        // the socket. Read it all (not blocking once the last message is answered, or the batch
        // refused as a whole, or an answer lost), so none of it is left for the next apply.
        let (mut refusals, mut last_answered, mut lost, mut batch_refused) = (Vec::new(), false, false, false);
        loop {
            let wait = !(last_answered || lost || batch_refused);
            let n = match recv(&self.fd, &mut self.rbuf, wait) {
                Ok(n) => n,
                Err(e) if !wait && e.kind() == io::ErrorKind::WouldBlock => break,
                // The receive queue overflowed: an answer was dropped, so something failed.
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    lost = true;
                    continue;
                }
                Err(e) => return Err(io_error(&what(), &e)),
            };
            for m in messages(&self.rbuf[..n]) {
                let index = m.seq.wrapping_sub(base) as usize;
                if m.ty != NLMSG_ERROR || index >= count {
                    continue; // not an answer to this batch
                }
                let Some((errno, text, offset)) = parse_error(&m) else { continue };
                last_answered |= index == count - 1;
                batch_refused |= index == 0 && errno != 0;
                if errno != 0 {
                    refusals.push(Refusal { seq_index: index, errno, text, offset });
                }
            }
        }

        if refusals.is_empty() && !lost && last_answered {
            return Ok(len);
        }
        Err(self.refused(table, tx, refusals, lost, &what()))
    }

    /// The error for a failed batch: the first refusal, named by its op.
    fn refused(&self, table: &str, tx: &Transaction, mut refusals: Vec<Refusal>, lost: bool, what: &str) -> Error {
        refusals.sort_by_key(|r| r.seq_index);
        let Some(first) = refusals.first() else {
            let message = if lost {
                "the kernel refused the batch, but its error was lost (receive buffer overflow, ENOBUFS)"
            } else {
                "the kernel refused the batch"
            };
            return Error::Nftables { op: what.to_string(), message: message.into() };
        };
        let sent = self.batch.sent[first.seq_index];
        let (op, msg_type) = if sent.op == BATCH {
            (what.to_string(), None)
        } else {
            let ty = message_type(&self.batch.buf.bytes, sent.at);
            (self.failing_op_line(table, &tx.ops[sent.op], sent, first.offset), ty)
        };
        let mut message = errno_text(first.errno);
        let failed_op = (sent.op != BATCH).then(|| &tx.ops[sent.op]);
        if let Some(hint) = hint(failed_op, msg_type, first.errno) {
            message.push_str(&format!(" ({hint})"));
        }
        if let Some(text) = &first.text {
            message.push_str(&format!("; kernel: {text}"));
        }
        if refusals.len() > 1 {
            message.push_str(&format!("; and {} more errors in the batch", refusals.len() - 1));
        }
        if lost {
            message.push_str("; some errors were lost (ENOBUFS)");
        }
        Error::Nftables { op, message }
    }

    /// The op's nft line; for an element message, only the element the kernel pointed at (or
    /// the elements of that message, if it did not say which).
    fn failing_op_line(&self, table: &str, op: &Op, sent: Sent, offset: Option<usize>) -> String {
        let (set, elements, add) = match op {
            Op::AddElements { set, elements } => (set, elements, true),
            Op::DeleteElements { set, elements } => (set, elements, false),
            _ => return op.display(table).to_string(),
        };
        let (in_msg, which) = element_at(&self.batch.buf.bytes, sent.at, offset);
        let start = sent.first_element.min(elements.len());
        let range = match which {
            Some(k) if start + k < elements.len() => start + k..start + k + 1,
            _ => start..(start + in_msg).min(elements.len()),
        };
        let elements: Vec<Element> = elements[range].to_vec();
        let narrowed = if add { Op::AddElements { set: set.clone(), elements } } else { Op::DeleteElements { set: set.clone(), elements } };
        narrowed.display(table).to_string()
    }

    /// Raises the send buffer so that the batch fits in one `sendmsg` (the kernel refuses a
    /// message larger than the buffer, and a batch cannot span two): SO_SNDBUFFORCE as root
    /// (CAP_NET_ADMIN, which nf_tables needs anyway), else SO_SNDBUF up to net.core.wmem_max.
    fn ensure_sndbuf(&mut self, len: usize) -> io::Result<()> {
        // netlink_sendmsg: a message must fit in sk_sndbuf − 32.
        let need = len + 64;
        if self.sndbuf >= need {
            return Ok(());
        }
        // The kernel doubles what it is given (for its bookkeeping); ask for the next power of
        // two so that batches growing a little do not each pay a setsockopt.
        let ask = need.next_power_of_two().min(i32::MAX as usize / 2) as libc::c_int;
        if setsockopt(&self.fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, ask).is_err() {
            let _ = setsockopt(&self.fd, libc::SOL_SOCKET, libc::SO_SNDBUF, ask);
        }
        self.sndbuf = getsockopt(&self.fd, libc::SOL_SOCKET, libc::SO_SNDBUF)? as usize;
        if self.sndbuf < need {
            return Err(io::Error::other(format!(
                "the batch ({len} bytes) is larger than the socket's send buffer ({} bytes): raising it past net.core.wmem_max needs CAP_NET_ADMIN",
                self.sndbuf
            )));
        }
        Ok(())
    }

    /// A GET request answered by one object and an acknowledgement (or an error).
    fn request(&mut self, ty: u16, attrs: impl FnOnce(&mut Buf)) -> Result<(), Failure> {
        let seq = self.next_seq();
        let mut b = Buf::default();
        let at = b.msg(nft_type(ty), NLM_F_REQUEST | NLM_F_ACK, seq, NFPROTO_IPV4, 0);
        attrs(&mut b);
        b.end_msg(at);
        send(&self.fd, &b.bytes).map_err(Failure::Io)?;
        loop {
            let n = recv(&self.fd, &mut self.rbuf, true).map_err(Failure::Io)?;
            for m in messages(&self.rbuf[..n]) {
                if m.seq != seq || m.ty != NLMSG_ERROR {
                    continue;
                }
                return match parse_error(&m) {
                    Some((0, _, _)) => Ok(()),
                    Some((errno, _, _)) => Err(Failure::Kernel(errno)),
                    None => Err(Failure::Io(io::Error::other("a truncated netlink error"))),
                };
            }
        }
    }

    /// A dump of every object of a kind, each reply message's attributes given to `pick`. A
    /// dump that the kernel marks interrupted (the table changed while it was read) is read again.
    fn dump(&mut self, ty: u16, table_attr: u16, table: &str, mut pick: impl FnMut(&[u8]) -> Option<String>) -> Result<Vec<String>, Failure> {
        const ATTEMPTS: usize = 5;
        let mut names = Vec::new();
        for attempt in 1..=ATTEMPTS {
            names.clear();
            let seq = self.next_seq();
            let mut b = Buf::default();
            let at = b.msg(nft_type(ty), NLM_F_REQUEST | NLM_F_DUMP, seq, NFPROTO_IPV4, 0);
            b.str(table_attr, table);
            b.end_msg(at);
            send(&self.fd, &b.bytes).map_err(Failure::Io)?;
            let mut interrupted = false;
            'read: loop {
                let n = recv(&self.fd, &mut self.rbuf, true).map_err(Failure::Io)?;
                for m in messages(&self.rbuf[..n]) {
                    if m.seq != seq {
                        continue;
                    }
                    interrupted |= m.flags & NLM_F_DUMP_INTR != 0;
                    match m.ty {
                        NLMSG_DONE => break 'read,
                        NLMSG_ERROR => match parse_error(&m) {
                            Some((0, _, _)) => {}
                            Some((errno, _, _)) => return Err(Failure::Kernel(errno)),
                            None => return Err(Failure::Io(io::Error::other("a truncated netlink error"))),
                        },
                        _ if m.payload.len() >= NFGENMSG_LEN => names.extend(pick(&m.payload[NFGENMSG_LEN..])),
                        _ => {}
                    }
                }
            }
            if !interrupted || attempt == ATTEMPTS {
                break;
            }
        }
        Ok(names)
    }

    fn next_seq(&mut self) -> u32 {
        let seq = self.seq;
        self.seq = self.seq.wrapping_add(1);
        seq
    }
}

/// Writes a transaction's messages into the batch buffer.
struct Writer<'a> {
    buf: &'a mut Buf,
    sent: &'a mut Vec<Sent>,
    base: u32,
    table: &'a str,
    /// The op being written.
    op: usize,
    /// NFTA_SET_ID: names a set created earlier in the same batch (unique within it).
    next_set_id: u32,
}

impl Writer<'_> {
    fn begin_batch(&mut self, ty: u16) {
        let seq = self.base.wrapping_add(self.sent.len() as u32);
        if ty == NFNL_MSG_BATCH_BEGIN {
            self.sent.push(Sent { op: BATCH, at: self.buf.bytes.len(), first_element: 0 });
        }
        // res_id is big-endian: the subsystem the batch is for.
        let at = self.buf.msg(ty, NLM_F_REQUEST, seq, libc::AF_UNSPEC as u8, NFNL_SUBSYS_NFTABLES);
        self.buf.end_msg(at);
    }

    /// Starts an nf_tables message of the current op; `end_msg` closes it.
    fn begin(&mut self, ty: u16, flags: u16, first_element: usize) -> usize {
        let seq = self.base.wrapping_add(self.sent.len() as u32);
        self.sent.push(Sent { op: self.op, at: self.buf.bytes.len(), first_element });
        self.buf.msg(nft_type(ty), NLM_F_REQUEST | flags, seq, NFPROTO_IPV4, 0)
    }

    fn op(&mut self, op: &Op) {
        let table = self.table;
        match op {
            Op::AddTable { comment } => {
                let m = self.begin(NFT_MSG_NEWTABLE, NLM_F_CREATE, 0);
                self.buf.str(NFTA_TABLE_NAME, table);
                if let Some(c) = comment {
                    self.buf.comment(NFTA_TABLE_USERDATA, NFTNL_UDATA_COMMENT, c);
                }
                self.buf.end_msg(m);
            }
            Op::DeleteTable => {
                let m = self.begin(NFT_MSG_DELTABLE, 0, 0);
                self.buf.str(NFTA_TABLE_NAME, table);
                self.buf.end_msg(m);
            }
            Op::AddChain { name, base, comment } => {
                let m = self.begin(NFT_MSG_NEWCHAIN, NLM_F_CREATE, 0);
                self.buf.str(NFTA_CHAIN_TABLE, table);
                self.buf.str(NFTA_CHAIN_NAME, name);
                if let Some(base) = base {
                    let hook = self.buf.nest(NFTA_CHAIN_HOOK);
                    self.buf.be32(NFTA_HOOK_HOOKNUM, expr::hook_number(base.hook));
                    self.buf.be32(NFTA_HOOK_PRIORITY, base.priority as u32);
                    self.buf.end_nest(hook);
                    self.buf.be32(NFTA_CHAIN_POLICY, NF_ACCEPT);
                    self.buf.str(NFTA_CHAIN_TYPE, expr::chain_type_name(base.kind));
                }
                if let Some(c) = comment {
                    self.buf.comment(NFTA_CHAIN_USERDATA, NFTNL_UDATA_COMMENT, c);
                }
                self.buf.end_msg(m);
            }
            // A DELRULE naming only the chain deletes all its rules.
            Op::FlushChain(name) => {
                let m = self.begin(NFT_MSG_DELRULE, 0, 0);
                self.buf.str(NFTA_RULE_TABLE, table);
                self.buf.str(NFTA_RULE_CHAIN, name);
                self.buf.end_msg(m);
            }
            Op::DeleteChain(name) => {
                let m = self.begin(NFT_MSG_DELCHAIN, 0, 0);
                self.buf.str(NFTA_CHAIN_TABLE, table);
                self.buf.str(NFTA_CHAIN_NAME, name);
                self.buf.end_msg(m);
            }
            Op::AddRule { chain, rule } => {
                let m = self.begin(NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND, 0);
                self.buf.str(NFTA_RULE_TABLE, table);
                self.buf.str(NFTA_RULE_CHAIN, chain);
                let exprs = self.buf.nest(NFTA_RULE_EXPRESSIONS);
                expr::rule(self.buf, &rule.stmts);
                self.buf.end_nest(exprs);
                if let Some(c) = &rule.comment {
                    self.buf.comment(NFTA_RULE_USERDATA, NFTNL_UDATA_COMMENT, c);
                }
                self.buf.end_msg(m);
            }
            Op::AddSet(set) => self.add_set(set),
            // A DELSETELEM without elements flushes the set.
            Op::FlushSet(name) => {
                let m = self.begin(NFT_MSG_DELSETELEM, 0, 0);
                self.buf.str(NFTA_SET_ELEM_LIST_TABLE, table);
                self.buf.str(NFTA_SET_ELEM_LIST_SET, name);
                self.buf.end_msg(m);
            }
            Op::DeleteSet(name) => {
                let m = self.begin(NFT_MSG_DELSET, 0, 0);
                self.buf.str(NFTA_SET_TABLE, table);
                self.buf.str(NFTA_SET_NAME, name);
                self.buf.end_msg(m);
            }
            Op::AddElements { set, elements } => {
                self.elements(NFT_MSG_NEWSETELEM, NLM_F_CREATE, set, elements.len(), |b, i| {
                    let e = &elements[i];
                    element(b, &expr::key_bytes(&e.key), e.verdict.as_ref().map(expr::verdict_parts));
                });
            }
            // A map's element is found by its key; its verdict is not needed.
            Op::DeleteElements { set, elements } => {
                self.elements(NFT_MSG_DELSETELEM, 0, set, elements.len(), |b, i| {
                    element(b, &expr::key_bytes(&elements[i].key), None);
                });
            }
        }
    }

    fn add_set(&mut self, set: &Set) {
        let m = self.begin(NFT_MSG_NEWSET, NLM_F_CREATE, 0);
        self.buf.str(NFTA_SET_TABLE, self.table);
        self.buf.str(NFTA_SET_NAME, &set.name);
        let mut flags = if set.map { NFT_SET_MAP } else { 0 };
        if set.timeout.is_some() {
            // `flags dynamic,timeout`: rules add and refresh elements, which expire.
            flags |= NFT_SET_TIMEOUT | NFT_SET_EVAL;
        }
        self.buf.be32(NFTA_SET_FLAGS, flags);
        self.buf.be32(NFTA_SET_KEY_TYPE, expr::key_type(set.key));
        self.buf.be32(NFTA_SET_KEY_LEN, expr::key_len(set.key));
        if set.map {
            self.buf.be32(NFTA_SET_DATA_TYPE, NFT_DATA_VERDICT);
        }
        let id = self.set_id();
        self.buf.be32(NFTA_SET_ID, id);
        if let Some(t) = set.timeout {
            self.buf.be64(NFTA_SET_TIMEOUT, t.as_millis().min(u64::MAX as u128) as u64);
        }
        if let Key::Numgen(_) = set.key {
            // For nft's `list`: the key is host-endian (nft's BYTEORDER_HOST_ENDIAN = 1). Such
            // a map has no comment (its user data holds this record only).
            self.buf.udata_u32(NFTA_SET_USERDATA, NFTNL_UDATA_SET_KEYBYTEORDER, 1);
        } else if let Some(c) = &set.comment {
            self.buf.comment(NFTA_SET_USERDATA, NFTNL_UDATA_SET_COMMENT, c);
        }
        self.buf.end_msg(m);
    }

    fn set_id(&mut self) -> u32 {
        let id = self.next_set_id;
        self.next_set_id += 1;
        id
    }

    /// Element messages: as many elements per message as fit in the 64 KiB of the nested
    /// element list (its length is a u16), then another message.
    fn elements(&mut self, ty: u16, flags: u16, set: &str, n: usize, mut write: impl FnMut(&mut Buf, usize)) {
        let mut i = 0;
        while i < n {
            let m = self.begin(ty, flags, i);
            self.buf.str(NFTA_SET_ELEM_LIST_TABLE, self.table);
            self.buf.str(NFTA_SET_ELEM_LIST_SET, set);
            let list = self.buf.nest(NFTA_SET_ELEM_LIST_ELEMENTS);
            let first = i;
            while i < n {
                let mark = self.buf.bytes.len();
                write(self.buf, i);
                if self.buf.bytes.len() - list > MAX_NEST {
                    if i == first {
                        // One element alone is too large: let end_nest report it.
                        i += 1;
                    } else {
                        self.buf.bytes.truncate(mark);
                    }
                    break;
                }
                i += 1;
            }
            self.buf.end_nest(list);
            self.buf.end_msg(m);
        }
    }
}

/// One element of an NFTA_SET_ELEM_LIST_ELEMENTS list: its key, and for a map its verdict.
fn element(b: &mut Buf, key: &[u8], verdict: Option<expr::VerdictParts<'_>>) {
    let e = b.nest(NFTA_LIST_ELEM);
    let k = b.nest(NFTA_SET_ELEM_KEY);
    b.attr(NFTA_DATA_VALUE, key);
    b.end_nest(k);
    if let Some(v) = verdict {
        expr::verdict_data(b, NFTA_SET_ELEM_DATA, v);
    }
    b.end_nest(e);
}

/// nfnetlink message type: the subsystem in the high byte, its message in the low.
fn nft_type(msg: u16) -> u16 {
    (NFNL_SUBSYS_NFTABLES << 8) | msg
}

// ---- the socket ----

fn open_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the descriptor is owned from here on.
    let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_NETFILTER) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // Older kernels lack these; errors then echo the whole message and carry no extended ack.
    let _ = setsockopt(&fd, SOL_NETLINK, NETLINK_CAP_ACK, 1);
    let _ = setsockopt(&fd, SOL_NETLINK, NETLINK_EXT_ACK, 1);
    let rcvbuf = (RCVBUF / 2) as libc::c_int; // the kernel doubles it
    if setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, rcvbuf).is_err() {
        let _ = setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF, rcvbuf);
    }
    let timeout = libc::timeval { tv_sec: REPLY_TIMEOUT.as_secs() as libc::time_t, tv_usec: 0 };
    // SAFETY: a timeval of the size given, read by the kernel during the call.
    let r = unsafe {
        libc::setsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVTIMEO, (&raw const timeout).cast(), size_of::<libc::timeval>() as libc::socklen_t)
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

fn setsockopt(fd: &OwnedFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: an int option, passed by pointer with its size.
    let r = unsafe { libc::setsockopt(fd.as_raw_fd(), level, name, (&raw const value).cast(), size_of::<libc::c_int>() as libc::socklen_t) };
    if r == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

fn getsockopt(fd: &OwnedFd, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: an int option, written by the kernel into `value` (of size `len`).
    let r = unsafe { libc::getsockopt(fd.as_raw_fd(), level, name, (&raw mut value).cast(), &raw mut len) };
    if r == 0 { Ok(value) } else { Err(io::Error::last_os_error()) }
}

/// Sends one datagram to the kernel (port id 0). A netlink datagram is taken whole or not at all.
fn send(fd: &OwnedFd, data: &[u8]) -> io::Result<()> {
    // SAFETY: sockaddr_nl is plain data; all zeroes is the kernel's address.
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    loop {
        // SAFETY: the buffer and the address are valid for the call.
        let r = unsafe {
            libc::sendto(fd.as_raw_fd(), data.as_ptr().cast(), data.len(), 0, (&raw const addr).cast(), size_of::<libc::sockaddr_nl>() as libc::socklen_t)
        };
        if r >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Receives one datagram (one or more netlink messages); without `wait`, WouldBlock when none
/// is queued. MSG_TRUNC makes a datagram larger than the buffer visible; its messages are read
/// as far as they fit, the rest is gone.
fn recv(fd: &OwnedFd, buf: &mut [u8], wait: bool) -> io::Result<usize> {
    let flags = libc::MSG_TRUNC | if wait { 0 } else { libc::MSG_DONTWAIT };
    loop {
        // SAFETY: the buffer is valid for writes of its length.
        let r = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), flags) };
        if r >= 0 {
            return Ok((r as usize).min(buf.len()));
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => continue,
            // SO_RCVTIMEO expired.
            io::ErrorKind::WouldBlock if wait => {
                return Err(io::Error::new(io::ErrorKind::TimedOut, format!("no answer from the kernel within {}s", REPLY_TIMEOUT.as_secs())));
            }
            _ => return Err(e),
        }
    }
}

/// Sequence numbers start somewhere different for every socket, so that a reply meant for an
/// earlier socket is never mistaken (nft starts from the time, too).
fn initial_seq() -> u32 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos() ^ d.as_secs() as u32).unwrap_or(1)
}

// ---- reading replies ----

/// One netlink message of a datagram.
struct Message<'a> {
    ty: u16,
    flags: u16,
    seq: u32,
    payload: &'a [u8],
}

fn messages(mut data: &[u8]) -> impl Iterator<Item = Message<'_>> {
    std::iter::from_fn(move || {
        if data.len() < NLMSG_HDRLEN {
            return None;
        }
        let len = u32::from_ne_bytes([data[0], data[1], data[2], data[3]]) as usize;
        if len < NLMSG_HDRLEN || len > data.len() {
            return None;
        }
        let m = Message {
            ty: u16::from_ne_bytes([data[4], data[5]]),
            flags: u16::from_ne_bytes([data[6], data[7]]),
            seq: u32::from_ne_bytes([data[8], data[9], data[10], data[11]]),
            payload: &data[NLMSG_HDRLEN..len],
        };
        data = &data[len.next_multiple_of(4).min(data.len())..];
        Some(m)
    })
}

/// An NLMSG_ERROR: the errno (0 for an acknowledgement), and from the extended ack the kernel's
/// text and the offset of the attribute it refused.
fn parse_error(m: &Message<'_>) -> Option<(i32, Option<String>, Option<usize>)> {
    let p = m.payload;
    if p.len() < 4 {
        return None;
    }
    let errno = -i32::from_ne_bytes([p[0], p[1], p[2], p[3]]);
    let (mut text, mut offset) = (None, None);
    if m.flags & NLM_F_ACK_TLVS != 0 && p.len() >= 4 + NLMSG_HDRLEN {
        // The echoed request: only its header when capped (NETLINK_CAP_ACK), else all of it.
        let echoed = if m.flags & NLM_F_CAPPED != 0 {
            NLMSG_HDRLEN
        } else {
            u32::from_ne_bytes([p[4], p[5], p[6], p[7]]) as usize
        };
        let tlvs = p.get((4 + echoed).next_multiple_of(4)..).unwrap_or_default();
        for (ty, v) in attributes(tlvs) {
            match ty {
                NLMSGERR_ATTR_MSG => text = Some(string(v).to_string()),
                NLMSGERR_ATTR_OFFS if v.len() == 4 => offset = Some(u32::from_ne_bytes([v[0], v[1], v[2], v[3]]) as usize),
                _ => {}
            }
        }
    }
    Some((errno, text, offset))
}

/// A list of attributes: (type without flags, value).
fn attributes(mut data: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if data.len() < NLA_HDRLEN {
            return None;
        }
        let len = u16::from_ne_bytes([data[0], data[1]]) as usize;
        if len < NLA_HDRLEN || len > data.len() {
            return None;
        }
        let ty = u16::from_ne_bytes([data[2], data[3]]) & NLA_TYPE_MASK;
        let value = &data[NLA_HDRLEN..len];
        data = &data[len.next_multiple_of(4).min(data.len())..];
        Some((ty, value))
    })
}

fn string(v: &[u8]) -> &str {
    let v = v.split(|&b| b == 0).next().unwrap_or_default();
    std::str::from_utf8(v).unwrap_or("")
}

/// The nf_tables message type (NFT_MSG_*) of the message at `at` in the batch.
fn message_type(batch: &[u8], at: usize) -> Option<u16> {
    batch.get(at + 4..at + 6).map(|t| u16::from_ne_bytes([t[0], t[1]]) & 0xff)
}

/// For the element message at `at`: how many elements it holds, and which of them (by index in
/// the message) contains the byte at `offset` (the extended ack's pointer into the message).
fn element_at(batch: &[u8], at: usize, offset: Option<usize>) -> (usize, Option<usize>) {
    let Some(len) = batch.get(at..at + 4).map(|l| u32::from_ne_bytes([l[0], l[1], l[2], l[3]]) as usize) else {
        return (0, None);
    };
    let Some(msg) = batch.get(at..at + len) else { return (0, None) };
    let attrs_at = NLMSG_HDRLEN + NFGENMSG_LEN;
    let mut pos = attrs_at;
    for (ty, value) in attributes(&msg[attrs_at..]) {
        let value_at = pos + NLA_HDRLEN;
        pos += (NLA_HDRLEN + value.len()).next_multiple_of(4);
        if ty != NFTA_SET_ELEM_LIST_ELEMENTS {
            continue;
        }
        let (mut count, mut which, mut elem_at) = (0, None, value_at);
        for (_, e) in attributes(value) {
            let end = elem_at + NLA_HDRLEN + e.len();
            if offset.is_some_and(|o| o >= elem_at && o < end) {
                which = Some(count);
            }
            elem_at += (NLA_HDRLEN + e.len()).next_multiple_of(4);
            count += 1;
        }
        return (count, which);
    }
    (0, None)
}

// ---- errors ----

fn io_error(op: &str, e: &io::Error) -> Error {
    let message = match e.raw_os_error() {
        Some(errno) => errno_text(errno),
        None => e.to_string(),
    };
    Error::Nftables { op: op.to_string(), message }
}

/// strerror's text ("No such file or directory"), without Rust's " (os error 2)".
fn errno_text(errno: i32) -> String {
    let text = io::Error::from_raw_os_error(errno).to_string();
    match text.rfind(" (os error") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// What an errno most likely means for this op's message of this type (None: the batch's own
/// message, such as a failed commit).
fn hint(op: Option<&Op>, msg_type: Option<u16>, errno: i32) -> Option<&'static str> {
    use libc::{EBUSY, EEXIST, EINVAL, ELOOP, ENOENT, EOPNOTSUPP, EPERM};
    Some(match (msg_type, errno) {
        (_, EPERM) => "nf_tables needs CAP_NET_ADMIN in the network namespace",
        (_, ELOOP) => "the jumps and gotos would form a loop",
        _ if op.is_none() => return None,
        (Some(NFT_MSG_NEWRULE), ENOENT) => "the chain, a chain it jumps to, or a set it uses does not exist",
        (Some(NFT_MSG_NEWSETELEM), ENOENT) => "the set, or a chain an element jumps to, does not exist",
        (Some(NFT_MSG_DELSETELEM), ENOENT) if matches!(op, Some(Op::FlushSet(_))) => "it does not exist",
        (Some(NFT_MSG_DELSETELEM), ENOENT) => "the set does not exist or the element is not in it",
        (Some(NFT_MSG_NEWCHAIN | NFT_MSG_NEWSET), ENOENT) => "the table does not exist: add it first",
        (Some(NFT_MSG_DELTABLE | NFT_MSG_DELCHAIN | NFT_MSG_DELRULE | NFT_MSG_DELSET), ENOENT) => "it does not exist",
        (Some(NFT_MSG_DELCHAIN), EBUSY) => "a rule or a map element still jumps to the chain",
        (Some(NFT_MSG_DELSET), EBUSY) => "a rule still uses the set",
        (Some(NFT_MSG_NEWSET), EEXIST) => "a set of that name exists with another type or other flags",
        (Some(NFT_MSG_NEWSETELEM), EEXIST) => "the element exists with another verdict: delete it first",
        (Some(NFT_MSG_NEWSETELEM | NFT_MSG_DELSETELEM), EINVAL) => "the element's key or value does not fit the set's type",
        (Some(NFT_MSG_NEWCHAIN), EEXIST | EOPNOTSUPP) => {
            "a chain of that name exists with another type, hook or priority, which cannot be changed: delete it first"
        }
        (Some(NFT_MSG_NEWRULE), EOPNOTSUPP) => {
            "a statement this chain's type or hook does not allow (nat outside a nat chain, reject outside input/forward/output)"
        }
        _ => return None,
    })
}

/// A name as nft would need it written: bare if its scanner reads it as one word, else quoted.
pub(super) fn display_name(name: &str) -> super::display::Name<'_> {
    super::display::Name(name)
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::super::buf::COMMENT_MAXLEN;
    use super::*;
    use crate::serviceport::Protocol;
    use crate::util::nftables::{KeyValue, Rule, Stmt, Verdict};

    fn encode(tx: &Transaction) -> Batch {
        let mut batch = Batch::default();
        batch.encode(100, "kube-proxy", tx).expect("encode");
        batch
    }

    #[test]
    fn a_batch_is_framed_numbered_and_acknowledged_once() {
        let mut tx = Transaction::new();
        tx.push(Op::AddTable { comment: None });
        tx.push(Op::AddChain { name: "a".into(), base: None, comment: None });
        tx.push(Op::AddRule { chain: "a".into(), rule: Rule { stmts: vec![Stmt::NumgenVmap { modulus: 2, map: "m".into() }], comment: None } });
        tx.push(Op::FlushChain("b".into()));
        let batch = encode(&tx);
        let msgs: Vec<Message<'_>> = messages(&batch.buf.bytes).collect();
        let types: Vec<u16> = msgs.iter().map(|m| m.ty).collect();
        let nft = nft_type;
        assert_eq!(
            types,
            [
                NFNL_MSG_BATCH_BEGIN,
                nft(NFT_MSG_NEWTABLE),
                nft(NFT_MSG_NEWCHAIN),
                nft(NFT_MSG_NEWRULE),
                nft(NFT_MSG_DELRULE),
                NFNL_MSG_BATCH_END
            ]
        );
        assert_eq!(msgs.iter().map(|m| m.seq).collect::<Vec<_>>(), (100..106).collect::<Vec<_>>());
        let acked: Vec<u16> = msgs.iter().filter(|m| m.flags & NLM_F_ACK != 0).map(|m| m.ty).collect();
        assert_eq!(acked, [nft(NFT_MSG_DELRULE)], "only the last message asks for an acknowledgement");
        assert!(msgs.iter().all(|m| m.flags & NLM_F_REQUEST != 0));
        assert_eq!(&msgs[0].payload[..4], &[0, 0, 0, 10], "the batch is for NFNL_SUBSYS_NFTABLES (big-endian res_id)");
        assert_eq!(msgs[1].payload[0], NFPROTO_IPV4);
        let ops: Vec<usize> = batch.sent.iter().map(|s| s.op).collect();
        assert_eq!(ops, [BATCH, 0, 1, 2, 3], "answers map back to their op by sequence number");
    }

    #[test]
    fn element_lists_are_split_where_a_nest_would_pass_64_kib() {
        let chain = format!("service-{}", "x".repeat(200));
        let elements: Vec<Element> = (0..10_000u32)
            .map(|i| Element { key: KeyValue::AddrProtoPort(Ipv4Addr::from(0x0a60_0000 + i), Protocol::Tcp, 80), verdict: Some(Verdict::Goto(chain.clone())) })
            .collect();
        let mut tx = Transaction::new();
        tx.push(Op::AddElements { set: "service-ips".into(), elements });
        let batch = encode(&tx);
        let (mut total, mut index) = (0, 1);
        for m in messages(&batch.buf.bytes).filter(|m| m.ty == nft_type(NFT_MSG_NEWSETELEM)) {
            let list = attributes(&m.payload[NFGENMSG_LEN..]).find(|(ty, _)| *ty == NFTA_SET_ELEM_LIST_ELEMENTS).expect("an element list").1;
            assert!(NLA_HDRLEN + list.len() <= MAX_NEST, "a nest of {} bytes", list.len());
            assert_eq!(batch.sent[index].first_element, total);
            total += attributes(list).count();
            index += 1;
        }
        assert!(index > 30, "split into {} messages", index - 1);
        assert_eq!(total, 10_000);

        // An extended ack's offset into the third element of the second message names it. The
        // message holds the table's and the set's names, then the list of equal-sized elements.
        let at = batch.sent[2].at;
        let msg = &batch.buf.bytes[at..];
        let attrs_at = NLMSG_HDRLEN + NFGENMSG_LEN;
        let padded = |v: &[u8]| (NLA_HDRLEN + v.len()).next_multiple_of(4);
        let list_at = attrs_at + attributes(&msg[attrs_at..]).take(2).map(|(_, v)| padded(v)).sum::<usize>();
        let first = attributes(&msg[list_at + NLA_HDRLEN..]).next().expect("an element").1;
        let third = list_at + NLA_HDRLEN + 2 * padded(first) + NLA_HDRLEN;
        let (in_msg, which) = element_at(&batch.buf.bytes, at, Some(third));
        assert_eq!(which, Some(2));
        assert_eq!(in_msg, batch.sent[3].first_element - batch.sent[2].first_element);
    }

    #[test]
    fn comments_are_cut_to_what_nft_accepts() {
        let mut b = Buf::default();
        b.comment(NFTA_RULE_USERDATA, NFTNL_UDATA_COMMENT, &"é".repeat(100));
        let (ty, v) = attributes(&b.bytes).next().expect("an attribute");
        assert_eq!(ty, NFTA_RULE_USERDATA);
        assert_eq!((v[0], v[1] as usize), (NFTNL_UDATA_COMMENT, v.len() - 2));
        assert_eq!(v.len() - 2, COMMENT_MAXLEN + 1, "128 bytes of whole characters and a NUL");
        assert_eq!(v[v.len() - 1], 0);
    }
}
