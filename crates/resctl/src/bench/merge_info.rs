//! `merge-info`: upstream's pseudo bench that records what `merge`
//! combined into a result file. It never runs; a merged result file from
//! upstream holds one, and `format`/`summary` print it as upstream does:
//! per merge, `[i] KIND[ID]`, the versions, memory profile, storage model,
//! firmware and classifier the sources were grouped by, then each source
//! file (`+` kept, `-` rejected with why) and the groups that lost to it.

use super::common::{Bench, BenchInfo, Ctx, JobMetrics, Outcome};
use crate::journal::JobData;
use crate::spec::JobSpec;
use serde::{Deserialize, Serialize};
use std::fmt::Write;

/// Upstream's `MergeId`: what the sources of one merge have in common.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MergeId {
    pub kind: String,
    pub id: Option<String>,
    /// bench, agent and hashd versions (major.minor), or none when merged
    /// with `--ignore-versions`.
    pub versions: Option<(String, String, String)>,
    pub mem_profile: u32,
    pub storage_model: Option<String>,
    /// Not grouped by (and not written) for upstream 2.1's sources, as 2.1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_fwver: Option<String>,
    pub classifier: Option<String>,
}

/// One source job: its file, kind and id.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MergeSrcName {
    pub file: String,
    pub kind: String,
    pub id: Option<String>,
}

/// One merge: the sources used, those rejected (with why), and the merges
/// of the same kind that lost to this one.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MergeEntry {
    pub mid: MergeId,
    pub srcs: Vec<MergeSrcName>,
    pub rejects: Vec<(MergeSrcName, String)>,
    pub dropped: Vec<MergeEntry>,
}

/// The record of a merge-info job.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MergeInfo {
    pub merges: Vec<MergeEntry>,
}

fn src_name(s: &MergeSrcName) -> String {
    match &s.id {
        Some(id) => format!("{}[{id}]", s.file),
        None => s.file.clone(),
    }
}

/// Upstream's text of one merge (`seq` None: a dropped one, `[-]`).
fn format_entry(out: &mut String, e: &MergeEntry, seq: Option<usize>) {
    let m = &e.mid;
    match seq {
        Some(i) => write!(out, "[{i}] "),
        None => write!(out, "[-] "),
    }
    .ok();
    out.push_str(&m.kind);
    if let Some(id) = &m.id {
        write!(out, "[{id}]").ok();
    }
    out.push('\n');
    if let Some((bench, agent, hashd)) = &m.versions {
        if bench == agent && agent == hashd {
            writeln!(out, "  version: {bench}").ok();
        } else {
            writeln!(out, "  bench-version: {bench}").ok();
            writeln!(out, "  agent-version: {agent}").ok();
            writeln!(out, "  hashd-version: {hashd}").ok();
        }
    }
    writeln!(out, "  memory-profile: {}", m.mem_profile).ok();
    if let Some(s) = &m.storage_model {
        writeln!(out, "  storage: {s}").ok();
    }
    if let Some(f) = &m.storage_fwver {
        writeln!(out, "  fwver: {f}").ok();
    }
    if let Some(c) = &m.classifier {
        writeln!(out, "  classifier: {c}").ok();
    }
    out.push_str("  sources:\n");
    for s in &e.srcs {
        writeln!(out, "    + {}", src_name(s)).ok();
    }
    for (s, why) in &e.rejects {
        writeln!(out, "    - {} ({why})", src_name(s)).ok();
    }
    for d in &e.dropped {
        format_entry(out, d, None);
    }
}

/// Upstream's text of a merge-info record.
pub fn format_info(info: &MergeInfo) -> String {
    let mut out = String::new();
    for (i, e) in info.merges.iter().enumerate() {
        format_entry(&mut out, e, Some(i));
    }
    out
}

const DOC: &str = "\
merge-info: not a benchmark. Upstream's `merge` records in it which result files and jobs
it combined, grouped by kind, versions, memory profile and storage, which it rejected
and why, and which groups lost to the one kept. rackbench's `merge SOURCE...` writes
one the same way, and `format` and `summary` print a merged result file's merge-info
as upstream does.
";

/// The `merge-info` pseudo bench.
pub struct MergeInfoBench;

static INFO: BenchInfo = BenchInfo {
    kind: "merge-info",
    about: "",
    doc: DOC,
    hard: &[],
    soft: &[],
};

impl Bench for MergeInfoBench {
    fn info(&self) -> &'static BenchInfo {
        &INFO
    }
    /// Empty: left out of the bench lists, as upstream.
    fn check(&self, spec: &JobSpec) -> Result<(), crate::Error> {
        match spec.props.iter().flat_map(|g| g.keys()).next() {
            Some(k) => Err(crate::Error::Input(format!(
                "merge-info takes no property (got {k:?})"
            ))),
            None => Ok(()),
        }
    }
    fn refuse_run(&self) -> Option<&'static str> {
        Some(
            "merge-info is not an actual benchmark: upstream's merge writes it; format it \
             with `format merge-info`",
        )
    }
    fn run(&self, _spec: &JobSpec, _ctx: &mut Ctx) -> Result<Outcome, crate::Error> {
        Err(crate::Error::Input(
            self.refuse_run().unwrap_or_default().into(),
        ))
    }
    fn format(&self, d: &JobData, _full: bool) -> Result<String, crate::Error> {
        let rec = d
            .record
            .clone()
            .ok_or_else(|| crate::Error::Input("no merge-info record".into()))?;
        let info: MergeInfo = serde_json::from_value(rec)
            .map_err(|e| format!("merge-info record: {e}"))
            .map_err(|e| crate::Error::Input(e.to_string()))?;
        Ok(format_info(&info))
    }
    fn metrics(&self, _d: &JobData, _m: &mut JobMetrics) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_info_prints_as_upstream() {
        let rec = serde_json::json!({"merges": [{
            "mid": {"kind": "iocost-tune", "id": null,
                    "versions": ["2.2", "2.2", "2.2"], "mem_profile": 16,
                    "storage_model": "WDC SN720", "storage_fwver": null,
                    "classifier": null},
            "srcs": [{"file": "a.json", "kind": "iocost-tune", "id": null},
                     {"file": "b.json", "kind": "iocost-tune", "id": "x"}],
            "rejects": [[{"file": "c.json", "kind": "iocost-tune", "id": null},
                         "2 missed sysreqs"]],
            "dropped": [{
                "mid": {"kind": "iocost-tune", "id": null,
                        "versions": ["2.1", "2.2", "2.0"], "mem_profile": 8,
                        "storage_model": null, "storage_fwver": "F1",
                        "classifier": "big"},
                "srcs": [{"file": "d.json", "kind": "iocost-tune", "id": null}],
                "rejects": [], "dropped": []}]
        }]});
        let info: MergeInfo = serde_json::from_value(rec).unwrap();
        assert_eq!(
            format_info(&info),
            "[0] iocost-tune\n  version: 2.2\n  memory-profile: 16\n  storage: WDC SN720\n  sources:\n    + a.json\n    + b.json[x]\n    - c.json (2 missed sysreqs)\n\
             [-] iocost-tune\n  bench-version: 2.1\n  agent-version: 2.2\n  hashd-version: 2.0\n  memory-profile: 8\n  fwver: F1\n  classifier: big\n  sources:\n    + d.json\n"
        );
        let spec = crate::spec::parse("merge-info:x=1").unwrap();
        assert!(
            MergeInfoBench
                .check(&spec)
                .unwrap_err()
                .to_string()
                .contains("\"x\"")
        );
    }
}
