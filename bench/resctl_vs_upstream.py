#!/usr/bin/env python3
"""rackbench resctl against upstream resctl-bench 2.2.5 on result files.

Upstream is built from its crates.io source into a scratch folder outside
the project (RESCTL_PEER, default /var/tmp/resctl-peer), as
bench/resctl_hashd_vs_upstream.sh does for rd-hashd (see build() for why
not plain `cargo install`). Each tool works on
its own copy of every file:

- format and summary: stdout compared byte for byte, apart from the
  version in each `[KIND VERSION result]` header;
- solve: `solve iocost-tune` on every file with an iocost-tune job; each
  stored solution is compared with the one solved again (exactly: every
  field, floats bit for bit), for both tools (upstream reads the file's
  numbers without exact float parsing, so its own solve changes the last
  digit of many);
- merge: the result files of each device folder of the database merged
  by both tools (the merged iocost-tune jobs compared whole, exactly), and
  for upstream 2.1's folders rackbench's merge against the
  merged-results.json.gz 2.1 wrote (upstream 2.2.5 cannot read 2.1's
  iocost-tune results);
- both ways: the files rackbench writes (its solve and merge outputs, and
  with --run a short `--test` run of hashd-params and a mem-hog-tune
  protection) must load in upstream (`format` exits 0).

Files: the project's upstream-shaped fixtures (tests/data/resctl) and
every *.json.gz under DATABASE (the iocost-benchmarks database, e.g. a
clone of iocost-benchmark/iocost-benchmarks, its `database` folder).

Usage: [RACKBENCH=BIN] python3 bench/resctl_vs_upstream.py [--run] [--keep DIR] [DATABASE]
Prints one line per difference found and a summary line with the counts.
"""

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEER = Path(os.environ.get("RESCTL_PEER", "/var/tmp/resctl-peer"))
UPSTREAM = PEER / "root" / "bin" / "resctl-bench"
# RACKBENCH names another rackbench binary (a debug build, say); by
# default the release build is made and used.
OURS = Path(os.environ.get("RACKBENCH", ROOT / "target" / "release" / "rackbench"))
FIXTURES = ROOT / "crates" / "rackbench" / "tests" / "data" / "resctl"
HEADER = re.compile(r"^\[(\S+) (\S+) result\]", re.M)


def build():
    """Upstream resctl-bench 2.2.5 from crates.io, outside the project.

    `cargo install resctl-bench --version 2.2.5` no longer builds: with
    today's dependency versions upstream's code fails type inference (a
    `From` impl zerocopy added), and with its own Cargo.lock (`--locked`)
    `time` 0.3.34 does not build on Rust 1.80 and later. So the crate's
    source is built with its Cargo.lock, `time` alone moved to 0.3.36.
    """
    if not UPSTREAM.exists():
        regs = sorted(Path.home().glob(".cargo/registry/src/*/resctl-bench-2.2.5"))
        if not regs:
            # Fetches and unpacks the crate (the build itself then fails).
            subprocess.run(
                ["cargo", "install", "resctl-bench", "--version", "2.2.5", "--locked",
                 "--root", str(PEER / "root")],
                env=dict(os.environ, CARGO_TARGET_DIR=str(PEER / "target")),
            )
            regs = sorted(Path.home().glob(".cargo/registry/src/*/resctl-bench-2.2.5"))
        src = PEER / "src"
        if not src.exists():
            shutil.copytree(regs[-1], src)
            subprocess.run(["cargo", "update", "-p", "time", "--precise", "0.3.36"], cwd=src, check=True)
        subprocess.run(
            ["cargo", "build", "--release", "--locked", "--bin", "resctl-bench"],
            cwd=src,
            check=True,
            env=dict(os.environ, CARGO_TARGET_DIR=str(PEER / "target2")),
        )
        UPSTREAM.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(PEER / "target2" / "release" / "resctl-bench", UPSTREAM)
    if "RACKBENCH" not in os.environ:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "rackbench"], check=True, cwd=ROOT)


