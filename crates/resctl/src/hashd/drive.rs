//! hashd's drive: the run between control periods (the search steps,
//! params reloads, report file and status lines) and the record it leaves.

use super::bench::{
    self as search, ConvergeCfg, CpuSearch, MemSearch, MemStage, MemStep, SingleSearch, SingleStep,
};
use super::engine::{Hashd, Stat, Tick};
use super::params::{self, Params, ParamsFile};
use super::record::{
    BenchRecord, BenchResult, HashdRecord, HashdSummary, MemResult, ProbeRecord, SingleResult,
};
use super::render::{single_line, verbose_detail};
use super::report::{Phase, Status};
use super::setup::{Ctx, cpu_params, mem_params, single_params};
use super::testfiles::{self as tfiles, TestFiles};
use harness::Cancel;
use std::sync::Arc;
use std::time::Instant;

/// The search `--bench*` runs now.
enum Search {
    None,
    Single(SingleSearch),
    Cpu(CpuSearch),
    Mem(MemSearch),
}

/// What [`Drive::new`] takes over from the setup.
pub(super) struct DriveStart {
    pub(super) base: Params,
    pub(super) params_file: Option<ParamsFile>,
    pub(super) padding: Option<Arc<std::sync::atomic::AtomicUsize>>,
    pub(super) preload_files: Arc<TestFiles>,
    pub(super) single_size: usize,
    pub(super) period: f64,
}

/// The run between control periods (drive): the search, what it found,
/// and the status lines.
pub(super) struct Drive<'c, 'a> {
    ctx: &'c Ctx<'a>,
    cancel: &'c Cancel,
    base: Params,
    lat_target: f64,
    params_file: Option<ParamsFile>,
    padding: Option<Arc<std::sync::atomic::AtomicUsize>>,
    preload_files: Arc<TestFiles>,
    start: Instant,
    period: f64,
    status: Status,
    /// Status lines every `interval` seconds of control periods (counting
    /// periods: timing each from the last print would skip a line whenever
    /// a period ends a hair under a second after it).
    periods_since_status: u32,
    history: Vec<Stat>,
    pub(super) report_error: Option<anyhow::Error>,
    search: Search,
    phase: Phase,
    /// rps_max (and whether it met the target) once known.
    found: Option<(u32, bool)>,
    found_single: Option<(usize, bool)>,
    found_mem: Option<f64>,
    mem_probes: Vec<search::Probe>,
}

impl<'c, 'a> Drive<'c, 'a> {
    pub(super) fn new(
        ctx: &'c Ctx<'a>,
        cancel: &'c Cancel,
        d: DriveStart,
        hashd: &mut Hashd,
    ) -> anyhow::Result<Drive<'c, 'a>> {
        let start = Instant::now();
        let (a, bo, base) = (ctx.a, &ctx.bo, &d.base);
        let lat_target = base.lat_target;
        let search = if ctx.search_single {
            let cfg = if a.bench_test {
                ConvergeCfg::SINGLE_TEST
            } else {
                ConvergeCfg::CPU_SINGLE
            };
            let s = SingleSearch::new(cfg, if a.bench_test { 2 } else { 10 }, d.single_size);
            ctx.out.say(&s.header());
            Search::Single(s)
        } else if ctx.search_cpu {
            Search::Cpu(ctx.new_cpu_search(lat_target))
        } else if bo.mem {
            let m = ctx.new_mem_search(bo.rps_max.unwrap_or(base.rps_max));
            ctx.preload(&d.preload_files).map_err(anyhow::Error::msg)?;
            hashd.set_params(mem_params(
                base,
                bo.rps_max.unwrap_or(base.rps_max),
                m.frac(),
            ));
            Search::Mem(m)
        } else {
            Search::None
        };
        let found = match (bo.rps_max, ctx.search_cpu, ctx.bench) {
            (Some(r), _, _) => Some((r, true)),
            (None, false, true) if bo.mem => Some((base.rps_max, true)),
            _ => None,
        };
        let phase = match &search {
            Search::Single(_) => Phase::BenchCpuSingle,
            Search::Cpu(_) => Phase::BenchCpuSaturation,
            Search::Mem(_) => Phase::BenchMemUp,
            Search::None => Phase::Running,
        };
        Ok(Drive {
            ctx,
            cancel,
            base: d.base,
            lat_target,
            params_file: d.params_file,
            padding: d.padding,
            preload_files: d.preload_files,
            start,
            period: d.period,
            status: Status::default(),
            periods_since_status: 0,
            history: Vec::new(),
            report_error: None,
            search,
            phase,
            found,
            found_single: None,
            found_mem: None,
            mem_probes: Vec::new(),
        })
    }

