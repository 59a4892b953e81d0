#!/usr/bin/env python3
"""Distbench benchmarks: rackbench's traffic engine next to peers in the
same run, everything on loopback.

1. client_server 1x1x100 (196 B requests, 256 KiB responses): MiB/s moved
   by the RPCs, against iperf3's single-stream loopback bandwidth.
2. Small RPCs (16 B / 32 B, closed loop, 100 in flight): kQPS of our
   client and server, and of ghz (100 concurrent, 1 connection) driving our
   server (`distbench rpc_server`).
3. clique 10 x 16 ms sync_burst (1 KiB / 1 KiB): p99 latency and kQPS.
4. multi_level_rpc 4 roots x 20 leaves: the query rate the load balancer
   achieves at the default 10,000 QPS and lower rates, and where it keeps up
   (>= 98% of the requested rate, no failed RPC); at most 20,000 RPCs
   pending (overload_limits), so an unsustained rate ends as overloaded.
5. With --memory: client_server with max_rpc_samples 1000 for 60 s and
   for --memory-secs: the node managers' max RSS and the results' size.

6. With --small-only: only the small RPCs over grpc and tcp, in --rounds
   interleaved rounds (median), no ghz; with --before BIN each round also
   runs BIN (e.g. a build of an earlier commit) on the same grpc test, and
   the summary gives the ratio of this build's kQPS to BIN's per round.

Usage: python3 bench/distbench.py [--secs 10] [--memory] [--memory-secs 600]
       python3 bench/distbench.py --small-only [--rounds 3] [--before BIN] [--secs 10]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import common

SMALL = """tests {
  name: 'small_rpcs'
  default_protocol: '%s'
  services { name: 'client' count: 1 }
  services { name: 'server' count: 1 }
  rpc_descriptions { name: 'small' client: 'client' server: 'server'
                     request_payload_name: 'req' response_payload_name: 'resp' }
  payload_descriptions { name: 'req' size: 16 }
  payload_descriptions { name: 'resp' size: 32 }
  action_lists { name: 'client' action_names: 'run' }
  actions { name: 'run' rpc_name: 'small'
            iterations { max_duration_us: %d max_parallel_iterations: 100 warmup_iterations: 1000 } }
  action_lists { name: 'small' }
}
"""

BIG = """tests {
  name: 'client_server_sampled'
  services { name: 'client' count: 1 }
  services { name: 'server' count: 1 }
  rpc_descriptions { name: 'q' client: 'client' server: 'server'
                     request_payload_name: 'req' response_payload_name: 'resp' }
  payload_descriptions { name: 'req' size: 196 }
  payload_descriptions { name: 'resp' size: 262144 }
  action_lists { name: 'client' action_names: 'run' max_rpc_samples: 1000 }
  actions { name: 'run' rpc_name: 'q'
            iterations { max_duration_us: %d max_parallel_iterations: 100 } }
  action_lists { name: 'q' }
}
"""


def localhost(env, cwd, nodes, secs, pattern=None, infile=None, may_fail=False, binary=None):
    cmd = [binary or common.BIN, "--no-store", "--output-dir", os.path.join(cwd, "reports"), "distbench",
           "start_localhost", "-n", str(nodes), "--port", "0", "-t", str(secs)]
    cmd += ["--pattern", pattern] if pattern else ["--infile", infile]
    t0 = time.time()
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if out.returncode != 0 and not (may_fail and out.returncode == 1):
        sys.exit(f"{cmd} failed: {out.stderr[-3000:]}")
    m = common.report(out.stdout)["metrics"]
    m["wall_secs"] = time.time() - t0
    return m


def iperf3(secs):
    iperf = shutil.which("iperf3") or sys.exit("iperf3 not found: apt-get install iperf3")
    srv = subprocess.Popen([iperf, "-s", "-1", "-p", "5299"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    out = subprocess.run([iperf, "-c", "127.0.0.1", "-p", "5299", "-t", str(secs), "-J"], capture_output=True, text=True)
    srv.wait(timeout=10)
    r = common.report(out.stdout)
    return r["end"]["sum_received"]["bits_per_second"] / 8 / 2**20


def ghz_small(env, cwd, secs):
    ghz = common.find_ghz()
    srv = subprocess.Popen([common.BIN, "--no-store", "--output-dir", os.path.join(cwd, "reports"), "distbench",
                            "rpc_server", "--port", "10087", "--response_size", "32"],
                           cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.0)
        proto_dir = os.path.join(common.ROOT, "crates/distbench/proto")
        data = json.dumps({"rpc_index": 0, "payload": "AAAAAAAAAAAAAAAAAAAAAA=="})
        cmd = [ghz, "--insecure", "--proto", os.path.join(proto_dir, "control.proto"), "--import-paths", proto_dir,
               "--call", "distbench.Traffic/GenericRpc", "-d", data, "-z", f"{secs}s", "-c", "100",
               "--connections", "1", "-O", "json", "127.0.0.1:10087"]
        out = subprocess.run(cmd, capture_output=True, text=True)
        r = common.report(out.stdout)
        ok = r.get("statusCodeDistribution", {}).get("OK", 0)
        p99 = next((d["latency"] for d in r.get("latencyDistribution") or [] if d["percentage"] == 99), 0)
        return r["rps"] / 1000, ok, p99 / 1e6
    finally:
        srv.terminate()
        srv.wait(timeout=10)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--secs", type=int, default=10)
    ap.add_argument("--memory", action="store_true")
    ap.add_argument("--memory-secs", type=int, default=600)
    ap.add_argument("--only-memory", action="store_true")
    ap.add_argument("--small-only", action="store_true", help="only the small RPCs, in interleaved rounds")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--before", help="another rackbench binary to run beside this build (--small-only)")
    a = ap.parse_args()
    common.build()
    cwd, env = common.scratch()
    if a.small_only:
        small_rounds(a, cwd, env)
        return
    rows = []
    if not a.only_memory:
        rows += traffic(a, cwd, env)
    if a.memory or a.only_memory:
        rows += memory(a, cwd, env)
    for what, result in rows:
        print(f"| {what} | `python3 bench/distbench.py` | {result} |")


def small_config(cwd, proto, secs):
    f = os.path.join(cwd, f"small_{proto}.config")
    with open(f, "w") as fh:
        fh.write(SMALL % (proto, secs * 1_000_000))
    return f


def small_rounds(a, cwd, env):
    runs = []  # per round: {label: (kqps, p99 ms)}
    labels = (["before grpc"] if a.before else []) + ["grpc", "tcp"]
    for n in range(1, a.rounds + 1):
        r = {}
        for label in labels:
            proto = label.split()[-1]
            m = localhost(env, cwd, 2, a.secs, infile=small_config(cwd, proto, a.secs),
                          binary=a.before if label.startswith("before") else None)
            s = m["tests"][0]["rpcs"]["small"]
            r[label] = (s["kqps"], s["latency_us"]["p99"] / 1000)
            print(f"round {n}: {label:11} {s['kqps']:.1f} kQPS, p99 {r[label][1]:.2f} ms", flush=True)
        runs.append(r)
    med = lambda f: statistics.median(f(r) for r in runs)
    parts = [f"{label} {med(lambda r: r[label][0]):.1f} kQPS (p99 {med(lambda r: r[label][1]):.2f} ms)" for label in labels]
    line = f"small RPCs 16 B / 32 B, 100 in flight, closed loop, median of {len(runs)} rounds: " + ", ".join(parts)
    if a.before:
        line += f"; this build / before {med(lambda r: r['grpc'][0] / r['before grpc'][0]):.2f}"
    line += f"; grpc / tcp driver {med(lambda r: r['grpc'][0] / r['tcp'][0]):.2f}"
    print(line)


def traffic(a, cwd, env):
    rows = []

    # 1. Bandwidth.
    bw = iperf3(a.secs)
    m = localhost(env, cwd, 2, a.secs, pattern="client_server")
    rpc = m["tests"][0]["rpcs"]["client_server_rpc"]
    ours = rpc["request_mib_per_s"] + rpc["response_mib_per_s"]
    rows.append(("client_server 1x1x100 196 B / 256 KiB, MiB/s vs iperf3 single stream",
                 f"rackbench {ours:.0f} MiB/s ({rpc['kqps']:.2f} kQPS, p99 {rpc['latency_us']['p99']/1000:.1f} ms); "
                 f"iperf3 {bw:.0f} MiB/s; ratio {ours / bw:.2f}"))

    # 2. Small RPCs.
    small = {}
    for proto in ["grpc", "tcp"]:
        m = localhost(env, cwd, 2, a.secs, infile=small_config(cwd, proto, a.secs))
        small[proto] = m["tests"][0]["rpcs"]["small"]
    r, t = small["grpc"], small["tcp"]
    g_kqps, g_ok, g_p99 = ghz_small(env, cwd, a.secs)
    rows.append(("small RPCs 16 B / 32 B, 100 in flight, closed loop: kQPS",
                 f"rackbench client+server {r['kqps']:.1f} kQPS over grpc (p99 {r['latency_us']['p99']/1000:.2f} ms), "
                 f"{t['kqps']:.1f} kQPS over the tcp driver (p99 {t['latency_us']['p99']/1000:.2f} ms); "
                 f"ghz -c 100 -> rackbench rpc_server {g_kqps:.1f} kQPS (p99 {g_p99:.2f} ms, {g_ok} OK)"))

    # 3. Clique.
    m = localhost(env, cwd, 10, a.secs, pattern="clique")
    r = m["tests"][0]["rpcs"]["clique_query"]
    rows.append(("clique 10 x 16 ms sync_burst, 1 KiB / 1 KiB",
                 f"p50 {r['latency_us']['p50']/1000:.2f} ms, p99 {r['latency_us']['p99']/1000:.2f} ms, "
                 f"{r['kqps']:.2f} kQPS (ideal {10*9/16:.2f}), failed {r['failed']}"))

    # 4. multi_level_rpc. Upstream's default limit of 1,000,000 pending
    # RPCs would let an unsustainable rate pile up (a few KiB each) and
    # then drain for minutes: the bench sets 20,000, so such a run ends as
    # overloaded.
    parts = []
    best = None
    for qps in [10000, 5000, 2000, 1500, 1000, 750, 500]:
        gen = subprocess.run([common.BIN, "--no-store", "distbench", "test_builder", "-t", str(a.secs),
                              f"multi_level_rpc:qps={qps}"], cwd=cwd, env=env, capture_output=True, text=True)
        if gen.returncode != 0:
            sys.exit(f"test_builder failed: {gen.stderr[-3000:]}")
        config = os.path.join(cwd, f"multi_level_{qps}.config")
        with open(config, "w") as f:
            f.write(gen.stdout.replace("tests {", "tests {\n  overload_limits { max_pending_rpcs: 20000 }", 1))
        m = localhost(env, cwd, 25, a.secs, infile=config, may_fail=True)
        if "error" in m:
            why = m["error"].split(": ")[-1]
            parts.append(f"{qps}: fails after {m['wall_secs']:.0f} s ({why})")
            continue
        t = m["tests"][0]
        if t.get("overloaded"):
            # The test completes with its results, as upstream's; the rate
            # was not sustained.
            why = sorted(set(t["engine_errors"].values()))[0]
            parts.append(f"{qps}: overloaded after {m['wall_secs']:.0f} s ({why})")
            continue
        root = t["rpcs"]["root_query"]
        achieved = root["kqps"] * 1000
        ok = achieved >= 0.98 * qps and t["overall"]["failed"] == 0
        parts.append(f"{qps}: {achieved:.0f} root QPS, p99 {root['latency_us']['p99']/1000:.1f} ms{'' if ok else ' (falls short)'}")
        if ok and best is None:
            best = qps
    rows.append(("multi_level_rpc 4 x 20, requested QPS -> achieved load-balancer queries",
                 "; ".join(parts) + f"; highest sustained of these: {best}"))

    return rows


def memory(a, cwd, env):
    """client_server with max_rpc_samples 1000 for 60 s and --memory-secs."""
    rows = []
    for secs in [60, a.memory_secs]:
        f = os.path.join(cwd, f"big{secs}.config")
        with open(f, "w") as fh:
            fh.write(BIG % (secs * 1_000_000))
        m = localhost(env, cwd, 2, secs, infile=f)
        size = os.path.getsize(m["outfile"])
        t = m["tests"][0]
        r = t["rpcs"]["q"]
        rows.append((f"memory: client_server 1x1x100 with max_rpc_samples 1000 for {secs} s",
                     f"{r['samples']} samples kept; results {size/1024:.0f} KiB; "
                     f"max RSS {t['node_max_rss_kib']/1024:.0f} MiB"))
    return rows


if __name__ == "__main__":
    main()
