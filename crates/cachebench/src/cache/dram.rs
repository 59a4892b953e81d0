//! The DRAM cache: slabs, pools, allocation classes, eviction containers
//! and a chained hash index, as CacheLib lays them out.
//!
//! Memory is `cacheSizeMB` cut into 4 MiB slabs. Each pool gets its share
//! of slabs (`poolSizes`); a class of a pool takes a slab when it has no
//! free slot and its pool has slabs left, and carves it into slots of its
//! size. When the pool is full an allocation evicts the victim of its own
//! class's container; a class that never got a slab cannot allocate (as in
//! CacheLib, until rebalancing moves a slab to it). Items are stored in
//! their slot (key, then value); the per-item metadata (28 bytes: hash
//! chain, list links, sizes, access and expiry times, flags) and a 4-byte
//! pin count per slot sit beside the slab, and the hash index is
//! `2^htBucketPower` 4-byte bucket heads chaining through it.
//!
//! Concurrency: one reader-writer lock around the index, the containers
//! and the allocator, held only for their updates. Gets share it. Large
//! values are copied outside it: a get pins the item's slot (a per-slot
//! count, as CacheLib's item handles) and copies after unlocking; a set
//! reserves its slot, copies after unlocking and links the item under the
//! lock again. A pinned item that is replaced, deleted or evicted leaves the
//! index at once and its slot is freed by the last reader; eviction skips
//! pinned items and rebalancing skips slabs with pinned slots.

use super::classes::{AllocClasses, SLAB_SIZE};
use crate::error::Error;

/// CacheLib's LruTailAgeStrategy moves a slab only when the victim's tail
/// is this many seconds older than the receiver's (its
/// `minTailAgeDifference`; CacheBench's config cannot change it).
const MIN_TAIL_AGE_DIFFERENCE_SECS: u32 = 100;

/// CacheLib's HitsPerSlabStrategy moves a slab only when the receiver's
/// hits per slab beat the victim's by this many (its `minDiff`).
const MIN_HITS_PER_SLAB_DIFF: f64 = 100.0;
use super::mm::{Container, Links, NIL, Policy, Refresh};
pub use super::stats::{PoolStats, ReleaseStats, Stats};
use std::sync::RwLock;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

/// What a DRAM cache is built from.
#[derive(Debug, Clone)]
pub struct DramConfig {
    pub size_bytes: u64,
    /// Fractions of the slabs per pool (summing to at most 1).
    pub pool_sizes: Vec<f64>,
    pub classes: AllocClasses,
    pub policy: Policy,
    pub refresh: Refresh,
    pub ht_bucket_power: u32,
}

/// Why an item could not be stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocError {
    /// Key and value exceed the largest allocation class.
    TooLarge,
    /// The pool is full and the item's class has nothing to evict.
    NoMemory,
    /// A chained item's parent is not in the cache (or was evicted to make
    /// room for the chained item).
    NoParent,
}

/// How rebalancing picks the class that gives up a slab and the class
/// that gets it (`rebalanceStrategy`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rebalance {
    /// Both at random (upstream's choice for any other name).
    Random,
    /// From the class whose eviction victim is oldest to the one whose
    /// victim is youngest (`tail-age`).
    TailAge,
    /// From the class with the fewest hits per slab since the last
    /// rebalancing to the one with the most (`hits`).
    Hits,
}

/// Rebalancing settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RebalanceConfig {
    pub strategy: Rebalance,
    /// A class keeps at least this many slabs (`rebalanceMinSlabs`).
    pub min_slabs: u32,
    /// `rebalanceDiffRatio`, as CacheLib's strategies: tail-age moves a
    /// slab when the victim's tail is older than the receiver's by at least
    /// this share of the victim's age; hits when the receiver's hits per
    /// slab beat the victim's by this share of the victim's.
    pub diff_ratio: f64,
    /// Items of a released slab move to free slots of their class when
    /// there are some, instead of being evicted (`moveOnSlabRelease`).
    pub move_items: bool,
}

/// Where the cache's memory goes, for the items it holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Footprint {
    pub items: u64,
    /// The keys and values themselves.
    pub key_value_bytes: u64,
    /// The slots holding them (key and value plus the class rounding).
    pub slot_bytes: u64,
    /// Per-item metadata beside the slabs.
    pub metadata_bytes: u64,
    /// The hash index's buckets (fixed by htBucketPower).
    pub index_bytes: u64,
}

impl Footprint {
    /// Bytes per item beyond its key and value: slot rounding, metadata
    /// and the item's share of the index.
    pub fn overhead_per_item(&self) -> f64 {
        if self.items == 0 {
            return 0.0;
        }
        (self.slot_bytes - self.key_value_bytes + self.metadata_bytes + self.index_bytes) as f64
            / self.items as f64
    }

    /// The same without the allocation-class rounding: what each item
    /// costs in bookkeeping (CacheLib: a ~31-byte header and a 4-byte
    /// bucket).
    pub fn bookkeeping_per_item(&self) -> f64 {
        if self.items == 0 {
            return 0.0;
        }
        (self.metadata_bytes + self.index_bytes) as f64 / self.items as f64
    }
}

const FLAG_IN_TAIL: u8 = 1;
/// The item is an unchanged copy of what NVM holds (promoted from it).
const FLAG_NVM_CLEAN: u8 = 2;
/// A chained item: not in the index; `hash_next` links the parent's chain
/// and `expiry` holds the parent's slot id.
const FLAG_CHILD: u8 = 4;
/// A parent with chained items (listed in `Inner::chains`).
const FLAG_HAS_CHAIN: u8 = 8;

/// An item evicted from DRAM, copied out for the NVM tier.
#[derive(Debug, Clone, PartialEq)]
pub struct Evicted {
    pub pool: u8,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    /// The chained items' values, newest first (as the chain lists them).
    pub chain: Vec<Vec<u8>>,
    /// In the cache's clock ([`DramCache::now`]); 0 = never.
    pub expiry: u32,
    pub last_access: u32,
    /// NVM already holds this value.
    pub clean: bool,
    /// What the sink's stamp function said about the key at eviction time.
    pub stamp: u64,
}

/// Where [`DramCache::set_ex`] puts the items its allocation evicts.
pub struct EvictionSink<'a> {
    pub out: &'a mut Vec<Evicted>,
    /// Called under the cache's lock with each evicted key.
    pub stamp: &'a dyn Fn(&[u8]) -> u64,
}

/// How [`DramCache::set_ex`] stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetMode {
    /// Store, replacing an older value.
    Replace,
    /// Store only when the key is absent, marked as NVM's clean copy.
    Promote,
}

/// Per-item metadata beside the slab (28 bytes).
#[derive(Debug, Clone, Copy)]
struct Meta {
    hash_next: u32,
    prev: u32,
    next: u32,
    val_len: u32,
    last_access: u32,
    /// Seconds since the cache's start; 0 = never.
    expiry: u32,
    key_len: u16,
    queue: u8,
    flags: u8,
}

const EMPTY: Meta = Meta {
    hash_next: NIL,
    prev: NIL,
    next: NIL,
    val_len: 0,
    last_access: 0,
    expiry: 0,
    key_len: 0,
    queue: 0,
    flags: 0,
};

/// Items at least this large (key + value) are copied outside the lock.
const UNLOCKED_COPY: usize = 4096;
/// How many items from the eviction end an allocation looks at for one
/// that is not pinned.
const EVICTION_TRIES: usize = 64;
/// In a slot's pin count: the item left the cache while pinned; the last
/// unpin frees the slot.
const ZOMBIE: u32 = 1 << 31;

/// A slab's 4 MiB, written through raw pointers: a slot being filled or
/// read outside the cache's lock is reachable by no one else (reserved, or
/// pinned and never written while pinned).
struct SlabMem {
    ptr: std::ptr::NonNull<u8>,
    /// On 2 MiB-aligned memory advised for transparent huge pages.
    huge: bool,
}

// SAFETY: the memory is owned; access is coordinated by the cache's lock
// and the slot pins as described on SlabMem.
unsafe impl Send for SlabMem {}
// SAFETY: as for Send: shared access goes through the cache's lock and
// the slot pins.
unsafe impl Sync for SlabMem {}

impl SlabMem {
    fn layout(huge: bool) -> std::alloc::Layout {
        let align = if huge { HUGE_PAGE } else { 64 };
        std::alloc::Layout::from_size_align(SLAB_SIZE, align).expect("slab layout")
    }

    /// A slab's memory; with `huge`, 2 MiB-aligned and advised for
    /// transparent huge pages (`hugePageSize`).
    fn new(huge: bool) -> SlabMem {
        // Zeroed pages are mapped lazily, as with a zeroed Vec.
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(Self::layout(huge)) };
        let Some(ptr) = std::ptr::NonNull::new(ptr) else {
            std::alloc::handle_alloc_error(Self::layout(huge))
        };
        if huge {
            // SAFETY: the range is this allocation, 2 MiB-aligned; the
            // advice changes how it is backed, not its contents. A kernel
            // without transparent huge pages refuses it, which is harmless.
            unsafe {
                libc::madvise(ptr.as_ptr().cast(), SLAB_SIZE, libc::MADV_HUGEPAGE);
            }
        }
        SlabMem { ptr, huge }
    }

    /// Bytes `start..end` (under the cache's lock, or of a pinned slot).
    fn get(&self, start: usize, end: usize) -> &[u8] {
        assert!(start <= end && end <= SLAB_SIZE);
        // SAFETY: in bounds; no one writes a linked or pinned slot.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(start), end - start) }
    }

    /// Writes `bytes` at `start`.
    ///
    /// # Safety
    /// The caller has the range to itself: the cache's write lock, or a
    /// reserved slot that no one else can reach.
    unsafe fn put(&self, start: usize, bytes: &[u8]) {
        // SAFETY: per the caller's contract.
        unsafe { put_raw(self.ptr, start, bytes) }
    }
}

