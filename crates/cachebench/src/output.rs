//! CacheBench's text output, laid out line for line as upstream CacheBench
//! prints it, so that scripts written against upstream's stdout (and its
//! `--progress_stats_file`) parse ours unchanged.
//!
//! What a run prints, in order, and the function here for each part:
//!
//! 1. the config file verbatim under `===JSON Config===` ([`config_echo`]),
//!    then [`WELCOME`];
//! 2. the workload generator's set-up lines ([`keys_created`],
//!    [`generating_accesses`], [`generated_patterns`]);
//! 3. `Total X.XXM ops to be run` ([`ops_to_be_run`]); [`header`] is
//!    1 + 3 for callers that print no generator lines;
//! 4. every `--progress` seconds a [`progress_line`] (and, with a stats
//!    file, a [`progress_stats_block`] appended to it);
//! 5. the end-of-run [`final_report`]: `== Test Results ==`,
//!    `== Allocator Stats ==` with [`allocator_stats`], `== Throughput for
//!    ==` with [`throughput_stats`], then the failure lines, if any.
//!    Upstream prints no closing word (no `Finished!`/`Failed.`): the exit
//!    status (0 with no failure line, else 1) carries the verdict.
//!
//! Every function returns whole lines, each ending in `\n`.
//!
//! Number formatting follows upstream's (folly format): `{:,}` groups
//! thousands with commas, fixed-point values round half away from zero
//! (as double-conversion does; Rust's own `{:.2}` rounds exact ties to
//! even), labels are left-aligned and numbers right-aligned in their
//! fields.
//!
//! Without an NVM tier the NVM lines upstream prints on every run (`Items
//! in NVM`, `NVM Gets`, `NVM Puts`, `NVM Evicts`, `NVM Deletes`) show
//! zeros, as upstream shows them for a DRAM-only cache; the block upstream
//! prints only after NVM traffic (`RAM Hit Ratio`/`NVM Hit Ratio`, the
//! device's `NVM Read  Latency`/`NVM Write Latency` percentiles, bytes
//! written, write amplification) appears once NVM saw a get, put or
//! delete. Blocks of features not built (background evictors, API latency
//! and per-class memory reports behind flags, item destructors, navy's
//! `BlockCache` latency blocks) are left out.

use std::fmt::Write as _;

use crate::cache::HybridCounters;
use crate::stats::{CacheStats, RunStats, Throughput};

/// The line upstream's ProgressTracker writes to `--progress_stats_file`
/// when it opens it (for appending) at the start of a run.
pub const STATS_FILE_HEADER: &str = "=== Starting new run ===\n";

