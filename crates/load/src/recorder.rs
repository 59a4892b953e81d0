//! Latency and traffic recording.
//!
//! Each driver worker owns a [`Recorder`]; the driver merges them at the end,
//! so no lock is taken on the request path and percentiles come from one merged
//! HdrHistogram (never an average of per-worker percentiles).

use hdrhistogram::Histogram;
use serde::Serialize;
use std::time::Duration;

/// Lowest and highest trackable latency, microseconds (1 µs to 1 h).
const LOW_US: u64 = 1;
const HIGH_US: u64 = 3_600_000_000;
/// Per-second histograms are coarser (2 significant digits, up to 100 s) to
/// keep a long run's series small.
const SERIES_HIGH_US: u64 = 100_000_000;

fn histogram(high: u64, sigfig: u8) -> Histogram<u64> {
    Histogram::new_with_bounds(LOW_US, high, sigfig).expect("valid histogram bounds")
}

/// A latency percentile a target can be set on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub enum Percentile {
    Avg,
    P50,
    P90,
    P95,
    P99,
    P999,
}

impl Percentile {
    /// The label FeedSim uses (`95p`, `99.9p`, `avg`).
    pub fn label(self) -> &'static str {
        match self {
            Percentile::Avg => "avg",
            Percentile::P50 => "50p",
            Percentile::P90 => "90p",
            Percentile::P95 => "95p",
            Percentile::P99 => "99p",
            Percentile::P999 => "99.9p",
        }
    }

    /// Quantile in [0, 1], or `None` for the mean.
    pub fn quantile(self) -> Option<f64> {
        match self {
            Percentile::Avg => None,
            Percentile::P50 => Some(0.50),
            Percentile::P90 => Some(0.90),
            Percentile::P95 => Some(0.95),
            Percentile::P99 => Some(0.99),
            Percentile::P999 => Some(0.999),
        }
    }
}

impl std::str::FromStr for Percentile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim().to_ascii_lowercase();
        let t = t.trim_start_matches('p').trim_end_matches('p');
        Ok(match t {
            "avg" | "mean" => Percentile::Avg,
            "50" => Percentile::P50,
            "90" => Percentile::P90,
            "95" => Percentile::P95,
            "99" => Percentile::P99,
            "99.9" => Percentile::P999,
            _ => {
                return Err(format!(
                    "unknown percentile '{s}': expected one of avg, 50p, 90p, 95p, 99p, 99.9p"
                ));
            }
        })
    }
}

/// Latency percentiles of one measurement, milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct LatencySummary {
    pub count: u64,
    pub min_ms: f64,
    pub avg_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

impl LatencySummary {
    /// Summarises a microsecond histogram.
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return LatencySummary::default();
        }
        let ms = |us: u64| us as f64 / 1000.0;
        LatencySummary {
            count: h.len(),
            min_ms: ms(h.min()),
            avg_ms: h.mean() / 1000.0,
            p50_ms: ms(h.value_at_quantile(0.50)),
            p90_ms: ms(h.value_at_quantile(0.90)),
            p95_ms: ms(h.value_at_quantile(0.95)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            p999_ms: ms(h.value_at_quantile(0.999)),
            max_ms: ms(h.max()),
        }
    }

    /// The value of one percentile.
    pub fn get(&self, p: Percentile) -> f64 {
        match p {
            Percentile::Avg => self.avg_ms,
            Percentile::P50 => self.p50_ms,
            Percentile::P90 => self.p90_ms,
            Percentile::P95 => self.p95_ms,
            Percentile::P99 => self.p99_ms,
            Percentile::P999 => self.p999_ms,
        }
    }
}

/// One second of a run (by completion time, from the start of the run
/// including warm-up).
#[derive(Debug, Clone)]
pub struct Second {
    pub completed: u64,
    pub errors: u64,
    pub latency: Histogram<u64>,
}

