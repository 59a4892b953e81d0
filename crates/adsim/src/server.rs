//! The AdSim server: the configured kernels built at start-up, then, per
//! request, every stage in order with the kernel instances of a stage fired
//! concurrently, each on its pool; the response is the concatenation of
//! their outputs in configuration order.
//!
//! Pools (upstream's names):
//! - `IOHandle`: the threads of the server's async runtime (which also
//!   receive and answer RPCs); kernels on it run inline on the request's
//!   task, so only cheap kernels (FakeIO, Shape) belong there.
//! - `requestHandle` and `applicationLogic`: fixed OS thread pools.
//! - `defaultPool` / `reqLocal`: each request gets its own
//!   `num_req_local_threads` slots on the blocking pool (upstream creates a
//!   small thread pool per request).
//!
//! Off-CPU waits (FakeIO, Delay) are awaited on the runtime's timer after
//! the kernel returns; no thread sleeps.

use crate::Error;
use crate::config::{Pool as PoolKind, ServerConfig};
use crate::kernels::{self, HandleObjs, Kernel, RequestObjs};
use crate::proto::ad_sim_server::{AdSim, AdSimServer};
use crate::proto::{KernelStat, SimReply, SimRequest, StatusReply, StatusRequest};
use bytes::{Bytes, BytesMut};
use rpc::pool::Pool;
use rpc::procstat::{proc_self, thread_cpu_ns};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use tonic::{Request, Response, Status};

/// Counters of one configured kernel.
#[derive(Default)]
struct Counters {
    fired: AtomicU64,
    cpu_ns: AtomicU64,
    wall_ns: AtomicU64,
}

/// One kernel instance in the plan.
struct Step {
    /// Index in the configuration's `Kernels`.
    index: usize,
    pool: PoolKind,
    kernel: Box<dyn Kernel>,
}

/// The built pipeline and its pools.
pub struct Engine {
    cfg: ServerConfig,
    stages: OnceLock<Vec<Vec<Arc<Step>>>>,
    request_pool: Pool,
    app_pool: Pool,
    counters: Vec<Counters>,
    requests: AtomicU64,
    failed: AtomicU64,
    in_flight: AtomicU64,
    ready: AtomicBool,
    init: OnceLock<Duration>,
    first_error: OnceLock<String>,
}

/// Decrements a gauge when dropped (the request ended, or was cancelled).
struct Gauge<'a>(&'a AtomicU64);

impl Drop for Gauge<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Engine {
    /// The pools, started; kernels are built by [`Engine::build`].
    pub fn new(cfg: ServerConfig) -> Arc<Engine> {
        let counters = cfg.kernels.iter().map(|_| Counters::default()).collect();
        Arc::new(Engine {
            request_pool: Pool::new("adsim-req", cfg.num_req_handle_threads),
            app_pool: Pool::new("adsim-app", cfg.num_app_logic_threads),
            cfg,
            stages: OnceLock::new(),
            counters,
            requests: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            ready: AtomicBool::new(false),
            init: OnceLock::new(),
            first_error: OnceLock::new(),
        })
    }

    pub fn config(&self) -> &ServerConfig {
        &self.cfg
    }

