//! `--bench`: finding rps_max, the rate at which the latency target is
//! just met with the whole footprint in use, by letting the latency
//! controller alone limit concurrency and waiting for the rate to settle.
//!
//! Settling is judged as rd-hashd does: every second a line is fitted to
//! the last `period` samples; the run has settled when the line's slope
//! and the trend of its fit error are small relative to the mean, and the
//! slopes of the recent windows do not keep one sign. `converges` settled
//! windows end a round; a round whose latency is within 5% of the target
//! gives rps_max.

/// How long and how strictly to wait for settling.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConvergeCfg {
    pub converges: usize,
    pub period: usize,
    pub min_secs: usize,
    pub max_secs: usize,
    pub slope: f64,
    pub err_slope: f64,
}

impl ConvergeCfg {
    /// rd-hashd's CPU saturation settings.
    pub const CPU: ConvergeCfg = ConvergeCfg {
        converges: 5,
        period: 15,
        min_secs: 15,
        max_secs: 90,
        slope: 0.01,
        err_slope: 0.025,
    };
    /// rd-hashd's memory up-rounds and bisection (the refinement uses
    /// [`ConvergeCfg::MEM_REFINE`]).
    pub const MEM: ConvergeCfg = ConvergeCfg {
        converges: 5,
        period: 15,
        min_secs: 30,
        max_secs: 90,
        slope: 0.01,
        err_slope: 0.025,
    };
    /// rd-hashd's memory refinement: longer windows, as the steps are small.
    pub const MEM_REFINE: ConvergeCfg = ConvergeCfg {
        min_secs: 60,
        max_secs: 240,
        ..ConvergeCfg::MEM
    };
    /// rd-hashd's single-CPU bench (`--bench-cpu-single`): settling judged
    /// on the latency.
    pub const CPU_SINGLE: ConvergeCfg = ConvergeCfg {
        converges: 3,
        period: 10,
        min_secs: 10,
        max_secs: 60,
        slope: 0.025,
        err_slope: 0.05,
    };
    /// The single-CPU bench under `--bench-test`: a few seconds a round.
    pub const SINGLE_TEST: ConvergeCfg = ConvergeCfg {
        converges: 2,
        period: 3,
        min_secs: 3,
        max_secs: 4,
        slope: 0.1,
        err_slope: 0.25,
    };
    /// The same with its durations multiplied by `mult` (rd-hashd's
    /// rotational multiplier).
    pub fn scaled(self, mult: f64) -> ConvergeCfg {
        ConvergeCfg {
            min_secs: (self.min_secs as f64 * mult).ceil() as usize,
            max_secs: (self.max_secs as f64 * mult).ceil() as usize,
            ..self
        }
    }
    /// The short settings of `--bench-test` (CI).
    pub const TEST: ConvergeCfg = ConvergeCfg {
        converges: 3,
        period: 5,
        min_secs: 10,
        max_secs: 10,
        slope: 0.1,
        err_slope: 0.25,
    };
}

/// Least-squares slope and mean absolute residual of `ys` over 0, 1, ...
pub fn linreg(ys: &[f64]) -> (f64, f64) {
    let n = ys.len() as f64;
    if ys.len() < 2 {
        return (0.0, 0.0);
    }
    let mx = (n - 1.0) / 2.0;
    let my = ys.iter().sum::<f64>() / n;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (i, y) in ys.iter().enumerate() {
        let dx = i as f64 - mx;
        sxy += dx * (y - my);
        sxx += dx * dx;
    }
    let slope = sxy / sxx;
    let err = ys
        .iter()
        .enumerate()
        .map(|(i, y)| (y - (my + slope * (i as f64 - mx))).abs())
        .sum::<f64>()
        / n;
    (slope, err)
}

