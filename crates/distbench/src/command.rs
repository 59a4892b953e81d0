//! The `distbench` workload: upstream's command line (`distbench SUBCOMMAND
//! --flag=value ...`) behind rackbench's `Workload` trait. `check_test`,
//! `test_builder` and `analyze` work so far; the other upstream subcommands
//! say they are not implemented yet.

use crate::analyze;
use crate::subcommands;
use crate::test_builder;
use anyhow::bail;
use clap::Parser;
use harness::{Outcome, RunContext, Workload};
use serde_json::{Map, Value};
use std::path::PathBuf;

/// The `distbench` benchmark.
pub struct Distbench;

/// The subcommands rackbench runs, for error messages.
const IMPLEMENTED: &str = "check_test --infile FILE, test_builder PATTERN..., \
                           analyze --input_file F --output_directory D, \
                           test_sequencer --port P, node_manager --test_sequencer=H:P, \
                           run_tests --test_sequencer=H:P --infile F, \
                           test_preview --infile F, \
                           start_localhost -n N [--infile F | --pattern P], \
                           rpc_server --port P";

/// `check_test`: validates a test sequence without running it.
#[derive(Debug, Parser)]
#[command(
    name = "rackbench distbench check_test",
    about = "Check a Distbench test sequence (textproto, binary or .gz) without running it"
)]
struct CheckTestArgs {
    /// The test sequence file (textproto, binary or .gz); standard input
    /// (text) by default, as upstream.
    #[arg(long, value_name = "FILE", default_value = "/dev/stdin")]
    infile: PathBuf,
}

enum Command {
    CheckTest(CheckTestArgs),
    Sequencer(subcommands::SequencerArgs),
    NodeManager(subcommands::NodeManagerArgs),
    RunTests(subcommands::RunTestsArgs),
    TestPreview(subcommands::TestPreviewArgs),
    Localhost(subcommands::LocalhostArgs),
    RpcServer(subcommands::RpcServerArgs),
    /// `test_builder`, parsed, and its raw arguments for `# produced by`.
    TestBuilder(test_builder::args::Invocation, Vec<String>),
    Analyze(analyze::Invocation),
    /// `help` (usage on stdout, exit 0) or `--helpfull` (every flag, exit
    /// 1, as absl's help flags).
    Help {
        full: bool,
    },
}

/// The modes whose flags are read as absl reads them.
const ABSL_MODES: [&str; 7] = [
    "test_sequencer",
    "node_manager",
    "run_tests",
    "check_test",
    "test_preview",
    "start_localhost",
    "rpc_server",
];

/// The parser of a mode (absl-style modes only).
fn mode_command(mode: &str) -> Option<clap::Command> {
    use clap::CommandFactory;
    Some(match mode {
        "check_test" => CheckTestArgs::command(),
        "test_sequencer" => subcommands::SequencerArgs::command(),
        "node_manager" => subcommands::NodeManagerArgs::command(),
        "run_tests" => subcommands::RunTestsArgs::command(),
        "test_preview" => subcommands::TestPreviewArgs::command(),
        "start_localhost" => subcommands::LocalhostArgs::command(),
        "rpc_server" => subcommands::RpcServerArgs::command(),
        _ => return None,
    })
}

/// A parsed command line and the upstream flags its mode does not read.
fn parse(args: &[String]) -> anyhow::Result<(Command, Vec<String>)> {
    let Some(first) = args.first() else {
        bail!("distbench needs a subcommand: {IMPLEMENTED}");
    };
    // test_builder (a bash script upstream) and analyze (a Python script)
    // keep their own command lines.
    match first.as_str() {
        "test_builder" => {
            let rest = &args[1..];
            return Ok((
                Command::TestBuilder(test_builder::args::parse(rest)?, rest.to_vec()),
                Vec::new(),
            ));
        }
        "analyze" => {
            return Ok((
                Command::Analyze(analyze::Invocation::parse(&args[1..])?),
                Vec::new(),
            ));
        }
        _ => {}
    }
    let (sub, rest, ignored) = match crate::flags::normalize(args, &mode_command, &ABSL_MODES)? {
        crate::flags::Parsed::Help { full } => return Ok((Command::Help { full }, Vec::new())),
        crate::flags::Parsed::Mode {
            mode,
            args,
            ignored,
        } => (mode, args, ignored),
    };
    let sub = sub.as_str();
    let rest = &rest[..];
    let cmd = match sub {
        "check_test" => Command::CheckTest(subcommands::parse_args(sub, rest)?),
        "test_sequencer" => Command::Sequencer(subcommands::parse_args(sub, rest)?),
        "node_manager" => Command::NodeManager(subcommands::parse_args(sub, rest)?),
        "run_tests" => Command::RunTests(subcommands::parse_args(sub, rest)?),
        "test_preview" => Command::TestPreview(subcommands::parse_args(sub, rest)?),
        "start_localhost" => Command::Localhost(subcommands::parse_args(sub, rest)?),
        "rpc_server" => Command::RpcServer(subcommands::parse_args(sub, rest)?),
        s => bail!("unknown distbench subcommand '{s}': use {IMPLEMENTED}"),
    };
    Ok((cmd, ignored))
}

