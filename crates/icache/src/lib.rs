//! Instruction-cache pressure, as FeedSim's `ICacheBuster`: 100,000
//! distinct empty functions (see `build.rs`), called one after another in a
//! shuffled order. FeedSim's leaf runs it before it ranks; Distbench's
//! `PolluteInstructionCache` activity and AdSim's `IBRun` use it too. One
//! crate, so the code is built once.
//!
//! Upstream gives each serving thread its own `ICacheBuster`: a vector of
//! pointers to all the methods (the code itself is shared), shuffled once,
//! then walked in order, one call per step, wrapping around, with the
//! position kept from one request to the next. Here each thread likewise
//! holds its own shuffled order, built on first use; the shuffle seed is
//! fixed, so checksums do not depend on the thread, and a request starts
//! at a position chosen by its seed rather than where the previous one
//! stopped (every request makes more than 16 rounds of the 100,000, so the
//! start does not change which code it touches).

#[allow(clippy::unreadable_literal)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/icache_gen.rs"));
}

pub use generated::FUNCTIONS;

/// A generated function: takes nothing, does nothing, returns.
type Method = unsafe extern "C" fn();

#[cfg(icache_asm)]
mod code {
    use super::{FUNCTIONS, Method};
    pub use crate::generated::SLOT;

    core::arch::global_asm!(include_str!(concat!(env!("OUT_DIR"), "/icache_gen.s")));

    unsafe extern "C" {
        /// The first of the generated functions; the others follow it at
        /// `SLOT`-byte steps.
        #[link_name = "rackbench_icache_base"]
        fn base();
    }

    /// Generated function `i` (`i < FUNCTIONS`).
    #[inline]
    pub fn method(i: usize) -> Method {
        debug_assert!(i < FUNCTIONS);
        let p = (base as Method as *const u8).wrapping_add(i * SLOT);
        // SAFETY: the assembly places `FUNCTIONS` slots of `SLOT` bytes
        // from `base`, each starting with a complete function (`ret`), so
        // for `i < FUNCTIONS` (every caller reduces its index modulo at
        // most FUNCTIONS) `p` is the entry of one; a data pointer and a
        // function pointer have the same size on the targets this module
        // is built for (x86_64, aarch64).
        unsafe { core::mem::transmute::<*const u8, Method>(p) }
    }
}

#[cfg(not(icache_asm))]
mod code {
    use super::Method;

    /// Generated function `i` (`i < FUNCTIONS`).
    #[inline]
    pub fn method(i: usize) -> Method {
        crate::generated::TABLE[i]
    }
}

/// Calls generated function `i`.
#[inline]
fn call(i: usize) {
    let f = code::method(i);
    // SAFETY: every generated function takes no arguments, touches no
    // memory and follows the C calling convention (a lone `ret` on the
    // assembly route, an empty Rust `extern "C"` function otherwise).
    unsafe { f() }
}

