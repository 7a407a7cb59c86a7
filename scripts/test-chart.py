"""Checks of the rendered chart, for scripts/test-chart (which renders into WORK first).

    python3 scripts/test-chart.py REPO WORK

Reads WORK/{default,fargate,settings,monitor,crds}.yaml (helm template output) and, from the
repository, the controller's settings (their env names and FEATURE_GATES default), the kinds it
watches (WATCHED in cluster/index.rs) and the CRD files. Every failed check is listed, then
the exit code is 1.
"""

import pathlib
import re
import sys

import yaml

REPO = pathlib.Path(sys.argv[1])
WORK = pathlib.Path(sys.argv[2])
CONTROLLER = REPO / "crates/karpenter-controller/src"
FAILURES = []


def check(condition, message):
    if not condition:
        FAILURES.append(message)
    return condition


def render(name):
    docs = [d for d in yaml.safe_load_all((WORK / f"{name}.yaml").read_text()) if d]
    return docs


def kinds(docs):
    return sorted(f"{d['kind']}/{d['metadata']['name']}" for d in docs)


def one(docs, kind, name=None):
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    check(len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}")
    return found[0] if found else {}


def container(docs):
    deployment = one(docs, "Deployment")
    return deployment["spec"]["template"]["spec"]["containers"][0]


def env_of(c):
    """name -> value (the last entry wins, as in a pod); valueFrom entries map to None."""
    out = {}
    for e in c.get("env", []):
        out[e["name"]] = e.get("value")
    return out


# ------------------------------------------------------------------ the controller's side

settings_src = (CONTROLLER / "settings/mod.rs").read_text()
READ_ENV = set(re.findall(r'env = "([A-Z0-9_]+)"', settings_src))
check(len(READ_ENV) > 20, f"found only {len(READ_ENV)} env names in settings/mod.rs")
# Read outside the settings: events.rs (reporting instance).
READ_ENV |= {"POD_NAME"}
# Upstream's AWS-provider settings (pkg/operator/options): rendered as upstream does, read once
# --cloud-provider=aws exists in this controller.
AWS_ENV = {
    "CLUSTER_NAME", "CLUSTER_ENDPOINT", "CLUSTER_CA_BUNDLE", "INTERRUPTION_QUEUE", "ISOLATED_VPC",
    "EKS_CONTROL_PLANE", "VM_MEMORY_OVERHEAD_PERCENT", "ENABLE_ZONAL_SHIFT", "RESERVED_ENIS",
    "DISABLE_DRY_RUN", "AMI_REFRESH_INTERVAL", "SUBNET_REFRESH_INTERVAL",
    "SECURITY_GROUP_REFRESH_INTERVAL", "AWS_FEATURE_GATES",
}
gates_src = (CONTROLLER / "settings/feature_gates.rs").read_text()
DEFAULT_GATES = re.search(r'DEFAULT_FEATURE_GATES: &str = "([^"]+)"', gates_src).group(1)

cache_src = (CONTROLLER / "cluster/index.rs").read_text()
watched_block = re.search(r"pub const WATCHED: \[Kind; \d+\] = \[(.*?)\];", cache_src, re.S).group(1)
WATCHED = re.findall(r"Kind::(\w+)", watched_block)
# Kind -> (API group, resource) for the RBAC check.
RESOURCES = {
    "NodePool": ("karpenter.sh", "nodepools"),
    "NodeClaim": ("karpenter.sh", "nodeclaims"),
    "Node": ("", "nodes"),
    "Pod": ("", "pods"),
    "DaemonSet": ("apps", "daemonsets"),
    "PodDisruptionBudget": ("policy", "poddisruptionbudgets"),
    "PersistentVolumeClaim": ("", "persistentvolumeclaims"),
    "PersistentVolume": ("", "persistentvolumes"),
    "StorageClass": ("storage.k8s.io", "storageclasses"),
    "Namespace": ("", "namespaces"),
    "VolumeAttachment": ("storage.k8s.io", "volumeattachments"),
    "EC2NodeClass": ("karpenter.k8s.aws", "ec2nodeclasses"),
    # Watched with the NodeOverlay gate (ClusterCache::spawn_watchers); granted always, as upstream.
    "NodeOverlay": ("karpenter.sh", "nodeoverlays"),
}


