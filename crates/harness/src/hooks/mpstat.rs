//! `cpu-mpstat`: per-CPU utilisation sampled from /proc/stat (what `mpstat -P
//! ALL 1` shows, without sysstat installed).
//!
//! Options: rackbench's `interval_secs`, or benchpress' `args`, the argv its
//! hook hands to `mpstat` (default `["-u", "1"]`: utilisation every second).
//! Of that argv only what this sampler does is accepted: `-u`, `-P ALL` and
//! one interval in whole seconds; anything else is refused by name.

use super::{Error, Hook, HookContext};
use crate::machine::{CpuTicks as Times, parse_proc_stat as parse_stat};
use crate::stats::round2;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub const OPTIONS: &[&str] = &["interval_secs", "args"];

/// The sampling interval the options ask for (1 s when neither is given).
pub(crate) fn interval(o: &Map<String, Value>) -> Result<Duration, String> {
    match (o.get("interval_secs"), o.get("args")) {
        (Some(_), Some(_)) => Err(
            "options 'interval_secs' and 'args' both given; use one (args is benchpress' mpstat argv, e.g. [\"-u\", \"1\"])"
                .into(),
        ),
        (Some(v), None) => {
            let bad = || {
                format!("option 'interval_secs' must be a positive finite number of seconds, got {v}")
            };
            let x = v.as_f64().ok_or_else(bad)?;
            if !x.is_finite() || x <= 0.0 {
                return Err(bad());
            }
            Duration::try_from_secs_f64(x).map_err(|_| bad())
        }
        (None, Some(v)) => interval_from_args(v),
        (None, None) => Ok(Duration::from_secs(1)),
    }
}

/// Maps benchpress' `args` (mpstat's argv) to the interval, refusing what the
/// sampler cannot do.
fn interval_from_args(v: &Value) -> Result<Duration, String> {
    let Value::Array(items) = v else {
        return Err(format!(
            "option 'args' must be a list of mpstat arguments such as [\"-u\", \"1\"], got {v}"
        ));
    };
    let mut args = Vec::new();
    for a in items {
        match a {
            Value::String(s) => args.push(s.clone()),
            Value::Number(n) => args.push(n.to_string()),
            other => {
                return Err(format!("option 'args' must hold strings, got {other}"));
            }
        }
    }
    let mut secs: Option<u64> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-u" => {}
            "-P" => match it.next().map(String::as_str) {
                Some(c) if c.eq_ignore_ascii_case("ALL") => {}
                Some(c) => {
                    return Err(format!(
                        "args: '-P {c}' is not supported: every CPU is always sampled (use '-P ALL' or leave it out)"
                    ));
                }
                None => return Err("args: '-P' needs a CPU list (only 'ALL' is supported)".into()),
            },
            s if s.starts_with('-') => {
                return Err(format!(
                    "args: '{s}' is not supported: the sampler records CPU utilisation only (accepted: -u, -P ALL, an interval in seconds)"
                ));
            }
            s if secs.is_none() => {
                let n: u64 = s.parse().map_err(|_| {
                    format!("args: interval '{s}' must be a whole number of seconds (as mpstat's)")
                })?;
                if n == 0 {
                    return Err("args: interval '0' (mpstat's since-boot report) is not supported; give the interval in seconds, e.g. [\"-u\", \"1\"]".into());
                }
                secs = Some(n);
            }
            s => {
                return Err(format!(
                    "args: count '{s}' is not supported: sampling runs for the whole job (give only the interval)"
                ));
            }
        }
    }
    match secs {
        Some(n) => Ok(Duration::from_secs(n)),
        None => Err(format!(
            "args {args:?} give no interval: mpstat would print one since-boot report; give the interval in seconds, e.g. [\"-u\", \"1\"]"
        )),
    }
}

/// Percentages between two samples: usr nice sys iowait irq soft steal guest idle.
pub fn percentages(a: &Times, b: &Times) -> [f64; 9] {
    let d: Vec<f64> = (0..10)
        .map(|i| b.0[i].saturating_sub(a.0[i]) as f64)
        .collect();
    // /proc/stat's user and nice include guest time; mpstat subtracts it.
    let usr = (d[0] - d[8]).max(0.0);
    let nice = (d[1] - d[9]).max(0.0);
    let total = usr + nice + d[2] + d[3] + d[4] + d[5] + d[6] + d[7] + d[8] + d[9];
    if total == 0.0 {
        return [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 100.0];
    }
    let p = |x: f64| x / total * 100.0;
    [
        p(usr),
        p(nice),
        p(d[2]),
        p(d[4]),
        p(d[5]),
        p(d[6]),
        p(d[7]),
        p(d[8] + d[9]),
        p(d[3]),
    ]
}

