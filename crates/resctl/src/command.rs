//! `rackbench resctl ...`: resctl-bench's commands, hashd and the memory
//! hog, as the harness runs them.

use crate::bench::common::JobMetrics;
use crate::bench::iocost_qos::QosOvr;
use crate::bench::job::{self, Options};
use crate::hashd::command::{HashdEnd, HashdMetrics, HashdRecord};
use crate::hog::HogReport;
use crate::journal::JobData;
use harness::{Outcome, Record, RunContext, Workload};
use serde_json::{Map, Value};
use std::path::PathBuf;

/// resctl-bench and hashd.
pub struct Resctl;

const HELP: &str = "\
rackbench resctl [OPTIONS] COMMAND ...      (also installed as `resctl-bench`)

Commands:
  run SPEC...          run the jobs not yet completed in the result file
  format [SPEC...]     print the full results (all, or the matching jobs)
  summary [SPEC...]    print the summaries
                       (run, format and summary also take -f/--file FILE, repeatable:
                       the job_specs of an upstream args/job file, in line with the specs)
  study SPEC...        study the jobs' results again from their records (saved)
  solve SPEC...        the solve step again (iocost-tune) from the results' data (saved)
  merge SOURCE...      merge iocost-tune results of several files into -r FILE
                       [--by-id] [--ignore-versions] [--ignore-sysreqs] [--multiple]
  pack                 write RESULT_STEM.tar.gz (in the current directory) holding the
                       result file (rackbench keeps no separate report files)
  deps                 check the system requirements of every bench
  doc [SUBJECT]        documentation: specs, a bench, sysreqs, cgroups
  hashd [OPTIONS]      the latency-sensitive workload (`hashd --help`)
  mem-hog OPTIONS      the memory hog (`mem-hog --help`)

