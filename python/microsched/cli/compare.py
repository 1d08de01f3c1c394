"""``microsched compare``: policies side by side on a scenario, paired by seed."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from .args import Formatter, add_scenario, add_set, positive
from .errors import CliError

DESCRIPTION = """\
Run a scenario under two or more variants (each a name and the scenario fields it sets), at
every load of --loads, with seeds 1..K, and compare every variant with the baseline (the first
--variant, or --baseline) seed by seed: every seed offers the very same requests to every
variant, so the difference and the ratio are computed per seed and only then averaged, with
their 95 % confidence half-widths. Prints one table per load (metric, variant, baseline mean,
variant mean, difference ± CI, ratio ± CI; * where the CI of the difference excludes 0) and,
with --out, writes results.parquet, aggregate.parquet, paired.csv and the figures
compare_latency.png (p50/p99/p99.9 vs load) and compare_cores.png (cores, throughput, drops).

examples:
  microsched compare experiments/validation/mmc.toml --variant central \\
      --variant percore:server.queue=per_core --loads 0.5,0.8,0.9 --seeds 5 --out out/cmp
  microsched compare my.toml --variant static \\
      --variant caladan:policy.allocator.kind=caladan,policy.allocator.poll_us=5 --json
"""


def _loads(text: str) -> list[float]:
    try:
        vals = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid --loads {text!r}: use comma-separated numbers, e.g. 0.3,0.6,0.9")
    if not vals or any(not math.isfinite(v) or v <= 0 for v in vals):
        raise argparse.ArgumentTypeError(f"invalid --loads {text!r}: every load must be a positive number")
    return vals


def add_commands(sub: Any) -> None:
    c = sub.add_parser("compare", help="compare policies on a scenario: paired differences and ratios with CIs",
                       description=DESCRIPTION, formatter_class=Formatter)
    add_scenario(c)
    c.add_argument("--variant", action="append", default=[], metavar="NAME[:KEY=VALUE,...]", required=True,
                   help="a variant: its name and the scenario fields it sets (comma-separated); give two or more")
    c.add_argument("--loads", type=_loads, metavar="X,Y,...",
                   help="values of --load-key to run (default: the scenario's own load)")
    c.add_argument("--load-key", default="load.fraction", metavar="KEY",
                   help="the scenario field the loads set (default: load.fraction, a fraction of capacity)")
    c.add_argument("--seeds", type=positive, default=3, metavar="K", help="seeds 1..K (default: 3; at least 2)")
    c.add_argument("--baseline", metavar="NAME", help="the variant the others are compared with (default: the first)")
    c.add_argument("--metrics", metavar="M,...",
                   help="summary metrics to compare, comma-separated dotted paths (default: p50/p99/p99.9 latency, "
                        "throughput, goodput, drop rate, cores allocated, CPU utilization)")
    add_set(c)
    c.add_argument("--jobs", type=positive, metavar="N", help="runs in parallel (default: the CPUs)")
    c.add_argument("--out", metavar="DIR", help="write results, the paired table and the figures here")
    c.add_argument("--json", action="store_true", help="print the paired table as JSON records")
    c.set_defaults(func=cmd_compare)


def cmd_compare(args: argparse.Namespace) -> int:
    from ..comparison import DEFAULT_METRICS, CompareError, compare
    from .render import console

    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()] if args.metrics else list(DEFAULT_METRICS)
    try:
        cmp = compare(args.scenario, args.variant, args.loads, load_key=args.load_key, seeds=args.seeds,
                      baseline=args.baseline, metrics=metrics, overrides=args.overrides, jobs=args.jobs)
    except CompareError as e:
        raise CliError(str(e)) from None
    missing = [m for m in metrics if m not in cmp.results.columns]
    if missing and len(missing) == len(metrics):
        raise CliError(f"--metrics: none of {', '.join(missing)} is in the summary (e.g. latency_us.p99, "
                       f"throughput_rps, cores.allocated_mean)")
    if args.out:
        cmp.save(args.out)
    if args.json:
        print(json.dumps(json.loads(cmp.paired.to_json(orient="records")), indent=1))
        return 0
    print_paired(cmp, console())
    if args.out:
        console().print(f"written to [bold]{args.out}/[/bold]: results.parquet, aggregate.parquet, paired.csv, "
                        f"compare_latency.png, compare_cores.png")
    return 0


def print_paired(cmp: Any, con: Any) -> None:
    from rich.table import Table

    from ..reproduce.claims import fmt_number

    p = cmp.paired
    metric_width = max((len(str(m)) for m in p["metric"]), default=6) if len(p) else 6
    for at in _loads_of(p[cmp.load_key]):
        here = p[p[cmp.load_key].isna()] if math.isnan(at) else p[p[cmp.load_key].astype(float) == at]
        title = f"{cmp.load_key} = {fmt_number(at)}" if not math.isnan(at) else "the scenario's load"
        t = Table(title=f"{title}: each variant against {cmp.baseline}, paired by seed (n = "
                        f"{int(here['n'].max()) if len(here) else 0})", title_justify="left")
        # On a narrow terminal the numbers fold onto two lines; the metric's name never gets cut
        # ("latency_us.…" names no metric).
        t.add_column("metric", no_wrap=True, min_width=metric_width)
        for col in ("variant", cmp.baseline, "variant mean", "difference", "ratio"):
            t.add_column(col, justify="left" if col == "variant" else "right", overflow="fold")
        for _, r in here.iterrows():
            star = " *" if r["significant"] else ""
            t.add_row(r["metric"], r["variant"], fmt_number(r["baseline_mean"]), fmt_number(r["mean"]),
                      f"{fmt_number(r['diff'])} ± {fmt_number(r['diff_ci95'])}{star}",
                      f"{fmt_number(r['ratio'])} ± {fmt_number(r['ratio_ci95'])}")
        con.print(t)
    con.print("* the 95 % CI of the paired difference excludes 0")


def _loads_of(column: Any) -> list[float]:
    """The distinct loads of a column, NaN (the scenario's own load) once and last: a ``set`` of
    floats keeps every NaN apart, which printed the same table once per seed."""
    values = [float(x) for x in column]
    distinct = sorted({x for x in values if not math.isnan(x)})
    return distinct + ([math.nan] if any(math.isnan(x) for x in values) else [])
