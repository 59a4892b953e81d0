//! hashd's text: the result lines, the -v details of a status line, and
//! the end-of-run summary of a record.

use super::engine::Stat;
use super::params::Params;
use super::record::{BenchResult, HashdRecord, SingleResult};
use crate::fmt::format_size;

/// The details -v adds to a line.
pub(super) fn verbose_detail(s: &Stat) -> String {
    format!(
        "/{:.1} infl:{} workers:{}/{} done:{}",
        s.concurrency_max,
        s.nr_in_flight,
        s.nr_workers - s.nr_idle_workers,
        s.nr_workers,
        s.nr_done
    )
}

/// The single-CPU bench's result line.
pub(super) fn single_line(base: &Params) -> String {
    format!(
        "[ Single cpu result: hash size {}, anon access {}, chunk {} pages ]",
        format_size(base.file_size_mean as f64),
        format_size(base.file_size_mean as f64 * base.anon_size_ratio),
        base.chunk_pages
    )
}

impl BenchResult {
    /// The `Bench results:` line hashd prints.
    pub fn line(&self) -> String {
        format!(
            "Bench results: memory {} ({:.2}%), hash {}, rps {}{}",
            format_size(self.footprint_bytes as f64),
            self.mem_frac * 100.0,
            format_size(self.hash_size as f64),
            self.rps_max,
            if self.converged {
                ""
            } else {
                " (failed to converge to the latency target)"
            }
        )
    }
}

impl SingleResult {
    /// The single-CPU bench's result line.
    pub fn line(&self) -> String {
        format!(
            "[ Single cpu result: hash size {}, chunk {} pages{} ]",
            format_size(self.hash_size as f64),
            self.chunk_pages,
            if self.converged {
                ""
            } else {
                " (failed to converge to 15 ms)"
            }
        )
    }
}
impl HashdRecord {
    /// A short summary of the run: the bench results line hashd printed,
    /// the means it reports, and how it ended.
    pub fn write_text(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        if let Some(s) = self.bench.as_ref().and_then(|b| b.single.as_ref()) {
            writeln!(out, "{}", s.line())?;
        }
        if let Some(r) = self.bench.as_ref().and_then(|b| b.result.as_ref()) {
            writeln!(out, "{}", r.line())?;
        } else if self
            .bench
            .as_ref()
            .is_some_and(|b| b.searched || b.single.is_none())
        {
            writeln!(out, "hashd: the bench did not finish its searches")?;
        }
        let s = &self.summary;
        writeln!(
            out,
            "hashd: {} periods in {:.1}s, {} requests; second half: rps {:.1} con {:.1} \
             p50 {:.1}ms p95 {:.1}ms p99 {:.1}ms",
            s.periods,
            self.elapsed_secs,
            s.nr_done,
            s.rps,
            s.concurrency,
            s.lat_p50 * 1000.0,
            s.lat_p95 * 1000.0,
            s.lat_p99 * 1000.0
        )?;
        if let Some(e) = &self.error {
            writeln!(out, "hashd failed: {e}")?;
        } else if self.interrupted {
            writeln!(out, "hashd: interrupted")?;
        }
        Ok(())
    }
}
