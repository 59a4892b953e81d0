//! `rackbench cachebench --json_test_config FILE` (or a binary named
//! `cachebench`): loads CacheLib's config, builds the cache and the
//! workload, runs the stressor with progress lines and prints upstream's
//! report, then hands the figures to the harness.

use crate::cache::{
    AllocClasses, Cache, DramCache, DramConfig, HybridOptions, Policy, Rebalance, RebalanceConfig,
    Refresh, SLAB_SIZE,
};
use crate::config::{self, BenchConfig, DistributionConfig};
use crate::generator::{Generator, PoolMix, Spec};
use crate::nvm::device::DirectIo;
use crate::nvm::region::{Eviction, Reinsertion};
use crate::nvm::{Admission, Navy, NvmConfig};
use crate::output;
use crate::record::{CacheBenchRecord, GeneratorStats, InstanceRecord};
use crate::replay::{BinaryTrace, TraceReader, TraceSpec};
use crate::stats::{CacheStats, RunStats};
use crate::stressor::{self, Options, Progress};
use anyhow::{Context, bail};
use clap::Parser;
use harness::{Outcome, Record, RunContext, Workload};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{Map, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The `cachebench` benchmark.
pub struct CacheBench;

#[derive(Debug, Parser)]
#[command(
    name = "rackbench cachebench",
    about = "CacheLib's CacheBench: a DRAM + NVM (flash) cache under synthetic or replayed traffic, configured by CacheLib's JSON test configs"
)]
struct Args {
    /// CacheLib test config (JSON with comments; an array runs several
    /// instances at once).
    #[arg(long = "json_test_config", value_name = "FILE")]
    json_test_config: PathBuf,
    /// Seconds between progress lines (0: none).
    #[arg(long, default_value_t = 60)]
    progress: u64,
    /// Also write a full stats block every progress interval to this file.
    #[arg(long = "progress_stats_file", value_name = "FILE")]
    progress_stats_file: Option<PathBuf>,
    /// rackbench's flag: which generation of upstream's text to print.
    /// `current`: as upstream prints it today (plain integers, `Instance
    /// N:` progress lines, `== Throughput Stats ==`, `Finished!`).
    /// `legacy`: as upstream printed it until January 2026 (thousands
    /// separators, `== Throughput for  ==`, progress lines also on stdout
    /// with a stats file, results on stdout only).
    #[arg(
        long = "output_layout",
        value_name = "LAYOUT",
        value_enum,
        default_value_t = output::Layout::Current
    )]
    output_layout: output::Layout,
    /// Stop the run after this many seconds (0: run all operations).
    #[arg(long = "timeout_seconds", default_value_t = 0)]
    timeout_seconds: u64,
    /// Time every get and set and report their latency percentiles.
    #[arg(long = "report_api_latency")]
    report_api_latency: bool,
    /// Config keys rackbench does not know, or knows and does not model
    /// (upstream would apply them), are errors rather than warnings.
    #[arg(long)]
    strict: bool,
    /// Put the NVM tier on these paths (comma-separated directories, files
    /// or block devices) instead of the config's nvmCachePaths.
    #[arg(long = "nvm_cache_paths", value_name = "PATH[,PATH..]")]
    nvm_cache_paths: Option<String>,
    /// rackbench's flag: every instance's DRAM cache is this many MB
    /// instead of its cacheSizeMB (for a host without the config's memory;
    /// keys, operations and distributions stay the config's).
    #[arg(long = "cache_size_mb", value_name = "MB")]
    cache_size_mb: Option<u64>,
    /// rackbench's flag: every instance's NVM tier is this many MB per path
    /// instead of its nvmCacheSizeMB (for a host without the config's
    /// disk; keys, operations and distributions stay the config's).
    #[arg(long = "nvm_cache_size_mb", value_name = "MB")]
    nvm_cache_size_mb: Option<u64>,
    /// Refuse NVM paths that do not support O_DIRECT (default: fall back to
    /// buffered I/O with a warning).
    #[arg(long = "require_direct_io")]
    require_direct_io: bool,
    /// Seed of the workload's random draws.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// Loads the config named by the arguments, with `--nvm_cache_paths`
/// applied.
fn load(a: &Args) -> anyhow::Result<config::Loaded> {
    let mut loaded = config::load(&a.json_test_config, a.strict)?;
    if let Some(p) = &a.nvm_cache_paths {
        let paths: Vec<String> = p
            .split(',')
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        for c in &mut loaded.instances {
            c.cache.nvm_cache_paths = paths.clone();
        }
    }
    // The size overrides, each said once on stderr (with the warnings).
    let mut resized = Vec::new();
    for (i, c) in loaded.instances.iter_mut().enumerate() {
        if let Some(mb) = a.cache_size_mb.filter(|mb| *mb != c.cache.cache_size_mb) {
            resized.push(format!(
                "instance {i}: --cache_size_mb {mb} replaces cacheSizeMB {}",
                c.cache.cache_size_mb
            ));
            c.cache.cache_size_mb = mb;
        }
        if let Some(mb) = a
            .nvm_cache_size_mb
            .filter(|mb| *mb != c.cache.nvm_cache_size_mb)
        {
            if c.cache.nvm_cache_size_mb == 0 {
                bail!(
                    "--nvm_cache_size_mb {mb}: instance {i} has no NVM tier (nvmCacheSizeMB is 0); \
                     the flag resizes a config's NVM tier, it does not add one"
                );
            }
            resized.push(format!(
                "instance {i}: --nvm_cache_size_mb {mb} replaces nvmCacheSizeMB {}",
                c.cache.nvm_cache_size_mb
            ));
            c.cache.nvm_cache_size_mb = mb;
        }
    }
    if !resized.is_empty() {
        loaded.warnings.push(format!(
            "{}: the cache is not the config's size, so hit ratios and NVM traffic are not those \
             of the config (keys, operations and distributions are unchanged)",
            resized.join("; ")
        ));
    }
    Ok(loaded)
}

fn parse(args: &[String]) -> anyhow::Result<Args> {
    let argv = std::iter::once("cachebench".to_string()).chain(args.iter().map(|a| {
        // gflags' single-dash forms (-json_test_config=F).
        if a.len() > 2 && a.starts_with('-') && !a.starts_with("--") {
            format!("-{a}")
        } else {
            a.clone()
        }
    }));
    Args::try_parse_from(argv).map_err(|e| anyhow::anyhow!("{}", e.render().to_string().trim_end()))
}

/// The DRAM cache an instance describes; errors name what is not built
/// yet.
pub fn dram_config(c: &BenchConfig) -> anyhow::Result<DramConfig> {
    let cc = &c.cache;
    if cc.cache_size_mb == 0 {
        bail!(
            "cache_config.cacheSizeMB is 0 (upstream's default when the key is missing): expected the DRAM \
             cache size in MB (CacheLib refuses a cache without room for its pools too)"
        );
    }
    if cc.num_pools > 64 {
        bail!(
            "cache_config.numPools is {}: at most 64 pools (as CacheLib)",
            cc.num_pools
        );
    }
    // LRU5B and LRU5B2Q are CacheLib's LRU and 2Q with 5-byte compressed
    // item pointers (caches up to 32 TB instead of 256 GB): the same
    // eviction policies.
    let policy = match cc.allocator.as_str() {
        "LRU" | "LRU5B" => Policy::Lru {
            ip_spec: cc.lru_ip_spec,
        },
        "LRU2Q" | "LRU5B2Q" => Policy::TwoQ {
            hot_pct: cc.lru2q_hot_pct,
            cold_pct: cc.lru2q_cold_pct,
        },
        other => bail!(
            "cache_config.allocator '{other}' is not supported (supported: LRU, LRU2Q, LRU5B, LRU5B2Q)"
        ),
    };
    let bytes = cc.cache_size_mb.saturating_mul(1 << 20);
    if matches!(cc.allocator.as_str(), "LRU" | "LRU2Q") && bytes > MAX_4B_CACHE_BYTES {
        bail!(
            "cache_config.cacheSizeMB {}: config cache size: {bytes}  exceeds max addressable space \
             for cache: {MAX_4B_CACHE_BYTES} (upstream's words: the {} allocator's 4-byte compressed \
             pointers address 256 GB; LRU5B and LRU5B2Q address more)",
            cc.cache_size_mb,
            cc.allocator
        );
    }
    if bytes > MAX_4B_CACHE_BYTES {
        bail!(
            "cache_config.cacheSizeMB {}: rackbench's DRAM engine addresses at most 65,535 slabs of \
             4 MiB (256 GiB) with any allocator, where CacheLib's {} takes up to 32 TB",
            cc.cache_size_mb,
            cc.allocator
        );
    }
    let classes = if cc.alloc_sizes.is_empty() {
        AllocClasses::geometric(cc.min_alloc_size, cc.max_alloc_size, cc.alloc_factor)
    } else {
        AllocClasses::explicit(cc.alloc_sizes.clone())
    }
    .map_err(|e| anyhow::anyhow!("cache_config: {e}"))?;
    Ok(DramConfig {
        size_bytes: cc.cache_size_mb << 20,
        pool_sizes: cc.pool_sizes.clone(),
        classes,
        policy,
        refresh: Refresh {
            secs: cc.lru_refresh_sec,
            // Upstream's cachebench builds its MMConfig without a reconfigure
            // interval (mmReconfigureIntervalSecs is not passed on), so the
            // refresh time never follows lruRefreshRatio; neither does ours.
            ratio: 0.0,
            on_read: cc.lru_update_on_read,
            on_write: cc.lru_update_on_write,
        },
        ht_bucket_power: cc.ht_bucket_power,
    })
}

