//! Replaying CacheLib's key-value traces, as its `KVReplayGenerator`
//! (`generator: replay`) and `BinaryKVReplayGenerator`
//! (`generator: binary-replay`) do.
//!
//! CSV traces are read as a stream ([`TraceReader`]): a reader thread
//! parses the lines and hands the requests to the stressor threads through
//! bounded queues ([`feed`]), so a trace of any length takes a bounded
//! amount of memory, as upstream's ProducerConsumerQueues. A file's first
//! line names its columns: `key`, `op` and `size` are required; `op_count`,
//! `key_size`, `ttl` and `op_time` are used when present (`cache_hits` and
//! other columns are ignored). A header missing a required column makes
//! the columns positional (key, op, size, op_count, key_size, ttl, op_time),
//! as upstream. Fields may be quoted (`"a,b"`, `""` for a quote); upstream
//! splits on every comma. Ops: `GET`/`GET_LEASE`, `SET`/`SET_LEASE`,
//! `DELETE`. A key shorter than its `key_size` is padded with `0`s (keys
//! are cut at 256 bytes then), `op_count` repeats a request (unless
//! `ignoreOpCount`; 0 is a bad line; counts wrap at 16 bits, as upstream's),
//! `op_time` / `timestampFactor` is the request's time in seconds. With
//! `ampFactor` k every line becomes k requests whose keys end in a 4-digit
//! suffix (`0000` ...), a key longer than 16 bytes losing its last 4 bytes
//! first (never below 16), as upstream. A key goes to one thread by hash
//! (`replaySerializationMode` strict) or to any (`relaxed`, `none`). Lines
//! that do not parse are counted (`parse error: N` in the
//! `== KVReplayGenerator Stats ==` block) and skipped.
//!
//! Binary traces are upstream's format (see [`write_binary`]), read through
//! a read-only memory map as upstream, each thread taking runs of 10,001
//! requests the way upstream's threads take them.

use crate::config::Serialization;
use crate::error::Error;
use std::borrow::Cow;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};

/// A replayed operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayOp {
    Get,
    Set,
    Delete,
}

impl ReplayOp {
    /// Upstream's `OpType` number (kSet 0, kGet 1, kDel 2), as binary
    /// traces store it.
    fn code(self) -> u8 {
        match self {
            ReplayOp::Set => 0,
            ReplayOp::Get => 1,
            ReplayOp::Delete => 2,
        }
    }

    fn from_code(c: u8) -> Option<ReplayOp> {
        match c {
            0 => Some(ReplayOp::Set),
            1 => Some(ReplayOp::Get),
            2 => Some(ReplayOp::Delete),
            _ => None,
        }
    }
}

/// One request of the trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub key: Vec<u8>,
    pub op: ReplayOp,
    pub size: u32,
    pub ttl_secs: u32,
    /// How many times in a row (op_count, at least 1).
    pub count: u32,
    /// op_time / timestampFactor (seconds; 0 without an op_time column).
    pub timestamp: u64,
}

/// A request as a stressor thread sees it (borrowed from a queue's batch
/// or a binary trace's memory).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReqRef<'a> {
    pub key: &'a [u8],
    pub op: ReplayOp,
    pub size: u32,
    pub ttl_secs: u32,
    pub count: u32,
    pub timestamp: u64,
}

impl Request {
    pub fn as_ref(&self) -> ReqRef<'_> {
        ReqRef {
            key: &self.key,
            op: self.op,
            size: self.size,
            ttl_secs: self.ttl_secs,
            count: self.count,
            timestamp: self.timestamp,
        }
    }
}

/// Where one stressor thread takes its requests from: its queue, its share
/// of a binary trace, or a trace in memory.
pub trait Shard {
    /// The next request (None at the end of the trace).
    fn next(&mut self) -> Option<ReqRef<'_>>;
}

/// A trace read into memory and split over the threads ([`load`]; the
/// command streams instead).
#[derive(Debug, Clone, Default)]
pub struct Trace {
    pub per_thread: Vec<Vec<Request>>,
    /// Data lines read (parsed or not).
    pub lines: u64,
    pub parse_errors: u64,
    /// Header problems, for the user.
    pub warnings: Vec<String>,
}

/// How [`load`] reads a trace.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    pub threads: usize,
    pub amp_factor: u32,
    /// Repeat a request op_count times (false: `ignoreOpCount`).
    pub repeat_op_count: bool,
    /// Lines skipped at the start of the trace (`fastForwardCount`).
    pub fast_forward: u64,
}

/// What to read and how.
#[derive(Debug, Clone)]
pub struct TraceSpec {
    pub files: Vec<PathBuf>,
    /// Repeat a request op_count times (false: `ignoreOpCount`).
    pub honour_op_count: bool,
    /// Lines skipped at the start (`fastForwardCount`).
    pub fast_forward: u64,
    /// Start again at the first file after the last (`repeatTraceReplay`).
    pub repeat: bool,
    /// op_time units per second (`timestampFactor`).
    pub timestamp_factor: u64,
}

/// The fields of upstream's KV trace, in its default (positional) order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Key = 0,
    Op,
    Size,
    OpCount,
    KeySize,
    Ttl,
    OpTime,
}

const FIELDS: [(Field, &str, bool); 7] = [
    (Field::Key, "key", true),
    (Field::Op, "op", true),
    (Field::Size, "size", true),
    (Field::OpCount, "op_count", false),
    (Field::KeySize, "key_size", false),
    (Field::Ttl, "ttl", false),
    (Field::OpTime, "op_time", false),
];

/// Where each field is in a line (None: absent), and the fields a line
/// needs at least.
#[derive(Debug, Clone)]
struct Columns {
    at: [Option<usize>; 7],
    min_fields: usize,
}

