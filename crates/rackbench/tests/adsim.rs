//! AdSim through the binary: a server and a client on loopback with a
//! light pipeline (the full ads preset needs ~13 GB and seconds per
//! request on two cores), bad configurations, a server that goes away
//! mid-run, and server and client in two network namespaces.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

mod common;

use common::{assert_reprints, rackbench, rackbench_stored, run_id_of, text};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A pipeline that exercises every pool and passes data between stages,
/// cheap enough for many requests per second.
const LIGHT: &str = r#"{
  "port": 0,
  "num_req_handle_threads": 1,
  "num_io_handle_threads": 1,
  "num_app_logic_threads": 2,
  "num_req_local_threads": 2,
  "Kernels": [
    {"name": "Decompress", "pool": "requestHandle", "stage": 0, "fanout": 4,
     "params": {"input": "Hdecompress{fidx}", "output": "Rdecompressed{fidx}",
                "compressor": "zstd", "level": 4, "size": 8192}},
    {"name": "Serialize", "pool": "applicationLogic", "stage": 1, "fanout": 2,
     "params": {"input": "Hserialize{fidx}", "output": "Rserialized{fidx}", "req_vec_len": 16, "niters": 2}},
    {"name": "Compress", "pool": "defaultPool", "stage": 2, "fanout": 2,
     "params": {"input": "Rserialized{fidx}", "output": "Rcompressed{fidx}",
                "compressor": "zstd", "level": 1, "size": 1}},
    {"name": "HashMap", "pool": "applicationLogic", "stage": 3,
     "params": {"map_type": "f14vec", "runs": 4, "size": 2000}},
    {"name": "DeepCopy", "pool": "applicationLogic", "stage": 3,
     "params": {"unit_vec_len": 64, "copy_len": 8, "i64_vec_len": 32, "stri64_map_size": 4}},
    {"name": "FakeIO", "pool": "IOHandle", "stage": 4,
     "params": {"quantiles": [0, 0.5, 1], "latencies": [2000, 5000, 10000]}},
    {"name": "Shape", "pool": "IOHandle", "stage": 5, "params": {"input": "Rshape", "quantiles": [0, 1], "sizes": [1, 1]}},
    {"name": "Shape", "pool": "IOHandle", "stage": 5, "params": {"quantiles": [0, 1], "sizes": [100, 1000]}}
  ]
}"#;

struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads the server's stderr until it serves; returns the port.
fn wait_serving(child: &mut Child) -> u16 {
    let err = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut port = None;
        let mut log = String::new();
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            log.push_str(&line);
            log.push('\n');
            if port.is_none()
                && let Some(p) = line.strip_prefix("adsim server: listening on ")
            {
                let addr = p.split([';', ' ']).next().unwrap_or("");
                port = addr.rsplit(':').next().and_then(|x| x.parse::<u16>().ok());
            }
            if line.contains("serving on") {
                let _ = tx.send(Ok(port.expect("the listening line comes first")));
            }
        }
        let _ = tx.send(Err(log));
    });
    match rx.recv_timeout(Duration::from_secs(120)) {
        Ok(Ok(p)) => p,
        Ok(Err(log)) => panic!("the server ended before serving:\n{log}"),
        Err(_) => panic!("the server did not come up in 120 s"),
    }
}

fn start_server(dir: &Path, extra: &[&str]) -> Server {
    std::fs::write(dir.join("light.json"), LIGHT).unwrap();
    let mut child = rackbench(dir)
        .args([
            "adsim",
            "server",
            "--config",
            "light.json",
            "--timeout",
            "300",
        ])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let port = wait_serving(&mut child);
    Server { child, port }
}

/// The `metrics` of the newest report under `dir/reports`.
fn report_metrics(dir: &Path) -> Value {
    let mut newest: Option<(std::time::SystemTime, std::path::PathBuf)> = None;
    for run in std::fs::read_dir(dir.join("reports")).unwrap().flatten() {
        for f in std::fs::read_dir(run.path()).unwrap().flatten() {
            let p = f.path();
            // `<job>_metrics_<ts>_iter_<n>.json` (not the job's
            // `_system_specs_` file beside it).
            let name = f.file_name().to_string_lossy().into_owned();
            if name.starts_with("adsim") && name.contains("_metrics_") && name.ends_with(".json") {
                let t = f.metadata().unwrap().modified().unwrap();
                if newest.as_ref().is_none_or(|(n, _)| t > *n) {
                    newest = Some((t, p));
                }
            }
        }
    }
    let (_, p) = newest.expect("a report was written");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    v["metrics"].clone()
}

