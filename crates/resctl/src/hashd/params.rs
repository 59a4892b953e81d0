//! hashd's two configuration files, in rd-hashd's JSON layout: `args.json`
//! (set at start: test files, sizes, report and log places) and
//! `params.json` (runtime knobs, reloaded live when the file changes).
//!
//! Both are written with a preamble of `//` comment lines describing the
//! fields and saved atomically (a staging file renamed over the target). On
//! reading, `//` and `#` lines are blanked (so JSON errors keep their line
//! numbers) and unknown keys are errors naming the key: upstream ignores
//! them silently.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Test files are made of 32 MiB units.
pub const TESTFILE_UNIT: u64 = 32 << 20;
/// The smallest `file_frac` taken.
pub const FILE_FRAC_MIN: f64 = 0.001;

/// Start-up arguments (`args.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Args {
    /// Directory of the test files.
    pub testfiles: Option<String>,
    /// Footprint at mem_frac 1.0, bytes (default: 4 x memory).
    pub size: u64,
    /// Test files total `size x file_max_frac`.
    pub file_max_frac: f64,
    /// Share of each 512-byte block of test data that is zeros.
    pub compressibility: f64,
    /// The params file.
    pub params: Option<String>,
    /// The report file, rewritten every second.
    pub report: Option<String>,
    /// Directory of the hash log (none: no log).
    pub log_dir: Option<String>,
    /// Bytes of log kept (rotated in 1 GiB files).
    pub log_size: u64,
    /// Seconds between status lines (0: none).
    pub interval: u32,
    /// Whether the test files sit on a rotating disk (None: detect).
    pub rotational: Option<bool>,
}

impl Args {
    /// The defaults for a host with `mem` bytes of memory.
    pub fn with_mem(mem: u64) -> Args {
        Args {
            testfiles: None,
            size: 4 * mem,
            file_max_frac: 0.25,
            compressibility: 0.0,
            params: None,
            report: None,
            log_dir: None,
            log_size: mem / 2,
            interval: 10,
            rotational: None,
        }
    }

    /// Bytes of test files: `size x file_max_frac`, rounded up.
    pub fn file_max_size(&self) -> u64 {
        (self.size as f64 * self.file_max_frac).ceil() as u64
    }
}

impl Default for Args {
    fn default() -> Args {
        Args::with_mem(crate::hashd::total_memory())
    }
}

/// A PID controller's gains.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PidParams {
    pub kp: f64,
    pub ki: f64,
    pub kd: f64,
}

/// Runtime knobs (`params.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Params {
    pub control_period: f64,
    pub concurrency_max: u32,
    pub lat_target_pct: f64,
    pub lat_target: f64,
    pub rps_target: u32,
    pub rps_max: u32,
    pub mem_frac: f64,
    pub chunk_pages: usize,
    pub file_frac: f64,
    pub file_size_mean: usize,
    pub file_size_stdev_ratio: f64,
    pub file_addr_stdev_ratio: f64,
    pub file_addr_rps_base_frac: f64,
    pub file_write_frac: f64,
    pub anon_size_ratio: f64,
    pub anon_size_stdev_ratio: f64,
    pub anon_addr_stdev_ratio: f64,
    pub anon_addr_rps_base_frac: f64,
    pub anon_write_frac: f64,
    pub sleep_mean: f64,
    pub sleep_stdev_ratio: f64,
    pub cpu_ratio: f64,
    pub log_bps: u64,
    pub fake_cpu_load: bool,
    pub acc_dist_slots: usize,
    pub lat_pid: PidParams,
    pub rps_pid: PidParams,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            control_period: 1.0,
            concurrency_max: 65536,
            lat_target_pct: 0.95,
            lat_target: 0.075,
            rps_target: 65536,
            rps_max: 0,
            mem_frac: 0.80,
            chunk_pages: 25,
            file_frac: 0.25,
            file_size_mean: 1_258_291,
            file_size_stdev_ratio: 0.45,
            file_addr_stdev_ratio: 0.215,
            file_addr_rps_base_frac: 0.5,
            file_write_frac: 0.0,
            anon_size_ratio: 2.3,
            anon_size_stdev_ratio: 0.45,
            anon_addr_stdev_ratio: 0.235,
            anon_addr_rps_base_frac: 0.5,
            anon_write_frac: 0.3,
            sleep_mean: 0.020,
            sleep_stdev_ratio: 0.33,
            cpu_ratio: 0.93,
            log_bps: 1_100_794,
            fake_cpu_load: false,
            acc_dist_slots: 0,
            lat_pid: PidParams {
                kp: 0.1,
                ki: 0.01,
                kd: 0.01,
            },
            rps_pid: PidParams {
                kp: 0.25,
                ki: 0.01,
                kd: 0.01,
            },
        }
    }
}

