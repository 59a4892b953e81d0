//! Validating a `DistributionConfig`, as upstream does before building a
//! sample generator from it.

use crate::proto::DistributionConfig;

/// What a distribution is used for, which fixes its field names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// `distribution_config` of RPCs and `size_distribution_configs`:
    /// `request_payload_size` and `response_payload_size`, or `payload_size`.
    Size,
    /// `delay_distribution_configs`: `action_delay_ns`.
    Delay,
}

impl Use {
    /// The accepted sets of field names, in upstream's order of preference.
    fn field_sets(self) -> &'static [&'static [&'static str]] {
        match self {
            Use::Size => &[
                &["request_payload_size", "response_payload_size"],
                &["payload_size"],
            ],
            Use::Delay => &[&["action_delay_ns"]],
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Use::Size => "[request_payload_size, response_payload_size] or [payload_size]",
            Use::Delay => "[action_delay_ns]",
        }
    }
}

/// Tolerance on the sum of PMF probabilities.
pub const PMF_TOLERANCE: f64 = 1e-6;

/// Every problem of `config` used as `usage`.
pub fn check(config: &DistributionConfig, usage: Use) -> Vec<String> {
    let mut problems = Vec::new();
    let has_cdf = !config.cdf_points.is_empty();
    let has_pmf = !config.pmf_points.is_empty();
    if has_cdf == has_pmf {
        problems.push(format!(
            "exactly one of pmf_points and cdf_points must be given (got {})",
            if has_cdf { "both" } else { "neither" }
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for name in &config.field_names {
        if !seen.insert(name.as_str()) {
            problems.push(format!("field_names repeats '{name}'"));
        }
    }
    let fits = |set: &&[&str]| set.iter().all(|f| seen.contains(f));
    if !usage.field_sets().iter().any(fits) {
        problems.push(format!(
            "field_names must include {}, got [{}]",
            usage.describe(),
            config.field_names.join(", ")
        ));
    }
    if has_cdf && !has_pmf {
        problems.extend(check_cdf(config));
    }
    if has_pmf && !has_cdf {
        problems.extend(check_pmf(config));
    }
    problems
}

/// CDF points: values strictly increasing, cdf never decreasing from a
/// non-negative start, and the last cdf exactly 1.
fn check_cdf(config: &DistributionConfig) -> Vec<String> {
    let mut problems = Vec::new();
    let points = &config.cdf_points;
    if points[0].cdf() < 0.0 {
        problems.push(format!(
            "cdf_points[0]: cdf {} must not be negative",
            points[0].cdf()
        ));
    }
    for (i, pair) in points.windows(2).enumerate() {
        let (prev, cur) = (&pair[0], &pair[1]);
        if cur.value() <= prev.value() {
            problems.push(format!(
                "cdf_points[{}]: value {} must be greater than the previous value {}",
                i + 1,
                cur.value(),
                prev.value()
            ));
        }
        if cur.cdf() < prev.cdf() {
            problems.push(format!(
                "cdf_points[{}]: cdf {} must not be less than the previous cdf {}",
                i + 1,
                cur.cdf(),
                prev.cdf()
            ));
        }
    }
    let last = points[points.len() - 1].cdf();
    if last != 1.0 {
        problems.push(format!(
            "the last cdf is {last}; it must be exactly 1 (cdf_points[{}])",
            points.len() - 1
        ));
    }
    problems
}

/// PMF points: one data point per field name (or the same number in every
/// point), and probabilities summing to 1 within [`PMF_TOLERANCE`].
fn check_pmf(config: &DistributionConfig) -> Vec<String> {
    let mut problems = Vec::new();
    let dimensions = if config.field_names.is_empty() {
        config.pmf_points[0].data_points.len()
    } else {
        config.field_names.len()
    };
    let mut total = 0.0f64;
    for (i, point) in config.pmf_points.iter().enumerate() {
        if point.data_points.len() != dimensions {
            problems.push(format!(
                "pmf_points[{i}] has {} data_points, but {} {} given",
                point.data_points.len(),
                dimensions,
                if config.field_names.is_empty() {
                    "the first point has"
                } else {
                    "field_names are"
                }
            ));
        }
        total += f64::from(point.pmf());
    }
    if (total - 1.0).abs() > PMF_TOLERANCE {
        problems.push(format!(
            "the pmf probabilities sum to {total}; they must sum to 1 (within {PMF_TOLERANCE})"
        ));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{CdfPoint, DataPoint, PmfPoint};

    fn cdf(points: &[(i64, f32)], fields: &[&str]) -> DistributionConfig {
        DistributionConfig {
            name: Some("d".into()),
            cdf_points: points
                .iter()
                .map(|&(value, cdf)| CdfPoint {
                    cdf: Some(cdf),
                    value: Some(value),
                })
                .collect(),
            field_names: fields.iter().map(|f| f.to_string()).collect(),
            ..Default::default()
        }
    }

    fn pmf(points: &[(f32, usize)], fields: &[&str]) -> DistributionConfig {
        DistributionConfig {
            name: Some("d".into()),
            pmf_points: points
                .iter()
                .map(|&(pmf, dims)| PmfPoint {
                    pmf: Some(pmf),
                    data_points: vec![
                        DataPoint {
                            exact: Some(1),
                            ..Default::default()
                        };
                        dims
                    ],
                })
                .collect(),
            field_names: fields.iter().map(|f| f.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn valid_ones_pass() {
        assert!(check(&cdf(&[(1, 0.5), (2, 1.0)], &["payload_size"]), Use::Size).is_empty());
        let two = ["request_payload_size", "response_payload_size"];
        assert!(check(&pmf(&[(0.25, 2), (0.75, 2)], &two), Use::Size).is_empty());
        assert!(check(&pmf(&[(1.0, 1)], &["action_delay_ns"]), Use::Delay).is_empty());
        // Ten tenths do not add up to exactly 1 in floating point.
        assert!(check(&pmf(&[(0.1, 1); 10], &["payload_size"]), Use::Size).is_empty());
    }

    #[test]
    fn each_rule_reports() {
        let cases: Vec<(DistributionConfig, Use, &str)> = vec![
            (
                DistributionConfig::default(),
                Use::Size,
                "exactly one of pmf_points and cdf_points must be given (got neither)",
            ),
            (
                DistributionConfig {
                    pmf_points: pmf(&[(1.0, 1)], &[]).pmf_points,
                    ..cdf(&[(1, 1.0)], &["payload_size"])
                },
                Use::Size,
                "(got both)",
            ),
            (
                cdf(&[(1, 1.0)], &["payload_size", "payload_size"]),
                Use::Size,
                "field_names repeats 'payload_size'",
            ),
            (
                cdf(&[(1, 1.0)], &["request_payload_size"]),
                Use::Size,
                "field_names must include [request_payload_size, response_payload_size] or [payload_size], got [request_payload_size]",
            ),
            (
                cdf(&[(1, 1.0)], &["payload_size"]),
                Use::Delay,
                "field_names must include [action_delay_ns]",
            ),
            (
                cdf(&[(5, 0.5), (5, 1.0)], &["payload_size"]),
                Use::Size,
                "cdf_points[1]: value 5 must be greater than the previous value 5",
            ),
            (
                cdf(&[(1, 0.6), (2, 0.5), (3, 1.0)], &["payload_size"]),
                Use::Size,
                "cdf_points[1]: cdf 0.5 must not be less than the previous cdf 0.6",
            ),
            (
                cdf(&[(1, 0.5), (2, 0.99)], &["payload_size"]),
                Use::Size,
                "the last cdf is 0.99; it must be exactly 1",
            ),
            (
                cdf(&[(1, -0.5), (2, 1.0)], &["payload_size"]),
                Use::Size,
                "cdf -0.5 must not be negative",
            ),
            (
                pmf(&[(0.5, 1), (0.4, 1)], &["payload_size"]),
                Use::Size,
                "the pmf probabilities sum to 0.9",
            ),
            (
                pmf(
                    &[(0.5, 2), (0.5, 1)],
                    &["request_payload_size", "response_payload_size"],
                ),
                Use::Size,
                "pmf_points[1] has 1 data_points, but 2 field_names are given",
            ),
        ];
        for (config, usage, want) in cases {
            let problems = check(&config, usage);
            assert!(
                problems.iter().any(|p| p.contains(want)),
                "want '{want}' in {problems:?}"
            );
        }
    }
}
