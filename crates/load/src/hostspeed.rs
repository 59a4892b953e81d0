//! Host speed drift: is this machine as fast at the end of a run as at its
//! start?
//!
//! On shared or virtual machines the speed of a CPU can change by tens of
//! percent while a benchmark runs (noisy neighbours on the same physical
//! cores or sharing their caches and memory, frequency changes), and no
//! search can give reproducible numbers then. A [`SpeedSampler`] times two
//! fixed units of work in thread CPU time every few seconds on a background
//! thread (well under 1% of one core): a chain of integer operations (the
//! core's speed) and a chain of dependent loads over a 32 MiB table (the
//! latency of the shared last-level cache and memory, which neighbours
//! disturb most). The run reports how much each unit's cost varied, so a
//! result measured while the machine changed speed is flagged instead of
//! trusted.

use serde::Serialize;
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// Iterations of the work unit: about 1 ms on a current x86 core.
const UNIT_ITERATIONS: u64 = 1_000_000;
/// Entries (u32) of the memory unit's table: 32 MiB, beyond most L2s and
/// around the size of a shared L3.
const TABLE_ENTRIES: usize = 8 << 20;
/// Dependent loads of one memory unit.
const MEMORY_LOADS: usize = 20_000;

/// Thread CPU time of the calling thread.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The fixed unit of work: a dependent chain of multiplies, adds and shifts
/// (no memory traffic, so it measures the core, not the caches).
fn work_unit(seed: u64) -> u64 {
    let mut x = seed | 1;
    for i in 0..UNIT_ITERATIONS {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i);
        x ^= x >> 29;
    }
    black_box(x)
}

/// A random cyclic permutation: following `next = table[next]` visits every
/// entry once (Sattolo's algorithm), so the loads cannot be predicted.
fn chase_table(entries: usize) -> Vec<u32> {
    let mut t: Vec<u32> = (0..entries as u32).collect();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in (1..entries).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let j = (x % i as u64) as usize;
        t.swap(i, j);
    }
    t
}

/// The memory unit: `MEMORY_LOADS` dependent loads through the table.
fn memory_unit(table: &[u32], start: usize) -> u32 {
    let mut at = start % table.len();
    for _ in 0..MEMORY_LOADS {
        at = table[at] as usize;
    }
    black_box(at as u32)
}

/// The cheapest of three timings of `f`, in microseconds of thread CPU time
/// (the minimum drops runs disturbed by an interrupt).
fn cheapest_us(mut f: impl FnMut(u64)) -> f64 {
    (0..3)
        .map(|k| {
            let t0 = thread_cpu();
            f(k);
            (thread_cpu() - t0).as_secs_f64() * 1e6
        })
        .fold(f64::INFINITY, f64::min)
}

/// One sample of the integer unit, microseconds of CPU time.
pub fn sample_unit_us() -> f64 {
    cheapest_us(|k| {
        work_unit(k);
    })
}

/// What the samples of both units say.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct HostSpeed {
    /// The integer unit (the core's speed).
    pub cpu: UnitStats,
    /// The dependent-load unit (shared cache and memory latency).
    pub memory: UnitStats,
    /// The larger of the two units' spreads, percent.
    pub drift_pct: f64,
    /// The host at the start and at the end of the sampling, with the
    /// share of a core the sampler got (absent in older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<HostCheck>,
}

impl HostSpeed {
    fn from_pairs(cpu: &[f64], memory: &[f64]) -> Option<HostSpeed> {
        let (cpu, memory) = (
            UnitStats::from_samples(cpu)?,
            UnitStats::from_samples(memory)?,
        );
        Some(HostSpeed {
            drift_pct: cpu.drift_pct.max(memory.drift_pct),
            cpu,
            memory,
            check: None,
        })
    }
}

/// Statistics of one unit's samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct UnitStats {
    pub samples: usize,
    /// Cost of the work unit, microseconds of CPU time.
    pub unit_us_min: f64,
    pub unit_us_median: f64,
    pub unit_us_max: f64,
    /// Spread of the unit's cost over the run: (90th - 10th percentile) /
    /// median, in percent. A few percent is normal; tens of percent mean the
    /// machine's speed changed during the run.
    pub drift_pct: f64,
}

