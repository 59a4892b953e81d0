"""FeedSim's i-cache step under cachegrind: simulated I1 misses per request
of rackbench's buster (the `icache` crate, driven by its `requests` example)
against a faithful build of upstream's shape, generated here at run time.

The faithful build follows what upstream's gen_icache_buster.py documents
(this script has its own generator; it neither copies nor runs upstream's):
100,000 empty `void` functions split over 24 source files, each file with
an init function storing their addresses into a vector; an `ICacheBuster`
whose constructor fills that vector, shuffles it (std::shuffle seeded from
the clock) and whose `RunNextMethod` calls the next entry and advances the
index modulo the method count. It is compiled with upstream's release flags
(-O3 -DNDEBUG) and linked statically, as FeedSim's CMake build does, into
a driver that makes, per request, int(Gamma(0.7, 20000)) + 1,600,000 calls
(FeedSim's default -i), like LeafNodeRank's handler.

Both drivers get the same per-request call counts (drawn here with a fixed
seed) and run on one thread. Each runs twice under cachegrind, once with the
requests and once with none; the difference divided by the number of
requests is the per-request figure, so start-up and shuffling do not count.
The faithful executable is kept under target/icache_cachegrind/ for reruns
(its g++ build takes about 5 minutes on 2 cores; the cachegrind runs about
one).

Usage: python3 bench/icache_cachegrind.py [--requests 4] [--min-iterations 1600000]
           [--cxx g++] [--i1 32768,8,64] [--keep] [--rebuild]
Needs valgrind and a C++ compiler.
"""

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METHODS = 100_000  # upstream's kNumICacheBusterMethods
SPLITS = 24  # upstream's ICACHEBUSTER_NUM_SPLITS


def faithful_sources(d):
    """Writes the faithful C++ build's sources into d; returns their paths."""
    per = METHODS // SPLITS
    bounds = [(k * per, (k + 1) * per if k < SPLITS - 1 else METHODS) for k in range(SPLITS)]
    files = []
    for k, (lo, hi) in enumerate(bounds):
        path = os.path.join(d, f"part{k}.cc")
        with open(path, "w") as f:
            f.write("#include <vector>\n")
            for i in range(lo, hi):
                f.write(f"void icb_method_{i}() {{ }}\n")
            f.write(f"void icb_init_{k}(std::vector<void (*)()>& m) {{\n")
            for i in range(lo, hi):
                f.write(f"  m[{i}] = &icb_method_{i};\n")
            f.write("}\n")
        files.append(path)
    decls = "\n".join(f"void icb_init_{k}(std::vector<void (*)()>& m);" for k in range(SPLITS))
    calls = "\n".join(f"  icb_init_{k}(methods_);" for k in range(SPLITS))
    buster = os.path.join(d, "buster.cc")
    with open(buster, "w") as f:
        f.write(f"""#include "buster.h"
#include <algorithm>
#include <chrono>
#include <random>
{decls}
Buster::Buster(size_t n) : methods_({METHODS}), next_(0), n_(n) {{
{calls}
  unsigned seed = std::chrono::system_clock::now().time_since_epoch().count();
  std::shuffle(methods_.begin(), methods_.end(), std::default_random_engine(seed));
}}
void Buster::RunNextMethod() {{
  methods_[next_]();
  next_ = (next_ + 1) % n_;
}}
""")
    with open(os.path.join(d, "buster.h"), "w") as f:
        f.write("""#include <cstddef>
#include <vector>
class Buster {
 public:
  explicit Buster(size_t n);
  void RunNextMethod();
 private:
  std::vector<void (*)()> methods_;
  size_t next_;
  size_t n_;
};
""")
    main = os.path.join(d, "main.cc")
    with open(main, "w") as f:
        f.write(f"""#include "buster.h"
#include <cstdio>
#include <cstdlib>
#include <memory>
int main(int argc, char** argv) {{
  // A serving thread's buster, made at start-up.
  auto buster = std::make_unique<Buster>({METHODS});
  long long total = 0;
  for (int r = 1; r < argc; r++) {{
    long long n = std::atoll(argv[r]);
    for (long long i = 0; i < n; i++) buster->RunNextMethod();
    total += n;
  }}
  std::printf("%d requests, %lld calls\\n", argc - 1, total);
  return 0;
}}
""")
    return files + [buster, main]


