//! `test_builder`: generates Distbench test configs from traffic patterns,
//! as upstream's `test_builder` tool does.
//!
//! A configuration string such as `clique:grpc:node_count=5:ipv6` names a
//! traffic pattern, optionally a protocol driver (gRPC by default), `ipv4`
//! or `ipv6`, and `key=value` parameters; a value `<FILE` is read from the
//! file. Every parameter, given or defaulted, becomes an attribute of the
//! test, next to `protocol_alias`, `traffic_alias`, `test_name`,
//! `test_timeout`, `config_label` and friends; the test is named
//! `<traffic_alias>-<protocol_alias>`, and with `-o DIR` it is written to
//! `DIR/<label_prefix><test_name>.config`.
//!
//! - [`args`]: the command line (`-s`, `-o`, `-t`, `-c`, `-l`, `-a`,
//!   `parameter_sweep`);
//! - [`params`]: parameter tables, defaults and value checks;
//! - [`protocols`] and [`patterns`]: what each driver and pattern builds.
//!
//! A parameter that neither the pattern nor the driver uses is kept as a
//! plain attribute, as upstream keeps it; a warning on stderr names it and
//! the parameters that count (a typo keeps its default otherwise
//! unnoticed), which rackbench's `-a` silences. With `-s
//! HOST:PORT` (and `-o DIR`) each test then runs on that sequencer, its
//! results in `DIR/<label_prefix><test_name>.pb.gz`; a test whose results
//! file exists is skipped, as upstream.

pub mod args;
mod cli;
pub mod params;
pub mod patterns;
pub mod protocols;

use crate::check;
use crate::proto::{DistributedSystemDescription, TestSequence};
use crate::textproto;
use args::{Body, Invocation, Output};
use params::{COMMON, Params, Spec};
use patterns::Pattern;
use prost::Message;
use protocols::Protocol;
use std::path::{Path, PathBuf};

pub(crate) use cli::{run, validate};

/// Why a test_builder command cannot produce its configs. Every variant is
/// bad input (or a missing tool), never a defect.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The command line is malformed.
    #[error("{0}")]
    Usage(String),
    /// A configuration component is no pattern, driver, `ipv4`/`ipv6` or
    /// `key=value`.
    #[error(
        "unrecognized configuration component '{component}' in '{config}': expected key=value, \
         a traffic pattern ({}), a protocol driver ({}), ipv4 or ipv6",
        pattern_names(),
        protocol_names()
    )]
    UnknownComponent {
        /// The component.
        component: String,
        /// The whole configuration string.
        config: String,
    },
    /// `traffic_pattern=` or `protocol_driver=` names nothing known.
    #[error("unknown {what} '{name}' in '{config}': the {what}s are {valid}")]
    UnknownName {
        /// "traffic pattern" or "protocol driver".
        what: &'static str,
        /// The name given.
        name: String,
        /// The whole configuration string.
        config: String,
        /// The known names.
        valid: String,
    },
    /// No traffic pattern was named.
    #[error("no traffic pattern in '{config}': name one of {}", pattern_names())]
    NoPattern {
        /// The whole configuration string.
        config: String,
    },
    /// Parameters that neither the pattern nor the driver use (a warning:
    /// they are kept as attributes).
    #[error(
        "unknown {} in '{config}' for {pattern} over {protocol}, kept as plain attributes as \
         upstream keeps them; its parameters are: {valid} (-a keeps them without this warning)",
        quote_parameters(.names)
    )]
    UnknownParameter {
        /// The unknown names.
        names: Vec<String>,
        /// The whole configuration string.
        config: String,
        /// The traffic pattern.
        pattern: &'static str,
        /// The protocol driver.
        protocol: &'static str,
        /// The parameters they accept, comma-separated.
        valid: String,
    },
    /// A parameter value of the wrong kind.
    #[error("{name}='{value}'{}: expected {expected}", in_config(.config))]
    BadValue {
        /// The parameter.
        name: String,
        /// Its value.
        value: String,
        /// The configuration string, if known.
        config: String,
        /// What it should be.
        expected: String,
    },
    /// Parameters that exclude each other.
    #[error("{0}")]
    Conflict(String),
    /// A `<FILE` value cannot be read.
    #[error("{name}=<{path}: cannot read the file: {message}")]
    File {
        /// The parameter.
        name: String,
        /// The file.
        path: String,
        /// The reason.
        message: String,
    },
    /// `extra_test_contents` is not text-format test fields.
    #[error("extra_test_contents: {0}")]
    ExtraContents(String),
    /// An external tool a pattern needs is missing.
    #[error("{0}")]
    MissingTool(String),
    /// An external tool failed or printed something unexpected.
    #[error("{0}")]
    Tool(String),
    /// The generated test fails check_test.
    #[error("the generated test '{test}' fails check_test:\n  {}", .problems.join("\n  "))]
    Check {
        /// The test name.
        test: String,
        /// One line per problem.
        problems: Vec<String>,
    },
    /// Two configurations give one test name but different tests.
    #[error(
        "test name '{0}' is used by two different tests (a misspelled or mismatched parameter?)"
    )]
    DuplicateTest(String),
    /// `-o DIR` names no directory.
    #[error("output directory '{0}' does not exist")]
    OutputDir(String),
    /// A config file cannot be written.
    #[error("cannot write {path}: {message}")]
    Write {
        /// The file.
        path: String,
        /// The reason.
        message: String,
    },
}

