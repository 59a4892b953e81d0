//! The M/D/c queue: Poisson arrivals, a deterministic service time `D`, `c`
//! servers, first come first served. The calibration service is built to be
//! exactly this queue, so its capacity and latency percentiles are known.
//!
//! Method (Crommelin's): let `N(s)` be the number in system at time `s`.
//! Everyone in service at `s` has left by `s + D`, everyone waiting at `s` or
//! arriving in `(s, s + D]` is still there, so
//! `N(s + D) = max(N(s) - c, 0) + A` with `A ~ Poisson(λD)`; its stationary
//! law is the time-stationary law of `N` (and, by PASTA, what arrivals see).
//! Following an arrival `C` forward in steps of `D` gives, for
//! `x = (j + 1)D - τ` with `τ ∈ (0, D]`:
//!
//! `P(W <= x) = P(max(N - c, 0) + Poisson(λτ) <= (j + 1)c - 1)`
//!
//! (the customers ahead of and including `C` still present at time `x` must
//! number at most `c`). The stationary law is found
//! by GTH elimination (Grassmann, Taksar and Heyman: no subtractions, so it is
//! numerically stable) on the banded transition matrix: from state `i` the
//! chain moves to `[i - c, i - c + L]`, so elimination never fills outside
//! that band and costs O(K L c) for K states and a Poisson support of L.

/// Stationary distribution of the number in system.
#[derive(Debug, Clone)]
pub struct Mdc {
    pub servers: usize,
    /// Service time, seconds.
    pub service: f64,
    /// Arrival rate, per second.
    pub lambda: f64,
    pi: Vec<f64>,
}

/// Errors of the model's inputs.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ModelError {
    #[error("the queue is unstable: arrival rate {lambda:.1}/s >= capacity {capacity:.1}/s")]
    Unstable { lambda: f64, capacity: f64 },
    #[error("the model needs at least one server and a positive service time")]
    Degenerate,
}

fn poisson_pmf(mean: f64, len: usize) -> Vec<f64> {
    let mut p = Vec::with_capacity(len);
    let mut v = (-mean).exp();
    for k in 0..len {
        p.push(v);
        v *= mean / (k + 1) as f64;
    }
    p
}

/// Poisson support long enough that the rest has mass below 1e-15.
fn poisson_len(mean: f64) -> usize {
    (mean + 12.0 * mean.sqrt() + 30.0).ceil() as usize
}

impl Mdc {
    /// Capacity of the queue, per second.
    pub fn capacity(servers: usize, service: f64) -> f64 {
        servers as f64 / service
    }

    /// Solves the stationary law at rate `lambda`.
    pub fn new(servers: usize, service: f64, lambda: f64) -> Result<Self, ModelError> {
        if servers == 0 || !(service > 0.0) {
            return Err(ModelError::Degenerate);
        }
        let capacity = Self::capacity(servers, service);
        if !(lambda < capacity) || lambda < 0.0 {
            return Err(ModelError::Unstable { lambda, capacity });
        }
        let a = lambda * service;
        let pois = poisson_pmf(a, poisson_len(a));
        // Truncation: long enough for the geometric tail at this load.
        let rho = a / servers as f64;
        let tail = (60.0 / (1.0 - rho)).ceil() as usize;
        let k = (servers + pois.len() + tail).min(400_000);
        let pi = gth_banded(k, servers, &pois);
        Ok(Mdc {
            servers,
            service,
            lambda,
            pi,
        })
    }

    /// `P(W <= x)` for a waiting time `x` in seconds.
    pub fn wait_cdf(&self, x: f64) -> f64 {
        if x < 0.0 {
            return 0.0;
        }
        let d = self.service;
        let j = (x / d).floor();
        let tau = (j + 1.0) * d - x; // in (0, D]
        let limit = (j as usize + 1) * self.servers; // need count <= limit - 1
        let pois = poisson_pmf(self.lambda * tau, limit);
        // Distribution of M = max(N - c, 0), then convolve and sum up to limit - 1.
        let mut prob = 0.0;
        for (i, &p) in self.pi.iter().enumerate() {
            let m = i.saturating_sub(self.servers);
            if m >= limit {
                break;
            }
            let cum: f64 = pois[..limit - m].iter().sum();
            prob += p * cum;
        }
        prob.min(1.0)
    }

    /// The `q` quantile of the waiting time, seconds.
    pub fn wait_quantile(&self, q: f64) -> f64 {
        if self.wait_cdf(0.0) >= q {
            return 0.0;
        }
        let mut hi = self.service;
        while self.wait_cdf(hi) < q {
            hi *= 2.0;
        }
        let mut lo = 0.0;
        for _ in 0..60 {
            let mid = (lo + hi) / 2.0;
            if self.wait_cdf(mid) >= q {
                hi = mid
            } else {
                lo = mid
            }
        }
        hi
    }

    /// The `q` quantile of the time in system (wait + service), seconds.
    pub fn sojourn_quantile(&self, q: f64) -> f64 {
        self.wait_quantile(q) + self.service
    }

