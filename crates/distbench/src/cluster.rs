//! Starting the control plane: a sequencer, node managers that register
//! with it, both in one process for one machine ([`LocalCluster`]), and the
//! `run_tests` client that sends a sequence one test at a time and keeps
//! every finished result.

use crate::Error;
use crate::engine::Process;
use crate::node_manager::{Addresses, NodeManager};
use crate::proto::dist_bench_test_sequencer_client::DistBenchTestSequencerClient;
use crate::proto::{
    Attribute, DistributedSystemDescription, NodeRegistration, TestResult, TestSequence,
};
use crate::sequencer::Sequencer;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::transport::{Channel, Endpoint};

/// How long a node manager keeps trying to reach its sequencer.
pub const REGISTRATION_TIMEOUT: Duration = Duration::from_secs(30);

/// Raises this process's open-file limit as far as it may go: every
/// instance keeps a connection to each peer it sends to, so a clique of n
/// instances in one process holds about 2 n (n - 1) sockets. Returns the
/// soft limit in force afterwards.
pub fn raise_fd_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit fill or read the struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 0;
        }
        let ceiling = std::fs::read_to_string("/proc/sys/fs/nr_open")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(lim.rlim_max)
            .min(1 << 20);
        // Root may raise the hard limit too; others go up to it.
        let want = libc::rlimit {
            rlim_cur: ceiling as libc::rlim_t,
            rlim_max: ceiling.max(lim.rlim_max) as libc::rlim_t,
        };
        if ceiling > lim.rlim_max && libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
            return ceiling;
        }
        let soft = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &soft) == 0 {
            return lim.rlim_max;
        }
        lim.rlim_cur
    }
}

/// A running sequencer.
pub struct SequencerServer {
    pub sequencer: Arc<Sequencer>,
    pub server: rpc::server::Running,
}

/// Serves a sequencer on `addr` (port 0 picks one).
pub fn start_sequencer(addr: SocketAddr) -> Result<SequencerServer, Error> {
    let sequencer = Sequencer::new();
    let bound = rpc::server::bind_or_loopback(addr)
        .map_err(|e| Error::Host(format!("test_sequencer: {e}")))?;
    let router = tonic::transport::Server::builder().add_service(sequencer.service());
    Ok(SequencerServer {
        server: rpc::server::spawn(router, bound),
        sequencer,
    })
}

/// A running node manager.
pub struct NodeManagerServer {
    pub node: Arc<NodeManager>,
    pub server: rpc::server::Running,
    pub alias: String,
}

/// Serves a node manager's control service on `control`, its engines as
/// `addrs` say, and registers it with the sequencer at `sequencer`,
/// retrying until [`REGISTRATION_TIMEOUT`].
pub async fn start_node_manager(
    sequencer: &str,
    control: SocketAddr,
    addrs: Addresses,
    attributes: &[(String, String)],
    process: Arc<Process>,
) -> Result<NodeManagerServer, Error> {
    start_node_manager_with(
        sequencer,
        control,
        addrs,
        attributes,
        Registration::default(),
        process,
    )
    .await
}

/// What a node manager asks of the sequencer beyond its address.
#[derive(Debug, Clone, Default)]
pub struct Registration {
    /// The node id it wants (`nodeN`).
    pub preassigned_node_id: Option<i32>,
    /// The gRPC target the sequencer dials instead of the one upstream's
    /// node manager derives (`--service_address`).
    pub service_address: Option<String>,
}

