//! hashd's distributions and its PID controller.

use rand::Rng;
use rand_distr::{Distribution, Normal};

/// A clamped normal: draw from N(mean, stdev); a draw outside [lo, hi] is
/// replaced by a uniform draw in [lo, hi]. As the stdev grows the
/// distribution becomes uniform.
#[derive(Debug, Clone, Copy)]
pub struct ClampedNormal {
    normal: Option<Normal<f64>>,
    mean: f64,
    lo: f64,
    hi: f64,
}

impl ClampedNormal {
    pub fn new(mean: f64, stdev: f64, lo: f64, hi: f64) -> ClampedNormal {
        let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
        ClampedNormal {
            normal: (stdev > 0.0 && stdev.is_finite())
                .then(|| Normal::new(mean, stdev).ok())
                .flatten(),
            mean,
            lo,
            hi,
        }
    }

    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        let v = match &self.normal {
            Some(n) => n.sample(rng),
            None => self.mean,
        };
        if (self.lo..=self.hi).contains(&v) {
            v
        } else if self.hi > self.lo {
            rng.random_range(self.lo..=self.hi)
        } else {
            self.lo
        }
    }
}

/// Maps a relative position in [-1, 1] to a page of `nr_pages` so the hot
/// spot stays put as the spread widens: |rel| picks the distance from page
/// 0 in steps of two pages, and the sign picks the even or odd one.
pub fn rel_to_page(rel: f64, nr_pages: u64) -> u64 {
    if nr_pages == 0 {
        return 0;
    }
    let half = (nr_pages as f64 / 2.0 * rel.abs()).floor() as u64;
    let idx = half * 2 + u64::from(rel < 0.0);
    idx.min(nr_pages - 1)
}

/// A PID controller (position form) with limits on each term and on the
/// output, steering a measurement toward `setpoint`. The derivative acts
/// on the measurement (no kick when the setpoint changes) and is zero on
/// the first step.
#[derive(Debug, Clone)]
pub struct Pid {
    kp: f64,
    ki: f64,
    kd: f64,
    limit_p: f64,
    limit_i: f64,
    limit_d: f64,
    limit_out: f64,
    setpoint: f64,
    integral: f64,
    prev: Option<f64>,
}

/// One step's terms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PidOutput {
    pub p: f64,
    pub i: f64,
    pub d: f64,
    pub output: f64,
}

impl Pid {
    pub fn new(kp: f64, ki: f64, kd: f64, term_limit: f64, out_limit: f64, setpoint: f64) -> Pid {
        Pid {
            kp,
            ki,
            kd,
            limit_p: term_limit,
            limit_i: term_limit,
            limit_d: term_limit,
            limit_out: out_limit,
            setpoint,
            integral: 0.0,
            prev: None,
        }
    }

    pub fn step(&mut self, measurement: f64) -> PidOutput {
        let err = self.setpoint - measurement;
        let p = (self.kp * err).clamp(-self.limit_p, self.limit_p);
        self.integral = (self.integral + self.ki * err).clamp(-self.limit_i, self.limit_i);
        let d = match self.prev {
            Some(prev) => (-self.kd * (measurement - prev)).clamp(-self.limit_d, self.limit_d),
            None => 0.0,
        };
        self.prev = Some(measurement);
        let output = (p + self.integral + d).clamp(-self.limit_out, self.limit_out);
        PidOutput {
            p,
            i: self.integral,
            d,
            output,
        }
    }

    /// Forgets the accumulated integral.
    pub fn reset_integral(&mut self) {
        self.integral = 0.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn clamped_normal_stays_in_range_and_centres_on_the_mean() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        let d = ClampedNormal::new(100.0, 45.0, 4.0, 200.0);
        let v: Vec<f64> = (0..100_000).map(|_| d.sample(&mut rng)).collect();
        assert!(v.iter().all(|x| (4.0..=200.0).contains(x)));
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        assert!((mean - 100.0).abs() < 1.0, "{mean}");
        // A huge stdev makes it uniform.
        let u = ClampedNormal::new(0.0, 100.0, -1.0, 1.0);
        let v: Vec<f64> = (0..100_000).map(|_| u.sample(&mut rng)).collect();
        let below = v.iter().filter(|x| **x < -0.5).count() as f64 / v.len() as f64;
        assert!((below - 0.25).abs() < 0.01, "{below}");
        // No spread: the mean.
        assert_eq!(ClampedNormal::new(3.0, 0.0, 0.0, 6.0).sample(&mut rng), 3.0);
    }

    #[test]
    fn pages_alternate_sides_of_the_hot_spot() {
        assert_eq!(rel_to_page(0.0, 100), 0);
        assert_eq!(rel_to_page(-0.0001, 100), 1);
        assert_eq!(rel_to_page(0.1, 100), 10);
        assert_eq!(rel_to_page(-0.1, 100), 11);
        assert_eq!(rel_to_page(1.0, 100), 99);
        assert_eq!(rel_to_page(-1.0, 100), 99);
        assert_eq!(rel_to_page(0.5, 0), 0);
    }

    #[test]
    fn pid_terms_limits_and_derivative() {
        let mut pid = Pid::new(0.1, 0.01, 0.01, 0.1, 1.0, 1.0);
        // Latency at 3x the target: p saturates at -0.1.
        let o = pid.step(3.0);
        assert_eq!(o.p, -0.1);
        assert!((o.i + 0.02).abs() < 1e-12);
        assert_eq!(o.d, 0.0);
        assert!((o.output + 0.12).abs() < 1e-12);
        let o = pid.step(2.0);
        assert!((o.d - 0.01).abs() < 1e-12, "falling latency pushes up");
        assert!((o.i + 0.03).abs() < 1e-12);
        for _ in 0..100 {
            pid.step(100.0);
        }
        assert_eq!(pid.step(100.0).i, -0.1, "the integral is limited");
        pid.reset_integral();
        let o = pid.step(1.0);
        assert_eq!(o.i, 0.0);
    }
}
