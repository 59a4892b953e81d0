#!/usr/bin/env python3
"""The load generator's own cost, side by side with h2load in one run.

A no-op gRPC server (`rackbench calibrate --workers 0 --service-time-ms 0
serve --threads 1`, replies at once) runs on CPU 1; each client on CPU 0
with one thread and two connections, 64-byte payloads. Four parts, every
figure a ratio against h2load (Debian's nghttp2-client) measured in the
same round, so the machine's drift and its other tenants cancel out:

1. Client CPU per completed request at paced rates (--rates, default 2k,
   5k and 20k req/s): h2load `--rps` (rate / 2 per connection, `-c 2 -m
   32 -t 1`) against `rackbench calibrate --fixed-qps RATE --arrival
   constant` (latency from the intended start, HdrHistogram per worker,
   achieved against scheduled: all as in any run). h2load's pacing is not
   even: its timer fires every max(10 ms, 1/rps) and sends the requests
   due then together (h2load.cc, `rps_watcher.repeat`), one write for
   ~rate/200 requests per connection; rackbench's constant arrivals send
   each request at its own time, one write and one wake-up each. So each
   rate also runs rackbench with the same shape, `--arrival burst:N`
   (N = rate / 100 every 10 ms), for the cost like for like. Each client's process
   CPU (user + system, /proc/PID/stat) is read over the same span in the
   middle of its run (start-up and its first second left out) and divided
   by the requests it completed in it (its achieved rate x the span). The
   two run one after the other, their order alternating by round. An idle
   line gives both clients' CPU at 10 req/s, in percent of a core.
   rackbench's constant arrivals run with their default wake-up window
   (a wake-up sends what is due within the next 1 ms, `--send-ahead-us`),
   so the --before binary of an earlier build shows what it saves.
2. Closed loop, 64 requests in flight: h2load `-c 2 -m 32` against the
   peak probe of rackbench's search (`--peak-concurrency 64`), h2load
   before and after it; ratio against their mean. Each run also gives,
   over the middle of its run, the client's CPU-us per request, its
   sleeps per request (voluntary context switches) and the server's busy
   share. When the server is busy all the time the peak is the server's
   rate: a client that sleeps between replies makes the server pay a
   cross-CPU wake-up per reply, so the peak ratio then says how each
   client's traffic suits the server, and the CPU ratio what it costs.
3. The SLO search against a fixed-rate sweep in the same run: the search
   (p99 <= 10 ms, >= 98% completed, constant arrivals, calibrate's
   defaults otherwise: 95% intervals, the failure that bounds the result
   confirmed, a probe whose requests left late repeated) and then fixed
   rates from 0.6x to 1.6x its result in 5% steps (`--fixed-qps`, the
   same criterion, each judged alone, a late one repeated); the
   search should lie within 10% of the highest rate the sweep passes.
   Each sweep rate runs as long as the search's final (twice its
   probes): the search reports only a rate a final passed, and on a host
   with stalls a longer window fails more often, so a sweep of probe-long
   windows judged a looser criterion than the result had to meet. A
   search whose result lies far below what its own probes passed is
   marked `search unsteady` (printed below it).
   Done on the quiet machine and again with a CPU hog alongside (one
   busy-looping process per CPU, normal priority). Each condition first
   prints the host's own tail at 5,000/s: p99 of a C sender and echo over
   loopback from each request's due time, and of its round trips alone
   (a gap between the two is the host waking timers late, which no
   client can undo).
4. The floor of sending each request at its own time (`--send-ahead-us
   0`, what constant arrivals did before the window): each round also
   times a bare timer wake-up at each rate's spacing (a C loop of timerfd
   and epoll_wait, built with the system's cc), and the summary puts that
   expected cost beside h2load's: the tick shape's cost per request plus
   two wake-ups (the request's timer, and its reply, which comes back
   while the client sleeps).

The rounds' figures are printed as they come; the summary takes the
median of the rounds. The last line:
`loadgen: client CPU per request vs h2load at 2k X, 5k Y, 20k Z; closed/h2load W; search within V% of the fixed-rate sweep`
(V: the larger distance of the two conditions).

Usage: python3 bench/loadgen_capacity.py [--secs 10] [--rounds 3]
           [--rates 2000,5000,20000] [--binary BIN] [--before OLD_BIN]
           [--no-closed] [--no-search] [--search-secs 5]
"""

