//! Scores over the results store (comparisons: [`crate::compare`]).
//!
//! A job's score is `metric / baseline` (the job file defines both). Over its
//! recorded successful runs: the median of 3 or more, the mean of 2, the value
//! of 1, with the standard deviation as a percentage of the mean. The overall
//! score is the geometric mean of the job scores.

use crate::store::{RunRow, flatten_numbers};
use serde::Serialize;

/// One job's score over its runs.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct JobScore {
    pub job: String,
    pub metric: String,
    pub baseline: f64,
    pub runs: usize,
    pub score: f64,
    pub stdev_pct: f64,
    /// Per-run scores, newest first.
    pub samples: Vec<f64>,
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
pub fn score_job(job: &str, metric: &str, baseline: f64, runs: &[RunRow]) -> Option<JobScore> {
    let samples: Vec<f64> = runs
        .iter()
        .filter_map(|r| flatten_numbers(&r.metrics).get(metric).copied())
        .map(|m| m / baseline)
        .collect();
    let score = central(&samples)?;
    Some(JobScore {
        job: job.into(),
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
        let s = score_job("j", "final_achieved_qps", 57.0, &runs).unwrap();
        assert_eq!(s.runs, 3);
        assert!((s.score - 1.5).abs() < 1e-12);
        assert!((s.stdev_pct - 33.333).abs() < 0.01, "{}", s.stdev_pct);
        assert!((geometric_mean(&[2.0, 8.0]).unwrap() - 4.0).abs() < 1e-12);
        assert_eq!(geometric_mean(&[]), None);
        assert!(score_job("j", "missing", 1.0, &runs).is_none());
    }
}
