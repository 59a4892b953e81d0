//! The sampling monitors of benchpress' `perf` hook that read /proc and
//! /sys: `mpstat` (mpstat.csv: the `all` line of `mpstat -u`, computed from
//! /proc/stat as mpstat computes it), `memstat` (mem-stat.csv), `netstat`
//! (net-stat.csv), `cpufreq_scaling` and `cpufreq_cpuinfo` (their .csv).
//! Each samples every `interval` seconds (5 by default, as benchpress) on
//! its own thread and writes its CSV into the metrics folder after the job,
//! in benchpress' layout: `index,timestamp,<sorted columns>` then one row
//! per sample, each value followed by a comma, the time as `%I:%M:%S %p`. A
//! monitor the host cannot serve (no cpufreq in most VMs) is listed with
//! the reason, as benchpress logs it. `topdown` takes upstream's options
//! (`is_zen4`, `mux_interval_msecs`, `perfspect_path`, `interval`) and is
//! always listed as not collected, with why: upstream runs vendor tools
//! (Intel PerfSpect, AMD and ARM topdown scripts) that rackbench does not
//! run. `perfstat` and `power` are not here: this hook's `perf stat`
//! totals cover the first.

use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// benchpress' names of the monitors kept here.
pub const NAMES: &[&str] = &[
    "mpstat",
    "memstat",
    "netstat",
    "cpufreq_scaling",
    "cpufreq_cpuinfo",
];
/// Its monitors that are not.
pub const NOT_HERE: &[&str] = &["perfstat", "power"];

/// The options of upstream's `topdown` monitor (its Intel, AMD and ARM
/// variants together).
pub const TOPDOWN_OPTIONS: &[&str] = &[
    "is_zen4",
    "mux_interval_msecs",
    "perfspect_path",
    "interval",
];

/// Why `topdown` is not collected here.
pub const TOPDOWN_NOT_COLLECTED: &str = "not collected: upstream's topdown monitor runs vendor tools (Intel PerfSpect, AMD's and ARM's topdown scripts over perf) that rackbench does not run; this hook's perf stat totals are its counters";

/// Checks the `topdown` options as upstream's monitors take them.
pub(crate) fn topdown_options(o: &Map<String, Value>) -> Result<(), String> {
    let opts = match o.get("topdown") {
        None => return Ok(()),
        Some(Value::Object(m)) => m,
        Some(v) => return Err(format!("option 'topdown' must be an object, got {v}")),
    };
    for (k, v) in opts {
        let ok = match k.as_str() {
            "is_zen4" => v.is_boolean(),
            "mux_interval_msecs" | "interval" => v.as_f64().is_some_and(|x| x > 0.0),
            "perfspect_path" => v.is_string(),
            _ => {
                return Err(format!(
                    "option 'topdown' has no key '{k}'; it takes {}",
                    TOPDOWN_OPTIONS.join(", ")
                ));
            }
        };
        if !ok {
            return Err(format!(
                "topdown: '{k}' must be {}, got {v}",
                match k.as_str() {
                    "is_zen4" => "true or false",
                    "perfspect_path" => "a path",
                    _ => "a positive number",
                }
            ));
        }
    }
    Ok(())
}

/// One sample: column to value (already formatted as benchpress prints it).
type Row = (String, BTreeMap<String, String>);

