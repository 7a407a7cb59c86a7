#!/usr/bin/env python3
"""Helper of scripts/demo: prints the decisions in the controller's JSON log, one line each."""
import json
import sys

KEEP = ("provisioned a batch", "disruption decided", "disruption started", "disruption: candidates",
        "disruption command", "NodeClaim drifted")
SKIP = ("timestamp", "level", "message", "target", "span", "spans")

for line in open(sys.argv[1]):
    try:
        record = json.loads(line)
    except ValueError:
        continue
    message = record.get("message", "")
    if message.startswith(KEEP):
        extra = " ".join("%s=%s" % (k, v) for k, v in record.items() if k not in SKIP)
        print(record.get("timestamp", "")[11:19], message, extra[:160])
