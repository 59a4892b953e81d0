//! `distbench analyze` against upstream's golden trees: each case of
//! `shared/conformance/distbench/analysis_golden_results` is analyzed with
//! the flags of upstream's `analysis/results_conversion_test.sh`, and every
//! file must match byte for byte, with no file missing or extra. Then the
//! errors: missing, corrupt and unusable inputs, and bad flags.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

use distbench::Distbench;
use distbench::analyze::{
    self, AnalyzeError, Invocation, Options, OutputFormat, ResultProblem, analyze_file,
};
use distbench::proto::{
    DistributedSystemDescription, PeerPerformanceLog, RpcPerformanceLog, RpcSample, RpcSpec,
    ServiceLogs, ServicePerformanceLog, ServiceSpec, TestResult, TestSequenceResults,
};
use harness::{Cancel, RunContext, Workload};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn golden_root() -> PathBuf {
    testenv::conformance_root()
        .unwrap_or_default()
        .join("distbench/analysis_golden_results")
}

/// Every file under `dir`, relative to it, except what upstream's golden
/// diff leaves out (`*.pb`, `*.config`, `*.gz`: the inputs).
fn tree_files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
                continue;
            }
            let name = path.file_name().unwrap().to_string_lossy();
            if [".pb", ".config", ".gz"].iter().any(|x| name.ends_with(x)) {
                continue;
            }
            let bytes = std::fs::read(&path).unwrap();
            out.insert(path.strip_prefix(root).unwrap().to_path_buf(), bytes);
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// The first line where two files differ, for a readable failure.
fn first_difference(expected: &[u8], actual: &[u8]) -> String {
    let (e, a) = (
        String::from_utf8_lossy(expected),
        String::from_utf8_lossy(actual),
    );
    let (mut el, mut al) = (e.lines(), a.lines());
    for n in 1.. {
        match (el.next(), al.next()) {
            (None, None) => return "same lines, different line endings".to_string(),
            (x, y) if x == y => continue,
            (x, y) => return format!("line {n}: expected {x:?}, got {y:?}"),
        }
    }
    unreachable!()
}

/// Analyzes one golden case with `options` and compares the whole tree.
fn check_golden(case: &str, input: &str, options: Options) {
    let dir = golden_root().join(case);
    let out = tempfile::tempdir().unwrap();
    let analysis = analyze_file(&dir.join(input), out.path(), &options)
        .unwrap_or_else(|e| panic!("{case}: {e}"));
    let expected = tree_files(&dir);
    let actual = tree_files(out.path());
    assert!(!expected.is_empty(), "{case}: no golden files");
    assert_eq!(analysis.tree.len(), actual.len(), "{case}: files written");

    let mut problems = Vec::new();
    for (path, want) in &expected {
        match actual.get(path) {
            None => problems.push(format!("missing {}", path.display())),
            Some(got) if got != want => problems.push(format!(
                "{} differs: {}",
                path.display(),
                first_difference(want, got)
            )),
            Some(_) => {}
        }
    }
    for path in actual.keys().filter(|p| !expected.contains_key(*p)) {
        problems.push(format!("unexpected {}", path.display()));
    }
    assert!(
        problems.is_empty(),
        "{case}: {} of {} golden files wrong:\n{}",
        problems.len(),
        expected.len(),
        problems.join("\n")
    );
}

// The flags of each case are those of upstream's results_conversion_test.sh.

#[test]
fn golden_client_server_with_warmups() {
    testenv::conformance_or_return!("distbench/analysis_golden_results");
    check_golden(
        "client_server_test",
        "client_server_1x1x1-grpc_polling_inline.pb.gz",
        Options {
            include_warmups: true,
            ..Options::default()
        },
    );
}

#[test]
fn golden_supress_header() {
    testenv::conformance_or_return!("distbench/analysis_golden_results");
    check_golden(
        "supress_header_test",
        "multi_level_rpc_2x3x1-grpc_polling_inline.pb",
        Options {
            suppress_header: true,
            ..Options::default()
        },
    );
}

