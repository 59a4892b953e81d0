//! `DCPERF_PERF_RECORD=1`, as DCPerf's search_qps.sh: once the final run
//! (or a single `-q` rate) has run for 30 s, `perf record -a -g -- sleep 5`
//! profiles the whole machine into `perf.data`, unless that file already
//! exists. Upstream writes it in FeedSim's source folder, whence the job's
//! copymove hook moves it to the metrics folder; here it is written to the
//! output folder directly, with perf's own output in `perf-record.log`.
//! When the run is shorter than 35 s the profile starts half-way, so a
//! short final (`--quick`) is still profiled (upstream's would end first).
//! With several instances, the first to reach its final records.

use load::search::{Event, Phase};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{RecvTimeoutError, Sender, channel};
use std::thread::JoinHandle;
use std::time::Duration;

/// One recording per process, as upstream's `[ -f perf.data ]` check.
static STARTED: AtomicBool = AtomicBool::new(false);

/// Upstream's delay into the final run.
const DELAY: Duration = Duration::from_secs(30);
/// Upstream's `sleep 5`.
const LENGTH: &str = "5";

/// True when the environment asks for the profile.
pub fn requested() -> bool {
    std::env::var("DCPERF_PERF_RECORD").is_ok_and(|v| v == "1")
}

/// Watches the search's events and starts the profile in the final run.
pub struct PerfRecord {
    dir: PathBuf,
    single_fixed: bool,
    job: Option<(Sender<()>, JoinHandle<()>)>,
}

impl PerfRecord {
    /// `single_fixed`: the run is one `-q` rate (upstream also records then).
    pub fn new(dir: PathBuf, single_fixed: bool) -> Self {
        PerfRecord {
            dir,
            single_fixed,
            job: None,
        }
    }

    pub fn observe(&mut self, e: &Event<'_>) {
        let Event::Start {
            phase,
            duration,
            extension: 0,
            ..
        } = e
        else {
            return;
        };
        let wanted = *phase == Phase::Final || (*phase == Phase::Fixed && self.single_fixed);
        if !wanted || self.job.is_some() || STARTED.swap(true, Ordering::SeqCst) {
            return;
        }
        let out = self.dir.join("perf.data");
        if out.exists() {
            eprintln!(
                "DCPERF_PERF_RECORD: {} already exists; not recording",
                out.display()
            );
            return;
        }
        let delay = if *duration < DELAY + Duration::from_secs(5) {
            *duration / 2
        } else {
            DELAY
        };
        let log = self.dir.join("perf-record.log");
        let (tx, rx) = channel::<()>();
        let spawned = std::thread::Builder::new()
            .name("perf-record".into())
            .spawn(move || {
                if !matches!(rx.recv_timeout(delay), Err(RecvTimeoutError::Timeout)) {
                    return;
                }
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&log);
                let (stdout, stderr) = match file.and_then(|f| Ok((f.try_clone()?, f))) {
                    Ok((a, b)) => (Stdio::from(a), Stdio::from(b)),
                    Err(_) => (Stdio::null(), Stdio::null()),
                };
                eprintln!(
                    "DCPERF_PERF_RECORD: perf record -a -g for {LENGTH} s into {}",
                    out.display()
                );
                let r = Command::new("perf")
                    .args(["record", "-a", "-g", "-o"])
                    .arg(&out)
                    .args(["--", "sleep", LENGTH])
                    .stdin(Stdio::null())
                    .stdout(stdout)
                    .stderr(stderr)
                    .status();
                match r {
                    Ok(s) if s.success() => {}
                    Ok(s) => eprintln!(
                        "DCPERF_PERF_RECORD: perf record exited with {s}; see {}",
                        log.display()
                    ),
                    Err(e) => eprintln!("DCPERF_PERF_RECORD: cannot run perf: {e}"),
                }
            });
        match spawned {
            Ok(h) => self.job = Some((tx, h)),
            Err(e) => eprintln!("DCPERF_PERF_RECORD: cannot start the recorder: {e}"),
        }
    }

    /// Ends the watch: a profile not yet started is dropped, one running
    /// is waited for.
    pub fn finish(&mut self) {
        if let Some((tx, h)) = self.job.take() {
            let _ = tx.send(());
            let _ = h.join();
        }
    }
}

impl Drop for PerfRecord {
    fn drop(&mut self) {
        self.finish();
    }
}
