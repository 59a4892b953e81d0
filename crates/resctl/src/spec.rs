//! Job specs: `KIND[:k[=v],...][:group2]...`.
//!
//! A spec names a bench kind and any number of property groups separated by
//! `:`; each group is a comma-separated list of `key=value` or bare `key`
//! (value `""`). `id=` and `passive=` are job-level: they may appear in any
//! group and are taken out of the groups into [`JobSpec::id`] and
//! [`JobSpec::passive`]. Upstream only keeps the last group's values; here
//! they count wherever they are given, and giving one twice with different
//! values is an error.
//!
//! `passive=` lists the resource controls that are *not* enforced; see
//! [`Passive`]. Inside a spec its values combine with `/` only, since `,`
//! separates properties (`passive=mem,io` is `passive=mem` plus a bare
//! property `io`).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// The values `passive=` accepts, in the order error messages list them.
pub const PASSIVE_VALUES: [&str; 8] = ["ALL", "all", "cpu", "mem", "io", "fs", "oomd", "none"];

/// Errors from parsing and checking specs. Every message quotes what was
/// given and says what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// The spec has no kind before the first `:`.
    #[error(
        "invalid job spec \"{spec}\": the bench kind is empty; expected KIND[:k[=v],...][:group2]..."
    )]
    EmptyKind { spec: String },
    /// The kind contains characters a kind never has.
    #[error(
        "invalid job spec \"{spec}\": \"{kind}\" is not a bench kind (it contains '=', ',' or whitespace); expected KIND[:k[=v],...][:group2]..."
    )]
    BadKind { spec: String, kind: String },
    /// A property such as `=v` has no key.
    #[error("invalid job spec \"{spec}\": property \"{prop}\" has an empty key; expected k or k=v")]
    EmptyKey { spec: String, prop: String },
    /// `id=` was given empty.
    #[error("invalid job spec \"{spec}\": id is empty; expected id=NAME")]
    EmptyId { spec: String },
    /// The same key was given twice with different values.
    #[error(
        "invalid job spec \"{spec}\": {key} is given twice, as \"{first}\" and as \"{second}\"; expected one value"
    )]
    Conflict {
        spec: String,
        key: String,
        first: String,
        second: String,
    },
    /// A `passive` list has an unknown entry.
    #[error(
        "invalid passive value \"{value}\" in {context}: expected a ',' or '/' separated list of ALL, all, cpu, mem, io, fs, oomd, none"
    )]
    BadPassive { value: String, context: String },
    /// A property key the bench does not know.
    #[error(
        "invalid job spec \"{spec}\": unknown property key \"{key}\" for \"{kind}\" in property group {group_nr}; {expected}"
    )]
    UnknownKey {
        spec: String,
        kind: String,
        key: String,
        /// 1-based: 1 is the first group after the kind.
        group_nr: usize,
        /// "expected one of …" and, if close, "did you mean …".
        expected: String,
    },
}

/// A parsed job spec.
///
/// Serialized as in upstream's journal: `{"kind": …, "id": …|null,
/// "passive": …|null, "props": [{k: v, …}, …]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSpec {
    /// The bench kind, e.g. `protection`.
    pub kind: String,
    /// The job's id, used to tell apart jobs of the same kind.
    pub id: Option<String>,
    /// The `passive=` value as given (validated by [`Passive::parse`]).
    pub passive: Option<String>,
    /// The property groups, at least one after [`parse`].
    #[serde(default)]
    pub props: Vec<BTreeMap<String, String>>,
}

/// Records a job-level key, refusing a second, different value.
fn set_once(
    spec: &str,
    slot: &mut Option<String>,
    key: &str,
    value: &str,
) -> Result<(), SpecError> {
    match slot {
        Some(prev) if prev != value => Err(SpecError::Conflict {
            spec: spec.to_string(),
            key: key.to_string(),
            first: prev.clone(),
            second: value.to_string(),
        }),
        _ => {
            *slot = Some(value.to_string());
            Ok(())
        }
    }
}

