//! The request side of HPACK (RFC 7541) for the lean client (`lean.rs`):
//! a unary gRPC request's header block, with the server's dynamic table
//! used as real clients use it.
//!
//! A connection's first request sends `:path`, `:authority`,
//! `content-type` and `te` as literals with incremental indexing; every
//! later request names them by their index in the server's table, one byte
//! each (nghttp2, and so h2load, index the same way). Literals that leave
//! the table alone would make the server parse and copy every field of
//! every request, a cost no production client imposes.
//!
//! Why our own: `loona-hpack`'s encoder never indexes a field whose name is
//! in the static table (`:path`, `:authority` and `content-type` would stay
//! literals on every request) and emits no table size updates; the h2
//! crate's encoder is private to it. A request has six fixed fields, so the
//! table kept here is a short list, and lookups compare a few bytes.

use bytes::{BufMut, Bytes, BytesMut};
use std::collections::VecDeque;

/// The dynamic table size both sides start from (RFC 9113's default
/// SETTINGS_HEADER_TABLE_SIZE); a request never needs more.
const DEFAULT_TABLE: usize = 4096;
/// Entries of the static table start at 1 and end at 61 (RFC 7541
/// appendix A); the dynamic table's newest entry is 62.
const FIRST_DYNAMIC: usize = 62;

/// An HPACK integer with an `n`-bit prefix (RFC 7541 section 5.1), the
/// prefix's upper bits `flags`.
fn put_int(b: &mut BytesMut, flags: u8, n: u32, mut v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        b.put_u8(flags | v as u8);
        return;
    }
    b.put_u8(flags | max as u8);
    v -= max;
    while v >= 128 {
        b.put_u8((v % 128) as u8 | 0x80);
        v /= 128;
    }
    b.put_u8(v as u8);
}

/// An HPACK string literal, not Huffman-coded.
fn put_str(b: &mut BytesMut, s: &[u8]) {
    put_int(b, 0, 7, s.len());
    b.put_slice(s);
}

/// One header field: its name, the name's static-table index (0: none)
/// and its value.
struct Field {
    name: &'static [u8],
    static_name: usize,
    value: Bytes,
}

/// A unary gRPC request's header fields after `:method POST` and
/// `:scheme http` (both whole entries of the static table).
pub(crate) struct RequestHead {
    fields: [Field; 4],
}

impl RequestHead {
    pub(crate) fn new(authority: &str, path: &str) -> Self {
        let field = |name, static_name, value: &[u8]| Field {
            name,
            static_name,
            value: Bytes::copy_from_slice(value),
        };
        RequestHead {
            fields: [
                field(b":path", 4, path.as_bytes()),
                field(b":authority", 1, authority.as_bytes()),
                field(b"content-type", 31, b"application/grpc"),
                field(b"te", 0, b"trailers"),
            ],
        }
    }
}

/// One connection's encoder: a copy of the server's dynamic table as our
/// blocks have made it, newest entry first.
pub(crate) struct Encoder {
    table: VecDeque<(&'static [u8], Bytes)>,
    /// The entries' size as RFC 7541 section 4.1 counts it.
    size: usize,
    /// The table's maximum size in use.
    max: usize,
    /// The smallest maximum since the last block, when it changed: a size
    /// update owed at the start of the next block (section 4.2).
    lowest: Option<usize>,
}

impl Encoder {
    pub(crate) fn new() -> Self {
        Encoder {
            table: VecDeque::new(),
            size: 0,
            max: DEFAULT_TABLE,
            lowest: None,
        }
    }

    /// The server's SETTINGS_HEADER_TABLE_SIZE: the table is kept within
    /// it (and within the default), and the change is signalled at the
    /// start of the next block.
    pub(crate) fn peer_limit(&mut self, limit: u32) {
        let max = (limit as usize).min(DEFAULT_TABLE);
        if max == self.max {
            return;
        }
        self.max = max;
        self.lowest = Some(self.lowest.map_or(max, |l| l.min(max)));
        self.evict(0);
    }

    /// Appends the request's header block to `out`.
    pub(crate) fn encode(&mut self, head: &RequestHead, out: &mut BytesMut) {
        if let Some(lowest) = self.lowest.take() {
            put_int(out, 0x20, 5, lowest);
            if lowest != self.max {
                put_int(out, 0x20, 5, self.max);
            }
        }
        out.put_u8(0x83); // :method POST (static index 3)
        out.put_u8(0x86); // :scheme http (static index 6)
        for f in &head.fields {
            if let Some(i) = self
                .table
                .iter()
                .position(|(n, v)| *n == f.name && *v == f.value)
            {
                put_int(out, 0x80, 7, FIRST_DYNAMIC + i);
                continue;
            }
            let size = f.name.len() + f.value.len() + 32;
            // With incremental indexing (6-bit name index) when the entry
            // fits the table, else without indexing (4-bit).
            let (flags, bits) = if size <= self.max { (0x40, 6) } else { (0, 4) };
            put_int(out, flags, bits, f.static_name);
            if f.static_name == 0 {
                put_str(out, f.name);
            }
            put_str(out, &f.value);
            if size <= self.max {
                self.evict(size);
                self.table.push_front((f.name, f.value.clone()));
                self.size += size;
            }
        }
    }

