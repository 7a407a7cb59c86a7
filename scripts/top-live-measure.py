#!/usr/bin/env python3
"""Runs `karpenter top` (interactive, in a detached tmux of 160x40) against the cluster of a running
scripts/testenv loaded by scripts/explain-live-cluster.py for SECONDS while one node's label changes
every second; prints top's CPU seconds, peak and current RSS, and the API server's LIST requests
(of nodes, pods, nodeclaims, nodepools, events) made meanwhile (docs/tools.md#karpenter-top).

    TESTENV_STATE_DIR=/tmp/top-bench-env scripts/testenv up
    scripts/explain-live-cluster.py --state /tmp/top-bench-env/kube --nodes 1000 --pods-per-node 10
    scripts/top-live-measure.py /tmp/top-bench-env/kube target/release/karpenter 60

Needs tmux. A WATCH request is counted by the API server when it ends, so watches held open
do not show in the count."""
import json, os, re, ssl, subprocess, sys, time, urllib.request
state, binary, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3])
base = "https://127.0.0.1:%s" % open(state + "/ports/apiserver").read().strip()
token = open(state + "/admin.token").read().strip()
ctx = ssl.create_default_context(cafile=state + "/pki/ca.crt")
def req(method, path, body=None, ct="application/merge-patch+json"):
    r = urllib.request.Request(base + path, data=body and json.dumps(body).encode(), method=method)
    r.add_header("Authorization", "Bearer " + token)
    if body: r.add_header("Content-Type", ct)
    with urllib.request.urlopen(r, context=ctx, timeout=60) as resp:
        return resp.read().decode()
def requests():
    counts = {}
    for line in req("GET", "/metrics").splitlines():
        if not line.startswith("apiserver_request_total{"): continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
        if labels.get("verb") in ("LIST", "WATCH") and labels.get("resource") in ("nodes", "pods", "nodeclaims", "nodepools", "events"):
            k = labels["verb"]
            counts[k] = counts.get(k, 0) + float(line.rsplit(" ", 1)[1])
    return counts
sock = "/tmp/top-measure.tmux"
subprocess.run(["tmux", "-S", sock, "kill-server"], stderr=subprocess.DEVNULL)
subprocess.run(["tmux", "-S", sock, "new-session", "-d", "-s", "m", "-x", "160", "-y", "40",
                "%s top --kubeconfig %s/kubeconfig --no-controller --pricing catalog --interval 2; sleep 600" % (binary, state)], check=True)
start = time.time()
while True:
    screen = subprocess.run(["tmux", "-S", sock, "capture-pane", "-p", "-t", "m"], capture_output=True, text=True).stdout
    if "general-00" in screen and ("watching" in screen or "listed" in screen): break
    if time.time() - start > 120: sys.exit("top did not show the cluster:\n" + screen)
    time.sleep(0.2)
first_screen = time.time() - start
pid = subprocess.run(["pgrep", "-f", "^%s top" % binary], capture_output=True, text=True).stdout.split()[0]
tick = os.sysconf("SC_CLK_TCK")
def cpu():
    f = open("/proc/%s/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / tick
before_req, before_cpu, t0 = requests(), cpu(), time.time()
i = 0
while time.time() - t0 < seconds:
    req("PATCH", "/api/v1/nodes/general-%05d" % (i % 1000), {"metadata": {"labels": {"top-measure": str(i)}}})
    i += 1
    time.sleep(1)
used, after_req = cpu() - before_cpu, requests()
elapsed = time.time() - t0
hwm = [l for l in open("/proc/%s/status" % pid) if l.startswith(("VmHWM", "VmRSS"))]
screen = subprocess.run(["tmux", "-S", sock, "capture-pane", "-p", "-t", "m"], capture_output=True, text=True).stdout
subprocess.run(["tmux", "-S", sock, "kill-server"])
print(json.dumps({"binary": binary, "first_screen_s": round(first_screen, 1), "seconds": round(elapsed),
                  "cpu_s": used, "cpu_pct": round(100 * used / elapsed, 1), "patches": i,
                  "requests": {k: after_req.get(k, 0) - before_req.get(k, 0) for k in after_req},
                  "mem": [h.split()[1] + " kB " + h.split()[0] for h in hwm]}))
print(screen.splitlines()[-1])
