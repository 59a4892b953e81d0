//! The large-item engine (CacheLib's "block cache"): a log-structured cache
//! of regions.
//!
//! The engine's part of the device is cut into regions (`navyRegionSizeMB`,
//! 16 MiB). Items are appended to an open region held in an in-memory
//! buffer; a full region is sealed and a flusher thread writes it to the
//! device in `write_chunk`-byte sequential writes (so the device sees the
//! large sequential writes flash likes, and no item is ever rewritten in
//! place). A reclaimer thread keeps `navyCleanRegions` regions free by
//! evicting whole regions, chosen region-granular LRU, FIFO or segmented
//! FIFO; an evicted region's items leave the index, except those the
//! reinsertion policy keeps (hits or probability), which are copied into
//! the open region.
//!
//! Each entry on the device is a 24-byte header (magic, key and value
//! lengths, expiry, checksum of key and value), the key and the value,
//! rounded up to the device block. The DRAM index maps a 64-bit key hash to
//! (region, block offset, blocks, hits); a lookup reads only the entry's
//! blocks and checks key and checksum, so a hash collision or a torn read
//! is a miss, never a wrong value. The index of each region's entries is
//! kept in DRAM too (8 bytes per entry), so reclaiming a region without
//! reinsertion costs no read.
//!
//! Concurrency: one allocation lock orders appends (the copy into the
//! buffer happens under it, so a sealed region is always complete); the
//! index is sharded; readers of a region are counted, and a region is
//! reclaimed only once its readers are gone (a lookup that finds its region
//! being reclaimed waits until the index says where the item went, counted
//! in `lookup_races`).

use super::io::{AlignedBuf, BlockIo};
use crate::error::Error;
use rand::SeedableRng;
use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::Instant;

const MAGIC: u32 = 0x5242_4e56; // "RBNV"
const HEADER: usize = 24;
const SHARDS: usize = 64;
const NIL: u32 = u32::MAX;

const FREE: u8 = 0;
const OPEN: u8 = 1;
const FLUSHING: u8 = 2;
const SEALED: u8 = 3;
const RECLAIMING: u8 = 4;

/// How regions are chosen for eviction.
#[derive(Debug, Clone, PartialEq)]
pub enum Eviction {
    /// Least recently read or written region first.
    Lru,
    /// Oldest written region first.
    Fifo,
    /// FIFO segments sized by these ratios, lowest priority first; items
    /// written from DRAM enter segment 0, reinserted items one segment up,
    /// and an overfull segment hands its oldest region down.
    SegmentedFifo(Vec<u32>),
}

/// Which items of an evicted region are written again.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reinsertion {
    None,
    /// Items read at least this many times since written.
    Hits(u32),
    /// Each item with this probability in percent.
    Probability(u32),
}

/// What the region engine is built from.
#[derive(Debug, Clone)]
pub struct RegionConfig {
    pub region_size: u32,
    /// Regions kept free ahead of the writers (`navyCleanRegions`).
    pub clean_regions: u32,
    /// In-memory region buffers (open plus flushing regions).
    pub buffers: u32,
    pub eviction: Eviction,
    pub reinsertion: Reinsertion,
    pub checksum: bool,
    /// Bytes per device write when a region is flushed.
    pub write_chunk: u32,
}

/// Counters of the region engine.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RegionStats {
    pub inserts: u64,
    pub too_large: u64,
    pub lookups: u64,
    pub hits: u64,
    pub expired: u64,
    pub removes: u64,
    /// Items dropped when their region was reclaimed.
    pub evictions: u64,
    pub reinsertions: u64,
    /// Reinsertions dropped because no free region was at hand.
    pub reinsertion_drops: u64,
    pub regions_reclaimed: u64,
    pub regions_flushed: u64,
    pub checksum_errors: u64,
    /// Lookups that found their region being reclaimed and waited for it.
    pub lookup_races: u64,
    /// Items the index holds now.
    pub items: u64,
    /// Key and value bytes of inserts (including reinsertions).
    pub logical_bytes_written: u64,
    /// Bytes written to the device.
    pub physical_bytes_written: u64,
    /// Bytes read from the device (lookups and reinsertion).
    pub bytes_read: u64,
    /// Insert, lookup and remove calls over the last minute (upstream's
    /// `BlockCache ... Latency`).
    #[serde(default)]
    pub latency_us: Option<crate::latency::OpLatency>,
}

#[derive(Default)]
struct Counters {
    inserts: AtomicU64,
    too_large: AtomicU64,
    lookups: AtomicU64,
    hits: AtomicU64,
    expired: AtomicU64,
    removes: AtomicU64,
    evictions: AtomicU64,
    reinsertions: AtomicU64,
    reinsertion_drops: AtomicU64,
    regions_reclaimed: AtomicU64,
    regions_flushed: AtomicU64,
    checksum_errors: AtomicU64,
    lookup_races: AtomicU64,
    logical_bytes_written: AtomicU64,
    physical_bytes_written: AtomicU64,
    bytes_read: AtomicU64,
}

fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// Where an entry lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Loc {
    region: u32,
    /// Offset in blocks from the region's start.
    block: u32,
    blocks: u32,
    hits: u32,
}

impl Loc {
    fn same_place(&self, o: &Loc) -> bool {
        self.region == o.region && self.block == o.block
    }
}

struct Region {
    state: AtomicU8,
    readers: AtomicU32,
    priority: AtomicU8,
    buf: RwLock<Option<AlignedBuf>>,
}

struct Open {
    region: u32,
    /// Bytes used.
    fill: usize,
}