impl UnitStats {
    /// Statistics of `samples` (microseconds); `None` without samples.
    pub fn from_samples(samples: &[f64]) -> Option<UnitStats> {
        let mut v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        let median = at(0.5);
        Some(UnitStats {
            samples: v.len(),
            unit_us_min: v[0],
            unit_us_median: median,
            unit_us_max: v[v.len() - 1],
            drift_pct: if median > 0.0 {
                (at(0.9) - at(0.1)) / median * 100.0
            } else {
                0.0
            },
        })
    }
}

/// Wall-clock time, for the share of a core a measurement got.
fn wall() -> std::time::Instant {
    std::time::Instant::now()
}

/// One look at the host, taken on the calling thread: the cost of the two
/// work units and the share of a core the thread got while running them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct HostLook {
    /// The integer unit's cheapest cost, microseconds of thread CPU time.
    pub cpu_unit_us: f64,
    /// The dependent-load unit's cheapest cost, microseconds.
    pub memory_unit_us: f64,
    /// Thread CPU time over wall-clock time while the units ran (about
    /// [`LOOK_WALL`]): 1.0 when the thread had a core to itself, 0.5 when
    /// another runnable thread took half of it (a CPU hog, a build). A
    /// unit's cost in CPU time hides that; this ratio shows it.
    pub cpu_share: f64,
    pub unix_ms: u64,
}

/// How long one [`HostLook`] runs the units, at least: long enough for the
/// scheduler's time slices (a few ms) to average out.
pub const LOOK_WALL: Duration = Duration::from_millis(200);

/// The host before and after a run (see [`HostCheck::concerns`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct HostCheck {
    pub before: HostLook,
    pub after: HostLook,
}

/// What a run can vouch for: the host's units may change by up to
/// [`CHECK_CHANGE_PCT`] between before and after, and the measuring thread
/// must get at least [`CHECK_MIN_SHARE`] of a core each time.
pub const CHECK_CHANGE_PCT: f64 = 10.0;
pub const CHECK_MIN_SHARE: f64 = 0.9;

impl HostCheck {
    /// The larger change of the two units' costs from before to after, in
    /// percent of the before value (signed: positive when slower after).
    pub fn change_pct(&self) -> f64 {
        let pct = |b: f64, a: f64| if b > 0.0 { (a / b - 1.0) * 100.0 } else { 0.0 };
        let cpu = pct(self.before.cpu_unit_us, self.after.cpu_unit_us);
        let mem = pct(self.before.memory_unit_us, self.after.memory_unit_us);
        if cpu.abs() >= mem.abs() { cpu } else { mem }
    }

    /// Why the host cannot be trusted for this run, one sentence each;
    /// empty when it can.
    pub fn concerns(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (when, l) in [("before", &self.before), ("after", &self.after)] {
            if l.cpu_share < CHECK_MIN_SHARE {
                out.push(format!(
                    "host busy {when} the run: a thread got {:.0}% of a core running a fixed unit of work ({:.0}% needed): other processes compete for the CPUs",
                    l.cpu_share * 100.0,
                    CHECK_MIN_SHARE * 100.0
                ));
            }
        }
        let change = self.change_pct();
        if change.abs() > CHECK_CHANGE_PCT {
            out.push(format!(
                "host speed changed during the run: a fixed unit of integer work took {:.0} us before and {:.0} us after, one of dependent memory loads {:.0} and {:.0} us ({change:+.0}%, more than {CHECK_CHANGE_PCT:.0}%)",
                self.before.cpu_unit_us,
                self.after.cpu_unit_us,
                self.before.memory_unit_us,
                self.after.memory_unit_us
            ));
        }
        out
    }
}

/// A [`HostCheck`] as reports give it: both looks and the change.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct HostCheckMetrics {
    pub before: HostLook,
    pub after: HostLook,
    /// [`HostCheck::change_pct`], rounded to 0.001.
    pub change_pct: f64,
}

impl HostCheck {
    /// The report's figures.
    pub fn metrics(&self) -> HostCheckMetrics {
        HostCheckMetrics {
            before: self.before,
            after: self.after,
            change_pct: (self.change_pct() * 1000.0).round() / 1000.0,
        }
    }
}

