//! The benchmark of benchpress' benchmarks files that `rackbench adsim`
//! runs, and how its jobs' args translate.

use harness::benchpress_yaml::{DefaultArg, Translate, Upstream};

/// `run_adsim.py`: its server always listens on every address with TLS
/// (the bundled certificate) and its client always speaks TLS, so a
/// `server` command gets `--bind :: --tls=1` and a `client` command
/// `--tls=1`, unless the args already give them. It is in benchpress' AI
/// suite (`-b ai`).
pub const BENCHPRESS: &[Upstream] = &[Upstream {
    name: "adsim",
    workload: "adsim",
    translate: Translate::Defaults(&[
        DefaultArg {
            commands: &["server"],
            flag: "--bind",
            arg: "--bind ::",
        },
        DefaultArg {
            commands: &["server", "client"],
            flag: "--tls",
            arg: "--tls=1",
        },
    ]),
    scope: &[],
    component: &[],
    suites: &["ai"],
}];
