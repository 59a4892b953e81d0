//! Times the leaf's ranking step alone: one dataset at the default scale,
//! then `contributions` over all nodes and one pull iteration over
//! graph_subset nodes from random starts, as one ranking task with -c 1.
//! Prints the median and spread of the per-request cost. Used to study
//! run-to-run variation (page placement, huge pages):
//! `cargo run --release -p feedsim --example ranking -- [scale] [reps] [huge|small]`
//! (`small` leaves the arrays on whatever pages THP gives, as `--no-huge-pages`).
// An example program: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

use feedsim::dataset::{Dataset, Shape};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let scale: u32 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(21);
    let reps: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(30);
    let huge = args.get(3).is_none_or(|s| s != "small");
    let t = Instant::now();
    let ds = Dataset::build(
        Shape {
            scale,
            huge_pages: huge,
            ..Shape::default()
        },
        1,
    );
    eprintln!(
        "built in {:.2} s, {} MiB on huge pages",
        t.elapsed().as_secs_f64(),
        feedsim::hugemem::anon_huge_bytes().unwrap_or(0) >> 20
    );
    let n = ds.graph.nodes;
    let subset = 2_000_000.min(n);
    let mut rng = SmallRng::seed_from_u64(7);
    let mut ms = Vec::with_capacity(reps);
    let mut sink = 0.0;
    for _ in 0..reps {
        let t = Instant::now();
        ds.graph.contributions(rng.random_range(0..n), n);
        sink += ds.graph.pull(rng.random_range(0..n), subset);
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    ms.sort_by(f64::total_cmp);
    println!(
        "ranking ms per request: median {:.1}, min {:.1}, max {:.1} (sink {sink:.3})",
        ms[ms.len() / 2],
        ms[0],
        ms[ms.len() - 1]
    );
}
