//! hashd's command line: the clap arguments, `--help` and parsing.

use clap::Parser;
use std::path::PathBuf;

/// hashd: a latency-sensitive workload (rd-hashd's model). Each request
/// reads test-file pages through the page cache, touches anonymous memory,
/// hashes what it read with SHA1 and sleeps; concurrency is steered to
/// keep the p95 latency at the target while meeting the rate target.
#[derive(Debug, Parser)]
#[command(name = "rackbench resctl hashd", disable_version_flag = true)]
pub struct HashdArgs {
    /// Test file directory.
    #[arg(short = 't', long = "testfiles", value_name = "DIR")]
    pub(super) testfiles: Option<PathBuf>,
    /// Footprint at mem_frac 1.0 (default 4 x memory), e.g. 8G.
    #[arg(short = 's', long = "size", value_name = "SIZE")]
    pub(super) size: Option<String>,
    /// Share of the footprint backed by test files (0.25).
    #[arg(short = 'f', long = "file-max", value_name = "FRAC")]
    pub(super) file_max: Option<f64>,
    /// Share of zeros in the test data (0).
    #[arg(short = 'c', long = "compressibility", value_name = "FRAC")]
    pub(super) compressibility: Option<f64>,
    /// Runtime parameters file (created with defaults when missing;
    /// reloaded when it changes).
    #[arg(short = 'p', long = "params", value_name = "FILE")]
    pub(super) params: Option<PathBuf>,
    /// Report file, rewritten every second.
    #[arg(short = 'r', long = "report", value_name = "FILE")]
    pub(super) report: Option<PathBuf>,
    /// Hash log directory.
    #[arg(short = 'l', long = "log-dir", value_name = "DIR")]
    pub(super) log_dir: Option<PathBuf>,
    /// Bytes of hash log kept (default: half of memory).
    #[arg(short = 'L', long = "log-size", value_name = "SIZE")]
    pub(super) log_size: Option<String>,
    /// Seconds between status lines (10; 0: none).
    #[arg(short = 'i', long = "interval", value_name = "SECS")]
    pub(super) interval: Option<u32>,
    /// Arguments file: read when it exists, written with the options given.
    #[arg(short = 'a', long = "args", value_name = "FILE")]
    pub(super) args: Option<PathBuf>,
    /// Force rotational mode on (true) or off (false) instead of detecting
    /// it from the test files' and swap's devices; rotational mode
    /// lengthens the memory search's settling windows and keeps a slow
    /// round from ending early. Saved in the args file.
    #[arg(short = 'R', long = "rotational", value_name = "BOOL")]
    pub(super) rotational: Option<bool>,
    /// Don't drop the test files from the page cache after preparing them.
    #[arg(long)]
    pub(super) keep_cache: bool,
    /// Clear the test files before preparing them (then carry on).
    #[arg(long)]
    pub(super) clear_testfiles: bool,
    /// Print the version (`rd-hashd VERSION TARGET`) and exit.
    #[arg(short = 'V', long = "version")]
    pub(super) version: bool,
    /// Write the args and params files and exit.
    #[arg(long)]
    pub(super) prepare_config: bool,
    /// Write the config files and the test files and exit.
    #[arg(long)]
    pub(super) prepare: bool,
    /// `--bench-cpu` then `--bench-mem`; the results are saved in the
    /// params file.
    #[arg(long)]
    pub(super) bench: bool,
    /// Benchmark the hash size (file_size_mean: a lone request hashes for
    /// 15 ms) and chunk_pages instead of taking them from the params file;
    /// runs before `--bench-cpu`/`--bench-mem` when given with them, alone
    /// it is the whole bench.
    #[arg(long)]
    pub(super) bench_cpu_single: bool,
    /// Find rps_max: the rate at which the p95 latency meets the target
    /// with the whole footprint in use. Implied by `--bench`.
    #[arg(long)]
    pub(super) bench_cpu: bool,
    /// Find mem_frac: the largest share of the footprint that still
    /// sustains rps_max (taken from the params file unless found in the
    /// same run or given with `--bench-rps-max`). Implied by `--bench`.
    #[arg(long)]
    pub(super) bench_mem: bool,
    /// `--bench` with short settling windows, at most two rounds of each
    /// search and one memory probe per stage (smoke runs, CI); with
    /// `--bench-cpu`, `--bench-mem` or `--bench-cpu-single`, those only,
    /// short.
    #[arg(long)]
    pub(super) bench_test: bool,
    /// Memory search resolution multiplier (1.0: bisect to 5% and refine
    /// in 2.5% steps; larger is coarser and faster).
    #[arg(long, value_name = "FACTOR", default_value_t = 1.0)]
    pub(super) bench_grain: f64,
    /// Fake the CPU load (sleep instead of hashing) during the memory
    /// bench; saved in the params file.
    #[arg(long)]
    pub(super) bench_fake_cpu_load: bool,
    /// Use this hash size (file_size_mean) in the bench instead of the
    /// params file's or `--bench-cpu-single`'s (0: not given).
    #[arg(long, value_name = "SIZE")]
    pub(super) bench_hash_size: Option<String>,
    /// Use this chunk_pages in the bench (0: not given).
    #[arg(long, value_name = "PAGES")]
    pub(super) bench_chunk_pages: Option<usize>,
    /// Use this rps_max instead of searching for it (0: not given).
    #[arg(long, value_name = "RPS")]
    pub(super) bench_rps_max: Option<u32>,
    /// Hash log write rate at rps_max (log_bps) saved by the bench
    /// (default: the params file's, 1.05M).
    #[arg(long, value_name = "BPS")]
    pub(super) bench_log_bps: Option<String>,
    /// Page cache share of the footprint (file_frac) for the memory bench,
    /// saved with its results (0: the params file's, 0.25).
    #[arg(long, value_name = "FRAC")]
    pub(super) bench_file_frac: Option<f64>,
    /// Before the memory bench, read this much of the test files into the
    /// page cache (default: memory x min(2 x file_frac, 1); 0: default;
    /// not with `--bench-test`).
    #[arg(long, value_name = "SIZE")]
    pub(super) bench_preload_cache: Option<String>,
    /// Memory size to assume (default: MemTotal).
    #[arg(long, value_name = "SIZE")]
    pub(super) total_memory: Option<String>,
    /// Swap size to assume (hashd sizes nothing by swap; checked only).
    #[arg(long, value_name = "SIZE")]
    pub(super) total_swap: Option<String>,
    /// CPUs to assume (default: those available).
    #[arg(long, value_name = "NR")]
    pub(super) nr_cpus: Option<usize>,
    /// Stop after this many seconds (default: until Ctrl-C).
    #[arg(long, value_name = "SECS")]
    pub(super) duration: Option<f64>,
    /// More detail: -v adds concurrency, in-flight, workers and done counts
    /// to the status and settling lines; -vv also drops the test file
    /// progress lines.
    #[arg(short = 'v', action = clap::ArgAction::Count)]
    pub(super) verbose: u8,
    /// Also write hashd's messages and status lines to FILE (appended).
    #[arg(long, value_name = "FILE")]
    pub(super) logfile: Option<PathBuf>,
}

/// `rackbench resctl hashd --help`.
pub fn help() -> String {
    use clap::CommandFactory;
    HashdArgs::command().render_long_help().to_string()
}

/// Parses hashd's options (`argv` after `hashd`).
pub fn parse(args: &[String]) -> anyhow::Result<HashdArgs> {
    let argv = std::iter::once("hashd".to_string()).chain(args.iter().cloned());
    HashdArgs::try_parse_from(argv)
        .map_err(|e| anyhow::anyhow!("{}", e.render().to_string().trim_end()))
}
