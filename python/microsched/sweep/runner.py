"""Running a grid of points on a local process pool, and the statistics over seeds.

One row per run: every parameter of the point (``variant``, the grid keys, every key the
variant sets, ``seed``) and every summary metric flattened with dots (``latency_us.p99``,
``cores.allocated_mean``, ``core_time.transition_ns``, ...). ``by_type`` is flattened per
request type only when the workload has several types (``by_type.NAME.latency_us.p99``). The
wall-clock fields ``sim.wall_s`` and ``sim.requests_per_wall_s`` are the only columns that
differ between two runs of the same point.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import multiprocessing
import os
import warnings
import sys
import types
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence, TypeVar

import numpy as np
import pandas as pd

from .spec import Point
# What a pool worker runs lives apart, so that a worker starts without pandas (a third of a
# second per worker, paid at the start of every sweep).
from .worker import SERIES_KEY, WARNINGS_KEY, die_with_parent, flatten, run_point  # noqa: F401

@functools.lru_cache(maxsize=None)
def t975(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom (NaN for df < 1).
    Cached: an aggregation asks for the same few ``df`` thousands of times."""
    if df < 1:
        return math.nan
    # scipy.special's inverse t CDF is what scipy.stats.t.ppf calls, without importing all of
    # scipy.stats (a third of a second per process); imported here: most commands never
    # compute an interval.
    from scipy.special import stdtrit

    return float(stdtrit(df, 0.975))


def mean_ci95(values: Iterable[float]) -> tuple[float, float, int]:
    """(mean, half-width of the 95 % confidence interval of the mean, n) of the finite values;
    the half-width is NaN with fewer than two values."""
    if isinstance(values, np.ndarray) and values.dtype == float:
        x = values[np.isfinite(values)]
    else:
        x = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    n = len(x)
    if n == 0:
        return math.nan, math.nan, 0
    m = float(x.mean())
    if n < 2:
        return m, math.nan, n
    return m, float(t975(n - 1) * x.std(ddof=1) / math.sqrt(n)), n


def _take_warnings(row: dict[str, Any], seen: set[str]) -> dict[str, Any]:
    for msg in row.pop(WARNINGS_KEY, ()):
        if msg not in seen:
            seen.add(msg)
            warnings.warn(msg, UserWarning, stacklevel=3)
    return row


@contextlib.contextmanager
def main_hidden_from_spawn() -> Iterator[None]:
    """While the block runs, workers started with ``spawn`` (or ``forkserver``) do not import
    this process's ``__main__``. They run only microsched's functions (:func:`run_point`,
    ``engine.run_task``) on microsched's objects, so they never need it, and importing it breaks
    two common cases: a script that calls ``run_sweep`` at its top level, without
    ``if __name__ == "__main__":`` (every worker would run the sweep again, and they collide on
    its files: "process pool was terminated abruptly"), and a script read from stdin (the
    workers look for a file named ``<stdin>``). ``spawn`` takes what to import from
    ``sys.modules["__main__"]`` as each worker starts, so a stand-in module (no file, no spec)
    is put there meanwhile: start the pool's workers inside the block (a
    ``ProcessPoolExecutor`` starts them as tasks are submitted)."""
    real_main = sys.modules.get("__main__")
    if real_main is None or (getattr(real_main, "__spec__", None) is None
                             and getattr(real_main, "__file__", None) is None):
        yield  # nothing that spawn would import (an interactive session, python -c, Jupyter)
        return
    stand_in = types.ModuleType("__main__", "stand-in for __main__ while sweep workers start")
    sys.modules["__main__"] = stand_in
    try:
        yield
    finally:
        if sys.modules.get("__main__") is stand_in:
            sys.modules["__main__"] = real_main


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover
        return max(1, os.cpu_count() or 1)


# The one start method of every process microsched starts for work (pool workers, the
# reproductions `reproduce --all` runs side by side): workers start clean, with no fork of a
# process that holds threads or native state.
START_METHOD = "spawn"


