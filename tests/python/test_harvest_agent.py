"""`microsched harvest`, the real agent, on this machine: registration over the artifact's
protocol, restore on SIGINT and SIGTERM, and a bounded end-to-end run with a real Primary under
the real load generator and a CPU-bound Secondary (2 CPUs are enough: at most one busy loop)."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from agent_procs import ENV, allowed, sleeper, state, wait_for
from conftest import REPO

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or (os.cpu_count() or 1) < 2,
                                reason="the agent needs Linux and 2 CPUs")

SLEEPER = sleeper(60)


def listening(p: subprocess.Popen, timeout: float = 30.0) -> str:
    buf = b""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        r, _, _ = select.select([p.stderr], [], [], 0.1)
        if r:
            chunk = os.read(p.stderr.fileno(), 4096)
            if not chunk:
                break
            buf += chunk
            for line in buf.decode().splitlines():
                if line.startswith("listening on "):
                    return line.split()[-1]
    raise AssertionError(f"agent did not listen: {buf.decode()[-500:]}")


def register(addr: str, msg: dict) -> bytes:
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        # As the artifact's client: sendall, keep the write side open, recv(4).
        s.sendall(json.dumps(msg).encode())
        return s.recv(4)


@pytest.fixture
def tenants():
    """A sleeping Primary and a three-thread Secondary; `agent(*flags)` starts `microsched
    harvest --listen 127.0.0.1:0 ... --json`. Whatever is still running at the end is killed,
    the agent first."""
    started: list[subprocess.Popen] = []
    primary = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    started.append(primary)
    sec = subprocess.Popen([sys.executable, "-c", SLEEPER])
    started.append(sec)

    def agent(*flags: str) -> subprocess.Popen:
        a = subprocess.Popen([sys.executable, "-m", "microsched", "harvest", "--listen", "127.0.0.1:0", *flags, "--json"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
        started.append(a)
        return a

    try:
        assert wait_for(lambda: len(os.listdir(f"/proc/{sec.pid}/task")) >= 3)
        yield SimpleNamespace(primary=primary, sec=sec, agent=agent)
    finally:
        for p in reversed(started):
            if p.poll() is None:
                p.kill()
                p.wait()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_registration_and_restore_on_signal(tmp_path: Path, sig: int, tenants) -> None:
    primary, sec = tenants.primary, tenants.sec
    before = allowed(sec.pid)
    log = tmp_path / "log.jsonl"
    agent = tenants.agent("--poll-ms", "5", "--controller", '{"kind": "harvest_static", "buffer": 1}', "--log", str(log))
    addr = listening(agent)
    # The artifact's messages (string values), with the pid extension.
    assert register(addr, {"ctr_type": "Primary", "cpuList": "0-1", "LOWIDLEFREQ_THRESHOLD": "0.001",
                           "LOW_TIC": "1", "targetIdleCores": "1", "static_targetIdleCores": "2",
                           "minSecondaryCores": "0", "pid": str(primary.pid)}) == b"ACK\0"
    assert register(addr, {"ctr_type": "Secondary", "pid": str(sec.pid)}) == b"ACK\0"
    assert register(addr, {"ctr_type": "Secondary"}) == b"NAK\0"
    # The idle Primary keeps a buffer of 1 idle core and lends the other, its highest (1).
    assert wait_for(lambda: set(allowed(sec.pid).values()) == {"1"}), allowed(sec.pid)
    agent.send_signal(sig)
    out, err = agent.communicate(timeout=20)
    assert agent.returncode == 0, err.decode()
    rep = json.loads(out)
    assert rep["stopped_by"] == "signal"
    assert rep["restore"]["errors"] == [] and rep["restore"]["affinities"] == 3
    assert rep["actuation"]["stray_threads"] == 0
    assert allowed(sec.pid) == before
    assert state(sec.pid) != "T"
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert events[-1]["event"] == "end"
    assert any(e["event"] == "lend" and e["cpu"] == 1 for e in events), events
    assert any(e["event"] == "refused" for e in events)


def test_bad_options_are_one_line_errors() -> None:
    r = subprocess.run([sys.executable, "-m", "microsched", "harvest", "--primary", "1", "--primary-cores", "0-9999"],
                       capture_output=True, text=True, env=ENV, timeout=60)
    assert r.returncode == 2 and "not all online" in r.stderr
    r = subprocess.run([sys.executable, "-m", "microsched", "harvest", "--controller", '{"kind": "harvest_cfs"}'],
                       capture_output=True, text=True, env=ENV, timeout=60)
    assert r.returncode == 2 and "--controller.kind" in r.stderr
    r = subprocess.run([sys.executable, "-m", "microsched", "harvest", "--listen", "0.0.0.0:10101"],
                       capture_output=True, text=True, env=ENV, timeout=60)
    assert r.returncode == 2 and "loopback" in r.stderr


def test_autogroup_line_parsed_or_skipped() -> None:
    """CI's kernel exposes /proc/self/autogroup empty: the end-to-end run then goes without the
    nice instead of failing (it did, with an IndexError)."""
    sys.path.insert(0, str(REPO / "python"))
    from microsched.harvest_agent import autogroup_nice_of

    assert autogroup_nice_of("/autogroup-235 nice 0\n") == 0
    assert autogroup_nice_of("/autogroup-7 nice -5") == -5
    assert autogroup_nice_of("") is None
    assert autogroup_nice_of("nice") is None


def test_end_to_end_lends_when_idle_reclaims_under_load(tmp_path: Path) -> None:
    """A real Primary (2 parking workers) and a busy-loop Secondary, 3 s per load phase (about
    a minute in all on a loaded machine). Bars are wide: this machine is shared, so the figures
    (README) are measurements, the assertions qualitative."""
    sys.path.insert(0, str(REPO / "python"))
    from microsched import harvest_agent

    r = harvest_agent.run(seconds=3.0, workdir=tmp_path)
    low, high = r["harvest"]["low"], r["harvest"]["high"]
    rep = r["report"]
    # Every affinity restored at exit (SIGTERM), the Secondary resumed, no thread ever left
    # outside its mask.
    assert r["agent_exit"] == 0, r["agent_stderr"]
    assert r["affinity"]["restored"], r["affinity"]
    assert r["affinity"]["secondary_state_after"] != "T"
    assert rep["restore"]["errors"] == [] and rep["actuation"]["stray_threads"] == 0
    assert rep["actuation"]["errors"] == []
    # Low load: the idle core is lent most of the time; high load: taken back.
    assert low["lent_cores"] > 0.3, low
    assert high["lent_cores"] < 0.75 * low["lent_cores"], (low, high)
    # The Secondary has no core of its own: whatever CPU it gets comes from harvesting.
    assert low["secondary_cpu_s"] > 0.1, low
    assert low["secondary_cpu_s"] > high["secondary_cpu_s"], (low, high)
    # The Primary's p99 within a wide margin of its standalone p99: 5x + 5 poll periods. A
    # Primary thread woken on a lent core waits for the monitor's next read (up to a poll, 5 ms
    # here, where the artifact busy-polls) plus the eviction, and at high load such waits come in
    # runs while the buffer waxes; scheduling noise on this shared 2-CPU machine is milliseconds,
    # and the agent's monitor competes with the Primary for the same 2 CPUs (the artifact gives
    # its monitor and balancer cores of their own).
    # A phase whose standalone run did not carry its load (other tenants took the CPUs) has no
    # standalone p99 to compare with: it is reported, not compared.
    compared = 0
    for phase in ("low", "high"):
        alone = r["standalone"][phase]
        if alone["completed"] < 0.95 * alone["rps"]:
            print(f"{phase}: standalone overloaded by other tenants ({alone}); p99 not compared")
            continue
        compared += 1
        assert r["harvest"][phase]["p99_us"] <= 5 * alone["p99_us"] + 5 * r["poll_ms"] * 1000, (phase, alone, r["harvest"][phase])
    assert compared > 0, r["standalone"]


# --- Kubernetes ----------------------------------------------------------------------------

MANIFESTS = REPO / "deploy" / "kubernetes"


def pod(uid: str, role: str | None, phase: str = "Running", **ann: str) -> dict:
    labels = {"microsched.io/harvest": role} if role else {"app": "x"}
    return {"metadata": {"uid": uid, "name": f"p-{uid[:4]}", "labels": labels, "annotations": ann},
            "status": {"phase": phase}}


def test_pod_messages_follow_the_artifact() -> None:
    from microsched.harvest_k8s import message_for_pod

    p = pod("u1", "primary", **{"microsched.io/cpus": "2-9", "microsched.io/acbf-threshold": "0.002",
                                "microsched.io/min-buffer": "2"})
    assert message_for_pod(p) == {"ctr_type": "Primary", "cpuList": "2-9", "pod_id": "podu1",
                                  "LOWIDLEFREQ_THRESHOLD": "0.002", "LOW_TIC": "2"}
    assert message_for_pod(pod("u2", "secondary")) == {"ctr_type": "Secondary", "pod_id": "podu2"}
    assert message_for_pod(pod("u3", None)) is None
    assert message_for_pod(pod("u4", "secondary", phase="Pending")) is None
    assert message_for_pod(pod("u5", "primary")) is None  # no cores annotated


def test_pods_registered_by_label_from_a_fake_cgroup_tree(tmp_path: Path, tenants) -> None:
    """The whole Kubernetes path but the API server: labelled pod objects -> the artifact's
    messages by pod UID -> the agent finds the processes in a cgroup tree laid out as the
    kubelet does (v1 cgroupfs for the Secondary, v2 systemd for the Primary) -> lends a core to
    the Secondary pod's process -> restores it on SIGTERM."""
    from microsched import harvest_k8s

    primary, sec = tenants.primary, tenants.sec
    before = allowed(sec.pid)
    su, pu = "8f0e5a4c-0000-4000-8000-00000000000a", "8f0e5a4c-0000-4000-8000-00000000000b"
    root = tmp_path / "cgroup"
    d = root / "cpuset" / "kubepods" / "besteffort" / f"pod{su}" / "c0ffee"
    d.mkdir(parents=True)
    (d / "cgroup.procs").write_text(f"{sec.pid}\n")
    d = root / "unified" / "kubepods.slice" / f"kubepods-pod{pu.replace('-', '_')}.slice" / "cri-containerd-1.scope"
    d.mkdir(parents=True)
    (d / "cgroup.procs").write_text(f"{primary.pid}\n")
    agent = tenants.agent("--cgroup-root", str(root), "--controller", '{"kind": "harvest_static", "buffer": 1}',
                          "--log", str(tmp_path / "log.jsonl"))
    addr = listening(agent)
    pods = [pod(pu, "primary", **{"microsched.io/cpus": "0-1"}), pod(su, "secondary"),
            pod("00000000-0000-0000-0000-000000000000", "secondary"),  # no cgroup: refused, retried
            pod("11111111-0000-0000-0000-000000000000", None)]
    done: set[str] = set()
    assert harvest_k8s.register_once(pods, addr, done, log=lambda m: None) == 2
    assert done == {pu, su}
    assert harvest_k8s.register_once(pods, addr, done, log=lambda m: None) == 0  # registered once
    assert wait_for(lambda: set(allowed(sec.pid).values()) == {"1"}), allowed(sec.pid)
    agent.send_signal(signal.SIGTERM)
    out, err = agent.communicate(timeout=20)
    assert agent.returncode == 0, err.decode()
    rep = json.loads(out)
    assert rep["primaries"][0]["pids"] == [primary.pid]
    assert rep["secondary"]["pids"] == [sec.pid]
    assert allowed(sec.pid) == before