#[test]
fn client_finds_a_rate_meeting_the_target_on_a_light_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let server = start_server(d, &["--bind", "::1"]);
    let port = server.port.to_string();
    let out = rackbench_stored(d)
        .args([
            "adsim",
            "client",
            "--server",
            "::1",
            "--port",
            &port,
            "--quick",
            "--runtime",
            "3",
            "--criteria",
            "P95",
            "--latency",
            "150",
            "--mode",
            "ai",
            "--ai-request-size-multiplier",
            "1",
            "--workers",
            "4",
            "--timeout",
            "240",
            // Well below the light pipeline's capacity (hundreds of QPS
            // here), so tests running beside this one cannot tip it over.
            "--qps-max",
            "60",
        ])
        .output()
        .unwrap();
    let (so, se) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "client failed:\n{se}\n{so}");
    // Upstream's CSV on stdout: the header and a row per rate-driven probe,
    // seven columns each, then qps_search.sh's final line of six:
    // seq,qps_opt,final_qps,quantile,target_usec,latency_usec.
    let rows: Vec<&str> = so.lines().filter(|l| l.split(',').count() == 7).collect();
    assert_eq!(
        rows[0],
        "seq,runtime,requested_qps,achieved_qps,target_latency_quantile,target_latency_usec,achieved_latency_usec"
    );
    assert!(rows.len() >= 3, "{so}");
    let finals: Vec<&str> = so.lines().filter(|l| l.split(',').count() == 6).collect();
    assert_eq!(finals.len(), 1, "{so}");
    let last: Vec<&str> = finals[0].split(',').collect();
    let seq: usize = last[0].parse().unwrap();
    assert_eq!(
        seq,
        rows.len(),
        "seq follows the probes' {}",
        rows.len() - 1
    );
    let requested: f64 = last[1].parse().unwrap();
    let achieved: f64 = last[2].parse().unwrap();
    let achieved_us: f64 = last[5].parse().unwrap();
    assert_eq!(last[3], "P95");
    assert_eq!(last[4], "150000");
    assert!(requested > 20.0 && requested <= 60.0, "final line {last:?}");
    assert!(achieved > requested * 0.8, "final line {last:?}");
    assert!(
        achieved_us > 2000.0 && achieved_us <= 150_000.0,
        "final line {last:?}"
    );
    // The stored run prints the same CSV again.
    assert_reprints(d, &run_id_of(&so), &so);

    let m = report_metrics(d);
    assert_eq!(m["success"], Value::Bool(true), "{m}");
    assert_eq!(m["target_latency_percentile"], "P95");
    assert_eq!(m["target_latency_msec"], 150.0);
    assert_eq!(m["final_requested_qps"].as_f64().unwrap(), requested);
    let avg = m["average_latency_msec"].as_f64().unwrap();
    // FakeIO alone waits 2 to 10 ms (median 5 ms).
    assert!(avg > 2.0 && avg < 150.0, "{m}");
    // Every configured kernel fired on the server, each in proportion to
    // its fanout.
    let kernels = m["server"]["kernels"].as_array().unwrap();
    assert_eq!(kernels.len(), 8);
    let fired: Vec<u64> = kernels
        .iter()
        .map(|k| k["fired"].as_u64().unwrap())
        .collect();
    assert!(fired.iter().all(|&f| f > 0), "{fired:?}");
    assert_eq!(fired[0], 4 * fired[3], "{fired:?}");
    assert_eq!(m["server"]["failed"], 0);
    // The CSV file holds the same rows.
    let csv =
        std::fs::read_to_string(m["csv"].as_str().map(|p| d.join(p)).unwrap()).unwrap_or_default();
    let csv = if csv.is_empty() {
        std::fs::read_to_string(m["csv"].as_str().unwrap()).unwrap()
    } else {
        csv
    };
    assert_eq!(csv.lines().count(), rows.len() + 1);
    assert_eq!(csv.lines().last(), Some(finals[0]));
}

