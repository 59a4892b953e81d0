//! The report JSON of every job of the catalogue, from a stored record,
//! byte for byte: the seam between the workloads and the harness (the
//! record that crosses it, each workload's `metrics`, the harness's report)
//! may be reshaped, the reports it writes may not change.
//!
//! `tests/data/golden/records/<job>[.<role>].json[.gz]` holds the record
//! of a real run of the job (made shorter through its vars, see `input`),
//! with the role and input it was resolved with and its success;
//! `tests/data/golden/reports/` holds the report the harness wrote from
//! it, with the machine, run id and time fixed, and `directions.txt` which
//! way is better for each of their metrics. `RACKBENCH_BLESS=1` writes
//! them anew (only when changing a report is the point of a change, said
//! in its commit).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use harness::Record;
use harness::job::Catalogue;
use harness::machine::MachineInfo;
use harness::report::{Report, Stamp};
use serde_json::{Map, Value};

include!(concat!(env!("OUT_DIR"), "/embedded_jobs.rs"));

/// The workloads, as the binary registers them (the binary's own list).
#[path = "../src/registry.rs"]
mod registry;
use registry::registry;

/// One stored run of a job.
struct Fixture {
    job: String,
    role: Option<String>,
    input: Map<String, Value>,
    success: bool,
    record: Record,
}

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/golden")
}

fn bless() -> bool {
    std::env::var_os("RACKBENCH_BLESS").is_some()
}

/// A fixed host, so that reports depend on the record only.
fn machine() -> MachineInfo {
    MachineInfo {
        cpu_architecture: "x86_64".into(),
        cpu_model: "Golden CPU @ 2.00GHz".into(),
        hostname: "golden-host".into(),
        kernel_version: "6.1.0-golden".into(),
        mem_total_kib: "24576000 KiB".into(),
        num_logical_cpus: "2".into(),
        num_cpus_usable: 2,
        os_distro: "debian".into(),
        os_release_name: "Debian GNU/Linux 12 (bookworm)".into(),
        threads_per_core: 1,
    }
}

/// The fixtures, by file stem (`<job>` or `<job>.<role>`).
fn fixtures() -> BTreeMap<String, Fixture> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(data().join("records")).expect("records folder") {
        let p = e.expect("records entry").path();
        let name = p
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        // The large ones are gzipped.
        let (stem, bytes) = if let Some(stem) = name.strip_suffix(".json.gz") {
            let mut text = Vec::new();
            let file = std::fs::File::open(&p).expect("open record");
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(file), &mut text)
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (stem.to_string(), text)
        } else if let Some(stem) = name.strip_suffix(".json") {
            (stem.to_string(), std::fs::read(&p).expect("read record"))
        } else {
            continue;
        };
        let v: Value =
            serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let field = |k: &str| {
            v.get(k)
                .unwrap_or_else(|| panic!("{}: no {k}", p.display()))
        };
        let f = Fixture {
            job: field("job").as_str().expect("job name").to_string(),
            role: v.get("role").and_then(Value::as_str).map(str::to_string),
            input: field("input").as_object().expect("input object").clone(),
            success: field("success").as_bool().expect("success flag"),
            record: serde_json::from_value(field("record").clone())
                .unwrap_or_else(|e| panic!("{}: record: {e}", p.display())),
        };
        out.insert(stem, f);
    }
    out
}

/// Writes `text` to `golden` when blessing; otherwise says whether it
/// matches, naming the file on stderr when it does not.
fn same_as_golden(golden: &Path, text: &str) -> bool {
    if bless() {
        std::fs::create_dir_all(golden.parent().expect("parent")).expect("mkdir");
        std::fs::write(golden, text).expect("write golden");
        return true;
    }
    let want = std::fs::read_to_string(golden)
        .unwrap_or_else(|e| panic!("{}: {e} (RACKBENCH_BLESS=1 writes it)", golden.display()));
    if want != text {
        eprintln!("the report differs from {}", golden.display());
        return false;
    }
    true
}

#[test]
fn every_jobs_report_is_byte_identical_from_its_record() {
    let cat = Catalogue::load(EMBEDDED_JOBS, &[]).expect("embedded catalogue");
    let reg = registry();
    let fixtures = fixtures();
    let metadata = BTreeMap::from([
        ("L1d cache".to_string(), "64 KiB (2 instances)".to_string()),
        ("L2 cache".to_string(), "1 MiB (2 instances)".to_string()),
    ]);
    let machine = machine();
    let mut changed = Vec::new();
    for (stem, f) in &fixtures {
        let job = cat.get(&f.job).unwrap_or_else(|e| panic!("{stem}: {e}"));
        let resolved = harness::vars::resolve(job, f.role.as_deref(), &f.input)
            .unwrap_or_else(|e| panic!("{stem}: {e}"));
        let w = reg
            .get(&job.benchmark)
            .unwrap_or_else(|| panic!("{stem}: no workload {}", job.benchmark));
        let metrics = w
            .metrics(&f.record)
            .unwrap_or_else(|e| panic!("{stem}: metrics: {e:#}"));
        let stamp = Stamp {
            machine: &machine,
            metadata: &metadata,
            run_id: "60de2e11",
            timestamp: 1_800_000_000,
        };
        let report = Report::for_job(job, &resolved, stamp, metrics, f.success);
        let text = report.render(true) + "\n";
        if !same_as_golden(&data().join("reports").join(format!("{stem}.json")), &text) {
            changed.push(stem.clone());
        }
    }
    assert!(changed.is_empty(), "reports changed: {changed:?}");
    // Every job of the catalogue has a record (each role of a job with roles).
    for job in cat.iter() {
        assert!(
            fixtures.values().any(|f| f.job == job.name),
            "job {} has no record in tests/data/golden/records",
            job.name
        );
        for role in &job.roles {
            assert!(
                fixtures
                    .values()
                    .any(|f| f.job == job.name && f.role.as_deref() == Some(role.name.as_str())),
                "job {} role {} has no record",
                job.name,
                role.name
            );
        }
    }
}

