"""``microsched reproduce protego``: Protego (NSDI'23), overload control under lock contention
(``shared/papers/protego.md``).

The main sweep (``experiments/protego/sweep.toml``) is the synthetic two-path application at
p = 50 %, 10 µs (Fig. 9 and 11); the analysis runs the other figures' sweeps of the same
directory (``fig3``, ``fig5``, ``fig6``, ``fig7`` (with Fig. 8's replicas), ``fig10``, ``fig12``,
``fig13``) with the main sweep's profile and seed count, and writes each one's rows as
``FIG.parquet`` next to ``results.parquet``; those rows also carry the per-lock counters of the
summary (``lock_control.locks.NAME.drops``, ``.cleanups``, ``.waits_over_budget``, ``.wait_us.p99``)
and the resends (``requests.retried``), which the sweep runner's flattening leaves out.

The claims are data (:data:`CLAIMS`): each has the paper's number, how it is compared
(:mod:`.claims`) and a ``measure`` function of ``data``, a dict of the runs' frames (``main``,
``fig3`` ... ``fig13``) and the lock-bound capacities of the applications (``capacity``, from
their scenario files). Every comparison is paired by seed (common random numbers) and reported as
a mean over seeds with its 95 % confidence half-width.

Drop rates are the paper's (§5.1): requests dropped at the server (ASQM or try_lock at a lock,
the ingress AQM) over the requests the server received, ``server_drop_rate``; requests a client
gave up before sending (no credit within ``clients.timeout_us``, SEDA's rate limit) are counted
apart, ``client_drop_rate``.

Figures: ``protego_figN.png`` (goodput, p99, drop rates and CPU use against the clients' demand,
one line per system), ``protego_fig12.png`` (goodput and drop rate against t_e),
``protego_fig13.png`` (bars: goodput, p99, drop rate per system).
"""

from __future__ import annotations

import functools
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from .claims import (BOUND, CHECK, FRACTION, GAIN, ORDER, RATIO, VALUE, Claim, ClaimSpec, Condition, Measured,
                     judge_all)
from .framework import Condition as RunCondition
from .framework import Context, ExtraRuns, Figure, Thesis, experiments_dir, register
from .loadshift import setup_plt
from .runner import aggregate, mean_ci95
from .sensitivity import Cost
from .spec import Point, SweepSpec
from .stats import Seeds, safe_ratio

LOAD = "load.rps"
TE = "policy.overload.efficiency_threshold"
P99 = "latency_us.p99"
GOODPUT = "goodput_rps"
SDR = "server_drop_rate"
CDR = "client_drop_rate"
SUBSWEEPS = ("fig3", "fig5", "fig6", "fig7", "fig10", "fig12", "fig13")
# The paper's target delays (§5.1-§5.5; Fig. 3's is not stated: synthetic-100us.toml).
TARGET_US = {"main": 200.0, "fig3": 1000.0, "fig5": 200.0, "fig6": 40000.0, "fig7": 110.0, "fig10": 110.0,
             "fig12": 200.0, "fig13": 110.0}
# Each application's scenario file: its lock-bound capacity is read from it.
SCENARIO = {"main": "synthetic-p50.toml", "fig5": "synthetic.toml", "fig6": "lucene.toml",
            "fig10": "synthetic-p50-1us.toml"}
COLORS = {"none": "tab:gray", "asqm": "tab:olive", "breakwater": "tab:red", "seda": "tab:orange",
          "try_lock": "tab:purple", "protego_ac": "tab:cyan", "protego": "tab:blue", "protego_replicas": "tab:green",
          "protego_artifact": "tab:brown"}
# Regime thresholds: "the CPU is saturated" (Fig. 10, 13) and "not congested" (Fig. 6, 9).
CPU_SATURATED = 0.95
CPU_NOT_CONGESTED = 0.9
# Phase I: demands up to this share of the lock-bound capacity leave every path spare capacity.
PHASE1 = 0.8
# Algorithm 1's increment a (credits) and multiplicative decrement d (§3.2), Protego's defaults.
ALGO1_INCREASE, ALGO1_DECREASE = 1.0, 0.02


# ---------------------------------------------------------------------------------------------
# the runs' data


def lock_saturation_demands(path: Path) -> list[tuple[str, float]]:
    """The clients' demand (req/s) at which each lock of a scenario saturates, lowest first:
    1 s / (the time a request holds it × the share of requests that take its busiest instance),
    from the scenario file (a step's own time, else the type's service time; a lock family's
    busiest instance takes its ``hot_share``, or 1/``count``)."""
    raw = tomllib.loads(path.read_text(encoding="utf-8"))
    wl = raw.get("workload", {})
    locks = {lk["name"]: lk for lk in wl.get("locks", [])}
    types = wl.get("types", [])
    total = sum(float(t.get("ratio", 1.0)) for t in types) or 1.0
    load_us: dict[str, float] = {}
    for t in types:
        share_t = float(t.get("ratio", 1.0)) / total
        paths = t.get("paths", [])
        for step in (paths[0].get("steps", []) if paths else []):
            if step.get("op") != "lock":
                continue
            lk = locks.get(step["lock"], {})
            hot = lk.get("hot")
            share = float(hot["hot_share"]) if hot else 1.0 / float(lk.get("count", 1))
            time = step.get("time") or t.get("service", {})
            hold_us = float(time.get("mean_us", time.get("value_us", math.nan)))
            load_us[step["lock"]] = load_us.get(step["lock"], 0.0) + share_t * share * hold_us
    return sorted(((name, 1e6 / us) for name, us in load_us.items() if us > 0), key=lambda x: x[1])


def capacities(base: Path | None = None) -> dict[str, dict[str, float]]:
    """Per application: the demand at which its first lock saturates (``capacity``, the lock-bound
    capacity the paper's figures are read against) and at which its last does (``last``)."""
    base = base or experiments_dir() / "protego"
    out = {}
    for name, f in SCENARIO.items():
        d = lock_saturation_demands(base / f)
        out[name] = {"capacity": d[0][1], "last": d[-1][1], "lock": d[0][0]}
    return out


def derived(df: pd.DataFrame) -> pd.DataFrame:
    """The rows with the paper's drop rates: ``server_drops`` (at a lock, at the ingress AQM),
    ``server_drop_rate`` (over the requests the server received: completed + server drops) and
    ``client_drop_rate`` (the rest of ``drop_rate``: requests a client gave up before sending),
    over the measured window."""
    df = df.copy()

    def col(c: str) -> pd.Series:
        return df[c].astype(float).fillna(0.0) if c in df.columns else pd.Series(0.0, index=df.index)

    done = col("throughput_rps") * col("duration_s")
    server = col("lock_control.drops") + col("credits.aqm_drops")
    rate = col("drop_rate")
    ended = done / (1.0 - rate).where(rate < 1.0)
    df["server_drops"] = server
    df[SDR] = (server / (done + server)).where(done + server > 0)
    df[CDR] = ((rate * ended - server) / ended).clip(lower=0.0).where(ended > 0)
    return df


# The point of each experiment's runs: the demand (load.rps), but Fig. 12's TE and Fig. 13's one.
KEYS: dict[str, str | None] = {"fig12": TE, "fig13": None}


@dataclass(frozen=True)
class Data:
    """What the claims are measured on: each experiment's runs (``main``, the sweep's; ``fig3``
    ... ``fig13``, the sub-sweeps'), with the drop rates :func:`derived` adds, as Seeds by its
    point (:data:`KEYS`), and each application's lock-bound capacities (:func:`capacities`)."""

    runs: Mapping[str, Seeds]
    capacity: Mapping[str, Mapping[str, float]]

    @classmethod
    def of(cls, frames: Mapping[str, pd.DataFrame], capacity: Mapping[str, Mapping[str, float]]) -> "Data":
        return cls({name: Seeds(derived(df), key=KEYS.get(name, LOAD)) for name, df in frames.items()}, capacity)


def _has(s: Seeds, *variants: str) -> str | None:
    missing = set(variants) - s.names()
    return f"the run has no {', '.join(sorted(missing))} variant" if missing else None


def _n(s: Seeds, variant: str, at: float | None, metric: str) -> int:
    return int(s.values(variant, at, metric).notna().sum())


def _per_seed(s: Seeds, variant: str, metric: str, a: float | None, b: float | None,
              fn: Callable[[float, float], float]) -> tuple[float, float, int]:
    """(mean, ci95, n) over seeds of fn(metric at a, metric at b) of one variant."""
    x = pd.concat([s.values(variant, a, metric), s.values(variant, b, metric)], axis=1, join="inner")
    return mean_ci95([fn(u, v) for u, v in x.itertuples(index=False)])


def _krps(x: float) -> float:
    return x / 1e3


def _max_over(s: Seeds, loads: list[float], stat: Callable[[float], tuple[float, float]]) -> tuple[float, float, float]:
    """(load, mean, ci95) at the load with the largest mean of ``stat``."""
    stats = {x: stat(x) for x in loads}
    stats = {x: v for x, v in stats.items() if v[0] is not None and math.isfinite(v[0])}
    if not stats:
        return math.nan, math.nan, math.nan
    at = max(stats, key=lambda k: stats[k][0])
    return (at, *stats[at])


def _by_load(stats: dict[float, float]) -> dict[str, float | None]:
    return {f"{k:g}": (None if v is None or not math.isfinite(v) else round(float(v), 4)) for k, v in stats.items()}


# ---------------------------------------------------------------------------------------------
# measures: Fig. 9 and 11 (main sweep: synthetic, p = 50 %, 10 µs)


def _ratio_max(name: str, metric: str, num: str, den: str, target_key: str | None = None):
    """max over demands of metric(num)/metric(den), paired by seed."""

    def measure(data: Data) -> Measured:
        s = data.runs[name]
        miss = _has(s, num, den)
        if miss:
            return Measured(None, missing=miss)
        loads = s.points_of()
        at, m, ci = _max_over(s, loads, lambda x: s.ratio(x, metric, num, den))
        if not math.isfinite(at):
            return Measured(None, missing=f"no finite {metric} ratio {num}/{den} at any demand")
        ev = {"at_krps": _krps(at), "num": num, "den": den,
              f"{num}_{_short(metric)}": s.mean(num, at, metric), f"{den}_{_short(metric)}": s.mean(den, at, metric),
              f"{num}_p99_us": s.mean(num, at, P99), f"{den}_p99_us": s.mean(den, at, P99),
              f"{num}_goodput_krps": _krps(s.mean(num, at, GOODPUT)), f"{den}_goodput_krps": _krps(s.mean(den, at, GOODPUT)),
              f"{den}_client_drop_rate": s.mean(den, at, CDR), f"{num}_server_drop_rate": s.mean(num, at, SDR),
              f"{den}_cores_busy": s.mean(den, at, "cores.busy_mean")}
        return Measured(m, ci, _n(s, num, at, metric), evidence=ev,
                        extra={"at_load_rps": at, "by_load": _by_load({x: s.ratio(x, metric, num, den)[0] for x in loads})})

    return measure


