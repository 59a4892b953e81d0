//! The NVM (flash) tier, CacheLib's "navy": items evicted from DRAM go to a
//! log-structured region engine (large items, [`region`]) or a
//! set-associative bucket engine (small items, [`bighash`]) on a file, raw
//! device or memory ([`device`]).
//!
//! [`Navy`] splits the device between the two engines
//! (`navyBigHashSizePct` of it to the bucket engine, the rest to regions),
//! sends an item to the bucket engine when key and value fit in
//! `navySmallItemMaxSize` and to the regions otherwise, applies the
//! admission policy and times every lookup and insert.

pub mod bighash;
pub mod bloom;
pub mod device;
pub mod io;
pub mod region;

use crate::error::Error;
use bighash::{BigHash, BigHashConfig, BigHashStats, InsertResult};
use device::{Device, DeviceOptions, DeviceStats, DirectIo};
use io::{BlockIo, Window};
use region::{Eviction, Insert, RegionConfig, RegionEngine, RegionStats, Reinsertion};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// What the NVM tier is built from (CacheLib's `nvmCache*` and `navy*`
/// keys).
#[derive(Debug, Clone)]
pub struct NvmConfig {
    /// Bytes of the whole device: `nvmCacheSizeMB` per path (so times the
    /// number of paths, as CacheLib), or in memory without paths.
    pub size: u64,
    /// `nvmCachePaths`; empty: an in-memory device.
    pub paths: Vec<PathBuf>,
    pub block_size: u32,
    pub region_size: u32,
    /// Percent of the device for small items (`navyBigHashSizePct`).
    pub bighash_pct: u32,
    pub bucket_size: u32,
    pub bloom_bytes_per_bucket: u32,
    pub small_item_max: u32,
    pub eviction: Eviction,
    pub reinsertion: Reinsertion,
    pub clean_regions: u32,
    pub buffers: u32,
    pub checksum: bool,
    /// Bytes per device write when a region is flushed (`deviceMaxWriteSize`).
    pub write_chunk: u32,
    pub admission: Admission,
    pub direct_io: DirectIo,
    /// Bytes kept at the start of the device for navy's metadata
    /// (`nvmCacheMetadataSizeMB`, by default 0.5% of the device); the
    /// region engine starts after them.
    pub metadata_size: u64,
}

impl NvmConfig {
    /// A small in-memory tier for tests: `size` bytes, 512-byte blocks,
    /// 256 KiB regions, half of it in 4 KiB buckets.
    #[cfg(test)]
    pub(crate) fn for_tests(size: u64) -> NvmConfig {
        NvmConfig {
            size,
            paths: Vec::new(),
            block_size: 512,
            region_size: 256 << 10,
            bighash_pct: 50,
            bucket_size: 4096,
            bloom_bytes_per_bucket: 8,
            small_item_max: 2048,
            eviction: Eviction::Lru,
            reinsertion: Reinsertion::None,
            clean_regions: 1,
            buffers: 2,
            checksum: true,
            write_chunk: 64 << 10,
            admission: Admission::All,
            direct_io: DirectIo::Prefer,
            metadata_size: 0,
        }
    }
}

/// Which evicted items NVM takes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Admission {
    All,
    /// Each with this probability (0..=1).
    Random(f64),
    /// A probability adjusted every second so that admitted bytes approach
    /// this many bytes per second (`navyAdmissionWriteRateMB`).
    WriteRate(u64),
}

/// Counters of the NVM tier.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct NvmStats {
    pub lookups: u64,
    pub hits: u64,
    pub inserts: u64,
    pub insert_errors: u64,
    pub admission_rejects: u64,
    pub removes: u64,
    /// Removes skipped because neither engine could have the key.
    pub removes_skipped: u64,
    pub small: Option<BigHashStats>,
    pub large: Option<RegionStats>,
    pub device: DeviceStats,
    /// Microseconds per engine lookup and per engine insert (rackbench's
    /// own figure; upstream's `NVM Read/Write Latency` is the device's, in
    /// `device`).
    #[serde(with = "crate::latency::serde_histogram::option")]
    pub read_latency_us: Option<hdrhistogram::Histogram<u64>>,
    #[serde(with = "crate::latency::serde_histogram::option")]
    pub write_latency_us: Option<hdrhistogram::Histogram<u64>>,
    /// The current admission probability (1 without a policy).
    pub admission_probability: f64,
}