impl Columns {
    /// Upstream's order without a usable header.
    fn positional() -> Columns {
        Columns {
            at: [
                Some(0),
                Some(1),
                Some(2),
                Some(3),
                Some(4),
                Some(5),
                Some(6),
            ],
            min_fields: 0,
        }
    }

    /// From a header line; Err with why when it cannot be used (then the
    /// columns are positional, as upstream).
    fn from_header(fields: &[Cow<'_, [u8]>]) -> Result<Columns, String> {
        let mut at = [None; 7];
        for (i, name) in fields.iter().enumerate() {
            let name = String::from_utf8_lossy(name);
            if let Some((f, _, _)) = FIELDS.iter().find(|(_, n, _)| *n == name.trim()) {
                at[*f as usize].get_or_insert(i);
            }
        }
        let missing: Vec<&str> = FIELDS
            .iter()
            .filter(|(f, _, required)| *required && at[*f as usize].is_none())
            .map(|(_, n, _)| *n)
            .collect();
        if !missing.is_empty() {
            return Err(format!("it names no {} column", missing.join(", ")));
        }
        let min_fields = FIELDS
            .iter()
            .filter(|(_, _, required)| *required)
            .filter_map(|(f, _, _)| at[*f as usize])
            .max()
            .map_or(0, |m| m + 1);
        Ok(Columns { at, min_fields })
    }
}

/// Splits a CSV line into its fields: a field in double quotes may hold
/// commas, `""` is a quote inside it. None when a quote is not closed.
fn split_fields<'a>(line: &'a [u8], out: &mut Vec<Cow<'a, [u8]>>) -> Option<()> {
    out.clear();
    let mut i = 0;
    loop {
        if line.get(i) == Some(&b'"') {
            // A quoted field: up to the closing quote.
            let mut owned: Option<Vec<u8>> = None;
            let start = i + 1;
            let mut j = start;
            loop {
                match line.get(j) {
                    None => return None,
                    Some(b'"') if line.get(j + 1) == Some(&b'"') => {
                        owned
                            .get_or_insert_with(|| line[start..j].to_vec())
                            .push(b'"');
                        j += 2;
                        continue;
                    }
                    Some(b'"') => break,
                    Some(c) => {
                        if let Some(o) = owned.as_mut() {
                            o.push(*c);
                        }
                        j += 1;
                    }
                }
            }
            out.push(match owned {
                Some(o) => Cow::Owned(o),
                None => Cow::Borrowed(&line[start..j]),
            });
            // Past the closing quote, to the next comma.
            i = j + 1;
            match line[i.min(line.len())..].iter().position(|c| *c == b',') {
                Some(p) => i += p + 1,
                None => return Some(()),
            }
        } else {
            match line[i..].iter().position(|c| *c == b',') {
                Some(p) => {
                    out.push(Cow::Borrowed(&line[i..i + p]));
                    i += p + 1;
                }
                None => {
                    out.push(Cow::Borrowed(&line[i..]));
                    return Some(());
                }
            }
        }
    }
}

fn number<T: std::str::FromStr>(b: &[u8]) -> Option<T> {
    std::str::from_utf8(b).ok()?.trim().parse().ok()
}

/// The longest key a `key_size` pads to (upstream's cut).
pub const MAX_PADDED_KEY: usize = 256;

/// Parses one data line, as upstream's `KVReplayGenerator::parseRequest`;
/// None for a bad line.
fn parse_line<'a>(
    fields: usize,
    field: impl Fn(usize) -> Option<&'a [u8]>,
    cols: &Columns,
    spec: &TraceSpec,
) -> Option<Request> {
    if fields < cols.min_fields {
        return None;
    }
    let get = |f: Field| -> Option<&'a [u8]> { field(cols.at[f as usize]?) };
    let size: u64 = number(get(Field::Size)?)?;
    let mut key = get(Field::Key)?.to_vec();
    if let Some(want) = get(Field::KeySize).and_then(number::<u64>) {
        let want = (want as usize).max(key.len()).min(MAX_PADDED_KEY);
        key.resize(want, b'0');
    }
    let timestamp = get(Field::OpTime)
        .and_then(number::<u64>)
        .map_or(0, |t| t / spec.timestamp_factor.max(1));
    let op = match std::str::from_utf8(get(Field::Op)?).ok()?.trim() {
        "GET" | "GET_LEASE" => ReplayOp::Get,
        "SET" | "SET_LEASE" => ReplayOp::Set,
        "DELETE" => ReplayOp::Delete,
        _ => return None,
    };
    // op_count: 1 when absent or not a number; upstream keeps 16 bits.
    let count = get(Field::OpCount)
        .and_then(number::<u32>)
        .map_or(1, |c| u32::from(c as u16));
    if count == 0 || key.is_empty() {
        return None;
    }
    let ttl = get(Field::Ttl).and_then(number::<u64>).unwrap_or(0) as u32;
    Some(Request {
        key,
        op,
        size: size.min(u64::from(u32::MAX)) as u32,
        ttl_secs: ttl,
        count: if spec.honour_op_count { count } else { 1 },
        timestamp,
    })
}

/// The keys of `ampFactor` copies of a request (upstream's suffixes).
pub fn amplify(key: &[u8], amp: u32, copy: u32, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(key);
    if amp > 1 {
        const MIN_KEY: usize = 16;
        if out.len() > MIN_KEY {
            out.truncate((out.len() - 4).max(MIN_KEY));
        }
        out.extend_from_slice(format!("{copy:04}").as_bytes());
    }
}

/// One open trace file.
struct OpenFile {
    path: PathBuf,
    lines: BufReader<std::fs::File>,
    cols: Columns,
}

/// Reads a trace's files line by line, in order (again from the first
/// with `repeat`), holding one line at a time.
pub struct TraceReader {
    spec: TraceSpec,
    next_file: usize,
    cur: Option<OpenFile>,
    line: Vec<u8>,
    /// The bounds of the current line's fields (reused).
    ranges: Vec<(usize, usize)>,
    skip: u64,
    /// Lines parsed in this pass over the files (a repeat of a trace
    /// without one good line would never end).
    pass_parsed: u64,
    /// Lines parsed (upstream's "Total Processed Samples") and not.
    pub samples: u64,
    pub parse_errors: u64,
    /// Header problems, for the user.
    pub warnings: Vec<String>,
}

