//! The hybrid cache: DRAM in front of the NVM tier, as CacheLib's
//! `CacheAllocator` with an `NvmCache`.
//!
//! - A get that misses DRAM looks the key up in NVM and promotes a hit into
//!   DRAM, marked clean (NVM still holds the same value).
//! - Items evicted from DRAM are offered to NVM, except clean ones (not
//!   rewritten), expired ones, ones whose remaining TTL is under
//!   `memoryOnlyTTL` and ones idle longer than
//!   `nvmAdmissionRetentionTimeThreshold`; the admission policy may turn
//!   the rest away.
//! - A set or delete removes the key's NVM copy.
//!
//! Races: every operation that changes a key (set, delete) and every NVM
//! lookup with its promotion holds the key's stripe lock, and a change
//! bumps the stripe's sequence number last. An eviction records that
//! number (under the DRAM lock) and its NVM insert, done later under the
//! stripe lock, is abandoned when the number moved: a newer value or a
//! delete won, and the stale value never reaches NVM (counted as
//! `AbortsFromDel`). Concurrent misses of one key wait for each other;
//! the later ones find the promoted item in DRAM (counted as `Coalesced`).

use super::classes::AllocClasses;
use super::dram::{AllocError, DramCache, Evicted, EvictionSink, RebalanceConfig, SetMode};
use super::stats::Stats;
pub use super::stats::{HybridCounters, NvmSide};
use crate::nvm::Navy;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

const STRIPES: usize = 1024;

/// Filters on what DRAM evictions NVM takes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HybridOptions {
    /// Items whose remaining TTL is under this many seconds stay in DRAM
    /// (`memoryOnlyTTL`; 0 = off).
    pub memory_only_ttl: u32,
    /// Items idle for longer than this many seconds are not written
    /// (`nvmAdmissionRetentionTimeThreshold`; 0 = off).
    pub retention_threshold: u32,
    /// An item goes to NVM with its allocation's usable size (the slot
    /// less header and key), as CacheLib stores it unless
    /// `truncateItemToOriginalAllocSizeInNvm`; off: with its own size.
    pub pad_to_alloc_size: bool,
}

/// Why an eviction stays out of NVM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reject {
    Clean,
    Expiry,
    Retention,
}

impl HybridOptions {
    /// Whether `e`, evicted at `now`, stays out of NVM, and why.
    fn reject(&self, e: &Evicted, now: u32) -> Option<Reject> {
        if e.clean {
            return Some(Reject::Clean);
        }
        if e.expiry != 0
            && (e.expiry <= now
                || (self.memory_only_ttl > 0 && e.expiry - now < self.memory_only_ttl))
        {
            return Some(Reject::Expiry);
        }
        if self.retention_threshold > 0
            && now.saturating_sub(e.last_access) > self.retention_threshold
        {
            return Some(Reject::Retention);
        }
        None
    }
}

