//! calibrate's command line: the search's flags, the client's choice and
//! the `serve` subcommand, each numeric flag refused while parsing when it
//! makes no sense.

//! calibrate's command line: the search's flags, the client's choice and
//! the `serve` subcommand, each numeric flag refused while parsing when it
//! makes no sense.

use anyhow::bail;
use clap::Parser;
use harness::argcheck::{
    at_least_one, fraction, non_negative_ms, non_negative_secs, positive_rate, positive_secs,
    search_tolerance, whole,
};
use load::{Arrival, SloTarget};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "rackbench calibrate",
    about = "Search the max QPS of a server with a known M/D/c capacity and compare with the analytic value",
    disable_help_subcommand = true
)]
pub struct Args {
    #[command(subcommand)]
    pub cmd: Option<Cmd>,
    /// Service time of one request, milliseconds.
    #[arg(long, default_value_t = 10.0, allow_negative_numbers = true, value_parser = non_negative_ms)]
    pub service_time_ms: f64,
    /// Server workers (requests served concurrently); 0 = reply at once.
    #[arg(long, default_value_t = 8, allow_negative_numbers = true, value_parser = whole::<usize>)]
    pub workers: usize,
    /// Latency target, PERCENTILE:MS (avg|50p|90p|95p|99p|99.9p).
    #[arg(long, default_value = "95p:20")]
    pub target: SloTarget,
    /// Arrival process: poisson (the M in M/D/c), constant or burst:N.
    #[arg(long, default_value = "poisson")]
    pub arrival: Arrival,
    /// Open loop: a wake-up also sends the requests due within this many
    /// microseconds after it, early, each timed from its send (default 1000
    /// for constant arrivals, 0 otherwise; 0 sends each at its own time).
    #[arg(long, allow_negative_numbers = true, value_parser = send_ahead_us)]
    pub send_ahead_us: Option<u64>,
    /// Relative tolerance at which the bisection stops.
    #[arg(long, default_value_t = 0.01, allow_negative_numbers = true, value_parser = search_tolerance)]
    pub tolerance: f64,
    /// Unthrottled warm-up before the peak probe, seconds.
    #[arg(long, default_value_t = 2.0, allow_negative_numbers = true, value_parser = non_negative_secs)]
    pub warmup_secs: f64,
    /// Unthrottled peak probe, seconds.
    #[arg(long, default_value_t = 3.0, allow_negative_numbers = true, value_parser = positive_secs)]
    pub peak_secs: f64,
    /// Each search probe, seconds (after its own 1 s warm-up).
    #[arg(long, default_value_t = 4.0, allow_negative_numbers = true, value_parser = positive_secs)]
    pub probe_secs: f64,
    /// The confirming final run, seconds.
    #[arg(long, default_value_t = 15.0, allow_negative_numbers = true, value_parser = positive_secs)]
    pub final_secs: f64,
    /// Short probes for smoke runs: 1 s warm-up/peak, 2 s probes, 4 s final,
    /// a 1 s overhead probe, close calls extended once at most.
    #[arg(long)]
    pub quick: bool,
    /// Fixed-QPS experiments instead of a search, e.g. 100,200,400.
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true, value_parser = positive_rate)]
    pub fixed_qps: Vec<f64>,
    /// Load generator threads (client cores).
    #[arg(long, default_value_t = 1, allow_negative_numbers = true, value_parser = at_least_one::<usize>)]
    pub client_threads: usize,
    /// HTTP/2 connections from the client.
    #[arg(long, default_value_t = 2, allow_negative_numbers = true, value_parser = at_least_one::<usize>)]
    pub connections: usize,
    /// Bound on requests in flight; beyond it requests count as dropped.
    #[arg(long, default_value_t = 20_000, allow_negative_numbers = true, value_parser = at_least_one::<usize>)]
    pub max_in_flight: usize,
    /// Seed of the arrival process.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true, value_parser = whole::<u64>)]
    pub seed: u64,
    /// Probe CSV (FeedSim's 15 columns); relative paths go to the metrics folder.
    #[arg(long, default_value = "calibrate_results.csv")]
    pub output: PathBuf,
    /// Drive an already running server (`rackbench calibrate serve`) instead
    /// of starting one; --service-time-ms and --workers must match it.
    #[arg(long)]
    pub server: Option<SocketAddr>,
    /// Make the server stall every this many seconds (with --stall-secs), to
    /// demonstrate coordinated omission.
    #[arg(long, requires = "stall_secs", allow_negative_numbers = true, value_parser = positive_secs)]
    pub stall_every_secs: Option<f64>,
    /// Length of each stall, seconds.
    #[arg(long, requires = "stall_every_secs", allow_negative_numbers = true, value_parser = positive_secs)]
    pub stall_secs: Option<f64>,
    /// The load generator's gRPC client: lean (HTTP/2 framing of our own
    /// for unary calls, the request encoded once), h2 (the same calls on the
    /// h2 crate) or tonic (tonic's generated client); the last two are kept
    /// to compare.
    #[arg(long, value_enum, default_value_t = ClientKind::Lean)]
    pub client: ClientKind,
    /// Confidence of the interval the search judges close calls and the
    /// final run with (0 = off: every probe judged on its point estimate,
    /// as FeedSim does).
    #[arg(long, default_value_t = 0.95, allow_negative_numbers = true, value_parser = fraction)]
    pub confidence: f64,
    /// How many times a close call (or a final run) may be extended by
    /// another probe while its interval cannot tell it from the target.
    #[arg(long, default_value_t = 4, allow_negative_numbers = true, value_parser = whole::<usize>)]
    pub extensions: usize,
    /// The overhead probe: seconds at 10% of capacity before the search,
    /// where the queue is almost never waited on, measuring the chain's
    /// own time (latency minus the service time) for the model; 0 = none.
    #[arg(long, default_value_t = 3.0, allow_negative_numbers = true, value_parser = non_negative_secs)]
    pub overhead_secs: f64,
    /// Bytes in each request and reply payload.
    #[arg(long, default_value_t = 64, allow_negative_numbers = true, value_parser = whole::<u32>)]
    pub payload_bytes: u32,
    /// Measure only the unthrottled (closed-loop) peak: the warm-up and
    /// the peak probe, no search.
    #[arg(long, conflicts_with = "fixed_qps")]
    pub peak_only: bool,
    /// Requests in flight in the unthrottled warm-up and peak probes
    /// (default: 4 per server worker, 8 to 256).
    #[arg(long, allow_negative_numbers = true, value_parser = at_least_one::<usize>)]
    pub peak_concurrency: Option<usize>,
}

