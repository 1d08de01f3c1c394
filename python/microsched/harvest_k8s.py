"""Kubernetes registration for the harvesting agent (``microsched harvest-pods``): the pods on
this node labelled ``microsched.io/harvest=primary`` or ``=secondary`` are registered with the
agent on its loopback listener, in the artifact's messages, by pod UID — the agent finds their
processes from their cgroup (``pod<uid>`` under the cgroupfs driver,
``kubepods-<qos>-pod<uid_>.slice`` under systemd, v1 or v2).

A Primary pod says which cores it owns in the annotation ``microsched.io/cpus`` (e.g. "2-7":
with the static CPU manager policy, the cores the kubelet pinned it to), and may set the ACBF
parameters the artifact passes per Primary: ``microsched.io/acbf-threshold``
(LOWIDLEFREQ_THRESHOLD), ``microsched.io/min-buffer`` (LOW_TIC), ``microsched.io/max-buffer``
(static_targetIdleCores). The pods are listed from the API server with the service account's
token (in cluster), filtered to this node (``spec.nodeName``)."""

from __future__ import annotations

import json
import os
import socket
import ssl
import time
import urllib.parse
import urllib.request
from typing import Any, Callable, Iterable

LABEL = "microsched.io/harvest"
ANN_CPUS = "microsched.io/cpus"
ANN_PARAMS = {"microsched.io/acbf-threshold": "LOWIDLEFREQ_THRESHOLD", "microsched.io/min-buffer": "LOW_TIC",
              "microsched.io/max-buffer": "static_targetIdleCores"}
SA = "/var/run/secrets/kubernetes.io/serviceaccount"


def message_for_pod(pod: dict) -> dict | None:
    """The registration message of one pod object (as the API returns it); None if the pod is
    not (yet) one to register: not labelled, not running, or a Primary without its cores."""
    meta = pod.get("metadata", {})
    role = (meta.get("labels") or {}).get(LABEL)
    if role not in ("primary", "secondary") or pod.get("status", {}).get("phase") != "Running":
        return None
    if not meta.get("uid"):
        return None
    pod_id = "pod" + str(meta["uid"])
    if role == "secondary":
        return {"ctr_type": "Secondary", "pod_id": pod_id}
    ann = meta.get("annotations") or {}
    if ANN_CPUS not in ann:
        return None
    msg = {"ctr_type": "Primary", "cpuList": str(ann[ANN_CPUS]), "pod_id": pod_id}
    for key, field in ANN_PARAMS.items():
        if key in ann:
            msg[field] = str(ann[key])
    return msg


def send(addr: str, msg: dict, timeout: float = 5.0) -> bytes:
    """Sends one message the artifact's way and returns the 4-byte answer (ACK\\0 or NAK\\0)."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(json.dumps(msg).encode())
        return s.recv(4)


def list_pods_in_cluster(node: str) -> list[dict]:
    """Pods on `node` carrying the label, from the API server (service-account credentials)."""
    host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    token = open(f"{SA}/token").read().strip()
    q = urllib.parse.urlencode({"labelSelector": LABEL, "fieldSelector": f"spec.nodeName={node}"})
    req = urllib.request.Request(f"https://{host}:{port}/api/v1/pods?{q}", headers={"Authorization": f"Bearer {token}"})
    ctx = ssl.create_default_context(cafile=f"{SA}/ca.crt")
    with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
        return json.load(r).get("items", [])


def register_once(pods: Iterable[dict], addr: str, done: set[str], log: Callable[[str], None] = print) -> int:
    """Sends the registration of every labelled pod, the ones already acknowledged too: an agent
    that restarted (a new container, a crash, a rollout) has lost them, and the agent
    acknowledges a registration it already holds without adding a second Primary or Secondary
    (and without walking the cgroup tree again). `done` holds the UIDs the agent has
    acknowledged (pods no longer listed leave it); a refused one (its processes not found yet,
    say) is retried at the next pass. Returns how many were acknowledged for the first time,
    or again after a refusal."""
    n = 0
    listed: set[str] = set()
    for pod in pods:
        uid = pod.get("metadata", {}).get("uid")
        msg = message_for_pod(pod)
        if msg is None or not uid:
            continue
        listed.add(uid)
        try:
            ans = send(addr, msg)
        except OSError as e:
            log(f"agent at {addr}: {e}")
            return n
        if ans == b"ACK\0":
            if uid not in done:
                done.add(uid)
                n += 1
                log(f"registered {msg}")
        else:
            if uid in done:
                done.discard(uid)
            log(f"refused {msg} (see the agent's log)")
    done.intersection_update(listed)
    return n


def watch(addr: str, node: str, every_s: float = 5.0, list_pods: Callable[[str], list[dict]] | None = None,
          passes: int | None = None, log: Callable[[str], Any] = print) -> set[str]:
    """Lists and registers every `every_s` seconds (forever, or `passes` times); every pass sends
    every registration again (see `register_once`), so an agent restarted between two passes
    has its pods back within `every_s`."""
    list_pods = list_pods or list_pods_in_cluster
    done: set[str] = set()
    i = 0
    while passes is None or i < passes:
        try:
            register_once(list_pods(node), addr, done, log)
        except (OSError, ValueError) as e:
            log(f"listing pods: {e}")
        i += 1
        if passes is None or i < passes:
            time.sleep(every_s)
    return done