#[derive(Default)]
struct Counters {
    nvm_gets: AtomicU64,
    nvm_get_misses: AtomicU64,
    coalesced: AtomicU64,
    puts: AtomicU64,
    put_errors: AtomicU64,
    aborts_from_del: AtomicU64,
    rejects_expiry: AtomicU64,
    rejects_clean: AtomicU64,
    rejects_retention: AtomicU64,
    nvm_deletes: AtomicU64,
    nvm_lookup_errors: AtomicU64,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// DRAM with an optional NVM tier behind it.
pub struct Cache {
    dram: DramCache,
    nvm: Option<Navy>,
    opts: HybridOptions,
    stripes: Vec<Mutex<()>>,
    seqs: Vec<AtomicU64>,
    counters: Counters,
    fatal: Mutex<Option<String>>,
    /// With `--report_api_latency`: nanoseconds per find (upstream's
    /// `cacheFindLatency_`).
    find_latency: std::sync::OnceLock<crate::latency::Recorder>,
    /// `writeAmpDeviceList`'s NAND bytes written.
    nand: std::sync::OnceLock<crate::nand::NandCounter>,
}

fn stripe_of(key: &[u8]) -> usize {
    (crate::nvm::key_hash(key) >> 20) as usize % STRIPES
}

/// An NVM I/O error for the run's failure line: a full device is named as
/// such, anything else after `what`.
fn describe_error(what: &str, e: &std::io::Error) -> String {
    let what = if crate::nvm::device::is_disk_full(e) {
        "the NVM device is full"
    } else {
        what
    };
    format!("{what}: {e}")
}

/// An item as NVM stores it: its pool, the number of chained items, the
/// value's length and the value, then each chained value with its length
/// (lengths u32, little-endian).
fn frame(pool: u8, value: &[u8], chain: &[Vec<u8>], pad: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(
        9 + value.len() + pad + chain.iter().map(|c| c.len() + 4).sum::<usize>(),
    );
    v.push(pool);
    v.extend_from_slice(&(chain.len() as u32).to_le_bytes());
    v.extend_from_slice(&(value.len() as u32).to_le_bytes());
    v.extend_from_slice(value);
    for c in chain {
        v.extend_from_slice(&(c.len() as u32).to_le_bytes());
        v.extend_from_slice(c);
    }
    // The rest of the allocation, stored and read back but not part of the
    // value (CacheLib's untruncated NVM items).
    v.resize(v.len() + pad, 0);
    v
}

/// The bytes CacheLib writes to NVM beyond an item's values when it does
/// not truncate items (`truncateItemToOriginalAllocSizeInNvm` off): the
/// rest of each allocation, the parent's (its slot less the header, the
/// key and the value) and each chained item's (its slot less the chained
/// item's header and value).
fn nvm_padding(classes: &AllocClasses, key: usize, value: usize, chain: &[Vec<u8>]) -> usize {
    let rest = |needed: usize, used: usize| {
        classes
            .class_for(needed)
            .map_or(0, |c| (classes.sizes()[c] as usize).saturating_sub(used))
    };
    let key_bytes = key + if key > 255 { 4 } else { 0 };
    let parent = rest(
        super::classes::item_size(key, value),
        super::classes::ITEM_HEADER + key_bytes + value,
    );
    let chained: usize = chain
        .iter()
        .map(|c| {
            let size = super::classes::chained_item_size(c.len());
            rest(
                size,
                size - c.len().max(super::classes::MIN_VALUE) + c.len(),
            )
        })
        .sum();
    parent + chained
}

/// A framed item's parts: pool, value, chained values.
type Unframed<'a> = (u8, &'a [u8], Vec<&'a [u8]>);

/// The parts of a framed item; None when the bytes are not a whole frame.
fn unframe(b: &[u8]) -> Option<Unframed<'_>> {
    let u32_at = |at: usize| -> Option<usize> {
        Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?) as usize)
    };
    let pool = *b.first()?;
    let n = u32_at(1)?;
    let len = u32_at(5)?;
    let value = b.get(9..9 + len)?;
    let mut at = 9 + len;
    let mut chain = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        let l = u32_at(at)?;
        chain.push(b.get(at + 4..at + 4 + l)?);
        at += 4 + l;
    }
    (at <= b.len()).then_some((pool, value, chain))
}

impl Cache {
    pub fn new(dram: DramCache, nvm: Option<Navy>, opts: HybridOptions) -> Cache {
        Cache {
            dram,
            nvm,
            opts,
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            seqs: (0..STRIPES).map(|_| AtomicU64::new(0)).collect(),
            counters: Counters::default(),
            fatal: Mutex::new(None),
            find_latency: std::sync::OnceLock::new(),
            nand: std::sync::OnceLock::new(),
        }
    }

    /// A DRAM-only cache.
    pub fn dram_only(dram: DramCache) -> Cache {
        Cache::new(dram, None, HybridOptions::default())
    }

    pub fn dram(&self) -> &DramCache {
        &self.dram
    }

    pub fn nvm(&self) -> Option<&Navy> {
        self.nvm.as_ref()
    }

    fn lock(&self, key: &[u8]) -> std::sync::MutexGuard<'_, ()> {
        self.stripes[stripe_of(key)]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn seq(&self, key: &[u8]) -> u64 {
        self.seqs[stripe_of(key)].load(Ordering::SeqCst)
    }