#[test]
fn golden_statistics_format() {
    testenv::conformance_or_return!("distbench/analysis_golden_results");
    check_golden(
        "statistics_format_test",
        "multi_level_rpc_2x3x1-grpc_polling_inline.pb",
        Options {
            format: OutputFormat::Statistics,
            ..Options::default()
        },
    );
}

#[test]
fn golden_trace_context_format() {
    testenv::conformance_or_return!("distbench/analysis_golden_results");
    check_golden(
        "trace_context_test",
        "clique_sync_burst_10x16000x1024x1024-grpc_polling_inline.pb",
        Options {
            format: OutputFormat::TraceContext,
            ..Options::default()
        },
    );
}

#[test]
fn golden_multidimensional() {
    testenv::conformance_or_return!("distbench/analysis_golden_results");
    check_golden(
        "multidimensional_test",
        "2dclique_ring_x_sync_burst_5x3x100000x1024x1024-grpc_polling_inline.pb",
        Options::default(),
    );
}

#[test]
fn warmups_are_left_out_by_default() {
    testenv::conformance_or_return!("distbench/analysis_golden_results");
    let input =
        golden_root().join("client_server_test/client_server_1x1x1-grpc_polling_inline.pb.gz");
    let all = analyze::analyze_input(
        &input,
        &Options {
            include_warmups: true,
            ..Options::default()
        },
    )
    .unwrap();
    let measured = analyze::analyze_input(&input, &Options::default()).unwrap();
    assert_eq!(all.samples.total, measured.samples.total);
    assert!(measured.samples.warmup > 0, "the golden run has warm-ups");
    assert_eq!(all.samples.used, all.samples.total);
    assert_eq!(
        measured.samples.used,
        measured.samples.total - measured.samples.warmup
    );
    let overall = measured.tree.get("overall_summary.txt").unwrap();
    assert_eq!(overall.lines().count() as u64, measured.samples.used + 1);
    let full = all.tree.get("overall_summary.txt").unwrap();
    assert_eq!(full.lines().count() as u64, all.samples.total + 1);
}

/// Upstream's sample counts worked out from the results alone. Upstream
/// counts a list of successful samples each time a summary includes it:
/// the test summary, its client instance's, its RPC's and its pair's file
/// and the overall summary always; the client and service summaries only
/// when the instance names, cut at their last `/`, name a client or server
/// service (never for multidimensional services, `svc/1/2`). Returns
/// (total, warm-up).
fn upstream_counts(results: &TestSequenceResults) -> (u64, u64) {
    fn service(instance: &str) -> &str {
        instance.rsplit_once('/').map_or(instance, |(s, _)| s)
    }
    let (mut total, mut warmup) = (0, 0);
    for test in &results.test_results {
        let config = test.traffic_config.clone().unwrap_or_default();
        let clients: Vec<&str> = config
            .rpc_descriptions
            .iter()
            .flat_map(|r| r.client.iter().map(String::as_str))
            .collect();
        let servers: Vec<&str> = config.rpc_descriptions.iter().map(|r| r.server()).collect();
        let logs = test.service_logs.clone().unwrap_or_default();
        for (instance, log) in &logs.instance_logs {
            for (peer, peer_log) in &log.peer_logs {
                let summaries = 5
                    + u64::from(clients.contains(&service(instance)))
                    + u64::from(servers.contains(&service(peer)));
                for rpc_log in peer_log.rpc_logs.values() {
                    let samples = &rpc_log.successful_rpc_samples;
                    total += summaries * samples.len() as u64;
                    warmup += summaries * samples.iter().filter(|s| s.warmup()).count() as u64;
                }
            }
        }
    }
    (total, warmup)
}

