#!/usr/bin/env python3
"""What TLS costs AdSim on loopback: the light pipeline of the integration
tests (crates/rackbench/tests/adsim.rs), ai-mode request sizes x1, the
server and client jobs' roles with tls=1 and tls=0 alternating in one run.
Per mode: a fixed-rate run (client CPU per request, p50/p99) and a short
max-QPS search (P99 <= 100 ms). Prints TLS/plain ratios."""
import threading, argparse, json, os, re, signal, socket, subprocess, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ap = argparse.ArgumentParser()
ap.add_argument("--bin", default=os.path.join(ROOT, "target/debug/rackbench"))
ap.add_argument("--qps", type=float, default=40)
ap.add_argument("--runtime", type=int, default=15)
ap.add_argument("--rounds", type=int, default=2)
a = ap.parse_args()

src = open(os.path.join(ROOT, "crates/rackbench/tests/adsim.rs")).read()
light = re.search(r'const LIGHT: &str = r#"(.*?)"#;', src, re.S).group(1)
work = tempfile.mkdtemp(prefix="adsim_tls_")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def run(tls, extra, runtime):
    port = free_port()
    cfg = os.path.join(work, "light.json")
    open(cfg, "w").write(light.replace('"port": 0', f'"port": {port}'))
    base = [a.bin, "--no-store", "--output-dir", os.path.join(work, "reports"), "run"]
    srv = subprocess.Popen(base + ["adsim", "-r", "server", "-i", json.dumps(
        {"cfg_file": cfg, "bind": "127.0.0.1", "tls": tls})],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in srv.stderr:
        if "serving on" in line:
            break
    threading.Thread(target=srv.stderr.read, daemon=True).start()
    vars = {"server_ip": "127.0.0.1", "port": str(port), "tls": tls,
            "request_size_multiplier": "1", "num_workers": "8",
            "runtime": str(runtime), "extra_args": extra}
    out = subprocess.run(base + ["adsim_inference_a", "-r", "client", "-i", json.dumps(vars)],
                         capture_output=True, text=True)
    if not out.stdout.strip():
        raise SystemExit(f"client failed: {out.stderr[-2000:]}")
    srv.send_signal(signal.SIGINT)
    sout, _ = srv.communicate(timeout=60)
    assert srv.returncode == 0, srv.returncode
    c = json.loads(out.stdout.strip().splitlines()[-1])["metrics"]
    s = json.loads(sout.strip().splitlines()[-1])["metrics"]
    assert s["tls"] == (tls == "1")
    return c, s


res = {"1": [], "0": []}
for r in range(a.rounds):
    for tls in ("0", "1"):
        c, s = run(tls, f"--qps {a.qps}", a.runtime)
        p = c["search"][-1]
        n = p["total_queries"]
        fixed = dict(cpu_ms=1000 * c["client_cpu_seconds"] / n,
                     srv_cpu_ms=1000 * s["cpu_seconds"] / max(s["requests"], 1),
                     p50=p["latency"]["p50_ms"], p99=p["latency"]["p99_ms"],
                     qps=p["achieved_qps"])
        c, _ = run(tls, "--probe-secs 4 --qps-max 400", 4)
        # The highest probe that met the target (the final run may miss it
        # by noise on a shared machine).
        fixed["max_qps"] = max([x["requested_qps"] for x in c["search"] if x["passed"]] or [0])
        res[tls].append(fixed)
        print(("TLS  " if tls == "1" else "plain"), {k: round(v, 3) for k, v in fixed.items()}, flush=True)

med = lambda xs: sorted(xs)[len(xs) // 2]
for k in ("cpu_ms", "srv_cpu_ms", "p50", "p99", "max_qps"):
    t, p = med([x[k] for x in res["1"]]), med([x[k] for x in res["0"]])
    print(f"{k}: TLS {t:.3f} / plain {p:.3f} = {t / p:.2f}x")
