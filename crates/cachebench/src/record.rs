//! What a CacheBench run keeps with its stored run (the typed record):
//! the command writes it, the `metrics` module derives the report's metrics
//! from it, and the upstream text is printed again from it.

use crate::stats::RunStats;

/// What a CacheBench run keeps with its stored run: each instance's
/// end-of-run figures and failure lines, and with several instances their
/// sums. The command's `write_record` prints upstream's end-of-run text from it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct CacheBenchRecord {
    pub instances: Vec<InstanceRecord>,
    pub aggregated: Option<RunStats>,
    /// Our charts of the progress samples, as written.
    pub charts: Vec<String>,
    /// Ctrl-C stopped the run.
    pub interrupted: bool,
    /// `--timeout_seconds` stopped the run.
    pub stopped_by_timeout_seconds: Option<u64>,
    /// The NVM device error that ended the run.
    pub nvm_failure: Option<String>,
    /// The `--output_layout` the run printed in (and is printed again in);
    /// runs stored before it was kept print in the current layout.
    #[serde(default)]
    pub layout: crate::output::Layout,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct InstanceRecord {
    pub stats: RunStats,
    /// The lines upstream prints after the figures when the run failed.
    pub failures: Vec<String>,
    /// A replay's reader counts (upstream's `== KVReplayGenerator Stats ==`
    /// block); none for the synthetic generators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator: Option<GeneratorStats>,
    /// `printNvmCounters`: the `== NVM Counters Map ==` block is printed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub print_nvm_counters: bool,
}

/// What a replay generator counted, for its stats block.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GeneratorStats {
    /// Upstream's generator class: `KVReplayGenerator` or
    /// `BinaryKVReplayGenerator`.
    pub name: String,
    pub samples: u64,
    pub parse_errors: u64,
}
