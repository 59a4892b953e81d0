//! The result journal: a JSON array of jobs, in upstream resctl-bench's
//! layout, that survives crashes.
//!
//! Each entry is `{"spec": …, "period": [start, end], "sysinfo": …,
//! "record": …|null, "result": …|null}`. A file name ending in `.gz` is
//! gzip-compressed, on read and on write.
//!
//! Differences from upstream, on purpose:
//! - [`Journal::save`] writes a temporary file in the same directory, fsyncs
//!   it, renames it over the journal and fsyncs the directory. Upstream
//!   truncated and rewrote the file in place, so a crash lost everything.
//! - [`Journal::open`] refuses a file that is not a journal (garbage, an
//!   empty file, a JSON object, …) instead of later overwriting it.

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::spec::JobSpec;

/// Errors from opening and saving a journal.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The file exists but is not a journal; it is left alone.
    #[error(
        "refusing to use {} as the result journal: {reason}; it will not be overwritten (move it away or pick another file)",
        path.display()
    )]
    Refused { path: PathBuf, reason: String },
    /// Reading or writing failed.
    #[error("result journal {}: failed to {action}: {source}", path.display())]
    Io {
        path: PathBuf,
        action: String,
        #[source]
        source: io::Error,
    },
}

/// One job: its spec, when it ran, the system it ran on, what it recorded
/// and what was computed from that.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobData {
    pub spec: JobSpec,
    /// (start, end) in Unix seconds.
    pub period: (u64, u64),
    pub sysinfo: serde_json::Value,
    /// The raw measurements; `None` until the run recorded them.
    pub record: Option<serde_json::Value>,
    /// The result; `None` until the job completed.
    pub result: Option<serde_json::Value>,
}

impl JobData {
    /// True when the job has a result (JSON `null` counts as none, since it
    /// reads back as `None`).
    pub fn is_completed(&self) -> bool {
        matches!(&self.result, Some(v) if !v.is_null())
    }

    /// True when this is a job of `kind` and `id`.
    pub fn same_job(&self, kind: &str, id: Option<&str>) -> bool {
        self.spec.kind == kind && self.spec.id.as_deref() == id
    }
}

/// The result journal: the jobs of one result file.
#[derive(Debug, Clone, PartialEq)]
pub struct Journal {
    path: PathBuf,
    pub jobs: Vec<JobData>,
}

fn is_gz(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "gz")
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "boolean",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}

