//! Stand-alone runs of the ML kernels, until the `rackbench adsim kernel`
//! command exists (same arguments after it):
//!
//! ```text
//! adsim_ml kernel NAME --params JSON [--threads N] [--seconds S] [--json]
//! adsim_ml pipeline model_a [--scale X] [--seconds S] [--body-bytes N]
//! ```
//!
//! `kernel` prints [`adsim::kernels::bench::Standalone`] as JSON.
//! `pipeline` builds a preset and runs its plan on one thread, stage by
//! stage, request after request, and prints the mean wall and CPU time
//! per request and per kernel instance as JSON.
// An example program: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

use adsim::config::preset;
use adsim::kernels::{HandleObjs, RequestObjs, build, gen_string};
use rand::SeedableRng;
use serde_json::{Map, Value, json};
use std::time::Instant;

fn usage() -> ! {
    eprintln!(
        "usage: adsim_ml kernel NAME --params JSON [--threads N] [--seconds S] [--json]\n       adsim_ml pipeline model_a [--scale X] [--seconds S] [--body-bytes N]"
    );
    std::process::exit(2)
}

fn opt<'a>(args: &'a [String], key: &str) -> Option<&'a str> {
    args.iter().position(|a| a == key).map(|i| {
        args.get(i + 1)
            .map(String::as_str)
            .unwrap_or_else(|| usage())
    })
}

fn num<T: std::str::FromStr>(args: &[String], key: &str, default: T) -> T {
    opt(args, key).map_or(default, |v| {
        v.parse().unwrap_or_else(|_| {
            eprintln!("{key}: {v:?} is not a number");
            std::process::exit(2)
        })
    })
}

fn cpu_now() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(cmd), Some(name)) = (args.first(), args.get(1)) else {
        usage()
    };
    let result = match cmd.as_str() {
        "kernel" => kernel(name, &args[2..]),
        "pipeline" => pipeline(name, &args[2..]),
        _ => usage(),
    };
    match result {
        Ok(v) => println!("{v}"),
        Err(e) => {
            eprintln!("adsim_ml: {e}");
            std::process::exit(1)
        }
    }
}

fn kernel(name: &str, args: &[String]) -> Result<Value, String> {
    let params: Map<String, Value> = match opt(args, "--params") {
        Some(p) => serde_json::from_str(p).map_err(|e| format!("--params: {e}"))?,
        None => Map::new(),
    };
    let r = adsim::kernels::bench::standalone(
        name,
        &params,
        num(args, "--threads", 1),
        num(args, "--seconds", 2.0),
    )?;
    serde_json::to_value(r).map_err(|e| e.to_string())
}

fn pipeline(name: &str, args: &[String]) -> Result<Value, String> {
    let scale: f64 = num(args, "--scale", 1.0);
    let seconds: f64 = num(args, "--seconds", 5.0);
    let body_bytes: usize = num(args, "--body-bytes", 8192);
    let c = preset(name, 1, scale)?;
    let h = HandleObjs::new();
    let plan = c.plan();
    let t0 = Instant::now();
    let mut kernels = Vec::new();
    for st in &plan.stages {
        for i in st {
            let name = c.kernels[i.kernel].name.clone();
            kernels.push((
                name,
                build(&c.kernels[i.kernel].name, &i.params, i.fidx, &h)?,
            ));
        }
    }
    let build_s = t0.elapsed().as_secs_f64();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
    let bodies: Vec<bytes::Bytes> = (0..64)
        .map(|_| gen_string(body_bytes, &mut rng).into())
        .collect();
    let mut wall = vec![0.0; kernels.len()];
    let mut cpu = vec![0.0; kernels.len()];
    let mut n = 0usize;
    let mut response = 0;
    let start = Instant::now();
    let (cpu0, wall0) = (cpu_now(), Instant::now());
    while start.elapsed().as_secs_f64() < seconds {
        let rq = RequestObjs::new(bodies[n % bodies.len()].clone());
        response = 0;
        for (k, (_, kern)) in kernels.iter().enumerate() {
            let (c0, w0) = (cpu_now(), Instant::now());
            for part in 0..kern.parts() {
                response += kern.fire(&rq, part)?.output.len();
            }
            wall[k] += w0.elapsed().as_secs_f64();
            cpu[k] += cpu_now() - c0;
        }
        n += 1;
    }
    let (total_cpu, total_wall) = (cpu_now() - cpu0, wall0.elapsed().as_secs_f64());
    let per: Vec<Value> = kernels
        .iter()
        .enumerate()
        .map(|(k, (name, kern))| {
            json!({"kernel": name, "parts": kern.parts(), "wall_ms": wall[k] / n as f64 * 1e3,
                   "cpu_ms": cpu[k] / n as f64 * 1e3, "gflop": kern.work().flops * kern.parts() as f64 / 1e9})
        })
        .collect();
    Ok(
        json!({"preset": name, "scale": scale, "body_bytes": body_bytes, "build_s": build_s,
              "requests": n, "response_bytes": response,
              "wall_ms_per_request": total_wall / n as f64 * 1e3,
              "cpu_ms_per_request": total_cpu / n as f64 * 1e3, "kernels": per}),
    )
}
