"""What a sweep's pool worker runs: one point, its summary flattened to a row. Kept free of
pandas and pyarrow, which a worker never needs: each spawned worker imports only this."""

from __future__ import annotations

import os
import time
import warnings
from typing import Any, Callable, Mapping

from .spec import Point


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested summary dict as one flat dict with dotted keys."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten(v, key + "."))
        elif k == "by_type" and isinstance(v, list):
            if len(v) > 1:
                for t in v:
                    name = str(t.get("name", "?"))
                    out.update(flatten({kk: vv for kk, vv in t.items() if kk != "name"}, f"{key}.{name}."))
        elif k in ("applications", "nodes") and isinstance(v, list) and not prefix:
            # Several applications or nodes (co-tenants, replicas, per-application core sets):
            # one column group each, `applications.NAME.` / `nodes.I.`; a single one is the
            # flat keys already.
            if len(v) > 1:
                for i, t in enumerate(v):
                    name = str(t.get("name", "?")) if k == "applications" else str(i)
                    out.update(flatten({kk: vv for kk, vv in t.items() if kk not in ("name", "node", "by_type")},
                                       f"{key}.{name}."))
        elif k in ("locks", "condvars") and isinstance(v, list):
            # Per-lock statistics (`lock_control.locks`) and per-condvar ones (`condvars`): one
            # column group per name.
            for t in v:
                if isinstance(t, Mapping):
                    out.update(flatten({kk: vv for kk, vv in t.items() if kk != "name"},
                                       f"{key}.{t.get('name', '?')}."))
        elif isinstance(v, (list, tuple)):
            continue
        else:
            out[key] = v
    return out


def run_point(point: Point, series_columns: tuple[str, ...] = ()) -> dict[str, Any]:
    """Runs one point and returns its row (parameters first, then the flattened summary); with
    ``series_columns``, also those columns of the same run's time series, under
    :data:`SERIES_KEY` (a reproduction whose analysis needs every point's series: not run twice)."""
    # The summary alone: the worker never builds the run's tables, so it never imports pandas.
    from ..api import run_summary, run_summary_and_series

    series = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if series_columns:
            summary, series = run_summary_and_series(point.scenario, series_columns, seed=point.seed,
                                                     overrides=list(point.overrides))
        else:
            summary = run_summary(point.scenario, seed=point.seed, overrides=list(point.overrides))
    row = flatten(summary)
    row.pop("seed", None)
    # The scenario's warnings go back to the driver, which says each one once per sweep (a
    # worker's own stderr would repeat it for every point, with its source line).
    row = {"point": point.index, **point.params, **row, WARNINGS_KEY: [str(w.message) for w in caught]}
    if series is not None:
        row[SERIES_KEY] = series
    return row


WARNINGS_KEY = "__warnings__"
SERIES_KEY = "__series__"


# A reproduction's extra runs (:meth:`microsched.reproduce.framework.Context.run_extra`) run one
# of these: what the worker returns is plain data, and the reproduction shapes it in its driver,
# so that the worker imports neither pandas nor the reproductions.


def summary_of(task: tuple[Any, ...]) -> dict[str, Any]:
    """``(scenario, seed, overrides)``: the run's summary (``run(...).summary``; its warnings are
    not issued, the point's own run has said them). ``(scenario, seed, overrides, trace path,
    trace window)``: the same, its timeline written to that path (:func:`microsched.api.run`'s
    ``trace`` and ``trace_window``)."""
    from ..api import run_summary

    scenario, seed, overrides, *traced = task
    path, window = traced or (None, None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run_summary(scenario, seed=seed, overrides=list(overrides), trace=path, trace_window=window)


def series_task(point: Any, columns: tuple[str, ...], extra_overrides: tuple[str, ...] | list[str] = ()) -> tuple:
    """The task :func:`series_of` takes for a sweep point's run (``extra_overrides`` appended):
    one shape for the series a sweep's own runs return and those an analysis asks for, so that
    both have one key (``reproduce.framework.extra_key``)."""
    return (point.scenario, point.seed, (*point.overrides, *extra_overrides), columns)


def series_of(task: tuple[Any, int, tuple[str, ...], tuple[str, ...]]) -> dict[str, Any]:
    """``(scenario, seed, overrides, columns)``: those columns of the run's time series
    (:func:`microsched.api.run_series`)."""
    from ..api import run_series

    scenario, seed, overrides, columns = task
    return run_series(scenario, columns, seed=seed, overrides=list(overrides))


def call(fn_and_arg: tuple[Callable[[Any], Any], Any]) -> Any:
    """``fn(arg)``: several kinds of task (a reproduction's extra runs: rows, bisections) on one
    pool, each task naming its own module-level function."""
    fn, arg = fn_and_arg
    return fn(arg)


def die_with_parent(parent_pid: int) -> None:
    """Worker initializer: the kernel kills this worker when the driver dies, even by
    ``kill -9`` (Linux ``PR_SET_PDEATHSIG``); elsewhere a watchdog thread polls the parent."""
    import signal
    import threading

    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        if libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0) == 0:
            if os.getppid() != parent_pid:  # the driver died before the prctl
                os._exit(1)
            return
    except (OSError, AttributeError):
        pass

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="microsched-parent-watchdog").start()