/// `parameter 'a'` or `parameters 'a', 'b'`.
fn quote_parameters(names: &[String]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
    let plural = if names.len() == 1 { "" } else { "s" };
    format!("parameter{plural} {}", quoted.join(", "))
}

fn in_config(config: &str) -> String {
    if config.is_empty() {
        String::new()
    } else {
        format!(" in '{config}'")
    }
}

fn pattern_names() -> String {
    patterns::ALL.map(Pattern::name).join(", ")
}

fn protocol_names() -> String {
    protocols::ALL.map(Protocol::name).join(", ")
}

/// What generation needs from outside the command line.
#[derive(Debug, Clone, Default)]
pub struct Environment {
    /// Where relative `<FILE` values are read from.
    pub base_dir: PathBuf,
    /// Homa's `dist_to_proto`, which `homa_cp_node` needs.
    pub dist_to_proto: Option<PathBuf>,
}

impl Environment {
    /// The current directory, and `dist_to_proto` from `$DIST_TO_PROTO` or
    /// `$PATH`.
    pub fn from_process() -> Environment {
        let from_env = std::env::var_os("DIST_TO_PROTO").map(PathBuf::from);
        let on_path = || {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|d| d.join("dist_to_proto"))
                    .find(|p| p.is_file())
            })
        };
        Environment {
            base_dir: PathBuf::from("."),
            dist_to_proto: from_env.or_else(on_path),
        }
    }
}

/// One generated test.
#[derive(Debug, Clone, PartialEq)]
pub struct GeneratedTest {
    /// `<traffic_alias>-<protocol_alias>` (plus sizes for some patterns).
    pub test_name: String,
    /// `<label_prefix><test_name>.config`.
    pub file_name: String,
    /// The test.
    pub test: DistributedSystemDescription,
}

/// The tests of one command, in order, and warnings for stderr.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Generated {
    /// The tests, in command-line order (sweep values outermost).
    pub tests: Vec<GeneratedTest>,
    /// Things worth telling the user (repeated identical tests).
    pub warnings: Vec<String>,
}

impl Generated {
    /// All tests as one sequence.
    pub fn sequence(&self) -> TestSequence {
        TestSequence {
            tests: self.tests.iter().map(|t| t.test.clone()).collect(),
            ..Default::default()
        }
    }
}