/// One settling wait over (latency, rps) samples, judged on the rate (or
/// on the latency: [`Converge::on_latency`]).
#[derive(Debug)]
pub struct Converge {
    cfg: ConvergeCfg,
    on_lat: bool,
    samples: Vec<(f64, f64)>,
    errs: Vec<f64>,
    slopes: Vec<f64>,
    settled: Vec<Option<(f64, f64)>>,
    secs: usize,
    streak: i64,
}

/// Where a wait stands after a sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Progress {
    Waiting,
    /// Settled: mean (latency, rps) of the settled windows.
    Settled(f64, f64),
    /// Out of time: the latest sample.
    TimedOut(f64, f64),
}

impl Converge {
    pub fn new(cfg: ConvergeCfg) -> Converge {
        Converge {
            cfg,
            on_lat: false,
            samples: Vec::new(),
            errs: Vec::new(),
            slopes: Vec::new(),
            settled: Vec::new(),
            secs: 0,
            streak: 0,
        }
    }

    /// A wait judged on the latency (the single-CPU bench).
    pub fn on_latency(cfg: ConvergeCfg) -> Converge {
        Converge {
            on_lat: true,
            ..Converge::new(cfg)
        }
    }

    /// Seconds pushed so far.
    pub fn secs(&self) -> usize {
        self.secs
    }

    /// The sign streak of the latest judged window: positive while the
    /// rate keeps climbing, negative while it keeps falling, 0 otherwise.
    pub fn streak(&self) -> i64 {
        self.streak
    }

    /// Takes one second's (latency, rps); `line` gets the progress line.
    pub fn push(&mut self, lat: f64, rps: f64, line: &mut dyn FnMut(String)) -> Progress {
        self.secs += 1;
        if rps > 0.0 {
            self.samples.push((lat, rps));
        }
        let p = self.cfg.period;
        if self.secs >= self.cfg.max_secs && self.samples.len() <= 2 {
            return Progress::TimedOut(lat, rps);
        }
        if self.samples.len() <= 2 {
            return Progress::Waiting;
        }
        let window: Vec<f64> = self.samples[self.samples.len().saturating_sub(p)..]
            .iter()
            .map(|s| if self.on_lat { s.0 } else { s.1 })
            .collect();
        let mean = window.iter().sum::<f64>() / window.len() as f64;
        let (slope, err) = linreg(&window);
        push_capped(&mut self.errs, err, p);
        if self.errs.len() <= 2 {
            return self.timeout_or_wait(lat, rps);
        }
        let (e_slope, _) = linreg(&self.errs);
        let (slope, e_slope) = if mean > 0.0 {
            (slope / mean, e_slope / mean)
        } else {
            (slope, e_slope)
        };
        push_capped(&mut self.slopes, slope, p);
        let sign = |s: f64| {
            if s > 0.0001 {
                1
            } else if s < -0.0001 {
                -1
            } else {
                0
            }
        };
        let mut streak: i64 = self.slopes.iter().map(|s| sign(*s)).sum();
        if streak.unsigned_abs() as usize <= p / 2 || streak.signum() != sign(slope) {
            streak = 0;
        }
        self.streak = streak;
        let ok = self.secs >= self.cfg.min_secs
            && slope.abs() <= self.cfg.slope
            && e_slope.abs() <= self.cfg.err_slope
            && streak == 0;
        let last = *self.samples.last().expect("samples");
        push_capped(&mut self.settled, ok.then_some(last), p);
        let n = self.settled.iter().flatten().count();
        line(format!(
            "[{n}/{}] lat:{:5.1} rps:{:6.1} slope:{:+6.2}% error_slope:{:+6.2}%{}",
            self.cfg.converges,
            lat * 1000.0,
            rps,
            slope * 100.0,
            e_slope * 100.0,
            if ok { " *" } else { "" }
        ));
        if n >= self.cfg.converges {
            let (sl, sr) = self
                .settled
                .iter()
                .flatten()
                .fold((0.0, 0.0), |(a, b), (l, r)| (a + l, b + r));
            return Progress::Settled(sl / n as f64, sr / n as f64);
        }
        self.timeout_or_wait(lat, rps)
    }

