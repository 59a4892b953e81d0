//! Arrival processes for open-loop load: when each request is *meant* to start.
//!
//! A process is split across `workers` independent streams whose union has the
//! requested rate: constant pacing interleaves the streams by phase, Poisson
//! streams are independent Poisson processes at `rate / workers` (their union is
//! Poisson at `rate`), and synchronised bursts fire every worker at the same
//! instants with its share of the burst.

use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand_distr::{Distribution, Exp};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The shape of an open-loop arrival process.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arrival {
    /// Evenly spaced requests (what FeedSim's driver does).
    Constant,
    /// Exponentially distributed gaps (a Poisson process).
    Poisson,
    /// `size` requests sent together, bursts spaced so the mean rate holds.
    Burst { size: u32 },
}

impl fmt::Display for Arrival {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arrival::Constant => f.write_str("constant"),
            Arrival::Poisson => f.write_str("poisson"),
            Arrival::Burst { size } => write!(f, "burst:{size}"),
        }
    }
}

impl FromStr for Arrival {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "constant" => Ok(Arrival::Constant),
            "poisson" | "exponential" => Ok(Arrival::Poisson),
            _ => {
                if let Some(n) = s.strip_prefix("burst:") {
                    match n.parse::<u32>() {
                        Ok(size) if size > 0 => Ok(Arrival::Burst { size }),
                        _ => Err(format!("burst size in '{s}' must be a positive integer")),
                    }
                } else {
                    Err(format!(
                        "unknown arrival process '{s}': expected constant, poisson or burst:N"
                    ))
                }
            }
        }
    }
}

/// The schedule of one worker's stream: an iterator of offsets from the common
/// start, each the intended start of one request.
#[derive(Debug)]
pub struct Schedule {
    kind: Kind,
    next: f64,
    pending_in_burst: u32,
}

#[derive(Debug)]
enum Kind {
    Constant { gap: f64 },
    Poisson { exp: Exp<f64>, rng: SmallRng },
    Burst { period: f64, share: u32 },
    Idle,
}

impl Schedule {
    /// Stream `worker` of `workers` for a total `rate` (requests per second).
    pub fn new(arrival: Arrival, rate: f64, worker: usize, workers: usize, seed: u64) -> Self {
        let workers = workers.max(1);
        if !(rate.is_finite() && rate > 0.0) {
            return Schedule {
                kind: Kind::Idle,
                next: f64::INFINITY,
                pending_in_burst: 0,
            };
        }
        match arrival {
            Arrival::Constant => {
                let gap = workers as f64 / rate;
                // Phase-shift the streams so their union is evenly spaced.
                let next = worker as f64 / rate;
                Schedule {
                    kind: Kind::Constant { gap },
                    next,
                    pending_in_burst: 0,
                }
            }
            Arrival::Poisson => {
                let lambda = rate / workers as f64;
                let exp = Exp::new(lambda).expect("positive finite rate");
                let mut rng = SmallRng::seed_from_u64(
                    seed ^ (worker as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                );
                let next = exp.sample(&mut rng);
                Schedule {
                    kind: Kind::Poisson { exp, rng },
                    next,
                    pending_in_burst: 0,
                }
            }
            Arrival::Burst { size } => {
                let period = size as f64 / rate;
                // Worker `w` sends its share of each burst; the remainder goes to
                // the first workers so the burst size is exact.
                let base = size / workers as u32;
                let extra = u32::from((worker as u32) < size % workers as u32);
                let share = base + extra;
                if share == 0 {
                    return Schedule {
                        kind: Kind::Idle,
                        next: f64::INFINITY,
                        pending_in_burst: 0,
                    };
                }
                Schedule {
                    kind: Kind::Burst { period, share },
                    next: 0.0,
                    pending_in_burst: share,
                }
            }
        }
    }

    /// Offset of the next intended start, without consuming it.
    pub fn peek(&self) -> Option<Duration> {
        self.next
            .is_finite()
            .then(|| Duration::from_secs_f64(self.next))
    }

    /// Consumes the next intended start.
    pub fn advance(&mut self) {
        match &mut self.kind {
            Kind::Constant { gap } => self.next += *gap,
            Kind::Poisson { exp, rng } => self.next += exp.sample(rng),
            Kind::Burst { period, share } => {
                self.pending_in_burst -= 1;
                if self.pending_in_burst == 0 {
                    self.pending_in_burst = *share;
                    self.next += *period;
                }
            }
            Kind::Idle => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(a: Arrival, rate: f64, workers: usize, until: f64) -> Vec<f64> {
        let mut all = Vec::new();
        for w in 0..workers {
            let mut s = Schedule::new(a, rate, w, workers, 7);
            while let Some(t) = s.peek() {
                if t.as_secs_f64() >= until {
                    break;
                }
                all.push(t.as_secs_f64());
                s.advance();
            }
        }
        all.sort_by(f64::total_cmp);
        all
    }

    #[test]
    fn constant_streams_interleave_evenly() {
        let t = offsets(Arrival::Constant, 1000.0, 3, 1.0);
        assert_eq!(t.len(), 1000);
        for pair in t.windows(2) {
            assert!((pair[1] - pair[0] - 0.001).abs() < 1e-9, "{pair:?}");
        }
    }

    #[test]
    fn poisson_rate_and_dispersion() {
        let t = offsets(Arrival::Poisson, 2000.0, 4, 50.0);
        let n = t.len() as f64;
        assert!(
            (n / 50.0 - 2000.0).abs() < 2000.0 * 0.02,
            "rate {}",
            n / 50.0
        );
        // Exponential gaps: coefficient of variation close to 1.
        let gaps: Vec<f64> = t.windows(2).map(|p| p[1] - p[0]).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        let cv = var.sqrt() / mean;
        assert!((cv - 1.0).abs() < 0.05, "cv {cv}");
    }

    #[test]
    fn bursts_are_synchronised_and_exact() {
        let t = offsets(Arrival::Burst { size: 10 }, 100.0, 3, 1.0);
        assert_eq!(t.len(), 100);
        // Ten instants, each with exactly ten requests.
        for chunk in t.chunks(10) {
            assert!(chunk.iter().all(|x| (x - chunk[0]).abs() < 1e-12));
        }
        assert!((t[10] - t[0] - 0.1).abs() < 1e-9);
    }

    #[test]
    fn parse_arrivals() {
        assert_eq!("poisson".parse::<Arrival>().unwrap(), Arrival::Poisson);
        assert_eq!(
            "burst:8".parse::<Arrival>().unwrap(),
            Arrival::Burst { size: 8 }
        );
        assert!("burst:0".parse::<Arrival>().is_err());
        assert!(
            "uniform"
                .parse::<Arrival>()
                .unwrap_err()
                .contains("constant, poisson")
        );
    }
}