def _short(metric: str) -> str:
    return {GOODPUT: "goodput", P99: "p99"}.get(metric, metric.replace(".", "_"))


def _seda_cap(name: str):
    """SEDA's largest goodput over demands / the lock-bound capacity."""

    def measure(data: Data) -> Measured:
        s = data.runs[name]
        miss = _has(s, "seda")
        if miss:
            return Measured(None, missing=miss)
        cap = data.capacity[name]["capacity"]
        at, g, ci = _max_over(s, s.points_of(), lambda x: s.stat("seda", x, GOODPUT))
        ev = {"at_krps": _krps(at), "seda_goodput": g, "capacity": cap, "capacity_krps": _krps(cap),
              "seda_client_drop_rate": s.mean("seda", at, CDR), "seda_p99_us": s.mean("seda", at, P99),
              "target_us": TARGET_US[name], "seda_throughput": s.mean("seda", at, "throughput_rps")}
        return Measured(g / cap, ci / cap if math.isfinite(ci) else None, _n(s, "seda", at, GOODPUT), evidence=ev,
                        extra={"at_load_rps": at, "capacity_rps": round(cap, 1),
                               "by_load_goodput_rps": _by_load({x: s.mean("seda", x, GOODPUT) for x in s.points_of()})})

    return measure


def _overloaded(data: Data, name: str, loads: list[float]) -> tuple[list[float], Condition]:
    cap = data.capacity[name]["capacity"]
    top = max(loads) if loads else math.nan
    return [x for x in loads if x > cap], Condition("highest demand over the lock-bound capacity", top / cap, ">", 1.0)


def _p99_over_target(name: str, variant: str, overloaded_only: bool, cpu_regime: bool = False,
                     in_target_units: bool = True, alternative: str | None = None):
    """max over demands (above the lock-bound capacity when ``overloaded_only``) of the
    variant's p99 (in units of the target when ``in_target_units``, else µs); the evidence gives
    an ``alternative`` variant's credits and p99 at the same demand."""

    def measure(data: Data) -> Measured:
        s = data.runs[name]
        miss = _has(s, variant)
        if miss:
            return Measured(None, missing=miss)
        loads = s.points_of()
        regime = []
        if overloaded_only:
            loads, cond = _overloaded(data, name, loads)
            regime.append(cond)
        if cpu_regime:
            regime.append(_cpu_saturated(data, name))
        if not loads:
            return Measured(None, missing="no demand above the lock-bound capacity was run", regime=regime)
        t = TARGET_US[name]
        unit = t if in_target_units else 1.0
        at, m, ci = _max_over(s, loads, lambda x: s.stat(variant, x, P99))
        ev = {"at_krps": _krps(at), "p99_us": m, "target_us": t, "variant": variant,
              "lock_wait_us": s.mean(variant, at, "sched.lock_wait_us_mean"),
              "server_drop_rate": s.mean(variant, at, SDR), "client_drop_rate": s.mean(variant, at, CDR),
              "cores_busy": s.mean(variant, at, "cores.busy_mean"), "cores": s.mean(variant, at, "cores.max"),
              "goodput_krps": _krps(s.mean(variant, at, GOODPUT)), "pool_mean": s.mean(variant, at, "credits.pool_mean"),
              "issued_mean": s.mean(variant, at, "credits.issued_mean")}
        # Little's law: the credits out over the locks' capacity is how long an admitted request waits.
        ev["little_ms"] = ev["issued_mean"] / data.capacity[name]["capacity"] * 1e3
        if alternative is not None:
            alt = alternative if alternative in s.names() else None
            ev.update(alt_issued=s.mean(alt, at, "credits.issued_mean") if alt else None,
                      alt_pool=s.mean(alt, at, "credits.pool_mean") if alt else None,
                      alt_p99_over_target=s.mean(alt, at, P99) / t if alt else None)
        budget = s.mean(variant, at, "server.lock_control.budget_us")
        ev["budget_us"] = budget if math.isfinite(budget) else None
        return Measured(m / unit, ci / unit if math.isfinite(ci) else None, _n(s, variant, at, P99), evidence=ev,
                        regime=regime, extra={"at_load_rps": at, "p99_us": round(m, 1),
                                              "by_load_p99_us": _by_load({x: s.mean(variant, x, P99) for x in loads})})

    return measure


def _drop_rate_max(name: str, variant: str, cpu_regime: bool = False):
    """max over demands of the variant's server drop rate (the paper's)."""

    def measure(data: Data) -> Measured:
        s = data.runs[name]
        miss = _has(s, variant)
        if miss:
            return Measured(None, missing=miss)
        loads = s.points_of()
        at, m, ci = _max_over(s, loads, lambda x: s.stat(variant, x, SDR))
        if not math.isfinite(at):
            return Measured(None, missing="no request reached the server")
        ev = {"at_krps": _krps(at), "client_drop_rate": s.mean(variant, at, CDR),
              "server_drops_per_s": s.mean(variant, at, "server_drops") / max(s.mean(variant, at, "duration_s"), 1e-12),
              "all_drop_rate": s.mean(variant, at, "drop_rate"), "p99_us": s.mean(variant, at, P99)}
        regime = [_cpu_saturated(data, name)] if cpu_regime else []
        return Measured(m, ci, _n(s, variant, at, SDR), evidence=ev, regime=regime,
                        extra={"at_load_rps": at, "by_load": _by_load({x: s.mean(variant, x, SDR) for x in loads}),
                               "by_load_client_drop_rate": _by_load({x: s.mean(variant, x, CDR) for x in loads})})

    return measure


def _collapse(name: str, variant: str, cpu_not_congested: bool):
    """The share of its peak goodput a variant loses at the highest demand (per seed: 1 −
    goodput(top)/goodput(the demand of the peak mean)); the regime: its CPU not congested there."""

    def measure(data: Data) -> Measured:
        s = data.runs[name]
        miss = _has(s, variant)
        if miss:
            return Measured(None, missing=miss)
        loads = s.points_of()
        if len(loads) < 2:
            return Measured(None, missing="a collapse needs at least two demands; the run has "
                                          f"{len(loads)}")
        top = max(loads)
        peak = max(loads, key=lambda x: s.mean(variant, x, GOODPUT))
        m, ci, n = _per_seed(s, variant, GOODPUT, top, peak, lambda t, p: 1.0 - safe_ratio(t, p))
        busy, cores = s.mean(variant, top, "cores.busy_mean"), s.mean(variant, top, "cores.max")
        ev = {"top_krps": _krps(top), "peak_krps": _krps(peak), "goodput_top_krps": _krps(s.mean(variant, top, GOODPUT)),
              "goodput_peak_krps": _krps(s.mean(variant, peak, GOODPUT)), "cores_busy": busy, "cores": cores,
              "throughput_top_krps": _krps(s.mean(variant, top, "throughput_rps")), "p99_top_us": s.mean(variant, top, P99),
              "aqm_drops": s.mean(variant, top, "credits.aqm_drops"), "low_krps": _krps(min(loads)),
              "goodput_low_krps": _krps(s.mean(variant, min(loads), GOODPUT))}
        regime = [Condition("cores busy at the highest demand, as a share of the cores", busy / cores, "<",
                            CPU_NOT_CONGESTED)] if cpu_not_congested else []
        return Measured(m, ci, n, evidence=ev, regime=regime,
                        extra={"at_load_rps": top, "peak_load_rps": peak,
                               "by_load_goodput_rps": _by_load({x: s.mean(variant, x, GOODPUT) for x in loads})})

    return measure


def _cpu_saturated(data: Data, name: str) -> Condition:
    """The busiest variant's busy share of the cores at the highest demand."""
    s = data.runs[name]
    loads = s.points_of()
    if not loads:
        return Condition("cores busy at the highest demand, as a share of the cores", None, ">=", CPU_SATURATED)
    top = max(loads)
    shares = [s.mean(v, top, "cores.busy_mean") / s.mean(v, top, "cores.max") for v in sorted(s.names())]
    shares = [x for x in shares if math.isfinite(x)]
    return Condition("cores busy at the highest demand (busiest system), as a share of the cores",
                     max(shares) if shares else None, ">=", CPU_SATURATED)


def _asqm_goodput_gain(data: Data) -> Measured:
    s = data.runs["main"]
    miss = _has(s, "protego", "protego_ac")
    if miss:
        return Measured(None, missing=miss)
    top = max(s.points_of())
    cap = data.capacity["main"]["capacity"]
    m, ci = s.paired(top, GOODPUT, lambda a, b: (a - b) / cap, "protego", "protego_ac")
    ev = {"top_krps": _krps(top), "capacity_krps": _krps(cap), "goodput_full_krps": _krps(s.mean("protego", top, GOODPUT)),
          "goodput_ac_krps": _krps(s.mean("protego_ac", top, GOODPUT)), "p99_ac_us": s.mean("protego_ac", top, P99),
          "p99_full_us": s.mean("protego", top, P99), "throughput_ac_krps": _krps(s.mean("protego_ac", top, "throughput_rps"))}
    return Measured(m, ci, _n(s, "protego", top, GOODPUT), evidence=ev, extra={"at_load_rps": top})


# ---------------------------------------------------------------------------------------------
# measures: Fig. 3 (synthetic p = 20 %, 100 µs), Fig. 5 (ASQM alone)


def _fig3_order(metric: str, other: str, as_difference: bool = False):
    """other vs Protego at the highest demand, paired: metric(other)/metric(Protego) − 1 (or the
    difference)."""

    def measure(data: Data) -> Measured:
        s = data.runs["fig3"]
        miss = _has(s, other, "protego")
        if miss:
            return Measured(None, missing=miss)
        top = max(s.points_of())
        fn = (lambda a, b: a - b) if as_difference else (lambda a, b: safe_ratio(a, b) - 1.0)
        m, ci = s.paired(top, metric, fn, other, "protego")
        ev = {"top_krps": _krps(top), "other": other, "other_value": s.mean(other, top, metric),
              "protego_value": s.mean("protego", top, metric),
              "other_throughput_krps": _krps(s.mean(other, top, "throughput_rps")),
              "protego_throughput_krps": _krps(s.mean("protego", top, "throughput_rps")),
              "other_p99_us": s.mean(other, top, P99), "protego_p99_us": s.mean("protego", top, P99),
              "other_server_drop_rate": s.mean(other, top, SDR), "protego_server_drop_rate": s.mean("protego", top, SDR),
              "other_client_drop_rate": s.mean(other, top, CDR), "protego_client_drop_rate": s.mean("protego", top, CDR)}
        return Measured(m, ci, _n(s, other, top, metric), evidence=ev, extra={"at_load_rps": top, "metric": metric})

    return measure


