//! The synthetic workload: keys, value sizes, the operation mix and key
//! popularity of CacheLib's `test_config`, as CacheLib's `OnlineGenerator`
//! and `WorkloadGenerator` draw them.
//!
//! Keys: `numKeys` keys split over the pools by `keyPoolDistribution` (pool
//! `i` starts at key `⌊numKeys × Σ_{j<i} p_j / Σ p⌋`, as upstream). Each
//! operation picks a pool by `opPoolDistribution`, an operation by the
//! pool's ratios (weights, need not sum to 1), and a key of the pool by its
//! popularity: with `popularityBuckets` / `popularityWeights`, upstream's
//! `FastDiscreteDistribution` (the data cut into 2,048 buckets of equal
//! weight, each spread uniformly over its share of the pool's keys; with
//! `useLegacyKeyGen` each bucket keeps the data's object count and its
//! picks are stretched over the pool, so about as many keys are used as
//! the data has objects), else a normal distribution centred on the pool
//! (standard deviation a quarter of its key range, rounded, redrawn until
//! inside), as upstream's `NormalDistribution`.
//!
//! Two generators, as upstream:
//! - `online` ([`Generator::new`]): no per-key memory. A key is its index
//!   (8 bytes, little-endian) padded with `a` to a length drawn once per
//!   `index mod 32768` (at least 8), and its value size (and chained sizes)
//!   are one of 32,768 draws, picked by `index mod 32768`, as upstream's
//!   `OnlineGenerator`: the same key always has the same size. No TTLs.
//! - `workload` ([`Generator::pregenerated`], the default): each key has a
//!   random lower-case name of a drawn length, a value size, chained sizes
//!   and a TTL (`ttlSecsRange`), drawn once per key; and each pool samples
//!   `min(numOps × numThreads × opPoolDistribution[i], 2^32 − 1)` accesses
//!   from its popularity up front, an operation then picking one of those
//!   samples uniformly, as upstream's `WorkloadGenerator`. Upstream stores
//!   the keys and the samples; here each is drawn from a generator seeded
//!   by its index (key `k`, sample `j`), which gives the same model (each a
//!   fixed independent draw) in constant memory, so a run of billions of
//!   accesses or keys starts at once. Names are made distinct by their
//!   last letters (the key's index in base 26) where the length allows,
//!   where upstream removes duplicates after drawing.

use crate::error::Error;
use rand::distr::weighted::WeightedIndex;
use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};
use rand_distr::{Distribution as _, Normal};

/// An operation of the stressor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Get,
    Set,
    Del,
    /// A get of a key that was never set.
    LoneGet,
    /// A set of a key never used before.
    LoneSet,
    /// A get followed, on a hit, by a set of the same key.
    Update,
    /// An existence check that does not promote the item.
    CouldExist,
    /// Chained items added to a key's item (stored first when missing).
    AddChained,
}

/// The sizes and mix of one pool.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolMix {
    pub key_size_range: Vec<u32>,
    pub key_size_probability: Vec<f64>,
    pub val_size_range: Vec<u32>,
    pub val_size_probability: Vec<f64>,
    /// Weights of Get, Set, Del, LoneGet, LoneSet, Update, CouldExist.
    pub op_weights: [f64; 7],
    /// `popularityBuckets` (keys per bucket) and their weights.
    pub popularity: Option<(Vec<u64>, Vec<f64>)>,
    /// `useLegacyKeyGen` (with popularity buckets).
    pub legacy_key_gen: bool,
    /// `ttlSecsRange` and `ttlSecsRangeProbability` (pre-generated
    /// workloads only, as upstream).
    pub ttl: Option<(Vec<f64>, Vec<f64>)>,
    /// `addChainedRatio`'s weight and the chain's shape.
    pub add_chained: f64,
    pub chain: Option<ChainSpec>,
}

/// How many chained items an AddChained adds and their sizes
/// (`chainedItemLengthRange` / `chainedItemValSizeRange` with their
/// probabilities, each exact values or piecewise-uniform ranges).
#[derive(Debug, Clone, PartialEq)]
pub struct ChainSpec {
    pub length_range: Vec<u32>,
    pub length_probability: Vec<f64>,
    pub val_size_range: Vec<u32>,
    pub val_size_probability: Vec<f64>,
}

/// What the stressor runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    pub num_keys: u64,
    pub key_pool_distribution: Vec<f64>,
    pub op_pool_distribution: Vec<f64>,
    /// One mix per pool (or one for all).
    pub mixes: Vec<PoolMix>,
}

const OPS: [Op; 8] = [
    Op::Get,
    Op::Set,
    Op::Del,
    Op::LoneGet,
    Op::LoneSet,
    Op::Update,
    Op::CouldExist,
    Op::AddChained,
];

/// Upstream's `OnlineGenerator`: key lengths and value sizes per
/// `index mod 32768`.
const ONLINE_TABLE: usize = 1 << 15;
/// Upstream's `FastDiscreteDistribution` bucket count.
const POPULARITY_BUCKETS: usize = 2048;
/// The most keys upstream's `WorkloadGenerator` takes (it indexes them
/// with 32 bits).
pub const WORKLOAD_MAX_KEYS: u64 = u32::MAX as u64;

/// A TTL distribution (seconds): exact values or piecewise-uniform
/// ranges, as upstream's discrete and piecewise-constant distributions.
#[derive(Debug, Clone)]
enum Ttls {
    Exact(Vec<f64>, WeightedIndex<f64>),
    Ranges(Vec<f64>, WeightedIndex<f64>),
}

