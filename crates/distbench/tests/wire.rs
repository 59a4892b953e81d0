//! Wire compatibility with upstream Distbench: a result file (`*.pb`) that
//! rackbench writes is read by upstream's tools (results_conversion,
//! analysis) field for field, and the data-plane message is upstream's.
//!
//! `UPSTREAM` below is an independent statement of upstream's schema facts
//! (message and field names, numbers, types, labels, defaults, packing),
//! written from google/distbench's distbench.proto, traffic_config.proto and
//! joint_distribution.proto (8a5cfae), and compiled with protox when the test
//! runs. It is deliberately not rackbench's own .proto files: the tests check
//! our schema and our bytes against it.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

use distbench::cluster::LocalCluster;
use distbench::files::{self, Encoding};
use distbench::proto::{GenericRequestResponse, TestSequence, TestSequenceResults, TraceContext};
use prost::Message;
use prost_reflect::prost_types::{DescriptorProto, FileDescriptorSet};
use prost_reflect::{
    DescriptorPool, DynamicMessage, FieldDescriptor, Kind, MessageDescriptor, Value,
};
use std::collections::BTreeSet;

/// Upstream's messages, as facts: no services, no comments.
const UPSTREAM: &str = r#"
syntax = "proto2";
package distbench;

message DataPoint { optional int64 exact = 1; optional int64 upper = 3; optional int64 lower = 4; }
message PmfPoint { optional float pmf = 1; repeated DataPoint data_points = 2; }
message CdfPoint { optional float cdf = 1; optional int64 value = 2; }
message DistributionConfig {
  optional string name = 1;
  repeated PmfPoint pmf_points = 2;
  repeated CdfPoint cdf_points = 3;
  repeated string field_names = 5;
  reserved 4;
}

