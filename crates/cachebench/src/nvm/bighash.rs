//! BigHash, the small-item engine: a set-associative hash table on a
//! [`BlockIo`].
//!
//! The device is cut into `num_buckets = size / bucket_size` buckets
//! (any tail shorter than a bucket is left unused); a key lives in bucket
//! `mix(hash(key)) % num_buckets`. A bucket is always read and rewritten
//! whole, under a striped per-bucket lock.
//!
//! # Bucket layout (all integers little-endian)
//!
//! ```text
//! header, BUCKET_HEADER_SIZE = 24 bytes
//!   0  u32  checksum   CRC-32C of bytes 4 .. 24 + used (0 when checksums are off)
//!   4  u32  magic      b"BHB1", the format marker
//!   8  u32  generation the writing engine instance's generation
//!  12  u32  bucket id  low 32 bits of the bucket's index (catches misplaced writes)
//!  16  u32  count      number of entries
//!  20  u32  used       bytes of entries following the header
//! entries, packed back to back, oldest first; ENTRY_HEADER_SIZE = 18 bytes each
//!   0  u64  key hash
//!   8  u32  expiry     seconds since the epoch, 0 = never
//!  12  u16  key length
//!  14  u32  value length
//!  18       key bytes, then value bytes
//! the rest of the bucket: unspecified (zeros when written by us)
//! ```
//!
//! # Reading a bucket
//!
//! - A header of all zeros is a never-written bucket: empty and valid.
//! - A wrong magic, a `used` past the bucket, a checksum mismatch (when
//!   [`BigHashConfig::checksum`] is on), a wrong bucket id, or entries that
//!   do not tile `used` exactly with `count` entries: the bucket is treated
//!   as empty and counted in [`BigHashStats::checksum_errors`]; its Bloom
//!   filter is cleared so later misses do not read it again.
//! - A valid bucket from another generation (an earlier engine on the same
//!   device) is empty and not an error: there is no recovery, and a new
//!   engine starts empty, like its Bloom filters.
//!
//! With checksums off the structure is still validated (so corruption can
//! never make the engine read past a bucket), but damaged key or value
//! bytes go unnoticed.
//!
//! # Choices
//!
//! - Eviction is FIFO inside a bucket: an insert drops the oldest entries
//!   until the new one fits; a replaced key is removed first and the new
//!   version appended as the newest.
//! - Hashing: a seeded FNV-1a over the key followed by a 64-bit finalizer is
//!   the key hash (stored in the entry and fed to the Bloom filter, which
//!   uses its low and high halves); the bucket index is a second mix of the
//!   rotated hash, so bucket choice and Bloom bits are derived differently.
//! - Bloom filter per bucket ([`BloomFilters`], 4 probes), rebuilt from the
//!   surviving entries on every rewrite; a lookup or remove it rejects does
//!   no I/O.
//! - Expired entries are misses for [`BigHash::lookup`] (counted in
//!   `expired`) and stay on the device until FIFO pushes them out or the key
//!   is removed or replaced.
//! - Lookups take the bucket lock too: simple, and they never see a bucket
//!   half way through a rewrite.

use crate::error::Error;
use std::io;
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};

use super::bloom::BloomFilters;
use super::io::{AlignedBuf, BlockIo};

/// Bytes of the bucket header.
pub const BUCKET_HEADER_SIZE: usize = 24;
/// Bytes of the per-entry header (key hash, expiry, key and value lengths).
pub const ENTRY_HEADER_SIZE: usize = 18;
/// The bucket format marker.
const MAGIC: u32 = u32::from_le_bytes(*b"BHB1");
/// Bloom probes per key: about optimal for 64 bits and ~10 keys a bucket.
const BLOOM_HASHES: u32 = 4;
/// Most bucket locks.
const MAX_STRIPES: usize = 1024;

/// Engine settings (CacheLib's `navyBigHashBucketSize`,
/// `navyBloomFilterPerBucketSize`, `navyDataChecksum`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BigHashConfig {
    /// Bytes per bucket, a multiple of the device block size.
    pub bucket_size: u32,
    /// Bloom filter bytes per bucket; 0 = no Bloom filter.
    pub bloom_bytes_per_bucket: u32,
    /// Verify a CRC-32C of every bucket read.
    pub checksum: bool,
}

impl Default for BigHashConfig {
    fn default() -> Self {
        BigHashConfig {
            bucket_size: 4096,
            bloom_bytes_per_bucket: 8,
            checksum: true,
        }
    }
}

/// The outcome of [`BigHash::insert`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InsertResult {
    /// Stored; `evicted` older entries of the bucket were dropped for room.
    Inserted { evicted: u32 },
    /// Key plus value plus entry header exceed a bucket; nothing was done.
    TooLarge,
}

/// Counters since the engine started.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BigHashStats {
    /// Successful inserts (new keys and replacements).
    pub inserts: u64,
    /// Lookups, Bloom-rejected ones included.
    pub lookups: u64,
    /// Lookups that returned a value.
    pub hits: u64,
    /// Removes that found and removed the key.
    pub removes: u64,
    /// Entries dropped by FIFO eviction.
    pub evictions: u64,
    /// Lookups and removes answered by the Bloom filter without I/O.
    pub bloom_rejects: u64,
    /// Bucket reads that failed validation (treated as empty).
    pub checksum_errors: u64,
    /// Items stored now (approximate: entries of buckets found corrupt are
    /// not subtracted).
    pub items: u64,
    /// Key plus value bytes inserted.
    pub logical_bytes_written: u64,
    /// Bucket bytes written to the device.
    pub physical_bytes_written: u64,
    /// Lookups that found the key expired.
    pub expired: u64,
}