impl Ttls {
    fn new(range: &[f64], prob: &[f64]) -> Result<Ttls, String> {
        let weights = WeightedIndex::new(prob.iter().copied())
            .map_err(|e| format!("ttlSecsRangeProbability {prob:?}: {e}"));
        if !range.is_empty() && range.len() == prob.len() {
            Ok(Ttls::Exact(range.to_vec(), weights?))
        } else if !prob.is_empty() && range.len() == prob.len() + 1 {
            if range.windows(2).any(|w| w[1] < w[0]) || range.iter().any(|r| *r < 0.0) {
                return Err(format!(
                    "ttlSecsRange {range:?}: bounds must not be negative or decrease"
                ));
            }
            Ok(Ttls::Ranges(range.to_vec(), weights?))
        } else {
            Err(format!(
                "ttlSecsRange ({} values) and ttlSecsRangeProbability ({}): TTL range and their \
                 probabilities do not match up for either discrete or continuous probability \
                 (upstream's words): expected as many values as probabilities, or one more",
                range.len(),
                prob.len()
            ))
        }
    }

    fn draw(&self, rng: &mut impl Rng) -> u32 {
        let secs = match self {
            Ttls::Exact(v, w) => v[w.sample(rng)],
            Ttls::Ranges(b, w) => {
                let i = w.sample(rng);
                let (lo, hi) = (b[i], b[i + 1]);
                if hi <= lo {
                    lo
                } else {
                    rng.random_range(lo..hi)
                }
            }
        };
        secs.clamp(0.0, f64::from(u32::MAX)) as u32
    }
}

/// A size distribution: exact values or piecewise-uniform ranges (a draw
/// from a range is truncated to a whole number, as upstream's cast of its
/// piecewise-constant distribution's double).
#[derive(Debug, Clone)]
enum Sizes {
    Exact(Vec<u32>, WeightedIndex<f64>),
    Ranges(Vec<u32>, WeightedIndex<f64>),
}

impl Sizes {
    fn new(range: &[u32], prob: &[f64], what: &str) -> Result<Sizes, String> {
        let weights = WeightedIndex::new(prob.iter().copied())
            .map_err(|e| format!("{what}Probability {prob:?}: {e}"))?;
        if range.len() == prob.len() {
            Ok(Sizes::Exact(range.to_vec(), weights))
        } else if range.len() == prob.len() + 1 {
            if range.windows(2).any(|w| w[1] < w[0]) {
                return Err(format!("{what} {range:?}: bounds must not decrease"));
            }
            Ok(Sizes::Ranges(range.to_vec(), weights))
        } else {
            Err(format!(
                "{what} has {} values and {what}Probability {}: expected the same number \
                 (exact sizes) or one more (ranges)",
                range.len(),
                prob.len()
            ))
        }
    }

    fn draw(&self, rng: &mut impl Rng) -> u32 {
        match self {
            Sizes::Exact(v, w) => v[w.sample(rng)],
            Sizes::Ranges(b, w) => {
                let i = w.sample(rng);
                let (lo, hi) = (b[i], b[i + 1]);
                if hi <= lo {
                    lo
                } else {
                    rng.random_range(lo..hi)
                }
            }
        }
    }

    fn max(&self) -> u32 {
        match self {
            Sizes::Exact(v, _) | Sizes::Ranges(v, _) => v.iter().copied().max().unwrap_or(0),
        }
    }
}

/// Upstream's `FastDiscreteDistribution` over the keys `left..=right`:
/// the popularity data (object counts and their weights) cut into buckets
/// of equal weight; a draw picks a bucket uniformly, then an object of it
/// uniformly.
#[derive(Debug, Clone)]
pub struct FastDiscrete {
    left: u64,
    /// Each bucket's first object and its object count.
    offsets: Vec<u64>,
    sizes: Vec<u64>,
    legacy: bool,
    scale: f64,
}

impl FastDiscrete {
    pub fn new(left: u64, right: u64, sizes: &[u64], probs: &[f64], legacy: bool) -> FastDiscrete {
        let mut sizes: Vec<u64> = sizes.to_vec();
        let mut probs: Vec<f64> = probs.to_vec();
        let total_weight: f64 = probs.iter().sum();
        let total_objects: f64 = sizes.iter().map(|s| *s as f64).sum();
        let bucket_weight = total_weight / POPULARITY_BUCKETS as f64;
        let scale = (right - left) as f64 / total_objects.max(f64::MIN_POSITIVE);
        let (mut offsets, mut buckets) = (vec![0u64], Vec::new());
        let (mut weight_seen, mut objects_seen, mut sum_objects) = (0.0f64, 0u64, 0u64);
        let mut i = 0;
        while i < probs.len() {
            if probs[i] > 0.0 && weight_seen + probs[i] >= bucket_weight {
                // This entry completes the bucket: take the share of its
                // objects that brings the bucket to its weight.
                let share = (bucket_weight - weight_seen) / probs[i];
                let taken = ((share * sizes[i] as f64) as u64).min(sizes[i]);
                sizes[i] -= taken;
                probs[i] -= share * probs[i];
                objects_seen += taken;
                sum_objects += objects_seen;
                let objects = objects_seen.max(1);
                if legacy {
                    buckets.push(objects);
                    offsets.push(sum_objects);
                } else {
                    buckets.push(((objects as f64 * scale) as u64).max(1));
                    offsets.push((sum_objects as f64 * scale) as u64);
                }
                weight_seen = 0.0;
                objects_seen = 0;
            } else {
                weight_seen += probs[i];
                objects_seen += sizes[i];
                i += 1;
            }
        }
        if buckets.is_empty() {
            // No weight at all: one bucket over the whole pool.
            buckets.push(right - left + 1);
        }
        offsets.truncate(buckets.len());
        FastDiscrete {
            left,
            offsets,
            sizes: buckets,
            legacy,
            scale,
        }
    }

