"""``microsched sweep``: run every point of a sweep spec on a local process pool or on Ray,
writing each finished point at once, so that an interrupted sweep loses nothing and
``--resume`` runs only what is missing.

Layout of an output directory::

    DIR/parts/<point_id>.parquet  one file per finished point (one row), written atomically
                                  (temporary file + rename) by the driver as the point finishes
    DIR/results.parquet           every point of the spec, one row per run, in spec order
                                  (consolidated from the parts at the end)
    DIR/aggregate.parquet         means over seeds with 95 % CI half-widths (``M.ci95``) and ``n``
    DIR/sweep.json                what was run: the spec as run, backend, jobs, points, wall time
    DIR/spec.toml, DIR/base.toml  copies of the spec and of its base scenario
    DIR/scenario.json             the base scenario resolved (defaults filled in, the spec's
                                  common overrides applied)

A point is identified by ``point_id``, a hash of its overrides (in order) and its seed: the
same point has the same id in every run of the spec, on either backend, so ``--resume`` skips
exactly the points whose part exists. Both backends run the very same function
(:func:`run_task`) on the very same input (the base scenario's text, the overrides, the seed);
rows differ only in the wall-clock columns :data:`WALL_COLUMNS`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import pandas as pd

from .runner import _tidy, aggregate, default_jobs, flatten, run_tasks
from .spec import Point, SpecError, SweepSpec, split_override

PARTS_DIR = "parts"
RESULTS_FILE = "results.parquet"
AGGREGATE_FILE = "aggregate.parquet"
META_FILE = "sweep.json"
SPEC_COPY = "spec.toml"
BASE_COPY = "base.toml"
RESOLVED_FILE = "scenario.json"
WALL_COLUMNS = ("sim.wall_s", "sim.requests_per_wall_s")
ID_COLUMNS = ("point_id", "point")
PARQUET_META_KEY = b"microsched"
BACKENDS = ("local", "ray")
DRIVERS = ("sim", "real")


class SweepError(ValueError):
    """Bad input to a sweep (spec, output directory, backend): nothing was run."""


class PointFailed(RuntimeError):
    """A point failed while running; the points finished before it are saved. ``traceback``:
    the traceback of a Python policy that raised, to print after the one-line message."""

    def __init__(self, message: str, traceback: str = "") -> None:
        super().__init__(message, traceback)
        self.traceback = traceback

    def __str__(self) -> str:
        return str(self.args[0])


# ---------------------------------------------------------------------------------------------
# points and tasks


def point_id(overrides: Sequence[str], seed: int) -> str:
    """The stable id of a point: the first 16 hex digits of the SHA-256 of its overrides (in
    order: a later override wins) and its seed."""
    text = json.dumps({"overrides": list(overrides), "seed": int(seed)}, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def point_params(point: Point) -> dict[str, Any]:
    """Every parameter of a point: ``variant`` (if the spec has variants), every key the
    overrides set (the spec's common overrides, the variant's, the grid's; the last value
    wins) and ``seed``."""
    out: dict[str, Any] = {}
    if "variant" in point.params:
        out["variant"] = point.params["variant"]
    for o in point.overrides:
        k, v = split_override(o)
        out[k] = v
    out["seed"] = point.seed
    return out


@dataclass(frozen=True)
class Task:
    """Everything a worker needs to run a point, without reading any file (so that a Ray
    worker on another machine can run it): the base scenario's text, its format and
    directory (relative paths inside it, an empirical CSV, resolve against it), the
    overrides, the seed, and the columns that name the point."""

    id: str
    index: int
    text: str
    fmt: str
    base_dir: str
    overrides: tuple[str, ...]
    seed: int
    params: Mapping[str, Any] = field(default_factory=dict)
    #: ``sim`` (the simulator) or ``real`` (the real runtime on this machine's loopback).
    driver: str = "sim"
    #: The base scenario file, for the real runtime's processes (real runs are local only).
    path: str = ""


def run_task(task: Task) -> dict[str, Any]:
    """Runs one point and returns its row: ``point_id``, ``point``, the parameters, then
    every summary metric flattened with dots. Runs in a worker (pool process or Ray task), or,
    with the ``real`` driver, in the sweep's own process (server and load generator processes)."""
    if task.driver == "real":
        from ..real import RealError, run_real

        try:
            summary = run_real(task.path, overrides=list(task.overrides), seed=int(task.seed)).summary
        except RealError as e:
            raise RuntimeError(str(e)) from None
    else:
        from .._native_loader import native

        from ..api import null_if_none_completed

        raw = native().run(task.text, task.fmt, task.base_dir, list(task.overrides), int(task.seed))
        summary = raw["summary"]
        summary = null_if_none_completed(json.loads(summary) if isinstance(summary, str) else dict(summary))
    row = flatten(summary)
    row.pop("seed", None)
    return {"point_id": task.id, "point": task.index, **task.params, **row}


