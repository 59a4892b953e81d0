//! The sampling monitors of benchpress' `perf` hook that read /proc and
//! /sys: `memstat` (mem-stat.csv), `netstat` (net-stat.csv),
//! `cpufreq_scaling` and `cpufreq_cpuinfo` (their .csv). Each samples every
//! `interval` seconds (5 by default, as benchpress) on its own thread and
//! writes its CSV into the metrics folder after the job, in benchpress'
//! layout: `index,timestamp,<sorted columns>` then one row per sample, each
//! value followed by a comma, the time as `%I:%M:%S %p`. A monitor the host
//! cannot serve (no cpufreq in most VMs) is listed with the reason, as
//! benchpress logs it. Its `mpstat`, `perfstat`, `topdown` and `power`
//! monitors are not here: `cpu-mpstat` and this hook's `perf stat` totals
//! cover the first two.

use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// benchpress' names of the monitors kept here.
pub const NAMES: &[&str] = &["memstat", "netstat", "cpufreq_scaling", "cpufreq_cpuinfo"];
/// Its monitors that are not.
pub const NOT_HERE: &[&str] = &["mpstat", "perfstat", "topdown", "power"];

/// One sample: column to value (already formatted as benchpress prints it).
type Row = (String, BTreeMap<String, String>);

/// What a monitor reads, and its option keys beyond `interval`.
#[derive(Debug, Clone)]
enum Kind {
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
pub fn specs(o: &Map<String, Value>) -> Result<Vec<Spec>, String> {
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
        for (o, want) in [
            (r#"{"memstat": {"interval": 0}}"#, "positive"),
            (r#"{"netstat": {"counters": []}}"#, "no key 'counters'"),
            (r#"{"cpufreq_scaling": 5}"#, "must be an object"),
        ] {
            let e = specs(&serde_json::from_str(o).unwrap()).unwrap_err();
            assert!(e.contains(want), "{o}: {e}");
        }
    }

    #[test]
    fn samples_memory_and_network_into_csvs() {
        let d = tempfile::tempdir().unwrap();
        let o = serde_json::from_str(
            r#"{"memstat": {"interval": 0.05}, "netstat": {"interval": 0.05}}"#,
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
        // cpufreq either ran or says why not.
        for m in ["cpufreq_scaling", "cpufreq_cpuinfo"] {
            assert!(
                s["ran"].get(m).is_some() || s["unsupported"][m].as_str().is_some(),
                "{s}"
            );
        }
    }
}
