//! resctl-bench: resource-control benchmarks around hashd, a
//! latency-sensitive workload simulator (rd-hashd's model), written here.
//!
//! - [`hashd`]: the workload: test files, the request (file pages, anonymous
//!   memory, SHA1), the concurrency control loop, reports and the log;
//! - [`fmt`]: upstream's number formats (`1.2M`, `885u`, `45.50`);
//! - [`spec`]: job specs (`KIND[:k[=v],...][:group2]...`);
//! - [`journal`]: the result file, a JSON array of jobs written atomically;
//! - [`jobfile`], [`argsfile`]: upstream's `-f` job files and `-a` args files.

// stdout and stderr lines that never panic. std's eprintln! panics when
// stderr is a closed pipe (`resctl-bench ... 2>&1 | head`), and a panic half-way
// through restoring the host's settings (the IO scheduler, wbt,
// swappiness, io.cost) would leave the rest changed. These shadow std's
// macros in every module of the crate (they are defined before the
// modules).
macro_rules! eprintln {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let _ = ::std::writeln!(::std::io::stderr(), $($arg)*);
    }};
}
macro_rules! eprint {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let _ = ::std::write!(::std::io::stderr(), $($arg)*);
    }};
}

macro_rules! println {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let _ = ::std::writeln!(::std::io::stdout(), $($arg)*);
    }};
}
macro_rules! print {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let _ = ::std::write!(::std::io::stdout(), $($arg)*);
    }};
}

pub mod argsfile;
pub mod bench;
pub mod charts;
pub mod clock;
mod command;
pub mod directions;
pub mod error;
pub mod fmt;
pub mod hashd;
pub mod hog;
pub mod jobfile;
pub mod jobinfo;
pub mod journal;
pub mod merge;
pub mod pack;
pub mod spec;
pub mod sys;

pub use command::{CHILD_CMD, Resctl, child_main};
pub use error::{Error, Result};

/// The version `--version` prints, in upstream's form: the package
/// version, the target triple, and `/debug` in a debug build
/// (`0.1.0 x86_64-unknown-linux-gnu`), as rd-util's `full_version` forms
/// it (its git part aside).
pub fn full_version() -> String {
    let env = if cfg!(target_env = "musl") {
        "-musl"
    } else if cfg!(target_env = "gnu") {
        "-gnu"
    } else {
        ""
    };
    format!(
        "{} {}-unknown-{}{env}{}",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::ARCH,
        std::env::consts::OS,
        if cfg!(debug_assertions) { "/debug" } else { "" }
    )
}
