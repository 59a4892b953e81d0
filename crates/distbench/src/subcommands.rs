//! The commands that run traffic: `test_sequencer`, `node_manager`,
//! `run_tests` (upstream's flags and meaning) and `start_localhost` (a
//! sequencer and N node managers in this process, running a sequence from
//! `--infile` or from test_builder patterns).

use crate::Error;
use crate::cluster::{self, LocalCluster};
use crate::files::{self, Encoding};
use crate::metrics;
use crate::node_manager::Addresses;
use crate::proto::{TestResult, TestSequence, TestSequenceResults};
use crate::test_builder;
use anyhow::{Context, bail};
use clap::Parser;
use harness::{Outcome, RunContext};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `test_sequencer`: serves the sequencer until Ctrl-C.
#[derive(Debug, Parser)]
#[command(
    name = "rackbench distbench test_sequencer",
    about = "Run a Distbench test sequencer"
)]
pub struct SequencerArgs {
    /// Port to listen on.
    #[arg(long, default_value_t = 10000)]
    pub port: u16,
    /// Address to listen on (rackbench's flag; 127.0.0.1 means both
    /// 127.0.0.1 and ::1). Without it and --control_plane_device, every
    /// interface, as upstream.
    #[arg(long)]
    pub bind: Option<IpAddr>,
    /// Also run this many node managers in this process (as upstream's
    /// --local_nodes), with node ids 0, 1, ... and this command's device
    /// flags.
    #[arg(long = "local_nodes", default_value_t = 0)]
    pub local_nodes: usize,
    /// Network interface whose address the sequencer (and its local node
    /// managers' control services and instance endpoints) listen on,
    /// instead of every interface.
    #[arg(
        long = "control_plane_device",
        value_name = "DEVICE",
        conflicts_with = "bind"
    )]
    pub control_plane_device: Option<String>,
    /// Network interface whose address the local node managers' service
    /// instances serve their traffic on (this host's primary address by
    /// default, as upstream).
    #[arg(long = "default_data_plane_device", value_name = "DEVICE")]
    pub default_data_plane_device: Option<String>,
    /// Pick a device's IPv4 address over its IPv6 one.
    #[arg(long = "prefer_ipv4")]
    pub prefer_ipv4: bool,
}

/// `node_manager`: registers with a sequencer and hosts service instances.
#[derive(Debug, Parser)]
#[command(
    name = "rackbench distbench node_manager",
    about = "Run a Distbench node manager that registers with a test sequencer"
)]
pub struct NodeManagerArgs {
    /// The sequencer, HOST:PORT.
    #[arg(long = "test_sequencer", value_name = "HOST:PORT")]
    pub test_sequencer: String,
    /// Port of the control service (0 picks one); upstream's default.
    #[arg(long, default_value_t = 10000)]
    pub port: u16,
    /// The gRPC target the sequencer dials back (e.g.
    /// ipv4:///10.0.0.2:10000, dns:///host:10000), when it cannot reach the
    /// control address (NAT, containers, names DNS cannot resolve).
    #[arg(long = "service_address", value_name = "TARGET")]
    pub service_address: Option<String>,
    /// Pick a device's IPv4 address over its IPv6 one
    /// (--default_data_plane_device, --control_plane_device, netdev_name).
    #[arg(long = "prefer_ipv4")]
    pub prefer_ipv4: bool,
    /// Address the control service and the instances' endpoints listen on
    /// (rackbench's flag; 127.0.0.1 means both 127.0.0.1 and ::1). Without
    /// it and --control_plane_device, every interface, as upstream.
    #[arg(long)]
    pub bind: Option<IpAddr>,
    /// Address the service instances serve their traffic on and advertise
    /// to peers (rackbench's flag; without it, --default_data_plane_device
    /// or this host's primary address, as upstream).
    #[arg(
        long = "data_plane_address",
        conflicts_with = "default_data_plane_device"
    )]
    pub data_plane_address: Option<IpAddr>,
    /// Network interface whose address the service instances serve their
    /// traffic on (as upstream's flag), e.g. eth0 or lo.
    #[arg(long = "default_data_plane_device", value_name = "DEVICE")]
    pub default_data_plane_device: Option<String>,
    /// Network interface whose address the control service and the
    /// instances' endpoints listen on (instead of every interface).
    #[arg(
        long = "control_plane_device",
        value_name = "DEVICE",
        conflicts_with = "bind"
    )]
    pub control_plane_device: Option<String>,
    /// `nodeN` first asks the sequencer for node id N (and sets the
    /// node_alias attribute); then node attributes for placement
    /// constraints, NAME=VALUE.
    #[arg(value_name = "[nodeN] NAME=VALUE")]
    pub attributes: Vec<String>,
}

/// A pre-assigned node id and the node attributes.
pub type NodeArguments = (Option<i32>, Vec<(String, String)>);

/// A node manager's positional arguments: the pre-assigned id of a leading
/// `nodeN` (upstream's form: N a non-negative integer written plainly),
/// and the attributes, with `node_alias=nodeN` first when an id is given.
pub fn node_arguments(raw: &[String]) -> anyhow::Result<NodeArguments> {
    let mut rest = raw;
    let mut id = None;
    let mut attrs = Vec::new();
    if let Some(first) = raw.first()
        && let Some(n) = first.strip_prefix("node")
        && !first.contains('=')
    {
        let parsed = n
            .parse::<i32>()
            .ok()
            .filter(|i| *i >= 0 && i.to_string() == n);
        let Some(i) = parsed else {
            bail!(
                "node_manager expected nodeN as the pre-assigned node id, N a non-negative \
                 integer; got '{first}'"
            );
        };
        id = Some(i);
        attrs.push(("node_alias".to_string(), first.clone()));
        rest = &raw[1..];
    }
    attrs.extend(attributes(rest)?);
    Ok((id, attrs))
}

