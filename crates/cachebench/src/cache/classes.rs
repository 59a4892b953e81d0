//! Allocation classes: the slot sizes a slab can be carved into, and the
//! bytes an item takes in its slot.
//!
//! As CacheLib: the sizes its allocator generates from `minAllocSize`,
//! `allocFactor` and `maxAllocSize` (with fragmentation reduced, as
//! CacheBench asks for), or an explicit `allocSizes` list. An item takes
//! the smallest class that holds it with CacheLib's item header (see
//! [`item_size`]), so a slab holds as many items as CacheLib's would.

use crate::error::Error;

/// Slab size: memory is handed to allocation classes 4 MiB at a time.
pub const SLAB_SIZE: usize = 4 << 20;

/// Alignment of generated sizes (CacheLib's `MemoryAllocator::kAlignment`,
/// the size of a pointer).
const ALIGNMENT: u32 = 8;

/// At most this many classes per pool (CacheLib's `kMaxClasses`).
pub const MAX_CLASSES: usize = 128;

/// The header CacheLib keeps in front of every item in its slot
/// (`sizeof(CacheItem)` of the LRU and 2Q allocators CacheBench builds:
/// the hash-chain hook (4), the LRU hook (two 4-byte compressed pointers
/// and an update time, 12), the reference count and flags (4), creation
/// and expiry times (4 + 4) and the key and value sizes (4)).
pub const ITEM_HEADER: usize = 32;

/// The fields CacheBench's `CacheValue` puts at the start of every value
/// (three 64-bit counters for its checks): no value is stored smaller.
pub const MIN_VALUE: usize = 24;

/// Bytes an item with a key of `key` bytes and a value of `value` bytes
/// takes in its slot, as CacheLib's `Item::getRequiredSize` with
/// CacheBench's `CacheValue::getSize`: the header, the key (plus 4 bytes for
/// a key over 255 bytes) and the value, at least [`MIN_VALUE`].
pub fn item_size(key: usize, value: usize) -> usize {
    ITEM_HEADER + key + if key > 255 { 4 } else { 0 } + value.max(MIN_VALUE)
}

/// Bytes a chained item of a `value`-byte value takes (CacheLib's
/// `ChainedItem::getRequiredSize`): the header, the parent's 4-byte
/// compressed pointer in place of a key, the 4-byte chain hook and the
/// value.
pub fn chained_item_size(value: usize) -> usize {
    ITEM_HEADER + 4 + 4 + value.max(MIN_VALUE)
}

/// The classes' slot sizes, increasing.
#[derive(Debug, Clone, PartialEq)]
pub struct AllocClasses {
    sizes: Vec<u32>,
}

/// `size` rounded up to the alignment.
fn align_up(size: u32) -> u32 {
    size.div_ceil(ALIGNMENT).saturating_mul(ALIGNMENT)
}

impl AllocClasses {
    /// The sizes CacheLib's `MemoryAllocator::generateAllocSizes(factor,
    /// max, min, reduceFragmentation = true)` makes, as CacheBench calls it:
    /// from `min`, each next size is the previous one grown by `factor`
    /// (aligned up to 8 bytes) until a slab holds fewer slots of it, then
    /// raised to the largest aligned size with that many slots per slab;
    /// sizes stop below `max` (or when a slab would hold a single slot),
    /// and `max`, aligned up, is always the last class.
    pub fn geometric(min: u32, max: u32, factor: f64) -> Result<AllocClasses, Error> {
        if min < 8 {
            return Err(Error::Input(format!(
                "minAllocSize must be at least 8 bytes, got {min}"
            )));
        }
        if max as usize > SLAB_SIZE {
            return Err(Error::Input(format!(
                "maxAllocSize ({max}) is larger than a slab ({SLAB_SIZE} bytes)"
            )));
        }
        if factor.is_nan() || factor <= 1.0 {
            return Err(Error::Input(format!(
                "allocFactor must be greater than 1, got {factor}"
            )));
        }
        let slab = SLAB_SIZE as u32;
        // The next size: grown until the slots per slab change, then the
        // largest aligned size with as many slots.
        let next = |prev: u32| -> Result<u32, Error> {
            let mut size = prev;
            loop {
                let before = size;
                size = align_up((f64::from(size) * factor) as u32);
                if size == before {
                    return Err(Error::Input(format!(
                        "allocFactor {factor} does not grow the allocation size {size} \
                         (CacheLib refuses it too): expected a larger allocFactor"
                    )));
                }
                if size > slab {
                    return Ok(size);
                }
                if slab / size != slab / prev {
                    break;
                }
            }
            let per_slab = slab / size;
            let widest = slab / per_slab;
            Ok(widest - widest % ALIGNMENT)
        };
        let mut sizes = Vec::new();
        let mut size = min;
        while size < max {
            if slab / size <= 1 {
                break;
            }
            sizes.push(size);
            size = next(size)?;
        }
        let last = align_up(max);
        sizes.retain(|&s| s < last);
        sizes.push(last);
        Self::explicit(sizes)
    }

