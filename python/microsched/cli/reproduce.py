"""``microsched reproduce``: regenerate a paper's figure and check its claims."""

from __future__ import annotations

import argparse
from typing import Any

from .args import Formatter, positive
from .errors import CliError
from .render import console, err_console

REPRODUCE_DESCRIPTION = """\
Regenerate a figure of a paper and check its claims on the simulator. A reproduction is a
sweep spec (experiments/NAME/sweep.toml: base scenario, grid, variants, seeds, a [quick]
profile) plus its claims. Points run in parallel on a local process pool.

Written to OUT (default results/NAME):
  results.parquet    one row per run: its parameters (variant, grid keys, the keys the
                     variant sets, seed) and every summary metric, flattened with dots
                     (latency_us.p99, cores.allocated_mean, cpu_utilization, ...)
  aggregate.parquet  means over seeds per point, with M.ci95 (95 % CI half-width) and n
  claims.json        [{"id", "claim", "paper", "measured", "holds", ...extra keys}]
  *.png              the figures
  meta.json          the spec as run, paper, figure, jobs, wall time

The claims table is printed at the end. A claim that does not hold is reported (holds =
false), not an error: the exit status is 0 once the results are written.

examples:
  microsched reproduce --list
  microsched reproduce allocators --quick
  microsched reproduce allocators --jobs 8 --seeds 10 --out results/allocators-10seeds
  microsched reproduce allocators --resume    # after Ctrl-C: runs only what is missing
  microsched reproduce coresync --quick --condition slow-wake
"""


def add_commands(sub: Any) -> None:
    rp = sub.add_parser("reproduce", help="regenerate a paper's figure and check its claims",
                        description=REPRODUCE_DESCRIPTION, formatter_class=Formatter)
    rp.add_argument("name", nargs="?", metavar="NAME", help="the reproduction to run (see --list)")
    rp.add_argument("--list", action="store_true", help="list the reproductions (name, paper, figure) and exit")
    rp.add_argument("--quick", action="store_true",
                    help="the spec's [quick] profile: fewer points, shorter runs, one seed (a smoke test for CI)")
    rp.add_argument("--out", metavar="DIR", help="output directory (default: results/NAME)")
    rp.add_argument("--jobs", type=positive, metavar="N",
                    help="runs in parallel in worker processes (default: the number of CPUs)")
    rp.add_argument("--seeds", type=positive, metavar="K",
                    help="run seeds 1..K of every point (default: the spec's seeds)")
    rp.add_argument("--resume", action="store_true",
                    help="continue an interrupted reproduction in --out: every finished run was saved in OUT/parts, "
                         "only the others run (the same --quick/--seeds are required)")
    rp.add_argument("--condition", metavar="C",
                    help="run every variant under a named condition of the reproduction (coresync: slow-wake, "
                         "keep-cut, capped-pool); default output results/NAME-C")
    rp.add_argument("--semantics", metavar="NAME",
                    help="run under another model's semantics, the overrides of semantics-NAME.toml next to the reproduction's spec "
                         "(load-shift: study = the simulation study's simulator)")
    rp.set_defaults(func=cmd_reproduce)


def cmd_reproduce(args: argparse.Namespace) -> int:
    from .. import reproduce

    if args.list:
        if args.name:
            raise CliError("--list takes no NAME")
        _print_reproductions(reproduce)
        return 0
    if not args.name:
        raise CliError(f"a reproduction NAME is required: use one of {', '.join(reproduce.names())} "
                       f"(or --list)")
    try:
        r = reproduce.get(args.name)
        if args.condition is not None:
            r.condition(args.condition)
    except KeyError as e:
        raise CliError(e.args[0]) from None

    con = console()
    err_con = err_console()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
        TimeRemainingColumn

    progress = Progress(TextColumn(f"reproduce {args.name}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(), console=err_con,
                        transient=True, disable=not err_con.is_terminal)
    with progress:
        task = progress.add_task("runs", total=None)

        def tick(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        from ..sweep.engine import SweepError

        try:
            outcome = reproduce.run_reproduction(args.name, out=args.out, quick=args.quick, jobs=args.jobs,
                                                 seeds=args.seeds, progress=tick, resume=args.resume,
                                                 condition=args.condition, semantics=args.semantics)
        except (reproduce.SpecError, SweepError) as e:
            raise CliError(e) from None
        except KeyboardInterrupt:
            err_con.print(f"interrupted: the finished runs are saved in {args.out or 'results/' + args.name}/parts; "
                          f"continue with --resume")
            raise
    repro = reproduce.get(args.name)
    reproduce.print_claims(outcome.claims, title=f"{args.name}: {repro.paper}, {repro.figure}"
                                                 + (" (--quick)" if args.quick else "")
                                                 + (f" under condition {args.condition}" if args.condition else ""),
                                     console=con)
    figs = ", ".join(p.name for p in outcome.figures)
    con.print(f"{outcome.n_points} runs on {outcome.jobs} job(s) in {outcome.wall_s:.1f} s; results written to "
              f"[bold]{outcome.out}/[/bold]: results.parquet, aggregate.parquet, claims.json, meta.json, {figs}")
    return 0


def _print_reproductions(reproduce: Any) -> None:
    from rich.table import Table

    t = Table(title="reproductions (`microsched reproduce NAME [--quick]`)", title_justify="left")
    for col in ("name", "paper", "figure", "description", "sweep spec"):
        t.add_column(col, overflow="fold")
    for n in reproduce.names():
        r = reproduce.get(n)
        t.add_row(r.name, r.paper, r.figure, r.description, f"experiments/{r.spec}")
    console().print(t)
