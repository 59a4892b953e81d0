#!/usr/bin/env bash
# hashd's rps_max (p95 <= 75 ms, the latency controller alone limiting
# concurrency, accesses over the whole footprint) side by side with
# upstream rd-hashd 2.2.5's CPU saturation bench, same machine, same
# footprint (1 GiB, 256 MiB of test files: upstream's CPU phase uses half
# of --total-memory), default request parameters;
# runs alternate. Upstream is built from crates.io into a scratch folder
# outside the project (RDHASHD_PEER, default /var/tmp/rdhashd-peer).
# Usage: bash bench/resctl_hashd_vs_upstream.sh [ROUNDS]   (default 2)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-2}"
peer="${RDHASHD_PEER:-/var/tmp/rdhashd-peer}"
if [ ! -x "$peer/root/bin/rd-hashd" ]; then
  mkdir -p "$peer"
  CARGO_TARGET_DIR="$peer/target" cargo install rd-hashd --version 2.2.5 --root "$peer/root"
fi
cargo build --release -q -p rackbench
work="$(mktemp -d /var/tmp/hashd-bench.XXXXXX)"
trap 'rm -rf "$work"' EXIT
# rps_max of a params file (its // comment lines dropped).
rps_max() {
  python3 -c 'import json,sys; t="".join(l for l in open(sys.argv[1]) if not l.lstrip().startswith("//")); print(json.loads(t)["rps_max"])' "$1"
}
ours=() theirs=()
for r in $(seq "$rounds"); do
  rm -f "$work/up-params.json" "$work/params.json"
  "$peer/root/bin/rd-hashd" -t "$work/up-tf" -p "$work/up-params.json" \
    --total-memory 2147483648 --bench-cpu >"$work/up.log" 2>&1
  up="$(rps_max "$work/up-params.json")"
  target/release/rackbench --no-store --output-dir "$work/out" resctl hashd \
    -t "$work/tf" -s 1G -p "$work/params.json" -i 0 --bench-cpu >"$work/ours.log" 2>&1
  me="$(rps_max "$work/params.json")"
  echo "round $r: rackbench rps_max $me, rd-hashd 2.2.5 rps_max $up" >&2
  ours+=("$me") theirs+=("$up")
done
python3 - "${ours[*]}" "${theirs[*]}" <<'PY'
import statistics, sys
o = [float(x) for x in sys.argv[1].split()]
t = [float(x) for x in sys.argv[2].split()]
mo, mt = statistics.median(o), statistics.median(t)
print(f"| hashd rps_max at p95 <= 75 ms vs rd-hashd 2.2.5 | `bash bench/resctl_hashd_vs_upstream.sh` | rackbench {mo:.0f} (runs {o}), rd-hashd {mt:.0f} (runs {t}): ratio {mo/mt:.2f} |")
PY
