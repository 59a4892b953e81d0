//! The calibration server: an M/D/c queue made real.
//!
//! Requests are queued first come first served to `workers` OS threads; each
//! worker holds a request for exactly the service time (an absolute
//! `clock_nanosleep` with 1 ns timer slack, so the wait does not depend on CPU
//! speed and overshoots by microseconds, not tokio's millisecond ticks), then
//! replies. With `workers == 0` the server replies inline at once: a no-op
//! server for measuring the load generator itself.

use rpc::proto::calibrate::calibrate_server::{Calibrate, CalibrateServer};
use rpc::proto::calibrate::{WorkReply, WorkRequest};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use tonic::{Request, Response, Status};

struct Job {
    queued: Instant,
    reply_bytes: u32,
    done: oneshot::Sender<WorkReply>,
}

/// Service-time statistics the workers keep, to compare the real queue with
/// the model.
#[derive(Debug, Default)]
pub struct Stats {
    served: AtomicU64,
    service_ns: AtomicU64,
}

impl Stats {
    /// Requests served and their mean service time.
    pub fn snapshot(&self) -> (u64, Option<Duration>) {
        let n = self.served.load(Ordering::Relaxed);
        let ns = self.service_ns.load(Ordering::Relaxed);
        (n, (n > 0).then(|| Duration::from_nanos(ns / n)))
    }
}

/// The gRPC service.
#[derive(Clone)]
pub struct Service {
    queue: Option<mpsc::SyncSender<Job>>,
    pub stats: Arc<Stats>,
}

impl Service {
    /// Starts `workers` worker threads with service time `service`; the
    /// threads exit when the last clone of the service is dropped.
    pub fn new(workers: usize, service: Duration) -> Self {
        let stats = Arc::new(Stats::default());
        if workers == 0 {
            return Service { queue: None, stats };
        }
        // The queue is bounded only to keep memory finite under absurd load.
        let (tx, rx) = mpsc::sync_channel::<Job>(1 << 20);
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..workers {
            let rx = rx.clone();
            let stats = stats.clone();
            std::thread::Builder::new()
                .name(format!("calib-worker-{i}"))
                .spawn(move || worker(rx, service, stats))
                .expect("spawning a worker thread");
        }
        Service {
            queue: Some(tx),
            stats,
        }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> CalibrateServer<Self> {
        CalibrateServer::new(self).max_decoding_message_size(64 << 20)
    }
}

fn worker(rx: Arc<Mutex<mpsc::Receiver<Job>>>, service: Duration, stats: Arc<Stats>) {
    // SAFETY: prctl on the calling thread with an integer argument.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    loop {
        let job = match rx.lock() {
            Ok(guard) => match guard.recv() {
                Ok(job) => job,
                Err(_) => return,
            },
            Err(_) => return,
        };
        let start = Instant::now();
        sleep_until(start + service);
        let took = start.elapsed();
        stats.served.fetch_add(1, Ordering::Relaxed);
        stats
            .service_ns
            .fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
        let _ = job.done.send(WorkReply {
            payload: vec![0u8; job.reply_bytes as usize],
            queue_us: start.duration_since(job.queued).as_micros() as u64,
            service_us: took.as_micros() as u64,
        });
    }
}

/// Sleeps until `deadline` with an absolute CLOCK_MONOTONIC sleep.
fn sleep_until(deadline: Instant) {
    loop {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        std::thread::sleep(deadline - now);
    }
}

#[tonic::async_trait]
impl Calibrate for Service {
    async fn work(&self, request: Request<WorkRequest>) -> Result<Response<WorkReply>, Status> {
        let req = request.into_inner();
        let Some(queue) = &self.queue else {
            return Ok(Response::new(WorkReply {
                payload: vec![0u8; req.reply_bytes as usize],
                queue_us: 0,
                service_us: 0,
            }));
        };
        let (done, rx) = oneshot::channel();
        let job = Job {
            queued: Instant::now(),
            reply_bytes: req.reply_bytes,
            done,
        };
        queue
            .try_send(job)
            .map_err(|_| Status::resource_exhausted("calibration queue is full"))?;
        rx.await
            .map(Response::new)
            .map_err(|_| Status::internal("calibration worker stopped"))
    }
}
