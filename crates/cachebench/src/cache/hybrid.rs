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

use super::dram::{AllocError, DramCache, Evicted, EvictionSink, SetMode, Stats};
use crate::nvm::{Navy, NvmStats};
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
}

/// The hybrid layer's counters, as CacheBench's NVM lines.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HybridCounters {
    /// NVM lookups (DRAM misses that went to NVM).
    pub nvm_gets: u64,
    pub nvm_get_misses: u64,
    /// Misses that found the key promoted by a concurrent get.
    pub coalesced: u64,
    /// Evictions handed to NVM (after the clean, expiry and retention
    /// filters).
    pub puts: u64,
    /// Puts NVM did not store (admission, size, I/O error).
    pub put_errors: u64,
    /// Evictions abandoned because a set or delete of the key came after.
    pub aborts_from_del: u64,
    pub rejects_expiry: u64,
    pub rejects_clean: u64,
    pub rejects_retention: u64,
    pub nvm_deletes: u64,
    pub nvm_lookup_errors: u64,
}

/// A hybrid cache's NVM side of [`Stats`].
#[derive(Debug, Clone, Default)]
pub struct NvmSide {
    pub counters: HybridCounters,
    pub engine: NvmStats,
}

impl NvmSide {
    /// Adds another instance's counters.
    pub fn add(&mut self, o: &NvmSide) {
        let (a, b) = (&mut self.counters, &o.counters);
        a.nvm_gets += b.nvm_gets;
        a.nvm_get_misses += b.nvm_get_misses;
        a.coalesced += b.coalesced;
        a.puts += b.puts;
        a.put_errors += b.put_errors;
        a.aborts_from_del += b.aborts_from_del;
        a.rejects_expiry += b.rejects_expiry;
        a.rejects_clean += b.rejects_clean;
        a.rejects_retention += b.rejects_retention;
        a.nvm_deletes += b.nvm_deletes;
        a.nvm_lookup_errors += b.nvm_lookup_errors;
        self.engine.add(&o.engine);
    }
}

impl PartialEq for NvmSide {
    fn eq(&self, o: &NvmSide) -> bool {
        self.counters == o.counters
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
}

fn stripe_of(key: &[u8]) -> usize {
    (crate::nvm::key_hash(key) >> 20) as usize % STRIPES
}

/// The framing of a value in NVM: the item's pool, then the value.
fn frame(pool: u8, value: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(value.len() + 1);
    v.push(pool);
    v.extend_from_slice(value);
    v
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
    pub fn get(&self, key: &[u8], mut out: Option<&mut Vec<u8>>) -> Option<usize> {
        if let Some(n) = self.dram.get(key, out.as_deref_mut()) {
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
            match nvm.lookup(key, now) {
                Ok(Some(framed)) if !framed.is_empty() => {
                    let (pool, value) = (framed[0] as usize, &framed[1..]);
                    let pool = pool.min(self.dram.pool_count().saturating_sub(1));
                    // The TTL left is not kept in NVM's value; the engines
                    // already refused expired items, so promote without one.
                    let stamp = |k: &[u8]| self.seq(k);
                    let _ = self.dram.set_ex(
                        pool,
                        key,
                        value,
                        0,
                        SetMode::Promote,
                        Some(EvictionSink {
                            out: &mut evicted,
                            stamp: &stamp,
                        }),
                    );
                    if let Some(out) = out {
                        out.clear();
                        out.extend_from_slice(value);
                    }
                    Some(value.len())
                }
                Ok(_) => {
                    bump(&self.counters.nvm_get_misses);
                    None
                }
                Err(_) => {
                    bump(&self.counters.nvm_lookup_errors);
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
        let Some(nvm) = &self.nvm else {
            return self.dram.set(pool, key, value, ttl_secs);
        };
        let mut evicted = Vec::new();
        let r = {
            let _g = self.lock(key);
            let stamp = |k: &[u8]| self.seq(k);
            let r = self.dram.set_ex(
                pool,
                key,
                value,
                ttl_secs,
                SetMode::Replace,
                Some(EvictionSink {
                    out: &mut evicted,
                    stamp: &stamp,
                }),
            );
            if r.is_ok() {
                self.nvm_remove(nvm, key);
                self.changed(key);
            }
            r
        };
        self.offer(evicted);
        r.map(|_| ())
    }

    fn nvm_remove(&self, nvm: &Navy, key: &[u8]) -> bool {
        bump(&self.counters.nvm_deletes);
        match nvm.remove(key) {
            Ok(found) => found,
            Err(e) => {
                self.note_error(format!(
                    "removing a key from NVM failed: {}",
                    crate::nvm::io::error_chain(&e)
                ));
                false
            }
        }
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
            if e.clean {
                bump(&self.counters.rejects_clean);
                continue;
            }
            if e.expiry != 0
                && (e.expiry <= now
                    || (self.opts.memory_only_ttl > 0
                        && e.expiry - now < self.opts.memory_only_ttl))
            {
                bump(&self.counters.rejects_expiry);
                continue;
            }
            if self.opts.retention_threshold > 0
                && now.saturating_sub(e.last_access) > self.opts.retention_threshold
            {
                bump(&self.counters.rejects_retention);
                continue;
            }
            bump(&self.counters.puts);
            let _g = self.lock(&e.key);
            if self.seq(&e.key) != e.stamp {
                bump(&self.counters.aborts_from_del);
                continue;
            }
            match nvm.insert(
                &e.key,
                &frame(e.pool, &e.value),
                e.expiry,
                rand::random::<f64>(),
            ) {
                Ok(true) => {}
                Ok(false) => bump(&self.counters.put_errors),
                Err(err) => {
                    bump(&self.counters.put_errors);
                    self.note_error(nvm.fatal().unwrap_or_else(|| {
                        format!(
                            "writing to NVM failed: {}",
                            crate::nvm::io::error_chain(&err)
                        )
                    }));
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
    pub fn stats(&self) -> Stats {
        let mut s = self.dram.stats();
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