/// The registration upstream's node manager sends for a control service
/// listening on `listening` (port filled in): `control_ip` only when it
/// listens on one address, and always a `service_address`, the one the
/// sequencer dials: the one given, else `dns:///HOSTNAME:PORT` when it
/// listens on every interface, else `ipv4:///IP:PORT` (`ipv6:///[IP]:PORT`).
pub fn registration(
    hostname: &str,
    listening: SocketAddr,
    attributes: &[(String, String)],
    r: Registration,
) -> NodeRegistration {
    let specific = !listening.ip().is_unspecified();
    let service_address = match r.service_address.filter(|s| !s.is_empty()) {
        Some(s) => s,
        None if !specific => format!("dns:///{hostname}:{}", listening.port()),
        None if listening.is_ipv6() => format!("ipv6:///{listening}"),
        None => format!("ipv4:///{listening}"),
    };
    NodeRegistration {
        hostname: Some(hostname.to_string()),
        control_ip: specific.then(|| listening.ip().to_string()),
        control_port: Some(i32::from(listening.port())),
        attributes: attributes
            .iter()
            .map(|(k, v)| Attribute {
                name: Some(k.clone()),
                value: Some(v.clone()),
            })
            .collect(),
        service_address: Some(service_address),
        preassigned_node_id: Some(r.preassigned_node_id.unwrap_or(-1)),
    }
}

