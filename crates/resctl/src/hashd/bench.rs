//! `--bench`: finding rps_max, the rate at which the latency target is
//! just met with the whole footprint in use, by letting the latency
//! controller alone limit concurrency and waiting for the rate to settle.
//!
//! Settling is judged as rd-hashd does: every second a line is fitted to
//! the last `period` samples; the run has settled when the line's slope
//! and the trend of its fit error are small relative to the mean, and the
//! slopes of the recent windows do not keep one sign. `converges` settled
//! windows end a round; a round whose latency is within 5% of the target
//! gives rps_max.

/// How long and how strictly to wait for settling.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConvergeCfg {
    pub converges: usize,
    pub period: usize,
    pub min_secs: usize,
    pub max_secs: usize,
    pub slope: f64,
    pub err_slope: f64,
}

impl ConvergeCfg {
    /// rd-hashd's CPU saturation settings.
    pub const CPU: ConvergeCfg = ConvergeCfg {
        converges: 5,
        period: 15,
        min_secs: 15,
        max_secs: 90,
        slope: 0.01,
        err_slope: 0.025,
    };
    /// The short settings of `--bench-test` (CI).
    pub const TEST: ConvergeCfg = ConvergeCfg {
        converges: 3,
        period: 5,
        min_secs: 10,
        max_secs: 10,
        slope: 0.1,
        err_slope: 0.25,
    };
}

/// Least-squares slope and mean absolute residual of `ys` over 0, 1, ...
pub fn linreg(ys: &[f64]) -> (f64, f64) {
    let n = ys.len() as f64;
    if ys.len() < 2 {
        return (0.0, 0.0);
    }
    let mx = (n - 1.0) / 2.0;
    let my = ys.iter().sum::<f64>() / n;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (i, y) in ys.iter().enumerate() {
        let dx = i as f64 - mx;
        sxy += dx * (y - my);
        sxx += dx * dx;
    }
    let slope = sxy / sxx;
    let err = ys
        .iter()
        .enumerate()
        .map(|(i, y)| (y - (my + slope * (i as f64 - mx))).abs())
        .sum::<f64>()
        / n;
    (slope, err)
}

/// One settling wait over (latency, rps) samples, judged on the rate.
#[derive(Debug)]
pub struct Converge {
    cfg: ConvergeCfg,
    samples: Vec<(f64, f64)>,
    errs: Vec<f64>,
    slopes: Vec<f64>,
    settled: Vec<Option<(f64, f64)>>,
    secs: usize,
}

/// Where a wait stands after a sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Progress {
    Waiting,
    /// Settled: mean (latency, rps) of the settled windows.
    Settled(f64, f64),
    /// Out of time: the latest sample.
    TimedOut(f64, f64),
}

impl Converge {
    pub fn new(cfg: ConvergeCfg) -> Converge {
        Converge {
            cfg,
            samples: Vec::new(),
            errs: Vec::new(),
            slopes: Vec::new(),
            settled: Vec::new(),
            secs: 0,
        }
    }

    /// Takes one second's (latency, rps); `line` gets the progress line.
    pub fn push(&mut self, lat: f64, rps: f64, line: &mut dyn FnMut(String)) -> Progress {
        self.secs += 1;
        if rps > 0.0 {
            self.samples.push((lat, rps));
        }
        let p = self.cfg.period;
        if self.secs >= self.cfg.max_secs && self.samples.len() <= 2 {
            return Progress::TimedOut(lat, rps);
        }
        if self.samples.len() <= 2 {
            return Progress::Waiting;
        }
        let window: Vec<f64> = self.samples[self.samples.len().saturating_sub(p)..]
            .iter()
            .map(|s| s.1)
            .collect();
        let mean = window.iter().sum::<f64>() / window.len() as f64;
        let (slope, err) = linreg(&window);
        push_capped(&mut self.errs, err, p);
        if self.errs.len() <= 2 {
            return self.timeout_or_wait(lat, rps);
        }
        let (e_slope, _) = linreg(&self.errs);
        let (slope, e_slope) = if mean > 0.0 {
            (slope / mean, e_slope / mean)
        } else {
            (slope, e_slope)
        };
        push_capped(&mut self.slopes, slope, p);
        let sign = |s: f64| {
            if s > 0.0001 {
                1
            } else if s < -0.0001 {
                -1
            } else {
                0
            }
        };
        let mut streak: i64 = self.slopes.iter().map(|s| sign(*s)).sum();
        if streak.unsigned_abs() as usize <= p / 2 || streak.signum() != sign(slope) {
            streak = 0;
        }
        let ok = self.secs >= self.cfg.min_secs
            && slope.abs() <= self.cfg.slope
            && e_slope.abs() <= self.cfg.err_slope
            && streak == 0;
        let last = *self.samples.last().expect("samples");
        push_capped(&mut self.settled, ok.then_some(last), p);
        let n = self.settled.iter().flatten().count();
        line(format!(
            "[{n}/{}] lat:{:5.1} rps:{:6.1} slope:{:+6.2}% error_slope:{:+6.2}%{}",
            self.cfg.converges,
            lat * 1000.0,
            rps,
            slope * 100.0,
            e_slope * 100.0,
            if ok { " *" } else { "" }
        ));
        if n >= self.cfg.converges {
            let (sl, sr) = self
                .settled
                .iter()
                .flatten()
                .fold((0.0, 0.0), |(a, b), (l, r)| (a + l, b + r));
            return Progress::Settled(sl / n as f64, sr / n as f64);
        }
        self.timeout_or_wait(lat, rps)
    }

