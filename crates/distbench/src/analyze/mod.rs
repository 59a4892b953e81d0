//! `rackbench distbench analyze`: upstream Distbench's result analysis
//! (`analysis/results_conversion.py`), which turns a results file
//! (`TestSequenceResults`, as `*.pb` or `*.pb.gz`) into a folder tree of
//! text summaries: one per test, per client service, per client instance,
//! per server service and instance it talked to, and per RPC.
//!
//! The output is byte-for-byte upstream's, checked against its golden trees
//! (`tests/analyze.rs`), in its three formats ([`OutputFormat`]). So is what
//! upstream prints ([`UpstreamReport`]): the summaries it skipped for being
//! empty and its sample counts, which count a sample once per summary
//! including it; rackbench's own counts ([`SampleCounts`]) count it once.
//!
//! - [`analyze`] builds the tree in memory from decoded results;
//! - [`analyze_file`] reads a results file, analyzes it and writes the tree;
//! - [`Invocation`] is the command line (`--input_file`, `--output_directory`,
//!   `--output_format`, `--supress_header`, `--include_warmups`).
//!
//! The layout of the tree and the upstream quirks it keeps are described in
//! the `tree` module; the numbers of the statistics format in `stats`.

mod cli;
mod format;
mod output;
mod stats;
mod tree;

pub use cli::Invocation;
pub use format::{Options, OutputFormat};
pub use output::{OutputTree, UpstreamReport};

use crate::files::{self, FileError};
use crate::proto::TestSequenceResults;
use std::path::{Path, PathBuf};

/// Why an analysis could not be done.
#[derive(Debug, thiserror::Error)]
pub enum AnalyzeError {
    /// The command line is wrong (a missing or unknown flag); the message
    /// is the usage error.
    #[error("{0}")]
    Usage(String),
    /// `--output_format` names no format.
    #[error(
        "--output_format '{0}' is not supported: use default, statistics, trace_context or homa"
    )]
    UnknownFormat(String),
    /// The results file cannot be read or decoded; the message names it.
    #[error("--input_file {0}")]
    Read(FileError),
    /// The results decode but cannot be laid out as a tree.
    #[error("--input_file {input}: {problem}")]
    BadResult {
        /// The results file.
        input: PathBuf,
        /// What is wrong in it.
        problem: ResultProblem,
    },
    /// A folder or file of the output cannot be written.
    #[error("cannot write {path}: {error}")]
    Write {
        /// The folder or file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
}

/// Results that decode but cannot be turned into a tree.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResultProblem {
    /// An RPC description names a client or server service that the
    /// traffic config does not define, so its instances are unknown.
    #[error(
        "test {test}: the RPC descriptions name service '{service}', which the traffic config does not define"
    )]
    UnknownService {
        /// The test's index in the results.
        test: usize,
        /// The undefined service.
        service: String,
    },
    /// A name that becomes a folder or file name would not be one path
    /// component inside the output folder.
    #[error(
        "test {test}: {what} {name:?} cannot name a file or folder (it is empty, '.', '..' or holds a path separator)"
    )]
    UnsafeName {
        /// The test's index in the results.
        test: usize,
        /// What the name is of (`"RPC name"`, `"client service name"`, ...).
        what: &'static str,
        /// The name.
        name: String,
    },
    /// The logs hold an RPC index that has no RPC description.
    #[error(
        "test {test}: the logs of {client} -> {peer} hold RPC index {index}, but the traffic config has {count} RPC descriptions"
    )]
    RpcIndex {
        /// The test's index in the results.
        test: usize,
        /// The client instance.
        client: String,
        /// The server instance.
        peer: String,
        /// The RPC index found in the logs.
        index: i32,
        /// How many RPC descriptions there are.
        count: usize,
    },
}

/// What happened to the successful RPC samples of the results; each sample
/// is counted once, however many summaries include it (unlike upstream's
/// counts, in [`UpstreamReport`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SampleCounts {
    /// Every successful RPC sample in the logs.
    pub total: u64,
    /// Samples of warm-up iterations (left out unless warm-ups are included).
    pub warmup: u64,
    /// Samples the trace-context format left out for lacking an action
    /// iteration.
    pub untraced: u64,
    /// Samples in the summaries (what `overall_summary.txt` holds).
    pub used: u64,
}

/// The result of an analysis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Analysis {
    /// The summary files.
    pub tree: OutputTree,
    /// How many tests the results hold.
    pub tests: usize,
    /// What happened to the samples, each counted once (rackbench's own
    /// summary line).
    pub samples: SampleCounts,
    /// What upstream's script prints on stdout: its empty summaries and its
    /// sample counts, with its definitions.
    pub upstream: UpstreamReport,
}

