//! The subcommands' arguments: clap's definitions of `test_sequencer`,
//! `node_manager`, `run_tests`, `test_preview`, `start_localhost` and
//! `rpc_server`, and the parsing of their flags and positional arguments.

use crate::Error;
use anyhow::bail;
use clap::Parser;
use std::net::IpAddr;
use std::path::PathBuf;

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

/// Parsed `NAME=VALUE` attributes.
pub fn attributes(raw: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    raw.iter()
        .map(|a| match a.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => bail!("node attribute '{a}' is not NAME=VALUE"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