pub struct Mpstat {
    interval: Duration,
    stop: Arc<AtomicBool>,
    worker: Option<JoinHandle<Result<Value, String>>>,
}

impl Mpstat {
    pub(crate) fn new(o: &Map<String, Value>) -> Result<Self, String> {
        let interval = interval(o)?;
        Ok(Mpstat {
            interval,
            stop: Arc::new(AtomicBool::new(false)),
            worker: None,
        })
    }
}

const HEADER: &str = "timestamp,cpu,usr,nice,sys,iowait,irq,soft,steal,guest,idle";

fn sample_loop(
    path: std::path::PathBuf,
    interval: Duration,
    stop: Arc<AtomicBool>,
) -> Result<Value, String> {
    let mut f = std::fs::File::create(&path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    writeln!(f, "{HEADER}").map_err(|e| e.to_string())?;
    let read = || {
        std::fs::read_to_string("/proc/stat")
            .map(|t| parse_stat(&t))
            .map_err(|e| format!("/proc/stat: {e}"))
    };
    let mut prev = read()?;
    // Busy% sums per CPU for the summary.
    let mut busy: BTreeMap<String, (f64, f64, usize)> = BTreeMap::new();
    let mut all_usr = 0.0;
    let mut all_sys = 0.0;
    let mut all_iowait = 0.0;
    let mut max_busy: f64 = 0.0;
    let mut samples = 0usize;
    let mut last = std::time::Instant::now();
    loop {
        // Sleep in short steps so the hook stops promptly.
        while last.elapsed() < interval {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20).min(interval));
        }
        let stopping = stop.load(Ordering::Relaxed);
        let elapsed = last.elapsed();
        last = std::time::Instant::now();
        // A final partial interval shorter than 20% is noise; skip it.
        if stopping && elapsed < interval / 5 {
            break;
        }
        let cur = read()?;
        let ts = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        for (cpu, b) in &cur {
            let Some(a) = prev.get(cpu) else { continue };
            let p = percentages(a, b);
            writeln!(
                f,
                "{ts:.3},{cpu},{:.2},{:.2},{:.2},{:.2},{:.2},{:.2},{:.2},{:.2},{:.2}",
                p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8]
            )
            .map_err(|e| e.to_string())?;
            let b = 100.0 - p[8];
            let e = busy.entry(cpu.clone()).or_insert((0.0, 0.0, 0));
            e.0 += b;
            e.1 = e.1.max(b);
            e.2 += 1;
            if cpu == "all" {
                all_usr += p[0];
                all_sys += p[2];
                all_iowait += p[3];
                max_busy = max_busy.max(b);
                samples += 1;
            }
        }
        prev = cur;
        if stopping {
            break;
        }
    }
    f.flush().map_err(|e| e.to_string())?;
    let n = samples.max(1) as f64;
    let per_cpu: Map<String, Value> = busy
        .iter()
        .filter(|(k, _)| *k != "all")
        .map(|(k, (sum, _, c))| (k.clone(), json!(round2(sum / (*c).max(1) as f64))))
        .collect();
    Ok(json!({
        "csv": path.file_name().map(|n| n.to_string_lossy().to_string()),
        "interval_secs": interval.as_secs_f64(),
        "samples": samples,
        "avg_busy_pct": round2(busy.get("all").map(|b| b.0 / n).unwrap_or(0.0)),
        "max_busy_pct": round2(max_busy),
        "avg_usr_pct": round2(all_usr / n),
        "avg_sys_pct": round2(all_sys / n),
        "avg_iowait_pct": round2(all_iowait / n),
        "per_cpu_avg_busy_pct": per_cpu,
    }))
}

impl Hook for Mpstat {
    fn before(&mut self, ctx: &HookContext) -> Result<(), Error> {
        let path = ctx
            .out_dir
            .join(format!("{}_cpu_mpstat_iter_{}.csv", ctx.job, ctx.iteration));
        let (interval, stop) = (self.interval, self.stop.clone());
        self.worker = Some(std::thread::spawn(move || {
            sample_loop(path, interval, stop)
        }));
        Ok(())
    }

