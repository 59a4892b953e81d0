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
}

/// The report's figures of a `protection` job: the combined scenarios'
/// isolation, latency impact and work conservation, in percent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProtectionMetrics {
    pub protection_isol_pct: f64,
    pub protection_isol_p05_pct: f64,
    pub protection_lat_imp_pct: f64,
    pub protection_work_csv_pct: f64,
}
