//! Where hashd's messages go while it runs: stderr, the `--logfile`, and
//! the test files' progress lines.

use crate::fmt::format_size;
use std::io::IsTerminal;
use std::path::Path;
use std::time::{Duration, Instant};

/// Where hashd's messages go: stderr, and the `--logfile` when given.
pub(super) struct Out {
    file: Option<std::sync::Mutex<std::fs::File>>,
    verbose: u8,
}

impl Out {
    pub(super) fn open(path: Option<&Path>, verbose: u8) -> anyhow::Result<Out> {
        let file = match path {
            Some(p) => Some(std::sync::Mutex::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(|e| anyhow::anyhow!("--logfile {}: cannot open: {e}", p.display()))?,
            )),
            None => None,
        };
        Ok(Out { file, verbose })
    }

    /// A message: stderr and the log file.
    pub(super) fn say(&self, line: &str) {
        eprintln!("{line}");
        self.log(line);
    }

    /// A line for the log file only (stdout lines).
    pub(super) fn log(&self, line: &str) {
        if let Some(f) = &self.file {
            use std::io::Write;
            let mut f = f.lock().unwrap_or_else(|e| e.into_inner());
            let _ = writeln!(f, "[{}] {line}", crate::clock::Local::now().rfc3339());
        }
    }

    /// Test-file progress: a rewritten line on a terminal, a plain line a
    /// second otherwise; none with -vv.
    pub(super) fn progress<'a>(&'a self, what: &'a str) -> impl FnMut(u64, u64) + 'a {
        let tty = std::io::stderr().is_terminal();
        let mut last = Instant::now() - Duration::from_secs(2);
        move |done, total| {
            if self.verbose > 1 || (done < total && last.elapsed() < Duration::from_secs(1)) {
                return;
            }
            last = Instant::now();
            let pct = 100.0 * done as f64 / total.max(1) as f64;
            let line = format!(
                "{what}: {pct:6.2}% ({} / {})",
                format_size(done as f64),
                format_size(total as f64)
            );
            if tty {
                eprint!("\r{line}");
                if done >= total {
                    eprintln!();
                }
                self.log(&line);
            } else {
                self.say(&line);
            }
        }
    }
}
