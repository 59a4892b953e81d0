//! The leaf server: per-request work as FeedSim's ranking leaf does it.
//!
//! Per request, in order: (1) instruction-cache pressure on the request's
//! serving thread; (2) a ranking fan-out of `ranking_threads` PageRank tasks;
//! (3) a 200 ms off-CPU wait; (4) zstd compression of 128 KiB of
//! incompressible bytes; (5) a serialization fan-out building and encoding random ranking responses and
//! compressing half of each; (6) a pointer-chasing fan-out; (7) one more
//! response built and serialized, the compressed payload decompressed, the
//! response decoded again, and the reply sent.
//!
//! Two serving models ([`ServingModel`]): upstream's (the default), where
//! a serving thread runs all of it, blocking on the fan-outs and sleeping
//! through (3), so at most `serving_threads` requests are in flight; and
//! ours, where (3) is a timer and (4) and (7) run on an IO pool, so no
//! thread is held through the wait.
//!
//! Which serving thread runs a request: upstream's LeafNodeServer (its
//! thread load balancing, on in LeafNodeRank unless `--noloadbalance`)
//! queues a request on the thread whose connection received it, wakes
//! another thread for it, and a thread with nothing to do takes work from
//! its own queue and then steals from the others'. So a request waits only
//! while every serving thread is busy. Here the serving threads take
//! requests from one shared queue, which has that property; the thread
//! that runs a request ranks over its own dataset, as upstream's thread
//! uses its own.

use crate::cli::ServingModel;
use crate::dataset::{Dataset, Shape};
use crate::icache;
use crate::proto::leaf_server::{Leaf, LeafServer};
use crate::proto::{RankReply, RankRequest, RankingResponse, StatusReply, StatusRequest, StepCpu};
use crate::story;
use prost::Message;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Gamma};
use rpc::pool::Pool;
pub use rpc::procstat::{proc_self, thread_cpu_ns};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tonic::{Request, Response, Status};

/// The leaf's knobs (upstream's names in comments).
#[derive(Debug, Clone)]
pub struct LeafConfig {
    /// Serving threads, each with its own dataset (`-t`).
    pub serving_threads: usize,
    /// Ranking pool threads and tasks per request (`-c`, cpu_threads).
    pub ranking_threads: usize,
    /// Serialization pool threads and tasks per request (`-s`, srv_io_threads).
    pub ser_threads: usize,
    pub io_threads: usize,
    pub chase_threads: usize,
    pub shape: Shape,
    /// Nodes of one PageRank iteration per request (graph_subset).
    pub graph_subset: usize,
    /// Stories per request across the serialization tasks (num_objects).
    pub num_objects: usize,
    /// Minimum generated-function calls per request (`-i`).
    pub icache_iterations: u64,
    pub io_wait: Duration,
    /// Upstream's blocking serving threads or our async IO wait.
    pub serving_model: ServingModel,
    pub compress_bytes: usize,
    pub chase_tasks: usize,
    pub chase_loads: usize,
    pub seed: u64,
}

impl Default for LeafConfig {
    fn default() -> Self {
        LeafConfig {
            serving_threads: 1,
            ranking_threads: 1,
            ser_threads: 1,
            io_threads: 4,
            chase_threads: 8,
            shape: Shape::default(),
            graph_subset: 2_000_000,
            num_objects: 2000,
            icache_iterations: 1_600_000,
            io_wait: Duration::from_millis(200),
            serving_model: ServingModel::Blocking,
            compress_bytes: 128 << 10,
            chase_tasks: 8,
            chase_loads: 640,
            seed: 1,
        }
    }
}

impl LeafConfig {
    /// Memory the datasets need.
    pub fn dataset_bytes(&self) -> usize {
        self.shape.bytes() * self.serving_threads
    }
}

struct Pools {
    /// The serving threads, sharing one queue (see the module comment).
    serving: Pool,
    ranking: Pool,
    ser: Pool,
    io: Pool,
    chase: Pool,
}

/// Shared state of the running leaf.
pub struct LeafState {
    cfg: LeafConfig,
    datasets: OnceLock<Vec<Arc<Dataset>>>,
    pools: Pools,
    ready: AtomicBool,
    next: AtomicU64,
    requests: AtomicU64,
    in_flight: Arc<AtomicU64>,
    build_secs: OnceLock<f64>,
    gamma: Gamma<f64>,
    /// Thread CPU nanoseconds per step, indexed like [`STEPS`].
    step_ns: Arc<[AtomicU64; STEPS.len()]>,
}