impl TraceReader {
    /// Checks that every file can be opened; reads nothing yet.
    pub fn new(spec: TraceSpec) -> Result<TraceReader, Error> {
        if spec.files.is_empty() {
            return Err(Error::Input(
                "no trace file (traceFileName or traceFileNames)".into(),
            ));
        }
        for f in &spec.files {
            std::fs::File::open(f)
                .map_err(|e| Error::Input(format!("cannot read trace {}: {e}", f.display())))?;
        }
        Ok(TraceReader {
            skip: spec.fast_forward,
            spec,
            next_file: 0,
            cur: None,
            line: Vec::new(),
            ranges: Vec::with_capacity(16),
            pass_parsed: 0,
            samples: 0,
            parse_errors: 0,
            warnings: Vec::new(),
        })
    }

    /// Opens the next file (its header read); false at the end of the
    /// trace.
    fn open_next(&mut self) -> Result<bool, String> {
        if self.next_file == self.spec.files.len() {
            if !self.spec.repeat || self.pass_parsed == 0 {
                return Ok(false);
            }
            self.next_file = 0;
            self.pass_parsed = 0;
        }
        let path = self.spec.files[self.next_file].clone();
        self.next_file += 1;
        let f = std::fs::File::open(&path)
            .map_err(|e| format!("cannot read trace {}: {e}", path.display()))?;
        let mut lines = BufReader::with_capacity(1 << 16, f);
        let mut header = Vec::new();
        lines
            .read_until(b'\n', &mut header)
            .map_err(|e| format!("cannot read trace {}: {e}", path.display()))?;
        trim_eol(&mut header);
        let mut fields = Vec::new();
        let cols = match split_fields(&header, &mut fields)
            .ok_or_else(|| "a quote is not closed".to_string())
            .and_then(|()| Columns::from_header(&fields))
        {
            Ok(c) => c,
            Err(why) => {
                let w = format!(
                    "{}: the header line cannot be used ({why}); its lines are read in upstream's \
                     default column order key,op,size,op_count,key_size,ttl,op_time",
                    path.display()
                );
                if !self.warnings.contains(&w) {
                    self.warnings.push(w);
                }
                Columns::positional()
            }
        };
        self.cur = Some(OpenFile { path, lines, cols });
        Ok(true)
    }

    /// Reads the next raw line into `self.line`; false at the end of the
    /// trace.
    fn raw_line(&mut self) -> Result<bool, String> {
        loop {
            if let Some(f) = self.cur.as_mut() {
                self.line.clear();
                let n = f
                    .lines
                    .read_until(b'\n', &mut self.line)
                    .map_err(|e| format!("cannot read trace {}: {e}", f.path.display()))?;
                if n > 0 {
                    trim_eol(&mut self.line);
                    return Ok(true);
                }
                self.cur = None;
            }
            if !self.open_next()? {
                return Ok(false);
            }
        }
    }

    /// The next request the trace's lines give (None at its end); bad
    /// lines are counted and skipped.
    pub fn next_request(&mut self) -> Result<Option<Request>, Error> {
        // raw_line's errors are reads of the trace files failing.
        while self.skip > 0 {
            if !self.raw_line().map_err(Error::Host)? {
                return Ok(None);
            }
            self.skip -= 1;
        }
        loop {
            if !self.raw_line().map_err(Error::Host)? {
                return Ok(None);
            }
            let Some(f) = self.cur.as_ref() else {
                continue;
            };
            let line = &self.line;
            let parsed = if line.contains(&b'"') {
                let mut fields = Vec::with_capacity(16);
                split_fields(line, &mut fields).and_then(|()| {
                    parse_line(
                        fields.len(),
                        |i| fields.get(i).map(|c| &c[..]),
                        &f.cols,
                        &self.spec,
                    )
                })
            } else {
                // No quotes (the common case): the fields' bounds only.
                let ranges = &mut self.ranges;
                ranges.clear();
                let mut start = 0;
                for (i, c) in line.iter().enumerate() {
                    if *c == b',' {
                        ranges.push((start, i));
                        start = i + 1;
                    }
                }
                ranges.push((start, line.len()));
                let ranges = &self.ranges;
                parse_line(
                    ranges.len(),
                    |i| ranges.get(i).map(|&(a, b)| &line[a..b]),
                    &f.cols,
                    &self.spec,
                )
            };
            match parsed {
                Some(r) => {
                    self.samples += 1;
                    self.pass_parsed += 1;
                    return Ok(Some(r));
                }
                None => self.parse_errors += 1,
            }
        }
    }
}

fn trim_eol(line: &mut Vec<u8>) {
    while matches!(line.last(), Some(b'\n' | b'\r')) {
        line.pop();
    }
}

/// The thread a key goes to (strict serialization).
pub fn thread_of(key: &[u8], threads: usize) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % threads.max(1) as u64) as usize
}

/// Reads the trace files into memory, split over the threads (tests, the
/// fuzz target and benchmarks; the command streams with [`feed`]).
pub fn load(files: &[impl AsRef<Path>], opts: &ReplayOptions) -> Result<Trace, Error> {
    let mut reader = TraceReader::new(TraceSpec {
        files: files.iter().map(|f| f.as_ref().to_path_buf()).collect(),
        honour_op_count: opts.repeat_op_count,
        fast_forward: opts.fast_forward,
        repeat: false,
        timestamp_factor: 1000,
    })?;
    let mut trace = Trace {
        per_thread: vec![Vec::new(); opts.threads.max(1)],
        ..Trace::default()
    };
    let amp = opts.amp_factor.max(1);
    let mut key = Vec::new();
    while let Some(r) = reader.next_request()? {
        for copy in 0..amp {
            amplify(&r.key, amp, copy, &mut key);
            let t = thread_of(&key, opts.threads);
            trace.per_thread[t].push(Request {
                key: key.clone(),
                ..r.clone()
            });
        }
    }
    trace.lines = reader.samples + reader.parse_errors;
    trace.parse_errors = reader.parse_errors;
    trace.warnings = reader.warnings;
    Ok(trace)
}

