//! Replaying an RPC trace: one iteration of an action with
//! `rpc_replay_trace_name`, as upstream's `RpcReplayTraceRunner`
//! (google/distbench 8a5cfae, distbench_engine.cc).
//!
//! * The instance replays the records whose `client_instance` is its own
//!   index or unset.
//! * A record waits for the records its `prior_rpc_distances` name, except
//!   those replayed only by another client instance (ignored, as
//!   upstream). Once they are done it starts `timing_ns` after the start of
//!   the last one to start (`RELATIVE_TO_PRIOR_RPC_START`) or the end of the
//!   last one to end (`RELATIVE_TO_PRIOR_RPC_END`).
//! * A record without such a dependency starts `timing_ns` after the start
//!   of this replay (`RELATIVE_TO_TRACE_START`) or else after the traffic
//!   start, which is upstream's: the start time the sequencer sends plus
//!   1 s. A time already past starts the RPC at once; RPCs start in order
//!   of their times (ties by record index).
//! * Each RPC goes to `server_instance` of the trace's server, or through
//!   the channel `multi_server_channel_name_index` names; it carries no
//!   RPC index, its whole request is `request_size` bytes and it asks for a
//!   `response_size`-byte response (the server answers without running a
//!   handler list).
//! * The log ([`RpcReplayTraceLog`]) holds one sample per replayed record,
//!   keyed by record index: `start_timestamp_ns` relative to the replay's
//!   start (`timestamp_offset_ns`, Unix time), `latency_ns`, and an
//!   `error_index` into the instance's error dictionary when it failed. Its
//!   trace context is the incoming RPC's, extended with this instance's
//!   engine id, list invocation, list, action and iteration, as upstream's.
//!   A replay that sent nothing leaves no log.
//!
//! Where upstream's engine has an evident bug, the evident intent is
//! implemented: an RPC through a channel gets its sizes too (upstream's
//! carries neither, and its server refuses it with `rpc has no index, and no
//! response size`); the server answers with the response size asked for
//! (upstream's inline gRPC server never sends the response it builds, so the
//! client gets an empty one; its other server types never answer); and the
//! log is marked `warmup` when the iteration is a warm-up one (upstream
//! never sets it). `server_processing_time_ns` is not sent, as upstream
//! (check_test warns). Once traffic is cancelled no further RPC starts.

use super::{Engine, ListRun, STOPPING, Sent, unix_ns};
use crate::engine::driver;
use crate::engine::tables::{ReplayRecord, ReplayTarget, Timing};
use crate::proto::{GenericRequestResponse, RpcReplayTraceLog, RpcSample};
use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use prost::Message;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// The traffic start of a replay: upstream adds 1 s to the start time the
/// sequencer sends.
pub const TRAFFIC_START_OFFSET: Duration = Duration::from_secs(1);

/// `base` moved by `ns` (either way; clamped where an `Instant` cannot go).
fn offset(base: Instant, ns: i64) -> Instant {
    let d = Duration::from_nanos(ns.unsigned_abs());
    if ns >= 0 {
        base.checked_add(d).unwrap_or(base)
    } else {
        base.checked_sub(d).unwrap_or(base)
    }
}

fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// The sample of a replayed RPC: its start relative to the replay's.
fn sample_of(sent: &Sent, trace_start: Instant) -> RpcSample {
    RpcSample {
        start_timestamp_ns: Some(nanos(sent.started.saturating_duration_since(trace_start))),
        latency_ns: Some(nanos(sent.latency)),
        ..Default::default()
    }
}

impl Engine {
    /// One replay of trace `t` by action `action` of a list run.
    pub(super) fn replay_iteration(
        self: Arc<Self>,
        run: Arc<ListRun>,
        action: usize,
        t: usize,
        iteration: i64,
        warmup: bool,
    ) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let tables = self.tables.clone();
            let trace = &tables.traces[t];
            if trace.client != self.service {
                // check_test refuses a trace run by another service.
                return;
            }
            let records: &[ReplayRecord] = &trace.records;
            let me = i32::try_from(self.instance).unwrap_or(i32::MAX);
            let mine = |i: usize| records[i].client_instance.is_none_or(|c| c == me);

            let trace_start_wall = SystemTime::now();
            let trace_start = Instant::now();
            let traffic_start = {
                let start = *self.traffic_start.lock().unwrap_or_else(|e| e.into_inner());
                super::instant_at(start.unwrap_or(trace_start_wall) + TRAFFIC_START_OFFSET)
            };

            // Dependencies, and the records ready to start (by time).
            let n = records.len();
            let mut waiting_for = vec![0usize; n];
            let mut after_start: Vec<Vec<usize>> = vec![Vec::new(); n];
            let mut after_end: Vec<Vec<usize>> = vec![Vec::new(); n];
            let mut ready: BinaryHeap<Reverse<(Instant, usize)>> = BinaryHeap::new();
            let mut remaining = 0usize;
            for (i, r) in records.iter().enumerate() {
                if !mine(i) {
                    continue;
                }
                remaining += 1;
                for &d in r.deps.iter().filter(|&&d| mine(d)) {
                    waiting_for[i] += 1;
                    match r.timing {
                        Timing::PriorStart => after_start[d].push(i),
                        Timing::PriorEnd => after_end[d].push(i),
                        // Refused when compiled.
                        Timing::TraceStart | Timing::TrafficStart => {}
                    }
                }
                if waiting_for[i] == 0 {
                    let base = match r.timing {
                        Timing::TraceStart => trace_start,
                        _ => traffic_start,
                    };
                    ready.push(Reverse((offset(base, r.timing_ns), i)));
                }
            }

