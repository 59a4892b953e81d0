//! `rackbench adsim`: the workload entry (server, client, kernel).

use crate::cli::{ClientArgs, KernelArgs, ServerArgs};
use crate::config::{self, ServerConfig};
use crate::record::{
    AdSimRecord, KernelRecord, RECORD_VERSION, ServerRecord, kernel_run_metrics, server_run_metrics,
};
use crate::server::{Engine, Service};
use anyhow::{Context, bail};
use clap::Parser;
use harness::{Outcome, Record, RunContext, Workload};
use serde_json::json;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

pub struct AdSim;

enum Parsed {
    Server(ServerArgs),
    Client(ClientArgs),
    Kernel(KernelArgs),
}

fn parse<T: Parser>(name: &str, args: &[String]) -> anyhow::Result<T> {
    T::try_parse_from(std::iter::once(name.to_string()).chain(args.iter().cloned()))
        .map_err(|e| anyhow::anyhow!("{}", e.render().to_string().trim_end()))
}

fn parse_any(args: &[String]) -> anyhow::Result<Parsed> {
    let rest = args.get(1..).unwrap_or_default();
    match args.first().map(String::as_str) {
        Some("server") => Ok(Parsed::Server(parse("rackbench adsim server", rest)?)),
        Some("client") => Ok(Parsed::Client(parse("rackbench adsim client", rest)?)),
        Some("kernel") => Ok(Parsed::Kernel(parse("rackbench adsim kernel", rest)?)),
        Some(other) => bail!(
            "unknown adsim command {other:?}: expected server, client or kernel (see rackbench adsim --help)"
        ),
        None => {
            bail!("adsim needs a command: server, client or kernel (see rackbench adsim --help)")
        }
    }
}

impl Workload for AdSim {
    fn headlines(&self) -> &'static [direction::Headline] {
        crate::directions::HEADLINES
    }

    fn directions(&self) -> &'static [&'static [direction::Rule]] {
        crate::directions::TABLES
    }

    fn benchpress(&self) -> &'static [harness::benchpress_yaml::Upstream] {
        crate::benchpress::BENCHPRESS
    }
    fn name(&self) -> &'static str {
        "adsim"
    }

    fn description(&self) -> &'static str {
        "AdSim ML-inference server and client: max QPS under a latency percentile target"
    }

    fn upstream(&self) -> &'static str {
        "DCPerf's AdSim (adsim server and client)"
    }

    fn help(&self) -> String {
        use clap::CommandFactory;
        format!(
            "rackbench adsim server|client|kernel ...\n\n{}\n\n{}\n\n{}",
            ServerArgs::command().render_long_help(),
            ClientArgs::command().render_long_help(),
            KernelArgs::command().render_help()
        )
    }

    fn command(&self) -> Option<clap::Command> {
        use clap::CommandFactory;
        Some(
            clap::Command::new("adsim")
                .subcommand(ServerArgs::command().name("server"))
                .subcommand(ClientArgs::command().name("client"))
                .subcommand(KernelArgs::command().name("kernel")),
        )
    }

    fn subcommand_help(&self, args: &[String]) -> Option<String> {
        use clap::CommandFactory;
        Some(match args.first()?.as_str() {
            "server" => ServerArgs::command().render_long_help().to_string(),
            "client" => ClientArgs::command().render_long_help().to_string(),
            "kernel" => KernelArgs::command().render_long_help().to_string(),
            _ => return None,
        })
    }

    fn validate(&self, args: &[String]) -> anyhow::Result<()> {
        match parse_any(args)? {
            Parsed::Server(a) => resolve_config(&a).map(|_| ()),
            Parsed::Client(a) => a.target().map(|_| ()).map_err(anyhow::Error::msg),
            Parsed::Kernel(_) => Ok(()),
        }
    }

    fn is_helper(&self, args: &[String]) -> bool {
        args.iter().any(|a| a == "--print-config")
    }

    fn format(&self, record: &Record, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
        match record.decode::<AdSimRecord>(self.name(), RECORD_VERSION)? {
            AdSimRecord::Server(r) => write_server(&r, out)?,
            AdSimRecord::Client(r) => crate::client::write_record(&r, out)?,
            AdSimRecord::Kernel(r) => {
                writeln!(out, "{}", kernel_text(&r))?;
                out.flush()?;
            }
        }
        Ok(())
    }

    /// A server's stopped lines and a stopped client's note (stderr); a
    /// kernel's figures (stdout with `--json`, stderr otherwise). A
    /// client's CSV rows came as it ran.
    fn format_end(
        &self,
        record: &Record,
        out: &mut dyn std::io::Write,
        diag: &mut dyn std::io::Write,
    ) -> anyhow::Result<()> {
        match record.decode::<AdSimRecord>(self.name(), RECORD_VERSION)? {
            AdSimRecord::Server(r) => {
                for l in stopped_lines(&r) {
                    writeln!(diag, "{l}")?;
                }
            }
            AdSimRecord::Client(r) => {
                if r.interrupted {
                    writeln!(
                        diag,
                        "adsim client: stopped; the probes so far are in the report (partial)"
                    )?;
                }
            }
            AdSimRecord::Kernel(r) => {
                let text = kernel_text(&r);
                if r.json {
                    writeln!(out, "{text}")?;
                } else {
                    writeln!(diag, "{text}")?;
                }
            }
        }
        Ok(())
    }

    fn metrics(
        &self,
        record: &Record,
    ) -> anyhow::Result<serde_json::Map<String, serde_json::Value>> {
        match record.decode::<AdSimRecord>(self.name(), RECORD_VERSION)? {
            AdSimRecord::Server(r) => harness::record::metrics_map(&server_run_metrics(&r)),
            AdSimRecord::Client(r) => {
                harness::record::metrics_map(&crate::client::client_metrics(&r))
            }
            AdSimRecord::Kernel(r) => harness::record::metrics_map(&kernel_run_metrics(&r)),
        }
    }

    fn marks(&self, record: &Record) -> Vec<String> {
        match record.decode::<AdSimRecord>(self.name(), RECORD_VERSION) {
            Ok(AdSimRecord::Client(r)) => {
                let mut out = r.host.map(|h| h.concerns()).unwrap_or_default();
                out.extend(load::search::unsteady(&r.probes, r.reported.as_ref()));
                out
            }
            _ => Vec::new(),
        }
    }

    fn run(&self, ctx: &RunContext, args: &[String]) -> anyhow::Result<Outcome> {
        match parse_any(args)? {
            Parsed::Server(a) => run_server(&a, ctx),
            Parsed::Client(a) => {
                let r = crate::client::run(&a, ctx)?;
                Ok(Outcome::measured(
                    r.success,
                    Record::of(
                        self.name(),
                        RECORD_VERSION,
                        &AdSimRecord::Client(Box::new(r)),
                    ),
                ))
            }
            Parsed::Kernel(a) => run_kernel(&a),
        }
    }
}