def make_tasks(spec: SweepSpec, points: Sequence[Point], driver: str = "sim") -> list[Task]:
    """The tasks of a spec's points; two points with the same overrides and seed are an error."""
    base = Path(spec.base)
    from .._files import read_text

    text = read_text(base, "base")
    fmt = "json" if base.suffix.lower() == ".json" else "toml"
    tasks: list[Task] = []
    seen: dict[str, Point] = {}
    for p in points:
        pid = point_id(p.overrides, p.seed)
        if pid in seen:
            raise SpecError(f"{spec.path}: points {_where(seen[pid])} and {_where(p)} are the same run "
                            f"(same overrides and seed): remove the duplicate grid value or variant")
        seen[pid] = p
        tasks.append(Task(id=pid, index=p.index, text=text, fmt=fmt, base_dir=str(base.parent),
                          overrides=tuple(p.overrides), seed=p.seed, params=point_params(p), driver=driver,
                          path=str(base)))
    return tasks


def _where(p: Point) -> str:
    return "(" + ", ".join(f"{k}={v}" for k, v in p.params.items()) + ")"


# ---------------------------------------------------------------------------------------------
# validation


def validate_points(spec: SweepSpec, points: Iterable[Point], force: bool = False, source: str | None = None) -> None:
    """Validates every distinct scenario of the sweep with the native validator before
    anything runs (seeds do not change validity), and checks that every overridden key is a
    setting of the resolved scenario: a key the scenario would silently ignore (a parameter of
    another policy kind) is an unknown parameter too. Raises ``ValueError`` naming the field,
    the spec (or ``source``, what the user gave when the spec is a temporary one of
    ``compare``'s) and the point. ``force`` skips the simulator's cost estimate (real-runtime
    points)."""
    from ..api import validate

    seen: set[tuple[str, ...]] = set()
    for p in points:
        if p.overrides in seen:
            continue
        seen.add(p.overrides)
        try:
            resolved = validate(p.scenario, overrides=list(p.overrides), force=force)
            check_keys_used(resolved, p.overrides)
        except ValueError as e:
            where = ", ".join(f"{k}={v}" for k, v in p.params.items() if k != "seed")
            if source is not None:
                where = ", ".join(f"--variant {v}" if k == "variant" else f"{k}={v}"
                                  for k, v in p.params.items() if k != "seed")
            raise ValueError(f"{e} (in {source or spec.path}, {'' if source else 'point '}{where or 'base'})") from None


def check_keys_used(resolved: Mapping[str, Any], overrides: Iterable[str]) -> None:
    """``ValueError`` if an override's dotted key is not in the resolved scenario."""
    for o in overrides:
        key = o.partition("=")[0].strip()
        node: Any = resolved
        parts = key.split(".")
        for i, part in enumerate(parts):
            if not isinstance(node, Mapping):
                break  # inside a list or a value set as a whole: the validator has checked it
            if part not in node:
                parent = ".".join(parts[:i])
                kind = node.get("kind") if isinstance(node, Mapping) else None
                allowed = ", ".join(f"`{k}`" for k in node if k != "kind") or "none"
                ctx = f" with {parent}.kind = {kind}" if kind else ""
                raise ValueError(f"{key}: unknown field `{part}`{ctx}: the scenario has no such setting "
                                 f"(settings here: {allowed})")
            node = node[part]


