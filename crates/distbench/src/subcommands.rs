//! The commands that run traffic: `test_sequencer`, `node_manager`,
//! `run_tests` (upstream's flags and meaning) and `start_localhost` (a
//! sequencer and N node managers in this process, running a sequence from
//! `--infile` or from test_builder patterns).
//!
//! The arguments are in `cli`, the records in `record` and their metrics in
//! `metrics`, the text in `render`; the runners in `servers`
//! (`test_sequencer`, `node_manager`, `rpc_server`), `run_tests` and `local`
//! (`test_preview`, `start_localhost`), over `drive` and `addresses`
//! and this module's `runtime`.

mod addresses;
mod cli;
mod drive;
mod local;
mod metrics;
mod record;
mod render;
mod run_tests;
mod servers;

pub use addresses::{node_addresses, sequencer_addresses};
pub use cli::{
    LocalhostArgs, NodeArguments, NodeManagerArgs, RpcServerArgs, RunTestsArgs, SequencerArgs,
    TestPreviewArgs, attributes, node_arguments, normalize, parse_args, parse_max_test_duration,
};
pub use drive::ResultsOut;
pub use local::{localhost_tests, preview_sequence, run_localhost, run_test_preview};
pub use metrics::{
    DistbenchMetrics, FirstTestMetrics, NoMetrics, NodeManagerMetrics, SequencerMetrics,
    TestsMetrics, run_metrics,
};
pub use record::{
    DistbenchRecord, NodeManagerRecord, RECORD_VERSION, SequencerRecord, TestRecord, TestsRecord,
};
pub use render::{write_record, write_summary};
pub use run_tests::{run_tests, run_tests_input};
pub use servers::{rpc_server_test, run_node_manager, run_rpc_server, run_sequencer};

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
    Ok(rpc::runtime(threads, "distbench")?)
}
