//! FeedSim: the leaf of a news-feed ranking service.
//!
//! [`leaf`] is the server: per-request graph ranking ([`graph`]),
//! instruction-cache pressure ([`icache`]), compression, serialization
//! ([`story`]), pointer chasing over per-thread data ([`dataset`]) and an
//! off-CPU wait, on fixed thread pools ([`pool`]). [`command`] is the entry
//! point; the driver (upstream run.sh, flags in [`cli`], set up in [`setup`],
//! run in [`drive`]) starts a leaf process ([`leaf_process`]), waits until it
//! is ready and runs the load core's SLO search against it ([`prober`]). Its
//! typed record is in [`record`], printed by [`printer`]; `rackbench feedsim
//! leaf` runs in [`serve`].

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
pub mod drive;
#[cfg(test)]
mod fixtures;
pub mod leaf_process;
pub mod printer;
pub mod prober;
pub mod record;
pub mod serve;
pub mod setup;
pub mod story;
/// FeedSim's leaf service (`proto/feedsim.proto`), generated at build time.
pub mod proto {
    tonic::include_proto!("rackbench.feedsim");
}

pub use command::FeedSim;
pub use error::{Error, Result};
