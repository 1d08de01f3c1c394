"""``microsched run``: simulate a scenario and print its summary."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .args import Formatter, add_scenario, add_set, seed
from .errors import CliError, with_file
from .render import console, print_summary

RUN_DESCRIPTION = """\
Simulate SCENARIO and print a summary: offered load, throughput, goodput (within the SLO),
drop rate, end-to-end latency, server queueing delay and slowdown (mean, p50, p99, p99.9),
cores allocated and busy, CPU utilization, best-effort cores, request conservation
counters, per-type metrics and the simulator's own speed.

Statistics cover the measured window (after `warmup_ms`); the request counters cover the
whole run. Same scenario + same seed gives bit-identical results.

examples:
  microsched run experiments/validation/mmc.toml
  microsched run mmc.toml --seed 7 --set load.fraction=0.9 --set server.queue=per_core
  microsched run mmc.toml --set duration_ms=100 --json | jq .latency_us.p99
  microsched run mmc.toml --out out/mmc        # summary.json, timeseries.parquet, latency_cdf.png
"""


def add_commands(sub: Any) -> None:
    r = sub.add_parser("run", help="simulate a scenario and print its summary", description=RUN_DESCRIPTION,
                       formatter_class=Formatter)
    add_scenario(r)
    r.add_argument("--seed", type=seed, metavar="N",
                   help="seed of every random stream (default: the scenario's `seed`, itself 1 by default)")
    add_set(r)
    r.add_argument("--out", metavar="DIR",
                   help="write the results to DIR (created if needed): summary.json, scenario.json (resolved), "
                        "timeseries.parquet, latency_cdf.parquet, latency_cdf.png and, if "
                        "metrics.record_requests is true, requests.parquet")
    r.add_argument("--json", action="store_true",
                   help="print the summary as JSON on stdout (and nothing else) instead of tables")
    r.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    from ..api import run

    try:
        res = run(args.scenario, seed=args.seed, overrides=args.overrides)
    except ValueError as e:
        raise CliError(with_file(e, args.scenario)) from None
    if args.json:
        sys.stdout.write(json.dumps(res.summary, indent=2) + "\n")
    else:
        print_summary(res.summary)
    if args.out:
        out = res.save(args.out)
        if not args.json:
            from ..api import CDF_PLOT_FILE

            console().print(f"results written to [bold]{out}/[/bold]; latency plot: [bold]{out / CDF_PLOT_FILE}[/bold]")
    return 0
