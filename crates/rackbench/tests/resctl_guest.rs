//! resctl-bench on a real cgroup2 kernel: each test boots a QEMU guest
//! with `deploy/cgroup2-guest.sh` (Debian's cloud kernel, cgroup v1 off,
//! a virtio scratch disk) and runs this build's binary in it. Under TCG
//! the guest is 50-100x slower than the host, so the tests check
//! behaviour (what runs, what is recorded, what is restored), never a
//! figure. They skip visibly (kind GUEST) where the guest cannot start,
//! and `.ci/run` requires them.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

mod common;

use common::text;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The guest runner, or `None` after a visible skip when it cannot start
/// a guest here.
fn guest() -> Option<PathBuf> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/cgroup2-guest.sh");
    let o = Command::new("bash").arg(&script).arg("check").output();
    match o {
        Ok(o) if o.status.success() => Some(script),
        Ok(o) => {
            testenv::skip(
                "guest",
                &format!(
                    "cannot start a cgroup2 guest: {} (bash deploy/cgroup2-guest.sh setup)",
                    text(&o.stdout).trim()
                ),
            );
            None
        }
        Err(e) => {
            testenv::skip("guest", &format!("cannot run bash: {e}"));
            None
        }
    }
}

/// One guest at a time: each keeps both host cores busy under TCG, and
/// the benches' settling windows are wall-clock times.
static ONE_GUEST: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Boots the guest, runs `cmds` there (sh -e) and copies the guest's
/// `/mnt/scratch/out` into `out`. Returns whether the commands succeeded
/// and the console.
fn in_guest(script: &Path, out: &Path, cmds: &str) -> (bool, String) {
    let _one = ONE_GUEST.lock().unwrap_or_else(|p| p.into_inner());
    let o = Command::new("bash")
        .arg(script)
        .args(["run", "--timeout", "1500", "--out"])
        .arg(out)
        .arg(env!("CARGO_BIN_EXE_rackbench"))
        .arg("--")
        .arg(cmds)
        .output()
        .unwrap();
    let console = format!("{}{}", text(&o.stdout), text(&o.stderr));
    (o.status.success(), console)
}

/// The commands that give the guest 1 GiB of swap on the scratch disk
/// (storage measures what swap offloads).
const SWAP: &str = "fallocate -l 1G /mnt/scratch/swap && chmod 600 /mnt/scratch/swap && \
                    mkswap /mnt/scratch/swap >/dev/null && swapon /mnt/scratch/swap";

