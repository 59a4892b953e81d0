//! The runners of tests in this process, on a local cluster:
//! `test_preview` (one node manager) and `start_localhost` (a sequencer
//! and N node managers).

use super::cli::{LocalhostArgs, TestPreviewArgs};
use super::drive::{ResultsOut, run_test_until_stopped, save, wait_for_stop};
use super::record::{DistbenchRecord, measured, tests_record};
use super::render::print_summary;
use super::runtime;
use crate::cluster::LocalCluster;
use crate::proto::{TestSequence, TestSequenceResults};
use crate::test_builder;
use anyhow::bail;
use harness::{Outcome, RunContext};

/// The sequence `test_preview` runs: every test's instances bundled on
/// node0 (a test's own bundles are replaced, with upstream's warning on
/// stdout).
pub fn preview_sequence(mut seq: TestSequence) -> TestSequence {
    for test in &mut seq.tests {
        if !test.node_service_bundles.is_empty() {
            println!("WARNING: node_service_bundles will be overwritten");
        }
        let services = test
            .services
            .iter()
            .flat_map(crate::placement::instance_names)
            .collect();
        test.node_service_bundles = [(
            "node0".to_string(),
            crate::proto::ServiceBundle { services },
        )]
        .into();
    }
    seq
}

/// `test_preview`.
pub fn run_test_preview(a: &TestPreviewArgs, ctx: &RunContext) -> anyhow::Result<Outcome> {
    let seq = preview_sequence(crate::check::load_checked(&a.infile)?);
    // Upstream's test_preview prints the results in text when --outfile is
    // empty (run_tests saves nothing then).
    let (outfile, binary) = if a.outfile.is_empty() {
        (ResultsOut::Stdout, false)
    } else {
        (ResultsOut::of(&a.outfile, ctx), a.binary_output)
    };
    let rt = runtime()?;
    let mut results = TestSequenceResults::default();
    let mut error = None;
    let mut interrupted = false;
    rt.block_on(async {
        let cluster = LocalCluster::start(1, 0)
            .await
            .map_err(anyhow::Error::msg)?;
        for test in &seq.tests {
            let r = run_test_until_stopped(&cluster, test, ctx, &mut interrupted).await;
            match r {
                Ok(mut r) => {
                    crate::sequencer::apply_tests_setting(&mut r, seq.tests_setting.as_ref());
                    results.test_results.push(r);
                    outfile.save_partial(&results, binary)?;
                }
                Err(e) => {
                    eprintln!("RunTestSequence failed with error:{e}");
                    error = Some(e);
                    break;
                }
            }
            if interrupted {
                break;
            }
        }
        cluster.stop().await;
        anyhow::Ok(())
    })?;
    if error.is_none() && !interrupted {
        outfile.finish(&results, binary)?;
        print!(
            "\nResult: Preview for {} was successful.\n\n",
            a.infile.display()
        );
    }
    let r = tests_record(
        &results,
        seq.tests.len(),
        error,
        interrupted,
        outfile.file(),
        Some(1),
    );
    Ok(measured(r.success(), &DistbenchRecord::RunTests(r)))
}

/// Checks the inputs of `start_localhost` without running anything.
pub fn localhost_tests(a: &LocalhostArgs) -> anyhow::Result<TestSequence> {
    if a.nodes == 0 {
        bail!("start_localhost: -n must be at least 1");
    }
    if let Some(f) = &a.infile {
        return crate::check::load_checked(f);
    }
    if a.pattern.is_empty() {
        return Ok(TestSequence::default());
    }
    let mut raw = vec!["-t".to_string(), a.test_duration.to_string()];
    raw.extend(a.pattern.iter().cloned());
    let inv = test_builder::args::parse(&raw)?;
    let generated = test_builder::generate(&inv, &test_builder::Environment::from_process())?;
    let seq = generated.sequence();
    crate::check::validate(&seq, "generated tests").map_err(anyhow::Error::msg)?;
    Ok(seq)
}

/// How long a test should take, for the progress display: its longest
/// action bounded by `iterations.max_duration_us` (0 when none is: such a
/// test ends with its iteration counts, which say nothing of time).
fn expected_duration(test: &crate::proto::DistributedSystemDescription) -> std::time::Duration {
    test.actions
        .iter()
        .filter_map(|a| a.iterations.as_ref()?.max_duration_us)
        .map(|us| std::time::Duration::from_micros(us.max(0) as u64))
        .max()
        .unwrap_or_default()
}

/// `start_localhost`.
pub fn run_localhost(a: &LocalhostArgs, ctx: &RunContext) -> anyhow::Result<Outcome> {
    let seq = localhost_tests(a)?;
    let rt = runtime()?;
    let outfile = ctx.output_path(&a.outfile);
    rt.block_on(async {
        let cluster = LocalCluster::start(a.nodes, a.port)
            .await
            .map_err(anyhow::Error::msg)?;
        eprintln!(
            "start_localhost: test_sequencer on {} with {} node managers",
            cluster.addr(),
            a.nodes
        );
        if seq.tests.is_empty() {
            let address = cluster.addr().to_string();
            wait_for_stop(ctx, None).await;
            cluster.stop().await;
            return Ok(measured(
                true,
                &DistbenchRecord::LocalhostServe {
                    address,
                    nodes: a.nodes,
                },
            ));
        }
        let mut results = TestSequenceResults::default();
        let mut error = None;
        let mut interrupted = false;
        let expected: Vec<std::time::Duration> = seq.tests.iter().map(expected_duration).collect();
        let progress = harness::progress::Progress::new("distbench", expected.iter().sum());
        for (i, test) in seq.tests.iter().enumerate() {
            progress.phase_for(
                &format!("test {}/{}: {}", i + 1, seq.tests.len(), test.name()),
                expected[i..].iter().sum(),
            );
            let r = run_test_until_stopped(&cluster, test, ctx, &mut interrupted).await;
            match r {
                Ok(mut r) => {
                    crate::sequencer::apply_tests_setting(&mut r, seq.tests_setting.as_ref());
                    print_summary(&r, Some(&progress));
                    results.test_results.push(r);
                    save(&outfile, &results, true)?;
                }
                Err(e) => {
                    eprintln!("start_localhost: {e}");
                    error = Some(e);
                    break;
                }
            }
            if interrupted {
                break;
            }
        }
        progress.finish();
        cluster.stop().await;
        let r = tests_record(
            &results,
            seq.tests.len(),
            error,
            interrupted,
            Some(&outfile),
            Some(a.nodes),
        );
        Ok(measured(r.success(), &DistbenchRecord::Localhost(r)))
    })
}