# ---------------------------------------------------------------------------------------------
# backends


RowCallback = Callable[[dict[str, Any]], None]


def run_local(tasks: Sequence[Task], jobs: int, on_row: RowCallback) -> None:
    """Runs the tasks ``jobs`` at a time on the project's worker pool (in this process when
    ``jobs == 1``), calling ``on_row`` in this process as each finishes."""
    if tasks:
        run_tasks(run_task, tasks, jobs, on_result=lambda _, row: on_row(row), on_error=lambda i, e: _failed(tasks[i], e))


def run_ray(tasks: Sequence[Task], jobs: int | None, address: str | None, on_row: RowCallback) -> None:
    """Runs the tasks as Ray tasks (one CPU each), at most ``jobs`` in flight (default: twice
    the cluster's CPUs), calling ``on_row`` in this process as each finishes. Connects to
    ``address`` (``auto``, ``HOST:PORT`` or ``ray://HOST:10001``) or, without one, starts a
    local Ray instance with ``jobs`` CPUs (default: every CPU) for the duration of the sweep;
    a Ray session already initialised in this process is used as it is."""
    try:
        import ray
    except ImportError:
        raise SweepError("--backend ray needs Ray: pip install 'microsched[ray]' (or pip install ray)") from None
    if not tasks:  # nothing left to run (a --resume of a finished sweep): no need for Ray
        return
    started = False
    if not ray.is_initialized():
        if address:
            _check_reachable(address)
        try:
            if address:
                ray.init(address=address, logging_level=logging.WARNING)
            else:
                # address="local": always a new instance, even if `ray start` runs on this machine
                ray.init(address="local", num_cpus=jobs or default_jobs(), include_dashboard=False,
                         logging_level=logging.WARNING)
        except (ConnectionError, ValueError, RuntimeError) as e:
            raise SweepError(f"--address {address or '(local)'}: cannot start or reach Ray: "
                             f"{' '.join(str(e).split())}") from None
        started = True
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(run_task)
        cpus = int(ray.cluster_resources().get("CPU", 1) or 1)
        limit = max(1, jobs if jobs else 2 * cpus)
        queue = list(reversed(tasks))
        inflight: dict[Any, Task] = {}
        try:
            while queue or inflight:
                while queue and len(inflight) < limit:
                    t = queue.pop()
                    inflight[remote.remote(t)] = t
                ready, _ = ray.wait(list(inflight), num_returns=1)
                ref = ready[0]
                t = inflight.pop(ref)
                try:
                    row = ray.get(ref)
                except ray.exceptions.RayError as e:  # the task raised, or its worker died
                    cause = getattr(e, "cause", None) or e
                    raise _failed(t, cause) from None
                on_row(row)
        finally:
            for ref in inflight:
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001 - best effort on the way out
                    pass
    finally:
        if started:
            ray.shutdown()


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fails fast on a ``HOST:PORT`` (or ``ray://HOST:PORT``) nobody listens on: Ray itself
    retries such an address for minutes. ``auto`` is left to Ray."""
    import socket

    target = address[len("ray://"):] if address.startswith("ray://") else address
    if address == "auto" or target.startswith(("[",)) or ":" not in target:
        return
    host, _, port = target.rpartition(":")
    try:
        port_no = int(port)
    except ValueError:
        raise SweepError(f"--address {address}: not of the form auto, HOST:PORT or ray://HOST:PORT") from None
    try:
        with socket.create_connection((host, port_no), timeout=timeout_s):
            pass
    except OSError as e:
        raise SweepError(f"--address {address}: no Ray cluster answers there ({e.strerror or e}); start one with "
                         f"`ray start --head` or check the address") from None


def _failed(t: Task, exc: BaseException) -> PointFailed:
    from ..cli.errors import is_policy_failure, policy_failure_lines

    where = ", ".join(f"{k}={v}" for k, v in t.params.items())
    if is_policy_failure(exc):  # a Python policy's failure: its one line, and its traceback apart
        line, tb = policy_failure_lines(exc)
        return PointFailed(f"point {t.id} ({where}) failed: {line}", tb)
    return PointFailed(f"point {t.id} ({where}) failed: {' '.join(str(exc).split()) or type(exc).__name__}")


# ---------------------------------------------------------------------------------------------
# the result store


def part_path(out: Path, pid: str) -> Path:
    return out / PARTS_DIR / f"{pid}.parquet"


@contextlib.contextmanager
def _ctrl_c_after():
    """Holds a Ctrl-C back until the block ends, then raises it. Python prints and swallows an
    exception raised inside a finaliser: a Ctrl-C landing in pyarrow's ``ParquetWriter.__del__``
    while a part is written was lost, and the sweep ran on to its end."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    caught: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, _frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if caught:
        raise KeyboardInterrupt


def write_part(out: Path, row: Mapping[str, Any]) -> Path:
    """Writes one point's row to ``DIR/parts/<point_id>.parquet`` atomically: a temporary file
    in the same directory, then a rename, so a part is either whole or absent."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = part_path(out, str(row["point_id"]))
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp")
    pq.write_table(pa.Table.from_pylist([dict(row)]), tmp)
    os.replace(tmp, path)
    return path


def finished_ids(out: Path) -> set[str]:
    """The ids of the points whose part exists (stale temporary files are removed)."""
    d = out / PARTS_DIR
    if not d.is_dir():
        return set()
    for tmp in d.glob(".*.tmp"):
        try:
            tmp.unlink()
        except OSError:
            pass
    return {p.stem for p in d.glob("*.parquet") if _part_ok(p)}


def _part_ok(path: Path) -> bool:
    """A part is whole if Parquet can read its footer and it holds one row; a part that is
    empty or corrupt (a full disk, a copy cut short) is removed, so that its point runs again."""
    import pyarrow.parquet as pq

    try:
        if path.stat().st_size > 0 and pq.read_metadata(path).num_rows == 1:
            return True
    except Exception:  # noqa: BLE001 - any unreadable file is as good as absent
        pass
    try:
        path.unlink()
    except OSError:
        pass
    return False


def read_parts(out: Path, tasks: Sequence[Task]) -> pd.DataFrame:
    """The rows of the given tasks (those whose part exists), in task order; columns: the ids,
    the parameters (in spec order), then the metrics."""
    import pyarrow.parquet as pq

    rows = []
    for t in tasks:
        p = part_path(out, t.id)
        if p.is_file():
            rows.extend(pq.read_table(p).to_pylist())
    df = pd.DataFrame(rows)
    first = [c for c in (*ID_COLUMNS, *param_columns(tasks)) if c in df.columns]
    df = df[first + [c for c in df.columns if c not in first]]
    return _tidy(df)


def write_results(df: pd.DataFrame, path: Path, params: Sequence[str]) -> Path:
    """Writes the results with the parameter and wall-clock column names in the Parquet schema
    metadata (key ``microsched``), so that plots and reports can tell parameters from metrics."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df, preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[PARQUET_META_KEY] = json.dumps({"params": [c for c in params if c in df.columns],
                                         "wall_columns": list(WALL_COLUMNS)}).encode()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    pq.write_table(table.replace_schema_metadata(meta), tmp)
    os.replace(tmp, path)
    return path