message ServiceSpec {
  optional string name = 1;
  optional int32 count = 2;
  optional string protocol_driver_options_name = 3;
  optional int32 x_size = 4 [default = 1];
  optional int32 y_size = 5 [default = 1];
  optional int32 z_size = 6 [default = 1];
  repeated MultiServerChannel multi_server_channels = 7;
}
message MultiServerChannel {
  optional string name = 1;
  repeated NamedSetting channel_settings = 2;
  repeated int32 selected_instances = 3 [packed = true];
  optional ConstraintList constraints = 4;
}
message ConstraintList { repeated ConstraintSet constraint_sets = 1; }
message ConstraintSet { repeated Constraint constraints = 1; }
message Constraint {
  enum Relation { UNKNOWN = 0; EQUAL = 1; NOT_EQUAL = 2; MODULO_EQUAL = 3; MODULO_NOT_EQUAL = 4; }
  optional string attribute_name = 1;
  repeated string string_values = 2;
  repeated int64 int64_values = 3 [packed = true];
  optional Relation relation = 4;
  optional int64 modulus = 5;
}
message ServiceBundle { repeated string services = 1; }
message PayloadSpec {
  optional string name = 1;
  repeated string attributes = 2;
  optional string size_distribution_name = 3;
  optional int64 size = 4;
}
message RpcSpec {
  optional string name = 1;
  repeated string client = 2;
  optional string server = 3;
  optional string request_payload_name = 4;
  optional string response_payload_name = 5;
  optional string fanout_filter = 6 [default = "all"];
  optional int32 tracing_interval = 7;
  optional string distribution_config_name = 8;
  optional string multi_server_channel_name = 9;
}
message Iterations {
  optional int32 max_iteration_count = 1;
  optional int32 max_duration_us = 2;
  optional int64 max_parallel_iterations = 3 [default = 1];
  optional int64 open_loop_interval_ns = 4;
  optional string open_loop_interval_distribution = 5 [default = "constant"];
  optional int64 warmup_iterations = 6 [default = 0];
  optional int64 warmup_ns = 7 [default = 0];
}
message ActivityConfig { optional string name = 1; repeated NamedSetting activity_settings = 2; }
message RpcReplayTraceRecord {
  enum TimingMode {
    UNKNOWN = 0; RELATIVE_TO_TRAFFIC_START = 1; RELATIVE_TO_TRACE_START = 2;
    RELATIVE_TO_PRIOR_RPC_START = 3; RELATIVE_TO_PRIOR_RPC_END = 4;
  }
  optional int64 timing_ns = 1;
  optional TimingMode timing_mode = 2;
  repeated int32 prior_rpc_distances = 3 [packed = true];
  optional int32 rpc_class = 4;
  optional int32 client_instance = 5;
  optional int32 server_instance = 6;
  optional int32 multi_server_channel_name_index = 7;
  optional int32 request_size = 8;
  optional int32 response_size = 9;
  optional int64 server_processing_time_ns = 10;
}
message RpcReplayTrace {
  optional string name = 1;
  optional string client = 2;
  optional string server = 3;
  repeated string multiserver_channel_names = 4;
  optional RpcReplayTraceRecord defaults = 5;
  repeated RpcReplayTraceRecord records = 6;
}
message Action {
  optional string name = 1;
  repeated string dependencies = 2;
  optional string delay_distribution_name = 13;
  optional Iterations iterations = 3;
  oneof action {
    string rpc_name = 4;
    string action_list_name = 5;
    string activity_config_name = 6;
    string rpc_replay_trace_name = 7;
  }
  optional bool send_response_when_done = 10;
  optional bool cancel_traffic_when_done = 11 [default = false];
  repeated string predicates = 12;
  optional string request_payload_override = 14;
  optional string response_payload_override = 15;
}
message ActionList {
  optional string name = 1;
  repeated string action_names = 2;
  optional int64 max_rpc_samples = 3 [default = 0];
  map<string, float> predicate_probabilities = 4;
  optional bool delay_actions_by_spinning = 5;
}
message NamedSetting { optional string name = 1; optional string string_value = 2; optional int64 int64_value = 3; }
message ProtocolDriverOptions {
  optional string name = 1;
  optional string protocol_name = 2;
  optional string netdev_name = 3;
  repeated NamedSetting server_settings = 4;
  repeated NamedSetting client_settings = 5;
  optional int32 ip_version = 6 [default = 0];
}
message OverloadLimits {
  optional int64 max_threads = 1 [default = 1000];
  optional int64 max_pending_rpcs = 2 [default = 1000000];
}
message DistributedSystemDescription {
  optional string name = 9;
  map<string, string> attributes = 10;
  repeated ServiceSpec services = 1;
  map<string, ConstraintList> service_constraints = 15;
  map<string, ServiceBundle> node_service_bundles = 2;
  repeated PayloadSpec payload_descriptions = 3;
  repeated RpcSpec rpc_descriptions = 4;
  repeated ActivityConfig activity_configs = 11;
  repeated Action actions = 5;
  repeated ActionList action_lists = 6;
  optional string default_protocol = 7 [default = "grpc"];
  repeated ProtocolDriverOptions protocol_driver_options = 8;
  repeated DistributionConfig distribution_config = 12;
  repeated DistributionConfig delay_distribution_configs = 16;
  repeated DistributionConfig size_distribution_configs = 17;
  optional OverloadLimits overload_limits = 13;
  repeated RpcReplayTrace rpc_replay_traces = 14;
  optional bool delay_actions_by_spinning = 18 [default = false];
}

