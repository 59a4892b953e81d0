//! The SLO search against a model server whose behaviour at each rate is
//! known exactly, so the algorithm's choices can be checked.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

use load::driver::{Mode, RunResult};
use load::search::{Event, Phase, Search, run_fixed};
use load::{Percentile, Recorder, SearchConfig, SloTarget};
use std::time::Duration;

/// A server with a latency knee: p95 is 10 ms up to `knee` QPS and 900 ms
/// above; above `capacity` it completes only `capacity` QPS.
struct Model {
    knee: f64,
    capacity: f64,
    /// Rates whose *final-length* run fails once (noise near the knee).
    flaky_final_above: Option<f64>,
    calls: Vec<(Mode, Duration)>,
    fail_after: Option<usize>,
    /// Throughput of successive unthrottled probes while warming up (then
    /// `capacity`).
    warming: Vec<f64>,
    /// The probe (1-based, in call order) that a host stall spoils: its
    /// latency is 900 ms whatever the rate.
    bad_probe: Option<usize>,
    /// Probes (1-based) whose requests leave late (the client's host
    /// froze): 900 ms from the intended start, the server's own latency
    /// from the send.
    late_probes: Vec<usize>,
}

impl Model {
    fn new(knee: f64, capacity: f64) -> Self {
        Model {
            knee,
            capacity,
            flaky_final_above: None,
            calls: Vec::new(),
            fail_after: None,
            warming: Vec::new(),
            bad_probe: None,
            late_probes: Vec::new(),
        }
    }
}

impl load::Prober for Model {
    async fn probe(
        &mut self,
        mode: Mode,
        warmup: Duration,
        duration: Duration,
    ) -> Result<RunResult, load::Error> {
        self.calls.push((mode, duration));
        if self.fail_after.is_some_and(|n| self.calls.len() > n) {
            return Err(load::Error::Host("leaf died".into()));
        }
        let secs = duration.as_secs_f64();
        let closed_calls = self
            .calls
            .iter()
            .filter(|(m, _)| matches!(m, Mode::Closed { .. }))
            .count();
        let (rate, lat_ms) = match mode {
            Mode::Closed { .. } => (
                *self.warming.get(closed_calls - 1).unwrap_or(&self.capacity),
                900.0,
            ),
            Mode::Open { rate, .. } | Mode::Capped { rate, .. } => {
                let slow = rate > self.knee
                    || (secs >= 10.0 && self.flaky_final_above.is_some_and(|f| rate > f))
                    || self.bad_probe == Some(self.calls.len());
                (rate, if slow { 900.0 } else { 10.0 })
            }
        };
        let mut rec = Recorder::new();
        let scheduled = (rate * secs).round() as u64;
        let completed = match mode {
            Mode::Closed { .. } => (rate * secs).round() as u64,
            Mode::Open { .. } | Mode::Capped { .. } => {
                (rate.min(self.capacity) * secs).round() as u64
            }
        };
        rec.scheduled = if matches!(mode, Mode::Closed { .. }) {
            completed
        } else {
            scheduled
        };
        let late =
            matches!(mode, Mode::Open { .. }) && self.late_probes.contains(&self.calls.len());
        for _ in 0..completed {
            let d = Duration::from_secs_f64(lat_ms / 1000.0);
            let from_intended = if late {
                d.max(Duration::from_millis(900))
            } else {
                d
            };
            rec.record_ok(from_intended, d, Duration::ZERO, 100);
        }
        rec.unfinished = rec.scheduled - completed;
        Ok(RunResult {
            mode,
            window: duration,
            warmup,
            recorder: rec,
            interrupted: false,
            precise_pacing: true,
        })
    }
}

fn cfg() -> SearchConfig {
    let mut c = SearchConfig::new(SloTarget {
        percentile: Percentile::P95,
        latency_ms: 500.0,
    });
    c.final_duration = Duration::from_secs(10);
    c.probe = Duration::from_secs(2);
    c
}

/// A probe's result of `rate * duration` requests, all scheduled and
/// completed: `request(i, n)` gives the i-th of n requests' latency and
/// when in the window it completed.
fn window(
    mode: Mode,
    warmup: Duration,
    duration: Duration,
    rate: f64,
    request: impl Fn(u64, u64) -> (Duration, Duration),
) -> RunResult {
    let n = (rate * duration.as_secs_f64()).round() as u64;
    let mut rec = Recorder::new();
    rec.scheduled = n;
    for i in 0..n {
        let (d, at) = request(i, n);
        rec.record_ok(d, d, at, 100);
    }
    RunResult {
        mode,
        window: duration,
        warmup,
        recorder: rec,
        interrupted: false,
        precise_pacing: true,
    }
}

fn finals_of(out: &load::SearchOutcome) -> Vec<&load::ProbeRecord> {
    out.probes
        .iter()
        .filter(|p| p.phase == Phase::Final)
        .collect()
}

