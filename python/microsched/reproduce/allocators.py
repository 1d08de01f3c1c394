"""``microsched reproduce allocators``: the core allocators of CoreSync's baselines (issue 3).

Static, Shenango (as the CoreSync artifact ran it: Caladan's ``simple`` policy with the delay
rule), original Shenango (standing queue; no claim is about it), Caladan (``ias``, poll 2, 5, 10
and 20 µs with delay threshold 5 µs, and threshold 10 µs at poll 2 µs), Utilization Range
(75–95 %) and Delay Range (0.5–1 µs and 1–4 µs) on 16 cores, exponential 10 µs requests, per-core
queues with work stealing, 100 sessions, RTT 10 µs, no overload control, loads 0.1–0.9
(``experiments/allocators/sweep.toml``).

Figures: p99 latency against CPU utilization, one curve per policy (CoreSync Fig. 3's baselines
and Fig. 1's Caladan poll periods), and allocated LC / best-effort cores against load.

Claims (:data:`CLAIMS`) are declared as data and judged by :mod:`.claims`. CoreSync states its
Fig. 3 numbers against CoreSync (1.7× Shenango's p99, Caladan +16 % p99 and −2 % utilization,
1.4× / 1.2× the utilization of Utilization Range / Delay Range at medium load): the ratio of two
of them against the same CoreSync is a ratio between two baselines, and that is the number each
baseline claim here is judged by (CoreSync itself is the ``coresync`` reproduction's). Fig. 1
and the statements without a number are ``order``/``monotone``/``bound`` claims; the core
accounting is a model check. Every seed runs the same requests under every policy (common random
numbers), so comparisons are paired per seed and reported as the mean with its 95 % interval.

This reproduction runs without overload control; the paper ran every baseline under Breakwater
(which, below capacity, admits all load). The ``coresync`` reproduction runs them with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Callable

import numpy as np
import pandas as pd

from .claims import (BOUND, CHECK, MONOTONE, ORDER, RATIO, Cause, Claim, ClaimSpec, Condition, Measured,
                     judge_all)
from .framework import Context, Figure, register
from .stats import Seeds, safe_ratio
from ..sweep.runner import mean_ci95

LOAD = "load.fraction"
LOW, MEDIUM, HIGH = 0.2, 0.5, 0.8
LOADS_CHECKED = (LOW, MEDIUM, HIGH)  # CoreSync's low, medium and high loads (§II-B, §IV-A)
STATIC = "static"
SHENANGO = "shenango"  # the CoreSync artifact's "Shenango" (kind = "shenango_artifact")
CALADAN = "caladan"    # `ias`, poll 2 µs
UR, DR, DR14 = "utilization_range", "delay_range", "delay_range-1-4"
REACTIVE = (SHENANGO, CALADAN)
PROACTIVE = (UR, DR, DR14)
CALADAN_POLL = ((CALADAN, 2), ("caladan-5", 5), ("caladan-10", 10))  # Fig. 1
CALADAN_BEYOND = (("caladan-10", 10), ("caladan-20", 20))           # "beyond 10 µs"
CALADAN_THRESHOLD = ((CALADAN, 5), ("caladan-t10", 10))              # the queueing delay threshold (µs)
FIG3 = (STATIC, SHENANGO, "shenango-original", CALADAN, UR, DR, DR14)
FIG1 = (CALADAN, "caladan-5", "caladan-10", "caladan-20", "caladan-t10")
NAMES = {STATIC: "Static", SHENANGO: "Shenango", "shenango-original": "original Shenango", CALADAN: "Caladan",
         "caladan-5": "Caladan (poll 5 µs)", "caladan-10": "Caladan (poll 10 µs)",
         "caladan-20": "Caladan (poll 20 µs)", "caladan-t10": "Caladan (threshold 10 µs)", UR: "Utilization Range",
         DR: "Delay Range",
         DR14: "Delay Range 1–4 µs"}

COLORS = {
    "static": "black", "shenango": "tab:blue", "shenango-original": "tab:cyan", "caladan": "tab:orange",
    "caladan-5": "tab:red", "caladan-10": "tab:brown", "caladan-20": "tab:olive", "caladan-t10": "gold",
    "utilization_range": "tab:green", "delay_range": "tab:purple", "delay_range-1-4": "tab:pink",
}
MARKERS = {
    "static": "s", "shenango": "o", "shenango-original": "h", "caladan": "^", "caladan-5": "v",
    "caladan-10": "<", "caladan-20": ">", "caladan-t10": "*", "utilization_range": "D", "delay_range": "P",
    "delay_range-1-4": "X",
}

P99 = "latency_us.p99"
QD99 = "queueing_delay_us.p99"
QDMEAN = "queueing_delay_us.mean"
CORES = "cores.allocated_mean"
BUSY = "cores.busy_mean"
UTIL = "cpu_utilization"
BE = "be_cores_mean"
SEARCH_NS = "core_time.search_ns"
BUSY_NS = "core_time.busy_ns"
EPS_CORES = 1e-6  # "= machine" to float precision (the summary's means are f64 sums)
COMPLETE = 0.99   # below capacity: at least this share of the window's requests completes in it

# CoreSync §IV-B / Fig. 3, each against CoreSync at medium load (0.5 of capacity).
PAPER_SHENANGO_P99 = 1.7    # "CoreSync improves tail latency by 1.7× compared to Shenango"
PAPER_CALADAN_P99 = 1.16    # Caladan: "at the expense of latency (an increase of 16%)"
PAPER_CALADAN_UTIL = 0.98   # Caladan: "slightly better utilization (a reduction of 2%)"
PAPER_UR_UTIL = 1.4         # "improves CPU usage by 1.4× and 1.2× over Utilization Range and Delay Range"
PAPER_DR_UTIL = 1.2
PAPER_DR_P99 = (1.03, 1.21)  # "it improves tail latency compared to Delay Range by 3-21%"


@dataclass
class Data:
    """What the claims are measured on: one row per run (``variant``, ``seed``, ``load.fraction``
    and the summary's metrics) and the simulated time of each run per core (warm-up + window,
    ns), which the core-time conservation check needs."""

    runs: pd.DataFrame
    run_ns: float | None = None

    @cached_property
    def seeds(self) -> Seeds:
        return Seeds(self.runs, key=LOAD)



# ---------------------------------------------------------------------------------------------
# measuring helpers


def _stat(s: Seeds, variant: str, load: float, metric: str) -> float:
    return s.mean(variant, load, metric)


def _paired(s: Seeds, load: float, metric: str, fn: Callable[..., float], *variants: str) -> tuple[float, float, int]:
    return mean_ci95(s.per_seed(load, metric, fn, *variants))


def _below_capacity(s: Seeds, variants: tuple[str, ...], load: float) -> list[Condition]:
    """The paper's below-capacity regime: every request of the window completes in it (no
    overload control here, so nothing is dropped; a backlog would show as missing completions)."""
    shares = {v: safe_ratio(s.mean(v, load, "requests.completed"), s.mean(v, load, "requests.generated"))
              for v in variants}
    worst = min(shares, key=lambda v: shares[v] if math.isfinite(shares[v]) else -1.0)
    return [Condition(f"completed / generated requests of {NAMES.get(worst, worst)} at load {load:g} "
                      f"(below capacity)", shares[worst], ">=", COMPLETE)]


def _point(s: Seeds, variant: str, load: float, prefix: str) -> dict[str, float]:
    """A variant's figures at one load, as evidence: cores, busy cores, p99, queueing delay p99,
    cores searching for work (search core time / run time)."""
    cores, busy = _stat(s, variant, load, CORES), _stat(s, variant, load, BUSY)
    ev = {f"{prefix}_cores": cores, f"{prefix}_busy": busy, f"{prefix}_p99": _stat(s, variant, load, P99),
          f"{prefix}_qd99": _stat(s, variant, load, QD99),
          f"{prefix}_busy_share": safe_ratio(busy, cores)}
    busy_ns, search_ns = _stat(s, variant, load, BUSY_NS), _stat(s, variant, load, SEARCH_NS)
    ev[f"{prefix}_searching"] = safe_ratio(search_ns, busy_ns) * busy if busy_ns > 0 else math.nan
    return ev


def _param(d: Data, variant: str, column: str) -> float | None:
    """A variant's setting as the run recorded it (None without that column)."""
    if column not in d.runs.columns:
        return None
    x = float(d.runs.loc[d.runs["variant"] == variant, column].median())
    return x if math.isfinite(x) else None


