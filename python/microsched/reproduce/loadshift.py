"""``microsched reproduce load-shift``: Fig. 1 of the simulation study "core allocation vs
overload control" (``shared/papers/core-allocation-vs-overload-control.md``).

Breakwater (target 10 µs, drop 20 µs, α = 1 absolute, β = 0.08, RTT 30 µs) over a Caladan-style
core allocator (32 cores, delay threshold 10 µs every 5 µs, allocation delay 5 µs), bimodal
requests with a 1 µs mean, 1000 sessions, load 0.2 → 1.2 → 0.5 → 1.2 every 25 ms
(``experiments/load-shift/``). Variants: the baseline, the study's fix (``core_fix``), and the
baseline started from Breakwater's own initial pool (32) instead of the study simulator's 1025.

The sweep's rows hold whole-run summaries; the time series are not part of them, so
:func:`run_timeseries` re-runs the points (bit-identical: same scenario and seed) to get them and
writes ``timeseries.parquet``. Figures: ``loadshift_timeseries.png`` (throughput, credit pool,
cores, queued tasks over the 100 ms, baseline vs fix, like the study's top panel) and
``loadshift_closeup.png`` (the 25 ms shift at the sampling resolution, like its bottom panel).
"""

from __future__ import annotations

import math
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Sequence

import numpy as np
import pandas as pd

from .claims import Claim, rounded as _r
from .framework import Context, register
from .runner import default_jobs, mean_ci95
from .spec import Point
from .search_cause import SWITCH, gated_fix_churn
from .stats import Seeds, safe_ratio

BASE, FIX, INIT32 = "baseline", "fix", "baseline-init32"
CAPACITY_RPS = 32e6          # 32 cores × 1 µs mean service
RTT_US, SERVICE_US, MAX_CORES = 30.0, 1.0, 32
SHIFTS_MS = (25.0, 75.0)     # 0.2 → 1.2 and 0.5 → 1.2
PHASE_MS = 25.0
BIN_MS = 0.1                 # the top panel's resolution (100 µs)
RAMP_LEVEL = 0.8             # "ramped up": 80 % of the capacity that load 1.2 can use (32 M req/s)
PAPER_IMPROVEMENT_PCT = 7.0
TS_COLS = ("t_ms", "throughput_rps", "offered_rps", "credit_pool", "credits_issued", "cores_allocated",
           "cores_busy", "queue_len", "in_system", "client_queued", "drops", "arrivals", "completions",
           "drained_sessions")
COLORS = {BASE: "tab:red", FIX: "tab:blue", INIT32: "tab:orange"}


# ---------------------------------------------------------------------------------------------
# time series (shared with the collapse reproduction)


def _ts_worker(args: tuple[Point, tuple[str, ...]]) -> pd.DataFrame:
    from ..api import run

    point, extra = args
    res = run(point.scenario, seed=point.seed, overrides=[*point.overrides, *extra])
    ts = res.timeseries[[c for c in TS_COLS if c in res.timeseries.columns]].copy()
    for k, v in point.params.items():
        ts[k] = v
    return ts


def run_timeseries(points: Sequence[Point], extra_overrides: Sequence[str] = (),
                   jobs: int | None = None) -> pd.DataFrame:
    """The time series of ``points`` (each with ``extra_overrides`` appended), one frame with the
    point's parameters as columns. Runs ``jobs`` at a time in spawned worker processes."""
    jobs = default_jobs() if jobs is None else jobs
    args = [(p, tuple(extra_overrides)) for p in points]
    if jobs <= 1 or len(points) <= 1:
        frames = [_ts_worker(a) for a in args]
    else:
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=min(jobs, len(points)), mp_context=ctx) as pool:
            frames = list(pool.map(_ts_worker, args))
    return pd.concat(frames, ignore_index=True)


