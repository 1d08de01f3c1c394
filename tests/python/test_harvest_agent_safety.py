"""Issue 25, the real agent's safety: no false lend into a cpuset that lacks the core (cgroup v1
and v2 layouts, in a fake cgroup tree so it runs anywhere; the real-kernel v1 case is
crates/microsched-harvest/tests/harvest/cpuset_v1.rs), the registration sidecar bringing a restarted
agent its pods back (re-sent registrations must not duplicate anything), the Dockerfile that
builds the DaemonSet's image, and the files `microsched harvest --help` cites."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import REPO
from test_harvest_agent import allowed as thread_cpus, state, wait_for

LINUX_2CPU = pytest.mark.skipif(not sys.platform.startswith("linux") or (os.cpu_count() or 1) < 2,
                                reason="the agent needs Linux and 2 CPUs")
ENV = {**os.environ, "PYTHONPATH": str(REPO / "python")}
SLEEPER = "import time; time.sleep(60)"


def allowed(pid: int) -> set[str]:
    """The distinct CPU lists of ``pid``'s threads."""
    return set(thread_cpus(pid).values())


def events(log: Path, kind: str) -> list[dict]:
    if not log.exists():
        return []
    return [e for e in (json.loads(line) for line in log.read_text().splitlines() if line.strip()) if e["event"] == kind]


@pytest.fixture
def procs():
    """Starts processes (`procs(argv, **popen)`), kills what is left at the end, last first."""
    started: list[subprocess.Popen] = []

    def start(argv: list[str], **kw) -> subprocess.Popen:
        p = subprocess.Popen(argv, **kw)
        started.append(p)
        return p

    yield start
    for p in reversed(started):
        if p.poll() is None:
            p.kill()
            p.wait()


# --- No false lend ---------------------------------------------------------------------------

def own_cgroup_paths(pid: int) -> tuple[str | None, str | None]:
    """The process's cgroup v1 cpuset path and v2 path, as /proc/PID/cgroup gives them."""
    v1 = v2 = None
    for line in open(f"/proc/{pid}/cgroup").read().splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if "cpuset" in parts[1].split(","):
            v1 = parts[2]
        elif parts[0] == "0" and parts[1] == "":
            v2 = parts[2]
    return v1, v2