    fn timeout_or_wait(&self, lat: f64, rps: f64) -> Progress {
        if self.secs >= self.cfg.max_secs {
            let (l, r) = self.samples.last().copied().unwrap_or((lat, rps));
            Progress::TimedOut(l, r)
        } else {
            Progress::Waiting
        }
    }
}

fn push_capped<T>(v: &mut Vec<T>, x: T, cap: usize) {
    v.push(x);
    if v.len() > cap {
        v.remove(0);
    }
}

/// How a round of the rps_max search ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Round {
    pub lat: f64,
    pub rps: f64,
    pub settled: bool,
}

/// The rps_max search: up to `rounds` settling waits; the first whose
/// latency is within 5% of `lat_target` gives rps_max, else the last.
pub struct CpuSearch {
    cfg: ConvergeCfg,
    lat_target: f64,
    rounds_left: usize,
    cur: Converge,
    pub rounds: Vec<Round>,
}

impl CpuSearch {
    pub fn new(cfg: ConvergeCfg, lat_target: f64, rounds: usize) -> CpuSearch {
        CpuSearch {
            cfg,
            lat_target,
            rounds_left: rounds.max(1),
            cur: Converge::new(cfg),
            rounds: Vec::new(),
        }
    }

    /// Takes a second's sample; Some(rps_max, met) when done.
    pub fn push(
        &mut self,
        lat: f64,
        rps: f64,
        line: &mut dyn FnMut(String),
    ) -> Option<(u32, bool)> {
        let (l, r, settled) = match self.cur.push(lat, rps, line) {
            Progress::Waiting => return None,
            Progress::Settled(l, r) => (l, r, true),
            Progress::TimedOut(l, r) => (l, r, false),
        };
        self.rounds.push(Round {
            lat: l,
            rps: r,
            settled,
        });
        let err = (l - self.lat_target) / self.lat_target;
        self.rounds_left -= 1;
        if err.abs() <= 0.05 {
            return Some((r.round() as u32, true));
        }
        line(format!(
            "latency {:.1}ms is {:+.1}% off the {:.1}ms target{}",
            l * 1000.0,
            err * 100.0,
            self.lat_target * 1000.0,
            if self.rounds_left > 0 { ", again" } else { "" }
        ));
        if self.rounds_left == 0 {
            return Some((r.round() as u32, false));
        }
        self.cur = Converge::new(self.cfg);
        None
    }
}

/// rd-hashd's single-CPU bench settings: a lone request's latency target
/// (hashing only), the IO latency and share of accesses allowed to wait
/// on IO that size the memory chunks, and the tolerance.
pub const SINGLE_LAT: f64 = 0.015;
pub const SINGLE_IO_LAT: f64 = 0.0025;
pub const SINGLE_IO_RATIO: f64 = 0.2;
pub const SINGLE_ERR: f64 = 0.05;
/// Bytes hashed to time the hashing rate (a short form for `--bench-test`).
pub const TIME_HASH_SIZE: u64 = 256 << 20;
pub const TIME_HASH_SIZE_TEST: u64 = 16 << 20;

/// Pages per memory access so that a request still meets `lat_target`
/// when [`SINGLE_IO_RATIO`] of its file chunks wait [`SINGLE_IO_LAT`] on
/// IO (rd-hashd's rule; at least 1).
pub fn calc_chunk_pages(p: &super::params::Params) -> usize {
    let io_time = p.lat_target - SINGLE_LAT - p.sleep_mean;
    let nr_file_ios = io_time * p.file_frac / SINGLE_IO_LAT;
    let nr_file_chunks = nr_file_ios / SINGLE_IO_RATIO;
    let nr_file_pages = p.file_size_mean as f64 / 4096.0;
    let pages = (nr_file_pages / nr_file_chunks).ceil();
    if pages.is_finite() && pages >= 1.0 {
        pages as usize
    } else {
        1
    }
}