impl Journal {
    /// Opens the journal at `path`.
    ///
    /// - A missing file gives an empty journal (created by the first save).
    /// - A `.gz` file is decompressed first.
    /// - Anything that is not a JSON array of job objects is refused with
    ///   [`JournalError::Refused`], naming the file and the problem: an empty
    ///   file, bad gzip data, a JSON syntax error (with its line and column),
    ///   another JSON type at the top level, or an entry that is not a job
    ///   (with its index). The file is not touched.
    pub fn open(path: &Path) -> Result<Journal, JournalError> {
        let refuse = |reason: String| JournalError::Refused {
            path: path.to_path_buf(),
            reason,
        };
        let raw = match fs::read(path) {
            Ok(raw) => raw,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(Journal {
                    path: path.to_path_buf(),
                    jobs: Vec::new(),
                });
            }
            Err(e) if path.is_dir() => {
                return Err(refuse(format!("it is a directory ({e})")));
            }
            Err(source) => {
                return Err(JournalError::Io {
                    path: path.to_path_buf(),
                    action: "read it".into(),
                    source,
                });
            }
        };
        if raw.is_empty() {
            return Err(refuse(
                "the file is empty; expected a JSON array of jobs".into(),
            ));
        }
        let text = if is_gz(path) {
            let mut out = Vec::new();
            flate2::read::MultiGzDecoder::new(&raw[..])
                .read_to_end(&mut out)
                .map_err(|e| {
                    refuse(format!(
                        "the name ends in .gz but the content is not valid gzip data ({e})"
                    ))
                })?;
            out
        } else {
            raw
        };
        if text.iter().all(u8::is_ascii_whitespace) {
            return Err(refuse(format!(
                "the file is empty{}; expected a JSON array of jobs",
                if text.is_empty() {
                    ""
                } else {
                    " (only whitespace)"
                }
            )));
        }
        let value: serde_json::Value = serde_json::from_slice(&text).map_err(|e| {
            refuse(format!(
                "it is not valid JSON: {} at line {}, column {}; expected a JSON array of jobs",
                describe_json_error(&e),
                e.line(),
                e.column()
            ))
        })?;
        let serde_json::Value::Array(entries) = value else {
            return Err(refuse(format!(
                "it holds a JSON {} at the top level, not an array; expected a JSON array of {{spec, period, sysinfo, record, result}} objects",
                json_kind(&value)
            )));
        };
        let mut jobs = Vec::with_capacity(entries.len());
        for (i, entry) in entries.into_iter().enumerate() {
            let kind = json_kind(&entry);
            let job: JobData = serde_json::from_value(entry).map_err(|e| {
                refuse(format!(
                    "entry {i} (a JSON {kind}) is not a job: {e}; expected an object with spec, period [start, end], sysinfo, record and result"
                ))
            })?;
            crate::jobinfo::JobSysInfo::from_json(&job.sysinfo).map_err(|e| {
                refuse(format!(
                    "entry {i} ({}) has a system info that cannot be read: {e}; expected upstream resctl-bench's sysinfo object",
                    job.spec
                ))
            })?;
            jobs.push(job);
        }
        Ok(Journal {
            path: path.to_path_buf(),
            jobs,
        })
    }

    /// The journal's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the journal atomically: pretty JSON with a trailing newline
    /// (gzip-compressed for `.gz`) goes to `.<name>.tmp-<pid>` in the same
    /// directory, which is fsynced, renamed over the journal (keeping an
    /// existing journal's permissions; a symlink's target is replaced, not
    /// the link) and then the directory is fsynced. On failure the
    /// temporary file is removed and the old journal is intact.
    pub fn save(&self) -> Result<(), JournalError> {
        let io_err = |action: String, source: io::Error| JournalError::Io {
            path: self.path.clone(),
            action,
            source,
        };

        let mut json = serde_json::to_string_pretty(&self.jobs)
            .map_err(|e| io_err("serialize the jobs".into(), io::Error::other(e)))?;
        json.push('\n');
        let bytes = if is_gz(&self.path) {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            enc.write_all(json.as_bytes())
                .and_then(|()| enc.finish())
                .map_err(|e| io_err("compress the jobs".into(), e))?
        } else {
            json.into_bytes()
        };

        // Replace a symlink's target rather than the link itself.
        let target = match fs::symlink_metadata(&self.path) {
            Ok(md) if md.file_type().is_symlink() => {
                fs::canonicalize(&self.path).map_err(|e| io_err("resolve the symlink".into(), e))?
            }
            _ => self.path.clone(),
        };
        // atomic-write-file: a temporary file beside the target, fsynced,
        // renamed over it, the directory fsynced; the target's permissions
        // are kept.
        let mut f = atomic_write_file::AtomicWriteFile::open(&target).map_err(|e| {
            io_err(
                format!("create a temporary file beside {}", target.display()),
                e,
            )
        })?;
        f.write_all(&bytes)
            .map_err(|e| io_err(format!("write beside {}", target.display()), e))?;
        f.commit()
            .map_err(|e| io_err(format!("replace {}", target.display()), e))
    }

    /// The index of the first job with this kind and id (`None` matches only
    /// `None`) that has a result.
    pub fn find_completed(&self, kind: &str, id: Option<&str>) -> Option<usize> {
        self.jobs
            .iter()
            .position(|j| j.same_job(kind, id) && j.is_completed())
    }

    /// The first completed job that is a result for `spec`: same kind and
    /// id, and properties compatible as upstream judges them (see
    /// [`JobSpec::compatible`]). A completed job run with other properties
    /// is not one: the job runs again and its result is added beside it.
    pub fn find_compatible(&self, spec: &crate::spec::JobSpec) -> Option<usize> {
        self.jobs
            .iter()
            .position(|j| j.spec.compatible(spec) && j.is_completed())
    }

    /// Stores `job`: it replaces the first job with the same kind and id
    /// that has no result yet (an unfinished run of it), or else is
    /// appended. Completed jobs are never replaced. Returns its index.
    pub fn upsert(&mut self, job: JobData) -> usize {
        let (kind, id) = (job.spec.kind.as_str(), job.spec.id.as_deref());
        match self
            .jobs
            .iter()
            .position(|j| j.same_job(kind, id) && !j.is_completed())
        {
            Some(i) => {
                self.jobs[i] = job;
                i
            }
            None => {
                self.jobs.push(job);
                self.jobs.len() - 1
            }
        }
    }
}

