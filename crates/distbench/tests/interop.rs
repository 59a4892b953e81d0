//! rackbench's Distbench control plane with upstream's, both ways, over
//! real gRPC on loopback:
//!
//! - a minimal sequencer that speaks upstream's protocol only (its
//!   `RegisterNode`, then the node managers' `ConfigureNode`,
//!   `IntroducePeers`, `RunTraffic` with only a start time,
//!   `GetTrafficResult`, `CancelTraffic`, `ShutdownNode`) drives two
//!   rackbench node managers through a test;
//! - rackbench's sequencer drives a rackbench node manager and a minimal
//!   node manager that speaks upstream's protocol only (no method
//!   upstream's lacks): it hosts the test's server instance behind
//!   upstream's engine handshake (`ConnectionSetup.SetupConnection`
//!   answering a `ServerAddress`), its `RunTraffic` returns at once (it
//!   only serves), so the sequencer checks it is alive while the client
//!   runs, as it must, with nothing upstream's node managers lack.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

use distbench::cluster;
use distbench::node_manager::Addresses;
use distbench::proto::connection_setup_server::{ConnectionSetup, ConnectionSetupServer};
use distbench::proto::dist_bench_node_manager_client::DistBenchNodeManagerClient;
use distbench::proto::dist_bench_node_manager_server::{
    DistBenchNodeManager, DistBenchNodeManagerServer,
};
use distbench::proto::dist_bench_test_sequencer_server::{
    DistBenchTestSequencer, DistBenchTestSequencerServer,
};
use distbench::proto::traffic_server::{Traffic, TrafficServer};
use distbench::proto::{
    CancelTrafficRequest, CancelTrafficResult, ConnectRequest, ConnectResponse,
    GenericRequestResponse, GetTrafficResultRequest, GetTrafficResultResponse,
    IntroducePeersResult, NodeConfig, NodeRegistration, NodeServiceConfig, RunTrafficRequest,
    RunTrafficResponse, ServerAddress, ServiceEndpoint, ServiceEndpointMap, ServiceLogs,
    ShutdownNodeRequest, ShutdownNodeResult, TestResult, TestSequence, TestSequenceResults,
};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tonic::{Request, Response, Status};

const LOOPBACK: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A client/server test; the client sends for `secs`.
fn client_server(secs: u64, bundles: &str) -> distbench::proto::DistributedSystemDescription {
    let text = format!(
        "tests {{
  name: 'interop'
  services {{ name: 'client' count: 1 }}
  services {{ name: 'server' count: 1 }}
  rpc_descriptions {{ name: 'q' client: 'client' server: 'server' }}
  action_lists {{ name: 'client' action_names: 'send' }}
  actions {{ name: 'send' rpc_name: 'q'
    iterations {{ max_duration_us: {} open_loop_interval_ns: 5000000 }} }}
  action_lists {{ name: 'q' }}
  {bundles}
}}",
        secs * 1_000_000
    );
    distbench::textproto::parse_test_sequence(&text, "interop")
        .unwrap()
        .tests
        .remove(0)
}

fn successful(r: &ServiceLogs, client: &str) -> (usize, usize) {
    let log = r.instance_logs.get(client).unwrap();
    let mut ok = 0;
    let mut failed = 0;
    for p in log.peer_logs.values() {
        for l in p.rpc_logs.values() {
            ok += l.successful_rpc_samples.len();
            failed += l.failed_rpc_samples.len();
        }
    }
    (ok, failed)
}

/// Upstream's sequencer side: records the registrations.
#[derive(Default)]
struct MiniSequencer {
    nodes: Mutex<Vec<NodeRegistration>>,
}

/// Its gRPC face.
struct SequencerFace(Arc<MiniSequencer>);

#[tonic::async_trait]
impl DistBenchTestSequencer for SequencerFace {
    async fn register_node(
        &self,
        request: Request<NodeRegistration>,
    ) -> Result<Response<NodeConfig>, Status> {
        let mut nodes = self.0.nodes.lock().unwrap();
        let id = nodes.len() as i32;
        nodes.push(request.into_inner());
        Ok(Response::new(NodeConfig {
            node_id: Some(id),
            node_alias: Some(format!("node{id}")),
        }))
    }

    async fn run_test_sequence(
        &self,
        _request: Request<TestSequence>,
    ) -> Result<Response<TestSequenceResults>, Status> {
        Err(Status::unimplemented("not needed here"))
    }
}

/// The node manager a registration tells upstream's sequencer to dial.
async fn dial(reg: &NodeRegistration) -> DistBenchNodeManagerClient<tonic::transport::Channel> {
    // Upstream's node managers and rackbench's give a gRPC target.
    let target = reg.service_address();
    let hostport = target.strip_prefix("ipv4:///").unwrap_or(target);
    DistBenchNodeManagerClient::connect(format!("http://{hostport}"))
        .await
        .unwrap()
}

