//! The cache's counters, as CacheBench reports them: DRAM (whole cache,
//! per pool, slab releases) and, for a hybrid cache, its NVM side. Both
//! engines fill them; neither owns them.

use crate::nvm::NvmStats;

/// Per-pool counters, as CacheBench's allocator stats.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PoolStats {
    pub alloc_attempts: u64,
    pub alloc_successes: u64,
    pub evict_attempts: u64,
    pub evictions: u64,
    pub items: u64,
    pub slabs: u64,
    pub slab_budget: u64,
}

/// Whole-cache counters.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Stats {
    pub gets: u64,
    pub hits: u64,
    pub expired: u64,
    pub removes: u64,
    pub pools: Vec<PoolStats>,
    /// The NVM tier's counters (a hybrid cache's; None for DRAM alone).
    pub nvm: Option<NvmSide>,
    /// Pool rebalancing.
    pub release: ReleaseStats,
    /// With `--report_api_latency`: find and allocate latency over the
    /// last minute (upstream's `Cache Find/Allocate API latency`).
    #[serde(default)]
    pub api_latency_ns: Option<ApiLatency>,
}

/// Slab releases of pool rebalancing, as CacheBench reports them.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ReleaseStats {
    pub slabs_released: u64,
    pub move_attempts: u64,
    pub move_successes: u64,
    pub eviction_attempts: u64,
    pub eviction_successes: u64,
}

/// The hybrid layer's counters, as CacheBench's NVM lines.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
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

/// A hybrid cache's NVM side of [`Stats`] (filled by the hybrid layer).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct NvmSide {
    pub counters: HybridCounters,
    pub engine: NvmStats,
    /// NAND bytes written since the start (`writeAmpDeviceList`; None when
    /// not read).
    #[serde(default)]
    pub nand_bytes_written: Option<u64>,
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
        if let Some(n) = o.nand_bytes_written {
            *self.nand_bytes_written.get_or_insert(0) += n;
        }
    }
}

impl PartialEq for NvmSide {
    fn eq(&self, o: &NvmSide) -> bool {
        self.counters == o.counters
    }
}

/// Latency of the cache's API calls (`--report_api_latency`), nanoseconds,
/// over the last minute (upstream's sliding window): `get` is upstream's
/// find (`Cache Find API latency`: every lookup of the stressor's gets,
/// lone gets, updates, onlySetIfMiss sets and addChained parents), `set`
/// its allocate (`Cache Allocate API latency`: every allocation, with the
/// eviction it makes, promotions from NVM included).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ApiLatency {
    #[serde(with = "crate::latency::serde_histogram")]
    pub get: hdrhistogram::Histogram<u64>,
    #[serde(with = "crate::latency::serde_histogram")]
    pub set: hdrhistogram::Histogram<u64>,
}

impl Default for ApiLatency {
    fn default() -> Self {
        ApiLatency {
            get: crate::latency::histogram(),
            set: crate::latency::histogram(),
        }
    }
}

impl PartialEq for ApiLatency {
    fn eq(&self, o: &Self) -> bool {
        self.get.len() == o.get.len() && self.set.len() == o.set.len()
    }
}

impl ApiLatency {
    /// Adds another thread's histograms.
    pub fn add(&mut self, o: &ApiLatency) {
        crate::latency::add(&mut self.get, &o.get);
        crate::latency::add(&mut self.set, &o.set);
    }
}