impl NvmStats {
    /// Items held by both engines.
    pub fn items(&self) -> u64 {
        self.small.as_ref().map_or(0, |s| s.items) + self.large.as_ref().map_or(0, |s| s.items)
    }

    /// Items the engines dropped to make room.
    pub fn evictions(&self) -> u64 {
        self.small.as_ref().map_or(0, |s| s.evictions)
            + self.large.as_ref().map_or(0, |s| s.evictions)
    }

    /// Key and value bytes handed to the engines.
    pub fn logical_bytes_written(&self) -> u64 {
        self.small.as_ref().map_or(0, |s| s.logical_bytes_written)
            + self.large.as_ref().map_or(0, |s| s.logical_bytes_written)
    }
}

/// Adds the named counters of `$o` to `$s`.
macro_rules! add_fields {
    ($s:expr, $o:expr, $($f:ident),* $(,)?) => {
        { $( $s.$f += $o.$f; )* }
    };
}

fn add_hist(
    a: &mut Option<hdrhistogram::Histogram<u64>>,
    b: &Option<hdrhistogram::Histogram<u64>>,
) {
    match (a.as_mut(), b) {
        (Some(x), Some(y)) => {
            let _ = x.add(y);
        }
        (None, Some(y)) => *a = Some(y.clone()),
        _ => {}
    }
}

impl NvmStats {
    /// Adds another instance's counters (several instances in one run).
    pub fn add(&mut self, o: &NvmStats) {
        add_fields!(
            self,
            o,
            lookups,
            hits,
            inserts,
            insert_errors,
            admission_rejects,
            removes,
            removes_skipped
        );
        match (&mut self.small, &o.small) {
            (Some(a), Some(b)) => add_fields!(
                a,
                b,
                inserts,
                lookups,
                hits,
                removes,
                evictions,
                bloom_rejects,
                checksum_errors,
                items,
                logical_bytes_written,
                physical_bytes_written,
                expired
            ),
            (None, Some(b)) => self.small = Some(b.clone()),
            _ => {}
        }
        match (&mut self.large, &o.large) {
            (Some(a), Some(b)) => add_fields!(
                a,
                b,
                inserts,
                too_large,
                lookups,
                hits,
                expired,
                removes,
                evictions,
                reinsertions,
                reinsertion_drops,
                regions_reclaimed,
                regions_flushed,
                checksum_errors,
                lookup_races,
                items,
                logical_bytes_written,
                physical_bytes_written,
                bytes_read
            ),
            (None, Some(b)) => self.large = Some(b.clone()),
            _ => {}
        }
        add_fields!(
            self.device,
            o.device,
            reads,
            writes,
            bytes_read,
            bytes_written,
            read_errors,
            write_errors
        );
        for (a, b) in [
            (&mut self.device.read_latency_us, &o.device.read_latency_us),
            (
                &mut self.device.write_latency_us,
                &o.device.write_latency_us,
            ),
            (
                &mut self.device.read_latency_total_us,
                &o.device.read_latency_total_us,
            ),
            (
                &mut self.device.write_latency_total_us,
                &o.device.write_latency_total_us,
            ),
        ] {
            crate::latency::add(a, b);
        }
        // The probability is a state, not a count: keep the latest.
        self.admission_probability = o.admission_probability;
        add_hist(&mut self.read_latency_us, &o.read_latency_us);
        add_hist(&mut self.write_latency_us, &o.write_latency_us);
    }
}

/// Latency histograms, sharded so threads rarely share a lock.
struct Latencies {
    shards: Vec<Mutex<hdrhistogram::Histogram<u64>>>,
}

impl Latencies {
    fn new() -> Latencies {
        Latencies {
            shards: (0..16)
                .map(|_| {
                    Mutex::new(
                        hdrhistogram::Histogram::new_with_bounds(1, 60_000_000, 3)
                            .expect("histogram bounds"),
                    )
                })
                .collect(),
        }
    }