/// Takes [`HostLook`]s: the memory unit's table is built once (about
/// 100 ms, 32 MiB), so the looks before and after a run cost only
/// [`LOOK_WALL`] each.
pub struct HostChecker {
    table: Vec<u32>,
    before: HostLook,
}

impl HostChecker {
    /// Builds the table and takes the look before the run.
    pub fn start() -> Self {
        let table = chase_table(TABLE_ENTRIES);
        let before = look(&table);
        HostChecker { table, before }
    }

    /// Takes the look after the run.
    pub fn finish(self) -> HostCheck {
        HostCheck {
            before: self.before,
            after: look(&self.table),
        }
    }
}

/// Runs both units in turn for at least [`LOOK_WALL`] (three of each at
/// least), keeping each unit's cheapest cost and the share of a core.
fn look(table: &[u32]) -> HostLook {
    let (w0, c0) = (wall(), thread_cpu());
    let (mut cpu, mut mem) = (f64::INFINITY, f64::INFINITY);
    let mut k = 0u64;
    while k < 3 || w0.elapsed() < LOOK_WALL {
        let t = thread_cpu();
        work_unit(k);
        let t1 = thread_cpu();
        memory_unit(table, k as usize * 7919);
        let t2 = thread_cpu();
        cpu = cpu.min((t1 - t).as_secs_f64() * 1e6);
        mem = mem.min((t2 - t1).as_secs_f64() * 1e6);
        k += 1;
    }
    let wall_s = w0.elapsed().as_secs_f64();
    let cpu_s = (thread_cpu() - c0).as_secs_f64();
    HostLook {
        cpu_unit_us: cpu,
        memory_unit_us: mem,
        cpu_share: if wall_s > 0.0 {
            (cpu_s / wall_s).min(1.0)
        } else {
            1.0
        },
        unix_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
    }
}

/// Samples the host's speed on a background thread until finished.
pub struct SpeedSampler {
    stop: Arc<AtomicBool>,
    taken: Arc<std::sync::atomic::AtomicUsize>,
    handle: Option<JoinHandle<Sampled>>,
}

/// What the sampler thread collected: the units' samples and the looks
/// at the start and the end.
type Sampled = (Vec<f64>, Vec<f64>, HostLook, HostLook);

impl SpeedSampler {
    /// Takes a sample now and then every `every`.
    pub fn start(every: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let taken = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = taken.clone();
        let handle = std::thread::Builder::new()
            .name("host-speed".into())
            .spawn(move || {
                let table = chase_table(TABLE_ENTRIES);
                let first = look(&table);
                let (mut cpu, mut mem) = (Vec::new(), Vec::new());
                let sample = |cpu: &mut Vec<f64>, mem: &mut Vec<f64>| {
                    cpu.push(sample_unit_us());
                    mem.push(cheapest_us(|k| {
                        memory_unit(&table, k as usize * 7919);
                    }));
                    count.fetch_add(1, Ordering::Relaxed);
                };
                loop {
                    sample(&mut cpu, &mut mem);
                    let mut waited = Duration::ZERO;
                    while waited < every {
                        if flag.load(Ordering::Relaxed) {
                            // One last sample at the end of the run.
                            sample(&mut cpu, &mut mem);
                            return (cpu, mem, first, look(&table));
                        }
                        let step = Duration::from_millis(50).min(every - waited);
                        std::thread::sleep(step);
                        waited += step;
                    }
                }
            })
            .ok();
        SpeedSampler {
            stop,
            taken,
            handle,
        }
    }

    /// Samples taken so far.
    pub fn samples_taken(&self) -> usize {
        self.taken.load(Ordering::Relaxed)
    }

    /// Stops sampling (taking one last sample) and returns the statistics.
    pub fn finish(mut self) -> Option<HostSpeed> {
        self.stop.store(true, Ordering::Relaxed);
        let (cpu, mem, before, after) = self.handle.take()?.join().ok()?;
        let mut h = HostSpeed::from_pairs(&cpu, &mem)?;
        h.check = Some(HostCheck { before, after });
        Some(h)
    }
}