def _fig5_phase2_p99(data: Data) -> Measured:
    s = data.runs["fig5"]
    miss = _has(s, "asqm")
    if miss:
        return Measured(None, missing=miss)
    c = data.capacity["fig5"]
    loads = [x for x in s.points_of() if c["capacity"] < x < c["last"]]
    regime = [Condition("demands run in phase II (one path congested, the other not)", float(len(loads)), ">=", 1.0)]
    if not loads:
        return Measured(None, missing="no demand of phase II was run", regime=regime)
    t = TARGET_US["fig5"]
    at, m, ci = _max_over(s, loads, lambda x: s.stat("asqm", x, P99))
    ev = {"at_krps": _krps(at), "p99_us": m, "target_us": t, "lock_wait_us": s.mean("asqm", at, "sched.lock_wait_us_mean"),
          "server_drop_rate": s.mean("asqm", at, SDR), "phase2_from_krps": _krps(c["capacity"]),
          "phase2_to_krps": _krps(c["last"]), "budget_us": s.mean("asqm", at, "server.lock_control.budget_us"),
          "over_budget_share": _over_budget_share(s, "asqm", at)}
    return Measured(m / t, ci / t if math.isfinite(ci) else None, _n(s, "asqm", at, P99), evidence=ev, regime=regime,
                    extra={"at_load_rps": at, "p99_us": round(m, 1),
                           "by_load_p99_us": _by_load({x: s.mean("asqm", x, P99) for x in s.points_of()})})


def _over_budget_share(s: Seeds, variant: str, at: float) -> float | None:
    """The share of lock waits that ended past the budget (all locks), where exported."""
    cols = [c for c in s.df.columns if c.startswith("lock_control.locks.") and c.endswith(".waits_over_budget")]
    if not cols:
        return None
    over = sum(s.mean(variant, at, c) for c in cols)
    waits = sum(s.mean(variant, at, c[: -len("waits_over_budget")] + "waits") for c in cols)
    return over / waits if waits > 0 else None


def _fig5_phases(data: Data) -> Measured:
    """Throughput's slope against demand in phase I (served share at the lowest demand) minus
    its slope between the two highest demands."""
    s = data.runs["fig5"]
    miss = _has(s, "asqm")
    if miss:
        return Measured(None, missing=miss)
    c = data.capacity["fig5"]
    loads = s.points_of()
    regime = [Condition("lowest demand over the demand where the first path congests", min(loads) / c["capacity"], "<", 1.0),
              Condition("highest demand over the demand where the last path congests", max(loads) / c["last"], ">", 1.0)]
    if len(loads) < 3:
        return Measured(None, missing=f"phases need at least three demands; the run has {len(loads)}", regime=regime)
    lo, a, b = loads[0], loads[-2], loads[-1]
    thr = {x: s.values("asqm", x, "throughput_rps") for x in (lo, a, b)}
    x = pd.concat([thr[lo], thr[a], thr[b]], axis=1, join="inner")
    per = [u / lo - (w - v) / (b - a) for u, v, w in x.itertuples(index=False)]
    m, ci, n = mean_ci95(per)
    slopes = {f"{q:g}": round(float((s.mean("asqm", q, "throughput_rps") - s.mean("asqm", p, "throughput_rps")) / (q - p)), 3)
              for p, q in zip(loads, loads[1:])}
    ev = {"first_slope": s.mean("asqm", lo, "throughput_rps") / lo, "last_slope": (s.mean("asqm", b, "throughput_rps")
          - s.mean("asqm", a, "throughput_rps")) / (b - a), "lo_krps": _krps(lo), "top_krps": _krps(b)}
    return Measured(m, ci, n, evidence=ev, regime=regime, extra={"slopes": slopes})


def _sessions(scenario: str) -> float:
    """``clients.sessions`` of a scenario file of experiments/protego."""
    raw = tomllib.loads((experiments_dir() / "protego" / scenario).read_text(encoding="utf-8"))
    return float(raw.get("clients", {}).get("sessions", 100))


def _admission(s: Seeds, variant: str, at: float, sessions: float) -> dict[str, float]:
    """What bounds the admitted load: a session's one credit idles at the client between its
    requests, and a request of a session holding none waits longer than the client's timeout for
    one (the credit's round trip), so about (sessions − drained sessions) × the demand per session
    is admitted."""
    demand = s.mean(variant, at, "offered_rps")
    dur = max(s.mean(variant, at, "duration_s"), 1e-12)
    drained = s.mean(variant, at, "credits.drained_mean")
    admitted = s.mean(variant, at, "throughput_rps") + s.mean(variant, at, "server_drops") / dur
    return {"pool": s.mean(variant, at, "credits.pool_mean"), "drained": drained,
            "per_session_rps": demand / sessions,
            "predicted_krps": _krps((sessions - drained) * demand / sessions), "admitted_krps": _krps(admitted),
            "timeout_share": s.mean(variant, at, "credits.client_timeouts") / dur / demand if demand > 0 else math.nan,
            "goodput_krps": _krps(s.mean(variant, at, GOODPUT)), "sdr": s.mean(variant, at, SDR)}


def _phase1_loss(data: Data) -> Measured:
    """1 − goodput/demand of Protego at the highest demand at most PHASE1 of the lock-bound
    capacity (the paper's Phase I: every path has spare capacity), per seed; the evidence says
    how many sessions held no credit there and at the highest demand."""
    s = data.runs["main"]
    miss = _has(s, "protego")
    if miss:
        return Measured(None, missing=miss)
    cap = data.capacity["main"]["capacity"]
    loads = s.points_of()
    low = [x for x in loads if x <= PHASE1 * cap]
    regime = [Condition("demands run at most 0.8 of the lock-bound capacity", float(len(low)), ">=", 1.0)]
    if not low:
        return Measured(None, missing="no demand of phase I was run", regime=regime)
    at, top = max(low), max(loads)
    x = pd.concat([s.values("protego", at, GOODPUT), s.values("protego", at, "offered_rps")], axis=1, join="inner")
    m, ci, n = mean_ci95([1.0 - safe_ratio(g, d) for g, d in x.itertuples(index=False)])
    sessions = _sessions(SCENARIO["main"])
    ev = {"at_krps": _krps(at), "load_share": at / cap, "sessions": sessions, "top_krps": _krps(top),
          "capacity_krps": _krps(cap)}
    ev.update(_admission(s, "protego", at, sessions))
    # Algorithm 1's steps with the paper's a and d (§3.2), which the sweep does not change.
    ev.update(increase=ALGO1_INCREASE, decrease_credits=ALGO1_DECREASE * ev["pool"])
    ev.update({f"{k}_top": v for k, v in _admission(s, "protego", top, sessions).items()})
    if "protego_artifact" in s.names():
        ev["artifact_loss"] = 1.0 - safe_ratio(s.mean("protego_artifact", at, GOODPUT), s.mean("protego_artifact", at, "offered_rps"))
        ev["artifact_pool"] = s.mean("protego_artifact", at, "credits.pool_mean")
        ev["artifact_goodput_top_krps"] = _krps(s.mean("protego_artifact", top, GOODPUT))
    else:
        ev.update(artifact_loss=None, artifact_pool=None, artifact_goodput_top_krps=None)
    return Measured(m, ci, n, evidence=ev, regime=regime,
                    extra={"at_load_rps": at, "by_load_goodput_rps": _by_load({x: s.mean("protego", x, GOODPUT) for x in loads}),
                           "by_load_drained_sessions": _by_load({x: s.mean("protego", x, "credits.drained_mean") for x in loads})})


# ---------------------------------------------------------------------------------------------
# measures: Fig. 7, 8 (Memcached-like VAR), 10, 12, 13


def _cleanup_check(data: Data) -> Measured:
    """Our accounting: slab-lock cleanups of Protego's dropped requests / their drops at the item
    locks, at the highest demand (a cleanup belongs to a SET dropped after it allocated: <= 1)."""
    s = data.runs["fig7"]
    miss = _has(s, "protego")
    if miss:
        return Measured(None, missing=miss)
    cols = ("lock_control.locks.slab.cleanups", "lock_control.locks.item.drops")
    if any(c not in s.df.columns for c in cols):
        return Measured(None, missing="per-lock counters (lock_control.locks.*) are not in the rows")
    top = max(s.points_of())
    x = pd.concat([s.values("protego", top, cols[0]), s.values("protego", top, cols[1])], axis=1, join="inner")
    per = [safe_ratio(c, d) for c, d in x.itertuples(index=False)]
    m, ci, n = mean_ci95(per)
    ev = {"cleanups": s.mean("protego", top, cols[0]), "item_drops": s.mean("protego", top, cols[1]),
          "slab_drops": s.mean("protego", top, "lock_control.locks.slab.drops"), "top_krps": _krps(top)}
    if not math.isfinite(m):
        return Measured(None, missing="no request was dropped at an item lock", evidence=ev)
    return Measured(m, ci, n, evidence=ev, extra={"at_load_rps": top})


def _replicas_slo_ratio(data: Data) -> Measured:
    s = data.runs["fig7"]
    miss = _has(s, "protego_replicas")
    if miss:
        return Measured(None, missing=miss)
    loads = s.points_of()
    slo = 2 * TARGET_US["fig7"]
    at, p99, _ = _max_over(s, loads, lambda x: s.stat("protego_replicas", x, P99))
    vals = s.values("protego_replicas", at, P99)
    m, ci, n = mean_ci95([safe_ratio(slo, v) for v in vals])
    retried = s.mean("protego_replicas", at, "requests.retried")
    done = s.mean("protego_replicas", at, "throughput_rps") * s.mean("protego_replicas", at, "duration_s")
    ev = {"at_krps": _krps(at), "p99_us": p99, "slo_us": slo,
          "retried_share": retried / done if math.isfinite(retried) and done > 0 else None,
          "server_drop_rate": s.mean("protego_replicas", at, SDR),
          "failure_reply_p99_us": s.mean("protego_replicas", at, "lock_control.failure_reply_us.p99"),
          "single_server_p99_us": s.mean("protego", at, P99)}
    return Measured(m, ci, n, evidence=ev, extra={"at_load_rps": at, "p99_us": round(p99, 1),
                                                 "by_load_p99_us": _by_load({x: s.mean("protego_replicas", x, P99) for x in loads})})