/// Requests per batch a reader hands to a thread, and the batches a
/// thread's queue holds: at most about `BATCH * (QUEUE + 2)` requests per
/// thread are in memory (upstream's queues hold 10,000).
pub const BATCH: usize = 256;
pub const QUEUE: usize = 32;

/// The reader's counters, shared with the threads.
#[derive(Debug, Default)]
pub struct FeedStats {
    /// Requests handed to the threads and not yet replayed (in the queues
    /// or a thread's current batch), and the most there ever were.
    pub buffered: AtomicU64,
    pub max_buffered: AtomicU64,
    /// The reader's samples and parse errors when it ended.
    pub samples: AtomicU64,
    pub parse_errors: AtomicU64,
}

/// A stressor thread's queue.
pub struct QueueShard<'a> {
    rx: Receiver<Vec<Request>>,
    batch: Vec<Request>,
    at: usize,
    stats: &'a FeedStats,
}

impl<'a> QueueShard<'a> {
    pub fn new(rx: Receiver<Vec<Request>>, stats: &'a FeedStats) -> QueueShard<'a> {
        QueueShard {
            rx,
            batch: Vec::new(),
            at: 0,
            stats,
        }
    }
}

impl Shard for QueueShard<'_> {
    fn next(&mut self) -> Option<ReqRef<'_>> {
        if self.at == self.batch.len() {
            self.stats
                .buffered
                .fetch_sub(self.batch.len() as u64, Ordering::Relaxed);
            self.batch = Vec::new();
            self.batch = self.rx.recv().ok()?;
            self.at = 0;
        }
        self.at += 1;
        Some(self.batch[self.at - 1].as_ref())
    }
}

impl Drop for QueueShard<'_> {
    fn drop(&mut self) {
        // What this thread holds or will not take leaves the count.
        let mut left = self.batch.len() as u64;
        while let Ok(b) = self.rx.try_recv() {
            left += b.len() as u64;
        }
        self.stats.buffered.fetch_sub(left, Ordering::Relaxed);
    }
}

/// A thread's queue: the reader's end and the thread's.
pub type QueueIn = SyncSender<Vec<Request>>;
pub type QueueOut = Receiver<Vec<Request>>;

/// The queues of `threads` threads: the senders for [`feed`], the
/// receivers for [`QueueShard`].
pub fn queues(threads: usize) -> (Vec<QueueIn>, Vec<QueueOut>) {
    (0..threads.max(1))
        .map(|_| std::sync::mpsc::sync_channel(QUEUE))
        .unzip()
}

/// Reads the trace and hands its requests (each line `amp` times) to the
/// threads' queues in batches, by key hash or at random, until the trace
/// ends, every thread has left (its queue closed) or `stop` is raised. A
/// full queue makes the reader wait, as upstream's.
pub fn feed(
    mut reader: TraceReader,
    amp: u32,
    serialization: Serialization,
    seed: u64,
    senders: Vec<SyncSender<Vec<Request>>>,
    stop: &AtomicBool,
    stats: &FeedStats,
) -> Result<(), Error> {
    use rand::{Rng, SeedableRng};
    let threads = senders.len().max(1);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed ^ 0x7e11);
    let mut senders: Vec<Option<SyncSender<Vec<Request>>>> =
        senders.into_iter().map(Some).collect();
    let mut batches: Vec<Vec<Request>> = (0..threads).map(|_| Vec::with_capacity(BATCH)).collect();
    let amp = amp.max(1);
    let mut key = Vec::new();
    let send = |senders: &mut Vec<Option<SyncSender<Vec<Request>>>>,
                t: usize,
                batch: Vec<Request>|
     -> bool {
        let Some(tx) = senders[t].as_ref() else {
            return false;
        };
        let n = batch.len() as u64;
        let now = stats.buffered.fetch_add(n, Ordering::Relaxed) + n;
        stats.max_buffered.fetch_max(now, Ordering::Relaxed);
        let mut batch = batch;
        loop {
            match tx.try_send(batch) {
                Ok(()) => return true,
                Err(TrySendError::Full(b)) => {
                    if stop.load(Ordering::Relaxed) {
                        stats.buffered.fetch_sub(n, Ordering::Relaxed);
                        return false;
                    }
                    batch = b;
                    std::thread::sleep(std::time::Duration::from_micros(100));
                }
                Err(TrySendError::Disconnected(_)) => {
                    // The thread has done its operations.
                    stats.buffered.fetch_sub(n, Ordering::Relaxed);
                    senders[t] = None;
                    return false;
                }
            }
        }
    };
    let result = loop {
        if stop.load(Ordering::Relaxed) || senders.iter().all(Option::is_none) {
            break Ok(());
        }
        let r = match reader.next_request() {
            Ok(Some(r)) => r,
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        };
        let mut route = |req: Request| {
            let t = match serialization {
                Serialization::Strict => thread_of(&req.key, threads),
                Serialization::Random => rng.random_range(0..threads),
            };
            if senders[t].is_none() {
                return;
            }
            batches[t].push(req);
            if batches[t].len() == BATCH {
                let b = std::mem::replace(&mut batches[t], Vec::with_capacity(BATCH));
                send(&mut senders, t, b);
            }
        };
        if amp == 1 {
            route(r);
            continue;
        }
        for copy in 0..amp {
            amplify(&r.key, amp, copy, &mut key);
            route(Request {
                key: key.clone(),
                op: r.op,
                size: r.size,
                ttl_secs: r.ttl_secs,
                count: r.count,
                timestamp: r.timestamp,
            });
        }
    };
    for (t, b) in batches.into_iter().enumerate() {
        if !b.is_empty() && !stop.load(Ordering::Relaxed) {
            send(&mut senders, t, b);
        }
    }
    stats.samples.store(reader.samples, Ordering::Relaxed);
    stats
        .parse_errors
        .store(reader.parse_errors, Ordering::Relaxed);
    result
}

