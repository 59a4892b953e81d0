//! Conformance with upstream Distbench: its golden test_builder configs parse
//! and pass check_test, text round-trips, and its binary golden results
//! decode and re-encode. The data lives in `shared/conformance/distbench`
//! beside the repository.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

use distbench::check::{self, Kind};
use distbench::files::{self, Encoding};
use distbench::proto::{TestSequence, TestSequenceResults};
use distbench::textproto;
use prost::Message;
use prost_reflect::prost_types::{DescriptorProto, FileDescriptorSet};
use prost_reflect::{DescriptorPool, DynamicMessage, ReflectMessage, Value};
use std::path::{Path, PathBuf};

fn conformance_dir() -> PathBuf {
    testenv::conformance_root()
        .unwrap_or_default()
        .join("distbench")
}

/// Every `*.config` under the conformance folder (configs and the configs
/// stored beside the analysis results).
fn golden_configs() -> Vec<PathBuf> {
    let root = conformance_dir();
    let mut out = Vec::new();
    for dir in [root.join("test_builder_golden_configs")]
        .into_iter()
        .chain(subdirs(&root.join("analysis_golden_results")))
    {
        for e in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "config") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    out
}

fn golden_results() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in subdirs(&conformance_dir().join("analysis_golden_results")) {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".pb") || name.ends_with(".pb.gz") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Paths (message type and field number) of every unknown field in `msg`.
fn unknown_fields(msg: &DynamicMessage) -> Vec<String> {
    let mut out: Vec<String> = msg
        .unknown_fields()
        .map(|f| format!("{}.{}", msg.descriptor().full_name(), f.number()))
        .collect();
    let mut visit = |v: &Value| {
        if let Value::Message(m) = v {
            out.extend(unknown_fields(m));
        }
    };
    for (_, value) in msg.fields() {
        match value {
            Value::List(items) => items.iter().for_each(&mut visit),
            Value::Map(map) => map.values().for_each(&mut visit),
            v => visit(v),
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Our schema with every map field seen as what it is on the wire: a
/// repeated `{ key = 1; value = 2; }` message. Decoding through it keeps map
/// entries in their order and with explicit default keys.
fn flat_pool() -> DescriptorPool {
    fn clear_map_entries(message: &mut DescriptorProto) {
        if let Some(options) = message.options.as_mut() {
            options.map_entry = None;
        }
        message.nested_type.iter_mut().for_each(clear_map_entries);
    }
    let mut set = FileDescriptorSet::decode(distbench::proto::FILE_DESCRIPTOR_SET).unwrap();
    for file in &mut set.file {
        file.message_type.iter_mut().for_each(clear_map_entries);
    }
    DescriptorPool::from_file_descriptor_set(set).unwrap()
}

fn read_config(path: &Path) -> TestSequence {
    let text = std::fs::read_to_string(path).unwrap();
    textproto::parse_test_sequence(&text, &path.display().to_string())
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_golden_config_parses_and_passes_check_test() {
    testenv::conformance_or_return!("distbench");
    let configs = golden_configs();
    assert!(configs.len() >= 70, "found only {} configs", configs.len());
    for path in &configs {
        let seq = read_config(path);
        assert!(!seq.tests.is_empty(), "{}: no tests", path.display());
        for t in &seq.tests {
            assert!(!t.name().is_empty(), "{}: unnamed test", path.display());
            assert!(!t.services.is_empty(), "{}: no services", path.display());
        }
        let problems = check::check_sequence(&seq);
        assert!(
            problems.is_empty(),
            "{}:\n{}",
            path.display(),
            problems
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

#[test]
fn golden_configs_read_as_upstream_reads_them() {
    testenv::conformance_or_return!("distbench");
    let dir = conformance_dir().join("test_builder_golden_configs");
    let seq = read_config(&dir.join("client_server_1x1x100-grpc_polling_inline.config"));
    let t = &seq.tests[0];
    assert_eq!(t.name(), "client_server_1x1x100-grpc_polling_inline");
    assert_eq!(t.attributes["parallel_queries"], "100");
    assert_eq!(t.services.len(), 2);
    let rpc = &t.rpc_descriptions[0];
    assert_eq!(rpc.client, ["client"]);
    assert_eq!(rpc.server(), "server");
    assert_eq!(rpc.fanout_filter(), "all");
    let run = &t.actions[0];
    let it = run.iterations.as_ref().unwrap();
    assert_eq!(it.max_duration_us(), 30_000_000);
    assert_eq!(it.max_parallel_iterations(), 100);
    assert_eq!(it.open_loop_interval_distribution(), "constant");
    assert_eq!(t.payload_descriptions[1].size(), 262_144);
    let pdo = &t.protocol_driver_options[0];
    assert_eq!(pdo.server_settings[0].string_value(), "inline");

    // CDF points with ',' separators and 19-digit decimals.
    let seq = read_config(
        &dir.join("homa_cp_node_constant_10x1xw5x1000000x0.0025x1.2-grpc_polling_inline.config"),
    );
    let d = &seq.tests[0].distribution_config[0];
    assert_eq!(d.field_names, ["payload_size"]);
    assert_eq!(d.cdf_points[0].value(), 1430);
    assert!((d.cdf_points[0].cdf() - 0.025).abs() < 1e-7);
    assert_eq!(d.cdf_points.last().unwrap().cdf(), 1.0);

    // Joint PMF with ranges.
    let seq = read_config(&dir.join(
        "variable_response_multi_level_rpc_4x20x10000-grpc_polling_inline-1024-64000.config",
    ));
    let d = &seq.tests[0].distribution_config[0];
    let p = &d.pmf_points[0];
    assert_eq!(p.pmf(), 1.0);
    assert_eq!(p.data_points[1].lower(), 1024);
    assert_eq!(p.data_points[1].upper(), 64000);

    // Service constraints (a map of messages with an enum).
    let constrained = golden_configs()
        .into_iter()
        .map(|p| read_config(&p))
        .flat_map(|s| s.tests)
        .find(|t| !t.service_constraints.is_empty())
        .expect("a golden config with service_constraints");
    let c = &constrained.service_constraints["rectangular/0/*"].constraint_sets[0].constraints[0];
    assert_eq!(c.attribute_name(), "slice");
    assert_eq!(c.relation(), distbench::proto::constraint::Relation::Equal);
}

#[test]
fn text_round_trip_is_stable() {
    testenv::conformance_or_return!("distbench");
    for path in golden_configs() {
        let first = read_config(&path);
        let printed = textproto::format_test_sequence(&first).unwrap();
        let second = textproto::parse_test_sequence(&printed, "printed")
            .unwrap_or_else(|e| panic!("{}: reprinted text does not parse: {e}", path.display()));
        assert_eq!(first, second, "{}", path.display());
        assert_eq!(
            textproto::format_test_sequence(&second).unwrap(),
            printed,
            "{}: printing is not stable",
            path.display()
        );
        // The binary form carries the same message.
        let bytes = first.encode_to_vec();
        assert_eq!(TestSequence::decode(bytes.as_slice()).unwrap(), first);
    }
}

#[test]
fn golden_results_decode_and_reencode() {
    testenv::conformance_or_return!("distbench");
    let results = golden_results();
    assert!(results.len() >= 5, "found {results:?}");
    let mut gz = 0;
    for path in &results {
        let raw = std::fs::read(path).unwrap();
        let binary = if raw.starts_with(&[0x1f, 0x8b]) {
            gz += 1;
            let mut out = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(raw.as_slice()), &mut out)
                .unwrap();
            out
        } else {
            raw
        };
        let res: TestSequenceResults = files::read(path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(res.test_results.len(), 1, "{}", path.display());
        let r = &res.test_results[0];
        let cfg = r.traffic_config.as_ref().expect("traffic_config");
        assert!(!cfg.name().is_empty());
        assert!(!r.log_summary.is_empty());
        assert_eq!(r.log_summary[0], "RPC latency summary:");
        // Every service instance is placed, and measured samples are sane.
        let placement = &r.placement.as_ref().unwrap().service_endpoints;
        let instances: i32 = cfg.services.iter().map(|s| s.count()).sum();
        assert_eq!(placement.len() as i32, instances, "{}", path.display());
        let logs = &r.service_logs.as_ref().unwrap().instance_logs;
        let mut samples = 0;
        for log in logs.values() {
            for peer in log.peer_logs.values() {
                for rpc in peer.rpc_logs.values() {
                    for s in &rpc.successful_rpc_samples {
                        assert!(s.latency_ns() > 0 && s.start_timestamp_ns() > 0);
                        samples += 1;
                    }
                }
            }
        }
        assert!(samples > 0, "{}: no samples", path.display());
        // Nothing is lost: the schema knows every field upstream wrote.
        let dynamic = DynamicMessage::decode(
            distbench::proto::descriptor::<TestSequenceResults>().unwrap(),
            binary.as_slice(),
        )
        .unwrap();
        assert_eq!(
            unknown_fields(&dynamic),
            Vec::<String>::new(),
            "{}",
            path.display()
        );
        let again = res.encode_to_vec();
        assert_eq!(TestSequenceResults::decode(again.as_slice()).unwrap(), res);
        // Byte for byte: the typed messages cannot reproduce upstream's
        // bytes (their maps are BTreeMaps, so entries come out sorted and a
        // key equal to 0 is left out, where upstream writes the entries in
        // its hash map's order and every key explicitly). Seen as repeated
        // entry messages, with proto2 presence, the schema re-encodes
        // exactly what upstream wrote: same field numbers, wire types,
        // packing, field order (ascending numbers, as upstream's serializer
        // writes them) and entry order.
        let flat = DynamicMessage::decode(
            flat_pool()
                .get_message_by_name("distbench.TestSequenceResults")
                .unwrap(),
            binary.as_slice(),
        )
        .unwrap();
        assert_eq!(unknown_fields(&flat), Vec::<String>::new());
        let reencoded = flat.encode_to_vec();
        assert_eq!(
            reencoded.len(),
            binary.len(),
            "{}: re-encoded size",
            path.display()
        );
        if let Some(at) = reencoded.iter().zip(&binary).position(|(a, b)| a != b) {
            panic!("{}: re-encoding differs at byte {at}", path.display());
        }
        // The traffic config inside a result passes check_test too.
        assert!(check::check_test(0, cfg).is_empty(), "{}", path.display());
    }
    assert_eq!(gz, 1, "one golden result is gzip-compressed");
}

#[test]
fn golden_result_fields_have_upstream_meaning() {
    testenv::conformance_or_return!("distbench");
    let path = conformance_dir().join(
        "analysis_golden_results/trace_context_test/clique_sync_burst_10x16000x1024x1024-grpc_polling_inline.pb",
    );
    let res: TestSequenceResults = files::read(&path).unwrap();
    let r = &res.test_results[0];
    let cfg = r.traffic_config.as_ref().unwrap();
    assert_eq!(cfg.services[0].name(), "clique");
    assert_eq!(cfg.services[0].count(), 10);
    let log = &r.service_logs.as_ref().unwrap().instance_logs["clique/0"];
    assert_eq!(
        log.error_dictionary.as_ref().unwrap().error_message,
        [""],
        "entry 0 of the error dictionary is 'no error'"
    );
    let (peer, plog) = log.peer_logs.iter().next().unwrap();
    assert!(peer.starts_with("clique/"));
    let samples = &plog.rpc_logs[&0].successful_rpc_samples;
    assert!(
        samples
            .iter()
            .all(|s| s.request_size() == 1024 && s.response_size() == 1024)
    );
    // Tracing is on (tracing_interval) in this test: each sample carries the
    // sending engine's id and a growing iteration number.
    let traced: Vec<_> = samples
        .iter()
        .filter_map(|s| s.trace_context.as_ref())
        .collect();
    assert!(!traced.is_empty());
    let sender = traced[0].engine_ids[0];
    assert!(traced.iter().all(|t| t.engine_ids == [sender]));
    let iterations: Vec<i64> = traced.iter().map(|t| t.action_iterations[0]).collect();
    assert!(iterations.windows(2).any(|w| w[1] > w[0]));
    // Resource usage: user CPU seconds is a double.
    let usage = r.resource_usage_logs.as_ref().unwrap();
    let start = usage
        .test_sequencer_usage
        .as_ref()
        .and_then(|u| u.rusage_start.as_ref())
        .unwrap();
    assert!(start.user_cpu_time_seconds() >= 0.0 && start.max_resident_set_size() > 0);
}

#[test]
fn results_write_in_every_encoding() {
    testenv::conformance_or_return!("distbench");
    let path = conformance_dir().join(
        "analysis_golden_results/client_server_test/client_server_1x1x1-grpc_polling_inline.pb.gz",
    );
    let res: TestSequenceResults = files::read(&path).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (name, enc) in [
        ("r.txt", Encoding::Text),
        ("r.pb", Encoding::Binary),
        ("r.pb.gz", Encoding::GzipBinary),
    ] {
        let out = dir.path().join(name);
        files::write(&out, &res, enc).unwrap();
        let back: TestSequenceResults = files::read(&out).unwrap();
        assert_eq!(back, res, "{name}");
    }
}

/// One broken config per error class; each must be reported with the test,
/// the place and the field.
#[test]
fn each_error_class_is_reported() {
    let good = "
      name: 't'
      services { name: 'client' count: 1 }
      services { name: 'server' count: 2 }
      rpc_descriptions { name: 'q' client: 'client' server: 'server'
                         request_payload_name: 'req' response_payload_name: 'resp' }
      payload_descriptions { name: 'req' size: 10 }
      payload_descriptions { name: 'resp' size: 20 }
      action_lists { name: 'client' action_names: 'a' action_names: 'b' }
      actions { name: 'a' rpc_name: 'q' }
      actions { name: 'b' rpc_name: 'q' dependencies: 'a' }
      action_lists { name: 'q' }
    ";
    let ok = textproto::parse_test_sequence(&format!("tests {{ {good} }}"), "good").unwrap();
    assert!(check::check_sequence(&ok).is_empty());

    let cases: &[(&str, &str, &str, Kind, &[&str])] = &[
        (
            "unknown action",
            "action_lists { name: 'client' action_names: 'a' action_names: 'b' }",
            "action_lists { name: 'client' action_names: 'a' action_names: 'b' action_names: 'zz' }",
            Kind::UnknownReference,
            &["action_lists 'client'", "action_names: unknown action 'zz'", "(defined: a, b)"],
        ),
        (
            "unknown rpc",
            "actions { name: 'a' rpc_name: 'q' }",
            "actions { name: 'a' rpc_name: 'qq' }",
            Kind::UnknownReference,
            &["actions 'a'", "rpc_name: unknown rpc 'qq'"],
        ),
        (
            "unknown service",
            "client: 'client'",
            "client: 'clients'",
            Kind::UnknownReference,
            &["rpc_descriptions 'q'", "client: unknown service 'clients'"],
        ),
        (
            "unknown payload override",
            "actions { name: 'b' rpc_name: 'q' dependencies: 'a' }",
            "actions { name: 'b' rpc_name: 'q' dependencies: 'a' request_payload_override: 'rq' }",
            Kind::UnknownReference,
            &["request_payload_override: unknown payload 'rq'"],
        ),
        (
            "payload override without a size distribution",
            "actions { name: 'b' rpc_name: 'q' dependencies: 'a' }",
            "actions { name: 'b' rpc_name: 'q' dependencies: 'a' request_payload_override: 'req' }",
            Kind::BadField,
            &["payload 'req' has no size_distribution_name"],
        ),
        (
            "unknown distribution",
            "request_payload_name: 'req'",
            "distribution_config_name: 'sizes'",
            Kind::UnknownReference,
            &["distribution_config_name: unknown distribution 'sizes' (none is defined)"],
        ),
        (
            "later dependency",
            "action_names: 'a' action_names: 'b' }",
            "action_names: 'b' action_names: 'a' }",
            Kind::BadDependency,
            &[
                "action_lists 'client'",
                "dependency 'a' of action 'b' must be an earlier action",
                "action_names[1]",
            ],
        ),
        (
            "dependency outside the list",
            "dependencies: 'a'",
            "dependencies: 'elsewhere'",
            Kind::BadDependency,
            &["dependency 'elsewhere' of action 'b' is not an action of this list"],
        ),
        (
            "rpc without handler",
            "action_lists { name: 'q' }",
            "",
            Kind::MissingHandler,
            &["rpc_descriptions 'q'", "no action list is named 'q'", "empty list replies at once"],
        ),
        (
            "duplicate service",
            "services { name: 'server' count: 2 }",
            "services { name: 'server' count: 2 } services { name: 'client' }",
            Kind::Duplicate,
            &["services[2]", "name: 'client' is already defined by services[0]"],
        ),
        (
            "duplicate rpc",
            "action_lists { name: 'q' }",
            "action_lists { name: 'q' } rpc_descriptions { name: 'q' client: 'client' server: 'server' }",
            Kind::Duplicate,
            &["rpc_descriptions[1]", "'q' is already defined by rpc_descriptions[0]"],
        ),
        (
            "duplicate action",
            "actions { name: 'a' rpc_name: 'q' }",
            "actions { name: 'a' rpc_name: 'q' } actions { name: 'a' rpc_name: 'q' }",
            Kind::Duplicate,
            &["actions[1]", "already defined by actions[0]"],
        ),
        (
            "duplicate action list",
            "action_lists { name: 'q' }",
            "action_lists { name: 'q' } action_lists { name: 'q' }",
            Kind::Duplicate,
            &["action_lists[2]", "already defined by action_lists[1]"],
        ),
        (
            "duplicate payload",
            "payload_descriptions { name: 'req' size: 10 }",
            "payload_descriptions { name: 'req' size: 10 } payload_descriptions { name: 'req' }",
            Kind::Duplicate,
            &["payload_descriptions[1]", "'req' is already defined by payload_descriptions[0]"],
        ),
        (
            "duplicate distribution",
            "action_lists { name: 'q' }",
            "action_lists { name: 'q' }
             distribution_config { name: 'd' field_names: 'payload_size' cdf_points { value: 1 cdf: 1 } }
             distribution_config { name: 'd' field_names: 'payload_size' cdf_points { value: 1 cdf: 1 } }",
            Kind::Duplicate,
            &["distribution_config[1]", "'d' is already defined by distribution_config[0]"],
        ),
        (
            "unknown fanout filter",
            "server: 'server'",
            "server: 'server' fanout_filter: 'ring_w'",
            Kind::BadFanoutFilter,
            &["rpc_descriptions 'q'", "fanout_filter: unknown fanout_filter 'ring_w'", "stochastic{P:N,...}"],
        ),
        (
            "unknown open-loop distribution",
            "actions { name: 'a' rpc_name: 'q' }",
            "actions { name: 'a' rpc_name: 'q' iterations { open_loop_interval_ns: 1000 open_loop_interval_distribution: 'poisson' } }",
            Kind::BadOpenLoopDistribution,
            &["actions 'a'", "open_loop_interval_distribution: unknown distribution 'poisson'", "sync_burst_spread"],
        ),
        (
            "distribution with pmf and cdf",
            "action_lists { name: 'q' }",
            "action_lists { name: 'q' }
             distribution_config { name: 'd' field_names: 'payload_size'
               cdf_points { value: 1 cdf: 1 } pmf_points { pmf: 1 data_points { exact: 1 } } }",
            Kind::BadDistribution,
            &["distribution_config 'd'", "exactly one of pmf_points and cdf_points"],
        ),
        (
            "pmf not summing to one",
            "action_lists { name: 'q' }",
            "action_lists { name: 'q' }
             distribution_config { name: 'd'
               field_names: 'request_payload_size' field_names: 'response_payload_size'
               pmf_points { pmf: 0.5 data_points { exact: 1 } data_points { exact: 2 } }
               pmf_points { pmf: 0.25 data_points { exact: 1 } data_points { exact: 2 } } }",
            Kind::BadDistribution,
            &["the pmf probabilities sum to 0.75"],
        ),
        (
            "cdf values not increasing",
            "action_lists { name: 'q' }",
            "action_lists { name: 'q' }
             size_distribution_configs { name: 's' field_names: 'payload_size'
               cdf_points { value: 10 cdf: 0.5 } cdf_points { value: 9 cdf: 1 } }",
            Kind::BadDistribution,
            &["size_distribution_configs 's'", "value 9 must be greater than the previous value 10"],
        ),
        (
            "cdf not ending at one",
            "action_lists { name: 'q' }",
            "action_lists { name: 'q' }
             distribution_config { name: 'd' field_names: 'payload_size'
               cdf_points { value: 1 cdf: 0.5 } cdf_points { value: 2 cdf: 0.9 } }",
            Kind::BadDistribution,
            &["the last cdf is 0.9; it must be exactly 1"],
        ),
        (
            "wrong field names",
            "action_lists { name: 'q' }",
            "action_lists { name: 'q' }
             delay_distribution_configs { name: 'dd' field_names: 'payload_size'
               cdf_points { value: 1 cdf: 1 } }",
            Kind::BadDistribution,
            &["delay_distribution_configs 'dd'", "field_names must include [action_delay_ns], got [payload_size]"],
        ),
        (
            "unknown delay distribution",
            "actions { name: 'a' rpc_name: 'q' }",
            "actions { name: 'a' rpc_name: 'q' delay_distribution_name: 'slow' }",
            Kind::UnknownReference,
            &["delay_distribution_name: unknown delay distribution 'slow'"],
        ),
    ];
    for (what, from, to, kind, fragments) in cases {
        assert!(
            good.contains(from),
            "{what}: '{from}' is not in the good config"
        );
        let bad = format!("tests {{ {} }}", good.replacen(from, to, 1));
        let seq =
            textproto::parse_test_sequence(&bad, what).unwrap_or_else(|e| panic!("{what}: {e}"));
        let problems = check::check_sequence(&seq);
        let hit = problems
            .iter()
            .find(|p| p.kind == *kind)
            .unwrap_or_else(|| {
                panic!("{what}: no {kind:?} problem in {problems:#?}");
            });
        let text = hit.to_string();
        assert!(text.starts_with("test 0 't': "), "{what}: {text}");
        for f in *fragments {
            assert!(text.contains(f), "{what}: '{f}' missing from: {text}");
        }
    }
}

#[test]
fn every_problem_is_reported_not_just_the_first() {
    let text = "
      tests { name: 'one'
        services { name: 's' }
        rpc_descriptions { name: 'r' client: 'x' server: 'y' fanout_filter: 'bad' }
        action_lists { name: 's' action_names: 'missing' }
      }
      tests { name: 'two' services { name: 's' x_size: 2 count: 3 } }";
    let seq = textproto::parse_test_sequence(text, "two_tests").unwrap();
    let problems = check::check_sequence(&seq);
    let lines: Vec<String> = problems.iter().map(ToString::to_string).collect();
    let want = [
        "test 0 'one': rpc_descriptions 'r': client: unknown service 'x' (defined: s)",
        "test 0 'one': rpc_descriptions 'r': server: unknown service 'y' (defined: s)",
        "test 0 'one': rpc_descriptions 'r': fanout_filter: unknown fanout_filter 'bad'",
        "test 0 'one': rpc_descriptions 'r': no action list is named 'r'",
        "test 0 'one': action_lists 's': action_names: unknown action 'missing' (none is defined)",
        "test 1 'two': services[0] 's': count: 3 does not match x_size * y_size * z_size = 2",
    ];
    for w in want {
        assert!(
            lines.iter().any(|l| l.starts_with(w)),
            "missing '{w}' in {lines:#?}"
        );
    }
    assert_eq!(lines.len(), want.len(), "{lines:#?}");
}

#[test]
fn parse_errors_name_file_line_and_column() {
    let text = "tests {\n  name: 't'\n  services { name: 's' }\n  rpc_descriptions {\n    nmae: 'r'\n  }\n}\n";
    let err = textproto::parse_test_sequence(text, "tests.cfg").unwrap_err();
    assert_eq!(
        err.to_string(),
        "tests.cfg:5:5: unknown field 'nmae' in distbench.RpcSpec (did you mean 'name'?)"
    );
}
