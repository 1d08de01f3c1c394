"""``microsched maxload``: the highest offered load at which a scenario meets an SLO."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from .args import Formatter, add_scenario, add_set, positive
from .errors import CliError, with_file

DESCRIPTION = """\
Bisect over load.fraction (of the worker cores' capacity), one bisection per seed, for the
highest load at which METRIC (a dotted path into the summary, default slowdown.p999: the
p99.9 of end-to-end latency / nominal service time) stays at or below --slo. Seeds run in
parallel (--jobs); the result is the mean over seeds with a 95 % confidence interval, as a load
fraction and in requests per second. Lists of named sections are indexed by name, e.g.
--metric by_type.short.slowdown.p999.

example:
  microsched maxload experiments/synergy/extreme.toml --slo 50 --seeds 3 --set duration_ms=100
"""


def add_commands(sub: Any) -> None:
    m = sub.add_parser("maxload", help="find the highest load that meets an SLO (bisection over load)",
                       description=DESCRIPTION, formatter_class=Formatter)
    add_scenario(m)
    add_set(m)
    m.add_argument("--slo", type=float, default=50.0, help="bound on the metric (default: 50)")
    m.add_argument("--metric", default="slowdown.p999", help="summary metric (default: slowdown.p999)")
    m.add_argument("--seeds", type=positive, default=3, metavar="K", help="seeds 1..K (default: 3)")
    m.add_argument("--lo", type=float, default=0.05, help="lowest load fraction probed (default: 0.05)")
    m.add_argument("--hi", type=float, default=1.0, help="highest load fraction probed (default: 1.0)")
    m.add_argument("--tol", type=float, default=0.01, help="bisection tolerance in load (default: 0.01)")
    m.add_argument("--jobs", type=positive, metavar="N", help="parallel seeds (default: the CPUs)")
    m.add_argument("--json", action="store_true", help="print the result as JSON")
    m.set_defaults(func=cmd_maxload)


def cmd_maxload(args: argparse.Namespace) -> int:
    from ..maxload import max_load

    if not (0 < args.lo < args.hi) or args.tol <= 0:
        raise CliError(f"--lo/--hi/--tol: need 0 < lo < hi and tol > 0, got {args.lo}, {args.hi}, {args.tol}")
    try:
        r = max_load(args.scenario, slo=args.slo, metric=args.metric, seeds=range(1, args.seeds + 1),
                     overrides=args.overrides, lo=args.lo, hi=args.hi, tol=args.tol, jobs=args.jobs)
    except ValueError as e:
        raise CliError(with_file(e, args.scenario)) from None
    if args.json:
        # Strict JSON: a value that could not be computed (a metric of a probe in which nothing
        # completed) is null, not NaN.
        sys.stdout.write(json.dumps(_json_safe(r), indent=2, allow_nan=False) + "\n")
        return 0
    n_seeds = f"n = {r['n']} seed{'s' if r['n'] != 1 else ''}"
    if r["load"] is None:
        at_lo = f" ({r['capacity_rps'] * args.lo:,.0f} req/s)" if r["capacity_rps"] is not None else ""
        print(f"no load in [{args.lo:.3f}, {args.hi:.3f}] of capacity meets {r['metric']} <= {r['slo']:g}: "
              f"even {args.lo:.3f}{at_lo} misses it, for every seed ({n_seeds}); lower --lo or relax --slo")
    else:
        ci = "" if r["load_ci95"] is None else f" ± {r['load_ci95']:.3f}"
        rci = "" if r["rps_ci95"] is None else f" ± {r['rps_ci95']:,.0f}"
        rps = "" if r["rps"] is None else f" = {r['rps']:,.0f}{rci} req/s"
        missing = r.get("missing_at_lo") or []
        note = (f"; {len(missing)} of {r['n']} seeds miss it even at --lo {args.lo:.3f}, counted as "
                f"{args.lo:.3f} (an upper bound)") if missing else ""
        print(f"max load with {r['metric']} <= {r['slo']:g}: {r['load']:.3f}{ci} of capacity{rps} ({n_seeds}{note})")
    for s in r["seeds"]:
        note = "" if s["meets_at_lo"] else " (misses the SLO even at --lo)"
        print(f"  seed {s['seed']}: {s['load']:.3f}{note} after {len(s['probes'])} runs")
    return 0


def _json_safe(v: Any) -> Any:
    """``v`` with every non-finite float (NaN, infinities) as ``None``."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    return v