/// Builds the tests of an invocation (nothing is written or run).
pub fn generate(inv: &Invocation, env: &Environment) -> Result<Generated, Error> {
    let mut base = Params::default();
    base.set("test_duration", inv.test_duration.as_str());
    let mut out = Generated::default();
    match &inv.body {
        Body::Configs(configs) => add_configs(&mut out, &base, configs, inv, env)?,
        Body::Sweep {
            name,
            values,
            configs,
        } => {
            for value in values {
                let mut swept = base.clone();
                for key in name.split(',') {
                    swept.set_given(key, &value.to_string());
                }
                // Upstream also records a list `a,b` under its own name.
                if name.contains(',') {
                    swept.set(name, value.to_string());
                }
                swept.set("swept_parameter", name.as_str());
                add_configs(&mut out, &swept, configs, inv, env)?;
            }
        }
    }
    Ok(out)
}

fn add_configs(
    out: &mut Generated,
    base: &Params,
    configs: &[String],
    inv: &Invocation,
    env: &Environment,
) -> Result<(), Error> {
    for config in configs {
        let full = format!("{}{config}", inv.config_prefix);
        let mut p = base.clone();
        parse_config(&full, &mut p)?;
        p.set("config_label", format!("{}{config}", inv.label_prefix));
        let test = build_test(p, &full, inv.allow_unused, env, out.tests.len())?;
        let test_name = test.name().to_string();
        if let Some(prior) = out.tests.iter().find(|t| t.test_name == test_name) {
            if prior.test != test {
                return Err(Error::DuplicateTest(test_name));
            }
            out.warnings.push(format!(
                "the sequence holds test '{test_name}' more than once \
                 (a misspelled or mismatched parameter?)"
            ));
        }
        out.tests.push(GeneratedTest {
            file_name: format!("{}{test_name}.config", inv.label_prefix),
            test_name,
            test,
        });
    }
    Ok(())
}

/// Reads the components of a configuration string into `p`.
fn parse_config(config: &str, p: &mut Params) -> Result<(), Error> {
    for part in config.split(':').filter(|s| !s.is_empty()) {
        let pieces: Vec<&str> = part.split('=').collect();
        match pieces.as_slice() {
            [key, value] if !key.is_empty() => p.set_given(key, value),
            [word] if Protocol::from_name(word).is_some() => p.set_given("protocol_driver", word),
            [word] if Pattern::from_name(word).is_some() => p.set_given("traffic_pattern", word),
            [version @ ("ipv4" | "ipv6")] => p.set_given("ip_version", &version[3..]),
            _ => {
                return Err(Error::UnknownComponent {
                    component: part.to_string(),
                    config: config.to_string(),
                });
            }
        }
    }
    Ok(())
}

/// Turns the parameters of one configuration into its test.
fn build_test(
    mut p: Params,
    config: &str,
    allow_unused: bool,
    env: &Environment,
    index: usize,
) -> Result<DistributedSystemDescription, Error> {
    p.read_files(&env.base_dir)?;
    let pattern_name = p
        .get("traffic_pattern")
        .ok_or_else(|| Error::NoPattern {
            config: config.to_string(),
        })?
        .to_string();
    let pattern = Pattern::from_name(&pattern_name).ok_or_else(|| Error::UnknownName {
        what: "traffic pattern",
        name: pattern_name,
        config: config.to_string(),
        valid: pattern_names(),
    })?;
    let protocol_name = p.get("protocol_driver").unwrap_or("grpc").to_string();
    let protocol = Protocol::from_name(&protocol_name).ok_or_else(|| Error::UnknownName {
        what: "protocol driver",
        name: protocol_name,
        config: config.to_string(),
        valid: protocol_names(),
    })?;
    let unused = p.unused(&[pattern.specs(), protocol.specs()]);
    if !unused.is_empty() && !allow_unused {
        let warning = Error::UnknownParameter {
            names: unused,
            config: config.to_string(),
            pattern: pattern.name(),
            protocol: protocol.name(),
            valid: spec_names(&[COMMON, pattern.specs(), protocol.specs()]),
        };
        eprintln!("test_builder: warning: {warning}");
    }
    for specs in [COMMON, protocol.specs(), pattern.specs()] {
        p.apply(specs, config)?;
    }
    if let Some(version) = p.get("ip_version").map(str::to_string) {
        p.set("ip_version_string", format!("ipv{version}"));
    }
    let options = protocol.build(&mut p)?;
    let mut test = pattern.build(&mut p, env)?;
    test.protocol_driver_options = vec![options];
    test.attributes = p.attributes();
    if let Some(extra) = p
        .get("extra_test_contents")
        .filter(|t| !t.trim().is_empty())
    {
        let fields: DistributedSystemDescription =
            textproto::parse(extra, "extra_test_contents")
                .map_err(|e| Error::ExtraContents(e.to_string()))?;
        test.merge(fields.encode_to_vec().as_slice())
            .map_err(|e| Error::ExtraContents(e.to_string()))?;
    }
    let problems = check::check_test(index, &test);
    if !problems.is_empty() {
        return Err(Error::Check {
            test: test.name().to_string(),
            problems: problems.iter().map(ToString::to_string).collect(),
        });
    }
    Ok(test)
}

