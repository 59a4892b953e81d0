//! The test sequencer: node managers register with it; it runs each test of
//! a sequence on them and returns upstream's `TestResult`s.
//!
//! Per test: `check_test` validation and the engine's own compile step (so
//! a test the engines cannot run fails before any node is touched),
//! placement of the instances on the registered nodes (upstream's rules,
//! [`crate::placement`]), `ConfigureNode` on every node that runs
//! something, `IntroducePeers` with the whole endpoint map, `RunTraffic` on
//! all of them with one shared start time and the test's deadline (the
//! `test_timeout` attribute in seconds, 3600 by default), then
//! `GetTrafficResult` on every node, and once all answered, again with the
//! services cleared (so no node's servers stop while another node's
//! handlers still send to them). A node manager that dies
//! or errs fails the test with a message naming it; the others are
//! cancelled and cleared, and nothing waits past the deadline.

use crate::Error;
use crate::check;
use crate::engine::driver;
use crate::engine::tables::Tables;
use crate::placement::{self, Node};
use crate::proto::dist_bench_node_manager_client::DistBenchNodeManagerClient;
use crate::proto::dist_bench_test_sequencer_server::{
    DistBenchTestSequencer, DistBenchTestSequencerServer,
};
use crate::proto::{
    Attribute, CancelTrafficRequest, DistributedSystemDescription, GetTrafficResultRequest,
    NodeConfig, NodeRegistration, NodeServiceConfig, ResourceUsageLogs, RunTrafficRequest,
    ServiceEndpointMap, ServiceLogs, ShutdownNodeRequest, TestResult, TestSequence,
    TestSequenceResults,
};
use futures::future::join_all;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::Mutex;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Response, Status};

/// Default `test_timeout` (seconds), as upstream.
pub const DEFAULT_TEST_TIMEOUT_SECS: u64 = 3600;
/// How long control RPCs other than RunTraffic may take.
const CONTROL_TIMEOUT: Duration = Duration::from_secs(30);
/// How often nodes whose traffic is done are checked while others run.
const LIVENESS_INTERVAL: Duration = Duration::from_secs(1);
/// How long a liveness check may take.
const LIVENESS_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether the node manager at `addr` (`host:port`) still accepts
/// connections: a TCP connection opened and closed, below any RPC, so it
/// works with upstream's node managers as with rackbench's (upstream's
/// protocol has no liveness method). `Err` only when the connection is
/// refused or reset (the process is gone); running out of time is a node
/// too busy to answer, not a dead one.
async fn alive(addr: &str) -> Result<(), String> {
    match tokio::time::timeout(LIVENESS_TIMEOUT, tokio::net::TcpStream::connect(addr)).await {
        Ok(Ok(_)) | Err(_) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
    }
}
/// Margin between sending RunTraffic and the shared start time.
const START_MARGIN: Duration = Duration::from_millis(200);

/// A registered node manager.
#[derive(Clone)]
struct NodeEntry {
    id: i32,
    alias: String,
    /// The `host:port` the sequencer dials.
    addr: String,
    hostname: String,
    attributes: BTreeMap<String, String>,
    client: DistBenchNodeManagerClient<Channel>,
}

/// The sequencer.
#[derive(Default)]
pub struct Sequencer {
    nodes: std::sync::Mutex<Vec<NodeEntry>>,
    /// One test sequence at a time.
    running: Mutex<()>,
    /// Notified after a sequence with `shutdown_after_tests`.
    shutdown: Arc<tokio::sync::Notify>,
    /// Node managers started with the sequencer that tests wait for.
    expected_nodes: std::sync::atomic::AtomicUsize,
}

/// Why a test failed.
#[derive(Debug)]
pub struct TestError {
    /// Bad input (the test itself) rather than a node fault.
    pub invalid: bool,
    pub message: String,
}

impl TestError {
    fn invalid(message: impl Into<String>) -> TestError {
        TestError {
            invalid: true,
            message: message.into(),
        }
    }
    fn node(message: String) -> TestError {
        TestError {
            invalid: false,
            message,
        }
    }
}

impl Sequencer {
    pub fn new() -> Arc<Sequencer> {
        Arc::new(Sequencer::default())
    }

