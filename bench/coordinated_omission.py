#!/usr/bin/env python3
"""Coordinated omission: a server that stalls 1 s every 10 s under moderate
load. rackbench's p99 (open loop, measured from each request's intended
start) next to the true p99 computed from the stall schedule, and, for
contrast, ghz with the same rate and concurrency (a closed-loop rate limiter
that stops sending while its workers wait, and measures from the send).

Server: `rackbench calibrate serve --workers 8 --service-time-ms 1
--stall-every-secs 10 --stall-secs 1`. Load: 200 req/s constant for 60 s
(six stalls in any 60 s window).

Usage: python3 bench/coordinated_omission.py [--secs 60] [--rate 200]
"""

import argparse
import base64
import json
import os
import subprocess

import common

EVERY, STALL, SERVICE = 10.0, 1.0, 0.001


def true_p99(rate, secs):
    """Latencies of constant-rate arrivals under the schedule: a request that
    arrives in a stall waits for its end, then is served (one of 8 workers,
    1 ms). Any window of a whole number of periods has the same mix, so the
    phase does not matter."""
    n = int(rate * secs)
    lat = []
    for i in range(n):
        t = i / rate
        phase = t % EVERY
        wait = EVERY - phase if phase >= EVERY - STALL else 0.0
        lat.append(wait + SERVICE)
    lat.sort()
    return lat[int(0.99 * n)] * 1000.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--secs", type=int, default=60)
    ap.add_argument("--rate", type=int, default=200)
    a = ap.parse_args()
    common.build()
    ghz = common.find_ghz()
    cwd, env = common.scratch()
    stall = ["--workers", "8", "--service-time-ms", "1", "--stall-every-secs", str(EVERY), "--stall-secs", str(STALL)]
    server = common.start_server(env, cwd, stall, cpu=1)
    try:
        cmd = [common.BIN, "calibrate", "--server", "127.0.0.1:50051", "--workers", "8", "--service-time-ms", "1",
               "--fixed-qps", str(a.rate), "--probe-secs", str(a.secs), "--arrival", "constant", "--client-threads", "1"]
        out = subprocess.run(common.pinned(cmd, 0), cwd=cwd, env=env, capture_output=True, text=True)
        probe = json.loads(out.stdout)["metrics"]["probes"][0]
        rb = probe["latency"]["p99_ms"]
        data = json.dumps({"payload": base64.b64encode(b"\0" * 64).decode(), "reply_bytes": 64})
        g = subprocess.run(common.pinned([ghz, "--insecure", "--proto", os.path.join(common.ROOT, "crates/calibrate/proto/calibrate.proto"),
                            "--import-paths", os.path.join(common.ROOT, "proto"), "--call", "rackbench.calibrate.Calibrate.Work",
                            "-d", data, "-z", f"{a.secs}s", "--rps", str(a.rate), "-c", "8", "--cpus", "1", "-O", "json",
                            "127.0.0.1:50051"], 0), capture_output=True, text=True)
        gr = json.loads(g.stdout)
        gp99 = next(d["latency"] for d in gr["latencyDistribution"] if d["percentage"] == 99) / 1e6
    finally:
        common.stop(server)
    truth = true_p99(a.rate, a.secs)
    print(f"true p99 from the stall schedule: {truth:.1f} ms")
    print(f"rackbench p99: {rb:.1f} ms ({probe['total_queries']} requests, {probe['achieved_qps']:.1f}/s)")
    print(f"ghz p99:       {gp99:.1f} ms ({gr['count']} requests, {gr['rps']:.1f}/s)")
    print(f"\n| coordinated omission, 1 s stall every 10 s, {a.rate} req/s | true p99 {truth:.0f} ms | rackbench p99 {rb:.0f} ms ({rb / truth:.2f}x) | ghz p99 {gp99:.0f} ms ({gp99 / truth:.2f}x) |")


if __name__ == "__main__":
    main()