/// The mean file bytes per request whose hashing (file and anonymous
/// bytes, `cpu_ratio` passes) takes [`SINGLE_LAT`] at `secs_per_byte`.
pub fn calc_file_size_mean(p: &super::params::Params, secs_per_byte: f64) -> usize {
    let target_bytes = SINGLE_LAT / secs_per_byte.max(1e-15);
    let cpu_ratio = p.cpu_ratio * (1.0 + p.anon_size_ratio);
    ((target_bytes / cpu_ratio.max(1e-9)) as usize).max(4096)
}

/// What the single-CPU search asks for after a second's sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SingleStep {
    Continue,
    /// Run the next round at this hash size (file_size_mean).
    Probe(usize),
    /// Done: the hash size, and whether its latency met [`SINGLE_LAT`].
    Done(usize, bool),
}

/// The single-CPU bench (`--bench-cpu-single`): one request at a time
/// with no sleep; up to `rounds` settling waits on the latency, the hash
/// size steered by a PID controller until a request takes
/// [`SINGLE_LAT`] within [`SINGLE_ERR`].
pub struct SingleSearch {
    cfg: ConvergeCfg,
    rounds: usize,
    round: usize,
    size: usize,
    pid: super::dist::Pid,
    cur: Converge,
    pub results: Vec<Round>,
}

impl SingleSearch {
    pub fn new(cfg: ConvergeCfg, rounds: usize, size: usize) -> SingleSearch {
        SingleSearch {
            cfg,
            rounds: rounds.max(1),
            round: 1,
            size: size.max(1),
            pid: super::dist::Pid::new(0.25, 0.01, 0.01, 1.0, 1.0, 1.0),
            cur: Converge::on_latency(cfg),
            results: Vec::new(),
        }
    }

    /// The hash size of the round running now.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The round header line.
    pub fn header(&self) -> String {
        format!(
            "[ Single cpu bench: round {}/{}, hash size {:.2}M ]",
            self.round,
            self.rounds,
            self.size as f64 / f64::from(1u32 << 20)
        )
    }

    /// Takes a second's (latency, rps); `line` gets progress lines.
    pub fn push(&mut self, lat: f64, rps: f64, line: &mut dyn FnMut(String)) -> SingleStep {
        let (l, r, settled) = match self.cur.push(lat, rps, line) {
            Progress::Waiting => return SingleStep::Continue,
            Progress::Settled(l, r) => (l, r, true),
            Progress::TimedOut(l, r) => (l, r, false),
        };
        self.results.push(Round {
            lat: l,
            rps: r,
            settled,
        });
        let err = (l - SINGLE_LAT) / SINGLE_LAT;
        line(format!(
            "Latency: {:.2} ~= {:.2}, error: |{:.2}%| <= {:.2}%",
            l * 1000.0,
            SINGLE_LAT * 1000.0,
            err * 100.0,
            SINGLE_ERR * 100.0
        ));
        if err.abs() <= SINGLE_ERR {
            return SingleStep::Done(self.size, true);
        }
        if self.round >= self.rounds {
            return SingleStep::Done(self.size, false);
        }
        // At most halved a round: a first round far off (cold page cache,
        // first touches) must not drive the size to nothing.
        let adj = self.pid.step(1.0 + err).output.max(-0.5);
        self.size = ((self.size as f64 * (1.0 + adj)) as usize).max(1);
        self.round += 1;
        self.cur = Converge::on_latency(self.cfg);
        line(self.header());
        SingleStep::Probe(self.size)
    }
}

/// The stages of the memory search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemStage {
    /// mem_frac 0.2, 0.4, ... 1.0 until the rate falls 25% short.
    Up,
    /// Halving the interval between the last fitting and the first
    /// saturated fraction (saturated: 10% short).
    Bisect,
    /// Stepping down 2.5% at a time until the rate is within 7.5%.
    Refine,
}

