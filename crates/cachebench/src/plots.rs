//! Charts and latency tables over the run's progress intervals, drawn by
//! the binary (no gnuplot).
//!
//! Each progress tick adds a [`Sample`]: throughput, hit ratios and, with
//! an NVM tier, the NVM read and write latency percentiles of the interval.
//! At the end [`write_all`] writes, beside the progress stats file (or in
//! the report folder):
//! - `<stem>_read_latency.tsv` and `<stem>_write_latency.tsv`, laid out as
//!   upstream's `extract_latency.sh` makes them from a stats file (a `time`
//!   column numbering the intervals, then p50us .. p100us, aligned as
//!   `column -t` aligns them);
//! - `<stem>_throughput.png`, `<stem>_hit_ratio.png` and, with NVM,
//!   `<stem>_read_latency.png` and `<stem>_write_latency.png`.

use crate::error::Error;
use crate::output::HitRatios;
use chart::Chart;
use hdrhistogram::Histogram;
use std::path::{Path, PathBuf};

/// The percentiles upstream reports, with their column names.
pub const PERCENTILES: [(&str, f64); 8] = [
    ("p50us", 0.5),
    ("p90us", 0.9),
    ("p99us", 0.99),
    ("p999us", 0.999),
    ("p9999us", 0.9999),
    ("p99999us", 0.99999),
    ("p999999us", 0.999999),
    ("p100us", 1.0),
];

/// One progress interval.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// Seconds since the start, at the end of the interval.
    pub t: f64,
    pub ops_per_sec: f64,
    pub hit: HitRatios,
    /// Gets in the interval (the RAM and overall hit ratios are over them).
    pub gets: u64,
    /// NVM lookups in the interval (the NVM hit ratio is over them); None
    /// without an NVM tier.
    pub nvm_gets: Option<u64>,
    /// NVM read and write latency percentiles of the interval (µs), in
    /// [`PERCENTILES`] order; None without NVM traffic in the interval.
    pub read_us: Option<[f64; 8]>,
    pub write_us: Option<[f64; 8]>,
}

/// The percentiles of what `cur` recorded since `prev` (both cumulative);
/// None when nothing was recorded in between.
pub fn interval(cur: &Histogram<u64>, prev: Option<&Histogram<u64>>) -> Option<[f64; 8]> {
    let mut h = cur.clone();
    if let Some(p) = prev {
        h.subtract(p).ok()?;
    }
    if h.is_empty() {
        return None;
    }
    let mut out = [0.0; 8];
    for (o, (_, q)) in out.iter_mut().zip(PERCENTILES) {
        *o = h.value_at_quantile(q) as f64;
    }
    Some(out)
}

/// Rows aligned as `column -t` aligns them: each column as wide as its
/// widest cell, two spaces between columns, no trailing spaces.
fn columns(rows: &[Vec<String>]) -> String {
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..n)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(String::len)
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            if c + 1 == r.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}  ", w = widths[c]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The latency table of one direction (`read` or `write`): a header, then
/// one row per interval that had NVM traffic, numbered from 1.
pub fn latency_tsv(samples: &[Sample], read: bool) -> String {
    let mut rows = vec![
        std::iter::once("time".to_string())
            .chain(PERCENTILES.iter().map(|(n, _)| n.to_string()))
            .collect::<Vec<_>>(),
    ];
    let mut i = 0;
    for s in samples {
        let v = if read { s.read_us } else { s.write_us };
        if let Some(v) = v {
            i += 1;
            rows.push(
                std::iter::once(i.to_string())
                    .chain(v.iter().map(|x| format!("{x:.2}")))
                    .collect(),
            );
        }
    }
    columns(&rows)
}

/// The file stem upstream's script uses: the name up to its first dot.
pub fn stem(stats_file: &Path) -> String {
    let name = stats_file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match name.split('.').next() {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => "cachebench".to_string(),
    }
}

fn latency_chart(samples: &[Sample], read: bool) -> Chart {
    let title = if read {
        "NVM read latency"
    } else {
        "NVM write latency"
    };
    let pick = |s: &Sample| if read { s.read_us } else { s.write_us };
    let mut c = Chart::new(title, "time (s)", "latency (us)").log_y();
    for (i, (name, _)) in PERCENTILES.iter().enumerate() {
        let points = samples
            .iter()
            .filter_map(|s| pick(s).map(|v| (s.t, v[i].max(1.0))))
            .collect();
        c = c.series(name.trim_end_matches("us"), points);
    }
    c
}

