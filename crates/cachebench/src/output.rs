//! CacheBench's text output, laid out line for line as upstream CacheBench
//! prints it, so that scripts written against upstream's stdout (and its
//! `--progress_stats_file`) parse ours unchanged.
//!
//! Upstream's text has two generations that results in the wild use, and
//! `--output_layout` (rackbench's flag) picks one ([`Layout`]):
//!
//! - `current` (the default): upstream today, since release v2026.05.25.00
//!   (commits ea75de6, 169be81 and 5e405f5 of 2026-05-22 moved its text
//!   from folly's formatter to fmt's): integers printed plain (`Items in
//!   RAM  : 96995`), fixed-point values rounded to nearest with ties to
//!   even, progress lines `Instance   0: HH:MM:SS ...`, the end-of-run
//!   heading `== Throughput Stats ==` and a closing `Finished!` or
//!   `Failed.` (all since v2026.01.26.00, commit 6653ec7 of 2026-01-20).
//! - `legacy`: what upstream printed up to v2026.01.19.00 (the progress
//!   line as of v2025.03.24.00): integers with thousands separators
//!   (folly's `{:,}`: `Items in RAM  : 96,995`), ties rounded away from
//!   zero (double-conversion), progress lines without the instance,
//!   `== Throughput for  ==` (two spaces) and no closing line. Those
//!   releases could not run a top-level array of instances; for one, the
//!   legacy layout is what the releases that first could (v2026.01.26.00
//!   to v2026.05.18.00) printed: the current layout with separators.
//!
//! [`Style`] is what a run prints given its layout and number of instances.
//!
//! What a run prints, in order, and the function here for each part:
//!
//! 1. the config file verbatim under `===JSON Config===` ([`config_echo`]),
//!    then [`WELCOME`];
//! 2. the workload generator's set-up lines ([`keys_created`],
//!    [`generating_accesses`], [`generated_patterns`]);
//! 3. with several instances [`running_instances`]; then, per instance,
//!    `Total X.XXM ops to be run` ([`ops_to_be_run`]); [`header`] is
//!    1 + 3 for callers that print no generator lines;
//! 4. every `--progress` seconds a [`progress_line`] per instance (and,
//!    with a stats file, a [`progress_stats_block`] appended to it);
//! 5. the end-of-run [`final_report`] of each instance: `== Test Results
//!    ==`, `== Allocator Stats ==` with [`allocator_stats`], the throughput
//!    heading with [`throughput_stats`], then the failure lines, if any;
//! 6. with several instances the [`aggregated_report`]
//!    (`== Aggregated Stats Across N Instances ==`);
//! 7. [`Style::closing_line`], in the current layout.
//!
//! Every function returns whole lines, each ending in `\n`. Labels are
//! left-aligned and numbers right-aligned in their fields, as upstream's.
//!
//! Without an NVM tier the NVM lines upstream prints on every run (`Items
//! in NVM`, `NVM Gets`, `NVM Puts`, `NVM Evicts`, `NVM Deletes`) show
//! zeros, as upstream shows them for a DRAM-only cache; the block upstream
//! prints only after NVM traffic (`RAM Hit Ratio`/`NVM Hit Ratio`, the
//! device's `NVM Read  Latency`/`NVM Write Latency` percentiles and the
//! `BlockCache Insert/Lookup/Remove Latency` ones, each over the last
//! minute, bytes written, write amplification) appears once NVM saw a get,
//! put or delete. With `--report_api_latency` the `Cache Find API latency`
//! and `Cache Allocate API latency` percentiles follow the hit ratio.
//! Blocks of features not built (background evictors, per-class memory
//! reports, item destructors, the DRAM iterator) are left out.

use std::fmt::Write as _;

use crate::cache::HybridCounters;
use crate::stats::{CacheStats, RunStats, Throughput};

/// The line upstream's ProgressTracker writes to `--progress_stats_file`
/// when it opens it (for appending) at the start of a run (since
/// v2026.01.26.00; see [`Style::stats_file_header`]).
pub const STATS_FILE_HEADER: &str = "=== Starting new run ===\n";

/// The line upstream's `main` prints once the config is parsed.
pub const WELCOME: &str = "Welcome to OSS version of cachebench";

/// Which generation of upstream's text to print (`--output_layout`,
/// rackbench's flag; see the module documentation).
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// Upstream today (since v2026.05.25.00): plain integers.
    #[default]
    Current,
    /// Upstream up to v2026.01.19.00: thousands separators,
    /// `== Throughput for  ==`, no instance in progress lines.
    Legacy,
}

impl Layout {
    /// What a run of `instances` instances prints in this layout.
    pub fn style(self, instances: usize) -> Style {
        match self {
            Layout::Current => Style::CURRENT,
            Layout::Legacy if instances > 1 => Style {
                separators: true,
                instances: true,
            },
            Layout::Legacy => Style::LEGACY,
        }
    }
}

/// How a run's text is laid out: the number format and the run layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    /// folly's number format (upstream until v2026.05.18.00): integers with
    /// thousands separators (`{:,}`), fixed-point values rounded half away
    /// from zero (double-conversion). Otherwise fmt's (since
    /// v2026.05.25.00): integers plain, fixed-point values rounded to
    /// nearest, ties to even (as printf).
    pub separators: bool,
    /// The run layout upstream has had since it runs several instances
    /// (v2026.01.26.00): `Instance   N: ` before each progress line,
    /// `=== Starting new run ===` at the top of the stats file, progress
    /// lines in the stats file only (not also on stdout), the results
    /// appended to the stats file, `== Throughput Stats ==` as the
    /// end-of-run heading (before: `== Throughput for  ==`) and a closing
    /// `Finished!` / `Failed.`.
    pub instances: bool,
}

impl Style {
    /// Upstream today.
    pub const CURRENT: Style = Style {
        separators: false,
        instances: true,
    };
    /// Upstream up to v2026.01.19.00 (a single instance).
    pub const LEGACY: Style = Style {
        separators: true,
        instances: false,
    };

    /// Whether a run writes [`STATS_FILE_HEADER`] when it opens the stats
    /// file.
    pub fn stats_file_header(self) -> bool {
        self.instances
    }

    /// Whether a progress line also goes to stdout when a stats file gets
    /// it (upstream before v2026.01.26.00 printed it in both places).
    pub fn progress_on_stdout_with_stats_file(self) -> bool {
        !self.instances
    }

    /// Whether the end-of-run report is appended to the stats file.
    pub fn results_in_stats_file(self) -> bool {
        self.instances
    }

    /// The line upstream's `main` prints last, if any: `Finished!` when
    /// every instance passed, else `Failed.`.
    pub fn closing_line(self, passed: bool) -> Option<&'static str> {
        self.instances
            .then_some(if passed { "Finished!\n" } else { "Failed.\n" })
    }

    /// The heading of the throughput lines in the end-of-run report.
    pub fn throughput_heading(self) -> &'static str {
        if self.instances {
            "== Throughput Stats =="
        } else {
            "== Throughput for  =="
        }
    }

    /// An integer as upstream prints it: `{:,}` or `{}`.
    pub(crate) fn int(self, n: u64) -> String {
        if self.separators {
            commas(n)
        } else {
            n.to_string()
        }
    }

    /// `v` with `prec` decimals as upstream prints it (`{:.Nf}`).
    pub(crate) fn fixed(self, v: f64, prec: usize) -> String {
        if self.separators {
            fixed_half_away(v, prec)
        } else if v.is_nan() {
            "nan".into()
        } else {
            // Rust's fixed-point formatting is exact with ties to even, as
            // fmt's.
            format!("{v:.prec$}")
        }
    }
}

