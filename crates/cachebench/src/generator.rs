//! The synthetic workload: keys, value sizes, the operation mix and key
//! popularity of CacheLib's `test_config`, drawn per operation.
//!
//! Keys: `numKeys` distinct keys split over the pools by
//! `keyPoolDistribution`, each with a length drawn from `keySizeRange` /
//! `keySizeRangeProbability` (piecewise uniform: bounds b0 < b1 < ... and a
//! probability per range). Value sizes from `valSizeRange` /
//! `valSizeRangeProbability`: exact sizes when both lists have the same
//! length, piecewise-uniform ranges when the range list is one longer. Each
//! operation picks a pool by `opPoolDistribution`, an operation by the
//! pool's ratios (weights, need not sum to 1), and a key of the pool by its
//! popularity: `popularityBuckets` / `popularityWeights`, else a truncated
//! normal over the pool's keys (mean at the middle, standard deviation a
//! quarter of the range; our choice, see docs/cachebench.md).
//!
//! Two generators, as upstream: `online` ([`Generator::new`]) draws the
//! key and the value size of every operation as it runs; `workload`
//! ([`Generator::pregenerated`], the default) fixes each key's value size
//! and TTL (`ttlSecsRange` / `ttlSecsRangeProbability`, exact values or
//! piecewise-uniform ranges; upstream's online generator draws none) and
//! samples the pools' key choices before the run. With `useLegacyKeyGen`
//! the popularity buckets keep the sizes the popularity data gives them
//! and their keys are spread over the pool's keys (upstream's old key
//! generation: about as many distinct keys as the data has objects).

use rand::Rng;
use rand::distr::weighted::WeightedIndex;
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

/// A size distribution: exact values or piecewise-uniform ranges.
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

/// How a pool's keys are chosen.
#[derive(Debug, Clone)]
enum Popularity {
    /// Bucket boundaries (cumulative key counts) and their weights.
    Buckets(Vec<u64>, WeightedIndex<f64>),
    /// `useLegacyKeyGen`: bucket boundaries in the popularity data's own
    /// object counts, their weights, and the factor from an object's
    /// index to a key offset (upstream's scaling factor).
    Legacy(Vec<u64>, WeightedIndex<f64>, f64),
    Normal(Normal<f64>),
}

struct PoolGen {
    first_key: u64,
    keys: u64,
    ops: WeightedIndex<f64>,
    vals: Sizes,
    popularity: Popularity,
    /// Chain lengths and chained value sizes.
    chain: Option<(Sizes, Sizes)>,
    ttl: Option<Ttls>,
    /// Pre-generated: key offsets sampled from the popularity once; an
    /// operation picks one of them at random (empty: draw online).
    sampled: Vec<u32>,
}