impl MemStage {
    /// Upstream's phase name.
    pub fn name(self) -> &'static str {
        match self {
            MemStage::Up => "mem-up",
            MemStage::Bisect => "mem-bisect",
            MemStage::Refine => "mem-refine",
        }
    }
}

/// One probe of the memory search.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    pub stage: MemStage,
    pub mem_frac: f64,
    pub rps: f64,
    /// (rps - rps_max) / rps_max.
    pub err: f64,
    /// How the round ended: "settled", "timed out", "RPS high enough",
    /// "RPS too low".
    pub end: &'static str,
}

/// What the memory search asks for after a second's sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MemStep {
    Continue,
    /// Switch the footprint to this mem_frac and start a new round.
    Probe(f64),
    /// Done: the largest mem_frac that keeps rps_max.
    Done(f64),
}

/// The memory footprint search (rd-hashd's `--bench-mem`): at rps_max,
/// the largest share of the footprint (`mem_frac`) that still sustains
/// the rate. Once the footprint no longer fits in memory, requests wait
/// on page-ins and the rate falls.
pub struct MemSearch {
    rps_max: f64,
    grain: f64,
    test: bool,
    stage: MemStage,
    frac: f64,
    up: Vec<f64>,
    /// Bisection bounds, newest first.
    left: Vec<f64>,
    right: Vec<f64>,
    went_right: bool,
    verifying: bool,
    verifies_left: usize,
    refine_step: f64,
    refine_min: f64,
    rotational: bool,
    cur: Converge,
    pub probes: Vec<Probe>,
}

impl MemSearch {
    /// Starts with the first up-round; `frac()` is the mem_frac to run.
    pub fn new(rps_max: u32, grain: f64, test: bool) -> MemSearch {
        let grain = if grain > 0.0 { grain } else { 1.0 };
        // The short form probes each stage once.
        let up: Vec<f64> = if test {
            vec![1.0]
        } else {
            vec![0.2, 0.4, 0.6, 0.8, 1.0]
        };
        let mut s = MemSearch {
            rps_max: f64::from(rps_max.max(1)),
            grain,
            test,
            stage: MemStage::Up,
            frac: up[0],
            up,
            left: vec![0.0],
            right: Vec::new(),
            went_right: false,
            verifying: false,
            verifies_left: 2,
            refine_step: 0.0,
            refine_min: 0.0,
            rotational: false,
            cur: Converge::new(ConvergeCfg::MEM),
            probes: Vec::new(),
        };
        s.cur = Converge::new(s.cfg());
        s
    }

    /// Rotational mode (rd-hashd's): longer settling windows (4x for the
    /// up-rounds, 2x for the rest; not in the short form), and no early
    /// end of a round on a low rate.
    pub fn set_rotational(&mut self, rotational: bool) {
        self.rotational = rotational;
        self.cur = Converge::new(self.cfg());
    }

    /// The stage running now.
    pub fn stage(&self) -> MemStage {
        self.stage
    }

    /// The mem_frac of the round running now.
    pub fn frac(&self) -> f64 {
        self.frac
    }

    fn cfg(&self) -> ConvergeCfg {
        let mult = match (self.rotational, self.stage) {
            (false, _) => 1.0,
            (true, MemStage::Up) => 4.0,
            (true, _) => 2.0,
        };
        match (self.test, self.stage) {
            (true, _) => ConvergeCfg::TEST,
            (false, MemStage::Refine) => ConvergeCfg::MEM_REFINE.scaled(mult),
            (false, _) => ConvergeCfg::MEM.scaled(mult),
        }
    }

    fn start(&mut self, stage: MemStage, frac: f64) -> MemStep {
        self.stage = stage;
        self.frac = frac;
        self.cur = Converge::new(self.cfg());
        MemStep::Probe(frac)
    }