def aggregate_results(df: pd.DataFrame, params: Sequence[str]) -> pd.DataFrame:
    """Means over seeds of a sweep's rows: one row per point without its seed."""
    by = [c for c in params if c != "seed" and c in df.columns]
    body = df.drop(columns=[c for c in ID_COLUMNS if c in df.columns])
    if by:
        return aggregate(body, by)
    return aggregate(body.assign(_all="all"), ["_all"]).drop(columns=["_all"])


def param_columns(tasks: Sequence[Task]) -> list[str]:
    cols: dict[str, None] = {}
    for t in tasks:
        for k in t.params:
            if k != "seed":
                cols.setdefault(k, None)
    return [*cols, "seed"] if tasks else []


# ---------------------------------------------------------------------------------------------
# the driver


@dataclass
class SweepOutcome:
    name: str
    out: Path
    n_points: int
    n_run: int
    n_skipped: int
    backend: str
    jobs: int | None
    wall_s: float
    results: pd.DataFrame
    #: The parameter columns of ``results`` (variant, the overridden keys, seed).
    params: list[str] = field(default_factory=list)

    def _repr_html_(self) -> str:
        """A heading and the key metrics of every run (Jupyter shows it for an outcome): the
        parameters that vary and the seed, latency p50 / p99 / p99.9, throughput, goodput,
        drop rate and LC cores; every column is in ``results`` (and ``results.parquet``)."""
        import html

        from .runner import hashable_columns, n_distinct

        df = hashable_columns(self.results)
        params = [c for c in (self.params or ("variant", "seed")) if c in df.columns]
        shown = [c for c in params if c == "seed" or n_distinct(df[c]) > 1] or params[:1]
        metrics = [(c, h) for c, h, _ in HTML_METRICS if c in df.columns]
        table = df[shown + [c for c, _ in metrics]].rename(columns=dict(metrics))
        fmts = {h: (lambda f: lambda v: "–" if v is None or v != v else format(v, f))(f)
                for c, h, f in HTML_METRICS if c in df.columns}
        head = (f"<p><b>sweep {html.escape(self.name)}</b>: {self.n_points} points ({self.n_run} run, "
                f"{self.n_skipped} already done) in {self.wall_s:.1f} s; results in {html.escape(str(self.out))} "
                f"({len(self.results.columns)} columns in <code>.results</code>; key metrics shown)</p>")
        return head + table.to_html(max_rows=30, index=False, formatters=fmts, na_rep="–")