#[tokio::test]
async fn finds_the_knee_within_tolerance_and_never_above_it() {
    let mut model = Model::new(700.0, 1000.0);
    let mut events = Vec::new();
    let mut on = |e: Event<'_>| {
        if let Event::Done(p) = e {
            events.push((p.phase, p.requested_qps, p.passed));
        }
    };
    let out = Search::new(cfg(), &mut model, &mut on).run().await;
    assert!(out.success, "{:?}", out.failure);
    let f = out.final_probe.unwrap();
    assert_eq!(f.phase, Phase::Final);
    assert!(
        f.requested_qps <= 700.0,
        "reported a failing rate {}",
        f.requested_qps
    );
    assert!(
        f.requested_qps >= 700.0 / 1.02,
        "not within 2%: {}",
        f.requested_qps
    );
    assert!((out.peak_qps - 1000.0).abs() < 1.0);
    // warm-up, peak, bracket from the peak, bisection, one final.
    assert_eq!(events[0].0, Phase::Warmup);
    assert_eq!(events[1].0, Phase::Peak);
    assert_eq!(events[2], (Phase::Bracket, 1000.0, false));
    assert_eq!(events[3], (Phase::Bracket, 500.0, true));
    assert!(events.len() < 16, "{} probes", events.len());
    assert_eq!(out.probes.len(), events.len());
}

#[tokio::test]
async fn one_bad_probe_cannot_hold_the_result_below_the_knee() {
    // A clean search, for the number of probes a search takes.
    let mut clean = Model::new(700.0, 1000.0);
    let mut on = |_: Event<'_>| {};
    let out = Search::new(cfg(), &mut clean, &mut on).run().await;
    let reported = |out: &load::SearchOutcome| out.final_probe.as_ref().unwrap().requested_qps;
    let clean_rate = reported(&out);
    assert!((700.0 / 1.02..=700.0).contains(&clean_rate));
    let n = clean.calls.len();
    // Each probe in turn spoiled (a stall: 900 ms whatever the rate),
    // warm-up and peak aside (they judge nothing): the result stays
    // within 5% of the knee (a spoiled final steps down by at most two
    // tolerances), never above it.
    let mut fooled_without = 0;
    for bad in 3..=n + 2 {
        let mut m = Model::new(700.0, 1000.0);
        m.bad_probe = Some(bad);
        let out = Search::new(cfg(), &mut m, &mut on).run().await;
        assert!(out.success, "bad probe {bad}: {:?}", out.failure);
        let r = reported(&out);
        assert!(
            (700.0 * 0.95..=700.0).contains(&r),
            "bad probe {bad}: reported {r} QPS; probes {:?}",
            out.probes
                .iter()
                .map(|p| (p.phase, p.requested_qps, p.passed))
                .collect::<Vec<_>>()
        );
        // Without the confirmation, some spoiled probe sends the
        // bisection down for good.
        let mut m = Model::new(700.0, 1000.0);
        m.bad_probe = Some(bad);
        let mut c = cfg();
        c.confirm_failures = false;
        let out = Search::new(c, &mut m, &mut on).run().await;
        if out
            .final_probe
            .is_none_or(|f| f.requested_qps < 700.0 * 0.9)
        {
            fooled_without += 1;
        }
    }
    assert!(
        fooled_without > 0,
        "the unconfirmed search was never fooled"
    );
}

#[tokio::test]
async fn a_probe_whose_requests_left_late_is_repeated_and_the_repeat_stands() {
    let mut clean = Model::new(700.0, 1000.0);
    let mut on = |_: Event<'_>| {};
    let out = Search::new(cfg(), &mut clean, &mut on).run().await;
    let steps = |out: &load::SearchOutcome| -> Vec<(Phase, f64, bool)> {
        out.probes
            .iter()
            .filter(|p| p.from_send_ms.is_none())
            .map(|p| (p.phase, p.requested_qps, p.passed))
            .collect()
    };
    let clean_steps = steps(&out);
    let n = clean.calls.len();
    // Each judged probe in turn sent late (call k is record k - 1: one
    // warm-up piece): the search repeats it at the same rate and then goes
    // exactly as the clean search did.
    for bad in 3..=n {
        let mut m = Model::new(700.0, 1000.0);
        m.late_probes = vec![bad];
        let out = Search::new(cfg(), &mut m, &mut on).run().await;
        assert!(out.success, "late probe {bad}: {:?}", out.failure);
        assert_eq!(steps(&out), clean_steps, "late probe {bad}");
        let late: Vec<_> = out
            .probes
            .iter()
            .filter(|p| p.from_send_ms.is_some())
            .collect();
        // A rate the server fails from the send as well is no late probe:
        // it fails on its own and is not repeated.
        if !clean_steps[bad - 1].2 {
            assert!(late.is_empty(), "late probe {bad}");
            assert_eq!(out.probes.len(), clean_steps.len(), "late probe {bad}");
            continue;
        }
        assert_eq!(late.len(), 1, "late probe {bad}");
        assert_eq!(out.probes.len(), clean_steps.len() + 1, "late probe {bad}");
        let (first, repeat) = (late[0], &out.probes[late[0].seq + 1]);
        assert!(!first.passed && first.target_value_ms >= 900.0);
        let from_send = first.from_send_ms.unwrap();
        assert!(
            (from_send - 10.0).abs() < 0.05,
            "the server's own p95: {from_send}"
        );
        assert!(
            first
                .verdict
                .contains("ms from the send: the requests left late"),
            "{}",
            first.verdict
        );
        assert_eq!(
            (repeat.phase, repeat.requested_qps),
            (first.phase, first.requested_qps)
        );
        assert!(repeat.from_send_ms.is_none());
    }
    // A client that is always late (one that cannot keep up, or a host
    // that always freezes) is believed the second time: its probes fail
    // and the search says so, never passing a rate on the server's figure.
    let mut m = Model::new(700.0, 1000.0);
    m.late_probes = (3..200).collect();
    let out = Search::new(cfg(), &mut m, &mut on).run().await;
    assert!(!out.success);
    let judged: Vec<_> = out.probes.iter().filter(|p| p.seq >= 2).collect();
    assert!(judged.iter().all(|p| !p.passed), "{judged:?}");
}

