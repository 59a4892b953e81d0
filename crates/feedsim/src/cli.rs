//! FeedSim's command line: upstream run.sh's flags for the driver, and the
//! leaf server's own.

use crate::Error;
use clap::Parser;
use harness::argcheck::{
    at_least_one, fit, fraction, int, positive_rate, positive_secs, positive_whole_secs,
    search_tolerance, whole,
};
use load::{Arrival, SloTarget};
use std::net::IpAddr;
use std::path::PathBuf;

/// `rackbench feedsim leaf`: the ranking leaf server alone.
#[derive(Debug, Parser, Clone)]
#[command(
    name = "rackbench feedsim leaf",
    about = "Run FeedSim's ranking leaf server until Ctrl-C"
)]
pub struct LeafArgs {
    /// Port to serve on.
    #[arg(
        short = 'p',
        long,
        default_value_t = 11222,
        allow_negative_numbers = true
    )]
    pub port: u16,
    /// Address to bind (default: both loopbacks, 127.0.0.1 and ::1; 0.0.0.0
    /// or :: to be reachable from another host).
    #[arg(long)]
    pub bind: Option<IpAddr>,
    #[command(flatten)]
    pub shape: ShapeArgs,
}

/// Sizes and thread counts of the leaf (shared by the driver, which passes
/// them on to the leaf it starts).
#[derive(Debug, clap::Args, Clone)]
pub struct ShapeArgs {
    /// Serving threads, each with its own dataset (default: min(nproc, 216)).
    #[arg(short = 't', long = "threads", allow_negative_numbers = true, value_parser = at_least_one::<usize>)]
    pub threads: Option<usize>,
    /// Ranking pool threads and PageRank tasks per request (default: nproc*7/20, 15/20 without SMT).
    #[arg(short = 'c', long = "cpu-threads", allow_negative_numbers = true, value_parser = at_least_one::<usize>)]
    pub cpu_threads: Option<usize>,
    /// Serialization pool threads and tasks per request (default: min(nproc*7/20, 55), 11/20 without SMT).
    /// A value of the form METRIC:MS is read as the latency target instead (upstream's search syntax).
    #[arg(
        short = 's',
        long = "srv-io-threads",
        value_name = "N|METRIC:MS",
        allow_negative_numbers = true
    )]
    pub srv_io: Option<String>,
    /// Minimum generated-function calls per request (i-cache pressure).
    #[arg(short = 'i', long = "icache-iterations", default_value_t = 1_600_000, allow_negative_numbers = true, value_parser = whole::<u64>)]
    pub icache_iterations: u64,
    /// The graph of each serving thread has 2^scale nodes (1 to 40).
    #[arg(long, default_value_t = 21, allow_negative_numbers = true, value_parser = graph_scale)]
    pub scale: u32,
    /// Nodes of the PageRank iteration per request.
    #[arg(long, default_value_t = 2_000_000, allow_negative_numbers = true, value_parser = at_least_one::<usize>)]
    pub graph_subset: usize,
    /// Stories per request across the serialization tasks.
    #[arg(long, default_value_t = 2000, allow_negative_numbers = true, value_parser = at_least_one::<usize>)]
    pub num_objects: usize,
    /// Entries of the pointer-chasing permutation.
    #[arg(long, default_value_t = 10_000_000, allow_negative_numbers = true, value_parser = at_least_one::<usize>)]
    pub chase_entries: usize,
    /// Simulated IO wait per request, milliseconds.
    #[arg(long, default_value_t = 200, allow_negative_numbers = true, value_parser = whole::<u64>)]
    pub io_wait_ms: u64,
    /// Seed of the datasets and of the request stream.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true, value_parser = whole::<u64>)]
    pub seed: u64,
    /// How the leaf serves requests. `blocking` (upstream's LeafNodeRank):
    /// a serving thread runs each request to its end, blocking on the
    /// fan-outs and sleeping through the IO wait, so at most -t requests
    /// are in flight. `async` (ours): the IO wait is a timer that holds no
    /// thread, so requests in flight are bounded by CPU alone.
    #[arg(long, value_enum, default_value_t = ServingModel::Blocking)]
    pub serving_model: ServingModel,
    /// Leave the datasets on whatever pages the host's THP mode gives
    /// (by default the graph and the permutation are advised onto huge pages).
    #[arg(long)]
    pub no_huge_pages: bool,
}