struct Alloc {
    open: Vec<Option<Open>>,
    free: std::collections::VecDeque<u32>,
    spare: Vec<AlignedBuf>,
    /// Entries written to each region: (key hash, block offset).
    entries: Vec<Vec<(u64, u32)>>,
    fatal: Option<String>,
    shutdown: bool,
    /// The reclaimer is evicting a region.
    reclaiming: bool,
}

/// Doubly linked lists over region ids, one per segment.
struct Policy {
    kind: Eviction,
    prev: Vec<u32>,
    next: Vec<u32>,
    seg_of: Vec<u8>,
    heads: Vec<u32>,
    tails: Vec<u32>,
    lens: Vec<usize>,
}

impl Policy {
    fn new(kind: Eviction, regions: usize) -> Policy {
        let segs = match &kind {
            Eviction::SegmentedFifo(r) => r.len().max(1),
            _ => 1,
        };
        Policy {
            kind,
            prev: vec![NIL; regions],
            next: vec![NIL; regions],
            seg_of: vec![u8::MAX; regions],
            heads: vec![NIL; segs],
            tails: vec![NIL; segs],
            lens: vec![0; segs],
        }
    }

    fn segments(&self) -> usize {
        self.heads.len()
    }

    fn push_back(&mut self, seg: usize, r: u32) {
        let t = self.tails[seg];
        self.prev[r as usize] = t;
        self.next[r as usize] = NIL;
        if t == NIL {
            self.heads[seg] = r;
        } else {
            self.next[t as usize] = r;
        }
        self.tails[seg] = r;
        self.seg_of[r as usize] = seg as u8;
        self.lens[seg] += 1;
    }

    fn unlink(&mut self, r: u32) {
        let seg = self.seg_of[r as usize];
        if seg == u8::MAX {
            return;
        }
        let seg = seg as usize;
        let (p, n) = (self.prev[r as usize], self.next[r as usize]);
        if p == NIL {
            self.heads[seg] = n;
        } else {
            self.next[p as usize] = n;
        }
        if n == NIL {
            self.tails[seg] = p;
        } else {
            self.prev[n as usize] = p;
        }
        self.seg_of[r as usize] = u8::MAX;
        self.lens[seg] -= 1;
    }

    /// Starts tracking a sealed region of `priority`.
    fn track(&mut self, r: u32, priority: usize) {
        let seg = priority.min(self.segments() - 1);
        self.push_back(seg, r);
        if let Eviction::SegmentedFifo(ratios) = self.kind.clone() {
            let total: usize = self.lens.iter().sum();
            let sum: u64 = ratios.iter().map(|&x| u64::from(x)).sum::<u64>().max(1);
            for s in (1..self.segments()).rev() {
                let target = (total as u64 * u64::from(ratios[s]) / sum) as usize;
                while self.lens[s] > target.max(1) {
                    let h = self.heads[s];
                    self.unlink(h);
                    self.push_back(s - 1, h);
                }
            }
        }
    }

    fn touch(&mut self, r: u32) {
        if self.kind == Eviction::Lru && self.seg_of[r as usize] != u8::MAX {
            self.unlink(r);
            self.push_back(0, r);
        }
    }

    fn evict(&mut self) -> Option<u32> {
        for s in 0..self.segments() {
            let h = self.heads[s];
            if h != NIL {
                self.unlink(h);
                return Some(h);
            }
        }
        None
    }
}

struct Shared {
    io: Arc<dyn BlockIo>,
    cfg: RegionConfig,
    block: usize,
    regions: Vec<Region>,
    index: Vec<Mutex<HashMap<u64, Loc>>>,
    alloc: Mutex<Alloc>,
    /// Signalled when a region or buffer comes free, and on shutdown.
    freed: Condvar,
    /// Signalled when the reclaimer may have work.
    wanted: Condvar,
    policy: Mutex<Policy>,
    counters: Counters,
    /// Insert, lookup and remove calls, microseconds.
    insert_latency: crate::latency::Recorder,
    lookup_latency: crate::latency::Recorder,
    remove_latency: crate::latency::Recorder,
    /// Regions kept back for reinsertion (normal inserts leave them).
    reserve: usize,
    stop: AtomicBool,
    /// Sealed regions go to the flusher through this (None once shut down).
    flush_tx: Mutex<Option<mpsc::Sender<u32>>>,
}

/// The region engine.
pub struct RegionEngine {
    shared: Arc<Shared>,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

/// Result of an insert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Insert {
    Inserted,
    /// Entry bigger than a region.
    TooLarge,
    /// Not written (a reinsertion that found no room).
    Dropped,
}