/// What a monitor reads, and its option keys beyond `interval`.
#[derive(Debug, Clone)]
enum Kind {
    Cpu,
    Mem(Vec<String>),
    Net(Vec<String>),
    Freq(&'static str),
}

/// A monitor's settings.
#[derive(Debug, Clone)]
pub struct Spec {
    name: &'static str,
    file: &'static str,
    interval: Duration,
    kind: Kind,
}

/// Python's `str(float)`: a whole number keeps `.0`.
fn py_float(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e16 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}

fn now_stamp() -> String {
    jiff::ZonedDateTime::now()
        .strftime("%I:%M:%S %p")
        .to_string()
}

fn number(o: &Map<String, Value>, key: &str, default: f64) -> Result<f64, String> {
    match o.get(key) {
        None => Ok(default),
        Some(v) => v
            .as_f64()
            .filter(|x| x.is_finite() && *x > 0.0)
            .ok_or_else(|| format!("'{key}' must be a positive number of seconds, got {v}")),
    }
}

fn names(o: &Map<String, Value>, key: &str) -> Result<Vec<String>, String> {
    super::strings(o, key)
}

/// The monitors and their settings from the hook's options: each of
/// [`NAMES`] runs with its defaults unless its options say otherwise.
pub(crate) fn specs(o: &Map<String, Value>) -> Result<Vec<Spec>, String> {
    topdown_options(o)?;
    let mut out = Vec::new();
    for &name in NAMES {
        let opts = match o.get(name) {
            None => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(v) => return Err(format!("option '{name}' must be an object, got {v}")),
        };
        let extra_key = match name {
            "memstat" | "netstat" => Some("additional_counters"),
            _ => None,
        };
        if let Some(k) = opts
            .keys()
            .find(|k| k.as_str() != "interval" && Some(k.as_str()) != extra_key)
        {
            return Err(format!(
                "option '{name}' has no key '{k}'; it takes interval{}",
                extra_key.map(|e| format!(" and {e}")).unwrap_or_default()
            ));
        }
        let interval = number(&opts, "interval", 5.0).map_err(|e| format!("{name}: {e}"))?;
        let (file, kind) = match name {
            "mpstat" => ("mpstat.csv", Kind::Cpu),
            "memstat" => (
                "mem-stat.csv",
                Kind::Mem(names(&opts, "additional_counters")?),
            ),
            "netstat" => (
                "net-stat.csv",
                Kind::Net(names(&opts, "additional_counters")?),
            ),
            "cpufreq_scaling" => ("cpufreq_scaling.csv", Kind::Freq("scaling_cur_freq")),
            _ => ("cpufreq_cpuinfo.csv", Kind::Freq("cpuinfo_cur_freq")),
        };
        out.push(Spec {
            name,
            file,
            interval: Duration::from_secs_f64(interval),
            kind,
        });
    }
    Ok(out)
}

/// /proc/meminfo in bytes (kB multiplied, as benchpress).
fn meminfo_bytes() -> BTreeMap<String, u64> {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let mut c = l.split_whitespace();
            let key = c.next()?.trim_end_matches(':').to_string();
            let v: u64 = c.next()?.parse().ok()?;
            let mult = match c.next().map(str::to_uppercase).as_deref() {
                Some("KB") => 1 << 10,
                Some("MB") => 1 << 20,
                Some("GB") => 1 << 30,
                Some("TB") => 1 << 40,
                _ => 1,
            };
            Some((key, v * mult))
        })
        .collect()
}

/// The `cpu` line of /proc/stat: user, nice, system, idle, iowait, irq,
/// softirq, steal, guest, guest_nice (clock ticks).
fn cpu_ticks() -> Option<[u64; 10]> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let mut out = [0u64; 10];
    for (slot, v) in out.iter_mut().zip(line.split_whitespace().skip(1)) {
        *slot = v.parse().ok()?;
    }
    Some(out)
}

/// One `mpstat -u` line for all CPUs between two readings, as mpstat
/// computes it: guest time is inside user (and guest_nice inside nice), so
/// %usr and %nice leave it out and the total counts it once; percentages
/// rounded to mpstat's two decimals.
fn mpstat_row(a: &[u64; 10], b: &[u64; 10]) -> BTreeMap<String, String> {
    let d: Vec<f64> = a
        .iter()
        .zip(b)
        .map(|(x, y)| y.saturating_sub(*x) as f64)
        .collect();
    let total: f64 = d[..8].iter().sum();
    let pct = |v: f64| {
        let p = if total > 0.0 { v / total * 100.0 } else { 0.0 };
        py_float((p.max(0.0) * 100.0).round() / 100.0)
    };
    BTreeMap::from([
        ("%usr".to_string(), pct(d[0] - d[8])),
        ("%nice".to_string(), pct(d[1] - d[9])),
        ("%sys".to_string(), pct(d[2])),
        ("%iowait".to_string(), pct(d[4])),
        ("%irq".to_string(), pct(d[5])),
        ("%soft".to_string(), pct(d[6])),
        ("%steal".to_string(), pct(d[7])),
        ("%guest".to_string(), pct(d[8])),
        ("%gnice".to_string(), pct(d[9])),
        ("%idle".to_string(), pct(d[3])),
    ])
}