/// Hit ratios over an interval, in percent.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HitRatios {
    /// Gets that hit anywhere (RAM or NVM).
    pub overall: f64,
    /// Gets that hit in RAM.
    pub ram: f64,
    /// NVM lookups that hit (0 without an NVM tier).
    pub nvm: f64,
}

// ---------------------------------------------------------------------------
// Number formatting.

/// `n` with its thousands grouped by commas (folly's `{:,}`).
fn commas(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `v` with `prec` decimals, rounding half away from zero on the exact
/// binary value (folly's `{:.Nf}`, double-conversion's `ToFixed`).
fn fixed_half_away(v: f64, prec: usize) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    // An f64 has at most 1074 fractional decimal digits, so this expansion
    // is exact and only the digit after the last kept one decides.
    let exact = format!("{:.1100}", v.abs());
    let (int, frac) = exact.split_once('.').unwrap_or((&exact, ""));
    let mut digits: Vec<u8> = int.bytes().chain(frac.bytes().take(prec)).collect();
    let mut int_len = int.len();
    if frac.as_bytes().get(prec).is_some_and(|&d| d >= b'5') {
        let mut i = digits.len();
        loop {
            if i == 0 {
                digits.insert(0, b'1');
                int_len += 1;
                break;
            }
            i -= 1;
            if digits[i] == b'9' {
                digits[i] = b'0';
            } else {
                digits[i] += 1;
                break;
            }
        }
    }
    let mut out = String::with_capacity(digits.len() + 2);
    if v.is_sign_negative() && digits.iter().any(|&d| d != b'0') {
        out.push('-');
    }
    out.extend(digits[..int_len].iter().map(|&d| char::from(d)));
    if prec > 0 {
        out.push('.');
        out.extend(digits[int_len..].iter().map(|&d| char::from(d)));
    }
    out
}

/// `ops` as a percentage of `total`, 0 when `total` is 0.
fn pct(ops: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        100.0 * ops as f64 / total as f64
    }
}

/// 100 minus [`pct`]: the share that did not fail (100 when `total` is 0).
fn inv_pct(ops: u64, total: u64) -> f64 {
    100.0 - pct(ops, total)
}

/// Events per second, truncated; 0 when no time has elapsed.
fn per_sec(n: u64, elapsed_secs: f64) -> u64 {
    if elapsed_secs > 0.0 {
        (n as f64 / elapsed_secs) as u64
    } else {
        0
    }
}

/// A success rate in percent, 0 when nothing was attempted.
fn success(total: u64, failed: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        100.0 * total.saturating_sub(failed) as f64 / total as f64
    }
}

// ---------------------------------------------------------------------------
// Start of run.

/// The config file echoed verbatim under `===JSON Config===`, as upstream's
/// `CacheBenchConfig` constructor prints it before parsing.
pub fn config_echo(config_json: &str) -> String {
    format!("===JSON Config===\n{config_json}\n")
}

/// `Total 3.20M ops to be run`, printed when an instance's stressor starts
/// (upstream `CacheStressor::start`); `total_ops` is that instance's
/// numOps × numThreads.
pub fn ops_to_be_run(st: Style, total_ops: u64) -> String {
    format!(
        "Total {}M ops to be run\n",
        st.fixed(total_ops as f64 / 1e6, 2)
    )
}

/// `Running 2 cachebench instance(s)`, printed by upstream's `main` before
/// it starts the instances of a top-level array (not for a single one).
pub fn running_instances(instances: usize) -> String {
    format!("Running {instances} cachebench instance(s)\n")
}

/// The start of a single-instance run for callers without generator
/// lines: the config echo, [`WELCOME`] and the total op count. A caller
/// whose workload generator prints its set-up lines puts them between
/// [`config_echo`] + [`WELCOME`] and [`ops_to_be_run`] instead, as
/// upstream does.
pub fn header(st: Style, config_json_echo: &str, total_ops: u64) -> String {
    format!(
        "{}{WELCOME}\n{}",
        config_echo(config_json_echo),
        ops_to_be_run(st, total_ops)
    )
}

/// `Created 897355 keys in 0.00 mins` (upstream `WorkloadGenerator`
/// after generating keys; `mins` is whole seconds / 60 there).
pub fn keys_created(st: Style, keys: u64, mins: f64) -> String {
    format!(
        "Created {} keys in {} mins\n",
        st.int(keys),
        st.fixed(mins, 2)
    )
}

/// `Generating 1.60M sampled accesses` in the current layout (the
/// generator's own line; [`generating_accesses_in`] for a style).
pub fn generating_accesses(accesses: u64) -> String {
    generating_accesses_in(Style::CURRENT, accesses)
}

/// `Generating 1.60M sampled accesses`, once per pool (upstream
/// `WorkloadGenerator` before sampling a pool's key popularity).
pub fn generating_accesses_in(st: Style, accesses: u64) -> String {
    format!(
        "Generating {}M sampled accesses\n",
        st.fixed(accesses as f64 / 1e6, 2)
    )
}

/// `Generated access patterns in 0.00 mins` (upstream `WorkloadGenerator`
/// once all pools are sampled).
pub fn generated_patterns(st: Style, mins: f64) -> String {
    format!("Generated access patterns in {} mins\n", st.fixed(mins, 2))
}

// ---------------------------------------------------------------------------
// Progress.

/// Hit ratios of the gets between two snapshots of the cache's counters
/// (upstream `Stats::getHitRatios`): all 0 when no get happened since
/// `prev`; without an NVM tier overall equals RAM and NVM is 0.
pub fn hit_ratios_since(cur: &CacheStats, prev: &CacheStats) -> HitRatios {
    let mut r = HitRatios::default();
    if cur.gets > prev.gets {
        let gets = cur.gets - prev.gets;
        r.overall = inv_pct(total_misses(cur).saturating_sub(total_misses(prev)), gets);
        r.ram = inv_pct(misses(cur).saturating_sub(misses(prev)), gets);
    }
    let (n, p) = (nvm_counters(cur), nvm_counters(prev));
    if n.nvm_gets > p.nvm_gets {
        r.nvm = inv_pct(
            n.nvm_get_misses.saturating_sub(p.nvm_get_misses),
            n.nvm_gets - p.nvm_gets,
        );
    }
    r
}

/// RAM misses.
fn misses(c: &CacheStats) -> u64 {
    c.gets.saturating_sub(c.hits)
}

/// Gets that missed everywhere (upstream `getTotalMisses`: NVM's misses
/// once NVM saw a get, else RAM's).
fn total_misses(c: &CacheStats) -> u64 {
    let n = nvm_counters(c);
    if n.nvm_gets > 0 {
        n.nvm_get_misses
    } else {
        misses(c)
    }
}

fn nvm_counters(c: &CacheStats) -> HybridCounters {
    c.nvm
        .as_ref()
        .map(|n| n.counters.clone())
        .unwrap_or_default()
}

