//! A FeedSim record as text: the leaf's ready line, a search's lines,
//! autoscale's closing lines and run-feedsim-multi.sh's JSON object, and
//! the mark of a run whose host changed speed.

use crate::metrics::SPEED_DRIFT_WARN_PCT;
use crate::record::{
    AutoscaleRun, FeedSimRecord, InstanceRecord, InstanceResult, LeafRecord, overall,
};
use harness::stats::round2;
use load::hostspeed::HostSpeed;
use load::report::{SearchRecord, final_line, write_search};
use load::{ProbeRecord, SloTarget};

/// The text of a stored run.
pub fn write_record(r: &FeedSimRecord, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    match r {
        FeedSimRecord::Leaf(l) => writeln!(out, "{}", ready_line(l))?,
        FeedSimRecord::Search(s) => {
            let o = &s.instance.outcome;
            write_search(
                &SearchRecord {
                    target: s.target,
                    probes: o.probes.clone(),
                    reported: o.final_probe.clone(),
                    failure: o.failure.clone(),
                },
                out,
            )?
        }
        FeedSimRecord::Autoscale(a) => {
            for line in a.lines() {
                writeln!(out, "{line}")?;
            }
        }
    }
    out.flush()
}

/// The leaf's line once its datasets are built (the last it prints).
pub(crate) fn ready_line(r: &LeafRecord) -> String {
    format!(
        "leaf: datasets built in {:.1} s ({:.0} MiB); ready on {}",
        r.build_seconds,
        r.dataset_bytes as f64 / (1u64 << 20) as f64,
        r.addr
    )
}

impl AutoscaleRun {
    /// The closing lines: each successful instance's final line and the
    /// overall sums (ours), then run-feedsim-multi.sh's JSON object (as
    /// jq prints it, the object upstream's feedsim_autoscale parser reads:
    /// the last one on stdout). After a rerun, as upstream, the search's
    /// object, the rerun line and the rerun's object (`is_fixed_qps` 1).
    pub fn lines(&self) -> Vec<String> {
        let finals = self.finals();
        let mut lines: Vec<String> = finals
            .iter()
            .map(|f| format!("{}{}", f.label, final_line(f.reported)))
            .collect();
        let (sum_req, sum_ach, avg_lat) = overall(&finals);
        lines.push(format!(
            "overall: {} of {} instance(s) succeeded; requested_qps = {sum_req:.2}, measured_qps = {sum_ach:.2}, average latency = {avg_lat:.3}",
            finals.len(),
            self.instances.len()
        ));
        let numbered = |pick: &dyn Fn(&InstanceRecord) -> Option<&ProbeRecord>| {
            self.instances
                .iter()
                .enumerate()
                .filter_map(|(i, inst)| match &inst.result {
                    InstanceResult::Ran(r) => pick(r).map(|p| (i + 1, p)),
                    InstanceResult::Failed(_) => None,
                })
                .collect::<Vec<_>>()
        };
        let rerun = self.instances.iter().find_map(|i| match &i.result {
            InstanceResult::Ran(r) => r.rerun.as_ref().map(|x| x.qps),
            InstanceResult::Failed(_) => None,
        });
        let spawned = self.instances.len();
        if let Some(q) = rerun {
            let search =
                numbered(&|r| r.outcome.final_probe.as_ref().filter(|_| r.outcome.success));
            lines.extend(upstream_summary(&self.target, spawned, &search, false));
            lines.push(format!(
                "Detected unstable run - rerunning with fixed QPS at {}...",
                q.trunc()
            ));
        }
        let reported = numbered(&|r| r.reported_probe().filter(|_| r.outcome.success));
        lines.extend(upstream_summary(
            &self.target,
            spawned,
            &reported,
            self.fixed_qps || rerun.is_some(),
        ));
        lines
    }
}