#[test]
fn bad_configurations_are_named_by_file_line_and_kernel() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("broken.json"),
        "{\n  \"port\": 1,\n  \"Kernels\": [\n    {\"name\": \"Echo\",}\n  ]\n}\n",
    )
    .unwrap();
    let out = rackbench(d)
        .args(["adsim", "server", "--config", "broken.json"])
        .output()
        .unwrap();
    let se = text(&out.stderr);
    assert!(!out.status.success());
    assert!(se.contains("broken.json: line 4"), "{se}");

    std::fs::write(
        d.join("unknown.json"),
        r#"{"port": 1, "Kernels": [{"name": "Echo", "params": {"quantiles": [0, 1], "latencies": [1, 2]}}, {"name": "GEMMM"}]}"#,
    )
    .unwrap();
    let out = rackbench(d)
        .args(["adsim", "server", "--config", "unknown.json"])
        .output()
        .unwrap();
    let se = text(&out.stderr);
    assert!(!out.status.success());
    assert!(se.contains("Kernels[1]") && se.contains("GEMMM"), "{se}");

    // A kernel whose params pass the schema but cannot be built.
    std::fs::write(
        d.join("level.json"),
        r#"{"port": 0, "Kernels": [{"name": "Compress", "params": {"compressor": "zstd", "level": 99, "size": 10}}]}"#,
    )
    .unwrap();
    let out = rackbench(d)
        .args([
            "adsim",
            "server",
            "--config",
            "level.json",
            "--bind",
            "127.0.0.1",
        ])
        .output()
        .unwrap();
    let se = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        se.contains("Kernels[0] (Compress)") && se.contains("level"),
        "{se}"
    );
}

#[test]
fn a_server_that_goes_away_ends_the_client_with_its_probes_so_far() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut server = start_server(d, &["--bind", "127.0.0.1"]);
    let port = server.port.to_string();
    let mut client = rackbench(d)
        .args([
            "adsim",
            "client",
            "--server",
            "127.0.0.1",
            "--port",
            &port,
            "--latency",
            "150",
            "--mode",
            "ai",
            "--ai-request-size-multiplier",
            "1",
            "--workers",
            "4",
            "--probe-secs",
            "2",
            "--runtime",
            "30",
            "--timeout",
            "120",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once the search has written two probe rows (after the CSV header),
    // however long that takes on this machine, stop the server.
    let stdout = client.stdout.take().unwrap();
    let rows = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let reader = {
        let rows = rows.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                rows.lock().unwrap().push(line);
            }
        })
    };
    let csv_rows = |v: &[String]| v.iter().filter(|l| l.split(',').count() == 7).count();
    let t0 = Instant::now();
    while csv_rows(&rows.lock().unwrap()) < 3 {
        assert!(
            t0.elapsed() < Duration::from_secs(180),
            "no two probes in 180 s: {:?}",
            rows.lock().unwrap()
        );
        assert!(
            client.try_wait().unwrap().is_none(),
            "the client ended early"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = server.child.kill();
    let _ = server.child.wait();
    let t = Instant::now();
    let out = client.wait_with_output().unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(60),
        "the client hung after the server died"
    );
    reader.join().unwrap();
    let so = rows.lock().unwrap().join("\n");
    let se = text(&out.stderr);
    assert!(!out.status.success(), "{se}");
    let m = report_metrics(d);
    assert_eq!(m["success"], Value::Bool(false));
    let why = m["failure"].as_str().unwrap_or("");
    assert!(
        why.contains("every request failed") || why.contains("stopped answering"),
        "{m}"
    );
    assert!(m["probes"].as_u64().unwrap() >= 2, "{m}");
    // The probes before the failure are on stdout.
    assert!(
        so.lines().filter(|l| l.split(',').count() == 7).count() >= 3,
        "{so}"
    );
    // And no closing row: upstream's parser reads the last line, and a
    // row of zeros would read as a success at 0 ms.
    assert!(
        !so.lines().any(|l| l.split(',').count() == 6),
        "a failed search wrote a closing row: {so}"
    );
}

#[test]
fn a_client_without_a_server_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A port nobody listens on.
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = rackbench(d)
        .args([
            "adsim",
            "client",
            "--server",
            "127.0.0.1",
            "--port",
            &free.to_string(),
            "--wait-server",
            "2",
        ])
        .output()
        .unwrap();
    let se = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        se.contains(&format!("127.0.0.1:{free} was not ready within 2 s")),
        "{se}"
    );
}