    /// Drops the oldest entries until `room` more bytes fit.
    fn evict(&mut self, room: usize) {
        while self.size + room > self.max {
            let Some((n, v)) = self.table.pop_back() else {
                return;
            };
            self.size -= n.len() + v.len() + 32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(d: &mut loona_hpack::Decoder, block: &[u8]) -> Vec<(String, String)> {
        let mut got = Vec::new();
        d.decode_with_cb(block, |n, v| {
            got.push((
                String::from_utf8_lossy(&n).into_owned(),
                String::from_utf8_lossy(&v).into_owned(),
            ))
        })
        .unwrap();
        got
    }

    fn want(path: &str) -> Vec<(String, String)> {
        [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", path),
            (":authority", "127.0.0.1:50051"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ]
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
    }

    fn block(e: &mut Encoder, head: &RequestHead) -> BytesMut {
        let mut b = BytesMut::new();
        e.encode(head, &mut b);
        b
    }

    #[test]
    fn hpack_integers_follow_rfc_7541_c_1() {
        // RFC 7541 appendix C.1: 10 in a 5-bit prefix, 1337 in a 5-bit
        // prefix, 42 in an 8-bit prefix.
        let mut b = BytesMut::new();
        put_int(&mut b, 0, 5, 10);
        put_int(&mut b, 0, 5, 1337);
        put_int(&mut b, 0, 8, 42);
        assert_eq!(&b[..], &[0x0a, 0x1f, 0x9a, 0x0a, 0x2a]);
    }

    #[test]
    fn later_requests_name_their_fields_by_index() {
        let (mut e, mut d) = (Encoder::new(), loona_hpack::Decoder::new());
        let head = RequestHead::new("127.0.0.1:50051", "/a.B/C");
        let first = block(&mut e, &head);
        assert_eq!(decoded(&mut d, &first), want("/a.B/C"));
        for _ in 0..3 {
            let b = block(&mut e, &head);
            // :method, :scheme, then the four entries, newest (te) at 62.
            assert_eq!(
                &b[..],
                &[0x83, 0x86, 0x80 | 65, 0x80 | 64, 0x80 | 63, 0x80 | 62]
            );
            assert_eq!(decoded(&mut d, &b), want("/a.B/C"));
        }
        // Another method on the same connection indexes its path only.
        let other = RequestHead::new("127.0.0.1:50051", "/a.B/D");
        let b = block(&mut e, &other);
        assert_eq!(b[2], 0x40 | 4, "a literal :path with incremental indexing");
        assert_eq!(decoded(&mut d, &b), want("/a.B/D"));
        assert_eq!(block(&mut e, &other).len(), 6);
        assert_eq!(decoded(&mut d, &block(&mut e, &head)), want("/a.B/C"));
    }

    #[test]
    fn a_smaller_table_is_signalled_and_respected() {
        let (mut e, mut d) = (Encoder::new(), loona_hpack::Decoder::new());
        let head = RequestHead::new("127.0.0.1:50051", "/a.B/C");
        decoded(&mut d, &block(&mut e, &head));
        // Room for one entry of these (te: 2 + 8 + 32 = 42 bytes; the
        // largest, :authority, 10 + 15 + 32 = 57).
        e.peer_limit(60);
        let b = block(&mut e, &head);
        assert_eq!(&b[..2], &[0x20 | 31, 60 - 31], "a size update to 60 first");
        assert_eq!(decoded(&mut d, &b), want("/a.B/C"));
        assert!(e.size <= 60 && e.table.len() == 1);
        assert_eq!(decoded(&mut d, &block(&mut e, &head)), want("/a.B/C"));
        // No table at all: every field a literal without indexing.
        e.peer_limit(0);
        let b = block(&mut e, &head);
        assert_eq!(b[0], 0x20, "a size update to 0");
        assert_eq!(decoded(&mut d, &b), want("/a.B/C"));
        assert!(e.table.is_empty());
        let again = block(&mut e, &head);
        assert_eq!(again[2], 4, ":path's name index, without indexing");
        assert_eq!(decoded(&mut d, &again), want("/a.B/C"));
        // Down and up between two blocks: the lowest, then the final size.
        e.peer_limit(4096);
        let b = block(&mut e, &head);
        assert_eq!(b[..3], [0x3f, 0xe1, 0x1f], "a size update to 4096");
        assert_eq!(decoded(&mut d, &b), want("/a.B/C"));
        e.peer_limit(100);
        e.peer_limit(4096);
        let b = block(&mut e, &head);
        assert_eq!(b[..2], [0x3f, 100 - 31], "the lowest size first");
        assert_eq!(decoded(&mut d, &b), want("/a.B/C"));
        assert_eq!(block(&mut e, &head).len(), 6);
    }
}
