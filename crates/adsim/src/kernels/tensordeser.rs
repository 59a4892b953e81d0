//! `TensorDeser`: the buffer work of deserialising tensors received over
//! the network. A received tensor arrives as a chain of buffers (each with
//! its own headroom, data and tailroom, as a network stack hands them
//! over); loading it clones the chain (shared buffers, reference counts
//! bumped) and, when the chain has more than one buffer, coalesces it into
//! one new contiguous buffer with the headroom and tailroom the tensor
//! wants, copying every data byte.
//!
//! The shapes come from upstream's distribution file, one line per chain
//! shape: `frequency,headroom,tailroom,[{h:H|d:D|t:T};{h:..|d:..|t:..}...]`
//! (the bracketed list is the chain, buffer by buffer). At start-up each
//! shape is built `request_book_multiplier` times (data bytes 'A') and a
//! request book of `request_book_multiplier x shapes` entries is drawn with
//! the shapes' frequencies. A fire loads the next `requests_per_run`
//! tensors of the book (a shared cursor), split over `num_threads`
//! concurrent parts.

use super::{Fired, HandleObjs, Kernel, Params, RequestObjs, Work, part_range, read_param_file};
use crate::Error;
use rand::SeedableRng;
use rand::distr::Distribution;
use rand::distr::weighted::WeightedIndex;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One line of the distribution file.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainShape {
    pub frequency: u64,
    /// Headroom and tailroom the loaded (coalesced) tensor gets.
    pub headroom: usize,
    pub tailroom: usize,
    /// The received buffers: (headroom, data, tailroom) bytes each.
    pub bufs: Vec<(usize, usize, usize)>,
}

/// Upstream's cap on the sampling table (it keeps frequencies in
/// proportion, each shape with a frequency > 0 at least once).
const MAX_TABLE: f64 = 10_000_000.0;

/// Parses a distribution file's text; `file` names it in errors.
pub fn parse_distribution(text: &str, file: &str) -> Result<Vec<ChainShape>, Error> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let at = || Error::Input(format!("{file}:{}", n + 1));
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let cols: Vec<&str> = line.split(',').collect();
        if cols.len() != 4 {
            return Err(Error::Input(format!(
                "{}: expected 4 comma-separated columns (frequency,headroom,tailroom,chain), found {}",
                at(),
                cols.len()
            )));
        }
        let num = |i: usize, what: &str| {
            cols[i].trim().parse::<u64>().map_err(|_| {
                format!(
                    "{}: {what} {:?}: expected an integer >= 0",
                    at(),
                    cols[i].trim()
                )
            })
        };
        let frequency = num(0, "frequency").map_err(Error::Input)?;
        let headroom = num(1, "headroom").map_err(Error::Input)? as usize;
        let tailroom = num(2, "tailroom").map_err(Error::Input)? as usize;
        let bufs =
            parse_chain(cols[3]).map_err(|e| Error::Input(format!("{}: chain: {e}", at())))?;
        out.push(ChainShape {
            frequency,
            headroom,
            tailroom,
            bufs,
        });
    }
    if out.is_empty() {
        return Err(Error::Input(format!("{file}: no chain shapes in the file")));
    }
    if out.iter().all(|s| s.frequency == 0) {
        return Err(Error::Input(format!("{file}: every frequency is 0")));
    }
    Ok(out)
}

/// `[{h:1|d:2|t:3};{...}]`: each braced element is one buffer.
fn parse_chain(s: &str) -> Result<Vec<(usize, usize, usize)>, String> {
    let mut bufs = Vec::new();
    let mut rest = s;
    while let Some(open) = rest.find('{') {
        let close = rest[open..]
            .find('}')
            .ok_or_else(|| format!("{s:?}: a '{{' without its '}}'"))?
            + open;
        let body = &rest[open + 1..close];
        let (mut h, mut d, mut t) = (None, None, None);
        for part in body.split('|') {
            let (k, v) = part
                .split_once(':')
                .ok_or_else(|| format!("{body:?}: expected h:N|d:N|t:N"))?;
            let v: usize = v
                .trim()
                .parse()
                .map_err(|_| format!("{body:?}: {k}:{v:?}: expected an integer >= 0"))?;
            match k.trim() {
                "h" => h = Some(v),
                "d" => d = Some(v),
                "t" => t = Some(v),
                other => {
                    return Err(format!(
                        "{body:?}: unknown key {other:?}: expected h, d or t"
                    ));
                }
            }
        }
        match (h, d, t) {
            (Some(h), Some(d), Some(t)) => bufs.push((h, d, t)),
            _ => return Err(format!("{body:?}: expected h:N|d:N|t:N")),
        }
        rest = &rest[close + 1..];
    }
    if bufs.is_empty() {
        return Err(format!("{s:?}: no {{h:N|d:N|t:N}} buffers"));
    }
    Ok(bufs)
}

