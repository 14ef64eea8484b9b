//! Mirrors libmnl's nlmsg.c and attr.c: netlink messages and their attributes (type-length-value,
//! padded to 4 bytes, nests patched when they end) written into one buffer. [`super::netlink`]
//! frames messages with it; [`super::expr`] writes rule expressions with it.

pub(super) const NLA_HDRLEN: usize = 4;
pub(super) const NLA_F_NESTED: u16 = 1 << 15;
/// Set elements per message are bounded by the nested attribute's u16 length.
pub(super) const MAX_NEST: usize = u16::MAX as usize;
/// nft refuses longer comments (NFTNL_UDATA_COMMENT_MAXLEN); longer ones are cut.
pub(super) const COMMENT_MAXLEN: usize = 128;
pub(super) const NFTA_LIST_ELEM: u16 = 1;
/// enum nft_data_attributes
pub(super) const NFTA_DATA_VALUE: u16 = 1;

/// Netlink messages written in place into one growing buffer (reused from batch to batch, so a
/// sync allocates nothing per attribute). Lengths are patched when a message or nest ends.
#[derive(Default)]
pub(super) struct Buf {
    pub(super) bytes: Vec<u8>,
    /// A nest grew past what its u16 length can say; the op is refused before sending.
    pub(super) overflow: bool,
}

impl Buf {
    pub(super) fn pad(&mut self) {
        let n = self.bytes.len().next_multiple_of(4) - self.bytes.len();
        self.bytes.extend_from_slice(&[0; 3][..n]);
    }

    /// Starts a message: nlmsghdr (its length patched by [`Buf::end_msg`]) and nfgenmsg.
    pub(super) fn msg(&mut self, ty: u16, flags: u16, seq: u32, family: u8, res_id: u16) -> usize {
        let at = self.bytes.len();
        self.bytes.extend_from_slice(&0u32.to_ne_bytes());
        self.bytes.extend_from_slice(&ty.to_ne_bytes());
        self.bytes.extend_from_slice(&flags.to_ne_bytes());
        self.bytes.extend_from_slice(&seq.to_ne_bytes());
        self.bytes.extend_from_slice(&0u32.to_ne_bytes()); // port id 0: the kernel
        self.bytes.extend_from_slice(&[family, 0]); // NFNETLINK_V0
        self.bytes.extend_from_slice(&res_id.to_be_bytes());
        at
    }

    pub(super) fn end_msg(&mut self, at: usize) {
        let len = (self.bytes.len() - at) as u32;
        self.bytes[at..at + 4].copy_from_slice(&len.to_ne_bytes());
    }

    pub(super) fn or_flags(&mut self, at: usize, flags: u16) {
        let old = u16::from_ne_bytes([self.bytes[at + 6], self.bytes[at + 7]]);
        self.bytes[at + 6..at + 8].copy_from_slice(&(old | flags).to_ne_bytes());
    }

    fn header(&mut self, ty: u16, len: usize) {
        let [l0, l1] = (len as u16).to_ne_bytes();
        let [t0, t1] = ty.to_ne_bytes();
        self.bytes.extend_from_slice(&[l0, l1, t0, t1]);
    }

    /// An attribute's value and its padding to 4 bytes. (Few calls per attribute: an
    /// unoptimized build pays for each, and a full sync writes about a million attributes.)
    pub(super) fn attr(&mut self, ty: u16, data: &[u8]) {
        self.header(ty, NLA_HDRLEN + data.len());
        self.bytes.extend_from_slice(data);
        self.pad();
    }

    /// A NUL-terminated string.
    pub(super) fn str(&mut self, ty: u16, s: &str) {
        self.header(ty, NLA_HDRLEN + s.len() + 1);
        self.bytes.extend_from_slice(s.as_bytes());
        let n = (s.len() + 1).next_multiple_of(4) - s.len();
        self.bytes.extend_from_slice(&[0; 4][..n]);
    }

    /// nf_tables' integer attributes are big-endian (register contents are not: see expr.rs).
    pub(super) fn be32(&mut self, ty: u16, v: u32) {
        let [l0, l1] = 8u16.to_ne_bytes();
        let [t0, t1] = ty.to_ne_bytes();
        let [v0, v1, v2, v3] = v.to_be_bytes();
        self.bytes.extend_from_slice(&[l0, l1, t0, t1, v0, v1, v2, v3]);
    }

    pub(super) fn be64(&mut self, ty: u16, v: u64) {
        self.attr(ty, &v.to_be_bytes());
    }

    pub(super) fn u8(&mut self, ty: u16, v: u8) {
        self.attr(ty, &[v]);
    }

    /// Starts a nested attribute; [`Buf::end_nest`] patches its length.
    pub(super) fn nest(&mut self, ty: u16) -> usize {
        let at = self.bytes.len();
        self.header(ty | NLA_F_NESTED, 0);
        at
    }

    pub(super) fn end_nest(&mut self, at: usize) {
        let len = self.bytes.len() - at;
        self.overflow |= len > MAX_NEST;
        self.bytes[at..at + 2].copy_from_slice(&(len.min(MAX_NEST) as u16).to_ne_bytes());
    }

    /// User data holding a comment, as nft stores it: one record (type u8, length u8, the
    /// NUL-terminated text), cut to nft's limit.
    pub(super) fn comment(&mut self, ty: u16, record: u8, text: &str) {
        let mut end = text.len().min(COMMENT_MAXLEN);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        self.header(ty, NLA_HDRLEN + 2 + end + 1);
        self.bytes.extend_from_slice(&[record, (end + 1) as u8]);
        self.bytes.extend_from_slice(&text.as_bytes()[..end]);
        self.bytes.push(0);
        self.pad();
    }

    /// User data holding one u32 record (host-endian, as libnftnl writes it).
    pub(super) fn udata_u32(&mut self, ty: u16, record: u8, v: u32) {
        self.header(ty, NLA_HDRLEN + 2 + 4);
        self.bytes.extend_from_slice(&[record, 4]);
        self.bytes.extend_from_slice(&v.to_ne_bytes());
        self.pad();
    }
}

