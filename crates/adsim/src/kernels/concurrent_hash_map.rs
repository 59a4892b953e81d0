//! `ConcurrentHashMap`: lookups in a hash map shared by every thread of
//! the server, as an ads server looks ads up by id while other threads do
//! the same.
//!
//! The map is upstream's design: 256 shards, each a reader-writer lock
//! around a SwissTable (upstream: `folly::SharedMutex` around an
//! `F14FastMap`; here `std::sync::RwLock` around `hashbrown`'s map), the
//! shard picked by mixing the key's hash again (upstream's
//! `shardingHashFromKey`). Keys are ad ids `0..N`, values shared ad
//! records (`AdData-<id>`). A lookup takes the shard's read lock and
//! clones the value's reference; an insert takes its write lock.
//!
//! N and the access pattern come from the distribution file (a header
//! line, then `frequency,count` lines: `count` keys accessed with weight
//! `frequency` each). At start-up the keys are inserted by several threads
//! at once, and a request book of `request_book_multiplier x N` ids is
//! drawn: a bucket with weight `frequency x count`, then a key of it
//! uniformly. A fire looks up the next `requests_per_run` ids of the book
//! (a shared cursor), split over `num_threads` concurrent parts; every id
//! was inserted, so a miss is an error.

use super::{Fired, HandleObjs, Kernel, Params, RequestObjs, Work, part_range, read_param_file};
use crate::Error;
use rand::distr::Distribution;
use rand::distr::weighted::WeightedIndex;
use rand::{Rng, SeedableRng};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

pub type AdId = i64;

/// The mock ad stored as a value.
#[derive(Debug, PartialEq)]
pub struct AdData {
    pub id: AdId,
    pub data: String,
}

impl AdData {
    pub fn new(id: AdId) -> AdData {
        AdData {
            id,
            data: format!("AdData-{id}"),
        }
    }
}

/// Thomas Wang's 64-bit integer mix, the hash of an id.
pub fn mix64(mut k: u64) -> u64 {
    k = (!k).wrapping_add(k << 21);
    k ^= k >> 24;
    k = k.wrapping_add(k << 3).wrapping_add(k << 8);
    k ^= k >> 14;
    k = k.wrapping_add(k << 2).wrapping_add(k << 4);
    k ^= k >> 28;
    k.wrapping_add(k << 31)
}