    pub fn sample(&self, rng: &mut impl Rng) -> u64 {
        let b = rng.random_range(0..self.sizes.len());
        let object = self.offsets[b] + rng.random_range(0..self.sizes[b]);
        let at = if self.legacy {
            (object as f64 * self.scale) as u64
        } else {
            object
        };
        self.left + at
    }
}

/// How a pool's keys are chosen (over global key indices).
#[derive(Debug, Clone)]
enum Popularity {
    Discrete(FastDiscrete),
    /// Upstream's `NormalDistribution`: rounded, redrawn until in
    /// `left..=right`.
    Normal(Normal<f64>, u64, u64),
}

impl Popularity {
    fn sample(&self, rng: &mut impl Rng) -> u64 {
        match self {
            Popularity::Discrete(d) => d.sample(rng),
            Popularity::Normal(n, left, right) => loop {
                let v = n.sample(rng).round();
                if v >= *left as f64 && v <= *right as f64 {
                    break v as u64;
                }
            },
        }
    }
}

struct PoolGen {
    first_key: u64,
    ops: WeightedIndex<f64>,
    key_sizes: Sizes,
    vals: Sizes,
    popularity: Popularity,
    /// Chain lengths and chained value sizes.
    chain: Option<(Sizes, Sizes)>,
    ttl: Option<Ttls>,
    /// `workload`: the accesses sampled for the pool (0: `online`).
    accesses: u64,
    /// `online`: key lengths and value sizes (with chained sizes) per
    /// `index mod 32768`.
    key_lengths: Vec<u16>,
    sizes: Vec<u32>,
    chains: Vec<Vec<u32>>,
}

/// Draws operations; shared by the threads (immutable).
pub struct Generator {
    pools: Vec<PoolGen>,
    op_pool: WeightedIndex<f64>,
    max_value: u32,
    num_keys: u64,
    /// `workload`: the seed every per-key and per-sample draw derives from.
    seed: u64,
    pregenerated: bool,
    /// Base-26 digits that tell all keys apart (workload names).
    digits: u32,
    /// `workload` names drawn and kept (when some could repeat).
    names: Option<KeyTable>,
}

/// Key names end to end, and where each ends.
struct KeyTable {
    bytes: Vec<u8>,
    offsets: Vec<u64>,
}

/// One drawn operation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Request {
    pub pool: usize,
    pub op: Op,
    /// Index of the key (for Lone* operations, unused).
    pub key: u64,
    pub value_size: u32,
    /// Seconds (0: never expires).
    pub ttl_secs: u32,
}

/// A 64-bit mix (SplitMix64's finaliser).
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Upstream's generateFirstKeyIndexForPool: each pool's first key index
/// (and the end), from the pools' key shares `kp` (summing to `kp_sum`).
fn first_keys(num_keys: u64, kp: &[f64], kp_sum: f64) -> Vec<u64> {
    let mut firsts = vec![0u64];
    let mut acc = 0.0;
    for p in kp {
        acc += p;
        let at = (num_keys as f64 * acc / kp_sum.max(f64::MIN_POSITIVE)) as u64;
        firsts.push(at.min(num_keys));
    }
    firsts
}

impl PoolGen {
    /// `online`: upstream's tables: key lengths (at least the index's 8
    /// bytes), then value sizes with their chains.
    fn fill_online_tables(&mut self, rng: &mut SmallRng) {
        self.key_lengths = (0..ONLINE_TABLE)
            .map(|_| self.key_sizes.draw(rng).clamp(8, u32::from(u16::MAX)) as u16)
            .collect();
        for _ in 0..ONLINE_TABLE {
            self.sizes.push(self.vals.draw(rng));
            self.chains.push(match &self.chain {
                Some((len, vals)) => (0..len.draw(rng)).map(|_| vals.draw(rng)).collect(),
                None => Vec::new(),
            });
        }
    }
}

/// The generator for draw `what` of item `index` (a key's attributes, or a
/// pool's sampled access): independent streams per (seed, what, index).
fn derived(seed: u64, what: u64, index: u64) -> SmallRng {
    SmallRng::seed_from_u64(mix64(seed ^ mix64(what.wrapping_add(mix64(index)))))
}

const KEY_NAME: u64 = 1;
const KEY_SIZE: u64 = 2;
const KEY_TTL: u64 = 3;
const KEY_CHAIN: u64 = 4;
/// Pool `i`'s samples: `SAMPLE + i`.
const SAMPLE: u64 = 16;

impl Generator {
    /// The `online` generator (upstream's `OnlineGenerator`).
    pub fn new(spec: &Spec, seed: u64) -> Result<Generator, Error> {
        Generator::build(spec, seed, None).map_err(Error::Input)
    }

    /// The `workload` generator (upstream's `WorkloadGenerator`): keys,
    /// sizes and TTLs fixed per key, and per pool
    /// `min(accesses × opPoolDistribution[i], 2^32 − 1)` sampled accesses,
    /// where `accesses` is numOps × numThreads. `progress` gets upstream's
    /// `Generating X.XXM sampled accesses` count per pool.
    pub fn pregenerated(
        spec: &Spec,
        seed: u64,
        accesses: u64,
        progress: &mut dyn FnMut(u64),
    ) -> Result<Generator, Error> {
        if spec.num_keys > WORKLOAD_MAX_KEYS {
            return Err(Error::Input(format!(
                "Too many keys specified: {}. Maximum allowed is 4 Billion. (upstream's words: the \
                 workload generator takes at most {WORKLOAD_MAX_KEYS} keys; the online generator \
                 takes more)",
                spec.num_keys
            )));
        }
        let g = Generator::build(spec, seed, Some(accesses)).map_err(Error::Input)?;
        for p in &g.pools {
            progress(p.accesses);
        }
        Ok(g)
    }