impl Second {
    fn new() -> Self {
        Second {
            completed: 0,
            errors: 0,
            latency: histogram(SERIES_HIGH_US, 2),
        }
    }
}

/// A per-second row for plots and stability checks.
#[derive(Debug, Clone, Copy, Serialize, serde::Deserialize)]
pub struct SecondSummary {
    pub second: u64,
    pub completed: u64,
    pub errors: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// How often latency exceeded a threshold (see [`Recorder::exceedance`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct Exceedance {
    pub threshold_ms: f64,
    /// Fraction of successful replies slower than the threshold.
    pub fraction: f64,
    /// Successful replies.
    pub count: u64,
    /// Seconds with completions (the batches of the error estimate).
    pub batches: usize,
    /// Batch-means standard error of `fraction`; `None` with fewer than 2
    /// batches.
    pub std_err: Option<f64>,
}

/// What one worker (or, merged, a whole run) measured.
#[derive(Debug, Clone)]
pub struct Recorder {
    /// Latency from the intended start (open loop) or the send (closed loop):
    /// the figure every percentile and target uses.
    pub latency: Histogram<u64>,
    /// Latency from the moment the request was actually handed to the
    /// transport; differs from `latency` only when the sender fell behind.
    pub service: Histogram<u64>,
    /// Requests the schedule asked for inside the measured window.
    pub scheduled: u64,
    /// Successful responses to requests of the measured window.
    pub ok: u64,
    /// Failed responses (transport or application errors).
    pub errors: u64,
    /// Requests not sent because the in-flight bound was reached.
    pub dropped: u64,
    /// Requests still unanswered when the drain period ran out; their age at
    /// the cut-off is recorded in `latency` as a lower bound.
    pub unfinished: u64,
    pub bytes_tx: u64,
    pub bytes_rx: u64,
    /// The first error message seen, for diagnostics.
    pub first_error: Option<String>,
    pub series: Vec<Second>,
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

impl Recorder {
    pub fn new() -> Self {
        Recorder {
            latency: histogram(HIGH_US, 3),
            service: histogram(HIGH_US, 3),
            scheduled: 0,
            ok: 0,
            errors: 0,
            dropped: 0,
            unfinished: 0,
            bytes_tx: 0,
            bytes_rx: 0,
            first_error: None,
            series: Vec::new(),
        }
    }

    fn second(&mut self, at: Duration) -> &mut Second {
        let idx = at.as_secs() as usize;
        if self.series.len() <= idx {
            self.series.resize_with(idx + 1, Second::new);
        }
        &mut self.series[idx]
    }

    /// Records a success. `at` is the completion time since the run start.
    pub fn record_ok(&mut self, latency: Duration, service: Duration, at: Duration, rx: u64) {
        let us = micros(latency);
        self.latency.saturating_record(us);
        self.service.saturating_record(micros(service));
        self.ok += 1;
        self.bytes_rx += rx;
        let s = self.second(at);
        s.completed += 1;
        s.latency.saturating_record(us);
    }

