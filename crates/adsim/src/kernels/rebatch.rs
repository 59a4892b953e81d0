//! `Rebatch`: concatenating many input tensors, scattered in memory, into
//! one output tensor (re-batching requests' tensors into a model's batch):
//! copies from random places in a large memory pool, so they mostly miss
//! the caches.
//!
//! At start-up a pool of `memory_pool_size_gb` GiB (bytes 0xAB) is
//! allocated and `num_pregenerated_batches` batches are drawn: each takes
//! up to `tensors_per_batch` tensor sizes from the distribution file
//! (`size,percent` lines, after an optional header line; size 0 draws are
//! skipped), stopping before the total passes `output_tensor_size`, each
//! tensor at a uniformly random offset in the pool. A fire takes the next
//! batch (round robin over a shared cursor), allocates the output tensor
//! and copies every input tensor into it back to back, reading the first
//! word of each copy into a checksum. With `prefetch_dist` > 0 the tensor
//! that many places ahead is prefetched (as upstream, only when the batch
//! is not split). With `num_threads` > 1 a fire is split into that many
//! concurrent parts: each takes the next batch and copies its share of the
//! tensors (upstream's split) into an output of that share's size.

use super::{Fired, HandleObjs, Kernel, Params, RequestObjs, Work, part_range, read_param_file};
use crate::Error;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Tensor sizes and their cumulative probabilities, sizes ascending.
#[derive(Debug, Clone, PartialEq)]
pub struct SizeDistribution {
    pub sizes: Vec<usize>,
    pub cum: Vec<f64>,
}

impl SizeDistribution {
    /// Parses `size,percent` lines; a first line that is not numbers is a
    /// header. `file` names the file in errors.
    pub fn parse(text: &str, file: &str) -> Result<SizeDistribution, Error> {
        let mut pairs = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let at = format!("{file}:{}", n + 1);
            let parsed = line.split_once(',').and_then(|(s, f)| {
                Some((
                    s.trim().parse::<usize>().ok()?,
                    f.trim().parse::<f64>().ok()?,
                ))
            });
            match parsed {
                Some((_, f)) if !(f.is_finite() && f >= 0.0) => {
                    return Err(Error::Input(format!(
                        "{at}: percent {f}: expected a number >= 0"
                    )));
                }
                Some((s, f)) => pairs.push((s, f / 100.0)),
                None if n == 0 => {} // the header
                None => {
                    return Err(Error::Input(format!(
                        "{at}: {line:?}: expected size,percent (an integer and a number)"
                    )));
                }
            }
        }
        if pairs.is_empty() {
            return Err(Error::Input(format!("{file}: no size,percent lines")));
        }
        pairs.sort_by_key(|p| p.0);
        let mut acc = 0.0;
        let mut cum: Vec<f64> = pairs
            .iter()
            .map(|p| {
                acc += p.1;
                acc
            })
            .collect();
        if let Some(last) = cum.last_mut() {
            *last = 1.0;
        }
        Ok(SizeDistribution {
            sizes: pairs.iter().map(|p| p.0).collect(),
            cum,
        })
    }

    /// A size: the first whose cumulative probability reaches a uniform
    /// draw in [0, 1).
    pub fn sample(&self, rng: &mut impl Rng) -> usize {
        let r: f64 = rng.random();
        let i = self.cum.partition_point(|&c| c < r);
        self.sizes[i.min(self.sizes.len() - 1)]
    }
}

/// The input memory pool.
pub struct MemoryPool {
    mem: Vec<u8>,
}

impl MemoryPool {
    pub fn new(bytes: usize) -> Result<MemoryPool, Error> {
        let mut mem = Vec::new();
        mem.try_reserve_exact(bytes).map_err(|e| {
            Error::Host(format!("cannot allocate the {bytes}-byte memory pool: {e}"))
        })?;
        mem.resize(bytes, 0xAB);
        Ok(MemoryPool { mem })
    }

    pub fn len(&self) -> usize {
        self.mem.len()
    }

