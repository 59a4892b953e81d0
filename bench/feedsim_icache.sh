#!/usr/bin/env bash
# Instruction-cache misses of FeedSim's i-cache step, per request, measured
# with cachegrind's simulated I1/LL caches (this VM has no hardware counters;
# on a host with them, `perf stat -e L1-icache-load-misses` on the same
# example gives the hardware figure). Compares a request's random walk over
# the generated functions with the same number of calls to one function.
#
# Usage: bash bench/feedsim_icache.sh [CALLS]   (default 1,600,000 = one request's minimum)
set -euo pipefail
cd "$(dirname "$0")/.."
calls=${1:-1600000}
cargo build --release -q -p feedsim --example icache
bin=target/release/examples/icache
for mode in spread single; do
  out=$(valgrind --tool=cachegrind --cache-sim=yes --cachegrind-out-file=/dev/null "$bin" "$mode" "$calls" 2>&1)
  refs=$(echo "$out" | awk '/I *refs:/ {gsub(",","",$4); print $4}')
  i1=$(echo "$out" | awk '/I1 *misses:/ {gsub(",","",$4); print $4}')
  lli=$(echo "$out" | awk '/LLi *misses:/ {gsub(",","",$4); print $4}')
  echo "$mode: $calls calls, I refs $refs, I1 misses $i1 ($(awk -v a="$i1" -v b="$calls" 'BEGIN{printf "%.2f", a/b}') per call), LLi misses $lli"
done
echo "$($bin spread 1 | sed 's/.*footprint/footprint/')"