/// `run_tests`: sends a test sequence to a sequencer.
#[derive(Debug, Parser)]
#[command(
    name = "rackbench distbench run_tests",
    about = "Run a Distbench test sequence on a test sequencer and save the results"
)]
pub struct RunTestsArgs {
    /// The sequencer, HOST:PORT.
    #[arg(long = "test_sequencer", value_name = "HOST:PORT")]
    pub test_sequencer: String,
    /// The test sequence (textproto, binary or .gz); standard input (text)
    /// without it, as upstream.
    #[arg(long, value_name = "FILE")]
    pub infile: Option<PathBuf>,
    /// The time limit of every test, an absl duration (130s, 5m, 1h30m):
    /// replaces their test_timeout attributes with its whole seconds, as
    /// upstream; 0 (or under a second) replaces nothing.
    #[arg(
        long = "max_test_duration",
        value_name = "DURATION",
        value_parser = parse_max_test_duration
    )]
    pub max_test_duration: Option<i64>,
    /// Where the results go (TestSequenceResults): a file is rewritten
    /// after each test; /dev/stdout (upstream's default) gets them once the
    /// sequence is done; an empty name saves nothing.
    #[arg(long, value_name = "FILE", default_value = "/dev/stdout")]
    pub outfile: String,
    /// Write the results as binary protobuf (text otherwise; a .gz name
    /// gzips the binary).
    #[arg(long = "binary_output")]
    pub binary_output: bool,
}

/// Where `run_tests` and `test_preview` put the results.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResultsOut {
    /// `--outfile=""`: nowhere.
    Nowhere,
    /// Standard output, once the sequence is done.
    Stdout,
    /// A file, rewritten (atomically) after each test.
    File(PathBuf),
}

impl ResultsOut {
    /// `--outfile` as given; a relative file goes in the run's metrics
    /// folder.
    pub fn of(outfile: &str, ctx: &RunContext) -> Self {
        match outfile {
            "" => ResultsOut::Nowhere,
            "/dev/stdout" | "-" => ResultsOut::Stdout,
            f => ResultsOut::File(ctx.output_path(Path::new(f))),
        }
    }

    /// Saves the results so far to a file.
    fn save_partial(&self, results: &TestSequenceResults, binary: bool) -> anyhow::Result<()> {
        match self {
            ResultsOut::File(p) => save(p, results, binary),
            _ => Ok(()),
        }
    }

    /// Writes the final results: to standard output (text, or binary with
    /// `--binary_output`) or the file.
    fn finish(&self, results: &TestSequenceResults, binary: bool) -> anyhow::Result<()> {
        match self {
            ResultsOut::Nowhere => Ok(()),
            ResultsOut::File(p) => save(p, results, binary),
            ResultsOut::Stdout => {
                use std::io::Write;
                let bytes = files::encode(
                    results,
                    if binary {
                        Encoding::Binary
                    } else {
                        Encoding::Text
                    },
                )
                .map_err(anyhow::Error::msg)?;
                let mut out = std::io::stdout().lock();
                out.write_all(&bytes)
                    .and_then(|()| out.flush())
                    .context("cannot write the results to standard output")
            }
        }
    }

    /// The file, for the record.
    fn file(&self) -> Option<&Path> {
        match self {
            ResultsOut::File(p) => Some(p),
            _ => None,
        }
    }
}

/// `test_preview`: runs a test sequence on one node manager in this
/// process, every service instance bundled on it, as upstream's.
#[derive(Debug, Parser)]
#[command(
    name = "rackbench distbench test_preview",
    about = "Run a Distbench test sequence on a single in-process node manager (every instance \
             on node0) and write the results"
)]
pub struct TestPreviewArgs {
    /// The test sequence (textproto, binary or .gz); standard input (text)
    /// by default, as upstream.
    #[arg(long, value_name = "FILE", default_value = "/dev/stdin")]
    pub infile: PathBuf,
    /// Where the results go: standard output (text) by default, as
    /// upstream; an empty name saves nothing.
    #[arg(long, value_name = "FILE", default_value = "/dev/stdout")]
    pub outfile: String,
    /// Write the results as binary protobuf.
    #[arg(long = "binary_output")]
    pub binary_output: bool,
}

/// The sequence `test_preview` runs: every test's instances bundled on
/// node0 (a test's own bundles are replaced, with upstream's warning on
/// stdout).
pub fn preview_sequence(mut seq: TestSequence) -> TestSequence {
    for test in &mut seq.tests {
        if !test.node_service_bundles.is_empty() {
            println!("WARNING: node_service_bundles will be overwritten");
        }
        let services = test
            .services
            .iter()
            .flat_map(crate::placement::instance_names)
            .collect();
        test.node_service_bundles = [(
            "node0".to_string(),
            crate::proto::ServiceBundle { services },
        )]
        .into();
    }
    seq
}

/// `test_preview`.
pub fn run_test_preview(a: &TestPreviewArgs, ctx: &RunContext) -> anyhow::Result<Outcome> {
    let seq = preview_sequence(crate::check::load_checked(&a.infile)?);
    // Upstream's test_preview prints the results in text when --outfile is
    // empty (run_tests saves nothing then).
    let (outfile, binary) = if a.outfile.is_empty() {
        (ResultsOut::Stdout, false)
    } else {
        (ResultsOut::of(&a.outfile, ctx), a.binary_output)
    };
    let rt = runtime()?;
    let mut results = TestSequenceResults::default();
    let mut error = None;
    let mut interrupted = false;
    rt.block_on(async {
        let cluster = LocalCluster::start(1, 0)
            .await
            .map_err(anyhow::Error::msg)?;
        for test in &seq.tests {
            let r = run_test_until_stopped(&cluster, test, ctx, &mut interrupted).await;
            match r {
                Ok(mut r) => {
                    crate::sequencer::apply_tests_setting(&mut r, seq.tests_setting.as_ref());
                    results.test_results.push(r);
                    outfile.save_partial(&results, binary)?;
                }
                Err(e) => {
                    eprintln!("RunTestSequence failed with error:{e}");
                    error = Some(e);
                    break;
                }
            }
            if interrupted {
                break;
            }
        }
        cluster.stop().await;
        anyhow::Ok(())
    })?;
    if error.is_none() && !interrupted {
        outfile.finish(&results, binary)?;
        print!(
            "\nResult: Preview for {} was successful.\n\n",
            a.infile.display()
        );
    }
    let r = tests_record(
        &results,
        seq.tests.len(),
        error,
        interrupted,
        outfile.file(),
        Some(1),
    );
    Ok(measured(r.success(), &DistbenchRecord::RunTests(r)))
}