import argparse
import json
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import time

import common

PAYLOAD = 64
CONNECTIONS = 2
IN_FLIGHT = 64
TARGET = "99p:10"
URL = "http://127.0.0.1:50051/rackbench.calibrate.Calibrate/Work"
TICK = os.sysconf("SC_CLK_TCK")


def work_request_file(cwd):
    """A gRPC-framed WorkRequest{payload: PAYLOAD zero bytes, reply_bytes:
    PAYLOAD}, protobuf-encoded by hand (fields 1 and 2)."""
    msg = bytes([0x0A, PAYLOAD]) + b"\0" * PAYLOAD + bytes([0x10, PAYLOAD])
    path = os.path.join(cwd, "work_request.bin")
    with open(path, "wb") as f:
        f.write(b"\0" + struct.pack(">I", len(msg)) + msg)
    return path


def proc_cpu(pid):
    """User + system CPU seconds of a process (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def sleeps(pid):
    """Times a process (all its threads) gave up its CPU to wait."""
    n = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{t}/status") as f:
            n += sum(int(l.split()[1]) for l in f if l.startswith("voluntary_ctxt_switches"))
    return n


def cpu_over_middle(cmd, env, cwd, secs, skip=2.0, tail=1.0, ok=(0,), watch=None):
    """Runs cmd (pinned to CPU 0) for about secs seconds and returns
    (CPU seconds, wall seconds) over [skip, secs - tail] of its run, and
    its stdout; an exit code outside `ok` stops the benchmark. With
    `watch` (a pid), also returns that process's CPU seconds and the
    command's sleeps over the same span: (cpu, span, out, watched, sleeps)."""
    p = subprocess.Popen(common.pinned(cmd, 0), cwd=cwd, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    time.sleep(skip)
    c0, t0 = proc_cpu(p.pid), time.time()
    w0, s0 = (proc_cpu(watch), sleeps(p.pid)) if watch else (0, 0)
    time.sleep(max(0.5, secs - skip - tail))
    c1, t1 = proc_cpu(p.pid), time.time()
    w1, s1 = (proc_cpu(watch), sleeps(p.pid)) if watch else (0, 0)
    out, err = p.communicate()
    if p.returncode not in ok:
        raise SystemExit(f"{cmd[0]} failed ({p.returncode}):\n{out[-1500:]}{err[-1500:]}")
    if watch:
        return c1 - c0, t1 - t0, out, w1 - w0, s1 - s0
    return c1 - c0, t1 - t0, out


def h2load_paced(h2load, body, env, cwd, rate, secs):
    cmd = [h2load, "-c", str(CONNECTIONS), "-m", str(IN_FLIGHT // CONNECTIONS), "-t", "1", "-D", str(secs),
           "--rps", str(max(1, round(rate / CONNECTIONS))), "-d", body,
           "-H", "content-type: application/grpc", "-H", "te: trailers", URL]
    cpu, span, out = cpu_over_middle(cmd, env, cwd, secs)
    achieved = h2load_rate(out)
    return cpu / (achieved * span) * 1e6, achieved, cpu / span


def h2load_rate(out):
    rate = re.search(r"finished in [\d.]+s, ([\d.]+) req/s", out)
    codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out)
    done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed", out)
    if not (rate and codes and done) or int(done.group(3)) > 0 or int(codes.group(4)) + int(codes.group(3)) > 0:
        raise SystemExit("h2load did not run cleanly:\n" + out[-2000:])
    return float(rate.group(1))


CLOSED_SECS = 6


def closed_figures(cpu, span, rate, server_cpu, slept):
    """A closed-loop run's figures over its measured span: its rate, the
    client's CPU-us and sleeps per request, the server's busy share."""
    done = rate * span
    return {"rate": rate, "cpu_us": cpu / done * 1e6, "sleeps": slept / done, "server": server_cpu / span}


def h2load_closed(h2load, body, env, cwd, server):
    cmd = [h2load, "-c", str(CONNECTIONS), "-m", str(IN_FLIGHT // CONNECTIONS), "-t", "1",
           "-D", str(CLOSED_SECS), "-d", body, "-H", "content-type: application/grpc", "-H", "te: trailers", URL]
    cpu, span, out, srv, slept = cpu_over_middle(cmd, env, cwd, CLOSED_SECS, watch=server)
    return closed_figures(cpu, span, h2load_rate(out), srv, slept)


def rackbench_closed(binary, env, cwd, server):
    """The closed-loop peak: the search's warm-up (1 s) and peak probe
    alone, measured over the peak probe's middle."""
    cmd = calibrate_cmd(binary, ["--peak-only", "--peak-secs", str(CLOSED_SECS - 1), "--warmup-secs", "1",
                                 "--peak-concurrency", str(IN_FLIGHT)])
    # Exit code 1: the host checks marked the run (its figures stand).
    cpu, span, out, srv, slept = cpu_over_middle(cmd, env, cwd, CLOSED_SECS + 0.3, ok=(0, 1), watch=server)
    return closed_figures(cpu, span, common.report(out)["metrics"]["peak_qps"], srv, slept)


WAKE_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <time.h>
/* One timerfd armed at absolute times every PERIOD ns, slept on in
   epoll_wait, for SECS seconds: what one precise wake-up costs. */
int main(int argc, char **argv) {
    long long period = atoll(argv[1]);
    double secs = atof(argv[2]);
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET};
    if (fd < 0 || ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) return 1;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    long long at = t.tv_sec * 1000000000LL + t.tv_nsec, end = at + (long long)(secs * 1e9), n = 0;
    while (at < end) {
        at += period;
        struct itimerspec s = {0};
        s.it_value.tv_sec = at / 1000000000LL;
        s.it_value.tv_nsec = at % 1000000000LL;
        timerfd_settime(fd, TFD_TIMER_ABSTIME, &s, NULL);
        struct epoll_event out;
        epoll_wait(ep, &out, 1, -1);
        n++;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    printf("%.3f\n", cpu / n * 1e6);
    return 0;
}
"""


ECHO_C = r"""
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
/* The host's own tail: 64 bytes over loopback at their own times
   (clock_nanosleep to each due time, blocking send and recv), echoed by a
   thread on CPU 1 while the sender runs on CPU 0. Prints p99 from the
   due time and p99 of the round trip alone, ms. */
static int lfd;
static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    sched_setaffinity(0, sizeof s, &s);
}
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
static void *echo(void *arg) {
    (void)arg;
    pin(1);
    int c = accept(lfd, NULL, NULL), one = 1;
    char b[64];
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    while (recv(c, b, sizeof b, MSG_WAITALL) == (ssize_t)sizeof b) send(c, b, sizeof b, 0);
    return NULL;
}
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
int main(int argc, char **argv) {
    double rate = atof(argv[1]), secs = atof(argv[2]);
    long n = (long)(rate * secs);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    int one = 1;
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (n < 100 || lfd < 0 || bind(lfd, (void *)&sa, sizeof sa) || listen(lfd, 1) ||
        getsockname(lfd, (void *)&sa, &len))
        return 1;
    pthread_t t;
    pthread_create(&t, NULL, echo, NULL);
    pin(0);
    int c = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(c, (void *)&sa, sizeof sa)) return 1;
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    double *late = malloc(n * sizeof *late), *rtt = malloc(n * sizeof *rtt), t0 = now() + 0.1;
    char b[64] = {0};
    for (long i = 0; i < n; i++) {
        double due = t0 + i / rate, wait = due - now();
        if (wait > 0) {
            struct timespec ts = {(time_t)wait, (long)((wait - (time_t)wait) * 1e9)};
            clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
        }
        double sent = now();
        if (send(c, b, sizeof b, 0) != (ssize_t)sizeof b || recv(c, b, sizeof b, MSG_WAITALL) != (ssize_t)sizeof b)
            return 1;
        double done = now();
        late[i] = done - due;
        rtt[i] = done - sent;
    }
    qsort(late, n, sizeof *late, cmp);
    qsort(rtt, n, sizeof *rtt, cmp);
    printf("%.3f %.3f\n", late[n * 99 / 100] * 1e3, rtt[n * 99 / 100] * 1e3);
    return 0;
}
"""


def c_program(cwd, name, source, flags=()):
    """`source` built once with the system's C compiler into cwd/name: its
    path, or None without a compiler or when it does not build."""
    exe = os.path.join(cwd, name)
    if not os.path.exists(exe):
        cc = shutil.which("cc") or shutil.which("gcc")
        if not cc:
            return None
        src = exe + ".c"
        with open(src, "w") as f:
            f.write(source)
        if subprocess.run([cc, "-O2", *flags, "-o", exe, src], capture_output=True).returncode != 0:
            return None
    return exe


def host_tail(cwd, rate, secs=5.0):
    """The host's own p99 at `rate` (a C sender and echo over loopback,
    pinned as the clients and server are): (p99 from the due time, p99 of
    the round trip alone) in ms, or None without a C compiler. When the
    first is far above the second, the host wakes its timers late."""
    exe = c_program(cwd, "echo_floor", ECHO_C, ["-pthread"])
    if not exe:
        return None
    out = subprocess.run([exe, str(rate), str(secs)], capture_output=True, text=True)
    return tuple(float(v) for v in out.stdout.split()) if out.returncode == 0 else None


def wake_cost(cwd, rate, secs=3.0):
    """CPU-us of one bare timer wake-up at the rate's spacing on CPU 0 (a
    C loop: timerfd, epoll_wait, nothing else), or None without a C
    compiler. Constant arrivals cost at least one per request, and the
    reply usually a second (it comes back while the client sleeps)."""
    exe = c_program(cwd, "wake_floor", WAKE_C)
    if not exe:
        return None
    out = subprocess.run(common.pinned([exe, str(int(1e9 / rate)), str(secs)], 0), capture_output=True, text=True)
    return float(out.stdout) if out.returncode == 0 else None


def calibrate_cmd(binary, extra):
    return [binary, "calibrate", "--server", "127.0.0.1:50051", "--workers", "0", "--service-time-ms", "0",
            "--client-threads", "1", "--connections", str(CONNECTIONS), "--payload-bytes", str(PAYLOAD),
            "--target", TARGET, "--arrival", "constant"] + extra


def rackbench_paced(binary, env, cwd, rate, secs, arrival="constant"):
    # One fixed rate: a 1 s warm-up at the rate, then secs - 1 measured.
    cmd = calibrate_cmd(binary, ["--fixed-qps", str(rate), "--probe-secs", str(secs - 1)])
    cmd[cmd.index("--arrival") + 1] = arrival
    # Exit code 1 is a rate that missed the latency target: measured all
    # the same (its report says so), and its CPU counts as any other.
    cpu, span, out = cpu_over_middle(cmd, env, cwd, secs + 0.4, ok=(0, 1))
    p = common.report(out)["metrics"]["probes"][-1]
    achieved = p["achieved_qps"]
    if p["scheduled"] and p["total_queries"] < 0.98 * p["scheduled"]:
        print(f"  (rackbench completed {p['total_queries']} of {p['scheduled']} scheduled at {rate}/s)")
    return cpu / (achieved * span) * 1e6, achieved, cpu / span


def search(binary, env, cwd, secs):
    """The search's result, its closed-loop peak and its probes."""
    cmd = calibrate_cmd(binary, ["--probe-secs", str(secs), "--final-secs", str(secs * 2), "--peak-secs", str(secs),
                                 "--warmup-secs", "2", "--peak-concurrency", str(IN_FLIGHT)])
    out = subprocess.run(common.pinned(cmd, 0), cwd=cwd, env=env, capture_output=True, text=True)
    r = common.report(out.stdout)
    m = r["metrics"]
    rate = m["final_requested_qps"] if r["success"] else 0.0
    return rate, m["peak_qps"], m["probes"], m.get("marks", [])


