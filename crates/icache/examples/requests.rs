//! Runs FeedSim's i-cache step for a list of requests, as the leaf does
//! (`icache::run(calls, seed)` once per request, on one thread), for
//! `bench/icache_cachegrind.py`:
//!
//! `requests SEED CALLS...` makes one request per CALLS value (none: only
//! the set-up, the baseline that the bench subtracts).
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut nums = Vec::with_capacity(args.len());
    for (k, a) in args.iter().enumerate() {
        match a.parse::<u64>() {
            Ok(v) => nums.push(v),
            Err(e) => {
                let what = if k == 0 { "SEED" } else { "CALLS" };
                eprintln!(
                    "argument {} ({what}): expected a whole number, got {a:?}: {e}",
                    k + 1
                );
                return ExitCode::from(2);
            }
        }
    }
    let Some((&seed, calls)) = nums.split_first() else {
        eprintln!("usage: requests SEED [CALLS...]");
        return ExitCode::from(2);
    };
    // Build this thread's order before the first request, as a serving
    // thread does at start-up.
    let mut x = icache::run(0, seed);
    let mut s = seed | 1;
    for &c in calls {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        x ^= icache::run(c, s);
    }
    println!(
        "{} requests, {} calls, checksum {x:#x}",
        calls.len(),
        calls.iter().sum::<u64>()
    );
    ExitCode::SUCCESS
}
