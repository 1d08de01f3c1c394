"""The error contract of every command: bad input is one line on stderr,
``microsched: error: <message>``, and exit status 2; never a traceback.

One exception: a policy written in Python that fails during a run (it raised, or made a decision
out of bounds) is the user's code at fault, and its traceback is what they need. It is reported
as the same one line (the policy, the call, the simulated time, the value or the exception),
followed by the policy's traceback when it raised, and exit status 2."""

from __future__ import annotations

import signal
import sys
from typing import Any, NoReturn

PROG = "microsched"
EXIT_USAGE = 2
EXIT_INTERNAL = 1


class CliError(Exception):
    """Bad input: reported as one line on stderr, exit status 2."""


def _terminate(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def sigterm_as_ctrl_c() -> None:
    """SIGTERM (`kill PID`, kubectl delete, systemctl stop, a parent stopping its children)
    stops the command as Ctrl-C does: what it does on Ctrl-C (restore, report, stop its own
    children) it does on SIGTERM too."""
    signal.signal(signal.SIGTERM, _terminate)


# An echoed input (a quoted span or an unbroken token) longer than CLIP_ABOVE characters is cut
# to its first ECHO_CHARS, with its length: as the native errors do (microsched_core::error).
ECHO_CHARS = 80
CLIP_ABOVE = 200


def _clip(s: str) -> str:
    return s if len(s) <= CLIP_ABOVE else f"{s[:ECHO_CHARS]}… ({len(s)} characters)"


def shown(msg: str) -> str:
    """``msg`` with control characters escaped and long echoed inputs clipped."""
    import re

    s = "".join(c if c.isprintable() or c == " " else c.encode("unicode_escape").decode("ascii") for c in msg)
    if len(s) <= CLIP_ABOVE:
        return s
    s = re.sub(r"([`\"'])([^`\"']{%d,})\1" % (CLIP_ABOVE + 1), lambda m: m.group(1) + _clip(m.group(2)) + m.group(1), s)
    return re.sub(r"\S{%d,}" % (CLIP_ABOVE + 1), lambda m: _clip(m.group(0)), s)


def one_line(msg: object) -> str:
    return shown(" ".join(str(msg).split())) or "unknown error"


def with_file(msg: object, path: str) -> str:
    return f"{one_line(msg)} (in {path})"


def fail(msg: object, code: int = EXIT_USAGE) -> NoReturn:
    # What was printed before the error must reach the user ahead of it.
    try:
        sys.stdout.flush()
    except Exception:  # noqa: BLE001
        pass
    sys.stderr.write(f"{PROG}: error: {one_line(msg)}\n")
    sys.stderr.flush()
    raise SystemExit(code)


def is_policy_failure(e: BaseException) -> bool:
    """A ``microsched._native.PolicyFailed`` (matched by name: it may have crossed a process
    boundary in a sweep and been rebuilt as another class of the same name)."""
    return type(e).__name__ == "PolicyFailed"


def policy_failure_lines(msg: object) -> tuple[str, str]:
    """(the one line, the traceback or "") of a policy failure's message, which is
    ``policy NAME: CALL at simulated time T ms: WHAT`` and, when the policy raised, ``raised an
    exception:`` followed by the traceback; the exception's own last line joins the one line."""
    first, _, rest = str(msg).partition("\n")
    rest = rest.rstrip()
    if rest:
        last = rest.splitlines()[-1].strip()
        first = f"{first.rstrip(':')} {last}" if first.rstrip().endswith(":") else f"{first} {last}"
    return one_line(first), rest


def fail_policy(e: BaseException, code: int = EXIT_USAGE) -> NoReturn:
    line, tb = policy_failure_lines(e)
    try:
        sys.stdout.flush()
    except Exception:  # noqa: BLE001
        pass
    sys.stderr.write(f"{PROG}: error: {line}\n")
    if tb:
        sys.stderr.write(tb + "\n")
    sys.stderr.flush()
    raise SystemExit(code)
