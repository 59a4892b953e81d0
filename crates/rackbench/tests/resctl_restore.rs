//! resctl-bench leaves the host as it found it: the settings its system
//! requirements change (the scratch disk's IO scheduler and wbt,
//! swappiness) are written back when stderr is a closed pipe
//! (`resctl-bench ... 2>&1 | head`) and when SIGTERM or SIGINT stops a
//! run half-way; a job that can never run changes nothing. Its own test
//! binary, so that no other test changes the same settings meanwhile.
// Test code: a failed unwrap is a stop with its message, as intended.
#![allow(clippy::unwrap_used)]

mod common;

use common::text;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The sysfs queue directory of the whole disk holding `dir`.
fn queue_dir(dir: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(dir).ok()?.dev();
    let (maj, min) = (libc::major(dev), libc::minor(dev));
    let sys = PathBuf::from(format!("/sys/dev/block/{maj}:{min}"));
    let real = std::fs::canonicalize(&sys).ok()?;
    // A partition's queue is its parent's.
    let disk = if real.join("partition").exists() {
        real.parent()?.to_path_buf()
    } else {
        real
    };
    let q = disk.join("queue");
    q.is_dir().then_some(q)
}

/// The settings a run may change, as read now.
fn settings(q: &Path) -> Vec<(String, String)> {
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    vec![
        ("scheduler".into(), read(&q.join("scheduler"))),
        ("wbt_lat_usec".into(), read(&q.join("wbt_lat_usec"))),
        (
            "swappiness".into(),
            read(Path::new("/proc/sys/vm/swappiness")),
        ),
    ]
}

/// Root with a writable scratch disk queue whose settings a run would
/// change, or `None` after a visible skip.
fn host(dir: &Path) -> Option<PathBuf> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        testenv::skip("cgroup", "not root: resctl-bench changes no host setting");
        return None;
    }
    let Some(q) = queue_dir(dir) else {
        testenv::skip(
            "blockdev",
            &format!("{} is not on a block device with a queue", dir.display()),
        );
        return None;
    };
    if std::fs::OpenOptions::new()
        .write(true)
        .open(q.join("scheduler"))
        .is_err()
    {
        testenv::skip(
            "cgroup",
            &format!("{} is not writable", q.join("scheduler").display()),
        );
        return None;
    }
    Some(q)
}

fn resctl(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rackbench"));
    c.current_dir(dir)
        .args(["--no-store", "resctl", "--test", "-d"])
        .arg(dir)
        .arg("-r")
        .arg(dir.join("r.json"))
        .stdin(Stdio::null());
    c
}

/// Waits until the run's journal holds a started job (the host's settings
/// have been changed by then).
fn wait_started(dir: &Path, child: &mut std::process::Child) {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(120) {
        if let Ok(t) = std::fs::read_to_string(dir.join("r.json"))
            && t.contains("hashd-params")
        {
            return;
        }
        if let Ok(Some(st)) = child.try_wait() {
            panic!("the run ended before it started a job: {st}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the run did not start a job within 120 s");
}

/// Writeback throttling on (the kernel's default, written as -1) while
/// the test runs, so that a run has it to turn off even on a host that a
/// killed run left with it off; the value found is written back on drop.
struct WbtOn {
    path: PathBuf,
    found: String,
}

impl WbtOn {
    fn new(q: &Path) -> WbtOn {
        let path = q.join("wbt_lat_usec");
        let found = std::fs::read_to_string(&path).unwrap_or_default();
        if found.trim() == "0" {
            let _ = std::fs::write(&path, "-1");
        }
        WbtOn { path, found }
    }
}

impl Drop for WbtOn {
    fn drop(&mut self) {
        if !self.found.trim().is_empty() {
            let _ = std::fs::write(&self.path, self.found.trim());
        }
    }
}

#[test]
fn settings_are_restored_with_stderr_closed_and_on_sigterm_and_sigint() {
    let d = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let Some(q) = host(d.path()) else { return };
    let _wbt = WbtOn::new(&q);
    let before = settings(&q);

    // stderr a closed pipe: the run goes on and restores everything.
    let mut child = resctl(d.path())
        .args(["run", "hashd-params"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    wait_started(d.path(), &mut child);
    // Changed while the job runs (the check fixed something).
    let during = settings(&q);
    // SAFETY: kill on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let st = child.wait().unwrap();
    assert!(!st.success(), "stopped by SIGTERM: {st}");
    assert_eq!(settings(&q), before, "not restored with a closed stderr");
    assert_ne!(
        during, before,
        "the run changed no setting: nothing was tested"
    );

    // SIGINT half-way, stderr kept: restored, and the journal keeps the
    // interrupted job.
    std::fs::remove_file(d.path().join("r.json")).unwrap();
    let mut child = resctl(d.path())
        .args(["run", "hashd-params"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_started(d.path(), &mut child);
    // SAFETY: kill on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(err.contains("restored"), "{err}");
    assert_eq!(settings(&q), before, "not restored after SIGINT:\n{err}");
}

#[test]
fn a_job_that_cannot_run_changes_nothing() {
    let d = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let Some(q) = host(d.path()) else { return };
    let before = settings(&q);
    let o = resctl(d.path())
        .args(["run", "merge-info"])
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("not an actual benchmark"), "{err}");
    assert!(!err.contains("restored"), "{err}");
    assert_eq!(settings(&q), before);
    assert!(
        !d.path().join("r.json").exists(),
        "a refused job wrote the journal"
    );
}