/// Writes `bytes` at `start` of the slab memory at `base`.
///
/// # Safety
/// `base` is a live slab's memory and the caller has the range to itself.
unsafe fn put_raw(base: std::ptr::NonNull<u8>, start: usize, bytes: &[u8]) {
    assert!(start + bytes.len() <= SLAB_SIZE);
    // SAFETY: in bounds; exclusive per the caller's contract.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), base.as_ptr().add(start), bytes.len()) }
}

impl Drop for SlabMem {
    fn drop(&mut self) {
        // SAFETY: allocated in SlabMem::new with the same layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.huge)) }
    }
}

struct Slab {
    mem: SlabMem,
    slot_size: usize,
    meta: Vec<Meta>,
    /// Per slot: readers copying it outside the lock (a set filling it
    /// counts as one), plus [`ZOMBIE`].
    pins: Box<[AtomicU32]>,
}

fn pins(n: usize) -> Box<[AtomicU32]> {
    (0..n).map(|_| AtomicU32::new(0)).collect()
}

/// A slot pinned for copying outside the lock; unpins on drop.
struct Pinned<'a> {
    cache: &'a DramCache,
    id: u32,
    pin: *const AtomicU32,
    data: *const u8,
    len: usize,
}

impl Pinned<'_> {
    fn bytes(&self) -> &[u8] {
        // SAFETY: the slot is pinned: its slab is neither released nor
        // reused and nothing writes the slot until the last unpin.
        unsafe { std::slice::from_raw_parts(self.data, self.len) }
    }
}

impl Drop for Pinned<'_> {
    fn drop(&mut self) {
        // SAFETY: the pin count lives in the slab's pins, which are not
        // replaced while a slot is pinned (rebalancing skips such slabs).
        let pin = unsafe { &*self.pin };
        if pin.fetch_sub(1, Ordering::AcqRel) == ZOMBIE | 1 {
            // The item left the cache while we copied it: free its slot.
            let mut g = self.cache.write();
            g.free_slot(self.id);
        }
    }
}

/// Slot ids: slab index in the high 16 bits, slot in the low 16.
fn slot_id(slab: usize, slot: usize) -> u32 {
    ((slab as u32) << 16) | slot as u32
}

fn split(id: u32) -> (usize, usize) {
    ((id >> 16) as usize, (id & 0xffff) as usize)
}

/// The slabs seen as the containers' links.
struct Metas<'a>(&'a mut [Slab]);

impl Metas<'_> {
    fn m(&self, id: u32) -> &Meta {
        let (s, i) = split(id);
        &self.0[s].meta[i]
    }
    fn mm(&mut self, id: u32) -> &mut Meta {
        let (s, i) = split(id);
        &mut self.0[s].meta[i]
    }
}

impl Links for Metas<'_> {
    fn prev(&self, id: u32) -> u32 {
        self.m(id).prev
    }
    fn next(&self, id: u32) -> u32 {
        self.m(id).next
    }
    fn set_prev(&mut self, id: u32, v: u32) {
        self.mm(id).prev = v;
    }
    fn set_next(&mut self, id: u32, v: u32) {
        self.mm(id).next = v;
    }
    fn queue(&self, id: u32) -> u8 {
        self.m(id).queue
    }
    fn set_queue(&mut self, id: u32, q: u8) {
        self.mm(id).queue = q;
    }
    fn in_tail(&self, id: u32) -> bool {
        self.m(id).flags & FLAG_IN_TAIL != 0
    }
    fn set_in_tail(&mut self, id: u32, v: bool) {
        let m = self.mm(id);
        if v {
            m.flags |= FLAG_IN_TAIL;
        } else {
            m.flags &= !FLAG_IN_TAIL;
        }
    }
    fn last_access(&self, id: u32) -> u32 {
        self.m(id).last_access
    }
    fn set_last_access(&mut self, id: u32, t: u32) {
        self.mm(id).last_access = t;
    }
}

struct Class {
    free: Vec<u32>,
    /// The slab being carved and its next unused slot.
    carving: Option<(usize, usize)>,
    mm: Container,
    /// Slabs the class holds.
    slabs: u32,
    /// Hits since the last rebalancing (the hits strategy's measure).
    hits: AtomicU64,
}

struct Pool {
    classes: Vec<Class>,
    stats: PoolStats,
}

struct Inner {
    slabs: Vec<Slab>,
    /// (pool, class) of each slab.
    slab_owner: Vec<(usize, usize)>,
    total_slabs: usize,
    pools: Vec<Pool>,
    buckets: Vec<u32>,
    /// First chained item of each parent that has a chain.
    chains: std::collections::HashMap<u32, u32>,
    stats: Stats,
    release: ReleaseStats,
    /// New slabs on transparent huge pages (`hugePageSize`).
    huge_pages: bool,
}

/// A huge page (2 MiB), the alignment of slabs on huge pages.
const HUGE_PAGE: usize = 2 << 20;

/// The DRAM cache.
pub struct DramCache {
    classes: AllocClasses,
    /// Set values are copied into their slots (`populateItem`; a promoted
    /// NVM item always is).
    populate: bool,
    start: Instant,
    inner: RwLock<Inner>,
    /// Gets and hits, counted outside the lock (gets share a read lock).
    gets: AtomicU64,
    hits: AtomicU64,
    /// With `--report_api_latency`: nanoseconds per allocation (upstream's
    /// `allocateLatency_`, the allocator's allocate call with the eviction
    /// it makes).
    alloc_latency: std::sync::OnceLock<crate::latency::Recorder>,
}

