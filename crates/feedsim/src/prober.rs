//! The search's prober against a leaf: its requests, the Rank RPC as a
//! service, the driver's workers, the closed-compat driver's slots, and
//! the liveness and settle checks between probes.

use crate::cli::{COMPAT_CONNECTIONS, auto_driver_threads};
use crate::leaf_process::{LeafProcess, status};
use crate::proto::RankRequest;
use crate::proto::leaf_client::LeafClient;
use load::Mode;
use load::search::Prober;
use rand::RngCore;
use rand::SeedableRng;
use std::sync::Arc;
use std::time::Duration;
use tonic::Request;

/// Longest wait for the leaf to become idle between probes.
const SETTLE_LIMIT: Duration = Duration::from_secs(60);

/// Bytes of random payload in each request.
pub const REQUEST_BYTES: usize = 3000;

/// The search's probes as the chosen driver runs them: unchanged for the
/// open-loop driver; for `--driver closed-compat`, DCPerf's DriverNodeRank
/// (threads x 4 connections at depth 1): a rate becomes
/// [`Mode::Capped`] with that many slots, an unthrottled run keeps that
/// many requests in flight.
pub(crate) struct DriverProber<P> {
    pub(crate) inner: P,
    /// Closed-compat: (driver threads, -a scaling by rate).
    pub(crate) compat: Option<(usize, bool)>,
}

impl<P> DriverProber<P> {
    fn map(&self, mode: Mode) -> Mode {
        let Some((threads, auto)) = self.compat else {
            return mode;
        };
        match mode {
            Mode::Open { rate, arrival } | Mode::Capped { rate, arrival, .. } => {
                let t = if auto {
                    auto_driver_threads(Some(rate), threads)
                } else {
                    threads
                };
                Mode::Capped {
                    rate,
                    arrival,
                    slots: t * COMPAT_CONNECTIONS,
                }
            }
            Mode::Closed { .. } => Mode::Closed {
                concurrency: threads * COMPAT_CONNECTIONS,
            },
        }
    }
}

impl<P: Prober> Prober for DriverProber<P> {
    async fn probe(
        &mut self,
        mode: Mode,
        warmup: Duration,
        duration: Duration,
    ) -> Result<load::RunResult, load::Error> {
        let mode = self.map(mode);
        self.inner.probe(mode, warmup, duration).await
    }

    async fn settle(&mut self) -> Result<Duration, load::Error> {
        self.inner.settle().await
    }
}

/// The leaf's Rank RPC as a tower service over `pool`.
pub(crate) fn rank_service(
    pool: rpc::client::Pool<tonic::transport::Channel>,
) -> impl tower::Service<
    Request<RankRequest>,
    Response = tonic::Response<crate::proto::RankReply>,
    Error = tonic::Status,
    Future = impl std::future::Future<
        Output = Result<tonic::Response<crate::proto::RankReply>, tonic::Status>,
    > + Send,
> + Clone
+ Send
+ 'static {
    let rank_client = LeafClient::new(pool).max_decoding_message_size(64 << 20);
    tower::service_fn(move |req: Request<RankRequest>| {
        let mut c = rank_client.clone();
        async move { c.rank(req).await }
    })
}

/// Request `n` of the stream seeded with `seed`.
pub(crate) fn request_maker(
    seed: u64,
) -> Arc<impl Fn(u64) -> Request<RankRequest> + Send + Sync + 'static> {
    Arc::new(move |n: u64| {
        let mut rng =
            rand::rngs::SmallRng::seed_from_u64(seed.wrapping_mul(0x9E37_79B9).wrapping_add(n));
        let mut payload = vec![0u8; REQUEST_BYTES];
        rng.fill_bytes(&mut payload);
        Request::new(RankRequest {
            payload,
            seed: rng.next_u64(),
        })
    })
}

/// Driver workers for a mode (`auto`: `-a`, by rate).
pub(crate) fn driver_workers(auto: bool) -> Box<dyn Fn(Mode) -> usize + Send> {
    Box::new(move |mode| match (auto, mode) {
        // Closed-compat: one worker per driver thread.
        (_, Mode::Capped { slots, .. }) => slots / COMPAT_CONNECTIONS,
        (true, Mode::Open { rate, .. }) => ((rate / 100.0).ceil() as usize).clamp(1, 16),
        _ => 1,
    })
}

/// The prober's liveness check: fails once the leaf process exited.
pub(crate) fn leaf_alive_check(
    leaf: Arc<std::sync::Mutex<Option<LeafProcess>>>,
) -> Box<dyn FnMut() -> Result<(), load::Error> + Send> {
    Box::new(move || {
        let mut g = leaf.lock().unwrap_or_else(|e| e.into_inner());
        match g.as_mut().and_then(|l| l.exited()) {
            Some(why) => Err(load::Error::Host(why)),
            None => Ok(()),
        }
    })
}

/// Before each probe, wait until the leaf has no request in flight: the
/// requests an overloaded probe gave up on are cancelled and their queued
/// work skipped, and the next probe starts from an idle leaf.
pub(crate) fn settle_on_idle_leaf(
    client: LeafClient<tonic::transport::Channel>,
) -> load::prober::SettleFn {
    load::prober::until_idle(
        move || {
            let mut c = client.clone();
            async move {
                status(&mut c).await.map(|s| s.in_flight).map_err(|e| {
                    load::Error::Host(format!("the leaf stopped answering its status RPC: {e}"))
                })
            }
        },
        SETTLE_LIMIT,
    )
}