def mp_context() -> Any:
    """The multiprocessing context of :data:`START_METHOD`."""
    return multiprocessing.get_context(START_METHOD)


@contextlib.contextmanager
def worker_pool(jobs: int) -> Iterator[ProcessPoolExecutor]:
    """The project's one way to start worker processes (every sweep, reproduction and extra run
    goes through it): ``spawn`` (workers start clean: no fork of a process that holds threads or
    native state), each worker killed by the kernel when its driver dies, even by ``kill -9``
    (:func:`die_with_parent`). Submit inside :func:`main_hidden_from_spawn` (the workers start
    as tasks are submitted). On an error or Ctrl-C in the block, queued tasks are dropped at once
    instead of being run."""
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=mp_context(), initializer=die_with_parent,
                               initargs=(os.getpid(),))
    ok = False
    try:
        yield pool
        ok = True
    finally:
        pool.shutdown(wait=ok, cancel_futures=not ok)


T = TypeVar("T")
R = TypeVar("R")


def run_tasks(fn: Callable[[T], R], args: Sequence[T], jobs: int | None = None,
              on_result: Callable[[int, R], None] | None = None,
              on_error: Callable[[int, BaseException], BaseException] | None = None) -> list[R]:
    """``fn(a)`` for every ``a`` of ``args``, ``jobs`` at a time on :func:`worker_pool` (in this
    process when ``jobs == 1`` or there is one task), the results in order. ``on_result(i, r)``
    is called in this process as each task finishes (to save it at once, count progress); the
    first failing task stops the rest and its error is raised, as ``on_error(i, exc)`` makes it
    if given. ``fn`` and ``args`` must be picklable (a module-level function)."""
    jobs = default_jobs() if jobs is None else jobs
    results: list[Any] = [None] * len(args)
    if jobs <= 1 or len(args) <= 1:
        for i, a in enumerate(args):
            try:
                results[i] = fn(a)
            except (ValueError, RuntimeError) as e:
                if on_error is None:
                    raise
                raise on_error(i, e) from None
            if on_result:
                on_result(i, results[i])
        return results
    with worker_pool(min(jobs, len(args))) as pool:
        with main_hidden_from_spawn():  # the workers start here
            futures = {pool.submit(fn, a): i for i, a in enumerate(args)}
        pending = set(futures)
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)  # progress per task
            for f in finished:
                i = futures[f]
                exc = f.exception()
                if exc is not None:
                    raise (on_error(i, exc) if on_error else exc) from None
                results[i] = f.result()
                if on_result:
                    on_result(i, results[i])
    return results


def run_points(points: Sequence[Point], jobs: int | None = None,
               progress: Callable[[int, int], None] | None = None,
               on_row: Callable[[Point, dict[str, Any]], None] | None = None,
               series_columns: Sequence[str] = ()) -> pd.DataFrame:
    """Runs every point, ``jobs`` at a time in worker processes (:func:`run_tasks`; in this
    process when ``jobs == 1``), and returns one row per point in point order. The first
    failing point stops the sweep and its error is raised, naming the point. ``on_row(point,
    row)`` is called in this process as each point finishes (to save it at once). With
    ``series_columns`` each row also holds those columns of its run's time series (under
    ``worker.SERIES_KEY``, for ``on_row`` to take out: the frame returned is of the rows without)."""
    seen: set[str] = set()
    done = 0

    def finished(i: int, row: dict[str, Any]) -> None:
        nonlocal done
        _take_warnings(row, seen)
        if on_row:
            on_row(points[i], row)
        done += 1
        if progress:
            progress(done, len(points))

    fn = functools.partial(run_point, series_columns=tuple(series_columns)) if series_columns else run_point
    rows = run_tasks(fn, points, jobs, on_result=finished, on_error=lambda i, e: _point_error(points[i], e))
    return _tidy(pd.DataFrame([{k: v for k, v in r.items() if k != SERIES_KEY} for r in rows]))


