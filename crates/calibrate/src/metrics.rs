//! The report's metrics of a calibrate run, derived from its record: the
//! measurement next to the M/D/c model's values (with the measured service
//! time and overhead when the overhead probe ran), and the marks of a
//! result calibrate cannot vouch for.

//! The report's metrics of a calibrate run, derived from its record: the
//! measurement next to the M/D/c model's values (with the measured service
//! time and overhead when the overhead probe ran), and the marks of a
//! result calibrate cannot vouch for.

use crate::mdc;
use crate::record::{SearchRun, SearchSettings, ServeRecord};
use load::ProbeRecord;
use load::recorder::SecondSummary;
use load::report::round3;
use serde::Serialize;

/// The report's metrics of `calibrate serve`.
#[derive(Debug, Serialize)]
pub struct ServeMetrics {
    pub requests_served: u64,
    /// `null` when nothing was served.
    pub mean_service_ms: Option<f64>,
}

/// The report's metrics of `calibrate serve`, from its record.
pub fn serve_metrics(r: &ServeRecord) -> ServeMetrics {
    ServeMetrics {
        requests_served: r.requests_served,
        mean_service_ms: r.mean_service.map(|d| d.as_secs_f64() * 1000.0),
    }
}

/// The report's metrics of a calibrate search.
#[derive(Debug, Serialize)]
pub struct SearchMetrics<'a> {
    pub target_percentile: &'static str,
    pub target_latency_msec: f64,
    pub arrival: &'a str,
    pub load_mode: &'static str,
    pub server_workers: usize,
    pub service_time_ms: f64,
    /// `null` without workers or a service time.
    pub capacity_qps: Option<f64>,
    /// `null` without a model value.
    pub analytic_max_qps: Option<f64>,
    pub peak_qps: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_requests: Option<u64>,
    /// Present with the built-in server; `null` when it served nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_mean_service_ms: Option<Option<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub analytic_max_qps_at_measured_service_time: Option<f64>,
    #[serde(flatten)]
    pub reported: Option<load::report::FinalMetrics>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_to_analytic_ratio: Option<f64>,
    /// The overhead probe's overhead (latency minus service time), ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overhead_ms: Option<OverheadSummary>,
    /// The model at the measured service time plus the measured overhead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub analytic_max_qps_with_overhead: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_to_model_with_overhead_ratio: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_to_capacity_ratio: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub analytic_latency_per_probe: Option<Vec<ProbeModel>>,
    pub search_success: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_failure: Option<&'a str>,
    pub partial: bool,
    pub probes: &'a [ProbeRecord],
    pub final_series: &'a [SecondSummary],
    pub probe_csv: &'a str,
    pub search: &'a SearchSettings,
    /// The host before and after the run, with the change between them
    /// in percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_check: Option<load::hostspeed::HostCheckMetrics>,
}

/// The overhead probe's figures in the report.
#[derive(Debug, Serialize)]
pub struct OverheadSummary {
    pub median: f64,
    pub p99: f64,
    pub mean: f64,
    pub requested_qps: f64,
    pub replies: u64,
    pub duration_secs: f64,
}

/// The model's value of the target percentile at a probed rate, next to
/// the measured one.
#[derive(Debug, Serialize)]
pub struct ProbeModel {
    pub seq: usize,
    pub requested_qps: f64,
    pub measured_ms: f64,
    /// `null` where the model has no value.
    pub analytic_ms: Option<f64>,
    /// With the measured service time and overhead (absent without an
    /// overhead probe).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub with_overhead_ms: Option<f64>,
}

