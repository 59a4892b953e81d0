//! Per-bucket Bloom filters kept in DRAM, so the small-item engine can answer
//! most misses without reading a bucket from the device.
//!
//! Layout: every filter is `words_per_filter` consecutive `AtomicU64` words
//! of one flat array (filter `f` owns words `f * wpf .. (f + 1) * wpf`) and
//! uses the first `bytes_per_filter * 8` bits of them. With the usual 8
//! bytes per bucket a filter is exactly one word.
//!
//! Bit positions: the `k` positions of a key come from its 64-bit hash by
//! double hashing, `g_i = (h1 + i * h2) mod m` for `i in 0..k`, with `h1` the
//! low and `h2` the high 32 bits of the hash (`h2` forced odd, so with a
//! power-of-two `m` the `k <= m` positions are always distinct).
//!
//! Thread safety: every word is an `AtomicU64` accessed with `Relaxed`
//! ordering, so any method may be called from any thread without data
//! races, and a single [`set`](BloomFilters::set) is never lost. A
//! consistent *sequence* over one filter (clear, then set the surviving
//! keys) is the caller's job: the engine does it under its bucket lock. To
//! help lock-free readers, [`rebuild`](BloomFilters::rebuild) computes the
//! new filter off to the side and stores it word by word, so a key present
//! both before and after a rebuild is never reported absent meanwhile.
//!
//! A filter of 0 bytes is disabled: [`may_contain`](BloomFilters::may_contain)
//! always answers `true` and nothing is allocated.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// One small Bloom filter per bucket, all in one array.
pub struct BloomFilters {
    words: Box<[AtomicU64]>,
    num_filters: usize,
    words_per_filter: usize,
    /// Bits used per filter (`bytes_per_filter * 8`); 0 = disabled.
    bits: u64,
    num_hashes: u32,
}

impl BloomFilters {
    /// `num_filters` filters of `bytes_per_filter` bytes probed with
    /// `num_hashes` bit positions per key (clamped to at least 1).
    /// `bytes_per_filter == 0` disables filtering.
    pub fn new(num_filters: usize, bytes_per_filter: usize, num_hashes: u32) -> BloomFilters {
        let words_per_filter = bytes_per_filter.div_ceil(8);
        let total = if bytes_per_filter == 0 {
            0
        } else {
            num_filters
                .checked_mul(words_per_filter)
                .expect("bloom filter array size overflows usize")
        };
        let words: Box<[AtomicU64]> = (0..total).map(|_| AtomicU64::new(0)).collect();
        BloomFilters {
            words,
            num_filters,
            words_per_filter,
            bits: bytes_per_filter as u64 * 8,
            num_hashes: num_hashes.max(1),
        }
    }

    /// Whether filtering is on (a non-zero filter size).
    pub fn enabled(&self) -> bool {
        self.bits != 0
    }

    /// Number of filters.
    pub fn num_filters(&self) -> usize {
        self.num_filters
    }

    /// Bit positions probed per key.
    pub fn num_hashes(&self) -> u32 {
        self.num_hashes
    }

    /// Bits per filter.
    pub fn bits_per_filter(&self) -> u64 {
        self.bits
    }

    /// Calls `f(word, mask)` for each of the key's `k` bit positions, `word`
    /// being the index inside the filter.
    #[inline]
    fn for_each_bit(&self, key_hash: u64, mut f: impl FnMut(usize, u64)) {
        let h1 = key_hash & 0xffff_ffff;
        let h2 = (key_hash >> 32) | 1;
        for i in 0..u64::from(self.num_hashes) {
            let bit = h1.wrapping_add(i.wrapping_mul(h2)) % self.bits;
            f((bit / 64) as usize, 1u64 << (bit % 64));
        }
    }

    #[inline]
    fn base(&self, filter: usize) -> usize {
        assert!(
            filter < self.num_filters,
            "bloom filter {filter} out of range (have {})",
            self.num_filters
        );
        filter * self.words_per_filter
    }

    /// Adds a key (by its hash) to `filter`.
    pub fn set(&self, filter: usize, key_hash: u64) {
        if !self.enabled() {
            return;
        }
        let base = self.base(filter);
        self.for_each_bit(key_hash, |w, mask| {
            self.words[base + w].fetch_or(mask, Relaxed);
        });
    }

    /// `false` only if the key was never [`set`](Self::set) in `filter`
    /// since its last clear (no false negatives); `true` may be a false
    /// positive. Always `true` when disabled.
    pub fn may_contain(&self, filter: usize, key_hash: u64) -> bool {
        if !self.enabled() {
            return true;
        }
        let base = self.base(filter);
        let mut all = true;
        self.for_each_bit(key_hash, |w, mask| {
            all &= self.words[base + w].load(Relaxed) & mask != 0;
        });
        all
    }

    /// Empties `filter`.
    pub fn clear(&self, filter: usize) {
        if !self.enabled() {
            return;
        }
        let base = self.base(filter);
        for w in &self.words[base..base + self.words_per_filter] {
            w.store(0, Relaxed);
        }
    }

    /// Replaces `filter` with one holding exactly `key_hashes`: the new bits
    /// are built locally, then stored one word at a time (see the module
    /// notes on readers).
    pub fn rebuild<I: IntoIterator<Item = u64>>(&self, filter: usize, key_hashes: I) {
        if !self.enabled() {
            return;
        }
        let base = self.base(filter);
        let mut small = [0u64; 4];
        let mut large = Vec::new();
        let local: &mut [u64] = if self.words_per_filter <= small.len() {
            &mut small[..self.words_per_filter]
        } else {
            large.resize(self.words_per_filter, 0);
            &mut large
        };
        for h in key_hashes {
            self.for_each_bit(h, |w, mask| local[w] |= mask);
        }
        for (slot, &v) in self.words[base..base + self.words_per_filter]
            .iter()
            .zip(local.iter())
        {
            slot.store(v, Relaxed);
        }
    }

