//! Upstream's `-a/--args FILE`: base options kept in a JSON file.
//!
//! Upstream loads FILE (creating it with its defaults when missing), lets
//! the command line override each value in it, and writes the result back
//! when something changed, so that a later `-a FILE run` repeats the same
//! setup. Its shape is upstream's `Args`: `dir`, `dev`, `linux_tar`,
//! `rep_retention`, `systemd_timeout`, `hashd_size`, `hashd_fake_cpu_load`,
//! `mem_profile`, `mem_avail`, `mem_margin`, `mode`, `iocost_qos_ovr`,
//! `swappiness_ovr` and `job_specs`; `//` and `#` lines are comments.
//!
//! Semantics kept from upstream:
//! - a value on the command line wins over the file's, and an empty one
//!   (`--dev=`) sets the default;
//! - `job_specs` are those of the last `run`, `study`, `format` or
//!   `summary`: given specs replace them, and the saved ones are used when
//!   none are given and the command is the file's `mode` (a different
//!   command drops them);
//! - the file is written back (atomically) when run, study, format or
//!   summary changed a value, the mode or the specs (run and study before
//!   their jobs run, format and summary after they printed), and created
//!   when it was missing; `-r`, `--test`, `-v`, `--force` and the other switches
//!   are never saved.
//!
//! Differences, all towards refusing what upstream would misread: an
//! unknown key is refused with the closest known one (upstream ignores
//! it), a value of the wrong type names its field, and `--swappiness` is
//! saved like the other values (upstream keeps it in the file but forgets
//! to mark the file changed). Two keys whose default differs here are
//! written only when given: `mem_profile` (upstream: 16; here the largest
//! profile that fits) and `mem_margin` (upstream: 0.25 of the share; here
//! the profile's target), so each tool applies its own default to a file
//! the other wrote without them. `null` for `mem_profile` is `off`, as
//! upstream.

use crate::bench::knobs::QosOvr;
use serde::Serialize;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// Upstream's `Args::default().rep_retention` (7 days) and
/// `systemd_timeout`: the values an upstream file holds when the user gave
/// none. Neither changes anything here, so they are taken from a file only
/// when they differ (and then noted like the options).
const DFL_REP_RETENTION: u64 = 7 * 24 * 3600;
const DFL_SYSTEMD_TIMEOUT: f64 = 120.0;

/// Upstream's `Mode` names, by command.
const MODES: &[(&str, &str)] = &[
    ("run", "Run"),
    ("study", "Study"),
    ("solve", "Solve"),
    ("format", "Format"),
    ("summary", "Summary"),
    ("upload", "Upload"),
    ("pack", "Pack"),
    ("merge", "Merge"),
    ("deps", "Deps"),
    ("doc", "Doc"),
];

/// The commands that keep job specs in the file and save it.
const SPEC_COMMANDS: &[&str] = &["run", "study", "solve", "format", "summary"];

/// The options an args file sets, as the command line's option values
/// (`None`: not in the file, or upstream's "not given").
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FileArgs {
    pub dir: Option<String>,
    pub dev: Option<String>,
    pub linux_tar: Option<String>,
    pub rep_retention: Option<String>,
    pub systemd_timeout: Option<String>,
    pub hashd_size: Option<String>,
    pub hashd_cpu_load: Option<String>,
    pub mem_profile: Option<String>,
    pub mem_avail: Option<String>,
    pub mem_margin: Option<String>,
    pub iocost_qos: Option<String>,
    pub swappiness: Option<String>,
    /// Upstream's mode name (`Run`...).
    pub mode: Option<String>,
    /// The saved job specs, as spec text.
    pub job_specs: Vec<String>,
}

/// An args file as loaded: its path, whether it existed, and its values.
#[derive(Debug, Clone)]
pub struct ArgsFile {
    pub path: PathBuf,
    pub existed: bool,
    pub args: FileArgs,
}

fn err(path: &Path, what: impl std::fmt::Display) -> String {
    format!("-a/--args {}: {what}", path.display())
}

/// Loads `path`; a missing file is upstream's defaults (it is created when
/// the command saves).
pub fn load(path: &Path) -> Result<ArgsFile, crate::Error> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(ArgsFile {
            path: path.to_path_buf(),
            existed: true,
            args: parse(&text)
                .map_err(|e| err(path, e))
                .map_err(crate::Error::Input)?,
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ArgsFile {
            path: path.to_path_buf(),
            existed: false,
            args: FileArgs {
                mode: Some("Run".into()),
                ..FileArgs::default()
            },
        }),
        Err(e) => Err(crate::Error::Input(err(path, format!("cannot read: {e}")))),
    }
}

