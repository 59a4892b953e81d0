//! Scores over the results store (comparisons: [`crate::compare`]), as
//! benchpress' `report score` computes them.
//!
//! A run's score is `metric / baseline` (the job file defines both). Scores
//! are pooled per benchmark (benchpress' `JOB_TO_BM`: both FeedSim jobs count
//! as `feedsim`; here the job's `benchmark`, or the baseline's `pool`), zeros
//! dropped, and a pool's score is the value of 1 sample, the mean of 2 or the
//! median of 3 or more. The DCPerf score is the geometric mean of the pool
//! scores: "overall" with 5 benchmarks or more, a "partial geomean" with
//! fewer. Calibrate jobs measure the instrument, not the machine, and never
//! count in the geometric mean.

use crate::store::{RunRow, flatten_numbers};
use serde::Serialize;
use std::fmt::Write as _;

/// Benchmarks a DCPerf score needs before it is "overall" (benchpress).
pub const OVERALL_MIN_BENCHMARKS: usize = 5;

/// DCPerf's benchmarks (benchpress' BASELINES): the only pools whose
/// geometric mean is a DCPerf score. A pool of another name (a baseline's
/// own `pool`, or a workload DCPerf does not score) is the user's.
pub const DCPERF_BENCHMARKS: &[&str] = &[
    "taobench",
    "feedsim",
    "django",
    "mediawiki",
    "sparkbench",
    "video_transcode_svt",
];

/// One job's scores over its runs.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct JobScore {
    pub job: String,
    /// The benchmark its scores are pooled under.
    pub pool: String,
    pub metric: String,
    pub baseline: f64,
    pub runs: usize,
    pub score: f64,
    pub stdev_pct: f64,
    /// Per-run scores, newest first.
    pub samples: Vec<f64>,
}

/// One benchmark's score: its jobs' samples pooled.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PoolScore {
    pub benchmark: String,
    pub jobs: Vec<String>,
    /// The pooled samples above zero.
    pub samples: Vec<f64>,
    /// The value (1 sample), mean (2) or median (3+).
    pub score: f64,
    pub mean: f64,
    /// Sample stdev as % of the mean (3+ samples, as benchpress prints it).
    pub stdev_pct: Option<f64>,
    /// Left out of the DCPerf geometric mean (calibrate).
    pub excluded: bool,
}

/// The geometric mean of the pools that count.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Overall {
    /// `overall` (5 benchmarks or more) or `partial geomean` when every
    /// counted pool is a DCPerf benchmark; `geomean` (not a DCPerf score)
    /// when one is not.
    pub kind: &'static str,
    pub benchmarks: usize,
    pub score: f64,
    /// The counted pools that are not DCPerf benchmarks.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_dcperf: Vec<String>,
}

/// Pools job scores per benchmark (zeros dropped). `excluded` names the
/// pools kept out of the geometric mean.
pub fn pool(jobs: &[JobScore], excluded: &[&str]) -> Vec<PoolScore> {
    let mut pools: std::collections::BTreeMap<&str, (Vec<String>, Vec<f64>)> =
        std::collections::BTreeMap::new();
    for j in jobs {
        let e = pools.entry(j.pool.as_str()).or_default();
        e.0.push(j.job.clone());
        e.1.extend(j.samples.iter().copied().filter(|s| *s > 0.0));
    }
    pools
        .into_iter()
        .filter_map(|(b, (jobs, samples))| {
            let score = central(&samples)?;
            let mean = samples.iter().sum::<f64>() / samples.len() as f64;
            Some(PoolScore {
                benchmark: b.to_string(),
                jobs,
                stdev_pct: (samples.len() >= 3).then(|| stdev_pct(&samples)),
                score,
                mean,
                samples,
                excluded: excluded.contains(&b),
            })
        })
        .collect()
}

