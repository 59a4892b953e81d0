//! hashd: the latency-sensitive workload simulator (rd-hashd's model,
//! written here).
//!
//! - [`params`]: `args.json` and `params.json`;
//! - [`testfiles`] and [`anon`]: the memory it reads (page cache) and
//!   touches (anonymous);
//! - [`worker`]: one request and the worker threads;
//! - [`engine`]: the dispatcher and its control loop;
//! - [`log`]: the hash log; [`report`]: the report file and status lines;
//! - [`command`]: `rackbench resctl hashd`.

pub mod anon;
pub mod bench;
pub mod command;
pub mod dist;
pub mod engine;
pub mod log;
pub mod params;
pub mod report;
pub mod testfiles;
pub mod worker;

/// Bytes of memory on this host (MemTotal).
pub fn total_memory() -> u64 {
    meminfo("MemTotal:").unwrap_or(1 << 30)
}

/// A /proc/meminfo field in bytes.
pub fn meminfo(field: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with(field))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// CPUs this process may run on.
pub fn nr_cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}