/// CRC-32C of key and value (hardware-accelerated where available).
fn checksum(key: &[u8], value: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(key), value)
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl RegionEngine {
    /// Builds the engine over `io` (its whole range) and starts its flusher
    /// and reclaimer threads.
    pub fn new(io: Arc<dyn BlockIo>, cfg: RegionConfig) -> Result<RegionEngine, Error> {
        let block = io.block_size() as usize;
        let rs = cfg.region_size as usize;
        if rs == 0 || !rs.is_multiple_of(block) {
            return Err(Error::Input(format!(
                "navyRegionSizeMB: a region of {rs} bytes is not a multiple of the {block}-byte block"
            )));
        }
        if cfg.write_chunk == 0 || !(cfg.write_chunk as usize).is_multiple_of(block) {
            return Err(Error::Input(format!(
                "device write size {} is not a multiple of the {block}-byte block",
                cfg.write_chunk
            )));
        }
        if let Eviction::SegmentedFifo(r) = &cfg.eviction
            && (r.is_empty() || r.len() > 8 || r.contains(&0))
        {
            return Err(Error::Input(format!(
                "navySegmentedFifoSegmentRatio {r:?}: expected 1 to 8 positive ratios"
            )));
        }
        let priorities = match &cfg.eviction {
            Eviction::SegmentedFifo(r) => r.len(),
            _ => 1,
        };
        let reserve = usize::from(cfg.reinsertion != Reinsertion::None);
        let n = (io.size() / rs as u64) as usize;
        let clean = (cfg.clean_regions as usize).max(1);
        let need = priorities + clean + reserve + 2;
        if n < need {
            return Err(Error::Input(format!(
                "the region engine has room for {n} region(s) of {} MiB; it needs at least {need} \
                 ({priorities} open, {clean} clean, {reserve} reserved for reinsertion, 2 to evict from): \
                 raise nvmCacheSizeMB or lower navyRegionSizeMB",
                rs >> 20
            )));
        }
        if n >= NIL as usize {
            return Err(Error::Input(format!("{n} regions: too many")));
        }
        let buffers = (cfg.buffers as usize).max(priorities + 1);
        let (tx, rx) = mpsc::channel::<u32>();
        let shared = Arc::new(Shared {
            block,
            regions: (0..n)
                .map(|_| Region {
                    state: AtomicU8::new(FREE),
                    readers: AtomicU32::new(0),
                    priority: AtomicU8::new(0),
                    buf: RwLock::new(None),
                })
                .collect(),
            index: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            alloc: Mutex::new(Alloc {
                open: (0..priorities).map(|_| None).collect(),
                free: (0..n as u32).collect(),
                spare: (0..buffers).map(|_| AlignedBuf::zeroed(rs)).collect(),
                entries: vec![Vec::new(); n],
                fatal: None,
                shutdown: false,
                reclaiming: false,
            }),
            freed: Condvar::new(),
            wanted: Condvar::new(),
            policy: Mutex::new(Policy::new(cfg.eviction.clone(), n)),
            counters: Counters::default(),
            insert_latency: crate::latency::Recorder::new(),
            lookup_latency: crate::latency::Recorder::new(),
            remove_latency: crate::latency::Recorder::new(),
            reserve,
            stop: AtomicBool::new(false),
            flush_tx: Mutex::new(Some(tx)),
            io,
            cfg,
        });
        let mut threads = Vec::new();
        let s = shared.clone();
        threads.push(
            std::thread::Builder::new()
                .name("navy-flush".into())
                .spawn(move || {
                    while let Ok(r) = rx.recv() {
                        s.flush(r);
                    }
                })
                .map_err(|e| Error::Host(format!("starting the region flusher: {e}")))?,
        );
        let s = shared.clone();
        threads.push(
            std::thread::Builder::new()
                .name("navy-reclaim".into())
                .spawn(move || s.reclaim_loop())
                .map_err(|e| Error::Host(format!("starting the region reclaimer: {e}")))?,
        );
        Ok(RegionEngine {
            shared,
            threads: Mutex::new(threads),
        })
    }

    /// Regions of the engine.
    pub fn num_regions(&self) -> usize {
        self.shared.regions.len()
    }

    /// Bytes an entry of this key and value takes on the device.
    pub fn entry_size(&self, key_len: usize, value_len: usize) -> usize {
        (HEADER + key_len + value_len).div_ceil(self.shared.block) * self.shared.block
    }

    /// Writes `key` (whose hash is `hash`) with `value`; replaces an older
    /// entry of the key. Blocks while no region is free.
    pub fn insert(&self, hash: u64, key: &[u8], value: &[u8], expiry: u32) -> io::Result<Insert> {
        let start = Instant::now();
        let Some(tx) = self.shared.flush_sender() else {
            return Err(io::Error::other("the region engine is shut down"));
        };
        let r = self.shared.append(&tx, hash, key, value, expiry, 0, None);
        self.shared.insert_latency.record_since(start);
        r
    }

    /// Looks `key` up; `now` is compared with the entry's expiry.
    pub fn lookup(&self, hash: u64, key: &[u8], now: u32) -> io::Result<Option<Vec<u8>>> {
        Ok(self.lookup_ex(hash, key, now)?.map(|(v, _)| v))
    }

    /// [`RegionEngine::lookup`] with the entry's expiry (0: none).
    pub fn lookup_ex(&self, hash: u64, key: &[u8], now: u32) -> io::Result<Option<(Vec<u8>, u32)>> {
        let start = Instant::now();
        let r = self.shared.lookup(hash, key, now);
        self.shared.lookup_latency.record_since(start);
        r
    }

    /// Drops `key` from the index (its bytes are reclaimed with its region).
    pub fn remove(&self, hash: u64) -> bool {
        let start = Instant::now();
        let s = &self.shared;
        bump(&s.counters.removes, 1);
        let found = lock(&s.index[shard(hash)]).remove(&hash).is_some();
        s.remove_latency.record_since(start);
        found
    }

    /// Whether the index has the key's hash (no I/O).
    pub fn could_exist(&self, hash: u64) -> bool {
        lock(&self.shared.index[shard(hash)]).contains_key(&hash)
    }

    /// A failure of the flusher (e.g. the disk is full), once it happened.
    pub fn fatal(&self) -> Option<String> {
        lock(&self.shared.alloc).fatal.clone()
    }

    pub fn stats(&self) -> RegionStats {
        let c = &self.shared.counters;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        RegionStats {
            inserts: g(&c.inserts),
            too_large: g(&c.too_large),
            lookups: g(&c.lookups),
            hits: g(&c.hits),
            expired: g(&c.expired),
            removes: g(&c.removes),
            evictions: g(&c.evictions),
            reinsertions: g(&c.reinsertions),
            reinsertion_drops: g(&c.reinsertion_drops),
            regions_reclaimed: g(&c.regions_reclaimed),
            regions_flushed: g(&c.regions_flushed),
            checksum_errors: g(&c.checksum_errors),
            lookup_races: g(&c.lookup_races),
            items: self.shared.index.iter().map(|s| lock(s).len() as u64).sum(),
            logical_bytes_written: g(&c.logical_bytes_written),
            physical_bytes_written: g(&c.physical_bytes_written),
            bytes_read: g(&c.bytes_read),
            latency_us: Some(crate::latency::OpLatency {
                insert: self.shared.insert_latency.window(),
                lookup: self.shared.lookup_latency.window(),
                remove: self.shared.remove_latency.window(),
            }),
        }
    }

    /// Seals the open regions and waits until everything written so far
    /// is on the device and the reclaimer is idle (for tests and the end
    /// of a run).
    pub fn flush(&self) {
        let Some(tx) = self.shared.flush_sender() else {
            return;
        };
        let s = &self.shared;
        let mut a = lock(&s.alloc);
        let mut sealed = Vec::new();
        for slot in a.open.iter_mut() {
            if let Some(o) = slot.take() {
                s.regions[o.region as usize]
                    .state
                    .store(FLUSHING, Ordering::SeqCst);
                sealed.push(o.region);
            }
        }
        drop(a);
        for r in &sealed {
            let _ = tx.send(*r);
        }
        let want = s.cfg.clean_regions.max(1) as usize + s.reserve;
        let mut a = lock(&s.alloc);
        while a.fatal.is_none()
            && (a.reclaiming
                || (a.free.len() < want && lock(&s.policy).lens.iter().sum::<usize>() > 0)
                || s.regions
                    .iter()
                    .any(|r| r.state.load(Ordering::SeqCst) == FLUSHING))
        {
            a = s
                .freed
                .wait_timeout(a, std::time::Duration::from_millis(10))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

impl Drop for RegionEngine {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        lock(&self.shared.flush_tx).take();
        {
            let mut a = lock(&self.shared.alloc);
            a.shutdown = true;
        }
        self.shared.wanted.notify_all();
        self.shared.freed.notify_all();
        for t in lock(&self.threads).drain(..) {
            let _ = t.join();
        }
    }
}

fn shard(hash: u64) -> usize {
    (hash >> 58) as usize % SHARDS
}

impl Shared {
    fn flush_sender(&self) -> Option<mpsc::Sender<u32>> {
        lock(&self.flush_tx).clone()
    }

    fn region_offset(&self, r: u32) -> u64 {
        u64::from(r) * u64::from(self.cfg.region_size)
    }

    /// Appends an entry. `only_if` (reinsertion) writes it only while the
    /// index still points at that old place, and never waits for a region.
    #[allow(clippy::too_many_arguments)]
    fn append(
        &self,
        tx: &mpsc::Sender<u32>,
        hash: u64,
        key: &[u8],
        value: &[u8],
        expiry: u32,
        priority: usize,
        only_if: Option<Loc>,
    ) -> io::Result<Insert> {
        let rs = self.cfg.region_size as usize;
        let size = (HEADER + key.len() + value.len()).div_ceil(self.block) * self.block;
        if size > rs || key.len() > u32::MAX as usize || value.len() > u32::MAX as usize {
            bump(&self.counters.too_large, 1);
            return Ok(Insert::TooLarge);
        }
        let reinsert = only_if.is_some();
        let mut a = lock(&self.alloc);
        loop {
            if let Some(f) = &a.fatal {
                return Err(io::Error::other(f.clone()));
            }
            if a.shutdown {
                return Err(io::Error::other("the region engine is shut down"));
            }
            if let Some(o) = &a.open[priority] {
                if o.fill + size <= rs {
                    break;
                }
                let r = o.region;
                a.open[priority] = None;
                self.regions[r as usize]
                    .state
                    .store(FLUSHING, Ordering::SeqCst);
                let _ = tx.send(r);
            }
            let keep = if reinsert { 0 } else { self.reserve };
            let region_free = a.free.len() > keep;
            if region_free && !a.spare.is_empty() {
                let r = a.free.pop_front().expect("a free region");
                let buf = a.spare.pop().expect("a spare buffer");
                let reg = &self.regions[r as usize];
                *reg.buf.write().unwrap_or_else(|e| e.into_inner()) = Some(buf);
                reg.priority.store(priority as u8, Ordering::Relaxed);
                reg.state.store(OPEN, Ordering::SeqCst);
                a.entries[r as usize].clear();
                a.open[priority] = Some(Open { region: r, fill: 0 });
                if a.free.len() < self.cfg.clean_regions.max(1) as usize + self.reserve {
                    self.wanted.notify_one();
                }
                continue;
            }
            // No region: wake the reclaimer (a reinsertion, which runs on
            // the reclaimer, gives up instead). No buffer: the flusher
            // returns one shortly.
            self.wanted.notify_one();
            if reinsert && !region_free {
                bump(&self.counters.reinsertion_drops, 1);
                return Ok(Insert::Dropped);
            }
            a = self.freed.wait(a).unwrap_or_else(|e| e.into_inner());
        }
        // Check the reinsertion condition and publish under the index lock,
        // so a remove or a newer insert in between wins.
        let mut idx = lock(&self.index[shard(hash)]);
        if let Some(old) = only_if {
            match idx.get(&hash) {
                Some(cur) if cur.same_place(&old) => {}
                _ => return Ok(Insert::Dropped),
            }
        }
        let o = a.open[priority].as_mut().expect("an open region");
        let (r, off) = (o.region, o.fill);
        o.fill += size;
        {
            let mut g = self.regions[r as usize]
                .buf
                .write()
                .unwrap_or_else(|e| e.into_inner());
            let buf = g.as_mut().expect("the open region's buffer");
            let e = &mut buf[off..off + size];
            e[0..4].copy_from_slice(&MAGIC.to_le_bytes());
            e[4..8].copy_from_slice(&(key.len() as u32).to_le_bytes());
            e[8..12].copy_from_slice(&(value.len() as u32).to_le_bytes());
            e[12..16].copy_from_slice(&expiry.to_le_bytes());
            let sum = if self.cfg.checksum {
                checksum(key, value)
            } else {
                0
            };
            e[16..20].copy_from_slice(&sum.to_le_bytes());
            e[20..24].copy_from_slice(&0u32.to_le_bytes());
            e[HEADER..HEADER + key.len()].copy_from_slice(key);
            e[HEADER + key.len()..HEADER + key.len() + value.len()].copy_from_slice(value);
        }
        let block = (off / self.block) as u32;
        a.entries[r as usize].push((hash, block));
        idx.insert(
            hash,
            Loc {
                region: r,
                block,
                blocks: (size / self.block) as u32,
                hits: 0,
            },
        );
        drop(idx);
        drop(a);
        bump(&self.counters.inserts, 1);
        if reinsert {
            bump(&self.counters.reinsertions, 1);
        }
        bump(
            &self.counters.logical_bytes_written,
            (key.len() + value.len()) as u64,
        );
        Ok(Insert::Inserted)
    }

    /// Reads an entry's bytes from its region's buffer or the device.
    fn read_entry(&self, loc: &Loc) -> io::Result<Option<AlignedBuf>> {
        let reg = &self.regions[loc.region as usize];
        reg.readers.fetch_add(1, Ordering::SeqCst);
        let st = reg.state.load(Ordering::SeqCst);
        if st == FREE || st == RECLAIMING {
            reg.readers.fetch_sub(1, Ordering::SeqCst);
            return Ok(None);
        }
        let len = loc.blocks as usize * self.block;
        let off = loc.block as usize * self.block;
        let mut out = AlignedBuf::zeroed(len);
        let from_buf = {
            let g = reg.buf.read().unwrap_or_else(|e| e.into_inner());
            match g.as_ref() {
                Some(b) => {
                    out.copy_from_slice(&b[off..off + len]);
                    true
                }
                None => false,
            }
        };
        let res = if from_buf {
            Ok(())
        } else {
            bump(&self.counters.bytes_read, len as u64);
            self.io
                .read_at(self.region_offset(loc.region) + off as u64, &mut out)
        };
        reg.readers.fetch_sub(1, Ordering::SeqCst);
        res.map(|()| Some(out))
    }

    /// Parses an entry; None (counted) when it is not `key`'s.
    fn parse<'a>(&self, e: &'a [u8], key: &[u8]) -> Option<(&'a [u8], u32)> {
        let ok_header = e.len() >= HEADER && le32(e, 0) == MAGIC;
        let (kl, vl) = if ok_header {
            (le32(e, 4) as usize, le32(e, 8) as usize)
        } else {
            (0, 0)
        };
        if !ok_header || HEADER + kl + vl > e.len() {
            bump(&self.counters.checksum_errors, 1);
            return None;
        }
        let k = &e[HEADER..HEADER + kl];
        if k != key {
            // Another key with the same hash.
            return None;
        }
        let v = &e[HEADER + kl..HEADER + kl + vl];
        if self.cfg.checksum && le32(e, 16) != checksum(k, v) {
            bump(&self.counters.checksum_errors, 1);
            return None;
        }
        Some((v, le32(e, 12)))
    }

    fn lookup(&self, hash: u64, key: &[u8], now: u32) -> io::Result<Option<(Vec<u8>, u32)>> {
        bump(&self.counters.lookups, 1);
        let mut raced = false;
        let (loc, e) = loop {
            let loc = {
                let mut idx = lock(&self.index[shard(hash)]);
                match idx.get_mut(&hash) {
                    Some(l) => {
                        l.hits = l.hits.saturating_add(1);
                        *l
                    }
                    None => return Ok(None),
                }
            };
            match self.read_entry(&loc)? {
                Some(e) => break (loc, e),
                None => {
                    // The region is being reclaimed: once it is, the index
                    // says where a reinserted item went, or that it is gone.
                    if !raced {
                        raced = true;
                        bump(&self.counters.lookup_races, 1);
                    }
                    std::thread::sleep(std::time::Duration::from_micros(20));
                }
            }
        };
        let Some((v, expiry)) = self.parse(&e, key) else {
            return Ok(None);
        };
        if expiry != 0 && expiry <= now {
            bump(&self.counters.expired, 1);
            return Ok(None);
        }
        if self.cfg.eviction == Eviction::Lru {
            // Only LRU reorders on a read; FIFO readers skip the lock.
            lock(&self.policy).touch(loc.region);
        }
        bump(&self.counters.hits, 1);
        Ok(Some((v.to_vec(), expiry)))
    }

    /// Writes a sealed region to the device and starts tracking it.
    fn flush(&self, r: u32) {
        let reg = &self.regions[r as usize];
        let rs = self.cfg.region_size as usize;
        let chunk = self.cfg.write_chunk as usize;
        let result = {
            let g = reg.buf.read().unwrap_or_else(|e| e.into_inner());
            let buf = g.as_ref().expect("a flushing region's buffer");
            let mut res = Ok(());
            let mut at = 0;
            while at < rs && res.is_ok() {
                let n = chunk.min(rs - at);
                res = self
                    .io
                    .write_at(self.region_offset(r) + at as u64, &buf[at..at + n]);
                at += n;
            }
            res
        };
        match result {
            Ok(()) => {
                bump(&self.counters.physical_bytes_written, rs as u64);
                bump(&self.counters.regions_flushed, 1);
                lock(&self.policy).track(r, usize::from(reg.priority.load(Ordering::Relaxed)));
                reg.state.store(SEALED, Ordering::SeqCst);
                let buf = reg.buf.write().unwrap_or_else(|e| e.into_inner()).take();
                let mut a = lock(&self.alloc);
                a.spare.extend(buf);
                drop(a);
                self.freed.notify_all();
                self.wanted.notify_one();
            }
            Err(e) => {
                let what = if e.raw_os_error() == Some(libc::ENOSPC)
                    || e.kind() == io::ErrorKind::StorageFull
                {
                    "the NVM device is full"
                } else {
                    "writing a region to the NVM device failed"
                };
                // The region's items are lost; it goes back to the free list.
                reg.state.store(RECLAIMING, Ordering::SeqCst);
                self.wait_readers(reg);
                let mut a = lock(&self.alloc);
                a.fatal.get_or_insert_with(|| format!("{what}: {e}"));
                let entries = std::mem::take(&mut a.entries[r as usize]);
                self.drop_entries(r, &entries);
                let buf = reg.buf.write().unwrap_or_else(|e| e.into_inner()).take();
                a.spare.extend(buf);
                reg.state.store(FREE, Ordering::SeqCst);
                a.free.push_back(r);
                drop(a);
                self.freed.notify_all();
            }
        }
    }

    fn wait_readers(&self, reg: &Region) {
        while reg.readers.load(Ordering::SeqCst) != 0 {
            std::thread::yield_now();
        }
    }

    /// Removes the index entries that still point into region `r`;
    /// returns how many.
    fn drop_entries(&self, r: u32, entries: &[(u64, u32)]) -> u64 {
        let mut n = 0;
        for &(hash, block) in entries {
            let mut idx = lock(&self.index[shard(hash)]);
            if idx
                .get(&hash)
                .is_some_and(|l| l.region == r && l.block == block)
            {
                idx.remove(&hash);
                n += 1;
            }
        }
        n
    }

    fn reclaim_loop(self: &Arc<Self>) {
        let want = self.cfg.clean_regions.max(1) as usize + self.reserve;
        let mut buf = (self.cfg.reinsertion != Reinsertion::None)
            .then(|| AlignedBuf::zeroed(self.cfg.region_size as usize));
        let mut rng = rand::rngs::SmallRng::seed_from_u64(0x5eed);
        loop {
            {
                let mut a = lock(&self.alloc);
                loop {
                    if a.shutdown || self.stop.load(Ordering::SeqCst) {
                        return;
                    }
                    if a.free.len() < want && lock(&self.policy).lens.iter().sum::<usize>() > 0 {
                        a.reclaiming = true;
                        break;
                    }
                    a = self
                        .wanted
                        .wait_timeout(a, std::time::Duration::from_millis(50))
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
            let Some(r) = lock(&self.policy).evict() else {
                lock(&self.alloc).reclaiming = false;
                continue;
            };
            self.reclaim(r, buf.as_mut(), &mut rng);
        }
    }

    fn reclaim(&self, r: u32, buf: Option<&mut AlignedBuf>, rng: &mut rand::rngs::SmallRng) {
        use rand::Rng;
        let reg = &self.regions[r as usize];
        reg.state.store(RECLAIMING, Ordering::SeqCst);
        self.wait_readers(reg);
        let entries = std::mem::take(&mut lock(&self.alloc).entries[r as usize]);
        if let Some(buf) = buf {
            let read = self.io.read_at(self.region_offset(r), buf);
            if read.is_ok() {
                bump(&self.counters.bytes_read, buf.len() as u64);
                let priority = usize::from(reg.priority.load(Ordering::Relaxed)) + 1;
                let priorities = lock(&self.alloc).open.len();
                let tx = self.flush_sender();
                for &(hash, block) in &entries {
                    let Some(loc) = lock(&self.index[shard(hash)])
                        .get(&hash)
                        .copied()
                        .filter(|l| l.region == r && l.block == block)
                    else {
                        continue;
                    };
                    let qualifies = match self.cfg.reinsertion {
                        Reinsertion::None => false,
                        Reinsertion::Hits(t) => loc.hits >= t.max(1),
                        Reinsertion::Probability(p) => rng.random_range(0..100) < p,
                    };
                    if !qualifies {
                        continue;
                    }
                    let off = block as usize * self.block;
                    let e = &buf[off..off + loc.blocks as usize * self.block];
                    let kl = le32(e, 4) as usize;
                    if le32(e, 0) != MAGIC || HEADER + kl > e.len() {
                        continue;
                    }
                    let key = e[HEADER..HEADER + kl].to_vec();
                    let Some((v, expiry)) = self.parse(e, &key) else {
                        continue;
                    };
                    if let Some(tx) = &tx {
                        let p = priority.min(priorities - 1);
                        let _ = self.append(tx, hash, &key, v, expiry, p, Some(loc));
                    }
                }
            }
        }
        let dropped = self.drop_entries(r, &entries);
        bump(&self.counters.evictions, dropped);
        bump(&self.counters.regions_reclaimed, 1);
        let mut a = lock(&self.alloc);
        reg.state.store(FREE, Ordering::SeqCst);
        a.free.push_back(r);
        a.reclaiming = false;
        drop(a);
        self.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nvm::io::MemIo;

    const RS: u32 = 64 << 10;

    fn cfg(eviction: Eviction, reinsertion: Reinsertion) -> RegionConfig {
        RegionConfig {
            region_size: RS,
            clean_regions: 1,
            buffers: 2,
            eviction,
            reinsertion,
            checksum: true,
            write_chunk: 16 << 10,
        }
    }

    fn engine(regions: u64, c: RegionConfig) -> (Arc<MemIo>, RegionEngine) {
        let io = Arc::new(MemIo::new(regions * u64::from(RS), 512));
        let e = RegionEngine::new(io.clone(), c).unwrap();
        (io, e)
    }

    fn h(k: u64) -> u64 {
        // Any well-spread hash will do for the engine.
        k.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (k >> 7)
    }

    fn key(k: u64) -> Vec<u8> {
        format!("key-{k}").into_bytes()
    }

    fn value(k: u64, len: usize) -> Vec<u8> {
        (0..len).map(|i| (k as usize * 31 + i) as u8).collect()
    }

    #[test]
    fn round_trip_from_buffer_and_from_device() {
        let (_io, e) = engine(8, cfg(Eviction::Fifo, Reinsertion::None));
        for k in 0..20 {
            assert_eq!(
                e.insert(h(k), &key(k), &value(k, 3000), 0).unwrap(),
                Insert::Inserted
            );
        }
        // Still in the open region's buffer: no device read.
        assert_eq!(e.lookup(h(3), &key(3), 1).unwrap(), Some(value(3, 3000)));
        assert_eq!(e.stats().bytes_read, 0);
        e.flush();
        assert_eq!(e.lookup(h(3), &key(3), 1).unwrap(), Some(value(3, 3000)));
        let s = e.stats();
        // 24-byte header + key + value rounded up to 512-byte blocks.
        assert_eq!(s.bytes_read, e.entry_size(5, 3000) as u64);
        assert_eq!(e.entry_size(5, 3000), 3072);
        assert!(s.physical_bytes_written >= u64::from(RS));
        assert_eq!(s.items, 20);
        // Replace, then remove.
        e.insert(h(3), &key(3), b"new", 0).unwrap();
        assert_eq!(
            e.lookup(h(3), &key(3), 1).unwrap().as_deref(),
            Some(&b"new"[..])
        );
        assert!(e.remove(h(3)));
        assert!(!e.remove(h(3)));
        assert_eq!(e.lookup(h(3), &key(3), 1).unwrap(), None);
        // A different key with the same hash is a miss, not a wrong value.
        assert_eq!(e.lookup(h(4), b"other", 1).unwrap(), None);
        // Expiry.
        e.insert(h(50), &key(50), b"x", 10).unwrap();
        assert!(e.lookup(h(50), &key(50), 9).unwrap().is_some());
        assert_eq!(e.lookup(h(50), &key(50), 10).unwrap(), None);
        assert_eq!(e.stats().expired, 1);
        // An entry bigger than a region.
        assert_eq!(
            e.insert(h(60), &key(60), &vec![0; RS as usize], 0).unwrap(),
            Insert::TooLarge
        );
    }

    /// Writes `n` items of ~4 KiB (one per 8 blocks) and returns which
    /// survive.
    fn surviving(e: &RegionEngine, n: u64) -> Vec<u64> {
        (0..n)
            .filter(|&k| e.lookup(h(k), &key(k), 1).unwrap().is_some())
            .collect()
    }

    #[test]
    fn fifo_evicts_whole_oldest_regions() {
        let (_io, e) = engine(8, cfg(Eviction::Fifo, Reinsertion::None));
        // 16 entries of 4 KiB per 64 KiB region; 8 regions hold 128.
        let n = 400;
        for k in 0..n {
            e.insert(h(k), &key(k), &value(k, 4000), 0).unwrap();
        }
        e.flush();
        let s = e.stats();
        assert!(s.regions_reclaimed > 0, "{s:?}");
        assert_eq!(s.evictions + s.items, n, "{s:?}");
        let alive = surviving(&e, n);
        // The survivors are exactly the newest items, oldest first evicted.
        let first = alive[0];
        assert_eq!(alive, (first..n).collect::<Vec<_>>());
        assert!(
            alive.len() >= 16 * 4 && alive.len() <= 128,
            "{}",
            alive.len()
        );
        for k in alive {
            assert_eq!(e.lookup(h(k), &key(k), 1).unwrap(), Some(value(k, 4000)));
        }
    }

    #[test]
    fn lru_keeps_regions_that_are_read() {
        let (_io, e) = engine(8, cfg(Eviction::Lru, Reinsertion::None));
        for k in 0..400 {
            e.insert(h(k), &key(k), &value(k, 4000), 0).unwrap();
            // Key 0's region is read all along.
            if k % 8 == 0 {
                assert!(e.lookup(h(0), &key(0), 1).unwrap().is_some(), "at {k}");
            }
        }
        let (_io, f) = engine(8, cfg(Eviction::Fifo, Reinsertion::None));
        for k in 0..400 {
            f.insert(h(k), &key(k), &value(k, 4000), 0).unwrap();
            if k % 8 == 0 {
                let _ = f.lookup(h(0), &key(0), 1).unwrap();
            }
        }
        assert_eq!(
            f.lookup(h(0), &key(0), 1).unwrap(),
            None,
            "FIFO ignores reads"
        );
    }

    #[test]
    fn reinsertion_by_hits_keeps_hot_items_and_probability_keeps_a_share() {
        for eviction in [Eviction::Fifo, Eviction::SegmentedFifo(vec![1, 1])] {
            let (_io, e) = engine(10, cfg(eviction.clone(), Reinsertion::Hits(1)));
            let hot = [0u64, 1, 2, 3];
            for k in 0..600 {
                if k == 4 {
                    e.flush();
                }
                e.insert(h(k), &key(k), &value(k, 4000), 0).unwrap();
                if k % 16 == 0 && k > 0 {
                    for &x in &hot {
                        assert!(
                            e.lookup(h(x), &key(x), 1).unwrap() == Some(value(x, 4000)),
                            "{eviction:?}: hot key {x} lost at {k}"
                        );
                    }
                }
            }
            let s = e.stats();
            assert!(s.reinsertions >= 4, "{eviction:?}: {s:?}");
            assert_eq!(s.reinsertion_drops, 0, "{s:?}");
            // Cold items were not reinserted.
            assert!(e.lookup(h(10), &key(10), 1).unwrap().is_none());
        }
        let (_io, e) = engine(10, cfg(Eviction::Fifo, Reinsertion::Probability(50)));
        for k in 0..600 {
            e.insert(h(k), &key(k), &value(k, 4000), 0).unwrap();
        }
        let s = e.stats();
        let share = s.reinsertions as f64 / (s.reinsertions + s.evictions) as f64;
        assert!((0.35..0.65).contains(&share), "{share} {s:?}");
    }

    #[test]
    fn corruption_on_the_device_is_a_counted_miss() {
        let (io, e) = engine(8, cfg(Eviction::Fifo, Reinsertion::None));
        e.insert(h(1), &key(1), &value(1, 2000), 0).unwrap();
        e.flush();
        // The first entry of the first region: flip a value byte.
        let mut b = AlignedBuf::zeroed(512);
        io.read_at(512, &mut b).unwrap();
        b[100] ^= 0xff;
        io.write_at(512, &b).unwrap();
        assert_eq!(e.lookup(h(1), &key(1), 1).unwrap(), None);
        assert_eq!(e.stats().checksum_errors, 1);
    }

    /// A device whose writes fail with ENOSPC past a limit.
    struct Full {
        inner: MemIo,
        limit: u64,
        written: AtomicU64,
    }

    impl BlockIo for Full {
        fn size(&self) -> u64 {
            self.inner.size()
        }
        fn block_size(&self) -> u32 {
            self.inner.block_size()
        }
        fn read_at(&self, o: u64, b: &mut [u8]) -> io::Result<()> {
            self.inner.read_at(o, b)
        }
        fn write_at(&self, o: u64, b: &[u8]) -> io::Result<()> {
            if self.written.fetch_add(b.len() as u64, Ordering::SeqCst) >= self.limit {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            self.inner.write_at(o, b)
        }
    }

    #[test]
    fn a_full_device_fails_inserts_with_a_clear_error() {
        let io = Arc::new(Full {
            inner: MemIo::new(8 * u64::from(RS), 512),
            limit: 2 * u64::from(RS),
            written: AtomicU64::new(0),
        });
        let e = RegionEngine::new(io, cfg(Eviction::Fifo, Reinsertion::None)).unwrap();
        let mut err = None;
        for k in 0..2000 {
            match e.insert(h(k), &key(k), &value(k, 4000), 0) {
                Ok(_) => {}
                Err(x) => {
                    err = Some(x.to_string());
                    break;
                }
            }
            if k % 16 == 0 {
                e.flush();
            }
        }
        let err = err.expect("inserts fail once the device is full");
        assert!(err.contains("the NVM device is full"), "{err}");
        assert!(e.fatal().is_some());
    }

    #[test]
    fn too_small_and_bad_settings_are_refused() {
        let io = Arc::new(MemIo::new(3 * u64::from(RS), 512));
        let err = RegionEngine::new(io.clone(), cfg(Eviction::Fifo, Reinsertion::None))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("room for 3 region(s)"), "{err}");
        let mut c = cfg(Eviction::Fifo, Reinsertion::None);
        c.region_size = 1000;
        assert!(RegionEngine::new(io.clone(), c).is_err());
        let c = cfg(Eviction::SegmentedFifo(vec![1, 0]), Reinsertion::None);
        let err = RegionEngine::new(io, c).err().unwrap().to_string();
        assert!(err.contains("navySegmentedFifoSegmentRatio"), "{err}");
    }

    #[test]
    fn concurrent_writers_and_readers_only_ever_see_written_values() {
        let (_io, e) = engine(12, cfg(Eviction::Lru, Reinsertion::Hits(2)));
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let e = &e;
                s.spawn(move || {
                    for i in 0..3000u64 {
                        let k = (i * 7 + t) % 300;
                        if (i + t) % 3 == 0 {
                            e.insert(h(k), &key(k), &value(k, 1500 + (k as usize % 7) * 300), 0)
                                .unwrap();
                        } else {
                            // Inserted keys are multiples of 3; read any.
                            let k = (i * 13 + t * 5) % 100 * 3;
                            if let Some(v) = e.lookup(h(k), &key(k), 1).unwrap() {
                                assert!(v == value(k, v.len()), "key {k}: wrong value");
                            }
                        }
                        if i % 500 == 499 && t == 0 {
                            e.remove(h(k));
                        }
                    }
                });
            }
        });
        let s = e.stats();
        assert_eq!(s.checksum_errors, 0, "{s:?}");
        assert!(s.hits > 0 && s.regions_reclaimed > 0, "{s:?}");
    }
}
