//! What `check_test` accepts, refuses and warns about, against upstream
//! Distbench (google/distbench 8a5cfae): node service bundles as upstream's
//! `simple_test.sh` uses them, activities, protocol driver settings, and
//! the engine's defaults.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

use distbench::check::{self, Kind, Severity};
use distbench::cluster::LocalCluster;
use distbench::engine::fanout::Fanout;
use distbench::engine::tables::{
    Activity, ActivityState, DEFAULT_MAX_PENDING_RPCS, OpenLoop, Size, Tables,
};
use distbench::placement::{self, Node};
use distbench::proto::{DistributedSystemDescription, TestSequence};
use std::time::Duration;

fn parse(text: &str) -> DistributedSystemDescription {
    let seq: TestSequence = distbench::textproto::parse_test_sequence(text, "test.config").unwrap();
    seq.tests[0].clone()
}

fn messages(problems: &[check::Problem]) -> Vec<String> {
    problems.iter().map(ToString::to_string).collect()
}

/// The test of upstream's `simple_test.sh`: a load balancer, a root and
/// three leaves, all bundled on node0, the load balancer querying the root
/// closed loop and then open loop (sync_burst), the root fanning out to
/// every leaf. Its structure is upstream's; its open-loop phase is
/// shortened from 3 s every 1 s to 0.6 s every 0.2 s.
const SIMPLE_TEST: &str = r#"
tests {
  services { name: "load_balancer" count: 1 }
  services { name: "root" count: 1 }
  services { name: "leaf" count: 3 }
  node_service_bundles {
    key: "node0"
    value: {
      services: "load_balancer/0"
      services: "root/0"
      services: "leaf/0"
      services: "leaf/1"
      services: "leaf/2"
    }
  }
  action_lists {
    name: "load_balancer"
    action_names: "load_balancer/do_closed_loop_root_queries"
    action_names: "load_balancer/do_closed_loop_root_queries_again"
  }
  actions {
    name: "load_balancer/do_closed_loop_root_queries"
    iterations { max_iteration_count: 3 max_parallel_iterations: 3 }
    rpc_name: "root_query"
  }
  actions {
    name: "load_balancer/do_closed_loop_root_queries_again"
    dependencies: "load_balancer/do_closed_loop_root_queries"
    iterations {
      max_duration_us: 600000
      open_loop_interval_ns: 200000000
      open_loop_interval_distribution: "sync_burst"
    }
    action_list_name: "load_balancer/root_query_al"
  }
  action_lists {
    name: "load_balancer/root_query_al"
    action_names: "load_balancer/do_closed_loop_root_queries"
  }
  rpc_descriptions {
    name: "root_query"
    client: "load_balancer"
    server: "root"
    fanout_filter: "round_robin"
    tracing_interval: 2
  }
  action_lists { name: "root_query" action_names: "root/root_query_fanout" }
  actions { name: "root/root_query_fanout" rpc_name: "leaf_query" }
  rpc_descriptions {
    name: "leaf_query"
    client: "root"
    server: "leaf"
    fanout_filter: "all"
    tracing_interval: 2
  }
  action_lists { name: "leaf_query" }
}
"#;

#[test]
fn simple_test_bundle_passes_check_and_places_on_node0() {
    let test = parse(SIMPLE_TEST);
    let seq = TestSequence {
        tests: vec![test.clone()],
        tests_setting: None,
    };
    assert_eq!(check::validate(&seq, "simple_test"), Ok(()));
    assert!(check::sequence_warnings(&seq).is_empty());
    // One registered node manager: everything on node0, as upstream.
    let p = placement::place(&test, &[Node::numbered(0)]).unwrap();
    assert_eq!(
        p["node0"],
        ["leaf/0", "leaf/1", "leaf/2", "load_balancer/0", "root/0"]
    );
    // More nodes: the bundle still holds everything and the others idle.
    let p = placement::place(&test, &(0..3).map(Node::numbered).collect::<Vec<_>>()).unwrap();
    assert_eq!(p["node0"].len(), 5);
    assert!(p["node1"].is_empty() && p["node2"].is_empty());
    // No node0 registered: refused as upstream ("Node node0 was not found").
    let err = placement::place(&test, &[Node::numbered(1)]).unwrap_err();
    assert!(
        err.to_string().contains("node 'node0' was not found"),
        "{err}"
    );
}

