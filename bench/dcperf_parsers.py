#!/usr/bin/env python3
"""Upstream's own benchpress parsers on rackbench's output: DCPerf's
`feedsim`, `feedsim_autoscale` and `adsim` parsers, imported from a DCPerf
checkout given by path (never copied into this project), read what
rackbench prints for every job they cover, run directly and through
upstream's stock job files (`-j .../jobs.yml`, `-j .../jobs_ai.yml`). Each
case checks that the parser read the same figures rackbench reports.

Sizes are shrunk (small datasets, short probes, a light AdSim pipeline):
the parsers read the output's shape, which does not depend on the size.

  python3 bench/dcperf_parsers.py --dcperf /path/to/DCPerf [--bin target/debug/rackbench]

benchpress gives a parser the benchmark's own stdout; under `rackbench run`
(or `--report`) rackbench's report JSON follows it on the last line, so
those cases feed the parser the lines before the report.
"""
import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ap = argparse.ArgumentParser()
ap.add_argument("--dcperf", default=os.environ.get("RACKBENCH_DCPERF"),
                help="a DCPerf checkout (its benchpress/ folder is imported)")
ap.add_argument("--bin", default=os.path.join(ROOT, "target/debug/rackbench"))
a = ap.parse_args()
a.bin = os.path.abspath(a.bin)
if not a.dcperf or not os.path.isdir(os.path.join(a.dcperf, "benchpress")):
    sys.exit("--dcperf PATH: a DCPerf checkout with benchpress/ (or RACKBENCH_DCPERF)")
sys.path.insert(0, a.dcperf)
from benchpress.plugins.parsers.feedsim import FeedSimParser  # noqa: E402
from benchpress.plugins.parsers.feedsim_autoscale import FeedSimAutoscaleParser  # noqa: E402

try:
    from benchpress.plugins.parsers.adsim import AdSimParser  # noqa: E402
except ImportError:
    AdSimParser = None

CFG = os.path.join(a.dcperf, "benchpress", "config")
SMALL = "--scale 14 --chase-entries 100000 --graph-subset 20000 -i 20000 --num-objects 100"
QUICK = "--quick --probe-secs 2 --final-secs 3 --tolerance 0.25 -w 1"
work = tempfile.mkdtemp(prefix="dcperf_parsers_")
env = dict(os.environ, RACKBENCH_DB=os.path.join(work, "results.db"), RACKBENCH_PLAIN_PROGRESS="1")
env.pop("RACKBENCH_REPORT", None)
env.pop("RACKBENCH_JOBS_DIR", None)
results = []


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def run(args, cwd=work):
    t = time.time()
    o = subprocess.run([a.bin] + args, cwd=cwd, env=env, capture_output=True, text=True)
    return o, time.time() - t


def split_report(o):
    """The benchmark's lines and rackbench's report (None in a direct run).
    A job (`run`) prints its report alone on stdout and the benchmark's
    text on stderr; a direct command prints the text on stdout."""
    lines = o.stdout.rstrip("\n").split("\n")
    try:
        r = json.loads(lines[-1])
        if isinstance(r, dict) and "benchmark_name" in r:
            if "run" in o.args:
                assert lines[:-1] == [], f"a job's stdout is its report only: {lines[:3]}"
                return o.stderr.rstrip("\n").split("\n"), r
            return lines[:-1], r
    except ValueError:
        pass
    return lines, None


def check(case, parser, lines, expect):
    """Runs upstream's parser on `lines`; `expect` checks its metrics."""
    m = parser().parse(list(lines), [], 0)
    ok, why = expect(m)
    results.append((case, parser.__name__, ok, why, m))
    print(f"{'ok  ' if ok else 'FAIL'} {case}: {parser.__name__} -> {json.dumps(m, sort_keys=True)[:300]}"
          + ("" if ok else f"\n     {why}"), flush=True)


def close(x, y, tol=0.011):
    return x is not None and y is not None and abs(float(x) - float(y)) <= tol


# ---- FeedSim (parser `feedsim`: run.sh's output) ----
def feedsim_expect(final):
    def f(m):
        return (close(m.get("final_achieved_qps"), final["achieved"])
                and close(m.get("final_requested_qps"), final["requested"])
                and m.get("target_percentile") == "95p" and m.get("target_latency_msec") == 500.0,
                f"expected {final}")
    return f


