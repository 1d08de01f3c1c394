"""``microsched sweep``: run a sweep spec on a local process pool or on Ray."""

from __future__ import annotations

import argparse
from typing import Any

from .args import Formatter, positive
from .errors import CliError
from .render import console, err_console

SWEEP_DESCRIPTION = """\
Run every point of a sweep spec: a base scenario, overrides for every point, a [grid] of
dotted keys (cartesian product), named [[variants]] and seeds (the format of
experiments/*/sweep.toml; see experiments/sweeps/smoke.toml). Every point's scenario is
validated before anything runs. Points run in parallel on a local process pool (--jobs), or
on Ray (--backend ray: a local Ray instance, or an existing cluster with --address). A sweep
of more than --max-points points (default 100000), or estimated to take more than --max-hours
(default 168), is refused from the spec's shape before any point is built.

Each finished point is written at once to OUT/parts/<point_id>.parquet (point_id: a hash of
the point's overrides and seed), so an interrupted sweep loses no finished point and
--resume runs only the missing ones. At the end:
  OUT/results.parquet    one row per run: point_id, point, the parameters (variant, every
                         overridden key, seed) and every summary metric flattened with dots
  OUT/aggregate.parquet  means over seeds, M.ci95 (95 % CI half-width) and n per point
  OUT/sweep.json         what was run; OUT/spec.toml, OUT/base.toml, OUT/scenario.json

examples:
  microsched sweep experiments/sweeps/smoke.toml --out out/smoke
  microsched sweep experiments/sweeps/smoke.toml --out out/smoke --resume
  microsched sweep experiments/allocators/sweep.toml --quick --jobs 8 --out out/alloc
  ray start --head && microsched sweep spec.toml --backend ray --address auto --out out/big
"""

def add_commands(sub: Any) -> None:
    sw = sub.add_parser("sweep", help="run a sweep spec on a local process pool or on Ray",
                        description=SWEEP_DESCRIPTION, formatter_class=Formatter)
    sw.add_argument("spec", metavar="SPEC.toml", help="the sweep spec")
    sw.add_argument("--out", metavar="DIR", help="output directory (default: results/sweeps/NAME, NAME the spec's name)")
    sw.add_argument("--jobs", type=positive, metavar="N",
                    help="points run at once (local: worker processes, default: the number of CPUs; "
                         "ray: tasks in flight, default: twice the cluster's CPUs, and the CPUs of a local "
                         "Ray instance)")
    sw.add_argument("--backend", choices=("local", "ray"), default="local",
                    help="local process pool (default) or Ray")
    sw.add_argument("--driver", choices=("sim", "real"), default="sim",
                    help="sim: the simulator (default); real: the real runtime, each point a server and a load "
                         "generator on this machine's loopback (`microsched real`), one point at a time "
                         "(--jobs 1, --backend local)")
    sw.add_argument("--address", metavar="ADDR",
                    help="Ray cluster to connect to: auto (the cluster `ray start --head` started on this "
                         "machine), HOST:PORT, or ray://HOST:10001 (Ray Client); default: start a local Ray "
                         "instance for the sweep")
    sw.add_argument("--resume", action="store_true",
                    help="complete the sweep in --out: skip the points whose result is already there")
    sw.add_argument("--quick", action="store_true", help="the spec's [quick] profile (fewer, shorter runs)")
    sw.add_argument("--seeds", type=positive, metavar="K", help="run seeds 1..K of every point (default: the spec's)")
    sw.add_argument("--max-points", type=positive, metavar="N", default=None,
                    help="refuse a sweep of more than N points (default 100000), checked from the spec's shape "
                         "before any point is built")
    sw.add_argument("--max-hours", type=float, metavar="H", default=None,
                    help="refuse a sweep whose estimated time (the base scenario's cost estimate × points / jobs) "
                         "is over H hours (default 168, a week)")
    sw.set_defaults(func=cmd_sweep)