/// How the leaf serves requests (`--serving-model`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ServingModel {
    /// Upstream's: one serving thread per request from start to reply.
    #[default]
    Blocking,
    /// Ours: the IO wait is a timer; no thread is held through it.
    Async,
}

impl ServingModel {
    pub fn name(self) -> &'static str {
        match self {
            ServingModel::Blocking => "blocking",
            ServingModel::Async => "async",
        }
    }
}

/// The load driver (`--driver`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum DriverModel {
    /// Open loop, timed from the intended start (no coordinated omission).
    #[default]
    Open,
    /// DCPerf's closed-loop driver: threads x 4 connections at depth 1.
    ClosedCompat,
}

/// Connections per driver thread of DCPerf's driver (run.sh and
/// search_qps.sh pass `--connections=4`; depth stays at its default 1).
pub const COMPAT_CONNECTIONS: usize = 4;

/// run.sh's DRIVER_THREADS: nproc/5 (SMT) or nproc/4, rounded to nearest,
/// at least 4.
pub fn default_driver_threads(nproc: usize, smt: bool) -> usize {
    let per = if smt { 5.0 } else { 4.0 };
    ((nproc as f64 / per + 0.5) as usize).max(4)
}

/// run.sh's driver for fixed rates (`-q`): `rate / 4` threads (bash's
/// integer division of the last rate of the list, as its arithmetic reads
/// `2,4` as `4`), within 1..=`threads`, for every run of the experiment
/// (warm-up included), whatever `-a` says.
pub fn fixed_qps_driver_threads(rates: &[f64], threads: usize) -> usize {
    let last = rates.last().copied().unwrap_or(0.0).max(0.0).trunc() as usize;
    (last / COMPAT_CONNECTIONS).clamp(1, threads.max(1))
}

/// search_qps.sh -a: `requested_qps / 4` (integer), within 1..=`max`;
/// the unthrottled runs (no rate) use `max`.
pub fn auto_driver_threads(rate: Option<f64>, max: usize) -> usize {
    match rate {
        Some(q) => ((q / COMPAT_CONNECTIONS as f64) as usize).clamp(1, max.max(1)),
        None => max.max(1),
    }
}

