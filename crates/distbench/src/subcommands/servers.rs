//! The runners of the servers that wait for Ctrl-C: `test_sequencer`,
//! `node_manager` and `rpc_server`.

use super::addresses::{node_addresses, sequencer_addresses};
use super::cli::{NodeManagerArgs, RpcServerArgs, SequencerArgs, node_arguments};
use super::drive::wait_for_stop;
use super::record::{DistbenchRecord, NodeManagerRecord, SequencerRecord, measured};
use super::render::rpc_server_line;
use super::runtime;
use crate::cluster;
use harness::{Outcome, RunContext};
use std::net::SocketAddr;

/// `test_sequencer`.
pub fn run_sequencer(a: &SequencerArgs, ctx: &RunContext) -> anyhow::Result<Outcome> {
    crate::netif::set_prefer_ipv4(a.prefer_ipv4);
    let (bind, node_addrs) = sequencer_addresses(a)?;
    let rt = runtime()?;
    rt.block_on(async {
        let s =
            cluster::start_sequencer(SocketAddr::new(bind, a.port)).map_err(anyhow::Error::msg)?;
        let address = s.server.addr.to_string();
        eprintln!("test_sequencer listening on {address}");
        s.sequencer.expect_nodes(a.local_nodes);
        let mut local = Vec::new();
        // The local node managers reach the sequencer in this process.
        let seq_ip = if bind.is_unspecified() {
            rpc::server::LOOPBACK
        } else {
            bind
        };
        let seq_addr = SocketAddr::new(seq_ip, s.server.addr.port()).to_string();
        let process = crate::engine::Process::new();
        for i in 0..a.local_nodes {
            local.push(
                cluster::start_node_manager_with(
                    &seq_addr,
                    SocketAddr::new(node_addrs.listen, 0),
                    node_addrs,
                    &[],
                    cluster::Registration {
                        preassigned_node_id: i32::try_from(i).ok(),
                        service_address: None,
                    },
                    process.clone(),
                )
                .await
                .map_err(anyhow::Error::msg)?,
            );
        }
        if a.local_nodes > 0 {
            eprintln!(
                "test_sequencer: {} local node managers registered",
                a.local_nodes
            );
        }
        wait_for_stop(ctx, Some(s.sequencer.shutdown_signal())).await;
        let nodes = s.sequencer.node_count();
        for n in local {
            let _ = n.server.shutdown().await;
        }
        let _ = s.server.shutdown().await;
        Ok(measured(
            true,
            &DistbenchRecord::Sequencer(SequencerRecord {
                address,
                local_nodes: a.local_nodes,
                registered_nodes: nodes,
            }),
        ))
    })
}

/// `node_manager`.
pub fn run_node_manager(a: &NodeManagerArgs, ctx: &RunContext) -> anyhow::Result<Outcome> {
    crate::netif::set_prefer_ipv4(a.prefer_ipv4);
    let (preassigned, attrs) = node_arguments(&a.attributes)?;
    let (control_ip, addrs) = node_addresses(a)?;
    let rt = runtime()?;
    rt.block_on(async {
        let n = cluster::start_node_manager_with(
            &a.test_sequencer,
            SocketAddr::new(control_ip, a.port),
            addrs,
            &attrs,
            cluster::Registration {
                preassigned_node_id: preassigned,
                service_address: a.service_address.clone(),
            },
            crate::engine::Process::new(),
        )
        .await
        .map_err(anyhow::Error::msg)?;
        eprintln!(
            "node_manager {} registered with {}; control on {}",
            n.alias, a.test_sequencer, n.server.addr
        );
        let control_address = n.server.addr.to_string();
        let stopped_by_sequencer = wait_for_stop(ctx, Some(n.node.shutdown_signal())).await;
        let _ = n.server.shutdown().await;
        Ok(measured(
            true,
            &DistbenchRecord::NodeManager(NodeManagerRecord {
                node_alias: n.alias.clone(),
                test_sequencer: a.test_sequencer.clone(),
                control_address,
                shutdown_by_sequencer: stopped_by_sequencer,
            }),
        ))
    })
}

/// The one-RPC test an `rpc_server` serves.
pub fn rpc_server_test(response_size: i32) -> crate::proto::DistributedSystemDescription {
    use crate::proto::{
        ActionList, DistributedSystemDescription, PayloadSpec, RpcSpec, ServiceSpec,
    };
    DistributedSystemDescription {
        name: Some("rpc_server".into()),
        services: vec![
            ServiceSpec {
                name: Some("client".into()),
                count: Some(1),
                ..Default::default()
            },
            ServiceSpec {
                name: Some("server".into()),
                count: Some(1),
                ..Default::default()
            },
        ],
        payload_descriptions: vec![PayloadSpec {
            name: Some("response".into()),
            size: Some(response_size.into()),
            ..Default::default()
        }],
        rpc_descriptions: vec![RpcSpec {
            name: Some("rpc".into()),
            client: vec!["client".into()],
            server: Some("server".into()),
            response_payload_name: Some("response".into()),
            ..Default::default()
        }],
        action_lists: vec![ActionList {
            name: Some("rpc".into()),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// `rpc_server`.
pub fn run_rpc_server(a: &RpcServerArgs, ctx: &RunContext) -> anyhow::Result<Outcome> {
    use crate::engine::{Engine, driver, tables::Tables};
    let tables = std::sync::Arc::new(
        Tables::new(&rpc_server_test(a.response_size)).map_err(anyhow::Error::msg)?,
    );
    let rt = runtime()?;
    rt.block_on(async {
        let engine = std::sync::Arc::new(Engine::new(tables, 1, 0, crate::engine::Process::new()));
        let bound = rpc::server::bind_or_loopback(SocketAddr::new(a.bind, a.port))?;
        let addr = bound.addr;
        let router = tonic::transport::Server::builder()
            .add_service(driver::grpc_service(engine).map_err(anyhow::Error::msg)?);
        let server = rpc::server::spawn(router, bound);
        let address = addr.to_string();
        eprintln!("{}", rpc_server_line(&address, a.response_size));
        wait_for_stop(ctx, None).await;
        let _ = server.shutdown().await;
        Ok(measured(
            true,
            &DistbenchRecord::RpcServer {
                address,
                response_size: a.response_size,
            },
        ))
    })
}