    fn build(spec: &Spec, seed: u64, accesses: Option<u64>) -> Result<Generator, String> {
        let n_pools = spec.key_pool_distribution.len().max(1);
        if spec.mixes.is_empty() {
            return Err("no pool distribution".into());
        }
        if spec.num_keys == 0 {
            return Err("numKeys is 0".into());
        }
        let mix = |p: usize| &spec.mixes[p.min(spec.mixes.len() - 1)];
        let kp: Vec<f64> = if spec.key_pool_distribution.is_empty() {
            vec![1.0]
        } else {
            spec.key_pool_distribution.clone()
        };
        let kp_sum: f64 = kp.iter().sum();
        // Upstream's generateFirstKeyIndexForPool.
        let mut firsts = first_keys(spec.num_keys, &kp, kp_sum);
        let mut digits = 1;
        while 26f64.powi(digits as i32) < spec.num_keys as f64 {
            digits += 1;
        }
        // `workload` names shorter than the index's base-26 digits can
        // repeat: then the names are drawn and kept, sorted and without
        // duplicates per pool, as upstream's generateKeys (the pools'
        // bounds move with what was removed).
        let mut names = None;
        if accesses.is_some() && (0..n_pools).any(|p| shortest_key(mix(p)) < digits) {
            let (kept, table) = Self::key_names(spec, seed, &firsts)?;
            firsts = kept;
            names = Some(table);
        }
        let num_keys = firsts.last().copied().unwrap_or(0);
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut pools = Vec::with_capacity(n_pools);
        let mut max_value = 0;
        for p in 0..n_pools {
            let (first_key, end) = (firsts[p], firsts[p + 1].max(firsts[p]));
            let m = mix(p);
            let key_sizes = Sizes::new(&m.key_size_range, &m.key_size_probability, "keySizeRange")?;
            let vals = Sizes::new(&m.val_size_range, &m.val_size_probability, "valSizeRange")?;
            max_value = max_value.max(vals.max());
            let ops = WeightedIndex::new(
                m.op_weights
                    .iter()
                    .copied()
                    .chain(std::iter::once(m.add_chained)),
            )
            .map_err(|e| format!("operation ratios {:?}: {e}", m.op_weights))?;
            let chain = Self::chain(m, &mut max_value)?;
            let (left, right) = (first_key, end.saturating_sub(1).max(first_key));
            let popularity = Self::popularity(m, left, right)?;
            let ttl = match &m.ttl {
                Some((range, prob)) if !range.is_empty() || !prob.is_empty() => {
                    Some(Ttls::new(range, prob)?)
                }
                _ => None,
            };
            let op_share = if spec.op_pool_distribution.is_empty() {
                1.0
            } else {
                spec.op_pool_distribution.get(p).copied().unwrap_or(0.0)
            };
            let mut pool = PoolGen {
                first_key,
                ops,
                key_sizes,
                vals,
                popularity,
                chain,
                ttl,
                accesses: 0,
                key_lengths: Vec::new(),
                sizes: Vec::new(),
                chains: Vec::new(),
            };
            match accesses {
                Some(a) => {
                    pool.accesses = ((a as f64 * op_share) as u64).clamp(1, u64::from(u32::MAX));
                }
                None => pool.fill_online_tables(&mut rng),
            }
            pools.push(pool);
        }
        let op_pool = WeightedIndex::new(if spec.op_pool_distribution.is_empty() {
            vec![1.0; n_pools]
        } else {
            spec.op_pool_distribution.clone()
        })
        .map_err(|e| format!("opPoolDistribution {:?}: {e}", spec.op_pool_distribution))?;
        Ok(Generator {
            pools,
            op_pool,
            max_value,
            num_keys,
            seed,
            pregenerated: accesses.is_some(),
            digits,
            names,
        })
    }

    /// `workload` keys drawn by name, sorted and without duplicates per
    /// pool, as upstream's generateKeys: the pools' new bounds and the
    /// names.
    fn key_names(spec: &Spec, seed: u64, firsts: &[u64]) -> Result<(Vec<u64>, KeyTable), String> {
        let n_pools = spec.key_pool_distribution.len().max(1);
        let mix = |p: usize| &spec.mixes[p.min(spec.mixes.len() - 1)];
        let mut table = KeyTable {
            bytes: Vec::new(),
            offsets: vec![0],
        };
        let mut kept = vec![0u64];
        let mut seen: std::collections::HashSet<Vec<u8>> = std::collections::HashSet::new();
        for p in 0..n_pools {
            let m = mix(p);
            let sizes = Sizes::new(&m.key_size_range, &m.key_size_probability, "keySizeRange")?;
            let mut keys: Vec<Vec<u8>> = (firsts[p]..firsts[p + 1].max(firsts[p]))
                .map(|i| {
                    let mut rng = derived(seed, KEY_NAME, i);
                    let len = sizes.draw(&mut rng).max(1);
                    (0..len)
                        .map(|_| b'a' + (rng.next_u64() % 26) as u8)
                        .collect()
                })
                .collect();
            keys.sort_unstable();
            keys.dedup();
            // A name an earlier pool has stays that pool's (the
            // consistency checker follows a key by its index).
            if p > 0 {
                keys.retain(|k| !seen.contains(k));
            }
            if p + 1 < n_pools {
                seen.extend(keys.iter().cloned());
            }
            for k in keys {
                table.bytes.extend_from_slice(&k);
                table.offsets.push(table.bytes.len() as u64);
            }
            kept.push(table.offsets.len() as u64 - 1);
        }
        Ok((kept, table))
    }