/// FNV-1a: the index's hash of a key.
fn hash(key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

impl DramCache {
    /// `populateItem` off: sets leave their slots' bytes as they were
    /// (upstream then skips filling the item); and `hugePageSize`: new
    /// slabs on transparent huge pages.
    pub fn with_memory(mut self, populate: bool, huge_pages: bool) -> DramCache {
        self.populate = populate;
        self.inner
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .huge_pages = huge_pages;
        self
    }

    /// Builds the cache (no memory is touched until items are stored).
    pub fn new(cfg: &DramConfig) -> Result<DramCache, Error> {
        // As CacheLib's slab allocator: the memory's first slab holds the
        // slabs' headers (7 bytes each, so one slab for up to 599,186 of
        // them); the rest is for items.
        let slabs_in_memory = (cfg.size_bytes / SLAB_SIZE as u64) as usize;
        let header_slabs = (slabs_in_memory * 7).div_ceil(SLAB_SIZE);
        if slabs_in_memory <= header_slabs {
            return Err(Error::Input(format!(
                "cacheSizeMB: {} bytes leaves no slab for items: expected at least two {} MiB slabs \
                 (CacheLib keeps the first for the slab headers)",
                cfg.size_bytes,
                SLAB_SIZE >> 20
            )));
        }
        let total_slabs = slabs_in_memory - header_slabs;
        if total_slabs > 0xffff {
            return Err(Error::Input(format!(
                "cacheSizeMB: {} slabs of 4 MiB; at most 65535 (256 GiB)",
                total_slabs
            )));
        }
        let sum: f64 = cfg.pool_sizes.iter().sum();
        if cfg.pool_sizes.is_empty() || sum > 1.0 + 1e-9 || cfg.pool_sizes.iter().any(|f| *f < 0.0)
        {
            return Err(Error::Input(format!(
                "poolSizes {:?}: need at least one pool and fractions summing to at most 1",
                cfg.pool_sizes
            )));
        }
        if !(1..=30).contains(&cfg.ht_bucket_power) {
            return Err(Error::Input(format!(
                "htBucketPower must be 1 to 30, got {}",
                cfg.ht_bucket_power
            )));
        }
        let pools = cfg
            .pool_sizes
            .iter()
            .map(|f| Pool {
                classes: (0..cfg.classes.sizes().len())
                    .map(|_| Class {
                        free: Vec::new(),
                        carving: None,
                        slabs: 0,
                        hits: AtomicU64::new(0),
                        mm: Container::new(cfg.policy, cfg.refresh),
                    })
                    .collect(),
                stats: PoolStats {
                    // CacheLib's pool: `ratio` of the usable memory in
                    // bytes, filled with whole slabs.
                    slab_budget: ((total_slabs * SLAB_SIZE) as f64 * f) as u64 / SLAB_SIZE as u64,
                    ..PoolStats::default()
                },
            })
            .collect();
        Ok(DramCache {
            classes: cfg.classes.clone(),
            populate: true,
            start: Instant::now(),
            gets: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            alloc_latency: std::sync::OnceLock::new(),
            inner: RwLock::new(Inner {
                slabs: Vec::new(),
                slab_owner: Vec::new(),
                total_slabs,
                pools,
                // Zeroed memory is mapped lazily: a 2^29-bucket index costs
                // nothing until used. Buckets hold slot id + 1 (0 = empty).
                buckets: vec![0; 1 << cfg.ht_bucket_power],
                chains: std::collections::HashMap::new(),
                stats: Stats::default(),
                release: ReleaseStats::default(),
                huge_pages: false,
            }),
        })
    }

    /// The cache's clock: whole seconds since it was built, plus one.
    pub fn now(&self) -> u32 {
        self.start.elapsed().as_secs() as u32 + 1
    }

    /// The memory for items in bytes (whole slabs, the header slab left
    /// out): what CacheLib's pools divide (its `ramCacheSize`).
    pub fn usable_bytes(&self) -> u64 {
        self.read().total_slabs as u64 * SLAB_SIZE as u64
    }

    /// Pools of the cache.
    pub fn pool_count(&self) -> usize {
        self.read().pools.len()
    }

    /// The allocation classes.
    pub fn classes(&self) -> &AllocClasses {
        &self.classes
    }

    /// Looks `key` up; on a hit copies the value into `out` (when given)
    /// and returns its length.
    pub fn get(&self, key: &[u8], out: Option<&mut Vec<u8>>) -> Option<usize> {
        self.lookup(key, out, true, false)
    }

    /// [`DramCache::get`] for an item about to be changed in place
    /// (CacheLib's `findToWrite`): the access is recorded as a write, so
    /// the item is promoted only under `lruUpdateOnWrite`.
    pub fn find_to_write(&self, key: &[u8], out: Option<&mut Vec<u8>>) -> Option<usize> {
        self.lookup(key, out, true, true)
    }

    /// [`DramCache::get`] without counting a get (a second look by the
    /// NVM tier at a key already counted).
    pub fn get_uncounted(&self, key: &[u8], out: Option<&mut Vec<u8>>) -> Option<usize> {
        self.lookup(key, out, false, false)
    }

    /// The expiry time of `key`'s item (on [`DramCache::now`]'s clock; 0:
    /// none), without counting or promoting.
    pub fn expiry(&self, key: &[u8]) -> Option<u32> {
        let g = self.read();
        let (s, i) = split(g.find(key)?);
        Some(g.slabs[s].meta[i].expiry)
    }

    fn lookup(
        &self,
        key: &[u8],
        out: Option<&mut Vec<u8>>,
        count: bool,
        write: bool,
    ) -> Option<usize> {
        let now = self.now();
        if count {
            self.gets.fetch_add(1, Ordering::Relaxed);
        }
        // Under the shared lock: find, copy (or pin a large item to copy it
        // after unlocking), and see whether the container wants the access
        // recorded (within the refresh time it does not, which is most
        // gets); only then take the exclusive lock.
        let mut out = out;
        let (len, pinned, promote) = {
            let g = self.read();
            let id = g.find(key)?;
            let (s, i) = split(id);
            let m = g.slabs[s].meta[i];
            if m.expiry != 0 && m.expiry <= now {
                drop(g);
                let mut g = self.write();
                if let Some(id) = g.find(key) {
                    let (s, i) = split(id);
                    let e = g.slabs[s].meta[i].expiry;
                    if e != 0 && e <= now {
                        g.stats.expired += 1;
                        g.unlink(id, key);
                    }
                }
                return None;
            }
            let (pool, class) = g.owner(id);
            if count {
                self.hits.fetch_add(1, Ordering::Relaxed);
                g.pools[pool].classes[class]
                    .hits
                    .fetch_add(1, Ordering::Relaxed);
            }
            let len = m.val_len as usize;
            let slab = &g.slabs[s];
            let start = i * slab.slot_size + m.key_len as usize;
            let mut pinned = None;
            if let Some(out) = out.as_deref_mut() {
                out.clear();
                if m.key_len as usize + len < UNLOCKED_COPY {
                    out.extend_from_slice(slab.mem.get(start, start + len));
                } else {
                    pinned = Some(self.pin_slot(&g, id));
                }
            }
            let last_access = |x: u32| {
                let (s, i) = split(x);
                g.slabs[s].meta[i].last_access
            };
            let promote =
                g.pools[pool].classes[class]
                    .mm
                    .would_promote(last_access, id, now, write);
            (len, pinned, promote)
        };
        if let (Some(p), Some(out)) = (&pinned, out) {
            out.extend_from_slice(p.bytes());
        }
        drop(pinned);
        if !promote {
            return Some(len);
        }
        let mut g = self.write();
        let inner = &mut *g;
        if let Some(id) = inner.find(key) {
            let (pool, class) = inner.owner(id);
            let Inner { slabs, pools, .. } = inner;
            pools[pool].classes[class]
                .mm
                .record_access(&mut Metas(slabs), id, now, write);
        }
        Some(len)
    }

    /// Pins linked item `id`'s slot for copying its value after the lock
    /// (held shared as `g`) is released.
    fn pin_slot<'a>(&'a self, g: &Inner, id: u32) -> Pinned<'a> {
        let (s, i) = split(id);
        let slab = &g.slabs[s];
        let m = slab.meta[i];
        let start = i * slab.slot_size + m.key_len as usize;
        slab.pins[i].fetch_add(1, Ordering::AcqRel);
        Pinned {
            cache: self,
            id,
            pin: &slab.pins[i],
            data: slab.mem.get(start, start + m.val_len as usize).as_ptr(),
            len: m.val_len as usize,
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Stores `key` with `value` in `pool`, replacing an older value of the
    /// key; `ttl_secs` 0 never expires.
    pub fn set(
        &self,
        pool: usize,
        key: &[u8],
        value: &[u8],
        ttl_secs: u32,
    ) -> Result<(), AllocError> {
        self.set_ex(pool, key, value, ttl_secs, SetMode::Replace, None)
            .map(|_| ())
    }

    /// [`DramCache::set`] with a mode, handing what the allocation evicts
    /// to `sink`; Ok(false) when `Promote` found the key already there.
    pub fn set_ex(
        &self,
        pool: usize,
        key: &[u8],
        value: &[u8],
        ttl_secs: u32,
        mode: SetMode,
        mut sink: Option<EvictionSink<'_>>,
    ) -> Result<bool, AllocError> {
        let now = self.now();
        if key.len() > u16::MAX as usize {
            return Err(AllocError::TooLarge);
        }
        // The slot holds the item as CacheLib lays it out: its header, the
        // key and the value (at least CacheBench's CacheValue fields).
        let Some(class) = self
            .classes
            .class_for(super::classes::item_size(key.len(), value.len()))
        else {
            let mut g = self.write();
            g.pools[pool].stats.alloc_attempts += 1;
            return Err(AllocError::TooLarge);
        };
        let mut g = self.write();
        let inner = &mut *g;
        if mode == SetMode::Promote && inner.find(key).is_some() {
            return Ok(false);
        }
        inner.pools[pool].stats.alloc_attempts += 1;
        // Allocate first: a failed set leaves the old value in place (as
        // CacheLib's insertOrReplace). The allocation may have evicted the
        // old item; whatever is still there is replaced.
        let timed = self.alloc_latency.get().map(|r| (r, Instant::now()));
        let id = inner.allocate(&self.classes, pool, class, &mut sink);
        if let Some((r, t0)) = timed {
            r.record(u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX));
        }
        let id = id?;
        inner.pools[pool].stats.alloc_successes += 1;
        let (s, i) = split(id);
        let start = i * inner.slabs[s].slot_size;
        // populateItem off: the slot keeps whatever bytes it had (a promoted
        // NVM item is always copied).
        let fill = self.populate || mode == SetMode::Promote;
        let mut g = if key.len() + value.len() < UNLOCKED_COPY {
            // SAFETY: under the write lock; the slot is free.
            unsafe {
                inner.slabs[s].mem.put(start, key);
                if fill {
                    inner.slabs[s].mem.put(start + key.len(), value);
                }
            }
            g
        } else {
            // Reserve the slot (a pin keeps rebalancing off its slab), fill
            // it without the lock, then link it.
            let slab = &inner.slabs[s];
            slab.pins[i].store(1, Ordering::Release);
            let base = slab.mem.ptr;
            drop(g);
            // SAFETY: the slot is reserved: not free, not in the index nor a
            // container, and its slab is not released while pinned; slab
            // memory stays put (only the Slab records move) until the cache
            // is dropped.
            unsafe {
                put_raw(base, start, key);
                if fill {
                    put_raw(base, start + key.len(), value);
                }
            }
            let g = self.write();
            g.slabs[s].pins[i].store(0, Ordering::Release);
            g
        };
        let inner = &mut *g;
        if mode == SetMode::Promote && inner.find(key).is_some() {
            // Another promotion got there while the slot was filled.
            inner.free_slot(id);
            return Ok(false);
        }
        if let Some(old) = inner.find(key) {
            inner.unlink(old, key);
        }
        let b = (hash(key) as usize) & (inner.buckets.len() - 1);
        let chain = inner.head(b);
        let slab = &mut inner.slabs[s];
        slab.meta[i] = Meta {
            hash_next: chain,
            key_len: key.len() as u16,
            val_len: value.len() as u32,
            expiry: if ttl_secs == 0 { 0 } else { now + ttl_secs },
            flags: if mode == SetMode::Promote {
                FLAG_NVM_CLEAN
            } else {
                0
            },
            ..EMPTY
        };
        inner.set_head(b, id);
        let Inner { slabs, pools, .. } = inner;
        pools[pool].classes[class]
            .mm
            .add(&mut Metas(slabs), id, now);
        pools[pool].stats.items += 1;
        Ok(true)
    }

    /// Adds a chained item holding `value` to `key`'s item (CacheLib's
    /// `allocateChainedItem` + `addChainedItem`): it takes a slot of its own
    /// class in the parent's pool, goes first in the parent's chain and
    /// leaves with the parent. The parent stops being a clean NVM copy.
    pub fn add_chained(
        &self,
        key: &[u8],
        value: &[u8],
        sink: Option<EvictionSink<'_>>,
    ) -> Result<(), AllocError> {
        self.add_chained_ex(key, value, false, sink)
    }

    /// [`DramCache::add_chained`]; `keep_clean` leaves the parent marked as
    /// NVM's clean copy (a chain promoted from NVM with its parent).
    pub fn add_chained_ex(
        &self,
        key: &[u8],
        value: &[u8],
        keep_clean: bool,
        mut sink: Option<EvictionSink<'_>>,
    ) -> Result<(), AllocError> {
        let now = self.now();
        let mut g = self.write();
        let inner = &mut *g;
        let Some(parent) = inner.find(key) else {
            return Err(AllocError::NoParent);
        };
        let (pool, _) = inner.owner(parent);
        let Some(class) = self
            .classes
            .class_for(super::classes::chained_item_size(value.len()))
        else {
            inner.pools[pool].stats.alloc_attempts += 1;
            return Err(AllocError::TooLarge);
        };
        inner.pools[pool].stats.alloc_attempts += 1;
        let timed = self.alloc_latency.get().map(|r| (r, Instant::now()));
        let id = inner.allocate(&self.classes, pool, class, &mut sink);
        if let Some((r, t0)) = timed {
            r.record(u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX));
        }
        let id = id?;
        // The allocation may have evicted the parent itself.
        let Some(parent) = inner.find(key) else {
            inner.pools[pool].classes[class].free.push(id);
            return Err(AllocError::NoParent);
        };
        inner.pools[pool].stats.alloc_successes += 1;
        let head = inner.chains.get(&parent).copied().unwrap_or(NIL);
        let (s, i) = split(id);
        let slab = &mut inner.slabs[s];
        let start = i * slab.slot_size;
        if self.populate || keep_clean {
            // SAFETY: under the write lock; the slot is free.
            unsafe { slab.mem.put(start, value) };
        }
        slab.meta[i] = Meta {
            hash_next: head,
            val_len: value.len() as u32,
            expiry: parent,
            flags: FLAG_CHILD,
            ..EMPTY
        };
        inner.chains.insert(parent, id);
        let (ps, pi) = split(parent);
        let pm = &mut inner.slabs[ps].meta[pi];
        pm.flags |= FLAG_HAS_CHAIN;
        if !keep_clean {
            pm.flags &= !FLAG_NVM_CLEAN;
        }
        let Inner { slabs, pools, .. } = inner;
        pools[pool].classes[class]
            .mm
            .add(&mut Metas(slabs), id, now);
        pools[pool].stats.items += 1;
        Ok(())
    }

    /// The values of `key`'s chained items, newest first (None without the
    /// key).
    pub fn chain(&self, key: &[u8]) -> Option<Vec<Vec<u8>>> {
        let g = self.read();
        let parent = g.find(key)?;
        Some(g.chain_values(parent))
    }

    /// One rebalancing round: in each pool, the strategy picks a class to
    /// give up one slab and a class to get it; the slab's items are moved
    /// (see [`RebalanceConfig::move_items`]) or evicted into `sink`.
    /// `draw` gives the random strategy its choices. Returns the slabs
    /// released.
    pub fn rebalance(
        &self,
        cfg: &RebalanceConfig,
        draw: &mut dyn FnMut(usize) -> usize,
        mut sink: Option<EvictionSink<'_>>,
    ) -> u64 {
        let now = self.now();
        let mut g = self.write();
        let inner = &mut *g;
        let mut released = 0;
        for pool in 0..inner.pools.len() {
            let Some((victim, receiver)) = inner.pick(pool, cfg, now, draw) else {
                continue;
            };
            if inner.release_slab(
                &self.classes,
                pool,
                victim,
                receiver,
                cfg.move_items,
                &mut sink,
            ) {
                released += 1;
            }
            for c in &mut inner.pools[pool].classes {
                c.hits.store(0, Ordering::Relaxed);
            }
        }
        released
    }

    /// Removes `key`; true if it was there.
    pub fn remove(&self, key: &[u8]) -> bool {
        let mut g = self.write();
        let inner = &mut *g;
        inner.stats.removes += 1;
        match inner.find(key) {
            Some(id) => {
                inner.unlink(id, key);
                true
            }
            None => false,
        }
    }

    /// The counters so far.
    /// Times every allocation from now on (`--report_api_latency`).
    pub fn enable_api_latency(&self) {
        let _ = self.alloc_latency.set(crate::latency::Recorder::new());
    }

    /// Nanoseconds per allocation over the last minute, when timed.
    pub fn alloc_latency(&self) -> Option<hdrhistogram::Histogram<u64>> {
        self.alloc_latency.get().map(|r| r.window())
    }

    pub fn stats(&self) -> Stats {
        let g = self.read();
        let mut s = g.stats.clone();
        s.gets = self.gets.load(Ordering::Relaxed);
        s.hits = self.hits.load(Ordering::Relaxed);
        s.pools = g.pools.iter().map(|p| p.stats.clone()).collect();
        s.release = g.release.clone();
        s
    }

    /// Where the memory of the items held goes: walks every item (takes the
    /// lock for the walk; meant for reports, not the hot path).
    pub fn footprint(&self) -> Footprint {
        let g = self.read();
        let mut f = Footprint {
            index_bytes: (g.buckets.len() * 4) as u64,
            ..Footprint::default()
        };
        for b in 0..g.buckets.len() {
            let mut at = g.head(b);
            while at != NIL {
                let (s, i) = split(at);
                let m = &g.slabs[s].meta[i];
                f.items += 1;
                f.key_value_bytes += u64::from(m.key_len) + u64::from(m.val_len);
                f.slot_bytes += g.slabs[s].slot_size as u64;
                // The metadata and the slot's pin count.
                f.metadata_bytes += (std::mem::size_of::<Meta>() + 4) as u64;
                at = m.hash_next;
            }
        }
        f
    }

    /// Items held per (pool, class), for stats and tests.
    pub fn class_items(&self, pool: usize) -> Vec<usize> {
        let g = self.read();
        g.pools[pool].classes.iter().map(|c| c.mm.len()).collect()
    }
}

