//! absl-style command lines, as upstream's `distbench` binary reads them
//! (absl::ParseCommandLine): flags anywhere, before or after the mode;
//! `-flag` or `--flag`; `--flag=value` or `--flag value`; booleans as
//! `--flag`, `--flag=true|false|1|0|yes|no|t|f|y|n` or `--noflag`; every
//! upstream flag accepted by every mode (absl's flags are global), the
//! ones a mode does not read having no effect; `help` as a mode and
//! `--helpfull`.
//!
//! [`normalize`] turns such a command line into the mode and the argument
//! list clap parses for it, saying on stderr (through its warnings) which
//! upstream flags the mode ignores.

use crate::Error;
use clap::ArgAction;
use std::collections::BTreeMap;

/// The flags upstream's `distbench` defines (distbench_busybox.cc and
/// distbench_netutils.cc), `true` for the boolean ones. Every mode accepts
/// each of them.
const UPSTREAM_FLAGS: [(&str, bool); 11] = [
    ("port", false),
    ("test_sequencer", false),
    ("binary_output", true),
    ("infile", false),
    ("outfile", false),
    ("local_nodes", false),
    ("control_plane_device", false),
    ("default_data_plane_device", false),
    ("max_test_duration", false),
    ("service_address", false),
    ("prefer_ipv4", true),
];

/// A command line read as absl reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    /// `help` (usage, exit 0) or `--helpfull` (every flag, exit 1, as
    /// absl's help flags exit).
    Help { full: bool },
    /// The mode and the arguments for its parser.
    Mode {
        mode: String,
        args: Vec<String>,
        /// Upstream flags given that the mode does not read.
        ignored: Vec<String>,
    },
}

/// What a flag is, for one mode or for all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bool,
    Value,
}

/// The long flags of a clap command, by name.
fn flags_of(cmd: &clap::Command) -> BTreeMap<String, Kind> {
    let mut out = BTreeMap::new();
    for a in cmd.get_arguments() {
        let kind = if matches!(a.get_action(), ArgAction::SetTrue | ArgAction::SetFalse) {
            Kind::Bool
        } else {
            Kind::Value
        };
        if let Some(l) = a.get_long() {
            out.insert(l.to_string(), kind);
        }
        for alias in a.get_all_aliases().unwrap_or_default() {
            out.insert(alias.to_string(), kind);
        }
    }
    out
}

/// The short flags of a clap command that take a value.
fn shorts_with_values(cmd: &clap::Command) -> Vec<char> {
    cmd.get_arguments()
        .filter(|a| !matches!(a.get_action(), ArgAction::SetTrue | ArgAction::SetFalse))
        .filter_map(clap::Arg::get_short)
        .collect()
}

/// absl's boolean values.
fn bool_value(name: &str, v: &str) -> anyhow::Result<bool> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "t" | "yes" | "y" | "1" => Ok(true),
        "false" | "f" | "no" | "n" | "0" => Ok(false),
        _ => anyhow::bail!(
            "illegal value '{v}' for boolean flag --{name} (true, false, yes, no, 1, 0, t, f, y, n)"
        ),
    }
}

/// One flag as given.
struct Flag {
    name: String,
    /// `None`: a boolean set without a value.
    value: Option<String>,
    /// As typed, for flags passed on untouched.
    raw: Vec<String>,
}