    fn changed(&self, key: &[u8]) {
        self.seqs[stripe_of(key)].fetch_add(1, Ordering::SeqCst);
    }

    /// Looks `key` up in DRAM, then NVM; copies the value into `out`.
    pub fn get(&self, key: &[u8], out: Option<&mut Vec<u8>>) -> Option<usize> {
        self.lookup(key, out, false)
    }

    /// [`HybridCache::get`] for an item about to be changed in place
    /// (CacheLib's `findToWrite`): a DRAM hit is recorded as a write
    /// access, so it promotes only under `lruUpdateOnWrite`.
    pub fn find_to_write(&self, key: &[u8], out: Option<&mut Vec<u8>>) -> Option<usize> {
        self.lookup(key, out, true)
    }

    fn lookup(&self, key: &[u8], mut out: Option<&mut Vec<u8>>, write: bool) -> Option<usize> {
        let found = if write {
            self.dram.find_to_write(key, out.as_deref_mut())
        } else {
            self.dram.get(key, out.as_deref_mut())
        };
        if let Some(n) = found {
            return Some(n);
        }
        let nvm = self.nvm.as_ref()?;
        let mut evicted = Vec::new();
        let found = {
            let _g = self.lock(key);
            if let Some(n) = self.dram.get_uncounted(key, out.as_deref_mut()) {
                bump(&self.counters.coalesced);
                return Some(n);
            }
            bump(&self.counters.nvm_gets);
            let now = self.dram.now();
            let looked_up = nvm.lookup_ex(key, now);
            let item = match &looked_up {
                Ok(Some((framed, expiry))) => unframe(framed)
                    .map(|(pool, value, chain)| (pool, value, chain, *expiry))
                    .ok_or(()),
                Ok(None) => Err(()),
                Err(_) => {
                    bump(&self.counters.nvm_lookup_errors);
                    Err(())
                }
            };
            match item {
                Ok((pool, value, chain, expiry)) => {
                    let pool = (pool as usize).min(self.dram.pool_count().saturating_sub(1));
                    // As CacheLib's promotion, the item keeps its expiry
                    // time (the engines already refused expired items).
                    let ttl = if expiry == 0 {
                        0
                    } else {
                        expiry.saturating_sub(now).max(1)
                    };
                    let stamp = |k: &[u8]| self.seq(k);
                    let promoted = self.dram.set_ex(
                        pool,
                        key,
                        value,
                        ttl,
                        SetMode::Promote,
                        Some(EvictionSink {
                            out: &mut evicted,
                            stamp: &stamp,
                        }),
                    );
                    if promoted == Ok(true) && !chain.is_empty() {
                        // The chain comes back with its parent, oldest
                        // first so it keeps its order; the parent stays a
                        // clean copy of NVM's item.
                        let complete = chain.iter().rev().all(|c| {
                            self.dram
                                .add_chained_ex(
                                    key,
                                    c,
                                    true,
                                    Some(EvictionSink {
                                        out: &mut evicted,
                                        stamp: &stamp,
                                    }),
                                )
                                .is_ok()
                        });
                        if !complete {
                            // A partial chain must not pass for NVM's item.
                            self.dram.remove(key);
                        }
                    }
                    if let Some(out) = out {
                        out.clear();
                        out.extend_from_slice(value);
                    }
                    Some(value.len())
                }
                Err(()) => {
                    bump(&self.counters.nvm_get_misses);
                    None
                }
            }
        };
        self.offer(evicted);
        found
    }

    /// Stores `key` in `pool` (DRAM), dropping NVM's older copy.
    pub fn set(
        &self,
        pool: usize,
        key: &[u8],
        value: &[u8],
        ttl_secs: u32,
    ) -> Result<(), AllocError> {
        self.change(key, |sink| {
            self.dram
                .set_ex(pool, key, value, ttl_secs, SetMode::Replace, sink)
                .map(|_| ())
        })
    }