    /// Takes a second's (latency, rps); `line` gets progress lines.
    pub fn push(&mut self, lat: f64, rps: f64, line: &mut dyn FnMut(String)) -> MemStep {
        let progress = self.cur.push(lat, rps, line);
        let p = self.cur.cfg.period;
        let secs = self.cur.secs();
        let streak = self.cur.streak();
        let (rps, end) = match progress {
            Progress::Settled(_, r) => (r, "settled"),
            Progress::TimedOut(_, r) => (r, "timed out"),
            Progress::Waiting => {
                if self.stage != MemStage::Refine
                    && secs >= p
                    && streak > 0
                    && rps > 0.95 * self.rps_max
                {
                    (rps, "RPS high enough")
                } else if !self.rotational
                    && secs >= 2 * p
                    && streak < 0
                    && rps < 0.5 * self.rps_max
                {
                    (rps, "RPS too low")
                } else {
                    return MemStep::Continue;
                }
            }
        };
        let err = (rps - self.rps_max) / self.rps_max;
        line(format!(
            "{} mem_frac={:.3}: rps {:.1} ({:+.1}% of rps_max), {end}",
            self.stage.name(),
            self.frac,
            rps,
            err * 100.0
        ));
        self.probes.push(Probe {
            stage: self.stage,
            mem_frac: self.frac,
            rps,
            err,
            end,
        });
        match self.stage {
            MemStage::Up => self.after_up(err),
            MemStage::Bisect => self.after_bisect(err),
            MemStage::Refine => self.after_refine(err),
        }
    }

    fn after_up(&mut self, err: f64) -> MemStep {
        if err <= -0.25 {
            self.right = vec![self.frac];
            return self.next_bisect();
        }
        self.left.insert(0, self.frac);
        let i = self.up.iter().position(|f| *f == self.frac).unwrap_or(0) + 1;
        match self.up.get(i) {
            Some(&f) => self.start(MemStage::Up, f),
            // Nothing saturated: the whole footprint fits.
            None => self.begin_refine(self.frac),
        }
    }

    fn next_bisect(&mut self) -> MemStep {
        let (l, r) = (self.left[0], self.right[0]);
        if r - l < 0.05 * self.grain || (self.test && self.stage == MemStage::Bisect) {
            return self.verify_or_refine();
        }
        self.start(MemStage::Bisect, (l + r) / 2.0)
    }

    /// At the end of the bisection the bound opposite to the last probe is
    /// tested again once; if it flips, the bisection goes on.
    fn verify_or_refine(&mut self) -> MemStep {
        if self.verifies_left > 0 && !self.test {
            let other = if self.went_right {
                (self.left.len() > 1).then(|| self.left[0])
            } else {
                (self.right.len() > 1).then(|| self.right[0])
            };
            if let Some(f) = other {
                self.verifies_left -= 1;
                self.verifying = true;
                return self.start(MemStage::Bisect, f);
            }
        }
        self.begin_refine(self.right[0])
    }

    fn after_bisect(&mut self, err: f64) -> MemStep {
        let saturated = err <= -0.10;
        if self.verifying {
            self.verifying = false;
            if self.went_right && saturated {
                // The fitting bound did not fit after all.
                let f = self.left.remove(0);
                self.right.insert(0, f);
                return self.next_bisect();
            }
            if !self.went_right && !saturated {
                let f = self.right.remove(0);
                self.left.insert(0, f);
                return self.next_bisect();
            }
            return self.begin_refine(self.right[0]);
        }
        self.went_right = saturated;
        if saturated {
            self.right.insert(0, self.frac);
        } else {
            self.left.insert(0, self.frac);
        }
        self.next_bisect()
    }

    fn begin_refine(&mut self, frac: f64) -> MemStep {
        self.refine_step = frac * 0.025 * self.grain;
        self.refine_min = (frac / 2.0).max(0.001);
        self.start(MemStage::Refine, frac)
    }

