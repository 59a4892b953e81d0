//! The load core: everything between "offer this much traffic" and "here is
//! what the server did with it", independent of the transport.
//!
//! - [`arrival`]: when requests are meant to start (constant, Poisson, bursts).
//! - [`driver`]: open-loop and closed-loop drivers over any `tower::Service`,
//!   measuring latency from the intended start (no coordinated omission).
//! - [`recorder`]: per-worker HdrHistograms, merged; per-second series.
//! - [`search`]: the SLO search for the highest rate that meets a latency
//!   percentile target, and fixed-rate experiments.
//! - [`csv`]: FeedSim's 15-column probe CSV.
//! - [`pacer`]: timerfd-precise waits for pacing.
//! - [`gate`]: a failure-tolerant rendezvous for parallel searches.
//! - [`hostspeed`]: whether the machine changed speed during a run.

pub mod arrival;
pub mod csv;
pub mod directions;
pub mod driver;
pub mod error;
pub mod gate;
pub mod hostspeed;
pub mod pacer;
pub mod prober;
pub mod recorder;
pub mod report;
pub mod search;
pub mod wire;

pub use arrival::Arrival;
pub use driver::{Mode, RunConfig, RunResult, run};
pub use error::Error;
pub use prober::ServiceProber;
pub use recorder::{Exceedance, LatencySummary, Percentile, Recorder};
pub use search::{Interval, ProbeRecord, Prober, SearchConfig, SearchOutcome, SloTarget};
pub use wire::WireSize;
