//! The SLO search: the highest requested rate whose measured latency
//! percentile stays within a target while the server completes what it was
//! asked.
//!
//! FeedSim's search warms up unthrottled, measures an unthrottled peak, then
//! bisects between 1.8 x peak and 1 QPS until high <= 1.02 x low, fine-tunes,
//! and confirms with a 300 s run: about 30 minutes. Ours:
//!
//! 1. an unthrottled warm-up, fixed or ending once its throughput is steady
//!    (`warmup_steady`), and an unthrottled (closed-loop) peak probe;
//! 2. bracketing from the peak: probe at the peak; if it passes, step up by
//!    `bracket_up` (1.5x) until a probe fails; if not, step down by
//!    `bracket_down` (0.5x) until one passes;
//! 3. bisection with short probes until `high <= low * (1 + tolerance)`;
//!    then the failing `high` is probed again (`confirm_failures`): when
//!    the repeat passes, the failure was noise and the search goes on
//!    above it, so one bad probe cannot hold the result down;
//! 4. one longer final run at the highest passing rate. If the final run
//!    fails, the rate steps down, by more each time a final fails, until a
//!    final passes, then bisects between the finals that passed and failed
//!    (`final_attempts` finals at most; see [`next_final_rate`]): a rate
//!    that failed is never reported, and one whose final-length window
//!    fails well below the probes' knee still ends on a passing final.
//!
//! A probe that failed only because its requests left late (measured from
//! each send, the target was met: the client or its host stalled, see
//! [`SearchConfig::sender_lag`]) is run once more at the same rate, and the
//! repeat's verdict stands; a final is repeated so once in a search. Both
//! records are kept, the first with `from_send_ms`.
//!
//! A probe passes only when (a) the target percentile is within the target,
//! and (b) at least `min_completion` (98%) of the requests scheduled in the
//! window got a successful reply. Comparing against the *scheduled* count
//! rather than `rate x duration` keeps Poisson noise out of the verdict while
//! still failing a client or server that cannot keep up.

use crate::arrival::Arrival;
use crate::driver::{Mode, RunResult};
use crate::recorder::{LatencySummary, Percentile, SecondSummary};
use serde::Serialize;
use std::future::Future;
use std::time::Duration;

/// A latency target: `percentile <= latency`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct SloTarget {
    pub percentile: Percentile,
    pub latency_ms: f64,
}

impl std::str::FromStr for SloTarget {
    type Err = String;
    /// Parses FeedSim's `-s metric:ms` form, e.g. `95p:500`.
    fn from_str(s: &str) -> Result<Self, String> {
        let (p, ms) = s
            .split_once(':')
            .ok_or_else(|| format!("latency target '{s}' must be METRIC:MS, e.g. 95p:500"))?;
        let percentile = p.parse()?;
        let latency_ms: f64 = ms.parse().map_err(|_| {
            format!("latency '{ms}' in target '{s}' is not a number of milliseconds")
        })?;
        if !(latency_ms.is_finite() && latency_ms > 0.0) {
            return Err(format!("latency in target '{s}' must be positive"));
        }
        Ok(SloTarget {
            percentile,
            latency_ms,
        })
    }
}

/// Which step of the search a probe belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Warmup,
    Peak,
    Bracket,
    Bisect,
    /// A second probe at the lowest failing rate once the bisection has
    /// closed on it (see [`SearchConfig::confirm_failures`]).
    Confirm,
    Final,
    Fixed,
}

impl Phase {
    pub fn label(self) -> &'static str {
        match self {
            Phase::Warmup => "warm-up",
            Phase::Peak => "peak",
            Phase::Bracket => "bracket",
            Phase::Bisect => "bisect",
            Phase::Confirm => "confirm",
            Phase::Final => "final",
            Phase::Fixed => "fixed",
        }
    }
}

/// One probe's measurement and verdict.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct ProbeRecord {
    pub seq: usize,
    pub phase: Phase,
    /// `open:<arrival>` or `closed:<concurrency>`.
    pub mode: String,
    /// 0 for unthrottled (closed-loop) probes.
    pub requested_qps: f64,
    pub duration_secs: f64,
    /// Successful replies in the window.
    pub total_queries: u64,
    pub scheduled: u64,
    pub errors: u64,
    pub dropped: u64,
    pub unfinished: u64,
    pub achieved_qps: f64,
    pub total_bytes_rx: u64,
    pub total_bytes_tx: u64,
    pub latency: LatencySummary,
    /// The measured value of the target percentile.
    pub target_value_ms: f64,
    pub passed: bool,
    /// "ok" or why the probe failed.
    pub verdict: String,
    /// Times a close call was extended (see [`SearchConfig::borderline`]).
    pub extensions: usize,
    /// How long the search waited for the server to finish earlier work
    /// before this probe (see [`Prober::settle`]).
    pub settle_secs: f64,
    /// Wall-clock start and end of the probe (its warm-up included), Unix
    /// milliseconds: for lining probes up with other monitoring.
    pub start_unix_ms: u64,
    pub end_unix_ms: u64,
    /// The confidence interval of the fraction slower than the target, when
    /// the search judged with one ([`SearchConfig::confidence`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Interval>,
    /// Set when the probe missed the latency target only because its
    /// requests left late (ours): the target percentile measured from each
    /// request's send, which met the target. The client, or the host under
    /// it, stalled; the server kept up (see [`SearchConfig::sender_lag`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_send_ms: Option<f64>,
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Something that can run a probe: usually [`crate::driver::run`] against a
/// service, wrapped by the workload.
pub trait Prober {
    /// Runs `mode` for `warmup` (unrecorded) plus `duration`; an `Err` is a
    /// fault that ends the search (the server died, the client cannot
    /// connect: usually [`crate::Error::Host`]).
    fn probe(
        &mut self,
        mode: Mode,
        warmup: Duration,
        duration: Duration,
    ) -> impl Future<Output = Result<RunResult, crate::Error>>;

