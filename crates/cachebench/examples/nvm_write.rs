//! The NVM region engine's write bandwidth on a real file with O_DIRECT,
//! and its lookup latency under a mixed load:
//! `cargo run --release -p cachebench --example nvm_write -- FILE [SECS]`.
//!
//! Phase 1 (write): 2 threads insert 64 KiB items for SECS seconds into a
//! 1 GiB region engine (16 MiB regions, flushed in 1 MiB O_DIRECT writes,
//! FIFO eviction once the file is full). Prints the device bytes written
//! per second, which `bench/cachebench_nvm_vs_fio.sh` sets beside fio's
//! sequential 1 MiB O_DIRECT writes to the same file.
//!
//! Phase 2 (mixed): 2 threads, each operation a lookup of one of the
//! 12,000 most recently written keys (70%; most are on the device, a few
//! still in the open region's buffer) or an insert (30%); prints lookup
//! p50/p99/p999 in microseconds.
// An example program: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

use cachebench::nvm::device::{Device, DeviceOptions, DirectIo};
use cachebench::nvm::io::BlockIo;
use cachebench::nvm::key_hash;
use cachebench::nvm::region::{Eviction, RegionConfig, RegionEngine, Reinsertion};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const SIZE: u64 = 1 << 30;
const REGION: u32 = 16 << 20;
const CHUNK: u32 = 1 << 20;
const ITEM: usize = 64 << 10;
const THREADS: u64 = 2;
/// Lookups go to the last this many keys written.
const RECENT: u64 = 12_000;

fn key(k: u64) -> Vec<u8> {
    format!("item-{k:012}").into_bytes()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .expect("usage: nvm_write FILE [SECS]  (FILE is created or reused)");
    let secs: u64 = args.next().map_or(20, |s| s.parse().expect("SECS"));
    let (dev, warnings) = Device::open(
        &[std::path::PathBuf::from(&path)],
        &DeviceOptions {
            size: SIZE,
            block_size: 4096,
            stripe_size: u64::from(REGION),
            direct_io: DirectIo::Require,
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    for w in warnings {
        eprintln!("warning: {w}");
    }
    let dev = Arc::new(dev);
    let io: Arc<dyn BlockIo> = dev.clone();
    let engine = RegionEngine::new(
        io,
        RegionConfig {
            region_size: REGION,
            clean_regions: 2,
            buffers: 8,
            eviction: Eviction::Fifo,
            reinsertion: Reinsertion::None,
            checksum: true,
            write_chunk: CHUNK,
        },
    )
    .unwrap();
    let value: Vec<u8> = (0..ITEM).map(|i| (i * 7 % 251) as u8).collect();
    let next = AtomicU64::new(0);
    // Phase 1: writes only.
    let before = dev.stats().bytes_written;
    let t0 = Instant::now();
    let stop = t0 + Duration::from_secs(secs);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                while Instant::now() < stop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    let kb = key(k);
                    engine.insert(key_hash(&kb), &kb, &value, 0).unwrap();
                }
            });
        }
    });
    engine.flush();
    let elapsed = t0.elapsed().as_secs_f64();
    let written = dev.stats().bytes_written - before;
    let mbps = written as f64 / elapsed / 1e6;
    println!("write_mb_per_s {mbps:.1}");
    println!(
        "items {} regions_flushed {} device_write_p99_us {}",
        next.load(Ordering::Relaxed),
        engine.stats().regions_flushed,
        dev.stats().write_latency_us.value_at_quantile(0.99)
    );
    // Phase 2: mixed lookups and inserts.
    let lat = std::sync::Mutex::new(hdrhistogram::Histogram::<u64>::new(3).unwrap());
    let hits = AtomicU64::new(0);
    let stop = Instant::now() + Duration::from_secs(secs / 2 + 1);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (lat, hits, next, engine, value) = (&lat, &hits, &next, &engine, &value);
            s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(t);
                let mut h = hdrhistogram::Histogram::<u64>::new(3).unwrap();
                while Instant::now() < stop {
                    if rng.random_range(0..10) < 7 {
                        // One of the most recent keys: still on the device
                        // (1 GiB holds ~15,000 items of 64 KiB).
                        let newest = next.load(Ordering::Relaxed);
                        let k = key(newest - 1 - rng.random_range(0..RECENT.min(newest)));
                        let t1 = Instant::now();
                        if engine.lookup(key_hash(&k), &k, 1).unwrap().is_some() {
                            hits.fetch_add(1, Ordering::Relaxed);
                        }
                        let _ = h.record(t1.elapsed().as_micros() as u64);
                    } else {
                        let kb = key(next.fetch_add(1, Ordering::Relaxed));
                        engine.insert(key_hash(&kb), &kb, value, 0).unwrap();
                    }
                }
                lat.lock().unwrap().add(&h).unwrap();
            });
        }
    });
    let h = lat.into_inner().unwrap();
    println!(
        "mixed_lookups {} hits {} lookup_p50_us {} lookup_p99_us {} lookup_p999_us {}",
        h.len(),
        hits.load(Ordering::Relaxed),
        h.value_at_quantile(0.5),
        h.value_at_quantile(0.99),
        h.value_at_quantile(0.999)
    );
}
