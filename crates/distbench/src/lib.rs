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
//! - [`test_builder`] and [`analyze`]: upstream's config generator and
//!   result analysis;
//! - [`engine`]: the traffic engine, what one service instance does
//!   (action lists, iterations, fan-out, sampling), over the `grpc`
//!   protocol driver;
//! - [`node_manager`] and [`sequencer`]: the control plane (registration,
//!   [`placement`], configure / introduce / run / collect), and [`cluster`]
//!   to start them, in one process or many;
//! - [`summary`] and [`metrics`]: upstream's per-test summary lines and the
//!   report's metrics;
//! - [`Distbench`]: the `distbench` workload and its subcommands
//!   ([`subcommands`]).

pub mod analyze;
pub mod charts;
pub mod check;
pub mod cluster;
mod command;
pub mod directions;
pub mod engine;
pub mod error;
pub mod files;
pub mod flags;
pub mod metrics;
pub mod netif;
pub mod node_manager;
pub mod placement;
pub mod proto;
pub mod sequencer;
pub mod subcommands;
pub mod summary;
pub mod test_builder;
pub mod textproto;

pub use command::Distbench;
pub use error::{Error, Result};