/// serde_json's message without its own " at line L column C" suffix, which
/// the caller prints in its own words.
fn describe_json_error(e: &serde_json::Error) -> String {
    let msg = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    msg.strip_suffix(&suffix).unwrap_or(&msg).to_string()
}

/// A number as upstream resctl-bench (2.1 and 2.2.5 alike) reads it from a
/// result file (the published 2.1 merged results were solved on such
/// numbers, and upstream's `format` prints them): serde_json without its
/// `float_roundtrip` feature takes the decimal
/// digits as an integer significand (digits past what a u64 holds are
/// dropped) and a power of ten, converts the significand to f64 and then
/// multiplies or divides by the power, two roundings that can leave the
/// value one unit in the last place off the number written. `v` is the
/// number as read exactly; its shortest decimal form (the one upstream and
/// rackbench write) is parsed upstream's way.
pub fn upstream_float(v: f64) -> f64 {
    if !v.is_finite() || v == 0.0 {
        return v;
    }
    // Shortest digits, `d.ddde±x`.
    let text = format!("{:e}", v.abs());
    let Some((mant, exp)) = text.split_once('e') else {
        return v;
    };
    let Ok(mut exp) = exp.parse::<i32>() else {
        return v;
    };
    let mut sig: u64 = 0;
    let mut overflow = false;
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    for (digits, is_frac) in [(int, false), (frac, true)] {
        for c in digits.bytes() {
            let d = u64::from(c - b'0');
            match sig.checked_mul(10).and_then(|s| s.checked_add(d)) {
                Some(n) if !overflow => {
                    sig = n;
                    if is_frac {
                        exp -= 1;
                    }
                }
                _ => {
                    overflow = true;
                    if !is_frac {
                        exp += 1;
                    }
                }
            }
        }
    }
    // serde_json's table of exact powers, 1e0..=1e308.
    let pow10 = |e: i32| -> f64 { format!("1e{e}").parse().unwrap_or(f64::INFINITY) };
    let mut f = sig as f64;
    loop {
        if exp.unsigned_abs() <= 308 {
            if exp >= 0 {
                f *= pow10(exp);
            } else {
                f /= pow10(-exp);
            }
            break;
        }
        if f == 0.0 || exp > 0 {
            break;
        }
        f /= 1e308;
        exp += 308;
    }
    if v < 0.0 { -f } else { f }
}