def _failure_replies(data: Data) -> Measured:
    """The p99 of failure replies (creation → the failure reply at the client) of the requests a
    single Protego server drops, largest over demands. Measured on the one-server ``protego``
    variant (Server 1 of Fig. 8 under the same demand), whose histogram holds the server's drops
    only: with replicas it also counts the clients' local credit timeouts."""
    s = data.runs["fig7"]
    miss = _has(s, "protego")
    if miss:
        return Measured(None, missing=miss)
    loads = s.points_of()
    with_drops = [x for x in loads if s.mean("protego", x, "server_drops") > 0]
    top = max(loads)
    regime = [Condition("requests the server drops at the highest demand", s.mean("protego", top, "server_drops"), ">", 0.0)]
    if not with_drops:
        return Measured(None, missing="the server dropped no request", regime=regime)
    metric = "lock_control.failure_reply_us.p99"
    at, m, ci = _max_over(s, with_drops, lambda x: s.stat("protego", x, metric))
    ev = {"at_krps": _krps(at), "target_us": TARGET_US["fig7"], "budget_us": s.mean("protego", at, "server.lock_control.budget_us"),
          "server_drops": s.mean("protego", at, "server_drops"),
          "client_timeouts": s.mean("protego", at, "credits.client_timeouts"),
          "slab_wait_p99_us": s.mean("protego", at, "lock_control.locks.slab.wait_us.p99"),
          "slab_waits_over_budget": s.mean("protego", at, "lock_control.locks.slab.waits_over_budget"),
          "item_drops": s.mean("protego", at, "lock_control.locks.item.drops"),
          "replicas_failure_p99_us": s.mean("protego_replicas", at, metric)}
    return Measured(m, ci, _n(s, "protego", at, metric), evidence=ev, regime=regime,
                    extra={"at_load_rps": at, "by_load": _by_load({x: s.mean("protego", x, metric) for x in with_drops})})


def _fig12(metric: str, hi: float, lo: float, fn: Callable[[float, float], float], name: str):
    """fn(metric at t_e = hi, metric at t_e = lo), paired by seed."""

    def measure(data: Data) -> Measured:
        s = data.runs["fig12"]
        tes = s.points_of()
        have = [t for t in (hi, lo) if any(np.isclose(t, x) for x in tes)]
        if len(have) < 2:
            return Measured(None, missing=f"the run has no t_e = {hi:g} and {lo:g} (it ran {', '.join(f'{t:g}' for t in tes)})")
        m, ci, n = _per_seed(s, "protego", metric, hi, lo, fn)
        ev = {"te_hi": hi, "te_lo": lo, "goodput_hi_krps": _krps(s.mean("protego", hi, GOODPUT)),
              "goodput_lo_krps": _krps(s.mean("protego", lo, GOODPUT)), "sdr_hi": s.mean("protego", hi, SDR),
              "sdr_lo": s.mean("protego", lo, SDR), "cdr_hi": s.mean("protego", hi, CDR), "cdr_lo": s.mean("protego", lo, CDR),
              "pool_hi": s.mean("protego", hi, "credits.pool_mean"), "pool_lo": s.mean("protego", lo, "credits.pool_mean"),
              "demand_krps": _krps(s.mean("protego", lo, "offered_rps"))}
        return Measured(m, ci, n, evidence=ev, extra={
            "by_te_goodput_rps": _by_load({t: s.mean("protego", t, GOODPUT) for t in tes}),
            "by_te_server_drop_rate": _by_load({t: s.mean("protego", t, SDR) for t in tes})})

    measure.__name__ = name
    return measure


def _fig13(other: str):
    def measure(data: Data) -> Measured:
        s = data.runs["fig13"]
        miss = _has(s, "protego", other)
        if miss:
            return Measured(None, missing=miss)
        m, ci = s.ratio(None, GOODPUT, "protego", other)
        regime = []
        if "none" in s.names():
            none_p99 = s.mean("none", None, P99)
            busy = s.mean("none", None, "cores.busy_mean") / s.mean("none", None, "cores.max")
            regime = [Condition("p99 with no overload control over the target", none_p99 / TARGET_US["fig13"], ">", 1.0),
                      Condition("cores busy with no overload control, as a share of the cores", busy, ">=", CPU_SATURATED)]
        else:
            regime = [Condition("runs with no overload control (to tell whether the demand overloads the server)",
                                0.0, ">", 0.0)]
        ev = {"protego_goodput_mrps": s.mean("protego", None, GOODPUT) / 1e6, "other_goodput_mrps": s.mean(other, None, GOODPUT) / 1e6,
              "demand_mrps": s.mean("protego", None, "offered_rps") / 1e6, "other": other,
              "none_drop_rate": s.mean("none", None, "drop_rate"), "none_p99_us": s.mean("none", None, P99),
              "none_cores_busy": s.mean("none", None, "cores.busy_mean"),
              "protego_client_drop_rate": s.mean("protego", None, CDR), "other_drop_rate": s.mean(other, None, "drop_rate"),
              "protego_cores_busy": s.mean("protego", None, "cores.busy_mean"),
              "other_cores_busy": s.mean(other, None, "cores.busy_mean"),
              "protego_pool": s.mean("protego", None, "credits.pool_mean"),
              "protego_drained": s.mean("protego", None, "credits.drained_mean"),
              "sessions": _sessions("memcached-usr.toml")}
        return Measured(m, ci, _n(s, "protego", None, GOODPUT), evidence=ev, regime=regime)

    return measure


# ---------------------------------------------------------------------------------------------
# the claims

_Q_FIG9 = "Protego improves goodput by up to 32% compared to SEDA, maintaining latency within the target delay"