/// Parses `KIND[:k[=v],...][:group2]...`.
///
/// - The text before the first `:` is the kind; it must not be empty.
/// - Each further `:`-separated token is a property group of `,`-separated
///   `k=v` (split at the first `=`) or bare `k` (value `""`); empty entries
///   are skipped, so `::` yields an empty group. Without any group there is
///   one empty group.
/// - `id` and `passive` are removed from every group into the job-level
///   fields; a second, different value is an error naming both. `passive`
///   is validated with [`Passive::parse`]; `id` must not be empty.
/// - A key given twice in one group with different values is an error.
///
/// ```
/// let s = resctl::spec::parse("protection:id=x:scenario=mem-hog,load=0.8").unwrap();
/// assert_eq!(s.kind, "protection");
/// assert_eq!(s.id.as_deref(), Some("x"));
/// assert_eq!(s.props.len(), 2);
/// assert_eq!(s.props[1]["load"], "0.8");
/// ```
pub fn parse(spec: &str) -> Result<JobSpec, SpecError> {
    let mut tokens = spec.split(':');
    let kind = tokens.next().unwrap_or("");
    if kind.is_empty() {
        return Err(SpecError::EmptyKind {
            spec: spec.to_string(),
        });
    }
    if kind.contains(['=', ',']) || kind.chars().any(char::is_whitespace) {
        return Err(SpecError::BadKind {
            spec: spec.to_string(),
            kind: kind.to_string(),
        });
    }

    let mut id = None;
    let mut passive = None;
    let mut props = Vec::new();
    for group_str in tokens {
        let mut group = BTreeMap::new();
        for prop in group_str.split(',').filter(|p| !p.is_empty()) {
            let (key, value) = prop.split_once('=').unwrap_or((prop, ""));
            if key.is_empty() {
                return Err(SpecError::EmptyKey {
                    spec: spec.to_string(),
                    prop: prop.to_string(),
                });
            }
            match key {
                "id" => {
                    if value.is_empty() {
                        return Err(SpecError::EmptyId {
                            spec: spec.to_string(),
                        });
                    }
                    set_once(spec, &mut id, key, value)?;
                }
                "passive" => {
                    Passive::parse_in(value, &format!("job spec \"{spec}\""))?;
                    set_once(spec, &mut passive, key, value)?;
                }
                _ => {
                    let mut slot = group.get(key).cloned();
                    set_once(spec, &mut slot, key, value)?;
                    group.insert(key.to_string(), value.to_string());
                }
            }
        }
        props.push(group);
    }
    if props.is_empty() {
        props.push(BTreeMap::new());
    }

    Ok(JobSpec {
        kind: kind.to_string(),
        id,
        passive,
        props,
    })
}

fn write_prop(f: &mut fmt::Formatter<'_>, first: &mut bool, k: &str, v: &str) -> fmt::Result {
    if !*first {
        f.write_str(",")?;
    }
    *first = false;
    if v.is_empty() {
        f.write_str(k)
    } else {
        write!(f, "{k}={v}")
    }
}

/// Prints the spec back in spec syntax: the kind, then one `:group` per
/// property group, with `id` and `passive` first in the first group. Empty
/// values print as bare keys. For any spec from [`parse`],
/// `parse(&spec.to_string()) == Ok(spec)`; a hand-built spec round-trips
/// only if its keys and values contain no `:` or `,` (nor `=` in keys), its
/// groups have no `id`/`passive` keys, and it has at least one group.
impl JobSpec {
    /// Whether a journal's job of this spec is a result for `other`, as
    /// upstream's `JobSpec::compatible`: the same kind, id, passive value
    /// and properties, `apply` and `commit` in the first group aside (they
    /// change what is done with the result, not the measurement).
    ///
    /// A mem-hog-tune group kept with the `size-min`/`size-max` its run
    /// resolved (see `Bench::spec_as_run`) is the result for the same
    /// group without them.
    pub fn compatible(&self, other: &JobSpec) -> bool {
        let strip = |s: &JobSpec| {
            let mut s = s.clone();
            if let Some(g) = s.props.first_mut() {
                g.remove("apply");
                g.remove("commit");
            }
            s
        };
        let mut mine = strip(self);
        for (g, o) in mine.props.iter_mut().zip(&other.props).skip(1) {
            if g.get("scenario").map(String::as_str) == Some("mem-hog-tune") {
                for k in ["size-min", "size-max"] {
                    if !o.contains_key(k) {
                        g.remove(k);
                    }
                }
            }
        }
        mine == strip(other)
    }
}

