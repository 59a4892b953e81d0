//! `activity_configs`: what each activity does and its settings, read the
//! way upstream reads them (google/distbench `activity.cc`, checked at
//! 8a5cfae). `check_test` and the engine's tables both call [`parse`], so a
//! config the checker passes is one the engine runs, with the same values.
//!
//! | `activity_func` | setting | default | rule |
//! |---|---|---|---|
//! | `ConsumeCpu` | `array_size` | 1000 | at least 1 |
//! | `PolluteDataCache` | `array_size` | 2,000,000 | at least 1 |
//! | | `array_reads_per_iteration` | 1000 | at least 1 |
//! | `PolluteInstructionCache` | `function_invocations_per_iteration` | 1000 | none: 0 or less makes no calls |
//! | `SleepFor`, `SpinFor` | `duration_us` | none | required, at least 1 |
//!
//! As upstream: a setting the activity does not read (another activity's,
//! or a name none reads) is ignored, and a setting of the wrong type (a
//! `string_value` where an integer is read, an `int64_value` for
//! `activity_func`) counts as absent, so its default applies (upstream
//! logs an error and goes on). Neither passes silently here:
//! [`ignored_settings`] names each, with the value used instead, and
//! `check_test`, `run_tests` and `start_localhost` print them.
//! `PolluteInstructionCache` calls, uniformly at random, into upstream's
//! count of generated functions ([`POLLUTED_FUNCTIONS`]).

use crate::Error;
use crate::proto::ActivityConfig;
use std::time::Duration;

/// What an activity does each iteration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Activity {
    /// Fills an array of `array_size` integers with random values, sorts it
    /// and sums it.
    ConsumeCpu { array_size: usize },
    /// Reads and increments `reads` random elements of an array of
    /// `array_size` integers (allocated once per action, not per
    /// iteration).
    PolluteDataCache { array_size: usize, reads: usize },
    /// Calls `calls` randomly chosen functions out of thousands of
    /// generated ones.
    PolluteInstructionCache { calls: usize },
    /// Sleeps (off CPU) for `duration`.
    SleepFor { duration: Duration },
    /// Busy-waits (on CPU) for `duration`.
    SpinFor { duration: Duration },
}

/// The `activity_func` values upstream runs.
pub const FUNCS: [&str; 5] = [
    "ConsumeCpu",
    "PolluteDataCache",
    "PolluteInstructionCache",
    "SleepFor",
    "SpinFor",
];

/// Upstream's defaults.
pub const CONSUME_CPU_ARRAY_SIZE: i64 = 1000;
pub const POLLUTE_DATA_CACHE_ARRAY_SIZE: i64 = 2_000_000;
pub const ARRAY_READS_PER_ITERATION: i64 = 1000;
pub const FUNCTION_INVOCATIONS_PER_ITERATION: i64 = 1000;
/// The functions `PolluteInstructionCache` calls into: upstream generates
/// 100 x 100 of them.
pub const POLLUTED_FUNCTIONS: usize = 10_000;

/// The settings each function reads (besides `activity_func`).
fn reads(func: &str) -> &'static [&'static str] {
    match func {
        "ConsumeCpu" => &["array_size"],
        "PolluteDataCache" => &["array_size", "array_reads_per_iteration"],
        "PolluteInstructionCache" => &["function_invocations_per_iteration"],
        "SleepFor" | "SpinFor" => &["duration_us"],
        _ => &[],
    }
}

/// Every setting some activity reads.
const KNOWN: [&str; 5] = [
    "activity_func",
    "array_size",
    "array_reads_per_iteration",
    "function_invocations_per_iteration",
    "duration_us",
];

/// An integer setting: its value, `default` when absent or not an
/// integer (upstream's GetNamedSettingInt64).
fn int(a: &ActivityConfig, name: &str, default: Option<i64>) -> Option<i64> {
    a.activity_settings
        .iter()
        .filter(|s| s.name() == name)
        .find_map(|s| s.int64_value)
        .or(default)
}