/// The line upstream's `main` prints once the config is parsed.
pub const WELCOME: &str = "Welcome to OSS version of cachebench";

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
/// binary value (folly's `{:.Nf}`).
fn fixed(v: f64, prec: usize) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    // An f64 has at most 1074 fractional decimal digits, so this expansion
    // is exact and only the digit after the last kept one decides.
    let exact = format!("{:.1100}", v.abs());
    let (int, frac) = exact.split_once('.').expect("fixed-point text has a point");
    let mut digits: Vec<u8> = int.bytes().chain(frac.bytes().take(prec)).collect();
    let mut int_len = int.len();
    if frac.as_bytes()[prec] >= b'5' {
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
    out.push_str(std::str::from_utf8(&digits[..int_len]).expect("ascii digits"));
    if prec > 0 {
        out.push('.');
        out.push_str(std::str::from_utf8(&digits[int_len..]).expect("ascii digits"));
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

/// `Total 3.20M ops to be run`, printed when the stressor starts
/// (upstream `CacheStressor::start`); `total_ops` is numOps × numThreads.
pub fn ops_to_be_run(total_ops: u64) -> String {
    format!(
        "Total {}M ops to be run\n",
        fixed(total_ops as f64 / 1e6, 2)
    )
}

/// The start of a run for callers without generator lines: the config echo,
/// [`WELCOME`] and the total op count. A caller whose workload generator
/// prints its set-up lines puts them between [`config_echo`] + [`WELCOME`]
/// and [`ops_to_be_run`] instead, as upstream does.
pub fn header(config_json_echo: &str, total_ops: u64) -> String {
    format!(
        "{}{WELCOME}\n{}",
        config_echo(config_json_echo),
        ops_to_be_run(total_ops)
    )
}

/// `Created 897,355 keys in 0.00 mins` (upstream `WorkloadGenerator`
/// after generating keys; `mins` is whole seconds / 60 there).
pub fn keys_created(keys: u64, mins: f64) -> String {
    format!("Created {} keys in {} mins\n", commas(keys), fixed(mins, 2))
}

/// `Generating 1.60M sampled accesses`, once per pool (upstream
/// `WorkloadGenerator` before sampling a pool's key popularity).
pub fn generating_accesses(accesses: u64) -> String {
    format!(
        "Generating {}M sampled accesses\n",
        fixed(accesses as f64 / 1e6, 2)
    )
}

/// `Generated access patterns in 0.00 mins` (upstream `WorkloadGenerator`
/// once all pools are sampled).
pub fn generated_patterns(mins: f64) -> String {
    format!("Generated access patterns in {} mins\n", fixed(mins, 2))
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

/// The line printed every `--progress` seconds (upstream
/// `ProgressTracker::work`), e.g.
/// `12:07:02       1.23M ops completed. Hit Ratio  10.97% (RAM  10.97%, NVM   0.00%)`:
/// local wall-clock time, operations done so far (all threads, in
/// millions) and the hit ratios since the previous progress line
/// ([`hit_ratios_since`]).
pub fn progress_line(wall_clock: (u32, u32, u32), ops_done: u64, hit: HitRatios) -> String {
    let (h, m, s) = wall_clock;
    format!(
        "{h:02}:{m:02}:{s:02} {:>10}M ops completed. Hit Ratio {:>6}% (RAM {:>6}%, NVM {:>6}%)\n",
        fixed(ops_done as f64 / 1e6, 2),
        fixed(hit.overall, 2),
        fixed(hit.ram, 2),
        fixed(hit.nvm, 2),
    )
}

/// The gets since `prev` and their hit ratios (upstream
/// `Stats::render(prevStats, out)`); empty when no get happened since.
pub fn hit_ratio_since_last(cur: &CacheStats, prev: &CacheStats) -> String {
    if cur.gets <= prev.gets {
        return String::new();
    }
    let r = hit_ratios_since(cur, prev);
    format!(
        "Cache Gets    : {}\nHit Ratio     : {:>6}%\nRAM Hit Ratio : {:>6}%\nNVM Hit Ratio : {:>6}%\n",
        commas(cur.gets - prev.gets),
        fixed(r.overall, 2),
        fixed(r.ram, 2),
        fixed(r.nvm, 2),
    )
}

/// What upstream's `ProgressTracker::work` appends to
/// `--progress_stats_file` at each interval: the progress line, the
/// allocator stats, the hit ratios since the previous interval, the
/// throughput so far (rates over `cur.elapsed_secs`) and a blank line.
pub fn progress_stats_block(line: &str, cur: &RunStats, prev: &CacheStats) -> String {
    let mut out = String::new();
    out.push_str(line);
    if !line.ends_with('\n') {
        out.push('\n');
    }
    out.push_str("== Allocator Stats ==\n");
    out.push_str(&allocator_stats(cur));
    out.push_str("== Hit Ratio Stats Since Last ==\n");
    out.push_str(&hit_ratio_since_last(&cur.cache, prev));
    out.push_str("== Throughput Stats ==\n");
    out.push_str(&throughput_stats(cur));
    out.push('\n');
    out
}

// ---------------------------------------------------------------------------
// End of run.

/// The allocator counters (upstream `Stats::render`), without a heading:
/// items, allocation and eviction attempts with their success, evictions,
/// how full each pool is, gets and the hit ratio (only after a get), the
/// NVM lines (zeros: no NVM tier) and the eviction total (only after an
/// eviction).
///
/// A pool's `Fraction of pool N used` is upstream's 1 − free / usable
/// memory at slab granularity: the slabs the pool holds over its slab
/// budget (0 for a pool with no budget). Upstream also counts freed slots
/// inside held slabs as free, which our counters do not expose.
pub fn allocator_stats(s: &RunStats) -> String {
    let c = &s.cache;
    let sum = |f: fn(&crate::stats::PoolStats) -> u64| c.pools.iter().map(f).sum::<u64>();
    let items = sum(|p| p.items);
    let alloc_attempts = sum(|p| p.alloc_attempts);
    let alloc_failures = alloc_attempts.saturating_sub(sum(|p| p.alloc_successes));
    let evict_attempts = sum(|p| p.evict_attempts);
    let evictions = sum(|p| p.evictions);

    let nvm = c.nvm.as_ref();
    let n = nvm_counters(c);
    let mut out = String::new();
    let _ = writeln!(out, "Items in RAM  : {}", commas(items));
    let _ = writeln!(
        out,
        "Items in NVM  : {}",
        commas(nvm.map_or(0, |x| x.engine.items()))
    );
    let _ = writeln!(
        out,
        "Alloc Attempts: {} Success: {}%",
        commas(alloc_attempts),
        fixed(inv_pct(alloc_failures, alloc_attempts), 2)
    );
    let _ = writeln!(
        out,
        "Evict Attempts: {} Success: {}%",
        commas(evict_attempts),
        fixed(pct(evictions, evict_attempts), 2)
    );
    let _ = writeln!(out, "RAM Evictions : {}", commas(evictions));
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
            commas(pid as u64),
            fixed(used, 2)
        );
    }
    if c.gets > 0 {
        let _ = writeln!(out, "Cache Gets    : {}", commas(c.gets));
        let _ = writeln!(
            out,
            "Hit Ratio     : {:>6}%",
            fixed(inv_pct(total_misses(c), c.gets), 2)
        );
    }
    if let Some(x) = nvm.filter(|_| n.nvm_gets > 0 || n.nvm_deletes > 0 || n.puts > 0) {
        out.push_str(&nvm_traffic(c, x));
    }
    let e = nvm.map(|x| &x.engine);
    let _ = writeln!(
        out,
        "{:<14}: {:>15}, {:<10}: {:>6}%",
        "NVM Gets",
        commas(n.nvm_gets),
        "Coalesced",
        fixed(pct(n.coalesced, n.nvm_gets), 2)
    );
    let _ = writeln!(
        out,
        "{:<14}: {:>15}, {:<10}: {:>6}%, {:<8}: {:>6}%, {:<16}: {:>8}, {:<16}: {:>8}",
        "NVM Puts",
        commas(n.puts),
        "Success",
        fixed(inv_pct(n.put_errors + n.aborts_from_del, n.puts), 2),
        "Clean",
        fixed(pct(0, n.puts), 2),
        "AbortsFromDel",
        commas(n.aborts_from_del),
        "AbortsFromGet",
        commas(0)
    );
    let nvm_evictions = e.map_or(0, |e| e.evictions());
    let _ = writeln!(
        out,
        "{:<14}: {:>15}, {:<10}: {:>6}%, {:<8}: {:>7}, {:<16}: {:>8}",
        "NVM Evicts",
        commas(nvm_evictions),
        "Clean",
        fixed(pct(0, nvm_evictions), 2),
        "Unclean",
        commas(0),
        "Double",
        commas(0)
    );
    let _ = writeln!(
        out,
        "{:<14}: {:>15} {:<14}: {:>6}%",
        "NVM Deletes",
        commas(n.nvm_deletes),
        "Skipped Deletes",
        fixed(pct(e.map_or(0, |e| e.removes_skipped), n.nvm_deletes), 2)
    );
    let r = &c.release;
    if r.slabs_released > 0 {
        let _ = writeln!(
            out,
            "Released {} slabs\n  Moves     : attempts: {:>10}, success: {:>6}%\n  Evictions : attempts: {:>10}, success: {:>6}%",
            commas(r.slabs_released),
            commas(r.move_attempts),
            fixed(pct(r.move_successes, r.move_attempts), 2),
            commas(r.eviction_attempts),
            fixed(pct(r.eviction_successes, r.eviction_attempts), 2)
        );
    }
    if evictions > 0 {
        // Upstream prints the number without grouping.
        let _ = writeln!(out, "Total eviction executed {evictions}");
    }
    out
}

/// The block upstream prints once NVM saw traffic: RAM and NVM hit
/// ratios, eviction rejects, the device's read and write latency
/// percentiles (µs per device I/O call, as upstream's `NVM Read  Latency`
/// and `NVM Write Latency`) and bytes written with the write amplification.
fn nvm_traffic(c: &CacheStats, x: &crate::cache::NvmSide) -> String {
    let n = &x.counters;
    let mut out = String::new();
    let _ = write!(
        out,
        "RAM Hit Ratio : {:>6}%\nNVM Hit Ratio : {:>6}%\n",
        fixed(inv_pct(misses(c), c.gets), 2),
        fixed(inv_pct(n.nvm_get_misses, n.nvm_gets), 2)
    );
    let _ = write!(
        out,
        "RAM eviction rejects expiry : {}\nRAM eviction rejects clean : {}\n",
        commas(n.rejects_expiry),
        commas(n.rejects_clean)
    );
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
    // Upstream's figures are navy's device latency (`navy_device_read_latency_us`
    // and `navy_device_write_latency_us`): the time of each device read and
    // write call, whole microseconds.
    for (cat, h) in [
        ("NVM Read  Latency", &x.engine.device.read_latency_us),
        ("NVM Write Latency", &x.engine.device.write_latency_us),
    ] {
        for (name, q) in quantiles {
            let v = if h.is_empty() {
                0.0
            } else {
                h.value_at_quantile(q) as f64
            };
            let _ = writeln!(out, "{cat:<20} {name:<8} : {:>10} us", fixed(v, 2));
        }
    }
    const GB: f64 = 1024.0 * 1024.0 * 1024.0;
    let physical = x.engine.device.bytes_written;
    let logical = x.engine.logical_bytes_written();
    let _ = writeln!(
        out,
        "NVM bytes written (physical)  : {:>6} GB",
        fixed(physical as f64 / GB, 2)
    );
    let _ = writeln!(
        out,
        "NVM bytes written (logical)   : {:>6} GB",
        fixed(logical as f64 / GB, 2)
    );
    let _ = writeln!(
        out,
        "NVM bytes written (nand)      : {:>6} GB",
        fixed(0.0, 2)
    );
    let _ = writeln!(
        out,
        "NVM app write amplification   : {:>6}",
        fixed(pct(physical, logical) / 100.0, 2)
    );
    let _ = writeln!(out, "NVM dev write amplification   : {:>6}", fixed(0.0, 2));
    out
}

/// The stressor's operation counters (upstream `ThroughputStats::render`),
/// without a heading: total ops (millions), total sets, then per
/// operation kind its rate over `s.elapsed_secs` (truncated; 0 when no
/// time elapsed) and success share (0 when none was issued). `update` and
/// `addChained` appear only when some were issued.
pub fn throughput_stats(s: &RunStats) -> String {
    let t: &Throughput = &s.throughput;
    let secs = s.elapsed_secs;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<10}: {} million",
        "Total Ops",
        fixed(t.ops as f64 / 1e6, 2)
    );
    let _ = writeln!(out, "{:<10}: {}", "Total sets", commas(t.sets));
    let mut row = |op: &str, n: u64, what: &str, rate: f64| {
        let _ = writeln!(
            out,
            "{:<10}: {:>9}/s, {:<10}: {:>6}%",
            op,
            commas(per_sec(n, secs)),
            what,
            fixed(rate, 2)
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

/// The end-of-run report (upstream `Runner::run`): `== Test Results ==`,
/// `== Allocator Stats ==` and [`allocator_stats`], a blank line,
/// `== Throughput for  ==` (two spaces, as upstream) and
/// [`throughput_stats`], a blank line, then each of `failures` on its own
/// line: why the run failed, in upstream's words where it has them (its
/// `Stats::renderIsTestPassed`, e.g. `Found 3 inconsistent cases`).
/// Upstream prints nothing after that; the run passed (exit status 0) iff
/// `failures` is empty.
pub fn final_report(s: &RunStats, failures: &[&str]) -> String {
    let mut out = String::from("== Test Results ==\n== Allocator Stats ==\n");
    out.push_str(&allocator_stats(s));
    out.push_str("\n== Throughput for  ==\n");
    out.push_str(&throughput_stats(s));
    out.push('\n');
    for f in failures {
        out.push_str(f);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::PoolStats;

    /// The NVM lines of a run without NVM traffic (upstream `Stats::render`:
    /// Coalesced, Clean and Skipped Deletes are shares of 0, so 0.00%; put
    /// Success is 100 minus a share of 0, so 100.00%).
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

    #[test]
    fn number_formats() {
        assert_eq!(commas(0), "0");
        assert_eq!(commas(999), "999");
        assert_eq!(commas(1_000), "1,000");
        assert_eq!(commas(2_559_176), "2,559,176");
        assert_eq!(commas(u64::MAX), "18,446,744,073,709,551,615");
        // Exact binary ties round away from zero (double-conversion), where
        // Rust's `{:.2}` would give 0.12 and 99.88.
        assert_eq!(fixed(0.125, 2), "0.13");
        assert_eq!(fixed(99.875, 2), "99.88");
        assert_eq!(fixed(0.375, 2), "0.38");
        // 2.675 is stored as 2.67499999..., so it rounds down.
        assert_eq!(fixed(2.675, 2), "2.67");
        assert_eq!(fixed(99.996, 2), "100.00");
        assert_eq!(fixed(9.999, 2), "10.00");
        assert_eq!(fixed(0.0, 2), "0.00");
        assert_eq!(fixed(3.2, 2), "3.20");
        assert_eq!(fixed(-1.005, 2), "-1.00");
        assert_eq!(fixed(f64::NAN, 2), "nan");
    }

    // Mirrors upstream `Stats::render`. By hand: items 60,000 + 36,995;
    // alloc attempts 1,000,000 + 1,559,176 with 1,000 failures →
    // 100 − 100·1000/2,559,176 = 99.9609 %; evictions 499,000 of 500,300
    // attempts = 99.7402 %; pool 0 holds 3 of 3 slabs (1.00), pool 1 5 of 7
    // (1 − 2/7 = 0.714); gets 480,592 with 480,592 − 52,713 = 427,879
    // misses → 100 − 89.0317 = 10.9683 %, printed in a width of 6.
    #[test]
    fn allocator_stats_busy_run() {
        let expected = format!(
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
        assert_eq!(allocator_stats(&busy()), expected);
    }

    // Mirrors upstream `Stats::render` before any work: no attempts means
    // alloc success 100 − 0 = 100.00 % but evict success 0.00 %; no gets
    // means no Cache Gets / Hit Ratio lines; no evictions, no total line.
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
        assert_eq!(allocator_stats(&s), expected);
    }

    // Mirrors upstream `ThroughputStats::render`. By hand over 2.5 s:
    // gets 480,592/2.5 = 192,236.8 → 192,236/s, success 52,713/480,592 =
    // 10.968 %; couldExist none → 0/s, 0.00 %; sets 2,559,176/2.5 =
    // 1,023,670.4 → 1,023,670/s (exactly fills width 9), none failed →
    // 100.00 %; dels 160,232/2.5 = 64,092.8 → 64,092/s, found 17,352/160,232
    // = 10.829 %; no updates → no line; addChained 10/2.5 = 4/s, 9/10 =
    // 90.00 %.
    #[test]
    fn throughput_stats_busy_run() {
        let expected = "\
Total Ops : 3.20 million
Total sets: 2,559,176
get       :   192,236/s, success   :  10.97%
couldExist:         0/s, success   :   0.00%
set       : 1,023,670/s, success   : 100.00%
del       :    64,092/s, found     :  10.83%
addChained:         4/s, success   :  90.00%
";
        assert_eq!(throughput_stats(&busy()), expected);
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
        assert_eq!(throughput_stats(&s), expected);
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
        assert_eq!(throughput_stats(&RunStats::default()), expected);
    }

    // Mirrors upstream `Runner::run`: headings, a blank line before the
    // throughput heading (which has two spaces), a blank line after it,
    // then the failure lines of `Stats::renderIsTestPassed`.
    #[test]
    fn final_report_layout() {
        let s = busy();
        let report = final_report(&s, &[]);
        let expected = format!(
            "== Test Results ==\n== Allocator Stats ==\n{}\n== Throughput for  ==\n{}\n",
            allocator_stats(&s),
            throughput_stats(&s)
        );
        assert_eq!(report, expected);
        assert!(report.ends_with("addChained:         4/s, success   :  90.00%\n\n"));
        assert_eq!(
            final_report(&s, &["Found 3 inconsistent cases"]),
            format!("{expected}Found 3 inconsistent cases\n")
        );
    }

    // Mirrors upstream `CacheBenchConfig` (echo), `main` (welcome) and
    // `CacheStressor::start` (numOps × numThreads in millions).
    #[test]
    fn header_lines() {
        let json = "{\n  \"cache_config\": {}\n}";
        assert_eq!(
            header(json, 3_200_000),
            "===JSON Config===\n{\n  \"cache_config\": {}\n}\n\
             Welcome to OSS version of cachebench\nTotal 3.20M ops to be run\n"
        );
        assert_eq!(ops_to_be_run(0), "Total 0.00M ops to be run\n");
        assert_eq!(
            ops_to_be_run(12_345_678_901),
            "Total 12345.68M ops to be run\n"
        );
    }

    // Mirrors upstream `WorkloadGenerator::generateKeys` /
    // `generateKeyDistributions`.
    #[test]
    fn generator_lines() {
        assert_eq!(
            keys_created(897_355, 0.0),
            "Created 897,355 keys in 0.00 mins\n"
        );
        assert_eq!(
            generating_accesses(1_600_000),
            "Generating 1.60M sampled accesses\n"
        );
        assert_eq!(
            generated_patterns(0.5),
            "Generated access patterns in 0.50 mins\n"
        );
    }

    // Mirrors upstream `ProgressTracker::work` and `Stats::getHitRatios`.
    // By hand: 1,000 gets since prev with 250 new misses → 75.00 %.
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
            ..CacheStats::default()
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
            progress_line((12, 7, 2), 1_234_567, r),
            "12:07:02       1.23M ops completed. Hit Ratio  75.00% (RAM  75.00%, NVM   0.00%)\n"
        );
        // No gets since the last line: all ratios 0.
        let idle = hit_ratios_since(&cur, &cur);
        assert_eq!(idle, HitRatios::default());
        assert_eq!(
            progress_line((0, 0, 9), 0, idle),
            "00:00:09       0.00M ops completed. Hit Ratio   0.00% (RAM   0.00%, NVM   0.00%)\n"
        );
        // Ten digits of millions fill the field exactly; more widen it.
        assert_eq!(
            progress_line(
                (23, 59, 59),
                123_456_789_000_000,
                HitRatios {
                    overall: 100.0,
                    ram: 100.0,
                    nvm: 0.0
                }
            ),
            "23:59:59 123456789.00M ops completed. Hit Ratio 100.00% (RAM 100.00%, NVM   0.00%)\n"
        );
    }

    // Mirrors upstream `Cache::getStats`: `NVM Read  Latency` and `NVM
    // Write Latency` are navy's device latency (navy_device_read_latency_us,
    // navy_device_write_latency_us), not the engine's lookup and insert
    // times. Here the device took 77 us per read and 120-130 us per write
    // while the engine's lookups (Bloom filter answers, no I/O) took 1 us.
    #[test]
    fn nvm_latency_lines_are_the_device_latency() {
        let mut s = RunStats::default();
        s.cache.pools = vec![PoolStats::default()];
        let mut side = crate::cache::NvmSide::default();
        side.counters.nvm_gets = 10;
        side.counters.nvm_get_misses = 5;
        let mut engine = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
        engine.record_n(1, 100).unwrap();
        side.engine.read_latency_us = Some(engine.clone());
        side.engine.write_latency_us = Some(engine);
        side.engine.device.read_latency_us.record_n(77, 9).unwrap();
        side.engine.device.read_latency_us.record(900).unwrap();
        side.engine
            .device
            .write_latency_us
            .record_n(120, 5)
            .unwrap();
        side.engine
            .device
            .write_latency_us
            .record_n(130, 5)
            .unwrap();
        s.cache.nvm = Some(side);
        let out = allocator_stats(&s);
        for line in [
            "NVM Read  Latency    p50      :      77.00 us",
            "NVM Read  Latency    p90      :      77.00 us",
            "NVM Read  Latency    p100     :     900.00 us",
            "NVM Write Latency    p50      :     120.00 us",
            "NVM Write Latency    p100     :     130.00 us",
        ] {
            assert!(out.contains(line), "missing {line:?} in\n{out}");
        }
        assert!(!out.contains(":       1.00 us"), "{out}");
        // No device I/O yet: zeros, as upstream's missing navy stats.
        let mut idle = s.clone();
        if let Some(n) = idle.cache.nvm.as_mut() {
            n.engine.device = Default::default();
        }
        let out = allocator_stats(&idle);
        assert!(
            out.contains("NVM Read  Latency    p50      :       0.00 us"),
            "{out}"
        );
    }

    // Mirrors upstream `Stats::render(prevStats, out)` and the stats-file
    // part of `ProgressTracker::work`.
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
            hit_ratio_since_last(&cur.cache, &prev),
            "Cache Gets    : 1,000\nHit Ratio     :  75.00%\nRAM Hit Ratio :  75.00%\nNVM Hit Ratio :   0.00%\n"
        );
        assert_eq!(hit_ratio_since_last(&prev, &prev), "");

        let line = progress_line((1, 2, 3), 5, hit_ratios_since(&cur.cache, &prev));
        let block = progress_stats_block(&line, &cur, &prev);
        let expected = format!(
            "{line}== Allocator Stats ==\n{}== Hit Ratio Stats Since Last ==\n{}== Throughput Stats ==\n{}\n",
            allocator_stats(&cur),
            hit_ratio_since_last(&cur.cache, &prev),
            throughput_stats(&cur)
        );
        assert_eq!(block, expected);
    }
}
