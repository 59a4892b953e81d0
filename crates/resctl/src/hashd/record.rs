//! hashd's typed record (what a run keeps with its stored run) and the
//! report's metrics derived from it.

use super::engine::Stat;
use serde::{Deserialize, Serialize};

/// What a hashd run keeps with its stored run; the report's metrics are
/// derived from it ([`HashdRecord::metrics`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HashdRecord {
    pub summary: HashdSummary,
    /// With `--bench*`.
    pub bench: Option<BenchRecord>,
    pub elapsed_secs: f64,
    pub testfiles_created: u64,
    pub testfiles_reused: u64,
    pub log_lines_dropped: u64,
    /// Stopped by Ctrl-C (or the job's timeout) rather than `--duration`.
    pub interrupted: bool,
    /// What made the run fail, if something did.
    pub error: Option<String>,
}

/// The run's figures: means over the second half of the control periods
/// (the first half is the controllers settling).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HashdSummary {
    pub periods: usize,
    pub rps: f64,
    pub concurrency: f64,
    /// Latency percentiles, seconds.
    pub lat_p50: f64,
    pub lat_p95: f64,
    pub lat_p99: f64,
    /// Requests done over the whole run.
    pub nr_done: u64,
}

/// A `--bench*` run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchRecord {
    /// `None` unless every requested search finished (and one of the
    /// rps_max and memory searches was asked for).
    pub result: Option<BenchResult>,
    /// With `--bench-cpu-single`, once it finished.
    #[serde(default)]
    pub single: Option<SingleResult>,
    /// The rps_max or memory search was asked for (false: the single-CPU
    /// bench alone).
    #[serde(default = "yes")]
    pub searched: bool,
}

fn yes() -> bool {
    true
}

/// What the single-CPU bench found (or was given).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SingleResult {
    /// Mean file bytes per request (`file_size_mean`).
    pub hash_size: u64,
    pub chunk_pages: usize,
    /// False when a request's latency missed 15 ms by more than 5%.
    pub converged: bool,
}

/// What the searches found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchResult {
    pub rps_max: u32,
    /// False when rps_max did not converge to the latency target.
    pub converged: bool,
    /// The memory footprint at `mem_frac`, bytes.
    pub footprint_bytes: u64,
    /// Found by the memory search, else the params file's.
    pub mem_frac: f64,
    /// Mean file bytes per request (`file_size_mean`).
    pub hash_size: u64,
    /// With the memory search.
    pub mem: Option<MemResult>,
}

/// The memory search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemResult {
    /// The footprint at mem_frac 1.0 (`--size`).
    pub mem_size: u64,
    pub probes: Vec<ProbeRecord>,
}

/// One probe of the memory search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeRecord {
    pub stage: String,
    pub mem_frac: f64,
    pub rps: f64,
    pub end: String,
}

/// The report's metrics of a hashd run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HashdMetrics {
    pub periods: usize,
    pub rps: f64,
    pub concurrency: f64,
    pub lat_p50_ms: f64,
    pub lat_p95_ms: f64,
    pub lat_p99_ms: f64,
    pub nr_done: u64,
    /// With `--bench*`: `false` unless the searches finished and rps_max
    /// converged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rps_max_converged: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rps_max: Option<u32>,
    /// With `--bench-cpu-single`: the hash size (file_size_mean), its
    /// chunk_pages, and whether a lone request met 15 ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hash_size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunk_pages: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hash_size_converged: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_frac: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_probes: Option<Vec<ProbeMetrics>>,
    pub elapsed_secs: f64,
    pub testfiles_created: u64,
    pub testfiles_reused: u64,
    pub log_lines_dropped: u64,
    /// Only `true`, when interrupted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A memory probe in the metrics.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProbeMetrics {
    pub stage: String,
    pub mem_frac: f64,
    pub rps: f64,
    pub end: String,
}

impl HashdSummary {
    /// The means over the second half of `history`.
    pub fn of(history: &[Stat]) -> HashdSummary {
        let tail = &history[history.len() / 2..];
        let n = tail.len().max(1) as f64;
        let mean = |f: &dyn Fn(&Stat) -> f64| tail.iter().map(f).sum::<f64>() / n;
        HashdSummary {
            periods: history.len(),
            rps: mean(&|s| s.rps),
            concurrency: mean(&|s| s.concurrency),
            lat_p50: mean(&|s| s.lat.p50),
            lat_p95: mean(&|s| s.lat.p95),
            lat_p99: mean(&|s| s.lat.p99),
            nr_done: history.last().map(|s| s.nr_done).unwrap_or(0),
        }
    }
}

impl HashdRecord {
    /// Neither stopped nor failed.
    pub fn success(&self) -> bool {
        !self.interrupted && self.error.is_none()
    }

    /// The report's metrics of the run.
    pub fn metrics(&self) -> HashdMetrics {
        let s = &self.summary;
        let found = self.bench.as_ref().and_then(|b| b.result.as_ref());
        let mem = found.and_then(|r| r.mem.as_ref());
        let single = self.bench.as_ref().and_then(|b| b.single.as_ref());
        HashdMetrics {
            periods: s.periods,
            rps: s.rps,
            concurrency: s.concurrency,
            lat_p50_ms: s.lat_p50 * 1000.0,
            lat_p95_ms: s.lat_p95 * 1000.0,
            lat_p99_ms: s.lat_p99 * 1000.0,
            nr_done: s.nr_done,
            rps_max_converged: self
                .bench
                .as_ref()
                .filter(|b| b.searched)
                .map(|b| b.result.as_ref().is_some_and(|r| r.converged)),
            rps_max: found.map(|r| r.rps_max),
            hash_size: single.map(|s| s.hash_size),
            chunk_pages: single.map(|s| s.chunk_pages),
            hash_size_converged: single.map(|s| s.converged),
            mem_frac: mem.and(found).map(|r| r.mem_frac),
            mem_size: mem.map(|m| m.mem_size),
            mem_probes: mem.map(|m| {
                m.probes
                    .iter()
                    .map(|p| ProbeMetrics {
                        stage: p.stage.clone(),
                        mem_frac: p.mem_frac,
                        rps: p.rps,
                        end: p.end.clone(),
                    })
                    .collect()
            }),
            elapsed_secs: self.elapsed_secs,
            testfiles_created: self.testfiles_created,
            testfiles_reused: self.testfiles_reused,
            log_lines_dropped: self.log_lines_dropped,
            interrupted: self.interrupted.then_some(true),
            error: self.error.clone(),
        }
    }
}
