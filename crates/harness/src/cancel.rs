//! Ctrl-C and timeouts: one process-wide stop flag that workloads poll.
//!
//! The first Ctrl-C (or SIGTERM) sets the flag: workloads stop their load,
//! the harness runs the after-hooks and writes the report marked
//! unsuccessful. A second Ctrl-C exits at once with status 130.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Why the stop flag was raised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    Interrupted,
    TimedOut,
}

/// The process-wide stop flag.
#[derive(Clone)]
pub struct Cancel {
    flag: Arc<AtomicBool>,
    reason: Arc<Mutex<Option<StopReason>>>,
}

static GLOBAL: OnceLock<Cancel> = OnceLock::new();
static PRESSES: AtomicU8 = AtomicU8::new(0);
/// What the first Ctrl-C prints, when not the default (a command that runs
/// no load says what it stops instead).
static MESSAGE: OnceLock<&'static str> = OnceLock::new();

impl Cancel {
    /// A flag not tied to signals (tests, nested runs).
    pub fn new() -> Self {
        Cancel {
            flag: Arc::new(AtomicBool::new(false)),
            reason: Arc::new(Mutex::new(None)),
        }
    }

    /// The process-wide flag, with the Ctrl-C/SIGTERM handler installed on
    /// first use.
    pub fn global() -> Cancel {
        GLOBAL
            .get_or_init(|| {
                let c = Cancel::new();
                let handler = c.clone();
                let _ = ctrlc::set_handler(move || {
                    // Written without eprintln!, which panics on a closed
                    // stderr: the flag must be raised whatever stderr is.
                    use std::io::Write as _;
                    if PRESSES.fetch_add(1, Ordering::SeqCst) >= 1 {
                        let _ = writeln!(std::io::stderr(), "\nsecond interrupt: exiting now");
                        std::process::exit(130);
                    }
                    handler.stop(StopReason::Interrupted);
                    let _ = writeln!(
                        std::io::stderr(),
                        "\n{}",
                        MESSAGE.get().copied().unwrap_or(
                            "interrupted: stopping the load and saving partial results (Ctrl-C again to quit now)"
                        )
                    );
                });
                c
            })
            .clone()
    }

    /// Sets what the first Ctrl-C prints (the first call per process wins;
    /// read when the interrupt comes).
    pub fn set_interrupt_message(message: &'static str) {
        let _ = MESSAGE.set(message);
    }

    /// Raises the flag (the first reason wins).
    pub fn stop(&self, reason: StopReason) {
        let mut r = self.reason.lock().unwrap_or_else(|e| e.into_inner());
        r.get_or_insert(reason);
        self.flag.store(true, Ordering::SeqCst);
    }

    pub fn is_stopped(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }

    pub fn reason(&self) -> Option<StopReason> {
        *self.reason.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Lowers the flag (between jobs of one invocation after a timeout).
    pub fn reset(&self) {
        *self.reason.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.flag.store(false, Ordering::SeqCst);
    }

    /// The raw flag, for the load core.
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.flag.clone()
    }
}

impl Default for Cancel {
    fn default() -> Self {
        Self::new()
    }
}