/// Items in DRAM, all pools.
fn ram_items(c: &CacheStats) -> u64 {
    c.pools.iter().map(|p| p.items).sum()
}

/// The line printed every `--progress` seconds for an instance (upstream
/// `ProgressTracker::work` with `Stats::progress`), e.g.
/// `Instance   0: 12:07:02       1.23M ops completed. 96995 items in cache. 0 items in nvm cache. 0 items evicted from nvm cache. Hit Ratio  10.97% (RAM  10.97%, NVM   0.00%).`:
/// the instance (in the layout since v2026.01.26.00), local wall-clock
/// time, the instance's operations done so far (all its threads, in
/// millions), its items in RAM and in NVM and its NVM evictions now
/// (integers plain in every layout), and the hit ratios since the
/// previous line ([`hit_ratios_since`]).
pub fn progress_line(
    st: Style,
    instance: usize,
    wall_clock: (u32, u32, u32),
    ops_done: u64,
    cur: &CacheStats,
    hit: HitRatios,
) -> String {
    let (h, m, s) = wall_clock;
    let mut out = String::new();
    if st.instances {
        let _ = write!(out, "Instance {instance:>3}: ");
    }
    let e = cur.nvm.as_ref().map(|n| &n.engine);
    let _ = writeln!(
        out,
        "{h:02}:{m:02}:{s:02} {:>10}M ops completed. {} items in cache. {} items in nvm cache. \
         {} items evicted from nvm cache. Hit Ratio {:>6}% (RAM {:>6}%, NVM {:>6}%).",
        st.fixed(ops_done as f64 / 1e6, 2),
        ram_items(cur),
        e.map_or(0, |e| e.items()),
        e.map_or(0, |e| e.evictions()),
        st.fixed(hit.overall, 2),
        st.fixed(hit.ram, 2),
        st.fixed(hit.nvm, 2),
    );
    out
}

/// The gets since `prev` and their hit ratios (upstream
/// `Stats::render(prevStats, out)`); empty when no get happened since.
pub fn hit_ratio_since_last(st: Style, cur: &CacheStats, prev: &CacheStats) -> String {
    if cur.gets <= prev.gets {
        return String::new();
    }
    let r = hit_ratios_since(cur, prev);
    format!(
        "Cache Gets    : {}\nHit Ratio     : {:>6}%\nRAM Hit Ratio : {:>6}%\nNVM Hit Ratio : {:>6}%\n",
        st.int(cur.gets - prev.gets),
        st.fixed(r.overall, 2),
        st.fixed(r.ram, 2),
        st.fixed(r.nvm, 2),
    )
}

/// What upstream's `ProgressTracker::work` appends to
/// `--progress_stats_file` at each interval: the progress line, the
/// allocator stats, the hit ratios since the previous interval, the
/// throughput so far (rates over `cur.elapsed_secs`) and a blank line
/// (the same headings in every layout).
pub fn progress_stats_block(st: Style, line: &str, cur: &RunStats, prev: &CacheStats) -> String {
    let mut out = String::new();
    out.push_str(line);
    if !line.ends_with('\n') {
        out.push('\n');
    }
    out.push_str("== Allocator Stats ==\n");
    out.push_str(&allocator_stats(st, cur));
    out.push_str("== Hit Ratio Stats Since Last ==\n");
    out.push_str(&hit_ratio_since_last(st, &cur.cache, prev));
    out.push_str("== Throughput Stats ==\n");
    out.push_str(&throughput_stats(st, cur));
    out.push('\n');
    out
}

// ---------------------------------------------------------------------------
// End of run.

/// The allocator counters of one instance (upstream `Stats::render`),
/// without a heading: items, allocation and eviction attempts with their
/// success, evictions, how full each pool is, gets and the hit ratio (only
/// after a get), the NVM lines (zeros: no NVM tier) and the eviction total
/// (only after an eviction).
///
/// A pool's `Fraction of pool N used` is upstream's 1 − free / usable
/// memory at slab granularity: the slabs the pool holds over its slab
/// budget (0 for a pool with no budget). Upstream also counts freed slots
/// inside held slabs as free, which our counters do not expose.
pub fn allocator_stats(st: Style, s: &RunStats) -> String {
    render_allocator(st, &s.cache, false)
}

/// [`allocator_stats`], or with `aggregated` the sums over instances as
/// upstream renders them: without the pool lines and the NVM latency
/// percentiles, which do not add up.
fn render_allocator(st: Style, c: &CacheStats, aggregated: bool) -> String {
    let sum = |f: fn(&crate::stats::PoolStats) -> u64| c.pools.iter().map(f).sum::<u64>();
    let items = sum(|p| p.items);
    let alloc_attempts = sum(|p| p.alloc_attempts);
    let alloc_failures = alloc_attempts.saturating_sub(sum(|p| p.alloc_successes));
    let evict_attempts = sum(|p| p.evict_attempts);
    let evictions = sum(|p| p.evictions);

    let nvm = c.nvm.as_ref();
    let n = nvm_counters(c);
    let mut out = String::new();
    let _ = writeln!(out, "Items in RAM  : {}", st.int(items));
    let _ = writeln!(
        out,
        "Items in NVM  : {}",
        st.int(nvm.map_or(0, |x| x.engine.items()))
    );
    let _ = writeln!(
        out,
        "Alloc Attempts: {} Success: {}%",
        st.int(alloc_attempts),
        st.fixed(inv_pct(alloc_failures, alloc_attempts), 2)
    );
    let _ = writeln!(
        out,
        "Evict Attempts: {} Success: {}%",
        st.int(evict_attempts),
        st.fixed(pct(evictions, evict_attempts), 2)
    );
    let _ = writeln!(out, "RAM Evictions : {}", st.int(evictions));
    if !aggregated {
        for (pid, p) in c.pools.iter().enumerate() {
            let used = if p.slab_budget == 0 {
                0.0
            } else {
                let free = p.slab_budget.saturating_sub(p.slabs);
                1.0 - free as f64 / p.slab_budget as f64
            };
            let _ = writeln!(
                out,
                "Fraction of pool {} used : {}",
                st.int(pid as u64),
                st.fixed(used, 2)
            );
        }
    }
    if c.gets > 0 {
        let _ = writeln!(out, "Cache Gets    : {}", st.int(c.gets));
        let _ = writeln!(
            out,
            "Hit Ratio     : {:>6}%",
            st.fixed(inv_pct(total_misses(c), c.gets), 2)
        );
        // --report_api_latency (not for sums over instances, as upstream).
        if let Some(l) = c.api_latency_ns.as_ref().filter(|_| !aggregated) {
            out.push_str(&percentile_lines(
                st,
                "Cache Find API latency",
                &l.get,
                "ns",
            ));
            out.push_str(&percentile_lines(
                st,
                "Cache Allocate API latency",
                &l.set,
                "ns",
            ));
        }
    }
    if let Some(x) = nvm.filter(|_| n.nvm_gets > 0 || n.nvm_deletes > 0 || n.puts > 0) {
        out.push_str(&nvm_traffic(st, c, x, aggregated));
    }
    let e = nvm.map(|x| &x.engine);
    let _ = writeln!(
        out,
        "{:<14}: {:>15}, {:<10}: {:>6}%",
        "NVM Gets",
        st.int(n.nvm_gets),
        "Coalesced",
        st.fixed(pct(n.coalesced, n.nvm_gets), 2)
    );
    let _ = writeln!(
        out,
        "{:<14}: {:>15}, {:<10}: {:>6}%, {:<8}: {:>6}%, {:<16}: {:>8}, {:<16}: {:>8}",
        "NVM Puts",
        st.int(n.puts),
        "Success",
        st.fixed(inv_pct(n.put_errors + n.aborts_from_del, n.puts), 2),
        "Clean",
        st.fixed(pct(0, n.puts), 2),
        "AbortsFromDel",
        st.int(n.aborts_from_del),
        "AbortsFromGet",
        st.int(0)
    );
    let nvm_evictions = e.map_or(0, |e| e.evictions());
    let _ = writeln!(
        out,
        "{:<14}: {:>15}, {:<10}: {:>6}%, {:<8}: {:>7}, {:<16}: {:>8}",
        "NVM Evicts",
        st.int(nvm_evictions),
        "Clean",
        st.fixed(pct(0, nvm_evictions), 2),
        "Unclean",
        st.int(0),
        "Double",
        st.int(0)
    );
    let _ = writeln!(
        out,
        "{:<14}: {:>15} {:<14}: {:>6}%",
        "NVM Deletes",
        st.int(n.nvm_deletes),
        "Skipped Deletes",
        st.fixed(pct(e.map_or(0, |e| e.removes_skipped), n.nvm_deletes), 2)
    );
    let r = &c.release;
    if r.slabs_released > 0 {
        let _ = writeln!(
            out,
            "Released {} slabs\n  Moves     : attempts: {:>10}, success: {:>6}%\n  Evictions : attempts: {:>10}, success: {:>6}%",
            st.int(r.slabs_released),
            st.int(r.move_attempts),
            st.fixed(pct(r.move_successes, r.move_attempts), 2),
            st.int(r.eviction_attempts),
            st.fixed(pct(r.eviction_successes, r.eviction_attempts), 2)
        );
    }
    if evictions > 0 {
        // Without separators in every layout.
        let _ = writeln!(out, "Total eviction executed {evictions}");
    }
    out
}

