//! The `run_tests` runner: sends a test sequence to a sequencer and saves
//! its results as each test ends.

use super::cli::RunTestsArgs;
use super::drive::ResultsOut;
use super::record::{DistbenchRecord, measured, tests_record};
use super::render::print_summary;
use super::runtime;
use crate::cluster;
use crate::files;
use crate::proto::{TestSequence, TestSequenceResults};
use anyhow::Context;
use harness::{Outcome, RunContext};
use std::time::Duration;

/// `run_tests`.
pub fn run_tests(a: &RunTestsArgs, ctx: &RunContext) -> anyhow::Result<Outcome> {
    let mut seq = run_tests_input(a)?;
    // As upstream: whole seconds replace every test_timeout; 0 replaces
    // nothing.
    if let Some(secs) = a.max_test_duration.filter(|s| *s != 0) {
        for t in &mut seq.tests {
            t.attributes.insert("test_timeout".into(), secs.to_string());
        }
    }
    let outfile = ResultsOut::of(&a.outfile, ctx);
    let rt = runtime()?;
    let mut results = TestSequenceResults::default();
    let run = rt.block_on(async {
        let fut = cluster::run_tests(&a.test_sequencer, &seq, |_, r| {
            print_summary(r, None);
            results.test_results.push(r.clone());
            outfile
                .save_partial(&results, a.binary_output)
                .map_err(|e| crate::Error::Host(format!("{e:#}")))?;
            Ok(())
        });
        tokio::pin!(fut);
        loop {
            tokio::select! {
                r = &mut fut => return Some(r),
                () = tokio::time::sleep(Duration::from_millis(100)) => {
                    if ctx.cancel.is_stopped() {
                        return None;
                    }
                }
            }
        }
    });
    let (error, interrupted) = match run {
        Some(Ok(())) => (None, false),
        Some(Err(e)) => (Some(e.to_string()), false),
        None => (None, true),
    };
    if let Some(e) = &error {
        eprintln!("run_tests: {e}");
    }
    // A failed sequence keeps what was saved after each finished test
    // (nothing when none finished: no empty results file), and prints no
    // results, as upstream's run_tests writes none when the RPC fails.
    let write = error.is_none() && (!interrupted || !results.test_results.is_empty());
    if write && let Err(e) = outfile.finish(&results, a.binary_output) {
        eprintln!("run_tests: unable to save the results: {e:#}");
        return Ok(measured(
            false,
            &DistbenchRecord::RunTests(tests_record(
                &results,
                seq.tests.len(),
                Some(format!("unable to save the results: {e:#}")),
                interrupted,
                None,
                None,
            )),
        ));
    }
    let r = tests_record(
        &results,
        seq.tests.len(),
        error,
        interrupted,
        outfile.file(),
        None,
    );
    Ok(measured(r.success(), &DistbenchRecord::RunTests(r)))
}

/// The sequence `run_tests` sends: `--infile`, else standard input (an
/// empty input is an empty sequence, which only checks the connection, or
/// carries `tests_setting` alone, as upstream's scripts use it).
pub fn run_tests_input(a: &RunTestsArgs) -> anyhow::Result<TestSequence> {
    match &a.infile {
        Some(f) => {
            let seq: TestSequence = files::read(f)?;
            if !seq.tests.is_empty() {
                return crate::check::load_checked(f);
            }
            Ok(seq)
        }
        None => {
            use std::io::Read;
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("cannot read the test sequence from standard input")?;
            let seq = crate::textproto::parse_test_sequence(&text, "<stdin>")?;
            crate::check::validate(&seq, "<stdin>").map_err(anyhow::Error::msg)?;
            Ok(seq)
        }
    }
}
