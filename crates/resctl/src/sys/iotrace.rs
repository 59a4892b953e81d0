//! Per-IO completion latency of one block device, from the kernel's block
//! tracepoints: upstream's rd-agent measures it with a BPF program
//! (biolatpcts) from each request's issue to its completion; this reads
//! the same two points, `block:block_rq_issue` and `block:block_rq_complete`,
//! through a private ftrace instance (no BPF toolchain needed).
//!
//! [`IoTrace::start`] makes the instance `instances/rackbench-iolat-PID`
//! under tracefs (mounting tracefs at /sys/kernel/tracing when it is not
//! mounted), filters both events on the device and reads `trace_pipe` on a
//! thread. Each completion matched with its issue (by direction, sector
//! and size) adds its latency to the current second's histogram;
//! [`IoTrace::take_second`] returns that second's latency percentiles per
//! direction and starts the next. Dropping it disables the events and
//! removes the instance (and unmounts tracefs when this process mounted
//! it and no other trace of it is running).
//!
//! Own code rather than a crate: there is no maintained Rust crate for
//! ftrace instances; the parsing is the measurement (which request is
//! which), kept small and tested on the kernel's own line format.

use hdrhistogram::Histogram;
use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Where tracefs is looked for, in order.
const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// Issues older than this without a completion are dropped (a request
/// requeued or merged away never completes under its issue's key).
const STALE_NS: u64 = 30_000_000_000;

/// Latency percentile keys of each second's map, upstream's rows.
pub const LAT_PCTS: [&str; 14] = [
    "00", "01", "05", "10", "25", "50", "75", "90", "95", "99", "99.9", "99.99", "99.999", "100",
];

/// A request's direction, from the tracepoint's `rwbs` flags.
fn direction(rwbs: &str) -> Option<usize> {
    // Discards, flushes and no-data requests are not read or write IO.
    if rwbs.contains('D') || rwbs.starts_with('F') && !rwbs.contains(['R', 'W']) {
        return None;
    }
    if rwbs.contains('W') {
        Some(1)
    } else if rwbs.contains('R') {
        Some(0)
    } else {
        None
    }
}

/// One parsed event: issue or completion, when (ns), direction, sector,
/// sectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    pub complete: bool,
    pub at_ns: u64,
    pub dir: usize,
    pub sector: u64,
    pub nr: u32,
}

/// Parses one `trace_pipe` line of `block_rq_issue` or `block_rq_complete`
/// (`... 1234.567890: block_rq_issue: 253,0 R 4096 () 2048 + 8 ... [fio]`).
/// `None` for other lines, other directions and no-data requests.
pub fn parse_line(line: &str) -> Option<Event> {
    let (head, complete, rest) = if let Some(i) = line.find(": block_rq_issue: ") {
        (&line[..i], false, &line[i + ": block_rq_issue: ".len()..])
    } else if let Some(i) = line.find(": block_rq_complete: ") {
        (&line[..i], true, &line[i + ": block_rq_complete: ".len()..])
    } else {
        return None;
    };
    let ts = head.split_whitespace().next_back()?;
    let (secs, frac) = ts.split_once('.').unwrap_or((ts, "0"));
    let secs: u64 = secs.parse().ok()?;
    let frac_ns: u64 = {
        let digits = &frac[..frac.len().min(9)];
        let v: u64 = digits.parse().ok()?;
        v * 10u64.pow(9 - digits.len() as u32)
    };
    let mut toks = rest.split_whitespace();
    let dir = direction(toks.nth(1)?)?;
    // `SECTOR + NR`: the token before the `+` and the one after it.
    let mut prev = "";
    let (sector, nr) = loop {
        let t = toks.next()?;
        if t == "+" {
            break (prev.parse::<u64>().ok()?, toks.next()?.parse::<u32>().ok()?);
        }
        prev = t;
    };
    if nr == 0 {
        return None;
    }
    Some(Event {
        complete,
        at_ns: secs * 1_000_000_000 + frac_ns,
        dir,
        sector,
        nr,
    })
}

/// Issues waiting for their completion, and this second's latencies.
pub struct Matcher {
    inflight: HashMap<(usize, u64, u32), u64>,
    hist: [Histogram<u64>; 2],
    sum_ns: [u128; 2],
    last_purge: u64,
    /// Completions matched with their issue, and those without one.
    pub matched: u64,
    pub unmatched: u64,
    /// The sparsest sampling the reader switched to.
    pub max_sample_shift: u32,
}

