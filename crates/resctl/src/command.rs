//! `rackbench resctl ...`: resctl-bench's commands, hashd and the memory
//! hog, as the harness runs them.

use crate::bench::common::JobMetrics;
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
  deps                 check the system requirements of every bench
  doc [SUBJECT]        documentation: specs, a bench, sysreqs, cgroups
  hashd [OPTIONS]      the latency-sensitive workload (`hashd --help`)
  mem-hog OPTIONS      the memory hog (`mem-hog --help`)

Options:
  -r, --result FILE    the result journal (JSON; gzipped when it ends in .gz)
  -d, --dir DIR        scratch directory, must exist (default /var/lib/rackbench-resctl,
                       created): hashd's test files and state, fio's test file
  --mem-profile N|off  memory profile in GiB, a power of two (default: the largest
                       whose share fits in available memory; 1 with --test)
  --force              run even when a bench's hard requirements are missed
  --test               short runs for CI (small profile, short windows)

Specs: KIND[:k[=v],...][:group2]...; id=ID and passive=... may appear in any
group. Kinds: hashd-params, iocost-params, protection, storage.";

/// The hidden command under which the benches start their children
/// (hashd, the hog): run directly, without the harness's report folder and
/// results store.
pub const CHILD_CMD: &str = "__resctl-child";

/// Runs a child: `hashd ARGS` or `mem-hog ARGS`. Returns the exit code.
pub fn child_main(args: &[String]) -> i32 {
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
        Some("mem-hog") => crate::hog::command(&args[1..], &cancel).map(|_| true),
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
    #[arg(long = "mem-profile")]
    mem_profile: Option<String>,
    #[arg(long)]
    force: bool,
    #[arg(long)]
    test: bool,
    /// COMMAND [ARGS...]
    words: Vec<String>,
}

/// The command line as clap parses it.
fn parse_cli(args: &[String]) -> Result<Cli, clap::Error> {
    use clap::Parser;
    Cli::try_parse_from(std::iter::once("resctl".to_string()).chain(args.iter().cloned()))
}

/// Global options and the command with its arguments.
fn parse(args: &[String]) -> Result<(Options, String, Vec<String>), String> {
    let c = parse_cli(args).map_err(|e| match e.kind() {
        clap::error::ErrorKind::DisplayHelp => HELP.to_string(),
        _ => {
            // clap's text starts with its own "error: "; ours is added
            // where the error is printed.
            let text = e.render().to_string();
            let text = text.trim_end();
            format!("{}\n\n{HELP}", text.strip_prefix("error: ").unwrap_or(text))
        }
    })?;
    let mut o = Options {
        result: c.result,
        mem_profile: c.mem_profile,
        force: c.force,
        test: c.test,
        ..Options::default()
    };
    let dir = c.dir;
    let mut words = c.words.into_iter();
    let cmd = words.next();
    let rest: Vec<String> = words.collect();
    let cmd = cmd.ok_or_else(|| format!("no command\n\n{HELP}"))?;
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

const COMMANDS: &[&str] = &["run", "format", "summary", "deps", "doc"];

fn doc(subject: Option<&str>) -> Result<String, String> {
    Ok(match subject {
        None | Some("specs") => format!(
            "{HELP}\n\nBenches:\n{}\nSubjects: specs, sysreqs, cgroups, common, shadow-inode, and each bench kind.\n",
            job::BENCHES
                .iter()
                .map(|b| format!("  {:14} {}\n", b.kind(), b.about()))
                .collect::<String>()
        ),
        Some("sysreqs") => format!(
            "System requirements (upstream's names). `deps` checks them all on this host; each\n\
             bench lists the ones it cannot do without (hard: refused unless --force) and the\n\
             ones it runs without, degraded (the result's header says how):\n\n{}",
            job::BENCHES
                .iter()
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
                    job::BENCHES
                        .iter()
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
        let (_, cmd, rest) = parse(args).map_err(anyhow::Error::msg)?;
        if !COMMANDS.contains(&cmd.as_str()) {
            anyhow::bail!(
                "resctl: unknown command {cmd:?}: expected run, format, summary, deps, doc, hashd or mem-hog"
            );
        }
        if cmd == "run" || cmd == "format" || cmd == "summary" {
            for s in &rest {
                job::parse_spec(s).map_err(anyhow::Error::msg)?;
            }
        }
        Ok(())
    }

    fn is_helper(&self, args: &[String]) -> bool {
        if args.first().map(String::as_str) == Some("hashd") {
            return crate::hashd::command::is_helper(&args[1..]);
        }
        // The command is the first word of the parsed command line.
        parse_cli(args).is_ok_and(|c| {
            matches!(
                c.words.first().map(String::as_str),
                Some("format" | "summary" | "deps" | "doc")
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
        let (opts, cmd, rest) = parse(args).map_err(anyhow::Error::msg)?;
        let success = match cmd.as_str() {
            "run" => {
                let mut printed = Vec::new();
                let ok = job::cmd_run(&opts, &rest, &ctx.cancel, &mut printed)
                    .map_err(anyhow::Error::msg)?;
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
                let out =
                    job::cmd_format(&opts, &rest, cmd == "format").map_err(anyhow::Error::msg)?;
                print!("{out}");
                true
            }
            "deps" => {
                print!("{}", job::cmd_deps(&opts).map_err(anyhow::Error::msg)?);
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

    fn format(&self, record: &Record, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
        match record.decode::<ResctlRecord>(self.name(), RECORD_VERSION)? {
            ResctlRecord::Run(r) => out.write_all(job::summary_text(&r.jobs).as_bytes())?,
            ResctlRecord::Hashd(r) => r.write_text(out)?,
            ResctlRecord::MemHog(r) => writeln!(out, "{}", crate::hog::end_line(&r))?,
        }
        out.flush()?;
        Ok(())
    }

    fn metrics(&self, record: &Record) -> anyhow::Result<Map<String, Value>> {
        let r: ResctlRecord = record.decode(self.name(), RECORD_VERSION)?;
        harness::record::metrics_map(&r.metrics())
    }
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