/// One buffer of a received chain: shared storage of headroom + data +
/// tailroom bytes, the data at `head..head + len`.
#[derive(Clone)]
pub struct Buf {
    store: Arc<[u8]>,
    head: usize,
    len: usize,
}

impl Buf {
    fn new(h: usize, d: usize, t: usize) -> Buf {
        let mut v = vec![0u8; h + d + t];
        v[h..h + d].fill(b'A');
        Buf {
            store: v.into(),
            head: h,
            len: d,
        }
    }

    pub fn data(&self) -> &[u8] {
        &self.store[self.head..self.head + self.len]
    }
}

/// A pregenerated received tensor.
pub struct Received {
    chain: Vec<Buf>,
    headroom: usize,
    tailroom: usize,
}

/// A loaded tensor: the one received buffer (shared), or a new contiguous
/// buffer of headroom + data + tailroom bytes holding the data after the
/// headroom.
pub enum Loaded {
    Shared(Buf),
    Coalesced { buf: Vec<u8>, headroom: usize },
}

impl Loaded {
    pub fn data(&self) -> &[u8] {
        match self {
            Loaded::Shared(b) => b.data(),
            Loaded::Coalesced { buf, headroom } => &buf[*headroom..],
        }
    }
}

/// Loads a received tensor: clones the chain, then coalesces it when it
/// has more than one buffer (upstream's copy and
/// `coalesceWithHeadroomTailroom`, which leaves one buffer as it is).
pub fn load_tensor(r: &Received) -> Loaded {
    let mut chain = r.chain.clone();
    if chain.len() == 1
        && let Some(b) = chain.pop()
    {
        return Loaded::Shared(b);
    }
    let total: usize = chain.iter().map(|b| b.len).sum();
    let mut buf = Vec::with_capacity(r.headroom + total + r.tailroom);
    buf.resize(r.headroom, 0);
    for b in &chain {
        buf.extend_from_slice(b.data());
    }
    Loaded::Coalesced {
        buf,
        headroom: r.headroom,
    }
}

/// What instances with the same input share: every shape's copies.
pub struct Pregenerated {
    /// `copies[shape][i]`.
    copies: Vec<Vec<Received>>,
}

pub struct TensorDeser {
    data: Arc<Pregenerated>,
    /// Shape indices, drawn with the shapes' frequencies.
    book: Vec<u32>,
    cursor: AtomicUsize,
    requests_per_run: usize,
    parts: usize,
    /// Mean bytes copied per request (coalesced chains only).
    copied_per_request: f64,
}

