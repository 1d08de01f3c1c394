"""``microsched bench``: the simulator's speed, in simulated requests per wall-clock second."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .args import Formatter, seed
from .errors import CliError, one_line
from .render import console

BENCH_DESCRIPTION = """\
Measure how fast the simulator runs, in simulated requests per wall-clock second (the
simulator is single-threaded: this is the speed of one core), on five scenarios:

  mmc               experiments/validation/mmc.toml: 16 cores, central FCFS queue,
                    exponential service with mean 10 us, load 0.8 (1.28 M requests/s)
  exp32             built in code: 32 cores, per-core queues with work stealing under the
                    default (probe-cost) work search, exponential service with mean 1 us,
                    load 0.5 (16 M requests/s)
  exp32-instant     the same with server.search.kind = "instant"
  wide1024          built in code: 1024 statically allocated cores, per-core queues with
                    stealing (default search), exponential 100 us, load 0.1 (1 M requests/s)
  wide1024-instant  the same with server.search.kind = "instant"

Per-request records are off (metrics.record_requests = false). Reported: simulated
requests generated, simulated time, wall time, simulated requests per wall-clock second
(summary sim.requests_per_wall_s), simulator events per wall-clock second, and events per
request (a model that starts scheduling more events shows here at once, whatever the
machine). Under the table: what the default work search costs per request against the
instant one, on 32 and on 1024 cores.

--python-policies adds what a policy written in Python costs (examples/policies/), beside
its Rust original on the same scenario and seed (both give identical results):

  allocators-shenango     experiments/allocators/base.toml (16 cores, exponential 10 us,
                          load 0.5) with Shenango's allocator in Rust
  allocators-shenango-py  the same with examples/policies/shenango.py
  exp32-instant-py        exp32-instant with examples/policies/dfcfs.py (d-FCFS with
                          stealing; the probe-cost search models only the built-in policy,
                          hence the instant search on both sides)