/// [`start_node_manager`] with a pre-assigned id or a service address.
pub async fn start_node_manager_with(
    sequencer: &str,
    control: SocketAddr,
    addrs: Addresses,
    attributes: &[(String, String)],
    registration_asked: Registration,
    process: Arc<Process>,
) -> Result<NodeManagerServer, Error> {
    raise_fd_limit();
    let hostname = hostname();
    let node = NodeManager::new(addrs, hostname.clone(), process);
    let bound = rpc::server::bind_or_loopback(control)
        .map_err(|e| Error::Host(format!("node_manager: {e}")))?;
    let addr = bound.addr;
    let router = tonic::transport::Server::builder().add_service(node.service());
    let server = rpc::server::spawn(router, bound);
    let reg = registration(&hostname, addr, attributes, registration_asked);
    node.set_attributes(reg.attributes.clone());
    let deadline = Instant::now() + REGISTRATION_TIMEOUT;
    let mut last_error: String;
    loop {
        match sequencer_client(sequencer).await {
            Ok(mut c) => match c.register_node(reg.clone()).await {
                Ok(cfg) => {
                    let cfg = cfg.into_inner();
                    node.set_identity(cfg.node_id(), cfg.node_alias());
                    return Ok(NodeManagerServer {
                        alias: cfg.node_alias().to_string(),
                        node,
                        server,
                    });
                }
                Err(s) if s.code() == tonic::Code::InvalidArgument => {
                    return Err(Error::Input(format!(
                        "the test sequencer refused the registration: {}",
                        s.message()
                    )));
                }
                Err(s) => last_error = s.message().to_string(),
            },
            Err(e) => last_error = e.to_string(),
        }
        if Instant::now() >= deadline {
            return Err(Error::Host(format!(
                "node_manager: could not register with the test sequencer at {sequencer} within {} s: {last_error}",
                REGISTRATION_TIMEOUT.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A client of the sequencer at `addr` (`host:port`).
pub async fn sequencer_client(addr: &str) -> Result<DistBenchTestSequencerClient<Channel>, Error> {
    let channel = Endpoint::from_shared(format!("http://{addr}"))
        .map_err(|e| Error::Input(format!("--test_sequencer={addr} is not host:port: {e}")))?
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .map_err(|e| {
            format!(
                "cannot reach the test sequencer at {addr}: {}",
                crate::engine::driver::error_chain(&e)
            )
        })
        .map_err(Error::Host)?;
    Ok(DistBenchTestSequencerClient::new(channel)
        .max_decoding_message_size(crate::engine::driver::MAX_MESSAGE_BYTES)
        .max_encoding_message_size(crate::engine::driver::MAX_MESSAGE_BYTES))
}

/// A sequencer and `n` node managers in this process, all on loopback.
pub struct LocalCluster {
    pub sequencer: SequencerServer,
    pub nodes: Vec<NodeManagerServer>,
}

impl LocalCluster {
    /// Starts the sequencer on `127.0.0.1:port` (0 picks one) and `n` node
    /// managers registered with it.
    pub async fn start(n: usize, port: u16) -> Result<LocalCluster, Error> {
        Self::start_with_attributes(&vec![Vec::new(); n], port).await
    }

    /// As [`LocalCluster::start`], node i registering with `attributes[i]`.
    pub async fn start_with_attributes(
        attributes: &[Vec<(String, String)>],
        port: u16,
    ) -> Result<LocalCluster, Error> {
        raise_fd_limit();
        let loopback = rpc::server::LOOPBACK;
        let sequencer = start_sequencer(SocketAddr::new(loopback, port))?;
        let addr = sequencer.server.addr.to_string();
        let mut nodes = Vec::with_capacity(attributes.len());
        // One process: upstream's overload callback cancels all its nodes.
        let process = Process::new();
        for attrs in attributes {
            nodes.push(
                start_node_manager(
                    &addr,
                    SocketAddr::new(loopback, 0),
                    Addresses::all(loopback),
                    attrs,
                    process.clone(),
                )
                .await?,
            );
        }
        Ok(LocalCluster { sequencer, nodes })
    }

    /// The sequencer's address.
    pub fn addr(&self) -> SocketAddr {
        self.sequencer.server.addr
    }

    /// Runs one test on the cluster's nodes.
    pub async fn run_test(&self, test: &DistributedSystemDescription) -> Result<TestResult, Error> {
        self.sequencer.sequencer.run_test(test).await.map_err(|e| {
            if e.invalid {
                Error::Input(e.message)
            } else {
                Error::Host(e.message)
            }
        })
    }

    /// Stops every server.
    pub async fn stop(self) {
        for n in self.nodes {
            let _ = n.server.shutdown().await;
        }
        let _ = self.sequencer.server.shutdown().await;
    }
}

/// Sends the tests of `seq` one at a time to the sequencer at `addr`,
/// handing each result to `on_result` as it arrives (so a failure later in
/// the sequence loses nothing). Stops at the first failing test.
pub async fn run_tests(
    addr: &str,
    seq: &TestSequence,
    mut on_result: impl FnMut(usize, &TestResult) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut client = sequencer_client(addr).await?;
    if seq.tests.is_empty() {
        // Nothing to run: checks the connection, and applies tests_setting
        // (shutdown_after_tests) as upstream.
        client
            .run_test_sequence(seq.clone())
            .await
            .map_err(|s| s.message().to_string())
            .map_err(Error::Host)?;
        return Ok(());
    }
    let last = seq.tests.len() - 1;
    for (i, test) in seq.tests.iter().enumerate() {
        // keep_instance_log goes with every test; shutdown_after_tests
        // with the last, so it takes effect after the whole sequence.
        let one = TestSequence {
            tests: vec![test.clone()],
            tests_setting: seq.tests_setting.map(|mut s| {
                if i != last {
                    s.shutdown_after_tests = None;
                }
                s
            }),
        };
        // The sequencer enforces test_timeout; past it plus a margin for
        // set-up and collection, the sequencer itself is taken as stuck.
        let limit = crate::sequencer::test_timeout(test)
            .map_err(|e| Error::Input(format!("test {i} '{}': {e}", test.name())))?;
        let mut req = tonic::Request::new(one);
        req.set_timeout(limit + Duration::from_secs(60));
        let results = client
            .run_test_sequence(req)
            .await
            .map_err(|s| match s.code() {
                tonic::Code::DeadlineExceeded => format!(
                    "test {i} '{}': the sequencer did not answer within the test's test_timeout \
                     ({} s) and a minute",
                    test.name(),
                    limit.as_secs()
                ),
                _ => format!("test {i} '{}': {}", test.name(), s.message()),
            })
            .map_err(Error::Host)?
            .into_inner();
        for r in &results.test_results {
            // The caller's own step (saving the result) failed.
            on_result(i, r)?;
        }
    }
    Ok(())
}

/// This machine's host name.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".to_string())
}