    /// One control period's stat: report, status line, search step, params
    /// reload.
    pub(super) fn tick(&mut self, s: &Stat) -> Tick {
        self.history.push(s.clone());
        self.status.add(s);
        if let Err(e) = self.ctx.write_report(self.phase, s.clone(), 1.0) {
            self.report_error = Some(e);
            return Tick::Stop;
        }
        self.print_status(s);
        if self.cancel.is_stopped()
            || self
                .ctx
                .a
                .duration
                .is_some_and(|d| self.start.elapsed().as_secs_f64() >= d)
        {
            return Tick::Stop;
        }
        if let Some(t) = self.step(s) {
            return t;
        }
        self.reload_params().unwrap_or(Tick::Continue)
    }

    fn print_status(&mut self, s: &Stat) {
        self.periods_since_status += 1;
        let interval = self.ctx.args.interval;
        if interval > 0
            && f64::from(self.periods_since_status) * self.period >= f64::from(interval) - 1e-9
        {
            let mut l = self.status.line(s);
            if self.ctx.a.verbose > 0 {
                l.push_str(&verbose_detail(s));
            }
            println!("{l}");
            self.ctx.out.log(&l);
            self.periods_since_status = 0;
        }
    }

    /// The search's step for this period; None when nothing is searched.
    fn step(&mut self, s: &Stat) -> Option<Tick> {
        let ctx = self.ctx;
        let mut line = |mut l: String| {
            if ctx.a.verbose > 0 && l.starts_with('[') && l.contains("] lat:") {
                l.push_str(&format!(" con:{:.1}", s.concurrency));
                l.push_str(&verbose_detail(s));
            }
            ctx.out.say(&l);
        };
        let tick = match &mut self.search {
            // A bench with every value given: nothing to search.
            Search::None if ctx.bench => Tick::Stop,
            Search::None => return None,
            Search::Single(c) => match c.push(s.lat.ctl, s.rps, &mut line) {
                SingleStep::Continue => Tick::Continue,
                SingleStep::Probe(size) => Tick::Params(Box::new(single_params(&self.base, size))),
                SingleStep::Done(size, met) => self.single_done(size, met),
            },
            Search::Cpu(c) => match c.push(s.lat.ctl, s.rps, &mut line) {
                None => Tick::Continue,
                Some(r) => self.cpu_done(r),
            },
            Search::Mem(m) => {
                let step = m.push(s.lat.ctl, s.rps, &mut line);
                self.phase = match m.stage() {
                    MemStage::Up => Phase::BenchMemUp,
                    MemStage::Bisect => Phase::BenchMemBisect,
                    MemStage::Refine => Phase::BenchMemRefine,
                };
                match step {
                    MemStep::Continue => Tick::Continue,
                    MemStep::Probe(f) => {
                        let rps_max = self.found.map(|f| f.0).unwrap_or(0);
                        Tick::Params(Box::new(mem_params(&self.base, rps_max, f)))
                    }
                    MemStep::Done(f) => {
                        self.found_mem = Some(f);
                        self.mem_probes = m.probes.clone();
                        Tick::Stop
                    }
                }
            }
        };
        Some(tick)
    }

    fn single_done(&mut self, size: usize, met: bool) -> Tick {
        let ctx = self.ctx;
        if !met {
            ctx.out
                .say("[ Single cpu bench failed to converge, using the last value ]");
        }
        self.found_single = Some((size, met));
        self.base.file_size_mean = size;
        if ctx.bo.chunk_pages.is_none() {
            self.base.chunk_pages = search::calc_chunk_pages(&self.base);
        }
        ctx.out.say(&single_line(&self.base));
        self.after_single()
    }

    /// Starts the search after the single-CPU bench.
    fn after_single(&mut self) -> Tick {
        let ctx = self.ctx;
        if ctx.search_cpu {
            self.search = Search::Cpu(ctx.new_cpu_search(self.lat_target));
            self.phase = Phase::BenchCpuSaturation;
            return Tick::Params(Box::new(cpu_params(&self.base)));
        }
        if ctx.bo.mem {
            let rps_max = self.found.map(|f| f.0).unwrap_or(self.base.rps_max);
            let m = ctx.new_mem_search(rps_max);
            if let Err(e) = ctx.preload(&self.preload_files) {
                ctx.out.say(&e);
            }
            let p = mem_params(&self.base, rps_max, m.frac());
            self.search = Search::Mem(m);
            self.phase = Phase::BenchMemUp;
            return Tick::Params(Box::new(p));
        }
        Tick::Stop
    }

