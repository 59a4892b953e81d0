//! Traffic patterns: their parameters, the traffic alias that names them in
//! test names, and the services, RPCs, payloads and actions they produce.

use super::params::{Kind, Params, SYNCHRONIZATION_MODES, Spec, to_i32};
use super::{Environment, Error};
use crate::proto::{
    Action, ActionList, CdfPoint, DataPoint, DistributedSystemDescription, DistributionConfig,
    Iterations, OverloadLimits, PayloadSpec, PmfPoint, RpcSpec, ServiceSpec, action,
};
use crate::textproto;

/// Seconds the sequencer waits for results after a test's traffic ends
/// (`test_timeout` is the duration plus this).
const RESULTS_COLLECTION_TIMEOUT_S: i64 = 120;

/// A traffic pattern test_builder knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    /// Every node sends an RPC to every other node at a fixed interval.
    Clique,
    /// Closed-loop clients querying servers with many RPCs in flight.
    ClientServer,
    /// Clients query an index service, then a data service.
    Tripartite,
    /// A load balancer feeding roots that fan out to all leaves.
    MultiLevelRpc,
    /// `multi_level_rpc` with leaf responses of random size.
    VariableResponseMultiLevelRpc,
    /// A clique on an x-by-y grid, with a grid fan-out filter.
    Rectangular,
    /// A clique sending messages sized as one of Homa's workloads (the
    /// `cp_node` experiments), which needs Homa's `dist_to_proto` tool.
    HomaCpNode,
}

/// Every pattern, in the order help lists them.
pub const ALL: [Pattern; 7] = [
    Pattern::Clique,
    Pattern::ClientServer,
    Pattern::Tripartite,
    Pattern::MultiLevelRpc,
    Pattern::VariableResponseMultiLevelRpc,
    Pattern::Rectangular,
    Pattern::HomaCpNode,
];

const fn int(name: &'static str, default: &'static str, min: u64, help: &'static str) -> Spec {
    Spec {
        name,
        default,
        kind: Kind::Int { min },
        help,
    }
}

const fn sync_mode(default: &'static str) -> Spec {
    Spec {
        name: "synchronization_mode",
        default,
        kind: Kind::Choice(SYNCHRONIZATION_MODES),
        help: "open-loop interval distribution",
    }
}

const REQUEST_SIZE: Spec = int("request_size", "1024", 0, "request payload bytes");
const RESPONSE_SIZE: Spec = int("response_size", "1024", 0, "response payload bytes");

const CLIQUE: &[Spec] = &[
    int(
        "rpc_interval_us",
        "16000",
        100,
        "interval between a node's bursts",
    ),
    int("node_count", "10", 2, "nodes in the clique"),
    sync_mode("sync_burst"),
    REQUEST_SIZE,
    RESPONSE_SIZE,
];

const CLIENT_SERVER: &[Spec] = &[
    int("parallel_queries", "100", 1, "RPCs in flight per client"),
    int("client_count", "1", 1, "client instances"),
    int("server_count", "1", 1, "server instances"),
];

const TRIPARTITE: &[Spec] = &[
    int("client_count", "1", 1, "client instances"),
    int("index_count", "1", 1, "index server instances"),
    int("data_count", "10", 1, "data server instances"),
];

const MULTI_LEVEL_RPC: &[Spec] = &[
    int(
        "qps",
        "10000",
        1,
        "root queries per second from the load balancer",
    ),
    int("root_count", "4", 1, "root instances"),
    int("leaf_count", "20", 1, "leaf instances"),
];

const VARIABLE_RESPONSE: &[Spec] = &[
    int(
        "qps",
        "10000",
        1,
        "root queries per second from the load balancer",
    ),
    int("root_count", "4", 1, "root instances"),
    int("leaf_count", "20", 1, "leaf instances"),
    int(
        "exact_size",
        "",
        1,
        "leaf response bytes, instead of lower_size and upper_size",
    ),
    int(
        "lower_size",
        "",
        1,
        "smallest leaf response bytes (default 1024 unless exact_size is given)",
    ),
    int(
        "upper_size",
        "",
        1,
        "largest leaf response bytes (default 64000 unless exact_size is given)",
    ),
];

