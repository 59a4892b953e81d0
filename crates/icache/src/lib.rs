//! Instruction-cache pressure: a random walk over thousands of distinct
//! generated functions (see `build.rs`). FeedSim's leaf runs it before it
//! ranks; Distbench's `PolluteInstructionCache` activity runs it too. One
//! crate, so the 3.8 MB of generated code is compiled once.

#[allow(clippy::unreadable_literal)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/icache_gen.rs"));
}

pub use generated::FUNCTIONS;

/// Calls `calls` generated functions chosen by a xorshift sequence seeded
/// with `seed`; returns a checksum so the work cannot be optimised away.
pub fn run(calls: u64, seed: u64) -> u64 {
    run_within(calls, seed, FUNCTIONS)
}

/// Like [`run`], but the calls go only to the first `functions` generated
/// functions (at least one, at most [`FUNCTIONS`]): a smaller spread.
pub fn run_within(calls: u64, seed: u64, functions: usize) -> u64 {
    let n = functions.clamp(1, FUNCTIONS) as u64;
    let mut s = seed | 1;
    let mut x = seed;
    for _ in 0..calls {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let f = generated::TABLE[(s % n) as usize];
        x = f(x ^ s);
    }
    x
}

/// The same call sequence length, but always to the first function: the
/// baseline that fits in L1i, for measuring what the spread costs.
pub fn run_single(calls: u64, seed: u64) -> u64 {
    let mut s = seed | 1;
    let mut x = seed;
    let f = std::hint::black_box(generated::TABLE[0]);
    for _ in 0..calls {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        x = f(x ^ s);
    }
    x
}

/// Approximate bytes of machine code the generated functions occupy: the
/// spread of their addresses.
pub fn footprint_bytes() -> usize {
    let addrs: Vec<usize> = generated::TABLE.iter().map(|f| *f as usize).collect();
    let lo = addrs.iter().min().copied().unwrap_or(0);
    let hi = addrs.iter().max().copied().unwrap_or(0);
    hi - lo
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_functions_spread_over_megabytes() {
        assert_eq!(FUNCTIONS, 16_384);
        let mut addrs: Vec<usize> = generated::TABLE.iter().map(|f| *f as usize).collect();
        addrs.sort();
        addrs.dedup();
        // No two table entries were merged into one body.
        assert_eq!(addrs.len(), FUNCTIONS);
        assert!(
            footprint_bytes() > 1 << 20,
            "footprint {}",
            footprint_bytes()
        );
    }

    #[test]
    fn deterministic_per_seed() {
        assert_eq!(run(10_000, 7), run(10_000, 7));
        assert_eq!(run(10_000, 7), run_within(10_000, 7, FUNCTIONS));
        assert_ne!(run_within(10_000, 7, 2), run(10_000, 7));
        assert_ne!(run(10_000, 7), run(10_000, 8));
    }
}
