//! Which way is better for AdSim's own report metrics: its kernels' runs
//! (`kernels::bench`) and the server's failed requests. The client's search
//! figures are [`load::directions::SEARCH`]'s; counts, build times and
//! CPU seconds are neutral.

use direction::Better::{Higher, Lower};
use direction::Sense::{Quality, Speed};
use direction::{Rule, rule};

/// AdSim's table ([`direction`]'s patterns).
pub static RULES: &[Rule] = &[
    rule("fires_per_s", Higher, Speed, "kernel firings per second"),
    rule("gflops", Higher, Speed, "kernel work rate"),
    rule(
        "wall_s_per_fire",
        Lower,
        Speed,
        "kernel wall time per firing",
    ),
    rule("cpu_s_per_fire", Lower, Speed, "kernel CPU time per firing"),
    rule(
        "**.failed_requests",
        Lower,
        Quality,
        "server requests that failed",
    ),
    rule(
        "server.failed",
        Lower,
        Quality,
        "server requests that failed over a client run",
    ),
];

/// AdSim's tables, its own first.
pub static TABLES: &[&[Rule]] = &[RULES, load::directions::SEARCH];

/// What an AdSim run answers, first: the client's QPS at its latency
/// target and the latency there; the server's requests and CPU.
pub static HEADLINES: &[direction::Headline] = &[
    direction::headline("final_achieved_qps", "QPS at target", "QPS"),
    direction::headline("final_latency_msec", "latency at target", "ms"),
    direction::headline("requests", "requests served", ""),
    direction::headline("cpu_seconds", "server CPU", "s"),
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
                ("fires_per_s", Higher),
                ("gflops", Higher),
                ("wall_s_per_fire", Lower),
                ("cpu_s_per_fire", Lower),
                ("build_s", Neutral),
                ("server.failed", Lower),
                ("server.requests", Neutral),
                ("failed_requests", Lower),
                ("client_cpu_seconds", Neutral),
            ],
        );
        assert_eq!(direction::better_in(TABLES, "final_achieved_qps"), Higher);
    }
}