/// Upstream's simple_test runs on one node manager: every instance in one
/// process, the load balancer's queries reaching the root and the root's
/// fan-out reaching all three leaves.
#[test]
fn simple_test_runs_on_one_node_manager() {
    let test = parse(SIMPLE_TEST);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let r = rt
        .block_on(async {
            let c = LocalCluster::start(1, 0).await.unwrap();
            let r = c.run_test(&test).await;
            c.stop().await;
            r
        })
        .unwrap();
    let endpoints = &r.placement.as_ref().unwrap().service_endpoints;
    let mut placed: Vec<&String> = endpoints.keys().collect();
    placed.sort();
    assert_eq!(
        placed,
        ["leaf/0", "leaf/1", "leaf/2", "load_balancer/0", "root/0"]
    );
    let logs = &r.service_logs.as_ref().unwrap().instance_logs;
    let peers = |client: &str| -> Vec<String> {
        let mut p: Vec<String> = logs[client]
            .peer_logs
            .iter()
            .filter(|(_, l)| {
                l.rpc_logs.values().any(|r| {
                    assert!(r.failed_rpc_samples.is_empty(), "{client}: failed RPCs");
                    !r.successful_rpc_samples.is_empty()
                })
            })
            .map(|(k, _)| k.clone())
            .collect();
        p.sort();
        p
    };
    assert_eq!(peers("load_balancer/0"), ["root/0"]);
    assert_eq!(peers("root/0"), ["leaf/0", "leaf/1", "leaf/2"]);
}

#[test]
fn bad_bundles_name_the_bundle_and_the_entry() {
    let test = parse(
        r#"tests {
  services { name: "load_balancer" count: 1 }
  services { name: "leaf" count: 3 }
  services { name: "grid" x_size: 2 y_size: 2 }
  node_service_bundles { key: "node0" value: { services: ["load_balancer", "leaf/3", "leaf/0"] } }
  node_service_bundles { key: "node1" value: { services: ["ghost/0", "leaf/0", "grid/1/1", "grid/1"] } }
  node_service_bundles { key: "server1" value: { services: ["leaf/01"] } }
  node_service_bundles { key: "node01" value: { } }
  action_lists { name: "load_balancer" }
}"#,
    );
    let problems = check::check_test(0, &test);
    assert_eq!(
        messages(&problems),
        [
            "test 0: node_service_bundles 'node0': services[0]: 'load_balancer' is a service, not \
             a service instance: bundles list instances (load_balancer/0)",
            "test 0: node_service_bundles 'node0': services[1]: 'leaf/3' is not an instance of \
             service 'leaf' (its instances: leaf/0 .. leaf/2)",
            "test 0: node_service_bundles 'node01': key: 'node01' is not a node manager alias: \
             the test sequencer names node managers node0, node1, ... after their node ids",
            "test 0: node_service_bundles 'node1': services[0]: unknown service instance \
             'ghost/0': no service is named 'ghost' (instances are named SERVICE/INDEX, or \
             SERVICE/X/Y[/Z] on a grid)",
            "test 0: node_service_bundles 'node1': services[1]: service instance 'leaf/0' is \
             already bundled on 'node0'; an instance can be bundled only once",
            "test 0: node_service_bundles 'node1': services[3]: 'grid/1' is not an instance of \
             service 'grid' (its instances: grid/0/0 .. grid/1/1)",
            "test 0: node_service_bundles 'server1': key: 'server1' is not a node manager \
             alias: the test sequencer names node managers node0, node1, ... after their node \
             ids",
            "test 0: node_service_bundles 'server1': services[0]: 'leaf/01' is not an instance \
             of service 'leaf' (its instances: leaf/0 .. leaf/2)",
        ]
    );
    assert!(
        problems
            .iter()
            .all(|p| p.kind.severity() == Severity::Invalid)
    );
}

const ACTIVITY_BASE: &str = r#"
  services { name: "c" count: 1 }
  action_lists { name: "c" action_names: "work" }
  actions { name: "work" activity_config_name: "a" iterations { max_iteration_count: 1 } }
"#;

fn with_activity(settings: &str) -> DistributedSystemDescription {
    parse(&format!(
        "tests {{ {ACTIVITY_BASE} activity_configs {{ name: 'a' {settings} }} }}"
    ))
}

fn func(f: &str) -> String {
    format!("activity_settings {{ name: 'activity_func' string_value: '{f}' }}")
}