/// The NVM tier an instance describes (None when `nvmCacheSizeMB` is 0).
pub fn nvm_config(c: &BenchConfig, require_direct_io: bool) -> anyhow::Result<Option<NvmConfig>> {
    let cc = &c.cache;
    if cc.nvm_cache_size_mb == 0 {
        return Ok(None);
    }
    let k = &cc.nvm;
    check_navy_keys(k)?;
    let bs = k.block_size;
    let region = k.region_size_mb << 20;
    // nvmCacheSizeMB is per path, as CacheLib's setRaidFiles(paths, size):
    // several paths make a device of that size times their number (each
    // path's share rounded down to whole regions, the RAID-0 stripe).
    let size = cc
        .nvm_cache_size_mb
        .saturating_mul(1 << 20)
        .saturating_mul(cc.nvm_cache_paths.len().max(1) as u64);
    // Navy's metadata at the start of the device: nvmCacheMetadataSizeMB,
    // or 0.5% of the device, in whole blocks (as CacheLib's NavySetup).
    let metadata_size = if k.metadata_size_mb > 0 {
        (k.metadata_size_mb << 20).div_ceil(bs) * bs
    } else {
        size / 200 / bs * bs
    };
    // The region engine gets what the buckets and the metadata leave, in
    // whole regions; upstream's block cache gets none either when that is
    // less than a region.
    let small = if k.big_hash_size_pct > 0 {
        size / 100 * k.big_hash_size_pct / k.big_hash_bucket_size.max(1)
            * k.big_hash_bucket_size.max(1)
    } else {
        0
    };
    if metadata_size >= size {
        bail!(
            "cache_config.nvmCacheMetadataSizeMB ({}) leaves no room on a {} MiB device",
            k.metadata_size_mb,
            size >> 20
        );
    }
    if k.big_hash_size_pct < 100 && size.saturating_sub(small + metadata_size) < region {
        bail!(
            "cache_config: the region engine gets less than one {} MiB region (navyRegionSizeMB): \
             {} MiB of NVM, navyBigHashSizePct {} and {} KiB of metadata leave {} KiB (upstream's \
             block cache would get no region either); raise nvmCacheSizeMB or lower \
             navyBigHashSizePct or navyRegionSizeMB",
            k.region_size_mb,
            size >> 20,
            k.big_hash_size_pct,
            metadata_size >> 10,
            size.saturating_sub(small + metadata_size) >> 10
        );
    }
    // Upstream's BlockCacheConfig::setCleanRegions: two in-memory buffers
    // per clean region.
    let buffers = k.clean_regions.saturating_mul(2).clamp(2, 1 << 20);
    check_nvm_memory(cc, size, buffers)?;
    let eviction = match k.segmented_fifo_segment_ratio.len() {
        0 => Eviction::Lru,
        1 => Eviction::Fifo,
        _ => Eviction::SegmentedFifo(k.segmented_fifo_segment_ratio.clone()),
    };
    let reinsertion = if k.hits_reinsertion_threshold > 0 {
        Reinsertion::Hits(k.hits_reinsertion_threshold.min(u64::from(u32::MAX)) as u32)
    } else if k.probability_reinsertion_threshold > 0 {
        Reinsertion::Probability(k.probability_reinsertion_threshold as u32)
    } else {
        Reinsertion::None
    };
    let admission = if k.admission_write_rate_mb > 0 {
        Admission::WriteRate(k.admission_write_rate_mb << 20)
    } else if k.admission_probability < 1.0 {
        Admission::Random(k.admission_probability)
    } else {
        Admission::All
    };
    let write_chunk = (k.device_max_write_size / bs).max(1) * bs;
    Ok(Some(NvmConfig {
        size,
        paths: cc.nvm_cache_paths.iter().map(PathBuf::from).collect(),
        block_size: bs as u32,
        region_size: region as u32,
        bighash_pct: k.big_hash_size_pct as u32,
        bucket_size: k.big_hash_bucket_size as u32,
        bloom_bytes_per_bucket: k.bloom_filter_per_bucket_size as u32,
        small_item_max: k.small_item_max_size as u32,
        eviction,
        reinsertion,
        clean_regions: k.clean_regions.clamp(1, 1 << 20) as u32,
        buffers: buffers as u32,
        checksum: k.data_checksum,
        write_chunk: write_chunk.min(region) as u32,
        admission,
        direct_io: if require_direct_io {
            DirectIo::Require
        } else {
            DirectIo::Prefer
        },
        metadata_size,
    }))
}

/// The Navy keys each valid on their own (block, region and bucket
/// sizes, one reinsertion policy, no encryption).
fn check_navy_keys(k: &config::NvmKeys) -> anyhow::Result<()> {
    if k.encryption {
        bail!(
            "cache_config.navyEncryption: encryption of NVM contents is not supported by rackbench \
             (upstream needs a user-supplied encryptor for it too); remove the key or set it to false"
        );
    }
    let bs = k.block_size;
    if !(512..=65536).contains(&bs) || !bs.is_power_of_two() {
        bail!("cache_config.navyBlockSize is {bs}: expected a power of two from 512 to 65536");
    }
    if k.region_size_mb == 0 || k.region_size_mb > 1024 {
        bail!(
            "cache_config.navyRegionSizeMB is {}: expected 1 to 1024",
            k.region_size_mb
        );
    }
    if k.big_hash_size_pct > 100 {
        bail!(
            "cache_config.navyBigHashSizePct is {}: expected 0 to 100",
            k.big_hash_size_pct
        );
    }
    if k.big_hash_size_pct > 0
        && (k.big_hash_bucket_size == 0 || !k.big_hash_bucket_size.is_multiple_of(bs))
    {
        bail!(
            "cache_config.navyBigHashBucketSize is {}: expected a multiple of navyBlockSize ({bs})",
            k.big_hash_bucket_size
        );
    }
    if k.big_hash_size_pct > 0 && k.bloom_filter_per_bucket_size > k.big_hash_bucket_size {
        bail!(
            "cache_config.navyBloomFilterPerBucketSize is {}: expected at most the bucket size \
             (navyBigHashBucketSize, {})",
            k.bloom_filter_per_bucket_size,
            k.big_hash_bucket_size
        );
    }
    if k.hits_reinsertion_threshold > 0 && k.probability_reinsertion_threshold > 0 {
        bail!(
            "cache_config: navyHitsReinsertionThreshold and navyProbabilityReinsertionThreshold are both set; \
             choose one reinsertion policy"
        );
    }
    Ok(())
}

/// What the NVM tier of `size` bytes with `buffers` region buffers holds
/// in memory (region buffers, Bloom filters, and the whole device when it
/// is in memory) must fit in the memory available.
fn check_nvm_memory(cc: &config::CacheConfig, size: u64, buffers: u64) -> anyhow::Result<()> {
    let k = &cc.nvm;
    let region = k.region_size_mb << 20;
    // What the tier holds in memory: region buffers, Bloom filters, and the
    // whole device when it is in memory.
    let buckets = if k.big_hash_size_pct > 0 {
        size / 100 * k.big_hash_size_pct / k.big_hash_bucket_size.max(1)
    } else {
        0
    };
    let in_memory = if cc.nvm_cache_paths.is_empty() {
        size
    } else {
        0
    };
    let needed = buffers
        .saturating_mul(region)
        .saturating_add(buckets.saturating_mul(k.bloom_filter_per_bucket_size))
        .saturating_add(in_memory);
    if let Some(avail) = harness::machine::mem_available()
        && needed > avail
    {
        bail!(
            "cache_config: the NVM tier needs {} of memory ({} region buffers of {} \
             (2 x navyCleanRegions, each navyRegionSizeMB), Bloom filters{}) but only {} of memory is available; \
             {}",
            harness::machine::human_size(needed),
            buffers,
            harness::machine::human_size(region),
            if in_memory > 0 {
                ", and the in-memory device itself (no nvmCachePaths)"
            } else {
                ""
            },
            harness::machine::human_size(avail),
            if in_memory > 0 {
                "give nvmCachePaths (a directory, file or block device) or a smaller nvmCacheSizeMB"
            } else {
                "lower navyCleanRegions or navyRegionSizeMB"
            }
        );
    }
    Ok(())
}