const RECTANGULAR: &[Spec] = &[
    int(
        "rpc_interval_us",
        "100000",
        100,
        "interval between a node's bursts",
    ),
    int("x_size", "5", 1, "grid width"),
    int("y_size", "3", 1, "grid height"),
    sync_mode("sync_burst"),
    REQUEST_SIZE,
    RESPONSE_SIZE,
    Spec {
        name: "fanout_filter",
        default: "ring_x",
        kind: Kind::Text,
        help: "which grid nodes each node sends to (same_x, ring_y, ...)",
    },
    int(
        "tracing_interval",
        "0",
        0,
        "trace every Nth RPC; 0 for none",
    ),
];

const HOMA_CP_NODE: &[Spec] = &[
    Spec {
        name: "gbps",
        default: "1",
        kind: Kind::Positive,
        help: "offered load per node in Gbit/s",
    },
    int("node_count", "10", 2, "nodes in the clique"),
    sync_mode("exponential"),
    Spec {
        name: "workload",
        default: "w5",
        kind: Kind::Text,
        help: "Homa workload (w1 .. w5), or a fixed message size",
    },
    int(
        "max_message_length",
        "1000000",
        1,
        "longer messages are truncated to this",
    ),
    Spec {
        name: "min_bucket_frac",
        default: "0.0025",
        kind: Kind::Positive,
        help: "smallest CDF step kept when merging buckets",
    },
    Spec {
        name: "max_size_ratio",
        default: "1.2",
        kind: Kind::Positive,
        help: "largest size ratio between merged buckets",
    },
];

impl Pattern {
    /// The pattern's name in configuration strings and attributes.
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Clique => "clique",
            Pattern::ClientServer => "client_server",
            Pattern::Tripartite => "tripartite",
            Pattern::MultiLevelRpc => "multi_level_rpc",
            Pattern::VariableResponseMultiLevelRpc => "variable_response_multi_level_rpc",
            Pattern::Rectangular => "rectangular",
            Pattern::HomaCpNode => "homa_cp_node",
        }
    }

    /// The pattern named `name`, if any.
    pub fn from_name(name: &str) -> Option<Pattern> {
        ALL.into_iter().find(|p| p.name() == name)
    }

    /// The pattern's parameters.
    pub fn specs(self) -> &'static [Spec] {
        match self {
            Pattern::Clique => CLIQUE,
            Pattern::ClientServer => CLIENT_SERVER,
            Pattern::Tripartite => TRIPARTITE,
            Pattern::MultiLevelRpc => MULTI_LEVEL_RPC,
            Pattern::VariableResponseMultiLevelRpc => VARIABLE_RESPONSE,
            Pattern::Rectangular => RECTANGULAR,
            Pattern::HomaCpNode => HOMA_CP_NODE,
        }
    }

    /// Builds the test (without attributes and driver options) from `p`,
    /// whose defaults are applied and whose `protocol_alias` is set; sets
    /// `traffic_pattern`, `traffic_alias`, `test_name` and `test_timeout`.
    pub fn build(
        self,
        p: &mut Params,
        env: &Environment,
    ) -> Result<DistributedSystemDescription, Error> {
        let duration = p.int("test_duration")?;
        p.set(
            "test_timeout",
            (duration + RESULTS_COLLECTION_TIMEOUT_S).to_string(),
        );
        let max_duration_us = to_i32(duration.saturating_mul(1_000_000), "test_duration (in µs)")?;
        let protocol_alias = p.text("protocol_alias").to_string();
        let (alias, name, mut test) = match self {
            Pattern::Clique => clique(p, max_duration_us)?,
            Pattern::Rectangular => rectangular(p, max_duration_us)?,
            Pattern::ClientServer => client_server(p, max_duration_us)?,
            Pattern::Tripartite => tripartite(p, max_duration_us)?,
            Pattern::MultiLevelRpc => multi_level_rpc(p, max_duration_us)?,
            Pattern::VariableResponseMultiLevelRpc => {
                variable_response(p, max_duration_us, &protocol_alias)?
            }
            Pattern::HomaCpNode => homa_cp_node(p, max_duration_us, env)?,
        };
        let test_name = name.unwrap_or_else(|| format!("{alias}-{protocol_alias}"));
        test.name = Some(test_name.clone());
        p.set("traffic_pattern", self.name());
        p.set("traffic_alias", alias);
        p.set("test_name", test_name);
        Ok(test)
    }
}

