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
//! Integer settings need an `int64_value` and `activity_func` a
//! `string_value` (upstream logs the mismatch and falls back to the
//! default; here it is an error). A setting no activity reads is an error
//! (a misspelt name would otherwise measure the default); one that another
//! activity reads is ignored, as upstream does, and [`ignored_settings`]
//! names it so that `check_test` can say so.

use crate::proto::{ActivityConfig, NamedSetting};
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

fn setting<'a>(a: &'a ActivityConfig, name: &str) -> Option<&'a NamedSetting> {
    a.activity_settings.iter().find(|s| s.name() == name)
}

/// An integer setting: its value, `default` when absent.
fn int(a: &ActivityConfig, name: &str, default: Option<i64>) -> Result<Option<i64>, String> {
    match setting(a, name) {
        None => Ok(default),
        Some(s) => match s.int64_value {
            Some(v) => Ok(Some(v)),
            None => Err(format!(
                "{name}: needs an int64_value{}",
                s.string_value
                    .as_ref()
                    .map(|v| format!(", got string_value '{v}'"))
                    .unwrap_or_default()
            )),
        },
    }
}

/// An integer setting that must be at least 1 (`default` when absent).
fn positive(a: &ActivityConfig, name: &str, default: Option<i64>) -> Result<usize, String> {
    match int(a, name, default)? {
        None => Err(format!(
            "{name}: required by {}, as a positive number of microseconds",
            func_of(a).unwrap_or_default()
        )),
        Some(v) if v < 1 => Err(format!("{name}: must be a positive integer, got {v}")),
        Some(v) => usize::try_from(v).map_err(|_| format!("{name}: {v} is too large")),
    }
}

fn func_of(a: &ActivityConfig) -> Option<&str> {
    setting(a, "activity_func").and_then(|s| s.string_value.as_deref())
}

/// Reads an activity config as upstream does; the error names the setting
/// and what was expected (without the config's name: callers add it).
pub fn parse(a: &ActivityConfig) -> Result<Activity, String> {
    for s in &a.activity_settings {
        if !KNOWN.contains(&s.name()) {
            return Err(format!(
                "unknown activity setting '{}' (activities read: {})",
                s.name(),
                KNOWN.join(", ")
            ));
        }
    }
    let func = match setting(a, "activity_func") {
        None => {
            return Err(format!(
                "activity_func: missing (one of {})",
                FUNCS.join(", ")
            ));
        }
        Some(s) => match &s.string_value {
            Some(f) => f.as_str(),
            None => return Err("activity_func: needs a string_value".into()),
        },
    };
    let micros = |v: usize| Duration::from_micros(v as u64);
    Ok(match func {
        "ConsumeCpu" => Activity::ConsumeCpu {
            array_size: positive(a, "array_size", Some(CONSUME_CPU_ARRAY_SIZE))?,
        },
        "PolluteDataCache" => Activity::PolluteDataCache {
            array_size: positive(a, "array_size", Some(POLLUTE_DATA_CACHE_ARRAY_SIZE))?,
            reads: positive(
                a,
                "array_reads_per_iteration",
                Some(ARRAY_READS_PER_ITERATION),
            )?,
        },
        "PolluteInstructionCache" => {
            let calls = int(
                a,
                "function_invocations_per_iteration",
                Some(FUNCTION_INVOCATIONS_PER_ITERATION),
            )?
            .unwrap_or(FUNCTION_INVOCATIONS_PER_ITERATION);
            Activity::PolluteInstructionCache {
                calls: usize::try_from(calls.max(0)).unwrap_or(usize::MAX),
            }
        }
        "SleepFor" => Activity::SleepFor {
            duration: micros(positive(a, "duration_us", None)?),
        },
        "SpinFor" => Activity::SpinFor {
            duration: micros(positive(a, "duration_us", None)?),
        },
        other => {
            return Err(format!(
                "activity_func: unknown activity '{other}' (upstream runs {})",
                FUNCS.join(", ")
            ));
        }
    })
}

/// Settings of a valid config that its `activity_func` does not read
/// (upstream ignores them too), each as `NAME (not read by FUNC)`.
pub fn ignored_settings(a: &ActivityConfig) -> Vec<String> {
    let Some(func) = func_of(a) else {
        return Vec::new();
    };
    let used = reads(func);
    a.activity_settings
        .iter()
        .map(NamedSetting::name)
        .filter(|n| *n != "activity_func" && !used.contains(n) && KNOWN.contains(n))
        .map(|n| format!("{n} (not read by {func})"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let err = |s: &[(&str, Result<&str, i64>)]| parse(&config(s)).unwrap_err();
        assert_eq!(
            err(&[func("SleepFor")]),
            "duration_us: required by SleepFor, as a positive number of microseconds"
        );
        assert_eq!(
            err(&[func("SpinFor"), ("duration_us", Err(0))]),
            "duration_us: must be a positive integer, got 0"
        );
        assert_eq!(
            err(&[func("ConsumeCpu"), ("array_size", Ok("big"))]),
            "array_size: needs an int64_value, got string_value 'big'"
        );
        assert!(err(&[func("Nap")]).starts_with("activity_func: unknown activity 'Nap'"));
        assert!(err(&[]).starts_with("activity_func: missing"));
        assert!(
            err(&[func("ConsumeCpu"), ("arraysize", Err(3))])
                .starts_with("unknown activity setting 'arraysize'")
        );
        let ok = config(&[func("PolluteInstructionCache"), ("array_size", Err(5))]);
        assert!(parse(&ok).is_ok());
        assert_eq!(
            ignored_settings(&ok),
            ["array_size (not read by PolluteInstructionCache)"]
        );
    }
}