    fn record(&self, since: Instant) {
        let us = (since.elapsed().as_micros() as u64).clamp(1, 60_000_000);
        thread_local! {
            static SHARD: usize = {
                static NEXT: AtomicU64 = AtomicU64::new(0);
                NEXT.fetch_add(1, Ordering::Relaxed) as usize
            };
        }
        let i = SHARD.with(|s| *s) % self.shards.len();
        let _ = self.shards[i]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record(us);
    }

    fn merged(&self) -> hdrhistogram::Histogram<u64> {
        let mut h =
            hdrhistogram::Histogram::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds");
        for s in &self.shards {
            let _ = h.add(&*s.lock().unwrap_or_else(|e| e.into_inner()));
        }
        h
    }
}

/// The admission policy's state.
struct Admitter {
    policy: Admission,
    /// Probability in millionths.
    p: AtomicU64,
    window: Mutex<(Instant, u64)>,
}

impl Admitter {
    fn new(policy: Admission) -> Admitter {
        let p = match policy {
            Admission::All | Admission::WriteRate(_) => 1.0,
            Admission::Random(p) => p.clamp(0.0, 1.0),
        };
        Admitter {
            policy,
            p: AtomicU64::new((p * 1e6) as u64),
            window: Mutex::new((Instant::now(), 0)),
        }
    }

    fn probability(&self) -> f64 {
        self.p.load(Ordering::Relaxed) as f64 / 1e6
    }

    /// Whether to admit an item of `bytes`; `draw` is uniform in [0, 1).
    fn admit(&self, bytes: u64, draw: f64) -> bool {
        if self.policy == Admission::All {
            return true;
        }
        let ok = draw < self.probability();
        if let Admission::WriteRate(target) = self.policy {
            let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
            if ok {
                w.1 += bytes;
            }
            let secs = w.0.elapsed().as_secs_f64();
            if secs >= 1.0 {
                // Scale the probability by how far the admitted rate was
                // from the target, smoothed and bounded.
                let rate = w.1 as f64 / secs;
                let p = self.probability();
                let want = if rate <= 0.0 {
                    (p * 2.0).min(1.0)
                } else {
                    (p * target as f64 / rate).clamp(0.001, 1.0)
                };
                let next = 0.5 * p + 0.5 * want;
                self.p.store((next * 1e6) as u64, Ordering::Relaxed);
                *w = (Instant::now(), 0);
            }
        }
        ok
    }
}

/// The NVM tier.
pub struct Navy {
    device: Arc<Device>,
    small: Option<BigHash>,
    large: Option<RegionEngine>,
    small_max: usize,
    admitter: Admitter,
    read_latency: Latencies,
    write_latency: Latencies,
    lookups: AtomicU64,
    hits: AtomicU64,
    inserts: AtomicU64,
    insert_errors: AtomicU64,
    admission_rejects: AtomicU64,
    removes: AtomicU64,
    removes_skipped: AtomicU64,
    description: String,
}

/// The 64-bit key hash of the engines' indexes (and the hybrid layer's
/// stripes).
pub use bighash::key_hash;

impl Navy {
    /// Opens the device and builds the engines; returns warnings to print
    /// (e.g. a fall-back from O_DIRECT).
    pub fn open(cfg: &NvmConfig) -> Result<(Navy, Vec<String>), Error> {
        let opts = DeviceOptions {
            size: cfg.size,
            block_size: cfg.block_size,
            stripe_size: u64::from(cfg.region_size),
            direct_io: cfg.direct_io,
        };
        let (device, warnings) = if cfg.paths.is_empty() {
            (Device::memory(&opts)?, Vec::new())
        } else {
            Device::open(&cfg.paths, &opts)?
        };
        let device = Arc::new(device);
        let navy = Navy::with_device(device, cfg)?;
        Ok((navy, warnings))
    }