#[tokio::test]
async fn a_failing_final_steps_down_instead_of_being_reported() {
    let mut model = Model::new(700.0, 1000.0);
    model.flaky_final_above = Some(690.0);
    let mut on = |_: Event<'_>| {};
    let out = Search::new(cfg(), &mut model, &mut on).run().await;
    assert!(out.success);
    let finals: Vec<_> = out
        .probes
        .iter()
        .filter(|p| p.phase == Phase::Final)
        .collect();
    assert!(finals.len() >= 2);
    assert!(!finals[0].passed);
    let f = out.final_probe.unwrap();
    assert!(f.passed && f.requested_qps <= 690.0);
    // The step down goes to the highest rate a bisection probe passed below
    // the failed final (687.5 here), not a blind 2 x tolerance lower.
    let passed_below: Vec<f64> = out
        .probes
        .iter()
        .filter(|p| p.passed && p.phase == Phase::Bisect)
        .map(|p| p.requested_qps)
        .filter(|&q| q < finals[0].requested_qps)
        .collect();
    assert!(
        passed_below.contains(&finals[1].requested_qps),
        "{passed_below:?}"
    );
    assert!(finals[1].requested_qps > finals[0].requested_qps * 0.96 + 1.0);
}

#[tokio::test]
async fn finals_that_fail_well_below_the_probes_knee_still_end_on_a_passing_rate() {
    // 5 s probes pass up to 700 QPS, but 10 s finals only up to `f` (a
    // queue that builds slowly, or a host slower over longer windows).
    // Stepping down by two tolerances at most, three finals never got
    // more than about 4% below the probes' knee: the search ended with no
    // result. Now the step grows until a final passes, and the finals
    // bisect between the two.
    for (tolerance, below) in [0.02, 0.01]
        .into_iter()
        .flat_map(|t| [0.03, 0.05, 0.08, 0.10, 0.20].map(|b| (t, b)))
    {
        let f = 700.0 * (1.0 - below);
        let mut m = Model::new(700.0, 1000.0);
        m.flaky_final_above = Some(f);
        let mut c = cfg();
        c.tolerance = tolerance;
        let (attempts, step) = (c.final_attempts, 2.0 * c.tolerance);
        let mut on = |_: Event<'_>| {};
        let out = Search::new(c, &mut m, &mut on).run().await;
        let finals: Vec<(f64, bool)> = finals_of(&out)
            .iter()
            .map(|p| (p.requested_qps, p.passed))
            .collect();
        assert!(out.success, "{below}: {:?} {finals:?}", out.failure);
        assert!(finals.len() <= attempts, "{below}: {finals:?}");
        let reported = out.final_probe.as_ref().unwrap();
        assert!(reported.passed && reported.phase == Phase::Final);
        let r = reported.requested_qps;
        assert!(r <= f, "{below}: reported {r} above the finals' knee {f}");
        // Within two tolerances of the finals' knee (20% below takes seven
        // finals: five on the way down, two to bisect).
        assert!(
            r >= f * (1.0 - step),
            "{below}: reported {r}; finals {finals:?}"
        );
        // Never a rate above one a final failed at.
        let lowest_failed = finals
            .iter()
            .filter(|(_, ok)| !ok)
            .map(|(q, _)| *q)
            .fold(f64::INFINITY, f64::min);
        assert!(r < lowest_failed, "{below}: {finals:?}");
    }
}