#[test]
fn upstreams_sequencer_protocol_drives_rackbench_node_managers() {
    rt().block_on(async {
        let mini = Arc::new(MiniSequencer::default());
        let bound = rpc::server::bind(SocketAddr::new(LOOPBACK, 0)).unwrap();
        let seq_addr = bound.addr.to_string();
        let seq_server = rpc::server::spawn(
            tonic::transport::Server::builder().add_service(DistBenchTestSequencerServer::new(
                SequencerFace(mini.clone()),
            )),
            bound,
        );
        let process = distbench::engine::Process::new();
        let mut nodes = Vec::new();
        for _ in 0..2 {
            nodes.push(
                cluster::start_node_manager(
                    &seq_addr,
                    SocketAddr::new(LOOPBACK, 0),
                    Addresses::all(LOOPBACK),
                    &[],
                    process.clone(),
                )
                .await
                .unwrap(),
            );
        }
        let regs = mini.nodes.lock().unwrap().clone();
        assert_eq!(regs.len(), 2);
        for r in &regs {
            // What upstream's sequencer needs: a hostname, a port and the
            // target it dials.
            assert!(!r.hostname().is_empty() && r.control_port() > 0, "{r:?}");
            assert!(
                r.service_address().starts_with("ipv4:///127.0.0.1:"),
                "{r:?}"
            );
        }
        let mut clients = Vec::new();
        for r in &regs {
            clients.push(dial(r).await);
        }
        // The node managers serve exactly upstream's methods: no other.
        let ping = rpc::unary::UnaryClient::connect(
            regs[0]
                .service_address()
                .trim_start_matches("ipv4:///")
                .parse()
                .unwrap(),
            1,
            "/distbench.DistBenchNodeManager/Ping",
        )
        .await
        .unwrap()
        .call(rpc::unary::frame(&[]))
        .await;
        assert!(
            matches!(ping, Err(rpc::unary::UnaryError::Status { code: 12, .. })),
            "{ping:?}"
        );

        let test = client_server(1, "");
        let mut endpoints = ServiceEndpointMap::default();
        for (c, services) in clients.iter_mut().zip([["client/0"], ["server/0"]]) {
            let map = c
                .configure_node(NodeServiceConfig {
                    traffic_config: Some(test.clone()),
                    services: services.iter().map(|s| s.to_string()).collect(),
                })
                .await
                .unwrap()
                .into_inner();
            endpoints.service_endpoints.extend(map.service_endpoints);
        }
        assert_eq!(endpoints.service_endpoints.len(), 2);
        for c in clients.iter_mut() {
            c.introduce_peers(endpoints.clone()).await.unwrap();
        }
        // Upstream's RunTraffic request: the start time only (now), no
        // deadline.
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos() as i64;
        let runs = clients.iter().map(|c| {
            let mut c = c.clone();
            async move {
                c.run_traffic(RunTrafficRequest {
                    start_timestamp_ns: Some(now),
                    deadline_ns: None,
                })
                .await
            }
        });
        for r in futures::future::join_all(runs).await {
            r.unwrap();
        }
        let mut logs = ServiceLogs::default();
        for c in clients.iter_mut() {
            let r = c
                .get_traffic_result(GetTrafficResultRequest {
                    clear_services: Some(true),
                })
                .await
                .unwrap()
                .into_inner();
            logs.instance_logs
                .extend(r.service_logs.unwrap_or_default().instance_logs);
        }
        let (ok, failed) = successful(&logs, "client/0");
        assert!(ok > 50 && failed == 0, "{ok} successful, {failed} failed");
        for c in clients.iter_mut() {
            c.cancel_traffic(CancelTrafficRequest {}).await.unwrap();
            c.shutdown_node(ShutdownNodeRequest {}).await.unwrap();
        }
        for n in nodes {
            let _ = n.server.shutdown().await;
        }
        let _ = seq_server.shutdown().await;
    });
}

/// The traffic side of the minimal node manager's one server instance:
/// answers every RPC at once, with no payload.
struct Answer;

#[tonic::async_trait]
impl Traffic for Answer {
    async fn generic_rpc(
        &self,
        _request: Request<GenericRequestResponse>,
    ) -> Result<Response<GenericRequestResponse>, Status> {
        Ok(Response::new(GenericRequestResponse::default()))
    }
}

/// Upstream's engine handshake: where the traffic is served.
struct Setup(SocketAddr);

#[tonic::async_trait]
impl ConnectionSetup for Setup {
    async fn setup_connection(
        &self,
        _request: Request<ConnectRequest>,
    ) -> Result<Response<ConnectResponse>, Status> {
        use prost::Message;
        let addr = ServerAddress {
            ip_address: Some(self.0.ip().to_string()),
            port: Some(i32::from(self.0.port())),
            socket_address: Some(self.0.to_string()),
        };
        Ok(Response::new(ConnectResponse {
            responder_info: Some(addr.encode_to_vec()),
        }))
    }
}

/// A node manager with upstream's methods only, hosting server instances
/// as upstream's engines: a handshake service at the endpoint, the traffic
/// on another port.
#[derive(Default)]
struct MiniNode {
    servers: tokio::sync::Mutex<Vec<rpc::server::Running>>,
    ran: Mutex<bool>,
}

/// Its gRPC face.
struct NodeFace(Arc<MiniNode>);

