//! Render (record to text): upstream's end-of-run reports from a
//! recorded run, and whether it passed.

use crate::output;
use crate::record::{CacheBenchRecord, InstanceRecord};
use std::io::Write;

/// Whether a recorded run passed: not aborted (as upstream, a run stopped
/// by Ctrl-C or by `--timeout_seconds` fails), no NVM failure and no
/// instance with a failure line.
pub(crate) fn record_passed(r: &CacheBenchRecord) -> bool {
    !aborted(r) && r.nvm_failure.is_none() && r.instances.iter().all(|i| i.failures.is_empty())
}

/// Whether the run was cut short: Ctrl-C or `--timeout_seconds` (upstream
/// aborts its runners for both).
pub(crate) fn aborted(r: &CacheBenchRecord) -> bool {
    r.interrupted || r.stopped_by_timeout_seconds.is_some()
}

/// An instance's end-of-run report (`== Test Results ==` and its failure
/// lines).
pub(crate) fn instance_report(st: output::Style, i: &InstanceRecord) -> String {
    let failures: Vec<&str> = i.failures.iter().map(String::as_str).collect();
    let counters = i
        .print_nvm_counters
        .then(|| {
            i.stats
                .cache
                .nvm
                .as_ref()
                .map(crate::counters::nvm_counters_block)
        })
        .flatten();
    if i.generator.is_none() && counters.is_none() {
        return output::final_report(st, &i.stats, &failures);
    }
    // printNvmCounters: upstream's counters map closes its allocator
    // stats; a replay's generator block follows the throughput lines,
    // before the blank line and the failure lines.
    let mut text = output::final_report(st, &i.stats, &[]);
    if let Some(block) = counters {
        let alloc = output::allocator_stats(st, &i.stats);
        let at = text.find(&alloc).map_or(text.len(), |p| p + alloc.len());
        text.insert_str(at, &block);
    }
    if let Some(g) = &i.generator {
        if text.ends_with('\n') {
            text.pop();
        }
        match &g.text {
            Some(block) => text.push_str(block),
            None => text.push_str(&crate::replay::generator_stats_block(
                &g.name,
                g.samples,
                g.parse_errors,
            )),
        }
        text.push('\n');
    }
    for f in failures {
        text.push_str(f);
        text.push('\n');
    }
    text
}

/// Upstream's end-of-run text on stdout when no instance has a stats file
/// of its own: each instance's report, with several instances upstream's
/// aggregate of them, then (in the current layout) `Finished!` or
/// `Failed.`.
pub fn write_record(
    r: &CacheBenchRecord,
    layout: output::Layout,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let st = layout.style(r.instances.len());
    for i in &r.instances {
        write!(out, "{}", instance_report(st, i))?;
    }
    write_closing(r, st, out)
}

/// What stdout gets after the instances' reports: the aggregate of
/// several instances and the closing line.
pub(crate) fn write_closing(
    r: &CacheBenchRecord,
    st: output::Style,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    if let Some(total) = &r.aggregated {
        let n = r.instances.len();
        write!(out, "{}", output::aggregated_report(st, total, n))?;
    }
    if let Some(line) = st.closing_line(record_passed(r)) {
        write!(out, "{line}")?;
    }
    out.flush()
}
