//! Which way is better for each report metric, from the metric's
//! definition: a table of the workloads' metric keys (the dotted keys of
//! the report's `metrics`, as [`crate::record::metrics_map`] and
//! [`crate::store::flatten_numbers`] make them), each with the direction
//! its typed metrics struct defines. A key no rule names is
//! [`Better::Neutral`]: `results compare` reports its change without
//! calling it better or worse. Settings and model values that look like
//! figures (`target_latency_msec`, `service_time_ms`, `capacity_qps`,
//! `analytic_max_qps`, `search.*`, `threads.*`) are in no rule, so they are
//! neutral too.
//!
//! A pattern is matched against the whole key, segment by segment (`.`
//! separates segments): `*` inside a segment matches any characters of
//! that segment, and a `**` segment matches any number of segments, none
//! included. The first rule that matches decides.

use serde::Serialize;

/// The direction of better for a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    Higher,
    Lower,
    /// Neither (a setting, a count, or a key no rule names).
    Neutral,
}

/// How a change of a metric with a direction reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Sense {
    /// A rate or a time: better is "faster", worse "slower".
    Speed,
    /// Anything else with a direction (hit ratios, errors, CPU per
    /// request): "better" or "worse".
    Quality,
}

impl Sense {
    /// The words for a better and a worse change.
    pub fn words(self) -> (&'static str, &'static str) {
        match self {
            Sense::Speed => ("faster", "slower"),
            Sense::Quality => ("better", "worse"),
        }
    }
}

/// One rule of the table.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    pub pattern: &'static str,
    pub better: Better,
    pub sense: Sense,
    /// Where the metric is defined and what it is.
    pub what: &'static str,
}

const fn rule(pattern: &'static str, better: Better, sense: Sense, what: &'static str) -> Rule {
    Rule {
        pattern,
        better,
        sense,
        what,
    }
}

use Better::{Higher, Lower};
use Sense::{Quality, Speed};

