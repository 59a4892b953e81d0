//! Upstream's job files: `run -f FILE` (and `format`/`summary -f FILE`).
//!
//! Upstream's `-f/--file` loads an args file (the JSON its `-a/--args`
//! keeps: every global option and `job_specs`) and takes only its
//! `job_specs`, in the order the files and spec words were given. Lines
//! whose first non-blank characters are `//` or `#` are comments, as in
//! upstream's JSON loader; they are blanked, not removed, so a JSON error
//! still names the file's own line and column.
//!
//! Each job spec (`{"kind": K, "id": ID|null, "passive": P|null, "props":
//! [{k: v}, ...]}`) becomes the spec text `KIND:k=v,...:...` and is then
//! checked exactly as a spec word on the command line, so a bad property
//! is named the same way, with the file and the entry added. Upstream
//! ignores keys it does not know; a misspelled key here is refused with
//! the closest known one, since a setting silently dropped would change
//! what is run.

use serde_json::Value;
use std::path::Path;

/// Upstream's `Args` fields: what an args file written by upstream holds.
/// Only `job_specs` is read from a job file, as upstream.
const ARGS_KEYS: &[&str] = &[
    "dir",
    "dev",
    "linux_tar",
    "rep_retention",
    "systemd_timeout",
    "hashd_size",
    "hashd_fake_cpu_load",
    "mem_profile",
    "mem_avail",
    "mem_margin",
    "mode",
    "iocost_qos_ovr",
    "swappiness_ovr",
    "job_specs",
];

/// The keys of one entry of `job_specs` (upstream's `JobSpec`).
const SPEC_KEYS: &[&str] = &["kind", "id", "passive", "props"];

/// The marker the command-line pre-pass puts before a `-f` path, so that
/// files and spec words keep their order. No command-line word can hold a
/// NUL byte, so no spec word can look like it.
pub const MARK: &str = "\u{0}file\u{0}";

/// The word standing for `-f PATH` among the spec words.
pub fn marked(path: &str) -> String {
    format!("{MARK}{path}")
}

/// Replaces each marked word in `words` by the specs of its file, in place
/// (spec words are kept as they are).
pub fn expand(words: Vec<String>) -> Result<Vec<String>, crate::Error> {
    let mut out = Vec::with_capacity(words.len());
    for w in words {
        match w.strip_prefix(MARK) {
            Some(path) => out.extend(load(Path::new(path))?),
            None => out.push(w),
        }
    }
    Ok(out)
}

/// The job specs of `path`, as spec text.
pub fn load(path: &Path) -> Result<Vec<String>, crate::Error> {
    let name = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| crate::Error::Input(format!("-f/--file {name}: cannot read: {e}")))?;
    parse(&text).map_err(|e| crate::Error::Input(format!("-f/--file {name}: {e}")))
}

/// An unknown key of `what`, with the closest known one.
pub(crate) fn unknown(what: &str, key: &str, known: &[&str]) -> String {
    match crate::spec::closest(key, known) {
        Some(k) => format!("{what}: unknown key {key:?}; did you mean {k:?}?"),
        None => format!(
            "{what}: unknown key {key:?}; expected one of {}",
            known.join(", ")
        ),
    }
}

/// Refuses a top-level key that upstream's `Args` does not have.
pub(crate) fn check_top_keys(top: &serde_json::Map<String, Value>) -> Result<(), String> {
    for k in top.keys() {
        if !ARGS_KEYS.contains(&k.as_str()) {
            return Err(unknown("top level", k, ARGS_KEYS));
        }
    }
    Ok(())
}

/// The `job_specs` of an args or job file as spec text, each checked as
/// a spec word (absent or null: none).
pub(crate) fn specs_of(top: &serde_json::Map<String, Value>) -> Result<Vec<String>, String> {
    let specs = match top.get("job_specs") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(_) => return Err("\"job_specs\": expected a list of job specs".into()),
    };
    let mut out = Vec::with_capacity(specs.len());
    for (i, s) in specs.iter().enumerate() {
        let at = format!("job_specs[{i}]");
        let text = spec_text(s, &at)?;
        crate::bench::job::parse_spec(&text).map_err(|e| format!("{at}: {e}"))?;
        out.push(text);
    }
    Ok(out)
}

/// The job specs of a job file's text, as spec text.
pub fn parse(text: &str) -> Result<Vec<String>, crate::Error> {
    let v: Value =
        serde_json::from_str(&crate::hashd::params::strip_comments(text)).map_err(|e| {
            crate::Error::Input(format!(
                "not JSON: {e} (line {}, column {})",
                e.line(),
                e.column()
            ))
        })?;
    let Value::Object(top) = v else {
        return Err(crate::Error::Input(
            "expected a JSON object with \"job_specs\" (upstream's args file)".into(),
        ));
    };
    check_top_keys(&top).map_err(crate::Error::Input)?;
    if matches!(top.get("job_specs"), None | Some(Value::Null)) {
        return Err(crate::Error::Input(
            "no \"job_specs\": expected a list of job specs".into(),
        ));
    }
    specs_of(&top).map_err(crate::Error::Input)
}

/// A value of a spec, which must not hold the spec syntax's separators.
fn plain<'a>(v: &'a str, at: &str) -> Result<&'a str, String> {
    if v.contains([',', ':']) {
        return Err(format!(
            "{at}: {v:?} holds ',' or ':', which a job spec cannot carry"
        ));
    }
    Ok(v)
}