/// One validation for check_test and the engine: whatever check_test
/// says about an activity config is exactly what the engine's tables
/// refuse it with.
#[test]
fn activity_validation_is_shared_by_check_test_and_the_engine() {
    for (settings, problem) in [
        (func("Nap"), "activity_func: unknown activity 'Nap'"),
        (String::new(), "activity_func: missing"),
        (
            format!(
                "{} activity_settings {{ name: 'array_size' int64_value: 0 }}",
                func("ConsumeCpu")
            ),
            "array_size: must be a positive integer, got 0",
        ),
        (
            format!(
                "{} activity_settings {{ name: 'array_reads_per_iteration' int64_value: -1 }}",
                func("PolluteDataCache")
            ),
            "array_reads_per_iteration: must be a positive integer, got -1",
        ),
        (func("SleepFor"), "duration_us: required by SleepFor"),
        (
            format!(
                "{} activity_settings {{ name: 'duration_us' int64_value: 0 }}",
                func("SpinFor")
            ),
            "duration_us: must be a positive integer, got 0",
        ),
    ] {
        let test = with_activity(&settings);
        let problems = check::check_test(0, &test);
        assert_eq!(problems.len(), 1, "{settings}: {problems:?}");
        assert_eq!(problems[0].kind, Kind::BadActivity);
        assert_eq!(problems[0].location, "activity_configs 'a'");
        assert!(problems[0].message.starts_with(problem), "{problems:?}");
        let err = Tables::new(&test).unwrap_err().to_string();
        assert_eq!(err, format!("activity config 'a': {}", problems[0].message));
    }
}

/// Upstream's activity defaults, and the work one iteration does.
#[test]
fn activity_defaults_are_upstreams() {
    for (f, expected) in [
        ("ConsumeCpu", Activity::ConsumeCpu { array_size: 1000 }),
        (
            "PolluteDataCache",
            Activity::PolluteDataCache {
                array_size: 2_000_000,
                reads: 1000,
            },
        ),
        (
            "PolluteInstructionCache",
            Activity::PolluteInstructionCache { calls: 1000 },
        ),
    ] {
        let t = Tables::new(&with_activity(&func(f))).unwrap();
        assert_eq!(t.activities[0].1, expected, "{f}");
    }
    // The data cache array is filled once; iterations only read and
    // increment it, so the sum of two iterations' reads grows.
    let mut s = ActivityState::new(&Activity::PolluteDataCache {
        array_size: 4,
        reads: 1000,
    });
    let first = s.iterate();
    let second = s.iterate();
    assert!(second > first, "{first} then {second}");
    let mut spin = ActivityState::new(&Activity::SpinFor {
        duration: Duration::from_millis(2),
    });
    let start = std::time::Instant::now();
    spin.iterate();
    assert!(start.elapsed() >= Duration::from_millis(2));
    // A setting another activity reads is ignored (as upstream) and said.
    let test = with_activity(&format!(
        "{} activity_settings {{ name: 'array_size' int64_value: 5 }}",
        func("PolluteInstructionCache")
    ));
    assert!(check::check_test(0, &test).is_empty());
    assert_eq!(
        messages(&check::warnings(0, &test)),
        [
            "test 0: activity_configs 'a': array_size (not read by PolluteInstructionCache) \
             (upstream reads it the same way)"
        ]
    );
}

fn with_options(options: &str, default_protocol: &str) -> TestSequence {
    distbench::textproto::parse_test_sequence(
        &format!(
            r#"tests {{
  {default_protocol}
  services {{ name: "c" count: 1 }}
  services {{ name: "s" count: 1 }}
  rpc_descriptions {{ name: "q" client: "c" server: "s" }}
  action_lists {{ name: "c" action_names: "send" }}
  actions {{ name: "send" rpc_name: "q" }}
  action_lists {{ name: "q" }}
  {options}
}}"#
        ),
        "test.config",
    )
    .unwrap()
}