    /// Waits until the server has finished (or dropped) the work of earlier
    /// probes, so that no probe inherits the backlog of an overloaded one;
    /// returns how long it waited. The default does not wait.
    fn settle(&mut self) -> impl Future<Output = Result<Duration, crate::Error>> {
        async { Ok(Duration::ZERO) }
    }
}

/// What the search reports as it goes.
#[derive(Debug)]
pub enum Event<'a> {
    /// A probe is about to start; `duration` includes its warm-up.
    Start {
        phase: Phase,
        requested_qps: f64,
        duration: Duration,
        /// 0 for a new probe, n for its n-th extension (a close call).
        extension: usize,
    },
    /// A probe finished.
    Done(&'a ProbeRecord),
}

/// Tunables of the search.
#[derive(Debug, Clone, Serialize)]
pub struct SearchConfig {
    pub target: SloTarget,
    pub arrival: Arrival,
    /// Minimum fraction of scheduled requests that must succeed (0.98).
    pub min_completion: f64,
    /// Stop bisecting when `high <= low * (1 + tolerance)`.
    pub tolerance: f64,
    /// Longest unthrottled warm-up (all of it when `warmup_steady` is 0).
    pub warmup: Duration,
    /// Adaptive warm-up: the warm-up runs in `warmup_window` pieces and
    /// ends, after at least `warmup_min`, once the throughput of two
    /// consecutive pieces agrees within this fraction (0.03: 3%). A server
    /// that is warm needs no more of it; one still warming up (caches,
    /// page faults, a JIT) keeps going up to `warmup`. 0 = fixed warm-up.
    pub warmup_steady: f64,
    pub warmup_window: Duration,
    pub warmup_min: Duration,
    pub peak: Duration,
    /// Bracketing from the peak: factor of each step up after a pass (1.5)
    /// and of each step down after a failure (0.5). A server whose
    /// unthrottled peak is a good estimate of its knee is bracketed in
    /// fewer probes with factors nearer 1.
    pub bracket_up: f64,
    pub bracket_down: f64,
    /// In-flight requests of the unthrottled probes.
    pub peak_concurrency: usize,
    pub probe: Duration,
    pub probe_warmup: Duration,
    pub final_duration: Duration,
    pub min_qps: f64,
    pub max_qps: Option<f64>,
    pub max_probes: usize,
    /// A bracket or bisection probe whose percentile lands within this
    /// fraction of the target (0.1: between 90% and 110% of it) is a close
    /// call: it is extended by another `probe` at the same rate and judged
    /// on the whole window. 0 turns extensions off.
    pub borderline: f64,
    /// How many times a close call may be extended.
    pub max_extensions: usize,
    /// How many final runs of a search may be extended when they just miss
    /// the target (a close call that fails: within `borderline` above it,
    /// or only in the steady-state tail): another `final_duration`, judged
    /// on the whole, so a host hiccup in one final window does not step the
    /// result down a whole rate. A final that passes is never extended, and
    /// the budget bounds the time a run of failing finals can take. 0 (the
    /// default): finals are never extended.
    pub extended_finals: usize,
    /// Steady-state rule: a probe also fails when the requests completing
    /// in the last `steady_tail` of its window (0.25: the last quarter)
    /// miss the target, even if the whole window meets it. A rate the
    /// server cannot sustain builds a queue, so latency rises through the
    /// window; judged on the whole window it can pass a short probe and
    /// fail the longer final run. 0 turns the rule off.
    pub steady_tail: f64,
    /// Fewest completions in that tail for the rule to apply.
    pub steady_min_samples: u64,
    /// Final runs tried before the search gives up or settles (see
    /// [`next_final_rate`]).
    pub final_attempts: usize,
    /// Confirm the failure that bounds the result (true, the default):
    /// once the bisection has closed on `[low, high]`, the failing rate
    /// `high` is probed again. The search believes a failure only when it
    /// repeats: if the second probe passes, the first was noise (a host
    /// stall, a neighbour's burst), `high` becomes the new low and the
    /// search goes on above it, up to the next failure it measured (or
    /// bracketing up when there is none). One bad probe therefore cannot
    /// hold the result below the knee, whichever probe it hits; a search
    /// without noise pays one probe for it. Only the deciding failure is
    /// repeated, not every one: the others only steered the bisection,
    /// and a wrong turn is undone when its bound is confirmed.
    pub confirm_failures: bool,
    /// Judging with a confidence interval (0, the default, turns it off;
    /// 0.95 for 95%). A percentile target `qp <= T` allows a fraction
    /// `1 - q` of replies slower than `T` (5% for 95p); the interval is that
    /// fraction's, measured with a batch-means error (see
    /// [`crate::Recorder::exceedance`]). With it on:
    /// - a bracket or bisection probe is a close call when its interval
    ///   contains the allowed fraction (instead of the `borderline` band),
    ///   and is extended while it does, up to `max_extensions` times;
    /// - a final run whose interval contains it is extended the same way
    ///   (whether its point estimate passed or not), up to `extended_finals`
    ///   finals in the search.
    ///
    /// Each probe is then judged on its point estimate over the whole
    /// (extended) window, as without: the interval decides how long a probe
    /// runs, never what it passes with.
    ///
    /// A mean target (`avg`) has no such interval and is judged as without.
    pub confidence: f64,
}

