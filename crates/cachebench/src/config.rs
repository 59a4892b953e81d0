//! CacheLib's CacheBench JSON configs, read unchanged: `//` and `/* */`
//! comments and trailing commas are allowed (as CacheLib's parser allows
//! them), an object `{ "cache_config": ..., "test_config": ... }` is one
//! instance and a top-level array several.
//!
//! Every key upstream's config structs read (`CacheConfig`,
//! `StressorConfig`, `DistributionConfig`, `ReplayGeneratorConfig`,
//! `WarmupCheckPolicy`, `NavyArenaConfig`, `MemoryTierConfig`,
//! `MLAdmissionConfig`) is in a table below with what rackbench does with
//! it ([`Take`]): applied; not modelled (a warning naming the key and what
//! differs, when the config sets it to anything but upstream's default);
//! without effect upstream too (a warning saying so); or refused by name
//! when set, because running without it would change the figures. Nothing
//! a config sets is dropped silently.
//!
//! Upstream ignores keys it does not know; a misspelled `nvmCachePath`
//! silently runs without flash. We warn, naming the key, its place and the
//! closest known key. `strict` makes unknown and not-modelled keys errors.
//! Syntax errors name `FILE:LINE:COL`; type and consistency errors name the
//! key and what was expected.

use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// Why a config cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The io error is in the message, not the error chain, so that
    /// `{:#}` does not print it twice.
    #[error("cannot read {path}: {error}")]
    Read { path: String, error: std::io::Error },
    #[error("{path}:{line}:{column}: {message}")]
    Syntax {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
}

/// What rackbench does with one of upstream's keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    /// Read and applied as upstream applies it (some with checks of their
    /// own in the code that reads them).
    Used,
    /// Upstream applies it; rackbench does not model it. Set to anything
    /// but upstream's default, it gets a warning naming the key and this
    /// reason (what differs); `--strict` refuses it.
    NotModelled(&'static str),
    /// Upstream's cachebench reads it without using it in the runs
    /// rackbench makes (or no longer reads it at all): a warning saying it
    /// has no effect, as upstream, and why.
    NoEffect(&'static str),
    /// Refused, naming the key and this reason, when set to anything but
    /// upstream's default: running without it would change the figures.
    Refused(&'static str),
}

/// One key of a config section: its name, upstream's default (as JSON;
/// `null` where it has no JSON form) and what rackbench does with it.
#[derive(Debug, Clone, Copy)]
pub struct Key {
    pub name: &'static str,
    pub default: &'static str,
    pub take: Take,
}

const fn key(name: &'static str, default: &'static str, take: Take) -> Key {
    Key {
        name,
        default,
        take,
    }
}

use Take::{NoEffect, NotModelled, Refused, Used};

const NAVY_THREADS: &str = "rackbench's NVM engine has no reader or writer thread pools and no \
     asynchronous I/O: a lookup reads on the stressor's thread, an insert writes into the open \
     region (or its bucket) on the evicting thread, and one flusher thread writes full regions";
const NO_INSERT_QUEUE: &str = "rackbench's NVM inserts are not queued (each is written by the \
     evicting thread), so there is no queue to bound and none is rejected for it";
const ONE_LOCK: &str = "rackbench's DRAM cache guards its index and LRU lists with one \
     reader-writer lock, not lock stripes";
const NO_EVENT_TRACKER: &str = "no event file is written (CacheLib's event tracker is not \
     implemented); the figures are not affected";
const NO_ACCESS_TIME_MAP: &str = "rackbench's NVM engine keeps no access-time map";
const HEAP_MEMORY: &str = "the cache is in the process's private memory, never in a \
     shared-memory segment (see cacheDir)";
const STALE: &str = "upstream's cachebench no longer reads it (it is left in some of upstream's \
     own configs)";
const COMPONENT_ONLY: &str = "only the cache_component stressor's flash component reads it (that \
     stressor is refused)";
const REFRESH: &str = "its cachebench builds the LRU without a reconfigure interval, so the \
     refresh time stays lruRefreshSec";

/// `cache_config`: upstream's `CacheConfig` (JSONSetVal at 278ffc7, in
/// that order), then rackbench's own key and keys upstream's configs still
/// carry that upstream no longer reads.
pub const CACHE_KEYS: &[Key] = &[
    key("allocator", "\"LRU\"", Used),
    key(
        "cacheDir",
        "\"\"",
        NotModelled(
            "the cache is not saved to it or restored from it: every run starts empty (upstream \
             re-attaches to the cache an earlier run left in cacheDir; its first run starts empty \
             too) and lives in private memory, not shared memory",
        ),
    ),
    key("cacheSizeMB", "0", Used),
    key("poolRebalanceIntervalSec", "0", Used),
    key("moveOnSlabRelease", "false", Used),
    key("rebalanceStrategy", "\"\"", Used),
    key("rebalanceMinSlabs", "1", Used),
    key("rebalanceDiffRatio", "0.25", Used),
    key("htBucketPower", "22", Used),
    key("htLockPower", "20", NotModelled(ONE_LOCK)),
    key("lruRefreshSec", "60", Used),
    key("lruRefreshRatio", "0.1", NoEffect(REFRESH)),
    key("mmReconfigureIntervalSecs", "0", NoEffect(REFRESH)),
    key("lruUpdateOnWrite", "false", Used),
    key("lruUpdateOnRead", "true", Used),
    key(
        "tryLockUpdate",
        "false",
        NotModelled(
            "rackbench's LRU update waits for the cache's lock rather than skipping the update \
             when the lock is busy",
        ),
    ),
    key("lruIpSpec", "0", Used),
    key(
        "useCombinedLockForIterators",
        "false",
        NoEffect("only CacheLib's iterators and its debug-build refcount check read it"),
    ),
    key("lru2qHotPct", "20", Used),
    key("lru2qColdPct", "20", Used),
    key("allocFactor", "1.5", Used),
    key("maxAllocSize", "1048576", Used),
    key("minAllocSize", "64", Used),
    key("allocSizes", "[]", Used),
    key("numPools", "1", Used),
    key("poolSizes", "[1.0]", Used),
    key("nvmCacheSizeMB", "0", Used),
    key("nvmCacheMetadataSizeMB", "0", Used),
    key("nvmCachePaths", "[]", Used),
    key("writeAmpDeviceList", "[]", Used),
    key("navyBlockSize", "512", Used),
    key("navyRegionSizeMB", "16", Used),
    key(
        "navyArenas",
        "[]",
        Refused(
            "several navy engine pairs (arenas) are not supported: rackbench's NVM tier has one \
             bucket engine and one region engine",
        ),
    ),
    key("navySegmentedFifoSegmentRatio", "[]", Used),
    key(
        "navyReqOrderShardsPower",
        "21",
        NotModelled(
            "requests of a key are ordered by the hybrid cache's 1,024 stripe locks, not by \
             navy's request-order shards",
        ),
    ),
    key("navyBigHashSizePct", "50", Used),
    key("navyBigHashBucketSize", "4096", Used),
    key("navyBloomFilterPerBucketSize", "8", Used),
    key("navySmallItemMaxSize", "2048", Used),
    key("navyParcelMemoryMB", "1024", NotModelled(NO_INSERT_QUEUE)),
    key("navyHitsReinsertionThreshold", "0", Used),
    key("navyProbabilityReinsertionThreshold", "0", Used),
    key("navyReaderThreads", "32", NotModelled(NAVY_THREADS)),
    key("navyWriterThreads", "32", NotModelled(NAVY_THREADS)),
    key("navyMaxNumReads", "0", NotModelled(NAVY_THREADS)),
    key("navyMaxNumWrites", "0", NotModelled(NAVY_THREADS)),
    key("navyStackSizeKB", "32", NotModelled(NAVY_THREADS)),
    key("navyQDepth", "0", NotModelled(NAVY_THREADS)),
    key("navyEnableIoUring", "true", NotModelled(NAVY_THREADS)),
    key("navyCleanRegions", "1", Used),
    key(
        "navyCleanRegionThreads",
        "1",
        NotModelled("one reclaimer thread keeps navyCleanRegions regions free"),
    ),
    key("navyAdmissionWriteRateMB", "0", Used),
    key(
        "navyMaxConcurrentInserts",
        "1000000",
        NotModelled(NO_INSERT_QUEUE),
    ),
    key("navyDataChecksum", "true", Used),
    key("truncateItemToOriginalAllocSizeInNvm", "false", Used),
    key("navyEncryption", "false", Used),
    key("deviceMaxWriteSize", "1048576", Used),
    key(
        "deviceEnableFDP",
        "false",
        NotModelled("writes carry no FDP placement handle"),
    ),
    key(
        "navyEnableAccessTimeMap",
        "false",
        NotModelled(NO_ACCESS_TIME_MAP),
    ),
    key(
        "navyAccessTimeMapMaxSize",
        "0",
        NotModelled(NO_ACCESS_TIME_MAP),
    ),
    key("memoryOnlyTTL", "0", Used),
    key("usePosixShm", "false", NotModelled(HEAP_MEMORY)),
    key("shmType", "\"\"", Used),
    key("hugePageSize", "0", Used),
    key(
        "hugePageMountDir",
        "\"\"",
        NotModelled("the slabs use transparent huge pages, not files in a hugetlbfs mount"),
    ),
    key(
        "lockMemory",
        "false",
        NotModelled("the cache's memory is not locked (mlock): it could be swapped out"),
    ),
    key("memoryTiers", "[]", Used),
    key("useTraceTimeStamp", "false", Used),
    key("printNvmCounters", "false", Used),
    key("tickerSynchingSeconds", "0", Used),
    key(
        "enableItemDestructorCheck",
        "false",
        Refused(
            "the item destructor check (every item's destructor called once, with its latest \
             version) is not supported: rackbench's engine has no destructor callbacks, so the \
             run could not fail as upstream's would",
        ),
    ),
    key(
        "enableItemDestructor",
        "false",
        NotModelled(
            "rackbench's engine calls no destructor when an item leaves (upstream's cachebench \
             registers an empty one: a call per removal or eviction)",
        ),
    ),
    key("nvmAdmissionRetentionTimeThreshold", "0", Used),
    key(
        "eventTrackerFilePath",
        "\"\"",
        NotModelled(NO_EVENT_TRACKER),
    ),
    key(
        "eventTrackerSamplingRate",
        "1",
        NotModelled(NO_EVENT_TRACKER),
    ),
    key(
        "eventTrackerQueueSize",
        "100000",
        NotModelled(NO_EVENT_TRACKER),
    ),
    key(
        "fccCoroFiberAdapterNumThreads",
        "32",
        NoEffect(COMPONENT_ONLY),
    ),
    key(
        "fccCoroFiberAdapterFibersPerThread",
        "4",
        NoEffect(COMPONENT_ONLY),
    ),
    key(
        "fccCoroFiberAdapterStackSizeKB",
        "32",
        NoEffect(COMPONENT_ONLY),
    ),
    key(
        "customConfigJson",
        "null",
        NoEffect("only the object_cache stressor reads it (that stressor is refused)"),
    ),
    key(
        "navyEnableItemHistoryTracking",
        "false",
        NotModelled("rackbench's NVM engine keeps no item history index"),
    ),
    // rackbench's own: a fixed NVM admission probability.
    key("navyAdmissionProbability", "1", Used),
    // Keys upstream's own configs carry and its cachebench no longer reads.
    key("poolResizeIntervalSec", "0", NoEffect(STALE)),
    key("rebalanceMinRatio", "0", NoEffect(STALE)),
    key("navySizeClasses", "[]", NoEffect(STALE)),
    key(
        "navyNumInmemBuffers",
        "0",
        NoEffect(
            "upstream ignores it since 2022: the region engine keeps 2 x navyCleanRegions \
             in-memory buffers",
        ),
    ),
    key("preallocateCache", "false", NoEffect(STALE)),
];

/// `test_config`: upstream's `StressorConfig` (JSONSetVal at 278ffc7, in
/// that order, and the nested objects it reads), then keys upstream's
/// configs carry that it no longer reads. `test_config` also takes the
/// keys of a distribution ([`DISTRIBUTION_KEYS`]) when it has no
/// `poolDistributions`.
pub const TEST_KEYS: &[Key] = &[
    key("generator", "\"\"", Used),
    key("name", "\"\"", Used),
    key("enableLookaside", "false", Used),
    key("onlySetIfMiss", "false", Used),
    key("ignoreOpCount", "false", Used),
    key("populateItem", "true", Used),
    key(
        "samplingIntervalMs",
        "1000",
        NoEffect("upstream's cachebench does not use it either"),
    ),
    key("checkConsistency", "false", Used),
    key("touchValue", "false", Used),
    key("numOps", "0", Used),
    key("numThreads", "0", Used),
    key("numKeys", "0", Used),
    key("opDelayBatch", "0", Used),
    key("opDelayNs", "0", Used),
    key("opRatePerSec", "0", Used),
    key("opRateBurstSize", "0", Used),
    key("opPoolDistribution", "[1.0]", Used),
    key("keyPoolDistribution", "[1.0]", Used),
    key("maxInconsistencyCount", "50", Used),
    key("traceFileName", "\"\"", Used),
    key("traceFileNames", "[]", Used),
    key("configPath", "\"\"", Used),
    key("cachePieceSize", "65536", Used),
    key("maxCachePieces", "32000", Used),
    key(
        "missTraceFile",
        "\"\"",
        NotModelled(
            "the piecewise replay writes no miss trace (upstream writes the missed requests \
             there); the figures are not affected",
        ),
    ),
    key(
        "maxInvalidDestructorCount",
        "50",
        NoEffect("only enableItemDestructorCheck uses it (refused here)"),
    ),
    key("repeatTraceReplay", "false", Used),
    key("timestampFactor", "1000", Used),
    key("checkNvmCacheWarmUp", "false", Used),
    key(
        "useCombinedLockForIterators",
        "false",
        NoEffect("only CacheLib's iterators and its debug-build refcount check read it"),
    ),
    key("dramIteratorIntervalMs", "10000", Used),
    key("dramIteratorMode", "\"disabled\"", Used),
    key("dramIteratorSleepMs", "0", Used),
    key("dramIteratorWorkMs", "0", Used),
    key("poolDistributions", "[]", Used),
    key("replayGeneratorConfig", "{}", Used),
    key("nvmCacheWarmupCheckPolicy", "{}", Used),
    // Keys upstream's own configs carry and its cachebench no longer reads.
    key(
        "repeatOpCount",
        "false",
        NoEffect(
            "upstream's cachebench no longer reads it: a replayed line is repeated op_count times \
         unless ignoreOpCount is set",
        ),
    ),
    key("prepopulateCache", "false", NoEffect(STALE)),
    key("preallocateCache", "false", NoEffect(STALE)),
];

/// A distribution (`test_config` itself, or each `poolDistributions`
/// entry): upstream's `DistributionConfig`.
pub const DISTRIBUTION_KEYS: &[Key] = &[
    key("keySizeRange", "[]", Used),
    key("keySizeRangeProbability", "[]", Used),
    key("valSizeRange", "[]", Used),
    key("valSizeRangeProbability", "[]", Used),
    key("valSizeDistFile", "\"\"", Used),
    key("chainedItemLengthRange", "[]", Used),
    key("chainedItemLengthRangeProbability", "[]", Used),
    key("chainedItemValSizeRange", "[]", Used),
    key("chainedItemValSizeRangeProbability", "[]", Used),
    key("ttlSecsRange", "[]", Used),
    key("ttlSecsRangeProbability", "[]", Used),
    key("popularityBuckets", "[]", Used),
    key("popularityWeights", "[]", Used),
    key("popDistFile", "\"\"", Used),
    key("getRatio", "0", Used),
    key("setRatio", "0", Used),
    key("delRatio", "0", Used),
    key("addChainedRatio", "0", Used),
    key("loneGetRatio", "0", Used),
    key("loneSetRatio", "0", Used),
    key("updateRatio", "0", Used),
    key("couldExistRatio", "0", Used),
    key("useLegacyKeyGen", "false", Used),
];

/// `test_config.replayGeneratorConfig`: upstream's `ReplayGeneratorConfig`.
pub const REPLAY_KEYS: &[Key] = &[
    key("ampFactor", "1", Used),
    key("ampSizeFactor", "1", Used),
    key("binaryFileName", "\"\"", Used),
    key("fastForwardCount", "0", Used),
    key(
        "preLoadReqs",
        "0",
        NotModelled(
            "rackbench's trace reader fills the threads' queues as the run goes; upstream waits \
             for that many requests before it starts",
        ),
    ),
    key("replaySerializationMode", "\"strict\"", Used),
    key(
        "relaxedSerialIntervalMs",
        "500",
        NoEffect(
            "upstream's relaxed mode does not use it either (it spreads requests at random, as 'none')",
        ),
    ),
    key("numAggregationFields", "0", Used),
    key("numExtraFields", "0", Used),
    key("blockSizeKB", "16384", Used),
    key("chunkSizeKB", "128", Used),
    key("statsPerAggField", "{}", Used),
    key(
        "mlAdmissionConfig",
        "null",
        Refused("the ML admission policy (a model deciding which items to store) is not supported"),
    ),
];

/// `test_config.nvmCacheWarmupCheckPolicy`: upstream's `WarmupCheckPolicy`
/// (both default to 0 once the object is given).
pub const WARMUP_KEYS: &[Key] = &[
    key("evictionCountThreshold", "0", Used),
    key("requestTimestampThreshold", "0", Used),
];

/// Each `cache_config.navyArenas` entry: upstream's `NavyArenaConfig`.
pub const ARENA_KEYS: &[Key] = &[
    key("name", "\"\"", Used),
    key("sizePct", "0", Used),
    key("bigHashPct", "0", Used),
];

/// Each `cache_config.memoryTiers` entry: upstream's `MemoryTierConfig`.
pub const TIER_KEYS: &[Key] = &[key("ratio", "0", Used), key("memBindNodes", "\"\"", Used)];

/// `replayGeneratorConfig.mlAdmissionConfig`: upstream's
/// `MLAdmissionConfig`.
pub const ML_KEYS: &[Key] = &[
    key("modelPath", "\"\"", Used),
    key("numericFeatures", "{}", Used),
    key("categoricalFeatures", "{}", Used),
    key("targetRecall", "0", Used),
    key("admitCategory", "0", Used),
];

/// The stressors upstream's `Stressor::makeStressor` picks by
/// `test_config.name`, none of which rackbench runs (any other name runs
/// the default cache stressor, as upstream), with what they are.
pub const STRESSOR_NAMES: &[(&str, &str)] = &[
    (
        "high_refcount",
        "CacheLib's high-refcount stressor (many handles held on one item)",
    ),
    (
        "cachelib_map",
        "CacheLib's Map container stressor (an integration test of cachelib::Map)",
    ),
    (
        "cachelib_range_map",
        "CacheLib's RangeMap container stressor (an integration test of cachelib::RangeMap)",
    ),
    (
        "fast_shutdown",
        "CacheLib's fast-shutdown stressor (shutting the cache down and re-attaching mid-run)",
    ),
    (
        "async",
        "CacheLib's async cache stressor (lookups through the asynchronous find API)",
    ),
    (
        "cache_component",
        "CacheLib's cache-component stressor (its RAM and flash cache components)",
    ),
    (
        "object_cache",
        "CacheLib's object-cache stressor (cachelib::objcache2)",
    ),
];

/// The generators (`test_config.generator`) rackbench runs.
pub const GENERATORS: &[&str] = &[
    "workload",
    "online",
    "replay",
    "binary-replay",
    "piecewise-replay",
    "block-replay",
];

/// Upstream's other generators, refused by name, with what they are.
pub const REFUSED_GENERATORS: &[(&str, &str)] = &[(
    "simple-flash-benchmark",
    "CacheLib's flash benchmark generator for the cache_component stressor",
)];

/// How a replay spreads requests over the threads
/// (`replaySerializationMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serialization {
    /// A key always goes to the same thread (by hash), so its requests
    /// keep their order (`strict`, upstream's default).
    Strict,
    /// Each request to a thread at random (`relaxed` and `none`: upstream's
    /// relaxed mode is not implemented and behaves as none).
    Random,
}

/// The cache side of an instance (the keys the engine uses; the rest stays
/// in [`BenchConfig::raw`]).
#[derive(Debug, Clone, PartialEq)]
pub struct CacheConfig {
    pub allocator: String,
    pub cache_size_mb: u64,
    pub num_pools: usize,
    pub pool_sizes: Vec<f64>,
    pub alloc_factor: f64,
    pub min_alloc_size: u32,
    pub max_alloc_size: u32,
    pub alloc_sizes: Vec<u32>,
    pub ht_bucket_power: u32,
    pub lru_refresh_sec: u32,
    pub lru_refresh_ratio: f64,
    pub lru_update_on_read: bool,
    pub lru_update_on_write: bool,
    pub lru_ip_spec: u32,
    pub lru2q_hot_pct: u32,
    pub lru2q_cold_pct: u32,
    pub nvm_cache_size_mb: u64,
    pub nvm_cache_paths: Vec<String>,
    /// `writeAmpDeviceList`: the SSDs whose NAND bytes written are read.
    pub write_amp_devices: Vec<String>,
    pub nvm: NvmKeys,
    /// Pool rebalancing: seconds between rounds (0 = off), the strategy
    /// (`random`, `tail-age`, `hits`; upstream runs random for any other
    /// name), the slabs a class keeps, the ratio a receiver must beat the
    /// victim by, and whether items move instead of being evicted.
    pub pool_rebalance_interval_sec: u64,
    pub rebalance_strategy: String,
    pub rebalance_min_slabs: u64,
    pub rebalance_diff_ratio: f64,
    pub move_on_slab_release: bool,
    /// Slab memory on 2 MiB (transparent) huge pages (`hugePageSize`).
    pub huge_pages: bool,
    /// Print the NVM counters map after the report (`printNvmCounters`).
    pub print_nvm_counters: bool,
}

/// The NVM tier's keys (used when `nvmCacheSizeMB` > 0), upstream's
/// defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct NvmKeys {
    pub block_size: u64,
    pub region_size_mb: u64,
    /// Empty: LRU regions; one value: FIFO; several: segmented FIFO.
    pub segmented_fifo_segment_ratio: Vec<u32>,
    pub big_hash_size_pct: u64,
    pub big_hash_bucket_size: u64,
    pub bloom_filter_per_bucket_size: u64,
    pub small_item_max_size: u64,
    pub hits_reinsertion_threshold: u64,
    pub probability_reinsertion_threshold: u64,
    /// Regions kept free; the region engine has twice as many in-memory
    /// buffers, as upstream's `BlockCacheConfig::setCleanRegions`
    /// (`navyNumInmemBuffers` has no effect upstream since 2022).
    pub clean_regions: u64,
    pub admission_write_rate_mb: u64,
    /// rackbench's addition: a fixed admission probability (1 = all).
    pub admission_probability: f64,
    pub data_checksum: bool,
    pub device_max_write_size: u64,
    pub memory_only_ttl: u64,
    pub admission_retention_time_threshold: u64,
    /// Refused when the NVM tier is built (not supported).
    pub encryption: bool,
    /// `nvmCacheMetadataSizeMB`: space kept at the start of the device for
    /// navy's metadata (0: upstream's default, 0.5% of the device).
    pub metadata_size_mb: u64,
    /// `truncateItemToOriginalAllocSizeInNvm`: an item goes to NVM with its
    /// own size; otherwise (upstream's default) with its allocation's
    /// usable size (the slot less header and key).
    pub truncate_to_original: bool,
}