    pub fn is_empty(&self) -> bool {
        self.mem.is_empty()
    }
}

/// One pregenerated batch: where its tensors are in the pool and how big.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    pub offsets: Vec<usize>,
    pub sizes: Vec<usize>,
    pub total: usize,
}

impl Batch {
    /// Upstream's draw: `count` sizes, zeros skipped, stopping before the
    /// total would pass `max_total`, sizes larger than the pool skipped.
    pub fn draw(
        count: usize,
        dist: &SizeDistribution,
        max_total: usize,
        pool_len: usize,
        rng: &mut impl Rng,
    ) -> Batch {
        let mut b = Batch {
            offsets: Vec::new(),
            sizes: Vec::new(),
            total: 0,
        };
        for _ in 0..count {
            let size = dist.sample(rng);
            if size == 0 {
                continue;
            }
            if b.total + size > max_total {
                break;
            }
            if size > pool_len {
                continue;
            }
            b.offsets.push(rng.random_range(0..=pool_len - size));
            b.sizes.push(size);
            b.total += size;
        }
        b
    }
}

/// A hint to load the line at `p` into the cache; never faults.
#[inline]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint: it reads nothing into the program
    // and never faults, whatever the address (and `p` is inside the pool).
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

pub struct Rebatch {
    pool: Arc<MemoryPool>,
    batches: Vec<Batch>,
    next: AtomicUsize,
    output_tensor_size: usize,
    prefetch_dist: usize,
    parts: usize,
    bytes_per_part: f64,
}

impl Rebatch {
    pub fn new(p: &Params, h: &HandleObjs, fidx: usize) -> Result<Self, Error> {
        const K: &str = "Rebatch";
        let tensors_per_batch = p.usize_or("tensors_per_batch", 100)?;
        let num_threads = p.usize_or("num_threads", 4)?;
        let output_tensor_size = p.usize_or("output_tensor_size", 2_421_002)?;
        let gb = p.f64_or("memory_pool_size_gb", 4.0)?;
        let prefetch_dist = match p.map.get("prefetch_dist") {
            None => 0,
            Some(v) => v
                .as_i64()
                .ok_or_else(|| {
                    Error::Input(format!("{K} params.prefetch_dist: expected an integer"))
                })?
                .max(0) as usize,
        };
        let input = p.str_or("input", K)?;
        if !p.has("distribution_file") {
            return Err(Error::Input(format!(
                "{K} params.distribution_file: missing"
            )));
        }
        let file = p.str_or("distribution_file", "")?;
        let nbatches = p.usize_or("num_pregenerated_batches", 100)?;
        if nbatches == 0 {
            return Err(Error::Input(format!(
                "{K} params.num_pregenerated_batches: 0: expected >= 1"
            )));
        }
        if num_threads > 4096 {
            return Err(Error::Input(format!(
                "{K} params.num_threads: {num_threads}: expected 0..=4096"
            )));
        }
        let pool_bytes = gb * (1u64 << 30) as f64;
        if !(pool_bytes >= 1.0 && pool_bytes <= usize::MAX as f64 / 2.0) {
            return Err(Error::Input(format!(
                "{K} params.memory_pool_size_gb: {gb}: expected a positive size in GiB"
            )));
        }
        let pool_bytes = pool_bytes as usize;
        let dist = SizeDistribution::parse(&read_param_file(K, "distribution_file", file)?, file)?;
        let pool = h.get_or_build(&format!("{input}_memory_pool\u{0}{pool_bytes}"), || {
            MemoryPool::new(pool_bytes)
        })?;
        let mut rng = rand::rngs::SmallRng::seed_from_u64(0x4eba_7c40 ^ fidx as u64);
        let batches: Vec<Batch> = (0..nbatches)
            .map(|_| {
                Batch::draw(
                    tensors_per_batch,
                    &dist,
                    output_tensor_size,
                    pool.len(),
                    &mut rng,
                )
            })
            .collect();
        let parts = num_threads.max(1);
        let bytes_per_part = batches.iter().map(|b| b.total as f64).sum::<f64>()
            / batches.len() as f64
            / parts as f64;
        Ok(Rebatch {
            pool,
            batches,
            next: AtomicUsize::new(0),
            output_tensor_size,
            prefetch_dist,
            parts,
            bytes_per_part,
        })
    }