#[tonic::async_trait]
impl DistBenchNodeManager for NodeFace {
    async fn configure_node(
        &self,
        request: Request<NodeServiceConfig>,
    ) -> Result<Response<ServiceEndpointMap>, Status> {
        let mut map = ServiceEndpointMap::default();
        for name in request.into_inner().services {
            let traffic = rpc::server::bind(SocketAddr::new(LOOPBACK, 0)).unwrap();
            let data = traffic.addr;
            let setup = rpc::server::bind(SocketAddr::new(LOOPBACK, 0)).unwrap();
            let endpoint = setup.addr;
            let mut servers = self.0.servers.lock().await;
            servers.push(rpc::server::spawn(
                tonic::transport::Server::builder().add_service(TrafficServer::new(Answer)),
                traffic,
            ));
            servers.push(rpc::server::spawn(
                tonic::transport::Server::builder()
                    .add_service(ConnectionSetupServer::new(Setup(data))),
                setup,
            ));
            map.service_endpoints.insert(
                name,
                ServiceEndpoint {
                    endpoint_address: Some(endpoint.to_string()),
                    hostname: Some("mini".into()),
                    attributes: Vec::new(),
                },
            );
        }
        Ok(Response::new(map))
    }

    async fn introduce_peers(
        &self,
        _request: Request<ServiceEndpointMap>,
    ) -> Result<Response<IntroducePeersResult>, Status> {
        Ok(Response::new(IntroducePeersResult {}))
    }

    async fn run_traffic(
        &self,
        _request: Request<RunTrafficRequest>,
    ) -> Result<Response<RunTrafficResponse>, Status> {
        // Only a server: nothing to run; answers at once, as upstream's.
        *self.0.ran.lock().unwrap() = true;
        Ok(Response::new(RunTrafficResponse { errors: Vec::new() }))
    }

    async fn get_traffic_result(
        &self,
        _request: Request<GetTrafficResultRequest>,
    ) -> Result<Response<GetTrafficResultResponse>, Status> {
        for s in self.0.servers.lock().await.drain(..) {
            let _ = s.shutdown().await;
        }
        Ok(Response::new(GetTrafficResultResponse::default()))
    }

    async fn cancel_traffic(
        &self,
        _request: Request<CancelTrafficRequest>,
    ) -> Result<Response<CancelTrafficResult>, Status> {
        Ok(Response::new(CancelTrafficResult {}))
    }

    async fn shutdown_node(
        &self,
        _request: Request<ShutdownNodeRequest>,
    ) -> Result<Response<ShutdownNodeResult>, Status> {
        Ok(Response::new(ShutdownNodeResult {}))
    }
}

#[test]
fn rackbench_sequencer_drives_a_node_manager_with_upstreams_protocol_only() {
    rt().block_on(async {
        let seq = cluster::start_sequencer(SocketAddr::new(LOOPBACK, 0)).unwrap();
        let seq_addr = seq.server.addr.to_string();
        // The real node manager, node0.
        let real = cluster::start_node_manager_with(
            &seq_addr,
            SocketAddr::new(LOOPBACK, 0),
            Addresses::all(LOOPBACK),
            &[],
            cluster::Registration {
                preassigned_node_id: Some(0),
                service_address: None,
            },
            distbench::engine::Process::new(),
        )
        .await
        .unwrap();
        // The minimal one registers as upstream's does: a gRPC target, no
        // control address; node1.
        let mini = Arc::new(MiniNode::default());
        let bound = rpc::server::bind(SocketAddr::new(LOOPBACK, 0)).unwrap();
        let port = bound.addr.port();
        let mini_server = rpc::server::spawn(
            tonic::transport::Server::builder()
                .add_service(DistBenchNodeManagerServer::new(NodeFace(mini.clone()))),
            bound,
        );
        let config = cluster::sequencer_client(&seq_addr)
            .await
            .unwrap()
            .register_node(NodeRegistration {
                hostname: Some("mini".into()),
                control_port: Some(i32::from(port)),
                service_address: Some(format!("ipv4:///127.0.0.1:{port}")),
                preassigned_node_id: Some(1),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(config.node_alias(), "node1");
        // The client runs 2 s while the minimal node, done at once, is
        // checked for liveness (every second) with upstream's protocol.
        let test = client_server(
            2,
            "node_service_bundles { key: 'node0' value { services: 'client/0' } }
             node_service_bundles { key: 'node1' value { services: 'server/0' } }",
        );
        let r: TestResult = seq.sequencer.run_test(&test).await.unwrap();
        assert!(*mini.ran.lock().unwrap());
        let (ok, failed) = successful(r.service_logs.as_ref().unwrap(), "client/0");
        assert!(ok > 100 && failed == 0, "{ok} successful, {failed} failed");
        let placement = r.placement.unwrap();
        assert!(
            placement.service_endpoints["server/0"]
                .endpoint_address()
                .starts_with("127.0.0.1:")
        );
        let _ = real.server.shutdown().await;
        let _ = mini_server.shutdown().await;
        let _ = seq.server.shutdown().await;
        tokio::time::sleep(Duration::from_millis(10)).await;
    });
}
