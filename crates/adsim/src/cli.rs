//! AdSim's command lines: `rackbench adsim server`, `client` and `kernel`,
//! with upstream run_adsim.py's flags (and its spellings) accepted.

use crate::Error;
use clap::Parser;
use harness::argcheck::{
    at_least_one, positive_factor, positive_ms, positive_rate, positive_secs, positive_whole_secs,
    whole,
};
use load::Percentile;
use std::net::IpAddr;
use std::path::PathBuf;

/// `rackbench adsim server`.
#[derive(Debug, Parser, Clone)]
#[command(
    name = "rackbench adsim server",
    about = "Run the AdSim server (a pipeline of compute kernels per request) until Ctrl-C or --timeout"
)]
pub struct ServerArgs {
    /// Port to serve on (default: the config's port, 10086).
    #[arg(long, allow_negative_numbers = true)]
    pub port: Option<u16>,
    /// Address to bind (default: both loopbacks, 127.0.0.1 and ::1); :: or
    /// 0.0.0.0 to be reachable from other hosts.
    #[arg(long)]
    pub bind: Option<IpAddr>,
    /// Server configuration (upstream's JSON: port, thread pools, Kernels).
    #[arg(long, conflicts_with_all = ["preset", "cfg_file", "auto_config_type"])]
    pub config: Option<PathBuf>,
    /// A built-in configuration: ads (upstream's default pipeline) or model_a
    /// (a DLRM-style inference model). Default: ads.
    #[arg(long, conflicts_with_all = ["cfg_file", "auto_config_type"])]
    pub preset: Option<String>,
    /// Upstream's spelling: a config file, or `default` for the ads preset.
    #[arg(long = "cfg-file", conflicts_with = "auto_config_type")]
    pub cfg_file: Option<String>,
    /// Upstream's spelling: ads or inference (with --auto-config-model).
    #[arg(long = "auto-config-type")]
    pub auto_config_type: Option<String>,
    /// Upstream's spelling: the inference model (model_a).
    #[arg(long = "auto-config-model", default_value = "model_a")]
    pub auto_config_model: String,
    /// Scales model_a's embedding tables (memory) by this factor.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true, value_parser = positive_factor)]
    pub scale: f64,
    /// Stop after this many seconds (0: run until Ctrl-C).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true, value_parser = whole::<u64>)]
    pub timeout: u64,
    /// Serve over TLS (a self-signed pair is generated unless --cert/--key are given).
    /// `--tls` alone or `--tls=1` turns it on, `--tls=0` off (the jobs pass `--tls={tls}`).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "1",
          default_value = "0", value_parser = clap::builder::BoolishValueParser::new())]
    pub tls: bool,
    /// PEM certificate for --tls.
    #[arg(long, requires = "key")]
    pub cert: Option<PathBuf>,
    /// PEM private key for --tls.
    #[arg(long, requires = "cert")]
    pub key: Option<PathBuf>,
    /// Threads of the requestHandle pool.
    #[arg(
        long = "num-req-handle-threads",
        alias = "num_req_handle_threads",
        allow_negative_numbers = true
    )]
    pub num_req_handle_threads: Option<String>,
    /// Threads of the IOHandle pool (the server's async runtime).
    #[arg(
        long = "num-io-handle-threads",
        alias = "num_io_handle_threads",
        allow_negative_numbers = true
    )]
    pub num_io_handle_threads: Option<String>,
    /// Threads of the applicationLogic pool.
    #[arg(
        long = "num-app-logic-threads",
        alias = "num_app_logic_threads",
        allow_negative_numbers = true
    )]
    pub num_app_logic_threads: Option<String>,
    /// Per-request threads of the defaultPool/reqLocal pool.
    #[arg(
        long = "num-req-local-threads",
        alias = "num_req_local_threads",
        allow_negative_numbers = true
    )]
    pub num_req_local_threads: Option<String>,
    /// Upstream's accept threads (kept in the config; connections are accepted by the runtime).
    #[arg(
        long = "num-thrift-accept-threads",
        alias = "num_thrift_accept_threads",
        allow_negative_numbers = true
    )]
    pub num_thrift_accept_threads: Option<String>,
    /// Kernel edits, a JSON array: {"index": i} deletes kernel i, {"index": i, ...fields} replaces
    /// those fields, an object without index appends a kernel.
    #[arg(long)]
    pub kernels: Option<String>,
    /// Print the resolved configuration as JSON and exit.
    #[arg(long)]
    pub print_config: bool,
    /// Threads that build the kernels' start-up data (default: nproc).
    #[arg(long, allow_negative_numbers = true, value_parser = at_least_one::<usize>)]
    pub init_threads: Option<usize>,
}

