"""``microsched reproduce collapse``: Fig. 2 of the simulation study "core allocation vs overload
control" (``shared/papers/core-allocation-vs-overload-control.md`` §2, "Throughput Collapse").

Load 1.0 (32 M req/s) on 32 cores with a Caladan-style allocator, Breakwater with a credit pool
that starts at 40 (floor: Breakwater's max_cores, 32), network RTT 5, 10, 25 and 30 µs
(``experiments/collapse/``). Variants: the baseline; the study's fix (``core_fix``: proportional
growth and the minimum pool ⌈32·(RTT + target)/target⌉); the baseline on a static 32-core
allocation (contrast: the collapse is an interaction with the core allocator).

The module reads as the study's claims (:data:`CLAIMS`, with the paper's numbers: 1 core of 32
active, a pool of 40 that does not grow, bursts that always see high delay, a cycle per round
trip, load 1.0 using all 32 cores without the collapse), the functions that measure them on
:class:`Data` (:func:`build_data`: the sweep's rows per RTT and seed, plus one row per seed from
the baseline's 1 µs time series at the longest RTT, each read through
:class:`~microsched.reproduce.stats.Seeds`) and :func:`analyze`. Claims are on the measured window (after the
warm-up). Figures: ``collapse_timeseries.png`` (cores, throughput, queued tasks and pool over the
whole run and a 300 µs close-up of the cycle, baseline vs fix at the longest RTT) and
``collapse_vs_rtt.png`` (throughput and allocated cores against the RTT, per variant). The time
series (``timeseries.parquet``) are re-runs of the sweep's points with 1 µs samples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pandas as pd

from .claims import (BOUND, FRACTION, ORDER, VALUE, Cause, ClaimSpec, Measured, judge_all, rounded as _r)
from .framework import Context, ExtraRuns, Figure, register
from .loadshift import binned, run_timeseries, scenario_params, setup_plt, timeseries_tasks
from .runner import mean_ci95
from .spec import Point
from .stats import Seeds
from ..sweep.worker import series_of

RTT = "network.rtt_us"
BASE, FIX, STATIC = "baseline", "fix", "static"
COLLAPSE_RTTS = (25.0, 30.0)    # the study: "a network RTT of 25 µs is enough for this problem to manifest"
FIG2_RTT = 30.0                 # Fig. 2's RTT
SHORT_RTTS = (5.0, 10.0)        # contrast: an RTT short against the service time
ONE_CORE = 1.5                  # a 1 µs sample "has one core" below this (samples are time averages)
TS_SAMPLE_US = 1.0
COLORS = {BASE: "tab:red", FIX: "tab:blue", STATIC: "tab:gray"}
MARKERS = {BASE: "o", FIX: "s", STATIC: "^"}


# ---------------------------------------------------------------------------------------------
# the data


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


def cycle_table(ts: pd.DataFrame, rtt_us: float, target_us: float, warmup_ms: float) -> pd.DataFrame:
    """One row per seed of a variant's 1 µs time series over the measured window: the cycle's
    period and autocorrelation (:func:`cycle_period_us`, up to 4 RTT), the share of round-trip
    periods whose longest sampled queueing delay reaches the target, the share of samples with
    about one core allocated, and the cores' and pool's ranges."""
    rows = []
    for (v, seed), g in ts.groupby(["variant", "seed"]):
        w = g[g["t_ms"] > warmup_ms]
        period, ac = cycle_period_us(w, 4 * rtt_us)
        k = np.floor((w["t_ms"].to_numpy(float) - warmup_ms) * 1000 / rtt_us).astype(int)
        per = w.assign(_k=k).groupby("_k")["oldest_delay_us"].max()
        per = per.iloc[:-1] if len(per) > 1 else per  # the last period may be cut by the run's end
        rows.append({"variant": v, "seed": seed, "rtt_us": rtt_us, "period_us": period,
                     "autocorrelation": ac if ac > 0 else math.nan,
                     "high_delay_fraction": float((per >= target_us).mean()), "periods": len(per),
                     "one_core_fraction": float((w["cores_allocated"] < ONE_CORE).mean()),
                     "cores_median": float(w["cores_allocated"].median()),
                     "cores_max": float(w["cores_allocated"].max()),
                     "busy_mean": float(w["cores_busy"].mean()),
                     "pool_min": float(w["credit_pool"].min()), "pool_max": float(w["credit_pool"].max()),
                     "delay_median": float(per.median())})
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Data:
    """What the claims are measured on, per point and per seed: ``runs``, the sweep's rows by RTT
    (with ``frac`` = throughput / capacity); ``cycles``, :func:`cycle_table` of the baseline's time
    series (one row per seed, at one RTT); ``params``, the scenario's numbers."""

    runs: Seeds
    cycles: Seeds
    params: Mapping[str, Any]

    @classmethod
    def of(cls, results: pd.DataFrame, cycles: pd.DataFrame, params: Mapping[str, Any]) -> "Data":
        """From the frames: ``results`` with ``frac``, ``cycles`` as :func:`cycle_table` makes it."""
        return cls(Seeds(results, key=RTT), Seeds(cycles), params)


