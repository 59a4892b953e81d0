//! Which way is better for CacheBench's report metrics
//! (`metrics`: the run's rates, hit ratios, NVM counters and
//! latency quantiles): rates and hit ratios higher, misses, errors and
//! latencies lower; counts, sizes and times are neutral.

use direction::Better::{Higher, Lower};
use direction::Sense::{Quality, Speed};
use direction::{Rule, rule};

/// CacheBench's table ([`direction`]'s patterns).
pub static RULES: &[Rule] = &[
    rule("**.ops_per_sec", Higher, Speed, "operations per second"),
    rule("**.gets_per_sec", Higher, Speed, "gets per second"),
    rule("**.sets_per_sec", Higher, Speed, "sets per second"),
    rule("**.dels_per_sec", Higher, Speed, "deletes per second"),
    rule(
        "**.hit_ratio_pct",
        Higher,
        Quality,
        "hit ratio (overall, RAM, NVM)",
    ),
    rule("**.ram_hit_ratio_pct", Higher, Quality, "RAM hit ratio"),
    rule("**.get_miss_pct", Lower, Quality, "gets that missed"),
    rule("**.set_success_pct", Higher, Quality, "sets that succeeded"),
    rule(
        "**.inconsistencies",
        Lower,
        Quality,
        "values inconsistent with the sets",
    ),
    rule("**.put_errors", Lower, Quality, "NVM put errors"),
    rule(
        "**.checksum_errors",
        Lower,
        Quality,
        "NVM engine checksum errors",
    ),
    rule(
        "**.app_write_amplification",
        Lower,
        Quality,
        "NVM bytes written per logical byte",
    ),
    rule(
        "**.api_latency_ns.*.p*",
        Lower,
        Speed,
        "get/set latency percentiles (ns)",
    ),
    rule(
        "**.api_latency_ns.*.max",
        Lower,
        Speed,
        "get/set latency maximum (ns)",
    ),
    rule(
        "**.*_latency_us.p*",
        Lower,
        Speed,
        "NVM device and engine latency percentiles (us)",
    ),
    rule(
        "**.*_latency_us.max",
        Lower,
        Speed,
        "NVM device and engine latency maximum (us)",
    ),
];

/// CacheBench's tables.
pub static TABLES: &[&[Rule]] = &[RULES];

/// What a CacheBench run answers, first: throughput, hit ratios and the
/// NVM device's read latency.
pub static HEADLINES: &[direction::Headline] = &[
    direction::headline("ops_per_sec", "throughput", "ops/s"),
    direction::headline("hit_ratio_pct", "hit ratio", "%"),
    direction::headline("nvm.hit_ratio_pct", "NVM hit ratio", "%"),
    direction::headline(
        "nvm.device_read_latency_us.p50",
        "NVM device read p50",
        "us",
    ),
    direction::headline(
        "nvm.device_read_latency_us.p99",
        "NVM device read p99",
        "us",
    ),
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
                ("nvm.device_read_latency_us.count", Neutral),
                ("api_latency_ns.get.p999", Lower),
                ("api_latency_ns.get.max", Lower),
                ("api_latency_ns.set.count", Neutral),
                ("ram_evictions", Neutral),
                ("elapsed_secs", Neutral),
                ("ops", Neutral),
            ],
        );
    }
}
