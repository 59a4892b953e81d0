//! The traffic engine: what one service instance does during a test.
//!
//! An [`Engine`] is one instance (`svc/i`) of one service. When traffic
//! starts it runs the action list named after its service; every RPC it
//! serves runs the action list named after the RPC (its handler), and the
//! response goes back when that list is done, or earlier when an action
//! marked `send_response_when_done` (or the list's only action) finishes.
//!
//! Within a list, an action starts once all its dependencies finished; a
//! dependency that was skipped (its predicates did not hold) skips its
//! dependants. Predicates are drawn once per list run from
//! `predicate_probabilities` (a drawn-false predicate `p` makes `!p` hold).
//! Iterations run closed loop (`max_parallel_iterations` in flight) or open
//! loop (`open_loop_interval_ns` with `constant`, `exponential`,
//! `sync_burst` aligned to multiples of the period in Unix time so every
//! instance fires together, or `sync_burst_spread`), up to
//! `max_iteration_count` and `max_duration_us` from the action's start.
//! The first `warmup_iterations` iterations are warm-up, and so is every RPC
//! sent while serving a warm-up RPC. RPC samples of one list run go to a
//! reservoir of `max_rpc_samples` (all of them when 0) and then to the
//! engine's log, keyed by server instance and RPC index as upstream's
//! `ServicePerformanceLog`.
//!
//! An RPC with a `multi_server_channel_name` sends one request per
//! iteration through that channel of its server ([`Channel`]: its members
//! are resolved when the peers are introduced), and its sample goes under
//! the instance that answered. An action with an `rpc_replay_trace_name`
//! replays the trace each iteration ([`replay`]).

use crate::Error;
pub mod dist;
pub mod driver;
pub mod fanout;
pub mod replay;
pub mod tables;

use crate::proto::{
    ActivityLog, ActivityMetric, ErrorDictionary, GenericRequestResponse, PeerPerformanceLog,
    RpcPerformanceLog, RpcReplayTraceLog, RpcSample, ServiceEndpointMap, ServicePerformanceLog,
    TraceContext,
};
use driver::Peer;
use fanout::{FanoutState, Grid};
use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use prost::Message;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tables::{ActionInfo, Activity, IterSpec, Kind, OpenLoop, Policy, Size, Tables};
use tokio::sync::{oneshot, watch};

/// How long a server still runs its handlers after its traffic is
/// cancelled by `cancel_traffic_when_done` (upstream's grace period), and
/// how long in-flight RPCs get before a hard stop (the test deadline, the
/// sequencer's CancelTraffic, Ctrl-C) abandons them.
pub const CANCEL_GRACE: Duration = Duration::from_secs(1);

/// Cancel reasons, as upstream's status strings: they become the
/// instance's `engine_error_message`.
const OVERLOAD_PENDING: &str = "RESOURCE_EXHAUSTED: Too many RPCs pending";
const OVERLOAD_THREADS: &str = "RESOURCE_EXHAUSTED: Too many threads running";
pub(crate) const CANCELLED_WHEN_DONE: &str = "CANCELLED: cancel_traffic_when_done";
pub(crate) const CANCELLED_BY_SEQUENCER: &str = "CANCELLED: cancelled by test_sequencer";
/// rackbench's own: the test's `test_timeout` attribute ran out.
const CANCELLED_AT_DEADLINE: &str = "DEADLINE_EXCEEDED: test_timeout reached";
/// What a server answers once its traffic is cancelled (after the grace),
/// followed by the reason; a client that reads it with an overload reason
/// cancels its own traffic too, as upstream's engines do.
const TRAFFIC_CANCELLED: &str = "Traffic cancelled: ";

/// Cancellation levels of an engine.
const RUNNING: u8 = 0;
/// No new iterations or actions start; RPCs already sent are waited for
/// (upstream's CancelActivities and WaitForAllPendingActions).
pub(crate) const STOPPING: u8 = 1;
/// Past the grace period: the server answers `Traffic cancelled: REASON`
/// without running a handler (upstream's RpcHandler after
/// cancelation_time_).
const REFUSING: u8 = 2;
/// A hard stop (the test deadline, the sequencer's CancelTraffic, Ctrl-C,
/// services cleared): in-flight RPCs, sleeps and delays are abandoned, and
/// a handler cut short answers with an error, never success.
const ABORTED: u8 = 3;

/// Connections to the instances of each service, `[service][instance]`.
type PeerTable = Vec<Vec<Option<Arc<dyn Peer>>>>;

/// A multi-server channel of a server service, as set up when the peers
/// are introduced: its members (instance indices, sorted) and the cursor of
/// its policy.
struct Channel {
    members: Vec<usize>,
    policy: Policy,
    next: AtomicUsize,
}

impl Channel {
    /// The instance the next RPC goes to.
    fn pick(&self) -> usize {
        let i = match self.policy {
            Policy::PickFirst => 0,
            Policy::RoundRobin => self.next.fetch_add(1, Ordering::Relaxed) % self.members.len(),
        };
        self.members[i]
    }
}

/// One of a closed loop's `max_parallel_iterations` slots, whose state
/// the iterations that follow each other in it reuse, as upstream reuses
/// an iteration's RPC states: the start of the slot's last RPC per fanout
/// index, from which an RPC's `latency_weight` is the time since.
#[derive(Default)]
struct Slot {
    starts: Mutex<Vec<Option<Instant>>>,
}

/// One request sent to a peer.
struct Sent {
    /// Wall-clock and monotonic start.
    start: SystemTime,
    started: Instant,
    latency: Duration,
    result: Result<GenericRequestResponse, String>,
}

/// The node managers of one process (a `node_manager`, or the sequencer
/// with its `--local_nodes`, `start_localhost`, `test_preview`). Upstream
/// counts every thread of its process against
/// `overload_limits.max_threads`, and past it its abort callback cancels
/// the traffic of every node manager of the process with
/// `RESOURCE_EXHAUSTED: Too many threads running`. rackbench's handlers
/// are futures, not threads: what it counts is the handler action lists
/// running at once in the process; past the limit the handler that
/// exceeded it is refused and every instance of the process is cancelled,
/// as upstream's callback does. Counted are the handlers a server hands to
/// its thread pool (`server_type` `handoff` or `polling`, upstream's
/// registered pool threads); inline handlers run on the RPC stack's own
/// threads, which upstream does not count.
#[derive(Default)]
pub struct Process {
    handlers: AtomicI64,
    engines: Mutex<Vec<std::sync::Weak<Engine>>>,
}