#: The columns ``SweepOutcome`` shows in Jupyter: (column, header, number format).
HTML_METRICS: list[tuple[str, str, str]] = [
    ("latency_us.p50", "p50 (µs)", ",.1f"),
    ("latency_us.p99", "p99 (µs)", ",.1f"),
    ("latency_us.p999", "p99.9 (µs)", ",.1f"),
    ("throughput_rps", "throughput (req/s)", ",.0f"),
    ("goodput_rps", "goodput (req/s)", ",.0f"),
    ("drop_rate", "drop rate", ".3%"),
    ("cores.allocated_mean", "LC cores", ".2f"),
]


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# Above these a sweep is refused before any point is built (raise them with --max-points and
# --max-hours): a grid of 10^10 points would otherwise take memory without bound while it is
# listed and checked, for a run that could never end.
MAX_POINTS = 100_000
MAX_HOURS = 24.0 * 7


def check_size(spec: SweepSpec, jobs: int | None = None, max_points: int | None = MAX_POINTS,
               max_hours: float | None = MAX_HOURS) -> None:
    """Refuses a sweep whose grid has more than ``max_points`` points, or whose estimated
    wall-clock time (the base scenario's cost estimate × points / jobs) is over ``max_hours``,
    from the spec's shape alone: no point is built. ``None``: no limit."""
    n = spec.n_points()
    shape = " × ".join([*(f"{len(v)} {k}" for k, v in spec.grid.items()),
                        *([f"{len(spec.variants)} variants"] if spec.variants else []), f"{len(spec.seeds)} seeds"])
    if max_points is not None and n > max_points:
        raise SweepError(f"--max-points: the sweep {spec.path} has {n:,} points ({shape}), more than {max_points:,}: "
                         f"shrink its grid, variants or seeds, or raise --max-points")
    if max_hours is None:
        return
    from ..api import estimate

    try:
        per_point = float(estimate(spec.base, overrides=list(spec.overrides))["wall_s"])
    except (ValueError, OSError):
        return  # the points' own checks say what is wrong with the base
    jobs = jobs or default_jobs()
    hours = per_point * n / jobs / 3600
    if hours > max_hours:
        raise SweepError(f"--max-hours: the sweep {spec.path} ({n:,} points: {shape}) would take roughly "
                         f"{duration_text(hours * 3600)} on {jobs} job(s) at a typical engine speed, more than "
                         f"{max_hours:g} h: shrink it, or raise --max-hours")


