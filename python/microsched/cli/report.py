"""``microsched report``: one self-contained HTML page of a sweep, reproduction or run
(:mod:`microsched.report`)."""

from __future__ import annotations

import argparse
from typing import Any

from .args import Formatter
from .errors import CliError
from .render import console

REPORT_DESCRIPTION = """\
Write one self-contained HTML page (no network needed: figures embedded, inline CSS, no
JavaScript) of a sweep, reproduction or run directory: for a reproduction, the claims table
(paper vs measured, holds or not); the figures (a reproduction's in the order and with the
captions it declares, the paper's numbers beside ours first); the results aggregated over seeds
and every run; the spec and the scenario as run. For a `reproduce --all` directory
(summary.json with papers): the five theses and their verdicts first, then per paper its
thesis, why its claims miss, every figure of its reproductions and its claims folded by verdict.

examples:
  microsched report out/smoke                 # out/smoke/report.html
  microsched reproduce allocators --quick --out out/alloc && microsched report out/alloc
  microsched report out/papers                # the page of `reproduce --all`
"""


def add_commands(sub: Any) -> None:
    rp = sub.add_parser("report", help="write a self-contained HTML report of a sweep, reproduction or run",
                        description=REPORT_DESCRIPTION, formatter_class=Formatter)
    rp.add_argument("dir", metavar="DIR", help="a sweep, reproduce or run output directory")
    rp.add_argument("--out", metavar="FILE", help="the HTML file (default: DIR/report.html)")
    rp.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    from ..report import ReportError, build_report

    try:
        path = build_report(args.dir, out=args.out)
    except ReportError as e:
        raise CliError(e) from None
    console().print(f"report written to [bold]{path}[/bold]")
    return 0