def allowed(rules, group, resource, verb, name=None):
    for r in rules:
        if group not in r.get("apiGroups", []) or resource not in r.get("resources", []):
            continue
        if verb not in r.get("verbs", []):
            continue
        names = r.get("resourceNames")
        if names and name not in names:
            continue
        return True
    return False


# ------------------------------------------------------------------ default values

default = render("default")
expected = sorted([
    "ClusterRole/karpenter", "ClusterRole/karpenter-admin", "ClusterRole/karpenter-core",
    "ClusterRoleBinding/karpenter", "ClusterRoleBinding/karpenter-core",
    "Deployment/karpenter", "PodDisruptionBudget/karpenter", "Role/karpenter", "Role/karpenter-dns",
    "RoleBinding/karpenter", "RoleBinding/karpenter-dns", "Service/karpenter", "ServiceAccount/karpenter",
])
check(kinds(default) == expected, f"default render: objects {kinds(default)}, expected {expected}")
for d in default:
    if d["kind"] not in ("ClusterRole", "ClusterRoleBinding"):
        check(d["metadata"].get("namespace") == "kube-system", f"{d['kind']} not in the release namespace")

chart = yaml.safe_load((REPO / "charts/karpenter/Chart.yaml").read_text())
cargo = (REPO / "Cargo.toml").read_text()
version = re.search(r'\[workspace\.package\][^\[]*?version = "([^"]+)"', cargo, re.S).group(1)
check(chart["version"] == version and chart["appVersion"] == version,
      f"Chart.yaml version/appVersion {chart['version']}/{chart['appVersion']} != workspace {version}")

deploy = one(default, "Deployment")
pod = deploy["spec"]["template"]["spec"]
c = container(default)
env = env_of(c)
check(deploy["spec"]["replicas"] == 2, "replicas default is not 2")
check(deploy["spec"]["revisionHistoryLimit"] == 10, "revisionHistoryLimit default is not 10")
check(deploy["spec"]["strategy"] == {"rollingUpdate": {"maxUnavailable": 1}}, "strategy default")
check(c["image"] == f"ghcr.io/karpenter-rs/karpenter:{version}", f"image {c['image']}")
check(c["args"] == ["--cloud-provider=aws"], f"args {c.get('args')}")
check("command" not in c, "command set: the image's ENTRYPOINT is /karpenter controller")
check(env.get("CLUSTER_NAME") == "my-cluster", f"CLUSTER_NAME {env.get('CLUSTER_NAME')}")
check(env.get("FEATURE_GATES") == DEFAULT_GATES,
      f"FEATURE_GATES {env.get('FEATURE_GATES')!r} != the controller's default {DEFAULT_GATES!r}")
for name, value in {
    "LOG_LEVEL": "info", "METRICS_PORT": "8080", "HEALTH_PROBE_PORT": "8081",
    "BATCH_MAX_DURATION": "10s", "BATCH_IDLE_DURATION": "1s", "PREFERENCE_POLICY": "Respect",
    "MIN_VALUES_POLICY": "Strict", "IGNORE_DRA_REQUESTS": "true", "KARPENTER_SERVICE": "karpenter",
    "AWS_FEATURE_GATES": "NodeClassCEL=false,RebootForRepair=false", "VM_MEMORY_OVERHEAD_PERCENT": "0.075",
    "LEGACY_NODE_REPAIR": "false", "SECURITY_GROUP_REFRESH_INTERVAL": "1m",
}.items():
    check(env.get(name) == value, f"env {name}={env.get(name)!r}, expected {value!r}")
for name in ("LEADER_ELECTION_NAMESPACE", "POD_NAME", "CPU_REQUESTS", "MEMORY_LIMIT"):
    check(name in env and env[name] is None, f"env {name} should come from valueFrom")
