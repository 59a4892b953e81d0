#!/usr/bin/env python3
"""CacheBench at the size SSD qualification runs it: each of upstream's 14
`ssd_perf` files (CacheLib's test_configs/ssd_perf, from the conformance
data) at its real numKeys, numOps, threads, instances and distributions,
for a bounded time each. Only the cache sizes are cut to this host
(`--cache_size_mb`, `--nvm_cache_size_mb`, the NVM tier in a scratch
folder instead of /dev/md0), with rackbench's own flags.

For each file it prints the seconds from the command's start until every
instance had begun its first operation (the report's `first_op_secs`: config,
key generation, cache and NVM set-up), the process's resident memory at
that moment (the key and generator state: upstream's generators hold
per-key state there) and its peak over the run (the caches filling on top),
and the operations done in the time. The last line is the README row.

Usage: python3 bench/cachebench_ssd_perf_size.py [--bin PATH] [SECONDS] [DRAM_MB] [NVM_MB]
       (defaults: the release build, 20, 1024, 512; RACKBENCH_CONFORMANCE or
       ../shared/conformance)
"""

import glob
import json
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def conformance():
    d = os.environ.get("RACKBENCH_CONFORMANCE") or os.path.join(common.ROOT, "..", "shared", "conformance")
    d = os.path.join(d, "cachebench", "test_configs", "ssd_perf")
    if not os.path.isdir(d):
        sys.exit(f"no ssd_perf configs at {d}: set RACKBENCH_CONFORMANCE")
    return d


def files(root):
    out = sorted(glob.glob(os.path.join(root, "*", "config.json")))
    out += sorted(glob.glob(os.path.join(root, "*", "*inst*.json")))
    return out


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def run(binary, cfg, secs, dram, nvm, scratch, env):
    nvm_dir = os.path.join(scratch, "nvm")
    os.makedirs(nvm_dir, exist_ok=True)
    stats = os.path.join(scratch, "stats.log")
    cmd = [binary, "cachebench", "--json_test_config", cfg, "--progress", "0",
           "--timeout_seconds", str(secs), "--cache_size_mb", str(dram),
           "--nvm_cache_size_mb", str(nvm), "--nvm_cache_paths", nvm_dir,
           "--progress_stats_file", stats]
    t0 = time.time()
    p = subprocess.Popen(cmd, cwd=scratch, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    samples = []

    def sample():
        while p.poll() is None:
            r = rss_kb(p.pid)
            if r is not None:
                samples.append((time.time() - t0, r))
            time.sleep(0.1)

    th = threading.Thread(target=sample)
    th.start()
    out, err = p.communicate()
    th.join()
    peak = max((r for _, r in samples), default=0)
    try:
        rep = common.report(out)
    except (ValueError, IndexError):
        sys.exit(f"{cfg}: no report (exit {p.returncode})\n{err[-2000:]}")
    m = rep["metrics"]
    first = m.get("first_op_secs")
    at_first = None
    if first is not None:
        before = [r for t, r in samples if t <= first + 0.1]
        at_first = before[-1] if before else (samples[0][1] if samples else None)
    return first, at_first, peak, m.get("ops", 0)


def main():
    args = sys.argv[1:]
    binary = None
    if args[:1] == ["--bin"]:
        binary, args = os.path.abspath(args[1]), args[2:]
    secs = int(args[0]) if len(args) > 0 else 20
    dram = int(args[1]) if len(args) > 1 else 1024
    nvm = int(args[2]) if len(args) > 2 else 512
    binary = binary or common.build()
    root = conformance()
    rows = []
    for cfg in files(root):
        with open(cfg) as f:
            text = f.read()
        parsed = json.loads("\n".join(l for l in text.splitlines() if not l.strip().startswith("//")))
        insts = parsed if isinstance(parsed, list) else [parsed]
        keys = insts[0]["test_config"]["numKeys"]
        scratch, env = common.scratch()
        first, at_first, peak, ops = run(binary, cfg, secs, dram, nvm, scratch, env)
        name = os.path.relpath(cfg, root)
        rows.append((name, len(insts), keys, first, at_first, peak, ops))
        print(f"{name:45} {len(insts)} inst  numKeys {keys:>17,}  first op {first:6.2f} s  "
              f"RSS then {at_first / 1024:7.0f} MB  peak {peak / 1024:7.0f} MB  {ops:>10,} ops in {secs} s",
              flush=True)
        subprocess.run(["rm", "-rf", scratch])
    worst_first = max(r[3] for r in rows)
    worst_at_first = max(r[4] for r in rows) / 1024
    worst_peak = max(r[5] for r in rows) / 1024
    build = "release" if binary == common.BIN else os.path.basename(os.path.dirname(binary)) + " build"
    print(f"| CacheBench, upstream's 14 ssd_perf files at their numKeys (72 M to 14.5 T keys, 1 to 5 "
          f"instances), {secs} s each, DRAM {dram} MB and NVM {nvm} MB per instance, {build} "
          f"| `python3 bench/cachebench_ssd_perf_size.py` | every file's first operation within "
          f"{worst_first:.1f} s; resident memory then at most {worst_at_first:.0f} MB (all instances); "
          f"peak {worst_peak:.0f} MB with the caches filling |")


if __name__ == "__main__":
    main()
