//! DRAM throughput side by side: rackbench's cache engine and moka (an
//! established concurrent Rust cache), fed the same operation stream by the
//! same threads: `cargo run --release -p cachebench --example vs_moka`.
//!
//! The workload is the built-in `dram_simple` config (simple_test's key and
//! value mix, 80% sets, 15% gets, 5% deletes, 512 MB), with 2 threads. moka
//! gets the same byte budget through a weigher (key + value bytes). Each
//! engine runs the stream `--rounds` times, alternating; the medians are
//! printed, then the ratio, then where our cache's memory went per item.
// An example program: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

use cachebench::cache::DramCache;
use cachebench::command_support::{dram_config_of, spec_of};
use cachebench::generator::{Generator, Op};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use std::sync::Arc;
use std::time::Instant;

const THREADS: usize = 2;
const OPS_PER_THREAD: u64 = 1_000_000;

fn run_ours(cache: &DramCache, g: &Generator, value: &[u8], pools: usize) -> f64 {
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(t as u64);
                let mut buf = Vec::new();
                for _ in 0..OPS_PER_THREAD {
                    let r = g.next(&mut rng);
                    let key = g.key(r.key, &mut buf);
                    match r.op {
                        Op::Get => {
                            std::hint::black_box(cache.get(key, None));
                        }
                        Op::Del => {
                            cache.remove(key);
                        }
                        _ => {
                            let _ = cache.set(
                                r.pool.min(pools - 1),
                                key,
                                &value[..r.value_size as usize],
                                0,
                            );
                        }
                    }
                }
            });
        }
    });
    (THREADS as u64 * OPS_PER_THREAD) as f64 / t0.elapsed().as_secs_f64()
}

fn run_moka(g: &Generator, value: &Arc<[u8]>, bytes: u64) -> f64 {
    let cache: moka::sync::Cache<Vec<u8>, Arc<[u8]>> = moka::sync::Cache::builder()
        .max_capacity(bytes)
        .weigher(|k: &Vec<u8>, v: &Arc<[u8]>| (k.len() + v.len()).min(u32::MAX as usize) as u32)
        .build();
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let cache = cache.clone();
            s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(t as u64);
                let mut buf = Vec::new();
                for _ in 0..OPS_PER_THREAD {
                    let r = g.next(&mut rng);
                    let key = g.key(r.key, &mut buf);
                    match r.op {
                        Op::Get => {
                            std::hint::black_box(cache.get(key));
                        }
                        Op::Del => {
                            cache.invalidate(key);
                        }
                        _ => {
                            // A value of the drawn size, as ours copies one.
                            let v: Arc<[u8]> = Arc::from(&value[..r.value_size as usize]);
                            cache.insert(key.to_vec(), v);
                        }
                    }
                }
            });
        }
    });
    (THREADS as u64 * OPS_PER_THREAD) as f64 / t0.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = std::env::args()
        .skip_while(|a| a != "--rounds")
        .nth(1)
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let loaded = cachebench::config::load(std::path::Path::new("builtin:dram_simple"), true)
        .expect("built-in config");
    let cfg = &loaded.instances[0];
    let dram = dram_config_of(cfg).expect("cache config");
    let spec = spec_of(cfg).expect("workload");
    let g = Generator::new(&spec, 1).expect("generator");
    let value: Arc<[u8]> = (0..g.max_value_size())
        .map(|i| (i % 251) as u8)
        .collect::<Vec<u8>>()
        .into();
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    let mut footprint = None;
    let mut set_success = Vec::new();
    for _ in 0..rounds {
        let cache = DramCache::new(&dram).expect("cache");
        ours.push(run_ours(&cache, &g, &value, dram.pool_sizes.len()));
        footprint = Some(cache.footprint());
        let s = cache.stats();
        let (tried, stored) = s.pools.iter().fold((0, 0), |(t, o), p| {
            (t + p.alloc_attempts, o + p.alloc_successes)
        });
        set_success.push(100.0 * stored as f64 / tried.max(1) as f64);
        drop(cache);
        theirs.push(run_moka(&g, &value, dram.size_bytes));
    }
    let (o, t) = (median(ours.clone()), median(theirs.clone()));
    println!("rackbench DRAM cache: {o:.0} ops/s (runs {ours:.0?})");
    println!("moka::sync::Cache:    {t:.0} ops/s (runs {theirs:.0?})");
    println!("ratio: {:.2}", o / t);
    println!("rackbench sets stored: {set_success:.1?} %");
    if let Some(f) = footprint {
        println!(
            "memory: {} items, {:.1} bytes of bookkeeping per item (metadata + index share), \
             {:.1} bytes per item beyond key and value including the class rounding",
            f.items,
            f.bookkeeping_per_item(),
            f.overhead_per_item()
        );
    }
}