impl TensorDeser {
    pub fn new(p: &Params, h: &HandleObjs, fidx: usize) -> Result<Self, Error> {
        let requests_per_run = p.usize("requests_per_run")?;
        let mult = p.usize_or("request_book_multiplier", 10)?;
        let num_threads = p.usize_or("num_threads", 4)?;
        let input = p.str_or("input", "TensorDeser")?;
        let file = p.str_or("distribution_file", "")?;
        if !p.has("distribution_file") {
            return Err(Error::Input(
                "TensorDeser params.distribution_file: missing".into(),
            ));
        }
        if mult == 0 {
            return Err(Error::Input(
                "TensorDeser params.request_book_multiplier: 0: expected >= 1".into(),
            ));
        }
        if num_threads > 4096 {
            return Err(Error::Input(format!(
                "TensorDeser params.num_threads: {num_threads}: expected 0..=4096"
            )));
        }
        let shapes = parse_distribution(
            &read_param_file("TensorDeser", "distribution_file", file)?,
            file,
        )?;
        let data = h.get_or_build(&format!("{input}\u{0}{file}\u{0}{mult}"), || {
            Ok(Pregenerated {
                copies: shapes
                    .iter()
                    .map(|s| {
                        (0..mult)
                            .map(|_| Received {
                                chain: s.bufs.iter().map(|&(h, d, t)| Buf::new(h, d, t)).collect(),
                                headroom: s.headroom,
                                tailroom: s.tailroom,
                            })
                            .collect()
                    })
                    .collect(),
            })
        })?;
        if data.copies.len() != shapes.len() {
            return Err(Error::Input(format!(
                "TensorDeser params.input {input:?}: already built from another distribution"
            )));
        }
        // Upstream's table: frequencies scaled to at most 10M entries,
        // every shape with a frequency > 0 at least once.
        let total: f64 = shapes.iter().map(|s| s.frequency as f64).sum();
        let scale = MAX_TABLE.min(total) / total;
        let weights: Vec<f64> = shapes
            .iter()
            .map(|s| match s.frequency {
                0 => 0.0,
                f => ((f as f64 * scale).floor()).max(1.0),
            })
            .collect();
        let pick = WeightedIndex::new(&weights)
            .map_err(|e| Error::Input(format!("{file}: frequencies cannot be sampled: {e}")))?;
        let mut rng = rand::rngs::SmallRng::seed_from_u64(0x7e45_0de5 ^ fidx as u64);
        let book: Vec<u32> = (0..mult * shapes.len())
            .map(|_| pick.sample(&mut rng) as u32)
            .collect();
        let copied = |s: &ChainShape| -> f64 {
            if s.bufs.len() > 1 {
                s.bufs.iter().map(|b| b.1).sum::<usize>() as f64
            } else {
                0.0
            }
        };
        let copied_per_request = book
            .iter()
            .map(|&i| copied(&shapes[i as usize]))
            .sum::<f64>()
            / book.len() as f64;
        Ok(TensorDeser {
            data,
            book,
            cursor: AtomicUsize::new(0),
            requests_per_run,
            parts: num_threads.max(1),
            copied_per_request,
        })
    }

    /// Loads requests `from..to` of this run, the first from book entry
    /// `start`; returns the XOR of the loaded lengths.
    fn run(&self, start: usize, from: usize, to: usize) -> usize {
        let mut x = 0usize;
        for i in from..to {
            let shape = self.book[(start + (i - from)) % self.book.len()] as usize;
            let copies = &self.data.copies[shape];
            let t = load_tensor(&copies[i % copies.len()]);
            x ^= t.data().len();
        }
        x
    }
}

impl Kernel for TensorDeser {
    fn fire(&self, _rq: &RequestObjs, part: usize) -> Result<Fired, Error> {
        let (from, to) = part_range(self.requests_per_run, self.parts, part % self.parts);
        let start = self.cursor.fetch_add(to - from, Ordering::Relaxed) % self.book.len();
        std::hint::black_box(self.run(start, from, to));
        Ok(Fired::nothing())
    }

    fn parts(&self) -> usize {
        self.parts
    }

