//! Writes a few sample charts: `cargo run -p chart --example demo -- OUT_DIR`.
// An example program: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use chart::Chart;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| ".".to_string()));
    std::fs::create_dir_all(&dir)?;

    let secs = |f: &dyn Fn(f64) -> f64| -> Vec<(f64, f64)> {
        (0..=300).map(|t| (t as f64, f(t as f64))).collect()
    };
    Chart::new("CacheBench throughput", "time (s)", "ops/s")
        .series("get", secs(&|t| 1.2e6 + 2e5 * (t / 20.0).sin()))
        .series("set", secs(&|t| 3e5 + 4e4 * (t / 7.0).cos()))
        .series("delete", secs(&|t| 2e4 + 100.0 * t))
        .y_min(0.0)
        .write_png(&dir.join("throughput.png"))?;

    Chart::new("Hit ratio", "time (s)", "ratio")
        .series("DRAM", secs(&|t| 0.8 - 0.3 * (-t / 50.0).exp()))
        .series("NVM", secs(&|t| 0.15 + 0.05 * (t / 30.0).sin()))
        .y_range(0.0, 1.0)
        .write_png(&dir.join("hit_ratio.png"))?;

    Chart::new("NVM read latency percentiles", "time (s)", "latency (µs)")
        .series("p50", secs(&|t| 80.0 + 5.0 * (t / 10.0).sin()))
        .series("p90", secs(&|t| 150.0 + 20.0 * (t / 10.0).sin()))
        .series("p99", secs(&|t| 900.0 + 300.0 * (t / 13.0).sin()))
        .series("p99.9", secs(&|t| 4000.0 + 2000.0 * (t / 17.0).cos()))
        .series("p99.99", secs(&|t| 2e4 + 1e4 * (t / 23.0).cos()))
        .series(
            "max",
            secs(&|t| {
                if (t as u64).is_multiple_of(50) {
                    0.0
                } else {
                    9e4
                }
            }),
        )
        .log_y()
        .write_png(&dir.join("nvm_latency.png"))?;

    Chart::new("Tiny values", "x", "y")
        .series(
            "small",
            (0..50)
                .map(|i| (i as f64 * 0.1, 0.001 + i as f64 * 0.00007))
                .collect(),
        )
        .size(500, 300)
        .write_png(&dir.join("tiny.png"))?;

    Chart::new("Empty", "x", "y").write_png(&dir.join("empty.png"))?;
    Chart::new("Single point", "x", "y")
        .series("one", vec![(3.0, 7.0)])
        .size(200, 200)
        .write_png(&dir.join("single.png"))?;
    Ok(())
}
