#!/usr/bin/env python3
"""AdSim's ML kernels against numpy (OpenBLAS) on the same shapes, side by
side in one run.

Cases, each at 1 and 2 threads:
- gemm: upstream's ads GEMM, C (360 x 120) = A (360 x 600) B (600 x 120),
  f32;
- bottom_mlp: model_a's bottom MLP, batch 160, 256 -> 512 -> 256 -> 96,
  ReLU between layers;
- top_mlp: model_a's top MLP, batch 160, 174 -> 1024 -> 1024 -> 512 ->
  256 -> 1, ReLU between layers, sigmoid out.

Ours: `rackbench adsim kernel NAME --params JSON --threads N --seconds S
--json` (or the adsim_ml example with --example-bin, same arguments after
`kernel`); with N threads it is N concurrent firings, so GFLOP/s is
throughput. numpy: one product at a time with threadpoolctl limiting
OpenBLAS to N threads, output buffers preallocated (`out=`), ReLU and
sigmoid in place. numpy runs in a subprocess with OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE removed from its environment (this machine sets them to
force an older kernel); the OpenBLAS kernel threadpoolctl reports is
printed. Rounds alternate ours and numpy per case; the table shows each
side's median GFLOP/s over the rounds and the ratio ours / numpy.

Usage:
  python3 bench/adsim_ml_vs_numpy.py [--rackbench target/release/rackbench]
      [--example-bin target/release/examples/adsim_ml] [--rounds 3]
      [--seconds 2] [--threads 1,2] [--cases gemm,bottom_mlp,top_mlp] [--json]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CASES = {
    "gemm": {
        "kernel": "GEMM",
        "params": {"M": 360, "N": 120, "K": 600},
    },
    "bottom_mlp": {
        "kernel": "DenseFP32",
        "params": {"dims": [256, 512, 256, 96], "batch": 160, "relu": True},
    },
    "top_mlp": {
        "kernel": "DenseFP32",
        "params": {"dims": [174, 1024, 1024, 512, 256, 1], "batch": 160, "relu": True, "sigmoid_out": True},
    },
}


def flops(case):
    p = CASES[case]["params"]
    if CASES[case]["kernel"] == "GEMM":
        return 2.0 * p["M"] * p["N"] * p["K"]
    d = p["dims"]
    return 2.0 * p["batch"] * sum(a * b for a, b in zip(d, d[1:]))


def numpy_worker(case, threads, seconds):
    """Runs in the subprocess: times numpy on one case, prints JSON."""
    import numpy as np
    from threadpoolctl import threadpool_info, threadpool_limits

    rng = np.random.default_rng(1)
    p = CASES[case]["params"]
    if CASES[case]["kernel"] == "GEMM":
        a = rng.integers(0, 6, (p["M"], p["K"])).astype(np.float32)
        b = rng.integers(-4, 5, (p["K"], p["N"])).astype(np.float32)
        c = np.empty((p["M"], p["N"]), np.float32)

        def step():
            np.matmul(a, b, out=c)

    else:
        d, batch = p["dims"], p["batch"]
        ws = [rng.uniform(-0.05, 0.05, (x, y)).astype(np.float32) for x, y in zip(d, d[1:])]
        x0 = np.full((batch, d[0]), 0.01, np.float32)
        outs = [np.empty((batch, y), np.float32) for y in d[1:]]
        relu, sig = p.get("relu", False), p.get("sigmoid_out", False)

        def step():
            x = x0
            for i, (w, o) in enumerate(zip(ws, outs)):
                np.matmul(x, w, out=o)
                if i + 1 < len(ws):
                    if relu:
                        np.maximum(o, 0, out=o)
                elif sig:
                    np.negative(o, out=o)
                    np.exp(o, out=o)
                    o += 1
                    np.reciprocal(o, out=o)
                x = o

    with threadpool_limits(limits=threads, user_api="blas"):
        for _ in range(20):
            step()
        n, t0 = 0, time.perf_counter()
        while True:
            step()
            n += 1
            el = time.perf_counter() - t0
            if el >= seconds:
                break
        info = [
            {k: i.get(k) for k in ("internal_api", "architecture", "version", "num_threads")}
            for i in threadpool_info()
        ]
    print(json.dumps({"gflops": flops(case) * n / el / 1e9, "calls": n, "seconds": el, "blas": info}))


def run_numpy(case, threads, seconds):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--numpy-worker", case, str(threads), str(seconds)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout)


def run_ours(cmd, case, threads, seconds):
    c = CASES[case]
    args = cmd + [
        c["kernel"],
        "--params",
        json.dumps(c["params"]),
        "--threads",
        str(threads),
        "--seconds",
        str(seconds),
        "--json",
    ]
    out = subprocess.run(args, check=True, capture_output=True, text=True)
    # `--json` prints the result first; rackbench's run report follows it.
    return json.loads(out.stdout.splitlines()[0])


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--numpy-worker":
        numpy_worker(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rackbench", default=os.path.join(ROOT, "target", "release", "rackbench"))
    ap.add_argument(
        "--example-bin",
        help="the adsim_ml example binary instead of rackbench "
        "(cargo build --release -p adsim --example adsim_ml)",
    )
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--json", action="store_true", help="print the results as JSON too")
    a = ap.parse_args()
    cmd = [a.example_bin, "kernel"] if a.example_bin else [a.rackbench, "adsim", "kernel"]
    cases = a.cases.split(",")
    threads = [int(t) for t in a.threads.split(",")]
    for c in cases:
        if c not in CASES:
            sys.exit(f"unknown case {c!r}: expected some of {', '.join(CASES)}")

    ours, np_ = {}, {}
    blas = None
    for r in range(a.rounds):
        for c in cases:
            for t in threads:
                o = run_ours(cmd, c, t, a.seconds)
                n = run_numpy(c, t, a.seconds)
                blas = n["blas"]
                ours.setdefault((c, t), []).append(o["gflops"])
                np_.setdefault((c, t), []).append(n["gflops"])
                print(
                    f"round {r + 1}: {c:10s} {t} thr: ours {o['gflops']:7.1f}  numpy {n['gflops']:7.1f} GFLOP/s",
                    file=sys.stderr,
                )

    print(f"numpy BLAS (OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE unset): {json.dumps(blas)}")
    print(f"ours: {' '.join(cmd)}")
    print(f"median of {a.rounds} rounds of {a.seconds} s each, alternating ours and numpy\n")
    hdr = f"{'case':12s} {'shape':28s} {'thr':>3s} {'ours GFLOP/s':>13s} {'numpy GFLOP/s':>14s} {'ours/numpy':>11s}"
    print(hdr)
    print("-" * len(hdr))
    rows = []
    for c in cases:
        p = CASES[c]["params"]
        shape = f"{p['M']}x{p['N']}x{p['K']}" if "M" in p else f"{p['batch']} x {'-'.join(map(str, p['dims']))}"
        for t in threads:
            mo, mn = statistics.median(ours[(c, t)]), statistics.median(np_[(c, t)])
            rows.append({"case": c, "threads": t, "ours_gflops": mo, "numpy_gflops": mn, "ratio": mo / mn,
                         "ours_rounds": ours[(c, t)], "numpy_rounds": np_[(c, t)]})
            print(f"{c:12s} {shape:28s} {t:3d} {mo:13.1f} {mn:14.1f} {mo / mn:11.2f}")
    if a.json:
        print(json.dumps({"blas": blas, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