def build_data(results: pd.DataFrame, ts: pd.DataFrame, scenario: Mapping[str, Any]) -> Data:
    """:class:`Data` from the sweep's rows, the time series and the validated scenario."""
    params = scenario_params(scenario)
    params["initial_pool"] = scenario["policy"]["overload"].get("initial_pool")
    params["floor"] = scenario["policy"]["overload"].get("min_pool") or params["max_cores"]
    params["alpha"] = scenario["policy"]["overload"].get("alpha")
    res = results.assign(frac=results["throughput_rps"].astype(float) / params["capacity_rps"])
    base_ts = ts[ts["variant"] == BASE]
    rtt = float(base_ts[RTT].max()) if len(base_ts) else FIG2_RTT
    cycles = cycle_table(base_ts[np.isclose(base_ts[RTT].astype(float), rtt)], rtt, params["target_us"],
                         params["warmup_ms"])
    return Data.of(res, cycles, params)


# ---------------------------------------------------------------------------------------------
# measure functions and causes


def _measured(values, missing: str, **kw) -> Measured:
    m, ci, n = mean_ci95(list(values))
    if not math.isfinite(m):
        return Measured(None, n=n, missing=missing, **kw)
    return Measured(m, ci if math.isfinite(ci) else None, n, **kw)


def _figures(data: Data, variant: str, rtt: float) -> dict[str, Any]:
    """A variant's whole-run figures at one RTT (means over seeds), as cause evidence."""
    r, p = data.runs, data.params
    tr, dur = r.mean(variant, rtt, "core_time.transition_ns"), r.mean(variant, rtt, "duration_s")
    wakes = tr / (p["alloc_delay_us"] * 1e3) / (dur * 1e3) if dur > 0 else math.nan
    return {"rtt": rtt, "frac": _r(r.mean(variant, rtt, "frac"), 3),
            "cores": _r(r.mean(variant, rtt, "cores.allocated_mean"), 2),
            "busy": _r(r.mean(variant, rtt, "cores.busy_mean"), 2),
            "pool": _r(r.mean(variant, rtt, "credits.pool_mean"), 0),
            "issued": _r(r.mean(variant, rtt, "credits.issued_mean"), 0),
            "qd99": _r(r.mean(variant, rtt, "queueing_delay_us.p99"), 1),
            "drop_rate": _r(r.mean(variant, rtt, "drop_rate"), 3),
            "aqm_drops": _r(r.mean(variant, rtt, "credits.aqm_drops"), 0),
            "client_timeouts": _r(r.mean(variant, rtt, "credits.client_timeouts"), 0),
            "wakes_per_ms": _r(wakes, 1), "target_us": p["target_us"], "drop_us": p["drop_us"],
            "max_cores": p["max_cores"], "search": str(p.get("search")), "gate": str(p.get("drop_gate"))}


def measure_fraction(variant: str, rtt: float):
    def measure(data: Data) -> Measured:
        r = data.runs
        return _measured(r.values(variant, rtt, "frac"), f"no {variant} run at RTT {rtt:g} µs",
                         evidence=_figures(data, variant, rtt),
                         extra={"by_rtt_us": {f"{x:g}": _r(r.mean(variant, x, "frac"), 4) for x in r.points()}})
    return measure


CAUSE_POINT = (
    "at RTT {rtt} µs the {variant} serves {measured} ± {ci95} of capacity with {cores} of {max_cores} cores "
    "allocated ({busy} busy, {wakes_per_ms} core wake-ups per ms), a mean pool of {pool} credits ({issued} issued) "
    "and queueing delay p99 {qd99} µs against the {target_us} µs target and the {drop_us} µs AQM threshold; it "
    "drops {drop_rate} of the requests ({aqm_drops} AQM drops, {client_timeouts} client timeouts)")


