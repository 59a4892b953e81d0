//! The `calibrate` workload: proof that the measuring chain is right.
//!
//! A built-in gRPC service whose handler holds each request for a fixed
//! service time on one of a fixed number of workers ([`server`]) is, under
//! Poisson arrivals, an M/D/c queue whose latency percentiles are known
//! exactly ([`mdc`]). The job runs the load core's SLO search against it on
//! loopback ([`command`], over [`cli`], [`record`] and [`metrics`]) and
//! reports the measured maximum rate next to the analytic one: a ratio near
//! 1 means the generator, the recorder and the search measure what they
//! claim.

// `!(x > 0.0)` is deliberate throughout: it rejects NaN as well.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

pub mod cli;
pub mod command;
mod drive;
pub mod mdc;
pub mod metrics;
mod printer;
pub mod record;
pub mod server;
mod setup;
/// The calibration service (`proto/calibrate.proto`), generated at build time.
pub mod proto {
    tonic::include_proto!("rackbench.calibrate");
}

pub use command::Calibrate;