impl fmt::Display for JobSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.kind)?;
        let empty = BTreeMap::new();
        let has_job_keys = self.id.is_some() || self.passive.is_some();
        // A lone empty group is the default and is not printed.
        let lone_default = self.props.len() == 1 && self.props[0].is_empty() && !has_job_keys;
        if lone_default || (self.props.is_empty() && !has_job_keys) {
            return Ok(());
        }
        let nr_groups = self.props.len().max(1);
        for i in 0..nr_groups {
            f.write_str(":")?;
            let mut first = true;
            if i == 0 {
                if let Some(id) = &self.id {
                    write_prop(f, &mut first, "id", id)?;
                }
                if let Some(passive) = &self.passive {
                    write_prop(f, &mut first, "passive", passive)?;
                }
            }
            for (k, v) in self.props.get(i).unwrap_or(&empty) {
                write_prop(f, &mut first, k, v)?;
            }
        }
        Ok(())
    }
}

/// Which resource controls are passive (true = NOT enforced).
///
/// The default is everything enforced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Passive {
    /// Critical memory protection (only `ALL` makes it passive).
    pub crit_mem_prot: bool,
    pub cpu: bool,
    pub mem: bool,
    pub io: bool,
    pub fs: bool,
    pub oomd: bool,
}

impl Passive {
    /// Parses a `,` or `/` separated list, merging the entries in order from
    /// "everything enforced":
    ///
    /// - `ALL`: everything passive, including crit_mem_prot;
    /// - `all`: cpu, mem, io, fs and oomd passive (crit_mem_prot unchanged);
    /// - `cpu`, `mem`, `io`, `fs`, `oomd`: that one passive;
    /// - `none`: reset to everything enforced;
    /// - empty entries are ignored.
    ///
    /// ```
    /// use resctl::spec::Passive;
    /// let p = Passive::parse("io/mem").unwrap();
    /// assert!(p.io && p.mem && !p.cpu);
    /// assert_eq!(p.to_passive_string(), "mem/io");
    /// ```
    pub fn parse(s: &str) -> Result<Passive, SpecError> {
        Self::parse_in(s, &format!("\"{s}\""))
    }

    fn parse_in(s: &str, context: &str) -> Result<Passive, SpecError> {
        let mut p = Passive::default();
        for value in s.split([',', '/']) {
            match value {
                "" => {}
                "ALL" => {
                    p = Passive {
                        crit_mem_prot: true,
                        cpu: true,
                        mem: true,
                        io: true,
                        fs: true,
                        oomd: true,
                    }
                }
                "all" => {
                    p.cpu = true;
                    p.mem = true;
                    p.io = true;
                    p.fs = true;
                    p.oomd = true;
                }
                "cpu" => p.cpu = true,
                "mem" => p.mem = true,
                "io" => p.io = true,
                "fs" => p.fs = true,
                "oomd" => p.oomd = true,
                "none" => p = Passive::default(),
                _ => {
                    return Err(SpecError::BadPassive {
                        value: value.to_string(),
                        context: context.to_string(),
                    });
                }
            }
        }
        Ok(p)
    }