/// Reads `args` (after `distbench`) as absl does. `command(mode)` is the
/// parser of each mode rackbench runs (`None` for an unknown mode).
pub fn normalize(
    args: &[String],
    command: &dyn Fn(&str) -> Option<clap::Command>,
    modes: &[&str],
) -> anyhow::Result<Parsed> {
    // Every flag any mode knows, for reading flags before the mode.
    let mut all: BTreeMap<String, Kind> = UPSTREAM_FLAGS
        .iter()
        .map(|(n, b)| (n.to_string(), if *b { Kind::Bool } else { Kind::Value }))
        .collect();
    let mut shorts = Vec::new();
    for m in modes {
        if let Some(c) = command(m) {
            all.extend(flags_of(&c));
            shorts.extend(shorts_with_values(&c));
        }
    }
    let mut mode: Option<String> = None;
    let mut flags: Vec<Flag> = Vec::new();
    let mut positional: Vec<String> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if a == "--" {
            positional.extend(args[i..].iter().cloned());
            break;
        }
        let body = a
            .strip_prefix("--")
            .or_else(|| a.strip_prefix('-'))
            .filter(|b| !b.is_empty() && !b.starts_with(|c: char| c.is_ascii_digit()));
        let Some(body) = body else {
            if mode.is_none() {
                mode = Some(a.clone());
            } else {
                positional.push(a.clone());
            }
            continue;
        };
        // A short flag (-n 2, -t30): clap's, passed on as typed.
        let single_dash = !a.starts_with("--");
        let first = body.chars().next().unwrap_or(' ');
        let long_name = body.split_once('=').map_or(body, |(n, _)| n);
        let short = single_dash
            && (body.chars().count() == 1
                || (shorts.contains(&first) && !all.contains_key(long_name)));
        if short {
            let mut raw = vec![a.clone()];
            if body.chars().count() == 1 && shorts.contains(&first) && i < args.len() {
                raw.push(args[i].clone());
                i += 1;
            }
            flags.push(Flag {
                name: String::new(),
                value: None,
                raw,
            });
            continue;
        }
        let (name, value) = match body.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (body.to_string(), None),
        };
        match name.as_str() {
            "helpfull" | "helpshort" | "helppackage" => return Ok(Parsed::Help { full: true }),
            _ => {}
        }
        let (name, value) = match (all.get(&name), value) {
            (Some(Kind::Bool), None) => (name, None),
            (Some(Kind::Bool), Some(v)) => {
                let on = bool_value(&name, &v)?;
                (name, Some(on.to_string()))
            }
            (Some(Kind::Value), Some(v)) => (name, Some(v)),
            (Some(Kind::Value), None) => {
                let Some(v) = args.get(i) else {
                    anyhow::bail!("missing the value for flag --{name}");
                };
                i += 1;
                (name, Some(v.clone()))
            }
            (None, v) => match name.strip_prefix("no") {
                Some(rest) if all.get(rest) == Some(&Kind::Bool) && v.is_none() => {
                    (rest.to_string(), Some("false".to_string()))
                }
                _ => {
                    // Unknown: passed on as typed, for the mode's parser to
                    // name.
                    flags.push(Flag {
                        name: String::new(),
                        value: None,
                        raw: vec![a.clone()],
                    });
                    continue;
                }
            },
        };
        flags.push(Flag {
            name,
            value,
            raw: vec![a.clone()],
        });
    }
    let Some(mode) = mode else {
        anyhow::bail!("distbench needs a mode ({})", modes.join(", "));
    };
    if mode == "help" {
        return Ok(Parsed::Help { full: false });
    }
    let Some(cmd) = command(&mode) else {
        // Not a mode whose flags we read: as given.
        let mut out: Vec<String> = flags.into_iter().flat_map(|f| f.raw).collect();
        out.extend(positional);
        return Ok(Parsed::Mode {
            mode,
            args: out,
            ignored: Vec::new(),
        });
    };
    let mine = flags_of(&cmd);
    let upstream: BTreeMap<&str, bool> = UPSTREAM_FLAGS.iter().copied().collect();
    let mut out = Vec::new();
    let mut ignored = Vec::new();
    for f in flags {
        if f.name.is_empty() {
            out.extend(f.raw);
            continue;
        }
        match mine.get(&f.name) {
            Some(Kind::Bool) => match f.value.as_deref() {
                None | Some("true") => out.push(format!("--{}", f.name)),
                _ => {}
            },
            Some(Kind::Value) => out.push(format!("--{}={}", f.name, f.value.unwrap_or_default())),
            None if upstream.contains_key(f.name.as_str()) => ignored.push(f.raw.join(" ")),
            None => out.extend(f.raw),
        }
    }
    if positional.iter().any(|p| p.starts_with('-')) {
        out.push("--".into());
    }
    out.extend(positional);
    Ok(Parsed::Mode {
        mode,
        args: out,
        ignored,
    })
}