def _r(x: float, nd: int = 3) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), nd)


# ---------------------------------------------------------------------------------------------
# Fig. 3: ratios between two baselines at medium load, from the paper's numbers against CoreSync


def ratio_at(num: str, den: str, metric: str, load: float = MEDIUM) -> Callable[[Data], Measured]:
    """metric(num) / metric(den) at ``load``, paired per seed, with both points and static's as
    evidence."""

    def measure(d: Data) -> Measured:
        why = d.seeds.missing((num, den, STATIC), (load,))
        if why:
            return Measured(None, missing=why)
        s = d.seeds
        m, ci, n = _paired(s, load, metric, safe_ratio, num, den)
        ev = {"load": load, "num": NAMES[num], "den": NAMES[den], "max_cores": _stat(s, STATIC, load, "cores.max"),
              **_point(s, num, load, "num"), **_point(s, den, load, "den"), **_point(s, STATIC, load, "static")}
        if metric == P99:
            ev["floor"], _, _ = _paired(s, load, P99, safe_ratio, STATIC, den)
        extra = {"by_load": {str(x): _r(_paired(s, x, metric, safe_ratio, num, den)[0]) for x in d.seeds.points()}}
        if num == UR or den == UR:
            ev["ur_lower"], ev["ur_upper"] = (_param(d, UR, f"policy.allocator.{k}") for k in ("lower", "upper"))
            b, srch = _stat(s, UR, load, BUSY_NS), _stat(s, UR, load, SEARCH_NS)
            ev["ur_signal"] = safe_ratio(b, b + srch)
        if num == DR or den == DR:
            ev["dr_lower_us"], ev["dr_upper_us"] = (_param(d, DR, f"policy.allocator.{k}")
                                                    for k in ("lower_us", "upper_us"))
            ev["dr_qd_mean"] = _stat(s, DR, load, QDMEAN)
        return Measured(m, ci, n, evidence=ev, regime=_below_capacity(s, (num, den), load), extra=extra)

    return measure


def p99_ratio_cause(paper: float) -> Callable[[Data, Measured], Cause]:
    """Why a p99 ratio between two allocators misses the paper's: the all-cores floor (static's
    p99: RTT and the service-time tail), the p99 the paper's ratio asks for, the queueing delay
    each allocator adds."""

    def cause(d: Data, m: Measured) -> Cause:
        ev = dict(m.evidence)
        ev["paper"] = paper
        ev["measured"] = m.value
        ev["needed_p99"] = paper * ev["den_p99"]
        text = ("at load {load}: {num}'s p99 is {num_p99:.1f} µs on {num_cores:.2f} cores and {den}'s "
                "{den_p99:.1f} µs on {den_cores:.2f} cores ({den_busy:.2f} busy); their queueing delay p99 is "
                "{num_qd99:.1f} µs and {den_qd99:.1f} µs. ")
        if m.value is not None and m.value >= 1:
            text += "{num} is not faster: it keeps {num_cores:.2f} cores to {den}'s {den_cores:.2f}"
            text += ", and its queueing delay tail is the longer. " if ev["num_qd99"] > ev["den_qd99"] else ". "
        text += ("Static's {max_cores} cores give {static_p99:.1f} µs (queueing delay p99 {static_qd99:.2f} µs: "
                 "the RTT and the service-time tail), so {floor:.3f}× {den}'s p99 is as low as any allocator "
                 "gets here; the paper's {paper:.3f} asks for {needed_p99:.1f} µs")
        floor = ev.get("floor")
        if floor is not None and math.isfinite(floor) and paper < floor:
            text += (", below that floor: not even the whole machine reaches the paper's ratio in this run, whose "
                     "open-loop clients send without Breakwater's credits (the paper puts the reactive policies' "
                     "tail on bursts of overcommitted credits)")
        return Cause(text, ev)

    return cause