CLAIMS: list[ClaimSpec] = [
    # Fig. 9: synthetic p = 50 %, 10 µs
    ClaimSpec(
        id="fig9-goodput-vs-seda", paper=1.32, kind=RATIO, unit="×", paper_ref="Fig. 9, §5.4", quote=_Q_FIG9,
        claim="Synthetic p = 50 %, 10 µs: Protego achieves up to 1.32× SEDA's goodput",
        how="max over demands of goodput(Protego)/goodput(SEDA), paired by seed",
        measure=_ratio_max("main", GOODPUT, "protego", "seda"),
        cause="at {at_krps} kRPS Protego's goodput is {protego_goodput_krps} kRPS and SEDA's {seda_goodput_krps} kRPS "
              "(SEDA's clients hold back {seda_client_drop_rate} of the demand; Protego's server drops "
              "{protego_server_drop_rate} of what it receives)"),
    ClaimSpec(
        id="fig9-seda-goodput-cap", paper=168.0 / 200.0, kind=FRACTION, unit="of the lock-bound capacity",
        paper_ref="Fig. 9, §5.4", quote="SEDA's goodput is limited to 168 kRPS leaving the other data path uncongested",
        claim="Synthetic p = 50 %, 10 µs: SEDA's goodput is capped at 168 kRPS, 0.84 of the 200 kRPS the two locks serve",
        how="SEDA's largest mean goodput over demands / the demand at which the first lock saturates (200 kRPS, "
            "from synthetic-p50.toml); CI from the seeds at that demand",
        measure=_seda_cap("main"),
        cause="SEDA's goodput peaks at {seda_goodput} req/s at {at_krps} kRPS, against the locks' {capacity} req/s; "
              "its clients hold back {seda_client_drop_rate} of the demand there and its p99 is {seda_p99_us} µs "
              "(target {target_us} µs)"),
    ClaimSpec(
        id="fig9-protego-p99-within-target", paper=TARGET_US["main"], kind=BOUND, side="upper", unit="µs",
        paper_ref="Fig. 9, §5.4", quote=_Q_FIG9,
        claim="Protego keeps its p99 latency within the 200 µs target delay under lock overload",
        how="max over demands above the lock-bound capacity of Protego's p99, mean over seeds",
        measure=_p99_over_target("main", "protego", overloaded_only=True, in_target_units=False),
        cause="Protego's p99 at {at_krps} kRPS is {measured} µs ± {ci95}: admitted requests wait {lock_wait_us} µs on "
              "average at the locks (ASQM budget {budget_us} µs), the server drops {server_drop_rate} of what it "
              "receives and the clients give up {client_drop_rate} of the demand waiting for credits"),
    ClaimSpec(
        id="fig9-protego-phase1-served", paper=0.01, kind=BOUND, side="upper", unit="of the demand not served in time",
        paper_ref="§3.1 (Phase I), Fig. 9",
        quote="Phase I (uncongested) is the phase where none of the locks or CPUs is congested. Throughput grows "
              "linearly with load increases because the system has capacity to handle all incoming demand",
        claim="Below the lock-bound capacity (phase I) Protego serves the demand: under 1 % of it is lost (the paper "
              "states no number; 1 % is the bound it gives for Fig. 10's drops)",
        how="1 − goodput/demand of Protego at the highest demand at most 0.8 of the 200 kRPS lock-bound capacity, per "
            "seed; regime: such a demand was run",
        measure=_phase1_loss,
        cause="at {at_krps} kRPS ({load_share} of the lock-bound capacity) Protego loses {measured} of the demand: its "
              "pool holds {pool} credits for {sessions} sessions, {drained} of them hold none, and a session's one "
              "credit idles at the client between its requests ({per_session_rps} req/s each), so the requests of "
              "credit-less sessions time out at the client waiting a credit's round trip ({timeout_share} of the "
              "demand; the server drops {sdr} of what it receives); (sessions − drained) × demand per session = "
              "{predicted_krps} kRPS against {admitted_krps} kRPS admitted. The same bound makes the plateau: at "
              "{top_krps} kRPS the pool holds {pool_top} credits, {drained_top} sessions hold none, {timeout_share_top} "
              "of the demand times out, {predicted_krps_top} kRPS predicted against {admitted_krps_top} admitted, "
              "goodput {goodput_krps_top} kRPS against the locks' {capacity_krps} kRPS. The paper's pool rule lets the "
              "pool fall below the session count: one decrease ({decrease_credits} credits) undoes as many increases "
              "of {increase} credit, and a credit more admits a single session's {per_session_rps_top} req/s, lost in the "
              "iteration's count noise. The artifact's pool rule (variant protego_artifact: grow while every credit is out, steps of "
              "one) holds {artifact_pool} credits and loses {artifact_loss} at {at_krps} kRPS, goodput "
              "{artifact_goodput_top_krps} kRPS at {top_krps} kRPS"),
    ClaimSpec(
        # "up to 40 %" is the largest drop rate over the paper's sweep, a value: 5.8 % is not it
        id="fig9-protego-drop-rate", paper=0.40, kind=VALUE, unit="of the requests the server receives",
        paper_ref="Fig. 9, §5.4", quote="maintaining latency within the target delay by dropping up to 40% of incoming requests",
        claim="Protego's drop rate peaks at 40 % of the requests the server receives (the largest over the demands)",
        how="max over demands of Protego's server drop rate (lock drops / (completed + lock drops), the paper's "
            "definition, §5.1), mean over seeds; requests clients drop for lack of a credit are counted apart",
        measure=_drop_rate_max("main", "protego"),
        cause="at {at_krps} kRPS the server drops {measured} of the requests it receives ({server_drops_per_s} per "
              "second); the clients give up {client_drop_rate} more of the demand waiting for credits"),
    ClaimSpec(
        id="fig9-seda-p99-vs-target", paper=3.0, kind=VALUE, unit="× target", paper_ref="Fig. 9, §5.4",
        quote="SEDA suffers from incast because 1,000 clients are each running a control loop separately. As a "
              "result, it shows up to three times higher tail latency than the target delay",
        claim="Synthetic p = 50 %, 10 µs: SEDA's p99 reaches up to 3× the target delay (incast of 1000 control loops)",
        how="max over demands of SEDA's p99 / the 200 µs target, mean over seeds",
        measure=_p99_over_target("main", "seda", overloaded_only=False),
        cause="SEDA's p99 peaks at {p99_us} µs at {at_krps} kRPS, {measured}× the target of {target_us} µs (the "
              "paper's band is {band_lo} to {band_hi}); its clients hold back {client_drop_rate} of the demand and "
              "admitted requests wait {lock_wait_us} µs on average at the locks"),
    ClaimSpec(
        id="fig9-breakwater-collapse", kind=ORDER, side="above", unit="of its peak goodput lost",
        paper_ref="Fig. 9, §5.4", quote="at high load, the admission control or AQM logic of Breakwater is not "
                                         "triggered, leading to congestion collapse",
        claim="Breakwater collapses when only the locks are congested: its signal is CPU queueing, which stays low",
        how="per seed, 1 − Breakwater's goodput at the highest demand / at the demand of its peak mean goodput; "
            "regime: fewer than 90 % of the cores busy there",
        measure=_collapse("main", "breakwater", cpu_not_congested=True),
        cause="Breakwater's goodput is {goodput_top_krps} kRPS at {top_krps} kRPS against {goodput_peak_krps} kRPS at "
              "{peak_krps} kRPS ({cores_busy} of {cores} cores busy, {aqm_drops} AQM drops)"),
    # Fig. 11: the breakdown
    ClaimSpec(
        id="fig11-no-control-collapses", kind=ORDER, side="above", unit="of its peak goodput lost",
        paper_ref="Fig. 11, §5.4", quote="With no overload control, goodput collapses as soon as one of the data paths "
                                          "becomes congested",
        claim="With no overload control, goodput collapses once a data path is congested",
        how="per seed, 1 − goodput at the highest demand / at the demand of the peak mean goodput, no control",
        measure=_collapse("main", "none", cpu_not_congested=False),
        cause="with no control the goodput is {goodput_top_krps} kRPS at {top_krps} kRPS against {goodput_peak_krps} "
              "kRPS at {peak_krps} kRPS (p99 {p99_top_us} µs at the top)"),
    ClaimSpec(
        id="fig11-ac-alone-misses-target", paper=3.0, kind=VALUE, unit="× target", paper_ref="Fig. 11, §5.4",
        quote="when mutexes start to be congested, its goodput degrades with up to three times higher tail latency "
              "than the target",
        claim="Admission control alone bounds the load but not the tail: p99 up to 3× the target when mutexes congest",
        how="max over demands of the p99 of Protego's admission control without ASQM / the 200 µs target, mean over "
            "seeds",
        measure=_p99_over_target("main", "protego_ac", overloaded_only=False, alternative="protego_ac_artifact_pool"),
        cause="AC alone reaches a p99 of {p99_us} µs at {at_krps} kRPS, {measured}× the target (the paper's band is "
              "{band_lo} to {band_hi}): requests wait {lock_wait_us} µs on average at the locks with nothing dropping "
              "them, and its goodput falls to {goodput_krps} kRPS. Its pool holds {pool_mean} credits but {issued_mean} "
              "are out: the credit rule Protego builds on (Breakwater's) takes a session's last credit back only with a "
              "dropped request, and AC alone drops none, so every session that ever held a credit keeps one (the sweep "
              "starts the pool at one per session), and {issued_mean} credits over the locks' capacity is {little_ms} ms "
              "of waiting (Little's law). From the artifact's initial pool (its default, a few per core: variant "
              "protego_ac_artifact_pool) only the sessions credited while the pool grew hold one: {alt_issued} out "
              "(pool {alt_pool}), p99 {alt_p99_over_target}× the target"),
    ClaimSpec(
        id="fig11-asqm-bounds-tail", paper=1.0, kind=BOUND, side="upper", unit="× target", paper_ref="Fig. 11, §5.4",
        quote="By employing ASQM, Protego ensures the tail latency does not miss the target delay by dropping requests",
        claim="Adding ASQM to admission control keeps the p99 within the target delay",
        how="Protego's (AC + ASQM) p99 / the 200 µs target, max over demands above the lock-bound capacity",
        measure=_p99_over_target("main", "protego", overloaded_only=True),
        cause="AC + ASQM reaches a p99 of {p99_us} µs at {at_krps} kRPS ({measured}× the target): admitted requests "
              "wait {lock_wait_us} µs on average at the locks with a budget of {budget_us} µs"),
    ClaimSpec(
        id="fig11-asqm-raises-goodput", kind=ORDER, side="above", unit="of the lock-bound capacity",
        paper_ref="Fig. 11, §5.4", quote="when mutexes start to be congested, its goodput degrades ... By employing "
                                          "ASQM, Protego ensures the tail latency does not miss the target",
        claim="AC + ASQM gets more goodput than admission control alone under lock overload",
        how="(goodput(AC + ASQM) − goodput(AC)) / the lock-bound capacity (200 kRPS) at the highest demand, paired "
            "by seed",
        measure=_asqm_goodput_gain,
        cause="at {top_krps} kRPS AC + ASQM's goodput is {goodput_full_krps} kRPS and AC alone's {goodput_ac_krps} kRPS "
              "of the locks' {capacity_krps} kRPS (p99 {p99_full_us} and {p99_ac_us} µs)"),
    # Fig. 3: p = 20 %, 100 µs, normalised to Protego
    ClaimSpec(
        id="fig3-seda-underutilises", kind=ORDER, side="below", unit="throughput relative to Protego, − 1",
        paper_ref="Fig. 3, §2.2", quote="by considering only the tail latency, it reacts to the most congested path, "
                                         "leading to poor throughput as it underutilizes the uncongested path",
        claim="p = 20 %, 100 µs: SEDA reacts to the most congested path and gets less throughput than Protego",
        how="throughput(SEDA)/throughput(Protego) − 1 at the highest demand, paired by seed",
        measure=_fig3_order("throughput_rps", "seda"),
        cause="at {top_krps} kRPS SEDA's throughput is {other_throughput_krps} kRPS and Protego's "
              "{protego_throughput_krps} kRPS; SEDA's clients hold back {other_client_drop_rate} of the demand"),
    ClaimSpec(
        id="fig3-breakwater-latency", kind=ORDER, side="above", unit="p99 relative to Protego, − 1",
        paper_ref="Fig. 3, §2.2", quote="Breakwater's behavior leads to high utilization and very high latency",
        claim="Breakwater never rate-limits (neither CPU nor network is the bottleneck): p99 far above Protego's",
        how="p99(Breakwater)/p99(Protego) − 1 at the highest demand, paired by seed",
        measure=_fig3_order(P99, "breakwater"),
        cause="at {top_krps} kRPS Breakwater's p99 is {other_p99_us} µs and Protego's {protego_p99_us} µs"),
    ClaimSpec(
        id="fig3-try-lock-drops", kind=ORDER, side="above", unit="drop rate minus Protego's",
        paper_ref="Fig. 3, §2.2", quote="Using try_lock() allows the system to achieve near-ideal latency while "
                                         "suffering from an extremely high drop rate and poor throughput",
        claim="try_lock drops far more of the requests the server receives than Protego",
        how="server drop rate(try_lock) − server drop rate(Protego) at the highest demand, paired by seed",
        measure=_fig3_order(SDR, "try_lock", as_difference=True),
        cause="at {top_krps} kRPS try_lock's server drops {other_server_drop_rate} of what it receives and Protego's "
              "{protego_server_drop_rate}"),
    ClaimSpec(
        id="fig3-try-lock-throughput", kind=ORDER, side="below", unit="throughput relative to Protego, − 1",
        paper_ref="Fig. 3, §2.2", quote="suffering from an extremely high drop rate and poor throughput",
        claim="try_lock gets less throughput than Protego",
        how="throughput(try_lock)/throughput(Protego) − 1 at the highest demand, paired by seed",
        measure=_fig3_order("throughput_rps", "try_lock"),
        cause="at {top_krps} kRPS try_lock's throughput is {other_throughput_krps} kRPS and Protego's "
              "{protego_throughput_krps} kRPS"),
    ClaimSpec(
        id="fig3-try-lock-latency", kind=ORDER, side="below", unit="p99 relative to Protego, − 1",
        paper_ref="Fig. 3, §2.2", quote="Using try_lock() allows the system to achieve near-ideal latency",
        claim="try_lock's p99 is below Protego's (it never waits at a lock)",
        how="p99(try_lock)/p99(Protego) − 1 at the highest demand, paired by seed",
        measure=_fig3_order(P99, "try_lock"),
        cause="at {top_krps} kRPS try_lock's p99 is {other_p99_us} µs and Protego's {protego_p99_us} µs"),
    # Fig. 5: ASQM alone, p = 20 %, 10 µs
    ClaimSpec(
        id="fig5-asqm-bounds-latency", paper=1.0, kind=VALUE, unit="× target", paper_ref="Fig. 5, §3.1",
        quote="Incoming requests that take the congested path will face high queueing delay, leading AQM to start "
              "dropping requests while keeping the tail latency near the target value",
        claim="p = 20 %, 10 µs, ASQM without admission control: in phase II the p99 stays near the target delay",
        how="max over the demands of phase II (between the demands where path 2 and path 1 congest, 125 and "
            "500 kRPS from synthetic.toml) of the p99 / the 200 µs target, mean over seeds",
        measure=_fig5_phase2_p99,
        cause="at {at_krps} kRPS the p99 is {p99_us} µs, {measured}× the target: ASQM compares the lock queue's "
              "oldest waiter's age with the budget ({budget_us} µs), a lower bound of a joiner's wait, so "
              "{over_budget_share} of the lock waits end past the budget and admitted requests wait {lock_wait_us} µs "
              "on average"),
    ClaimSpec(
        id="fig5-phases", kind=ORDER, side="above", unit="slope in phase I minus slope at the highest demands",
        paper_ref="Fig. 5, §3.1", quote="Throughput grows linearly with load increases ... throughput increases "
                                         "sub-linearly ... as the load increases, the throughput doesn't change",
        claim="Throughput grows linearly with demand (phase I), then sub-linearly as one path congests (II), then "
              "flattens (III)",
        how="per seed, throughput/demand at the lowest demand minus the finite-difference slope between the two "
            "highest demands; regime: the demands span from phase I to past phase II",
        measure=_fig5_phases,
        cause="the slope is {first_slope} at {lo_krps} kRPS and {last_slope} up to {top_krps} kRPS"),
    # Fig. 6: Lucene-like
    ClaimSpec(
        id="fig6-lucene-goodput-vs-seda", paper=3.3, kind=RATIO, unit="×", paper_ref="Fig. 6, §5.2",
        quote="Protego achieves up to 3.3 times higher goodput and 17 times lower 99th percentile latency than SEDA",
        claim="Lucene: Protego achieves up to 3.3× SEDA's goodput",
        how="max over demands of goodput(Protego)/goodput(SEDA), paired by seed",
        measure=_ratio_max("fig6", GOODPUT, "protego", "seda"),
        cause="at {at_krps} kRPS Protego's goodput is {protego_goodput_krps} kRPS and SEDA's {seda_goodput_krps} kRPS; "
              "SEDA's clients hold back {seda_client_drop_rate} of the demand, Protego's server drops "
              "{protego_server_drop_rate} of what it receives"),
    ClaimSpec(
        id="fig6-lucene-p99-vs-seda", paper=17.0, kind=RATIO, unit="×", paper_ref="Fig. 6, §5.2",
        quote="17 times lower 99th percentile latency than SEDA (the abstract and §8 say 12.2×)",
        claim="Lucene: up to 17× lower p99 than SEDA",
        how="max over demands of p99(SEDA)/p99(Protego), paired by seed",
        measure=_ratio_max("fig6", P99, "seda", "protego"),
        cause="at {at_krps} kRPS SEDA's p99 is {seda_p99_us} µs and Protego's {protego_p99_us} µs"),
    ClaimSpec(
        id="fig6-lucene-breakwater-collapse", kind=ORDER, side="above", unit="of its peak goodput lost",
        paper_ref="Fig. 6, §5.2", quote="Lucene does not suffer from any CPU congestion. Thus, Breakwater's admission "
                                         "control and AQM are never triggered, leading to congestion collapse",
        claim="Lucene never congests the CPU: Breakwater's goodput collapses once the mutexes are congested",
        how="per seed, 1 − Breakwater's goodput at the highest demand / at the demand of its peak mean goodput; "
            "regime: fewer than 90 % of the cores busy there",
        measure=_collapse("fig6", "breakwater", cpu_not_congested=True),
        cause="Breakwater's goodput is {goodput_low_krps} kRPS at {low_krps} kRPS and {goodput_top_krps} kRPS at "
              "{top_krps} kRPS, its peak over the demands run being {goodput_peak_krps} kRPS at {peak_krps} kRPS, with "
              "a p99 of {p99_top_us} µs at the top"),
    ClaimSpec(
        id="fig6-seda-goodput-cap", paper=500.0 / 600.0, kind=FRACTION, unit="of the hot lock's capacity",
        paper_ref="Fig. 6, §5.2", quote="mutexes become congested with demand exceeding 600 RPS. SEDA ... limits the "
                                         "system's goodput to 500 RPS",
        claim="Lucene: SEDA reacts to the most congested path and limits goodput to 500 RPS, 0.83 of the 600 RPS "
              "at which the mutexes congest",
        how="SEDA's largest mean goodput over demands / the demand at which the hot TermDocs lock saturates "
            "(lucene.toml: 1 s / (its share × its mean hold time))",
        measure=_seda_cap("fig6"),
        cause="SEDA's goodput peaks at {seda_goodput} req/s at {at_krps} kRPS against the hot lock's {capacity} req/s; "
              "its clients hold back {seda_client_drop_rate} of the demand there, its p99 is {seda_p99_us} µs"),
    ClaimSpec(
        id="fig6-seda-p99-vs-target", paper=10.0, kind=BOUND, side="lower", unit="× target", paper_ref="Fig. 6, §5.2",
        quote="SEDA's tail latency is bounded but more than 10 times higher than the target latency because of incast",
        claim="Lucene: SEDA's p99 is more than 10× the 40 ms target",
        how="max over demands of SEDA's p99 / the 40 ms target, mean over seeds",
        measure=_p99_over_target("fig6", "seda", overloaded_only=False),
        cause="SEDA's p99 peaks at {p99_us} µs at {at_krps} kRPS, {measured}× the target of {target_us} µs; its "
              "clients hold back {client_drop_rate} of the demand"),
    # Fig. 7: Memcached-like VAR
    ClaimSpec(
        id="fig7-var-goodput-vs-seda", paper=1.6, kind=RATIO, unit="×", paper_ref="Fig. 7, §5.3",
        quote="achieving 1.6 times higher goodput than SEDA and 7 times higher goodput than Breakwater",
        claim="Memcached VAR: Protego gets up to 1.6× SEDA's goodput",
        how="max over demands of goodput(Protego)/goodput(SEDA), paired by seed",
        measure=_ratio_max("fig7", GOODPUT, "protego", "seda"),
        cause="at {at_krps} kRPS Protego's goodput is {protego_goodput_krps} kRPS and SEDA's {seda_goodput_krps} kRPS "
              "(SEDA's p99 {seda_p99_us} µs, its clients hold back {seda_client_drop_rate} of the demand)"),
    ClaimSpec(
        id="fig7-var-goodput-vs-breakwater", paper=7.0, kind=RATIO, unit="×", paper_ref="Fig. 7, §5.3",
        quote="achieving 1.6 times higher goodput than SEDA and 7 times higher goodput than Breakwater",
        claim="Memcached VAR: Protego gets up to 7× Breakwater's goodput",
        how="max over demands of goodput(Protego)/goodput(Breakwater), paired by seed",
        measure=_ratio_max("fig7", GOODPUT, "protego", "breakwater"),
        cause="at {at_krps} kRPS Protego's goodput is {protego_goodput_krps} kRPS and Breakwater's "
              "{breakwater_goodput_krps} kRPS (Breakwater's p99 {breakwater_p99_us} µs, {breakwater_cores_busy} "
              "cores busy)"),
    ClaimSpec(
        id="fig7-var-p99-vs-seda", paper=5.7, kind=RATIO, unit="×", paper_ref="§1 (Fig. 7)",
        quote="when Memcached is handling a SET-heavy workload, Protego achieves up to 1.6× more goodput with 5.7× "
              "lower 99th percentile latency compared to SEDA",
        claim="Memcached VAR: up to 5.7× lower p99 than SEDA",
        how="max over demands of p99(SEDA)/p99(Protego), paired by seed",
        measure=_ratio_max("fig7", P99, "seda", "protego"),
        cause="at {at_krps} kRPS SEDA's p99 is {seda_p99_us} µs and Protego's {protego_p99_us} µs"),
    ClaimSpec(
        id="fig7-dropped-set-cleanup", paper=1.0, kind=CHECK, side="upper", unit="cleanups per item-lock drop",
        paper_ref="§5.3", quote="it cleans up the intermediate state processed by the request, freeing up the chunk "
                                 "allocated to the request",
        claim="Model check: a dropped request re-takes the slab lock only if it allocated (a SET dropped at its item "
              "lock), so slab cleanups never exceed the drops at the item locks",
        how="per seed, Protego's slab-lock cleanups / its drops at the item locks at the highest demand "
            "(lock_control.locks.*), must be <= 1",
        measure=_cleanup_check,
        cause="{cleanups} slab cleanups for {item_drops} item-lock drops at {top_krps} kRPS"),
    # Fig. 8: two replicas, one retry
    ClaimSpec(
        id="fig8-replicas-p99-below-slo", paper=1.7, kind=RATIO, unit="SLO / p99", paper_ref="Fig. 8, §5.3",
        quote="The overall 99th percentile end-to-end latency achieved by Protego is higher than the per-server "
              "target delay ... However, it is still 1.7× lower than the SLO",
        claim="With two replicas and one retry, the end-to-end p99 stays 1.7× below the SLO of twice the target",
        how="per seed, the SLO (220 µs) / the p99 at the demand of the largest mean p99; a request is resent once, "
            "after a failure reply or after 10 µs without a credit (clients.retry_timeouts)",
        measure=_replicas_slo_ratio,
        cause="the p99 with replicas is {p99_us} µs at {at_krps} kRPS against the SLO of {slo_us} µs: "
              "{retried_share} of the completed requests were resent, the first server drops {server_drop_rate} of "
              "what it receives (a single server's p99: {single_server_p99_us} µs)"),
    ClaimSpec(
        id="fig8-failure-replies-within-target", paper=TARGET_US["fig7"], kind=BOUND, side="upper", unit="µs",
        paper_ref="Fig. 8, §3.2, §5.3",
        quote="Protego drops the requests before they wait for the contended mutex if the delay at the mutex exceeds "
              "a request's budget. Thus, most of the failure messages are delivered within the target delay",
        claim="Failure replies to the requests the server drops reach the clients within the target delay (110 µs)",
        how="the p99 of creation → failure reply at the client of the requests a single Protego server drops "
            "(fig7's protego variant: its histogram holds server drops only, no local credit timeouts), largest "
            "over demands with drops, mean over seeds",
        measure=_failure_replies,
        cause="at {at_krps} kRPS the failure replies' p99 is {measured} µs against the target of {target_us} µs: "
              "requests dropped at an item lock ({item_drops} of {server_drops} drops) first waited at the slab lock, "
              "whose p99 wait is {slab_wait_p99_us} µs ({slab_waits_over_budget} waits ended past the budget of "
              "{budget_us} µs)"),
    # Fig. 10: synthetic p = 50 %, 1 µs (the CPU saturates too)
    ClaimSpec(
        id="fig10-1us-p99-within-target", paper=TARGET_US["fig10"], kind=BOUND, side="upper", unit="µs",
        paper_ref="Fig. 10, §5.4", quote="Protego maintains the tail latency lower than the target delay while dropping "
                                          "less than 1% of the requests in a CPU-bounded scenario",
        claim="Synthetic p = 50 %, 1 µs, CPU-bound: Protego keeps p99 below the 110 µs target",
        how="max over demands of Protego's p99, mean over seeds; regime: the busiest system's cores >= 95 % busy at "
            "the highest demand",
        measure=_p99_over_target("fig10", "protego", overloaded_only=False, cpu_regime=True, in_target_units=False),
        cause="Protego's p99 at {at_krps} kRPS is {measured} µs; the server drops {server_drop_rate} of what it "
              "receives, clients give up {client_drop_rate} of the demand"),
    ClaimSpec(
        id="fig10-protego-drops-below-1pct", paper=0.01, kind=BOUND, side="upper",
        unit="of the requests the server receives", paper_ref="Fig. 10, §5.4",
        quote="while dropping less than 1% of the requests in a CPU-bounded scenario",
        claim="Synthetic p = 50 %, 1 µs, CPU-bound: Protego drops less than 1 % of the requests",
        how="max over demands of Protego's server drop rate, mean over seeds; regime as above",
        measure=_drop_rate_max("fig10", "protego", cpu_regime=True),
        cause="at {at_krps} kRPS the server drops {measured} of the requests it receives; the clients give up "
              "{client_drop_rate} more of the demand waiting for credits"),
    ClaimSpec(
        id="fig10-seda-p99-vs-target", paper=3.0, kind=VALUE, unit="× target", paper_ref="Fig. 10, §5.4",
        quote="SEDA still suffers from high tail latency up to three times of the target delay because of the incast",
        claim="Synthetic p = 50 %, 1 µs: SEDA's p99 reaches up to 3× the 110 µs target",
        how="max over demands of SEDA's p99 / the 110 µs target, mean over seeds; regime as above",
        measure=_p99_over_target("fig10", "seda", overloaded_only=False, cpu_regime=True),
        cause="SEDA's p99 peaks at {p99_us} µs at {at_krps} kRPS, {measured}× the target of {target_us} µs; its "
              "clients hold back {client_drop_rate} of the demand"),
    # Fig. 12: t_e
    ClaimSpec(
        id="fig12-te-tradeoff", paper=-0.23, kind=GAIN, unit="goodput change", paper_ref="Fig. 12, §5.4",
        quote="With t_e = 50%, it achieves 23% less goodput and 4× lower drop rate than t_e = 1%",
        claim="t_e = 50 % gives 23 % less goodput than t_e = 1 % (300 kRPS)",
        how="per seed, goodput(t_e = 0.5)/goodput(t_e = 0.01) − 1 at 300 kRPS",
        measure=_fig12(GOODPUT, 0.5, 0.01, lambda a, b: safe_ratio(a, b) - 1.0, "te_goodput"),
        cause="goodput is {goodput_hi_krps} kRPS at t_e = {te_hi} and {goodput_lo_krps} kRPS at t_e = {te_lo} "
              "(credit pools {pool_hi} and {pool_lo}); the clients give up {cdr_hi} and {cdr_lo} of the demand"),
    ClaimSpec(
        id="fig12-te-drop-ratio", paper=4.0, kind=RATIO, unit="×", paper_ref="Fig. 12, §5.4",
        quote="With t_e = 50%, it achieves 23% less goodput and 4× lower drop rate than t_e = 1%",
        claim="t_e = 50 % drops 4× fewer of the received requests than t_e = 1 % (300 kRPS)",
        how="per seed, server drop rate(t_e = 0.01)/server drop rate(t_e = 0.5) at 300 kRPS",
        measure=_fig12(SDR, 0.5, 0.01, lambda a, b: safe_ratio(b, a), "te_drops"),
        cause="the server drops {sdr_lo} of what it receives at t_e = {te_lo} and {sdr_hi} at t_e = {te_hi} "
              "(credit pools {pool_lo} and {pool_hi}); the clients give up {cdr_lo} and {cdr_hi} of the demand"),
    ClaimSpec(
        id="fig12-small-te-flat", paper=0.0, kind=GAIN, unit="goodput change", paper_ref="Fig. 12, §5.4",
        quote="For all values of t_e smaller than 10%, the goodput and drop rate don't change",
        claim="Goodput does not change between t_e = 1 % and t_e = 10 % (300 kRPS)",
        how="per seed, goodput(t_e = 0.1)/goodput(t_e = 0.01) − 1 at 300 kRPS: reproduced when its CI holds 0",
        measure=_fig12(GOODPUT, 0.1, 0.01, lambda a, b: safe_ratio(a, b) - 1.0, "te_flat"),
        cause="goodput is {goodput_hi_krps} kRPS at t_e = {te_hi} and {goodput_lo_krps} kRPS at t_e = {te_lo} "
              "(credit pools {pool_hi} and {pool_lo}; server drop rates {sdr_hi} and {sdr_lo})"),
    # Fig. 13: Memcached-like USR (the paper's stated limitation)
    ClaimSpec(
        id="fig13-usr-below-breakwater", paper=0.77, kind=RATIO, unit="× Breakwater's goodput",
        paper_ref="Fig. 13, §5.5", quote="With clients' demand of 3.6 million RPS, Protego achieves 37% less goodput "
                                          "than SEDA and 23% less goodput than Breakwater",
        claim="Memcached USR (CPU-bound): Protego's goodput is 0.77× Breakwater's",
        how="goodput(Protego)/goodput(Breakwater) at 3.6 M req/s, paired by seed; regime: with no overload control "
            "the p99 exceeds the target and the cores are >= 95 % busy (the demand overloads the server)",
        measure=_fig13("breakwater"),
        cause="Protego's goodput is {protego_goodput_mrps} M req/s and Breakwater's {other_goodput_mrps} M req/s at "
              "{demand_mrps} M req/s: Protego's pool holds {protego_pool} credits for {sessions} sessions, "
              "{protego_drained} of them hold none and their requests time out at the client ({protego_client_drop_rate} "
              "of the demand), leaving its cores {protego_cores_busy} busy against Breakwater's {other_cores_busy}; the "
              "model charges no CPU for the credit management the paper blames for the rest"),
    ClaimSpec(
        id="fig13-usr-below-seda", paper=0.63, kind=RATIO, unit="× SEDA's goodput", paper_ref="Fig. 13, §5.5",
        quote="With clients' demand of 3.6 million RPS, Protego achieves 37% less goodput than SEDA",
        claim="Memcached USR (CPU-bound): Protego's goodput is 0.63× SEDA's",
        how="goodput(Protego)/goodput(SEDA) at 3.6 M req/s, paired by seed; regime as above",
        measure=_fig13("seda"),
        cause="Protego's goodput is {protego_goodput_mrps} M req/s and SEDA's {other_goodput_mrps} M req/s at "
              "{demand_mrps} M req/s: SEDA's clients hold back {other_drop_rate} of the demand and what they send "
              "misses the target (SEDA's cores {other_cores_busy} busy, Protego's {protego_cores_busy})"),
]


