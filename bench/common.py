"""Shared helpers for rackbench's benchmarks: build the release binary, run
it in a scratch folder with its own results store, read its reports."""

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "rackbench")


def report(stdout):
    """The report JSON of a run: the last line of its stdout (the tool's own
    text, e.g. FeedSim's search lines or Distbench's test summaries, comes
    before it)."""
    lines = [l for l in stdout.splitlines() if l.strip()]
    return json.loads(lines[-1])


def build():
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "rackbench"], cwd=ROOT, check=True)
    return BIN


def scratch():
    # Direct commands (`rackbench feedsim ...`, `distbench ...`) print their
    # report JSON, which report() reads, only when RACKBENCH_REPORT is set.
    d = tempfile.mkdtemp(prefix="rackbench-bench-")
    env = dict(os.environ, RACKBENCH_DB=os.path.join(d, "results.db"), RACKBENCH_PLAIN_PROGRESS="1",
               RACKBENCH_REPORT="1")
    return d, env


def reports(folder):
    """Every report JSON under folder, oldest first."""
    out = []
    for f in sorted(glob.glob(os.path.join(folder, "benchmark_metrics_*", "*_metrics_*_iter_*.json"))):
        # benchpress' per-run links (`benchmark_metrics_<job>_timestamp:...`)
        # name the same folders.
        if os.path.islink(os.path.dirname(f)):
            continue
        with open(f) as fh:
            out.append(json.load(fh))
    return out


def find_ghz():
    for c in [shutil.which("ghz"), os.path.expanduser("~/go/bin/ghz")]:
        if c and os.path.exists(c):
            return c
    sys.exit("ghz not found: install it with `go install github.com/bojand/ghz/cmd/ghz@v0.120.0`")


def start_server(env, cwd, args, cpu=None, binary=None):
    cmd = [binary or BIN, "calibrate"] + args + ["serve", "--listen", "127.0.0.1:50051", "--threads", "1"]
    if cpu is not None and shutil.which("taskset"):
        cmd = ["taskset", "-c", str(cpu)] + cmd
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # Wait for the listening line.
    deadline = time.time() + 30
    while time.time() < deadline:
        line = p.stderr.readline()
        if "listening on" in line:
            return p
        if p.poll() is not None:
            sys.exit("server exited: " + line + p.stderr.read())
    sys.exit("server did not start")


def stop(p):
    p.send_signal(2)
    try:
        p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()


def pinned(cmd, cpu):
    return (["taskset", "-c", str(cpu)] if cpu is not None and shutil.which("taskset") else []) + cmd