/// The client's request-size lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Ad-serving requests: 100 sizes from about 21 KB to 2.2 MB.
    Default,
    /// Inference requests: 100 sizes from 4 B to 317 KB, times --ai-request-size-multiplier.
    Ai,
}

/// `rackbench adsim client`.
#[derive(Debug, Parser, Clone)]
#[command(
    name = "rackbench adsim client",
    about = "Drive an AdSim server with open-loop Poisson load and find the highest QPS meeting a latency percentile target"
)]
pub struct ClientArgs {
    /// The server's address or host name.
    #[arg(long, default_value = "::1")]
    pub server: String,
    #[arg(long, default_value_t = crate::config::DEFAULT_PORT, allow_negative_numbers = true)]
    pub port: u16,
    /// Independent arrival streams (the rate is split between them).
    #[arg(long, default_value_t = 20, allow_negative_numbers = true, value_parser = at_least_one::<usize>)]
    pub workers: usize,
    /// Seconds of the confirming run at the final rate (upstream measures every probe this long;
    /// our search probes last --probe-secs).
    #[arg(long, default_value_t = 120, allow_negative_numbers = true, value_parser = positive_whole_secs)]
    pub runtime: u64,
    /// Seconds of each search probe.
    #[arg(long, default_value_t = 10.0, allow_negative_numbers = true, value_parser = positive_secs)]
    pub probe_secs: f64,
    /// The latency percentile judged: P50, P90, P95, P99 or P99.9 (default P95; P99 in ai mode).
    #[arg(long)]
    pub criteria: Option<String>,
    /// The latency target, milliseconds (default 989; 100 in ai mode).
    #[arg(long, allow_negative_numbers = true, value_parser = positive_ms)]
    pub latency: Option<f64>,
    /// Stop the whole search after this many seconds, keeping its probes (0: no limit).
    #[arg(long, default_value_t = 1800, allow_negative_numbers = true, value_parser = whole::<u64>)]
    pub timeout: u64,
    #[arg(long, value_enum, default_value = "default")]
    pub mode: Mode,
    /// Multiplies the ai-mode request sizes (the adsim_inference_a job passes 6).
    #[arg(long, default_value_t = 20, allow_negative_numbers = true, value_parser = at_least_one::<u64>)]
    pub ai_request_size_multiplier: u64,
    /// Lowest rate the search may report.
    #[arg(long, allow_negative_numbers = true, value_parser = positive_rate)]
    pub qps_min: Option<f64>,
    /// Highest rate the search may try.
    #[arg(long, allow_negative_numbers = true, value_parser = positive_rate)]
    pub qps_max: Option<f64>,
    /// Fixed rates instead of a search: QPS[,QPS..], each run for --runtime seconds after the
    /// warm-up (success when every rate meets the target).
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true, value_parser = positive_rate)]
    pub qps: Vec<f64>,
    /// Connect over TLS: `--tls` alone or `--tls=1` on, `--tls=0` off (the jobs pass `--tls={tls}`).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "1",
          default_value = "0", value_parser = clap::builder::BoolishValueParser::new())]
    pub tls: bool,
    /// PEM certificate(s) to trust for --tls (default: accept the server's certificate unverified,
    /// as upstream's client does with its self-signed pair).
    #[arg(long)]
    pub ca: Option<PathBuf>,
    /// HTTP/2 connections to the server.
    #[arg(long, default_value_t = 4, allow_negative_numbers = true, value_parser = at_least_one::<usize>)]
    pub connections: usize,
    /// Threads of the client's runtime.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true, value_parser = at_least_one::<usize>)]
    pub client_threads: usize,
    /// The probe CSV (relative paths go to the metrics folder).
    #[arg(long, default_value = "adsim_results.csv")]
    pub output: PathBuf,
    /// How long to wait for the server to come up and finish initialising, seconds (0: try once).
    #[arg(long, default_value_t = 600, allow_negative_numbers = true, value_parser = whole::<u64>)]
    pub wait_server: u64,
    /// Short probes and final run, for smoke runs and CI.
    #[arg(long)]
    pub quick: bool,
    /// Seed of the request payloads and arrivals.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true, value_parser = whole::<u64>)]
    pub seed: u64,
}

