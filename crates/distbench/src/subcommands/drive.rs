//! What the runners share besides the tokio runtime (the parent's
//! `runtime`): waiting for Ctrl-C (or a shutdown), running one test on a
//! local cluster until stopped, and where the results go.

use crate::cluster::LocalCluster;
use crate::files::{self, Encoding};
use crate::proto::{TestResult, TestSequenceResults};
use anyhow::Context;
use harness::RunContext;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where `run_tests` and `test_preview` put the results.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResultsOut {
    /// `--outfile=""`: nowhere.
    Nowhere,
    /// Standard output, once the sequence is done.
    Stdout,
    /// A file, rewritten (atomically) after each test.
    File(PathBuf),
}

impl ResultsOut {
    /// `--outfile` as given; a relative file goes in the run's metrics
    /// folder.
    pub fn of(outfile: &str, ctx: &RunContext) -> Self {
        match outfile {
            "" => ResultsOut::Nowhere,
            "/dev/stdout" | "-" => ResultsOut::Stdout,
            f => ResultsOut::File(ctx.output_path(Path::new(f))),
        }
    }

    /// Saves the results so far to a file.
    pub(super) fn save_partial(
        &self,
        results: &TestSequenceResults,
        binary: bool,
    ) -> anyhow::Result<()> {
        match self {
            ResultsOut::File(p) => save(p, results, binary),
            _ => Ok(()),
        }
    }

    /// Writes the final results: to standard output (text, or binary with
    /// `--binary_output`) or the file.
    pub(super) fn finish(&self, results: &TestSequenceResults, binary: bool) -> anyhow::Result<()> {
        match self {
            ResultsOut::Nowhere => Ok(()),
            ResultsOut::File(p) => save(p, results, binary),
            ResultsOut::Stdout => {
                use std::io::Write;
                let bytes = files::encode(
                    results,
                    if binary {
                        Encoding::Binary
                    } else {
                        Encoding::Text
                    },
                )
                .map_err(anyhow::Error::msg)?;
                let mut out = std::io::stdout().lock();
                out.write_all(&bytes)
                    .and_then(|()| out.flush())
                    .context("cannot write the results to standard output")
            }
        }
    }

    /// The file, for the record.
    pub(super) fn file(&self) -> Option<&Path> {
        match self {
            ResultsOut::File(p) => Some(p),
            _ => None,
        }
    }
}

/// Writes the results (atomically, as every results file).
pub(super) fn save(path: &Path, results: &TestSequenceResults, binary: bool) -> anyhow::Result<()> {
    let encoding = match Encoding::from_path(path) {
        Encoding::Text if binary => Encoding::Binary,
        e => e,
    };
    files::write(path, results, encoding)?;
    Ok(())
}

/// Waits for Ctrl-C (the harness's stop flag) or `notify`; true for notify.
pub(super) async fn wait_for_stop(
    ctx: &RunContext,
    notify: Option<std::sync::Arc<tokio::sync::Notify>>,
) -> bool {
    let notified = async {
        match notify {
            Some(n) => n.notified().await,
            None => futures::future::pending().await,
        }
    };
    tokio::pin!(notified);
    loop {
        tokio::select! {
            () = &mut notified => return true,
            () = tokio::time::sleep(Duration::from_millis(100)) => {
                if ctx.cancel.is_stopped() {
                    return false;
                }
            }
        }
    }
}

/// Runs one test on a local cluster; Ctrl-C (the harness's stop flag)
/// cancels its traffic, and the test ends with what it measured
/// (`interrupted` is then set).
pub(super) async fn run_test_until_stopped(
    cluster: &LocalCluster,
    test: &crate::proto::DistributedSystemDescription,
    ctx: &RunContext,
    interrupted: &mut bool,
) -> Result<TestResult, String> {
    let fut = cluster.run_test(test);
    tokio::pin!(fut);
    loop {
        tokio::select! {
            r = &mut fut => return r.map_err(String::from),
            () = tokio::time::sleep(Duration::from_millis(100)), if !*interrupted => {
                if ctx.cancel.is_stopped() {
                    *interrupted = true;
                    for n in &cluster.nodes {
                        n.node.cancel_now().await;
                    }
                }
            }
        }
    }
}
