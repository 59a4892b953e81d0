//! CacheLib's CacheBench JSON configs, read unchanged: `//` and `/* */`
//! comments and trailing commas are allowed (as CacheLib's parser allows
//! them), an object `{ "cache_config": ..., "test_config": ... }` is one
//! instance and a top-level array several.
//!
//! Upstream ignores keys it does not know; a misspelled `nvmCachePath`
//! silently runs without flash. We warn, naming the key, its place and the
//! closest known key, and `strict` makes it an error. Syntax errors name
//! `FILE:LINE:COL`; type and consistency errors name the key and what was
//! expected.

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

/// Keys of `cache_config` CacheBench knows.
pub const CACHE_KEYS: &[&str] = &[
    "allocator",
    "cacheSizeMB",
    "poolRebalanceIntervalSec",
    "moveOnSlabRelease",
    "rebalanceStrategy",
    "rebalanceMinSlabs",
    "rebalanceDiffRatio",
    "rebalanceMinRatio",
    "htBucketPower",
    "htLockPower",
    "lruRefreshSec",
    "lruRefreshRatio",
    "mmReconfigureIntervalSecs",
    "lruUpdateOnWrite",
    "lruUpdateOnRead",
    "tryLockUpdate",
    "lruIpSpec",
    "lru2qHotPct",
    "lru2qColdPct",
    "allocFactor",
    "maxAllocSize",
    "minAllocSize",
    "allocSizes",
    "numPools",
    "poolSizes",
    "poolResizeIntervalSec",
    "nvmCacheSizeMB",
    "nvmCachePaths",
    "nvmCacheMetadataSizeMB",
    "writeAmpDeviceList",
    "navyBlockSize",
    "navyRegionSizeMB",
    "navySegmentedFifoSegmentRatio",
    "navyReqOrderShardsPower",
    "navyBigHashSizePct",
    "navyBigHashBucketSize",
    "navyBloomFilterPerBucketSize",
    "navySmallItemMaxSize",
    "navyParcelMemoryMB",
    "navyHitsReinsertionThreshold",
    "navyProbabilityReinsertionThreshold",
    "navyNumInvRegions",
    "navyReaderThreads",
    "navyWriterThreads",
    "navyCleanRegions",
    "navyCleanRegionThreads",
    "navyAdmissionWriteRateMB",
    "navyMaxConcurrentInserts",
    "navyDataChecksum",
    "navyEncryption",
    "navyMaxNumReads",
    "navyMaxNumWrites",
    "navyStackSizeKB",
    "navyNumInmemBuffers",
    "navySizeClasses",
    "navyArenas",
    "truncateItemToOriginalAllocSizeInNvm",
    "memoryOnlyTTL",
    "usePosixShm",
    "lockMemory",
    "useHugePages",
    "hugePageSize",
    "hugePageMountDir",
    "shmType",
    "cacheDir",
    "enableItemDestructorCheck",
    "enableItemDestructor",
    "eventTrackerSamplingRate",
    "eventTrackerQueueSize",
    "eventTrackerFilePath",
    "customConfigJson",
    "memoryTiers",
    "memBindNodes",
    "preallocateCache",
    "objectSizeTrackingEnabled",
    "bigHashPct",
    "navyEnableIoUring",
    "navyQDepth",
    "navyIoEngine",
    "deviceMaxWriteSize",
    "useTraceTimeStamp",
    "printNvmCounters",
    "dipperBackend",
    "dipperFilePath",
    "dipperAsyncThreads",
    "dipperDevicePath",
    "dipperUseDirectIO",
    "isNvmCacheEncryptionEnabled",
    "isNvmCacheTruncateAllocSizeEnabled",
    "numPoolsMin",
    "initialPoolSizes",
    "useCombinedLockForIterators",
    "tickerSynchingSeconds",
    "nvmAdmissionRetentionTimeThreshold",
    "deviceEnableFDP",
    "navyAdmissionProbability",
];