def cause_point(variant: str):
    def cause(data: Data, m: Measured) -> Cause:
        ev = {"measured": m.value, "ci95": m.ci95, "variant": variant, **m.evidence}
        text = CAUSE_POINT
        if variant == FIX:
            text += ("; the fix's ramp: work search {search}, drop gate {gate}, minimum pool {min_pool}")
            ev["min_pool"] = min_pool(data.params, ev["rtt"])
        return Cause(text, ev)
    return cause


def min_pool(params: Mapping[str, Any], rtt: float) -> int:
    """The fix's minimum pool: ⌈max_cores · (RTT + target) / target⌉ (breakwater.rs core_fix_min_pool)."""
    t = params["target_us"]
    return int(math.ceil(round(params["max_cores"] * (rtt + t) / t, 9)))


def measure_short(data: Data) -> Measured:
    r = data.runs
    rtts = [x for x in SHORT_RTTS if r.has_point(x)]
    if not rtts:
        return Measured(None, missing="no baseline run at a short RTT")
    by = {x: r.mean(BASE, x, "frac") for x in rtts}
    worst = min(by, key=lambda x: by[x])
    m = _measured(r.values(BASE, worst, "frac"), "", evidence=_figures(data, BASE, worst),
                  extra={"by_rtt_us": {f"{x:g}": _r(v, 4) for x, v in by.items()}, "worst_rtt_us": worst})
    return m


def measure_one_core(data: Data) -> Measured:
    r, c = data.runs, data.cycles
    ev = {**_figures(data, BASE, FIG2_RTT), "one_core_fraction": _r(c.mean(BASE, None, "one_core_fraction"), 3),
          "cores_median": _r(c.mean(BASE, None, "cores_median"), 2),
          "cores_max": _r(c.mean(BASE, None, "cores_max"), 2), "sample_us": TS_SAMPLE_US}
    return _measured(r.values(BASE, FIG2_RTT, "cores.allocated_mean"), f"no baseline run at RTT {FIG2_RTT:g} µs",
                     evidence=ev)


CAUSE_ONE_CORE = (
    "the baseline averages {measured} ± {ci95} allocated cores at RTT {rtt} µs ({busy} busy): the median "
    "{sample_us} µs sample has {cores_median} cores and {one_core_fraction} of the samples have about one, while a "
    "burst is served the allocator grants up to {cores_max}; it serves {frac} of capacity")


def measure_pool(data: Data) -> Measured:
    r, c, p = data.runs, data.cycles, data.params
    ev = {**_figures(data, BASE, FIG2_RTT), "start": p["initial_pool"], "floor": p["floor"], "alpha": p["alpha"],
          "pool_min": _r(c.mean(BASE, None, "pool_min"), 0), "pool_max": _r(c.mean(BASE, None, "pool_max"), 0),
          "low_delay_fraction": _r(1 - c.mean(BASE, None, "high_delay_fraction"), 3),
          "periods": _r(c.mean(BASE, None, "periods"), 0)}
    return _measured(r.values(BASE, FIG2_RTT, "credits.pool_mean"), f"no baseline run at RTT {FIG2_RTT:g} µs",
                     evidence=ev)


CAUSE_POOL = (
    "the baseline's pool averages {measured} ± {ci95} credits at RTT {rtt} µs, between {pool_min} and {pool_max} "
    "(it starts at {start}, floor {floor}): {low_delay_fraction} of the {periods} round-trip periods see no sampled "
    "queueing delay at the {target_us} µs target, and each such period adds α = {alpha} credits")


def measure_high_delay(data: Data) -> Measured:
    c = data.cycles
    ev = {**_figures(data, BASE, FIG2_RTT), "delay_median": _r(c.mean(BASE, None, "delay_median"), 1),
          "periods": _r(c.mean(BASE, None, "periods"), 0)}
    return _measured(c.values(BASE, None, "high_delay_fraction"), "no baseline time series", evidence=ev)


CAUSE_HIGH_DELAY = (
    "{measured} ± {ci95} of the {periods} round-trip periods at RTT {rtt} µs see a sampled queueing delay at the "
    "{target_us} µs target (median of the periods' longest: {delay_median} µs); the baseline has {cores} cores "
    "allocated on average")


