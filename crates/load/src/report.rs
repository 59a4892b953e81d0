//! FeedSim's progress lines, defined once for every workload that searches:
//! `Searching for QPS where 95p latency <= 500 msec`, one
//! `requested_qps = X, measured_qps = Y, latency = Z` line per probe, and
//! `final requested_qps = A, measured_qps = B, latency = C`; plus the
//! probe CSV, appended as each probe finishes.

use crate::csv::ProbeCsv;
use crate::search::{Event, Phase, ProbeRecord, SloTarget};
use std::io;

/// The line that opens a search.
pub fn searching_line(t: &SloTarget) -> String {
    format!(
        "Searching for QPS where {} latency <= {} msec",
        t.percentile.label(),
        t.latency_ms
    )
}

/// The line of one finished probe (with the reason when it failed).
pub fn probe_line(p: &ProbeRecord) -> String {
    format!(
        "requested_qps = {:.2}, measured_qps = {:.2}, latency = {:.3}{}",
        p.requested_qps,
        p.achieved_qps,
        p.target_value_ms,
        if p.passed {
            String::new()
        } else {
            format!("  ({})", p.verdict)
        }
    )
}

/// The line of the reported result.
pub fn final_line(p: &ProbeRecord) -> String {
    format!(
        "final requested_qps = {:.2}, measured_qps = {:.2}, latency = {:.3}",
        p.requested_qps, p.achieved_qps, p.target_value_ms
    )
}

/// What a search keeps with its stored run: the target, every probe in
/// order and the reported result (or why there is none). [`write_search`]
/// prints the search's lines from it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SearchRecord {
    pub target: SloTarget,
    pub probes: Vec<ProbeRecord>,
    /// The probe the result line reports.
    pub reported: Option<ProbeRecord>,
    /// Why the search ended without a result.
    pub failure: Option<String>,
}

/// The reported probe as the report's `final_*` metrics, shared by every
/// workload that searches (flattened into their metrics; rounded to
/// thousandths as upstream's lines print them).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FinalMetrics {
    pub final_requested_qps: f64,
    pub final_achieved_qps: f64,
    pub final_latency_msec: f64,
    pub final_latency: crate::LatencySummary,
}

impl FinalMetrics {
    pub fn of(p: &ProbeRecord) -> FinalMetrics {
        FinalMetrics {
            final_requested_qps: round3(p.requested_qps),
            final_achieved_qps: round3(p.achieved_qps),
            final_latency_msec: round3(p.target_value_ms),
            final_latency: p.latency,
        }
    }
}

/// Rounded to thousandths, as the report's figures are.
pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The line a search without a result ends with.
pub fn failure_line(why: &str) -> String {
    format!("search ended without a result: {why}")
}

/// A search's lines: [`searching_line`], a [`probe_line`] per probe, then
/// the [`final_line`] (or the [`failure_line`]).
pub fn write_search(r: &SearchRecord, out: &mut dyn io::Write) -> io::Result<()> {
    writeln!(out, "{}", searching_line(&r.target))?;
    for p in &r.probes {
        writeln!(out, "{}", probe_line(p))?;
    }
    if let Some(f) = &r.reported {
        writeln!(out, "{}", final_line(f))?;
    }
    if let Some(f) = &r.failure {
        writeln!(out, "{}", failure_line(f))?;
    }
    Ok(())
}

/// The progress message of a probe that starts: `bisect 12.50 QPS for 30s`,
/// `warm-up unthrottled for 10s more (not steady yet)`.
pub fn phase_line(
    phase: Phase,
    requested_qps: f64,
    duration: std::time::Duration,
    extension: usize,
) -> String {
    let rate = if requested_qps > 0.0 {
        format!("{requested_qps:.2} QPS")
    } else {
        "unthrottled".into()
    };
    let close = match (phase, extension) {
        (_, 0) => "",
        (Phase::Warmup, _) => " more (not steady yet)",
        _ => " more (a close call)",
    };
    format!(
        "{} {rate} for {:.0}s{close}",
        phase.label(),
        duration.as_secs_f64()
    )
}

/// Turns search events into lines, phase messages and CSV rows.
pub struct Reporter<'a> {
    csv: ProbeCsv,
    line: &'a dyn Fn(&str),
    /// The phase's line and how long the probe it starts runs: a progress
    /// display's estimate never ends before the probe does.
    phase: &'a dyn Fn(&str, std::time::Duration),
    /// The first error writing the CSV, if any (the search goes on).
    pub csv_error: Option<io::Error>,
}

impl<'a> Reporter<'a> {
    pub fn new(
        csv: ProbeCsv,
        line: &'a dyn Fn(&str),
        phase: &'a dyn Fn(&str, std::time::Duration),
    ) -> Self {
        Reporter {
            csv,
            line,
            phase,
            csv_error: None,
        }
    }

    pub fn handle(&mut self, e: Event<'_>) {
        match e {
            Event::Start {
                phase,
                requested_qps,
                duration,
                extension,
            } => (self.phase)(
                &phase_line(phase, requested_qps, duration, extension),
                duration,
            ),
            Event::Done(p) => {
                (self.line)(&probe_line(p));
                if let Err(e) = self.csv.append(p) {
                    self.csv_error.get_or_insert(e);
                }
            }
        }
    }

    /// Rows go to `csv` from now on (a rerun's own file).
    pub fn set_csv(&mut self, csv: ProbeCsv) {
        self.csv = csv;
    }

    /// Where the CSV is.
    pub fn csv_path(&self) -> &std::path::Path {
        self.csv.path()
    }
}