/// The table, first match wins.
pub static RULES: &[Rule] = &[
    // The SLO searches (load::report::FinalMetrics: FeedSim, calibrate;
    // AdSim's ClientMetrics; FeedSim autoscale's `overall.*` and
    // `instances.*.result.*`): the highest rate that met the target.
    rule(
        "**.final_achieved_qps",
        Higher,
        Speed,
        "rate achieved at the final, target-meeting rate",
    ),
    rule(
        "**.final_requested_qps",
        Higher,
        Speed,
        "the rate the SLO search settled on",
    ),
    rule("**.peak_qps", Higher, Speed, "the unthrottled peak rate"),
    rule(
        "score",
        Higher,
        Speed,
        "FeedSim's final achieved QPS / its baseline",
    ),
    // Latencies of the final run (load's LatencySummary: avg/min/pNN/max
    // in ms; `count` is not a latency) and the searches' latency figures.
    rule(
        "**.final_latency.*_ms",
        Lower,
        Speed,
        "latency of the final run (ms)",
    ),
    rule(
        "**.final_latency_msec",
        Lower,
        Speed,
        "the target percentile's latency at the final rate",
    ),
    rule(
        "**.average_latency_msec",
        Lower,
        Speed,
        "mean latency at the final rate",
    ),
    // Distbench (subcommands::FirstTestMetrics, metrics::RpcMetrics).
    rule(
        "**.kqps",
        Higher,
        Speed,
        "Distbench RPCs per second, thousands",
    ),
    rule(
        "**.request_mib_per_s",
        Higher,
        Speed,
        "Distbench request bandwidth",
    ),
    rule(
        "**.response_mib_per_s",
        Higher,
        Speed,
        "Distbench response bandwidth",
    ),
    rule(
        "p50_latency_us",
        Lower,
        Speed,
        "Distbench first test's median RPC latency",
    ),
    rule(
        "p99_latency_us",
        Lower,
        Speed,
        "Distbench first test's p99 RPC latency",
    ),
    rule("**.failed_rpcs", Lower, Quality, "Distbench failed RPCs"),
    // CacheBench (cachebench::metrics::RunMetrics, NvmMetrics, Quantiles).
    rule(
        "**.ops_per_sec",
        Higher,
        Speed,
        "CacheBench operations per second",
    ),
    rule(
        "**.gets_per_sec",
        Higher,
        Speed,
        "CacheBench gets per second",
    ),
    rule(
        "**.sets_per_sec",
        Higher,
        Speed,
        "CacheBench sets per second",
    ),
    rule(
        "**.dels_per_sec",
        Higher,
        Speed,
        "CacheBench deletes per second",
    ),
    rule(
        "**.hit_ratio_pct",
        Higher,
        Quality,
        "CacheBench hit ratio (overall, RAM, NVM)",
    ),
    rule(
        "**.ram_hit_ratio_pct",
        Higher,
        Quality,
        "CacheBench RAM hit ratio",
    ),
    rule(
        "**.get_miss_pct",
        Lower,
        Quality,
        "CacheBench gets that missed",
    ),
    rule(
        "**.set_success_pct",
        Higher,
        Quality,
        "CacheBench sets that succeeded",
    ),
    rule(
        "**.inconsistencies",
        Lower,
        Quality,
        "CacheBench values inconsistent with the sets",
    ),
    rule("**.put_errors", Lower, Quality, "CacheBench NVM put errors"),
    rule(
        "**.checksum_errors",
        Lower,
        Quality,
        "CacheBench NVM engine checksum errors",
    ),
    rule(
        "**.app_write_amplification",
        Lower,
        Quality,
        "CacheBench NVM bytes written per logical byte",
    ),
    rule(
        "**.api_latency_ns.*.p*",
        Lower,
        Speed,
        "CacheBench get/set latency percentiles (ns)",
    ),
    rule(
        "**.api_latency_ns.*.max",
        Lower,
        Speed,
        "CacheBench get/set latency maximum (ns)",
    ),
    rule(
        "**.*_latency_us.p*",
        Lower,
        Speed,
        "CacheBench NVM device and engine latency percentiles (us)",
    ),
    rule(
        "**.*_latency_us.max",
        Lower,
        Speed,
        "CacheBench NVM device and engine latency maximum (us)",
    ),
    // FeedSim's CPU cost per request (metrics::LeafUseMetrics) and host
    // speed (the time of a fixed unit of work).
    rule(
        "**.leaf_cpu_ms_per_request",
        Lower,
        Quality,
        "FeedSim leaf CPU per request",
    ),
    rule(
        "**.driver_cpu_ms_per_request",
        Lower,
        Quality,
        "FeedSim driver CPU per request",
    ),
    rule(
        "leaf_step_cpu_ms_per_request.*",
        Lower,
        Quality,
        "FeedSim leaf CPU per request, by step",
    ),
    rule(
        "host_speed.*.unit_us_*",
        Lower,
        Speed,
        "time of a fixed unit of CPU or memory work",
    ),
    // AdSim's kernel runs (kernels::bench::Standalone).
    rule(
        "fires_per_s",
        Higher,
        Speed,
        "AdSim kernel firings per second",
    ),
    rule("gflops", Higher, Speed, "AdSim kernel work rate"),
    rule(
        "wall_s_per_fire",
        Lower,
        Speed,
        "AdSim kernel wall time per firing",
    ),
    rule(
        "cpu_s_per_fire",
        Lower,
        Speed,
        "AdSim kernel CPU time per firing",
    ),
    rule(
        "**.failed_requests",
        Lower,
        Quality,
        "AdSim server requests that failed",
    ),
    rule(
        "server.failed",
        Lower,
        Quality,
        "AdSim server requests that failed over a client run",
    ),
    // resctl (hashd::command::HashdMetrics, bench::metrics).
    rule("rps", Higher, Speed, "hashd requests per second"),
    rule(
        "rps_max",
        Higher,
        Speed,
        "hashd's max rps at its latency target",
    ),
    rule("lat_p*_ms", Lower, Speed, "hashd latency percentiles"),
    rule(
        "hashd_rps_max",
        Higher,
        Speed,
        "hashd-params: max rps at the latency target",
    ),
    rule(
        "iocost_*bps",
        Higher,
        Speed,
        "iocost-params: the device's sequential bandwidth",
    ),
    rule(
        "iocost_*iops",
        Higher,
        Speed,
        "iocost-params: the device's random IOPS",
    ),
    rule(
        "storage_mof",
        Higher,
        Quality,
        "storage: memory offloading factor",
    ),
    rule(
        "protection_isol_pct",
        Higher,
        Quality,
        "protection: isolation",
    ),
    rule(
        "protection_isol_p05_pct",
        Higher,
        Quality,
        "protection: isolation, 5th percentile",
    ),
    rule(
        "protection_lat_imp_pct",
        Lower,
        Quality,
        "protection: latency impact",
    ),
    rule(
        "protection_work_csv_pct",
        Higher,
        Quality,
        "protection: work conservation",
    ),
];

