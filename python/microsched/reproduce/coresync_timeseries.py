"""The time-series explanation of ``microsched reproduce coresync`` (issue 12, item 4).

CoreSync (exponential 10 µs, R = 50, 100 sessions) from a cold start (Breakwater's pool at its
floor, ``max_cores``) to steady state, at loads 0.2 and 0.5: the credit pool C_total, the issued
credits C_issued, CoreSync's bound R·K + N (K = LC cores allocated, N = sessions) and the cores
allocated, sampled every millisecond. CoreSync's gate lets a core park only while
C_issued − N ≤ R·K, i.e. while the issued curve stays below the bound curve: the figure shows
when (and whether) that happens as the pool grows to its ceiling. The runs take the variant's
own overrides and the condition's (``--condition``), so the figure shows what the claims saw;
under a condition the series runs through the artifact's 4 s warm-up and 300 ms after it.
The park columns (attempts, those the gate kept polling, parks, wake-ups per sample) show when
CoreSync last parked.

Writes ``fig_coresync_timeseries.png`` and ``timeseries_coresync.parquet``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pandas as pd

from .coresync_data import COLD_WARMUP_MS
from .coresync_report import _plt
from .framework import Context
from ..sweep.worker import series_of

VARIANT = "exp10/coresync"
LOADS = (0.2, 0.5)
DURATION_MS = 800  # the pool fills (64 − 16/N)/α RTTs ≈ 640 ms from its floor
CONDITION_TAIL_MS = 300  # after a condition's cold warm-up: the published measured window
SAMPLE_US = 1000
R, N = 50.0, 100.0
# CoreSync's park attempts per sample, those its gate kept polling, its parks and wake-ups.
PARK_COLUMNS = ("park_attempts", "park_vetoes", "parks", "wakeups")
SERIES_COLUMNS = ("t_ms", "cores_allocated", "cores_busy", "credit_pool", "credits_issued", "drained_sessions",
                  *PARK_COLUMNS)


def tasks(ctx: Context) -> list[tuple] | None:
    """The series runs, one cold-start run per load (seed 1), as ``series_of`` takes them; None
    if the spec lacks the variant (a filtered run). Needs only the spec as run: declared before
    the sweep (``extra_runs``)."""
    var = next((x for x in ctx.spec.variants if x.name == VARIANT), None)
    if var is None:
        return None
    # `--semantics NAME`: its overrides too (run_reproduction put them in the spec's overrides,
    # which the series does not take whole: it sets its own duration and warm-up).
    sem = []
    if ctx.semantics:
        sem = tomllib.loads((Path(ctx.spec.path).parent / f"semantics-{ctx.semantics}.toml").read_text())["overrides"]
    # Under a condition (run from the artifact's cold start, 4 s warm-up) the series covers that
    # warm-up and the measured window: a pool held down by cuts may escape to its ceiling late.
    duration = DURATION_MS
    if ctx.condition:
        duration = COLD_WARMUP_MS + CONDITION_TAIL_MS
    # the condition's overrides are already in var.set (run_reproduction appended them)
    return [(str(ctx.spec.base), 1, (*sem, *var.set, "warmup_ms=0", f"duration_ms={duration}",
                                     "policy.overload.initial_pool=16", f"metrics.sample_interval_us={SAMPLE_US}",
                                     f"load.fraction={load}"), SERIES_COLUMNS) for load in LOADS]


def run(ctx: Context) -> pd.DataFrame | None:
    """The time series of :func:`tasks`, with the load (extra runs on the framework's pool,
    :meth:`Context.run_extra`); None if the spec lacks the variant."""
    todo = tasks(ctx)
    if todo is None:
        return None
    frames = []
    for load, cols in zip(LOADS, ctx.run_extra(series_of, todo)):
        ts = pd.DataFrame(cols)
        ts.insert(0, "load", load)
        ts["bound_rk_n"] = R * ts["cores_allocated"] + N
        frames.append(ts)
    return pd.concat(frames, ignore_index=True)


def steady(ts: pd.DataFrame, load: float, last_ms: float = 100.0) -> dict[str, float]:
    """Means over the last ``last_ms`` of the run at ``load``."""
    x = ts[ts["load"] == load]
    x = x[x["t_ms"] > x["t_ms"].max() - last_ms]
    return {k: float(x[k].mean()) for k in ("credit_pool", "credits_issued", "bound_rk_n", "cores_allocated",
                                             "cores_busy")}


def park_counts(ts: pd.DataFrame, load: float, last_ms: float = 100.0) -> dict[str, float | None]:
    """CoreSync's park counts summed over the last ``last_ms`` of the run at ``load``, and when
    it last parked (None: never)."""
    x = ts[ts["load"] == load]
    tail = x[x["t_ms"] > x["t_ms"].max() - last_ms]
    out: dict[str, float | None] = {k: float(tail[k].sum()) if k in x.columns else None for k in PARK_COLUMNS}
    parked = x[x["parks"] > 0] if "parks" in x.columns else x.iloc[:0]
    out["last_park_ms"] = float(parked["t_ms"].max()) if len(parked) else None
    return out


def first_blocked_ms(ts: pd.DataFrame, load: float) -> float | None:
    """When the issued credits first exceed the bound R·K + N for good (the gate closes for
    the rest of the run), or None if they end below it."""
    x = ts[ts["load"] == load].reset_index(drop=True)
    over = (x["credits_issued"] > x["bound_rk_n"]).to_numpy()
    if len(over) == 0 or not over[-1]:
        return None
    i = len(over) - 1
    while i > 0 and over[i - 1]:
        i -= 1
    return float(x["t_ms"][i])


def plot(ctx: Context, ts: pd.DataFrame) -> None:
    plt = _plt()
    if plt is None:
        return
    fig, axes = plt.subplots(1, len(LOADS), figsize=(6.5 * len(LOADS), 4.2), sharey=True)
    for ax, load in zip(axes, LOADS):
        x = ts[ts["load"] == load]
        ax.plot(x["t_ms"], x["credit_pool"], color="tab:blue", lw=1.2, label="credit pool C_total")
        ax.plot(x["t_ms"], x["credits_issued"], color="tab:orange", lw=1.2, label="issued credits C_issued")
        ax.plot(x["t_ms"], x["bound_rk_n"], color="tab:red", lw=1.2, ls="--", label="R·K + N (CoreSync's bound)")
        ax.set_yscale("log")
        ax.set_xlabel("time since a cold start (ms)")
        ax.set_title(f"CoreSync, exp. 10 µs, load {load}")
        ax2 = ax.twinx()
        ax2.plot(x["t_ms"], x["cores_allocated"], color="black", lw=0.8, alpha=0.7, label="cores allocated K")
        ax2.set_ylim(0, 17)
        ax2.set_ylabel("LC cores allocated")
        if load == LOADS[0]:
            ax.set_ylabel("credits (log)")
            h1, l1 = ax.get_legend_handles_labels()
            h2, l2 = ax2.get_legend_handles_labels()
            ax.legend(h1 + h2, l1 + l2, fontsize=7, loc="lower right")
    cond = f" (condition {ctx.condition})" if ctx.condition else ""
    fig.suptitle("Why CoreSync parks or not: a core may park only while C_issued − N ≤ R·K (issued below the dashed "
                 f"line){cond}", fontsize=9)
    fig.tight_layout()
    ctx.save_figure(fig, "fig_coresync_timeseries.png")


def write(ctx: Context) -> pd.DataFrame | None:
    ts = run(ctx)
    if ts is None:
        return None
    ts.to_parquet(ctx.out / "timeseries_coresync.parquet", index=False)
    plot(ctx, ts)
    return ts


__all__ = ["write", "steady", "park_counts", "first_blocked_ms"]