/// Pool rebalancing of an instance (None when `poolRebalanceIntervalSec`
/// is 0).
pub fn rebalance_config(c: &BenchConfig) -> anyhow::Result<Option<(Duration, RebalanceConfig)>> {
    let cc = &c.cache;
    if cc.pool_rebalance_interval_sec == 0 {
        return Ok(None);
    }
    let strategy = match cc.rebalance_strategy.as_str() {
        "tail-age" => Rebalance::TailAge,
        "hits" => Rebalance::Hits,
        "random" | "" => Rebalance::Random,
        other => {
            eprintln!(
                "warning: cache_config.rebalanceStrategy '{other}' is not one of random, tail-age, \
                 hits; upstream runs the random strategy for it, and so do we"
            );
            Rebalance::Random
        }
    };
    if !(0.0..=100.0).contains(&cc.rebalance_diff_ratio) {
        bail!(
            "cache_config.rebalanceDiffRatio is {}: expected a ratio from 0 to 100",
            cc.rebalance_diff_ratio
        );
    }
    Ok(Some((
        Duration::from_secs(cc.pool_rebalance_interval_sec),
        RebalanceConfig {
            strategy,
            min_slabs: cc.rebalance_min_slabs.min(u64::from(u32::MAX)) as u32,
            diff_ratio: cc.rebalance_diff_ratio,
            move_items: cc.move_on_slab_release,
        },
    )))
}

/// As CacheBench's cache (it adds its pools with `ensureProvisionable`):
/// every pool must have room for one slab of each allocation class, or
/// the run is refused with CacheLib's message. `usable` is the memory the
/// pools divide.
fn ensure_provisionable(config: &DramConfig, usable: u64) -> anyhow::Result<()> {
    let required = SLAB_SIZE as u64 * config.classes.sizes().len() as u64;
    for (i, share) in config.pool_sizes.iter().enumerate() {
        let given = (usable as f64 * share) as u64;
        if required > given {
            bail!(
                "cache_config: Pool pool_{i} cannot have at least one slab for each allocation \
                 class. {required} bytes required, {given} bytes given. (CacheBench, as upstream, \
                 needs one {} MiB slab per allocation class ({}) in every pool: raise cacheSizeMB \
                 or the pool's poolSizes share, or use fewer allocation classes)",
                SLAB_SIZE >> 20,
                config.classes.sizes().len()
            );
        }
    }
    Ok(())
}

/// Builds an instance's cache: DRAM, and the NVM tier behind it when
/// configured (printing what it runs on and any warning).
pub fn build_cache(c: &BenchConfig, require_direct_io: bool) -> anyhow::Result<Cache> {
    // populateItem off leaves values unfilled (not with the consistency
    // checker, whose stamps are the values).
    let config = dram_config(c)?;
    let dram = DramCache::new(&config).map_err(|e| anyhow::anyhow!("cache_config: {e}"))?;
    ensure_provisionable(&config, dram.usable_bytes())?;
    let dram = dram.with_memory(
        c.test.populate_item || c.test.check_consistency,
        c.cache.huge_pages,
    );
    let Some(nc) = nvm_config(c, require_direct_io)? else {
        return Ok(Cache::dram_only(dram));
    };
    let (navy, warnings) = Navy::open(&nc).map_err(|e| anyhow::anyhow!("cache_config: {e}"))?;
    for w in warnings {
        eprintln!("warning: {w}");
    }
    eprintln!("{}", navy.describe());
    let k = &c.cache.nvm;
    let cache = Cache::new(
        dram,
        Some(navy),
        HybridOptions {
            memory_only_ttl: k.memory_only_ttl.min(u64::from(u32::MAX)) as u32,
            retention_threshold: k
                .admission_retention_time_threshold
                .min(u64::from(u32::MAX)) as u32,
            pad_to_alloc_size: !k.truncate_to_original,
        },
    );
    // writeAmpDeviceList: the SSDs' NAND bytes written (stderr says why
    // when they cannot be read).
    if let Some(n) = crate::nand::NandCounter::start(&c.cache.write_amp_devices) {
        cache.set_nand(n);
    }
    Ok(cache)
}

fn mix(d: &DistributionConfig, what: &str) -> anyhow::Result<PoolMix> {
    if d.add_chained_ratio > 0.0
        && (d.chained_length_range.is_empty() || d.chained_val_size_range.is_empty())
    {
        bail!(
            "{what}: addChainedRatio is {} but chainedItemLengthRange and chainedItemValSizeRange \
             (with their probabilities) are missing",
            d.add_chained_ratio
        );
    }
    if d.key_size_range.is_empty() || d.val_size_range.is_empty() {
        bail!("{what}: keySizeRange and valSizeRange are required");
    }
    let (tr, tp) = (d.ttl_secs_range.len(), d.ttl_secs_range_probability.len());
    if (tr > 0 || tp > 0) && !((tr > 0 && tr == tp) || (tp > 0 && tr == tp + 1)) {
        bail!(
            "{what}: ttlSecsRange has {tr} values and ttlSecsRangeProbability {tp}: TTL range and \
             their probabilities do not match up for either discrete or continuous probability \
             (upstream's words; expected the same number, or one more range bound)"
        );
    }
    Ok(PoolMix {
        key_size_range: d.key_size_range.clone(),
        key_size_probability: d.key_size_range_probability.clone(),
        val_size_range: d.val_size_range.clone(),
        val_size_probability: d.val_size_range_probability.clone(),
        op_weights: d.op_ratios,
        popularity: (!d.popularity_buckets.is_empty())
            .then(|| (d.popularity_buckets.clone(), d.popularity_weights.clone())),
        legacy_key_gen: d.use_legacy_key_gen,
        ttl: (!d.ttl_secs_range.is_empty() || !d.ttl_secs_range_probability.is_empty()).then(
            || {
                (
                    d.ttl_secs_range.clone(),
                    d.ttl_secs_range_probability.clone(),
                )
            },
        ),
        add_chained: d.add_chained_ratio,
        chain: (d.add_chained_ratio > 0.0).then(|| crate::generator::ChainSpec {
            length_range: d.chained_length_range.clone(),
            length_probability: d.chained_length_probability.clone(),
            val_size_range: d.chained_val_size_range.clone(),
            val_size_probability: d.chained_val_size_probability.clone(),
        }),
    })
}

/// Where an instance's operations come from.
pub enum Source {
    Synthetic(Generator),
    /// A CSV trace, read as the run goes (the run takes the reader).
    Replay {
        reader: std::sync::Mutex<Option<Box<TraceReader>>>,
        amp_factor: u32,
        serialization: config::Serialization,
    },
    /// A binary trace (`binary-replay`).
    Binary(BinaryTrace),
    /// A CDN or block trace replayed piece by piece (`piecewise-replay`,
    /// `block-replay`).
    Chunked {
        spec: Box<crate::chunked::ChunkSpec>,
        stats: Box<crate::chunked::ChunkStats>,
        style: output::Style,
    },
}

/// What a replay's trace is read with.
fn trace_spec(c: &BenchConfig) -> TraceSpec {
    TraceSpec {
        files: c.test.trace_files.clone(),
        honour_op_count: !c.test.ignore_op_count,
        fast_forward: c.test.replay.fast_forward_count,
        repeat: c.test.repeat_trace_replay,
        timestamp_factor: c.test.timestamp_factor,
    }
}

/// The most DRAM CacheLib's 4-byte compressed pointers address (LRU,
/// LRU2Q): 2^16 slabs of 4 MiB.
const MAX_4B_CACHE_BYTES: u64 = 1 << 38;

/// What a piecewise or block replay reads, from the instance's config.
fn chunk_spec(
    c: &BenchConfig,
    kind: crate::chunked::Kind,
) -> anyhow::Result<crate::chunked::ChunkSpec> {
    let t = &c.test;
    let r = &t.replay;
    if kind == crate::chunked::Kind::PieceWise && t.cache_piece_size == 0 {
        bail!("test_config.cachePieceSize is 0: expected the bytes of a cache piece");
    }
    if kind == crate::chunked::Kind::BlockChunk
        && (r.chunk_size_kb == 0 || r.block_size_kb < r.chunk_size_kb)
    {
        bail!(
            "test_config.replayGeneratorConfig: chunkSizeKB {} and blockSizeKB {}: expected a \
             chunk of at least 1 KB and a block of at least one chunk",
            r.chunk_size_kb,
            r.block_size_kb
        );
    }
    for (f, _) in &r.stats_per_field {
        if *f >= r.aggregation_fields {
            bail!(
                "test_config.replayGeneratorConfig.statsPerAggField: field {f} is not below \
                 numAggregationFields ({}), as upstream requires",
                r.aggregation_fields
            );
        }
    }
    Ok(crate::chunked::ChunkSpec {
        kind,
        files: t.trace_files.clone(),
        repeat: t.repeat_trace_replay,
        amp_factor: r.amp_factor,
        fast_forward: if kind == crate::chunked::Kind::PieceWise {
            r.fast_forward_count
        } else {
            0
        },
        timestamp_factor: t.timestamp_factor,
        piece_size: t.cache_piece_size,
        max_pieces: t.max_cache_pieces,
        aggregation_fields: r.aggregation_fields,
        extra_fields: r.extra_fields,
        stats_per_field: r.stats_per_field.clone(),
        block_size: r.block_size_kb * 1024,
        chunk_size: r.chunk_size_kb * 1024,
        warmup_timestamp: t
            .nvm_warmup_check
            .map_or(0, |w| w.request_timestamp_threshold),
    })
}