/// Writes the tables and charts into `dir` named after `stem`; returns the
/// files written.
pub fn write_all(dir: &Path, stem: &str, samples: &[Sample]) -> Result<Vec<PathBuf>, Error> {
    let png = |c: &Chart, p: &Path| c.write_png(p).map_err(|e| Error::Host(e.to_string()));
    let mut written = Vec::new();
    let path = |suffix: &str| dir.join(format!("{stem}_{suffix}"));
    let throughput = Chart::new("CacheBench throughput", "time (s)", "operations per second")
        .y_min(0.0)
        .series(
            "ops/s",
            samples.iter().map(|s| (s.t, s.ops_per_sec)).collect(),
        );
    let p = path("throughput.png");
    png(&throughput, &p)?;
    written.push(p);
    let nvm = samples
        .iter()
        .any(|s| s.read_us.is_some() || s.write_us.is_some());
    let mut hit = Chart::new("CacheBench hit ratio", "time (s)", "hit ratio (%)")
        .y_range(0.0, 100.0)
        .series(
            "overall",
            samples.iter().map(|s| (s.t, s.hit.overall)).collect(),
        );
    if nvm {
        hit = hit
            .series("RAM", samples.iter().map(|s| (s.t, s.hit.ram)).collect())
            .series("NVM", samples.iter().map(|s| (s.t, s.hit.nvm)).collect());
    }
    let p = path("hit_ratio.png");
    png(&hit, &p)?;
    written.push(p);
    if nvm {
        for (read, name) in [(true, "read"), (false, "write")] {
            let p = path(&format!("{name}_latency.tsv"));
            harness::fsutil::write_atomic(&p, latency_tsv(samples, read).as_bytes())
                .map_err(|e| Error::Host(format!("cannot write {}: {e}", p.display())))?;
            written.push(p);
            let p = path(&format!("{name}_latency.png"));
            png(&latency_chart(samples, read), &p)?;
            written.push(p);
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(values: &[u64]) -> Histogram<u64> {
        let mut h = Histogram::new_with_bounds(1, 60_000_000, 3).unwrap();
        for v in values {
            h.record(*v).unwrap();
        }
        h
    }

    #[test]
    fn interval_percentiles_exclude_the_earlier_intervals() {
        let prev = hist(&[1000; 100]);
        let mut cur = prev.clone();
        cur.add(hist(&[10; 100])).unwrap();
        let v = interval(&cur, Some(&prev)).unwrap();
        assert_eq!(v[0], 10.0);
        assert_eq!(v[7], 10.0, "the earlier 1000s are not in this interval");
        assert_eq!(interval(&prev, Some(&prev)), None);
        assert_eq!(interval(&prev, None).unwrap()[0], 1000.0);
    }

    #[test]
    fn tables_look_like_extract_latency_output() {
        let s = |t: f64, v: Option<[f64; 8]>| Sample {
            t,
            read_us: v,
            ..Sample::default()
        };
        let samples = [
            s(
                1.0,
                Some([
                    201.39, 449.96, 1054.32, 2426.05, 4632.0, 5533.74, 5533.74, 9111.0,
                ]),
            ),
            s(2.0, None),
            s(3.0, Some([5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0])),
        ];
        let t = latency_tsv(&samples, true);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3, "{t}");
        let cells: Vec<Vec<&str>> = lines
            .iter()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            cells[0],
            [
                "time",
                "p50us",
                "p90us",
                "p99us",
                "p999us",
                "p9999us",
                "p99999us",
                "p999999us",
                "p100us"
            ]
        );
        assert_eq!(cells[1][0], "1");
        assert_eq!(cells[1][1], "201.39");
        assert_eq!(cells[2][0], "2", "intervals without traffic are skipped");
        assert_eq!(cells[2][8], "12.00");
        // Aligned: every column starts at the same offset on every line.
        let starts = |l: &str| {
            let b = l.as_bytes();
            (0..b.len())
                .filter(|&i| b[i] != b' ' && (i == 0 || b[i - 1] == b' '))
                .collect::<Vec<_>>()
        };
        assert_eq!(starts(lines[0]), starts(lines[1]));
        assert_eq!(starts(lines[1]), starts(lines[2]));
        assert!(lines.iter().all(|l| !l.ends_with(' ')));
        // No NVM traffic: only the header.
        assert_eq!(latency_tsv(&samples, false).lines().count(), 1);
    }

    #[test]
    fn files_are_named_after_the_stats_file() {
        assert_eq!(stem(Path::new("/x/run.log")), "run");
        assert_eq!(stem(Path::new("a.b.c")), "a");
        assert_eq!(stem(Path::new("/")), "cachebench");
        let d = tempfile::tempdir().unwrap();
        let samples: Vec<Sample> = (1..=5)
            .map(|i| Sample {
                t: i as f64,
                ops_per_sec: 1000.0 * i as f64,
                hit: HitRatios {
                    overall: 50.0,
                    ram: 30.0,
                    nvm: 28.0,
                },
                gets: 100,
                nvm_gets: Some(70),
                read_us: Some([10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0]),
                write_us: (i > 2).then_some([1.0; 8]),
            })
            .collect();
        let files = write_all(d.path(), "run", &samples).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "run_throughput.png",
                "run_hit_ratio.png",
                "run_read_latency.tsv",
                "run_read_latency.png",
                "run_write_latency.tsv",
                "run_write_latency.png"
            ]
        );
        for f in &files {
            let b = std::fs::read(f).unwrap();
            if f.extension().unwrap() == "png" {
                assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n", "{}", f.display());
            }
        }
        let w = std::fs::read_to_string(d.path().join("run_write_latency.tsv")).unwrap();
        assert_eq!(w.lines().count(), 4, "{w}");
        // DRAM only: no latency files.
        let dram: Vec<Sample> = samples
            .iter()
            .map(|s| Sample {
                read_us: None,
                write_us: None,
                ..s.clone()
            })
            .collect();
        let e = tempfile::tempdir().unwrap();
        assert_eq!(write_all(e.path(), "x", &dram).unwrap().len(), 2);
    }
}