    /// An explicit list (`allocSizes`), taken as a set (sorted, duplicates
    /// dropped), as CacheLib; each within a slab.
    pub fn explicit(mut sizes: Vec<u32>) -> Result<AllocClasses, Error> {
        sizes.sort_unstable();
        sizes.dedup();
        if sizes.is_empty() {
            return Err(Error::Input("allocSizes is empty".into()));
        }
        if sizes.len() > MAX_CLASSES {
            return Err(Error::Input(format!(
                "{} allocation classes; at most {MAX_CLASSES} (as CacheLib): expected fewer allocSizes \
                 or a larger allocFactor",
                sizes.len()
            )));
        }
        if sizes[0] < 8 {
            return Err(Error::Input(format!(
                "allocSizes: {} bytes is below the 8-byte minimum",
                sizes[0]
            )));
        }
        if let Some(&last) = sizes.last().filter(|&&l| l as usize > SLAB_SIZE) {
            return Err(Error::Input(format!(
                "allocSizes: {last} bytes does not fit in a {SLAB_SIZE}-byte slab"
            )));
        }
        Ok(AllocClasses { sizes })
    }

    /// The slot sizes.
    pub fn sizes(&self) -> &[u32] {
        &self.sizes
    }

    /// The class for an item of `bytes` (see [`item_size`]), if any holds
    /// it.
    pub fn class_for(&self, bytes: usize) -> Option<usize> {
        let i = self.sizes.partition_point(|&s| (s as usize) < bytes);
        (i < self.sizes.len()).then_some(i)
    }

    /// Slots of class `c` in one slab.
    pub fn slots_per_slab(&self, c: usize) -> usize {
        SLAB_SIZE / self.sizes[c] as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CacheBench's default classes (allocFactor 1.5 from 64 bytes to
    /// 1 MiB), as CacheLib's generateAllocSizes(1.5, 1 MiB, 64, true)
    /// makes them. By hand: 64 x 1.5 = 96, a slab holds 4,194,304 / 96 =
    /// 43,690 of them, and the widest size with 43,690 per slab is 96.0002
    /// -> 96; the same holds up to 12,784. Then 12,784 x 1.5 = 19,176: 218
    /// per slab, widest 19,239.9 -> 19,232 (a plain geometric series keeps
    /// 19,176); ...; 381,296 x 1.5 = 571,944: 7 per slab, widest 599,186.3
    /// -> 599,184; 599,184 x 1.5 widens to 1 MiB (4 per slab), which is
    /// maxAllocSize, the last class.
    /// 15 of the 24 sizes are the plain series' (which had 25).
    #[test]
    fn default_sizes_are_cachelibs() {
        let c = AllocClasses::geometric(64, 1 << 20, 1.5).unwrap();
        assert_eq!(
            c.sizes(),
            [
                64, 96, 144, 216, 328, 496, 744, 1120, 1680, 2520, 3784, 5680, 8520, 12784, 19232,
                28920, 43688, 65536, 99864, 155344, 233016, 381296, 599184, 1048576
            ]
        );
        let s = c.sizes();
        assert!(s.iter().all(|x| x % 8 == 0));
        assert!(s.windows(2).all(|w| w[1] > w[0]));
        // Every generated size is the widest with its slots per slab.
        for &x in &s[..s.len() - 1] {
            let per = SLAB_SIZE as u32 / x;
            assert!(SLAB_SIZE as u32 / (x + 8) < per, "{x} could be wider");
        }
        assert_eq!(c.class_for(1), Some(0));
        assert_eq!(c.class_for(64), Some(0));
        assert_eq!(c.class_for(65), Some(1));
        assert_eq!(c.class_for(1 << 20), Some(s.len() - 1));
        assert_eq!(c.class_for((1 << 20) + 1), None);
        assert_eq!(c.slots_per_slab(0), SLAB_SIZE / 64);
    }

    #[test]
    fn item_sizes_count_cachelibs_header() {
        // 32-byte header + key + value (at least CacheValue's 24 bytes).
        assert_eq!(item_size(10, 100), 142);
        assert_eq!(item_size(10, 1), 66);
        assert_eq!(item_size(256, 100), 392);
        assert_eq!(chained_item_size(100), 140);
        // So a 10-byte key and a 30-byte value no longer fit in 64 bytes.
        let c = AllocClasses::geometric(64, 1 << 20, 1.5).unwrap();
        assert_eq!(c.class_for(item_size(10, 30)), Some(1));
    }

    #[test]
    fn bad_parameters_are_named() {
        // As CacheLib: max below min gives the one class max.
        assert_eq!(AllocClasses::geometric(64, 32, 1.5).unwrap().sizes(), [32]);
        assert_eq!(
            AllocClasses::geometric(64, 1000, 1.5)
                .unwrap()
                .sizes()
                .last(),
            Some(&1000)
        );
        assert!(
            AllocClasses::geometric(64, 1024, 1.0)
                .unwrap_err()
                .to_string()
                .contains("allocFactor")
        );
        assert!(
            AllocClasses::geometric(64, 1 << 20, 1.01)
                .unwrap_err()
                .to_string()
                .contains("does not grow")
        );
        assert!(
            AllocClasses::geometric(64, 8 << 20, 1.5)
                .unwrap_err()
                .to_string()
                .contains("slab")
        );
        // allocSizes is a set, as upstream's.
        assert_eq!(
            AllocClasses::explicit(vec![128, 64, 128]).unwrap().sizes(),
            [64, 128]
        );
        assert_eq!(
            AllocClasses::explicit(vec![100, 200])
                .unwrap()
                .class_for(150),
            Some(1)
        );
        assert!(
            AllocClasses::explicit((1..=200).map(|i| i * 64).collect())
                .unwrap_err()
                .to_string()
                .contains("at most 128")
        );
    }
}