/// homa, mercury and gRPC over Homa are upstream's, so check_test's
/// upstream rules pass them, but rackbench refuses them by name before
/// anything runs; a gRPC threading variant runs with a warning naming it.
#[test]
fn protocol_drivers_are_refused_or_warned_by_name() {
    let refused = [
        (
            with_options(
                "protocol_driver_options { name: 'default_protocol_driver_options' \
                 protocol_name: 'grpc' server_settings { name: 'transport' string_value: 'homa' } }",
                "",
            ),
            "protocol_driver_options 'default_protocol_driver_options': server_settings \
             'transport': gRPC over 'homa' is not supported by rackbench",
        ),
        (
            with_options(
                "protocol_driver_options { name: 'default_protocol_driver_options' \
                 protocol_name: 'homa' }",
                "",
            ),
            "protocol_driver_options 'default_protocol_driver_options': protocol 'homa' is not \
             supported by rackbench",
        ),
        (
            with_options("", "default_protocol: 'mercury'"),
            "default_protocol: protocol 'mercury' is not supported by rackbench",
        ),
        (
            with_options(
                "protocol_driver_options { name: 'default_protocol_driver_options' \
                 protocol_name: 'grpc' server_settings { name: 'grpc.max_concurrent_streams' \
                 int64_value: 4 } }",
                "",
            ),
            "server_settings 'grpc.max_concurrent_streams': upstream passes server settings",
        ),
    ];
    for (seq, text) in &refused {
        assert!(check::check_sequence(seq).is_empty(), "{text}");
        let unsupported = check::unsupported(0, &seq.tests[0]);
        assert_eq!(unsupported.len(), 1, "{unsupported:?}");
        assert_eq!(unsupported[0].kind, Kind::Unsupported);
        let err = check::validate(seq, "t.config").unwrap_err();
        assert!(err.to_string().contains(text), "{err}");
        // Reported once, although both services use the options.
        assert!(
            err.to_string()
                .starts_with("t.config: check_test found 1 problem:"),
            "{err}"
        );
        // The engine refuses it too.
        assert!(Tables::new(&seq.tests[0]).is_err(), "{text}");
    }

    let seq = with_options(
        "protocol_driver_options { name: 'default_protocol_driver_options' protocol_name: 'grpc' \
         server_settings { name: 'server_type' string_value: 'handoff' } \
         server_settings { name: 'threadpool_size' int64_value: 8 } \
         client_settings { name: 'client_type' string_value: 'callback' } }",
        "",
    );
    assert_eq!(check::validate(&seq, "t"), Ok(()));
    let warnings = messages(&check::sequence_warnings(&seq));
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with(
            "test 0: protocol_driver_options 'default_protocol_driver_options': client_type \
             'callback' is not reproduced"
        ),
        "{warnings:?}"
    );
    let t = Tables::new(&seq.tests[0]).unwrap();
    let v = t.services[0].grpc.clone().unwrap();
    assert_eq!(v.threadpool_size, Some(8));

    // Values upstream's grpc driver refuses are bad configs.
    let seq = with_options(
        "protocol_driver_options { name: 'default_protocol_driver_options' protocol_name: 'grpc' \
         client_settings { name: 'client_type' string_value: 'async' } }",
        "",
    );
    let problems = check::check_sequence(&seq);
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].kind, Kind::BadProtocolDriver);

    // grpc_async_callback is upstream's gRPC driver under another name, and
    // an alias runs the options it names.
    let seq = with_options(
        "protocol_driver_options { name: 'default_protocol_driver_options' protocol_name: 'fast' } \
         protocol_driver_options { name: 'fast' protocol_name: 'grpc_async_callback' }",
        "",
    );
    assert_eq!(check::validate(&seq, "t"), Ok(()));
    let t = Tables::new(&seq.tests[0]).unwrap();
    assert_eq!(
        t.services[0].protocol,
        distbench::engine::driver::Protocol::Grpc
    );
}

/// Every upstream golden config passes upstream's rules; rackbench refuses
/// exactly the homa and mercury ones and gRPC over Homa, each by name.
#[test]
fn golden_configs_refused_exactly_for_homa_and_mercury() {
    let dir = testenv::conformance_or_return!("distbench/test_builder_golden_configs");
    let mut refused = 0;
    let mut files = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".config") {
            continue;
        }
        files += 1;
        let seq: TestSequence = distbench::files::read(&path).unwrap();
        assert!(check::check_sequence(&seq).is_empty(), "{name}");
        let expect_refusal =
            name.contains("-homa_") || name.contains("-mercury_") || name.ends_with("_homa.config");
        match check::validate(&seq, &name) {
            Ok(()) => assert!(!expect_refusal, "{name} passed"),
            Err(e) => {
                assert!(expect_refusal, "{name}: {e}");
                assert!(
                    e.to_string().contains("protocol 'homa' is not supported")
                        || e.to_string()
                            .contains("protocol 'mercury' is not supported")
                        || e.to_string().contains("gRPC over 'homa' is not supported"),
                    "{e}"
                );
                refused += 1;
            }
        }
    }
    assert_eq!((files, refused), (69, 17));
}