impl Inner {
    /// The first item of bucket `b`'s chain (NIL when empty).
    fn head(&self, b: usize) -> u32 {
        self.buckets[b].wrapping_sub(1)
    }

    fn set_head(&mut self, b: usize, id: u32) {
        self.buckets[b] = id.wrapping_add(1);
    }

    fn key_of(&self, id: u32) -> &[u8] {
        let (s, i) = split(id);
        let slab = &self.slabs[s];
        let start = i * slab.slot_size;
        slab.mem.get(start, start + slab.meta[i].key_len as usize)
    }

    fn find(&self, key: &[u8]) -> Option<u32> {
        let b = (hash(key) as usize) & (self.buckets.len() - 1);
        let mut at = self.head(b);
        while at != NIL {
            if self.key_of(at) == key {
                return Some(at);
            }
            let (s, i) = split(at);
            at = self.slabs[s].meta[i].hash_next;
        }
        None
    }

    /// The pool and class a slot belongs to.
    fn owner(&self, id: u32) -> (usize, usize) {
        let (s, _) = split(id);
        self.slab_owner[s]
    }

    /// Takes an item out of the index and its container and frees its slot.
    fn unlink(&mut self, id: u32, key: &[u8]) {
        let b = (hash(key) as usize) & (self.buckets.len() - 1);
        let next = {
            let (s, i) = split(id);
            self.slabs[s].meta[i].hash_next
        };
        if self.head(b) == id {
            self.set_head(b, next);
        } else {
            self.relink(self.head(b), id, next);
        }
        self.release(id);
        if let Some(mut child) = self.chains.remove(&id) {
            while child != NIL {
                let (s, i) = split(child);
                let next = self.slabs[s].meta[i].hash_next;
                self.release(child);
                child = next;
            }
        }
    }