Options (anywhere on the line; an empty value, `--dev=`, means the default):
  -r, --result FILE    the result journal (JSON; gzipped when it ends in .gz)
  -d, --dir DIR        scratch directory, must exist (default /var/lib/rackbench-resctl,
                       created): hashd's test files and state, fio's test file
  -D, --dev DEVICE     the scratch device (nvme0n1): accepted only if it is the disk
                       holding --dir (run and deps refuse another one)
  -l, --linux PATH     (also --linux-tar) accepted; no bench uses a kernel tarball
  -R, --rep-retention SECS  accepted; there are no rd-agent reports to expire
  -M, --mem-profile N|off  memory profile in GiB, a power of two (default 16 as upstream;
                       where its share does not fit, the largest that does, said on
                       stderr and in the result; 1 with --test)
  -m, --mem-avail SIZE memory available to the benches (default: MemAvailable)
  --mem-margin PCT     protection's workload memory.low = share x (1 - PCT)
                       (default: the profile's target)
  --hashd-size SIZE    hashd's footprint in protection (saved knobs overridden)
  --hashd-cpu-load keep|fake|real  hashd's fake CPU load in protection (default keep)
  --iocost-qos K=V,... QoS overrides (rpct rlat wpct wlat min max vrate) of the
                       iocost protection enables; refused without cgroup2 io.cost
  --iocost-from-sys    the model and QoS from the cgroup2 root's io.cost.model/qos
                       instead of iocost-params; refused without cgroup2 io.cost
  --swappiness N       vm.swappiness (0-200) for the run, restored after
  -a, --args FILE      base options from FILE (upstream's JSON, created when missing):
                       the command line wins, the last run/format/summary/study's specs
                       are reused when none are given, and changes are saved back
  --systemd-timeout SECS, --keep-reports, --clear-reports
                       accepted; no systemd units or rd-agent reports are used
  --skip-shadow-inode-prot-test  assume MemShadowInodeProt is met (as upstream)
  --force-shadow-inode-prot-test refused: there is no inode-steal test here
  --force              run even when a bench's hard requirements are missed
  --test               short runs for CI (small profile, short windows)
  -v...                more messages (settings; hashd's detail lines)
  -V, --version        print `resctl-bench VERSION TARGET` and exit
  --logfile FILE       also write everything printed to stderr to FILE
  format -R, --rstat   (repeatable) extra resource stat tables in protection results
  --tune-fit upstream|corrected  iocost-tune's line fits for run, solve and merge
                       (ours; default upstream's code, or for solve the result's;
                       corrected: as upstream's comments describe, recorded as `fit`)

Specs: KIND[:k[=v],...][:group2]...; id=ID and passive=... may appear in any
group. Kinds: hashd-params, iocost-params, iocost-qos, iocost-tune, protection,
storage (`doc KIND` says what each does and takes).";

/// The hidden command under which the benches start their children
/// (hashd, the hog): run directly, without the harness's report folder and
/// results store.
pub const CHILD_CMD: &str = "__resctl-child";

/// Runs a child: `hashd ARGS` or `mem-hog ARGS`. Returns the exit code.
pub fn child_main(args: &[String]) -> i32 {
    // The bench stops its children with SIGINT; the harness's Ctrl-C
    // wording ("interrupted: ... partial results") would read as if the
    // whole run had been interrupted.
    harness::Cancel::set_interrupt_message(match args.first().map(String::as_str) {
        Some("hashd") => "hashd: stopped by the bench",
        _ => "mem-hog: stopped by the bench",
    });
    let cancel = harness::Cancel::global();
    let r = match args.first().map(String::as_str) {
        // The benches read the run's metrics from the last line.
        Some("hashd") => crate::hashd::command::run(&args[1..], &cancel).and_then(|end| {
            let (metrics, ok) = match end {
                HashdEnd::Helper => (serde_json::Map::new(), true),
                HashdEnd::Measured(r, ok) => (harness::record::metrics_map(&r.metrics())?, ok),
            };
            println!("{}", serde_json::Value::Object(metrics));
            Ok(ok)
        }),
        Some("mem-hog") => crate::hog::command(&args[1..], &cancel).map(|r| {
            eprintln!("{}", crate::hog::end_line(&r));
            true
        }),
        _ => Err(anyhow::anyhow!("{CHILD_CMD}: expected hashd or mem-hog")),
    };
    match r {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(e) => {
            eprintln!("error: {e:#}");
            2
        }
    }
}

const DFL_DIR: &str = "/var/lib/rackbench-resctl";

/// resctl-bench's command line: the global options (anywhere) and the
/// command with its arguments.
#[derive(Debug, clap::Parser)]
#[command(
    name = "rackbench resctl",
    override_help = HELP,
    disable_version_flag = true
)]
struct Cli {
    #[arg(short = 'r', long = "result")]
    result: Option<PathBuf>,
    #[arg(short = 'd', long = "dir")]
    dir: Option<PathBuf>,
    #[arg(short = 'D', long = "dev")]
    dev: Option<String>,
    #[arg(short = 'l', long = "linux", alias = "linux-tar")]
    linux: Option<PathBuf>,
    #[arg(short = 'R', long = "rep-retention")]
    rep_retention: Option<String>,
    #[arg(short = 'M', long = "mem-profile")]
    mem_profile: Option<String>,
    #[arg(short = 'm', long = "mem-avail")]
    mem_avail: Option<String>,
    #[arg(long = "mem-margin")]
    mem_margin: Option<String>,
    #[arg(long = "hashd-size")]
    hashd_size: Option<String>,
    #[arg(long = "hashd-cpu-load")]
    hashd_cpu_load: Option<String>,
    #[arg(long = "iocost-qos")]
    iocost_qos: Option<String>,
    #[arg(long = "swappiness")]
    swappiness: Option<String>,
    #[arg(short = 'a', long = "args")]
    args: Option<PathBuf>,
    #[arg(long = "iocost-from-sys")]
    iocost_from_sys: bool,
    #[arg(long = "systemd-timeout")]
    systemd_timeout: Option<String>,
    #[arg(long = "keep-reports")]
    keep_reports: bool,
    #[arg(long = "clear-reports")]
    clear_reports: bool,
    #[arg(long = "force-shadow-inode-prot-test")]
    force_shadow_inode_prot_test: bool,
    #[arg(long = "skip-shadow-inode-prot-test")]
    skip_shadow_inode_prot_test: bool,
    #[arg(long)]
    force: bool,
    /// merge's options.
    #[arg(long = "by-id")]
    by_id: bool,
    #[arg(long = "ignore-versions")]
    ignore_versions: bool,
    #[arg(long = "ignore-sysreqs")]
    ignore_sysreqs: bool,
    #[arg(long)]
    multiple: bool,
    /// iocost-tune's line fits (ours): upstream or corrected.
    #[arg(long = "tune-fit")]
    tune_fit: Option<String>,
    #[arg(long)]
    test: bool,
    #[arg(short = 'v', action = clap::ArgAction::Count)]
    verbose: u8,
    /// `-V/--version`: `resctl-bench VERSION TARGET`, as upstream's clap.
    #[arg(short = 'V', long = "version")]
    version: bool,
    #[arg(long = "logfile")]
    logfile: Option<PathBuf>,
    /// `format -R`: [`rstat_words`] turns format's `-R` into this.
    #[arg(long = "rstat", action = clap::ArgAction::Count)]
    rstat: u8,
    /// `study -R/--reports DIR` ([`rstat_words`] turns study's `-R` into
    /// this): refused, there are no report files.
    #[arg(long = "reports", hide = true)]
    reports: Option<String>,
    /// COMMAND [ARGS...]
    words: Vec<String>,
}

/// Short options of [`Cli`] that take a value.
const VALUE_SHORTS: &[char] = &['r', 'd', 'D', 'l', 'R', 'M', 'm', 'a'];
/// Long options of [`Cli`] that take a value.
const VALUE_LONGS: &[&str] = &[
    "result",
    "dir",
    "dev",
    "linux",
    "linux-tar",
    "rep-retention",
    "mem-profile",
    "mem-avail",
    "mem-margin",
    "hashd-size",
    "hashd-cpu-load",
    "iocost-qos",
    "swappiness",
    "args",
    "logfile",
    "systemd-timeout",
    "reports",
    "tune-fit",
];

/// Upstream has two `-R`s: `--rep-retention SECS` before the command and
/// `format`'s own `-R/--rstat` (repeatable) after it. Our options may come
/// anywhere, so after a `format` command word, `-R`, `-RR`... become as
/// many `--rstat`; everywhere else `-R` stays `--rep-retention`.
///
/// After `run`, `format` or `summary`, upstream's `-f/--file FILE` becomes
/// a marked spec word ([`crate::jobfile::marked`]), so that [`parse`]
/// reads the file's specs in their place among the others.
fn rstat_words(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut cmd: Option<&str> = None;
    let mut value_next = false;
    let mut file_next = false;
    let mut rest_positional = false;
    for a in args {
        if value_next {
            value_next = false;
            out.push(a.clone());
            continue;
        }
        if file_next {
            file_next = false;
            out.push(crate::jobfile::marked(a));
            continue;
        }
        if matches!(cmd, Some("run" | "format" | "summary" | "study" | "solve")) && !rest_positional
        {
            // A job file, kept in its place among the spec words.
            if a == "-f" || a == "--file" {
                file_next = true;
                continue;
            }
            if let Some(p) = a.strip_prefix("--file=").or_else(|| a.strip_prefix("-f")) {
                out.push(crate::jobfile::marked(p));
                continue;
            }
        }
        if rest_positional {
            out.push(a.clone());
            continue;
        }
        if a == "--" {
            rest_positional = true;
            out.push(a.clone());
            continue;
        }
        if let Some(long) = a.strip_prefix("--") {
            value_next = !long.contains('=') && VALUE_LONGS.contains(&long);
            out.push(a.clone());
            continue;
        }
        if let Some(shorts) = a.strip_prefix('-').filter(|s| !s.is_empty()) {
            if cmd == Some("study") && shorts == "R" {
                out.push("--reports".to_string());
                value_next = true;
                continue;
            }
            if cmd == Some("format") && shorts.chars().all(|c| c == 'R') {
                out.extend(std::iter::repeat_n("--rstat".to_string(), shorts.len()));
                continue;
            }
            // A value-taking short ends the cluster: the rest is its value,
            // or, when nothing follows it, the next word is.
            if let Some(i) = shorts.find(|c: char| VALUE_SHORTS.contains(&c)) {
                value_next = i + 1 == shorts.len();
            }
            out.push(a.clone());
            continue;
        }
        if cmd.is_none() {
            cmd = Some(a.as_str());
        }
        out.push(a.clone());
    }
    out
}

/// The command line as clap parses it.
fn parse_cli(args: &[String]) -> Result<Cli, clap::Error> {
    use clap::Parser;
    Cli::try_parse_from(std::iter::once("resctl".to_string()).chain(rstat_words(args)))
}

/// An option's value; empty (`--dev=`) is the default, as upstream.
fn given(v: Option<String>) -> Option<String> {
    v.filter(|s| !s.is_empty())
}

/// Global options and the command with its arguments.
fn parse(args: &[String]) -> Result<(Options, String, Vec<String>), String> {
    parse_all(args).map(|(o, cmd, rest, _)| (o, cmd, rest))
}

/// Takes the options `-a/--args FILE` holds where the command line has
/// none, and the job specs ([`crate::argsfile`]). Returns the file when
/// the command saves it, and whether values came from it.
fn merge_args_file(
    c: &mut Cli,
    cmd: Option<&str>,
    rest: &mut Vec<String>,
) -> Result<Option<(crate::argsfile::ArgsFile, bool)>, String> {
    let Some(path) = c.args.clone().filter(|p| !p.as_os_str().is_empty()) else {
        return Ok(None);
    };
    let f = crate::argsfile::load(&path)?;
    let a = &f.args;
    // A value on the command line (even an empty one, the default) wins
    // and changes the file.
    let mut changed = false;
    let mut take = |slot: &mut Option<String>, file: &Option<String>| {
        if slot.is_some() {
            changed = true;
        } else {
            slot.clone_from(file);
        }
    };
    let mut dir = c.dir.as_ref().map(|d| d.display().to_string());
    take(&mut dir, &a.dir);
    c.dir = dir.map(PathBuf::from);
    take(&mut c.dev, &a.dev);
    let mut linux = c.linux.as_ref().map(|d| d.display().to_string());
    take(&mut linux, &a.linux_tar);
    c.linux = linux.map(PathBuf::from);
    take(&mut c.rep_retention, &a.rep_retention);
    take(&mut c.systemd_timeout, &a.systemd_timeout);
    take(&mut c.hashd_size, &a.hashd_size);
    take(&mut c.hashd_cpu_load, &a.hashd_cpu_load);
    take(&mut c.mem_profile, &a.mem_profile);
    take(&mut c.mem_avail, &a.mem_avail);
    take(&mut c.mem_margin, &a.mem_margin);
    take(&mut c.iocost_qos, &a.iocost_qos);
    take(&mut c.swappiness, &a.swappiness);
    let Some(cmd) = cmd else {
        return Ok(None);
    };
    let (specs, specs_changed) = crate::argsfile::job_specs(a, cmd, std::mem::take(rest));
    *rest = specs;
    if matches!(cmd, "run" | "study" | "solve") && rest.is_empty() {
        return Err(format!(
            "{cmd}: no job spec on the command line, and -a/--args {} holds none for {cmd}: \
             expected KIND[:k=v,...]...",
            path.display()
        ));
    }
    let saves = crate::argsfile::saves(cmd, f.existed, changed || specs_changed);
    Ok(Some((f, saves)))
}

/// [`parse`], and the args file to save when the command goes ahead.
fn parse_all(
    args: &[String],
) -> Result<(Options, String, Vec<String>, Option<crate::argsfile::Save>), String> {
    let mut c = parse_cli(args).map_err(|e| match e.kind() {
        clap::error::ErrorKind::DisplayHelp => HELP.to_string(),
        _ => {
            // clap's text starts with its own "error: "; ours is added
            // where the error is printed.
            let text = e.render().to_string();
            let text = text.trim_end();
            format!("{}\n\n{HELP}", text.strip_prefix("error: ").unwrap_or(text))
        }
    })?;
    if let Some(d) = &c.reports {
        return Err(format!(
            "study -R/--reports {d}: rackbench keeps no report files; study reads each job's record \
             in the result file"
        ));
    }
    let mut words = std::mem::take(&mut c.words).into_iter();
    let cmd = words.next();
    let mut rest = crate::jobfile::expand(words.collect())?;
    let file = merge_args_file(&mut c, cmd.as_deref(), &mut rest)?;
    let (o, cmd, rest) = options(c, cmd, rest).map_err(|e| match &file {
        Some((f, _)) => format!(
            "{e} (options not on the command line come from -a/--args {})",
            f.path.display()
        ),
        None => e,
    })?;
    let save = match file {
        Some((f, true)) => Some(crate::argsfile::Save {
            text: crate::argsfile::render(&crate::argsfile::Merged {
                opts: &o,
                cmd: &cmd,
                specs: &rest,
            })
            .map_err(|e| format!("-a/--args {}: {e}", f.path.display()))?,
            path: f.path,
        }),
        _ => None,
    };
    Ok((o, cmd, rest, save))
}

/// The options and the command of a parsed command line.
fn options(
    c: Cli,
    cmd: Option<String>,
    rest: Vec<String>,
) -> Result<(Options, String, Vec<String>), String> {
    let mut o = Options {
        result: c.result,
        mem_profile: given(c.mem_profile),
        force: c.force,
        test: c.test,
        dev: given(c.dev),
        linux_tar: c.linux,
        iocost_from_sys: c.iocost_from_sys,
        verbose: c.verbose,
        logfile: c.logfile,
        rstat: c.rstat,
        keep_reports: c.keep_reports,
        clear_reports: c.clear_reports,
        force_shadow_inode_prot_test: c.force_shadow_inode_prot_test,
        skip_shadow_inode_prot_test: c.skip_shadow_inode_prot_test,
        merge: crate::merge::MergeFlags {
            by_id: c.by_id,
            ignore_versions: c.ignore_versions,
            ignore_sysreqs: c.ignore_sysreqs,
            multiple: c.multiple,
            ..Default::default()
        },
        ..Options::default()
    };
    o.tune_fit = given(c.tune_fit)
        .map(|v| {
            crate::bench::iocost_tune::fit::Fit::parse(&v).map_err(|e| format!("--tune-fit: {e}"))
        })
        .transpose()?;
    o.merge.fit = o.tune_fit.unwrap_or_default();
    o.systemd_timeout = given(c.systemd_timeout)
        .map(|v| {
            v.parse::<f64>()
                .ok()
                .or_else(|| {
                    v.parse::<jiff::SignedDuration>()
                        .ok()
                        .map(|d| d.as_secs_f64())
                })
                .filter(|s| s.is_finite() && *s >= 0.0)
                .ok_or_else(|| {
                    format!("--systemd-timeout {v:?}: expected seconds or a duration such as 2m")
                })
        })
        .transpose()?;
    o.rep_retention = given(c.rep_retention)
        .map(|v| {
            v.parse::<u64>()
                .map_err(|_| format!("-R/--rep-retention {v:?}: expected whole seconds"))
        })
        .transpose()?;
    o.mem_avail = given(c.mem_avail)
        .map(|v| crate::fmt::parse_size(&v).map_err(|e| format!("-m/--mem-avail: {e}")))
        .transpose()?;
    o.mem_margin = given(c.mem_margin)
        .map(|v| match crate::fmt::parse_frac(&v) {
            Ok(m) if m.is_finite() && m >= 0.0 => Ok(m),
            Ok(_) => Err(format!("--mem-margin {v:?}: expected a fraction >= 0")),
            Err(e) => Err(format!("--mem-margin: {e}")),
        })
        .transpose()?;
    o.hashd_size = given(c.hashd_size)
        .map(|v| {
            crate::fmt::parse_size(&v)
                .map(|s| s.max(4096))
                .map_err(|e| format!("--hashd-size: {e}"))
        })
        .transpose()?;
    o.hashd_fake_cpu_load = match c.hashd_cpu_load.as_deref() {
        None | Some("" | "keep") => None,
        Some("fake") => Some(true),
        Some("real") => Some(false),
        Some(v) => {
            return Err(format!(
                "--hashd-cpu-load {v:?}: expected keep, fake or real"
            ));
        }
    };
    o.iocost_qos = given(c.iocost_qos)
        .map(|v| QosOvr::parse_overrides(&v))
        .transpose()?
        .filter(|q| !q.is_empty());
    o.swappiness = given(c.swappiness)
        .map(|v| match v.parse::<u32>() {
            Ok(n) if n <= 200 => Ok(n),
            _ => Err(format!(
                "--swappiness {v:?}: expected a number from 0 to 200"
            )),
        })
        .transpose()?;
    let dir = c.dir;
    let cmd = cmd.ok_or_else(|| format!("no command\n\n{HELP}"))?;
    if o.rstat > 0 && cmd != "format" {
        return Err(format!(
            "--rstat (format -R) is an option of format, not of {cmd:?}; before the command, -R is --rep-retention SECS"
        ));
    }
    o.dir = match dir {
        Some(d) => d,
        None => {
            let d = PathBuf::from(DFL_DIR);
            if matches!(cmd.as_str(), "run" | "deps") {
                std::fs::create_dir_all(&d)
                    .map_err(|e| format!("cannot create {}: {e}", d.display()))?;
            }
            d
        }
    };
    Ok((o, cmd, rest))
}

/// `-V/--version` on the command line (as upstream, it wins over the
/// command).
fn wants_version(args: &[String]) -> bool {
    parse_cli(args).is_ok_and(|c| c.version)
}

const COMMANDS: &[&str] = &[
    "run", "format", "summary", "study", "solve", "merge", "pack", "deps", "doc",
];

/// True when one of merge's own options is on the command line.
fn opts_merge_given(args: &[String]) -> bool {
    args.iter().any(|a| {
        matches!(
            a.as_str(),
            "--by-id" | "--ignore-versions" | "--ignore-sysreqs" | "--multiple"
        )
    })
}

/// `--logfile FILE`: from `start` until the guard drops, everything written
/// to stderr (ours, and the children's, which inherit it) also goes to
/// FILE (created or truncated, as upstream).
struct StderrTee {
    /// The original stderr, put back on drop.
    saved: std::os::fd::OwnedFd,
    copier: Option<std::thread::JoinHandle<()>>,
    /// The log file, for the error that ends the command (main prints it
    /// after the tee is gone).
    log: Option<std::fs::File>,
}

impl StderrTee {
    fn start(path: &std::path::Path) -> Result<StderrTee, String> {
        use std::io::{Read, Write};
        use std::os::fd::AsFd;
        let mut file = std::fs::File::create(path)
            .map_err(|e| format!("--logfile {}: cannot create: {e}", path.display()))?;
        let log = file.try_clone().ok();
        let dup = || {
            std::io::stderr()
                .as_fd()
                .try_clone_to_owned()
                .map_err(|e| format!("--logfile: cannot duplicate stderr: {e}"))
        };
        // Both copies are close-on-exec, and so is the pipe: children
        // inherit it only as their fd 2.
        let saved = dup()?;
        let mut tty = std::fs::File::from(dup()?);
        let (mut reader, writer) =
            std::io::pipe().map_err(|e| format!("--logfile: cannot make a pipe: {e}"))?;
        // fd 2 becomes a copy of the pipe's write end; `writer` itself is
        // closed when it goes out of scope.
        nix::unistd::dup2_stderr(&writer)
            .map_err(|e| format!("--logfile: cannot redirect stderr: {e}"))?;
        drop(writer);
        let copier = std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        let _ = tty.write_all(&buf[..n]);
                        let _ = file.write_all(&buf[..n]);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            let _ = file.flush();
        });
        Ok(StderrTee {
            saved,
            copier: Some(copier),
            log,
        })
    }

    /// Ends the tee (everything copied), then appends the error that ends
    /// the command to the log, as the runner prints it on stderr.
    fn end_with_error(mut self, e: &anyhow::Error) {
        use std::io::Write;
        let log = self.log.take();
        drop(self);
        if let Some(mut f) = log {
            let _ = writeln!(f, "resctl: {e:#}");
        }
    }
}

