"""``microsched check-policy``: run a policy on a few small standard scenarios and check that the
model's invariants hold."""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

from .args import Formatter, add_set, seed
from .errors import CliError

DESCRIPTION = """\
Run POLICY on a few small standard scenarios of its kind, each with two seeds (and each seed
twice), and print which of the model's invariants hold:

  runs                  the run finishes: no exception in the policy, no decision out of bounds
  core-time             core time is conserved: busy + search + parked + transition =
                        max_cores x simulated time (summary `core_time`)
  requests              every request is completed, dropped (its client told), or in flight:
                        generated = completed + dropped + in_flight (summary `requests`, which
                        counts a request as dropped once its client knows)
  bounds                cores and credits within bounds at every sample: 0 <= cores_allocated,
                        cores_busy <= cores_allocated <= max_cores; credit_pool >= 0,
                        credits_issued >= 0, and the pool within the controller's own bounds
  keeps-up              below capacity (every scenario but the overloaded ones), the cores
                        keep up: fewer than 2 % of the requests generated are still in flight
                        at the end (an allocator that takes cores back and never grants them
                        again while work waits, a leak the engine cannot prevent, fails it)
  no-starvation         under a mix of two request types (scenarios `*-mix`), every type
                        completes requests and has a finite p99 latency
  deterministic         two runs with the same seed give the same summary and time series

Each failure is printed with its scenario and seed. The policy's kind is read from its base
class (microsched.policy.Allocator, Controller or QueuePolicy); a built-in policy of the
engine is named `builtin:KIND` (`builtin:shenango`, `builtin:breakwater`, `builtin:queue`: the
server's own queues, d-FCFS with stealing here).

The scenarios (8 cores, per-core queues with stealing, 100 sessions, RTT 10 us, 20 ms measured):
  allocator   alloc-load0.3, alloc-load0.9 (exponential 5 us), alloc-mix (1 us / 50 us, load 0.7)
  harvest     harvest-load0.3, harvest-load0.9, harvest-mix: the allocator scenarios on one
              central run queue, the host the harvesting allocators model (a Primary's Linux
              threads woken on any idle core of its set; the Secondary is every lent core's
              time); the built-in harvest_* allocators are checked on these, every invariant
              included (a harvesting allocator of your own: --set server.queue=central)
  overload    credits-load0.5, credits-load1.5 (overloaded), credits-mix (load 1.2)
  sched       sched-load0.5 (exponential 5 us), sched-mix (1 us / 50 us, load 0.8)

Known findings: a built-in whose own published rule fails an invariant on these scenarios is
reported as KNOWN, with the cause measured on the run, never as holding. Known today (default
parameters, no --set): builtin:seda fails no-starvation on credits-mix because no request of
any type completes: Protego's artifact starts every session at 2-4 requests/s with an empty
token bucket (sd_client.c, sd_config.h), so no session has a token before 250 ms, and the
scenario ends at 25 ms (Protego measures the last 4 s of 8 s runs; run it with --set
warmup_ms=1000 to see both types served).

Exit status: 0 if every invariant holds, 1 if one does not, 3 if the only failures are known
findings, 2 for bad input (a policy that cannot be loaded or whose parameters do not fit).

`--set` changes the standard scenarios (all of them), for a policy that needs more: a built-in
Concord needs a dispatcher core (`--set server.dispatcher.cost_ns=100`); a slow-starting one a
longer run (`--set duration_ms=200`).

examples:
  microsched check-policy examples/policies/shenango.py:Shenango
  microsched check-policy builtin:caladan
  microsched check-policy builtin:concord --set server.dispatcher.cost_ns=100 --set server.max_cores=9
  microsched check-policy my_policies.py:MyController --set policy.overload.params.alpha=2 --json
"""

INVARIANTS = ("runs", "core-time", "requests", "bounds", "keeps-up", "no-starvation", "deterministic")
# `keeps-up`: below capacity, at most this share of the requests generated may still be in
# flight at the end (a healthy run holds about rate x latency: well under 1 % here).
MAX_IN_FLIGHT_SHARE = 0.02
SEEDS = (1, 2)

