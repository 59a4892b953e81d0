//! Which way is better for FeedSim's own report metrics
//! (`metrics`): its score, the CPU each request costs the leaf and
//! the driver, and the host-speed check's time for a fixed unit of work.
//! The search's figures are [`load::directions::SEARCH`]'s; thread counts,
//! sizes and ratios are neutral.

use direction::Better::{Higher, Lower};
use direction::Sense::{Quality, Speed};
use direction::{Rule, rule};

/// FeedSim's table ([`direction`]'s patterns).
pub static RULES: &[Rule] = &[
    rule(
        "score",
        Higher,
        Speed,
        "FeedSim's final achieved QPS / its baseline",
    ),
    rule(
        "**.leaf_cpu_ms_per_request",
        Lower,
        Quality,
        "leaf CPU per request",
    ),
    rule(
        "**.driver_cpu_ms_per_request",
        Lower,
        Quality,
        "driver CPU per request",
    ),
    rule(
        "leaf_step_cpu_ms_per_request.*",
        Lower,
        Quality,
        "leaf CPU per request, by step",
    ),
    rule(
        "host_speed.*.unit_us_*",
        Lower,
        Speed,
        "time of a fixed unit of CPU or memory work",
    ),
];

/// FeedSim's tables, its own first.
pub static TABLES: &[&[Rule]] = &[RULES, load::directions::SEARCH];

/// What a FeedSim run answers, first: the QPS its search settled on (the
/// sum over instances for autoscale) and the latency at it.
pub static HEADLINES: &[direction::Headline] = &[
    direction::headline("final_achieved_qps", "QPS at target", "QPS"),
    direction::headline("overall.final_achieved_qps", "QPS, all instances", "QPS"),
    direction::headline("final_latency_msec", "latency at target", "ms"),
    direction::headline(
        "overall.average_latency_msec",
        "mean latency, all instances",
        "ms",
    ),
    direction::headline("score", "score (QPS / baseline)", ""),
];

#[cfg(test)]
mod tests {
    use super::*;
    use direction::Better::Neutral;

    #[test]
    fn known_keys() {
        direction::check::known_keys(
            &[RULES],
            &[
                ("score", Higher),
                ("leaf_cpu_ms_per_request", Lower),
                ("driver_cpu_ms_per_request", Lower),
                ("leaf_step_cpu_ms_per_request.ranking", Lower),
                ("driver_to_leaf_cpu_ratio", Neutral),
                ("leaf_rss_bytes", Neutral),
                ("host_speed.cpu.unit_us_median", Lower),
                ("host_speed.cpu.drift_pct", Neutral),
                ("host_speed.memory.samples", Neutral),
                ("threads.serving", Neutral),
            ],
        );
        assert_eq!(
            direction::better_in(TABLES, "overall.final_achieved_qps"),
            Higher
        );
    }
}