    /// Runs a DRAM change of `key` the way every change goes with NVM
    /// behind: under the key's stripe lock, with evictions recorded; on
    /// success NVM's copy is dropped and the stripe's sequence moves; the
    /// evictions are offered to NVM after the lock.
    fn change(
        &self,
        key: &[u8],
        f: impl FnOnce(Option<EvictionSink<'_>>) -> Result<(), AllocError>,
    ) -> Result<(), AllocError> {
        let Some(nvm) = &self.nvm else {
            return f(None);
        };
        let mut evicted = Vec::new();
        let r = {
            let _g = self.lock(key);
            let stamp = |k: &[u8]| self.seq(k);
            let r = f(Some(EvictionSink {
                out: &mut evicted,
                stamp: &stamp,
            }));
            if r.is_ok() {
                self.nvm_remove(nvm, key);
                self.changed(key);
            }
            r
        };
        self.offer(evicted);
        r
    }

    fn nvm_remove(&self, nvm: &Navy, key: &[u8]) -> bool {
        bump(&self.counters.nvm_deletes);
        match nvm.remove(key) {
            Ok(found) => found,
            Err(e) => {
                self.note_error(describe_error("removing a key from NVM failed", &e));
                false
            }
        }
    }

    /// Adds a chained item to `key`'s item; the NVM copy of the item (now
    /// out of date) is dropped.
    pub fn add_chained(&self, key: &[u8], value: &[u8]) -> Result<(), AllocError> {
        self.change(key, |sink| self.dram.add_chained(key, value, sink))
    }

    /// One pool rebalancing round (see [`DramCache::rebalance`]); evicted
    /// items go to NVM like any eviction.
    pub fn rebalance(&self, cfg: &RebalanceConfig, draw: &mut dyn FnMut(usize) -> usize) -> u64 {
        if self.nvm.is_none() {
            return self.dram.rebalance(cfg, draw, None);
        }
        let mut evicted = Vec::new();
        let stamp = |k: &[u8]| self.seq(k);
        let n = self.dram.rebalance(
            cfg,
            draw,
            Some(EvictionSink {
                out: &mut evicted,
                stamp: &stamp,
            }),
        );
        self.offer(evicted);
        n
    }

    /// Removes `key` from DRAM and NVM; true if either had it.
    pub fn remove(&self, key: &[u8]) -> bool {
        let Some(nvm) = &self.nvm else {
            return self.dram.remove(key);
        };
        let _g = self.lock(key);
        let in_dram = self.dram.remove(key);
        let in_nvm = self.nvm_remove(nvm, key);
        self.changed(key);
        in_dram || in_nvm
    }

    /// Hands DRAM's evictions to NVM.
    fn offer(&self, evicted: Vec<Evicted>) {
        let Some(nvm) = &self.nvm else { return };
        if evicted.is_empty() {
            return;
        }
        let now = self.dram.now();
        for e in evicted {
            match self.opts.reject(&e, now) {
                Some(Reject::Clean) => {
                    bump(&self.counters.rejects_clean);
                    continue;
                }
                Some(Reject::Expiry) => {
                    bump(&self.counters.rejects_expiry);
                    continue;
                }
                Some(Reject::Retention) => {
                    bump(&self.counters.rejects_retention);
                    continue;
                }
                None => {}
            }
            bump(&self.counters.puts);
            let _g = self.lock(&e.key);
            if self.seq(&e.key) != e.stamp {
                bump(&self.counters.aborts_from_del);
                continue;
            }
            let pad = if self.opts.pad_to_alloc_size {
                nvm_padding(self.dram.classes(), e.key.len(), e.value.len(), &e.chain)
            } else {
                0
            };
            match nvm.insert(
                &e.key,
                &frame(e.pool, &e.value, &e.chain, pad),
                e.expiry,
                rand::random::<f64>(),
            ) {
                Ok(true) => {}
                Ok(false) => bump(&self.counters.put_errors),
                Err(err) => {
                    bump(&self.counters.put_errors);
                    self.note_error(
                        nvm.fatal()
                            .unwrap_or_else(|| describe_error("writing to NVM failed", &err)),
                    );
                }
            }
        }
    }

    fn note_error(&self, msg: String) {
        self.fatal
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(msg);
    }

    /// The first NVM failure (e.g. the device is full), if any: the run
    /// should stop and report it.
    pub fn fatal(&self) -> Option<String> {
        self.fatal
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .or_else(|| self.nvm.as_ref().and_then(|n| n.fatal()))
    }

    /// DRAM's counters, with the NVM side when there is one.
    /// Times finds and allocations from now on (`--report_api_latency`);
    /// finds are timed by the caller with [`Cache::record_find`].
    pub fn enable_api_latency(&self) {
        let _ = self.find_latency.set(crate::latency::Recorder::new());
        self.dram.enable_api_latency();
    }

    /// Reports the NAND bytes written this counter reads.
    pub fn set_nand(&self, n: crate::nand::NandCounter) {
        let _ = self.nand.set(n);
    }

    /// Whether finds are timed.
    pub fn api_latency_enabled(&self) -> bool {
        self.find_latency.get().is_some()
    }

    /// Records a find that started at `t0`.
    pub fn record_find(&self, t0: std::time::Instant) {
        if let Some(r) = self.find_latency.get() {
            r.record(u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX));
        }
    }