def cores_ratio_cause(paper: float) -> Callable[[Data, Measured], Cause]:
    """Why a ratio of allocated cores misses the paper's: each allocator's busy share, and the busy
    share the paper's ratio would give the numerator (with the policy's own range where it has one)."""

    def cause(d: Data, m: Measured) -> Cause:
        ev = dict(m.evidence)
        ev["paper"] = paper
        ev["measured"] = m.value
        ev["needed_cores"] = paper * ev["den_cores"]
        ev["needed_share"] = safe_ratio(ev["num_busy"], ev["needed_cores"])
        text = ("at load {load}: {num} keeps {num_cores:.2f} cores for {num_busy:.2f} busy (busy share "
                "{num_busy_share:.3f}), {den} {den_cores:.2f} (busy share {den_busy_share:.3f}); the paper's "
                "{paper:.3f}× needs {needed_cores:.2f} cores for {num}, a busy share of {needed_share:.3f}")
        if ev.get("ur_signal") is not None and ev.get("ur_lower") is not None:
            text += ("; Utilization Range's own signal busy / (busy + search) is {ur_signal:.3f} over the run, "
                     "and it revokes a core at or below {ur_lower}, adds one above {ur_upper}")
        if ev.get("dr_qd_mean") is not None and ev.get("dr_lower_us") is not None:
            text += ("; Delay Range sees a mean queueing delay of {dr_qd_mean:.2f} µs against its range "
                     "{dr_lower_us} to {dr_upper_us} µs")
        return Cause(text, ev)

    return cause


# ---------------------------------------------------------------------------------------------
# order claims over the three loads


def proactive_cores_margin(p: str) -> Callable[[Data], Measured]:
    """The smallest margin over loads 0.2/0.5/0.8 of cores(p) − max(cores(Shenango), cores(Caladan)),
    paired per seed."""

    def measure(d: Data) -> Measured:
        why = d.seeds.missing((p, *REACTIVE), LOADS_CHECKED)
        if why:
            return Measured(None, missing=why)
        s = d.seeds
        by = {x: _paired(s, x, CORES, lambda a, b, c: a - max(b, c), p, *REACTIVE) for x in LOADS_CHECKED}
        at = min(by, key=lambda x: by[x][0])
        m, ci, n = by[at]
        ev = {"load": at, "num": NAMES[p], **_point(s, p, at, "num"), **_point(s, SHENANGO, at, "sh"),
              **_point(s, CALADAN, at, "cal")}
        return Measured(m, ci, n, evidence=ev, regime=_below_capacity(s, (p, *REACTIVE), at),
                        extra={"at_load": at, "by_load": {str(x): _r(v[0]) for x, v in by.items()}})

    return measure


def proactive_p99_excess(p: str) -> Callable[[Data], Measured]:
    """The largest excess over loads 0.2/0.5/0.8 of p99(p) / min(p99(Shenango), p99(Caladan)) − 1,
    paired per seed (below zero: p has the lower tail)."""

    def measure(d: Data) -> Measured:
        why = d.seeds.missing((p, *REACTIVE), LOADS_CHECKED)
        if why:
            return Measured(None, missing=why)
        s = d.seeds
        by = {x: _paired(s, x, P99, lambda a, b, c: safe_ratio(a, min(b, c)) - 1, p, *REACTIVE)
              for x in LOADS_CHECKED}
        at = max(by, key=lambda x: by[x][0])
        m, ci, n = by[at]
        ev = {"load": at, "num": NAMES[p], **_point(s, p, at, "num"), **_point(s, SHENANGO, at, "sh"),
              **_point(s, CALADAN, at, "cal")}
        return Measured(m, ci, n, evidence=ev, regime=_below_capacity(s, (p, *REACTIVE), at),
                        extra={"at_load": at, "by_load": {str(x): _r(v[0]) for x, v in by.items()}})

    return measure


PROACTIVE_CAUSE = ("at load {load}: {num} keeps {num_cores:.2f} cores (p99 {num_p99:.1f} µs, queueing delay p99 "
                   "{num_qd99:.1f} µs), Shenango {sh_cores:.2f} ({sh_p99:.1f} µs, {sh_qd99:.1f} µs), Caladan "
                   "{cal_cores:.2f} ({cal_p99:.1f} µs, {cal_qd99:.1f} µs); measured {measured:.3f} ± {ci95}: the "
                   "interval does not lie on the paper's side of no difference")


