//! Allocation classes: the slot sizes a slab can be carved into.
//!
//! As CacheLib: from `minAllocSize` each size is the previous one times
//! `allocFactor`, rounded up to 8 bytes, until `maxAllocSize`, which is
//! always the last class; or an explicit `allocSizes` list. An item takes
//! the smallest class that holds its key and value.

/// Slab size: memory is handed to allocation classes 4 MiB at a time.
pub const SLAB_SIZE: usize = 4 << 20;

/// The classes' slot sizes, increasing.
#[derive(Debug, Clone, PartialEq)]
pub struct AllocClasses {
    sizes: Vec<u32>,
}

impl AllocClasses {
    /// Geometric sizes from `min` by `factor` up to `max` (inclusive).
    pub fn geometric(min: u32, max: u32, factor: f64) -> Result<AllocClasses, String> {
        if min < 8 {
            return Err(format!("minAllocSize must be at least 8 bytes, got {min}"));
        }
        if max < min {
            return Err(format!(
                "maxAllocSize ({max}) is smaller than minAllocSize ({min})"
            ));
        }
        if max as usize > SLAB_SIZE {
            return Err(format!(
                "maxAllocSize ({max}) is larger than a slab ({SLAB_SIZE} bytes)"
            ));
        }
        if factor.is_nan() || factor <= 1.0 {
            return Err(format!("allocFactor must be greater than 1, got {factor}"));
        }
        let round8 = |x: f64| ((x.ceil() as u64).div_ceil(8) * 8) as u32;
        let mut sizes = vec![round8(f64::from(min))];
        loop {
            let last = *sizes.last().expect("at least one size");
            let next = round8(f64::from(last) * factor).max(last + 8);
            if next >= max {
                break;
            }
            sizes.push(next);
        }
        if *sizes.last().expect("at least one size") != max {
            sizes.push(max);
        }
        Self::explicit(sizes)
    }

    /// An explicit list (`allocSizes`): increasing, each within a slab.
    pub fn explicit(sizes: Vec<u32>) -> Result<AllocClasses, String> {
        if sizes.is_empty() {
            return Err("allocSizes is empty".into());
        }
        if sizes.len() > 255 {
            return Err(format!("{} allocation classes; at most 255", sizes.len()));
        }
        for w in sizes.windows(2) {
            if w[1] <= w[0] {
                return Err(format!("allocSizes must increase: {} then {}", w[0], w[1]));
            }
        }
        if sizes[0] < 8 {
            return Err(format!(
                "allocSizes: {} bytes is below the 8-byte minimum",
                sizes[0]
            ));
        }
        if *sizes.last().expect("non-empty") as usize > SLAB_SIZE {
            return Err(format!(
                "allocSizes: {} bytes does not fit in a {SLAB_SIZE}-byte slab",
                sizes.last().expect("non-empty")
            ));
        }
        Ok(AllocClasses { sizes })
    }

    /// The slot sizes.
    pub fn sizes(&self) -> &[u32] {
        &self.sizes
    }

    /// The class for an item of `bytes`, if any holds it.
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

    #[test]
    fn geometric_sizes_end_at_max() {
        let c = AllocClasses::geometric(64, 1 << 20, 1.5).unwrap();
        let s = c.sizes();
        assert_eq!(s[0], 64);
        assert_eq!(s[1], 96);
        assert_eq!(s[2], 144);
        assert_eq!(*s.last().unwrap(), 1 << 20);
        assert!(s.iter().all(|x| x % 8 == 0));
        assert!(s.windows(2).all(|w| w[1] > w[0]));
        assert_eq!(c.class_for(1), Some(0));
        assert_eq!(c.class_for(64), Some(0));
        assert_eq!(c.class_for(65), Some(1));
        assert_eq!(c.class_for(1 << 20), Some(s.len() - 1));
        assert_eq!(c.class_for((1 << 20) + 1), None);
        assert_eq!(c.slots_per_slab(0), SLAB_SIZE / 64);
    }

    #[test]
    fn bad_parameters_are_named() {
        assert!(
            AllocClasses::geometric(64, 32, 1.5)
                .unwrap_err()
                .contains("maxAllocSize")
        );
        assert!(
            AllocClasses::geometric(64, 1024, 1.0)
                .unwrap_err()
                .contains("allocFactor")
        );
        assert!(
            AllocClasses::geometric(64, 8 << 20, 1.5)
                .unwrap_err()
                .contains("slab")
        );
        assert!(
            AllocClasses::explicit(vec![128, 64])
                .unwrap_err()
                .contains("increase")
        );
        assert_eq!(
            AllocClasses::explicit(vec![100, 200])
                .unwrap()
                .class_for(150),
            Some(1)
        );
    }
}
