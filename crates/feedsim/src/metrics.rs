//! The report's metrics of a FeedSim run, derived from its record
//! ([`FeedSimRecord`]): typed, so tests and callers read them by field;
//! the harness flattens [`FeedSimMetrics`] into the report's JSON.

use crate::cli::Threads;
use crate::record::*;
use load::hostspeed::HostSpeed;
use load::recorder::SecondSummary;
use load::report::round3;
use load::{Arrival, ProbeRecord, SloTarget};
use serde::Serialize;
use std::collections::BTreeMap;

/// Upstream's baseline: score = final_achieved_qps / 57.
pub const BASELINE_QPS: f64 = 57.0;
/// Host speed drift past which a result is flagged as not comparable.
pub(crate) const SPEED_DRIFT_WARN_PCT: f64 = 10.0;

/// The report's metrics of each mode.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum FeedSimMetrics {
    Leaf(LeafMetrics),
    Search(Box<SearchMetrics>),
    Autoscale(Box<AutoscaleMetrics>),
}

/// `rackbench feedsim leaf`.
#[derive(Debug, Clone, Serialize)]
pub struct LeafMetrics {
    pub build_seconds: f64,
    pub dataset_bytes: u64,
    pub rss_bytes: u64,
    pub cpu_seconds: f64,
}

/// The target and the load of a driver run.
#[derive(Debug, Clone, Serialize)]
pub struct TargetMetrics {
    pub target_percentile: String,
    pub target_latency_msec: f64,
    pub load_mode: String,
    /// The threads generating the load (`-l`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver_threads: Option<usize>,
}

impl TargetMetrics {
    fn of(
        target: &SloTarget,
        arrival: Arrival,
        compat: Option<usize>,
        driver_threads: Option<usize>,
    ) -> Self {
        TargetMetrics {
            target_percentile: target.percentile.label().to_string(),
            target_latency_msec: target.latency_ms,
            driver_threads: match compat {
                Some(t) => Some(t),
                None => driver_threads,
            },
            load_mode: match compat {
                None => format!("open loop, {arrival} arrivals; latency from the intended start"),
                Some(t) => format!(
                    "closed-compat (DCPerf's driver): {t} threads x 4 connections at depth 1, {arrival} pacing; latency from the send, QPS counted from sends"
                ),
            },
        }
    }
}

/// The host's speed over the run, when it was sampled.
#[derive(Debug, Clone, Serialize)]
pub struct HostSpeedMetrics {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_speed: Option<HostSpeed>,
    /// Its drift was over [`SPEED_DRIFT_WARN_PCT`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_speed_unstable: Option<bool>,
}

impl HostSpeedMetrics {
    fn of(speed: Option<&HostSpeed>) -> Self {
        HostSpeedMetrics {
            host_speed: speed.copied(),
            host_speed_unstable: speed.map(|h| h.drift_pct > SPEED_DRIFT_WARN_PCT),
        }
    }
}

/// The leaf's thread counts (`io` and `pointer_chase` are fixed).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ThreadsMetrics {
    pub serving: usize,
    pub ranking: usize,
    pub srv_io: usize,
    pub io: usize,
    pub pointer_chase: usize,
}

impl From<Threads> for ThreadsMetrics {
    fn from(t: Threads) -> Self {
        ThreadsMetrics {
            serving: t.serving,
            ranking: t.ranking,
            srv_io: t.ser,
            io: 4,
            pointer_chase: 8,
        }
    }
}

/// A single-instance run: the instance's metrics at the top level.
#[derive(Debug, Clone, Serialize)]
pub struct SearchMetrics {
    #[serde(flatten)]
    pub target: TargetMetrics,
    pub threads: ThreadsMetrics,
    /// The search's final achieved QPS / [`BASELINE_QPS`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    #[serde(flatten)]
    pub instance: InstanceMetrics,
    #[serde(flatten)]
    pub host: HostSpeedMetrics,
    pub partial: bool,
}

/// A search's final result (before an autoscale rerun).
#[derive(Debug, Clone, Serialize)]
pub struct FinalMetrics {
    pub final_requested_qps: f64,
    pub final_achieved_qps: f64,
    pub final_latency_msec: f64,
}

