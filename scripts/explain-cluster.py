#!/usr/bin/env python3
"""Writes a cluster as `kubectl get -o yaml` would export it, for `karpenter explain -f`:
NodeClaims and their Nodes (launched, registered, initialized, Ready), with pods bound to them.

    scripts/explain-cluster.py --nodes 1000 --pods-per-node 10 > cluster.yaml

Used for the explain benchmark (docs/benchmarks.md) and to write test fixtures' node pairs.
The NodePool (`--pool`) and its EC2NodeClass are not written: give them in another file.
"""
import argparse
import sys
import zlib

ZONES = ["us-east-1a", "us-east-1b", "us-east-1c"]


def node_pair(out, name, pool, instance_type, zone, cpu, memory, created, labels_extra=None):
    labels = {
        "karpenter.sh/nodepool": pool,
        "karpenter.sh/capacity-type": "on-demand",
        "karpenter.sh/initialized": "true",
        "karpenter.sh/registered": "true",
        "node.kubernetes.io/instance-type": instance_type,
        "topology.kubernetes.io/zone": zone,
        "topology.kubernetes.io/region": "us-east-1",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "kubernetes.io/hostname": name,
        "karpenter.k8s.aws/ec2nodeclass": "default",
    }
    labels.update(labels_extra or {})
    label_text = "".join(f"\n    {k}: \"{v}\"" for k, v in sorted(labels.items()))
    resources = f"{{cpu: \"{cpu}\", memory: \"{memory}\", pods: \"110\"}}"
    conditions = "".join(
        f"\n  - {{type: {t}, status: \"True\", reason: {t}, message: \"\", lastTransitionTime: \"{created}\"}}"
        for t in ["Launched", "Registered", "Initialized"]
    )
    out.write(f"""---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: {name}
  creationTimestamp: "{created}"
  labels:{label_text}
spec:
  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
  requirements:
  - {{key: karpenter.sh/nodepool, operator: In, values: [{pool}]}}
  - {{key: node.kubernetes.io/instance-type, operator: In, values: [{instance_type}]}}
status:
  providerID: aws:///{zone}/i-{zlib.crc32(name.encode()):012x}
  nodeName: {name}
  capacity: {resources}
  allocatable: {resources}
  lastPodEventTime: "{created}"
  conditions:{conditions}
---
apiVersion: v1
kind: Node
metadata:
  name: {name}
  creationTimestamp: "{created}"
  labels:{label_text}
spec:
  providerID: aws:///{zone}/i-{zlib.crc32(name.encode()):012x}
status:
  capacity: {resources}
  allocatable: {resources}
  conditions:
  - {{type: Ready, status: "True", reason: KubeletReady, message: "", lastTransitionTime: "{created}"}}
""")


def pod(out, namespace, name, node, cpu, labels=None, annotations=None):
    labels = labels or {}
    annotations = annotations or {}
    meta = "".join(f"\n    {k}: \"{v}\"" for k, v in sorted(labels.items()))
    ann = "".join(f"\n    {k}: \"{v}\"" for k, v in sorted(annotations.items()))
    out.write(f"""---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: {namespace}
  labels:{meta or " {}"}
  annotations:{ann or " {}"}
  ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: {name.rsplit('-', 1)[0]}, uid: rs-{name.rsplit('-', 1)[0]}, controller: true}}]
spec:
  nodeName: {node}
  containers: [{{name: app, image: app, resources: {{requests: {{cpu: "{cpu}", memory: 256Mi}}}}}}]
status:
  phase: Running
  conditions: [{{type: PodScheduled, status: "True"}}]
""")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods-per-node", type=int, default=10)
    parser.add_argument("--pool", default="general")
    parser.add_argument("--instance-type", default="m5.2xlarge")
    parser.add_argument("--cpu", default="8")
    parser.add_argument("--memory", default="32Gi")
    parser.add_argument("--pod-cpu", default="250m")
    parser.add_argument("--created", default="2026-11-01T00:00:00Z")
    args = parser.parse_args()
    out = sys.stdout
    for n in range(args.nodes):
        name = f"{args.pool}-{n:05d}"
        node_pair(out, name, args.pool, args.instance_type, ZONES[n % 3], args.cpu, args.memory, args.created)
        for p in range(args.pods_per_node):
            pod(out, "apps", f"app{p % 50:02d}-{n:05d}{p:03d}", name, args.pod_cpu, {"app": f"app{p % 50:02d}"})


if __name__ == "__main__":
    main()