/// The engine's defaults, each against upstream's (distbench_engine.cc,
/// activity.cc, traffic_config.proto, protocol_driver_grpc.cc at 8a5cfae).
/// `same` marks whether rackbench uses upstream's value.
#[test]
fn engine_defaults_match_upstream() {
    let test = parse(
        r#"tests {
  services { name: "c" count: 1 }
  services { name: "s" count: 1 }
  payload_descriptions { name: "unsized" }
  rpc_descriptions { name: "plain" client: "c" server: "s" }
  rpc_descriptions { name: "named" client: "c" server: "s"
                     request_payload_name: "unsized" response_payload_name: "unsized" }
  action_lists { name: "c" action_names: ["once", "looped", "open", "open_empty"] }
  action_lists { name: "plain" }
  action_lists { name: "named" delay_actions_by_spinning: true }
  actions { name: "once" rpc_name: "plain" }
  actions { name: "looped" rpc_name: "named" iterations { max_duration_us: 10 } }
  actions { name: "open" rpc_name: "plain" iterations { max_duration_us: 10 open_loop_interval_ns: 1000 } }
  actions { name: "open_empty" rpc_name: "plain"
            iterations { max_duration_us: 10 open_loop_interval_ns: 1000
                         open_loop_interval_distribution: "" } }
}"#,
    );
    assert!(check::check_test(0, &test).is_empty());
    let t = Tables::new(&test).unwrap();
    let c = &t.lists[t.list_index["c"]];
    let looped = c.actions[1].iterations.unwrap();
    let open = c.actions[2].iterations.unwrap();
    let s = |v: &dyn std::fmt::Debug| format!("{v:?}");
    let rows: Vec<(&str, String, String, bool)> = vec![
        // (what, upstream, rackbench, same)
        (
            "request size, no payload",
            s(&Size::Fixed(16)),
            s(&t.rpcs[0].request),
            true,
        ),
        (
            "response size, no payload",
            s(&Size::Fixed(32)),
            s(&t.rpcs[0].response),
            true,
        ),
        (
            "request size, payload without size",
            s(&Size::Fixed(16)),
            s(&t.rpcs[1].request),
            true,
        ),
        (
            "response size, payload without size",
            s(&Size::Fixed(32)),
            s(&t.rpcs[1].response),
            true,
        ),
        ("fanout_filter", s(&Fanout::All), s(&t.rpcs[0].fanout), true),
        (
            "tracing_interval (no tracing)",
            s(&0),
            s(&t.rpcs[0].tracing_interval),
            true,
        ),
        (
            "iterations without `iterations`",
            s(&None::<()>),
            s(&c.actions[0].iterations.map(|_| ())),
            true,
        ),
        (
            "max_iteration_count (unlimited)",
            s(&None::<i64>),
            s(&looped.max_count),
            true,
        ),
        ("max_parallel_iterations", s(&1), s(&looped.parallel), true),
        (
            "warmup_iterations",
            s(&0),
            s(&looped.warmup_iterations),
            true,
        ),
        ("warmup_ns", s(&None::<Duration>), s(&looped.warmup), true),
        (
            "open_loop_interval_distribution",
            s(&Some(OpenLoop::Constant(Duration::from_micros(1)))),
            s(&open.open_loop),
            true,
        ),
        (
            "open_loop_interval_distribution ''",
            s(&Some(OpenLoop::Constant(Duration::from_micros(1)))),
            s(&c.actions[3].iterations.unwrap().open_loop),
            true,
        ),
        (
            "max_rpc_samples (keep all)",
            s(&0usize),
            s(&c.max_rpc_samples),
            true,
        ),
        (
            "delay_actions_by_spinning",
            s(&false),
            s(&c.delay_by_spinning),
            true,
        ),
        (
            "delay_actions_by_spinning of a list",
            s(&true),
            s(&t.lists[t.list_index["named"]].delay_by_spinning),
            true,
        ),
        (
            "overload_limits.max_threads",
            s(&1000i64),
            s(&t.max_threads),
            true,
        ),
        (
            "overload_limits.max_pending_rpcs",
            s(&1_000_000i64),
            s(&t.max_pending_rpcs),
            true,
        ),
        (
            "ip_version (the node's)",
            s(&0),
            s(&t.services[0].ip_version),
            true,
        ),
        (
            "default_protocol",
            s(&distbench::engine::driver::Protocol::Grpc),
            s(&t.services[0].protocol),
            true,
        ),
        (
            "grpc client_type, server_type",
            s(&(
                check::protocol::ClientType::Polling,
                check::protocol::ServerType::Inline,
            )),
            s(&t.services[0]
                .grpc
                .as_ref()
                .map(|g| (g.client_type, g.server_type))
                .unwrap()),
            true,
        ),
    ];
    let mut table = String::new();
    for (what, upstream, ours, same) in &rows {
        table.push_str(&format!(
            "{what:40} upstream {upstream:50} rackbench {ours}\n"
        ));
        assert_eq!(
            upstream == ours,
            *same,
            "{what}: upstream {upstream}, rackbench {ours}"
        );
    }
    eprint!("{table}");
    assert_eq!(t.max_pending_rpcs, DEFAULT_MAX_PENDING_RPCS);
    let mut limited = test.clone();
    limited.overload_limits = Some(distbench::proto::OverloadLimits {
        max_pending_rpcs: Some(50),
        max_threads: None,
    });
    assert_eq!(Tables::new(&limited).unwrap().max_pending_rpcs, 50);
    limited.overload_limits = Some(distbench::proto::OverloadLimits {
        max_pending_rpcs: None,
        max_threads: Some(0),
    });
    assert_eq!(
        messages(&check::check_test(0, &limited)),
        ["test 0: overload_limits: max_threads: must be positive, got 0"]
    );
}

