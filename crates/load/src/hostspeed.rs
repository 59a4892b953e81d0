//! Host speed drift: is this machine as fast at the end of a run as at its
//! start?
//!
//! On shared or virtual machines the speed of a CPU can change by tens of
//! percent while a benchmark runs (noisy neighbours on the same physical
//! cores, frequency changes), and no search can give reproducible numbers
//! then. A [`SpeedSampler`] times a fixed unit of integer work, in thread CPU
//! time, every few seconds on a background thread (about 0.1% of one core),
//! and the run reports how much that unit's cost varied, so a result measured
//! while the machine changed speed is flagged instead of trusted.

use serde::Serialize;
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// Iterations of the work unit: about 1 ms on a current x86 core.
const UNIT_ITERATIONS: u64 = 1_000_000;

/// Thread CPU time of the calling thread.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The fixed unit of work: a dependent chain of multiplies, adds and shifts
/// (no memory traffic, so it measures the core, not the caches).
fn work_unit(seed: u64) -> u64 {
    let mut x = seed | 1;
    for i in 0..UNIT_ITERATIONS {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i);
        x ^= x >> 29;
    }
    black_box(x)
}

/// One sample: the cheapest of three runs of the unit, in microseconds of
/// thread CPU time (the minimum drops runs disturbed by an interrupt).
pub fn sample_unit_us() -> f64 {
    (0..3)
        .map(|k| {
            let t0 = thread_cpu();
            work_unit(k);
            (thread_cpu() - t0).as_secs_f64() * 1e6
        })
        .fold(f64::INFINITY, f64::min)
}

/// What the samples say.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct HostSpeed {
    pub samples: usize,
    /// Cost of the work unit, microseconds of CPU time.
    pub unit_us_min: f64,
    pub unit_us_median: f64,
    pub unit_us_max: f64,
    /// Spread of the unit's cost over the run: (90th - 10th percentile) /
    /// median, in percent. A few percent is normal; tens of percent mean the
    /// machine's speed changed during the run.
    pub drift_pct: f64,
}

impl HostSpeed {
    /// Statistics of `samples` (microseconds); `None` without samples.
    pub fn from_samples(samples: &[f64]) -> Option<HostSpeed> {
        let mut v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        let median = at(0.5);
        Some(HostSpeed {
            samples: v.len(),
            unit_us_min: v[0],
            unit_us_median: median,
            unit_us_max: v[v.len() - 1],
            drift_pct: if median > 0.0 {
                (at(0.9) - at(0.1)) / median * 100.0
            } else {
                0.0
            },
        })
    }
}

/// Samples the host's speed on a background thread until finished.
pub struct SpeedSampler {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Vec<f64>>>,
}

impl SpeedSampler {
    /// Takes a sample now and then every `every`.
    pub fn start(every: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("host-speed".into())
            .spawn(move || {
                let mut out = Vec::new();
                loop {
                    out.push(sample_unit_us());
                    let mut waited = Duration::ZERO;
                    while waited < every {
                        if flag.load(Ordering::Relaxed) {
                            return out;
                        }
                        let step = Duration::from_millis(50).min(every - waited);
                        std::thread::sleep(step);
                        waited += step;
                    }
                }
            })
            .ok();
        SpeedSampler { stop, handle }
    }

    /// Stops sampling (taking one last sample) and returns the statistics.
    pub fn finish(mut self) -> Option<HostSpeed> {
        self.stop.store(true, Ordering::Relaxed);
        let mut samples = self.handle.take()?.join().ok()?;
        samples.push(sample_unit_us());
        HostSpeed::from_samples(&samples)
    }
}

impl Drop for SpeedSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_of_known_samples() {
        // Ten samples: 100..=109 us and one slow period at 150 us.
        let mut s: Vec<f64> = (100..110).map(f64::from).collect();
        s.push(150.0);
        let h = HostSpeed::from_samples(&s).unwrap();
        assert_eq!(h.samples, 11);
        assert_eq!(h.unit_us_min, 100.0);
        assert_eq!(h.unit_us_max, 150.0);
        assert_eq!(h.unit_us_median, 105.0);
        // p10 = 101, p90 = 109: (109 - 101) / 105.
        assert!((h.drift_pct - 8.0 / 105.0 * 100.0).abs() < 1e-9, "{h:?}");
        assert!(HostSpeed::from_samples(&[]).is_none());
        assert!(HostSpeed::from_samples(&[f64::NAN]).is_none());
    }

    #[test]
    fn sampler_collects_and_stops() {
        let s = SpeedSampler::start(Duration::from_millis(20));
        std::thread::sleep(Duration::from_millis(150));
        let h = s.finish().unwrap();
        assert!(h.samples >= 3, "{h:?}");
        assert!(h.unit_us_min > 0.0 && h.unit_us_min <= h.unit_us_max);
    }

    #[test]
    fn the_unit_costs_cpu_time() {
        // A million dependent multiply-add-shift steps cannot take under 100 us.
        let us = sample_unit_us();
        assert!(us > 100.0, "{us}");
    }
}