/// A number as jq prints it after rounding to `decimals`: the shortest
/// form (`23.4`, `0`).
fn jq_number(x: f64, decimals: i32) -> String {
    let m = 10f64.powi(decimals);
    let v = (x * m).round() / m;
    if v == 0.0 { "0".into() } else { format!("{v}") }
}

/// run-feedsim-multi.sh's closing object over the instances with a final
/// line (numbered from one), in jq's layout: per instance its final
/// figures (the values of its final line), the sums and mean latency (two
/// decimals, as its bc), the target, the instance counts, the lowest (0
/// when an instance has none) and highest achieved QPS, and whether the
/// rates were fixed.
fn upstream_summary(
    target: &SloTarget,
    spawned: usize,
    finals: &[(usize, &ProbeRecord)],
    fixed: bool,
) -> Vec<String> {
    let mut out = vec!["{".to_string()];
    for (i, p) in finals {
        out.push(format!("  \"{i}\": {{"));
        out.push(format!(
            "    \"final_requested_qps\": {},",
            jq_number(p.requested_qps, 2)
        ));
        out.push(format!(
            "    \"final_achieved_qps\": {},",
            jq_number(p.achieved_qps, 2)
        ));
        out.push(format!(
            "    \"final_latency_msec\": {}",
            jq_number(p.target_value_ms, 3)
        ));
        out.push("  },".into());
    }
    let req: f64 = finals.iter().map(|(_, p)| round2(p.requested_qps)).sum();
    let ach: f64 = finals.iter().map(|(_, p)| round2(p.achieved_qps)).sum();
    let avg = if finals.is_empty() {
        0.0
    } else {
        // bc's scale=2 truncates.
        let mean = finals
            .iter()
            .map(|(_, p)| (p.target_value_ms * 1000.0).round() / 1000.0)
            .sum::<f64>()
            / finals.len() as f64;
        (mean * 100.0).trunc() / 100.0
    };
    let achieved: Vec<f64> = finals.iter().map(|(_, p)| round2(p.achieved_qps)).collect();
    let max = achieved.iter().copied().fold(0.0, f64::max);
    let min = if finals.len() < spawned || finals.is_empty() {
        0.0
    } else {
        achieved.iter().copied().fold(f64::INFINITY, f64::min)
    };
    out.push("  \"overall\": {".into());
    out.push(format!(
        "    \"final_requested_qps\": {},",
        jq_number(req, 2)
    ));
    out.push(format!(
        "    \"final_achieved_qps\": {},",
        jq_number(ach, 2)
    ));
    out.push(format!(
        "    \"average_latency_msec\": {}",
        jq_number(avg, 2)
    ));
    out.push("  },".into());
    out.push(format!(
        "  \"target_percentile\": \"{}\",",
        target.percentile.label()
    ));
    out.push(format!(
        "  \"target_latency_msec\": \"{}\",",
        target.latency_ms
    ));
    out.push(format!("  \"spawned_instances\": \"{spawned}\","));
    out.push(format!("  \"successful_instances\": {},", finals.len()));
    out.push(format!("  \"min_qps\": {},", jq_number(min, 2)));
    out.push(format!("  \"max_qps\": {},", jq_number(max, 2)));
    out.push(format!("  \"is_fixed_qps\": {}", u8::from(fixed)));
    out.push("}".into());
    out
}

/// The mark of a run during which the machine's speed changed.
pub(crate) fn speed_warning(speed: Option<&HostSpeed>) -> Option<String> {
    let h = speed.filter(|h| h.drift_pct > SPEED_DRIFT_WARN_PCT)?;
    Some(format!(
        "this machine's speed changed during the run: a fixed unit of integer work took {:.0} to {:.0} us, one of dependent memory loads {:.0} to {:.0} us (spread {:.0}% > {SPEED_DRIFT_WARN_PCT:.0}%); results from this run are not comparable to that precision",
        h.cpu.unit_us_min,
        h.cpu.unit_us_max,
        h.memory.unit_us_min,
        h.memory.unit_us_max,
        h.drift_pct
    ))
}
