//! AdSim's typed record: what a run keeps with its stored run, by command
//! (server, client, kernel), and the report's metrics of a server and a
//! kernel run (a client run's are in `client.rs`, beside its record).

use crate::client::ClientRecord;
use crate::kernels::bench::Standalone;
use serde::{Deserialize, Serialize};

/// The version of [`AdSimRecord`]; raise it when its shape changes.
pub const RECORD_VERSION: u32 = 2;

/// What an AdSim run keeps with its stored run, by command.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum AdSimRecord {
    /// `adsim server`: served until stopped.
    Server(ServerRecord),
    /// `adsim client`: the search against a server.
    Client(Box<ClientRecord>),
    /// `adsim kernel`: one kernel benchmarked alone.
    Kernel(KernelRecord),
}

/// A server run: where it listened, its kernels' build time and what it
/// served until it was stopped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerRecord {
    /// The addresses it listened on (`127.0.0.1:10086 and [::1]:10086`).
    pub address: String,
    pub tls: bool,
    /// Time to build every kernel instance.
    pub init_seconds: f64,
    pub requests: u64,
    pub failed_requests: u64,
    pub rss_bytes: u64,
    /// The server process's CPU time.
    pub cpu_seconds: f64,
    /// The first request that failed, why.
    pub first_error: Option<String>,
}

/// The report's metrics of a server run.
#[derive(Debug, Serialize)]
pub struct ServerRunMetrics<'a> {
    pub address: &'a str,
    pub tls: bool,
    pub init_seconds: f64,
    pub requests: u64,
    pub failed_requests: u64,
    pub rss_bytes: u64,
    pub cpu_seconds: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<&'a str>,
}

/// The report's metrics of a server run, from its record.
pub fn server_run_metrics(r: &ServerRecord) -> ServerRunMetrics<'_> {
    ServerRunMetrics {
        address: &r.address,
        tls: r.tls,
        init_seconds: r.init_seconds,
        requests: r.requests,
        failed_requests: r.failed_requests,
        rss_bytes: r.rss_bytes,
        cpu_seconds: r.cpu_seconds,
        first_error: r.first_error.as_deref(),
    }
}

/// A kernel run: the stand-alone result and whether it was printed as JSON
/// (`--json`) or as a line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelRecord {
    pub result: Standalone,
    pub json: bool,
}

/// The report's metrics of a kernel run: the stand-alone result's fields,
/// one metric each.
pub type KernelRunMetrics<'a> = &'a Standalone;

/// The report's metrics of a kernel run, from its record.
pub fn kernel_run_metrics(r: &KernelRecord) -> KernelRunMetrics<'_> {
    &r.result
}