/// `start_localhost`: sequencer plus N node managers in one process.
#[derive(Debug, Parser)]
#[command(
    name = "rackbench distbench start_localhost",
    about = "Run a Distbench sequencer and N node managers in this process on loopback; \
             run tests from --infile or --pattern, or serve until Ctrl-C"
)]
pub struct LocalhostArgs {
    /// Number of node managers.
    #[arg(short = 'n', long = "num_nodes", default_value_t = 2)]
    pub nodes: usize,
    /// Sequencer port (0 picks one).
    #[arg(long, default_value_t = 10000)]
    pub port: u16,
    /// A test sequence to run (textproto, binary or .gz).
    #[arg(long, value_name = "FILE", conflicts_with = "pattern")]
    pub infile: Option<PathBuf>,
    /// Tests to generate with test_builder and run, PATTERN[:k=v...]
    /// (repeatable), e.g. client_server:parallel_queries=100.
    #[arg(long, value_name = "PATTERN")]
    pub pattern: Vec<String>,
    /// test_duration of generated tests, seconds.
    #[arg(short = 't', long = "test_duration", default_value_t = 30)]
    pub test_duration: u64,
    /// Where the results go (relative: in the run's metrics folder).
    #[arg(long, value_name = "FILE", default_value = "distbench_results.pb")]
    pub outfile: PathBuf,
}

/// `rpc_server`: one Distbench service instance serving the generic RPC
/// alone, for driving it with other load generators (ghz).
#[derive(Debug, Parser)]
#[command(
    name = "rackbench distbench rpc_server",
    about = "Serve distbench.Traffic/GenericRpc (rpc_index 0) with a fixed response size, \
             for external load generators such as ghz; until Ctrl-C"
)]
pub struct RpcServerArgs {
    /// Port to listen on.
    #[arg(long, default_value_t = 10086)]
    pub port: u16,
    /// Address to listen on (127.0.0.1, the default, means both 127.0.0.1
    /// and ::1).
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// Response payload size in bytes.
    #[arg(long = "response_size", default_value_t = 32)]
    pub response_size: i32,
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

/// `--max_test_duration`: an absl duration, in whole seconds (truncated,
/// as upstream's ToInt64Seconds); negative ones are refused.
pub fn parse_max_test_duration(v: &str) -> Result<i64, Error> {
    let ns = crate::flags::parse_absl_duration(v)?;
    if ns < 0 {
        return Err(Error::Input(format!(
            "'{v}' is negative: a test needs a positive time limit"
        )));
    }
    Ok(i64::try_from(ns / 1_000_000_000).unwrap_or(i64::MAX))
}

/// Accepts absl-style single-dash long flags (`-infile=F`) as well.
pub fn normalize(arg: &str) -> String {
    let bytes = arg.as_bytes();
    if bytes.len() > 2 && bytes[0] == b'-' && bytes[1].is_ascii_alphabetic() && bytes[2] != b'=' {
        format!("-{arg}")
    } else {
        arg.to_string()
    }
}

/// Parses `args` (after the subcommand) with clap, as a usage error.
pub fn parse_args<T: Parser>(sub: &str, args: &[String]) -> anyhow::Result<T> {
    let argv = std::iter::once(sub.to_string()).chain(args.iter().map(|a| normalize(a)));
    T::try_parse_from(argv).map_err(|e| {
        // clap's text starts with its own "error: ", and ours is added
        // where the error is printed.
        let text = e.render().to_string();
        let text = text.trim_end();
        anyhow::anyhow!("{}", text.strip_prefix("error: ").unwrap_or(text))
    })
}

/// Keeps large buffers (payloads, HTTP/2 frames of 256 KiB responses) in
/// the heap: glibc serves allocations over 128 KiB with mmap and returns
/// them with munmap, so every large RPC paid page faults and page clearing
/// (a fifth of the CPU of client_server 1x1x100 here).
fn keep_large_buffers() {
    // SAFETY: mallopt only changes allocator tunables.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 64 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    keep_large_buffers();
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .max(2);
    rpc::runtime(threads, "distbench").context("cannot start the tokio runtime")
}

/// Parsed `NAME=VALUE` attributes.
pub fn attributes(raw: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    raw.iter()
        .map(|a| match a.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => bail!("node attribute '{a}' is not NAME=VALUE"),
        })
        .collect()
}

/// Checks the inputs of `start_localhost` without running anything.
pub fn localhost_tests(a: &LocalhostArgs) -> anyhow::Result<TestSequence> {
    if a.nodes == 0 {
        bail!("start_localhost: -n must be at least 1");
    }
    if let Some(f) = &a.infile {
        return crate::check::load_checked(f);
    }
    if a.pattern.is_empty() {
        return Ok(TestSequence::default());
    }
    let mut raw = vec!["-t".to_string(), a.test_duration.to_string()];
    raw.extend(a.pattern.iter().cloned());
    let inv = test_builder::args::parse(&raw)?;
    let generated = test_builder::generate(&inv, &test_builder::Environment::from_process())?;
    let seq = generated.sequence();
    crate::check::validate(&seq, "generated tests").map_err(anyhow::Error::msg)?;
    Ok(seq)
}