/// Keys of `test_config` besides those of a distribution
/// ([`DISTRIBUTION_KEYS`], which `test_config` takes too).
pub const TEST_KEYS: &[&str] = &[
    "name",
    "generator",
    "numOps",
    "numThreads",
    "numKeys",
    "opDelayBatch",
    "opDelayNs",
    "opRatePerSec",
    "opRateBurstSize",
    "checkConsistency",
    "checkNvmCacheWarmUp",
    "prepopulateCache",
    "preallocateCache",
    "samplingIntervalMs",
    "traceFileName",
    "traceFileNames",
    "repeatTraceReplay",
    "repeatOpCount",
    "fastForwardCount",
    "ampFactor",
    "timestampFactor",
    "replayGeneratorConfig",
    "touchValue",
    "enableLookaside",
    "onlySetIfMiss",
    "keyPoolDistribution",
    "opPoolDistribution",
    "poolDistributions",
    "binaryFileName",
    "distribution",
    "cachePieceSize",
    "maxCachePieces",
    "maxInconsistencyCount",
    "ttlSecsRange",
    "ratio",
    "sizePct",
    "objectSizeTrackingEnabled",
    "oneHits",
];

/// Keys of one `poolDistributions` entry (a distribution).
pub const DISTRIBUTION_KEYS: &[&str] = &[
    "keySizeRange",
    "keySizeRangeProbability",
    "valSizeRange",
    "valSizeRangeProbability",
    "chainedItemLengthRange",
    "chainedItemLengthRangeProbability",
    "chainedItemValSizeRange",
    "chainedItemValSizeRangeProbability",
    "getRatio",
    "setRatio",
    "delRatio",
    "loneGetRatio",
    "loneSetRatio",
    "updateRatio",
    "couldExistRatio",
    "addChainedRatio",
    "popularityBuckets",
    "popularityWeights",
    "popDistFile",
    "valSizeDistFile",
    "useDiscreteValueSizes",
    "useLegacyKeyGen",
];

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
    /// The test's own distribution, then `poolDistributions`, if any.
    pub distribution: DistributionConfig,
    pub pool_distributions: Vec<DistributionConfig>,
    pub trace_files: Vec<PathBuf>,
    /// TTL of stored items drawn uniformly from [min, max] seconds
    /// (`ttlSecsRange`; none when empty).
    pub ttl_secs_range: Option<(u32, u32)>,
    /// Operations per second over all threads (`opRatePerSec`; 0 = as fast
    /// as possible) and the token bucket's burst (`opRateBurstSize`).
    pub op_rate_per_sec: u64,
    pub op_rate_burst_size: u64,
    /// A pause of `opDelayNs` after every `opDelayBatch` operations.
    pub op_delay_batch: u64,
    pub op_delay_ns: u64,
    /// Trace replay: `ampFactor` (in `replayGeneratorConfig` or
    /// `test_config`), `repeatTraceReplay`, `repeatOpCount`.
    pub amp_factor: u32,
    pub repeat_trace_replay: bool,
    pub repeat_op_count: bool,
    pub fast_forward_count: u64,
    /// Check every value read against the sets that could have left it.
    pub check_consistency: bool,
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

fn check_keys(
    obj: &Map<String, Value>,
    known: &[&[&str]],
    other: Option<(&[&str], &str)>,
    place: &str,
    out: &mut Vec<String>,
) {
    for k in obj.keys() {
        if known.iter().any(|set| set.contains(&k.as_str())) {
            continue;
        }
        // A key of the other section: upstream ignores it here.
        if let Some((keys, section)) = other
            && keys.contains(&k.as_str())
        {
            out.push(format!(
                "{place}: '{k}' is a {section} key; here it has no effect (upstream ignores it too)"
            ));
            continue;
        }
        let best = known
            .iter()
            .flat_map(|set| set.iter())
            .min_by_key(|c| distance(k, c))
            .copied();
        match best.filter(|c| distance(k, c) <= 3.max(k.len() / 3)) {
            Some(c) => out.push(format!("{place}: unknown key '{k}' (did you mean '{c}'?)")),
            None => out.push(format!("{place}: unknown key '{k}'")),
        }
    }
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
}

fn object<'a>(v: &'a Value, place: &str) -> Result<&'a Map<String, Value>, String> {
    v.as_object()
        .ok_or_else(|| format!("{place}: expected an object, got {v}"))
}

