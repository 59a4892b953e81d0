//! The dispatcher: keeps `concurrency` requests in flight, and once per
//! control period measures the latency percentiles and the rate, steers
//! concurrency with the two PID controllers (latency caps it, rate sets
//! it) and moves the footprint with the load.

use super::anon::AnonArea;
use super::dist::{ClampedNormal, Pid};
use super::params::{Args, Params};
use super::testfiles::TestFiles;
use super::worker::{Completion, Pool, Request, Shape};
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

/// Latency percentiles of a period, seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Latencies {
    pub min: f64,
    pub p01: f64,
    pub p05: f64,
    pub p10: f64,
    pub p16: f64,
    pub p50: f64,
    pub p84: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub p99_9: f64,
    pub p99_99: f64,
    pub p99_999: f64,
    pub max: f64,
    /// The controlled percentile (`lat_target_pct`).
    pub ctl: f64,
}

impl Latencies {
    /// From a period's latencies (sorted here); all zero when empty.
    pub fn of(lats: &mut [f64], ctl_pct: f64) -> Latencies {
        if lats.is_empty() {
            return Latencies::default();
        }
        lats.sort_by(f64::total_cmp);
        let q = |p: f64| {
            let i = ((lats.len() as f64 * p).ceil() as usize).clamp(1, lats.len()) - 1;
            lats[i]
        };
        Latencies {
            min: lats[0],
            p01: q(0.01),
            p05: q(0.05),
            p10: q(0.10),
            p16: q(0.16),
            p50: q(0.50),
            p84: q(0.84),
            p90: q(0.90),
            p95: q(0.95),
            p99: q(0.99),
            p99_9: q(0.999),
            p99_99: q(0.9999),
            p99_999: q(0.99999),
            max: lats[lats.len() - 1],
            ctl: q(ctl_pct),
        }
    }
}

/// One control period's state, as the report carries it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stat {
    pub rps: f64,
    pub concurrency: f64,
    pub concurrency_max: f64,
    pub file_addr_frac: f64,
    pub anon_addr_frac: f64,
    pub nr_in_flight: u32,
    pub nr_done: u64,
    pub nr_workers: usize,
    pub nr_idle_workers: usize,
    pub lat: Latencies,
    /// Footprint bytes of test files and of anonymous memory.
    pub file_size: u64,
    pub anon_size: u64,
}

/// Where the memory goes for `params` under `args`: (test-file bytes in
/// the footprint, anonymous bytes).
pub fn footprint(args: &Args, files_size: u64, p: &Params) -> (u64, u64) {
    let file_frac = p.file_frac.max(super::params::FILE_FRAC_MIN);
    let file = ((args.size as f64 * p.mem_frac * file_frac) as u64).min(files_size);
    let anon = (args.size as f64 * (p.mem_frac * (1.0 - file_frac)).clamp(0.0, 1.0)) as u64;
    (file, anon)
}

/// The request shape for `p`.
pub fn shape(args: &Args, files: &TestFiles, anon: &AnonArea, p: &Params) -> Shape {
    let (file, _) = footprint(args, files.size(), p);
    let chunk = (p.chunk_pages * 4096) as u64;
    let anon_pages = (anon.size() as u64).saturating_sub(chunk - 4096) / 4096;
    let fake = if p.fake_cpu_load {
        // What hashing takes, per byte, when a mean request's hashing is
        // 15 ms.
        0.015 / (p.cpu_ratio.max(1e-9) * (1.0 + p.anon_size_ratio) * p.file_size_mean as f64)
    } else {
        0.0
    };
    Shape {
        chunk_pages: p.chunk_pages,
        file_pages: (file / 4096).max(1),
        file_addr: ClampedNormal::new(0.0, p.file_addr_stdev_ratio, -1.0, 1.0),
        file_write_frac: p.file_write_frac,
        anon_pages: anon_pages.max(1),
        anon_addr: ClampedNormal::new(0.0, p.anon_addr_stdev_ratio, -1.0, 1.0),
        anon_write_frac: p.anon_write_frac,
        cpu_ratio: p.cpu_ratio,
        fake_secs_per_byte: fake,
    }
}