#[derive(Default)]
struct Counters {
    inserts: AtomicU64,
    lookups: AtomicU64,
    hits: AtomicU64,
    removes: AtomicU64,
    evictions: AtomicU64,
    bloom_rejects: AtomicU64,
    checksum_errors: AtomicU64,
    items: AtomicI64,
    logical_bytes_written: AtomicU64,
    physical_bytes_written: AtomicU64,
    expired: AtomicU64,
}

/// One parsed entry: where it sits in the bucket buffer and its fields.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Offset of the entry header in the bucket.
    start: usize,
    /// Entry bytes, header included.
    len: usize,
    key_hash: u64,
    expiry: u32,
    key_len: usize,
    value_len: usize,
}

impl Entry {
    fn key<'a>(&self, bucket: &'a [u8]) -> &'a [u8] {
        let k = self.start + ENTRY_HEADER_SIZE;
        &bucket[k..k + self.key_len]
    }
    fn value<'a>(&self, bucket: &'a [u8]) -> &'a [u8] {
        let v = self.start + ENTRY_HEADER_SIZE + self.key_len;
        &bucket[v..v + self.value_len]
    }
    fn matches(&self, bucket: &[u8], key_hash: u64, key: &[u8]) -> bool {
        self.key_hash == key_hash && self.key(bucket) == key
    }
}

/// The small-item engine. `Send + Sync`: share it behind an `Arc`.
pub struct BigHash {
    io: Arc<dyn BlockIo>,
    bucket_size: u32,
    num_buckets: u64,
    checksum: bool,
    /// Stamped in every bucket this instance writes.
    generation: u32,
    bloom: BloomFilters,
    locks: Box<[Mutex<()>]>,
    counters: Counters,
}

impl std::fmt::Debug for BigHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BigHash")
            .field("bucket_size", &self.bucket_size)
            .field("num_buckets", &self.num_buckets)
            .field("checksum", &self.checksum)
            .field("bloom", &self.bloom)
            .finish()
    }
}

impl BigHash {
    /// An empty engine over all of `io` (whatever the device holds is
    /// ignored). Fails if the bucket size is not a multiple of the block
    /// size, is too small for one entry, or the device is smaller than one
    /// bucket.
    pub fn new(io: Arc<dyn BlockIo>, cfg: &BigHashConfig) -> Result<BigHash, Error> {
        let block = io.block_size();
        let bs = cfg.bucket_size;
        if block == 0 {
            return Err(Error::Input("device block size is 0".into()));
        }
        if bs == 0 || !bs.is_multiple_of(block) {
            return Err(Error::Input(format!(
                "bigHash bucket size {bs} is not a multiple of the device block size {block}"
            )));
        }
        if (bs as usize) < BUCKET_HEADER_SIZE + ENTRY_HEADER_SIZE + 1 {
            return Err(Error::Input(format!(
                "bigHash bucket size {bs} is too small for an entry"
            )));
        }
        let num_buckets = io.size() / u64::from(bs);
        if num_buckets == 0 {
            return Err(Error::Input(format!(
                "bigHash device of {} bytes is smaller than one {bs}-byte bucket",
                io.size()
            )));
        }
        let num_filters = usize::try_from(num_buckets).map_err(|_| {
            Error::Host(format!(
                "bigHash: {num_buckets} buckets do not fit in memory"
            ))
        })?;
        let stripes = num_filters.min(MAX_STRIPES);
        Ok(BigHash {
            io,
            bucket_size: bs,
            num_buckets,
            checksum: cfg.checksum,
            generation: new_generation(),
            bloom: BloomFilters::new(
                num_filters,
                cfg.bloom_bytes_per_bucket as usize,
                BLOOM_HASHES,
            ),
            locks: (0..stripes).map(|_| Mutex::new(())).collect(),
            counters: Counters::default(),
        })
    }

    /// Largest `key.len() + value.len()` that fits a bucket (the bucket
    /// minus its header and one entry header).
    pub fn max_item_size(&self) -> usize {
        self.capacity() - ENTRY_HEADER_SIZE
    }

    /// Number of buckets.
    pub fn num_buckets(&self) -> u64 {
        self.num_buckets
    }

    /// Bytes per bucket.
    pub fn bucket_size(&self) -> u32 {
        self.bucket_size
    }

    /// DRAM used by the Bloom filters.
    pub fn bloom_memory_bytes(&self) -> usize {
        self.bloom.memory_bytes()
    }

    /// Stores `key` -> `value`, replacing any entry with the same key and
    /// evicting the bucket's oldest entries if needed. `expiry` is seconds
    /// since the epoch, 0 = never.
    pub fn insert(&self, key: &[u8], value: &[u8], expiry: u32) -> io::Result<InsertResult> {
        let need = ENTRY_HEADER_SIZE + key.len() + value.len();
        if key.len() > usize::from(u16::MAX) || need > self.capacity() {
            return Ok(InsertResult::TooLarge);
        }
        let h = key_hash(key);
        let b = self.bucket_of(h);
        let _guard = self.lock(b);
        let old = self.read_bucket(b)?;
        let entries = self.parse(b, &old).unwrap_or_default();

        // Drop an older version of the key, then the oldest entries until
        // the new one fits.
        let mut kept: Vec<Entry> = Vec::with_capacity(entries.len());
        let mut replaced = false;
        for e in entries {
            if e.matches(&old, h, key) {
                replaced = true;
            } else {
                kept.push(e);
            }
        }
        let mut used: usize = kept.iter().map(|e| e.len).sum();
        let mut first = 0;
        while used + need > self.capacity() {
            used -= kept[first].len;
            first += 1;
        }
        let survivors = &kept[first..];
        let evicted = first as u32;

        let mut new = self.compose(b, &old, survivors, Some((h, expiry, key, value)));
        self.write_bucket(b, &mut new)?;
        self.bloom.rebuild(
            b as usize,
            survivors
                .iter()
                .map(|e| e.key_hash)
                .chain(std::iter::once(h)),
        );

        let c = &self.counters;
        c.inserts.fetch_add(1, Relaxed);
        c.evictions.fetch_add(u64::from(evicted), Relaxed);
        c.items
            .fetch_add(i64::from(!replaced) - i64::from(evicted), Relaxed);
        c.logical_bytes_written
            .fetch_add((key.len() + value.len()) as u64, Relaxed);
        Ok(InsertResult::Inserted { evicted })
    }