def dynamic_fewer_cores(load: float) -> Callable[[Data], Measured]:
    """The most LC cores any dynamic allocator keeps at ``load``, minus static's (the machine)."""

    def measure(d: Data) -> Measured:
        why = d.seeds.missing((STATIC,), (load,))
        if why:
            return Measured(None, missing=why)
        s = d.seeds
        dynamic = sorted(v for v in set(d.runs["variant"]) if v != STATIC)
        if not dynamic:
            return Measured(None, missing="the run has no dynamic allocator")
        by = {v: _paired(s, load, CORES, lambda a, b: a - b, v, STATIC) for v in dynamic}
        worst = max(by, key=lambda v: by[v][0])
        m, ci, n = by[worst]
        ev = {"load": load, "worst": worst, "worst_cores": _stat(s, worst, load, CORES),
              "static_cores": _stat(s, STATIC, load, CORES), "busy": _stat(s, STATIC, load, BUSY)}
        return Measured(m, ci, n, evidence=ev, regime=_below_capacity(s, (STATIC,), load),
                        extra={"worst": worst, "by_variant": {v: _r(_stat(s, v, load, CORES)) for v in dynamic}})

    return measure


# ---------------------------------------------------------------------------------------------
# Fig. 1: Caladan's poll period


def poll_steps(metric: str, fn: Callable[[float, float], float], largest: bool = False,
               pairs: tuple = tuple(zip(CALADAN_POLL, CALADAN_POLL[1:])),
               knob: str = "poll") -> Callable[[Data], Measured]:
    """``fn(shorter, longer)`` per seed for each step of Caladan's ``knob`` (the poll period, or
    the queueing delay threshold) at each of loads 0.2/0.5/0.8; the smallest (or largest) step's
    mean decides."""

    def measure(d: Data) -> Measured:
        variants = tuple(v for pair in pairs for v, _ in pair)
        why = d.seeds.missing(variants, LOADS_CHECKED)
        if why:
            return Measured(None, missing=why)
        s = d.seeds
        by = {(x, a, b, pa, pb): _paired(s, x, metric, fn, a, b)
              for x in LOADS_CHECKED for (a, pa), (b, pb) in pairs}
        key = (max if largest else min)(by, key=lambda k: by[k][0])
        m, ci, n = by[key]
        x, a, b, pa, pb = key
        ev = {"load": x, "knob": knob, "poll_a": pa, "poll_b": pb, **_point(s, a, x, "a"), **_point(s, b, x, "b")}
        return Measured(m, ci, n, evidence=ev, regime=_below_capacity(s, (a, b), x),
                        extra={"at": f"load {x:g}: {knob} {pa}→{pb} µs",
                               "by_step": {f"{k[0]:g}:{k[3]}->{k[4]}us": _r(v[0]) for k, v in by.items()}})

    return measure


POLL_CAUSE = ("at load {load}, from {knob} {poll_a} to {poll_b} µs: Caladan keeps {a_cores:.2f} → {b_cores:.2f} "
              "cores "
              "({a_busy:.2f} busy), {a_searching:.2f} → {b_searching:.2f} of them searching for work on average; "
              "p99 {a_p99:.1f} → {b_p99:.1f} µs, queueing delay p99 {a_qd99:.1f} → {b_qd99:.1f} µs")


def poll_beyond_cause(d: Data, m: Measured) -> Cause:
    """Why poll 20 µs still improves the p99: the numbers of the step, and whether the longer poll
    kept more cores searching (a searching core takes queued work at once)."""
    ev = {**m.evidence, "measured": m.value, "ci95": m.ci95}
    text = POLL_CAUSE + "; p99 ratio {measured:.3f} ± {ci95}"
    if ev["b_searching"] > ev["a_searching"] and ev["b_qd99"] < ev["a_qd99"]:
        text += (": the longer poll keeps more idle cores searching, and a searching core takes queued work at "
                 "once, which shortens the queueing delay tail")
    return Cause(text, ev)


def _pct_points(a: float, b: float) -> float:
    return 100.0 * (b - a)


def _p99_cut(a: float, b: float) -> float:
    return 1.0 - safe_ratio(b, a)


def _p99_ratio(a: float, b: float) -> float:
    return safe_ratio(b, a)


# ---------------------------------------------------------------------------------------------
# model checks


def lc_plus_be_gap(d: Data) -> Measured:
    """The largest |max cores − LC allocated − best-effort cores| over all runs."""
    df = d.runs
    gap = (df["cores.max"].astype(float) - df[CORES].astype(float) - df[BE].astype(float)).abs()
    i = gap.idxmax()
    return Measured(float(gap.max()), None, len(df),
                    evidence={"worst": f"{df.loc[i, 'variant']} at load {df.loc[i, LOAD]:g}, seed {df.loc[i, 'seed']}"},
                    extra={"by_variant": {v: float(g.max()) for v, g in gap.groupby(df["variant"])}})


def core_time_error(d: Data) -> Measured:
    """The largest |busy + search + parked + transition − cores × simulated time| over all runs (ns)."""
    df = d.runs
    if d.run_ns is None:
        return Measured(None, missing="the simulated time per run is not known")
    expect = df["cores.max"].astype(float) * d.run_ns
    parts = sum(df[f"core_time.{k}_ns"].astype(float) for k in ("busy", "search", "parked", "transition"))
    err = (parts - expect).abs()
    i = err.idxmax()
    return Measured(float(err.max()), None, len(df),
                    evidence={"worst": f"{df.loc[i, 'variant']} at load {df.loc[i, LOAD]:g}, seed {df.loc[i, 'seed']}",
                              "run_ns": d.run_ns})


# ---------------------------------------------------------------------------------------------
# the claims

_MEDIUM_NOTE = "at load 0.5 (the paper's medium load), paired per seed"
_FIG3_REF = "§IV-B, Fig. 3"
_SH_QUOTE = "CoreSync improves tail latency by 1.7× compared to Shenango"
_CAL_QUOTE = ("Caladan remains on the Pareto frontier offering slightly better utilization (a reduction of 2%) at "
              "the expense of latency (an increase of 16%), as compared to CoreSync")
_UTIL_QUOTE = ("At medium loads, CoreSync improves CPU usage by 1.4× and 1.2× over Utilization Range and Delay Range "
               "policies, respectively, while maintaining similar tail latency to Utilization Range")