/// The usage `help` prints (rackbench's words for upstream's modes).
fn usage() -> String {
    "Usage: rackbench distbench MODE [flags]\n\n\
     MODE is one of upstream's: test_sequencer, node_manager, run_tests, check_test,\n\
     test_preview, help; or rackbench's: start_localhost, test_builder, analyze, rpc_server.\n\
     Flags take absl's forms (--flag=value, --flag value, -flag, --noflag for booleans)\n\
     and may come before the mode; every mode accepts upstream's flags --port,\n\
     --test_sequencer, --infile, --outfile, --binary_output, --local_nodes,\n\
     --control_plane_device, --default_data_plane_device, --max_test_duration,\n\
     --service_address and --prefer_ipv4, and says which it does not read.\n\
     `rackbench distbench MODE --help` describes a mode; --helpfull every flag.\n"
        .to_string()
}

impl Workload for Distbench {
    fn headlines(&self) -> &'static [direction::Headline] {
        crate::directions::HEADLINES
    }

    fn directions(&self) -> &'static [&'static [direction::Rule]] {
        crate::directions::TABLES
    }

    fn percentiles_title(&self) -> &'static str {
        "Distbench latency per RPC (percentiles)"
    }

    fn charts(&self, record: &harness::Record) -> Vec<harness::page_chart::PageChart> {
        match record
            .decode::<subcommands::DistbenchRecord>(self.name(), subcommands::RECORD_VERSION)
        {
            Ok(r) => crate::charts::charts(&r),
            Err(_) => Vec::new(),
        }
    }

    fn name(&self) -> &'static str {
        "distbench"
    }

    fn description(&self) -> &'static str {
        "Distbench: RPC traffic patterns from textproto test sequences, run by a test sequencer over node managers"
    }

    fn upstream(&self) -> &'static str {
        "google/distbench (test_sequencer, node_manager, run_tests, analyze)"
    }

    fn help(&self) -> String {
        use clap::CommandFactory;
        let text = format!(
            "rackbench distbench SUBCOMMAND [--flag=value ...]\n\n\
             Subcommands: start_localhost, test_sequencer, node_manager, run_tests, test_preview, \
             check_test, test_builder, analyze, rpc_server.\n\n{}\n\n{}\n\n{}\n\n{}\n\n{}\n\n{}\n\n{}\n\n{}\n",
            subcommands::LocalhostArgs::command().render_long_help(),
            subcommands::SequencerArgs::command().render_long_help(),
            subcommands::NodeManagerArgs::command().render_long_help(),
            subcommands::RunTestsArgs::command().render_long_help(),
            subcommands::TestPreviewArgs::command().render_long_help(),
            subcommands::RpcServerArgs::command().render_long_help(),
            CheckTestArgs::command().render_long_help(),
            analyze::Invocation::help()
        );
        format!("{text}\n{}", test_builder::help())
    }

    fn command(&self) -> Option<clap::Command> {
        use clap::CommandFactory;
        // analyze and test_builder parse their own flags: named, not
        // completed further.
        Some(
            clap::Command::new("distbench")
                .subcommand(subcommands::LocalhostArgs::command().name("start_localhost"))
                .subcommand(subcommands::SequencerArgs::command().name("test_sequencer"))
                .subcommand(subcommands::NodeManagerArgs::command().name("node_manager"))
                .subcommand(subcommands::RunTestsArgs::command().name("run_tests"))
                .subcommand(subcommands::TestPreviewArgs::command().name("test_preview"))
                .subcommand(subcommands::RpcServerArgs::command().name("rpc_server"))
                .subcommand(CheckTestArgs::command().name("check_test"))
                .subcommand(clap::Command::new("analyze"))
                .subcommand(clap::Command::new("test_builder")),
        )
    }

    fn subcommand_help(&self, args: &[String]) -> Option<String> {
        use clap::CommandFactory;
        Some(match args.first()?.as_str() {
            "start_localhost" => subcommands::LocalhostArgs::command()
                .render_long_help()
                .to_string(),
            "test_sequencer" => subcommands::SequencerArgs::command()
                .render_long_help()
                .to_string(),
            "node_manager" => subcommands::NodeManagerArgs::command()
                .render_long_help()
                .to_string(),
            "run_tests" => subcommands::RunTestsArgs::command()
                .render_long_help()
                .to_string(),
            "test_preview" => subcommands::TestPreviewArgs::command()
                .render_long_help()
                .to_string(),
            "rpc_server" => subcommands::RpcServerArgs::command()
                .render_long_help()
                .to_string(),
            "check_test" => CheckTestArgs::command().render_long_help().to_string(),
            "analyze" => analyze::Invocation::help(),
            "test_builder" => test_builder::help(),
            _ => return None,
        })
    }

    fn validate(&self, args: &[String]) -> anyhow::Result<()> {
        match parse(args)?.0 {
            Command::Help { .. } => Ok(()),
            // Checking is the whole job: a bad sequence is its result (exit
            // 1, as upstream's), not bad input to a run.
            Command::CheckTest(_) => Ok(()),
            Command::TestBuilder(inv, _) => test_builder::validate(&inv),
            // A missing, corrupt or unusable results file is bad input.
            Command::Analyze(a) => a.check().map(|_| ()).map_err(Into::into),
            Command::Sequencer(a) => subcommands::sequencer_addresses(&a).map(|_| ()),
            Command::RpcServer(_) => Ok(()),
            Command::NodeManager(a) => {
                subcommands::node_addresses(&a)?;
                subcommands::node_arguments(&a.attributes).map(|_| ())
            }
            // Standard input is read once, when the job runs.
            Command::RunTests(a) if a.infile.is_none() => Ok(()),
            Command::RunTests(a) => subcommands::run_tests_input(&a).map(|_| ()),
            Command::TestPreview(a) if a.infile == std::path::Path::new("/dev/stdin") => Ok(()),
            Command::TestPreview(a) => crate::check::load_checked(&a.infile).map(|_| ()),
            Command::Localhost(a) => subcommands::localhost_tests(&a).map(|_| ()),
        }
    }

    fn is_helper(&self, args: &[String]) -> bool {
        matches!(
            parse(args).map(|(c, _)| c),
            Ok(Command::CheckTest(_)
                | Command::TestBuilder(..)
                | Command::Analyze(_)
                | Command::Help { .. })
        )
    }

    fn format(&self, record: &harness::Record, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
        let r: subcommands::DistbenchRecord =
            record.decode(self.name(), subcommands::RECORD_VERSION)?;
        subcommands::write_record(&r, out)?;
        Ok(())
    }

    fn metrics(&self, record: &harness::Record) -> anyhow::Result<Map<String, Value>> {
        let r: subcommands::DistbenchRecord =
            record.decode(self.name(), subcommands::RECORD_VERSION)?;
        harness::record::metrics_map(&subcommands::run_metrics(&r))
    }

    fn run(&self, ctx: &RunContext, args: &[String]) -> anyhow::Result<Outcome> {
        let (cmd, ignored) = parse(args)?;
        for flag in ignored {
            eprintln!(
                "distbench: {flag} has no effect in this mode (upstream's distbench accepts every \
                 flag in every mode)"
            );
        }
        match cmd {
            Command::Help { full } => {
                if full {
                    print!("{}\n{}", usage(), self.help());
                } else {
                    print!("{}", usage());
                }
                // absl's help flags exit 1; the help mode 0.
                Ok(Outcome::helper(!full))
            }
            Command::CheckTest(a) => {
                // Upstream's stdout is its "Result:" line; the problems (or
                // rackbench's per-test lines) go to stderr.
                match crate::check::load_checked(&a.infile) {
                    Ok(seq) => {
                        for (i, t) in seq.tests.iter().enumerate() {
                            eprintln!("OK test {i}: {}", t.name());
                        }
                        print!("\nResult: {} parsed successfully.\n\n", a.infile.display());
                        Ok(Outcome::helper(true))
                    }
                    Err(e) => {
                        eprintln!("check_test --infile {}: {e:#}", a.infile.display());
                        Ok(Outcome::helper(false))
                    }
                }
            }
            Command::TestBuilder(inv, raw) => test_builder::run(&inv, &raw),
            Command::Analyze(a) => a.run(ctx),
            Command::Sequencer(a) => subcommands::run_sequencer(&a, ctx),
            Command::NodeManager(a) => subcommands::run_node_manager(&a, ctx),
            Command::RunTests(a) => subcommands::run_tests(&a, ctx),
            Command::TestPreview(a) => subcommands::run_test_preview(&a, ctx),
            Command::Localhost(a) => subcommands::run_localhost(&a, ctx),
            Command::RpcServer(a) => subcommands::run_rpc_server(&a, ctx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn infile_flag_forms() {
        for form in [
            &["check_test", "--infile", "f.cfg"][..],
            &["check_test", "--infile=f.cfg"],
            &["check_test", "-infile=f.cfg"],
            &["check_test", "-infile", "f.cfg"],
        ] {
            let Ok((Command::CheckTest(a), _)) = parse(&args(form)) else {
                panic!("{form:?} is not check_test");
            };
            assert_eq!(a.infile, PathBuf::from("f.cfg"), "{form:?}");
        }
    }

    #[test]
    fn traffic_subcommands_parse_upstream_flags() {
        let Ok((Command::RunTests(a), _)) = parse(&args(&[
            "run_tests",
            "-test_sequencer=localhost:10000",
            "--infile=t.cfg",
            "--binary_output",
        ])) else {
            panic!("run_tests did not parse");
        };
        assert_eq!(a.test_sequencer, "localhost:10000");
        assert!(a.binary_output);
        let Ok((Command::NodeManager(n), _)) = parse(&args(&[
            "node_manager",
            "--test_sequencer=127.0.0.1:1",
            "rack=A",
        ])) else {
            panic!("node_manager did not parse");
        };
        assert_eq!(n.attributes, vec!["rack=A".to_string()]);
        let err = parse(&args(&["start_localhost", "--bogus"]))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("--bogus"), "{err}");
        let err = parse(&args(&["bogus"])).err().unwrap().to_string();
        assert!(
            err.contains("unknown distbench subcommand 'bogus'"),
            "{err}"
        );
        let err = parse(&[]).err().unwrap().to_string();
        assert!(err.contains("needs a subcommand"), "{err}");
    }

    #[test]
    fn sequencer_device_flags() {
        let Ok((Command::Sequencer(a), _)) = parse(&args(&[
            "test_sequencer",
            "--control_plane_device=lo",
            "--default_data_plane_device=lo",
            "--local_nodes=2",
        ])) else {
            panic!("test_sequencer did not parse");
        };
        let (bind, nodes) = subcommands::sequencer_addresses(&a).unwrap();
        assert!(bind.is_loopback() && nodes.data.is_loopback() && nodes.endpoint.is_loopback());
        let err = parse(&args(&[
            "test_sequencer",
            "--control_plane_device=lo",
            "--bind=0.0.0.0",
        ]))
        .err()
        .unwrap()
        .to_string();
        assert!(err.contains("cannot be used with"), "{err}");
        let Ok((Command::Sequencer(a), _)) =
            parse(&args(&["test_sequencer", "--control_plane_device=nosuch0"]))
        else {
            panic!("test_sequencer did not parse");
        };
        let err = subcommands::sequencer_addresses(&a)
            .unwrap_err()
            .to_string();
        assert!(err.contains("'nosuch0' not found"), "{err}");
    }

    #[test]
    fn check_test_reads_stdin_by_default() {
        let Ok((Command::CheckTest(a), _)) = parse(&args(&["check_test"])) else {
            panic!("check_test did not parse");
        };
        assert_eq!(a.infile, PathBuf::from("/dev/stdin"));
    }

    #[test]
    fn validate_reports_every_problem() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("bad.config");
        std::fs::write(
            &f,
            "tests { name: 'b' services { name: 's' } \
             rpc_descriptions { name: 'r' client: 'nobody' server: 's' } }",
        )
        .unwrap();
        // check_test's validation accepts any file: the check is its run.
        assert!(
            Distbench
                .validate(&args(&["check_test", &format!("--infile={}", f.display())]))
                .is_ok()
        );
        let err = format!("{:#}", crate::check::load_checked(&f).unwrap_err());
        assert!(err.contains("check_test found 2 problems"), "{err}");
        assert!(err.contains("client: unknown service 'nobody'"), "{err}");
        assert!(err.contains("no action list is named 'r'"), "{err}");
    }
}