def build_faithful(cxx, flags, d, rebuild):
    """The faithful driver's executable. g++ -O3 takes minutes over the
    100,000 functions on 2 cores, so the executable is kept under
    target/icache_cachegrind/, keyed by the generated sources, the compiler's
    version and the flags, and reused while they stay the same."""
    srcs = faithful_sources(d)
    h = hashlib.sha256()
    h.update(subprocess.run([cxx, "--version"], capture_output=True, text=True, check=True).stdout.encode())
    h.update(" ".join(flags).encode())
    for s in sorted(os.listdir(d)):
        with open(os.path.join(d, s), "rb") as f:
            h.update(s.encode() + f.read())
    cache = os.path.join(ROOT, "target", "icache_cachegrind", "faithful-" + h.hexdigest()[:16])
    if os.path.exists(cache) and not rebuild:
        print(f"faithful build: reusing {os.path.relpath(cache, ROOT)}")
        return cache
    print(f"faithful build: {cxx} {' '.join(flags)} over {len(srcs)} files (minutes)", flush=True)
    objs = []
    jobs = []
    for s in srcs:
        o = s[:-3] + ".o"
        objs.append(o)
        jobs.append(subprocess.Popen([cxx] + flags + ["-c", s, "-o", o], cwd=d))
        if len(jobs) >= 2:
            if jobs.pop(0).wait() != 0:
                sys.exit("faithful build: compiling failed")
    for j in jobs:
        if j.wait() != 0:
            sys.exit("faithful build: compiling failed")
    exe = os.path.join(d, "faithful")
    subprocess.run([cxx] + flags + objs + ["-o", exe], cwd=d, check=True)
    os.makedirs(os.path.dirname(cache), exist_ok=True)
    shutil.copy2(exe, cache + ".tmp")
    os.replace(cache + ".tmp", cache)
    return cache


def build_ours():
    r = subprocess.run(
        ["cargo", "build", "--release", "-p", "icache", "--example", "requests", "--message-format=json"],
        cwd=ROOT, check=True, capture_output=True, text=True)
    for line in r.stdout.splitlines():
        m = json.loads(line)
        if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "requests":
            return m["executable"]
    sys.exit("cargo did not report the requests example's executable")


def cachegrind(cmd, i1):
    r = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=yes", f"--I1={i1}",
                        "--cachegrind-out-file=/dev/null"] + cmd,
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd[:1])} under cachegrind failed ({r.returncode}):\n{r.stderr}")
    out = {}
    for key, pat in [("irefs", r"I\s+refs:\s+([\d,]+)"), ("i1", r"I1\s+misses:\s+([\d,]+)"),
                     ("lli", r"LLi\s+misses:\s+([\d,]+)")]:
        m = re.search(pat, r.stderr)
        if not m:
            sys.exit(f"no {key} line in cachegrind's output:\n{r.stderr}")
        out[key] = int(m.group(1).replace(",", ""))
    return out


def per_request(cmd, base_args, req_args, i1, n):
    full = cachegrind(cmd + base_args + req_args, i1)
    base = cachegrind(cmd + base_args, i1)
    return {k: (full[k] - base[k]) / n for k in full}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=4)
    ap.add_argument("--min-iterations", type=int, default=1_600_000,
                    help="FeedSim's -i: calls per request before the Gamma(0.7, 20000) extra")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cxx", default=os.environ.get("CXX", "g++"))
    ap.add_argument("--cxxflags", default="-O3 -DNDEBUG", help="upstream's release flags")
    ap.add_argument("--i1", default="32768,8,64", help="cachegrind's --I1 (size,assoc,line)")
    ap.add_argument("--keep", action="store_true", help="keep the faithful build's sources and objects")
    ap.add_argument("--rebuild", action="store_true", help="rebuild the faithful driver even if kept")
    a = ap.parse_args()
    if a.requests < 1:
        sys.exit("--requests must be at least 1")
    for tool in ["valgrind", a.cxx]:
        if not shutil.which(tool):
            sys.exit(f"{tool} not found")

    rng = random.Random(a.seed)
    calls = [int(rng.gammavariate(0.7, 20000)) + a.min_iterations for _ in range(a.requests)]
    mean_calls = sum(calls) / len(calls)
    req = [str(c) for c in calls]

    ours = build_ours()
    d = tempfile.mkdtemp(prefix="icache-faithful-")
    try:
        faithful = build_faithful(a.cxx, a.cxxflags.split(), d, a.rebuild)
        o = per_request([ours], [str(a.seed)], req, a.i1, a.requests)
        f = per_request([faithful], [], req, a.i1, a.requests)
    finally:
        if a.keep:
            print(f"faithful build kept in {d}")
        else:
            shutil.rmtree(d, ignore_errors=True)

    for name, r in [("rackbench", o), ("faithful", f)]:
        print(f"{name}: {r['i1'] / 1e6:.3f} M I1 misses per request ({r['i1'] / mean_calls:.3f} per call), "
              f"{r['irefs'] / mean_calls:.1f} instructions per call, {r['lli'] / 1e3:.1f} K LLi misses per request")
    print(f"I1 misses per request over {a.requests} requests of {mean_calls:,.0f} calls on average "
          f"(I1 {a.i1}): rackbench {o['i1']:,.0f}, faithful {f['i1']:,.0f}, "
          f"ratio {o['i1'] / f['i1']:.3f}")


if __name__ == "__main__":
    main()
