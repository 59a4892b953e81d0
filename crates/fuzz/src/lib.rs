//! Fuzz targets: one per parser of user input, each driving the same code
//! a command runs on that input, up to the point where the measurement
//! would start.
//!
//! A target takes any bytes and must return: no panic, no hang, no
//! unbounded allocation. Refusing the input with an error is the expected
//! outcome for most inputs; the error text is checked to name where the
//! input came from, since that is what the user sees.
//!
//! `bench/fuzz.sh` runs each target under AFL++ (cargo-afl, stable Rust)
//! from the seeds in `seeds/<target>/`; inputs that once crashed or hung a
//! target are kept in `regressions/<target>/`, and `tests/corpus.rs` runs
//! every target over both directories in `cargo test`.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

/// One fuzz target.
pub struct Target {
    /// The name on the command line and of its corpus directories.
    pub name: &'static str,
    /// What input it parses, and which code it drives.
    pub about: &'static str,
    /// Runs the input through the parser.
    pub run: fn(&[u8]),
}

/// Every target.
pub const TARGETS: &[Target] = &[
    Target {
        name: "distbench_textproto",
        about: "a distbench test sequence in text format (run_tests --infile), then check_test's checks",
        run: distbench_textproto,
    },
    Target {
        name: "distbench_results",
        about: "a distbench results file (binary, gzip or text proto), then analyze in every output format",
        run: distbench_results,
    },
    Target {
        name: "cachebench_config",
        about: "a CacheLib cachebench JSON config (--json_test_config), then its cache and workload set-up",
        run: cachebench_config,
    },
    Target {
        name: "cachebench_trace",
        about: "a CacheLib KV replay trace (CSV)",
        run: cachebench_trace,
    },
    Target {
        name: "adsim_config",
        about: "an AdSim server JSON config (--config), then its stage plan",
        run: adsim_config,
    },
    Target {
        name: "job_toml",
        about: "a job file (TOML) of the harness, then each job resolved for each role",
        run: job_toml,
    },
    Target {
        name: "role_input",
        about: "`rackbench run -i` JSON, resolved against every built-in job and role",
        run: role_input,
    },
    Target {
        name: "resctl_spec",
        about: "a resctl-bench job spec (KIND[:KEY=VAL,...])",
        run: resctl_spec,
    },
    Target {
        name: "resctl_journal",
        about: "a resctl-bench result journal (-r FILE), then format and summary of every job",
        run: resctl_journal,
    },
    Target {
        name: "hashd_params",
        about: "rd-hashd's params.json and args.json (commented JSON), with their range checks",
        run: hashd_params,
    },
];

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

thread_local! {
    static SCRATCH: RefCell<Option<tempfile::TempDir>> = const { RefCell::new(None) };
}

/// Writes `data` to `name` in this thread's scratch directory, for parsers
/// that read a file (as the commands do), and returns its path. The
/// directory is made once per thread and reused, so a fuzzer's loop does
/// not create one per input.
fn scratch_file(name: &str, data: &[u8]) -> PathBuf {
    SCRATCH.with(|s| {
        let mut s = s.borrow_mut();
        if s.is_none() {
            *s = Some(
                tempfile::Builder::new()
                    .prefix("rackbench-fuzz")
                    .tempdir()
                    .expect("a scratch directory for fuzz inputs"),
            );
        }
        let dir = s.as_ref().expect("made above").path();
        let path = dir.join(name);
        std::fs::write(&path, data).expect("writing a fuzz input to the scratch directory");
        path
    })
}

/// Fails the run (as a crash the fuzzer keeps) when an error about `path`
/// does not name it.
fn names(error: &str, path: &Path) {
    let shown = path.display().to_string();
    let file = path.file_name().map(|f| f.to_string_lossy().to_string());
    assert!(
        error.contains(&shown) || file.is_some_and(|f| error.contains(&f)),
        "the error does not name the file {shown}: {error}"
    );
}

fn distbench_textproto(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match distbench::textproto::parse::<distbench::proto::TestSequence>(text, "fuzz.config") {
        Ok(seq) => {
            let _ = distbench::check::check_sequence(&seq);
            let _ = distbench::check::validate(&seq, "fuzz.config");
        }
        Err(e) => names(&e.to_string(), Path::new("fuzz.config")),
    }
}

