//! `rackbench distbench test_builder ...`: validation and the run behind the
//! workload's subcommand.

use super::args::{Invocation, Output};
use super::{Environment, check_invocation, generate, render, write_dir};
use harness::Outcome;
use serde_json::{Map, json};

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
    let mut files = Vec::new();
    match &inv.output {
        Output::Stdout => {
            let tests: Vec<_> = generated.tests.iter().map(|t| &t.test).collect();
            print!("{}", render(&tests, args)?);
        }
        Output::Dir(dir) => {
            for path in write_dir(dir, &generated, &inv.label_prefix, args)? {
                eprintln!("test_builder: wrote {}", path.display());
                files.push(path.display().to_string());
            }
        }
    }
    let names: Vec<&str> = generated
        .tests
        .iter()
        .map(|t| t.test_name.as_str())
        .collect();
    let mut metrics = Map::new();
    metrics.insert("tests".into(), json!(generated.tests.len()));
    metrics.insert("test_names".into(), json!(names));
    metrics.insert("files".into(), json!(files));
    Ok(Outcome {
        metrics,
        success: true,
    })
}
