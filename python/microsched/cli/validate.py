"""``microsched validate`` and ``microsched schema``: the scenario format."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .args import Formatter, add_force, add_scenario, add_set
from .errors import CliError, with_file


def add_commands(sub: Any) -> None:
    v = sub.add_parser("validate", help="check a scenario and print it resolved",
                       description="Validate SCENARIO against the schema and print it as JSON with every default "
                                   "filled in (what `run` would simulate). Errors name the field at fault and "
                                   "what is allowed.",
                       formatter_class=Formatter)
    add_scenario(v)
    add_set(v)
    add_force(v)
    v.add_argument("--estimate", action="store_true",
                   help="print what a run would cost (requests, events, time-series rows, memory, wall time) "
                        "instead of the resolved scenario")
    v.set_defaults(func=cmd_validate)

    s = sub.add_parser("schema", help="print the JSON Schema of the scenario format",
                       description="Print the JSON Schema of a scenario (generated from the Rust types that "
                                   "validate it: the one place the format is defined).",
                       formatter_class=Formatter)
    s.set_defaults(func=cmd_schema)


def cmd_validate(args: argparse.Namespace) -> int:
    from ..api import estimate, validate

    try:
        resolved = validate(args.scenario, overrides=args.overrides, force=args.force)
        cost = estimate(args.scenario, overrides=args.overrides)
    except ValueError as e:
        raise CliError(with_file(e, args.scenario)) from None
    for w in cost["warnings"]:
        sys.stderr.write(f"microsched: warning: {w}\n")
    sys.stdout.write(json.dumps(cost if args.estimate else resolved, indent=2) + "\n")
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from ..api import schema

    sys.stdout.write(json.dumps(schema(), indent=2) + "\n")
    return 0