    /// DRAM held by the filters.
    pub fn memory_bytes(&self) -> usize {
        self.words.len() * std::mem::size_of::<AtomicU64>()
    }

    /// The textbook false-positive rate of one filter holding `keys` keys,
    /// `(1 - (1 - 1/m)^(k n))^k`; 1 when disabled.
    pub fn theoretical_fp_rate(&self, keys: usize) -> f64 {
        if !self.enabled() {
            return 1.0;
        }
        let m = self.bits as f64;
        let k = f64::from(self.num_hashes);
        let unset = (1.0 - 1.0 / m).powf(k * keys as f64);
        (1.0 - unset).powf(k)
    }
}

impl std::fmt::Debug for BloomFilters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BloomFilters")
            .field("num_filters", &self.num_filters)
            .field("bits_per_filter", &self.bits)
            .field("num_hashes", &self.num_hashes)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A well-mixed stream of test hashes (splitmix64).
    fn hash_of(i: u64) -> u64 {
        let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    #[test]
    fn no_false_negatives() {
        let b = BloomFilters::new(1000, 8, 4);
        for f in 0..1000u64 {
            for j in 0..20 {
                b.set(f as usize, hash_of(f * 1000 + j));
            }
        }
        for f in 0..1000u64 {
            for j in 0..20 {
                assert!(b.may_contain(f as usize, hash_of(f * 1000 + j)));
            }
        }
    }

    #[test]
    fn measured_false_positive_rate_is_near_theory() {
        // 8 bytes (64 bits) per bucket, ~10 keys per bucket, 4 probes.
        let filters = 20_000usize;
        let keys = 10u64;
        let probes = 50u64;
        let b = BloomFilters::new(filters, 8, 4);
        for f in 0..filters as u64 {
            for j in 0..keys {
                b.set(f as usize, hash_of((f << 20) | j));
            }
        }
        let mut fp = 0u64;
        for f in 0..filters as u64 {
            for j in 0..probes {
                // Never inserted: a disjoint range of inputs.
                if b.may_contain(f as usize, hash_of((f << 20) | (1 << 19) | j)) {
                    fp += 1;
                }
            }
        }
        let measured = fp as f64 / (filters as u64 * probes) as f64;
        let theory = b.theoretical_fp_rate(keys as usize);
        eprintln!("bloom 8 B, k=4, 10 keys: measured fp {measured:.4}, theoretical {theory:.4}");
        assert!((0.03..0.07).contains(&theory), "theory {theory}");
        assert!(
            measured < 2.0 * theory + 0.005,
            "measured fp {measured:.4} vs theoretical {theory:.4}"
        );
        assert!(measured > theory / 2.0, "suspiciously low fp {measured:.4}");
    }

    #[test]
    fn clear_rebuild_and_independence() {
        let b = BloomFilters::new(4, 8, 3);
        for j in 0..5 {
            b.set(1, hash_of(j));
        }
        // Filter 1's keys do not leak into filter 2 (all-zero filter rejects).
        for j in 0..5 {
            assert!(!b.may_contain(2, hash_of(j)));
        }
        b.clear(1);
        for j in 0..5 {
            assert!(!b.may_contain(1, hash_of(j)));
        }
        b.rebuild(1, [hash_of(100), hash_of(101)]);
        assert!(b.may_contain(1, hash_of(100)));
        assert!(b.may_contain(1, hash_of(101)));
        b.rebuild(1, std::iter::empty());
        assert!(!b.may_contain(1, hash_of(100)));
    }

    #[test]
    fn multi_word_filters() {
        // 20 bytes = 160 bits over 3 words; rebuild uses the heap path at 40.
        for bytes in [20usize, 40] {
            let b = BloomFilters::new(3, bytes, 5);
            assert_eq!(b.bits_per_filter(), bytes as u64 * 8);
            b.rebuild(1, (0..30).map(hash_of));
            for j in 0..30 {
                assert!(b.may_contain(1, hash_of(j)));
            }
            b.set(2, hash_of(7));
            assert!(b.may_contain(2, hash_of(7)));
            assert_eq!(b.memory_bytes(), 3 * bytes.div_ceil(8) * 8);
        }
    }

    #[test]
    fn disabled_filters_always_say_maybe() {
        let b = BloomFilters::new(100, 0, 4);
        assert!(!b.enabled());
        assert_eq!(b.memory_bytes(), 0);
        b.set(5, 42);
        b.clear(5);
        assert!(b.may_contain(5, 42));
        assert!(b.may_contain(99, 7));
        assert_eq!(b.theoretical_fp_rate(10), 1.0);
    }

    #[test]
    fn concurrent_sets_are_not_lost() {
        let b = std::sync::Arc::new(BloomFilters::new(8, 8, 4));
        let handles: Vec<_> = (0..4u64)
            .map(|t| {
                let b = b.clone();
                std::thread::spawn(move || {
                    for j in 0..2000u64 {
                        b.set((j % 8) as usize, hash_of(t * 1_000_000 + j));
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        for t in 0..4u64 {
            for j in 0..2000u64 {
                assert!(b.may_contain((j % 8) as usize, hash_of(t * 1_000_000 + j)));
            }
        }
    }
}