_PROACTIVE_QUOTE = ("Proactive policies are less sensitive to bursts ... However, both proactive policies strictly "
                    "prioritize latency over utilization")

CLAIMS: list[ClaimSpec] = [
    # Fig. 3: p99 ratios
    ClaimSpec(
        id="caladan-lower-p99-than-shenango", group="Fig. 3", kind=RATIO, unit="×",
        claim="At medium load Caladan's p99 latency is 0.68× Shenango's (1.16 / 1.7: both against CoreSync)",
        paper=PAPER_CALADAN_P99 / PAPER_SHENANGO_P99, paper_ref=_FIG3_REF, quote=f"{_SH_QUOTE}. {_CAL_QUOTE}",
        how=f"p99(Caladan, poll 2 µs) / p99(Shenango) {_MEDIUM_NOTE}; in this model the two differ only in the "
            "order of the IOKernel's post-grant skip and congestion test (Caladan's ias, Shenango's simple)",
        measure=ratio_at(CALADAN, SHENANGO, P99),
        derived="1.16 / 1.7: Caladan's p99 (16 % above CoreSync's) over Shenango's (1.7× CoreSync's)",
        # the same paragraph on Fig. 3, consecutive sentences, both against CoreSync at one operating point
        derived_at_one_point=True,
        cause=p99_ratio_cause(PAPER_CALADAN_P99 / PAPER_SHENANGO_P99)),
    ClaimSpec(
        id="proactive-lower-p99/utilization_range", group="Fig. 3", kind=RATIO, unit="×",
        claim="At medium load Utilization Range's p99 is 0.59× Shenango's (similar to CoreSync's, which is 1/1.7 "
              "of Shenango's)",
        paper=1 / PAPER_SHENANGO_P99, paper_ref=_FIG3_REF, quote=f"{_SH_QUOTE}. {_UTIL_QUOTE}",
        how=f"p99(Utilization Range) / p99(Shenango) {_MEDIUM_NOTE}",
        measure=ratio_at(UR, SHENANGO, P99), cause=p99_ratio_cause(1 / PAPER_SHENANGO_P99),
        # "similar tail latency to Utilization Range" (medium loads) is no number; 1.7× names no load
        derived="1 / 1.7: Utilization Range's p99 taken equal to CoreSync's (\"similar\", at medium loads) over "
                "Shenango's (1.7× CoreSync's, Fig. 3, no load stated)"),
    ClaimSpec(
        id="proactive-lower-p99/delay_range", group="Fig. 3", kind=RATIO, unit="×",
        claim="At medium load Delay Range's p99 is 0.66× Shenango's (CoreSync is 3–21 % below Delay Range and 1.7× "
              "below Shenango: 1.03/1.7 to 1.21/1.7, midpoint 1.12/1.7)",
        paper=sum(PAPER_DR_P99) / 2 / PAPER_SHENANGO_P99, paper_ref=_FIG3_REF,
        quote=f"{_SH_QUOTE}. Moreover, it improves tail latency compared to Delay Range by 3-21%",
        how=f"p99(Delay Range 0.5–1 µs) / p99(Shenango) {_MEDIUM_NOTE}",
        measure=ratio_at(DR, SHENANGO, P99), cause=p99_ratio_cause(sum(PAPER_DR_P99) / 2 / PAPER_SHENANGO_P99),
        # "3-21 %" is a range over Fig. 3's points, 1.7× is one comparison: not the same point
        derived="1.12 / 1.7: the midpoint of \"3-21 %\" (Delay Range over CoreSync, a range over Fig. 3's points) "
                "over 1.7 (Shenango over CoreSync)"),
    # Fig. 3: core ratios (utilization = LC cores allocated / cores)
    ClaimSpec(
        id="proactive-more-cores/utilization_range", group="Fig. 3", kind=RATIO, unit="×",
        claim="At medium load Utilization Range allocates 1.43× Caladan's cores (1.4 / 0.98: both against CoreSync)",
        paper=PAPER_UR_UTIL / PAPER_CALADAN_UTIL, paper_ref=_FIG3_REF, quote=f"{_UTIL_QUOTE}. {_CAL_QUOTE}",
        how=f"LC cores allocated (Utilization Range) / (Caladan) {_MEDIUM_NOTE}",
        measure=ratio_at(UR, CALADAN, CORES), cause=cores_ratio_cause(PAPER_UR_UTIL / PAPER_CALADAN_UTIL),
        # 1.4× is "at medium loads" (§IV-B, second paragraph), Caladan's 2 % names no load (first paragraph)
        derived="1.4 / 0.98: Utilization Range's cores over CoreSync's (1.4×, at medium loads) over Caladan's "
                "(2 % below CoreSync's, no load stated)"),
    ClaimSpec(
        id="proactive-more-cores/delay_range", group="Fig. 3", kind=RATIO, unit="×",
        claim="At medium load Delay Range allocates 1.22× Caladan's cores (1.2 / 0.98: both against CoreSync)",
        paper=PAPER_DR_UTIL / PAPER_CALADAN_UTIL, paper_ref=_FIG3_REF, quote=f"{_UTIL_QUOTE}. {_CAL_QUOTE}",
        how=f"LC cores allocated (Delay Range 0.5–1 µs) / (Caladan) {_MEDIUM_NOTE}",
        measure=ratio_at(DR, CALADAN, CORES), cause=cores_ratio_cause(PAPER_DR_UTIL / PAPER_CALADAN_UTIL),
        derived="1.2 / 0.98: Delay Range's cores over CoreSync's (1.2×, at medium loads) over Caladan's (2 % below "
                "CoreSync's, no load stated)"),
    ClaimSpec(
        id="fig3/urange-vs-drange-cores", group="Fig. 3", kind=RATIO, unit="×",
        claim="At medium load Utilization Range allocates 1.17× Delay Range's cores (1.4 / 1.2: both against "
              "CoreSync)",
        paper=PAPER_UR_UTIL / PAPER_DR_UTIL, paper_ref=_FIG3_REF, quote=_UTIL_QUOTE,
        how=f"LC cores allocated (Utilization Range) / (Delay Range 0.5–1 µs) {_MEDIUM_NOTE}",
        measure=ratio_at(UR, DR, CORES), cause=cores_ratio_cause(PAPER_UR_UTIL / PAPER_DR_UTIL),
        # one sentence: "At medium loads, CoreSync improves CPU usage by 1.4× and 1.2× over ..."
        derived="1.4 / 1.2: Utilization Range's and Delay Range's cores, both against CoreSync's at medium loads",
        derived_at_one_point=True),
    ClaimSpec(
        id="fig3/caladan-vs-shenango-cores", group="Fig. 3", kind=RATIO, unit="×",
        claim="At medium load Caladan allocates 0.98× Shenango's cores (CoreSync matches Shenango's utilization, "
              "Caladan's is 2 % below CoreSync's)",
        paper=PAPER_CALADAN_UTIL, paper_ref="§I, §IV-B, Fig. 3",
        quote=f"CoreSync matches the low CPU utilization of Shenango and Caladan. {_CAL_QUOTE}",
        how=f"LC cores allocated (Caladan) / (Shenango) {_MEDIUM_NOTE}",
        measure=ratio_at(CALADAN, SHENANGO, CORES), cause=cores_ratio_cause(PAPER_CALADAN_UTIL),
        # "matches" (§I) is no number and names no point; the 2 % is Fig. 3's paragraph
        derived="0.98 / 1: Caladan's cores 2 % below CoreSync's (Fig. 3) over Shenango's taken equal to CoreSync's "
                "(\"matches\", §I)"),
    # Fig. 3 statements with no number, for the setting the paper does not run (Delay Range 1–4 µs)
    ClaimSpec(
        id="proactive-more-cores/delay_range-1-4", group="Fig. 3", kind=ORDER, side="above", unit="cores",
        claim="Delay Range 1–4 µs (proactive; McClure et al.'s setting, the artifact's delay_range2) allocates more "
              "LC cores than Shenango and Caladan (reactive) at loads 0.2, 0.5 and 0.8",
        paper_ref="§II-A, §IV-B", quote=_PROACTIVE_QUOTE,
        how="the smallest margin over loads 0.2/0.5/0.8 of cores(Delay Range 1–4) − max(cores(Shenango), "
            "cores(Caladan)), paired per seed",
        measure=proactive_cores_margin(DR14), cause=PROACTIVE_CAUSE),
    ClaimSpec(
        id="proactive-lower-p99/delay_range-1-4", group="Fig. 3", kind=ORDER, side="below", unit="fraction",
        claim="Delay Range 1–4 µs (proactive) gives a lower p99 than both Shenango and Caladan (reactive) at loads "
              "0.2, 0.5 and 0.8",
        paper_ref="§II-A, §IV-B", quote=_PROACTIVE_QUOTE,
        how="the largest excess over loads 0.2/0.5/0.8 of p99(Delay Range 1–4) / min(p99(Shenango), p99(Caladan)) "
            "− 1, paired per seed",
        measure=proactive_p99_excess(DR14), cause=PROACTIVE_CAUSE),
    *[ClaimSpec(
        id=f"dynamic-fewer-cores@{x}", group="Fig. 3", kind=ORDER, side="below", unit="cores",
        claim=f"At load {x}, every dynamic allocator keeps fewer LC cores than static (the whole machine)",
        paper_ref="§I, §II-A",
        quote="A core scheduler aims to maximize CPU utilization by allocating idle CPU cycles to preemptable "
              "best-effort applications when it is not being used by a latency-critical application",
        how="the most LC cores any dynamic allocator keeps minus static's, paired per seed",
        measure=dynamic_fewer_cores(x),
        cause="at load {load}: {worst} keeps {worst_cores:.2f} of static's {static_cores:.2f} cores for {busy:.2f} "
              "busy; measured {measured:.3f} ± {ci95}: the interval does not lie below no difference")
      for x in LOADS_CHECKED],
    # Fig. 1: Caladan's poll period
    ClaimSpec(
        id="caladan-longer-poll-more-utilization", group="Fig. 1", kind=MONOTONE, unit="pp",
        claim="A longer Caladan poll period (2 → 5 → 10 µs) allocates more cores (sacrifices utilization) at "
              "loads 0.2, 0.5 and 0.8",
        paper_ref="§II-B, Fig. 1",
        quote="Increasing the polling interval of Caladan improves latency at the expense of utilization",
        how="the smallest step of LC cores allocated / 16, in percentage points, over the steps 2→5 and 5→10 µs "
            "at loads 0.2/0.5/0.8, paired per seed",
        measure=poll_steps(UTIL, _pct_points), cause=POLL_CAUSE),
    ClaimSpec(
        id="caladan-longer-poll-lower-p99", group="Fig. 1", kind=MONOTONE, unit="fraction",
        claim="A longer Caladan poll period (2 → 5 → 10 µs) lowers the p99 latency at loads 0.2, 0.5 and 0.8",
        paper_ref="§II-B, Fig. 1",
        quote="Clearly, increasing the polling interval sacrifices utilization to improve tail latency",
        how="the smallest step of 1 − p99(longer poll) / p99(shorter poll) over the steps 2→5 and 5→10 µs at "
            "loads 0.2/0.5/0.8, paired per seed",
        measure=poll_steps(P99, _p99_cut), cause=POLL_CAUSE),
    ClaimSpec(
        id="fig1/caladan-poll-beyond-10-no-p99-gain", group="Fig. 1", kind=BOUND, side="lower", paper=1.0, unit="×",
        claim="A Caladan poll period beyond 10 µs (20 µs) does not improve the p99 latency at loads 0.2, 0.5 and 0.8",
        paper_ref="§II-B, Fig. 1",
        quote="Increasing the polling interval beyond 10µs does not improve Caladan's latency, but can lead to "
              "poorer utilization",
        how="the smallest ratio over loads 0.2/0.5/0.8 of p99(poll 20 µs) / p99(poll 10 µs), paired per seed; "
            "reproduced when its interval reaches 1 (no significant improvement)",
        measure=poll_steps(P99, _p99_ratio, pairs=(CALADAN_BEYOND,)),
        cause=poll_beyond_cause),
    ClaimSpec(
        id="fig1/caladan-poll-beyond-10-more-cores", group="Fig. 1", kind=ORDER, side="above", unit="pp",
        claim="A Caladan poll period beyond 10 µs (20 µs) allocates more cores (poorer utilization) at some load "
              "among 0.2, 0.5 and 0.8",
        paper_ref="§II-B, Fig. 1",
        quote="Increasing the polling interval beyond 10µs does not improve Caladan's latency, but can lead to "
              "poorer utilization",
        how="the largest step over loads 0.2/0.5/0.8 of LC cores allocated / 16 from poll 10 to 20 µs, in "
            "percentage points, paired per seed",
        measure=poll_steps(UTIL, _pct_points, largest=True, pairs=(CALADAN_BEYOND,)),
        cause=POLL_CAUSE + "; measured {measured:.3f} ± {ci95} pp: the interval does not lie above no difference"),
    ClaimSpec(
        id="fig1/caladan-higher-threshold-fewer-cores", group="Fig. 1", kind=ORDER, side="below", unit="pp",
        claim="A higher Caladan queueing delay threshold (5 → 10 µs, Caladan's default) allocates fewer cores "
              "(improves utilization) at loads 0.2, 0.5 and 0.8",
        paper_ref="§II-B (Fig. 1's knobs)",
        quote="Increasing the queueing delay threshold improves utilization at the expense of latency",
        how="the largest step over loads 0.2/0.5/0.8 of LC cores allocated / 16 from threshold 5 to 10 µs (poll "
            "2 µs), in percentage points, paired per seed",
        measure=poll_steps(UTIL, _pct_points, largest=True, pairs=(CALADAN_THRESHOLD,), knob="threshold"),
        cause=POLL_CAUSE + "; measured {measured:.3f} ± {ci95} pp: the interval does not lie below no difference"),
    ClaimSpec(
        id="fig1/caladan-higher-threshold-higher-p99", group="Fig. 1", kind=ORDER, side="above", unit="fraction",
        claim="A higher Caladan queueing delay threshold (5 → 10 µs) raises the p99 latency at loads 0.2, 0.5 "
              "and 0.8",
        paper_ref="§II-B (Fig. 1's knobs)",
        quote="Increasing the queueing delay threshold improves utilization at the expense of latency",
        how="the smallest step over loads 0.2/0.5/0.8 of p99(threshold 10 µs) / p99(threshold 5 µs) − 1, paired "
            "per seed",
        measure=poll_steps(P99, lambda a, b: _p99_ratio(a, b) - 1, pairs=(CALADAN_THRESHOLD,), knob="threshold"),
        cause=POLL_CAUSE + "; measured {measured:.3f} ± {ci95}: the interval does not lie above no difference"),
    # model checks
    ClaimSpec(
        id="be-plus-lc-equals-machine", group="model", kind=CHECK, side="upper", paper=EPS_CORES, unit="cores",
        claim="Best-effort cores + LC allocated cores = max cores in every run, to float precision (a core in its "
              "allocation delay counts as LC-allocated: cores.transition_mean)",
        paper_ref="model (DESIGN.md core accounting)",
        how="the largest |max cores − LC allocated − best-effort| (mean cores over the window) over all runs",
        measure=lc_plus_be_gap, cause="the largest gap {measured} cores is in {worst}"),
    ClaimSpec(
        id="core-time-conservation", group="model", kind=CHECK, side="upper", paper=0.0, unit="ns",
        claim="Core time busy + searching + parked (BE) + in transition = cores × simulated time, exactly, in every "
              "run",
        paper_ref="model (DESIGN.md conservation)",
        how="the largest |busy + search + parked + transition − cores × (warm-up + window)| over all runs",
        measure=core_time_error, cause="the largest error {measured} ns is in {worst} (run {run_ns} ns per core)"),
]