/// Which gRPC client drives the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientKind {
    H2,
    Tonic,
    /// HTTP/2 framing of our own for unary calls (`rpc::lean`).
    Lean,
}

#[derive(Debug, clap::Subcommand)]
pub enum Cmd {
    /// Run only the server until Ctrl-C (for driving it with another client).
    Serve {
        /// Address to listen on: loopback by default (127.0.0.1 means both
        /// 127.0.0.1 and ::1).
        #[arg(long, default_value = "127.0.0.1:50051")]
        listen: SocketAddr,
        /// Server runtime threads.
        #[arg(long, default_value_t = 1, allow_negative_numbers = true, value_parser = at_least_one::<usize>)]
        threads: usize,
    },
}

// Value parsers: a meaningless number is refused while parsing, so clap's
// message names the flag ("invalid value '0' for '--workers <WORKERS>':
// must be at least 1") and nothing starts. Numeric flags also take
// `allow_negative_numbers`, so `--workers -5` is read as a value and refused
// here instead of being taken for an unknown flag.

impl Args {
    pub(crate) fn check(&self) -> anyhow::Result<()> {
        if !(self.service_time_ms >= 0.0 && self.service_time_ms.is_finite()) {
            bail!("--service-time-ms must be a non-negative number of milliseconds");
        }
        if !(self.tolerance > 0.0 && self.tolerance < 0.5) {
            bail!("--tolerance must be in (0, 0.5), e.g. 0.02");
        }
        if self.client_threads == 0 || self.connections == 0 {
            bail!("--client-threads and --connections must be at least 1");
        }
        if let Some(q) = self.fixed_qps.iter().find(|q| !(**q > 0.0)) {
            bail!("--fixed-qps values must be positive, got {q}");
        }
        for (name, v) in [
            ("--warmup-secs", self.warmup_secs),
            ("--peak-secs", self.peak_secs),
            ("--probe-secs", self.probe_secs),
            ("--final-secs", self.final_secs),
        ] {
            if !(v >= 0.0 && v.is_finite()) {
                bail!("{name} must be a non-negative number of seconds");
            }
        }
        if let (Some(every), Some(len)) = (self.stall_every_secs, self.stall_secs)
            && !(every > 0.0 && len > 0.0 && len < every)
        {
            bail!("--stall-secs must be positive and shorter than --stall-every-secs");
        }
        Ok(())
    }

    /// Seconds of the overhead probe (`--quick` keeps it to 1 s).
    pub(crate) fn overhead_secs(&self) -> f64 {
        if self.quick {
            self.overhead_secs.min(1.0)
        } else {
            self.overhead_secs
        }
    }
}

/// `--send-ahead-us`: microseconds, 0 to one second (a longer window would
/// send a second's requests at once, which is no arrival process).
fn send_ahead_us(s: &str) -> Result<u64, harness::error::Error> {
    match whole::<u64>(s)? {
        n if n > 1_000_000 => Err(harness::error::Error::Input(
            "must be at most 1000000 (one second)".into(),
        )),
        n => Ok(n),
    }
}
