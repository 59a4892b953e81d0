"""AdSim model_a: the served rate, the kernels' efficiency inside the
server, and whether one client core can drive 5x that rate.

1. Search: `adsim server --preset model_a` and `adsim client` in ai mode
   with the adsim_inference_a job's sizes (x6) and target (P99 <= 100 ms),
   shorter probes than the job (--probe-secs 5, --runtime 30).
2. Efficiency: a fixed run at the found rate (--qps Q, 30 s); per kernel,
   the server's thread-CPU time per fire against `adsim kernel` alone (one
   thread, same params); aggregate = sum(fires x standalone CPU per fire)
   / sum(server CPU in the kernels). Goal >= 0.6.
3. Client capacity: the client pinned to CPU 0 at 5 x Q against a server
   that only answers (one Shape kernel, 8-byte replies) pinned to CPU 1,
   same request sizes; the rate is sustained when >= 98% completes with
   P99 <= 100 ms. Also prints the client's CPU use at that rate.

Usage: python3 bench/adsim_serving.py [--scale 1]
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import build, scratch  # noqa: E402


def last_report(stdout):
    for line in reversed(stdout.splitlines()):
        if line.startswith("{") and '"metrics"' in line:
            return json.loads(line)
    raise SystemExit("no report in the output:\n" + stdout[-2000:])


def server(binary, d, env, args, cpus=None):
    cmd = ([ "taskset", "-c", cpus] if cpus else []) + [binary, "--no-store", "adsim", "server"] + args
    p = subprocess.Popen(cmd, cwd=d, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        if "serving on" in line:
            return p
    raise SystemExit("the server did not start")


def client(binary, d, env, args, cpus=None):
    cmd = ([ "taskset", "-c", cpus] if cpus else []) + [binary, "--no-store", "adsim", "client"] + args
    t = time.time()
    r = subprocess.run(cmd, cwd=d, env=env, capture_output=True, text=True)
    return last_report(r.stdout)["metrics"], time.time() - t


def stop(p):
    p.send_signal(signal.SIGINT)
    try:
        p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", default="1")
    a = ap.parse_args()
    binary = build()
    d, env = scratch()
    ai = ["--mode", "ai", "--ai-request-size-multiplier", "6"]

    srv = server(binary, d, env, ["--preset", "model_a", "--scale", a.scale, "--port", "10091"])
    try:
        m, took = client(binary, d, env, ["--port", "10091", "--probe-secs", "5", "--runtime", "30"] + ai)
        if not m["success"]:
            raise SystemExit(f"the search failed: {m.get('failure')}")
        q = m["final_requested_qps"]
        print(f"search: final {q:.1f} QPS requested, {m['final_achieved_qps']:.1f} achieved, "
              f"P99 {m['final_latency_msec']:.1f} ms, {took:.0f} s")
        f, _ = client(binary, d, env, ["--port", "10091", "--qps", str(q), "--runtime", "30"] + ai)
        cfg = json.loads(subprocess.run([binary, "--no-store", "adsim", "server", "--preset", "model_a",
                                         "--scale", a.scale, "--print-config"], cwd=d, env=env,
                                        capture_output=True, text=True, check=True).stdout.split("\n{\"benchmark_args\"")[0])
    finally:
        stop(srv)

    print(f"fixed run at {q:.1f} QPS: achieved {f['final_achieved_qps']:.1f}, success {f['success']}")
    fixed = f["search"][-1]
    # The kernels alone see bodies of the served mean size.
    body = int(fixed["total_bytes_tx"] / max(fixed["total_queries"], 1))
    print(f"mean request body in the fixed run: {body} bytes")
    total_alone = total_served = 0.0
    print(f"{'kernel':<12} {'fires':>8} {'served us/fire':>15} {'alone us/fire':>14} {'ratio':>6}")
    for k in f["server"]["kernels"]:
        params = cfg["Kernels"][k["index"]].get("params", {})
        r = subprocess.run([binary, "--no-store", "adsim", "kernel", k["name"], "--params", json.dumps(params),
                            "--threads", "1", "--seconds", "3", "--request-bytes", str(body), "--json"],
                           cwd=d, env=env,
                           capture_output=True, text=True, check=True)
        alone = json.loads(r.stdout.splitlines()[0])["cpu_s_per_fire"] * 1e6
        served = k["cpu_usec_per_fire"]
        total_alone += alone * k["fired"]
        total_served += served * k["fired"]
        print(f"{k['name']:<12} {k['fired']:>8} {served:>15.1f} {alone:>14.1f} {alone / served:>6.2f}")
    print(f"aggregate kernel efficiency in the server: {total_alone / total_served:.2f} (goal 0.6)")

    echo = os.path.join(d, "echo.json")
    with open(echo, "w") as fh:
        json.dump({"port": 10092, "num_req_handle_threads": 1, "num_io_handle_threads": 1,
                   "num_app_logic_threads": 1, "num_req_local_threads": 1,
                   "Kernels": [{"name": "Shape", "pool": "IOHandle",
                                "params": {"quantiles": [0, 1], "sizes": [8, 8]}}]}, fh)
    srv = server(binary, d, env, ["--config", echo], cpus="1")
    try:
        rate = 5 * q
        c, took = client(binary, d, env, ["--port", "10092", "--qps", f"{rate:.1f}", "--runtime", "20",
                                          "--latency", "100"] + ai, cpus="0")
    finally:
        stop(srv)
    probe = c["search"][-1]
    print(f"client capacity: one core at {rate:.0f} QPS (5 x {q:.1f}): achieved {probe['achieved_qps']:.0f}, "
          f"P99 {probe['latency']['p99_ms']:.1f} ms, completed {probe['total_queries']}/{probe['scheduled']}, "
          f"sustained {c['success']}; client CPU {c['client_cpu_seconds']:.1f} s over {took:.0f} s")


if __name__ == "__main__":
    main()