# Upstream looks for rd-agent and rd-hashd on PATH before solve and merge,
# which never start them: stand-ins that refuse to run let it go on.
FAKEBIN = PEER / "fakebin"


def up(args, cwd):
    FAKEBIN.mkdir(parents=True, exist_ok=True)
    for name in ("rd-agent", "rd-hashd"):
        f = FAKEBIN / name
        if not f.exists():
            f.write_text(f"#!/bin/sh\necho '{name}: a stand-in, it runs nothing' >&2\nexit 1\n")
            f.chmod(0o755)
    env = dict(os.environ, PATH=f"{FAKEBIN}:{os.environ.get('PATH', '')}")
    return subprocess.run([str(UPSTREAM), *args], cwd=cwd, capture_output=True, text=True, env=env)


def ours(args, cwd):
    cmd = [str(OURS), "--no-store", "--output-dir", str(Path(cwd) / "rb-out"), "resctl", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)


def load(path):
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw)


def solutions(path):
    """{job index: solutions} of the iocost-tune jobs of a result file."""
    out = {}
    for i, job in enumerate(load(path)):
        if job["spec"]["kind"] == "iocost-tune" and job.get("result"):
            out[i] = job["result"].get("solutions", {})
    return out


def norm(text):
    return HEADER.sub(lambda m: f"[{m.group(1)} VERSION result]", text)


def first_diff(a, b):
    al, bl = a.splitlines(), b.splitlines()
    for i, (x, y) in enumerate(zip(al, bl)):
        if x != y:
            return f"line {i + 1}: upstream {x!r} / rackbench {y!r}"
    return f"line {min(len(al), len(bl)) + 1}: lengths {len(al)} / {len(bl)} lines"


def copy(src, dst_dir, name):
    dst = Path(dst_dir) / name
    shutil.copyfile(src, dst)
    return dst


