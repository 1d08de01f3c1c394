"""The real runtime from Python: :func:`serve`, :func:`loadgen`, and :func:`run_real`, which
runs a server and a load generator as two separate processes on loopback and merges their
results into a :class:`~microsched.api.RunResult` (the summary keys of ``microsched run``, plus a
``runtime`` section).

The server and the load generator are ``microsched._native`` functions (Rust threads; the GIL is
released and Ctrl-C is honoured every 50 ms). :func:`run_real` starts
``python -m microsched serve ...`` and ``python -m microsched loadgen ...`` and stops both, also on
Ctrl-C or on any error: terminate, wait, then kill.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import pandas as pd

from ._native_loader import native
from .api import (RunResult, _check_overrides, _check_seed, _source, empty_window_warning, null_if_none_completed,
                  validate)
from .scenario import check_names

# How long `run_real` waits for the server to say where it listens.
READY_TIMEOUT_S = 20.0
# Extra time granted past the scenario's own length before a process counts as hung.
GRACE_S = 30.0
LISTENING = "listening on "


class RealError(RuntimeError):
    """A process of a real run failed; the message is its one-line error."""


def serve(scenario: Any, addr: str | None = None, duration_s: float | None = None, overrides: Iterable[str] = (),
          allow_remote: bool = False, once: bool = False, ready: Callable[[str], None] | None = None,
          stats: Callable[[dict], None] | None = None, stats_every_s: float = 1.0,
          max_service_us: float | None = None, max_client_sessions: int | None = None,
          connect_rate: float | None = None, limits: Callable[[dict], None] | None = None,
          trace: str | os.PathLike | None = None, trace_window: tuple[float, float] | None = None,
          trace_max_events: int | None = None) -> dict:
    """Runs the server of ``scenario`` on ``addr`` (default ``127.0.0.1:<runtime.port>``) until
    ``duration_s`` or, with ``once``, until every client that connected has left; calls
    ``limits(dict)`` once it listens with the limits it runs with (``authentication``,
    ``max_service_us``, session sharing), then ``ready(addr)``. Returns the server report (its
    ``timeseries`` at most ``timeseries_info.max_rows`` rows). Raises ``ValueError`` on bad
    configuration (a non-loopback address without ``allow_remote``, an invalid scenario, an
    empty ``MICROSCHED_SECRET``). ``stats(counters)`` is called every ``stats_every_s`` seconds
    with the live counters. ``max_service_us``: the largest service time a request may ask for
    (default 100 000 µs on loopback, 10 000 µs with ``allow_remote``); ``max_client_sessions``:
    the most sessions one client may hold (default: every slot); ``connect_rate``: Connects per
    second one client may send (default: max(100, clients.sessions)). ``trace``: write the
    server's timeline to this file (trace-event JSON, the simulator's layout; see
    docs/timelines.md) over ``trace_window`` = ``(start_ms, end_ms)`` of run time since the
    server started (default: the whole run, up to the cap), at most ``trace_max_events``
    events (default 500 000)."""
    text, fmt, base_dir = _source(scenario)
    check_names(json.loads(native().validate(text, fmt, base_dir, _check_overrides(overrides), True)))
    if not (stats_every_s > 0):
        raise ValueError(f"--stats-every: {stats_every_s} is not allowed: use a number of seconds > 0")
    if max_client_sessions is not None and not (1 <= int(max_client_sessions) <= 65536):
        raise ValueError(f"--max-client-sessions: {max_client_sessions} is not allowed: use 1..=65536")
    cb = (lambda line: stats(json.loads(line))) if stats is not None else None
    info = (lambda text: limits(json.loads(text))) if limits is not None else None
    rep = native().serve(text, fmt, base_dir, _check_overrides(overrides), addr, duration_s, allow_remote, once, ready,
                         cb, float(stats_every_s), None if max_service_us is None else float(max_service_us),
                         None if max_client_sessions is None else int(max_client_sessions),
                         None if connect_rate is None else float(connect_rate), info,
                         *_trace_args(trace, trace_window, trace_max_events))
    return json.loads(rep)


def _trace_args(trace: str | os.PathLike | None, window: tuple[float, float] | None,
                max_events: int | None) -> tuple:
    """The native serve's trace arguments, checked."""
    from .trace import DEFAULT_MAX_EVENTS, check_window

    if trace is None:
        return (None, None, DEFAULT_MAX_EVENTS)
    cap = DEFAULT_MAX_EVENTS if max_events is None else int(max_events)
    if cap < 1:
        raise ValueError(f"--trace-max-events: {cap} is not allowed: use 1 or more")
    return (os.fspath(trace), check_window(window) if window is not None else None, cap)