    /// `P(W + D + O <= t)` for an overhead `O` outside the queue (network,
    /// scheduling, the client) independent of it and given as equally
    /// likely values in seconds; no values means no overhead.
    pub fn sojourn_cdf_with(&self, t: f64, overhead: &[f64]) -> f64 {
        if overhead.is_empty() {
            return self.wait_cdf(t - self.service);
        }
        let sum: f64 = overhead
            .iter()
            .map(|o| self.wait_cdf(t - self.service - o))
            .sum();
        sum / overhead.len() as f64
    }

    /// The `q` quantile of `W + D + O` (see [`Mdc::sojourn_cdf_with`]), seconds.
    pub fn sojourn_quantile_with(&self, q: f64, overhead: &[f64]) -> f64 {
        let least = overhead.iter().copied().fold(0.0f64, f64::min);
        let mut lo = self.service + least;
        let mut hi = self.service + overhead.iter().copied().fold(0.0f64, f64::max) + self.service;
        while self.sojourn_cdf_with(hi, overhead) < q {
            hi += hi - lo;
        }
        for _ in 0..60 {
            let mid = (lo + hi) / 2.0;
            if self.sojourn_cdf_with(mid, overhead) >= q {
                hi = mid
            } else {
                lo = mid
            }
        }
        hi
    }

    /// Mean number in system.
    pub fn mean_in_system(&self) -> f64 {
        self.pi.iter().enumerate().map(|(i, p)| i as f64 * p).sum()
    }
}

/// Stationary distribution of `N' = max(N - c, 0) + A` on states `0..k`
/// (mass beyond `k` is truncated away), by banded GTH elimination.
fn gth_banded(k: usize, c: usize, pois: &[f64]) -> Vec<f64> {
    let l = pois.len() - 1; // largest upward jump from the floor
    let w = c + l + 1; // band width: offsets j - i in [-c, l]
    let mut band = vec![0.0f64; k * w];
    let at = |i: usize, j: usize| i * w + (j + c - i);
    for i in 0..k {
        let m = i.saturating_sub(c);
        for (d, &p) in pois.iter().enumerate() {
            let j = m + d;
            if j >= k {
                break;
            }
            if j != i {
                band[at(i, j)] = p;
            }
        }
    }
    // Eliminate states from the top; s[n] is state n's outflow to lower states.
    let mut s = vec![0.0f64; k];
    for n in (1..k).rev() {
        let lo_j = n.saturating_sub(c);
        let out: f64 = (lo_j..n).map(|j| band[at(n, j)]).sum();
        s[n] = out;
        if out <= 0.0 {
            continue;
        }
        let lo_i = n.saturating_sub(l);
        for i in lo_i..n {
            let pin = band[at(i, n)];
            if pin == 0.0 {
                continue;
            }
            let f = pin / out;
            for j in lo_j..n {
                if j != i {
                    let pnj = band[at(n, j)];
                    band[at(i, j)] += f * pnj;
                }
            }
        }
    }
    let mut pi = vec![0.0f64; k];
    pi[0] = 1.0;
    for n in 1..k {
        if s[n] <= 0.0 {
            continue;
        }
        let lo_i = n.saturating_sub(l);
        let inflow: f64 = (lo_i..n).map(|i| pi[i] * band[at(i, n)]).sum();
        pi[n] = inflow / s[n];
    }
    let total: f64 = pi.iter().sum();
    pi.iter_mut().for_each(|p| *p /= total);
    pi
}

/// The highest arrival rate whose `q` sojourn-time quantile is at most
/// `target` seconds, or 0 when even an empty queue misses it (target < D).
pub fn max_rate_for_target(
    servers: usize,
    service: f64,
    q: f64,
    target: f64,
) -> Result<f64, ModelError> {
    if servers == 0 || !(service > 0.0) {
        return Err(ModelError::Degenerate);
    }
    max_rate_for_target_with(servers, service, q, target, &[])
}