/// What `analyze` prints for each golden case, upstream's lines checked
/// three ways: against the counts worked out from the results
/// ([`upstream_counts`]), against the figures upstream's script printed for
/// the same case (run by hand on these inputs), and line by line where the
/// empty summaries follow from the layout.
#[test]
fn golden_stdout_is_upstreams() {
    testenv::conformance_or_return!("distbench/analysis_golden_results");
    // Case, input, options, and what upstream printed: total, warm-up and
    // empty-summary lines.
    let cases = [
        (
            "client_server_test",
            "client_server_1x1x1-grpc_polling_inline.pb.gz",
            Options {
                include_warmups: true,
                ..Options::default()
            },
            (32417, 7000, 0),
        ),
        (
            "supress_header_test",
            "multi_level_rpc_2x3x1-grpc_polling_inline.pb",
            Options {
                suppress_header: true,
                ..Options::default()
            },
            (840, 84, 10),
        ),
        (
            "statistics_format_test",
            "multi_level_rpc_2x3x1-grpc_polling_inline.pb",
            Options {
                format: OutputFormat::Statistics,
                ..Options::default()
            },
            (840, 84, 10),
        ),
        (
            "trace_context_test",
            "clique_sync_burst_10x16000x1024x1024-grpc_polling_inline.pb",
            Options {
                format: OutputFormat::TraceContext,
                ..Options::default()
            },
            (11592, 0, 10),
        ),
        (
            "multidimensional_test",
            "2dclique_ring_x_sync_burst_5x3x100000x1024x1024-grpc_polling_inline.pb",
            Options::default(),
            (2250, 750, 226),
        ),
    ];
    for (case, input, options, (total, warmup, empty)) in cases {
        let input = golden_root().join(case).join(input);
        let results = analyze::read_results(&input).unwrap();
        let a = analyze::analyze(&results, &options).unwrap();
        let u = &a.upstream;
        assert_eq!(
            (u.total_samples, u.warmup_samples),
            upstream_counts(&results),
            "{case}"
        );
        assert_eq!(
            (u.total_samples, u.warmup_samples, u.empty.len()),
            (total, warmup, empty),
            "{case}"
        );
        // Plain services: every sample in 7 summaries; rackbench counts it once.
        if case != "multidimensional_test" {
            assert_eq!(u.total_samples, 7 * a.samples.total, "{case}");
        }
        let skipped = (!options.include_warmups).then_some(warmup);
        assert_eq!(u.skipped_samples, skipped, "{case}");
        let text = u.stdout(Path::new("out"));
        let mut tail = vec![
            format!("Total samples:  {total}"),
            format!("Warmup samples:  {warmup}"),
        ];
        tail.extend(skipped.map(|s| format!("Skipped samples:  {s}")));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[empty..], tail, "{case}");
        assert!(
            lines[..empty].iter().all(
                |l| l.starts_with("Empty output out/test_0/") && l.ends_with(".txt skipped...")
            ),
            "{case}: {text}"
        );
    }

    // The clique never sends to itself: each instance's pair with itself
    // is empty, and nothing else is.
    let input = golden_root()
        .join("trace_context_test/clique_sync_burst_10x16000x1024x1024-grpc_polling_inline.pb");
    let options = Options {
        format: OutputFormat::TraceContext,
        ..Options::default()
    };
    let a = analyze::analyze_input(&input, &options).unwrap();
    let mut expected: String = (0..10)
        .map(|i| {
            format!(
                "Empty output res/test_0/clique/{i}/clique/{i}/pairwise_summary.txt skipped...\n"
            )
        })
        .collect();
    expected.push_str("Total samples:  11592\nWarmup samples:  0\nSkipped samples:  0\n");
    assert_eq!(a.upstream.stdout(Path::new("res")), expected);

    // Multidimensional services never match their client and service
    // summaries (1 + 15 lines), and each of the 15 instances of the ring
    // sends to one of the 15 peers (15 x 14 empty pairs).
    let input = golden_root().join(
        "multidimensional_test/2dclique_ring_x_sync_burst_5x3x100000x1024x1024-grpc_polling_inline.pb",
    );
    let a = analyze::analyze_input(&input, &Options::default()).unwrap();
    let empty: Vec<String> = a
        .upstream
        .empty
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    assert_eq!(empty[0], "test_0/2dclique/client_summary.txt");
    let services = empty
        .iter()
        .filter(|p| p.ends_with("/service_summary.txt"))
        .count();
    let pairs = empty
        .iter()
        .filter(|p| p.ends_with("/pairwise_summary.txt"))
        .count();
    assert_eq!((services, pairs), (15, 15 * 14));
}

