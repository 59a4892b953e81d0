//! Text output of the protection benchmark's memory-hog scenarios, laid out
//! byte for byte like upstream resctl-bench.
//!
//! [`format_protection`] prints everything that follows the `hashd params:`
//! line (and its blank lines) of a protection entry: with `full`, one
//! section per scenario and the "Memory Hog Summary" with all tables; in
//! summary mode only the summary's IO latency lines, isolation table and
//! Result line. The output ends with the last `Result:` line (and its
//! error lines), without a trailing blank line.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::study::{
    IOLAT_LAT_PCTS, IOLAT_TIME_PCTS, MemHogRecord, MemHogResult, PCT_KEYS, cmp_pct_keys,
};
use crate::fmt::{custom_underline, format_duration, format_pct, format_percentile, format_size};

/// How a table cell is formatted.
#[derive(Clone, Copy)]
enum Kind {
    Pct,
    Size,
    /// Upstream's base-10 counts (`format_count`).
    Count,
}

/// Rows of the slice resource stat tables: label, field, kind.
const RSTAT_ROWS: [(&str, &str, Kind); 11] = [
    ("cpu%", "cpu_util", Kind::Pct),
    ("sys%", "sys_util", Kind::Pct),
    ("mem", "mem_bytes", Kind::Size),
    ("io%", "io_util", Kind::Pct),
    ("rbps", "io_rbps", Kind::Size),
    ("wbps", "io_wbps", Kind::Size),
    ("cpu-some%", "cpu_some", Kind::Pct),
    ("mem-some%", "mem_some", Kind::Pct),
    ("mem-full%", "mem_full", Kind::Pct),
    ("io-some%", "io_some", Kind::Pct),
    ("io-full%", "io_full", Kind::Pct),
];

/// Upstream 2.2's swap usage distribution, printed as the `swap` row.
const SWAP_FIELD: &str = "swap_bytes";

/// Columns of the IO latency tables, after the time percentiles.
const IOLAT_EXTRA_COLS: [&str; 3] = ["cum", "mean", "stdev"];

/// Keys of the percentile table columns: [`PCT_KEYS`], mean, stdev.
fn pcts_cols() -> impl Iterator<Item = &'static str> {
    PCT_KEYS.iter().copied().chain(["mean", "stdev"])
}

/// `{name:<10}  ` followed by the right-aligned column labels.
fn pcts_header(out: &mut String, name: &str) {
    pcts_header_w(out, name, LABEL_W);
}

/// The label column's width (upstream's `base_len`); `format -R` widens it
/// to the longest key the level shows ([`rstat_label_width`]).
const LABEL_W: usize = 10;

fn pcts_header_w(out: &mut String, name: &str, w: usize) {
    let labels: Vec<String> = pcts_cols()
        .map(|k| format!("{:>5}", format_percentile(k)))
        .collect();
    let _ = writeln!(out, "{name:<w$}  {}", labels.join(" "));
}

/// One distribution row, each cell followed by a space as upstream prints
/// it (the line ends with one). If the map is missing or every value is 0,
/// every cell is `-`.
fn pcts_line(out: &mut String, field: &str, map: Option<&BTreeMap<String, f64>>, kind: Kind) {
    pcts_line_w(out, field, map, kind, LABEL_W);
}

fn pcts_line_w(
    out: &mut String,
    field: &str,
    map: Option<&BTreeMap<String, f64>>,
    kind: Kind,
    w: usize,
) {
    let empty = map.is_none_or(|m| m.values().all(|v| *v == 0.0));
    let mut line = format!("{field:<w$}  ");
    for key in pcts_cols() {
        let cell = match map.and_then(|m| m.get(key)) {
            Some(v) if !empty => match kind {
                Kind::Pct => format_pct(*v),
                Kind::Size => format_size(*v),
                Kind::Count => crate::fmt::format_count(*v),
            },
            _ => "-".to_string(),
        };
        let _ = write!(line, "{cell:>5} ");
    }
    out.push_str(&line);
    out.push('\n');
}

/// The Info block, ending with a blank line.
fn format_info(out: &mut String, r: &MemHogResult) {
    let _ = writeln!(
        out,
        "Info: baseline_rps={:.2} baseline_lat={}:{} vrate={:.2}:{:.2}",
        r.base_rps,
        format_duration(r.base_lat),
        format_duration(r.base_lat_stdev),
        r.vrate,
        r.vrate_stdev
    );
    let _ = writeln!(
        out,
        "      io_usage={:.1} io_unused={:.1} hog_io_usage={:.1} hog_io_loss={:.1}",
        r.io_usage, r.io_unused, r.hog_io_usage, r.hog_io_loss
    );
    let _ = writeln!(
        out,
        "      hog_bytes={} hog_lost_bytes={}",
        format_size(r.hog_bytes as f64),
        format_size(r.hog_lost_bytes as f64)
    );
    out.push('\n');
}

/// `[read, write]` IO latency distributions (row → column → seconds).
pub type IoLat = [BTreeMap<String, BTreeMap<String, f64>>; 2];

fn has_iolat(iolat: &IoLat) -> bool {
    iolat.iter().any(|d| !d.is_empty())
}

/// Width of an IO latency column: key length + 1, at least 5.
fn iolat_width(key: &str) -> usize {
    (key.chars().count() + 1).max(5)
}

/// The latency rows to print: the standard ones, then any others present.
fn iolat_rows(dir: &BTreeMap<String, BTreeMap<String, f64>>) -> Vec<String> {
    let mut rows: Vec<String> = IOLAT_LAT_PCTS.iter().map(|k| k.to_string()).collect();
    let mut extra: Vec<&String> = dir
        .keys()
        .filter(|k| !IOLAT_LAT_PCTS.contains(&k.as_str()))
        .collect();
    extra.sort_by(|a, b| cmp_pct_keys(a, b));
    rows.extend(extra.into_iter().cloned());
    rows
}

/// One direction's IO latency table (header and rows, no blank line).
fn format_iolat_table(
    out: &mut String,
    title: &str,
    dir: &BTreeMap<String, BTreeMap<String, f64>>,
) {
    let cols: Vec<&str> = IOLAT_TIME_PCTS
        .iter()
        .copied()
        .chain(IOLAT_EXTRA_COLS)
        .collect();
    let mut line = format!("{title:6} ");
    for key in &cols {
        let _ = write!(
            line,
            " {:>w$}",
            format_percentile(key),
            w = iolat_width(key)
        );
    }
    out.push_str(&line);
    out.push('\n');
    for row in iolat_rows(dir) {
        let map = dir.get(&row);
        let mut line = format!("{:<7}", format_percentile(&row));
        for key in &cols {
            let cell = match map.and_then(|m| m.get(*key)) {
                Some(v) => format_duration(*v),
                None => "-".to_string(),
            };
            let _ = write!(line, " {cell:>w$}", w = iolat_width(key));
        }
        out.push_str(&line);
        out.push('\n');
    }
}