/// The control loop's state.
pub struct Control {
    pub concurrency: f64,
    pub cmax: f64,
    lat_pid: Pid,
    rps_pid: Pid,
    pub file_addr_frac: f64,
    pub anon_addr_frac: f64,
}

impl Control {
    pub fn new(p: &Params, nr_cpus: usize) -> Control {
        Control {
            concurrency: (nr_cpus as f64 / 2.0)
                .min(f64::from(p.concurrency_max))
                .max(1.0),
            cmax: f64::from(p.concurrency_max),
            lat_pid: Pid::new(p.lat_pid.kp, p.lat_pid.ki, p.lat_pid.kd, 0.1, 1.0, 1.0),
            rps_pid: Pid::new(p.rps_pid.kp, p.rps_pid.ki, p.rps_pid.kd, 1.0, 1.0, 1.0),
            file_addr_frac: 1.0,
            anon_addr_frac: 1.0,
        }
    }

    /// New params: fresh controllers, the same concurrency.
    pub fn retune(&mut self, p: &Params) {
        let fresh = Control::new(p, 1);
        self.lat_pid = fresh.lat_pid;
        self.rps_pid = fresh.rps_pid;
        self.cmax = self.cmax.min(f64::from(p.concurrency_max));
    }

    /// One control step from the period's controlled latency and rate.
    pub fn update(&mut self, p: &Params, lat_ctl: f64, rps: f64) {
        // Latency caps concurrency.
        let lat_out = self.lat_pid.step(lat_ctl / p.lat_target);
        let adj = lat_out.output;
        if adj < 0.0 {
            self.cmax = self.cmax.min(self.concurrency);
        }
        self.cmax = (self.cmax * (1.0 + adj)).clamp(1.0, f64::from(p.concurrency_max));
        // The rate target sets it.
        let adj = self
            .rps_pid
            .step(rps / f64::from(p.rps_target.max(1)))
            .output;
        self.concurrency = (self.concurrency * (1.0 + adj)).max(1.0);
        if self.concurrency >= self.cmax {
            self.concurrency = self.cmax;
            self.rps_pid.reset_integral();
        } else {
            self.lat_pid.reset_integral();
        }
        // Under the target, a negative latency integral would hold
        // concurrency down for no reason.
        if lat_out.i < 0.0 && lat_ctl <= p.lat_target {
            self.lat_pid.reset_integral();
        }
        // The footprint follows the load.
        let scale = |base: f64| {
            if p.rps_max == 0 {
                1.0
            } else {
                (base + (1.0 - base) * rps / f64::from(p.rps_max)).min(1.0)
            }
        };
        self.file_addr_frac = scale(p.file_addr_rps_base_frac);
        self.anon_addr_frac = scale(p.anon_addr_rps_base_frac);
    }
}

/// What the run loop asks of its caller once per control period.
pub enum Tick {
    Continue,
    Stop,
    /// Switch to these params.
    Params(Box<Params>),
}

/// A running hashd: test files, anonymous memory, workers and the control
/// state.
pub struct Hashd {
    pub args: Args,
    pub params: Params,
    pub files: Arc<TestFiles>,
    pub anon: Arc<AnonArea>,
    pool: Pool,
    done: Receiver<Completion>,
    pub control: Control,
    shape: Arc<Shape>,
    size_dist: (ClampedNormal, ClampedNormal, ClampedNormal),
    rng: rand::rngs::SmallRng,
    in_flight: u32,
    nr_done: u64,
}