fn spec_names(groups: &[&[Spec]]) -> String {
    let mut names: Vec<&str> = Vec::new();
    for name in groups.iter().flat_map(|g| g.iter().map(|s| s.name)) {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names.join(", ")
}

/// The text of a config file: upstream's `# produced by` line naming the
/// command, then the tests as a text-format test sequence.
pub fn render(tests: &[&DistributedSystemDescription], args: &[String]) -> Result<String, Error> {
    let seq = TestSequence {
        tests: tests.iter().map(|t| (*t).clone()).collect(),
        ..Default::default()
    };
    let text = textproto::format_test_sequence(&seq).map_err(|e| Error::Tool(e.to_string()))?;
    Ok(format!(
        "# produced by rackbench distbench test_builder {}\n{text}",
        args::shell_quote(args)
    ))
}

/// Checks what generation cannot: that `-o DIR` exists.
pub fn check_invocation(inv: &Invocation) -> Result<(), Error> {
    if let Output::Dir(dir) = &inv.output
        && !dir.is_dir()
    {
        return Err(Error::OutputDir(dir.display().to_string()));
    }
    Ok(())
}

/// Writes the configs into `dir`: one file per test, and the whole sequence
/// in `<label_prefix>test_sequence.config` when it has several distinct
/// tests. Returns the files written.
pub fn write_dir(
    dir: &Path,
    generated: &Generated,
    label_prefix: &str,
    args: &[String],
) -> Result<Vec<PathBuf>, Error> {
    let write = |path: PathBuf, text: String| {
        harness::fsutil::write_atomic(&path, text.as_bytes())
            .map(|()| path.clone())
            .map_err(|e| Error::Write {
                path: path.display().to_string(),
                message: e.to_string(),
            })
    };
    let mut written = Vec::new();
    for t in &generated.tests {
        written.push(write(dir.join(&t.file_name), render(&[&t.test], args)?)?);
    }
    let mut names: Vec<&str> = generated
        .tests
        .iter()
        .map(|t| t.test_name.as_str())
        .collect();
    names.sort_unstable();
    names.dedup();
    if names.len() > 1 {
        let all: Vec<&DistributedSystemDescription> =
            generated.tests.iter().map(|t| &t.test).collect();
        written.push(write(
            dir.join(format!("{label_prefix}test_sequence.config")),
            render(&all, args)?,
        )?);
    }
    Ok(written)
}

/// The usage text, with every pattern's and driver's parameters.
pub fn help() -> String {
    let mut out = String::from(
        "rackbench distbench test_builder [-o DIR|-] [-t SECONDS] [-c CONFIG_PREFIX] \
         [-l LABEL_PREFIX] [-a] [-s HOST:PORT]\n    \
         [parameter_sweep NAME START STEP END] CONFIG...\n\n\
         Generates Distbench test configs from traffic patterns (upstream's test_builder).\n\
         CONFIG is PATTERN[:DRIVER][:ipv4|ipv6][:key=value]...; a value <FILE is read from \
         FILE.\n\n  \
         -o DIR   write DIR/<label_prefix><test_name>.config per test (default -: stdout)\n  \
         -t N     test_duration in seconds (default 30)\n  \
         -c P     prefix every CONFIG with P: (not part of config_label)\n  \
         -l P     prefix config_label and file names with P\n  \
         -a       no warning for parameters the pattern and driver do not use\n           \
         (kept as attributes either way, as upstream)\n  \
         -s H:P   then run each test on the test sequencer at H:P, results in\n           \
         DIR/<label_prefix><test_name>.pb.gz (a test whose results exist is skipped)\n  \
         parameter_sweep NAME START STEP END   one test per value (NAME may be a,b)\n",
    );
    let section = |out: &mut String, title: String, specs: &[Spec]| {
        out.push_str(&format!("\n{title}:\n"));
        for s in specs {
            let default = if s.default.is_empty() {
                String::from("unset")
            } else {
                s.default.to_string()
            };
            out.push_str(&format!("  {} (default {default}): {}\n", s.name, s.help));
        }
    };
    section(&mut out, "Parameters of every test".into(), COMMON);
    for p in patterns::ALL {
        section(&mut out, format!("Traffic pattern {}", p.name()), p.specs());
    }
    for p in protocols::ALL {
        section(&mut out, format!("Protocol driver {}", p.name()), p.specs());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generate_args(a: &[&str]) -> Result<Generated, Error> {
        let args: Vec<String> = a.iter().map(|s| s.to_string()).collect();
        generate(&args::parse(&args)?, &Environment::default())
    }

    #[test]
    fn clique_defaults() {
        let g = generate_args(&["clique"]).unwrap();
        let t = &g.tests[0];
        assert_eq!(
            t.test_name,
            "clique_sync_burst_10x16000x1024x1024-grpc_polling_inline"
        );
        assert_eq!(t.test.attributes["test_timeout"], "150");
        assert_eq!(t.test.attributes["config_label"], "clique");
        assert_eq!(t.test.services[0].count, Some(10));
    }

    #[test]
    fn unknown_things_are_named() {
        // Kept as an attribute, as upstream (with a warning on stderr).
        let g = generate_args(&["clique:node_cout=5"]).unwrap();
        assert_eq!(g.tests[0].test.attributes["node_cout"], "5");
        assert_eq!(g.tests[0].test.attributes["node_count"], "10");
        let err = generate_args(&["cliq"]).unwrap_err().to_string();
        assert!(
            err.contains("'cliq'") && err.contains("client_server"),
            "{err}"
        );
        let err = generate_args(&["node_count=4"]).unwrap_err().to_string();
        assert!(err.contains("no traffic pattern"), "{err}");
        let g = generate_args(&["-a", "clique:label=x"]).unwrap();
        assert_eq!(g.tests[0].test.attributes["label"], "x");
    }

    #[test]
    fn exact_size_excludes_bounds() {
        let err = generate_args(&["variable_response_multi_level_rpc:exact_size=5:lower_size=3"])
            .unwrap_err();
        assert!(matches!(err, Error::Conflict(_)), "{err}");
    }

    #[test]
    fn homa_cp_node_names_the_missing_tool() {
        let err = generate_args(&["homa_cp_node"]).unwrap_err().to_string();
        assert!(err.contains("dist_to_proto"), "{err}");
    }

    #[test]
    fn the_same_name_for_different_tests_is_refused() {
        let err = generate_args(&["-a", "clique:x=1", "clique:x=2"]).unwrap_err();
        assert!(matches!(err, Error::DuplicateTest(_)), "{err}");
        let g = generate_args(&["clique", "clique"]).unwrap();
        assert_eq!(g.tests.len(), 2);
        assert_eq!(g.warnings.len(), 1);
    }
}