/// The most keys `checkConsistency` tracks (16 bytes each).
const CONSISTENCY_MAX_KEYS: u64 = 1 << 27;

/// Checks the generator an instance names, and its thread count.
fn check_generator(c: &BenchConfig) -> anyhow::Result<()> {
    let converting = c.test.generator == "replay" && c.test.replay.binary_file_name.is_some();
    if c.test.num_threads == 0 && !converting {
        bail!(
            "test_config.numThreads is 0 (upstream's default when the key is missing): expected at least \
             1 stressor thread"
        );
    }
    match c.test.generator.as_str() {
        "workload" | "online" => Ok(()),
        "replay" | "binary-replay" | "piecewise-replay" | "block-replay" => {
            if c.test.trace_files.is_empty() {
                bail!(
                    "test_config: generator '{}' needs traceFileName or traceFileNames",
                    c.test.generator
                );
            }
            if c.test.generator == "binary-replay" && c.test.trace_files.len() > 1 {
                bail!(
                    "test_config: generator 'binary-replay' reads one binary trace (traceFileName), \
                     not {} files",
                    c.test.trace_files.len()
                );
            }
            for f in &c.test.trace_files {
                if !f.is_file() {
                    bail!("test_config: trace file {} cannot be read", f.display());
                }
            }
            Ok(())
        }
        other => bail!(
            "test_config.generator '{other}' is not supported (supported: {})",
            config::GENERATORS.join(", ")
        ),
    }
}

/// The synthetic workload an instance describes.
pub fn spec(c: &BenchConfig) -> anyhow::Result<Spec> {
    let t = &c.test;
    check_generator(c)?;
    if t.num_keys == 0 {
        bail!(
            "test_config.numKeys is 0 (upstream's default when the key is missing): expected the number \
             of distinct keys the {} generator draws from",
            t.generator
        );
    }
    let mut mixes = Vec::new();
    if t.pool_distributions.is_empty() {
        mixes.push(mix(&t.distribution, "test_config")?);
    } else {
        for (i, d) in t.pool_distributions.iter().enumerate() {
            mixes.push(mix(d, &format!("test_config.poolDistributions[{i}]"))?);
        }
    }
    Ok(Spec {
        num_keys: t.num_keys,
        key_pool_distribution: t.key_pool_distribution.clone(),
        op_pool_distribution: t.op_pool_distribution.clone(),
        mixes,
    })
}

/// Local wall-clock time (h, m, s), for progress lines.
fn wall_clock() -> (u32, u32, u32) {
    let now = jiff::ZonedDateTime::now();
    (now.hour() as u32, now.minute() as u32, now.second() as u32)
}

/// A chart sample of an interval of `secs` ending at `t`, from the
/// interval's stats (see [`interval_stats`]) and the counters at its start.
fn sample(
    window: &CacheStats,
    prev: &CacheStats,
    hit: output::HitRatios,
    ops: u64,
    secs: f64,
    t: f64,
) -> crate::plots::Sample {
    // The device's latency, as the stats file's `NVM Read  Latency` lines
    // (upstream's figure).
    let lat = |read: bool| {
        window.nvm.as_ref().and_then(|n| {
            let d = &n.engine.device;
            let h = if read {
                &d.read_latency_total_us
            } else {
                &d.write_latency_total_us
            };
            crate::plots::interval(h, None)
        })
    };
    crate::plots::Sample {
        t,
        ops_per_sec: ops as f64 / secs.max(1e-9),
        hit,
        gets: window.gets.saturating_sub(prev.gets),
        nvm_gets: window.nvm.as_ref().map(|n| {
            let before = prev.nvm.as_ref().map_or(0, |p| p.counters.nvm_gets);
            n.counters.nvm_gets.saturating_sub(before)
        }),
        read_us: lat(true),
        write_us: lat(false),
    }
}

/// Whether the cache counted any operation between two snapshots.
fn cache_moved(cur: &CacheStats, prev: &CacheStats) -> bool {
    let allocs = |s: &CacheStats| s.pools.iter().map(|p| p.alloc_attempts).sum::<u64>();
    cur.gets != prev.gets || cur.removes != prev.removes || allocs(cur) != allocs(prev)
}

/// `cur` with its whole-run NVM latency histograms (the device's and the
/// engines') cut to what was recorded since `prev` (for the charts; the
/// text prints the last minute's, as upstream).
fn interval_stats(cur: &CacheStats, prev: &CacheStats) -> CacheStats {
    let mut w = cur.clone();
    if let (Some(c), Some(p)) = (w.nvm.as_mut(), prev.nvm.as_ref()) {
        let _ = c
            .engine
            .device
            .read_latency_total_us
            .subtract(&p.engine.device.read_latency_total_us);
        let _ = c
            .engine
            .device
            .write_latency_total_us
            .subtract(&p.engine.device.write_latency_total_us);
        for (h, ph) in [
            (&mut c.engine.read_latency_us, &p.engine.read_latency_us),
            (&mut c.engine.write_latency_us, &p.engine.write_latency_us),
        ] {
            if let (Some(h), Some(ph)) = (h.as_mut(), ph.as_ref()) {
                let _ = h.subtract(ph);
            }
        }
    }
    w
}

fn sum_cache(stats: &[CacheStats]) -> CacheStats {
    let mut s = CacheStats::default();
    for c in stats {
        s.gets += c.gets;
        s.hits += c.hits;
        s.expired += c.expired;
        s.removes += c.removes;
        s.pools.extend(c.pools.iter().cloned());
        let (r, o) = (&mut s.release, &c.release);
        r.slabs_released += o.slabs_released;
        r.move_attempts += o.move_attempts;
        r.move_successes += o.move_successes;
        r.eviction_attempts += o.eviction_attempts;
        r.eviction_successes += o.eviction_successes;
        if let Some(n) = &c.nvm {
            s.nvm.get_or_insert_with(Default::default).add(n);
        }
    }
    s
}

struct Instance {
    cache: Cache,
    /// Pool rebalancing: every this often, with these settings.
    rebalance: Option<(Duration, RebalanceConfig)>,
    source: Source,
    repeat_trace: bool,
    options: Options,
    fractions: Vec<f64>,
    config: BenchConfig,
}

/// Runs an instance's stressor on its source: the figures, and a replay's
/// generator counts.
fn run_instance(
    i: &Instance,
    stop: &AtomicBool,
    progress: &Progress,
) -> (RunStats, Option<GeneratorStats>) {
    let counted = |name: &str, (stats, counts): (RunStats, stressor::ReplayCounts)| {
        if let Some(e) = &counts.error {
            eprintln!("error: the trace could not be read to its end: {e}");
        }
        (
            stats,
            Some(GeneratorStats {
                name: name.to_string(),
                samples: counts.samples,
                parse_errors: counts.parse_errors,
                text: None,
            }),
        )
    };
    match &i.source {
        Source::Synthetic(g) => (stressor::run(&i.cache, g, &i.options, stop, progress), None),
        Source::Replay {
            reader,
            amp_factor,
            serialization,
        } => {
            let Some(reader) = reader.lock().unwrap_or_else(|e| e.into_inner()).take() else {
                return (RunStats::default(), None);
            };
            counted(
                "KVReplayGenerator",
                stressor::run_replay_stream(
                    &i.cache,
                    *reader,
                    *amp_factor,
                    *serialization,
                    &i.options,
                    stop,
                    progress,
                ),
            )
        }
        Source::Chunked { spec, stats, style } => {
            let (run, error) =
                stressor::run_chunked(&i.cache, spec, stats, &i.options, stop, progress);
            if let Some(e) = &error {
                eprintln!("error: the trace could not be read to its end: {e}");
            }
            let invalid = stats.invalid.load(Ordering::Relaxed);
            let text = stats.render(*style, run.elapsed_secs.max(1e-9));
            (
                run,
                Some(GeneratorStats {
                    name: spec.kind.name().to_string(),
                    samples: stats
                        .samples
                        .load(Ordering::Relaxed)
                        .saturating_sub(invalid),
                    parse_errors: invalid,
                    text: Some(text),
                }),
            )
        }
        Source::Binary(trace) => counted(
            "BinaryKVReplayGenerator",
            stressor::run_replay_binary(
                &i.cache,
                trace,
                i.config.test.replay.fast_forward_count,
                i.repeat_trace,
                i.config.test.replay.amp_size_factor,
                &i.options,
                stop,
                progress,
            ),
        ),
    }
}