    /// The value of `key`, or `None` if absent or expired at `now`
    /// (seconds since the epoch).
    pub fn lookup(&self, key: &[u8], now: u32) -> io::Result<Option<Vec<u8>>> {
        Ok(self.lookup_ex(key, now)?.map(|(v, _)| v))
    }

    /// [`BigHash::lookup`] with the entry's expiry (0: none).
    pub fn lookup_ex(&self, key: &[u8], now: u32) -> io::Result<Option<(Vec<u8>, u32)>> {
        let c = &self.counters;
        c.lookups.fetch_add(1, Relaxed);
        let h = key_hash(key);
        let b = self.bucket_of(h);
        if !self.bloom.may_contain(b as usize, h) {
            c.bloom_rejects.fetch_add(1, Relaxed);
            return Ok(None);
        }
        let _guard = self.lock(b);
        let buf = self.read_bucket(b)?;
        let Some(entries) = self.parse(b, &buf) else {
            return Ok(None);
        };
        let Some(e) = entries.iter().rev().find(|e| e.matches(&buf, h, key)) else {
            return Ok(None);
        };
        if e.expiry != 0 && e.expiry <= now {
            c.expired.fetch_add(1, Relaxed);
            return Ok(None);
        }
        c.hits.fetch_add(1, Relaxed);
        Ok(Some((e.value(&buf).to_vec(), e.expiry)))
    }

    /// Removes `key`; `true` if it was stored (expired or not).
    pub fn remove(&self, key: &[u8]) -> io::Result<bool> {
        let c = &self.counters;
        let h = key_hash(key);
        let b = self.bucket_of(h);
        if !self.bloom.may_contain(b as usize, h) {
            c.bloom_rejects.fetch_add(1, Relaxed);
            return Ok(false);
        }
        let _guard = self.lock(b);
        let old = self.read_bucket(b)?;
        let Some(entries) = self.parse(b, &old) else {
            return Ok(false);
        };
        let before = entries.len();
        let kept: Vec<Entry> = entries
            .into_iter()
            .filter(|e| !e.matches(&old, h, key))
            .collect();
        let removed = before - kept.len();
        if removed == 0 {
            return Ok(false);
        }
        let mut new = self.compose(b, &old, &kept, None);
        self.write_bucket(b, &mut new)?;
        self.bloom
            .rebuild(b as usize, kept.iter().map(|e| e.key_hash));
        c.removes.fetch_add(1, Relaxed);
        c.items.fetch_sub(removed as i64, Relaxed);
        Ok(true)
    }

    /// `false` if the Bloom filter rules `key` out (no I/O); `true` if it
    /// may be stored (always `true` without Bloom filters).
    pub fn could_exist(&self, key: &[u8]) -> bool {
        let h = key_hash(key);
        self.bloom.may_contain(self.bucket_of(h) as usize, h)
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> BigHashStats {
        let c = &self.counters;
        BigHashStats {
            inserts: c.inserts.load(Relaxed),
            lookups: c.lookups.load(Relaxed),
            hits: c.hits.load(Relaxed),
            removes: c.removes.load(Relaxed),
            evictions: c.evictions.load(Relaxed),
            bloom_rejects: c.bloom_rejects.load(Relaxed),
            checksum_errors: c.checksum_errors.load(Relaxed),
            items: c.items.load(Relaxed).max(0) as u64,
            logical_bytes_written: c.logical_bytes_written.load(Relaxed),
            physical_bytes_written: c.physical_bytes_written.load(Relaxed),
            expired: c.expired.load(Relaxed),
        }
    }

    /// Bytes available for entries in a bucket.
    fn capacity(&self) -> usize {
        self.bucket_size as usize - BUCKET_HEADER_SIZE
    }

    fn bucket_of(&self, key_hash: u64) -> u64 {
        fmix64(key_hash.rotate_left(32) ^ BUCKET_SALT) % self.num_buckets
    }

    fn lock(&self, bucket: u64) -> MutexGuard<'_, ()> {
        let stripe = (bucket % self.locks.len() as u64) as usize;
        // The lock guards no data of its own, so a poisoned one is fine.
        self.locks[stripe].lock().unwrap_or_else(|e| e.into_inner())
    }

    fn read_bucket(&self, bucket: u64) -> io::Result<AlignedBuf> {
        let mut buf = AlignedBuf::zeroed(self.bucket_size as usize);
        self.io
            .read_at(bucket * u64::from(self.bucket_size), &mut buf)?;
        Ok(buf)
    }

    /// Seals `buf` (checksum) and writes it as `bucket`.
    fn write_bucket(&self, bucket: u64, buf: &mut AlignedBuf) -> io::Result<()> {
        let used = get_u32(buf, 20) as usize;
        let crc = if self.checksum {
            crc32c(&buf[4..BUCKET_HEADER_SIZE + used])
        } else {
            0
        };
        buf[0..4].copy_from_slice(&crc.to_le_bytes());
        self.io
            .write_at(bucket * u64::from(self.bucket_size), buf)?;
        self.counters
            .physical_bytes_written
            .fetch_add(u64::from(self.bucket_size), Relaxed);
        Ok(())
    }