impl Default for Matcher {
    fn default() -> Self {
        Matcher::new()
    }
}

impl Matcher {
    pub fn new() -> Matcher {
        Matcher {
            inflight: HashMap::new(),
            hist: [new_hist(), new_hist()],
            sum_ns: [0, 0],
            last_purge: 0,
            matched: 0,
            unmatched: 0,
            max_sample_shift: 0,
        }
    }

    /// Takes one event: an issue waits; a completion with a waiting issue
    /// records the latency.
    pub fn add(&mut self, e: Event) {
        let key = (e.dir, e.sector, e.nr);
        if !e.complete {
            self.inflight.insert(key, e.at_ns);
            if e.at_ns > self.last_purge + STALE_NS {
                self.inflight
                    .retain(|_, t| e.at_ns.saturating_sub(*t) < STALE_NS);
                self.last_purge = e.at_ns;
            }
            return;
        }
        match self.inflight.remove(&key) {
            Some(t) => {
                let lat = e.at_ns.saturating_sub(t).max(1);
                self.hist[e.dir].saturating_record(lat);
                self.sum_ns[e.dir] += u128::from(lat);
                self.matched += 1;
            }
            None => self.unmatched += 1,
        }
    }

    /// This second's `[read, write]` maps (seconds, keyed by [`LAT_PCTS`]
    /// and `"mean"`; empty without IO), and a fresh second.
    pub fn take_second(&mut self) -> [BTreeMap<String, f64>; 2] {
        let mut out: [BTreeMap<String, f64>; 2] = Default::default();
        for (dir, map) in out.iter_mut().enumerate() {
            let h = &self.hist[dir];
            let n = h.len();
            if n > 0 {
                for k in LAT_PCTS {
                    let q = k.parse::<f64>().unwrap_or(0.0) / 100.0;
                    let v = match k {
                        "00" => h.min(),
                        "100" => h.max(),
                        _ => h.value_at_quantile(q),
                    };
                    map.insert(k.to_string(), v as f64 / 1e9);
                }
                map.insert("mean".to_string(), self.sum_ns[dir] as f64 / n as f64 / 1e9);
            }
            self.hist[dir].reset();
            self.sum_ns[dir] = 0;
        }
        out
    }
}

fn new_hist() -> Histogram<u64> {
    // 1 ns .. 1 h at 3 significant digits (valid bounds, so this cannot
    // fail); `saturating_record` clamps anything longer.
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds")
}

/// What a finished trace matched, and the CPU its reader used: the
/// tracer's own cost, stated beside the figures it produced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TraceStats {
    pub matched: u64,
    /// Completions whose issue was not seen (issued before the trace
    /// started, or requeued).
    pub unmatched: u64,
    pub cpu_user_secs: f64,
    pub cpu_sys_secs: f64,
    pub wall_secs: f64,
    /// The sparsest sampling used: 1 request in `2^shift`.
    pub max_sample_shift: u32,
}

impl std::fmt::Display for TraceStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} IOs traced ({} completions unmatched), the trace reader used {:.2} s of CPU \
             ({:.2} s user, {:.2} s system) in {:.0} s",
            self.matched,
            self.unmatched,
            self.cpu_user_secs + self.cpu_sys_secs,
            self.cpu_user_secs,
            self.cpu_sys_secs,
            self.wall_secs
        )?;
        if self.max_sample_shift > 0 {
            write!(
                f,
                "; above {} events/s, 1 request in {} was traced (by sector)",
                SAMPLE_ABOVE,
                1u64 << self.max_sample_shift
            )?;
        }
        Ok(())
    }
}

/// Events per second above which the trace samples requests more
/// sparsely: each step keeps 1 in 8 more (by three more bits of the
/// request's 4 KiB-aligned sector being zero), up to 1 in 512. Reading
/// ftrace's text costs CPU per event (the kernel formats it, the reader
/// parses it); upstream's BPF program aggregates in the kernel instead.
const SAMPLE_ABOVE: u64 = 5_000;
const MAX_SAMPLE_SHIFT: u32 = 9;

/// The events' filter: the device, and with `shift` > 0 only requests
/// whose sector has `shift` zero bits above the 4 KiB alignment (the same
/// test at issue and completion, so pairs stay whole).
fn filter(kdev: u64, shift: u32) -> String {
    if shift == 0 {
        format!("dev == {kdev}")
    } else {
        format!(
            "dev == {kdev} && !(sector & {})",
            ((1u64 << shift) - 1) << 3
        )
    }
}

