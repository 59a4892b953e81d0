//! `rackbench results list|show|compare|push` over the results store.

use anyhow::Context;
use harness::{Registry, present, store::Store};
use std::path::PathBuf;

use crate::cli::{CompareArgs, ResultsCmd, store_path};
use crate::registry::registry;

/// `results list|show|compare|push` over the store.
pub(crate) fn results_cmd(
    reg: &Registry,
    db: &Option<PathBuf>,
    what: ResultsCmd,
) -> anyhow::Result<()> {
    let store = Store::open(&store_path(db))?;
    match what {
        ResultsCmd::List { limit, json } => {
            let rows = store.recent(limit)?;
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&present::runs_json(&rows, reg))?
                );
            } else {
                print!("{}", present::runs(&rows, reg));
            }
        }
        ResultsCmd::Show { run_id, text } => {
            let rows = store.by_run_id(&run_id)?;
            if rows.is_empty() {
                anyhow::bail!(
                    "no run with id '{run_id}' in {}; `rackbench results list` shows the recorded runs",
                    store.path().display()
                );
            }
            if text {
                show_text(reg, &rows)?;
            } else {
                println!("{}", serde_json::to_string_pretty(&rows)?);
            }
        }
        ResultsCmd::Compare(c) => compare_cmd(&store, *c)?,
        ResultsCmd::Push { to } => {
            let target = Store::open(&to)?;
            let n = store.push_to(&target)?;
            println!(
                "pushed {} runs, skipped {} already there",
                n.pushed, n.skipped
            );
        }
    }
    Ok(())
}

/// `results show RUN --text`: each row's upstream text from its record. A
/// row without one is named on stderr; it is an error when no row had one.
fn show_text(reg: &Registry, rows: &[harness::store::RunRow]) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let mut printed = 0;
    let several = rows.len() > 1;
    for row in rows {
        let what = format!("job {} (iteration {})", row.job, row.iteration);
        let Some(rec) = &row.record else {
            eprintln!(
                "{what}: no record stored (recorded before rackbench kept records, or the job failed before its workload finished)"
            );
            continue;
        };
        let Some(w) = reg.get(&row.benchmark) else {
            eprintln!(
                "{what}: benchmark '{}' is not in this rackbench",
                row.benchmark
            );
            continue;
        };
        if several {
            eprintln!("== {what} ==");
        }
        w.format(rec, &mut out)
            .with_context(|| format!("{what}: cannot print its {} text", row.benchmark))?;
        out.flush()?;
        printed += 1;
    }
    if printed == 0 {
        anyhow::bail!("run {} has no job with a stored record", rows[0].run_id);
    }
    Ok(())
}

/// `results compare`: selects both sides, compares them, prints.
fn compare_cmd(store: &Store, c: CompareArgs) -> anyhow::Result<()> {
    let (a, b, history) = compare_sides(store, &c)?;
    let cmp = harness::compare::compare(&a, &b, &history, &registry())
        .with_context(|| format!("cannot compare in {}", store.path().display()))?;
    let text = if c.json {
        serde_json::to_string(&cmp)? + "\n"
    } else {
        present::compare(&cmp)
    };
    // Written, not print!ed: a closed pipe (`| head`) ends the output
    // quietly instead of panicking.
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|_| out.flush())
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        return Err(e).context("cannot write the comparison");
    }
    Ok(())
}

/// One side's own selectors.
struct SideArgs<'a> {
    name: char,
    runs: Vec<String>,
    host: &'a Option<String>,
    since: &'a Option<String>,
    until: &'a Option<String>,
}

/// The two sides `c` selects, and the history their noise is judged on.
pub(crate) fn compare_sides(
    store: &Store,
    c: &CompareArgs,
) -> anyhow::Result<(
    harness::compare::SideRows,
    harness::compare::SideRows,
    Vec<harness::store::RunRow>,
)> {
    use harness::compare;
    use harness::store::RunFilter;
    let (a_runs, b_runs) = match (&c.run_a, &c.run_b) {
        (Some(a), Some(b)) => (vec![a.clone()], vec![b.clone()]),
        _ => (c.a_run.clone(), c.b_run.clone()),
    };
    let sides = [
        SideArgs {
            name: 'A',
            runs: a_runs,
            host: &c.a_host,
            since: &c.a_since,
            until: &c.a_until,
        },
        SideArgs {
            name: 'B',
            runs: b_runs,
            host: &c.b_host,
            since: &c.b_since,
            until: &c.b_until,
        },
    ];
    let mut selected = Vec::new();
    for side in &sides {
        let n = side.name.to_ascii_lowercase();
        if side.runs.is_empty()
            && side.host.is_none()
            && side.since.is_none()
            && side.until.is_none()
        {
            anyhow::bail!(
                "side {} selects no runs of its own: give RUN_A RUN_B, or --{n}-run, --{n}-host, --{n}-since or --{n}-until (`rackbench results compare --help` has examples)",
                side.name
            );
        }
        for id in &side.runs {
            if !store.has_run(id)? {
                anyhow::bail!(
                    "no run with id '{id}' in {}; `rackbench results list` shows the recorded runs",
                    store.path().display()
                );
            }
        }
        let when = |flag: &str, v: &Option<String>| {
            v.as_deref()
                .map(compare::parse_when)
                .transpose()
                .map_err(|e| anyhow::anyhow!("--{n}-{flag}: {e}"))
        };
        let host = side.host.as_ref().or(c.host.as_ref());
        let filter = RunFilter {
            run_ids: side.runs.clone(),
            jobs: c.job.clone(),
            hosts: host.into_iter().cloned().collect(),
            since: when("since", side.since)?,
            until: when("until", side.until)?,
            success_only: false,
        };
        let mut what = Vec::new();
        if !side.runs.is_empty() {
            what.push(format!(
                "run{} {}",
                if side.runs.len() > 1 { "s" } else { "" },
                side.runs.join(", ")
            ));
        }
        if !c.job.is_empty() {
            what.push(format!("job {}", c.job.join(", ")));
        }
        if let Some(h) = host {
            what.push(format!("host {h}"));
        }
        if let Some(d) = side.since {
            what.push(format!("since {d}"));
        }
        if let Some(d) = side.until {
            what.push(format!("until {d}"));
        }
        if let Some(n) = c.last {
            what.push(format!("newest {n} per job"));
        }
        let mut rows = store.select(&filter)?;
        if let Some(n) = c.last {
            rows = compare::newest_per_job(rows, n);
        }
        selected.push(compare::SideRows {
            selection: what.join(", "),
            rows,
        });
    }
    let b = selected.pop().context("side B")?;
    let a = selected.pop().context("side A")?;
    let jobs = compare::jobs_needing_history(&a.rows, &b.rows);
    let history = if jobs.is_empty() {
        Vec::new()
    } else {
        // Noise is judged on the sides' own hosts.
        let hosts: std::collections::BTreeSet<String> = a
            .rows
            .iter()
            .chain(&b.rows)
            .map(|r| r.hostname.clone())
            .collect();
        store.select(&RunFilter {
            jobs,
            hosts: hosts.into_iter().collect(),
            success_only: true,
            ..Default::default()
        })?
    };
    Ok((a, b, history))
}
