//! FeedSim's per-probe CSV: one row per probe, 15 columns, written and
//! flushed as each probe finishes so a run that dies keeps its rows.

use crate::search::ProbeRecord;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// The header upstream's FeedSim driver writes.
pub const HEADER: &str = "duration_secs,total_queries,requested_qps,achieved_qps,total_bytes_rx,total_bytes_tx,rx_MBps,tx_MBps,min_ms,avg_ms,50p_ms,90p_ms,95p_ms,99p_ms,99.9p_ms";

/// Formats one probe as a CSV row (no newline), with upstream's
/// search_qps.sh formats: the duration in whole seconds (`%d`), rates and
/// MB/s with two decimals (`%.2f`), latencies with three (`%.3f`). MB is
/// 2^20 bytes, as oldisim's driver divides by 1024 twice.
pub fn row(p: &ProbeRecord) -> String {
    let mbps = |b: u64| {
        if p.duration_secs > 0.0 {
            b as f64 / p.duration_secs / (1u64 << 20) as f64
        } else {
            0.0
        }
    };
    let l = &p.latency;
    format!(
        "{},{},{:.2},{:.2},{},{},{:.2},{:.2},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3}",
        p.duration_secs.round() as u64,
        p.total_queries,
        p.requested_qps,
        p.achieved_qps,
        p.total_bytes_rx,
        p.total_bytes_tx,
        mbps(p.total_bytes_rx),
        mbps(p.total_bytes_tx),
        l.min_ms,
        l.avg_ms,
        l.p50_ms,
        l.p90_ms,
        l.p95_ms,
        l.p99_ms,
        l.p999_ms,
    )
}

/// An open probe CSV.
pub struct ProbeCsv {
    path: PathBuf,
    out: BufWriter<File>,
}

impl ProbeCsv {
    /// Creates (truncates) `path` and writes the header.
    pub fn create(path: &Path) -> io::Result<Self> {
        let file = File::create(path)?;
        let mut out = BufWriter::new(file);
        writeln!(out, "{HEADER}")?;
        out.flush()?;
        Ok(ProbeCsv {
            path: path.to_path_buf(),
            out,
        })
    }

    /// Appends one probe and flushes it to the file.
    pub fn append(&mut self, p: &ProbeRecord) -> io::Result<()> {
        writeln!(self.out, "{}", row(p))?;
        self.out.flush()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::LatencySummary;
    use crate::search::Phase;

    #[test]
    fn header_has_fifteen_columns_and_rows_match() {
        assert_eq!(HEADER.split(',').count(), 15);
        let p = ProbeRecord {
            seq: 0,
            phase: Phase::Bisect,
            mode: "open:constant".into(),
            requested_qps: 100.0,
            duration_secs: 2.0,
            total_queries: 200,
            scheduled: 200,
            errors: 0,
            dropped: 0,
            unfinished: 0,
            achieved_qps: 100.0,
            total_bytes_rx: 4 << 20,
            total_bytes_tx: 2_000_000,
            latency: LatencySummary {
                count: 200,
                p95_ms: 12.5,
                ..Default::default()
            },
            target_value_ms: 12.5,
            passed: true,
            verdict: "ok".into(),
            extensions: 0,
            settle_secs: 0.0,
            start_unix_ms: 0,
            end_unix_ms: 0,
            interval: None,
            from_send_ms: None,
        };
        let r = row(&p);
        let cols: Vec<&str> = r.split(',').collect();
        assert_eq!(cols.len(), 15);
        // search_qps.sh's formats: %d,%d,%.2f,%.2f,%d,%d,%.2f,%.2f,%.3f...
        assert_eq!(cols[0], "2");
        assert_eq!(cols[1], "200");
        assert_eq!(cols[2].split('.').nth(1).map(str::len), Some(2), "{r}");
        assert_eq!(cols[3].split('.').nth(1).map(str::len), Some(2), "{r}");
        assert_eq!(cols[6], "2.00"); // 4 MiB over 2 s = 2 MB/s, MB being 2^20 B
        assert_eq!(cols[12], "12.500");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("feedsim_results.txt");
        let mut csv = ProbeCsv::create(&path).unwrap();
        csv.append(&p).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, format!("{HEADER}\n{r}\n"));
    }
}
