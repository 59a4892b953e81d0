//! CacheBench for rackbench (being built): CacheLib's cache benchmark.
//!
//! - [`config`]: CacheLib's JSON test configs (`cache_config`,
//!   `test_config`), read unchanged;
//! - [`cache`]: the cache engine, ours: DRAM slabs, allocation classes,
//!   pools, eviction and the hash index;
//! - [`generator`] and [`stressor`]: the synthetic workload and the threads
//!   that run it;
//! - [`output`]: upstream's report text; [`CacheBench`]: the workload
//!   (`rackbench cachebench --json_test_config FILE`).

pub mod cache;
pub mod charts;
pub mod chunked;
mod cli;
mod command;
pub mod config;
pub mod counters;
pub mod directions;
mod drive;
pub mod error;
pub mod generator;
pub mod latency;
pub mod metrics;
pub mod nand;
pub mod nvm;
pub mod output;
pub mod plots;
pub mod record;
mod render;
pub mod replay;
mod setup;
pub mod stats;
pub mod stressor;

pub use command::CacheBench;
pub use error::Error;
pub use record::{CacheBenchRecord, GeneratorStats, InstanceRecord};

/// The config-to-engine mapping the command uses, for benchmarks.
pub mod command_support {
    pub use crate::setup::{dram_config as dram_config_of, spec as spec_of};
}
