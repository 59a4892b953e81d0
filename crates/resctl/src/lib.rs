//! resctl-bench: resource-control benchmarks around hashd, a
//! latency-sensitive workload simulator (rd-hashd's model), written here.
//!
//! - [`hashd`]: the workload: test files, the request (file pages, anonymous
//!   memory, SHA1), the concurrency control loop, reports and the log;
//! - [`fmt`]: upstream's number formats (`1.2M`, `885u`, `45.50`);
//! - [`spec`]: job specs (`KIND[:k[=v],...][:group2]...`);
//! - [`journal`]: the result file, a JSON array of jobs written atomically;
//! - [`jobfile`], [`argsfile`]: upstream's `-f` job files and `-a` args files.

pub mod argsfile;
pub mod bench;
pub mod clock;
mod command;
pub mod fmt;
pub mod hashd;
pub mod hog;
pub mod jobfile;
pub mod journal;
pub mod merge;
pub mod pack;
pub mod spec;
pub mod sys;

pub use command::{CHILD_CMD, Resctl, child_main};
