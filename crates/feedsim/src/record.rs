//! What a FeedSim run keeps: the typed record ([`FeedSimRecord`]) of a
//! leaf, a search or an autoscale run, and the queries its metrics and
//! text are read through. Below the driver, the printer and the metrics.

use crate::cli::Threads;
use crate::proto::StatusReply;
use load::hostspeed::HostSpeed;
use load::search::{Phase, SearchOutcome};
use load::{Arrival, ProbeRecord, SloTarget};
use serde::{Deserialize, Serialize};

/// The version of [`FeedSimRecord`]; raise it when its shape changes.
pub const RECORD_VERSION: u32 = 2;

/// What a FeedSim run keeps with its stored run: everything its report's
/// metrics are computed from ([`FeedSimRecord::metrics`]) and its text
/// printed from (`printer::write_record`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum FeedSimRecord {
    /// `rackbench feedsim leaf`: the server, until it was stopped.
    Leaf(LeafRecord),
    /// One leaf searched (or run at fixed rates).
    Search(Box<SearchRun>),
    /// `--num-instances`: several leaves searched in parallel.
    Autoscale(Box<AutoscaleRun>),
}

/// A leaf server's run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeafRecord {
    /// The address it served on.
    pub addr: String,
    pub threads: Threads,
    /// How long building its datasets took.
    pub build_seconds: f64,
    pub dataset_bytes: u64,
    /// The process's resident memory and CPU time when it stopped.
    pub rss_bytes: u64,
    pub cpu_seconds: f64,
}

/// A single-instance driver run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SearchRun {
    pub target: SloTarget,
    /// The open-loop arrival process.
    pub arrival: Arrival,
    /// `--driver closed-compat`: its threads (4 connections each).
    #[serde(default)]
    pub compat_driver_threads: Option<usize>,
    /// The driver's threads (`-l`; absent in records made before it).
    #[serde(default)]
    pub driver_threads: Option<usize>,
    /// The leaf's threads.
    pub threads: Threads,
    pub instance: InstanceRecord,
    /// The host's speed over the run, when it was sampled.
    pub host_speed: Option<HostSpeed>,
}

/// Everything one instance measured (the whole run of a single-instance
/// search).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InstanceRecord {
    /// The search (or the fixed rates) and its result.
    pub outcome: SearchOutcome,
    /// The fixed-rate rerun (autoscale, when instances diverged).
    pub rerun: Option<Rerun>,
    /// The leaf's status before the first probe and after the last.
    pub status_before: Option<LeafStatus>,
    pub status_after: Option<LeafStatus>,
    /// Process CPU seconds of the driver over the run (meaningful alone).
    pub driver_cpu_seconds: f64,
    /// The probe CSV written.
    pub csv: String,
    /// Why some of its rows could not be written.
    pub csv_error: Option<String>,
    /// The log of the leaf process this driver started.
    pub leaf_log: Option<String>,
}

impl InstanceRecord {
    /// The probe the instance reports as its result: the rerun's when there
    /// was one (whether or not it met the target), else the search's final.
    pub fn reported_probe(&self) -> Option<&ProbeRecord> {
        match &self.rerun {
            Some(r) => r
                .outcome
                .probes
                .iter()
                .rev()
                .find(|p| p.phase == Phase::Fixed),
            None => self.outcome.final_probe.as_ref(),
        }
    }
}

/// Every instance run again at one fixed rate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Rerun {
    pub qps: f64,
    pub outcome: SearchOutcome,
}

/// The leaf's answer to its status RPC (the driver's copy of
/// [`StatusReply`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LeafStatus {
    pub ready: bool,
    pub rss_bytes: u64,
    /// CPU time (user + system) of the leaf process.
    pub cpu_seconds: f64,
    pub requests: u64,
    pub build_seconds: f64,
    pub serving_threads: u32,
    pub dataset_bytes: u64,
    /// Thread CPU seconds of each pipeline step since start.
    pub steps: Vec<StepCpuSeconds>,
    pub in_flight: u64,
    pub skipped_tasks: u64,
    pub anon_huge_bytes: u64,
    pub thp_mode: String,
    pub huge_pages_advised: bool,
    pub serving_model: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepCpuSeconds {
    pub step: String,
    pub cpu_seconds: f64,
}