FIGURES = (
    Figure("latency_vs_utilization.png", "p99 latency against CPU utilization per policy at each load (mean over seeds, "
           "bars: 95 % CI): the paper's Fig. 1 / Fig. 3 trade-off, lower-left is better"),
    Figure("cores_vs_load.png", "Cores against load: allocated to the latency-critical application, given to the "
           "best-effort co-tenant, and allocated but not busy (spinning or searching), per policy"),
)


@register("allocators", paper="CoreSync (Pardeshi et al.)", figure="Fig. 1 and Fig. 3 (baselines)",
          description="p99 latency vs CPU utilization of Static, Shenango, Caladan (poll 2/5/10/20 µs, threshold "
                      "5/10 µs), Utilization Range and Delay Range; 16 cores, exp. 10 µs, loads 0.1–0.9, no overload "
                      "control",
          spec="allocators/sweep.toml", claims=CLAIMS,
          figures=FIGURES)
def analyze(ctx: Context) -> list[Claim]:
    df = ctx.results
    _require(df, ctx)
    plot_latency_vs_utilization(ctx)
    plot_cores_vs_load(ctx)
    return judge_all(CLAIMS, Data(runs=df, run_ns=_run_ns(ctx)))


def _run_ns(ctx: Context) -> float:
    """Simulated time of every run (warm-up + window), ns: the variants do not change it."""
    from ..api import validate

    sc = validate(str(ctx.spec.base), overrides=ctx.spec.overrides)
    return float(round((float(sc["duration_ms"]) + float(sc["warmup_ms"])) * 1e6))