    fn timeout_or_wait(&self, lat: f64, rps: f64) -> Progress {
        if self.secs >= self.cfg.max_secs {
            let (l, r) = self.samples.last().copied().unwrap_or((lat, rps));
            Progress::TimedOut(l, r)
        } else {
            Progress::Waiting
        }
    }
}

fn push_capped<T>(v: &mut Vec<T>, x: T, cap: usize) {
    v.push(x);
    if v.len() > cap {
        v.remove(0);
    }
}

/// How a round of the rps_max search ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Round {
    pub lat: f64,
    pub rps: f64,
    pub settled: bool,
}

/// The rps_max search: up to `rounds` settling waits; the first whose
/// latency is within 5% of `lat_target` gives rps_max, else the last.
pub struct CpuSearch {
    cfg: ConvergeCfg,
    lat_target: f64,
    rounds_left: usize,
    cur: Converge,
    pub rounds: Vec<Round>,
}

impl CpuSearch {
    pub fn new(cfg: ConvergeCfg, lat_target: f64, rounds: usize) -> CpuSearch {
        CpuSearch {
            cfg,
            lat_target,
            rounds_left: rounds.max(1),
            cur: Converge::new(cfg),
            rounds: Vec::new(),
        }
    }

    /// Takes a second's sample; Some(rps_max, met) when done.
    pub fn push(
        &mut self,
        lat: f64,
        rps: f64,
        line: &mut dyn FnMut(String),
    ) -> Option<(u32, bool)> {
        let (l, r, settled) = match self.cur.push(lat, rps, line) {
            Progress::Waiting => return None,
            Progress::Settled(l, r) => (l, r, true),
            Progress::TimedOut(l, r) => (l, r, false),
        };
        self.rounds.push(Round {
            lat: l,
            rps: r,
            settled,
        });
        let err = (l - self.lat_target) / self.lat_target;
        self.rounds_left -= 1;
        if err.abs() <= 0.05 {
            return Some((r.round() as u32, true));
        }
        line(format!(
            "latency {:.1}ms is {:+.1}% off the {:.1}ms target{}",
            l * 1000.0,
            err * 100.0,
            self.lat_target * 1000.0,
            if self.rounds_left > 0 { ", again" } else { "" }
        ));
        if self.rounds_left == 0 {
            return Some((r.round() as u32, false));
        }
        self.cur = Converge::new(self.cfg);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linreg_fits_a_line() {
        let (s, e) = linreg(&[1.0, 3.0, 5.0, 7.0]);
        assert!((s - 2.0).abs() < 1e-12 && e < 1e-12);
        let (s, e) = linreg(&[0.0, 2.0, 0.0, 2.0]);
        assert!((s - 0.4).abs() < 1e-12, "{s}");
        assert!(e > 0.5);
    }

    #[test]
    fn a_flat_rate_settles_and_a_climbing_one_does_not() {
        let mut lines = Vec::new();
        let mut c = Converge::new(ConvergeCfg::CPU);
        let mut out = Progress::Waiting;
        for i in 0..90 {
            // Small noise around 1000 rps.
            let rps = 1000.0 + if i % 2 == 0 { 3.0 } else { -3.0 };
            out = c.push(0.075, rps, &mut |l| lines.push(l));
            if out != Progress::Waiting {
                break;
            }
        }
        let Progress::Settled(lat, rps) = out else {
            panic!("{out:?}");
        };
        assert!((rps - 1000.0).abs() < 5.0 && (lat - 0.075).abs() < 1e-9);
        assert!(lines.iter().any(|l| l.starts_with("[5/5]")), "{lines:?}");

        let mut c = Converge::new(ConvergeCfg::CPU);
        let mut out = Progress::Waiting;
        for i in 0..90 {
            out = c.push(0.075, 100.0 + 20.0 * f64::from(i), &mut |_| {});
            if out != Progress::Waiting {
                break;
            }
        }
        assert!(
            matches!(out, Progress::TimedOut(_, r) if r > 1800.0),
            "{out:?}"
        );
    }

    #[test]
    fn the_search_takes_the_round_that_meets_the_target() {
        let mut s = CpuSearch::new(ConvergeCfg::TEST, 0.075, 3);
        let mut got = None;
        // First round settles at 100 ms (off), the second at 76 ms.
        for i in 0..40 {
            let lat = if i < 10 { 0.100 } else { 0.076 };
            if let Some(r) = s.push(lat, 500.0, &mut |_| {}) {
                got = Some(r);
                break;
            }
        }
        assert_eq!(got, Some((500, true)));
        assert_eq!(s.rounds.len(), 2);
        assert!(!s.rounds[0].settled || s.rounds[0].lat == 0.100);
    }
}