/// The version of [`CacheBenchRecord`]; raise it when the record's shape
/// changes.
const RECORD_VERSION: u32 = 2;

/// Whether a recorded run passed: not aborted (as upstream, a run stopped
/// by Ctrl-C or by `--timeout_seconds` fails), no NVM failure and no
/// instance with a failure line.
fn record_passed(r: &CacheBenchRecord) -> bool {
    !aborted(r) && r.nvm_failure.is_none() && r.instances.iter().all(|i| i.failures.is_empty())
}

/// Whether the run was cut short: Ctrl-C or `--timeout_seconds` (upstream
/// aborts its runners for both).
fn aborted(r: &CacheBenchRecord) -> bool {
    r.interrupted || r.stopped_by_timeout_seconds.is_some()
}

/// An instance's end-of-run report (`== Test Results ==` and its failure
/// lines).
fn instance_report(st: output::Style, i: &InstanceRecord) -> String {
    let failures: Vec<&str> = i.failures.iter().map(String::as_str).collect();
    let counters = i
        .print_nvm_counters
        .then(|| {
            i.stats
                .cache
                .nvm
                .as_ref()
                .map(crate::counters::nvm_counters_block)
        })
        .flatten();
    if i.generator.is_none() && counters.is_none() {
        return output::final_report(st, &i.stats, &failures);
    }
    // printNvmCounters: upstream's counters map closes its allocator
    // stats; a replay's generator block follows the throughput lines,
    // before the blank line and the failure lines.
    let mut text = output::final_report(st, &i.stats, &[]);
    if let Some(block) = counters {
        let alloc = output::allocator_stats(st, &i.stats);
        let at = text.find(&alloc).map_or(text.len(), |p| p + alloc.len());
        text.insert_str(at, &block);
    }
    if let Some(g) = &i.generator {
        if text.ends_with('\n') {
            text.pop();
        }
        match &g.text {
            Some(block) => text.push_str(block),
            None => text.push_str(&crate::replay::generator_stats_block(
                &g.name,
                g.samples,
                g.parse_errors,
            )),
        }
        text.push('\n');
    }
    for f in failures {
        text.push_str(f);
        text.push('\n');
    }
    text
}

/// Upstream's end-of-run text on stdout when no instance has a stats file
/// of its own: each instance's report, with several instances upstream's
/// aggregate of them, then (in the current layout) `Finished!` or
/// `Failed.`.
pub fn write_record(
    r: &CacheBenchRecord,
    layout: output::Layout,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let st = layout.style(r.instances.len());
    for i in &r.instances {
        write!(out, "{}", instance_report(st, i))?;
    }
    write_closing(r, st, out)
}

/// What stdout gets after the instances' reports: the aggregate of
/// several instances and the closing line.
fn write_closing(
    r: &CacheBenchRecord,
    st: output::Style,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    if let Some(total) = &r.aggregated {
        let n = r.instances.len();
        write!(out, "{}", output::aggregated_report(st, total, n))?;
    }
    if let Some(line) = st.closing_line(record_passed(r)) {
        write!(out, "{line}")?;
    }
    out.flush()
}

/// The stats file of instance `i` of several: upstream appends `_<i>` to
/// the file's stem (`stats.log` → `stats_0.log`).
fn instance_stats_file(p: &Path, i: usize) -> PathBuf {
    let mut name = p.file_stem().unwrap_or_default().to_os_string();
    name.push(format!("_{i}"));
    if let Some(ext) = p.extension() {
        name.push(".");
        name.push(ext);
    }
    p.with_file_name(name)
}

impl Workload for CacheBench {
    fn headlines(&self) -> &'static [direction::Headline] {
        crate::directions::HEADLINES
    }

    fn directions(&self) -> &'static [&'static [direction::Rule]] {
        crate::directions::TABLES
    }

    fn charts(&self, record: &Record) -> Vec<harness::page_chart::PageChart> {
        match record.decode::<CacheBenchRecord>(self.name(), RECORD_VERSION) {
            Ok(r) => crate::charts::charts(&r),
            Err(_) => Vec::new(),
        }
    }

    fn history_charts(
        &self,
        job: &str,
        runs: &[&harness::store::RunRow],
    ) -> Vec<harness::page_chart::PageChart> {
        crate::charts::history(job, runs)
    }

    fn name(&self) -> &'static str {
        "cachebench"
    }

    fn description(&self) -> &'static str {
        "CacheBench: a CacheLib-style DRAM + NVM (flash) cache under CacheLib's synthetic and replayed workloads"
    }

    fn upstream(&self) -> &'static str {
        "CacheLib's cachebench"
    }

    fn help(&self) -> String {
        use clap::CommandFactory;
        Args::command().render_long_help().to_string()
    }

    fn command(&self) -> Option<clap::Command> {
        use clap::CommandFactory;
        Some(Args::command())
    }

    fn validate(&self, args: &[String]) -> anyhow::Result<()> {
        let a = parse(args)?;
        let loaded = load(&a)?;
        for c in &loaded.instances {
            check_generator(c)?;
            if c.test.generator == "replay" && c.test.replay.binary_file_name.is_some() {
                // Converting a trace builds no cache (as upstream).
                continue;
            }
            dram_config(c)?;
            nvm_config(c, a.require_direct_io)?;
            rebalance_config(c)?;
            if !matches!(
                c.test.generator.as_str(),
                "replay" | "binary-replay" | "piecewise-replay" | "block-replay"
            ) {
                spec(c)?;
            }
        }
        Ok(())
    }

    fn format(&self, record: &Record, out: &mut dyn Write) -> anyhow::Result<()> {
        let r: CacheBenchRecord = record.decode(self.name(), RECORD_VERSION)?;
        // In the layout the run printed (the current one for runs stored
        // before the record kept it).
        write_record(&r, r.layout, out)?;
        Ok(())
    }

    /// Upstream's Runner says "Test aborted." on stderr once per instance
    /// when the run was stopped; stdout gets the instances' reports (or,
    /// when they went to their stats files, only what follows them).
    fn format_end(
        &self,
        record: &Record,
        out: &mut dyn Write,
        diag: &mut dyn Write,
    ) -> anyhow::Result<()> {
        let r: CacheBenchRecord = record.decode(self.name(), RECORD_VERSION)?;
        if aborted(&r) {
            for _ in &r.instances {
                writeln!(diag, "Test aborted.")?;
            }
            diag.flush()?;
        }
        if r.reports_in_stats_files {
            write_closing(&r, r.layout.style(r.instances.len()), out)?;
        } else {
            write_record(&r, r.layout, out)?;
        }
        Ok(())
    }

    fn metrics(&self, record: &Record) -> anyhow::Result<Map<String, Value>> {
        let r: CacheBenchRecord = record.decode(self.name(), RECORD_VERSION)?;
        harness::record::metrics_map(&crate::metrics::of_record(&r))
    }

    fn run(&self, ctx: &RunContext, args: &[String]) -> anyhow::Result<Outcome> {
        let began = Instant::now();
        let a = parse(args)?;
        let loaded = load(&a)?;
        for w in &loaded.warnings {
            eprintln!("warning: {w}");
        }
        let st = a.output_layout.style(loaded.instances.len());
        let mut out = std::io::stdout();
        write!(out, "{}", output::config_echo(&loaded.text))?;
        // As upstream's main: several instances need a stats file each
        // (their progress would interleave on stdout); checked after the
        // config's echo, before the welcome line, and the run ends with 1.
        if loaded.instances.len() > 1 && a.progress_stats_file.is_none() {
            writeln!(
                out,
                "Error: --progress_stats_file must be specified when running multiple \
                 instances (numInstances={})",
                loaded.instances.len()
            )?;
            return Ok(Outcome::helper(false));
        }
        writeln!(out, "{}", output::WELCOME)?;
        let mut instances = Vec::new();
        for c in &loaded.instances {
            match setup_instance(c, &a, st, &mut out)? {
                Setup::Ready(i) => instances.push(*i),
                Setup::WroteTrace => return Ok(Outcome::helper(true)),
            }
        }
        // Upstream's main announces several instances, then each
        // instance's stressor prints its own total as it starts.
        if instances.len() > 1 {
            write!(out, "{}", output::running_instances(instances.len()))?;
        }
        let mut total_ops = 0;
        for i in &instances {
            let ops = i.options.threads as u64 * i.options.ops_per_thread;
            total_ops += ops;
            write!(out, "{}", output::ops_to_be_run(st, ops))?;
        }
        out.flush()?;

        let stop = AtomicBool::new(false);
        let progress: Vec<Progress> = instances.iter().map(|_| Progress::default()).collect();
        let started = Instant::now();
        let mut stats_files = open_stats_files(&a, ctx, instances.len(), st)?;
        let nvm_failure: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
        let drive = Drive {
            instances: &instances,
            progress: &progress,
            stop: &stop,
            done: AtomicBool::new(false),
            nvm_failure: &nvm_failure,
            ctx,
            a: &a,
            st,
            started,
            eta: Eta::new(total_ops),
        };
        let (results, samples) = drive.run(&mut stats_files);
        drive.eta.bar.finish();
        let nvm_failure = nvm_failure.into_inner().unwrap_or_else(|e| e.into_inner());
        let timed_out =
            stop.load(Ordering::Relaxed) && !ctx.cancel.is_stopped() && nvm_failure.is_none();
        let charts = write_charts(&a, ctx, &samples);
        let mut record = CacheBenchRecord {
            instances: Vec::new(),
            aggregated: None,
            charts,
            series: crate::record::series(&samples),
            interrupted: ctx.cancel.is_stopped(),
            stopped_by_timeout_seconds: timed_out.then_some(a.timeout_seconds),
            nvm_failure: nvm_failure.clone(),
            layout: a.output_layout,
            first_op_secs: first_op_secs(&progress, began),
            reports_in_stats_files: instances.len() > 1 && a.progress_stats_file.is_some(),
        };
        add_instances(&mut record, &instances, results);
        append_reports(&record, st, &mut stats_files);
        Ok(Outcome::measured(
            record_passed(&record),
            Record::of(self.name(), RECORD_VERSION, &record),
        ))
    }
}

