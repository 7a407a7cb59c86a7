#!/usr/bin/env python3
"""Start moto's ThreadedMotoServer on 127.0.0.1 for karpenter-rs integration tests.

What this adds on top of a plain `moto_server`:

* binds 127.0.0.1 on a free port (port 0 lets the kernel choose, no race) and
  writes the endpoint into a JSON state file once the server is seeded;
* seeds the SSM parameters the controller reads for AMI aliases
  (/aws/service/eks/optimized-ami/..., /aws/service/bottlerocket/...,
  /aws/service/ami-windows-latest/...) and matching EC2 images;
* seeds an administrator IAM user with a fixed access key, so that clients
  work the same with IAM enforcement on or off;
* re-seeds after every `POST /moto-api/reset`.

MOTO INTERNALS: moto refuses PutParameter under /aws/service/ (AWS reserves
that prefix) and generates random access keys, so the seeding writes straight
into moto's in-memory backends (`ssm_backends[...]._parameters`,
`ec2_backends[...].amis`, `iam_backends[...].access_keys`) and wraps
`MotoAPIBackend.reset`. These are not public moto APIs: the moto version is
pinned in requirements.txt and the seeding is checked by the integration
tests, so a moto upgrade that moves them fails loudly.

Faults (`install_faults`): `POST /testenv/faults` with a JSON body
`{"access_key_id": K, "rate": 0.2, "seed": 7, "services": ["ec2"],
"kinds": ["throttle", "unavailable", "timeout"], "timeout_seconds": 5}` makes that rate
of the requests signed with access key K to those services fail, chosen by a random
generator seeded with `seed` (so a run repeats): `throttle` answers 503
RequestLimitExceeded, `unavailable` 500 InternalError, `timeout` answers nothing for
`timeout_seconds` and then 500 (a client with a shorter attempt timeout gives up first),
`lost` carries the request out and answers 500 instead of its result (a launch whose
answer never arrived: the instance exists, the client does not know it).
Other keys are untouched, so tests sharing the server do not see the faults. `GET
/testenv/faults?access_key_id=K` returns what the key's requests met: per action, the
requests and the faults injected. `DELETE` clears a key.

Placement groups (`install_placement_groups`): moto has no placement groups; the
launcher adds CreatePlacementGroup, DescribePlacementGroups and DeletePlacementGroup, and
gives instances launched by CreateFleet the Placement of their launch template (group,
partition, tenancy). See the function's docstring and testenv/README.md.

Capacity reservations (`install_capacity_reservations`): moto has none; the launcher adds
CreateCapacityReservation, DescribeCapacityReservations and CancelCapacityReservation, and
launches (CreateFleet, RunInstances) whose launch template targets a reservation take a slot
of it or fail with `ReservationCapacityExceeded` when it is full; TerminateInstances gives
the slot back. See the function's docstring and docs/testing.md.

Instance status checks (`install_instance_status`): `POST /testenv/instance-status` makes
DescribeInstanceStatus report an instance impaired or with scheduled events, and its status
and event filters work. ARC zonal shift (`install_arc_zonal_shift`): GetManagedResource,
StartZonalShift, ListZonalShifts and CancelZonalShift for EKS clusters of moto's EKS backend,
under IAM enforcement. See the functions' docstrings and testenv/README.md.

IAM enforcement uses moto's own switch: `settings.INITIAL_NO_AUTH_ACTION_COUNT`
(0 = every request is authenticated and authorized, inf = none). It is set
from --iam-enforcement at start and can be flipped at run time with
`POST /moto-api/reset-auth` and a body of `0` (on) or `inf` (off).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import io
import json
import os
import signal
import sys
import threading

DEFAULT_K8S_VERSIONS = [f"1.{minor}" for minor in range(29, 38)]
DEFAULT_REGIONS = ["us-west-2", "us-east-1"]

# The admin identity every helper client uses. Not a secret: it only opens a
# moto server on loopback.
ADMIN_USER = "testenv-admin"
ADMIN_ACCESS_KEY_ID = "AKIAKARPENTERTESTENV"
ADMIN_SECRET_ACCESS_KEY = "karpenter-testenv-admin-secret-key-000000"

# Release names used for the pinned (non-"latest") parameters we also seed.
AL_RELEASE = "v20260101"
BOTTLEROCKET_RELEASE = "1.40.0"
AMAZON_OWNER_ID = "602401143452"
CREATION_DATE = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)


def ami_catalog(k8s: str) -> list[dict[str, str]]:
    """The SSM parameters (and the image each one points at) for one Kubernetes minor."""
    out: list[dict[str, str]] = []

    def add(param: str, name: str, arch: str, platform: str = "") -> None:
        out.append({"param": param, "name": name, "arch": arch, "platform": platform})

    eks = f"/aws/service/eks/optimized-ami/{k8s}"
    # Amazon Linux 2023: x86_64 {standard, nvidia, neuron}, arm64 {standard, nvidia}.
    for arch, variants in (("x86_64", ("standard", "nvidia", "neuron")), ("arm64", ("standard", "nvidia"))):
        for variant in variants:
            name = f"amazon-eks-node-al2023-{arch}-{variant}-{k8s}-{AL_RELEASE}"
            base = f"{eks}/amazon-linux-2023/{arch}/{variant}"
            add(f"{base}/recommended/image_id", name, arch)
            add(f"{base}/{name}/image_id", name, arch)
    # Amazon Linux 2: published up to 1.32 only (Karpenter rejects the alias from 1.33 on).
    if int(k8s.split(".")[1]) <= 32:
        for suffix, prefix, arch in (
            ("", "amazon-eks-node", "x86_64"),
            ("-arm64", "amazon-eks-arm64-node", "arm64"),
            ("-gpu", "amazon-eks-gpu-node", "x86_64"),
        ):
            name = f"{prefix}-{k8s}-{AL_RELEASE}"
            add(f"{eks}/amazon-linux-2{suffix}/recommended/image_id", name, arch)
            add(f"{eks}/amazon-linux-2{suffix}/{name}/image_id", name, arch)
    # Bottlerocket: standard and nvidia, both architectures; "latest" and a pinned release.
    for flavour in ("", "-nvidia"):
        for arch in ("x86_64", "arm64"):
            name = f"bottlerocket-aws-k8s-{k8s}{flavour}-{arch}-v{BOTTLEROCKET_RELEASE}"
            base = f"/aws/service/bottlerocket/aws-k8s-{k8s}{flavour}/{arch}"
            add(f"{base}/latest/image_id", name, arch)
            add(f"{base}/{BOTTLEROCKET_RELEASE}/image_id", name, arch)
    # Windows: only "latest" exists.
    for year in ("2019", "2022", "2025"):
        name = f"Windows_Server-{year}-English-Core-EKS_Optimized-{k8s}-2026.01.01"
        add(
            f"/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{k8s}/image_id",
            name,
            "x86_64",
            "windows",
        )
    return out


def image_id(region: str, name: str) -> str:
    """Deterministic AMI id per (region, image name), so tests can predict it."""
    return "ami-0" + hashlib.sha256(f"{region}/{name}".encode()).hexdigest()[:16]


def seed(account_id: str, regions: list[str], k8s_versions: list[str]) -> dict[str, int]:
    """Write the admin user, AMIs and SSM parameters into moto's backends (moto internals)."""
    from moto.ec2.models import ec2_backends
    from moto.ec2.models.amis import Ami
    from moto.iam.models import iam_backends
    from moto.ssm.models import Parameter, ssm_backends

    iam = iam_backends[account_id]["aws"]
    if ADMIN_USER not in iam.users:
        iam.create_user(regions[0], ADMIN_USER)
        key = iam.create_access_key(ADMIN_USER)
        iam.access_keys.pop(key.physical_resource_id, None)
        key.access_key_id = ADMIN_ACCESS_KEY_ID
        key.secret_access_key = ADMIN_SECRET_ACCESS_KEY
        iam.access_keys[ADMIN_ACCESS_KEY_ID] = key
        policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
        iam.put_user_policy(ADMIN_USER, "administrator", json.dumps(policy))

    params = images = 0
    for region in regions:
        ec2 = ec2_backends[account_id][region]
        ssm = ssm_backends[account_id][region]
        for k8s in k8s_versions:
            for entry in ami_catalog(k8s):
                ami = image_id(region, entry["name"])
                if ami not in ec2.amis:
                    ec2.amis[ami] = Ami(
                        ec2,
                        ami_id=ami,
                        name=entry["name"],
                        description=f"EKS optimized image {entry['name']} (seeded by karpenter-testenv)",
                        owner_id=AMAZON_OWNER_ID,
                        owner_alias="amazon",
                        public=True,
                        virtualization_type="hvm",
                        architecture=entry["arch"],
                        platform=entry["platform"] or None,
                        root_device_type="ebs",
                        root_device_name="/dev/xvda",
                        creation_date=CREATION_DATE,
                        region_name=region,
                    )
                    images += 1
                name = entry["param"]
                if not ssm._parameters[name]:
                    ssm._parameters[name].append(
                        Parameter(
                            account_id=account_id,
                            name=name,
                            value=ami,
                            parameter_type="String",
                            description=None,
                            allowed_pattern=None,
                            keyid=None,
                            last_modified_date=CREATION_DATE,
                            version=1,
                            data_type="aws:ec2:image",
                        )
                    )
                    params += 1
    return {"parameters": params, "images": images}