/// A field's value: `Ok(None)` when absent or null.
fn field<'a>(o: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    o.get(key).filter(|v| !v.is_null())
}

fn string(o: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match field(o, key) {
        None => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("\"{key}\": expected a string or null")),
    }
}

fn uint(o: &Map<String, Value>, key: &str) -> Result<Option<u64>, String> {
    match field(o, key) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("\"{key}\": expected a whole number >= 0 or null, got {v}")),
    }
}

fn float(o: &Map<String, Value>, key: &str) -> Result<Option<f64>, String> {
    match field(o, key) {
        None => Ok(None),
        Some(v) => v
            .as_f64()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .map(Some)
            .ok_or_else(|| format!("\"{key}\": expected a number >= 0 or null, got {v}")),
    }
}

/// An args file's text: upstream's `Args` JSON.
pub fn parse(text: &str) -> Result<FileArgs, crate::Error> {
    let v: Value =
        serde_json::from_str(&crate::hashd::params::strip_comments(text)).map_err(|e| {
            crate::Error::Input(format!(
                "not JSON: {e} (line {}, column {})",
                e.line(),
                e.column()
            ))
        })?;
    let Value::Object(o) = v else {
        return Err(crate::Error::Input(
            "expected a JSON object (upstream's args file)".into(),
        ));
    };
    crate::jobfile::check_top_keys(&o).map_err(crate::Error::Input)?;
    let mut a = FileArgs {
        dir: string(&o, "dir").map_err(crate::Error::Input)?,
        dev: string(&o, "dev").map_err(crate::Error::Input)?,
        linux_tar: string(&o, "linux_tar").map_err(crate::Error::Input)?,
        ..FileArgs::default()
    };
    a.rep_retention = uint(&o, "rep_retention")
        .map_err(crate::Error::Input)?
        .filter(|&s| s != DFL_REP_RETENTION)
        .map(|s| s.to_string());
    a.systemd_timeout = float(&o, "systemd_timeout")
        .map_err(crate::Error::Input)?
        .filter(|&s| s != DFL_SYSTEMD_TIMEOUT)
        .map(|s| s.to_string());
    a.hashd_size = uint(&o, "hashd_size")
        .map_err(crate::Error::Input)?
        .map(|s| s.to_string());
    a.hashd_cpu_load = match field(&o, "hashd_fake_cpu_load") {
        None => None,
        Some(Value::Bool(true)) => Some("fake".into()),
        Some(Value::Bool(false)) => Some("real".into()),
        Some(v) => {
            return Err(crate::Error::Input(format!(
                "\"hashd_fake_cpu_load\": expected true (fake), false (real) or null (keep), got {v}"
            )));
        }
    };
    a.mem_profile = match o.get("mem_profile") {
        None => None,
        Some(Value::Null) => Some("off".into()),
        Some(v) => Some(
            v.as_u64()
                .ok_or_else(|| {
                    format!("\"mem_profile\": expected a profile in GiB or null (off), got {v}")
                })
                .map_err(crate::Error::Input)?
                .to_string(),
        ),
    };
    // 0 is upstream's "measure it".
    a.mem_avail = uint(&o, "mem_avail")
        .map_err(crate::Error::Input)?
        .filter(|&m| m > 0)
        .map(|m| m.to_string());
    a.mem_margin = float(&o, "mem_margin")
        .map_err(crate::Error::Input)?
        .map(|m| m.to_string());
    a.iocost_qos = match field(&o, "iocost_qos_ovr") {
        None => None,
        Some(v) => Some(qos_text(v).map_err(crate::Error::Input)?).filter(|t| !t.is_empty()),
    };
    a.swappiness = uint(&o, "swappiness_ovr")
        .map_err(crate::Error::Input)?
        .map(|s| s.to_string());
    a.mode = match field(&o, "mode") {
        None => None,
        Some(Value::String(m)) if MODES.iter().any(|(_, n)| n == m) => Some(m.clone()),
        Some(v) => {
            let names: Vec<&str> = MODES.iter().map(|(_, n)| *n).collect();
            return Err(crate::Error::Input(format!(
                "\"mode\": expected one of {}, got {v}",
                names.join(", ")
            )));
        }
    };
    a.job_specs = crate::jobfile::specs_of(&o).map_err(crate::Error::Input)?;
    Ok(a)
}

