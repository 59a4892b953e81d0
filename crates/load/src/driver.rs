//! Open- and closed-loop drivers over any `tower::Service`.
//!
//! Open loop: every worker follows its share of an [`Arrival`] schedule, and a
//! request's latency is measured from its *intended* start, so a server that
//! stalls is charged for every request the stall delayed (no coordinated
//! omission). Closed loop keeps N requests in flight and measures from the
//! send; reports label which one was used.
//!
//! Each worker is one task owning its in-flight requests
//! (`FuturesUnordered`) and its [`Recorder`]; results are merged at the end.

use crate::arrival::{Arrival, Schedule};
use crate::pacer::Pacer;
use crate::recorder::Recorder;
use crate::wire::WireSize;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde::Serialize;
use std::fmt::Display;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tower::{Service, ServiceExt};

/// How often a worker looks at its stop flag while it waits (an open-loop
/// worker also looks before every request it sends); each look is a
/// timer wake-up of the client's thread and an eventfd write (at 20 ms, 50
/// of each a second whatever the rate), and 100 ms plus the 200 ms drain
/// keeps Ctrl-C well within a second.
const STOP_CHECK: Duration = Duration::from_millis(100);

/// How load is offered.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// `rate` requests per second following `arrival`, independent of replies.
    Open { rate: f64, arrival: Arrival },
    /// `concurrency` requests always in flight (the next one is sent when one
    /// completes): measures peak throughput, hides queueing delay.
    Closed { concurrency: usize },
    /// A compatibility mode: `rate` requests per second following `arrival`,
    /// but at most `slots` outstanding, as DCPerf's oldisim driver (threads x
    /// connections at depth 1). A request due while every slot is busy waits
    /// for one (the backlog) and is timed from its send, not from when it was
    /// due; the achieved rate counts sends. So it is closed-loop at overload
    /// and hides the queueing the open loop measures.
    Capped {
        rate: f64,
        arrival: Arrival,
        slots: usize,
    },
}

/// One run of the driver.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub mode: Mode,
    /// Leading period whose requests are sent but not recorded.
    pub warmup: Duration,
    /// The measured window.
    pub duration: Duration,
    /// Worker tasks (each an independent stream); usually the client threads.
    pub workers: usize,
    /// Bound on requests in flight across all workers; past it requests are
    /// counted as dropped instead of queued, so memory stays bounded.
    pub max_in_flight: usize,
    /// How long to wait for outstanding replies after the window closes.
    pub drain: Duration,
    pub seed: u64,
    /// Open loop: a wake-up also sends the requests due within this window
    /// after it, early (each timed from its send), so one timer wake-up
    /// serves several requests; see [`default_send_ahead`]. Zero sends each
    /// request at its own time.
    pub send_ahead: Duration,
}

/// The default wake-up coalescing window of an open-loop run
/// ([`RunConfig::send_ahead`]): 1 ms for constant arrivals, none for the
/// others.
///
/// Sending each evenly spaced request at its own instant costs the client
/// a timer wake-up per request (6-13 CPU-µs on a VM, more than the
/// request's own work), so its CPU per request was 2-3x h2load's, whose
/// `--rps` sends in 10 ms ticks. With the window a wake-up sends what is
/// due within the next 1 ms too: the schedule holds at 1 ms and above
/// (tokio's own timer resolution, a tenth of h2load's tick), every request
/// still leaves at or before its time, and one sent early is timed from its
/// send, so no latency is measured short. Poisson arrivals keep their exact
/// times (their close gaps are what the M/D/c model counts on) and bursts
/// are sent together anyway.
pub fn default_send_ahead(arrival: Arrival) -> Duration {
    match arrival {
        Arrival::Constant => Duration::from_millis(1),
        Arrival::Poisson | Arrival::Burst { .. } => Duration::ZERO,
    }
}

impl RunConfig {
    /// An open-loop run with sensible defaults for the rest.
    pub fn open(rate: f64, arrival: Arrival, duration: Duration) -> Self {
        RunConfig {
            mode: Mode::Open { rate, arrival },
            warmup: Duration::ZERO,
            duration,
            workers: 1,
            max_in_flight: 100_000,
            drain: Duration::from_secs(2),
            seed: 1,
            send_ahead: default_send_ahead(arrival),
        }
    }