/// The report's metrics of a calibrate search, from its record: the
/// measurement next to the M/D/c model's values.
pub fn search_metrics(r: &SearchRun) -> anyhow::Result<SearchMetrics<'_>> {
    let target = &r.search.target;
    let workers = r.server_workers;
    let service_s = r.service_time_ms / 1000.0;
    let q = target.percentile.quantile();
    let capacity = (workers > 0 && service_s > 0.0).then(|| mdc::Mdc::capacity(workers, service_s));
    let mut m = SearchMetrics {
        target_percentile: target.percentile.label(),
        target_latency_msec: target.latency_ms,
        arrival: &r.arrival,
        load_mode: "open loop; latency measured from the intended start",
        server_workers: workers,
        service_time_ms: r.service_time_ms,
        capacity_qps: capacity,
        analytic_max_qps: r.analytic_max_qps.map(round3),
        peak_qps: round3(r.peak_qps),
        server_requests: None,
        server_mean_service_ms: None,
        analytic_max_qps_at_measured_service_time: None,
        reported: None,
        measured_to_analytic_ratio: None,
        overhead_ms: r.overhead.as_ref().map(|o| OverheadSummary {
            median: o.quantile(0.5),
            p99: o.quantile(0.99),
            mean: round3(o.quantiles_ms.iter().sum::<f64>() / o.quantiles_ms.len().max(1) as f64),
            requested_qps: round3(o.requested_qps),
            replies: o.replies,
            duration_secs: round3(o.duration_secs),
        }),
        analytic_max_qps_with_overhead: None,
        measured_to_model_with_overhead_ratio: None,
        peak_to_capacity_ratio: capacity.map(|cap| round3(r.peak_qps / cap)),
        analytic_latency_per_probe: None,
        search_success: r.success,
        search_failure: r.search.failure.as_deref(),
        partial: r.interrupted,
        probes: &r.search.probes,
        final_series: &r.final_series,
        probe_csv: &r.probe_csv,
        search: &r.settings,
        host_check: r.host.map(|h| h.metrics()),
    };
    if let Some(s) = &r.own_server {
        m.server_requests = Some(s.requests);
        m.server_mean_service_ms = Some(s.mean_service.map(|d| round3(d.as_secs_f64() * 1000.0)));
        if let (Some(d), Some(q)) = (s.mean_service, q)
            && workers > 0
            && d.as_secs_f64() > 0.0
        {
            let eff =
                mdc::max_rate_for_target(workers, d.as_secs_f64(), q, target.latency_ms / 1000.0)?;
            m.analytic_max_qps_at_measured_service_time = Some(round3(eff));
        }
    }
    if let Some(f) = &r.search.reported {
        m.reported = Some(load::report::FinalMetrics::of(f));
        m.measured_to_analytic_ratio = r
            .analytic_max_qps
            .filter(|x| *x > 0.0)
            .map(|an| round3(f.requested_qps / an));
    }
    let with = model_with_overhead(r);
    if let Some(w) = with {
        m.analytic_max_qps_with_overhead = Some(round3(w.max_qps));
        if let Some(f) = r.search.reported.as_ref().filter(|_| w.max_qps > 0.0) {
            m.measured_to_model_with_overhead_ratio = Some(round3(f.requested_qps / w.max_qps));
        }
    }
    let overhead: Option<Vec<f64>> = r
        .overhead
        .as_ref()
        .filter(|_| with.is_some())
        .map(|o| o.quantiles_ms.iter().map(|ms| ms / 1000.0).collect());
    // The model's value of the target percentile at each probed rate, for
    // checking the measurement probe by probe.
    if let (Some(cap), Some(q)) = (capacity, q) {
        m.analytic_latency_per_probe = Some(
            r.search
                .probes
                .iter()
                .filter(|p| p.requested_qps > 0.0 && p.requested_qps < cap)
                .map(|p| ProbeModel {
                    seq: p.seq,
                    requested_qps: p.requested_qps,
                    measured_ms: p.target_value_ms,
                    analytic_ms: mdc::Mdc::new(workers, service_s, p.requested_qps)
                        .map(|m| round3(m.sojourn_quantile(q) * 1000.0))
                        .ok(),
                    with_overhead_ms: with.zip(overhead.as_ref()).and_then(|(w, o)| {
                        mdc::Mdc::new(workers, w.service_ms / 1000.0, p.requested_qps)
                            .map(|m| round3(m.sojourn_quantile_with(q, o) * 1000.0))
                            .ok()
                    }),
                })
                .collect(),
        );
    }
    Ok(m)
}

/// The model with what the run measured about the chain.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ModelWithOverhead {
    pub(crate) max_qps: f64,
    pub(crate) service_ms: f64,
    pub(crate) median_overhead_ms: f64,
}

/// The M/D/c model at the server's measured mean service time (the nominal
/// one with `--server`) plus the overhead probe's measured overhead, when
/// that probe ran and the target is a percentile.
pub(crate) fn model_with_overhead(r: &SearchRun) -> Option<ModelWithOverhead> {
    let o = r.overhead.as_ref().filter(|o| !o.quantiles_ms.is_empty())?;
    let q = r.search.target.percentile.quantile()?;
    let service_ms = r
        .own_server
        .as_ref()
        .and_then(|s| s.mean_service)
        .map_or(r.service_time_ms, |d| d.as_secs_f64() * 1000.0);
    let overhead: Vec<f64> = o.quantiles_ms.iter().map(|ms| ms / 1000.0).collect();
    let max_qps = mdc::max_rate_for_target_with(
        r.server_workers,
        service_ms / 1000.0,
        q,
        r.search.target.latency_ms / 1000.0,
        &overhead,
    )
    .ok()?;
    Some(ModelWithOverhead {
        max_qps,
        service_ms,
        median_overhead_ms: o.quantile(0.5),
    })
}

/// How far from 1 the measured/model ratio may be for calibrate to vouch
/// for a result (its runs on a quiet host stay within 3%).
pub const RATIO_VOUCHED: f64 = 0.10;

/// Why a calibrate result cannot be trusted: the host checks' concerns,
/// and a measured/model ratio further than [`RATIO_VOUCHED`] from 1 (the
/// model with the measured service time and overhead when the overhead
/// probe ran, else the pure M/D/c value).
pub fn marks_of(r: &SearchRun) -> Vec<String> {
    let mut out = r.host.map(|h| h.concerns()).unwrap_or_default();
    out.extend(load::search::unsteady(
        &r.search.probes,
        r.search.reported.as_ref(),
    ));
    let Some(f) = &r.search.reported else {
        return out;
    };
    let model = match model_with_overhead(r).filter(|m| m.max_qps > 0.0) {
        Some(m) => Some((
            m.max_qps,
            "the M/D/c model with the measured service time and overhead",
        )),
        None => r
            .analytic_max_qps
            .filter(|x| *x > 0.0)
            .map(|an| (an, "the M/D/c analytic value")),
    };
    if let Some((max, what)) = model {
        let ratio = f.requested_qps / max;
        if (ratio - 1.0).abs() > RATIO_VOUCHED {
            out.push(format!(
                "measured/model ratio {ratio:.3} ({:.1} QPS against {max:.1} from {what}) is outside {:.2}-{:.2}, what calibrate vouches for: the chain or the host, not the queue, set the result",
                f.requested_qps,
                1.0 - RATIO_VOUCHED,
                1.0 + RATIO_VOUCHED
            ));
        }
    }
    out
}