/// Upstream's `IoCostQoSOvr` object as `--iocost-qos` text
/// (`off` or `k=v,...`), each value checked as the option checks it.
fn qos_text(v: &Value) -> Result<String, String> {
    const KEYS: &[&str] = &["off", "rpct", "rlat", "wpct", "wlat", "min", "max"];
    let Value::Object(o) = v else {
        return Err(format!(
            "\"iocost_qos_ovr\": expected an object of {}, got {v}",
            KEYS.join(", ")
        ));
    };
    if let Some(k) = o.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(crate::jobfile::unknown("\"iocost_qos_ovr\"", k, KEYS));
    }
    let mut words = Vec::new();
    for (k, v) in KEYS.iter().filter_map(|k| o.get(*k).map(|v| (*k, v))) {
        let at = format!("\"iocost_qos_ovr\".{k}");
        match (k, v) {
            (_, Value::Null) => {}
            ("off", Value::Bool(off)) => {
                if *off {
                    return Ok("off".into());
                }
            }
            ("off", _) => return Err(format!("{at}: expected true or false, got {v}")),
            (_, Value::Number(n)) => {
                let text = n.to_string();
                QosOvr::default()
                    .set_key(k, &text)
                    .map_err(|e| format!("{at} {text}: {e}"))?;
                words.push(format!("{k}={text}"));
            }
            _ => return Err(format!("{at}: expected a number or null, got {v}")),
        }
    }
    Ok(words.join(","))
}

/// The mode name of `cmd`.
pub fn mode_of(cmd: &str) -> Option<&'static str> {
    MODES.iter().find(|(c, _)| *c == cmd).map(|(_, m)| *m)
}

/// The job specs a command runs with, and whether the file's mode or specs
/// change: specs on the command line replace the file's; none given reuse
/// the file's when its mode is this command's (upstream).
pub fn job_specs(file: &FileArgs, cmd: &str, given: Vec<String>) -> (Vec<String>, bool) {
    let same_mode = file.mode.as_deref() == mode_of(cmd);
    if !SPEC_COMMANDS.contains(&cmd) {
        return (given, !same_mode);
    }
    match (given.is_empty(), same_mode) {
        (false, _) => (given, true),
        (true, true) => (file.job_specs.clone(), false),
        (true, false) => (given, true),
    }
}

/// What is written back: upstream's `Args` fields in its order.
#[derive(Debug, Serialize)]
struct Saved {
    dir: String,
    dev: Option<String>,
    linux_tar: Option<String>,
    rep_retention: u64,
    systemd_timeout: f64,
    hashd_size: Option<u64>,
    hashd_fake_cpu_load: Option<bool>,
    /// Absent: our default; `null`: off.
    #[serde(skip_serializing_if = "Option::is_none")]
    mem_profile: Option<Option<u32>>,
    mem_avail: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    mem_margin: Option<f64>,
    mode: String,
    iocost_qos_ovr: SavedQos,
    swappiness_ovr: Option<u32>,
    job_specs: Vec<crate::spec::JobSpec>,
}

/// Upstream's `IoCostQoSOvr` as it serialises.
#[derive(Debug, Default, Serialize)]
struct SavedQos {
    off: bool,
    rpct: Option<f64>,
    rlat: Option<u64>,
    wpct: Option<f64>,
    wlat: Option<u64>,
    min: Option<f64>,
    max: Option<f64>,
}

/// The merged options a command runs with, as they are saved.
#[derive(Debug, Clone, PartialEq)]
pub struct Save {
    pub path: PathBuf,
    pub text: String,
}

impl Save {
    /// Writes the file atomically (its folder created as upstream does).
    pub fn write(&self) -> Result<(), crate::Error> {
        if let Some(d) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(d)
                .map_err(|e| err(&self.path, format!("cannot create {}: {e}", d.display())))
                .map_err(crate::Error::Host)?;
        }
        crate::hashd::params::write_atomic(&self.path, self.text.as_bytes())
            .map_err(|e| crate::Error::Host(format!("-a/--args: {e}")))
    }
}

/// The values saved, from the options a command runs with.
pub struct Merged<'a> {
    pub opts: &'a crate::bench::job::Options,
    pub cmd: &'a str,
    pub specs: &'a [String],
}

