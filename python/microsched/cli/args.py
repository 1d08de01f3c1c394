"""What every command's parser shares: usage errors as one line, the help layout, the
argument types, and the scenario arguments (SCENARIO, --set) that five commands take."""

from __future__ import annotations

import argparse
import os
from typing import NoReturn

from .errors import fail

SET_HELP = (
    "override one scenario field before validation, e.g. --set server.max_cores=8, "
    "--set load.fraction=0.9, --set server.queue=central (VALUE is a TOML literal, else "
    "taken as a string; missing tables are created). Repeat for several fields"
)
SCENARIO_HELP = "scenario file: TOML (or JSON if the name ends in .json)"


class Parser(argparse.ArgumentParser):
    """argparse, with usage errors reported as one line (``--help`` shows the usage)."""

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        fail(f"{message} (see `{self.prog} --help`)")


class Formatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=32, width=min(100, _term_width()))


def _term_width() -> int:
    try:
        return os.get_terminal_size().columns
    except OSError:
        return 100


def add_scenario(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", metavar="SCENARIO", help=SCENARIO_HELP)


def add_set(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", dest="overrides", action="append", type=override, default=[], metavar="KEY=VALUE",
                   help=SET_HELP)


def add_force(p: argparse.ArgumentParser) -> None:
    p.add_argument("--force", action="store_true",
                   help="run a scenario even if its cost estimate (requests, events, memory) is over this "
                        "machine's limits, instead of refusing it")


def seed(text: str) -> int:
    try:
        v = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid seed {text!r}: use an integer in 0..2^64-1") from None
    if not 0 <= v < 2**64:
        raise argparse.ArgumentTypeError(f"invalid seed {text!r}: use an integer in 0..2^64-1")
    return v


def override(text: str) -> str:
    key, sep, _ = text.partition("=")
    if not sep or not key.strip() or any(not p.strip() for p in key.split(".")):
        raise argparse.ArgumentTypeError(f"`{text}` is not of the form dotted.key=value")
    return text


def positive(text: str) -> int:
    try:
        v = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: use a positive integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: use a positive integer")
    return v


def duration(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: use a number of seconds > 0") from None
    if not (v > 0 and v < float("inf")):
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: use a number of seconds > 0")
    return v


def add_trace(p: argparse.ArgumentParser, clock: str, default_window: str | None = None) -> None:
    """``--trace FILE``, ``--trace-window`` and ``--trace-max-events``; ``clock`` says what the
    window's milliseconds count (simulated time, or the server's run time)."""
    from ..trace import DEFAULT_MAX_EVENTS, DEFAULT_WINDOW_MS, parse_window

    p.add_argument("--trace", metavar="FILE",
                   help="write a timeline of the run to FILE (Chrome trace-event JSON: open it in "
                        "https://ui.perfetto.dev, or draw it with microsched.trace.render_timeline): a track per "
                        "core (running request N, searching, parked, waking, preempting, waiting on lock), the "
                        "dispatcher's, counters, instants (parks with their gate's reason, credit cuts, drops, "
                        "preemptions, steals) and a slice per request. See docs/timelines.md")
    p.add_argument("--trace-window", type=parse_window, metavar="START_MS:END_MS",
                   help=f"the part of the run the trace records, in ms of {clock} (default: "
                        f"{default_window or f'the first {DEFAULT_WINDOW_MS:g} ms of the measured window'})")
    p.add_argument("--trace-max-events", type=positive_int, default=DEFAULT_MAX_EVENTS, metavar="N",
                   help=f"the trace's size cap in events (default: {DEFAULT_MAX_EVENTS:,}, about 45 MB); when it "
                        "cuts the window short, stderr and the trace's metadata say where")


def positive_int(text: str) -> int:
    try:
        v = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid count {text!r}: use an integer of 1 or more") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"invalid count {text!r}: use an integer of 1 or more")
    return v


def report_trace(info: dict | None, stderr: object = None) -> None:
    """One line on stderr about a written trace; a warning when the size cap cut it."""
    import sys

    if not info:
        return
    err = stderr or sys.stderr
    a, b = info["window_ms"]
    err.write(f"trace: {info['events']:,} events of {a:g}..{b:g} ms written to {info['path']} "
              "(open it in https://ui.perfetto.dev)\n")
    if info.get("truncated_at_ms") is not None:
        err.write(f"trace: the size cap (--trace-max-events) cut the trace at {info['truncated_at_ms']:.3f} ms; "
                  "narrow --trace-window or raise the cap to see the rest\n")
    if info.get("requests_not_drawn"):
        err.write(f"trace: {info['requests_not_drawn']:,} request slices not drawn (more than 256 requests "
                  "in the server at once)\n")