/// A confidence interval of the fraction of replies slower than the target
/// (see [`SearchConfig::confidence`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct Interval {
    pub confidence: f64,
    /// The fraction the target allows (`1 - q`).
    pub allowed: f64,
    /// The measured fraction and its interval.
    pub fraction: f64,
    pub low: f64,
    pub high: f64,
    /// Seconds of completions it was estimated from.
    pub batches: usize,
}

impl Interval {
    /// True when the measurement cannot tell the fraction from the allowed one.
    pub fn ambiguous(&self) -> bool {
        self.low <= self.allowed && self.allowed <= self.high
    }

    /// `slower than target 4.10% [3.20%, 5.00%] (95% CI over 20 s; 5.00% allowed)`.
    pub fn brief(&self) -> String {
        let pc = |x: f64| format!("{:.2}%", x * 100.0);
        format!(
            "slower than target {} [{}, {}] ({:.0}% CI over {} s; {} allowed)",
            pc(self.fraction),
            pc(self.low),
            pc(self.high),
            self.confidence * 100.0,
            self.batches,
            pc(self.allowed)
        )
    }
}

impl SearchConfig {
    /// Defaults for a target: 5 s warm-up, 5 s peak, 5 s probes (1 s warm-up),
    /// 2% tolerance, 30 s final run.
    pub fn new(target: SloTarget) -> Self {
        SearchConfig {
            target,
            arrival: Arrival::Poisson,
            min_completion: 0.98,
            tolerance: 0.02,
            warmup: Duration::from_secs(5),
            warmup_steady: 0.0,
            warmup_window: Duration::from_secs(10),
            warmup_min: Duration::from_secs(30),
            peak: Duration::from_secs(5),
            bracket_up: 1.5,
            bracket_down: 0.5,
            peak_concurrency: 64,
            probe: Duration::from_secs(5),
            probe_warmup: Duration::from_secs(1),
            final_duration: Duration::from_secs(30),
            min_qps: 1.0,
            max_qps: None,
            max_probes: 40,
            borderline: 0.0,
            max_extensions: 0,
            extended_finals: 0,
            steady_tail: 0.0,
            steady_min_samples: 20,
            final_attempts: 8,
            confirm_failures: true,
            confidence: 0.0,
        }
    }

    /// A rough plan of the search's length, for progress bars.
    pub fn planned(&self) -> Duration {
        let steps =
            (1.0 / self.tolerance).log2().ceil() as u32 + 3 + u32::from(self.confirm_failures);
        // Assume half the bisection probes are close calls extended once.
        let extended =
            if self.max_extensions > 0 && (self.borderline > 0.0 || self.confidence > 0.0) {
                self.probe * (steps / 2)
            } else {
                Duration::ZERO
            };
        let warmup = if self.warmup_steady > 0.0 {
            self.warmup.min(self.warmup_min + self.warmup_window)
        } else {
            self.warmup
        };
        warmup
            + self.peak
            + (self.probe + self.probe_warmup) * steps
            + extended
            + self.final_duration
    }

    /// True when a probe is a close call: its measured percentile is near
    /// the target, or the whole window meets the target while its tail
    /// does not (a rise that a longer window tells from a passing hiccup).
    pub fn is_close_call(&self, r: &RunResult) -> bool {
        let interval = self.interval(r);
        if (self.borderline <= 0.0 && interval.is_none())
            || r.interrupted
            || r.completion_ratio() < self.min_completion
        {
            return false;
        }
        let v = r.recorder.summary().get(self.target.percentile);
        let t = self.target.latency_ms;
        if !v.is_finite() {
            return false;
        }
        let near = match interval {
            Some(i) => i.ambiguous(),
            None => (v - t).abs() <= self.borderline * t,
        };
        near || (v <= t && self.tail_miss(r).is_some())
    }

    /// The confidence interval of the fraction of replies slower than the
    /// target, when `confidence` is on, the target is a percentile and the
    /// window has at least two seconds of completions. Its error is never
    /// taken below the binomial error of the allowed fraction (so a short
    /// window with no slow reply is not read as certain).
    pub fn interval(&self, r: &RunResult) -> Option<Interval> {
        use statrs::distribution::{ContinuousCDF, StudentsT};
        if !(self.confidence > 0.0 && self.confidence < 1.0) {
            return None;
        }
        let allowed = 1.0 - self.target.percentile.quantile()?;
        let e = r.recorder.exceedance(self.target.latency_ms)?;
        let binomial = (allowed * (1.0 - allowed) / e.count as f64).sqrt();
        let se = e.std_err?.max(binomial);
        let df = (e.batches - 1) as f64;
        let t = StudentsT::new(0.0, 1.0, df)
            .ok()?
            .inverse_cdf(0.5 + self.confidence / 2.0);
        Some(Interval {
            confidence: self.confidence,
            allowed,
            fraction: e.fraction,
            low: (e.fraction - t * se).max(0.0),
            high: (e.fraction + t * se).min(1.0),
            batches: e.batches,
        })
    }