    /// The tonic service of this sequencer.
    pub fn service(self: &Arc<Self>) -> DistBenchTestSequencerServer<Handle> {
        DistBenchTestSequencerServer::new(Handle(self.clone()))
            .max_decoding_message_size(driver::MAX_MESSAGE_BYTES)
            .max_encoding_message_size(driver::MAX_MESSAGE_BYTES)
    }

    /// Registers (or re-registers, same control address) a node manager.
    /// The sequencer dials its `service_address` (a gRPC target such as
    /// `ipv4:///10.0.0.2:10000` or `dns:///host:10000`), else
    /// `control_ip:control_port`. A node asking for an id
    /// (`preassigned_node_id`, the node manager's `nodeN` argument) gets it
    /// unless another node holds it; the others get the next free id.
    pub fn register(&self, reg: &NodeRegistration) -> Result<NodeConfig, Error> {
        let addr = match reg.service_address.as_deref().filter(|s| !s.is_empty()) {
            Some(target) => service_target(target).map_err(Error::Input)?,
            None => {
                let ip = reg.control_ip();
                let addr: SocketAddr = format!("{ip}:{}", reg.control_port())
                    .parse()
                    .or_else(|_| format!("[{ip}]:{}", reg.control_port()).parse())
                    .map_err(|_| {
                        Error::Input(format!(
                            "RegisterNode: control_ip '{ip}' and control_port {} are not an address",
                            reg.control_port()
                        ))
                    })?;
                addr.to_string()
            }
        };
        let channel = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| Error::Input(format!("RegisterNode: {e}")))?
            .tcp_nodelay(true)
            .connect_timeout(Duration::from_secs(5))
            .connect_lazy();
        let client = DistBenchNodeManagerClient::new(channel)
            .max_decoding_message_size(driver::MAX_MESSAGE_BYTES)
            .max_encoding_message_size(driver::MAX_MESSAGE_BYTES);
        let attributes: BTreeMap<String, String> = reg
            .attributes
            .iter()
            .map(|a: &Attribute| (a.name().to_string(), a.value().to_string()))
            .collect();
        let mut nodes = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
        let wanted = reg.preassigned_node_id();
        let id = match nodes.iter().position(|n| n.addr == addr) {
            Some(i) => nodes[i].id,
            None if wanted >= 0 => {
                if let Some(n) = nodes.iter().find(|n| n.id == wanted) {
                    return Err(Error::Input(format!(
                        "RegisterNode: node{wanted} is already registered (at {}); \
                         pre-assigned node ids must be unique",
                        n.addr
                    )));
                }
                wanted
            }
            None => nodes.iter().map(|n| n.id + 1).max().unwrap_or(0),
        };
        let entry = NodeEntry {
            id,
            alias: format!("node{id}"),
            addr,
            hostname: reg.hostname().to_string(),
            attributes,
            client,
        };
        let config = NodeConfig {
            node_id: Some(id),
            node_alias: Some(entry.alias.clone()),
        };
        match nodes.iter().position(|n| n.id == id) {
            Some(i) => nodes[i] = entry,
            None => nodes.push(entry),
        }
        nodes.sort_by_key(|n| n.id);
        Ok(config)
    }

    /// Makes test sequences wait (up to 30 s) until `n` node managers have
    /// registered: those started beside the sequencer (`--local_nodes`).
    pub fn expect_nodes(&self, n: usize) {
        self.expected_nodes
            .store(n, std::sync::atomic::Ordering::Relaxed);
    }

    async fn wait_for_expected_nodes(&self) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while self.node_count()
            < self
                .expected_nodes
                .load(std::sync::atomic::Ordering::Relaxed)
            && std::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Number of registered node managers.
    pub fn node_count(&self) -> usize {
        self.nodes.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Runs every test of `seq`; the first failing test ends the sequence.
    /// With `tests_setting.shutdown_after_tests`, the node managers and
    /// then the sequencer itself stop afterwards (also after a failure).
    pub async fn run_sequence(&self, seq: &TestSequence) -> Result<TestSequenceResults, TestError> {
        let _one_at_a_time = self.running.lock().await;
        self.wait_for_expected_nodes().await;
        let mut results = TestSequenceResults::default();
        let mut outcome = Ok(());
        for (i, test) in seq.tests.iter().enumerate() {
            match self.run_test(test).await {
                Ok(mut r) => {
                    apply_tests_setting(&mut r, seq.tests_setting.as_ref());
                    results.test_results.push(r);
                }
                Err(mut e) => {
                    // A client sending one test at a time names it itself.
                    if seq.tests.len() > 1 {
                        e.message = format!("test {i} '{}': {}", test.name(), e.message);
                    }
                    outcome = Err(e);
                    break;
                }
            }
        }
        if seq
            .tests_setting
            .as_ref()
            .is_some_and(|s| s.shutdown_after_tests())
        {
            self.shutdown_nodes().await;
        }
        outcome.map(|()| results)
    }

    /// Tells every node manager to stop, then signals the sequencer's own
    /// shutdown ([`Sequencer::shutdown_signal`]).
    pub async fn shutdown_nodes(&self) {
        let nodes = self.nodes.lock().unwrap_or_else(|e| e.into_inner()).clone();
        join_all(nodes.iter().map(|n| {
            let mut c = n.client.clone();
            async move {
                let _ = tokio::time::timeout(
                    Duration::from_secs(5),
                    c.shutdown_node(ShutdownNodeRequest {}),
                )
                .await;
            }
        }))
        .await;
        let notify = self.shutdown.clone();
        tokio::spawn(async move {
            // Let the RunTestSequence answer go out first.
            tokio::time::sleep(Duration::from_millis(200)).await;
            notify.notify_one();
        });
    }

    /// Resolves after a sequence with `shutdown_after_tests`.
    pub fn shutdown_signal(&self) -> Arc<tokio::sync::Notify> {
        self.shutdown.clone()
    }

    /// Runs one test.
    pub async fn run_test(
        &self,
        test: &DistributedSystemDescription,
    ) -> Result<TestResult, TestError> {
        let one = TestSequence {
            tests: vec![test.clone()],
            tests_setting: None,
        };
        check::validate(&one, "the test").map_err(TestError::invalid)?;
        // The engines' own compile step: what they cannot run (a protocol
        // driver rackbench lacks) fails here, before any node is touched.
        Tables::new(test).map_err(TestError::invalid)?;
        let timeout = test_timeout(test).map_err(TestError::invalid)?;

        let nodes = self.nodes.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let placement_nodes: Vec<Node> = nodes
            .iter()
            .map(|n| Node {
                alias: n.alias.clone(),
                attributes: n.attributes.clone(),
            })
            .collect();
        let placement = placement::place(test, &placement_nodes)
            .map_err(|e| TestError::invalid(format!("placement: {e}")))?;
        let used: Vec<(NodeEntry, Vec<String>)> = nodes
            .iter()
            .filter_map(|n| {
                placement
                    .get(&n.alias)
                    .filter(|v| !v.is_empty())
                    .map(|v| (n.clone(), v.clone()))
            })
            .collect();

        let outcome = self.drive(test, &used, timeout).await;
        if outcome.is_err() {
            // Leave no engine behind on the nodes that still answer.
            join_all(used.iter().map(|(n, _)| async move {
                let mut c = n.client.clone();
                let _ = tokio::time::timeout(
                    Duration::from_secs(5),
                    c.cancel_traffic(CancelTrafficRequest {}),
                )
                .await;
                let _ = tokio::time::timeout(
                    Duration::from_secs(5),
                    c.get_traffic_result(GetTrafficResultRequest {
                        clear_services: Some(true),
                    }),
                )
                .await;
            }))
            .await;
        }
        let (placement_map, logs, usages) = outcome?;
        let mut result = TestResult {
            traffic_config: Some(test.clone()),
            placement: Some(placement_map),
            service_logs: Some(logs),
            resource_usage_logs: Some(ResourceUsageLogs {
                test_sequencer_usage: None,
                node_usages: usages,
            }),
            log_summary: Vec::new(),
        };
        result.log_summary = crate::summary::summarize(&result);
        Ok(result)
    }

    async fn drive(
        &self,
        test: &DistributedSystemDescription,
        used: &[(NodeEntry, Vec<String>)],
        timeout: Duration,
    ) -> Result<
        (
            ServiceEndpointMap,
            ServiceLogs,
            BTreeMap<String, crate::proto::RUsageStats>,
        ),
        TestError,
    > {
        let endpoints = configure_nodes(test, used).await?;
        introduce_peers(used, &endpoints).await?;
        run_traffic(used, timeout).await?;
        let (logs, usages) = collect_results(used).await?;
        Ok((endpoints, logs, usages))
    }
}