#[test]
fn server_and_client_in_two_network_namespaces() {
    if !common::netns::available("server_and_client_in_two_network_namespaces") {
        return;
    }
    use common::netns::{Proc, build_net, in_ns};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("light.json"), LIGHT).unwrap();
    let net = build_net(9, 2).unwrap();
    let mut child = in_ns(
        &net.spokes[0],
        d,
        &[
            "adsim",
            "server",
            "--config",
            "light.json",
            "--bind",
            "::",
            "--port",
            "10086",
            "--timeout",
            "300",
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    wait_serving(&mut child);
    let _server = Proc(child);
    let out = in_ns(
        &net.spokes[1],
        d,
        &[
            "adsim",
            "client",
            "--server",
            "10.213.9.1",
            "--quick",
            "--runtime",
            "2",
            "--latency",
            "150",
            "--mode",
            "ai",
            "--ai-request-size-multiplier",
            "1",
            "--workers",
            "4",
            "--wait-server",
            "30",
            "--qps-max",
            "60",
        ],
    )
    .output()
    .unwrap();
    let (so, se) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{se}\n{so}");
    let m = report_metrics(d);
    assert_eq!(m["success"], Value::Bool(true), "{m}");
    assert!(m["final_achieved_qps"].as_f64().unwrap() > 1.0, "{m}");
}

/// A client (with `extra` flags) against a server on `port` speaking the
/// other protocol fails within a minute, naming `--tls`, although it was
/// allowed to wait 120 s for a server.
fn assert_tls_mismatch_named(d: &Path, port: u16, extra: &[&str]) {
    let t = Instant::now();
    let port = port.to_string();
    let out = rackbench(d)
        .args(["adsim", "client", "--server", "127.0.0.1", "--port", &port])
        .args(extra)
        .args(["--wait-server", "120"])
        .output()
        .unwrap();
    let se = text(&out.stderr);
    assert!(!out.status.success());
    assert!(se.contains("--tls"), "{se}");
    assert!(
        t.elapsed() < Duration::from_secs(60),
        "took {:?}",
        t.elapsed()
    );
}

/// The generated certificate the TLS server wrote next to its report.
fn generated_cert(dir: &Path) -> std::path::PathBuf {
    for run in std::fs::read_dir(dir.join("reports")).unwrap().flatten() {
        let p = run.path().join("adsim-server-cert.pem");
        if p.exists() {
            return p;
        }
    }
    panic!(
        "the TLS server wrote no certificate under {}",
        dir.display()
    );
}

#[test]
fn tls_between_client_and_server_and_a_clear_error_on_a_mismatch() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let tls_server = start_server(d, &["--bind", "127.0.0.1", "--tls"]);
    let port = tls_server.port.to_string();
    let cert = generated_cert(d);

    // Verified against the server's generated certificate.
    let out = rackbench(d)
        .args([
            "adsim",
            "client",
            "--server",
            "127.0.0.1",
            "--port",
            &port,
            "--tls",
            "--ca",
        ])
        .arg(&cert)
        .args([
            "--quick",
            "--runtime",
            "2",
            "--latency",
            "150",
            "--mode",
            "ai",
            "--ai-request-size-multiplier",
            "1",
            "--workers",
            "4",
            "--qps-max",
            "30",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));

    // A plaintext client against the TLS server: an error naming the
    // likely cause, well before --wait-server runs out.
    assert_tls_mismatch_named(d, tls_server.port, &[]);

    // A TLS client against a plaintext server.
    let dir2 = tempfile::tempdir().unwrap();
    let plain = start_server(dir2.path(), &["--bind", "127.0.0.1"]);
    assert_tls_mismatch_named(d, plain.port, &["--tls"]);
}

/// With no --bind the server listens on both loopbacks, so a client given
/// 127.0.0.1 (what most users type) or ::1 reaches it.
#[test]
fn default_bind_answers_on_both_loopbacks() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_server(dir.path(), &[]);
    for host in ["127.0.0.1", "[::1]"] {
        let addr = format!("{host}:{}", server.port);
        if let Err(e) = std::net::TcpStream::connect(&addr) {
            panic!("the server does not answer at {addr}: {e}");
        }
    }
}