def prepare(spec_path: str | Path | Mapping[str, Any], quick: bool = False, seeds: int | None = None,
            driver: str = "sim", jobs: int | None = None, max_points: int | None = MAX_POINTS,
            max_hours: float | None = MAX_HOURS) -> tuple[SweepSpec, list[Task]]:
    """Loads and checks a spec (its size first: :func:`check_size`) and every point's
    scenario; raises before anything runs."""
    if isinstance(spec_path, Mapping):
        # A spec built in Python: its `base` is relative to the current directory.
        spec = SweepSpec.from_dict(spec_path, Path.cwd() / "<dict>", quick=quick, seeds=seeds)
    else:
        spec = SweepSpec.load(spec_path, quick=quick, seeds=seeds)
    check_size(spec, jobs, max_points, max_hours)
    points = spec.points()
    tasks = make_tasks(spec, points, driver)
    validate_points(spec, points, force=driver == "real")
    return spec, tasks


def run_sweep(spec_path: str | Path | Mapping[str, Any], out: str | Path, *, jobs: int | None = None, backend: str = "local",
              address: str | None = None, resume: bool = False, quick: bool = False, seeds: int | None = None,
              driver: str = "sim", progress: Callable[[int, int], None] | None = None,
              on_start: Callable[[int, int], None] | None = None, max_points: int | None = MAX_POINTS,
              max_hours: float | None = MAX_HOURS) -> SweepOutcome:
    """Runs a sweep spec (a file, or the same structure as a dict) and writes its results to
    ``out`` (see the module's doc).

    ``progress(done, total)`` is called after each finished point (``done`` counts the points
    skipped by ``resume`` too); ``on_start(skipped, total)`` once before the first point runs.
    ``max_points`` and ``max_hours`` bound the sweep's size and estimated time (None: no limit),
    checked before any point is built.
    Raises :class:`SpecError` / ``ValueError`` / :class:`SweepError` before anything runs on bad
    input, :class:`PointFailed` if a point fails (finished points are kept)."""
    if backend not in BACKENDS:
        raise SweepError(f"--backend: unknown backend {backend!r}: use one of {', '.join(BACKENDS)}")
    if address and backend != "ray":
        raise SweepError("--address is for --backend ray")
    if driver not in DRIVERS:
        raise SweepError(f"--driver: unknown driver {driver!r}: use one of {', '.join(DRIVERS)}")
    if driver == "real":
        # A real run measures this machine: two at once, or one beside a Ray worker, would
        # measure each other.
        if backend != "local":
            raise SweepError("--driver real runs on this machine: use --backend local")
        if jobs not in (None, 1):
            raise SweepError(f"--jobs: {jobs} is not allowed with --driver real: real runs measure the machine, "
                             f"so they run one at a time (--jobs 1)")
        jobs = 1
    spec, tasks = prepare(spec_path, quick=quick, seeds=seeds, driver=driver, jobs=jobs, max_points=max_points,
                          max_hours=max_hours)
    if backend == "ray":  # fail before writing anything
        try:
            import ray  # noqa: F401
        except ImportError:
            raise SweepError("--backend ray needs Ray: pip install 'microsched[ray]' (or pip install ray)") from None
        if address:
            _check_reachable(address)
    out = Path(out)
    from .._files import read_text

    base_text = read_text(spec.base, "base")
    fingerprint = _sha256(base_text)

    meta_path = out / META_FILE
    done_before = finished_ids(out)
    if (done_before or (out / RESULTS_FILE).exists()) and not resume:
        raise SweepError(f"{out} already holds sweep results: use --resume to complete them, or another --out")
    if resume and meta_path.is_file():
        try:
            old = json.loads(meta_path.read_text(encoding="utf-8"))
        except ValueError:
            old = {}
        if old.get("driver", "sim") != driver:
            raise SweepError(f"--resume: the results in {out} were made with --driver {old.get('driver', 'sim')}, "
                             f"not {driver}: use the same driver, or another --out")
        # Another profile (--quick), seed set (--seeds) or spec would mix two experiments in
        # one results file.
        if "quick" in old and bool(old["quick"]) != bool(quick):
            was = "with --quick" if old["quick"] else "without --quick"
            raise SweepError(f"--resume: the results in {out} were made {was}: use the same profile, or another --out")
        if "spec" in old:
            now = spec.to_dict()
            for key in ("seeds", "grid", "variants", "overrides", "name"):
                if key in old["spec"] and json.dumps(old["spec"][key], sort_keys=True, default=str) != \
                        json.dumps(now[key], sort_keys=True, default=str):
                    what = "seed set (--seeds)" if key == "seeds" else f"spec's {key}"
                    raise SweepError(f"--resume: the {what} differs from the one the results in {out} were made "
                                     f"with ({old['spec'][key]!r} there, {now[key]!r} now): use the same, or another "
                                     f"--out")
        if old.get("base_sha256") not in (None, fingerprint):
            raise SweepError(f"--resume: the results in {out} were made from another version of the base scenario "
                             f"{spec.base} (its text changed): use another --out")

    out.mkdir(parents=True, exist_ok=True)
    (out / PARTS_DIR).mkdir(exist_ok=True)
    if isinstance(spec_path, Mapping):
        _write_json(out / "spec.json", dict(spec_path))
    else:
        shutil.copyfile(spec.path, out / SPEC_COPY)
    (out / BASE_COPY).write_text(base_text, encoding="utf-8")
    from ..api import validate

    resolved = validate(spec.base, overrides=list(spec.overrides), force=driver == "real")
    (out / RESOLVED_FILE).write_text(json.dumps(resolved, indent=2) + "\n", encoding="utf-8")
    meta: dict[str, Any] = {
        "name": spec.name, "description": spec.description, "spec_file": str(spec.path),
        "base_sha256": fingerprint, "quick": quick, "backend": backend, "driver": driver, "address": address,
        "jobs": (default_jobs() if jobs is None else jobs) if backend == "local" else jobs,
        "points": len(tasks), "params": param_columns(tasks), "wall_columns": list(WALL_COLUMNS),
        "spec": spec.to_dict(), "microsched_version": _version(), "finished": False,
    }
    _write_json(meta_path, meta)

    todo = [t for t in tasks if t.id not in done_before]
    skipped = len(tasks) - len(todo)
    done = skipped
    if on_start:
        on_start(skipped, len(tasks))
    if progress:
        progress(done, len(tasks))

    def on_row(row: dict[str, Any]) -> None:
        nonlocal done
        with _ctrl_c_after():
            write_part(out, row)
        done += 1
        if progress:
            progress(done, len(tasks))

    t0 = time.perf_counter()
    if backend == "local":
        jobs = default_jobs() if jobs is None else jobs
        run_local(todo, jobs, on_row)
    else:
        run_ray(todo, jobs, address, on_row)
    run_s = time.perf_counter() - t0

    df = read_parts(out, tasks)
    missing = len(tasks) - len(df)
    if missing:  # pragma: no cover - a part removed while the sweep ran
        raise SweepError(f"{missing} point(s) have no part in {out / PARTS_DIR}: run again with --resume")
    write_results(df, out / RESULTS_FILE, meta["params"])
    aggregate_results(df, meta["params"]).to_parquet(out / AGGREGATE_FILE, index=False)
    meta.update({"finished": True, "run_points": len(todo), "skipped_points": skipped,
                 "run_wall_s": round(run_s, 3)})
    _write_json(meta_path, meta)
    return SweepOutcome(name=spec.name, out=out, n_points=len(tasks), n_run=len(todo), n_skipped=skipped,
                        backend=backend, jobs=jobs, wall_s=run_s, results=df, params=list(meta["params"]))


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("microsched")
    except Exception:  # noqa: BLE001
        return "unknown"


def duration_text(s: float) -> str:
    """A duration for a person: seconds, minutes, hours or days."""
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    if s < 172800:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} days"