/// The block upstream prints once NVM saw traffic: RAM and NVM hit
/// ratios, eviction rejects, the device's read and write latency
/// percentiles (µs per device I/O call, as upstream's `NVM Read  Latency`
/// and `NVM Write Latency`; not for `aggregated` sums) and bytes written
/// with the write amplification.
fn nvm_traffic(st: Style, c: &CacheStats, x: &crate::cache::NvmSide, aggregated: bool) -> String {
    let n = &x.counters;
    let mut out = String::new();
    let _ = write!(
        out,
        "RAM Hit Ratio : {:>6}%\nNVM Hit Ratio : {:>6}%\n",
        st.fixed(inv_pct(misses(c), c.gets), 2),
        st.fixed(inv_pct(n.nvm_get_misses, n.nvm_gets), 2)
    );
    let _ = write!(
        out,
        "RAM eviction rejects expiry : {}\nRAM eviction rejects clean : {}\n",
        st.int(n.rejects_expiry),
        st.int(n.rejects_clean)
    );
    // Upstream's figures are navy's device latency (`navy_device_read_latency_us`
    // and `navy_device_write_latency_us`): the time of each device read and
    // write call, whole microseconds, over the last minute; then BlockCache's
    // insert, lookup and remove calls (`navy_bc_*_latency_us`, one arena).
    let empty = crate::latency::histogram();
    let bc = x.engine.large.as_ref().and_then(|l| l.latency_us.as_ref());
    let latency = [
        ("NVM Read  Latency", &x.engine.device.read_latency_us),
        ("NVM Write Latency", &x.engine.device.write_latency_us),
        (
            "BlockCache Insert Latency",
            bc.map_or(&empty, |b| &b.insert),
        ),
        (
            "BlockCache Lookup Latency",
            bc.map_or(&empty, |b| &b.lookup),
        ),
        (
            "BlockCache Remove Latency",
            bc.map_or(&empty, |b| &b.remove),
        ),
    ];
    for (cat, h) in latency.iter().filter(|_| !aggregated) {
        out.push_str(&percentile_lines(st, cat, h, "us"));
    }
    const GB: f64 = 1024.0 * 1024.0 * 1024.0;
    let physical = x.engine.device.bytes_written;
    let logical = x.engine.logical_bytes_written();
    let _ = writeln!(
        out,
        "NVM bytes written (physical)  : {:>6} GB",
        st.fixed(physical as f64 / GB, 2)
    );
    let _ = writeln!(
        out,
        "NVM bytes written (logical)   : {:>6} GB",
        st.fixed(logical as f64 / GB, 2)
    );
    // NAND bytes: the devices' own count (writeAmpDeviceList), 0 when not
    // read, as upstream.
    let nand = x.nand_bytes_written.unwrap_or(0);
    let _ = writeln!(
        out,
        "NVM bytes written (nand)      : {:>6} GB",
        st.fixed(nand as f64 / GB, 2)
    );
    let _ = writeln!(
        out,
        "NVM app write amplification   : {:>6}",
        st.fixed(pct(physical, logical) / 100.0, 2)
    );
    let _ = writeln!(
        out,
        "NVM dev write amplification   : {:>6}",
        st.fixed(pct(nand, physical) / 100.0, 2)
    );
    out
}

/// Upstream's eight percentile lines of a latency (`{cat:20} {pct:8} :
/// {value:>10.2f} {unit}`, p50 to p100; zeros when nothing was recorded).
fn percentile_lines(st: Style, cat: &str, h: &hdrhistogram::Histogram<u64>, unit: &str) -> String {
    let quantiles = [
        ("p50", 0.5),
        ("p90", 0.9),
        ("p99", 0.99),
        ("p999", 0.999),
        ("p9999", 0.9999),
        ("p99999", 0.99999),
        ("p999999", 0.999999),
        ("p100", 1.0),
    ];
    let mut out = String::new();
    for (name, q) in quantiles {
        let v = if h.is_empty() {
            0.0
        } else if q >= 1.0 {
            h.max() as f64
        } else {
            h.value_at_quantile(q) as f64
        };
        let _ = writeln!(out, "{cat:<20} {name:<8} : {:>10} {unit}", st.fixed(v, 2));
    }
    out
}

/// The stressor's operation counters (upstream `ThroughputStats::render`),
/// without a heading: total ops (millions), total sets, then per
/// operation kind its rate over `s.elapsed_secs` (truncated; 0 when no
/// time elapsed) and success share (0 when none was issued). `update` and
/// `addChained` appear only when some were issued.
pub fn throughput_stats(st: Style, s: &RunStats) -> String {
    let t: &Throughput = &s.throughput;
    let secs = s.elapsed_secs;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<10}: {} million",
        "Total Ops",
        st.fixed(t.ops as f64 / 1e6, 2)
    );
    let _ = writeln!(out, "{:<10}: {}", "Total sets", st.int(t.sets));
    let mut row = |op: &str, n: u64, what: &str, rate: f64| {
        let _ = writeln!(
            out,
            "{:<10}: {:>9}/s, {:<10}: {:>6}%",
            op,
            st.int(per_sec(n, secs)),
            what,
            st.fixed(rate, 2)
        );
    };
    row("get", t.gets, "success", success(t.gets, t.get_misses));
    row(
        "couldExist",
        t.could_exist,
        "success",
        success(t.could_exist, t.could_exist_false),
    );
    row("set", t.sets, "success", success(t.sets, t.set_failures));
    row("del", t.dels, "found", success(t.dels, t.del_not_found));
    if t.updates > 0 {
        row(
            "update",
            t.updates,
            "success",
            success(t.updates, t.update_misses),
        );
    }
    if t.add_chained > 0 {
        row(
            "addChained",
            t.add_chained,
            "success",
            success(t.add_chained, t.add_chained_failures),
        );
    }
    out
}

