"""The standard figures of the field, from a sweep's results or from a single run:
``microsched plot PATH``.

From a result dataset (``results.parquet`` of ``microsched sweep`` or ``microsched reproduce``,
or the directory holding it), means over seeds with 95 % confidence intervals as error bars:

    latency      end-to-end latency p50 / p99 / p99.9 (µs, log scale) vs load
    throughput   throughput and goodput (M requests/s) vs offered load (M requests/s)
    pareto       p99 latency vs CPU utilization, the Pareto front (no other point has both a
                 lower utilization and a lower p99) marked
    slowdown     p99 slowdown (latency / service time) vs load, one panel per request type

From a single run (a directory with ``summary.json`` and ``timeseries.parquet``, as written by
``microsched run --out``):

    timeseries   cores (allocated, busy), credits (pool, issued), queues (server, clients;
                 oldest queueing delay) and drops over time

And a run's latency distribution (:func:`plot_latency_cdf`, the ``latency_cdf.png`` that
``RunResult.save`` writes): its CDF and the tail's complementary CDF.

Every figure is written as PNG and SVG (the run's CDF as PNG). Matplotlib with the Agg backend
(no display needed).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

if TYPE_CHECKING:  # pragma: no cover
    from .api import RunResult

SWEEP_KINDS = ("latency", "throughput", "pareto", "slowdown")
RUN_KINDS = ("timeseries",)
KINDS = SWEEP_KINDS + RUN_KINDS
FORMATS = ("png", "svg")

# Axis labels (with units) and display scales of known columns.
LABELS: dict[str, tuple[str, float]] = {
    "load.fraction": ("offered load (fraction of capacity)", 1.0),
    "load.rps": ("offered load (M requests/s)", 1e-6),
    "offered_rps": ("offered load (M requests/s)", 1e-6),
    "throughput_rps": ("throughput (M requests/s)", 1e-6),
    "goodput_rps": ("goodput (M requests/s)", 1e-6),
    "cpu_utilization": ("CPU utilization (% of the machine's cores allocated to LC)", 100.0),
    "cores.allocated_mean": ("LC cores allocated (mean)", 1.0),
    "cores.busy_mean": ("LC cores busy (mean)", 1.0),
    "be_cores_mean": ("best-effort cores (mean)", 1.0),
    "drop_rate": ("drop rate (%)", 100.0),
    "latency_us.p50": ("p50 latency (µs)", 1.0),
    "latency_us.p99": ("p99 latency (µs)", 1.0),
    "latency_us.p999": ("p99.9 latency (µs)", 1.0),
    "server.max_cores": ("cores", 1.0),
    "clients.sessions": ("client sessions", 1.0),
    "network.rtt_us": ("RTT (µs)", 1.0),
}

# Summary keys: a column whose first dotted part is one of these is a metric, not a parameter.
_SUMMARY_KEYS = {"scenario", "allocator", "overload", "duration_s", "offered_rps", "throughput_rps",
                 "goodput_rps", "drop_rate", "latency_us", "queueing_delay_us", "slowdown", "cores",
                 "cpu_utilization", "be_cores_mean", "requests", "core_time", "by_type", "credits", "sim"}


class PlotError(ValueError):
    """The input cannot be plotted as asked (message names the path, kind or column)."""


# ---------------------------------------------------------------------------------------------
# inputs


@dataclass
class SweepData:
    """A result dataset: one row per run, the parameter columns, and variant labels."""

    path: Path
    df: pd.DataFrame
    params: list[str]
    labels: dict[str, str] = field(default_factory=dict)
    title: str = ""

    def __post_init__(self) -> None:
        from .sweep.runner import hashable_columns

        # A parameter set as a whole (`workload.types = [...]`) is a column of lists (numpy
        # arrays once read back from Parquet): as JSON text it can be grouped on and shown.
        self.df = hashable_columns(self.df)

    @property
    def varying(self) -> list[str]:
        """Parameters (not the seed) that take more than one value."""
        from .sweep.runner import n_distinct

        return [c for c in self.params if c != "seed" and n_distinct(self.df[c]) > 1]


@dataclass
class RunData:
    """A single run directory: its summary and time series."""

    path: Path
    summary: dict
    timeseries: pd.DataFrame
    title: str = ""
    warmup_ms: float = 0.0


def load(path: str | os.PathLike) -> SweepData | RunData:
    """Reads ``results.parquet`` (a file, or a directory holding one) or a run directory
    (``summary.json`` + ``timeseries.parquet``)."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"not found: {p}")
    if p.is_dir():
        if (p / "results.parquet").is_file():
            return _load_sweep(p / "results.parquet")
        if (p / "summary.json").is_file():
            return _load_run(p)
        raise PlotError(f"{p}: neither a result dataset (results.parquet) nor a run directory "
                        f"(summary.json + timeseries.parquet)")
    if p.suffix == ".parquet":
        return _load_sweep(p)
    if p.name == "summary.json":
        return _load_run(p.parent)
    raise PlotError(f"{p}: use a results.parquet file, a sweep or reproduce output directory, or a run directory")