/// The metrics of one instance (the whole report of a single-instance run).
#[derive(Debug, Clone, Serialize)]
pub struct InstanceMetrics {
    /// The reported probe's (see [`InstanceRecord::reported_probe`]).
    #[serde(flatten)]
    pub reported: Option<load::report::FinalMetrics>,
    /// With a rerun only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerun_qps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerun_met_target: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_final: Option<FinalMetrics>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerun_probes: Option<Vec<ProbeRecord>>,
    /// Fixed rates (`-q`) only: every rate met the target (each rate's own
    /// verdict is its probe's `passed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_met: Option<bool>,
    pub peak_qps: f64,
    /// With the leaf's status before and after the run.
    #[serde(flatten)]
    pub leaf: Option<LeafUseMetrics>,
    pub success: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    pub probes: Vec<ProbeRecord>,
    pub final_series: Vec<SecondSummary>,
    pub csv: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leaf_log: Option<String>,
}

/// What the leaf used over the run (its status after minus before).
#[derive(Debug, Clone, Serialize)]
pub struct LeafUseMetrics {
    pub leaf_rss_bytes: u64,
    pub leaf_build_seconds: f64,
    pub leaf_anon_huge_bytes: u64,
    pub leaf_huge_pages_advised: bool,
    pub thp_mode: String,
    /// The leaf's serving model (`--serving-model`).
    pub leaf_serving_model: String,
    pub leaf_requests: u64,
    pub leaf_skipped_tasks: u64,
    pub leaf_cpu_seconds: f64,
    /// With requests only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leaf_cpu_ms_per_request: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leaf_step_cpu_ms_per_request: Option<BTreeMap<String, f64>>,
    /// Single-instance runs only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver_cpu_ms_per_request: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver_to_leaf_cpu_ratio: Option<f64>,
}

impl LeafUseMetrics {
    /// `driver_cpu`: the driver's CPU seconds, to report per request.
    fn of(b: &LeafStatus, e: &LeafStatus, driver_cpu: Option<f64>) -> Self {
        let reqs = e.requests.saturating_sub(b.requests);
        let mut m = LeafUseMetrics {
            leaf_rss_bytes: e.rss_bytes,
            leaf_build_seconds: e.build_seconds,
            leaf_anon_huge_bytes: e.anon_huge_bytes,
            leaf_huge_pages_advised: e.huge_pages_advised,
            thp_mode: e.thp_mode.clone(),
            leaf_serving_model: e.serving_model.clone(),
            leaf_requests: reqs,
            leaf_skipped_tasks: e.skipped_tasks.saturating_sub(b.skipped_tasks),
            leaf_cpu_seconds: round3(e.cpu_seconds - b.cpu_seconds),
            leaf_cpu_ms_per_request: None,
            leaf_step_cpu_ms_per_request: None,
            driver_cpu_ms_per_request: None,
            driver_to_leaf_cpu_ratio: None,
        };
        if reqs > 0 {
            let leaf_ms = (e.cpu_seconds - b.cpu_seconds) / reqs as f64 * 1000.0;
            m.leaf_cpu_ms_per_request = Some(round3(leaf_ms));
            m.leaf_step_cpu_ms_per_request = Some(
                e.steps
                    .iter()
                    .map(|s| {
                        let before = b
                            .steps
                            .iter()
                            .find(|x| x.step == s.step)
                            .map_or(0.0, |x| x.cpu_seconds);
                        let ms = (s.cpu_seconds - before) / reqs as f64 * 1000.0;
                        (s.step.clone(), round3(ms))
                    })
                    .collect(),
            );
            if let Some(cpu) = driver_cpu {
                let drv_ms = cpu / reqs as f64 * 1000.0;
                m.driver_cpu_ms_per_request = Some(round3(drv_ms));
                if leaf_ms > 0.0 {
                    m.driver_to_leaf_cpu_ratio = Some(round3(drv_ms / leaf_ms));
                }
            }
        }
        m
    }
}

impl InstanceMetrics {
    /// `with_driver_cpu`: report the driver's CPU per request (alone: the
    /// driver process serves this instance only).
    pub fn of(r: &InstanceRecord, with_driver_cpu: bool) -> Self {
        let reported = r.reported_probe();
        let leaf = match (&r.status_before, &r.status_after) {
            (Some(b), Some(e)) => Some(LeafUseMetrics::of(
                b,
                e,
                with_driver_cpu.then_some(r.driver_cpu_seconds),
            )),
            _ => None,
        };
        InstanceMetrics {
            reported: reported.map(load::report::FinalMetrics::of),
            rerun_qps: r.rerun.as_ref().map(|x| round3(x.qps)),
            rerun_met_target: r.rerun.as_ref().map(|_| reported.is_some_and(|p| p.passed)),
            search_final: r
                .rerun
                .as_ref()
                .and(r.outcome.final_probe.as_ref())
                .map(|f| FinalMetrics {
                    final_requested_qps: round3(f.requested_qps),
                    final_achieved_qps: round3(f.achieved_qps),
                    final_latency_msec: round3(f.target_value_ms),
                }),
            rerun_probes: r.rerun.as_ref().map(|x| x.outcome.probes.clone()),
            target_met: fixed_target_met(&r.outcome.probes),
            peak_qps: round3(r.outcome.peak_qps),
            leaf,
            success: r.outcome.success && reported.is_some(),
            failure: r.outcome.failure.clone(),
            probes: r.outcome.probes.clone(),
            final_series: r.outcome.final_series.clone(),
            csv: r.csv.clone(),
            leaf_log: r.leaf_log.clone(),
        }
    }
}

