//! Which way is better for each metric of a report, from the metric's
//! definition. Each workload states the directions of its own metrics as
//! tables of [`Rule`]s over the dotted keys of its flattened metrics (the
//! keys of the report's `metrics`), next to its metrics struct; the search
//! of `load` states those of its final figures, which FeedSim, calibrate
//! and AdSim report. The harness only looks rules up: a key no rule names
//! is [`Better::Neutral`], so `results compare` reports its change without
//! calling it better or worse.
//!
//! A pattern is matched against the whole key, segment by segment (`.`
//! separates segments): `*` inside a segment matches any characters of
//! that segment, and a `**` segment matches any number of segments, none
//! included. The first rule that matches decides, table after table.
//!
//! Its own crate, below `load` and `harness`, because both state rules in
//! it and neither may import the other.

use serde::Serialize;

/// The direction of better for a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    Higher,
    Lower,
    /// Neither (a setting, a count, or a key no rule names).
    Neutral,
}

/// How a change of a metric with a direction reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Sense {
    /// A rate or a time: better is "faster", worse "slower".
    Speed,
    /// Anything else with a direction (hit ratios, errors, CPU per
    /// request): "better" or "worse".
    Quality,
}

impl Sense {
    /// The words for a better and a worse change.
    pub fn words(self) -> (&'static str, &'static str) {
        match self {
            Sense::Speed => ("faster", "slower"),
            Sense::Quality => ("better", "worse"),
        }
    }
}

/// One rule of a table.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    pub pattern: &'static str,
    pub better: Better,
    pub sense: Sense,
    /// Where the metric is defined and what it is.
    pub what: &'static str,
}

pub const fn rule(pattern: &'static str, better: Better, sense: Sense, what: &'static str) -> Rule {
    Rule {
        pattern,
        better,
        sense,
        what,
    }
}

/// A figure that answers what a run measured, shown first after a run
/// (the terminal summary of `run`, `results list`): the dotted key of the
/// flattened metrics it is read from, what it is, and its unit. A workload
/// states its headlines in the order a person reads them; a key a run's
/// metrics lack is left out of that run's summary.
#[derive(Debug, Clone, Copy)]
pub struct Headline {
    pub key: &'static str,
    pub label: &'static str,
    /// Printed after the value: `QPS`, `ms`, `us`, `%`, `ops/s`, `MiB/s`;
    /// empty for a plain number.
    pub unit: &'static str,
}

pub const fn headline(key: &'static str, label: &'static str, unit: &'static str) -> Headline {
    Headline { key, label, unit }
}

/// The first rule of `tables` (in order) that matches `key`.
pub fn rule_in<'a>(tables: &[&'a [Rule]], key: &str) -> Option<&'a Rule> {
    let segs: Vec<&str> = key.split('.').collect();
    tables.iter().flat_map(|t| t.iter()).find(|r| {
        let pat: Vec<&str> = r.pattern.split('.').collect();
        matches(&pat, &segs)
    })
}

/// The direction of better for `key` under `tables` (neutral when no rule
/// names it).
pub fn better_in(tables: &[&[Rule]], key: &str) -> Better {
    rule_in(tables, key).map_or(Better::Neutral, |r| r.better)
}

/// Where the rules of a benchmark's metrics come from: the harness's
/// registry of workloads, or a fixed set of tables in tests.
pub trait Directions {
    /// The tables of `benchmark`'s metrics, first match wins; none for a
    /// benchmark it does not know.
    fn tables(&self, benchmark: &str) -> &'static [&'static [Rule]];
}

fn matches(pat: &[&str], key: &[&str]) -> bool {
    match pat.split_first() {
        None => key.is_empty(),
        Some((&"**", rest)) => (0..=key.len()).any(|i| matches(rest, &key[i..])),
        Some((p, rest)) => match key.split_first() {
            Some((k, krest)) => glob_segment(p, k) && matches(rest, krest),
            None => false,
        },
    }
}

/// `*` matches any run of characters (within one segment).
fn glob_segment(pat: &str, s: &str) -> bool {
    match pat.split_once('*') {
        None => pat == s,
        Some((head, tail)) => {
            let Some(rest) = s.strip_prefix(head) else {
                return false;
            };
            (0..=rest.len())
                .filter(|i| rest.is_char_boundary(*i))
                .any(|i| glob_segment(tail, &rest[i..]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        let m = |p: &str, k: &str| {
            matches(
                &p.split('.').collect::<Vec<_>>(),
                &k.split('.').collect::<Vec<_>>(),
            )
        };
        assert!(m("**.kqps", "kqps"));
        assert!(m("**.kqps", "a.b.kqps"));
        assert!(!m("**.kqps", "kqps.x"));
        assert!(!m("**.kqps", "xkqps"));
        assert!(m("a.*_ms", "a.p99_ms"));
        assert!(!m("a.*_ms", "a.b.p99_ms"));
        assert!(m("lat_p*_ms", "lat_p95_ms"));
        assert!(!m("lat_p*_ms", "lat_p95_msx"));
        assert!(m("x*y*z", "xaybz") && m("x*y*z", "xyz") && !m("x*y*z", "xzy"));
    }

    #[test]
    fn first_table_first_rule_wins() {
        static A: &[Rule] = &[
            rule("x_ms", Better::Lower, Sense::Speed, "a"),
            rule("**.x_ms", Better::Higher, Sense::Speed, "b"),
        ];
        static B: &[Rule] = &[rule("y", Better::Higher, Sense::Quality, "c")];
        assert_eq!(rule_in(&[A, B], "x_ms").map(|r| r.what), Some("a"));
        assert_eq!(rule_in(&[A, B], "n.x_ms").map(|r| r.what), Some("b"));
        assert_eq!(better_in(&[A, B], "y"), Better::Higher);
        assert_eq!(better_in(&[A, B], "z"), Better::Neutral);
        assert_eq!(better_in(&[], "y"), Better::Neutral);
    }

    #[test]
    fn words() {
        assert_eq!(Sense::Speed.words(), ("faster", "slower"));
        assert_eq!(Sense::Quality.words(), ("better", "worse"));
    }
}

/// For the workloads' own tests of their tables.
pub mod check {
    use super::{Better, Rule, rule_in};

    /// Panics unless each `(key, direction)` of `known` gets its direction
    /// from `tables`, and each rule of `tables` decides at least one known
    /// key (no rule is dead or shadowed by an earlier one).
    pub fn known_keys(tables: &[&[Rule]], known: &[(&str, Better)]) {
        for (key, want) in known {
            let got = rule_in(tables, key).map_or(Better::Neutral, |r| r.better);
            assert_eq!(got, *want, "direction of {key}");
        }
        for r in tables.iter().flat_map(|t| t.iter()) {
            assert!(
                known
                    .iter()
                    .any(|(k, _)| rule_in(tables, k).is_some_and(|x| std::ptr::eq(x, r))),
                "rule {} decides no known key",
                r.pattern
            );
        }
    }
}
