#!/usr/bin/env bash
# NVM region write bandwidth next to fio's sequential writes on the same
# file, same write size (1 MiB) and O_DIRECT, alternating ROUNDS times;
# then the region engine's lookup latency under a mixed load.
# Usage: bash bench/cachebench_nvm_vs_fio.sh [DIR] [SECS] [ROUNDS]
#   DIR: where the 1 GiB test file goes (default /var/tmp; it is removed)
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-/var/tmp}"
secs="${2:-20}"
rounds="${3:-3}"
. bench/need_fio.sh
cargo build --release -q -p cachebench --example nvm_write
file="$dir/rackbench-nvm-vs-fio.img"
trap 'rm -f "$file"' EXIT
ours=()
theirs=()
for r in $(seq "$rounds"); do
    out="$(target/release/examples/nvm_write "$file" "$secs")"
    echo "$out" >&2
    ours+=("$(echo "$out" | awk '/^write_mb_per_s/ {print $2}')")
    mixed="$(echo "$out" | grep '^mixed_lookups')"
    f="$(fio --name=seqwrite --filename="$file" --rw=write --bs=1M --direct=1 \
        --ioengine=psync --numjobs=1 --size=1G --time_based --runtime="$secs" \
        --output-format=json 2>/dev/null)"
    bw="$(echo "$f" | python3 -c 'import json,sys; j=json.load(sys.stdin); print("%.1f" % (j["jobs"][0]["write"]["bw_bytes"]/1e6))')"
    echo "fio write_mb_per_s $bw" >&2
    theirs+=("$bw")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
o="$(median "${ours[@]}")"
t="$(median "${theirs[@]}")"
ratio="$(python3 -c "print('%.2f' % ($o / $t))")"
p99="$(echo "$mixed" | awk '{for (i=1;i<NF;i++) if ($i=="lookup_p99_us") print $(i+1)}')"
echo "| CacheBench NVM region writes vs fio (1 GiB file on $dir, 1 MiB O_DIRECT writes, median of $rounds x ${secs} s) | \`bash bench/cachebench_nvm_vs_fio.sh\` | rackbench ${o} MB/s, fio ${t} MB/s, ratio ${ratio}; lookup p99 under 70/30 lookups/inserts ${p99} us |"
