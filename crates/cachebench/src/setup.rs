//! Setup (config to engine): the loaded config with the flags applied,
//! each instance's DRAM cache, NVM tier, pool rebalancing, source of
//! operations and stressor options.

use crate::cache::{
    AllocClasses, Cache, DramCache, DramConfig, HybridOptions, Policy, Rebalance, RebalanceConfig,
    Refresh, SLAB_SIZE,
};
use crate::cli::Args;
use crate::config::{self, BenchConfig, DistributionConfig};
use crate::generator::{Generator, PoolMix, Spec};
use crate::nvm::device::DirectIo;
use crate::nvm::region::{Eviction, Reinsertion};
use crate::nvm::{Admission, Navy, NvmConfig};
use crate::output;
use crate::replay::{BinaryTrace, TraceReader, TraceSpec};
use crate::stressor::Options;
use anyhow::bail;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Loads the config named by the arguments, with `--nvm_cache_paths`
/// applied.
pub(crate) fn load(a: &Args) -> anyhow::Result<config::Loaded> {
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
pub(crate) fn check_generator(c: &BenchConfig) -> anyhow::Result<()> {
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

pub(crate) struct Instance {
    pub(crate) cache: Cache,
    /// Pool rebalancing: every this often, with these settings.
    pub(crate) rebalance: Option<(Duration, RebalanceConfig)>,
    pub(crate) source: Source,
    pub(crate) repeat_trace: bool,
    pub(crate) options: Options,
    pub(crate) fractions: Vec<f64>,
    pub(crate) config: BenchConfig,
}

/// What setting an instance up ended with.
pub(crate) enum Setup {
    /// The instance, ready to run.
    Ready(Box<Instance>),
    /// The replay generator wrote its binary trace (`binaryFileName`): the
    /// program ends there, as upstream's.
    WroteTrace,
}

/// Config -> engine for one instance: its source of operations (printing
/// a pregenerated workload's lines), its stressor options and its cache.
pub(crate) fn setup_instance(
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