impl Process {
    pub fn new() -> Arc<Process> {
        Arc::default()
    }

    /// Counts `engine` among the process's instances.
    pub fn register(&self, engine: &Arc<Engine>) {
        let mut v = self.engines.lock().unwrap_or_else(|e| e.into_inner());
        v.retain(|w| w.strong_count() > 0);
        v.push(Arc::downgrade(engine));
    }

    /// Cancels the traffic of every instance of the process.
    fn cancel_all(&self, reason: &str) {
        let engines: Vec<Arc<Engine>> = self
            .engines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter_map(std::sync::Weak::upgrade)
            .collect();
        for e in engines {
            e.cancel_traffic(reason, Duration::ZERO);
        }
    }
}

/// Gives a handler slot back when the handler ends (or is dropped).
struct HandlerSlot<'a>(&'a AtomicI64);

impl Drop for HandlerSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One service instance.
pub struct Engine {
    tables: Arc<Tables>,
    /// Index of the service in the test.
    pub service: usize,
    /// Index of the instance in its service.
    pub instance: usize,
    /// `svc/i`.
    pub name: String,
    /// The instance's index among all instances of the test (services in
    /// order), upstream's trace id: what trace contexts carry.
    engine_id: i64,
    /// The process's node managers (max_threads).
    process: Arc<Process>,
    grid: Grid,
    coords: (usize, usize, usize),
    /// Connections to server instances, `[service][instance]`.
    peers: RwLock<PeerTable>,
    /// Multi-server channels of the server services, `[service][channel]`
    /// (as [`tables::ServiceInfo::channels`]).
    channels: RwLock<Vec<Vec<Arc<Channel>>>>,
    /// The start time `run_traffic` was given.
    traffic_start: Mutex<Option<SystemTime>>,
    log: Mutex<EngineLog>,
    cancel: watch::Sender<u8>,
    cancel_reason: Mutex<Option<String>>,
    pending_rpcs: AtomicI64,
    /// Handler lists still running, including those past their response.
    lists_in_flight: AtomicI64,
    invocations: Vec<AtomicI64>,
    fanout_state: Vec<Mutex<FanoutState>>,
    trace_counters: Vec<AtomicI64>,
    traffic_started: AtomicBool,
    /// Activity iterations, by activity config name.
    activity_counts: Mutex<BTreeMap<String, i64>>,
}

#[derive(Default)]
struct EngineLog {
    peers: BTreeMap<String, PeerPerformanceLog>,
    errors: Vec<String>,
    replays: Vec<RpcReplayTraceLog>,
}

impl EngineLog {
    fn error_index(&mut self, message: &str) -> i32 {
        if self.errors.is_empty() {
            // Index 0 means "no error".
            self.errors.push(String::new());
        }
        match self.errors.iter().position(|e| e == message) {
            Some(i) => i as i32,
            None => {
                self.errors.push(message.to_string());
                (self.errors.len() - 1) as i32
            }
        }
    }
}

/// The RPC being served by a list run, if any.
struct Incoming {
    trace: Option<TraceContext>,
    /// Sends the response size to the waiting RPC handler (once); `None`
    /// when the handler was cut short by a hard stop.
    respond: Mutex<Option<oneshot::Sender<Option<i64>>>>,
    default_response_size: i64,
    /// The client drew the response size (a joint distribution): no
    /// response override changes it (upstream's ComputeResponseSize).
    size_asked: bool,
}

/// One run of an action list.
struct ListRun {
    list: usize,
    invocation: i64,
    incoming: Option<Arc<Incoming>>,
    warmup: bool,
    samples: Mutex<Reservoir>,
}

/// A sample waiting to be merged into the engine log.
struct Pending {
    server_instance: usize,
    server_service: usize,
    rpc: i32,
    ok: bool,
    error: Option<String>,
    sample: RpcSample,
}

/// Reservoir sampling of RPC samples (Algorithm R); `max == 0` keeps all.
struct Reservoir {
    max: usize,
    seen: u64,
    kept: Vec<(u64, Pending)>,
    rng: SmallRng,
}

impl Reservoir {
    fn new(max: usize) -> Reservoir {
        Reservoir {
            max,
            seen: 0,
            kept: Vec::new(),
            rng: SmallRng::from_os_rng(),
        }
    }

    fn add(&mut self, p: Pending) {
        let n = self.seen;
        self.seen += 1;
        if self.max == 0 || self.kept.len() < self.max {
            self.kept.push((n, p));
        } else {
            let j = self.rng.random_range(0..=n);
            if (j as usize) < self.max {
                self.kept[j as usize] = (n, p);
            }
        }
    }
}

