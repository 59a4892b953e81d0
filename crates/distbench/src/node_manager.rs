//! The node manager: hosts the service instances (engines) the test
//! sequencer places on it, each serving the generic RPC on its own port.
//!
//! Lifecycle per test, driven by the sequencer: `ConfigureNode` (start the
//! engines, answer their endpoints), `IntroducePeers` (every engine
//! connects to the instances it sends to), `RunTraffic` (all engines run
//! their traffic from the shared start time until done or the deadline),
//! `GetTrafficResult` (their logs and this process's resource usage; with
//! `clear_services` the engines are torn down). `CancelTraffic` stops the
//! traffic at once; `ShutdownNode` ends the node manager.

use crate::engine::tables::Tables;
use crate::engine::{CANCEL_GRACE, Engine, Process, driver};
use crate::proto::dist_bench_node_manager_server::{
    DistBenchNodeManager, DistBenchNodeManagerServer,
};
use crate::proto::{
    Attribute, CancelTrafficRequest, CancelTrafficResult, GetTrafficResultRequest,
    GetTrafficResultResponse, IntroducePeersResult, NodeServiceConfig, RUsage, RUsageStats,
    RunTrafficRequest, RunTrafficResponse, ServiceEndpoint, ServiceEndpointMap, ServiceLogs,
    ShutdownNodeRequest, ShutdownNodeResult,
};
use futures::future::join_all;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, UNIX_EPOCH};
use tokio::sync::{Mutex, Notify};
use tonic::{Request, Response, Status};

/// Where a node manager's service instances listen and what they
/// advertise, as upstream's node manager chooses them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Addresses {
    /// Where each instance's endpoint (the handshake) listens: the control
    /// plane's address (`--control_plane_device`, `--bind`), or every
    /// interface (`::` or `0.0.0.0`) when none is named.
    pub listen: IpAddr,
    /// The endpoint address the placement advertises: the control device's
    /// address, else this host's primary address.
    pub endpoint: IpAddr,
    /// Where the instances serve their traffic unless their protocol
    /// options name a device: `--data_plane_address`,
    /// `--default_data_plane_device`, else this host's primary address.
    pub data: IpAddr,
}

impl Addresses {
    /// Everything on one address (a loopback cluster).
    pub fn all(ip: IpAddr) -> Addresses {
        Addresses {
            listen: ip,
            endpoint: ip,
            data: ip,
        }
    }
}

/// One node manager.
pub struct NodeManager {
    addrs: Addresses,
    /// The node managers of this process (overload_limits.max_threads).
    process: Arc<Process>,
    hostname: String,
    alias: std::sync::Mutex<String>,
    /// The attributes it registered with; every endpoint it opens carries
    /// them (as upstream's).
    attributes: std::sync::Mutex<Vec<Attribute>>,
    node_id: AtomicI64,
    state: Mutex<State>,
    shutdown: Arc<Notify>,
}

/// Sockets the instances configured in this process will hold (all node
/// managers of a process share its open-file limit).
static PLANNED_SOCKETS: AtomicI64 = AtomicI64::new(0);

/// Sockets the instances of `names` hold: one per peer they send to and one
/// per peer instance that sends to them.
fn sockets_needed(tables: &Tables, placed: &[(usize, usize)]) -> i64 {
    let mut total = 0i64;
    for &(service, _) in placed {
        let mut servers = std::collections::BTreeSet::new();
        let mut clients = std::collections::BTreeSet::new();
        for r in &tables.rpcs {
            if r.clients.contains(&service) {
                servers.insert(r.server);
            }
            if r.server == service {
                clients.extend(r.clients.iter().copied());
            }
        }
        // RPC replay traces connect their client to the trace's server.
        for t in &tables.traces {
            if t.client == service {
                servers.insert(t.server);
            }
            if t.server == service {
                clients.insert(t.client);
            }
        }
        for s in servers.iter().chain(clients.iter()) {
            let n = tables.services[*s].instances.len() as i64;
            total += if *s == service { n - 1 } else { n };
        }
    }
    total
}

