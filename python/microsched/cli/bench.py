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
"""


def add_commands(sub: Any) -> None:
    b = sub.add_parser("bench", help="measure simulated requests per wall-clock second",
                       description=BENCH_DESCRIPTION, formatter_class=Formatter)
    b.add_argument("--quick", action="store_true",
                   help="short runs (mmc: 200 ms simulated; 32-core: 50 ms; 1024-core: 100 ms) for a smoke test; "
                        "the default runs are long enough for stable figures")
    b.add_argument("--seed", type=seed, metavar="N", help="seed of both runs (default: 1)")
    b.add_argument("--json", action="store_true",
                   help="print the measurements as a JSON list on stdout instead of a table")
    b.set_defaults(func=cmd_bench)


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
    for name, scen, ovr in bench_scenarios(args.quick):
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
    return 0