/// The geometric mean of the counted pools, named as benchpress names it.
pub fn overall(pools: &[PoolScore]) -> Option<Overall> {
    let counted: Vec<f64> = pools
        .iter()
        .filter(|p| !p.excluded)
        .map(|p| p.score)
        .collect();
    let score = geometric_mean(&counted)?;
    let not_dcperf: Vec<String> = pools
        .iter()
        .filter(|p| !p.excluded && !DCPERF_BENCHMARKS.contains(&p.benchmark.as_str()))
        .map(|p| p.benchmark.clone())
        .collect();
    Some(Overall {
        kind: if !not_dcperf.is_empty() {
            "geomean"
        } else if counted.len() >= OVERALL_MIN_BENCHMARKS {
            "overall"
        } else {
            "partial geomean"
        },
        benchmarks: counted.len(),
        score,
        not_dcperf,
    })
}

/// benchpress' score lines: one per benchmark, then the DCPerf score.
pub fn upstream_text(pools: &[PoolScore], overall: Option<&Overall>) -> String {
    let mut out = String::new();
    for p in pools {
        let n = p.samples.len();
        let _ = match n {
            1 => writeln!(out, "{}: {:.3}, single data point", p.benchmark, p.score),
            2 => writeln!(out, "{}: {:.3}, avg of 2 data points", p.benchmark, p.score),
            _ => writeln!(
                out,
                "{}: {:.3}, median of {n} data points, stdev {:.2}%, mean {:.3}",
                p.benchmark,
                p.score,
                p.stdev_pct.unwrap_or(0.0),
                p.mean
            ),
        };
    }
    if let Some(o) = overall {
        let _ = match o.kind {
            "overall" => writeln!(out, "DCPerf overall score: {:.3}", o.score),
            "partial geomean" => writeln!(out, "DCPerf partial geomean: {:.3}", o.score),
            _ => writeln!(
                out,
                "rackbench geomean of {} benchmark(s): {:.3} (not a DCPerf score: {} {} not DCPerf's)",
                o.benchmarks,
                o.score,
                o.not_dcperf.join(", "),
                if o.not_dcperf.len() == 1 { "is" } else { "are" }
            ),
        };
    }
    out
}

/// Median for 3+, mean for 2, the value for 1.
pub fn central(values: &[f64]) -> Option<f64> {
    match values.len() {
        0 => None,
        1 => Some(values[0]),
        2 => Some((values[0] + values[1]) / 2.0),
        n => {
            let mut v = values.to_vec();
            v.sort_by(f64::total_cmp);
            Some(if n % 2 == 1 {
                v[n / 2]
            } else {
                (v[n / 2 - 1] + v[n / 2]) / 2.0
            })
        }
    }
}