def binned(ts: pd.DataFrame, bin_ms: float) -> pd.DataFrame:
    """Means over bins of ``bin_ms`` (the samples' end times in (k·bin, (k+1)·bin]); counts
    (drops, arrivals, completions) are summed."""
    b = np.ceil(np.round(ts["t_ms"].to_numpy(float) / bin_ms, 6)).astype(int)
    g = ts.assign(_bin=b).groupby("_bin")
    sums = [c for c in ("drops", "arrivals", "completions") if c in ts.columns]
    means = [c for c in ts.columns if c not in (*sums, "_bin", "t_ms") and pd.api.types.is_numeric_dtype(ts[c])]
    out = pd.concat([g[means].mean(), g[sums].sum()], axis=1).reset_index()
    out["t_ms"] = out["_bin"] * bin_ms
    return out.drop(columns="_bin")


def setup_plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt



# ---------------------------------------------------------------------------------------------
# the reproduction


@register("load-shift", paper="Core allocation vs overload control (simulation study)", figure="Fig. 1",
          description="Breakwater + Caladan-style allocation, 32 cores, bimodal 1 µs, RTT 30 µs, load "
                      "0.2→1.2→0.5→1.2 every 25 ms: baseline vs the study's core fix",
          spec="load-shift/sweep.toml")
def analyze(ctx: Context) -> list[Claim]:
    ctx.require_variants(BASE, FIX)
    df = ctx.results
    ts = run_timeseries(ctx.spec.points())
    ts.to_parquet(ctx.out / "timeseries.parquet", index=False)
    plot_timeseries(ctx, ts)
    plot_closeup(ctx, ts)
    seeds = Seeds(df)
    return [claim_improvement(seeds, ctx.semantics), claim_slow_ramp(ts), claim_burst_dropped(ts), claim_latency(seeds)]


STUDY_NOTE = (
    "Under the study simulator's semantics (--semantics study: probe search parking after a full sweep, random "
    "steering, exact delay signal, one client with an unbounded window and a 620 µs timeout, pool 700 in "
    "150..1175, drop-gated ramp) the fix's throughput matches the study's own simulator run here within 2 % per "
    "phase (8 ms scaled run: 21.45 vs 21.80 M req/s), and the gain is ~+30 % in both simulators (+31.4 % in "
    "theirs), against the paper's +7 %. The gain varies widely by seed: whether the baseline's pool escapes the "
    "collapse cycle in the 0.2 phase is a threshold effect. Our baseline keeps less pool than theirs (mean 282 vs "
    "~700 in the 0.2 phase): our caladan allocator skips the interval after each grant (one core per 10 µs at "
    "most), theirs adds one every 5 µs while any queue head is older than 10 µs.")


def claim_improvement(s: Seeds, semantics: str | None = None) -> Claim:
    pct = s.per_seed(None, "throughput_rps", lambda base, fix: 100 * (safe_ratio(fix, base) - 1), BASE, FIX)
    m, ci, n = mean_ci95(pct)
    # "Roughly by how much" (DESIGN.md): the direction and a factor of two of the paper's 7 %.
    holds = bool(PAPER_IMPROVEMENT_PCT / 2 <= m <= PAPER_IMPROVEMENT_PCT * 2)
    extra: dict[str, Any] = {
        "unit": "%", "ci95": _r(ci), "seeds": n,
        "measure": "100 × (throughput(fix) / throughput(baseline) − 1) over the whole 100 ms, mean over seeds "
                   "(paired: common random numbers); holds if within a factor 2 of the paper's 7 %",
        "throughput_mrps": {v: _r(s.mean(v, None, "throughput_rps") / 1e6, 3)
                            for v in (BASE, FIX, INIT32) if v in set(s.df["variant"])},
        "offered_mrps": _r(s.df["offered_rps"].astype(float).mean() / 1e6, 3),
    }
    if not holds and semantics == "study":
        extra["note"] = STUDY_NOTE
    elif not holds:
        extra["note"] = (
            "The fix wins, but by far more than 7 %: in our model the baseline falls into the study's own "
            "throughput-collapse cycle (Fig. 2, reproduced by `reproduce collapse`) during the first 0.2-load "
            "phase and never leaves it. At load 0.2 (~7 cores needed) the credit-driven bursts meet a few "
            "allocated cores, the queueing delay crosses the 10 µs target before the allocator's extra cores "
            "(5 µs allocation delay) arrive, and each crossing cuts the pool by up to half, while α = 1 "
            "restores only one credit per 30 µs RTT; the pool settles near 60–160 credits, ~1–2 cores stay "
            "allocated, and at RTT 30 µs the idle gap between bursts parks the cores again. Starting from "
            "Breakwater's own initial pool (32, variant baseline-init32) gives the same collapse. The fix's "
            "minimum pool (128) and proportional growth keep it out of the cycle. The study's baseline must "
            "have kept enough pool through the 0.2 phase to ramp up (slowly) after each shift; its "
            "simulator's drop and delay details are not public beyond its code, so we report the gap rather "
            "than tune the model toward 7 %. Note also that the fix's proportional growth compounds under "
            "core churn (a core that parks does not shrink the pool, one that is re-allocated grows it by "
            "C_total/N_t), so at load 0.2 the fix's pool climbs to its ceiling (64 × sessions) and only the "
            "multiplicative decrease after the next shift brings it down.")
    return Claim(id="fix-throughput-improvement",
                 claim="The fix improves overall throughput over the load-shift run by about 7 % (study §3)",
                 paper=PAPER_IMPROVEMENT_PCT, measured=_r(m, 2), holds=holds, extra=extra)