/// A node manager's failed `what` call as the test's error: unreachable or
/// dead, too slow, or what it answered.
fn node_err(n: &NodeEntry, what: &str, s: Status) -> TestError {
    let why = match s.code() {
        tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Cancelled => {
            format!(
                "node manager {} ({}, {}) is unreachable or died: {}",
                n.alias,
                n.hostname,
                n.addr,
                s.message()
            )
        }
        tonic::Code::DeadlineExceeded => format!(
            "node manager {} ({}) did not answer {what} in time",
            n.alias, n.addr
        ),
        _ => format!("node manager {} ({}): {}", n.alias, n.addr, s.message()),
    };
    TestError {
        invalid: s.code() == tonic::Code::InvalidArgument,
        message: format!("{what}: {why}"),
    }
}

/// Configures every used node with its services; returns the endpoints
/// they serve.
async fn configure_nodes(
    test: &DistributedSystemDescription,
    used: &[(NodeEntry, Vec<String>)],
) -> Result<ServiceEndpointMap, TestError> {
    let configured = join_all(used.iter().map(|(n, services)| {
        let mut c = n.client.clone();
        let cfg = NodeServiceConfig {
            traffic_config: Some(test.clone()),
            services: services.clone(),
        };
        async move {
            let mut req = Request::new(cfg);
            req.set_timeout(CONTROL_TIMEOUT);
            c.configure_node(req).await
        }
    }))
    .await;
    let mut endpoints = ServiceEndpointMap::default();
    for ((n, _), r) in used.iter().zip(configured) {
        let map = r.map_err(|s| node_err(n, "ConfigureNode", s))?.into_inner();
        endpoints.service_endpoints.extend(map.service_endpoints);
    }
    Ok(endpoints)
}