impl Drop for StderrTee {
    fn drop(&mut self) {
        // The original stderr goes back on fd 2, which closes the pipe's
        // write end held there; `saved` is closed with the struct.
        let _ = nix::unistd::dup2_stderr(&self.saved);
        // The copier ends when the last writer (a child still running
        // would be one) has closed the pipe.
        if let Some(t) = self.copier.take() {
            let _ = t.join();
        }
    }
}

fn doc(subject: Option<&str>) -> Result<String, String> {
    Ok(match subject {
        None | Some("specs") => format!(
            "{HELP}\n\nBenches:\n{}\nSubjects: specs, sysreqs, cgroups, common, shadow-inode, and each bench kind.\n",
            job::listed()
                .map(|b| format!("  {:14} {}\n", b.kind(), b.about()))
                .collect::<String>()
        ),
        Some("sysreqs") => format!(
            "System requirements (upstream's names). `deps` checks them all on this host; each\n\
             bench lists the ones it cannot do without (hard: refused unless --force) and the\n\
             ones it runs without, degraded (the result's header says how):\n\n{}",
            job::listed()
                .map(|b| format!(
                    "  {}: hard: {}; soft: {}\n",
                    b.kind(),
                    names(b.hard()),
                    names(b.soft())
                ))
                .collect::<String>()
        ),
        Some("cgroups") => "\
Cgroup backends, chosen by probing (RACKBENCH_CGROUP_BACKEND=cgroup2|cgroup1|none forces one)
and stamped in every result:
  cgroup2  memory.low/high/max, cpu.weight, io.weight, io.max, io.cost.*, PSI;
  cgroup1  memory.limit_in_bytes (and soft_limit_in_bytes for high), cpu.shares, blkio
           weights where the scheduler has them, blkio.throttle bandwidth limits;
           no memory protection, so the workload is protected by capping the
           others; PSI read from a cgroup2 hierarchy mounted beside (e.g.
           /sys/fs/cgroup/unified) when there is one;
  none     nothing is isolated; only whole-system stats.
Children (hashd, the hog) join their cgroup before they exec; no systemd is needed.
"
        .to_string(),
        Some("common") => crate::bench::topics::COMMON_DOC.to_string(),
        Some("shadow-inode") => crate::bench::topics::SHADOW_INODE_DOC.to_string(),
        Some(other) => match job::bench(other) {
            Ok(b) => b.doc().to_string(),
            Err(_) => {
                return Err(format!(
                    "doc: unknown subject {other:?}: expected specs, sysreqs, cgroups, common, shadow-inode, {}",
                    job::listed()
                        .map(|b| b.kind())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        },
    })
}

fn names(v: &[crate::sys::sysreqs::SysReq]) -> String {
    if v.is_empty() {
        "-".into()
    } else {
        v.iter().map(|r| r.name()).collect::<Vec<_>>().join(" ")
    }
}

impl Workload for Resctl {
    fn headlines(&self) -> &'static [direction::Headline] {
        crate::directions::HEADLINES
    }

    fn directions(&self) -> &'static [&'static [direction::Rule]] {
        crate::directions::TABLES
    }

    fn charts(&self, record: &Record) -> Vec<harness::page_chart::PageChart> {
        match record.decode::<ResctlRecord>(self.name(), RECORD_VERSION) {
            Ok(ResctlRecord::Run(r)) => crate::charts::charts(&job::metrics(&r.completed)),
            _ => Vec::new(),
        }
    }

    fn name(&self) -> &'static str {
        "resctl"
    }

    fn description(&self) -> &'static str {
        "resctl-bench: resource-control benchmarks around hashd, a latency-sensitive workload simulator"
    }

    fn upstream(&self) -> &'static str {
        "resctl-demo's resctl-bench and rd-hashd"
    }

    fn help(&self) -> String {
        HELP.to_string()
    }

    fn subcommand_help(&self, args: &[String]) -> Option<String> {
        match args.first()?.as_str() {
            "hashd" => Some(crate::hashd::command::help()),
            "mem-hog" => Some(crate::hog::help()),
            _ => None,
        }
    }

    fn validate(&self, args: &[String]) -> anyhow::Result<()> {
        match args.first().map(String::as_str) {
            Some("hashd") => {
                crate::hashd::command::parse(&args[1..])?;
                return Ok(());
            }
            Some("mem-hog") => {
                crate::hog::parse(&args[1..]).map_err(anyhow::Error::msg)?;
                return Ok(());
            }
            _ => {}
        }
        if wants_version(args) {
            return Ok(());
        }
        let (_, cmd, rest) = parse(args).map_err(anyhow::Error::msg)?;
        if cmd != "merge" && opts_merge_given(args) {
            anyhow::bail!(
                "resctl: --by-id, --ignore-versions, --ignore-sysreqs and --multiple are merge's options, not {cmd}'s"
            );
        }
        if !COMMANDS.contains(&cmd.as_str()) {
            anyhow::bail!(
                "resctl: unknown command {cmd:?}: expected run, format, summary, study, solve, merge, pack, deps, doc, hashd or mem-hog"
            );
        }
        if matches!(cmd.as_str(), "run" | "study" | "solve") {
            for s in &rest {
                job::parse_spec(s).map_err(anyhow::Error::msg)?;
            }
        }
        if matches!(cmd.as_str(), "format" | "summary") {
            for s in &rest {
                job::parse_format_spec(s).map_err(anyhow::Error::msg)?;
            }
        }
        Ok(())
    }

    fn is_helper(&self, args: &[String]) -> bool {
        if args.first().map(String::as_str) == Some("hashd") {
            return crate::hashd::command::is_helper(&args[1..]);
        }
        if wants_version(args) {
            return true;
        }
        // The command is the first word of the parsed command line.
        parse_cli(args).is_ok_and(|c| {
            matches!(
                c.words.first().map(String::as_str),
                Some("format" | "summary" | "pack" | "deps" | "doc")
            )
        })
    }

    fn run(&self, ctx: &RunContext, args: &[String]) -> anyhow::Result<Outcome> {
        self.validate(args)?;
        let record = |r: &ResctlRecord| Record::of(self.name(), RECORD_VERSION, r);
        match args.first().map(String::as_str) {
            Some("hashd") => {
                return Ok(match crate::hashd::command::run(&args[1..], &ctx.cancel)? {
                    HashdEnd::Helper => Outcome::helper(true),
                    HashdEnd::Measured(r, success) => {
                        Outcome::measured(success, record(&ResctlRecord::Hashd(r)))
                    }
                });
            }
            Some("mem-hog") => {
                let r = crate::hog::command(&args[1..], &ctx.cancel)?;
                return Ok(Outcome::measured(true, record(&ResctlRecord::MemHog(r))));
            }
            _ => {}
        }
        if wants_version(args) {
            println!("resctl-bench {}", crate::full_version());
            return Ok(Outcome::helper(true));
        }
        let (opts, cmd, rest, save) = parse_all(args).map_err(anyhow::Error::msg)?;
        let tee = match &opts.logfile {
            Some(p) => Some(StderrTee::start(p).map_err(anyhow::Error::msg)?),
            None => None,
        };
        // The args file takes the command line's changes where upstream
        // saves them: run and study once everything parsed, before the
        // jobs run; format and summary after they printed.
        let save_first = matches!(cmd.as_str(), "run" | "study" | "solve");
        let write = |s: Option<crate::argsfile::Save>| -> anyhow::Result<()> {
            s.map(|s| s.write())
                .transpose()
                .map_err(anyhow::Error::msg)?;
            Ok(())
        };
        let r = if save_first {
            write(save).and_then(|()| dispatch(&opts, &cmd, &rest, ctx, record))
        } else {
            dispatch(&opts, &cmd, &rest, ctx, record).and_then(|out| write(save).map(|()| out))
        };
        if let (Some(t), Err(e)) = (tee, &r) {
            t.end_with_error(e);
        }
        r
    }

    fn format(&self, record: &Record, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
        match record.decode::<ResctlRecord>(self.name(), RECORD_VERSION)? {
            ResctlRecord::Run(r) => out.write_all(job::summary_text(&r.jobs).as_bytes())?,
            ResctlRecord::Hashd(r) => r.write_text(out)?,
            ResctlRecord::MemHog(r) => writeln!(out, "{}", crate::hog::end_line(&r))?,
        }
        out.flush()?;
        Ok(())
    }

    /// A memory hog's end line (stderr); a run's job summaries and
    /// rd-hashd's lines came as it ran.
    fn format_end(
        &self,
        record: &Record,
        _out: &mut dyn std::io::Write,
        diag: &mut dyn std::io::Write,
    ) -> anyhow::Result<()> {
        if let ResctlRecord::MemHog(r) = record.decode(self.name(), RECORD_VERSION)? {
            writeln!(diag, "{}", crate::hog::end_line(&r))?;
        }
        Ok(())
    }

    fn metrics(&self, record: &Record) -> anyhow::Result<Map<String, Value>> {
        let r: ResctlRecord = record.decode(self.name(), RECORD_VERSION)?;
        harness::record::metrics_map(&r.metrics())
    }
}

