//! Test fixtures shared by the crate's unit tests: probes, search
//! outcomes, leaf statuses and instance records.

use crate::cli::Threads;
use crate::record::{InstanceRecord, LeafStatus, StepCpuSeconds};
use load::recorder::SecondSummary;
use load::search::{Phase, SearchOutcome};
use load::{LatencySummary, Percentile, ProbeRecord, SloTarget};

pub(crate) fn probe(
    phase: Phase,
    requested: f64,
    achieved: f64,
    p95: f64,
    passed: bool,
) -> ProbeRecord {
    ProbeRecord {
        seq: 0,
        phase,
        mode: "open:constant".into(),
        requested_qps: requested,
        duration_secs: 10.0,
        total_queries: (achieved * 10.0) as u64,
        scheduled: (requested * 10.0) as u64,
        errors: 0,
        dropped: 0,
        unfinished: 0,
        achieved_qps: achieved,
        total_bytes_rx: 1000,
        total_bytes_tx: 3000,
        latency: LatencySummary {
            count: 10,
            p95_ms: p95,
            ..LatencySummary::default()
        },
        target_value_ms: p95,
        passed,
        verdict: if passed {
            "ok".into()
        } else {
            "too slow".into()
        },
        extensions: 0,
        settle_secs: 0.0,
        start_unix_ms: 1,
        end_unix_ms: 2,
        interval: None,
        from_send_ms: None,
    }
}

pub(crate) fn outcome(final_probe: Option<ProbeRecord>, interrupted: bool) -> SearchOutcome {
    let mut probes = vec![probe(Phase::Peak, 0.0, 20.0, 900.0, true)];
    probes.extend(final_probe.clone());
    SearchOutcome {
        probes,
        success: final_probe.is_some(),
        final_series: vec![SecondSummary {
            second: 1,
            completed: 12,
            errors: 0,
            p50_ms: 100.0,
            p99_ms: 400.0,
            max_ms: 450.0,
        }],
        final_probe,
        peak_qps: 20.12345,
        interrupted,
        failure: None,
    }
}

pub(crate) fn status(requests: u64, cpu: f64, ranking: f64) -> LeafStatus {
    LeafStatus {
        ready: true,
        rss_bytes: 300 << 20,
        cpu_seconds: cpu,
        requests,
        build_seconds: 4.5,
        serving_threads: 2,
        dataset_bytes: 200 << 20,
        steps: vec![StepCpuSeconds {
            step: "ranking".into(),
            cpu_seconds: ranking,
        }],
        in_flight: 0,
        skipped_tasks: 3,
        anon_huge_bytes: 1 << 21,
        thp_mode: "madvise".into(),
        huge_pages_advised: true,
        serving_model: "blocking".into(),
    }
}

pub(crate) fn instance(final_probe: Option<ProbeRecord>) -> InstanceRecord {
    InstanceRecord {
        outcome: outcome(final_probe, false),
        rerun: None,
        status_before: Some(status(10, 1.0, 0.5)),
        status_after: Some(status(110, 11.0, 6.5)),
        driver_cpu_seconds: 0.5,
        csv: "/tmp/feedsim_results.txt".into(),
        csv_error: None,
        leaf_log: None,
    }
}

pub(crate) const THREADS: Threads = Threads {
    serving: 2,
    ranking: 1,
    ser: 1,
};

pub(crate) fn target() -> SloTarget {
    SloTarget {
        percentile: Percentile::P95,
        latency_ms: 500.0,
    }
}
