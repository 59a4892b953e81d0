//! What a CacheBench run keeps with its stored run (the typed record):
//! the command writes it, the `metrics` module derives the report's metrics
//! from it, and the upstream text is printed again from it.

use crate::plots::Sample;
use crate::stats::RunStats;

/// What a CacheBench run keeps with its stored run: each instance's
/// end-of-run figures and failure lines, and with several instances their
/// sums. `render.rs`'s `write_record` prints upstream's end-of-run text from it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct CacheBenchRecord {
    pub instances: Vec<InstanceRecord>,
    pub aggregated: Option<RunStats>,
    /// Our charts of the progress samples, as written.
    pub charts: Vec<String>,
    /// The progress intervals, as the report's metrics keep them (see
    /// [`series`]); none for runs without progress intervals
    /// (`--progress 0`) or stored before the series was kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub series: Vec<IntervalPoint>,
    /// Ctrl-C stopped the run.
    pub interrupted: bool,
    /// `--timeout_seconds` stopped the run.
    pub stopped_by_timeout_seconds: Option<u64>,
    /// The NVM device error that ended the run.
    pub nvm_failure: Option<String>,
    /// The `--output_layout` the run printed in (and is printed again in);
    /// runs stored before it was kept print in the current layout.
    #[serde(default)]
    pub layout: crate::output::Layout,
    /// rackbench's own: seconds from the command's start until every
    /// instance had begun its first operation (the set-up time: config,
    /// generator, cache and NVM device); none when one never began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_op_secs: Option<f64>,
    /// Several instances with `--progress_stats_file`: each instance's
    /// report went to its own stats file, and stdout got only the
    /// aggregate and the closing line (as upstream's).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reports_in_stats_files: bool,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct InstanceRecord {
    pub stats: RunStats,
    /// The lines upstream prints after the figures when the run failed.
    pub failures: Vec<String>,
    /// A replay's reader counts (upstream's `== KVReplayGenerator Stats ==`
    /// block); none for the synthetic generators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator: Option<GeneratorStats>,
    /// `printNvmCounters`: the `== NVM Counters Map ==` block is printed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub print_nvm_counters: bool,
}

/// What a replay generator counted, for its stats block.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GeneratorStats {
    /// Upstream's generator class: `KVReplayGenerator` or
    /// `BinaryKVReplayGenerator`.
    pub name: String,
    pub samples: u64,
    pub parse_errors: u64,
    /// The piecewise and block replays' own stats block, as printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// The most points [`series`] keeps.
pub const MAX_SERIES_POINTS: usize = 300;

/// One progress interval of a run (all instances together), as the
/// report's metrics keep it under `series`: the figures behind our charts,
/// named as the run's end-of-run metrics. A figure over nothing (an
/// interval without gets, or without NVM lookups or device I/O) is left
/// out; the `nvm_*` figures are there only with an NVM tier.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct IntervalPoint {
    /// Seconds since the start, at the end of the interval.
    pub elapsed_secs: f64,
    /// Operations per second over the interval.
    pub ops_per_sec: f64,
    /// Gets of the interval answered by either tier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hit_ratio_pct: Option<f64>,
    /// Gets of the interval answered by RAM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ram_hit_ratio_pct: Option<f64>,
    /// NVM lookups of the interval that hit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvm_hit_ratio_pct: Option<f64>,
    /// The NVM device's read and write latency over the interval, µs
    /// (upstream's `NVM Read  Latency` / `NVM Write Latency` figures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvm_read_p50_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvm_read_p99_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvm_write_p50_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvm_write_p99_us: Option<f64>,
}

impl From<&Sample> for IntervalPoint {
    fn from(s: &Sample) -> Self {
        // PERCENTILES: p50 first, p99 third.
        let (p50, p99) = (0, 2);
        let nvm_hits = s.nvm_gets.filter(|&n| n > 0).map(|_| s.hit.nvm);
        IntervalPoint {
            elapsed_secs: s.t,
            ops_per_sec: s.ops_per_sec,
            hit_ratio_pct: (s.gets > 0).then_some(s.hit.overall),
            ram_hit_ratio_pct: (s.gets > 0).then_some(s.hit.ram),
            nvm_hit_ratio_pct: nvm_hits,
            nvm_read_p50_us: s.read_us.map(|v| v[p50]),
            nvm_read_p99_us: s.read_us.map(|v| v[p99]),
            nvm_write_p50_us: s.write_us.map(|v| v[p50]),
            nvm_write_p99_us: s.write_us.map(|v| v[p99]),
        }
    }
}

