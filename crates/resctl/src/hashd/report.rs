//! hashd's report file (rewritten atomically every second, rd-hashd's
//! report.json layout) and its status line every interval:
//! `p50:  9.9 p84: 12.1 p90: 13.0 p99: 16.2 rps: 1000.0 con: 12.0`
//! (latencies in ms, averaged over the interval; con is the current
//! concurrency).

use super::engine::Stat;
use super::params::write_atomic;
use crate::clock::Local;
use serde::Serialize;
use std::path::Path;

/// What phase hashd is in (upstream's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Phase {
    Prep,
    Running,
    BenchCpuSinglePrep,
    BenchCpuSingle,
    BenchCpuSaturationPrep,
    BenchCpuSaturation,
    BenchMemPrep,
    BenchMemUp,
    BenchMemBisect,
    BenchMemRefine,
}

impl Phase {
    /// Upstream's short name.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Prep => "prep",
            Phase::Running => "run",
            Phase::BenchCpuSinglePrep => "1cpu-prep",
            Phase::BenchCpuSingle => "1cpu",
            Phase::BenchCpuSaturationPrep => "cpu-prep",
            Phase::BenchCpuSaturation => "cpu",
            Phase::BenchMemPrep => "mem-prep",
            Phase::BenchMemUp => "mem-up",
            Phase::BenchMemBisect => "mem-bisect",
            Phase::BenchMemRefine => "mem-refine",
        }
    }
}

/// The report file.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub timestamp: String,
    pub phase: Phase,
    pub rotational: bool,
    pub rotational_testfiles: bool,
    pub rotational_swap: bool,
    pub testfiles_progress: f64,
    pub params_modified: String,
    pub mem_probe_size: u64,
    pub mem_probe_at: String,
    #[serde(flatten)]
    pub stat: Stat,
    /// Access distributions (`acc_dist_slots`; not collected: empty).
    pub file_dist: Vec<u64>,
    pub anon_dist: Vec<u64>,
}

impl Report {
    pub fn new(phase: Phase, stat: Stat) -> Report {
        Report {
            timestamp: Local::now().rfc3339(),
            phase,
            rotational: false,
            rotational_testfiles: false,
            rotational_swap: false,
            testfiles_progress: 1.0,
            params_modified: String::new(),
            mem_probe_size: 0,
            mem_probe_at: String::new(),
            stat,
            file_dist: Vec::new(),
            anon_dist: Vec::new(),
        }
    }

    /// Writes the report atomically.
    pub fn save(&self, path: &Path) -> Result<(), crate::Error> {
        let mut text = serde_json::to_string_pretty(self).expect("serializable");
        text.push('\n');
        write_atomic(path, text.as_bytes())
    }
}

/// Averages per-period stats into interval status lines.
#[derive(Debug, Default)]
pub struct Status {
    sum: [f64; 5],
    n: u32,
}

impl Status {
    pub fn add(&mut self, s: &Stat) {
        for (acc, v) in self
            .sum
            .iter_mut()
            .zip([s.lat.p50, s.lat.p84, s.lat.p90, s.lat.p99, s.rps])
        {
            *acc += v;
        }
        self.n += 1;
    }

    /// The line for the interval so far (and starts a new one).
    pub fn line(&mut self, current: &Stat) -> String {
        let n = f64::from(self.n.max(1));
        let [p50, p84, p90, p99, rps] = self.sum.map(|v| v / n);
        *self = Status::default();
        format!(
            "p50:{:5.1} p84:{:5.1} p90:{:5.1} p99:{:5.1} rps:{:6.1} con:{:5.1}",
            p50 * 1000.0,
            p84 * 1000.0,
            p90 * 1000.0,
            p99 * 1000.0,
            rps,
            current.concurrency
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_line_averages_the_interval() {
        let mut st = Status::default();
        let mut s = Stat::default();
        s.lat.p50 = 0.010;
        s.lat.p99 = 0.050;
        s.rps = 100.0;
        st.add(&s);
        s.lat.p50 = 0.020;
        s.rps = 200.0;
        s.concurrency = 7.25;
        st.add(&s);
        assert_eq!(
            st.line(&s),
            "p50: 15.0 p84:  0.0 p90:  0.0 p99: 50.0 rps: 150.0 con:  7.2"
        );
    }

    #[test]
    fn report_has_the_flattened_stat() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("report.json");
        let s = Stat {
            rps: 12.5,
            ..Stat::default()
        };
        Report::new(Phase::Running, s).save(&p).unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        assert_eq!(v["phase"], "Running");
        assert_eq!(v["rps"], 12.5);
        assert!(v["lat"]["p99_999"].is_number());
        assert!(v["timestamp"].as_str().unwrap().contains('T'));
    }
}