            let mut inflight: FuturesUnordered<BoxFuture<'static, (usize, Sent)>> =
                FuturesUnordered::new();
            let mut samples: BTreeMap<i32, (RpcSample, Option<String>)> = BTreeMap::new();
            let cancelled = self.cancelled_to(STOPPING);
            tokio::pin!(cancelled);
            let mut stopping = false;
            while remaining > 0 {
                if stopping && inflight.is_empty() {
                    break;
                }
                let next = ready.peek().map(|Reverse((at, _))| *at);
                if next.is_none() && inflight.is_empty() {
                    // Nothing can become ready (compiling refuses this).
                    break;
                }
                let at = next.unwrap_or_else(Instant::now);
                tokio::select! {
                    Some((i, sent)) = inflight.next(), if !inflight.is_empty() => {
                        remaining -= 1;
                        let end = sent.started + sent.latency;
                        for &d in &after_end[i] {
                            waiting_for[d] -= 1;
                            if waiting_for[d] == 0 {
                                ready.push(Reverse((offset(end, records[d].timing_ns), d)));
                            }
                        }
                        let (ok, error, _) = self.outcome(&sent.result);
                        let index = i32::try_from(i).unwrap_or(i32::MAX);
                        samples.insert(index, (sample_of(&sent, trace_start), error.filter(|_| !ok)));
                    }
                    () = tokio::time::sleep_until(at.into()), if next.is_some() && !stopping => {
                        let Some(Reverse((_, i))) = ready.pop() else {
                            continue;
                        };
                        let r = &records[i];
                        let target = match r.target {
                            ReplayTarget::Instance(s) => Some(s),
                            ReplayTarget::Channel(c) => {
                                self.channel(trace.server, c).map(|ch| ch.pick())
                            }
                        };
                        let peer = target.and_then(|s| self.peer(trace.server, s));
                        let mut req = GenericRequestResponse {
                            response_payload_size: Some(r.response_size),
                            ..Default::default()
                        };
                        req.payload = driver::padding_for(req.encoded_len(), r.request_size)
                            .map(|n| driver::payload(n as i64));
                        let started = Instant::now();
                        let sent = self.clone().send(peer, req, SystemTime::now(), started);
                        inflight.push(Box::pin(async move { (i, sent.await) }));
                        for &d in &after_start[i] {
                            waiting_for[d] -= 1;
                            if waiting_for[d] == 0 {
                                ready.push(Reverse((offset(started, records[d].timing_ns), d)));
                            }
                        }
                    }
                    () = &mut cancelled, if !stopping => {
                        stopping = true;
                    }
                }
            }
            if samples.is_empty() {
                return;
            }

            self.log_replay(
                &run,
                action,
                iteration,
                warmup,
                &trace.name,
                trace_start_wall,
                samples,
            );
        })
    }

    /// Logs one replay of a trace (named `trace_name`, started at
    /// `trace_start_wall`) by iteration `iteration` of action `action` of
    /// `run`: its samples, by record index, and their errors.
    #[allow(clippy::too_many_arguments)]
    fn log_replay(
        &self,
        run: &ListRun,
        action: usize,
        iteration: i64,
        warmup: bool,
        trace_name: &str,
        trace_start_wall: SystemTime,
        samples: BTreeMap<i32, (RpcSample, Option<String>)>,
    ) {
        let mut context = run
            .incoming
            .as_ref()
            .and_then(|inc| inc.trace.clone())
            .unwrap_or_default();
        context.engine_ids.push(self.engine_id);
        context.actionlist_invocations.push(run.invocation);
        context.actionlist_indices.push(run.list as i64);
        context.action_indices.push(action as i64);
        context.action_iterations.push(iteration);
        let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        let rpc_samples = samples
            .into_iter()
            .map(|(i, (mut sample, error))| {
                if let Some(e) = error {
                    sample.error_index = Some(log.error_index(&e));
                }
                (i, sample)
            })
            .collect();
        log.replays.push(RpcReplayTraceLog {
            rpc_replay_trace_name: Some(trace_name.to_string()),
            trace_context: Some(context),
            warmup: warmup.then_some(true),
            timestamp_offset_ns: Some(unix_ns(trace_start_wall)),
            rpc_samples,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_go_both_ways() {
        let base = Instant::now() + Duration::from_secs(10);
        assert_eq!(offset(base, 5), base + Duration::from_nanos(5));
        assert_eq!(offset(base, -5), base - Duration::from_nanos(5));
        assert_eq!(offset(base, 0), base);
    }
}