def ramp_time_ms(ts: pd.DataFrame, shift_ms: float, level_rps: float) -> float:
    """Time after ``shift_ms`` until the 100 µs-binned throughput first reaches ``level_rps``;
    the phase length (25 ms) if it never does (censored)."""
    b = binned(ts, BIN_MS)
    seg = b[(b["t_ms"] > shift_ms) & (b["t_ms"] <= shift_ms + PHASE_MS + 1e-9)]
    hit = seg[seg["throughput_rps"] >= level_rps]
    return float(hit["t_ms"].iloc[0] - shift_ms) if len(hit) else PHASE_MS


def claim_slow_ramp(ts: pd.DataFrame) -> Claim:
    level = RAMP_LEVEL * CAPACITY_RPS
    times: dict[str, dict[str, float]] = {}
    pool_after: dict[str, float] = {}
    for v in (BASE, FIX):
        sel = ts[ts["variant"] == v]
        per = {shift: [ramp_time_ms(g, shift, level) for _, g in sel.groupby("seed")] for shift in SHIFTS_MS}
        times[v] = {f"{s:g}ms": float(np.mean(x)) for s, x in per.items()}
        w = sel[(sel["t_ms"] > SHIFTS_MS[0]) & (sel["t_ms"] <= SHIFTS_MS[0] + 5)]
        pool_after[v] = float(w["credit_pool"].mean())
    base_t = times[BASE][f"{SHIFTS_MS[0]:g}ms"]
    fix_t = times[FIX][f"{SHIFTS_MS[0]:g}ms"]
    # A baseline that never reaches the level within the phase (censored) is slower than a fix that does.
    base_censored = base_t >= PHASE_MS
    holds = bool(fix_t < PHASE_MS and (base_censored or base_t > 2 * fix_t))
    note = ("the baseline never reaches the level within the 25 ms phase: its pool does not ramp up at all but "
            "stays in the collapse cycle (see fix-throughput-improvement's note), a stronger form of the "
            "study's slow ramp") if base_censored else ""
    cause = {}
    if fix_t >= PHASE_MS:
        # The fix never reaches the level either: what it did in the phase, from this run.
        ph = binned(ts[ts["variant"] == FIX], BIN_MS)
        ph = ph[(ph["t_ms"] > SHIFTS_MS[0]) & (ph["t_ms"] <= SHIFTS_MS[0] + PHASE_MS)]
        peak = float(ph["throughput_rps"].max()) / CAPACITY_RPS
        mean = float(ph["throughput_rps"].mean()) / CAPACITY_RPS
        cores = float(ph["cores_allocated"].mean())
        pool = float(ph["credit_pool"].mean())
        issued = float(ph["credits_issued"].mean())
        # A credit admits one request per round trip (RTT + mean service).
        bound = issued / ((RTT_US + SERVICE_US) * 1e-6) / CAPACITY_RPS
        by_cores = cores / MAX_CORES
        tighter = ("the allocated cores (load 1.2 needs all 32)" if by_cores <= bound else
                   "admission (the drop-gated ramp, core_fix_drop_gate = 0.05, adds credits only in periods "
                   "whose AQM drops reach 5 % of the pool)")
        text = (f"the fix does not reach {RAMP_LEVEL:.0%} of capacity in the 1.2 phase either: its 100 µs "
                f"throughput peaks at {peak:.0%} of capacity (mean {mean:.0%}) with {cores:.1f} cores allocated "
                f"(at most {by_cores:.0%} of capacity), a mean pool of {pool:.0f} and {issued:.0f} issued credits "
                f"(a credit admits one request per round trip of {RTT_US:g} µs RTT + {SERVICE_US:g} µs service: "
                f"at most {bound:.0%} of capacity); the tighter limit is {tighter}; {SWITCH}")
        cause = {"cause": text}
    return Claim(
        id="baseline-slow-ramp",
        claim="After the 0.2 → 1.2 shift at 25 ms the baseline's credit pool and throughput ramp up slowly; "
              "the fix ramps up much faster (study Fig. 1, top)",
        paper=None, measured=_r(base_t, 3), holds=holds,
        extra={"unit": "ms",
               "measure": f"time after the shift until the 100 µs throughput first reaches {RAMP_LEVEL:.0%} of "
                          f"capacity ({level / 1e6:g} M req/s), mean over seeds; {PHASE_MS:g} = never within the "
                          f"phase (censored); holds if the fix reaches it and the baseline takes more than "
                          f"twice as long or never does",
               "fix_ms": _r(fix_t, 3), "baseline_censored": base_censored, **({"note": note} if note else {}), **cause,
               "by_variant_and_shift": times,
               "credit_pool_mean_25_30ms": {k: _r(v, 1) for k, v in pool_after.items()}},
    )