fn read_json(p: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Where the guest's scratch disk is (`MAJ:MIN`), for the commands.
const DEVNR: &str = "$(cat /sys/block/vda/dev)";

/// How many vrate rungs `--test`'s ladder (vrate-max=125, 4 intervals
/// from 0, so 31.25 apart, with `dither`) has. As upstream, the lowest
/// rung is clamped to 1%, so the ladder loses it when the random dither
/// is within 1% of its -31.25 end (about 1 draw in 31): 4 rungs or 3.
fn test_ladder_rungs(dither: f64) -> usize {
    assert!((-31.25..0.0).contains(&dither), "dither {dither}");
    let (click, hi) = (31.25, 125.0 + dither);
    let lo = (click + dither).max(1.0);
    (0..=4)
        .map(|k| hi - f64::from(k) * click)
        .take_while(|v| *v > lo - 0.001)
        .count()
}

/// `run iocost-tune` on a fresh journal, as upstream: iocost-params, then
/// the nested iocost-qos ladder (--test's: the baseline and three or four
/// dithered rungs up to 125%, those below the device's minimum skipped),
/// then the solutions. Each run applies its QoS to the scratch device, vrate is
/// sampled while iocost is on, the record and result are upstream's
/// shape, `format`, `summary`, `study` and `solve` read them in the guest
/// and `summary` and `merge` on the host; the device's io.cost.qos is
/// what iocost-qos found.
#[test]
fn iocost_tune_on_a_fresh_journal_runs_iocost_qos_then_solves() {
    let Some(script) = guest() else { return };
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    let cmds = format!(
        "{SWAP}
mkdir -p /mnt/scratch/d
rackbench resctl --test -d /mnt/scratch/d -r out/r.json run iocost-tune > out/run.txt 2> out/run.err || {{ tail -40 out/run.err; exit 1; }}
grep -h \"^{DEVNR} \" /sys/fs/cgroup/io.cost.qos > out/qos-after.txt || true
rackbench resctl -r out/r.json format iocost-qos > out/format.txt
rackbench resctl -r out/r.json summary > out/summary.txt
rackbench resctl -r out/r.json study iocost-qos > out/study.txt 2>&1
rackbench resctl -r out/r.json solve iocost-tune > out/solve.txt 2>&1"
    );
    let (ok, console) = in_guest(&script, &out, &cmds);
    assert!(ok, "{console}");
    let err = std::fs::read_to_string(out.join("run.err")).unwrap();
    assert!(
        err.contains("iocost-tune: iocost-qos run not specified, running the following"),
        "{err}"
    );
    let r = read_json(&out.join("r.json"));
    let jobs = r.as_array().unwrap();
    let kinds: Vec<&str> = jobs
        .iter()
        .map(|j| j["spec"]["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["iocost-params", "iocost-qos", "iocost-tune"]);
    let qos = &jobs[1];
    let runs = qos["record"]["runs"].as_array().unwrap();
    let dither = qos["record"]["dither_dist"].as_f64().unwrap();
    assert_eq!(
        runs.len(),
        1 + test_ladder_rungs(dither),
        "{}",
        qos["record"]
    );
    assert!(runs[0]["qos"].is_null(), "the baseline has iocost off");
    assert!(qos["record"]["inc_runs"].as_array().unwrap().is_empty());
    let res = qos["result"]["runs"].as_array().unwrap();
    assert_eq!(res.len(), runs.len());
    assert_eq!(res[0]["vrate"]["mean"], 0.0, "no vrate with iocost off");
    let ran: Vec<usize> = (1..runs.len()).filter(|i| !runs[*i].is_null()).collect();
    assert!(!ran.is_empty(), "every rung was skipped:\n{err}");
    for i in ran {
        // The QoS asked for is what io.cost.qos held, and vrate was
        // sampled from the root's io.stat while iocost was on.
        let pinned = runs[i]["ovr"]["min"].as_f64().unwrap();
        assert_eq!(runs[i]["qos"]["min"].as_f64().unwrap(), pinned);
        assert!(res[i]["vrate"]["mean"].as_f64().unwrap() > 0.0, "run {i}");
        assert!(!runs[i]["samples"].as_array().unwrap().is_empty());
        assert!(res[i]["stor"]["mem_offload_factor"].as_f64().unwrap() > 0.0);
        let prot = &runs[i]["prot"]["scenarios"][0]["MemHogTune"];
        assert!(prot["isol_pct"] == "05", "{prot}");
    }
    let format = std::fs::read_to_string(out.join("format.txt")).unwrap();
    for want in [
        "RUN 00",
        "RUN 01 - Protection",
        "QoS result: MOF=",
        "[00] QoS: iocost=off",
        "RLAT",
    ] {
        assert!(format.contains(want), "{want:?} not in\n{format}");
    }
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert!(summary.contains("Solutions"), "{summary}");
    assert!(summary.contains("[naive"), "{summary}");
    // io.cost.qos is back to what iocost-qos found (iocost-params' QoS,
    // which iocost-params leaves applied, as upstream hands it on), not the
    // last rung's pinned vrate.
    let after = std::fs::read_to_string(out.join("qos-after.txt")).unwrap();
    let params = &jobs[0]["record"]["qos"];
    assert!(after.contains("enable=1"), "{after}");
    assert!(
        after.contains(&format!(
            "min={:.2} max={:.2}",
            params["min"].as_f64().unwrap(),
            params["max"].as_f64().unwrap()
        )),
        "io.cost.qos not restored to iocost-params' QoS: {after}"
    );
    // The host reads what the guest wrote, and merges its solutions.
    let o = Command::new(env!("CARGO_BIN_EXE_rackbench"))
        .args(["resctl", "-r"])
        .arg(out.join("r.json"))
        .arg("summary")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("MOF"), "{}", text(&o.stdout));
    let o = Command::new(env!("CARGO_BIN_EXE_rackbench"))
        .args(["resctl", "-r"])
        .arg(d.path().join("merged.json"))
        .args(["merge", "--ignore-sysreqs"])
        .arg(out.join("r.json"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    // merge prints its merge-info job (as upstream 2.2.5); the merged
    // iocost-tune job holds the solutions.
    let merged = text(&o.stdout);
    assert!(
        merged.contains("[merge-info") && merged.contains("+ ") && merged.contains("r.json"),
        "{merged}"
    );
    let o = Command::new(env!("CARGO_BIN_EXE_rackbench"))
        .args(["resctl", "-r"])
        .arg(d.path().join("merged.json"))
        .args(["summary", "iocost-tune"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("\nSolutions\n"),
        "{}",
        text(&o.stdout)
    );
}

/// The resctl-bench README's iocost off/on session, exactly as written
/// there: io.cost disabled and wbt off by hand, then hashd-params and a
/// protection run that leave IO control alone (passive=io), iocost-params
/// (which enables io.cost), and a protection run with it on.
#[test]
fn the_readmes_iocost_off_then_on_session_runs_in_a_cgroup2_guest() {
    let Some(script) = guest() else { return };
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    let cmds = format!(
        "{SWAP}
mkdir -p /mnt/scratch/d
echo \"{DEVNR} enable=0\" > /sys/fs/cgroup/io.cost.qos
echo 0 > /sys/block/vda/queue/wbt_lat_usec
rackbench resctl --test -d /mnt/scratch/d -r out/r.json run hashd-params:passive=io protection:id=iocost-off,passive=io iocost-params protection:id=iocost-on > out/run.txt 2> out/run.err || {{ tail -40 out/run.err; exit 1; }}
rackbench resctl -r out/r.json format > out/format.txt"
    );
    let (ok, console) = in_guest(&script, &out, &cmds);
    assert!(ok, "{console}");
    let r = read_json(&out.join("r.json"));
    let jobs = r.as_array().unwrap();
    let ids: Vec<String> = jobs
        .iter()
        .map(|j| {
            format!(
                "{}{}",
                j["spec"]["kind"].as_str().unwrap(),
                j["spec"]["id"]
                    .as_str()
                    .map(|i| format!(":{i}"))
                    .unwrap_or_default()
            )
        })
        .collect();
    assert_eq!(
        ids,
        [
            "hashd-params",
            "protection:iocost-off",
            "iocost-params",
            "protection:iocost-on"
        ]
    );
    assert!(jobs.iter().all(|j| !j["result"].is_null()), "{r}");
    // io.cost really off, then on.
    assert_eq!(jobs[1]["sysinfo"]["iocost"]["qos"]["enable"], 0);
    assert_eq!(jobs[3]["sysinfo"]["iocost"]["qos"]["enable"], 1);
    let controls = |j: &serde_json::Value| j["record"]["controls"].to_string();
    assert!(
        controls(&jobs[1]).contains("passive=io"),
        "{}",
        controls(&jobs[1])
    );
    assert!(
        controls(&jobs[3]).contains("iocost: applied"),
        "{}",
        controls(&jobs[3])
    );
    // vrate was sampled only while io.cost was on.
    let vrate = |j: &serde_json::Value| j["result"]["scenarios"][0]["vrate"].as_f64().unwrap();
    assert_eq!(vrate(&jobs[1]), 0.0);
    assert!(vrate(&jobs[3]) > 0.0);
    let format = std::fs::read_to_string(out.join("format.txt")).unwrap();
    let headers: Vec<&str> = format.lines().filter(|l| l.contains("iosched=")).collect();
    assert_eq!(headers.len(), 4, "{format}");
    assert!(headers[1].contains("wbt=off iocost=off"), "{format}");
    assert!(headers[3].contains("iocost=on"), "{format}");
}
