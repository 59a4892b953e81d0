//! `rackbench report html` and the page `serve` serves: the report page
//! over the selected stored runs, with the requested comparison.

use anyhow::Context;
use harness::store::Store;

use crate::cli::{CompareArgs, HtmlSelection};
use crate::registry::registry;
use crate::results_cmd::compare_sides;

/// `report html`: the page over the selected runs, written atomically.
pub(crate) fn write_html(
    store: &Store,
    out: &std::path::Path,
    sel: &HtmlSelection,
) -> anyhow::Result<()> {
    let page = html_page(store, sel, None)?;
    let mut f = atomic_write_file::AtomicWriteFile::open(out)
        .with_context(|| format!("cannot write {}", out.display()))?;
    std::io::Write::write_all(&mut f, page.as_bytes())
        .and_then(|()| f.commit())
        .with_context(|| format!("cannot write {}", out.display()))?;
    println!("{}", out.display());
    Ok(())
}

/// The report page over the store's runs that `sel` selects.
pub(crate) fn html_page(
    store: &Store,
    sel: &HtmlSelection,
    refresh: Option<u32>,
) -> anyhow::Result<String> {
    let when = |d: &Option<String>| {
        d.as_deref()
            .map(harness::compare::parse_when)
            .transpose()
            .map_err(|e| anyhow::anyhow!(e))
    };
    let filter = harness::store::RunFilter {
        run_ids: sel.run_ids.clone(),
        jobs: sel.job.clone(),
        hosts: sel.host.clone(),
        since: when(&sel.since)?,
        until: when(&sel.until)?,
        success_only: false,
    };
    let rows = store.select(&filter)?;
    let mut parts = Vec::new();
    if !sel.run_ids.is_empty() {
        parts.push(format!("runs {}", sel.run_ids.join(", ")));
    }
    if !sel.job.is_empty() {
        parts.push(format!("jobs {}", sel.job.join(", ")));
    }
    if !sel.host.is_empty() {
        parts.push(format!("hosts {}", sel.host.join(", ")));
    }
    if let Some(s) = &sel.since {
        parts.push(format!("since {s}"));
    }
    if let Some(u) = &sel.until {
        parts.push(format!("until {u}"));
    }
    let generated_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    Ok(harness::html::page(
        &rows,
        &harness::html::PageOptions {
            title: "rackbench report".into(),
            selection: format!(
                "{}; store {}",
                if parts.is_empty() {
                    "all runs".into()
                } else {
                    parts.join(", ")
                },
                store.path().display()
            ),
            refresh_secs: refresh,
            store_version: refresh.map(|_| store.version()).transpose()?,
            generated_at,
            requested: requested_comparison(store, sel)?,
        },
        &registry(),
    ))
}

/// The page's requested comparison, when `sel` asks for one: bad selectors
/// are errors; sides that cannot be compared are shown as such.
fn requested_comparison(
    store: &Store,
    sel: &HtmlSelection,
) -> anyhow::Result<Option<harness::html::RequestedComparison>> {
    let h = &sel.cmp;
    if !h.given() {
        return Ok(None);
    }
    let side_given = |run: &[String], sel: [&Option<String>; 3]| {
        !run.is_empty() || sel.iter().any(|o| o.is_some())
    };
    for (name, given) in [
        (
            'A',
            side_given(&h.a_run, [&h.a_host, &h.a_since, &h.a_until]),
        ),
        (
            'B',
            side_given(&h.b_run, [&h.b_host, &h.b_since, &h.b_until]),
        ),
    ] {
        if !given {
            let n = name.to_ascii_lowercase();
            anyhow::bail!(
                "the requested comparison's side {name} selects no runs of its own: give --{n}-run, --{n}-host, --{n}-since or --{n}-until"
            );
        }
    }
    let args = CompareArgs {
        run_a: None,
        run_b: None,
        a_run: h.a_run.clone(),
        b_run: h.b_run.clone(),
        a_host: h.a_host.clone(),
        b_host: h.b_host.clone(),
        a_since: h.a_since.clone(),
        a_until: h.a_until.clone(),
        b_since: h.b_since.clone(),
        b_until: h.b_until.clone(),
        job: sel.job.clone(),
        host: None,
        last: None,
        json: false,
    };
    let (a, b, history) = compare_sides(store, &args)?;
    let what = format!("A: {}; B: {}", a.selection, b.selection);
    let result =
        harness::compare::compare(&a, &b, &history, &registry()).map_err(|e| e.to_string());
    Ok(Some(harness::html::RequestedComparison { what, result }))
}