/// Closed loops that would start no iteration (upstream's action then never
/// finishes) are refused by check_test and the engine alike.
#[test]
fn closed_loops_that_never_start_are_refused() {
    for (iterations, text) in [
        ("max_parallel_iterations: 0", "max_parallel_iterations"),
        ("max_iteration_count: 0", "max_iteration_count"),
    ] {
        let test = parse(&format!(
            "tests {{ services {{ name: 'c' count: 1 }} action_lists {{ name: 'c' action_names: 'a' }} \
             activity_configs {{ name: 'x' {} activity_settings {{ name: 'duration_us' int64_value: 1 }} }} \
             actions {{ name: 'a' activity_config_name: 'x' iterations {{ {iterations} }} }} }}",
            func("SpinFor")
        ));
        let problems = messages(&check::check_test(0, &test));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains(text), "{problems:?}");
        assert!(Tables::new(&test).unwrap_err().to_string().contains(text));
    }
}

/// A client and a 3-instance server with the given server fields, RPC
/// fields and extra test fields.
fn msc_test(server: &str, rpc: &str, extra: &str) -> DistributedSystemDescription {
    parse(&format!(
        "tests {{
  services {{ name: 'c' count: 1 }}
  services {{ name: 's' count: 3 {server} }}
  rpc_descriptions {{ name: 'q' client: 'c' server: 's' {rpc} }}
  action_lists {{ name: 'c' action_names: 'send' }}
  actions {{ name: 'send' rpc_name: 'q' }}
  action_lists {{ name: 'q' }}
  {extra}
}}"
    ))
}

/// Multi-server channels run; what upstream refuses (a selected instance
/// out of range, a channel without selected_instances or constraints, an
/// unknown channel) is refused at check time, a policy rackbench does not
/// have is refused by name, and settings nothing reads are warned about.
#[test]
fn multi_server_channels_are_checked_as_upstream() {
    let ok = msc_test(
        "multi_server_channels { name: 'm' selected_instances: [0, 2] \
         channel_settings { name: 'policy' string_value: 'pick_first' } }",
        "multi_server_channel_name: 'm'",
        "",
    );
    let seq = TestSequence {
        tests: vec![ok.clone()],
        tests_setting: None,
    };
    assert_eq!(check::validate(&seq, "t"), Ok(()));
    assert!(check::sequence_warnings(&seq).is_empty());
    let t = Tables::new(&ok).unwrap();
    let ch = &t.services[1].channels[0];
    assert_eq!(
        (ch.selected.clone(), ch.policy),
        (vec![0, 2], check::channels::Policy::PickFirst)
    );
    assert_eq!(t.rpcs[0].channel, Some(0));
    // round_robin is the default policy, as upstream.
    let t = Tables::new(&msc_test(
        "multi_server_channels { name: 'm' selected_instances: 1 }",
        "multi_server_channel_name: 'm'",
        "",
    ))
    .unwrap();
    assert_eq!(
        t.services[1].channels[0].policy,
        check::channels::Policy::RoundRobin
    );

    let refused = [
        (
            msc_test(
                "multi_server_channels { name: 'm' selected_instances: 3 }",
                "multi_server_channel_name: 'm'",
                "",
            ),
            Kind::BadField,
            "test 0: services 's': multi_server_channels 'm': selected_instances 3 is out of range \
             for the service (instances 0 to 2; upstream: selected_instances out of range for \
             service)",
        ),
        (
            msc_test(
                "multi_server_channels { name: 'm' }",
                "multi_server_channel_name: 'm'",
                "",
            ),
            Kind::BadField,
            "test 0: services 's': multi_server_channels 'm': the channel has no member: give \
             selected_instances or constraints (upstream: No matching constraints, and no \
             selected_instances field)",
        ),
        (
            msc_test(
                "multi_server_channels { name: 'm' selected_instances: 0 }",
                "multi_server_channel_name: 'n'",
                "",
            ),
            Kind::UnknownReference,
            "test 0: rpc_descriptions 'q': multi_server_channel_name: unknown \
             multi_server_channel of the server 'n' (defined: m)",
        ),
        (
            msc_test(
                "multi_server_channels { name: 'm' selected_instances: 0 \
                 channel_settings { name: 'policy' string_value: 'ring_hash' } }",
                "multi_server_channel_name: 'm'",
                "",
            ),
            Kind::Unsupported,
            "test 0: services 's': multi_server_channels 'm': channel_settings 'policy': \
             'ring_hash' is not supported by rackbench (it has round_robin, pick_first; upstream \
             hands the name to gRPC core)",
        ),
    ];
    for (test, kind, text) in &refused {
        let problems: Vec<_> = check::unsupported(0, test)
            .into_iter()
            .chain(check::check_test(0, test))
            .collect();
        assert_eq!(messages(&problems), [*text]);
        assert_eq!(problems[0].kind, *kind);
        assert!(Tables::new(test).is_err(), "{text}");
    }

    // A channel of a service nothing sends to is never built, and not
    // checked (as upstream).
    let unused = msc_test(
        "",
        "",
        "services { name: 'idle' count: 1 multi_server_channels { name: 'x' } }",
    );
    assert!(check::check_test(0, &unused).is_empty());

    // Settings that nothing reads, and a fan-out a channel does not use.
    let warned = msc_test(
        "multi_server_channels { name: 'm' selected_instances: 0 \
         channel_settings { name: 'policy' int64_value: 1 } \
         channel_settings { name: 'weights' string_value: 'x' } }",
        "multi_server_channel_name: 'm' fanout_filter: 'random'",
        "",
    );
    assert!(check::check_test(0, &warned).is_empty());
    assert!(check::unsupported(0, &warned).is_empty());
    let w = messages(&check::warnings(0, &warned));
    assert_eq!(w.len(), 3, "{w:?}");
    assert!(w[0].contains("fanout_filter 'random': ignored"), "{w:?}");
    assert!(w[1].contains("'policy' with an int64_value"), "{w:?}");
    assert!(
        w[2].contains("channel_settings 'weights': ignored"),
        "{w:?}"
    );
}