/// [`max_rate_for_target`] with an overhead outside the queue added to
/// every request's time (equally likely values, seconds; see
/// [`Mdc::sojourn_cdf_with`]): the highest rate at which `P(W + D + O <=
/// target) >= q`, or 0 when even an idle queue misses it.
pub fn max_rate_for_target_with(
    servers: usize,
    service: f64,
    q: f64,
    target: f64,
    overhead: &[f64],
) -> Result<f64, ModelError> {
    if servers == 0 || !(service > 0.0) {
        return Err(ModelError::Degenerate);
    }
    let cap = Mdc::capacity(servers, service);
    let meets = |lambda: f64| -> Result<bool, ModelError> {
        Ok(Mdc::new(servers, service, lambda)?.sojourn_cdf_with(target, overhead) >= q)
    };
    if target < service || !meets(cap * 1e-6)? {
        return Ok(0.0);
    }
    let (mut lo, mut hi) = (0.0, cap);
    while hi - lo > cap * 1e-5 {
        let mid = (lo + hi) / 2.0;
        if meets(mid)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_constant_overhead_shifts_the_sojourn_time_and_shrinks_the_rate() {
        let m = Mdc::new(8, 0.010, 600.0).expect("stable");
        for q in [0.5, 0.95, 0.99] {
            let plain = m.sojourn_quantile(q);
            let with = m.sojourn_quantile_with(q, &[0.002]);
            assert!(
                (with - plain - 0.002).abs() < 1e-6,
                "q {q}: {with} vs {plain} + 2 ms"
            );
        }
        // A constant overhead o is the target lowered by o.
        let shifted = max_rate_for_target(8, 0.010, 0.99, 0.018).expect("model");
        let with = max_rate_for_target_with(8, 0.010, 0.99, 0.020, &[0.002]).expect("model");
        assert!((with - shifted).abs() < 0.02, "{with} vs {shifted}");
        let plain = max_rate_for_target(8, 0.010, 0.99, 0.020).expect("model");
        assert!(with < plain - 10.0, "{with} should be well below {plain}");
        // An overhead spread around its mean costs more at a high quantile
        // than the mean alone would.
        let spread = max_rate_for_target_with(8, 0.010, 0.99, 0.020, &[0.0, 0.004]).expect("model");
        assert!(spread < with, "{spread} vs {with}");
        // An overhead that alone breaks the target leaves no rate.
        let none = max_rate_for_target_with(8, 0.010, 0.99, 0.020, &[0.011]).expect("model");
        assert_eq!(none, 0.0);
    }
    use rand::{Rng, SeedableRng};

    /// An independent check: a discrete-event simulation of the same queue.
    fn simulate_wait_quantile(c: usize, d: f64, lambda: f64, q: f64, n: usize) -> (f64, f64) {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(42);
        // Free times of the servers; FCFS with deterministic service means the
        // next customer takes the earliest-free server.
        let mut free = vec![0.0f64; c];
        let mut t = 0.0;
        let mut waits = Vec::with_capacity(n);
        for _ in 0..n {
            t += -(1.0 - rng.random::<f64>()).ln() / lambda;
            let (idx, &f) = free
                .iter()
                .enumerate()
                .min_by(|a, b| a.1.total_cmp(b.1))
                .unwrap();
            let start = f.max(t);
            waits.push(start - t);
            free[idx] = start + d;
        }
        let zero = waits.iter().filter(|w| **w == 0.0).count() as f64 / n as f64;
        waits.sort_by(f64::total_cmp);
        (waits[(q * n as f64) as usize], zero)
    }

    #[test]
    fn matches_simulation() {
        for &(c, lambda) in &[(1usize, 0.7f64), (4, 3.2), (8, 7.0)] {
            let m = Mdc::new(c, 1.0, lambda).unwrap();
            let (sim_q, sim_zero) = simulate_wait_quantile(c, 1.0, lambda, 0.99, 2_000_000);
            let model_q = m.wait_quantile(0.99);
            assert!(
                (model_q - sim_q).abs() < 0.03 * sim_q.max(0.1),
                "c={c} λ={lambda}: model {model_q} sim {sim_q}"
            );
            assert!(
                (m.wait_cdf(0.0) - sim_zero).abs() < 0.01,
                "P(W=0) model {} sim {sim_zero}",
                m.wait_cdf(0.0)
            );
        }
    }

    #[test]
    fn md1_mean_queue_matches_pollaczek_khinchine() {
        // M/D/1: L = ρ + ρ² / (2(1 - ρ)).
        let rho: f64 = 0.8;
        let m = Mdc::new(1, 1.0, rho).unwrap();
        let pk = rho + rho * rho / (2.0 * (1.0 - rho));
        assert!(
            (m.mean_in_system() - pk).abs() < 1e-6,
            "{} vs {pk}",
            m.mean_in_system()
        );
    }

    #[test]
    fn max_rate_is_monotone_in_the_target_and_below_capacity() {
        let a = max_rate_for_target(8, 0.010, 0.99, 0.015).unwrap();
        let b = max_rate_for_target(8, 0.010, 0.99, 0.025).unwrap();
        assert!(a > 0.0 && a < b && b < 800.0, "{a} {b}");
        // The quantile at the answer is on target.
        let m = Mdc::new(8, 0.010, b).unwrap();
        assert!((m.sojourn_quantile(0.99) - 0.025).abs() < 1e-4);
        assert_eq!(max_rate_for_target(8, 0.010, 0.99, 0.009).unwrap(), 0.0);
        assert!(matches!(
            Mdc::new(8, 0.010, 900.0),
            Err(ModelError::Unstable { .. })
        ));
    }

    #[test]
    fn loose_targets_approach_capacity_quickly() {
        // A target 20x the service time: the answer is within 2% of capacity,
        // and solving near rho = 1 stays fast (banded elimination, not
        // iteration).
        let t = std::time::Instant::now();
        let r = max_rate_for_target(8, 0.001, 0.99, 0.020).unwrap();
        assert!(r > 0.98 * 8000.0 && r < 8000.0, "{r}");
        assert!(
            t.elapsed() < std::time::Duration::from_secs(10),
            "{:?}",
            t.elapsed()
        );
    }
}