/// The line the server prints once every kernel is built.
fn initialized_line(init_seconds: f64, address: &str) -> String {
    format!("adsim server: all kernels initialized in {init_seconds:.1} s; serving on {address}")
}

/// The lines the server prints when it stops.
fn stopped_lines(r: &ServerRecord) -> Vec<String> {
    let mut lines = vec![format!(
        "adsim server: stopped after {} requests ({} failed); {:.1} s CPU, {:.1} MB RSS",
        r.requests,
        r.failed_requests,
        r.cpu_seconds,
        r.rss_bytes as f64 / 1e6
    )];
    if let Some(e) = &r.first_error {
        lines.push(format!("adsim server: the first failed request: {e}"));
    }
    lines
}

/// The text of a stored server run: the line it printed when it served,
/// then the lines it printed when it stopped.
fn write_server(r: &ServerRecord, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    writeln!(out, "{}", initialized_line(r.init_seconds, &r.address))?;
    for l in stopped_lines(r) {
        writeln!(out, "{l}")?;
    }
    out.flush()
}

/// What a kernel run prints: the result as JSON (`--json`, on stdout) or
/// a line (on stderr).
fn kernel_text(k: &KernelRecord) -> String {
    let r = &k.result;
    if k.json {
        return serde_json::to_value(r)
            .map(|v| v.to_string())
            .unwrap_or_default();
    }
    format!(
        "{} on {} thread(s): {:.1} fires/s, {:.3} ms CPU and {:.3} ms wall per fire{}; built in {:.2} s",
        r.kernel,
        r.threads,
        r.fires_per_s,
        r.cpu_s_per_fire * 1e3,
        r.wall_s_per_fire * 1e3,
        if r.gflops > 0.0 {
            format!(", {:.1} GFLOP/s", r.gflops)
        } else {
            String::new()
        },
        r.build_s
    )
}