def claim_burst_dropped(ts: pd.DataFrame) -> Claim:
    """Bottom panel: much of the burst after the shift is dropped and the baseline's cores park."""
    out = {}
    for v in (BASE, FIX):
        sel = ts[(ts["variant"] == v) & (ts["t_ms"] > SHIFTS_MS[0]) & (ts["t_ms"] <= SHIFTS_MS[0] + 1.0)]
        out[v] = {"drop_fraction": float(sel["drops"].sum() / max(sel["arrivals"].sum(), 1)),
                  "cores_allocated_mean": float(sel["cores_allocated"].mean())}
    frac = out[BASE]["drop_fraction"]
    return Claim(
        id="burst-dropped-cores-park",
        claim="In the baseline much of the burst after the 25 ms shift is dropped and cores stay parked "
              "although the load rose to 1.2 (study Fig. 1, bottom)",
        paper=None, measured=_r(frac), holds=bool(frac > 0.25 and out[BASE]["cores_allocated_mean"] < 16),
        extra={"unit": "fraction",
               "measure": "drops / arrivals in the first 1 ms after the shift (baseline; drops = AQM + client "
                          "timeouts), all seeds; holds if > 0.25 with fewer than half the cores allocated",
               "by_variant": {k: {kk: _r(vv) for kk, vv in d.items()} for k, d in out.items()}},
    )


def claim_latency(s: Seeds) -> Claim:
    m, ci = s.ratio(None, "latency_us.p99", FIX, BASE)
    mean_ratio = float((s.values(FIX, None, "latency_us.mean") / s.values(BASE, None, "latency_us.mean")).mean())
    return Claim(
        id="similar-latency",
        claim="The fix keeps latency at levels similar to the baseline's (study §3)",
        paper=None, measured=_r(m), holds=bool(2 / 3 <= m <= 1.5),
        extra={"unit": "×", "ci95": _r(ci),
               "measure": "p99 end-to-end latency of completed requests, fix / baseline, mean over seeds; "
                          "holds if within [2/3, 1.5]",
               "mean_latency_ratio": _r(mean_ratio),
               "p99_us": {v: _r(s.mean(v, None, "latency_us.p99"), 2) for v in (BASE, FIX)},
               "note": "latency of completed requests only: the requests a variant drops (AQM or client "
                       "timeout, see drop_rate in results.parquet) are not in it",
               **({} if 2 / 3 <= m <= 1.5 else
                  {"cause": gated_fix_churn(s, FIX, None, max_cores=32, wake_us=5, target_us=10, drop_us=20)})},
    )


