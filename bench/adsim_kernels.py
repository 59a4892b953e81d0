"""Each kernel of AdSim's presets alone: `rackbench adsim kernel` on one
thread with the preset's params, fires per second, CPU per fire and, for
the ML kernels, GFLOP/s. The ads DeepCopy that builds 10.7 GB is run with
4,096 units instead of 65,536 (its per-fire copy is the same size); the
later DeepCopy stages read the first one's output, so only the first runs.

Usage: python3 bench/adsim_kernels.py [--seconds 2]
"""

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import build, scratch  # noqa: E402


def preset(binary, d, env, name):
    r = subprocess.run([binary, "--no-store", "adsim", "server", "--preset", name, "--print-config"],
                       cwd=d, env=env, capture_output=True, text=True, check=True)
    return json.loads(r.stdout.split("\n{\"benchmark_args\"")[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", default="2")
    a = ap.parse_args()
    binary = build()
    d, env = scratch()
    print(f"{'preset':<8} {'#':>2} {'kernel':<12} {'fanout':>6} {'fires/s':>10} {'CPU ms/fire':>12} {'GFLOP/s':>8}")
    for name in ["ads", "model_a"]:
        for i, k in enumerate(preset(binary, d, env, name)["Kernels"]):
            params = dict(k.get("params", {}))
            src = str(params.get("input", ""))
            reads_request = src.startswith("R") and k["name"] in ("DeepCopy", "Compress", "Decompress")
            if reads_request or k["name"] in ("FakeIO", "Echo", "Delay"):
                continue
            if k["name"] == "DeepCopy" and params.get("unit_vec_len", 0) > 4096:
                params["unit_vec_len"] = 4096
            for key in ("input", "output"):
                if isinstance(params.get(key), str):
                    params[key] = params[key].replace("{fidx}", "0")
            r = subprocess.run([binary, "--no-store", "adsim", "kernel", k["name"], "--params", json.dumps(params),
                                "--threads", "1", "--seconds", a.seconds, "--json"],
                               cwd=d, env=env, capture_output=True, text=True)
            if r.returncode != 0:
                print(f"{name:<8} {i:>2} {k['name']:<12} failed: {r.stderr.strip()[-300:]}")
                continue
            s = json.loads(r.stdout.splitlines()[0])
            gf = f"{s['gflops']:.1f}" if s["gflops"] > 0 else "-"
            print(f"{name:<8} {i:>2} {k['name']:<12} {k.get('fanout', 1):>6} {s['fires_per_s']:>10.1f} "
                  f"{s['cpu_s_per_fire'] * 1e3:>12.3f} {gf:>8}")


if __name__ == "__main__":
    main()
