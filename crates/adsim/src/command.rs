//! `rackbench adsim`: the workload entry (server, client, kernel).

use crate::cli::{ClientArgs, KernelArgs, ServerArgs};
use crate::config::{self, ServerConfig};
use crate::server::{Engine, Service};
use anyhow::{Context, bail};
use clap::Parser;
use harness::{Outcome, RunContext, Workload};
use serde_json::{Map, json};
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
    fn name(&self) -> &'static str {
        "adsim"
    }

    fn description(&self) -> &'static str {
        "AdSim ML-inference server and client: max QPS under a latency percentile target"
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

    fn format(&self, record: &harness::Record, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
        let r: crate::client::ClientRecord =
            record.decode(self.name(), crate::client::RECORD_VERSION)?;
        crate::client::write_record(&r, out)?;
        Ok(())
    }

    fn run(&self, ctx: &RunContext, args: &[String]) -> anyhow::Result<Outcome> {
        match parse_any(args)? {
            Parsed::Server(a) => run_server(&a, ctx),
            Parsed::Client(a) => crate::client::run(&a, ctx),
            Parsed::Kernel(a) => run_kernel(&a),
        }
    }
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
        return Ok(Outcome {
            metrics: Map::new(),
            success: true,
            record: None,
        });
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
    let rt =
        rpc::runtime(cfg.num_io_handle_threads, "adsim-io").context("cannot start the runtime")?;
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
    eprintln!(
        "adsim server: all kernels initialized in {:.1} s; serving on {}",
        took.as_secs_f64(),
        listening
    );
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
    let mut m = Map::new();
    m.insert("address".into(), json!(listening));
    m.insert("init_seconds".into(), json!(took.as_secs_f64()));
    m.insert("requests".into(), json!(st.requests));
    m.insert("failed_requests".into(), json!(st.failed));
    m.insert("rss_bytes".into(), json!(st.rss_bytes));
    m.insert("cpu_seconds".into(), json!(st.cpu_seconds));
    if let Some(e) = engine.first_error() {
        m.insert("first_error".into(), json!(e));
    }
    if failed {
        bail!("the AdSim server stopped unexpectedly");
    }
    Ok(Outcome {
        metrics: m,
        success: true,
        record: None,
    })
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
    let v = serde_json::to_value(&r)?;
    if a.json {
        println!("{v}");
    } else {
        eprintln!(
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
        );
    }
    let metrics = match v {
        serde_json::Value::Object(m) => m,
        _ => Map::new(),
    };
    Ok(Outcome {
        metrics,
        success: true,
        record: None,
    })
}