#[tokio::test]
async fn a_result_far_below_what_the_probes_passed_is_marked_unsteady() {
    // Finals that fail 3% below the probes' knee end near it: the search
    // vouches for its result. Finals that fail 20% below it end on a rate
    // the shorter probes beat by far: the capacity moved during the run,
    // and the result says so.
    for (below, marked) in [(0.03, false), (0.20, true)] {
        let mut m = Model::new(700.0, 1000.0);
        m.flaky_final_above = Some(700.0 * (1.0 - below));
        let mut on = |_: Event<'_>| {};
        let out = Search::new(cfg(), &mut m, &mut on).run().await;
        assert!(out.success, "{below}: {:?}", out.failure);
        let reported = out.final_probe.as_ref().unwrap();
        let mark = load::search::unsteady(&out.probes, Some(reported));
        assert_eq!(mark.is_some(), marked, "{below}: {mark:?}");
        if let Some(mark) = mark {
            let best = out
                .probes
                .iter()
                .filter(|p| p.passed && p.phase == Phase::Bisect)
                .map(|p| p.requested_qps)
                .fold(0.0, f64::max);
            assert!(mark.starts_with("search unsteady"), "{mark}");
            assert!(
                mark.contains(&format!("{:.1} QPS", reported.requested_qps)),
                "{mark}"
            );
            assert!(mark.contains(&format!("{best:.1} QPS")), "{mark}");
        }
        // A search with no result has nothing to mark.
        assert!(load::search::unsteady(&out.probes, None).is_none());
    }
}

#[tokio::test]
async fn the_search_gives_up_after_its_final_attempts() {
    // Every final-length run fails: the search tries `final_attempts`
    // finals, each lower, and fails rather than report any of them.
    let mut model = Model::new(700.0, 1000.0);
    model.flaky_final_above = Some(0.0);
    let mut c = cfg();
    c.final_attempts = 4;
    let mut on = |_: Event<'_>| {};
    let out = Search::new(c, &mut model, &mut on).run().await;
    assert!(!out.success);
    let finals: Vec<f64> = out
        .probes
        .iter()
        .filter(|p| p.phase == Phase::Final)
        .map(|p| p.requested_qps)
        .collect();
    assert_eq!(finals.len(), 4);
    assert!(finals.windows(2).all(|w| w[1] < w[0]), "{finals:?}");
    assert!(out.final_probe.is_none());
}

fn warmups(out: &load::search::SearchOutcome) -> Vec<&load::search::ProbeRecord> {
    out.probes
        .iter()
        .filter(|p| p.phase == Phase::Warmup)
        .collect()
}

#[tokio::test]
async fn an_adaptive_warm_up_ends_once_two_pieces_agree() {
    let mut model = Model::new(700.0, 1000.0);
    // Warming up: 500, 800, 950, then 1000 twice (within 3%).
    model.warming = vec![500.0, 800.0, 950.0, 1000.0, 1000.0];
    let mut c = cfg();
    c.warmup = Duration::from_secs(120);
    c.warmup_steady = 0.03;
    c.warmup_window = Duration::from_secs(10);
    c.warmup_min = Duration::from_secs(30);
    let mut starts = Vec::new();
    let mut on = |e: Event<'_>| {
        if let Event::Start {
            phase: Phase::Warmup,
            extension,
            duration,
            ..
        } = e
        {
            starts.push((extension, duration));
        }
    };
    let out = Search::new(c, &mut model, &mut on).run().await;
    assert!(out.success, "{:?}", out.failure);
    let w = warmups(&out);
    assert_eq!(w.len(), 1, "one record covers the warm-up");
    assert_eq!(w[0].duration_secs, 50.0);
    assert_eq!(w[0].total_queries, 5000 + 8000 + 9500 + 10000 + 10000);
    assert!(
        w[0].verdict
            .contains("steady after 50 s (QPS per 10 s: 500.00, 800.00, 950.00, 1000.00, 1000.00)"),
        "{}",
        w[0].verdict
    );
    assert_eq!(starts.len(), 5);
    assert!(starts.iter().all(|&(_, d)| d == Duration::from_secs(10)));
    assert_eq!(starts.last().unwrap().0, 4);
    // The peak comes after the warm-up and sees the warm server.
    assert_eq!(out.probes[1].phase, Phase::Peak);
    assert!((out.peak_qps - 1000.0).abs() < 1.0);
}

#[tokio::test]
async fn an_adaptive_warm_up_that_never_settles_runs_to_its_limit() {
    let mut model = Model::new(700.0, 1000.0);
    model.warming = vec![500.0, 600.0, 500.0, 600.0, 500.0, 600.0, 500.0];
    let mut c = cfg();
    c.warmup = Duration::from_secs(65);
    c.warmup_steady = 0.03;
    c.warmup_window = Duration::from_secs(10);
    c.warmup_min = Duration::from_secs(30);
    let mut on = |_: Event<'_>| {};
    let out = Search::new(c, &mut model, &mut on).run().await;
    let w = warmups(&out);
    assert_eq!(w.len(), 1);
    // Six 10 s pieces and a last 5 s one: never more than -w.
    assert_eq!(w[0].duration_secs, 65.0);
    assert!(
        w[0].verdict.contains("not steady after 65 s"),
        "{}",
        w[0].verdict
    );
    // Even when the first pieces agree, at least warmup_min runs.
    let mut model = Model::new(700.0, 1000.0);
    let mut c = cfg();
    c.warmup = Duration::from_secs(120);
    c.warmup_steady = 0.03;
    c.warmup_min = Duration::from_secs(30);
    let out = Search::new(c, &mut model, &mut on).run().await;
    assert_eq!(warmups(&out)[0].duration_secs, 30.0);
    // warmup_steady 0 keeps upstream's fixed warm-up in one piece.
    let mut model = Model::new(700.0, 1000.0);
    let mut c = cfg();
    c.warmup = Duration::from_secs(120);
    let out = Search::new(c, &mut model, &mut on).run().await;
    assert_eq!(warmups(&out)[0].duration_secs, 120.0);
    assert_eq!(warmups(&out)[0].verdict, "unthrottled");
    assert_eq!(
        model
            .calls
            .iter()
            .filter(|(m, _)| matches!(m, Mode::Closed { .. }))
            .count(),
        2,
        "one warm-up and one peak probe"
    );
}