impl Params {
    /// Bytes of log padding per request so the log grows at `log_bps` at
    /// `rps_max` (0 without rps_max).
    pub fn log_padding(&self) -> usize {
        if self.rps_max == 0 {
            0
        } else {
            (self.log_bps as f64 / f64::from(self.rps_max)).round() as usize
        }
    }

    /// Range checks, naming the field.
    pub fn validate(&self) -> Result<(), crate::Error> {
        let fracs = [
            ("mem_frac", self.mem_frac),
            ("file_frac", self.file_frac),
            ("file_addr_rps_base_frac", self.file_addr_rps_base_frac),
            ("file_write_frac", self.file_write_frac),
            ("anon_addr_rps_base_frac", self.anon_addr_rps_base_frac),
            ("anon_write_frac", self.anon_write_frac),
            ("lat_target_pct", self.lat_target_pct),
        ];
        for (name, v) in fracs {
            if !(0.0..=1.0).contains(&v) {
                return Err(crate::Error::Input(format!(
                    "{name} is {v}: expected a fraction from 0 to 1"
                )));
            }
        }
        let positive = [
            ("control_period", self.control_period),
            ("lat_target", self.lat_target),
            ("file_size_mean", self.file_size_mean as f64),
            ("chunk_pages", self.chunk_pages as f64),
            ("concurrency_max", f64::from(self.concurrency_max)),
        ];
        for (name, v) in positive {
            if v.is_nan() || v <= 0.0 {
                return Err(crate::Error::Input(format!(
                    "{name} is {v}: expected more than 0"
                )));
            }
        }
        let non_negative = [
            ("file_size_stdev_ratio", self.file_size_stdev_ratio),
            ("file_addr_stdev_ratio", self.file_addr_stdev_ratio),
            ("anon_size_ratio", self.anon_size_ratio),
            ("anon_size_stdev_ratio", self.anon_size_stdev_ratio),
            ("anon_addr_stdev_ratio", self.anon_addr_stdev_ratio),
            ("sleep_mean", self.sleep_mean),
            ("sleep_stdev_ratio", self.sleep_stdev_ratio),
            ("cpu_ratio", self.cpu_ratio),
        ];
        for (name, v) in non_negative {
            if v.is_nan() || v < 0.0 {
                return Err(crate::Error::Input(format!(
                    "{name} is {v}: expected 0 or more"
                )));
            }
        }
        Ok(())
    }
}

const ARGS_PREAMBLE: &str = "\
// rackbench resctl hashd: start-up arguments (rd-hashd's args.json layout).
// Read once at start; edit and restart to change them.
//
//  testfiles: directory of the 32 MiB test files
//  size: bytes of memory footprint at mem_frac 1.0
//  file_max_frac: share of `size` backed by test files (page cache)
//  compressibility: share of zeros in each 512-byte block of test data
//  params: runtime parameters file (reloaded when it changes)
//  report: report file, rewritten every second
//  log_dir: directory of the hash log (null: no log)
//  log_size: bytes of hash log kept (rotated in 1 GiB files)
//  interval: seconds between status lines (0: none)
//  rotational: whether the test files are on a rotating disk (null: detect)
//
";

const PARAMS_PREAMBLE: &str = "\
// rackbench resctl hashd: runtime parameters (rd-hashd's params.json layout).
// Changes apply within a second of saving the file.
//
// Concurrency is steered by two PID controllers: one keeps the
// lat_target_pct latency percentile at lat_target, the other the request
// rate at rps_target. Each request reads file_size_mean bytes (on average) of
// test files and anon_size_ratio times that of anonymous memory, chunk_pages
// pages at a time, hashes cpu_ratio of it with SHA1 and sleeps sleep_mean.
// Addresses follow normal distributions (stdev ratios) around a hot spot;
// the footprint scales from the *_rps_base_frac values to 1.0 as the rate
// approaches rps_max. Durations are seconds, sizes bytes.
//
";

