#!/usr/bin/env python3
"""calibrate: measured / analytic max QPS over N runs of the default
`calibrate` job (M/D/c, 8 workers x 10 ms, p99 <= 20 ms, Poisson arrivals),
with the spread. Each run is a full search plus its 15 s final run, with its
own arrival seed (1..N), so the spread includes the randomness of the
arrival process, not just of the machine.

Usage: python3 bench/calibrate_spread.py [--runs 5] [--job calibrate]
"""

import argparse
import statistics
import subprocess

import common


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--job", default="calibrate")
    a = ap.parse_args()
    common.build()
    cwd, env = common.scratch()
    errs = []
    for seed in range(1, a.runs + 1):
        out = subprocess.run([common.BIN, "run", a.job, "-i", f'{{"seed": {seed}}}'], cwd=cwd, env=env,
                             capture_output=True, text=True)
        errs.append(out.stderr[-1000:])
    reps = sorted(common.reports(cwd), key=lambda r: r["timestamp"])
    if len(reps) != a.runs:
        tail = "".join(errs)
        raise SystemExit(f"expected {a.runs} reports, got {len(reps)}:\n{tail}")
    ratios, rates = [], []
    for r in reps:
        m = r["metrics"]
        ratios.append(m["measured_to_analytic_ratio"])
        rates.append(m["final_requested_qps"])
        secs = sum(p["duration_secs"] for p in m["probes"])
        print(f"run: measured {m['final_requested_qps']:.1f} QPS (p99 {m['final_latency_msec']:.2f} ms), analytic {m['analytic_max_qps']:.1f}, "
              f"ratio {m['measured_to_analytic_ratio']:.3f}, {len(m['probes'])} probes, {secs:.0f} s measured")
    mean = statistics.mean(ratios)
    sd = statistics.stdev(ratios) if len(ratios) > 1 else 0.0
    med = statistics.median(rates)
    spread = max(abs(r - med) / med for r in rates) * 100
    print(f"\n| calibrate, {a.runs} runs | analytic {reps[0]['metrics']['analytic_max_qps']:.1f} QPS | measured/analytic mean {mean:.3f}, "
          f"min {min(ratios):.3f}, max {max(ratios):.3f}, stdev {sd:.3f} | every run within {spread:.1f}% of the median |")


if __name__ == "__main__":
    main()
