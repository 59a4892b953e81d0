#!/usr/bin/env python3
"""The report page on a fleet's store (10,000 runs by default): how long
`rackbench report html` takes and how much memory it needs, how big the
page is, and how long headless Chromium takes to load it with its script
run (no network: the page fetches nothing).

It records one feedsim_mini and one cachebench_mini run, then copies their
rows under RUNS/2 run ids each, spread over three host names, with SQL (the
harness has no host override), so the page has real metrics and charts.

Usage: python3 bench/report_html_scale.py [--runs 10000] [--bin PATH]
(--bin: an already built rackbench, e.g. target/debug/rackbench; default:
build and use the release binary). Chromium: apt-get install chromium.
"""

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10000)
    ap.add_argument("--bin")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder (its store) and print it")
    a = ap.parse_args()
    if a.runs < 2:
        ap.error("--runs must be at least 2")
    binary = os.path.abspath(a.bin) if a.bin else common.build()
    d, env = common.scratch()
    db = env["RACKBENCH_DB"]
    subprocess.run([binary, "--output-dir", d, "run", "feedsim_mini", "cachebench_mini"],
                   env=env, check=False, stdout=subprocess.DEVNULL)
    c = sqlite3.connect(db)
    cols = [r[1] for r in c.execute("PRAGMA table_info('runs')") if r[1] not in ("id", "run_id", "hostname", "timestamp")]
    seeds = c.execute("SELECT id FROM runs").fetchall()
    if len(seeds) < 2:
        sys.exit(f"expected 2 recorded runs, found {len(seeds)} in {db}")
    cs = ", ".join(cols)
    hosts = ["host-a", "host-b", "host-c"]
    for i in range(a.runs // 2 - 1):
        c.execute(
            f"INSERT INTO runs ({cs}, run_id, hostname, timestamp) "
            f"SELECT {cs}, printf('copy%06d', ?), ?, timestamp - ? * 3600 FROM runs WHERE id IN ({seeds[0][0]}, {seeds[1][0]})",
            (i, hosts[i % 3], i),
        )
    c.commit()
    n = c.execute("SELECT count(*) FROM runs").fetchone()[0]
    out = os.path.join(d, "report.html")
    t0 = time.monotonic()
    p = subprocess.Popen([binary, "report", "html", "--out", out], env=env, stdout=subprocess.DEVNULL)
    # wait4 gives this one child's peak memory (ru_maxrss, KiB on Linux).
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    t_report = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit(f"report html exited {p.returncode}")
    rss = usage.ru_maxrss / 1024
    size = os.path.getsize(out)
    line = f"report html: {n} runs in {t_report:.2f} s, max RSS {rss:.0f} MiB, page {size / 1e6:.1f} MB"
    chromium = shutil.which("chromium")
    if chromium:
        t0 = time.monotonic()
        dom = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", "file://" + out],
            capture_output=True, text=True, check=True)
        t_load = time.monotonic() - t0
        ready = 'data-report-ready="1"' in dom.stdout
        line += f"; chromium load+script {t_load:.2f} s (script ran: {ready})"
    else:
        line += "; chromium not installed (apt-get install chromium), load not measured"
    print(f"binary {binary}")
    print(line)
    if a.keep:
        print(f"kept {d} (store {db})")
    else:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