/// The jobs pass `--tls=1` to both roles by default and `--tls=0` when
/// asked for plaintext.
#[test]
fn jobs_use_tls_by_default_and_tls_0_turns_it_off() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for job in ["adsim", "adsim_inference_a"] {
        for (role, base) in [
            ("client", r#""server_ip": "::1""#),
            ("server", r#""timeout": "1""#),
        ] {
            let argv = |extra: &str| {
                let out = rackbench(d)
                    .args(["run", job, "-r", role, "--dry-run", "-i"])
                    .arg(format!("{{{base}{extra}}}"))
                    .output()
                    .unwrap();
                assert!(out.status.success(), "{}", text(&out.stderr));
                let o = text(&out.stdout);
                o.lines().find(|l| l.contains("argv:")).unwrap().to_string()
            };
            let on = argv("");
            assert!(on.contains("--tls=1"), "{job} {role}: {on}");
            assert!(!on.contains("--tls=0"), "{job} {role}: {on}");
            let off = argv(r#", "tls": "0""#);
            assert!(off.contains("--tls=0"), "{job} {role}: {off}");
            assert!(!off.contains("--tls=1"), "{job} {role}: {off}");
        }
    }
}

/// The job's server role, with TLS by default, answers the job's client
/// role (TLS by default too) with no certificate set up; Ctrl-C then ends
/// the server normally: exit 0 and a successful report.
#[test]
fn job_server_over_default_tls_serves_the_job_client_and_ctrl_c_ends_it_successfully() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("light.json"), LIGHT).unwrap();
    let mut child = rackbench(d)
        .args(["run", "adsim", "-r", "server", "-i"])
        .arg(r#"{"cfg_file": "light.json", "bind": "127.0.0.1"}"#)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let port = wait_serving(&mut child);

    let client_dir = tempfile::tempdir().unwrap();
    let out = rackbench(client_dir.path())
        .args(["run", "adsim", "-r", "client", "-i"])
        .arg(
            serde_json::json!({
                "server_ip": "127.0.0.1",
                "port": port.to_string(),
                "num_workers": "4",
                "runtime": "2",
                "lat_target_ms": "150",
                "extra_args": "--quick --qps-max 30",
            })
            .to_string(),
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--tls=1"),
        "{}",
        text(&out.stderr)
    );

    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: signalling our own child, which has not been waited for.
    unsafe { libc::kill(pid, libc::SIGINT) };
    let t = Instant::now();
    let o = child.wait_with_output().unwrap();
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stdout));
    let stdout = text(&o.stdout);
    let last = stdout.trim_end().lines().last().unwrap();
    let r: Value = serde_json::from_str(last).unwrap();
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["metrics"]["tls"], true, "{r}");
    assert!(r["metrics"].get("interrupted").is_none(), "{r}");
    assert!(r["metrics"]["requests"].as_u64().unwrap() > 0, "{r}");
    assert!(r["metrics"].get("error").is_none(), "{r}");
}

/// Runs `rackbench adsim kernel NAME --params P --json` in `d` and returns
/// the kernel's JSON line.
fn kernel_alone(d: &Path, name: &str, params: &str, threads: &str) -> Value {
    let out = rackbench(d)
        .args([
            "adsim",
            "kernel",
            name,
            "--params",
            params,
            "--threads",
            threads,
            "--seconds",
            "0.3",
            "--json",
        ])
        .output()
        .unwrap();
    let (so, se) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{name} failed:\n{se}\n{so}");
    let line = so
        .lines()
        .find(|l| l.contains(&format!("\"kernel\":\"{name}\"")) && !l.contains("benchmark_name"))
        .unwrap_or_else(|| panic!("no kernel line:\n{so}"));
    let v: Value = serde_json::from_str(line).unwrap();
    assert_eq!(v["kernel"], name);
    assert!(v["fires"].as_u64().unwrap() >= 2, "{v}");
    assert!(v["seconds"].as_f64().unwrap() >= 0.3, "{v}");
    v
}