# The time-series and summary fields that measure the host, not the model: two identical runs
# differ in them.
WALL_KEYS = ("wall_s", "requests_per_wall_s")


def _base(load: float, types: list[dict]) -> dict:
    return {
        "name": "check-policy",
        "duration_ms": 20,
        "warmup_ms": 5,
        "server": {"max_cores": 8, "queue": "per_core", "steal": True, "allocation_delay_us": 5},
        "network": {"rtt_us": 10},
        "clients": {"sessions": 100},
        "load": {"fraction": load},
        "workload": {"types": types},
        "policy": {"allocator": {"kind": "static"}, "overload": {"kind": "none"}},
        "metrics": {"sample_interval_us": 100, "record_requests": False},
    }


EXP = [{"name": "exp5", "service": {"dist": "exponential", "mean_us": 5}}]
MIX = [{"name": "short", "ratio": 0.9, "service": {"dist": "exponential", "mean_us": 1}},
       {"name": "long", "ratio": 0.1, "service": {"dist": "exponential", "mean_us": 50}}]
# A controller is checked with a dynamic allocator beside it (Caladan's), so that cores come and
# go under it (`on_cores_changed`).
CALADAN = {"kind": "caladan"}


def scenarios(kind: str) -> dict[str, tuple[dict, bool]]:
    """The standard scenarios of a policy kind (or of the ``harvest`` family of allocators):
    name -> (scenario with a placeholder policy, is a mix of request types). A scenario is under
    capacity when its ``load.fraction`` is below 1."""
    if kind == "allocator":
        return {"alloc-load0.3": (_base(0.3, EXP), False), "alloc-load0.9": (_base(0.9, EXP), False),
                "alloc-mix": (_base(0.7, MIX), True)}
    if kind == "harvest":
        # The harvesting allocators model a Linux host (HarvestContainers): a held core is idle
        # when no Primary work is left for it, which holds on one central run queue (the
        # harvest reproduction's `server.queue`). On per-core queues a core just taken back from
        # the Secondary finds its own queue empty and probes the others (`server.search`, probe
        # by probe), idle meanwhile, and an allocator that lends at once (harvest_cfs: CFS
        # shares any unused core) lends it back at its next 1 us poll before the probe finds the
        # work, the Primary then waiting out the CFS wake-up again: it fell to 1 core of 8 with
        # 13-86 % of the requests left waiting (instant search: 0-3 %).
        out = {}
        for name, load, types, mix in (("harvest-load0.3", 0.3, EXP, False), ("harvest-load0.9", 0.9, EXP, False),
                                       ("harvest-mix", 0.7, MIX, True)):
            s = _base(load, types)
            s["server"] = {"max_cores": 8, "queue": "central"}
            out[name] = (s, mix)
        return out
    if kind == "overload":
        out = {}
        for name, load, types, mix in (("credits-load0.5", 0.5, EXP, False), ("credits-load1.5", 1.5, EXP, False),
                                       ("credits-mix", 1.2, MIX, True)):
            s = _base(load, types)
            s["policy"]["allocator"] = dict(CALADAN)
            out[name] = (s, mix)
        return out
    return {"sched-load0.5": (_base(0.5, EXP), False), "sched-mix": (_base(0.8, MIX), True)}


# Built-in allocators of the harvesting family (HarvestContainers and its baselines): checked on
# the `harvest` scenarios.
HARVEST_PREFIX = "harvest_"


@dataclass
class Target:
    """What to check: the policy table to put at ``policy.<kind>``."""

    spec: str
    kind: str  # allocator, overload, sched: also the scenario's section
    table: dict
    # Which standard scenarios: the kind's, or `harvest` for a harvesting allocator.
    family: str = ""

    def __post_init__(self) -> None:
        self.family = self.family or self.kind


@dataclass(frozen=True)
class Known:
    """A known finding: a built-in's own published rule fails ``invariant`` on ``scenario`` with
    its default parameters. It is reported as known only when ``cause`` (a test on the run's
    summary) finds the documented cause in that very run; ``cause`` returns the measured reason
    or None."""

    invariant: str
    scenario: str
    cause: Callable[[dict], str | None]


