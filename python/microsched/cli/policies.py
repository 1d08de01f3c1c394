"""``microsched policies [KIND]``: every allocator, overload controller and queueing policy with
its parameters, defaults, units and descriptions, read from the scenario schema (the same rows
as the docs' scenario reference, :mod:`microsched.schema_doc`)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .args import Formatter
from .errors import CliError

DESCRIPTION = """\
List the policies a scenario can name under policy.allocator.kind, policy.overload.kind and
policy.sched.kind, each with its parameters (the dotted key --set takes), type, default, unit
and description. KIND narrows the list to one family: allocator, overload or sched.

examples:
  microsched policies                 # all three families
  microsched policies overload        # Breakwater, Protego, SEDA, ... and their parameters
  microsched policies sched --json    # as JSON records
"""


def add_commands(sub: Any) -> None:
    p = sub.add_parser("policies", help="list the policies and their parameters (allocator, overload, sched)",
                       description=DESCRIPTION, formatter_class=Formatter)
    p.add_argument("kind", nargs="?", metavar="KIND", help="allocator, overload or sched (default: all three)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON records")
    p.set_defaults(func=cmd_policies)


def cmd_policies(args: argparse.Namespace) -> int:
    from ..schema_doc import POLICY_KINDS, policy_fields

    if args.kind is not None and args.kind not in POLICY_KINDS:
        raise CliError(f"KIND: unknown policy kind {args.kind!r}: use one of {', '.join(POLICY_KINDS)}")
    families = policy_fields(args.kind)
    if args.json:
        print(json.dumps({k: [{"key": f.key, "kind": f.variant, "type": _plain(f.type), "default": _plain(f.default),
                               "unit": f.unit, "description": _plain(f.description)} for f in rows]
                          for k, rows in families.items()}, indent=1, ensure_ascii=False))
        return 0
    from rich.table import Table

    from ..reproduce.claims import PIPE_TABLE_WIDTH
    from .render import UNWRAPPED_WIDTH, console

    con = console()
    # In a pipe the console is unbounded; the description column would stretch to fill it.
    width = PIPE_TABLE_WIDTH if con.width >= UNWRAPPED_WIDTH else None
    for family, rows in families.items():
        t = Table(title=f"{family}: policy.{family}.kind = ...", title_justify="left", show_lines=False, width=width)
        t.add_column("kind / parameter", no_wrap=True)
        t.add_column("default", overflow="fold")
        t.add_column("unit")
        t.add_column("description", ratio=1, min_width=30)
        for f in rows:
            if f.key.endswith(f".{f.tag}"):  # the policy itself
                t.add_section()
                t.add_row(f"[bold]{f.variant}[/bold]", "", "", _plain(f.description))
            else:
                t.add_row(f"  {f.name}", _plain(f.default), f.unit, _plain(f.description))
        con.print(t)
    return 0


def _plain(text: str) -> str:
    """Markdown's code spans and escaped pipes as a terminal shows them."""
    return text.replace("`", "").replace("\\|", "|")
