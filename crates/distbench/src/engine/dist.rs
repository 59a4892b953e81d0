//! Sampling from Distbench's `DistributionConfig`s: payload sizes (joint
//! request/response, or one `payload_size`) and action delays.
//!
//! A PMF config picks one point with its probability; each of the point's
//! data points gives one field, either `exact` or uniform in
//! `[lower, upper]`. A CDF config is one field: draw u in [0, 1) and take
//! the value of the first point whose cumulative probability reaches u;
//! when its first point has `cdf: 0`, upstream reads it as uniform within
//! each interval instead (`[value_0, value_1]`, then `(value_{i-1},
//! value_i]`), and so does this.

use crate::Error;
use crate::proto::DistributionConfig;
use rand::Rng;

/// A ready-to-sample distribution of one or more fields.
#[derive(Debug, Clone)]
pub struct Sampler {
    /// The config's field names, in the order samples carry them.
    pub fields: Vec<String>,
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    /// Cumulative probability of each point, and the point's fields.
    Pmf(Vec<(f64, Vec<Field>)>),
    /// (cumulative probability, value) pairs, increasing.
    Cdf(Vec<(f64, i64)>),
}

#[derive(Debug, Clone, Copy)]
enum Field {
    Exact(i64),
    Range(i64, i64),
}

impl Sampler {
    /// Builds a sampler; the config is expected to have passed `check_test`
    /// (`crate::check::distribution`), the error names what is still wrong.
    pub fn new(config: &DistributionConfig) -> Result<Sampler, Error> {
        let name = config.name();
        let kind = if config.cdf_points.first().is_some_and(|p| p.cdf() == 0.0) {
            // A CDF starting at probability 0 is uniform within its
            // intervals, as upstream reads it: the first interval is
            // [value_0, value_1], each next one (value_{i-1}, value_i].
            let mut points = Vec::with_capacity(config.cdf_points.len());
            let mut lower = config.cdf_points[0].value();
            for p in &config.cdf_points[1..] {
                let upper = p.value().max(lower);
                points.push((f64::from(p.cdf()), vec![Field::Range(lower, upper)]));
                lower = p.value().saturating_add(1);
            }
            if points.is_empty() {
                // A single point at probability 0 draws nothing but it.
                points.push((1.0, vec![Field::Exact(config.cdf_points[0].value())]));
            }
            Kind::Pmf(points)
        } else if !config.cdf_points.is_empty() {
            let mut points = Vec::with_capacity(config.cdf_points.len());
            for p in &config.cdf_points {
                points.push((f64::from(p.cdf()), p.value()));
            }
            Kind::Cdf(points)
        } else if !config.pmf_points.is_empty() {
            let mut cumulative = 0.0;
            let mut points = Vec::with_capacity(config.pmf_points.len());
            for (i, p) in config.pmf_points.iter().enumerate() {
                cumulative += f64::from(p.pmf());
                let mut fields = Vec::with_capacity(p.data_points.len());
                for d in &p.data_points {
                    fields.push(match (d.exact, d.lower, d.upper) {
                        (Some(v), _, _) => Field::Exact(v),
                        (None, Some(lo), Some(hi)) if lo <= hi => Field::Range(lo, hi),
                        _ => {
                            return Err(Error::Input(format!(
                                "distribution '{name}': pmf_points[{i}] has a data point \
                                 without exact nor a lower <= upper range"
                            )));
                        }
                    });
                }
                points.push((cumulative, fields));
            }
            Kind::Pmf(points)
        } else {
            return Err(Error::Input(format!("distribution '{name}' has no points")));
        };
        Ok(Sampler {
            fields: config.field_names.clone(),
            kind,
        })
    }