    fn after_refine(&mut self, err: f64) -> MemStep {
        if err >= 0.0 || -err <= 0.075 {
            return MemStep::Done(self.frac);
        }
        if self.test {
            // One probe per stage: the largest fraction seen to fit.
            return MemStep::Done(self.left[0].max(self.refine_min));
        }
        let next = self.frac - self.refine_step;
        if next < self.refine_min + self.refine_step {
            return MemStep::Done(next.max(self.refine_min));
        }
        self.start(MemStage::Refine, next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hashd::params::Params;

    #[test]
    fn single_cpu_sizes_follow_upstreams_rules() {
        let p = Params::default();
        // 75 ms target - 15 ms hashing - 20 ms sleep = 40 ms of IO;
        // x 0.25 / 2.5 ms = 4 IOs, / 0.2 = 20 chunks; 1258291 B = 307.2
        // pages -> 16 pages a chunk.
        assert_eq!(calc_chunk_pages(&p), 16);
        // 1 ns a byte: 15 MB hashed, / (0.93 x 3.3) = 4887585 file bytes.
        assert_eq!(calc_file_size_mean(&p, 1e-9), 4887585);
        // No time left for IO: one page a chunk, not a division by zero.
        let q = Params {
            lat_target: 0.01,
            ..p
        };
        assert_eq!(calc_chunk_pages(&q), 1);
    }

    #[test]
    fn the_single_search_steers_the_hash_size_to_the_latency() {
        let mut s = SingleSearch::new(ConvergeCfg::TEST, 3, 1_000_000);
        let mut lines = Vec::new();
        // 30 ms: twice the 15 ms target, so the size comes down.
        let step = loop {
            match s.push(0.030, 50.0, &mut |l| lines.push(l)) {
                SingleStep::Continue => continue,
                st => break st,
            }
        };
        let SingleStep::Probe(size) = step else {
            panic!("{step:?}")
        };
        assert!(size < 1_000_000, "{size}");
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("Latency: 30.00 ~= 15.00"))
        );
        assert!(lines.last().unwrap().contains("round 2/3"), "{lines:?}");
        // On target: done, met.
        let step = loop {
            match s.push(0.0151, 60.0, &mut |_| {}) {
                SingleStep::Continue => continue,
                st => break st,
            }
        };
        assert_eq!(step, SingleStep::Done(size, true));
    }

    #[test]
    fn rotational_mode_lengthens_the_memory_rounds() {
        let mut m = MemSearch::new(100, 1.0, false);
        assert_eq!(m.cfg().max_secs, 90);
        m.set_rotational(true);
        assert_eq!(m.cfg().max_secs, 360);
        assert_eq!(m.cfg().min_secs, 120);
    }

    #[test]
    fn linreg_fits_a_line() {
        let (s, e) = linreg(&[1.0, 3.0, 5.0, 7.0]);
        assert!((s - 2.0).abs() < 1e-12 && e < 1e-12);
        let (s, e) = linreg(&[0.0, 2.0, 0.0, 2.0]);
        assert!((s - 0.4).abs() < 1e-12, "{s}");
        assert!(e > 0.5);
    }

    #[test]
    fn a_flat_rate_settles_and_a_climbing_one_does_not() {
        let mut lines = Vec::new();
        let mut c = Converge::new(ConvergeCfg::CPU);
        let mut out = Progress::Waiting;
        for i in 0..90 {
            // Small noise around 1000 rps.
            let rps = 1000.0 + if i % 2 == 0 { 3.0 } else { -3.0 };
            out = c.push(0.075, rps, &mut |l| lines.push(l));
            if out != Progress::Waiting {
                break;
            }
        }
        let Progress::Settled(lat, rps) = out else {
            panic!("{out:?}");
        };
        assert!((rps - 1000.0).abs() < 5.0 && (lat - 0.075).abs() < 1e-9);
        assert!(lines.iter().any(|l| l.starts_with("[5/5]")), "{lines:?}");

        let mut c = Converge::new(ConvergeCfg::CPU);
        let mut out = Progress::Waiting;
        for i in 0..90 {
            out = c.push(0.075, 100.0 + 20.0 * f64::from(i), &mut |_| {});
            if out != Progress::Waiting {
                break;
            }
        }
        assert!(
            matches!(out, Progress::TimedOut(_, r) if r > 1800.0),
            "{out:?}"
        );
    }