/// `IO Latency Distribution:` and both tables, each followed by a blank
/// line, or the not-measured line and a blank line.
fn format_iolat_tables(out: &mut String, iolat: &IoLat) {
    if !has_iolat(iolat) {
        out.push_str("IO Latency Distribution: not measured on this host\n\n");
        return;
    }
    out.push_str("IO Latency Distribution:\n\n");
    format_iolat_table(out, "READ", &iolat[0]);
    out.push('\n');
    format_iolat_table(out, "WRITE", &iolat[1]);
    out.push('\n');
}

/// `p50=mean:stdev/max p90=… p99=… max=…` of one direction.
fn iolat_summary(dir: &BTreeMap<String, BTreeMap<String, f64>>) -> String {
    let cell = |row: &str, col: &str| match dir.get(row).and_then(|m| m.get(col)) {
        Some(v) => format_duration(*v),
        None => "-".to_string(),
    };
    [("p50", "50"), ("p90", "90"), ("p99", "99"), ("max", "100")]
        .iter()
        .map(|(label, row)| {
            format!(
                "{label}={}:{}/{}",
                cell(row, "mean"),
                cell(row, "stdev"),
                cell(row, "100")
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The `IO Latency: R …` and `            W …` lines.
fn format_iolat_summary(out: &mut String, iolat: &IoLat) {
    if !has_iolat(iolat) {
        out.push_str("IO Latency: not measured\n");
        return;
    }
    let _ = writeln!(out, "IO Latency: R {}", iolat_summary(&iolat[0]));
    let _ = writeln!(out, "            W {}", iolat_summary(&iolat[1]));
}

/// Upstream's `StudyIoLatPcts::format_rw`: with `full`, `IO Latency
/// Distribution:` and both tables, then a blank line; then the `IO
/// Latency: R …`/`W …` summary lines.
pub fn format_iolat_rw(out: &mut String, iolat: &IoLat, full: bool) {
    if full {
        format_iolat_tables(out, iolat);
    }
    format_iolat_summary(out, iolat);
}

/// `Slice resource stat:` and the three slice tables, separated by blank
/// lines (no blank line after the last). With `rstat` > 0 (`format -R`),
/// each slice's other distributions follow its table: the `swap_bytes`
/// style fields in `NAME - other` (ours), the `mem_stat.`/`io_stat.`/
/// `vmstat.` ones in `NAME - memory.stat`/`io.stat`/`vmstat` (upstream's
/// tables, its keys in its order). `-R` shows upstream's shown keys, `-RR`
/// its hidden ones too (and keys upstream does not list, after them); the
/// label column widens to the longest key the level can show, as
/// upstream's. A slice without such fields says so.
fn format_rstat(out: &mut String, r: &MemHogResult, rstat: u8) {
    out.push_str("Slice resource stat:\n");
    for (name, stat) in [
        ("ROOT", &r.root_rstat),
        ("WORKLOAD", &r.work_rstat),
        ("SYSTEM", &r.sys_rstat),
    ] {
        out.push('\n');
        format_stat_table(out, name, stat, rstat);
    }
}

/// One resource stat table (upstream's `ResourceStat::format`): the
/// header `[NAME]`, the base rows (with upstream 2.2's `swap` row after
/// `mem` when the result has `swap_bytes`; 2.1's and ours have none) and,
/// with `rstat` > 0, the slice's extra tables. storage prints its `ALL`
/// and `FINAL` tables with it.
pub fn format_stat_table(
    out: &mut String,
    name: &str,
    stat: &BTreeMap<String, BTreeMap<String, f64>>,
    rstat: u8,
) {
    let w = rstat_label_width(rstat);
    pcts_header_w(out, &format!("[{name}]"), w);
    for (label, field, kind) in RSTAT_ROWS {
        pcts_line_w(out, label, stat.get(field), kind, w);
        if field == "mem_bytes"
            && let Some(swap) = stat.get(SWAP_FIELD)
        {
            pcts_line_w(out, "swap", Some(swap), Kind::Size, w);
        }
    }
    if rstat > 0 {
        format_rstat_extra(out, name, stat, rstat, w);
    }
}

/// Which `format -R` level shows a key: `Shown` from `-R`, `Hidden` from
/// `-RR` (upstream's `!` keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Shown,
    Hidden,
}
use Level::{Hidden, Shown};

// Upstream's keys of the memory.stat, io.stat and vmstat tables, in its
// order, with the level that shows each and whether it is a count (printed
// base 10) rather than bytes. Facts from upstream's resctl-bench
// (study/rstat.rs); whether a key is cumulative does not matter here, as
// the distributions are already computed.
/// One key of upstream's stat tables: its name, the level that shows it
/// and how its cells are printed.
type StatKey = (&'static str, Level, Kind);

const MEM_STAT_KEYS: &[StatKey] = &[
    ("anon", Shown, Kind::Size),
    ("file", Shown, Kind::Size),
    ("kernel_stack", Hidden, Kind::Size),
    ("pagetables", Hidden, Kind::Size),
    ("percpu", Hidden, Kind::Size),
    ("sock", Hidden, Kind::Size),
    ("shmem", Hidden, Kind::Size),
    ("file_mapped", Hidden, Kind::Size),
    ("file_dirty", Shown, Kind::Size),
    ("file_writeback", Shown, Kind::Size),
    ("anon_thp", Hidden, Kind::Size),
    ("file_thp", Hidden, Kind::Size),
    ("shmem_thp", Hidden, Kind::Size),
    ("inactive_anon", Shown, Kind::Size),
    ("active_anon", Shown, Kind::Size),
    ("inactive_file", Shown, Kind::Size),
    ("active_file", Shown, Kind::Size),
    ("unevictable", Hidden, Kind::Size),
    ("slab_reclaimable", Hidden, Kind::Size),
    ("slab_unreclaimable", Hidden, Kind::Size),
    ("slab", Hidden, Kind::Size),
    ("workingset_refault_anon", Shown, Kind::Size),
    ("workingset_refault_file", Shown, Kind::Size),
    ("workingset_activate_anon", Shown, Kind::Size),
    ("workingset_activate_file", Shown, Kind::Size),
    ("workingset_restore_anon", Shown, Kind::Size),
    ("workingset_restore_file", Shown, Kind::Size),
    ("workingset_nodereclaim", Shown, Kind::Size),
    ("pgfault", Shown, Kind::Size),
    ("pgmajfault", Shown, Kind::Size),
    ("pgrefill", Shown, Kind::Size),
    ("pgscan", Shown, Kind::Size),
    ("pgsteal", Shown, Kind::Size),
    ("pgactivate", Hidden, Kind::Size),
    ("pgdeactivate", Hidden, Kind::Size),
    ("pglazyfree", Hidden, Kind::Size),
    ("pglazyfreed", Hidden, Kind::Size),
    ("thp_fault_alloc", Hidden, Kind::Size),
    ("thp_collapse_alloc", Hidden, Kind::Size),
];

const IO_STAT_KEYS: &[StatKey] = &[
    ("rbytes", Shown, Kind::Size),
    ("rios", Shown, Kind::Count),
    ("wbytes", Shown, Kind::Size),
    ("wios", Shown, Kind::Count),
    ("dbytes", Shown, Kind::Size),
    ("dios", Shown, Kind::Count),
    ("cost.vrate", Shown, Kind::Size),
    ("cost.usage", Shown, Kind::Count),
    ("cost.wait", Shown, Kind::Count),
    ("cost.indebt", Shown, Kind::Count),
    ("cost.indelay", Shown, Kind::Count),
];

const VMSTAT_KEYS: &[StatKey] = &[
    ("nr_free_pages", Shown, Kind::Size),
    ("nr_zone_inactive_anon", Hidden, Kind::Size),
    ("nr_zone_active_anon", Hidden, Kind::Size),
    ("nr_zone_inactive_file", Hidden, Kind::Size),
    ("nr_zone_active_file", Hidden, Kind::Size),
    ("nr_zone_unevictable", Hidden, Kind::Size),
    ("nr_zone_write_pending", Hidden, Kind::Size),
    ("nr_mlock", Hidden, Kind::Size),
    ("nr_bounce", Hidden, Kind::Size),
    ("nr_zspages", Hidden, Kind::Size),
    ("nr_free_cma", Hidden, Kind::Size),
    ("numa_hit", Hidden, Kind::Size),
    ("numa_miss", Hidden, Kind::Size),
    ("numa_foreign", Hidden, Kind::Size),
    ("numa_interleave", Hidden, Kind::Size),
    ("numa_local", Hidden, Kind::Size),
    ("numa_other", Hidden, Kind::Size),
    ("nr_inactive_anon", Shown, Kind::Size),
    ("nr_active_anon", Shown, Kind::Size),
    ("nr_inactive_file", Shown, Kind::Size),
    ("nr_active_file", Shown, Kind::Size),
    ("nr_unevictable", Shown, Kind::Size),
    ("nr_slab_reclaimable", Shown, Kind::Size),
    ("nr_slab_unreclaimable", Shown, Kind::Size),
    ("nr_isolated_anon", Shown, Kind::Size),
    ("nr_isolated_file", Shown, Kind::Size),
    ("workingset_nodes", Shown, Kind::Size),
    ("workingset_refault_anon", Shown, Kind::Size),
    ("workingset_refault_file", Shown, Kind::Size),
    ("workingset_activate_anon", Shown, Kind::Size),
    ("workingset_activate_file", Shown, Kind::Size),
    ("workingset_restore_anon", Shown, Kind::Size),
    ("workingset_restore_file", Shown, Kind::Size),
    ("workingset_nodereclaim", Shown, Kind::Size),
    ("nr_anon_pages", Shown, Kind::Size),
    ("nr_mapped", Shown, Kind::Size),
    ("nr_file_pages", Shown, Kind::Size),
    ("nr_dirty", Shown, Kind::Size),
    ("nr_writeback", Shown, Kind::Size),
    ("nr_writeback_temp", Shown, Kind::Size),
    ("nr_shmem", Shown, Kind::Size),
    ("nr_shmem_hugepages", Hidden, Kind::Size),
    ("nr_shmem_pmdmapped", Hidden, Kind::Size),
    ("nr_file_hugepages", Hidden, Kind::Size),
    ("nr_file_pmdmapped", Hidden, Kind::Size),
    ("nr_anon_transparent_hugepages", Hidden, Kind::Size),
    ("nr_vmscan_write", Hidden, Kind::Size),
    ("nr_vmscan_immediate_reclaim", Hidden, Kind::Size),
    ("nr_dirtied", Shown, Kind::Size),
    ("nr_written", Shown, Kind::Size),
    ("nr_kernel_misc_reclaimable", Hidden, Kind::Size),
    ("nr_foll_pin_acquired", Hidden, Kind::Size),
    ("nr_foll_pin_released", Hidden, Kind::Size),
    ("nr_kernel_stack", Hidden, Kind::Size),
    ("nr_page_table_pages", Hidden, Kind::Size),
    ("nr_dirty_threshold", Hidden, Kind::Size),
    ("nr_dirty_background_threshold", Hidden, Kind::Size),
    ("pgpgin", Shown, Kind::Size),
    ("pgpgout", Shown, Kind::Size),
    ("pswpin", Shown, Kind::Size),
    ("pswpout", Shown, Kind::Size),
    ("pgalloc_dma", Hidden, Kind::Size),
    ("pgalloc_dma32", Hidden, Kind::Size),
    ("pgalloc_normal", Hidden, Kind::Size),
    ("pgalloc_movable", Hidden, Kind::Size),
    ("allocstall_dma", Hidden, Kind::Size),
    ("allocstall_dma32", Hidden, Kind::Size),
    ("allocstall_normal", Shown, Kind::Size),
    ("allocstall_movable", Shown, Kind::Size),
    ("pgskip_dma", Hidden, Kind::Size),
    ("pgskip_dma32", Hidden, Kind::Size),
    ("pgskip_normal", Hidden, Kind::Size),
    ("pgskip_movable", Hidden, Kind::Size),
    ("pgfree", Hidden, Kind::Size),
    ("pgactivate", Hidden, Kind::Size),
    ("pgdeactivate", Hidden, Kind::Size),
    ("pglazyfree", Hidden, Kind::Size),
    ("pgfault", Shown, Kind::Size),
    ("pgmajfault", Shown, Kind::Size),
    ("pglazyfreed", Hidden, Kind::Size),
    ("pgrefill", Hidden, Kind::Size),
    ("pgreuse", Hidden, Kind::Size),
    ("pgsteal_kswapd", Shown, Kind::Size),
    ("pgsteal_direct", Shown, Kind::Size),
    ("pgscan_kswapd", Shown, Kind::Size),
    ("pgscan_direct", Shown, Kind::Size),
    ("pgscan_direct_throttle", Shown, Kind::Size),
    ("pgscan_anon", Shown, Kind::Size),
    ("pgscan_file", Shown, Kind::Size),
    ("pgsteal_anon", Shown, Kind::Size),
    ("pgsteal_file", Shown, Kind::Size),
    ("zone_reclaim_failed", Shown, Kind::Count),
    ("pginodesteal", Shown, Kind::Count),
    ("slabs_scanned", Hidden, Kind::Count),
    ("kswapd_inodesteal", Shown, Kind::Count),
    ("kswapd_low_wmark_hit_quickly", Hidden, Kind::Count),
    ("kswapd_high_wmark_hit_quickly", Hidden, Kind::Count),
    ("pageoutrun", Hidden, Kind::Size),
    ("pgrotated", Hidden, Kind::Size),
    ("drop_pagecache", Hidden, Kind::Count),
    ("drop_slab", Hidden, Kind::Count),
    ("oom_kill", Hidden, Kind::Count),
    ("numa_pte_updates", Hidden, Kind::Size),
    ("numa_huge_pte_updates", Hidden, Kind::Size),
    ("numa_hint_faults", Hidden, Kind::Size),
    ("numa_hint_faults_local", Hidden, Kind::Size),
    ("numa_pages_migrated", Hidden, Kind::Size),
    ("pgmigrate_success", Hidden, Kind::Size),
    ("pgmigrate_fail", Hidden, Kind::Size),
    ("thp_migration_success", Hidden, Kind::Size),
    ("thp_migration_fail", Hidden, Kind::Size),
    ("thp_migration_split", Hidden, Kind::Size),
    ("compact_migrate_scanned", Hidden, Kind::Size),
    ("compact_free_scanned", Hidden, Kind::Size),
    ("compact_isolated", Hidden, Kind::Size),
    ("compact_stall", Hidden, Kind::Size),
    ("compact_fail", Hidden, Kind::Size),
    ("compact_success", Hidden, Kind::Size),
    ("compact_daemon_wake", Hidden, Kind::Size),
    ("compact_daemon_migrate_scanned", Hidden, Kind::Size),
    ("compact_daemon_free_scanned", Hidden, Kind::Size),
    ("htlb_buddy_alloc_success", Hidden, Kind::Size),
    ("htlb_buddy_alloc_fail", Hidden, Kind::Size),
    ("unevictable_pgs_culled", Hidden, Kind::Size),
    ("unevictable_pgs_scanned", Hidden, Kind::Size),
    ("unevictable_pgs_rescued", Hidden, Kind::Size),
    ("unevictable_pgs_mlocked", Hidden, Kind::Size),
    ("unevictable_pgs_munlocked", Hidden, Kind::Size),
    ("unevictable_pgs_cleared", Hidden, Kind::Size),
    ("unevictable_pgs_stranded", Hidden, Kind::Size),
    ("thp_fault_alloc", Hidden, Kind::Size),
    ("thp_fault_fallback", Hidden, Kind::Size),
    ("thp_fault_fallback_charge", Hidden, Kind::Size),
    ("thp_collapse_alloc", Hidden, Kind::Size),
    ("thp_collapse_alloc_failed", Hidden, Kind::Size),
    ("thp_file_alloc", Hidden, Kind::Size),
    ("thp_file_fallback", Hidden, Kind::Size),
    ("thp_file_fallback_charge", Hidden, Kind::Size),
    ("thp_file_mapped", Hidden, Kind::Size),
    ("thp_split_page", Hidden, Kind::Size),
    ("thp_split_page_failed", Hidden, Kind::Size),
    ("thp_deferred_split_page", Hidden, Kind::Size),
    ("thp_split_pmd", Hidden, Kind::Size),
    ("thp_split_pud", Hidden, Kind::Size),
    ("thp_zero_page_alloc", Hidden, Kind::Size),
    ("thp_zero_page_alloc_failed", Hidden, Kind::Size),
    ("thp_swpout", Hidden, Kind::Size),
    ("thp_swpout_fallback", Hidden, Kind::Size),
    ("balloon_inflate", Hidden, Kind::Count),
    ("balloon_deflate", Hidden, Kind::Count),
    ("balloon_migrate", Hidden, Kind::Count),
    ("swap_ra", Hidden, Kind::Size),
    ("swap_ra_hit", Hidden, Kind::Size),
    ("nr_unstable", Hidden, Kind::Size),
];

/// The label width for a `format -R` level: upstream's base 10, widened to
/// the longest key of the three tables that the level shows.
fn rstat_label_width(rstat: u8) -> usize {
    let longest = |hidden: bool| {
        [MEM_STAT_KEYS, IO_STAT_KEYS, VMSTAT_KEYS]
            .iter()
            .flat_map(|t| t.iter())
            .filter(|(_, l, _)| hidden || *l == Shown)
            .map(|(k, _, _)| k.len())
            .max()
            .unwrap_or(0)
    };
    match rstat {
        0 => LABEL_W,
        1 => LABEL_W.max(longest(false)),
        _ => LABEL_W.max(longest(true)),
    }
}

/// The extra tables of one slice for `format -R`.
fn format_rstat_extra(
    out: &mut String,
    name: &str,
    stat: &BTreeMap<String, BTreeMap<String, f64>>,
    rstat: u8,
    w: usize,
) {
    let base: Vec<&str> = RSTAT_ROWS
        .iter()
        .map(|(_, field, _)| *field)
        .chain([SWAP_FIELD])
        .collect();
    let groups: [(&str, &str, &[StatKey]); 4] = [
        ("other", "", &[]),
        ("memory.stat", "mem_stat.", MEM_STAT_KEYS),
        ("io.stat", "io_stat.", IO_STAT_KEYS),
        ("vmstat", "vmstat.", VMSTAT_KEYS),
    ];
    let prefixed = |k: &str| {
        groups
            .iter()
            .any(|(_, p, _)| !p.is_empty() && k.starts_with(*p))
    };
    let mut any = false;
    for (title, prefix, keys) in groups {
        let present: BTreeMap<&str, &BTreeMap<String, f64>> = stat
            .iter()
            .filter(|(k, _)| !base.contains(&k.as_str()))
            .filter(|(k, _)| {
                if prefix.is_empty() {
                    !prefixed(k.as_str())
                } else {
                    k.starts_with(prefix)
                }
            })
            .map(|(k, v)| (&k[prefix.len()..], v))
            .collect();
        if present.is_empty() {
            continue;
        }
        any = true;
        // Upstream's keys in its order, then (with -RR, or in our own
        // `other` table) the ones it does not list.
        let mut rows: Vec<(&str, &BTreeMap<String, f64>, Kind)> = keys
            .iter()
            .filter(|(_, l, _)| rstat >= 2 || *l == Shown)
            .filter_map(|(k, _, kind)| present.get(k).map(|m| (*k, *m, *kind)))
            .collect();
        if rstat >= 2 || prefix.is_empty() {
            rows.extend(
                present
                    .iter()
                    .filter(|(k, _)| !keys.iter().any(|(u, _, _)| u == *k))
                    .map(|(k, m)| (*k, *m, Kind::Size)),
            );
        }
        out.push('\n');
        pcts_header_w(out, &format!("[{name} - {title}]"), w);
        for (label, map, kind) in rows {
            pcts_line_w(out, label, Some(map), kind, w);
        }
    }
    if !any {
        let _ = writeln!(
            out,
            "\n[{name}] - no memory.stat, io.stat or vmstat distributions in this result"
        );
    }
}

fn get(map: &BTreeMap<String, f64>, key: &str) -> f64 {
    map.get(key).copied().unwrap_or(0.0)
}

/// The missing-report ratio.
fn missing_ratio(r: &MemHogResult) -> f64 {
    let (got, missed) = r.nr_reports;
    let total = got as f64 + missed as f64;
    if total > 0.0 {
        missed as f64 / total
    } else {
        0.0
    }
}

/// A blank line, the isolation table, a blank line, the Result line and the
/// failure messages.
fn format_isolation(out: &mut String, r: &MemHogResult) {
    out.push_str("\nIsolation and Request Latency Impact Distributions:\n\n");
    pcts_header(out, "");
    pcts_line(out, "isol%", Some(&r.isol), Kind::Pct);
    pcts_line(out, "lat-imp%", Some(&r.lat_imp), Kind::Pct);
    out.push('\n');
    let fail = if r.fail_ratio > 0.0 {
        format!("FAIL={}% ", format_pct(r.fail_ratio))
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "Result: {fail}isol={}:{}% lat_imp={}%:{} work_csv={}% missing={}%",
        format_pct(get(&r.isol, "mean")),
        format_pct(get(&r.isol, "stdev")),
        format_pct(get(&r.lat_imp, "mean")),
        format_pct(get(&r.lat_imp, "stdev")),
        format_pct(r.work_csv),
        format_pct(missing_ratio(r)),
    );
    for msg in &r.fail_msgs {
        let _ = writeln!(out, "        [error] {msg}");
    }
}

/// Prints one result.
///
/// With `full`: the Info block, the IO latency tables, the `IO Latency:`
/// lines, the slice resource stat tables, the isolation table and the
/// Result line. Without: only the `IO Latency:` lines, the isolation table
/// and the Result line. The text starts without a blank line and ends with
/// the Result line (or its error lines).
pub fn format_result(out: &mut String, r: &MemHogResult, full: bool) {
    format_result_rstat(out, r, full, 0);
}

/// [`format_result`] with `format -R...`'s extra resource stat tables.
pub fn format_result_rstat(out: &mut String, r: &MemHogResult, full: bool, rstat: u8) {
    if full {
        format_info(out, r);
        format_iolat_tables(out, &r.iolat);
    }
    format_iolat_summary(out, &r.iolat);
    if full {
        out.push('\n');
        format_rstat(out, r, rstat);
    }
    format_isolation(out, r);
}

/// `Params: loops={} load={} speed={}` with the load printed as Rust's `{}`
/// prints an f64 (`1`, `0.8`).
pub fn format_scenario_params(out: &mut String, rec: &MemHogRecord) {
    let _ = writeln!(
        out,
        "Params: loops={} load={} speed={}",
        rec.loops, rec.load, rec.speed
    );
}

/// A `mem-hog-tune` scenario, as its lines need it (upstream's "Memory
/// Hog Tuning" section).
#[derive(Debug, Clone, PartialEq)]
pub struct TuneView {
    pub load: f64,
    pub speed: String,
    pub size_min: u64,
    pub size_max: u64,
    pub intvs: u32,
    pub isol_pct: String,
    pub isol_thr: f64,
    /// The footprint found, if any.
    pub final_size: Option<u64>,
    /// Every probe and its isolation (ours; none in upstream's records).
    pub probes: Vec<(u64, Option<f64>)>,
    /// Upstream's hold after the hog starts swapping (its fixed 200 s),
    /// printed after the threshold as upstream does; `None` for a run
    /// that had no such hold (rackbench's probes).
    pub hold: Option<f64>,
}

/// Prints the scenarios and their combined summary.
///
/// With `full`, for each `mem-hog` scenario: `Scenario {i}/{n} - Memory
/// Hog` underlined with `=`, the Params line, one `Hog ends: …` line per
/// run that recorded why its hog ended (not in upstream), a blank line,
/// the full result and a blank line. Each `mem-hog-tune` scenario (given
/// its [`TuneView`]) is printed with or without `full`, as upstream:
/// `Scenario {i}/{n} - Memory Hog Tuning`, its two Params lines, a blank
/// line, the final probe's result (or upstream's line saying there is
/// none), the size line and our `Probes` line. Then, when there is a
/// combined result (upstream's `combined_mem_hog`, from the `mem-hog`
/// scenarios only), `Memory Hog Summary` underlined and the combined
/// result, full or short.
pub fn format_protection_rstat(
    out: &mut String,
    scenarios: &[(MemHogRecord, MemHogResult, Option<TuneView>)],
    combined: Option<&MemHogResult>,
    full: bool,
    rstat: u8,
    prefix: &str,
) {
    // Upstream underlines with `-` inside another bench's text (a prefix
    // such as iocost-qos' `RUN 01 - Protection `), with `=` alone.
    let line = if prefix.is_empty() { '=' } else { '-' };
    let n = scenarios.len();
    for (i, (rec, res, tune)) in scenarios.iter().enumerate() {
        match tune {
            None if full => {
                out.push_str(&custom_underline(
                    &format!("{prefix}Scenario {}/{} - Memory Hog", i + 1, n),
                    line,
                ));
                out.push('\n');
                format_scenario_params(out, rec);
                for run in rec.runs.iter().filter(|r| !r.end.is_empty()) {
                    let _ = writeln!(out, "Hog ends: {}", run.end);
                }
                out.push('\n');
                format_result_rstat(out, res, true, rstat);
                out.push('\n');
            }
            None => {}
            Some(t) => {
                out.push_str(&custom_underline(
                    &format!("{prefix}Scenario {}/{} - Memory Hog Tuning", i + 1, n),
                    line,
                ));
                out.push('\n');
                format_tune(out, rec, res, t, full, rstat);
                out.push('\n');
            }
        }
    }
    if let Some(c) = combined {
        out.push_str(&custom_underline(
            &format!("{prefix}Memory Hog Summary"),
            line,
        ));
        out.push('\n');
        format_result_rstat(out, c, full, rstat);
    }
}

/// One mem-hog-tune scenario after its title: upstream's lines, and the
/// probes (ours). Upstream's second Params line ends `for DURATION`, the
/// hold after the hog starts swapping; rackbench's probes last as long as
/// the hog runs (see `doc protection`), so there is no such figure.
fn format_tune(
    out: &mut String,
    rec: &MemHogRecord,
    res: &MemHogResult,
    t: &TuneView,
    full: bool,
    rstat: u8,
) {
    let size = |b: u64| crate::fmt::format_size(b as f64);
    let _ = writeln!(
        out,
        "Params: load={} speed={} size={}-{} intvs={}",
        t.load,
        t.speed,
        size(t.size_min),
        size(t.size_max),
        t.intvs
    );
    let hold = t
        .hold
        .map(|h| format!(" for {}", crate::fmt::format_duration(h)))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "        isol-{} >= {}%{hold}",
        t.isol_pct,
        crate::fmt::format_pct(t.isol_thr)
    );
    out.push('\n');
    if rec.runs.is_empty() {
        out.push_str("Result: A successful full mem-hog run was not recorded\n");
    } else {
        format_result_rstat(out, res, full, rstat);
    }
    match t.final_size {
        Some(sz) => {
            let _ = writeln!(
                out,
                "        hashd memory size {}/{} can be protected at isol-{} >= {}%",
                size(sz),
                size(t.size_max),
                t.isol_pct,
                crate::fmt::format_pct(t.isol_thr)
            );
        }
        None => {
            let _ = writeln!(
                out,
                "        Failed to find size to keep isol-{} above {}% in [{}, {}]",
                t.isol_pct,
                crate::fmt::format_pct(t.isol_thr),
                size(t.size_min),
                size(t.size_max)
            );
        }
    }
    if !t.probes.is_empty() {
        let probes: Vec<String> = t
            .probes
            .iter()
            .map(|(sz, isol)| match isol {
                Some(v) => format!("{}:{:.2}%", size(*sz), v * 100.0),
                None => format!("{}:n/a", size(*sz)),
            })
            .collect();
        let _ = writeln!(
            out,
            "Probes (ours, size:isol-{}): {}",
            t.isol_pct,
            probes.join(" ")
        );
    }
}

/// [`format_protection_rstat`] for `mem-hog` scenarios only, without the
/// extra stat tables.
pub fn format_protection(
    out: &mut String,
    scenarios: &[(MemHogRecord, MemHogResult)],
    combined: &MemHogResult,
    full: bool,
) {
    let s: Vec<_> = scenarios
        .iter()
        .map(|(a, b)| (a.clone(), b.clone(), None))
        .collect();
    format_protection_rstat(out, &s, Some(combined), full, 0, "");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::protection::study::{MemHogRun, pct_map};
    use crate::fmt::{parse_duration, parse_size};

    const SEPARATOR_LEN: usize = 90;

    /// Reads a conformance file (the calling test has checked it is there).
    fn conformance(name: &str) -> String {
        let path = testenv::conformance_root()
            .unwrap_or_default()
            .join("resctl-bench")
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "conformance file {} is required by this test: {e}",
                path.display()
            )
        })
    }

    fn is_separator(l: &str) -> bool {
        l.len() == SEPARATOR_LEN && l.chars().all(|c| c == '=')
    }

    /// For each protection entry, the lines after `hashd params:` and its
    /// blank lines, up to the entry's last non-blank line.
    fn protection_tails(text: &str) -> Vec<Vec<&str>> {
        let lines: Vec<&str> = text.lines().collect();
        let mut entries: Vec<Vec<&str>> = vec![];
        let mut cur = vec![];
        for l in lines {
            if is_separator(l) {
                entries.push(std::mem::take(&mut cur));
            } else {
                cur.push(l);
            }
        }
        entries.push(cur);
        entries
            .into_iter()
            .filter(|e| e.iter().any(|l| l.starts_with("[protection result]")))
            .map(|e| {
                let start = e
                    .iter()
                    .position(|l| l.starts_with("hashd params:"))
                    .expect("hashd params line");
                let mut tail: Vec<&str> = e[start + 1..]
                    .iter()
                    .copied()
                    .skip_while(|l| l.is_empty())
                    .collect();
                while tail.last().is_some_and(|l| l.is_empty()) {
                    tail.pop();
                }
                tail
            })
            .collect()
    }

    fn joined(lines: &[&str]) -> String {
        let mut s = lines.join("\n");
        s.push('\n');
        s
    }

    fn pct_cell(s: &str) -> Option<f64> {
        (s != "-").then(|| s.parse::<f64>().expect("pct cell") / 100.0)
    }

    /// format_size labels 2^40 "P" and 2^50 "E"; parse_size does not.
    fn size_cell(s: &str) -> Option<f64> {
        if s == "-" {
            return None;
        }
        let fixed = if let Some(n) = s.strip_suffix('P') {
            format!("{n}T")
        } else if let Some(n) = s.strip_suffix('E') {
            format!("{n}P")
        } else {
            s.to_string()
        };
        Some(parse_size(&fixed).expect("size cell") as f64)
    }

    fn dur_cell(s: &str) -> f64 {
        parse_duration(s).expect("duration cell")
    }

    fn label_key(label: &str) -> String {
        match label {
            "min" => "00".to_string(),
            "max" => "100".to_string(),
            l => l.strip_prefix('p').unwrap_or(l).to_string(),
        }
    }

    fn kv<'a>(line: &'a str, key: &str) -> &'a str {
        line.split_whitespace()
            .find_map(|t| t.strip_prefix(key).and_then(|t| t.strip_prefix('=')))
            .unwrap_or_else(|| panic!("{key} in {line:?}"))
    }

    fn pair(s: &str) -> (&str, &str) {
        s.split_once(':').expect("a:b")
    }

    /// Rebuilds a result from its printed form (full or short).
    fn parse_result(lines: &[&str]) -> MemHogResult {
        let mut r = MemHogResult::default();
        let mut i = 0;
        let mut saw_tables = false;
        while i < lines.len() {
            let l = lines[i];
            if l.starts_with("Info:") {
                r.base_rps = kv(l, "baseline_rps").parse().unwrap();
                let (a, b) = pair(kv(l, "baseline_lat"));
                (r.base_lat, r.base_lat_stdev) = (dur_cell(a), dur_cell(b));
                let (a, b) = pair(kv(l, "vrate"));
                (r.vrate, r.vrate_stdev) = (a.parse().unwrap(), b.parse().unwrap());
            } else if l.trim_start().starts_with("io_usage=") {
                r.io_usage = kv(l, "io_usage").parse().unwrap();
                r.io_unused = kv(l, "io_unused").parse().unwrap();
                r.hog_io_usage = kv(l, "hog_io_usage").parse().unwrap();
                r.hog_io_loss = kv(l, "hog_io_loss").parse().unwrap();
            } else if l.trim_start().starts_with("hog_bytes=") {
                r.hog_bytes = size_cell(kv(l, "hog_bytes")).unwrap() as u64;
                r.hog_lost_bytes = size_cell(kv(l, "hog_lost_bytes")).unwrap() as u64;
            } else if l.starts_with("READ ") || l.starts_with("WRITE ") {
                saw_tables = true;
                let dir = usize::from(l.starts_with("WRITE"));
                let cols: Vec<String> = l.split_whitespace().skip(1).map(label_key).collect();
                i += 1;
                while i < lines.len() && !lines[i].is_empty() {
                    let mut cells = lines[i].split_whitespace();
                    let row = label_key(cells.next().unwrap());
                    let map = cols
                        .iter()
                        .zip(cells)
                        .map(|(c, v)| (c.clone(), dur_cell(v)))
                        .collect();
                    r.iolat[dir].insert(row, map);
                    i += 1;
                }
                continue;
            } else if l.starts_with("IO Latency: R ") || l.starts_with("            W ") {
                if !saw_tables {
                    let dir = usize::from(l.trim_start().starts_with("W "));
                    for t in l.split_whitespace().filter(|t| t.contains('=')) {
                        let (label, v) = t.split_once('=').unwrap();
                        let (ms, max) = v.split_once('/').unwrap();
                        let (mean, stdev) = pair(ms);
                        let row = r.iolat[dir].entry(label_key(label)).or_default();
                        row.insert("mean".into(), dur_cell(mean));
                        row.insert("stdev".into(), dur_cell(stdev));
                        row.insert("100".into(), dur_cell(max));
                    }
                }
            } else if l.starts_with('[') || l.starts_with("       ") {
                let slice = l.split_whitespace().next().unwrap();
                i += 1;
                while i < lines.len() && !lines[i].is_empty() {
                    let mut cells = lines[i].split_whitespace();
                    let label = cells.next().unwrap();
                    let cells: Vec<&str> = cells.collect();
                    let (field, kind) = match label {
                        "isol%" => ("isol", Kind::Pct),
                        "lat-imp%" => ("lat_imp", Kind::Pct),
                        _ => RSTAT_ROWS
                            .iter()
                            .find(|(l, _, _)| *l == label)
                            .map(|(_, f, k)| (*f, *k))
                            .unwrap(),
                    };
                    let values: Option<BTreeMap<String, f64>> = pcts_cols()
                        .zip(&cells)
                        .map(|(k, c)| {
                            let v = match kind {
                                Kind::Pct => pct_cell(c),
                                Kind::Size | Kind::Count => size_cell(c),
                            };
                            v.map(|v| (k.to_string(), v))
                        })
                        .collect();
                    if let Some(values) = values {
                        match (slice, field) {
                            (_, "isol") => r.isol = values,
                            (_, "lat_imp") => r.lat_imp = values,
                            ("[ROOT]", f) => _ = r.root_rstat.insert(f.into(), values),
                            ("[WORKLOAD]", f) => _ = r.work_rstat.insert(f.into(), values),
                            ("[SYSTEM]", f) => _ = r.sys_rstat.insert(f.into(), values),
                            _ => panic!("unexpected table {slice}"),
                        }
                    }
                    i += 1;
                }
                continue;
            } else if l.starts_with("Result:") {
                r.work_csv = pct_cell(kv(l, "work_csv").trim_end_matches('%')).unwrap();
                let missing = pct_cell(kv(l, "missing").trim_end_matches('%')).unwrap();
                let missed = (missing * 10000.0).round() as u64;
                r.nr_reports = (10000 - missed, missed);
            }
            i += 1;
        }
        r
    }

    /// Splits a tail into (title, body lines) sections.
    fn sections<'a>(tail: &[&'a str]) -> Vec<(&'a str, Vec<&'a str>)> {
        let mut out: Vec<(&str, Vec<&str>)> = vec![];
        let mut i = 0;
        while i < tail.len() {
            let is_title = tail.get(i + 1).is_some_and(|u| {
                !u.is_empty() && u.chars().all(|c| c == '=') && u.len() == tail[i].len()
            });
            if is_title {
                out.push((tail[i], vec![]));
                i += 3; // title, underline, blank
                continue;
            }
            out.last_mut().expect("section title").1.push(tail[i]);
            i += 1;
        }
        for (_, body) in out.iter_mut() {
            while body.last().is_some_and(|l| l.is_empty()) {
                body.pop();
            }
        }
        out
    }

    type Parsed = (Vec<(MemHogRecord, MemHogResult)>, MemHogResult);

    fn parse_tail(tail: &[&str]) -> Parsed {
        let mut scenarios = vec![];
        let mut combined = None;
        for (title, body) in sections(tail) {
            if title == "Memory Hog Summary" {
                combined = Some(parse_result(&body));
            } else {
                let params = body[0];
                assert!(params.starts_with("Params:"), "{params}");
                let rec = MemHogRecord {
                    loops: kv(params, "loops").parse().unwrap(),
                    load: kv(params, "load").parse().unwrap(),
                    speed: kv(params, "speed").to_string(),
                    ..Default::default()
                };
                scenarios.push((rec, parse_result(&body[2..])));
            }
        }
        (scenarios, combined.expect("summary section"))
    }

    /// `got` against upstream's 2021 example text, whose lines had their
    /// trailing spaces trimmed (upstream prints a space after every cell
    /// of a distribution row, and so does rackbench; the byte for byte
    /// comparison with upstream 2.2.5's own output, trailing spaces and
    /// the 2.2 `swap` row included, is in tests/resctl_upstream.rs). The
    /// 2021 results have no swap distribution, so no `swap` row.
    fn assert_same_text(got: &str, want: &str) {
        let got: String = got.lines().map(|l| format!("{}\n", l.trim_end())).collect();
        for (n, (g, w)) in got.lines().zip(want.lines()).enumerate() {
            assert_eq!(g, w, "line {} differs", n + 1);
        }
        assert_eq!(got, want);
    }

    #[test]
    fn conformance_full_entries_byte_exact() {
        testenv::conformance_or_return!("resctl-bench");
        let text = conformance("prot-iocost-off-on-format.txt");
        let tails = protection_tails(&text);
        assert_eq!(tails.len(), 2, "iocost-off and iocost-on entries");
        for tail in &tails {
            assert!(tail.len() > 250, "a whole entry: {} lines", tail.len());
            let (scenarios, combined) = parse_tail(tail);
            assert_eq!(scenarios.len(), 2);
            let mut out = String::new();
            format_protection(&mut out, &scenarios, &combined, true);
            assert_same_text(&out, &joined(tail));
        }
    }

    #[test]
    fn conformance_summary_from_full_tables_byte_exact() {
        testenv::conformance_or_return!("resctl-bench");
        let full = conformance("prot-iocost-off-on-format.txt");
        let summary = conformance("prot-iocost-off-on-summary.txt");
        let full_tails = protection_tails(&full);
        let summary_tails = protection_tails(&summary);
        assert_eq!(summary_tails.len(), 2);
        for (ft, st) in full_tails.iter().zip(&summary_tails) {
            let (scenarios, combined) = parse_tail(ft);
            let mut out = String::new();
            format_protection(&mut out, &scenarios, &combined, false);
            assert_same_text(&out, &joined(st));
        }
    }

    fn map(values: [f64; 13]) -> BTreeMap<String, f64> {
        pcts_cols()
            .zip(values)
            .map(|(k, v)| (k.to_string(), v))
            .collect()
    }

    fn iolat_row(mean: f64, stdev: f64, max: f64) -> BTreeMap<String, f64> {
        [("mean", mean), ("stdev", stdev), ("100", max)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect()
    }

    /// The iocost-off "Memory Hog Summary" of the summary file, built by
    /// hand.
    fn iocost_off_summary() -> MemHogResult {
        let (u, m) = (1e-6, 1e-3);
        let mut r = MemHogResult {
            isol: map([
                0.0, 0.0049, 0.0165, 0.0224, 0.1312, 0.5090, 0.7252, 0.8212, 0.8856, 1.0, 1.0,
                0.4550, 0.3072,
            ]),
            lat_imp: map([
                0.0, 0.0, 0.0, 0.0, 0.0469, 0.1700, 0.4054, 0.7506, 1.219, 3.803, 8.825, 0.3942,
                0.8153,
            ]),
            work_csv: 1.0,
            nr_reports: (9974, 26),
            nr_runs: 4,
            ..Default::default()
        };
        for (row, v) in [
            ("50", iolat_row(885.0 * u, 3.7 * m, 49.5 * m)),
            ("90", iolat_row(4.7 * m, 12.7 * m, 150.0 * m)),
            ("99", iolat_row(13.1 * m, 25.1 * m, 350.0 * m)),
            ("100", iolat_row(30.4 * m, 65.4 * m, 750.0 * m)),
        ] {
            r.iolat[0].insert(row.to_string(), v);
        }
        for (row, v) in [
            ("50", iolat_row(5.0 * m, 16.3 * m, 99.5 * m)),
            ("90", iolat_row(17.6 * m, 28.3 * m, 250.0 * m)),
            ("99", iolat_row(29.0 * m, 38.8 * m, 450.0 * m)),
            ("100", iolat_row(48.9 * m, 87.0 * m, 850.0 * m)),
        ] {
            r.iolat[1].insert(row.to_string(), v);
        }
        r
    }

    #[test]
    fn conformance_hand_built_iocost_off_summary() {
        testenv::conformance_or_return!("resctl-bench");
        let summary = conformance("prot-iocost-off-on-summary.txt");
        let tail = &protection_tails(&summary)[0];
        let mut out = String::new();
        format_protection(&mut out, &[], &iocost_off_summary(), false);
        assert_same_text(&out, &joined(tail));
        // format_result alone is the section without its title.
        let mut short = String::new();
        format_result(&mut short, &iocost_off_summary(), false);
        assert_same_text(&short, &joined(&tail[3..]));
    }

    #[test]
    fn table_layouts() {
        let mut out = String::new();
        pcts_header(&mut out, "[ROOT]");
        pcts_header(&mut out, "");
        assert_eq!(
            out,
            "[ROOT]        min   p01   p05   p10   p25   p50   p75   p90   p95   p99   max  mean stdev\n\
             \x20             min   p01   p05   p10   p25   p50   p75   p90   p95   p99   max  mean stdev\n"
        );
        let mut out = String::new();
        pcts_line(&mut out, "io%", None, Kind::Pct);
        pcts_line(&mut out, "mem", Some(&pct_map(&[0.0, 0.0])), Kind::Size);
        // As line 84 of the format conformance file.
        let dashes =
            "    -     -     -     -     -     -     -     -     -     -     -     -     -";
        // Each cell is followed by a space, as upstream prints it.
        assert_eq!(
            out,
            format!("io%         {dashes} \nmem         {dashes} \n")
        );
    }

    /// `format -R`: a slice's distributions beyond the base rows get their
    /// own tables; without `-R`, or without such fields, none.
    #[test]
    fn rstat_levels_add_the_extra_tables() {
        let mut r = MemHogResult::default();
        r.root_rstat
            .insert("mem_stat.anon".into(), pct_map(&[1048576.0, 2097152.0]));
        r.root_rstat.insert("swap_bytes".into(), pct_map(&[4096.0]));
        r.root_rstat
            .insert("zswap_bytes".into(), pct_map(&[8192.0]));
        r.root_rstat.insert("cpu_util".into(), pct_map(&[0.5]));
        let mut plain = String::new();
        format_result_rstat(&mut plain, &r, true, 0);
        let mut old = String::new();
        format_result(&mut old, &r, true);
        assert_eq!(plain, old);
        assert!(!plain.contains("memory.stat"), "{plain}");
        // Upstream 2.2's swap row, after mem.
        assert!(
            plain.contains("\nmem     ") && plain.contains("\nswap    "),
            "{plain}"
        );
        assert!(plain.find("\nmem ").unwrap() < plain.find("\nswap ").unwrap());
        let mut out = String::new();
        format_result_rstat(&mut out, &r, true, 1);
        assert!(out.contains("[ROOT - memory.stat]"), "{out}");
        assert!(out.contains("\nanon "), "{out}");
        assert!(out.contains("[ROOT - other]"), "{out}");
        assert!(out.contains("\nzswap_bytes "), "{out}");
        assert!(!out.contains("\nswap_bytes "), "{out}");
        assert!(!out.contains("[ROOT - vmstat]"), "{out}");
        assert!(
            out.contains("[WORKLOAD] - no memory.stat, io.stat or vmstat distributions"),
            "{out}"
        );
        // -R shows upstream's shown keys, -RR its hidden ones too; counts
        // print base 10; the label column widens with the level.
        r.root_rstat
            .insert("mem_stat.kernel_stack".into(), pct_map(&[8192.0 * 1024.0]));
        r.root_rstat
            .insert("io_stat.rios".into(), pct_map(&[250_000.0]));
        let mut one = String::new();
        format_result_rstat(&mut one, &r, true, 1);
        assert!(!one.contains("\nkernel_stack "), "{one}");
        assert!(one.contains("\nrios "), "{one}");
        let rios = one.lines().find(|l| l.starts_with("rios ")).unwrap();
        assert!(rios.contains(" 250k "), "{rios}");
        let w1 = rstat_label_width(1);
        assert_eq!(w1, "workingset_activate_anon".len());
        assert!(one.contains(&format!("\n{:<w1$}  ", "cpu%")), "{one}");
        let mut two = String::new();
        format_result_rstat(&mut two, &r, true, 2);
        assert!(two.contains("\nkernel_stack "), "{two}");
        assert!(rstat_label_width(2) > w1);
        assert_eq!(rstat_label_width(0), 10);
    }

    #[test]
    fn params_line() {
        let mut out = String::new();
        let mut rec = MemHogRecord {
            loops: 2,
            load: 1.0,
            speed: "2x".into(),
            ..Default::default()
        };
        format_scenario_params(&mut out, &rec);
        rec.load = 0.8;
        format_scenario_params(&mut out, &rec);
        assert_eq!(
            out,
            "Params: loops=2 load=1 speed=2x\nParams: loops=2 load=0.8 speed=2x\n"
        );
    }

    #[test]
    fn failures_and_hog_ends() {
        let mut res = iocost_off_summary();
        res.fail_ratio = 0.25;
        res.fail_msgs = vec!["hashd died".into()];
        let rec = MemHogRecord {
            loops: 1,
            load: 1.0,
            speed: "2x".into(),
            runs: vec![MemHogRun {
                end: "killed by the kernel (OOM) after 41s".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut out = String::new();
        format_protection(&mut out, &[(rec, res.clone())], &res, true);
        assert!(out.contains(
            "Params: loops=1 load=1 speed=2x\nHog ends: killed by the kernel (OOM) after 41s\n\nInfo:"
        ));
        let fail = "Result: FAIL=25.00% isol=45.50:30.72% lat_imp=39.42%:81.53 \
                    work_csv=100.0% missing=0.26%\n        [error] hashd died\n";
        assert!(
            out.contains(&format!("{fail}\nMemory Hog Summary\n")),
            "{out}"
        );
        assert!(out.ends_with(fail), "{out}");
        let mut summary = String::new();
        format_protection(&mut summary, &[], &res, false);
        assert!(!summary.contains("Hog ends"));
        assert!(summary.ends_with(fail));
    }

    #[test]
    fn iolat_not_measured_and_missing_rows() {
        let mut r = MemHogResult {
            isol: pct_map(&[]),
            lat_imp: pct_map(&[]),
            work_csv: 1.0,
            ..Default::default()
        };
        let mut out = String::new();
        format_result(&mut out, &r, true);
        assert!(out.contains(
            "      hog_bytes=0 hog_lost_bytes=0\n\n\
             IO Latency Distribution: not measured on this host\n\n\
             IO Latency: not measured\n\nSlice resource stat:\n\n[ROOT]"
        ));
        assert!(out.ends_with(
            "isol%           -     -     -     -     -     -     -     -     -     -     -     -     - \n\
             lat-imp%        -     -     -     -     -     -     -     -     -     -     -     -     - \n\n\
             Result: isol=0:0% lat_imp=0%:0 work_csv=100.0% missing=0%\n"
        ));
        let mut short = String::new();
        format_result(&mut short, &r, false);
        assert!(short.starts_with("IO Latency: not measured\n\nIsolation"));

        // Only the read p50 row: every other row prints dashes.
        r.iolat[0].insert("50".into(), iolat_row(0.001, 0.002, 0.003));
        let mut out = String::new();
        format_result(&mut out, &r, true);
        assert!(out.contains(
            "p50         -     -     -     -     -     -     -     -  3.0m     -  1.0m   2.0m\n"
        ));
        assert!(out.contains(
            "max         -     -     -     -     -     -     -     -     -     -     -      -\n"
        ));
        assert!(out.contains(
            "IO Latency: R p50=1.0m:2.0m/3.0m p90=-:-/- p99=-:-/- max=-:-/-\n            W p50=-:-/-"
        ));
    }
}
