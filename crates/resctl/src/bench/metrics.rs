//! The report's metrics of resctl-bench jobs: each bench's typed figures
//! and [`JobMetrics`], which holds them. Below the benches and their
//! common types, so that both can name them without importing each other.

use serde::Serialize;

/// The report's metrics of a `run`'s result file: the key figures of the
/// latest completed job of each kind, each bench's part absent when the
/// file has no completed job of its kind.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct JobMetrics {
    #[serde(flatten)]
    pub hashd_params: Option<HashdParamsMetrics>,
    #[serde(flatten)]
    pub iocost_params: Option<IoCostParamsMetrics>,
    #[serde(flatten)]
    pub protection: Option<ProtectionMetrics>,
    #[serde(flatten)]
    pub storage: Option<StorageMetrics>,
}

/// The report's figures of a `hashd-params` job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HashdParamsMetrics {
    pub hashd_rps_max: u32,
    pub hashd_mem_frac: f64,
    pub hashd_mem_actual_bytes: u64,
}

/// The report's figures of an `iocost-params` job: its cost model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IoCostParamsMetrics {
    pub iocost_rbps: u64,
    pub iocost_wbps: u64,
    pub iocost_rrandiops: u64,
    pub iocost_wrandiops: u64,
}

/// The report's figures of a `storage` job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StorageMetrics {
    pub storage_mof: f64,
    pub storage_mem_usage_bytes: f64,
    pub storage_mem_size_bytes: f64,
    pub storage_rbps_final: f64,
    pub storage_wbps_final: f64,
    /// Each loop (retried ones too), in run order; absent without loops.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub storage_loops: Vec<StorageLoopMetrics>,
}

/// One loop of a `storage` job: the footprint hashd sustained at rps_max
/// against the memory it used, and its memory-size search.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StorageLoopMetrics {
    /// Kept in the means (false: retried).
    pub used: bool,
    /// size / usage: the loop's memory offloading factor (`null` without
    /// usage).
    pub mof: Option<f64>,
    pub mem_usage_bytes: u64,
    pub mem_size_bytes: u64,
    pub mem_frac: f64,
    /// hashd's memory-search probes, in order.
    pub probes: Vec<StorageProbeMetrics>,
}

/// A probe of hashd's memory-size search: the footprint fraction tried
/// and the rate it served there.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StorageProbeMetrics {
    pub stage: String,
    pub mem_frac: f64,
    pub rps: f64,
}

/// The report's figures of a `protection` job: the combined scenarios'
/// isolation, latency impact and work conservation, in percent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProtectionMetrics {
    pub protection_isol_pct: f64,
    pub protection_isol_p05_pct: f64,
    pub protection_lat_imp_pct: f64,
    pub protection_work_csv_pct: f64,
    /// Each scenario's figures, in run order; absent without scenarios.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub protection_scenarios: Vec<ProtectionScenarioMetrics>,
}

/// One memory-hog scenario of a `protection` job, in percent: isolation
/// (hashd's rate under the hog against its baseline: mean and 5th
/// percentile), latency impact (mean and 95th percentile), work
/// conservation and failed time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProtectionScenarioMetrics {
    /// hashd's load (fraction of rps_max), the hog's speed and its runs,
    /// as the scenario was run (`null` when the record lacks them).
    pub load: Option<f64>,
    pub speed: Option<String>,
    pub loops: Option<u32>,
    /// `null` when the scenario has no isolation sample (upstream's `-`).
    pub isol_pct: Option<f64>,
    pub isol_p05_pct: Option<f64>,
    pub lat_imp_pct: Option<f64>,
    pub lat_imp_p95_pct: Option<f64>,
    pub work_csv_pct: f64,
    pub fail_pct: f64,
}
