//! What protection's per-IO latency trace costs: fio's 4 KiB O_DIRECT
//! random reads (iodepth 32) alone and under the trace, alternating, on a
//! file in DIR: `cargo run --release -p resctl --example iotrace_cost --
//! [DIR] [SECS] [ROUNDS]` (as root; `bench/resctl_iotrace_cost.sh` runs it).
//!
//! Prints each round's IOPS both ways and the trace's own figures (IOs
//! traced, the reader's CPU, the sampling it chose), then one line with
//! the medians and their ratio.
// An example program: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

use resctl::sys::cgroup::BackendKind;
use resctl::sys::iotrace::IoTrace;
use std::path::Path;
use std::process::Command;

fn fio(file: &Path, secs: u32) -> f64 {
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
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Terse v3: field 8 is the read IOPS.
    String::from_utf8_lossy(&o.stdout)
        .split(';')
        .nth(7)
        .unwrap()
        .parse()
        .unwrap()
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = Path::new(args.first().map_or("/var/tmp", String::as_str));
    let secs: u32 = args.get(1).map_or(10, |s| s.parse().unwrap());
    let rounds: usize = args.get(2).map_or(3, |s| s.parse().unwrap());
    let si = resctl::sys::sysinfo::collect(dir, BackendKind::None).unwrap();
    let file = dir.join("rackbench-iotrace-cost.f");
    let (mut alone, mut traced, mut cpu) = (Vec::new(), Vec::new(), Vec::new());
    for r in 1..=rounds {
        let a = fio(&file, secs);
        let t = IoTrace::start(si.scr_devnr).unwrap();
        let b = fio(&file, secs);
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
}