/// What setting an instance up ended with.
enum Setup {
    /// The instance, ready to run.
    Ready(Box<Instance>),
    /// The replay generator wrote its binary trace (`binaryFileName`): the
    /// program ends there, as upstream's.
    WroteTrace,
}

/// Config -> engine for one instance: its source of operations (printing
/// a pregenerated workload's lines), its stressor options and its cache.
fn setup_instance(
    c: &BenchConfig,
    a: &Args,
    st: output::Style,
    out: &mut std::io::Stdout,
) -> anyhow::Result<Setup> {
    check_generator(c)?;
    if let (true, Some(out_file)) = (
        c.test.generator == "replay",
        c.test.replay.binary_file_name.as_ref(),
    ) {
        // As upstream: the replay generator with binaryFileName
        // writes the binary trace and the program ends there.
        write_binary_trace(c, out_file)?;
        return Ok(Setup::WroteTrace);
    }
    let dram = dram_config(c)?;
    let source = source(c, a, st, out)?;
    let options = options(c, a);
    let cache = build_cache(c, a.require_direct_io)?;
    if a.report_api_latency {
        cache.enable_api_latency();
    }
    Ok(Setup::Ready(Box::new(Instance {
        cache,
        rebalance: rebalance_config(c)?,
        source,
        repeat_trace: c.test.repeat_trace_replay,
        options,
        fractions: dram.pool_sizes.clone(),
        config: c.clone(),
    })))
}

/// The replay generator with `binaryFileName`: converts the trace and says
/// what it wrote on stderr.
fn write_binary_trace(c: &BenchConfig, out_file: &Path) -> anyhow::Result<()> {
    let w = crate::replay::write_binary(
        &trace_spec(c),
        c.test.replay.amp_factor,
        c.test.replay.amp_size_factor,
        out_file,
    )
    .map_err(anyhow::Error::msg)?;
    eprintln!(
        "wrote {} requests ({} trace lines, {} that could not be parsed{}) to {}",
        w.requests,
        w.samples,
        w.parse_errors,
        if w.long_keys > 0 {
            format!(
                ", {} keys longer than the format's 255 bytes left out",
                w.long_keys
            )
        } else {
            String::new()
        },
        out_file.display()
    );
    Ok(())
}

/// Where an instance's operations come from: a trace reader, a binary
/// trace, a chunked replay or a synthetic generator.
fn source(
    c: &BenchConfig,
    a: &Args,
    st: output::Style,
    out: &mut std::io::Stdout,
) -> anyhow::Result<Source> {
    let t0 = Instant::now();
    if c.test.generator == "replay" {
        let reader = TraceReader::new(trace_spec(c)).map_err(anyhow::Error::msg)?;
        return Ok(Source::Replay {
            reader: std::sync::Mutex::new(Some(Box::new(reader))),
            amp_factor: c.test.replay.amp_factor,
            serialization: c.test.replay.serialization,
        });
    }
    if c.test.generator == "binary-replay" {
        return Ok(Source::Binary(
            BinaryTrace::open(&c.test.trace_files[0]).map_err(anyhow::Error::msg)?,
        ));
    }
    if let Some(kind) = match c.test.generator.as_str() {
        "piecewise-replay" => Some(crate::chunked::Kind::PieceWise),
        "block-replay" => Some(crate::chunked::Kind::BlockChunk),
        _ => None,
    } {
        let spec = chunk_spec(c, kind)?;
        let stats = crate::chunked::ChunkStats::new(&spec);
        return Ok(Source::Chunked {
            spec: Box::new(spec),
            stats: Box::new(stats),
            style: st,
        });
    }
    let generator = synthetic(c, a, st, out, t0)?;
    if c.test.check_consistency && generator.num_keys() > CONSISTENCY_MAX_KEYS {
        bail!(
            "test_config.checkConsistency with numKeys {}: rackbench's value \
             checker keeps 16 bytes per key and takes at most {CONSISTENCY_MAX_KEYS} keys",
            generator.num_keys()
        );
    }
    Ok(Source::Synthetic(generator))
}

/// The `online` or `workload` generator of an instance.
fn synthetic(
    c: &BenchConfig,
    a: &Args,
    st: output::Style,
    out: &mut std::io::Stdout,
    t0: Instant,
) -> anyhow::Result<Generator> {
    let spec = spec(c)?;
    if c.test.generator == "online" {
        // Upstream's OnlineGenerator prints nothing.
        return Generator::new(&spec, a.seed).map_err(anyhow::Error::msg);
    }
    // `workload`: keys with their sizes, and each pool's sampled accesses,
    // as upstream's WorkloadGenerator (`Created N keys in X mins`, then per
    // pool `Generating X.XXM sampled accesses`, then `Generated access
    // patterns in X mins`).
    // The accesses are not stored: each operation draws its own from a
    // seeded generator per pool (bounded memory at any numOps), so the
    // patterns' time is what setting up the pools' samplers took, from
    // the keys' end (the first pool's line) to here, measured like the
    // keys' time.
    let accesses = c.test.num_ops.saturating_mul(c.test.num_threads as u64);
    let mut lines = String::new();
    let mut keys_done: Option<Instant> = None;
    let g = Generator::pregenerated(&spec, a.seed, accesses, &mut |n| {
        keys_done.get_or_insert_with(Instant::now);
        lines.push_str(&output::generating_accesses_in(st, n))
    })
    .map_err(anyhow::Error::msg)?;
    let keys_done = keys_done.unwrap_or_else(Instant::now);
    let mins = |d: Duration| d.as_secs() as f64 / 60.0;
    write!(
        out,
        "{}{lines}{}",
        output::keys_created(st, g.num_keys(), mins(keys_done.duration_since(t0))),
        output::generated_patterns(st, mins(keys_done.elapsed()))
    )?;
    Ok(g)
}

/// The stressor's options for an instance.
fn options(c: &BenchConfig, a: &Args) -> Options {
    Options {
        threads: c.test.num_threads,
        ops_per_thread: c.test.num_ops,
        lookaside: c.test.enable_lookaside,
        only_set_if_miss: c.test.only_set_if_miss,
        touch_value: c.test.touch_value,
        max_inconsistencies: c.test.max_inconsistency_count,
        op_pool_distribution: c.test.op_pool_distribution.clone(),
        warmup_timestamp: c
            .test
            .nvm_warmup_check
            .map_or(0, |w| w.request_timestamp_threshold),
        rate_per_sec: c.test.op_rate_per_sec,
        rate_burst: c.test.op_rate_burst_size,
        delay_batch: c.test.op_delay_batch,
        delay: Duration::from_nanos(c.test.op_delay_ns),
        seed: a.seed,
        check_consistency: c.test.check_consistency,
        api_latency: a.report_api_latency,
    }
}

/// An instance's progress stats file, if it has one, and its path.
type StatsFile = Option<(PathBuf, std::fs::File)>;

/// Each instance's stats figures and a replay's generator counts.
type Results = Vec<(RunStats, Option<GeneratorStats>)>;