fn unix_ns(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// The `Instant` at which the wall clock reads `t` (now if `t` is past).
fn instant_at(t: SystemTime) -> Instant {
    let now_i = Instant::now();
    match t.duration_since(SystemTime::now()) {
        Ok(d) => now_i + d,
        Err(_) => now_i,
    }
}

impl Engine {
    /// An engine for instance `instance` of service `service` of `tables`,
    /// in the node managers of `process` (register it there).
    pub fn new(
        tables: Arc<Tables>,
        service: usize,
        instance: usize,
        process: Arc<Process>,
    ) -> Engine {
        let info = &tables.services[service];
        let grid = grid_of(&info.spec);
        let n_rpcs = tables.rpcs.len();
        let (cancel, _) = watch::channel(RUNNING);
        Engine {
            name: info.instances[instance].clone(),
            coords: grid.coords(instance),
            grid,
            service,
            instance,
            engine_id: tables.instance_id(service, instance),
            process,
            peers: RwLock::new(tables.services.iter().map(|_| Vec::new()).collect()),
            channels: RwLock::new(tables.services.iter().map(|_| Vec::new()).collect()),
            traffic_start: Mutex::new(None),
            log: Mutex::new(EngineLog::default()),
            cancel,
            cancel_reason: Mutex::new(None),
            pending_rpcs: AtomicI64::new(0),
            lists_in_flight: AtomicI64::new(0),
            invocations: tables.lists.iter().map(|_| AtomicI64::new(0)).collect(),
            fanout_state: (0..n_rpcs)
                .map(|_| Mutex::new(FanoutState::default()))
                .collect(),
            trace_counters: (0..n_rpcs).map(|_| AtomicI64::new(0)).collect(),
            traffic_started: AtomicBool::new(false),
            activity_counts: Mutex::new(BTreeMap::new()),
            tables,
        }
    }

    /// The services this instance sends RPCs to (or replays traces to).
    pub fn server_services(&self) -> Vec<usize> {
        let mut out: Vec<usize> = self
            .tables
            .rpcs
            .iter()
            .filter(|r| r.clients.contains(&self.service))
            .map(|r| r.server)
            .chain(
                self.tables
                    .traces
                    .iter()
                    .filter(|t| t.client == self.service)
                    .map(|t| t.server),
            )
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Connects to every instance of every service this one sends RPCs to,
    /// and sets up their multi-server channels. `endpoints` is the test's
    /// placement (instance name -> address and attributes).
    pub async fn connect_peers(&self, endpoints: &ServiceEndpointMap) -> Result<(), Error> {
        let mut table: PeerTable = self.tables.services.iter().map(|_| Vec::new()).collect();
        let mut channels: Vec<Vec<Arc<Channel>>> =
            self.tables.services.iter().map(|_| Vec::new()).collect();
        for s in self.server_services() {
            channels[s] = self.channels_of(s, endpoints).map_err(Error::Host)?;
            let info = &self.tables.services[s];
            let mut conns = FuturesUnordered::new();
            for (i, name) in info.instances.iter().enumerate() {
                let ep = endpoints.service_endpoints.get(name).ok_or_else(|| {
                    Error::Host(format!(
                        "{}: no endpoint for peer '{name}' in the placement",
                        self.name
                    ))
                })?;
                let addr: SocketAddr = ep.endpoint_address().parse().map_err(|_| {
                    Error::Host(format!(
                        "{}: peer '{name}' has an endpoint address that is not ip:port: '{}'",
                        self.name,
                        ep.endpoint_address()
                    ))
                })?;
                let name = name.clone();
                let protocol = info.protocol;
                conns.push(async move { (i, name, driver::connect(protocol, addr).await) });
            }
            let mut peers: Vec<Option<Arc<dyn Peer>>> = vec![None; info.instances.len()];
            while let Some((i, name, r)) = conns.next().await {
                let peer = r.map_err(|e| Error::Host(format!("{} -> {name}: {e}", self.name)))?;
                peers[i] = Some(peer);
            }
            table[s] = peers;
        }
        *self.peers.write().unwrap_or_else(|e| e.into_inner()) = table;
        *self.channels.write().unwrap_or_else(|e| e.into_inner()) = channels;
        Ok(())
    }

    /// The multi-server channels of service `s`: each channel's
    /// `selected_instances` and the instances whose endpoint attributes
    /// satisfy its constraints.
    fn channels_of(
        &self,
        s: usize,
        endpoints: &ServiceEndpointMap,
    ) -> Result<Vec<Arc<Channel>>, String> {
        let info = &self.tables.services[s];
        let mut out = Vec::new();
        for ch in &info.channels {
            let mut members = ch.selected.clone();
            if let Some(constraints) = &ch.constraints {
                for (i, name) in info.instances.iter().enumerate() {
                    let attributes: BTreeMap<String, String> = endpoints
                        .service_endpoints
                        .get(name)
                        .map(|ep| {
                            ep.attributes
                                .iter()
                                .map(|a| (a.name().to_string(), a.value().to_string()))
                                .collect()
                        })
                        .unwrap_or_default();
                    if crate::placement::satisfies(constraints, &attributes) {
                        members.push(i);
                    }
                }
            }
            members.sort_unstable();
            members.dedup();
            if members.is_empty() {
                return Err(format!(
                    "{}: multi_server_channels '{}' of service '{}': no instance satisfies its \
                     constraints and it has no selected_instances (upstream: No matching \
                     constraints, and no selected_instances field)",
                    self.name, ch.name, info.name
                ));
            }
            // gRPC's round_robin starts at a random member.
            let start = rand::rng().random_range(0..members.len());
            out.push(Arc::new(Channel {
                members,
                policy: ch.policy,
                next: AtomicUsize::new(start),
            }));
        }
        Ok(out)
    }

    /// Channel `c` of server service `s`, once set up.
    fn channel(&self, s: usize, c: usize) -> Option<Arc<Channel>> {
        self.channels
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(s)
            .and_then(|chs| chs.get(c))
            .cloned()
    }

    /// The connection to instance `i` of service `s`, if any.
    fn peer(&self, s: usize, i: usize) -> Option<Arc<dyn Peer>> {
        self.peers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(s)
            .and_then(|p| p.get(i))
            .cloned()
            .flatten()
    }

    /// Sends `req` to `peer`, counted as pending (past the test's limit the
    /// traffic is cancelled as overloaded). The answer is waited for, as
    /// upstream's engines wait for every RPC they sent; only a hard stop
    /// abandons it. Its latency counts from `started` (monotonic; `start`
    /// is the same moment on the wall clock).
    async fn send(
        self: Arc<Self>,
        peer: Option<Arc<dyn Peer>>,
        req: GenericRequestResponse,
        start: SystemTime,
        started: Instant,
    ) -> Sent {
        let result = match peer {
            None => Err("no connection to this peer".to_string()),
            Some(peer) => {
                let pending = self.pending_rpcs.fetch_add(1, Ordering::Relaxed) + 1;
                let r = if self.cancel_level() >= ABORTED {
                    Err(format!("{TRAFFIC_CANCELLED}{}", self.reason()))
                } else {
                    let call = peer.call(req);
                    if pending > self.tables.max_pending_rpcs {
                        self.cancel_traffic(OVERLOAD_PENDING, Duration::ZERO);
                    }
                    tokio::select! {
                        r = call => r.map_err(String::from),
                        () = self.cancelled_to(ABORTED) => {
                            Err(format!("{TRAFFIC_CANCELLED}{}", self.reason()))
                        }
                    }
                };
                self.pending_rpcs.fetch_sub(1, Ordering::Relaxed);
                r
            }
        };
        Sent {
            start,
            started,
            latency: started.elapsed(),
            result,
        }
    }

    /// What an answer means for its sample: success, the error, the
    /// response's size. A server that cancelled its traffic as overloaded
    /// makes this instance cancel its own, as upstream's engines do.
    fn outcome(
        self: &Arc<Self>,
        result: &Result<GenericRequestResponse, String>,
    ) -> (bool, Option<String>, usize) {
        match result {
            Ok(resp) => match resp.error_message.as_deref() {
                Some(e) if !e.is_empty() => {
                    if e.starts_with(&format!("{TRAFFIC_CANCELLED}RESOURCE_EXHAUSTED:")) {
                        self.cancel_traffic(&format!("UNKNOWN: Peer reported {e}"), Duration::ZERO);
                    }
                    (false, Some(e.to_string()), resp.encoded_len())
                }
                _ => (true, None, resp.encoded_len()),
            },
            Err(e) => (false, Some(e.clone()), 0),
        }
    }

    fn cancel_level(&self) -> u8 {
        *self.cancel.borrow()
    }

    fn stopping(&self) -> bool {
        self.cancel_level() >= STOPPING
    }

    /// Waits until the engine is cancelled to at least `level`.
    async fn cancelled_to(&self, level: u8) {
        let mut rx = self.cancel.subscribe();
        let _ = rx.wait_for(|l| *l >= level).await;
    }

    /// Cancels the traffic as upstream's `CancelTraffic(status, grace)`:
    /// no new iteration or action starts, RPCs already sent are waited
    /// for, and after `grace` the server answers `Traffic cancelled:
    /// REASON` instead of running handlers. The first reason stays.
    pub fn cancel_traffic(self: &Arc<Self>, reason: &str, grace: Duration) {
        self.stop(reason, grace, None);
    }

    /// A hard stop: [`Engine::cancel_traffic`] with `grace`, and after
    /// `abort_after` in-flight RPCs, sleeps and delays are abandoned (a
    /// handler cut short answers with an error).
    pub fn abort_traffic(self: &Arc<Self>, reason: &str, grace: Duration, abort_after: Duration) {
        self.stop(reason, grace, Some(abort_after));
    }

    fn stop(self: &Arc<Self>, reason: &str, grace: Duration, abort_after: Option<Duration>) {
        {
            let mut r = self.cancel_reason.lock().unwrap_or_else(|e| e.into_inner());
            if r.is_none() {
                *r = Some(reason.to_string());
            }
        }
        self.raise(STOPPING);
        // With no grace the server refuses at once: no request may slip in
        // between (one that did would be answered without its handler).
        self.raise_after(REFUSING, grace);
        if let Some(after) = abort_after {
            self.raise_after(ABORTED, after);
        }
    }

    fn raise(&self, level: u8) {
        self.cancel.send_if_modified(|l| {
            if *l < level {
                *l = level;
                true
            } else {
                false
            }
        });
    }

    fn raise_after(self: &Arc<Self>, level: u8, after: Duration) {
        if after.is_zero() {
            self.raise(level);
            return;
        }
        let me = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            me.raise(level);
        });
    }

    fn reason(&self) -> String {
        self.cancel_reason().unwrap_or_default()
    }

    /// Why traffic was cancelled, if it was.
    pub fn cancel_reason(&self) -> Option<String> {
        self.cancel_reason
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Runs this instance's traffic: from `start` on, the action list named
    /// after the service, if there is one. Past `deadline` the traffic is
    /// cancelled and the error says so.
    pub async fn run_traffic(
        self: Arc<Self>,
        start: SystemTime,
        deadline: Option<SystemTime>,
    ) -> Result<(), Error> {
        *self.traffic_start.lock().unwrap_or_else(|e| e.into_inner()) = Some(start);
        tokio::time::sleep_until(instant_at(start).into()).await;
        self.traffic_started.store(true, Ordering::Relaxed);
        let service_name = &self.tables.services[self.service].name;
        let Some(&list) = self.tables.list_index.get(service_name) else {
            return Ok(());
        };
        let run = self.clone().run_list(list, None, false);
        match deadline {
            None => run.await,
            Some(d) => {
                tokio::pin!(run);
                tokio::select! {
                    () = &mut run => {}
                    () = tokio::time::sleep_until(instant_at(d).into()) => {
                        self.abort_traffic(CANCELLED_AT_DEADLINE, Duration::ZERO, CANCEL_GRACE);
                        run.await;
                        return Err(Error::Host(format!(
                            "{}: traffic still running at the test deadline (test_timeout); cancelled",
                            self.name
                        )));
                    }
                }
            }
        }
        // An overload ends the traffic early but is not a failure: the
        // results so far are kept, with the reason in the log's
        // engine_error_message (as upstream).
        Ok(())
    }

    /// Serves one RPC: runs its handler list and answers with the response
    /// size it settles on.
    pub async fn handle(self: Arc<Self>, req: GenericRequestResponse) -> GenericRequestResponse {
        let error = |msg: String| GenericRequestResponse {
            error_message: Some(msg),
            server_instance: Some(self.instance as i32),
            ..Default::default()
        };
        // Past the grace period of a cancel, a request is refused without
        // running its handler (upstream's RpcHandler); within it the
        // handler runs as usual, so an answer is never a success for work
        // that was not done.
        let refused = |me: &Engine| error(format!("{TRAFFIC_CANCELLED}{}", me.reason()));
        if self.cancel_level() >= REFUSING {
            return refused(&self);
        }
        if req.rpc_index.is_none() {
            // A replayed RPC (upstream's handler path for a request without
            // an index): no handler list, the response size it asks for.
            let Some(size) = req.response_payload_size else {
                return error("rpc has no index, and no response size: ".to_string());
            };
            if let Some(ns) = req.server_processing_time_ns.filter(|&ns| ns > 0) {
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_nanos(ns as u64)) => {}
                    () = self.cancelled_to(ABORTED) => return refused(&self),
                }
            }
            let mut resp = GenericRequestResponse {
                server_instance: Some(self.instance as i32),
                ..Default::default()
            };
            resp.payload =
                driver::padding_for(resp.encoded_len(), size).map(|n| driver::payload(n as i64));
            return resp;
        }
        let Some(rpc) = usize::try_from(req.rpc_index())
            .ok()
            .and_then(|i| self.tables.rpcs.get(i))
        else {
            return error(format!(
                "{}: unknown rpc_index {}",
                self.name,
                req.rpc_index()
            ));
        };
        if rpc.server != self.service {
            return error(format!(
                "{}: rpc '{}' is served by service '{}', not by this instance",
                self.name, rpc.name, self.tables.services[rpc.server].name
            ));
        }
        let default_response_size = match req.response_payload_size {
            Some(n) => n,
            None => self.size(rpc.response, &mut rand::rng()),
        };
        let list = rpc.handler;
        let size = if self.tables.lists[list].actions.is_empty() {
            default_response_size
        } else {
            // A handler handed to a thread pool (server_type handoff or
            // polling) takes one of upstream's counted threads; an inline
            // one runs on the RPC stack's own threads, which upstream does
            // not count.
            let pooled = self.tables.services[self.service]
                .grpc
                .as_ref()
                .is_some_and(|g| g.server_type != crate::check::protocol::ServerType::Inline);
            let _done = if pooled {
                let active = self.process.handlers.fetch_add(1, Ordering::Relaxed) + 1;
                let slot = HandlerSlot(&self.process.handlers);
                if active > self.tables.max_threads {
                    self.process.cancel_all(OVERLOAD_THREADS);
                    // The first reason stays: the refusal names this engine's.
                    return refused(&self);
                }
                Some(slot)
            } else {
                None
            };
            let (tx, rx) = oneshot::channel();
            let incoming = Arc::new(Incoming {
                trace: req.trace_context.clone(),
                respond: Mutex::new(Some(tx)),
                default_response_size,
                size_asked: req.response_payload_size.is_some(),
            });
            // The list may go on after the response (send_response_when_done):
            // count it until it ends, so results wait for its samples.
            self.lists_in_flight.fetch_add(1, Ordering::AcqRel);
            let me = self.clone();
            tokio::spawn(async move {
                me.clone()
                    .run_list(list, Some(incoming), req.warmup())
                    .await;
                me.lists_in_flight.fetch_sub(1, Ordering::AcqRel);
            });
            match rx.await {
                Ok(Some(n)) => n,
                Ok(None) => return refused(&self),
                Err(_) => return error(format!("{}: handler ended without a response", self.name)),
            }
        };
        let mut resp = GenericRequestResponse {
            server_instance: Some(self.instance as i32),
            ..Default::default()
        };
        resp.payload =
            driver::padding_for(resp.encoded_len(), size).map(|n| driver::payload(n as i64));
        resp
    }

    fn size(&self, s: Size, rng: &mut impl Rng) -> i64 {
        match s {
            Size::Fixed(n) => n,
            Size::Dist(d) => self.tables.size_dists[d].sample_scalar(rng),
        }
    }

    /// Runs one invocation of action list `list`.
    fn run_list(
        self: Arc<Self>,
        list: usize,
        incoming: Option<Arc<Incoming>>,
        warmup: bool,
    ) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let tables = self.tables.clone();
            let info = &tables.lists[list];
            let run = Arc::new(ListRun {
                list,
                invocation: self.invocations[list].fetch_add(1, Ordering::Relaxed),
                incoming,
                warmup,
                samples: Mutex::new(Reservoir::new(info.max_rpc_samples)),
            });
            let mut predicates = HashSet::new();
            if !info.predicate_probabilities.is_empty() {
                let mut rng = rand::rng();
                for (name, p) in &info.predicate_probabilities {
                    if rng.random::<f64>() <= f64::from(*p) {
                        predicates.insert(name.clone());
                    } else {
                        predicates.insert(format!("!{name}"));
                    }
                }
            }
            let n = info.actions.len();
            // None: not started; Some(None): running; Some(Some(skipped)): done.
            let mut state: Vec<Option<Option<bool>>> = vec![None; n];
            let mut responder: Option<usize> = None;
            let mut response_override: Option<usize> = None;
            let mut responded = false;
            let mut running = FuturesUnordered::new();
            // The actions ready at the start run even when the traffic is
            // already cancelled (a handler let in during the grace period
            // does its work, as upstream's first pass starts them); once
            // cancelled, no further action starts.
            let mut first = true;
            loop {
                if first || !self.stopping() {
                    first = false;
                    for i in 0..n {
                        if state[i].is_some() {
                            continue;
                        }
                        let a = &info.actions[i];
                        let mut ready = true;
                        let mut skip = false;
                        for &d in &a.deps {
                            match state[d] {
                                Some(Some(skipped)) => skip |= skipped,
                                _ => ready = false,
                            }
                        }
                        if !ready {
                            continue;
                        }
                        skip |= !a.predicates.iter().all(|p| predicates.contains(p));
                        if run.incoming.is_some()
                            && responder.is_none()
                            && (n == 1 || a.send_response_when_done)
                        {
                            responder = Some(i);
                        }
                        state[i] = Some(None);
                        let fut = self.clone().run_action(run.clone(), i, skip);
                        running.push(async move {
                            fut.await;
                            (i, skip)
                        });
                    }
                }
                let Some((i, skipped)) = running.next().await else {
                    break;
                };
                state[i] = Some(Some(skipped));
                let a = &info.actions[i];
                if !skipped && a.response_override.is_some() {
                    response_override = a.response_override;
                }
                if responder == Some(i) {
                    self.respond(&run, response_override);
                    responded = true;
                }
                if a.cancel_traffic_when_done {
                    self.cancel_traffic(CANCELLED_WHEN_DONE, CANCEL_GRACE);
                }
            }
            if !responded {
                self.respond(&run, response_override);
            }
            self.merge(&run);
        })
    }

    fn respond(&self, run: &ListRun, response_override: Option<usize>) {
        let Some(incoming) = &run.incoming else {
            return;
        };
        let Some(tx) = incoming
            .respond
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        else {
            return;
        };
        if self.cancel_level() >= ABORTED {
            // Cut short by a hard stop: not a success.
            let _ = tx.send(None);
            return;
        }
        let size = match response_override {
            Some(d) if !incoming.size_asked => {
                self.tables.size_dists[d].sample_scalar(&mut rand::rng())
            }
            _ => incoming.default_response_size,
        };
        let _ = tx.send(Some(size));
    }

    /// Moves a list run's samples into the engine log.
    fn merge(&self, run: &ListRun) {
        let mut reservoir = run.samples.lock().unwrap_or_else(|e| e.into_inner());
        if reservoir.kept.is_empty() {
            return;
        }
        let mut kept = std::mem::take(&mut reservoir.kept);
        drop(reservoir);
        kept.sort_by_key(|(n, _)| *n);
        let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        for (_, mut p) in kept {
            if let Some(e) = &p.error {
                p.sample.error_index = Some(log.error_index(e));
            }
            let name = &self.tables.services[p.server_service].instances[p.server_instance];
            let peer = log.peers.entry(name.clone()).or_default();
            let rpc_log: &mut RpcPerformanceLog = peer.rpc_logs.entry(p.rpc).or_default();
            if p.ok {
                rpc_log.successful_rpc_samples.push(p.sample);
            } else {
                rpc_log.failed_rpc_samples.push(p.sample);
            }
        }
    }

    /// Runs action `i` of a list run with its iterations.
    fn run_action(
        self: Arc<Self>,
        run: Arc<ListRun>,
        i: usize,
        skip: bool,
    ) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            if skip {
                return;
            }
            let tables = self.tables.clone();
            let a: &ActionInfo = &tables.lists[run.list].actions[i];
            if let Some(d) = a.delay {
                let ns = tables.delay_dists[d].sample_scalar(&mut rand::rng()).max(0);
                let spin = tables.lists[run.list].delay_by_spinning;
                self.delay(Duration::from_nanos(ns as u64), spin).await;
                // An action still waiting for its delay when the traffic is
                // cancelled never starts (upstream's).
                if self.stopping() {
                    return;
                }
            }
            let spread = match a.kind {
                Kind::Rpc(r) => {
                    let n = tables.services[tables.rpcs[r].server]
                        .instances
                        .len()
                        .max(1);
                    self.instance as f64 / n as f64
                }
                _ => 0.0,
            };
            match a.kind {
                Kind::Nothing => {}
                Kind::Rpc(r) => {
                    let me = self.clone();
                    let run2 = run.clone();
                    self.iterate(a.iterations, run.warmup, spread, move |it, warm, slot| {
                        me.clone().rpc_iteration(run2.clone(), i, r, it, warm, slot)
                    })
                    .await;
                }
                Kind::List(l) => {
                    let me = self.clone();
                    let trace = run.incoming.as_ref().and_then(|inc| inc.trace.clone());
                    self.iterate(a.iterations, run.warmup, spread, move |_, warm, _| {
                        let nested = Arc::new(Incoming {
                            trace: trace.clone(),
                            respond: Mutex::new(None),
                            default_response_size: 0,
                            size_asked: false,
                        });
                        me.clone().run_list(l, Some(nested), warm)
                    })
                    .await;
                }
                Kind::Replay(t) => {
                    let me = self.clone();
                    let run2 = run.clone();
                    self.iterate(a.iterations, run.warmup, spread, move |it, warm, _| {
                        me.clone().replay_iteration(run2.clone(), i, t, it, warm)
                    })
                    .await;
                }
                Kind::Activity(act) => {
                    let me = self.clone();
                    // What the activity works on (ConsumeCpu's and
                    // PolluteDataCache's arrays, 8 MiB by default) is made
                    // once per action run and reused by its iterations, as
                    // upstream's; parallel iterations each take their own.
                    let states: Arc<Mutex<Vec<tables::ActivityState>>> = Arc::default();
                    self.iterate(a.iterations, run.warmup, spread, move |_, _, _| {
                        let me = me.clone();
                        let states = states.clone();
                        Box::pin(async move {
                            let (name, activity) = me.tables.activities[act].clone();
                            // SleepFor and SpinFor keep no log (upstream's
                            // return an empty one), so an instance that only
                            // sleeps has no activity log.
                            let logged = !matches!(
                                activity,
                                Activity::SleepFor { .. } | Activity::SpinFor { .. }
                            );
                            match activity {
                                Activity::SleepFor { duration } => {
                                    // Not cut short by a cancel (upstream
                                    // sleeps it out), only by a hard stop.
                                    tokio::select! {
                                        () = tokio::time::sleep(duration) => {}
                                        () = me.cancelled_to(ABORTED) => {}
                                    }
                                }
                                other => {
                                    let _ = tokio::task::spawn_blocking(move || {
                                        let taken =
                                            states.lock().unwrap_or_else(|e| e.into_inner()).pop();
                                        let mut state = taken
                                            .unwrap_or_else(|| tables::ActivityState::new(&other));
                                        std::hint::black_box(state.iterate());
                                        states
                                            .lock()
                                            .unwrap_or_else(|e| e.into_inner())
                                            .push(state);
                                    })
                                    .await;
                                }
                            }
                            if logged {
                                *me.activity_counts
                                    .lock()
                                    .unwrap_or_else(|e| e.into_inner())
                                    .entry(name)
                                    .or_default() += 1;
                            }
                        })
                    })
                    .await;
                }
            }
        })
    }

    /// Sleeps (or spins, with the list's `delay_actions_by_spinning`, which
    /// defaults to the test's) for `d`.
    async fn delay(&self, d: Duration, spin: bool) {
        if spin {
            let end = Instant::now() + d;
            while Instant::now() < end {
                std::hint::spin_loop();
                if end.saturating_duration_since(Instant::now()) > Duration::from_millis(1) {
                    tokio::task::yield_now().await;
                }
            }
        } else {
            tokio::select! {
                () = tokio::time::sleep(d) => {}
                () = self.cancelled_to(STOPPING) => {}
            }
        }
    }

    /// Runs the iterations of one action. `f(iteration, warmup, slot)`
    /// runs one; a closed loop's iterations follow each other in the
    /// `max_parallel_iterations` slots, whose state each gets.
    async fn iterate<F>(&self, spec: Option<IterSpec>, list_warmup: bool, spread: f64, mut f: F)
    where
        F: FnMut(i64, bool, Option<Arc<Slot>>) -> BoxFuture<'static, ()>,
    {
        let Some(spec) = spec else {
            f(0, list_warmup, None).await;
            return;
        };
        let limit = spec.max_count.unwrap_or(i64::MAX);
        if limit < 1 {
            return;
        }
        let started = Instant::now();
        let time_limit = spec.max_duration.map(|d| started + d);
        let warm = |n: i64| {
            list_warmup
                || n < spec.warmup_iterations
                || spec.warmup.is_some_and(|w| started.elapsed() < w)
        };
        let Some(open_loop) = spec.open_loop else {
            let mut inflight = FuturesUnordered::new();
            let in_slot = |fut: BoxFuture<'static, ()>, slot: Arc<Slot>| async move {
                fut.await;
                slot
            };
            let mut next = 0i64;
            for _ in 0..spec.parallel.min(limit) {
                let slot = Arc::new(Slot::default());
                inflight.push(in_slot(f(next, warm(next), Some(slot.clone())), slot));
                next += 1;
            }
            while let Some(slot) = inflight.next().await {
                let expired = time_limit.is_some_and(|t| Instant::now() > t);
                if !self.stopping() && next < limit && !expired {
                    inflight.push(in_slot(f(next, warm(next), Some(slot.clone())), slot));
                    next += 1;
                }
            }
            return;
        };
        let mut inflight = FuturesUnordered::new();
        let mut next = 0i64;
        let mut rng = SmallRng::from_os_rng();
        let (mut at, period) = first_open_loop_time(open_loop, spread);
        let exponential = matches!(open_loop, OpenLoop::Exponential(_));
        let cancelled = self.cancelled_to(STOPPING);
        tokio::pin!(cancelled);
        loop {
            if next >= limit || self.stopping() || time_limit.is_some_and(|t| at > t) {
                break;
            }
            tokio::select! {
                () = tokio::time::sleep_until(at.into()) => {
                    inflight.push(f(next, warm(next), None));
                    next += 1;
                    at += if exponential {
                        period.mul_f64(rng.sample::<f64, _>(rand_distr::Exp1))
                    } else {
                        period
                    };
                }
                Some(()) = inflight.next(), if !inflight.is_empty() => {}
                () = &mut cancelled => break,
            }
        }
        while inflight.next().await.is_some() {}
    }

    /// The instances RPC `r` goes to this time (one through its channel,
    /// if it has one: `channel`), and its number among this RPC's sends
    /// (0 when it goes nowhere), which decides whether it is traced.
    fn rpc_targets(&self, r: usize, channel: Option<&Option<Arc<Channel>>>) -> (Vec<usize>, i64) {
        let rpc = &self.tables.rpcs[r];
        let mut st = self.fanout_state[r]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let targets = if let Some(ch) = channel {
            // One RPC through the channel (none set up: it fails).
            vec![ch.as_ref().map_or(0, |ch| ch.pick())]
        } else {
            fanout::targets(
                &rpc.fanout,
                self.instance,
                self.grid,
                grid_of(&self.tables.services[rpc.server].spec),
                rpc.server == self.service,
                &mut st,
                &mut rand::rng(),
            )
        };
        let count = if targets.is_empty() {
            0
        } else {
            self.trace_counters[r].fetch_add(1, Ordering::Relaxed)
        };
        (targets, count)
    }

    /// The trace context of an RPC sent by iteration `iteration` of action
    /// `action` of `run`: the incoming one extended, or a new one every
    /// `tracing_interval`th send (`count`), else none.
    fn rpc_trace(
        &self,
        run: &ListRun,
        action: usize,
        iteration: i64,
        tracing_interval: i32,
        count: i64,
    ) -> Option<TraceContext> {
        let incoming_trace = run.incoming.as_ref().and_then(|i| i.trace.clone());
        let do_trace = incoming_trace.is_some()
            || (tracing_interval > 0 && count % i64::from(tracing_interval) == 0);
        do_trace.then(|| {
            let mut t = incoming_trace.unwrap_or_default();
            t.engine_ids.push(self.engine_id);
            t.actionlist_invocations.push(run.invocation);
            t.actionlist_indices.push(run.list as i64);
            t.action_indices.push(action as i64);
            t.action_iterations.push(iteration);
            t
        })
    }

    /// The request size of RPC `r` sent by action `a`, and the response
    /// size it asks for (from its joint distribution only).
    fn rpc_sizes(&self, r: usize, a: &ActionInfo) -> (i64, Option<i64>) {
        let rpc = &self.tables.rpcs[r];
        let mut rng = rand::rng();
        match &rpc.joint {
            Some(j) => {
                let s = j.sample(&mut rng);
                let req = j
                    .field("request_payload_size")
                    .or_else(|| j.field("payload_size"))
                    .map_or(0, |i| s[i]);
                let resp = j.field("response_payload_size").map_or(req, |i| s[i]);
                (req, Some(resp))
            }
            None => {
                let req = match a.request_override {
                    Some(d) => self.tables.size_dists[d].sample_scalar(&mut rng),
                    None => self.size(rpc.request, &mut rng),
                };
                (req, None)
            }
        }
    }

    /// One iteration of an RPC action: picks the targets and sends to all.
    /// The targets (round-robin, random) and whether to trace are picked
    /// when the iteration is started, so they follow the iteration order.
    fn rpc_iteration(
        self: Arc<Self>,
        run: Arc<ListRun>,
        action: usize,
        r: usize,
        iteration: i64,
        warmup: bool,
        slot: Option<Arc<Slot>>,
    ) -> BoxFuture<'static, ()> {
        let tables = self.tables.clone();
        let rpc = &tables.rpcs[r];
        let channel = rpc.channel.map(|c| self.channel(rpc.server, c));
        let (targets, count) = self.rpc_targets(r, channel.as_ref());
        Box::pin(async move {
            let tables = self.tables.clone();
            let rpc = &tables.rpcs[r];
            let server = &tables.services[rpc.server];
            if targets.is_empty() {
                return;
            }
            let trace = self.rpc_trace(&run, action, iteration, rpc.tracing_interval, count);
            let a = &tables.lists[run.list].actions[action];
            let (request_size, response_size) = self.rpc_sizes(r, a);
            let peers: Vec<Option<Arc<dyn Peer>>> = match &channel {
                Some(None) => vec![None],
                _ => targets.iter().map(|&t| self.peer(rpc.server, t)).collect(),
            };
            let mut sends = FuturesUnordered::new();
            // The slot's lock is held while the requests are made, not
            // while they are awaited.
            {
                let mut starts = slot
                    .as_ref()
                    .map(|s| s.starts.lock().unwrap_or_else(|e| e.into_inner()));
                for (fanout_index, (&target, peer)) in targets.iter().zip(peers).enumerate() {
                    // The time since this slot's last RPC to the same fanout
                    // index started (none for a slot's first, nor in an open
                    // loop): upstream's latency_weight.
                    let (start_wall, started) = (SystemTime::now(), Instant::now());
                    let weight = starts.as_mut().and_then(|v| {
                        if v.len() <= fanout_index {
                            v.resize(fanout_index + 1, None);
                        }
                        v[fanout_index]
                            .replace(started)
                            .map(|p| i64::try_from((started - p).as_nanos()).unwrap_or(i64::MAX))
                    });
                    let mut trace = trace.clone();
                    if let Some(t) = trace.as_mut() {
                        t.fanout_index.push(fanout_index as i64);
                    }
                    let mut req = GenericRequestResponse {
                        payload: None,
                        rpc_index: Some(r as i32),
                        trace_context: trace,
                        warmup: warmup.then_some(true),
                        response_payload_size: response_size,
                        ..Default::default()
                    };
                    // The size is the whole message's, as upstream's.
                    req.payload = driver::padding_for(req.encoded_len(), request_size)
                        .map(|n| driver::payload(n as i64));
                    let me = self.clone();
                    sends.push(async move {
                        let request_bytes = req.encoded_len() as i64;
                        let trace = req.trace_context.clone();
                        let sent = me.send(peer, req, start_wall, started).await;
                        (target, request_bytes, trace, weight, sent)
                    });
                }
            }
            while let Some((target, request_bytes, trace, weight, sent)) = sends.next().await {
                let (ok, error, response_bytes) = self.outcome(&sent.result);
                // Through a channel, the sample goes under the instance that
                // answered (upstream: the response's server_instance).
                let answered = match (&channel, &sent.result) {
                    (Some(_), Ok(resp)) => resp
                        .server_instance
                        .and_then(|i| usize::try_from(i).ok())
                        .filter(|&i| i < server.instances.len())
                        .unwrap_or(target),
                    _ => target,
                };
                let sample = RpcSample {
                    request_size: Some(request_bytes),
                    response_size: Some(response_bytes as i64),
                    start_timestamp_ns: Some(unix_ns(sent.start)),
                    latency_ns: Some(i64::try_from(sent.latency.as_nanos()).unwrap_or(i64::MAX)),
                    latency_weight: weight,
                    trace_context: trace,
                    warmup: warmup.then_some(true),
                    error_index: None,
                    server_instance: None,
                };
                run.samples
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .add(Pending {
                        server_instance: answered,
                        server_service: rpc.server,
                        rpc: r as i32,
                        ok,
                        error,
                        sample,
                    });
            }
        })
    }

    /// Waits (up to `limit`) until the handler lists still running after
    /// their responses have ended, so the log holds their samples; true if
    /// they all did.
    pub async fn quiesce(&self, limit: Duration) -> bool {
        let end = Instant::now() + limit;
        while self.lists_in_flight.load(Ordering::Acquire) > 0 {
            if Instant::now() >= end {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        true
    }

    /// Takes this instance's log (what it measured as a client).
    pub fn take_log(&self) -> ServicePerformanceLog {
        let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        let log = std::mem::take(&mut *log);
        let activity_logs = std::mem::take(
            &mut *self
                .activity_counts
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        )
        .into_iter()
        .map(|(name, n)| {
            (
                name,
                ActivityLog {
                    activity_metrics: vec![ActivityMetric {
                        name: Some("iteration_count".into()),
                        value_int: Some(n),
                    }],
                },
            )
        })
        .collect();
        ServicePerformanceLog {
            peer_logs: log.peers,
            replay_trace_logs: log.replays,
            // Index 0 is "no error", there even when nothing failed (as
            // upstream's dictionary always is).
            error_dictionary: Some(ErrorDictionary {
                error_message: if log.errors.is_empty() {
                    vec![String::new()]
                } else {
                    log.errors
                },
            }),
            activity_logs,
            engine_error_message: self.cancel_reason(),
        }
    }

    /// Iterations of each activity config run by this instance.
    pub fn activity_counts(&self) -> BTreeMap<String, i64> {
        self.activity_counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// RPCs sent and not yet answered.
    pub fn pending_rpcs(&self) -> i64 {
        self.pending_rpcs.load(Ordering::Relaxed)
    }

    /// Whether `run_traffic` has begun.
    pub fn traffic_started(&self) -> bool {
        self.traffic_started.load(Ordering::Relaxed)
    }

    /// The instance's grid coordinates.
    pub fn coords(&self) -> (usize, usize, usize) {
        self.coords
    }
}

/// The grid of a service: `count` along x without sizes, else its sizes
/// (as [`crate::placement`] names the instances).
pub fn grid_of(spec: &crate::proto::ServiceSpec) -> Grid {
    let size = |v: i32| usize::try_from(v.max(1)).unwrap_or(1);
    match (spec.x_size, spec.y_size, spec.z_size) {
        (None, _, _) => Grid::line(size(spec.count())),
        (Some(x), None, _) => Grid::new(size(x), 1, 1),
        (Some(x), Some(y), z) => Grid::new(size(x), size(y), size(z.unwrap_or(1))),
    }
}

/// The first iteration time of an open-loop action, and its period.
fn first_open_loop_time(open_loop: OpenLoop, spread: f64) -> (Instant, Duration) {
    match open_loop {
        OpenLoop::Constant(p) | OpenLoop::Exponential(p) => (Instant::now(), p),
        OpenLoop::SyncBurst(p) | OpenLoop::SyncBurstSpread(p) => {
            let now = SystemTime::now();
            let since = now
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos();
            let period = p.as_nanos().max(1);
            let mut next = (since / period + 1) * period;
            if matches!(open_loop, OpenLoop::SyncBurstSpread(_)) {
                next += (spread * period as f64) as u128;
            }
            let t = UNIX_EPOCH + Duration::from_nanos(u64::try_from(next).unwrap_or(u64::MAX));
            (instant_at(t), p)
        }
    }
}
