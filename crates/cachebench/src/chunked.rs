//! Replaying CDN and block-storage traces piece by piece, as CacheLib's
//! `PieceWiseReplayGenerator` (`generator: piecewise-replay`) and
//! `BlockChunkReplayGenerator` (`generator: block-replay`) do: a request
//! for an object (or a block range) becomes several cache operations, one
//! per piece, each a get, and a set when the get missed; the generators'
//! own stats blocks count bytes and objects served from the cache.
//!
//! # piecewise-replay (Meta's CDN traces)
//!
//! Each file's first line is a header and is skipped; fields are by
//! position: timestamp, cacheKey, OpType (ignored: every request is a
//! get), objectSize, responseSize, responseHeaderSize, rangeStart,
//! rangeEnd (negative: none), TTL, samplingRate, cacheHit (0/1; other
//! values: unknown), itemValue, then `numAggregationFields` fields and
//! `numExtraFields` more; a line may lack the last two defined fields
//! (then there is no cacheHit, and the aggregation fields start one
//! earlier, as upstream). A line with another field count, an empty or
//! `-` key, a response or header size or TTL that is not positive, or a
//! response smaller than its header is invalid and skipped. A response
//! body shorter than the object makes the request a range request (as
//! upstream rectifies it). Objects smaller than `cachePieceSize` are one
//! item (body and header); larger ones are a metadata item (size 0), a
//! header item (`KEY|#|header-0`) and body pieces (`KEY|#|body-0-N`, and
//! `KEY|@|G|#|body-0-N` past the first 16 MiB group), at most
//! `maxCachePieces` of them cached. `ampFactor` copies each request with a
//! 4-digit suffix (trailing `0`s of a key over 11 bytes trimmed first).
//!
//! # block-replay (Meta's block-storage chunk traces)
//!
//! Columns by the header's names: `block_id`, `op_name`, `io_offset`,
//! `io_size` (required), `op_time`, `block_id_size`, `rs_shard_id`,
//! `op_count`; without a recognised header, by position in that order's
//! upstream enumeration. `getChunkData*` is a get, `putChunk*` a set; the
//! key is `BLOCK_ID_SSS` with the shard id, padded with `0`s to
//! `block_id_size` (at most 256, 5 less with `ampFactor`). A block of
//! `blockSizeKB` is cached in `chunkSizeKB` chunks (`KEY-N`); a range past
//! the block is invalid. Lines upstream cannot process (a required field
//! missing, another op name: upstream stops there) are skipped here.
//!
//! # The stats blocks
//!
//! `== PieceWiseReplayGenerator Stats ==` / `== BlockChunkReplayGenerator
//! Stats ==` after the throughput lines, as upstream's: overall, the
//! benchmark from the trace's own hit field (empty for block traces), the
//! request latency (from a request's first cache operation to its last,
//! over the last minute), per aggregation-field value
//! (`statsPerAggField`), and after the NVM warm-up
//! (`nvmCacheWarmupCheckPolicy.requestTimestampThreshold`).

use crate::latency::Recorder;
use std::io::BufRead;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};

/// Upstream's physical grouping of pieces: 16 MiB.
const PIECE_GROUP_BYTES: u64 = 16 * 1024 * 1024;
const PIECE_SEPARATOR: &str = "|#|";
const GROUP_SEPARATOR: &str = "|@|";

/// Which generator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    PieceWise,
    BlockChunk,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::PieceWise => "PieceWiseReplayGenerator",
            Kind::BlockChunk => "BlockChunkReplayGenerator",
        }
    }
}

/// What the generator reads and how it cuts requests.
#[derive(Debug, Clone)]
pub struct ChunkSpec {
    pub kind: Kind,
    pub files: Vec<PathBuf>,
    pub repeat: bool,
    pub amp_factor: u32,
    pub fast_forward: u64,
    pub timestamp_factor: u64,
    /// piecewise: `cachePieceSize`, `maxCachePieces`.
    pub piece_size: u64,
    pub max_pieces: u64,
    /// piecewise: `numAggregationFields`, `numExtraFields`,
    /// `statsPerAggField`.
    pub aggregation_fields: u32,
    pub extra_fields: u32,
    pub stats_per_field: Vec<(u32, Vec<String>)>,
    /// block: `blockSizeKB` and `chunkSizeKB` in bytes.
    pub block_size: u64,
    pub chunk_size: u64,
    /// A request at or past this timestamp warms the NVM cache (0: off).
    pub warmup_timestamp: u64,
}

/// Upstream's `InternalStats`.
#[derive(Default)]
struct Counts {
    get_bytes: AtomicU64,
    get_hit_bytes: AtomicU64,
    get_full_hit_bytes: AtomicU64,
    get_body_bytes: AtomicU64,
    get_hit_body_bytes: AtomicU64,
    get_full_hit_body_bytes: AtomicU64,
    ingress: AtomicU64,
    egress: AtomicU64,
    obj_gets: AtomicU64,
    obj_get_hits: AtomicU64,
    obj_get_full_hits: AtomicU64,
}

fn add(a: &AtomicU64, v: u64) {
    a.fetch_add(v, Ordering::Relaxed);
}

