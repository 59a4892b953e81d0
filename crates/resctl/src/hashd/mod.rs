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
    harness::machine::meminfo_bytes("MemTotal").unwrap_or(1 << 30)
}
