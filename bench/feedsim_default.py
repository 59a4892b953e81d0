#!/usr/bin/env python3
"""FeedSim on this machine: time to result, reproducibility and serving
efficiency of the default search.

1. CPU cost at low load: `rackbench feedsim -q 2 -d 60 -w 0` (no warm-up, so
   the leaf's CPU delta covers only those requests); usable_cpus / CPU
   seconds per request is the CPU-bound capacity.
2. N (default 3) consecutive runs of the `feedsim_default` job (the whole
   search: unthrottled warm-up until steady (30 to 120 s), peak, bracket,
   bisection, 60 s final),
   each timed; final_achieved_qps of each, spread around the median, and
   serving efficiency = median final_achieved_qps / CPU-bound capacity.
3. With --sweep: the long exhaustive alternative, fixed rates from 0.84x to
   1.12x the searches' median in 2% steps, 60 s each after a 30 s warm-up,
   all of them run; its knee is the last passing rate below the first
   failing one (rates above that still passing are listed: near the knee a
   60 s window passes or fails with the VM's hiccups), and each search's
   result is compared with it.

Usage: python3 bench/feedsim_default.py [--runs 3] [--sweep [--around QPS]]
(`--runs 0 --sweep --around QPS` runs only the sweep, around a median
measured earlier.)
"""

import argparse
import json
import os
import statistics
import subprocess
import time

import common


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--around", type=float, help="sweep around this QPS instead of the runs' median")
    a = ap.parse_args()
    if a.runs == 0 and not (a.sweep and a.around):
        ap.error("--runs 0 needs --sweep --around QPS")
    common.build()
    cwd, env = common.scratch()
    low = subprocess.run([common.BIN, "--no-store", "feedsim", "-q", "2", "-d", "60", "-w", "0"], cwd=cwd, env=env,
                         capture_output=True, text=True)
    lm = common.report(low.stdout)["metrics"]
    cpu_ms = lm["leaf_cpu_ms_per_request"]
    cpus = common.report(low.stdout)["machines"][0]["num_cpus_usable"]
    capacity = cpus / (cpu_ms / 1000.0)
    print(f"low load: leaf {cpu_ms:.1f} CPU-ms per request {lm.get('leaf_step_cpu_ms_per_request')}, driver "
          f"{lm['driver_cpu_ms_per_request']:.2f} -> CPU-bound capacity {capacity:.2f} QPS on {cpus} CPUs; p95 {lm['probes'][-1]['target_value_ms']:.0f} ms", flush=True)
    finals, times, ratios = [], [], []
    for i in range(a.runs):
        t = time.time()
        out = subprocess.run([common.BIN, "run", "feedsim_default"], cwd=cwd, env=env, capture_output=True, text=True)
        el = time.time() - t
        r = common.report(out.stdout)
        m = r["metrics"]
        if not r["success"]:
            print(f"run {i + 1}: FAILED after {el:.0f} s: {m.get('failure') or m.get('error')}")
            continue
        finals.append(m["final_achieved_qps"])
        times.append(el)
        ratios.append(m.get("driver_to_leaf_cpu_ratio", 0))
        ext = sum(p.get("extensions", 0) for p in m["probes"])
        warm = sum(p["duration_secs"] for p in m["probes"] if p["phase"] == "warmup")
        finals_run = sum(1 for p in m["probes"] if p["phase"] == "final")
        print(f"run {i + 1}: {el:.0f} s, final requested {m['final_requested_qps']:.2f} achieved {m['final_achieved_qps']:.2f} QPS "
              f"at p95 {m['final_latency_msec']:.0f} ms, {len(m['probes'])} probes ({ext} extended, warm-up {warm:.0f} s, {finals_run} finals), leaf {m.get('leaf_cpu_ms_per_request', 0):.0f} "
              f"CPU-ms/request, driver/leaf CPU {ratios[-1]:.3f}, host speed spread {m.get('host_speed', {}).get('drift_pct', float('nan')):.0f}%", flush=True)
    if finals:
        report(finals, times, ratios, capacity, cpu_ms)
    if a.sweep:
        sweep(a.around or statistics.median(finals), finals, cwd, env)


def report(finals, times, ratios, capacity, cpu_ms):
    med = statistics.median(finals)
    dev = max(abs(f - med) / med for f in finals) * 100
    eff = med / capacity
    print(f"\n| FeedSim default search, {len(finals)} runs | {min(times) / 60:.1f} to {max(times) / 60:.1f} min each | "
          f"final_achieved_qps {', '.join(f'{f:.2f}' for f in finals)} (median {med:.2f}, all within {dev:.1f}%) | "
          f"serving efficiency {eff:.2f} (capacity {capacity:.2f} QPS from {cpu_ms:.0f} CPU-ms/request) | driver/leaf CPU <= {max(ratios):.3f} |", flush=True)


def sweep(med, finals, cwd, env):
    rates = [round(med * (0.84 + 0.02 * k), 2) for k in range(15)]
    t = time.time()
    out = subprocess.run([common.BIN, "--no-store", "feedsim", "-q", ",".join(map(str, rates)), "-d", "60", "-w", "30"],
                         cwd=cwd, env=env, capture_output=True, text=True)
    el = time.time() - t
    probes = [p for p in common.report(out.stdout)["metrics"]["probes"] if p["phase"] == "fixed"]
    knee, first_fail = None, None
    for p in probes:
        print(f"  sweep {p['requested_qps']:.2f} QPS: achieved {p['achieved_qps']:.2f}, p95 {p['target_value_ms']:.0f} ms, "
              f"{'pass' if p['passed'] else 'FAIL'}")
        if first_fail is None:
            if p["passed"]:
                knee = p["achieved_qps"]
            else:
                first_fail = p["requested_qps"]
    above = [p["requested_qps"] for p in probes if first_fail is not None and p["passed"] and p["requested_qps"] > first_fail]
    if knee is None:
        print(f"sweep ({el / 60:.1f} min): even the lowest rate failed")
    elif all(p["passed"] for p in probes):
        print(f"sweep ({el / 60:.1f} min): every rate passed, the knee is above {knee:.2f} QPS")
    else:
        diffs = ", ".join(f"{(f - knee) / knee * 100:+.1f}%" for f in finals)
        print(f"sweep ({el / 60:.1f} min, {len(probes)} rates x 60 s): knee {knee:.2f} QPS (first failing rate {first_fail:.2f}"
              f"{', passes above it at ' + ', '.join(f'{r:.2f}' for r in above) if above else ''}); searches vs sweep: {diffs}")


if __name__ == "__main__":
    main()
