//! `rackbench report stdout|json_file|score`: benchpress' reports over
//! the stored runs (`report html` is in `html.rs`).

use anyhow::Context;
use harness::{Catalogue, present, score, store::Store};

/// benchpress' report history: per job (given, or every catalogue job with
/// a run), its newest successful run or every successful run newest first
/// (benchpress' history holds successful runs only), as the run's metrics
/// with `run_id` and `timestamp` added. A job without runs is said on
/// stderr and skipped, as benchpress does.
pub(crate) fn historical_metrics(
    cat: &Catalogue,
    store: &Store,
    jobs: &[String],
    all: bool,
) -> anyhow::Result<Vec<(harness::store::RunRow, serde_json::Value)>> {
    let names: Vec<String> = if jobs.is_empty() {
        cat.iter().map(|j| j.name.clone()).collect()
    } else {
        cat.select(jobs)?
    };
    let mut out = Vec::new();
    for n in &names {
        let mut rows = store.select(&harness::store::RunFilter {
            jobs: vec![n.clone()],
            success_only: true,
            ..Default::default()
        })?;
        if rows.is_empty() {
            if !jobs.is_empty() {
                eprintln!("No historical results for \"{n}\", skipping");
            }
            continue;
        }
        rows.reverse();
        if !all {
            rows.truncate(1);
        }
        for r in rows {
            let mut v = r.metrics.clone();
            if let Some(m) = v.as_object_mut() {
                m.insert("run_id".into(), r.run_id.clone().into());
                m.insert("timestamp".into(), r.timestamp.into());
            }
            out.push((r, v));
        }
    }
    Ok(out)
}

/// `report score`: the jobs' scores over their newest `newest` successful
/// runs (None: all), by pool, and overall.
pub(crate) fn report_score(
    cat: &Catalogue,
    store: &Store,
    jobs: Vec<String>,
    newest: Option<usize>,
    json: bool,
) -> anyhow::Result<()> {
    let names: Vec<String> = if jobs.is_empty() {
        cat.iter()
            .filter(|j| j.baseline.is_some() && j.benchmark != "calibrate")
            .map(|j| j.name.clone())
            .collect()
    } else {
        jobs
    };
    let mut scores = Vec::new();
    let mut missing = Vec::new();
    for n in &names {
        let job = cat.get(n)?;
        let Some(b) = &job.baseline else {
            missing.push(format!(
                "{n}: the job defines no baseline, so it has no score"
            ));
            continue;
        };
        let mut runs = store.select(&harness::store::RunFilter {
            jobs: vec![n.clone()],
            ..Default::default()
        })?;
        runs.reverse();
        runs.retain(|r| r.success);
        if let Some(k) = newest {
            runs.truncate(k);
        }
        // Calibrate measures the instrument: its scores stay in their
        // own pool, which never counts in the DCPerf score.
        if job.benchmark == "calibrate" && b.pool.is_some() {
            anyhow::bail!(
                "job '{n}' ({}): a calibrate job's baseline cannot name a pool; its scores never count in a benchmark's",
                job.source.display()
            );
        }
        let pool = b.pool.as_deref().unwrap_or(&job.benchmark);
        match score::score_job(n, pool, &b.metric, b.value, &runs) {
            Some(s) => scores.push(s),
            None => missing.push(format!(
                "{n}: no successful run with metric '{}' recorded",
                b.metric
            )),
        }
    }
    let pools = score::pool(&scores, &["calibrate"]);
    let overall = score::overall(&pools);
    if json {
        println!(
            "{}",
            serde_json::json!({ "benchmarks": pools, "jobs": scores, "unscored": missing, "overall": overall })
        );
    } else {
        print!(
            "{}",
            present::scores(&scores, &pools, &missing, overall.as_ref())
        );
    }
    Ok(())
}

/// `report stdout`: each run's metrics as benchpress prints them: pretty
/// and key-sorted on a terminal, one line otherwise (serde_json's maps
/// keep keys sorted).
pub(crate) fn report_stdout(
    runs: &[(harness::store::RunRow, serde_json::Value)],
) -> anyhow::Result<()> {
    use std::io::{IsTerminal, Write};
    let tty = std::io::stdout().is_terminal();
    let mut out = std::io::stdout().lock();
    for (_, v) in runs {
        let text = if tty {
            serde_json::to_string_pretty(v)?
        } else {
            serde_json::to_string(v)?
        };
        if let Err(e) = writeln!(out, "{text}")
            && e.kind() != std::io::ErrorKind::BrokenPipe
        {
            return Err(e).context("cannot write the report");
        }
    }
    Ok(())
}

/// `report json_file`: each run's metrics in a file under
/// benchmark_metrics_<run_id>/, named as benchpress names it; prints the
/// paths.
pub(crate) fn report_json_files(
    output_dir: &std::path::Path,
    runs: Vec<(harness::store::RunRow, serde_json::Value)>,
) -> anyhow::Result<()> {
    for (row, v) in runs {
        // benchpress names the file `_metrics_..._iter_N` only when
        // the object has a `metrics` key, which a run's own metrics
        // do not: its history report is a `_system_specs_` file.
        let dir = output_dir.join(format!("benchmark_metrics_{}", row.run_id));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let name = row.job.replace(' ', "_");
        let file = if v.get("metrics").is_some() {
            dir.join(format!(
                "{name}_metrics_{}_iter_{}.json",
                row.timestamp, row.iteration
            ))
        } else {
            dir.join(format!("{name}_system_specs_{}.json", row.timestamp))
        };
        // `run` wrote the job's system specs under that name, which
        // benchpress' json_file would overwrite: they are kept and
        // the metrics go beside them.
        let holds_specs = std::fs::read(&file)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .is_some_and(|old| old.get("cpu_topology").is_some());
        let file = if holds_specs {
            let beside = dir.join(format!("{name}_history_metrics_{}.json", row.timestamp));
            eprintln!(
                "note: {} holds the run's system specs (benchpress would overwrite them); the metrics go to {}",
                file.display(),
                beside.display()
            );
            beside
        } else {
            file
        };
        let text = serde_json::to_string_pretty(&v)? + "\n";
        let mut f = atomic_write_file::AtomicWriteFile::open(&file)
            .with_context(|| format!("cannot write {}", file.display()))?;
        std::io::Write::write_all(&mut f, text.as_bytes())
            .and_then(|()| f.commit())
            .with_context(|| format!("cannot write {}", file.display()))?;
        println!("{}", file.display());
    }
    Ok(())
}