/// `rackbench feedsim`: upstream run.sh.
#[derive(Debug, Parser, Clone)]
#[command(
    name = "rackbench feedsim",
    about = "FeedSim: find the max QPS of the ranking leaf with p95 <= 500 ms (upstream run.sh)",
    disable_help_subcommand = true,
    // As run.sh's loop over its flags: a flag given again overrides
    // (run-feedsim-multi.sh passes `-i` and the job's own flags after it).
    args_override_self = true
)]
pub struct DriverArgs {
    #[command(flatten)]
    pub shape: ShapeArgs,
    /// Scale the driver's workers with the requested rate.
    #[arg(short = 'a', long = "auto-workers")]
    pub auto_workers: bool,
    /// Fixed-QPS experiments instead of a search: QPS[,QPS..].
    #[arg(short = 'q', long = "qps", value_delimiter = ',', allow_negative_numbers = true, value_parser = positive_rate)]
    pub qps: Vec<f64>,
    /// Duration of each fixed-QPS experiment, seconds.
    #[arg(short = 'd', long = "duration", default_value_t = 300, allow_negative_numbers = true, value_parser = positive_whole_secs)]
    pub duration: u64,
    /// Unthrottled warm-up before measuring, seconds: the longest one (see
    /// --warmup-steady); 0 = none.
    #[arg(short = 'w', long = "warmup", default_value_t = 120, allow_negative_numbers = true, value_parser = whole::<u64>)]
    pub warmup: u64,
    /// Adaptive warm-up: it ends (after at least 30 s) once two consecutive
    /// 10 s pieces of it agree in throughput within this fraction; 0 = run
    /// all of -w, as upstream.
    #[arg(long, default_value_t = 0.03, allow_negative_numbers = true, value_parser = fraction)]
    pub warmup_steady: f64,
    /// The leaf's port (default 11222; with --num-instances the first
    /// instance's, default 21212, instance i on port + i).
    #[arg(short = 'p', long = "port", allow_negative_numbers = true)]
    pub port: Option<u16>,
    /// Output CSV, one row per probe (relative paths go to the metrics folder).
    #[arg(short = 'o', long = "output", default_value = "feedsim_results.txt")]
    pub output: PathBuf,
    /// Latency target, METRIC:MS with METRIC in avg|50p|90p|95p|99p|99.9p.
    #[arg(long = "target")]
    pub target: Option<SloTarget>,
    /// Short probes for smoke runs and CI.
    #[arg(long)]
    pub quick: bool,
    /// The load driver. `open` (ours, the default): requests leave on
    /// schedule whatever the leaf does, each timed from when it was due.
    /// `closed-compat`: DCPerf's DriverNodeRank, --driver-threads x 4
    /// connections at depth 1; a request due while all are busy waits and
    /// is timed from its send, and QPS counts sends, as upstream reports it.
    #[arg(long, value_enum, default_value_t = DriverModel::Open)]
    pub driver: DriverModel,
    /// run.sh's -l: threads generating the load. Closed-compat: its threads
    /// (4 connections each); default run.sh's DRIVER_THREADS,
    /// max(round(nproc/5), 4) with SMT, max(round(nproc/4), 4) without;
    /// with -q, min(last rate/4, that), at least 1; a search with -a sizes
    /// them by rate as search_qps.sh (min(rate/4, max(round(nproc/5), 4)),
    /// without -l). Open loop: the driver's threads (default 1). Upstream's
    /// newer run.sh spells it --num-driver-threads.
    #[arg(short = 'l', long, alias = "num-driver-threads", allow_negative_numbers = true, value_parser = at_least_one::<usize>)]
    pub driver_threads: Option<usize>,
    /// Arrival process of the driver (upstream paces at a constant rate).
    #[arg(long, default_value = "constant")]
    pub arrival: Arrival,
    /// Length of each search probe, seconds (default: 30, 4 with --quick).
    #[arg(long, allow_negative_numbers = true, value_parser = positive_secs)]
    pub probe_secs: Option<f64>,
    /// Length of the confirming final run, seconds (default: 60, 8 with --quick).
    #[arg(long, allow_negative_numbers = true, value_parser = positive_secs)]
    pub final_secs: Option<f64>,
    /// A search probe whose percentile is within this fraction of the target
    /// is a close call and is measured longer (0 = never); so is the first
    /// final run that just misses (within it above the target, or only in
    /// its steady-state tail), by another final length.
    #[arg(long, default_value_t = 0.1, allow_negative_numbers = true, value_parser = fraction)]
    pub close_call: f64,
    /// How many times a close call is extended by another probe length.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true, value_parser = whole::<usize>)]
    pub extensions: usize,
    /// Steady-state rule: a probe also fails when the requests completing in
    /// this last fraction of its window miss the target (latency still
    /// rising); 0 = judge the whole window only, as upstream.
    #[arg(long, default_value_t = 0.25, allow_negative_numbers = true, value_parser = fraction)]
    pub steady_tail: f64,
    /// Relative tolerance of the search.
    #[arg(long, default_value_t = 0.03, allow_negative_numbers = true, value_parser = search_tolerance)]
    pub tolerance: f64,
    /// Drive a leaf that is already running at HOST:PORT instead of starting one.
    #[arg(long)]
    pub leaf: Option<String>,
    /// CPUs the leaf is pinned to, e.g. 0-3,8.
    #[arg(long)]
    pub leaf_cpus: Option<String>,
    /// Autoscale: run this many leaf instances, each pinned to an even share
    /// of the physical cores (with their SMT siblings), searching in
    /// parallel; 0 or less = ceil(logical CPUs / 100).
    #[arg(long, allow_negative_numbers = true)]
    pub num_instances: Option<i64>,
}

