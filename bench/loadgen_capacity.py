#!/usr/bin/env python3
"""Load generator capacity: the highest open-loop rate and the closed-loop
peak one client core reaches against a no-op gRPC server on loopback,
rackbench next to h2load (and optionally ghz) in the same run.

The server (`rackbench calibrate serve --workers 0`, replies at once) runs on
CPU 1, each client on CPU 0 with one thread and two connections. A rate is
sustained when at least 98% of the requests scheduled in the window complete
and the p99 latency stays within 10 ms; rackbench finds its highest such
rate with its own SLO search (open loop, constant arrivals, latency from the
intended start) and reports its closed-loop peak (64 requests in flight) from
the same search. Both of rackbench's gRPC clients run: `--client h2` (the
lean client on the h2 crate, the default) and `--client tonic` (tonic's
generated client, what rackbench used before issue 26).

h2load (Debian's nghttp2-client: `apt-get install nghttp2-client`) sends a
pre-encoded gRPC WorkRequest, written by this script, with
`content-type: application/grpc` and `te: trailers`, closed loop with the
same 64 requests in flight (`-c 2 -m 32 -t 1`). h2load counts HTTP 2xx
replies; it does not read grpc-status (the no-op server never fails one).

This machine's speed drifts by more than the goals' margins within minutes
(h2load alone moved 29.8k-53.9k/s in one morning), so the runs are
interleaved in rounds (`--rounds`, default 3): each round runs h2load, then
rackbench, then h2load again, and its ratios are rackbench's figures over
the mean of that round's two h2load runs. The summary gives the median of
the rounds' figures and ratios (each round's own line is printed too).
The search judges each probe on its point estimate at tolerance 0.02
(`--confidence 0 --tolerance 0.02`), as when the goal was set, not with
calibrate's newer defaults.

ghz (`go install github.com/bojand/ghz/cmd/ghz@v0.120.0`) is bisected with
the same criterion when --ghz is given (several minutes more).

h2load's own pacing (`--rps`) is bisected too, each round: the highest
rate it keeps up with (>= 98% achieved), another open-loop peer. h2load
sends the requests due at each timer tick together, so its paced load is
burstier than rackbench's constant arrivals (one request every 20-30 µs,
each read and answered by the one-threaded server on its own); the
second-last line gives rackbench's open-loop rate against it.

The last line is the summary:
`loadgen: rackbench open-loop R1/s, closed-loop R2/s, h2load closed-loop R3/s, ratio open/h2load X, closed/h2load Y`

Usage: python3 bench/loadgen_capacity.py [--secs 5] [--rounds 3] [--tonic] [--ghz]
"""

import argparse
import base64
import json
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys

import common

PAYLOAD = 64
TARGET_MS = 10.0


CONNECTIONS = 2
IN_FLIGHT = 64  # the search's closed-loop peak concurrency


def rackbench_max(env, cwd, secs, client):
    cmd = common.pinned(
        [common.BIN, "calibrate", "--server", "127.0.0.1:50051", "--workers", "0", "--service-time-ms", "0",
         "--client-threads", "1", "--connections", str(CONNECTIONS), "--target", f"99p:{TARGET_MS}", "--arrival", "constant",
         "--probe-secs", str(secs), "--final-secs", str(secs * 2), "--peak-secs", str(secs), "--warmup-secs", "2",
         "--payload-bytes", str(PAYLOAD), "--client", client, "--confidence", "0", "--tolerance", "0.02"],
        0,
    )
    # A direct command prints its report JSON only when asked.
    out = subprocess.run(cmd, cwd=cwd, env=dict(env, RACKBENCH_REPORT="1"), capture_output=True, text=True)
    try:
        r = common.report(out.stdout)
    except (ValueError, IndexError):
        raise SystemExit("rackbench printed no report:\n" + out.stdout[-1000:] + out.stderr[-2000:])
    m = r["metrics"]
    if not r["success"]:
        # No rate passed (this happens when the server, not the client, is
        # the limit and the machine is slow): the peak still counts.
        print(f"  rackbench --client {client}: the search found no passing rate: {m.get('search_failure')}", flush=True)
        return 0.0, 0.0, 0.0, m["peak_qps"]
    return m["final_requested_qps"], m["final_achieved_qps"], m["final_latency_msec"], m["peak_qps"]


def work_request_file(cwd):
    """A gRPC-framed WorkRequest{payload: PAYLOAD zero bytes, reply_bytes:
    PAYLOAD}, protobuf-encoded by hand (fields 1 and 2)."""
    msg = bytes([0x0A, PAYLOAD]) + b"\0" * PAYLOAD + bytes([0x10, PAYLOAD])
    path = os.path.join(cwd, "work_request.bin")
    with open(path, "wb") as f:
        f.write(b"\0" + struct.pack(">I", len(msg)) + msg)
    return path


