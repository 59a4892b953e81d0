#!/usr/bin/env bash
# CacheBench DRAM throughput next to moka, same op stream and threads, and
# where the engine's memory goes per item. Prints the README table row.
# Usage: bash bench/cachebench_vs_moka.sh [ROUNDS]   (default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-5}"
cargo build --release -q -p cachebench --example vs_moka
out="$(target/release/examples/vs_moka --rounds "$rounds")"
echo "$out" >&2
ours="$(echo "$out" | awk '/^rackbench DRAM cache/ {print $4}')"
theirs="$(echo "$out" | awk '/^moka/ {print $2}')"
ratio="$(echo "$out" | awk '/^ratio/ {print $2}')"
echo "| CacheBench DRAM throughput vs moka | \`bash bench/cachebench_vs_moka.sh\` | rackbench ${ours} ops/s, moka ${theirs} ops/s, ratio ${ratio} |"