def _seda_sends_nothing(summary: dict) -> str | None:
    types = summary.get("by_type") or []
    r = summary.get("requests") or {}
    if not types or any(t.get("completed") for t in types):
        return None
    return (f"no request of any type completed ({r.get('dropped', 0)} of {r.get('generated', 0)} dropped at their "
            "client): Protego's artifact SEDA starts each session at 2-4 requests/s with an empty token bucket "
            "(sd_client.c, sd_config.h), its first token comes after 250-500 ms, and the run ends at 25 ms")


# Built-in -> its known findings (with default parameters and no --set).
KNOWN: dict[str, tuple[Known, ...]] = {
    "builtin:seda": (Known("no-starvation", "credits-mix", _seda_sends_nothing),),
}


def _builtin_kinds() -> dict[str, str]:
    """Built-in policy name -> kind (allocator, overload, sched), from the scenario schema."""
    from ..api import schema

    tree = schema()
    defs = tree.get("$defs") or tree.get("definitions") or {}
    kinds: dict[str, str] = {}
    for kind, ref in (("allocator", "AllocatorCfg"), ("overload", "OverloadCfg"), ("sched", "SchedCfg")):
        for name in _kind_names(defs.get(ref, {}), defs):
            kinds.setdefault(name, kind)
    return kinds


def _kind_names(node: Any, defs: dict) -> list[str]:
    """The values the ``kind`` tag takes in a tagged-enum schema node."""
    out: list[str] = []
    if isinstance(node, dict):
        if "$ref" in node:
            return _kind_names(defs.get(node["$ref"].rsplit("/", 1)[-1], {}), defs)
        props = node.get("properties", {})
        k = props.get("kind")
        if isinstance(k, dict):
            if "const" in k:
                out.append(k["const"])
            out.extend(v for v in k.get("enum", []) if isinstance(v, str))
        for key in ("oneOf", "anyOf", "allOf"):
            for sub in node.get(key, []):
                out.extend(_kind_names(sub, defs))
    return out


def resolve(spec: str, params: dict | None = None) -> Target:
    """The target ``spec`` names: ``FILE.py:Class``, ``module:Class`` or ``builtin:KIND``."""
    from ..policy import Allocator, Controller, PolicyError, QueuePolicy, load_class

    if spec.startswith("builtin:"):
        name = spec[len("builtin:"):]
        kinds = _builtin_kinds()
        if name not in kinds or name == "python":
            allowed = ", ".join(sorted(k for k in kinds if k != "python"))
            raise CliError(f"{spec}: `{name}` is not a built-in policy: use one of {allowed}")
        family = "harvest" if name.startswith(HARVEST_PREFIX) and kinds[name] == "allocator" else kinds[name]
        return Target(spec, kinds[name], {"kind": name, **(params or {})}, family)
    where, sep, name = spec.rpartition(":")
    if not sep or not where:
        raise CliError(f"{spec}: is not allowed: use FILE.py:Class, module:Class or builtin:KIND")
    from pathlib import Path

    if where.endswith(".py"):
        spec = f"{Path(where).resolve()}:{name}"  # the scenario is a dict: no folder to resolve against
    for kind, base in (("allocator", Allocator), ("overload", Controller), ("sched", QueuePolicy)):
        try:
            load_class(spec, kind, "policy")
        except PolicyError as e:
            if "is not a subclass" in e.message:
                continue
            raise CliError(f"{spec}: {e.message}") from None
        return Target(spec, kind, {"kind": "python", "class": spec, "params": dict(params or {})})
    raise CliError(f"{spec}: is not a subclass of microsched.policy.Allocator, Controller or QueuePolicy")


@dataclass
class Failure:
    scenario: str
    seed: int
    detail: str
    # The measured cause of a known finding (see KNOWN); None: a failure nobody expected.
    known: str | None = None