    pub fn stats(&self) -> Stats {
        let mut s = self.dram.stats();
        if let (Some(find), Some(allocate)) = (self.find_latency.get(), self.dram.alloc_latency()) {
            s.api_latency_ns = Some(super::stats::ApiLatency {
                get: find.window(),
                set: allocate,
            });
        }
        if let Some(nvm) = &self.nvm {
            let c = &self.counters;
            let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
            s.nvm = Some(NvmSide {
                counters: HybridCounters {
                    nvm_gets: g(&c.nvm_gets),
                    nvm_get_misses: g(&c.nvm_get_misses),
                    coalesced: g(&c.coalesced),
                    puts: g(&c.puts),
                    put_errors: g(&c.put_errors),
                    aborts_from_del: g(&c.aborts_from_del),
                    rejects_expiry: g(&c.rejects_expiry),
                    rejects_clean: g(&c.rejects_clean),
                    rejects_retention: g(&c.rejects_retention),
                    nvm_deletes: g(&c.nvm_deletes),
                    nvm_lookup_errors: g(&c.nvm_lookup_errors),
                },
                engine: nvm.stats(),
                nand_bytes_written: self.nand.get().map(|n| n.written()),
            });
        }
        s
    }

    /// Waits until NVM's writes so far are on the device.
    pub fn flush(&self) {
        if let Some(n) = &self.nvm {
            n.flush();
        }
    }
}