    /// Builds the engines over an opened device.
    pub fn with_device(device: Arc<Device>, cfg: &NvmConfig) -> Result<Navy, Error> {
        let total = device.size();
        if cfg.bighash_pct > 100 {
            return Err(Error::Input(format!(
                "navyBigHashSizePct is {}: expected 0 to 100",
                cfg.bighash_pct
            )));
        }
        let bucket = u64::from(cfg.bucket_size.max(1));
        let small_bytes = if cfg.bighash_pct == 0 {
            0
        } else {
            total * u64::from(cfg.bighash_pct) / 100 / bucket * bucket
        };
        let region = u64::from(cfg.region_size.max(1));
        // As navy: the metadata first, the regions after it, the buckets at
        // the device's end (here at its start: the order changes nothing).
        let metadata = cfg.metadata_size;
        if metadata + small_bytes >= total && cfg.bighash_pct < 100 {
            return Err(Error::Input(format!(
                "nvmCacheMetadataSizeMB: {} MiB of metadata leave no room on a {} MiB device",
                metadata >> 20,
                total >> 20
            )));
        }
        let large_bytes = total.saturating_sub(small_bytes + metadata) / region * region;
        let dev: Arc<dyn BlockIo> = device.clone();
        let small = if small_bytes > 0 {
            let w: Arc<dyn BlockIo> = Arc::new(Window {
                dev: dev.clone(),
                base: 0,
                len: small_bytes,
            });
            Some(
                BigHash::new(
                    w,
                    &BigHashConfig {
                        bucket_size: cfg.bucket_size,
                        bloom_bytes_per_bucket: cfg.bloom_bytes_per_bucket,
                        checksum: cfg.checksum,
                    },
                )
                .map_err(|e| e.prefixed("navyBigHash: "))?,
            )
        } else {
            None
        };
        let large = if cfg.bighash_pct < 100 {
            if large_bytes == 0 {
                return Err(Error::Input(format!(
                    "nvmCacheSizeMB: {} MiB left for large items is less than one {} MiB region (navyRegionSizeMB)",
                    total.saturating_sub(small_bytes + metadata) >> 20,
                    region >> 20
                )));
            }
            let w: Arc<dyn BlockIo> = Arc::new(Window {
                dev: dev.clone(),
                base: small_bytes + metadata,
                len: large_bytes,
            });
            Some(RegionEngine::new(
                w,
                RegionConfig {
                    region_size: cfg.region_size,
                    clean_regions: cfg.clean_regions,
                    buffers: cfg.buffers,
                    eviction: cfg.eviction.clone(),
                    reinsertion: cfg.reinsertion,
                    checksum: cfg.checksum,
                    write_chunk: cfg.write_chunk.min(cfg.region_size),
                },
            )?)
        } else {
            None
        };
        let small_max = match &small {
            Some(s) => (cfg.small_item_max as usize).min(s.max_item_size()),
            None => 0,
        };
        let description = format!(
            "NVM: {} MiB on {} ({} MiB small-item buckets of {} B, {} regions of {} MiB)",
            total >> 20,
            device.describe(),
            small_bytes >> 20,
            cfg.bucket_size,
            large.as_ref().map_or(0, |l| l.num_regions()),
            cfg.region_size >> 20
        );
        Ok(Navy {
            device,
            small,
            large,
            small_max,
            admitter: Admitter::new(cfg.admission),
            read_latency: Latencies::new(),
            write_latency: Latencies::new(),
            lookups: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            inserts: AtomicU64::new(0),
            insert_errors: AtomicU64::new(0),
            admission_rejects: AtomicU64::new(0),
            removes: AtomicU64::new(0),
            removes_skipped: AtomicU64::new(0),
            description,
        })
    }

    /// One line saying what the tier runs on.
    pub fn describe(&self) -> &str {
        &self.description
    }

    fn is_small(&self, key: &[u8], value_len: usize) -> bool {
        self.small.is_some() && key.len() + value_len <= self.small_max
    }

    /// Looks `key` up in both engines.
    pub fn lookup(&self, key: &[u8], now: u32) -> std::io::Result<Option<Vec<u8>>> {
        Ok(self.lookup_ex(key, now)?.map(|(v, _)| v))
    }

