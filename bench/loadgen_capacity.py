#!/usr/bin/env python3
"""Load generator capacity: the highest open-loop rate one client core
sustains against a no-op gRPC server on loopback, rackbench next to ghz in
the same run.

The server (`rackbench calibrate serve --workers 0`, replies at once) runs on
CPU 1, each client on CPU 0 with one thread. A rate is sustained when at
least 98% of the requests scheduled in the window complete and the p99
latency stays within 10 ms. rackbench finds its highest such rate with its
own SLO search (open loop, constant arrivals, latency from the intended
start); ghz (--async --rps R, its open-loop mode, --cpus 1) is bisected by
this script with the same criterion and the same 2% tolerance, starting from
its unthrottled throughput.

Usage: python3 bench/loadgen_capacity.py [--secs 5]
"""

import argparse
import base64
import json
import os
import subprocess

import common

PAYLOAD = 64
TARGET_MS = 10.0


def rackbench_max(env, cwd, secs):
    cmd = common.pinned(
        [common.BIN, "calibrate", "--server", "127.0.0.1:50051", "--workers", "0", "--service-time-ms", "0",
         "--client-threads", "1", "--connections", "2", "--target", f"99p:{TARGET_MS}", "--arrival", "constant",
         "--probe-secs", str(secs), "--final-secs", str(secs * 2), "--peak-secs", str(secs), "--warmup-secs", "2",
         "--payload-bytes", str(PAYLOAD)],
        0,
    )
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    r = json.loads(out.stdout)
    m = r["metrics"]
    if not r["success"]:
        raise SystemExit("rackbench search failed: " + out.stderr[-2000:])
    return m["final_requested_qps"], m["final_achieved_qps"], m["final_latency_msec"], m["peak_qps"]


def ghz_run(ghz, rps, secs, conc=200):
    data = json.dumps({"payload": base64.b64encode(b"\0" * PAYLOAD).decode(), "reply_bytes": PAYLOAD})
    cmd = [ghz, "--insecure", "--proto", os.path.join(common.ROOT, "crates/calibrate/proto/calibrate.proto"),
           "--import-paths", os.path.join(common.ROOT, "proto"),
           "--call", "rackbench.calibrate.Calibrate.Work", "-d", data, "-z", f"{secs}s", "--cpus", "1",
           "--connections", "2", "-c", str(conc), "-O", "json"]
    if rps > 0:
        cmd += ["--rps", str(int(rps)), "--async"]
    out = subprocess.run(common.pinned(cmd + ["127.0.0.1:50051"], 0), capture_output=True, text=True)
    r = json.loads(out.stdout)
    p99 = next((d["latency"] for d in r.get("latencyDistribution") or [] if d["percentage"] == 99), None)
    ok = r.get("statusCodeDistribution", {}).get("OK", 0)
    return r["rps"], ok, (p99 or 0) / 1e6


def ghz_max(ghz, secs):
    peak, _, _ = ghz_run(ghz, 0, secs)

    def passes(rate):
        achieved, ok, p99 = ghz_run(ghz, rate, secs)
        good = ok / secs >= 0.98 * rate and p99 <= TARGET_MS
        print(f"  ghz --rps {rate:.0f}: achieved {achieved:.0f}/s, ok {ok}, p99 {p99:.2f} ms -> {'pass' if good else 'fail'}")
        return good, p99

    lo, hi = None, peak
    good, _ = passes(peak)
    if good:
        lo, hi = peak, None
        while lo is not None and hi is None:
            up = lo * 1.5
            g, _ = passes(up)
            if g:
                lo = up
            else:
                hi = up
    else:
        cand = peak / 2
        while lo is None:
            g, _ = passes(cand)
            if g:
                lo = cand
            else:
                hi, cand = cand, cand / 2
    while hi > lo * 1.02:
        mid = (lo + hi) / 2
        g, _ = passes(mid)
        lo, hi = (mid, hi) if g else (lo, mid)
    return lo, peak


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--secs", type=int, default=5)
    a = ap.parse_args()
    common.build()
    ghz = common.find_ghz()
    cwd, env = common.scratch()
    server = common.start_server(env, cwd, ["--workers", "0", "--service-time-ms", "0"], cpu=1)
    try:
        rb_rate, rb_achieved, rb_p99, rb_peak = rackbench_max(env, cwd, a.secs)
        print(f"rackbench: max open-loop rate {rb_rate:.0f}/s (achieved {rb_achieved:.0f}/s, p99 {rb_p99:.2f} ms; closed-loop peak {rb_peak:.0f}/s)")
        g_rate, g_peak = ghz_max(ghz, a.secs)
        print(f"ghz:       max open-loop rate {g_rate:.0f}/s (unthrottled peak {g_peak:.0f}/s)")
    finally:
        common.stop(server)
    print(f"\n| load generator, 1 client core, no-op gRPC server | rackbench {rb_rate:.0f} req/s | ghz {g_rate:.0f} req/s open loop"
          f" ({g_peak:.0f} req/s unthrottled) | ratio {rb_rate / g_rate:.2f} ({rb_rate / g_peak:.2f} against ghz's unthrottled peak) |")


if __name__ == "__main__":
    main()
