//! CacheBench's command line: the arguments (CacheLib's gflags names and
//! rackbench's own) and their parsing.

use crate::output;
use clap::Parser;
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "rackbench cachebench",
    about = "CacheLib's CacheBench: a DRAM + NVM (flash) cache under synthetic or replayed traffic, configured by CacheLib's JSON test configs"
)]
pub(crate) struct Args {
    /// CacheLib test config (JSON with comments; an array runs several
    /// instances at once).
    #[arg(long = "json_test_config", value_name = "FILE")]
    pub(crate) json_test_config: PathBuf,
    /// Seconds between progress lines (0: none).
    #[arg(long, default_value_t = 60)]
    pub(crate) progress: u64,
    /// Also write a full stats block every progress interval to this file.
    #[arg(long = "progress_stats_file", value_name = "FILE")]
    pub(crate) progress_stats_file: Option<PathBuf>,
    /// rackbench's flag: which generation of upstream's text to print.
    /// `current`: as upstream prints it today (plain integers, `Instance
    /// N:` progress lines, `== Throughput Stats ==`, `Finished!`).
    /// `legacy`: as upstream printed it until January 2026 (thousands
    /// separators, `== Throughput for  ==`, progress lines also on stdout
    /// with a stats file, results on stdout only).
    #[arg(
        long = "output_layout",
        value_name = "LAYOUT",
        value_enum,
        default_value_t = output::Layout::Current
    )]
    pub(crate) output_layout: output::Layout,
    /// Stop the run after this many seconds (0: run all operations).
    #[arg(long = "timeout_seconds", default_value_t = 0)]
    pub(crate) timeout_seconds: u64,
    /// Time every get and set and report their latency percentiles.
    #[arg(long = "report_api_latency")]
    pub(crate) report_api_latency: bool,
    /// Config keys rackbench does not know, or knows and does not model
    /// (upstream would apply them), are errors rather than warnings.
    #[arg(long)]
    pub(crate) strict: bool,
    /// Put the NVM tier on these paths (comma-separated directories, files
    /// or block devices) instead of the config's nvmCachePaths.
    #[arg(long = "nvm_cache_paths", value_name = "PATH[,PATH..]")]
    pub(crate) nvm_cache_paths: Option<String>,
    /// rackbench's flag: every instance's DRAM cache is this many MB
    /// instead of its cacheSizeMB (for a host without the config's memory;
    /// keys, operations and distributions stay the config's).
    #[arg(long = "cache_size_mb", value_name = "MB")]
    pub(crate) cache_size_mb: Option<u64>,
    /// rackbench's flag: every instance's NVM tier is this many MB per path
    /// instead of its nvmCacheSizeMB (for a host without the config's
    /// disk; keys, operations and distributions stay the config's).
    #[arg(long = "nvm_cache_size_mb", value_name = "MB")]
    pub(crate) nvm_cache_size_mb: Option<u64>,
    /// Refuse NVM paths that do not support O_DIRECT (default: fall back to
    /// buffered I/O with a warning).
    #[arg(long = "require_direct_io")]
    pub(crate) require_direct_io: bool,
    /// Seed of the workload's random draws.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
}

pub(crate) fn parse(args: &[String]) -> anyhow::Result<Args> {
    let argv = std::iter::once("cachebench".to_string()).chain(args.iter().map(|a| {
        // gflags' single-dash forms (-json_test_config=F).
        if a.len() > 2 && a.starts_with('-') && !a.starts_with("--") {
            format!("-{a}")
        } else {
            a.clone()
        }
    }));
    Args::try_parse_from(argv).map_err(|e| anyhow::anyhow!("{}", e.render().to_string().trim_end()))
}