    /// A closed-loop run.
    pub fn closed(concurrency: usize, duration: Duration) -> Self {
        RunConfig {
            mode: Mode::Closed { concurrency },
            ..RunConfig::open(0.0, Arrival::Constant, duration)
        }
    }
}

/// What a run measured.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub mode: Mode,
    /// Length of the measured window actually run (shorter when stopped).
    pub window: Duration,
    pub warmup: Duration,
    pub recorder: Recorder,
    /// True when the stop flag ended the run early.
    pub interrupted: bool,
    /// False when the pacer fell back to tokio's 1 ms timer.
    pub precise_pacing: bool,
}

impl RunResult {
    /// Successful replies per second of the measured window; in the
    /// [`Mode::Capped`] compatibility mode, sends per second (upstream's
    /// driver counts a query when it sends it).
    pub fn achieved_qps(&self) -> f64 {
        let s = self.window.as_secs_f64();
        let n = match self.mode {
            Mode::Capped { .. } => self.recorder.scheduled,
            _ => self.recorder.ok,
        };
        if s > 0.0 { n as f64 / s } else { 0.0 }
    }

    /// Measures on: a later window at the same load joins this one (its
    /// requests, its length, an interruption or coarse pacing in it).
    pub fn append(&mut self, more: &RunResult) {
        self.recorder.extend_with(&more.recorder);
        self.window += more.window;
        self.interrupted |= more.interrupted;
        self.precise_pacing &= more.precise_pacing;
    }

    /// The rate that was asked for (open loop), if any.
    pub fn requested_qps(&self) -> Option<f64> {
        match self.mode {
            Mode::Open { rate, .. } | Mode::Capped { rate, .. } => Some(rate),
            Mode::Closed { .. } => None,
        }
    }

    /// Fraction of the scheduled requests that got a successful reply. In
    /// the [`Mode::Capped`] compatibility mode, of the sent requests that
    /// ended (at most one per slot is still out when the window closes).
    pub fn completion_ratio(&self) -> f64 {
        let r = &self.recorder;
        let asked = match self.mode {
            Mode::Capped { .. } => r.scheduled.saturating_sub(r.unfinished),
            _ => r.scheduled,
        };
        if asked == 0 {
            1.0
        } else {
            r.ok as f64 / asked as f64
        }
    }

    /// Fraction of the scheduled requests that failed (errors, drops, cut off).
    pub fn failure_ratio(&self) -> f64 {
        let r = &self.recorder;
        if r.scheduled == 0 {
            0.0
        } else {
            (r.errors + r.dropped + r.unfinished) as f64 / r.scheduled as f64
        }
    }
}

type Outcome<E> = (Instant, Instant, Instant, Result<u64, E>);

/// When a request sent at `sent` ended, and its reply's size: the reply's
/// arrival where the transport stamps it ([`WireSize::arrived`]; never
/// before the send nor after now), else now.
fn finished<T: WireSize, E: Display>(
    sent: Instant,
    result: Result<T, E>,
) -> (Instant, Result<u64, String>) {
    let now = Instant::now();
    match result {
        Ok(r) => {
            let done = r.arrived().map_or(now, |a| a.clamp(sent, now));
            (done, Ok(r.wire_size()))
        }
        Err(e) => (now, Err(e.to_string())),
    }
}

