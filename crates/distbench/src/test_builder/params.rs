//! Test parameters: what each traffic pattern and protocol driver accepts,
//! with defaults and value checks, and the parameter set of one test as it
//! is built from a configuration string.

use super::Error;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// What values a parameter takes.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// A decimal integer (digits only) of at least `min`.
    Int {
        /// The smallest value accepted.
        min: u64,
    },
    /// A positive decimal number, such as `2` or `0.0025`.
    Positive,
    /// One of the listed words.
    Choice(&'static [&'static str]),
    /// Any text.
    Text,
}

/// One parameter of a traffic pattern or protocol driver.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// Its name, the key of `key=value` in configuration strings.
    pub name: &'static str,
    /// The value it takes when not given; empty means it stays unset (and
    /// so is no attribute) unless given.
    pub default: &'static str,
    /// What values it accepts.
    pub kind: Kind,
    /// One line of help.
    pub help: &'static str,
}

impl Spec {
    /// Checks `value` against the kind of the parameter.
    fn check(&self, value: &str, config: &str) -> Result<(), Error> {
        let bad = |expected: String| Error::BadValue {
            name: self.name.to_string(),
            value: value.to_string(),
            config: config.to_string(),
            expected,
        };
        match self.kind {
            Kind::Int { min } => {
                let n = parse_uint(value).ok_or_else(|| bad(format!("an integer >= {min}")))?;
                if n < min {
                    return Err(bad(format!("an integer >= {min}")));
                }
            }
            Kind::Positive => {
                let ok = value.chars().all(|c| c.is_ascii_digit() || c == '.')
                    && value.parse::<f64>().is_ok_and(|v| v > 0.0 && v.is_finite());
                if !ok {
                    return Err(bad("a positive number".into()));
                }
            }
            // An empty value means "the driver's own default" where the
            // default is empty.
            Kind::Choice(words) => {
                if !(words.contains(&value) || (value.is_empty() && self.default.is_empty())) {
                    return Err(bad(format!("one of {}", words.join(", "))));
                }
            }
            Kind::Text => {}
        }
        Ok(())
    }
}

/// A decimal integer made of digits only, as upstream accepts them.
pub fn parse_uint(value: &str) -> Option<u64> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    value.parse().ok()
}

/// The open-loop interval distributions a pattern may ask for.
pub const SYNCHRONIZATION_MODES: &[&str] =
    &["constant", "exponential", "sync_burst", "sync_burst_spread"];

/// Parameters every test accepts, whatever its pattern and protocol.
pub const COMMON: &[Spec] = &[
    Spec {
        name: "test_duration",
        default: "30",
        kind: Kind::Int { min: 1 },
        help: "seconds of traffic (set for all tests by -t)",
    },
    Spec {
        name: "extra_test_contents",
        default: "",
        kind: Kind::Text,
        help: "text-format DistributedSystemDescription fields appended to the test, \
               usually from a file (extra_test_contents=<FILE); not an attribute",
    },
    Spec {
        name: "ip_version",
        default: "",
        kind: Kind::Choice(&["4", "6"]),
        help: "IP version of the protocol driver (the components ipv4 and ipv6 set it)",
    },
];

/// Keys the builder itself sets; users may name the pattern and driver
/// with them (`traffic_pattern=clique`), the others are derived.
const DERIVED: &[&str] = &[
    "traffic_pattern",
    "protocol_driver",
    "ip_version_string",
    "swept_parameter",
];

/// The parameters of one test, as text, keyed by name. All but
/// `extra_test_contents` become the test's attributes.
#[derive(Debug, Clone, Default)]
pub struct Params {
    values: BTreeMap<String, String>,
    /// Keys the user gave (configuration strings, sweeps), to be checked
    /// against the parameters of the chosen pattern and driver.
    given: BTreeSet<String>,
}

impl Params {
    /// Sets a parameter the user gave.
    pub fn set_given(&mut self, key: &str, value: &str) {
        self.given.insert(key.to_string());
        self.values.insert(key.to_string(), value.to_string());
    }

    /// Sets a derived parameter (an alias, a name, a timeout).
    pub fn set(&mut self, key: &str, value: impl Into<String>) {
        self.values.insert(key.to_string(), value.into());
    }

