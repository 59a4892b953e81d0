//! Runs the i-cache pressure step alone, for `valgrind --tool=cachegrind`
//! (or `perf stat -e L1-icache-load-misses` on hosts with counters):
//!
//! `icache spread N` calls N randomly chosen generated functions (what a
//! request does); `icache single N` calls one function N times (a baseline
//! that fits in L1i). See bench/feedsim_icache.sh.
// An example program: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("spread");
    let calls: u64 = args
        .get(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_600_000);
    let x = match mode {
        "spread" => feedsim::icache::run(calls, 42),
        "single" => feedsim::icache::run_single(calls, 42),
        other => {
            eprintln!("mode must be spread or single, got {other}");
            std::process::exit(2);
        }
    };
    println!(
        "{mode} {calls} calls, footprint {} bytes, checksum {x}",
        feedsim::icache::footprint_bytes()
    );
}