    /// A pool's chained items (with addChainedRatio): their lengths and
    /// value sizes; `max_value` grows to the largest chained value.
    fn chain(m: &PoolMix, max_value: &mut u32) -> Result<Option<(Sizes, Sizes)>, String> {
        Ok(match (&m.chain, m.add_chained > 0.0) {
            (_, false) => None,
            (None, true) => {
                return Err(
                    "addChainedRatio needs chainedItemLengthRange and chainedItemValSizeRange"
                        .into(),
                );
            }
            (Some(c), true) => {
                let vals = Sizes::new(
                    &c.val_size_range,
                    &c.val_size_probability,
                    "chainedItemValSizeRange",
                )?;
                *max_value = (*max_value).max(vals.max());
                Some((
                    Sizes::new(
                        &c.length_range,
                        &c.length_probability,
                        "chainedItemLengthRange",
                    )?,
                    vals,
                ))
            }
        })
    }

    /// How a pool's keys in [left, right] are drawn: the popularity
    /// buckets, or a normal distribution over the range.
    fn popularity(m: &PoolMix, left: u64, right: u64) -> Result<Popularity, String> {
        Ok(match &m.popularity {
            Some((buckets, weights)) => {
                if buckets.len() != weights.len() || buckets.is_empty() {
                    return Err(format!(
                        "popularityBuckets has {} entries and popularityWeights {}: expected the same, non-zero",
                        buckets.len(),
                        weights.len()
                    ));
                }
                if weights.iter().any(|w| !w.is_finite() || *w < 0.0)
                    || weights.iter().sum::<f64>() <= 0.0
                {
                    return Err(format!(
                        "popularityWeights: expected non-negative weights with a positive sum, got {} entries",
                        weights.len()
                    ));
                }
                Popularity::Discrete(FastDiscrete::new(
                    left,
                    right,
                    buckets,
                    weights,
                    m.legacy_key_gen,
                ))
            }
            None => {
                let mu = (left + right) as f64 * 0.5;
                let sigma = (right - left) as f64 * 0.5 / 2.0;
                if sigma <= 0.0 {
                    // One key: every draw is it.
                    Popularity::Discrete(FastDiscrete::new(left, right, &[1], &[1.0], false))
                } else {
                    Popularity::Normal(
                        Normal::new(mu, sigma).map_err(|e| format!("popularity: {e}"))?,
                        left,
                        right,
                    )
                }
            }
        })
    }

    /// Whether this is the `workload` generator.
    pub fn is_pregenerated(&self) -> bool {
        self.pregenerated
    }

    /// `workload`: the accesses sampled per pool (upstream's `Generating
    /// X.XXM sampled accesses`); empty for `online`.
    pub fn sampled_accesses(&self) -> Vec<u64> {
        if self.pregenerated {
            self.pools.iter().map(|p| p.accesses).collect()
        } else {
            Vec::new()
        }
    }

    fn pool_of(&self, key: u64) -> &PoolGen {
        let i = self.pools.partition_point(|p| p.first_key <= key);
        &self.pools[i.saturating_sub(1)]
    }

    /// The key with index `i`, written into `buf`.
    pub fn key<'a>(&self, i: u64, buf: &'a mut Vec<u8>) -> &'a [u8] {
        buf.clear();
        let p = self.pool_of(i);
        if !self.pregenerated {
            // Upstream's online key: the index's bytes, padded with 'a'.
            let len = p.key_lengths[(i % ONLINE_TABLE as u64) as usize] as usize;
            buf.extend_from_slice(&i.to_le_bytes());
            buf.resize(len.max(8), b'a');
            return buf;
        }
        if let Some(t) = &self.names {
            let (a, b) = (
                t.offsets[i as usize] as usize,
                t.offsets[i as usize + 1] as usize,
            );
            buf.extend_from_slice(&t.bytes[a..b]);
            return buf;
        }
        let mut rng = derived(self.seed, KEY_NAME, i);
        let len = p.key_sizes.draw(&mut rng).max(1) as usize;
        let digits = self.digits as usize;
        let random = len.saturating_sub(digits);
        for _ in 0..random {
            buf.push(b'a' + (rng.next_u64() % 26) as u8);
        }
        // The index in base 26 (as much of it as the length holds).
        let mut rest = i;
        for _ in random..len {
            buf.push(b'a' + (rest % 26) as u8);
            rest /= 26;
        }
        buf
    }

    /// Number of keys.
    pub fn num_keys(&self) -> u64 {
        self.num_keys
    }

    /// The largest value size any pool draws.
    pub fn max_value_size(&self) -> u32 {
        self.max_value
    }

    /// The sizes of the chained items an AddChained of key `key` in `pool`
    /// adds (none when the pool has no chains): fixed per key, as upstream.
    pub fn chain_sizes(&self, pool: usize, key: u64, out: &mut Vec<u32>) {
        let p = &self.pools[pool.min(self.pools.len() - 1)];
        if !self.pregenerated {
            if let Some(c) = p.chains.get((key % ONLINE_TABLE as u64) as usize) {
                out.extend_from_slice(c);
            }
            return;
        }
        if let Some((len, vals)) = &p.chain {
            let mut rng = derived(self.seed, KEY_CHAIN, key);
            for _ in 0..len.draw(&mut rng) {
                out.push(vals.draw(&mut rng));
            }
        }
    }

    /// Draws the next operation.
    pub fn next(&self, rng: &mut impl Rng) -> Request {
        let pool = self.op_pool.sample(rng).min(self.pools.len() - 1);
        let p = &self.pools[pool];
        let key = if self.pregenerated {
            // One of the pool's sampled accesses, uniformly; sample j is a
            // fixed draw from the popularity.
            let j = rng.random_range(0..p.accesses);
            p.popularity
                .sample(&mut derived(self.seed, SAMPLE + pool as u64, j))
        } else {
            p.popularity.sample(rng)
        };
        let op = OPS[p.ops.sample(rng)];
        let (value_size, ttl_secs) = if self.pregenerated {
            let size = p.vals.draw(&mut derived(self.seed, KEY_SIZE, key));
            let ttl = p
                .ttl
                .as_ref()
                .map_or(0, |t| t.draw(&mut derived(self.seed, KEY_TTL, key)));
            (size, ttl)
        } else {
            (p.sizes[(key % ONLINE_TABLE as u64) as usize], 0)
        };
        Request {
            pool,
            op,
            key,
            value_size,
            ttl_secs,
        }
    }
}