def _load_sweep(path: Path) -> SweepData:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as e:  # noqa: BLE001 - pyarrow raises several kinds
        raise PlotError(f"{path}: not a readable Parquet file: {' '.join(str(e).split())}") from None
    df = table.to_pandas()
    if df.empty:
        raise PlotError(f"{path}: no rows")
    meta = {}
    raw = (table.schema.metadata or {}).get(b"microsched")
    if raw:
        try:
            meta = json.loads(raw)
        except ValueError:
            meta = {}
    params = [c for c in meta.get("params", []) if c in df.columns] or infer_params(df)
    labels: dict[str, str] = {}
    title = ""
    d = path.parent
    for name in ("sweep.json", "meta.json"):
        f = d / name
        if f.is_file():
            try:
                m = json.loads(f.read_text(encoding="utf-8"))
            except ValueError:
                continue
            spec = m.get("spec") or {}
            for v in spec.get("variants", []) or []:
                if isinstance(v, dict) and v.get("name"):
                    labels[str(v["name"])] = str(v.get("label") or v["name"])
            title = str(m.get("name") or m.get("reproduction") or "")
            if m.get("figure"):
                title += f" ({m.get('paper', '')}, {m['figure']})"
            break
    return SweepData(path=path, df=df, params=params, labels=labels, title=title or d.name)


def infer_params(df: pd.DataFrame) -> list[str]:
    """The parameter columns of a dataset written without metadata (a reproduction's): the
    columns before ``scenario`` (rows are point, parameters, then the summary), else every
    column that is not a summary metric."""
    cols = list(df.columns)
    if "scenario" in cols:
        head = cols[: cols.index("scenario")]
        return [c for c in head if c not in ("point", "point_id")]
    return [c for c in cols if c not in ("point", "point_id") and c.split(".")[0] not in _SUMMARY_KEYS]


def _load_run(d: Path) -> RunData:
    try:
        summary = json.loads((d / "summary.json").read_text(encoding="utf-8"))
    except ValueError as e:
        raise PlotError(f"{d / 'summary.json'}: invalid JSON: {e}") from None
    ts_path = d / "timeseries.parquet"
    ts = pd.read_parquet(ts_path) if ts_path.is_file() else pd.DataFrame()
    title = f"{summary.get('scenario') or d.name}: allocator {summary.get('allocator', '-')}, " \
            f"overload {summary.get('overload', '-')}, seed {summary.get('seed', '-')}"
    warmup = 0.0
    if (d / "scenario.json").is_file():
        try:
            warmup = float(json.loads((d / "scenario.json").read_text(encoding="utf-8")).get("warmup_ms") or 0.0)
        except (ValueError, TypeError, AttributeError):
            warmup = 0.0
    return RunData(path=d, summary=summary, timeseries=ts, title=title, warmup_ms=warmup)


# ---------------------------------------------------------------------------------------------
# helpers


def label(col: str) -> str:
    return LABELS.get(col, (col, 1.0))[0]


def scale(col: str) -> float:
    return LABELS.get(col, (col, 1.0))[1]