/// A trace in memory, one thread's share ([`Trace::per_thread`]), looped
/// over with `repeat`.
pub struct VecShard<'a> {
    reqs: &'a [Request],
    at: usize,
    repeat: bool,
}

impl<'a> VecShard<'a> {
    pub fn new(reqs: &'a [Request], repeat: bool) -> VecShard<'a> {
        VecShard {
            reqs,
            at: 0,
            repeat,
        }
    }
}

impl Shard for VecShard<'_> {
    fn next(&mut self) -> Option<ReqRef<'_>> {
        if self.at == self.reqs.len() {
            if !self.repeat || self.reqs.is_empty() {
                return None;
            }
            self.at = 0;
        }
        self.at += 1;
        Some(self.reqs[self.at - 1].as_ref())
    }
}

/// Upstream's `== KVReplayGenerator Stats ==` block (and
/// `== BinaryKVReplayGenerator Stats ==`), which its report prints after
/// the throughput lines.
pub fn generator_stats_block(name: &str, samples: u64, parse_errors: u64) -> String {
    format!(
        "\n== {name} Stats ==\nTotal Processed Samples: {:.2} million (parse error: {parse_errors})\n",
        samples as f64 / 1e6
    )
}

// ---------------------------------------------------------------------------
// Binary traces.

/// Bytes of one request in a binary trace: upstream's `BinaryRequest` as
/// x86-64 lays it out: key size (u8), op (u8), repeats (u16), TTL (u32),
/// the key's offset from the request (u64), value size (u32), 4 bytes of
/// padding.
pub const BINARY_REQUEST: usize = 24;

/// How many requests a thread takes in a row before jumping ahead
/// (upstream's `kRunLength`; a run is one longer, as upstream's).
pub const RUN_LENGTH: u64 = 10_000;

/// What [`write_binary`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BinaryWritten {
    pub requests: u64,
    pub samples: u64,
    pub parse_errors: u64,
    /// Lines whose key is too long for the format's 8-bit key size.
    pub long_keys: u64,
}

/// Converts a CSV trace to upstream's binary trace (what upstream's
/// cachebench does with `generator: replay` and `binaryFileName`, then
/// exits): the number of requests (u64), the requests ([`BINARY_REQUEST`]
/// bytes each, `ampFactor` per line, value sizes times `ampSizeFactor`),
/// then their keys, the file padded to a multiple of 4,096 bytes.
/// Native (little-endian) byte order, as upstream's memory dump. The trace
/// is read twice (to count, then to write), never held.
pub fn write_binary(
    spec: &TraceSpec,
    amp: u32,
    amp_size: u32,
    out: &Path,
) -> Result<BinaryWritten, Error> {
    let spec = TraceSpec {
        repeat: false,
        ..spec.clone()
    };
    let amp = amp.max(1);
    let fits = |r: &Request, copy: u32, key: &mut Vec<u8>| {
        amplify(&r.key, amp, copy, key);
        key.len() <= usize::from(u8::MAX)
    };
    // Pass 1: how many requests, so that the keys' place is known.
    let mut key = Vec::new();
    let mut requests = 0u64;
    let mut reader = TraceReader::new(spec.clone())?;
    while let Some(r) = reader.next_request()? {
        requests += (0..amp).filter(|c| fits(&r, *c, &mut key)).count() as u64;
    }
    let err = |e: std::io::Error| Error::Host(format!("cannot write {}: {e}", out.display()));
    let file = std::fs::File::create(out).map_err(err)?;
    let keys_path = out.with_extension("keys.tmp");
    let keys_file = std::fs::File::create(&keys_path).map_err(err)?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
    let mut kw = std::io::BufWriter::with_capacity(1 << 20, keys_file);
    w.write_all(&requests.to_le_bytes()).map_err(err)?;
    // Pass 2: the requests, their keys aside.
    let mut reader = TraceReader::new(spec)?;
    let (mut i, mut key_bytes, mut long_keys) = (0u64, 0u64, 0u64);
    while let Some(r) = reader.next_request()? {
        for copy in 0..amp {
            if !fits(&r, copy, &mut key) {
                long_keys += 1;
                continue;
            }
            if i == requests {
                return Err(Error::Host(format!(
                    "{}: the trace changed while it was converted",
                    out.display()
                )));
            }
            let offset = (requests - i) * BINARY_REQUEST as u64 + key_bytes;
            let mut rec = [0u8; BINARY_REQUEST];
            rec[0] = key.len() as u8;
            rec[1] = r.op.code();
            rec[2..4].copy_from_slice(&(r.count as u16).to_le_bytes());
            rec[4..8].copy_from_slice(&r.ttl_secs.to_le_bytes());
            rec[8..16].copy_from_slice(&offset.to_le_bytes());
            rec[16..20].copy_from_slice(&r.size.saturating_mul(amp_size).to_le_bytes());
            w.write_all(&rec).map_err(err)?;
            kw.write_all(&key).map_err(err)?;
            key_bytes += key.len() as u64;
            i += 1;
        }
    }
    if i != requests {
        return Err(Error::Host(format!(
            "{}: the trace changed while it was converted",
            out.display()
        )));
    }
    kw.flush().map_err(err)?;
    drop(kw);
    let mut keys = std::fs::File::open(&keys_path).map_err(err)?;
    std::io::copy(&mut keys, &mut w).map_err(err)?;
    let _ = std::fs::remove_file(&keys_path);
    let total = 8 + requests * BINARY_REQUEST as u64 + key_bytes;
    let pad = (4096 - total % 4096) % 4096;
    w.write_all(&vec![0u8; pad as usize]).map_err(err)?;
    w.flush().map_err(err)?;
    Ok(BinaryWritten {
        requests,
        samples: reader.samples,
        parse_errors: reader.parse_errors,
        long_keys,
    })
}

