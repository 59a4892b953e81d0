//! Distbench for rackbench: the foundation of the workload.
//!
//! [Distbench](https://github.com/google/distbench) users describe RPC
//! traffic (client/server, fan-out trees, cliques, pipelines) in textproto
//! test sequences; rackbench accepts those files unchanged. This crate holds
//!
//! - [`proto`]: the Distbench schema (our own `.proto` copy, field-for-field
//!   compatible) as prost types, plus the descriptors the text format needs;
//! - [`textproto`]: parsing and printing the text format, with errors that
//!   name `file:line:col` and what was expected;
//! - [`files`]: reading and writing sequences and results as text, binary or
//!   gzip-compressed binary (upstream's `*.pb`, `*.pb.gz`);
//! - [`check`]: upstream's `check_test` validation, reporting every problem
//!   of every test, not just the first;
//! - [`Distbench`]: the `distbench` workload (`rackbench distbench
//!   check_test --infile F`). Running traffic is not implemented yet.

pub mod analyze;
pub mod check;
pub mod files;
pub mod proto;
pub mod test_builder;
pub mod textproto;
mod workload;

pub use workload::Distbench;
