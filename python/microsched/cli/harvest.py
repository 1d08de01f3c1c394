"""``microsched harvest``: the HarvestContainers agent on this Linux machine."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .args import Formatter, duration
from .errors import CliError, sigterm_as_ctrl_c

DESCRIPTION = """\
Lend the idle cores of latency-sensitive Primary processes to Secondary processes and take
them back when the Primary needs them (HarvestContainers, NSDI'26), with the buffer controller
objects the simulator runs (--controller: harvest_acbf, harvest_static, harvest_smart).

Each --poll-ms the agent reads the Primary's cores (--activity tasks: the Primary's threads'
/proc/PID/task/TID/schedstat and stat, ns at each context switch; cpu: /proc/schedstat per CPU,
or /proc/stat's 10 ms ticks where the kernel lacks it), ticks the controller, and moves every
thread of the Secondaries with two-phase sched_setaffinity (phase 1: one running thread onto
each newly lent core; phase 2: the full mask, which migrates threads off a reclaimed core before
the call returns). A Secondary with no core left (no --secondary-cores, nothing lent) is
stopped (SIGSTOP) until a core is lent. --irq steers those IRQs onto the Secondary's cores
(root). Every change is undone at exit: affinities, cpusets, IRQ masks, SIGCONT — on
--duration, Ctrl-C and SIGTERM.

A killed agent (SIGKILL, an OOM kill) cannot undo anything, so each change is first written to
--state-file (atomically: temporary file, fsync, rename), and an agent starting on that file
puts back what the dead one left (event `repair` in the log) before it reads any mask as an
original. One live agent per state file (a lock beside it: PATH.lock).

No false lends: the kernel cuts an affinity to the process's cpuset without an error (a
Secondary in a cgroup v1 cpuset, as under Kubernetes' static CPU manager, would read back
"moved" and never run on the lent core). So the Secondary's effective cpuset (/proc/PID/cgroup,
then cpuset.effective_cpus, v2 cpuset.cpus.effective, under --cgroup-root or the cgroup mount)
must hold every core it may be lent: the agent widens its cpuset.cpus as the artifact's setup
does (pincores.sh: the Primary's cores and the dedicated one; restored at exit), or, with
--no-cpuset or where the write does not take, refuses the registration (at start: an error)
and any such lend (`lend_refused` in the log). Each affinity is also read back after the move:
a core the kernel cut is taken back at once, never counted as lent.

Registration: the flags below, and the artifact's JSON messages on --listen (loopback):
  {"ctr_type":"Primary","cpuList":"0-1","LOWIDLEFREQ_THRESHOLD":"0.001","LOW_TIC":"2",
   "static_targetIdleCores":"7","pid":"1234"}          (or "pod_id":"pod<uid>")
  {"ctr_type":"Secondary","pod_id":"pod<uid>"}          (or "pid":"5678")
each answered with ACK\\0 (NAK\\0 if refused). Pods are found from their cgroup (--cgroup-root).
A registration the agent already holds is acknowledged and changes nothing (`microsched
harvest-pods` re-sends its pods at every pass, so that a restarted agent gets them back).

The decision log (--log, JSON lines; stderr by default) has `lend` and `evict` events with the
cores lent and the actuation's duration, `lend_refused` (a core the Secondary could not run on,
and why) and `cpuset` (a cpuset widened) events, a `status` line per --status-every, and the
final report (`end`).

examples:
  microsched harvest --primary 1234 --primary-cores 0-1 --secondary 5678 \\
      --controller '{"kind":"harvest_acbf","variant":"artifact","min_buffer":1,"max_buffer":2,"window_ms":250}'
  microsched harvest --listen 127.0.0.1:10101 --controller deploy/controllers/agent-acbf.json --log harvest.jsonl