/// How long a test should take, for the progress display: its longest
/// action bounded by `iterations.max_duration_us` (0 when none is: such a
/// test ends with its iteration counts, which say nothing of time).
fn expected_duration(test: &crate::proto::DistributedSystemDescription) -> std::time::Duration {
    test.actions
        .iter()
        .filter_map(|a| a.iterations.as_ref()?.max_duration_us)
        .map(|us| std::time::Duration::from_micros(us.max(0) as u64))
        .max()
        .unwrap_or_default()
}

/// Writes the results (atomically, as every results file).
fn save(path: &Path, results: &TestSequenceResults, binary: bool) -> anyhow::Result<()> {
    let encoding = match Encoding::from_path(path) {
        Encoding::Text if binary => Encoding::Binary,
        e => e,
    };
    files::write(path, results, encoding)?;
    Ok(())
}

/// Prints a test's `Test summary:` block on stdout, where upstream's
/// run_tests prints it (as each test ends; upstream prints them all once
/// the sequence is done).
/// An engine that stopped its traffic early (overload, or told so by an
/// overloaded peer) is named on stderr: the test still completes with the
/// results until then, as upstream's does.
fn print_summary(r: &TestResult, progress: Option<&harness::progress::Progress>) {
    use std::io::Write;
    match progress {
        // Around the progress bar, line by line.
        Some(p) => {
            let mut text = Vec::new();
            let _ = write_summary(&r.log_summary, &mut text);
            for line in String::from_utf8_lossy(&text).lines() {
                p.output(line);
            }
        }
        None => {
            let mut out = std::io::stdout().lock();
            let _ = write_summary(&r.log_summary, &mut out).and_then(|_| out.flush());
        }
    }
    let name = metrics::test_name(r);
    for (instance, message) in metrics::test_figures(r).engine_errors {
        if message.contains("RESOURCE_EXHAUSTED") {
            eprintln!(
                "distbench: test '{name}': {instance} stopped its traffic early: {message}; \
                 the results cover the traffic until then"
            );
        }
    }
}

/// One test's `Test summary:` block.
pub fn write_summary(lines: &[String], out: &mut dyn std::io::Write) -> std::io::Result<()> {
    writeln!(out, "Test summary:")?;
    for line in lines {
        writeln!(out, "{line}")?;
    }
    writeln!(out)
}

/// The version of [`DistbenchRecord`]; raise it when its shape changes.
pub const RECORD_VERSION: u32 = 2;

/// What a run keeps with its stored run, by subcommand: for `run_tests`
/// and `start_localhost`, what each finished test measured and its summary
/// lines (the results proto's `log_summary`, which upstream prints as
/// `Test summary:`; the raw samples stay in the run's outfile); for the
/// servers, where they listened and what they saw. The report's metrics
/// are derived from it ([`run_metrics`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "mode")]
pub enum DistbenchRecord {
    #[serde(rename = "run_tests")]
    RunTests(TestsRecord),
    /// `start_localhost` running tests.
    #[serde(rename = "start_localhost")]
    Localhost(TestsRecord),
    /// `start_localhost` without tests: served until stopped.
    #[serde(rename = "start_localhost_serve")]
    LocalhostServe { address: String, nodes: usize },
    #[serde(rename = "test_sequencer")]
    Sequencer(SequencerRecord),
    #[serde(rename = "node_manager")]
    NodeManager(NodeManagerRecord),
    #[serde(rename = "rpc_server")]
    RpcServer { address: String, response_size: i32 },
}

/// A run of tests.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TestsRecord {
    pub tests_planned: usize,
    pub tests: Vec<TestRecord>,
    /// What stopped the sequence, if something did.
    pub error: Option<String>,
    /// Stopped by Ctrl-C or the job's timeout.
    pub interrupted: bool,
    /// The results file, as written (resolved against the metrics folder).
    pub outfile: Option<String>,
    /// `start_localhost`'s node managers.
    pub nodes: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TestRecord {
    pub name: String,
    pub summary: Vec<String>,
    pub figures: metrics::TestFigures,
}

/// A `test_sequencer` run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SequencerRecord {
    pub address: String,
    pub local_nodes: usize,
    /// Node managers registered when it stopped.
    pub registered_nodes: usize,
}

/// A `node_manager` run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NodeManagerRecord {
    pub node_alias: String,
    pub test_sequencer: String,
    pub control_address: String,
    /// Stopped by the sequencer's shutdown rather than Ctrl-C.
    pub shutdown_by_sequencer: bool,
}

/// The report's metrics of a run of tests: one entry per test, and the
/// first test's overall numbers at the top for jobs of one test.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TestsMetrics {
    #[serde(flatten)]
    pub first: Option<FirstTestMetrics>,
    pub tests_planned: usize,
    pub tests_completed: usize,
    pub tests: Vec<metrics::TestMetrics>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Only `true`, when interrupted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outfile: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes: Option<usize>,
}

/// The first test's overall figures, at the top of the metrics.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FirstTestMetrics {
    /// Successful, non-warm-up RPCs.
    pub rpcs: u64,
    pub kqps: Option<f64>,
    pub p50_latency_us: Option<f64>,
    pub p99_latency_us: Option<f64>,
    pub response_mib_per_s: Option<f64>,
    pub failed_rpcs: u64,
}

/// The report's metrics of a `test_sequencer` run.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SequencerMetrics {
    pub registered_nodes: usize,
}

/// The report's metrics of a `node_manager` run.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct NodeManagerMetrics {
    pub node_alias: String,
    pub shutdown_by_sequencer: bool,
}

/// The servers without figures of their own (`rpc_server`,
/// `start_localhost` without tests): no metrics.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct NoMetrics {}