// Value parsers: a meaningless number is refused while parsing, so clap's
// message names the flag ("invalid value '0' for '--duration <DURATION>':
// must be at least 1") and nothing starts. Numeric flags also take
// `allow_negative_numbers`, so `-d -5` is read as a value and refused
// here instead of being taken for an unknown flag.

/// The graph's log2 size: 2^0 is a single node, and beyond 2^40 nodes no
/// host has the memory.
fn graph_scale(s: &str) -> Result<u32, String> {
    match int(s)? {
        n if (1..=40).contains(&n) => Ok(fit(n)?),
        _ => Err("must be from 1 to 40".into()),
    }
}

/// Port of the single leaf when -p is not given.
pub const DEFAULT_PORT: u16 = 11222;
/// First autoscale instance's port when -p is not given.
pub const AUTOSCALE_BASE_PORT: u16 = 21212;

/// Instances for `--num-instances n` on a host with `nproc` logical CPUs.
pub fn instances_for(n: i64, nproc: usize) -> usize {
    if n > 0 {
        n as usize
    } else {
        nproc.div_ceil(100).max(1)
    }
}

/// Thread defaults from upstream run.sh: nproc and whether SMT is on.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Threads {
    pub serving: usize,
    pub ranking: usize,
    pub ser: usize,
}

pub fn default_threads(nproc: usize, smt: bool) -> Threads {
    let (rank_num, ser_num) = if smt { (7, 7) } else { (15, 11) };
    Threads {
        serving: nproc.clamp(1, 216),
        ranking: (nproc * rank_num / 20).max(1),
        ser: (nproc * ser_num / 20).clamp(1, 55),
    }
}

impl ShapeArgs {
    /// The latency target given through `-s METRIC:MS`, if any.
    pub fn target_from_s(&self) -> Result<Option<SloTarget>, Error> {
        match &self.srv_io {
            Some(v) if v.contains(':') => v.parse().map(Some).map_err(Error::Input),
            _ => Ok(None),
        }
    }

    /// Resolved thread counts.
    pub fn threads(&self, nproc: usize, smt: bool) -> Result<Threads, Error> {
        let d = default_threads(nproc, smt);
        let ser = match &self.srv_io {
            Some(v) if !v.contains(':') => {
                v.parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(|| {
                    Error::Input(format!("-s takes a thread count or METRIC:MS, got '{v}'"))
                })?
            }
            _ => d.ser,
        };
        let pos = |name: &str, v: Option<usize>, def: usize| match v {
            Some(0) => Err(Error::Input(format!("{name} must be at least 1"))),
            Some(n) => Ok(n),
            None => Ok(def),
        };
        Ok(Threads {
            serving: pos("-t", self.threads, d.serving)?,
            ranking: pos("-c", self.cpu_threads, d.ranking)?,
            ser,
        })
    }