/// Mixes a called function's index into a checksum.
#[inline]
fn mix(x: u64, i: usize) -> u64 {
    (x ^ i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// The shuffled order of all functions (Fisher-Yates with a fixed
/// xorshift seed): upstream's per-thread `std::shuffle` of its methods.
fn shuffled() -> Box<[u32]> {
    let mut order: Vec<u32> = (0..FUNCTIONS as u32).collect();
    let mut s: u64 = 0x243F_6A88_85A3_08D3;
    for i in (1..order.len()).rev() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        order.swap(i, (s % (i as u64 + 1)) as usize);
    }
    order.into_boxed_slice()
}

thread_local! {
    /// This thread's order, as upstream's per-thread `ICacheBuster`.
    static ORDER: Box<[u32]> = shuffled();
}

/// Makes `calls` calls, walking this thread's shuffled order of all the
/// functions from a position chosen by `seed` and wrapping around (each
/// function once per `FUNCTIONS` calls); returns a checksum of the indices
/// called.
pub fn run(calls: u64, seed: u64) -> u64 {
    ORDER.with(|order| walk(order, calls, seed))
}

fn walk(order: &[u32], calls: u64, seed: u64) -> u64 {
    let n = order.len();
    let mut at = (seed % n as u64) as usize;
    let mut x = seed;
    for _ in 0..calls {
        let i = order[at] as usize;
        call(i);
        x = mix(x, i);
        at += 1;
        if at == n {
            at = 0;
        }
    }
    x
}

/// Calls `calls` functions drawn at random (xorshift seeded with `seed`)
/// from the first `functions` generated ones (at least one, at most
/// [`FUNCTIONS`]): a smaller spread.
pub fn run_within(calls: u64, seed: u64, functions: usize) -> u64 {
    let n = functions.clamp(1, FUNCTIONS) as u64;
    let mut s = seed | 1;
    let mut x = seed;
    for _ in 0..calls {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let i = (s % n) as usize;
        call(i);
        x = mix(x, i);
    }
    x
}

/// Calls `calls` functions drawn uniformly at random (xorshift seeded with
/// `seed`) from `functions` of the generated ones spread evenly over all
/// [`FUNCTIONS`] (function `k * FUNCTIONS / functions`), so each chosen
/// entry sits on its own cache line, as the entries of larger functions
/// would: Distbench's `PolluteInstructionCache` calls 10,000 functions of
/// its own this way.
pub fn run_spread(calls: u64, seed: u64, functions: usize) -> u64 {
    let n = functions.clamp(1, FUNCTIONS);
    let stride = FUNCTIONS / n;
    let mut s = seed | 1;
    let mut x = seed;
    for _ in 0..calls {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let i = (s % n as u64) as usize * stride;
        call(i);
        x = mix(x, i);
    }
    x
}

/// The same number of calls, always to the first function: the baseline
/// that fits in L1i, for measuring what the spread costs.
pub fn run_single(calls: u64, seed: u64) -> u64 {
    let mut x = seed;
    for _ in 0..calls {
        call(std::hint::black_box(0));
        x = mix(x, 0);
    }
    x
}

/// Bytes of address space the generated functions span, from the lowest
/// entry to the highest.
pub fn footprint_bytes() -> usize {
    let (mut lo, mut hi) = (usize::MAX, 0);
    for i in 0..FUNCTIONS {
        let a = code::method(i) as usize;
        lo = lo.min(a);
        hi = hi.max(a);
    }
    hi.saturating_sub(lo)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn upstream_count_of_distinct_functions() {
        // Upstream's kNumICacheBusterMethods.
        assert_eq!(FUNCTIONS, 100_000);
        let mut addrs: Vec<usize> = (0..FUNCTIONS).map(|i| code::method(i) as usize).collect();
        addrs.sort_unstable();
        addrs.dedup();
        // No two functions were merged into one body.
        assert_eq!(addrs.len(), FUNCTIONS);
        // 16 bytes or more per function: over 1.5 MB, far beyond L1i.
        assert!(
            footprint_bytes() >= (FUNCTIONS - 1) * 16,
            "{}",
            footprint_bytes()
        );
    }

    #[cfg(icache_asm)]
    #[test]
    fn each_slot_is_a_lone_return() {
        assert_eq!(footprint_bytes(), (FUNCTIONS - 1) * code::SLOT);
        for i in [0, 1, 2, FUNCTIONS / 2, FUNCTIONS - 1] {
            let p = code::method(i) as *const u8;
            // SAFETY: the slot is inside the crate's own text, which is
            // mapped readable; 4 bytes are within its 16-byte slot.
            let bytes = unsafe { std::ptr::read_unaligned(p.cast::<[u8; 4]>()) };
            #[cfg(target_arch = "x86_64")]
            assert_eq!(bytes[0], 0xC3, "slot {i}: {bytes:x?}");
            #[cfg(target_arch = "aarch64")]
            assert_eq!(
                u32::from_le_bytes(bytes),
                0xD65F_03C0,
                "slot {i}: {bytes:x?}"
            );
        }
    }

    #[test]
    fn order_is_a_permutation_walked_cyclically() {
        let order = shuffled();
        let mut sorted = order.to_vec();
        sorted.sort_unstable();
        assert!(sorted.iter().enumerate().all(|(i, &v)| v as usize == i));
        // Shuffled, not the identity.
        assert!(
            order
                .iter()
                .enumerate()
                .filter(|&(i, &v)| v as usize == i)
                .count()
                < 100
        );
        // The walk wraps: FUNCTIONS + 3 calls from position FUNCTIONS - 1
        // call order[FUNCTIONS - 1], then order[0..], ...
        let n = FUNCTIONS as u64;
        let mut x = n - 1;
        for k in 0..n + 3 {
            x = mix(x, order[((n - 1 + k) % n) as usize] as usize);
        }
        assert_eq!(run(n + 3, n - 1), x);
    }

    #[test]
    fn deterministic_per_seed() {
        assert_eq!(run(10_000, 7), run(10_000, 7));
        assert_ne!(run(10_000, 7), run(10_000, 8));
        assert_eq!(run(0, 7), 7);
        // Same on another thread: the order does not depend on the thread.
        let other = std::thread::spawn(|| run(10_000, 7)).join().unwrap();
        assert_eq!(other, run(10_000, 7));
        assert_eq!(run_within(10_000, 7, 50), run_within(10_000, 7, 50));
        assert_ne!(run_within(10_000, 7, 2), run_within(10_000, 7, 50));
        assert_eq!(run_within(10, 7, 1), run_single(10, 7));
    }
}