def install_reset_hook(account_id: str, regions: list[str], k8s_versions: list[str]) -> None:
    """Re-seed after every POST /moto-api/reset (moto internals)."""
    from moto.moto_api._internal.models import MotoAPIBackend

    original = MotoAPIBackend.reset

    def reset_and_seed(self):  # type: ignore[no-untyped-def]
        original(self)
        for state in TESTENV_STATE.values():
            state.clear()
        seed(account_id, regions, k8s_versions)

    MotoAPIBackend.reset = reset_and_seed  # type: ignore[method-assign]


def sign_what_was_sent() -> None:
    """Check SigV4 signatures against the body the client sent (moto internals).

    moto 5.2.5 recomputes a request's signature from its *parsed* parameters when the raw body
    is not at hand, and gets two cases wrong under IAM enforcement, for every caller:

    * a GET of a REST-JSON API with a path parameter (eks:DescribeCluster is
      GET /clusters/<name>) is signed over an empty body, but moto hashed the parsed
      parameters (SignatureDoesNotMatch);
    * a form POST (EC2, IAM, SQS query protocol) arrives with its body consumed; moto
      re-encoded the form with `urlencode`, which writes a space as `+`, as botocore does,
      while aws-sdk-rust (and the other SDKs) write `%20`: any value with a space
      (`Linux/UNIX (Amazon VPC)`, a description) failed with AuthFailure.

    The check now accepts the signature of any encoding a client may have sent: the raw body
    when there is one, none for GET/HEAD/DELETE, else the form as RFC 3986 (`%20`) or as
    `urlencode` (`+`) writes it, in the order it was sent.
    """
    from urllib.parse import quote, quote_plus, urlencode

    from botocore.awsrequest import AWSRequest
    from moto.iam.access_control import IAMRequestBase

    def bodies(self):  # type: ignore[no-untyped-def]
        if self._body:
            return [self._body]
        if self._method in ("GET", "HEAD", "DELETE") or not isinstance(self._data, dict):
            return [b""]
        return [
            urlencode(self._data, doseq=True, quote_via=via, safe="-_.~").encode()
            for via in (quote, quote_plus)
        ]

    def signature_of(self, body):  # type: ignore[no-untyped-def]
        signed_headers = self._get_string_between(
            "SignedHeaders=", ",", self._headers["Authorization"]
        ).split(";")
        headers = self._create_headers_for_aws_request(signed_headers, self._headers)
        request = AWSRequest(method=self._method, url=self._path, data=body, headers=headers)
        request.context["timestamp"] = headers["X-Amz-Date"]
        auth = self._create_auth(self._access_key.create_credentials())
        canonical_request = auth.canonical_request(request)
        string_to_sign = auth.string_to_sign(request, canonical_request)
        return auth.signature(string_to_sign, request)

    original_check = IAMRequestBase.check_signature

    def check_signature(self):  # type: ignore[no-untyped-def]
        sent = self._get_string_between("Signature=", ",", self._headers["Authorization"])
        if any(signature_of(self, body) == sent for body in bodies(self)):
            return
        original_check(self)

    IAMRequestBase.check_signature = check_signature  # type: ignore[method-assign]


class Faults:
    """Seeded request failures per access key (see the module docstring)."""

    KINDS = ("throttle", "unavailable", "timeout", "lost")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_key: dict[str, dict] = {}

    def configure(self, body: dict) -> None:
        import random

        key = body["access_key_id"]
        kinds = body.get("kinds") or list(self.KINDS)
        unknown = [k for k in kinds if k not in self.KINDS]
        if unknown:
            raise ValueError(f"unknown fault kinds {unknown}; known: {list(self.KINDS)}")
        rate = float(body.get("rate", 0.0))
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"rate {rate} is not between 0 and 1")
        with self.lock:
            self.by_key[key] = {
                "rate": rate,
                "services": set(body.get("services") or []),
                "kinds": kinds,
                "timeout_seconds": float(body.get("timeout_seconds", 5)),
                "rng": random.Random(int(body.get("seed", 0))),
                "counts": {},
            }

    def clear(self, key: str) -> None:
        with self.lock:
            self.by_key.pop(key, None)

    def report(self, key: str) -> dict:
        with self.lock:
            entry = self.by_key.get(key)
            return {"counts": dict(entry["counts"]) if entry else {}}

    def decide(self, key: str, service: str, action: str):
        """The fault for this request (a kind) or None; counts it either way."""
        with self.lock:
            entry = self.by_key.get(key)
            if entry is None:
                return None, 0.0
            counts = entry["counts"].setdefault(f"{service}:{action}", {"requests": 0, "faults": {}})
            counts["requests"] += 1
            if entry["services"] and service not in entry["services"]:
                return None, 0.0
            if entry["rng"].random() >= entry["rate"]:
                return None, 0.0
            kind = entry["rng"].choice(entry["kinds"])
            counts["faults"][kind] = counts["faults"].get(kind, 0) + 1
            return kind, entry["timeout_seconds"]


