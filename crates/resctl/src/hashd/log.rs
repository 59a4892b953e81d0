//! The hash log: one line per completed request,
//! `[YYYY-MM-DD HH:MM:SS] <sha1> <latency>ms`, padded so the log grows at
//! `log_bps` at `rps_max` (the padding is random printable bytes ending the
//! line). Written by its own thread; `rd-hashd.log` is rotated at 1 GiB
//! into `rd-hashd.log-<secs>.<micros>`, keeping `log_size` bytes of
//! archives.

use crate::clock::Local;
use rand::{Rng, SeedableRng};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::time::{SystemTime, UNIX_EPOCH};

/// The log file's name.
pub const LOG_NAME: &str = "rd-hashd.log";

/// Where completed requests are logged.
pub struct HashLog {
    tx: Option<SyncSender<([u8; 20], f64)>>,
    padding: Arc<AtomicUsize>,
    thread: Option<std::thread::JoinHandle<Result<(), String>>>,
    /// Lines dropped because the writer fell behind.
    pub dropped: u64,
}

impl HashLog {
    /// Starts the writer on `dir` (created when missing).
    pub fn start(
        dir: &Path,
        unit: u64,
        keep_bytes: u64,
        padding: usize,
    ) -> Result<HashLog, crate::Error> {
        std::fs::create_dir_all(dir).map_err(|e| {
            crate::Error::Host(format!(
                "{}: cannot create the log directory: {e}",
                dir.display()
            ))
        })?;
        let w = Writer::open(dir, unit, keep_bytes).map_err(crate::Error::Host)?;
        let (tx, rx) = sync_channel(1 << 16);
        let pad = Arc::new(AtomicUsize::new(padding));
        let p = pad.clone();
        let thread = std::thread::Builder::new()
            .name("hashd-log".into())
            .spawn(move || w.run(rx, p))
            .map_err(|e| crate::Error::Host(format!("cannot start the log thread: {e}")))?;
        Ok(HashLog {
            tx: Some(tx),
            padding: pad,
            thread: Some(thread),
            dropped: 0,
        })
    }

    /// A handle that changes the padding of lines to come.
    pub fn padding_handle(&self) -> Arc<AtomicUsize> {
        self.padding.clone()
    }

    /// Queues a line (dropped, and counted, if the writer is 64k behind).
    pub fn log(&mut self, digest: [u8; 20], latency: f64) {
        if let Some(tx) = &self.tx
            && let Err(TrySendError::Full(_)) = tx.try_send((digest, latency))
        {
            self.dropped += 1;
        }
    }

    /// Flushes and stops the writer.
    pub fn finish(mut self) -> Result<(), crate::Error> {
        self.tx = None;
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r.map_err(crate::Error::Host),
            Some(Err(_)) => Err(crate::Error::Host("the log thread panicked".into())),
            None => Ok(()),
        }
    }
}

struct Writer {
    dir: PathBuf,
    file: std::io::BufWriter<std::fs::File>,
    size: u64,
    unit: u64,
    keep: usize,
}

impl Writer {
    fn open(dir: &Path, unit: u64, keep_bytes: u64) -> Result<Writer, String> {
        let path = dir.join(LOG_NAME);
        let f = std::fs::File::options()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| format!("{}: cannot open: {e}", path.display()))?;
        let size = f.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(Writer {
            dir: dir.to_path_buf(),
            file: std::io::BufWriter::with_capacity(1 << 16, f),
            size,
            unit,
            keep: keep_bytes.div_ceil(unit).max(1) as usize,
        })
    }

    fn run(
        mut self,
        rx: Receiver<([u8; 20], f64)>,
        padding: Arc<AtomicUsize>,
    ) -> Result<(), String> {
        let mut rng = rand::rngs::SmallRng::from_os_rng();
        let mut line = Vec::with_capacity(4096);
        loop {
            let (digest, lat) = match rx.recv_timeout(std::time::Duration::from_millis(200)) {
                Ok(x) => x,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    let _ = self.file.flush();
                    continue;
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            };
            line.clear();
            let now = Local::now();
            write!(line, "[{}] ", now.date_time()).expect("to memory");
            for b in digest {
                write!(line, "{b:02x}").expect("to memory");
            }
            write!(line, " {:.2}ms", lat * 1000.0).expect("to memory");
            let pad = padding.load(Ordering::Relaxed);
            if line.len() + 1 < pad {
                line.push(b' ');
                while line.len() + 1 < pad {
                    line.push(rng.random_range(b'!'..=b'~'));
                }
            }
            line.push(b'\n');
            if self.size >= self.unit {
                self.rotate()?;
            }
            self.file
                .write_all(&line)
                .map_err(|e| format!("{}: cannot write: {e}", self.dir.join(LOG_NAME).display()))?;
            self.size += line.len() as u64;
        }
        self.file
            .flush()
            .map_err(|e| format!("{}: cannot write: {e}", self.dir.join(LOG_NAME).display()))
    }

    fn rotate(&mut self) -> Result<(), String> {
        let _ = self.file.flush();
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let cur = self.dir.join(LOG_NAME);
        let archive = self.dir.join(format!(
            "{LOG_NAME}-{}.{:06}",
            now.as_secs(),
            now.subsec_micros()
        ));
        std::fs::rename(&cur, &archive)
            .map_err(|e| format!("{}: cannot rotate: {e}", cur.display()))?;
        let mut archives = archives(&self.dir);
        while archives.len() >= self.keep {
            let _ = std::fs::remove_file(archives.remove(0));
        }
        *self = Writer::open(&self.dir, self.unit, self.keep as u64 * self.unit)?;
        Ok(())
    }
}

/// Rotated logs, oldest first.
fn archives(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<(f64, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let stamp: f64 = name.strip_prefix(&format!("{LOG_NAME}-"))?.parse().ok()?;
            Some((stamp, e.path()))
        })
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v.into_iter().map(|(_, p)| p).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_padded_and_logs_rotate() {
        let d = tempfile::tempdir().unwrap();
        // 1000-byte files, 2000 bytes kept: at most one archive beside the
        // current file... kept = ceil(2000/1000) = 2, archives < 2.
        let mut log = HashLog::start(d.path(), 1000, 2000, 100).unwrap();
        for i in 0..50u8 {
            log.log([i; 20], 0.0123);
        }
        log.finish().unwrap();
        let cur = std::fs::read_to_string(d.path().join(LOG_NAME)).unwrap();
        let first = cur.lines().next().unwrap();
        assert_eq!(first.len(), 99, "{first:?}");
        assert!(first.starts_with('['));
        let parts: Vec<&str> = first.split(' ').collect();
        assert_eq!(parts[2].len(), 40, "sha1 hex");
        assert_eq!(parts[3], "12.30ms");
        assert!(cur.len() <= 1000);
        assert_eq!(archives(d.path()).len(), 1);
        // No padding when the line is already longer.
        let d2 = tempfile::tempdir().unwrap();
        let mut log = HashLog::start(d2.path(), 1 << 20, 1 << 20, 0).unwrap();
        log.log([0xab; 20], 1.5);
        log.finish().unwrap();
        let line = std::fs::read_to_string(d2.path().join(LOG_NAME)).unwrap();
        assert!(
            line.ends_with(&format!(" {} 1500.00ms\n", "ab".repeat(20))),
            "{line}"
        );
    }
}