    /// A new bucket image: `keep` (entries of `old`, in order) then the
    /// optional new entry `(hash, expiry, key, value)`. The checksum is
    /// filled in by [`write_bucket`](Self::write_bucket).
    fn compose(
        &self,
        bucket: u64,
        old: &[u8],
        keep: &[Entry],
        add: Option<(u64, u32, &[u8], &[u8])>,
    ) -> AlignedBuf {
        let mut buf = AlignedBuf::zeroed(self.bucket_size as usize);
        let mut at = BUCKET_HEADER_SIZE;
        for e in keep {
            buf[at..at + e.len].copy_from_slice(&old[e.start..e.start + e.len]);
            at += e.len;
        }
        let mut count = keep.len();
        if let Some((h, expiry, key, value)) = add {
            buf[at..at + 8].copy_from_slice(&h.to_le_bytes());
            buf[at + 8..at + 12].copy_from_slice(&expiry.to_le_bytes());
            buf[at + 12..at + 14].copy_from_slice(&(key.len() as u16).to_le_bytes());
            buf[at + 14..at + 18].copy_from_slice(&(value.len() as u32).to_le_bytes());
            at += ENTRY_HEADER_SIZE;
            buf[at..at + key.len()].copy_from_slice(key);
            at += key.len();
            buf[at..at + value.len()].copy_from_slice(value);
            at += value.len();
            count += 1;
        }
        put_u32(&mut buf, 4, MAGIC);
        put_u32(&mut buf, 8, self.generation);
        put_u32(&mut buf, 12, bucket as u32);
        put_u32(&mut buf, 16, count as u32);
        put_u32(&mut buf, 20, (at - BUCKET_HEADER_SIZE) as u32);
        buf
    }

    /// The entries of a bucket image, oldest first. Never-written and
    /// other-generation buckets are empty; an invalid bucket is `None`,
    /// counted as a checksum error, and its Bloom filter cleared. Call with
    /// the bucket lock held.
    fn parse(&self, bucket: u64, buf: &[u8]) -> Option<Vec<Entry>> {
        match self.validate(bucket, buf) {
            Ok(entries) => Some(entries),
            Err(()) => {
                self.counters.checksum_errors.fetch_add(1, Relaxed);
                self.bloom.clear(bucket as usize);
                None
            }
        }
    }

    fn validate(&self, bucket: u64, buf: &[u8]) -> Result<Vec<Entry>, ()> {
        let header = &buf[..BUCKET_HEADER_SIZE];
        if header.iter().all(|&x| x == 0) {
            return Ok(Vec::new());
        }
        if get_u32(buf, 4) != MAGIC {
            return Err(());
        }
        let used = get_u32(buf, 20) as usize;
        if used > self.capacity() {
            return Err(());
        }
        let end = BUCKET_HEADER_SIZE + used;
        if self.checksum && get_u32(buf, 0) != crc32c(&buf[4..end]) {
            return Err(());
        }
        if get_u32(buf, 8) != self.generation {
            return Ok(Vec::new());
        }
        if get_u32(buf, 12) != bucket as u32 {
            return Err(());
        }
        let count = get_u32(buf, 16) as usize;
        let mut entries = Vec::with_capacity(count.min(used / ENTRY_HEADER_SIZE));
        let mut at = BUCKET_HEADER_SIZE;
        while at < end {
            if end - at < ENTRY_HEADER_SIZE {
                return Err(());
            }
            let key_len = usize::from(u16::from_le_bytes([buf[at + 12], buf[at + 13]]));
            let value_len = get_u32(buf, at + 14) as usize;
            let len = ENTRY_HEADER_SIZE + key_len + value_len;
            if len > end - at {
                return Err(());
            }
            entries.push(Entry {
                start: at,
                len,
                key_hash: u64::from_le_bytes(buf[at..at + 8].try_into().expect("8 bytes")),
                expiry: get_u32(buf, at + 8),
                key_len,
                value_len,
            });
            at += len;
        }
        if entries.len() != count {
            return Err(());
        }
        Ok(entries)
    }
}

fn get_u32(buf: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(buf[at..at + 4].try_into().expect("4 bytes"))
}

