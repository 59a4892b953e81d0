//! Reading and writing Distbench files: test sequences and results, as
//! text, binary protobuf, or gzip-compressed binary (upstream writes results
//! as `*.pb` and `*.pb.gz`).
//!
//! Reading detects the encoding: gzip by its magic bytes, binary by a `.pb`,
//! `.binpb` or `.bin` extension or by not being UTF-8, text otherwise.

use crate::Error;
use crate::textproto::{self, TextError};
use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use prost::{Message, Name};
use std::io::{Read, Write};
use std::path::Path;

/// How a message is stored in a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// The protobuf text format.
    Text,
    /// The protobuf binary wire format.
    Binary,
    /// The binary wire format, gzip-compressed.
    GzipBinary,
}

impl Encoding {
    /// The encoding a file name suggests: `.gz` is gzip, `.pb`, `.binpb` and
    /// `.bin` binary, anything else text.
    pub fn from_path(path: &Path) -> Encoding {
        match path.extension().and_then(|e| e.to_str()) {
            Some("gz") => Encoding::GzipBinary,
            Some("pb" | "binpb" | "bin") => Encoding::Binary,
            _ => Encoding::Text,
        }
    }
}

/// A file that could not be read, decoded or written.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Text(#[from] TextError),
    #[error("{path}: not a binary {message}: {source}")]
    Decode {
        path: String,
        message: String,
        source: prost::DecodeError,
    },
    #[error("{path}: {message}")]
    Other { path: String, message: String },
}

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Decodes `bytes` (named `label` in errors) as a `T`, detecting the encoding
/// as described in the module documentation.
pub fn decode<T: Message + Default + Name>(
    bytes: &[u8],
    label: &str,
    hint: Encoding,
) -> Result<T, FileError> {
    if bytes.starts_with(&GZIP_MAGIC) {
        let mut raw = Vec::new();
        GzDecoder::new(bytes)
            .read_to_end(&mut raw)
            .map_err(|source| FileError::Io {
                path: format!("{label} (gzip)"),
                source,
            })?;
        return decode_binary(&raw, label);
    }
    match (hint, std::str::from_utf8(bytes)) {
        (Encoding::Text | Encoding::GzipBinary, Ok(text)) => Ok(textproto::parse(text, label)?),
        _ => decode_binary(bytes, label),
    }
}

fn decode_binary<T: Message + Default + Name>(bytes: &[u8], label: &str) -> Result<T, FileError> {
    T::decode(bytes).map_err(|source| FileError::Decode {
        path: label.to_string(),
        message: T::full_name(),
        source,
    })
}

/// Encodes `msg` as `encoding`.
pub fn encode<T: Message + Name>(msg: &T, encoding: Encoding) -> Result<Vec<u8>, Error> {
    match encoding {
        Encoding::Text => textproto::format(msg).map(String::into_bytes),
        Encoding::Binary => Ok(msg.encode_to_vec()),
        Encoding::GzipBinary => {
            let mut gz = GzEncoder::new(Vec::new(), Compression::default());
            gz.write_all(&msg.encode_to_vec())
                .and_then(|()| gz.finish())
                .map_err(|e| Error::Input(format!("gzip: {e}")))
        }
    }
}

/// Reads a `T` from `path` in whichever encoding it has.
pub fn read<T: Message + Default + Name>(path: &Path) -> Result<T, FileError> {
    let label = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| FileError::Io {
        path: label.clone(),
        source,
    })?;
    decode(&bytes, &label, Encoding::from_path(path))
}

/// Writes `msg` to `path` as `encoding`.
pub fn write<T: Message + Name>(path: &Path, msg: &T, encoding: Encoding) -> Result<(), FileError> {
    let label = path.display().to_string();
    let bytes = encode(msg, encoding).map_err(|e| FileError::Other {
        path: label.clone(),
        message: e.to_string(),
    })?;
    harness::fsutil::write_atomic(path, &bytes).map_err(|source| FileError::Io {
        path: label,
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{TestResult, TestSequence, TestSequenceResults};

    fn sample() -> TestSequenceResults {
        let seq: TestSequence =
            textproto::parse("tests { name: 't' services { name: 's' count: 1 } }", "t").unwrap();
        TestSequenceResults {
            test_results: vec![TestResult {
                traffic_config: seq.tests.into_iter().next(),
                log_summary: vec!["RPC latency summary:".into()],
                ..Default::default()
            }],
        }
    }

    #[test]
    fn every_encoding_round_trips_through_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let msg = sample();
        for (name, enc) in [
            ("r.txt", Encoding::Text),
            ("r.pb", Encoding::Binary),
            ("r.pb.gz", Encoding::GzipBinary),
        ] {
            let path = dir.path().join(name);
            assert_eq!(Encoding::from_path(&path), enc);
            write(&path, &msg, enc).unwrap();
            let back: TestSequenceResults = read(&path).unwrap();
            assert_eq!(back, msg, "{name}");
        }
    }

    #[test]
    fn gzip_is_detected_by_magic_not_name() {
        let bytes = encode(&sample(), Encoding::GzipBinary).unwrap();
        assert_eq!(&bytes[..2], &GZIP_MAGIC);
        let back: TestSequenceResults = decode(&bytes, "x.txt", Encoding::Text).unwrap();
        assert_eq!(back, sample());
    }

    #[test]
    fn binary_without_extension_is_detected_by_non_utf8() {
        let mut msg = sample();
        // A double field makes the encoding non-UTF-8.
        msg.test_results[0].resource_usage_logs = Some(crate::proto::ResourceUsageLogs {
            test_sequencer_usage: Some(crate::proto::RUsageStats {
                rusage_start: Some(crate::proto::RUsage {
                    user_cpu_time_seconds: Some(1.5),
                    ..Default::default()
                }),
                rusage_diff: None,
            }),
            ..Default::default()
        });
        let bytes = msg.encode_to_vec();
        assert!(std::str::from_utf8(&bytes).is_err());
        let back: TestSequenceResults = decode(&bytes, "results", Encoding::Text).unwrap();
        assert_eq!(back, msg);
    }

    #[test]
    fn bad_files_are_errors_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.pb");
        let err = read::<TestSequence>(&missing).unwrap_err().to_string();
        assert!(err.contains("nope.pb"), "{err}");

        let bad = dir.path().join("bad.pb");
        std::fs::write(&bad, [0x0a, 0xff, 0xff]).unwrap();
        let err = read::<TestSequence>(&bad).unwrap_err().to_string();
        assert!(
            err.contains("bad.pb: not a binary distbench.TestSequence"),
            "{err}"
        );

        let gz = dir.path().join("bad.pb.gz");
        std::fs::write(&gz, [0x1f, 0x8b, 0x00]).unwrap();
        let err = read::<TestSequence>(&gz).unwrap_err().to_string();
        assert!(err.contains("bad.pb.gz (gzip)"), "{err}");
    }
}
