#!/usr/bin/env python3
"""Loads a large cluster into the API server of a running scripts/testenv (standard library
only), for the live `karpenter explain --no-controller` benchmark (docs/benchmarks.md#explain):
Karpenter's CRDs, NodePool `general` (c/m/r, on-demand, WhenEmptyOrUnderutilized,
consolidateAfter 0s) and its EC2NodeClass, then per node a NodeClaim (launched, registered,
initialized) and its Node (KWOK's: annotated kwok.x-k8s.io/node=fake, so KWOK keeps it Ready and
runs its pods), and pods bound to each node (10 per node, 250m, 50 apps' worth of labels, each
app's pods owned by a ConfigMap of its name), the same shape as scripts/explain-cluster.py writes for `explain -f`.

    scripts/explain-live-cluster.py --state .testenv --nodes 1000 --pods-per-node 10

No controller runs: the objects stay as written.
"""
import argparse
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
import zlib
from concurrent.futures import ThreadPoolExecutor

ZONES = ["us-east-1a", "us-east-1b", "us-east-1c"]
CREATED = "2026-11-01T00:00:00Z"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Api:
    def __init__(self, state):
        self.base = "https://127.0.0.1:%s" % open(os.path.join(state, "ports/apiserver")).read().strip()
        self.token = open(os.path.join(state, "admin.token")).read().strip()
        self.ctx = ssl.create_default_context(cafile=os.path.join(state, "pki/ca.crt"))

    def send(self, method, path, body, content_type="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        for attempt in range(5):
            req = urllib.request.Request(self.base + path, data=data, method=method)
            req.add_header("Authorization", "Bearer " + self.token)
            req.add_header("Content-Type", content_type)
            try:
                with urllib.request.urlopen(req, context=self.ctx, timeout=60) as r:
                    return json.load(r)
            except urllib.error.HTTPError as e:
                if e.code == 409 and method == "POST":
                    return None
                if e.code in (429, 500, 503) and attempt < 4:
                    time.sleep(1 + attempt)
                    continue
                raise SystemExit("%s %s: HTTP %d %s" % (method, path, e.code, e.read().decode()[:500]))


def apply_crds(api):
    crds = os.path.join(REPO, "charts/karpenter/crds")
    for file in sorted(os.listdir(crds)):
        group, plural = file[: -len(".yaml")].split("_", 1)
        with open(os.path.join(crds, file), "rb") as f:
            api.send("PATCH", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/%s.%s"
                     "?fieldManager=explain-bench&force=true" % (plural, group), f.read(),
                     "application/apply-patch+yaml")
    time.sleep(3)  # the new resources are served a moment after the CRDs are stored


def labels(name, pool, zone):
    return {
        "karpenter.sh/nodepool": pool,
        "karpenter.sh/capacity-type": "on-demand",
        "karpenter.sh/initialized": "true",
        "karpenter.sh/registered": "true",
        "node.kubernetes.io/instance-type": "m5.2xlarge",
        "topology.kubernetes.io/zone": zone,
        "topology.kubernetes.io/region": "us-east-1",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "kubernetes.io/hostname": name,
        "karpenter.k8s.aws/ec2nodeclass": "default",
    }


def owners(api):
    """One owner per app: a ConfigMap, so that the pods have a controller owner that exists (the
    API server's garbage collector deletes pods whose owner does not) and that does nothing (a
    ReplicaSet would create or delete pods to reach its replicas)."""
    uids = {}
    for i in range(50):
        app = "app%02d" % i
        made = api.send("POST", "/api/v1/namespaces/apps/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": app}})
        uids[app] = made["metadata"]["uid"]
    return uids


def node_pair(api, n, pool, pods_per_node, uids):
    name = "%s-%05d" % (pool, n)
    zone = ZONES[n % 3]
    provider = "aws:///%s/i-%012x" % (zone, zlib.crc32(name.encode()))
    resources = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    api.send("POST", "/apis/karpenter.sh/v1/nodeclaims", {
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": labels(name, pool, zone)},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [
                {"key": "karpenter.sh/nodepool", "operator": "In", "values": [pool]},
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.2xlarge"]},
            ],
        },
    })
    api.send("PATCH", "/apis/karpenter.sh/v1/nodeclaims/%s/status" % name, {"status": {
        "providerID": provider, "nodeName": name, "capacity": resources, "allocatable": resources,
        "lastPodEventTime": CREATED,
        "conditions": [{"type": t, "status": "True", "reason": t, "message": "",
                        "lastTransitionTime": CREATED} for t in ["Launched", "Registered", "Initialized"]],
    }}, "application/merge-patch+json")
    api.send("POST", "/api/v1/nodes", {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels(name, pool, zone),
                     "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "spec": {"providerID": provider},
        "status": {"capacity": resources, "allocatable": resources},
    })
    for p in range(pods_per_node):
        app = "app%02d" % (p % 50)
        api.send("POST", "/api/v1/namespaces/apps/pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "%s-%05d%03d" % (app, n, p), "labels": {"app": app},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
                                              "name": app, "uid": uids[app], "controller": True}]},
            "spec": {"nodeName": name, "containers": [{"name": "app", "image": "app", "resources": {
                "requests": {"cpu": "250m", "memory": "256Mi"}}}]},
        })


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", required=True, help="scripts/testenv's state directory")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods-per-node", type=int, default=10)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    api = Api(args.state)
    started = time.time()
    apply_crds(api)
    api.send("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                              "metadata": {"name": "apps"}})
    api.send("POST", "/apis/karpenter.k8s.aws/v1/ec2nodeclasses", {
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
        "spec": {"role": "KarpenterNodeRole", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                 "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}],
                 "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}]},
    })
    api.send("POST", "/apis/karpenter.sh/v1/nodepools", {
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "general"},
        "spec": {
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [
                    {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                ]}},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"},
        },
    })
    uids = owners(api)
    with ThreadPoolExecutor(args.threads) as pool:
        for done, _ in enumerate(pool.map(lambda n: node_pair(api, n, "general", args.pods_per_node, uids),
                                          range(args.nodes)), 1):
            if done % 100 == 0:
                print("explain-live-cluster: %d nodes (%.0f s)" % (done, time.time() - started), file=sys.stderr)
    print("explain-live-cluster: %d nodes, %d pods in %.0f s" % (
        args.nodes, args.nodes * args.pods_per_node, time.time() - started), file=sys.stderr)


if __name__ == "__main__":
    main()