    #[test]
    fn the_search_takes_the_round_that_meets_the_target() {
        let mut s = CpuSearch::new(ConvergeCfg::TEST, 0.075, 3);
        let mut got = None;
        // First round settles at 100 ms (off), the second at 76 ms.
        for i in 0..40 {
            let lat = if i < 10 { 0.100 } else { 0.076 };
            if let Some(r) = s.push(lat, 500.0, &mut |_| {}) {
                got = Some(r);
                break;
            }
        }
        assert_eq!(got, Some((500, true)));
        assert_eq!(s.rounds.len(), 2);
        assert!(!s.rounds[0].settled || s.rounds[0].lat == 0.100);
    }
    /// Feeds a search a model host where the rate holds at rps_max up to
    /// `fits` and falls in proportion beyond it.
    fn run_mem_search(fits: f64, test: bool) -> (f64, Vec<Probe>) {
        let mut s = MemSearch::new(1000, 1.0, test);
        for _ in 0..100_000 {
            let f = s.frac();
            let rps = if f <= fits { 1000.0 } else { 1000.0 * fits / f };
            match s.push(0.075, rps, &mut |_| {}) {
                MemStep::Done(f) => return (f, s.probes),
                MemStep::Continue | MemStep::Probe(_) => {}
            }
        }
        panic!("the search did not end");
    }

    #[test]
    fn the_memory_search_finds_where_the_rate_falls() {
        let (frac, probes) = run_mem_search(0.5, false);
        // Up-rounds to 0.8 (0.5/0.8 = 37.5% short), bisection, refinement.
        let ups: Vec<f64> = probes
            .iter()
            .filter(|p| p.stage == MemStage::Up)
            .map(|p| p.mem_frac)
            .collect();
        assert_eq!(ups, vec![0.2, 0.4, 0.6, 0.8]);
        assert!(probes.iter().any(|p| p.stage == MemStage::Bisect));
        // Within 7.5% of the rate: frac <= 0.5 / 0.925.
        assert!(
            frac > 0.45 && frac <= 0.5 / 0.925 + 1e-9,
            "{frac} {probes:?}"
        );
    }

    #[test]
    fn the_memory_search_keeps_the_whole_footprint_when_it_fits() {
        let (frac, probes) = run_mem_search(2.0, false);
        assert_eq!(frac, 1.0);
        assert_eq!(probes.len(), 6, "{probes:?}");
        assert_eq!(probes.last().map(|p| p.stage), Some(MemStage::Refine));
    }

    #[test]
    fn the_short_memory_search_probes_each_stage_once() {
        let (frac, probes) = run_mem_search(0.3, true);
        let stages: Vec<MemStage> = probes.iter().map(|p| p.stage).collect();
        assert_eq!(
            stages,
            vec![MemStage::Up, MemStage::Bisect, MemStage::Refine]
        );
        // Nothing fitted: the refinement's floor, half the last bound.
        assert_eq!(frac, 0.25);
        // 0.5 fitted, the refinement probe at 1.0 did not: 0.5, never a
        // fraction seen to fail.
        let (frac, probes) = run_mem_search(0.6, true);
        assert_eq!(probes.last().map(|p| p.mem_frac), Some(1.0));
        assert_eq!(frac, 0.5);
        assert_eq!(run_mem_search(2.0, true).0, 1.0);
    }
}