For those rows: the calls into Python (counted in a second, identical run whose policy
counts them) and the overhead per call, (wall time - the Rust twin's) / calls. --only
NAME,... runs only the rows named.
"""


def add_commands(sub: Any) -> None:
    b = sub.add_parser("bench", help="measure simulated requests per wall-clock second",
                       description=BENCH_DESCRIPTION, formatter_class=Formatter)
    b.add_argument("--quick", action="store_true",
                   help="short runs (mmc: 200 ms simulated; 32-core: 50 ms; 1024-core: 100 ms; allocators: 100 ms) for a smoke test; "
                        "the default runs are long enough for stable figures")
    b.add_argument("--seed", type=seed, metavar="N", help="seed of both runs (default: 1)")
    b.add_argument("--json", action="store_true",
                   help="print the measurements as a JSON list on stdout instead of a table")
    b.add_argument("--python-policies", action="store_true",
                   help="add the Python policies' rows (allocators-shenango, allocators-shenango-py, exp32-instant-py): "
                        "wall time beside the Rust original, calls into Python and the overhead per call")
    b.add_argument("--only", metavar="NAME,...", type=row_names,
                   help="run only these rows (names as in the table, e.g. exp32-instant,exp32-instant-py)")
    b.set_defaults(func=cmd_bench)


ALL_ROWS = ["mmc", "exp32", "exp32-instant", "wide1024", "wide1024-instant"]
PYTHON_ROWS = ["allocators-shenango", "allocators-shenango-py", "exp32-instant-py"]
# A Python row, the Rust row it is measured against, and the policy's table.
PYTHON_TWINS = {
    "allocators-shenango-py": ("allocators-shenango", "allocator", "examples/policies/shenango.py:Shenango"),
    "exp32-instant-py": ("exp32-instant", "sched", "examples/policies/dfcfs.py:DistributedFcfs"),
}


def row_names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    for n in names:
        if n not in ALL_ROWS + PYTHON_ROWS:
            raise argparse.ArgumentTypeError(f"`{n}` is not a bench row: use {', '.join(ALL_ROWS + PYTHON_ROWS)}")
    if not names:
        raise argparse.ArgumentTypeError(f"no row named: use {', '.join(ALL_ROWS + PYTHON_ROWS)}")
    return names


def repo_file(rel: str) -> Path:
    """A repository file, looked up from the current directory, then from the source tree."""
    for base in (Path.cwd(), Path(__file__).resolve().parents[3]):
        p = base / rel
        if p.is_file():
            return p
    raise CliError(f"{rel} not found (run `microsched bench` from the repository root)")


def bench_scenarios(quick: bool) -> list[tuple[str, Any, list[str]]]:
    """(name, scenario, overrides) of the benchmark runs."""
    mmc = repo_file("experiments/validation/mmc.toml")
    mmc_ovr = ["metrics.record_requests=false"]
    if quick:
        mmc_ovr += ["duration_ms=200", "warmup_ms=20"]
    exp32 = {
        "name": "exp32-load0.5",
        "duration_ms": 50.0 if quick else 500.0,
        "warmup_ms": 5.0 if quick else 50.0,
        "server": {"max_cores": 32, "queue": "per_core", "steal": True},
        "network": {"rtt_us": 10.0},
        "clients": {"sessions": 1000},
        "load": {"fraction": 0.5},
        "workload": {"types": [{"name": "exp1us", "service": {"dist": "exponential", "mean_us": 1.0}}]},
        "metrics": {"record_requests": False, "sample_interval_us": 1000.0},
    }
    wide = {
        "name": "wide1024-load0.1",
        "duration_ms": 100.0 if quick else 1500.0,
        "warmup_ms": 2.0,
        "server": {"max_cores": 1024, "queue": "per_core", "steal": True},
        "network": {"rtt_us": 10.0},
        "load": {"fraction": 0.1},
        "workload": {"types": [{"name": "exp100us", "service": {"dist": "exponential", "mean_us": 100.0}}]},
        "policy": {"allocator": {"kind": "static"}, "overload": {"kind": "none"}},
        "metrics": {"record_requests": False},
    }
    instant = ["server.search.kind=instant"]
    return [("mmc", mmc, mmc_ovr), ("exp32", exp32, []), ("exp32-instant", exp32, instant),
            ("wide1024", wide, []), ("wide1024-instant", wide, instant)]


def python_scenarios(quick: bool) -> list[tuple[str, Any, list[str]]]:
    """(name, scenario, overrides) of the Python policies' rows and of their Rust twin on the
    allocators scenario (the exp32 twin is exp32-instant)."""
    allocators = repo_file("experiments/allocators/base.toml")
    alloc_ovr = ["policy.allocator.kind=shenango"] + (["duration_ms=100", "warmup_ms=10"] if quick else [])
    exp32 = dict(bench_scenarios(quick)[2][1])
    out = [("allocators-shenango", allocators, alloc_ovr)]
    for name, (_, kind, cls) in PYTHON_TWINS.items():
        policy = {"kind": "python", "class": str(repo_file(cls.split(":")[0])) + ":" + cls.split(":")[1]}
        if name.startswith("allocators"):
            import tomllib

            scen = tomllib.loads(allocators.read_text())
            if quick:
                scen.update(duration_ms=100, warmup_ms=10)
            scen["policy"]["allocator"] = policy
            out.append((name, scen, []))
        else:
            scen = {**exp32, "server": {**exp32["server"], "search": {"kind": "instant"}}, "policy": {kind: policy}}
            out.append((name, scen, []))
    return out


# The methods the bridge calls only if the policy overrides them (crates/microsched-py/src/
# policies/: `overrides`), per kind; the others it always calls.
OPTIONAL_METHODS = {
    "allocator": {"on_park_attempt", "on_park_abort", "signal"},
    "overload": {"on_timer", "on_request", "take_wakeups", "on_cores_changed"},
    "sched": {"notify", "steal", "requeue", "preempt_at_quantum", "clock", "quantum", "finished"},
}
CALLED_METHODS = {
    "allocator": {"tick", "on_park_attempt", "on_park_abort", "signal"},
    "overload": {"on_timer", "on_request", "on_response", "on_credit_request", "take_wakeups", "on_cores_changed",
                 "set_pool", "pool_bounds"},
    "sched": {"steer", "notify", "next", "steal", "requeue", "preempt_at_quantum", "clock", "quantum", "finished"},
}


def count_python_calls(scen: Any, kind: str, seed_: int | None) -> int:
    """The calls into the policy's Python methods in a run of ``scen``: the run is made again
    with each method the bridge calls wrapped in a counter (the results are the same)."""
    import collections

    from .. import policy as mp
    from ..api import run

    base = {"allocator": mp.Allocator, "overload": mp.Controller, "sched": mp.QueuePolicy}[kind]
    counts: collections.Counter = collections.Counter()
    original = mp.build

    def counting_build(*a: Any, **k: Any) -> Any:
        obj = original(*a, **k)
        for m in CALLED_METHODS[kind]:
            if m in OPTIONAL_METHODS[kind] and getattr(type(obj), m) is getattr(base, m):
                continue  # the bridge answers it without calling Python

            def counted(*args: Any, _f: Any = getattr(obj, m), _m: str = m) -> Any:
                counts[_m] += 1
                return _f(*args)

            setattr(obj, m, counted)
        return obj

    mp.build = counting_build
    try:
        run(scen, seed=seed_)
    finally:
        mp.build = original
    return sum(counts.values())


# (default-search row, instant-search row, what the comparison is of)
SEARCH_COST = [("exp32", "exp32-instant", "32 cores"), ("wide1024", "wide1024-instant", "1024 cores")]


def search_cost(rows: list[dict]) -> list[str]:
    """Wall time per request of the default work search over the instant one."""
    by = {r["name"]: r for r in rows}
    out = []
    for probe, inst, what in SEARCH_COST:
        p, i = by.get(probe), by.get(inst)
        if p and i and p["requests_per_wall_s"] > 0:
            out.append(f"default search / instant search, wall time per request, {what}: "
                       f"{i['requests_per_wall_s'] / p['requests_per_wall_s']:.2f}")
    return out


def cmd_bench(args: argparse.Namespace) -> int:
    from ..api import run

    rows = []
    scenarios = bench_scenarios(args.quick)
    if args.python_policies or (args.only and set(args.only) & set(PYTHON_ROWS)):
        scenarios += python_scenarios(args.quick)
    if args.only:
        scenarios = [s for s in scenarios if s[0] in args.only]
    for name, scen, ovr in scenarios:
        try:
            res = run(scen, seed=args.seed, overrides=ovr)
        except ValueError as e:
            raise CliError(f"bench scenario {name}: {one_line(e)}") from None
        s = res.summary
        sim = s.get("sim", {})
        wall = float(sim.get("wall_s", 0.0))
        events = int(sim.get("events", 0))
        req = s.get("requests", {})
        warm = float(res.scenario.get("warmup_ms", 0.0) or 0.0)
        rows.append({
            "name": name,
            "scenario": s.get("scenario", name),
            "cores": s.get("cores", {}).get("max"),
            "requests": int(req.get("generated", 0)),
            "sim_time_s": (float(res.scenario.get("duration_ms", 0.0)) + warm) / 1e3,
            "wall_s": wall,
            "events": events,
            "requests_per_wall_s": float(sim.get("requests_per_wall_s", 0.0)),
            "events_per_wall_s": events / wall if wall > 0 else 0.0,
            "events_per_request": events / int(req.get("generated", 0)) if req.get("generated") else 0.0,
        })
        if name in PYTHON_TWINS:
            rows[-1]["python_calls"] = count_python_calls(scen, PYTHON_TWINS[name][1], args.seed)
    python_overheads(rows)
    if args.json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return 0
    from rich.table import Table

    t = Table(title="microsched bench" + (" --quick" if args.quick else ""),
              caption="M requests/s, M events/s: simulated, per wall-clock second, on one core")
    for col, just in [("scenario", "left"), ("cores", "right"), ("requests", "right"), ("sim s", "right"),
                      ("wall s", "right"), ("M requests/s", "right"), ("M events/s", "right"),
                      ("events/request", "right")]:
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in rows:
        t.add_row(r["name"], str(r["cores"]), f"{r['requests']:,}", f"{r['sim_time_s']:.3f}", f"{r['wall_s']:.3f}",
                  f"{r['requests_per_wall_s'] / 1e6:.2f}", f"{r['events_per_wall_s'] / 1e6:.2f}",
                  f"{r['events_per_request']:.2f}")
    console().print(t)
    for line in search_cost(rows):
        console().print(line)
    if any("python_calls" in r for r in rows):
        p = Table(title="Python policies beside their Rust originals (identical results)",
                  caption="overhead per call: (wall s - the Rust twin's) / calls into Python")
        for col in ["scenario", "Rust twin", "wall s", "Rust wall s", "x Rust", "calls", "calls/request",
                    "overhead/call us"]:
            p.add_column(col, justify="left" if col in ("scenario", "Rust twin") else "right")
        for r in rows:
            if "python_calls" not in r:
                continue
            if "twin" not in r:
                p.add_row(r["name"], f"{PYTHON_TWINS[r['name']][0]} (not run)", f"{r['wall_s']:.3f}", "", "",
                          f"{r['python_calls']:,}", f"{r['python_calls'] / max(r['requests'], 1):.2f}", "")
                continue
            p.add_row(r["name"], r["twin"], f"{r['wall_s']:.3f}", f"{r['twin_wall_s']:.3f}",
                      f"{r['wall_ratio']:.2f}", f"{r['python_calls']:,}",
                      f"{r['python_calls'] / max(r['requests'], 1):.2f}", f"{r['overhead_per_call_us']:.2f}")
        console().print(p)
    return 0


def python_overheads(rows: list[dict]) -> None:
    """Adds, to each Python row whose Rust twin ran on the same requests, the twin's wall time,
    the ratio and the overhead per call."""
    by = {r["name"]: r for r in rows}
    for r in rows:
        twin = by.get(PYTHON_TWINS.get(r["name"], ("",))[0])
        if "python_calls" not in r or twin is None or twin["requests"] != r["requests"]:
            continue
        r["twin"] = twin["name"]
        r["twin_wall_s"] = twin["wall_s"]
        r["wall_ratio"] = r["wall_s"] / twin["wall_s"] if twin["wall_s"] > 0 else float("nan")
        extra = r["wall_s"] - twin["wall_s"]
        r["overhead_per_call_us"] = extra / r["python_calls"] * 1e6 if r["python_calls"] else float("nan")