/// Draws operations; shared by the threads (immutable).
pub struct Generator {
    keys: Vec<Vec<u8>>,
    /// Pre-generated: each key's value size, drawn once (empty: online).
    value_sizes: Vec<u32>,
    /// Pre-generated: each key's TTL, drawn once (empty: none).
    ttls: Vec<u32>,
    pools: Vec<PoolGen>,
    op_pool: WeightedIndex<f64>,
    max_value: u32,
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

impl Generator {
    /// Builds the key set (`numKeys` keys with their sizes) and the samplers.
    pub fn new(spec: &Spec, seed: u64) -> Result<Generator, String> {
        use rand::SeedableRng;
        let n_pools = spec.key_pool_distribution.len().max(1);
        if spec.mixes.is_empty() {
            return Err("no pool distribution".into());
        }
        let mix = |p: usize| &spec.mixes[p.min(spec.mixes.len() - 1)];
        let kp_sum: f64 = spec.key_pool_distribution.iter().sum();
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut keys = Vec::with_capacity(spec.num_keys as usize);
        let mut seen = std::collections::HashSet::new();
        let mut pools = Vec::with_capacity(n_pools);
        let mut max_value = 0;
        for p in 0..n_pools {
            let share = spec.key_pool_distribution.get(p).copied().unwrap_or(1.0)
                / kp_sum.max(f64::MIN_POSITIVE);
            let count = if p + 1 == n_pools {
                spec.num_keys - keys.len() as u64
            } else {
                (spec.num_keys as f64 * share).round() as u64
            };
            let m = mix(p);
            let key_sizes = Sizes::new(&m.key_size_range, &m.key_size_probability, "keySizeRange")?;
            let vals = Sizes::new(&m.val_size_range, &m.val_size_probability, "valSizeRange")?;
            max_value = max_value.max(vals.max());
            let first_key = keys.len() as u64;
            let mut attempts = 0u64;
            while (keys.len() as u64) < first_key + count {
                let len = key_sizes.draw(&mut rng).max(1) as usize;
                let key: Vec<u8> = (0..len).map(|_| rng.random_range(b'a'..=b'z')).collect();
                attempts += 1;
                if seen.insert(key.clone()) {
                    keys.push(key);
                } else if attempts > count.saturating_mul(20) + 1000 {
                    return Err(format!(
                        "cannot make {count} distinct keys from keySizeRange {:?}: too few possible keys",
                        m.key_size_range
                    ));
                }
            }
            let ops = WeightedIndex::new(
                m.op_weights
                    .iter()
                    .copied()
                    .chain(std::iter::once(m.add_chained)),
            )
            .map_err(|e| format!("operation ratios {:?}: {e}", m.op_weights))?;
            let chain = match (&m.chain, m.add_chained > 0.0) {
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
                    max_value = max_value.max(vals.max());
                    Some((
                        Sizes::new(
                            &c.length_range,
                            &c.length_probability,
                            "chainedItemLengthRange",
                        )?,
                        vals,
                    ))
                }
            };
            let popularity = match &m.popularity {
                Some((buckets, weights)) => {
                    if buckets.len() != weights.len() || buckets.is_empty() {
                        return Err(format!(
                            "popularityBuckets has {} entries and popularityWeights {}: expected the same, non-zero",
                            buckets.len(),
                            weights.len()
                        ));
                    }
                    // Scale the buckets to the pool's key count.
                    let total: u64 = buckets.iter().sum::<u64>().max(1);
                    let mut bounds = Vec::with_capacity(buckets.len());
                    let mut acc = 0u64;
                    for b in buckets {
                        acc += b;
                        bounds.push((acc as f64 / total as f64 * count as f64).round() as u64);
                    }
                    let w = WeightedIndex::new(weights.iter().copied())
                        .map_err(|e| format!("popularityWeights {weights:?}: {e}"))?;
                    if m.legacy_key_gen {
                        let mut raw = Vec::with_capacity(buckets.len());
                        let mut acc = 0u64;
                        for b in buckets {
                            acc += b;
                            raw.push(acc);
                        }
                        let scale = count.saturating_sub(1) as f64 / total as f64;
                        Popularity::Legacy(raw, w, scale)
                    } else {
                        Popularity::Buckets(bounds, w)
                    }
                }
                None => {
                    let n = count.max(1) as f64;
                    Popularity::Normal(
                        Normal::new(n / 2.0, n / 4.0).map_err(|e| format!("popularity: {e}"))?,
                    )
                }
            };
            let ttl = match &m.ttl {
                Some((range, prob)) if !range.is_empty() || !prob.is_empty() => {
                    Some(Ttls::new(range, prob)?)
                }
                _ => None,
            };
            pools.push(PoolGen {
                first_key,
                keys: count,
                ops,
                vals,
                popularity,
                chain,
                ttl,
                sampled: Vec::new(),
            });
        }
        let op_pool = WeightedIndex::new(if spec.op_pool_distribution.is_empty() {
            vec![1.0; n_pools]
        } else {
            spec.op_pool_distribution.clone()
        })
        .map_err(|e| format!("opPoolDistribution {:?}: {e}", spec.op_pool_distribution))?;
        Ok(Generator {
            keys,
            value_sizes: Vec::new(),
            ttls: Vec::new(),
            pools,
            op_pool,
            max_value,
        })
    }