    /// Builds every kernel instance (their start-up data on up to `threads`
    /// threads), reporting `(built, total)`. An error names the kernel's
    /// index and kind.
    pub fn build(
        &self,
        threads: usize,
        progress: &(dyn Fn(usize, usize) + Sync),
    ) -> Result<Duration, Error> {
        let t0 = Instant::now();
        let plan = self.cfg.plan();
        let handle = HandleObjs::new();
        let flat: Vec<(usize, &crate::config::Instance)> = plan
            .stages
            .iter()
            .enumerate()
            .flat_map(|(s, v)| v.iter().map(move |i| (s, i)))
            .collect();
        let total = flat.len();
        let next = AtomicU64::new(0);
        let done = AtomicU64::new(0);
        let slots: Vec<std::sync::Mutex<Option<Result<Step, Error>>>> =
            (0..total).map(|_| std::sync::Mutex::new(None)).collect();
        std::thread::scope(|s| {
            for _ in 0..threads.clamp(1, total.max(1)) {
                s.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                        if i >= total {
                            return;
                        }
                        let inst = flat[i].1;
                        let entry = &self.cfg.kernels[inst.kernel];
                        let r = kernels::build(&entry.name, &inst.params, inst.fidx, &handle)
                            .map(|kernel| Step {
                                index: inst.kernel,
                                pool: entry.pool,
                                kernel,
                            })
                            .map_err(|e| {
                                e.context(format_args!("Kernels[{}] ({})", inst.kernel, entry.name))
                            });
                        *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
                        let d = done.fetch_add(1, Ordering::Relaxed) as usize + 1;
                        progress(d, total);
                    }
                });
            }
        });
        let mut stages: Vec<Vec<Arc<Step>>> = plan.stages.iter().map(|_| Vec::new()).collect();
        for ((stage, _), slot) in flat.iter().zip(slots) {
            match slot.into_inner().unwrap_or_else(|e| e.into_inner()) {
                Some(Ok(step)) => stages[*stage].push(Arc::new(step)),
                Some(Err(e)) => return Err(e),
                None => return Err(Error::Host("a kernel was not built".into())),
            }
        }
        let _ = self.stages.set(stages);
        let took = t0.elapsed();
        let _ = self.init.set(took);
        self.ready.store(true, Ordering::Release);
        Ok(took)
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Fires one kernel instance part, counting its time.
    fn fire(&self, step: &Step, rq: &RequestObjs, part: usize) -> Result<kernels::Fired, String> {
        let (c0, w0) = (thread_cpu_ns(), Instant::now());
        let r = step.kernel.fire(rq, part);
        let c = &self.counters[step.index];
        c.cpu_ns
            .fetch_add(thread_cpu_ns().saturating_sub(c0), Ordering::Relaxed);
        c.wall_ns
            .fetch_add(w0.elapsed().as_nanos() as u64, Ordering::Relaxed);
        c.fired.fetch_add(1, Ordering::Relaxed);
        r.map_err(|e| {
            format!(
                "Kernels[{}] ({}): {e}",
                step.index, self.cfg.kernels[step.index].name
            )
        })
    }

    /// Runs one request through every stage; the response is the kernels'
    /// outputs concatenated.
    pub async fn handle(self: &Arc<Self>, request: Bytes) -> Result<Bytes, Error> {
        let stages = self
            .stages
            .get()
            .ok_or_else(|| Error::Host("the server is still initialising its kernels".into()))?;
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        let _g = Gauge(&self.in_flight);
        let rq = Arc::new(RequestObjs::new(request));
        let local = Arc::new(Semaphore::new(self.cfg.num_req_local_threads.max(1)));
        let mut out = BytesMut::new();
        let r: Result<(), String> = async {
            for stage in stages {
                let mut futs = Vec::new();
                for step in stage {
                    for part in 0..step.kernel.parts() {
                        futs.push(self.clone().fire_on_pool(
                            step.clone(),
                            rq.clone(),
                            part,
                            local.clone(),
                        ));
                    }
                }
                for fired in futures::future::join_all(futs).await {
                    out.extend_from_slice(&fired?);
                }
            }
            Ok(())
        }
        .await;
        if let Err(e) = r {
            self.failed.fetch_add(1, Ordering::Relaxed);
            let _ = self.first_error.set(e.clone());
            // A kernel failed on this request (its input or the host).
            return Err(Error::Host(e));
        }
        Ok(out.freeze())
    }

    /// Fires `step` on its pool, then waits out its off-CPU wait.
    async fn fire_on_pool(
        self: Arc<Self>,
        step: Arc<Step>,
        rq: Arc<RequestObjs>,
        part: usize,
        local: Arc<Semaphore>,
    ) -> Result<Bytes, String> {
        let gone = || "the server is shutting down".to_string();
        let fired = match step.pool {
            PoolKind::IoHandle => self.fire(&step, &rq, part)?,
            PoolKind::RequestHandle | PoolKind::ApplicationLogic => {
                let pool = if step.pool == PoolKind::RequestHandle {
                    &self.request_pool
                } else {
                    &self.app_pool
                };
                let me = self.clone();
                let s = step.clone();
                pool.run(move || me.fire(&s, &rq, part))
                    .await
                    .map_err(|_| gone())??
            }
            PoolKind::RequestLocal => {
                let _slot = local.acquire_owned().await.map_err(|_| gone())?;
                let me = self.clone();
                let s = step.clone();
                tokio::task::spawn_blocking(move || me.fire(&s, &rq, part))
                    .await
                    .map_err(|_| gone())??
            }
        };
        if let Some(w) = fired.wait {
            tokio::time::sleep(w).await;
        }
        Ok(fired.output)
    }

    /// Readiness, resource use and per-kernel counters.
    pub fn status(&self) -> StatusReply {
        let (rss, cpu) = proc_self();
        StatusReply {
            ready: self.is_ready(),
            requests: self.requests.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            in_flight: self.in_flight.load(Ordering::Relaxed),
            rss_bytes: rss,
            cpu_seconds: cpu,
            init_seconds: self.init.get().map_or(0.0, Duration::as_secs_f64),
            kernels: self
                .cfg
                .kernels
                .iter()
                .enumerate()
                .map(|(i, k)| {
                    let c = &self.counters[i];
                    let fired = c.fired.load(Ordering::Relaxed);
                    let per = self
                        .stages
                        .get()
                        .and_then(|s| s.iter().flatten().find(|st| st.index == i))
                        .map_or(0.0, |st| st.kernel.work().flops);
                    KernelStat {
                        index: i as u32,
                        name: k.name.clone(),
                        fired,
                        cpu_seconds: c.cpu_ns.load(Ordering::Relaxed) as f64 / 1e9,
                        wall_seconds: c.wall_ns.load(Ordering::Relaxed) as f64 / 1e9,
                        flops: per * fired as f64,
                    }
                })
                .collect(),
            config_json: self.cfg.to_value().to_string(),
        }
    }

    /// The first kernel error seen, if any.
    pub fn first_error(&self) -> Option<&str> {
        self.first_error.get().map(String::as_str)
    }
}

