"""``microsched run``: simulate a scenario and print its summary."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from .args import Formatter, add_force, add_scenario, add_set, add_trace, report_trace, seed
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
  microsched run mmc.toml --trace mmc.json     # a timeline: open it in https://ui.perfetto.dev

Before it starts, a run's cost is estimated (requests, events, memory); one over the limits
is refused with an error naming the field responsible (--force runs it anyway). Ctrl-C stops
a run within a fraction of a second (exit status 130; --keep-partial prints what it measured).
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
    add_force(r)
    r.add_argument("--keep-partial", action="store_true",
                   help="on Ctrl-C, stop the simulation and print (and save, with --out) what it measured so far "
                        "(summary.sim.interrupted_at_ms says when it stopped); the exit status is still 130")
    r.add_argument("--progress", choices=("auto", "always", "never"), default="auto",
                   help="a progress bar with ETA on stderr once a run has lasted 2 s: auto = when stderr is a "
                        "terminal")
    add_trace(r, "simulated time since the run's start (warm-up included)")
    r.set_defaults(func=cmd_run)


class ProgressBar:
    """The ``progress`` callback of :func:`microsched.run`: a rich progress bar on stderr,
    shown only once the run has lasted ``delay_s`` (short runs print nothing)."""

    def __init__(self, delay_s: float = 2.0) -> None:
        self.start = time.monotonic()
        self.delay_s = delay_s
        self.bar: Any = None
        self.task: Any = None

    def __call__(self, done_ms: float, total_ms: float) -> None:
        elapsed = time.monotonic() - self.start
        if elapsed < self.delay_s:
            return
        if not sys.stderr.isatty():
            # No terminal to redraw a bar on (a log, a pipe): a plain line every few seconds.
            if elapsed - getattr(self, "_last_line", -1e9) >= 5.0:
                self._last_line = elapsed
                eta = elapsed * (total_ms - done_ms) / done_ms if done_ms > 0 else float("nan")
                sys.stderr.write(f"simulating: {done_ms:,.1f} / {total_ms:,.1f} ms ({done_ms / total_ms:.0%}), "
                                 f"{elapsed:.0f} s elapsed, ETA {eta:.0f} s\n")
                sys.stderr.flush()
            return
        if self.bar is None:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            from .render import err_console

            self.bar = Progress(TextColumn("simulating"), BarColumn(),
                                TextColumn("{task.completed:,.1f} / {task.total:,.1f} ms"),
                                TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                                console=err_console(), transient=True)
            self.bar.start()
            self.task = self.bar.add_task("run", total=total_ms)
        self.bar.update(self.task, completed=done_ms)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def cmd_run(args: argparse.Namespace) -> int:
    from ..api import run

    # The result is a pandas frame: import it now, not after a Ctrl-C, which should end the
    # command at once.
    import pandas  # noqa: F401

    show = args.progress == "always" or (args.progress == "auto" and sys.stderr.isatty())
    bar = ProgressBar() if show else None
    try:
        res = run(args.scenario, seed=args.seed, overrides=args.overrides, force=args.force,
                  progress=bar, keep_partial=args.keep_partial, trace=args.trace,
                  trace_window=args.trace_window, trace_max_events=args.trace_max_events)
    except ValueError as e:
        raise CliError(with_file(e, args.scenario)) from None
    finally:
        if bar is not None:
            bar.close()
    report_trace(res.trace)
    interrupted = res.summary.get("sim", {}).get("interrupted_at_ms")
    if interrupted is not None:
        sys.stderr.write(f"microsched: interrupted at {interrupted:,.3f} ms of simulated time; "
                         "the results below cover the run up to there\n")
    if args.json:
        sys.stdout.write(json.dumps(res.summary, indent=2) + "\n")
    else:
        print_summary(res.summary)
    if args.out:
        out = res.save(args.out)
        if not args.json:
            from ..api import CDF_PLOT_FILE

            console().print(f"results written to [bold]{out}/[/bold]; latency plot: [bold]{out / CDF_PLOT_FILE}[/bold]")
    return 130 if interrupted is not None else 0