/// Open files this process may still open.
fn fd_headroom() -> i64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return i64::MAX;
    }
    let open = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as i64);
    i64::try_from(lim.rlim_cur).unwrap_or(i64::MAX) - open
}

#[derive(Default)]
struct State {
    engines: Vec<Arc<Engine>>,
    planned_sockets: i64,
    servers: Vec<driver::Serving>,
    rusage_start: Option<RUsage>,
    rusage_end: Option<RUsage>,
}

impl NodeManager {
    /// A node manager whose engines use `addrs`, one of the node managers
    /// of `process`.
    pub fn new(addrs: Addresses, hostname: String, process: Arc<Process>) -> Arc<NodeManager> {
        Arc::new(NodeManager {
            addrs,
            process,
            hostname,
            alias: std::sync::Mutex::new(String::new()),
            attributes: std::sync::Mutex::new(Vec::new()),
            node_id: AtomicI64::new(0),
            state: Mutex::new(State::default()),
            shutdown: Arc::new(Notify::new()),
        })
    }

    /// Records the id and alias the sequencer gave this node.
    pub fn set_identity(&self, id: i32, alias: &str) {
        self.node_id.store(i64::from(id), Ordering::Relaxed);
        *self.alias.lock().unwrap_or_else(|e| e.into_inner()) = alias.to_string();
    }

    /// Records the attributes this node registers with.
    pub fn set_attributes(&self, attributes: Vec<Attribute>) {
        *self.attributes.lock().unwrap_or_else(|e| e.into_inner()) = attributes;
    }

