"""``microsched plot``: the standard figures of a result dataset or a run (:mod:`microsched.plots`)."""

from __future__ import annotations

import argparse
from typing import Any

from .args import Formatter
from .errors import CliError
from .render import console

PLOT_DESCRIPTION = """\
Draw the standard figures, as PNG and SVG, from a result dataset (results.parquet of a sweep
or a reproduction, or the directory that holds it) or from a single run directory (written
by `microsched run --out`: summary.json + timeseries.parquet).

kinds (default: every kind that applies to the input):
  latency     p50 / p99 / p99.9 latency vs load (means over seeds, 95 % CI error bars)
  throughput  throughput and goodput vs offered load
  pareto      p99 latency vs CPU utilization, Pareto front marked
  slowdown    p99 slowdown vs load, one panel per request type
  timeseries  (a run) cores, credits, queues and drops over time

examples:
  microsched plot out/smoke                             # out/smoke/plots/*.png, *.svg
  microsched plot out/smoke/results.parquet --kind latency --x load.fraction --hue variant
  microsched run mmc.toml --out out/mmc && microsched plot out/mmc --kind timeseries
"""

def add_commands(sub: Any) -> None:
    pl = sub.add_parser("plot", help="draw latency, throughput, Pareto, slowdown or time-series figures",
                        description=PLOT_DESCRIPTION, formatter_class=Formatter)
    pl.add_argument("path", metavar="PATH", help="results.parquet, a sweep/reproduce output directory, or a run directory")
    pl.add_argument("--kind", action="append", metavar="KIND",
                    help="latency, throughput, pareto, slowdown or timeseries (repeat for several; default: all "
                         "that apply)")
    pl.add_argument("--x", metavar="COL", help="x axis column of latency / slowdown (default: load.fraction if it "
                                              "varies); of throughput (default: offered_rps)")
    pl.add_argument("--hue", metavar="COL", help="one curve per value of COL (default: variant if present, else "
                                                "the first other varying parameter)")
    pl.add_argument("--out", metavar="DIR", help="output directory (default: plots/ beside the data)")
    pl.set_defaults(func=cmd_plot)



def cmd_plot(args: argparse.Namespace) -> int:
    from ..plots import PlotError, plot

    try:
        paths = plot(args.path, kinds=args.kind, x=args.x, hue=args.hue, out=args.out)
    except PlotError as e:
        raise CliError(e) from None
    con = console()
    dirs = sorted({str(p.parent) for p in paths})
    con.print(f"{len(paths)} files written to [bold]{', '.join(dirs)}/[/bold]: "
              + ", ".join(p.name for p in paths))
    return 0