impl From<StatusReply> for LeafStatus {
    fn from(s: StatusReply) -> Self {
        LeafStatus {
            ready: s.ready,
            rss_bytes: s.rss_bytes,
            cpu_seconds: s.cpu_seconds,
            requests: s.requests,
            build_seconds: s.build_seconds,
            serving_threads: s.serving_threads,
            dataset_bytes: s.dataset_bytes,
            steps: s
                .steps
                .into_iter()
                .map(|x| StepCpuSeconds {
                    step: x.step,
                    cpu_seconds: x.cpu_seconds,
                })
                .collect(),
            in_flight: s.in_flight,
            skipped_tasks: s.skipped_tasks,
            anon_huge_bytes: s.anon_huge_bytes,
            thp_mode: s.thp_mode,
            huge_pages_advised: s.huge_pages_advised,
            serving_model: s.serving_model,
        }
    }
}

/// An autoscale run: each instance and the driver process's CPU time.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AutoscaleRun {
    pub target: SloTarget,
    pub arrival: Arrival,
    /// `--driver closed-compat`: the first instance's driver threads.
    #[serde(default)]
    pub compat_driver_threads: Option<usize>,
    /// Each instance's driver threads (`-l`).
    #[serde(default)]
    pub driver_threads: Option<usize>,
    /// In order: the report names instance i `i + 1`.
    pub instances: Vec<AutoscaleInstance>,
    /// Process CPU seconds of the driver over the whole run.
    pub driver_cpu_seconds: f64,
    pub host_speed: Option<HostSpeed>,
    /// True when the run was stopped (Ctrl-C or the job's timeout).
    pub stopped: bool,
    /// Fixed rates (`-q`) instead of searches.
    #[serde(default)]
    pub fixed_qps: bool,
}

impl AutoscaleRun {
    /// The instances that succeeded and their reported results.
    pub fn finals(&self) -> Vec<InstanceFinal<'_>> {
        self.instances
            .iter()
            .filter_map(|i| match &i.result {
                InstanceResult::Ran(r) if r.outcome.success => {
                    r.reported_probe().map(|p| InstanceFinal {
                        label: &i.label,
                        reported: p,
                    })
                }
                _ => None,
            })
            .collect()
    }

    /// True when the run, or any instance's search, was interrupted.
    pub fn partial(&self) -> bool {
        self.stopped
            || self.instances.iter().any(|i| match &i.result {
                InstanceResult::Ran(r) => r.outcome.interrupted,
                InstanceResult::Failed(_) => false,
            })
    }

    /// Every instance succeeded and nothing was interrupted.
    pub fn success(&self) -> bool {
        self.finals().len() == self.instances.len() && !self.partial()
    }
}

/// One instance of an autoscale run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AutoscaleInstance {
    /// The instance's line prefix (`instance 2: `; empty alone).
    pub label: String,
    pub port: u16,
    /// The CPUs it was pinned to.
    pub cpus: Vec<usize>,
    pub threads: Threads,
    pub result: InstanceResult,
}

/// What an instance measured, or why it failed.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InstanceResult {
    Ran(Box<InstanceRecord>),
    Failed(String),
}

/// A successful instance's reported result.
#[derive(Debug, Clone)]
pub struct InstanceFinal<'a> {
    /// The instance's line prefix (`instance 2: `).
    pub label: &'a str,
    pub reported: &'a ProbeRecord,
}

/// The successful instances' summed requested and achieved QPS and their
/// mean latency (0 without any).
pub(crate) fn overall(finals: &[InstanceFinal<'_>]) -> (f64, f64, f64) {
    let sum_req = finals.iter().map(|f| f.reported.requested_qps).sum();
    let sum_ach = finals.iter().map(|f| f.reported.achieved_qps).sum();
    let avg_lat = if finals.is_empty() {
        0.0
    } else {
        finals
            .iter()
            .map(|f| f.reported.target_value_ms)
            .sum::<f64>()
            / finals.len() as f64
    };
    (sum_req, sum_ach, avg_lat)
}

/// Whether every fixed-rate probe of `probes` met the target; `None` when
/// there is none (a search).
pub fn fixed_target_met(probes: &[ProbeRecord]) -> Option<bool> {
    let mut fixed = probes.iter().filter(|p| p.phase == Phase::Fixed).peekable();
    fixed.peek()?;
    Some(fixed.all(|p| p.passed))
}