/// A traffic alias, a test name when it is not `ALIAS-PROTOCOL_ALIAS`, and
/// the test.
type Built = (String, Option<String>, DistributedSystemDescription);

fn service(name: &str, count: i32) -> ServiceSpec {
    ServiceSpec {
        name: Some(name.into()),
        count: Some(count),
        ..Default::default()
    }
}

fn payload(name: &str, size: i32) -> PayloadSpec {
    PayloadSpec {
        name: Some(name.into()),
        size: Some(size.into()),
        ..Default::default()
    }
}

fn rpc(name: &str, client: &str, server: &str) -> RpcSpec {
    RpcSpec {
        name: Some(name.into()),
        client: vec![client.into()],
        server: Some(server.into()),
        ..Default::default()
    }
}

/// An RPC with fixed request and response payloads.
fn rpc_with_payloads(
    name: &str,
    client: &str,
    server: &str,
    request: &str,
    response: &str,
) -> RpcSpec {
    RpcSpec {
        request_payload_name: Some(request.into()),
        response_payload_name: Some(response.into()),
        ..rpc(name, client, server)
    }
}

fn action_list(name: &str, actions: &[&str]) -> ActionList {
    ActionList {
        name: Some(name.into()),
        action_names: actions.iter().map(|a| a.to_string()).collect(),
        ..Default::default()
    }
}

fn rpc_action(name: &str, rpc_name: &str) -> Action {
    Action {
        name: Some(name.into()),
        action: Some(action::Action::RpcName(rpc_name.into())),
        ..Default::default()
    }
}

/// Open-loop iterations: `interval_ns` apart, drawn from `distribution`.
fn open_loop(
    max_duration_us: i32,
    interval_ns: i64,
    distribution: Option<&str>,
    warmup: i64,
) -> Iterations {
    Iterations {
        max_duration_us: Some(max_duration_us),
        open_loop_interval_ns: Some(interval_ns),
        open_loop_interval_distribution: distribution.map(str::to_string),
        warmup_iterations: Some(warmup),
        ..Default::default()
    }
}

/// The body shared by clique and rectangular: every node sends `QUERY`
/// from its own action list at a fixed interval; the handler does nothing.
fn burst_clique(
    pattern: &str,
    p: &Params,
    max_duration_us: i32,
    service: ServiceSpec,
) -> Result<DistributedSystemDescription, Error> {
    let interval_us = p.int("rpc_interval_us")?;
    let queries = format!("{pattern}_queries");
    let query = format!("{pattern}_query");
    let mut send = rpc_action(&queries, &query);
    send.iterations = Some(open_loop(
        max_duration_us,
        interval_us * 1000,
        Some(p.text("synchronization_mode")),
        3_000_000 / interval_us,
    ));
    Ok(DistributedSystemDescription {
        services: vec![service],
        action_lists: vec![action_list(pattern, &[&queries]), action_list(&query, &[])],
        actions: vec![send],
        payload_descriptions: vec![
            payload("request_payload", p.int32("request_size")?),
            payload("response_payload", p.int32("response_size")?),
        ],
        rpc_descriptions: vec![rpc_with_payloads(
            &query,
            pattern,
            pattern,
            "request_payload",
            "response_payload",
        )],
        ..Default::default()
    })
}

fn clique(p: &Params, max_duration_us: i32) -> Result<Built, Error> {
    let alias = format!(
        "clique_{}_{}x{}x{}x{}",
        p.text("synchronization_mode"),
        p.text("node_count"),
        p.text("rpc_interval_us"),
        p.text("request_size"),
        p.text("response_size"),
    );
    let mut test = burst_clique(
        "clique",
        p,
        max_duration_us,
        service("clique", p.int32("node_count")?),
    )?;
    test.rpc_descriptions[0].fanout_filter = Some("all".into());
    Ok((alias, None, test))
}