/// Runs a parsed resctl-bench command.
fn dispatch(
    opts: &Options,
    cmd: &str,
    rest: &[String],
    ctx: &RunContext,
    record: impl Fn(&ResctlRecord) -> Record,
) -> anyhow::Result<Outcome> {
    let success = match cmd {
        "run" => {
            let mut printed = Vec::new();
            let ok =
                job::cmd_run(opts, rest, &ctx.cancel, &mut printed).map_err(anyhow::Error::msg)?;
            let completed = opts
                .result
                .as_ref()
                .and_then(|r| crate::journal::Journal::open(r).ok())
                .map(|j| job::latest_completed(&j))
                .unwrap_or_default();
            let r = RunRecord {
                jobs: printed,
                result_file: opts.result.as_ref().map(|r| r.display().to_string()),
                completed,
            };
            return Ok(Outcome::measured(ok, record(&ResctlRecord::Run(r))));
        }
        "format" | "summary" => {
            let out = job::cmd_format(opts, rest, cmd == "format").map_err(anyhow::Error::msg)?;
            print!("{out}");
            true
        }
        "merge" => {
            let result = opts.result.as_ref().ok_or_else(|| {
                anyhow::anyhow!(
                    "merge: no result file: expected -r/--result FILE (the merged file)"
                )
            })?;
            let sources: Vec<std::path::PathBuf> =
                rest.iter().map(std::path::PathBuf::from).collect();
            let out =
                crate::merge::merge(result, &sources, &opts.merge).map_err(anyhow::Error::msg)?;
            print!("{out}");
            true
        }
        "study" | "solve" => {
            let out = job::cmd_study(opts, rest, cmd == "solve").map_err(anyhow::Error::msg)?;
            print!("{out}");
            true
        }
        "pack" => {
            if let Some(w) = rest.first() {
                anyhow::bail!(
                    "pack takes no job spec or file (got {w:?}): it packs the whole result file"
                );
            }
            let result = opts.result.as_ref().ok_or_else(|| {
                anyhow::anyhow!("pack: no result file: expected -r/--result FILE")
            })?;
            crate::pack::pack(result, std::path::Path::new(".")).map_err(anyhow::Error::msg)?;
            true
        }
        "deps" => {
            print!("{}", job::cmd_deps(opts).map_err(anyhow::Error::msg)?);
            true
        }
        _ => {
            let out = doc(rest.first().map(String::as_str)).map_err(anyhow::Error::msg)?;
            print!("{out}");
            true
        }
    };
    Ok(Outcome::helper(success))
}

