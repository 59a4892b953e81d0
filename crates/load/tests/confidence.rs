//! Judging with a confidence interval: the batch-means error of the
//! fraction of replies slower than the target, and the search's use of it
//! to decide which probes are close calls.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

use load::driver::{Mode, RunResult};
use load::search::{Event, Phase, Search};
use load::{Arrival, Percentile, Recorder, SearchConfig, SloTarget};
use std::time::Duration;

/// `per_second[s]` = (replies, slow replies) completing in second `s`;
/// slow replies take 30 ms, the others 10 ms.
fn recorder(per_second: &[(u64, u64)]) -> Recorder {
    let mut rec = Recorder::new();
    for (s, &(n, slow)) in per_second.iter().enumerate() {
        for i in 0..n {
            let d = Duration::from_millis(if i < slow { 30 } else { 10 });
            let at = Duration::from_secs(s as u64) + Duration::from_millis(i * 900 / n.max(1));
            rec.record_ok(d, d, at, 10);
        }
        rec.scheduled += n;
    }
    rec
}

fn result(per_second: &[(u64, u64)]) -> RunResult {
    RunResult {
        mode: Mode::Open {
            rate: 100.0,
            arrival: Arrival::Poisson,
        },
        window: Duration::from_secs(per_second.len() as u64),
        warmup: Duration::ZERO,
        recorder: recorder(per_second),
        interrupted: false,
        precise_pacing: true,
    }
}

fn cfg(confidence: f64) -> SearchConfig {
    let mut c = SearchConfig::new(SloTarget {
        percentile: Percentile::P95,
        latency_ms: 20.0,
    });
    c.confidence = confidence;
    c
}

#[test]
fn exceedance_has_a_batch_means_error() {
    // Two seconds with 10% slow, two with none: 5% overall.
    let rec = recorder(&[(100, 10), (100, 10), (100, 0), (100, 0)]);
    let e = rec.exceedance(20.0).unwrap();
    assert_eq!(e.count, 400);
    assert_eq!(e.batches, 4);
    assert!((e.fraction - 0.05).abs() < 1e-12, "{}", e.fraction);
    // sum((a_i - p n_i)^2) = 4 * 25 = 100; / (4 * 3 * 100^2) = 1/1200.
    let se = e.std_err.unwrap();
    assert!((se - (1.0f64 / 1200.0).sqrt()).abs() < 1e-9, "{se}");
    // Slow replies in runs make it wider than the binomial error of the
    // same fraction (0.011) would be.
    assert!(se > 2.0 * (0.05f64 * 0.95 / 400.0).sqrt());
    // Spread evenly, the same fraction has a batch error of 0.
    let even = recorder(&[(100, 5), (100, 5), (100, 5), (100, 5)]);
    assert_eq!(even.exceedance(20.0).unwrap().std_err, Some(0.0));
    // One batch has no error estimate; nothing completed, no figure.
    assert_eq!(
        recorder(&[(100, 5)]).exceedance(20.0).unwrap().std_err,
        None
    );
    assert!(Recorder::new().exceedance(20.0).is_none());
    // The threshold splits at its value: nothing is slower than 30 ms.
    assert_eq!(rec.exceedance(30.0).unwrap().fraction, 0.0);
}

#[test]
fn the_interval_decides_close_calls() {
    let c = cfg(0.95);
    // 5% slow in runs: the interval holds the allowed 5%: a close call.
    let runs = result(&[(100, 10), (100, 10), (100, 0), (100, 0)]);
    let i = c.interval(&runs).unwrap();
    assert!((i.allowed - 0.05).abs() < 1e-12);
    assert!(i.low < 0.05 && i.high > 0.05, "{i:?}");
    assert!(i.ambiguous());
    assert!(c.is_close_call(&runs));
    assert!(i.brief().contains("95% CI over 4 s"), "{}", i.brief());
    // 20% slow every second: clearly over; none slow: clearly under.
    // Neither is a close call, though the batch error of both is 0 (the
    // binomial error of the allowed fraction is the floor).
    let over = result(&[(100, 20); 6]);
    let i = c.interval(&over).unwrap();
    assert!(i.low > 0.05, "{i:?}");
    assert!(!c.is_close_call(&over));
    let under = result(&[(100, 0); 6]);
    assert!(c.interval(&under).unwrap().high < 0.05);
    assert!(!c.is_close_call(&under));
    // Over two seconds with few replies the binomial floor keeps even a
    // window without slow replies ambiguous: it cannot tell 0% from 5%.
    let short = result(&[(10, 0), (10, 0)]);
    assert!(c.interval(&short).unwrap().ambiguous());
    // Off by default: no interval, and without `borderline` no close call.
    let off = cfg(0.0);
    assert!(off.interval(&runs).is_none());
    assert!(!off.is_close_call(&runs));
    // A mean target has no interval.
    let mut mean = cfg(0.95);
    mean.target.percentile = Percentile::Avg;
    assert!(mean.interval(&runs).is_none());
}