def fixed_rates(binary, env, cwd, secs, rates):
    cmd = calibrate_cmd(binary, ["--fixed-qps", ",".join(f"{q:.0f}" for q in rates), "--probe-secs", str(secs)])
    out = subprocess.run(common.pinned(cmd, 0), cwd=cwd, env=env, capture_output=True, text=True)
    probes = common.report(out.stdout)["metrics"]["probes"]
    return [(p["requested_qps"], p["passed"], p["target_value_ms"], p.get("from_send_ms")) for p in probes
            if p["phase"] == "fixed"]


def sweep(binary, env, cwd, secs, rates):
    """The sweep, judged as the search judges: a rate that failed only
    because its requests left late (from_send_ms: the client's host
    stalled) runs once more, and the repeat stands."""
    rows = fixed_rates(binary, env, cwd, secs, rates)
    late = [q for q, ok, _, fs in rows if not ok and fs is not None]
    if late:
        again = {q: r for q, *r in fixed_rates(binary, env, cwd, secs, late)}
        print(f"  (sweep: {len(late)} rates whose requests left late ran again)")
        rows = [(q, *again[q]) if q in again else (q, ok, v, fs) for q, ok, v, fs in rows]
    return rows


def search_vs_sweep(binary, env, cwd, secs, label):
    tail = host_tail(cwd, 5000)
    if tail:
        print(f"{label}: the host's own tail at 5000/s (C sender and echo over loopback): p99 {tail[0]:.2f} ms"
              f" from the due time, round trip alone {tail[1]:.2f} ms", flush=True)
    rate, peak, probes, marks = search(binary, env, cwd, secs)
    steps = ", ".join(f"{p['phase']} {p['requested_qps']:.0f} {'pass' if p['passed'] else 'FAIL'}"
                      for p in probes if p["requested_qps"] > 0)
    print(f"{label}: search {rate:.0f}/s (closed-loop peak {peak:.0f}/s; {steps})", flush=True)
    for m in marks:
        print(f"{label}:   marked: {m}")
    if rate <= 0:
        return None, peak
    grid = [rate * (0.6 + 0.05 * i) for i in range(21)]
    # The final's length (search() gives finals twice the probes'): the
    # criterion the reported rate met.
    rows = sweep(binary, env, cwd, secs * 2, grid)
    passing = [q for q, ok, _, _ in rows if ok]
    best = max(passing) if passing else 0.0
    print(f"{label}: sweep " + ", ".join(f"{q:.0f} {'ok' if ok else 'FAIL'} ({v:.2f} ms)" for q, ok, v, _ in rows))
    dist = abs(rate / best - 1) * 100 if best > 0 else float("inf")
    print(f"{label}: highest passing fixed rate {best:.0f}/s; search/sweep {rate / best if best else 0:.3f}"
          f" ({dist:.1f}% apart)", flush=True)
    return dist, peak