def measure_cycle(data: Data) -> Measured:
    c = data.cycles
    ac = c.values(BASE, None, "autocorrelation")
    cycling = ac.notna()  # the seeds whose queue cycles
    ev = {"rtt": FIG2_RTT, "autocorrelation": _r(float(ac[cycling].mean()) if cycling.any() else None, 3),
          "cycling": int(cycling.sum()), "seeds": len(ac), "busy": _r(c.mean(BASE, None, "busy_mean"), 2)}
    return _measured(c.values(BASE, None, "period_us")[cycling], "the baseline's queue shows no cycle (no positive "
                     "autocorrelation after its first zero crossing within 4 RTT)", evidence=ev,
                     extra={"autocorrelation_at_period": ev["autocorrelation"], "seeds_cycling": ev["cycling"]})


CAUSE_CYCLE = (
    "the queued-task count repeats every {measured} ± {ci95} µs (autocorrelation {autocorrelation}; {cycling} of "
    "{seeds} seeds cycle) against an RTT of {rtt} µs, with {busy} cores busy on average")


def measure_static(data: Data) -> Measured:
    r = data.runs
    st, b = r.values(STATIC, FIG2_RTT, "frac"), r.values(BASE, FIG2_RTT, "frac")
    both = pd.concat([st, b], axis=1, join="inner").dropna()
    ev = {"static": _r(float(st.mean()), 3), "base": _r(float(b.mean()), 3), "rtt": FIG2_RTT,
          "static_pool": _r(r.mean(STATIC, FIG2_RTT, "credits.pool_mean"), 0),
          "base_pool": _r(r.mean(BASE, FIG2_RTT, "credits.pool_mean"), 0)}
    return _measured([a - c for a, c in both.itertuples(index=False)], "no static or baseline run at the RTT",
                     evidence=ev)


CAUSE_STATIC = (
    "at RTT {rtt} µs the static allocation serves {static} of capacity (mean pool {static_pool}) and the baseline "
    "{base} (mean pool {base_pool}): a difference of {measured} ± {ci95}")


_FIG2 = "Fig. 2, §2"
_QUOTE_ONE = "A credit pool size of 40 and an RTT of 30µs leave the system idle that only a single core remains active"


def _collapse_claim(rtt: float) -> ClaimSpec:
    quote = _QUOTE_ONE if rtt == FIG2_RTT else "a network RTT of 25µs is enough for this problem to manifest"
    return ClaimSpec(
        id=f"collapse@rtt{rtt:g}", kind=FRACTION, paper=1 / 32, paper_ref=_FIG2, unit="of capacity",
        claim=f"With a credit pool of 40 and an RTT of {rtt:g} µs, throughput at load 1.0 collapses to what a "
              "single core of 32 serves",
        quote=quote,
        how="baseline throughput / capacity (32 × the mean service rate) over the measured window, mean over "
            "seeds; the paper's number: one core of 32 active = 1/32 of capacity",
        measure=measure_fraction(BASE, rtt), cause=cause_point(BASE), group="Fig. 2")


def _fix_claim(rtt: float) -> ClaimSpec:
    return ClaimSpec(
        id=f"fix-no-collapse@rtt{rtt:g}", kind=FRACTION, paper=1.0, paper_ref="Fig. 2, §3", unit="of capacity",
        claim=f"With the study's fix (a minimum pool depending on max cores and RTT) there is no collapse at RTT "
              f"{rtt:g} µs: load 1.0 uses the 32 cores' capacity",
        quote="1.0 load should use all 32 cores ... to avoid the throughput collapse problem, we set a minimum "
              "credit pool size that depends on the maximum number of available cores and the RTT",
        how="fix throughput / capacity over the measured window, mean over seeds",
        measure=measure_fraction(FIX, rtt), cause=cause_point(FIX), group="Fig. 2")