    /// The `workload` generator: as [`Generator::new`], then, as upstream
    /// pre-generates its workload, each key gets one value size for the
    /// run and each pool `accesses` key choices (at most 10 M) sampled
    /// from its popularity up front; an operation then picks one of the
    /// sampled choices at random. `progress` gets upstream's lines
    /// (`Generating X.XXM sampled accesses` per pool).
    pub fn pregenerated(
        spec: &Spec,
        seed: u64,
        accesses: u64,
        progress: &mut dyn FnMut(String),
    ) -> Result<Generator, String> {
        use rand::SeedableRng;
        let mut g = Generator::new(spec, seed)?;
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15);
        let mut sizes = vec![0u32; g.keys.len()];
        for p in &g.pools {
            for k in p.first_key..p.first_key + p.keys {
                sizes[k as usize] = p.vals.draw(&mut rng);
            }
        }
        g.value_sizes = sizes;
        // TTLs per key, as upstream's pre-generated requests carry them.
        if g.pools.iter().any(|p| p.ttl.is_some()) {
            let mut ttls = vec![0u32; g.keys.len()];
            for p in &g.pools {
                if let Some(t) = &p.ttl {
                    for k in p.first_key..p.first_key + p.keys {
                        ttls[k as usize] = t.draw(&mut rng);
                    }
                }
            }
            g.ttls = ttls;
        }
        let n = accesses.clamp(1, 10_000_000);
        for p in 0..g.pools.len() {
            if g.pools[p].keys == 0 {
                continue;
            }
            progress(crate::output::generating_accesses(n));
            let sampled: Vec<u32> = (0..n).map(|_| g.draw_offset(p, &mut rng) as u32).collect();
            g.pools[p].sampled = sampled;
        }
        Ok(g)
    }

    /// A key offset within pool `p` drawn from its popularity.
    fn draw_offset(&self, pool: usize, rng: &mut impl Rng) -> u64 {
        let p = &self.pools[pool];
        if p.keys == 0 {
            return 0;
        }
        match &p.popularity {
            Popularity::Buckets(bounds, w) => {
                let b = w.sample(rng);
                let lo = if b == 0 { 0 } else { bounds[b - 1] };
                let hi = bounds[b].max(lo + 1).min(p.keys);
                if hi <= lo {
                    lo.min(p.keys - 1)
                } else {
                    rng.random_range(lo..hi)
                }
            }
            Popularity::Legacy(bounds, w, scale) => {
                let b = w.sample(rng);
                let lo = if b == 0 { 0 } else { bounds[b - 1] };
                let hi = bounds[b].max(lo + 1);
                let object = rng.random_range(lo..hi);
                ((object as f64 * scale) as u64).min(p.keys - 1)
            }
            Popularity::Normal(n) => loop {
                let x = n.sample(rng);
                if x >= 0.0 && x < p.keys as f64 {
                    break x as u64;
                }
            },
        }
    }

    /// Whether the generator pre-generated its choices.
    pub fn is_pregenerated(&self) -> bool {
        !self.value_sizes.is_empty()
    }

    /// The key with index `i`.
    pub fn key(&self, i: u64) -> &[u8] {
        &self.keys[i as usize]
    }

    /// Number of keys.
    pub fn num_keys(&self) -> u64 {
        self.keys.len() as u64
    }

    /// The largest value size any pool draws.
    pub fn max_value_size(&self) -> u32 {
        self.max_value
    }

    /// Draws the sizes of the chained items an AddChained of `pool` adds
    /// (none when the pool has no chains).
    pub fn chain_sizes(&self, pool: usize, rng: &mut impl Rng, out: &mut Vec<u32>) {
        if let Some((len, vals)) = &self.pools[pool.min(self.pools.len() - 1)].chain {
            for _ in 0..len.draw(rng) {
                out.push(vals.draw(rng));
            }
        }
    }

    /// Draws the next operation.
    pub fn next(&self, rng: &mut impl Rng) -> Request {
        let pool = self.op_pool.sample(rng).min(self.pools.len() - 1);
        let p = &self.pools[pool];
        let op = OPS[p.ops.sample(rng)];
        let offset = if p.sampled.is_empty() {
            self.draw_offset(pool, rng)
        } else {
            u64::from(p.sampled[rng.random_range(0..p.sampled.len())])
        };
        let key = p.first_key + offset;
        let value_size = if self.value_sizes.is_empty() {
            p.vals.draw(rng)
        } else {
            self.value_sizes[key as usize]
        };
        Request {
            pool,
            op,
            key,
            value_size,
            ttl_secs: self.ttls.get(key as usize).copied().unwrap_or(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use std::collections::HashMap;

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
        assert!((0..10_000).all(|i| (8..16).contains(&g.key(i).len())));
        let mut rng = rand::rngs::StdRng::seed_from_u64(2);
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

    #[test]
    fn exact_value_sizes_and_popularity_buckets() {
        let mut m = mix([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        m.val_size_range = vec![64, 512];
        m.val_size_probability = vec![0.25, 0.75];
        // 10% of the keys take 90% of the accesses.
        m.popularity = Some((vec![1, 9], vec![0.9, 0.1]));
        let spec = Spec {
            num_keys: 1000,
            key_pool_distribution: vec![1.0],
            op_pool_distribution: vec![1.0],
            mixes: vec![m],
        };
        let g = Generator::new(&spec, 3).unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(4);
        let (mut hot, mut small) = (0, 0);
        for _ in 0..50_000 {
            let r = g.next(&mut rng);
            assert!(r.value_size == 64 || r.value_size == 512);
            small += u32::from(r.value_size == 64);
            hot += u32::from(r.key < 100);
        }
        assert!((f64::from(hot) / 50_000.0 - 0.9).abs() < 0.01, "{hot}");
        assert!((f64::from(small) / 50_000.0 - 0.25).abs() < 0.01, "{small}");
    }

    #[test]
    fn mismatched_sizes_are_named() {
        let mut m = mix([1.0; 7]);
        m.val_size_range = vec![1, 2, 3, 4];
        m.val_size_probability = vec![0.5, 0.5];
        let spec = Spec {
            num_keys: 10,
            key_pool_distribution: vec![1.0],
            op_pool_distribution: vec![1.0],
            mixes: vec![m],
        };
        let err = Generator::new(&spec, 1).err().unwrap();
        assert!(err.contains("valSizeRange has 4 values"), "{err}");
        let mut m = mix([1.0; 7]);
        m.key_size_range = vec![1, 2];
        let spec = Spec {
            num_keys: 100,
            key_pool_distribution: vec![1.0],
            op_pool_distribution: vec![1.0],
            mixes: vec![m],
        };
        let err = Generator::new(&spec, 1).err().unwrap();
        assert!(err.contains("distinct keys"), "{err}");
    }

    #[test]
    fn pregenerated_workload_fixes_sizes_per_key_and_samples_popularity() {
        let mut m = mix([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        m.val_size_range = vec![64, 512];
        m.val_size_probability = vec![0.25, 0.75];
        m.popularity = Some((vec![1, 9], vec![0.9, 0.1]));
        let spec = Spec {
            num_keys: 1000,
            key_pool_distribution: vec![1.0],
            op_pool_distribution: vec![1.0],
            mixes: vec![m],
        };
        let mut lines = Vec::new();
        let g = Generator::pregenerated(&spec, 3, 200_000, &mut |l| lines.push(l)).unwrap();
        assert!(g.is_pregenerated());
        assert!(!Generator::new(&spec, 3).unwrap().is_pregenerated());
        assert_eq!(lines, ["Generating 0.20M sampled accesses\n"]);
        let mut rng = rand::rngs::StdRng::seed_from_u64(4);
        let mut size_of: HashMap<u64, u32> = HashMap::new();
        let (mut hot, mut small) = (0, 0);
        for _ in 0..50_000 {
            let r = g.next(&mut rng);
            // One size per key for the whole run.
            assert_eq!(*size_of.entry(r.key).or_insert(r.value_size), r.value_size);
            hot += u32::from(r.key < 100);
        }
        for s in size_of.values() {
            small += u32::from(*s == 64);
        }
        assert!((f64::from(hot) / 50_000.0 - 0.9).abs() < 0.01, "{hot}");
        // A quarter of the keys are small (over the keys, not the ops).
        let share = f64::from(small) / size_of.len() as f64;
        assert!((share - 0.25).abs() < 0.06, "{share}");
        // The same seed gives the same sampled workload.
        let g2 = Generator::pregenerated(&spec, 3, 200_000, &mut |_| {}).unwrap();
        let mut r1 = rand::rngs::StdRng::seed_from_u64(9);
        let mut r2 = rand::rngs::StdRng::seed_from_u64(9);
        for _ in 0..1000 {
            assert_eq!(g.next(&mut r1), g2.next(&mut r2));
        }
    }

    /// TTLs per key as upstream draws them (exact values or ranges, per
    /// pool), none from the online generator; mismatched lists named.
    #[test]
    fn ttls_are_drawn_per_key() {
        let mut m = mix([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        m.ttl = Some((vec![60.0, 3600.0, 86400.0], vec![0.5, 0.4, 0.1]));
        let spec = Spec {
            num_keys: 5000,
            key_pool_distribution: vec![1.0],
            op_pool_distribution: vec![1.0],
            mixes: vec![m.clone()],
        };
        let g = Generator::pregenerated(&spec, 1, 10_000, &mut |_| {}).unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(2);
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
        let spec = Spec {
            mixes: vec![m.clone()],
            ..spec
        };
        let g = Generator::pregenerated(&spec, 1, 1000, &mut |_| {}).unwrap();
        for _ in 0..1000 {
            assert!((10..30).contains(&g.next(&mut rng).ttl_secs));
        }
        // The online generator draws none, as upstream's.
        let g = Generator::new(&spec, 1).unwrap();
        assert_eq!(g.next(&mut rng).ttl_secs, 0);
        m.ttl = Some((vec![10.0, 20.0, 30.0], vec![0.5]));
        let spec = Spec {
            mixes: vec![m],
            ..spec
        };
        let e = Generator::new(&spec, 1).err().unwrap();
        assert!(e.contains("do not match up"), "{e}");
    }

    /// useLegacyKeyGen: the buckets keep the popularity data's sizes, so
    /// about as many keys are used as the data has objects, spread over
    /// the pool; without it every key is used.
    #[test]
    fn legacy_key_generation_uses_the_datas_objects() {
        let mut m = mix([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        m.popularity = Some((vec![100, 900], vec![0.5, 0.5]));
        let distinct = |legacy: bool| {
            let mut m = m.clone();
            m.legacy_key_gen = legacy;
            let spec = Spec {
                num_keys: 10_000,
                key_pool_distribution: vec![1.0],
                op_pool_distribution: vec![1.0],
                mixes: vec![m],
            };
            let g = Generator::new(&spec, 1).unwrap();
            let mut rng = rand::rngs::StdRng::seed_from_u64(3);
            let mut seen = std::collections::HashSet::new();
            for _ in 0..200_000 {
                let r = g.next(&mut rng);
                assert!(r.key < 10_000);
                seen.insert(r.key);
            }
            (seen.len(), seen.into_iter().max().unwrap())
        };
        let (legacy, legacy_max) = distinct(true);
        assert!(legacy <= 1000, "{legacy}");
        assert!(legacy_max > 9000, "spread over the pool: {legacy_max}");
        let (scaled, _) = distinct(false);
        assert!(scaled > 9000, "{scaled}");
    }
}