#[test]
fn tensordeser_runs_alone_and_coalesces_its_chains() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // One shape: a chain of two buffers (100 + 50 data bytes), coalesced
    // into one, so every request copies 150 bytes.
    std::fs::write(
        d.join("deser.dist"),
        "7,16,32,[{h:4|d:100|t:0};{h:0|d:50|t:8}]\n",
    )
    .unwrap();
    let v = kernel_alone(
        d,
        "TensorDeser",
        r#"{"requests_per_run": 40, "num_threads": 2, "distribution_file": "deser.dist"}"#,
        "2",
    );
    assert_eq!(v["parts"], 2, "{v}");
    assert_eq!(v["bytes_per_fire"], 150.0 * 40.0 / 2.0, "{v}");
    // A single-buffer chain is shared, not copied.
    std::fs::write(d.join("one.dist"), "1,0,0,[{h:0|d:100|t:0}]\n").unwrap();
    let v = kernel_alone(
        d,
        "TensorDeser",
        r#"{"requests_per_run": 8, "num_threads": 0, "distribution_file": "one.dist"}"#,
        "1",
    );
    assert_eq!(
        (v["parts"].as_u64(), v["bytes_per_fire"].as_f64()),
        (Some(1), Some(0.0))
    );
    // A malformed line is named by file and line.
    std::fs::write(
        d.join("bad.dist"),
        "1,0,0,[{h:0|d:1|t:0}]\n1,0,0,[{h:0|d:x|t:0}]\n",
    )
    .unwrap();
    let out = rackbench(d)
        .args(["adsim", "kernel", "TensorDeser", "--params"])
        .arg(r#"{"requests_per_run": 1, "distribution_file": "bad.dist"}"#)
        .output()
        .unwrap();
    let se = text(&out.stderr);
    assert!(!out.status.success());
    assert!(se.contains("bad.dist:2: chain"), "{se}");
}

#[test]
fn concurrent_hash_map_runs_alone_on_threads_sharing_the_map() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("chm.dist"), "freq,count\n158.0,3000\n90.0,1000\n").unwrap();
    let v = kernel_alone(
        d,
        "ConcurrentHashMap",
        r#"{"requests_per_run": 1000, "num_threads": 4, "request_book_multiplier": 2,
            "distribution_file": "chm.dist"}"#,
        "2",
    );
    assert_eq!(v["parts"], 4, "{v}");
    // Lookups per part.
    assert_eq!(v["bytes_per_fire"], 250.0, "{v}");
    let out = rackbench(d)
        .args(["adsim", "kernel", "ConcurrentHashMap", "--params"])
        .arg(r#"{"requests_per_run": 1}"#)
        .output()
        .unwrap();
    let se = text(&out.stderr);
    assert!(!out.status.success());
    assert!(se.contains("distribution_file"), "{se}");
}

#[test]
fn rebatch_runs_alone_and_copies_whole_batches() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Every tensor is 1000 bytes; 5 per batch fit the output.
    std::fs::write(d.join("rebatch.dist"), "input-size,count\n1000,100\n").unwrap();
    let v = kernel_alone(
        d,
        "Rebatch",
        r#"{"tensors_per_batch": 5, "num_threads": 1, "output_tensor_size": 1000000,
            "memory_pool_size_gb": 0.01, "prefetch_dist": 2, "distribution_file": "rebatch.dist"}"#,
        "1",
    );
    assert_eq!(
        (v["parts"].as_u64(), v["bytes_per_fire"].as_f64()),
        (Some(1), Some(5000.0))
    );
    // The output size caps a batch: 3 tensors of 1000 fit in 3500.
    let v = kernel_alone(
        d,
        "Rebatch",
        r#"{"tensors_per_batch": 5, "num_threads": 3, "output_tensor_size": 3500,
            "memory_pool_size_gb": 0.01, "distribution_file": "rebatch.dist"}"#,
        "2",
    );
    assert_eq!(
        (v["parts"].as_u64(), v["bytes_per_fire"].as_f64()),
        (Some(3), Some(1000.0))
    );
}