/// Hashes ids with [`mix64`].
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = mix64(self.0 ^ u64::from(b));
        }
    }

    fn write_i64(&mut self, v: i64) {
        self.0 = mix64(v as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type Table = hashbrown::HashMap<AdId, Arc<AdData>, BuildHasherDefault<IdHasher>>;

/// Upstream's shard count (`kShardBits` = 8).
pub const SHARD_BITS: u32 = 8;
const NUM_SHARDS: usize = 1 << SHARD_BITS;

/// Upstream's shard mix of the low 32 bits of the key's hash.
pub fn sharding_hash(key: i32) -> i32 {
    const C: u32 = 0x27d4_eb2d;
    let k = key ^ (((key >> 15) as u32) | ((key as u32) << 17)) as i32;
    (k as u32).wrapping_mul(C) as i32
}

/// One shard on its own cache lines, so that locking one does not bounce
/// its neighbours' lines.
#[repr(align(128))]
struct Shard(RwLock<Table>);

/// The sharded map.
pub struct ShardedMap {
    shards: Box<[Shard]>,
}

impl ShardedMap {
    /// A map expecting about `size_hint` entries.
    pub fn new(size_hint: usize) -> ShardedMap {
        let per = size_hint >> SHARD_BITS;
        ShardedMap {
            shards: (0..NUM_SHARDS)
                .map(|_| {
                    Shard(RwLock::new(Table::with_capacity_and_hasher(
                        per,
                        Default::default(),
                    )))
                })
                .collect(),
        }
    }

    pub fn shard_of(key: AdId) -> usize {
        (sharding_hash(mix64(key as u64) as i32) as u32 as usize) & (NUM_SHARDS - 1)
    }

    /// The value under `key`, its reference cloned under the shard's read
    /// lock.
    pub fn get(&self, key: AdId) -> Option<Arc<AdData>> {
        let t = self.shards[Self::shard_of(key)]
            .0
            .read()
            .unwrap_or_else(|e| e.into_inner());
        t.get(&key).cloned()
    }

    /// Inserts unless present: the value now stored, and whether it is
    /// the new one.
    pub fn put(&self, key: AdId, v: Arc<AdData>) -> (Arc<AdData>, bool) {
        let mut t = self.shards[Self::shard_of(key)]
            .0
            .write()
            .unwrap_or_else(|e| e.into_inner());
        let mut fresh = false;
        let stored = t.entry(key).or_insert_with(|| {
            fresh = true;
            v
        });
        (stored.clone(), fresh)
    }

    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.0.read().unwrap_or_else(|e| e.into_inner()).len())
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One line of the distribution: `count` keys of weight `frequency`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    pub frequency: u64,
    pub count: u64,
}

/// Parses the distribution file's text (the first line is a header and is
/// skipped, as upstream does); `file` names it in errors.
pub fn parse_distribution(text: &str, file: &str) -> Result<Vec<Bucket>, Error> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate().skip(1) {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let at = format!("{file}:{}", n + 1);
        let (f, c) = line
            .split_once(',')
            .ok_or_else(|| Error::Input(format!("{at}: {line:?}: expected frequency,count")))?;
        let f: f64 = f.trim().parse().map_err(|_| {
            Error::Input(format!(
                "{at}: frequency {:?}: expected a number >= 0",
                f.trim()
            ))
        })?;
        if !(f.is_finite() && f >= 0.0) {
            return Err(Error::Input(format!(
                "{at}: frequency {f}: expected a number >= 0"
            )));
        }
        let count: u64 = c.trim().parse().map_err(|_| {
            Error::Input(format!(
                "{at}: count {:?}: expected an integer >= 0",
                c.trim()
            ))
        })?;
        out.push(Bucket {
            frequency: f as u64,
            count,
        });
    }
    if out.iter().all(|b| b.count == 0) {
        return Err(Error::Input(format!(
            "{file}: no keys: expected a header line, then frequency,count lines"
        )));
    }
    Ok(out)
}

/// Upstream's cap on the bucket sampling table.
const MAX_TABLE: f64 = 10_000_000.0;

/// The request book: ids drawn bucket by weight (`frequency x count`,
/// scaled as upstream's table is, each non-empty bucket at least once),
/// then uniformly within the bucket.
pub fn request_book(buckets: &[Bucket], len: usize, seed: u64) -> Result<Vec<u32>, Error> {
    let total: f64 = buckets
        .iter()
        .map(|b| b.frequency as f64 * b.count as f64)
        .sum();
    let scale = if total > 0.0 {
        MAX_TABLE.min(total) / total
    } else {
        0.0
    };
    let weights: Vec<f64> = buckets
        .iter()
        .map(|b| {
            if b.count == 0 {
                0.0
            } else {
                (b.frequency as f64 * b.count as f64 * scale)
                    .floor()
                    .max(1.0)
            }
        })
        .collect();
    let pick = WeightedIndex::new(&weights)
        .map_err(|e| Error::Input(format!("cannot sample buckets: {e}")))?;
    let mut starts = Vec::with_capacity(buckets.len());
    let mut at = 0u64;
    for b in buckets {
        starts.push(at);
        at += b.count;
    }
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    Ok((0..len)
        .map(|_| {
            let b = pick.sample(&mut rng);
            (starts[b] + rng.random_range(0..buckets[b].count)) as u32
        })
        .collect())
}

pub struct ConcurrentHashMap {
    map: Arc<ShardedMap>,
    book: Vec<u32>,
    cursor: AtomicUsize,
    requests_per_run: usize,
    parts: usize,
}