def default_x(data: SweepData) -> str:
    """``load.fraction`` (or ``load.rps``) when it varies, else the first varying numeric
    parameter, else ``offered_rps``."""
    var = data.varying
    for c in ("load.fraction", "load.rps"):
        if c in var:
            return c
    for c in var:
        if pd.api.types.is_numeric_dtype(data.df[c]) and not pd.api.types.is_bool_dtype(data.df[c]):
            return c
    return "offered_rps"


def default_hue(data: SweepData, x: str) -> str | None:
    if "variant" in data.varying and x != "variant":
        return "variant"
    rest = [c for c in data.varying if c != x]
    return rest[0] if rest else None


def _check_col(data: SweepData, col: str, what: str) -> None:
    if col not in data.df.columns:
        avail = ", ".join(data.params + [c for c in ("offered_rps", "cpu_utilization") if c in data.df.columns])
        raise PlotError(f"{what} {col!r}: no such column in {data.path} (parameters and loads: {avail})")


def series(data: SweepData, x: str, hue: str | None, metrics: Sequence[str],
           max_curves: int | None = None) -> list[tuple[str, pd.DataFrame]]:
    """Means over seeds, one frame per curve, sorted by x. A curve is a value of ``hue`` and
    of every other varying parameter (so no curve mixes two settings). More than
    ``max_curves`` curves is a :class:`PlotError` (before anything is computed)."""
    from .sweep.runner import aggregate

    keys = ([hue] if hue else []) + _splitting(data, [c for c in data.varying if c not in (x, hue)], hue)
    if max_curves is not None and keys:
        n = len(data.df[keys].drop_duplicates())
        if n > max_curves:
            raise PlotError(f"{n} curves (one per {' × '.join(keys)}), more than one figure shows legibly "
                            f"({max_curves}); `microsched plot {data.path}` draws them all")
    metrics = [m for m in dict.fromkeys(metrics) if m in data.df.columns and m != x]
    df = data.df.copy()
    by = keys + [x]
    df = df[[c for c in dict.fromkeys(by + metrics)]]
    for m in metrics:
        df[m] = pd.to_numeric(df[m], errors="coerce")
    agg = aggregate(df, by, metrics)
    out = []
    if keys:
        for key, g in agg.groupby(keys, sort=False, dropna=False):
            key = key if isinstance(key, tuple) else (key,)
            parts = []
            for k, v in zip(keys, key):
                if k == "variant":
                    parts.append(data.labels.get(str(v), str(v)))
                else:
                    parts.append(f"{k}={v}")
            out.append((", ".join(parts), _sort_x(g, x)))
    else:
        out.append(("", _sort_x(agg, x)))
    return out


def _splitting(data: SweepData, cols: Sequence[str], hue: str | None) -> list[str]:
    """The columns among ``cols`` that take several values for one value of ``hue`` (the
    others are settings of the hue value, such as the parameters a variant sets)."""
    if not hue:
        return list(cols)
    df = data.df
    return [c for c in cols if (df.groupby(hue, dropna=False)[c].nunique(dropna=False) > 1).any()]


def _sort_x(g: pd.DataFrame, x: str) -> pd.DataFrame:
    try:
        return g.sort_values(x, kind="stable")
    except TypeError:
        return g