# ---------------------------------------------------------------------------------------------
# running and analysis


def row_with_locks(point: Any, s: dict[str, Any]) -> dict[str, Any]:
    """A sweep row of ``point`` from its run's summary ``s`` (as the sweep runner's, per-lock
    counters ``lock_control.locks.NAME.FIELD`` included) plus the measured window's resends
    (``requests.retried``)."""
    from .runner import flatten

    row = flatten(s)
    row.pop("seed", None)
    apps = s.get("applications") or []
    row["requests.retried"] = float(sum(a.get("retries", 0) for a in apps))
    return {"point": point.index, **point.params, **row}


def sub_spec(name: str, quick: bool, seeds: int | None = None, extra: RunCondition | None = None) -> SweepSpec:
    """Sub-sweep ``name`` (experiments/protego/NAME.toml) with ``extra`` (a sensitivity run's cost
    setting) appended to its variants' overrides. ``extra.sets`` sees each variant as
    ``NAME/VARIANT`` (``fig10/protego``), so that a cost can tell the figures' sweeps apart (their
    variants share the main sweep's names)."""
    from dataclasses import replace

    spec = SweepSpec.load(experiments_dir() / "protego" / f"{name}.toml", quick=quick, seeds=seeds)
    if extra is not None:
        spec.variants = [replace(v, set=tuple(v.set) + tuple(extra.sets(replace(v, name=f"{name}/{v.name}"))))
                         for v in spec.variants]
    return spec