/// The gRPC service over an engine.
#[derive(Clone)]
pub struct Service(pub Arc<Engine>);

#[tonic::async_trait]
impl AdSim for Service {
    async fn sim(&self, req: Request<SimRequest>) -> Result<Response<SimReply>, Status> {
        let body = req.into_inner().request;
        match self.0.handle(body).await {
            Ok(response) => Ok(Response::new(SimReply { response })),
            Err(e) if !self.0.is_ready() => Err(Status::unavailable(e)),
            Err(e) => Err(Status::internal(e)),
        }
    }

    async fn status(&self, _req: Request<StatusRequest>) -> Result<Response<StatusReply>, Status> {
        Ok(Response::new(self.0.status()))
    }
}

impl Service {
    pub fn into_server(self) -> AdSimServer<Self> {
        AdSimServer::new(self)
            .max_decoding_message_size(256 << 20)
            .max_encoding_message_size(256 << 20)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine(json: &str) -> Arc<Engine> {
        let cfg = ServerConfig::from_json(json, "test.json").unwrap();
        let e = Engine::new(cfg);
        e.build(2, &|_, _| {}).unwrap();
        e
    }

    #[tokio::test]
    async fn stages_run_in_order_and_outputs_concatenate() {
        // Stage 0 compresses; stage 1 decompresses what stage 0 wrote
        // (failing if it ran first); stage 2 echoes the request and adds
        // a 5-byte string.
        let e = engine(
            r#"{"port": 1, "num_req_handle_threads": 2, "num_app_logic_threads": 2, "Kernels": [
              {"name": "Compress", "pool": "requestHandle", "stage": 0,
               "params": {"compressor": "zstd", "level": 1, "size": 4096, "output": "Rc"}},
              {"name": "Decompress", "pool": "applicationLogic", "stage": 1,
               "params": {"compressor": "zstd", "level": 1, "size": 4096, "input": "Rc"}},
              {"name": "Shape", "pool": "IOHandle", "stage": 2, "params": {"input": "Recho", "quantiles": [0, 1], "sizes": [1, 1]}},
              {"name": "Shape", "stage": 2, "params": {"quantiles": [0, 1], "sizes": [5, 5]}},
              {"name": "FakeIO", "pool": "IOHandle", "stage": 3, "fanout": 3,
               "params": {"quantiles": [0, 1], "latencies": [20000, 20000]}}
            ]}"#,
        );
        let t = Instant::now();
        let out = e.handle(Bytes::from_static(b"abc")).await.unwrap();
        // Three 20 ms waits of one stage overlap.
        let took = t.elapsed();
        assert!(
            took >= Duration::from_millis(20) && took < Duration::from_millis(55),
            "{took:?}"
        );
        assert_eq!(out.len(), 3 + 5);
        assert_eq!(&out[..3], b"abc");
        let st = e.status();
        assert_eq!(st.requests, 1);
        assert_eq!(st.failed, 0);
        let fired: Vec<u64> = st.kernels.iter().map(|k| k.fired).collect();
        assert_eq!(fired, vec![1, 1, 1, 1, 3]);
        assert!(st.kernels[0].cpu_seconds > 0.0);
        assert_eq!(st.in_flight, 0);
    }

    #[tokio::test]
    async fn a_failing_kernel_fails_the_request_with_its_name() {
        let e = engine(
            r#"{"port": 1, "Kernels": [
              {"name": "DeepCopy", "pool": "applicationLogic", "params": {"copy_len": 2, "input": "Rnobody"}}
            ]}"#,
        );
        let err = e.handle(Bytes::new()).await.unwrap_err();
        assert!(
            err.to_string().contains("Kernels[0] (DeepCopy)")
                && err.to_string().contains("\"Rnobody\""),
            "{err}"
        );
        assert_eq!(e.status().failed, 1);
    }

    #[test]
    fn a_kernel_that_cannot_be_built_is_named() {
        let cfg = ServerConfig::from_json(
            r#"{"port": 1, "Kernels": [{"name": "Decompress", "params": {"compressor": "zstd", "level": 99, "size": 10}}]}"#,
            "t.json",
        )
        .unwrap();
        let e = Engine::new(cfg);
        let err = e.build(1, &|_, _| {}).unwrap_err();
        assert!(
            err.to_string().starts_with("Kernels[0] (Decompress)")
                && err.to_string().contains("level"),
            "{err}"
        );
        assert!(!e.is_ready());
    }
}