impl Drop for SpeedSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_of_known_samples() {
        // Ten samples: 100..=109 us and one slow period at 150 us.
        let mut s: Vec<f64> = (100..110).map(f64::from).collect();
        s.push(150.0);
        let h = UnitStats::from_samples(&s).unwrap();
        assert_eq!(h.samples, 11);
        assert_eq!(h.unit_us_min, 100.0);
        assert_eq!(h.unit_us_max, 150.0);
        assert_eq!(h.unit_us_median, 105.0);
        // p10 = 101, p90 = 109: (109 - 101) / 105.
        assert!((h.drift_pct - 8.0 / 105.0 * 100.0).abs() < 1e-9, "{h:?}");
        assert!(UnitStats::from_samples(&[]).is_none());
        assert!(UnitStats::from_samples(&[f64::NAN]).is_none());
        let both = HostSpeed::from_pairs(&s, &[10.0, 10.0, 10.0]).unwrap();
        assert_eq!(both.drift_pct, h.drift_pct);
        assert_eq!(both.memory.drift_pct, 0.0);
    }

    #[test]
    fn sampler_collects_and_stops() {
        let s = SpeedSampler::start(Duration::from_millis(20));
        // Wait for two periodic samples however slow the machine is (an
        // unoptimised build on a busy host builds the table slowly).
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while s.samples_taken() < 2 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let h = s.finish().unwrap();
        assert!(h.cpu.samples >= 3, "{h:?}");
        assert_eq!(h.cpu.samples, h.memory.samples);
        let c = h.check.unwrap();
        assert!(c.before.unix_ms <= c.after.unix_ms, "{c:?}");
        assert!(c.after.cpu_share > 0.0 && c.after.cpu_share <= 1.0, "{c:?}");
        assert!(h.cpu.unit_us_min > 0.0 && h.cpu.unit_us_min <= h.cpu.unit_us_max);
        assert!(h.memory.unit_us_min > 0.0);
    }

    fn look_of(cpu: f64, mem: f64, share: f64) -> HostLook {
        HostLook {
            cpu_unit_us: cpu,
            memory_unit_us: mem,
            cpu_share: share,
            unix_ms: 0,
        }
    }

    #[test]
    fn a_host_check_names_a_busy_or_changed_host() {
        let steady = HostCheck {
            before: look_of(1000.0, 2000.0, 0.99),
            after: look_of(1040.0, 1950.0, 0.97),
        };
        assert!(steady.concerns().is_empty(), "{:?}", steady.concerns());
        assert!((steady.change_pct() - 4.0).abs() < 1e-9);
        let busy = HostCheck {
            after: look_of(1000.0, 2000.0, 0.5),
            ..steady
        };
        let c = busy.concerns();
        assert_eq!(c.len(), 1, "{c:?}");
        assert!(
            c[0].starts_with("host busy after the run: a thread got 50% of a core"),
            "{c:?}"
        );
        let slower = HostCheck {
            after: look_of(1000.0, 2600.0, 1.0),
            ..steady
        };
        let c = slower.concerns();
        assert_eq!(c.len(), 1, "{c:?}");
        assert!(c[0].contains("(+30%, more than 10%)"), "{c:?}");
        assert!((slower.change_pct() - 30.0).abs() < 1e-9);
    }

    #[test]
    fn a_look_measures_both_units_and_the_share() {
        let table = chase_table(1 << 16);
        let l = look(&table);
        assert!(l.cpu_unit_us > 100.0, "{l:?}");
        assert!(l.memory_unit_us > 0.0, "{l:?}");
        assert!(l.cpu_share > 0.0 && l.cpu_share <= 1.0, "{l:?}");
    }

    #[test]
    fn the_chase_table_is_one_cycle() {
        let t = chase_table(1000);
        let (mut at, mut steps) = (0usize, 0);
        loop {
            at = t[at] as usize;
            steps += 1;
            if at == 0 {
                break;
            }
        }
        assert_eq!(steps, 1000);
    }

    #[test]
    fn the_unit_costs_cpu_time() {
        // A million dependent multiply-add-shift steps cannot take under 100 us.
        let us = sample_unit_us();
        assert!(us > 100.0, "{us}");
    }
}
