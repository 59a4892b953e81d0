#!/usr/bin/env python3
"""FeedSim's two serving models on this machine, side by side.

`--serving-model blocking` (the default, upstream's LeafNodeRank): a serving
thread runs each request to its end, blocking on the fan-outs and sleeping
through the 200 ms IO wait, so at most -t requests are in flight.
`--serving-model async` (ours): the IO wait is a timer that holds no thread.

For each model, in the same run of this script:
1. the default search (`rackbench feedsim --serving-model M`, run.sh's
   defaults: -t nproc, p95 <= 500 ms), timed; its final_achieved_qps is the
   knee;
2. a fixed rate at that knee for 60 s with no warm-up (`-q KNEE -d 60 -w 0`),
   whose leaf CPU seconds / 60 s / usable CPUs is the CPU utilisation at the
   knee, and whose mean latency x rate is the mean number of requests in
   flight.

3. with `blocking:closed-compat` in --configs (the default includes it),
   the same for upstream's driver (`--driver closed-compat`: threads x 4
   connections at depth 1, latency from the send, QPS from sends), so a
   rackbench number and a DCPerf-style one are measured side by side.

Ends with one line: each configuration's knee, CPU and search time, and
the ratios async / blocking and closed-compat / open.

Usage: python3 bench/feedsim_models.py [--configs blocking:open,async:open,blocking:closed-compat]
       [--fixed-secs 60] [--extra "FLAGS"]
"""

import argparse
import subprocess
import time

import common


def run(args, cwd, env):
    t = time.time()
    out = subprocess.run([common.BIN, "--no-store", "feedsim"] + args, cwd=cwd, env=env,
                         capture_output=True, text=True)
    el = time.time() - t
    try:
        return common.report(out.stdout), el
    except (ValueError, IndexError):
        raise SystemExit(f"rackbench feedsim {' '.join(args)} gave no report (exit {out.returncode}):\n{out.stderr[-2000:]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", default="blocking:open,async:open,blocking:closed-compat")
    ap.add_argument("--fixed-secs", type=int, default=60)
    ap.add_argument("--extra", default="", help="more rackbench feedsim flags for every run, e.g. smaller datasets "
                    "(--scale 19 --graph-subset 500000) when this VM is in a slow period and no rate meets 500 ms")
    a = ap.parse_args()
    common.build()
    cwd, env = common.scratch()
    env = dict(env, RACKBENCH_REPORT="1")
    rows = {}
    for config in a.configs.split(","):
        model, driver = config.split(":")
        flags = ["--serving-model", model, "--driver", driver] + a.extra.split()
        r, el = run(flags, cwd, env)
        m = r["metrics"]
        if not r["success"] or "final_achieved_qps" not in m:
            print(f"{config}: search FAILED after {el:.0f} s: {m.get('failure') or m.get('error')}", flush=True)
            continue
        knee = m["final_achieved_qps"]
        print(f"{config}: search {el / 60:.1f} min, knee {knee:.2f} QPS at p95 {m['final_latency_msec']:.0f} ms "
              f"(leaf {m.get('leaf_cpu_ms_per_request', 0):.0f} CPU-ms/request)", flush=True)
        f, fel = run(flags + ["-q", f"{knee:.2f}", "-d", str(a.fixed_secs), "-w", "0"], cwd, env)
        fm = f["metrics"]
        cpus = f["machines"][0]["num_cpus_usable"]
        util = fm["leaf_cpu_seconds"] / a.fixed_secs / cpus
        fixed = [p for p in fm["probes"] if p["phase"] == "fixed"][-1]
        in_flight = fixed["achieved_qps"] * fixed["latency"]["avg_ms"] / 1000.0
        print(f"{config}: at {knee:.2f} QPS for {a.fixed_secs} s: leaf CPU {util * 100:.0f}% of {cpus} CPUs, "
              f"p95 {fixed['target_value_ms']:.0f} ms, mean {in_flight:.1f} requests in flight ({fel:.0f} s)", flush=True)
        rows[config] = (knee, util, el)
    line = "; ".join(f"{k} {q:.2f} QPS at {u * 100:.0f}% CPU (search {e / 60:.1f} min)" for k, (q, u, e) in rows.items())
    b, asy, cc = rows.get("blocking:open"), rows.get("async:open"), rows.get("blocking:closed-compat")
    if b and asy:
        line += f"; async/blocking QPS {asy[0] / b[0]:.2f}x"
    if b and cc:
        line += f"; closed-compat/open QPS {cc[0] / b[0]:.2f}x"
    print(f"feedsim serving models: {line}")


if __name__ == "__main__":
    main()
