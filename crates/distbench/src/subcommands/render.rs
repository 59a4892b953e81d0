//! The subcommands' text: a test's `Test summary:` block (as each test
//! ends and again from the record) and a server's lines.

use super::record::DistbenchRecord;
use crate::metrics;
use crate::proto::TestResult;

/// Prints a test's `Test summary:` block on stdout, where upstream's
/// run_tests prints it (as each test ends; upstream prints them all once
/// the sequence is done).
/// An engine that stopped its traffic early (overload, or told so by an
/// overloaded peer) is named on stderr: the test still completes with the
/// results until then, as upstream's does.
pub(super) fn print_summary(r: &TestResult, progress: Option<&harness::progress::Progress>) {
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
pub(super) fn rpc_server_line(address: &str, response_size: i32) -> String {
    format!(
        "rpc_server: distbench.Traffic/GenericRpc on {address} (rpc_index 0, {response_size} B responses)"
    )
}