    /// One window's figures against the target, for the record of an
    /// extended probe: `30 s: 95p 480 ms, last 8 s 560 ms`.
    pub fn window_brief(&self, r: &RunResult) -> String {
        let label = self.target.percentile.label();
        let v = r.recorder.summary().get(self.target.percentile);
        let mut out = format!("{:.0} s: {label} {v:.0} ms", r.window.as_secs_f64());
        let tail = (self.steady_tail > 0.0)
            .then(|| r.recorder.tail_summary(self.steady_tail))
            .flatten();
        if let Some((tail, secs)) = tail.filter(|(t, _)| t.count > 0) {
            out += &format!(", last {secs} s {:.0} ms", tail.get(self.target.percentile));
        }
        out
    }

    /// The tail's percentile and length when the steady-state rule applies
    /// and the tail misses the target.
    fn tail_miss(&self, r: &RunResult) -> Option<(f64, u64)> {
        if self.steady_tail <= 0.0 {
            return None;
        }
        let (tail, secs) = r.recorder.tail_summary(self.steady_tail)?;
        let v = tail.get(self.target.percentile);
        (tail.count >= self.steady_min_samples && v > self.target.latency_ms).then_some((v, secs))
    }

    /// The target percentile measured from each request's send, when the
    /// probe missed the target only because its requests left late: every
    /// request scheduled got a reply (no error, drop or cut-off), and from
    /// the send the percentile met the target. A host that freezes the
    /// whole machine for milliseconds (a VM's vCPU descheduled) does that:
    /// the requests due during the freeze leave when it ends, and the
    /// server then answers them at once. One such probe says nothing about
    /// the server, so the search repeats it (see [`Search`]).
    pub fn sender_lag(&self, r: &RunResult) -> Option<f64> {
        let rec = &r.recorder;
        let clean = !r.interrupted
            && rec.ok > 0
            && rec.errors == 0
            && rec.dropped == 0
            && rec.unfinished == 0
            && r.completion_ratio() >= self.min_completion;
        let p = self.target.percentile;
        let from_send = rec.from_send().get(p);
        (clean
            && rec.summary().get(p) > self.target.latency_ms
            && from_send <= self.target.latency_ms)
            .then_some(from_send)
    }

    /// Judges a probe against the target and the completion rule.
    pub fn judge(&self, r: &RunResult) -> (bool, String) {
        let s = r.recorder.summary();
        let value = s.get(self.target.percentile);
        if r.interrupted {
            return (false, "interrupted".into());
        }
        if s.count == 0 {
            let why = r.recorder.first_error.as_deref().unwrap_or("no reply");
            return (false, format!("no successful replies ({why})"));
        }
        let completion = r.completion_ratio();
        if completion < self.min_completion {
            let rec = &r.recorder;
            return (
                false,
                format!(
                    "completed {} of {} scheduled requests ({:.1}% < {:.0}%; {} errors, {} dropped, {} unfinished)",
                    rec.ok,
                    rec.scheduled,
                    completion * 100.0,
                    self.min_completion * 100.0,
                    rec.errors,
                    rec.dropped,
                    rec.unfinished
                ),
            );
        }
        if value > self.target.latency_ms {
            let late = self.sender_lag(r).map(|v| {
                format!("; {v:.3} ms from the send: the requests left late (the client or its host stalled)")
            });
            return (
                false,
                format!(
                    "{} latency {:.3} ms > target {} ms{}",
                    self.target.percentile.label(),
                    value,
                    self.target.latency_ms,
                    late.unwrap_or_default()
                ),
            );
        }
        if let Some((v, secs)) = self.tail_miss(r) {
            return (
                false,
                format!(
                    "{} latency of the last {secs} s {v:.3} ms > target {} ms (the whole window's {value:.3} ms met it): latency was still rising, not a steady state",
                    self.target.percentile.label(),
                    self.target.latency_ms
                ),
            );
        }
        (true, "ok".into())
    }
}

/// Everything the search did.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct SearchOutcome {
    pub probes: Vec<ProbeRecord>,
    /// The confirming final run, when one passed.
    pub final_probe: Option<ProbeRecord>,
    /// Per-second series of the final run.
    pub final_series: Vec<SecondSummary>,
    /// Unthrottled throughput measured before the search.
    pub peak_qps: f64,
    /// True when a final run at a rate that meets the target passed.
    pub success: bool,
    pub interrupted: bool,
    /// Why the search ended without success, if it did.
    pub failure: Option<String>,
}

/// Runs a search; `on_event` sees each probe start and finish.
pub struct Search<'a, P> {
    cfg: SearchConfig,
    prober: P,
    on_event: &'a mut dyn FnMut(Event<'_>),
    before_final: Option<Box<dyn FnMut() -> Result<(), crate::Error> + 'a>>,
    out: SearchOutcome,
}

/// Stops the search (probe fault or Ctrl-C) carrying the reason.
struct Halt(String);