/// A server whose first window at a rate near its knee has slow replies in
/// a run (a quarter of its first second: 6.25% of a 4 s window, a p95 of
/// 30 ms, but in one batch of four, so ambiguous against 95p <= 20 ms) and
/// whose later windows there have none; far below the knee nothing is slow, above it everything is.
struct Knee {
    knee: f64,
    seen: std::collections::HashMap<u64, usize>,
    windows: Vec<(f64, Duration)>,
}

impl load::Prober for Knee {
    async fn probe(
        &mut self,
        mode: Mode,
        warmup: Duration,
        duration: Duration,
    ) -> Result<RunResult, load::Error> {
        let rate = match mode {
            Mode::Open { rate, .. } | Mode::Capped { rate, .. } => rate,
            Mode::Closed { .. } => 2.0 * self.knee,
        };
        self.windows.push((rate, duration));
        let seen = self.seen.entry(rate.to_bits()).or_insert(0);
        *seen += 1;
        let secs = duration.as_secs().max(1) as usize;
        let n = rate.round() as u64;
        let near = rate <= self.knee && rate > 0.9 * self.knee;
        let per_second: Vec<(u64, u64)> = (0..secs)
            .map(|s| {
                let slow = if rate > self.knee && !matches!(mode, Mode::Closed { .. }) {
                    n
                } else if near && *seen == 1 && s == 0 {
                    n / 4
                } else {
                    0
                };
                (n, slow)
            })
            .collect();
        let mut r = result(&per_second);
        r.mode = mode;
        r.warmup = warmup;
        Ok(r)
    }
}

#[tokio::test]
async fn a_search_extends_only_the_probes_its_interval_cannot_judge() {
    let mut c = cfg(0.95);
    c.probe = Duration::from_secs(4);
    c.final_duration = Duration::from_secs(8);
    c.warmup = Duration::ZERO;
    c.max_extensions = 3;
    c.extended_finals = 1;
    let mut model = Knee {
        knee: 700.0,
        seen: Default::default(),
        windows: Vec::new(),
    };
    let mut on = |_: Event<'_>| {};
    let out = Search::new(c.clone(), &mut model, &mut on).run().await;
    assert!(out.success, "{:?}", out.failure);
    let f = out.final_probe.as_ref().unwrap();
    assert!(f.requested_qps <= 700.0 && f.requested_qps >= 700.0 / 1.02);
    for p in out.probes.iter().filter(|p| p.requested_qps > 0.0) {
        let i = p.interval.expect("judged probes carry their interval");
        let near = p.requested_qps <= 700.0 && p.requested_qps > 630.0;
        if !near {
            // All slow or none slow: judged at once.
            assert_eq!(p.extensions, 0, "{p:?}");
            assert!(!i.ambiguous());
        }
        if near && p.phase != Phase::Final {
            // The first window was ambiguous; windows without slow
            // replies settled it (one slow second among more and more
            // clean ones, until the interval's top is under 5%).
            assert!(p.extensions >= 1, "{p:?}");
            assert!(p.passed, "{}", p.verdict);
            assert!(p.verdict.contains("extended"), "{}", p.verdict);
            assert!(!i.ambiguous() || p.extensions == c.max_extensions);
        }
    }
    assert!(
        out.probes.iter().any(|p| p.extensions >= 1),
        "no probe near the knee was extended: {:?}",
        out.probes
    );
    // Without the interval (and without a borderline band) the same first
    // windows are judged alone: 6.25% slow is a p95 of 30 ms, a failure,
    // so the search settles lower (when the failure that bounds it is not
    // probed again: that repeat, a window without the slow second, would
    // undo it as well).
    let mut plain = c.clone();
    plain.confidence = 0.0;
    plain.confirm_failures = false;
    let mut model = Knee {
        knee: 700.0,
        seen: Default::default(),
        windows: Vec::new(),
    };
    let out2 = Search::new(plain, &mut model, &mut on).run().await;
    assert!(
        out2.probes
            .iter()
            .all(|p| p.extensions == 0 && p.interval.is_none())
    );
    let f2 = out2.final_probe.as_ref().unwrap();
    assert!(
        f2.requested_qps < f.requested_qps,
        "{} vs {}",
        f2.requested_qps,
        f.requested_qps
    );
}