for name in ("CLUSTER_ENDPOINT", "INTERRUPTION_QUEUE", "CLUSTER_CA_BUNDLE"):
    check(name not in env, f"env {name} set although its value is empty")
for name in env:
    check(name in READ_ENV or name in AWS_ENV,
          f"env {name}: neither a setting the controller reads (settings/mod.rs) nor a known AWS setting")
ports = {p["name"]: p["containerPort"] for p in c["ports"]}
check(ports == {"http-metrics": 8080, "http": 8081}, f"container ports {ports}")
check(c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}, "livenessProbe")
check(c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}, "readinessProbe")
health_src = (CONTROLLER / "http/health.rs").read_text()
check('"/healthz"' in health_src and '"/readyz"' in health_src, "the controller no longer serves /healthz and /readyz")
sc = c["securityContext"]
check(sc.get("runAsUser") == 65532 and sc.get("runAsNonRoot") and sc.get("readOnlyRootFilesystem")
      and sc.get("allowPrivilegeEscalation") is False, f"container securityContext {sc}")
check(pod["serviceAccountName"] == "karpenter", "serviceAccountName")
check(pod.get("dnsPolicy") == "ClusterFirst", "dnsPolicy default")
check(pod.get("priorityClassName") == "system-cluster-critical", "priorityClassName default")
check(pod.get("nodeSelector") == {"kubernetes.io/os": "linux"}, "nodeSelector default")
check(pod.get("tolerations") == [{"key": "CriticalAddonsOnly", "operator": "Exists"}], "tolerations default")
selector = deploy["spec"]["selector"]["matchLabels"]
anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
check(anti.get("labelSelector") == {"matchLabels": selector}, "podAntiAffinity gets the selector labels")
spread = pod["topologySpreadConstraints"][0]
check(spread.get("labelSelector") == {"matchLabels": selector} and spread["whenUnsatisfiable"] == "DoNotSchedule",
      "topologySpreadConstraints default")
check("hostNetwork" not in pod, "hostNetwork set by default")

sa = one(default, "ServiceAccount")
check(not sa["metadata"].get("annotations"), "ServiceAccount has annotations by default")
svc = one(default, "Service")
check(svc["spec"]["ports"] == [{"name": "http-metrics", "port": 8080, "targetPort": "http-metrics", "protocol": "TCP"}],
      f"Service ports {svc['spec']['ports']}")
check(svc["spec"]["selector"] == selector, "Service selector")
pdb = one(default, "PodDisruptionBudget")
check(pdb["apiVersion"] == "policy/v1" and pdb["spec"]["maxUnavailable"] == 1
      and pdb["spec"]["selector"]["matchLabels"] == selector, f"PodDisruptionBudget {pdb['spec']}")

# RBAC: what the bindings give the ServiceAccount.
subject = {"kind": "ServiceAccount", "name": "karpenter", "namespace": "kube-system"}
cluster_rules = []
for b in (d for d in default if d["kind"] == "ClusterRoleBinding"):
    check(subject in b["subjects"], f"ClusterRoleBinding {b['metadata']['name']} does not bind the ServiceAccount")
    cluster_rules += one(default, "ClusterRole", b["roleRef"]["name"])["rules"]
rb = one(default, "RoleBinding", "karpenter")
check(subject in rb["subjects"], "RoleBinding does not bind the ServiceAccount")
role = one(default, "Role", rb["roleRef"]["name"])
ns_rules = role["rules"]
# kube-system/kube-dns, read at start for the nodes' cluster DNS (controllers/kube_dns.rs).
dns_rb = one(default, "RoleBinding", "karpenter-dns")
check(subject in dns_rb.get("subjects", []), "RoleBinding karpenter-dns does not bind the ServiceAccount")
check(dns_rb.get("metadata", {}).get("namespace") == "kube-system", "RoleBinding karpenter-dns not in kube-system")
dns_role = one(default, "Role", dns_rb.get("roleRef", {}).get("name"))
check(dns_role.get("metadata", {}).get("namespace") == "kube-system", "Role karpenter-dns not in kube-system")
check(allowed(dns_role.get("rules", []), "", "services", "get", "kube-dns"), "RBAC: get kube-system/kube-dns")
check(not allowed(dns_role.get("rules", []), "", "services", "get", "another-service"), "RBAC: get on any Service")
for kind in WATCHED:
    if not check(kind in RESOURCES, f"WATCHED has {kind}: add it to RESOURCES here and to the ClusterRole"):
        continue
    group, resource = RESOURCES[kind]
    for verb in ("list", "watch"):
        check(allowed(cluster_rules, group, resource, verb), f"RBAC: {verb} {group}/{resource} (WATCHED {kind})")
