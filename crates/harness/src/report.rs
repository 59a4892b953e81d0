//! The report JSON, in benchpress' shape, one per job and iteration.

use crate::job::Job;
use crate::machine::MachineInfo;
use crate::vars::Resolved;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// One report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// One string per arg template after var substitution, empty ones kept:
    /// benchpress' `job.args`.
    pub benchmark_args: Vec<String>,
    pub benchmark_desc: String,
    /// `"name: options"` per hook.
    pub benchmark_hooks: Vec<String>,
    pub benchmark_name: String,
    pub machines: Vec<MachineInfo>,
    /// `L1d cache` .. `L3 cache` in lscpu's wording.
    pub metadata: BTreeMap<String, String>,
    pub metrics: Value,
    /// 8 hex characters shared by all jobs of one invocation.
    pub run_id: String,
    /// Unix seconds.
    pub timestamp: u64,
    /// False when the job failed, timed out or was interrupted; `metrics`
    /// then holds what was measured so far.
    pub success: bool,
}

/// Recursively sorts object keys (independent of serde_json's map flavour).
pub fn sort_keys(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            let sorted: BTreeMap<String, Value> =
                m.into_iter().map(|(k, v)| (k, sort_keys(v))).collect();
            Value::Object(sorted.into_iter().collect::<Map<_, _>>())
        }
        Value::Array(a) => Value::Array(a.into_iter().map(sort_keys).collect()),
        other => other,
    }
}

/// What one invocation stamps on each of its reports: the host, its caches,
/// the run id and the time.
#[derive(Debug, Clone, Copy)]
pub struct Stamp<'a> {
    pub machine: &'a MachineInfo,
    pub metadata: &'a BTreeMap<String, String>,
    pub run_id: &'a str,
    /// Unix seconds.
    pub timestamp: u64,
}

impl Report {
    /// The report of one run of `job` resolved as `resolved`, with the
    /// workload's `metrics` of its record.
    pub fn for_job(
        job: &Job,
        resolved: &Resolved,
        stamp: Stamp<'_>,
        metrics: Map<String, Value>,
        success: bool,
    ) -> Report {
        Report {
            benchmark_args: resolved.args.clone(),
            benchmark_desc: job.description.clone(),
            benchmark_hooks: resolved.hooks.iter().map(|h| h.describe()).collect(),
            benchmark_name: job.name.clone(),
            machines: vec![stamp.machine.clone()],
            metadata: stamp.metadata.clone(),
            metrics: Value::Object(metrics),
            run_id: stamp.run_id.to_string(),
            timestamp: stamp.timestamp,
            success,
        }
    }

    /// The report as a JSON value with sorted keys.
    pub fn to_value(&self) -> Value {
        sort_keys(serde_json::to_value(self).expect("reports serialise"))
    }

    /// Pretty (for terminals) or one line.
    pub fn render(&self, pretty: bool) -> String {
        let v = self.to_value();
        if pretty {
            serde_json::to_string_pretty(&v).expect("reports serialise")
        } else {
            serde_json::to_string(&v).expect("reports serialise")
        }
    }

    /// `<job>_metrics_<ts>_iter_<n>.json`.
    /// benchpress' name of the report: `<job>_metrics_<ts>_iter_<label>`,
    /// the label being benchpress' iteration number (`None` when it was
    /// not given, as benchpress writes it).
    pub fn file_name(&self, iteration: &str) -> String {
        format!(
            "{}_metrics_{}_iter_{}.json",
            self.benchmark_name.replace(' ', "_"),
            self.timestamp,
            iteration
        )
    }
}

/// A fresh run id: 8 hex characters.
pub fn new_run_id() -> String {
    format!("{:08x}", rand::random::<u32>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> Report {
        Report {
            benchmark_args: vec!["-p 1".into(), String::new()],
            benchmark_desc: "d".into(),
            benchmark_hooks: vec!["cpu-mpstat: {}".into()],
            benchmark_name: "calibrate".into(),
            machines: vec![MachineInfo::collect()],
            metadata: BTreeMap::from([(
                "L1d cache".to_string(),
                "96 KiB (2 instances)".to_string(),
            )]),
            metrics: json!({"z": 1, "a": {"y": 2, "b": 3}}),
            run_id: "0badc0de".into(),
            timestamp: 1_700_000_000,
            success: true,
        }
    }

    #[test]
    fn keys_are_sorted_at_every_level_and_shape_is_benchpress() {
        let text = sample().render(false);
        assert!(!text.contains('\n'));
        let keys: Vec<&str> = [
            "benchmark_args",
            "benchmark_desc",
            "benchmark_hooks",
            "benchmark_name",
            "machines",
            "metadata",
            "metrics",
            "run_id",
            "success",
            "timestamp",
        ]
        .to_vec();
        let mut last = 0;
        for k in keys {
            let at = text
                .find(&format!("\"{k}\""))
                .unwrap_or_else(|| panic!("missing {k}"));
            assert!(at >= last, "{k} out of order");
            last = at;
        }
        assert!(text.find("\"b\":3").unwrap() < text.find("\"y\":2").unwrap());
        let v: Value = serde_json::from_str(&text).unwrap();
        let m = &v["machines"][0];
        for k in [
            "cpu_architecture",
            "cpu_model",
            "hostname",
            "kernel_version",
            "mem_total_kib",
            "num_logical_cpus",
            "num_cpus_usable",
            "os_distro",
            "os_release_name",
            "threads_per_core",
        ] {
            assert!(!m[k].is_null(), "machines[0].{k}");
        }
        assert!(m["num_logical_cpus"].is_string());
        assert!(m["num_cpus_usable"].is_u64());
        assert!(sample().render(true).contains("\n  \"benchmark_args\""));
        assert_eq!(
            sample().file_name("2"),
            "calibrate_metrics_1700000000_iter_2.json"
        );
    }

    #[test]
    fn run_ids_are_8_hex() {
        let id = new_run_id();
        assert_eq!(id.len(), 8);
        assert!(id.chars().all(|c| c.is_ascii_hexdigit()));
    }
}
