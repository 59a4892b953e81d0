//! A workload's typed result, kept with its run so that the upstream text of
//! the run can be printed again later (`rackbench results show RUN --text`).
//!
//! Each workload defines its own record type (serde, with a version number
//! of its own) and renders the upstream text from it. A direct command
//! prints its final text through the same rendering, so what a saved run
//! reprints is what the run printed. The harness stores a record as
//! `{"kind": ..., "version": ..., "data": ...}` in the run's store row; it
//! never looks inside `data`.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One workload result, tagged with the workload that made it and the
/// version of its record type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The workload's name (`cachebench`, `distbench`, ...).
    pub kind: String,
    /// The version of the workload's record type.
    pub version: u32,
    pub data: Value,
}

/// A stored record that its workload cannot read.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum RecordError {
    #[error("the record is a {found} record, not a {expected} one")]
    Kind { expected: String, found: String },
    #[error(
        "the {kind} record has version {found}; this rackbench reads version {expected} (the run was recorded by {})",
        if found > expected { "a newer rackbench" } else { "an older rackbench" }
    )]
    Version {
        kind: String,
        expected: u32,
        found: u32,
    },
    #[error("the {kind} record (version {version}) does not parse: {message}")]
    Data {
        kind: String,
        version: u32,
        message: String,
    },
}

impl Record {
    /// Wraps a workload's typed result.
    pub fn of<T: Serialize>(kind: &str, version: u32, data: &T) -> Record {
        Record {
            kind: kind.to_string(),
            version,
            // The record types are plain data (numbers, strings, vectors,
            // maps with string keys), which always serialise.
            data: serde_json::to_value(data).unwrap_or(Value::Null),
        }
    }

    /// Reads the typed result back, checking that it is `kind`'s record of
    /// `version`.
    pub fn decode<T: DeserializeOwned>(&self, kind: &str, version: u32) -> Result<T, RecordError> {
        if self.kind != kind {
            return Err(RecordError::Kind {
                expected: kind.to_string(),
                found: self.kind.clone(),
            });
        }
        if self.version != version {
            return Err(RecordError::Version {
                kind: kind.to_string(),
                expected: version,
                found: self.version,
            });
        }
        serde_json::from_value(self.data.clone()).map_err(|e| RecordError::Data {
            kind: kind.to_string(),
            version,
            message: e.to_string(),
        })
    }
}

/// Now, in whole seconds since the Unix epoch (0 if the clock is before
/// it): the timestamp records and result journals carry.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// A workload's typed metrics as the report's flat JSON object: each
/// workload defines a `Serialize` struct of its metrics (so tests and
/// callers read them by type) and its [`crate::Workload::metrics`] derives
/// that struct from the run's record and hands it through here.
pub fn metrics_map<T: Serialize>(metrics: &T) -> anyhow::Result<Map<String, Value>> {
    match serde_json::to_value(metrics)? {
        Value::Object(m) => Ok(m),
        other => anyhow::bail!(
            "a workload's metrics must serialise as a JSON object, not {}",
            match other {
                Value::Null => "null",
                Value::Bool(_) => "a boolean",
                Value::Number(_) => "a number",
                Value::String(_) => "a string",
                Value::Array(_) => "an array",
                Value::Object(_) => "an object",
            }
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct R {
        ops: u64,
        lines: Vec<String>,
    }

    #[test]
    fn round_trips_and_checks_kind_and_version() {
        let r = R {
            ops: 7,
            lines: vec!["a".into()],
        };
        let rec = Record::of("cachebench", 2, &r);
        let text = serde_json::to_string(&rec).unwrap();
        let back: Record = serde_json::from_str(&text).unwrap();
        assert_eq!(back.decode::<R>("cachebench", 2).unwrap(), r);
        assert!(matches!(
            back.decode::<R>("distbench", 2),
            Err(RecordError::Kind { .. })
        ));
        let e = back.decode::<R>("cachebench", 1).unwrap_err();
        assert!(e.to_string().contains("a newer rackbench"), "{e}");
        let e = back.decode::<R>("cachebench", 3).unwrap_err();
        assert!(e.to_string().contains("an older rackbench"), "{e}");
        let bad = Record {
            data: serde_json::json!({"ops": "x"}),
            ..back
        };
        assert!(matches!(
            bad.decode::<R>("cachebench", 2),
            Err(RecordError::Data { .. })
        ));
    }

    #[test]
    fn metrics_are_a_flat_object_of_the_typed_struct() {
        #[derive(Serialize)]
        struct M {
            ops_per_sec: f64,
            #[serde(skip_serializing_if = "Option::is_none")]
            error: Option<String>,
        }
        let m = metrics_map(&M {
            ops_per_sec: 2.5,
            error: None,
        })
        .unwrap();
        assert_eq!(m["ops_per_sec"], 2.5);
        assert!(!m.contains_key("error"));
        let e = metrics_map(&3).unwrap_err();
        assert!(e.to_string().contains("not a number"), "{e}");
    }
}