/// A file's text with `//` and `#` lines blanked (line numbers kept).
pub fn strip_comments(text: &str) -> String {
    text.lines()
        .map(|l| {
            let t = l.trim_start();
            if t.starts_with("//") || t.starts_with('#') {
                ""
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Reads a commented JSON file into `T`, errors naming the file, line and
/// column.
pub fn load<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, crate::Error> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| crate::Error::Input(format!("{}: cannot read: {e}", path.display())))?;
    serde_json::from_str(&strip_comments(&text)).map_err(|e| {
        crate::Error::Input(format!(
            "{}:{}:{}: {e}",
            path.display(),
            e.line(),
            e.column()
        ))
    })
}

/// Writes `bytes` to `path` atomically (the harness's staging file and
/// rename), errors naming the path.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), crate::Error> {
    harness::fsutil::write_atomic(path, bytes)
        .map_err(|e| crate::Error::Host(format!("{}: cannot write: {e}", path.display())))
}

fn save<T: Serialize>(path: &Path, preamble: &str, v: &T) -> Result<(), String> {
    let mut text = preamble.to_string();
    text.push_str(&serde_json::to_string_pretty(v).expect("serializable"));
    text.push('\n');
    write_atomic(path, text.as_bytes()).map_err(String::from)
}

/// Saves `args.json`.
pub fn save_args(path: &Path, a: &Args) -> Result<(), crate::Error> {
    save(path, ARGS_PREAMBLE, a).map_err(crate::Error::Host)
}

/// Saves `params.json`.
pub fn save_params(path: &Path, p: &Params) -> Result<(), crate::Error> {
    save(path, PARAMS_PREAMBLE, p).map_err(crate::Error::Host)
}

/// Loads `params.json`, validated.
pub fn load_params(path: &Path) -> Result<Params, crate::Error> {
    let p: Params = load(path)?;
    p.validate()
        .map_err(|e| crate::Error::Input(format!("{}: {e}", path.display())))?;
    Ok(p)
}

/// A params file watched for changes: [`ParamsFile::poll`] reloads it when
/// its modification time changed and it is at least 10 ms old (a file
/// being written is not read half-way).
pub struct ParamsFile {
    pub path: PathBuf,
    mtime: Option<SystemTime>,
}

impl ParamsFile {
    /// Loads `path`, creating it with `default` when missing.
    pub fn open(path: &Path, default: &Params) -> Result<(ParamsFile, Params), crate::Error> {
        if !path.exists() {
            save_params(path, default)?;
        }
        let p = load_params(path)?;
        let f = ParamsFile {
            path: path.to_path_buf(),
            mtime: mtime(path),
        };
        Ok((f, p))
    }

    /// The new params if the file changed; an error if it changed into
    /// something invalid (the caller keeps the old params).
    pub fn poll(&mut self) -> Option<Result<Params, crate::Error>> {
        let m = mtime(&self.path)?;
        if Some(m) == self.mtime {
            return None;
        }
        if m.elapsed().map(|d| d.as_millis() < 10).unwrap_or(false) {
            return None;
        }
        self.mtime = Some(m);
        Some(load_params(&self.path))
    }
}

fn mtime(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_round_trip_with_the_preamble() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("params.json");
        let params = Params {
            rps_max: 1029,
            ..Params::default()
        };
        save_params(&p, &params).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.starts_with("// rackbench resctl hashd"));
        assert!(text.contains("\"lat_target\": 0.075"));
        assert_eq!(load_params(&p).unwrap(), params);
        assert_eq!(params.log_padding(), 1070);
        // No staging file left behind.
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);

        let a = d.path().join("args.json");
        let args = Args::with_mem(1 << 30);
        save_args(&a, &args).unwrap();
        let back: Args = load(&a).unwrap();
        assert_eq!(back, args);
        assert_eq!(back.size, 4 << 30);
        assert_eq!(back.file_max_size(), 1 << 30);
    }

    #[test]
    fn missing_keys_take_defaults_and_unknown_keys_are_errors() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("params.json");
        std::fs::write(&p, "// comment\n{\n  \"rps_max\": 500\n}\n").unwrap();
        let params = load_params(&p).unwrap();
        assert_eq!(params.rps_max, 500);
        assert_eq!(params.chunk_pages, 25);
        std::fs::write(&p, "// comment\n{\n  \"rps_maxx\": 500\n}\n").unwrap();
        let e = load_params(&p).unwrap_err();
        assert!(e.to_string().contains("params.json:3:"), "{e}");
        assert!(e.to_string().contains("rps_maxx"), "{e}");
        std::fs::write(&p, "{\"mem_frac\": 1.5}").unwrap();
        let e = load_params(&p).unwrap_err();
        assert!(
            e.to_string()
                .contains("mem_frac is 1.5: expected a fraction"),
            "{e}"
        );
    }

    #[test]
    fn a_changed_file_is_reloaded() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("params.json");
        let (mut f, params) = ParamsFile::open(&p, &Params::default()).unwrap();
        assert_eq!(params, Params::default());
        assert!(f.poll().is_none());
        let mut changed = params.clone();
        changed.rps_target = 100;
        std::thread::sleep(std::time::Duration::from_millis(20));
        save_params(&p, &changed).unwrap();
        // Set an older mtime so the 10 ms settling time has passed.
        let old = SystemTime::now() - std::time::Duration::from_secs(1);
        std::fs::File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_modified(old)
            .unwrap();
        assert_eq!(f.poll().unwrap().unwrap().rps_target, 100);
        assert!(f.poll().is_none());
    }
}