impl std::ops::Deref for Cache {
    type Target = DramCache;
    /// DRAM's own views (classes, footprint, per-class items).
    fn deref(&self) -> &DramCache {
        &self.dram
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::{AllocClasses, DramConfig, Policy, Refresh};
    use crate::nvm::{Admission, NvmConfig};

    fn nvm_config() -> NvmConfig {
        NvmConfig::for_tests(8 << 20)
    }

    /// 12 MiB of DRAM (two slabs for items, one for the slab headers) in
    /// front of 8 MiB of in-memory NVM.
    fn hybrid(opts: HybridOptions) -> Cache {
        let dram = DramCache::new(&DramConfig {
            size_bytes: 12 << 20,
            pool_sizes: vec![1.0],
            classes: AllocClasses::geometric(64, 1 << 20, 1.5).unwrap(),
            policy: Policy::Lru { ip_spec: 0 },
            refresh: Refresh {
                secs: 0,
                ..Refresh::default()
            },
            ht_bucket_power: 12,
        })
        .unwrap();
        let (navy, _) = Navy::open(&nvm_config()).unwrap();
        Cache::new(dram, Some(navy), opts)
    }

    fn key(i: u64) -> Vec<u8> {
        format!("key{i:06}").into_bytes()
    }

    fn value(i: u64, version: u8, len: usize) -> Vec<u8> {
        let mut v = vec![version; len];
        v[..8].copy_from_slice(&i.to_le_bytes());
        v
    }

    fn counters(c: &Cache) -> HybridCounters {
        c.stats().nvm.unwrap().counters
    }

    /// Sets keys 0..n of `len` bytes (version 1); DRAM holds a few
    /// thousand of them, the rest went to NVM.
    fn fill(c: &Cache, n: u64, len: usize) {
        for i in 0..n {
            c.set(0, &key(i), &value(i, 1, len), 0).unwrap();
        }
    }

    #[test]
    fn evictions_go_to_nvm_and_hits_come_back_as_clean_copies() {
        for len in [1000usize, 6000] {
            // 1000-byte items go to the bucket engine, 6000-byte ones to
            // the regions.
            let c = hybrid(HybridOptions::default());
            let n = if len == 1000 { 9000 } else { 1500 };
            fill(&c, n, len);
            let s = c.stats();
            let ram_evictions: u64 = s.pools.iter().map(|p| p.evictions).sum();
            assert!(ram_evictions > 0, "DRAM must have overflowed");
            let x = s.nvm.as_ref().unwrap();
            assert_eq!(x.counters.puts, ram_evictions, "every eviction offered");
            assert!(x.engine.items() > 0);
            // The first key was evicted first: it is in NVM now.
            let mut out = Vec::new();
            assert!(c.dram().get_uncounted(&key(0), None).is_none());
            assert_eq!(c.get(&key(0), Some(&mut out)), Some(len));
            assert_eq!(out, value(0, 1, len), "len {len}");
            let k = counters(&c);
            assert_eq!((k.nvm_gets, k.nvm_get_misses), (1, 0));
            // Promoted: DRAM has it again, clean.
            assert!(c.dram().get_uncounted(&key(0), None).is_some());
            // Pushing it out of DRAM again does not rewrite it to NVM.
            let puts_before = counters(&c).puts;
            for i in n..2 * n {
                c.set(0, &key(i), &value(i, 1, len), 0).unwrap();
            }
            let k = counters(&c);
            assert!(k.rejects_clean >= 1, "{k:?}");
            assert!(k.puts > puts_before);
            // A key never stored misses in both.
            assert_eq!(c.get(b"never", None), None);
            assert_eq!(counters(&c).nvm_get_misses, 1);
        }
    }

    /// A promoted item keeps its expiry time, as CacheLib's promotion.
    #[test]
    fn promotion_keeps_the_ttl() {
        let c = hybrid(HybridOptions::default());
        c.set(0, &key(0), &value(0, 1, 1000), 3600).unwrap();
        let expiry = c.dram().expiry(&key(0)).unwrap();
        assert!(expiry > 3600);
        for i in 1..9000 {
            c.set(0, &key(i), &value(i, 1, 1000), 0).unwrap();
        }
        assert!(c.dram().expiry(&key(0)).is_none(), "evicted to NVM");
        assert_eq!(c.get(&key(0), None), Some(1000));
        assert_eq!(c.dram().expiry(&key(0)), Some(expiry));
        // An item without a TTL stays without one.
        assert_eq!(c.get(&key(1), None), Some(1000));
        assert_eq!(c.dram().expiry(&key(1)), Some(0));
    }

    #[test]
    fn sets_and_deletes_drop_the_nvm_copy() {
        let c = hybrid(HybridOptions::default());
        fill(&c, 9000, 1000);
        let nvm = c.nvm().unwrap();
        assert!(nvm.could_exist(&key(5)));
        // A new value replaces NVM's copy: never the old value again.
        c.set(0, &key(5), &value(5, 2, 1000), 0).unwrap();
        assert!(nvm.lookup(&key(5), c.dram().now()).unwrap().is_none());
        // Version 3, then pushed out of DRAM into NVM by new keys.
        c.set(0, &key(5), &value(5, 3, 1000), 0).unwrap();
        for i in 9000..18000 {
            c.set(0, &key(i), &value(i, 1, 1000), 0).unwrap();
        }
        let mut out = Vec::new();
        assert_eq!(c.get(&key(5), Some(&mut out)), Some(1000));
        assert_eq!(out, value(5, 3, 1000));
        // Delete: gone from both tiers.
        assert!(c.remove(&key(7)) || !nvm.could_exist(&key(7)));
        assert_eq!(c.get(&key(7), None), None);
        assert!(counters(&c).nvm_deletes > 0);
    }

    #[test]
    fn a_stale_eviction_never_reaches_nvm() {
        let c = hybrid(HybridOptions::default());
        let k = key(42);
        c.set(0, &k, &value(42, 1, 1000), 0).unwrap();
        // An eviction of version 1 recorded before a later delete...
        let stale = Evicted {
            pool: 0,
            chain: Vec::new(),
            key: k.clone(),
            value: value(42, 1, 1000),
            expiry: 0,
            last_access: c.dram().now(),
            clean: false,
            stamp: c.seq(&k),
        };
        assert!(c.remove(&k));
        // ...is abandoned when it arrives after the delete.
        c.offer(vec![stale.clone()]);
        assert_eq!(counters(&c).aborts_from_del, 1);
        assert_eq!(c.get(&k, None), None, "a deleted key came back");
        // The same eviction with a current stamp is stored.
        let fresh = Evicted {
            stamp: c.seq(&k),
            ..stale
        };
        c.offer(vec![fresh]);
        assert_eq!(c.get(&k, None), Some(1000));
    }

    #[test]
    fn expired_short_lived_clean_and_idle_items_stay_out_of_nvm() {
        let opts = HybridOptions {
            memory_only_ttl: 100,
            retention_threshold: 50,
            pad_to_alloc_size: false,
        };
        let e = |expiry: u32, last_access: u32, clean: bool| Evicted {
            pool: 0,
            chain: Vec::new(),
            key: key(1),
            value: value(1, 1, 500),
            expiry,
            last_access,
            clean,
            stamp: 0,
        };
        let now = 1000;
        assert_eq!(opts.reject(&e(0, now, true), now), Some(Reject::Clean));
        assert_eq!(opts.reject(&e(now, now, false), now), Some(Reject::Expiry));
        // 10 s left, under memoryOnlyTTL.
        assert_eq!(
            opts.reject(&e(now + 10, now, false), now),
            Some(Reject::Expiry)
        );
        // Idle for 60 s, over the retention threshold.
        assert_eq!(
            opts.reject(&e(0, now - 60, false), now),
            Some(Reject::Retention)
        );
        assert_eq!(opts.reject(&e(now + 1000, now - 10, false), now), None);
        assert_eq!(opts.reject(&e(0, now, false), now), None);
        assert_eq!(
            HybridOptions::default().reject(&e(now + 10, 0, false), now),
            None
        );
        // Through the cache: the expired one is counted, the live one stored.
        let c = hybrid(opts);
        let now = c.dram().now();
        let at = |i: u64, expiry: u32| Evicted {
            pool: 0,
            chain: Vec::new(),
            key: key(i),
            value: value(i, 1, 500),
            expiry,
            last_access: now,
            clean: false,
            stamp: c.seq(&key(i)),
        };
        c.offer(vec![
            at(1, now),
            at(2, now + 10),
            at(4, now + 1000),
            at(5, 0),
        ]);
        let k = counters(&c);
        assert_eq!((k.rejects_expiry, k.puts), (2, 2));
        assert!(c.get(&key(4), None).is_some());
        assert!(c.get(&key(5), None).is_some());
        assert!(c.get(&key(1), None).is_none());
    }

    #[test]
    fn random_admission_turns_away_its_share() {
        let dram = DramCache::new(&DramConfig {
            size_bytes: 8 << 20,
            pool_sizes: vec![1.0],
            classes: AllocClasses::geometric(64, 1 << 20, 1.5).unwrap(),
            policy: Policy::Lru { ip_spec: 0 },
            refresh: Refresh::default(),
            ht_bucket_power: 12,
        })
        .unwrap();
        let mut cfg = nvm_config();
        cfg.admission = Admission::Random(0.25);
        let (navy, _) = Navy::open(&cfg).unwrap();
        let c = Cache::new(dram, Some(navy), HybridOptions::default());
        fill(&c, 20_000, 1000);
        let s = c.stats();
        let x = s.nvm.unwrap();
        let offered = x.counters.puts;
        let share = x.engine.admission_rejects as f64 / offered as f64;
        assert!((0.7..0.8).contains(&share), "rejected {share} of {offered}");
    }

    #[test]
    fn frames_round_trip_and_reject_garbage() {
        let chain = vec![b"c1".to_vec(), Vec::new(), vec![7u8; 300]];
        let f = frame(3, b"value", &chain, 0);
        let (pool, value, c) = unframe(&f).unwrap();
        assert_eq!((pool, value), (3, &b"value"[..]));
        assert_eq!(c, chain.iter().map(Vec::as_slice).collect::<Vec<_>>());
        assert_eq!(unframe(&frame(0, b"", &[], 0)).unwrap().1, b"");
        for cut in 0..f.len() {
            assert!(unframe(&f[..cut]).is_none(), "cut at {cut}");
        }
        // The rest of an untruncated allocation reads back as padding.
        let padded = frame(3, b"value", &chain, 100);
        assert_eq!(padded.len(), f.len() + 100);
        let (_, value, c) = unframe(&padded).unwrap();
        assert_eq!((value, c.len()), (&b"value"[..], 3));
    }

    /// Upstream's default (truncateItemToOriginalAllocSizeInNvm off): an
    /// item goes to NVM with its allocation's usable size, so NVM takes
    /// more bytes for the same items than with truncation.
    #[test]
    fn untruncated_items_take_their_allocation_in_nvm() {
        let written = |pad: bool| {
            let c = hybrid(HybridOptions {
                pad_to_alloc_size: pad,
                ..HybridOptions::default()
            });
            for k in 0..30_000 {
                c.set(0, &key(k), &value(k, 1, 1000), 0).unwrap();
            }
            c.stats().nvm.unwrap().engine.logical_bytes_written()
        };
        let (exact, padded) = (written(false), written(true));
        assert!(exact > 0);
        assert!(padded > exact + exact / 20, "{padded} vs {exact}");
    }

    /// Untruncated items are padded to their allocation, chained items
    /// too (CacheLib's makeBlob for the parent and each chained item).
    #[test]
    fn nvm_padding_counts_the_parent_and_each_chained_item() {
        let classes = AllocClasses::explicit(vec![100, 200]).unwrap();
        // Parent: 32 + 8 + max(10, 24) = 64 -> 100; 100 - 32 - 8 - 10 = 50.
        assert_eq!(nvm_padding(&classes, 8, 10, &[]), 50);
        // Chained: 32 + 4 + 4 + 50 = 90 -> 100, 10 more; 150 B -> 190 ->
        // 200, 10 more.
        assert_eq!(
            nvm_padding(&classes, 8, 10, &[vec![0; 50], vec![0; 150]]),
            70
        );
        // Too large for any class: nothing to pad.
        assert_eq!(nvm_padding(&classes, 8, 500, &[]), 0);
    }

    #[test]
    fn chains_travel_to_nvm_and_back_with_their_parent() {
        let c = hybrid(HybridOptions::default());
        c.set(0, &key(1), &value(1, 1, 1000), 0).unwrap();
        // (Sizes in the parent's class: 8 MiB of DRAM is two slabs.)
        c.add_chained(&key(1), &[3u8; 1000]).unwrap();
        c.add_chained(&key(1), &[5u8; 990]).unwrap();
        let chain = c.dram().chain(&key(1)).unwrap();
        assert_eq!(chain.len(), 2);
        // Push it out of DRAM.
        for i in 100..9100 {
            c.set(0, &key(i), &value(i, 1, 1000), 0).unwrap();
        }
        assert!(c.dram().get_uncounted(&key(1), None).is_none());
        let mut out = Vec::new();
        assert_eq!(c.get(&key(1), Some(&mut out)), Some(1000));
        assert_eq!(out, value(1, 1, 1000));
        assert_eq!(
            c.dram().chain(&key(1)).unwrap(),
            chain,
            "the chain came back in order"
        );
        // Adding to the chain makes NVM's copy stale: it is dropped.
        assert!(c.nvm().unwrap().could_exist(&key(1)));
        c.add_chained(&key(1), &[6u8; 1000]).unwrap();
        assert!(!c.nvm().unwrap().could_exist(&key(1)));
    }
}