    /// Copies tensors `from..to` of `b` back to back into `out`; returns
    /// the bytes copied XOR the checksum (source addresses and the first
    /// word of each copy).
    fn copy(&self, b: &Batch, from: usize, to: usize, out: &mut Vec<u8>, prefetch: usize) -> u64 {
        let base = self.pool.mem.as_ptr();
        if prefetch > 0 {
            for i in (from + 1)..(from + prefetch).min(to) {
                prefetch_at(base, b.offsets[i]);
            }
        }
        let mut sum = 0u64;
        for i in from..to {
            if prefetch > 0 && i + prefetch < to {
                prefetch_at(base, b.offsets[i + prefetch]);
            }
            let (off, size) = (b.offsets[i], b.sizes[i]);
            let at = out.len();
            out.extend_from_slice(&self.pool.mem[off..off + size]);
            sum ^= base.wrapping_add(off) as usize as u64;
            if let Some(w) = out.get(at..at + 8) {
                sum ^= u64::from_le_bytes(w.try_into().unwrap_or_default());
            }
        }
        out.len() as u64 ^ sum
    }
}

fn prefetch_at(base: *const u8, off: usize) {
    prefetch(base.wrapping_add(off));
}

impl Kernel for Rebatch {
    fn fire(&self, _rq: &RequestObjs, part: usize) -> Result<Fired, Error> {
        let b = &self.batches[self.next.fetch_add(1, Ordering::Relaxed) % self.batches.len()];
        let n = b.sizes.len();
        if n == 0 {
            return Ok(Fired::nothing());
        }
        let r = if self.parts == 1 {
            let mut out = Vec::with_capacity(self.output_tensor_size);
            let r = self.copy(b, 0, n, &mut out, self.prefetch_dist);
            std::hint::black_box(&out);
            r
        } else {
            let (from, to) = part_range(n, self.parts, part % self.parts);
            let share: usize = b.sizes[from..to].iter().sum();
            let mut out = Vec::with_capacity(share);
            let r = self.copy(b, from, to, &mut out, 0);
            std::hint::black_box(&out);
            r
        };
        std::hint::black_box(r);
        Ok(Fired::nothing())
    }

    fn parts(&self) -> usize {
        self.parts
    }

