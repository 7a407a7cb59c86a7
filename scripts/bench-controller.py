#!/usr/bin/env python3
"""Helper of scripts/bench-controller (standard library only): talks to the API server of the
running scripts/testenv with its admin token.

  bench-controller.py run   --state DIR --case scaleout|antiaffinity --pods N --timeout S
      creates namespace `bench` and the case's Deployment, watches its pods until all N are bound
      (spec.nodeName set), then prints one JSON object: total seconds from the Deployment's
      creation to the last pod seen bound (local clock, ms), p50/p99 of the per-pod bind latency
      (metadata.creationTimestamp -> PodScheduled lastTransitionTime: API timestamps, 1 s
      resolution), NodeClaims and Nodes at that moment, and the pods still unbound on timeout.
  bench-controller.py sections --pid PID
      prints how much of each ELF section of the process's executable is resident (from
      /proc/PID/pagemap's present bits and `readelf -SW`): which parts of the binary the
      file-backed RSS is.
  bench-controller.py report FILE...
      prints the side-by-side table of result files (one JSON object per side and case).
"""
import argparse
import json
import math
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone

NAMESPACE = "bench"
LABEL = "app=bench"


class Api:
    def __init__(self, state):
        self.base = "https://127.0.0.1:%s" % open(os.path.join(state, "ports/apiserver")).read().strip()
        self.token = open(os.path.join(state, "admin.token")).read().strip()
        self.ctx = ssl.create_default_context(cafile=os.path.join(state, "pki/ca.crt"))

    def request(self, method, path, body=None, timeout=30):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", "Bearer " + self.token)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        return urllib.request.urlopen(req, context=self.ctx, timeout=timeout)

    def get(self, path, attempts=4):
        """GET (idempotent): a read that times out while the API server is saturated (upstream's
        controller with 500 nodes on 2 cores kept one waiting over 30 s) is asked again."""
        for attempt in range(attempts):
            try:
                with self.request("GET", path, timeout=60) as r:
                    return json.load(r)
            except (TimeoutError, urllib.error.URLError) as e:
                if isinstance(e, urllib.error.HTTPError) or attempt == attempts - 1:
                    raise
                print("bench-controller: GET %s: %s; asking again" % (path, e), file=sys.stderr)

    def post(self, path, body):
        try:
            with self.request("POST", path, body) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:
            if e.code == 409:
                return None
            raise SystemExit("POST %s: HTTP %d %s" % (path, e.code, e.read().decode()[:500]))

    def count(self, path):
        """Items of a list, paged; None if the resource does not exist."""
        n, cont = 0, ""
        while True:
            try:
                page = self.get(path + "?limit=500" + ("&continue=" + cont if cont else ""))
            except urllib.error.HTTPError as e:
                if e.code == 404:
                    return None
                raise
            n += len(page.get("items", []))
            cont = page.get("metadata", {}).get("continue")
            if not cont:
                return n


