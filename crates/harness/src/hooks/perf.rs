//! `perf`: system-wide `perf stat` counters over the whole job, and
//! benchpress' sampling monitors that read /proc and /sys (mpstat,
//! memstat, netstat, cpufreq_scaling, cpufreq_cpuinfo: see
//! [`super::monitors`]), each under its benchpress option name; upstream's
//! `topdown` options are checked and the monitor listed as not collected.
//!
//! Before the job the hook checks each requested event with a short `perf
//! stat`; events the host cannot count (no hardware PMU in most VMs) are
//! dropped and listed. When perf is missing, not permitted, or nothing is
//! countable, the job still runs and the report says the counters were
//! unavailable and why.

use super::{Error, Hook, HookContext, strings};
use serde_json::{Map, Value, json};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

pub const OPTIONS: &[&str] = &[
    "events",
    "mpstat",
    "topdown",
    "memstat",
    "netstat",
    "cpufreq_scaling",
    "cpufreq_cpuinfo",
];

const DEFAULT_EVENTS: &[&str] = &[
    "cycles",
    "instructions",
    "cache-misses",
    "branch-misses",
    "task-clock",
    "context-switches",
    "cpu-migrations",
    "page-faults",
];

pub struct Perf {
    events: Vec<String>,
    unsupported: Vec<String>,
    unavailable: Option<String>,
    child: Option<Child>,
    output: Option<PathBuf>,
    monitors: Vec<super::monitors::Spec>,
    running: Option<super::monitors::Running>,
}

impl Perf {
    pub(crate) fn new(o: &Map<String, Value>) -> Result<Self, String> {
        let mut events = strings(o, "events")?;
        if events.is_empty() {
            events = DEFAULT_EVENTS.iter().map(|s| s.to_string()).collect();
        }
        Ok(Perf {
            events,
            unsupported: Vec::new(),
            unavailable: None,
            child: None,
            output: None,
            monitors: super::monitors::specs(o)?,
            running: None,
        })
    }
}

/// Parses `perf stat -x,` output: `value,unit,event,...` per line.
pub fn parse_csv(text: &str) -> (Map<String, Value>, Vec<String>) {
    let mut values = Map::new();
    let mut unsupported = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let cols: Vec<&str> = line.split(',').collect();
        if cols.len() < 3 {
            continue;
        }
        let event = cols[2].split(':').next().unwrap_or(cols[2]).to_string();
        if cols[0].starts_with('<') {
            unsupported.push(event);
        } else if let Ok(v) = cols[0].parse::<f64>() {
            values.insert(event, json!(v));
        }
    }
    (values, unsupported)
}

/// Which of `events` this host can count, and why perf cannot run at all.
fn probe(events: &[String]) -> Result<(Vec<String>, Vec<String>), String> {
    let out = Command::new("perf")
        .args(["stat", "-x,", "-e", &events.join(","), "--", "true"])
        .output()
        .map_err(|e| format!("perf is not installed or cannot run ({e})"))?;
    let text = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        let first = text
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("unknown error");
        return Err(format!("perf stat failed: {}", first.trim()));
    }
    let (values, unsupported) = parse_csv(&text);
    let ok: Vec<String> = events
        .iter()
        .filter(|e| values.contains_key(*e))
        .cloned()
        .collect();
    Ok((ok, unsupported))
}

impl Hook for Perf {
    fn before(&mut self, ctx: &HookContext) -> Result<(), Error> {
        self.running = Some(super::monitors::start(&self.monitors));
        match probe(&self.events) {
            Err(why) => self.unavailable = Some(why),
            Ok((ok, unsupported)) => {
                self.unsupported = unsupported;
                if ok.is_empty() {
                    self.unavailable = Some(format!(
                        "none of the events {} is supported on this host",
                        self.events.join(",")
                    ));
                    return Ok(());
                }
                let out = ctx
                    .out_dir
                    .join(format!("{}_perf_stat_iter_{}.csv", ctx.job, ctx.iteration));
                let child = Command::new("perf")
                    .args(["stat", "-a", "-x,", "-e", &ok.join(","), "-o"])
                    .arg(&out)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn();
                match child {
                    Ok(c) => {
                        self.child = Some(c);
                        self.output = Some(out);
                        self.events = ok;
                    }
                    Err(e) => self.unavailable = Some(format!("cannot start perf: {e}")),
                }
            }
        }
        Ok(())
    }

    fn after(&mut self, ctx: &HookContext) -> Result<Value, Error> {
        let monitors = self
            .running
            .take()
            .map(|r| r.finish(&ctx.out_dir))
            .unwrap_or(Value::Null);
        if let Some(why) = &self.unavailable {
            return Ok(json!({
                "available": false,
                "reason": why,
                "unsupported_events": self.unsupported,
                "monitors": monitors,
            }));
        }
        let Some(mut child) = self.child.take() else {
            return Ok(
                json!({ "available": false, "reason": "not started", "monitors": monitors }),
            );
        };
        // perf stat prints its counts when interrupted.
        // SAFETY: signalling our own child by pid.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
        let _ = child.wait();
        let path = self.output.clone().unwrap_or_default();
        let text = std::fs::read_to_string(&path)
            .map_err(|e| Error::Host(format!("cannot read {}: {e}", path.display())))?;
        let (values, more_unsupported) = parse_csv(&text);
        let mut unsupported = self.unsupported.clone();
        unsupported.extend(more_unsupported);
        Ok(json!({
            "available": true,
            "counters": values,
            "unsupported_events": unsupported,
            "csv": path.file_name().map(|n| n.to_string_lossy().to_string()),
            "monitors": monitors,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_perf_csv_with_unsupported_events() {
        let text = "# started on x\n\n<not supported>,,cycles,0,100.00,,\n1234.5,msec,task-clock,1234,100.00,2.0,CPUs utilized\n42,,context-switches:u,1234,100.00,,\n";
        let (v, u) = parse_csv(text);
        assert_eq!(u, vec!["cycles"]);
        assert_eq!(v["task-clock"], 1234.5);
        assert_eq!(v["context-switches"], 42.0);
    }

    #[test]
    fn runs_or_says_why_not() {
        let d = tempfile::tempdir().unwrap();
        let ctx = HookContext {
            out_dir: d.path().into(),
            job: "j".into(),
            iteration: 1,
        };
        let mut h = Perf::new(&Map::new()).unwrap();
        h.before(&ctx).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        let s = h.after(&ctx).unwrap();
        if s["available"] == json!(true) {
            assert!(!s["counters"].as_object().unwrap().is_empty(), "{s}");
        } else {
            assert!(!s["reason"].as_str().unwrap().is_empty(), "{s}");
        }
    }
}