/// One distribution (the test's own, or one of `poolDistributions`).
#[derive(Debug, Clone, PartialEq)]
pub struct DistributionConfig {
    pub key_size_range: Vec<u32>,
    pub key_size_range_probability: Vec<f64>,
    pub val_size_range: Vec<u32>,
    pub val_size_range_probability: Vec<f64>,
    /// getRatio, setRatio, delRatio, loneGetRatio, loneSetRatio,
    /// updateRatio, couldExistRatio.
    pub op_ratios: [f64; 7],
    pub add_chained_ratio: f64,
    pub chained_length_range: Vec<u32>,
    pub chained_length_probability: Vec<f64>,
    pub chained_val_size_range: Vec<u32>,
    pub chained_val_size_probability: Vec<f64>,
    pub popularity_buckets: Vec<u64>,
    pub popularity_weights: Vec<f64>,
    pub pop_dist_file: Option<PathBuf>,
    pub val_size_dist_file: Option<PathBuf>,
    /// Per-key TTL in seconds (`ttlSecsRange` / `ttlSecsRangeProbability`):
    /// exact values when both lists have the same length, piecewise-uniform
    /// ranges when the range list is one longer; empty: no TTL.
    pub ttl_secs_range: Vec<f64>,
    pub ttl_secs_range_probability: Vec<f64>,
    /// `useLegacyKeyGen`: popularity buckets keep their sizes in the
    /// popularity data and their keys are spread over the pool's keys.
    pub use_legacy_key_gen: bool,
}

/// `replayGeneratorConfig`.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayConfig {
    pub amp_factor: u32,
    pub amp_size_factor: u32,
    /// With `generator: replay`: convert the trace to this binary file
    /// (relative to configPath) and stop.
    pub binary_file_name: Option<PathBuf>,
    pub fast_forward_count: u64,
    pub serialization: Serialization,
    /// piecewise-replay: `numAggregationFields`, `numExtraFields` and
    /// `statsPerAggField` (field index, values tracked).
    pub aggregation_fields: u32,
    pub extra_fields: u32,
    pub stats_per_field: Vec<(u32, Vec<String>)>,
    /// block-replay: `blockSizeKB` and `chunkSizeKB`.
    pub block_size_kb: u64,
    pub chunk_size_kb: u64,
}

/// `nvmCacheWarmupCheckPolicy`, with `checkNvmCacheWarmUp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WarmupCheck {
    pub eviction_count_threshold: u64,
    pub request_timestamp_threshold: u64,
}