/// The report's metrics of a run, by subcommand.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub enum DistbenchMetrics {
    Tests(TestsMetrics),
    Sequencer(SequencerMetrics),
    NodeManager(NodeManagerMetrics),
    None(NoMetrics),
}

impl TestsRecord {
    /// The report's metrics of the run.
    pub fn metrics(&self) -> TestsMetrics {
        let tests: Vec<metrics::TestMetrics> = self
            .tests
            .iter()
            .map(|t| t.figures.metrics(&t.name, &t.summary))
            .collect();
        let first = tests.first().map(|t| FirstTestMetrics {
            rpcs: t.overall.samples,
            kqps: t.overall.kqps,
            p50_latency_us: t.overall.latency_us.p50,
            p99_latency_us: t.overall.latency_us.p99,
            response_mib_per_s: t.overall.response_mib_per_s,
            failed_rpcs: t.overall.failed,
        });
        TestsMetrics {
            first,
            tests_planned: self.tests_planned,
            tests_completed: tests.len(),
            tests,
            error: self.error.clone(),
            interrupted: self.interrupted.then_some(true),
            outfile: self.outfile.clone(),
            nodes: self.nodes,
        }
    }

    /// Whether every planned test ran to its end.
    pub fn success(&self) -> bool {
        self.error.is_none() && !self.interrupted && self.tests.len() == self.tests_planned
    }
}

/// The report's metrics of a run, derived from its record.
pub fn run_metrics(r: &DistbenchRecord) -> DistbenchMetrics {
    match r {
        DistbenchRecord::RunTests(t) | DistbenchRecord::Localhost(t) => {
            DistbenchMetrics::Tests(t.metrics())
        }
        DistbenchRecord::Sequencer(s) => DistbenchMetrics::Sequencer(SequencerMetrics {
            registered_nodes: s.registered_nodes,
        }),
        DistbenchRecord::NodeManager(n) => DistbenchMetrics::NodeManager(NodeManagerMetrics {
            node_alias: n.node_alias.clone(),
            shutdown_by_sequencer: n.shutdown_by_sequencer,
        }),
        DistbenchRecord::LocalhostServe { .. } | DistbenchRecord::RpcServer { .. } => {
            DistbenchMetrics::None(NoMetrics {})
        }
    }
}

/// The text of a run again: the test summaries a run of tests printed,
/// test by test; for a server, the lines it printed when it started and
/// how it ended.
pub fn write_record(r: &DistbenchRecord, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    match r {
        DistbenchRecord::RunTests(t) | DistbenchRecord::Localhost(t) => {
            for t in &t.tests {
                write_summary(&t.summary, out)?;
            }
        }
        DistbenchRecord::LocalhostServe { address, nodes } => writeln!(
            out,
            "start_localhost: test_sequencer on {address} with {nodes} node managers"
        )?,
        DistbenchRecord::Sequencer(s) => {
            writeln!(out, "test_sequencer listening on {}", s.address)?;
            if s.local_nodes > 0 {
                writeln!(
                    out,
                    "test_sequencer: {} local node managers registered",
                    s.local_nodes
                )?;
            }
            writeln!(
                out,
                "test_sequencer: stopped with {} node managers registered",
                s.registered_nodes
            )?;
        }
        DistbenchRecord::NodeManager(n) => {
            writeln!(
                out,
                "node_manager {} registered with {}; control on {}",
                n.node_alias, n.test_sequencer, n.control_address
            )?;
            writeln!(
                out,
                "node_manager {}: {}",
                n.node_alias,
                if n.shutdown_by_sequencer {
                    "shut down by the test sequencer"
                } else {
                    "stopped"
                }
            )?;
        }
        DistbenchRecord::RpcServer {
            address,
            response_size,
        } => writeln!(out, "{}", rpc_server_line(address, *response_size))?,
    }
    out.flush()
}

/// The line `rpc_server` prints when it serves.
fn rpc_server_line(address: &str, response_size: i32) -> String {
    format!(
        "rpc_server: distbench.Traffic/GenericRpc on {address} (rpc_index 0, {response_size} B responses)"
    )
}

/// The record of a run of tests.
fn tests_record(
    results: &TestSequenceResults,
    planned: usize,
    error: Option<String>,
    interrupted: bool,
    outfile: Option<&Path>,
    nodes: Option<usize>,
) -> TestsRecord {
    TestsRecord {
        tests_planned: planned,
        tests: results
            .test_results
            .iter()
            .map(|r| TestRecord {
                name: metrics::test_name(r),
                summary: r.log_summary.clone(),
                figures: metrics::test_figures(r),
            })
            .collect(),
        error,
        interrupted,
        outfile: outfile.map(|p| p.display().to_string()),
        nodes,
    }
}

/// A measured run's outcome.
fn measured(success: bool, r: &DistbenchRecord) -> Outcome {
    Outcome::measured(success, harness::Record::of("distbench", RECORD_VERSION, r))
}

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

/// The address a control service listens on, as upstream's: the device's
/// address, else `--bind` (rackbench's), else every interface; and the
/// address it names, when it names one.
fn control_address(
    device: Option<&str>,
    bind: Option<IpAddr>,
) -> anyhow::Result<(IpAddr, Option<IpAddr>)> {
    let named = match (device, bind) {
        (Some(dev), _) => Some(crate::netif::device_address(dev)?),
        (None, Some(ip)) if !ip.is_unspecified() => Some(ip),
        _ => None,
    };
    let listen = named.or(bind).unwrap_or_else(crate::netif::every_interface);
    Ok((listen, named))
}