#[tokio::test]
async fn bracketing_steps_by_the_configured_factors() {
    // Peak 1000 fails; 0.8 steps down: 800 fails, 640 passes; the
    // bisection then works inside [640, 800] only.
    let mut model = Model::new(700.0, 1000.0);
    let mut c = cfg();
    c.bracket_down = 0.8;
    let mut on = |_: Event<'_>| {};
    let out = Search::new(c, &mut model, &mut on).run().await;
    let bracket: Vec<(f64, bool)> = out
        .probes
        .iter()
        .filter(|p| p.phase == Phase::Bracket)
        .map(|p| (p.requested_qps, p.passed))
        .collect();
    assert_eq!(
        bracket,
        vec![(1000.0, false), (800.0, false), (640.0, true)]
    );
    let bisect: Vec<f64> = out
        .probes
        .iter()
        .filter(|p| p.phase == Phase::Bisect)
        .map(|p| p.requested_qps)
        .collect();
    assert_eq!(bisect[0], 720.0);
    assert!(
        bisect.iter().all(|&q| (640.0..800.0).contains(&q)),
        "{bisect:?}"
    );
    let f = out.final_probe.unwrap();
    assert!(f.requested_qps <= 700.0 && f.requested_qps >= 700.0 / 1.02);
    // Upward, a peak that passes steps up by bracket_up.
    let mut model = Model::new(1300.0, 2000.0);
    model.warming = vec![1000.0, 1000.0];
    let mut c = cfg();
    c.bracket_up = 1.25;
    let out = Search::new(c, &mut model, &mut on).run().await;
    let up: Vec<(f64, bool)> = out
        .probes
        .iter()
        .filter(|p| p.phase == Phase::Bracket)
        .map(|p| (p.requested_qps, p.passed))
        .collect();
    assert_eq!(up, vec![(1000.0, true), (1250.0, true), (1562.5, false)]);
}

#[tokio::test]
async fn expands_upward_when_the_peak_passes() {
    // Latency never exceeds the target; the limit is completion (capacity).
    let mut model = Model::new(f64::INFINITY, 1000.0);
    let mut on = |_: Event<'_>| {};
    let mut c = cfg();
    c.peak_concurrency = 8;
    let out = Search::new(c, &mut model, &mut on).run().await;
    let f = out.final_probe.unwrap();
    // 98% completion rule: anything up to 1000/0.98 passes.
    assert!(
        f.requested_qps >= 1000.0 && f.requested_qps <= 1000.0 / 0.98 + 1.0,
        "{}",
        f.requested_qps
    );
}

#[tokio::test]
async fn reports_failure_when_nothing_meets_the_target() {
    let mut model = Model::new(0.5, 1000.0);
    let mut on = |_: Event<'_>| {};
    let out = Search::new(cfg(), &mut model, &mut on).run().await;
    assert!(!out.success);
    assert!(out.final_probe.is_none());
    assert!(out.failure.unwrap().contains("no rate down to 1 QPS"));
}

#[tokio::test]
async fn a_fault_ends_the_search_with_the_probes_so_far() {
    let mut model = Model::new(700.0, 1000.0);
    model.fail_after = Some(4);
    let mut on = |_: Event<'_>| {};
    let out = Search::new(cfg(), &mut model, &mut on).run().await;
    assert!(!out.success);
    assert_eq!(out.probes.len(), 4);
    assert_eq!(out.failure.as_deref(), Some("leaf died"));
}

#[tokio::test]
async fn fixed_rates_are_each_judged() {
    let mut model = Model::new(700.0, 1000.0);
    let mut on = |_: Event<'_>| {};
    let out = run_fixed(
        cfg(),
        &mut model,
        &[100.0, 650.0, 800.0],
        Duration::ZERO,
        Duration::from_secs(1),
        &mut on,
    )
    .await;
    // An unthrottled warm-up row first (cfg.warmup is not zero), then the rates.
    assert_eq!(out.probes[0].phase, Phase::Warmup);
    let verdicts: Vec<bool> = out.probes[1..].iter().map(|p| p.passed).collect();
    assert_eq!(verdicts, vec![true, true, false]);
    assert!(!out.success);
    assert_eq!(out.final_probe.unwrap().requested_qps, 650.0);
    assert!(out.probes[3].verdict.contains("95p latency 900"));
}

