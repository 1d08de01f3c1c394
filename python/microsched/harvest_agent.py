"""The harvesting agent on this machine, end to end (the test and the README's figures): a real
Primary (``microsched serve`` with parking workers) under the real load generator, a CPU-bound
Secondary (a Python busy loop, one thread), and ``microsched harvest`` between them.

Phases, each one ``microsched loadgen`` run against the same server:
  standalone low, standalone high  (no Secondary, no agent: the Primary's own p99)
  harvest low, harvest high        (the Secondary runs only on cores the agent lends)
then the agent is stopped with SIGTERM and every Secondary thread's affinity is read back.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from . import real
from .real import _cli, _stop, _wait_ready

HERE = Path(__file__).resolve().parents[2]
# The Primary: the real runtime's server with 2 worker threads ("cores") that PARK when idle
# (Shenango's allocator: a worker with nothing to do for its poll period parks in a futex), so
# an idle core is idle for the kernel too — a Primary whose threads sleep between requests, not
# a spinning one, whose cores would never look idle. Service: exponential, mean 200 µs
# (MySQL-like "hundreds of µs"): on this 2-CPU machine the load generator, the server's
# controller thread and the loopback path share the CPUs, and their per-request cost must stay
# small next to the service time. The load is set per phase. (Kept here rather than under
# experiments/: it is a real-runtime fixture, not a simulated scenario of the golden set.)
PRIMARY_SCENARIO = {
    "name": "harvest-agent-primary", "duration_ms": 6000, "warmup_ms": 500, "slo_us": 5000,
    "server": {"max_cores": 2}, "network": {"rtt_us": 50}, "clients": {"sessions": 16}, "load": {"rps": 500},
    "workload": {"types": [{"name": "exp200", "service": {"dist": "exponential", "mean_us": 200}}]},
    "policy": {"allocator": {"kind": "shenango"}, "overload": {"kind": "none"}},
    "runtime": {"request_timeout_ms": 5000, "tick_us": 50},
}
# The artifact's variant of ACBF, scaled to 2 cores and short windows: buffer in [1, 2] (one
# core lent at most), 250 ms windows, and this Primary's threshold. The threshold is per
# application in the artifact (memcached 0.001 ... Xapian 0.33, sent at registration); this one
# is above the largest all-busy EWMA measured here at low load (0.11-0.23, with a 5 ms monitor
# whose "busy" is coarse); at high load it measured 0.13-0.55, so the buffer grows in some runs,
# and in the others the core comes back through demand evictions.
CONTROLLER = {"kind": "harvest_acbf", "variant": "artifact", "min_buffer": 1, "max_buffer": 2,
              "window_ms": 250.0, "threshold": 0.3}
# Low: 0.1 of the Primary's 2 cores; high: 0.5 (MySQL-like 200 µs requests; the load generator
# and the loopback path take about as much again).
LOW_RPS, HIGH_RPS = 500, 2500
# The test's processes (Primary, load generator, agent, Secondary alike: one session, so one
# scheduler autogroup) run with the autogroup's nice at -5 when root, for the run only: this
# machine is shared with other sessions' builds (load average ~16 on 2 CPUs measured), each an
# autogroup of its own that CFS treats as one equal tenant, so that without it the Primary got
# a sixth of a CPU and was overloaded at 0.6 cores of load. Within the group, Primary and
# Secondary keep equal priority, as two normal tenants in the paper.
AUTOGROUP_NICE = -5
# Each phase's first 1.5 s are warm-up, standalone and harvesting alike: the p99 compared is
# the steady state at that load (as the paper's Fig. 5), not the controller's step response
# (its 250 ms windows and the EWMA take ~1-1.25 s to wax after a step from low to high load;
# the lend / evict events of the log show that transient).
WARMUP_S = 1.5
SECONDARY = "import time\nwhile True:\n    pass\n"


def cpu_s(pid: int) -> float:
    f = open(f"/proc/{pid}/stat").read()
    rest = f[f.rfind(")") + 2:].split()
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


def allowed(pid: int) -> dict[int, str]:
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            for line in open(f"/proc/{pid}/task/{tid}/status"):
                if line.startswith("Cpus_allowed_list:"):
                    out[int(tid)] = line.split(":", 1)[1].strip()
        except OSError:
            pass
    return out


def _state(pid: int) -> str:
    f = open(f"/proc/{pid}/stat").read()
    return f[f.rfind(")") + 2]


def _loadgen(primary: Path, addr: str, rps: int, seconds: float) -> dict:
    """One load phase, in this process (no start-up delay); the measured window in unix time."""
    r = real.loadgen(str(primary), addr, overrides=[f"load.rps={rps}", f"duration_ms={int(seconds * 1000)}",
                                                    f"warmup_ms={int(WARMUP_S * 1000)}"])
    s = r["summary"]
    lat = s["latency_us"]
    return {"rps": rps, "p50_us": lat["p50"], "p99_us": lat["p99"], "completed": s.get("throughput_rps"),
            "window_unix": [x / 1e9 for x in r["window_unix_ns"]]}


def _lent_s(events: list[dict], t0: float, t1: float) -> float:
    """Core-seconds lent within [t0, t1] (agent clock), from the lend / evict events."""
    total, lent, since = 0.0, set(), None
    def close(upto: float) -> None:
        nonlocal total
        if since is not None and lent:
            a, b = max(since, t0), min(upto, t1)
            if b > a:
                total += (b - a) * len(lent)
    for e in events:
        if e.get("event") not in ("lend", "evict"):
            continue
        close(e["t_s"])
        since = e["t_s"]
        lent = set(int(c) for c in e["lent"].split(",") if c)
    close(t1)
    return total


def autogroup_nice_of(text: str) -> int | None:
    """The nice of a `/proc/<pid>/autogroup` line ("/autogroup-235 nice 0"), None if unreadable."""
    m = re.fullmatch(r"\S+ nice (-?\d+)", text.strip())
    return int(m.group(1)) if m else None


def run(seconds: float = 5.0, low_rps: int = LOW_RPS, high_rps: int = HIGH_RPS, controller: dict | None = None,
        poll_ms: float = 5.0, workdir: str | os.PathLike = ".", autogroup_nice: int | None = None) -> dict[str, Any]:
    if autogroup_nice is None:
        autogroup_nice = AUTOGROUP_NICE if os.geteuid() == 0 else 0
    ag = Path("/proc/self/autogroup")
    ag_before = None
    if autogroup_nice and ag.exists():
        # Kernels without CONFIG_SCHED_AUTOGROUP (or sandboxes) expose the file empty or in
        # another format: then the run goes without the nice, as for a non-root user.
        try:
            nice_now = autogroup_nice_of(ag.read_text())
            if nice_now is not None:
                ag.write_text(str(autogroup_nice))
                ag_before = str(nice_now)
        except OSError:
            ag_before = None
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    primary = workdir / "primary.json"
    primary.write_text(json.dumps(PRIMARY_SCENARIO, indent=1))
    env = dict(os.environ)
    env["PYTHONPATH"] = str(HERE / "python") + os.pathsep + env.get("PYTHONPATH", "")
    procs: list[subprocess.Popen] = []
    res: dict[str, Any] = {"autogroup_nice": autogroup_nice if ag_before is not None else 0, "seconds_per_phase": seconds, "controller": controller or CONTROLLER, "poll_ms": poll_ms}
    try:
        server = subprocess.Popen(_cli("serve", str(primary), "--addr", "127.0.0.1:0"), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=env)
        procs.append(server)
        addr = _wait_ready(server)
        res["standalone"] = {"low": _loadgen(primary, addr, low_rps, seconds), "high": _loadgen(primary, addr, high_rps, seconds)}
        for p in res["standalone"].values():
            p.pop("window_unix")

        sec = subprocess.Popen([sys.executable, "-c", SECONDARY])
        procs.append(sec)
        time.sleep(0.3)
        before = allowed(sec.pid)
        log = workdir / "harvest.jsonl"
        report = workdir / "harvest_report.json"
        for f in (log, report):
            f.unlink(missing_ok=True)
        agent = subprocess.Popen(
            _cli("harvest", "--primary", str(server.pid), "--primary-cores", "0-1", "--secondary", str(sec.pid),
                 "--controller", json.dumps(controller or CONTROLLER), "--poll-ms", str(poll_ms),
                 "--log", str(log), "--report", str(report), "--status-every", "0.5"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        procs.append(agent)
        deadline = time.monotonic() + 20
        # The first line, once whole: the agent may still be writing it.
        first = ""
        while not first and time.monotonic() < deadline:
            text = log.read_text() if log.exists() else ""
            first = text.split("\n", 1)[0] if "\n" in text else ""
            if not first:
                time.sleep(0.02)
        if not first:
            raise RuntimeError(f"the harvest agent wrote no log line in 20 s ({log}); its stderr: "
                               + (agent.stderr.read1().decode(errors="replace") if agent.poll() is not None and agent.stderr else "(still running)"))
        t_agent = json.loads(first)["unix_s"]
        phases = {}
        for name, rps in (("low", low_rps), ("high", high_rps)):
            c0, w0 = cpu_s(sec.pid), time.time()
            r = _loadgen(primary, addr, rps, seconds)
            c1, w1 = cpu_s(sec.pid), time.time()
            # Lent cores over the load generator's measured window; the Secondary's CPU time
            # over the whole phase (start-up and drain included: /proc's 10 ms ticks).
            a, b = r.pop("window_unix")
            r.update(secondary_cpu_s=c1 - c0, phase_s=w1 - w0, window=(a - t_agent, b - t_agent))
            phases[name] = r
        during = allowed(sec.pid)
        agent.send_signal(signal.SIGTERM)
        agent.wait(20)
        res["agent_exit"] = agent.returncode
        res["agent_stderr"] = agent.stderr.read().decode(errors="replace")[-2000:] if agent.stderr else ""
        after = allowed(sec.pid)
        res["affinity"] = {"before": before, "during": during, "after": after,
                           "restored": before == after, "secondary_state_after": _state(sec.pid)}
        events = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        for p in phases.values():
            t0, t1 = p.pop("window")
            p["lent_cores"] = _lent_s(events, t0, t1) / (t1 - t0)
            p["secondary_cpu_share"] = p["secondary_cpu_s"] / p["phase_s"]
            sig = [e["signal"] for e in events if e.get("event") == "status" and t0 <= e["t_s"] <= t1
                   and e.get("signal") is not None]
            p["acbf_ewma_max"] = max(sig) if sig else None
        res["harvest"] = phases
        res["report"] = json.loads(report.read_text()) if report.exists() else None
        res["log"] = str(log)
    finally:
        _stop(procs[::-1])
        if ag_before is not None:
            try:
                ag.write_text(ag_before)
            except OSError:
                pass
    return res


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--out", default="out/harvest-agent")
    a = ap.parse_args()
    r = run(seconds=a.seconds, workdir=a.out)
    for k in ("during", "before", "after"):
        r["affinity"][k] = {str(t): v for t, v in r["affinity"][k].items()}
    print(json.dumps({k: v for k, v in r.items() if k not in ("report",)}, indent=1, default=str))
    print(json.dumps({k: r["report"][k] for k in ("monitor", "ticks", "tick_cost_us_mean", "actuation", "restore", "cpuset", "primaries")}, indent=1))