/// A running per-IO latency trace of one device.
pub struct IoTrace {
    instance: PathBuf,
    stop: Arc<AtomicBool>,
    /// Returns the CPU time the reader used (s): user, system.
    reader: Option<std::thread::JoinHandle<(f64, f64)>>,
    started: std::time::Instant,
    state: Arc<Mutex<Matcher>>,
}

fn write(path: &Path, v: &str) -> Result<(), String> {
    std::fs::write(path, v).map_err(|e| format!("cannot write {v:?} to {}: {e}", path.display()))
}

/// tracefs as this process uses it: where, how many traces use it, and
/// whether this process mounted it (then the last trace unmounts it).
static TRACEFS_USE: Mutex<(usize, Option<PathBuf>)> = Mutex::new((0, None));

/// Instances of this process are numbered, so two traces never share one.
static NEXT_INSTANCE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// tracefs's mount point, mounting it when it is not mounted; counted, so
/// that [`release_tracefs`] unmounts what this process mounted once the
/// last trace is gone.
fn tracefs() -> Result<PathBuf, String> {
    let mut u = TRACEFS_USE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(p) = TRACEFS
        .iter()
        .map(PathBuf::from)
        .find(|p| p.join("instances").is_dir())
    {
        u.0 += 1;
        return Ok(p);
    }
    let p = PathBuf::from(TRACEFS[0]);
    nix::mount::mount(
        Some("tracefs"),
        &p,
        Some("tracefs"),
        nix::mount::MsFlags::empty(),
        None::<&str>,
    )
    .map_err(|e| {
        format!(
            "tracefs is not mounted and mounting it at {} failed: {e}",
            p.display()
        )
    })?;
    *u = (u.0 + 1, Some(p.clone()));
    Ok(p)
}

fn release_tracefs() {
    let mut u = TRACEFS_USE.lock().unwrap_or_else(|p| p.into_inner());
    u.0 = u.0.saturating_sub(1);
    if u.0 == 0
        && let Some(p) = u.1.take()
    {
        let _ = nix::mount::umount(&p);
    }
}

impl IoTrace {
    /// Starts tracing the device `major:minor`.
    pub fn start(dev: (u32, u32)) -> Result<IoTrace, crate::Error> {
        let root = tracefs().map_err(crate::Error::Host)?;
        let instance = root.join("instances").join(format!(
            "rackbench-iolat-{}-{}",
            std::process::id(),
            NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed)
        ));
        // A leftover of a killed run with the same name is reused.
        if !instance.is_dir()
            && let Err(e) = std::fs::create_dir(&instance)
        {
            release_tracefs();
            return Err(crate::Error::Host(format!(
                "cannot create {}: {e}",
                instance.display()
            )));
        }
        let mut t = IoTrace {
            instance,
            stop: Arc::new(AtomicBool::new(false)),
            reader: None,
            started: std::time::Instant::now(),
            state: Arc::new(Mutex::new(Matcher::new())),
        };
        let kdev = (u64::from(dev.0) << 20) | u64::from(dev.1);
        // A larger per-CPU buffer than the default loses fewer events in
        // a burst (a failure to set it keeps the default).
        let _ = std::fs::write(t.instance.join("buffer_size_kb"), "8192");
        let mut filters = Vec::new();
        for ev in ["block_rq_issue", "block_rq_complete"] {
            let d = t.instance.join("events/block").join(ev);
            if !d.is_dir() {
                return Err(crate::Error::Host(format!(
                    "the kernel has no block:{ev} tracepoint"
                )));
            }
            write(&d.join("filter"), &filter(kdev, 0)).map_err(crate::Error::Host)?;
            write(&d.join("enable"), "1").map_err(crate::Error::Host)?;
            filters.push(d.join("filter"));
        }
        let pipe = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(t.instance.join("trace_pipe"))
            .map_err(|e| crate::Error::Host(format!("cannot open trace_pipe: {e}")))?;
        let (stop, state) = (t.stop.clone(), t.state.clone());
        t.reader = Some(
            std::thread::Builder::new()
                .name("iolat-trace".into())
                .spawn(move || read_loop(pipe, &stop, &state, kdev, &filters))
                .map_err(|e| crate::Error::Host(format!("cannot start the trace reader: {e}")))?,
        );
        Ok(t)
    }

    /// Stops the trace: what it matched and what reading it cost.
    pub fn finish(mut self) -> TraceStats {
        let (user, sys) = self.stop_reader();
        let m = self.state.lock().unwrap_or_else(|p| p.into_inner());
        TraceStats {
            matched: m.matched,
            unmatched: m.unmatched,
            cpu_user_secs: user,
            cpu_sys_secs: sys,
            wall_secs: self.started.elapsed().as_secs_f64(),
            max_sample_shift: m.max_sample_shift,
        }
    }

    fn stop_reader(&mut self) -> (f64, f64) {
        self.stop.store(true, Ordering::Relaxed);
        self.reader
            .take()
            .and_then(|r| r.join().ok())
            .unwrap_or((0.0, 0.0))
    }

    /// This second's `[read, write]` latency maps (see
    /// [`Matcher::take_second`]).
    pub fn take_second(&self) -> [BTreeMap<String, f64>; 2] {
        match self.state.lock() {
            Ok(mut m) => m.take_second(),
            Err(p) => p.into_inner().take_second(),
        }
    }
}

