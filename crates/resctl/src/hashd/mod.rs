//! hashd: the latency-sensitive workload simulator (rd-hashd's model,
//! written here).
//!
//! - [`params`]: `args.json` and `params.json`;
//! - [`testfiles`] and [`anon`]: the memory it reads (page cache) and
//!   touches (anonymous);
//! - [`worker`]: one request and the worker threads;
//! - [`engine`]: the dispatcher and its control loop;
//! - [`log`]: the hash log; [`report`]: the report file and status lines;
//! - [`command`]: `rackbench resctl hashd`: `cli` (its arguments), `setup`
//!   (flags -> engine), `drive` (the control periods), `out` (its
//!   messages), `record` (the typed record and metrics) and `render` (the
//!   record's text).

pub mod anon;
pub mod bench;
mod cli;
pub mod command;
pub mod dist;
mod drive;
pub mod engine;
pub mod log;
mod out;
pub mod params;
mod record;
mod render;
pub mod report;
mod setup;
pub mod testfiles;
pub mod worker;

/// Bytes of memory on this host (MemTotal).
pub fn total_memory() -> u64 {
    harness::machine::meminfo_bytes("MemTotal").unwrap_or(1 << 30)
}