/// Opens the progress stats files. As upstream's ProgressTracker: the file
/// is appended to (an earlier run's blocks stay) and each run starts with a
/// header (in the current layout). Several instances each get their own
/// file, `<stem>_<i><ext>`, as upstream's main names them.
fn open_stats_files(
    a: &Args,
    ctx: &RunContext,
    n: usize,
    st: output::Style,
) -> anyhow::Result<Vec<StatsFile>> {
    let mut stats_files: Vec<StatsFile> = Vec::new();
    for i in 0..n {
        let Some(p) = &a.progress_stats_file else {
            stats_files.push(None);
            continue;
        };
        let p = if n > 1 {
            ctx.output_path(&instance_stats_file(p, i))
        } else {
            ctx.output_path(p)
        };
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&p)
            .with_context(|| format!("cannot open {} to append to it", p.display()))?;
        if st.stats_file_header() {
            f.write_all(output::STATS_FILE_HEADER.as_bytes())
                .with_context(|| format!("cannot write to {}", p.display()))?;
        }
        stats_files.push(Some((p, f)));
    }
    Ok(stats_files)
}

/// The run's drive: the instances' stressors, their pool rebalancers and
/// the controller (progress, timeout, Ctrl-C), sharing this state.
struct Drive<'a> {
    instances: &'a [Instance],
    progress: &'a [Progress],
    /// Set to make the stressors stop early.
    stop: &'a AtomicBool,
    /// Set once every stressor is done (ends the helper threads).
    done: AtomicBool,
    /// The first fatal NVM error an instance reported.
    nvm_failure: &'a std::sync::Mutex<Option<String>>,
    ctx: &'a RunContext,
    a: &'a Args,
    st: output::Style,
    started: Instant,
    eta: Eta,
}

/// rackbench's progress bar with an ETA, on stderr, only when stderr is a
/// terminal (upstream's stdout and stats files are unchanged): the share
/// of the run's operations done sets the plan, so the bar's percentage
/// is the operations' and its ETA the time they take at the rate so far.
struct Eta {
    bar: harness::progress::Progress,
    /// Whether the bar is drawn (a terminal, and a known number of
    /// operations).
    on: bool,
    total_ops: u64,
}

impl Eta {
    fn new(total_ops: u64) -> Eta {
        let on = total_ops > 0
            && std::io::IsTerminal::is_terminal(&std::io::stderr())
            && std::env::var_os("RACKBENCH_PLAIN_PROGRESS").is_none();
        let bar = if on {
            harness::progress::Progress::new("cachebench", Duration::from_secs(60))
        } else {
            harness::progress::Progress::hidden()
        };
        Eta { bar, on, total_ops }
    }

    /// Plans the rest of the run at the rate so far.
    fn update(&self, ops: u64, elapsed: Duration) {
        if !self.on || ops == 0 {
            return;
        }
        let done = (ops as f64 / self.total_ops as f64).min(1.0);
        self.bar.set_total(elapsed.div_f64(done.max(1e-9)));
        self.bar.phase(&format!(
            "{:.2}M of {:.2}M ops",
            ops as f64 / 1e6,
            self.total_ops as f64 / 1e6
        ));
    }

    /// A line of upstream's stdout, printed around the bar.
    fn print(&self, line: &str) {
        if self.on {
            self.bar.output(line.strip_suffix('\n').unwrap_or(line));
        } else {
            print!("{line}");
        }
    }
}

/// The controller's state between progress lines: the counters at the
/// previous line (for the next interval's rates) and the chart samples.
struct Window {
    samples: Vec<crate::plots::Sample>,
    prev_ops: u64,
    prev_t: f64,
    /// Each instance's counters at the previous progress line, and their
    /// sums (for the charts).
    prev_each: Vec<CacheStats>,
    prev: CacheStats,
}

impl Drive<'_> {
    /// Runs every instance to its end: their figures, and the progress
    /// samples for the charts.
    fn run(&self, stats_files: &mut [StatsFile]) -> (Results, Vec<crate::plots::Sample>) {
        std::thread::scope(|s| {
            let runs: Vec<_> = self
                .instances
                .iter()
                .zip(self.progress)
                .map(|(i, p)| s.spawn(move || run_instance(i, self.stop, p)))
                .collect();
            // Pool rebalancing, one thread per instance that has it.
            for i in self.instances {
                if let Some((every, cfg)) = i.rebalance {
                    let (done, cache, seed) = (&self.done, &i.cache, self.a.seed);
                    s.spawn(move || rebalance_loop(done, cache, every, &cfg, seed));
                }
            }
            // Progress, timeout and Ctrl-C, until every instance is done;
            // returns the progress samples for the charts.
            let controller = s.spawn(move || self.control(stats_files));
            let r: Results = runs
                .into_iter()
                .map(|h| h.join().unwrap_or_default())
                .collect();
            self.done.store(true, Ordering::Relaxed);
            (r, controller.join().unwrap_or_default())
        })
    }

    /// The controller's loop: warm-up checks, fatal errors, timeout and
    /// Ctrl-C, progress lines; returns the chart samples.
    fn control(&self, stats_files: &mut [StatsFile]) -> Vec<crate::plots::Sample> {
        let prev_each: Vec<CacheStats> = self.instances.iter().map(|i| i.cache.stats()).collect();
        let mut w = Window {
            samples: Vec::new(),
            prev_ops: 0,
            prev_t: 0.0,
            prev: sum_cache(&prev_each),
            prev_each,
        };
        let tick = Duration::from_secs(self.a.progress.max(1));
        let mut next = Instant::now() + tick;
        // checkNvmCacheWarmUp: upstream logs the first time its policy says
        // NVM is warm (checked every 250 ms and at the end).
        let mut warm: Vec<bool> = self
            .instances
            .iter()
            .map(|i| i.config.test.nvm_warmup_check.is_none())
            .collect();
        let mut next_warm = Instant::now();
        let mut next_eta = Instant::now();
        while !self.done.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
            if Instant::now() >= next_eta {
                next_eta += Duration::from_secs(1);
                let ops = self
                    .progress
                    .iter()
                    .map(|p| p.ops.load(Ordering::Relaxed))
                    .sum();
                self.eta.update(ops, self.started.elapsed());
            }
            if warm.iter().any(|w| !w) && Instant::now() >= next_warm {
                next_warm += Duration::from_millis(250);
                self.check_warm(&mut warm);
            }
            self.check_stop();
            if self.a.progress > 0 && Instant::now() >= next {
                next += tick;
                self.progress_lines(&mut w, stats_files);
            }
        }
        self.check_warm(&mut warm);
        self.last_stretch(&mut w, tick);
        w.samples
    }

    /// Says "NVM cache has been warmed up" once per instance whose
    /// warm-up policy is met.
    fn check_warm(&self, warm: &mut [bool]) {
        for (k, inst) in self.instances.iter().enumerate() {
            let Some(w) = inst.config.test.nvm_warmup_check else {
                continue;
            };
            if warm[k] {
                continue;
            }
            let evicted = || inst.cache.stats().nvm.map_or(0, |n| n.engine.evictions());
            if self.progress[k].warm_timestamp.load(Ordering::Relaxed) > 0
                || (w.eviction_count_threshold > 0
                    && inst.cache.nvm().is_some()
                    && evicted() >= w.eviction_count_threshold)
            {
                eprintln!("NVM cache has been warmed up");
                warm[k] = true;
            }
        }
    }

    /// Stops the run on a fatal NVM error (said once), Ctrl-C or the
    /// timeout.
    fn check_stop(&self) {
        for i in self.instances {
            if let Some(f) = i.cache.fatal() {
                let mut g = self.nvm_failure.lock().unwrap_or_else(|e| e.into_inner());
                if g.is_none() {
                    eprintln!("error: {f}; stopping the run");
                    *g = Some(f);
                }
                self.stop.store(true, Ordering::Relaxed);
            }
        }
        if self.ctx.cancel.is_stopped()
            || (self.a.timeout_seconds > 0
                && self.started.elapsed().as_secs() >= self.a.timeout_seconds)
        {
            self.stop.store(true, Ordering::Relaxed);
        }
    }

    /// One progress interval: a chart sample, and a line per instance
    /// (upstream's ProgressTracker has one per instance) on stdout or in
    /// its stats file.
    fn progress_lines(&self, w: &mut Window, stats_files: &mut [StatsFile]) {
        let st = self.st;
        let each: Vec<CacheStats> = self.instances.iter().map(|i| i.cache.stats()).collect();
        let cur = sum_cache(&each);
        let ops: u64 = self
            .progress
            .iter()
            .map(|p| p.ops.load(Ordering::Relaxed))
            .sum();
        let hit = output::hit_ratios_since(&cur, &w.prev);
        let t = self.started.elapsed().as_secs_f64();
        let window = interval_stats(&cur, &w.prev);
        w.samples.push(sample(
            &window,
            &w.prev,
            hit,
            ops - w.prev_ops,
            t - w.prev_t,
            t,
        ));
        (w.prev_ops, w.prev_t) = (ops, t);
        let clock = wall_clock();
        for (i, (c, p)) in each.iter().zip(&w.prev_each).enumerate() {
            let line = output::progress_line(
                st,
                i,
                clock,
                self.progress[i].ops.load(Ordering::Relaxed),
                c,
                output::hit_ratios_since(c, p),
            );
            let Some((_, f)) = stats_files[i].as_mut() else {
                self.eta.print(&line);
                continue;
            };
            // With a stats file the line goes there (and in the legacy
            // layout on stdout too).
            let _ = f.write_all(self.stats_block(i, &line, c, p, t).as_bytes());
            if st.progress_on_stdout_with_stats_file() {
                self.eta.print(&line);
            }
        }
        let _ = std::io::stdout().flush();
        w.prev_each = each;
        w.prev = cur;
    }

    /// Instance `i`'s block in its stats file: NVM latency percentiles over
    /// the last minute, as upstream's; operations so far over the time so
    /// far.
    fn stats_block(&self, i: usize, line: &str, c: &CacheStats, p: &CacheStats, t: f64) -> String {
        let snapshot = RunStats {
            cache: c.clone(),
            throughput: self.progress[i].throughput(),
            elapsed_secs: t,
            ..RunStats::default()
        };
        let mut block = output::progress_stats_block(self.st, line, &snapshot, p);
        // The piecewise and block replays' stats follow the throughput
        // lines, as upstream's ProgressTracker renders the generator's.
        if let Source::Chunked { stats, .. } = &self.instances[i].source {
            block.pop();
            block.push_str(&stats.render(self.st, t.max(1e-9)));
            block.push('\n');
        }
        block
    }

    /// The last stretch (and runs shorter than one interval). Threads
    /// publish their operation counts every 1,024 operations and at their
    /// end, so a short last stretch (a stop's wind-down: under half an
    /// interval) holds mostly the final publications of operations counted
    /// before it; it is a point of its own only in a run shorter than one
    /// interval or when it is at least half an interval long, and the cache
    /// counted something in it.
    fn last_stretch(&self, w: &mut Window, tick: Duration) {
        let ops: u64 = self
            .progress
            .iter()
            .map(|p| p.ops.load(Ordering::Relaxed))
            .sum();
        let t = self.started.elapsed().as_secs_f64();
        let cur = sum_cache(
            &self
                .instances
                .iter()
                .map(|i| i.cache.stats())
                .collect::<Vec<_>>(),
        );
        let long_enough = w.prev_t == 0.0 || t - w.prev_t >= tick.as_secs_f64() / 2.0;
        if self.a.progress > 0
            && ops > w.prev_ops
            && t - w.prev_t > 0.05
            && long_enough
            && cache_moved(&cur, &w.prev)
        {
            let hit = output::hit_ratios_since(&cur, &w.prev);
            w.samples.push(sample(
                &interval_stats(&cur, &w.prev),
                &w.prev,
                hit,
                ops - w.prev_ops,
                t - w.prev_t,
                t,
            ));
        }
    }
}