    /// The alias (`node<id>`), once registered.
    pub fn alias(&self) -> String {
        self.alias.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Resolves when a `ShutdownNode` arrives.
    pub fn shutdown_signal(&self) -> Arc<Notify> {
        self.shutdown.clone()
    }

    /// The tonic service of this node manager.
    pub fn service(self: &Arc<Self>) -> DistBenchNodeManagerServer<Handle> {
        DistBenchNodeManagerServer::new(Handle(self.clone()))
            .max_decoding_message_size(driver::MAX_MESSAGE_BYTES)
            .max_encoding_message_size(driver::MAX_MESSAGE_BYTES)
    }

    async fn teardown(state: &mut State) {
        for e in &state.engines {
            e.abort_traffic("services cleared", Duration::ZERO, Duration::ZERO);
        }
        state.engines.clear();
        PLANNED_SOCKETS.fetch_sub(state.planned_sockets, Ordering::Relaxed);
        state.planned_sockets = 0;
        join_all(
            state
                .servers
                .drain(..)
                .map(|s| tokio::time::timeout(Duration::from_secs(2), s.shutdown())),
        )
        .await;
    }

    async fn configure(&self, cfg: NodeServiceConfig) -> Result<ServiceEndpointMap, String> {
        let mut state = self.state.lock().await;
        Self::teardown(&mut state).await;
        state.rusage_start = None;
        state.rusage_end = None;
        let test = cfg.traffic_config.unwrap_or_default();
        let tables = Arc::new(Tables::new(&test)?);
        let mut placed = Vec::new();
        for name in &cfg.services {
            placed.push(
                tables
                    .services
                    .iter()
                    .enumerate()
                    .find_map(|(s, info)| {
                        info.instances
                            .iter()
                            .position(|n| n == name)
                            .map(|i| (s, i))
                    })
                    .ok_or_else(|| format!("no service instance named '{name}' in the test"))?,
            );
        }
        // Refuse what would run out of file descriptors mid-test.
        let need = sockets_needed(&tables, &placed);
        let planned = PLANNED_SOCKETS.fetch_add(need, Ordering::Relaxed) + need;
        state.planned_sockets = need;
        let headroom = fd_headroom() - 256;
        if planned > headroom {
            return Err(format!(
                "the instances placed in this process need about {planned} sockets (a connection per \
                 peer), more than the {} files it may still open (ulimit -n); run the node managers \
                 as separate processes (test_sequencer and node_manager) or raise the limit",
                headroom.max(0)
            ));
        }
        let mut endpoints = ServiceEndpointMap::default();
        for (name, &(service, instance)) in cfg.services.iter().zip(&placed) {
            let protocol = tables.services[service].protocol;
            let data_ip = self.data_ip(&tables.services[service])?;
            let engine = Arc::new(Engine::new(
                tables.clone(),
                service,
                instance,
                self.process.clone(),
            ));
            self.process.register(&engine);
            let serving = driver::Serving::start(
                engine.clone(),
                protocol,
                self.addrs.listen,
                self.addrs.endpoint,
                data_ip,
            )
            .await
            .map_err(|e| format!("{name}: {e}"))?;
            let addr = serving.endpoint;
            state.servers.push(serving);
            state.engines.push(engine);
            endpoints.service_endpoints.insert(
                name.clone(),
                ServiceEndpoint {
                    endpoint_address: Some(addr.to_string()),
                    hostname: Some(self.hostname.clone()),
                    attributes: self.endpoint_attributes(name),
                },
            );
        }
        Ok(endpoints)
    }

    /// The attributes of instance `name`'s endpoint, as upstream's node
    /// manager gives them: the node's, then `index` (a 1-D instance) or
    /// `x_index`, `y_index` and `z_index` (grid coordinates).
    fn endpoint_attributes(&self, name: &str) -> Vec<Attribute> {
        let mut out = self
            .attributes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let coords: Vec<&str> = name.split('/').skip(1).collect();
        let names: &[&str] = if coords.len() == 1 {
            &["index"]
        } else {
            &["x_index", "y_index", "z_index"]
        };
        for (n, v) in names.iter().zip(coords) {
            out.push(Attribute {
                name: Some((*n).to_string()),
                value: Some(v.to_string()),
            });
        }
        out
    }

    /// The address a service's instances serve their traffic on: the
    /// node's data-plane address, or its protocol options' `netdev_name`
    /// device, in the `ip_version` they ask for (loopback maps between
    /// 127.0.0.1 and ::1).
    fn data_ip(&self, info: &crate::engine::tables::ServiceInfo) -> Result<IpAddr, String> {
        let base = match &info.netdev {
            Some(dev) => crate::netif::device_address(dev)
                .map_err(|e| format!("service '{}': netdev_name: {e:#}", info.name))?,
            None => self.addrs.data,
        };
        match (info.ip_version, base) {
            (4, IpAddr::V6(a)) if a.is_loopback() => Ok(IpAddr::from([127, 0, 0, 1])),
            (6, IpAddr::V4(a)) if a.is_loopback() => {
                Ok(IpAddr::from(std::net::Ipv6Addr::LOCALHOST))
            }
            (4, IpAddr::V6(_)) | (6, IpAddr::V4(_)) => Err(format!(
                "service '{}' asks for ip_version {} but this node's data-plane address is {base}; \
                 start the node manager with a --data_plane_address of that family",
                info.name, info.ip_version
            )),
            _ => Ok(base),
        }
    }

    async fn introduce(&self, map: ServiceEndpointMap) -> Result<(), String> {
        let engines = self.state.lock().await.engines.clone();
        let results = join_all(engines.iter().map(|e| e.connect_peers(&map))).await;
        let errors: Vec<String> = results
            .into_iter()
            .filter_map(Result::err)
            .map(|e| e.to_string())
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }

    async fn run_traffic(&self, req: RunTrafficRequest) -> Vec<String> {
        let engines = {
            let mut state = self.state.lock().await;
            state.rusage_start = Some(rusage());
            state.engines.clone()
        };
        let at = |ns: i64| UNIX_EPOCH + Duration::from_nanos(u64::try_from(ns).unwrap_or(0));
        let start = req
            .start_timestamp_ns
            .map_or_else(std::time::SystemTime::now, at);
        let deadline = req.deadline_ns.map(at);
        let results = join_all(
            engines
                .iter()
                .map(|e| tokio::spawn(e.clone().run_traffic(start, deadline))),
        )
        .await;
        self.state.lock().await.rusage_end = Some(rusage());
        results
            .into_iter()
            .filter_map(|r| match r {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(e) => Some(format!("an engine task failed: {e}")),
            })
            .collect()
    }

    async fn results(&self, clear: bool) -> GetTrafficResultResponse {
        // Handler lists that answered early may still be sending: let them
        // finish (their RPCs are cancelled after the deadline anyway).
        let engines = self.state.lock().await.engines.clone();
        join_all(engines.iter().map(|e| e.quiesce(Duration::from_secs(10)))).await;
        let mut state = self.state.lock().await;
        let mut logs = ServiceLogs::default();
        for e in &state.engines {
            let log = e.take_log();
            if !log.peer_logs.is_empty()
                || !log.activity_logs.is_empty()
                || !log.replay_trace_logs.is_empty()
            {
                logs.instance_logs.insert(e.name.clone(), log);
            }
        }
        let mut node_usages = BTreeMap::new();
        if let Some(start) = &state.rusage_start {
            let end = state.rusage_end.unwrap_or_else(rusage);
            node_usages.insert(
                self.alias(),
                RUsageStats {
                    rusage_diff: Some(rusage_diff(&end, start)),
                    rusage_start: Some(*start),
                },
            );
        }
        if clear {
            Self::teardown(&mut state).await;
        }
        GetTrafficResultResponse {
            service_logs: Some(logs),
            node_usages,
        }
    }

    /// Cancels the traffic of every instance on this node, as upstream's
    /// CancelTraffic (no new iteration starts and the servers refuse new
    /// requests at once); RPCs still in flight after [`CANCEL_GRACE`] are
    /// abandoned (rackbench's: the sequencer cancels a test that failed,
    /// and Ctrl-C must stop within a second).
    pub async fn cancel_now(&self) {
        for e in &self.state.lock().await.engines {
            e.abort_traffic(
                crate::engine::CANCELLED_BY_SEQUENCER,
                Duration::ZERO,
                CANCEL_GRACE,
            );
        }
    }
}

/// getrusage(2) of this process.
pub fn rusage() -> RUsage {
    use nix::sys::resource::{UsageWho, getrusage};
    let Ok(u) = getrusage(UsageWho::RUSAGE_SELF) else {
        return RUsage::default();
    };
    let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    RUsage {
        user_cpu_time_seconds: Some(secs(u.user_time())),
        system_cpu_time_seconds: Some(secs(u.system_time())),
        max_resident_set_size: Some(u.max_rss()),
        integral_shared_memory_size: Some(u.shared_integral()),
        integral_unshared_data_size: Some(u.unshared_data_integral()),
        integral_unshared_stack_size: Some(u.unshared_stack_integral()),
        page_reclaims_soft_page_faults: Some(u.minor_page_faults()),
        page_faults_hard_page_faults: Some(u.major_page_faults()),
        swaps: Some(u.full_swaps()),
        block_input_operations: Some(u.block_reads()),
        block_output_operations: Some(u.block_writes()),
        ipc_messages_sent: Some(u.ipc_sends()),
        ipc_messages_received: Some(u.ipc_receives()),
        signals_received: Some(u.signals()),
        voluntary_context_switches: Some(u.voluntary_context_switches()),
        involuntary_context_switches: Some(u.involuntary_context_switches()),
    }
}

/// `end - start`, field by field (max RSS is the end's: it is a maximum).
pub fn rusage_diff(end: &RUsage, start: &RUsage) -> RUsage {
    let d = |a: Option<i64>, b: Option<i64>| Some(a.unwrap_or(0) - b.unwrap_or(0));
    RUsage {
        user_cpu_time_seconds: Some(end.user_cpu_time_seconds() - start.user_cpu_time_seconds()),
        system_cpu_time_seconds: Some(
            end.system_cpu_time_seconds() - start.system_cpu_time_seconds(),
        ),
        max_resident_set_size: end.max_resident_set_size,
        integral_shared_memory_size: d(
            end.integral_shared_memory_size,
            start.integral_shared_memory_size,
        ),
        integral_unshared_data_size: d(
            end.integral_unshared_data_size,
            start.integral_unshared_data_size,
        ),
        integral_unshared_stack_size: d(
            end.integral_unshared_stack_size,
            start.integral_unshared_stack_size,
        ),
        page_reclaims_soft_page_faults: d(
            end.page_reclaims_soft_page_faults,
            start.page_reclaims_soft_page_faults,
        ),
        page_faults_hard_page_faults: d(
            end.page_faults_hard_page_faults,
            start.page_faults_hard_page_faults,
        ),
        swaps: d(end.swaps, start.swaps),
        block_input_operations: d(end.block_input_operations, start.block_input_operations),
        block_output_operations: d(end.block_output_operations, start.block_output_operations),
        ipc_messages_sent: d(end.ipc_messages_sent, start.ipc_messages_sent),
        ipc_messages_received: d(end.ipc_messages_received, start.ipc_messages_received),
        signals_received: d(end.signals_received, start.signals_received),
        voluntary_context_switches: d(
            end.voluntary_context_switches,
            start.voluntary_context_switches,
        ),
        involuntary_context_switches: d(
            end.involuntary_context_switches,
            start.involuntary_context_switches,
        ),
    }
}

/// The gRPC face of a [`NodeManager`].
pub struct Handle(Arc<NodeManager>);

#[tonic::async_trait]
impl DistBenchNodeManager for Handle {
    async fn configure_node(
        &self,
        request: Request<NodeServiceConfig>,
    ) -> Result<Response<ServiceEndpointMap>, Status> {
        self.0
            .configure(request.into_inner())
            .await
            .map(Response::new)
            .map_err(|e| Status::invalid_argument(format!("{}: {e}", self.0.alias())))
    }

