//! What protection's per-IO latency trace costs: fio's 4 KiB O_DIRECT
//! random reads (iodepth 32) alone and under the trace, alternating, on a
//! file in DIR: `cargo run --release -p resctl --example iotrace_cost --
//! [DIR] [SECS] [ROUNDS]` (as root; `bench/resctl_iotrace_cost.sh` runs it).
//!
//! Prints each round's IOPS both ways and the trace's own figures (IOs
//! traced, the reader's CPU, the sampling it chose), then one line with
//! the medians and their ratio.
use resctl::sys::cgroup::BackendKind;
use resctl::sys::iotrace::IoTrace;
use std::path::Path;
use std::process::Command;

fn fio(file: &Path, secs: u32) -> Result<f64, String> {
    let o = Command::new("fio")
        .args([
            "--name=r",
            "--rw=randread",
            "--bs=4k",
            "--size=256M",
            "--direct=1",
            "--ioengine=libaio",
            "--iodepth=32",
            "--time_based",
            "--output-format=terse",
        ])
        .arg(format!("--runtime={secs}"))
        .arg(format!("--filename={}", file.display()))
        .output()
        .map_err(|e| format!("cannot run fio: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "fio failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    // Terse v3: field 8 is the read IOPS.
    let out = String::from_utf8_lossy(&o.stdout);
    out.split(';')
        .nth(7)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("fio's terse output has no read IOPS in field 8: {out}"))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The optional positional argument `i`, or `dfl`.
fn arg<T: std::str::FromStr>(args: &[String], i: usize, name: &str, dfl: T) -> Result<T, String> {
    match args.get(i) {
        None => Ok(dfl),
        Some(s) => s
            .parse()
            .map_err(|_| format!("{name} {s:?}: expected a whole number")),
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = Path::new(args.first().map_or("/var/tmp", String::as_str));
    let secs: u32 = arg(&args, 1, "SECS", 10)?;
    let rounds: usize = arg(&args, 2, "ROUNDS", 3)?.max(1);
    let si = resctl::sys::sysinfo::collect(dir, BackendKind::None)?;
    let file = dir.join("rackbench-iotrace-cost.f");
    let (mut alone, mut traced, mut cpu) = (Vec::new(), Vec::new(), Vec::new());
    for r in 1..=rounds {
        let a = fio(&file, secs)?;
        let t = IoTrace::start(si.scr_devnr)?;
        let b = fio(&file, secs)?;
        let st = t.finish();
        println!("round {r}: fio alone {a:.0} IOPS, under the trace {b:.0} IOPS; {st}");
        alone.push(a);
        traced.push(b);
        cpu.push((st.cpu_user_secs + st.cpu_sys_secs) / st.wall_secs);
    }
    let _ = std::fs::remove_file(&file);
    let (a, b) = (median(&mut alone), median(&mut traced));
    println!(
        "iotrace: fio alone {a:.0} IOPS, under the trace {b:.0} IOPS, ratio {:.2}, trace reader {:.1}% of a core (medians of {rounds})",
        b / a,
        median(&mut cpu) * 100.0
    );
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("iotrace_cost: {e}");
        std::process::exit(1);
    }
}
