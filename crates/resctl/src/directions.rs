//! Which way is better for resctl-bench's report metrics (hashd's,
//! `hashd::command`, and the benches', `bench::metrics`): rates,
//! bandwidths, isolation and work conservation higher, latencies and the
//! latency impact lower; fractions and final settings are neutral.

use direction::Better::{Higher, Lower};
use direction::Sense::{Quality, Speed};
use direction::{Rule, rule};

/// resctl-bench's table ([`direction`]'s patterns).
pub static RULES: &[Rule] = &[
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

/// resctl-bench's tables.
pub static TABLES: &[&[Rule]] = &[RULES];

/// What a resctl run answers, first, by bench: hashd's rate and latency,
/// hashd-params' rps_max, protection's scores, iocost-params' model.
pub static HEADLINES: &[direction::Headline] = &[
    direction::headline("rps", "hashd rps", ""),
    direction::headline("lat_p95_ms", "hashd latency p95", "ms"),
    direction::headline("hashd_rps_max", "hashd rps_max", ""),
    direction::headline("hashd_mem_actual_bytes", "hashd memory footprint", "B"),
    direction::headline("protection_isol_pct", "isolation", "%"),
    direction::headline("protection_lat_imp_pct", "latency impact", "%"),
    direction::headline("protection_work_csv_pct", "work conservation", "%"),
    direction::headline("iocost_rbps", "read bytes/s (model)", "B/s"),
    direction::headline("iocost_wbps", "write bytes/s (model)", "B/s"),
    direction::headline("iocost_rrandiops", "random read IOPS (model)", ""),
    direction::headline("iocost_wrandiops", "random write IOPS (model)", ""),
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
                ("rps", Higher),
                ("rps_max", Higher),
                ("lat_p99_ms", Lower),
                ("hashd_rps_max", Higher),
                ("hashd_mem_frac", Neutral),
                ("iocost_rbps", Higher),
                ("iocost_wrandiops", Higher),
                ("storage_mof", Higher),
                ("storage_rbps_final", Neutral),
                ("protection_isol_pct", Higher),
                ("protection_isol_p05_pct", Higher),
                ("protection_lat_imp_pct", Lower),
                ("protection_work_csv_pct", Higher),
            ],
        );
    }
}