    /// Records a failure with its message.
    pub fn record_error(&mut self, at: Duration, msg: impl FnOnce() -> String) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(msg());
        }
        self.second(at).errors += 1;
    }

    /// Records a request cut off by the end of the drain period.
    pub fn record_unfinished(&mut self, age: Duration) {
        self.unfinished += 1;
        self.latency.saturating_record(micros(age));
    }

    /// Folds another worker's recording into this one.
    pub fn merge(&mut self, other: &Recorder) {
        self.latency
            .add(&other.latency)
            .expect("same histogram bounds");
        self.service
            .add(&other.service)
            .expect("same histogram bounds");
        self.scheduled += other.scheduled;
        self.ok += other.ok;
        self.errors += other.errors;
        self.dropped += other.dropped;
        self.unfinished += other.unfinished;
        self.bytes_tx += other.bytes_tx;
        self.bytes_rx += other.bytes_rx;
        if self.first_error.is_none() {
            self.first_error.clone_from(&other.first_error);
        }
        if self.series.len() < other.series.len() {
            self.series.resize_with(other.series.len(), Second::new);
        }
        for (mine, theirs) in self.series.iter_mut().zip(&other.series) {
            mine.completed += theirs.completed;
            mine.errors += theirs.errors;
            mine.latency
                .add(&theirs.latency)
                .expect("same histogram bounds");
        }
    }

    /// Adds a recorder of a window that followed this one (a probe
    /// extended at the same rate): counts and histograms add up, the
    /// per-second series continues after this one's.
    pub fn extend_with(&mut self, later: &Recorder) {
        let mine = self.series.len();
        let mut rest = later.clone();
        rest.series.clear();
        self.merge(&rest);
        self.series.resize_with(mine, Second::new);
        self.series.extend(later.series.iter().cloned());
    }

    /// Percentiles of latency (from the intended start).
    pub fn summary(&self) -> LatencySummary {
        LatencySummary::of(&self.latency)
    }

    /// Percentiles of latency from each request's send (ours): below
    /// [`Recorder::summary`]'s only by how late the requests left.
    pub fn from_send(&self) -> LatencySummary {
        LatencySummary::of(&self.service)
    }

    /// Percentiles of the requests that completed in the last `fraction` of
    /// the seconds that saw completions (at least one second), with the
    /// length of that tail in seconds; `None` when nothing completed.
    /// Per-second histograms are coarser than the whole run's (two
    /// significant digits).
    pub fn tail_summary(&self, fraction: f64) -> Option<(LatencySummary, u64)> {
        let first = self.series.iter().position(|s| s.completed > 0)?;
        let last = self.series.iter().rposition(|s| s.completed > 0)?;
        let span = last - first + 1;
        let secs = ((span as f64 * fraction).ceil() as usize).clamp(1, span);
        let mut h = histogram(SERIES_HIGH_US, 2);
        for s in &self.series[last + 1 - secs..=last] {
            h.add(&s.latency).expect("same histogram bounds");
        }
        Some((LatencySummary::of(&h), secs as u64))
    }

    /// The fraction of successful replies slower than `threshold_ms`, with
    /// its standard error by batch means: each second of completions is a
    /// batch, so the error counts the correlation between neighbouring
    /// requests (a queue's latencies come in runs) that a binomial error
    /// would ignore. The fraction comes from the whole run's histogram (3
    /// significant digits), the batches from the per-second ones (2).
    /// `None` when nothing completed.
    pub fn exceedance(&self, threshold_ms: f64) -> Option<Exceedance> {
        let total = self.latency.len();
        if total == 0 || !threshold_ms.is_finite() {
            return None;
        }
        let us = (threshold_ms * 1000.0).max(0.0) as u64;
        let above = |h: &Histogram<u64>| h.len() - h.count_between(0, us).min(h.len());
        let fraction = above(&self.latency) as f64 / total as f64;
        let batches: Vec<(f64, f64)> = self
            .series
            .iter()
            .filter(|s| s.completed > 0)
            .map(|s| (s.latency.len() as f64, above(&s.latency) as f64))
            .collect();
        let k = batches.len();
        let std_err = (k >= 2).then(|| {
            // The ratio estimator's variance: sum((a_i - p n_i)^2) / (k (k-1) n̄^2).
            let n: f64 = batches.iter().map(|b| b.0).sum();
            let a: f64 = batches.iter().map(|b| b.1).sum();
            let p = a / n;
            let mean_n = n / k as f64;
            let ss: f64 = batches.iter().map(|(ni, ai)| (ai - p * ni).powi(2)).sum();
            (ss / (k as f64 * (k as f64 - 1.0) * mean_n * mean_n)).sqrt()
        });
        Some(Exceedance {
            threshold_ms,
            fraction,
            count: total,
            batches: k,
            std_err,
        })
    }

    /// Per-second rows.
    pub fn series_summary(&self) -> Vec<SecondSummary> {
        self.series
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let l = LatencySummary::of(&s.latency);
                SecondSummary {
                    second: i as u64,
                    completed: s.completed,
                    errors: s.errors,
                    p50_ms: l.p50_ms,
                    p99_ms: l.p99_ms,
                    max_ms: l.max_ms,
                }
            })
            .collect()
    }
}