#[test]
fn target_parsing() {
    let t: SloTarget = "99p:100".parse().unwrap();
    assert_eq!(t.percentile, Percentile::P99);
    assert_eq!(t.latency_ms, 100.0);
    assert!(
        "99p"
            .parse::<SloTarget>()
            .unwrap_err()
            .contains("METRIC:MS")
    );
    assert!("99p:abc".parse::<SloTarget>().is_err());
    assert!("42p:10".parse::<SloTarget>().is_err());
}

#[tokio::test]
async fn before_final_runs_once_between_bisection_and_final_and_can_stop_it() {
    let mut model = Model::new(300.0, 1000.0);
    let calls_at_hook = std::cell::Cell::new(None);
    let mut on = |_: Event<'_>| {};
    let probes_so_far = std::rc::Rc::new(std::cell::Cell::new(0usize));
    let seen = probes_so_far.clone();
    let mut on_count = |e: Event<'_>| {
        if let Event::Done(_) = e {
            seen.set(seen.get() + 1);
        }
    };
    let out = Search::new(cfg(), &mut model, &mut on_count)
        .before_final(|| {
            assert!(calls_at_hook.get().is_none(), "hook called twice");
            calls_at_hook.set(Some(probes_so_far.get()));
            Ok(())
        })
        .run()
        .await;
    assert!(out.success);
    let at = calls_at_hook.get().expect("hook was called");
    // Every probe but the final had run when the hook was called.
    assert_eq!(at, out.probes.len() - 1);
    assert_eq!(out.probes.last().unwrap().phase, Phase::Final);

    // An error from the hook ends the search without a final run.
    let mut model = Model::new(300.0, 1000.0);
    let out = Search::new(cfg(), &mut model, &mut on)
        .before_final(|| {
            Err(load::Error::Stopped(
                "the other instances were stopped".into(),
            ))
        })
        .run()
        .await;
    assert!(!out.success);
    assert_eq!(
        out.failure.as_deref(),
        Some("the other instances were stopped")
    );
    assert!(out.probes.iter().all(|p| p.phase != Phase::Final));
}

/// A server near its knee whose first window at each rate has 6% slow
/// requests (p95 = 520 ms, a close call against 500 ms) and whose later
/// windows have none.
struct CloseCall {
    windows: std::collections::HashMap<u64, usize>,
}

impl load::Prober for CloseCall {
    async fn probe(
        &mut self,
        mode: Mode,
        warmup: Duration,
        duration: Duration,
    ) -> Result<RunResult, load::Error> {
        let (rate, first) = match mode {
            Mode::Open { rate, .. } | Mode::Capped { rate, .. } => {
                let seen = self.windows.entry(rate.to_bits()).or_insert(0);
                *seen += 1;
                (rate, *seen == 1)
            }
            // Unthrottled probes: 100 QPS, no slow requests.
            Mode::Closed { .. } => (100.0, false),
        };
        Ok(window(mode, warmup, duration, rate, |i, _| {
            let slow = first && i % 100 < 6;
            let d = Duration::from_millis(if slow { 520 } else { 400 });
            (d, Duration::from_secs(i / rate.max(1.0) as u64))
        }))
    }
}

#[tokio::test]
async fn close_calls_are_extended_and_judged_on_the_whole_window() {
    let mut c = cfg();
    c.borderline = 0.1;
    c.max_extensions = 1;
    let mut model = CloseCall {
        windows: Default::default(),
    };
    let mut starts = Vec::new();
    let mut on = |e: Event<'_>| {
        if let Event::Start { extension, .. } = e {
            starts.push(extension);
        }
    };
    let out = Search::new(c.clone(), &mut model, &mut on).run().await;
    let bracket = out
        .probes
        .iter()
        .find(|p| p.phase == Phase::Bracket)
        .unwrap();
    // The first window alone failed (p95 520 ms); with the extension 3% of
    // the requests are slow and the probe passes.
    assert_eq!(bracket.extensions, 1);
    assert!(bracket.passed, "{}", bracket.verdict);
    assert!(bracket.target_value_ms < 500.0);
    assert_eq!(bracket.duration_secs, 2.0 * c.probe.as_secs_f64());
    assert!(starts.contains(&1));
    // Final runs are never extended.
    assert!(finals_of(&out).iter().all(|p| p.extensions == 0));

    // Without extensions the same first window fails.
    let mut c = cfg();
    c.borderline = 0.0;
    let mut model = CloseCall {
        windows: Default::default(),
    };
    let mut on = |_: Event<'_>| {};
    let out = Search::new(c, &mut model, &mut on).run().await;
    let bracket = out
        .probes
        .iter()
        .find(|p| p.phase == Phase::Bracket)
        .unwrap();
    assert_eq!(bracket.extensions, 0);
    assert!(!bracket.passed);
}

/// A server whose latency at rates above `sustainable` is 300 ms for most of
/// a window and 600 ms for the last 4% of its requests (a queue starting to
/// build: the whole window's p95 still meets 500 ms, its last quarter does
/// not); with `hiccup_only_once`, that slow end happens only in the first
/// window at each rate (a passing host hiccup, gone when measured longer).
struct Rising {
    sustainable: f64,
    hiccup_only_once: bool,
    windows: std::collections::HashMap<u64, usize>,
}

