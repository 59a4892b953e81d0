//! Which way is better for the figures of the SLO search's end
//! ([`crate::report::FinalMetrics`]), which FeedSim, calibrate and AdSim
//! report at their top level and FeedSim autoscale under `overall.` and
//! `instances.*.result.`: the highest rate that met the target is better
//! higher, its latencies lower. The target and the search's settings are in
//! no rule, so they are neutral.

use direction::Better::{Higher, Lower};
use direction::Sense::Speed;
use direction::{Rule, rule};

/// The search's table ([`direction`]'s patterns).
pub static SEARCH: &[Rule] = &[
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
    // Latencies of the final run (LatencySummary: avg/min/pNN/max in ms;
    // `count` is not a latency) and the search's latency figures.
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
];

#[cfg(test)]
mod tests {
    use super::*;
    use direction::Better::Neutral;

    #[test]
    fn known_keys() {
        direction::check::known_keys(
            &[SEARCH],
            &[
                ("final_achieved_qps", Higher),
                ("final_requested_qps", Higher),
                ("peak_qps", Higher),
                ("final_latency_msec", Lower),
                ("final_latency.p99_ms", Lower),
                ("final_latency.avg_ms", Lower),
                ("final_latency.count", Neutral),
                ("target_latency_msec", Neutral),
                ("overall.average_latency_msec", Lower),
                ("instances.11222.result.final_achieved_qps", Higher),
                ("search.probe_secs", Neutral),
            ],
        );
    }
}
