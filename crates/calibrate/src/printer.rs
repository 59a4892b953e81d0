//! A calibrate record as text: the server's lines, a search's lines and
//! the model lines under them (the overhead probe's, the M/D/c values).

//! A calibrate record as text: the server's lines, a search's lines and
//! the model lines under them (the overhead probe's, the M/D/c values).

use crate::metrics::model_with_overhead;
use crate::record::{OverheadRecord, SearchRun, ServeRecord};
use load::SloTarget;
use load::report::write_search;

/// The text of a stored search: the search's lines, then the model lines.
pub(crate) fn write_record(r: &SearchRun, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    write_search(&r.search, out)?;
    for line in model_lines(r) {
        writeln!(out, "{line}")?;
    }
    out.flush()
}

/// The text of a stored `calibrate serve` run: its lines.
pub(crate) fn write_serve(r: &ServeRecord, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    writeln!(
        out,
        "{}",
        listening_line(&r.address, r.workers, r.service_time_ms)
    )?;
    writeln!(out, "{}", served_line(r))?;
    out.flush()
}

/// The line `calibrate serve` prints once it listens.
pub(crate) fn listening_line(address: &str, workers: usize, service_time_ms: f64) -> String {
    format!(
        "calibrate server listening on {address} ({workers} workers, {service_time_ms} ms service time); Ctrl-C stops it"
    )
}

/// The line `calibrate serve` prints when it stops.
pub(crate) fn served_line(r: &ServeRecord) -> String {
    match r.mean_service {
        Some(d) => format!(
            "calibrate server: served {} requests, mean service time {:.3} ms",
            r.requests_served,
            d.as_secs_f64() * 1000.0
        ),
        None => format!("calibrate server: served {} requests", r.requests_served),
    }
}

/// Our closing line: the measured rate against the model's.
pub(crate) fn analytic_line(t: &SloTarget, f: &load::search::ProbeRecord, analytic: f64) -> String {
    format!(
        "calibrate: max QPS meeting {} <= {} ms: measured {:.1}, M/D/c analytic {:.1}, ratio {:.3}",
        t.percentile.label(),
        t.latency_ms,
        f.requested_qps,
        analytic,
        f.requested_qps / analytic
    )
}

/// The lines under a search: the overhead probe's, and with a result the
/// pure M/D/c value and the value with the measured service time and
/// overhead when the overhead probe ran.
pub(crate) fn model_lines(r: &SearchRun) -> Vec<String> {
    let mut out: Vec<String> = r.overhead.iter().map(overhead_line).collect();
    let Some(f) = &r.search.reported else {
        return out;
    };
    if let Some(an) = r.analytic_max_qps.filter(|x| *x > 0.0) {
        out.push(analytic_line(&r.search.target, f, an));
    }
    if let Some(m) = model_with_overhead(r).filter(|m| m.max_qps > 0.0) {
        out.push(format!(
            "calibrate: M/D/c with the measured service time {:.3} ms and overhead (median {:.3} ms): {:.1}, ratio {:.3}",
            m.service_ms,
            m.median_overhead_ms,
            m.max_qps,
            f.requested_qps / m.max_qps
        ));
    }
    out
}

/// `overhead: median 0.412 ms, 99p 1.020 ms (latency minus the server's
/// 10.055 ms service time, 240 replies at 80 QPS over 3 s)`.
pub(crate) fn overhead_line(o: &OverheadRecord) -> String {
    format!(
        "overhead: median {:.3} ms, 99p {:.3} ms (latency minus the {} {:.3} ms service time, {} replies at {:.0} QPS over {:.0} s)",
        o.quantile(0.5),
        o.quantile(0.99),
        if o.service_measured {
            "server's measured"
        } else {
            "nominal"
        },
        o.service_ms,
        o.replies,
        o.requested_qps,
        o.duration_secs
    )
}
