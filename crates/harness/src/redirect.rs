//! A job's text on stderr: while a job of `run` runs, the process's
//! standard output is the standard error, so that what the workload and
//! its hooks print (the upstream tool's text, which a direct command
//! prints on stdout) and what the processes they start print never mix
//! with the report JSON or the summary on stdout. `rackbench run ... | jq`
//! reads JSON only.
//!
//! The file descriptor is switched, not Rust's `stdout()` handle, so that
//! every writer is moved: `print!` anywhere in the workloads, and child
//! processes started meanwhile (they inherit fd 1).

use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};

/// While alive, fd 1 is a duplicate of fd 2; dropping it puts the saved
/// stdout back.
pub struct StdoutToStderr {
    saved: Option<OwnedFd>,
}

impl StdoutToStderr {
    /// Switches fd 1 to stderr. When the switch fails (fd 1 or 2 closed),
    /// nothing changes and the job's text stays on stdout.
    pub fn new() -> StdoutToStderr {
        let _ = std::io::stdout().flush();
        let saved = nix::unistd::dup(std::io::stdout().as_fd()).ok();
        let saved = saved.filter(|_| nix::unistd::dup2_stdout(std::io::stderr().as_fd()).is_ok());
        StdoutToStderr { saved }
    }
}

impl Default for StdoutToStderr {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for StdoutToStderr {
    fn drop(&mut self) {
        let _ = std::io::stdout().flush();
        if let Some(fd) = self.saved.take() {
            let _ = nix::unistd::dup2_stdout(fd.as_fd());
        }
    }
}