def _point_error(p: Point, exc: BaseException) -> BaseException:
    where = ", ".join(f"{k}={v}" for k, v in p.params.items())
    if isinstance(exc, ValueError):
        return ValueError(f"{exc} (point {where})")
    return exc


def _tidy(df: pd.DataFrame) -> pd.DataFrame:
    """Columns that mix strings and numbers (a key set to a string by one variant and a
    number by another) become strings, so that the frame can be written to Parquet."""
    for c in df.columns:
        if df[c].dtype == object:
            kinds = {type(v) for v in df[c] if v is not None and not (isinstance(v, float) and math.isnan(v))}
            if len(kinds) > 1:
                df[c] = df[c].map(lambda v: None if v is None or (isinstance(v, float) and math.isnan(v)) else str(v))
    return df


def plain(v: Any) -> Any:
    """A cell as plain Python: numpy arrays (a list read back from Parquet) as lists, numpy
    scalars as numbers, and the keys of a table that Parquet filled with nulls (a struct's
    absent fields) dropped, so that the value reads as it was written."""
    if hasattr(v, "tolist") and not isinstance(v, (str, bytes)):  # numpy array or scalar
        v = v.tolist()
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, Mapping):
        return {k: plain(x) for k, x in v.items() if x is not None}
    return v


def _hashable(v: Any) -> Any:
    """A value to group on: a list or table (a parameter set as a whole, ``workload.types``)
    as its JSON text; anything else as it is."""
    if isinstance(v, (list, tuple, Mapping)) or (hasattr(v, "ndim") and getattr(v, "ndim", 0) > 0):
        return json.dumps(plain(v), sort_keys=True, default=str)
    return v


def hashable_columns(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with every column that holds lists or tables (``workload.types``; numpy arrays
    once read back from Parquet) turned into their JSON text, so that the column can be
    grouped on, counted (``nunique``) and shown; other columns are unchanged (not copied)."""
    out = df
    for c in df.columns:
        if df[c].dtype == object and any(_hashable(v) is not v for v in df[c]):
            if out is df:
                out = df.copy()
            out[c] = df[c].map(_hashable)
    return out


def n_distinct(col: pd.Series) -> int:
    """How many distinct values a column takes (missing values count as one), also when its
    cells are lists or tables."""
    return int(col.map(_hashable).nunique(dropna=False))


def aggregate(df: pd.DataFrame, by: Sequence[str], metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """Means over seeds: one row per ``by`` group with, for every numeric metric M, the columns
    M (mean), ``M.ci95`` (half-width of its 95 % confidence interval; NaN with one seed) and
    ``n`` (the number of seeds); and, where the rows carry the runs' exported histograms
    (``histograms.*``), the percentiles of the group's requests pooled across seeds
    (``latency_us.p99_pooled``, ...: :mod:`microsched.histograms`)."""
    from ..histograms import pooled_columns
    if metrics is None:
        skip = set(by) | {"seed", "point"}
        metrics = [c for c in df.columns if c not in skip and pd.api.types.is_numeric_dtype(df[c])
                   and not pd.api.types.is_bool_dtype(df[c])]
    out = []
    # A parameter can be a list or a table (`workload.types=[...]`): group on its JSON text.
    keys = df[list(by)].apply(lambda col: col.map(_hashable))
    for _, group_keys in keys.groupby(list(by), sort=False, dropna=False):
        g = df.loc[group_keys.index]
        row: dict[str, Any] = {b: g[b].iloc[0] for b in by}
        n = 0
        values = g[list(metrics)].to_numpy(dtype=float)  # one conversion, not one per metric
        for j, m in enumerate(metrics):
            mean, ci, n_m = mean_ci95(values[:, j])
            row[m] = mean
            row[f"{m}.ci95"] = ci
            n = max(n, n_m)
        row["n"] = n
        row.update(pooled_columns({c: g[c] for c in g.columns if c.startswith("histograms.")}))
        out.append(row)
    return pd.DataFrame(out)
