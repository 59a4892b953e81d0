//! hashd's anonymous memory: one area shared by all requests. Pages are
//! filled with random data the first time they are touched (a page whose
//! first word is zero is new), so the resident size follows what requests
//! reach. The area is reserved once at its largest size; shrinking it
//! returns the dropped pages to the kernel.
//!
//! Requests touch pages concurrently, so every access goes through relaxed
//! atomic words: no data race, and on x86 the same loads and stores as
//! plain memory.

use rand::Rng;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

const PAGE: usize = 4096;
const WORDS: usize = PAGE / 8;

pub struct AnonArea {
    base: *mut u8,
    max: usize,
    size: AtomicUsize,
    comp: f64,
}

// SAFETY: the mapping is only accessed through atomics.
unsafe impl Send for AnonArea {}
// SAFETY: as for Send: every access to the mapping is atomic.
unsafe impl Sync for AnonArea {}

impl AnonArea {
    /// Reserves `max` bytes (rounded up to pages, at least one) of which
    /// `size` are in use.
    pub fn new(max: usize, size: usize, comp: f64) -> Result<AnonArea, crate::Error> {
        let max = max.max(PAGE).div_ceil(PAGE) * PAGE;
        // SAFETY: an anonymous private mapping; checked below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                max,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(crate::Error::Host(format!(
                "cannot reserve {max} bytes of anonymous memory: {}",
                std::io::Error::last_os_error()
            )));
        }
        let a = AnonArea {
            base: base.cast(),
            max,
            size: AtomicUsize::new(0),
            comp,
        };
        a.resize(size);
        Ok(a)
    }

    /// Bytes in use.
    pub fn size(&self) -> usize {
        self.size.load(Ordering::Relaxed)
    }

    /// Changes the bytes in use (capped at the reservation); pages beyond a
    /// smaller size are given back.
    pub fn resize(&self, size: usize) {
        let size = (size.div_ceil(PAGE) * PAGE).clamp(PAGE, self.max);
        let old = self.size.swap(size, Ordering::Relaxed);
        if size < old {
            // SAFETY: a page-aligned range inside the mapping.
            unsafe {
                libc::madvise(self.base.add(size).cast(), old - size, libc::MADV_DONTNEED);
            }
        }
    }

    fn words(&self, page: usize) -> &[AtomicU64] {
        assert!((page + 1) * PAGE <= self.max);
        // SAFETY: inside the mapping, 8-byte aligned; AtomicU64 has u64's
        // layout and all accesses are atomic.
        unsafe { std::slice::from_raw_parts(self.base.add(page * PAGE).cast(), WORDS) }
    }

    /// Touches page `page`: fills it when new, bumps its first word when
    /// `write`, and appends its bytes to `out`.
    pub fn touch<R: Rng>(&self, page: usize, write: bool, out: &mut Vec<u8>, rng: &mut R) {
        let w = self.words(page);
        if w[0].load(Ordering::Relaxed) == 0 {
            // As the test files: per 512-byte block, random words first.
            let per_block = ((64.0 * (1.0 - self.comp)).floor() as usize).min(64);
            for (i, word) in w.iter().enumerate() {
                let v = if i % 64 < per_block || i == 0 {
                    rng.random::<u64>() | u64::from(i == 0)
                } else {
                    0
                };
                word.store(v, Ordering::Relaxed);
            }
        }
        if write {
            let v = w[0].load(Ordering::Relaxed).wrapping_add(1).max(1);
            w[0].store(v, Ordering::Relaxed);
        }
        out.reserve(PAGE);
        for word in w {
            out.extend_from_slice(&word.load(Ordering::Relaxed).to_ne_bytes());
        }
    }
}

impl Drop for AnonArea {
    fn drop(&mut self) {
        // SAFETY: the mapping made in new.
        unsafe {
            libc::munmap(self.base.cast(), self.max);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn pages_fill_on_first_touch_and_writes_bump_them() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
        let a = AnonArea::new(1 << 20, 64 << 10, 0.0).unwrap();
        assert_eq!(a.size(), 64 << 10);
        let mut out = Vec::new();
        a.touch(3, false, &mut out, &mut rng);
        assert_eq!(out.len(), 4096);
        assert!(out.iter().filter(|&&b| b == 0).count() < 100, "random data");
        let first = out.clone();
        out.clear();
        a.touch(3, true, &mut out, &mut rng);
        assert_eq!(&out[8..], &first[8..], "filled once");
        let w = |b: &[u8]| u64::from_ne_bytes(b[..8].try_into().unwrap());
        assert_eq!(w(&out), w(&first).wrapping_add(1).max(1));
        // Shrinking gives the pages back: they read as new.
        a.resize(4096);
        a.resize(64 << 10);
        out.clear();
        a.touch(3, false, &mut out, &mut rng);
        assert_ne!(&out[8..], &first[8..]);
        // Compressible: half the words zero.
        let c = AnonArea::new(1 << 16, 1 << 16, 0.5).unwrap();
        out.clear();
        c.touch(0, false, &mut out, &mut rng);
        let zeros = out.chunks(8).filter(|w| w.iter().all(|&b| b == 0)).count();
        assert!((250..=262).contains(&zeros), "{zeros}");
    }
}