/// Tells every used node where all the services are.
async fn introduce_peers(
    used: &[(NodeEntry, Vec<String>)],
    endpoints: &ServiceEndpointMap,
) -> Result<(), TestError> {
    let introduced = join_all(used.iter().map(|(n, _)| {
        let mut c = n.client.clone();
        let map = endpoints.clone();
        async move {
            let mut req = Request::new(map);
            req.set_timeout(CONTROL_TIMEOUT);
            c.introduce_peers(req).await
        }
    }))
    .await;
    for ((n, _), r) in used.iter().zip(introduced) {
        r.map_err(|s| node_err(n, "IntroducePeers", s))?;
    }
    Ok(())
}

/// Runs the traffic on every used node, watching those done for liveness;
/// a node that fails stops the others.
async fn run_traffic(
    used: &[(NodeEntry, Vec<String>)],
    timeout: Duration,
) -> Result<(), TestError> {
    let start = SystemTime::now() + START_MARGIN;
    let deadline = start + timeout;
    let ns = |t: SystemTime| {
        t.duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
    };
    let run = RunTrafficRequest {
        start_timestamp_ns: Some(ns(start)),
        deadline_ns: Some(ns(deadline)),
    };
    let mut calls = futures::stream::FuturesUnordered::new();
    for (i, (n, _)) in used.iter().enumerate() {
        let mut c = n.client.clone();
        calls.push(async move {
            let mut req = Request::new(run);
            // The engines cancel at the deadline; allow the grace and
            // result collection on top, then give up on the node.
            req.set_timeout(START_MARGIN + timeout + Duration::from_secs(15));
            (i, c.run_traffic(req).await)
        });
    }
    let mut errors = Vec::new();
    use futures::StreamExt;
    let mut done = vec![false; used.len()];
    let mut tick = tokio::time::interval(LIVENESS_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let failed = loop {
        tokio::select! {
            next = calls.next() => {
                let Some((i, r)) = next else { break None };
                done[i] = true;
                match r {
                    Ok(resp) => errors.extend(resp.into_inner().errors),
                    Err(s) => break Some(node_err(&used[i].0, "RunTraffic", s)),
                }
            }
            _ = tick.tick() => {
                if let Some(e) = dead_done_node(used, &done).await {
                    break Some(e);
                }
            }
        }
    };
    if let Some(e) = failed {
        // One node failed: stop the others now rather than at the
        // deadline.
        join_all(used.iter().map(|(n, _)| {
            let mut c = n.client.clone();
            async move {
                let _ = tokio::time::timeout(
                    Duration::from_secs(5),
                    c.cancel_traffic(CancelTrafficRequest {}),
                )
                .await;
            }
        }))
        .await;
        return Err(e);
    }
    if !errors.is_empty() {
        return Err(TestError::node(format!(
            "RunTraffic: {}",
            errors.join("; ")
        )));
    }
    Ok(())
}

/// Nodes whose own traffic is done (servers only) may still die while the
/// others run: checks that they still accept connections. A check that
/// times out is a node too busy to answer (a large test on few cores
/// starves the control service), not a dead one: only a refused or broken
/// connection ends the test. A hung node is still caught by the RunTraffic
/// deadline of the others.
async fn dead_done_node(used: &[(NodeEntry, Vec<String>)], done: &[bool]) -> Option<TestError> {
    let checks = used
        .iter()
        .enumerate()
        .filter(|(i, _)| done[*i])
        .map(|(i, (n, _))| {
            let addr = n.addr.clone();
            async move { (i, alive(&addr).await) }
        });
    if let Some((i, Err(e))) = join_all(checks).await.into_iter().find(|(_, r)| r.is_err()) {
        return Some(node_err(
            &used[i].0,
            "RunTraffic",
            Status::unavailable(format!("its control address refuses connections: {e}")),
        ));
    }
    None
}

/// Collects the logs and resource usage of every used node, in two rounds:
/// every node's logs first, none cleared (each node waits for its handler
/// lists still running after their responses, whose RPCs may go to
/// instances on other nodes), then the services cleared everywhere.
/// Clearing in the same round would shut a node's servers while another
/// node's lists still send to them.
async fn collect_results(
    used: &[(NodeEntry, Vec<String>)],
) -> Result<(ServiceLogs, BTreeMap<String, crate::proto::RUsageStats>), TestError> {
    let get = |clear: bool| {
        join_all(used.iter().map(move |(n, _)| {
            let mut c = n.client.clone();
            async move {
                let mut req = Request::new(GetTrafficResultRequest {
                    clear_services: Some(clear),
                });
                req.set_timeout(CONTROL_TIMEOUT);
                c.get_traffic_result(req).await
            }
        }))
    };
    let collected = get(false).await;
    let mut logs = ServiceLogs::default();
    let mut usages = BTreeMap::new();
    for ((n, _), r) in used.iter().zip(collected) {
        let r = r
            .map_err(|s| node_err(n, "GetTrafficResult", s))?
            .into_inner();
        if let Some(l) = r.service_logs {
            logs.instance_logs.extend(l.instance_logs);
        }
        usages.extend(r.node_usages);
    }
    // The second answers are not read: rackbench's node managers gave
    // their logs away in the first, upstream's repeat them.
    for ((n, _), r) in used.iter().zip(get(true).await) {
        r.map_err(|s| node_err(n, "GetTrafficResult", s))?;
    }
    Ok((logs, usages))
}

/// What `tests_setting` does to a finished test's result, as upstream's
/// sequencer: with `keep_instance_log: false` the instance logs are
/// cleared (after the summary lines were made from them).
pub fn apply_tests_setting(result: &mut TestResult, setting: Option<&crate::proto::TestsSetting>) {
    if setting.is_some_and(|s| !s.keep_instance_log())
        && let Some(logs) = result.service_logs.as_mut()
    {
        logs.instance_logs.clear();
    }
}

/// The `host:port` of a node's gRPC `service_address` target
/// (`ipv4:///1.2.3.4:5678`, `ipv6:///[::1]:5678`, `dns:///host:5678`, or a
/// plain `host:port`).
fn service_target(target: &str) -> Result<String, String> {
    let rest = ["ipv4:///", "ipv6:///", "dns:///", "ipv4:", "ipv6:", "dns:"]
        .iter()
        .find_map(|p| target.strip_prefix(p))
        .unwrap_or(target);
    let uri: Option<tonic::codegen::http::Uri> = format!("http://{rest}").parse().ok();
    match uri {
        Some(u)
            if u.port().is_some() && u.host().is_some_and(|h| !h.is_empty()) && u.path() == "/" =>
        {
            Ok(rest.to_string())
        }
        _ => Err(format!(
            "RegisterNode: service_address '{target}' is not a gRPC target of the form \
             ipv4:///IP:PORT, ipv6:///[IP]:PORT, dns:///HOST:PORT or HOST:PORT"
        )),
    }
}

/// The test's `test_timeout` attribute (seconds), else 3600 s.
pub fn test_timeout(test: &DistributedSystemDescription) -> Result<Duration, Error> {
    match test.attributes.get("test_timeout") {
        None => Ok(Duration::from_secs(DEFAULT_TEST_TIMEOUT_SECS)),
        Some(v) => match v.trim().parse::<u64>() {
            // Ten years at most: past that a deadline is no deadline, and
            // adding it to the clock must not overflow.
            Ok(s) if s > 0 => Ok(Duration::from_secs(s.min(10 * 365 * 86_400))),
            _ => Err(Error::Input(format!(
                "attribute test_timeout must be a positive number of seconds, got '{v}'"
            ))),
        },
    }
}

/// The gRPC face of a [`Sequencer`].
pub struct Handle(Arc<Sequencer>);

#[tonic::async_trait]
impl DistBenchTestSequencer for Handle {
    async fn register_node(
        &self,
        request: Request<NodeRegistration>,
    ) -> Result<Response<NodeConfig>, Status> {
        self.0
            .register(&request.into_inner())
            .map(Response::new)
            .map_err(Status::invalid_argument)
    }

    async fn run_test_sequence(
        &self,
        request: Request<TestSequence>,
    ) -> Result<Response<TestSequenceResults>, Status> {
        match self.0.run_sequence(&request.into_inner()).await {
            Ok(r) => Ok(Response::new(r)),
            Err(e) if e.invalid => Err(Status::invalid_argument(e.message)),
            Err(e) => Err(Status::aborted(e.message)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_addresses_are_grpc_targets() {
        for (target, want) in [
            ("ipv4:///10.0.0.2:10000", "10.0.0.2:10000"),
            ("ipv6:///[::1]:5678", "[::1]:5678"),
            ("dns:///node-a.example:10000", "node-a.example:10000"),
            ("ipv4:127.0.0.1:1", "127.0.0.1:1"),
            ("localhost:10000", "localhost:10000"),
        ] {
            assert_eq!(service_target(target).unwrap(), want, "{target}");
        }
        for bad in [
            "ipv4:///10.0.0.2",
            "dns:///:80",
            "",
            "unix:///tmp/s",
            "h:1/path",
        ] {
            let e = service_target(bad).unwrap_err();
            assert!(e.contains("is not a gRPC target"), "{bad}: {e}");
        }
    }

    fn registration(port: i32, preassigned: Option<i32>) -> NodeRegistration {
        NodeRegistration {
            hostname: Some("h".into()),
            control_ip: Some("127.0.0.1".into()),
            control_port: Some(port),
            preassigned_node_id: preassigned,
            ..Default::default()
        }
    }

    /// Pre-assigned ids are granted, the others take the next free id, a
    /// re-registration keeps its id, and a taken id is refused by name.
    #[tokio::test]
    async fn preassigned_node_ids() {
        let s = Sequencer::new();
        let id = |r: &NodeRegistration| s.register(r).unwrap().node_alias().to_string();
        assert_eq!(id(&registration(1001, Some(2))), "node2");
        assert_eq!(id(&registration(1002, None)), "node3");
        assert_eq!(id(&registration(1003, Some(0))), "node0");
        assert_eq!(id(&registration(1002, None)), "node3");
        let e = s.register(&registration(1004, Some(2))).unwrap_err();
        assert!(e.to_string().contains("node2 is already registered"), "{e}");
        // A service address is dialled instead of the control address.
        let mut r = registration(1005, None);
        r.service_address = Some("ipv4:///127.0.0.1:2005".into());
        assert_eq!(id(&r), "node4");
        let nodes = s.nodes.lock().unwrap();
        let ids: Vec<i32> = nodes.iter().map(|n| n.id).collect();
        assert_eq!(ids, [0, 2, 3, 4]);
        assert_eq!(nodes[3].addr, "127.0.0.1:2005");
    }
}