    /// The (victim, receiver) classes of `pool` for one rebalancing step:
    /// none while the pool can still take a free slab (CacheLib's tail-age
    /// and hits strategies wait until all its slabs are allocated).
    fn pick(
        &self,
        pool: usize,
        cfg: &RebalanceConfig,
        now: u32,
        draw: &mut dyn FnMut(usize) -> usize,
    ) -> Option<(usize, usize)> {
        let classes = &self.pools[pool].classes;
        // As CacheLib's tail-age and hits strategies: a pool that can still
        // grab a free slab has no need to move one.
        let stats = &self.pools[pool].stats;
        if cfg.strategy != Rebalance::Random
            && stats.slabs < stats.slab_budget
            && self.slabs.len() < self.total_slabs
        {
            return None;
        }
        // A class keeps at least min_slabs slabs.
        let givers: Vec<usize> = (0..classes.len())
            .filter(|&c| classes[c].slabs > 0 && classes[c].slabs > cfg.min_slabs)
            .collect();
        if givers.is_empty() || classes.len() < 2 {
            return None;
        }
        match cfg.strategy {
            Rebalance::Random => {
                let victim = givers[draw(givers.len())];
                let mut receiver = draw(classes.len() - 1);
                if receiver >= victim {
                    receiver += 1;
                }
                Some((victim, receiver))
            }
            Rebalance::TailAge => {
                let last_access = |id: u32| {
                    let (s, i) = split(id);
                    self.slabs[s].meta[i].last_access
                };
                let age = |c: usize| classes[c].mm.tail_age(last_access, now);
                let victim = givers
                    .iter()
                    .copied()
                    .filter_map(|c| age(c).map(|a| (a, c)))
                    .max()?;
                // The receiver: a class under eviction pressure (it holds
                // items and its pool is out of slabs) with the youngest tail.
                let receiver = (0..classes.len())
                    .filter(|&c| c != victim.1)
                    .filter_map(|c| age(c).map(|a| (a, c)))
                    .min()?;
                // As CacheLib's LruTailAgeStrategy: the victim's tail is
                // older by at least `diff_ratio` of its own age and by at
                // least its minTailAgeDifference (100 s, not settable from
                // CacheBench's config).
                (victim.0 > receiver.0
                    && victim.0 - receiver.0 >= MIN_TAIL_AGE_DIFFERENCE_SECS
                    && f64::from(victim.0 - receiver.0) >= cfg.diff_ratio * f64::from(victim.0))
                .then_some((victim.1, receiver.1))
            }
            Rebalance::Hits => {
                let per_slab = |c: usize| {
                    classes[c].hits.load(Ordering::Relaxed) as f64
                        / f64::from(classes[c].slabs.max(1))
                };
                let victim = givers
                    .iter()
                    .copied()
                    .min_by(|&a, &b| per_slab(a).total_cmp(&per_slab(b)))?;
                let receiver = (0..classes.len())
                    .filter(|&c| c != victim && classes[c].hits.load(Ordering::Relaxed) > 0)
                    .max_by(|&a, &b| per_slab(a).total_cmp(&per_slab(b)))?;
                // As CacheLib's HitsPerSlabStrategy: better by `diff_ratio`
                // of the victim's hits per slab and by its minDiff (100).
                let improvement = per_slab(receiver) - per_slab(victim);
                (improvement >= MIN_HITS_PER_SLAB_DIFF
                    && improvement >= cfg.diff_ratio * per_slab(victim))
                .then_some((victim, receiver))
            }
        }
    }

    /// Releases one slab of (`pool`, `victim`) to `receiver`; false when
    /// the class has no slab.
    fn release_slab(
        &mut self,
        classes: &AllocClasses,
        pool: usize,
        victim: usize,
        receiver: usize,
        move_items: bool,
        sink: &mut Option<EvictionSink<'_>>,
    ) -> bool {
        // A slab with a slot pinned (read or filled outside the lock) stays.
        let owned: Vec<usize> = (0..self.slabs.len())
            .filter(|&s| self.slab_owner[s] == (pool, victim))
            .filter(|&s| {
                self.slabs[s]
                    .pins
                    .iter()
                    .all(|p| p.load(Ordering::Acquire) == 0)
            })
            .collect();
        // The slab with the fewest items costs least to empty.
        let Some(&slab) = owned.iter().min_by_key(|&&s| {
            self.slabs[s]
                .meta
                .iter()
                .filter(|m| m.key_len > 0 || m.flags & FLAG_CHILD != 0)
                .count()
        }) else {
            return false;
        };
        let slots = self.slabs[slab].meta.len();
        // Slots of this slab are no longer free or to be carved.
        let c = &mut self.pools[pool].classes[victim];
        if matches!(c.carving, Some((s, _)) if s == slab) {
            c.carving = None;
        }
        c.free.retain(|&id| split(id).0 != slab);
        for i in 0..slots {
            let id = slot_id(slab, i);
            let m = self.slabs[slab].meta[i];
            if m.key_len == 0 && m.flags & FLAG_CHILD == 0 {
                continue;
            }
            if move_items {
                self.release.move_attempts += 1;
                if let Some(to) = self.free_slot_elsewhere(classes, pool, victim, slab) {
                    self.move_item(id, to);
                    self.release.move_successes += 1;
                    continue;
                }
            }
            self.release.eviction_attempts += 1;
            // A chained item goes with its parent.
            let target = if m.flags & FLAG_CHILD != 0 {
                m.expiry
            } else {
                id
            };
            self.evict(target, sink);
            self.release.eviction_successes += 1;
        }
        // Evicting parents freed chained slots of this slab too.
        self.pools[pool].classes[victim]
            .free
            .retain(|&id| split(id).0 != slab);
        // The slab now belongs to the receiver, all of it free.
        let size = classes.sizes()[receiver] as usize;
        let n = classes.slots_per_slab(receiver);
        self.slabs[slab].slot_size = size;
        self.slabs[slab].meta = vec![EMPTY; n];
        self.slabs[slab].pins = pins(n);
        self.slab_owner[slab] = (pool, receiver);
        self.pools[pool].classes[victim].slabs -= 1;
        let r = &mut self.pools[pool].classes[receiver];
        r.slabs += 1;
        r.free.extend((0..n).rev().map(|i| slot_id(slab, i)));
        self.release.slabs_released += 1;
        true
    }

    /// A free slot of `class` outside `slab`, without evicting.
    fn free_slot_elsewhere(
        &mut self,
        classes: &AllocClasses,
        pool: usize,
        class: usize,
        slab: usize,
    ) -> Option<u32> {
        let c = &mut self.pools[pool].classes[class];
        // Slots of the slab being released (freed by evictions during the
        // release) are not room.
        while let Some(id) = c.free.pop() {
            if split(id).0 != slab {
                return Some(id);
            }
        }
        let (s, next) = c.carving?;
        if s == slab {
            return None;
        }
        c.carving = (next + 1 < classes.slots_per_slab(class)).then_some((s, next + 1));
        Some(slot_id(s, next))
    }

    /// Moves the item in slot `from` to the free slot `to` of its class,
    /// keeping its place in the index, its container and its chain.
    fn move_item(&mut self, from: u32, to: u32) {
        let (fs, fi) = split(from);
        let (ts, ti) = split(to);
        let size = self.slabs[fs].slot_size;
        let m = self.slabs[fs].meta[fi];
        let bytes = self.slabs[fs].mem.get(fi * size, (fi + 1) * size).to_vec();
        // SAFETY: under the write lock; `to` is free.
        unsafe { self.slabs[ts].mem.put(ti * size, &bytes) };
        self.slabs[ts].meta[ti] = m;
        self.slabs[fs].meta[fi] = EMPTY;
        // The container: `to` takes `from`'s place.
        let (pool, class) = self.owner(to);
        let Inner { slabs, pools, .. } = self;
        pools[pool].classes[class]
            .mm
            .replace(&mut Metas(slabs), from, to);
        if m.flags & FLAG_CHILD != 0 {
            // The link to it: the parent's chain head or the previous child.
            let parent = m.expiry;
            match self.chains.get(&parent).copied() {
                Some(head) if head == from => {
                    self.chains.insert(parent, to);
                }
                Some(head) => self.relink(head, from, to),
                None => {}
            }
            return;
        }
        // The index: the bucket head or the previous item of the chain.
        let key = self.key_of(to).to_vec();
        let b = (hash(&key) as usize) & (self.buckets.len() - 1);
        if self.head(b) == from {
            self.set_head(b, to);
        } else {
            self.relink(self.head(b), from, to);
        }
        // Its chained items know their parent by slot.
        if let Some(first) = self.chains.remove(&from) {
            self.chains.insert(to, first);
            let mut at = first;
            while at != NIL {
                let (s, i) = split(at);
                self.slabs[s].meta[i].expiry = to;
                at = self.slabs[s].meta[i].hash_next;
            }
        }
    }

    /// In the `hash_next` chain starting at `head`, points the link to
    /// `from` at `to` instead (index chains and chained-item chains).
    fn relink(&mut self, head: u32, from: u32, to: u32) {
        let mut at = head;
        while at != NIL {
            let (s, i) = split(at);
            let m = &mut self.slabs[s].meta[i];
            if m.hash_next == from {
                m.hash_next = to;
                return;
            }
            at = m.hash_next;
        }
    }

    /// Evicts item `id` (with its chain), copying it into `sink` first.
    fn evict(&mut self, id: u32, sink: &mut Option<EvictionSink<'_>>) {
        let key = self.key_of(id).to_vec();
        if let Some(sink) = sink.as_mut() {
            let (s, i) = split(id);
            let slab = &self.slabs[s];
            let m = slab.meta[i];
            let start = i * slab.slot_size + m.key_len as usize;
            sink.out.push(Evicted {
                pool: self.owner(id).0 as u8,
                value: slab.mem.get(start, start + m.val_len as usize).to_vec(),
                expiry: m.expiry,
                last_access: m.last_access,
                clean: m.flags & FLAG_NVM_CLEAN != 0,
                stamp: (sink.stamp)(&key),
                chain: self.chain_values(id),
                key: key.clone(),
            });
        }
        self.unlink(id, &key);
    }

    /// Takes a slot out of its container and frees it (a pinned slot is
    /// freed by its last reader).
    fn release(&mut self, id: u32) {
        let (pool, class) = self.owner(id);
        let Inner { slabs, pools, .. } = self;
        pools[pool].classes[class].mm.remove(&mut Metas(slabs), id);
        pools[pool].stats.items -= 1;
        let (s, i) = split(id);
        self.slabs[s].meta[i] = EMPTY;
        // Pins are taken under the lock, so none can start now.
        if self.slabs[s].pins[i].fetch_or(ZOMBIE, Ordering::AcqRel) == 0 {
            self.free_slot(id);
        }
    }