CLAIMS: list[ClaimSpec] = [
    _collapse_claim(25.0),
    _collapse_claim(30.0),
    ClaimSpec(
        id="collapse-one-core@rtt30", kind=VALUE, paper=1, paper_ref=_FIG2, unit="cores",
        claim="In the collapse (pool 40, RTT 30 µs, load 1.0) a single core of 32 remains active",
        quote=_QUOTE_ONE,
        how="the baseline's mean allocated cores over the measured window, mean over seeds",
        measure=measure_one_core, cause=CAUSE_ONE_CORE, group="Fig. 2"),
    ClaimSpec(
        id="collapse-pool-stays@rtt30", kind=VALUE, paper=40, paper_ref=_FIG2, unit="credits",
        claim="In the collapse the credit pool stays at its low level of 40: it cannot grow",
        quote="Incoming bursts always observe high latency, preventing the credit pool size from growing",
        how="the baseline's mean credit pool over the measured window, mean over seeds",
        measure=measure_pool, cause=CAUSE_POOL, group="Fig. 2"),
    ClaimSpec(
        id="collapse-bursts-high-delay@rtt30", kind=FRACTION, paper=1.0, paper_ref=_FIG2, unit="of periods",
        claim="In the collapse every incoming burst observes a high delay",
        quote="Incoming bursts always observe high latency",
        how="the share of round-trip periods of the measured window (1 µs samples, every seed) whose longest "
            "sampled queueing delay (oldest queued request) reaches Breakwater's target, mean over seeds; "
            "always = 1",
        measure=measure_high_delay, cause=CAUSE_HIGH_DELAY, group="Fig. 2"),
    ClaimSpec(
        id="collapse-cycle@rtt30", kind=BOUND, side="lower", paper=FIG2_RTT, paper_ref=_FIG2, unit="µs",
        claim="The collapsed system cycles once per round trip: a burst arrives, waits for cores, is served, and "
              "the cores park during the idle round trip before the next burst",
        quote="the system is left idle for long enough that most cores to park. Thus, when a new burst of "
              "requests arrive, the same behavior repeats",
        how="period of the baseline's queued-task count: the lag of the highest autocorrelation after its first "
            "zero crossing, up to 4 RTT (measured window, 1 µs samples), mean over the seeds that cycle; the paper "
            "gives no period: a cycle (a positive autocorrelation peak) at least one round trip long (the "
            "responses travel back, the system idles, the next burst comes); not measured = no cycle",
        measure=measure_cycle, cause=CAUSE_CYCLE, group="Fig. 2"),
    _fix_claim(25.0),
    _fix_claim(30.0),
    ClaimSpec(
        id="short-rtt-no-collapse", kind=FRACTION, paper=1.0, paper_ref="§2", unit="of capacity",
        claim="With the same pool of 40 but an RTT short against the service time (5, 10 µs) there is no collapse: "
              "load 1.0 uses the 32 cores' capacity",
        quote="If the network RTT is large enough compared to request service time, the system is left idle ... "
              "1.0 load should use all 32 cores",
        how="the baseline's throughput / capacity at the short RTT where it is lowest, mean over seeds",
        measure=measure_short, cause=cause_point(BASE), group="Fig. 2"),
    ClaimSpec(
        id="collapse-needs-core-allocation@rtt30", kind=ORDER, side="above", paper_ref="§2",
        unit="of capacity",
        claim="The collapse is an interaction with the core allocator: the same pool and RTT on a static 32-core "
              "allocation serve more",
        quote="A small credit pool size leads to low load, as very little work is admitted to the server, leading "
              "the core allocator to park most cores",
        how="per seed: throughput / capacity of the static allocation minus the baseline's, same pool and RTT, "
            "mean over seeds; reproduced if the interval lies above 0",
        measure=measure_static, cause=CAUSE_STATIC, group="Fig. 2"),
]


# ---------------------------------------------------------------------------------------------
# the reproduction


# No model costs for --sensitivity: the study is itself a simulation, so its allocation delay
# (5 µs), its simulator's work search (100 ns a probe) and its service times are the paper's own
# parameters, not costs measured on or fitted to a testbed: halving one would change the
# experiment, not test a cost the verdicts rest on. No network stack cost is charged (the study
# has none).
FIGURES = (
    Figure("collapse_vs_rtt.png", "Throughput at load 1.0 against the network RTT, credit pool starting at 40 "
           "(mean over seeds, bars: 95 % CI): where Breakwater's throughput collapses (the study's Fig. 2)"),
    Figure("collapse_timeseries.png", "One collapsing run over time: credit pool, queue and throughput, with a "
           "close-up of the last 300 µs against multiples of the RTT (the cycle that starves the cores)"),
)