/// An integer setting that must be at least 1 (`default` when absent).
fn positive(a: &ActivityConfig, name: &str, default: Option<i64>) -> Result<usize, String> {
    match int(a, name, default) {
        None => Err(format!(
            "{name}: required by {}, as a positive integer (an int64_value) of microseconds",
            func_of(a).unwrap_or_default()
        )),
        Some(v) if v < 1 => Err(format!("{name}: must be a positive integer, got {v}")),
        Some(v) => usize::try_from(v).map_err(|_| format!("{name}: {v} is too large")),
    }
}

/// `activity_func`: the first string value (upstream's
/// GetNamedSettingString).
fn func_of(a: &ActivityConfig) -> Option<&str> {
    a.activity_settings
        .iter()
        .filter(|s| s.name() == "activity_func")
        .find_map(|s| s.string_value.as_deref())
}

/// Reads an activity config as upstream does; the error names the setting
/// and what was expected (without the config's name: callers add it).
pub fn parse(a: &ActivityConfig) -> Result<Activity, Error> {
    let Some(func) = func_of(a) else {
        return Err(Error::Input(format!(
            "activity_func: missing, or not a string_value (one of {})",
            FUNCS.join(", ")
        )));
    };
    let micros = |v: usize| Duration::from_micros(v as u64);
    Ok(match func {
        "ConsumeCpu" => Activity::ConsumeCpu {
            array_size: positive(a, "array_size", Some(CONSUME_CPU_ARRAY_SIZE))
                .map_err(Error::Input)?,
        },
        "PolluteDataCache" => Activity::PolluteDataCache {
            array_size: positive(a, "array_size", Some(POLLUTE_DATA_CACHE_ARRAY_SIZE))
                .map_err(Error::Input)?,
            reads: positive(
                a,
                "array_reads_per_iteration",
                Some(ARRAY_READS_PER_ITERATION),
            )
            .map_err(Error::Input)?,
        },
        "PolluteInstructionCache" => {
            let calls = int(
                a,
                "function_invocations_per_iteration",
                Some(FUNCTION_INVOCATIONS_PER_ITERATION),
            )
            .unwrap_or(FUNCTION_INVOCATIONS_PER_ITERATION);
            Activity::PolluteInstructionCache {
                calls: usize::try_from(calls.max(0)).unwrap_or(usize::MAX),
            }
        }
        "SleepFor" => Activity::SleepFor {
            duration: micros(positive(a, "duration_us", None).map_err(Error::Input)?),
        },
        "SpinFor" => Activity::SpinFor {
            duration: micros(positive(a, "duration_us", None).map_err(Error::Input)?),
        },
        other => {
            return Err(Error::Input(format!(
                "activity_func: unknown activity '{other}' (upstream runs {})",
                FUNCS.join(", ")
            )));
        }
    })
}

/// The default a setting of `func` falls back to.
fn default_of(func: &str, name: &str) -> Option<i64> {
    match (func, name) {
        ("ConsumeCpu", "array_size") => Some(CONSUME_CPU_ARRAY_SIZE),
        ("PolluteDataCache", "array_size") => Some(POLLUTE_DATA_CACHE_ARRAY_SIZE),
        ("PolluteDataCache", "array_reads_per_iteration") => Some(ARRAY_READS_PER_ITERATION),
        ("PolluteInstructionCache", "function_invocations_per_iteration") => {
            Some(FUNCTION_INVOCATIONS_PER_ITERATION)
        }
        _ => None,
    }
}