/// The workload side of an instance.
#[derive(Debug, Clone, PartialEq)]
pub struct TestConfig {
    pub generator: String,
    pub num_ops: u64,
    pub num_threads: usize,
    pub num_keys: u64,
    pub enable_lookaside: bool,
    pub only_set_if_miss: bool,
    pub key_pool_distribution: Vec<f64>,
    pub op_pool_distribution: Vec<f64>,
    /// The test's own distribution (used when there are no
    /// `poolDistributions`, as upstream), then `poolDistributions`.
    pub distribution: DistributionConfig,
    pub pool_distributions: Vec<DistributionConfig>,
    /// `traceFileName` or `traceFileNames`, relative to `configPath`.
    pub trace_files: Vec<PathBuf>,
    /// The folder files named in the config are relative to: `configPath`,
    /// else the config file's folder.
    pub config_path: PathBuf,
    /// Operations per second over all threads (`opRatePerSec`; 0 = as fast
    /// as possible) and the token bucket's burst (`opRateBurstSize`).
    pub op_rate_per_sec: u64,
    pub op_rate_burst_size: u64,
    /// A pause of `opDelayNs` after every `opDelayBatch` operations.
    pub op_delay_batch: u64,
    pub op_delay_ns: u64,
    pub replay: ReplayConfig,
    /// piecewise-replay: `cachePieceSize` and `maxCachePieces`.
    pub cache_piece_size: u64,
    pub max_cache_pieces: u64,
    pub repeat_trace_replay: bool,
    /// A replayed line is repeated op_count times unless this is set.
    pub ignore_op_count: bool,
    /// Divides a trace's op_time to seconds.
    pub timestamp_factor: u64,
    /// Check every value read against the sets that could have left it.
    pub check_consistency: bool,
    /// The threads stop once this many inconsistencies were found.
    pub max_inconsistency_count: u64,
    /// Fill set values (`populateItem`); read every value found
    /// (`touchValue`).
    pub populate_item: bool,
    pub touch_value: bool,
    /// `checkNvmCacheWarmUp` with its policy.
    pub nvm_warmup_check: Option<WarmupCheck>,
}

/// One cache and its workload.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchConfig {
    pub cache: CacheConfig,
    pub test: TestConfig,
    /// The instance as written (minus comments).
    pub raw: Value,
}

/// A loaded file.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub instances: Vec<BenchConfig>,
    pub warnings: Vec<String>,
    /// The file's text, as upstream echoes it under `===JSON Config===`.
    pub text: String,
}

/// A warning while reading, and whether `--strict` refuses it.
struct Warning {
    text: String,
    strict: bool,
}

/// Warnings and errors of one file.
#[derive(Default)]
struct Notes {
    warnings: Vec<Warning>,
}

impl Notes {
    fn warn(&mut self, text: String) {
        self.warnings.push(Warning {
            text,
            strict: false,
        });
    }

    fn warn_strict(&mut self, text: String) {
        self.warnings.push(Warning { text, strict: true });
    }
}

/// The key `name` of `section` ([`CACHE_KEYS`], [`TEST_KEYS`], ...), if
/// rackbench knows it.
pub fn find_key(section: &[Key], name: &str) -> Option<Key> {
    section.iter().find(|k| k.name == name).copied()
}

/// Whether `v` is upstream's default `default` (JSON): numbers compare as
/// numbers, CacheLib's 0/1 and "true"/"false" as booleans.
fn is_default(v: &Value, default: &str) -> bool {
    let Ok(d) = serde_json::from_str::<Value>(default) else {
        return false;
    };
    match (v, &d) {
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (Value::Number(a), Value::Bool(b)) => a.as_f64() == Some(f64::from(u8::from(*b))),
        (Value::String(s), Value::Bool(b)) => s == if *b { "true" } else { "false" },
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| is_default(x, &y.to_string()))
        }
        (Value::Object(a), Value::Null) | (Value::Object(a), Value::Object(_)) => {
            a.is_empty() && d.as_object().is_none_or(Map::is_empty)
        }
        _ => *v == d,
    }
}

/// Blanks comments and trailing commas (outside strings) with spaces, so
/// positions in the result are positions in the original.
pub fn strip(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let (mut i, mut in_str) = (0, false);
    while i < b.len() {
        let c = b[i];
        if in_str {
            if c == b'\\' {
                i += 2;
                continue;
            }
            if c == b'"' {
                in_str = false;
            }
            i += 1;
            continue;
        }
        match c {
            b'"' => in_str = true,
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    out[i] = b' ';
                    i += 1;
                }
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                    if b[i] != b'\n' {
                        out[i] = b' ';
                    }
                    i += 1;
                }
                for o in out.iter_mut().take((i + 2).min(b.len())).skip(i) {
                    *o = b' ';
                }
                i += 2;
                continue;
            }
            b',' => {
                // A comma followed (past blanks and comments) by } or ].
                let mut j = i + 1;
                loop {
                    while j < b.len() && (b[j] as char).is_ascii_whitespace() {
                        j += 1;
                    }
                    if b.get(j) == Some(&b'/') && b.get(j + 1) == Some(&b'/') {
                        while j < b.len() && b[j] != b'\n' {
                            j += 1;
                        }
                        continue;
                    }
                    break;
                }
                if matches!(b.get(j), Some(b'}') | Some(b']')) {
                    out[i] = b' ';
                }
            }
            _ => {}
        }
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Levenshtein distance, for suggestions.
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (
        a.to_lowercase().chars().collect(),
        b.to_lowercase().chars().collect(),
    );
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The top level of an instance.
const TOP_KEYS: &[Key] = &[
    key("cache_config", "{}", Used),
    key("test_config", "{}", Used),
];

/// `v` for a message, cut short when long (a popularity list).
fn shown(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 60 {
        format!("{}...", s.chars().take(57).collect::<String>())
    } else {
        s
    }
}

/// Checks the keys of `obj` (at `place`) against `sections`: a known key
/// is taken as its [`Take`] says (a warning, or an error for a refused
/// one); a key of one of the `other` sections gets a warning that it has
/// no effect there (as upstream, which reads each section on its own); any
/// other key a warning naming the closest known key.
fn check_keys(
    obj: &Map<String, Value>,
    sections: &[&[Key]],
    other: &[(&[Key], &str)],
    place: &str,
    notes: &mut Notes,
) -> Result<(), String> {
    for (k, v) in obj {
        if let Some(spec) = sections.iter().find_map(|s| find_key(s, k)) {
            match spec.take {
                Used => {}
                NotModelled(why) => {
                    if !is_default(v, spec.default) {
                        notes.warn_strict(format!(
                            "{place}.{k} ({}) is not modelled by rackbench, so it has no effect: {why}",
                            shown(v)
                        ));
                    }
                }
                NoEffect(why) => {
                    notes.warn(format!("{place}: '{k}' has no effect, as upstream: {why}"));
                }
                Refused(why) => {
                    if !is_default(v, spec.default) {
                        return Err(format!(
                            "{place}.{k} ({}): {why}; remove the key (or set it to {})",
                            shown(v),
                            spec.default
                        ));
                    }
                }
            }
            continue;
        }
        if let Some((_, section)) = other.iter().find(|(keys, _)| find_key(keys, k).is_some()) {
            notes.warn(format!(
                "{place}: '{k}' is a {section} key; here it has no effect (upstream ignores it too)"
            ));
            continue;
        }
        let best = sections
            .iter()
            .flat_map(|s| s.iter())
            .map(|c| c.name)
            .min_by_key(|c| distance(k, c));
        match best.filter(|c| distance(k, c) <= 3.max(k.len() / 3)) {
            Some(c) => {
                notes.warn_strict(format!("{place}: unknown key '{k}' (did you mean '{c}'?)"))
            }
            None => notes.warn_strict(format!("{place}: unknown key '{k}'")),
        }
    }
    Ok(())
}

/// Typed access to one object, collecting errors that name the key.
struct Fields<'a> {
    obj: &'a Map<String, Value>,
    place: String,
}

impl Fields<'_> {
    fn err(&self, key: &str, expected: &str, got: &Value) -> String {
        format!("{}.{key}: expected {expected}, got {got}", self.place)
    }

    fn u64(&self, key: &str, default: u64) -> Result<u64, String> {
        match self.obj.get(key) {
            None => Ok(default),
            Some(v) => v
                .as_u64()
                .or_else(|| {
                    v.as_f64()
                        .filter(|f| *f >= 0.0 && f.fract() == 0.0)
                        .map(|f| f as u64)
                })
                .ok_or_else(|| self.err(key, "a non-negative integer", v)),
        }
    }

    fn f64(&self, key: &str, default: f64) -> Result<f64, String> {
        match self.obj.get(key) {
            None => Ok(default),
            Some(v) => v.as_f64().ok_or_else(|| self.err(key, "a number", v)),
        }
    }

    fn bool(&self, key: &str, default: bool) -> Result<bool, String> {
        match self.obj.get(key) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            // CacheLib also takes 0/1 and "true"/"false".
            Some(Value::Number(n)) if n.as_u64().is_some_and(|x| x <= 1) => {
                Ok(n.as_u64() == Some(1))
            }
            Some(Value::String(s)) if s == "true" || s == "false" => Ok(s == "true"),
            Some(v) => Err(self.err(key, "true or false", v)),
        }
    }

    fn string(&self, key: &str, default: &str) -> Result<String, String> {
        match self.obj.get(key) {
            None => Ok(default.to_string()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(v) => Err(self.err(key, "a string", v)),
        }
    }

    fn list<T>(
        &self,
        key: &str,
        each: impl Fn(&Value) -> Option<T>,
        what: &str,
    ) -> Result<Vec<T>, String> {
        match self.obj.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| each(v).ok_or_else(|| self.err(key, what, v)))
                .collect(),
            Some(v) => Err(self.err(key, &format!("a list of {what}"), v)),
        }
    }

    fn u32s(&self, key: &str) -> Result<Vec<u32>, String> {
        self.list(
            key,
            |v| v.as_u64().and_then(|x| u32::try_from(x).ok()),
            "non-negative integers",
        )
    }

    fn f64s(&self, key: &str) -> Result<Vec<f64>, String> {
        self.list(key, Value::as_f64, "numbers")
    }

    fn strings(&self, key: &str) -> Result<Vec<String>, String> {
        self.list(key, |v| v.as_str().map(str::to_string), "strings")
    }

    /// An object-valued key (None when absent).
    fn object(&self, key: &str) -> Result<Option<&Map<String, Value>>, String> {
        match self.obj.get(key) {
            None => Ok(None),
            Some(Value::Object(o)) => Ok(Some(o)),
            Some(v) => Err(self.err(key, "an object", v)),
        }
    }
}

fn object<'a>(v: &'a Value, place: &str) -> Result<&'a Map<String, Value>, String> {
    v.as_object()
        .ok_or_else(|| format!("{place}: expected an object, got {v}"))
}

