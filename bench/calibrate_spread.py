#!/usr/bin/env python3
"""calibrate: measured / analytic max QPS over N runs of the default
`calibrate` job (M/D/c, 8 workers x 10 ms, p95 <= 20 ms, Poisson arrivals),
with the spread. Each run is the overhead probe, a full search and its 15 s
final run, with its own arrival seed (1..N), so the spread includes the
randomness of the arrival process, not just of the machine. Both ratios are
printed: against the pure M/D/c model, and against the model at the
measured service time plus the measured overhead (rackbench's own figure),
with each run's wall time.

Usage: python3 bench/calibrate_spread.py [--runs 5] [--job calibrate]
"""

import argparse
import statistics
import subprocess
import time

import common


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--job", default="calibrate")
    a = ap.parse_args()
    common.build()
    cwd, env = common.scratch()
    errs, walls = [], []
    for seed in range(1, a.runs + 1):
        t0 = time.monotonic()
        out = subprocess.run([common.BIN, "run", a.job, "-i", f'{{"seed": {seed}}}'], cwd=cwd, env=env,
                             capture_output=True, text=True)
        walls.append(time.monotonic() - t0)
        errs.append(out.stderr[-1000:])
    reps = sorted(common.reports(cwd), key=lambda r: r["timestamp"])
    if len(reps) != a.runs:
        tail = "".join(errs)
        raise SystemExit(f"expected {a.runs} reports, got {len(reps)}:\n{tail}")
    ratios, adjusted, rates = [], [], []
    for r, wall in zip(reps, walls):
        m = r["metrics"]
        if "final_requested_qps" not in m:
            print(f"run: no rate confirmed ({m.get('search_failure')}), {wall:.0f} s")
            continue
        ratios.append(m["measured_to_analytic_ratio"])
        rates.append(m["final_requested_qps"])
        secs = sum(p["duration_secs"] for p in m["probes"])
        line = (f"run: measured {m['final_requested_qps']:.1f} QPS ({m['target_percentile']} {m['final_latency_msec']:.2f} ms), "
                f"analytic {m['analytic_max_qps']:.1f}, ratio {m['measured_to_analytic_ratio']:.3f}")
        if "measured_to_model_with_overhead_ratio" in m:
            adjusted.append(m["measured_to_model_with_overhead_ratio"])
            o = m["overhead_ms"]
            line += (f"; with overhead (median {o['median']:.3f} ms, p99 {o['p99']:.3f} ms) "
                     f"{m['analytic_max_qps_with_overhead']:.1f}, ratio {m['measured_to_model_with_overhead_ratio']:.3f}")
        print(line + f"; {len(m['probes'])} probes, {secs:.0f} s measured, {wall:.0f} s wall")
    if not ratios:
        raise SystemExit("no run confirmed a rate")

    def stats(xs):
        sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
        return f"mean {statistics.mean(xs):.3f}, min {min(xs):.3f}, max {max(xs):.3f}, stdev {sd:.3f}"

    med = statistics.median(rates)
    spread = max(abs(r - med) / med for r in rates) * 100
    m0 = reps[0]["metrics"]
    print(f"\n| calibrate, {a.runs} runs ({len(ratios)} confirmed a rate), {statistics.mean(walls):.0f} s each "
          f"| analytic {m0['analytic_max_qps']:.1f} QPS | measured/analytic {stats(ratios)} "
          + (f"| measured/model with overhead {stats(adjusted)} " if adjusted else "")
          + f"| every run within {spread:.1f}% of the median |")


if __name__ == "__main__":
    main()