impl<'a, P: Prober> Search<'a, P> {
    pub fn new(cfg: SearchConfig, prober: P, on_event: &'a mut dyn FnMut(Event<'_>)) -> Self {
        Search {
            cfg,
            prober,
            on_event,
            before_final: None,
            out: SearchOutcome::default(),
        }
    }

    /// Calls `f` once the bisection has settled, just before the final run
    /// (parallel searches line up there); an `Err` ends the search.
    pub fn before_final(mut self, f: impl FnMut() -> Result<(), crate::Error> + 'a) -> Self {
        self.before_final = Some(Box::new(f));
        self
    }

    /// Measures and files one probe. A bracket, bisection, confirming or
    /// final probe that failed only because its requests left late (its
    /// record has `from_send_ms`) is measured once more at the same rate
    /// and the repeat's verdict stands: any such probe while the probe
    /// budget lasts, a final once in a search.
    async fn run_probe(
        &mut self,
        phase: Phase,
        mode: Mode,
        warmup: Duration,
        duration: Duration,
    ) -> Result<(bool, RunResult), Halt> {
        let (ok, r) = self.measure(phase, mode, warmup, duration).await?;
        let late = self
            .out
            .probes
            .last()
            .is_some_and(|p| p.from_send_ms.is_some());
        let again = late
            && match phase {
                Phase::Bracket | Phase::Bisect | Phase::Confirm => {
                    self.out.probes.len() < self.cfg.max_probes
                }
                Phase::Final => {
                    let late_finals = self
                        .out
                        .probes
                        .iter()
                        .filter(|p| p.phase == Phase::Final && p.from_send_ms.is_some());
                    late_finals.count() == 1
                }
                Phase::Warmup | Phase::Peak | Phase::Fixed => false,
            };
        if ok || !again {
            return Ok((ok, r));
        }
        self.measure(phase, mode, warmup, duration).await
    }

    /// One probe, extended while it is a close call, judged and filed.
    async fn measure(
        &mut self,
        phase: Phase,
        mode: Mode,
        warmup: Duration,
        duration: Duration,
    ) -> Result<(bool, RunResult), Halt> {
        let requested = match mode {
            Mode::Open { rate, .. } | Mode::Capped { rate, .. } => rate,
            Mode::Closed { .. } => 0.0,
        };
        let settled = self
            .prober
            .settle()
            .await
            .map_err(|e| Halt(e.to_string()))?;
        (self.on_event)(Event::Start {
            phase,
            requested_qps: requested,
            duration: warmup + duration,
            extension: 0,
        });
        let start_unix_ms = unix_ms();
        let mut r = self
            .prober
            .probe(mode, warmup, duration)
            .await
            .map_err(|e| Halt(e.to_string()))?;
        // Close calls of the bracket and bisection are measured longer and
        // judged on the whole window; so are finals that just missed, up to
        // `extended_finals` of them (a final that passed stands: a longer
        // window would only make it stricter than the probes and the run
        // longer), or with a confidence interval, finals it cannot tell
        // from the target, passed or not. A final is extended once at most.
        let limit = match phase {
            Phase::Final => self.cfg.max_extensions.min(1),
            _ => self.cfg.max_extensions,
        };
        let extensible = match phase {
            Phase::Bracket | Phase::Bisect | Phase::Confirm => true,
            Phase::Final => {
                let extended = self
                    .out
                    .probes
                    .iter()
                    .filter(|p| p.phase == Phase::Final && p.extensions > 0)
                    .count();
                extended < self.cfg.extended_finals
                    && match self.cfg.interval(&r) {
                        Some(i) => i.ambiguous(),
                        None => !self.cfg.judge(&r).0,
                    }
            }
            _ => false,
        };
        let mut first = None;
        let mut extensions = 0;
        while extensible && extensions < limit && self.cfg.is_close_call(&r) {
            first.get_or_insert_with(|| self.cfg.window_brief(&r));
            extensions += 1;
            (self.on_event)(Event::Start {
                phase,
                requested_qps: requested,
                duration,
                extension: extensions,
            });
            let more = self
                .prober
                .probe(mode, Duration::ZERO, duration)
                .await
                .map_err(|e| Halt(e.to_string()))?;
            r.append(&more);
        }
        let (passed, mut verdict) = match phase {
            // Unthrottled probes have no rate to meet; they only measure.
            Phase::Warmup | Phase::Peak => (r.recorder.ok > 0, "unthrottled".to_string()),
            _ => self.cfg.judge(&r),
        };
        let interval = match phase {
            Phase::Warmup | Phase::Peak => None,
            _ => self.cfg.interval(&r),
        };
        if let Some(first) = first {
            let now = interval.map(|i| format!("; now {}", i.brief()));
            verdict = format!(
                "{verdict} (extended {extensions}x; first {first}{})",
                now.unwrap_or_default()
            );
        }
        self.record(
            phase,
            &r,
            passed,
            verdict,
            extensions,
            settled,
            start_unix_ms,
            interval,
        )?;
        Ok((passed, r))
    }

    /// Files a finished probe: its record, the Done event; a probe cut
    /// short by Ctrl-C ends the search.
    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        phase: Phase,
        r: &RunResult,
        passed: bool,
        verdict: String,
        extensions: usize,
        settled: Duration,
        start_unix_ms: u64,
        interval: Option<Interval>,
    ) -> Result<(), Halt> {
        let summary = r.recorder.summary();
        let rec = ProbeRecord {
            seq: self.out.probes.len(),
            phase,
            mode: match r.mode {
                Mode::Open { arrival, .. } => format!("open:{arrival}"),
                Mode::Closed { concurrency } => format!("closed:{concurrency}"),
                Mode::Capped { arrival, slots, .. } => format!("capped:{arrival}:{slots}"),
            },
            requested_qps: r.requested_qps().unwrap_or(0.0),
            duration_secs: r.window.as_secs_f64(),
            total_queries: r.recorder.ok,
            scheduled: r.recorder.scheduled,
            errors: r.recorder.errors,
            dropped: r.recorder.dropped,
            unfinished: r.recorder.unfinished,
            achieved_qps: r.achieved_qps(),
            total_bytes_rx: r.recorder.bytes_rx,
            total_bytes_tx: r.recorder.bytes_tx,
            latency: summary,
            target_value_ms: summary.get(self.cfg.target.percentile),
            passed,
            verdict,
            extensions,
            settle_secs: settled.as_secs_f64(),
            start_unix_ms,
            end_unix_ms: unix_ms(),
            interval,
            from_send_ms: match phase {
                Phase::Warmup | Phase::Peak => None,
                _ => self.cfg.sender_lag(r),
            },
        };
        (self.on_event)(Event::Done(&rec));
        self.out.probes.push(rec);
        if r.interrupted {
            self.out.interrupted = true;
            return Err(Halt("interrupted".into()));
        }
        Ok(())
    }

    /// The unthrottled warm-up: all of `warmup`, or with `warmup_steady`
    /// set, pieces of `warmup_window` until two in a row agree (after at
    /// least `warmup_min`). One record covers the whole warm-up; its
    /// verdict lists the pieces' throughput.
    async fn warm_up(&mut self) -> Result<(), Halt> {
        let c = self.cfg.clone();
        if c.warmup.is_zero() {
            return Ok(());
        }
        let mode = Mode::Closed {
            concurrency: c.peak_concurrency,
        };
        if c.warmup_steady <= 0.0 || c.warmup_window.is_zero() || c.warmup_window >= c.warmup {
            self.run_probe(Phase::Warmup, mode, Duration::ZERO, c.warmup)
                .await?;
            return Ok(());
        }
        let settled = self
            .prober
            .settle()
            .await
            .map_err(|e| Halt(e.to_string()))?;
        let start_unix_ms = unix_ms();
        let mut total: Option<RunResult> = None;
        let mut pieces: Vec<f64> = Vec::new();
        let steady = loop {
            let elapsed = total.as_ref().map_or(Duration::ZERO, |t| t.window);
            let piece = c.warmup_window.min(c.warmup - elapsed);
            (self.on_event)(Event::Start {
                phase: Phase::Warmup,
                requested_qps: 0.0,
                duration: piece,
                extension: pieces.len(),
            });
            let r = self
                .prober
                .probe(mode, Duration::ZERO, piece)
                .await
                .map_err(|e| Halt(e.to_string()))?;
            pieces.push(r.achieved_qps());
            let interrupted = r.interrupted;
            let t = match total.as_mut() {
                None => total.insert(r),
                Some(t) => {
                    t.append(&r);
                    t
                }
            };
            let steady = t.window >= c.warmup_min && warm(&pieces, c.warmup_steady);
            if interrupted || steady || t.window >= c.warmup {
                break steady;
            }
        };
        let t = total.expect("at least one warm-up piece ran");
        let list: Vec<String> = pieces.iter().map(|q| format!("{q:.2}")).collect();
        let verdict = format!(
            "unthrottled; {} after {:.0} s (QPS per {:.0} s: {})",
            if steady { "steady" } else { "not steady" },
            t.window.as_secs_f64(),
            c.warmup_window.as_secs_f64(),
            list.join(", ")
        );
        let ok = t.recorder.ok > 0;
        self.record(
            Phase::Warmup,
            &t,
            ok,
            verdict,
            0,
            settled,
            start_unix_ms,
            None,
        )
    }

    /// Steps up from a passing `lo` by `bracket_up` (at most six times,
    /// never past `cap`) until a rate fails: that rate, or `None` when
    /// none did.
    async fn bracket_up(&mut self, mut lo: f64, cap: f64) -> Result<Option<f64>, Halt> {
        for _ in 0..6 {
            if lo >= cap {
                break;
            }
            let up = (lo * self.cfg.bracket_up).min(cap);
            if self.rate(Phase::Bracket, up).await? {
                lo = up;
            } else {
                return Ok(Some(up));
            }
        }
        Ok(None)
    }

    async fn rate(&mut self, phase: Phase, rate: f64) -> Result<bool, Halt> {
        if self.out.probes.len() >= self.cfg.max_probes {
            return Err(Halt(format!(
                "probe budget of {} exhausted",
                self.cfg.max_probes
            )));
        }
        let mode = Mode::Open {
            rate,
            arrival: self.cfg.arrival,
        };
        let (ok, _) = self
            .run_probe(phase, mode, self.cfg.probe_warmup, self.cfg.probe)
            .await?;
        Ok(ok)
    }

    /// Runs the whole search.
    pub async fn run(mut self) -> SearchOutcome {
        match self.search().await {
            Ok(()) => {}
            Err(Halt(why)) => self.out.failure = Some(why),
        }
        self.out
    }

    async fn search(&mut self) -> Result<(), Halt> {
        let c = self.cfg.clone();
        let unthrottled = Mode::Closed {
            concurrency: c.peak_concurrency,
        };
        self.warm_up().await?;
        let (_, peak) = self
            .run_probe(Phase::Peak, unthrottled, Duration::ZERO, c.peak)
            .await?;
        self.out.peak_qps = peak.achieved_qps();
        let cap = c.max_qps.unwrap_or(f64::INFINITY);
        let start = self.out.peak_qps.max(c.min_qps).min(cap);

        // Bracket: lo passes, hi fails (hi = None: nothing failed up to the cap).
        let (mut lo, mut hi);
        if self.rate(Phase::Bracket, start).await? {
            lo = start;
            hi = self.bracket_up(lo, cap).await?;
        } else {
            hi = Some(start);
            let mut cand = start * c.bracket_down;
            loop {
                if cand < c.min_qps {
                    return Err(Halt(format!(
                        "no rate down to {} QPS meets {} <= {} ms",
                        c.min_qps,
                        c.target.percentile.label(),
                        c.target.latency_ms
                    )));
                }
                if self.rate(Phase::Bracket, cand).await? {
                    lo = cand;
                    break;
                }
                hi = Some(cand);
                cand *= c.bracket_down;
            }
        }

        loop {
            // Bisection.
            while let Some(h) = hi {
                if h <= lo * (1.0 + c.tolerance) {
                    break;
                }
                let mid = (lo + h) / 2.0;
                if self.rate(Phase::Bisect, mid).await? {
                    lo = mid;
                } else {
                    hi = Some(mid);
                }
            }
            // The failure that bounds the result, probed again: believed
            // only when it repeats (see `confirm_failures`).
            let Some(h) = hi.filter(|_| c.confirm_failures) else {
                break;
            };
            if !self.rate(Phase::Confirm, h).await? {
                break;
            }
            lo = h;
            hi = lowest_failure_above(&self.out.probes, h);
            if hi.is_none() {
                hi = self.bracket_up(lo, cap).await?;
            }
        }

        if let Some(f) = self.before_final.as_mut() {
            f().map_err(|e| Halt(e.to_string()))?;
        }
        // Confirmation: never report a rate whose final run failed. The
        // finals start at the bisection's result and look for the highest
        // rate a final-length window passes (see `next_final_rate`).
        let mut rate = lo;
        let (mut passed, mut failed) = (None, None);
        for _ in 0..c.final_attempts.max(1) {
            let mode = Mode::Open {
                rate,
                arrival: c.arrival,
            };
            let (ok, r) = self
                .run_probe(Phase::Final, mode, c.probe_warmup, c.final_duration)
                .await?;
            if ok {
                passed = Some(rate);
                self.out.final_series = r.recorder.series_summary();
                self.out.final_probe = self.out.probes.last().cloned();
            } else {
                failed = Some(rate);
            }
            match next_final_rate(&self.out.probes, lo, passed, failed, c.tolerance) {
                Some(next) if next >= c.min_qps => rate = next,
                _ => break,
            }
        }
        if passed.is_some() {
            self.out.success = true;
            return Ok(());
        }
        Err(Halt("the final run failed at every rate tried".into()))
    }
}