/// A binary trace, mapped read-only.
pub struct BinaryTrace {
    ptr: *const u8,
    len: usize,
    requests: u64,
    path: PathBuf,
}

// SAFETY: the mapping is read-only and owned by this value; threads only
// read it.
unsafe impl Send for BinaryTrace {}
// SAFETY: as for Send: nothing writes through the pointer.
unsafe impl Sync for BinaryTrace {}

impl BinaryTrace {
    /// Maps `path` and checks its header against its size.
    pub fn open(path: &Path) -> Result<BinaryTrace, Error> {
        let f = std::fs::File::open(path).map_err(|e| {
            Error::Input(format!("cannot read binary trace {}: {e}", path.display()))
        })?;
        let len = f
            .metadata()
            .map_err(|e| Error::Input(format!("cannot read binary trace {}: {e}", path.display())))?
            .len() as usize;
        if len < 8 {
            return Err(Error::Input(format!(
                "{}: not a binary trace (shorter than its 8-byte request count)",
                path.display()
            )));
        }
        use std::os::fd::AsRawFd;
        // SAFETY: a fresh read-only private mapping of a whole open file;
        // the result is checked below. (Another process truncating the file
        // while it is mapped would fault us, as it would upstream.)
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::Host(format!(
                "cannot map binary trace {}: {}",
                path.display(),
                std::io::Error::last_os_error()
            )));
        }
        let mut t = BinaryTrace {
            ptr: p as *const u8,
            len,
            requests: 0,
            path: path.to_path_buf(),
        };
        let requests = u64::from_le_bytes(t.bytes()[..8].try_into().unwrap_or([0; 8]));
        let need = requests
            .checked_mul(BINARY_REQUEST as u64)
            .and_then(|b| b.checked_add(8));
        if need.is_none_or(|n| n > len as u64) {
            return Err(Error::Input(format!(
                "{}: not a binary trace (it says {requests} requests, more than its {len} bytes hold)",
                path.display()
            )));
        }
        t.requests = requests;
        Ok(t)
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` maps `len` readable bytes for the life of self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// Requests in the trace.
    pub fn requests(&self) -> u64 {
        self.requests
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Request `i`, or None when it is not a valid request.
    fn request(&self, i: u64, amp_size: u32) -> Option<ReqRef<'_>> {
        let b = self.bytes();
        let at = 8 + (i as usize).checked_mul(BINARY_REQUEST)?;
        let rec = b.get(at..at + BINARY_REQUEST)?;
        let key_len = usize::from(rec[0]);
        let op = ReplayOp::from_code(rec[1])?;
        let count = u32::from(u16::from_le_bytes([rec[2], rec[3]]));
        let ttl = u32::from_le_bytes(rec[4..8].try_into().ok()?);
        let offset = u64::from_le_bytes(rec[8..16].try_into().ok()?);
        let size = u32::from_le_bytes(rec[16..20].try_into().ok()?);
        let key_at = (at as u64).checked_add(offset)? as usize;
        let key = b.get(key_at..key_at.checked_add(key_len)?)?;
        Some(ReqRef {
            key,
            op,
            size: size.saturating_mul(amp_size),
            ttl_secs: ttl,
            count: count.max(1),
            timestamp: 0,
        })
    }
}

impl Drop for BinaryTrace {
    fn drop(&mut self) {
        // SAFETY: unmaps what `open` mapped, once.
        unsafe {
            libc::munmap(self.ptr as *mut libc::c_void, self.len);
        }
    }
}

/// One thread's share of a binary trace, as upstream's
/// `BinaryKVReplayGenerator` deals it: thread t starts at request
/// t × 10,000 (+ fastForwardCount) and takes runs of 10,001 requests, each
/// run `threads` × 10,000 requests after the previous one's start; at the
/// end of the trace it starts again (without the fast-forward) with
/// `repeat`. A request that is not valid is counted and skipped.
pub struct BinaryShard<'a> {
    trace: &'a BinaryTrace,
    thread: u64,
    threads: u64,
    req: u64,
    run: u64,
    repeat: bool,
    amp_size: u32,
    pub read: u64,
    pub invalid: u64,
}

impl<'a> BinaryShard<'a> {
    pub fn new(
        trace: &'a BinaryTrace,
        thread: usize,
        threads: usize,
        fast_forward: u64,
        repeat: bool,
        amp_size: u32,
    ) -> BinaryShard<'a> {
        BinaryShard {
            trace,
            thread: thread as u64,
            threads: threads.max(1) as u64,
            req: thread as u64 * RUN_LENGTH + fast_forward,
            run: 0,
            repeat,
            amp_size: amp_size.max(1),
            read: 0,
            invalid: 0,
        }
    }
}

impl<'a> Shard for BinaryShard<'a> {
    fn next(&mut self) -> Option<ReqRef<'_>> {
        let mut restarted = false;
        loop {
            let mut i = self.req + self.run;
            if i >= self.trace.requests {
                if !self.repeat || restarted {
                    return None;
                }
                restarted = true;
                self.run = 0;
                self.req = self.thread * RUN_LENGTH;
                i = self.req;
                if i >= self.trace.requests {
                    return None;
                }
            }
            if self.run < RUN_LENGTH {
                self.run += 1;
            } else {
                self.run = 0;
                self.req += self.threads * RUN_LENGTH;
            }
            let trace: &'a BinaryTrace = self.trace;
            match trace.request(i, self.amp_size) {
                Some(r) => {
                    self.read += 1;
                    return Some(r);
                }
                None => self.invalid += 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upstream(name: &str) -> std::path::PathBuf {
        testenv::conformance_root()
            .unwrap_or_default()
            .join("cachebench/test_configs/trace_replay/kvcache")
            .join(name)
    }

    fn opts(threads: usize, amp_factor: u32) -> ReplayOptions {
        ReplayOptions {
            threads,
            amp_factor,
            repeat_op_count: true,
            fast_forward: 0,
        }
    }

    #[test]
    fn upstream_traces_parse() {
        testenv::conformance_or_return!("cachebench/test_configs/trace_replay/kvcache");
        let mut opts = opts(4, 1);
        let t = load(
            &[upstream("kv_traces_1.csv"), upstream("kv_traces_2.csv")],
            &opts,
        )
        .unwrap();
        assert_eq!(t.lines, 198);
        assert_eq!(t.parse_errors, 0);
        assert!(t.warnings.is_empty(), "{:?}", t.warnings);
        let all: Vec<&Request> = t.per_thread.iter().flatten().collect();
        assert_eq!(all.len(), 198);
        // key_size pads the key: the first line's key is 16 characters, its
        // key_size 48.
        assert!(
            all.iter()
                .any(|r| r.key.len() == 48 && r.key.starts_with(b"82131353f9ddc8c6"))
        );
        assert!(all.iter().any(|r| r.count == 3));
        // op_time in seconds (timestampFactor 1000 by default).
        assert!(
            all.iter()
                .all(|r| (603_000..605_000).contains(&r.timestamp))
        );
        // Every request of a key is on one thread.
        for (i, reqs) in t.per_thread.iter().enumerate() {
            for r in reqs {
                assert_eq!(thread_of(&r.key, 4), i);
            }
        }
        // Fast-forwarding skips lines across the files.
        opts.fast_forward = 150;
        let t = load(
            &[upstream("kv_traces_1.csv"), upstream("kv_traces_2.csv")],
            &opts,
        )
        .unwrap();
        assert_eq!(t.lines, 48);
        // ignoreOpCount: every request once.
        opts.fast_forward = 0;
        opts.repeat_op_count = false;
        let t = load(&[upstream("kv_traces_1.csv")], &opts).unwrap();
        assert!(t.per_thread.iter().flatten().all(|r| r.count == 1));
    }

    /// key_size pads up to upstream's 256 bytes and never beyond; op_count
    /// 0 is a bad line, an op_count or TTL that is not a number counts as
    /// 1 or 0, as upstream's `value_or`.
    #[test]
    fn key_size_op_count_and_ttl_as_upstream() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("t.csv");
        let long = "k".repeat(300);
        std::fs::write(
            &f,
            format!(
                "key,op,size,key_size,op_count,ttl\na,GET,1,255,2,60\nb,GET,1,99999999999999,x,y\n\
                 {long},GET,1,0,1,0\n{long},GET,1,,1,0\nc,SET,5,1,0,0\nd,SET,5,1,65537,0\n"
            ),
        )
        .unwrap();
        let t = load(&[&f], &opts(1, 1)).unwrap();
        assert_eq!((t.lines, t.parse_errors), (6, 1));
        let r = &t.per_thread[0];
        assert_eq!((r[0].key.len(), r[0].count, r[0].ttl_secs), (255, 2, 60));
        assert_eq!((r[1].key.len(), r[1].count, r[1].ttl_secs), (256, 1, 0));
        // A key_size cuts a longer key to 256; without one it stays whole.
        assert_eq!(r[2].key.len(), 256);
        assert_eq!(r[3].key.len(), 300);
        // op_count wraps at 16 bits, as upstream's uint16_t.
        assert_eq!(r[4].count, 1);
    }

    #[test]
    fn amp_factor_bad_lines_and_headers() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("t.csv");
        std::fs::write(
            &f,
            "op,key,size\nGET,a,10\nSET_LEASE,b,20\nFROB,c,1\nDELETE,d\nGET,e,x\n\
             GET,0123456789abcdefghij,5\n",
        )
        .unwrap();
        let t = load(&[&f], &opts(2, 3)).unwrap();
        assert_eq!((t.lines, t.parse_errors), (6, 3));
        let mut keys: Vec<Vec<u8>> = t
            .per_thread
            .iter()
            .flatten()
            .map(|r| r.key.clone())
            .collect();
        keys.sort();
        assert_eq!(keys.len(), 9);
        // A key over 16 bytes loses its last 4 (never below 16) before the
        // suffix, as upstream's.
        assert_eq!(keys[0], b"0123456789abcdef0000");
        assert_eq!(keys[3], b"a0000");
        assert_eq!(keys[8], b"b0002");
        // A header without the required columns: upstream's positional
        // order, with a warning.
        std::fs::write(&f, "op,key\nGET,a\nk,GET,10\n").unwrap();
        let t = load(&[&f], &opts(1, 1)).unwrap();
        assert_eq!((t.lines, t.parse_errors), (2, 1));
        assert_eq!(t.per_thread[0][0].key, b"k");
        assert!(
            t.warnings[0].contains("names no size column"),
            "{:?}",
            t.warnings
        );
        assert!(
            load(&[d.path().join("none.csv")], &opts(1, 1))
                .unwrap_err()
                .to_string()
                .contains("cannot read trace")
        );
    }

    /// Quoted fields may hold commas and quotes; an unclosed quote is a bad
    /// line.
    #[test]
    fn quoted_fields() {
        let mut v = Vec::new();
        split_fields(br#""a,b",GET,"1""2",x"#, &mut v).unwrap();
        let got: Vec<&[u8]> = v.iter().map(|c| &c[..]).collect();
        assert_eq!(got, [&b"a,b"[..], b"GET", b"1\"2", b"x"]);
        split_fields(b"a,,", &mut v).unwrap();
        assert_eq!(v.len(), 3);
        assert!(split_fields(br#""open,GET,1"#, &mut v).is_none());
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("t.csv");
        std::fs::write(
            &f,
            "\"key\",op,size\r\n\"x,1\",GET,10\r\n\"y\"\"\",SET,20\r\n\"z,GET,3\r\n",
        )
        .unwrap();
        let t = load(&[&f], &opts(1, 1)).unwrap();
        assert_eq!((t.lines, t.parse_errors), (3, 1));
        let keys: Vec<&[u8]> = t.per_thread[0].iter().map(|r| &r.key[..]).collect();
        assert_eq!(keys, [&b"x,1"[..], b"y\""]);
    }

    /// The reader streams: through queues of a few batches each, a trace
    /// far larger than the queues is handed over whole while no more than
    /// the queues' worth is ever buffered.
    #[test]
    fn feeding_holds_a_bounded_number_of_requests() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("big.csv");
        let lines = 200_000u64;
        {
            let mut w = std::io::BufWriter::new(std::fs::File::create(&f).unwrap());
            writeln!(w, "key,op,size,op_count").unwrap();
            for i in 0..lines {
                writeln!(w, "key{},GET,100,1", i % 5000).unwrap();
            }
        }
        let reader = TraceReader::new(TraceSpec {
            files: vec![f],
            honour_op_count: true,
            fast_forward: 0,
            repeat: false,
            timestamp_factor: 1000,
        })
        .unwrap();
        let stats = FeedStats::default();
        let stop = AtomicBool::new(false);
        let (tx, rx) = queues(2);
        let got: u64 = std::thread::scope(|s| {
            let feeder = s.spawn(|| feed(reader, 1, Serialization::Strict, 1, tx, &stop, &stats));
            let counts: Vec<_> = rx
                .into_iter()
                .map(|rx| {
                    let stats = &stats;
                    s.spawn(move || {
                        let mut shard = QueueShard::new(rx, stats);
                        let mut n = 0u64;
                        while shard.next().is_some() {
                            n += 1;
                            // Slow consumers, so the queues fill up.
                            if n.is_multiple_of(4096) {
                                std::thread::sleep(std::time::Duration::from_millis(1));
                            }
                        }
                        n
                    })
                })
                .collect();
            feeder.join().unwrap().unwrap();
            counts.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(got, lines);
        assert_eq!(stats.samples.load(Ordering::Relaxed), lines);
        let bound = (2 * BATCH * (QUEUE + 2)) as u64;
        let max = stats.max_buffered.load(Ordering::Relaxed);
        assert!(max <= bound, "{max} requests buffered, bound {bound}");
        assert!(max * 10 < lines, "{max} of {lines} lines held");
        assert_eq!(stats.buffered.load(Ordering::Relaxed), 0);
    }

    /// A CSV trace converted to upstream's binary layout reads back the
    /// same requests; threads take runs of 10,001 as upstream's.
    #[test]
    fn binary_traces_round_trip() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("t.csv");
        let mut text = String::from("key,op,size,op_count,ttl\n");
        for i in 0..25_000 {
            let op = ["GET", "SET", "DELETE"][i % 3];
            text.push_str(&format!(
                "key{i},{op},{},{},{}\n",
                i % 700,
                1 + i % 2,
                i % 5
            ));
        }
        text.push_str("bad line\n");
        std::fs::write(&f, text).unwrap();
        let spec = TraceSpec {
            files: vec![f],
            honour_op_count: true,
            fast_forward: 0,
            repeat: false,
            timestamp_factor: 1000,
        };
        let out = d.path().join("t.bin");
        let w = write_binary(&spec, 2, 3, &out).unwrap();
        assert_eq!(
            w,
            BinaryWritten {
                requests: 50_000,
                samples: 25_000,
                parse_errors: 1,
                long_keys: 0
            }
        );
        assert_eq!(std::fs::metadata(&out).unwrap().len() % 4096, 0);
        let bin = BinaryTrace::open(&out).unwrap();
        assert_eq!(bin.requests(), 50_000);
        // Request 3 is line 1's second copy: key1 + "0001", a SET of
        // 1 byte x ampSizeFactor 3, twice, TTL 1.
        let r = bin.request(3, 1).unwrap();
        assert_eq!(
            (r.key, r.op, r.size, r.count, r.ttl_secs),
            (&b"key10001"[..], ReplayOp::Set, 3, 2, 1)
        );
        // Two threads: thread 0 takes 0..=10,000, then 20,000..=30,000...
        let mut s0 = BinaryShard::new(&bin, 0, 2, 0, false, 1);
        let mut keys0 = Vec::new();
        while let Some(r) = s0.next() {
            keys0.push(r.key.to_vec());
        }
        assert_eq!(keys0.len(), 10_001 * 2 + 10_000);
        assert_eq!(keys0[10_000], bin.request(10_000, 1).unwrap().key);
        assert_eq!(keys0[10_001], bin.request(20_000, 1).unwrap().key);
        assert_eq!(s0.invalid, 0);
        // Repeating starts over (without a fast-forward).
        let mut s1 = BinaryShard::new(&bin, 1, 2, 5, true, 1);
        let first = s1.next().unwrap().key.to_vec();
        assert_eq!(first, bin.request(10_005, 1).unwrap().key);
        for _ in 0..100_000 {
            assert!(s1.next().is_some());
        }
        // Not a binary trace: named.
        std::fs::write(d.path().join("x.bin"), [9u8; 16]).unwrap();
        let e = BinaryTrace::open(&d.path().join("x.bin"))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("not a binary trace"), "{e}");
    }

    #[test]
    fn stats_block_is_upstreams() {
        assert_eq!(
            generator_stats_block("KVReplayGenerator", 1_234_567, 3),
            "\n== KVReplayGenerator Stats ==\nTotal Processed Samples: 1.23 million (parse error: 3)\n"
        );
    }
}