message TestsSetting {
  optional bool keep_instance_log = 1 [default = true];
  optional bool shutdown_after_tests = 2 [default = false];
}
message TestSequence { repeated DistributedSystemDescription tests = 1; optional TestsSetting tests_setting = 2; }
message NodeServiceConfig { optional DistributedSystemDescription traffic_config = 1; repeated string services = 2; }
message TraceContext {
  repeated int64 engine_ids = 1 [packed = true];
  repeated int64 actionlist_indices = 3 [packed = true];
  repeated int64 actionlist_invocations = 4 [packed = true];
  repeated int64 action_indices = 5 [packed = true];
  repeated int64 action_iterations = 6 [packed = true];
  repeated int64 fanout_index = 7 [packed = true];
  repeated int64 iterations = 2 [packed = true, deprecated = true];
}
message RpcReplayTraceLog {
  optional string rpc_replay_trace_name = 1;
  optional TraceContext trace_context = 2;
  optional bool warmup = 3;
  optional int64 timestamp_offset_ns = 4;
  map<int32, RpcSample> rpc_samples = 5;
}
message RpcSample {
  optional int64 request_size = 1;
  optional int64 response_size = 2;
  optional int64 start_timestamp_ns = 3;
  optional int64 latency_ns = 4;
  optional int64 latency_weight = 5 [default = 1];
  optional TraceContext trace_context = 6;
  optional bool warmup = 7;
  optional int32 error_index = 8;
  optional int32 server_instance = 9;
}
message RpcPerformanceLog { repeated RpcSample successful_rpc_samples = 1; repeated RpcSample failed_rpc_samples = 2; }
message PeerPerformanceLog { map<int32, RpcPerformanceLog> rpc_logs = 1; }
message RUsage {
  optional double user_cpu_time_seconds = 1;
  optional double system_cpu_time_seconds = 2;
  optional int64 max_resident_set_size = 3;
  optional int64 integral_shared_memory_size = 4;
  optional int64 integral_unshared_data_size = 5;
  optional int64 integral_unshared_stack_size = 6;
  optional int64 page_reclaims_soft_page_faults = 7;
  optional int64 page_faults_hard_page_faults = 8;
  optional int64 swaps = 9;
  optional int64 block_input_operations = 10;
  optional int64 block_output_operations = 11;
  optional int64 ipc_messages_sent = 12;
  optional int64 ipc_messages_received = 13;
  optional int64 signals_received = 14;
  optional int64 voluntary_context_switches = 15;
  optional int64 involuntary_context_switches = 16;
}
message RUsageStats { optional RUsage rusage_start = 1; optional RUsage rusage_diff = 2; }
message ActivityMetric { optional string name = 1; optional int64 value_int = 2; }
message ActivityLog { repeated ActivityMetric activity_metrics = 1; }
message ErrorDictionary { repeated string error_message = 1; }
message ServicePerformanceLog {
  map<string, PeerPerformanceLog> peer_logs = 1;
  repeated RpcReplayTraceLog replay_trace_logs = 5;
  map<string, ActivityLog> activity_logs = 2;
  optional ErrorDictionary error_dictionary = 3;
  optional string engine_error_message = 4;
}
message ServiceLogs { map<string, ServicePerformanceLog> instance_logs = 1; }
message ResourceUsageLogs { optional RUsageStats test_sequencer_usage = 1; map<string, RUsageStats> node_usages = 2; }
message TestResult {
  optional DistributedSystemDescription traffic_config = 1;
  optional ServiceEndpointMap placement = 2;
  optional ServiceLogs service_logs = 3;
  optional ResourceUsageLogs resource_usage_logs = 5;
  repeated string log_summary = 100;
}
message GetTrafficResultResponse { optional ServiceLogs service_logs = 1; map<string, RUsageStats> node_usages = 2; }
message TestSequenceResults { repeated TestResult test_results = 1; }
message Attribute { optional string name = 1; optional string value = 2; }
message NodeRegistration {
  optional string hostname = 1;
  optional string control_ip = 2;
  optional int32 control_port = 3;
  optional string service_address = 6;
  repeated Attribute attributes = 4;
  optional int32 preassigned_node_id = 5 [default = -1];
}
message NodeConfig { optional int32 node_id = 1; optional string node_alias = 2; }
message ServiceEndpoint { optional string endpoint_address = 1; optional string hostname = 2; repeated Attribute attributes = 3; }
message ServiceEndpointMap { map<string, ServiceEndpoint> service_endpoints = 1; }
message IntroducePeersResult {}
message RunTrafficRequest { optional int64 start_timestamp_ns = 1; }
message RunTrafficResponse {}
message GetTrafficResultRequest { optional bool clear_services = 1; }
message CancelTrafficRequest {}
message CancelTrafficResult {}
message ShutdownNodeRequest {}
message ShutdownNodeResult {}
message ConnectRequest { optional bytes initiator_info = 1; }
message ConnectResponse { optional bytes responder_info = 1; }
message GenericRequestResponse {
  optional int32 rpc_index = 1;
  optional TraceContext trace_context = 2;
  optional bool warmup = 3;
  optional int64 response_payload_size = 4;
  optional int64 server_processing_time_ns = 5;
  optional string error_message = 9;
  optional int32 server_instance = 10;
  optional bool trim = 14;
  optional bytes payload = 15;
  optional fixed32 before_payload32 = 12;
  optional fixed64 before_payload64 = 13;
  optional fixed32 after_payload32 = 16;
  optional fixed64 after_payload64 = 17;
  reserved 18 to 1000000;
}
message ServerAddress { optional string ip_address = 1; optional int32 port = 2; optional string socket_address = 3; }
"#;

