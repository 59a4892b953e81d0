//! `rackbench distbench analyze`: upstream Distbench's result analysis
//! (`analysis/results_conversion.py`), which turns a results file
//! (`TestSequenceResults`, as `*.pb` or `*.pb.gz`) into a folder tree of
//! text summaries: one per test, per client service, per client instance,
//! per server service and instance it talked to, and per RPC.
//!
//! The output is byte-for-byte upstream's, checked against its golden trees
//! (`tests/analyze.rs`), in its three formats ([`OutputFormat`]).
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
pub use output::OutputTree;

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
    #[error("--output_format '{0}' is not supported: use default, statistics or trace_context")]
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
/// is counted once, however many summaries include it.
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
    /// What happened to the samples.
    pub samples: SampleCounts,
}

/// Builds the summary tree of `results`.
pub fn analyze(results: &TestSequenceResults, opts: &Options) -> Result<Analysis, ResultProblem> {
    let mut output = OutputTree::default();
    let mut samples = SampleCounts::default();
    let mut overall = Vec::new();
    for (index, test) in results.test_results.iter().enumerate() {
        overall.extend(tree::add_test(
            &mut output,
            index,
            test,
            opts,
            &mut samples,
        )?);
    }
    samples.used = overall.len() as u64;
    // The overall summary is written even when it is empty.
    output.add(PathBuf::from("overall_summary.txt"), opts.render(&overall));
    Ok(Analysis {
        tree: output,
        tests: results.test_results.len(),
        samples,
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