    /// The value of a parameter, if set.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    /// Whether the user gave this parameter.
    pub fn was_given(&self, key: &str) -> bool {
        self.given.contains(key)
    }

    /// The value of a parameter that has a default or was checked present.
    pub fn text(&self, key: &str) -> &str {
        self.get(key).unwrap_or_default()
    }

    /// A parameter as an integer (its spec made sure it is one).
    pub fn int(&self, key: &str) -> Result<i64, Error> {
        let value = self.text(key);
        parse_uint(value)
            .and_then(|v| i64::try_from(v).ok())
            .ok_or_else(|| Error::BadValue {
                name: key.to_string(),
                value: value.to_string(),
                config: String::new(),
                expected: "an integer".into(),
            })
    }

    /// A parameter as an `int32` field value.
    pub fn int32(&self, key: &str) -> Result<i32, Error> {
        to_i32(self.int(key)?, key)
    }

    /// Replaces `<FILE` values by the file's text (without trailing
    /// newlines, as a shell's `$(cat FILE)` reads it); relative paths are
    /// resolved from `base`.
    pub fn read_files(&mut self, base: &Path) -> Result<(), Error> {
        for (key, value) in &mut self.values {
            if let Some(file) = value.strip_prefix('<') {
                let path = base.join(file);
                let text = std::fs::read_to_string(&path).map_err(|e| Error::File {
                    name: key.clone(),
                    path: path.display().to_string(),
                    message: e.to_string(),
                })?;
                *value = text.trim_end_matches('\n').to_string();
            }
        }
        Ok(())
    }

    /// Fills in the defaults of `specs` and checks the values given.
    pub fn apply(&mut self, specs: &[Spec], config: &str) -> Result<(), Error> {
        for spec in specs {
            match self.values.get(spec.name) {
                Some(value) => spec.check(value, config)?,
                None if !spec.default.is_empty() => self.set(spec.name, spec.default),
                None => {}
            }
        }
        Ok(())
    }

    /// The given keys that none of `specs` (nor the common or derived
    /// keys) declares.
    pub fn unused(&self, specs: &[&[Spec]]) -> Vec<String> {
        self.given
            .iter()
            .filter(|k| {
                !DERIVED.contains(&k.as_str())
                    && !COMMON
                        .iter()
                        .chain(specs.iter().copied().flatten())
                        .any(|s| s.name == k.as_str())
            })
            .cloned()
            .collect()
    }

    /// The attributes of the test: every parameter but the verbatim test
    /// contents.
    pub fn attributes(&self) -> BTreeMap<String, String> {
        self.values
            .iter()
            .filter(|(k, _)| k.as_str() != "extra_test_contents")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

/// Converts a value to an `int32` field, naming the parameter if it is too
/// large.
pub fn to_i32(value: i64, what: &str) -> Result<i32, Error> {
    i32::try_from(value).map_err(|_| Error::BadValue {
        name: what.to_string(),
        value: value.to_string(),
        config: String::new(),
        expected: format!("a value that fits an int32 field (at most {})", i32::MAX),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const INT: Spec = Spec {
        name: "n",
        default: "3",
        kind: Kind::Int { min: 2 },
        help: "",
    };

    #[test]
    fn integers_are_digits_only() {
        assert!(INT.check("10", "c").is_ok());
        for bad in ["1", "-5", "+5", "5x", "", "1.0"] {
            assert!(INT.check(bad, "c").is_err(), "{bad}");
        }
    }

    #[test]
    fn defaults_fill_only_missing_values() {
        let mut p = Params::default();
        p.set_given("n", "7");
        p.apply(&[INT], "c").unwrap();
        assert_eq!(p.get("n"), Some("7"));
        let mut q = Params::default();
        q.apply(&[INT], "c").unwrap();
        assert_eq!(q.get("n"), Some("3"));
        assert!(!q.was_given("n"));
    }

    #[test]
    fn unused_keys_are_found() {
        let mut p = Params::default();
        p.set_given("n", "7");
        p.set_given("typo", "1");
        p.set_given("test_duration", "5");
        let specs: &[Spec] = &[INT];
        assert_eq!(p.unused(&[specs]), vec!["typo".to_string()]);
    }
}