/// Runs load against `svc`, building request `n` with `make(n)`.
///
/// Workers are spawned on the current tokio runtime; its worker threads are the
/// client's cores. `stop` ends the run early (Ctrl-C); what was measured until
/// then is returned with `interrupted` set.
pub async fn run<S, R, F>(svc: S, make: F, cfg: &RunConfig, stop: Arc<AtomicBool>) -> RunResult
where
    S: Service<R> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Response: WireSize + Send + 'static,
    S::Error: Display + Send + 'static,
    R: WireSize + Send + 'static,
    F: Fn(u64) -> R + Send + Sync + 'static,
{
    let workers = cfg.workers.max(1);
    let make = Arc::new(make);
    let in_flight = Arc::new(AtomicUsize::new(0));
    // A common start slightly ahead so every worker begins on the same schedule.
    let start = Instant::now() + Duration::from_millis(5);
    let mut handles = Vec::with_capacity(workers);
    for w in 0..workers {
        let ctx = Worker {
            svc: svc.clone(),
            make: make.clone(),
            cfg: cfg.clone(),
            index: w,
            workers,
            start,
            in_flight: in_flight.clone(),
            stop: stop.clone(),
        };
        handles.push(tokio::spawn(ctx.run()));
    }
    let mut recorder = Recorder::new();
    let mut interrupted = false;
    let mut precise = true;
    for h in handles {
        match h.await {
            Ok((rec, was_stopped, was_precise)) => {
                recorder.merge(&rec);
                interrupted |= was_stopped;
                precise &= was_precise;
            }
            Err(e) => {
                recorder.record_error(Duration::ZERO, || format!("driver worker failed: {e}"));
            }
        }
    }
    let measure_from = start + cfg.warmup;
    let window = if interrupted {
        Instant::now()
            .saturating_duration_since(measure_from)
            .min(cfg.duration)
    } else {
        cfg.duration
    };
    RunResult {
        mode: cfg.mode,
        window,
        warmup: cfg.warmup,
        recorder,
        interrupted,
        precise_pacing: precise,
    }
}