def sub_points(ctx: Context, names: Sequence[str]) -> dict[str, list[Point]]:
    """The points of sub-sweeps ``names`` (experiments/protego/NAME.toml) with the main sweep's
    profile and seed count, and under the run's cost setting if it has one (``--sensitivity``):
    from the spec as run, so that they are declared before the sweep."""
    points = {}
    for name in names:
        spec = sub_spec(name, quick=ctx.quick, seeds=len(ctx.spec.seeds), extra=ctx.extra)
        points[name] = spec.points()
        if ctx.extra is not None:
            from ..sweep.engine import validate_points

            validate_points(spec, points[name])
    return points


def sub_tasks(points: dict[str, list[Point]]) -> list[tuple]:
    """The sub-sweeps' runs, in order, as ``summary_of`` takes them."""
    return [(p.scenario, p.seed, tuple(p.overrides)) for ps in points.values() for p in ps]


def extra_runs(ctx: Context) -> list[ExtraRuns]:
    """The sub-sweeps' runs (:func:`sub_points`), declared before the sweep."""
    from ..sweep.worker import summary_of

    return [ExtraRuns(summary_of, tuple(sub_tasks(sub_points(ctx, SUBSWEEPS))))]


def run_subs(ctx: Context, names: Sequence[str]) -> dict[str, pd.DataFrame]:
    """Runs sub-sweeps ``names`` (:func:`sub_points`) as extra runs of one pool
    (:meth:`Context.run_extra`: instead of a pool, and its workers' start-up, per sub-sweep)."""
    from .runner import _tidy
    from ..sweep.worker import summary_of

    points = sub_points(ctx, names)
    todo = [p for name in names for p in points[name]]
    summaries = ctx.run_extra(summary_of, sub_tasks(points))
    rows = iter([row_with_locks(p, s) for p, s in zip(todo, summaries)])
    out = {}
    for name in names:
        out[name] = _tidy(pd.DataFrame([next(rows) for _ in points[name]]))
        out[name].to_parquet(ctx.out / f"{name}.parquet", index=False)
    return out


# ---------------------------------------------------------------------------------------------
# model costs (`reproduce protego --sensitivity`)
#
# Costs that come from a fit or from the model's own estimate, not from the paper's settings. The
# network stack's cost per request is charged only where the claims are about a CPU-bound regime
# (Fig. 10, Fig. 13); the lock-bound sweeps (the main one, Fig. 3, 5, 6, 7, 12: their locks, not
# their cores, are the bottleneck) run without it, so it has no default there to scale.
# ASQM's drop_cost_ns is left at 0 by every sweep: a zero has nothing to scale.

# Fig. 10's fit (experiments/protego/synthetic-p50-1us.toml): 4 cores / 1.1 M req/s - 1 µs.
STACK_NS = 2640.0
STACK_SCENARIO = "synthetic-p50-1us.toml"