/// A file named in the config: as written when absolute, else in the
/// config's folder (`configPath`, or the config file's own folder), as
/// upstream joins `configPath/name`.
fn in_config_dir(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

/// One distribution, read from `f` alone (upstream reads each
/// `poolDistributions` entry on its own, with upstream's defaults for what
/// it leaves out), its data files from `dir`.
fn distribution(f: &Fields, dir: &Path) -> Result<DistributionConfig, String> {
    let ratio = |key: &str| f.f64(key, 0.0);
    let file = |key: &str| -> Result<Option<PathBuf>, String> {
        match f.obj.get(key) {
            None => Ok(None),
            Some(Value::String(s)) if s.is_empty() => Ok(None),
            Some(Value::String(s)) => Ok(Some(in_config_dir(dir, s))),
            Some(v) => Err(f.err(key, "a file name", v)),
        }
    };
    let mut out = DistributionConfig {
        key_size_range: f.u32s("keySizeRange")?,
        key_size_range_probability: f.f64s("keySizeRangeProbability")?,
        val_size_range: f.u32s("valSizeRange")?,
        val_size_range_probability: f.f64s("valSizeRangeProbability")?,
        op_ratios: [
            ratio("getRatio")?,
            ratio("setRatio")?,
            ratio("delRatio")?,
            ratio("loneGetRatio")?,
            ratio("loneSetRatio")?,
            ratio("updateRatio")?,
            ratio("couldExistRatio")?,
        ],
        add_chained_ratio: ratio("addChainedRatio")?,
        chained_length_range: f.u32s("chainedItemLengthRange")?,
        chained_length_probability: f.f64s("chainedItemLengthRangeProbability")?,
        chained_val_size_range: f.u32s("chainedItemValSizeRange")?,
        chained_val_size_probability: f.f64s("chainedItemValSizeRangeProbability")?,
        popularity_buckets: f.list("popularityBuckets", Value::as_u64, "non-negative integers")?,
        popularity_weights: f.f64s("popularityWeights")?,
        pop_dist_file: file("popDistFile")?,
        val_size_dist_file: file("valSizeDistFile")?,
        ttl_secs_range: f.f64s("ttlSecsRange")?,
        ttl_secs_range_probability: f.f64s("ttlSecsRangeProbability")?,
        use_legacy_key_gen: f.bool("useLegacyKeyGen", false)?,
    };
    load_dist_files(&mut out, &f.place)?;
    if out
        .op_ratios
        .iter()
        .chain([&out.add_chained_ratio])
        .any(|r| *r < 0.0)
    {
        return Err(format!(
            "{}: operation ratios must not be negative",
            f.place
        ));
    }
    let (kr, kp) = (
        out.key_size_range.len(),
        out.key_size_range_probability.len(),
    );
    if kr != 0 && kr != kp + 1 {
        return Err(format!(
            "{}: keySizeRange has {kr} bounds and keySizeRangeProbability {kp} probabilities; \
             expected one more bound than probabilities",
            f.place
        ));
    }
    let (vr, vp) = (
        out.val_size_range.len(),
        out.val_size_range_probability.len(),
    );
    if vr != 0 && vr != vp && vr != vp + 1 {
        return Err(format!(
            "{}: valSizeRange has {vr} values and valSizeRangeProbability {vp}: expected the same \
             number (exact sizes) or one more (ranges)",
            f.place
        ));
    }
    if out.popularity_buckets.len() != out.popularity_weights.len() {
        return Err(format!(
            "{}: popularityBuckets has {} entries and popularityWeights {}; expected the same",
            f.place,
            out.popularity_buckets.len(),
            out.popularity_weights.len()
        ));
    }
    Ok(out)
}

/// Reads a distribution's `popDistFile` (popularityBuckets and
/// popularityWeights; its `oneHits` is left to loneGetRatio, which carries
/// the same share) and `valSizeDistFile` (valSizeRange and
/// valSizeRangeProbability), replacing what the config says inline, as
/// upstream.
fn load_dist_files(d: &mut DistributionConfig, place: &str) -> Result<(), String> {
    let read = |p: &Path, key: &str| -> Result<Map<String, Value>, String> {
        let text = std::fs::read_to_string(p)
            .map_err(|e| format!("{place}.{key}: cannot read {}: {e}", p.display()))?;
        match serde_json::from_str::<Value>(&strip(&text)) {
            Ok(Value::Object(o)) => Ok(o),
            Ok(_) => Err(format!(
                "{place}.{key}: {} is not a JSON object",
                p.display()
            )),
            Err(e) => Err(format!("{}:{}:{}: {e}", p.display(), e.line(), e.column())),
        }
    };
    if let Some(p) = d.pop_dist_file.clone() {
        let o = read(&p, "popDistFile")?;
        let f = Fields {
            obj: &o,
            place: p.display().to_string(),
        };
        d.popularity_buckets =
            f.list("popularityBuckets", Value::as_u64, "non-negative integers")?;
        d.popularity_weights = f.f64s("popularityWeights")?;
        if d.popularity_buckets.is_empty() {
            return Err(format!(
                "{}: needs popularityBuckets and popularityWeights",
                p.display()
            ));
        }
    }
    if let Some(p) = d.val_size_dist_file.clone() {
        let o = read(&p, "valSizeDistFile")?;
        let f = Fields {
            obj: &o,
            place: p.display().to_string(),
        };
        d.val_size_range = f.u32s("valSizeRange")?;
        d.val_size_range_probability = f.f64s("valSizeRangeProbability")?;
        if d.val_size_range.is_empty() {
            return Err(format!(
                "{}: needs valSizeRange and valSizeRangeProbability",
                p.display()
            ));
        }
    }
    Ok(())
}

/// The keys of the workload generators only (`workload`, `online`), and
/// of the replay generators only, for the warnings of the other kind.
const SYNTHETIC_ONLY: &[&str] = &["numKeys", "poolDistributions"];
const REPLAY_ONLY: &[&str] = &[
    "traceFileName",
    "traceFileNames",
    "replayGeneratorConfig",
    "repeatTraceReplay",
    "ignoreOpCount",
    "timestampFactor",
];

fn cache_section(
    c: &Map<String, Value>,
    place: &str,
    notes: &mut Notes,
) -> Result<CacheConfig, String> {
    check_keys(
        c,
        &[CACHE_KEYS],
        &[(TEST_KEYS, "test_config")],
        place,
        notes,
    )?;
    let cf = Fields {
        obj: c,
        place: place.to_string(),
    };
    let num_pools = cf.u64("numPools", 1)? as usize;
    // Upstream's default poolSizes is [1.0], so more pools need their sizes.
    let pool_sizes = if c.contains_key("poolSizes") {
        cf.f64s("poolSizes")?
    } else {
        vec![1.0]
    };
    if num_pools == 0 || pool_sizes.len() != num_pools {
        return Err(format!(
            "{place}: numPools is {num_pools} but poolSizes has {} entries; expected one size per pool \
             (upstream's default is [1.0], for one pool)",
            pool_sizes.len()
        ));
    }
    let sum: f64 = pool_sizes.iter().sum();
    if sum > 1.0 + 1e-6 || pool_sizes.iter().any(|p| *p < 0.0) {
        return Err(format!(
            "{place}.poolSizes {pool_sizes:?}: expected fractions summing to at most 1 (sum {sum})"
        ));
    }
    // Memory: private, on 2 MiB transparent huge pages when asked.
    let cache_dir = cf.string("cacheDir", "")?;
    match cf.string("shmType", "")?.as_str() {
        "" | "none" | "tmp" => {}
        t @ ("sysv" | "posix") => {
            if cache_dir.is_empty() {
                return Err(format!(
                    "{place}.shmType '{t}' requires a non-empty cacheDir (as upstream)"
                ));
            }
            notes.warn_strict(format!(
                "{place}.shmType ('{t}') is not modelled by rackbench, so it has no effect: {HEAP_MEMORY}"
            ));
        }
        t => {
            return Err(format!(
                "{place}.shmType: unknown shmType '{t}' (upstream's: none, tmp, sysv, posix)"
            ));
        }
    }
    let huge_pages = match cf.u64("hugePageSize", 0)? {
        0 => false,
        0x20_0000 => {
            notes.warn(format!(
                "{place}.hugePageSize (2097152): the slabs are put on transparent huge pages \
                 (madvise), where upstream maps hugetlbfs pages (which must be reserved)"
            ));
            true
        }
        0x4000_0000 => {
            return Err(format!(
                "{place}.hugePageSize (1073741824): 1 GiB huge pages are not supported (only 2 MiB \
                 ones, as transparent huge pages); remove the key or set it to 2097152"
            ));
        }
        n => {
            return Err(format!(
                "{place}.hugePageSize: unsupported huge page size {n} (as upstream; 2097152 is \
                 supported)"
            ));
        }
    };
    if let Some(tiers) = c.get("memoryTiers") {
        let Value::Array(list) = tiers else {
            return Err(cf.err("memoryTiers", "a list of tier objects", tiers));
        };
        for (i, t) in list.iter().enumerate() {
            let p = format!("{place}.memoryTiers[{i}]");
            check_keys(object(t, &p)?, &[TIER_KEYS], &[], &p, notes)?;
        }
        match list.len() {
            0 => {}
            1 => notes.warn_strict(format!(
                "{place}.memoryTiers (one tier, memBindNodes {}) is not modelled by rackbench: the \
                 cache's memory is not bound to those NUMA nodes",
                list[0].get("memBindNodes").map_or("none".into(), shown)
            )),
            n => {
                return Err(format!(
                    "{place}.memoryTiers: {n} memory tiers are not supported (one tier of ordinary \
                     memory only); remove the key"
                ));
            }
        }
    }
    let ticker = cf.bool("useTraceTimeStamp", false)?;
    let sync_secs = cf.u64("tickerSynchingSeconds", 0)?;
    if ticker && sync_secs > 0 {
        return Err(format!(
            "{place}: useTraceTimeStamp with tickerSynchingSeconds ({sync_secs}): a cache clock that \
             follows the trace's timestamps is not supported; remove the keys"
        ));
    } else if ticker || sync_secs > 0 {
        notes.warn(format!(
            "{place}: useTraceTimeStamp and tickerSynchingSeconds have no effect one without the \
             other, as upstream"
        ));
    }
    Ok(CacheConfig {
        allocator: cf.string("allocator", "LRU")?,
        cache_size_mb: cf.u64("cacheSizeMB", 0)?,
        num_pools,
        pool_sizes,
        alloc_factor: cf.f64("allocFactor", 1.5)?,
        min_alloc_size: cf.u64("minAllocSize", 64)? as u32,
        max_alloc_size: cf.u64("maxAllocSize", 1 << 20)? as u32,
        alloc_sizes: cf.u32s("allocSizes")?,
        ht_bucket_power: cf.u64("htBucketPower", 22)? as u32,
        lru_refresh_sec: cf.u64("lruRefreshSec", 60)? as u32,
        lru_refresh_ratio: cf.f64("lruRefreshRatio", 0.1)?,
        lru_update_on_read: cf.bool("lruUpdateOnRead", true)?,
        lru_update_on_write: cf.bool("lruUpdateOnWrite", false)?,
        lru_ip_spec: cf.u64("lruIpSpec", 0)? as u32,
        lru2q_hot_pct: cf.u64("lru2qHotPct", 20)? as u32,
        lru2q_cold_pct: cf.u64("lru2qColdPct", 20)? as u32,
        nvm_cache_size_mb: cf.u64("nvmCacheSizeMB", 0)?,
        nvm_cache_paths: cf.strings("nvmCachePaths")?,
        write_amp_devices: cf.strings("writeAmpDeviceList")?,
        nvm: nvm_keys(&cf)?,
        pool_rebalance_interval_sec: cf.u64("poolRebalanceIntervalSec", 0)?,
        rebalance_strategy: cf.string("rebalanceStrategy", "")?,
        rebalance_min_slabs: cf.u64("rebalanceMinSlabs", 1)?,
        rebalance_diff_ratio: cf.f64("rebalanceDiffRatio", 0.25)?,
        move_on_slab_release: cf.bool("moveOnSlabRelease", false)?,
        huge_pages,
        print_nvm_counters: cf.bool("printNvmCounters", false)?,
    })
}

fn instance(v: &Value, place: &str, dir: &Path, notes: &mut Notes) -> Result<BenchConfig, String> {
    let top = object(v, place)?;
    let top_place = match place.trim_end_matches('.') {
        "" => "the top level",
        p => p,
    };
    check_keys(top, &[TOP_KEYS], &[], top_place, notes)?;
    let empty = Value::Object(Map::new());
    let c = object(
        top.get("cache_config").unwrap_or(&empty),
        &format!("{place}cache_config"),
    )?;
    let t = object(
        top.get("test_config").unwrap_or(&empty),
        &format!("{place}test_config"),
    )?;
    let tp = format!("{place}test_config");
    check_keys(
        t,
        &[TEST_KEYS, DISTRIBUTION_KEYS],
        &[
            (CACHE_KEYS, "cache_config"),
            (REPLAY_KEYS, "replayGeneratorConfig"),
        ],
        &tp,
        notes,
    )?;
    let tf = Fields {
        obj: t,
        place: tp.clone(),
    };
    // The stressor and the generator, refused by name before anything else.
    check_stressor_name(&tf)?;
    let generator = generator_name(&tf)?;
    let replaying = matches!(
        generator.as_str(),
        "replay" | "binary-replay" | "piecewise-replay" | "block-replay"
    );
    let cache = cache_section(c, &format!("{place}cache_config"), notes)?;
    check_dram_iterator(&tf, notes)?;
    // Files named in the config are relative to configPath.
    let config_path = match tf.string("configPath", "")?.as_str() {
        "" => dir.to_path_buf(),
        p => PathBuf::from(p),
    };
    // The distributions: the test's own, or each pool's alone.
    let distribution = distribution(&tf, &config_path)?;
    let pool_distributions = pool_distributions(&tf, &config_path, replaying, notes)?;
    warn_generator_keys(&tf, &generator, replaying, &pool_distributions, notes);
    let num_threads = tf.u64("numThreads", 0)? as usize;
    let (key_pool_distribution, op_pool_distribution) = pool_shares(&tf, cache.num_pools)?;
    let trace_files = trace_files(&tf, &config_path)?;
    let replay = match tf.object("replayGeneratorConfig")? {
        None => ReplayConfig {
            amp_factor: 1,
            amp_size_factor: 1,
            binary_file_name: None,
            fast_forward_count: 0,
            serialization: Serialization::Strict,
            aggregation_fields: 0,
            extra_fields: 0,
            stats_per_field: Vec::new(),
            block_size_kb: 16 * 1024,
            chunk_size_kb: 128,
        },
        Some(o) => replay_config(o, &tp, &config_path, notes)?,
    };
    warn_replay_keys(&replay, &tp, &generator, notes);
    let check_consistency = tf.bool("checkConsistency", false)?;
    if replaying && check_consistency {
        return Err(format!(
            "{tp}: checkConsistency with the {generator} generator: upstream refuses it too \
             ('Cannot replay traces with consistency checking enabled')"
        ));
    }
    let nvm_warmup_check = warmup_check(&tf, notes)?;
    let timestamp_factor = tf.u64("timestampFactor", 1000)?;
    if timestamp_factor == 0 {
        return Err(format!(
            "{tp}.timestampFactor is 0: expected the units of a second in the trace's op_time \
             (upstream's default 1000: milliseconds)"
        ));
    }
    let test = TestConfig {
        repeat_trace_replay: tf.bool("repeatTraceReplay", false)?,
        ignore_op_count: tf.bool("ignoreOpCount", false)?,
        timestamp_factor,
        check_consistency,
        max_inconsistency_count: tf.u64("maxInconsistencyCount", 50)?,
        populate_item: tf.bool("populateItem", true)?,
        touch_value: tf.bool("touchValue", false)?,
        nvm_warmup_check,
        op_rate_per_sec: tf.u64("opRatePerSec", 0)?,
        op_rate_burst_size: tf.u64("opRateBurstSize", 0)?,
        op_delay_batch: tf.u64("opDelayBatch", 0)?,
        op_delay_ns: tf.u64("opDelayNs", 0)?,
        generator,
        num_ops: tf.u64("numOps", 0)?,
        num_threads,
        num_keys: tf.u64("numKeys", 0)?,
        enable_lookaside: tf.bool("enableLookaside", false)?,
        only_set_if_miss: tf.bool("onlySetIfMiss", false)?,
        key_pool_distribution,
        op_pool_distribution,
        distribution,
        pool_distributions,
        trace_files,
        config_path,
        replay,
        cache_piece_size: tf.u64("cachePieceSize", 65536)?,
        max_cache_pieces: tf.u64("maxCachePieces", 32000)?,
    };
    Ok(BenchConfig {
        cache,
        test,
        raw: v.clone(),
    })
}

/// test_config.name: upstream's other stressors are refused by name.
fn check_stressor_name(tf: &Fields) -> Result<(), String> {
    let tp = &tf.place;
    let name = tf.string("name", "")?;
    if let Some((n, what)) = STRESSOR_NAMES.iter().find(|(n, _)| *n == name) {
        return Err(format!(
            "{tp}.name '{n}': {what} is not supported by rackbench (it runs upstream's default \
             cache stressor, which upstream runs for an empty name or any name not its own)"
        ));
    }
    Ok(())
}

/// test_config.generator, "workload" when empty (upstream's default).
fn generator_name(tf: &Fields) -> Result<String, String> {
    let tp = &tf.place;
    Ok(match tf.string("generator", "")?.as_str() {
        // Upstream runs its workload generator for "" (its default).
        "" => "workload".to_string(),
        g if GENERATORS.contains(&g) => g.to_string(),
        g => {
            return Err(match REFUSED_GENERATORS.iter().find(|(n, _)| *n == g) {
                Some((n, what)) => format!(
                    "{tp}.generator '{n}': {what} is not supported by rackbench (supported: {})",
                    GENERATORS.join(", ")
                ),
                None => format!(
                    "{tp}.generator '{g}': unsupported generator (upstream's words: 'Invalid \
                     config: unsupported generator {g}'; rackbench runs {})",
                    GENERATORS.join(", ")
                ),
            });
        }
    })
}

/// DRAM iterator sweeps (off by default): only "disabled" is run.
fn check_dram_iterator(tf: &Fields, notes: &mut Notes) -> Result<(), String> {
    let (t, tp) = (tf.obj, &tf.place);
    let mode = tf.string("dramIteratorMode", "disabled")?;
    match mode.as_str() {
        "disabled" => {
            for k in [
                "dramIteratorIntervalMs",
                "dramIteratorSleepMs",
                "dramIteratorWorkMs",
            ] {
                if t.contains_key(k) {
                    notes.warn(format!(
                        "{tp}: '{k}' has no effect, as upstream: dramIteratorMode is 'disabled'"
                    ));
                }
            }
        }
        "regular" | "lock_group" => {
            return Err(format!(
                "{tp}.dramIteratorMode '{mode}': DRAM iterator sweeps in the background are not \
                 supported; remove the key (or set it to \"disabled\")"
            ));
        }
        m => {
            return Err(format!(
                "{tp}.dramIteratorMode: Unsupported dramIteratorMode: {m} (as upstream)"
            ));
        }
    }
    Ok(())
}

/// test_config.poolDistributions: each pool's own distribution.
fn pool_distributions(
    tf: &Fields,
    config_path: &Path,
    replaying: bool,
    notes: &mut Notes,
) -> Result<Vec<DistributionConfig>, String> {
    let (t, tp) = (tf.obj, &tf.place);
    let mut pool_distributions = Vec::new();
    if let Some(pd) = t.get("poolDistributions") {
        let Value::Array(list) = pd else {
            return Err(tf.err("poolDistributions", "a list of distribution objects", pd));
        };
        for k in t.keys() {
            if find_key(DISTRIBUTION_KEYS, k).is_some() && !replaying {
                notes.warn(format!(
                    "{tp}: '{k}' has no effect, as upstream: with poolDistributions each pool's \
                     distribution is read from its entry alone"
                ));
            }
        }
        for (i, d) in list.iter().enumerate() {
            let p = format!("{tp}.poolDistributions[{i}]");
            let o = object(d, &p)?;
            check_keys(o, &[DISTRIBUTION_KEYS], &[], &p, notes)?;
            pool_distributions.push(self::distribution(
                &Fields { obj: o, place: p },
                config_path,
            )?);
        }
    }
    Ok(pool_distributions)
}

/// What one kind of generator reads and the other ignores (upstream too).
fn warn_generator_keys(
    tf: &Fields,
    generator: &str,
    replaying: bool,
    pool_distributions: &[DistributionConfig],
    notes: &mut Notes,
) {
    let (t, tp) = (tf.obj, &tf.place);
    for k in t.keys() {
        let synthetic_only =
            SYNTHETIC_ONLY.contains(&k.as_str()) || find_key(DISTRIBUTION_KEYS, k).is_some();
        if replaying && synthetic_only {
            notes.warn(format!(
                "{tp}: '{k}' has no effect with the {generator} generator, as upstream (the trace \
                 gives the keys, sizes and operations)"
            ));
        } else if !replaying && REPLAY_ONLY.contains(&k.as_str()) {
            notes.warn(format!(
                "{tp}: '{k}' has no effect with the {generator} generator, as upstream (only the \
                 replay generators read it)"
            ));
        } else if generator == "online" && (k == "ttlSecsRange" || k == "ttlSecsRangeProbability") {
            notes.warn(format!(
                "{tp}: '{k}' has no effect with the online generator, as upstream (only the \
                 workload generator draws TTLs)"
            ));
        }
    }
    if generator == "online"
        && pool_distributions
            .iter()
            .any(|d| !d.ttl_secs_range.is_empty() || !d.ttl_secs_range_probability.is_empty())
    {
        notes.warn(format!(
            "{tp}.poolDistributions: ttlSecsRange has no effect with the online generator, as \
             upstream (only the workload generator draws TTLs)"
        ));
    }
}

/// keyPoolDistribution and opPoolDistribution, checked against numPools.
fn pool_shares(tf: &Fields, num_pools: usize) -> Result<(Vec<f64>, Vec<f64>), String> {
    let (t, tp) = (tf.obj, &tf.place);
    // Upstream's defaults are [1.0]: all keys and operations in pool 0.
    let pool_dist = |key: &str| -> Result<Vec<f64>, String> {
        if t.contains_key(key) {
            tf.f64s(key)
        } else {
            Ok(vec![1.0])
        }
    };
    let key_pool_distribution = pool_dist("keyPoolDistribution")?;
    let op_pool_distribution = pool_dist("opPoolDistribution")?;
    // As upstream's CacheStressor: every pool gets its share of the keys;
    // operations may leave the last pools out.
    if key_pool_distribution.len() != num_pools {
        return Err(format!(
            "{tp}.keyPoolDistribution has {} entries but numPools is {num_pools}; \
             expected one per pool (upstream's default is [1.0], for one pool)",
            key_pool_distribution.len()
        ));
    }
    if op_pool_distribution.len() > num_pools {
        return Err(format!(
            "{tp}.opPoolDistribution has {} entries but numPools is {num_pools}; \
             expected at most one per pool",
            op_pool_distribution.len()
        ));
    }
    Ok((key_pool_distribution, op_pool_distribution))
}

/// traceFileName or traceFileNames, in configPath.
fn trace_files(tf: &Fields, config_path: &Path) -> Result<Vec<PathBuf>, String> {
    let tp = &tf.place;
    let trace_name = tf.string("traceFileName", "")?;
    let trace_names = tf.strings("traceFileNames")?;
    if !trace_name.is_empty() && !trace_names.is_empty() {
        return Err(format!(
            "{tp}: set only one of traceFileName or traceFileNames (as upstream)"
        ));
    }
    Ok(if trace_name.is_empty() {
        trace_names
            .iter()
            .map(|s| in_config_dir(config_path, s))
            .collect()
    } else {
        vec![in_config_dir(config_path, &trace_name)]
    })
}

/// test_config.replayGeneratorConfig, when given.
fn replay_config(
    o: &Map<String, Value>,
    tp: &str,
    config_path: &Path,
    notes: &mut Notes,
) -> Result<ReplayConfig, String> {
    let p = format!("{tp}.replayGeneratorConfig");
    check_keys(o, &[REPLAY_KEYS], &[], &p, notes)?;
    if let Some(ml) = o.get("mlAdmissionConfig")
        && let Some(m) = ml.as_object()
    {
        check_keys(m, &[ML_KEYS], &[], &format!("{p}.mlAdmissionConfig"), notes)?;
    }
    let rf = Fields { obj: o, place: p };
    let serialization = match rf.string("replaySerializationMode", "strict")?.as_str() {
        "strict" => Serialization::Strict,
        "relaxed" | "none" => Serialization::Random,
        m => {
            return Err(format!(
                "{}.replaySerializationMode: Unsupported request serialization mode: {m} \
                 (as upstream; expected strict, relaxed or none)",
                rf.place
            ));
        }
    };
    let factor = |k: &str| -> Result<u32, String> {
        let f = rf.u64(k, 1)?;
        u32::try_from(f)
            .ok()
            .filter(|f| *f >= 1)
            .ok_or_else(|| format!("{}.{k} is {f}: expected 1 to {}", rf.place, u32::MAX))
    };
    Ok(ReplayConfig {
        amp_factor: factor("ampFactor")?,
        amp_size_factor: factor("ampSizeFactor")?,
        binary_file_name: match rf.string("binaryFileName", "")?.as_str() {
            "" => None,
            b => Some(in_config_dir(config_path, b)),
        },
        fast_forward_count: rf.u64("fastForwardCount", 0)?,
        serialization,
        aggregation_fields: u32::try_from(rf.u64("numAggregationFields", 0)?)
            .map_err(|_| format!("{}.numAggregationFields: too large", rf.place))?,
        extra_fields: u32::try_from(rf.u64("numExtraFields", 0)?)
            .map_err(|_| format!("{}.numExtraFields: too large", rf.place))?,
        stats_per_field: stats_per_field(&rf)?,
        block_size_kb: rf.u64("blockSizeKB", 16 * 1024)?,
        chunk_size_kb: rf.u64("chunkSizeKB", 128)?,
    })
}

/// replayGeneratorConfig.statsPerAggField: field index -> values.
fn stats_per_field(rf: &Fields) -> Result<Vec<(u32, Vec<String>)>, String> {
    let Some(m) = rf.object("statsPerAggField")? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (k, v) in m {
        let idx: u32 = k.parse().map_err(|_| {
            format!(
                "{}.statsPerAggField: key '{k}': expected an aggregation \
                 field index (0, 1, ...)",
                rf.place
            )
        })?;
        let vals = v
            .as_array()
            .and_then(|a| {
                a.iter()
                    .map(|x| x.as_str().map(str::to_string))
                    .collect::<Option<Vec<String>>>()
            })
            .ok_or_else(|| {
                format!(
                    "{}.statsPerAggField.{k}: expected a list of strings, got {v}",
                    rf.place
                )
            })?;
        out.push((idx, vals));
    }
    Ok(out)
}

/// replayGeneratorConfig keys the generator ignores (upstream too).
fn warn_replay_keys(replay: &ReplayConfig, tp: &str, generator: &str, notes: &mut Notes) {
    if replay.binary_file_name.is_some() && generator != "replay" {
        notes.warn(format!(
            "{tp}.replayGeneratorConfig: 'binaryFileName' has no effect with the {generator} \
             generator, as upstream (only the replay generator writes a binary trace)"
        ));
    }
    if replay.amp_size_factor != 1
        && !(generator == "binary-replay" || replay.binary_file_name.is_some())
    {
        notes.warn(format!(
            "{tp}.replayGeneratorConfig: 'ampSizeFactor' has no effect with the {generator} \
             generator, as upstream (only binary traces use it)"
        ));
    }
}

/// checkNvmCacheWarmUp with its nvmCacheWarmupCheckPolicy.
fn warmup_check(tf: &Fields, notes: &mut Notes) -> Result<Option<WarmupCheck>, String> {
    let (t, tp) = (tf.obj, &tf.place);
    if !tf.bool("checkNvmCacheWarmUp", false)? {
        if t.contains_key("nvmCacheWarmupCheckPolicy") {
            notes.warn(format!(
                "{tp}: 'nvmCacheWarmupCheckPolicy' has no effect, as upstream: \
                 checkNvmCacheWarmUp is off"
            ));
        }
        return Ok(None);
    }
    Ok(Some(match tf.object("nvmCacheWarmupCheckPolicy")? {
        // Upstream's default policy: warm after the first NVM eviction.
        None => WarmupCheck {
            eviction_count_threshold: 1,
            request_timestamp_threshold: 0,
        },
        Some(o) => {
            let p = format!("{tp}.nvmCacheWarmupCheckPolicy");
            check_keys(o, &[WARMUP_KEYS], &[], &p, notes)?;
            let wf = Fields { obj: o, place: p };
            WarmupCheck {
                eviction_count_threshold: wf.u64("evictionCountThreshold", 0)?,
                request_timestamp_threshold: wf.u64("requestTimestampThreshold", 0)?,
            }
        }
    }))
}

fn nvm_keys(cf: &Fields) -> Result<NvmKeys, String> {
    let p = cf.f64("navyAdmissionProbability", 1.0)?;
    if !(0.0..=1.0).contains(&p) {
        return Err(format!(
            "{}.navyAdmissionProbability: expected a probability from 0 to 1, got {p}",
            cf.place
        ));
    }
    let pct = cf.u64("navyProbabilityReinsertionThreshold", 0)?;
    if pct > 100 {
        return Err(format!(
            "{}.navyProbabilityReinsertionThreshold: expected a percentage from 0 to 100, got {pct}",
            cf.place
        ));
    }
    Ok(NvmKeys {
        block_size: cf.u64("navyBlockSize", 512)?,
        region_size_mb: cf.u64("navyRegionSizeMB", 16)?,
        segmented_fifo_segment_ratio: cf.u32s("navySegmentedFifoSegmentRatio")?,
        big_hash_size_pct: cf.u64("navyBigHashSizePct", 50)?,
        big_hash_bucket_size: cf.u64("navyBigHashBucketSize", 4096)?,
        bloom_filter_per_bucket_size: cf.u64("navyBloomFilterPerBucketSize", 8)?,
        small_item_max_size: cf.u64("navySmallItemMaxSize", 2048)?,
        hits_reinsertion_threshold: cf.u64("navyHitsReinsertionThreshold", 0)?,
        probability_reinsertion_threshold: pct,
        clean_regions: cf.u64("navyCleanRegions", 1)?,
        admission_write_rate_mb: cf.u64("navyAdmissionWriteRateMB", 0)?,
        admission_probability: p,
        data_checksum: cf.bool("navyDataChecksum", true)?,
        device_max_write_size: cf.u64("deviceMaxWriteSize", 1 << 20)?,
        memory_only_ttl: cf.u64("memoryOnlyTTL", 0)?,
        encryption: cf.bool("navyEncryption", false)?,
        admission_retention_time_threshold: cf.u64("nvmAdmissionRetentionTimeThreshold", 0)?,
        metadata_size_mb: cf.u64("nvmCacheMetadataSizeMB", 0)?,
        truncate_to_original: cf.bool("truncateItemToOriginalAllocSizeInNvm", false)?,
    })
}

/// Configs compiled into the binary, named `builtin:NAME` on the command
/// line (the jobs use them, so they run from any folder).
pub const BUILTIN: &[(&str, &str)] = &[
    ("dram_simple", include_str!("../configs/dram_simple.json")),
    ("dram_mini", include_str!("../configs/dram_mini.json")),
    ("hybrid_mini", include_str!("../configs/hybrid_mini.json")),
    ("hybrid_ssd", include_str!("../configs/hybrid_ssd.json")),
];

/// Reads a config file (or `builtin:NAME`); `strict` turns the warnings
/// about unknown keys and keys rackbench does not model into errors.
pub fn load(path: &Path, strict: bool) -> Result<Loaded, ConfigError> {
    let label = path.display().to_string();
    if let Some(name) = label.strip_prefix("builtin:") {
        let Some((_, text)) = BUILTIN.iter().find(|(n, _)| *n == name) else {
            return Err(ConfigError::Invalid {
                path: label.clone(),
                message: format!(
                    "no built-in config '{name}' (built in: {})",
                    BUILTIN
                        .iter()
                        .map(|(n, _)| *n)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        };
        return parse(text.to_string(), &label, Path::new("."), strict);
    }
    let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
        path: label.clone(),
        error,
    })?;
    parse(
        text,
        &label,
        path.parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new(".")),
        strict,
    )
}

fn parse(text: String, label: &str, dir: &Path, strict: bool) -> Result<Loaded, ConfigError> {
    let label = label.to_string();
    let v: Value = serde_json::from_str(&strip(&text)).map_err(|e| ConfigError::Syntax {
        path: label.clone(),
        line: e.line(),
        column: e.column(),
        message: e
            .to_string()
            .split(" at line ")
            .next()
            .unwrap_or("")
            .to_string(),
    })?;
    let mut notes = Notes::default();
    let invalid = |message: String| ConfigError::Invalid {
        path: label.clone(),
        message,
    };
    let instances = match &v {
        Value::Array(list) => {
            if list.is_empty() {
                return Err(invalid("the top-level array has no instances".into()));
            }
            list.iter()
                .enumerate()
                .map(|(i, x)| instance(x, &format!("[{i}]."), dir, &mut notes))
                .collect::<Result<Vec<_>, _>>()
                .map_err(invalid)?
        }
        _ => vec![instance(&v, "", dir, &mut notes).map_err(invalid)?],
    };
    let refused: Vec<&str> = notes
        .warnings
        .iter()
        .filter(|w| w.strict)
        .map(|w| w.text.as_str())
        .collect();
    if strict && !refused.is_empty() {
        return Err(invalid(format!(
            "--strict refuses keys rackbench does not know or does not model:\n  {}",
            refused.join("\n  ")
        )));
    }
    // The same warning for several instances of an array is said once,
    // naming them all (`[0,1,4].cache_config...`).
    let mut grouped: Vec<(Vec<String>, String)> = Vec::new();
    for w in notes.warnings {
        let (instance, rest) = match w.text.strip_prefix('[').and_then(|s| s.split_once("].")) {
            Some((i, rest)) if i.chars().all(|c| c.is_ascii_digit()) => {
                (Some(i.to_string()), rest.to_string())
            }
            _ => (None, w.text.clone()),
        };
        match (instance, grouped.iter_mut().find(|(_, r)| *r == rest)) {
            (Some(i), Some((list, _))) if !list.is_empty() => list.push(i),
            (Some(i), _) => grouped.push((vec![i], rest)),
            (None, _) => grouped.push((Vec::new(), rest)),
        }
    }
    let warnings: Vec<String> = grouped
        .into_iter()
        .map(|(list, rest)| match list.is_empty() {
            true => format!("{label}: {rest}"),
            false => format!("{label}: [{}].{rest}", list.join(",")),
        })
        .collect();
    Ok(Loaded {
        instances,
        warnings,
        text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conformance() -> PathBuf {
        testenv::conformance_root()
            .unwrap_or_default()
            .join("cachebench/test_configs")
    }

    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "json") {
                out.push(p);
            }
        }
    }

    #[test]
    fn every_upstream_config_loads_or_is_refused_by_name() {
        testenv::conformance_or_return!("cachebench/test_configs");
        let mut files = Vec::new();
        walk(&conformance(), &mut files);
        assert!(files.len() > 50, "{}", files.len());
        let mut multi = 0;
        let mut refused = 0;
        // Distribution data files (popDistFile, valSizeDistFile) sit beside
        // the configs; a config has cache_config or test_config.
        files.retain(|f| {
            let v: Value =
                serde_json::from_str(&strip(&std::fs::read_to_string(f).unwrap())).unwrap();
            let is_config =
                |o: &Value| o.get("cache_config").is_some() || o.get("test_config").is_some();
            match &v {
                Value::Array(a) => a.iter().any(is_config),
                o => is_config(o),
            }
        });
        assert_eq!(files.len(), 96, "configs");
        for f in &files {
            match load(f, false) {
                Ok(l) => {
                    // Every key of upstream's own files is known.
                    for w in &l.warnings {
                        assert!(!w.contains("unknown key"), "{w}");
                    }
                    multi += usize::from(l.instances.len() > 1);
                }
                Err(e) => {
                    let e = e.to_string();
                    assert!(e.contains("not supported"), "{}: {e}", f.display());
                    refused += 1;
                }
            }
        }
        assert!(multi >= 1);
        assert!((5..20).contains(&refused), "{refused} refused");
        let l = load(&conformance().join("simple_test.json"), false).unwrap();
        let i = &l.instances[0];
        assert_eq!(i.cache.cache_size_mb, 512);
        assert_eq!(i.cache.pool_sizes, vec![0.3, 0.7]);
        assert_eq!(i.test.num_threads, 32);
        assert_eq!(
            i.test.distribution.val_size_range,
            vec![1, 32, 10240, 409200]
        );
        assert_eq!(i.test.distribution.op_ratios[..3], [0.15, 0.8, 0.05]);
        assert!(l.text.starts_with("// @nolint"));
    }

    /// Every key's default when the config leaves it out, against
    /// upstream's (CacheLib `cachelib/cachebench/util/CacheConfig.h`,
    /// `Config.h` and `Config.cpp` at 278ffc7; the left column is
    /// upstream's value, the right one what we parsed).
    #[test]
    fn defaults_are_upstreams() {
        use serde_json::json;
        let (_d, p) = write(r#"{"cache_config": {}, "test_config": {}}"#);
        let l = load(&p, true).unwrap();
        let c = &l.instances[0].cache;
        let n = &c.nvm;
        let t = &l.instances[0].test;
        let d = &t.distribution;
        let table: Vec<(&str, Value, Value)> = vec![
            // CacheConfig.
            ("allocator", json!("LRU"), json!(c.allocator)),
            ("cacheSizeMB", json!(0), json!(c.cache_size_mb)),
            (
                "poolRebalanceIntervalSec",
                json!(0),
                json!(c.pool_rebalance_interval_sec),
            ),
            ("rebalanceStrategy", json!(""), json!(c.rebalance_strategy)),
            ("rebalanceMinSlabs", json!(1), json!(c.rebalance_min_slabs)),
            (
                "rebalanceDiffRatio",
                json!(0.25),
                json!(c.rebalance_diff_ratio),
            ),
            (
                "moveOnSlabRelease",
                json!(false),
                json!(c.move_on_slab_release),
            ),
            ("htBucketPower", json!(22), json!(c.ht_bucket_power)),
            ("lruRefreshSec", json!(60), json!(c.lru_refresh_sec)),
            ("lruRefreshRatio", json!(0.1), json!(c.lru_refresh_ratio)),
            (
                "lruUpdateOnWrite",
                json!(false),
                json!(c.lru_update_on_write),
            ),
            ("lruUpdateOnRead", json!(true), json!(c.lru_update_on_read)),
            ("lruIpSpec", json!(0), json!(c.lru_ip_spec)),
            ("lru2qHotPct", json!(20), json!(c.lru2q_hot_pct)),
            ("lru2qColdPct", json!(20), json!(c.lru2q_cold_pct)),
            ("allocFactor", json!(1.5), json!(c.alloc_factor)),
            ("maxAllocSize", json!(1024 * 1024), json!(c.max_alloc_size)),
            ("minAllocSize", json!(64), json!(c.min_alloc_size)),
            ("allocSizes", json!([]), json!(c.alloc_sizes)),
            ("numPools", json!(1), json!(c.num_pools)),
            ("poolSizes", json!([1.0]), json!(c.pool_sizes)),
            ("nvmCachePaths", json!([]), json!(c.nvm_cache_paths)),
            ("writeAmpDeviceList", json!([]), json!(c.write_amp_devices)),
            ("nvmCacheSizeMB", json!(0), json!(c.nvm_cache_size_mb)),
            ("navyBlockSize", json!(512), json!(n.block_size)),
            ("navyRegionSizeMB", json!(16), json!(n.region_size_mb)),
            (
                "navySegmentedFifoSegmentRatio",
                json!([]),
                json!(n.segmented_fifo_segment_ratio),
            ),
            ("navyBigHashSizePct", json!(50), json!(n.big_hash_size_pct)),
            (
                "navyBigHashBucketSize",
                json!(4096),
                json!(n.big_hash_bucket_size),
            ),
            (
                "navyBloomFilterPerBucketSize",
                json!(8),
                json!(n.bloom_filter_per_bucket_size),
            ),
            (
                "navySmallItemMaxSize",
                json!(2048),
                json!(n.small_item_max_size),
            ),
            (
                "navyHitsReinsertionThreshold",
                json!(0),
                json!(n.hits_reinsertion_threshold),
            ),
            (
                "navyProbabilityReinsertionThreshold",
                json!(0),
                json!(n.probability_reinsertion_threshold),
            ),
            ("navyCleanRegions", json!(1), json!(n.clean_regions)),
            (
                "navyAdmissionWriteRateMB",
                json!(0),
                json!(n.admission_write_rate_mb),
            ),
            ("navyDataChecksum", json!(true), json!(n.data_checksum)),
            ("navyEncryption", json!(false), json!(n.encryption)),
            (
                "deviceMaxWriteSize",
                json!(1024 * 1024),
                json!(n.device_max_write_size),
            ),
            ("memoryOnlyTTL", json!(0), json!(n.memory_only_ttl)),
            (
                "nvmCacheMetadataSizeMB",
                json!(0),
                json!(n.metadata_size_mb),
            ),
            (
                "truncateItemToOriginalAllocSizeInNvm",
                json!(false),
                json!(n.truncate_to_original),
            ),
            ("hugePageSize (0: off)", json!(false), json!(c.huge_pages)),
            (
                "printNvmCounters",
                json!(false),
                json!(c.print_nvm_counters),
            ),
            (
                "nvmAdmissionRetentionTimeThreshold",
                json!(0),
                json!(n.admission_retention_time_threshold),
            ),
            // StressorConfig ("" is upstream's workload generator).
            ("generator", json!("workload"), json!(t.generator)),
            ("enableLookaside", json!(false), json!(t.enable_lookaside)),
            ("onlySetIfMiss", json!(false), json!(t.only_set_if_miss)),
            ("checkConsistency", json!(false), json!(t.check_consistency)),
            ("numOps", json!(0), json!(t.num_ops)),
            ("numThreads", json!(0), json!(t.num_threads)),
            ("numKeys", json!(0), json!(t.num_keys)),
            ("opDelayBatch", json!(0), json!(t.op_delay_batch)),
            ("opDelayNs", json!(0), json!(t.op_delay_ns)),
            ("opRatePerSec", json!(0), json!(t.op_rate_per_sec)),
            ("opRateBurstSize", json!(0), json!(t.op_rate_burst_size)),
            (
                "opPoolDistribution",
                json!([1.0]),
                json!(t.op_pool_distribution),
            ),
            (
                "keyPoolDistribution",
                json!([1.0]),
                json!(t.key_pool_distribution),
            ),
            ("traceFileName(s)", json!([]), json!(t.trace_files)),
            (
                "repeatTraceReplay",
                json!(false),
                json!(t.repeat_trace_replay),
            ),
            (
                "poolDistributions (count)",
                json!(0),
                json!(t.pool_distributions.len()),
            ),
            // ReplayGeneratorConfig.
            ("ampFactor", json!(1), json!(t.replay.amp_factor)),
            ("ampSizeFactor", json!(1), json!(t.replay.amp_size_factor)),
            (
                "fastForwardCount",
                json!(0),
                json!(t.replay.fast_forward_count),
            ),
            (
                "binaryFileName",
                json!(null),
                json!(t.replay.binary_file_name),
            ),
            (
                "replaySerializationMode (strict)",
                json!(true),
                json!(t.replay.serialization == Serialization::Strict),
            ),
            ("ignoreOpCount", json!(false), json!(t.ignore_op_count)),
            ("populateItem", json!(true), json!(t.populate_item)),
            ("touchValue", json!(false), json!(t.touch_value)),
            (
                "maxInconsistencyCount",
                json!(50),
                json!(t.max_inconsistency_count),
            ),
            ("timestampFactor", json!(1000), json!(t.timestamp_factor)),
            (
                "checkNvmCacheWarmUp",
                json!(false),
                json!(t.nvm_warmup_check.is_some()),
            ),
            // DistributionConfig.
            ("keySizeRange", json!([]), json!(d.key_size_range)),
            (
                "keySizeRangeProbability",
                json!([]),
                json!(d.key_size_range_probability),
            ),
            ("valSizeRange", json!([]), json!(d.val_size_range)),
            (
                "valSizeRangeProbability",
                json!([]),
                json!(d.val_size_range_probability),
            ),
            (
                "chainedItemLengthRange",
                json!([]),
                json!(d.chained_length_range),
            ),
            (
                "chainedItemLengthRangeProbability",
                json!([]),
                json!(d.chained_length_probability),
            ),
            (
                "chainedItemValSizeRange",
                json!([]),
                json!(d.chained_val_size_range),
            ),
            (
                "chainedItemValSizeRangeProbability",
                json!([]),
                json!(d.chained_val_size_probability),
            ),
            ("ttlSecsRange", json!([]), json!(d.ttl_secs_range)),
            (
                "ttlSecsRangeProbability",
                json!([]),
                json!(d.ttl_secs_range_probability),
            ),
            ("useLegacyKeyGen", json!(false), json!(d.use_legacy_key_gen)),
            ("popularityBuckets", json!([]), json!(d.popularity_buckets)),
            ("popularityWeights", json!([]), json!(d.popularity_weights)),
            (
                "getRatio, setRatio, delRatio, loneGetRatio, loneSetRatio, updateRatio, couldExistRatio",
                json!([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
                json!(d.op_ratios),
            ),
            ("addChainedRatio", json!(0.0), json!(d.add_chained_ratio)),
        ];
        let wrong: Vec<String> = table
            .iter()
            .filter(|(_, up, ours)| up != ours)
            .map(|(k, up, ours)| format!("{k}: upstream {up}, ours {ours}"))
            .collect();
        assert!(
            wrong.is_empty(),
            "defaults that differ:\n{}",
            wrong.join("\n")
        );
        // Upstream's "" generator is its workload generator.
        let (_d, p) = write(r#"{"cache_config": {}, "test_config": {"generator": ""}}"#);
        assert_eq!(
            load(&p, true).unwrap().instances[0].test.generator,
            "workload"
        );
    }

    /// Keys upstream parses and never uses are not silently taken: each
    /// gets a warning saying it has no effect (as upstream).
    #[test]
    fn keys_without_effect_upstream_warn() {
        let (_d, p) = write(
            r#"{"cache_config": {"cacheSizeMB": 64, "lruRefreshRatio": 0.5, "navyNumInmemBuffers": 8},
                "test_config": {}}"#,
        );
        let l = load(&p, false).unwrap();
        assert_eq!(l.warnings.len(), 2, "{:?}", l.warnings);
        assert!(
            l.warnings[0].contains("'lruRefreshRatio' has no effect"),
            "{:?}",
            l.warnings
        );
        assert!(
            l.warnings[1].contains("'navyNumInmemBuffers' has no effect"),
            "{:?}",
            l.warnings
        );
        // The value is kept (the default table reads it), the engine does
        // not use it.
        assert_eq!(l.instances[0].cache.lru_refresh_ratio, 0.5);
    }

    #[test]
    fn distribution_files_are_read() {
        // Files of our own, in upstream's shape.
        let own = tempfile::tempdir().unwrap();
        let (pop, val) = (own.path().join("pop.json"), own.path().join("val.json"));
        std::fs::write(
            &pop,
            r#"{"popularityBuckets": [10, 20, 30], "popularityWeights": [0.5, 0.3, 0.2], "oneHits": 0}"#,
        )
        .unwrap();
        std::fs::write(
            &val,
            r#"{"valSizeRange": [31, 63, 95, 127], "valSizeRangeProbability": [0.4, 0.3, 0.2, 0.1]}"#,
        )
        .unwrap();
        let (_d, p) = write(&format!(
            r#"{{"cache_config": {{}}, "test_config": {{"popDistFile": "{}", "valSizeDistFile": "{}"}}}}"#,
            pop.display(),
            val.display()
        ));
        let l = load(&p, true).unwrap();
        let d = &l.instances[0].test.distribution;
        assert_eq!(d.popularity_buckets, [10, 20, 30]);
        assert_eq!(d.popularity_weights, [0.5, 0.3, 0.2]);
        assert_eq!(d.val_size_range, [31, 63, 95, 127]);
        assert_eq!(d.val_size_range_probability, [0.4, 0.3, 0.2, 0.1]);
        // Upstream's, where the conformance data is here.
        if let Some(cfg) = testenv::conformance(
            "cachebench/test_configs/hit_ratio/graph_cache_leader_assocs/config.json",
        ) {
            let l = load(&cfg, true).unwrap();
            let d = &l.instances[0].test.distribution;
            assert_eq!(
                (d.popularity_buckets.len(), d.popularity_weights.len()),
                (563, 563)
            );
            assert_eq!(
                (d.val_size_range.len(), d.val_size_range_probability.len()),
                (2956, 2956)
            );
            assert_eq!(d.val_size_range[..3], [31, 63, 95]);
        }
        let (dir, p) =
            write(r#"{"cache_config": {}, "test_config": {"popDistFile": "missing.json"}}"#);
        let e = load(&p, false).unwrap_err().to_string();
        assert!(
            e.contains("popDistFile: cannot read") && e.contains("missing.json"),
            "{e}"
        );
        std::fs::write(dir.path().join("pop.json"), r#"{"popularityWeights": [1]}"#).unwrap();
        let (_d2, p) = write(&format!(
            r#"{{"cache_config": {{}}, "test_config": {{"popDistFile": "{}"}}}}"#,
            dir.path().join("pop.json").display()
        ));
        let e = load(&p, false).unwrap_err().to_string();
        assert!(e.contains("needs popularityBuckets"), "{e}");
    }

    fn write(text: &str) -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("c.json");
        std::fs::write(&p, text).unwrap();
        (d, p)
    }

    #[test]
    fn comments_trailing_commas_and_syntax_positions() {
        let (_d, p) = write(
            "// head\n{ \"cache_config\": { /* x */ \"cacheSizeMB\": 64, },\n  \"test_config\": {\"numOps\": 5,}, }\n",
        );
        let l = load(&p, true).unwrap();
        assert_eq!(l.instances[0].cache.cache_size_mb, 64);
        let (_d, p) = write(
            "// a \"quoted\" comment\n{\n  \"cache_config\": { \"cacheSizeMB\": 64 }\n  \"test_config\": {}\n}\n",
        );
        let e = load(&p, false).unwrap_err().to_string();
        assert!(e.contains("c.json:4:3"), "{e}");
    }

    #[test]
    fn unknown_keys_warn_with_suggestions_and_strict_refuses() {
        let (_d, p) = write(
            r#"{ "cache_config": { "nvmCachePath": ["/x"] }, "test_config": { "numOp": 3 } }"#,
        );
        let l = load(&p, false).unwrap();
        assert!(
            l.warnings
                .iter()
                .any(|w| w.contains("unknown key 'nvmCachePath' (did you mean 'nvmCachePaths'?)")),
            "{:?}",
            l.warnings
        );
        assert!(
            l.warnings
                .iter()
                .any(|w| w.contains("test_config: unknown key 'numOp' (did you mean 'numOps'?)")),
            "{:?}",
            l.warnings
        );
        let e = load(&p, true).unwrap_err().to_string();
        assert!(e.contains("--strict") && e.contains("numOp"), "{e}");
    }

    #[test]
    fn inconsistent_sizes_and_types_are_named() {
        for (text, want) in [
            (
                r#"{"cache_config": {"numPools": 2, "poolSizes": [1.0]}, "test_config": {}}"#,
                "numPools is 2 but poolSizes has 1",
            ),
            (
                r#"{"cache_config": {"numPools": 2, "poolSizes": [0.8, 0.4]}, "test_config": {}}"#,
                "summing to at most 1",
            ),
            (
                r#"{"cache_config": {}, "test_config": {"keySizeRange": [1, 8], "keySizeRangeProbability": [0.5, 0.5]}}"#,
                "keySizeRange has 2 bounds",
            ),
            (
                r#"{"cache_config": {}, "test_config": {"valSizeRange": [1, 8, 9, 10], "valSizeRangeProbability": [0.5, 0.5]}}"#,
                "valSizeRange has 4 values",
            ),
            (
                r#"{"cache_config": {}, "test_config": {"numOps": "ten"}}"#,
                "test_config.numOps: expected a non-negative integer, got \"ten\"",
            ),
            (
                r#"{"cache_config": {"numPools": 2}, "test_config": {}}"#,
                "numPools is 2 but poolSizes has 1 entries",
            ),
            (
                r#"{"cache_config": {"numPools": 2, "poolSizes": [0.5, 0.5]}, "test_config": {"opPoolDistribution": [0.5, 0.5]}}"#,
                "keyPoolDistribution has 1 entries but numPools is 2",
            ),
            (
                r#"{"cache_config": {"numPools": 2, "poolSizes": [0.5, 0.5]}, "test_config": {"keyPoolDistribution": [0.5, 0.5], "opPoolDistribution": [0.2, 0.3, 0.5]}}"#,
                "opPoolDistribution has 3 entries but numPools is 2",
            ),
        ] {
            let (_d, p) = write(text);
            let e = load(&p, false).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    /// Every key upstream's config structs read, as listed from their
    /// JSON-reading code (CacheLib `cachelib/cachebench/util/CacheConfig.cpp`
    /// and `Config.cpp` at 278ffc7: each `JSONSetVal` and nested object), is
    /// known, and at upstream's default value it loads even with `--strict`
    /// (so only a setting rackbench does not run as upstream is refused).
    #[test]
    fn every_upstream_key_is_recognised() {
        let cache = [
            "allocator",
            "cacheDir",
            "cacheSizeMB",
            "poolRebalanceIntervalSec",
            "moveOnSlabRelease",
            "rebalanceStrategy",
            "rebalanceMinSlabs",
            "rebalanceDiffRatio",
            "htBucketPower",
            "htLockPower",
            "lruRefreshSec",
            "lruRefreshRatio",
            "mmReconfigureIntervalSecs",
            "lruUpdateOnWrite",
            "lruUpdateOnRead",
            "tryLockUpdate",
            "lruIpSpec",
            "useCombinedLockForIterators",
            "lru2qHotPct",
            "lru2qColdPct",
            "allocFactor",
            "maxAllocSize",
            "minAllocSize",
            "allocSizes",
            "numPools",
            "poolSizes",
            "nvmCacheSizeMB",
            "nvmCacheMetadataSizeMB",
            "nvmCachePaths",
            "writeAmpDeviceList",
            "navyBlockSize",
            "navyRegionSizeMB",
            "navyArenas",
            "navySegmentedFifoSegmentRatio",
            "navyReqOrderShardsPower",
            "navyBigHashSizePct",
            "navyBigHashBucketSize",
            "navyBloomFilterPerBucketSize",
            "navySmallItemMaxSize",
            "navyParcelMemoryMB",
            "navyHitsReinsertionThreshold",
            "navyProbabilityReinsertionThreshold",
            "navyReaderThreads",
            "navyWriterThreads",
            "navyMaxNumReads",
            "navyMaxNumWrites",
            "navyStackSizeKB",
            "navyQDepth",
            "navyEnableIoUring",
            "navyCleanRegions",
            "navyCleanRegionThreads",
            "navyAdmissionWriteRateMB",
            "navyMaxConcurrentInserts",
            "navyDataChecksum",
            "truncateItemToOriginalAllocSizeInNvm",
            "navyEncryption",
            "deviceMaxWriteSize",
            "deviceEnableFDP",
            "navyEnableAccessTimeMap",
            "navyAccessTimeMapMaxSize",
            "memoryOnlyTTL",
            "usePosixShm",
            "shmType",
            "hugePageSize",
            "hugePageMountDir",
            "lockMemory",
            "memoryTiers",
            "useTraceTimeStamp",
            "printNvmCounters",
            "tickerSynchingSeconds",
            "enableItemDestructorCheck",
            "enableItemDestructor",
            "nvmAdmissionRetentionTimeThreshold",
            "eventTrackerFilePath",
            "eventTrackerSamplingRate",
            "eventTrackerQueueSize",
            "fccCoroFiberAdapterNumThreads",
            "fccCoroFiberAdapterFibersPerThread",
            "fccCoroFiberAdapterStackSizeKB",
            "customConfigJson",
            "navyEnableItemHistoryTracking",
        ];
        let stressor = [
            "generator",
            "name",
            "enableLookaside",
            "onlySetIfMiss",
            "ignoreOpCount",
            "populateItem",
            "samplingIntervalMs",
            "checkConsistency",
            "touchValue",
            "numOps",
            "numThreads",
            "numKeys",
            "opDelayBatch",
            "opDelayNs",
            "opRatePerSec",
            "opRateBurstSize",
            "opPoolDistribution",
            "keyPoolDistribution",
            "maxInconsistencyCount",
            "traceFileName",
            "traceFileNames",
            "configPath",
            "cachePieceSize",
            "maxCachePieces",
            "missTraceFile",
            "maxInvalidDestructorCount",
            "repeatTraceReplay",
            "timestampFactor",
            "checkNvmCacheWarmUp",
            "useCombinedLockForIterators",
            "dramIteratorIntervalMs",
            "dramIteratorMode",
            "dramIteratorSleepMs",
            "dramIteratorWorkMs",
            "poolDistributions",
            "replayGeneratorConfig",
            "nvmCacheWarmupCheckPolicy",
        ];
        let distribution = [
            "keySizeRange",
            "keySizeRangeProbability",
            "valSizeRange",
            "valSizeRangeProbability",
            "valSizeDistFile",
            "chainedItemLengthRange",
            "chainedItemLengthRangeProbability",
            "chainedItemValSizeRange",
            "chainedItemValSizeRangeProbability",
            "ttlSecsRange",
            "ttlSecsRangeProbability",
            "popularityBuckets",
            "popularityWeights",
            "popDistFile",
            "getRatio",
            "setRatio",
            "delRatio",
            "addChainedRatio",
            "loneGetRatio",
            "loneSetRatio",
            "updateRatio",
            "couldExistRatio",
            "useLegacyKeyGen",
        ];
        let replay = [
            "ampFactor",
            "ampSizeFactor",
            "binaryFileName",
            "fastForwardCount",
            "preLoadReqs",
            "replaySerializationMode",
            "relaxedSerialIntervalMs",
            "numAggregationFields",
            "numExtraFields",
            "blockSizeKB",
            "chunkSizeKB",
            "statsPerAggField",
            "mlAdmissionConfig",
        ];
        let warmup = ["evictionCountThreshold", "requestTimestampThreshold"];
        for (section, names) in [
            (ARENA_KEYS, &["name", "sizePct", "bigHashPct"][..]),
            (TIER_KEYS, &["ratio", "memBindNodes"][..]),
            (
                ML_KEYS,
                &[
                    "modelPath",
                    "numericFeatures",
                    "categoricalFeatures",
                    "targetRecall",
                    "admitCategory",
                ][..],
            ),
        ] {
            for n in names {
                assert!(find_key(section, n).is_some(), "{n}");
            }
        }
        let default = |section: &[Key], k: &str| -> Value {
            let spec = find_key(section, k).unwrap_or_else(|| panic!("'{k}' is not known"));
            serde_json::from_str(spec.default).unwrap()
        };
        let mut configs = Vec::new();
        for k in cache {
            let v = default(CACHE_KEYS, k);
            configs.push((
                k,
                serde_json::json!({"cache_config": {k: v}, "test_config": {}}),
            ));
        }
        for k in stressor {
            let v = default(TEST_KEYS, k);
            configs.push((
                k,
                serde_json::json!({"cache_config": {}, "test_config": {k: v}}),
            ));
        }
        for k in distribution {
            let v = default(DISTRIBUTION_KEYS, k);
            configs.push((
                k,
                serde_json::json!({"cache_config": {}, "test_config": {k: v}}),
            ));
            configs.push((
                k,
                serde_json::json!({"cache_config": {},
                    "test_config": {"poolDistributions": [{k: v}]}}),
            ));
        }
        for k in replay {
            let v = default(REPLAY_KEYS, k);
            configs.push((
                k,
                serde_json::json!({"cache_config": {},
                    "test_config": {"generator": "replay", "replayGeneratorConfig": {k: v}}}),
            ));
        }
        for k in warmup {
            let v = default(WARMUP_KEYS, k);
            configs.push((
                k,
                serde_json::json!({"cache_config": {},
                    "test_config": {"checkNvmCacheWarmUp": true,
                        "nvmCacheWarmupCheckPolicy": {k: v}}}),
            ));
        }
        for (k, cfg) in configs {
            let (_d, p) = write(&cfg.to_string());
            let l = load(&p, true).unwrap_or_else(|e| panic!("{k} at its default: {e}"));
            for w in &l.warnings {
                assert!(!w.contains("unknown key"), "{k}: {w}");
            }
        }
    }

    /// A key upstream applies and rackbench does not model warns by name
    /// with what differs (not at upstream's default); `--strict` refuses
    /// it, and says why (not "unknown keys").
    #[test]
    fn not_modelled_keys_warn_and_strict_refuses_them() {
        let (_d, p) = write(
            r#"{"cache_config": {"navyReaderThreads": 4, "navyWriterThreads": 32,
                "cacheDir": "/tmp/x", "eventTrackerFilePath": "/tmp/e.csv"},
                "test_config": {"samplingIntervalMs": 100}}"#,
        );
        let l = load(&p, false).unwrap();
        let has = |s: &str| l.warnings.iter().any(|w| w.contains(s));
        assert!(
            has("cache_config.navyReaderThreads (4) is not modelled by rackbench"),
            "{:?}",
            l.warnings
        );
        assert!(has("reader or writer thread pools"), "{:?}", l.warnings);
        // At upstream's default: nothing to say.
        assert!(!has("navyWriterThreads"), "{:?}", l.warnings);
        assert!(has("cache_config.cacheDir"), "{:?}", l.warnings);
        assert!(has("every run starts empty"), "{:?}", l.warnings);
        assert!(has("cache_config.eventTrackerFilePath"), "{:?}", l.warnings);
        assert!(
            has("'samplingIntervalMs' has no effect, as upstream"),
            "{:?}",
            l.warnings
        );
        let e = load(&p, true).unwrap_err().to_string();
        assert!(
            e.contains("--strict refuses keys rackbench does not know or does not model"),
            "{e}"
        );
        assert!(
            e.contains("navyReaderThreads") && e.contains("cacheDir"),
            "{e}"
        );
        // A key without effect upstream too is no reason to refuse.
        assert!(!e.contains("samplingIntervalMs"), "{e}");
        let (_d, p) = write(
            r#"{"cache_config": {"lruRefreshRatio": 0.5}, "test_config": {"samplingIntervalMs": 1}}"#,
        );
        assert_eq!(load(&p, true).unwrap().warnings.len(), 2);
        // Several instances with the same warning: said once, naming them.
        let one = r#"{"cache_config": {"navyReaderThreads": 4}, "test_config": {}}"#;
        let (_d, p) = write(&format!("[{one}, {one}, {one}]"));
        let l = load(&p, false).unwrap();
        assert_eq!(l.warnings.len(), 1, "{:?}", l.warnings);
        assert!(
            l.warnings[0].contains(": [0,1,2].cache_config.navyReaderThreads (4)"),
            "{:?}",
            l.warnings
        );
    }

    /// Stressor modes, generators and settings rackbench does not run are
    /// refused by name, with what they are.
    #[test]
    fn refused_modes_and_keys_are_named() {
        for (test, cache, want) in [
            (
                r#""name": "high_refcount""#,
                "",
                "test_config.name 'high_refcount'",
            ),
            (r#""name": "cachelib_map""#, "", "cachelib::Map"),
            (r#""name": "cachelib_range_map""#, "", "RangeMap"),
            (r#""name": "fast_shutdown""#, "", "fast-shutdown"),
            (r#""name": "async""#, "", "async cache stressor"),
            (r#""name": "cache_component""#, "", "cache-component"),
            (r#""name": "object_cache""#, "", "object-cache"),
            (
                r#""generator": "simple-flash-benchmark""#,
                "",
                "generator 'simple-flash-benchmark'",
            ),
            (r#""generator": "frob""#, "", "unsupported generator frob"),
            (
                r#""dramIteratorMode": "regular""#,
                "",
                "DRAM iterator sweeps",
            ),
            (
                r#""dramIteratorMode": "x""#,
                "",
                "Unsupported dramIteratorMode: x",
            ),
            (
                r#""traceFileName": "a.csv", "traceFileNames": ["b.csv"]"#,
                "",
                "set only one of traceFileName or traceFileNames",
            ),
            (
                r#""generator": "replay", "checkConsistency": true"#,
                "",
                "Cannot replay traces with consistency checking enabled",
            ),
            (
                r#""generator": "replay", "replayGeneratorConfig": {"replaySerializationMode": "loose"}"#,
                "",
                "Unsupported request serialization mode: loose",
            ),
            (
                r#""generator": "replay", "replayGeneratorConfig": {"mlAdmissionConfig": {"modelPath": "m"}}"#,
                "",
                "mlAdmissionConfig",
            ),
            (
                "",
                r#""navyArenas": [{"name": "a", "sizePct": 100}]"#,
                "navyArenas",
            ),
            (
                "",
                r#""enableItemDestructorCheck": true"#,
                "enableItemDestructorCheck",
            ),
            (
                "",
                r#""hugePageSize": 1073741824"#,
                "1 GiB huge pages are not supported",
            ),
            (
                "",
                r#""hugePageSize": 4096"#,
                "unsupported huge page size 4096",
            ),
            ("", r#""shmType": "sysv""#, "requires a non-empty cacheDir"),
            ("", r#""shmType": "odd""#, "unknown shmType 'odd'"),
            (
                "",
                r#""memoryTiers": [{"ratio": 1}, {"ratio": 1}]"#,
                "2 memory tiers are not supported",
            ),
            (
                "",
                r#""useTraceTimeStamp": true, "tickerSynchingSeconds": 5"#,
                "follows the trace's timestamps is not supported",
            ),
        ] {
            let (_d, p) = write(&format!(
                r#"{{"cache_config": {{{cache}}}, "test_config": {{{test}}}}}"#
            ));
            let e = load(&p, false).unwrap_err().to_string();
            assert!(e.contains(want), "{test}{cache}: {e}");
        }
        // Any other stressor name is upstream's default stressor.
        let (_d, p) = write(r#"{"cache_config": {}, "test_config": {"name": "stressor"}}"#);
        assert!(load(&p, true).is_ok());
    }

    /// Files are relative to configPath when it is given; TTLs, legacy key
    /// generation and the replay settings are read per upstream's structs.
    #[test]
    fn config_path_ttl_and_replay_settings() {
        let data = tempfile::tempdir().unwrap();
        std::fs::write(
            data.path().join("pop.json"),
            r#"{"popularityBuckets": [1, 2], "popularityWeights": [0.5, 0.5]}"#,
        )
        .unwrap();
        let (_d, p) = write(&format!(
            r#"{{"cache_config": {{}}, "test_config": {{"configPath": "{}",
                "poolDistributions": [{{"popDistFile": "pop.json", "ttlSecsRange": [60, 3600, 86400],
                "ttlSecsRangeProbability": [0.5, 0.4, 0.1], "useLegacyKeyGen": true}}],
                "traceFileNames": ["t1.csv", "/abs/t2.csv"]}}}}"#,
            data.path().display()
        ));
        let l = load(&p, false).unwrap();
        let t = &l.instances[0].test;
        let d = &t.pool_distributions[0];
        assert_eq!(d.popularity_buckets, [1, 2]);
        assert_eq!(d.ttl_secs_range, [60.0, 3600.0, 86400.0]);
        assert!(d.use_legacy_key_gen);
        assert_eq!(t.trace_files[0], data.path().join("t1.csv"));
        assert_eq!(t.trace_files[1], PathBuf::from("/abs/t2.csv"));
        // The replay generator's keys, where upstream reads them.
        let (_d, p) = write(
            r#"{"cache_config": {}, "test_config": {"generator": "replay", "ignoreOpCount": true,
                "replayGeneratorConfig": {"ampFactor": 3, "fastForwardCount": 7,
                "replaySerializationMode": "none", "binaryFileName": "out.bin"},
                "ampFactor": 5}}"#,
        );
        let l = load(&p, false).unwrap();
        let t = &l.instances[0].test;
        assert!(t.ignore_op_count);
        assert_eq!(t.replay.amp_factor, 3);
        assert_eq!(t.replay.fast_forward_count, 7);
        assert_eq!(t.replay.serialization, Serialization::Random);
        assert!(
            t.replay
                .binary_file_name
                .as_ref()
                .unwrap()
                .ends_with("out.bin")
        );
        // ampFactor outside replayGeneratorConfig: no effect, as upstream.
        assert!(
            l.warnings
                .iter()
                .any(|w| w
                    .contains("'ampFactor' is a replayGeneratorConfig key; here it has no effect")),
            "{:?}",
            l.warnings
        );
        // Upstream's stale repeatOpCount: no effect (op_count is honoured).
        let (_d, p) = write(
            r#"{"cache_config": {}, "test_config": {"generator": "replay", "repeatOpCount": true}}"#,
        );
        let l = load(&p, false).unwrap();
        assert!(
            l.warnings
                .iter()
                .any(|w| w.contains("'repeatOpCount' has no effect")),
            "{:?}",
            l.warnings
        );
    }
}