def _require(df: pd.DataFrame, ctx: Context) -> None:
    variants = set(df["variant"])
    need = {STATIC, *REACTIVE, *PROACTIVE, *(v for pairs in (CALADAN_POLL, CALADAN_BEYOND, CALADAN_THRESHOLD)
                                              for v, _ in pairs)}
    if not need <= variants:
        raise ValueError(f"{ctx.spec.path}: variants: the allocators reproduction needs {', '.join(sorted(need))}; "
                         f"missing {', '.join(sorted(need - variants))}")
    loads = set(np.round(df[LOAD].astype(float), 9))
    if not set(LOADS_CHECKED) <= loads:
        raise ValueError(f"{ctx.spec.path}: grid.{LOAD}: must include {', '.join(map(str, LOADS_CHECKED))}")


# ---------------------------------------------------------------------------------------------
# figures


def _setup_plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _curve(agg: pd.DataFrame, variant: str) -> pd.DataFrame:
    return agg[agg["variant"] == variant].sort_values(LOAD)


def _err(series: pd.Series) -> np.ndarray | None:
    e = series.to_numpy(float)
    return None if np.all(~np.isfinite(e)) else np.nan_to_num(e)


def plot_latency_vs_utilization(ctx: Context) -> None:
    plt = _setup_plt()
    agg = ctx.aggregate
    seeds = len(ctx.spec.seeds)
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.2), constrained_layout=True, sharey=True)
    panels = [
        (axes[0], FIG3, "baselines of CoreSync Fig. 3 (poll 2 µs, thresholds 5 µs)"),
        (axes[1], FIG1, "Caladan poll period, as CoreSync Fig. 1 (and 20 µs; delay threshold 10 µs)"),
    ]
    for ax, variants, title in panels:
        for v in variants:
            c = _curve(agg, v)
            if c.empty:
                continue
            ax.errorbar(100 * c[UTIL], c[P99], xerr=_err(100 * c[f"{UTIL}.ci95"]), yerr=_err(c[f"{P99}.ci95"]),
                        color=COLORS.get(v), marker=MARKERS.get(v, "o"), ms=5, lw=1.5, capsize=2,
                        ls="--" if v == "shenango-original" else "-", label=ctx.spec.label(v))
        ref = _curve(agg, SHENANGO if SHENANGO in variants else variants[0])
        for _, r in ref.iterrows():
            ax.annotate(f"{r[LOAD]:g}", (100 * r[UTIL], r[P99]), textcoords="offset points", xytext=(4, -10),
                        fontsize=7, color="gray")
        ax.set_xlabel("CPU utilization: LC allocated cores / 16 (%)")
        ax.set_title(title, fontsize=10)
        ax.set_xlim(0, 105)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    axes[0].set_ylabel("p99 end-to-end latency (µs)")
    fig.suptitle(f"p99 latency vs CPU utilization, loads {_load_range(agg)} (gray: load of the Shenango / Caladan "
                 f"2 µs points); 16 cores, exp. 10 µs, RTT 10 µs, no overload control; mean of {seeds} seed(s), "
                 f"bars: 95 % CI", fontsize=9)
    ctx.save_figure(fig, "latency_vs_utilization.png")