@dataclass
class Report:
    target: str
    kind: str
    scenarios: list[str]
    seeds: list[int]
    failures: dict[str, list[Failure]] = field(default_factory=lambda: {k: [] for k in INVARIANTS})
    # An invariant can only be judged on some scenarios (no-starvation on mixes only).
    checked: dict[str, int] = field(default_factory=lambda: {k: 0 for k in INVARIANTS})

    def holds(self, name: str) -> bool | None:
        """True or False; None when no run checked it (no scenario applies, e.g. keeps-up with
        every load set to 1 or more, or no run finished)."""
        if self.failures[name]:
            return False
        return True if self.checked[name] else None

    def known(self, name: str) -> bool:
        """Whether ``name`` fails and every failure is a known finding."""
        return bool(self.failures[name]) and all(f.known for f in self.failures[name])

    @property
    def ok(self) -> bool:
        return self.holds("runs") is True and not any(self.failures[k] for k in INVARIANTS)

    @property
    def only_known(self) -> bool:
        """Not ok, but only through known findings."""
        failing = [k for k in INVARIANTS if self.failures[k]]
        return self.holds("runs") is True and bool(failing) and all(self.known(k) for k in failing)

    def to_json(self) -> dict:
        return {"policy": self.target, "kind": self.kind, "scenarios": self.scenarios, "seeds": self.seeds,
                "ok": self.ok, "only_known": self.only_known,
                "invariants": {k: {"holds": self.holds(k), "known": self.known(k), "checked": self.checked[k],
                                   "failures": [f.__dict__ for f in self.failures[k]]} for k in INVARIANTS}}


def _strip_wall(summary: dict) -> dict:
    out = {}
    for k, v in summary.items():
        if k in WALL_KEYS:
            continue
        out[k] = _strip_wall(v) if isinstance(v, dict) else v
    return out