/// An instance's end-of-run report (upstream `Runner::run`): `== Test
/// Results ==`, `== Allocator Stats ==` and [`allocator_stats`], a blank
/// line, [`Style::throughput_heading`] and [`throughput_stats`], a blank
/// line, then each of `failures` on its own line: why the run failed, in
/// upstream's words where it has them (its `Stats::renderIsTestPassed`,
/// e.g. `Found 3 inconsistent cases`).
pub fn final_report(st: Style, s: &RunStats, failures: &[&str]) -> String {
    let mut out = String::from("== Test Results ==\n== Allocator Stats ==\n");
    out.push_str(&allocator_stats(st, s));
    let _ = writeln!(out, "\n{}", st.throughput_heading());
    out.push_str(&throughput_stats(st, s));
    out.push('\n');
    for f in failures {
        out.push_str(f);
        out.push('\n');
    }
    out
}

/// The sums over the `instances` instances of a top-level array (upstream
/// `AggregatedStats`, printed on stdout after every instance finished): a
/// blank line, `== Aggregated Stats Across N Instances ==`, `== Allocator
/// Stats ==` with the summed allocator counters (no pool lines and no NVM
/// latency percentiles), a blank line, `== Throughput ==`, `Total
/// Duration: X.XX seconds` (the longest instance's time, over which the
/// summed rates are taken), the summed throughput lines, a blank line and
/// upstream's note that latency is not aggregated.
pub fn aggregated_report(st: Style, total: &RunStats, instances: usize) -> String {
    let mut out =
        format!("\n== Aggregated Stats Across {instances} Instances ==\n== Allocator Stats ==\n");
    out.push_str(&render_allocator(st, &total.cache, true));
    let _ = writeln!(
        out,
        "\n== Throughput ==\nTotal Duration: {} seconds",
        st.fixed(total.elapsed_secs, 2)
    );
    out.push_str(&throughput_stats(st, total));
    out.push_str(
        "\nNOTE: we can't combine latency counters across multiple instances, \
         see each instance's output for latency stats\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::PoolStats;

    // The expected lines below are written from upstream's format strings:
    // the current layout from `Stats::render`, `ThroughputStats::render`,
    // `Runner::render`, `AggregatedStats` and `ProgressTracker::work` at
    // 278ffc7 (fmt: `{}` integers, `{:6.2f}` ties to even), the legacy one
    // from the same functions at v2026.01.19.00 (folly: `{:,}` integers,
    // `{:6.2f}` ties away from zero).
    const CUR: Style = Style::CURRENT;
    const OLD: Style = Style::LEGACY;

    /// The NVM lines of a run without NVM traffic (upstream `Stats::render`:
    /// Coalesced, Clean and Skipped Deletes are shares of 0, so 0.00%; put
    /// Success is 100 minus a share of 0, so 100.00%). The same in both
    /// layouts: zeros have no separators.
    const NVM_ZERO: &str = "\
NVM Gets      :               0, Coalesced :   0.00%
NVM Puts      :               0, Success   : 100.00%, Clean   :   0.00%, AbortsFromDel   :        0, AbortsFromGet   :        0
NVM Evicts    :               0, Clean     :   0.00%, Unclean :       0, Double          :        0
NVM Deletes   :               0 Skipped Deletes:   0.00%
";

    fn busy() -> RunStats {
        RunStats {
            cache: CacheStats {
                nvm: None,
                release: Default::default(),
                api_latency_ns: None,
                gets: 480_592,
                hits: 52_713,
                expired: 12,
                removes: 160_232,
                pools: vec![
                    PoolStats {
                        alloc_attempts: 1_000_000,
                        alloc_successes: 999_000,
                        evict_attempts: 500_000,
                        evictions: 499_000,
                        items: 60_000,
                        slabs: 3,
                        slab_budget: 3,
                    },
                    PoolStats {
                        alloc_attempts: 1_559_176,
                        alloc_successes: 1_559_176,
                        evict_attempts: 300,
                        evictions: 0,
                        items: 36_995,
                        slabs: 5,
                        slab_budget: 7,
                    },
                ],
            },
            throughput: Throughput {
                ops: 3_200_000,
                sets: 2_559_176,
                gets: 480_592,
                get_misses: 427_879,
                dels: 160_232,
                del_not_found: 142_880,
                add_chained: 10,
                add_chained_failures: 1,
                ..Throughput::default()
            },
            elapsed_secs: 2.5,
            ..RunStats::default()
        }
    }

    /// A hybrid cache after NVM traffic: 10 NVM lookups (5 missed), 4 puts,
    /// 5 items in NVM, 7 NVM evictions; the device read 9 times in 77 us
    /// and once in 900 us, and wrote 5 times in 120 us and 5 in 130 us.
    fn hybrid() -> RunStats {
        let mut s = RunStats::default();
        s.cache.pools = vec![PoolStats {
            items: 1_234,
            ..PoolStats::default()
        }];
        s.cache.gets = 20;
        s.cache.hits = 10;
        let mut side = crate::cache::NvmSide::default();
        side.counters.nvm_gets = 10;
        side.counters.nvm_get_misses = 5;
        side.counters.puts = 4;
        side.engine.large = Some(crate::nvm::region::RegionStats {
            items: 5,
            evictions: 7,
            ..Default::default()
        });
        let mut engine = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
        engine.record_n(1, 100).unwrap();
        side.engine.read_latency_us = Some(engine.clone());
        side.engine.write_latency_us = Some(engine);
        let d = &mut side.engine.device;
        d.read_latency_us.record_n(77, 9).unwrap();
        d.read_latency_us.record(900).unwrap();
        d.write_latency_us.record_n(120, 5).unwrap();
        d.write_latency_us.record_n(130, 5).unwrap();
        s.cache.nvm = Some(side);
        s
    }

    /// Upstream's 24 `BlockCache ... Latency` lines after the device's (0
    /// without a region engine's figures), and with `--report_api_latency`
    /// the find and allocate lines after the hit ratio; neither in the
    /// aggregate.
    #[test]
    fn blockcache_and_api_latency_lines() {
        let mut s = hybrid();
        let mut h = crate::latency::histogram();
        crate::latency::record(&mut h, 1_500);
        if let Some(n) = s.cache.nvm.as_mut()
            && let Some(l) = n.engine.large.as_mut()
        {
            l.latency_us = Some(crate::latency::OpLatency {
                insert: h.clone(),
                lookup: crate::latency::histogram(),
                remove: h.clone(),
            });
        }
        s.cache.api_latency_ns = Some(crate::stats::ApiLatency {
            get: h.clone(),
            set: crate::latency::histogram(),
        });
        let out = allocator_stats(CUR, &s);
        let lines: Vec<&str> = out.lines().collect();
        let at = |p: &str| lines.iter().position(|l| l.starts_with(p)).unwrap();
        assert_eq!(
            lines
                .iter()
                .filter(|l| l.starts_with("BlockCache "))
                .count(),
            24
        );
        assert!(at("NVM Write Latency    p100") < at("BlockCache Insert Latency p50"));
        assert!(
            out.contains("BlockCache Insert Latency p100     :    1500.00 us\n"),
            "{out}"
        );
        assert!(
            out.contains("BlockCache Lookup Latency p50      :       0.00 us\n"),
            "{out}"
        );
        assert!(
            out.contains("Cache Find API latency p90      :    1500.00 ns\n"),
            "{out}"
        );
        assert!(
            out.contains("Cache Allocate API latency p100     :       0.00 ns\n"),
            "{out}"
        );
        assert!(at("Hit Ratio") < at("Cache Find API latency p50"));
        let sums = aggregated_report(CUR, &s, 2);
        assert!(
            !sums.contains("BlockCache") && !sums.contains("API latency"),
            "{sums}"
        );
    }

    #[test]
    fn layouts_and_their_styles() {
        assert_eq!(Layout::default(), Layout::Current);
        assert_eq!(Layout::Current.style(1), CUR);
        assert_eq!(Layout::Current.style(3), CUR);
        assert_eq!(Layout::Legacy.style(1), OLD);
        // A top-level array in the legacy layout: as upstream printed it
        // from v2026.01.26.00 to v2026.05.18.00, separators and all.
        let old_multi = Layout::Legacy.style(2);
        assert!(old_multi.separators && old_multi.instances);

        assert!(CUR.stats_file_header() && !OLD.stats_file_header());
        assert!(!CUR.progress_on_stdout_with_stats_file());
        assert!(OLD.progress_on_stdout_with_stats_file());
        assert!(CUR.results_in_stats_file() && !OLD.results_in_stats_file());
        assert_eq!(CUR.closing_line(true), Some("Finished!\n"));
        assert_eq!(CUR.closing_line(false), Some("Failed.\n"));
        assert_eq!(OLD.closing_line(true), None);
        assert_eq!(old_multi.closing_line(false), Some("Failed.\n"));
        assert_eq!(CUR.throughput_heading(), "== Throughput Stats ==");
        assert_eq!(OLD.throughput_heading(), "== Throughput for  ==");
    }

    #[test]
    fn number_formats() {
        assert_eq!(commas(0), "0");
        assert_eq!(commas(999), "999");
        assert_eq!(commas(1_000), "1,000");
        assert_eq!(commas(2_559_176), "2,559,176");
        assert_eq!(commas(u64::MAX), "18,446,744,073,709,551,615");
        assert_eq!(OLD.int(2_559_176), "2,559,176");
        assert_eq!(CUR.int(2_559_176), "2559176");
        // Exact binary ties: folly (double-conversion) rounds them away
        // from zero, fmt to even.
        for (v, old, cur) in [
            (0.125, "0.13", "0.12"),
            (0.625, "0.63", "0.62"),
            (99.875, "99.88", "99.88"),
            (0.375, "0.38", "0.38"),
        ] {
            assert_eq!(OLD.fixed(v, 2), old, "{v}");
            assert_eq!(CUR.fixed(v, 2), cur, "{v}");
        }
        for st in [OLD, CUR] {
            // 2.675 is stored as 2.67499999..., so it rounds down.
            assert_eq!(st.fixed(2.675, 2), "2.67");
            assert_eq!(st.fixed(99.996, 2), "100.00");
            assert_eq!(st.fixed(9.999, 2), "10.00");
            assert_eq!(st.fixed(0.0, 2), "0.00");
            assert_eq!(st.fixed(3.2, 2), "3.20");
            assert_eq!(st.fixed(f64::NAN, 2), "nan");
        }
        assert_eq!(fixed_half_away(-1.005, 2), "-1.00");
    }

    // Upstream `Stats::render`. By hand: items 60,000 + 36,995; alloc
    // attempts 1,000,000 + 1,559,176 with 1,000 failures → 100 −
    // 100·1000/2,559,176 = 99.9609 %; evictions 499,000 of 500,300
    // attempts = 99.7402 %; pool 0 holds 3 of 3 slabs (1.00), pool 1 5 of
    // 7 (1 − 2/7 = 0.714); gets 480,592 with 480,592 − 52,713 = 427,879
    // misses → 100 − 89.0317 = 10.9683 %, printed in a width of 6.
    #[test]
    fn allocator_stats_busy_run() {
        let legacy = format!(
            "\
Items in RAM  : 96,995
Items in NVM  : 0
Alloc Attempts: 2,559,176 Success: 99.96%
Evict Attempts: 500,300 Success: 99.74%
RAM Evictions : 499,000
Fraction of pool 0 used : 1.00
Fraction of pool 1 used : 0.71
Cache Gets    : 480,592
Hit Ratio     :  10.97%
{NVM_ZERO}Total eviction executed 499000
"
        );
        assert_eq!(allocator_stats(OLD, &busy()), legacy);
        let current = format!(
            "\
Items in RAM  : 96995
Items in NVM  : 0
Alloc Attempts: 2559176 Success: 99.96%
Evict Attempts: 500300 Success: 99.74%
RAM Evictions : 499000
Fraction of pool 0 used : 1.00
Fraction of pool 1 used : 0.71
Cache Gets    : 480592
Hit Ratio     :  10.97%
{NVM_ZERO}Total eviction executed 499000
"
        );
        assert_eq!(allocator_stats(CUR, &busy()), current);
    }

    // Upstream `Stats::render` before any work: no attempts means alloc
    // success 100 − 0 = 100.00 % but evict success 0.00 %; no gets means no
    // Cache Gets / Hit Ratio lines; no evictions, no total line.
    #[test]
    fn allocator_stats_idle_run() {
        let mut s = RunStats::default();
        s.cache.pools = vec![PoolStats::default()];
        let expected = format!(
            "\
Items in RAM  : 0
Items in NVM  : 0
Alloc Attempts: 0 Success: 100.00%
Evict Attempts: 0 Success: 0.00%
RAM Evictions : 0
Fraction of pool 0 used : 0.00
{NVM_ZERO}"
        );
        assert_eq!(allocator_stats(OLD, &s), expected);
        assert_eq!(allocator_stats(CUR, &s), expected);
    }

    // Upstream's slab release lines (`Released {:,} slabs`, attempts in
    // `{:10,}` before; `{}` and `{:10}` now).
    #[test]
    fn slab_release_lines() {
        let mut s = RunStats::default();
        s.cache.release = crate::cache::ReleaseStats {
            slabs_released: 1_200,
            move_attempts: 1_500_000,
            move_successes: 750_000,
            eviction_attempts: 8,
            eviction_successes: 1,
        };
        let old = allocator_stats(OLD, &s);
        assert!(
            old.contains(
                "Released 1,200 slabs\n  Moves     : attempts:  1,500,000, success:  50.00%\n  \
                 Evictions : attempts:          8, success:  12.50%\n"
            ),
            "{old}"
        );
        let cur = allocator_stats(CUR, &s);
        assert!(
            cur.contains(
                "Released 1200 slabs\n  Moves     : attempts:    1500000, success:  50.00%\n  \
                 Evictions : attempts:          8, success:  12.50%\n"
            ),
            "{cur}"
        );
    }

    // Upstream `ThroughputStats::render`. By hand over 2.5 s: gets
    // 480,592/2.5 = 192,236.8 → 192,236/s, success 52,713/480,592 = 10.968
    // %; couldExist none → 0/s, 0.00 %; sets 2,559,176/2.5 = 1,023,670.4 →
    // 1,023,670/s (with separators it exactly fills width 9), none failed
    // → 100.00 %; dels 160,232/2.5 = 64,092.8 → 64,092/s, found
    // 17,352/160,232 = 10.829 %; no updates → no line; addChained 10/2.5 =
    // 4/s, 9/10 = 90.00 %.
    #[test]
    fn throughput_stats_busy_run() {
        let legacy = "\
Total Ops : 3.20 million
Total sets: 2,559,176
get       :   192,236/s, success   :  10.97%
couldExist:         0/s, success   :   0.00%
set       : 1,023,670/s, success   : 100.00%
del       :    64,092/s, found     :  10.83%
addChained:         4/s, success   :  90.00%
";
        assert_eq!(throughput_stats(OLD, &busy()), legacy);
        let current = "\
Total Ops : 3.20 million
Total sets: 2559176
get       :    192236/s, success   :  10.97%
couldExist:         0/s, success   :   0.00%
set       :   1023670/s, success   : 100.00%
del       :     64092/s, found     :  10.83%
addChained:         4/s, success   :  90.00%
";
        assert_eq!(throughput_stats(CUR, &busy()), current);
    }

    // Zero elapsed time: upstream would divide by zero; we print 0/s. The
    // success shares do not depend on time. Updates appear once issued.
    #[test]
    fn throughput_stats_zero_elapsed() {
        let mut s = busy();
        s.elapsed_secs = 0.0;
        s.throughput.add_chained = 0;
        s.throughput.updates = 8;
        s.throughput.update_misses = 1;
        let expected = "\
Total Ops : 3.20 million
Total sets: 2,559,176
get       :         0/s, success   :  10.97%
couldExist:         0/s, success   :   0.00%
set       :         0/s, success   : 100.00%
del       :         0/s, found     :  10.83%
update    :         0/s, success   :  87.50%
";
        assert_eq!(throughput_stats(OLD, &s), expected);
    }

    #[test]
    fn throughput_stats_nothing_issued() {
        let expected = "\
Total Ops : 0.00 million
Total sets: 0
get       :         0/s, success   :   0.00%
couldExist:         0/s, success   :   0.00%
set       :         0/s, success   :   0.00%
del       :         0/s, found     :   0.00%
";
        assert_eq!(throughput_stats(OLD, &RunStats::default()), expected);
        assert_eq!(throughput_stats(CUR, &RunStats::default()), expected);
    }

    // Upstream `Runner::run` / `Runner::render`: headings, a blank line
    // before the throughput heading (`== Throughput for  ==` with two
    // spaces until v2026.01.19.00, `== Throughput Stats ==` since), a blank
    // line after the throughput lines, then the failure lines of
    // `Stats::renderIsTestPassed`.
    #[test]
    fn final_report_layout() {
        let s = busy();
        let legacy = final_report(OLD, &s, &[]);
        assert_eq!(
            legacy,
            format!(
                "== Test Results ==\n== Allocator Stats ==\n{}\n== Throughput for  ==\n{}\n",
                allocator_stats(OLD, &s),
                throughput_stats(OLD, &s)
            )
        );
        assert!(legacy.contains("\nRAM Evictions : 499,000\n"), "{legacy}");
        assert!(legacy.ends_with("addChained:         4/s, success   :  90.00%\n\n"));
        let current = final_report(CUR, &s, &[]);
        assert_eq!(
            current,
            format!(
                "== Test Results ==\n== Allocator Stats ==\n{}\n== Throughput Stats ==\n{}\n",
                allocator_stats(CUR, &s),
                throughput_stats(CUR, &s)
            )
        );
        assert!(current.contains("\nRAM Evictions : 499000\n"), "{current}");
        assert_eq!(
            final_report(CUR, &s, &["Found 3 inconsistent cases"]),
            format!("{current}Found 3 inconsistent cases\n")
        );
    }

    // Upstream `AggregatedStats`' `operator<<` with `Stats::render` of
    // summed stats (`aggregated_`: no pool lines, no NVM latency).
    #[test]
    fn aggregated_report_layout() {
        let total = busy();
        let current = format!(
            "
== Aggregated Stats Across 2 Instances ==
== Allocator Stats ==
Items in RAM  : 96995
Items in NVM  : 0
Alloc Attempts: 2559176 Success: 99.96%
Evict Attempts: 500300 Success: 99.74%
RAM Evictions : 499000
Cache Gets    : 480592
Hit Ratio     :  10.97%
{NVM_ZERO}Total eviction executed 499000

== Throughput ==
Total Duration: 2.50 seconds
{}
NOTE: we can't combine latency counters across multiple instances, see each instance's output for latency stats
",
            throughput_stats(CUR, &total)
        );
        assert_eq!(aggregated_report(CUR, &total, 2), current);
        // The legacy layout of an array: separators, the same blocks.
        let legacy = aggregated_report(Layout::Legacy.style(2), &total, 2);
        assert!(legacy.starts_with("\n== Aggregated Stats Across 2 Instances ==\n"));
        assert!(legacy.contains("\nAlloc Attempts: 2,559,176 Success: 99.96%\n"));
        assert!(legacy.contains("\nset       : 1,023,670/s, success   : 100.00%\n"));
        assert!(!legacy.contains("Fraction of pool"), "{legacy}");
        // With NVM traffic: the hit ratios and bytes written, not the
        // latency percentiles (which do not add up).
        let hybrid = aggregated_report(CUR, &hybrid(), 3);
        assert!(hybrid.contains("Across 3 Instances"), "{hybrid}");
        assert!(hybrid.contains("\nNVM Hit Ratio :  50.00%\n"), "{hybrid}");
        assert!(
            hybrid.contains("\nNVM bytes written (physical)  : "),
            "{hybrid}"
        );
        assert!(!hybrid.contains("Latency"), "{hybrid}");
    }

    // Upstream `CacheBenchConfig` (echo), `main` (welcome, `Running N
    // cachebench instance(s)`) and `CacheStressor::start` (numOps ×
    // numThreads in millions).
    #[test]
    fn header_lines() {
        let json = "{\n  \"cache_config\": {}\n}";
        assert_eq!(
            header(CUR, json, 3_200_000),
            "===JSON Config===\n{\n  \"cache_config\": {}\n}\n\
             Welcome to OSS version of cachebench\nTotal 3.20M ops to be run\n"
        );
        assert_eq!(ops_to_be_run(CUR, 0), "Total 0.00M ops to be run\n");
        assert_eq!(
            ops_to_be_run(OLD, 12_345_678_901),
            "Total 12345.68M ops to be run\n"
        );
        // 125,000 ops are 0.125 M exactly: a tie.
        assert_eq!(ops_to_be_run(OLD, 125_000), "Total 0.13M ops to be run\n");
        assert_eq!(ops_to_be_run(CUR, 125_000), "Total 0.12M ops to be run\n");
        assert_eq!(running_instances(2), "Running 2 cachebench instance(s)\n");
    }

    // Upstream `WorkloadGenerator::generateKeys` /
    // `generateKeyDistributions`.
    #[test]
    fn generator_lines() {
        assert_eq!(
            keys_created(OLD, 897_355, 0.0),
            "Created 897,355 keys in 0.00 mins\n"
        );
        assert_eq!(
            keys_created(CUR, 897_355, 0.0),
            "Created 897355 keys in 0.00 mins\n"
        );
        assert_eq!(
            generating_accesses(1_600_000),
            "Generating 1.60M sampled accesses\n"
        );
        assert_eq!(
            generating_accesses_in(OLD, 625_000),
            "Generating 0.63M sampled accesses\n"
        );
        assert_eq!(
            generating_accesses(625_000),
            "Generating 0.62M sampled accesses\n"
        );
        assert_eq!(
            generated_patterns(CUR, 0.5),
            "Generated access patterns in 0.50 mins\n"
        );
    }

    // Upstream `ProgressTracker::work` with `Stats::progress` and
    // `Stats::getHitRatios`. By hand: 1,000 gets since prev with 250 new
    // misses → 75.00 %.
    #[test]
    fn progress() {
        let prev = CacheStats {
            gets: 1_000,
            hits: 400,
            ..CacheStats::default()
        };
        let cur = CacheStats {
            gets: 2_000,
            hits: 1_150,
            ..busy().cache
        };
        let r = hit_ratios_since(&cur, &prev);
        assert_eq!(
            r,
            HitRatios {
                overall: 75.0,
                ram: 75.0,
                nvm: 0.0
            }
        );
        assert_eq!(
            progress_line(CUR, 0, (12, 7, 2), 1_234_567, &cur, r),
            "Instance   0: 12:07:02       1.23M ops completed. 96995 items in cache. \
             0 items in nvm cache. 0 items evicted from nvm cache. \
             Hit Ratio  75.00% (RAM  75.00%, NVM   0.00%).\n"
        );
        // Until v2026.01.19.00: no instance; the counts had no separators
        // there either.
        assert_eq!(
            progress_line(OLD, 0, (12, 7, 2), 1_234_567, &cur, r),
            "12:07:02       1.23M ops completed. 96995 items in cache. \
             0 items in nvm cache. 0 items evicted from nvm cache. \
             Hit Ratio  75.00% (RAM  75.00%, NVM   0.00%).\n"
        );
        assert!(
            progress_line(Layout::Legacy.style(2), 12, (0, 0, 9), 0, &cur, r)
                .starts_with("Instance  12: 00:00:09       0.00M ops completed. ")
        );
        // No gets since the last line: all ratios 0. NVM items and
        // evictions from the engines.
        let h = hybrid().cache;
        let idle = hit_ratios_since(&h, &h);
        assert_eq!(idle, HitRatios::default());
        assert_eq!(
            progress_line(CUR, 1, (0, 0, 9), 0, &h, idle),
            "Instance   1: 00:00:09       0.00M ops completed. 1234 items in cache. \
             5 items in nvm cache. 7 items evicted from nvm cache. \
             Hit Ratio   0.00% (RAM   0.00%, NVM   0.00%).\n"
        );
        // Ten digits of millions fill the field exactly; more widen it.
        let all = HitRatios {
            overall: 100.0,
            ram: 100.0,
            nvm: 0.0,
        };
        assert!(
            progress_line(OLD, 0, (23, 59, 59), 123_456_789_000_000, &h, all)
                .starts_with("23:59:59 123456789.00M ops completed. ")
        );
    }

    // Upstream `Cache::getStats`: `NVM Read  Latency` and `NVM Write
    // Latency` are navy's device latency (navy_device_read_latency_us,
    // navy_device_write_latency_us), not the engine's lookup and insert
    // times. Here the device took 77 us per read and 120-130 us per write
    // while the engine's lookups (Bloom filter answers, no I/O) took 1 us.
    #[test]
    fn nvm_latency_lines_are_the_device_latency() {
        let s = hybrid();
        for st in [CUR, OLD] {
            let out = allocator_stats(st, &s);
            for line in [
                "RAM Hit Ratio :  50.00%",
                "NVM Hit Ratio :  50.00%",
                "NVM Read  Latency    p50      :      77.00 us",
                "NVM Read  Latency    p90      :      77.00 us",
                "NVM Read  Latency    p100     :     900.00 us",
                "NVM Write Latency    p50      :     120.00 us",
                "NVM Write Latency    p100     :     130.00 us",
            ] {
                assert!(out.contains(line), "missing {line:?} in\n{out}");
            }
            assert!(!out.contains(":       1.00 us"), "{out}");
        }
        assert!(allocator_stats(CUR, &s).starts_with("Items in RAM  : 1234\n"));
        assert!(allocator_stats(OLD, &s).starts_with("Items in RAM  : 1,234\n"));
        // No device I/O yet: zeros, as upstream's missing navy stats.
        let mut idle = s.clone();
        if let Some(n) = idle.cache.nvm.as_mut() {
            n.engine.device = Default::default();
        }
        let out = allocator_stats(CUR, &idle);
        assert!(
            out.contains("NVM Read  Latency    p50      :       0.00 us"),
            "{out}"
        );
    }

    // Upstream `Stats::render(prevStats, out)` and the stats-file part of
    // `ProgressTracker::work` (the same headings in both layouts).
    #[test]
    fn progress_stats_file_block() {
        let prev = CacheStats {
            gets: 1_000,
            hits: 400,
            ..CacheStats::default()
        };
        let mut cur = RunStats::default();
        cur.cache.gets = 2_000;
        cur.cache.hits = 1_150;
        assert_eq!(
            hit_ratio_since_last(OLD, &cur.cache, &prev),
            "Cache Gets    : 1,000\nHit Ratio     :  75.00%\nRAM Hit Ratio :  75.00%\nNVM Hit Ratio :   0.00%\n"
        );
        assert_eq!(
            hit_ratio_since_last(CUR, &cur.cache, &prev),
            "Cache Gets    : 1000\nHit Ratio     :  75.00%\nRAM Hit Ratio :  75.00%\nNVM Hit Ratio :   0.00%\n"
        );
        assert_eq!(hit_ratio_since_last(CUR, &prev, &prev), "");

        for st in [CUR, OLD] {
            let hit = hit_ratios_since(&cur.cache, &prev);
            let line = progress_line(st, 0, (1, 2, 3), 5, &cur.cache, hit);
            let block = progress_stats_block(st, &line, &cur, &prev);
            let expected = format!(
                "{line}== Allocator Stats ==\n{}== Hit Ratio Stats Since Last ==\n{}== Throughput Stats ==\n{}\n",
                allocator_stats(st, &cur),
                hit_ratio_since_last(st, &cur.cache, &prev),
                throughput_stats(st, &cur)
            );
            assert_eq!(block, expected);
        }
    }
}