/// The target of an autoscale run, typed as upstream's autoscale JSON:
/// the latency as a string (`"500"`, as the `Searching` line prints it).
#[derive(Debug, Clone, Serialize)]
pub struct AutoscaleTargetMetrics {
    pub target_percentile: String,
    pub target_latency_msec: String,
    pub load_mode: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver_threads: Option<usize>,
}

impl AutoscaleTargetMetrics {
    fn of(
        target: &SloTarget,
        arrival: Arrival,
        compat: Option<usize>,
        driver_threads: Option<usize>,
    ) -> Self {
        let t = TargetMetrics::of(target, arrival, compat, driver_threads);
        AutoscaleTargetMetrics {
            target_percentile: t.target_percentile,
            target_latency_msec: target.latency_ms.to_string(),
            load_mode: t.load_mode,
            driver_threads: t.driver_threads,
        }
    }
}

/// An autoscale run: each instance under its number (`"1"`, `"2"`...),
/// the sums and the score.
#[derive(Debug, Clone, Serialize)]
pub struct AutoscaleMetrics {
    #[serde(flatten)]
    pub target: AutoscaleTargetMetrics,
    #[serde(flatten)]
    pub host: HostSpeedMetrics,
    /// Keyed by the instance's number, from 1.
    #[serde(flatten)]
    pub instances: BTreeMap<String, AutoscaleInstanceMetrics>,
    pub overall: FinalMetricsOverall,
    /// A string, as upstream's JSON has it.
    pub spawned_instances: String,
    pub successful_instances: usize,
    /// The lowest and highest reported achieved QPS over the instances;
    /// `min_qps` is 0 when any instance has no result (upstream's rule),
    /// `max_qps` 0 when none has.
    pub min_qps: f64,
    pub max_qps: f64,
    /// 1 for a fixed-rate (`-q`) run, else 0 (an integer, as upstream's).
    pub is_fixed_qps: u8,
    pub score: f64,
    /// The rate every instance reran at, or null.
    pub rerun_at_fixed_qps: Option<f64>,
    /// With leaf requests only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver_cpu_ms_per_request: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leaf_cpu_ms_per_request: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver_to_leaf_cpu_ratio: Option<f64>,
    pub success: bool,
    pub partial: bool,
}

/// The successful instances' sums (mean latency).
#[derive(Debug, Clone, Serialize)]
pub struct FinalMetricsOverall {
    pub final_requested_qps: f64,
    pub final_achieved_qps: f64,
    pub average_latency_msec: f64,
}

/// One autoscale instance.
#[derive(Debug, Clone, Serialize)]
pub struct AutoscaleInstanceMetrics {
    pub port: u16,
    /// A CPU list like `0-3,8`.
    pub cpus: String,
    pub threads: ThreadsMetrics,
    #[serde(flatten)]
    pub result: InstanceResultMetrics,
}

/// An instance's metrics, or `success: false` and why it failed.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum InstanceResultMetrics {
    Ran(Box<InstanceMetrics>),
    Failed { success: bool, failure: String },
}

