//! AdSim: ad-ranking inference serving, as a server that runs a configurable
//! pipeline of compute kernels per request and a client that drives
//! open-loop load and searches for the highest rate meeting a latency
//! target.
//!
//! - [`config`]: the server's JSON configuration (upstream's schema), its
//!   checks, the `ads` and `model_a` presets, command-line overrides,
//!   `--kernels` edits and the execution plan (stages of kernel instances).
//! - [`kernels`]: the compute kernels and what they share.
//! - [`server`]: the engine (pools, stages, counters) and its gRPC service.
//! - [`client`]: the load, the search, the CSV and the metrics.
//! - [`tls`]: `--tls` on both sides.
//! - [`cli`], [`command`]: the command lines and the harness entry;
//!   [`record`]: the typed record it stores.

pub mod addr;
pub mod benchpress;
pub mod cli;
pub mod client;
pub mod command;
pub mod config;
pub mod directions;
pub mod error;
pub mod kernels;
pub mod record;
pub mod server;
pub mod tls;
/// AdSim's inference service and serialization payload (`proto/adsim.proto`),
/// generated at build time.
pub mod proto {
    tonic::include_proto!("rackbench.adsim");
}

pub use command::AdSim;
pub use error::{Error, Result};