/// The rate of the next final run, or `None` once the finals have settled.
/// `found` is the bisection's result (the first final's rate), `passed`
/// the highest rate a final passed and `failed` the lowest one a final
/// failed at. With `step` = 2 x tolerance (at least 2%):
/// - a final passed and none failed above it: settled;
/// - the first final failed: the highest rate a bracket, bisection or
///   confirming probe passed at least half a tolerance below it, but never
///   more than `step` below (a final that missed by noise costs little);
/// - later finals failed too, and none passed: the finals' knee is below
///   what the shorter probes measured, so the step grows: the distance
///   below `found` at least doubles and grows by at least `step` each
///   time (2%, 6%, 12%, 24% ... at the default tolerance, after a first
///   step of 2%) until a final passes;
/// - a final passed below one that failed: bisection between them, with
///   final-length runs, until they are within `step` of each other.
///
/// So a search whose final-length windows fail well below the probes'
/// knee still ends on a rate a final passed, near the finals' own knee.
pub fn next_final_rate(
    probes: &[ProbeRecord],
    found: f64,
    passed: Option<f64>,
    failed: Option<f64>,
    tolerance: f64,
) -> Option<f64> {
    let step = 2.0 * tolerance.max(0.01);
    let failed = failed?;
    if let Some(passed) = passed.filter(|&p| p < failed) {
        return (failed > passed * (1.0 + step)).then_some((passed + failed) / 2.0);
    }
    if failed < found {
        return Some((2.0 * failed - found).min(failed - found * step));
    }
    let below = failed * (1.0 - tolerance / 2.0);
    let nearest = probes
        .iter()
        .filter(|p| p.passed && matches!(p.phase, Phase::Bracket | Phase::Bisect | Phase::Confirm))
        .map(|p| p.requested_qps)
        .filter(|&q| q < below)
        .fold(failed * (1.0 - step), f64::max);
    Some(nearest)
}

