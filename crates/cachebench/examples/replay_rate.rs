//! KV trace replay rate: lines per second parsed, and requests per second
//! replayed against the DRAM cache with 2 threads:
//! `cargo run --release -p cachebench --example replay_rate -- [LINES]`.
//!
//! The trace is synthetic but in CacheLib's kvcache CSV layout (the columns
//! of `trace_replay/kvcache/kv_traces_1.csv`: op_time, key, key_size, op,
//! op_count, size, cache_hits, ttl, usecase, sub_usecase): LINES lines
//! (default 2,000,000) over 200,000 keys with a skewed popularity, 80%
//! GET, 15% SET, 5% DELETE, values of 10 B to 4 KB. Upstream's CSV replay
//! is quoted at about 1.6 M ops/s.
// An example program: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

use cachebench::cache::{AllocClasses, Cache, DramCache, DramConfig, Policy, Refresh};
use cachebench::config::Serialization;
use cachebench::replay::{ReplayOptions, TraceReader, TraceSpec, load};
use cachebench::stressor::{Options, Progress, run_replay, run_replay_stream};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::io::Write;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

fn main() {
    let lines: u64 = std::env::args()
        .nth(1)
        .map_or(2_000_000, |s| s.parse().expect("LINES"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.csv");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        writeln!(
            f,
            "op_time,key,key_size,op,op_count,size,cache_hits,ttl,usecase,sub_usecase"
        )
        .unwrap();
        let mut rng = SmallRng::seed_from_u64(1);
        for i in 0..lines {
            // Skewed: a fifth of the keys get most requests.
            let k: u64 = if rng.random_bool(0.8) {
                rng.random_range(0..40_000)
            } else {
                rng.random_range(0..200_000)
            };
            let op = match rng.random_range(0..100) {
                0..80 => "GET",
                80..95 => "SET",
                _ => "DELETE",
            };
            let size = rng.random_range(10..4000);
            writeln!(
                f,
                "{},{:016x},{},{op},1,{size},0,0,366387042,3003229276",
                604_038_471 + i / 1000,
                k.wrapping_mul(0x9e37_79b9_7f4a_7c15),
                16 + k % 48
            )
            .unwrap();
        }
    }
    let t0 = Instant::now();
    let trace = load(
        &[&path],
        &ReplayOptions {
            threads: 2,
            amp_factor: 1,
            repeat_op_count: false,
            fast_forward: 0,
        },
    )
    .unwrap();
    let parse = t0.elapsed().as_secs_f64();
    assert_eq!(trace.parse_errors, 0);
    println!(
        "parsed_lines_per_sec {:.0}  ({} lines in {parse:.2} s)",
        trace.lines as f64 / parse,
        trace.lines
    );
    let cache = Cache::dram_only(
        DramCache::new(&DramConfig {
            size_bytes: 256 << 20,
            pool_sizes: vec![1.0],
            classes: AllocClasses::geometric(64, 1 << 20, 1.25).unwrap(),
            policy: Policy::Lru { ip_spec: 0 },
            refresh: Refresh::default(),
            ht_bucket_power: 20,
        })
        .unwrap(),
    );
    let opts = Options {
        threads: 2,
        ops_per_thread: u64::MAX,
        lookaside: true,
        seed: 1,
        ..Options::default()
    };
    let t1 = Instant::now();
    let s = run_replay(
        &cache,
        &trace,
        &opts,
        false,
        &AtomicBool::new(false),
        &Progress::default(),
    );
    let replay = t1.elapsed().as_secs_f64();
    println!(
        "replayed_ops_per_sec {:.0}  ({} ops in {replay:.2} s, hit ratio {:.1}%)",
        s.throughput.ops as f64 / replay,
        s.throughput.ops,
        100.0 * s.cache.hits as f64 / s.cache.gets.max(1) as f64
    );
    println!(
        "end_to_end_lines_per_sec {:.0}",
        trace.lines as f64 / (parse + replay)
    );
    // What the command does: the trace streamed from the file by a reader
    // thread into the threads' bounded queues, replayed as it is read.
    let cache = Cache::dram_only(
        DramCache::new(&DramConfig {
            size_bytes: 256 << 20,
            pool_sizes: vec![1.0],
            classes: AllocClasses::geometric(64, 1 << 20, 1.25).unwrap(),
            policy: Policy::Lru { ip_spec: 0 },
            refresh: Refresh::default(),
            ht_bucket_power: 20,
        })
        .unwrap(),
    );
    let reader = TraceReader::new(TraceSpec {
        files: vec![path.clone()],
        honour_op_count: false,
        fast_forward: 0,
        repeat: false,
        timestamp_factor: 1000,
    })
    .unwrap();
    let t2 = Instant::now();
    let (s, counts) = run_replay_stream(
        &cache,
        reader,
        1,
        Serialization::Strict,
        &opts,
        &AtomicBool::new(false),
        &Progress::default(),
    );
    let streamed = t2.elapsed().as_secs_f64();
    assert_eq!(counts.samples, trace.lines);
    println!(
        "streamed_ops_per_sec {:.0}  ({} ops read and replayed in {streamed:.2} s)",
        s.throughput.ops as f64 / streamed,
        s.throughput.ops
    );
}
