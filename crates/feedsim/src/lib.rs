//! FeedSim: the leaf of a news-feed ranking service.
//!
//! [`leaf`] is the server: per-request graph ranking ([`graph`]),
//! instruction-cache pressure ([`icache`]), compression, serialization
//! ([`story`]), pointer chasing over per-thread data ([`dataset`]) and an
//! off-CPU wait, on fixed thread pools ([`pool`]). [`command`] is the driver
//! (upstream run.sh, flags in [`cli`]): it starts a leaf process, waits until
//! it is ready and runs the load core's SLO search against it.

pub mod benchpress;
pub mod cli;
pub mod dataset;
pub mod directions;
pub mod error;
pub mod graph;
pub mod hugemem;
pub use icache;
pub mod leaf;
pub mod metrics;
pub mod perf_record;
pub use rpc::pool;
pub mod command;
pub mod story;
/// FeedSim's leaf service (`proto/feedsim.proto`), generated at build time.
pub mod proto {
    tonic::include_proto!("rackbench.feedsim");
}

pub use command::FeedSim;
pub use error::{Error, Result};
