"""Shared helpers for the Python tests: small scenarios (tens of ms simulated, so the suite is
fast), a TOML writer for variants of them, and a CLI runner that runs the real console
entry point in a subprocess (exit status and stderr exactly as a user sees them)."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
# The runtime's wire protocol version (wire.rs's VERSION), for tests that write datagrams by hand.
WIRE_VERSION = int(re.search(r"pub const VERSION: u8 = (\d+);",
                             (REPO / "crates/microsched-runtime/src/wire.rs").read_text()).group(1))

# A suite started in the background (`cmd &`, some CI launchers) inherits SIGINT ignored, and
# every child would inherit that too: the tests that check Ctrl-C would then test nothing. A
# handler (unlike SIG_IGN) is reset to the default in children at exec.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Harvesting agents started by the tests keep their state file (`microsched harvest
# --state-file`, default under $XDG_STATE_HOME) in a directory of this test session: never the
# user's, and never shared with another suite running at the same time (one agent per file).
if "MICROSCHED_TEST_STATE_HOME" not in os.environ:
    import atexit
    import shutil
    import tempfile

    os.environ["MICROSCHED_TEST_STATE_HOME"] = tempfile.mkdtemp(prefix="microsched-test-state-")
    os.environ["XDG_STATE_HOME"] = os.environ["MICROSCHED_TEST_STATE_HOME"]
    # Only the process that made it removes it (pytest-xdist's workers inherit the variable and
    # skip this block), when the whole session is over.
    atexit.register(shutil.rmtree, os.environ["MICROSCHED_TEST_STATE_HOME"], ignore_errors=True)

# A small M/M/4 with a central queue: 30 ms measured at 200 k requests/s (~6000 requests).
SMALL: dict[str, Any] = {
    "name": "small-mm4",
    "seed": 1,
    "duration_ms": 30.0,
    "warmup_ms": 3.0,
    "server": {"max_cores": 4, "queue": "central"},
    "network": {"rtt_us": 10.0},
    "clients": {"sessions": 20},
    "load": {"fraction": 0.5},
    "workload": {"types": [{"name": "exp", "service": {"dist": "exponential", "mean_us": 10.0}}]},
    "metrics": {"sample_interval_us": 1000.0},
}


def small(**changes: Any) -> dict:
    """A copy of SMALL with dotted-key changes: small(**{"server.max_cores": 2})."""
    d = copy.deepcopy(SMALL)
    for key, value in changes.items():
        node = d
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return d


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(type(v))


def to_toml(d: dict) -> str:
    """A scenario dict as TOML (tables written inline, which TOML allows)."""
    return "".join(f"{k} = {_toml_value(v)}\n" for k, v in d.items())


@pytest.fixture
def write_scenario(tmp_path: Path):
    """write_scenario(dict_or_text, name="s.toml") -> path of the file in tmp_path."""

    def write(content: dict | str, name: str = "scenario.toml") -> Path:
        p = tmp_path / name
        p.write_text(content if isinstance(content, str) else to_toml(content), encoding="utf-8")
        return p

    return write


@dataclass
class CliResult:
    code: int
    out: str
    err: str


#: The environment of a `microsched` child process: this one's, without a shared secret (a test
#: that wants authentication sets its own).
ENV_NO_SECRET = {k: v for k, v in os.environ.items() if k != "MICROSCHED_SECRET"}


def microsched_cli(*args: str, timeout: float = 60, env: dict | None = None) -> subprocess.CompletedProcess:
    """`python -m microsched ARGS...` in a child process from the repository root, captured."""
    return subprocess.run([sys.executable, "-m", "microsched", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env=env or ENV_NO_SECRET)


def one_line_error(r: subprocess.CompletedProcess, *fragments: str) -> str:
    """Exit status 2 and exactly one stderr line, `microsched: error: ...`, containing each fragment."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("microsched: error: "), r.stderr
    for f in fragments:
        assert f in lines[0], (f, lines[0])
    return lines[0]