for verb in ("get", "list", "watch"):
    check(allowed(cluster_rules, "karpenter.sh", "nodeoverlays", verb), f"RBAC: {verb} karpenter.sh/nodeoverlays")
for group, resource, verb in [
    ("karpenter.sh", "nodeoverlays/status", "patch"),
    ("karpenter.sh", "nodeclaims", "create"), ("karpenter.sh", "nodeclaims", "patch"),
    ("karpenter.sh", "nodeclaims", "delete"), ("karpenter.sh", "nodeclaims/status", "patch"),
    ("karpenter.sh", "nodepools/status", "patch"), ("karpenter.sh", "nodepools", "patch"), ("", "nodes", "create"), ("", "nodes", "get"),
    ("", "nodes", "patch"), ("", "nodes", "delete"), ("", "pods/eviction", "create"), ("", "pods", "delete"),
    ("events.k8s.io", "events", "create"), ("events.k8s.io", "events", "patch"),
    ("karpenter.k8s.aws", "ec2nodeclasses", "get"), ("karpenter.k8s.aws", "ec2nodeclasses", "list"),
    ("karpenter.k8s.aws", "ec2nodeclasses", "watch"), ("karpenter.k8s.aws", "ec2nodeclasses", "patch"),
    ("karpenter.k8s.aws", "ec2nodeclasses/status", "patch"), ("karpenter.k8s.aws", "ec2nodeclasses/status", "update"),
    ("karpenter.k8s.aws", "ec2nodeclasses/finalizers", "update"),
]:
    check(allowed(cluster_rules, group, resource, verb), f"RBAC: {verb} {group or 'core'}/{resource}")
for verb in ("get", "update"):
    check(allowed(ns_rules, "coordination.k8s.io", "leases", verb, "karpenter-leader-election"), f"RBAC: {verb} lease")
check(allowed(ns_rules, "coordination.k8s.io", "leases", "create"), "RBAC: create lease")
check(not allowed(ns_rules, "coordination.k8s.io", "leases", "update", "another-lease"), "RBAC: update on any lease")
check(not allowed(cluster_rules, "", "pods", "patch"),
      "RBAC: patch on pods without featureGates.podDeletionCostManagement (upstream grants it only with the gate)")
check(not allowed(cluster_rules, "", "secrets", "get") and not allowed(cluster_rules, "*", "*", "*"),
      "RBAC: the controller can read secrets or everything")
for r in cluster_rules + ns_rules:
    check("*" not in r.get("verbs", []) + r.get("resources", []) + r.get("apiGroups", []), f"RBAC wildcard in {r}")

# ------------------------------------------------------------------ seed 004: Fargate, nodeless

fargate = render("fargate")
c = container(fargate)
env = env_of(c)
pod = one(fargate, "Deployment")["spec"]["template"]["spec"]
check(pod.get("dnsPolicy") == "Default", f"fargate: dnsPolicy {pod.get('dnsPolicy')}")
sa = one(fargate, "ServiceAccount")
check(sa["metadata"]["name"] == "karpenter" and sa["metadata"]["namespace"] == "karpenter", "fargate: ServiceAccount karpenter/karpenter")
check(sa["metadata"].get("annotations", {}).get("eks.amazonaws.com/role-arn")
      == "arn:aws:iam::111122223333:role/my-cluster-karpenter-controller", "fargate: IRSA annotation")