/// The shortest key a mix draws (1 at least).
fn shortest_key(m: &PoolMix) -> u32 {
    let (r, p) = (&m.key_size_range, &m.key_size_probability);
    r.iter()
        .zip(p.iter().chain(std::iter::repeat(&0.0)))
        .filter(|(_, p)| **p > 0.0)
        .map(|(r, _)| *r)
        .min()
        .unwrap_or(1)
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{HashMap, HashSet};

    fn mix(ops: [f64; 7]) -> PoolMix {
        PoolMix {
            key_size_range: vec![8, 16],
            key_size_probability: vec![1.0],
            val_size_range: vec![100, 1000, 10_000],
            val_size_probability: vec![0.5, 0.5],
            op_weights: ops,
            popularity: None,
            legacy_key_gen: false,
            ttl: None,
            add_chained: 0.0,
            chain: None,
        }
    }

    fn spec(num_keys: u64, m: PoolMix) -> Spec {
        Spec {
            num_keys,
            key_pool_distribution: vec![1.0],
            op_pool_distribution: vec![1.0],
            mixes: vec![m],
        }
    }

    #[test]
    fn keys_pools_mix_and_sizes() {
        let spec = Spec {
            num_keys: 10_000,
            key_pool_distribution: vec![0.4, 0.6],
            op_pool_distribution: vec![0.5, 0.5],
            mixes: vec![mix([0.15, 0.8, 0.05, 0.0, 0.0, 0.0, 0.0])],
        };
        let g = Generator::new(&spec, 1).unwrap();
        assert_eq!(g.num_keys(), 10_000);
        let mut buf = Vec::new();
        assert!((0..10_000).all(|i| (8..16).contains(&g.key(i, &mut buf).len())));
        let mut rng = SmallRng::seed_from_u64(2);
        let mut ops: HashMap<Op, u32> = HashMap::new();
        let mut pool_keys = [0u64; 2];
        for _ in 0..100_000 {
            let r = g.next(&mut rng);
            *ops.entry(r.op).or_default() += 1;
            // Keys of pool 0 are the first 4,000.
            assert_eq!(r.key < 4000, r.pool == 0, "{r:?}");
            pool_keys[r.pool] += 1;
            assert!((100..10_000).contains(&r.value_size));
        }
        let frac = |op| f64::from(ops[&op]) / 100_000.0;
        assert!((frac(Op::Set) - 0.8).abs() < 0.01);
        assert!((frac(Op::Get) - 0.15).abs() < 0.01);
        assert!((pool_keys[0] as f64 / 100_000.0 - 0.5).abs() < 0.01);
    }

    /// The online generator holds no per-key state: a key is its index's
    /// bytes padded with 'a' (at least 8 bytes), and its size is fixed per
    /// key, as upstream's OnlineGenerator; trillions of keys cost nothing.
    #[test]
    fn online_keys_come_from_their_index() {
        let mut m = mix([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        m.key_size_range = vec![4, 12];
        let g = Generator::new(&spec(14_463_466_000_000, m), 5).unwrap();
        let mut buf = Vec::new();
        let k = g.key(0x0102_0304_0506, &mut buf).to_vec();
        assert_eq!(&k[..8], &0x0102_0304_0506u64.to_le_bytes());
        assert!(k.len() >= 8 && k[8..].iter().all(|b| *b == b'a'), "{k:?}");
        let mut rng = SmallRng::seed_from_u64(1);
        let mut size_of: HashMap<u64, u32> = HashMap::new();
        let mut seen = HashSet::new();
        for _ in 0..20_000 {
            let r = g.next(&mut rng);
            assert!(r.key < 14_463_466_000_000);
            assert_eq!(*size_of.entry(r.key).or_insert(r.value_size), r.value_size);
            assert_eq!(r.ttl_secs, 0, "the online generator draws no TTLs");
            seen.insert(r.key);
        }
        assert!(seen.len() > 19_000, "{}", seen.len());
    }

    #[test]
    fn exact_value_sizes_and_popularity_buckets() {
        let mut m = mix([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        m.val_size_range = vec![64, 512];
        m.val_size_probability = vec![0.25, 0.75];
        // 10% of the objects take 90% of the accesses.
        m.popularity = Some((vec![100_000, 900_000], vec![0.9, 0.1]));
        let g = Generator::new(&spec(1000, m), 3).unwrap();
        let mut rng = SmallRng::seed_from_u64(4);
        let (mut hot, mut small) = (0, 0);
        for _ in 0..50_000 {
            let r = g.next(&mut rng);
            assert!(r.value_size == 64 || r.value_size == 512);
            small += u32::from(r.value_size == 64);
            hot += u32::from(r.key < 100);
        }
        assert!((f64::from(hot) / 50_000.0 - 0.9).abs() < 0.01, "{hot}");
        // The online generator fixes one size per key (a quarter of them
        // small), so the share over operations is near but not exactly it.
        assert!((f64::from(small) / 50_000.0 - 0.25).abs() < 0.1, "{small}");
    }

    /// Upstream's FastDiscreteDistribution: equal-weight buckets, so the
    /// hottest objects of the data take their weight's share of draws.
    #[test]
    fn fast_discrete_follows_the_weights() {
        // Objects: 10 very hot (half the weight), 1,000 warm, 100,000 cold.
        let d = FastDiscrete::new(
            0,
            1_000_000 - 1,
            &[10, 1000, 100_000],
            &[0.5, 0.3, 0.2],
            false,
        );
        let mut rng = SmallRng::seed_from_u64(1);
        let n = 200_000;
        let mut hist = [0u32; 3];
        for _ in 0..n {
            let k = d.sample(&mut rng);
            assert!(k < 1_000_000);
            // The data's objects scaled to the pool: 10 objects ~ 99 keys.
            let zone = if k < 100 {
                0
            } else if k < 10_000 {
                1
            } else {
                2
            };
            hist[zone] += 1;
        }
        let share = |z: usize| f64::from(hist[z]) / n as f64;
        assert!((share(0) - 0.5).abs() < 0.01, "{hist:?}");
        assert!((share(1) - 0.3).abs() < 0.02, "{hist:?}");
        assert!((share(2) - 0.2).abs() < 0.02, "{hist:?}");
        // Legacy key generation: at most as many keys as objects.
        let d = FastDiscrete::new(0, 1_000_000 - 1, &[10, 1000], &[0.5, 0.5], true);
        let keys: HashSet<u64> = (0..100_000).map(|_| d.sample(&mut rng)).collect();
        assert!(keys.len() <= 1100, "{}", keys.len());
        assert!(keys.iter().any(|k| *k > 900_000), "spread over the pool");
    }

    #[test]
    fn mismatched_sizes_are_named() {
        let mut m = mix([1.0; 7]);
        m.val_size_range = vec![1, 2, 3, 4];
        m.val_size_probability = vec![0.5, 0.5];
        let err = Generator::new(&spec(10, m), 1).err().unwrap().to_string();
        assert!(err.contains("valSizeRange has 4 values"), "{err}");
        // One-letter keys: at most 26 distinct, as upstream's sorted and
        // deduplicated names.
        let mut m = mix([1.0; 7]);
        m.key_size_range = vec![1, 2];
        let g = Generator::pregenerated(&spec(100, m), 1, 1000, &mut |_| {}).unwrap();
        assert!(g.num_keys() <= 26 && g.num_keys() > 20, "{}", g.num_keys());
        let mut buf = Vec::new();
        let names: std::collections::HashSet<Vec<u8>> = (0..g.num_keys())
            .map(|i| g.key(i, &mut buf).to_vec())
            .collect();
        assert_eq!(names.len() as u64, g.num_keys());
        let err = Generator::pregenerated(&spec(5_000_000_000, mix([1.0; 7])), 1, 1, &mut |_| {})
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("Maximum allowed is 4 Billion"), "{err}");
    }

    #[test]
    fn pregenerated_workload_fixes_sizes_per_key_and_samples_popularity() {
        let mut m = mix([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        m.val_size_range = vec![64, 512];
        m.val_size_probability = vec![0.25, 0.75];
        m.popularity = Some((vec![100_000, 900_000], vec![0.9, 0.1]));
        let spec = spec(1000, m);
        let mut counts = Vec::new();
        let g = Generator::pregenerated(&spec, 3, 200_000, &mut |n| counts.push(n)).unwrap();
        assert!(g.is_pregenerated());
        assert!(!Generator::new(&spec, 3).unwrap().is_pregenerated());
        assert_eq!(counts, [200_000]);
        let mut rng = SmallRng::seed_from_u64(4);
        let mut size_of: HashMap<u64, u32> = HashMap::new();
        let (mut hot, mut small) = (0, 0);
        let mut buf = Vec::new();
        let mut names = HashSet::new();
        for _ in 0..50_000 {
            let r = g.next(&mut rng);
            // One size per key for the whole run.
            assert_eq!(*size_of.entry(r.key).or_insert(r.value_size), r.value_size);
            hot += u32::from(r.key < 100);
            let k = g.key(r.key, &mut buf);
            assert!((8..16).contains(&k.len()) && k.iter().all(u8::is_ascii_lowercase));
            names.insert((r.key, k.to_vec()));
        }
        // One name per key, distinct keys distinct names.
        let by_name: HashSet<&Vec<u8>> = names.iter().map(|(_, n)| n).collect();
        assert_eq!(by_name.len(), size_of.len());
        assert_eq!(names.len(), size_of.len());
        for s in size_of.values() {
            small += u32::from(*s == 64);
        }
        assert!((f64::from(hot) / 50_000.0 - 0.9).abs() < 0.01, "{hot}");
        // A quarter of the keys are small (over the keys, not the ops).
        let share = f64::from(small) / size_of.len() as f64;
        assert!((share - 0.25).abs() < 0.06, "{share}");
        // The same seed gives the same sampled workload.
        let g2 = Generator::pregenerated(&spec, 3, 200_000, &mut |_| {}).unwrap();
        let mut r1 = SmallRng::seed_from_u64(9);
        let mut r2 = SmallRng::seed_from_u64(9);
        for _ in 0..1000 {
            assert_eq!(g.next(&mut r1), g2.next(&mut r2));
        }
    }

    /// Distinct keys over N operations, against upstream's sampling model:
    /// each pool samples M accesses i.i.d. from its popularity and every
    /// operation picks one of the M uniformly. N picks touch
    /// D = M (1 - (1 - 1/M)^N) samples on average, and those are i.i.d.
    /// draws, so the distinct keys are sum_k 1 - (1 - p_k)^D. Checked with
    /// a uniform popularity (one popularityBuckets entry) and upstream's
    /// default normal popularity, over several threads.
    #[test]
    fn distinct_keys_match_upstreams_sampling_model() {
        let keys = 200_000u64;
        let (threads, per_thread) = (4u64, 100_000u64);
        let n = threads * per_thread;
        let expect = |p: &dyn Fn(u64) -> f64| {
            let m = n as f64;
            let d = m * (1.0 - (1.0 - 1.0 / m).powf(n as f64));
            (0..keys).map(|k| 1.0 - (1.0 - p(k)).powf(d)).sum::<f64>()
        };
        let count = |m: PoolMix| {
            let g = Generator::pregenerated(&spec(keys, m), 7, n, &mut |_| {}).unwrap();
            let seen = std::sync::Mutex::new(HashSet::new());
            std::thread::scope(|s| {
                for t in 0..threads {
                    let (g, seen) = (&g, &seen);
                    s.spawn(move || {
                        let mut rng = SmallRng::seed_from_u64(100 + t);
                        let mine: Vec<u64> =
                            (0..per_thread).map(|_| g.next(&mut rng).key).collect();
                        seen.lock().unwrap().extend(mine);
                    });
                }
            });
            seen.into_inner().unwrap().len() as f64
        };
        let mut m = mix([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        m.popularity = Some((vec![keys * 10], vec![1.0]));
        let (got, want) = (count(m.clone()), expect(&|_| 1.0 / keys as f64));
        assert!(
            (got / want - 1.0).abs() < 0.01,
            "uniform: {got} keys, model {want}"
        );
        // Fresh draws per operation (no sample reuse) would give many more.
        let fresh = keys as f64 * (1.0 - (-(n as f64) / keys as f64).exp());
        assert!(fresh > want * 1.1, "{fresh} vs {want}");
        // Normal: mean at the middle, sd a quarter of the range, rounded
        // and truncated to the pool.
        m.popularity = None;
        let (mu, sd, hi) = (
            (keys - 1) as f64 / 2.0,
            (keys - 1) as f64 / 4.0,
            (keys - 1) as f64,
        );
        let cdf = |x: f64| 0.5 * (1.0 + erf((x - mu) / (sd * std::f64::consts::SQRT_2)));
        let inside = cdf(hi + 0.5) - cdf(-0.5);
        let p = |k: u64| (cdf(k as f64 + 0.5) - cdf(k as f64 - 0.5)) / inside;
        let (got, want) = (count(m), expect(&p));
        assert!(
            (got / want - 1.0).abs() < 0.01,
            "normal: {got} keys, model {want}"
        );
    }

    /// erf by Abramowitz and Stegun 7.1.26 (error below 1.5e-7).
    fn erf(x: f64) -> f64 {
        let t = 1.0 / (1.0 + 0.327_591_1 * x.abs());
        let y = 1.0
            - (((((1.061_405_429 * t - 1.453_152_027) * t) + 1.421_413_741) * t - 0.284_496_736)
                * t
                + 0.254_829_592)
                * t
                * (-x * x).exp();
        y.copysign(x)
    }

    /// TTLs per key as upstream draws them (exact values or ranges, per
    /// pool), none from the online generator; mismatched lists named.
    #[test]
    fn ttls_are_drawn_per_key() {
        let mut m = mix([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        m.ttl = Some((vec![60.0, 3600.0, 86400.0], vec![0.5, 0.4, 0.1]));
        let s = spec(5000, m.clone());
        let g = Generator::pregenerated(&s, 1, 10_000, &mut |_| {}).unwrap();
        let mut rng = SmallRng::seed_from_u64(2);
        let mut by_key: HashMap<u64, u32> = HashMap::new();
        for _ in 0..20_000 {
            let r = g.next(&mut rng);
            assert!([60, 3600, 86400].contains(&r.ttl_secs), "{r:?}");
            assert_eq!(*by_key.entry(r.key).or_insert(r.ttl_secs), r.ttl_secs);
        }
        let hour = by_key.values().filter(|t| **t == 3600).count() as f64 / by_key.len() as f64;
        assert!((hour - 0.4).abs() < 0.05, "{hour}");
        // Ranges: uniform within [10, 30).
        m.ttl = Some((vec![10.0, 30.0], vec![1.0]));
        let s = spec(5000, m.clone());
        let g = Generator::pregenerated(&s, 1, 1000, &mut |_| {}).unwrap();
        for _ in 0..1000 {
            assert!((10..30).contains(&g.next(&mut rng).ttl_secs));
        }
        // The online generator draws none, as upstream's.
        let g = Generator::new(&s, 1).unwrap();
        assert_eq!(g.next(&mut rng).ttl_secs, 0);
        m.ttl = Some((vec![10.0, 20.0, 30.0], vec![0.5]));
        let e = Generator::new(&spec(5000, m), 1).err().unwrap().to_string();
        assert!(e.contains("do not match up"), "{e}");
    }

    /// Chained sizes are fixed per key in both generators.
    #[test]
    fn chain_sizes_are_fixed_per_key() {
        let mut m = mix([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        m.add_chained = 1.0;
        m.chain = Some(ChainSpec {
            length_range: vec![1, 5],
            length_probability: vec![1.0],
            val_size_range: vec![10, 100],
            val_size_probability: vec![1.0],
        });
        let s = spec(1000, m);
        for g in [
            Generator::new(&s, 1).unwrap(),
            Generator::pregenerated(&s, 1, 1000, &mut |_| {}).unwrap(),
        ] {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            g.chain_sizes(0, 17, &mut a);
            g.chain_sizes(0, 17, &mut b);
            assert_eq!(a, b);
            assert!((1..5).contains(&a.len()) && a.iter().all(|s| (10..100).contains(s)));
        }
    }
}