/// Reads the pipe until stopped; returns the thread's CPU time (s), user
/// and system (the kernel formats each event's text for the reader).
fn read_loop(
    pipe: std::fs::File,
    stop: &AtomicBool,
    state: &Mutex<Matcher>,
    kdev: u64,
    filters: &[PathBuf],
) -> (f64, f64) {
    use nix::sys::resource::{UsageWho, getrusage};
    read_events(pipe, stop, state, kdev, filters);
    let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    getrusage(UsageWho::RUSAGE_THREAD)
        .map(|u| (secs(u.user_time()), secs(u.system_time())))
        .unwrap_or((0.0, 0.0))
}

fn read_events(
    mut pipe: std::fs::File,
    stop: &AtomicBool,
    state: &Mutex<Matcher>,
    kdev: u64,
    filters: &[PathBuf],
) {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut buf = vec![0u8; 1 << 16];
    let mut carry: Vec<u8> = Vec::new();
    let mut events = Vec::new();
    let (mut window, mut in_window, mut shift) = (std::time::Instant::now(), 0u64, 0u32);
    while !stop.load(Ordering::Relaxed) {
        // Too many events: sample more sparsely (see SAMPLE_ABOVE).
        // Judged every 200 ms, so that a burst costs little before the
        // sampling catches up with it.
        if window.elapsed() >= std::time::Duration::from_millis(200) {
            let rate = in_window as f64 / window.elapsed().as_secs_f64();
            if rate > SAMPLE_ABOVE as f64 && shift < MAX_SAMPLE_SHIFT {
                let next = (shift + 3).min(MAX_SAMPLE_SHIFT);
                if filters
                    .iter()
                    .all(|f| std::fs::write(f, filter(kdev, next)).is_ok())
                {
                    shift = next;
                    let mut m = state.lock().unwrap_or_else(|p| p.into_inner());
                    m.max_sample_shift = m.max_sample_shift.max(shift);
                }
            }
            (window, in_window) = (std::time::Instant::now(), 0);
        }
        let ready = {
            let mut fds = [PollFd::new(pipe.as_fd(), PollFlags::POLLIN)];
            poll(&mut fds, PollTimeout::from(100u16)).unwrap_or(0)
        };
        if ready == 0 {
            continue;
        }
        let n = match pipe.read(&mut buf) {
            Ok(0) => continue,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        carry.extend_from_slice(&buf[..n]);
        let Some(end) = carry.iter().rposition(|b| *b == b'\n') else {
            continue;
        };
        events.clear();
        for line in carry[..end].split(|b| *b == b'\n') {
            in_window += 1;
            if let Some(e) = std::str::from_utf8(line).ok().and_then(parse_line) {
                events.push(e);
            }
        }
        carry.drain(..=end);
        let mut m = state.lock().unwrap_or_else(|p| p.into_inner());
        for e in events.drain(..) {
            m.add(e);
        }
    }
}

impl Drop for IoTrace {
    fn drop(&mut self) {
        self.stop_reader();
        for ev in ["block_rq_issue", "block_rq_complete"] {
            let _ = std::fs::write(
                self.instance.join("events/block").join(ev).join("enable"),
                "0",
            );
        }
        let _ = std::fs::remove_dir(&self.instance);
        release_tracefs();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_both_tracepoints_parse() {
        let issue = "             fio-1234    [001] ..... 12345.678901: block_rq_issue: 253,0 R 4096 () 2048 + 8 none,0,0 [fio]";
        let done = "          <idle>-0       [000] d.h2. 12345.679151: block_rq_complete: 253,0 R () 2048 + 8 none,0,0 [0]";
        let i = parse_line(issue).unwrap();
        let c = parse_line(done).unwrap();
        assert_eq!(
            i,
            Event {
                complete: false,
                at_ns: 12_345_678_901_000,
                dir: 0,
                sector: 2048,
                nr: 8
            }
        );
        assert!(c.complete && c.at_ns - i.at_ns == 250_000);
        // Older kernels print no ioprio part; writes with sync flags.
        let old = "kworker/0:1-9 [000] .... 5.000001: block_rq_issue: 8,0 WS 8192 () 99 + 16 [kworker/0:1]";
        assert_eq!(parse_line(old).unwrap().dir, 1);
        // Flushes, discards and other events are not IO latency samples.
        for l in [
            "x-1 [000] .... 5.0: block_rq_issue: 8,0 FF 0 () 0 + 0 [x]",
            "x-1 [000] .... 5.0: block_rq_issue: 8,0 D 4096 () 8 + 8 [x]",
            "x-1 [000] .... 5.0: block_bio_queue: 8,0 R 8 + 8 [x]",
        ] {
            assert_eq!(parse_line(l), None, "{l}");
        }
    }

    /// The real tracepoints: O_DIRECT reads of a file on /var/tmp's disk
    /// show up as that second's read latencies, and the instance is gone
    /// after the trace is dropped.
    #[test]
    fn direct_reads_on_the_scratch_disk_are_traced() {
        use std::io::{Seek, SeekFrom, Write};
        use std::os::unix::fs::OpenOptionsExt;
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let si = crate::sys::sysinfo::collect(dir.path(), crate::sys::cgroup::BackendKind::None)
            .unwrap();
        if si.scr_dev.is_empty() || !nix::unistd::geteuid().is_root() {
            testenv::skip("tracefs", "/var/tmp is not on a block device, or not root");
            return;
        }
        let t = match IoTrace::start(si.scr_devnr) {
            Ok(t) => t,
            Err(e) => {
                testenv::skip("tracefs", &format!("cannot trace block requests: {e}"));
                return;
            }
        };
        let path = dir.path().join("f");
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(&vec![7u8; 4 << 20]).unwrap();
        f.sync_all().unwrap();
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path)
            .unwrap();
        // An aligned buffer for O_DIRECT: 4 KiB inside a larger Vec.
        let mut raw = vec![0u8; 64 << 10];
        let off = raw.as_ptr().align_offset(4096);
        let buf = &mut raw[off..off + (32 << 10)];
        let _ = t.take_second();
        let mut reads = 0;
        for round in 0..4 {
            for i in 0..128u64 {
                f.seek(SeekFrom::Start(((i * 7 + round) % 128) * (32 << 10)))
                    .unwrap();
                std::io::Read::read_exact(&mut f, buf).unwrap();
                reads += 1;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
        let [r, _] = t.take_second();
        assert!(
            !r.is_empty(),
            "{reads} direct reads, no read latency traced"
        );
        assert!(
            r["50"] > 0.0 && r["50"] <= r["99"] && r["99"] <= r["100"],
            "{r:?}"
        );
        assert!(r["mean"] > 0.0 && r["mean"] < 1.0, "{r:?}");
        let instance = t.instance.clone();
        let st = t.finish();
        assert!(
            st.matched >= 1 && st.cpu_user_secs + st.cpu_sys_secs > 0.0,
            "{st}"
        );
        assert!(!instance.exists(), "{} left behind", instance.display());
    }

    #[test]
    fn completions_matched_to_issues_give_percentiles() {
        let mut m = Matcher::new();
        let ev = |complete, at_us: u64, sector| Event {
            complete,
            at_ns: at_us * 1000,
            dir: 0,
            sector,
            nr: 8,
        };
        // 100 reads of 1..=100 µs, interleaved; one completion with no issue.
        for k in 1..=100u64 {
            m.add(ev(false, 1_000, k * 8));
        }
        for k in 1..=100u64 {
            m.add(ev(true, 1_000 + k, k * 8));
        }
        m.add(ev(true, 5_000, 999_999));
        let [r, w] = m.take_second();
        assert!(w.is_empty());
        let us = |k: &str| (r[k] * 1e6).round();
        assert_eq!(us("00"), 1.0);
        assert_eq!(us("50"), 50.0);
        assert_eq!(us("99"), 99.0);
        assert_eq!(us("100"), 100.0);
        assert!((r["mean"] * 1e6 - 50.5).abs() < 1e-6);
        // The next second starts empty.
        assert!(m.take_second()[0].is_empty());
    }
}