def run_cli(*args: str | os.PathLike, cwd: Path | None = None, subprocess_: bool = False,
            timeout: float = 300) -> CliResult:
    """Runs `microsched ARGS...` and captures its exit status, stdout and stderr.

    In-process by default (fast: no interpreter start-up per call); with subprocess_=True, as
    `python -m microsched.cli` in a child process, exactly as a user's shell sees it."""
    argv = [str(a) for a in args]
    if subprocess_:
        env = dict(os.environ, COLUMNS="120", PYTHONWARNINGS="ignore")
        p = subprocess.run([sys.executable, "-m", "microsched.cli", *argv], capture_output=True, text=True,
                           cwd=cwd or REPO, env=env, timeout=timeout)
        return CliResult(p.returncode, p.stdout, p.stderr)
    from microsched.cli import main

    out, err = io.StringIO(), io.StringIO()
    old_cwd = os.getcwd()
    try:
        os.chdir(cwd or REPO)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        os.chdir(old_cwd)
    return CliResult(int(code or 0), out.getvalue(), err.getvalue())


def without_wall(summary: dict) -> dict:
    """The summary minus the fields that measure the wall clock."""
    s = copy.deepcopy(summary)
    s.get("sim", {}).pop("wall_s", None)
    s.get("sim", {}).pop("requests_per_wall_s", None)
    return s


def outcome_of(out: Path):
    """The :class:`~microsched.reproduce.Outcome` of a finished reproduction directory."""
    from microsched.reproduce import Outcome

    meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
    return Outcome(name=meta["reproduction"], out=out, claims=json.loads((out / "claims.json").read_text(encoding="utf-8")),
                   figures=[out / f for f in meta.get("figures", [])], n_points=meta["points"], jobs=meta["jobs"],
                   wall_s=meta.get("wall_s", 0.0))


@pytest.fixture(scope="session")
def all_quick(tmp_path_factory, request) -> Path:
    """`microsched reproduce --all --quick`, run once for the whole suite (the main job's
    reproductions): OUT/summary.json, OUT/report.html and OUT/NAME/ for each reproduction.

    Once for the suite also under pytest-xdist: the first worker that needs it runs it under a
    lock in the run's shared temporary folder; the others wait for it and read the same output
    (a failed run is reported to each of them, not run again)."""
    import fcntl

    worker = getattr(request.config, "workerinput", {}).get("workerid")
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if worker else base  # xdist: pytest-N/popen-gwK -> pytest-N, one per run
    out = shared / "all-quick" / "papers"
    status = shared / "all-quick" / "status.json"
    status.parent.mkdir(parents=True, exist_ok=True)
    with open(shared / "all-quick.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not status.exists():
            r = run_cli("reproduce", "--all", "--quick", "--out", out, "--jobs", "2", timeout=1800)
            status.write_text(json.dumps({"code": r.code, "log": r.err[-3000:] + r.out[-3000:]}))
        done = json.loads(status.read_text())
    assert done["code"] == 0, done["log"]
    return out


# Tests that measure real time (the real runtime's servers and load generators, the harvesting
# agent) run alone (`scripts/test` runs `-m serial` after the computing tests, which run in
# parallel): beside a CPU-bound test of the suite's own their timings would be noise. A test is
# serial if its file is one of these, or if its own source starts such a process. test_limits.py
# is not a serial file: its tests that start a server, a load generator or an agent are serial by
# their source; the others only check that bad input is refused, within bounds (20 s for what
# takes about one) that hold beside a CPU hog.
SERIAL_FILES = {"test_runtime.py", "test_harvest_agent.py", "test_harvest_agent_safety.py"}
SERIAL_SOURCE = ('"serve"', "'serve'", '"real"', "'real'", '"loadgen"', "_start_serve", '"harvest", "--', "overload-2x")


def _starts_real_time(item: pytest.Item) -> bool:
    import inspect

    fn = getattr(item, "function", None)
    try:
        source = inspect.getsource(fn) if fn is not None else ""
    except (OSError, TypeError):
        return False
    return any(s in source for s in SERIAL_SOURCE)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "serial: measures real time; scripts/test runs these alone, after the others")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in SERIAL_FILES or _starts_real_time(item):
            item.add_marker(pytest.mark.serial)