fn rectangular(p: &Params, max_duration_us: i32) -> Result<Built, Error> {
    let (x, y) = (p.int32("x_size")?, p.int32("y_size")?);
    let nodes = i64::from(x) * i64::from(y);
    if nodes < 2 {
        return Err(Error::BadValue {
            name: "x_size * y_size".into(),
            value: nodes.to_string(),
            config: String::new(),
            expected: "at least 2 nodes".into(),
        });
    }
    let fanout = p.text("fanout_filter").to_string();
    let alias = format!(
        "rectangular_{fanout}_{}_{x}x{y}x{}x{}x{}",
        p.text("synchronization_mode"),
        p.text("rpc_interval_us"),
        p.text("request_size"),
        p.text("response_size"),
    );
    let grid = ServiceSpec {
        x_size: Some(x),
        y_size: Some(y),
        ..service("rectangular", to_i32(nodes, "x_size * y_size")?)
    };
    let mut test = burst_clique("rectangular", p, max_duration_us, grid)?;
    let query = &mut test.rpc_descriptions[0];
    query.fanout_filter = Some(fanout);
    query.tracing_interval = Some(p.int32("tracing_interval")?);
    Ok((alias, None, test))
}

fn client_server(p: &Params, max_duration_us: i32) -> Result<Built, Error> {
    let alias = format!(
        "client_server_{}x{}x{}",
        p.text("client_count"),
        p.text("server_count"),
        p.text("parallel_queries"),
    );
    let mut run = rpc_action("run_queries", "client_server_rpc");
    run.iterations = Some(Iterations {
        max_duration_us: Some(max_duration_us),
        max_parallel_iterations: Some(p.int("parallel_queries")?),
        warmup_iterations: Some(1000),
        ..Default::default()
    });
    let test = DistributedSystemDescription {
        services: vec![
            service("client", p.int32("client_count")?),
            service("server", p.int32("server_count")?),
        ],
        rpc_descriptions: vec![rpc_with_payloads(
            "client_server_rpc",
            "client",
            "server",
            "request_payload",
            "response_payload",
        )],
        payload_descriptions: vec![
            payload("request_payload", 196),
            payload("response_payload", 262_144),
        ],
        action_lists: vec![
            action_list("client", &["run_queries"]),
            action_list("client_server_rpc", &[]),
        ],
        actions: vec![run],
        ..Default::default()
    };
    Ok((alias, None, test))
}

fn tripartite(p: &Params, max_duration_us: i32) -> Result<Built, Error> {
    let alias = format!(
        "tripartite_{}x{}x{}",
        p.text("client_count"),
        p.text("index_count"),
        p.text("data_count"),
    );
    let many = Action {
        name: Some("client_do_many_queries".into()),
        iterations: Some(Iterations {
            max_duration_us: Some(max_duration_us),
            warmup_iterations: Some(1000),
            ..Default::default()
        }),
        action: Some(action::Action::ActionListName("client_do_one_query".into())),
        ..Default::default()
    };
    let mut query_data = rpc_action("client_querydata", "client_data_rpc");
    query_data.dependencies = vec!["client_queryindex".into()];
    let test = DistributedSystemDescription {
        services: vec![
            service("client", p.int32("client_count")?),
            service("index", p.int32("index_count")?),
            service("data", p.int32("data_count")?),
        ],
        rpc_descriptions: vec![
            rpc_with_payloads(
                "client_index_rpc",
                "client",
                "index",
                "index_request_payload",
                "index_response_payload",
            ),
            rpc_with_payloads(
                "client_data_rpc",
                "client",
                "data",
                "data_request_payload",
                "data_response_payload",
            ),
        ],
        payload_descriptions: vec![
            payload("index_request_payload", 196),
            payload("index_response_payload", 1024),
            payload("data_request_payload", 64),
            payload("data_response_payload", 512),
        ],
        action_lists: vec![
            action_list("client", &["client_do_many_queries"]),
            action_list(
                "client_do_one_query",
                &["client_queryindex", "client_querydata"],
            ),
            action_list("client_index_rpc", &[]),
            action_list("client_data_rpc", &[]),
        ],
        actions: vec![
            many,
            rpc_action("client_queryindex", "client_index_rpc"),
            query_data,
        ],
        ..Default::default()
    };
    Ok((alias, None, test))
}

