//! What a calibrate run keeps: the typed record ([`CalibrateRecord`]) of a
//! search or of `calibrate serve`, below the drive, the metrics and the
//! printer.

//! What a calibrate run keeps: the typed record ([`CalibrateRecord`]) of a
//! search or of `calibrate serve`, below the drive, the metrics and the
//! printer.

use crate::cli::ClientKind;
use load::SearchConfig;
use load::recorder::SecondSummary;
use load::report::SearchRecord;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The version of [`CalibrateRecord`]; raise it when its shape changes.
pub(crate) const RECORD_VERSION: u32 = 2;

/// What a calibrate run keeps with its stored run, by command.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum CalibrateRecord {
    /// The search (or fixed rates) against the M/D/c server.
    Search(Box<SearchRun>),
    /// `calibrate serve`: the server alone until stopped.
    Serve(ServeRecord),
}

/// A calibrate search: the search, the queue it ran against, the M/D/c
/// model's maximum rate under the target and what the server measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SearchRun {
    pub search: SearchRecord,
    /// The model's maximum rate under the target (`None` without workers, a
    /// service time or a percentile target; 0 when the target is below the
    /// service time).
    pub analytic_max_qps: Option<f64>,
    /// The arrival process (`poisson`, `constant`, `burst:N`).
    pub arrival: String,
    pub server_workers: usize,
    pub service_time_ms: f64,
    pub peak_qps: f64,
    pub success: bool,
    /// Stopped before the search ended: the probes so far.
    pub interrupted: bool,
    /// The final run, second by second.
    pub final_series: Vec<SecondSummary>,
    /// The probe CSV written (as the report names it).
    pub probe_csv: String,
    pub settings: SearchSettings,
    /// The built-in server's figures; `None` when driving a `--server`.
    pub own_server: Option<ServerStats>,
    /// The overhead probe, when one ran (absent in older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overhead: Option<OverheadRecord>,
    /// The host before and after the run (absent in older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<load::hostspeed::HostCheck>,
}

/// The chain's own time, measured before the search at 10% of the queue's
/// capacity, where a request almost never waits (M/D/c's chance of waiting
/// there is below 1e-4 for 8 workers): each reply's latency minus the
/// service time is what the client, the two gRPC stacks, the loopback and
/// the scheduler add. The model with overhead adds it to the queue's time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OverheadRecord {
    pub requested_qps: f64,
    pub duration_secs: f64,
    pub replies: u64,
    pub errors: u64,
    /// The service time subtracted, ms: the built-in server's mean over the
    /// probe (`service_measured`), else the nominal `--service-time-ms`.
    pub service_ms: f64,
    pub service_measured: bool,
    /// Latency minus that service time at the quantiles 0.005, 0.015, ...,
    /// 0.995, ms: equally likely values of the overhead.
    pub quantiles_ms: Vec<f64>,
}

impl OverheadRecord {
    /// The overhead at quantile `q` (0..1), ms: the equally likely value
    /// whose slot holds `q`, indexed by this record's own point count (NaN
    /// for a record without points).
    pub fn quantile(&self, q: f64) -> f64 {
        let n = self.quantiles_ms.len();
        let i = ((q.clamp(0.0, 1.0) * n as f64) as usize).min(n.saturating_sub(1));
        self.quantiles_ms.get(i).copied().unwrap_or(f64::NAN)
    }
}

/// The search's settings (the report's `search` object).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchSettings {
    pub tolerance: f64,
    pub min_completion: f64,
    pub warmup_secs: f64,
    pub peak_secs: f64,
    pub probe_secs: f64,
    pub probe_warmup_secs: f64,
    pub final_secs: f64,
    pub peak_concurrency: usize,
    /// The load generator's gRPC client (absent in records from before
    /// there was a choice: those used tonic's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientKind>,
    /// The open loop's wake-up coalescing window, microseconds (absent in
    /// records from before there was one: those sent each request at its
    /// own time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_ahead_us: Option<u64>,
}

impl SearchSettings {
    pub(crate) fn of(c: &SearchConfig) -> Self {
        SearchSettings {
            tolerance: c.tolerance,
            min_completion: c.min_completion,
            warmup_secs: c.warmup.as_secs_f64(),
            peak_secs: c.peak.as_secs_f64(),
            probe_secs: c.probe.as_secs_f64(),
            probe_warmup_secs: c.probe_warmup.as_secs_f64(),
            final_secs: c.final_duration.as_secs_f64(),
            peak_concurrency: c.peak_concurrency,
            client: None,
            send_ahead_us: None,
        }
    }
}

/// What the built-in server counted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerStats {
    pub requests: u64,
    pub mean_service: Option<Duration>,
}

/// `calibrate serve`: where it listened, its queue and what it served.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServeRecord {
    pub address: String,
    pub workers: usize,
    pub service_time_ms: f64,
    pub requests_served: u64,
    pub mean_service: Option<Duration>,
}