fn net_counters(counters: &[String]) -> BTreeMap<(String, String), f64> {
    let mut out = BTreeMap::new();
    let ifs = std::fs::read_dir("/sys/class/net")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    for netif in ifs {
        for c in counters {
            let p = format!("/sys/class/net/{netif}/statistics/{c}");
            if let Some(v) = std::fs::read_to_string(p)
                .ok()
                .and_then(|t| t.trim().parse::<f64>().ok())
            {
                out.insert((netif.clone(), c.clone()), v);
            }
        }
    }
    out
}

/// The CPUs this process may run on, and whether `file` exists for the first.
fn freq_cpus(file: &str) -> Result<Vec<usize>, String> {
    let cpus = crate::machine::usable_cpu_list();
    let first = cpus.first().copied().unwrap_or(0);
    let p = format!("/sys/devices/system/cpu/cpu{first}/cpufreq/{file}");
    if Path::new(&p).exists() {
        Ok(cpus)
    } else {
        Err(format!(
            "{p} is not found, therefore the CPU frequency cannot be monitored"
        ))
    }
}

fn sample_loop(spec: Spec, stop: Receiver<()>) -> Vec<Row> {
    let mut rows = Vec::new();
    // Sleeps `d`, false when told to stop.
    let wait = |d: Duration| matches!(stop.recv_timeout(d), Err(RecvTimeoutError::Timeout));
    match &spec.kind {
        Kind::Cpu => {
            // As `mpstat -u N`: the first line after one interval.
            let mut last = cpu_ticks();
            while wait(spec.interval) {
                let now = cpu_ticks();
                if let (Some(a), Some(b)) = (&last, &now) {
                    rows.push((now_stamp(), mpstat_row(a, b)));
                }
                last = now;
            }
        }
        Kind::Mem(extra) => {
            let mut counters: Vec<String> = [
                "MemTotal",
                "MemFree",
                "MemAvailable",
                "SwapTotal",
                "SwapFree",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            counters.extend(extra.iter().cloned());
            loop {
                let m = meminfo_bytes();
                let row = counters
                    .iter()
                    .filter_map(|c| m.get(c).map(|v| (c.clone(), v.to_string())))
                    .collect();
                rows.push((now_stamp(), row));
                if !wait(spec.interval) {
                    break;
                }
            }
        }
        Kind::Net(extra) => {
            let mut counters: Vec<String> = ["rx_bytes", "rx_packets", "tx_bytes", "tx_packets"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            counters.extend(extra.iter().cloned());
            let mut last = (Instant::now(), net_counters(&counters));
            while wait(spec.interval) {
                let now = (Instant::now(), net_counters(&counters));
                let secs = now.0.duration_since(last.0).as_secs_f64();
                let row = now
                    .1
                    .iter()
                    .filter_map(|((netif, c), v)| {
                        let before = last.1.get(&(netif.clone(), c.clone()))?;
                        let rate = ((v - before) / secs * 1000.0).round() / 1000.0;
                        Some((format!("{netif}_{c}_per_sec"), py_float(rate)))
                    })
                    .collect();
                rows.push((now_stamp(), row));
                last = now;
            }
        }
        Kind::Freq(file) => {
            let cpus = crate::machine::usable_cpu_list();
            loop {
                let freqs: Vec<f64> = cpus
                    .iter()
                    .filter_map(|c| {
                        std::fs::read_to_string(format!(
                            "/sys/devices/system/cpu/cpu{c}/cpufreq/{file}"
                        ))
                        .ok()?
                        .trim()
                        .parse()
                        .ok()
                    })
                    .collect();
                if !freqs.is_empty() {
                    let mhz = freqs.iter().sum::<f64>() / freqs.len() as f64 / 1000.0;
                    rows.push((
                        now_stamp(),
                        BTreeMap::from([("cpufreq_mhz".to_string(), py_float(mhz))]),
                    ));
                }
                if !wait(spec.interval) {
                    break;
                }
            }
        }
    }
    rows
}

/// benchpress' CSV of a monitor's samples (empty: no file, as benchpress).
pub fn csv(rows: &[Row]) -> String {
    let Some((_, first)) = rows.first() else {
        return String::new();
    };
    let headers: Vec<&String> = first.keys().collect();
    let mut out = format!(
        "index,timestamp,{}\n",
        headers
            .iter()
            .map(|h| h.as_str())
            .collect::<Vec<_>>()
            .join(",")
    );
    for (i, (stamp, row)) in rows.iter().enumerate() {
        out.push_str(&format!("{i},{stamp},"));
        for h in &headers {
            out.push_str(row.get(*h).map(String::as_str).unwrap_or(""));
            out.push(',');
        }
        out.push('\n');
    }
    out
}

/// The running monitors.
pub struct Running {
    threads: Vec<(Spec, Sender<()>, JoinHandle<Vec<Row>>)>,
    unsupported: Map<String, Value>,
}

/// Starts the monitors of `specs`.
pub fn start(specs: &[Spec]) -> Running {
    let mut threads = Vec::new();
    let mut unsupported = Map::new();
    unsupported.insert("topdown".into(), json!(TOPDOWN_NOT_COLLECTED));
    for s in specs {
        if let Kind::Freq(file) = s.kind
            && let Err(why) = freq_cpus(file)
        {
            unsupported.insert(s.name.into(), json!(why));
            continue;
        }
        let (tx, rx) = channel();
        let spec = s.clone();
        match std::thread::Builder::new()
            .name(format!("perf-{}", s.name))
            .spawn(move || sample_loop(spec, rx))
        {
            Ok(h) => threads.push((s.clone(), tx, h)),
            Err(e) => {
                unsupported.insert(s.name.into(), json!(format!("cannot start: {e}")));
            }
        }
    }
    Running {
        threads,
        unsupported,
    }
}

impl Running {
    /// Stops the monitors, writes their CSVs into `dir`, and sums them up.
    pub fn finish(self, dir: &Path) -> Value {
        let mut ran = Map::new();
        for (spec, tx, h) in self.threads {
            let _ = tx.send(());
            let rows = h.join().unwrap_or_default();
            let text = csv(&rows);
            let file: Option<PathBuf> = (!text.is_empty()).then(|| dir.join(spec.file));
            let written = match &file {
                Some(f) => crate::fsutil::write_atomic(f, text.as_bytes())
                    .map(|()| json!(spec.file))
                    .unwrap_or_else(|e| json!(format!("cannot write {}: {e}", f.display()))),
                None => Value::Null,
            };
            ran.insert(
                spec.name.into(),
                json!({
                    "interval_secs": spec.interval.as_secs_f64(),
                    "samples": rows.len(),
                    "csv": written,
                }),
            );
        }
        json!({
            "ran": ran,
            "unsupported": self.unsupported,
            "not_implemented": NOT_HERE,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_is_laid_out_as_benchpress() {
        let rows = vec![
            (
                "01:02:03 PM".to_string(),
                BTreeMap::from([
                    ("b".to_string(), "2".to_string()),
                    ("a".into(), "1.0".into()),
                ]),
            ),
            (
                "01:02:08 PM".to_string(),
                BTreeMap::from([
                    ("b".to_string(), "3".to_string()),
                    ("a".into(), "0.5".into()),
                ]),
            ),
        ];
        assert_eq!(
            csv(&rows),
            "index,timestamp,a,b\n0,01:02:03 PM,1.0,2,\n1,01:02:08 PM,0.5,3,\n"
        );
        assert_eq!(csv(&[]), "");
        assert_eq!(py_float(0.0), "0.0");
        assert_eq!(py_float(1234.567), "1234.567");
    }

    #[test]
    fn options_are_checked() {
        let ok = specs(
            &serde_json::from_str(
                r#"{"memstat": {"interval": 1, "additional_counters": ["Cached"]}}"#,
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(ok.len(), NAMES.len());
        // Upstream's README examples: topdown's is_zen4, mpstat's interval.
        for o in [
            r#"{"topdown": {"is_zen4": true}}"#,
            r#"{"mpstat": {"interval": 1}, "memstat": {"interval": 1}, "netstat": {"interval": 1}}"#,
        ] {
            specs(&serde_json::from_str(o).unwrap()).unwrap();
        }
        for (o, want) in [
            (r#"{"memstat": {"interval": 0}}"#, "positive"),
            (r#"{"netstat": {"counters": []}}"#, "no key 'counters'"),
            (r#"{"cpufreq_scaling": 5}"#, "must be an object"),
            (r#"{"topdown": {"is_zen": true}}"#, "no key 'is_zen'"),
            (r#"{"topdown": {"is_zen4": 1}}"#, "true or false"),
        ] {
            let e = specs(&serde_json::from_str(o).unwrap()).unwrap_err();
            assert!(e.contains(want), "{o}: {e}");
        }
    }

    #[test]
    fn samples_memory_and_network_into_csvs() {
        let d = tempfile::tempdir().unwrap();
        let o = serde_json::from_str(
            r#"{"mpstat": {"interval": 0.05}, "memstat": {"interval": 0.05}, "netstat": {"interval": 0.05}}"#,
        )
        .unwrap();
        let r = start(&specs(&o).unwrap());
        std::thread::sleep(Duration::from_millis(300));
        let s = r.finish(d.path());
        assert!(s["ran"]["memstat"]["samples"].as_u64().unwrap() >= 2, "{s}");
        let mem = std::fs::read_to_string(d.path().join("mem-stat.csv")).unwrap();
        assert!(
            mem.starts_with("index,timestamp,MemAvailable,MemFree,MemTotal,SwapFree,SwapTotal\n0,"),
            "{mem}"
        );
        let net = std::fs::read_to_string(d.path().join("net-stat.csv")).unwrap();
        assert!(net.contains("lo_rx_bytes_per_sec"), "{net}");
        // mpstat.csv has upstream's columns (mpstat -u's, sorted).
        let cpu = std::fs::read_to_string(d.path().join("mpstat.csv")).unwrap();
        assert!(
            cpu.starts_with(
                "index,timestamp,%gnice,%guest,%idle,%iowait,%irq,%nice,%soft,%steal,%sys,%usr\n0,"
            ),
            "{cpu}"
        );
        assert_eq!(s["unsupported"]["topdown"], TOPDOWN_NOT_COLLECTED, "{s}");
        // cpufreq either ran or says why not.
        for m in ["cpufreq_scaling", "cpufreq_cpuinfo"] {
            assert!(
                s["ran"].get(m).is_some() || s["unsupported"][m].as_str().is_some(),
                "{s}"
            );
        }
    }

    #[test]
    fn mpstat_lines_as_mpstat_computes_them() {
        // user 300 (of it guest 100), nice 0, system 100, idle 500, iowait
        // 100: a total of 1000 ticks with guest counted once.
        let a = [0u64; 10];
        let b = [300, 0, 100, 500, 100, 0, 0, 0, 100, 0];
        let r = mpstat_row(&a, &b);
        assert_eq!(r["%usr"], "20.0");
        assert_eq!(r["%guest"], "10.0");
        assert_eq!(r["%sys"], "10.0");
        assert_eq!(r["%idle"], "50.0");
        assert_eq!(r["%iowait"], "10.0");
        assert_eq!(r["%gnice"], "0.0");
        let b = [1, 0, 0, 2, 0, 0, 0, 0, 0, 0];
        assert_eq!(mpstat_row(&a, &b)["%idle"], "66.67");
    }
}