def test_daemonset_manifest_is_valid_kubernetes() -> None:
    """Against the Kubernetes OpenAPI schema (kubernetes-validate, strict: unknown fields
    rejected), and its agent arguments and controller against the CLI."""
    import yaml

    docs = [d for f in ("harvest-agent.yaml", "example-pods.yaml")
            for d in yaml.safe_load_all((MANIFESTS / f).read_text()) if d]
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    # The agent accepts the DaemonSet's arguments and the ConfigMap's controller.
    from microsched.cli import build_parser

    agent = ds["spec"]["template"]["spec"]["containers"][0]
    args = build_parser().parse_args(agent["command"][1:] + agent["args"])
    assert args.listen == "127.0.0.1:10101"
    ctl = json.loads(cm["data"]["controller.json"])
    r = subprocess.run([sys.executable, "-m", "microsched", "harvest", "--controller", json.dumps(ctl), "--duration", "0.1",
                        "--json"], capture_output=True, text=True, env=ENV, timeout=60)
    assert r.returncode == 0, r.stderr
    reg = ds["spec"]["template"]["spec"]["containers"][1]
    build_parser().parse_args(reg["command"][1:] + reg["args"])
    kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate (PyPI) is not installed")
    for d in docs:
        kv.validate(d, kv.latest_version(), strict=True)