/// The fixture's workload and the metrics it derives from the record.
fn derived<'a>(
    reg: &'a harness::Registry,
    stem: &str,
    f: &Fixture,
) -> (&'a dyn harness::Workload, Map<String, Value>) {
    let w = reg
        .get(&f.record.kind)
        .unwrap_or_else(|| panic!("{stem}: no workload {}", f.record.kind));
    let metrics = w
        .metrics(&f.record)
        .unwrap_or_else(|e| panic!("{stem}: metrics: {e:#}"));
    (w, metrics)
}

/// Which way is better for every numeric metric of every job's record, as
/// `results compare` and the report page judge it: the rules may move,
/// the verdicts may not change.
#[test]
fn every_metrics_direction_is_as_recorded() {
    use direction::Directions;
    let reg = registry();
    let mut text = String::new();
    for (stem, f) in &fixtures() {
        let (_, metrics) = derived(&reg, stem, f);
        let tables = reg.tables(&f.record.kind);
        for k in harness::store::flatten_numbers(&Value::Object(metrics)).into_keys() {
            let better = direction::better_in(tables, &k);
            let sense = direction::rule_in(tables, &k).map(|r| r.sense);
            text.push_str(&format!("{stem} {k} {better:?} {sense:?}\n"));
        }
    }
    assert!(
        same_as_golden(&data().join("reports/directions.txt"), &text),
        "directions changed (diff the file against the test's output)"
    );
}

/// Every headline a workload states names a metric that some recorded job
/// of it reports, with a numeric value; and every job whose record has
/// any numeric metric shows at least one headline after `run`. A renamed
/// metric fails here instead of vanishing from the summary.
#[test]
fn every_headline_is_a_recorded_metric() {
    let reg = registry();
    let fixtures = fixtures();
    let mut used = std::collections::BTreeSet::new();
    for (stem, f) in &fixtures {
        let (w, metrics) = derived(&reg, stem, f);
        let shown: Vec<&str> = w
            .headlines()
            .iter()
            .filter(|h| harness::answer::value_at(&metrics, h.key).is_some())
            .map(|h| h.key)
            .collect();
        let numbers = harness::store::flatten_numbers(&Value::Object(metrics.clone()));
        if f.success && !numbers.is_empty() {
            assert!(!shown.is_empty(), "{stem}: no headline among its metrics");
        }
        for k in shown {
            used.insert((f.record.kind.clone(), k));
        }
    }
    for w in reg.iter() {
        for h in w.headlines() {
            assert!(
                used.contains(&(w.name().to_string(), h.key)),
                "{}: headline {} is in no recorded job's metrics",
                w.name(),
                h.key
            );
        }
    }
}

/// What a chart shows, in a line: its kind, title, and each series' name
/// and number of points.
fn chart_line(stem: &str, scope: &str, c: &harness::page_chart::PageChart) -> String {
    let series: Vec<String> = c
        .chart
        .series
        .iter()
        .map(|s| format!("{} x{}", s.name, s.points.len()))
        .collect();
    format!(
        "{stem} {scope} {} \"{}\": {}\n",
        c.kind,
        c.chart.title,
        series.join(", ")
    )
}

/// The report page's charts of every recorded job, per run and across two
/// runs of it, as drawn from the metrics its workload derives from the
/// record: which charts, their titles and how many points each series
/// has. A metric renamed on one side of the seam (the workload's metrics,
/// the page's or the workload's charts) changes this list instead of
/// silently dropping a chart.
#[test]
fn every_jobs_page_charts_are_as_recorded() {
    const PAGES_OWN: [&str; 5] = [
        "ladder",
        "ladder_qps",
        "series_counts",
        "series_latency",
        "percentiles",
    ];
    let reg = registry();
    let mut text = String::new();
    let mut own = std::collections::BTreeSet::new();
    let fixtures = fixtures();
    for (stem, f) in &fixtures {
        let (_, metrics) = derived(&reg, stem, f);
        let mut row =
            harness::store::RunRow::from_metrics(&f.job, &f.record.kind, Value::Object(metrics));
        row.success = f.success;
        row.role = f.role.clone();
        row.record = Some(f.record.clone());
        let mut later = row.clone();
        later.id += 1;
        later.timestamp += 60;
        let run = harness::html::run_charts(&row, &reg);
        let history = harness::html::job_charts(&f.job, &[&row, &later], &reg);
        for (scope, charts) in [("run", run), ("history", history)] {
            for c in charts {
                if !PAGES_OWN.contains(&c.kind) {
                    own.insert(f.record.kind.as_str());
                }
                text.push_str(&chart_line(stem, scope, &c));
            }
        }
    }
    // Each workload that draws charts of its own draws some from a record.
    for kind in ["cachebench", "distbench", "resctl"] {
        assert!(
            own.contains(kind),
            "no recorded {kind} job draws a chart of its own"
        );
    }
    assert!(
        same_as_golden(&data().join("reports/charts.txt"), &text),
        "the page's charts changed (diff the file against the test's output)"
    );
}