# ---------------------------------------------------------------------------------------------
# figures


def _seed1(ts: pd.DataFrame, variant: str) -> pd.DataFrame:
    sel = ts[ts["variant"] == variant]
    return sel[sel["seed"] == sel["seed"].min()]


def plot_timeseries(ctx: Context, ts: pd.DataFrame) -> None:
    plt = setup_plt()
    fig, axes = plt.subplots(4, 1, figsize=(12, 11), sharex=True, constrained_layout=True)
    for v in (BASE, FIX):
        b = binned(_seed1(ts, v), BIN_MS)
        kw = dict(color=COLORS[v], lw=1, label=ctx.spec.label(v))
        axes[0].plot(b["t_ms"], b["throughput_rps"] / 1e6, **kw)
        axes[1].plot(b["t_ms"], b["credit_pool"], **kw)
        axes[2].plot(b["t_ms"], b["cores_allocated"], **kw)
        axes[3].plot(b["t_ms"], b["queue_len"], **kw)
    b = binned(_seed1(ts, BASE), BIN_MS)
    axes[0].plot(b["t_ms"], b["offered_rps"] / 1e6, color="gray", ls="--", lw=1, label="offered")
    axes[0].axhline(CAPACITY_RPS / 1e6, color="black", lw=0.6, ls=":")
    axes[0].set_ylabel("throughput (M req/s)")
    axes[1].set_ylabel("credit pool C_total")
    axes[1].set_yscale("log")
    axes[2].set_ylabel("LC cores allocated")
    axes[2].set_ylim(0, 33)
    axes[3].set_ylabel("tasks queued at the server")
    axes[3].set_xlabel("time (ms)")
    for ax in axes:
        for s in (25, 50, 75):
            ax.axvline(s, color="red", lw=0.6, alpha=0.5)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8, loc="upper left")
    fig.suptitle("Load shift 0.2 → 1.2 → 0.5 → 1.2 (red lines), 32 cores, bimodal 1 µs, RTT 30 µs, Breakwater "
                 "target 10 µs, α = 1, β = 0.08; 100 µs bins, seed "
                 f"{int(ts['seed'].min())}", fontsize=9)
    ctx.save_figure(fig, "loadshift_timeseries.png")


def plot_closeup(ctx: Context, ts: pd.DataFrame, lo: float = 24.9, hi: float = 25.6) -> None:
    plt = setup_plt()
    fig, axes = plt.subplots(4, 1, figsize=(12, 10), sharex=True, constrained_layout=True)
    for v in (BASE, FIX):
        s = _seed1(ts, v)
        s = s[(s["t_ms"] >= lo) & (s["t_ms"] <= hi)]
        t = (s["t_ms"] - SHIFTS_MS[0]) * 1000
        kw = dict(color=COLORS[v], lw=1, label=ctx.spec.label(v), where="post")
        axes[0].step(t, s["queue_len"], **kw)
        axes[1].step(t, s["cores_allocated"], **kw)
        axes[2].step(t, s["drops"], **kw)
        axes[3].step(t, s["credit_pool"], **kw)
    axes[0].set_ylabel("tasks queued\nat the server")
    axes[1].set_ylabel("LC cores allocated")
    axes[1].set_ylim(0, 33)
    axes[2].set_ylabel("drops per sample\n(AQM + client)")
    axes[3].set_ylabel("credit pool")
    axes[3].set_yscale("log")
    axes[3].set_xlabel("time since the 0.2 → 1.2 shift at 25 ms (µs)")
    for ax in axes:
        ax.axvline(0, color="red", lw=1)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8, loc="upper right")
    interval = float(ts["t_ms"].diff().dropna().median() * 1000)
    fig.suptitle(f"Close-up of the 25 ms load shift (samples every {interval:g} µs, seed {int(ts['seed'].min())})",
                 fontsize=9)
    ctx.save_figure(fig, "loadshift_closeup.png")
