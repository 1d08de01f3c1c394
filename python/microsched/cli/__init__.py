"""The ``microsched`` command line.

Every command's ``--help`` is its manual. Bad input of any kind (an invalid scenario, a
missing file, a malformed ``--set``, an unknown flag) prints exactly one line on stderr,
``microsched: error: <message>``, and exits with status 2; never a traceback. Set
``MICROSCHED_DEBUG=1`` to get the traceback of an unexpected internal error.

One module per command (``run``, ``validate`` with ``schema``, ``bench``, ``reproduce``, ``sweep``,
``plot``, ``report``, ``real`` with ``serve`` and ``loadgen``), each adding its parsers with
``add_commands``; this module
assembles them and maps every failure onto the error contract of :mod:`.errors`.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from typing import Sequence

from . import (bench, check_policy, compare, harvest, maxload, plot, policies, real, report, reproduce, run, sweep,
               validate)
from .args import Formatter, Parser
from .errors import EXIT_INTERNAL, PROG, CliError, fail, fail_policy, is_policy_failure
from .real import _schedule_lag_warning  # noqa: F401  (tests check the warning on its own)

DESCRIPTION = """\
microsched: a deterministic discrete-event simulator of a microsecond-scale server
(cores, per-core or central queues, work stealing, network RTT, open-loop clients,
core allocators and overload controllers), and a real runtime of the same policies.
"""

EPILOG = """\
Run `microsched COMMAND --help` for the manual of a command.
Bad input exits with status 2 and one line on stderr: `microsched: error: <message>`.
A policy written in Python that fails during a run (an exception, a decision out of bounds)
also exits with status 2: one such line naming the policy, the call and the simulated time,
then the policy's traceback if it raised.
"""


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog=PROG, description=DESCRIPTION, epilog=EPILOG, formatter_class=MainFormatter)
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}",
                   help="print the version and exit")
    # The one list of commands is argparse's, made of every command's own `help`.
    sub = p.add_subparsers(dest="command", title="commands", metavar="COMMAND", parser_class=Parser)
    run.add_commands(sub)
    validate.add_commands(sub)
    policies.add_commands(sub)
    bench.add_commands(sub)
    reproduce.add_commands(sub)
    maxload.add_commands(sub)
    compare.add_commands(sub)
    check_policy.add_commands(sub)
    sweep.add_commands(sub)
    plot.add_commands(sub)
    report.add_commands(sub)
    real.add_commands(sub)
    harvest.add_commands(sub)
    return p


class MainFormatter(Formatter):
    """The layout of ``microsched --help``: the command names in a column wide enough for the
    longest (argparse measures the listed commands without their indent and would put the
    summary of ``harvest-pods`` on a line of its own)."""

    def _format_action(self, action: argparse.Action) -> str:
        if isinstance(action, argparse._SubParsersAction):
            names = [len(a.metavar or a.dest) for a in action._get_subactions()]
            self._action_max_length = max(self._action_max_length, max(names, default=0) + 2 * self._indent_increment
                                          + self._current_indent)
        return super()._format_action(action)


def commands(parser: argparse.ArgumentParser) -> list[str]:
    """The names of the parser's commands, in the order of ``--help``."""
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            return list(a.choices)
    return []


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("microsched")
    except Exception:  # noqa: BLE001
        return "unknown"


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
    """Warnings (a run that will produce nothing, a coarser time series) as one line each."""
    sys.stderr.write(f"{PROG}: warning: {' '.join(str(message).split())}\n")


def _die_with_parent_if_asked() -> None:
    """In a `serve` or `loadgen` that `microsched real` started (its pid in
    MICROSCHED_DIE_WITH_PARENT): die when it dies, even by SIGKILL (and at once if it already has)."""
    parent = os.environ.pop("MICROSCHED_DIE_WITH_PARENT", None)
    if parent and parent.isdigit():
        from ..sweep.worker import die_with_parent

        die_with_parent(int(parent))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``microsched`` console script; returns the exit status."""
    _die_with_parent_if_asked()
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        names = commands(parser)
        fail(f"a command is required: {', '.join(names[:-1])} or {names[-1]} (see `{PROG} --help`)")
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _one_line_warning
            return int(args.func(args) or 0)
    except CliError as e:
        fail(e)
    except (ValueError, OSError) as e:
        if isinstance(e, BrokenPipeError):  # stdout closed early (`| head`): not an error
            try:
                sys.stdout = open(os.devnull, "w")  # noqa: SIM115
            except OSError:
                pass
            return 0
        msg = e.strerror + (f": {e.filename}" if e.filename else "") if isinstance(e, OSError) and e.strerror else e
        fail(msg)
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROG}: interrupted\n")
        return 130
    except BaseException as e:  # a panic in the native code (pyo3 PanicException) or a bug
        if isinstance(e, (SystemExit, GeneratorExit)):
            raise
        if is_policy_failure(e):  # a Python policy raised or decided out of bounds: its author's bug
            fail_policy(e)
        if os.environ.get("MICROSCHED_DEBUG"):
            raise
        fail(f"internal error ({type(e).__name__}): {e}; please report it "
             f"(set MICROSCHED_DEBUG=1 for a traceback)", EXIT_INTERNAL)