/// The version of [`ResctlRecord`]; raise it when its shape changes.
const RECORD_VERSION: u32 = 2;

/// What a run keeps with its stored run, by command; the report's metrics
/// are derived from it ([`ResctlRecord::metrics`]).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(tag = "mode")]
pub enum ResctlRecord {
    /// `run SPEC...`.
    #[serde(rename = "run")]
    Run(RunRecord),
    /// `hashd ...` (not its helpers).
    #[serde(rename = "hashd")]
    Hashd(HashdRecord),
    /// `mem-hog ...`: what the hog wrote.
    #[serde(rename = "mem-hog")]
    MemHog(HogReport),
}

/// A `run`: each job whose summary it printed, as the result journal
/// holds it (spec, period, sysinfo, record, result), so the summaries
/// print again from it; and what the metrics come from: the result file
/// and the latest completed job of each kind in it after the run.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RunRecord {
    pub jobs: Vec<JobData>,
    pub result_file: Option<String>,
    /// Empty without a result file, or when it could not be read back.
    pub completed: Vec<JobData>,
}

/// The report's metrics of a `run`: the result file and the key figures
/// of its latest completed job of each kind.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RunMetrics {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_file: Option<String>,
    #[serde(flatten)]
    pub jobs: JobMetrics,
}

/// The report's metrics of a run, by command.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub enum ResctlMetrics {
    Run(RunMetrics),
    Hashd(HashdMetrics),
    /// The hog reports no metrics.
    MemHog {},
}