    /// Bytes copied per part, on average over the batches.
    fn work(&self) -> Work {
        Work {
            flops: 0.0,
            bytes: self.bytes_per_part,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use serde_json::json;

    #[test]
    fn sizes_are_drawn_from_the_cdf() {
        let d =
            SizeDistribution::parse("input-size,count\n300,25\n100,50\n0,0\n200,25\n", "r.dist")
                .unwrap();
        assert_eq!(d.sizes, vec![0, 100, 200, 300]);
        assert_eq!(d.cum, vec![0.0, 0.5, 0.75, 1.0]);
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        let mut n = [0usize; 4];
        for _ in 0..20_000 {
            n[d.sample(&mut rng) / 100] += 1;
        }
        assert_eq!(n[0], 0);
        assert!((9_000..11_000).contains(&n[1]), "{n:?}");
        assert!(
            (4_000..6_000).contains(&n[2]) && (4_000..6_000).contains(&n[3]),
            "{n:?}"
        );
        for (text, want) in [
            (
                "size,pct\n100,x\n",
                "r.dist:2: \"100,x\": expected size,percent",
            ),
            ("100,-1\n", "r.dist:1: percent -1"),
            ("size,pct\n", "no size,percent lines"),
        ] {
            let e = SizeDistribution::parse(text, "r.dist").unwrap_err();
            assert!(e.to_string().contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn batches_stop_before_the_output_size_and_fit_the_pool() {
        let d = SizeDistribution::parse("1000,100\n", "r.dist").unwrap();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(2);
        let b = Batch::draw(10, &d, 4500, 1 << 16, &mut rng);
        assert_eq!((b.sizes.len(), b.total), (4, 4000));
        assert!(b.offsets.iter().all(|&o| o + 1000 <= 1 << 16));
        // Larger than the pool: skipped.
        let b = Batch::draw(10, &d, 1 << 20, 999, &mut rng);
        assert_eq!(b.total, 0);
    }

    fn kernel(dir: &std::path::Path, extra: serde_json::Value) -> Rebatch {
        let f = dir.join("r.dist");
        std::fs::write(&f, "input-size,count\n64,50\n512,50\n").unwrap();
        let mut m = json!({"tensors_per_batch": 8, "output_tensor_size": 100000,
                           "memory_pool_size_gb": 0.001, "num_pregenerated_batches": 5,
                           "distribution_file": f.to_str().unwrap()});
        for (k, v) in extra.as_object().unwrap() {
            m[k] = v.clone();
        }
        Rebatch::new(
            &Params {
                kernel: "Rebatch",
                map: m.as_object().unwrap(),
            },
            &HandleObjs::new(),
            0,
        )
        .unwrap()
    }

    #[test]
    fn a_fire_concatenates_the_batch_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let k = kernel(dir.path(), json!({"num_threads": 1, "prefetch_dist": 2}));
        assert_eq!(k.pool.len(), (0.001 * (1u64 << 30) as f64) as usize);
        assert!(k.pool.mem.iter().all(|&b| b == 0xAB));
        let b = &k.batches[0];
        assert_eq!(b.sizes.len(), 8);
        // Mark each source tensor so the order of the copy shows.
        let mut k = k;
        let mut pool = std::mem::replace(&mut k.pool, Arc::new(MemoryPool { mem: vec![] }));
        let mem = &mut Arc::get_mut(&mut pool).unwrap().mem;
        let b = k.batches[0].clone();
        for (i, (&o, &s)) in b.offsets.iter().zip(&b.sizes).enumerate() {
            mem[o..o + s].fill(i as u8);
        }
        k.pool = pool;
        let mut out = Vec::new();
        let r = k.copy(&b, 0, b.sizes.len(), &mut out, 2);
        assert_eq!(out.len(), b.total);
        let mut at = 0;
        for (i, &s) in b.sizes.iter().enumerate() {
            assert!(out[at..at + s].iter().all(|&x| x == i as u8), "tensor {i}");
            at += s;
        }
        assert_ne!(r, 0);
        let want = k.batches.iter().map(|b| b.total as f64).sum::<f64>() / 5.0;
        assert!((k.work().bytes - want).abs() < 1e-9);
        k.fire(&RequestObjs::new(Bytes::new()), 0).unwrap();
        assert_eq!(k.next.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn parts_split_the_tensors_and_errors_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let k = kernel(dir.path(), json!({"num_threads": 3}));
        assert_eq!(k.parts(), 3);
        let rq = RequestObjs::new(Bytes::new());
        for part in 0..3 {
            k.fire(&rq, part).unwrap();
        }
        assert_eq!(k.next.load(Ordering::Relaxed), 3);
        // The three shares of one batch cover it exactly.
        let b = &k.batches[1];
        let mut out = Vec::new();
        for part in 0..3 {
            let (f, t) = part_range(b.sizes.len(), 3, part);
            k.copy(b, f, t, &mut out, 0);
        }
        assert_eq!(out.len(), b.total);
        let m = json!({"memory_pool_size_gb": 0, "distribution_file": "x"});
        let e = Rebatch::new(
            &Params {
                kernel: "Rebatch",
                map: m.as_object().unwrap(),
            },
            &HandleObjs::new(),
            0,
        )
        .err()
        .unwrap();
        assert!(e.to_string().contains("memory_pool_size_gb: 0"), "{e}");
    }
}