/// The progress samples as the report's metrics keep them, bounded: a run
/// of more than [`MAX_SERIES_POINTS`] intervals keeps every k-th one
/// (k = ceil(n / MAX_SERIES_POINTS), starting at the k-th) and always the
/// last, so each point is still one interval as measured (the PNG charts
/// and the stats file have every interval).
pub fn series(samples: &[Sample]) -> Vec<IntervalPoint> {
    let n = samples.len();
    let k = n.div_ceil(MAX_SERIES_POINTS).max(1);
    samples
        .iter()
        .enumerate()
        .filter(|(i, _)| (i + 1) % k == 0 || i + 1 == n)
        .map(|(_, s)| IntervalPoint::from(s))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::output::HitRatios;

    fn sample(i: usize, nvm: bool) -> Sample {
        Sample {
            t: i as f64,
            ops_per_sec: 1000.0,
            hit: HitRatios {
                overall: 60.0,
                ram: 40.0,
                nvm: if nvm { 33.0 } else { 0.0 },
            },
            gets: 10,
            nvm_gets: nvm.then_some(6),
            read_us: nvm.then_some([5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0]),
            write_us: nvm.then_some([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]),
        }
    }

    #[test]
    fn a_point_keeps_only_what_the_interval_measured() {
        let p = IntervalPoint::from(&sample(3, true));
        assert_eq!(p.elapsed_secs, 3.0);
        assert_eq!(p.hit_ratio_pct, Some(60.0));
        assert_eq!(p.ram_hit_ratio_pct, Some(40.0));
        assert_eq!(p.nvm_hit_ratio_pct, Some(33.0));
        assert_eq!(
            (p.nvm_read_p50_us, p.nvm_read_p99_us),
            (Some(5.0), Some(7.0))
        );
        assert_eq!(
            (p.nvm_write_p50_us, p.nvm_write_p99_us),
            (Some(1.0), Some(3.0))
        );
        // DRAM only: no nvm_* keys at all.
        let v = serde_json::to_value(IntervalPoint::from(&sample(1, false))).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "elapsed_secs",
                "hit_ratio_pct",
                "ops_per_sec",
                "ram_hit_ratio_pct"
            ]
        );
        // No gets, no NVM lookups: no ratios (not 0%).
        let idle = Sample {
            gets: 0,
            nvm_gets: Some(0),
            read_us: None,
            write_us: None,
            ..sample(2, true)
        };
        let p = IntervalPoint::from(&idle);
        assert_eq!(
            (p.hit_ratio_pct, p.ram_hit_ratio_pct, p.nvm_hit_ratio_pct),
            (None, None, None)
        );
        let back: IntervalPoint =
            serde_json::from_value(serde_json::to_value(&p).unwrap()).unwrap();
        assert_eq!(back, p);
    }

    #[test]
    fn long_runs_are_thinned_to_the_bound_keeping_the_last() {
        let few: Vec<Sample> = (1..=5).map(|i| sample(i, false)).collect();
        let s = series(&few);
        assert_eq!(s.len(), 5, "short runs keep every interval");
        assert!(series(&[]).is_empty());
        for n in [300, 301, 599, 600, 601, 3601] {
            let many: Vec<Sample> = (1..=n).map(|i| sample(i, false)).collect();
            let s = series(&many);
            assert!(s.len() <= MAX_SERIES_POINTS, "{n}: {}", s.len());
            assert!(s.len() >= MAX_SERIES_POINTS / 2, "{n}: {}", s.len());
            assert_eq!(s.last().unwrap().elapsed_secs, n as f64, "{n}");
            let k = n.div_ceil(MAX_SERIES_POINTS) as f64;
            assert_eq!(s[0].elapsed_secs, k, "{n}: every k-th from the k-th");
            assert!(
                s.windows(2).all(|w| w[1].elapsed_secs > w[0].elapsed_secs),
                "{n}: in order"
            );
        }
    }
}