/// Sample standard deviation as a percentage of the mean (0 for one value).
pub fn stdev_pct(values: &[f64]) -> f64 {
    if values.len() < 2 {
        return 0.0;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    if mean == 0.0 {
        0.0
    } else {
        var.sqrt() / mean.abs() * 100.0
    }
}

/// Scores one job from its runs; runs missing the metric are skipped.
pub fn score_job(
    job: &str,
    pool: &str,
    metric: &str,
    baseline: f64,
    runs: &[RunRow],
) -> Option<JobScore> {
    let samples: Vec<f64> = runs
        .iter()
        .filter_map(|r| flatten_numbers(&r.metrics).get(metric).copied())
        .map(|m| m / baseline)
        .collect();
    let score = central(&samples)?;
    Some(JobScore {
        job: job.into(),
        pool: pool.into(),
        metric: metric.into(),
        baseline,
        runs: samples.len(),
        score,
        stdev_pct: stdev_pct(&samples),
        samples,
    })
}

/// Geometric mean of positive scores.
pub fn geometric_mean(scores: &[f64]) -> Option<f64> {
    if scores.is_empty() || scores.iter().any(|s| *s <= 0.0) {
        return None;
    }
    Some((scores.iter().map(|s| s.ln()).sum::<f64>() / scores.len() as f64).exp())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::row;

    #[test]
    fn central_values() {
        assert_eq!(central(&[]), None);
        assert_eq!(central(&[3.0]), Some(3.0));
        assert_eq!(central(&[3.0, 5.0]), Some(4.0));
        assert_eq!(central(&[9.0, 1.0, 5.0]), Some(5.0));
        assert_eq!(central(&[9.0, 1.0, 5.0, 7.0]), Some(6.0));
    }

    #[test]
    fn job_scores_and_overall() {
        let runs = vec![
            row("a", "j", 114.0, true),
            row("b", "j", 57.0, true),
            row("c", "j", 85.5, true),
        ];
        let s = score_job("j", "feedsim", "final_achieved_qps", 57.0, &runs).unwrap();
        assert_eq!(s.runs, 3);
        assert!((s.score - 1.5).abs() < 1e-12);
        assert!((s.stdev_pct - 33.333).abs() < 0.01, "{}", s.stdev_pct);
        assert!((geometric_mean(&[2.0, 8.0]).unwrap() - 4.0).abs() < 1e-12);
        assert_eq!(geometric_mean(&[]), None);
        assert!(score_job("j", "feedsim", "missing", 1.0, &runs).is_none());
    }

    fn js(job: &str, pool: &str, samples: &[f64]) -> JobScore {
        JobScore {
            job: job.into(),
            pool: pool.into(),
            metric: "m".into(),
            baseline: 1.0,
            runs: samples.len(),
            score: central(samples).unwrap_or(0.0),
            stdev_pct: 0.0,
            samples: samples.to_vec(),
        }
    }

    #[test]
    fn pools_per_benchmark_as_benchpress() {
        // Both FeedSim jobs pool into "feedsim"; zeros are dropped.
        let jobs = vec![
            js("feedsim_default", "feedsim", &[1.0, 0.0]),
            js("feedsim_autoscale", "feedsim", &[3.0, 2.0]),
            js("calibrate", "calibrate", &[0.97]),
        ];
        let pools = pool(&jobs, &["calibrate"]);
        assert_eq!(pools.len(), 2);
        let f = pools.iter().find(|p| p.benchmark == "feedsim").unwrap();
        assert_eq!(f.jobs, ["feedsim_default", "feedsim_autoscale"]);
        assert_eq!(f.samples.len(), 3);
        assert_eq!(f.score, 2.0);
        assert!((f.stdev_pct.unwrap() - 50.0).abs() < 1e-9);
        // Calibrate is shown but not in the geometric mean; one counted
        // benchmark is a partial geomean.
        let o = overall(&pools).unwrap();
        assert_eq!((o.kind, o.benchmarks), ("partial geomean", 1));
        assert_eq!(o.score, 2.0);
        let text = upstream_text(&pools, Some(&o));
        assert_eq!(
            text,
            "calibrate: 0.970, single data point\n\
             feedsim: 2.000, median of 3 data points, stdev 50.00%, mean 2.000\n\
             DCPerf partial geomean: 2.000\n"
        );
        // Five benchmarks make an overall score; two samples are averaged.
        let five: Vec<JobScore> = DCPERF_BENCHMARKS[..5]
            .iter()
            .map(|b| js(&format!("j{b}"), b, &[2.0, 8.0]))
            .collect();
        let pools = pool(&five, &[]);
        assert_eq!(pools[0].score, 5.0);
        let o = overall(&pools).unwrap();
        assert_eq!((o.kind, o.benchmarks), ("overall", 5));
        assert!(upstream_text(&pools, Some(&o)).ends_with("DCPerf overall score: 5.000\n"));
        assert!(
            upstream_text(&pools, Some(&o)).starts_with("django: 5.000, avg of 2 data points\n")
        );
        // Pools of the user's own (five of them or not) are never called
        // DCPerf's.
        let mine: Vec<JobScore> = (0..5)
            .map(|i| js(&format!("j{i}"), &format!("b{i}"), &[2.0, 8.0]))
            .chain([js("f", "feedsim", &[5.0])])
            .collect();
        let pools = pool(&mine, &[]);
        let o = overall(&pools).unwrap();
        assert_eq!((o.kind, o.benchmarks), ("geomean", 6));
        let text = upstream_text(&pools, Some(&o));
        assert!(!text.contains("DCPerf overall"), "{text}");
        assert!(
            text.ends_with(
                "rackbench geomean of 6 benchmark(s): 5.000 (not a DCPerf score: b0, b1, b2, b3, b4 are not DCPerf's)\n"
            ),
            "{text}"
        );
        // Nothing counted: no DCPerf line.
        assert!(overall(&pool(&[js("c", "calibrate", &[1.0])], &["calibrate"])).is_none());
    }
}