def deployments(case, pods):
    """The case's Deployments. perf: upstream's performance suite (test/suites/performance,
    basic_test.go): half the pods 900m / 3100Mi, half 3500m / 28Gi."""
    if case != "perf":
        return [deployment(case, pods)]
    out = []
    for size, share, cpu, memory in (("small", pods // 2, "900m", "3100Mi"),
                                      ("large", pods - pods // 2, "3500m", "28Gi")):
        d = deployment(case, share)
        d["metadata"]["name"] = "bench-perf-" + size
        labels = {"app": "bench", "size": size}
        d["spec"]["selector"] = {"matchLabels": labels}
        d["spec"]["template"]["metadata"]["labels"] = labels
        d["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = {
            "cpu": cpu, "memory": memory}
        out.append(d)
    return out


def deployment(case, pods):
    # scaleout: upstream's basic scale-out shape (one Deployment, mid-size requests) with
    # 1 vCPU / 1536Mi per pod; antiaffinity: 500m / 512Mi, required hostname anti-affinity
    # (a node each).
    labels = {"app": "bench"}
    if case in ("scaleout", "consolidation", "drift", "perf"):
        requests = {"cpu": "1", "memory": "1536Mi"}
        affinity = None
    else:
        requests = {"cpu": "500m", "memory": "512Mi"}
        affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": labels}, "topologyKey": "kubernetes.io/hostname"}]}}
    spec = {
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": requests}}],
    }
    if affinity:
        spec["affinity"] = affinity
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "bench-" + case, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "replicas": pods,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }


def ts(s):
    return datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


def percentile(values, p):
    if not values:
        return None
    v = sorted(values)
    return v[max(0, math.ceil(p / 100 * len(v)) - 1)]


def scheduled_at(pod):
    for c in pod.get("status", {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "True":
            return c.get("lastTransitionTime")
    return None


def cmd_run(args):
    api = Api(args.state)
    api.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": NAMESPACE}})
    deadline = time.time() + args.timeout
    # Wait for the default ServiceAccount of the namespace (pods are refused without it).
    while True:
        try:
            api.get("/api/v1/namespaces/%s/serviceaccounts/default" % NAMESPACE)
            break
        except urllib.error.HTTPError:
            if time.time() > deadline:
                raise SystemExit("no default ServiceAccount in namespace %s" % NAMESPACE)
            time.sleep(0.2)

    pods = {}      # name -> latest object
    bound = {}     # name -> local time first seen bound
    started = time.time()
    for d in deployments(args.case, args.pods):
        created = api.post("/apis/apps/v1/namespaces/%s/deployments" % NAMESPACE, d)
        if created is None:
            raise SystemExit("Deployment already exists: run on a fresh testenv")
    last_progress = time.time()
    rv = None
    while len(bound) < args.pods and time.time() < deadline:
        if rv is None:
            lst = api.get("/api/v1/namespaces/%s/pods?labelSelector=%s" % (NAMESPACE, LABEL))
            rv = lst["metadata"]["resourceVersion"]
            events = [("ADDED", p) for p in lst["items"]]
        else:
            events = []
        for kind, pod in events:
            handle(pods, bound, kind, pod)
        if len(bound) >= args.pods:
            break
        left = max(1, int(deadline - time.time()))
        path = ("/api/v1/namespaces/%s/pods?watch=1&allowWatchBookmarks=true&labelSelector=%s"
                "&resourceVersion=%s&timeoutSeconds=%d" % (NAMESPACE, LABEL, rv, min(left, 300)))
        try:
            with api.request("GET", path, timeout=min(left, 300) + 10) as r:
                for line in r:
                    ev = json.loads(line)
                    if ev["type"] == "ERROR":
                        rv = None  # e.g. 410 Gone: relist
                        break
                    rv = ev["object"]["metadata"].get("resourceVersion", rv)
                    if ev["type"] != "BOOKMARK":
                        before = len(bound)
                        handle(pods, bound, ev["type"], ev["object"])
                        if len(bound) != before:
                            last_progress = time.time()
                    if len(bound) >= args.pods or time.time() > deadline:
                        break
        except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
            print("bench-controller.py: watch ended (%s), resuming" % e, file=sys.stderr)
    done = time.time()
    # The final objects: PodScheduled times are set by the scheduler's bind.
    lst = api.get("/api/v1/namespaces/%s/pods?labelSelector=%s" % (NAMESPACE, LABEL))
    latencies = []
    unbound = []
    for pod in lst["items"]:
        at = scheduled_at(pod)
        if pod["spec"].get("nodeName") and at:
            latencies.append(ts(at) - ts(pod["metadata"]["creationTimestamp"]))
        else:
            unbound.append(pod["metadata"]["name"])
    complete = len(bound) >= args.pods
    result = {
        "case": args.case,
        "pods": args.pods,
        "complete": complete,
        "bound": len(latencies),
        "seconds_to_all_bound": round(bound_max(bound) - started, 3) if complete else None,
        "seconds_waited": round(done - started, 3),
        "seconds_since_last_bind": round(done - last_progress, 3),
        "bind_latency_p50_s": percentile(latencies, 50),
        "bind_latency_p99_s": percentile(latencies, 99),
        "bind_latency_max_s": max(latencies) if latencies else None,
        "nodeclaims": api.count("/apis/karpenter.sh/v1/nodeclaims"),
        "nodes": api.count("/api/v1/nodes"),
        "unbound_sample": unbound[:5],
    }
    if args.prices:
        claims = api.get("/apis/karpenter.sh/v1/nodeclaims")["items"]
        result["cost_per_hour"] = cluster_cost(claims, price_table(args.side, args.prices))
    json.dump(result, sys.stdout)
    print()


def bound_max(bound):
    return max(bound.values())


def handle(pods, bound, kind, pod):
    name = pod["metadata"]["name"]
    if kind == "DELETED":
        pods.pop(name, None)
        return
    pods[name] = pod
    if pod["spec"].get("nodeName") and name not in bound:
        bound[name] = time.time()


def price_table(side, path):
    """(instance type, capacity type, zone) -> USD/hour, from the catalog the side ran on: the
    embedded EC2 catalog (JSON lines; on-demand list price, spot at the kwok cloud's default 60%
    discount, karpenter-cloud DEFAULT_SPOT_DISCOUNT), or upstream's KWOK instance_types.json
    offerings (a JSON array)."""
    table = {}
    with open(path) as fh:
        upstream_format = fh.read(64).lstrip().startswith("[")
    if not upstream_format:
        with open(path) as fh:
            next(fh)  # the header record
            for line in fh:
                it = json.loads(line)
                od = it.get("price")
                if od is None:
                    continue
                table[(it["name"], "on-demand", None)] = od
                table[(it["name"], "spot", None)] = round(od * (1 - 0.6), 6)
    else:
        for it in json.load(open(path)):
            for o in it.get("offerings", []):
                req = {r["key"]: r["values"][0] for r in o.get("Requirements", [])}
                table[(it["name"], req.get("karpenter.sh/capacity-type"),
                       req.get("topology.kubernetes.io/zone"))] = o["Price"]
    return table


def cluster_cost(claims, prices):
    total = 0.0
    for c in claims:
        labels = c["metadata"].get("labels", {})
        key = (labels.get("node.kubernetes.io/instance-type"), labels.get("karpenter.sh/capacity-type"))
        price = prices.get(key + (labels.get("topology.kubernetes.io/zone"),), prices.get(key + (None,)))
        if price is None:
            raise SystemExit("no price for %s" % (key,))
        total += price
    return round(total, 4)


def scrape(port, metric, label):
    """Sum of a metric's samples whose labels contain `label`, from /metrics on `port`."""
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        text = r.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(metric) and label in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def cmd_disrupt(args):
    """After `run`: the disruption step of a case, measured until the cluster is steady."""
    api = Api(args.state)
    prices = price_table(args.side, args.prices)
    claims = api.get("/apis/karpenter.sh/v1/nodeclaims")["items"]
    before = {c["metadata"]["name"] for c in claims}
    cost_before = cluster_cost(claims, prices)
    evictions_before = scrape(args.metrics_port, "karpenter_pods_eviction_requests_total", 'code="200"')
    merge = {"Content-Type": "application/merge-patch+json"}
    pods = args.pods
    started = time.time()
    if args.case == "consolidation":
        pods = args.scale_to
        patch(api, "/apis/apps/v1/namespaces/%s/deployments/bench-%s" % (NAMESPACE, args.case),
              {"spec": {"replicas": pods}}, merge)
        patch(api, "/apis/karpenter.sh/v1/nodepools/default",
              {"spec": {"disruption": {"consolidateAfter": "0s"}}}, merge)
    elif args.case == "perf":
        # Upstream's suite: both Deployments to 70% (350 + 350 of 1,000); the NodePool already
        # consolidates after 30s with a 100% budget.
        pods = 0
        for d in deployments("perf", args.pods):
            replicas = d["spec"]["replicas"] * 7 // 10
            pods += replicas
            patch(api, "/apis/apps/v1/namespaces/%s/deployments/%s" % (NAMESPACE, d["metadata"]["name"]),
                  {"spec": {"replicas": replicas}}, merge)
    else:
        patch(api, "/apis/karpenter.sh/v1/nodepools/default",
              {"spec": {"template": {"metadata": {"labels": {"bench-rev": "2"}}}}}, merge)
    deadline = started + args.timeout
    last_change, last_names, steady = time.time(), None, False
    while time.time() < deadline:
        claims = api.get("/apis/karpenter.sh/v1/nodeclaims")["items"]
        names = {c["metadata"]["name"] for c in claims}
        nodes = api.get("/api/v1/nodes")["items"]
        tainted = any(t.get("key") == "karpenter.sh/disrupted"
                      for n in nodes for t in (n.get("spec", {}).get("taints") or []))
        deleting = any(c["metadata"].get("deletionTimestamp") for c in claims)
        lst = api.get("/api/v1/namespaces/%s/pods?labelSelector=%s" % (NAMESPACE, LABEL))["items"]
        live = [p for p in lst if not p["metadata"].get("deletionTimestamp")]
        running = sum(1 for p in live if p["spec"].get("nodeName")
                      and p.get("status", {}).get("phase") == "Running")
        done = running == pods and len(live) == pods and not tainted and not deleting
        if args.case == "drift":
            done = done and not (names & before)
        if names != last_names or not done:
            last_names, last_change = names, time.time()
        elif time.time() - last_change >= args.quiet:
            steady = True
            break
        time.sleep(2)
    claims = api.get("/apis/karpenter.sh/v1/nodeclaims")["items"]
    result = {
        "case": args.case,
        "pods": args.pods,
        "pods_after": pods,
        "complete": steady,
        "seconds_to_steady": round(last_change - started, 1) if steady else None,
        "seconds_waited": round(time.time() - started, 1),
        "nodes_before": len(before),
        "nodes_after": len(claims),
        "nodes_replaced": len(before - {c["metadata"]["name"] for c in claims}),
        "cost_per_hour_before": cost_before,
        "cost_per_hour_after": cluster_cost(claims, prices),
        "evictions": int(scrape(args.metrics_port, "karpenter_pods_eviction_requests_total",
                                'code="200"') - evictions_before),
        "pods_evicted": pods_evicted(api, started),
    }
    json.dump(result, sys.stdout)
    print()


def pods_evicted(api, since):
    """Distinct pods of the workload evicted since `since` (epoch seconds): the pods of the
    `Evicted` events both controllers record on each pod they evict. The eviction metric counts
    requests, and a request repeated for a pod already terminating is answered 200 too."""
    events = api.get("/api/v1/namespaces/%s/events?fieldSelector=reason%%3DEvicted" % NAMESPACE)["items"]
    uids = set()
    for e in events:
        obj = e.get("involvedObject", {})
        at = e.get("lastTimestamp") or e.get("eventTime") or e["metadata"]["creationTimestamp"]
        if obj.get("kind") == "Pod" and ts(at[:19] + "Z") >= int(since):
            uids.add(obj.get("uid"))
    return len(uids)


def patch(api, path, body, headers):
    data = json.dumps(body).encode()
    req = urllib.request.Request(api.base + path, data=data, method="PATCH")
    req.add_header("Authorization", "Bearer " + api.token)
    for k, v in headers.items():
        req.add_header(k, v)
    with urllib.request.urlopen(req, context=api.ctx, timeout=30) as r:
        return json.load(r)


ROWS = [
    ("pods bound", lambda r: "%s/%s" % (r.get("bound"), r.get("pods"))),
    ("time to all bound (s)", lambda r: fmt(r.get("seconds_to_all_bound"), 1)
     if r.get("complete") else "not all (%.0f s)" % r.get("seconds_waited", 0)),
    ("bind latency p50 (s)", lambda r: fmt(r.get("bind_latency_p50_s"), 0)),
    ("bind latency p99 (s)", lambda r: fmt(r.get("bind_latency_p99_s"), 0)),
    ("NodeClaims", lambda r: fmt(r.get("nodeclaims"), 0)),
    ("cost per hour once all are bound ($)", lambda r: fmt(r.get("cost_per_hour"), 2)
     if "cost_per_hour" in r else None),
    ("nodes", lambda r: fmt(r.get("nodes"), 0)),
    ("time to steady after the change (s)", lambda r: fmt(r.get("seconds_to_steady"), 1)
     if "seconds_to_steady" in r else None),
    ("nodes before -> after", lambda r: "%s -> %s" % (r["nodes_before"], r["nodes_after"])
     if "nodes_before" in r else None),
    ("cost per hour before -> after ($)", lambda r: "%.2f -> %.2f" % (
        r["cost_per_hour_before"], r["cost_per_hour_after"]) if "cost_per_hour_before" in r else None),
    ("evictions (requests answered 200)", lambda r: fmt(r.get("evictions"), 0) if "evictions" in r else None),
    ("pods evicted (distinct, from Evicted events)", lambda r: fmt(r.get("pods_evicted"), 0)
     if "pods_evicted" in r else None),
    ("controller peak RSS (MiB)", lambda r: fmt(r["vmhwm_kib"] / 1024, 1) if r.get("vmhwm_kib") else "-"),
    ("controller CPU (s)", lambda r: fmt(r.get("cpu_seconds"), 2)),
]


def fmt(v, digits):
    if v is None:
        return "-"
    return ("%." + str(digits) + "f") % v


def cmd_report(args):
    results = []
    for f in args.files:
        with open(f) as fh:
            results.append(json.load(fh))
    if args.json:
        json.dump(results, sys.stdout, indent=2)
        print()
        return
    cases = []
    for r in results:
        if r["case"] not in cases:
            cases.append(r["case"])
    for case in cases:
        cols = [r for r in results if r["case"] == case]
        pods = cols[0].get("pods")
        print("%s (%s pods)" % (case, pods))
        header = ["metric"] + [r["side"] for r in cols]
        rows = [(name, get) for name, get in ROWS
                if any("error" not in r and get(r) is not None for r in cols)]
        table = [[name] + [(get(r) or "-") if "error" not in r else "failed" for r in cols]
                 for name, get in rows]
        if len(cols) == 2 and all("error" not in r for r in cols):
            header.append("ours/upstream")
            for row, (name, _) in zip(table, rows):
                row.append(ratio(cols, name))
        widths = [max(len(x[i]) for x in [header] + table) for i in range(len(header))]
        print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |")
        print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        for row in table:
            print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |")
        for r in cols:
            if "error" in r:
                print("  %s: %s" % (r["side"], r["error"]))
        print()


def ratio(cols, name):
    key = {"time to all bound (s)": "seconds_to_all_bound", "controller peak RSS (MiB)": "vmhwm_kib",
           "controller CPU (s)": "cpu_seconds",
           "time to steady after the change (s)": "seconds_to_steady"}.get(name)
    if key is None:
        return ""
    a, b = cols[0].get(key), cols[1].get(key)
    if cols[0]["side"] != "ours":
        a, b = b, a
    if not a or not b:
        return "-"
    return "%.2f" % (a / b)


def cmd_sections(args):
    import re
    import struct
    import subprocess
    exe = os.readlink(f"/proc/{args.pid}/exe")
    try:
        headers = subprocess.run(["readelf", "-SW", exe], capture_output=True, text=True,
                                 check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"no section breakdown: readelf -SW {exe}: {e}")
        return
    sections = []  # (file offset, end, name) of sections loaded at an address
    for line in headers.splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)", line)
        if m and int(m.group(2), 16):
            offset, size = int(m.group(3), 16), int(m.group(4), 16)
            sections.append((offset, offset + size, m.group(1)))
    resident, total = {}, {}
    page = os.sysconf("SC_PAGE_SIZE")
    with open(f"/proc/{args.pid}/pagemap", "rb") as pagemap, open(f"/proc/{args.pid}/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) < 6 or fields[5] != exe:
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            map_offset = int(fields[2], 16)
            for addr in range(start, end, page):
                pagemap.seek(addr // page * 8)
                (entry,) = struct.unpack("<Q", pagemap.read(8))
                offset = addr - start + map_offset
                name = next((n for s, e, n in sections if s <= offset < e), "(between sections)")
                total[name] = total.get(name, 0) + page
                if entry >> 63:
                    resident[name] = resident.get(name, 0) + page
    print(f"resident / size (MiB) of each section of {exe}")
    for name in sorted(total, key=lambda n: -resident.get(n, 0)):
        if resident.get(name):
            print("%7.2f / %7.2f  %s" % (resident[name] / 2**20, total[name] / 2**20, name))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--state", required=True)
    r.add_argument("--case", choices=["scaleout", "antiaffinity", "consolidation", "drift", "perf"],
                   required=True)
    r.add_argument("--pods", type=int, required=True)
    r.add_argument("--timeout", type=float, default=900)
    r.add_argument("--side", choices=["ours", "upstream"])
    r.add_argument("--prices", help="the catalog to price the NodeClaims from (with --side)")
    r.set_defaults(fn=cmd_run)
    d = sub.add_parser("disrupt")
    d.add_argument("--state", required=True)
    d.add_argument("--case", choices=["consolidation", "drift", "perf"], required=True)
    d.add_argument("--side", choices=["ours", "upstream"], required=True)
    d.add_argument("--prices", required=True)
    d.add_argument("--pods", type=int, required=True)
    d.add_argument("--scale-to", type=int, required=True)
    d.add_argument("--metrics-port", type=int, required=True)
    d.add_argument("--quiet", type=float, default=60)
    d.add_argument("--timeout", type=float, default=1800)
    d.set_defaults(fn=cmd_disrupt)
    sec = sub.add_parser("sections")
    sec.add_argument("--pid", type=int, required=True)
    sec.set_defaults(fn=cmd_sections)
    rep = sub.add_parser("report")
    rep.add_argument("--json", action="store_true")
    rep.add_argument("files", nargs="+")
    rep.set_defaults(fn=cmd_report)
    args = p.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