struct Worker<S, F> {
    svc: S,
    make: Arc<F>,
    cfg: RunConfig,
    index: usize,
    workers: usize,
    start: Instant,
    in_flight: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

/// Decrements the shared in-flight count when a request future is dropped,
/// completed or not.
struct InFlightGuard(Arc<AtomicUsize>);

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl<S, R, F> Worker<S, F>
where
    S: Service<R> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Response: WireSize + Send + 'static,
    S::Error: Display + Send + 'static,
    R: WireSize + Send + 'static,
    F: Fn(u64) -> R + Send + Sync + 'static,
{
    fn send(
        &mut self,
        seq: u64,
        intended: Instant,
        rec: &mut Recorder,
        measuring: bool,
    ) -> InFlight {
        let req = (self.make)(seq);
        if measuring {
            rec.bytes_tx += req.wire_size();
        }
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        let guard = InFlightGuard(self.in_flight.clone());
        // A service that is ready now (a client pool or the lean gRPC
        // client always is) is called here, without a clone of it and a
        // readiness future per request; one that is not is cloned and
        // awaited in the request's future, as tower's `oneshot` does.
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let fut: Pin<Box<dyn Future<Output = Outcome<String>> + Send>> =
            match self.svc.poll_ready(&mut cx) {
                std::task::Poll::Ready(Ok(())) => {
                    let sent = Instant::now();
                    let call = self.svc.call(req);
                    Box::pin(async move {
                        let _guard = guard;
                        let (done, result) = finished(sent, call.await);
                        (intended, sent, done, result)
                    })
                }
                std::task::Poll::Ready(Err(e)) => {
                    let e = e.to_string();
                    Box::pin(async move {
                        let _guard = guard;
                        let now = Instant::now();
                        (intended, now, now, Err(e))
                    })
                }
                std::task::Poll::Pending => {
                    let svc = self.svc.clone();
                    Box::pin(async move {
                        let _guard = guard;
                        match svc.ready_oneshot().await {
                            Ok(mut ready) => {
                                let sent = Instant::now();
                                let (done, result) = finished(sent, ready.call(req).await);
                                (intended, sent, done, result)
                            }
                            Err(e) => {
                                let now = Instant::now();
                                (intended, now, now, Err(e.to_string()))
                            }
                        }
                    })
                }
            };
        InFlight {
            measuring,
            intended,
            fut,
        }
    }

    fn record(&self, outcome: Outcome<String>, rec: &mut Recorder) {
        let (intended, sent, done, result) = outcome;
        // From the intended start, or from the send when it went early (see
        // `RunConfig::send_ahead`): never shorter than the request took.
        let at = done.saturating_duration_since(self.start);
        match result {
            Ok(rx) => rec.record_ok(
                done.saturating_duration_since(intended.min(sent)),
                done.saturating_duration_since(sent),
                at,
                rx,
            ),
            Err(e) => rec.record_error(at, || e),
        }
    }

    async fn run(self) -> (Recorder, bool, bool) {
        match self.cfg.mode {
            Mode::Open { rate, arrival } => self.run_open(rate, arrival).await,
            Mode::Closed { concurrency } => self.run_closed(concurrency).await,
            Mode::Capped {
                rate,
                arrival,
                slots,
            } => self.run_capped(rate, arrival, slots).await,
        }
    }

    async fn run_open(mut self, rate: f64, arrival: Arrival) -> (Recorder, bool, bool) {
        let mut rec = Recorder::new();
        let mut sched = Schedule::new(arrival, rate, self.index, self.workers, self.cfg.seed);
        let measure_from = self.start + self.cfg.warmup;
        let end = measure_from + self.cfg.duration;
        let mut pacer = Pacer::new();
        let precise = pacer.is_precise();
        let mut inflight = FuturesUnordered::new();
        // Requests of the warm-up are tracked separately so they are not recorded.
        let mut seq = self.index as u64;
        let mut stop_tick = tokio::time::interval(STOP_CHECK);
        let mut stopped = false;
        let mut next = sched.peek().map(|o| self.start + o).filter(|t| *t < end);
        // The pacer wakes at the first due request; the requests due within
        // `ahead` of then go with it (and with any reply that wakes the
        // worker first), so wake-ups are at least `ahead` apart.
        let ahead = self.cfg.send_ahead;
        while let Some(due) = next {
            if self.stop.load(Ordering::Relaxed) {
                stopped = true;
                break;
            }
            let now = Instant::now();
            if now.checked_add(ahead).is_none_or(|horizon| due <= horizon) {
                let measuring = due >= measure_from;
                if measuring {
                    rec.scheduled += 1;
                }
                if self.in_flight.load(Ordering::Relaxed) >= self.cfg.max_in_flight {
                    if measuring {
                        rec.dropped += 1;
                    }
                } else {
                    let fut = self.send(seq, due, &mut rec, measuring);
                    inflight.push(fut);
                }
                seq += self.workers as u64;
                sched.advance();
                next = sched.peek().map(|o| self.start + o).filter(|t| *t < end);
                continue;
            }
            tokio::select! {
                biased;
                Some((measuring, outcome)) = inflight.next(), if !inflight.is_empty() => {
                    if measuring { self.record(outcome, &mut rec); }
                }
                _ = pacer.wait_until(due) => {}
                _ = stop_tick.tick() => {
                    if self.stop.load(Ordering::Relaxed) { stopped = true; break; }
                }
            }
        }
        self.drain(inflight, &mut rec, end, stopped).await;
        (rec, stopped || self.stop.load(Ordering::Relaxed), precise)
    }

    async fn run_closed(mut self, concurrency: usize) -> (Recorder, bool, bool) {
        let mut rec = Recorder::new();
        let share =
            concurrency / self.workers + usize::from(self.index < concurrency % self.workers);
        let measure_from = self.start + self.cfg.warmup;
        let end = measure_from + self.cfg.duration;
        tokio::time::sleep_until(self.start.into()).await;
        let mut inflight = FuturesUnordered::new();
        let mut seq = self.index as u64;
        for _ in 0..share {
            let now = Instant::now();
            let measuring = now >= measure_from;
            rec.scheduled += u64::from(measuring);
            inflight.push(self.send(seq, now, &mut rec, measuring));
            seq += self.workers as u64;
        }
        let mut stop_tick = tokio::time::interval(STOP_CHECK);
        let mut stopped = false;
        // One timer for the end, not one per reply (each new one is an
        // insertion into and removal from tokio's timer wheel).
        let at_end = tokio::time::sleep_until(end.into());
        tokio::pin!(at_end);
        loop {
            tokio::select! {
                biased;
                Some((measuring, outcome)) = inflight.next(), if !inflight.is_empty() => {
                    if measuring { self.record(outcome, &mut rec); }
                    let now = Instant::now();
                    if now < end {
                        let measuring = now >= measure_from;
                        rec.scheduled += u64::from(measuring);
                        inflight.push(self.send(seq, now, &mut rec, measuring));
                        seq += self.workers as u64;
                    } else if inflight.is_empty() {
                        break;
                    }
                }
                _ = &mut at_end, if !at_end.is_elapsed() => {}
                _ = stop_tick.tick() => {
                    if self.stop.load(Ordering::Relaxed) { stopped = true; break; }
                    if Instant::now() >= end { break; }
                }
            }
        }
        self.drain(inflight, &mut rec, end, stopped).await;
        (rec, stopped || self.stop.load(Ordering::Relaxed), true)
    }

    /// [`Mode::Capped`]: the open-loop schedule, but a request is sent only
    /// into a free slot of this worker's share; due requests wait in a
    /// backlog (sent as slots free, timed from the send), and what is still
    /// in the backlog when the window ends is never sent. `scheduled` counts
    /// sends, so `achieved_qps` is the send rate.
    async fn run_capped(
        mut self,
        rate: f64,
        arrival: Arrival,
        slots: usize,
    ) -> (Recorder, bool, bool) {
        let mut rec = Recorder::new();
        let share = (slots / self.workers + usize::from(self.index < slots % self.workers)).max(1);
        let mut sched = Schedule::new(arrival, rate, self.index, self.workers, self.cfg.seed);
        let measure_from = self.start + self.cfg.warmup;
        let end = measure_from + self.cfg.duration;
        let mut pacer = Pacer::new();
        let precise = pacer.is_precise();
        let mut inflight = FuturesUnordered::new();
        let mut seq = self.index as u64;
        let mut backlog: u64 = 0;
        let mut stop_tick = tokio::time::interval(STOP_CHECK);
        let mut stopped = false;
        let mut next = sched.peek().map(|o| self.start + o).filter(|t| *t < end);
        loop {
            let now = Instant::now();
            // Every due request joins the backlog; the backlog goes out
            // while slots are free.
            while next.is_some_and(|d| d <= now) {
                backlog += 1;
                sched.advance();
                next = sched.peek().map(|o| self.start + o).filter(|t| *t < end);
            }
            if now >= end {
                break;
            }
            while backlog > 0 && inflight.len() < share {
                backlog -= 1;
                let measuring = now >= measure_from;
                rec.scheduled += u64::from(measuring);
                inflight.push(self.send(seq, now, &mut rec, measuring));
                seq += self.workers as u64;
            }
            let wake = next.unwrap_or(end);
            tokio::select! {
                biased;
                Some((measuring, outcome)) = inflight.next(), if !inflight.is_empty() => {
                    if measuring { self.record(outcome, &mut rec); }
                }
                _ = pacer.wait_until(wake) => {}
                _ = stop_tick.tick() => {
                    if self.stop.load(Ordering::Relaxed) { stopped = true; break; }
                }
            }
        }
        self.drain(inflight, &mut rec, end, stopped).await;
        (rec, stopped || self.stop.load(Ordering::Relaxed), precise)
    }

    /// Waits for outstanding replies up to `end + drain` (briefly when
    /// stopped), then records what is left as unfinished.
    async fn drain(
        &mut self,
        mut inflight: FuturesUnordered<InFlight>,
        rec: &mut Recorder,
        end: Instant,
        stopped: bool,
    ) {
        let deadline = if stopped {
            Instant::now() + Duration::from_millis(200)
        } else {
            end + self.cfg.drain
        };
        while !inflight.is_empty() {
            tokio::select! {
                Some((measuring, outcome)) = inflight.next() => {
                    if measuring { self.record(outcome, rec); }
                }
                _ = tokio::time::sleep_until(deadline.into()) => break,
            }
        }
        // Whatever is still outstanding was cut off: record each one's age as a
        // lower bound of its latency; dropping the futures cancels the calls.
        // In the compatibility mode they are counted but not timed:
        // upstream's driver samples latency from replies only.
        let now = Instant::now();
        let capped = matches!(self.cfg.mode, Mode::Capped { .. });
        for f in inflight.iter().filter(|f| f.measuring) {
            if capped {
                rec.unfinished += 1;
            } else {
                rec.record_unfinished(now.saturating_duration_since(f.intended));
            }
        }
    }
}

/// A request in flight, tagged with what the recorder needs to know about it
/// even if it never completes.
struct InFlight {
    measuring: bool,
    intended: Instant,
    fut: Pin<Box<dyn Future<Output = Outcome<String>> + Send>>,
}

impl Future for InFlight {
    type Output = (bool, Outcome<String>);
    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let measuring = self.measuring;
        self.fut.as_mut().poll(cx).map(|o| (measuring, o))
    }
}