/// The load balancer -> roots -> all leaves tree shared by both multi-level
/// patterns; `distribution` is the open-loop distribution of root queries.
fn multi_level_tree(
    p: &Params,
    max_duration_us: i32,
    distribution: Option<&str>,
) -> Result<DistributedSystemDescription, Error> {
    let qps = p.int("qps")?;
    let mut root_queries = rpc_action("do_closed_loop_root_queries", "root_query");
    root_queries.iterations = Some(open_loop(
        max_duration_us,
        1_000_000_000 / qps,
        distribution,
        qps.saturating_mul(3),
    ));
    let mut lb = action_list("load_balancer", &["do_closed_loop_root_queries"]);
    lb.max_rpc_samples = Some(10_000_000);
    let mut root = action_list("root_query", &["root_query_fanout"]);
    root.max_rpc_samples = Some(256);
    let mut to_root = rpc_with_payloads(
        "root_query",
        "load_balancer",
        "root",
        "root_request_payload",
        "root_response_payload",
    );
    to_root.fanout_filter = Some("round_robin".into());
    let mut to_leaf = rpc("leaf_query", "root", "leaf");
    to_leaf.fanout_filter = Some("all".into());
    Ok(DistributedSystemDescription {
        services: vec![
            service("load_balancer", 1),
            service("root", p.int32("root_count")?),
            service("leaf", p.int32("leaf_count")?),
        ],
        action_lists: vec![lb, root, action_list("leaf_query", &[])],
        actions: vec![root_queries, rpc_action("root_query_fanout", "leaf_query")],
        rpc_descriptions: vec![to_root, to_leaf],
        payload_descriptions: vec![
            payload("root_request_payload", 1024),
            payload("root_response_payload", 1024),
        ],
        ..Default::default()
    })
}

fn multi_level_rpc(p: &Params, max_duration_us: i32) -> Result<Built, Error> {
    let alias = format!(
        "multi_level_rpc_{}x{}x{}",
        p.text("root_count"),
        p.text("leaf_count"),
        p.text("qps"),
    );
    let mut test = multi_level_tree(p, max_duration_us, None)?;
    let leaf = &mut test.rpc_descriptions[1];
    leaf.request_payload_name = Some("leaf_request_payload".into());
    leaf.response_payload_name = Some("leaf_response_payload".into());
    test.payload_descriptions.extend([
        payload("leaf_request_payload", 1024),
        payload("leaf_response_payload", 1024),
    ]);
    Ok((alias, None, test))
}

fn variable_response(
    p: &mut Params,
    max_duration_us: i32,
    protocol_alias: &str,
) -> Result<Built, Error> {
    let (lower, upper) = if p.get("exact_size").is_some_and(|v| !v.is_empty()) {
        if p.was_given("lower_size") || p.was_given("upper_size") {
            return Err(Error::Conflict(
                "variable_response_multi_level_rpc takes exact_size, or lower_size and \
                 upper_size, not both"
                    .into(),
            ));
        }
        let exact = p.int("exact_size")?;
        (exact, exact)
    } else {
        for (key, default) in [("lower_size", "1024"), ("upper_size", "64000")] {
            if p.get(key).is_none() {
                p.set(key, default);
            }
        }
        (p.int("lower_size")?, p.int("upper_size")?)
    };
    let alias = format!(
        "variable_response_multi_level_rpc_{}x{}x{}",
        p.text("root_count"),
        p.text("leaf_count"),
        p.text("qps"),
    );
    let name = format!("{alias}-{protocol_alias}-{lower}-{upper}");
    let mut test = multi_level_tree(p, max_duration_us, Some("exponential"))?;
    test.rpc_descriptions[1].distribution_config_name = Some("leaf_payload".into());
    test.overload_limits = Some(OverloadLimits {
        max_threads: Some(10_000),
        max_pending_rpcs: None,
    });
    test.distribution_config = vec![DistributionConfig {
        name: Some("leaf_payload".into()),
        field_names: vec![
            "request_payload_size".into(),
            "response_payload_size".into(),
        ],
        pmf_points: vec![PmfPoint {
            pmf: Some(1.0),
            data_points: vec![
                DataPoint {
                    exact: Some(1024),
                    ..Default::default()
                },
                DataPoint {
                    lower: Some(lower),
                    upper: Some(upper),
                    ..Default::default()
                },
            ],
        }],
        ..Default::default()
    }];
    Ok((alias, Some(name), test))
}