def _xy(g: pd.DataFrame, x: str, y: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    xs = g[x].to_numpy()
    if pd.api.types.is_numeric_dtype(g[x]):
        xs = xs.astype(float) * scale(x)
    ys = g[y].to_numpy(float) * scale(y)
    ci = g[f"{y}.ci95"].to_numpy(float) * scale(y) if f"{y}.ci95" in g else np.full(len(g), np.nan)
    return xs, ys, ci


def _line(ax, g: pd.DataFrame, x: str, y: str, name: str, **kw) -> None:
    xs, ys, ci = _xy(g, x, y)
    err = None if np.all(~np.isfinite(ci)) else np.where(np.isfinite(ci), ci, 0.0)
    ax.errorbar(xs, ys, yerr=err, label=name or None, capsize=2.5, lw=1.5, ms=4, **kw)


def _finish(fig, out_dir: Path, name: str, formats: Sequence[str] = FORMATS) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        p = out_dir / f"{name}.{fmt}"
        fig.savefig(p, dpi=120 if fmt == "png" else None)
        paths.append(p)
    plt.close(fig)
    return paths


# A legend lists at most this many curves: HarvestContainers' 144 variants made a legend that
# collapsed the axes to nothing (matplotlib: "axes sizes collapsed to zero") and was a third of
# the figure's drawing time.
MAX_LABELLED_CURVES = 12


def _legend(ax, curves: int, loc: str = "best") -> None:
    """The legend of a panel of ``curves`` curves, or for more than a legend can list, a note
    saying how many."""
    if curves > MAX_LABELLED_CURVES:
        ax.text(0.01, 0.99, f"{curves} curves: too many to label", transform=ax.transAxes, va="top", fontsize=8)
    elif curves:
        ax.legend(fontsize=8, loc=loc)


MARKERS = "osD^vP*X<>h"


def _log_y(ax) -> None:
    """A log y axis labelled with plain numbers (60, 100, 200), not powers of ten."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    ax.set_yscale("log")
    fmt = FuncFormatter(lambda v, _: f"{v:g}")
    ax.yaxis.set_major_formatter(fmt)
    ax.yaxis.set_minor_locator(LogLocator(subs=(2, 3, 5)))
    ax.yaxis.set_minor_formatter(fmt)


# ---------------------------------------------------------------------------------------------
# sweep figures


def plot_latency(data: SweepData, out_dir: Path, x: str | None = None, hue: str | None = None,
             formats: Sequence[str] = FORMATS, max_curves: int | None = None) -> list[Path]:
    x = x or default_x(data)
    hue = hue if hue is not None else default_hue(data, x)
    cols = [("latency_us.p50", "p50"), ("latency_us.p99", "p99"), ("latency_us.p999", "p99.9")]
    cols = [(c, n) for c, n in cols if c in data.df.columns]
    if not cols:
        raise PlotError(f"{data.path}: no latency_us.* columns")
    panels = [(c, f"{n} end-to-end latency (µs, log scale)", f"{n} latency") for c, n in cols]
    fig = _log_panels(data, x, hue, panels, max_curves)
    fig.suptitle(f"End-to-end latency vs {label(x).split(' (')[0]}: {data.title}", fontsize=11)
    return _finish(fig, out_dir, "latency", formats)


def _log_panels(data: SweepData, x: str, hue: str | None, panels: list[tuple[str, str, str]],
                max_curves: int | None = None) -> Any:
    """One log-scale panel per (column, y label, title), side by side, one curve per `hue`
    value in each; the legend on the last panel."""
    curves = series(data, x, hue, [c for c, _, _ in panels], max_curves)
    fig, axes = plt.subplots(1, len(panels), figsize=(max(7.0, 5 * len(panels)), 4.4), constrained_layout=True,
                             squeeze=False)
    for ax, (c, ylabel, title) in zip(axes[0], panels):
        for i, (name, g) in enumerate(curves):
            _line(ax, g, x, c, name, marker=MARKERS[i % len(MARKERS)])
        _log_y(ax)
        ax.set_xlabel(label(x))
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3, which="both")
    _legend(axes[0][-1], len(curves) if len(curves) > 1 or (curves and curves[0][0]) else 0)
    return fig


def plot_throughput(data: SweepData, out_dir: Path, x: str | None = None, hue: str | None = None,
             formats: Sequence[str] = FORMATS, max_curves: int | None = None) -> list[Path]:
    x = x or "offered_rps"
    hue = hue if hue is not None else default_hue(data, default_x(data))
    need = [c for c in ("throughput_rps", "goodput_rps") if c in data.df.columns]
    if not need:
        raise PlotError(f"{data.path}: no throughput_rps / goodput_rps columns")
    # one curve per hue value: the load parameter (if any) is what moves along x
    curve_x = x if x != "offered_rps" else default_x(data)
    curves = series(data, curve_x, hue, [*need, x], max_curves)
    fig, ax = plt.subplots(figsize=(7, 4.8), constrained_layout=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    hi = 0.0
    for i, (name, g) in enumerate(curves):
        g = g.sort_values(x)
        col = colors[i % len(colors)]
        for m, ls, what in (("throughput_rps", "-", "throughput"), ("goodput_rps", "--", "goodput")):
            if m in g:
                xs = g[x].to_numpy(float) * scale(x)
                ys = g[m].to_numpy(float) * scale(m)
                ax.plot(xs, ys, ls=ls, marker=MARKERS[i % len(MARKERS)], ms=4, color=col,
                        label=f"{what}{': ' + name if name else ''}")
                hi = max(hi, np.nanmax(xs) if len(xs) else 0.0)
    if x in ("offered_rps", "load.rps") and hi > 0:
        ax.plot([0, hi], [0, hi], color="0.6", lw=1, ls=":", label="throughput = offered load")
    ax.set_xlabel(label(x))
    ax.set_ylabel("throughput, goodput (M requests/s)")
    ax.set_title(f"Throughput (solid) and goodput within the SLO (dashed)\n{data.title}", fontsize=10)
    ax.grid(alpha=0.3)
    _legend(ax, len(curves), "upper left")
    return _finish(fig, out_dir, "throughput", formats)


def pareto_front(u: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Indices of the points that no other point dominates (another point with a utilization
    and a p99 both ≤, one of them <), sorted by utilization."""
    idx = [i for i in range(len(u)) if np.isfinite(u[i]) and np.isfinite(p[i])]
    front = []
    for i in idx:
        dominated = any((u[j] <= u[i] and p[j] <= p[i]) and (u[j] < u[i] or p[j] < p[i]) for j in idx if j != i)
        if not dominated:
            front.append(i)
    return np.array(sorted(front, key=lambda i: (u[i], p[i])), dtype=int)


def plot_pareto(data: SweepData, out_dir: Path, x: str | None = None, hue: str | None = None,
             formats: Sequence[str] = FORMATS, max_curves: int | None = None) -> list[Path]:
    for c in ("cpu_utilization", "latency_us.p99"):
        _check_col(data, c, "column")
    load_col = default_x(data)
    hue = hue if hue is not None else default_hue(data, load_col)
    curves = series(data, load_col, hue, ["cpu_utilization", "latency_us.p99"], max_curves)
    fig, ax = plt.subplots(figsize=(7.5, 5), constrained_layout=True)
    all_u, all_p = [], []
    for i, (name, g) in enumerate(curves):
        u = g["cpu_utilization"].to_numpy(float) * 100
        p = g["latency_us.p99"].to_numpy(float)
        ax.plot(u, p, marker=MARKERS[i % len(MARKERS)], ms=5, lw=1.2, label=name or None)
        all_u.extend(u)
        all_p.extend(p)
    u, p = np.array(all_u), np.array(all_p)
    f = pareto_front(u, p)
    if len(f):
        ax.step(u[f], p[f], where="post", color="black", lw=1, ls="--", alpha=0.7)
        ax.scatter(u[f], p[f], s=140, facecolors="none", edgecolors="black", lw=1.5, zorder=5,
                   label=f"Pareto front ({len(f)} points)")
    _log_y(ax)
    ax.set_xlabel(label("cpu_utilization"))
    ax.set_ylabel("p99 end-to-end latency (µs, log scale)")
    ax.set_title(f"p99 latency vs CPU utilization: {data.title}\n(lower left is better; each curve follows "
                 f"{load_col})", fontsize=9)
    ax.grid(alpha=0.3, which="both")
    _legend(ax, len(curves))
    return _finish(fig, out_dir, "pareto", formats)


def request_types(df: pd.DataFrame) -> list[str]:
    """Request type names with per-type columns (``by_type.NAME.slowdown.p99``)."""
    names = []
    for c in df.columns:
        if c.startswith("by_type.") and c.endswith(".slowdown.p99"):
            names.append(c[len("by_type."):-len(".slowdown.p99")])
    return names


def plot_slowdown(data: SweepData, out_dir: Path, x: str | None = None, hue: str | None = None,
             formats: Sequence[str] = FORMATS, max_curves: int | None = None) -> list[Path]:
    x = x or default_x(data)
    hue = hue if hue is not None else default_hue(data, x)
    types = request_types(data.df)
    cols = [(f"by_type.{t}.slowdown.p99", t) for t in types] or [("slowdown.p99", "all requests (one type)")]
    for c, _ in cols:
        _check_col(data, c, "column")
    fig = _log_panels(data, x, hue, [(c, "p99 slowdown (latency / service time, log)", f"type {t}") for c, t in cols],
                      max_curves)
    fig.suptitle(f"p99 slowdown vs {label(x).split(' (')[0]}, per request type: {data.title}", fontsize=11)
    return _finish(fig, out_dir, "slowdown", formats)


# ---------------------------------------------------------------------------------------------
# run figures


def core_lines(summary: dict, ts: pd.DataFrame) -> list[tuple[str, np.ndarray]]:
    """The cores panel's lines, (label, values per interval). A harvesting run's Secondary also
    runs on cores the Primary holds (its turns on a core it shares, a waking core under
    ``harvest_cfs``), which the time series leaves out of the allocated cores: its line is then
    the cores that are not allocated (``cores.max`` − allocated, whose mean is ``be_cores_mean``),
    so that the allocated and the best-effort lines add up to the maximum; elsewhere it is the
    parked cores."""
    lines = [(lab, ts[name].to_numpy(float)) for name, lab in (("cores_allocated", "allocated to LC"), ("cores_busy", "busy"))
             if name in ts]
    max_cores = (summary.get("cores") or {}).get("max")
    if summary.get("harvest") and max_cores and "cores_allocated" in ts:
        lines.append(("best effort (parked + its time on LC cores)", max_cores - ts["cores_allocated"].to_numpy(float)))
    elif "cores_parked" in ts:
        lines.append(("parked (BE)", ts["cores_parked"].to_numpy(float)))
    return lines


def plot_timeseries(run: RunData, out_dir: Path, formats: Sequence[str] = FORMATS) -> list[Path]:
    ts = run.timeseries
    if ts.empty or "t_ms" not in ts:
        raise PlotError(f"{run.path}: no time series (timeseries.parquet with a t_ms column)")
    t = ts["t_ms"].to_numpy(float)
    dt_s = float(np.median(np.diff(t))) / 1e3 if len(t) > 1 else math.nan

    def col(name: str) -> np.ndarray | None:
        return ts[name].to_numpy(float) if name in ts else None

    fig, axes = plt.subplots(4, 1, figsize=(10, 10), sharex=True, constrained_layout=True)
    ax = axes[0]
    for lab, v in core_lines(run.summary, ts):
        ax.step(t, v, where="post", label=lab, lw=1.2)
    max_cores = (run.summary.get("cores") or {}).get("max")
    if max_cores:
        ax.axhline(max_cores, color="0.5", ls=":", lw=1, label=f"max = {max_cores}")
    ax.set_ylabel("cores")
    ax.set_title("cores", fontsize=10)

    ax = axes[1]
    shown = False
    for name, lab in (("credit_pool", "credit pool"), ("credits_issued", "credits issued (outstanding)")):
        v = col(name)
        if v is not None and np.nanmax(np.abs(v), initial=0) > 0:
            ax.plot(t, v, label=lab, lw=1.2)
            shown = True
    if not shown:
        ax.text(0.5, 0.5, f"no credits (overload control: {run.summary.get('overload', 'none')})",
                ha="center", va="center", transform=ax.transAxes, color="0.4")
    ax.set_ylabel("credits")
    ax.set_title("credits (overload control)", fontsize=10)

    ax = axes[2]
    for name, lab in (("queue_len", "server queues (requests)"), ("client_queued", "client queues (requests)")):
        v = col(name)
        if v is not None:
            ax.plot(t, v, label=lab, lw=1.2)
    ax.set_ylabel("queued requests")
    d = col("oldest_delay_us")
    if d is not None:
        ax2 = ax.twinx()
        ax2.plot(t, d, color="tab:red", lw=1, alpha=0.7, label="oldest queueing delay (µs)")
        ax2.set_ylabel("oldest queueing delay (µs)", color="tab:red")
        ax2.legend(fontsize=8, loc="upper right")
    ax.set_title("queues", fontsize=10)

    ax = axes[3]
    v = col("drops")
    if v is not None and np.isfinite(dt_s) and dt_s > 0:
        ax.plot(t, v / dt_s / 1e3, color="tab:red", lw=1.2, label="drops")
    for name, lab in (("arrivals", "arrivals"), ("completions", "completions")):
        w = col(name)
        if w is not None and np.isfinite(dt_s) and dt_s > 0:
            ax.plot(t, w / dt_s / 1e3, lw=1, alpha=0.6, label=lab)
    ax.set_ylabel("k requests/s")
    ax.set_title("drops (and arrivals, completions) per second", fontsize=10)
    # A real run (`microsched real`) has a runtime section: its clock is the wall clock.
    ax.set_xlabel("time since start (ms)" if "runtime" in run.summary else "simulated time (ms)")
    for a in axes:
        a.grid(alpha=0.3)
        if a.get_legend_handles_labels()[0]:
            a.legend(fontsize=8, loc="upper left")
    if run.warmup_ms > 0:
        for a in axes:
            a.axvspan(float(np.nanmin(t)) - dt_s * 1e3 if np.isfinite(dt_s) else 0.0, run.warmup_ms,
                      color="0.85", alpha=0.5, lw=0, label=None)
        axes[0].text(run.warmup_ms, 1.0, " warm-up ends", transform=axes[0].get_xaxis_transform(),
                     fontsize=8, color="0.4", va="bottom")
    fig.suptitle(f"Time series: {run.title}", fontsize=11)
    return _finish(fig, out_dir, "timeseries", formats)


# ---------------------------------------------------------------------------------------------
# entry point

_SWEEP_FUNCS = {"latency": plot_latency, "throughput": plot_throughput, "pareto": plot_pareto,
                "slowdown": plot_slowdown}


def default_out(path: str | os.PathLike) -> Path:
    p = Path(path)
    return (p if p.is_dir() else p.parent) / "plots"


def plot(path: str | os.PathLike, kinds: Sequence[str] | None = None, x: str | None = None,
         hue: str | None = None, out: str | os.PathLike | None = None,
         formats: Sequence[str] = FORMATS, max_curves: int | None = None) -> list[Path]:
    """Draws the figures of ``path`` (a result dataset or a run directory) into ``out``
    (default: ``plots/`` beside the data) in ``formats`` (default PNG and SVG); returns the
    files written. ``kinds`` default to every kind that applies to the input. With
    ``max_curves``, a dataset's figure that would draw more curves is a :class:`PlotError`
    (the report's limit: a legend of 144 entries reads as nothing)."""
    data = load(path)
    out_dir = Path(out) if out is not None else default_out(path)
    for k in kinds or ():
        if k not in KINDS:
            raise PlotError(f"--kind: unknown kind {k!r}: use {', '.join(KINDS)}")
    if isinstance(data, RunData):
        kinds = list(kinds or RUN_KINDS)
        bad = [k for k in kinds if k not in RUN_KINDS]
        if bad:
            raise PlotError(f"--kind {bad[0]}: needs a result dataset (results.parquet of a sweep); "
                            f"{data.path} is a single run: use --kind timeseries")
        if x or hue:
            raise PlotError("--x and --hue apply to result datasets, not to a single run")
        return plot_timeseries(data, out_dir, formats)
    kinds = list(kinds or SWEEP_KINDS)
    bad = [k for k in kinds if k not in SWEEP_KINDS]
    if bad:
        raise PlotError(f"--kind {bad[0]}: needs a single run directory (summary.json + timeseries.parquet); "
                        f"{data.path} is a result dataset")
    if x:
        _check_col(data, x, "--x")
    if hue:
        _check_col(data, hue, "--hue")
    paths: list[Path] = []
    for k in kinds:
        paths += _SWEEP_FUNCS[k](data, out_dir, x=x, hue=hue, formats=formats, max_curves=max_curves)
    return paths


# ---------------------------------------------------------------------------------------------
# one run's latency distribution


def latency_cdf_points(result: "RunResult") -> tuple[np.ndarray, np.ndarray, str]:
    """(latency µs, cumulative fraction, source) of the end-to-end latency distribution.

    The HDR histogram's CDF that the simulator returns is preferred; without it, the
    per-request records (if kept) give an empirical CDF."""
    cdf = result.latency_cdf
    if cdf is not None and len(cdf) > 0:
        return cdf["latency_us"].to_numpy(float), cdf["fraction"].to_numpy(float), "HDR histogram"
    req = result.requests
    if req is not None and len(req) > 0 and {"response_ns", "created_ns"} <= set(req.columns):
        ok = req[~req["dropped"].astype(bool)] if "dropped" in req.columns else req
        lat = np.sort((ok["response_ns"].to_numpy(float) - ok["created_ns"].to_numpy(float)) / 1e3)
        if len(lat):
            return lat, np.arange(1, len(lat) + 1) / len(lat), "per-request records"
    return np.array([]), np.array([]), "none"


def _run_title(result: "RunResult") -> str:
    s = result.summary
    name = s.get("scenario") or result.scenario.get("name") or "scenario"
    parts = [str(name)]
    if "allocator" in s:
        parts.append(f"allocator={s['allocator']}")
    if "overload" in s:
        parts.append(f"overload={s['overload']}")
    if "seed" in s:
        parts.append(f"seed={s['seed']}")
    return ", ".join(parts)


def plot_latency_cdf(result: "RunResult", path: str | os.PathLike) -> Path:
    """Writes a PNG with the end-to-end latency CDF (left, linear) and its tail, the
    complementary CDF on log-log axes (right), p50/p99/p99.9 marked. Returns the path."""
    x, f, source = latency_cdf_points(result)
    lat = result.summary.get("latency_us", {}) or {}
    marks = [(k, lat.get(k)) for k in ("p50", "p99", "p999")]
    labels = {"p50": "p50", "p99": "p99", "p999": "p99.9"}
    colors = {"p50": "tab:green", "p99": "tab:orange", "p999": "tab:red"}

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    fig.suptitle(f"End-to-end latency: {_run_title(result)}", fontsize=11)
    if len(x) == 0:
        for ax in (ax1, ax2):
            ax.text(0.5, 0.5, "no completed requests in the measured window", ha="center", va="center",
                    transform=ax.transAxes)
    else:
        ax1.step(x, f, where="post", color="tab:blue", lw=1.5)
        ax1.set_ylim(0, 1.02)
        hi = lat.get("p999") or x[-1]
        ax1.set_xlim(0, max(float(hi) * 1.25, float(x[0]) * 1.1, 1e-3))
        ccdf = np.clip(1.0 - f, 0, 1)
        keep = (ccdf > 0) & (x > 0)
        if keep.any():
            ax2.step(x[keep], ccdf[keep], where="post", color="tab:blue", lw=1.5)
            ax2.set_xscale("log")
            ax2.set_yscale("log")
        for k, v in marks:
            if v is None or not np.isfinite(v) or v <= 0:
                continue
            for ax in (ax1, ax2):
                ax.axvline(v, color=colors[k], ls="--", lw=1, label=f"{labels[k]} = {v:,.1f} µs")
        ax1.legend(loc="lower right", fontsize=9)
    ax1.set_xlabel("latency (µs)")
    ax1.set_ylabel("fraction of requests ≤ latency")
    ax1.set_title(f"CDF ({source})", fontsize=10)
    ax1.grid(alpha=0.3)
    ax2.set_xlabel("latency (µs, log scale)")
    ax2.set_ylabel("fraction of requests > latency (log scale)")
    ax2.set_title("tail: complementary CDF", fontsize=10)
    ax2.grid(alpha=0.3, which="both")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