@functools.lru_cache(maxsize=1)
def _stack_steps() -> tuple[str, ...]:
    """The keys of Fig. 10's stack steps: the constant compute steps of STACK_NS before the mutex
    (``workload.types.I.paths.J.steps.K.time.value_us``), read from its scenario file."""
    raw = tomllib.loads((experiments_dir() / "protego" / STACK_SCENARIO).read_text(encoding="utf-8"))
    keys = []
    for i, t in enumerate(raw["workload"]["types"]):
        for j, path in enumerate(t.get("paths", [])):
            for k, step in enumerate(path["steps"]):
                hold = step.get("time") or {}
                if (step["op"] == "compute" and hold.get("dist") == "constant"
                        and math.isclose(hold["value_us"] * 1e3, STACK_NS)):
                    keys.append(f"workload.types.{i}.paths.{j}.steps.{k}.time.value_us")
    if not keys:
        raise ValueError(f"{STACK_SCENARIO}: no compute step of {STACK_NS / 1e3:g} µs (the stack cost) to scale")
    return tuple(keys)


def _stack(variant: Any, ns: float) -> tuple[str, ...]:
    """The stack's cost per request at ``ns``: Fig. 10's compute step before the mutex, Fig. 13's
    ``server.packet_cost_ns`` (its programs start outside the locks); nothing elsewhere."""
    sweep = variant.name.split("/", 1)[0] if "/" in variant.name else "main"
    if sweep == "fig10":
        return tuple(f"{k}={ns / 1e3:g}" for k in _stack_steps())
    if sweep == "fig13":
        return (f"server.packet_cost_ns={ns:g}",)
    return ()


def _cleanup(variant: Any, ns: float) -> tuple[str, ...]:
    """The cleanup's hold of ``cleanup_lock`` at ``ns``, on the variants that have one."""
    if any(x.startswith("server.lock_control.cleanup_lock=") for x in variant.set):
        return (f"server.lock_control.cleanup_ns={ns:g}",)
    return ()


COSTS = (
    Cost("stack_ns", STACK_NS,
         "fitted on Protego Fig. 10 (§5.4: the 4 hyper-threads saturate at 1.1 M req/s of 1 µs requests, "
         "4 / 1.1 M - 1 µs = 2.64 µs per request; the caladan-protego stack profile's value); charged as the "
         "compute step before the mutex in Fig. 10's application (synthetic-p50-1us.toml) and as "
         "server.packet_cost_ns in Fig. 13's (fig13.toml)",
         _stack),
    Cost("server.lock_control.cleanup_ns", 500.0,
         "the Memcached-like model's own estimate of freeing a dropped SET's chunk under the slab lock "
         "(memcached-var.toml, Fig. 7, 8 and 13's Protego); no source measures it",
         _cleanup),
)


# The paper's central claim, as its abstract makes it: the abstract's 12.2× is its Memcached/Lucene
# summary; the claim judged is Lucene's (Fig. 6), where the 3.3× comes from.
THESIS = Thesis(
    statement="Under lock contention, performance-driven admission control with ASQM achieves up to 3.3× more "
              "goodput and a many times lower p99 than the state-of-the-art overload controllers while avoiding "
              "congestion collapse, which Breakwater's CPU-queueing signal does not",
    source="abstract",
    claims=("fig6-lucene-goodput-vs-seda", "fig6-lucene-p99-vs-seda", "fig9-breakwater-collapse",
            "fig9-protego-p99-within-target"))

FIGURES = (
    Figure("protego_fig9_fig11.png", "Fig. 9 and 11 (headline): synthetic two-path application, p = 50 %, 10 µs: "
           "goodput, p99, server and client drop rates and busy cores against demand, per overload controller "
           "(mean over seeds, bars: 95 % CI)"),
    Figure("protego_fig3.png", "Fig. 3: synthetic, p = 20 %, 100 µs: the same five panels against demand"),
    Figure("protego_fig5.png", "Fig. 5: synthetic, p = 20 %, 10 µs, ASQM only: the same five panels"),
    Figure("protego_fig6.png", "Fig. 6: Lucene-like server: the same five panels against demand"),
    Figure("protego_fig7.png", "Fig. 7 and 8: Memcached-like server, VAR workload: the same five panels"),
    Figure("protego_fig10.png", "Fig. 10: synthetic, p = 50 %, 1 µs: the same five panels against demand"),
    Figure("protego_fig12.png", "Fig. 12: Protego's sensitivity to its efficiency threshold t_e (goodput, drop "
           "rates at the server and at the clients)"),
    Figure("protego_fig13.png", "Fig. 13: Memcached-like, USR, 3.6 M req/s demand: goodput, p99 and drop rates per "
           "controller (bars: 95 % CI)"),
)


@register("protego", paper="Protego (NSDI'23)", figure="Fig. 3, 5, 6, 7, 8, 9, 10, 11, 12, 13",
          description="Overload control under lock contention: Breakwater's collapse when only locks are congested, "
                      "SEDA's conservative rate limits, try_lock's drops, Protego's performance-driven admission "
                      "control with ASQM, on the synthetic two-path application, Lucene-like and Memcached-like "
                      "servers",
          spec="protego/sweep.toml", claims=CLAIMS, costs=COSTS, thesis=THESIS,
          figures=FIGURES, extra_runs=extra_runs)
def analyze(ctx: Context) -> list[Claim]:
    ctx.require_variants("breakwater", "seda", "protego", "protego_ac", "none")
    frames = {"main": ctx.results, **run_subs(ctx, SUBSWEEPS)}
    data = Data.of(frames, capacities())
    plot_vs_load(ctx, frames["main"], "main", "Fig. 9 and 11: synthetic, p = 50 %, 10 µs", "protego_fig9_fig11.png")
    for name, title in (("fig3", "Fig. 3: synthetic, p = 20 %, 100 µs"), ("fig5", "Fig. 5: synthetic, p = 20 %, 10 µs, ASQM only"),
                        ("fig6", "Fig. 6: Lucene-like"), ("fig7", "Fig. 7 and 8: Memcached-like, VAR"),
                        ("fig10", "Fig. 10: synthetic, p = 50 %, 1 µs")):
        plot_vs_load(ctx, frames[name], name, title, f"protego_{name}.png")
    plot_fig12(ctx, frames["fig12"])
    plot_bars(ctx, frames["fig13"], "Fig. 13: Memcached-like, USR, 3.6 M req/s demand", "protego_fig13.png")
    return judge_all(CLAIMS, data)


# ---------------------------------------------------------------------------------------------
# figures

_PANELS = [(GOODPUT, "goodput (req/s)"), (P99, "p99 latency (µs)"), (SDR, "server drop rate (paper's)"),
           (CDR, "dropped at the clients"), ("cores.busy_mean", "cores busy (mean)")]


def plot_vs_load(ctx: Context, df: pd.DataFrame, name: str, title: str, filename: str) -> None:
    if LOAD not in df.columns or df[LOAD].nunique() < 1:
        return
    plt = setup_plt()
    agg = aggregate(derived(df), ["variant", LOAD])
    # Two rows of three: five panels in one row shrink below reading size in the report; the
    # sixth cell holds the legend.
    fig, grid = plt.subplots(2, 3, figsize=(15, 7.6), constrained_layout=True)
    axes = list(grid.flat[:len(_PANELS)])
    for v in sorted(set(agg["variant"])):
        c = agg[agg["variant"] == v].sort_values(LOAD)
        for ax, (m, lab) in zip(axes, _PANELS):
            if m not in c.columns:
                continue
            err = c.get(f"{m}.ci95")
            err = None if err is None or np.all(~np.isfinite(err.to_numpy(float))) else np.nan_to_num(err.to_numpy(float))
            ax.errorbar(c[LOAD] / 1e3, c[m], yerr=err, marker="o", ms=4, lw=1.3, capsize=2, color=COLORS.get(v),
                        label=v)
            ax.set_ylabel(lab)
    axes[1].axhline(TARGET_US.get(name, math.nan), color="black", lw=0.7, ls=":", label="target delay")
    axes[1].set_yscale("log")
    for ax in axes:
        ax.set_xlabel("clients' demand (kRPS)")
        ax.grid(alpha=0.3)
    spare = grid.flat[len(_PANELS)]
    spare.axis("off")
    handles, labels = axes[1].get_legend_handles_labels()
    spare.legend(handles, labels, loc="center", fontsize=9)
    fig.suptitle(f"{title}; mean over seeds, bars: 95 % CI", fontsize=10)
    ctx.save_figure(fig, filename)


def plot_bars(ctx: Context, df: pd.DataFrame, title: str, filename: str) -> None:
    plt = setup_plt()
    agg = aggregate(derived(df), ["variant"])
    panels = ((GOODPUT, "goodput (req/s)"), (P99, "p99 latency (µs)"), (SDR, "server drop rate"), (CDR, "dropped at the clients"))
    fig, axes = plt.subplots(1, len(panels), figsize=(15, 3.8), constrained_layout=True)
    for ax, (m, lab) in zip(axes, panels):
        err = np.nan_to_num(agg[f"{m}.ci95"].to_numpy(float)) if f"{m}.ci95" in agg.columns else None
        ax.bar(agg["variant"], agg[m], yerr=err, color=[COLORS.get(v, "gray") for v in agg["variant"]], capsize=3)
        ax.set_ylabel(lab)
        ax.grid(alpha=0.3, axis="y")
    fig.suptitle(f"{title}; mean over seeds, bars: 95 % CI", fontsize=10)
    ctx.save_figure(fig, filename)


def plot_fig12(ctx: Context, df: pd.DataFrame) -> None:
    plt = setup_plt()
    agg = aggregate(derived(df), ["variant", TE]).sort_values(TE)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    a1.errorbar(agg[TE], agg[GOODPUT] / 1e3, yerr=np.nan_to_num(agg[f"{GOODPUT}.ci95"].to_numpy(float)) / 1e3,
                marker="o", capsize=2)
    a1.set_ylabel("goodput (kRPS)")
    a2.errorbar(agg[TE], agg[SDR], yerr=np.nan_to_num(agg[f"{SDR}.ci95"].to_numpy(float)), marker="o", capsize=2,
                label="at the server (paper's)")
    a2.errorbar(agg[TE], agg[CDR], yerr=np.nan_to_num(agg[f"{CDR}.ci95"].to_numpy(float)), marker="s", capsize=2,
                label="at the clients (no credit)")
    a2.set_ylabel("drop rate")
    a2.legend(fontsize=7)
    for a in (a1, a2):
        a.set_xscale("log")
        a.set_xlabel("efficiency threshold t_e")
        a.grid(alpha=0.3)
    fig.suptitle("Fig. 12: Protego's sensitivity to t_e, synthetic p = 50 %, 10 µs, 300 kRPS", fontsize=10)
    ctx.save_figure(fig, "protego_fig12.png")
