//! `rackbench resctl mem-hog`: a memory hog that grows anonymous memory at
//! a set rate (resctl-bench's mem-hog sysload, written here).
//!
//! The hog owes `wbps` bytes for every second it has run and pays the debt
//! by filling new pages with random data, at most 1 MiB at a time. The
//! debt is capped at 10 seconds' worth; what it could not write beyond that
//! (the hog was starved of CPU or stalled in reclaim) is counted as loss.
//! Every second it rewrites a small JSON report atomically:
//! `{"timestamp", "wbps", "wbytes", "wdebt", "wloss", "mem_bytes"}`, where
//! `wbytes` is what it wrote, `wdebt`/`wloss` the debt and the loss in
//! bytes, and `mem_bytes` the memory it holds.
//!
//! It runs until it is killed (the kernel's OOM killer, usually), for
//! `--duration` seconds, or until it holds `--max` bytes, after which it
//! keeps rewriting the pages it has so that they stay in use.

use crate::fmt::parse_size;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const PAGE: usize = 4096;
const CHUNK: usize = 1 << 30;
const MAX_WRITE: usize = 1 << 20;
const MAX_DEBT_SECS: f64 = 10.0;

/// The hog's report file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HogReport {
    /// Unix time, seconds.
    pub timestamp: f64,
    pub wbps: u64,
    pub wbytes: u64,
    pub wdebt: u64,
    pub wloss: u64,
    pub mem_bytes: u64,
}

/// The hog's options.
#[derive(Debug, Clone, PartialEq)]
pub struct HogArgs {
    pub wbps: u64,
    pub report: Option<PathBuf>,
    pub max: Option<u64>,
    pub duration: Option<f64>,
}

/// The hog's command line.
#[derive(Debug, clap::Parser)]
#[command(
    name = "rackbench resctl mem-hog",
    about = "Grows anonymous memory at RATE bytes a second with random data until killed, \
             for --duration seconds, or until it holds --max; writes a JSON report every second."
)]
struct Cli {
    /// The write rate, bytes a second with a unit (e.g. 512M); required.
    #[arg(long, value_name = "RATE", value_parser = positive_size)]
    wbps: u64,
    /// The report file, rewritten atomically every second.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Stop growing at this size (then keep rewriting what it holds).
    #[arg(long, value_name = "SIZE", value_parser = size)]
    max: Option<u64>,
    /// Run this many seconds.
    #[arg(long, value_name = "SECS", value_parser = seconds)]
    duration: Option<f64>,
}

fn size(v: &str) -> Result<u64, String> {
    parse_size(v).map_err(|e| e.to_string())
}

fn positive_size(v: &str) -> Result<u64, String> {
    match size(v)? {
        0 => Err("must be > 0".into()),
        n => Ok(n),
    }
}

fn seconds(v: &str) -> Result<f64, String> {
    v.parse()
        .ok()
        .filter(|d: &f64| *d > 0.0 && d.is_finite())
        .ok_or_else(|| "expected seconds > 0".into())
}

/// Parses the hog's arguments; an error (or `--help`) is clap's text.
/// `rackbench resctl mem-hog --help`.
pub fn help() -> String {
    use clap::CommandFactory;
    Cli::command().render_long_help().to_string()
}

pub fn parse(args: &[String]) -> Result<HogArgs, crate::Error> {
    use clap::Parser;
    let argv = std::iter::once("mem-hog".to_string()).chain(args.iter().cloned());
    let c = Cli::try_parse_from(argv)
        .map_err(|e| e.render().to_string())
        .map_err(crate::Error::Input)?;
    Ok(HogArgs {
        wbps: c.wbps,
        report: c.report,
        max: c.max,
        duration: c.duration,
    })
}

/// Anonymous memory reserved in 1 GiB mappings as it grows.
struct Hoard {
    chunks: Vec<*mut u8>,
    len: usize,
    rng: u64,
}

impl Hoard {
    fn new() -> Hoard {
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1);
        Hoard {
            chunks: Vec::new(),
            len: 0,
            rng: seed | 1,
        }
    }

    fn page(&mut self, idx: usize) -> Result<*mut u64, String> {
        let off = idx * PAGE;
        while off / CHUNK >= self.chunks.len() {
            // SAFETY: an anonymous private mapping, checked below.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    CHUNK,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                return Err(format!(
                    "mem-hog: cannot map 1G more: {}",
                    std::io::Error::last_os_error()
                ));
            }
            self.chunks.push(p.cast());
        }
        // SAFETY: `off % CHUNK + PAGE <= CHUNK` inside a live mapping.
        Ok(unsafe { self.chunks[off / CHUNK].add(off % CHUNK) }.cast())
    }

    /// Fills page `idx` with random words (incompressible, never zero
    /// pages).
    fn fill(&mut self, idx: usize) -> Result<(), String> {
        let p = self.page(idx)?;
        for i in 0..PAGE / 8 {
            // xorshift64
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            // SAFETY: within the page.
            unsafe { p.add(i).write_volatile(self.rng) };
        }
        Ok(())
    }
}

impl Drop for Hoard {
    fn drop(&mut self) {
        for c in &self.chunks {
            // SAFETY: each was mapped with CHUNK bytes.
            unsafe { libc::munmap(c.cast(), CHUNK) };
        }
    }
}