impl ConcurrentHashMap {
    pub fn new(p: &Params, h: &HandleObjs, fidx: usize) -> Result<Self, Error> {
        const K: &str = "ConcurrentHashMap";
        let requests_per_run = p.usize("requests_per_run")?;
        let mult = p.usize_or("request_book_multiplier", 10)?;
        let num_threads = p.usize_or("num_threads", 4)?;
        let input = p.str_or("input", K)?;
        if !p.has("distribution_file") {
            return Err(Error::Input(format!(
                "{K} params.distribution_file: missing"
            )));
        }
        let file = p.str_or("distribution_file", "")?;
        if mult == 0 {
            return Err(Error::Input(format!(
                "{K} params.request_book_multiplier: 0: expected >= 1"
            )));
        }
        if num_threads > 4096 {
            return Err(Error::Input(format!(
                "{K} params.num_threads: {num_threads}: expected 0..=4096"
            )));
        }
        let buckets = parse_distribution(&read_param_file(K, "distribution_file", file)?, file)?;
        let keys: u64 = buckets.iter().map(|b| b.count).sum();
        if keys > u64::from(u32::MAX) {
            return Err(Error::Input(format!(
                "{file}: {keys} keys: expected at most {}",
                u32::MAX
            )));
        }
        let keys = keys as usize;
        let book_len = mult.checked_mul(keys).ok_or_else(|| {
            Error::Input(format!(
                "{K}: request book of {mult} x {keys} ids is too large"
            ))
        })?;
        let map = h.get_or_build(&format!("{input}\u{0}{file}"), || Ok(build_map(keys)))?;
        if map.len() != keys {
            return Err(Error::Input(format!(
                "{K} params.input {input:?}: already built from another distribution"
            )));
        }
        let book = request_book(&buckets, book_len, 0xc0_4c11 ^ fidx as u64)
            .map_err(|e| Error::Input(format!("{file}: {e}")))?;
        Ok(ConcurrentHashMap {
            map,
            book,
            cursor: AtomicUsize::new(0),
            requests_per_run,
            parts: num_threads.max(1),
        })
    }
}

/// The map of ids `0..keys`, inserted by up to 8 threads at once.
pub fn build_map(keys: usize) -> ShardedMap {
    let map = ShardedMap::new(keys);
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .clamp(1, 8);
    std::thread::scope(|s| {
        for t in 0..threads {
            let map = &map;
            s.spawn(move || {
                for id in (t..keys).step_by(threads) {
                    map.put(id as AdId, Arc::new(AdData::new(id as AdId)));
                }
            });
        }
    });
    map
}

impl Kernel for ConcurrentHashMap {
    fn fire(&self, _rq: &RequestObjs, part: usize) -> Result<Fired, Error> {
        let (from, to) = part_range(self.requests_per_run, self.parts, part % self.parts);
        let n = to - from;
        let start = self.cursor.fetch_add(n, Ordering::Relaxed) % self.book.len();
        let mut x = 0i32;
        let mut missed = 0usize;
        for i in 0..n {
            let id = AdId::from(self.book[(start + i) % self.book.len()]);
            match self.map.get(id) {
                Some(ad) => x ^= ad.id as i32,
                None => missed += 1,
            }
        }
        std::hint::black_box(x);
        if missed > 0 {
            return Err(Error::Host(format!(
                "{missed} lookups of inserted ids missed"
            )));
        }
        Ok(Fired::nothing())
    }

    fn parts(&self) -> usize {
        self.parts
    }

