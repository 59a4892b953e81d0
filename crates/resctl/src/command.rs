//! `rackbench resctl ...`: the workload as the harness runs it.

use harness::{Outcome, RunContext, Workload};

/// resctl-bench and hashd.
pub struct Resctl;

const HELP: &str = "\
rackbench resctl SUBCOMMAND ...

Subcommands:
  hashd [OPTIONS]    the latency-sensitive workload simulator (rd-hashd's model);
                     `rackbench resctl hashd --help` lists its options

The resctl-bench commands (run, format, summary, deps, doc) are being built.";

impl Workload for Resctl {
    fn name(&self) -> &'static str {
        "resctl"
    }

    fn description(&self) -> &'static str {
        "resctl-bench: resource-control benchmarks around hashd, a latency-sensitive workload simulator"
    }

    fn help(&self) -> String {
        HELP.to_string()
    }

    fn validate(&self, args: &[String]) -> anyhow::Result<()> {
        match args.first().map(String::as_str) {
            Some("hashd") => {
                crate::hashd::command::parse(&args[1..])?;
                Ok(())
            }
            Some(other) => anyhow::bail!(
                "resctl: unknown subcommand {other:?}: expected `hashd` (see `rackbench resctl --help`)"
            ),
            None => anyhow::bail!("resctl: no subcommand: expected `hashd`\n\n{HELP}"),
        }
    }

    fn run(&self, ctx: &RunContext, args: &[String]) -> anyhow::Result<Outcome> {
        self.validate(args)?;
        let (metrics, success) = crate::hashd::command::run(&args[1..], &ctx.cancel)?;
        Ok(Outcome { metrics, success })
    }
}