/// The rule for `key`, if any.
pub fn rule_for(key: &str) -> Option<&'static Rule> {
    let segs: Vec<&str> = key.split('.').collect();
    RULES.iter().find(|r| {
        let pat: Vec<&str> = r.pattern.split('.').collect();
        matches(&pat, &segs)
    })
}

/// The direction of better for `key` (neutral when no rule names it).
pub fn better(key: &str) -> Better {
    rule_for(key).map_or(Better::Neutral, |r| r.better)
}

fn matches(pat: &[&str], key: &[&str]) -> bool {
    match pat.split_first() {
        None => key.is_empty(),
        Some((&"**", rest)) => (0..=key.len()).any(|i| matches(rest, &key[i..])),
        Some((p, rest)) => match key.split_first() {
            Some((k, krest)) => glob_segment(p, k) && matches(rest, krest),
            None => false,
        },
    }
}

/// `*` matches any run of characters (within one segment).
fn glob_segment(pat: &str, s: &str) -> bool {
    match pat.split_once('*') {
        None => pat == s,
        Some((head, tail)) => {
            let Some(rest) = s.strip_prefix(head) else {
                return false;
            };
            (0..=rest.len())
                .filter(|i| rest.is_char_boundary(*i))
                .any(|i| glob_segment(tail, &rest[i..]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        let m = |p: &str, k: &str| {
            matches(
                &p.split('.').collect::<Vec<_>>(),
                &k.split('.').collect::<Vec<_>>(),
            )
        };
        assert!(m("**.kqps", "kqps"));
        assert!(m("**.kqps", "a.b.kqps"));
        assert!(!m("**.kqps", "kqps.x"));
        assert!(!m("**.kqps", "xkqps"));
        assert!(m("a.*_ms", "a.p99_ms"));
        assert!(!m("a.*_ms", "a.b.p99_ms"));
        assert!(m("lat_p*_ms", "lat_p95_ms"));
        assert!(!m("lat_p*_ms", "lat_p95_msx"));
        assert!(m("x*y*z", "xaybz") && m("x*y*z", "xyz") && !m("x*y*z", "xzy"));
    }

    /// The flattened numeric keys of real runs (cachebench_mini,
    /// distbench_mini, feedsim_mini, calibrate_quick) and of the other
    /// workloads' metrics structs, with the direction each must get.
    const KNOWN: &[(&str, Better)] = &[
        // FeedSim.
        ("final_achieved_qps", Higher),
        ("final_requested_qps", Higher),
        ("peak_qps", Higher),
        ("score", Higher),
        ("final_latency_msec", Lower),
        ("final_latency.p99_ms", Lower),
        ("final_latency.avg_ms", Lower),
        ("final_latency.count", Better::Neutral),
        ("target_latency_msec", Better::Neutral),
        ("leaf_cpu_ms_per_request", Lower),
        ("driver_cpu_ms_per_request", Lower),
        ("leaf_step_cpu_ms_per_request.ranking", Lower),
        ("driver_to_leaf_cpu_ratio", Better::Neutral),
        ("leaf_rss_bytes", Better::Neutral),
        ("host_speed.cpu.unit_us_median", Lower),
        ("host_speed.cpu.drift_pct", Better::Neutral),
        ("host_speed.memory.samples", Better::Neutral),
        ("threads.serving", Better::Neutral),
        ("overall.final_achieved_qps", Higher),
        ("overall.average_latency_msec", Lower),
        ("instances.11222.result.final_achieved_qps", Higher),
        // calibrate: settings and model values are neutral.
        ("capacity_qps", Better::Neutral),
        ("analytic_max_qps", Better::Neutral),
        ("analytic_max_qps_at_measured_service_time", Better::Neutral),
        ("service_time_ms", Better::Neutral),
        ("server_mean_service_ms", Better::Neutral),
        ("search.probe_secs", Better::Neutral),
        // Distbench.
        ("kqps", Higher),
        ("response_mib_per_s", Higher),
        ("request_mib_per_s", Higher),
        ("p50_latency_us", Lower),
        ("p99_latency_us", Lower),
        ("failed_rpcs", Lower),
        ("rpcs", Better::Neutral),
        ("tests_planned", Better::Neutral),
        // CacheBench.
        ("ops_per_sec", Higher),
        ("gets_per_sec", Higher),
        ("sets_per_sec", Higher),
        ("dels_per_sec", Higher),
        ("hit_ratio_pct", Higher),
        ("ram_hit_ratio_pct", Higher),
        ("nvm.hit_ratio_pct", Higher),
        ("get_miss_pct", Lower),
        ("set_success_pct", Higher),
        ("inconsistencies", Lower),
        ("nvm.put_errors", Lower),
        ("nvm.region_engine.checksum_errors", Lower),
        ("nvm.app_write_amplification", Lower),
        ("nvm.device_read_latency_us.p99", Lower),
        ("nvm.engine_lookup_latency_us.max", Lower),
        ("nvm.device_read_latency_us.count", Better::Neutral),
        ("api_latency_ns.get.p999", Lower),
        ("api_latency_ns.get.max", Lower),
        ("api_latency_ns.set.count", Better::Neutral),
        ("ram_evictions", Better::Neutral),
        ("elapsed_secs", Better::Neutral),
        ("ops", Better::Neutral),
        // AdSim.
        ("fires_per_s", Higher),
        ("gflops", Higher),
        ("wall_s_per_fire", Lower),
        ("cpu_s_per_fire", Lower),
        ("build_s", Better::Neutral),
        ("server.failed", Lower),
        ("server.requests", Better::Neutral),
        ("failed_requests", Lower),
        ("client_cpu_seconds", Better::Neutral),
        // resctl.
        ("rps", Higher),
        ("rps_max", Higher),
        ("lat_p99_ms", Lower),
        ("hashd_rps_max", Higher),
        ("hashd_mem_frac", Better::Neutral),
        ("iocost_rbps", Higher),
        ("iocost_wrandiops", Higher),
        ("storage_mof", Higher),
        ("storage_rbps_final", Better::Neutral),
        ("protection_isol_pct", Higher),
        ("protection_isol_p05_pct", Higher),
        ("protection_lat_imp_pct", Lower),
        ("protection_work_csv_pct", Higher),
        // Hooks and anything unknown.
        ("hooks.cpu-mpstat.avg_busy_pct", Better::Neutral),
        ("some_new_metric_ms", Better::Neutral),
        ("", Better::Neutral),
    ];

    #[test]
    fn known_keys_get_their_direction() {
        for (key, want) in KNOWN {
            assert_eq!(better(key), *want, "{key}");
        }
    }

    /// Each rule decides at least one known key: no rule is dead or
    /// shadowed by an earlier one.
    #[test]
    fn every_rule_is_used() {
        for r in RULES {
            assert!(
                KNOWN
                    .iter()
                    .any(|(k, _)| rule_for(k).is_some_and(|x| std::ptr::eq(x, r))),
                "rule {} decides no known key",
                r.pattern
            );
        }
    }

    #[test]
    fn words() {
        assert_eq!(Sense::Speed.words(), ("faster", "slower"));
        assert_eq!(rule_for("hit_ratio_pct").unwrap().sense, Sense::Quality);
        assert_eq!(rule_for("p99_latency_us").unwrap().sense, Sense::Speed);
    }
}