/// Every float of `v` as upstream reads it ([`upstream_float`]): what its
/// `merge` solves on and its `format` prints.
pub fn upstream_floats(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Number(n) if n.is_f64() => {
            if let Some(f) = n.as_f64()
                && let Some(m) = serde_json::Number::from_f64(upstream_float(f))
            {
                *n = m;
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(upstream_floats),
        serde_json::Value::Object(o) => o.values_mut().for_each(upstream_floats),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Upstream's number reading: a significand rounded to f64, then
    /// divided by a power of ten; exact for short numbers, one unit in the
    /// last place off for some long ones (values of a published 2.1
    /// result and of the merged result upstream made from it).
    #[test]
    fn floats_read_as_upstream_reads_them() {
        assert_eq!(upstream_float(1.5), 1.5);
        assert_eq!(upstream_float(125.0), 125.0);
        assert_eq!(upstream_float(8.61), 8.61);
        assert_eq!(upstream_float(-0.25), -0.25);
        assert_eq!(upstream_float(0.0), 0.0);
        // 9294631810114107 x 10^-17: the quotient rounds up a unit.
        assert_eq!(upstream_float(0.09294631810114107), 0.09294631810114108);
        assert_eq!(upstream_float(0.0037147954411774916), 0.003714795441177491);
        assert_eq!(
            upstream_float(-0.0037147954411774916),
            -0.003714795441177491
        );
        assert_eq!(upstream_float(1e-7), 1e-7);
        assert_eq!(upstream_float(1e300), 1e300);
        let mut v = serde_json::json!({"a": [0.09294631810114107, 2, "x"], "b": 0.5});
        upstream_floats(&mut v);
        assert_eq!(
            v,
            serde_json::json!({"a": [0.09294631810114108, 2, "x"], "b": 0.5})
        );
    }
    use crate::spec;
    use serde_json::json;

    fn job(spec_str: &str, result: Option<serde_json::Value>) -> JobData {
        JobData {
            spec: spec::parse(spec_str).unwrap(),
            period: (1624407217, 1624408225),
            sysinfo: json!({"bench_version": "test", "swappiness": 60}),
            record: Some(json!({"scenarios": []})),
            result,
        }
    }

    fn sample() -> Vec<JobData> {
        vec![
            job("hashd-params", Some(json!(true))),
            job("protection:id=iocost-off::scenario=mem-hog,load=0.8", None),
            job("iocost-params:passive=io", Some(json!({"x": 1.5}))),
        ]
    }

    fn dir_names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    fn refused(path: &Path) -> String {
        match Journal::open(path) {
            Err(e @ JournalError::Refused { .. }) => e.to_string(),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn missing_file_is_an_empty_journal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("res.json");
        let j = Journal::open(&path).unwrap();
        assert!(j.jobs.is_empty());
        assert_eq!(j.path(), path);
        assert!(!path.exists());
    }

    #[test]
    fn round_trip_plain() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("res.json");
        let mut j = Journal::open(&path).unwrap();
        j.jobs = sample();
        j.save().unwrap();

        let text = fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("[\n  {\n    \"spec\": {"), "{text}");
        assert!(text.ends_with("]\n"));
        assert_eq!(text, serde_json::to_string_pretty(&j.jobs).unwrap() + "\n");

        let back = Journal::open(&path).unwrap();
        assert_eq!(back, j);
        assert_eq!(dir_names(dir.path()), vec!["res.json"]);
    }

    #[test]
    fn entry_layout_matches_upstream() {
        let v = serde_json::to_value(job("hashd-params", None)).unwrap();
        let obj = v.as_object().unwrap();
        let keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        assert_eq!(keys.len(), 5);
        for k in ["spec", "period", "sysinfo", "record", "result"] {
            assert!(obj.contains_key(k), "{k}");
        }
        assert_eq!(v["period"], json!([1624407217u64, 1624408225u64]));
        assert_eq!(v["result"], json!(null));
        assert_eq!(
            v["spec"],
            json!({"kind": "hashd-params", "id": null, "passive": null, "props": [{}]})
        );
    }

    #[test]
    fn reads_upstream_style_entry() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("up.json");
        fs::write(
            &path,
            r#"[{"spec":{"kind":"hashd-params","id":null,"passive":null,"props":[{}]},
                "period":[1624404183,1624405427],
                "sysinfo":{"bench_version":"1.0","sysreqs_report":null},
                "record":{"hash_size":1258291,"rps_max":1029},
                "result":true}]"#,
        )
        .unwrap();
        let j = Journal::open(&path).unwrap();
        assert_eq!(j.jobs.len(), 1);
        assert_eq!(j.jobs[0].spec.kind, "hashd-params");
        assert_eq!(j.jobs[0].period, (1624404183, 1624405427));
        assert_eq!(j.jobs[0].result, Some(json!(true)));
        assert_eq!(j.find_completed("hashd-params", None), Some(0));
    }

    #[test]
    fn round_trip_gz() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("res.json.gz");
        let mut j = Journal::open(&path).unwrap();
        j.jobs = sample();
        j.save().unwrap();

        let raw = fs::read(&path).unwrap();
        assert_eq!(&raw[..2], &[0x1f, 0x8b], "gzip magic");
        let mut text = String::new();
        flate2::read::GzDecoder::new(&raw[..])
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, serde_json::to_string_pretty(&j.jobs).unwrap() + "\n");

        assert_eq!(Journal::open(&path).unwrap(), j);
        assert_eq!(dir_names(dir.path()), vec!["res.json.gz"]);
    }

    #[test]
    fn empty_array_is_an_empty_journal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("res.json");
        fs::write(&path, "[]\n").unwrap();
        assert!(Journal::open(&path).unwrap().jobs.is_empty());
    }

    #[test]
    fn refuses_garbage_and_keeps_its_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.json");
        let garbage = b"[\n  {\"spec\": 1,\n  oops\n]\n".to_vec();
        fs::write(&path, &garbage).unwrap();
        let msg = refused(&path);
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        assert!(msg.contains("not valid JSON"), "{msg}");
        assert!(msg.contains("line 3, column 3"), "{msg}");
        assert!(msg.contains("will not be overwritten"), "{msg}");
        assert_eq!(fs::read(&path).unwrap(), garbage);

        // Binary junk.
        let junk = vec![0u8, 159, 146, 150, 255];
        fs::write(&path, &junk).unwrap();
        let msg = refused(&path);
        assert!(msg.contains("line 1"), "{msg}");
        assert_eq!(fs::read(&path).unwrap(), junk);
        assert_eq!(dir_names(dir.path()), vec!["notes.json"]);
    }

    #[test]
    fn refuses_json_object_and_other_types() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("res.json");
        let obj = br#"{"spec": {"kind": "x"}, "period": [1, 2]}"#.to_vec();
        fs::write(&path, &obj).unwrap();
        let msg = refused(&path);
        assert!(msg.contains("JSON object"), "{msg}");
        assert!(msg.contains("not an array"), "{msg}");
        assert!(msg.contains("will not be overwritten"), "{msg}");
        assert_eq!(fs::read(&path).unwrap(), obj);

        fs::write(&path, "42").unwrap();
        assert!(refused(&path).contains("JSON number"));
    }

    #[test]
    fn refuses_array_of_non_jobs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("res.json");
        let good = serde_json::to_value(job("hashd-params", None)).unwrap();
        for (bad, needle) in [
            (json!([good.clone(), 1]), "entry 1 (a JSON number)"),
            (json!([{"a": 1}]), "missing field `spec`"),
            (
                json!([{"spec": {"kind": "k", "props": [{}]}, "period": [1], "sysinfo": {}}]),
                "entry 0",
            ),
            (
                json!([{"spec": 5, "period": [1, 2], "sysinfo": {}}]),
                "entry 0 (a JSON object) is not a job",
            ),
        ] {
            let text = bad.to_string();
            fs::write(&path, &text).unwrap();
            let msg = refused(&path);
            assert!(msg.contains(needle), "{msg}");
            assert!(msg.contains("expected an object with spec"), "{msg}");
            assert_eq!(fs::read_to_string(&path).unwrap(), text);
        }
    }

    #[test]
    fn refuses_empty_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("res.json");
        fs::write(&path, "").unwrap();
        let msg = refused(&path);
        assert!(msg.contains("empty"), "{msg}");
        assert!(msg.contains("res.json"), "{msg}");
        fs::write(&path, " \n\n").unwrap();
        assert!(refused(&path).contains("empty (only whitespace)"));
        assert_eq!(fs::read(&path).unwrap(), b" \n\n");

        let gz = dir.path().join("res.json.gz");
        fs::write(&gz, "").unwrap();
        assert!(refused(&gz).contains("empty"));
        // Valid gzip of nothing.
        let enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        fs::write(&gz, enc.finish().unwrap()).unwrap();
        assert!(refused(&gz).contains("empty"));
    }

    #[test]
    fn refuses_bad_gzip_and_directories() {
        let dir = tempfile::tempdir().unwrap();
        let gz = dir.path().join("res.json.gz");
        fs::write(&gz, "[]\n").unwrap();
        let msg = refused(&gz);
        assert!(msg.contains("gzip"), "{msg}");
        assert_eq!(fs::read(&gz).unwrap(), b"[]\n");

        let sub = dir.path().join("sub.json");
        fs::create_dir(&sub).unwrap();
        assert!(refused(&sub).contains("directory"));
    }

    #[test]
    fn refused_file_survives_later_save_attempts() {
        // The only way to get a Journal is open(), so a refused file can
        // never be saved over; a fresh journal elsewhere does not touch it.
        let dir = tempfile::tempdir().unwrap();
        let precious = dir.path().join("precious.json");
        fs::write(&precious, "my multi-hour notes").unwrap();
        assert!(Journal::open(&precious).is_err());
        let other = Journal::open(&dir.path().join("other.json")).unwrap();
        other.save().unwrap();
        assert_eq!(
            fs::read_to_string(&precious).unwrap(),
            "my multi-hour notes"
        );
    }

    #[test]
    fn save_replaces_atomically_and_leaves_no_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("res.json");
        let mut j = Journal::open(&path).unwrap();
        for (i, d) in sample().into_iter().enumerate() {
            j.upsert(d);
            j.save().unwrap();
            assert_eq!(dir_names(dir.path()), vec!["res.json"], "after save {i}");
            assert_eq!(Journal::open(&path).unwrap().jobs.len(), i + 1);
        }
        assert_eq!(Journal::open(&path).unwrap(), j);
    }

    #[cfg(unix)]
    #[test]
    fn save_keeps_permissions_and_follows_symlinks() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.json");
        fs::write(&real, "[]").unwrap();
        fs::set_permissions(&real, fs::Permissions::from_mode(0o600)).unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&real, &link).unwrap();

        let mut j = Journal::open(&link).unwrap();
        j.jobs = sample();
        j.save().unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(Journal::open(&real).unwrap().jobs, j.jobs);
        let mode = fs::metadata(&real).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(dir_names(dir.path()), vec!["link.json", "real.json"]);
    }

    #[test]
    fn save_failure_keeps_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gone").join("res.json");
        let j = Journal::open(&path).unwrap();
        match j.save() {
            Err(e @ JournalError::Io { .. }) => {
                assert!(e.to_string().contains("res.json"), "{e}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn path_with_dot_component_saves_beside_it() {
        // (A bare file name saves into "."; testing that would need a
        // process-wide chdir, so a "./" component stands in for it.)
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".").join("r.json");
        let mut j = Journal::open(&path).unwrap();
        j.jobs = sample();
        j.save().unwrap();
        assert_eq!(dir_names(dir.path()), vec!["r.json"]);
    }

    #[test]
    fn find_completed_matches_kind_id_and_result() {
        let mut j = Journal {
            path: PathBuf::from("unused.json"),
            jobs: vec![
                job("protection:id=a", None),
                job("protection", Some(json!(1))),
                job("protection:id=a", Some(json!(2))),
                job("protection:id=a", Some(json!(3))),
                job("hashd-params", Some(serde_json::Value::Null)),
            ],
        };
        assert_eq!(j.find_completed("protection", Some("a")), Some(2));
        assert_eq!(j.find_completed("protection", None), Some(1));
        assert_eq!(j.find_completed("protection", Some("b")), None);
        assert_eq!(j.find_completed("storage", None), None);
        // A JSON null result is no result.
        assert_eq!(j.find_completed("hashd-params", None), None);
        j.jobs[0].result = Some(json!("done"));
        assert_eq!(j.find_completed("protection", Some("a")), Some(0));
    }

    /// As upstream's resume: a completed job counts only for a spec with
    /// the same properties (`apply`/`commit` aside); other properties run
    /// the job again.
    #[test]
    fn find_compatible_compares_properties() {
        let j = Journal {
            path: PathBuf::from("unused.json"),
            jobs: vec![
                job("hashd-params", Some(json!(1))),
                job("protection:id=a,scenario=mem-hog", Some(json!(2))),
            ],
        };
        let spec = |t: &str| spec::parse(t).unwrap();
        assert_eq!(j.find_compatible(&spec("hashd-params")), Some(0));
        assert_eq!(j.find_compatible(&spec("hashd-params:apply")), Some(0));
        assert_eq!(
            j.find_compatible(&spec("hashd-params:rps-max=500,hash-size=2M")),
            None
        );
        assert_eq!(j.find_completed("hashd-params", None), Some(0));
        assert_eq!(
            j.find_compatible(&spec("protection:id=a,scenario=mem-hog")),
            Some(1)
        );
        assert_eq!(j.find_compatible(&spec("protection:id=a")), None);
    }

    #[test]
    fn upsert_replaces_unfinished_else_appends() {
        let mut j = Journal {
            path: PathBuf::from("unused.json"),
            jobs: vec![],
        };
        // New job: appended.
        assert_eq!(j.upsert(job("protection:id=a", None)), 0);
        // Same kind+id, previous unfinished: replaced in place.
        let mut update = job("protection:id=a", None);
        update.record = Some(json!({"step": 2}));
        assert_eq!(j.upsert(update.clone()), 0);
        assert_eq!(j.jobs.len(), 1);
        assert_eq!(j.jobs[0].record, Some(json!({"step": 2})));
        // Other ids and kinds are separate entries; None is its own id.
        assert_eq!(j.upsert(job("protection", None)), 1);
        assert_eq!(j.upsert(job("protection:id=b", None)), 2);
        assert_eq!(j.upsert(job("storage:id=a", None)), 3);
        // Finishing it replaces the unfinished entry.
        assert_eq!(j.upsert(job("protection:id=a", Some(json!(true)))), 0);
        assert_eq!(j.find_completed("protection", Some("a")), Some(0));
        // A completed entry is never replaced: a re-run appends.
        assert_eq!(j.upsert(job("protection:id=a", None)), 4);
        assert_eq!(j.jobs[0].result, Some(json!(true)));
        assert_eq!(j.upsert(job("protection:id=a", Some(json!(false)))), 4);
        assert_eq!(j.jobs.len(), 5);
        assert_eq!(j.find_completed("protection", Some("a")), Some(0));
        // A null result counts as unfinished.
        j.jobs[1].result = Some(serde_json::Value::Null);
        assert_eq!(j.upsert(job("protection", Some(json!(7)))), 1);
    }
}