impl Rising {
    fn new(sustainable: f64, hiccup_only_once: bool) -> Self {
        Rising {
            sustainable,
            hiccup_only_once,
            windows: Default::default(),
        }
    }
}

impl load::Prober for Rising {
    async fn probe(
        &mut self,
        mode: Mode,
        warmup: Duration,
        duration: Duration,
    ) -> Result<RunResult, load::Error> {
        // Unthrottled probes complete twice the sustainable rate and are
        // never slow.
        let (rate, rising) = match mode {
            Mode::Open { rate, .. } | Mode::Capped { rate, .. } => {
                let seen = self.windows.entry(rate.to_bits()).or_insert(0);
                *seen += 1;
                let first = *seen == 1;
                (
                    rate,
                    rate > self.sustainable && (first || !self.hiccup_only_once),
                )
            }
            Mode::Closed { .. } => (2.0 * self.sustainable, false),
        };
        Ok(window(mode, warmup, duration, rate, |i, n| {
            let slow = rising && i >= n - n * 4 / 100;
            let d = Duration::from_millis(if slow { 600 } else { 300 });
            (d, Duration::from_secs_f64(i as f64 / rate) + d)
        }))
    }
}

fn steady_cfg() -> SearchConfig {
    let mut c = cfg();
    c.probe = Duration::from_secs(20);
    c.final_duration = Duration::from_secs(20);
    c.steady_tail = 0.25;
    c
}

#[tokio::test]
async fn a_window_whose_tail_misses_the_target_fails_the_steady_state_rule() {
    let rates = [50.0, 100.0];
    let mut on = |_: Event<'_>| {};
    let mut c = steady_cfg();
    c.warmup = Duration::ZERO;
    let out = run_fixed(
        c.clone(),
        Rising::new(60.0, false),
        &rates,
        Duration::ZERO,
        Duration::from_secs(20),
        &mut on,
    )
    .await;
    let (low, high) = (&out.probes[0], &out.probes[1]);
    assert!(low.passed, "{}", low.verdict);
    // The whole window's p95 meets the target; the last quarter's does not.
    assert!(high.target_value_ms <= 500.0, "{}", high.target_value_ms);
    assert!(!high.passed);
    assert!(
        high.verdict.contains("last 6 s") && high.verdict.contains("still rising"),
        "{}",
        high.verdict
    );

    // Judged on the whole window only (upstream's rule), both pass.
    c.steady_tail = 0.0;
    let out = run_fixed(
        c,
        Rising::new(60.0, false),
        &rates,
        Duration::ZERO,
        Duration::from_secs(20),
        &mut on,
    )
    .await;
    assert!(out.probes.iter().all(|p| p.passed));
}

#[tokio::test]
async fn the_search_reports_the_sustainable_rate_not_one_whose_latency_was_rising() {
    let mut on = |_: Event<'_>| {};
    let out = Search::new(steady_cfg(), Rising::new(60.0, false), &mut on)
        .run()
        .await;
    assert!(out.success, "{:?}", out.failure);
    let f = out.final_probe.unwrap();
    assert!(f.requested_qps <= 60.0, "{}", f.requested_qps);
    assert!(f.requested_qps >= 60.0 / 1.02, "{}", f.requested_qps);
    // Without the rule the same search settles on the peak's rate (120 QPS).
    let mut c = steady_cfg();
    c.steady_tail = 0.0;
    let out = Search::new(c, Rising::new(60.0, false), &mut on)
        .run()
        .await;
    assert!(out.final_probe.unwrap().requested_qps > 100.0);
}

#[tokio::test]
async fn a_rising_tail_is_a_close_call_that_a_longer_window_settles() {
    // A hiccup at the end of the first window only: extended, the probe is
    // judged on both windows, whose last quarter is clean, and passes.
    let mut c = steady_cfg();
    c.borderline = 0.1;
    c.max_extensions = 1;
    let mut on = |_: Event<'_>| {};
    let out = Search::new(c.clone(), Rising::new(60.0, true), &mut on)
        .run()
        .await;
    let bracket = out
        .probes
        .iter()
        .find(|p| p.phase == Phase::Bracket)
        .unwrap();
    assert_eq!(bracket.extensions, 1);
    assert!(bracket.passed, "{}", bracket.verdict);
    // A rate whose every window ends rising stays failed after the extension.
    let out = Search::new(c, Rising::new(60.0, false), &mut on)
        .run()
        .await;
    let bracket = out
        .probes
        .iter()
        .find(|p| p.phase == Phase::Bracket)
        .unwrap();
    assert_eq!(bracket.extensions, 1);
    assert!(!bracket.passed);
    assert!(
        bracket.verdict.contains("still rising"),
        "{}",
        bracket.verdict
    );
}

/// A knee at `knee` QPS (10 ms below, 900 ms above); every final run's
/// first window (one with a warm-up; extensions have none) has a host
/// hiccup: 6% of its requests take `hiccup_ms`. Extension windows are
/// clean, or with `growing` the queue keeps growing in them (900 ms).
struct FinalHiccup {
    knee: f64,
    hiccup_ms: u64,
    growing: bool,
}