    /// The short form shown in the `passive=` header line: `ALL` when
    /// crit_mem_prot is passive, `all` when cpu, mem, io, fs and oomd all
    /// are, otherwise the passive ones in that order joined by `/`, and `""`
    /// when nothing is passive.
    pub fn to_passive_string(&self) -> String {
        if self.crit_mem_prot {
            return "ALL".to_string();
        }
        let flags = [
            (self.cpu, "cpu"),
            (self.mem, "mem"),
            (self.io, "io"),
            (self.fs, "fs"),
            (self.oomd, "oomd"),
        ];
        if flags.iter().all(|(on, _)| *on) {
            return "all".to_string();
        }
        flags
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, name)| *name)
            .collect::<Vec<_>>()
            .join("/")
    }
}

/// The entry of `allowed` closest to a misspelled `key`, when one is
/// within an edit distance of 2 (the first of the nearest).
pub fn closest<'a>(key: &str, allowed: &[&'a str]) -> Option<&'a str> {
    harness::suggest::nearest(key, allowed.iter().copied(), 2)
}

/// Checks that every key of property group `group` (0 = the first group
/// after the kind) is in `allowed`. An unknown key is an error that names it,
/// the kind and the spec, lists the allowed keys and, when one is within an
/// edit distance of 2, suggests the closest. A group the spec does not have
/// has no keys and passes.
///
/// ```
/// use resctl::spec::{check_keys, parse};
/// let s = parse("protection::scenario=mem-hog,lod=2").unwrap();
/// let e = check_keys(&s, 1, &["scenario", "loops", "load", "speed"]).unwrap_err();
/// assert!(e.to_string().contains("did you mean \"load\""));
/// ```
pub fn check_keys(spec: &JobSpec, group: usize, allowed: &[&str]) -> Result<(), SpecError> {
    let Some(props) = spec.props.get(group) else {
        return Ok(());
    };
    for key in props.keys() {
        if allowed.contains(&key.as_str()) {
            continue;
        }
        let mut expected = if allowed.is_empty() {
            "this group takes no properties".to_string()
        } else {
            format!("expected one of {}", allowed.join(", "))
        };
        if let Some(suggestion) = closest(key, allowed) {
            expected.push_str(&format!("; did you mean \"{suggestion}\"?"));
        }
        return Err(SpecError::UnknownKey {
            spec: spec.to_string(),
            kind: spec.kind.clone(),
            key: key.clone(),
            group_nr: group + 1,
            expected,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(kvs: &[(&str, &str)]) -> BTreeMap<String, String> {
        kvs.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// A mem-hog-tune scenario kept with the sizes its run resolved is the
    /// result for the spec that left them out, not for other sizes.
    #[test]
    fn resolved_tune_sizes_stay_compatible() {
        let kept = parse("protection::scenario=mem-hog-tune,size-min=1024,size-max=2048").unwrap();
        let given = parse("protection::scenario=mem-hog-tune").unwrap();
        assert!(kept.compatible(&given));
        assert!(kept.compatible(&kept));
        let other = parse("protection::scenario=mem-hog-tune,size-max=4096").unwrap();
        assert!(!kept.compatible(&other));
        assert!(!given.compatible(&kept));
    }

    #[test]
    fn kind_only_has_one_empty_group() {
        let s = parse("hashd-params").unwrap();
        assert_eq!(
            s,
            JobSpec {
                kind: "hashd-params".into(),
                id: None,
                passive: None,
                props: vec![BTreeMap::new()],
            }
        );
    }

    #[test]
    fn groups_values_and_bare_keys() {
        let s = parse("storage:loops=1,apply,commit=").unwrap();
        assert_eq!(s.kind, "storage");
        assert_eq!(
            s.props,
            vec![group(&[("loops", "1"), ("apply", ""), ("commit", "")])]
        );

        let s = parse("protection::scenario=mem-hog,load=0.8:scenario=mem-hog,loops=3").unwrap();
        assert_eq!(
            s.props,
            vec![
                BTreeMap::new(),
                group(&[("scenario", "mem-hog"), ("load", "0.8")]),
                group(&[("scenario", "mem-hog"), ("loops", "3")]),
            ]
        );
    }

    #[test]
    fn double_colon_and_trailing_colon_give_empty_groups() {
        assert_eq!(parse("k::").unwrap().props, vec![BTreeMap::new(); 2]);
        assert_eq!(parse("k:").unwrap().props, vec![BTreeMap::new()]);
        assert_eq!(
            parse("k::a=1").unwrap().props,
            vec![BTreeMap::new(), group(&[("a", "1")])]
        );
        // Empty entries inside a group are skipped.
        assert_eq!(
            parse("k:a,,b").unwrap().props,
            vec![group(&[("a", ""), ("b", "")])]
        );
    }

    #[test]
    fn value_split_at_first_equals() {
        let s = parse("k:cmd=a=b").unwrap();
        assert_eq!(s.props[0]["cmd"], "a=b");
    }

    #[test]
    fn id_and_passive_taken_from_any_group() {
        // Upstream keeps only the last group's; we take them from anywhere.
        let s = parse("protection:id=foo:scenario=mem-hog:passive=io").unwrap();
        assert_eq!(s.id.as_deref(), Some("foo"));
        assert_eq!(s.passive.as_deref(), Some("io"));
        assert_eq!(
            s.props,
            vec![
                BTreeMap::new(),
                group(&[("scenario", "mem-hog")]),
                BTreeMap::new()
            ]
        );
        let s = parse("protection:scenario=mem-hog,id=bar,load=1").unwrap();
        assert_eq!(s.id.as_deref(), Some("bar"));
        assert_eq!(
            s.props,
            vec![group(&[("scenario", "mem-hog"), ("load", "1")])]
        );
        // Repeating the same value is fine.
        let s = parse("k:id=a:id=a").unwrap();
        assert_eq!(s.id.as_deref(), Some("a"));
    }

    #[test]
    fn conflicting_id_or_passive_is_an_error_naming_both() {
        let e = parse("k:id=a:id=b").unwrap_err();
        assert!(matches!(e, SpecError::Conflict { .. }));
        let m = e.to_string();
        assert!(m.contains("\"k:id=a:id=b\""), "{m}");
        assert!(
            m.contains("\"a\"") && m.contains("\"b\"") && m.contains("id"),
            "{m}"
        );

        let m = parse("k:passive=io,passive=cpu").unwrap_err().to_string();
        assert!(
            m.contains("passive") && m.contains("\"io\"") && m.contains("\"cpu\""),
            "{m}"
        );

        let m = parse("k:loops=1,loops=2").unwrap_err().to_string();
        assert!(
            m.contains("loops") && m.contains("\"1\"") && m.contains("\"2\""),
            "{m}"
        );
        // The same key in different groups is independent.
        assert!(parse("k:loops=1:loops=2").is_ok());
    }

    #[test]
    fn passive_values_are_validated() {
        for ok in [
            "ALL",
            "all",
            "cpu",
            "mem/io",
            "io/fs",
            "oomd",
            "none",
            "cpu/mem/none",
        ] {
            let s = parse(&format!("k:passive={ok}")).unwrap();
            assert_eq!(s.passive.as_deref(), Some(ok));
        }
        let e = parse("k:passive=io/disk").unwrap_err();
        let m = e.to_string();
        assert!(m.contains("\"disk\""), "{m}");
        assert!(m.contains("k:passive=io/disk"), "{m}");
        for v in PASSIVE_VALUES {
            assert!(m.contains(v), "{m} lacks {v}");
        }
        // ',' separates properties, so in a spec only '/' combines values:
        // "passive=mem,io" is passive=mem plus a bare property "io".
        let s = parse("k:passive=mem,io").unwrap();
        assert_eq!(s.passive.as_deref(), Some("mem"));
        assert_eq!(s.props, vec![group(&[("io", "")])]);
        // Bare `passive` means "" which enforces everything.
        assert_eq!(parse("k:passive").unwrap().passive.as_deref(), Some(""));
    }

    #[test]
    fn bad_specs() {
        let m = parse("").unwrap_err().to_string();
        assert!(
            m.contains("\"\"") && m.contains("empty") && m.contains("expected KIND"),
            "{m}"
        );
        let m = parse(":a=1").unwrap_err().to_string();
        assert!(m.contains("\":a=1\"") && m.contains("kind is empty"), "{m}");
        let m = parse("id=x").unwrap_err().to_string();
        assert!(
            m.contains("\"id=x\"") && m.contains("not a bench kind"),
            "{m}"
        );
        let m = parse("k:=v").unwrap_err().to_string();
        assert!(m.contains("\"=v\"") && m.contains("empty key"), "{m}");
        let m = parse("k:id=").unwrap_err().to_string();
        assert!(m.contains("id is empty") && m.contains("\"k:id=\""), "{m}");
        assert!(matches!(parse("k:id"), Err(SpecError::EmptyId { .. })));
    }

    #[test]
    fn display_round_trips() {
        for spec in [
            "hashd-params",
            "k::",
            "k:::",
            "k::a",
            "storage:loops=1,apply",
            "protection:id=x,passive=io::scenario=mem-hog,load=0.8",
            "protection:scenario=mem-hog:id=late",
            "k:passive=ALL/cpu",
            "k:passive",
            "k:cmd=a=b,x",
            "k:,,,:b=2",
        ] {
            let parsed = parse(spec).unwrap();
            let shown = parsed.to_string();
            assert_eq!(parse(&shown).unwrap(), parsed, "{spec} -> {shown}");
        }
    }

    #[test]
    fn display_form() {
        assert_eq!(parse("hashd-params").unwrap().to_string(), "hashd-params");
        assert_eq!(parse("k:").unwrap().to_string(), "k");
        assert_eq!(parse("k::").unwrap().to_string(), "k::");
        assert_eq!(
            parse("protection:scenario=mem-hog,load=1:passive=io,id=x")
                .unwrap()
                .to_string(),
            "protection:id=x,passive=io,load=1,scenario=mem-hog:"
        );
        assert_eq!(parse("k:b,a=1").unwrap().to_string(), "k:a=1,b");
        // A spec without groups (only possible from JSON) prints its kind.
        let s = JobSpec {
            kind: "k".into(),
            id: Some("i".into()),
            passive: None,
            props: vec![],
        };
        assert_eq!(s.to_string(), "k:id=i");
    }

    #[test]
    fn json_keys_match_upstream() {
        let s = parse("protection:id=x:scenario=mem-hog").unwrap();
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "kind": "protection",
                "id": "x",
                "passive": null,
                "props": [{}, {"scenario": "mem-hog"}],
            })
        );
        let back: JobSpec = serde_json::from_value(v).unwrap();
        assert_eq!(back, s);
        // Upstream journals always carry all four keys, but be lenient.
        let s: JobSpec = serde_json::from_str(r#"{"kind":"k","props":[{}]}"#).unwrap();
        assert_eq!(s, parse("k").unwrap());
    }

    #[test]
    fn passive_parse_merges_in_order() {
        assert_eq!(Passive::parse("").unwrap(), Passive::default());
        let all = Passive::parse("ALL").unwrap();
        assert!(all.crit_mem_prot && all.cpu && all.mem && all.io && all.fs && all.oomd);
        let lower = Passive::parse("all").unwrap();
        assert!(
            !lower.crit_mem_prot && lower.cpu && lower.mem && lower.io && lower.fs && lower.oomd
        );
        let p = Passive::parse("cpu,io").unwrap();
        assert_eq!(
            p,
            Passive {
                cpu: true,
                io: true,
                ..Passive::default()
            }
        );
        assert_eq!(Passive::parse("cpu/io").unwrap(), p);
        assert_eq!(Passive::parse("cpu,,io/").unwrap(), p);
        // none resets; later entries still apply.
        assert_eq!(Passive::parse("ALL,none").unwrap(), Passive::default());
        assert_eq!(
            Passive::parse("all/none/fs").unwrap(),
            Passive {
                fs: true,
                ..Passive::default()
            }
        );
        // all after ALL keeps crit_mem_prot passive.
        assert!(Passive::parse("ALL,all").unwrap().crit_mem_prot);
    }

    #[test]
    fn passive_parse_errors() {
        for bad in ["IO", "disk", "cpu,memory", "All"] {
            let e = Passive::parse(bad).unwrap_err();
            let m = e.to_string();
            assert!(m.contains("expected"), "{m}");
            assert!(m.contains(&format!("\"{bad}\"")), "{m}");
        }
        let m = Passive::parse("cpu,memory").unwrap_err().to_string();
        assert!(m.contains("\"memory\""), "{m}");
    }

    #[test]
    fn passive_string() {
        let s = |x: &str| Passive::parse(x).unwrap().to_passive_string();
        assert_eq!(s(""), "");
        assert_eq!(s("none"), "");
        assert_eq!(s("ALL"), "ALL");
        assert_eq!(s("all"), "all");
        assert_eq!(s("cpu/mem/io/fs/oomd"), "all");
        assert_eq!(s("io"), "io");
        assert_eq!(s("oomd,io,cpu"), "cpu/io/oomd");
        let odd = Passive {
            crit_mem_prot: true,
            ..Passive::default()
        };
        assert_eq!(odd.to_passive_string(), "ALL");
        // The string parses back to the same set.
        for x in ["", "ALL", "all", "io", "cpu/fs", "mem/io/fs/oomd"] {
            let p = Passive::parse(x).unwrap();
            assert_eq!(Passive::parse(&p.to_passive_string()).unwrap(), p);
        }
    }

    #[test]
    fn check_keys_accepts_known_and_missing_groups() {
        let s = parse("protection::scenario=mem-hog,loops=2").unwrap();
        let allowed = ["scenario", "loops", "load", "speed"];
        assert!(check_keys(&s, 0, &[]).is_ok());
        assert!(check_keys(&s, 1, &allowed).is_ok());
        assert!(check_keys(&s, 7, &[]).is_ok());
    }

    #[test]
    fn check_keys_rejects_unknown_with_suggestion() {
        let s = parse("protection:id=t:scenario=mem-hog,lods=2").unwrap();
        let e = check_keys(&s, 1, &["scenario", "loops", "load", "speed"]).unwrap_err();
        match &e {
            SpecError::UnknownKey {
                key,
                kind,
                group_nr,
                ..
            } => {
                assert_eq!(key, "lods");
                assert_eq!(kind, "protection");
                assert_eq!(*group_nr, 2);
            }
            other => panic!("{other:?}"),
        }
        let m = e.to_string();
        assert!(
            m.contains("\"lods\"") && m.contains("\"protection\""),
            "{m}"
        );
        assert!(
            m.contains("expected one of scenario, loops, load, speed"),
            "{m}"
        );
        assert!(
            m.contains("\"protection:id=t:lods=2,scenario=mem-hog\""),
            "{m}"
        );
        // "lods" is 2 edits from both "loops" and "load": the first in
        // `allowed` order wins.
        assert!(m.contains("did you mean \"loops\"?"), "{m}");
        let s = parse("protection::lod=1").unwrap();
        let m = check_keys(&s, 1, &["scenario", "loops", "load", "speed"])
            .unwrap_err()
            .to_string();
        assert!(m.contains("did you mean \"load\"?"), "{m}");
    }

    #[test]
    fn check_keys_no_suggestion_when_far() {
        let s = parse("storage:frobnicate=1").unwrap();
        let m = check_keys(&s, 0, &["apply", "commit", "loops"])
            .unwrap_err()
            .to_string();
        assert!(
            m.contains("\"frobnicate\"") && m.contains("\"storage\""),
            "{m}"
        );
        assert!(!m.contains("did you mean"), "{m}");
        let m = check_keys(&s, 0, &[]).unwrap_err().to_string();
        assert!(m.contains("takes no properties"), "{m}");
    }
}
