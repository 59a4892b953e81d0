//! The driver against in-process tower services with known behaviour.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

use load::{Arrival, Mode, RunConfig, run};
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};
use tower::service_fn;

fn no_stop() -> Arc<AtomicBool> {
    Arc::new(AtomicBool::new(false))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_loop_sends_the_schedule_and_counts_bytes() {
    let svc =
        service_fn(|req: Vec<u8>| async move { Ok::<_, Infallible>(vec![0u8; req.len() * 2]) });
    let mut cfg = RunConfig::open(500.0, Arrival::Constant, Duration::from_secs(1));
    cfg.workers = 2;
    let r = run(svc, |_| vec![1u8; 100], &cfg, no_stop()).await;
    assert_eq!(r.recorder.scheduled, 500);
    assert_eq!(r.recorder.ok, 500);
    assert_eq!(r.recorder.bytes_tx, 50_000);
    assert_eq!(r.recorder.bytes_rx, 100_000);
    assert!((r.achieved_qps() - 500.0).abs() < 1.0);
    assert!(r.precise_pacing);
    // An instant service on a precise pacer: the median is well under 1 ms.
    assert!(
        r.recorder.summary().p50_ms < 1.0,
        "{:?}",
        r.recorder.summary()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warmup_is_not_recorded() {
    let svc = service_fn(|_: ()| async { Ok::<_, Infallible>(()) });
    let mut cfg = RunConfig::open(200.0, Arrival::Constant, Duration::from_millis(500));
    cfg.warmup = Duration::from_millis(500);
    let r = run(svc, |_| (), &cfg, no_stop()).await;
    assert_eq!(r.recorder.scheduled, 100);
    assert_eq!(r.recorder.ok, 100);
}

/// A server that stalls from 300 ms to 500 ms after start: every request
/// meant to start during the stall waits for its end. Measured from the
/// intended start, ~20% of requests see 0..200 ms, so p90 is ~100 ms. A
/// driver with coordinated omission would see almost nothing of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalls_show_in_the_tail_without_coordinated_omission() {
    let t0 = Instant::now();
    let stall_from = t0 + Duration::from_millis(300);
    let stall_to = t0 + Duration::from_millis(500);
    let svc = service_fn(move |_: ()| async move {
        let now = Instant::now();
        if now >= stall_from && now < stall_to {
            tokio::time::sleep_until(stall_to.into()).await;
        }
        Ok::<_, Infallible>(())
    });
    let cfg = RunConfig::open(1000.0, Arrival::Constant, Duration::from_secs(1));
    let r = run(svc, |_| (), &cfg, no_stop()).await;
    let s = r.recorder.summary();
    assert!(s.p90_ms > 60.0 && s.p90_ms < 140.0, "p90 {s:?}");
    assert!(s.max_ms > 180.0, "max {s:?}");
    assert!(s.p50_ms < 5.0, "median {s:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_bound_drops_and_cuts_off() {
    // A server that never answers.
    let svc = service_fn(|_: ()| futures::future::pending::<Result<(), Infallible>>());
    let mut cfg = RunConfig::open(1000.0, Arrival::Constant, Duration::from_millis(500));
    cfg.max_in_flight = 10;
    cfg.drain = Duration::from_millis(100);
    let r = run(svc, |_| (), &cfg, no_stop()).await;
    assert_eq!(r.recorder.scheduled, 500);
    assert_eq!(r.recorder.ok, 0);
    assert_eq!(r.recorder.unfinished, 10);
    assert_eq!(r.recorder.dropped, 490);
    assert_eq!(r.failure_ratio(), 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_loop_throughput_follows_concurrency() {
    let svc = service_fn(|_: ()| async {
        tokio::time::sleep(Duration::from_millis(10)).await;
        Ok::<_, Infallible>(())
    });
    let rate = |concurrency| async move {
        let mut cfg = RunConfig::closed(concurrency, Duration::from_secs(1));
        cfg.workers = 2;
        let r = run(svc, |_| (), &cfg, no_stop()).await;
        assert!(matches!(r.mode, Mode::Closed { concurrency: c } if c == concurrency));
        r.achieved_qps()
    };
    let (one, four) = (rate(1).await, rate(4).await);
    // Each request takes at least 10 ms: 4 in flight cannot pass 400/s.
    assert!(four < 420.0, "closed-loop rate {four}");
    // Four in flight give about four times one in flight, however slow
    // this machine's timers are.
    assert!(
        four > 2.5 * one && four < 4.5 * one,
        "1 in flight {one}/s, 4 in flight {four}/s"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_counted_not_timed() {
    let svc = service_fn(|n: u64| async move {
        if n.is_multiple_of(4) {
            Err("boom".to_string())
        } else {
            Ok(())
        }
    });
    let cfg = RunConfig::open(400.0, Arrival::Poisson, Duration::from_millis(500));
    let r = run(svc, |n| n, &cfg, no_stop()).await;
    let rec = &r.recorder;
    assert_eq!(rec.ok + rec.errors, rec.scheduled);
    assert!(rec.errors > 0);
    assert_eq!(rec.first_error.as_deref(), Some("boom"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_flag_ends_the_run_early() {
    let svc = service_fn(|_: ()| async { Ok::<_, Infallible>(()) });
    let cfg = RunConfig::open(100.0, Arrival::Constant, Duration::from_secs(30));
    let stop = no_stop();
    let s2 = stop.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        s2.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let t = Instant::now();
    let r = run(svc, |_| (), &cfg, stop).await;
    assert!(t.elapsed() < Duration::from_secs(2));
    assert!(r.interrupted);
    assert!(r.window < Duration::from_secs(1));
    assert!(r.recorder.ok >= 20);
}

/// The compatibility mode (DCPerf's oldisim driver): at most `slots`
/// outstanding, latency from the send, the rate counted from sends. Against
/// a server that takes 20 ms per request, 2 slots cannot send more than
/// 100/s whatever the requested rate, and no latency shows the backlog that
/// the open loop charges at the same rate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capped_mode_sends_into_free_slots_and_times_from_the_send() {
    let svc = service_fn(|_: ()| async {
        tokio::time::sleep(Duration::from_millis(20)).await;
        Ok::<_, Infallible>(())
    });
    let mut cfg = RunConfig::open(400.0, Arrival::Constant, Duration::from_secs(1));
    cfg.mode = Mode::Capped {
        rate: 400.0,
        arrival: Arrival::Constant,
        slots: 2,
    };
    cfg.workers = 2;
    let r = run(svc, |_| (), &cfg, no_stop()).await;
    let s = r.recorder.summary();
    assert_eq!(r.requested_qps(), Some(400.0));
    // Sends, not the schedule's 400: two slots of >= 20 ms each.
    assert!(
        r.achieved_qps() <= 105.0,
        "capped rate {}",
        r.achieved_qps()
    );
    assert!(r.achieved_qps() > 10.0, "capped rate {}", r.achieved_qps());
    assert_eq!(r.recorder.scheduled, r.recorder.ok + r.recorder.unfinished);
    assert_eq!(r.recorder.dropped, 0);
    // Timed from the send: every request takes its 20 ms, and the median
    // stays near it although the schedule fell hundreds of ms behind.
    assert!(s.min_ms >= 19.0, "{s:?}");
    assert!(s.p50_ms < 150.0, "{s:?}");
    // The open loop at the same rate and slots' worth of service charges
    // the wait: with one request at a time per 20 ms, its latencies grow
    // across the window.
    let slow = service_fn(|_: ()| async {
        tokio::time::sleep(Duration::from_millis(20)).await;
        Ok::<_, Infallible>(())
    });
    let limited = tower::limit::ConcurrencyLimit::new(slow, 2);
    let mut open = RunConfig::open(400.0, Arrival::Constant, Duration::from_secs(1));
    open.drain = Duration::from_secs(5);
    let o = run(limited, |_| (), &open, no_stop()).await;
    assert!(
        o.recorder.summary().p50_ms > 4.0 * s.p50_ms,
        "open {:?} vs capped {s:?}",
        o.recorder.summary()
    );
}

/// Constant arrivals with a coalescing window: a wake-up sends what is due
/// within the window with it, so sends come in groups a few ms apart (the
/// timer's wake-ups and the replies' each send a group; each request at its
/// own time would be 1,000 sends 0.5 ms apart),
/// and a request sent early is timed from its send, so no latency is
/// shorter than the service's 3 ms (timed from the intended start, the
/// early ones would show up to 5 ms less).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_ahead_coalesces_wake_ups_and_times_early_sends_from_the_send() {
    let calls = Arc::new(std::sync::Mutex::new(Vec::<Instant>::new()));
    let seen = calls.clone();
    let svc = service_fn(move |_: ()| {
        seen.lock().unwrap().push(Instant::now());
        async {
            tokio::time::sleep(Duration::from_millis(3)).await;
            Ok::<_, Infallible>(())
        }
    });
    let mut cfg = RunConfig::open(2000.0, Arrival::Constant, Duration::from_millis(500));
    assert_eq!(
        cfg.send_ahead,
        Duration::from_millis(1),
        "constant's default"
    );
    cfg.send_ahead = Duration::from_millis(5);
    let r = run(svc, |_| (), &cfg, no_stop()).await;
    assert_eq!(r.recorder.scheduled, 1000);
    assert_eq!(r.recorder.ok, 1000);
    let calls = calls.lock().unwrap();
    let groups = 1 + calls
        .windows(2)
        .filter(|w| w[1].saturating_duration_since(w[0]) > Duration::from_micros(100))
        .count();
    assert!(groups <= 400, "{groups} groups of sends for 1000 requests");
    let min_ms = r.recorder.latency.min() as f64 / 1000.0;
    assert!(
        min_ms >= 3.0,
        "shortest latency {min_ms} ms, below the service's 3 ms"
    );
    assert_eq!(
        RunConfig::open(10.0, Arrival::Poisson, Duration::from_secs(1)).send_ahead,
        Duration::ZERO,
        "Poisson keeps exact times"
    );
}

/// A reply that says when it arrived (as the lean gRPC client's do, from
/// the kernel's receive stamp).
struct Stamped(Option<Instant>);

impl load::WireSize for Stamped {
    fn wire_size(&self) -> u64 {
        1
    }

    fn arrived(&self) -> Option<Instant> {
        self.0
    }
}

/// A reply that arrived 1 ms after its send but was handed over 50 ms
/// later (a client thread that woke late) is timed to its arrival; a stamp
/// after the hand-over (a clock gone wrong) is no later than the
/// hand-over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_ends_when_the_reply_arrived_not_when_it_was_read() {
    let run_with = |offset: Duration| async move {
        let svc = service_fn(move |_: ()| {
            let at = Instant::now() + offset;
            async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                Ok::<_, Infallible>(Stamped(Some(at)))
            }
        });
        let cfg = RunConfig::open(100.0, Arrival::Constant, Duration::from_millis(300));
        let r = run(svc, |_| (), &cfg, no_stop()).await;
        assert_eq!(r.recorder.ok, 30);
        r.recorder.summary()
    };
    let early = run_with(Duration::from_millis(1)).await;
    assert!(early.max_ms < 25.0, "timed to the hand-over: {early:?}");
    let late = run_with(Duration::from_secs(10)).await;
    assert!(
        late.p50_ms >= 50.0 && late.max_ms < 1000.0,
        "not clamped to the hand-over: {late:?}"
    );
}