impl FinalHiccup {
    fn new(hiccup_ms: u64) -> Self {
        FinalHiccup {
            knee: 700.0,
            hiccup_ms,
            growing: false,
        }
    }
}

impl load::Prober for FinalHiccup {
    async fn probe(
        &mut self,
        mode: Mode,
        warmup: Duration,
        duration: Duration,
    ) -> Result<RunResult, load::Error> {
        let rate = match mode {
            Mode::Closed { .. } => 1000.0,
            Mode::Open { rate, .. } | Mode::Capped { rate, .. } => rate,
        };
        let long = duration.as_secs() >= 10;
        let is_final = long && !warmup.is_zero();
        let is_extension = long && warmup.is_zero();
        let over_knee = matches!(mode, Mode::Closed { .. }) || rate > self.knee;
        Ok(window(mode, warmup, duration, rate, |i, n| {
            let ms = if over_knee {
                900
            } else if is_final && i < n * 6 / 100 {
                self.hiccup_ms
            } else if is_extension && self.growing {
                900
            } else {
                10
            };
            (Duration::from_millis(ms), Duration::ZERO)
        }))
    }
}

#[tokio::test]
async fn a_close_call_final_is_extended_when_finals_are_extensible() {
    let mut c = cfg();
    c.borderline = 0.1;
    c.max_extensions = 1;
    c.extended_finals = 1;
    let mut on = |_: Event<'_>| {};
    let out = Search::new(c.clone(), &mut FinalHiccup::new(530), &mut on)
        .run()
        .await;
    assert!(out.success, "{:?}", out.failure);
    let finals = finals_of(&out);
    // One final: its first 10 s missed (p95 530 ms), the extension was
    // clean, and the 20 s window (3% slow) meets the target.
    assert_eq!(finals.len(), 1);
    assert_eq!(finals[0].extensions, 1);
    assert_eq!(finals[0].duration_secs, 20.0);
    assert!(finals[0].passed && finals[0].target_value_ms < 500.0);
    // The record keeps what the first window measured.
    assert!(
        finals[0]
            .verdict
            .contains("extended 1x; first 10 s: 95p 530 ms"),
        "{}",
        finals[0].verdict
    );
    let lo = out
        .probes
        .iter()
        .filter(|p| p.passed && p.phase == Phase::Bisect)
        .map(|p| p.requested_qps)
        .fold(0.0, f64::max);
    assert_eq!(out.final_probe.unwrap().requested_qps, lo);

    // Off (the default), the same hiccup fails each final and the search
    // steps down and gives up: every final run has the hiccup.
    c.extended_finals = 0;
    let out = Search::new(c, &mut FinalHiccup::new(530), &mut on)
        .run()
        .await;
    let finals = finals_of(&out);
    assert!(!finals[0].passed && finals[0].extensions == 0);
    assert!(!out.success);
}

#[tokio::test]
async fn a_final_that_passes_close_to_the_target_is_not_extended() {
    let mut c = cfg();
    c.borderline = 0.1;
    c.max_extensions = 1;
    c.extended_finals = 1;
    let mut on = |_: Event<'_>| {};
    // The hiccup puts the final's p95 at 480 ms: within the close-call
    // band but under the target, so the final stands as it is.
    let out = Search::new(c, &mut FinalHiccup::new(480), &mut on)
        .run()
        .await;
    assert!(out.success, "{:?}", out.failure);
    let f = out.final_probe.unwrap();
    assert_eq!(f.extensions, 0);
    assert_eq!(f.duration_secs, 10.0);
    assert!(
        (f.target_value_ms - 480.0).abs() < 5.0,
        "{}",
        f.target_value_ms
    );
}

#[tokio::test]
async fn at_most_extended_finals_finals_are_extended_in_a_search() {
    let run = |budget: usize, growing: bool| {
        let mut c = cfg();
        c.borderline = 0.1;
        c.max_extensions = 1;
        c.extended_finals = budget;
        c.final_attempts = 3;
        async move {
            let mut on = |_: Event<'_>| {};
            let mut server = FinalHiccup {
                growing,
                ..FinalHiccup::new(530)
            };
            Search::new(c, &mut server, &mut on).run().await
        }
    };
    // A clean extension passes the first final on the whole.
    let out = run(1, false).await;
    assert!(out.success, "{:?}", out.failure);
    let f = finals_of(&out);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].extensions, 1);

    // Extensions that fail: the budget of one is spent on the first final,
    // the other two run their plain window and fail, and the search gives up.
    let out = run(1, true).await;
    assert!(!out.success);
    let f = finals_of(&out);
    assert_eq!(f.len(), 3);
    let ext: Vec<usize> = f.iter().map(|p| p.extensions).collect();
    assert_eq!(ext, vec![1, 0, 0]);
    assert_eq!(f[0].duration_secs, 20.0);
    assert_eq!(f[1].duration_secs, 10.0);

    // No budget: no final is extended.
    let out = run(0, false).await;
    assert!(!out.success);
    assert!(finals_of(&out).iter().all(|p| p.extensions == 0));
}