fn now_secs_f64() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn save(path: &Path, r: &HogReport) -> Result<(), String> {
    let text = serde_json::to_string(r).map_err(|e| e.to_string())?;
    harness::fsutil::write_atomic(path, text.as_bytes())
        .map_err(|e| format!("mem-hog: cannot write {}: {e}", path.display()))
}

/// Runs the hog until killed, `--duration` or `stop` returns true.
pub fn run(a: &HogArgs, stop: &dyn Fn() -> bool) -> Result<HogReport, crate::Error> {
    let bps = a.wbps as f64;
    let max_pages = a.max.map(|m| (m as usize).div_ceil(PAGE));
    let mut hoard = Hoard::new();
    let start = Instant::now();
    let mut last_report = start;
    let mut paid = 0.0f64; // bytes of debt paid or written off
    let mut rep = HogReport {
        wbps: a.wbps,
        ..HogReport::default()
    };
    let mut rewrite = 0usize;
    loop {
        let now = Instant::now();
        let el = now.duration_since(start).as_secs_f64();
        let mut debt = el * bps - paid;
        if debt > MAX_DEBT_SECS * bps {
            let lost = debt - MAX_DEBT_SECS * bps;
            rep.wloss += lost as u64;
            paid += lost;
            debt = MAX_DEBT_SECS * bps;
        }
        if now.duration_since(last_report) >= Duration::from_secs(1) || rep.timestamp == 0.0 {
            rep.timestamp = now_secs_f64();
            rep.wdebt = debt.max(0.0) as u64;
            rep.mem_bytes = (hoard.len * PAGE) as u64;
            if let Some(p) = &a.report {
                save(p, &rep).map_err(crate::Error::Host)?;
            }
            last_report = now;
        }
        if stop() || a.duration.is_some_and(|d| el >= d) {
            rep.mem_bytes = (hoard.len * PAGE) as u64;
            return Ok(rep);
        }
        if debt < PAGE as f64 {
            let secs = (PAGE as f64 / bps).clamp(0.001, 0.1);
            std::thread::sleep(Duration::from_secs_f64(secs));
            continue;
        }
        let pages = ((debt as usize).min(MAX_WRITE) / PAGE).max(1);
        for _ in 0..pages {
            match max_pages {
                Some(m) if hoard.len >= m => {
                    // Full: keep the pages in use.
                    hoard.fill(rewrite % m.max(1)).map_err(crate::Error::Host)?;
                    rewrite += 1;
                }
                _ => {
                    hoard.fill(hoard.len).map_err(crate::Error::Host)?;
                    hoard.len += 1;
                }
            }
        }
        rep.wbytes += (pages * PAGE) as u64;
        paid += (pages * PAGE) as f64;
    }
}

/// `rackbench resctl mem-hog ...`.
pub fn command(args: &[String], cancel: &harness::Cancel) -> anyhow::Result<HogReport> {
    let a = parse(args).map_err(anyhow::Error::msg)?;
    run(&a, &|| cancel.is_stopped()).map_err(anyhow::Error::msg)
}

/// The line the hog prints when it ends.
pub fn end_line(r: &HogReport) -> String {
    format!(
        "mem-hog: wrote {} bytes, lost {} bytes of its rate",
        r.wbytes, r.wloss
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn options_are_checked() {
        let a = parse(&args(&["--wbps", "64M", "--max", "1G", "--duration", "2"])).unwrap();
        assert_eq!(a.wbps, 64 << 20);
        assert_eq!(a.max, Some(1 << 30));
        assert!(
            parse(&args(&["--max", "1G"]))
                .unwrap_err()
                .to_string()
                .contains("--wbps <RATE>")
        );
        assert!(
            parse(&args(&["--wbps", "fast"]))
                .unwrap_err()
                .to_string()
                .contains("--wbps")
        );
        assert!(
            parse(&args(&["--wpbs", "1M"]))
                .unwrap_err()
                .to_string()
                .contains("unexpected argument '--wpbs'")
        );
        assert!(
            parse(&args(&["--wbps"]))
                .unwrap_err()
                .to_string()
                .contains("a value is required for '--wbps <RATE>'")
        );
    }

    #[test]
    fn the_hog_grows_at_its_rate_and_reports() {
        let d = tempfile::tempdir().unwrap();
        let report = d.path().join("hog.json");
        let a = HogArgs {
            wbps: 32 << 20,
            report: Some(report.clone()),
            max: None,
            duration: Some(1.5),
        };
        let r = run(&a, &|| false).unwrap();
        // 1.5 s at 32 MiB/s: about 48 MiB (loose: a loaded machine may
        // fall behind, but never ahead).
        let want = 1.5 * (32 << 20) as f64;
        assert!(r.wbytes as f64 <= want + MAX_WRITE as f64, "{r:?}");
        assert!(r.wbytes as f64 >= want * 0.5, "{r:?}");
        let saved: HogReport =
            serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
        assert!(saved.timestamp > 0.0 && saved.wbps == 32 << 20, "{saved:?}");
    }

    #[test]
    fn the_hog_stops_growing_at_its_cap() {
        let a = HogArgs {
            wbps: 64 << 20,
            report: None,
            max: Some(4 << 20),
            duration: Some(0.5),
        };
        let r = run(&a, &|| false).unwrap();
        assert!(r.wbytes > 8 << 20, "it keeps writing: {r:?}");
        assert!(r.mem_bytes <= 4 << 20, "{r:?}");
    }
}