/// A one-test result: `client/0` sent `samples` of RPC 0 to `server/0`.
fn small_result(rpc_name: &str, rpc_index: i32, samples: Vec<RpcSample>) -> TestSequenceResults {
    let service = |name: &str| ServiceSpec {
        name: Some(name.into()),
        count: Some(1),
        ..Default::default()
    };
    let rpc_log = RpcPerformanceLog {
        successful_rpc_samples: samples,
        failed_rpc_samples: vec![],
    };
    let peer = PeerPerformanceLog {
        rpc_logs: BTreeMap::from([(rpc_index, rpc_log)]),
    };
    let instance = ServicePerformanceLog {
        peer_logs: BTreeMap::from([("server/0".to_string(), peer)]),
        ..Default::default()
    };
    TestSequenceResults {
        test_results: vec![TestResult {
            traffic_config: Some(DistributedSystemDescription {
                services: vec![service("client"), service("server")],
                rpc_descriptions: vec![RpcSpec {
                    name: Some(rpc_name.into()),
                    client: vec!["client".into()],
                    server: Some("server".into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            service_logs: Some(ServiceLogs {
                instance_logs: BTreeMap::from([("client/0".to_string(), instance)]),
            }),
            ..Default::default()
        }],
    }
}

fn sample(size: i64, latency: i64) -> RpcSample {
    RpcSample {
        request_size: Some(size),
        latency_ns: Some(latency),
        ..Default::default()
    }
}

#[test]
fn small_result_makes_the_whole_tree() {
    let results = small_result("ping", 0, vec![sample(8, 100), sample(8, 300)]);
    let a = analyze::analyze(&results, &Options::default()).unwrap();
    let text = "Request_size    Latency_ns\n8               100\n8               300\n";
    let expected = [
        "overall_summary.txt",
        "test_0/client/0/client_instance_summary.txt",
        "test_0/client/0/server/0/pairwise_summary.txt",
        "test_0/client/0/server/0/ping.txt",
        "test_0/client/0/server/service_summary.txt",
        "test_0/client/client_summary.txt",
        "test_0/test_summary.txt",
    ];
    let paths: Vec<String> = a
        .tree
        .files()
        .map(|(p, _)| p.display().to_string())
        .collect();
    assert_eq!(paths, expected);
    assert!(a.tree.files().all(|(_, t)| t == text));
}

#[test]
fn empty_results_give_only_the_overall_header() {
    let a = analyze::analyze(&TestSequenceResults::default(), &Options::default()).unwrap();
    assert_eq!(a.tree.len(), 1);
    assert_eq!(
        a.tree.get("overall_summary.txt"),
        Some("Request_size    Latency_ns\n")
    );
}

#[test]
fn missing_input_names_the_file_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let err = analyze_file(&dir.path().join("nope.pb"), &out, &Options::default()).unwrap_err();
    assert!(matches!(err, AnalyzeError::Read(_)), "{err:?}");
    let text = err.to_string();
    assert!(text.starts_with("--input_file "), "{text}");
    assert!(text.contains("nope.pb"), "{text}");
    assert!(!out.exists());
}

#[test]
fn corrupt_inputs_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");

    let bad = dir.path().join("bad.pb");
    std::fs::write(&bad, [0x0a, 0xff, 0xff]).unwrap();
    let err = analyze_file(&bad, &out, &Options::default()).unwrap_err();
    assert!(matches!(err, AnalyzeError::Read(_)), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("bad.pb: not a binary distbench.TestSequenceResults"),
        "{text}"
    );

    // A gzip file cut short (a result of our own, gzipped).
    let result = small_result("ping", 0, (0..200).map(|i| sample(8, 100 + i)).collect());
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut enc, &prost::Message::encode_to_vec(&result)).unwrap();
    let gz = enc.finish().unwrap();
    let cut = dir.path().join("cut.pb.gz");
    std::fs::write(&cut, &gz[..gz.len() / 2]).unwrap();
    let text = analyze_file(&cut, &out, &Options::default())
        .unwrap_err()
        .to_string();
    assert!(text.contains("cut.pb.gz (gzip)"), "{text}");
    assert!(!out.exists());
}

#[test]
fn unknown_output_format_names_the_flag() {
    let args: Vec<String> = [
        "--input_file=r.pb",
        "--output_directory=o",
        "--output_format=csv",
    ]
    .map(String::from)
    .into();
    let err = Invocation::parse(&args).unwrap_err();
    assert!(
        matches!(&err, AnalyzeError::UnknownFormat(f) if f == "csv"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "--output_format 'csv' is not supported: use default, statistics, trace_context or homa"
    );
}

#[test]
fn unusable_results_are_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default();

    let escape = small_result("../../escape", 0, vec![sample(1, 1)]);
    let err = analyze::analyze(&escape, &opts).unwrap_err();
    assert!(
        matches!(&err, ResultProblem::UnsafeName { what: "RPC name", name, .. } if name == "../../escape"),
        "{err}"
    );

    let index = small_result("ping", 3, vec![sample(1, 1)]);
    let err = analyze::analyze(&index, &opts).unwrap_err();
    assert!(
        matches!(
            err,
            ResultProblem::RpcIndex {
                index: 3,
                count: 1,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("client/0 -> server/0"), "{err}");

    let mut unknown = small_result("ping", 0, vec![sample(1, 1)]);
    if let Some(config) = &mut unknown.test_results[0].traffic_config {
        config.services.pop();
    }
    let err = analyze::analyze(&unknown, &opts).unwrap_err();
    assert!(
        matches!(&err, ResultProblem::UnknownService { service, .. } if service == "server"),
        "{err}"
    );

    // Through a file: the error names it, and nothing is written.
    let file = dir.path().join("escape.pb");
    distbench::files::write(&file, &escape, distbench::files::Encoding::Binary).unwrap();
    let out = dir.path().join("out");
    let text = analyze_file(&file, &out, &opts).unwrap_err().to_string();
    assert!(text.contains("escape.pb: test 0: RPC name"), "{text}");
    assert!(!out.exists());
}

fn argv(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// `validate` is what the binary runs before anything else; its errors
/// exit with status 2.
#[test]
fn bad_input_fails_validation() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.pb");
    std::fs::write(&bad, [0x0a, 0xff, 0xff]).unwrap();
    let missing = dir.path().join("missing.pb");
    for (args, needle) in [
        (
            vec![
                format!("--input_file={}", missing.display()),
                "--output_directory=o".into(),
            ],
            "missing.pb",
        ),
        (
            vec![
                format!("--input_file={}", bad.display()),
                "--output_directory=o".into(),
            ],
            "bad.pb: not a binary",
        ),
        (
            vec![
                "--input_file=r.pb".into(),
                "--output_directory=o".into(),
                "--output_format=csv".into(),
            ],
            "--output_format 'csv'",
        ),
        (vec!["--output_directory=o".into()], "--input_file"),
    ] {
        let mut full = vec!["analyze".to_string()];
        full.extend(args);
        let err = Distbench.validate(&full).unwrap_err();
        assert!(format!("{err:#}").contains(needle), "{full:?}: {err:#}");
    }
}

#[test]
fn workload_run_writes_relative_output_into_the_metrics_folder() {
    testenv::conformance_or_return!("distbench/analysis_golden_results");
    let metrics = tempfile::tempdir().unwrap();
    let input =
        golden_root().join("statistics_format_test/multi_level_rpc_2x3x1-grpc_polling_inline.pb");
    let args = argv(&[
        "analyze",
        &format!("--input_file={}", input.display()),
        "--output_directory=tree",
        "--output_format=statistics",
    ]);
    Distbench.validate(&args).unwrap();
    let ctx = RunContext {
        out_dir: metrics.path().to_path_buf(),
        artifacts: Some(metrics.path().to_path_buf()),
        job: "distbench".into(),
        iteration: 0,
        cancel: Cancel::new(),
    };
    let outcome = Distbench.run(&ctx, &args).unwrap();
    // A helper: it writes files and measures nothing.
    assert!(outcome.success);
    assert!(outcome.record.is_none());
    let written = tree_files(&metrics.path().join("tree"));
    assert_eq!(written.len(), 26);
    assert_eq!(
        written[Path::new("overall_summary.txt")],
        std::fs::read(golden_root().join("statistics_format_test/overall_summary.txt")).unwrap()
    );
}