    /// Arguments that reproduce these settings for the leaf process.
    pub fn to_leaf_args(&self, t: Threads) -> Vec<String> {
        let mut args = vec![
            "-t".into(),
            t.serving.to_string(),
            "-c".into(),
            t.ranking.to_string(),
            "-s".into(),
            t.ser.to_string(),
            "-i".into(),
            self.icache_iterations.to_string(),
            "--scale".into(),
            self.scale.to_string(),
            "--graph-subset".into(),
            self.graph_subset.to_string(),
            "--num-objects".into(),
            self.num_objects.to_string(),
            "--chase-entries".into(),
            self.chase_entries.to_string(),
            "--io-wait-ms".into(),
            self.io_wait_ms.to_string(),
            "--seed".into(),
            self.seed.to_string(),
        ];
        args.push("--serving-model".into());
        args.push(self.serving_model.name().into());
        if self.no_huge_pages {
            args.push("--no-huge-pages".into());
        }
        args
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_driver_threads() {
        // run.sh: max(round(nproc / 5), 4) with SMT, / 4 without.
        assert_eq!(default_driver_threads(2, false), 4);
        assert_eq!(default_driver_threads(176, true), 35);
        assert_eq!(default_driver_threads(178, true), 36);
        assert_eq!(default_driver_threads(40, false), 10);
        assert_eq!(default_driver_threads(42, false), 11);
        // search_qps.sh -a: rate / 4 within 1..=max.
        assert_eq!(auto_driver_threads(Some(2.0), 4), 1);
        assert_eq!(auto_driver_threads(Some(13.9), 4), 3);
        assert_eq!(auto_driver_threads(Some(400.0), 35), 35);
        assert_eq!(auto_driver_threads(None, 35), 35);
        // run.sh -q: min(rate / 4, DRIVER_THREADS), at least 1; the last
        // rate of a list.
        assert_eq!(fixed_qps_driver_threads(&[2.0], 4), 1);
        assert_eq!(fixed_qps_driver_threads(&[16.0], 4), 4);
        assert_eq!(fixed_qps_driver_threads(&[100.0], 4), 4);
        assert_eq!(fixed_qps_driver_threads(&[100.0, 9.5], 4), 2);
        // A flag given again overrides, as in run.sh's loop.
        let a = DriverArgs::try_parse_from(["feedsim", "-i", "400000", "-i", "20000"]).unwrap();
        assert_eq!(a.shape.icache_iterations, 20_000);
    }

    #[test]
    fn upstream_thread_defaults() {
        assert_eq!(
            default_threads(2, false),
            Threads {
                serving: 2,
                ranking: 1,
                ser: 1
            }
        );
        assert_eq!(
            default_threads(176, true),
            Threads {
                serving: 176,
                ranking: 61,
                ser: 55
            }
        );
        assert_eq!(default_threads(400, true).serving, 216);
        assert_eq!(
            default_threads(40, false),
            Threads {
                serving: 40,
                ranking: 30,
                ser: 22
            }
        );
    }

    #[test]
    fn autoscale_instance_count() {
        assert_eq!(instances_for(-1, 2), 1);
        assert_eq!(instances_for(0, 100), 1);
        assert_eq!(instances_for(-1, 101), 2);
        assert_eq!(instances_for(-1, 384), 4);
        assert_eq!(instances_for(3, 2), 3);
        let a = DriverArgs::try_parse_from(["x", "--num-instances", "-1"]).unwrap();
        assert_eq!(a.num_instances, Some(-1));
        assert!(DriverArgs::try_parse_from(["x", "--num-instances", "two"]).is_err());
    }

    #[test]
    fn meaningless_numbers_are_value_errors() {
        use clap::error::ErrorKind;
        for args in [
            &["x", "-d", "0"][..],
            &["x", "-d", "-5"],
            &["x", "-t", "0"],
            &["x", "-q", "1,-3"],
            &["x", "-q", "inf"],
            &["x", "--scale", "41"],
            &["x", "--probe-secs", "NaN"],
            &["x", "-d", "99999999999999999999999"],
        ] {
            let e = DriverArgs::try_parse_from(args).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::ValueValidation, "{args:?}: {e}");
        }
        let a =
            DriverArgs::try_parse_from(["x", "-w", "0", "-i", "0", "--io-wait-ms", "0"]).unwrap();
        assert_eq!(
            (a.warmup, a.shape.icache_iterations, a.shape.io_wait_ms),
            (0, 0, 0)
        );
        let a = DriverArgs::try_parse_from(["x", "-d", "7", "-q", "2.5,4"]).unwrap();
        assert_eq!((a.duration, a.qps), (7, vec![2.5, 4.0]));
    }

    #[test]
    fn s_is_threads_or_a_target() {
        let a = DriverArgs::try_parse_from(["x", "-s", "95p:400"]).unwrap();
        assert_eq!(a.shape.target_from_s().unwrap().unwrap().latency_ms, 400.0);
        assert_eq!(a.shape.threads(8, false).unwrap().ser, 4);
        let a = DriverArgs::try_parse_from(["x", "-s", "3"]).unwrap();
        assert_eq!(a.shape.threads(8, false).unwrap().ser, 3);
        assert!(a.shape.target_from_s().unwrap().is_none());
        let a = DriverArgs::try_parse_from(["x", "-s", "lots"]).unwrap();
        assert!(a.shape.threads(8, false).is_err());
        assert!(DriverArgs::try_parse_from(["x", "--bogus"]).is_err());
    }
}