def plot_cores_vs_load(ctx: Context) -> None:
    plt = _setup_plt()
    agg = ctx.aggregate
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(17, 5), constrained_layout=True)
    order = list(dict.fromkeys([*FIG3, *FIG1]))
    for v in order:
        c = _curve(agg, v)
        if c.empty:
            continue
        kw = dict(color=COLORS.get(v), marker=MARKERS.get(v, "o"), ms=4, lw=1.3, capsize=2, label=ctx.spec.label(v))
        ax1.errorbar(c[LOAD], c[CORES], yerr=_err(c[f"{CORES}.ci95"]), **kw)
        ax2.errorbar(c[LOAD], c[BE], yerr=_err(c[f"{BE}.ci95"]), **kw)
        if v != STATIC:
            ax3.plot(c[LOAD], c[CORES] - c[BUSY], **{k: x for k, x in kw.items() if k != "capsize"})
    busy = _curve(agg, STATIC)
    if not busy.empty:
        ax1.plot(busy[LOAD], busy[BUSY], color="gray", ls="--", lw=1, label="busy cores (work)")
    ax1.set_ylabel("LC cores allocated (mean)")
    ax2.set_ylabel("best-effort cores (mean)")
    ax3.set_ylabel("LC cores allocated but not busy (mean)")
    for ax in (ax1, ax2, ax3):
        ax.set_xlabel("offered load (fraction of 16 cores × 100 k req/s)")
        ax.grid(alpha=0.3)
    ax1.legend(fontsize=8, loc="lower right")
    ax1.set_title("cores allocated to the latency-critical application", fontsize=10)
    ax2.set_title("cores given to the best-effort co-tenant", fontsize=10)
    ax3.set_title("allocated − busy: spinning / searching for work (dynamic policies)", fontsize=10)
    ctx.save_figure(fig, "cores_vs_load.png")


def _load_range(agg: pd.DataFrame) -> str:
    loads = sorted(set(agg[LOAD].astype(float)))
    return f"{loads[0]:g}–{loads[-1]:g}" if len(loads) > 1 else f"{loads[0]:g}"
