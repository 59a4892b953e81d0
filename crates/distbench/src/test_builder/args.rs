//! test_builder's command line, in upstream's getopt form: single-letter
//! flags anywhere among the positional arguments (`-o DIR` or `-oDIR`),
//! `--` ending the flags, then either configurations or
//! `parameter_sweep NAME START STEP END CONFIG...`.

use super::Error;
use std::path::PathBuf;

/// Where generated configs go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// One text-format test sequence on stdout (`-o -`, the default).
    Stdout,
    /// One `<label_prefix><test_name>.config` file per test in the
    /// directory, plus `<label_prefix>test_sequence.config` holding them all
    /// when there is more than one.
    Dir(PathBuf),
}

/// What the positional arguments ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// One test per configuration string.
    Configs(Vec<String>),
    /// One test per swept value and configuration string.
    Sweep {
        /// The swept parameters as given (`a,b` sets both to each value);
        /// also the `swept_parameter` attribute.
        name: String,
        /// The values, as `seq START STEP END` prints them.
        values: Vec<i64>,
        /// The configuration strings.
        configs: Vec<String>,
    },
}

/// A parsed test_builder command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// `-s host:port`: the test sequencer to run the tests on.
    pub sequencer: Option<String>,
    /// `-o DIR` or `-o -`.
    pub output: Output,
    /// `-t SECONDS`: the default `test_duration`.
    pub test_duration: String,
    /// `-c PREFIX`: prepended (with a `:`) to every configuration string,
    /// but not to its `config_label`.
    pub config_prefix: String,
    /// `-l PREFIX`: prepended to every `config_label` and output file name.
    pub label_prefix: String,
    /// `-a`: keep parameters that the chosen pattern and driver do not use
    /// as plain attributes without a warning (they are kept either way, as
    /// upstream keeps them).
    pub allow_unused: bool,
    /// The configurations or the sweep.
    pub body: Body,
}

/// The flags, as upstream's getopt string `hs:l:c:t:o:` plus `a`.
const FLAGS_WITH_VALUE: &[char] = &['s', 'l', 'c', 't', 'o'];

/// A usage error: the message and a hint to see the help.
fn usage(message: impl Into<String>) -> Error {
    Error::Usage(message.into())
}

/// Parses the arguments after `test_builder`. `-h` is left to the caller
/// (rackbench answers it before parsing).
pub fn parse(args: &[String]) -> Result<Invocation, Error> {
    let mut inv = Invocation {
        sequencer: None,
        output: Output::Stdout,
        test_duration: "30".into(),
        config_prefix: String::new(),
        label_prefix: String::new(),
        allow_unused: false,
        body: Body::Configs(Vec::new()),
    };
    let mut positional = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if arg == "--" {
            positional.extend(iter.by_ref().cloned());
            break;
        }
        let Some(flags) = arg.strip_prefix('-').filter(|f| !f.is_empty()) else {
            positional.push(arg.clone());
            continue;
        };
        for (i, flag) in flags.char_indices() {
            if FLAGS_WITH_VALUE.contains(&flag) {
                let attached = &flags[i + flag.len_utf8()..];
                let value = if attached.is_empty() {
                    iter.next()
                        .cloned()
                        .ok_or_else(|| usage(format!("option -{flag} needs a value")))?
                } else {
                    attached.to_string()
                };
                set_flag(&mut inv, flag, value)?;
                break;
            }
            match flag {
                'a' => inv.allow_unused = true,
                'h' => return Err(usage("-h: see rackbench distbench test_builder --help")),
                _ => {
                    return Err(usage(format!(
                        "unknown option -{flag} in '{arg}': the options are -s HOST:PORT, \
                         -o DIR, -t SECONDS, -c CONFIG_PREFIX, -l LABEL_PREFIX, -a and -h"
                    )));
                }
            }
        }
    }
    if inv.sequencer.is_some() && inv.output == Output::Stdout {
        return Err(usage(
            "running tests with -s needs -o DIR for the results (not -o -)",
        ));
    }
    inv.body = body(positional)?;
    Ok(inv)
}

fn set_flag(inv: &mut Invocation, flag: char, value: String) -> Result<(), Error> {
    match flag {
        's' => inv.sequencer = Some(value),
        'l' => inv.label_prefix = value,
        'c' => {
            inv.config_prefix = if value.is_empty() {
                value
            } else {
                format!("{value}:")
            }
        }
        't' => {
            if super::params::parse_uint(&value).is_none_or(|v| v < 1) {
                return Err(usage(format!(
                    "-t takes the test duration in whole seconds (at least 1), not '{value}'"
                )));
            }
            inv.test_duration = value;
        }
        'o' => {
            inv.output = if value == "-" {
                Output::Stdout
            } else {
                Output::Dir(PathBuf::from(value))
            }
        }
        _ => unreachable!("FLAGS_WITH_VALUE lists only the flags matched here"),
    }
    Ok(())
}

