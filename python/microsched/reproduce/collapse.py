"""``microsched reproduce collapse``: Fig. 2 of the simulation study "core allocation vs overload
control" (``shared/papers/core-allocation-vs-overload-control.md`` §2, "Throughput Collapse").

Load 1.0 (32 M req/s) on 32 cores with a Caladan-style allocator, Breakwater with a credit pool
that starts at 40 (floor: Breakwater's max_cores, 32), network RTT 5, 10, 25 and 30 µs
(``experiments/collapse/``). Variants: the baseline; the study's fix (``core_fix``: proportional
growth and the minimum pool ⌈32·(RTT + 10 µs)/10 µs⌉); the baseline on a static 32-core
allocation (contrast: the collapse is an interaction with the core allocator).

Claims are on the measured window (20–40 ms, after a 20 ms warm-up; ``--quick``: 20–30 ms).
Figures: ``collapse_timeseries.png`` (cores, throughput, queued tasks and pool over the whole run
and a 300 µs close-up of the cycle, baseline vs fix at RTT 30 µs) and ``collapse_vs_rtt.png``
(throughput and allocated cores against the RTT, per variant). The time series are re-run for
seed 1 at the longest RTT with 1 µs samples (``timeseries.parquet``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from .claims import Claim, rounded as _r
from .framework import Context, register
from .loadshift import binned, run_timeseries, setup_plt
from .search_cause import gated_fix_churn
from .stats import Seeds

RTT = "network.rtt_us"
BASE, FIX, STATIC = "baseline", "fix", "static"
CAPACITY_RPS = 32e6
COLLAPSE_RTTS = (25.0, 30.0)    # the study: "a network RTT of 25 µs is enough for this problem to manifest"
SHORT_RTTS = (5.0, 10.0)        # contrast
COLLAPSED_BELOW = 0.25          # fraction of capacity: "collapsed" (the study shows ~1 of 32 cores active)
HEALTHY_ABOVE = 0.5             # fraction of capacity: "no collapse"
TS_SAMPLE_US = 1.0
COLORS = {BASE: "tab:red", FIX: "tab:blue", STATIC: "tab:gray"}
MARKERS = {BASE: "o", FIX: "s", STATIC: "^"}



@register("collapse", paper="Core allocation vs overload control (simulation study)", figure="Fig. 2",
          description="Throughput collapse at load 1.0 with a credit pool of 40 and RTT 25–30 µs "
                      "(Breakwater + Caladan-style allocation, 32 cores); its absence at short RTTs and with "
                      "the study's fix (minimum pool)",
          spec="collapse/sweep.toml")
def analyze(ctx: Context) -> list[Claim]:
    ctx.require_variants(BASE, FIX)
    df = ctx.results
    df = df.assign(frac=df["throughput_rps"].astype(float) / CAPACITY_RPS)
    seeds = Seeds(df, key=RTT)
    rtts = sorted(set(df[RTT].astype(float)))
    rtt_ts = max(rtts)
    points = [p for p in ctx.spec.points()
              if p.params.get("variant") in (BASE, FIX) and float(p.params[RTT]) == rtt_ts
              and p.seed == min(ctx.spec.seeds)]
    ts = run_timeseries(points, extra_overrides=[f"metrics.sample_interval_us={TS_SAMPLE_US:g}"])
    ts.to_parquet(ctx.out / "timeseries.parquet", index=False)
    plot_timeseries(ctx, ts, rtt_ts)
    plot_vs_rtt(ctx, df)

    claims: list[Claim] = []
    for rtt in COLLAPSE_RTTS:
        if rtt in rtts:
            claims.append(claim_collapse(seeds, rtt))
            claims.append(claim_fix(seeds, rtt))
    short = [r for r in SHORT_RTTS if r in rtts]
    if short:
        claims.append(claim_short_rtt(seeds, short))
    if STATIC in set(df["variant"]) and rtt_ts in COLLAPSE_RTTS:
        claims.append(claim_static(seeds, rtt_ts))
    if rtt_ts in COLLAPSE_RTTS:
        claims.append(claim_cycle(ts, rtt_ts))
    return claims


def claim_collapse(s: Seeds, rtt: float) -> Claim:
    frac, ci = s.stat(BASE, rtt, "frac")
    cores, _ = s.stat(BASE, rtt, "cores.allocated_mean")
    pool, _ = s.stat(BASE, rtt, "credits.pool_mean")
    return Claim(
        id=f"collapse@rtt{rtt:g}",
        claim=f"With a credit pool of 40 and an RTT of {rtt:g} µs, throughput at load 1.0 collapses: most cores "
              f"stay parked (study Fig. 2: a single core of 32 remains active)",
        paper=_r(1 / 32), measured=_r(frac), holds=bool(frac < COLLAPSED_BELOW and cores < 32 / 4),
        extra={"unit": "of capacity", "ci95": _r(ci),
               "measure": f"baseline throughput / capacity (32 M req/s) over the measured window, mean over "
                          f"seeds; paper = 1/32 (one core active); holds if < {COLLAPSED_BELOW} with fewer than "
                          f"8 cores allocated on average",
               "cores_allocated_mean": _r(cores, 3), "credit_pool_mean": _r(pool, 1)},
    )


def claim_fix(s: Seeds, rtt: float) -> Claim:
    frac, ci = s.stat(FIX, rtt, "frac")
    base, _ = s.stat(BASE, rtt, "frac")
    cores, _ = s.stat(FIX, rtt, "cores.allocated_mean")
    min_pool = math.ceil(32 * (rtt + 10) / 10)
    return Claim(
        id=f"fix-no-collapse@rtt{rtt:g}",
        claim=f"With the study's fix (minimum pool depending on max cores and RTT: {min_pool} here) there is no "
              f"collapse at RTT {rtt:g} µs (study §3)",
        paper=None, measured=_r(frac), holds=bool(frac > HEALTHY_ABOVE),
        extra={"unit": "of capacity", "ci95": _r(ci),
               "measure": f"fix throughput / capacity over the measured window, mean over seeds; holds if > "
                          f"{HEALTHY_ABOVE}", "baseline": _r(base), "cores_allocated_mean": _r(cores, 3),
               "min_pool": min_pool,
               **({} if frac > HEALTHY_ABOVE else
                  {"cause": gated_fix_churn(s, FIX, rtt, max_cores=32, wake_us=5, target_us=10, drop_us=20)})},
    )


def claim_short_rtt(s: Seeds, rtts: list[float]) -> Claim:
    by = {f"{r:g}": s.stat(BASE, r, "frac")[0] for r in rtts}
    worst = min(by.values())
    return Claim(
        id="short-rtt-no-collapse",
        claim=f"With the same pool of 40 but a short RTT ({', '.join(by)} µs) the system does not collapse: "
              f"the collapse needs an RTT long against the service time (study: 25 µs is enough)",
        paper=None, measured=_r(worst), holds=bool(worst > HEALTHY_ABOVE),
        extra={"unit": "of capacity", "measure": f"the lowest baseline throughput / capacity over these RTTs, "
                                                 f"mean over seeds; holds if > {HEALTHY_ABOVE}",
               "by_rtt_us": {k: _r(v) for k, v in by.items()}},
    )


def claim_static(s: Seeds, rtt: float) -> Claim:
    st, _ = s.stat(STATIC, rtt, "frac")
    base, _ = s.stat(BASE, rtt, "frac")
    ratio = st / base if base > 0 else math.inf
    return Claim(
        id=f"collapse-needs-core-allocation@rtt{rtt:g}",
        claim="The collapse is an interaction with the core allocator: the same pool and RTT on a static "
              "32-core allocation does not collapse (study §2: the small pool makes the allocator park cores)",
        paper=None, measured=_r(ratio, 3), holds=bool(ratio > 4),
        extra={"unit": "×", "measure": "throughput(static 32 cores) / throughput(baseline), same pool and RTT, "
                                       "means over seeds; holds if > 4",
               "static_fraction": _r(st), "baseline_fraction": _r(base),
               "note": "with static cores the pool grows by α = 1 per RTT from 40 (no collapse cycle), so its "
                       "throughput is still ramping in the measured window"},
    )


def cycle_period_us(ts: pd.DataFrame, max_us: float, col: str = "queue_len") -> tuple[float, float]:
    """(period in µs, autocorrelation there) of ``col``: the highest autocorrelation after its
    first zero crossing, up to ``max_us``; (NaN, NaN) without a crossing (no cycle)."""
    x = ts[col].to_numpy(float)
    dt_us = float(np.median(np.diff(ts["t_ms"].to_numpy(float)))) * 1000
    x = x - x.mean()
    if not np.any(x):
        return math.nan, math.nan
    n = len(x)
    f = np.fft.rfft(x, 2 * n)
    ac = np.fft.irfft(f * np.conj(f))[:n]
    ac /= ac[0]
    lags = np.arange(n) * dt_us
    neg = np.nonzero(ac < 0)[0]
    if not len(neg):
        return math.nan, math.nan
    m = (np.arange(n) > neg[0]) & (lags <= max_us)
    if not m.any():
        return math.nan, math.nan
    i = np.nonzero(m)[0][np.argmax(ac[m])]
    return float(lags[i]), float(ac[i])


def claim_cycle(ts: pd.DataFrame, rtt: float) -> Claim:
    s = ts[(ts["variant"] == BASE)]
    s = s[s["t_ms"] > s["t_ms"].max() / 2]
    period, peak = cycle_period_us(s, 4 * rtt)
    return Claim(
        id=f"collapse-cycle@rtt{rtt:g}",
        claim="The collapsed system cycles: a burst arrives, waits for cores, is served, and the cores park "
              "during the idle round trip before the next burst (study Fig. 2)",
        paper=_r(rtt), measured=_r(period, 1), holds=bool(peak > 0 and rtt <= period <= 2 * rtt),
        extra={"unit": "µs", "autocorrelation_at_period": _r(peak, 3),
               "measure": "period of the queued-task count in the baseline: the lag of the highest "
                          "autocorrelation after its first zero crossing, up to 4 RTT (second half of the run, "
                          "1 µs samples, seed 1); paper = the RTT (one burst per round trip, plus the burst's "
                          "own time at the server); holds if a positive peak lies within [RTT, 2 RTT]"},
    )


# ---------------------------------------------------------------------------------------------
# figures


def plot_timeseries(ctx: Context, ts: pd.DataFrame, rtt: float) -> None:
    plt = setup_plt()
    fig, axes = plt.subplots(4, 2, figsize=(15, 10), sharex="col", constrained_layout=True,
                             gridspec_kw={"width_ratios": [2, 1]})
    t_end = float(ts["t_ms"].max())
    lo = t_end - 0.3
    for v in (BASE, FIX):
        s = ts[ts["variant"] == v]
        b = binned(s, 0.1)
        kw = dict(color=COLORS[v], lw=1, label=ctx.spec.label(v))
        axes[0, 0].plot(b["t_ms"], b["cores_allocated"], **kw)
        axes[1, 0].plot(b["t_ms"], b["throughput_rps"] / 1e6, **kw)
        axes[2, 0].plot(b["t_ms"], b["queue_len"], **kw)
        axes[3, 0].plot(b["t_ms"], b["credit_pool"], **kw)
        z = s[s["t_ms"] > lo]
        t = (z["t_ms"] - lo) * 1000
        kz = dict(color=COLORS[v], lw=0.9, where="post")
        axes[0, 1].step(t, z["cores_allocated"], **kz)
        axes[1, 1].step(t, z["cores_busy"], **kz)
        axes[2, 1].step(t, z["queue_len"], **kz)
        axes[3, 1].step(t, z["credits_issued"], **kz)
    axes[0, 0].set_ylabel("LC cores allocated")
    axes[1, 0].set_ylabel("throughput (M req/s)")
    axes[1, 0].axhline(CAPACITY_RPS / 1e6, color="black", lw=0.6, ls=":")
    axes[2, 0].set_ylabel("tasks queued at the server")
    axes[3, 0].set_ylabel("credit pool C_total")
    axes[3, 0].set_yscale("log")
    axes[3, 0].set_xlabel("time (ms); 100 µs bins; gray band: warm-up")
    axes[0, 1].set_ylabel("cores allocated")
    axes[1, 1].set_ylabel("cores busy")
    axes[2, 1].set_ylabel("tasks queued")
    axes[3, 1].set_ylabel("credits issued")
    axes[3, 1].set_xlabel(f"µs from {lo:g} ms (1 µs samples)")
    warm = _warmup_ms(ctx)
    for ax in axes[:, 0]:
        ax.axvspan(0, warm, color="gray", alpha=0.08)
        ax.grid(alpha=0.3)
    for ax in axes[:, 1]:
        ax.grid(alpha=0.3)
        for k in range(int(300 // rtt) + 1):
            ax.axvline(k * rtt, color="green", lw=0.4, alpha=0.4)
    axes[0, 0].legend(fontsize=8, loc="center right")
    axes[0, 1].set_title(f"close-up, last 300 µs (green: multiples of the RTT {rtt:g} µs)", fontsize=9)
    fig.suptitle(f"Throughput collapse at load 1.0: pool starts at 40, RTT {rtt:g} µs, 32 cores, bimodal 1 µs, "
                 f"Breakwater target 10 µs; seed {int(ts['seed'].min())}", fontsize=10)
    ctx.save_figure(fig, "collapse_timeseries.png")


def _warmup_ms(ctx: Context) -> float:
    for o in ctx.spec.overrides:
        k, _, v = o.partition("=")
        if k.strip() == "warmup_ms":
            return float(v)
    from ..api import validate

    return float(validate(str(ctx.spec.base))["warmup_ms"])


def plot_vs_rtt(ctx: Context, df: pd.DataFrame) -> None:
    plt = setup_plt()
    agg = ctx.aggregate
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.6), constrained_layout=True)
    for v in [x for x in (BASE, FIX, STATIC) if x in set(agg["variant"])]:
        c = agg[agg["variant"] == v].sort_values(RTT)
        err = c["throughput_rps.ci95"].to_numpy(float) / 1e6
        err = None if np.all(~np.isfinite(err)) else np.nan_to_num(err)
        kw = dict(color=COLORS[v], marker=MARKERS[v], lw=1.4, ms=6, capsize=3, label=ctx.spec.label(v))
        ax1.errorbar(c[RTT], c["throughput_rps"] / 1e6, yerr=err, **kw)
        e2 = c["cores.allocated_mean.ci95"].to_numpy(float)
        e2 = None if np.all(~np.isfinite(e2)) else np.nan_to_num(e2)
        ax2.errorbar(c[RTT], c["cores.allocated_mean"], yerr=e2, **kw)
    ax1.axhline(CAPACITY_RPS / 1e6, color="black", lw=0.6, ls=":", label="capacity (32 M req/s)")
    ax1.set_ylabel("throughput (M req/s), measured window")
    ax2.set_ylabel("LC cores allocated (mean)")
    for ax in (ax1, ax2):
        ax.set_xlabel("network RTT (µs)")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    ax1.legend(fontsize=8, loc="lower left")
    fig.suptitle(f"Load 1.0, credit pool starting at 40: throughput vs RTT; mean of {len(ctx.spec.seeds)} seed(s), "
                 "bars: 95 % CI", fontsize=9)
    ctx.save_figure(fig, "collapse_vs_rtt.png")
