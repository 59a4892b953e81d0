//! Which way is better for Distbench's report metrics (the first test's
//! figures, `subcommands::FirstTestMetrics`, and `metrics::RpcMetrics`):
//! rates and bandwidths higher, latencies and failures lower; counts are
//! neutral.

use direction::Better::{Higher, Lower};
use direction::Sense::{Quality, Speed};
use direction::{Rule, rule};

/// Distbench's table ([`direction`]'s patterns).
pub static RULES: &[Rule] = &[
    rule("**.kqps", Higher, Speed, "RPCs per second, thousands"),
    rule("**.request_mib_per_s", Higher, Speed, "request bandwidth"),
    rule("**.response_mib_per_s", Higher, Speed, "response bandwidth"),
    rule(
        "p50_latency_us",
        Lower,
        Speed,
        "the first test's median RPC latency",
    ),
    rule(
        "p99_latency_us",
        Lower,
        Speed,
        "the first test's p99 RPC latency",
    ),
    rule("**.failed_rpcs", Lower, Quality, "failed RPCs"),
];

/// Distbench's tables.
pub static TABLES: &[&[Rule]] = &[RULES];

/// What a Distbench run answers, first: the rate, latency percentiles and
/// failures over its tests.
pub static HEADLINES: &[direction::Headline] = &[
    direction::headline("kqps", "RPC rate", "kQPS"),
    direction::headline("p50_latency_us", "latency p50", "us"),
    direction::headline("p99_latency_us", "latency p99", "us"),
    direction::headline("response_mib_per_s", "response bandwidth", "MiB/s"),
    direction::headline("rpcs", "RPCs", ""),
    direction::headline("failed_rpcs", "failed RPCs", ""),
];

#[cfg(test)]
mod tests {
    use super::*;
    use direction::Better::Neutral;

    #[test]
    fn known_keys() {
        direction::check::known_keys(
            TABLES,
            &[
                ("kqps", Higher),
                ("response_mib_per_s", Higher),
                ("request_mib_per_s", Higher),
                ("p50_latency_us", Lower),
                ("p99_latency_us", Lower),
                ("failed_rpcs", Lower),
                ("rpcs", Neutral),
                ("tests_planned", Neutral),
            ],
        );
    }
}