def install_faults() -> Faults:
    """Wraps moto's WSGI dispatcher: `/testenv/faults` configures, other requests may fail."""
    import io
    import re
    import time
    import uuid
    from urllib.parse import parse_qs

    from moto.server import DomainDispatcherApplication

    faults = Faults()
    original = DomainDispatcherApplication.__call__
    credential = re.compile(r"Credential=([^/]+)/[^/]+/[^/]+/([^/]+)/")

    def respond(start_response, status: str, body: bytes, content_type: str):
        start_response(status, [("Content-Type", content_type), ("Content-Length", str(len(body)))])
        return [body]

    def error(start_response, status: str, code: str, message: str):
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error></Errors>"
            f"<RequestID>{uuid.uuid4()}</RequestID></Response>"
        ).encode()
        return respond(start_response, status, body, "text/xml")

    def call(self, environ, start_response):  # type: ignore[no-untyped-def]
        path = environ.get("PATH_INFO", "")
        if path == "/testenv/faults":
            method = environ.get("REQUEST_METHOD", "GET")
            query = parse_qs(environ.get("QUERY_STRING", ""))
            try:
                if method == "POST":
                    length = int(environ.get("CONTENT_LENGTH") or 0)
                    faults.configure(json.loads(environ["wsgi.input"].read(length) or b"{}"))
                    out = {"ok": True}
                elif method == "DELETE":
                    faults.clear(query.get("access_key_id", [""])[0])
                    out = {"ok": True}
                else:
                    out = faults.report(query.get("access_key_id", [""])[0])
            except (ValueError, KeyError) as e:
                return respond(start_response, "400 Bad Request", json.dumps({"error": str(e)}).encode(), "application/json")
            return respond(start_response, "200 OK", json.dumps(out).encode(), "application/json")
        if path in TESTENV_HANDLERS and environ.get("REQUEST_METHOD") == "POST":
            try:
                length = int(environ.get("CONTENT_LENGTH") or 0)
                TESTENV_HANDLERS[path](json.loads(environ["wsgi.input"].read(length) or b"{}"))
            except (ValueError, KeyError) as e:
                return respond(start_response, "400 Bad Request", json.dumps({"error": str(e)}).encode(), "application/json")
            return respond(start_response, "200 OK", b'{"ok": true}', "application/json")
        served = re.search(
            r"Credential=[^/]+/[^/]+/([^/]+)/([^/]+)/", environ.get("HTTP_AUTHORIZATION", "")
        )
        if served and served.group(2) in TESTENV_SERVICES:
            try:
                status, out = TESTENV_SERVICES[served.group(2)](environ, served.group(1))
            except Exception as e:  # moto's IAM errors: AccessDenied, SignatureDoesNotMatch, ...
                status = getattr(e, "code", 500) if isinstance(getattr(e, "code", None), int) else 500
                out = {"__type": getattr(e, "error_type", type(e).__name__), "message": getattr(e, "message", str(e))}
            body = json.dumps(out).encode()
            reason = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found"}.get(status, "Error")
            headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
            if status >= 400:
                headers.append(("x-amzn-ErrorType", out["__type"]))
            start_response(f"{status} {reason}", headers)
            return [body]
        found = credential.search(environ.get("HTTP_AUTHORIZATION", ""))
        if found:
            key, service = found.group(1), found.group(2)
            action = environ.get("HTTP_X_AMZ_TARGET", "").rsplit(".", 1)[-1]
            if not action and environ.get("REQUEST_METHOD") == "POST":
                length = int(environ.get("CONTENT_LENGTH") or 0)
                body = environ["wsgi.input"].read(length)
                environ["wsgi.input"] = io.BytesIO(body)
                action = parse_qs(body.decode("utf-8", "replace")).get("Action", [""])[0]
            kind, wait = faults.decide(key, service, action or path)
            if kind == "throttle":
                return error(start_response, "503 Service Unavailable", "RequestLimitExceeded", "Request limit exceeded.")
            if kind == "unavailable":
                return error(start_response, "500 Internal Server Error", "InternalError", "An internal error has occurred")
            if kind == "timeout":
                time.sleep(wait)
                return error(start_response, "500 Internal Server Error", "InternalError", "injected timeout")
            if kind == "lost":
                # Done, but the answer never arrives: what a dropped connection does.
                answer = original(self, environ, lambda *_args, **_kw: None)
                for _ in answer:
                    pass
                return error(start_response, "500 Internal Server Error", "InternalError", "injected: the answer was lost")
        return original(self, environ, start_response)

    DomainDispatcherApplication.__call__ = call  # type: ignore[method-assign]
    return faults


