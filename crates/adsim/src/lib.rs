//! AdSim: ad-ranking inference serving, as a server that runs a configurable
//! pipeline of compute kernels per request and a client that drives
//! open-loop load and searches for the highest rate meeting a latency
//! target.
//!
//! Being built. So far:
//! - [`config`]: the server's JSON configuration (upstream's schema), its
//!   checks (file, line and column for malformed JSON; kernel index and key
//!   for everything else), the `ads` preset (upstream's default pipeline),
//!   command-line overrides and the `--kernels` edits, and the execution
//!   plan (stages of kernel instances). No kernel runs yet, and there is no
//!   server or client.

pub mod cli;
pub mod client;
pub mod config;
pub mod kernels;
pub mod server;
pub mod tls;
pub mod workload;

pub use workload::AdSim;
