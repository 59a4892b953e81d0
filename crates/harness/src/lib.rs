//! The harness: what benchpress does, in one binary.
//!
//! A job catalogue ([`job`]) maps job names to a workload and argument
//! templates; [`vars`] resolves them with user input; [`runner`] runs hooks
//! ([`hooks`]) around the workload and writes one report format
//! ([`report`], with [`machine`] info) into `benchmark_metrics_<run_id>/` and
//! the SQLite results store ([`store`]), with the workload's typed
//! [`record`] from which its upstream text can be printed again; [`score`] turns stored runs into
//! scores, and [`compare`] compares two sets of runs metric by metric with
//! the statistics of [`stats`] and the direction of better of [`direction`].
//! [`progress`] and [`cancel`] give long runs a progress display and a
//! clean Ctrl-C.

pub use results::answer;
pub mod argcheck;
pub mod benchpress_yaml;
pub mod cancel;
pub use results::compare;
pub mod error;
pub use ::direction;
pub mod fsutil;
pub mod hooks;
pub use results::html;
pub mod job;
pub use host::machine;
pub use results::marks;
pub use results::page_chart;
pub use results::page_summary;
pub mod present;
pub mod progress;
pub use results::record;
pub mod redirect;
pub mod report;
pub mod runner;
pub use results::score;
pub mod setup;
pub use results::stats;
pub use results::store;
pub mod suggest;
pub use host::system_check;
pub use results::tls;
pub mod vars;

pub use cancel::Cancel;
pub use error::Error;
pub use job::{Catalogue, Job};
pub use progress::Progress;
pub use record::Record;
pub use runner::{Invocation, Outcome, Registry, RunContext, Workload};
