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

IAM enforcement uses moto's own switch: `settings.INITIAL_NO_AUTH_ACTION_COUNT`
(0 = every request is authenticated and authorized, inf = none). It is set
from --iam-enforcement at start and can be flipped at run time with
`POST /moto-api/reset-auth` and a body of `0` (on) or `inf` (off).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
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