impl ResctlRecord {
    /// The report's metrics of the run.
    pub fn metrics(&self) -> ResctlMetrics {
        match self {
            ResctlRecord::Run(r) => ResctlMetrics::Run(RunMetrics {
                result_file: r.result_file.clone(),
                jobs: job::metrics(&r.completed),
            }),
            ResctlRecord::Hashd(r) => ResctlMetrics::Hashd(r.metrics()),
            ResctlRecord::MemHog(_) => ResctlMetrics::MemHog {},
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hashd::command::{BenchRecord, BenchResult, HashdSummary, MemResult, ProbeRecord};
    use crate::hashd::engine::Stat;
    use serde_json::json;

    /// The metrics the harness derives: through the stored record (as JSON
    /// text and back) and the workload's `metrics`.
    fn derived(r: &ResctlRecord) -> Map<String, Value> {
        let rec = Record::of("resctl", RECORD_VERSION, r);
        let back: Record = serde_json::from_str(&serde_json::to_string(&rec).unwrap()).unwrap();
        back.decode::<ResctlRecord>("resctl", RECORD_VERSION)
            .unwrap();
        Resctl.metrics(&rec).unwrap()
    }

    fn text(r: &ResctlRecord) -> String {
        let mut out = Vec::new();
        Resctl
            .format(&Record::of("resctl", RECORD_VERSION, r), &mut out)
            .unwrap();
        String::from_utf8(out).unwrap()
    }

    /// A result file's jobs: an older and a newer completed hashd-params,
    /// an incomplete one, and one completed job of each other kind.
    fn jobs() -> Vec<JobData> {
        let job = |spec: &str, record: Value, result: Option<Value>| JobData {
            spec: crate::spec::parse(spec).unwrap(),
            period: (1, 2),
            sysinfo: json!({}),
            record: Some(record),
            result,
        };
        let knobs = json!({"hash_size": 1048576, "rps_max": 1029, "mem_size": 1073741824u64,
                           "mem_frac": 0.3333, "chunk_pages": 25, "fake_cpu_load": false});
        let old_knobs =
            json!({"hash_size": 1048576, "rps_max": 5, "mem_size": 10, "mem_frac": 0.5});
        let iocost = json!({"devnr": "8:16",
            "model": {"rbps": 174029730u64, "rseqiops": 41322, "rrandiops": 370,
                      "wbps": 178380670u64, "wseqiops": 42387, "wrandiops": 371},
            "qos": {"rpct": 95.0, "rlat": 5000, "wpct": 95.0, "wlat": 5000, "min": 50.0, "max": 150.0}});
        let mut prot =
            serde_json::to_value(crate::bench::protection::run::ProtectionResult::default())
                .unwrap();
        prot["combined"]["isol"] = json!({"mean": 0.8123, "05": 0.61});
        prot["combined"]["lat_imp"] = json!({"mean": 0.2});
        prot["combined"]["work_csv"] = json!(0.95);
        let mut storage =
            serde_json::to_value(crate::bench::storage::StorageResult::default()).unwrap();
        storage["mem_offload_factor"] = json!(1.37);
        storage["mem_usage_mean"] = json!(123456789.5);
        storage["mem_size_mean"] = json!(2e8);
        storage["rbps_final"] = json!(3.3e6);
        storage["wbps_final"] = json!(1.1e5);
        vec![
            job("hashd-params", old_knobs, Some(json!({}))),
            job("hashd-params", knobs, Some(json!({}))),
            job("hashd-params:id=x", json!({"rps_max": 7}), None),
            job("iocost-params", iocost, Some(json!({}))),
            job("protection", json!({}), Some(prot)),
            job("storage", json!({}), Some(storage)),
        ]
    }

    /// What the untyped implementation reported for [`jobs`], and for the
    /// first of them alone.
    const ALL_KINDS: &str = r#"{"hashd_mem_actual_bytes":357878150,"hashd_mem_frac":0.3333,"hashd_rps_max":1029,"iocost_rbps":174029730,"iocost_rrandiops":370,"iocost_wbps":178380670,"iocost_wrandiops":371,"protection_isol_p05_pct":61.0,"protection_isol_pct":81.23,"protection_lat_imp_pct":20.0,"protection_work_csv_pct":95.0,"storage_mem_size_bytes":200000000.0,"storage_mem_usage_bytes":123456789.5,"storage_mof":1.37,"storage_rbps_final":3300000.0,"storage_wbps_final":110000.0}"#;
    const HASHD_PARAMS_ONLY: &str =
        r#"{"hashd_mem_actual_bytes":5,"hashd_mem_frac":0.5,"hashd_rps_max":5}"#;

    #[test]
    fn run_metrics_are_derived_from_the_record() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("r.json");
        std::fs::write(&file, serde_json::to_string(&jobs()).unwrap()).unwrap();
        let journal = crate::journal::Journal::open(&file).unwrap();
        let completed = job::latest_completed(&journal);
        assert_eq!(completed.len(), 4, "one of each kind");
        let r = ResctlRecord::Run(RunRecord {
            jobs: vec![],
            result_file: Some("/r/result.json".into()),
            completed,
        });
        let mut m = derived(&r);
        assert_eq!(m.remove("result_file").unwrap(), "/r/result.json");
        // Compared as text: serde_json's parser may round a float's last
        // digit, its printer does not.
        assert_eq!(Value::Object(m).to_string(), ALL_KINDS);
        let ResctlMetrics::Run(typed) = r.metrics() else {
            panic!("not run metrics");
        };
        let h = typed.jobs.hashd_params.unwrap();
        assert_eq!(
            (h.hashd_rps_max, h.hashd_mem_actual_bytes),
            (1029, 357878150)
        );
        assert_eq!(typed.jobs.iocost_params.unwrap().iocost_wrandiops, 371);

        let first = ResctlRecord::Run(RunRecord {
            jobs: vec![],
            result_file: None,
            completed: jobs()[..1].to_vec(),
        });
        assert_eq!(
            Value::Object(derived(&first)).to_string(),
            HASHD_PARAMS_ONLY
        );
        // Absent: no result file, no completed job.
        let none = ResctlRecord::Run(RunRecord {
            jobs: vec![],
            result_file: None,
            completed: vec![],
        });
        assert!(derived(&none).is_empty());
    }

    fn history() -> Vec<Stat> {
        (0..7u32)
            .map(|i| {
                let i = f64::from(i);
                let lat = crate::hashd::engine::Latencies {
                    p50: 0.010 + i * 0.0011,
                    p95: 0.050 + i * 0.0013,
                    p99: 0.070 + i * 0.0017,
                    ..Default::default()
                };
                Stat {
                    rps: 100.0 + i * 3.3,
                    concurrency: 4.0 + i * 0.7,
                    lat,
                    nr_done: i as u64 * 100 + 3,
                    ..Stat::default()
                }
            })
            .collect()
    }

    /// What the untyped implementation summarised from [`history`], and
    /// from no period.
    const HASHD_SUMMARY: &str = r#"{"concurrency":7.1499999999999995,"lat_p50_ms":14.950000000000001,"lat_p95_ms":55.849999999999994,"lat_p99_ms":77.64999999999999,"nr_done":603,"periods":7,"rps":114.85000000000001}"#;
    const HASHD_EMPTY: &str = r#"{"concurrency":-0.0,"lat_p50_ms":-0.0,"lat_p95_ms":-0.0,"lat_p99_ms":-0.0,"nr_done":0,"periods":0,"rps":-0.0}"#;

    fn hashd(summary: HashdSummary, bench: Option<BenchRecord>) -> HashdRecord {
        HashdRecord {
            summary,
            bench,
            elapsed_secs: 8.25,
            testfiles_created: 2,
            testfiles_reused: 0,
            log_lines_dropped: 0,
            interrupted: false,
            error: None,
        }
    }

    #[test]
    fn hashd_metrics_are_derived_from_the_record() {
        let summary_keys = [
            "concurrency",
            "lat_p50_ms",
            "lat_p95_ms",
            "lat_p99_ms",
            "nr_done",
            "periods",
            "rps",
        ];
        for (h, want) in [(history(), HASHD_SUMMARY), (vec![], HASHD_EMPTY)] {
            let m = derived(&ResctlRecord::Hashd(hashd(HashdSummary::of(&h), None)));
            let summary: Map<String, Value> = summary_keys
                .iter()
                .map(|k| (k.to_string(), m[*k].clone()))
                .collect();
            assert_eq!(Value::Object(summary).to_string(), want);
        }
        // A plain run: no bench keys, no interrupted or error.
        let plain = hashd(HashdSummary::of(&history()), None);
        assert!(plain.success());
        let m = derived(&ResctlRecord::Hashd(plain.clone()));
        assert_eq!(m["elapsed_secs"], 8.25);
        assert_eq!(m["testfiles_created"], 2);
        assert!(m["lat_p95_ms"].is_f64());
        for absent in [
            "rps_max",
            "rps_max_converged",
            "mem_frac",
            "mem_size",
            "mem_probes",
            "interrupted",
            "error",
        ] {
            assert!(!m.contains_key(absent), "{absent}: {m:?}");
        }
        // Stopped and failed.
        let failed = HashdRecord {
            interrupted: true,
            error: Some("worker died".into()),
            ..plain.clone()
        };
        assert!(!failed.success());
        let m = derived(&ResctlRecord::Hashd(failed));
        assert_eq!(m["interrupted"], true);
        assert_eq!(m["error"], "worker died");
        // A bench whose searches did not finish: converged false only.
        let unfinished = hashd(
            HashdSummary::default(),
            Some(BenchRecord {
                result: None,
                single: None,
                searched: true,
            }),
        );
        let m = derived(&ResctlRecord::Hashd(unfinished.clone()));
        assert_eq!(m["rps_max_converged"], false);
        assert!(!m.contains_key("rps_max") && !m.contains_key("mem_frac"));
        assert!(text(&ResctlRecord::Hashd(unfinished)).contains("did not finish"));
        // --bench-cpu alone: rps_max, no memory keys.
        let mut result = BenchResult {
            rps_max: 900,
            converged: true,
            footprint_bytes: 64 << 20,
            mem_frac: 0.5,
            hash_size: 1 << 20,
            mem: None,
        };
        let cpu = hashd(
            HashdSummary::default(),
            Some(BenchRecord {
                result: Some(result.clone()),
                single: None,
                searched: true,
            }),
        );
        let m = derived(&ResctlRecord::Hashd(cpu));
        assert_eq!(
            (m["rps_max"].clone(), m["rps_max_converged"].clone()),
            (json!(900), json!(true))
        );
        assert!(!m.contains_key("mem_frac") && !m.contains_key("mem_probes"));
        // --bench: the memory search's keys too.
        result.mem = Some(MemResult {
            mem_size: 128 << 20,
            probes: vec![ProbeRecord {
                stage: "mem-refine".into(),
                mem_frac: 0.5,
                rps: 880.5,
                end: "settled".into(),
            }],
        });
        let both = hashd(
            HashdSummary::default(),
            Some(BenchRecord {
                result: Some(result),
                single: None,
                searched: true,
            }),
        );
        let m = derived(&ResctlRecord::Hashd(both.clone()));
        assert_eq!(m["mem_frac"], 0.5);
        assert_eq!(m["mem_size"], 128 << 20);
        assert_eq!(
            m["mem_probes"],
            json!([{"stage": "mem-refine", "mem_frac": 0.5, "rps": 880.5, "end": "settled"}])
        );
        let t = text(&ResctlRecord::Hashd(both));
        assert!(
            t.starts_with("Bench results: memory 64.0M (50.00%), hash 1.0M, rps 900\n"),
            "{t}"
        );
    }

    #[test]
    fn mem_hog_has_a_record_and_no_metrics() {
        let r = ResctlRecord::MemHog(HogReport {
            wbytes: 1 << 20,
            wloss: 3,
            ..HogReport::default()
        });
        assert!(derived(&r).is_empty());
        assert_eq!(
            text(&r),
            "mem-hog: wrote 1048576 bytes, lost 3 bytes of its rate\n"
        );
    }

    #[test]
    fn helpers_are_known() {
        let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        for helper in [
            &["hashd", "-t", "tf", "--clear-testfiles", "--prepare"][..],
            &["hashd", "-t", "tf", "--prepare-config"],
            &["hashd", "-t", "tf", "--prepare"],
            &["summary"],
            &["doc", "specs"],
        ] {
            assert!(Resctl.is_helper(&args(helper)), "{helper:?}");
        }
        for measured in [
            &["hashd", "-t", "tf"][..],
            // Upstream's meaning: clear, then prepare and run.
            &["hashd", "-t", "tf", "--clear-testfiles"],
            &["run", "hashd-params"],
            &["mem-hog", "--wbps", "1M"],
        ] {
            assert!(!Resctl.is_helper(&args(measured)), "{measured:?}");
        }
    }

    fn words(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// `parse` with a given scratch dir (nothing is created).
    fn parsed(v: &[&str]) -> Result<(Options, String, Vec<String>), String> {
        let mut a = words(&["-d", "/nonexistent-rackbench-dir"]);
        a.extend(words(v));
        parse(&a)
    }

    fn refused(v: &[&str]) -> String {
        match parsed(v) {
            Ok((o, ..)) => panic!("{v:?} accepted: {o:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn upstream_global_options_parse_into_options() {
        let (o, cmd, rest) = parsed(&[
            "-D",
            "/dev/sda",
            "-l",
            "/x/linux.tar",
            "-R",
            "3600",
            "-M",
            "4",
            "-m",
            "8G",
            "--mem-margin",
            "30%",
            "--hashd-size",
            "2G",
            "--hashd-cpu-load",
            "fake",
            "--iocost-qos",
            "rpct=95,rlat=5000,vrate=80.456",
            "--swappiness",
            "100",
            "--iocost-from-sys",
            "-vv",
            "--logfile",
            "/tmp/resctl.log",
            "run",
            "hashd-params",
        ])
        .unwrap();
        assert_eq!((cmd.as_str(), rest), ("run", words(&["hashd-params"])));
        assert_eq!(o.dev.as_deref(), Some("/dev/sda"));
        assert_eq!(o.linux_tar, Some(PathBuf::from("/x/linux.tar")));
        assert_eq!(o.rep_retention, Some(3600));
        assert_eq!(o.mem_profile.as_deref(), Some("4"));
        assert_eq!(o.mem_avail, Some(8 << 30));
        assert!((o.mem_margin.unwrap() - 0.3).abs() < 1e-12);
        assert_eq!(o.hashd_size, Some(2 << 30));
        assert_eq!(o.hashd_fake_cpu_load, Some(true));
        let q = o.iocost_qos.clone().unwrap();
        assert_eq!(
            (q.rpct, q.rlat, q.wpct, q.min, q.max),
            (Some(95.0), Some(5000), None, Some(80.46), Some(80.46))
        );
        assert_eq!(o.swappiness, Some(100));
        assert!(o.iocost_from_sys);
        assert_eq!(o.verbose, 2);
        assert_eq!(o.logfile, Some(PathBuf::from("/tmp/resctl.log")));
        assert_eq!(o.rstat, 0);

        // Long forms, the --linux-tar spelling, `=` values, options after
        // the command, and empty values meaning the default (as upstream).
        let (o, _, rest) = parsed(&[
            "--linux-tar=/l.tar",
            "--mem-profile=off",
            "--mem-avail",
            "1G",
            "run",
            "storage",
            "--dev=",
            "--hashd-cpu-load=real",
            "--swappiness=",
            "--iocost-qos=",
            "-v",
        ])
        .unwrap();
        assert_eq!(rest, words(&["storage"]));
        assert_eq!(o.linux_tar, Some(PathBuf::from("/l.tar")));
        assert_eq!(o.mem_profile.as_deref(), Some("off"));
        assert_eq!(o.mem_avail, Some(1 << 30));
        assert_eq!(o.dev, None);
        assert_eq!(o.hashd_fake_cpu_load, Some(false));
        assert_eq!((o.swappiness, o.iocost_qos, o.verbose), (None, None, 1));
        let (o, ..) =
            parsed(&["--hashd-cpu-load", "keep", "--hashd-size", "1", "run", "x"]).unwrap();
        assert_eq!((o.hashd_fake_cpu_load, o.hashd_size), (None, Some(4096)));
        // Nothing given: nothing overridden.
        let (o, ..) = parsed(&["run", "x"]).unwrap();
        assert_eq!(
            (o.dev, o.mem_avail, o.mem_margin, o.hashd_size, o.swappiness),
            (None, None, None, None, None)
        );
    }

    #[test]
    fn the_remaining_upstream_flags_parse() {
        let (o, ..) = parsed(&[
            "--systemd-timeout",
            "2m",
            "--keep-reports",
            "--clear-reports",
            "--skip-shadow-inode-prot-test",
            "run",
            "x",
        ])
        .unwrap();
        assert_eq!(o.systemd_timeout, Some(120.0));
        assert!(o.keep_reports && o.clear_reports && o.skip_shadow_inode_prot_test);
        assert!(!o.force_shadow_inode_prot_test);
        let (o, ..) = parsed(&[
            "--systemd-timeout=90",
            "--force-shadow-inode-prot-test",
            "run",
            "x",
        ])
        .unwrap();
        assert_eq!(o.systemd_timeout, Some(90.0));
        assert!(o.force_shadow_inode_prot_test);
        let e = refused(&["--systemd-timeout", "soon", "run", "x"]);
        assert!(e.contains("--systemd-timeout \"soon\""), "{e}");
    }

    #[test]
    fn job_files_expand_in_their_place_among_the_specs() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("jobs.json");
        std::fs::write(
            &f,
            r#"{"job_specs": [{"kind": "storage", "props": [{"loops": "1"}]}]}"#,
        )
        .unwrap();
        let f = f.to_str().unwrap();
        let file_eq = format!("--file={f}");
        let short = format!("-f{f}");
        for form in [
            vec!["-f", f],
            vec!["--file", f],
            vec![file_eq.as_str()],
            vec![short.as_str()],
        ] {
            let mut line = vec!["-r", "r.json", "run", "hashd-params"];
            line.extend(&form);
            line.push("protection");
            let (_, cmd, rest) = parsed(&line).unwrap();
            assert_eq!(cmd, "run");
            assert_eq!(
                rest,
                words(&["hashd-params", "storage:loops=1", "protection"])
            );
        }
        let (_, _, rest) = parsed(&["-r", "r.json", "format", "-f", f]).unwrap();
        assert_eq!(rest, words(&["storage:loops=1"]));
        // A missing file is named; -f belongs to run, format and summary.
        let e = refused(&["-r", "r.json", "run", "-f", "/nonexistent/j.json"]);
        assert!(e.contains("-f/--file /nonexistent/j.json"), "{e}");
        assert!(refused(&["-f", f, "run"]).contains("'-f'"));
        assert!(refused(&["deps", "-f", f]).contains("'-f'"));
    }

    #[test]
    fn format_takes_rstat_and_r_elsewhere_is_rep_retention() {
        let (o, cmd, rest) = parsed(&["-r", "f.json", "format", "-RR", "protection"]).unwrap();
        assert_eq!(
            (o.rstat, cmd.as_str(), rest),
            (2, "format", words(&["protection"]))
        );
        let (o, ..) = parsed(&["-R", "60", "-r", "f.json", "format", "-R", "--rstat"]).unwrap();
        assert_eq!((o.rep_retention, o.rstat), (Some(60), 2));
        let (o, ..) = parsed(&["-r", "f.json", "summary"]).unwrap();
        assert_eq!(o.rstat, 0);
        // -R after another command is --rep-retention.
        let (o, ..) = parsed(&["run", "-R", "7", "x"]).unwrap();
        assert_eq!((o.rep_retention, o.rstat), (Some(7), 0));
        assert_eq!(
            rstat_words(&words(&["-vR", "5", "format", "-R", "-r", "-R"])),
            words(&["-vR", "5", "format", "--rstat", "-r", "-R"])
        );
        let e = refused(&["-r", "f.json", "summary", "--rstat"]);
        assert!(
            e.contains("--rstat (format -R) is an option of format"),
            "{e}"
        );
    }

    #[test]
    fn bad_values_are_refused_naming_the_option() {
        let cases: &[(&[&str], &str)] = &[
            (&["--swappiness", "201", "run", "x"], "--swappiness \"201\""),
            (&["--swappiness=-1", "run", "x"], "--swappiness \"-1\""),
            (
                &["--hashd-cpu-load", "slow", "run", "x"],
                "--hashd-cpu-load \"slow\"",
            ),
            (
                &["--iocost-qos", "rlat=5000,foo=1", "run", "x"],
                "unknown key \"foo\"",
            ),
            (
                &["--iocost-qos", "rpct=x", "run", "x"],
                "--iocost-qos rpct=",
            ),
            (&["-R", "1h", "run", "x"], "-R/--rep-retention \"1h\""),
            (&["-m", "8Q", "run", "x"], "-m/--mem-avail"),
            (&["--mem-margin", "lots", "run", "x"], "--mem-margin"),
            (&["--hashd-size", "big", "run", "x"], "--hashd-size"),
        ];
        for (args, want) in cases {
            let e = refused(args);
            assert!(e.contains(want), "{args:?}: {e}");
        }
    }

    #[test]
    fn args_files_give_defaults_the_command_line_overrides_and_are_saved_back() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("sub/args.json");
        let fs = f.display().to_string();
        let w = |v: &[&str]| {
            let mut a = words(&["-a", &fs]);
            a.extend(words(v));
            a
        };
        // Missing: upstream's defaults, created by the command with what it
        // was given (the specs, --mem-margin; -r and --test are not saved).
        let (o, cmd, rest, save) = parse_all(&w(&[
            "-r",
            "r.json",
            "--test",
            "--mem-margin",
            "30%",
            "run",
            "storage",
        ]))
        .unwrap();
        assert_eq!((cmd.as_str(), rest.clone()), ("run", words(&["storage"])));
        assert_eq!(o.mem_margin, Some(0.3));
        save.expect("a missing file is created").write().unwrap();
        let text = std::fs::read_to_string(&f).unwrap();
        assert!(
            !text.contains("r.json") && text.contains("\"mode\": \"Run\""),
            "{text}"
        );
        // Reused: the saved specs and values; nothing changed, nothing saved.
        let (o, _, rest, save) = parse_all(&w(&["run"])).unwrap();
        assert_eq!(rest, words(&["storage"]));
        assert_eq!(o.mem_margin, Some(0.3));
        assert!(!o.test);
        assert!(save.is_none());
        // The command line wins, and the change is saved.
        let (o, _, rest, save) =
            parse_all(&w(&["--mem-margin", "10%", "--swappiness", "5", "run"])).unwrap();
        assert_eq!((o.mem_margin, o.swappiness), (Some(0.1), Some(5)));
        assert_eq!(rest, words(&["storage"]));
        save.unwrap().write().unwrap();
        let (o, _, _, _) = parse_all(&w(&["--mem-margin=", "run"])).unwrap();
        assert_eq!((o.mem_margin, o.swappiness), (None, Some(5)));
        // Another command drops the specs (upstream's mode), so a later run
        // without specs is refused naming the file.
        let (_, cmd, rest, save) = parse_all(&w(&["format"])).unwrap();
        assert_eq!((cmd.as_str(), rest.len()), ("format", 0));
        save.unwrap().write().unwrap();
        let e = parse_all(&w(&["run"])).unwrap_err();
        assert!(
            e.contains("-a/--args") && e.contains("holds none for run"),
            "{e}"
        );
        // deps neither takes nor saves specs.
        let (_, _, _, save) = parse_all(&w(&["--swappiness", "7", "deps"])).unwrap();
        assert!(save.is_none());
        // A bad file names itself and the field; a bad value names the
        // option and the file it came from.
        std::fs::write(&f, r#"{"mem_profile": "16"}"#).unwrap();
        let e = parse_all(&w(&["run", "x"])).unwrap_err();
        assert!(e.contains(&fs) && e.contains("\"mem_profile\""), "{e}");
        std::fs::write(&f, r#"{"swappiness_ovr": 300}"#).unwrap();
        let e = parse_all(&w(&["run", "x"])).unwrap_err();
        assert!(e.contains("--swappiness \"300\"") && e.contains(&fs), "{e}");
        // Upstream's own file: its values are given options.
        std::fs::write(
            &f,
            r#"{"dir": "rb-scratch", "mem_profile": 8, "hashd_fake_cpu_load": false,
                "mode": "Summary", "job_specs": [{"kind": "hashd-params", "id": null,
                "passive": null, "props": [{}]}]}"#,
        )
        .unwrap();
        let (o, _, rest, save) = parse_all(&w(&["summary"])).unwrap();
        assert_eq!(o.dir, PathBuf::from("rb-scratch"));
        assert_eq!(o.mem_profile.as_deref(), Some("8"));
        assert_eq!(o.hashd_fake_cpu_load, Some(false));
        assert_eq!(rest, words(&["hashd-params"]));
        assert!(save.is_none());
    }

    #[test]
    fn mem_avail_feeds_the_memory_sizing() {
        use crate::bench::knobs::MemInfo;
        const G: u64 = 1 << 30;
        let o = Options {
            mem_avail: Some(8 * G),
            ..Options::default()
        };
        // The given size replaces MemAvailable; upstream's 16 does not
        // fit 8G (share 12G): the largest that does, and a note saying so.
        let m = job::mem_info(&o, Some(100 * G), 128 * G).unwrap();
        assert_eq!((m.avail, m.profile), (8 * G, MemInfo::auto_profile(8 * G)));
        assert_eq!(m.profile, 8);
        let n = job::mem_profile_note(&o, &m).unwrap();
        assert!(
            n.contains("mem-profile 16") && n.contains("ran at mem-profile 8"),
            "{n}"
        );
        // Where 16 fits, 16 (not the largest that fits), without a note.
        let big = Options {
            mem_avail: Some(100 * G),
            ..Options::default()
        };
        let m = job::mem_info(&big, None, 128 * G).unwrap();
        assert_eq!(m.profile, 16);
        assert_eq!(job::mem_profile_note(&big, &m), None);
        // A profile given that does not fit is refused, as upstream.
        let e = job::mem_info(
            &Options {
                mem_profile: Some("16".into()),
                ..o.clone()
            },
            None,
            128 * G,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("too small for its share 12.0G"),
            "{e}"
        );
        let t = Options {
            test: true,
            ..o.clone()
        };
        assert_eq!(job::mem_info(&t, None, 128 * G).unwrap().profile, 1);
        let p = Options {
            mem_profile: Some("4".into()),
            ..o.clone()
        };
        assert_eq!(
            job::mem_info(&p, None, 128 * G).unwrap(),
            MemInfo::for_profile(4, 8 * G)
        );
        let e = job::mem_info(&o, None, 4 * G).unwrap_err();
        assert!(e.to_string().contains("-m/--mem-avail 8.0G"), "{e}");
        // Without it: MemAvailable, else the total.
        let d = Options::default();
        assert_eq!(job::mem_info(&d, Some(3 * G), 16 * G).unwrap().avail, 3 * G);
        assert_eq!(job::mem_info(&d, None, 16 * G).unwrap().avail, 16 * G);
    }

    #[test]
    fn hashd_overrides_change_the_knobs() {
        use crate::bench::knobs::HashdKnobs;
        const G: u64 = 1 << 30;
        let saved = HashdKnobs {
            hash_size: 1 << 20,
            rps_max: 1000,
            mem_size: 48 * G,
            mem_frac: 0.3,
            chunk_pages: 25,
            fake_cpu_load: false,
        };
        let (o, ..) =
            parsed(&["--hashd-size", "2G", "--hashd-cpu-load", "fake", "run", "x"]).unwrap();
        let mut k = saved.clone();
        job::override_hashd(&mut k, &o, G).unwrap();
        assert_eq!(
            (k.mem_size, k.mem_frac, k.fake_cpu_load),
            (4 * G, 0.5, true)
        );
        assert_eq!(k.mem_actual(), 2 * G);
        assert_eq!((k.rps_max, k.hash_size), (1000, 1 << 20));
        // Nothing given: unchanged.
        let mut k = saved.clone();
        job::override_hashd(&mut k, &Options::default(), G).unwrap();
        assert_eq!(k, saved);
        // Larger than hashd's size at this profile: refused.
        let (o, ..) = parsed(&["--hashd-size", "5G", "run", "x"]).unwrap();
        let e = job::override_hashd(&mut saved.clone(), &o, G).unwrap_err();
        assert!(e.to_string().starts_with("--hashd-size 5.0G"), "{e}");
    }

    #[test]
    fn dev_is_accepted_only_for_the_scratch_disk() {
        let dir = std::path::Path::new("/scratch");
        assert!(job::check_dev(None, dir, "sda").is_ok());
        assert!(job::check_dev(Some("sda"), dir, "sda").is_ok());
        assert!(job::check_dev(Some("/dev/sda"), dir, "sda").is_ok());
        let e = job::check_dev(Some("nvme9n9"), dir, "sda").unwrap_err();
        assert!(e.to_string().starts_with("-D/--dev nvme9n9: "), "{e}");
        assert!(
            e.to_string().contains("(sda)") && e.to_string().contains("--dir on nvme9n9"),
            "{e}"
        );
        let e = job::check_dev(Some("sda"), dir, "").unwrap_err();
        assert!(e.to_string().contains("(unknown)"), "{e}");
    }

    #[test]
    fn iocost_overrides_and_the_kernels_parameters() {
        use crate::bench::knobs::IoCostQos;
        let model = "8:0 ctrl=auto model=linear rbps=100 rseqiops=10 rrandiops=5 wbps=200 wseqiops=20 wrandiops=6\n\
                     8:16 ctrl=user model=linear rbps=174029730 rseqiops=41322 rrandiops=370 wbps=178380670 wseqiops=42387 wrandiops=371\n";
        let qos = "8:0 enable=0 ctrl=auto rpct=0.00 rlat=250000 wpct=0.00 wlat=250000 min=1.00 max=10000.00\n\
                   8:16 enable=1 ctrl=user rpct=95.00 rlat=5000 wpct=95.00 wlat=5000 min=50.00 max=150.00\n";
        let k = job::iocost_knobs_from_sys(model, qos, "8:16").unwrap();
        assert_eq!(k.devnr, "8:16");
        assert_eq!((k.model.rbps, k.model.wrandiops), (174029730, 371));
        assert_eq!(
            k.qos,
            IoCostQos {
                rpct: 95.0,
                rlat: 5000,
                wpct: 95.0,
                wlat: 5000,
                min: 50.0,
                max: 150.0
            }
        );
        let e = job::iocost_knobs_from_sys(model, qos, "8:0").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("--iocost-from-sys: iocost is disabled"),
            "{e}"
        );
        let e = job::iocost_knobs_from_sys(model, qos, "259:0").unwrap_err();
        assert!(
            e.to_string()
                .contains("no line for the scratch device 259:0"),
            "{e}"
        );
        // --iocost-qos replaces only the keys it names.
        let o = QosOvr::parse_overrides("wlat=9000,min=60").unwrap();
        let q = o.apply(&k.qos);
        assert_eq!((q.rlat, q.wlat, q.min, q.max), (5000, 9000, 60.0, 150.0));
        assert!(QosOvr::parse_overrides("").unwrap().is_empty());
    }

    #[test]
    fn an_older_record_is_refused() {
        let rec = Record {
            kind: "resctl".into(),
            version: 1,
            data: json!({"jobs": []}),
        };
        let e = Resctl.metrics(&rec).unwrap_err().to_string();
        assert!(e.contains("an older rackbench"), "{e}");
    }
}