fn size_dists(p: &Params) -> (ClampedNormal, ClampedNormal, ClampedNormal) {
    let fm = p.file_size_mean as f64;
    let am = fm * p.anon_size_ratio;
    (
        ClampedNormal::new(fm, fm * p.file_size_stdev_ratio, 4096.0, 2.0 * fm),
        ClampedNormal::new(am, am * p.anon_size_stdev_ratio, 4096.0, 2.0 * am),
        ClampedNormal::new(
            p.sleep_mean,
            p.sleep_mean * p.sleep_stdev_ratio,
            0.0,
            2.0 * p.sleep_mean,
        ),
    )
}

impl Hashd {
    /// Sets up on prepared test files.
    pub fn new(
        args: Args,
        params: Params,
        files: Arc<TestFiles>,
        nr_cpus: usize,
    ) -> Result<Hashd, crate::Error> {
        params.validate()?;
        // Reserve anonymous memory for the largest footprint (mem_frac 1).
        let max_anon = args.size as usize;
        let (_, anon_size) = footprint(&args, files.size(), &params);
        let anon = Arc::new(AnonArea::new(
            max_anon,
            anon_size as usize,
            args.compressibility,
        )?);
        let (tx, rx) = channel();
        let pool = Pool::new(files.clone(), anon.clone(), tx);
        let shape = Arc::new(shape(&args, &files, &anon, &params));
        Ok(Hashd {
            control: Control::new(&params, nr_cpus),
            size_dist: size_dists(&params),
            args,
            files,
            anon,
            pool,
            done: rx,
            shape,
            rng: rand::rngs::SmallRng::from_os_rng(),
            in_flight: 0,
            nr_done: 0,
            params,
        })
    }

    /// Switches to new params (footprint, distributions, controllers).
    pub fn set_params(&mut self, p: Params) {
        let (_, anon_size) = footprint(&self.args, self.files.size(), &p);
        self.anon.resize(anon_size as usize);
        self.size_dist = size_dists(&p);
        self.control.retune(&p);
        self.shape = Arc::new(shape(&self.args, &self.files, &self.anon, &p));
        self.params = p;
    }

    fn launch(&mut self) {
        let chunk = (self.params.chunk_pages * 4096) as f64;
        while f64::from(self.in_flight) < self.control.concurrency.floor() {
            let file = self.size_dist.0.sample(&mut self.rng).round();
            let anon = self.size_dist.1.sample(&mut self.rng).round();
            let req = Request {
                dispatched: Instant::now(),
                file_chunks: ((file / chunk).ceil() as usize).max(1),
                anon_chunks: (anon / chunk).ceil() as usize,
                sleep: self.size_dist.2.sample(&mut self.rng),
                file_addr_frac: self.control.file_addr_frac,
                anon_addr_frac: self.control.anon_addr_frac,
                shape: self.shape.clone(),
            };
            self.pool.submit(req);
            self.in_flight += 1;
        }
    }