/// One `job_specs` entry as the spec text `KIND[:k=v,...]...`, with `id`
/// and `passive` in the first group.
fn spec_text(s: &Value, at: &str) -> Result<String, String> {
    let Value::Object(o) = s else {
        return Err(format!(
            "{at}: expected an object with \"kind\" and \"props\""
        ));
    };
    for k in o.keys() {
        if !SPEC_KEYS.contains(&k.as_str()) {
            return Err(unknown(at, k, SPEC_KEYS));
        }
    }
    let kind = match o.get("kind") {
        Some(Value::String(k)) if !k.is_empty() => plain(k, &format!("{at}.kind"))?,
        _ => return Err(format!("{at}.kind: expected the bench kind, a string")),
    };
    let opt = |key: &str| -> Result<Option<&str>, String> {
        match o.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(v)) => plain(v, &format!("{at}.{key}")).map(Some),
            Some(_) => Err(format!("{at}.{key}: expected a string or null")),
        }
    };
    let id = opt("id")?;
    let passive = opt("passive")?;
    let groups = match o.get("props") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(g)) => g.iter().collect(),
        Some(_) => return Err(format!("{at}.props: expected a list of property groups")),
    };
    let mut text = kind.to_string();
    let n = groups.len().max(1);
    for gi in 0..n {
        let mut props = Vec::new();
        if gi == 0 {
            if let Some(id) = id {
                props.push(format!("id={id}"));
            }
            if let Some(p) = passive {
                props.push(format!("passive={p}"));
            }
        }
        if let Some(g) = groups.get(gi) {
            let gat = format!("{at}.props[{gi}]");
            let Value::Object(g) = g else {
                return Err(format!("{gat}: expected an object of string properties"));
            };
            for (k, v) in g {
                let v = match v {
                    Value::String(v) => v,
                    _ => {
                        return Err(format!(
                            "{gat}.{k}: expected a string value (\"\" for a bare key)"
                        ));
                    }
                };
                let k = plain(k, &gat)?;
                if k.contains('=') || k.is_empty() {
                    return Err(format!("{gat}: {k:?} is not a property name"));
                }
                let v = plain(v, &format!("{gat}.{k}"))?;
                props.push(if v.is_empty() {
                    k.to_string()
                } else {
                    format!("{k}={v}")
                });
            }
        }
        if gi == 0 && props.is_empty() && n == 1 {
            break;
        }
        text.push(':');
        text.push_str(&props.join(","));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_args_file_gives_its_job_specs_in_order() {
        // The shape upstream's args file has (every Args field), with
        // comment lines.
        let text = r#"// resctl-bench job file
# another comment
{
  "dir": "/var/lib/resctl-bench",
  "dev": null,
  "mem_profile": 16,
  "job_specs": [
    {"kind": "hashd-params", "id": null, "passive": null, "props": [{}]},
    {"kind": "protection", "id": "p1", "passive": null,
     "props": [{}, {"scenario": "mem-hog"}]},
    {"kind": "storage", "props": [{"loops": "2"}]}
  ]
}"#;
        assert_eq!(
            parse(text).unwrap(),
            vec![
                "hashd-params",
                "protection:id=p1:scenario=mem-hog",
                "storage:loops=2"
            ]
        );
    }

    #[test]
    fn bad_job_files_are_refused_naming_the_place() {
        let e = parse("{\n  \"job_specs\": [\n  {\"kind\": }\n]}").unwrap_err();
        assert!(e.to_string().contains("line 3"), "{e}");
        let e = parse(r#"{"job_spec": []}"#).unwrap_err();
        assert!(
            e.to_string().contains("\"job_spec\"") && e.to_string().contains("\"job_specs\""),
            "{e}"
        );
        let e = parse(r#"{"job_specs": [{"knd": "storage"}]}"#).unwrap_err();
        assert!(
            e.to_string().contains("job_specs[0]") && e.to_string().contains("\"kind\""),
            "{e}"
        );
        let e =
            parse(r#"{"job_specs": [{"kind": "storage", "props": [{"loops": 2}]}]}"#).unwrap_err();
        assert!(e.to_string().contains("job_specs[0].props[0].loops"), "{e}");
        let e = parse(r#"{"job_specs": [{"kind": "no-such-bench"}]}"#).unwrap_err();
        assert!(
            e.to_string().contains("job_specs[0]") && e.to_string().contains("no-such-bench"),
            "{e}"
        );
        let e =
            parse(r#"{"job_specs": [{"kind": "storage", "props": [{"a": "x,y"}]}]}"#).unwrap_err();
        assert!(e.to_string().contains("','"), "{e}");
        assert!(
            parse("{}")
                .unwrap_err()
                .to_string()
                .contains("no \"job_specs\"")
        );
        assert!(parse("[]").unwrap_err().to_string().contains("JSON object"));
    }

    #[test]
    fn marked_words_expand_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("jobs.json");
        std::fs::write(&f, r#"{"job_specs": [{"kind": "storage"}]}"#).unwrap();
        let words = vec![
            "hashd-params".to_string(),
            marked(f.to_str().unwrap()),
            "protection".to_string(),
        ];
        assert_eq!(
            expand(words).unwrap(),
            vec!["hashd-params", "storage", "protection"]
        );
        let e = expand(vec![marked("/nonexistent/jobs.json")]).unwrap_err();
        assert!(
            e.to_string().contains("-f/--file /nonexistent/jobs.json"),
            "{e}"
        );
    }
}