/// Parses an absl duration: a sequence of decimal numbers, each with an
/// optional fraction and a unit (`ns`, `us`, `ms`, `s`, `m`, `h`), such as
/// `90s`, `1h30m`, `1.5h` or `300ms`, optionally signed; `0` alone; `inf`.
/// Returns signed nanoseconds (saturating; `inf` is `i128::MAX`).
pub fn parse_absl_duration(v: &str) -> Result<i128, Error> {
    let bad = || {
        Error::Input(format!(
            "'{v}' is not a duration (a number with a unit ns, us, ms, s, m or h, e.g. 90s, 1h30m)"
        ))
    };
    let s = v.trim();
    let (neg, s) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if s == "0" {
        return Ok(0);
    }
    if s == "inf" {
        return Ok(if neg { i128::MIN } else { i128::MAX });
    }
    if s.is_empty() {
        return Err(bad());
    }
    let mut rest = s;
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let (num, tail) = rest.split_at(num_len);
        if num.is_empty() || num == "." {
            return Err(bad());
        }
        let n: f64 = num.parse().map_err(|_| bad())?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let scale = match unit {
            "ns" => 1.0,
            "us" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return Err(bad()),
        };
        total += n * scale;
        rest = tail;
    }
    let ns = total.round();
    let ns = if ns >= i128::MAX as f64 {
        i128::MAX
    } else {
        ns as i128
    };
    Ok(if neg { -ns } else { ns })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[derive(Parser, Debug)]
    struct Run {
        #[arg(long = "test_sequencer")]
        test_sequencer: String,
        #[arg(long)]
        infile: Option<String>,
        #[arg(long = "binary_output")]
        binary_output: bool,
    }

    #[derive(Parser, Debug)]
    struct Node {
        #[arg(long = "test_sequencer")]
        test_sequencer: String,
        #[arg(long)]
        port: Option<u16>,
        attributes: Vec<String>,
    }

    fn cmd(m: &str) -> Option<clap::Command> {
        match m {
            "run_tests" => Some(Run::command()),
            "node_manager" => Some(Node::command()),
            _ => None,
        }
    }

    fn norm(a: &[&str]) -> Parsed {
        let args: Vec<String> = a.iter().map(|s| s.to_string()).collect();
        normalize(&args, &cmd, &["run_tests", "node_manager"]).unwrap()
    }

    fn mode(p: Parsed) -> (String, Vec<String>, Vec<String>) {
        match p {
            Parsed::Mode {
                mode,
                args,
                ignored,
            } => (mode, args, ignored),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn absl_forms() {
        let (m, a, i) = mode(norm(&[
            "--test_sequencer",
            "h:1",
            "-binary_output=true",
            "run_tests",
            "--infile=f",
            "--port=3",
        ]));
        assert_eq!(m, "run_tests");
        assert_eq!(a, ["--test_sequencer=h:1", "--binary_output", "--infile=f"]);
        assert_eq!(i, ["--port=3"]);
        let (_, a, _) = mode(norm(&[
            "run_tests",
            "--nobinary_output",
            "--test_sequencer=x",
        ]));
        assert_eq!(a, ["--test_sequencer=x"]);
        let (_, a, _) = mode(norm(&[
            "run_tests",
            "--binary_output=0",
            "--test_sequencer=x",
        ]));
        assert_eq!(a, ["--test_sequencer=x"]);
        let (m, a, _) = mode(norm(&["-port", "7", "node_manager", "rack=A", "node1"]));
        assert_eq!(m, "node_manager");
        assert_eq!(a, ["--port=7", "rack=A", "node1"]);
        assert_eq!(norm(&["help"]), Parsed::Help { full: false });
        assert_eq!(
            norm(&["run_tests", "--helpfull"]),
            Parsed::Help { full: true }
        );
        let args: Vec<String> = ["run_tests", "--binary_output=maybe"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let e = normalize(&args, &cmd, &["run_tests"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("illegal value 'maybe'"), "{e}");
    }

    #[test]
    fn absl_durations() {
        assert_eq!(parse_absl_duration("1h30m"), Ok(5_400_000_000_000));
        assert_eq!(parse_absl_duration("90s"), Ok(90_000_000_000));
        assert_eq!(parse_absl_duration("1.5h"), Ok(5_400_000_000_000));
        assert_eq!(parse_absl_duration("300ms"), Ok(300_000_000));
        assert_eq!(parse_absl_duration("2us"), Ok(2_000));
        assert_eq!(parse_absl_duration("0"), Ok(0));
        assert_eq!(parse_absl_duration("-1s"), Ok(-1_000_000_000));
        assert_eq!(parse_absl_duration("inf"), Ok(i128::MAX));
        for bad in ["", "5", "soon", "1x", "s", "1h30", "."] {
            assert!(parse_absl_duration(bad).is_err(), "{bad}");
        }
    }
}
