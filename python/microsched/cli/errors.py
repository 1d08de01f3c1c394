"""The error contract of every command: bad input is one line on stderr,
``microsched: error: <message>``, and exit status 2; never a traceback.

One exception: a policy written in Python that fails during a run (it raised, or made a decision
out of bounds) is the user's code at fault, and its traceback is what they need. It is reported
as the same one line (the policy, the call, the simulated time, the value or the exception),
followed by the policy's traceback when it raised, and exit status 2."""

from __future__ import annotations

import sys
from typing import NoReturn

PROG = "microsched"
EXIT_USAGE = 2
EXIT_INTERNAL = 1


class CliError(Exception):
    """Bad input: reported as one line on stderr, exit status 2."""


def one_line(msg: object) -> str:
    return " ".join(str(msg).split()) or "unknown error"


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
