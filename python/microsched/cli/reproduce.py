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
  claims.json        [{"id", "claim", "paper", "measured", "holds", "verdict", "kind",
                     "paper_ref", "ci95", "tolerance", "cause": {"text", "evidence"}, ...}]
  *.png              the figures
  meta.json          the spec as run, paper, figure, jobs, wall time (and "thesis", below)
  thesis.json        for a reproduction that declares its paper's thesis: {"statement",
                     "source", "verdict" (shown / direction / not_shown), "evidence", "claims"}

A claim's verdict: reproduced (the measured mean inside the tolerance band of the paper's
number, a ratio's effect within 0.5-1.5x the paper's, the 95 % CI excluding no effect),
direction (the paper's direction with the CI excluding no effect, not its magnitude),
not_reproduced, out_of_regime (a precondition of the paper's experiment does not hold in
the run), model_check (a check of our model, not a paper claim), derived (a number the
paper composes from statements at different points: shown, not judged), fit_input (a number
a model parameter was fitted on: shown with the fit, not judged). "holds" means
reproduced. Every verdict other than reproduced carries a cause read from the run.

The claims table is printed at the end. A claim that is not reproduced is reported, not an
error: the exit status is 0 once the results are written.

--all runs every reproduction, each into OUT/NAME (default OUT: results/all), and writes
OUT/summary.json (per paper, the counts by verdict, the claims not reproduced with their
causes and its thesis; "theses": the five theses in the papers' order) and OUT/report.html (the verdict tables and key figures of every paper); the exit
status is 1 if a reproduction failed to run.

examples:
  microsched reproduce --list
  microsched reproduce allocators --quick
  microsched reproduce allocators --jobs 8 --seeds 10 --out results/allocators-10seeds
  microsched reproduce allocators --resume    # after Ctrl-C: runs only what is missing
  microsched reproduce coresync --quick --condition slow-wake
  microsched reproduce synergy --quick --condition inferred-dispatcher
  microsched reproduce --all --quick --out results/all-quick
"""


def add_commands(sub: Any) -> None:
    rp = sub.add_parser("reproduce", help="regenerate a paper's figure and check its claims",
                        description=REPRODUCE_DESCRIPTION, formatter_class=Formatter)
    rp.add_argument("name", nargs="?", metavar="NAME", help="the reproduction to run (see --list)")
    rp.add_argument("--list", action="store_true", help="list the reproductions (name, paper, figure) and exit")
    rp.add_argument("--all", action="store_true",
                    help="run every reproduction, each into OUT/NAME, and write OUT/summary.json (default OUT: "
                         "results/all)")
    rp.add_argument("--quick", action="store_true",
                    help="the spec's [quick] profile: fewer points and shorter runs, 3 seeds, the loads the claims are "
                         "about (minutes, not a substitute for the full profile)")
    rp.add_argument("--out", metavar="DIR", help="output directory (default: results/NAME)")
    rp.add_argument("--jobs", type=positive, metavar="N",
                    help="runs in parallel in worker processes (default: the number of CPUs)")
    rp.add_argument("--seeds", type=positive, metavar="K",
                    help="run seeds 1..K of every point (default: the spec's seeds)")
    rp.add_argument("--resume", action="store_true",
                    help="continue an interrupted reproduction in --out: every finished run was saved in OUT/parts, "
                         "only the others run (the same --quick/--seeds are required)")
    rp.add_argument("--condition", metavar="C",
                    help="run every variant under a named condition of the reproduction (coresync: cold-start, "
                         "slow-wake, keep-cut, capped-pool, bursty-clients; harvest: irq-per-request, "
                         "irq-per-request-bully; synergy: inferred-dispatcher, ci-overhead); default output "
                         "results/NAME-C")
    rp.add_argument("--semantics", metavar="NAME",
                    help="run under another model's semantics, the overrides of semantics-NAME.toml next to the reproduction's spec "
                         "(load-shift runs under study, the simulation study's simulator, by default; ours = this "
                         "project's own model, output results/load-shift-ours; instant, study-client)")
    rp.add_argument("--sensitivity", action="store_true",
                    help="after the reproduction, rerun it with each model cost it declares at 0.5x and 2x its "
                         "default, one at a time, and write OUT/sensitivity.json and .md: which verdicts depend on "
                         "which cost (harvest: the eviction, the wait on a lent core, the turns with the Secondary there, the cache refill, CFS's wake-up wait)")
    rp.set_defaults(func=cmd_reproduce)


def cmd_reproduce(args: argparse.Namespace) -> int:
    from .. import reproduce

    if args.list:
        if args.name or args.all:
            raise CliError("--list takes no NAME and no --all")
        _print_reproductions(reproduce)
        return 0
    if args.all:
        if args.name:
            raise CliError("--all takes no NAME: it runs every reproduction")
        if args.condition or args.semantics or args.sensitivity:
            raise CliError("--condition, --semantics and --sensitivity apply to one reproduction: give its NAME "
                           "instead of --all")
        return _run_all(args, reproduce)
    if not args.name:
        raise CliError(f"a reproduction NAME is required: use one of {', '.join(reproduce.names())} "
                       f"(or --all, or --list)")
    try:
        r = reproduce.get(args.name)
        if args.condition is not None:
            r.condition(args.condition)
    except KeyError as e:
        raise CliError(e.args[0]) from None
    if args.sensitivity and not r.costs:
        with_costs = ", ".join(n for n in reproduce.names() if reproduce.get(n).costs)
        raise CliError(f"--sensitivity: reproduction {args.name!r} declares no model costs: use one of {with_costs}")

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
    if args.sensitivity:
        _sensitivity(args, outcome, progress_console=err_con, con=con)
    return 0


def _sensitivity(args: argparse.Namespace, outcome: Any, progress_console: Any, con: Any) -> None:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..reproduce.sensitivity import SENSITIVITY_MD, run_sensitivity

    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=progress_console, transient=True, disable=not progress_console.is_terminal)
    with progress:
        task = progress.add_task("sensitivity", total=None)

        def tick(label: str, done: int, total: int) -> None:
            progress.update(task, description=f"sensitivity: {label}", completed=done, total=total)

        result = run_sensitivity(args.name, out=outcome.out, quick=args.quick, jobs=args.jobs, seeds=args.seeds,
                                 baseline=outcome.claims, progress=tick)
    moved = [r for r in result["claims"] if r["depends_on"]]
    con.print(f"sensitivity: {len(moved)} of {len(result['claims'])} verdicts change with a cost at 0.5x or 2x")
    for r in moved:
        con.print(f"  {r['id']}: {r['verdict']} -> depends on {', '.join(r['depends_on'])}")
    con.print(f"table: [bold]{outcome.out}/{SENSITIVITY_MD}[/bold]")


def _run_all(args: argparse.Namespace, reproduce: Any) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..reproduce.framework import run_all

    con, err_con = console(), err_console()
    out = args.out or "results/all"
    progress = Progress(TextColumn("reproduce --all: {task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=err_con, transient=True, disable=not err_con.is_terminal)
    with progress:
        tasks: dict[str, Any] = {}  # a bar per reproduction: several run at once with --jobs > 1

        def tick(name: str, done: int, total: int) -> None:
            if name not in tasks:
                tasks[name] = progress.add_task(name, total=None)
                if not err_con.is_terminal:
                    err_con.print(f"reproduce --all: {name} ({len(tasks)} of {len(reproduce.names())})")
            progress.update(tasks[name], completed=done, total=total)

        from ..sweep.engine import SweepError

        try:
            summary = run_all(out=out, quick=args.quick, jobs=args.jobs, seeds=args.seeds, progress=tick,
                              resume=args.resume)
        except (reproduce.SpecError, SweepError) as e:
            raise CliError(e) from None
        except KeyboardInterrupt:
            err_con.print(f"interrupted: the finished runs are saved under {out}; continue with --all --resume")
            raise
    print_summary(summary, con, out)
    from ..report import build_report

    page = build_report(out)
    con.print(f"report: [bold]{page.resolve()}[/bold]")
    return 0 if summary["ok"] else 1


THESIS_STYLE = {"shown": "green", "direction": "yellow", "not_shown": "bold red"}


def print_theses(summary: dict, con: Any) -> None:
    """Each paper's thesis (its abstract's central claim) with its verdict and the run's evidence."""
    if not summary.get("theses"):
        return
    con.print("\n[bold]theses[/bold] (each paper's central claim, judged on the claims that decide it)")
    for t in summary["theses"]:
        style = THESIS_STYLE.get(t["verdict"], "")
        con.print(f"  [bold]{t['title']}[/bold]: [{style}]{t['verdict'].replace('_', ' ')}[/]\n"
                  f"    {t['statement']}\n    [dim]{t['evidence']}[/dim]")


def print_summary(summary: dict, con: Any, out: str) -> None:
    """Per paper, the counts by verdict; then every claim not reproduced with its cause."""
    from rich.table import Table

    from ..reproduce.claims import fmt_number

    t = Table(title="reproductions" + (" (--quick)" if summary["quick"] else ""), title_justify="left")
    for col in ("paper", "reproductions", "time (s)", "reproduced", "direction", "not reproduced", "out of regime",
                "model checks", "derived", "fit inputs"):
        t.add_column(col, justify="left" if col in ("paper", "reproductions") else "right")
    for p in summary["papers"]:
        n = p["counts"]
        t.add_row(p["title"], ", ".join(p["reproductions"]), f"{p['wall_s']:.0f}", str(n["reproduced"]),
                  str(n["direction"]), str(n["not_reproduced"]), str(n["out_of_regime"]), str(n["model_check"]),
                  str(n.get("derived", 0)), str(n.get("fit_input", 0)))
    n = summary["counts"]
    t.add_row("[bold]all[/bold]", "", f"{summary['wall_s']:.0f}", f"[bold]{n['reproduced']}[/bold]",
              str(n["direction"]), str(n["not_reproduced"]), str(n["out_of_regime"]), str(n["model_check"]),
              str(n.get("derived", 0)), str(n.get("fit_input", 0)))
    con.print(t)
    print_theses(summary, con)
    for p in summary["papers"]:
        for name, err in p["errors"].items():
            con.print(f"[bold red]{name} failed to run:[/bold red] {err}")
        if not p["not_reproduced"]:
            continue
        con.print(f"\n[bold]{p['title']}[/bold]: not reproduced")
        for c in p["not_reproduced"]:
            paper = fmt_number(c["paper"]) if c["paper"] is not None else "–"
            ci = f" ± {fmt_number(c['ci95'])}" if c.get("ci95") is not None else ""
            con.print(f"  {c['reproduction']}/{c['id']} ({c['verdict'].replace('_', ' ')}; paper {paper}"
                      f"{' ' + c['paper_ref'] if c.get('paper_ref') else ''}, measured {fmt_number(c['measured'])}{ci}"
                      f"{' ' + c['unit'] if c.get('unit') else ''}): {c['cause'] or 'no cause'}")
    con.print(f"\nsummary written to [bold]{out}/summary.json[/bold]; each reproduction in {out}/NAME/")


def _print_reproductions(reproduce: Any) -> None:
    from rich.table import Table

    t = Table(title="reproductions (`microsched reproduce NAME [--quick]`)", title_justify="left")
    for col in ("name", "paper", "figure", "description", "sweep spec"):
        t.add_column(col, overflow="fold")
    for n in reproduce.names():
        r = reproduce.get(n)
        t.add_row(r.name, r.paper, r.figure, r.description, f"experiments/{r.spec}")
    console().print(t)