fn homa_cp_node(p: &Params, max_duration_us: i32, env: &Environment) -> Result<Built, Error> {
    let (cdf_points, interval_ns) = dist_to_proto(p, env)?;
    let mode = p.text("synchronization_mode").to_string();
    let alias = format!(
        "homa_cp_node_{mode}_{}x{}x{}x{}x{}x{}",
        p.text("node_count"),
        p.text("gbps"),
        p.text("workload"),
        p.text("max_message_length"),
        p.text("min_bucket_frac"),
        p.text("max_size_ratio"),
    );
    let mut send = rpc_action("clique_queries", "clique_query");
    send.iterations = Some(open_loop(max_duration_us, interval_ns, Some(&mode), 1500));
    let mut query = rpc("clique_query", "clique", "clique");
    query.fanout_filter = Some("random".into());
    query.distribution_config_name = Some("dist_config".into());
    let test = DistributedSystemDescription {
        services: vec![service("clique", p.int32("node_count")?)],
        action_lists: vec![
            action_list("clique", &["clique_queries"]),
            action_list("clique_query", &[]),
        ],
        actions: vec![send],
        rpc_descriptions: vec![query],
        overload_limits: Some(OverloadLimits {
            max_threads: None,
            max_pending_rpcs: Some(5000),
        }),
        distribution_config: vec![DistributionConfig {
            name: Some("dist_config".into()),
            field_names: vec!["payload_size".into()],
            cdf_points,
            ..Default::default()
        }],
        ..Default::default()
    };
    Ok((alias, None, test))
}

/// Runs Homa's `dist_to_proto WORKLOAD MAX_LEN MIN_BUCKET_FRAC
/// MAX_SIZE_RATIO GBPS`, which prints the workload's (merged) message-size
/// CDF as `cdf_points { .. }` lines on stdout and the mean interval between
/// messages at that load, in ns, on stderr.
fn dist_to_proto(p: &Params, env: &Environment) -> Result<(Vec<CdfPoint>, i64), Error> {
    let Some(tool) = &env.dist_to_proto else {
        return Err(Error::MissingTool(
            "homa_cp_node needs Homa's dist_to_proto tool (HomaModule util/dist_to_proto) \
             to compute the workload's message-size CDF; rackbench does not bundle Homa's \
             workload tables. Put dist_to_proto on PATH or set DIST_TO_PROTO to its path"
                .into(),
        ));
    };
    let args = [
        "workload",
        "max_message_length",
        "min_bucket_frac",
        "max_size_ratio",
        "gbps",
    ]
    .map(|k| p.text(k).to_string());
    let out = std::process::Command::new(tool)
        .args(&args)
        .output()
        .map_err(|e| Error::MissingTool(format!("cannot run {}: {e}", tool.display())))?;
    let command = format!("{} {}", tool.display(), args.join(" "));
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if !out.status.success() {
        return Err(Error::Tool(format!(
            "{command} failed ({}): {stderr}",
            out.status
        )));
    }
    let interval_ns = stderr
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 1.0 && v.fract() == 0.0)
        .map(|v| v as i64)
        .ok_or_else(|| {
            Error::Tool(format!(
                "{command} printed '{stderr}' on stderr, not an interval in ns"
            ))
        })?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let dist: DistributionConfig = textproto::parse(&stdout, &command)
        .map_err(|e| Error::Tool(format!("the CDF points of {e}")))?;
    if dist.cdf_points.is_empty() {
        return Err(Error::Tool(format!("{command} printed no cdf_points")));
    }
    Ok((dist.cdf_points, interval_ns))
}
