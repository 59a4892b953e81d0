//! The benchmarks of resctl-bench and the commands that run them.
//!
//! - [`job`]: `run`, `format`, `summary`, `deps` over the result journal,
//!   the bench table and the result header;
//! - [`knobs`]: what benches hand on (hashd's knobs, the IO cost model,
//!   the memory profile) and the per-job system info;
//! - [`hashd_params`], [`iocost_params`], [`protection`], [`storage`]: the
//!   benches.

pub mod hashd_params;
pub mod iocost_params;
pub mod job;
pub mod knobs;
pub mod protection;
pub mod storage;