def test_exited_primary_stops_lending_and_overlaps_are_refused(tmp_path: Path, tenants) -> None:
    primary, sec = tenants.primary, tenants.sec
    agent = tenants.agent("--controller", '{"kind": "harvest_static", "buffer": 1}', "--log", str(tmp_path / "log.jsonl"))
    addr = listening(agent)
    assert register(addr, {"ctr_type": "Primary", "cpuList": "0-1", "pid": primary.pid}) == b"ACK\0"
    # A second Primary on the same cores, and one whose process does not exist.
    assert register(addr, {"ctr_type": "Primary", "cpuList": "1", "pid": primary.pid}) == b"NAK\0"
    assert register(addr, {"ctr_type": "Secondary", "pid": 999999999}) == b"NAK\0"
    assert register(addr, {"ctr_type": "Secondary", "pid": sec.pid}) == b"ACK\0"
    assert wait_for(lambda: state(sec.pid) != "T" and set(allowed(sec.pid).values()) == {"1"})
    # The Primary exits: its core is no longer lent, the Secondary (no core of its own) stops.
    primary.kill()
    primary.wait()
    assert wait_for(lambda: "primary_exited" in (tmp_path / "log.jsonl").read_text())
    assert wait_for(lambda: state(sec.pid) == "T"), state(sec.pid)
    agent.send_signal(signal.SIGTERM)
    out, err = agent.communicate(timeout=20)
    assert agent.returncode == 0, err.decode()
    assert state(sec.pid) != "T"
    events = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert sum(e["event"] == "refused" for e in events) == 2


def test_irqs_found_by_name_in_proc_interrupts() -> None:
    from microsched.cli.harvest import irqs_matching

    text = """           CPU0       CPU1
 24:          1          0  IO-APIC   5-edge      ACPI:Ged
 29:        120       4003  PCI-MSIX-0000:00:02.0   0-edge      virtio1-input.0
 30:          7         88  PCI-MSIX-0000:00:02.0   1-edge      virtio1-output.0
NMI:          0          0   Non-maskable interrupts
"""
    assert irqs_matching(["virtio1"], text) == [29, 30]
    assert irqs_matching(["input"], text) == [29]
    assert irqs_matching(["mlx5"], text) == []
