#!/usr/bin/env bash
# Runs every fuzz target of crates/fuzz under AFL++ (cargo-afl, stable Rust)
# for a bounded time each, from the seeds in crates/fuzz/seeds/<target>/,
# and prints the table in docs/testing.md: executions, paths found, crashes and hangs.
# Crashing and hanging inputs are copied to target/fuzz-findings/<target>/;
# once fixed, move them to crates/fuzz/regressions/<target>/ (cargo test
# runs every target over that directory).
#
# Usage: bash bench/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]   (default 120, all)
# Needs: cargo install cargo-afl && cargo afl config --build
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-120}"
shift || true
if ! cargo afl --version >/dev/null 2>&1; then
  echo "cargo-afl is not installed: cargo install cargo-afl && cargo afl config --build" >&2
  exit 2
fi
# A target directory of its own: AFL++'s instrumentation flags would
# otherwise invalidate the normal build.
export CARGO_TARGET_DIR=target/afl
cargo afl build --release -q -p rackbench-fuzz --features afl
bin="$CARGO_TARGET_DIR/release/rackbench-fuzz"
if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <(ls crates/fuzz/seeds)
fi
# No core_pattern or CPU governor checks (a container cannot change
# either); AFL++ runs with the usual exemptions for that.
export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1
export AFL_NO_AFFINITY=1 AFL_QUIET=1
out=target/fuzz-runs
findings=target/fuzz-findings
mkdir -p "$out" "$findings"
echo "| target | seconds | executions | execs/s | paths | crashes | hangs |"
echo "|---|---|---|---|---|---|---|"
for t in "${targets[@]}"; do
  rm -rf "${out:?}/$t"
  # -m 2048: an input that makes a parser allocate more than 2 GiB is a
  # crash (unbounded allocation); -t 2000: one taking over 2 s is a hang.
  timeout $((secs + 60)) cargo afl fuzz -V "$secs" -m 2048 -t 2000 \
    -i "crates/fuzz/seeds/$t" -o "$out/$t" -- "$bin" "$t" >"$out/$t.log" 2>&1 || true
  stats="$out/$t/default/fuzzer_stats"
  if [ ! -f "$stats" ]; then
    echo "| $t | - | did not start (see $out/$t.log) | | | | |"
    continue
  fi
  get() { awk -F' *: *' -v k="$1" '$1 == k {print $2}' "$stats"; }
  crashes="$(get saved_crashes)"
  hangs="$(get saved_hangs)"
  if [ "${crashes:-0}" != 0 ] || [ "${hangs:-0}" != 0 ]; then
    mkdir -p "$findings/$t"
    cp "$out/$t/default/crashes/"id* "$out/$t/default/hangs/"id* "$findings/$t/" 2>/dev/null || true
  fi
  echo "| $t | $(get run_time) | $(get execs_done) | $(get execs_per_sec) | $(get corpus_count) | $crashes | $hangs |"
done