def series_points(ctx: Context) -> tuple[list[Point], list[str], float]:
    """The runs Fig. 2's time series are of (every seed of the base variant and the fix's first
    seed, at Fig. 2's RTT if swept, else the longest), their extra overrides, and that RTT: from
    the spec as run, so that they are declared before the sweep."""
    points = ctx.spec.points()
    rtts = sorted({float(p.params[RTT]) for p in points})
    rtt_ts = FIG2_RTT if FIG2_RTT in rtts else max(rtts)
    first = min(ctx.spec.seeds)
    chosen = [p for p in points if float(p.params[RTT]) == rtt_ts
              and (p.params.get("variant") == BASE or (p.params.get("variant") == FIX and p.seed == first))]
    return chosen, [f"metrics.sample_interval_us={TS_SAMPLE_US:g}"], rtt_ts


def extra_runs(ctx: Context) -> list[ExtraRuns]:
    """Fig. 2's time series runs, declared before the sweep."""
    points, extra_overrides, _ = series_points(ctx)
    return [ExtraRuns(series_of, tuple(timeseries_tasks(points, extra_overrides)))]


@register("collapse", paper="Core allocation vs overload control (simulation study)", figure="Fig. 2",
          description="Throughput collapse at load 1.0 with a credit pool of 40 and RTT 25–30 µs "
                      "(Breakwater + Caladan-style allocation, 32 cores); its absence at short RTTs and with "
                      "the study's fix (minimum pool)",
          spec="collapse/sweep.toml", claims=CLAIMS,
          figures=FIGURES, extra_runs=extra_runs)
def analyze(ctx: Context):
    from ..api import validate

    ctx.require_variants(BASE, FIX)
    points, extra_overrides, rtt_ts = series_points(ctx)
    first = min(ctx.spec.seeds)
    ts = run_timeseries(ctx, points, extra_overrides=extra_overrides)
    ts.to_parquet(ctx.out / "timeseries.parquet", index=False)
    base_point = next(p for p in points if p.params.get("variant") == BASE)
    data = build_data(ctx.results, ts, validate(base_point.scenario, list(base_point.overrides)))
    data.cycles.df.to_parquet(ctx.out / "cycles.parquet", index=False)
    plot_timeseries(ctx, ts[ts["seed"] == first], rtt_ts)
    plot_vs_rtt(ctx)
    return judge_all(CLAIMS, data)


# ---------------------------------------------------------------------------------------------
# figures


def plot_timeseries(ctx: Context, ts: pd.DataFrame, rtt: float) -> None:
    plt = setup_plt()
    fig, axes = plt.subplots(4, 2, figsize=(15, 10), sharex="col", constrained_layout=True,
                             gridspec_kw={"width_ratios": [2, 1]})
    t_end = float(ts["t_ms"].max())
    lo = t_end - 0.3
    cap = None
    for v in (BASE, FIX):
        s = ts[ts["variant"] == v]
        b = binned(s, 0.1)
        kw = dict(color=COLORS[v], lw=1, label=ctx.spec.label(v))
        axes[0, 0].plot(b["t_ms"], b["cores_allocated"], **kw)
        axes[1, 0].plot(b["t_ms"], b["throughput_rps"] / 1e6, **kw)
        axes[2, 0].plot(b["t_ms"], b["queue_len"], **kw)
        axes[3, 0].plot(b["t_ms"], b["credit_pool"], **kw)
        cap = float(s["offered_rps"].max()) if len(s) else cap
        z = s[s["t_ms"] > lo]
        t = (z["t_ms"] - lo) * 1000
        kz = dict(color=COLORS[v], lw=0.9, where="post")
        axes[0, 1].step(t, z["cores_allocated"], **kz)
        axes[1, 1].step(t, z["cores_busy"], **kz)
        axes[2, 1].step(t, z["queue_len"], **kz)
        axes[3, 1].step(t, z["credits_issued"], **kz)
    axes[0, 0].set_ylabel("LC cores allocated")
    axes[1, 0].set_ylabel("throughput (M req/s)")
    if cap:
        axes[1, 0].axhline(cap / 1e6, color="black", lw=0.6, ls=":")
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
    for o in reversed(ctx.spec.overrides):
        k, _, v = o.partition("=")
        if k.strip() == "warmup_ms":
            return float(v)
    from ..api import validate

    return float(validate(str(ctx.spec.base))["warmup_ms"])


def plot_vs_rtt(ctx: Context) -> None:
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
    cap = float(agg["offered_rps"].max()) / 1e6
    ax1.axhline(cap, color="black", lw=0.6, ls=":", label=f"offered ({cap:g} M req/s)")
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