    /// Bytes copied by coalescing, per part (on average).
    fn work(&self) -> Work {
        Work {
            flops: 0.0,
            bytes: self.copied_per_request * self.requests_per_run as f64 / self.parts as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use serde_json::json;

    #[test]
    fn the_distribution_format_is_read_and_bad_lines_are_named() {
        let s = parse_distribution(
            "10,2,3,[{h:1|d:4|t:5}]\n\n5,0,0,[{h:0|d:100|t:0};{h:2|d:50|t:1}]\n",
            "d.dist",
        )
        .unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(
            s[1],
            ChainShape {
                frequency: 5,
                headroom: 0,
                tailroom: 0,
                bufs: vec![(0, 100, 0), (2, 50, 1)]
            }
        );
        for (text, want) in [
            ("1,2,3\n", "d.dist:1: expected 4 comma-separated columns"),
            (
                "1,2,3,[{h:1|d:2|t:3}]\nx,2,3,[{h:1|d:2|t:3}]",
                "d.dist:2: frequency \"x\"",
            ),
            (
                "1,2,3,[{h:1|d:2}]",
                "d.dist:1: chain: \"h:1|d:2\": expected h:N|d:N|t:N",
            ),
            ("1,2,3,[{h:1|d:2|q:3}]", "unknown key \"q\""),
            ("1,2,3,[]", "no {h:N|d:N|t:N} buffers"),
            ("", "no chain shapes"),
            ("0,2,3,[{h:1|d:2|t:3}]", "every frequency is 0"),
        ] {
            let e = parse_distribution(text, "d.dist").unwrap_err();
            assert!(e.to_string().contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn a_chain_is_coalesced_with_its_room_and_one_buffer_is_shared() {
        let r = Received {
            chain: vec![Buf::new(3, 4, 1), Buf::new(0, 2, 7)],
            headroom: 16,
            tailroom: 8,
        };
        match load_tensor(&r) {
            Loaded::Coalesced { buf, headroom } => {
                assert_eq!(headroom, 16);
                assert_eq!(&buf[16..], b"AAAAAA");
                assert!(buf.capacity() >= 16 + 6 + 8);
            }
            Loaded::Shared(_) => panic!("a two-buffer chain must be coalesced"),
        }
        let one = Received {
            chain: vec![Buf::new(3, 4, 1)],
            headroom: 100,
            tailroom: 100,
        };
        match load_tensor(&one) {
            Loaded::Shared(b) => {
                assert_eq!(b.data(), b"AAAA");
                assert!(Arc::ptr_eq(&b.store, &one.chain[0].store));
            }
            Loaded::Coalesced { .. } => panic!("one buffer is not copied"),
        }
    }

    #[test]
    fn fires_walk_the_book_in_parts_and_report_copied_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("d.dist");
        std::fs::write(
            &f,
            "3,8,8,[{h:0|d:100|t:0};{h:0|d:50|t:0}]\n1,0,0,[{h:1|d:9|t:1}]\n",
        )
        .unwrap();
        let m = json!({"requests_per_run": 10, "num_threads": 3, "request_book_multiplier": 4,
                       "distribution_file": f.to_str().unwrap()});
        let p = Params {
            kernel: "TensorDeser",
            map: m.as_object().unwrap(),
        };
        let h = HandleObjs::new();
        let k = TensorDeser::new(&p, &h, 0).unwrap();
        assert_eq!(k.parts(), 3);
        assert_eq!(k.book.len(), 8);
        assert_eq!(k.data.copies.len(), 2);
        assert!(k.data.copies.iter().all(|c| c.len() == 4));
        // 150 bytes copied for each multi-buffer request, none otherwise.
        let twos = k.book.iter().filter(|&&i| i == 0).count() as f64;
        let want = twos / 8.0 * 150.0 * 10.0 / 3.0;
        assert!((k.work().bytes - want).abs() < 1e-9, "{:?}", k.work());
        let rq = RequestObjs::new(Bytes::new());
        for part in 0..3 {
            k.fire(&rq, part).unwrap();
        }
        assert_eq!(k.cursor.load(Ordering::Relaxed), 10);
        // XOR of loaded lengths over one run of every request.
        let x = k.run(0, 0, 2);
        let len = |i: usize| if k.book[i] == 0 { 150 } else { 9 };
        assert_eq!(x, len(0) ^ len(1));
        // A second instance of the same input shares the buffers.
        let k2 = TensorDeser::new(&p, &h, 1).unwrap();
        assert!(Arc::ptr_eq(&k.data, &k2.data));
        let bad = json!({"requests_per_run": 1, "distribution_file": "/nonexistent/d.dist"});
        let e = TensorDeser::new(
            &Params {
                kernel: "TensorDeser",
                map: bad.as_object().unwrap(),
            },
            &HandleObjs::new(),
            0,
        )
        .err()
        .unwrap();
        assert!(e.to_string().contains("/nonexistent/d.dist"), "{e}");
    }
}