def count_same(stored, solved):
    """(same, total) solutions of `stored` found unchanged in `solved`."""
    same = total = 0
    for i, sols in stored.items():
        for name, sol in sols.items():
            total += 1
            if solved.get(i, {}).get(name) == sol:
                same += 1
    return same, total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("database", nargs="?", help="folder of result files (*.json.gz)")
    ap.add_argument("--run", action="store_true", help="also run short rackbench jobs (a few minutes)")
    ap.add_argument("--keep", help="work folder to keep (default: a temporary one, removed)")
    a = ap.parse_args()
    build()
    files = sorted(FIXTURES.rglob("*.json")) + sorted(FIXTURES.rglob("*.json.gz"))
    if a.database:
        files += sorted(Path(a.database).rglob("*.json.gz"))
    work = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="resctl-vs-up."))
    work.mkdir(parents=True, exist_ok=True)
    c = {k: [0, 0] for k in ("format", "summary", "solve-up", "solve-rb", "solve-both", "merge", "merge21", "reads")}
    diffs = []

    def tally(key, ok, what):
        c[key][1] += 1
        if ok:
            c[key][0] += 1
        else:
            diffs.append(f"{key}: {what}")

    for n, f in enumerate(files):
        d = work / f"f{n:03}"
        d.mkdir(exist_ok=True)
        name = f.name
        for cmd in ("format", "summary"):
            u = up(["-r", str(copy(f, d, "up-" + name)), cmd], d)
            r = ours(["-r", str(copy(f, d, "rb-" + name)), cmd], d)
            if u.returncode != 0:
                tally(cmd, r.returncode != 0, f"{f}: upstream fails ({u.stderr.strip()[-200:]})")
                continue
            same = r.returncode == 0 and norm(u.stdout) == norm(r.stdout)
            tally(cmd, same, f"{f}: {first_diff(norm(u.stdout), norm(r.stdout)) if r.returncode == 0 else r.stderr.strip()[-300:]}")
        stored = solutions(f)
        if not stored:
            continue
        uf, rf = copy(f, d, "up-solve-" + name), copy(f, d, "rb-solve-" + name)
        u = up(["-r", str(uf), "solve", "iocost-tune"], d)
        r = ours(["-r", str(rf), "solve", "iocost-tune"], d)
        total = sum(len(s) for s in stored.values())
        if u.returncode == 0:
            s, t = count_same(stored, solutions(uf))
            c["solve-up"][0] += s
            c["solve-up"][1] += t
            if s != t:
                diffs.append(f"solve-up: {f}: {t - s} of {t} solutions changed")
        if r.returncode == 0:
            s, t = count_same(stored, solutions(rf))
            c["solve-rb"][0] += s
            c["solve-rb"][1] += t
            if s != t:
                diffs.append(f"solve-rb: {f}: {t - s} of {t} solutions changed")
            # rackbench's rewritten file loads in upstream.
            v = up(["-r", str(rf), "format"], d)
            tally("reads", v.returncode == 0, f"{rf} (rackbench's solve): {v.stderr.strip()[-300:]}")
        else:
            c["solve-rb"][1] += total
            diffs.append(f"solve-rb: {f}: {r.stderr.strip()[-300:]}")
        if u.returncode == 0 and r.returncode == 0:
            tally("solve-both", solutions(uf) == solutions(rf), f"{f}: upstream and rackbench solve differently")

    if a.database:
        groups = {}
        for f in Path(a.database).rglob("result-*.json.gz"):
            groups.setdefault(f.parent, []).append(f)
        for dev, srcs in sorted(groups.items()):
            d = work / ("merge-" + dev.name + "-" + dev.parent.name)
            d.mkdir(exist_ok=True)
            srcs = sorted(srcs)
            for s in srcs:
                copy(s, d, s.name)
            names = [s.name for s in srcs]
            r = ours(["-r", "rb-merged.json", "merge", *names], d)
            if r.returncode != 0:
                tally("merge", False, f"{dev}: rackbench: {r.stderr.strip()[-300:]}")
                continue
            v = up(["-r", "rb-merged.json", "format"], d)
            tally("reads", v.returncode == 0, f"{d}/rb-merged.json (rackbench's merge): {v.stderr.strip()[-300:]}")
            stored = dev / "merged-results.json.gz"
            if stored.exists():
                s, t = count_same(
                    {0: next(iter(solutions(stored).values()), {})},
                    {0: next(iter(solutions(d / "rb-merged.json").values()), {})},
                )
                c["merge21"][0] += s
                c["merge21"][1] += t
                if s != t:
                    diffs.append(f"merge21: {dev}: {t - s} of {t} solutions differ from {stored.name}")
            u = up(["-r", "up-merged.json", "merge", *names], d)
            if u.returncode == 0:
                a, b = load(d / "up-merged.json"), load(d / "rb-merged.json")
                same = len(a) == len(b) and all(
                    x["spec"] == y["spec"] and x.get("result") == y.get("result") and x.get("record") == y.get("record")
                    for x, y in zip(a[1:], b[1:])
                )
                tally("merge", same, f"{dev}: the merged jobs differ")

    if a.run:
        d = work / "run"
        d.mkdir(exist_ok=True)
        res = d / "rb-run.json"
        specs = ["hashd-params", "protection::scenario=mem-hog-tune,intvs=2"]
        r = ours(["-r", str(res), "-d", str(d), "--test", "run", *specs], d)
        if r.returncode != 0 and not res.exists():
            diffs.append(f"run: rackbench --test run failed: {r.stderr.strip()[-300:]}")
        else:
            v = up(["-r", str(res), "format"], d)
            tally("reads", v.returncode == 0, f"{res} (rackbench's run): {v.stderr.strip()[-300:]}")

    for line in diffs:
        print(line)

    def f(k):
        return f"{c[k][0]}/{c[k][1]}"

    print(
        f"resctl vs upstream 2.2.5 on {len(files)} files: format identical {f('format')}, "
        f"summary identical {f('summary')}; stored solutions reproduced: upstream {f('solve-up')}, "
        f"rackbench {f('solve-rb')} (same as upstream's in {f('solve-both')} files); "
        f"merge same as upstream's {f('merge')}, as 2.1's merged-results {f('merge21')} solutions; "
        f"upstream reads rackbench's files {f('reads')}"
    )
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