impl ClientArgs {
    /// The target, with upstream's ai-mode defaults (P99 <= 100 ms) when
    /// the criteria or latency were left unset.
    pub fn target(&self) -> Result<(Percentile, String, f64), Error> {
        let ai = self.mode == Mode::Ai;
        let crit = self
            .criteria
            .clone()
            .unwrap_or_else(|| if ai { "P99" } else { "P95" }.to_string());
        let p = parse_criteria(&crit)?;
        let lat = self.latency.unwrap_or(if ai { 100.0 } else { 989.0 });
        if !(lat.is_finite() && lat > 0.0) {
            return Err(Error::Input(format!(
                "--latency {lat}: expected a positive number of milliseconds"
            )));
        }
        Ok((p, crit.to_uppercase(), lat))
    }
}

/// Upstream's criteria names.
pub fn parse_criteria(s: &str) -> Result<Percentile, Error> {
    Ok(match s.to_ascii_uppercase().as_str() {
        "P50" => Percentile::P50,
        "P90" => Percentile::P90,
        "P95" => Percentile::P95,
        "P99" => Percentile::P99,
        "P99.9" => Percentile::P999,
        "AVG" => Percentile::Avg,
        _ => {
            return Err(Error::Input(format!(
                "--criteria {s:?}: expected one of P50, P90, P95, P99, P99.9, Avg"
            )));
        }
    })
}

/// `rackbench adsim kernel`: one kernel standalone.
#[derive(Debug, Parser, Clone)]
#[command(
    name = "rackbench adsim kernel",
    about = "Run one AdSim kernel standalone on N threads and report its throughput (fires/s, GFLOP/s, CPU per fire)"
)]
pub struct KernelArgs {
    /// The kernel kind (GEMM, Embedding, DenseFP32, Compress, ...).
    pub name: String,
    /// Its params, a JSON object.
    #[arg(long, default_value = "{}")]
    pub params: String,
    /// Threads running the kernel.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true, value_parser = at_least_one::<usize>)]
    pub threads: usize,
    /// Seconds to run it.
    #[arg(long, default_value_t = 3.0, allow_negative_numbers = true, value_parser = positive_secs)]
    pub seconds: f64,
    /// Bytes of the request body the kernel sees (Features hashes it, Shape may echo it).
    #[arg(long, default_value_t = 4096, allow_negative_numbers = true, value_parser = whole::<usize>)]
    pub request_bytes: usize,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

// Value parsers: a meaningless number is refused while parsing, so clap's
// message names the flag ("invalid value '0' for '--workers <WORKERS>':
// must be at least 1") and nothing starts. Numeric flags also take
// `allow_negative_numbers`, so `--workers -5` is read as a value and refused
// here instead of being taken for an unknown flag.