#[test]
fn the_new_kernels_run_in_a_server_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("deser.dist"),
        "3,16,32,[{h:4|d:100|t:0};{h:0|d:50|t:8}]\n",
    )
    .unwrap();
    std::fs::write(d.join("chm.dist"), "freq,count\n10,2000\n").unwrap();
    std::fs::write(d.join("rebatch.dist"), "512,50\n4096,50\n").unwrap();
    let cfg = r#"{
      "port": 0, "num_req_handle_threads": 1, "num_io_handle_threads": 1,
      "num_app_logic_threads": 2, "num_req_local_threads": 2,
      "Kernels": [
        {"name": "TensorDeser", "pool": "requestHandle", "stage": 0,
         "params": {"requests_per_run": 64, "num_threads": 2, "distribution_file": "deser.dist"}},
        {"name": "ConcurrentHashMap", "pool": "applicationLogic", "stage": 1, "fanout": 2,
         "params": {"requests_per_run": 500, "num_threads": 2, "distribution_file": "chm.dist"}},
        {"name": "Rebatch", "pool": "applicationLogic", "stage": 2,
         "params": {"tensors_per_batch": 20, "num_threads": 1, "memory_pool_size_gb": 0.01,
                    "num_pregenerated_batches": 10, "distribution_file": "rebatch.dist"}},
        {"name": "Shape", "pool": "IOHandle", "stage": 3, "params": {"quantiles": [0, 1], "sizes": [10, 100]}}
      ]
    }"#;
    std::fs::write(d.join("new.json"), cfg).unwrap();
    let mut child = rackbench(d)
        .args([
            "adsim",
            "server",
            "--config",
            "new.json",
            "--timeout",
            "200",
            "--bind",
            "::1",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let port = wait_serving(&mut child);
    let server = Server { child, port };
    let port = server.port.to_string();
    let out = rackbench(d)
        .args([
            "adsim",
            "client",
            "--server",
            "::1",
            "--port",
            &port,
            "--quick",
            "--qps",
            "20",
            "--runtime",
            "1",
            "--latency",
            "1000",
            "--workers",
            "2",
            "--mode",
            "ai",
            "--ai-request-size-multiplier",
            "1",
            "--timeout",
            "120",
        ])
        .output()
        .unwrap();
    let (so, se) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "client failed:\n{se}\n{so}");
    let m = report_metrics(d);
    assert_eq!(m["server"]["failed"], 0, "{m}");
    let kernels = m["server"]["kernels"].as_array().unwrap();
    let fired: Vec<u64> = kernels
        .iter()
        .map(|k| k["fired"].as_u64().unwrap())
        .collect();
    let requests = fired[3];
    assert!(requests > 0, "{m}");
    // Parts: TensorDeser 2, ConcurrentHashMap 2 x fanout 2, Rebatch 1.
    assert_eq!(
        fired,
        vec![2 * requests, 4 * requests, requests, requests],
        "{m}"
    );
}

/// A downstream for the Client kernels: `rackbench adsim server` on both
/// loopbacks answering every request with a 64-byte string. Its stderr
/// lines arrive on the channel.
struct Downstream {
    child: Child,
    port: u16,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Drop for Downstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const DOWNSTREAM: &str = r#"{"port": 0, "Kernels": [{"name": "Shape", "pool": "IOHandle",
  "params": {"input": "Hreply", "quantiles": [0, 1], "sizes": [64, 64]}}]}"#;

fn start_downstream(dir: &Path, extra: &[&str]) -> Downstream {
    std::fs::write(dir.join("downstream.json"), DOWNSTREAM).unwrap();
    let mut child = rackbench(dir)
        .args([
            "adsim",
            "server",
            "--config",
            "downstream.json",
            "--timeout",
            "300",
        ])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = child.stderr.take().unwrap();
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut port = None;
    let t = Instant::now();
    loop {
        let line = lines
            .recv_timeout(Duration::from_secs(120).saturating_sub(t.elapsed()))
            .expect("the downstream server did not come up");
        if let Some(p) = line.strip_prefix("adsim server: listening on ") {
            let addr = p.split([';', ' ']).next().unwrap_or("");
            port = addr.rsplit(':').next().and_then(|x| x.parse::<u16>().ok());
        }
        if line.contains("serving on") {
            break;
        }
    }
    Downstream {
        child,
        port: port.expect("the listening line comes first"),
        lines,
    }
}

/// Stops the downstream with Ctrl-C and returns the requests it served
/// (all of them successful).
fn stop_downstream(ds: Downstream) -> u64 {
    let pid = libc::pid_t::try_from(ds.child.id()).unwrap();
    // SAFETY: signalling our own child, which has not been waited for.
    unsafe { libc::kill(pid, libc::SIGINT) };
    let t = Instant::now();
    loop {
        let line = ds
            .lines
            .recv_timeout(Duration::from_secs(30).saturating_sub(t.elapsed()))
            .expect("the downstream did not say how many requests it served");
        if let Some(rest) = line.strip_prefix("adsim server: stopped after ") {
            let mut w = rest.split(' ');
            let n: u64 = w.next().unwrap().parse().unwrap();
            assert!(rest.contains("(0 failed)"), "{line}");
            return n;
        }
    }
}

