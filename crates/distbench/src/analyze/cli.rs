//! The `analyze` command line: upstream's flags (`--input_file=F`,
//! `--output_directory=D`, `--output_format=...`, `--supress_header`,
//! `--consider_warmups`), in `--flag=value`, `--flag value` or `-flag=value`
//! form, and the run that reports what it wrote: upstream's stdout, then
//! rackbench's own line.

use super::{Analysis, AnalyzeError, Options, OutputFormat, analyze_file, analyze_input};
use clap::{CommandFactory, Parser};
use harness::{Outcome, RunContext};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

#[derive(Debug, Parser)]
#[command(
    name = "rackbench distbench analyze",
    about = "Summarize a Distbench results file (*.pb, *.pb.gz) into a folder tree of text files, as upstream's analysis tool does"
)]
struct Args {
    /// The results file (TestSequenceResults): binary, gzip-compressed
    /// binary or text.
    #[arg(long = "input_file", value_name = "FILE")]
    input_file: PathBuf,
    /// Where the tree is written (created if needed). A relative path is
    /// taken inside the run's benchmark_metrics_<run_id>/ folder.
    #[arg(long = "output_directory", value_name = "DIR")]
    output_directory: PathBuf,
    /// default (size and latency of every RPC), statistics (percentiles per
    /// request size) or trace_context (longest latency per action iteration).
    #[arg(
        long = "output_format",
        value_name = "FORMAT",
        default_value = "default"
    )]
    output_format: String,
    /// Leave out the header line of every file.
    #[arg(long = "supress_header", visible_alias = "suppress_header")]
    supress_header: bool,
    /// Include the RPCs of warm-up iterations (left out by default).
    #[arg(long = "include_warmups", visible_alias = "consider_warmups")]
    include_warmups: bool,
}

/// One `analyze` command: where to read, where to write, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// The results file.
    pub input_file: PathBuf,
    /// The output folder as given (relative paths are resolved by [`run`]).
    ///
    /// [`run`]: Invocation::run
    pub output_directory: PathBuf,
    /// Format and filters.
    pub options: Options,
}

impl Invocation {
    /// Parses the arguments that follow `analyze`.
    pub fn parse(args: &[String]) -> Result<Self, AnalyzeError> {
        let argv = std::iter::once("analyze".to_string())
            .chain(args.iter().map(|a| crate::subcommands::normalize(a)));
        let a = Args::try_parse_from(argv)
            .map_err(|e| AnalyzeError::Usage(e.render().to_string().trim_end().to_string()))?;
        Ok(Invocation {
            input_file: a.input_file,
            output_directory: a.output_directory,
            options: Options {
                format: a.output_format.parse::<OutputFormat>()?,
                suppress_header: a.supress_header,
                include_warmups: a.include_warmups,
            },
        })
    }

    /// The usage text.
    pub fn help() -> String {
        Args::command().render_long_help().to_string()
    }

    /// Reads and analyzes the input without writing: everything that can be
    /// wrong with the input shows up here, before a run starts.
    pub fn check(&self) -> Result<Analysis, AnalyzeError> {
        analyze_input(&self.input_file, &self.options)
    }

    /// Analyzes and writes the tree; a relative output folder goes inside
    /// the run's metrics folder. Prints upstream's stdout, then rackbench's
    /// own line ([`Invocation::stdout`]).
    pub fn run(&self, ctx: &RunContext) -> anyhow::Result<Outcome> {
        let dir = ctx.output_path(&self.output_directory);
        let analysis = analyze_file(&self.input_file, &dir, &self.options)?;
        let text = self.stdout(&analysis, &dir);
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(text.as_bytes())?;
        stdout.flush()?;
        Ok(Outcome::helper(true))
    }

    /// What a run that wrote `analysis` into `written` prints: upstream's
    /// lines as its script prints them (the empty summaries under the
    /// output folder as given, then its sample counts, which count a sample
    /// once per summary including it), then one line of rackbench's own,
    /// starting `rackbench:`, that counts each sample once.
    pub fn stdout(&self, analysis: &Analysis, written: &Path) -> String {
        let mut out = analysis.upstream.stdout(&self.output_directory);
        let s = analysis.samples;
        // Writing into a String cannot fail.
        let _ = writeln!(
            out,
            "rackbench: wrote {} file{} for {} test{} into {} ({} format); \
             {} of {} RPC samples summarized, each counted once ({} warm-up{}{})",
            analysis.tree.len(),
            if analysis.tree.len() == 1 { "" } else { "s" },
            analysis.tests,
            if analysis.tests == 1 { "" } else { "s" },
            written.display(),
            self.options.format.name(),
            s.used,
            s.total,
            s.warmup,
            if self.options.include_warmups {
                ", included"
            } else {
                ", left out"
            },
            if s.untraced > 0 {
                format!("; {} without a trace context left out", s.untraced)
            } else {
                String::new()
            },
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn upstream_flag_forms() {
        let expected = Invocation {
            input_file: "r.pb.gz".into(),
            output_directory: "out".into(),
            options: Options {
                format: OutputFormat::Statistics,
                suppress_header: true,
                include_warmups: true,
            },
        };
        for form in [
            &[
                "--input_file=r.pb.gz",
                "--output_directory=out",
                "--output_format=statistics",
                "--supress_header",
                "--consider_warmups",
            ][..],
            &[
                "--input_file",
                "r.pb.gz",
                "--output_directory",
                "out",
                "--output_format",
                "statistics",
                "--suppress_header",
                "--include_warmups",
            ],
            &[
                "-input_file=r.pb.gz",
                "-output_directory=out",
                "-output_format=statistics",
                "-supress_header",
                "-consider_warmups",
            ],
        ] {
            assert_eq!(
                Invocation::parse(&args(form)).unwrap(),
                expected,
                "{form:?}"
            );
        }
    }

    #[test]
    fn defaults_and_usage_errors() {
        let inv = Invocation::parse(&args(&["--input_file=r.pb", "--output_directory=o"])).unwrap();
        assert_eq!(inv.options, Options::default());
        let err = Invocation::parse(&args(&["--output_directory=o"]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("--input_file"), "{err}");
        let err = Invocation::parse(&args(&[
            "--input_file=r.pb",
            "--output_directory=o",
            "--bogus",
        ]))
        .unwrap_err()
        .to_string();
        assert!(err.contains("--bogus"), "{err}");
        assert!(Invocation::help().contains("--output_format"));
    }

    #[test]
    fn upstream_lines_come_first_then_ours() {
        let inv =
            Invocation::parse(&args(&["--input_file=r.pb", "--output_directory=o/"])).unwrap();
        let analysis = super::super::analyze(&Default::default(), &inv.options).unwrap();
        assert_eq!(
            inv.stdout(&analysis, Path::new("/m/o")),
            "Total samples:  0\n\
             Warmup samples:  0\n\
             Skipped samples:  0\n\
             rackbench: wrote 1 file for 0 tests into /m/o (default format); \
             0 of 0 RPC samples summarized, each counted once (0 warm-up, left out)\n"
        );
    }
}
