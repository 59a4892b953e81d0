//! The benchmarks of benchpress' benchmarks.yml that `rackbench feedsim`
//! runs, with their tags there, and how their jobs' args translate.

use harness::benchpress_yaml::{Translate, Upstream};

pub const BENCHPRESS: &[Upstream] = &[
    Upstream {
        name: "feedsim",
        workload: "feedsim",
        translate: Translate::Same,
        scope: &["app", "feed"],
        component: &["cpu", "memory"],
        suites: &[],
    },
    // `run-feedsim-multi.sh`: `-n N` is feedsim's `--num-instances N`, and
    // without it the script still autoscales (`--num-instances -1`).
    Upstream {
        name: "feedsim_autoscale",
        workload: "feedsim",
        translate: Translate::RenameFlag {
            from: "-n",
            to: "--num-instances",
            absent: "--num-instances -1",
        },
        scope: &["app", "feed"],
        component: &["cpu", "memory"],
        suites: &[],
    },
];