def install_placement_groups() -> None:
    """EC2 placement groups and launches into them (moto internals; moto 5.2.5 has neither).

    * `CreatePlacementGroup` (GroupName, Strategy cluster|partition|spread, PartitionCount,
      SpreadLevel, TagSpecifications) makes an available group with an id `pg-` + 17 hex
      digits; `DeletePlacementGroup` (GroupName) removes it;
    * `DescribePlacementGroups` answers by GroupIds or GroupNames (an unknown name is EC2's
      `InvalidPlacementGroup.Unknown`, an unknown id `InvalidPlacementGroupId.NotFound`) or all
      groups, filtered by `state`, `strategy`, `group-name` and `group-id`;
    * an instance `CreateFleet` launches from a launch template whose data (or override) has a
      `Placement` gets it: `GroupId`/`GroupName`, `Tenancy`, and `PartitionNumber` (in a
      partition group without one, the next partition in turn, as EC2 spreads them), so
      `DescribeInstances` shows `Placement.GroupId`, `GroupName`, `PartitionNumber` and
      `Tenancy`. moto's fleets otherwise launch with no placement at all.

    Groups live on each region's EC2 backend (`_testenv_placement_groups`), so a
    `POST /moto-api/reset` drops them with the backend. Nothing checks instance types against
    a strategy or enforces a spread group's seven instances per zone.
    """
    import secrets

    from moto.core.responses import ActionResult
    from moto.ec2.exceptions import EC2ClientError
    from moto.ec2.models.fleets import Fleet
    from moto.ec2.responses import EC2Response

    def groups(backend):  # type: ignore[no-untyped-def]
        if not hasattr(backend, "_testenv_placement_groups"):
            backend._testenv_placement_groups = {}
        return backend._testenv_placement_groups

    def create_placement_group(self):  # type: ignore[no-untyped-def]
        self.error_on_dryrun()
        name = self._get_param("GroupName")
        strategy = self._get_param("Strategy") or "cluster"
        if not name:
            raise EC2ClientError("MissingParameter", "The request must contain the parameter groupName")
        if strategy not in ("cluster", "partition", "spread"):
            raise EC2ClientError("InvalidParameterValue", f"Invalid strategy {strategy}")
        existing = groups(self.ec2_backend)
        if any(g["GroupName"] == name for g in existing.values()):
            raise EC2ClientError("InvalidPlacementGroup.Duplicate", f"The Placement Group '{name}' already exists.")
        group_id = "pg-" + secrets.token_hex(9)[:17]
        group = {
            "GroupName": name,
            "GroupId": group_id,
            "GroupArn": f"arn:aws:ec2:{self.region}:{self.current_account}:placement-group/{name}",
            "State": "available",
            "Strategy": strategy,
            "Tags": [
                {"Key": k, "Value": v}
                for k, v in self._parse_tag_specification().get("placement-group", {}).items()
            ],
        }
        if strategy == "partition":
            group["PartitionCount"] = int(self._get_param("PartitionCount") or 2)
        if strategy == "spread":
            group["SpreadLevel"] = self._get_param("SpreadLevel") or "rack"
        existing[group_id] = group
        return ActionResult({"PlacementGroup": group})

    def describe_placement_groups(self):  # type: ignore[no-untyped-def]
        self.error_on_dryrun()
        existing = groups(self.ec2_backend)
        names = self._get_param("GroupNames", []) or []
        ids = self._get_param("GroupIds", []) or []
        found = list(existing.values())
        if ids:
            for group_id in ids:
                if group_id not in existing:
                    raise EC2ClientError(
                        "InvalidPlacementGroupId.NotFound",
                        f"The Placement Group ID '{group_id}' does not exist",
                    )
            found = [existing[i] for i in ids]
        if names:
            by_name = {g["GroupName"]: g for g in existing.values()}
            for name in names:
                if name not in by_name:
                    raise EC2ClientError("InvalidPlacementGroup.Unknown", f"The Placement Group '{name}' is unknown.")
            found = [g for g in found if g["GroupName"] in names]
        keys = {"state": "State", "strategy": "Strategy", "group-name": "GroupName", "group-id": "GroupId"}
        for name, values in self._filters_from_querystring().items():
            if name in keys:
                found = [g for g in found if g.get(keys[name]) in values]
        return ActionResult({"PlacementGroups": found})

    def delete_placement_group(self):  # type: ignore[no-untyped-def]
        self.error_on_dryrun()
        name = self._get_param("GroupName")
        existing = groups(self.ec2_backend)
        for group_id, group in list(existing.items()):
            if group["GroupName"] == name:
                del existing[group_id]
                return ActionResult({})
        raise EC2ClientError("InvalidPlacementGroup.Unknown", f"The Placement Group '{name}' is unknown.")

    EC2Response.create_placement_group = create_placement_group  # type: ignore[attr-defined]
    EC2Response.describe_placement_groups = describe_placement_groups  # type: ignore[attr-defined]
    EC2Response.delete_placement_group = delete_placement_group  # type: ignore[attr-defined]

    original_init = Fleet.__init__

    def place(fleet, instance, launch_spec) -> None:  # type: ignore[no-untyped-def]
        spec = getattr(launch_spec, "launch_template_spec", None) or {}
        if "LaunchTemplateId" not in spec:
            return
        template = fleet.ec2_backend.get_launch_template(spec["LaunchTemplateId"])
        version = spec.get("Version") or template.default_version_number
        data = template.get_version(version).data or {}
        placement = dict(data.get("Placement") or {})
        placement.update((getattr(launch_spec, "overrides", None) or {}).get("Placement") or {})
        if not placement:
            return
        if placement.get("Tenancy"):
            instance.placement.tenancy = placement["Tenancy"]
        existing = groups(fleet.ec2_backend)
        group = existing.get(placement.get("GroupId") or "") or next(
            (g for g in existing.values() if g["GroupName"] == placement.get("GroupName")), None
        )
        if group is None:
            return
        instance.placement.group_name = group["GroupName"]
        instance.placement.group_id = group["GroupId"]
        if group["Strategy"] == "partition":
            partition = placement.get("PartitionNumber")
            if not partition:
                group["_next_partition"] = group.get("_next_partition", 0) % group["PartitionCount"] + 1
                partition = group["_next_partition"]
            instance.placement.partition_number = int(partition)

    def fleet_init(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        original_init(self, *args, **kwargs)
        for item in self.on_demand_instances:
            place(self, item["instance"], item.get("launch_spec"))
        for request in self.spot_requests:
            if getattr(request, "instance", None) is not None:
                place(self, request.instance, request.launch_spec)

    Fleet.__init__ = fleet_init  # type: ignore[method-assign]


def install_capacity_reservations() -> None:
    """EC2 On-Demand Capacity Reservations and Capacity Blocks (moto internals; moto 5.2.5 has
    no capacity reservation API at all).

    * `CreateCapacityReservation` (InstanceType, AvailabilityZone, InstanceCount,
      InstanceMatchCriteria open|targeted, EndDate, EndDateType, Tenancy, InstancePlatform,
      TagSpecifications) makes an `active` reservation `cr-` + 17 hex digits, owned by the
      caller's account, `ReservationType` `default`; a test makes a Capacity Block by tagging
      it `testenv:reservation-type` = `capacity-block` (EC2 sells those through
      PurchaseCapacityBlock, which this does not serve), and an interruptible one with
      `testenv:interruptible` = `true`;
    * `DescribeCapacityReservations` answers by CapacityReservationIds (an unknown id is EC2's
      `InvalidCapacityReservationId.NotFound`) or all of the region's, filtered by `state`,
      `owner-id`, `instance-type`, `availability-zone`, `instance-match-criteria`,
      `reservation-type`, `tag:<key>` and `tag-key` (filters AND, values of one filter OR),
      with EC2's fields: CapacityReservationId, CapacityReservationArn, OwnerId, InstanceType,
      InstancePlatform, AvailabilityZone, AvailabilityZoneId, Tenancy, AvailableInstanceCount,
      TotalInstanceCount, InstanceMatchCriteria, State, StartDate, CreateDate, EndDate,
      EndDateType, ReservationType, Interruptible, Tags;
    * `ModifyCapacityReservation` (CapacityReservationId, InstanceCount, EndDate, EndDateType
      `limited`|`unlimited`, InstanceMatchCriteria) changes an `active` reservation as EC2
      does (an `unlimited` one loses its EndDate; a count below the instances running in it
      is refused). EC2 refuses to modify a Capacity Block; the emulator accepts it, so a test
      can bring a block's end near without waiting for it;
    * `CancelCapacityReservation` (CapacityReservationId) makes it `cancelled`;
    * a reservation whose EndDate has passed is `expired` from then on (looked at whenever
      reservations or instances are read or launched);
    * when a `default` reservation is cancelled or expires, its instances keep running as
      on-demand ones, as EC2 documents: `DescribeInstances` no longer shows their
      `CapacityReservationId`, their `CapacityReservationSpecification` preference is `open`
      and an interruptible reservation's `InstanceLifecycle` is gone;
    * a `CreateFleet` whose launch template's `CapacityReservationSpecification` targets a
      reservation (`CapacityReservationTarget.CapacityReservationId`) launches into it: only
      the overrides of the reservation's instance type and zone are used, a reservation with no
      free slot (or not `active`) answers no instance and one fleet error per override,
      `ReservationCapacityExceeded` (upstream Karpenter's code for a full reservation), and the
      fleet's `DefaultTargetCapacityType` `capacity-block` or `reserved-capacity` launches as
      on-demand would (moto launches nothing for them);
    * `RunInstances` with such a launch template (or its own `CapacityReservationSpecification`)
      launches into it the same way, a full reservation answering the error
      `ReservationCapacityExceeded`;
    * an instance launched into a reservation takes one slot (`AvailableInstanceCount` - 1)
      and `DescribeInstances` shows its `CapacityReservationId` and
      `CapacityReservationSpecification` (preference `capacity-reservations-only`, the target),
      with `InstanceLifecycle` `capacity-block` in a Capacity Block; `TerminateInstances`
      gives the slot back (once).

    Reservations live on each region's EC2 backend (`_testenv_capacity_reservations`), so a
    `POST /moto-api/reset` drops them. Not modelled: `open` reservations catching untargeted
    launches, instance platform and tenancy matching, EC2 terminating a Capacity Block's
    instances at its end (they keep running as they are), and capacity reservation groups or
    fleets.
    """
    import datetime as dt
    import inspect
    import secrets

    from moto.core.responses import ActionResult
    from moto.ec2.exceptions import EC2ClientError
    from moto.ec2.models.fleets import Fleet
    from moto.ec2.models.instances import Instance
    from moto.ec2.responses import EC2Response

    FULL = "ReservationCapacityExceeded"

    def reservations(backend):  # type: ignore[no-untyped-def]
        if not hasattr(backend, "_testenv_capacity_reservations"):
            backend._testenv_capacity_reservations = {}
        return backend._testenv_capacity_reservations

    def as_time(value):  # type: ignore[no-untyped-def]
        """A request's timestamp as an aware UTC datetime (moto may parse it, naive)."""
        if isinstance(value, str):
            value = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        if isinstance(value, dt.datetime) and value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return value

    def fall_back(backend, reservation: dict) -> None:  # type: ignore[type-arg]
        """The instances of an ended `default` reservation run on as on-demand ones."""
        if reservation["ReservationType"] != "default":
            return
        for instance in backend.all_instances():
            if getattr(instance, "_testenv_reservation", None) is not reservation:
                continue
            instance._testenv_reservation = None
            instance.capacity_reservation_id = None
            instance.capacity_reservation_specification = {"CapacityReservationPreference": "open"}
            if getattr(instance, "instance_lifecycle", None) == "interruptible-capacity-reservation":
                instance.instance_lifecycle = None

    def settle(backend) -> None:  # type: ignore[no-untyped-def]
        """Reservations whose end has passed expire."""
        now = dt.datetime.now(dt.timezone.utc)
        for reservation in reservations(backend).values():
            end = reservation.get("EndDate")
            if reservation["State"] == "active" and end is not None and end <= now:
                reservation["State"] = "expired"
                reservation["AvailableInstanceCount"] = 0
                fall_back(backend, reservation)

    def zone_id(backend, zone: str):  # type: ignore[no-untyped-def]
        for z in backend.describe_availability_zones():
            if z.name == zone:
                return z.zone_id
        return None

    def create_capacity_reservation(self):  # type: ignore[no-untyped-def]
        self.error_on_dryrun()
        instance_type = self._get_param("InstanceType")
        zone = self._get_param("AvailabilityZone")
        count = int(self._get_param("InstanceCount") or 0)
        if not instance_type or not zone or count < 1:
            raise EC2ClientError(
                "MissingParameter",
                "InstanceType, AvailabilityZone and a positive InstanceCount are required",
            )
        criteria = self._get_param("InstanceMatchCriteria") or "open"
        if criteria not in ("open", "targeted"):
            raise EC2ClientError("InvalidParameterValue", f"Invalid InstanceMatchCriteria {criteria}")
        tags = self._parse_tag_specification().get("capacity-reservation", {})
        now = dt.datetime.now(dt.timezone.utc)
        end = as_time(self._get_param("EndDate"))
        reservation_id = "cr-" + secrets.token_hex(9)[:17]
        reservation = {
            "CapacityReservationId": reservation_id,
            "CapacityReservationArn": f"arn:aws:ec2:{self.region}:{self.current_account}:capacity-reservation/{reservation_id}",
            "OwnerId": self.current_account,
            "InstanceType": instance_type,
            "InstancePlatform": self._get_param("InstancePlatform") or "Linux/UNIX",
            "AvailabilityZone": zone,
            "AvailabilityZoneId": zone_id(self.ec2_backend, zone),
            "Tenancy": self._get_param("Tenancy") or "default",
            "TotalInstanceCount": count,
            "AvailableInstanceCount": count,
            "InstanceMatchCriteria": criteria,
            "State": "active",
            "StartDate": now,
            "CreateDate": now,
            "EndDateType": self._get_param("EndDateType") or ("limited" if end else "unlimited"),
            "ReservationType": tags.get("testenv:reservation-type", "default"),
            "Interruptible": tags.get("testenv:interruptible") == "true",
            "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
        }
        if end:
            reservation["EndDate"] = end
        reservations(self.ec2_backend)[reservation_id] = reservation
        return ActionResult({"CapacityReservation": reservation})

    def matches(reservation: dict, name: str, values: list) -> bool:  # type: ignore[type-arg]
        tags = {t["Key"]: t["Value"] for t in reservation["Tags"]}
        if name.startswith("tag:"):
            return tags.get(name[4:]) in values
        if name == "tag-key":
            return any(v in tags for v in values)
        keys = {
            "state": "State",
            "owner-id": "OwnerId",
            "instance-type": "InstanceType",
            "availability-zone": "AvailabilityZone",
            "instance-match-criteria": "InstanceMatchCriteria",
            "reservation-type": "ReservationType",
            "tenancy": "Tenancy",
        }
        if name not in keys:
            raise EC2ClientError("InvalidParameterValue", f"The filter '{name}' is invalid")
        return str(reservation.get(keys[name])) in values

    def describe_capacity_reservations(self):  # type: ignore[no-untyped-def]
        self.error_on_dryrun()
        settle(self.ec2_backend)
        existing = reservations(self.ec2_backend)
        ids = self._get_param("CapacityReservationIds", []) or []
        for reservation_id in ids:
            if reservation_id not in existing:
                raise EC2ClientError(
                    "InvalidCapacityReservationId.NotFound",
                    f"The capacity reservation ID '{reservation_id}' does not exist",
                )
        found = [existing[i] for i in ids] if ids else list(existing.values())
        for name, values in self._filters_from_querystring().items():
            found = [r for r in found if matches(r, name, values)]
        return ActionResult({"CapacityReservations": found})

    def cancel_capacity_reservation(self):  # type: ignore[no-untyped-def]
        self.error_on_dryrun()
        reservation_id = self._get_param("CapacityReservationId")
        reservation = reservations(self.ec2_backend).get(reservation_id)
        if reservation is None:
            raise EC2ClientError(
                "InvalidCapacityReservationId.NotFound",
                f"The capacity reservation ID '{reservation_id}' does not exist",
            )
        reservation["State"] = "cancelled"
        reservation["AvailableInstanceCount"] = 0
        fall_back(self.ec2_backend, reservation)
        return ActionResult({"Return": True})

    def modify_capacity_reservation(self):  # type: ignore[no-untyped-def]
        self.error_on_dryrun()
        settle(self.ec2_backend)
        reservation_id = self._get_param("CapacityReservationId")
        reservation = reservations(self.ec2_backend).get(reservation_id)
        if reservation is None:
            raise EC2ClientError(
                "InvalidCapacityReservationId.NotFound",
                f"The capacity reservation ID '{reservation_id}' does not exist",
            )
        if reservation["State"] != "active":
            raise EC2ClientError(
                "IncorrectState",
                f"The capacity reservation '{reservation_id}' is {reservation['State']}",
            )
        count = self._get_param("InstanceCount")
        if count is not None:
            count = int(count)
            used = reservation["TotalInstanceCount"] - reservation["AvailableInstanceCount"]
            if count < max(used, 1):
                raise EC2ClientError(
                    "InvalidParameterValue",
                    f"InstanceCount {count} is below the {used} instances running in the reservation",
                )
            reservation["TotalInstanceCount"] = count
            reservation["AvailableInstanceCount"] = count - used
        end_type = self._get_param("EndDateType")
        end = as_time(self._get_param("EndDate"))
        if end_type == "unlimited":
            reservation["EndDateType"] = "unlimited"
            reservation.pop("EndDate", None)
        elif end is not None:
            reservation["EndDateType"] = "limited"
            reservation["EndDate"] = end
        criteria = self._get_param("InstanceMatchCriteria")
        if criteria in ("open", "targeted"):
            reservation["InstanceMatchCriteria"] = criteria
        settle(self.ec2_backend)
        return ActionResult({"Return": True})

    EC2Response.create_capacity_reservation = create_capacity_reservation  # type: ignore[attr-defined]
    EC2Response.describe_capacity_reservations = describe_capacity_reservations  # type: ignore[attr-defined]
    EC2Response.cancel_capacity_reservation = cancel_capacity_reservation  # type: ignore[attr-defined]
    EC2Response.modify_capacity_reservation = modify_capacity_reservation  # type: ignore[attr-defined]

    original_describe_instances = EC2Response.describe_instances

    def describe_instances(self):  # type: ignore[no-untyped-def]
        settle(self.ec2_backend)
        return original_describe_instances(self)

    EC2Response.describe_instances = describe_instances  # type: ignore[method-assign]

    def template_data(backend, spec: dict) -> dict:  # type: ignore[type-arg]
        """The launch template data a LaunchTemplateSpecification names ({} if none)."""
        try:
            if spec.get("LaunchTemplateId"):
                template = backend.get_launch_template(spec["LaunchTemplateId"])
            elif spec.get("LaunchTemplateName"):
                template = backend.get_launch_template_by_name(spec["LaunchTemplateName"])
            else:
                return {}
        except Exception:  # an unknown template: moto's own call reports it
            return {}
        version = spec.get("Version") or "$Default"
        if version == "$Latest":
            version = template.latest_version_number
        elif version == "$Default":
            version = template.default_version_number
        return template.get_version(version).data or {}

    def target_of(data: dict):  # type: ignore[no-untyped-def]
        spec = data.get("CapacityReservationSpecification") or {}
        return (spec.get("CapacityReservationTarget") or {}).get("CapacityReservationId")

    def override_zone(backend, override: dict):  # type: ignore[no-untyped-def]
        if override.get("AvailabilityZone"):
            return override["AvailabilityZone"]
        if override.get("SubnetId"):
            try:
                return backend.get_subnet(override["SubnetId"]).availability_zone
            except Exception:
                return None
        return None

    def usable(reservation) -> bool:  # type: ignore[no-untyped-def]
        return reservation is not None and reservation["State"] == "active" and reservation["AvailableInstanceCount"] > 0

    def take(instance, reservation: dict) -> None:  # type: ignore[type-arg]
        reservation["AvailableInstanceCount"] -= 1
        instance.capacity_reservation_id = reservation["CapacityReservationId"]
        instance.capacity_reservation_specification = {
            "CapacityReservationPreference": "capacity-reservations-only",
            "CapacityReservationTarget": {"CapacityReservationId": reservation["CapacityReservationId"]},
        }
        instance._testenv_reservation = reservation
        if reservation["ReservationType"] == "capacity-block":
            instance.instance_lifecycle = "capacity-block"
        elif reservation["Interruptible"]:
            instance.instance_lifecycle = "interruptible-capacity-reservation"

    original_fleet_init = Fleet.__init__
    fleet_signature = inspect.signature(original_fleet_init)

    def fleet_init(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        bound = fleet_signature.bind(self, *args, **kwargs)
        backend = bound.arguments["ec2_backend"]
        settle(backend)
        existing = reservations(backend)
        configs = bound.arguments.get("launch_template_configs") or []
        kept, errors, targeted = [], [], {}
        for config in configs:
            spec = config.get("LaunchTemplateSpecification") or {}
            reservation_id = target_of(template_data(backend, spec))
            if not reservation_id:
                kept.append(config)
                continue
            reservation = existing.get(reservation_id)
            overrides = []
            for override in config.get("Overrides") or [{}]:
                if reservation is not None and (
                    override.get("InstanceType", reservation["InstanceType"]) != reservation["InstanceType"]
                    or override_zone(backend, override) not in (None, reservation["AvailabilityZone"])
                ):
                    continue
                if usable(reservation):
                    overrides.append(override)
                else:
                    errors.append({
                        "LaunchTemplateAndOverrides": {"LaunchTemplateSpecification": spec, "Overrides": override},
                        "Lifecycle": "on-demand",
                        "ErrorCode": FULL,
                        "ErrorMessage": f"Insufficient capacity in capacity reservation {reservation_id}.",
                    })
            if overrides:
                kept.append(dict(config, Overrides=overrides))
                targeted[spec.get("LaunchTemplateName") or spec.get("LaunchTemplateId")] = reservation_id
        capacity = dict(bound.arguments.get("target_capacity_specification") or {})
        if capacity.get("DefaultTargetCapacityType") in ("capacity-block", "reserved-capacity"):
            capacity["DefaultTargetCapacityType"] = "on-demand"
        if configs and not kept:
            capacity["TotalTargetCapacity"] = 0
        bound.arguments["target_capacity_specification"] = capacity
        bound.arguments["launch_template_configs"] = kept
        original_fleet_init(*bound.args, **bound.kwargs)
        self._testenv_errors = errors
        for item in self.on_demand_instances:
            spec = getattr(item.get("launch_spec"), "launch_template_spec", None) or {}
            name = next((k for k in targeted if k in (spec.get("LaunchTemplateName"), spec.get("LaunchTemplateId"))), None)
            if name is None:
                template = backend.get_launch_template(spec["LaunchTemplateId"]) if spec.get("LaunchTemplateId") else None
                name = template.name if template is not None and template.name in targeted else None
            if name is not None:
                take(item["instance"], existing[targeted[name]])

    Fleet.__init__ = fleet_init  # type: ignore[method-assign]

    original_create_fleet = EC2Response.create_fleet

    def create_fleet(self):  # type: ignore[no-untyped-def]
        result = original_create_fleet(self)
        body = result.result
        fleet = self.ec2_backend.fleets.get(body.get("FleetId")) if isinstance(body, dict) else None
        errors = getattr(fleet, "_testenv_errors", None)
        if errors:
            body["Errors"] = errors
            body.setdefault("Instances", [])
        return result

    EC2Response.create_fleet = create_fleet  # type: ignore[method-assign]

    original_run_instances = EC2Response.run_instances

    def run_instances(self):  # type: ignore[no-untyped-def]
        data = template_data(self.ec2_backend, self._get_param("LaunchTemplate", {}) or {})
        own = self._get_param("CapacityReservationSpecification", {}) or {}
        reservation_id = target_of({"CapacityReservationSpecification": own}) or target_of(data)
        if not reservation_id or self._get_param("DryRun"):
            return original_run_instances(self)
        settle(self.ec2_backend)
        reservation = reservations(self.ec2_backend).get(reservation_id)
        if reservation is None:
            raise EC2ClientError(
                "InvalidCapacityReservationId.NotFound",
                f"The capacity reservation ID '{reservation_id}' does not exist",
            )
        count = int(self._get_param("MinCount", if_none="1"))
        if reservation["State"] != "active" or reservation["AvailableInstanceCount"] < count:
            raise EC2ClientError(FULL, f"Insufficient capacity in capacity reservation {reservation_id}.")
        result = original_run_instances(self)
        for instance in result.result.instances:
            take(instance, reservation)
        return result

    EC2Response.run_instances = run_instances  # type: ignore[method-assign]

    original_terminate = Instance.terminate

    def terminate(self):  # type: ignore[no-untyped-def]
        reservation = getattr(self, "_testenv_reservation", None)
        if reservation is not None:
            self._testenv_reservation = None
            if reservation["State"] == "active":
                reservation["AvailableInstanceCount"] = min(
                    reservation["AvailableInstanceCount"] + 1, reservation["TotalInstanceCount"]
                )
        return original_terminate(self)

    Instance.terminate = terminate  # type: ignore[method-assign]




# Instance status checks and ARC zonal shift state, per region, for the test hooks below.
TESTENV_STATE: dict = {"instance_status": {}, "zonal_shifts": {}}


def install_instance_status(account_id: str) -> None:
    """EC2 instance status checks tests can break (moto internals; moto 5.2.5 reports every
    running instance `ok` and ignores DescribeInstanceStatus's status and event filters).

    * `POST /testenv/instance-status` with `{"region": R, "instance_id": I,
      "instance_status": "impaired", "system_status": "ok", "impaired_since": ISO 8601,
      "events": ["system-maintenance"]}` sets what DescribeInstanceStatus says of the
      instance: an `impaired` summary has one `reachability` detail `failed` since
      `impaired_since` (default: an hour ago), an `ok` one a `passed` detail; each event code
      becomes a scheduled event (`NotBefore` a day ahead). Omitted keys mean `ok` and no
      events, so posting only the ids makes the instance healthy again.
    * DescribeInstanceStatus honours the filters `instance-status.status`,
      `system-status.status` and `event.code` (the filters of one call AND, as in EC2).
    """
    import datetime as dt

    from moto.ec2.models.instances import Instance

    def override(instance):  # type: ignore[no-untyped-def]
        return TESTENV_STATE["instance_status"].get(instance.id)

    def summary(status: str, since) -> dict:  # type: ignore[no-untyped-def]
        if status == "impaired":
            return {
                "Status": "impaired",
                "Details": [{"Name": "reachability", "Status": "failed", "ImpairedSince": since}],
            }
        return {"Status": status, "Details": [{"Name": "reachability", "Status": "passed"}]}

    original_instance_status = Instance.instance_status
    original_system_status = Instance.system_status

    def instance_status(self):  # type: ignore[no-untyped-def]
        o = override(self)
        if o is None or self.state_code != 16:
            return original_instance_status.fget(self)
        return summary(o["instance_status"], o["impaired_since"])

    def system_status(self):  # type: ignore[no-untyped-def]
        o = override(self)
        if o is None or self.state_code != 16:
            return original_system_status.fget(self)
        return summary(o["system_status"], o["impaired_since"])

    def events(self):  # type: ignore[no-untyped-def]
        o = override(self)
        if o is None:
            return []
        return [
            {
                "InstanceEventId": f"instance-event-{abs(hash((self.id, code))) % 10**17:017d}",
                "Code": code,
                "Description": f"The instance is scheduled for {code} (karpenter-testenv)",
                "NotBefore": o["impaired_since"] + dt.timedelta(days=1),
            }
            for code in o["events"]
        ]

    Instance.instance_status = property(instance_status)  # type: ignore[method-assign,assignment]
    Instance.system_status = property(system_status)  # type: ignore[method-assign,assignment]
    Instance.events = property(events)  # type: ignore[attr-defined]

    original_applies = Instance.applies

    def applies(self, filters):  # type: ignore[no-untyped-def]
        for f in filters or []:
            values = f["values"]
            if f["name"] == "instance-status.status" and self.instance_status.get("Status") not in values:
                return False
            if f["name"] == "system-status.status" and self.system_status.get("Status") not in values:
                return False
            if f["name"] == "event.code" and not {e["Code"] for e in self.events} & set(values):
                return False
        return original_applies(self, filters)

    Instance.applies = applies  # type: ignore[method-assign]

    def configure(body: dict) -> None:
        instance_id = body["instance_id"]
        since = body.get("impaired_since")
        since = (
            dt.datetime.fromisoformat(since.replace("Z", "+00:00"))
            if since
            else dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)
        )
        for key in ("instance_status", "system_status"):
            if body.get(key, "ok") not in ("ok", "impaired"):
                raise ValueError(f"{key} must be ok or impaired")
        TESTENV_STATE["instance_status"][instance_id] = {
            "instance_status": body.get("instance_status", "ok"),
            "system_status": body.get("system_status", "ok"),
            "impaired_since": since,
            "events": list(body.get("events") or []),
        }

    TESTENV_HANDLERS["/testenv/instance-status"] = configure


def install_arc_zonal_shift(account_id: str) -> None:
    """Amazon Application Recovery Controller zonal shift (moto 5.2.5 has no such service).

    Served on the moto endpoint for requests signed for the service `arc-zonal-shift`
    (REST-JSON, as the AWS API reference documents it), authenticated and authorized through
    moto's IAM enforcement like any other call:

    * `GET /managedresources/{resourceIdentifier}` (GetManagedResource): the managed resource
      is an EKS cluster of moto's EKS backend, named by ARN or name; answers `arn`, `name`,
      `appliedWeights` (`1.0` per zone id not shifted away from), `zonalShifts` (the active
      shifts of the resource: `zonalShiftId`, `resourceIdentifier`, `awayFrom`, `expiryTime`,
      `startTime`, `comment`, `appliedStatus` `APPLIED`, `shiftType` `ZONAL_SHIFT`) and
      `autoshifts` (empty); an unknown resource is 404 `ResourceNotFoundException`;
    * `POST /zonalshifts` (StartZonalShift: `resourceIdentifier`, `awayFrom`, `expiresIn` as
      `<n>m` or `<n>h`, `comment`) starts a shift and answers it (`status` `ACTIVE`);
    * `GET /zonalshifts` (ListZonalShifts) lists the region's shifts, `status` `ACTIVE`,
      `EXPIRED` or `CANCELED`; `DELETE /zonalshifts/{zonalShiftId}` (CancelZonalShift)
      cancels one.

    Shifts live per region in this process and are dropped at `POST /moto-api/reset`.
    """
    import datetime as dt
    import re
    import uuid

    from moto import settings
    from moto.core.authorization import ActionAuthenticatorMixin
    from moto.eks.models import eks_backends
    from moto.iam.access_control import IAMRequest

    def now() -> dt.datetime:
        return dt.datetime.now(dt.timezone.utc)

    def cluster_arn(region: str, identifier: str):  # type: ignore[no-untyped-def]
        backend = eks_backends[account_id][region]
        for name, cluster in backend.clusters.items():
            if identifier in (name, cluster.arn):
                return cluster.arn, name
        return None

    def status(shift: dict) -> str:
        if shift["canceled"]:
            return "CANCELED"
        return "ACTIVE" if shift["expiryTime"] > now() else "EXPIRED"

    def view(shift: dict) -> dict:
        out = {k: v for k, v in shift.items() if k != "canceled"}
        out["expiryTime"] = shift["expiryTime"].timestamp()
        out["startTime"] = shift["startTime"].timestamp()
        out["status"] = status(shift)
        return out

    def authorize(environ, region: str, method: str, path: str, action: str) -> None:  # type: ignore[no-untyped-def]
        if ActionAuthenticatorMixin.request_count < settings.INITIAL_NO_AUTH_ACTION_COUNT:
            return
        headers = {
            key[5:].replace("_", "-").title(): value
            for key, value in environ.items()
            if key.startswith("HTTP_")
        }
        if environ.get("CONTENT_TYPE"):
            headers["Content-Type"] = environ["CONTENT_TYPE"]
        if environ.get("CONTENT_LENGTH"):
            headers["Content-Length"] = environ["CONTENT_LENGTH"]
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(body)
        request = IAMRequest(
            account_id=account_id,
            method=method,
            path=path,
            data={},
            body=body,
            headers=headers,
            action=action,
        )
        request.check_signature()
        request.check_action_permitted("*")

    def handle(environ, region: str):  # type: ignore[no-untyped-def]
        method = environ.get("REQUEST_METHOD", "GET")
        raw = environ.get("RAW_URI") or environ.get("REQUEST_URI") or environ.get("PATH_INFO", "")
        raw_path = raw.split("?", 1)[0]
        path = environ.get("PATH_INFO", "")
        shifts = TESTENV_STATE["zonal_shifts"].setdefault(region, [])
        if method == "GET" and path.startswith("/managedresources/"):
            authorize(environ, region, method, raw_path, "GetManagedResource")
            found = cluster_arn(region, path[len("/managedresources/"):])
            if found is None:
                return 404, {"__type": "ResourceNotFoundException", "message": "The input requested a resource that was not found."}
            arn, name = found
            active = [s for s in shifts if s["resourceIdentifier"] == arn and status(s) == "ACTIVE"]
            zone_ids = {
                z.zone_id
                for z in __import__("moto.ec2.models", fromlist=["ec2_backends"]).ec2_backends[account_id][region].describe_availability_zones()
            }
            shifted = {s["awayFrom"] for s in active}
            return 200, {
                "arn": arn,
                "name": name,
                "appliedWeights": {z: (0.0 if z in shifted else 1.0) for z in sorted(zone_ids)},
                "zonalShifts": [
                    {k: v for k, v in view(s).items() if k != "status"} | {"appliedStatus": "APPLIED", "shiftType": "ZONAL_SHIFT"}
                    for s in active
                ],
                "autoshifts": [],
                "zonalAutoshiftStatus": "DISABLED",
            }
        if method == "POST" and path == "/zonalshifts":
            authorize(environ, region, method, raw_path, "StartZonalShift")
            body = json.loads(environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0)) or b"{}")
            found = cluster_arn(region, body.get("resourceIdentifier", ""))
            if found is None:
                return 404, {"__type": "ResourceNotFoundException", "message": "The input requested a resource that was not found."}
            matched = re.fullmatch(r"(\d+)([mh])", body.get("expiresIn", ""))
            if not matched:
                return 400, {"__type": "ValidationException", "message": "expiresIn must be <n>m or <n>h"}
            minutes = int(matched.group(1)) * (60 if matched.group(2) == "h" else 1)
            shift = {
                "zonalShiftId": str(uuid.uuid4()),
                "resourceIdentifier": found[0],
                "awayFrom": body.get("awayFrom", ""),
                "comment": body.get("comment", ""),
                "startTime": now(),
                "expiryTime": now() + dt.timedelta(minutes=minutes),
                "canceled": False,
            }
            shifts.append(shift)
            return 200, view(shift)
        if method == "GET" and path == "/zonalshifts":
            authorize(environ, region, method, raw_path, "ListZonalShifts")
            return 200, {"items": [view(s) for s in shifts]}
        if method in ("DELETE", "PATCH") and path.startswith("/zonalshifts/"):
            authorize(environ, region, method, raw_path, "CancelZonalShift")
            wanted = path[len("/zonalshifts/"):]
            for shift in shifts:
                if shift["zonalShiftId"] == wanted:
                    shift["canceled"] = True
                    return 200, view(shift)
            return 404, {"__type": "ResourceNotFoundException", "message": "The zonal shift was not found."}
        return 404, {"__type": "UnknownOperationException", "message": f"{method} {path} is not served"}

    TESTENV_SERVICES["arc-zonal-shift"] = handle