    /// Lookups per part (counted as `bytes`, as `HashMap` counts its).
    fn work(&self) -> Work {
        Work {
            flops: 0.0,
            bytes: self.requests_per_run as f64 / self.parts as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use serde_json::json;

    #[test]
    fn sharding_follows_upstreams_mix_and_spreads_keys() {
        assert_eq!(sharding_hash(0), 0);
        // key 1: 1 ^ (0 | 1 << 17) = 0x20001, times the constant.
        assert_eq!(
            sharding_hash(1) as u32,
            0x20001u32.wrapping_mul(0x27d4_eb2d)
        );
        // Negative keys shift in sign bits, as the C++ does.
        let k = -2i32;
        let want = (k ^ ((k >> 15) as u32 | ((k as u32) << 17)) as i32) as u32;
        assert_eq!(sharding_hash(k) as u32, want.wrapping_mul(0x27d4_eb2d));
        let mut used = [false; NUM_SHARDS];
        for id in 0..10_000 {
            used[ShardedMap::shard_of(id)] = true;
        }
        assert_eq!(used.iter().filter(|&&u| u).count(), NUM_SHARDS);
    }

    #[test]
    fn concurrent_inserts_and_lookups_agree() {
        let m = build_map(5000);
        assert_eq!(m.len(), 5000);
        std::thread::scope(|s| {
            for t in 0..4 {
                let m = &m;
                s.spawn(move || {
                    for id in (t..5000).step_by(4) {
                        assert_eq!(*m.get(id as AdId).unwrap(), AdData::new(id as AdId));
                    }
                    // Inserting again keeps the first value.
                    let (v, fresh) = m.put(t as AdId, Arc::new(AdData::new(99_999)));
                    assert!(!fresh);
                    assert_eq!(v.id, t as AdId);
                });
            }
        });
        assert!(m.get(5000).is_none());
        assert_eq!(m.len(), 5000);
    }

    #[test]
    fn the_distribution_shapes_the_request_book() {
        let b = parse_distribution("freq,count\n100.0,5\n1.0,3\n0,0\n", "c.dist").unwrap();
        assert_eq!(
            b,
            vec![
                Bucket {
                    frequency: 100,
                    count: 5
                },
                Bucket {
                    frequency: 1,
                    count: 3
                },
                Bucket {
                    frequency: 0,
                    count: 0
                }
            ]
        );
        let book = request_book(&b, 10_000, 1).unwrap();
        assert!(book.iter().all(|&i| i < 8));
        // Weights 500 and 3: the hot bucket's keys 0..5 take ~99.4%.
        let hot = book.iter().filter(|&&i| i < 5).count();
        assert!(hot > 9_800 && hot < 10_000, "{hot}");
        for k in 0..8 {
            assert!(book.contains(&k), "key {k} never drawn");
        }
        for (text, want) in [
            (
                "freq,count\n1;2\n",
                "c.dist:2: \"1;2\": expected frequency,count",
            ),
            ("freq,count\n1,x\n", "c.dist:2: count \"x\""),
            ("freq,count\n-1,2\n", "frequency -1"),
            ("freq,count\n", "no keys"),
        ] {
            let e = parse_distribution(text, "c.dist").unwrap_err();
            assert!(e.to_string().contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn fires_look_up_the_book_across_threads() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.dist");
        std::fs::write(&f, "freq,count\n10,300\n1,700\n").unwrap();
        let m = json!({"requests_per_run": 100, "num_threads": 4, "request_book_multiplier": 2,
                       "distribution_file": f.to_str().unwrap()});
        let p = Params {
            kernel: "ConcurrentHashMap",
            map: m.as_object().unwrap(),
        };
        let h = HandleObjs::new();
        let k = ConcurrentHashMap::new(&p, &h, 0).unwrap();
        assert_eq!((k.parts(), k.book.len(), k.map.len()), (4, 2000, 1000));
        assert_eq!(k.work().bytes, 25.0);
        let rq = RequestObjs::new(Bytes::new());
        std::thread::scope(|s| {
            for part in 0..4 {
                let (k, rq) = (&k, &rq);
                s.spawn(move || {
                    for _ in 0..50 {
                        k.fire(rq, part).unwrap();
                    }
                });
            }
        });
        assert_eq!(k.cursor.load(Ordering::Relaxed), 50 * 100);
        let k2 = ConcurrentHashMap::new(&p, &h, 1).unwrap();
        assert!(Arc::ptr_eq(&k.map, &k2.map));
        assert_ne!(k.book, k2.book, "instances draw their own books");
    }
}