def h2load_run(h2load, body, secs, rps=None):
    """h2load's rate in req/s: closed loop, or paced at `rps` requests per
    second in all (h2load's --rps, per connection)."""
    pace = ["--rps", str(max(1, round(rps / CONNECTIONS)))] if rps else []
    cmd = common.pinned(
        [h2load, "-c", str(CONNECTIONS), "-m", str(IN_FLIGHT // CONNECTIONS), "-t", "1", "-D", str(secs)] + pace +
        ["-d", body, "-H", "content-type: application/grpc", "-H", "te: trailers",
         "http://127.0.0.1:50051/rackbench.calibrate.Calibrate/Work"],
        0,
    )
    out = subprocess.run(cmd, capture_output=True, text=True).stdout
    rate = re.search(r"finished in [\d.]+s, ([\d.]+) req/s", out)
    codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out)
    done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed", out)
    if not (rate and codes and done) or int(done.group(3)) > 0 or int(codes.group(4)) + int(codes.group(3)) > 0:
        raise SystemExit("h2load did not run cleanly:\n" + out[-2000:])
    return float(rate.group(1))


def h2load_paced_max(h2load, body, secs, closed):
    """The highest rate h2load's own pacing (--rps) keeps up with: achieved
    >= 98% of the requested rate, bisected to 2% between half and all of
    its closed-loop rate. h2load reports no percentiles and, when it falls
    behind, sends late without counting it, so this is only its throughput
    under its paced arrivals (the requests due at each timer tick sent
    together)."""
    lo, hi = closed * 0.5, closed
    if h2load_run(h2load, body, secs, hi) >= 0.98 * hi:
        return hi
    while hi > lo * 1.02:
        mid = (lo + hi) / 2
        got = h2load_run(h2load, body, secs, mid)
        lo, hi = (mid, hi) if got >= 0.98 * mid else (lo, mid)
    return lo


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
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the summary is their median")
    ap.add_argument("--tonic", action="store_true", help="also run tonic's client (before issue 26) in each round")
    ap.add_argument("--ghz", action="store_true", help="also bisect ghz's open-loop rate")
    a = ap.parse_args()
    h2load = shutil.which("h2load")
    if not h2load:
        sys.exit("h2load not found: install Debian's nghttp2-client (apt-get install nghttp2-client)")
    common.build()
    ghz = common.find_ghz() if a.ghz else None
    cwd, env = common.scratch()
    body = work_request_file(cwd)
    server = common.start_server(env, cwd, ["--workers", "0", "--service-time-ms", "0"], cpu=1)
    clients = ["h2", "tonic"] if a.tonic else ["h2"]
    rounds = []  # per round: {client: (open, peak)}, h2load mean
    try:
        for n in range(1, a.rounds + 1):
            before = h2load_run(h2load, body, a.secs)
            print(f"round {n}: h2load closed-loop {before:.0f}/s ({IN_FLIGHT} in flight, before)", flush=True)
            rb = {}
            for client in clients:
                rate, achieved, p99, peak = rackbench_max(env, cwd, a.secs, client)
                rb[client] = (rate, peak)
                print(f"round {n}: rackbench --client {client}: max open-loop rate {rate:.0f}/s (achieved {achieved:.0f}/s,"
                      f" p99 {p99:.2f} ms); closed-loop peak {peak:.0f}/s", flush=True)
            after = h2load_run(h2load, body, a.secs)
            ref = (before + after) / 2
            print(f"round {n}: h2load closed-loop {after:.0f}/s (after); reference {ref:.0f}/s;"
                  f" ratio open/h2load {rb['h2'][0] / ref:.2f}, closed/h2load {rb['h2'][1] / ref:.2f}", flush=True)
            paced = h2load_paced_max(h2load, body, a.secs, ref)
            print(f"round {n}: h2load paced (--rps) keeps up to {paced:.0f}/s; ratio open/h2load-paced"
                  f" {rb['h2'][0] / paced:.2f}", flush=True)
            rounds.append((rb, ref, paced))
        if ghz:
            g_rate, g_peak = ghz_max(ghz, a.secs)
            print(f"ghz:               max open-loop rate {g_rate:.0f}/s (unthrottled peak {g_peak:.0f}/s)")
    finally:
        common.stop(server)

    def med(f):
        return statistics.median(f(rb, ref) for rb, ref, _ in rounds)

    paced = statistics.median(p for _, _, p in rounds)
    paced_ratio = statistics.median(rb["h2"][0] / p for rb, _, p in rounds)

    h2 = med(lambda rb, ref: ref)
    if a.tonic:
        print(f"tonic client (before issue 26), median of {len(rounds)} rounds: open-loop {med(lambda rb, ref: rb['tonic'][0]):.0f}/s,"
              f" closed-loop {med(lambda rb, ref: rb['tonic'][1]):.0f}/s,"
              f" ratio open/h2load {med(lambda rb, ref: rb['tonic'][0] / ref):.2f},"
              f" closed/h2load {med(lambda rb, ref: rb['tonic'][1] / ref):.2f}")
    print(f"paced peer (median of {len(rounds)} rounds): h2load --rps keeps up to {paced:.0f}/s;"
          f" ratio rackbench open-loop / h2load paced {paced_ratio:.2f}")
    print(f"loadgen (median of {len(rounds)} interleaved rounds): rackbench open-loop {med(lambda rb, ref: rb['h2'][0]):.0f}/s,"
          f" closed-loop {med(lambda rb, ref: rb['h2'][1]):.0f}/s, h2load closed-loop {h2:.0f}/s,"
          f" ratio open/h2load {med(lambda rb, ref: rb['h2'][0] / ref):.2f},"
          f" closed/h2load {med(lambda rb, ref: rb['h2'][1] / ref):.2f}")


if __name__ == "__main__":
    main()