fn distribution(
    f: &Fields,
    base: Option<&DistributionConfig>,
    dir: &Path,
) -> Result<DistributionConfig, String> {
    let d = base.cloned();
    let u32s_or = |key: &str, inherit: Option<Vec<u32>>| -> Result<Vec<u32>, String> {
        if f.obj.contains_key(key) {
            f.u32s(key)
        } else {
            Ok(inherit.unwrap_or_default())
        }
    };
    let f64s_or = |key: &str, inherit: Option<Vec<f64>>| -> Result<Vec<f64>, String> {
        if f.obj.contains_key(key) {
            f.f64s(key)
        } else {
            Ok(inherit.unwrap_or_default())
        }
    };
    let ratio = |key: &str, i: usize| f.f64(key, d.as_ref().map_or(0.0, |d| d.op_ratios[i]));
    let file = |key: &str, inherit: Option<PathBuf>| -> Result<Option<PathBuf>, String> {
        match f.obj.get(key) {
            None => Ok(inherit),
            Some(Value::String(s)) => {
                let p = dir.join(s);
                Ok(Some(p))
            }
            Some(v) => Err(f.err(key, "a file name", v)),
        }
    };
    let out = DistributionConfig {
        key_size_range: u32s_or("keySizeRange", d.as_ref().map(|d| d.key_size_range.clone()))?,
        key_size_range_probability: f64s_or(
            "keySizeRangeProbability",
            d.as_ref().map(|d| d.key_size_range_probability.clone()),
        )?,
        val_size_range: u32s_or("valSizeRange", d.as_ref().map(|d| d.val_size_range.clone()))?,
        val_size_range_probability: f64s_or(
            "valSizeRangeProbability",
            d.as_ref().map(|d| d.val_size_range_probability.clone()),
        )?,
        op_ratios: [
            ratio("getRatio", 0)?,
            ratio("setRatio", 1)?,
            ratio("delRatio", 2)?,
            ratio("loneGetRatio", 3)?,
            ratio("loneSetRatio", 4)?,
            ratio("updateRatio", 5)?,
            ratio("couldExistRatio", 6)?,
        ],
        add_chained_ratio: f.f64(
            "addChainedRatio",
            d.as_ref().map_or(0.0, |d| d.add_chained_ratio),
        )?,
        chained_length_range: u32s_or(
            "chainedItemLengthRange",
            d.as_ref().map(|d| d.chained_length_range.clone()),
        )?,
        chained_length_probability: f64s_or(
            "chainedItemLengthRangeProbability",
            d.as_ref().map(|d| d.chained_length_probability.clone()),
        )?,
        chained_val_size_range: u32s_or(
            "chainedItemValSizeRange",
            d.as_ref().map(|d| d.chained_val_size_range.clone()),
        )?,
        chained_val_size_probability: f64s_or(
            "chainedItemValSizeRangeProbability",
            d.as_ref().map(|d| d.chained_val_size_probability.clone()),
        )?,
        popularity_buckets: f
            .list("popularityBuckets", Value::as_u64, "non-negative integers")
            .map(|v| {
                if v.is_empty() {
                    d.as_ref()
                        .map(|d| d.popularity_buckets.clone())
                        .unwrap_or_default()
                } else {
                    v
                }
            })?,
        popularity_weights: f64s_or(
            "popularityWeights",
            d.as_ref().map(|d| d.popularity_weights.clone()),
        )?,
        pop_dist_file: file(
            "popDistFile",
            d.as_ref().and_then(|d| d.pop_dist_file.clone()),
        )?,
        val_size_dist_file: file(
            "valSizeDistFile",
            d.as_ref().and_then(|d| d.val_size_dist_file.clone()),
        )?,
    };
    let mut out = out;
    load_dist_files(&mut out, &f.place, base)?;
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
    if vr != 0 && vr != vp && vr != vp + 1 && out.val_size_dist_file.is_none() {
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
/// valSizeRangeProbability), replacing what the config says inline. A
/// distribution inherited from `test_config` keeps the files already read.
fn load_dist_files(
    d: &mut DistributionConfig,
    place: &str,
    base: Option<&DistributionConfig>,
) -> Result<(), String> {
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
    let inherited = |p: &Option<PathBuf>, get: fn(&DistributionConfig) -> &Option<PathBuf>| {
        base.is_some_and(|b| get(b) == p)
    };
    if let Some(p) = d
        .pop_dist_file
        .clone()
        .filter(|p| !inherited(&Some(p.clone()), |b| &b.pop_dist_file))
    {
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
    if let Some(p) = d
        .val_size_dist_file
        .clone()
        .filter(|p| !inherited(&Some(p.clone()), |b| &b.val_size_dist_file))
    {
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

fn instance(
    v: &Value,
    place: &str,
    dir: &Path,
    warnings: &mut Vec<String>,
) -> Result<BenchConfig, String> {
    let top = object(v, place)?;
    check_keys(
        top,
        &[&["cache_config", "test_config"]],
        None,
        place,
        warnings,
    );
    let empty = Value::Object(Map::new());
    let c = object(
        top.get("cache_config").unwrap_or(&empty),
        &format!("{place}cache_config"),
    )?;
    let t = object(
        top.get("test_config").unwrap_or(&empty),
        &format!("{place}test_config"),
    )?;
    check_keys(
        c,
        &[CACHE_KEYS],
        Some((TEST_KEYS, "test_config")),
        &format!("{place}cache_config"),
        warnings,
    );
    check_keys(
        t,
        &[TEST_KEYS, DISTRIBUTION_KEYS],
        Some((CACHE_KEYS, "cache_config")),
        &format!("{place}test_config"),
        warnings,
    );
    let cf = Fields {
        obj: c,
        place: format!("{place}cache_config"),
    };
    if let Some(k) = ["lruRefreshRatio", "mmReconfigureIntervalSecs"]
        .into_iter()
        .find(|k| c.contains_key(*k))
    {
        warnings.push(format!(
            "{place}cache_config: '{k}' has no effect (as upstream: its cachebench builds the LRU without a \
             reconfigure interval, so the refresh time stays lruRefreshSec)"
        ));
    }
    if c.contains_key("navyNumInmemBuffers") {
        warnings.push(format!(
            "{place}cache_config: 'navyNumInmemBuffers' has no effect (upstream ignores it too since 2022): \
             the region engine keeps 2 x navyCleanRegions in-memory buffers"
        ));
    }
    let num_pools = cf.u64("numPools", 1)? as usize;
    // Upstream's default poolSizes is [1.0], so more pools need their sizes.
    let pool_sizes = if c.contains_key("poolSizes") {
        cf.f64s("poolSizes")?
    } else {
        vec![1.0]
    };
    if num_pools == 0 || pool_sizes.len() != num_pools {
        return Err(format!(
            "{place}cache_config: numPools is {num_pools} but poolSizes has {} entries; expected one size per pool \
             (upstream's default is [1.0], for one pool)",
            pool_sizes.len()
        ));
    }
    let sum: f64 = pool_sizes.iter().sum();
    if sum > 1.0 + 1e-6 || pool_sizes.iter().any(|p| *p < 0.0) {
        return Err(format!(
            "{place}cache_config.poolSizes {pool_sizes:?}: expected fractions summing to at most 1 (sum {sum})"
        ));
    }
    let cache = CacheConfig {
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
        nvm: nvm_keys(&cf)?,
        pool_rebalance_interval_sec: cf.u64("poolRebalanceIntervalSec", 0)?,
        rebalance_strategy: cf.string("rebalanceStrategy", "")?,
        rebalance_min_slabs: cf.u64("rebalanceMinSlabs", 1)?,
        rebalance_diff_ratio: cf.f64("rebalanceDiffRatio", 0.25)?,
        move_on_slab_release: cf.bool("moveOnSlabRelease", false)?,
    };
    let tf = Fields {
        obj: t,
        place: format!("{place}test_config"),
    };
    let distribution = distribution(&tf, None, dir)?;
    let mut pool_distributions = Vec::new();
    if let Some(pd) = t.get("poolDistributions") {
        let Value::Array(list) = pd else {
            return Err(tf.err("poolDistributions", "a list of distribution objects", pd));
        };
        for (i, d) in list.iter().enumerate() {
            let p = format!("{place}test_config.poolDistributions[{i}]");
            let o = object(d, &p)?;
            check_keys(o, &[DISTRIBUTION_KEYS], None, &p, warnings);
            pool_distributions.push(self::distribution(
                &Fields { obj: o, place: p },
                Some(&distribution),
                dir,
            )?);
        }
    }
    let num_threads = tf.u64("numThreads", 0)? as usize;
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
            "{place}test_config.keyPoolDistribution has {} entries but numPools is {num_pools}; \
             expected one per pool (upstream's default is [1.0], for one pool)",
            key_pool_distribution.len()
        ));
    }
    if op_pool_distribution.len() > num_pools {
        return Err(format!(
            "{place}test_config.opPoolDistribution has {} entries but numPools is {num_pools}; \
             expected at most one per pool",
            op_pool_distribution.len()
        ));
    }
    let mut trace_files: Vec<PathBuf> = tf
        .strings("traceFileNames")?
        .iter()
        .map(|s| dir.join(s))
        .collect();
    if let Some(f) = t.get("traceFileName") {
        let s = f
            .as_str()
            .ok_or_else(|| tf.err("traceFileName", "a file name", f))?;
        trace_files.insert(0, dir.join(s));
    }
    let ttl = tf.u32s("ttlSecsRange")?;
    let ttl_secs_range = match ttl.as_slice() {
        [] => None,
        [lo, hi] if lo <= hi => Some((*lo, *hi)),
        _ => {
            return Err(format!(
                "{place}test_config.ttlSecsRange {ttl:?}: expected [min, max] seconds with min <= max"
            ));
        }
    };
    let mut amp_factor = tf.u64("ampFactor", 1)?;
    let mut fast_forward_count = tf.u64("fastForwardCount", 0)?;
    if let Some(rg) = t.get("replayGeneratorConfig") {
        let p = format!("{place}test_config.replayGeneratorConfig");
        let o = object(rg, &p)?;
        check_keys(
            o,
            &[&["ampFactor", "binaryFileName", "fastForwardCount"]],
            None,
            &p,
            warnings,
        );
        let rf = Fields { obj: o, place: p };
        amp_factor = rf.u64("ampFactor", amp_factor)?;
        fast_forward_count = rf.u64("fastForwardCount", fast_forward_count)?;
    }
    let test = TestConfig {
        amp_factor: u32::try_from(amp_factor.max(1)).unwrap_or(u32::MAX),
        repeat_trace_replay: tf.bool("repeatTraceReplay", false)?,
        repeat_op_count: tf.bool("repeatOpCount", false)?,
        fast_forward_count,
        check_consistency: tf.bool("checkConsistency", false)?,
        ttl_secs_range,
        op_rate_per_sec: tf.u64("opRatePerSec", 0)?,
        op_rate_burst_size: tf.u64("opRateBurstSize", 0)?,
        op_delay_batch: tf.u64("opDelayBatch", 0)?,
        op_delay_ns: tf.u64("opDelayNs", 0)?,
        // Upstream runs its workload generator for "" (its default).
        generator: match tf.string("generator", "")?.as_str() {
            "" => "workload".to_string(),
            g => g.to_string(),
        },
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
    };
    Ok(BenchConfig {
        cache,
        test,
        raw: v.clone(),
    })
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

/// Reads a config file (or `builtin:NAME`); `strict` turns unknown-key
/// warnings into errors.
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
        path.parent().unwrap_or(Path::new(".")),
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
    let mut warnings = Vec::new();
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
                .map(|(i, x)| instance(x, &format!("[{i}]."), dir, &mut warnings))
                .collect::<Result<Vec<_>, _>>()
                .map_err(invalid)?
        }
        _ => vec![instance(&v, "", dir, &mut warnings).map_err(invalid)?],
    };
    let warnings: Vec<String> = warnings
        .into_iter()
        .map(|w| format!("{label}: {w}"))
        .collect();
    if strict && !warnings.is_empty() {
        return Err(invalid(format!(
            "unknown keys (--strict):\n  {}",
            warnings.join("\n  ")
        )));
    }
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
    fn every_upstream_config_loads_without_unknown_keys() {
        testenv::conformance_or_return!("cachebench/test_configs");
        let mut files = Vec::new();
        walk(&conformance(), &mut files);
        assert!(files.len() > 50, "{}", files.len());
        let mut multi = 0;
        let mut misplaced = Vec::new();
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
        assert!(files.len() > 50, "{} configs", files.len());
        for f in &files {
            let l = load(f, false).unwrap_or_else(|e| panic!("{e}"));
            for w in &l.warnings {
                // Upstream's own files put one cache key in test_config, and
                // set keys that have no effect upstream either.
                assert!(w.contains("has no effect"), "{w}");
                if w.contains("key; here it has no effect") {
                    misplaced.push(w.clone());
                }
            }
            multi += usize::from(l.instances.len() > 1);
        }
        assert!(multi >= 1);
        assert!(misplaced.len() <= 2, "{misplaced:?}");
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
            ("ampFactor", json!(1), json!(t.amp_factor)),
            ("fastForwardCount", json!(0), json!(t.fast_forward_count)),
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
            ("ttlSecsRange", json!(null), json!(t.ttl_secs_range)),
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
}
