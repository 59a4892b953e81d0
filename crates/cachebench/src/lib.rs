//! CacheBench for rackbench (being built): CacheLib's cache benchmark.
//!
//! - [`config`]: CacheLib's JSON test configs (`cache_config`,
//!   `test_config`), read unchanged;
//! - [`cache`]: the cache engine, ours: DRAM slabs, allocation classes,
//!   pools, eviction and the hash index.

pub mod cache;
pub mod config;
pub mod output;
pub mod stats;
pub mod stressor;
pub mod workload;