def loadgen(scenario: Any, addr: str | Sequence[str] | None = None, overrides: Iterable[str] = (),
            seed: int | None = None, allow_remote: bool = False) -> dict:
    """Runs the scenario's open-loop load against the server at ``addr`` (with
    ``server.replicas`` = N, a list of the N replicas' addresses); returns the load
    generator's result (``summary``, ``client``, ``timeseries``, ``latency_cdf``,
    ``window_unix_ns``), as the runtime writes it (what :func:`merge` reads: an empty latency
    histogram's percentiles are 0 there; the merged summary has them as ``None``)."""
    text, fmt, base_dir = _source(scenario)
    check_names(json.loads(native().validate(text, fmt, base_dir, _check_overrides(overrides), True)))
    addrs = [addr] if addr is None or isinstance(addr, str) else list(addr)
    raw = native().loadgen(text, fmt, base_dir, _check_overrides(overrides), addrs[0] if addrs else None,
                           _check_seed(seed), allow_remote, [a for a in addrs[1:] if a is not None])
    return json.loads(raw)


def merge(loadgen_result: dict | str, server_report: dict | list | str, scenario: dict | None = None) -> RunResult:
    """The load generator's result completed with the server's report (with replicas, the list
    of their reports in address order), as a RunResult."""
    lg = loadgen_result if isinstance(loadgen_result, str) else json.dumps(loadgen_result)
    rep = server_report if isinstance(server_report, str) else json.dumps(server_report)
    raw = native().merge_real(lg, rep)
    summary = null_if_none_completed(json.loads(raw["summary"]))
    ts = pd.DataFrame(dict(raw["timeseries"]))
    cdf = raw["latency_cdf"]
    cdf_df = pd.DataFrame({"latency_us": list(cdf["latency_us"]), "fraction": list(cdf["fraction"])}, dtype="float64")
    return RunResult(summary=summary, timeseries=ts, requests=None, scenario=scenario or {}, latency_cdf=cdf_df)


def _forward_trace_lines(server: subprocess.Popen) -> None:
    """The server's lines about its trace (written, cut by the cap), on our stderr."""
    if server.stderr is None:
        return
    try:
        text = server.stderr.read().decode(errors="replace")
    except (OSError, ValueError):
        return
    for line in text.splitlines():
        if line.startswith("trace: "):
            sys.stderr.write(line + "\n")


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "microsched", *args]


# Set in the environment of `serve` and `loadgen` started by `run_real`: the parent's pid, whose
# death (even by SIGKILL) kills them (the CLI calls `die_with_parent` with it, as a sweep's
# workers do).
DIE_WITH_PARENT_ENV = "MICROSCHED_DIE_WITH_PARENT"


def _child_env() -> dict[str, str]:
    return {**os.environ, DIE_WITH_PARENT_ENV: str(os.getpid())}


def _stop(procs: Sequence[subprocess.Popen], timeout: float = 5.0) -> None:
    """Terminates every process still running, then kills those that do not exit in time."""
    for p in procs:
        if p.poll() is None:
            try:
                p.terminate()
            except OSError:
                pass
    deadline = time.monotonic() + timeout
    for p in procs:
        if p.poll() is None:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)


def _error_of(p: subprocess.Popen, what: str) -> str:
    err = ""
    if p.stderr is not None:
        try:
            err = p.stderr.read().decode(errors="replace")
        except (OSError, ValueError):
            pass
    lines = [ln.strip() for ln in err.splitlines() if ln.strip()]
    last = next((ln for ln in reversed(lines) if "error" in ln), lines[-1] if lines else "")
    last = last.removeprefix("microsched: error: ")
    return f"the {what} failed (exit status {p.returncode}): {last or 'no message'}"