def hog_start():
    code = "while True:\n    pass\n"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(os.cpu_count() or 2)]


def hog_stop(hogs):
    for h in hogs:
        h.kill()
        h.wait()


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--secs", type=int, default=10, help="length of each paced run")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the summary is their median")
    ap.add_argument("--rates", default="2000,5000,20000")
    ap.add_argument("--binary", help="rackbench binary to measure (default: build this tree's release binary)")
    ap.add_argument("--search-secs", type=int, default=5, help="probe length of the search (its finals and the sweep's rates run twice as long)")
    ap.add_argument("--no-search", action="store_true", help="skip part 3 (search against the sweep)")
    ap.add_argument("--no-closed", action="store_true", help="skip part 2 (closed loop)")
    ap.add_argument("--before", help="an earlier rackbench binary, also run constant-paced in each round of part 1")
    a = ap.parse_args()
    h2load = shutil.which("h2load")
    if not h2load:
        sys.exit("h2load not found: install Debian's nghttp2-client (apt-get install nghttp2-client)")
    # The clients run in a scratch directory: a relative path is made absolute.
    binary = os.path.abspath(a.binary) if a.binary else common.build()
    before = os.path.abspath(a.before) if a.before else None
    cwd, env = common.scratch()
    body = work_request_file(cwd)
    rates = [int(r) for r in a.rates.split(",")]
    print(f"machine load average at the start: {loadavg()} ({os.cpu_count()} CPUs)", flush=True)
    server = common.start_server(env, cwd, ["--workers", "0", "--service-time-ms", "0"], cpu=1, binary=binary)
    ratios = {r: [] for r in rates}
    tick_ratios = {r: [] for r in rates}
    per_tool = {r: ([], [], []) for r in rates}
    before_ratios = {r: [] for r in rates}
    wakes = {r: [] for r in rates}
    closed = []
    closed_cpu = []
    servers = []
    dists = {}
    try:
        # Idle: a trickle, in percent of a core.
        _, _, h_idle = h2load_paced(h2load, body, env, cwd, 10, a.secs)
        _, _, r_idle = rackbench_paced(binary, env, cwd, 10, a.secs)
        print(f"idle (10 req/s): h2load {h_idle * 100:.2f}% of a core, rackbench {r_idle * 100:.2f}%", flush=True)
        for n in range(1, a.rounds + 1):
            for r in rates:
                # h2load --rps sends each connection's due requests every
                # 10 ms (its timer's floor); `burst:N` gives rackbench the
                # same shape (N = rate / 100 every 10 ms), constant spacing
                # one request at a time.
                burst = f"burst:{max(1, r // 100)}"
                runs = [("h2load", lambda: h2load_paced(h2load, body, env, cwd, r, a.secs)),
                        ("rackbench", lambda: rackbench_paced(binary, env, cwd, r, a.secs)),
                        ("ticks", lambda: rackbench_paced(binary, env, cwd, r, a.secs, burst))]
                if a.before:
                    runs.append(("before", lambda: rackbench_paced(before, env, cwd, r, a.secs)))
                if n % 2 == 0:
                    runs.reverse()
                got = {name: f() for name, f in runs}
                wake = wake_cost(cwd, r)
                if wake is not None:
                    wakes[r].append(wake)
                (h, ha, _), (k, ka, _), (t, ta, _) = got["h2load"], got["rackbench"], got["ticks"]
                ratios[r].append(k / h)
                tick_ratios[r].append(t / h)
                per_tool[r][0].append(h)
                per_tool[r][1].append(k)
                per_tool[r][2].append(t)
                if a.before:
                    b, ba, _ = got["before"]
                    before_ratios[r].append(b / h)
                    print(f"round {n}: {r}/s: the --before binary, constant: {b:.1f} CPU-us/request (achieved"
                          f" {ba:.0f}/s); ratio {b / h:.2f}", flush=True)
                print(f"round {n}: {r}/s: h2load {h:.1f} CPU-us/request (achieved {ha:.0f}/s), rackbench constant"
                      f" {k:.1f} (achieved {ka:.0f}/s), rackbench {burst} {t:.1f} (achieved {ta:.0f}/s);"
                      f" ratios {k / h:.2f} and {t / h:.2f}; a bare timer wake-up"
                      f" {'n/a' if wake is None else f'{wake:.1f}'} CPU-us (load {loadavg()})", flush=True)
            if a.no_closed:
                continue
            h_first = h2load_closed(h2load, body, env, cwd, server.pid)
            r = rackbench_closed(binary, env, cwd, server.pid)
            h_last = h2load_closed(h2load, body, env, cwd, server.pid)
            ref = {k: (h_first[k] + h_last[k]) / 2 for k in h_first}
            closed.append(r["rate"] / ref["rate"])
            closed_cpu.append(r["cpu_us"] / ref["cpu_us"])
            servers.extend(x["server"] for x in (h_first, r, h_last))

            def fig(x):
                return (f"{x['rate']:.0f}/s ({x['cpu_us']:.1f} CPU-us and {x['sleeps']:.2f} sleeps per request,"
                        f" server {x['server'] * 100:.0f}% busy)")
            print(f"round {n}: closed loop ({IN_FLIGHT} in flight): h2load {fig(h_first)} and {fig(h_last)};"
                  f" rackbench {fig(r)}; peak ratio {closed[-1]:.2f}, client CPU per request ratio"
                  f" {closed_cpu[-1]:.2f}", flush=True)
        if not a.no_search:
            dists["quiet"], _ = search_vs_sweep(binary, env, cwd, a.search_secs, "quiet")
            hogs = hog_start()
            try:
                dists["hog"], _ = search_vs_sweep(binary, env, cwd, a.search_secs, "with a CPU hog")
            finally:
                hog_stop(hogs)
    finally:
        common.stop(server)
    for r in rates:
        h, k, t = per_tool[r]
        print(f"{r}/s (median of {a.rounds} rounds): h2load {statistics.median(h):.1f} CPU-us/request,"
              f" rackbench constant {statistics.median(k):.1f}, ratio {statistics.median(ratios[r]):.2f}"
              f" (rounds: {', '.join(f'{x:.2f}' for x in ratios[r])}); rackbench in h2load's 10 ms ticks"
              f" {statistics.median(t):.1f}, ratio {statistics.median(tick_ratios[r]):.2f}"
              f" (rounds: {', '.join(f'{x:.2f}' for x in tick_ratios[r])})")
    for r in rates:
        if wakes[r]:
            w, h, t = statistics.median(wakes[r]), statistics.median(per_tool[r][0]), statistics.median(per_tool[r][2])
            # Constant arrivals: the request's work (as in ticks, where
            # wake-ups are shared) plus two wake-ups of their own.
            print(f"{r}/s: a bare timer wake-up costs {w:.1f} CPU-us here; each request at its own time would cost about"
                  f" the tick shape's {t:.1f} + 2 x {w:.1f} = {t + 2 * w:.1f} CPU-us per request,"
                  f" {(t + 2 * w) / h:.2f}x h2load's {h:.1f} (median of {len(wakes[r])})")
    if a.before:
        for r in rates:
            print(f"{r}/s: the --before binary, constant, against h2load: median"
                  f" {statistics.median(before_ratios[r]):.2f} (rounds: {', '.join(f'{x:.2f}' for x in before_ratios[r])})")
    print(f"machine load average at the end: {loadavg()}")

    def k(r):
        return f"{r // 1000}k" if r % 1000 == 0 else str(r)

    cpu = ", ".join(f"{k(r)} {statistics.median(ratios[r]):.2f}" for r in rates)
    ticks = ", ".join(f"{k(r)} {statistics.median(tick_ratios[r]):.2f}" for r in rates)
    print(f"in h2load's own 10 ms ticks (rackbench --arrival burst:rate/100): client CPU per request vs h2load"
          f" at {ticks}")
    if closed:
        # With the one-threaded server busy all the time, the peak is the
        # server's rate under each client's traffic, not the client's limit.
        print(f"closed loop ({IN_FLIGHT} in flight, median of {len(closed)} rounds): peak vs h2load"
              f" {statistics.median(closed):.2f} (rounds: {', '.join(f'{x:.2f}' for x in closed)}); client CPU per"
              f" request vs h2load {statistics.median(closed_cpu):.2f} (rounds:"
              f" {', '.join(f'{x:.2f}' for x in closed_cpu)}); the server was {min(servers) * 100:.0f}-"
              f"{max(servers) * 100:.0f}% busy"
              + (" (server-bound: the peak is the server's rate)" if min(servers) >= 0.95 else ""))
    known = [d for d in dists.values() if d is not None]
    within = f"{max(known):.1f}" if known and len(known) == len(dists) else "n/a"
    closed_text = f"{statistics.median(closed):.2f}" if closed else "n/a"
    print(f"loadgen: client CPU per request vs h2load at {cpu}; closed/h2load {closed_text};"
          f" search within {within}% of the fixed-rate sweep")


if __name__ == "__main__":
    main()