check(pod["serviceAccountName"] == "karpenter", "fargate: serviceAccountName")
check(env.get("CLUSTER_NAME") == "my-cluster", "fargate: CLUSTER_NAME")
check(env.get("INTERRUPTION_QUEUE") == "my-cluster-karpenter", "fargate: INTERRUPTION_QUEUE")
check((env.get("CLUSTER_ENDPOINT") or "").startswith("https://"), "fargate: CLUSTER_ENDPOINT")
check(env.get("AWS_REGION") == "eu-north-1", "fargate: controller.env AWS_REGION")
check(c.get("resources", {}).get("requests") == {"cpu": "1", "memory": "1Gi"}, "fargate: resources")
for d in fargate:
    for s in d.get("subjects", []):
        check(s == {"kind": "ServiceAccount", "name": "karpenter", "namespace": "karpenter"},
              f"fargate: {d['kind']} {d['metadata']['name']} binds {s}")
check(one(fargate, "Role", "karpenter")["metadata"]["namespace"] == "karpenter", "fargate: Role namespace")
check(one(fargate, "Role", "karpenter-dns")["metadata"]["namespace"] == "kube-system", "fargate: the kube-dns Role stays in kube-system")

# ------------------------------------------------------------------ settings reach the env

docs = render("settings")
c = container(docs)
env = env_of(c)
check(env.get("CLUSTER_NAME") == "karpenter-cluster", f"tpl in clusterName: {env.get('CLUSTER_NAME')}")
check("SpotToSpotConsolidation=true" in env.get("FEATURE_GATES", ""), "featureGates.spotToSpotConsolidation")
check("PodDeletionCostManagement=true" in env.get("FEATURE_GATES", ""), "featureGates.podDeletionCostManagement")
check(allowed(one(docs, "ClusterRole", "karpenter-core")["rules"], "", "pods", "patch"),
      "RBAC: patch on pods with featureGates.podDeletionCostManagement (controllers/deletion_cost.rs)")
check(env.get("IGNORE_DRA_REQUESTS") == "false", "ignoreDRARequests: false is rendered (upstream drops it)")
check(env.get("BATCH_MAX_DURATION") == "20s", "batchMaxDuration")
check(env.get("LOG_LEVEL") == "error", "controller.env overrides the chart's LOG_LEVEL (last entry wins)")
check(env.get("KWOK_REGISTRATION_DELAY") == "5s", "controller.env passes through")
check(c["args"] == ["--cloud-provider=kwok"], "controller.cloudProvider")
check(c["image"].endswith("@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"), "image digest")
check(one(docs, "Deployment")["spec"]["replicas"] == 1, "replicas")
core = one(docs, "ClusterRole", "karpenter-core")
check(allowed(core["rules"], "", "configmaps", "get"), "additionalClusterRoleRules")

# ------------------------------------------------------------------ ServiceMonitor

docs = render("monitor")
sm = one(docs, "ServiceMonitor")
check(sm.get("spec", {}).get("endpoints", [{}])[0].get("port") == "http-metrics", "ServiceMonitor endpoint port")

# ------------------------------------------------------------------ CRDs

crd_files = sorted(p.name for p in (REPO / "charts/karpenter/crds").glob("*.yaml"))
want = sorted(yaml.safe_load((REPO / "charts/karpenter/crds" / f).read_text())["metadata"]["name"] for f in crd_files)
got = sorted(d["metadata"]["name"] for d in render("crds") if d["kind"] == "CustomResourceDefinition")
check(got == want, f"--include-crds: CRDs {got}, expected {want}")
check(not [d for d in default if d["kind"] == "CustomResourceDefinition"], "CRDs rendered without --include-crds")

if FAILURES:
    for f in FAILURES:
        print(f"test-chart: FAIL: {f}", file=sys.stderr)
    sys.exit(1)
print(f"test-chart: rendered objects checked ({len(WATCHED)} watched kinds covered by RBAC)", file=sys.stderr)