#[test]
fn client_kernels_fan_out_to_a_real_downstream_server() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ds = start_downstream(d, &[]);
    let port = ds.port;
    // Client: two services (the downstream on both loopbacks), requests of
    // 100 bytes from the size CDF, replies of 64: 2 x 164 bytes per fire.
    let client = kernel_alone(
        d,
        "Client",
        &format!(
            r#"{{"services": [{{"host": ["127.0.0.1", "::1"], "port": {port}}}], "quantiles": [0, 1], "sizes": [100, 100]}}"#
        ),
        "1",
    );
    assert_eq!(
        client["bytes_per_fire"].as_f64().unwrap(),
        2.0 * 164.0,
        "{client}"
    );
    // ClientLite: three services (one address, the port listed three
    // times) on connections made once, echoing the kernel command's
    // 4096-byte request body: 3 x (4096 + 64) bytes per fire.
    let lite = kernel_alone(
        d,
        "ClientLite",
        &format!(
            r#"{{"services": [{{"host": "127.0.0.1", "port": [{port}, {port}, {port}]}}], "input": "Rbody"}}"#
        ),
        "2",
    );
    assert_eq!(
        lite["bytes_per_fire"].as_f64().unwrap(),
        3.0 * 4160.0,
        "{lite}"
    );
    // One RPC per service per fire, the warm-up fire (one per thread)
    // included.
    let fires = |v: &Value| v["fires"].as_u64().unwrap() + v["threads"].as_u64().unwrap();
    let expected = 2 * fires(&client) + 3 * fires(&lite);
    assert_eq!(stop_downstream(ds), expected, "{client}\n{lite}");
}

#[test]
fn client_kernels_speak_tls_when_asked_and_name_a_downstream_they_cannot_use() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ds = start_downstream(d, &["--tls", "--bind", "127.0.0.1"]);
    let port = ds.port;
    let services = format!(r#"[{{"host": "127.0.0.1", "port": {port}}}]"#);
    let v = kernel_alone(
        d,
        "ClientLite",
        &format!(r#"{{"services": {services}, "input": "Rbody", "tls": true}}"#),
        "1",
    );
    assert_eq!(v["bytes_per_fire"].as_f64().unwrap(), 4160.0, "{v}");
    // Plaintext against the TLS server: refused, naming the service.
    let out = rackbench(d)
        .args(["adsim", "kernel", "Client", "--seconds", "0.2", "--params"])
        .arg(format!(r#"{{"services": {services}, "input": "Rbody"}}"#))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let se = text(&out.stderr);
    assert!(se.contains(&format!("127.0.0.1:{port}")), "{se}");
    let served = stop_downstream(ds);
    assert_eq!(served, v["fires"].as_u64().unwrap() + 1, "{v}");
}

#[test]
fn client_kernels_refuse_bad_params_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (kernel, params, named) in [
        ("Client", r#"{"input": "Rbody"}"#, "params.services"),
        (
            "ClientLite",
            r#"{"services": [{"host": "127.0.0.1"}], "input": "Rbody"}"#,
            "params.services",
        ),
        (
            "Client",
            r#"{"services": [{"host": "127.0.0.1", "port": 70000}], "input": "Rbody"}"#,
            "params.services",
        ),
        (
            "Client",
            r#"{"services": [{"host": "127.0.0.1", "port": 1}]}"#,
            "params.quantiles",
        ),
        (
            "ClientLite",
            r#"{"services": [{"host": "127.0.0.1", "port": 1}], "input": "Rbody", "tls": "yes"}"#,
            "params.tls",
        ),
    ] {
        let out = rackbench(d)
            .args([
                "adsim",
                "kernel",
                kernel,
                "--seconds",
                "0.2",
                "--params",
                params,
            ])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{kernel} {params} was accepted");
        let se = text(&out.stderr);
        assert!(se.contains(named), "{kernel} {params}: {se}");
    }
}