fn micros(d: Duration) -> u64 {
    (d.as_micros() as u64).max(LOW_US)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_keeps_exact_percentiles() {
        // Worker a sees 1..=500 ms, worker b 501..=1000 ms: merged p50 is 500,
        // where a mean of per-worker medians would also be 500 but p99 would
        // be wrong (mean of 495 and 995 = 745).
        let mut a = Recorder::new();
        let mut b = Recorder::new();
        for i in 1..=500u64 {
            a.record_ok(
                Duration::from_millis(i),
                Duration::from_millis(i),
                Duration::ZERO,
                10,
            );
            b.record_ok(
                Duration::from_millis(i + 500),
                Duration::from_millis(i + 500),
                Duration::from_secs(1),
                10,
            );
        }
        a.merge(&b);
        let s = a.summary();
        assert_eq!(s.count, 1000);
        assert!((s.p50_ms - 500.0).abs() <= 0.5, "{s:?}");
        assert!((s.p99_ms - 990.0).abs() <= 1.0, "{s:?}");
        assert_eq!(a.bytes_rx, 10_000);
        assert_eq!(a.series.len(), 2);
        assert_eq!(a.series[0].completed, 500);
        assert_eq!(a.series[1].completed, 500);
    }

    #[test]
    fn unfinished_requests_raise_the_tail() {
        let mut r = Recorder::new();
        for _ in 0..98 {
            r.record_ok(
                Duration::from_millis(1),
                Duration::from_millis(1),
                Duration::ZERO,
                0,
            );
        }
        r.record_unfinished(Duration::from_secs(2));
        r.record_unfinished(Duration::from_secs(2));
        assert!(r.summary().p99_ms >= 1999.0);
        assert_eq!(r.unfinished, 2);
    }

    #[test]
    fn percentile_parsing() {
        assert_eq!("95p".parse::<Percentile>().unwrap(), Percentile::P95);
        assert_eq!("p99.9".parse::<Percentile>().unwrap(), Percentile::P999);
        assert_eq!("avg".parse::<Percentile>().unwrap(), Percentile::Avg);
        assert!("97p".parse::<Percentile>().is_err());
        assert_eq!(Percentile::P999.label(), "99.9p");
    }

    #[test]
    fn tail_summary_covers_the_last_seconds_with_completions() {
        let mut r = Recorder::new();
        assert!(r.tail_summary(0.25).is_none());
        // Seconds 2..=9 see completions (the first two are a warm-up with
        // none): 10 ms each, except 90 ms in the last two seconds.
        for sec in 2..10u64 {
            for _ in 0..10 {
                let ms = if sec >= 8 { 90 } else { 10 };
                r.record_ok(
                    Duration::from_millis(ms),
                    Duration::from_millis(ms),
                    Duration::from_secs(sec),
                    1,
                );
            }
        }
        let (tail, secs) = r.tail_summary(0.25).unwrap();
        assert_eq!(secs, 2);
        assert_eq!(tail.count, 20);
        assert!((tail.p50_ms - 90.0).abs() < 1.0, "{}", tail.p50_ms);
        // A third of the 8-second span rounds up to 3 seconds.
        let (tail, secs) = r.tail_summary(1.0 / 3.0).unwrap();
        assert_eq!((secs, tail.count), (3, 30));
        assert!((tail.p50_ms - 90.0).abs() < 1.0);
        assert!(tail.get(Percentile::P90) > 80.0 && tail.p50_ms > 80.0);
        let whole = r.summary();
        assert!(whole.p50_ms < 11.0);
    }
}