/// How far below a rate the search's own probes passed its reported rate
/// may lie before the search cannot vouch for it ([`unsteady`]): the
/// distance issue 47 allows between a search and a fixed-rate sweep.
pub const UNSTEADY_GAP: f64 = 0.10;

/// Why a search's result cannot be vouched for by the search itself, or
/// `None`: the reported (final) rate lies more than [`UNSTEADY_GAP`] below
/// the highest rate a bracket, bisection or confirming probe passed. The
/// finals then failed again and again where the shorter probes passed: the
/// capacity moved during the run (the host's speed, or the service's), or
/// windows of the final's length catch stalls the probes' missed. Either
/// way the result is the capacity of the run's worst stretch, not a
/// steady one, and a report says so rather than print it as plain "ok".
/// The host checks before and after a run cannot see a slow stretch in
/// its middle; this sees it in the probes.
pub fn unsteady(probes: &[ProbeRecord], reported: Option<&ProbeRecord>) -> Option<String> {
    let got = reported?.requested_qps;
    let passed = probes
        .iter()
        .filter(|p| p.passed && matches!(p.phase, Phase::Bracket | Phase::Bisect | Phase::Confirm))
        .map(|p| p.requested_qps)
        .fold(0.0, f64::max);
    (got > 0.0 && got < passed * (1.0 - UNSTEADY_GAP)).then(|| {
        format!(
            "search unsteady: its result {got:.1} QPS is {:.0}% below {passed:.1} QPS, which its own shorter probes passed (more than {:.0}% apart): the capacity moved during the run or the finals' longer windows met stalls the probes did not, so the result is the run's worst stretch, not a steady capacity; run it again on a quieter host",
            (1.0 - got / passed) * 100.0,
            UNSTEADY_GAP * 100.0
        )
    })
}