    /// [`Navy::lookup`] with the item's expiry (seconds since the epoch,
    /// 0: none), which a promotion keeps.
    pub fn lookup_ex(&self, key: &[u8], now: u32) -> std::io::Result<Option<(Vec<u8>, u32)>> {
        let start = Instant::now();
        self.lookups.fetch_add(1, Ordering::Relaxed);
        let mut found = None;
        if let Some(l) = &self.large {
            found = l.lookup_ex(key_hash(key), key, now)?;
        }
        if found.is_none()
            && let Some(s) = &self.small
        {
            found = s.lookup_ex(key, now)?;
        }
        self.read_latency.record(start);
        if found.is_some() {
            self.hits.fetch_add(1, Ordering::Relaxed);
        }
        Ok(found)
    }

    /// Offers an evicted item; Ok(false) when admission or the size turned
    /// it away.
    pub fn insert(
        &self,
        key: &[u8],
        value: &[u8],
        expiry: u32,
        draw: f64,
    ) -> std::io::Result<bool> {
        if !self.admitter.admit((key.len() + value.len()) as u64, draw) {
            self.admission_rejects.fetch_add(1, Ordering::Relaxed);
            return Ok(false);
        }
        let start = Instant::now();
        self.inserts.fetch_add(1, Ordering::Relaxed);
        let h = key_hash(key);
        let result = if self.is_small(key, value.len()) {
            let s = self.small.as_ref().expect("small engine");
            let r = s.insert(key, value, expiry);
            // A larger value of the key may sit in the regions.
            if let (Ok(InsertResult::Inserted { .. }), Some(l)) = (&r, &self.large) {
                l.remove(h);
            }
            r.map(|r| matches!(r, InsertResult::Inserted { .. }))
        } else if let Some(l) = &self.large {
            let r = l.insert(h, key, value, expiry);
            if let (Ok(Insert::Inserted), Some(s)) = (&r, &self.small)
                && s.could_exist(key)
            {
                s.remove(key)?;
            }
            r.map(|r| r == Insert::Inserted)
        } else {
            Ok(false)
        };
        self.write_latency.record(start);
        match &result {
            Ok(true) => {}
            _ => {
                self.insert_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        result
    }

    /// Removes `key` from both engines; true if one had it.
    pub fn remove(&self, key: &[u8]) -> std::io::Result<bool> {
        self.removes.fetch_add(1, Ordering::Relaxed);
        let h = key_hash(key);
        let in_large = self.large.as_ref().is_some_and(|l| l.could_exist(h));
        let in_small = self.small.as_ref().is_some_and(|s| s.could_exist(key));
        if !in_large && !in_small {
            self.removes_skipped.fetch_add(1, Ordering::Relaxed);
            return Ok(false);
        }
        let mut found = false;
        if in_large {
            found |= self.large.as_ref().expect("large engine").remove(h);
        }
        if in_small {
            found |= self.small.as_ref().expect("small engine").remove(key)?;
        }
        Ok(found)
    }

    /// Whether either engine may hold `key` (no I/O).
    pub fn could_exist(&self, key: &[u8]) -> bool {
        self.large
            .as_ref()
            .is_some_and(|l| l.could_exist(key_hash(key)))
            || self.small.as_ref().is_some_and(|s| s.could_exist(key))
    }

    /// Why the tier cannot take more writes (e.g. the disk is full).
    pub fn fatal(&self) -> Option<String> {
        self.large.as_ref().and_then(|l| l.fatal())
    }

    /// Waits until everything written is on the device.
    pub fn flush(&self) {
        if let Some(l) = &self.large {
            l.flush();
        }
    }

    pub fn stats(&self) -> NvmStats {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        NvmStats {
            lookups: g(&self.lookups),
            hits: g(&self.hits),
            inserts: g(&self.inserts),
            insert_errors: g(&self.insert_errors),
            admission_rejects: g(&self.admission_rejects),
            removes: g(&self.removes),
            removes_skipped: g(&self.removes_skipped),
            small: self.small.as_ref().map(|s| s.stats()),
            large: self.large.as_ref().map(|l| l.stats()),
            device: self.device.stats(),
            read_latency_us: Some(self.read_latency.merged()),
            write_latency_us: Some(self.write_latency.merged()),
            admission_probability: self.admitter.probability(),
        }
    }
}