/// The pipeline steps whose CPU time the leaf accounts.
pub const STEPS: [&str; 6] = [
    "icache",
    "ranking",
    "compress",
    "serialize",
    "chase",
    "response",
];

/// Counts a request in flight until dropped (completed or cancelled).
struct InFlight(Arc<AtomicU64>);

impl InFlight {
    fn new(gauge: &Arc<AtomicU64>) -> Self {
        gauge.fetch_add(1, Ordering::Relaxed);
        InFlight(gauge.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A pool whose thread is gone (the leaf is stopping).
fn lost<E>(_: E) -> Status {
    Status::internal("a leaf pool stopped")
}

thread_local! {
    /// The number of the serving thread this is (its dataset's index).
    static SERVING_THREAD: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// Runs `f`, adding the thread CPU time it took to `cell`.
fn timed<T>(cell: &AtomicU64, f: impl FnOnce() -> T) -> T {
    let t0 = thread_cpu_ns();
    let out = f();
    cell.fetch_add(thread_cpu_ns().saturating_sub(t0), Ordering::Relaxed);
    out
}

impl LeafState {
    /// Starts the pools; the datasets come later with [`LeafState::build`].
    pub fn new(cfg: LeafConfig) -> Arc<Self> {
        let numbering = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let pools = Pools {
            serving: Pool::with_init("leaf-serve", cfg.serving_threads.max(1), move || {
                SERVING_THREAD.set(Some(numbering.fetch_add(1, Ordering::SeqCst)));
            }),
            ranking: Pool::new("leaf-rank", cfg.ranking_threads),
            ser: Pool::new("leaf-ser", cfg.ser_threads),
            io: Pool::new("leaf-io", cfg.io_threads),
            chase: Pool::new("leaf-chase", cfg.chase_threads),
        };
        Arc::new(LeafState {
            gamma: Gamma::new(0.7, 20_000.0).expect("valid gamma"),
            cfg,
            datasets: OnceLock::new(),
            pools,
            ready: AtomicBool::new(false),
            next: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            in_flight: Arc::new(AtomicU64::new(0)),
            build_secs: OnceLock::new(),
            step_ns: Arc::new(Default::default()),
        })
    }

    /// Builds one dataset per serving thread, in parallel; calls `progress`
    /// as each finishes. Returns the build time.
    pub fn build(&self, progress: &(dyn Fn(usize, usize) + Sync)) -> Duration {
        let t = Instant::now();
        let n = self.cfg.serving_threads.max(1);
        let done = AtomicU64::new(0);
        let sets: Vec<Arc<Dataset>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..n)
                .map(|i| {
                    let shape = self.cfg.shape;
                    let seed = self.cfg.seed.wrapping_mul(1000).wrapping_add(i as u64);
                    let done = &done;
                    s.spawn(move || {
                        let d = Arc::new(Dataset::build(shape, seed));
                        progress(done.fetch_add(1, Ordering::SeqCst) as usize + 1, n);
                        d
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("dataset build"))
                .collect()
        });
        let _ = self.datasets.set(sets);
        let took = t.elapsed();
        let _ = self.build_secs.set(took.as_secs_f64());
        self.ready.store(true, Ordering::SeqCst);
        took
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    /// Bytes of the built datasets.
    pub fn dataset_bytes(&self) -> usize {
        self.datasets
            .get()
            .map(|d| d.iter().map(|x| x.bytes()).sum())
            .unwrap_or(0)
    }

    /// One request through the whole pipeline; returns the reply payload.
    ///
    /// In the blocking model (upstream's) the whole request runs on a
    /// serving thread, which waits on each fan-out and sleeps through the IO
    /// wait: a request queues until a serving thread is free. In the async
    /// model (ours) each step is a task awaited from the gRPC task and the IO
    /// wait is a timer.
    pub async fn handle(self: &Arc<Self>, seed: u64) -> Result<(Vec<u8>, u32), Status> {
        let datasets = self
            .datasets
            .get()
            .filter(|_| self.is_ready())
            .ok_or_else(|| Status::unavailable("leaf is still building its dataset"))?;
        let _in_flight = InFlight::new(&self.in_flight);
        let out = match self.cfg.serving_model {
            ServingModel::Blocking => {
                // The first free serving thread takes it, with its own
                // dataset.
                let state = self.clone();
                self.pools
                    .serving
                    .run(move || {
                        let sets = state.datasets.get().map(Vec::as_slice).unwrap_or(&[]);
                        let idx = SERVING_THREAD.get().unwrap_or(0) % sets.len().max(1);
                        let ds = sets.get(idx).cloned().ok_or_else(|| {
                            Status::unavailable("leaf is still building its dataset")
                        })?;
                        futures::executor::block_on(state.pipeline(ds, seed, true))
                    })
                    .await
                    .map_err(lost)??
            }
            ServingModel::Async => {
                // No thread is held: the datasets are dealt in turn.
                let idx =
                    (self.next.fetch_add(1, Ordering::Relaxed) % datasets.len() as u64) as usize;
                let ds = datasets[idx].clone();
                self.pipeline(ds, seed, false).await?
            }
        };
        self.requests.fetch_add(1, Ordering::Relaxed);
        Ok(out)
    }

    /// Runs `f` where the serving model puts a serving-thread step: inline
    /// when already on the serving thread (blocking), else on `pool`.
    async fn step<T: Send + 'static>(
        pool: &Pool,
        inline: bool,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Status> {
        if inline {
            Ok(f())
        } else {
            pool.run(f).await.map_err(lost)
        }
    }

    /// The request's steps (see the module comment). `blocking`: this runs
    /// on a serving thread and blocks it, as upstream's handler does.
    async fn pipeline(
        &self,
        ds: Arc<Dataset>,
        seed: u64,
        blocking: bool,
    ) -> Result<(Vec<u8>, u32), Status> {
        let c = &self.cfg;
        let mut rng = SmallRng::seed_from_u64(seed);

        // 1. I-cache pressure on this request's serving thread.
        let calls = self.gamma.sample(&mut rng) as u64 + c.icache_iterations;
        let s1 = rng.random::<u64>();
        let st = self.step_ns.clone();
        let ic = Self::step(&self.pools.serving, blocking, move || {
            timed(&st[0], || icache::run(calls, s1))
        })
        .await?;

        // 2. Ranking fan-out.
        let k = c.ranking_threads.max(1);
        let (n, subset) = (ds.graph.nodes, c.graph_subset.min(ds.graph.nodes));
        let base = rng.random::<u64>();
        let g = ds.clone();
        let st = self.step_ns.clone();
        let rank = self
            .pools
            .ranking
            .fan_out(k, move |t| {
                timed(&st[1], || {
                    let mut r = SmallRng::seed_from_u64(base ^ t as u64);
                    g.graph.contributions(r.random_range(0..n), n / k);
                    g.graph.pull(r.random_range(0..n), subset / k)
                })
            })
            .await
            .map_err(lost)?;

        // 3. Simulated IO: the serving thread sleeps through it (blocking),
        // or a timer that holds no thread (async).
        if blocking {
            std::thread::sleep(c.io_wait);
        } else {
            tokio::time::sleep(c.io_wait).await;
        }

        // 4. Compression, on the serving thread (blocking) or the IO pool.
        let bytes = c.compress_bytes.min(ds.random.len());
        let off = rng.random_range(0..=ds.random.len() - bytes);
        let d4 = ds.clone();
        let st = self.step_ns.clone();
        let compressed = Self::step(&self.pools.io, blocking, move || {
            timed(&st[2], || {
                zstd::bulk::compress(&d4.random[off..off + bytes], 3)
            })
        })
        .await?
        .map_err(|e| Status::internal(format!("zstd: {e}")))?;

        // 5. Serialization fan-out.
        let s = c.ser_threads.max(1);
        let per_task = (c.num_objects / s).max(1);
        let sbase = rng.random::<u64>();
        let st = self.step_ns.clone();
        let ser = self
            .pools
            .ser
            .fan_out(s, move |t| {
                timed(&st[3], || {
                    let mut r = SmallRng::seed_from_u64(sbase ^ (t as u64) << 1);
                    let bytes = story::serialize(&story::response(per_task, &mut r));
                    let half = zstd::bulk::compress(&bytes[..bytes.len() / 2], 3)
                        .map(|v| v.len())
                        .unwrap_or(0);
                    bytes.len() + half
                })
            })
            .await
            .map_err(lost)?;

        // 6. Pointer chasing.
        let cbase = rng.random::<u64>();
        let loads = c.chase_loads;
        let d6 = ds.clone();
        let st = self.step_ns.clone();
        let chased = self
            .pools
            .chase
            .fan_out(c.chase_tasks, move |t| {
                timed(&st[4], || {
                    d6.chase(cbase.wrapping_add(t as u64 * 7919), loads)
                })
            })
            .await
            .map_err(lost)?;

        // 7. The response: build and serialize one more, decompress the
        // earlier payload, decode the response again (round trip), reply;
        // on the serving thread (blocking) or the IO pool.
        let rseed = rng.random::<u64>();
        let bytes_in = bytes;
        let checksum = ic
            ^ chased.iter().fold(0, |a, b| a ^ b)
            ^ ser.iter().sum::<usize>() as u64
            ^ rank.iter().sum::<f64>().to_bits();
        let st = self.step_ns.clone();
        Self::step(
            &self.pools.io,
            blocking,
            move || -> Result<(Vec<u8>, u32), String> {
                let t0 = thread_cpu_ns();
                let mut r = SmallRng::seed_from_u64(rseed ^ checksum);
                let resp = story::response(per_task, &mut r);
                let bytes = story::serialize(&resp);
                let plain =
                    zstd::bulk::decompress(&compressed, bytes_in).map_err(|e| e.to_string())?;
                if plain.len() != bytes_in {
                    return Err(format!(
                        "decompressed {} bytes, expected {bytes_in}",
                        plain.len()
                    ));
                }
                let back = RankingResponse::decode(bytes.as_slice()).map_err(|e| e.to_string())?;
                let n = back.stories.len() as u32;
                st[5].fetch_add(thread_cpu_ns().saturating_sub(t0), Ordering::Relaxed);
                Ok((bytes, n))
            },
        )
        .await?
        .map_err(Status::internal)
    }

    /// Pool tasks skipped because their request had been cancelled.
    pub fn skipped_tasks(&self) -> u64 {
        let p = &self.pools;
        p.serving.skipped()
            + p.ranking.skipped()
            + p.ser.skipped()
            + p.io.skipped()
            + p.chase.skipped()
    }

    fn status(&self) -> StatusReply {
        let (rss, cpu) = proc_self();
        StatusReply {
            ready: self.is_ready(),
            rss_bytes: rss,
            cpu_seconds: cpu,
            requests: self.requests.load(Ordering::Relaxed),
            build_seconds: self.build_secs.get().copied().unwrap_or(0.0),
            serving_threads: self.cfg.serving_threads as u32,
            dataset_bytes: self.dataset_bytes() as u64,
            in_flight: self.in_flight.load(Ordering::Relaxed),
            skipped_tasks: self.skipped_tasks(),
            anon_huge_bytes: crate::hugemem::anon_huge_bytes().unwrap_or(0),
            thp_mode: crate::hugemem::thp_mode().unwrap_or_default(),
            huge_pages_advised: self.cfg.shape.huge_pages,
            serving_model: self.cfg.serving_model.name().into(),
            steps: STEPS
                .iter()
                .zip(self.step_ns.iter())
                .map(|(name, ns)| StepCpu {
                    step: name.to_string(),
                    cpu_seconds: ns.load(Ordering::Relaxed) as f64 / 1e9,
                })
                .collect(),
        }
    }
}

/// The gRPC service over a shared state.
#[derive(Clone)]
pub struct LeafService(pub Arc<LeafState>);

#[tonic::async_trait]
impl Leaf for LeafService {
    async fn rank(&self, req: Request<RankRequest>) -> Result<Response<RankReply>, Status> {
        let r = req.into_inner();
        let (payload, stories) = self.0.handle(r.seed ^ r.payload.len() as u64).await?;
        Ok(Response::new(RankReply { payload, stories }))
    }

    async fn status(&self, _req: Request<StatusRequest>) -> Result<Response<StatusReply>, Status> {
        Ok(Response::new(self.0.status()))
    }
}

impl LeafService {
    pub fn into_server(self) -> LeafServer<Self> {
        LeafServer::new(self)
            .max_decoding_message_size(64 << 20)
            .max_encoding_message_size(64 << 20)
    }
}
