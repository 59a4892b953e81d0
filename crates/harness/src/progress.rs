//! Progress for long work: a bar with phase and ETA on a terminal, plain
//! lines otherwise (logs, CI).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A time-based progress display: the plan is a total duration, the position
/// is elapsed time, and the message names the current phase.
#[derive(Clone)]
pub struct Progress {
    inner: Arc<Mutex<Inner>>,
}

struct Inner {
    bar: Option<ProgressBar>,
    label: String,
    start: Instant,
    total: Duration,
    quiet: bool,
}

impl Progress {
    /// A progress display for `label`, planned to take about `total`.
    pub fn new(label: &str, total: Duration) -> Self {
        let tty = std::io::stderr().is_terminal()
            && std::env::var_os("RACKBENCH_PLAIN_PROGRESS").is_none();
        let bar = tty.then(|| {
            let b = ProgressBar::with_draw_target(
                Some(total.as_secs().max(1)),
                ProgressDrawTarget::stderr(),
            );
            b.set_style(
                ProgressStyle::with_template(
                    "{prefix} [{elapsed_precise}] {wide_bar} {percent:>3}% ETA {eta} {msg}",
                )
                .expect("valid template"),
            );
            b.set_prefix(label.to_string());
            b.enable_steady_tick(Duration::from_millis(250));
            b
        });
        let p = Progress {
            inner: Arc::new(Mutex::new(Inner {
                bar,
                label: label.into(),
                start: Instant::now(),
                total,
                quiet: false,
            })),
        };
        let ticker = Arc::downgrade(&p.inner);
        std::thread::spawn(move || {
            while let Some(inner) = ticker.upgrade() {
                {
                    let i = inner.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some(b) = &i.bar {
                        if b.is_finished() {
                            return;
                        }
                        let el = i.start.elapsed().as_secs();
                        b.set_position(el.min(i.total.as_secs().saturating_sub(1)));
                    }
                }
                drop(inner);
                std::thread::sleep(Duration::from_millis(500));
            }
        });
        p
    }

    /// A display that prints nothing (nested or machine-readable runs).
    pub fn hidden() -> Self {
        let p = Progress::new("", Duration::from_secs(1));
        {
            let mut i = p.inner.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(b) = i.bar.take() {
                b.finish_and_clear();
            }
            i.quiet = true;
        }
        p
    }

    /// Changes the plan (e.g. a search that needs more probes).
    pub fn set_total(&self, total: Duration) {
        let mut i = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        i.total = total;
        if let Some(b) = &i.bar {
            b.set_length(total.as_secs().max(1));
        }
    }

    /// [`Self::phase`] for a phase that runs `remaining` at least: when the
    /// plan would end before it does (a search that needed more probes
    /// than planned), the plan grows to its end, so the ETA is never 0
    /// while work is left.
    pub fn phase_for(&self, msg: &str, remaining: Duration) {
        let grown = {
            let i = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            let end = i.start.elapsed() + remaining;
            (end > i.total).then_some(end)
        };
        if let Some(total) = grown {
            self.set_total(total);
        }
        self.phase(msg);
    }

    /// Names the current phase; without a terminal, prints a line with the
    /// percentage and ETA.
    pub fn phase(&self, msg: &str) {
        let i = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if i.quiet {
            return;
        }
        match &i.bar {
            Some(b) => b.set_message(msg.to_string()),
            None => {
                let el = i.start.elapsed();
                let pct = (el.as_secs_f64() / i.total.as_secs_f64().max(1e-9) * 100.0).min(99.0);
                let eta = i.total.saturating_sub(el).as_secs();
                eprintln!(
                    "[{}] {:>3.0}% elapsed {}s ETA {}s: {msg}",
                    i.label,
                    pct,
                    el.as_secs(),
                    eta
                );
            }
        }
    }

    /// Prints a line above the bar (or plainly).
    pub fn println(&self, line: &str) {
        let i = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if i.quiet {
            return;
        }
        match &i.bar {
            Some(b) => b.println(line),
            None => eprintln!("{line}"),
        }
    }

    /// Prints a line of the tool's own output (what the upstream tool
    /// prints on stdout) on stdout, with the bar (on stderr) cleared while
    /// it prints.
    pub fn output(&self, line: &str) {
        use std::io::Write;
        let i = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if i.quiet {
            return;
        }
        let print = || {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}").and_then(|_| out.flush());
        };
        match &i.bar {
            Some(b) => b.suspend(print),
            None => print(),
        }
    }

    /// Ends the display.
    pub fn finish(&self) {
        let i = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = &i.bar {
            b.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn total(p: &Progress) -> Duration {
        p.inner.lock().unwrap_or_else(|e| e.into_inner()).total
    }

    /// A phase longer than what is left of the plan grows it to the
    /// phase's end (the ETA stays above 0 while it runs); a shorter one
    /// leaves the plan alone.
    #[test]
    fn a_phase_past_the_plan_grows_it() {
        let p = Progress::hidden();
        p.set_total(Duration::from_secs(60));
        p.phase_for("short", Duration::from_secs(3));
        assert_eq!(total(&p), Duration::from_secs(60));
        p.phase_for("long", Duration::from_secs(120));
        let t = total(&p);
        assert!(
            t >= Duration::from_secs(120) && t < Duration::from_secs(125),
            "{t:?}"
        );
    }
}