/// Where a node manager's instances listen, what they advertise and where
/// they serve their traffic, from its flags, as upstream's node manager
/// chooses: the endpoints listen with the control service and advertise
/// its named address (else this host's primary address); the traffic goes
/// on the data-plane device's address (else this host's primary address).
/// rackbench's `--bind` and `--data_plane_address` name them directly.
fn instance_addresses(
    listen: IpAddr,
    named: Option<IpAddr>,
    bind_named: bool,
    data_plane_address: Option<IpAddr>,
    data_device: Option<&str>,
) -> anyhow::Result<Addresses> {
    let data = match (data_plane_address, data_device) {
        (Some(ip), _) => ip,
        (None, Some(dev)) => crate::netif::device_address(dev)?,
        // --bind (ours) keeps everything on its address.
        (None, None) if bind_named => named.unwrap_or(listen),
        (None, None) => crate::netif::best_address()?,
    };
    let endpoint = match named.or(data_plane_address) {
        Some(ip) => ip,
        None => crate::netif::best_address()?,
    };
    Ok(Addresses {
        listen,
        endpoint,
        data,
    })
}

/// The sequencer's listening address and its local node managers'
/// addresses, from its flags.
pub fn sequencer_addresses(a: &SequencerArgs) -> anyhow::Result<(IpAddr, Addresses)> {
    let (listen, named) = control_address(a.control_plane_device.as_deref(), a.bind)?;
    let bind_named = a.control_plane_device.is_none() && named.is_some();
    let nodes = instance_addresses(
        listen,
        named,
        bind_named,
        None,
        a.default_data_plane_device.as_deref(),
    )?;
    Ok((listen, nodes))
}

