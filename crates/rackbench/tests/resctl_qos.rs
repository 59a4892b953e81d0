//! resctl's iocost-qos and iocost-tune through the binary: both kinds are
//! known, their specs are checked with upstream's properties, and running
//! them where io.cost is missing is refused naming the missed sysreqs
//! (runs themselves are tested in the cgroup2 guest, resctl_guest.rs); the
//! `doc` subjects describing
//! them, protection's mem-hog-tune, `common` and `shadow-inode`. (The
//! mem-hog-tune run itself is in resctl.rs, beside the other tests that
//! run hashd, so that it runs alongside them.)
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

mod common;

use common::{rackbench, text};
use std::path::Path;

/// Whether the host has io.cost where the cgroup2 backend looks for it.
fn host_has_iocost() -> bool {
    Path::new("/sys/fs/cgroup/io.cost.qos").exists()
        && std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers")
            .is_ok_and(|c| c.split_whitespace().any(|w| w == "io"))
}

/// `resctl -d DIR -r DIR/r.json ARGS...`: (success, stdout, stderr).
fn resctl(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let o = rackbench(dir)
        .args(["resctl", "-d"])
        .arg(dir)
        .arg("-r")
        .arg(dir.join("r.json"))
        .args(args)
        .output()
        .unwrap();
    (o.status.success(), text(&o.stdout), text(&o.stderr))
}

#[test]
fn iocost_qos_and_tune_are_known_and_refused_with_the_reason() {
    for kind in ["iocost-qos", "iocost-tune"] {
        let d = tempfile::tempdir().unwrap();
        let (ok, out, err) = resctl(d.path(), &["run", kind]);
        assert!(!ok, "{kind} succeeded: {out}");
        assert!(!err.contains("unknown bench kind"), "{err}");
        if host_has_iocost() {
            // Requirements met: the job would run the whole ladder here
            // (resctl_guest.rs runs it); the refusal cannot be seen.
            testenv::skip(
                "no_iocost",
                &format!("this host has io.cost, so {kind} is not refused"),
            );
            continue;
        } else {
            // Refused before anything runs, naming upstream's sysreqs.
            assert!(
                err.contains("Failed") && err.contains("use --force to ignore"),
                "{err}"
            );
            assert!(err.contains(&format!("{kind}: IoCost:")), "{err}");
            assert!(!err.contains(&format!("{kind}: running")), "{err}");
        }
    }
}

#[test]
fn forced_iocost_qos_without_iocost_is_still_refused_not_degraded() {
    if host_has_iocost() {
        testenv::skip(
            "no_iocost",
            "this host has io.cost; the forced refusal is for hosts without it",
        );
        return;
    }
    let d = tempfile::tempdir().unwrap();
    // passive=ALL: nothing on the host is changed by the requirement
    // checks.
    let (ok, out, err) = resctl(d.path(), &["--force", "run", "iocost-qos:passive=ALL"]);
    assert!(!ok, "{out}");
    assert!(
        err.contains("sysreq IoCost missed") && err.contains("even with --force"),
        "{err}"
    );
    // The journal keeps the job without a result: a re-run redoes it.
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.path().join("r.json")).unwrap()).unwrap();
    let text = j.to_string();
    assert!(text.contains("iocost-qos"), "{text}");
    assert!(!text.contains("\"result\":{"), "{text}");
}

#[test]
fn iocost_qos_props_are_upstreams_and_unknown_ones_name_the_closest() {
    let d = tempfile::tempdir().unwrap();
    let refused = |spec: &str| {
        let (ok, _, err) = resctl(d.path(), &["run", spec]);
        assert!(!ok, "{spec} accepted");
        // Checked before the result file is touched.
        assert!(!d.path().join("r.json").exists(), "{spec}");
        err
    };
    let e = refused("iocost-qos:base-loops=1");
    assert!(
        e.contains("unknown property key \"base-loops\"")
            && e.contains("did you mean \"storage-base-loops\""),
        "{e}"
    );
    let e = refused("iocost-qos:loops=2");
    assert!(e.contains("did you mean \"storage-loops\""), "{e}");
    let e = refused("iocost-qos:mem-profile-ladder=1");
    assert!(
        e.contains("\"mem-profile-ladder\"") && e.contains("vrate-intvs"),
        "{e}"
    );
    let e = refused("iocost-qos:vrate-min=60,vrate-max=40");
    assert!(e.contains("invalid vrate range [60, 40]"), "{e}");
    let e = refused("iocost-qos::min=50,maxx=50");
    assert!(
        e.contains("property group 2") && e.contains("did you mean \"max\""),
        "{e}"
    );
    let e = refused("iocost-tune:amoff");
    assert!(e.contains("did you mean \"amof\""), "{e}");
    let e = refused("iocost-tune::amof=max");
    assert!(e.contains("needs name=NAME"), "{e}");
    let e = refused("protection::scenario=mem-hog-tune,size-mx=1G");
    assert!(e.contains("did you mean \"size-max\""), "{e}");
}

#[test]
fn doc_describes_the_qos_benches_and_the_common_topics() {
    let d = tempfile::tempdir().unwrap();
    let doc = |subject: &str| {
        let (ok, out, err) = resctl(d.path(), &["doc", subject]);
        assert!(ok, "doc {subject}: {err}");
        out
    };
    let q = doc("iocost-qos");
    for w in [
        "vrate-intvs",
        "storage-base-loops",
        "isol-thr",
        "ignore-min-perf",
        "aMOF",
        "MOF",
        "work_csv",
        "lat-imp",
        "100, 80, 60, 40 and 20",
        "runs as upstream's",
    ] {
        assert!(q.contains(w), "doc iocost-qos lacks {w:?}:\n{q}");
    }
    let t = doc("iocost-tune");
    for w in [
        "isolated-bandwidth",
        "amof-delta",
        "rlat-99-q1",
        "scale-min",
    ] {
        assert!(t.contains(w), "doc iocost-tune lacks {w:?}:\n{t}");
    }
    let p = doc("protection");
    for w in ["mem-hog-tune", "isol", "lat-imp", "work_csv", "size-max"] {
        assert!(p.contains(w), "doc protection lacks {w:?}:\n{p}");
    }
    assert!(doc("common").contains("passive="));
    assert!(doc("shadow-inode").contains("MemShadowInodeProt"));
    let specs = doc("specs");
    assert!(
        specs.contains("iocost-qos") && specs.contains("iocost-tune"),
        "{specs}"
    );
    let (ok, _, err) = resctl(d.path(), &["doc", "shadow-inodes"]);
    assert!(!ok && err.contains("common, shadow-inode"), "{err}");
}