/// An instance's pool rebalancer: every `every`, until `done`.
fn rebalance_loop(
    done: &AtomicBool,
    cache: &Cache,
    every: Duration,
    cfg: &RebalanceConfig,
    seed: u64,
) {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x5eba1);
    let mut next = Instant::now() + every;
    while !done.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(20));
        if Instant::now() >= next {
            next += every;
            cache.rebalance(cfg, &mut |n| rng.random_range(0..n.max(1)));
        }
    }
}

/// Draws the progress charts (ours): beside the progress stats file, or
/// among the harness's artifacts; a direct run writes none, as upstream
/// draws none. Their paths.
fn write_charts(a: &Args, ctx: &RunContext, samples: &[crate::plots::Sample]) -> Vec<String> {
    let chart_at = match (&a.progress_stats_file, &ctx.artifacts) {
        (_, None) => None,
        (Some(p), Some(_)) => {
            let p = ctx.output_path(p);
            Some((
                p.parent().map(Path::to_path_buf).unwrap_or_default(),
                crate::plots::stem(&p),
            ))
        }
        (None, Some(dir)) => Some((dir.clone(), "cachebench".to_string())),
    };
    if let (false, Some((dir, stem))) = (samples.is_empty(), chart_at) {
        match crate::plots::write_all(&dir, &stem, samples) {
            Ok(files) => return files.iter().map(|f| f.display().to_string()).collect(),
            Err(e) => eprintln!("warning: charts not written: {e:#}"),
        }
    }
    Vec::new()
}

/// Seconds from the start until the last instance's first operation.
fn first_op_secs(progress: &[Progress], began: Instant) -> Option<f64> {
    progress
        .iter()
        .map(|p| {
            p.first_op
                .get()
                .map(|t| t.duration_since(began).as_secs_f64())
        })
        .collect::<Option<Vec<f64>>>()
        .and_then(|v| v.into_iter().reduce(f64::max))
}

/// Adds each instance's figures and failures to the record, and with
/// several instances their sums.
fn add_instances(record: &mut CacheBenchRecord, instances: &[Instance], results: Results) {
    let mut total = RunStats::default();
    for (i, (mut r, generator)) in results.into_iter().enumerate() {
        r.pool_fractions = instances[i].fractions.clone();
        if let Some(g) = generator.as_ref().filter(|g| g.parse_errors > 0) {
            eprintln!(
                "warning: {} of {} trace lines could not be parsed and were skipped",
                g.parse_errors,
                g.samples + g.parse_errors
            );
        }
        let failures = instance_failures(&r, &instances[i]);
        total.throughput.add(&r.throughput);
        total.cache = sum_cache(&[total.cache.clone(), r.cache.clone()]);
        total.elapsed_secs = total.elapsed_secs.max(r.elapsed_secs);
        if let Some(l) = &r.api_latency {
            total
                .api_latency
                .get_or_insert_with(Default::default)
                .add(l);
        }
        record.instances.push(InstanceRecord {
            stats: r,
            failures,
            generator,
            print_nvm_counters: instances[i].config.cache.print_nvm_counters,
        });
    }
    if instances.len() > 1 {
        // Several instances: their sums after their own reports.
        record.aggregated = Some(total);
    }
}

/// Why an instance's run failed, in upstream's words where it has them.
fn instance_failures(r: &RunStats, inst: &Instance) -> Vec<String> {
    let mut failures = Vec::new();
    if r.throughput.inconsistencies > 0 {
        failures.push(format!(
            "Found {} inconsistent cases",
            r.throughput.inconsistencies
        ));
    }
    if let Some(f) = inst.cache.fatal() {
        failures.push(format!("NVM error. {f}"));
    }
    if r.throughput.failed_threads > 0 {
        failures.push(format!(
            "{} stressor thread(s) failed (see the panic message above); their operations are not counted",
            r.throughput.failed_threads
        ));
    }
    failures
}

/// With a stats file, each instance's report is appended to it as
/// upstream's does (the end of the run on stdout is [`Workload::format_end`]).
fn append_reports(record: &CacheBenchRecord, st: output::Style, stats_files: &mut [StatsFile]) {
    for (i, inst) in record.instances.iter().enumerate() {
        if let Some((p, f)) = stats_files[i].as_mut()
            && st.results_in_stats_file()
            && let Err(e) = f.write_all(instance_report(st, inst).as_bytes())
        {
            eprintln!(
                "warning: the results were not appended to {}: {e}",
                p.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loaded(text: &str) -> BenchConfig {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("c.json");
        std::fs::write(&p, text).unwrap();
        config::load(&p, false).unwrap().instances.remove(0)
    }

    /// The DRAM cache as upstream's cachebench builds it: CacheLib's
    /// generated classes, and an LRU refresh time that does not follow
    /// lruRefreshRatio (no reconfigure interval is passed on upstream).
    #[test]
    fn dram_config_is_upstreams() {
        let c = loaded(
            r#"{"cache_config": {"cacheSizeMB": 64, "lruRefreshRatio": 0.5}, "test_config": {}}"#,
        );
        let d = dram_config(&c).unwrap();
        assert_eq!(d.refresh.ratio, 0.0);
        assert_eq!(d.refresh.secs, 60);
        assert_eq!(d.classes.sizes().len(), 24);
        assert_eq!(d.classes.sizes()[14], 19232);
        let e = dram_config(&loaded(r#"{"cache_config": {}, "test_config": {}}"#))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cacheSizeMB is 0"), "{e}");
    }

    /// nvmCacheSizeMB is per path: two paths make twice the device.
    #[test]
    fn nvm_size_is_per_path() {
        let c = loaded(
            r#"{"cache_config": {"cacheSizeMB": 64, "nvmCacheSizeMB": 512,
                "nvmCachePaths": ["/a", "/b"]}, "test_config": {}}"#,
        );
        let n = nvm_config(&c, false).unwrap().unwrap();
        assert_eq!(n.size, 1024 << 20);
        assert_eq!(n.buffers, 2, "2 x navyCleanRegions, as upstream");
    }
}