    async fn introduce_peers(
        &self,
        request: Request<ServiceEndpointMap>,
    ) -> Result<Response<IntroducePeersResult>, Status> {
        self.0
            .introduce(request.into_inner())
            .await
            .map(|()| Response::new(IntroducePeersResult {}))
            .map_err(|e| Status::unavailable(format!("{}: {e}", self.0.alias())))
    }

    async fn run_traffic(
        &self,
        request: Request<RunTrafficRequest>,
    ) -> Result<Response<RunTrafficResponse>, Status> {
        let errors = self.0.run_traffic(request.into_inner()).await;
        Ok(Response::new(RunTrafficResponse { errors }))
    }

    async fn get_traffic_result(
        &self,
        request: Request<GetTrafficResultRequest>,
    ) -> Result<Response<GetTrafficResultResponse>, Status> {
        let clear = request.into_inner().clear_services();
        Ok(Response::new(self.0.results(clear).await))
    }

    async fn cancel_traffic(
        &self,
        _request: Request<CancelTrafficRequest>,
    ) -> Result<Response<CancelTrafficResult>, Status> {
        self.0.cancel_now().await;
        Ok(Response::new(CancelTrafficResult {}))
    }

    async fn shutdown_node(
        &self,
        _request: Request<ShutdownNodeRequest>,
    ) -> Result<Response<ShutdownNodeResult>, Status> {
        let notify = self.0.shutdown.clone();
        // Answer first, then stop.
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            notify.notify_waiters();
            notify.notify_one();
        });
        Ok(Response::new(ShutdownNodeResult {}))
    }
}