def fake_cpuset(root: Path, pid: int, layout: str) -> Path:
    """A cgroup tree at `root` (the agent's --cgroup-root) in which process `pid`'s cgroup (its
    real path from /proc/PID/cgroup, mirrored) has a cpuset of CPU 0 only: the lendable core 1
    excluded, as a Kubernetes shared-pool container's cpuset excludes a Primary's cores."""
    v1, v2 = own_cgroup_paths(pid)
    if layout == "v1":
        rel = v1
        base = root / "cpuset"
        base.mkdir(parents=True)
        (base / "cpuset.cpus").write_text("0-1\n")
        (base / "cpuset.effective_cpus").write_text("0-1\n")
        files = ("cpuset.cpus", "cpuset.effective_cpus")
    else:
        rel = v2
        base = root
        base.mkdir(parents=True, exist_ok=True)
        (base / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
        (base / "cpuset.cpus.effective").write_text("0-1\n")
        files = ("cpuset.cpus", "cpuset.cpus.effective")
    if rel is None:
        pytest.skip(f"this kernel shows no cgroup {layout} line for the process")
    d = base / rel.strip("/")
    d.mkdir(parents=True, exist_ok=True)
    for f in files:
        (d / f).write_text("0\n")
    return d


@LINUX_2CPU
@pytest.mark.parametrize("layout", ["v1", "v2"])
@pytest.mark.parametrize("no_cpuset", [True, False])
def test_secondary_whose_cpuset_lacks_the_lent_core_is_refused(tmp_path: Path, procs, layout: str,
                                                              no_cpuset: bool) -> None:
    """The issue's false lend: before, the agent lent core 1 to a Secondary whose cpuset holds
    only core 0, reported lent core-seconds and "0 stray threads" (the kernel returns the
    affinity already cut). Now the agent refuses it at start, naming the cpuset and the core —
    with --no-cpuset because it may not widen it, without because the write does not take here
    (a fake tree: the file written changes nothing the kernel enforces, as under a narrower
    parent) — and never touches the Secondary."""
    primary = procs([sys.executable, "-c", SLEEPER])
    sec = procs([sys.executable, "-c", SLEEPER])
    assert wait_for(lambda: os.path.exists(f"/proc/{sec.pid}/cgroup"))
    before = allowed(sec.pid)
    d = fake_cpuset(tmp_path / "cg", sec.pid, layout)
    r = subprocess.run([sys.executable, "-m", "microsched", "harvest", "--primary", str(primary.pid),
                        "--primary-cores", "0-1", "--secondary", str(sec.pid), "--cgroup-root", str(tmp_path / "cg"),
                        "--controller", '{"kind": "harvest_static", "buffer": 1}', "--duration", "1", "--json",
                        *(["--no-cpuset"] if no_cpuset else [])],
                       capture_output=True, text=True, env=ENV, timeout=60)
    assert r.returncode == 2, (r.stdout, r.stderr)
    # stderr: the decision log's JSON lines (start, primary), then the error, one line.
    lines = [line for line in r.stderr.splitlines() if line.strip() and not line.startswith("{")]
    assert len(lines) == 1, r.stderr
    err = lines[0]
    assert f"Secondary pid {sec.pid}" in err and "not on 1" in err and "in name only" in err, err
    assert ("cpuset.effective_cpus" if layout == "v1" else "cpuset.cpus.effective") in err, err
    if no_cpuset:
        assert "--no-cpuset" in err, err
    else:
        # Either no file to write (the root cgroup) or a write that did not take, undone.
        assert "no cpuset.cpus to widen" in err or "still reads" in err, err
        assert (d / "cpuset.cpus").read_text().strip() == "0"
    assert "Traceback" not in r.stderr
    assert allowed(sec.pid) == before and state(sec.pid) != "T"


@LINUX_2CPU
def test_secondary_whose_cpuset_holds_the_cores_is_lent_to(tmp_path: Path, procs) -> None:
    """The same fake tree with core 1 in the Secondary's cpuset: registered and lent core 1
    (the check does not refuse what the kernel allows)."""
    primary = procs([sys.executable, "-c", SLEEPER])
    sec = procs([sys.executable, "-c", SLEEPER])
    assert wait_for(lambda: os.path.exists(f"/proc/{sec.pid}/cgroup"))
    v1, _ = own_cgroup_paths(sec.pid)
    if v1 is None:
        pytest.skip("no cgroup v1 cpuset line")
    d = fake_cpuset(tmp_path / "cg", sec.pid, "v1")
    for f in ("cpuset.cpus", "cpuset.effective_cpus"):
        (d / f).write_text("0-1\n")
    log = tmp_path / "log.jsonl"
    agent = procs([sys.executable, "-m", "microsched", "harvest", "--primary", str(primary.pid), "--primary-cores", "0-1",
                   "--secondary", str(sec.pid), "--cgroup-root", str(tmp_path / "cg"), "--controller",
                   '{"kind": "harvest_static", "buffer": 1}', "--log", str(log), "--json"],
                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    assert wait_for(lambda: allowed(sec.pid) == {"1"}, 30), (allowed(sec.pid), log.read_text() if log.exists() else "")
    agent.send_signal(signal.SIGTERM)
    out, err = agent.communicate(timeout=20)
    assert agent.returncode == 0, err.decode()
    rep = json.loads(out)
    assert rep["primaries"][0]["lends"] >= 1 and rep["primaries"][0]["refused_lends"] == 0
    assert rep["lend_refusals"] == [] and not events(log, "lend_refused")


# --- Restarts and idempotent registrations ---------------------------------------------------

def pod(uid: str, role: str, **ann: str) -> dict:
    return {"metadata": {"uid": uid, "name": f"p-{uid[:4]}", "labels": {"microsched.io/harvest": role},
                         "annotations": ann}, "status": {"phase": "Running"}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FakeAgent:
    """The agent's listener as far as the sidecar can tell: ACK\\0 to every message, each
    recorded; `restart()` forgets them all, as a restarted agent does."""

    def __init__(self) -> None:
        self.srv = socket.socket()
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(16)
        self.addr = "127.0.0.1:%d" % self.srv.getsockname()[1]
        self.got: list[dict] = []
        self.lock = threading.Lock()
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            with c:
                buf = b""
                while True:
                    try:
                        msg = json.loads(buf)
                        break
                    except ValueError:
                        chunk = c.recv(4096)
                        if not chunk:
                            msg = None
                            break
                        buf += chunk
                if msg is not None:
                    with self.lock:
                        self.got.append(msg)
                c.sendall(b"ACK\0")

    def restart(self) -> None:
        with self.lock:
            self.got.clear()

    def registered(self) -> set[str]:
        with self.lock:
            return {m["pod_id"] for m in self.got}


def test_watch_re_sends_every_pod_each_pass() -> None:
    """The sidecar's loop: every pass sends every labelled pod, so an agent that restarted
    between passes has them back at the next one. Before, it kept a set of UIDs that only
    grew, and a restarted agent never saw its pods again."""
    from microsched import harvest_k8s

    agent = FakeAgent()
    pods = [pod("a1", "primary", **{"microsched.io/cpus": "2-3"}), pod("b2", "secondary")]
    passes = []

    def list_pods(node: str) -> list[dict]:
        passes.append(agent.registered())
        if len(passes) == 2:
            agent.restart()
        return pods

    lines: list[str] = []
    done = harvest_k8s.watch(agent.addr, "node", every_s=0.01, list_pods=list_pods, passes=3, log=lines.append)
    assert done == {"a1", "b2"}
    # Before pass 2 the agent had both; it then restarted (forgot them); pass 2 sent them again.
    assert passes[1] == {"poda1", "podb2"}
    assert agent.registered() == {"poda1", "podb2"}
    # Logged once each, not at every pass.
    assert sum(line.startswith("registered") for line in lines) == 2, lines
    # A pod no longer listed leaves `done`; a refused one is retried and said so.
    done2 = {"gone", "a1"}
    assert harvest_k8s.register_once(pods[:1], agent.addr, done2, log=lambda m: None) == 0
    assert done2 == {"a1"}
    # Bad pod objects are skipped, not raised on.
    assert harvest_k8s.message_for_pod({"metadata": {"labels": {"microsched.io/harvest": "secondary"}},
                                        "status": {"phase": "Running"}}) is None


@LINUX_2CPU
def test_restarted_agent_gets_its_pods_back_and_resends_add_nothing(tmp_path: Path, procs) -> None:
    """The real agent behind the real sidecar code, over a fake cgroup tree in the kubelet's
    layouts: passes re-send both pods (acknowledged, no second Primary or Secondary); the agent
    is stopped and another started on the same port; the next pass registers both with it, and
    it lends core 1 to the Secondary again."""
    from microsched import harvest_k8s

    primary = procs([sys.executable, "-c", SLEEPER])
    sec = procs([sys.executable, "-c", SLEEPER])
    before = allowed(sec.pid)
    su, pu = "8f0e5a4c-0000-4000-8000-00000000001a", "8f0e5a4c-0000-4000-8000-00000000001b"
    root = tmp_path / "cgroup"
    d = root / "cpuset" / "kubepods" / "besteffort" / f"pod{su}" / "c0ffee"
    d.mkdir(parents=True)
    (d / "cgroup.procs").write_text(f"{sec.pid}\n")
    d = root / "unified" / "kubepods.slice" / f"kubepods-pod{pu.replace('-', '_')}.slice" / "cri-containerd-1.scope"
    d.mkdir(parents=True)
    (d / "cgroup.procs").write_text(f"{primary.pid}\n")
    pods = [pod(pu, "primary", **{"microsched.io/cpus": "0-1"}), pod(su, "secondary")]
    addr = f"127.0.0.1:{free_port()}"

    def agent(log: Path) -> subprocess.Popen:
        a = procs([sys.executable, "-m", "microsched", "harvest", "--listen", addr, "--cgroup-root", str(root),
                   "--controller", '{"kind": "harvest_static", "buffer": 1}', "--log", str(log), "--json"],
                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
        assert wait_for(lambda: bool(events(log, "start")), 30), a.stderr and a.poll()
        return a

    def stop(a: subprocess.Popen) -> dict:
        a.send_signal(signal.SIGTERM)
        out, err = a.communicate(timeout=20)
        assert a.returncode == 0, err.decode()
        return json.loads(out)

    done: set[str] = set()
    quiet = lambda m: None  # noqa: E731
    log1 = tmp_path / "agent1.jsonl"
    a1 = agent(log1)
    assert harvest_k8s.register_once(pods, addr, done, log=quiet) == 2
    for _ in range(3):
        assert harvest_k8s.register_once(pods, addr, done, log=quiet) == 0
    assert done == {pu, su}
    assert wait_for(lambda: allowed(sec.pid) == {"1"}), allowed(sec.pid)
    rep1 = stop(a1)
    assert len(rep1["primaries"]) == 1 and rep1["primaries"][0]["pids"] == [primary.pid]
    assert rep1["secondary"]["pids"] == [sec.pid]
    assert len(events(log1, "primary")) == 1 and len(events(log1, "secondary")) == 1
    assert not events(log1, "refused"), events(log1, "refused")
    assert allowed(sec.pid) == before
    # The agent restarts (same address); the sidecar's next pass brings it both pods.
    log2 = tmp_path / "agent2.jsonl"
    a2 = agent(log2)
    harvest_k8s.register_once(pods, addr, done, log=quiet)
    assert len(events(log2, "primary")) == 1 and len(events(log2, "secondary")) == 1
    assert wait_for(lambda: allowed(sec.pid) == {"1"}), (allowed(sec.pid), log2.read_text())
    harvest_k8s.register_once(pods, addr, done, log=quiet)
    rep2 = stop(a2)
    assert len(rep2["primaries"]) == 1 and rep2["secondary"]["pids"] == [sec.pid]
    assert rep2["primaries"][0]["lends"] >= 1
    assert rep2["restore"]["errors"] == [] and allowed(sec.pid) == before


# --- The image and the files --help cites ---------------------------------------------------

def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out, cur = [], ""
    for line in text.splitlines():
        s = line.strip()
        if not cur and (not s or s.startswith("#")):
            continue
        if s.startswith("#"):
            continue
        cur += " " + s[:-1] if s.endswith("\\") else " " + s
        if not s.endswith("\\"):
            word, _, rest = cur.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
            cur = ""
    return out


def dockerignored(rel: str, patterns: list[str]) -> bool:
    from fnmatch import fnmatch

    parts = rel.split("/")
    for p in patterns:
        p = p.rstrip("/")
        if p.startswith("**/"):
            if any(fnmatch(x, p[3:]) for x in parts):
                return True
        elif fnmatch(rel, p) or fnmatch(parts[0], p):
            return True
    return False


def test_dockerfile_builds_the_image_from_the_repository() -> None:
    """No registry here to build it (and no Docker daemon): the Dockerfile is checked instead —
    every COPY source exists in the context and is not excluded by .dockerignore, what the wheel
    build needs is copied (pyproject.toml's readme, license files, Cargo workspace members,
    python-source), the wheel is built from those sources, and the entrypoint is `microsched
    harvest`, as the DaemonSet expects of microsched:latest. MICROSCHED_DOCKER_BUILD=1 builds it
    for real where a daemon and registry are reachable."""
    import tomllib

    text = (REPO / "Dockerfile").read_text()
    ins = dockerfile_instructions(text)
    ignore = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    copied: list[str] = []
    stages = [a for w, a in ins if w == "FROM"]
    assert len(stages) == 2 and " AS build" in stages[0]
    for word, args in ins:
        if word != "COPY" or "--from=" in args:
            continue
        if args.startswith("["):
            srcs = json.loads(args)[:-1]
        else:
            srcs = [a for a in shlex.split(args) if not a.startswith("--")][:-1]
        for src in srcs:
            assert (REPO / src).exists(), f"COPY {src}: not in the repository"
            assert not dockerignored(src, ignore), f"COPY {src}: excluded by .dockerignore"
            copied.append(src.rstrip("/"))

    def is_copied(path: str) -> bool:
        return any(path == c or path.startswith(c + "/") for c in copied)

    py = tomllib.loads((REPO / "pyproject.toml").read_text())
    needed = ["pyproject.toml", "Cargo.toml", "Cargo.lock", py["project"]["readme"], *py["project"]["license-files"],
              py["tool"]["maturin"]["manifest-path"], py["tool"]["maturin"]["python-source"]]
    needed += tomllib.loads((REPO / "Cargo.toml").read_text())["workspace"]["members"]
    for path in needed:
        assert is_copied(path), f"{path}: the wheel build needs it and no COPY brings it"
    # Sources the crates read at build time must not be ignored (only build output is).
    for path in ["crates/microsched-harvest/src/cpuset.rs", "python/microsched/cli/harvest.py"]:
        assert not dockerignored(path, ignore), path
    assert dockerignored("target/release/x", ignore) and dockerignored("python/microsched/_native.abi3.so", ignore)
    runs = " ".join(a for w, a in ins if w == "RUN")
    assert "pip wheel" in runs and " ." in runs and "pip install" in runs
    entry = [json.loads(a) for w, a in ins if w == "ENTRYPOINT"]
    assert entry == [["microsched", "harvest"]]
    # The DaemonSet runs that image with `microsched harvest` / `microsched harvest-pods`.
    ds = (REPO / "deploy" / "kubernetes" / "harvest-agent.yaml").read_text()
    assert "image: microsched:latest" in ds and "docker build -t microsched:latest ." in ds
    if os.environ.get("MICROSCHED_DOCKER_BUILD") == "1":
        r = subprocess.run(["docker", "build", "-t", "microsched:test", str(REPO)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-3000:]
        r = subprocess.run(["docker", "run", "--rm", "microsched:test"], capture_output=True, text=True)
        assert r.returncode == 0 and "--primary-cores" in r.stdout, r.stderr


def cited_paths(text: str) -> list[str]:
    """Repository paths (relative, under a top-level directory) in a help text."""
    tops = "|".join(p.name for p in REPO.iterdir() if p.is_dir() and not p.name.startswith("."))
    return re.findall(rf"(?<![\w/.-])((?:{tops})/[\w./-]*)", text)


def test_files_the_help_cites_exist() -> None:
    """`microsched harvest --help` cited experiments/harvest/agent-acbf.json, which did not
    exist; every repository path in the agent's and the sidecar's help must exist, the
    controller table it cites must run, and the DaemonSet's ConfigMap must hold the same."""
    import yaml

    from microsched.cli.harvest import DESCRIPTION, PODS_DESCRIPTION

    helps = []
    for cmd in ("harvest", "harvest-pods"):
        r = subprocess.run([sys.executable, "-m", "microsched", cmd, "--help"], capture_output=True, text=True,
                           env=ENV, timeout=60)
        assert r.returncode == 0, r.stderr
        helps.append(r.stdout)
    paths = set(cited_paths("\n".join(helps + [DESCRIPTION, PODS_DESCRIPTION])))
    assert "deploy/controllers/agent-acbf.json" in paths and "deploy/kubernetes/" in paths, paths
    for p in paths:
        assert (REPO / p.rstrip(".")).exists(), f"--help cites {p}, which does not exist"
    ctl = json.loads((REPO / "deploy" / "controllers" / "agent-acbf.json").read_text())
    cm = next(d for d in yaml.safe_load_all((REPO / "deploy" / "kubernetes" / "harvest-agent.yaml").read_text())
              if d and d["kind"] == "ConfigMap")
    assert json.loads(cm["data"]["controller.json"]) == ctl
    if sys.platform.startswith("linux"):
        r = subprocess.run([sys.executable, "-m", "microsched", "harvest", "--controller",
                            str(REPO / "deploy" / "controllers" / "agent-acbf.json"), "--duration", "0.1", "--json"],
                           capture_output=True, text=True, env=ENV, timeout=60)
        assert r.returncode == 0, r.stderr
