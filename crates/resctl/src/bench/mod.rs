//! The benchmarks of resctl-bench and the commands that run them.
//!
//! - [`job`]: `run`, `format`, `summary`, `deps` over the result journal
//!   and the result header;
//! - [`common`]: what every bench gets (options, the job's context, how a
//!   job ends) and implements (the [`common::Bench`] trait);
//! - [`registry`]: the list of benches;
//! - [`knobs`]: what benches hand on (hashd's knobs, the IO cost model,
//!   the memory profile) and the per-job system info;
//! - [`hashd_params`], [`iocost_params`], [`protection`], [`storage`]: the
//!   benches; [`iocost_qos`]: iocost-qos and iocost-tune (specs and
//!   requirements checked, running refused);
//! - [`topics`]: the `doc common` and `doc shadow-inode` texts.

pub mod common;
pub mod hashd_params;
mod host;
pub mod iocost_params;
pub mod iocost_qos;
pub mod iocost_tune;
pub mod job;
pub mod knobs;
pub mod merge_info;
pub mod metrics;
pub mod protection;
pub mod registry;
pub mod storage;
pub mod topics;