fn get(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

/// A stats update, applied to every set of counts it concerns.
#[derive(Clone, Copy)]
enum Event {
    Access {
        get: u64,
        body: u64,
        egress: u64,
    },
    NonPieceHit {
        hit: u64,
        body: u64,
    },
    MetadataHit(u64),
    HeaderHit(u64),
    BodyHit(u64),
    FullHit {
        header: u64,
        body: u64,
    },
    Ingress(u64),
    /// block-replay: a request's hit (full when bytes > 0).
    RequestHit(u64),
}

impl Counts {
    fn apply(&self, e: Event) {
        match e {
            Event::Access { get, body, egress } => {
                add(&self.get_bytes, get);
                add(&self.get_body_bytes, body);
                add(&self.obj_gets, 1);
                add(&self.egress, egress);
            }
            Event::NonPieceHit { hit, body } => {
                add(&self.get_hit_bytes, hit);
                add(&self.get_full_hit_bytes, hit);
                add(&self.get_hit_body_bytes, body);
                add(&self.get_full_hit_body_bytes, body);
                add(&self.obj_get_hits, 1);
                add(&self.obj_get_full_hits, 1);
            }
            Event::MetadataHit(b) => {
                add(&self.get_hit_bytes, b);
                add(&self.obj_get_hits, 1);
            }
            Event::HeaderHit(b) => add(&self.get_hit_bytes, b),
            Event::BodyHit(b) => {
                add(&self.get_hit_bytes, b);
                add(&self.get_hit_body_bytes, b);
            }
            Event::FullHit { header, body } => {
                add(&self.get_full_hit_bytes, header + body);
                add(&self.get_full_hit_body_bytes, body);
                add(&self.obj_get_full_hits, 1);
            }
            Event::Ingress(b) => add(&self.ingress, b),
            Event::RequestHit(b) => {
                add(&self.obj_get_hits, 1);
                if b > 0 {
                    add(&self.get_full_hit_bytes, b);
                    add(&self.obj_get_full_hits, 1);
                }
            }
        }
    }

    /// Upstream's benchmark counts: a request the trace says was a hit
    /// counts whole.
    fn benchmark(&self, get: u64, body: u64, egress: u64, hit: bool) {
        self.apply(Event::Access { get, body, egress });
        if hit {
            add(&self.get_hit_bytes, get);
            add(&self.get_full_hit_bytes, get);
            add(&self.get_hit_body_bytes, body);
            add(&self.get_full_hit_body_bytes, body);
            add(&self.obj_get_hits, 1);
            add(&self.obj_get_full_hits, 1);
        }
    }
}

/// The generator's stats (shared by the threads).
pub struct ChunkStats {
    kind: Kind,
    overall: Counts,
    benchmark: Counts,
    after_warmup: Counts,
    /// The warm-up timestamp, once warm.
    warm: Mutex<Option<u64>>,
    warm_flag: AtomicBool,
    /// Aggregation field index, then each tracked value with its counts
    /// (in upstream's order: by field, then value).
    extra: Vec<(u32, Vec<(String, Counts)>)>,
    /// Nanoseconds per request.
    latency: Recorder,
    /// Lines read (upstream's samples) and lines skipped as invalid.
    pub samples: AtomicU64,
    pub invalid: AtomicU64,
}

impl ChunkStats {
    pub fn new(spec: &ChunkSpec) -> ChunkStats {
        let mut extra: Vec<(u32, Vec<(String, Counts)>)> = spec
            .stats_per_field
            .iter()
            .map(|(f, vals)| {
                let mut vals: Vec<String> = vals.clone();
                vals.sort();
                vals.dedup();
                (
                    *f,
                    vals.into_iter().map(|v| (v, Counts::default())).collect(),
                )
            })
            .collect();
        extra.sort_by_key(|(f, _)| *f);
        ChunkStats {
            kind: spec.kind,
            overall: Counts::default(),
            benchmark: Counts::default(),
            after_warmup: Counts::default(),
            warm: Mutex::new(None),
            warm_flag: AtomicBool::new(false),
            extra,
            latency: Recorder::new(),
            samples: AtomicU64::new(0),
            invalid: AtomicU64::new(0),
        }
    }

    fn record(&self, e: Event, fields: &[String]) {
        self.overall.apply(e);
        if self.warm_flag.load(Ordering::Relaxed) {
            self.after_warmup.apply(e);
        }
        for (f, vals) in &self.extra {
            if let Some(v) = fields.get(*f as usize)
                && let Some((_, c)) = vals.iter().find(|(x, _)| x == v)
            {
                c.apply(e);
            }
        }
    }

    fn set_warm(&self, ts: u64) {
        let mut w = self.warm.lock().unwrap_or_else(|e| e.into_inner());
        if w.is_none() {
            *w = Some(ts);
            self.warm_flag.store(true, Ordering::Relaxed);
        }
    }

    /// Upstream's stats block (`renderStats`), rates over `secs`, after a
    /// blank line.
    pub fn render(&self, st: crate::output::Style, secs: f64) -> String {
        let mut out = format!("\n== {} Stats ==\n", self.kind.name());
        out.push_str("= Overall stats =\n");
        out.push_str(&self.render_counts(st, &self.overall, secs));
        out.push_str("= Benchmark stats =\n");
        out.push_str(&self.render_counts(st, &self.benchmark, secs));
        out.push_str("= Request Latency =\n");
        let h = self.latency.window();
        let us = |ns: f64| ns / 1000.0;
        let at = |q: f64| {
            if h.is_empty() {
                0.0
            } else if q >= 1.0 {
                h.max() as f64
            } else {
                h.value_at_quantile(q) as f64
            }
        };
        let rows = [
            ("avg", if h.is_empty() { 0.0 } else { h.mean().trunc() }),
            ("p50", at(0.5)),
            ("p90", at(0.9)),
            ("p99", at(0.99)),
            ("p999", at(0.999)),
            ("p9999", at(0.9999)),
            ("p99999", at(0.99999)),
            ("p999999", at(0.999999)),
            ("p100", at(1.0)),
        ];
        for (pct, ns) in rows {
            out.push_str(&format!(
                "{:<20} {pct:<8} : {:>10} us\n",
                "Total Request Latency",
                st.fixed(us(ns), 2)
            ));
        }
        for (f, vals) in &self.extra {
            out.push_str(&format!("= Breakdown stats for extra field {f} =\n"));
            for (v, c) in vals {
                out.push_str(&format!("Stats for field value {v}: \n"));
                out.push_str(&self.render_counts(st, c, secs));
            }
        }
        if let Some(ts) = *self.warm.lock().unwrap_or_else(|e| e.into_inner()) {
            out.push_str(&format!("= Overall stats after warmup [{ts}] =\n"));
            out.push_str(&self.render_counts(st, &self.after_warmup, secs));
        }
        out
    }

    fn render_counts(&self, st: crate::output::Style, c: &Counts, secs: f64) -> String {
        const GB: f64 = 1024.0 * 1024.0 * 1024.0;
        let pct = |n: u64, d: u64| {
            if d == 0 {
                0.0
            } else {
                100.0 * n as f64 / d as f64
            }
        };
        let f2 = |v: f64| st.fixed(v, 2);
        let mut out = format!(
            "{:<10}: {} million\n",
            "Total Processed Samples",
            f2(get(&c.obj_gets) as f64 / 1e6)
        );
        let bytes_line = |k0: &str, k1: &str, total: u64, hit: u64, full: u64| {
            let gb = total as f64 / GB;
            format!(
                "{k0:<12}: {:>6} GB, {k1:<18}: {:>6} GB/s, {:<8}: {:>6}%, {:<10}: {:>6}%\n",
                f2(gb),
                f2(gb / secs),
                "success",
                f2(pct(hit, total)),
                "full success",
                f2(pct(full, total))
            )
        };
        out.push_str(&bytes_line(
            "getBytes",
            "getBytesPerSec",
            get(&c.get_bytes),
            get(&c.get_hit_bytes),
            get(&c.get_full_hit_bytes),
        ));
        if self.kind == Kind::PieceWise {
            out.push_str(&bytes_line(
                "getBodyBytes",
                "getBodyBytesPerSec",
                get(&c.get_body_bytes),
                get(&c.get_hit_body_bytes),
                get(&c.get_full_hit_body_bytes),
            ));
        }
        let (egress, ingress) = (get(&c.egress), get(&c.ingress));
        let ratio = if egress == 0 {
            0.0
        } else {
            100.0 * (egress as i64 - ingress as i64) as f64 / egress as f64
        };
        out.push_str(&format!(
            "{:<12}: {:>6} GB, {:<12}: {:>6} GB, {:<18}: {:>6} GB/s, {:<18}: {:>6} GB/s, {:<8}: {:>6}%\n",
            "egressBytes",
            f2(egress as f64 / GB),
            "ingressBytes",
            f2(ingress as f64 / GB),
            "egressBytesPerSec",
            f2(egress as f64 / GB / secs),
            "ingressBytesPerSec",
            f2(ingress as f64 / GB / secs),
            "ingressEgressratio",
            f2(ratio)
        ));
        let gets = get(&c.obj_gets);
        out.push_str(&format!(
            "{:<12}: {:>10}, {:<18}: {:>8} /s, {:<8}: {:>6}%, {:<10}: {:>6}%\n",
            "objectGet",
            st.int(gets),
            "objectGetPerSec",
            st.int((gets as f64 / secs) as u64),
            "success",
            f2(pct(get(&c.obj_get_hits), gets)),
            "full success",
            f2(pct(get(&c.obj_get_full_hits), gets))
        ));
        out
    }
}

/// The pieces of a request: upstream's `GenericPieces`.
#[derive(Debug, Clone)]
struct Pieces {
    piece_size: u64,
    per_group: u64,
    full_len: u64,
    start: u64,
    end: u64,
    cur: u64,
}

impl Pieces {
    fn new(
        piece_size: u64,
        per_group: u64,
        full_len: u64,
        range: Option<(u64, Option<u64>)>,
    ) -> Pieces {
        let total = (full_len.max(1) - 1) / piece_size + 1;
        let (mut start, mut end) = (0, total - 1);
        if let Some((s, e)) = range {
            start = s / piece_size;
            if let Some(e) = e.filter(|e| *e < full_len) {
                end = e / piece_size;
            }
        }
        let end = end.max(start);
        Pieces {
            piece_size,
            per_group,
            full_len,
            start,
            end,
            cur: start,
        }
    }

    fn last_byte(&self) -> u64 {
        ((self.end + 1) * self.piece_size - 1).min(self.full_len.saturating_sub(1))
    }

    fn size_of(&self, i: u64) -> u64 {
        if i < self.end {
            self.piece_size
        } else {
            self.last_byte() % self.piece_size + 1
        }
    }

    fn total(&self) -> u64 {
        (self.last_byte() + 1).saturating_sub(self.start * self.piece_size)
    }

    fn remaining(&self) -> u64 {
        if self.cur > self.end {
            0
        } else {
            (self.last_byte() + 1).saturating_sub(self.cur * self.piece_size)
        }
    }

    fn within(&self, i: u64) -> bool {
        i <= self.end
    }

    fn body_key(&self, base: &str, n: u64) -> String {
        let group = n.checked_div(self.per_group).unwrap_or(0);
        if group == 0 {
            format!("{base}{PIECE_SEPARATOR}body-0-{n}")
        } else {
            format!("{base}{GROUP_SEPARATOR}{group}{PIECE_SEPARATOR}body-0-{n}")
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PieceType {
    Metadata,
    Header,
    Body,
}

/// The operation a request's current piece needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PieceOp {
    Get,
    Set,
}

/// What a piece operation did (upstream's `OpResultType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PieceResult {
    GetHit,
    GetMiss,
    SetSuccess,
    SetFailure,
}

/// One trace request in progress.
#[derive(Debug, Clone)]
pub struct ChunkReq {
    kind: Kind,
    pub timestamp: u64,
    base: String,
    /// The current piece's key, size and operation.
    pub key: String,
    pub size: u64,
    pub op: PieceOp,
    pub ttl: u32,
    /// block-replay: the trace's operation.
    trace_op: PieceOp,
    pieces: Option<Pieces>,
    piece_type: PieceType,
    header: u64,
    full: u64,
    range: Option<(u64, Option<u64>)>,
    fields: Vec<String>,
    is_hit: Option<bool>,
    /// block-replay: the first and last missed pieces (upstream's ints).
    missed: (i64, i64),
    started: Option<std::time::Instant>,
}

/// Splits the request per upstream's rules and records its access.
fn begin(r: &mut ChunkReq, stats: &ChunkStats) {
    r.started = Some(std::time::Instant::now());
    match r.kind {
        Kind::PieceWise => {
            let body = r.pieces.as_ref().map_or(r.full, Pieces::total);
            let get = body + r.header;
            let egress = match r.range {
                Some((s, e)) => e.map_or(r.full.saturating_sub(s), |e| e - s + 1) + r.header,
                None => r.full + r.header,
            };
            stats.record(Event::Access { get, body, egress }, &r.fields);
            if let Some(h) = r.is_hit {
                stats.benchmark.benchmark(get, body, egress, h);
            }
        }
        Kind::BlockChunk => {
            let get = r.pieces.as_ref().map_or(0, Pieces::total);
            let egress = match r.range {
                Some((s, Some(e))) => e - s + 1,
                Some((s, None)) => r.full.saturating_sub(s),
                None => r.full,
            };
            stats.record(
                Event::Access {
                    get,
                    body: 0,
                    egress,
                },
                &r.fields,
            );
        }
    }
}

/// Moves the request to its next operation after `result`; true when it
/// is done (upstream's `processReq`).
fn advance(r: &mut ChunkReq, result: PieceResult, stats: &ChunkStats, max_pieces: u64) -> bool {
    let done = match r.kind {
        Kind::PieceWise => advance_piecewise(r, result, stats, max_pieces),
        Kind::BlockChunk => advance_block(r, result, stats),
    };
    if done && let Some(t0) = r.started {
        stats
            .latency
            .record(u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX));
    }
    done
}

fn advance_piecewise(
    r: &mut ChunkReq,
    result: PieceResult,
    stats: &ChunkStats,
    max_pieces: u64,
) -> bool {
    use PieceResult::*;
    let Some(p) = r.pieces.as_mut() else {
        // One item: body and header.
        return match result {
            GetHit => {
                stats.record(
                    Event::NonPieceHit {
                        hit: r.size,
                        body: r.size.saturating_sub(r.header),
                    },
                    &r.fields,
                );
                true
            }
            SetSuccess | SetFailure => true,
            GetMiss => {
                stats.record(Event::Ingress(r.size), &r.fields);
                r.op = PieceOp::Set;
                false
            }
        };
    };
    if r.piece_type == PieceType::Metadata {
        match result {
            GetMiss => {
                stats.record(Event::Ingress(r.header + p.remaining()), &r.fields);
                r.op = PieceOp::Set;
                return false;
            }
            GetHit => {
                stats.record(Event::MetadataHit(r.size), &r.fields);
                r.op = PieceOp::Get;
            }
            SetSuccess | SetFailure => r.op = PieceOp::Set,
        }
        r.key = format!("{}{PIECE_SEPARATOR}header-0", r.base);
        r.size = r.header;
        r.piece_type = PieceType::Header;
        return false;
    }
    match result {
        GetHit | SetSuccess | SetFailure => {
            let next = p.cur;
            if result == GetHit {
                if r.piece_type == PieceType::Header {
                    stats.record(Event::HeaderHit(r.size), &r.fields);
                } else {
                    stats.record(Event::BodyHit(p.size_of(next.saturating_sub(1))), &r.fields);
                }
            }
            if p.within(next) && next < max_pieces {
                r.key = p.body_key(&r.base, next);
                r.size = p.size_of(next);
                r.op = if result == GetHit {
                    PieceOp::Get
                } else {
                    PieceOp::Set
                };
                r.piece_type = PieceType::Body;
                p.cur += 1;
                false
            } else {
                if result == GetHit {
                    if !p.within(next) {
                        stats.record(
                            Event::FullHit {
                                header: r.header,
                                body: p.total(),
                            },
                            &r.fields,
                        );
                    } else if next >= max_pieces {
                        stats.record(Event::Ingress(r.header + p.remaining()), &r.fields);
                    }
                }
                true
            }
        }
        GetMiss => {
            let ingress = if r.piece_type == PieceType::Header {
                r.header + p.remaining()
            } else {
                r.header + p.size_of(p.cur.saturating_sub(1)) + p.remaining()
            };
            stats.record(Event::Ingress(ingress), &r.fields);
            r.op = PieceOp::Set;
            false
        }
    }
}

fn advance_block(r: &mut ChunkReq, result: PieceResult, stats: &ChunkStats) -> bool {
    use PieceResult::*;
    let Some(p) = r.pieces.as_mut() else {
        return true;
    };
    let done = match result {
        GetHit | SetSuccess | SetFailure => {
            p.cur += 1;
            let next = p.cur;
            if result == GetHit {
                stats.record(Event::BodyHit(p.size_of(next - 1)), &r.fields);
            }
            if p.within(next) {
                r.op = r.trace_op;
                r.key = format!("{}-{next}", r.base);
                r.size = p.size_of(next);
                false
            } else {
                true
            }
        }
        GetMiss => {
            r.op = PieceOp::Set;
            // As upstream: the piece before the current one (an int, so
            // -1 before the first piece).
            let at = p.cur as i64 - 1;
            if r.missed.0 < 0 {
                r.missed.0 = at;
            }
            r.missed.1 = at;
            false
        }
    };
    if done && r.trace_op == PieceOp::Get {
        if r.missed.0 < 0 {
            stats.record(Event::RequestHit(p.total()), &r.fields);
        } else {
            let missed = (r.missed.1 - r.missed.0 + 1).max(0) as u64;
            let total = p.end - p.start + 1;
            if total > missed {
                stats.record(Event::RequestHit(0), &r.fields);
            }
            stats.record(Event::Ingress(missed * p.piece_size), &r.fields);
        }
    }
    done
}

/// Upstream's key escaping: the piece separator doubled.
fn escape(key: &str) -> String {
    key.replace(
        PIECE_SEPARATOR,
        &format!("{PIECE_SEPARATOR}{PIECE_SEPARATOR}"),
    )
}

/// A piecewise-replay request from a trace line's fields; None when the
/// line is invalid.
fn parse_piecewise(f: &[&str], spec: &ChunkSpec) -> Option<Vec<ChunkReq>> {
    const DEFINED: usize = 12;
    let partial = DEFINED + spec.aggregation_fields as usize;
    let total = partial + spec.extra_fields as usize;
    if f.len() > total || f.len() + 2 < total {
        return None;
    }
    let num = |i: usize| f.get(i).and_then(|s| s.trim().parse::<u64>().ok());
    let key = f[1];
    let (full, response, header) = (num(3)?, num(4)?, num(5)?);
    let ttl: u32 = f.get(8)?.trim().parse().ok()?;
    if key.is_empty() || key == "-" || response == 0 || header == 0 || ttl == 0 {
        return None;
    }
    if response < header {
        return None;
    }
    let timestamp = num(0)? / spec.timestamp_factor.max(1);
    let range_field = |i: usize| -> Option<Option<u64>> {
        let v: i64 = f.get(i)?.trim().parse().ok()?;
        Some((v >= 0).then(|| (v as u64).min(full.saturating_sub(1))))
    };
    let (mut start, mut end) = (range_field(6)?, range_field(7)?);
    let body = response - header;
    match start {
        None => {
            if body < full {
                if body == 0 {
                    return None;
                }
                start = Some(0);
                end = Some(body - 1);
            }
        }
        Some(s) => {
            let size = end.map_or(full.saturating_sub(s), |e| (e + 1).saturating_sub(s));
            if body < size {
                if body + s == 0 {
                    return None;
                }
                end = Some(body + s - 1);
            }
        }
    }
    let (mut agg_start, mut agg_end) = (DEFINED, partial);
    let mut is_hit = None;
    if f.len() == total {
        is_hit = match f[10].trim().parse::<i32>() {
            Ok(0) => Some(false),
            Ok(1) => Some(true),
            _ => None,
        };
    } else {
        agg_start -= 1;
        agg_end -= 1;
    }
    let fields: Vec<String> = (agg_start..agg_end)
        .map(|i| f.get(i).map_or(String::new(), |s| s.to_string()))
        .collect();
    // Upstream's RequestRange: no start, or an end before the start, is
    // no range.
    let range = match (start, end) {
        (Some(s), Some(e)) if e < s => None,
        (Some(s), e) => Some((s, e)),
        (None, _) => None,
    };
    let mut prefix = key.to_string();
    if spec.amp_factor > 1 && prefix.len() > 11 {
        let floor = prefix.len().saturating_sub(4).max(11);
        while prefix.len() > floor && prefix.ends_with('0') {
            prefix.pop();
        }
    }
    let mut out = Vec::with_capacity(spec.amp_factor.max(1) as usize);
    for copy in 0..spec.amp_factor.max(1) {
        let mut k = prefix.clone();
        if spec.amp_factor > 1 {
            k.push_str(&format!("{copy:04}"));
        }
        let base = escape(&k);
        let mut r = ChunkReq {
            kind: Kind::PieceWise,
            timestamp,
            key: base.clone(),
            base,
            size: full + header,
            op: PieceOp::Get,
            ttl,
            trace_op: PieceOp::Get,
            pieces: None,
            piece_type: PieceType::Metadata,
            header,
            full,
            range,
            fields: fields.clone(),
            is_hit,
            missed: (-1, -1),
            started: None,
        };
        if full >= spec.piece_size {
            r.pieces = Some(Pieces::new(
                spec.piece_size,
                PIECE_GROUP_BYTES / spec.piece_size,
                full,
                range,
            ));
            r.size = 0;
        }
        out.push(r);
    }
    Some(out)
}

/// block-replay's columns (upstream's field ids) and their header names.
const BLOCK_COLUMNS: [(&str, bool); 8] = [
    ("op_time", false),
    ("block_id", true),
    ("block_id_size", false),
    ("rs_shard_id", false),
    ("op_name", true),
    ("op_count", false),
    ("io_offset", true),
    ("io_size", true),
];

/// Field id -> column, from a header line (None: positional).
fn block_header(line: &str) -> Option<Vec<Option<usize>>> {
    let names: Vec<&str> = line.split(',').collect();
    let mut map = vec![None; BLOCK_COLUMNS.len()];
    let mut any = false;
    for (col, name) in names.iter().enumerate() {
        if let Some(id) = BLOCK_COLUMNS.iter().position(|(n, _)| n == name)
            && map[id].is_none()
        {
            map[id] = Some(col);
            any = true;
        }
    }
    let complete = BLOCK_COLUMNS
        .iter()
        .zip(&map)
        .all(|((_, required), c)| !required || c.is_some());
    (any && complete).then_some(map)
}

fn parse_block(
    f: &[&str],
    map: &Option<Vec<Option<usize>>>,
    spec: &ChunkSpec,
) -> Option<Vec<ChunkReq>> {
    let field = |id: usize| -> Option<&str> {
        let col = match map {
            Some(m) => m[id]?,
            None => id,
        };
        f.get(col).copied()
    };
    let num = |id: usize| field(id).and_then(|s| s.trim().parse::<u64>().ok());
    let timestamp = num(0).unwrap_or(0);
    let op_name = field(4)?;
    let op = if op_name.starts_with("getChunkData") {
        PieceOp::Get
    } else if op_name.starts_with("putChunk") {
        PieceOp::Set
    } else {
        return None;
    };
    let mut block = field(1)?.to_string();
    if let Some(shard) = num(3) {
        block = format!("{block}_{shard:03}");
    }
    if let Some(size) = num(2) {
        let mut len = (size as usize).max(block.len()).min(256);
        if spec.amp_factor > 1 && len > 5 {
            len -= 5;
        }
        if len > block.len() {
            block.extend(std::iter::repeat_n('0', len - block.len()));
        }
    }
    let (offset, size) = (num(6)?, num(7)?);
    if offset + size > spec.block_size || size == 0 {
        return None;
    }
    let range = Some((offset, Some(offset + size - 1)));
    let mut out = Vec::new();
    for copy in 0..spec.amp_factor.max(1) {
        let mut key = block.clone();
        if spec.amp_factor > 1 {
            key.push_str(&format!("_{copy:04}"));
        }
        let pieces = Pieces::new(spec.chunk_size, 0, spec.block_size, range);
        out.push(ChunkReq {
            kind: Kind::BlockChunk,
            timestamp,
            key: format!("{key}-{}", pieces.cur),
            size: pieces.size_of(pieces.cur),
            base: key,
            op,
            ttl: 0,
            trace_op: op,
            pieces: Some(pieces),
            piece_type: PieceType::Body,
            header: 0,
            full: spec.block_size,
            range,
            fields: Vec::new(),
            is_hit: None,
            missed: (-1, -1),
            started: None,
        });
    }
    Some(out)
}

/// Reads the trace files in order (again from the first with `repeat`),
/// header lines skipped, handing each request to its thread's queue.
fn feed(
    spec: &ChunkSpec,
    senders: Vec<SyncSender<ChunkReq>>,
    stop: &AtomicBool,
    stats: &ChunkStats,
) -> Result<(), String> {
    let threads = senders.len().max(1);
    let mut open: Vec<bool> = vec![true; threads];
    let mut skip = spec.fast_forward;
    loop {
        for path in &spec.files {
            let f = std::fs::File::open(path)
                .map_err(|e| format!("cannot read trace file {}: {e}", path.display()))?;
            let mut lines = std::io::BufReader::with_capacity(1 << 16, f).lines();
            let header = match lines.next() {
                Some(l) => l.map_err(|e| format!("{}: {e}", path.display()))?,
                None => continue,
            };
            let map = if spec.kind == Kind::BlockChunk {
                block_header(&header)
            } else {
                None
            };
            for line in lines {
                let line = line.map_err(|e| format!("{}: {e}", path.display()))?;
                if skip > 0 {
                    skip -= 1;
                    continue;
                }
                if stop.load(Ordering::Relaxed) || open.iter().all(|o| !o) {
                    return Ok(());
                }
                stats.samples.fetch_add(1, Ordering::Relaxed);
                let f: Vec<&str> = line.split(',').collect();
                let reqs = match spec.kind {
                    Kind::PieceWise => parse_piecewise(&f, spec),
                    Kind::BlockChunk => parse_block(&f, &map, spec),
                };
                let Some(reqs) = reqs else {
                    stats.invalid.fetch_add(1, Ordering::Relaxed);
                    continue;
                };
                for r in reqs {
                    let t = crate::replay::thread_of(r.base.as_bytes(), threads);
                    let mut pending = Some(r);
                    while let (true, Some(r)) = (open[t], pending.take()) {
                        match senders[t].try_send(r) {
                            Ok(()) => {}
                            Err(TrySendError::Full(back)) => {
                                pending = Some(back);
                                if stop.load(Ordering::Relaxed) {
                                    return Ok(());
                                }
                                std::thread::sleep(std::time::Duration::from_micros(50));
                            }
                            Err(TrySendError::Disconnected(_)) => open[t] = false,
                        }
                    }
                }
            }
        }
        if !spec.repeat {
            return Ok(());
        }
    }
}

/// The per-thread queues (upstream's: 10,000 requests for piecewise,
/// 1,000 for block).
pub fn queues(kind: Kind, threads: usize) -> (Vec<SyncSender<ChunkReq>>, Vec<Receiver<ChunkReq>>) {
    let cap = match kind {
        Kind::PieceWise => 10_000,
        Kind::BlockChunk => 1_000,
    };
    (0..threads.max(1))
        .map(|_| std::sync::mpsc::sync_channel(cap))
        .unzip()
}

/// Runs the feeder for `spec` (on the calling thread).
pub fn run_feeder(
    spec: &ChunkSpec,
    senders: Vec<SyncSender<ChunkReq>>,
    stop: &AtomicBool,
    stats: &ChunkStats,
) -> Result<(), crate::Error> {
    // The feeder's errors are the trace files' reads failing.
    feed(spec, senders, stop, stats).map_err(crate::Error::Host)
}

/// One thread's requests: the next operation of the request at the front,
/// and the request's move after its result.
pub struct ChunkQueue<'a> {
    rx: Receiver<ChunkReq>,
    current: Option<ChunkReq>,
    spec: &'a ChunkSpec,
    stats: &'a ChunkStats,
}

