//! The calibration server: an M/D/c queue made real.
//!
//! Requests are queued first come first served to `workers` OS threads (an
//! [`rpc::pool::Pool`]); each worker holds a request for exactly the service
//! time (a sleep with 1 ns
//! timer slack, so the wait does not depend on CPU
//! speed and overshoots by microseconds, not tokio's millisecond ticks), then
//! replies. With `workers == 0` the server replies inline at once: a no-op
//! server for measuring the load generator itself.

use crate::proto::calibrate_server::{Calibrate, CalibrateServer};
use crate::proto::{WorkReply, WorkRequest};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tonic::{Request, Response, Status};

/// A periodic stall: the server serves nothing during the last `length` of
/// every `every` since `origin` (requests wait for the stall to end). Used to
/// show coordinated omission: the true latency of a request that arrives in a
/// stall includes the rest of the stall.
#[derive(Debug, Clone, Copy)]
pub struct Stall {
    pub every: Duration,
    pub length: Duration,
    pub origin: Instant,
}

impl Stall {
    /// When the stall covering `now` ends, if `now` is in one.
    pub fn end_if_stalled(&self, now: Instant) -> Option<Instant> {
        let since = now.saturating_duration_since(self.origin);
        let period = self.every.as_nanos();
        let phase = since.as_nanos() % period;
        let start = period - self.length.as_nanos();
        (phase >= start).then(|| now + Duration::from_nanos((period - phase) as u64))
    }
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
    /// Requests served and their total service time, nanoseconds (two
    /// readings give the mean over the time between them).
    pub fn totals(&self) -> (u64, u64) {
        (
            self.served.load(Ordering::Relaxed),
            self.service_ns.load(Ordering::Relaxed),
        )
    }

    pub fn snapshot(&self) -> (u64, Option<Duration>) {
        let n = self.served.load(Ordering::Relaxed);
        let ns = self.service_ns.load(Ordering::Relaxed);
        (n, (n > 0).then(|| Duration::from_nanos(ns / n)))
    }
}

/// The gRPC service.
#[derive(Clone)]
pub struct Service {
    workers: Option<Arc<rpc::pool::Pool>>,
    service: Duration,
    stall: Option<Stall>,
    pub stats: Arc<Stats>,
}

impl Service {
    /// Starts `workers` worker threads with service time `service`; the
    /// threads exit when the last clone of the service is dropped.
    pub fn new(workers: usize, service: Duration, stall: Option<Stall>) -> Self {
        let workers = (workers > 0).then(|| {
            Arc::new(rpc::pool::Pool::with_init("calib-worker", workers, || {
                // SAFETY: prctl on the calling thread with an integer
                // argument.
                unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
            }))
        });
        Service {
            workers,
            service,
            stall,
            stats: Arc::new(Stats::default()),
        }
    }

    /// The tonic server wrapper.
    pub fn into_server(self) -> CalibrateServer<Self> {
        CalibrateServer::new(self).max_decoding_message_size(64 << 20)
    }
}

/// One request on a worker: wait out a stall, hold the worker for the
/// service time, reply.
fn serve(
    queued: Instant,
    reply_bytes: u32,
    service: Duration,
    stall: Option<Stall>,
    stats: &Stats,
) -> WorkReply {
    if let Some(end) = stall.and_then(|s| s.end_if_stalled(Instant::now())) {
        sleep_until(end);
    }
    let start = Instant::now();
    sleep_until(start + service);
    let took = start.elapsed();
    stats.served.fetch_add(1, Ordering::Relaxed);
    stats
        .service_ns
        .fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
    WorkReply {
        payload: vec![0u8; reply_bytes as usize],
        queue_us: start.duration_since(queued).as_micros() as u64,
        service_us: took.as_micros() as u64,
    }
}

/// Sleeps until `deadline` (with the thread's timer slack at 1 ns, the
/// overshoot is the scheduler's wake-up latency, microseconds).
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
        let Some(pool) = &self.workers else {
            if let Some(end) = self.stall.and_then(|s| s.end_if_stalled(Instant::now())) {
                tokio::time::sleep_until(end.into()).await;
            }
            return Ok(Response::new(WorkReply {
                payload: vec![0u8; req.reply_bytes as usize],
                queue_us: 0,
                service_us: 0,
            }));
        };
        let (queued, reply_bytes, service, stall) =
            (Instant::now(), req.reply_bytes, self.service, self.stall);
        let stats = self.stats.clone();
        pool.run(move || serve(queued, reply_bytes, service, stall, &stats))
            .await
            .map(Response::new)
            .map_err(|_| Status::internal("calibration worker stopped"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stall_windows() {
        let origin = Instant::now();
        let s = Stall {
            every: Duration::from_secs(10),
            length: Duration::from_secs(1),
            origin,
        };
        assert_eq!(
            s.end_if_stalled(origin + Duration::from_millis(8_999)),
            None
        );
        let end = s
            .end_if_stalled(origin + Duration::from_millis(9_250))
            .unwrap();
        assert_eq!(end, origin + Duration::from_secs(10));
        assert_eq!(
            s.end_if_stalled(origin + Duration::from_millis(10_001)),
            None
        );
        assert!(
            s.end_if_stalled(origin + Duration::from_millis(19_500))
                .is_some()
        );
    }
}
