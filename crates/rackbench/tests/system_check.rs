//! `rackbench system_check` through the binary: the shape of its lines and
//! JSON and its exit status, on this machine and on a faked /sys and /proc
//! (never this machine's values).
#![allow(clippy::unwrap_used)]

use std::process::{Command, Output};

fn rackbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rackbench"))
        .args(args)
        .output()
        .unwrap()
}

/// `pass|warn  NAME: FOUND; advice: ADVICE`, split into its parts.
fn parts(line: &str) -> (&str, &str, &str, &str) {
    let (status, rest) = line.split_once("  ").unwrap();
    let (name, rest) = rest.split_once(": ").unwrap();
    let (found, advice) = rest.rsplit_once("; advice: ").unwrap();
    (status, name, found, advice)
}

const NAMES: &[&str] = &[
    "Kernel Version",
    "SELinux Status",
    "Open Files Limit",
    "THP Status",
    "CPU Governor",
    "Boost Status",
    "SMT",
    "NUMA Nodes",
    "CXL",
    "Swap",
    "cgroups",
    "BIOS Version",
    "BIOS Release Date",
];

#[test]
fn this_machine_one_pass_or_warn_line_per_check_exit_0() {
    for cmd in ["system_check", "system-check"] {
        let o = rackbench(&[cmd]);
        assert!(o.status.success(), "{cmd}: {o:?}");
        let out = String::from_utf8(o.stdout).unwrap();
        let names: Vec<&str> = out
            .lines()
            .map(|l| {
                let (status, name, found, advice) = parts(l);
                assert!(status == "pass" || status == "warn", "{l}");
                assert!(!found.is_empty() && !advice.is_empty(), "{l}");
                name
            })
            .collect();
        assert_eq!(names, NAMES, "{out}");
    }
}

#[test]
fn json_has_every_check_and_counts_warnings() {
    let o = rackbench(&["system_check", "--json"]);
    assert!(o.status.success(), "{o:?}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let checks = v["checks"].as_array().unwrap();
    let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, NAMES);
    let warns = checks
        .iter()
        .filter(|c| {
            let s = c["status"].as_str().unwrap();
            assert!(s == "pass" || s == "warn", "{c}");
            assert!(c["found"].is_string() && c["advice"].is_string(), "{c}");
            s == "warn"
        })
        .count();
    assert_eq!(v["warnings"].as_u64().unwrap() as usize, warns);
}

#[test]
fn a_faked_machine_with_bad_settings_warns_but_exits_0() {
    let d = tempfile::tempdir().unwrap();
    for (p, t) in [
        (
            "sys/kernel/mm/transparent_hugepage/enabled",
            "always madvise [never]\n",
        ),
        (
            "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
            "powersave\n",
        ),
        ("sys/devices/system/cpu/intel_pstate/no_turbo", "1\n"),
        (
            "proc/swaps",
            "Filename Type Size Used Priority\n/dev/sda2 partition 2097152 0 -2\n",
        ),
    ] {
        let f = d.path().join(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, t).unwrap();
    }
    let o = rackbench(&["system_check", "--root", d.path().to_str().unwrap()]);
    assert!(o.status.success(), "{o:?}");
    let out = String::from_utf8(o.stdout).unwrap();
    let line = |n: &str| {
        out.lines()
            .map(parts)
            .find(|p| p.1 == n)
            .unwrap_or_else(|| panic!("no {n} in {out}"))
    };
    assert_eq!(line("THP Status").0, "warn");
    assert_eq!(line("THP Status").2, "never");
    assert_eq!(line("CPU Governor").2, "powersave on 1 of 1 CPUs");
    assert_eq!(line("Boost Status").2, "Disabled (intel_pstate no_turbo=1)");
    assert_eq!(line("Swap").2, "2048 MiB on /dev/sda2");
    assert!(out.lines().filter(|l| l.starts_with("warn")).count() >= 4);
}

#[test]
fn a_missing_root_is_an_error() {
    let o = rackbench(&["system_check", "--root", "/nonexistent/rackbench-root"]);
    assert!(!o.status.success());
    let e = String::from_utf8(o.stderr).unwrap();
    assert!(e.contains("/nonexistent/rackbench-root"), "{e}");
}