impl<'a> ChunkQueue<'a> {
    pub fn new(
        rx: Receiver<ChunkReq>,
        spec: &'a ChunkSpec,
        stats: &'a ChunkStats,
    ) -> ChunkQueue<'a> {
        ChunkQueue {
            rx,
            current: None,
            spec,
            stats,
        }
    }

    /// The request whose operation is next (a new one begins when the
    /// last is done); None at the end of the trace or when `stop` is set.
    pub fn next(&mut self, stop: &AtomicBool) -> Option<&ChunkReq> {
        if self.current.is_none() {
            let mut r = loop {
                if stop.load(Ordering::Relaxed) {
                    return None;
                }
                match self.rx.recv_timeout(std::time::Duration::from_millis(20)) {
                    Ok(r) => break r,
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return None,
                }
            };
            if self.spec.warmup_timestamp > 0 && r.timestamp >= self.spec.warmup_timestamp {
                self.stats.set_warm(r.timestamp);
            }
            begin(&mut r, self.stats);
            self.current = Some(r);
        }
        self.current.as_ref()
    }

    /// The result of the current operation.
    pub fn result(&mut self, result: PieceResult) {
        if let Some(r) = self.current.as_mut()
            && advance(r, result, self.stats, self.spec.max_pieces)
        {
            self.current = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: Kind) -> ChunkSpec {
        ChunkSpec {
            kind,
            files: Vec::new(),
            repeat: false,
            amp_factor: 1,
            fast_forward: 0,
            timestamp_factor: 1000,
            piece_size: 65536,
            max_pieces: 32000,
            aggregation_fields: 0,
            extra_fields: 0,
            stats_per_field: Vec::new(),
            block_size: 16 << 20,
            chunk_size: 128 << 10,
            warmup_timestamp: 0,
        }
    }

    fn fields(l: &str) -> Vec<&str> {
        l.split(',').collect()
    }

    /// A piecewise request for a 200,000-byte object: metadata, header and
    /// four body pieces (64 KiB each, the last 3,392 bytes); all missing,
    /// then all there.
    #[test]
    fn piecewise_object_in_pieces() {
        let s = spec(Kind::PieceWise);
        let stats = ChunkStats::new(&s);
        let line = "1000000,obj1,1,200000,200100,100,-1,-1,3600,1,0,";
        let mut r = parse_piecewise(&fields(line), &s).unwrap().remove(0);
        assert_eq!((r.timestamp, r.size, r.op), (1000, 0, PieceOp::Get));
        begin(&mut r, &stats);
        let mut keys = vec![(r.key.clone(), r.size, r.op)];
        let results = [
            PieceResult::GetMiss,
            PieceResult::SetSuccess,
            PieceResult::SetSuccess,
            PieceResult::SetSuccess,
            PieceResult::SetSuccess,
            PieceResult::SetSuccess,
            PieceResult::SetSuccess,
        ];
        let mut done = false;
        for res in results {
            done = advance(&mut r, res, &stats, s.max_pieces);
            if done {
                break;
            }
            keys.push((r.key.clone(), r.size, r.op));
        }
        assert!(done);
        let want: Vec<(String, u64, PieceOp)> = vec![
            ("obj1".into(), 0, PieceOp::Get),
            ("obj1".into(), 0, PieceOp::Set),
            ("obj1|#|header-0".into(), 100, PieceOp::Set),
            ("obj1|#|body-0-0".into(), 65536, PieceOp::Set),
            ("obj1|#|body-0-1".into(), 65536, PieceOp::Set),
            ("obj1|#|body-0-2".into(), 65536, PieceOp::Set),
            ("obj1|#|body-0-3".into(), 200000 - 3 * 65536, PieceOp::Set),
        ];
        assert_eq!(keys, want);
        let c = &stats.overall;
        assert_eq!(get(&c.get_bytes), 200_100);
        assert_eq!(get(&c.ingress), 200_100);
        assert_eq!(get(&c.obj_get_hits), 0);
        // The same request again: every piece hits.
        let mut r = parse_piecewise(&fields(line), &s).unwrap().remove(0);
        begin(&mut r, &stats);
        let mut ops = 1;
        while !advance(&mut r, PieceResult::GetHit, &stats, s.max_pieces) {
            assert_eq!(r.op, PieceOp::Get);
            ops += 1;
        }
        assert_eq!(ops, 6);
        assert_eq!(get(&c.obj_get_full_hits), 1);
        assert_eq!(get(&c.get_full_hit_bytes), 200_100);
        assert_eq!(get(&c.get_hit_bytes), 200_100);
        // The trace's own hit field made the benchmark counts.
        assert_eq!(get(&stats.benchmark.obj_gets), 2);
        assert_eq!(get(&stats.benchmark.obj_get_hits), 0);
    }

    /// Small objects are one item; range requests and invalid lines as
    /// upstream rectifies and refuses them.
    #[test]
    fn piecewise_small_ranges_and_invalid_lines() {
        let s = spec(Kind::PieceWise);
        let r = parse_piecewise(&fields("5000,k,1,1000,1100,100,-1,-1,60,1,1,v"), &s)
            .unwrap()
            .remove(0);
        assert!(r.pieces.is_none());
        assert_eq!((r.key.as_str(), r.size, r.is_hit), ("k", 1100, Some(true)));
        // The body is shorter than the object: a range request of it.
        let r = parse_piecewise(&fields("5000,k,1,1000,600,100,-1,-1,60,1,1,v"), &s)
            .unwrap()
            .remove(0);
        assert_eq!(r.range, Some((0, Some(499))));
        // A range asking more than the body is cut to it.
        let r = parse_piecewise(&fields("5000,k,1,300000,1100,100,70000,-1,60,1,1,v"), &s)
            .unwrap()
            .remove(0);
        assert_eq!(r.range, Some((70000, Some(70999))));
        let p = r.pieces.as_ref().unwrap();
        assert_eq!((p.start, p.end), (1, 1));
        for bad in [
            "5000,-,1,1000,1100,100,-1,-1,60,1,1,v",
            "5000,k,1,1000,0,100,-1,-1,60,1,1,v",
            "5000,k,1,1000,1100,100,-1,-1,0,1,1,v",
            "5000,k,1,1000,50,100,-1,-1,60,1,1,v",
            "5000,k,1",
        ] {
            assert!(parse_piecewise(&fields(bad), &s).is_none(), "{bad}");
        }
        // Escaped separators, ampFactor suffixes.
        let mut s2 = s.clone();
        s2.amp_factor = 2;
        let r = parse_piecewise(
            &fields("5000,a|#|b000000000000,1,10,110,100,-1,-1,60,1,1,v"),
            &s2,
        )
        .unwrap();
        assert_eq!(r[0].base, "a|#||#|b000000000000");
        assert_eq!(r[1].base, "a|#||#|b000000000001");
    }

    /// A block request of one chunk that misses then is stored; the block
    /// keys and sizes as upstream's.
    #[test]
    fn block_chunks() {
        let s = spec(Kind::BlockChunk);
        let stats = ChunkStats::new(&s);
        let map = block_header(
            "op_time,block_id,block_id_size,io_size,io_offset,user_name,user_namespace,op_name,op_count,host_name,rs_shard_id",
        );
        assert!(map.is_some());
        let line = "1702511878,12ce,8,200000,100000,1,2,getChunkData.NotInitialized,1,3,4";
        let mut r = parse_block(&fields(line), &map, &s).unwrap().remove(0);
        assert_eq!(r.base, "12ce_004");
        assert_eq!((r.key.as_str(), r.size), ("12ce_004-0", 131072));
        begin(&mut r, &stats);
        // Bytes 100,000 to 299,999: chunks 0 to 2.
        assert!(!advance(&mut r, PieceResult::GetMiss, &stats, 0));
        assert_eq!(r.op, PieceOp::Set);
        assert!(!advance(&mut r, PieceResult::SetSuccess, &stats, 0));
        assert_eq!((r.key.as_str(), r.op), ("12ce_004-1", PieceOp::Get));
        assert!(!advance(&mut r, PieceResult::GetMiss, &stats, 0));
        assert!(!advance(&mut r, PieceResult::SetSuccess, &stats, 0));
        assert_eq!((r.key.as_str(), r.op), ("12ce_004-2", PieceOp::Get));
        assert!(advance(&mut r, PieceResult::GetHit, &stats, 0));
        let c = &stats.overall;
        assert_eq!(get(&c.get_bytes), 3 * 131072);
        assert_eq!(get(&c.egress), 200000);
        assert_eq!(get(&c.get_hit_bytes), 131072);
        // As upstream: a miss is recorded as the chunk before the current
        // one (-1 for the first, i.e. none), so one chunk's ingress and a
        // partial hit.
        assert_eq!(get(&c.ingress), 131072);
        assert_eq!((get(&c.obj_get_hits), get(&c.obj_get_full_hits)), (1, 0));
        let bad = "1702511878,12ce,8,200000,16700000,1,2,getChunkData.X,1,3,4";
        assert!(parse_block(&fields(bad), &map, &s).is_none());
    }
}
