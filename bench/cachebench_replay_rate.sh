#!/usr/bin/env bash
# KV trace replay rate: CSV lines parsed per second and requests replayed
# per second against the DRAM engine with 2 threads (from memory, and
# streamed from the file as the command replays) (synthetic trace in
# CacheLib's kvcache CSV layout), ROUNDS runs; prints the README row.
# Usage: bash bench/cachebench_replay_rate.sh [ROUNDS] [LINES]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-5}"
lines="${2:-2000000}"
cargo build --release -q -p cachebench --example replay_rate
parse=()
replay=()
streamed=()
for _ in $(seq "$rounds"); do
    out="$(target/release/examples/replay_rate "$lines")"
    echo "$out" >&2
    parse+=("$(echo "$out" | awk '/^parsed_lines_per_sec/ {print $2}')")
    replay+=("$(echo "$out" | awk '/^replayed_ops_per_sec/ {print $2}')")
    streamed+=("$(echo "$out" | awk '/^streamed_ops_per_sec/ {print $2}')")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "| CacheBench KV trace replay ($lines CSV lines, 200k keys, 80/15/5 get/set/delete, 2 threads, median of $rounds) | \`bash bench/cachebench_replay_rate.sh\` | parsed $(median "${parse[@]}") lines/s; replayed in memory $(median "${replay[@]}") ops/s; streamed from the file and replayed (the command's path) $(median "${streamed[@]}") ops/s (upstream's CSV replay: about 1.6 M ops/s) |"