/// The control address and the instances' addresses of a node manager's
/// flags.
pub fn node_addresses(a: &NodeManagerArgs) -> anyhow::Result<(IpAddr, Addresses)> {
    let (listen, named) = control_address(a.control_plane_device.as_deref(), a.bind)?;
    let bind_named = a.control_plane_device.is_none() && named.is_some();
    let addrs = instance_addresses(
        listen,
        named,
        bind_named,
        a.data_plane_address,
        a.default_data_plane_device.as_deref(),
    )?;
    Ok((listen, addrs))
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

/// Waits for Ctrl-C (the harness's stop flag) or `notify`; true for notify.
async fn wait_for_stop(
    ctx: &RunContext,
    notify: Option<std::sync::Arc<tokio::sync::Notify>>,
) -> bool {
    let notified = async {
        match notify {
            Some(n) => n.notified().await,
            None => futures::future::pending().await,
        }
    };
    tokio::pin!(notified);
    loop {
        tokio::select! {
            () = &mut notified => return true,
            () = tokio::time::sleep(Duration::from_millis(100)) => {
                if ctx.cancel.is_stopped() {
                    return false;
                }
            }
        }
    }
}

/// `run_tests`.
pub fn run_tests(a: &RunTestsArgs, ctx: &RunContext) -> anyhow::Result<Outcome> {
    let mut seq = run_tests_input(a)?;
    // As upstream: whole seconds replace every test_timeout; 0 replaces
    // nothing.
    if let Some(secs) = a.max_test_duration.filter(|s| *s != 0) {
        for t in &mut seq.tests {
            t.attributes.insert("test_timeout".into(), secs.to_string());
        }
    }
    let outfile = ResultsOut::of(&a.outfile, ctx);
    let rt = runtime()?;
    let mut results = TestSequenceResults::default();
    let run = rt.block_on(async {
        let fut = cluster::run_tests(&a.test_sequencer, &seq, |_, r| {
            print_summary(r, None);
            results.test_results.push(r.clone());
            outfile
                .save_partial(&results, a.binary_output)
                .map_err(|e| crate::Error::Host(format!("{e:#}")))?;
            Ok(())
        });
        tokio::pin!(fut);
        loop {
            tokio::select! {
                r = &mut fut => return Some(r),
                () = tokio::time::sleep(Duration::from_millis(100)) => {
                    if ctx.cancel.is_stopped() {
                        return None;
                    }
                }
            }
        }
    });
    let (error, interrupted) = match run {
        Some(Ok(())) => (None, false),
        Some(Err(e)) => (Some(e.to_string()), false),
        None => (None, true),
    };
    if let Some(e) = &error {
        eprintln!("run_tests: {e}");
    }
    // A failed sequence keeps what was saved after each finished test
    // (nothing when none finished: no empty results file), and prints no
    // results, as upstream's run_tests writes none when the RPC fails.
    let write = error.is_none() && (!interrupted || !results.test_results.is_empty());
    if write && let Err(e) = outfile.finish(&results, a.binary_output) {
        eprintln!("run_tests: unable to save the results: {e:#}");
        return Ok(measured(
            false,
            &DistbenchRecord::RunTests(tests_record(
                &results,
                seq.tests.len(),
                Some(format!("unable to save the results: {e:#}")),
                interrupted,
                None,
                None,
            )),
        ));
    }
    let r = tests_record(
        &results,
        seq.tests.len(),
        error,
        interrupted,
        outfile.file(),
        None,
    );
    Ok(measured(r.success(), &DistbenchRecord::RunTests(r)))
}

/// The sequence `run_tests` sends: `--infile`, else standard input (an
/// empty input is an empty sequence, which only checks the connection, or
/// carries `tests_setting` alone, as upstream's scripts use it).
pub fn run_tests_input(a: &RunTestsArgs) -> anyhow::Result<TestSequence> {
    match &a.infile {
        Some(f) => {
            let seq: TestSequence = files::read(f)?;
            if !seq.tests.is_empty() {
                return crate::check::load_checked(f);
            }
            Ok(seq)
        }
        None => {
            use std::io::Read;
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("cannot read the test sequence from standard input")?;
            let seq = crate::textproto::parse_test_sequence(&text, "<stdin>")?;
            crate::check::validate(&seq, "<stdin>").map_err(anyhow::Error::msg)?;
            Ok(seq)
        }
    }
}

/// Runs one test on a local cluster; Ctrl-C (the harness's stop flag)
/// cancels its traffic, and the test ends with what it measured
/// (`interrupted` is then set).
async fn run_test_until_stopped(
    cluster: &LocalCluster,
    test: &crate::proto::DistributedSystemDescription,
    ctx: &RunContext,
    interrupted: &mut bool,
) -> Result<TestResult, String> {
    let fut = cluster.run_test(test);
    tokio::pin!(fut);
    loop {
        tokio::select! {
            r = &mut fut => return r.map_err(String::from),
            () = tokio::time::sleep(Duration::from_millis(100)), if !*interrupted => {
                if ctx.cancel.is_stopped() {
                    *interrupted = true;
                    for n in &cluster.nodes {
                        n.node.cancel_now().await;
                    }
                }
            }
        }
    }
}

/// `start_localhost`.
pub fn run_localhost(a: &LocalhostArgs, ctx: &RunContext) -> anyhow::Result<Outcome> {
    let seq = localhost_tests(a)?;
    let rt = runtime()?;
    let outfile = ctx.output_path(&a.outfile);
    rt.block_on(async {
        let cluster = LocalCluster::start(a.nodes, a.port)
            .await
            .map_err(anyhow::Error::msg)?;
        eprintln!(
            "start_localhost: test_sequencer on {} with {} node managers",
            cluster.addr(),
            a.nodes
        );
        if seq.tests.is_empty() {
            let address = cluster.addr().to_string();
            wait_for_stop(ctx, None).await;
            cluster.stop().await;
            return Ok(measured(
                true,
                &DistbenchRecord::LocalhostServe {
                    address,
                    nodes: a.nodes,
                },
            ));
        }
        let mut results = TestSequenceResults::default();
        let mut error = None;
        let mut interrupted = false;
        let expected: Vec<std::time::Duration> = seq.tests.iter().map(expected_duration).collect();
        let progress = harness::progress::Progress::new("distbench", expected.iter().sum());
        for (i, test) in seq.tests.iter().enumerate() {
            progress.phase_for(
                &format!("test {}/{}: {}", i + 1, seq.tests.len(), test.name()),
                expected[i..].iter().sum(),
            );
            let r = run_test_until_stopped(&cluster, test, ctx, &mut interrupted).await;
            match r {
                Ok(mut r) => {
                    crate::sequencer::apply_tests_setting(&mut r, seq.tests_setting.as_ref());
                    print_summary(&r, Some(&progress));
                    results.test_results.push(r);
                    save(&outfile, &results, true)?;
                }
                Err(e) => {
                    eprintln!("start_localhost: {e}");
                    error = Some(e);
                    break;
                }
            }
            if interrupted {
                break;
            }
        }
        progress.finish();
        cluster.stop().await;
        let r = tests_record(
            &results,
            seq.tests.len(),
            error,
            interrupted,
            Some(&outfile),
            Some(a.nodes),
        );
        Ok(measured(r.success(), &DistbenchRecord::Localhost(r)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::fixtures::{empty_usage, rich};
    use harness::{Record, Workload};
    use serde_json::Value;

    #[test]
    fn node_manager_positional_arguments() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let (id, attrs) = node_arguments(&args(&["node3", "rack=A"])).unwrap();
        assert_eq!(id, Some(3));
        assert_eq!(
            attrs,
            vec![
                ("node_alias".to_string(), "node3".to_string()),
                ("rack".to_string(), "A".to_string())
            ]
        );
        let (id, attrs) = node_arguments(&args(&["rack=A"])).unwrap();
        assert_eq!((id, attrs.len()), (None, 1));
        // An attribute may be called node-something.
        let (id, _) = node_arguments(&args(&["nodepool=x"])).unwrap();
        assert_eq!(id, None);
        for bad in ["node", "node-1", "node01", "nodeX", "node3x"] {
            let e = node_arguments(&args(&[bad])).unwrap_err().to_string();
            assert!(
                e.contains("expected nodeN") && e.contains(bad),
                "{bad}: {e}"
            );
        }
        // nodeN only first, as upstream; later it is an attribute error.
        let e = node_arguments(&args(&["rack=A", "node1"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("'node1' is not NAME=VALUE"), "{e}");
    }

    /// The report's metrics of `r` as the harness derives them: through the
    /// stored record and the workload's `metrics`.
    fn derived(r: &DistbenchRecord) -> serde_json::Map<String, Value> {
        let rec = Record::of("distbench", RECORD_VERSION, r);
        let text = serde_json::to_string(&rec).unwrap();
        let back: Record = serde_json::from_str(&text).unwrap();
        assert_eq!(
            &back
                .decode::<DistbenchRecord>("distbench", RECORD_VERSION)
                .unwrap(),
            r
        );
        crate::Distbench.metrics(&rec).unwrap()
    }

    /// The metrics the untyped implementation gave for the same results.
    const TWO_TESTS_INTERRUPTED: &str = r#"{"error":"boom","failed_rpcs":3,"interrupted":true,"kqps":1.1092623405435384,"p50_latency_us":9.0,"p99_latency_us":15.0,"response_mib_per_s":1109.2623405435386,"rpcs":10,"tests":[{"activity_iterations":{"spin":42},"log_summary":["line one","line two"],"name":"rich","node_cpu_secs":1.9375,"node_max_rss_kib":4096,"overall":{"failed":3,"kqps":1.1092623405435384,"latency_us":{"max":15.0,"min":1.5,"p50":9.0,"p90":15.0,"p99":15.0,"p99.9":15.0},"request_mib_per_s":0.10578750043330559,"response_mib_per_s":1109.2623405435386,"samples":10,"warmup":1},"rpcs":{"idle":{"failed":1,"kqps":0.0,"latency_us":{"max":null,"min":null,"p50":null,"p90":null,"p99":null,"p99.9":null},"request_mib_per_s":0.0,"response_mib_per_s":0.0,"samples":0,"warmup":0},"q":{"failed":2,"kqps":1.1092623405435384,"latency_us":{"max":15.0,"min":1.5,"p50":9.0,"p90":15.0,"p99":15.0,"p99.9":15.0},"request_mib_per_s":0.10578750043330559,"response_mib_per_s":1109.2623405435386,"samples":10,"warmup":1}},"total_time_secs":0.009015},{"log_summary":[],"name":"","node_cpu_secs":-0.0,"node_max_rss_kib":null,"overall":{"failed":0,"kqps":null,"latency_us":{"max":null,"min":null,"p50":null,"p90":null,"p99":null,"p99.9":null},"request_mib_per_s":null,"response_mib_per_s":null,"samples":0,"warmup":0},"rpcs":{},"total_time_secs":0.0}],"tests_completed":2,"tests_planned":3}"#;
    const NO_TEST: &str = r#"{"tests":[],"tests_completed":0,"tests_planned":0}"#;

    #[test]
    fn run_tests_metrics_are_derived_from_the_record() {
        let results = TestSequenceResults {
            test_results: vec![rich(), empty_usage()],
        };
        let r = tests_record(&results, 3, Some("boom".into()), true, None, None);
        assert!(!r.success());
        let mut m = derived(&DistbenchRecord::RunTests(r.clone()));
        // The per-pair traffic came later (the untyped metrics had none):
        // the first test's, through the record.
        let pairs = m["tests"][0].as_object_mut().unwrap().remove("pairs");
        assert_eq!(
            pairs.unwrap().to_string(),
            r#"[{"failed":3,"from":"client","p50_us":9.0,"p99_us":15.0,"request_bytes":1000,"response_bytes":10485760,"rpcs":10,"to":"server"}]"#
        );
        // Compared as text: serde_json's parser may round a float's last
        // digit, its printer does not.
        assert_eq!(Value::Object(m).to_string(), TWO_TESTS_INTERRUPTED);
        // Typed: the first test's figures at the top.
        let t = r.metrics();
        let first = t.first.as_ref().unwrap();
        assert_eq!((first.rpcs, first.failed_rpcs), (10, 3));
        assert_eq!(first.p50_latency_us, Some(9.0));
        assert_eq!(t.tests_completed, 2);
        assert_eq!(t.interrupted, Some(true));

        let none = tests_record(&TestSequenceResults::default(), 0, None, false, None, None);
        assert!(none.success());
        let m = derived(&DistbenchRecord::RunTests(none));
        assert_eq!(Value::Object(m.clone()).to_string(), NO_TEST);
        for absent in ["rpcs", "kqps", "error", "interrupted", "outfile", "nodes"] {
            assert!(!m.contains_key(absent), "{absent}: {m:?}");
        }
    }

    #[test]
    fn start_localhost_metrics_carry_outfile_and_nodes() {
        let results = TestSequenceResults {
            test_results: vec![rich()],
        };
        let r = tests_record(
            &results,
            1,
            None,
            false,
            Some(Path::new("/m/distbench_results.pb")),
            Some(2),
        );
        assert!(r.success());
        let m = derived(&DistbenchRecord::Localhost(r));
        assert_eq!(m["outfile"], "/m/distbench_results.pb");
        assert_eq!(m["nodes"], 2);
        assert_eq!(m["rpcs"], 10);
        assert_eq!(m["tests_completed"], 1);
        assert!(m["kqps"].is_f64());
        assert_eq!(m["tests"][0]["name"], "rich");
        assert_eq!(m["tests"][0]["activity_iterations"]["spin"], 42);
        assert!(!m.contains_key("interrupted") && !m.contains_key("error"));
        let mut text = Vec::new();
        crate::Distbench
            .format(
                &Record::of(
                    "distbench",
                    RECORD_VERSION,
                    &DistbenchRecord::Localhost(tests_record(&results, 1, None, false, None, None)),
                ),
                &mut text,
            )
            .unwrap();
        assert_eq!(
            String::from_utf8(text).unwrap(),
            "Test summary:\nline one\nline two\n\n"
        );
    }

    #[test]
    fn server_metrics_are_derived_from_the_record() {
        let m = derived(&DistbenchRecord::Sequencer(SequencerRecord {
            address: "127.0.0.1:10000".into(),
            local_nodes: 0,
            registered_nodes: 3,
        }));
        assert_eq!(Value::Object(m), serde_json::json!({"registered_nodes": 3}));
        let m = derived(&DistbenchRecord::NodeManager(NodeManagerRecord {
            node_alias: "node1".into(),
            test_sequencer: "127.0.0.1:10000".into(),
            control_address: "127.0.0.1:4242".into(),
            shutdown_by_sequencer: true,
        }));
        assert_eq!(
            Value::Object(m),
            serde_json::json!({"node_alias": "node1", "shutdown_by_sequencer": true})
        );
        for r in [
            DistbenchRecord::RpcServer {
                address: "127.0.0.1:10086".into(),
                response_size: 32,
            },
            DistbenchRecord::LocalhostServe {
                address: "127.0.0.1:10000".into(),
                nodes: 2,
            },
        ] {
            assert!(derived(&r).is_empty(), "{r:?}");
        }
        let mut text = Vec::new();
        write_record(
            &DistbenchRecord::RpcServer {
                address: "127.0.0.1:10086".into(),
                response_size: 32,
            },
            &mut text,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(text).unwrap(),
            "rpc_server: distbench.Traffic/GenericRpc on 127.0.0.1:10086 (rpc_index 0, 32 B responses)\n"
        );
    }

    #[test]
    fn an_older_record_is_refused() {
        let rec = Record {
            kind: "distbench".into(),
            version: 1,
            data: serde_json::json!({"tests_planned": 0, "tests": []}),
        };
        let e = crate::Distbench.metrics(&rec).unwrap_err().to_string();
        assert!(e.contains("an older rackbench"), "{e}");
    }
}