    fn after(&mut self, _ctx: &HookContext) -> Result<Value, Error> {
        self.stop.store(true, Ordering::Relaxed);
        match self.worker.take() {
            Some(h) => h
                .join()
                .map_err(|_| Error::Host("sampler thread panicked".into()))?
                .map_err(Error::Host),
            None => Err(Error::Host("not started".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_like_mpstat() {
        let a = parse_stat("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 100 0 50 800 50 0 0 0 0 0\n");
        let b = parse_stat("cpu  160 0 70 900 70 0 0 0 0 0\ncpu0 160 0 70 900 70 0 0 0 0 0\n");
        let p = percentages(&a["all"], &b["all"]);
        // deltas: usr 60, sys 20, idle 100, iowait 20 of 200.
        assert_eq!(p[0], 30.0);
        assert_eq!(p[2], 10.0);
        assert_eq!(p[3], 10.0);
        assert_eq!(p[8], 50.0);
        assert!(a.contains_key("cpu0"));
    }

    fn opts(j: &str) -> Map<String, Value> {
        serde_json::from_str(j).unwrap()
    }

    #[test]
    fn interval_from_our_option_and_benchpress_args() {
        assert_eq!(interval(&opts("{}")).unwrap(), Duration::from_secs(1));
        assert_eq!(
            interval(&opts(r#"{"interval_secs": 0.5}"#)).unwrap(),
            Duration::from_millis(500)
        );
        assert_eq!(
            interval(&opts(r#"{"args": ["-u", "1"]}"#)).unwrap(),
            Duration::from_secs(1)
        );
        assert_eq!(
            interval(&opts(r#"{"args": ["-P", "ALL", "-u", "5"]}"#)).unwrap(),
            Duration::from_secs(5)
        );
        assert_eq!(
            interval(&opts(r#"{"args": ["3"]}"#)).unwrap(),
            Duration::from_secs(3)
        );
    }

    #[test]
    fn args_it_cannot_honour_are_refused_by_name() {
        let cases = [
            (r#"{"args": ["-u", "1", "10"]}"#, "count '10'"),
            (r#"{"args": ["-A", "1"]}"#, "'-A'"),
            (r#"{"args": ["-I", "SUM", "1"]}"#, "'-I'"),
            (r#"{"args": ["-P", "0,1", "1"]}"#, "'-P 0,1'"),
            (r#"{"args": ["-u"]}"#, "no interval"),
            (r#"{"args": []}"#, "no interval"),
            (r#"{"args": ["-u", "0"]}"#, "interval '0'"),
            (r#"{"args": ["-u", "0.5"]}"#, "interval '0.5'"),
            (r#"{"args": "-u 1"}"#, "option 'args' must be a list"),
            (r#"{"args": [true]}"#, "must hold strings"),
        ];
        for (j, want) in cases {
            let e = interval(&opts(j)).unwrap_err();
            assert!(e.contains(want), "{j}: {e}");
        }
    }

    #[test]
    fn both_forms_at_once_are_refused() {
        let e = interval(&opts(r#"{"args": ["-u", "1"], "interval_secs": 1}"#)).unwrap_err();
        assert!(e.contains("interval_secs") && e.contains("args"), "{e}");
    }

    #[test]
    fn bad_interval_secs_is_refused() {
        for j in [
            r#"{"interval_secs": 0}"#,
            r#"{"interval_secs": -1}"#,
            r#"{"interval_secs": "1"}"#,
            r#"{"interval_secs": null}"#,
            r#"{"interval_secs": 1e300}"#,
        ] {
            let e = interval(&opts(j)).unwrap_err();
            assert!(e.contains("option 'interval_secs'"), "{j}: {e}");
        }
        // TOML can spell inf and nan; they arrive as non-numbers or
        // non-finite floats and are refused either way.
        let t: toml::Table = toml::from_str("interval_secs = inf").unwrap();
        let m: Map<String, Value> = serde_json::to_value(t)
            .ok()
            .and_then(|v| v.as_object().cloned())
            .unwrap_or_default();
        assert!(interval(&m).is_err(), "{m:?}");
    }

    #[test]
    fn samples_this_machine_into_a_csv() {
        let d = tempfile::tempdir().unwrap();
        let mut h =
            Mpstat::new(&serde_json::from_str(r#"{"interval_secs": 0.1}"#).unwrap()).unwrap();
        let ctx = HookContext {
            out_dir: d.path().into(),
            job: "j".into(),
            iteration: 1,
        };
        h.before(&ctx).unwrap();
        // Keep one CPU busy so the summary is not all idle.
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < Duration::from_millis(450) {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        std::hint::black_box(x);
        let s = h.after(&ctx).unwrap();
        assert!(s["samples"].as_u64().unwrap() >= 3, "{s}");
        assert!(s["avg_busy_pct"].as_f64().unwrap() > 5.0, "{s}");
        let csv = std::fs::read_to_string(d.path().join("j_cpu_mpstat_iter_1.csv")).unwrap();
        assert!(csv.starts_with(HEADER));
        assert!(csv.lines().count() > 3);
    }
}