impl AutoscaleMetrics {
    pub fn of(a: &AutoscaleRun) -> Self {
        let (mut leaf_cpu, mut leaf_reqs) = (0.0, 0u64);
        let mut rerun = None;
        let mut instances = BTreeMap::new();
        for (i, inst) in a.instances.iter().enumerate() {
            let result = match &inst.result {
                InstanceResult::Ran(r) => {
                    if let Some(x) = &r.rerun {
                        rerun = Some(x.qps);
                    }
                    if let (Some(b), Some(e)) = (&r.status_before, &r.status_after) {
                        leaf_cpu += e.cpu_seconds - b.cpu_seconds;
                        leaf_reqs += e.requests.saturating_sub(b.requests);
                    }
                    InstanceResultMetrics::Ran(Box::new(InstanceMetrics::of(r, false)))
                }
                InstanceResult::Failed(why) => InstanceResultMetrics::Failed {
                    success: false,
                    failure: why.clone(),
                },
            };
            instances.insert(
                (i + 1).to_string(),
                AutoscaleInstanceMetrics {
                    port: inst.port,
                    cpus: harness::machine::format_cpu_list(&inst.cpus),
                    threads: inst.threads.into(),
                    result,
                },
            );
        }
        let finals = a.finals();
        let (sum_req, sum_ach, avg_lat) = overall(&finals);
        let (min_qps, max_qps) = min_max_qps(&finals, a.instances.len());
        // As upstream's last object: fixed rates, or a search rerun at a
        // fixed rate (upstream's rerun is its script run again with -q).
        let fixed = a.fixed_qps
            || a.instances.iter().any(|i| match &i.result {
                InstanceResult::Ran(r) => {
                    r.rerun.is_some() || fixed_target_met(&r.outcome.probes).is_some()
                }
                InstanceResult::Failed(_) => false,
            });
        let mut m = AutoscaleMetrics {
            target: AutoscaleTargetMetrics::of(
                &a.target,
                a.arrival,
                a.compat_driver_threads,
                a.driver_threads,
            ),
            host: HostSpeedMetrics::of(a.host_speed.as_ref()),
            instances,
            overall: FinalMetricsOverall {
                final_requested_qps: round3(sum_req),
                final_achieved_qps: round3(sum_ach),
                average_latency_msec: round3(avg_lat),
            },
            spawned_instances: a.instances.len().to_string(),
            successful_instances: finals.len(),
            min_qps: round3(min_qps),
            max_qps: round3(max_qps),
            is_fixed_qps: u8::from(fixed),
            score: round3(sum_ach / BASELINE_QPS),
            rerun_at_fixed_qps: rerun.map(round3),
            driver_cpu_ms_per_request: None,
            leaf_cpu_ms_per_request: None,
            driver_to_leaf_cpu_ratio: None,
            success: a.success(),
            partial: a.partial(),
        };
        if leaf_reqs > 0 {
            let drv_ms = a.driver_cpu_seconds / leaf_reqs as f64 * 1000.0;
            let leaf_ms = leaf_cpu / leaf_reqs as f64 * 1000.0;
            m.driver_cpu_ms_per_request = Some(round3(drv_ms));
            m.leaf_cpu_ms_per_request = Some(round3(leaf_ms));
            if leaf_ms > 0.0 {
                m.driver_to_leaf_cpu_ratio = Some(round3(drv_ms / leaf_ms));
            }
        }
        m
    }
}

/// The lowest and highest achieved QPS of the instances' reported results,
/// with an instance without a result counting as 0 in the lowest.
pub(crate) fn min_max_qps(finals: &[InstanceFinal<'_>], spawned: usize) -> (f64, f64) {
    let ach = finals.iter().map(|f| f.reported.achieved_qps);
    let max = ach.clone().fold(0.0, f64::max);
    let min = if finals.len() < spawned || finals.is_empty() {
        0.0
    } else {
        ach.fold(f64::INFINITY, f64::min)
    };
    (min, max)
}

impl SearchMetrics {
    pub fn of(s: &SearchRun) -> Self {
        SearchMetrics {
            target: TargetMetrics::of(
                &s.target,
                s.arrival,
                s.compat_driver_threads,
                s.driver_threads,
            ),
            threads: s.threads.into(),
            score: s
                .instance
                .outcome
                .final_probe
                .as_ref()
                .map(|f| round3(f.achieved_qps / BASELINE_QPS)),
            instance: InstanceMetrics::of(&s.instance, true),
            host: HostSpeedMetrics::of(s.host_speed.as_ref()),
            partial: s.instance.outcome.interrupted,
        }
    }
}

impl FeedSimRecord {
    /// The report's metrics of the run.
    pub fn metrics(&self) -> FeedSimMetrics {
        match self {
            FeedSimRecord::Leaf(l) => FeedSimMetrics::Leaf(LeafMetrics {
                build_seconds: l.build_seconds,
                dataset_bytes: l.dataset_bytes,
                rss_bytes: l.rss_bytes,
                cpu_seconds: l.cpu_seconds,
            }),
            FeedSimRecord::Search(s) => FeedSimMetrics::Search(Box::new(SearchMetrics::of(s))),
            FeedSimRecord::Autoscale(a) => {
                FeedSimMetrics::Autoscale(Box::new(AutoscaleMetrics::of(a)))
            }
        }
    }
}