/// Builds the summary tree of `results`.
pub fn analyze(results: &TestSequenceResults, opts: &Options) -> Result<Analysis, ResultProblem> {
    let mut out = output::Builder::new(*opts);
    let mut overall = output::Summary::default();
    for (index, test) in results.test_results.iter().enumerate() {
        overall.append(tree::add_test(&mut out, index, test)?);
    }
    let (tree, upstream, samples) = out.finish(&overall);
    Ok(Analysis {
        tree,
        tests: results.test_results.len(),
        samples,
        upstream,
    })
}

/// Reads a results file in any encoding `files` knows (binary, gzip or
/// text).
pub fn read_results(input: &Path) -> Result<TestSequenceResults, AnalyzeError> {
    files::read(input).map_err(AnalyzeError::Read)
}

/// Reads `input` and builds its summary tree, without writing anything.
pub fn analyze_input(input: &Path, opts: &Options) -> Result<Analysis, AnalyzeError> {
    analyze(&read_results(input)?, opts).map_err(|problem| AnalyzeError::BadResult {
        input: input.to_path_buf(),
        problem,
    })
}

/// Reads `input`, analyzes it and writes the tree under `output_dir`
/// (created if needed). Nothing is written when the input is bad.
pub fn analyze_file(
    input: &Path,
    output_dir: &Path,
    opts: &Options,
) -> Result<Analysis, AnalyzeError> {
    let analysis = analyze_input(input, opts)?;
    analysis.tree.write_to(output_dir)?;
    Ok(analysis)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{
        DistributedSystemDescription, PeerPerformanceLog, RpcPerformanceLog, RpcSample, RpcSpec,
        ServiceLogs, ServicePerformanceLog, ServiceSpec, TestResult, TraceContext,
    };
    use std::collections::BTreeMap;

    fn sample(size: i64, warmup: bool, iteration: Option<i64>) -> RpcSample {
        RpcSample {
            request_size: Some(size),
            latency_ns: Some(1000 + size),
            warmup: Some(warmup),
            trace_context: iteration.map(|i| TraceContext {
                action_iterations: vec![i],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// Two client instances and two server instances, RPCs `get` (index 0)
    /// and `put` (index 1):
    ///
    /// - client/0 -> server/0: get 3 samples (1 warm-up) and a failed one,
    ///   put 2 samples with a trace context;
    /// - client/0 -> server/1: get 2 samples, both warm-ups;
    /// - client/1 -> server/0: put 1 sample;
    /// - client/1 -> server/1: nothing.
    ///
    /// 8 successful samples, 3 of them warm-ups.
    fn two_by_two() -> TestResult {
        let service = |name: &str| ServiceSpec {
            name: Some(name.into()),
            count: Some(2),
            ..Default::default()
        };
        let rpc = |name: &str| RpcSpec {
            name: Some(name.into()),
            client: vec!["client".into()],
            server: Some("server".into()),
            ..Default::default()
        };
        let list = |samples: Vec<RpcSample>, failed: Vec<RpcSample>| RpcPerformanceLog {
            successful_rpc_samples: samples,
            failed_rpc_samples: failed,
        };
        let peer = |rpcs: Vec<(i32, RpcPerformanceLog)>| PeerPerformanceLog {
            rpc_logs: rpcs.into_iter().collect(),
        };
        let instance = |peers: Vec<(&str, PeerPerformanceLog)>| ServicePerformanceLog {
            peer_logs: peers
                .into_iter()
                .map(|(p, log)| (p.to_string(), log))
                .collect(),
            ..Default::default()
        };
        let client0 = instance(vec![
            (
                "server/0",
                peer(vec![
                    (
                        0,
                        list(
                            vec![
                                sample(1, true, None),
                                sample(2, false, None),
                                sample(3, false, None),
                            ],
                            vec![sample(4, false, None)],
                        ),
                    ),
                    (
                        1,
                        list(
                            vec![sample(5, false, Some(0)), sample(6, false, Some(1))],
                            vec![],
                        ),
                    ),
                ]),
            ),
            (
                "server/1",
                peer(vec![(
                    0,
                    list(vec![sample(7, true, None), sample(8, true, None)], vec![]),
                )]),
            ),
        ]);
        let client1 = instance(vec![(
            "server/0",
            peer(vec![(1, list(vec![sample(9, false, None)], vec![]))]),
        )]);
        TestResult {
            traffic_config: Some(DistributedSystemDescription {
                services: vec![service("client"), service("server")],
                rpc_descriptions: vec![rpc("get"), rpc("put")],
                ..Default::default()
            }),
            service_logs: Some(ServiceLogs {
                instance_logs: BTreeMap::from([
                    ("client/0".to_string(), client0),
                    ("client/1".to_string(), client1),
                ]),
            }),
            ..Default::default()
        }
    }

    fn sequence(tests: usize) -> TestSequenceResults {
        TestSequenceResults {
            test_results: vec![two_by_two(); tests],
        }
    }

    fn empty_lines(a: &Analysis) -> Vec<String> {
        a.upstream
            .empty
            .iter()
            .map(|p| p.display().to_string())
            .collect()
    }

    /// Every successful list lands in 7 summaries (test, client, client
    /// instance, service, RPC, pair, overall): upstream counts 8 samples
    /// 56 times and 3 warm-ups 21 times; failed samples never count.
    #[test]
    fn upstream_counts_a_sample_once_per_summary() {
        let a = analyze(&sequence(1), &Options::default()).unwrap();
        assert_eq!(a.upstream.total_samples, 56);
        assert_eq!(a.upstream.warmup_samples, 21);
        assert_eq!(a.upstream.skipped_samples, Some(21));
        assert_eq!(
            empty_lines(&a),
            [
                "test_0/client/0/server/1/get.txt",
                "test_0/client/0/server/1/pairwise_summary.txt",
                "test_0/client/1/server/1/pairwise_summary.txt",
            ]
        );
        // rackbench's own counts: each sample once.
        assert_eq!(
            a.samples,
            SampleCounts {
                total: 8,
                warmup: 3,
                untraced: 0,
                used: 5,
            }
        );
        assert_eq!(
            a.upstream.stdout(Path::new("out")),
            "Empty output out/test_0/client/0/server/1/get.txt skipped...\n\
             Empty output out/test_0/client/0/server/1/pairwise_summary.txt skipped...\n\
             Empty output out/test_0/client/1/server/1/pairwise_summary.txt skipped...\n\
             Total samples:  56\n\
             Warmup samples:  21\n\
             Skipped samples:  21\n"
        );
    }

    #[test]
    fn included_warmups_are_still_counted_but_not_skipped() {
        let opts = Options {
            include_warmups: true,
            ..Options::default()
        };
        let a = analyze(&sequence(1), &opts).unwrap();
        assert_eq!(a.upstream.total_samples, 56);
        assert_eq!(a.upstream.warmup_samples, 21);
        assert_eq!(a.upstream.skipped_samples, None);
        assert_eq!(
            empty_lines(&a),
            ["test_0/client/1/server/1/pairwise_summary.txt"]
        );
        // The output folder is spelled as given, trailing `/` and all.
        assert_eq!(
            a.upstream.stdout(Path::new("res/")),
            "Empty output res//test_0/client/1/server/1/pairwise_summary.txt skipped...\n\
             Total samples:  56\n\
             Warmup samples:  21\n"
        );
    }

    /// The trace-context format leaves out samples without a trace
    /// context, but they are counted all the same; so are the summaries
    /// they leave empty.
    #[test]
    fn untraced_samples_count_and_leave_summaries_empty() {
        let opts = Options {
            format: OutputFormat::TraceContext,
            ..Options::default()
        };
        let a = analyze(&sequence(1), &opts).unwrap();
        assert_eq!(
            (
                a.upstream.total_samples,
                a.upstream.warmup_samples,
                a.upstream.skipped_samples
            ),
            (56, 21, Some(21))
        );
        assert_eq!(a.samples.untraced, 3);
        assert_eq!(a.samples.used, 2);
        assert_eq!(
            empty_lines(&a),
            [
                "test_0/client/0/server/0/get.txt",
                "test_0/client/0/server/1/get.txt",
                "test_0/client/0/server/1/pairwise_summary.txt",
                "test_0/client/1/client_instance_summary.txt",
                "test_0/client/1/server/service_summary.txt",
                "test_0/client/1/server/0/put.txt",
                "test_0/client/1/server/0/pairwise_summary.txt",
                "test_0/client/1/server/1/pairwise_summary.txt",
            ]
        );
    }

    /// Every test adds its own counts and empty summaries, in test order;
    /// the overall summary is written even when empty and never reported.
    #[test]
    fn tests_add_up_and_the_overall_summary_is_always_written() {
        // What upstream's script printed for these results, written to a
        // .pb and run with --output_directory=out.
        let a = analyze(&sequence(2), &Options::default()).unwrap();
        assert_eq!(
            a.upstream.stdout(Path::new("out")),
            "Empty output out/test_0/client/0/server/1/get.txt skipped...\n\
             Empty output out/test_0/client/0/server/1/pairwise_summary.txt skipped...\n\
             Empty output out/test_0/client/1/server/1/pairwise_summary.txt skipped...\n\
             Empty output out/test_1/client/0/server/1/get.txt skipped...\n\
             Empty output out/test_1/client/0/server/1/pairwise_summary.txt skipped...\n\
             Empty output out/test_1/client/1/server/1/pairwise_summary.txt skipped...\n\
             Total samples:  112\n\
             Warmup samples:  42\n\
             Skipped samples:  42\n"
        );

        let none = analyze(&TestSequenceResults::default(), &Options::default()).unwrap();
        assert!(none.upstream.empty.is_empty());
        assert!(none.tree.get("overall_summary.txt").is_some());
        assert_eq!(
            none.upstream.stdout(Path::new("o")),
            "Total samples:  0\nWarmup samples:  0\nSkipped samples:  0\n"
        );
    }
}
