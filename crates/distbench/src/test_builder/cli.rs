//! `rackbench distbench test_builder ...`: validation and the run behind the
//! workload's subcommand.

use super::args::{Invocation, Output};
use super::{Environment, Generated, check_invocation, generate, render, write_dir};
use crate::files::{self, Encoding};
use crate::proto::{TestSequence, TestSequenceResults};
use harness::Outcome;
use std::path::Path;

/// Checks the command without writing anything: the flags, the output
/// directory, and that every test can be built.
pub(crate) fn validate(inv: &Invocation) -> anyhow::Result<()> {
    check_invocation(inv)?;
    generate(inv, &Environment::from_process())?;
    Ok(())
}

/// Generates the configs and writes them to `-o DIR`, or prints the
/// sequence on stdout; `args` (the arguments after `test_builder`) go into
/// the `# produced by` line.
pub(crate) fn run(inv: &Invocation, args: &[String]) -> anyhow::Result<Outcome> {
    check_invocation(inv)?;
    let generated = generate(inv, &Environment::from_process())?;
    for w in &generated.warnings {
        eprintln!("warning: {w}");
    }
    match &inv.output {
        Output::Stdout => {
            let tests: Vec<_> = generated.tests.iter().map(|t| &t.test).collect();
            print!("{}", render(&tests, args)?);
        }
        Output::Dir(dir) => {
            for path in write_dir(dir, &generated, &inv.label_prefix, args)? {
                eprintln!("test_builder: wrote {}", path.display());
            }
        }
    }
    if let (Some(sequencer), Output::Dir(dir)) = (&inv.sequencer, &inv.output)
        && let Some(e) = run_on_sequencer(sequencer, dir, &generated)?
    {
        eprintln!("test_builder: {e}");
        return Ok(Outcome::helper(false));
    }
    Ok(Outcome::helper(true))
}

/// Runs each generated test on the sequencer at `addr`, one at a time,
/// writing `DIR/<file stem>.pb.gz` (atomically) after each; a test whose
/// results file exists is skipped. Returns the error that stopped the
/// run, if one did.
fn run_on_sequencer(
    addr: &str,
    dir: &Path,
    generated: &Generated,
) -> anyhow::Result<Option<String>> {
    let rt = rpc::runtime(2, "test-builder")?;
    for t in &generated.tests {
        let stem = t.file_name.strip_suffix(".config").unwrap_or(&t.file_name);
        let out = dir.join(format!("{stem}.pb.gz"));
        if out.exists() {
            eprintln!(
                "test_builder: {} exists, skipping {}",
                out.display(),
                t.test_name
            );
            continue;
        }
        eprintln!("test_builder: running {} on {addr}", t.test_name);
        let seq = TestSequence {
            tests: vec![t.test.clone()],
            tests_setting: None,
        };
        let mut results = TestSequenceResults::default();
        let run = rt.block_on(crate::cluster::run_tests(addr, &seq, |_, r| {
            for line in &r.log_summary {
                eprintln!("{line}");
            }
            results.test_results.push(r.clone());
            Ok(())
        }));
        if let Err(e) = run {
            return Ok(Some(e.to_string()));
        }
        files::write(&out, &results, Encoding::GzipBinary)?;
    }
    Ok(None)
}