def describe_size(spec: Any, jobs: int | None, con: Any, big_points: int = 1000, big_s: float = 60.0) -> None:
    """Before a big sweep starts (it first validates every point, which takes a while): how
    many points, and roughly how long they take, from the base scenario's cost estimate."""
    from ..api import estimate
    from ..sweep.engine import duration_text
    from ..sweep.runner import default_jobs

    n = spec.n_points()
    try:
        per_point = estimate(spec.base, overrides=list(spec.overrides))["wall_s"]
    except (ValueError, OSError):
        per_point = None
    jobs = jobs or default_jobs()
    total_s = per_point * n / jobs if per_point is not None else None
    if n < big_points and (total_s is None or total_s < big_s):
        return
    shape = " × ".join([*(f"{len(v)} {k}" for k, v in spec.grid.items()),
                        *([f"{len(spec.variants)} variants"] if spec.variants else []), f"{len(spec.seeds)} seeds"])
    eta = f"; roughly {duration_text(total_s)} on {jobs} job(s) at a typical engine speed" if total_s is not None else ""
    con.print(f"sweep {spec.name}: {n:,} points ({shape}){eta}; checking every point first (Ctrl-C stops)")


def cmd_sweep(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
        TimeRemainingColumn

    from ..sweep import engine
    from ..sweep.spec import SpecError, SweepSpec

    try:
        spec = SweepSpec.load(args.spec, quick=args.quick, seeds=args.seeds)
    except SpecError as e:
        raise CliError(e) from None
    out = Path(args.out) if args.out else Path("results") / "sweeps" / spec.name
    max_points = args.max_points or engine.MAX_POINTS
    max_hours = engine.MAX_HOURS if args.max_hours is None else args.max_hours
    if not (max_hours > 0):
        raise CliError(f"--max-hours: {args.max_hours} is not allowed: use a number of hours > 0")
    try:
        # Before anything is said or built: an absurd grid is refused at once.
        engine.check_size(spec, args.jobs, max_points, max_hours)
    except engine.SweepError as e:
        raise CliError(e) from None
    err_con = err_console()
    con = console()
    describe_size(spec, args.jobs, err_con)
    progress = Progress(TextColumn(f"sweep {spec.name}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        TextColumn("eta"), TimeRemainingColumn(), console=err_con, transient=True,
                        disable=not err_con.is_terminal)
    state = {"done": 0, "total": 0, "skipped": 0}

    def start(skipped: int, total: int) -> None:
        state.update(skipped=skipped, total=total)
        if skipped:
            con.print(f"resuming: {skipped} of {total} points already done in {out}/parts")

    try:
        with progress:
            task = progress.add_task("points", total=None)

            def tick(done: int, total: int) -> None:
                state["done"] = done
                progress.update(task, completed=done, total=total)

            outcome = engine.run_sweep(args.spec, out, jobs=args.jobs, backend=args.backend, address=args.address,
                                       resume=args.resume, quick=args.quick, seeds=args.seeds, driver=args.driver,
                                       progress=tick, on_start=start, max_points=max_points, max_hours=max_hours)
    except (SpecError, engine.SweepError) as e:
        raise CliError(e) from None
    except engine.PointFailed as e:
        msg = f"{e}; the {state['done']} finished points are kept in {out}/parts: fix the cause and run again with --resume"
        if e.traceback:  # a Python policy raised: the line, then its traceback
            import sys

            from .errors import EXIT_USAGE, PROG, one_line

            sys.stderr.write(f"{PROG}: error: {one_line(msg)}\n{e.traceback}\n")
            raise SystemExit(EXIT_USAGE)
        raise CliError(msg) from None
    except KeyboardInterrupt:
        if state["total"]:
            err_con.print(f"interrupted: {state['done']} of {state['total']} points saved in {out}/parts; "
                          f"complete the sweep with --resume")
        raise
    jobs = f"{outcome.jobs} job(s)" if outcome.jobs else "default concurrency"
    con.print(f"{outcome.n_run} point(s) run ({outcome.n_skipped} already done) of {outcome.n_points} on "
              f"{outcome.backend} ({jobs}) in {outcome.wall_s:.1f} s; results: [bold]{out / engine.RESULTS_FILE}"
              f"[/bold] ({len(outcome.results)} rows), {out / engine.AGGREGATE_FILE}")
    return 0