def final_of(lines):
    for l in reversed(lines):
        x = re.search(r"final requested_qps = ([\d.]+), measured_qps = ([\d.]+), latency = ([\d.]+)", l)
        if x:
            return {"requested": float(x.group(1)), "achieved": float(x.group(2))}
    return None


def feedsim_case(case, args, via_run=False):
    o, secs = run(args)
    lines, rep = split_report(o)
    if o.returncode != 0 or final_of(lines) is None:
        results.append((case, "FeedSimParser", False, f"rackbench exited {o.returncode}: {o.stderr[-800:]}", {}))
        print(f"FAIL {case}: rackbench exited {o.returncode}\n{o.stderr[-800:]}", flush=True)
        return
    fin = final_of(lines)
    if rep:
        m = rep["metrics"]
        assert close(m["final_achieved_qps"], fin["achieved"]), (m["final_achieved_qps"], fin)
    check(f"{case} ({secs:.0f} s)", FeedSimParser, lines, feedsim_expect(fin))
    if via_run:
        # The job's whole stderr, rackbench's own lines included: the
        # parser's regexes still find upstream's lines.
        check(f"{case}, whole stderr", FeedSimParser, o.stderr.splitlines(), feedsim_expect(fin))


p = free_port()
feedsim_case("rackbench feedsim -q 2,4 (direct)",
             ["feedsim", "-p", str(p), "-q", "2,4", "-d", "3", "-w", "1"] + SMALL.split())
p = free_port()
feedsim_case("rackbench feedsim search (direct)",
             ["feedsim", "-p", str(p)] + QUICK.split() + SMALL.split())
p = free_port()
feedsim_case("rackbench feedsim -l 4 --driver closed-compat -q 6 (direct)",
             ["feedsim", "-p", str(p), "-l", "4", "--driver", "closed-compat", "-q", "6", "-d", "3", "-w", "1"]
             + SMALL.split())
p = free_port()
feedsim_case("stock jobs.yml: run feedsim_default (-o shrinks its args)",
             ["-j", os.path.join(CFG, "jobs.yml"), "--no-store", "-o",
              f"feedsim_default: -p {{port}} -o {{output}} {QUICK} {SMALL}",
              "run", "feedsim_default", "-i", json.dumps({"port": str(p)})], via_run=True)
p = free_port()
feedsim_case("rackbench's feedsim_mini job",
             ["--no-store", "run", "feedsim_mini", "-i", json.dumps({"port": str(p)})], via_run=True)


# ---- FeedSim autoscale (parser `feedsim_autoscale`: run-feedsim-multi.sh's output) ----
def autoscale_case(case, args):
    o, secs = run(args)
    lines, rep = split_report(o)
    if o.returncode != 0:
        results.append((case, "FeedSimAutoscaleParser", False, o.stderr[-800:], {}))
        print(f"FAIL {case}: rackbench exited {o.returncode}\n{o.stderr[-800:]}", flush=True)
        return
    overall = sum(f["achieved"] for f in [final_of([l]) for l in lines if "final requested_qps" in l] if f)

    def expect(m):
        if not isinstance(m, dict) or "overall" not in m:
            return False, "no object read"
        ok = close(m["overall"]["final_achieved_qps"], overall, 0.02) and "score" in m
        if rep:
            ok = ok and close(m["overall"]["final_achieved_qps"], rep["metrics"]["overall"]["final_achieved_qps"], 0.01)
            ok = ok and m["is_fixed_qps"] == rep["metrics"]["is_fixed_qps"]
        return ok, f"expected overall {overall}"
    check(f"{case} ({secs:.0f} s)", FeedSimAutoscaleParser, lines, expect)


ncpu = len(os.sched_getaffinity(0))
inst = 2 if ncpu >= 2 else 1
p = free_port()
autoscale_case(f"rackbench feedsim --num-instances {inst} (direct)",
               ["feedsim", "--num-instances", str(inst), "-p", str(p)] + QUICK.split() + SMALL.split())
p = free_port()
autoscale_case(f"rackbench feedsim --num-instances {inst} -q 3 (direct)",
               ["feedsim", "--num-instances", str(inst), "-p", str(p), "-q", "3", "-d", "3", "-w", "1"]
               + SMALL.split())
p = free_port()
autoscale_case("stock jobs.yml: run feedsim_autoscale",
               ["-j", os.path.join(CFG, "jobs.yml"), "--no-store", "run", "feedsim_autoscale", "-i",
                json.dumps({"num_instances": inst, "extra_args": f"-p {p} {QUICK} {SMALL}"})])