    /// Puts a slot that is in no container on its class's free list.
    fn free_slot(&mut self, id: u32) {
        let (s, i) = split(id);
        self.slabs[s].pins[i].store(0, Ordering::Release);
        let (pool, class) = self.owner(id);
        self.pools[pool].classes[class].free.push(id);
    }

    /// The values of a parent's chained items, newest first.
    fn chain_values(&self, parent: u32) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut at = self.chains.get(&parent).copied().unwrap_or(NIL);
        while at != NIL {
            let (s, i) = split(at);
            let slab = &self.slabs[s];
            let m = slab.meta[i];
            let start = i * slab.slot_size;
            out.push(slab.mem.get(start, start + m.val_len as usize).to_vec());
            at = m.hash_next;
        }
        out
    }

    /// A free slot of `class` in `pool`: a freed one, a new one of the slab
    /// being carved, a new slab, or the container's victim.
    fn allocate(
        &mut self,
        classes: &AllocClasses,
        pool: usize,
        class: usize,
        sink: &mut Option<EvictionSink<'_>>,
    ) -> Result<u32, AllocError> {
        let c = &mut self.pools[pool].classes[class];
        if let Some(id) = c.free.pop() {
            return Ok(id);
        }
        if let Some((slab, next)) = c.carving {
            let id = slot_id(slab, next);
            c.carving = (next + 1 < classes.slots_per_slab(class)).then_some((slab, next + 1));
            return Ok(id);
        }
        let p = &self.pools[pool];
        if p.stats.slabs < p.stats.slab_budget && self.slabs.len() < self.total_slabs {
            let slab = self.slabs.len();
            let size = classes.sizes()[class] as usize;
            let slots = classes.slots_per_slab(class);
            self.slabs.push(Slab {
                mem: SlabMem::new(self.huge_pages),
                slot_size: size,
                meta: vec![EMPTY; slots],
                pins: pins(slots),
            });
            self.slab_owner.push((pool, class));
            self.pools[pool].stats.slabs += 1;
            self.pools[pool].classes[class].slabs += 1;
            self.pools[pool].classes[class].carving = (slots > 1).then_some((slab, 1));
            return Ok(slot_id(slab, 0));
        }
        self.pools[pool].stats.evict_attempts += 1;
        // A chained item leaves with its parent (and the whole chain); an
        // item being read outside the lock is passed over.
        let slabs = &self.slabs;
        let meta = |id: u32| {
            let (s, i) = split(id);
            slabs[s].meta[i]
        };
        let target = |id: u32| {
            let m = meta(id);
            if m.flags & FLAG_CHILD != 0 {
                m.expiry
            } else {
                id
            }
        };
        let unpinned = |id: u32| {
            let (s, i) = split(target(id));
            slabs[s].pins[i].load(Ordering::Acquire) == 0
        };
        let Some(victim) = self.pools[pool].classes[class].mm.victim_where(
            |id| meta(id).prev,
            unpinned,
            EVICTION_TRIES,
        ) else {
            return Err(AllocError::NoMemory);
        };
        let victim = target(victim);
        self.evict(victim, sink);
        self.pools[pool].stats.evictions += 1;
        Ok(self.pools[pool].classes[class]
            .free
            .pop()
            .expect("the victim's slot was just freed"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::classes::{chained_item_size, item_size};

    fn cache(mb: u64, pools: &[f64], policy: Policy) -> DramCache {
        DramCache::new(&DramConfig {
            size_bytes: mb << 20,
            pool_sizes: pools.to_vec(),
            classes: AllocClasses::geometric(64, 1 << 20, 1.5).unwrap(),
            policy,
            refresh: Refresh {
                secs: 0,
                ..Refresh::default()
            },
            ht_bucket_power: 10,
        })
        .unwrap()
    }

    /// populateItem off: a set takes its slot and length but leaves the
    /// slot's bytes (zero in a new slab); hugePageSize: slabs on huge
    /// pages hold items as any other.
    #[test]
    fn unpopulated_values_and_huge_page_slabs() {
        let c = cache(12, &[1.0], Policy::Lru { ip_spec: 0 }).with_memory(false, false);
        c.set(0, b"k", &[7u8; 300], 0).unwrap();
        let mut out = Vec::new();
        assert_eq!(c.get(b"k", Some(&mut out)), Some(300));
        assert_eq!(out, vec![0u8; 300], "the value was written");
        let c = cache(12, &[1.0], Policy::Lru { ip_spec: 0 }).with_memory(true, true);
        for k in 0..2000u32 {
            c.set(0, &k.to_le_bytes(), &[k as u8; 900], 0).unwrap();
        }
        assert_eq!(c.get(&5u32.to_le_bytes(), Some(&mut out)), Some(900));
        assert_eq!(out, vec![5u8; 900]);
        let g = c.read();
        assert!(g.slabs.iter().all(|s| s.mem.huge));
        assert_eq!(g.slabs[0].mem.ptr.as_ptr() as usize % HUGE_PAGE, 0);
    }

    #[test]
    fn set_get_replace_remove() {
        let c = cache(12, &[1.0], Policy::Lru { ip_spec: 0 });
        assert_eq!(c.get(b"k", None), None);
        c.set(0, b"k", b"hello", 0).unwrap();
        let mut out = Vec::new();
        assert_eq!(c.get(b"k", Some(&mut out)), Some(5));
        assert_eq!(out, b"hello");
        // A longer value moves the key to another class.
        let big = vec![7u8; 500];
        c.set(0, b"k", &big, 0).unwrap();
        assert_eq!(c.get(b"k", Some(&mut out)), Some(500));
        assert_eq!(out, big);
        assert_eq!(c.stats().pools[0].items, 1);
        assert!(c.remove(b"k"));
        assert!(!c.remove(b"k"));
        assert_eq!(c.get(b"k", None), None);
        let s = c.stats();
        assert_eq!((s.gets, s.hits), (4, 2));
        assert_eq!(s.pools[0].items, 0);
        // Too large for any class.
        assert_eq!(
            c.set(0, b"x", &vec![0u8; 2 << 20], 0),
            Err(AllocError::TooLarge)
        );
    }

    #[test]
    fn full_pool_evicts_least_recently_used_of_the_class() {
        // One 4 MiB slab for items (the first holds the slab headers):
        // 4 MiB / 1,120-byte slots, each a 32-byte header, a 7-byte key and
        // a 992-byte value.
        let c = cache(8, &[1.0], Policy::Lru { ip_spec: 0 });
        let class = c.classes().class_for(item_size(7, 992)).unwrap();
        assert_eq!(c.classes().sizes()[class], 1120);
        let slots = c.classes().slots_per_slab(class);
        let value = vec![1u8; 1000 - 8];
        for i in 0..slots {
            c.set(0, format!("key{i:04}").as_bytes(), &value, 0)
                .unwrap();
        }
        assert_eq!(c.stats().pools[0].evictions, 0);
        // Touch key0000 so key0001 is the least recently used.
        assert!(c.get(b"key0000", None).is_some());
        c.set(0, b"new00000", &value, 0).unwrap();
        let s = c.stats();
        assert_eq!(s.pools[0].evictions, 1);
        assert_eq!(s.pools[0].items as usize, slots);
        assert!(c.get(b"key0000", None).is_some());
        assert!(c.get(b"key0001", None).is_none());
        assert!(c.get(b"new00000", None).is_some());
        // Another class cannot get memory: the only slab is taken.
        assert_eq!(c.set(0, b"small", b"v", 0), Err(AllocError::NoMemory));
    }

    #[test]
    fn pools_get_their_share_of_slabs() {
        // 11 slabs, one for the headers: 10 for the pools.
        let c = cache(44, &[0.3, 0.7], Policy::Lru { ip_spec: 0 });
        let s = c.stats();
        assert_eq!((s.pools[0].slab_budget, s.pools[1].slab_budget), (3, 7));
        let value = vec![0u8; 4000];
        for i in 0..20_000 {
            let key = format!("k{i}");
            c.set(i % 2, key.as_bytes(), &value, 0).unwrap();
        }
        let s = c.stats();
        assert_eq!(s.pools[0].slabs, 3);
        assert_eq!(s.pools[1].slabs, 7);
        assert!(s.pools[0].evictions > 0 && s.pools[1].evictions > 0);
        // Pool 1 holds about 7/3 as many items.
        let ratio = s.pools[1].items as f64 / s.pools[0].items as f64;
        assert!((2.0..2.7).contains(&ratio), "{ratio}");
    }

    /// As CacheLib's slab allocator: the first slab of the memory holds the
    /// slab headers, and a pool gets its ratio of the rest in whole slabs.
    #[test]
    fn slab_headers_take_the_first_slab() {
        let e = DramCache::new(&DramConfig {
            size_bytes: 4 << 20,
            pool_sizes: vec![1.0],
            classes: AllocClasses::geometric(64, 1 << 20, 1.5).unwrap(),
            policy: Policy::Lru { ip_spec: 0 },
            refresh: Refresh::default(),
            ht_bucket_power: 10,
        })
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("leaves no slab for items"), "{e}");
        // 10 slabs, 9 for items: 0.3 x 36 MiB = 10.8 MiB holds 2 slabs,
        // 0.7 x 36 MiB = 25.2 MiB 6.
        let c = cache(40, &[0.3, 0.7], Policy::Lru { ip_spec: 0 });
        let s = c.stats();
        assert_eq!((s.pools[0].slab_budget, s.pools[1].slab_budget), (2, 6));
        let c = cache(8, &[1.0], Policy::Lru { ip_spec: 0 });
        assert_eq!(c.stats().pools[0].slab_budget, 1);
    }

    #[test]
    fn hash_chains_survive_collisions_and_evictions() {
        // 4 buckets for thousands of items: long collision chains.
        let c = DramCache::new(&DramConfig {
            size_bytes: 8 << 20,
            pool_sizes: vec![1.0],
            classes: AllocClasses::geometric(64, 1 << 20, 1.5).unwrap(),
            policy: Policy::TwoQ {
                hot_pct: 20,
                cold_pct: 30,
            },
            refresh: Refresh::default(),
            ht_bucket_power: 2,
        })
        .unwrap();
        let value = vec![3u8; 2000];
        let class = c.classes().class_for(item_size(5, 2000)).unwrap();
        let slots = c.classes().slots_per_slab(class);
        for i in 0..slots * 3 {
            c.set(0, format!("{i}").as_bytes(), &value, 0).unwrap();
        }
        let s = c.stats();
        assert_eq!(s.pools[0].items as usize, slots);
        assert_eq!(s.pools[0].evictions as usize, slots * 2);
        // Exactly the items held are found.
        let found = (0..slots * 3)
            .filter(|i| c.get(format!("{i}").as_bytes(), None).is_some())
            .count();
        assert_eq!(found, slots);
    }

    #[test]
    fn footprint_counts_every_item() {
        let c = cache(12, &[1.0], Policy::Lru { ip_spec: 0 });
        c.set(0, b"abc", &[0u8; 60], 0).unwrap();
        c.set(0, b"defg", &[0u8; 100], 0).unwrap();
        let f = c.footprint();
        assert_eq!(f.items, 2);
        assert_eq!(f.key_value_bytes, 63 + 104);
        // With CacheLib's 32-byte header, 95 bytes fit the 96-byte class,
        // 136 the 144-byte one.
        assert_eq!(f.slot_bytes, 96 + 144);
        assert_eq!(
            f.metadata_bytes, 64,
            "2 x (28 B of metadata + a 4-byte pin count)"
        );
        assert_eq!(f.index_bytes, 4 << 10);
        assert!((f.bookkeeping_per_item() - (64.0 + 4096.0) / 2.0).abs() < 1e-9);
    }

    #[test]
    fn per_item_metadata_is_28_bytes() {
        // Beside each item's key and value: this, plus its share of the
        // 4-byte hash buckets and its slot's rounding (CacheLib: a ~31-byte
        // header in the slot, plus a 4-byte bucket).
        assert_eq!(std::mem::size_of::<Meta>(), 28);
    }

    #[test]
    fn expired_items_miss() {
        let c = cache(8, &[1.0], Policy::Lru { ip_spec: 0 });
        c.set(0, b"a", b"1", 1).unwrap();
        c.set(0, b"b", b"2", 0).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2100));
        assert_eq!(c.get(b"a", None), None);
        assert_eq!(c.get(b"b", None), Some(1));
        assert_eq!(c.stats().expired, 1);
    }

    #[test]
    fn chained_items_live_and_leave_with_their_parent() {
        let c = cache(16, &[1.0], Policy::Lru { ip_spec: 0 });
        assert_eq!(c.add_chained(b"p", b"x", None), Err(AllocError::NoParent));
        c.set(0, b"p", b"parent", 0).unwrap();
        c.add_chained(b"p", b"first", None).unwrap();
        c.add_chained(b"p", &[9u8; 3000], None).unwrap();
        // Newest first, as CacheLib's chains.
        assert_eq!(
            c.chain(b"p").unwrap(),
            vec![vec![9u8; 3000], b"first".to_vec()]
        );
        assert_eq!(c.stats().pools[0].items, 3);
        let mut out = Vec::new();
        assert_eq!(c.get(b"p", Some(&mut out)), Some(6));
        assert_eq!(out, b"parent");
        // Replacing the parent drops its chain.
        c.set(0, b"p", b"new", 0).unwrap();
        assert_eq!(c.chain(b"p").unwrap(), Vec::<Vec<u8>>::new());
        assert_eq!(c.stats().pools[0].items, 1);
        c.add_chained(b"p", b"again", None).unwrap();
        assert!(c.remove(b"p"));
        assert_eq!(c.stats().pools[0].items, 0);
        assert_eq!(c.chain(b"p"), None);
        // The freed slots are reused: fill and empty a few times.
        for round in 0..3 {
            for i in 0..200 {
                let k = format!("k{i}");
                c.set(0, k.as_bytes(), b"v", 0).unwrap();
                c.add_chained(k.as_bytes(), &[round as u8; 100], None)
                    .unwrap();
            }
            for i in 0..200 {
                assert!(c.remove(format!("k{i}").as_bytes()));
            }
            assert_eq!(c.stats().pools[0].items, 0, "round {round}");
        }
    }

    #[test]
    fn evicting_a_chained_item_evicts_its_parent_and_chain() {
        // One 4 MiB slab per class; chained items of 1000 bytes fill their
        // class, then the next one must evict a whole chain.
        let c = cache(16, &[1.0], Policy::Lru { ip_spec: 0 });
        let class = c.classes().class_for(chained_item_size(1000)).unwrap();
        let per_slab = c.classes().slots_per_slab(class);
        let mut evicted = Vec::new();
        let stamp = |_: &[u8]| 7u64;
        let mut n = 0;
        while evicted.is_empty() {
            let k = format!("parent{n:05}");
            c.set(0, k.as_bytes(), b"small", 0).unwrap();
            for j in 0..4u8 {
                let r = c.add_chained(
                    k.as_bytes(),
                    &[j; 1000],
                    Some(EvictionSink {
                        out: &mut evicted,
                        stamp: &stamp,
                    }),
                );
                if r.is_err() {
                    break;
                }
            }
            n += 1;
            assert!(n < 10 * per_slab, "no eviction");
        }
        let e = &evicted[0];
        // The oldest parent went, with its whole chain, newest first.
        assert_eq!(e.key, b"parent00000");
        assert_eq!(e.value, b"small");
        assert_eq!(
            e.chain,
            (0..4u8).rev().map(|j| vec![j; 1000]).collect::<Vec<_>>()
        );
        assert_eq!(e.stamp, 7);
        assert_eq!(c.get(b"parent00000", None), None);
        assert!(
            c.get(format!("parent{:05}", n - 1).as_bytes(), None)
                .is_some()
        );
    }

    /// Three slabs: two for 1000-byte items (the second half empty after
    /// deletes), one for 40-byte items. Returns the 1000-byte keys kept.
    fn two_classes(c: &DramCache) -> Vec<String> {
        let big = c.classes().class_for(item_size(8, 990)).unwrap();
        let per_slab = c.classes().slots_per_slab(big);
        let mut kept = Vec::new();
        for i in 0..per_slab + per_slab / 2 {
            let k = format!("big{i:05}");
            c.set(0, k.as_bytes(), &vec![(i % 251) as u8; 990], 0)
                .unwrap();
            if i % 2 == 0 {
                kept.push(k);
            }
        }
        for i in 0..per_slab + per_slab / 2 {
            if i % 2 == 1 {
                assert!(c.remove(format!("big{i:05}").as_bytes()));
            }
        }
        for i in 0..100 {
            c.set(0, format!("s{i}").as_bytes(), b"small value", 0)
                .unwrap();
        }
        kept
    }

    fn check_big(c: &DramCache, kept: &[String]) -> usize {
        let mut out = Vec::new();
        let mut found = 0;
        for k in kept {
            let i: usize = k[3..].parse().unwrap();
            if c.get(k.as_bytes(), Some(&mut out)).is_some() {
                assert_eq!(out, vec![(i % 251) as u8; 990], "{k}");
                found += 1;
            }
        }
        found
    }

    #[test]
    fn a_released_slab_moves_its_items_when_its_class_has_room() {
        let c = cache(16, &[1.0], Policy::Lru { ip_spec: 0 });
        let kept = two_classes(&c);
        let big = c.classes().class_for(item_size(8, 990)).unwrap();
        let small = c.classes().class_for(item_size(3, 11)).unwrap();
        // A parent with a chain among them.
        c.add_chained(kept[0].as_bytes(), &[1u8; 900], None)
            .unwrap();
        let cfg = RebalanceConfig {
            strategy: Rebalance::Random,
            min_slabs: 1,
            diff_ratio: 0.1,
            move_items: true,
        };
        // Random draws: the only class above min_slabs gives, and the
        // receiver is the small class.
        let mut draw = |n: usize| if n > 1 { small.min(n - 1) } else { 0 };
        assert_eq!(c.rebalance(&cfg, &mut draw, None), 1);
        let s = c.stats();
        assert_eq!(s.release.slabs_released, 1);
        assert!(s.release.move_attempts > 0);
        assert_eq!(
            s.release.move_successes, s.release.move_attempts,
            "{:?}",
            s.release
        );
        assert_eq!(s.release.eviction_attempts, 0);
        assert_eq!(
            check_big(&c, &kept),
            kept.len(),
            "every item survived the move"
        );
        assert_eq!(c.chain(kept[0].as_bytes()).unwrap(), vec![vec![1u8; 900]]);
        // The small class has a second slab now: thousands more fit without
        // evicting.
        let per_slab = c.classes().slots_per_slab(small);
        for i in 0..per_slab + 100 {
            c.set(0, format!("t{i}").as_bytes(), b"small value", 0)
                .unwrap();
        }
        assert_eq!(c.stats().pools[0].evictions, 0);
        let _ = big;
    }

    #[test]
    fn a_released_slab_evicts_without_move_and_strategies_pick_by_measure() {
        let c = cache(16, &[1.0], Policy::Lru { ip_spec: 0 });
        let kept = two_classes(&c);
        let small = c.classes().class_for(item_size(3, 11)).unwrap();
        let big = c.classes().class_for(item_size(8, 990)).unwrap();
        // Hits: only the small class is read.
        for _ in 0..10 {
            for i in 0..100 {
                assert!(c.get(format!("s{i}").as_bytes(), None).is_some());
            }
        }
        let hits = RebalanceConfig {
            strategy: Rebalance::Hits,
            min_slabs: 1,
            diff_ratio: 0.1,
            move_items: false,
        };
        let mut never = |_: usize| -> usize { unreachable!("no random draw") };
        let mut evicted = Vec::new();
        let stamp = |_: &[u8]| 0u64;
        let n = c.rebalance(
            &hits,
            &mut never,
            Some(EvictionSink {
                out: &mut evicted,
                stamp: &stamp,
            }),
        );
        assert_eq!(n, 1);
        let s = c.stats();
        assert_eq!(s.release.move_attempts, 0);
        assert!(s.release.eviction_successes > 0);
        assert_eq!(evicted.len() as u64, s.release.eviction_successes);
        // Hit counts start over: with no reads since, nothing moves.
        assert_eq!(c.rebalance(&hits, &mut never, None), 0);
        // Tail age: the big class's victim is no older than the small
        // one's here (all written in the same second), so nothing moves.
        let tail = RebalanceConfig {
            strategy: Rebalance::TailAge,
            ..hits
        };
        assert_eq!(c.rebalance(&tail, &mut never, None), 0);
        let left = check_big(&c, &kept);
        assert_eq!(left + evicted.len(), kept.len());
        assert_eq!(c.class_items(0)[big], left);
        // Now the big class was read and the small one not: the slab
        // goes back.
        assert_eq!(c.rebalance(&hits, &mut never, None), 1);
        assert_eq!(c.stats().release.slabs_released, 2);
        for i in 0..100 {
            assert!(c.get(format!("s{i}").as_bytes(), None).is_some(), "s{i}");
        }
        let _ = small;
    }

    impl DramCache {
        /// Pins `key`'s slot as a get of a large value does.
        fn pin(&self, key: &[u8]) -> Option<Pinned<'_>> {
            let g = self.read();
            let id = g.find(key)?;
            Some(self.pin_slot(&g, id))
        }

        /// Every slot is linked, free or (with `zombies`) pinned after
        /// leaving; the counters match the index. Returns the zombies.
        fn check(&self) -> usize {
            let g = self.read();
            let mut zombies = 0;
            let mut linked = 0u64;
            for b in 0..g.buckets.len() {
                let mut at = g.head(b);
                while at != NIL {
                    linked += 1;
                    let (s, i) = split(at);
                    at = g.slabs[s].meta[i].hash_next;
                }
            }
            let items: u64 = g.pools.iter().map(|p| p.stats.items).sum();
            assert_eq!(items, linked, "items counted vs in the index");
            for (p, pool) in g.pools.iter().enumerate() {
                for (c, class) in pool.classes.iter().enumerate() {
                    let mut free = class.free.clone();
                    free.sort_unstable();
                    free.dedup();
                    assert_eq!(free.len(), class.free.len(), "a slot freed twice");
                    let (mut carved, mut held) = (0, 0);
                    for s in 0..g.slabs.len() {
                        if g.slab_owner[s] != (p, c) {
                            continue;
                        }
                        let n = match class.carving {
                            Some((cs, next)) if cs == s => next,
                            _ => g.slabs[s].meta.len(),
                        };
                        carved += n;
                        for i in 0..n {
                            let pin = g.slabs[s].pins[i].load(Ordering::Acquire);
                            if pin & ZOMBIE == 0 {
                                assert_eq!(pin, 0, "a pin left behind");
                            }
                            held += usize::from(pin != 0);
                        }
                    }
                    assert_eq!(
                        carved,
                        class.mm.len() + class.free.len() + held,
                        "pool {p} class {c}: slots lost"
                    );
                    zombies += held;
                }
            }
            zombies
        }
    }

    fn stamped(key: u32, version: u32, len: usize) -> Vec<u8> {
        let mut v = vec![(key ^ version) as u8; len];
        v[..4].copy_from_slice(&key.to_le_bytes());
        v[4..8].copy_from_slice(&version.to_le_bytes());
        v
    }

    fn check_stamped(key: u32, v: &[u8]) {
        assert_eq!(u32::from_le_bytes(v[..4].try_into().unwrap()), key);
        let version = u32::from_le_bytes(v[4..8].try_into().unwrap());
        let fill = (key ^ version) as u8;
        assert!(v[8..].iter().all(|&b| b == fill), "key {key}: torn value");
    }

    #[test]
    fn a_pinned_item_outlives_its_replacement_and_eviction_skips_it() {
        let c = cache(8, &[1.0], Policy::Lru { ip_spec: 0 });
        let class = c.classes().class_for(item_size(6, 19_990)).unwrap();
        let slots = c.classes().slots_per_slab(class);
        for k in 0..slots as u32 {
            c.set(0, format!("k{k:03}").as_bytes(), &stamped(k, 0, 19_990), 0)
                .unwrap();
        }
        // k000 is the eviction victim; pinned, it is passed over.
        let p = c.pin(b"k000").unwrap();
        c.set(0, b"new", &stamped(999, 0, 19_990), 0).unwrap();
        assert!(c.get(b"k000", None).is_some());
        assert!(c.get(b"k001", None).is_none(), "the next one went");
        // Replaced while pinned: readers see the new value, the pinned
        // copy stays whole, and the slot is not reused while pinned.
        c.set(0, b"k000", &stamped(0, 1, 19_990), 0).unwrap();
        let mut out = Vec::new();
        c.get(b"k000", Some(&mut out)).unwrap();
        assert_eq!(out, stamped(0, 1, 19_990));
        for k in 1000..1000 + 2 * slots as u32 {
            c.set(0, format!("k{k}").as_bytes(), &stamped(k, 0, 19_990), 0)
                .unwrap();
        }
        assert_eq!(p.bytes(), &stamped(0, 0, 19_990)[..]);
        assert_eq!(c.check(), 1, "the old slot waits for its reader");
        drop(p);
        assert_eq!(c.check(), 0, "the last reader freed it");
        // Deleted while pinned: the same.
        let last = 1000 + 2 * slots as u32 - 1;
        let key = format!("k{last}");
        let p = c.pin(key.as_bytes()).unwrap();
        assert!(c.remove(key.as_bytes()));
        assert_eq!(c.check(), 1);
        check_stamped(last, p.bytes());
        drop(p);
        assert_eq!(c.check(), 0);
    }

    #[test]
    fn unlocked_copies_under_concurrent_sets_gets_deletes_and_rebalancing() {
        use rand::{Rng, SeedableRng};
        // 10 slabs for 1000 keys of 5-60 KB values (~32 MB): constant
        // eviction, and slabs moving between classes.
        let c = cache(40, &[1.0], Policy::Lru { ip_spec: 0 });
        let stop = std::sync::atomic::AtomicBool::new(false);
        let released = std::thread::scope(|s| {
            let workers: Vec<_> = (0..4u64)
                .map(|t| {
                    let c = &c;
                    s.spawn(move || {
                        let mut rng = rand::rngs::SmallRng::seed_from_u64(t);
                        let mut out = Vec::new();
                        let mut version = 0u32;
                        for _ in 0..20_000 {
                            let k: u32 = rng.random_range(0..1000);
                            let key = format!("key{k}");
                            match rng.random_range(0..10) {
                                0..=3 => {
                                    version += 1;
                                    let len = rng.random_range(5_000..60_000);
                                    let _ = c.set(0, key.as_bytes(), &stamped(k, version, len), 0);
                                }
                                4 => {
                                    c.remove(key.as_bytes());
                                }
                                _ => {
                                    if c.get(key.as_bytes(), Some(&mut out)).is_some() {
                                        check_stamped(k, &out);
                                    }
                                }
                            }
                        }
                    })
                })
                .collect();
            let rebalancer = s.spawn(|| {
                let cfg = RebalanceConfig {
                    strategy: Rebalance::Random,
                    min_slabs: 0,
                    diff_ratio: 0.0,
                    move_items: true,
                };
                let mut rng = rand::rngs::SmallRng::seed_from_u64(99);
                let mut draw = |n: usize| rng.random_range(0..n);
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    n += c.rebalance(&cfg, &mut draw, None);
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                n
            });
            for w in workers {
                w.join().unwrap();
            }
            stop.store(true, Ordering::Relaxed);
            rebalancer.join().unwrap()
        });
        assert!(released > 0, "rebalancing moved no slab");
        assert_eq!(c.check(), 0);
        let s = c.stats();
        assert!(s.pools[0].evictions > 0);
        assert!(s.hits > 0);
    }
}