/// Upstream's services and their methods, as facts (`Service.Method(In)
/// returns (Out)`): rackbench's are exactly these, so any mix of upstream's
/// and rackbench's sequencer, node managers and engines can talk.
const UPSTREAM_METHODS: [&str; 10] = [
    "DistBenchTestSequencer.RegisterNode(NodeRegistration) returns (NodeConfig)",
    "DistBenchTestSequencer.RunTestSequence(TestSequence) returns (TestSequenceResults)",
    "DistBenchNodeManager.ConfigureNode(NodeServiceConfig) returns (ServiceEndpointMap)",
    "DistBenchNodeManager.IntroducePeers(ServiceEndpointMap) returns (IntroducePeersResult)",
    "DistBenchNodeManager.RunTraffic(RunTrafficRequest) returns (RunTrafficResponse)",
    "DistBenchNodeManager.GetTrafficResult(GetTrafficResultRequest) returns (GetTrafficResultResponse)",
    "DistBenchNodeManager.CancelTraffic(CancelTrafficRequest) returns (CancelTrafficResult)",
    "DistBenchNodeManager.ShutdownNode(ShutdownNodeRequest) returns (ShutdownNodeResult)",
    "ConnectionSetup.SetupConnection(ConnectRequest) returns (ConnectResponse)",
    "Traffic.GenericRpc(GenericRequestResponse) returns (GenericRequestResponse)",
];

/// Fields rackbench adds to upstream's control-plane messages (node
/// manager RPCs between rackbench processes only; none is in a result file).
const RACKBENCH_EXTRAS: [&str; 3] = [
    "distbench.RunTrafficRequest.deadline_ns",
    "distbench.RunTrafficResponse.errors",
    "distbench.GetTrafficResultResponse.errors",
];

/// Serves `UPSTREAM` to protox as the one file `upstream.proto`.
struct Source;

impl protox::file::FileResolver for Source {
    fn open_file(&self, name: &str) -> Result<protox::file::File, protox::Error> {
        match name {
            "upstream.proto" => protox::file::File::from_source(name, UPSTREAM),
            _ => Err(protox::Error::file_not_found(name)),
        }
    }
}

fn upstream_set() -> FileDescriptorSet {
    let mut compiler = protox::Compiler::with_file_resolver(Source);
    compiler.open_file("upstream.proto").unwrap();
    compiler.file_descriptor_set()
}

fn our_set() -> FileDescriptorSet {
    FileDescriptorSet::decode(distbench::proto::FILE_DESCRIPTOR_SET).unwrap()
}

/// `set` as a pool; with `flat`, every map field is seen as what it is on
/// the wire, a repeated `{ key = 1; value = 2; }` message, so decoding keeps
/// entries in their order and with explicit keys.
fn pool(mut set: FileDescriptorSet, flat: bool) -> DescriptorPool {
    fn clear_map_entries(message: &mut DescriptorProto) {
        if let Some(options) = message.options.as_mut() {
            options.map_entry = None;
        }
        message.nested_type.iter_mut().for_each(clear_map_entries);
    }
    if flat {
        for file in &mut set.file {
            file.message_type.iter_mut().for_each(clear_map_entries);
        }
    }
    DescriptorPool::from_file_descriptor_set(set).unwrap()
}

