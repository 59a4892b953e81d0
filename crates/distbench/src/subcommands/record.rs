//! What a run of a subcommand keeps with its stored run: the typed
//! records, built from a sequence's results, and the run's outcome.

use crate::metrics;
use crate::proto::TestSequenceResults;
use harness::Outcome;
use std::path::Path;

/// The version of [`DistbenchRecord`]; raise it when its shape changes.
pub const RECORD_VERSION: u32 = 2;

/// What a run keeps with its stored run, by subcommand: for `run_tests`
/// and `start_localhost`, what each finished test measured and its summary
/// lines (the results proto's `log_summary`, which upstream prints as
/// `Test summary:`; the raw samples stay in the run's outfile); for the
/// servers, where they listened and what they saw. The report's metrics
/// are derived from it ([`run_metrics`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "mode")]
pub enum DistbenchRecord {
    #[serde(rename = "run_tests")]
    RunTests(TestsRecord),
    /// `start_localhost` running tests.
    #[serde(rename = "start_localhost")]
    Localhost(TestsRecord),
    /// `start_localhost` without tests: served until stopped.
    #[serde(rename = "start_localhost_serve")]
    LocalhostServe { address: String, nodes: usize },
    #[serde(rename = "test_sequencer")]
    Sequencer(SequencerRecord),
    #[serde(rename = "node_manager")]
    NodeManager(NodeManagerRecord),
    #[serde(rename = "rpc_server")]
    RpcServer { address: String, response_size: i32 },
}

/// A run of tests.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TestsRecord {
    pub tests_planned: usize,
    pub tests: Vec<TestRecord>,
    /// What stopped the sequence, if something did.
    pub error: Option<String>,
    /// Stopped by Ctrl-C or the job's timeout.
    pub interrupted: bool,
    /// The results file, as written (resolved against the metrics folder).
    pub outfile: Option<String>,
    /// `start_localhost`'s node managers.
    pub nodes: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TestRecord {
    pub name: String,
    pub summary: Vec<String>,
    pub figures: metrics::TestFigures,
}

/// A `test_sequencer` run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SequencerRecord {
    pub address: String,
    pub local_nodes: usize,
    /// Node managers registered when it stopped.
    pub registered_nodes: usize,
}

/// A `node_manager` run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NodeManagerRecord {
    pub node_alias: String,
    pub test_sequencer: String,
    pub control_address: String,
    /// Stopped by the sequencer's shutdown rather than Ctrl-C.
    pub shutdown_by_sequencer: bool,
}

impl TestsRecord {
    /// Whether every planned test ran to its end.
    pub fn success(&self) -> bool {
        self.error.is_none() && !self.interrupted && self.tests.len() == self.tests_planned
    }
}

/// The record of a run of tests.
pub(super) fn tests_record(
    results: &TestSequenceResults,
    planned: usize,
    error: Option<String>,
    interrupted: bool,
    outfile: Option<&Path>,
    nodes: Option<usize>,
) -> TestsRecord {
    TestsRecord {
        tests_planned: planned,
        tests: results
            .test_results
            .iter()
            .map(|r| TestRecord {
                name: metrics::test_name(r),
                summary: r.log_summary.clone(),
                figures: metrics::test_figures(r),
            })
            .collect(),
        error,
        interrupted,
        outfile: outfile.map(|p| p.display().to_string()),
        nodes,
    }
}

/// A measured run's outcome.
pub(super) fn measured(success: bool, r: &DistbenchRecord) -> Outcome {
    Outcome::measured(success, harness::Record::of("distbench", RECORD_VERSION, r))
}