/// A client 'c' (2 instances) replaying trace 'tr' to server 's' (3
/// instances, channel 'm'), with the given trace body.
fn replay_test(trace: &str) -> DistributedSystemDescription {
    parse(&format!(
        "tests {{
  services {{ name: 'c' count: 2 }}
  services {{ name: 's' count: 3 multi_server_channels {{ name: 'm' selected_instances: 0 }} }}
  action_lists {{ name: 'c' action_names: 'r' }}
  actions {{ name: 'r' rpc_replay_trace_name: 'tr' }}
  rpc_replay_traces {{ name: 'tr' {trace} }}
}}"
    ))
}

/// Replay traces run; what upstream's ValidateRpcReplayTrace refuses, and
/// what its engine aborts or hangs on, is refused at check time with the
/// record and field named; settings it ignores are warned about.
#[test]
fn replay_traces_are_checked_as_upstream() {
    let ok = replay_test(
        "client: 'c' server: 's' multiserver_channel_names: 'm' \
         defaults { timing_mode: RELATIVE_TO_PRIOR_RPC_END prior_rpc_distances: 0 } \
         records { timing_mode: RELATIVE_TO_TRACE_START prior_rpc_distances: [] } \
         records { server_instance: 2 request_size: 10 response_size: 20 } \
         records { multi_server_channel_name_index: 0 prior_rpc_distances: 1 client_instance: 1 }",
    );
    let seq = TestSequence {
        tests: vec![ok.clone()],
        tests_setting: None,
    };
    // records[0] inherits the defaults' distance, which names no record.
    let err = check::validate(&seq, "t").unwrap_err().to_string();
    assert!(
        err.contains("records[0]: prior_rpc_distances 0 names no earlier record"),
        "{err}"
    );
    // Without the defaults' distance it runs; a record's distances follow
    // the defaults' (proto merge).
    let ok = replay_test(
        "client: 'c' server: 's' multiserver_channel_names: 'm' \
         defaults { timing_mode: RELATIVE_TO_PRIOR_RPC_END } \
         records { timing_mode: RELATIVE_TO_TRACE_START timing_ns: 5 } \
         records { server_instance: 2 request_size: 10 response_size: 20 prior_rpc_distances: 0 } \
         records { multi_server_channel_name_index: 0 prior_rpc_distances: [1, 0] }",
    );
    let seq = TestSequence {
        tests: vec![ok.clone()],
        tests_setting: None,
    };
    assert_eq!(check::validate(&seq, "t"), Ok(()));
    assert!(check::sequence_warnings(&seq).is_empty());
    let t = Tables::new(&ok).unwrap();
    let tr = &t.traces[0];
    use distbench::engine::tables::{ReplayTarget, Timing};
    assert_eq!((tr.client, tr.server), (0, 1));
    assert_eq!(
        tr.records
            .iter()
            .map(|r| (r.timing, r.deps.clone(), r.target))
            .collect::<Vec<_>>(),
        [
            (Timing::TraceStart, vec![], ReplayTarget::Instance(0)),
            (Timing::PriorEnd, vec![0], ReplayTarget::Instance(2)),
            (Timing::PriorEnd, vec![0, 1], ReplayTarget::Channel(0)),
        ]
    );
    assert_eq!(
        (tr.records[1].request_size, tr.records[1].response_size),
        (10, 20)
    );
    let merged = check::replay::merged_record(
        Some(&distbench::proto::RpcReplayTraceRecord {
            prior_rpc_distances: vec![4],
            timing_ns: Some(1),
            server_instance: Some(2),
            ..Default::default()
        }),
        &distbench::proto::RpcReplayTraceRecord {
            prior_rpc_distances: vec![5],
            timing_ns: Some(3),
            ..Default::default()
        },
    );
    assert_eq!(
        (
            merged.prior_rpc_distances,
            merged.timing_ns,
            merged.server_instance
        ),
        (vec![4, 5], Some(3), Some(2))
    );

    let refused = [
        (
            "server: 's' records {}",
            "client: a replay trace must name its client service",
        ),
        (
            "client: 'c' server: 'x' records {}",
            "server: unknown service 'x' (defined: c, s)",
        ),
        (
            "client: 'c' server: 's' records { server_instance: 3 }",
            "records[0]: server_instance 3 is not an instance of the server (0 to 2; upstream: \
             server index too large)",
        ),
        (
            "client: 'c' server: 's' records { client_instance: 2 }",
            "records[0]: client_instance 2 is not an instance of the client (0 to 1; upstream: \
             client index too large)",
        ),
        (
            "client: 'c' server: 's' records {} records { prior_rpc_distances: 0 timing_mode: \
             RELATIVE_TO_TRACE_START }",
            "records[1]: prior_rpc_distances need timing_mode RELATIVE_TO_PRIOR_RPC_START or \
             RELATIVE_TO_PRIOR_RPC_END, not RELATIVE_TO_TRACE_START (upstream's engine would \
             wait for this record forever)",
        ),
        (
            "client: 'c' server: 's' records {} records { prior_rpc_distances: -1 timing_mode: \
             RELATIVE_TO_PRIOR_RPC_START }",
            "records[1]: prior_rpc_distances -1 names no earlier record",
        ),
        (
            "client: 'c' server: 's' records { multi_server_channel_name_index: 0 }",
            "records[0]: multi_server_channel_name_index 0 does not index the trace's 0 \
             multiserver_channel_names",
        ),
        (
            "client: 'c' server: 's' multiserver_channel_names: 'n' records {}",
            "multiserver_channel_names: unknown multi_server_channel of the server 'n' (defined: m)",
        ),
        (
            "client: 'c' server: 's' records { request_size: -1 }",
            "records[0]: request_size must not be negative, got -1",
        ),
        (
            "client: 's' server: 'c' records {}",
            "actions 'r': rpc_replay_trace_name 'tr': the trace's client is 's', but action list \
             'c' runs on service 'c' (upstream aborts: calling RPC replay trace from wrong client)",
        ),
    ];
    for (trace, text) in refused {
        let test = replay_test(trace);
        let problems = messages(&check::check_test(0, &test));
        assert_eq!(problems.len(), 1, "{trace}: {problems:?}");
        assert!(problems[0].contains(text), "{trace}: {problems:?}");
    }
    // An action naming a trace nobody defines.
    let test = parse(
        "tests { services { name: 'c' count: 1 } action_lists { name: 'c' action_names: 'r' } \
         actions { name: 'r' rpc_replay_trace_name: 'nope' } }",
    );
    assert_eq!(
        messages(&check::check_test(0, &test)),
        [
            "test 0: actions 'r': rpc_replay_trace_name: unknown rpc replay trace 'nope' (none is \
          defined)"
        ]
    );

    // What upstream's replay ignores is warned about.
    let warned = replay_test(
        "client: 'c' server: 's' defaults { server_processing_time_ns: 1000 } \
         records { client_instance: 1 rpc_class: 3 } \
         records { client_instance: 0 prior_rpc_distances: 0 timing_mode: RELATIVE_TO_PRIOR_RPC_END }",
    );
    assert!(check::check_test(0, &warned).is_empty());
    let w = messages(&check::warnings(0, &warned));
    assert_eq!(w.len(), 3, "{w:?}");
    assert!(w[0].contains("records[1]: prior_rpc_distances 0 names records[0], which only client_instance 1 replays"), "{w:?}");
    assert!(w[1].contains("server_processing_time_ns: ignored"), "{w:?}");
    assert!(
        w[2].contains("rpc_class: ignored (upstream ignores it too)"),
        "{w:?}"
    );
}