fn upstream_pool(flat: bool) -> DescriptorPool {
    pool(upstream_set(), flat)
}

fn our_pool(flat: bool) -> DescriptorPool {
    pool(our_set(), flat)
}

/// What a field is on the wire and to upstream's tools.
fn field_facts(f: &FieldDescriptor) -> String {
    let kind = match f.kind() {
        Kind::Message(m) => format!("message {}", m.full_name()),
        Kind::Enum(e) => {
            let values: Vec<String> = e
                .values()
                .map(|v| format!("{}={}", v.name(), v.number()))
                .collect();
            format!("enum {} {{{}}}", e.full_name(), values.join(" "))
        }
        k => format!("{k:?}"),
    };
    format!(
        "{} = {}: {:?} {kind} packed={} default={:?} oneof={:?} deprecated={:?}",
        f.name(),
        f.number(),
        f.cardinality(),
        f.is_packed(),
        f.field_descriptor_proto().default_value,
        f.containing_oneof().map(|o| o.name().to_string()),
        f.field_descriptor_proto()
            .options
            .as_ref()
            .and_then(|o| o.deprecated),
    )
}

fn all_messages(pool: &DescriptorPool) -> Vec<MessageDescriptor> {
    pool.all_messages().collect()
}

/// Every upstream message, map entry and enum is ours with the same name,
/// numbers, types, labels, defaults and packing; ours adds only the listed
/// control-plane fields.
#[test]
fn schema_matches_upstream_facts() {
    let upstream = upstream_pool(false);
    let ours = our_pool(false);
    let mut problems = Vec::new();
    let mut checked = 0;
    for um in all_messages(&upstream) {
        let Some(om) = ours.get_message_by_name(um.full_name()) else {
            problems.push(format!("missing message {}", um.full_name()));
            continue;
        };
        if um.is_map_entry() != om.is_map_entry() {
            problems.push(format!("{}: map entry differs", um.full_name()));
        }
        for uf in um.fields() {
            checked += 1;
            match om.get_field_by_name(uf.name()) {
                None => problems.push(format!("missing {}", uf.full_name())),
                Some(of) if field_facts(&of) != field_facts(&uf) => problems.push(format!(
                    "{}:\n  upstream {}\n  ours     {}",
                    um.full_name(),
                    field_facts(&uf),
                    field_facts(&of)
                )),
                Some(_) => {}
            }
        }
        for of in om.fields() {
            if um.get_field_by_name(of.name()).is_none()
                && !RACKBENCH_EXTRAS.contains(&of.full_name())
            {
                problems.push(format!("not upstream's: {}", field_facts(&of)));
            }
        }
        let reserved = |m: &MessageDescriptor| {
            m.descriptor_proto()
                .reserved_range
                .iter()
                .map(|r| (r.start(), r.end()))
                .collect::<Vec<_>>()
        };
        if reserved(&um) != reserved(&om) {
            problems.push(format!("{}: reserved numbers differ", um.full_name()));
        }
    }
    assert_eq!(problems, Vec::<String>::new());
    // The facts are the whole schema, not a few messages.
    assert!(checked > 200, "only {checked} fields checked");
}