    /// The index of field `name`, if the distribution has it.
    pub fn field(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f == name)
    }

    /// One sample: a value per field.
    pub fn sample(&self, rng: &mut impl Rng) -> Vec<i64> {
        let u: f64 = rng.random();
        match &self.kind {
            Kind::Cdf(points) => {
                let v = points
                    .iter()
                    .find(|(c, _)| *c >= u)
                    .or(points.last())
                    .map_or(0, |(_, v)| *v);
                vec![v]
            }
            Kind::Pmf(points) => {
                let (_, fields) = points
                    .iter()
                    .find(|(c, _)| *c >= u)
                    .or(points.last())
                    .expect("a PMF sampler has points");
                fields
                    .iter()
                    .map(|f| match *f {
                        Field::Exact(v) => v,
                        Field::Range(lo, hi) => rng.random_range(lo..=hi),
                    })
                    .collect()
            }
        }
    }

    /// One sample of the first field (delays, payload sizes).
    pub fn sample_scalar(&self, rng: &mut impl Rng) -> i64 {
        self.sample(rng).first().copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{CdfPoint, DataPoint, PmfPoint};
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    #[test]
    fn cdf_takes_first_point_reaching_u() {
        let c = DistributionConfig {
            name: Some("d".into()),
            cdf_points: vec![
                CdfPoint {
                    cdf: Some(0.25),
                    value: Some(10),
                },
                CdfPoint {
                    cdf: Some(1.0),
                    value: Some(20),
                },
            ],
            field_names: vec!["payload_size".into()],
            ..Default::default()
        };
        let s = Sampler::new(&c).unwrap();
        let mut rng = SmallRng::seed_from_u64(1);
        let n = 20_000;
        let tens = (0..n).filter(|_| s.sample_scalar(&mut rng) == 10).count();
        let frac = tens as f64 / n as f64;
        assert!((frac - 0.25).abs() < 0.02, "{frac}");
    }

    #[test]
    fn cdf_from_zero_is_uniform_within_intervals() {
        let c = DistributionConfig {
            name: Some("u".into()),
            cdf_points: vec![
                CdfPoint {
                    cdf: Some(0.0),
                    value: Some(1000),
                },
                CdfPoint {
                    cdf: Some(0.5),
                    value: Some(2000),
                },
                CdfPoint {
                    cdf: Some(1.0),
                    value: Some(3000),
                },
            ],
            field_names: vec!["payload_size".into()],
            ..Default::default()
        };
        let s = Sampler::new(&c).unwrap();
        let mut rng = SmallRng::seed_from_u64(3);
        let draws: Vec<i64> = (0..20_000).map(|_| s.sample_scalar(&mut rng)).collect();
        assert!(draws.iter().all(|v| (1000..=3000).contains(v)));
        let low = draws.iter().filter(|v| **v <= 2000).count() as f64 / 20_000.0;
        assert!((low - 0.5).abs() < 0.02, "{low}");
        // Spread over the interval, not its end points.
        let distinct: std::collections::BTreeSet<i64> = draws.iter().copied().collect();
        assert!(distinct.len() > 1500, "{}", distinct.len());
        assert!(draws.iter().any(|v| (1200..1800).contains(v)));
    }

    #[test]
    fn pmf_joint_fields_and_ranges() {
        let point = |p: f32, a: DataPoint, b: DataPoint| PmfPoint {
            pmf: Some(p),
            data_points: vec![a, b],
        };
        let exact = |v| DataPoint {
            exact: Some(v),
            ..Default::default()
        };
        let range = |lo, hi| DataPoint {
            lower: Some(lo),
            upper: Some(hi),
            ..Default::default()
        };
        let c = DistributionConfig {
            name: Some("j".into()),
            pmf_points: vec![
                point(0.5, exact(1), exact(2)),
                point(0.5, range(100, 199), exact(7)),
            ],
            field_names: vec![
                "request_payload_size".into(),
                "response_payload_size".into(),
            ],
            ..Default::default()
        };
        let s = Sampler::new(&c).unwrap();
        assert_eq!(s.field("response_payload_size"), Some(1));
        let mut rng = SmallRng::seed_from_u64(2);
        let mut seen_range = false;
        for _ in 0..1000 {
            match s.sample(&mut rng).as_slice() {
                [1, 2] => {}
                [r, 7] => {
                    assert!((100..=199).contains(r));
                    seen_range = true;
                }
                other => panic!("unexpected sample {other:?}"),
            }
        }
        assert!(seen_range);
        let bad = DistributionConfig {
            name: Some("b".into()),
            pmf_points: vec![PmfPoint {
                pmf: Some(1.0),
                data_points: vec![DataPoint::default()],
            }],
            ..Default::default()
        };
        assert!(
            Sampler::new(&bad)
                .unwrap_err()
                .to_string()
                .contains("pmf_points[0]")
        );
    }
}