def _wait_ready(server: subprocess.Popen) -> str:
    """Reads the server's stdout until it prints where it listens."""
    assert server.stdout is not None
    deadline = time.monotonic() + READY_TIMEOUT_S
    buf = b""
    fd = server.stdout.fileno()
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            chunk = os.read(fd, 4096)
            if not chunk:
                # Its stdout closed: it is exiting (a refused configuration); its status and
                # message come a moment later, and must not be taken for a server still starting.
                try:
                    server.wait(READY_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    pass
                break
            buf += chunk
            for line in buf.decode(errors="replace").splitlines():
                if line.startswith(LISTENING):
                    return line[len(LISTENING):].strip()
        elif server.poll() is not None:
            break
    if server.poll() is None:
        raise RealError(f"the server did not start listening within {READY_TIMEOUT_S:.0f} s")
    raise RealError(_error_of(server, "server"))


def run_real(scenario: str | os.PathLike, overrides: Iterable[str] = (), seed: int | None = None,
             out: str | os.PathLike | None = None, trace: str | os.PathLike | None = None,
             trace_window: tuple[float, float] | None = None, trace_max_events: int | None = None,
             record: str | os.PathLike | bool | None = None) -> RunResult:
    """Runs ``scenario`` for real: ``microsched serve`` and ``microsched loadgen`` as two
    processes on loopback (a free port), for the scenario's warm-up + duration (+ the drain
    period). With ``server.replicas`` = N, N ``serve`` processes (each on a free port; the
    timeline is the first's) and one load generator talking to all of them. Returns the merged RunResult (and writes it to ``out`` if given). Everything
    started is stopped on return, on error and on Ctrl-C. ``trace``, ``trace_window``,
    ``trace_max_events``: the server's timeline, as :func:`serve` writes it (its window in ms of
    the server's run time).

    ``record``: keep one row per request (``metrics.record_requests``; the result's
    ``requests``, :mod:`microsched.records`) and, if a path, write them there as Parquet. A
    warning says when the runtime's bound cut the records."""
    path = Path(scenario)
    ovr = _check_overrides(overrides)
    if record:
        ovr = [*ovr, "metrics.record_requests=true"]
    seed = _check_seed(seed)
    # force: the cost estimate is the simulator's; the real runtime checks its own limits.
    resolved = validate(path, ovr, force=True)  # raises ValueError naming the field at fault
    rt = resolved.get("runtime", {})
    run_s = (float(resolved["duration_ms"]) + float(resolved.get("warmup_ms") or 0.0)
             + float(rt.get("drain_ms", 500.0))) / 1e3
    sets: list[str] = []
    for o in ovr:
        sets += ["--set", o]
    procs: list[subprocess.Popen] = []
    # server.replicas: one `serve` per replica, each on a free loopback port of its own.
    replicas = int(resolved.get("server", {}).get("replicas", 1))
    with tempfile.TemporaryDirectory(prefix="microsched-real-") as tmp:
        report_fs = [Path(tmp) / f"server{i}.json" for i in range(replicas)]
        series_fs = [Path(tmp) / f"series{i}.json" for i in range(replicas)]
        result_f = Path(tmp) / "loadgen.json"
        try:
            # The server draws request programs (workload.types[].paths) from the seed too.
            server_sets = sets + (["--set", f"seed={seed}"] if seed is not None else [])
            if trace is not None:
                _trace_args(trace, trace_window, trace_max_events)  # bad values fail here, in one line
                server_sets += ["--trace", os.fspath(trace)]
                if trace_window is not None:
                    server_sets += ["--trace-window", f"{trace_window[0]!r}:{trace_window[1]!r}"]
                if trace_max_events is not None:
                    server_sets += ["--trace-max-events", str(int(trace_max_events))]
            servers: list[subprocess.Popen] = []
            addrs: list[str] = []
            for i in range(replicas):
                # The timeline is the first replica's.
                own_sets = server_sets if i == 0 else sets + (["--set", f"seed={seed}"] if seed is not None else [])
                server = subprocess.Popen(
                    _cli("serve", str(path), "--addr", "127.0.0.1:0", "--duration", f"{run_s + GRACE_S:.3f}", "--once",
                         "--report", str(report_fs[i]), "--series", str(series_fs[i]), *own_sets),
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_child_env())
                procs.append(server)
                servers.append(server)
                addrs.append(_wait_ready(server))
            lg_args = ["loadgen", str(path), "--result", str(result_f), *sets]
            for a in addrs:
                lg_args += ["--addr", a]
            if seed is not None:
                lg_args += ["--seed", str(seed)]
            gen = subprocess.Popen(_cli(*lg_args), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_child_env())
            procs.append(gen)
            try:
                gen.wait(run_s + GRACE_S)
            except subprocess.TimeoutExpired:
                raise RealError(f"the load generator did not finish within {run_s + GRACE_S:.0f} s") from None
            if gen.returncode != 0 or not result_f.exists():
                raise RealError(_error_of(gen, "load generator"))
            rep_texts: list[str] = []
            full_reps: list[dict] = []
            for i, server in enumerate(servers):
                try:
                    server.wait(GRACE_S)  # it stops once every session has disconnected
                except subprocess.TimeoutExpired:
                    server.send_signal(2)  # SIGINT: it stops and still writes its report
                    server.wait(10)
                if not report_fs[i].exists():
                    raise RealError(_error_of(server, "server" if replicas == 1 else f"server of replica {i}"))
                if trace is not None and i == 0:
                    _forward_trace_lines(server)
                rep_texts.append(report_fs[i].read_text(encoding="utf-8"))
                # The server's time series (bounded) joins its report for the merge.
                full = json.loads(rep_texts[-1])
                if series_fs[i].exists():
                    full["timeseries"] = json.loads(series_fs[i].read_text(encoding="utf-8"))
                full_reps.append(full)
            lg_text = result_f.read_text(encoding="utf-8")
            rep_text = rep_texts[0]
        finally:
            _stop(procs)
    res = merge(lg_text, full_reps[0] if replicas == 1 else full_reps, scenario=resolved)
    if record:
        from .records import records_frame, write_records

        df, cut_warning = records_frame(json.loads(lg_text))
        if cut_warning:
            warnings.warn(cut_warning, UserWarning, stacklevel=2)
        res.requests = df
        if df is not None and not isinstance(record, bool):
            write_records(df, record)
    empty = empty_window_warning(res.summary)
    if empty:
        warnings.warn(empty, UserWarning, stacklevel=2)
    if out is not None:
        res.save(out)
        (Path(out) / "server_report.json").write_text(rep_text + "\n", encoding="utf-8")
        for i, text in enumerate(rep_texts[1:], start=1):  # the other replicas'
            (Path(out) / f"server_report_{i}.json").write_text(text + "\n", encoding="utf-8")
    return res
