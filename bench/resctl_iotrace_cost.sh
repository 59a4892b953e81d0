#!/usr/bin/env bash
# The cost of resctl protection's per-IO latency trace (block tracepoints
# read through ftrace): fio's 4 KiB O_DIRECT random reads alone and under
# the trace, alternating ROUNDS times, SECS each, on a file in DIR. Root.
# Usage: bash bench/resctl_iotrace_cost.sh [DIR] [SECS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/need_fio.sh
cargo build --release -q -p resctl --example iotrace_cost
target/release/examples/iotrace_cost "${1:-/var/tmp}" "${2:-10}" "${3:-3}"