/// The settings of a valid config that do not count, as upstream reads
/// them: those its `activity_func` does not read (another activity's, or
/// a name no activity reads) and those of the wrong type (ignored, so the
/// default applies), each named with why.
pub fn ignored_settings(a: &ActivityConfig) -> Vec<String> {
    let Some(func) = func_of(a) else {
        return Vec::new();
    };
    let used = reads(func);
    let mut out = Vec::new();
    for s in &a.activity_settings {
        let n = s.name();
        if n == "activity_func" {
            if s.string_value.is_none() {
                out.push(format!("{n}: not a string_value, ignored"));
            }
        } else if !used.contains(&n) {
            out.push(if KNOWN.contains(&n) {
                format!("{n} (not read by {func})")
            } else {
                format!(
                    "{n} (no activity reads it; activities read: {})",
                    KNOWN.join(", ")
                )
            });
        } else if s.int64_value.is_none() {
            let used = int(a, n, default_of(func, n))
                .map_or_else(|| "none".to_string(), |v| v.to_string());
            out.push(format!(
                "{n}: not an int64_value, ignored as upstream ignores it ({func} uses {used})"
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::NamedSetting;

    fn config(settings: &[(&str, Result<&str, i64>)]) -> ActivityConfig {
        ActivityConfig {
            name: Some("a".into()),
            activity_settings: settings
                .iter()
                .map(|(n, v)| NamedSetting {
                    name: Some(n.to_string()),
                    string_value: v.ok().map(str::to_string),
                    int64_value: v.err(),
                })
                .collect(),
        }
    }

    fn func(f: &str) -> (&str, Result<&str, i64>) {
        ("activity_func", Ok(f))
    }

    #[test]
    fn defaults_are_upstreams() {
        assert_eq!(
            parse(&config(&[func("ConsumeCpu")])),
            Ok(Activity::ConsumeCpu { array_size: 1000 })
        );
        assert_eq!(
            parse(&config(&[func("PolluteDataCache")])),
            Ok(Activity::PolluteDataCache {
                array_size: 2_000_000,
                reads: 1000
            })
        );
        assert_eq!(
            parse(&config(&[func("PolluteInstructionCache")])),
            Ok(Activity::PolluteInstructionCache { calls: 1000 })
        );
        assert_eq!(
            parse(&config(&[
                func("PolluteInstructionCache"),
                ("function_invocations_per_iteration", Err(-3))
            ])),
            Ok(Activity::PolluteInstructionCache { calls: 0 })
        );
        assert_eq!(
            parse(&config(&[func("SpinFor"), ("duration_us", Err(7))])),
            Ok(Activity::SpinFor {
                duration: Duration::from_micros(7)
            })
        );
    }

    #[test]
    fn bad_settings_name_the_setting() {
        let err = |s: &[(&str, Result<&str, i64>)]| parse(&config(s)).unwrap_err().to_string();
        assert_eq!(
            err(&[func("SleepFor")]),
            "duration_us: required by SleepFor, as a positive integer (an int64_value) of \
             microseconds"
        );
        assert_eq!(
            err(&[func("SpinFor"), ("duration_us", Err(0))]),
            "duration_us: must be a positive integer, got 0"
        );
        // A string where an integer is read is ignored, as upstream: the
        // required duration is then missing.
        assert!(err(&[func("SleepFor"), ("duration_us", Ok("5"))]).contains("required"));
        assert!(err(&[func("Nap")]).starts_with("activity_func: unknown activity 'Nap'"));
        assert!(err(&[]).starts_with("activity_func: missing"));
        assert!(err(&[("activity_func", Err(1))]).starts_with("activity_func: missing"));
        // Ignored as upstream, and named.
        let typo = config(&[func("ConsumeCpu"), ("arraysize", Err(3))]);
        assert_eq!(parse(&typo), Ok(Activity::ConsumeCpu { array_size: 1000 }));
        assert!(ignored_settings(&typo)[0].starts_with("arraysize (no activity reads it"));
        let string = config(&[func("ConsumeCpu"), ("array_size", Ok("big"))]);
        assert_eq!(
            parse(&string),
            Ok(Activity::ConsumeCpu { array_size: 1000 })
        );
        assert_eq!(
            ignored_settings(&string),
            [
                "array_size: not an int64_value, ignored as upstream ignores it (ConsumeCpu uses 1000)"
            ]
        );
        let ok = config(&[func("PolluteInstructionCache"), ("array_size", Err(5))]);
        assert!(parse(&ok).is_ok());
        assert_eq!(
            ignored_settings(&ok),
            ["array_size (not read by PolluteInstructionCache)"]
        );
    }
}