/// rackbench's services have upstream's methods, no more and no fewer.
#[test]
fn services_are_upstreams() {
    let ours = our_pool(false);
    let mut methods: Vec<String> = ours
        .services()
        .flat_map(|s| {
            s.methods()
                .map(|m| {
                    format!(
                        "{}.{}({}) returns ({})",
                        s.name(),
                        m.name(),
                        m.input().name(),
                        m.output().name()
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect();
    methods.sort();
    let mut want: Vec<String> = UPSTREAM_METHODS.iter().map(|m| m.to_string()).collect();
    want.sort();
    assert_eq!(methods, want);
}

/// Names of the fields set anywhere in `msg` (as `Message.field`), and the
/// number of unknown fields met. Map entries (flat pools) count as
/// messages.
fn set_fields(msg: &DynamicMessage, names: &mut BTreeSet<String>) -> usize {
    let mut unknown = msg.unknown_fields().count();
    for (field, value) in msg.fields() {
        names.insert(field.full_name().to_string());
        let items: Vec<&Value> = match value {
            Value::List(items) => items.iter().collect(),
            Value::Map(map) => map.values().collect(),
            v => vec![v],
        };
        for v in items {
            if let Value::Message(m) = v {
                unknown += set_fields(m, names);
            }
        }
    }
    unknown
}

/// `bytes` read as upstream's `message` and as ours: no unknown field, and
/// the same text (field names and values) in both. Both read maps as entry
/// lists, so the text is in wire order. Returns the fields set.
fn read_alike(bytes: &[u8], message: &str) -> BTreeSet<String> {
    let upstream = upstream_pool(true).get_message_by_name(message).unwrap();
    let ours = our_pool(true).get_message_by_name(message).unwrap();
    let theirs = DynamicMessage::decode(upstream, bytes).unwrap();
    let mine = DynamicMessage::decode(ours, bytes).unwrap();
    let mut names = BTreeSet::new();
    assert_eq!(set_fields(&theirs, &mut names), 0, "unknown fields");
    assert_eq!(set_fields(&mine, &mut BTreeSet::new()), 0);
    assert_eq!(theirs.to_text_format(), mine.to_text_format());
    // Upstream's reading of the bytes writes them back unchanged: every
    // field has the wire type upstream expects.
    assert!(theirs.encode_to_vec() == bytes, "re-encoded bytes differ");
    names
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Every TraceContext field, as a full name.
const TRACE_FIELDS: [&str; 6] = [
    "distbench.TraceContext.engine_ids",
    "distbench.TraceContext.actionlist_indices",
    "distbench.TraceContext.actionlist_invocations",
    "distbench.TraceContext.action_indices",
    "distbench.TraceContext.action_iterations",
    "distbench.TraceContext.fanout_index",
];

/// Two tests: traced RPCs with a nested fan-out, warm-up and an activity;
/// and an overloaded server (more handlers than allowed), which ends the
/// traffic early with failed samples and the engine's error message.
const RUN: &str = r#"
tests {
  name: 'traced'
  services { name: 'c' count: 1 }
  services { name: 's' count: 2 }
  payload_descriptions { name: 'req' size: 100 }
  payload_descriptions { name: 'resp' size: 300 }
  rpc_descriptions { name: 'q' client: 'c' server: 's' request_payload_name: 'req'
                     response_payload_name: 'resp' tracing_interval: 2 }
  rpc_descriptions { name: 'inner' client: 's' server: 's' fanout_filter: 'random' }
  activity_configs { name: 'spin' activity_settings { name: 'activity_func' string_value: 'ConsumeCpu' }
                     activity_settings { name: 'array_size' int64_value: 10 } }
  action_lists { name: 'c' action_names: ['send', 'work'] }
  actions { name: 'send' rpc_name: 'q' iterations { max_iteration_count: 20 warmup_iterations: 2 } }
  actions { name: 'work' activity_config_name: 'spin' iterations { max_iteration_count: 3 } }
  action_lists { name: 'q' action_names: 'fwd' }
  actions { name: 'fwd' rpc_name: 'inner' }
  action_lists { name: 'inner' }
}
tests {
  name: 'overloaded'
  services { name: 'c' count: 1 }
  services { name: 's' count: 1 }
  rpc_descriptions { name: 'q' client: 'c' server: 's' }
  overload_limits { max_threads: 2 }
  protocol_driver_options { name: 'default_protocol_driver_options' protocol_name: 'grpc'
                            server_settings { name: 'server_type' string_value: 'handoff' } }
  activity_configs { name: 'sleep' activity_settings { name: 'activity_func' string_value: 'SleepFor' }
                     activity_settings { name: 'duration_us' int64_value: 20000 } }
  action_lists { name: 'c' action_names: 'send' }
  actions { name: 'send' rpc_name: 'q' iterations { max_iteration_count: 40 max_parallel_iterations: 8 } }
  action_lists { name: 'q' action_names: 'work' }
  actions { name: 'work' activity_config_name: 'sleep' }
}"#;

/// A real run's result file, read with upstream's schema: every field
/// rackbench wrote is one upstream knows, under the same name, with the
/// wire type upstream expects.
#[test]
fn result_file_reads_with_upstream_schema() {
    let seq: TestSequence = distbench::textproto::parse_test_sequence(RUN, "wire.config").unwrap();
    let test_results = rt().block_on(async {
        let c = LocalCluster::start(3, 0).await.unwrap();
        let mut out = Vec::new();
        for t in &seq.tests {
            out.push(c.run_test(t).await);
        }
        c.stop().await;
        out.into_iter().collect::<Result<Vec<_>, _>>().unwrap()
    });
    let results = TestSequenceResults { test_results };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("results.pb");
    files::write(&path, &results, Encoding::Binary).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let names = read_alike(&bytes, "distbench.TestSequenceResults");
    // The run wrote the parts of a result upstream's tools read: traced
    // samples (the TraceContext fields that were swapped among them),
    // warm-up flags, activity logs, failed samples and the engine's error,
    // placement and resource usage.
    for wanted in [
        "distbench.TestResult.traffic_config",
        "distbench.TestResult.placement",
        "distbench.TestResult.log_summary",
        "distbench.TestResult.resource_usage_logs",
        "distbench.ResourceUsageLogs.node_usages",
        "distbench.RUsage.user_cpu_time_seconds",
        "distbench.ServiceEndpoint.endpoint_address",
        "distbench.PayloadSpec.size",
        "distbench.RpcSpec.tracing_interval",
        "distbench.OverloadLimits.max_threads",
        "distbench.RpcSample.latency_weight",
        "distbench.ServicePerformanceLog.peer_logs",
        "distbench.ServicePerformanceLog.activity_logs",
        "distbench.ServicePerformanceLog.error_dictionary",
        "distbench.ServicePerformanceLog.engine_error_message",
        "distbench.ErrorDictionary.error_message",
        "distbench.ActivityMetric.value_int",
        "distbench.PeerPerformanceLog.rpc_logs",
        "distbench.RpcPerformanceLog.successful_rpc_samples",
        "distbench.RpcPerformanceLog.failed_rpc_samples",
        "distbench.RpcSample.latency_ns",
        "distbench.RpcSample.warmup",
        "distbench.RpcSample.error_index",
        "distbench.RpcSample.trace_context",
    ]
    .into_iter()
    .chain(TRACE_FIELDS)
    {
        assert!(names.contains(wanted), "{wanted} not written: {names:?}");
    }
    // Compressed, the same message (what `--outfile x.pb.gz` writes).
    let gz = dir.path().join("results.pb.gz");
    files::write(&gz, &results, Encoding::GzipBinary).unwrap();
    let mut raw = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(std::fs::read(&gz).unwrap().as_slice()),
        &mut raw,
    )
    .unwrap();
    assert!(raw == bytes);
}

/// The regression for the swapped fields: with distinct values, each
/// TraceContext field sits at upstream's number (indices 3, invocations 4).
#[test]
fn trace_context_fields_have_upstream_numbers() {
    let trace = TraceContext {
        engine_ids: vec![11],
        actionlist_indices: vec![33],
        actionlist_invocations: vec![44],
        action_indices: vec![55],
        action_iterations: vec![66],
        fanout_index: vec![77],
        ..Default::default()
    };
    let bytes = trace.encode_to_vec();
    // Packed int64 fields: tag (number << 3 | 2), length 1, value. Written
    // out by hand, independent of any descriptor.
    assert_eq!(
        bytes,
        [
            0x0a, 1, 11, // 1 engine_ids
            0x1a, 1, 33, // 3 actionlist_indices
            0x22, 1, 44, // 4 actionlist_invocations
            0x2a, 1, 55, // 5 action_indices
            0x32, 1, 66, // 6 action_iterations
            0x3a, 1, 77, // 7 fanout_index
        ]
    );
    let upstream = upstream_pool(false)
        .get_message_by_name("distbench.TraceContext")
        .unwrap();
    let theirs = DynamicMessage::decode(upstream, bytes.as_slice()).unwrap();
    for (name, want) in [
        ("engine_ids", 11),
        ("actionlist_indices", 33),
        ("actionlist_invocations", 44),
        ("action_indices", 55),
        ("action_iterations", 66),
        ("fanout_index", 77),
    ] {
        assert_eq!(
            *theirs.get_field_by_name(name).unwrap(),
            Value::List(vec![Value::I64(want)]),
            "{name}"
        );
    }
    read_alike(&bytes, "distbench.TraceContext");
}

/// The data-plane message rackbench's engines exchange is upstream's.
#[test]
fn generic_request_response_has_upstream_numbers() {
    let msg = GenericRequestResponse {
        rpc_index: Some(3),
        trace_context: Some(TraceContext {
            engine_ids: vec![1, 2],
            actionlist_indices: vec![5],
            actionlist_invocations: vec![6],
            ..Default::default()
        }),
        warmup: Some(true),
        response_payload_size: Some(4096),
        server_processing_time_ns: Some(777),
        error_message: Some("RESOURCE_EXHAUSTED: x".into()),
        server_instance: Some(9),
        trim: Some(true),
        payload: Some(vec![0u8; 40].into()),
        before_payload32: Some(0x0102_0304),
        before_payload64: Some(0x0102_0304_0506_0708),
        after_payload32: Some(0x1112_1314),
        after_payload64: Some(0x1112_1314_1516_1718),
    };
    let bytes = msg.encode_to_vec();
    let names = read_alike(&bytes, "distbench.GenericRequestResponse");
    assert_eq!(names.len(), 16, "{names:?}");
    let upstream = upstream_pool(false)
        .get_message_by_name("distbench.GenericRequestResponse")
        .unwrap();
    let theirs = DynamicMessage::decode(upstream, bytes.as_slice()).unwrap();
    let get = |name: &str| theirs.get_field_by_name(name).unwrap().into_owned();
    assert_eq!(get("rpc_index"), Value::I32(3));
    assert_eq!(get("response_payload_size"), Value::I64(4096));
    assert_eq!(get("server_processing_time_ns"), Value::I64(777));
    assert_eq!(get("server_instance"), Value::I32(9));
    assert_eq!(
        get("error_message"),
        Value::String("RESOURCE_EXHAUSTED: x".into())
    );
    assert_eq!(get("before_payload64"), Value::U64(0x0102_0304_0506_0708));
    assert_eq!(get("after_payload32"), Value::U32(0x1112_1314));
    assert_eq!(get("payload"), Value::Bytes(vec![0u8; 40].into()));
    // Upstream's bytes decode as ours too.
    let back = GenericRequestResponse::decode(theirs.encode_to_vec().as_slice()).unwrap();
    assert_eq!(back, msg);
}

/// Upstream's own result files agree with the facts above: they decode
/// with no unknown field and re-encode byte for byte, so the facts are
/// upstream's schema as its serializer uses it.
#[test]
fn upstream_golden_results_match_the_facts() {
    testenv::conformance_or_return!("distbench");
    let root = testenv::conformance_root()
        .unwrap()
        .join("distbench/analysis_golden_results");
    let mut seen = 0;
    for dir in std::fs::read_dir(&root).unwrap() {
        for e in std::fs::read_dir(dir.unwrap().path()).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if !(name.ends_with(".pb") || name.ends_with(".pb.gz")) {
                continue;
            }
            let raw = std::fs::read(&p).unwrap();
            let bytes = if name.ends_with(".gz") {
                let mut out = Vec::new();
                std::io::Read::read_to_end(
                    &mut flate2::read::GzDecoder::new(raw.as_slice()),
                    &mut out,
                )
                .unwrap();
                out
            } else {
                raw
            };
            let names = read_alike(&bytes, "distbench.TestSequenceResults");
            if p.parent().unwrap().ends_with("trace_context_test") {
                for f in TRACE_FIELDS {
                    assert!(names.contains(f), "{name}: no {f}");
                }
            }
            seen += 1;
        }
    }
    assert!(seen >= 5, "found {seen} golden results");
}