"""


def add_commands(sub: Any) -> None:
    p = sub.add_parser("harvest", help="lend a Primary's idle cores to Secondary processes (Linux agent)",
                       description=DESCRIPTION, formatter_class=Formatter)
    p.add_argument("--primary", type=int, action="append", default=[], metavar="PID",
                   help="a Primary process (repeat with --primary-cores for several Primaries)")
    p.add_argument("--primary-cores", action="append", default=[], metavar="LIST",
                   help="the CPU list of the matching --primary, e.g. 0-1")
    p.add_argument("--secondary", type=int, action="append", default=[], metavar="PID",
                   help="a Secondary process (all its threads are moved)")
    p.add_argument("--secondary-cores", default="", metavar="LIST",
                   help="cores always the Secondary's (the artifact's dedicated core); default none")
    p.add_argument("--controller", metavar="JSON|FILE",
                   help="the controller table, inline JSON or a .json/.toml file "
                        "(default {\"kind\": \"harvest_acbf\"}: the paper's variant, 60 s of observation)")
    p.add_argument("--poll-ms", type=float, default=5.0, metavar="MS",
                   help="monitor and controller period (default 5; each tick reads /proc)")
    p.add_argument("--activity", choices=["tasks", "cpu"], default="tasks",
                   help="per-core activity from the Primary's threads (tasks) or whole CPUs (cpu)")
    p.add_argument("--busy-fraction", type=float, default=0.5, metavar="F",
                   help="a held core is busy for a tick when a Primary thread runs there at the read "
                        "or it was busy this fraction of the tick (default 0.5)")
    p.add_argument("--listen", metavar="HOST:PORT",
                   help="registration listener (loopback only; the artifact's port is 10101); default off")
    p.add_argument("--cgroup-root", default="/sys/fs/cgroup", metavar="DIR",
                   help="where pods' cgroups and the Secondaries' cpusets are looked up (default /sys/fs/cgroup; "
                        "in a container, the host's cgroupfs mounted there)")
    p.add_argument("--no-cpuset", action="store_true",
                   help="never write the Secondary's cpuset (cgroup v1 or v2): a Secondary whose cpuset lacks a "
                        "core it may be lent is refused instead (the cpuset is checked either way)")
    p.add_argument("--irq", type=int, action="append", default=[], metavar="N",
                   help="steer IRQ N onto the Secondary's cores (root; stop irqbalance first)")
    p.add_argument("--irq-match", action="append", default=[], metavar="NAME",
                   help="also steer every IRQ whose /proc/interrupts line contains NAME (e.g. the NIC's "
                        "driver or interface: mlx5, eth0, virtio0-input)")
    p.add_argument("--duration", type=duration, metavar="S", help="stop after S seconds (default: until Ctrl-C/SIGTERM)")
    p.add_argument("--status-every", type=duration, default=1.0, metavar="S", help="status line period (default 1)")
    p.add_argument("--log", metavar="FILE", help="write the decision log (JSON lines) to FILE instead of stderr")
    p.add_argument("--report", metavar="FILE", help="also write the final report (JSON) to FILE")
    p.add_argument("--json", action="store_true", help="print the final report as JSON on stdout")
    p.add_argument("--state-file", default=None, metavar="FILE",
                   help="where each change is recorded before it is made, for the next agent to repair if this "
                        "one is killed (default: /var/lib/microsched/harvest-state.json as root, else "
                        "$XDG_STATE_HOME/microsched/harvest-state.json, ~/.local/state by default); one agent per file")
    p.set_defaults(func=cmd_harvest)
    add_pods_command(sub)


def _controller(text: str | None) -> Any:
    if text is None:
        return None
    s = text.strip()
    if s.startswith("{"):
        try:
            return json.loads(s)
        except json.JSONDecodeError as e:
            raise CliError(f"--controller: not valid JSON: {e}") from None
    path = Path(text)
    if not path.exists():
        raise CliError(f"--controller: {text}: no such file (give inline JSON or a .json/.toml file)")
    body = _bounded("--controller", path)
    try:
        if path.suffix == ".toml":
            import tomllib

            data = tomllib.loads(body)
            return data.get("controller", data)
        return json.loads(body)
    except ValueError as e:  # JSONDecodeError and TOMLDecodeError both are
        raise CliError(f"--controller: {text}: not valid {'TOML' if path.suffix == '.toml' else 'JSON'}: {e}") from None


def _bounded(flag: str, path: Path) -> str:
    """A user-named file read as the scenario loader reads one: a regular file of bounded size."""
    from .._files import read_text

    try:
        return read_text(path, field=flag)
    except (OSError, ValueError) as e:
        raise CliError(str(e)) from None


def options(args: argparse.Namespace) -> dict:
    if len(args.primary) != len(args.primary_cores):
        raise CliError(f"--primary-cores: give one per --primary ({len(args.primary)} --primary, "
                       f"{len(args.primary_cores)} --primary-cores)")
    opts: dict[str, Any] = {
        "primaries": [{"pids": [pid], "cpus": cpus, "name": f"pid{pid}"}
                      for pid, cpus in zip(args.primary, args.primary_cores)],
        "secondaries": args.secondary,
        "secondary_cores": args.secondary_cores,
        "poll_ms": args.poll_ms,
        "activity": args.activity,
        "busy_fraction": args.busy_fraction,
        "cgroup_root": args.cgroup_root,
        "cpuset": not args.no_cpuset,
        "irqs": sorted(set(args.irq) | set(irqs_matching(args.irq_match, Path("/proc/interrupts").read_text())
                                           if args.irq_match else set())),
        "status_every_s": args.status_every,
        "state_file": args.state_file or default_state_file(),
    }
    ctl = _controller(args.controller)
    if ctl is not None:
        opts["controller"] = ctl
    if args.listen:
        opts["listen"] = args.listen
    if args.duration:
        opts["duration_s"] = args.duration
    return opts


def default_state_file() -> str:
    """The state file of an agent not given --state-file: a system path as root (where a
    DaemonSet mounts the host's /var/lib/microsched), else the user's state directory."""
    import os

    if os.geteuid() == 0:
        return "/var/lib/microsched/harvest-state.json"
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "microsched", "harvest-state.json")


def irqs_matching(names: list[str], interrupts: str) -> list[int]:
    """IRQ numbers of the /proc/interrupts lines (text) that contain any of `names` (the NIC's
    queues: the artifact's make_irq_aware.sh lists them by hand)."""
    out = []
    for line in interrupts.splitlines():
        head, _, rest = line.partition(":")
        if head.strip().isdigit() and any(n in rest for n in names):
            out.append(int(head))
    return out


def cmd_harvest(args: argparse.Namespace) -> int:
    from .._native_loader import native

    if not sys.platform.startswith("linux"):
        raise CliError("harvest: the agent needs Linux (sched_setaffinity, /proc)")
    opts = options(args)
    # SIGTERM (kubectl delete, systemctl stop) stops the agent as Ctrl-C does: restore, report.
    sigterm_as_ctrl_c()

    def ready(addr: str | None) -> None:
        if addr:
            sys.stderr.write(f"listening on {addr}\n")
            sys.stderr.flush()

    try:
        text = native().harvest(json.dumps(opts), args.log, ready)
    except ValueError as e:
        raise CliError(str(e)) from None
    if args.report:
        Path(args.report).write_text(text + "\n")
    rep = json.loads(text)
    if args.json:
        print(json.dumps(rep, indent=2))
    else:
        for p in rep["primaries"]:
            refused = f", {p['refused_lends']} lends refused" if p.get("refused_lends") else ""
            print(f"{p['name']} cores {p['cpus']}: lent {p['lent_core_s']:.2f} core-s "
                  f"({p['lends']} lends, {p['evictions']} evictions{refused})")
        print(f"secondary {rep['secondary']['pids']}: {rep['secondary']['cpu_s']:.2f} CPU-s; "
              f"actuations {rep['actuation']['count']} (mean {rep['actuation']['mean_us']:.0f} us); "
              f"affinities restored {rep['restore']['affinities']}; stopped by {rep['stopped_by']}")
        for why in rep.get("lend_refusals", []):
            print(f"lend refused: {why}")
    bad = rep["restore"]["errors"] or rep["actuation"]["stray_threads"]
    return 1 if bad else 0


PODS_DESCRIPTION = """\
Register this node's labelled pods with `microsched harvest` (its --listen address): pods
labelled microsched.io/harvest=primary (with their cores in the annotation microsched.io/cpus)
or =secondary, listed from the API server with the service account's credentials, sent in the
artifact's messages by pod UID; the agent finds their processes from their cgroup. Every pass
sends every pod again (the agent acknowledges one it already holds and adds nothing), so an
agent that restarted has its pods back within --every. The DaemonSet in deploy/kubernetes/
runs it beside the agent.

examples:
  microsched harvest-pods --agent 127.0.0.1:10101 --node "$NODE_NAME"
  microsched harvest-pods --agent 127.0.0.1:10101 --pods pods.json --once   # a saved `kubectl get pods -o json`
"""


def add_pods_command(sub: Any) -> None:
    p = sub.add_parser("harvest-pods", help="register labelled Kubernetes pods with the harvesting agent",
                       description=PODS_DESCRIPTION, formatter_class=Formatter)
    p.add_argument("--agent", default="127.0.0.1:10101", metavar="HOST:PORT", help="the agent's --listen address")
    p.add_argument("--node", default=None, metavar="NAME", help="this node's name (default $NODE_NAME)")
    p.add_argument("--every", type=duration, default=5.0, metavar="S", help="listing period (default 5)")
    p.add_argument("--pods", metavar="FILE", help="read the pod list from FILE (`kubectl get pods -o json`) "
                                                  "instead of the API server")
    p.add_argument("--once", action="store_true", help="one pass, then exit")
    p.set_defaults(func=cmd_pods)


def cmd_pods(args: argparse.Namespace) -> int:
    from .. import harvest_k8s

    node = args.node or __import__("os").environ.get("NODE_NAME")
    if args.pods:
        def list_pods(_node: str) -> list[dict]:
            try:
                return json.loads(_bounded("--pods", Path(args.pods))).get("items", [])
            except json.JSONDecodeError as e:
                raise CliError(f"--pods: {args.pods}: not valid JSON: {e}") from None
    else:
        if not node:
            raise CliError("--node: give this node's name (or set NODE_NAME, as the DaemonSet does)")
        list_pods = harvest_k8s.list_pods_in_cluster
    sigterm_as_ctrl_c()
    try:
        harvest_k8s.watch(args.agent, node or "", args.every, list_pods, 1 if args.once else None,
                          log=lambda m: print(m, flush=True))
    except KeyboardInterrupt:
        pass
    return 0