    fn cpu_done(&mut self, r: (u32, bool)) -> Tick {
        let ctx = self.ctx;
        self.found = Some(r);
        ctx.out
            .say(&format!("[ CPU saturation result: rps {} ]", r.0));
        if !ctx.bo.mem {
            return Tick::Stop;
        }
        ctx.out
            .say(&format!("rps_max {}: searching the memory footprint", r.0));
        let m = ctx.new_mem_search(r.0);
        let p = mem_params(&self.base, r.0, m.frac());
        if let Err(e) = ctx.preload(&self.preload_files) {
            ctx.out.say(&e);
        }
        self.search = Search::Mem(m);
        self.phase = Phase::BenchMemUp;
        Tick::Params(Box::new(p))
    }

    /// New params when the params file changed.
    fn reload_params(&mut self) -> Option<Tick> {
        let f = self.params_file.as_mut()?;
        match f.poll() {
            Some(Ok(p)) => {
                self.ctx
                    .out
                    .say(&format!("Reloaded params file {}", f.path.display()));
                if let Some(pad) = &self.padding {
                    pad.store(p.log_padding(), std::sync::atomic::Ordering::Relaxed);
                }
                Some(Tick::Params(Box::new(p)))
            }
            Some(Err(e)) => {
                self.ctx
                    .out
                    .say(&format!("warning: params not reloaded: {e}"));
                None
            }
            None => None,
        }
    }

    /// The record once the run ended. Bench results are kept only when
    /// each requested search finished.
    pub(super) fn record(
        self,
        saved_params: &Params,
        files_size: u64,
        result: Result<(), String>,
        prepared: &tfiles::Prepared,
        dropped: u64,
    ) -> anyhow::Result<HashdRecord> {
        let (ctx, bo) = (self.ctx, &self.ctx.bo);
        let complete = (!ctx.search_single || self.found_single.is_some())
            && (!ctx.search_cpu || self.found.is_some())
            && (!bo.mem || self.found_mem.is_some());
        if !ctx.search_single && bo.single && complete {
            // The hash size was given: only chunk_pages was derived.
            ctx.out.say(&single_line(&self.base));
        }
        let single = bo.single.then(|| SingleResult {
            hash_size: self.base.file_size_mean as u64,
            chunk_pages: self.base.chunk_pages,
            converged: self.found_single.map(|f| f.1).unwrap_or(!ctx.search_single),
        });
        let searched = bo.cpu || bo.mem;
        let bench_result = if ctx.bench && complete {
            self.bench_result(saved_params, files_size, searched)?
        } else {
            None
        };
        let interrupted = self.cancel.is_stopped();
        let error = result.err();
        if let Some(e) = &error {
            ctx.out.say(&format!("hashd failed: {e}"));
        }
        Ok(HashdRecord {
            summary: HashdSummary::of(&self.history),
            bench: ctx.bench.then_some(BenchRecord {
                result: bench_result,
                single: if complete { single } else { None },
                searched,
            }),
            elapsed_secs: self.start.elapsed().as_secs_f64(),
            testfiles_created: prepared.created,
            testfiles_reused: prepared.reused,
            log_lines_dropped: dropped,
            interrupted,
            error,
        })
    }

    /// The bench result (when a search ran), saved in the params file.
    fn bench_result(
        &self,
        saved_params: &Params,
        files_size: u64,
        searched: bool,
    ) -> anyhow::Result<Option<BenchResult>> {
        let (ctx, bo) = (self.ctx, &self.ctx.bo);
        let rps_max = self.found.map(|f| f.0).unwrap_or(saved_params.rps_max);
        let mem_frac = self.found_mem.unwrap_or(saved_params.mem_frac);
        let kept = Params {
            rps_max,
            mem_frac,
            ..self.base.clone()
        };
        let (file, anon) = super::engine::footprint(&ctx.args, files_size, &kept);
        let r = BenchResult {
            rps_max,
            converged: self.found.is_none_or(|f| f.1),
            footprint_bytes: file + anon,
            mem_frac,
            hash_size: kept.file_size_mean as u64,
            mem: bo.mem.then(|| MemResult {
                mem_size: ctx.args.size,
                probes: self
                    .mem_probes
                    .iter()
                    .map(|p| ProbeRecord {
                        stage: p.stage.name().to_string(),
                        mem_frac: p.mem_frac,
                        rps: p.rps,
                        end: p.end.to_string(),
                    })
                    .collect(),
            }),
        };
        if searched {
            ctx.out.say(&r.line());
        }
        if let Some(f) = &self.params_file {
            params::save_params(&f.path, &kept).map_err(anyhow::Error::msg)?;
            ctx.out
                .say(&format!("bench results saved in {}", f.path.display()));
        }
        Ok(searched.then_some(r))
    }
}
