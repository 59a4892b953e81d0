//! The gRPC server variants (`server_type`, `threadpool_size`,
//! `threadpool_type`): handlers handed to the instance's pool, and a
//! `simple` pool's limit on handlers at once.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

use distbench::cluster::LocalCluster;
use distbench::proto::{DistributedSystemDescription, TestResult, TestSequence};

fn run(test: &DistributedSystemDescription) -> TestResult {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let c = LocalCluster::start(2, 0).await.unwrap();
            let r = c.run_test(test).await;
            c.stop().await;
            r.unwrap()
        })
}

/// 4 clients-in-flight against a server whose handler sleeps 100 ms.
fn sleepy(server_settings: &str) -> DistributedSystemDescription {
    let text = format!(
        r#"tests {{
  name: 'pool'
  services {{ name: 'c' count: 1 }}
  services {{ name: 's' count: 1 }}
  rpc_descriptions {{ name: 'q' client: 'c' server: 's' }}
  protocol_driver_options {{ name: 'default_protocol_driver_options' protocol_name: 'grpc' {server_settings} }}
  activity_configs {{ name: 'sleep' activity_settings {{ name: 'activity_func' string_value: 'SleepFor' }}
                     activity_settings {{ name: 'duration_us' int64_value: 100000 }} }}
  action_lists {{ name: 'c' action_names: 'send' }}
  actions {{ name: 'send' rpc_name: 'q' iterations {{ max_iteration_count: 8 max_parallel_iterations: 4 }} }}
  action_lists {{ name: 'q' action_names: 'work' }}
  actions {{ name: 'work' activity_config_name: 'sleep' }}
}}"#
    );
    let seq: TestSequence =
        distbench::textproto::parse_test_sequence(&text, "pool.config").unwrap();
    seq.tests[0].clone()
}

fn latencies_ms(r: &TestResult) -> Vec<f64> {
    let log = &r.service_logs.as_ref().unwrap().instance_logs["c/0"];
    let l = &log.peer_logs["s/0"].rpc_logs[&0];
    assert!(
        l.failed_rpc_samples.is_empty(),
        "{:?}",
        l.failed_rpc_samples
    );
    let mut v: Vec<f64> = l
        .successful_rpc_samples
        .iter()
        .map(|s| s.latency_ns() as f64 / 1e6)
        .collect();
    v.sort_by(f64::total_cmp);
    v
}

/// A `simple` pool of one thread runs one handler at a time: of 4 RPCs sent
/// together, the last waits for the 3 before it (at least 400 ms in all),
/// which no other variant does by construction.
#[test]
fn a_simple_pool_runs_at_most_its_size_of_handlers() {
    let r = run(&sleepy(
        "server_settings { name: 'server_type' string_value: 'handoff' } \
         server_settings { name: 'threadpool_type' string_value: 'simple' } \
         server_settings { name: 'threadpool_size' int64_value: 1 }",
    ));
    let l = latencies_ms(&r);
    assert_eq!(l.len(), 8);
    assert!(*l.last().unwrap() >= 390.0, "latencies {l:?} ms");
}

/// `elastic` (no limit), `null` (a thread per RPC) and `polling` servers
/// run every handler, each RPC at least its 100 ms of sleep.
#[test]
fn every_server_variant_serves() {
    for settings in [
        "server_settings { name: 'server_type' string_value: 'handoff' }",
        "server_settings { name: 'server_type' string_value: 'polling' } \
         server_settings { name: 'threadpool_size' int64_value: 2 }",
        "server_settings { name: 'server_type' string_value: 'handoff' } \
         server_settings { name: 'threadpool_type' string_value: 'null' }",
        "server_settings { name: 'server_type' string_value: 'inline' }",
    ] {
        let l = latencies_ms(&run(&sleepy(settings)));
        assert_eq!(l.len(), 8, "{settings}");
        assert!(l[0] >= 99.0, "{settings}: {l:?}");
    }
}