fn nproc() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// The configuration the flags ask for: a file or a preset, then field
/// overrides, then kernel edits.
pub fn resolve_config(a: &ServerArgs) -> anyhow::Result<ServerConfig> {
    let from_file = |p: &std::path::Path| -> anyhow::Result<ServerConfig> {
        let text = std::fs::read_to_string(p)
            .with_context(|| format!("cannot read the config file {}", p.display()))?;
        Ok(ServerConfig::from_json(&text, &p.display().to_string())?)
    };
    let preset = |name: &str| config::preset(name, nproc(), a.scale).map_err(anyhow::Error::msg);
    if !(a.scale.is_finite() && a.scale > 0.0) {
        bail!("--scale {}: expected a positive factor", a.scale);
    }
    let mut cfg = if let Some(p) = &a.config {
        from_file(p)?
    } else if let Some(f) = &a.cfg_file {
        if f == "default" {
            preset("ads")?
        } else {
            from_file(std::path::Path::new(f))?
        }
    } else if let Some(t) = &a.auto_config_type {
        match t.as_str() {
            "ads" => preset("ads")?,
            "inference" => preset(&a.auto_config_model)?,
            other => bail!("--auto-config-type {other:?}: expected ads or inference"),
        }
    } else {
        preset(a.preset.as_deref().unwrap_or("ads"))?
    };
    for (key, v) in [
        ("num_req_handle_threads", &a.num_req_handle_threads),
        ("num_io_handle_threads", &a.num_io_handle_threads),
        ("num_app_logic_threads", &a.num_app_logic_threads),
        ("num_req_local_threads", &a.num_req_local_threads),
        ("num_thrift_accept_threads", &a.num_thrift_accept_threads),
    ] {
        if let Some(v) = v {
            cfg.set_field(key, v)?;
        }
    }
    if let Some(p) = a.port {
        cfg.port = p;
    }
    if let Some(k) = &a.kernels {
        cfg.apply_kernel_edits(k)?;
    }
    Ok(cfg)
}

fn run_server(a: &ServerArgs, ctx: &RunContext) -> anyhow::Result<Outcome> {
    let cfg = resolve_config(a)?;
    if a.print_config {
        println!(
            "{}",
            serde_json::to_string_pretty(&cfg.to_value()).unwrap_or_default()
        );
        return Ok(Outcome::helper(true));
    }
    let tls = if a.tls {
        let pair = crate::tls::server_pair(
            a.cert.as_deref(),
            a.key.as_deref(),
            a.bind.unwrap_or(rpc::server::LOOPBACK),
        )?;
        if pair.generated {
            let p = ctx.output_path(std::path::Path::new("adsim-server-cert.pem"));
            if let Some(d) = p.parent() {
                std::fs::create_dir_all(d)
                    .with_context(|| format!("cannot create {}", d.display()))?;
            }
            std::fs::write(&p, &pair.cert_pem)
                .with_context(|| format!("cannot write {}", p.display()))?;
            eprintln!(
                "adsim server: TLS with a generated self-signed certificate (clients can pin it with --ca {})",
                p.display()
            );
        }
        Some(tonic::transport::ServerTlsConfig::new().identity(
            tonic::transport::Identity::from_pem(&pair.cert_pem, &pair.key_pem),
        ))
    } else {
        None
    };
    let plan = cfg.plan();
    let rt = rpc::runtime(cfg.num_io_handle_threads, "adsim-io")?;
    let engine = Engine::new(cfg.clone());
    let running = {
        let _g = rt.enter();
        let bound = match a.bind {
            Some(ip) => rpc::server::bind(SocketAddr::new(ip, cfg.port))?,
            None => rpc::server::bind_loopback(cfg.port)?,
        };
        let listening = bound
            .addrs
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" and ");
        let mut builder = tonic::transport::Server::builder();
        if let Some(t) = tls {
            builder = builder.tls_config(t).context("TLS configuration")?;
        }
        let router = builder.add_service(Service(engine.clone()).into_server());
        (rpc::server::spawn(router, bound), listening)
    };
    let (running, listening) = running;
    eprintln!(
        "adsim server: listening on {}{}; building {} kernels ({} instances per request in {} stages); pools: {} requestHandle, {} IOHandle, {} applicationLogic, {} reqLocal per request",
        &listening,
        if a.tls { " (TLS)" } else { "" },
        cfg.kernels.len(),
        plan.instances(),
        plan.stages.len(),
        cfg.num_req_handle_threads,
        cfg.num_io_handle_threads,
        cfg.num_app_logic_threads,
        cfg.num_req_local_threads
    );
    let last = std::sync::Mutex::new(Instant::now());
    let built = engine.build(a.init_threads.unwrap_or_else(nproc), &|done, total| {
        let mut l = last.lock().unwrap_or_else(|e| e.into_inner());
        if done == total || l.elapsed() > Duration::from_secs(2) {
            eprintln!("adsim server: {done}/{total} kernel instances built");
            *l = Instant::now();
        }
    });
    let took = match built {
        Ok(t) => t,
        Err(e) => {
            let _ = rt.block_on(running.shutdown());
            bail!("{e}");
        }
    };
    eprintln!("{}", initialized_line(took.as_secs_f64(), &listening));
    let deadline = (a.timeout > 0).then(|| Instant::now() + Duration::from_secs(a.timeout));
    while !ctx.cancel.is_stopped()
        && !running.is_finished()
        && deadline.is_none_or(|d| Instant::now() < d)
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    let failed = running.is_finished();
    let _ = rt.block_on(running.shutdown());
    let st = engine.status();
    if failed {
        bail!("the AdSim server stopped unexpectedly");
    }
    let record = ServerRecord {
        address: listening,
        tls: a.tls,
        init_seconds: took.as_secs_f64(),
        requests: st.requests,
        failed_requests: st.failed,
        rss_bytes: st.rss_bytes,
        cpu_seconds: st.cpu_seconds,
        first_error: engine.first_error().map(str::to_string),
    };
    // The server runs until it is stopped: Ctrl-C is its normal end.
    Ok(Outcome::measured(
        true,
        Record::of("adsim", RECORD_VERSION, &AdSimRecord::Server(record)),
    )
    .ending_on_stop())
}