def _same(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _first_difference(a: Any, b: Any, path: str = "") -> str:
    """Where two summaries first differ: ``path: value then value``."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if not _same(a.get(k), b.get(k)):
                return _first_difference(a.get(k), b.get(k), f"{path}.{k}" if path else str(k))
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            if not _same(x, y):
                return _first_difference(x, y, f"{path}[{i}]")
    shown = [repr(v) if len(repr(v)) <= 60 else repr(v)[:57] + "..." for v in (a, b)]
    return f"{path}: {shown[0]} then {shown[1]}"


def check_core_time(summary: dict, scenario: dict) -> str | None:
    ct = summary.get("core_time") or {}
    parts = ct.get("busy_ns", 0) + ct.get("search_ns", 0) + ct.get("parked_ns", 0) + ct.get("transition_ns", 0)
    total = ct.get("total_ns", 0)
    # The core time covers the whole run, warm-up included.
    sim_ns = round((scenario["warmup_ms"] + scenario["duration_ms"]) * 1e6)
    expect = scenario["server"]["max_cores"] * sim_ns
    # The summary's times are whole nanoseconds per core: allow one per core per part.
    slack = 4 * scenario["server"]["max_cores"]
    # Preemption overhead is time on a worker core too; whether the driver counts it inside
    # busy_ns or beside it, the sum must close.
    if abs(parts - total) > slack and abs(parts + ct.get("overhead_ns", 0) - total) > slack:
        return f"busy + search + parked + transition = {parts} ns, but total_ns = {total}"
    if abs(total - expect) > slack + expect * 1e-9:
        return f"total_ns = {total}, but max_cores x simulated time = {expect} ns"
    return None


def check_requests(summary: dict, ts: Any) -> str | None:
    r = summary.get("requests") or {}
    g, c, d, f = (r.get(k, 0) for k in ("generated", "completed", "dropped", "in_flight"))
    if min(g, c, d, f) < 0:
        return f"a negative count: {r}"
    if g != c + d + f:
        return f"generated {g} != completed {c} + dropped {d} + in_flight {f} (= {c + d + f})"
    return None


def check_bounds(summary: dict, ts: Any, scenario: dict) -> str | None:
    import numpy as np

    max_cores = scenario["server"]["max_cores"]
    eps = 1e-9 * max_cores

    def first(mask: Any, col: str, what: str) -> str | None:
        bad = np.flatnonzero(mask)
        if len(bad):
            i = bad[0]
            return f"{col} = {ts[col].iloc[i]:g} at t = {ts['t_ms'].iloc[i]:g} ms ({what}; {len(bad)} samples)"
        return None

    alloc = ts["cores_allocated"].to_numpy(dtype=float)
    busy = ts["cores_busy"].to_numpy(dtype=float)
    for mask, col, what in ((~(alloc >= -eps), "cores_allocated", "below 0"),
                            (~(alloc <= max_cores + eps), "cores_allocated", f"above max_cores {max_cores}"),
                            (busy > alloc + eps, "cores_busy", "more than the cores allocated")):
        msg = first(mask, col, what)
        if msg:
            return msg
    for col in ("credit_pool", "credits_issued"):
        if col in ts:
            v = ts[col].to_numpy(dtype=float)
            msg = first(v < 0, col, "negative")
            if msg:
                return msg
    credits = summary.get("credits") or {}
    lo, hi = credits.get("pool_floor"), credits.get("pool_ceiling")
    if "credit_pool" in ts and (lo is not None or hi is not None):
        v = ts["credit_pool"].to_numpy(dtype=float)
        known = ~np.isnan(v)
        if lo is not None:
            msg = first(known & (v < lo), "credit_pool", f"below the controller's floor {lo}")
            if msg:
                return msg
        if hi is not None:
            msg = first(known & (v > hi), "credit_pool", f"above the controller's ceiling {hi}")
            if msg:
                return msg
    return None


def check_keeps_up(summary: dict) -> str | None:
    r = summary.get("requests") or {}
    g, f = r.get("generated", 0), r.get("in_flight", 0)
    if g and f > MAX_IN_FLIGHT_SHARE * g:
        return (f"{f} of {g} requests ({f / g:.0%}) still in flight at the end, under a load the cores can serve "
                f"(allowed: {MAX_IN_FLIGHT_SHARE:.0%})")
    return None


def check_starvation(summary: dict) -> str | None:
    types = summary.get("by_type") or []
    if len(types) > 1 and not any(t.get("completed") for t in types):
        # Not one type starved by the others: nothing was served at all.
        return "no type completed a request in the window (" + ", ".join(f"`{t.get('name')}` 0" for t in types) + ")"
    for t in types:
        lat = t.get("latency_us") or {}
        p99 = lat.get("p99")
        if not t.get("completed"):
            return f"type `{t.get('name')}` completed no request in the window"
        if p99 is None or not math.isfinite(p99):
            return f"type `{t.get('name')}` has no finite p99 latency ({p99})"
    return None


def check(target: Target, seeds: tuple[int, ...] = SEEDS, overrides: tuple[str, ...] = (),
          progress: Callable[[str], Any] | None = None) -> Report:
    """Runs ``target`` on its kind's standard scenarios and checks the invariants."""
    import warnings

    from ..api import run

    cases = scenarios(target.family)
    report = Report(target.spec, target.kind, list(cases), list(seeds))
    # A known finding is the built-in's own rule on the standard scenarios: not with --set.
    known = {} if overrides else {(k.invariant, k.scenario): k.cause for k in KNOWN.get(target.spec, ())
                                  if set(target.table) == {"kind"}}
    for name, (scen, mix) in cases.items():
        scen = json.loads(json.dumps(scen))
        scen["policy"][target.kind] = json.loads(json.dumps(target.table))
        for seed in seeds:
            if progress:
                progress(f"{name} seed {seed}")
            results = []
            for _ in range(2):
                report.checked["runs"] += 1
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        results.append(run(scen, seed=seed, overrides=overrides))
                except ValueError as e:  # the scenario (the policy's table) is invalid: bad input
                    raise CliError(str(e)) from None
                except RuntimeError as e:  # PolicyFailed: an exception or a decision out of bounds
                    report.failures["runs"].append(Failure(name, seed, " ".join(str(e).split("\n")[0].split())))
                    break
            if not results:
                continue
            res = results[0]
            resolved = res.scenario  # with --set applied and every default filled in
            for inv, msg in (("core-time", check_core_time(res.summary, resolved)),
                             ("requests", check_requests(res.summary, res.timeseries)),
                             ("bounds", check_bounds(res.summary, res.timeseries, resolved))):
                report.checked[inv] += 1
                if msg:
                    report.failures[inv].append(Failure(name, seed, msg))
            if (resolved.get("load") or {}).get("fraction", 1) < 1:
                report.checked["keeps-up"] += 1
                msg = check_keeps_up(res.summary)
                if msg:
                    report.failures["keeps-up"].append(Failure(name, seed, msg))
            if mix:
                report.checked["no-starvation"] += 1
                msg = check_starvation(res.summary)
                if msg:
                    cause = known.get(("no-starvation", name))
                    report.failures["no-starvation"].append(Failure(name, seed, msg, cause(res.summary) if cause else None))
            if len(results) == 2:
                report.checked["deterministic"] += 1
                a, b = _strip_wall(results[0].summary), _strip_wall(results[1].summary)
                msg = None
                if not _same(a, b):
                    msg = "the summaries differ: " + _first_difference(a, b)
                else:
                    ta, tb = results[0].timeseries, results[1].timeseries
                    if not ta.equals(tb):
                        cols = [c for c in ta.columns if not ta[c].equals(tb[c])]
                        msg = f"the time series differ in {', '.join(cols)}"
                if msg:
                    report.failures["deterministic"].append(Failure(name, seed, msg))
    return report


def print_report(report: Report, out: Any = None) -> None:
    out = out or sys.stdout
    out.write(f"check-policy {report.target} ({report.kind}): scenarios {', '.join(report.scenarios)}; "
              f"seeds {', '.join(map(str, report.seeds))}\n")
    for name in INVARIANTS:
        fails = report.failures[name]
        if report.checked[name] == 0:
            why = "no run finished" if report.failures["runs"] else "no scenario applies"
            out.write(f"  n/a     {name} ({why})\n")
        elif not fails:
            out.write(f"  holds   {name}\n")
        else:
            out.write(f"  {'KNOWN' if report.known(name) else 'FAILS':<8}{name}\n")
            for f in fails:
                out.write(f"          {f.scenario} seed {f.seed}: {f.detail}\n")
                if f.known:
                    out.write(f"            known finding: {f.known}\n")
    if report.ok:
        out.write("all invariants hold\n")
    elif report.only_known:
        out.write("some invariants do not hold, each a known finding of the policy's own rule\n")
    else:
        out.write("some invariants do not hold\n")


def add_commands(sub: Any) -> None:
    p = sub.add_parser("check-policy", help="check a policy against the model's invariants on standard scenarios",
                       description=DESCRIPTION, formatter_class=Formatter)
    p.add_argument("policy", metavar="POLICY",
                   help="FILE.py:Class, module:Class (a subclass of microsched.policy's Allocator, Controller or "
                        "QueuePolicy) or builtin:KIND")
    p.add_argument("--param", dest="params", action="append", default=[], metavar="NAME=VALUE",
                   help="a parameter of the policy (a TOML literal, else a string); repeatable")
    p.add_argument("--seeds", type=seed, nargs="+", default=list(SEEDS), metavar="N",
                   help="the seeds to run each scenario with (default: 1 2)")
    add_set(p)
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of lines")
    p.set_defaults(func=cmd_check_policy)


def _param(text: str) -> tuple[str, Any]:
    import tomllib

    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise CliError(f"--param {text}: is not allowed: use NAME=VALUE")
    try:
        parsed = tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        parsed = value
    return name.strip(), parsed


def cmd_check_policy(args: argparse.Namespace) -> int:
    params = dict(_param(p) for p in args.params)
    target = resolve(args.policy, params)
    report = check(target, tuple(args.seeds), tuple(args.overrides))
    if args.json:
        sys.stdout.write(json.dumps(report.to_json(), indent=2) + "\n")
    else:
        print_report(report)
    return 0 if report.ok else 3 if report.only_known else 1