fn distbench_results(data: &[u8]) {
    use distbench::analyze::{Options, OutputFormat, analyze};
    use distbench::files::{Encoding, decode};
    use distbench::proto::TestSequenceResults;
    let decoded = decode::<TestSequenceResults>(data, "fuzz.pb", Encoding::Binary)
        .or_else(|_| decode::<TestSequenceResults>(data, "fuzz.pb", Encoding::Text));
    let results = match decoded {
        Ok(r) => r,
        Err(e) => return names(&e.to_string(), Path::new("fuzz.pb")),
    };
    for format in OutputFormat::ALL {
        for include_warmups in [false, true] {
            let _ = analyze(
                &results,
                &Options {
                    format,
                    suppress_header: false,
                    include_warmups,
                },
            );
        }
    }
}

fn cachebench_config(data: &[u8]) {
    let path = scratch_file("config.json", data);
    match cachebench::config::load(&path, false) {
        Ok(loaded) => {
            for c in &loaded.instances {
                let _ = cachebench::command_support::dram_config_of(c);
                let _ = cachebench::command_support::spec_of(c);
            }
        }
        Err(e) => names(&e.to_string(), &path),
    }
}

fn cachebench_trace(data: &[u8]) {
    let path = scratch_file("trace.csv", data);
    for (threads, amp_factor) in [(1, 1), (3, 2)] {
        let opts = cachebench::replay::ReplayOptions {
            threads,
            amp_factor,
            repeat_op_count: true,
            fast_forward: 1,
        };
        if let Err(e) = cachebench::replay::load(&[&path], &opts) {
            names(&e.to_string(), &path);
        }
    }
}

fn adsim_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match adsim::config::ServerConfig::from_json(text, "fuzz.json") {
        Ok(c) => {
            let _ = c.plan();
            let _ = c.to_value();
        }
        Err(e) => names(&e.to_string(), Path::new("fuzz.json")),
    }
}

fn resolve_all(job: &harness::job::Job, input: &serde_json::Map<String, serde_json::Value>) {
    let _ = harness::vars::resolve(job, None, input);
    for r in &job.roles {
        let _ = harness::vars::resolve(job, Some(&r.name), input);
    }
}

fn job_toml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("fuzz.toml");
    match harness::job::parse_file(path, text) {
        Ok(jobs) => {
            let input = serde_json::Map::new();
            for job in &jobs {
                resolve_all(job, &input);
            }
        }
        Err(e) => names(&e.to_string(), path),
    }
}

/// The job files the binary embeds (its catalogue), for `role_input`.
const JOB_FILES: &[(&str, &str)] = &[
    ("adsim.toml", include_str!("../../../jobs/adsim.toml")),
    (
        "cachebench.toml",
        include_str!("../../../jobs/cachebench.toml"),
    ),
    (
        "calibrate.toml",
        include_str!("../../../jobs/calibrate.toml"),
    ),
    (
        "distbench.toml",
        include_str!("../../../jobs/distbench.toml"),
    ),
    ("feedsim.toml", include_str!("../../../jobs/feedsim.toml")),
    ("resctl.toml", include_str!("../../../jobs/resctl.toml")),
];

fn role_input(data: &[u8]) {
    let Ok(serde_json::Value::Object(input)) = serde_json::from_slice::<serde_json::Value>(data)
    else {
        return;
    };
    for (name, text) in JOB_FILES {
        let jobs = harness::job::parse_file(Path::new(name), text)
            .expect("the built-in job files parse (a test checks them)");
        for job in &jobs {
            resolve_all(job, &input);
        }
    }
}

fn resctl_spec(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = resctl::spec::parse(text);
    let _ = resctl::bench::job::parse_spec(text);
}

fn resctl_journal(data: &[u8]) {
    // A journal whose name ends in .gz is decompressed first; the first
    // byte picks which of the two is exercised.
    let name = if data.first().is_some_and(|b| b & 1 == 1) {
        "result.json.gz"
    } else {
        "result.json"
    };
    let path = scratch_file(name, data);
    let opts = resctl::bench::job::Options {
        result: Some(path.clone()),
        dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
        test: true,
        ..Default::default()
    };
    for full in [true, false] {
        if let Err(e) = resctl::bench::job::cmd_format(&opts, &[], full) {
            names(&e.to_string(), &path);
        }
    }
}

fn hashd_params(data: &[u8]) {
    use resctl::hashd::params;
    let path = scratch_file("params.json", data);
    match params::load_params(&path) {
        Ok(p) => {
            let _ = p.log_padding();
        }
        Err(e) => names(&e.to_string(), &path),
    }
    match params::load::<params::Args>(&path) {
        Ok(a) => {
            let _ = a.file_max_size();
        }
        Err(e) => names(&e.to_string(), &path),
    }
}