fn put_u32(buf: &mut [u8], at: usize, v: u32) {
    buf[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// A generation no other engine of this process shares (and unlikely to
/// match one of an earlier process): the clock mixed with a counter.
fn new_generation() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    // The clock part is fixed per process (first call), the counter keeps
    // the instances of this process apart.
    static BASE: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    let base = *BASE.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        (fmix64(nanos ^ u64::from(std::process::id())) >> 32) as u32
    });
    match base.wrapping_add(NEXT.fetch_add(1, Relaxed)) {
        0 => 1,
        g => g,
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
/// Seed of the key hash.
const KEY_SEED: u64 = 0x5bd1_e995_9e37_79b9;
/// Salt of the bucket-index derivation.
const BUCKET_SALT: u64 = 0xc2b2_ae3d_27d4_eb4f;

/// The 64-bit key hash: seeded FNV-1a, then a finalizer so every input bit
/// reaches every output bit.
pub fn key_hash(key: &[u8]) -> u64 {
    let mut h = FNV_OFFSET ^ KEY_SEED;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    fmix64(h ^ key.len() as u64)
}

/// A 64-bit avalanche finalizer (xor-shift / multiply rounds).
fn fmix64(mut z: u64) -> u64 {
    z ^= z >> 33;
    z = z.wrapping_mul(0xff51_afd7_ed55_8ccd);
    z ^= z >> 33;
    z = z.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    z ^ (z >> 33)
}

/// CRC-32C of `data` (hardware-accelerated where the CPU has it).
fn crc32c(data: &[u8]) -> u32 {
    ::crc32c::crc32c(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nvm::io::{MemIo, Window};

    /// Counts the I/O reaching a device.
    struct CountingIo {
        inner: Arc<dyn BlockIo>,
        reads: AtomicU64,
        writes: AtomicU64,
    }

    impl CountingIo {
        fn new(inner: Arc<dyn BlockIo>) -> Arc<CountingIo> {
            Arc::new(CountingIo {
                inner,
                reads: AtomicU64::new(0),
                writes: AtomicU64::new(0),
            })
        }
        fn reads(&self) -> u64 {
            self.reads.load(Relaxed)
        }
        fn writes(&self) -> u64 {
            self.writes.load(Relaxed)
        }
    }

    impl BlockIo for CountingIo {
        fn size(&self) -> u64 {
            self.inner.size()
        }
        fn block_size(&self) -> u32 {
            self.inner.block_size()
        }
        fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
            self.reads.fetch_add(1, Relaxed);
            self.inner.read_at(offset, buf)
        }
        fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
            self.writes.fetch_add(1, Relaxed);
            self.inner.write_at(offset, buf)
        }
    }

    fn cfg(bucket_size: u32, bloom: u32, checksum: bool) -> BigHashConfig {
        BigHashConfig {
            bucket_size,
            bloom_bytes_per_bucket: bloom,
            checksum,
        }
    }

    fn engine(buckets: u64, c: &BigHashConfig) -> (Arc<MemIo>, BigHash) {
        let mem = Arc::new(MemIo::new(buckets * u64::from(c.bucket_size), 512));
        let bh = BigHash::new(mem.clone(), c).unwrap();
        (mem, bh)
    }

    fn val(i: usize, len: usize) -> Vec<u8> {
        (0..len).map(|j| (i * 31 + j * 7) as u8).collect()
    }

    /// The bucket offset of `key` in the engine's address space.
    fn bucket_offset(bh: &BigHash, key: &[u8]) -> u64 {
        bh.bucket_of(key_hash(key)) * u64::from(bh.bucket_size)
    }

    #[test]
    fn crc32c_known_answer() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(b""), 0);
    }

    #[test]
    fn key_hash_spreads_keys() {
        assert_ne!(key_hash(b"a"), key_hash(b"a\0"));
        assert_ne!(key_hash(b""), key_hash(b"\0"));
        let (_m, bh) = engine(16, &BigHashConfig::default());
        let mut per_bucket = [0u32; 16];
        for i in 0..16_000 {
            per_bucket[bh.bucket_of(key_hash(format!("key:{i}").as_bytes())) as usize] += 1;
        }
        // 1000 expected per bucket; a fair hash stays well within +-15%.
        assert!(
            per_bucket.iter().all(|&n| (850..1150).contains(&n)),
            "{per_bucket:?}"
        );
    }

    #[test]
    fn config_errors() {
        let mem: Arc<dyn BlockIo> = Arc::new(MemIo::new(16384, 4096));
        let e = BigHash::new(mem.clone(), &cfg(2048, 8, true))
            .unwrap_err()
            .to_string();
        assert!(e.contains("multiple"), "{e}");
        let e = BigHash::new(mem.clone(), &cfg(0, 8, true))
            .unwrap_err()
            .to_string();
        assert!(e.contains("multiple"), "{e}");
        let e = BigHash::new(mem.clone(), &cfg(32768, 8, true))
            .unwrap_err()
            .to_string();
        assert!(e.contains("smaller than one"), "{e}");
        let bh = BigHash::new(mem, &cfg(8192, 8, true)).unwrap();
        assert_eq!(bh.num_buckets(), 2);
        assert_eq!(
            bh.max_item_size(),
            8192 - BUCKET_HEADER_SIZE - ENTRY_HEADER_SIZE
        );
        assert_eq!(bh.bloom_memory_bytes(), 16);
        fn send_sync<T: Send + Sync>() {}
        send_sync::<BigHash>();
    }

    #[test]
    fn round_trips_across_buckets() {
        let (_m, bh) = engine(64, &BigHashConfig::default());
        let n = 500;
        for i in 0..n {
            let r = bh
                .insert(format!("key-{i}").as_bytes(), &val(i, 20 + i % 13), 0)
                .unwrap();
            assert_eq!(r, InsertResult::Inserted { evicted: 0 });
        }
        let s = bh.stats();
        assert_eq!((s.inserts, s.items, s.evictions), (n as u64, n as u64, 0));
        let logical: u64 = (0..n)
            .map(|i| (format!("key-{i}").len() + 20 + i % 13) as u64)
            .sum();
        assert_eq!(s.logical_bytes_written, logical);
        assert_eq!(s.physical_bytes_written, n as u64 * 4096);
        for i in 0..n {
            let got = bh.lookup(format!("key-{i}").as_bytes(), 1).unwrap();
            assert_eq!(got, Some(val(i, 20 + i % 13)), "key-{i}");
        }
        // Replace every third key with a different-length value.
        for i in (0..n).step_by(3) {
            bh.insert(format!("key-{i}").as_bytes(), &val(i + 1000, 5), 0)
                .unwrap();
        }
        assert_eq!(bh.stats().items, n as u64, "replacements are not new items");
        // Remove every fifth key.
        for i in (0..n).step_by(5) {
            assert!(bh.remove(format!("key-{i}").as_bytes()).unwrap());
            assert!(!bh.remove(format!("key-{i}").as_bytes()).unwrap());
        }
        let removed = n.div_ceil(5);
        for i in 0..n {
            let got = bh.lookup(format!("key-{i}").as_bytes(), 1).unwrap();
            let want = if i % 5 == 0 {
                None
            } else if i % 3 == 0 {
                Some(val(i + 1000, 5))
            } else {
                Some(val(i, 20 + i % 13))
            };
            assert_eq!(got, want, "key-{i}");
        }
        assert_eq!(bh.lookup(b"never", 1).unwrap(), None);
        let s = bh.stats();
        assert_eq!(s.items, (n - removed) as u64);
        assert_eq!(s.removes, removed as u64);
        assert_eq!(s.hits, (n + n - removed) as u64);
        assert_eq!(s.lookups, (2 * n + 1) as u64);
        assert_eq!(s.evictions, 0);
        assert_eq!(s.checksum_errors, 0);
    }

    #[test]
    fn fifo_eviction_drops_exactly_the_oldest() {
        for buckets in [1u64, 2] {
            let (_m, bh) = engine(buckets, &BigHashConfig::default());
            // Keys that all hash to bucket 0.
            let keys: Vec<Vec<u8>> = (0..)
                .map(|i| format!("item-{i:04}").into_bytes())
                .filter(|k| bh.bucket_of(key_hash(k)) == 0)
                .take(40)
                .collect();
            let vlen = 200;
            let entry = ENTRY_HEADER_SIZE + keys[0].len() + vlen;
            let fit = (4096 - BUCKET_HEADER_SIZE) / entry;
            let mut total_evicted = 0;
            for (i, k) in keys.iter().enumerate() {
                let InsertResult::Inserted { evicted } = bh.insert(k, &val(i, vlen), 0).unwrap()
                else {
                    panic!("too large?");
                };
                assert_eq!(evicted, u32::from(i >= fit), "insert {i}");
                total_evicted += evicted as usize;
            }
            assert_eq!(total_evicted, keys.len() - fit);
            for (i, k) in keys.iter().enumerate() {
                let got = bh.lookup(k, 1).unwrap();
                if i < keys.len() - fit {
                    assert_eq!(got, None, "old item {i} should be evicted");
                } else {
                    assert_eq!(got, Some(val(i, vlen)), "new item {i} should remain");
                }
            }
            let s = bh.stats();
            assert_eq!(s.evictions, total_evicted as u64);
            assert_eq!(s.items, fit as u64);

            // One large item pushes out exactly as many of the oldest
            // survivors as it needs.
            let big = bh.max_item_size() / 2;
            let big_entry = ENTRY_HEADER_SIZE + keys[0].len() + big;
            let free = 4096 - BUCKET_HEADER_SIZE - fit * entry;
            let need_out = (big_entry - free).div_ceil(entry);
            let big_key = (0..)
                .map(|i| format!("BIG!-{i:04}").into_bytes())
                .find(|k| bh.bucket_of(key_hash(k)) == 0)
                .unwrap();
            let r = bh.insert(&big_key, &val(7, big), 0).unwrap();
            assert_eq!(
                r,
                InsertResult::Inserted {
                    evicted: need_out as u32
                }
            );
            let first_live = keys.len() - fit;
            for (i, k) in keys.iter().enumerate().skip(first_live) {
                let present = bh.lookup(k, 1).unwrap().is_some();
                assert_eq!(present, i >= first_live + need_out, "item {i}");
            }
            assert_eq!(bh.lookup(&big_key, 1).unwrap(), Some(val(7, big)));
            assert_eq!(bh.stats().evictions, (total_evicted + need_out) as u64);
        }
    }

    #[test]
    fn replacing_a_key_frees_its_space_first_and_makes_it_newest() {
        let (_m, bh) = engine(1, &BigHashConfig::default());
        let vlen = 1000;
        let keys: Vec<Vec<u8>> = (0..4).map(|i| format!("k{i}").into_bytes()).collect();
        // Four 1020-byte entries do not fit 4072 bytes; three do.
        for (i, k) in keys.iter().take(3).enumerate() {
            assert_eq!(
                bh.insert(k, &val(i, vlen), 0).unwrap(),
                InsertResult::Inserted { evicted: 0 }
            );
        }
        // Replacing k0 needs no eviction and moves k0 to the newest slot.
        assert_eq!(
            bh.insert(&keys[0], &val(9, vlen), 0).unwrap(),
            InsertResult::Inserted { evicted: 0 }
        );
        // So k3 evicts k1, the oldest now.
        assert_eq!(
            bh.insert(&keys[3], &val(3, vlen), 0).unwrap(),
            InsertResult::Inserted { evicted: 1 }
        );
        assert_eq!(bh.lookup(&keys[1], 1).unwrap(), None);
        assert_eq!(bh.lookup(&keys[0], 1).unwrap(), Some(val(9, vlen)));
        assert_eq!(bh.lookup(&keys[2], 1).unwrap(), Some(val(2, vlen)));
        assert_eq!(bh.lookup(&keys[3], 1).unwrap(), Some(val(3, vlen)));
        assert_eq!(bh.stats().items, 3);
    }

    #[test]
    fn too_large_items() {
        let mem: Arc<dyn BlockIo> = Arc::new(MemIo::new(8192, 4096));
        let counting = CountingIo::new(mem);
        let bh = BigHash::new(counting.clone(), &BigHashConfig::default()).unwrap();
        let max = bh.max_item_size();
        assert_eq!(
            bh.insert(b"k", &vec![1; 5000], 0).unwrap(),
            InsertResult::TooLarge
        );
        assert_eq!(
            bh.insert(b"k", &vec![1; max], 0).unwrap(),
            InsertResult::TooLarge
        );
        let long_key = vec![b'x'; usize::from(u16::MAX) + 1];
        assert_eq!(
            bh.insert(&long_key, b"", 0).unwrap(),
            InsertResult::TooLarge
        );
        assert_eq!((counting.reads(), counting.writes()), (0, 0), "no I/O");
        assert_eq!(bh.stats().inserts, 0);
        // Exactly max_item_size fits, evicting nothing in an empty bucket.
        assert_eq!(
            bh.insert(b"k", &vec![1; max - 1], 0).unwrap(),
            InsertResult::Inserted { evicted: 0 }
        );
        assert_eq!(bh.lookup(b"k", 0).unwrap(), Some(vec![1; max - 1]));
    }

    #[test]
    fn bloom_rejects_cost_no_io() {
        let mem: Arc<dyn BlockIo> = Arc::new(MemIo::new(4096, 4096));
        let counting = CountingIo::new(mem);
        let bh = BigHash::new(counting.clone(), &BigHashConfig::default()).unwrap();
        assert_eq!(bh.num_buckets(), 1);
        // Write the bucket, then empty it: written, valid, empty.
        bh.insert(b"a", b"1", 0).unwrap();
        assert!(bh.remove(b"a").unwrap());
        assert!(!bh.could_exist(b"a"));
        let (r0, w0) = (counting.reads(), counting.writes());
        assert_eq!(bh.lookup(b"never-inserted", 5).unwrap(), None);
        assert_eq!(bh.lookup(b"a", 5).unwrap(), None);
        assert!(!bh.remove(b"never-inserted").unwrap());
        assert_eq!((counting.reads(), counting.writes()), (r0, w0), "no I/O");
        assert_eq!(bh.stats().bloom_rejects, 3);

        // With entries in the bucket, a key its filter rules out also costs
        // nothing, while a stored key does read.
        for i in 0..10 {
            bh.insert(format!("in-{i}").as_bytes(), b"v", 0).unwrap();
        }
        let absent = (0..)
            .map(|i| format!("out-{i}").into_bytes())
            .find(|k| !bh.could_exist(k))
            .unwrap();
        let r0 = counting.reads();
        assert_eq!(bh.lookup(&absent, 5).unwrap(), None);
        assert_eq!(counting.reads(), r0);
        assert_eq!(bh.stats().bloom_rejects, 4);
        assert_eq!(bh.lookup(b"in-3", 5).unwrap(), Some(b"v".to_vec()));
        assert_eq!(counting.reads(), r0 + 1);
    }

    #[test]
    fn no_bloom_reads_every_time_and_zero_buckets_are_valid() {
        let mem: Arc<dyn BlockIo> = Arc::new(MemIo::new(4 * 4096, 4096));
        let counting = CountingIo::new(mem);
        let bh = BigHash::new(counting.clone(), &cfg(4096, 0, true)).unwrap();
        assert_eq!(bh.bloom_memory_bytes(), 0);
        assert!(bh.could_exist(b"anything"));
        for i in 0..20 {
            assert_eq!(bh.lookup(format!("x{i}").as_bytes(), 0).unwrap(), None);
        }
        assert_eq!(counting.reads(), 20);
        let s = bh.stats();
        assert_eq!(
            (s.checksum_errors, s.bloom_rejects),
            (0, 0),
            "all-zero buckets are empty"
        );
        bh.insert(b"x", b"y", 0).unwrap();
        assert_eq!(bh.lookup(b"x", 0).unwrap(), Some(b"y".to_vec()));
    }

    #[test]
    fn corruption_is_detected_with_checksums() {
        let (mem, bh) = engine(4, &BigHashConfig::default());
        for i in 0..8 {
            bh.insert(format!("c{i}").as_bytes(), &val(i, 50), 0)
                .unwrap();
        }
        let victim = b"c3";
        let off = bucket_offset(&bh, victim);
        // Flip one byte of the victim's value through the raw device.
        let mut raw = AlignedBuf::zeroed(4096);
        mem.read_at(off, &mut raw).unwrap();
        let bucket = off / 4096;
        let entries = bh.validate(bucket, &raw).expect("valid before the flip");
        let e = entries
            .iter()
            .find(|e| e.matches(&raw, key_hash(victim), victim))
            .expect("victim in its bucket");
        raw[e.start + ENTRY_HEADER_SIZE + e.key_len + 10] ^= 0x40;
        mem.write_at(off, &raw).unwrap();

        let items_before = bh.stats().items;
        assert_eq!(bh.lookup(victim, 0).unwrap(), None);
        let s = bh.stats();
        assert_eq!(s.checksum_errors, 1);
        // The bad bucket's filter is cleared: neighbours in it now miss
        // without reading it again.
        assert_eq!(bh.lookup(victim, 0).unwrap(), None);
        assert_eq!(bh.stats().checksum_errors, 1);
        assert_eq!(bh.stats().bloom_rejects, s.bloom_rejects + 1);
        // Keys in other buckets are unaffected.
        for i in 0..8 {
            let k = format!("c{i}");
            if bucket_offset(&bh, k.as_bytes()) != off {
                assert_eq!(bh.lookup(k.as_bytes(), 0).unwrap(), Some(val(i, 50)));
            }
        }
        // An insert rewrites the bucket clean.
        bh.insert(victim, b"fresh", 0).unwrap();
        assert_eq!(bh.lookup(victim, 0).unwrap(), Some(b"fresh".to_vec()));
        assert_eq!(
            bh.stats().checksum_errors,
            2,
            "the insert's read saw it too"
        );
        assert!(bh.stats().items <= items_before + 1);
    }

    #[test]
    fn checksum_off_still_validates_structure() {
        let (mem, bh) = engine(1, &cfg(4096, 8, false));
        bh.insert(b"key", b"value", 0).unwrap();
        let mut raw = AlignedBuf::zeroed(4096);
        mem.read_at(0, &mut raw).unwrap();
        assert_eq!(get_u32(&raw, 0), 0, "no checksum stored");
        // A flipped value byte goes unnoticed without checksums...
        let pos = BUCKET_HEADER_SIZE + ENTRY_HEADER_SIZE + 3;
        raw[pos] ^= 1;
        mem.write_at(0, &raw).unwrap();
        assert_eq!(bh.lookup(b"key", 0).unwrap(), Some(b"walue".to_vec()));
        assert_eq!(bh.stats().checksum_errors, 0);
        // ...but a broken length is caught, not followed.
        raw[BUCKET_HEADER_SIZE + 14] = 0xff;
        mem.write_at(0, &raw).unwrap();
        assert_eq!(bh.lookup(b"key", 0).unwrap(), None);
        assert_eq!(bh.stats().checksum_errors, 1);
    }

    #[test]
    fn a_new_engine_ignores_an_old_one_buckets() {
        let mem = Arc::new(MemIo::new(4 * 4096, 4096));
        let c = cfg(4096, 0, true);
        let first = BigHash::new(mem.clone(), &c).unwrap();
        first.insert(b"old", b"data", 0).unwrap();
        let second = BigHash::new(mem, &c).unwrap();
        assert_eq!(second.lookup(b"old", 0).unwrap(), None);
        assert_eq!(second.stats().checksum_errors, 0, "stale, not corrupt");
        second.insert(b"old", b"new", 0).unwrap();
        assert_eq!(second.lookup(b"old", 0).unwrap(), Some(b"new".to_vec()));
        assert_eq!(second.stats().items, 1);
    }

    #[test]
    fn expiry_is_honoured() {
        let (_m, bh) = engine(4, &BigHashConfig::default());
        bh.insert(b"ttl", b"v", 100).unwrap();
        bh.insert(b"forever", b"w", 0).unwrap();
        assert_eq!(bh.lookup(b"ttl", 50).unwrap(), Some(b"v".to_vec()));
        assert_eq!(bh.lookup(b"ttl", 99).unwrap(), Some(b"v".to_vec()));
        assert_eq!(bh.lookup(b"ttl", 100).unwrap(), None);
        assert_eq!(bh.lookup(b"ttl", 1000).unwrap(), None);
        assert_eq!(
            bh.lookup(b"forever", u32::MAX).unwrap(),
            Some(b"w".to_vec())
        );
        let s = bh.stats();
        assert_eq!((s.expired, s.hits), (2, 3));
        // Re-inserting with a later expiry revives it; removing an expired
        // entry still removes it.
        bh.insert(b"ttl", b"v2", 2000).unwrap();
        assert_eq!(bh.lookup(b"ttl", 1000).unwrap(), Some(b"v2".to_vec()));
        assert!(bh.remove(b"ttl").unwrap());
        assert_eq!(bh.stats().items, 1);
    }

    #[test]
    fn concurrent_inserts_and_removes_lose_nothing() {
        // 4 buckets; all 64 live entries together (~44 bytes each) fit even
        // one bucket, so nothing can be evicted whatever the hashing.
        let (_m, bh) = engine(4, &BigHashConfig::default());
        let bh = Arc::new(bh);
        let threads = 4;
        let per = 16;
        let key = |t: usize, i: usize| format!("t{t}-k{i:02}").into_bytes();
        let value = |t: usize, i: usize, round: usize| {
            format!("v{t}:{i}:{round}:").into_bytes().repeat(3)[..16].to_vec()
        };
        let rounds = 30;
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let bh = bh.clone();
                std::thread::spawn(move || {
                    for round in 0..rounds {
                        for i in 0..per {
                            bh.insert(&key(t, i), &value(t, i, round), 0).unwrap();
                        }
                        // Remove a rotating subset, except in the last round
                        // where the odd keys stay.
                        for i in 0..per {
                            let drop = if round == rounds - 1 {
                                i % 2 == 0
                            } else {
                                (i + round) % 3 == 0
                            };
                            if drop {
                                assert!(bh.remove(&key(t, i)).unwrap(), "t{t} k{i} r{round}");
                            }
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        for t in 0..threads {
            for i in 0..per {
                let got = bh.lookup(&key(t, i), 0).unwrap();
                if i % 2 == 0 {
                    assert_eq!(got, None, "t{t} k{i}");
                } else {
                    assert_eq!(got, Some(value(t, i, rounds - 1)), "t{t} k{i}");
                }
            }
        }
        let s = bh.stats();
        assert_eq!(s.evictions, 0);
        assert_eq!(s.checksum_errors, 0);
        assert_eq!(s.items, (threads * per / 2) as u64);
        assert_eq!(s.inserts, (threads * per * rounds) as u64);
    }

    #[test]
    fn works_in_a_window_at_an_offset() {
        let mem = Arc::new(MemIo::new(16 * 4096, 4096));
        let win = Arc::new(Window {
            dev: mem.clone(),
            base: 5 * 4096,
            len: 8 * 4096,
        });
        let bh = BigHash::new(win, &BigHashConfig::default()).unwrap();
        assert_eq!(bh.num_buckets(), 8);
        for i in 0..100 {
            bh.insert(format!("w{i}").as_bytes(), &val(i, 30), 0)
                .unwrap();
        }
        for i in 0..100 {
            assert_eq!(
                bh.lookup(format!("w{i}").as_bytes(), 0).unwrap(),
                Some(val(i, 30))
            );
        }
        let mut buf = AlignedBuf::zeroed(4096);
        for blk in 0..16u64 {
            mem.read_at(blk * 4096, &mut buf).unwrap();
            let zero = buf.iter().all(|&b| b == 0);
            if (5..13).contains(&blk) {
                assert!(!zero, "bucket block {blk} written");
                assert_eq!(get_u32(&buf, 4), MAGIC);
                assert_eq!(get_u32(&buf, 12), (blk - 5) as u32);
            } else {
                assert!(zero, "block {blk} outside the window untouched");
            }
        }
    }
}