/// One kernel alone: its params checked against the schema as in a
/// config file, then fired on `--threads` threads for `--seconds`.
fn run_kernel(a: &KernelArgs) -> anyhow::Result<Outcome> {
    let params: serde_json::Value = serde_json::from_str(&a.params)
        .map_err(|e| anyhow::anyhow!("--params: line {}, column {}: {e}", e.line(), e.column()))?;
    let doc = json!({"port": 0, "Kernels": [{"name": a.name, "params": params}]});
    let cfg = ServerConfig::from_json(&doc.to_string(), "--params")?;
    let plan = cfg.plan();
    let inst = plan
        .stages
        .iter()
        .flatten()
        .next()
        .context("the kernel has no instance")?;
    if !(a.seconds.is_finite() && a.seconds > 0.0) {
        bail!("--seconds {}: expected a positive duration", a.seconds);
    }
    let r = crate::kernels::bench::standalone_with_body(
        &a.name,
        &inst.params,
        a.threads,
        a.seconds,
        a.request_bytes,
    )
    .map_err(|e| anyhow::anyhow!("{}: {e}", a.name))?;
    let record = KernelRecord {
        result: r,
        json: a.json,
    };
    Ok(Outcome::measured(
        true,
        Record::of("adsim", RECORD_VERSION, &AdSimRecord::Kernel(record)),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::{ClientRecord, KernelCounters, ServerStatus};
    use crate::kernels::bench::Standalone;
    use load::search::Phase;
    use load::{LatencySummary, ProbeRecord};

    fn probe(seq: usize, phase: Phase, requested: f64, achieved: f64, p95: f64) -> ProbeRecord {
        ProbeRecord {
            seq,
            phase,
            mode: "open:poisson".into(),
            requested_qps: requested,
            duration_secs: 2.0,
            total_queries: 100,
            scheduled: 100,
            errors: 0,
            dropped: 0,
            unfinished: 0,
            achieved_qps: achieved,
            total_bytes_rx: 1000,
            total_bytes_tx: 2000,
            latency: LatencySummary {
                count: 100,
                avg_ms: 4.12345,
                p95_ms: p95,
                ..LatencySummary::default()
            },
            target_value_ms: p95,
            passed: true,
            verdict: "ok".into(),
            extensions: 0,
            settle_secs: 0.0,
            start_unix_ms: 1,
            end_unix_ms: 2,
            interval: None,
            from_send_ms: None,
        }
    }

    fn status(requests: u64, fired: u64, cpu: f64) -> ServerStatus {
        ServerStatus {
            requests,
            failed: 0,
            rss_bytes: 1 << 30,
            cpu_seconds: cpu,
            init_seconds: 1.5,
            kernels: vec![KernelCounters {
                index: 0,
                name: "Decompress".into(),
                fired,
                cpu_seconds: cpu / 2.0,
                wall_seconds: cpu,
                flops: 0.0,
            }],
        }
    }

    fn metrics_of(r: AdSimRecord) -> serde_json::Map<String, serde_json::Value> {
        let rec = Record::of("adsim", RECORD_VERSION, &r);
        // As stored and read back.
        let rec: Record = serde_json::from_str(&serde_json::to_string(&rec).unwrap()).unwrap();
        AdSim.metrics(&rec).unwrap()
    }

    fn text_of(r: AdSimRecord) -> String {
        let mut out = Vec::new();
        AdSim
            .format(&Record::of("adsim", RECORD_VERSION, &r), &mut out)
            .unwrap();
        String::from_utf8(out).unwrap()
    }

    fn client_record() -> ClientRecord {
        ClientRecord {
            quantile: "P95".into(),
            target_latency_ms: 150.0,
            probes: vec![
                probe(1, Phase::Peak, 0.0, 80.0, 9.0),
                probe(2, Phase::Bisect, 40.0, 39.9876, 6.0),
                probe(3, Phase::Final, 40.0, 39.91234, 7.12345),
            ],
            reported: Some(probe(3, Phase::Final, 40.0, 39.91234, 7.12345)),
            peak_qps: 80.12345,
            success: true,
            interrupted: false,
            failure: None,
            csv: "adsim.csv".into(),
            client_cpu_seconds: 2.34567,
            server_before: Some(status(10, 40, 1.0)),
            server_after: Some(status(110, 440, 3.0)),
            host: None,
        }
    }

    #[test]
    fn client_metrics_come_from_the_record() {
        let m = metrics_of(AdSimRecord::Client(Box::new(client_record())));
        assert_eq!(m["final_requested_qps"], 40.0);
        assert_eq!(m["final_achieved_qps"], 39.912);
        assert_eq!(m["final_latency_msec"], 7.123);
        assert_eq!(m["average_latency_msec"], 4.123);
        assert_eq!(m["success"], true);
        assert_eq!(m["target_latency_msec"], 150.0);
        assert_eq!(m["target_latency_percentile"], "P95");
        assert_eq!(m["peak_qps"], 80.123);
        assert_eq!(m["probes"].as_u64(), Some(3));
        assert_eq!(m["interrupted"], false);
        assert_eq!(m["csv"], "adsim.csv");
        assert_eq!(m["client_cpu_seconds"], 2.346);
        assert_eq!(m["search"].as_array().unwrap().len(), 3);
        assert_eq!(m["search"][1]["requested_qps"], 40.0);
        assert!(!m.contains_key("failure"));
        let s = &m["server"];
        assert_eq!(s["requests"].as_u64(), Some(100));
        assert_eq!(s["failed"].as_u64(), Some(0));
        assert_eq!(s["cpu_seconds"], 2.0);
        assert_eq!(s["rss_bytes"].as_u64(), Some(1 << 30));
        assert_eq!(s["init_seconds"], 1.5);
        let k = &s["kernels"][0];
        assert_eq!(k["index"].as_u64(), Some(0));
        assert_eq!(k["name"], "Decompress");
        assert_eq!(k["fired"].as_u64(), Some(400));
        // 1 s of CPU over 400 fires, 2 s of wall.
        assert_eq!(k["cpu_usec_per_fire"], 2500.0);
        assert_eq!(k["wall_usec_per_fire"], 5000.0);
        assert_eq!(k["gflops_per_cpu_second"], 0.0);
        // The CSV again: header, the rate-driven probes, the closing row.
        let text = text_of(AdSimRecord::Client(Box::new(client_record())));
        assert_eq!(text.lines().count(), 4, "{text}");
        // qps_search.sh's six columns: seq, the reported rate, the last
        // probe's throughput, quantile, target and the reported latency.
        assert!(
            text.ends_with("3,40.000,39.912,P95,150000,7123\n"),
            "{text}"
        );
    }

    #[test]
    fn a_client_run_without_a_result_keeps_its_nulls_and_drops_what_it_lacks() {
        let mut r = client_record();
        r.reported = None;
        r.success = false;
        r.interrupted = true;
        r.failure = Some("every request failed".into());
        r.server_after = None;
        let m = metrics_of(AdSimRecord::Client(Box::new(r)));
        assert_eq!(m["final_requested_qps"], 0.0);
        assert_eq!(m["final_achieved_qps"], 0.0);
        assert!(m["final_latency_msec"].is_null());
        assert!(m["average_latency_msec"].is_null());
        assert_eq!(m["success"], false);
        assert_eq!(m["interrupted"], true);
        assert_eq!(m["failure"], "every request failed");
        assert!(!m.contains_key("server"));
    }

    fn server_record(first_error: Option<&str>) -> ServerRecord {
        ServerRecord {
            address: "127.0.0.1:10086 and [::1]:10086".into(),
            tls: false,
            init_seconds: 12.25,
            requests: 1234,
            failed_requests: 2,
            rss_bytes: 2_000_000,
            cpu_seconds: 56.5,
            first_error: first_error.map(str::to_string),
        }
    }

    #[test]
    fn server_metrics_come_from_the_record() {
        let m = metrics_of(AdSimRecord::Server(server_record(None)));
        assert_eq!(m["address"], "127.0.0.1:10086 and [::1]:10086");
        assert_eq!(m["init_seconds"], 12.25);
        assert_eq!(m["requests"].as_u64(), Some(1234));
        assert_eq!(m["failed_requests"].as_u64(), Some(2));
        assert_eq!(m["rss_bytes"].as_u64(), Some(2_000_000));
        assert_eq!(m["cpu_seconds"], 56.5);
        assert_eq!(m["tls"], false);
        assert!(!m.contains_key("first_error"));
        assert_eq!(m.len(), 7);
        let m = metrics_of(AdSimRecord::Server(server_record(Some("boom"))));
        assert_eq!(m["first_error"], "boom");
        let text = text_of(AdSimRecord::Server(server_record(Some("boom"))));
        assert_eq!(
            text,
            "adsim server: all kernels initialized in 12.2 s; serving on 127.0.0.1:10086 and [::1]:10086\n\
             adsim server: stopped after 1234 requests (2 failed); 56.5 s CPU, 2.0 MB RSS\n\
             adsim server: the first failed request: boom\n"
        );
    }

    fn standalone() -> Standalone {
        Standalone {
            kernel: "GEMM".into(),
            threads: 2,
            parts: 1,
            seconds: 1.0,
            fires: 500,
            fires_per_s: 500.0,
            flops_per_fire: 2e6,
            bytes_per_fire: 0.0,
            gflops: 1.0,
            wall_s_per_fire: 0.004,
            cpu_s_per_fire: 0.0039,
            build_s: 0.25,
        }
    }

    #[test]
    fn kernel_metrics_are_the_standalone_result() {
        let r = KernelRecord {
            result: standalone(),
            json: true,
        };
        let m = metrics_of(AdSimRecord::Kernel(r.clone()));
        assert_eq!(
            serde_json::Value::Object(m.clone()),
            serde_json::to_value(standalone()).unwrap()
        );
        assert_eq!(m["kernel"], "GEMM");
        assert_eq!(m["fires"].as_u64(), Some(500));
        assert_eq!(m["threads"].as_u64(), Some(2));
        assert_eq!(m["gflops"], 1.0);
        let text = text_of(AdSimRecord::Kernel(r.clone()));
        let v: serde_json::Value = serde_json::from_str(text.trim_end()).unwrap();
        assert_eq!(v, serde_json::to_value(standalone()).unwrap());
        let text = text_of(AdSimRecord::Kernel(KernelRecord { json: false, ..r }));
        assert_eq!(
            text,
            "GEMM on 2 thread(s): 500.0 fires/s, 3.900 ms CPU and 4.000 ms wall per fire, 1.0 GFLOP/s; built in 0.25 s\n"
        );
    }

    #[test]
    fn an_older_record_is_named_not_misread() {
        let rec = Record::of(
            "adsim",
            RECORD_VERSION - 1,
            &AdSimRecord::Server(server_record(None)),
        );
        let e = AdSim.metrics(&rec).unwrap_err();
        assert!(e.to_string().contains("an older rackbench"), "{e}");
    }
}