# Test hooks by path (`POST` with a JSON body) and services served here, by SigV4 service
# name; install_faults' dispatcher wrapper routes to them.
TESTENV_HANDLERS: dict = {}
TESTENV_SERVICES: dict = {}

def set_iam_enforcement(enabled: bool) -> None:
    from moto import settings
    from moto.core.authorization import ActionAuthenticatorMixin

    settings.INITIAL_NO_AUTH_ACTION_COUNT = 0 if enabled else float("inf")
    ActionAuthenticatorMixin.request_count = 0


def write_json_atomically(path: str, data: dict) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--state-file", required=True, help="JSON written once the server is ready")
    parser.add_argument("--iam-enforcement", choices=("on", "off"), default="on")
    parser.add_argument("--regions", default=",".join(DEFAULT_REGIONS))
    parser.add_argument("--k8s-versions", default=",".join(DEFAULT_K8S_VERSIONS))
    args = parser.parse_args()
    if args.host != "127.0.0.1":
        parser.error("only 127.0.0.1 is allowed")

    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.server import ThreadedMotoServer

    regions = [r for r in args.regions.split(",") if r]
    k8s_versions = [v for v in args.k8s_versions.split(",") if v]
    counts = seed(DEFAULT_ACCOUNT_ID, regions, k8s_versions)
    install_reset_hook(DEFAULT_ACCOUNT_ID, regions, k8s_versions)
    sign_what_was_sent()
    # Before the placement groups: their fleet hook places what this one lets launch.
    install_capacity_reservations()
    install_placement_groups()
    install_instance_status(DEFAULT_ACCOUNT_ID)
    install_arc_zonal_shift(DEFAULT_ACCOUNT_ID)
    install_faults()
    set_iam_enforcement(args.iam_enforcement == "on")

    server = ThreadedMotoServer(ip_address=args.host, port=args.port, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    import moto

    write_json_atomically(
        args.state_file,
        {
            "endpoint": f"http://{host}:{port}",
            "port": port,
            "pid": os.getpid(),
            "moto_version": moto.__version__,
            "account_id": DEFAULT_ACCOUNT_ID,
            "regions": regions,
            "k8s_versions": k8s_versions,
            "iam_enforcement": args.iam_enforcement == "on",
            "access_key_id": ADMIN_ACCESS_KEY_ID,
            "secret_access_key": ADMIN_SECRET_ACCESS_KEY,
            "seeded": counts,
        },
    )
    print(f"moto {moto.__version__} listening on http://{host}:{port} (seeded {counts})", flush=True)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    while not stop.wait(0.2):
        pass
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