fn body(positional: Vec<String>) -> Result<Body, Error> {
    if positional.first().map(String::as_str) != Some("parameter_sweep") {
        if positional.is_empty() {
            return Err(usage(
                "no test configuration given, e.g. clique, clique:node_count=5 or \
                 parameter_sweep node_count 5 5 15 clique",
            ));
        }
        return Ok(Body::Configs(positional));
    }
    let [_, name, start, step, end, configs @ ..] = positional.as_slice() else {
        return Err(usage(
            "parameter_sweep takes a parameter name, start, step and end, then \
             configurations: parameter_sweep NAME START STEP END CONFIG...",
        ));
    };
    if configs.is_empty() {
        return Err(usage("parameter_sweep needs at least one configuration"));
    }
    if name.is_empty() || name.split(',').any(str::is_empty) {
        return Err(usage(format!(
            "parameter_sweep: '{name}' is not a parameter name (or a comma-separated list)"
        )));
    }
    let number = |what: &str, v: &str| {
        v.parse::<i64>().map_err(|_| {
            usage(format!(
                "parameter_sweep sweeps integers: its {what} '{v}' is not one"
            ))
        })
    };
    let (start, step, end) = (
        number("start", start)?,
        number("step", step)?,
        number("end", end)?,
    );
    if step == 0 {
        return Err(usage("parameter_sweep: the step must not be 0"));
    }
    let mut values = Vec::new();
    let mut v = start;
    while (step > 0 && v <= end) || (step < 0 && v >= end) {
        values.push(v);
        match v.checked_add(step) {
            Some(next) => v = next,
            None => break,
        }
    }
    if values.is_empty() {
        return Err(usage(format!(
            "parameter_sweep: {start} to {end} in steps of {step} gives no value"
        )));
    }
    Ok(Body::Sweep {
        name: name.clone(),
        values,
        configs: configs.to_vec(),
    })
}

/// Quotes arguments as bash's `printf %q` does for the characters config
/// strings use (a backslash before each special character), joined by
/// spaces: the form of upstream's `# produced by` lines.
pub fn shell_quote(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if a.is_empty() {
                return "''".to_string();
            }
            let mut out = String::with_capacity(a.len());
            for c in a.chars() {
                if !(c.is_ascii_alphanumeric() || "_-./:=+@%^".contains(c)) {
                    out.push('\\');
                }
                out.push(c);
            }
            out
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn flags_may_follow_positionals_and_attach_values() {
        let inv = parse(&args(&[
            "clique", "-o", "out", "-t45", "-lL-", "-c", "grpc",
        ]))
        .unwrap();
        assert_eq!(inv.output, Output::Dir("out".into()));
        assert_eq!(inv.test_duration, "45");
        assert_eq!(inv.label_prefix, "L-");
        assert_eq!(inv.config_prefix, "grpc:");
        assert_eq!(inv.body, Body::Configs(args(&["clique"])));
    }

    #[test]
    fn sweeps_expand_like_seq() {
        let err = parse(&args(&["parameter_sweep", "a,b", "5", "x", "9", "c"])).err();
        assert!(err.is_some(), "a step that is no integer is refused");
        let inv = parse(&args(&["parameter_sweep", "n", "8", "3", "15", "clique"])).unwrap();
        let Body::Sweep { values, .. } = inv.body else {
            panic!("not a sweep")
        };
        assert_eq!(values, vec![8, 11, 14]);
        assert!(parse(&args(&["parameter_sweep", "n", "8", "0", "15", "c"])).is_err());
        assert!(parse(&args(&["parameter_sweep", "n", "8", "1", "1", "c"])).is_err());
        assert!(parse(&args(&["parameter_sweep", "n", "8", "1", "9"])).is_err());
    }

    #[test]
    fn bad_flags_are_usage_errors() {
        for bad in [
            &["-x", "clique"][..],
            &["clique", "-o"],
            &["-t", "0", "clique"],
            &["-s", "h:1", "clique"],
            &[],
        ] {
            assert!(matches!(parse(&args(bad)), Err(Error::Usage(_))), "{bad:?}");
        }
    }

    #[test]
    fn quoting_matches_bash_printf_q() {
        assert_eq!(
            shell_quote(&args(&["-o", ".", "a:b=<f", "x,y", "ofi+tcp", ""])),
            r"-o . a:b=\<f x\,y ofi+tcp ''"
        );
    }
}