    /// Runs until `tick` says stop: `on_done` sees every completion (the
    /// log), `tick` every period's [`Stat`]. Returns an error when a
    /// request fails (I/O).
    pub fn run(
        &mut self,
        on_done: &mut dyn FnMut(&Completion),
        tick: &mut dyn FnMut(&Stat) -> Tick,
    ) -> Result<(), crate::Error> {
        let mut lats: Vec<f64> = Vec::new();
        let mut period_start = Instant::now();
        let mut last_params = Instant::now();
        self.launch();
        loop {
            let period = Duration::from_secs_f64(self.params.control_period);
            let wait = (period_start + period).saturating_duration_since(Instant::now());
            match self.done.recv_timeout(wait) {
                Ok(c) => {
                    self.in_flight -= 1;
                    if let Some(e) = &c.error {
                        self.pool.stop();
                        return Err(crate::Error::Host(e.clone()));
                    }
                    self.nr_done += 1;
                    lats.push(c.latency);
                    on_done(&c);
                    self.launch();
                    if period_start.elapsed() < period {
                        continue;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(crate::Error::Host("the hashd workers are gone".into()));
                }
            }
            let dt = period_start.elapsed().as_secs_f64();
            period_start = Instant::now();
            if last_params.elapsed() < Duration::from_secs(1) {
                // Just after a params change: start measuring afresh.
                lats.clear();
                if let Tick::Stop = tick(&self.stat(0.0, Latencies::default())) {
                    break;
                }
                continue;
            }
            let rps = lats.len() as f64 / dt;
            let mut lat = Latencies::of(&mut lats, self.params.lat_target_pct);
            if lats.is_empty() && self.in_flight > 0 {
                // Nothing finished with requests out: as bad as it gets.
                lat.ctl = 10.0 * self.params.lat_target;
            }
            lats.clear();
            self.control.update(&self.params, lat.ctl, rps);
            self.launch();
            match tick(&self.stat(rps, lat)) {
                Tick::Continue => {}
                Tick::Stop => break,
                Tick::Params(p) => {
                    self.set_params(*p);
                    last_params = Instant::now();
                    self.launch();
                }
            }
        }
        self.pool.stop();
        Ok(())
    }

    fn stat(&self, rps: f64, lat: Latencies) -> Stat {
        let (workers, idle) = self.pool.workers();
        let (file, anon) = footprint(&self.args, self.files.size(), &self.params);
        Stat {
            rps,
            concurrency: self.control.concurrency,
            concurrency_max: self.control.cmax,
            file_addr_frac: self.control.file_addr_frac,
            anon_addr_frac: self.control.anon_addr_frac,
            nr_in_flight: self.in_flight,
            nr_done: self.nr_done,
            nr_workers: workers,
            nr_idle_workers: idle,
            lat,
            file_size: file,
            anon_size: anon,
        }
    }

    /// Requests still out (they finish on their own after a stop).
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let mut v: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        let l = Latencies::of(&mut v, 0.95);
        assert_eq!(
            (l.min, l.p50, l.p95, l.p99, l.max),
            (1.0, 50.0, 95.0, 99.0, 100.0)
        );
        assert_eq!(l.ctl, 95.0);
        assert_eq!(Latencies::of(&mut [], 0.95), Latencies::default());
    }

    #[test]
    fn control_caps_on_latency_and_follows_the_rate() {
        let p = Params {
            rps_target: 100,
            rps_max: 200,
            ..Params::default()
        };
        let mut c = Control::new(&p, 8);
        assert_eq!(c.concurrency, 4.0);
        // Under target latency and rate: concurrency grows.
        c.update(&p, 0.030, 50.0);
        assert!(c.concurrency > 4.0, "{}", c.concurrency);
        assert_eq!(c.file_addr_frac, 0.5 + 0.5 * 50.0 / 200.0);
        // Latency far over the target: the cap comes down to (below) the
        // current concurrency and concurrency with it.
        let before = c.concurrency;
        c.update(&p, 0.3, 50.0);
        assert!(c.cmax < before, "{} {}", c.cmax, before);
        assert!(c.concurrency <= c.cmax);
        // Rate over the target: concurrency falls.
        let mut c = Control::new(&p, 8);
        c.update(&p, 0.030, 300.0);
        assert!(c.concurrency < 4.0);
        assert_eq!(c.file_addr_frac, 1.0);
    }

    #[test]
    fn footprint_splits_between_files_and_anonymous_memory() {
        let args = Args {
            size: 1000 << 20,
            ..Args::with_mem(250 << 20)
        };
        let p = Params {
            mem_frac: 0.5,
            file_frac: 0.2,
            ..Params::default()
        };
        let (file, anon) = footprint(&args, 250 << 20, &p);
        assert_eq!(file, 100 << 20);
        assert_eq!(anon, 400 << 20);
        // Files cap the file part.
        let (file, _) = footprint(&args, 64 << 20, &p);
        assert_eq!(file, 64 << 20);
    }
}