p = free_port()
autoscale_case("stock jobs.yml: run feedsim_autoscale_arm",
               ["-j", os.path.join(CFG, "jobs.yml"), "--no-store", "run", "feedsim_autoscale_arm", "-i",
                json.dumps({"num_instances": 1, "extra_args": f"-p {p} {QUICK} {SMALL}"})])

# ---- AdSim (parser `adsim`: qps_search.sh's CSV) ----
src = open(os.path.join(ROOT, "crates/rackbench/tests/adsim.rs")).read()
light = re.search(r'const LIGHT: &str = r#"(.*?)"#;', src, re.S).group(1)


def adsim_server(port):
    cfg = os.path.join(work, f"light_{port}.json")
    open(cfg, "w").write(light.replace('"port": 0', f'"port": {port}'))
    srv = subprocess.Popen([a.bin, "adsim", "server", "--config", cfg, "--bind", "::1", "--tls"],
                           cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return srv, cfg


def wait_serving(srv):
    deadline = time.time() + 120
    while time.time() < deadline:
        line = srv.stderr.readline()
        if "serving on" in line:
            return True
        if srv.poll() is not None:
            return False
    return False


def adsim_case(case, client_args, expect_success=True):
    o, secs = run(client_args)
    lines, rep = split_report(o)
    lines = [l for l in lines if l.strip()]

    def expect(m):
        if not expect_success:
            return m.get("success") is False, "a failed search must read as success: false"
        ok = m.get("success") is True and m.get("final_latency_msec", 0) > 0
        if rep:
            r = rep["metrics"]
            ok = ok and close(m["final_requested_qps"], r["final_requested_qps"], 0.002)
        return ok, f"rackbench exited {o.returncode}"
    check(f"{case} ({secs:.0f} s)", AdSimParser, lines, expect)


if AdSimParser is None:
    print("skipped AdSim: this DCPerf checkout has no benchpress/plugins/parsers/adsim.py")
else:
    port = free_port()
    srv, cfg = adsim_server(port)
    if not wait_serving(srv):
        sys.exit("the AdSim server did not start: " + srv.stderr.read()[-800:])
    adsim_case("rackbench adsim client (direct, TLS)",
               ["adsim", "client", "--server", "::1", "--port", str(port), "--tls", "--quick",
                "--latency", "500", "--runtime", "3"])
    adsim_case("rackbench adsim client, no rate meets 0.001 ms (direct)",
               ["adsim", "client", "--server", "::1", "--port", str(port), "--tls", "--quick",
                "--latency", "0.001", "--runtime", "2", "--qps-max", "8"], expect_success=False)
    srv.send_signal(signal.SIGINT)
    srv.wait(timeout=60)
    # Upstream's jobs_ai.yml: its server role on port 10086 (the light
    # pipeline as its cfg_file), its client role against it.
    if os.path.exists(os.path.join(CFG, "jobs_ai.yml")) and "name: adsim\n" in open(os.path.join(CFG, "jobs_ai.yml")).read():
        cfg = os.path.join(work, "light_10086.json")
        open(cfg, "w").write(light.replace('"port": 0', '"port": 10086'))
        srv = subprocess.Popen([a.bin, "-j", os.path.join(CFG, "jobs_ai.yml"), "--no-store", "run", "adsim",
                                "-r", "server", "-i", json.dumps({"cfg_file": cfg})],
                               cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if wait_serving(srv):
            adsim_case("stock jobs_ai.yml: run adsim -r client (TLS, as upstream)",
                       ["-j", os.path.join(CFG, "jobs_ai.yml"), "--no-store", "run", "adsim", "-r", "client",
                        "-i", json.dumps({"server_ip": "::1", "runtime": "3", "lat_target_ms": "500",
                                          "num_workers": "4", "timeout": "240"})])
        else:
            print("FAIL stock jobs_ai.yml adsim server did not start: " + srv.stderr.read()[-800:])
            results.append(("stock adsim server", "AdSimParser", False, "server", {}))
        srv.send_signal(signal.SIGINT)
        srv.wait(timeout=60)
    else:
        print("skipped the stock AdSim jobs: this checkout's jobs_ai.yml has no adsim job")

failed = [r for r in results if not r[2]]
print(f"\n{len(results) - len(failed)} of {len(results)} parser readings as expected ({work})")
sys.exit(1 if failed else 0)