/// The lowest rate above `rate` that a bracket, bisection or confirming
/// probe failed at, if any.
fn lowest_failure_above(probes: &[ProbeRecord], rate: f64) -> Option<f64> {
    probes
        .iter()
        .filter(|p| {
            !p.passed
                && matches!(p.phase, Phase::Bracket | Phase::Bisect | Phase::Confirm)
                && p.requested_qps > rate
        })
        .map(|p| p.requested_qps)
        .min_by(f64::total_cmp)
}

/// True when the last two warm-up pieces' throughput agree within `within`.
fn warm(pieces: &[f64], within: f64) -> bool {
    match pieces {
        [.., a, b] => *a > 0.0 && *b > 0.0 && (b - a).abs() <= within * a.max(*b),
        _ => false,
    }
}

/// Measures the unthrottled peak alone: the warm-up and the peak probe of
/// a search (`peak_concurrency` in flight), no rate search after them.
/// Succeeds when the peak probe got replies.
pub async fn run_peak<P: Prober>(
    cfg: SearchConfig,
    prober: P,
    on_event: &mut dyn FnMut(Event<'_>),
) -> SearchOutcome {
    let mut s = Search::new(cfg, prober, on_event);
    let mode = Mode::Closed {
        concurrency: s.cfg.peak_concurrency,
    };
    let peak = s.cfg.peak;
    let run = async {
        s.warm_up().await?;
        s.run_probe(Phase::Peak, mode, Duration::ZERO, peak).await
    };
    match run.await {
        Ok((ok, r)) => {
            s.out.peak_qps = r.achieved_qps();
            s.out.final_series = r.recorder.series_summary();
            s.out.success = ok;
        }
        Err(Halt(why)) => s.out.failure = Some(why),
    }
    s.out
}

/// Runs fixed-rate experiments (FeedSim's `-q`): an unthrottled warm-up of
/// `cfg.warmup` when it is not zero, then one probe per rate, each judged
/// against the target; stops early only on a fault or Ctrl-C.
pub async fn run_fixed<P: Prober>(
    cfg: SearchConfig,
    prober: P,
    rates: &[f64],
    warmup: Duration,
    duration: Duration,
    on_event: &mut dyn FnMut(Event<'_>),
) -> SearchOutcome {
    let mut s = Search::new(cfg, prober, on_event);
    if let Err(Halt(why)) = s.warm_up().await {
        s.out.failure = Some(why);
        s.out.success = false;
        return s.out;
    }
    for &rate in rates {
        let mode = Mode::Open {
            rate,
            arrival: s.cfg.arrival,
        };
        match s.run_probe(Phase::Fixed, mode, warmup, duration).await {
            Ok((_, r)) => s.out.final_series = r.recorder.series_summary(),
            Err(Halt(why)) => {
                s.out.failure = Some(why);
                break;
            }
        }
    }
    let fixed = || s.out.probes.iter().filter(|p| p.phase == Phase::Fixed);
    let all_passed = fixed().count() > 0 && fixed().all(|p| p.passed);
    s.out.success = s.out.failure.is_none() && all_passed;
    // The "final" of a fixed run is its highest passing rate.
    s.out.final_probe = s
        .out
        .probes
        .iter()
        .filter(|p| p.passed && p.phase == Phase::Fixed)
        .max_by(|a, b| a.requested_qps.total_cmp(&b.requested_qps))
        .cloned();
    s.out
}

impl<P: Prober> Prober for &mut P {
    fn probe(
        &mut self,
        mode: Mode,
        warmup: Duration,
        duration: Duration,
    ) -> impl Future<Output = Result<RunResult, crate::Error>> {
        (**self).probe(mode, warmup, duration)
    }

    fn settle(&mut self) -> impl Future<Output = Result<Duration, crate::Error>> {
        (**self).settle()
    }
}