/// The file's text for `m`.
pub fn render(m: &Merged<'_>) -> Result<String, crate::Error> {
    let o = m.opts;
    let mem_profile = match o.mem_profile.as_deref() {
        None => None,
        Some("off") => Some(None),
        Some(p) => Some(Some(
            p.parse::<u32>()
                .map_err(|_| {
                    format!("-M/--mem-profile {p:?}: expected a power of two (GiB) or off")
                })
                .map_err(crate::Error::Input)?,
        )),
    };
    let q = o.iocost_qos.clone().unwrap_or_default();
    let specs = m
        .specs
        .iter()
        .map(|s| crate::spec::parse(s).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(crate::Error::Input)?;
    let saved = Saved {
        dir: o.dir.display().to_string(),
        dev: o.dev.clone(),
        linux_tar: o.linux_tar.as_ref().map(|p| p.display().to_string()),
        rep_retention: o.rep_retention.unwrap_or(DFL_REP_RETENTION),
        systemd_timeout: o.systemd_timeout.unwrap_or(DFL_SYSTEMD_TIMEOUT),
        hashd_size: o.hashd_size,
        hashd_fake_cpu_load: o.hashd_fake_cpu_load,
        mem_profile,
        mem_avail: o.mem_avail.unwrap_or(0),
        mem_margin: o.mem_margin,
        mode: mode_of(m.cmd).unwrap_or("Run").to_string(),
        iocost_qos_ovr: SavedQos {
            off: q.off,
            rpct: q.rpct,
            rlat: q.rlat,
            wpct: q.wpct,
            wlat: q.wlat,
            min: q.min,
            max: q.max,
        },
        swappiness_ovr: o.swappiness,
        job_specs: specs,
    };
    let mut text =
        serde_json::to_string_pretty(&saved).map_err(|e| crate::Error::Input(e.to_string()))?;
    text.push('\n');
    Ok(text)
}

/// Whether a command writes the file back: run, study, format and summary
/// do when they changed something; every command creates a missing file.
pub fn saves(cmd: &str, existed: bool, changed: bool) -> bool {
    !existed || (changed && SPEC_COMMANDS.contains(&cmd))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An args file as upstream writes it after
    /// `resctl-bench -a a.json -r r.json --mem-margin 30% run protection`.
    const UPSTREAM: &str = r#"// resctl-bench args
{
  "dir": "/var/lib/resctl-demo",
  "dev": null,
  "linux_tar": null,
  "rep_retention": 604800,
  "systemd_timeout": 120.0,
  "hashd_size": null,
  "hashd_fake_cpu_load": true,
  "mem_profile": 16,
  "mem_avail": 0,
  "mem_margin": 0.3,
  "mode": "Run",
  "iocost_qos_ovr": {"off": false, "rpct": null, "rlat": null, "wpct": 95.0,
                     "wlat": 20000, "min": 50.0, "max": 100.0},
  "swappiness_ovr": 60,
  "job_specs": [
    {"kind": "protection", "id": null, "passive": null,
     "props": [{}, {"scenario": "mem-hog", "load": "0.8"}]}
  ]
}
"#;

    #[test]
    fn upstreams_file_becomes_option_values() {
        let a = parse(UPSTREAM).unwrap();
        assert_eq!(a.dir.as_deref(), Some("/var/lib/resctl-demo"));
        assert_eq!(a.dev, None);
        // Upstream's defaults of options that change nothing here are not
        // taken as given.
        assert_eq!(a.rep_retention, None);
        assert_eq!(a.systemd_timeout, None);
        assert_eq!(a.hashd_cpu_load.as_deref(), Some("fake"));
        assert_eq!(a.mem_profile.as_deref(), Some("16"));
        assert_eq!(a.mem_avail, None);
        assert_eq!(a.mem_margin.as_deref(), Some("0.3"));
        assert_eq!(
            a.iocost_qos.as_deref(),
            Some("wpct=95.0,wlat=20000,min=50.0,max=100.0")
        );
        assert_eq!(a.swappiness.as_deref(), Some("60"));
        assert_eq!(a.mode.as_deref(), Some("Run"));
        assert_eq!(
            a.job_specs,
            vec!["protection::load=0.8,scenario=mem-hog".to_string()]
        );
        let off = parse(r#"{"mem_profile": null, "iocost_qos_ovr": {"off": true}}"#).unwrap();
        assert_eq!(off.mem_profile.as_deref(), Some("off"));
        assert_eq!(off.iocost_qos.as_deref(), Some("off"));
    }

    #[test]
    fn bad_files_name_the_field() {
        for (text, want) in [
            ("[1]", "expected a JSON object"),
            (r#"{"mem_proflie": 4}"#, "did you mean \"mem_profile\""),
            (
                r#"{"mem_profile": "4"}"#,
                "\"mem_profile\": expected a profile in GiB",
            ),
            (
                r#"{"swappiness_ovr": -1}"#,
                "\"swappiness_ovr\": expected a whole number",
            ),
            (
                r#"{"mem_margin": "25%"}"#,
                "\"mem_margin\": expected a number",
            ),
            (
                r#"{"mode": "Running"}"#,
                "\"mode\": expected one of Run, Study",
            ),
            (
                r#"{"hashd_fake_cpu_load": "yes"}"#,
                "\"hashd_fake_cpu_load\": expected true",
            ),
            (
                r#"{"iocost_qos_ovr": {"rlatt": 5}}"#,
                "did you mean \"rlat\"",
            ),
            (
                r#"{"iocost_qos_ovr": {"rlat": 1.5}}"#,
                "\"iocost_qos_ovr\".rlat 1.5: expected a latency",
            ),
            (
                r#"{"job_specs": [{"kind": "x", "prop": []}]}"#,
                "job_specs[0]: unknown key \"prop\"",
            ),
            ("{\n  \"dir\": \"a\",\n  oops\n}", "line 3"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.to_string().contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn specs_are_reused_only_by_the_same_command() {
        let file = FileArgs {
            mode: Some("Run".into()),
            job_specs: vec!["storage".into()],
            ..FileArgs::default()
        };
        let given = vec!["protection".to_string()];
        assert_eq!(
            job_specs(&file, "run", vec![]),
            (vec!["storage".into()], false)
        );
        assert_eq!(
            job_specs(&file, "run", given.clone()),
            (given.clone(), true)
        );
        assert_eq!(job_specs(&file, "format", vec![]), (vec![], true));
        assert_eq!(job_specs(&file, "deps", vec![]), (vec![], true));
        assert!(saves("run", true, true));
        assert!(!saves("run", true, false));
        assert!(!saves("deps", true, true));
        assert!(saves("deps", false, false));
    }

    #[test]
    fn what_is_saved_reads_back_as_the_same_values() {
        let opts = crate::bench::job::Options {
            dir: PathBuf::from("/tmp/x"),
            mem_profile: Some("off".into()),
            mem_margin: Some(0.3),
            hashd_fake_cpu_load: Some(false),
            iocost_qos: Some(QosOvr::parse_overrides("rlat=5000,vrate=80").unwrap()),
            swappiness: Some(10),
            ..Default::default()
        };
        let specs = vec!["protection:id=a:scenario=mem-hog".to_string()];
        let text = render(&Merged {
            opts: &opts,
            cmd: "run",
            specs: &specs,
        })
        .unwrap();
        // Upstream's shape: every field of Args, the mode's variant name.
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["mode"], "Run");
        assert_eq!(v["rep_retention"], 604800);
        assert_eq!(v["mem_profile"], Value::Null);
        assert_eq!(v["iocost_qos_ovr"]["off"], false);
        assert_eq!(v["job_specs"][0]["id"], "a");
        let back = parse(&text).unwrap();
        assert_eq!(back.dir.as_deref(), Some("/tmp/x"));
        assert_eq!(back.mem_profile.as_deref(), Some("off"));
        assert_eq!(back.mem_margin.as_deref(), Some("0.3"));
        assert_eq!(back.hashd_cpu_load.as_deref(), Some("real"));
        assert_eq!(
            back.iocost_qos.as_deref(),
            Some("rlat=5000,min=80.0,max=80.0")
        );
        assert_eq!(back.swappiness.as_deref(), Some("10"));
        assert_eq!(back.rep_retention, None);
        assert_eq!(back.job_specs.len(), 1);
        crate::bench::job::parse_spec(&back.job_specs[0]).unwrap();
        // Not given: left out, so each tool applies its own default.
        let plain = render(&Merged {
            opts: &crate::bench::job::Options::default(),
            cmd: "format",
            specs: &[],
        })
        .unwrap();
        assert!(
            !plain.contains("mem_profile") && !plain.contains("mem_margin"),
            "{plain}"
        );
        assert!(plain.contains("\"mode\": \"Format\""), "{plain}");
    }
}
