"""``microsched reproduce coresync``: the evaluation of CoreSync (Pardeshi, Stuhr, Saeed, ICNP'25, §II-B, §IV).

CoreSync (R = 50; 20 for Memcached), Shenango, Caladan (poll 2 µs; 5 and 10 µs for Fig. 1),
Utilization Range (75–95 %) and Delay Range (0.5–1 µs), all under Breakwater, on 16 cores,
100 sessions, RTT 10 µs, per-core queues with stealing (``experiments/coresync/``). Every
variant is ``EXPERIMENT/POLICY`` and runs at loads 0.2, 0.5, 0.8 (below capacity: low, medium,
high) and 1.0, 1.3, 1.5 (near and beyond capacity):

    exp10, bim10   Fig. 3, Fig. 4, Table I (exp10 also Fig. 1 and Fig. 7's R = 10, 20, 100)
    exp1, bim1     Fig. 5
    mc             Fig. 6 and Table II (Memcached-like, near-constant 0.8 µs, target 25 µs, R = 20)
    n1000, n10000  Fig. 8 (CoreSync with R = 500 / 5 000, Shenango, Utilization Range)

Outputs (beside ``results.parquet``, ``aggregate.parquet``, ``claims.json``): ``fig1_caladan_poll.png``,
``fig3_exp10.png``, ``fig4_bimodal10.png``, ``fig5_1us.png``, ``fig6_memcached.png``,
``fig7_r_sensitivity.png``, ``fig8_sessions.png``, ``table1.csv``/``table1.md`` and
``table2.csv``/``table2.md`` (normalized throughput, the paper's layout, with the paper's numbers
beside ours in the Markdown), the cold-start time series ``fig_coresync_timeseries.png`` and the
timeline of CoreSync and Shenango at load 0.5 ``fig_timeline_load0.5.png`` (with its traces).

Claims (:data:`CLAIMS`) are declared as data and judged by :mod:`.claims`: every number of the
paper's evaluation this grid covers is a claim with the paper's number: "k×" as a ``ratio``,
"x %" as a ``gain`` (a relative change), "within x %" as a ``bound``, each cell of Table I and
Table II as the ``gain`` of that policy's throughput over CoreSync's, statements without a number
as ``order``/``bound`` claims, and our own model's accounting as ``check``. Every seed runs the
very same requests under every policy (common random numbers), so comparisons are paired per seed
and reported as the mean with its 95 % confidence half-width.

The paper's CoreSync parks idle cores below capacity (its utilization is within 2 % of
Caladan's). Where ours does not (its allocation stays at what it reached at start-up: Breakwater's
pool sits at its ceiling, the issued credits far above R·K + N, so every park is vetoed), the
below-capacity claims about CoreSync are ``out_of_regime``: their preconditions (cores parked,
cores re-allocated in the measured window) carry the measured values, and the cause also gives
what the measured number would have been judged as (``verdict_if_judged``) and why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from .claims import (BOUND, CHECK, DIFFERENCE, GAIN, ORDER, RATIO, Cause, Claim, ClaimSpec, Condition, Measured,
                     Tolerance, judge_all, rounded)
from .framework import Condition as RunCondition
from .framework import Context, ExtraRuns, Figure, Thesis, register
from .sensitivity import Cost
from .stats import safe_ratio
from .coresync_data import (LOAD, P99, QD99, UTIL, THR, BE, CORES, BUSY, WAKING, PWD, DRAINED, ISSUED, POOL, TARGET, TIMEOUTS,
                            PARK_ATTEMPTS, PARKS, WAKEUPS, VETOED, CUTS, WAITED_PARKER, WAITED_REVOCATION,
                            AQM_DROPS, START_DROPS, BELOW, ABOVE, BEYOND, MEDIUM, MAX_CORES, POLICIES, CS, SH,
                            CAL, UR, DR, SESSIONS, R_OF, R_VARIANTS, CALADAN_POLL, COLD, NAMES, EXPERIMENTS,
                            PARKED_MIN, WAKING_MIN, NO_DRAIN, PAPER_TABLE1, PAPER_TABLE2, TABLE_LOADS,
                            COLD_POOL, COLD_WARMUP_MS, Data, norm_throughput, v, _sessions, _r_of)
from ..sweep.runner import mean_ci95
from . import coresync_report as report
from . import coresync_timeline
from . import coresync_timeseries as series
from .coresync_timeseries import LOADS as TS_LOADS, N as TS_N, R as TS_R
from .coresync_timeseries import first_blocked_ms, park_counts, steady


@dataclass
class Runs:
    """What the claims are measured on: one row per run (``variant``, ``seed``, ``load.fraction``
    and the summary's metrics) and the cold-start time series of CoreSync (``t_ms``, ``load``,
    ``credit_pool``, ``credits_issued``, ``cores_allocated``, ``bound_rk_n``), if it was run."""

    results: pd.DataFrame
    timeseries: pd.DataFrame | None = None
    _d: Data | None = field(default=None, repr=False, compare=False)

    @property
    def d(self) -> Data:
        if self._d is None:
            self._d = Data(self.results)
        return self._d


def _d(data: Any) -> Data:
    if isinstance(data, Runs):
        return data.d
    if isinstance(data, Data):
        return data
    return Data(data)


def _ts(data: Any) -> pd.DataFrame | None:
    return data.timeseries if isinstance(data, Runs) else None


# ---------------------------------------------------------------------------------------------
# measuring helpers

FORMS: dict[str, Callable[[float, float], float]] = {
    "ratio": safe_ratio,                              # a / b
    "gain": lambda a, b: safe_ratio(a, b) - 1,        # a / b − 1
    "reduction": lambda a, b: 1 - safe_ratio(a, b),   # 1 − a / b
    "diff": lambda a, b: a - b,
}


def _paired(d: Data, load: float, metric: str, form: str, num: str, den: str) -> tuple[float, float, int]:
    return mean_ci95(d.per_seed(load, metric, FORMS[form], num, den))


def _f(x: float, nd: int = 4) -> float | None:
    return rounded(x, nd)


def _low(x: float) -> float:
    return x if math.isfinite(x) else -math.inf


def parks(d: Data, points: Sequence[tuple[str, float]]) -> tuple[list[Condition], dict[str, Any]]:
    """The paper's below-capacity regime for CoreSync at ``points`` ((variant, load) pairs): the
    fewest cores it parks and the fewest cores it has waking in the measured window over them."""
    parked = {p: MAX_CORES - d.mean(p[0], p[1], CORES) for p in points}
    waking = {p: d.mean(p[0], p[1], WAKING) for p in points}
    pp = min(parked, key=lambda p: _low(parked[p]))
    pw = min(waking, key=lambda p: _low(waking[p]))
    conds = [
        Condition(f"mean LC cores {pp[0]} parks below capacity (max cores − allocated, the fewest over the "
                  f"claim's points)", parked[pp], ">=", PARKED_MIN),
        Condition(f"mean LC cores waking in the measured window, {pw[0]} (the fewest over the claim's points; zero "
                  f"when the allocation stays at its start-up value)", waking[pw], ">=", WAKING_MIN),
    ]
    ev = {"fewest_parked_at": f"{pp[0]} @ {pp[1]:g}", "fewest_waking_at": f"{pw[0]} @ {pw[1]:g}"}
    return conds, ev


def cs_state(d: Data, exp: str, load: float, variant: str | None = None, r: float | None = None) -> dict[str, Any]:
    """CoreSync's cores and credit state at one point, and its gate (C_issued − N)/(R·K)."""
    cs = variant or v(exp, CS)
    n, r = _sessions(exp), (r if r is not None else _r_of(exp))
    cores, busy = d.mean(cs, load, CORES), d.mean(cs, load, BUSY)
    pool, issued = d.mean(cs, load, POOL), d.mean(cs, load, ISSUED)
    return {"cs_variant": cs, "load": load, "sessions": n, "r": r, "max_cores": MAX_CORES,
            "cs_cores": _f(cores), "cs_busy": _f(busy), "cs_waking": _f(d.mean(cs, load, WAKING)),
            "cs_p99": _f(d.mean(cs, load, P99)), "cs_thr": _f(d.mean(cs, load, THR)),
            "pool": _f(pool, 1), "pool_per_session": _f(pool / n, 2), "issued": _f(issued, 1),
            "prop_bound": _f(r * cores + n, 1), "gate": _f(safe_ratio(issued - n, r * cores)),
            "drained": _f(d.mean(cs, load, DRAINED)), "qd99": _f(d.mean(cs, load, QD99)),
            "client_timeouts": _f(d.mean(cs, load, TIMEOUTS), 1),
            "server_drops": _f(d.mean(cs, load, AQM_DROPS) + d.mean(cs, load, START_DROPS), 1),
            "target": _f(d.mean(cs, load, TARGET)),
            "park_attempts": _f(d.mean(cs, load, PARK_ATTEMPTS), 0), "parks": _f(d.mean(cs, load, PARKS), 0),
            "wakeups": _f(d.mean(cs, load, WAKEUPS), 0), "vetoed_drained": _f(d.mean(cs, load, VETOED), 0),
            "waited_for_parker": _f(d.mean(cs, load, WAITED_PARKER), 0),
            "waited_for_revocation": _f(d.mean(cs, load, WAITED_REVOCATION), 0),
            "cuts": _f(d.mean(cs, load, CUTS), 0)}


def other_state(d: Data, exp: str, policy: str, load: float, prefix: str = "other") -> dict[str, Any]:
    var = v(exp, policy)
    return {prefix: NAMES.get(policy, policy), f"{prefix}_cores": _f(d.mean(var, load, CORES)),
            f"{prefix}_busy": _f(d.mean(var, load, BUSY)), f"{prefix}_p99": _f(d.mean(var, load, P99)),
            f"{prefix}_thr": _f(d.mean(var, load, THR)), f"{prefix}_be": _f(d.mean(var, load, BE)),
            f"{prefix}_qd99": _f(d.mean(var, load, QD99))}


# ---------------------------------------------------------------------------------------------
# causes: templates filled from the evidence each measure records

GATE_CLOSED = ("CoreSync's gate (C_issued − N)/(R·K) is {gate}: {issued} credits issued of a pool of {pool} "
               "({pool_per_session} per session) against R·K + N = {prop_bound}, so a core that runs out of work "
               "withholds C_sub and keeps polling instead of parking")
POOL_GROWS = (" (its queueing delay p99 {qd99} µs stays below Breakwater's target {target} µs, so the pool only "
              "grows)")
GATE_OPEN = ("CoreSync's gate (C_issued − N)/(R·K) is {gate} ({issued} issued against R·K + N = {prop_bound}), "
             "so idle cores may park")
FROZEN = (" CoreSync's allocation stays where it was at start-up (mean cores waking {cs_waking} in the measured "
          "window).")


GATE_COUNTS = ("; of its {park_attempts} park attempts in the window (mean over seeds), {vetoed_drained} were "
               "vetoed by a drained session, {waited_for_parker} waited for another core's park, "
               "{waited_for_revocation} waited for the issued credits to come down after a cut, {cuts} cut credits "
               "from the pool and {parks} parked ({wakeups} parked cores woken)")


def _counted(ev: dict) -> str:
    """Algorithm 1's own counts, where the run has them."""
    a = ev.get("park_attempts")
    return GATE_COUNTS if a is not None and math.isfinite(a) else ""


def _gate_text(ev: dict) -> str:
    g, qd, target = ev.get("gate"), ev.get("qd99"), ev.get("target")
    if g is None or not math.isfinite(g) or g <= 1:
        return GATE_OPEN + _counted(ev)
    grows = qd is not None and target is not None and math.isfinite(qd) and qd < target
    return GATE_CLOSED + (POOL_GROWS if grows else "") + _counted(ev)


def _frozen(ev: dict) -> str:
    w = ev.get("cs_waking")
    return FROZEN if w is not None and math.isfinite(w) and w < WAKING_MIN else ""


def util_cause(data: Any, m: Measured) -> Cause:
    """A utilization comparison: both allocations, the most the ratio could be for a CoreSync
    that kept only its busy cores (the other policy's own cores over them), and CoreSync's gate."""
    ev = dict(m.evidence)
    text = ("at load {load} CoreSync ({cs_variant}) keeps {cs_cores} LC cores for {cs_busy} busy, {other} "
            "{other_cores} for {other_busy} busy; even a CoreSync that kept only its busy cores would measure "
            "{cap} ({other}'s cores over CoreSync's busy cores). ") + _gate_text(ev) + "." + _frozen(ev)
    return Cause(text, ev)


def p99_cause(data: Any, m: Measured) -> Cause:
    """A p99 comparison: both tails and allocations, and CoreSync's gate."""
    ev = dict(m.evidence)
    text = ("at load {load} CoreSync's p99 is {cs_p99} µs on {cs_cores} LC cores ({cs_busy} busy), {other}'s "
            "{other_p99} µs on {other_cores} cores ({other_busy} busy). ") + _gate_text(ev) + "." + _frozen(ev)
    if _frozen(ev):
        text += " Its queueing delay p99 is {qd99} µs, {other}'s {other_qd99} µs."
    return Cause(text, ev)


def be_cause(data: Any, m: Measured) -> Cause:
    ev = dict(m.evidence)
    text = ("at {at}: CoreSync leaves {cs_be} cores to the best-effort task ({cs_cores} LC cores for {cs_busy} "
            "busy), {other} {other_be} ({other_cores} LC cores). ") + _gate_text(ev) + "." + _frozen(ev)
    return Cause(text, ev)


def overload_cause(data: Any, m: Measured) -> Cause:
    """A throughput comparison near or beyond capacity: whether CoreSync's overload veto fires
    (drained sessions), and both policies' cores and throughput."""
    ev = dict(m.evidence)
    dr = ev.get("drained")
    if dr is not None and math.isfinite(dr) and dr < NO_DRAIN:
        text = ("at {at}: CoreSync's mean drained sessions are {drained}, so its overload veto never fires and it "
                "parks as its base allocator (Caladan's ias rule) does; its clients gave up on {client_timeouts} "
                "requests that waited too long for a credit, its server dropped {server_drops}. ")
    else:
        text = "at {at}: CoreSync's mean drained sessions are {drained}: its overload veto keeps its cores. "
    if _counted(ev):
        text = text.rstrip(". ") + _counted(ev) + ". "
    text += ("CoreSync keeps {cs_cores} LC cores ({cs_busy} busy) for {cs_thr} req/s, {other} {other_cores} "
             "({other_busy} busy) for {other_thr} req/s")
    if ev.get("other") != NAMES[CAL]:
        text += "; Caladan {cal_cores} cores for {cal_thr} req/s"
    return Cause(text, ev)


def deviation_cause(data: Any, m: Measured) -> Cause:
    ev = dict(m.evidence)
    text = ("the largest deviation is {other} at {at}: {other_metric} {other_value} against CoreSync's {cs_value} "
            "({other_cores} against {cs_cores} LC cores)")
    return Cause(text, ev)


# ---------------------------------------------------------------------------------------------
# measures: a comparison of two policies at medium load


def pair_at(exp: str, metric: str, num: str, den: str, form: str, load: float = MEDIUM) -> Callable[[Any], Measured]:
    """``form(metric(num), metric(den))`` at ``load``, paired per seed; CoreSync must park there."""
    other = den if num == CS else num

    def measure(data: Any) -> Measured:
        d = _d(data)
        a, b = v(exp, num), v(exp, den)
        why = d.missing((a, b), (load,))
        if why:
            return Measured(None, missing=why)
        m, ci, n = _paired(d, load, metric, form, a, b)
        ev = {**cs_state(d, exp, load), **other_state(d, exp, other, load)}
        if metric == UTIL:  # the most a CoreSync that kept only its busy cores could reach
            ev["cap"] = _f(FORMS[form](ev["other_cores"], ev["cs_busy"]) if num != CS
                           else FORMS[form](ev["cs_busy"], ev["other_cores"]))
        regime, rev = parks(d, [(v(exp, CS), load)])
        return Measured(m, ci, n, evidence={**ev, **rev}, regime=regime,
                        extra={"by_load": {str(x): _f(_paired(d, x, metric, form, a, b)[0])
                                           for x in d.loads_in(BELOW)}})

    return measure


def pair_range(exp: str, metric: str, num: str, den: str, form: str, centre: float,
               loads: Sequence[float] = BELOW) -> Callable[[Any], Measured]:
    """A range over loads ("by 3–21 %"): the load whose value lies farthest from the range's
    centre decides (every load must lie in the range)."""
    other = den if num == CS else num

    def measure(data: Any) -> Measured:
        d = _d(data)
        a, b = v(exp, num), v(exp, den)
        why = d.missing((a, b), loads)
        if why:
            return Measured(None, missing=why)
        by = {x: _paired(d, x, metric, form, a, b) for x in loads}
        at = max(by, key=lambda x: abs(by[x][0] - centre) if math.isfinite(by[x][0]) else math.inf)
        m, ci, n = by[at]
        ev = {**cs_state(d, exp, at), **other_state(d, exp, other, at)}
        regime, rev = parks(d, [(v(exp, CS), x) for x in loads])
        return Measured(m, ci, n, evidence={**ev, **rev}, regime=regime,
                        extra={"at_load": at, "by_load": {str(x): _f(s[0]) for x, s in by.items()}})

    return measure


def upto_below(exp: str, metric: str, others: Sequence[str], form: str, cs_first: bool,
               loads: Sequence[float] = BELOW) -> Callable[[Any], Measured]:
    """"Up to": the largest per-seed-paired value over ``others`` and ``loads``."""

    def measure(data: Any) -> Measured:
        d = _d(data)
        pols = [p for p in others if d.has(v(exp, p))]
        why = d.missing((v(exp, CS),), loads) or (None if pols else f"the run has no {exp} baseline")
        if why:
            return Measured(None, missing=why)
        by = {(p, x): (_paired(d, x, metric, form, v(exp, CS), v(exp, p)) if cs_first
                       else _paired(d, x, metric, form, v(exp, p), v(exp, CS))) for p in pols for x in loads}
        finite = {k: s for k, s in by.items() if math.isfinite(s[0])}
        if not finite:
            return Measured(None, missing="no finite value at any point")
        (p, x) = max(finite, key=lambda k: finite[k][0])
        m, ci, n = finite[(p, x)]
        ev = {**cs_state(d, exp, x), **other_state(d, exp, p, x), "at": f"{NAMES[p]} @ load {x:g}",
              "cs_be": _f(d.mean(v(exp, CS), x, BE))}
        regime, rev = parks(d, [(v(exp, CS), y) for y in loads])
        return Measured(m, ci, n, evidence={**ev, **rev}, regime=regime,
                        extra={"at": f"{p} @ {x:g}", "by_point": {f"{q}@{y:g}": _f(s[0]) for (q, y), s in by.items()}})

    return measure


def across_sessions(metric: str, other: str, form: str, paper: float, log: bool) -> Callable[[Any], Measured]:
    """Fig. 8 at load 0.5 for 100, 1 000 and 10 000 sessions: the session count farthest from the
    paper's number decides (it holds "across all connection counts")."""

    def measure(data: Any) -> Measured:
        d = _d(data)
        exps = [e for e in SESSIONS if d.has(v(e, CS), v(e, other))]
        if len(exps) < len(SESSIONS) or not d.loads_in([MEDIUM]):
            return Measured(None, missing=d.missing([v(e, x) for e in SESSIONS for x in (CS, other)], [MEDIUM]))
        by = {e: _paired(d, MEDIUM, metric, form, v(e, other), v(e, CS)) for e in exps}

        def dist(e: str) -> float:
            x = by[e][0]
            if not math.isfinite(x):
                return math.inf
            return abs(math.log(x / paper)) if log and x > 0 else abs(x - paper)

        e = max(exps, key=dist)
        m, ci, n = by[e]
        ev = {**cs_state(d, e, MEDIUM), **other_state(d, e, other, MEDIUM)}
        if metric == UTIL:
            ev["cap"] = _f(FORMS[form](ev["other_cores"], ev["cs_busy"]))
        regime, rev = parks(d, [(v(x, CS), MEDIUM) for x in exps])
        return Measured(m, ci, n, evidence={**ev, **rev}, regime=regime,
                        extra={"at": f"{SESSIONS[e]} sessions",
                               "by_sessions": {str(SESSIONS[x]): _f(s[0]) for x, s in by.items()}})

    return measure


# ---------------------------------------------------------------------------------------------
# measures: near and beyond capacity


def _overload_ev(d: Data, exp: str, p: str, x: float) -> dict[str, Any]:
    ev = {**cs_state(d, exp, x), **other_state(d, exp, p, x), "at": f"{NAMES.get(p, p)} @ load {x:g}"}
    ev.update({k.replace("other", "cal"): val for k, val in other_state(d, exp, CAL, x).items() if k != "other"})
    return ev


def gain_upto(exp: str, others: Sequence[str], loads: Sequence[float] = ABOVE, cs_over: bool = True,
              largest: bool = True) -> Callable[[Any], Measured]:
    """The largest (or smallest) gain over ``others`` and ``loads``: thr(CoreSync)/thr(other) − 1
    (``cs_over``) or thr(other)/thr(CoreSync) − 1, paired per seed."""

    def measure(data: Any) -> Measured:
        d = _d(data)
        pols = [p for p in others if d.has(v(exp, p))]
        why = d.missing((v(exp, CS),), loads) or (None if pols else f"the run has no {exp} baseline")
        if why:
            return Measured(None, missing=why)
        by = {(p, x): (_paired(d, x, THR, "gain", v(exp, CS), v(exp, p)) if cs_over
                       else _paired(d, x, THR, "gain", v(exp, p), v(exp, CS))) for p in pols for x in loads}
        finite = {k: s for k, s in by.items() if math.isfinite(s[0])}
        if not finite:
            return Measured(None, missing="no finite throughput ratio")
        (p, x) = (max if largest else min)(finite, key=lambda k: finite[k][0])
        m, ci, n = finite[(p, x)]
        return Measured(m, ci, n, evidence=_overload_ev(d, exp, p, x),
                        extra={"at": f"{p} @ {x:g}", "by_point": {f"{q}@{y:g}": _f(s[0]) for (q, y), s in by.items()}})

    return measure


# The full profile's measured window per run (sweep.toml's duration_ms). Table I and II's cells
# differ from 1 by 0.1–6 %: a quick run's 20 ms window cannot resolve them, so a cell is judged
# only on full-length points and a quick run leaves it out of regime, saying so.
FULL_WINDOW_MS = 300.0
WINDOW = "duration_s"


def table_cell(exp: str, policy: str, load: float) -> Callable[[Any], Measured]:
    """One cell of Table I / II: thr(policy)/thr(CoreSync) − 1 at ``load``, paired per seed;
    judged only where each run's measured window is the full profile's."""

    def measure(data: Any) -> Measured:
        d = _d(data)
        why = d.missing((v(exp, CS), v(exp, policy)), (load,))
        if why:
            return Measured(None, missing=why)
        m, ci, n = _paired(d, load, THR, "gain", v(exp, policy), v(exp, CS))
        windows = pd.concat([d.values(v(exp, q), load, WINDOW) for q in (CS, policy)])
        window_ms = float(windows.min()) * 1e3 if len(windows) else None
        regime = [Condition("the measured window per run in ms (the full profile's is needed: the cells differ "
                            "from 1 by a few percent)", window_ms, ">=", FULL_WINDOW_MS)]
        return Measured(m, ci, n, evidence=_overload_ev(d, exp, policy, load), regime=regime)

    return measure


def largest_deviation(points: Callable[[Data], list[tuple[str, str, float]]], metric: str) -> Callable[[Any], Measured]:
    """"Within b of CoreSync": the largest |metric(policy)/metric(CoreSync) − 1| over the
    (experiment, policy, load) ``points``, with that point's confidence interval."""

    def measure(data: Any) -> Measured:
        d = _d(data)
        pts = [p for p in points(d) if d.has(v(p[0], CS), v(p[0], p[1])) and d.loads_in([p[2]])]
        if not pts:
            return Measured(None, missing="the run has none of the claim's points")
        by = {p: _paired(d, p[2], metric, "gain", v(p[0], p[1]), v(p[0], CS)) for p in pts}
        finite = {k: s for k, s in by.items() if math.isfinite(s[0])}
        if not finite:
            return Measured(None, missing="no finite ratio")
        e, p, x = max(finite, key=lambda k: abs(finite[k][0]))
        m, ci, n = finite[(e, p, x)]
        ev = {**_overload_ev(d, e, p, x), "at": f"{e} @ load {x:g}", "other_metric": metric,
              "other_value": _f(d.mean(v(e, p), x, metric)),
              "cs_value": _f(d.mean(v(e, CS), x, metric))}
        return Measured(abs(m), ci, n, evidence=ev,
                        extra={"at": f"{e}/{p}@{x:g}", "signed": _f(m),
                               "by_point": {f"{a}/{b}@{c:g}": _f(s[0]) for (a, b, c), s in by.items()}})

    return measure


def _below_points(d: Data) -> list[tuple[str, str, float]]:
    return [(e, p, x) for e in EXPERIMENTS for p in POLICIES if p != CS for x in d.loads_in(BELOW)]


def _beyond_points(d: Data) -> list[tuple[str, str, float]]:
    return [(e, p, x) for e in ("exp10", "bim10") for p in POLICIES if p != CS for x in d.loads_in(BEYOND)]


def _us_points(d: Data) -> list[tuple[str, str, float]]:
    return [(e, p, x) for e in ("exp1", "bim1") for p in POLICIES if p != CS for x in d.loads_in(ABOVE)]


def _caladan_points(exp: str, loads: Sequence[float]) -> Callable[[Data], list[tuple[str, str, float]]]:
    return lambda d: [(exp, CAL, x) for x in d.loads_in(loads)]


def at_least_shenango(data: Any) -> Measured:
    """The smallest thr(CoreSync)/thr(Shenango) − 1 over loads 1.0/1.3/1.5 of exp./bimodal 10 µs,
    1 000 and 10 000 sessions (Table I, Fig. 8)."""
    d = _d(data)
    exps = [e for e in ("exp10", "bim10", "n1000", "n10000") if d.has(v(e, CS), v(e, SH))]
    loads = d.loads_in(ABOVE)
    if not exps or not loads:
        return Measured(None, missing="the run has no CoreSync and Shenango beyond capacity")
    by = {(e, x): _paired(d, x, THR, "gain", v(e, CS), v(e, SH)) for e in exps for x in loads}
    e, x = min(by, key=lambda k: by[k][0] if math.isfinite(by[k][0]) else math.inf)
    m, ci, n = by[(e, x)]
    return Measured(m, ci, n, evidence=_overload_ev(d, e, SH, x),
                    extra={"at": f"{e}@{x:g}", "by_point": {f"{a}@{b:g}": _f(s[0]) for (a, b), s in by.items()}})


def urange_vs_caladan(data: Any) -> Measured:
    """§II-B: thr(Utilization Range)/thr(Caladan) − 1, exp. 10 µs, per seed the mean over loads
    1.0/1.3/1.5."""
    d = _d(data)
    a, b = v("exp10", UR), v("exp10", CAL)
    why = d.missing((a, b), ABOVE)
    if why:
        return Measured(None, missing=why)
    per = pd.concat([pd.Series(d.per_seed(x, THR, FORMS["gain"], a, b)) for x in ABOVE], axis=1)
    m, ci, n = mean_ci95(per.mean(axis=1))
    by = {x: _paired(d, x, THR, "gain", a, b)[0] for x in ABOVE}
    x = min(by, key=lambda k: by[k])
    ev = {**cs_state(d, "exp10", x), **other_state(d, "exp10", UR, x), **other_state(d, "exp10", CAL, x, "cal"),
          "at": f"load {x:g}"}
    return Measured(m, ci, n, evidence=ev, extra={"by_load": {str(k): _f(val) for k, val in by.items()}})


def urange_caladan_cause(data: Any, m: Measured) -> Cause:
    ev = dict(m.evidence)
    text = ("at {at} (the load where Utilization Range fares worst) it keeps {other_cores} LC cores ({other_busy} "
            "busy) for {other_thr} req/s, Caladan {cal_cores} ({cal_busy} busy) for {cal_thr} req/s")
    if min(ev.get("other_cores") or 0, ev.get("cal_cores") or 0) >= MAX_CORES - PARKED_MIN:
        text += ": both keep nearly all {max_cores} cores, so neither revokes a core on a dip in the admitted load"
    return Cause(text, ev)


def sessions_order(metric: str, form: str) -> Callable[[Any], Measured]:
    """Fig. 8 beyond capacity, 10 000 against 100 sessions: cores kept by CoreSync (``diff`` of
    cores) or its throughput gain over Shenango, per seed the mean over loads 1.0/1.3/1.5."""

    def measure(data: Any) -> Measured:
        d = _d(data)
        need = (v("exp10", CS), v("n10000", CS)) + ((v("exp10", SH), v("n10000", SH)) if metric == THR else ())
        why = d.missing(need, ABOVE)
        if why:
            return Measured(None, missing=why)
        cols = []
        for x in ABOVE:
            if metric == THR:
                hi = pd.Series(d.per_seed(x, THR, FORMS["ratio"], v("n10000", CS), v("n10000", SH)))
                lo = pd.Series(d.per_seed(x, THR, FORMS["ratio"], v("exp10", CS), v("exp10", SH)))
                cols.append(hi - lo)
            else:
                cols.append(pd.Series(d.per_seed(x, CORES, FORMS["diff"], v("n10000", CS), v("exp10", CS))))
        m, ci, n = mean_ci95(pd.concat(cols, axis=1).mean(axis=1))
        ev = {"n_lo": SESSIONS["exp10"], "n_hi": SESSIONS["n10000"],
              "cores_100": _f(np.mean([d.mean(v("exp10", CS), x, CORES) for x in ABOVE])),
              "cores_10000": _f(np.mean([d.mean(v("n10000", CS), x, CORES) for x in ABOVE])),
              "drained_100": _f(np.mean([d.mean(v("exp10", CS), x, DRAINED) for x in ABOVE])),
              "drained_10000": _f(np.mean([d.mean(v("n10000", CS), x, DRAINED) for x in ABOVE]))}
        if metric == THR:
            for e, k in (("exp10", "gain_100"), ("n10000", "gain_10000")):
                ev[k] = _f(np.mean([_paired(d, x, THR, "gain", v(e, CS), v(e, SH))[0] for x in ABOVE]))
        return Measured(m, ci, n, evidence=ev)

    return measure


SESSIONS_CORES_CAUSE = ("beyond capacity CoreSync keeps {cores_100} LC cores with {n_lo} sessions (mean drained "
                        "sessions {drained_100}) and {cores_10000} with {n_hi} (drained {drained_10000})")
SESSIONS_THR_CAUSE = ("CoreSync's mean throughput gain over Shenango beyond capacity is {gain_100} with {n_lo} "
                      "sessions and {gain_10000} with {n_hi} (CoreSync keeps {cores_100} and {cores_10000} LC cores; "
                      "mean drained sessions {drained_100} and {drained_10000})")


# ---------------------------------------------------------------------------------------------
# measures: Fig. 1, Pareto frontier, R


def fig1_not_dominated(data: Any) -> Measured:
    """The (poll, load) points below capacity where CoreSync does not dominate Caladan (p99 or
    utilization higher than Caladan's, on means)."""
    d = _d(data)
    cs = v("exp10", CS)
    cal = {p: x for p, x in CALADAN_POLL.items() if d.has(x)}
    loads = d.loads_in(BELOW)
    why = d.missing((cs, *CALADAN_POLL.values()), BELOW)
    if why:
        return Measured(None, missing=why)
    bad = {}
    for p, var in cal.items():
        for x in loads:
            if not (d.mean(cs, x, P99) <= d.mean(var, x, P99) and d.mean(cs, x, UTIL) <= d.mean(var, x, UTIL)):
                bad[(p, x)] = var
    ev: dict[str, Any] = {"checked": len(cal) * len(loads), "not_dominated": len(bad)}
    if bad:
        (p, x) = next(iter(bad))
        ev.update({"poll": p, "at_load": x, "cs_p99": _f(d.mean(cs, x, P99)), "cal_p99": _f(d.mean(cal[p], x, P99)),
                   "cs_cores": _f(d.mean(cs, x, CORES)), "cal_cores": _f(d.mean(cal[p], x, CORES))})
    regime, rev = parks(d, [(cs, x) for x in loads])
    return Measured(float(len(bad)), None, len(d.seeds), evidence={**ev, **rev}, regime=regime,
                    extra={"not_dominated_at": [f"poll {p} µs @ {x:g}" for p, x in bad]})


FIG1_CAUSE = ("CoreSync is not dominant at {not_dominated} of {checked} (poll, load) points; at poll {poll} µs, load "
              "{at_load}: CoreSync p99 {cs_p99} µs on {cs_cores} LC cores, Caladan {cal_p99} µs on {cal_cores}")


def pareto_dominated(data: Any) -> Measured:
    """The (workload, load) points below capacity where some policy has both a lower mean p99 and
    a lower mean utilization than CoreSync."""
    d = _d(data)
    loads = d.loads_in(BELOW)
    if not loads:
        return Measured(None, missing="the run has no load below capacity")
    checked, dom, pts = 0, {}, []
    for exp in EXPERIMENTS:
        cs = v(exp, CS)
        others = [p for p in POLICIES if p != CS and d.has(v(exp, p))]
        if not d.has(cs) or not others:
            continue
        for x in loads:
            checked += 1
            pts.append((cs, x))
            p99, util = d.mean(cs, x, P99), d.mean(cs, x, UTIL)
            by = [p for p in others if d.mean(v(exp, p), x, P99) < p99 and d.mean(v(exp, p), x, UTIL) < util]
            if by:
                dom[(exp, x)] = by
    if not checked:
        return Measured(None, missing="the run has no CoreSync with a baseline")
    ev: dict[str, Any] = {"checked": checked, "dominated": len(dom)}
    if dom:
        (exp, x), by = next(iter(dom.items()))
        ev.update({**cs_state(d, exp, x), **other_state(d, exp, by[0], x), "at": f"{exp} @ load {x:g}"})
    regime, rev = parks(d, pts)
    return Measured(float(len(dom)), None, len(d.seeds), evidence={**ev, **rev}, regime=regime,
                    extra={"dominated_at": {f"{e}@{x:g}": p for (e, x), p in dom.items()}})


PARETO_CAUSE = ("CoreSync is dominated at {dominated} of {checked} (workload, load) points; at {at}: {other} p99 "
                "{other_p99} µs on {other_cores} LC cores against CoreSync's {cs_p99} µs on {cs_cores}")


def fig1_core_difference(data: Any) -> Measured:
    """"one less core": the largest cores(Caladan 10 µs) − cores(CoreSync) over loads 0.2/0.5/0.8."""
    d = _d(data)
    cs, c10 = v("exp10", CS), CALADAN_POLL[10]
    why = d.missing((cs, c10), BELOW)
    if why:
        return Measured(None, missing=why)
    by = {x: _paired(d, x, CORES, "diff", c10, cs) for x in BELOW}
    x = max(by, key=lambda k: _low(by[k][0]))
    m, ci, n = by[x]
    ev = {**cs_state(d, "exp10", x), "other": "Caladan (poll 10 µs)", "other_cores": _f(d.mean(c10, x, CORES)),
          "other_busy": _f(d.mean(c10, x, BUSY))}
    ev["cap"] = _f(ev["other_cores"] - ev["cs_busy"])
    regime, rev = parks(d, [(cs, y) for y in BELOW])
    return Measured(m, ci, n, evidence={**ev, **rev}, regime=regime,
                    extra={"at_load": x, "by_load": {str(k): _f(s[0]) for k, s in by.items()}})


def fig1_util_upto(data: Any) -> Measured:
    """"improving utilization by up to 13 %": the largest util(Caladan 10 µs)/util(CoreSync) − 1
    over loads 0.2/0.5/0.8."""
    d = _d(data)
    cs, c10 = v("exp10", CS), CALADAN_POLL[10]
    why = d.missing((cs, c10), BELOW)
    if why:
        return Measured(None, missing=why)
    by = {x: _paired(d, x, UTIL, "gain", c10, cs) for x in BELOW}
    x = max(by, key=lambda k: _low(by[k][0]))
    m, ci, n = by[x]
    ev = {**cs_state(d, "exp10", x), "other": "Caladan (poll 10 µs)", "other_cores": _f(d.mean(c10, x, CORES)),
          "other_busy": _f(d.mean(c10, x, BUSY))}
    ev["cap"] = _f(safe_ratio(ev["other_cores"], ev["cs_busy"]) - 1)
    regime, rev = parks(d, [(cs, y) for y in BELOW])
    return Measured(m, ci, n, evidence={**ev, **rev}, regime=regime,
                    extra={"at_load": x, "by_load": {str(k): _f(s[0]) for k, s in by.items()}})


def r_order(metric: str) -> Callable[[Any], Measured]:
    """Fig. 7: R = 10 against R = 100 over loads 0.2/0.5/0.8: the worst load of
    p99(R=10)/p99(R=100) − 1 (should be below 0) or util(R=10) − util(R=100) (above 0)."""
    form = "gain" if metric == P99 else "diff"

    def measure(data: Any) -> Measured:
        d = _d(data)
        r10, r100 = R_VARIANTS[10], R_VARIANTS[100]
        why = d.missing((r10, r100), BELOW)
        if why:
            return Measured(None, missing=why)
        by = {x: _paired(d, x, metric, form, r10, r100) for x in BELOW}
        pick = max if metric == P99 else min
        x = pick(by, key=lambda k: by[k][0] if math.isfinite(by[k][0]) else (math.inf if metric == P99 else -math.inf))
        m, ci, n = by[x]
        ev = {"load": x, "r_lo": 10, "r_hi": 100, "r10_cores": _f(d.mean(r10, x, CORES)),
              "r100_cores": _f(d.mean(r100, x, CORES)),
              "r10_p99": _f(d.mean(r10, x, P99)), "r100_p99": _f(d.mean(r100, x, P99)),
              **{f"r{r}_gate": cs_state(d, "exp10", x, var, float(r))["gate"]
                 for r, var in R_VARIANTS.items() if d.has(var)},
              "issued": _f(d.mean(r100, x, ISSUED)), "r100_waking": _f(d.mean(r100, x, WAKING))}
        regime, rev = parks(d, [(r100, y) for y in BELOW])
        return Measured(m, ci, n, evidence={**ev, **rev}, regime=regime,
                        extra={"at_load": x, "by_load": {str(k): _f(s[0]) for k, s in by.items()},
                               "curves": {f"R={r}": {str(y): {"p99": _f(d.mean(var, y, P99), 2),
                                                              "util": _f(d.mean(var, y, UTIL))} for y in BELOW}
                                          for r, var in R_VARIANTS.items() if d.has(var)}})

    return measure


R_CAUSE = ("at load {load} CoreSync keeps {r10_cores} LC cores with R = {r_lo} and {r100_cores} with R = {r_hi} "
           "(p99 {r10_p99} and {r100_p99} µs, mean cores waking {r100_waking} with R = {r_hi}); with {issued} credits "
           "issued its gate (C_issued − N)/(R·K) is {r10_gate} for R = {r_lo} and {r100_gate} for R = {r_hi}, so "
           "R decides nothing while both gates stay above one")


# ---------------------------------------------------------------------------------------------
# measures: the mechanism, the method and the time series


def partial_proportionality(data: Any) -> Measured:
    """(C_issued − N)/(R·K) of CoreSync, exp. 10 µs, load 0.5, per seed."""
    d = _d(data)
    cs = v("exp10", CS)
    why = d.missing((cs,), (MEDIUM,))
    if why:
        return Measured(None, missing=why)
    iss, cores = d.values(cs, MEDIUM, ISSUED), d.values(cs, MEDIUM, CORES)
    m, ci, n = mean_ci95((iss - _sessions("exp10")) / (_r_of("exp10") * cores))
    return Measured(m, ci, n, evidence=cs_state(d, "exp10", MEDIUM))


PROPORTIONALITY_CAUSE = ("at load {load} Breakwater's pool is {pool} credits ({pool_per_session} per session): the "
                         "queueing delay p99 {qd99} µs stays below its target {target} µs, so it only increases; "
                         "{issued} credits are issued against R·K + N = {prop_bound} for CoreSync's {cs_cores} LC "
                         "cores ({cs_busy} busy)")


def timeseries_gate(data: Any) -> Measured:
    """From a cold start: (C_issued − N)/(R·K) over the last 100 ms of the 800 ms run, the larger
    of loads 0.2 and 0.5 (seed 1)."""
    ts = _ts(data)
    if ts is None or ts.empty:
        return Measured(None, missing="the cold-start time series was not run")
    st = {x: steady(ts, x) for x in TS_LOADS if (ts["load"] == x).any()}
    gate = {x: safe_ratio(s["credits_issued"] - TS_N, TS_R * s["cores_allocated"]) for x, s in st.items()}
    x = max(gate, key=lambda k: gate[k])
    s = st[x]
    ev = {"load": x, "t_end": _f(float(ts["t_ms"].max()), 1), "pool": _f(s["credit_pool"], 1),
          "issued": _f(s["credits_issued"], 1), "prop_bound": _f(s["bound_rk_n"], 1),
          "cs_cores": _f(s["cores_allocated"]),
          "cs_busy": _f(s["cores_busy"]), "blocked_from_ms": first_blocked_ms(ts, x)}
    tail_ms = 100.0
    ev.update({k: (_f(c, 0) if c is not None and k != "last_park_ms" else c)
               for k, c in park_counts(ts, x, tail_ms).items()}, tail_ms=tail_ms)
    return Measured(gate[x], None, 1, evidence=ev,
                    extra={"at_load": x,
                           "steady_state": {str(k): {a: _f(b, 1) for a, b in val.items()} for k, val in st.items()},
                           "gate_closed_for_good_from_ms": {str(k): first_blocked_ms(ts, k) for k in st}})


TIMESERIES_CAUSE = ("over the last part of a cold start ending at {t_end} ms, load {load}: pool {pool}, issued "
                    "{issued} credits against R·K + N = {prop_bound} for {cs_cores} LC cores ({cs_busy} busy); the "
                    "issued credits stay above the bound from {blocked_from_ms} ms on; in its last {tail_ms} ms "
                    "{park_attempts} park attempts, {park_vetoes} kept polling by the gate, {parks} parks and "
                    "{wakeups} wake-ups, the last park in the sample ending at {last_park_ms} ms")


def no_park_while_drained(data: Any) -> Measured:
    """Parks while a session is drained, summed over every CoreSync run."""
    d = _d(data)
    rows = d.df[d.df["variant"].str.contains("/coresync")]
    if not len(rows) or PWD not in rows.columns:
        return Measured(None, missing="the run has no CoreSync with the parks-while-drained counter")
    total = float(rows[PWD].astype(float).sum())
    drained = int((rows[DRAINED].astype(float) > 0).sum()) if DRAINED in rows.columns else None
    return Measured(total, None, len(rows), evidence={"runs": len(rows), "runs_with_drained_sessions": drained},
                    extra={"runs_with_drained_sessions": drained})


def steady_state(metric: str) -> Callable[[Any], Measured]:
    """Cold start (pool grown from max_cores over a 650 ms warm-up) against the pool-ceiling start,
    CoreSync exp. 10 µs: the load with the largest |difference| of utilization, or of p99 (relative),
    paired per seed."""
    form = "diff" if metric == UTIL else "gain"

    def measure(data: Any) -> Measured:
        d = _d(data)
        cs = v("exp10", CS)
        why = d.missing((cs, COLD), ())
        if why:
            return Measured(None, missing=why)
        by = {x: _paired(d, x, metric, form, COLD, cs) for x in d.loads}
        x = max(by, key=lambda k: abs(by[k][0]) if math.isfinite(by[k][0]) else math.inf)
        m, ci, n = by[x]
        ev = {"load": x, "cold_cores": _f(d.mean(COLD, x, CORES)), "cs_cores": _f(d.mean(cs, x, CORES)),
              "cold_p99": _f(d.mean(COLD, x, P99)), "cs_p99": _f(d.mean(cs, x, P99)),
              "cold_waking": _f(d.mean(COLD, x, WAKING)), "cs_waking": _f(d.mean(cs, x, WAKING)),
              "cold_pool": _f(d.mean(COLD, x, POOL), 1), "pool": _f(d.mean(cs, x, POOL), 1)}
        return Measured(abs(m), ci, n, evidence=ev,
                        extra={"at_load": x, "signed": _f(m), "by_load": {str(k): _f(s[0]) for k, s in by.items()}})

    return measure


STEADY_CAUSE = ("at load {load} CoreSync keeps {cold_cores} LC cores from a cold start (pool {cold_pool}) and "
                "{cs_cores} from the pool ceiling (pool {pool}), with mean cores waking {cold_waking} and {cs_waking}: "
                "p99 {cold_p99} against {cs_p99} µs. Where no core wakes, each run keeps the allocation it reached "
                "while its issued credits were still low, so the two starts need not meet")


# ---------------------------------------------------------------------------------------------
# the claims

_F3, _F4, _F5, _F6, _T1, _T2 = "§IV-B, Fig. 3", "§IV-B, Fig. 4", "§IV-B, Fig. 5", "§IV-C, Fig. 6", \
    "§IV-B, Table I", "§IV-C, Table II"
_MED = "at load 0.5 (the paper's medium load), paired per seed"


def _medium_claim(cid: str, exp: str, metric: str, num: str, den: str, form: str, kind: str, paper: float,
                  ref: str, quote: str, claim: str, tolerance: Tolerance | None = None) -> ClaimSpec:
    what = {P99: "p99", UTIL: "utilization (LC cores allocated / 16)"}[metric]
    how = {"ratio": f"{what}({NAMES[num]}) / {what}({NAMES[den]})",
           "gain": f"{what}({NAMES[num]}) / {what}({NAMES[den]}) − 1",
           "reduction": f"1 − {what}({NAMES[num]}) / {what}({NAMES[den]})"}[form]
    return ClaimSpec(id=cid, claim=claim, paper_ref=ref, kind=kind, paper=paper, quote=quote,
                     unit="×" if kind == RATIO else "", how=f"{how}, {EXPERIMENTS[exp]}, {_MED}",
                     measure=pair_at(exp, metric, num, den, form), tolerance=tolerance,
                     cause=util_cause if metric == UTIL else p99_cause, group=ref)


_Q_F3_SH = "CoreSync improves tail latency by 1.7× compared to Shenango"
_Q_F3_CAL = ("Caladan remains on the Pareto frontier offering slightly better utilization (a reduction of 2%) at the "
             "expense of latency (an increase of 16%), as compared to CoreSync")
_Q_F3_UTIL = ("At medium loads, CoreSync improves CPU usage by 1.4× and 1.2× over Utilization Range and Delay Range "
              "policies, respectively, while maintaining similar tail latency to Utilization Range")
_Q_F4_P99 = ("at medium loads, CoreSync reduces latency compared to reactive policies like Shenango and Caladan by 50% "
             "and 10%, respectively")
_Q_F4_UTIL = "CoreSync improves utilization by 1.3× and 1.2× compared to Utilization range and Delay range"
_Q_F5_EXP = ("At medium load, for the exponential case, CoreSync achieves up to 1.6× and 1.3× lower latency than "
             "Shenango and Caladan, while providing 10% and 5% better utilization than the Utilization and Delay "
             "range policies")
_Q_F5_BIM = ("For the bimodal case, CoreSync delivers up to 1.7× and 1.2× lower latency than Shenango and Caladan, "
             "and 10% and 7% better utilization than the Utilization and Delay range policies")

MEDIUM_CLAIMS = [
    _medium_claim("fig3/p99-shenango-vs-coresync", "exp10", P99, SH, CS, "ratio", RATIO, 1.7, _F3, _Q_F3_SH,
                  "Exp. 10 µs, medium load: CoreSync's p99 is 1.7× lower than Shenango's"),
    _medium_claim("fig3/util-urange-vs-coresync", "exp10", UTIL, UR, CS, "ratio", RATIO, 1.4, _F3, _Q_F3_UTIL,
                  "Exp. 10 µs, medium load: CoreSync uses 1.4× fewer cores than Utilization Range (the paper's "
                  "core saving; bounded by Utilization Range's own cores over the busy ones)"),
    _medium_claim("fig3/util-drange-vs-coresync", "exp10", UTIL, DR, CS, "ratio", RATIO, 1.2, _F3, _Q_F3_UTIL,
                  "Exp. 10 µs, medium load: CoreSync uses 1.2× fewer cores than Delay Range"),
    _medium_claim("fig3/p99-urange-similar", "exp10", P99, UR, CS, "ratio", RATIO, 1.0, _F3, _Q_F3_UTIL,
                  "Exp. 10 µs, medium load: CoreSync's p99 is similar to Utilization Range's (ratio 1)"),
    _medium_claim("fig3/caladan-util-vs-coresync", "exp10", UTIL, CAL, CS, "gain", GAIN, -0.02, _F3, _Q_F3_CAL,
                  "Exp. 10 µs, medium load: Caladan's utilization is 2 % lower than CoreSync's"),
    _medium_claim("fig3/caladan-p99-vs-coresync", "exp10", P99, CAL, CS, "gain", GAIN, 0.16, _F3, _Q_F3_CAL,
                  "Exp. 10 µs, medium load: Caladan's p99 is 16 % higher than CoreSync's"),
    _medium_claim("fig4/util-urange-vs-coresync", "bim10", UTIL, UR, CS, "ratio", RATIO, 1.3, _F4, _Q_F4_UTIL,
                  "Bimodal 10 µs, medium load: CoreSync uses 1.3× fewer cores than Utilization Range"),
    _medium_claim("fig4/util-drange-vs-coresync", "bim10", UTIL, DR, CS, "ratio", RATIO, 1.2, _F4, _Q_F4_UTIL,
                  "Bimodal 10 µs, medium load: CoreSync uses 1.2× fewer cores than Delay Range"),
    _medium_claim("fig4/p99-reduction-vs-shenango", "bim10", P99, CS, SH, "reduction", GAIN, 0.50, _F4, _Q_F4_P99,
                  "Bimodal 10 µs, medium load: CoreSync's p99 is 50 % lower than Shenango's"),
    _medium_claim("fig4/p99-reduction-vs-caladan", "bim10", P99, CS, CAL, "reduction", GAIN, 0.10, _F4, _Q_F4_P99,
                  "Bimodal 10 µs, medium load: CoreSync's p99 is 10 % lower than Caladan's"),
    _medium_claim("fig5/exp1-p99-shenango-vs-coresync", "exp1", P99, SH, CS, "ratio", RATIO, 1.6, _F5, _Q_F5_EXP,
                  "Exp. 1 µs, medium load: CoreSync's p99 is 1.6× lower than Shenango's"),
    _medium_claim("fig5/exp1-p99-caladan-vs-coresync", "exp1", P99, CAL, CS, "ratio", RATIO, 1.3, _F5, _Q_F5_EXP,
                  "Exp. 1 µs, medium load: CoreSync's p99 is 1.3× lower than Caladan's"),
    _medium_claim("fig5/exp1-util-urange-vs-coresync", "exp1", UTIL, UR, CS, "gain", GAIN, 0.10, _F5, _Q_F5_EXP,
                  "Exp. 1 µs, medium load: CoreSync's utilization is 10 % better than Utilization Range's"),
    _medium_claim("fig5/exp1-util-drange-vs-coresync", "exp1", UTIL, DR, CS, "gain", GAIN, 0.05, _F5, _Q_F5_EXP,
                  "Exp. 1 µs, medium load: CoreSync's utilization is 5 % better than Delay Range's"),
    _medium_claim("fig5/bim1-p99-shenango-vs-coresync", "bim1", P99, SH, CS, "ratio", RATIO, 1.7, _F5, _Q_F5_BIM,
                  "Bimodal 1 µs, medium load: CoreSync's p99 is 1.7× lower than Shenango's"),
    _medium_claim("fig5/bim1-p99-caladan-vs-coresync", "bim1", P99, CAL, CS, "ratio", RATIO, 1.2, _F5, _Q_F5_BIM,
                  "Bimodal 1 µs, medium load: CoreSync's p99 is 1.2× lower than Caladan's"),
    _medium_claim("fig5/bim1-util-urange-vs-coresync", "bim1", UTIL, UR, CS, "gain", GAIN, 0.10, _F5, _Q_F5_BIM,
                  "Bimodal 1 µs, medium load: CoreSync's utilization is 10 % better than Utilization Range's"),
    _medium_claim("fig5/bim1-util-drange-vs-coresync", "bim1", UTIL, DR, CS, "gain", GAIN, 0.07, _F5, _Q_F5_BIM,
                  "Bimodal 1 µs, medium load: CoreSync's utilization is 7 % better than Delay Range's"),
]

_Q_F1 = ("Under all loads, CoreSync achieves comparable or better latency than Caladan with a 10µs polling interval "
         "while improving utilization by up to 13% (that is, using one less core to handle the same load)")
_Q_F1_DOM = "CoreSync dominates the performance of Caladan under all configurations"

FIG1_CLAIMS = [
    ClaimSpec(id="fig1/coresync-dominates-caladan",
              claim="Exp. 10 µs, every load below capacity: CoreSync dominates Caladan with poll 2, 5 and 10 µs (p99 "
                    "and utilization both no higher)",
              paper_ref="§II-B, Fig. 1", kind=BOUND, paper=0.0, side="upper", quote=_Q_F1_DOM, unit="points",
              how="the (poll, load) points of 3 × {0.2, 0.5, 0.8} where CoreSync's mean p99 or mean utilization is "
                  "above Caladan's", measure=fig1_not_dominated, cause=FIG1_CAUSE, group="§II-B, Fig. 1"),
    ClaimSpec(id="fig1/util-up-to-vs-caladan10",
              claim="Exp. 10 µs: CoreSync's utilization is up to 13 % better than Caladan's with a 10 µs poll",
              paper_ref="§II-B, Fig. 1", kind=GAIN, paper=0.13, quote=_Q_F1,
              how="the largest over loads 0.2/0.5/0.8 of util(Caladan 10 µs)/util(CoreSync) − 1, paired per seed",
              measure=fig1_util_upto, cause=util_cause, group="§II-B, Fig. 1"),
    ClaimSpec(id="fig1/one-core-fewer-than-caladan10",
              claim="Exp. 10 µs: CoreSync handles the same load with one core fewer than Caladan with a 10 µs poll",
              paper_ref="§II-B, Fig. 1", kind=DIFFERENCE, paper=1.0, quote=_Q_F1, unit="cores",
              how="the largest over loads 0.2/0.5/0.8 of cores(Caladan 10 µs) − cores(CoreSync), paired per seed",
              measure=fig1_core_difference, cause=util_cause, group="§II-B, Fig. 1"),
]

OTHER_BELOW_CLAIMS = [
    ClaimSpec(id="fig3/p99-reduction-vs-drange",
              claim="Exp. 10 µs, low/medium/high load: CoreSync's p99 is 3–21 % lower than Delay Range's",
              paper_ref=_F3, kind=GAIN, paper=0.12, quote="Moreover, it improves tail latency compared to Delay Range "
              "by 3-21%", tolerance=Tolerance(abs=0.09, source="the paper's range, 3 to 21 %"),
              how="1 − p99(CoreSync)/p99(Delay Range) at loads 0.2/0.5/0.8, paired per seed; the load farthest from "
                  "the range's centre decides (every load must lie in the range)",
              measure=pair_range("exp10", P99, CS, DR, "reduction", 0.12), cause=p99_cause, group=_F3),
    ClaimSpec(id="pareto/coresync-on-frontier",
              claim="Below capacity CoreSync lies on the latency/utilization Pareto frontier: no policy has both a "
                    "lower p99 and a lower utilization at the same load (all five workloads, loads 0.2/0.5/0.8)",
              paper_ref="§IV-B, §IV-C, Fig. 3–6", kind=BOUND, paper=0.0, side="upper", unit="points",
              quote="CoreSync is not only on the Pareto frontier when load is below capacity, it also provides the "
                    "best balance between utilization and latency",
              how="the (workload, load) points where some policy's mean p99 and mean utilization are both below "
                  "CoreSync's", measure=pareto_dominated, cause=PARETO_CAUSE, group="§IV-B"),
    ClaimSpec(id="fig6/memcached-p99-up-to",
              claim="Memcached-like: CoreSync's p99 is up to 1.6× lower than the other policies'",
              paper_ref=_F6, kind=RATIO, paper=1.6, unit="×",
              quote="CoreSync remains on the Pareto frontier, achieving up to 1.6× lower latency and 1.2× higher BE "
                    "throughput compared to other policies",
              how="the largest over policies and loads 0.2/0.5/0.8 of p99(other)/p99(CoreSync), paired per seed",
              measure=upto_below("mc", P99, (SH, CAL, UR, DR), "ratio", cs_first=False), cause=p99_cause, group=_F6),
    ClaimSpec(id="fig6/memcached-be-up-to",
              claim="Memcached-like: CoreSync gives the best-effort task up to 1.2× the throughput the other "
                    "policies do",
              paper_ref=_F6, kind=RATIO, paper=1.2, unit="×",
              quote="CoreSync remains on the Pareto frontier, achieving up to 1.6× lower latency and 1.2× higher BE "
                    "throughput compared to other policies",
              how="the largest over policies and loads 0.2/0.5/0.8 of BE(CoreSync)/BE(other), BE = best-effort "
                  "core-equivalents (16 − LC cores allocated), paired per seed",
              measure=upto_below("mc", BE, (SH, CAL, UR, DR), "ratio", cs_first=True), cause=be_cause, group=_F6),
    ClaimSpec(id="fig8/p99-vs-shenango-all-sessions",
              claim="Exp. 10 µs, medium load, 100, 1 000 and 10 000 sessions: CoreSync's p99 is 1.5× lower than "
                    "Shenango's at every session count",
              paper_ref="§IV-D, Fig. 8", kind=RATIO, paper=1.5, unit="×",
              quote="CoreSync provides 1.5× lower latency than Shenango and 40% better CPU utilization than "
                    "Utilization range, across all connection counts",
              how="p99(Shenango)/p99(CoreSync) at load 0.5 per session count, paired per seed; the count farthest "
                  "from the paper's number decides", measure=across_sessions(P99, SH, "ratio", 1.5, log=True),
              cause=p99_cause, group="§IV-D, Fig. 8"),
    ClaimSpec(id="fig8/util-vs-urange-all-sessions",
              claim="Exp. 10 µs, medium load, 100, 1 000 and 10 000 sessions: CoreSync's utilization is 40 % better "
                    "than Utilization Range's at every session count",
              paper_ref="§IV-D, Fig. 8", kind=GAIN, paper=0.40,
              quote="CoreSync provides 1.5× lower latency than Shenango and 40% better CPU utilization than "
                    "Utilization range, across all connection counts",
              how="util(Utilization Range)/util(CoreSync) − 1 at load 0.5 per session count, paired per seed; the "
                  "count farthest from the paper's number decides",
              measure=across_sessions(UTIL, UR, "gain", 0.40, log=False),
              cause=util_cause, group="§IV-D, Fig. 8"),
    ClaimSpec(id="fig7/lower-r-lower-latency",
              claim="Exp. 10 µs, loads 0.2/0.5/0.8: a lower R favours latency: CoreSync's p99 with R = 10 is "
                    "below its p99 with R = 100",
              paper_ref="§IV-D, Fig. 7", kind=ORDER, side="below",
              quote="for lower values of R, CoreSync favors optimizing latency over utilization",
              how="p99(R = 10)/p99(R = 100) − 1 at the load where it is largest, paired per seed (below 0: lower)",
              measure=r_order(P99), cause=R_CAUSE, group="§IV-D, Fig. 7"),
    ClaimSpec(id="fig7/lower-r-higher-utilization",
              claim="Exp. 10 µs, loads 0.2/0.5/0.8: a lower R costs utilization: CoreSync allocates more cores with "
                    "R = 10 than with R = 100",
              paper_ref="§IV-D, Fig. 7", kind=ORDER, side="above",
              quote="a core will busy poll for longer as it awaits more credits to be revoked, harming utilization",
              how="util(R = 10) − util(R = 100) at the load where it is smallest, paired per seed",
              measure=r_order(UTIL), cause=R_CAUSE, group="§IV-D, Fig. 7"),
]

_Q_T1_EXP = ("CoreSync outperforms Shenango, Utilization Range, and Delay Range policies by up to 5.8%, 3%, and 4%, "
             "respectively. Moreover, Caladan outperforms CoreSync by only 2.9% in its best case")
_Q_T1_BIM = ("CoreSync improves performance by up to 6% compared to Shenango, 2.6% compared to Utilization Range, and "
             "3.8% compared to Delay Range. The performance of Caladan and CoreSync is very similar (within less than "
             "half a percent)")
_Q_T2 = ("Under overload, CoreSync improves throughput by up to 3% over Shenango, Utilization Range, and Delay Range "
         "policies, while remaining within 0.4% of Caladan's throughput")
_UPTO_HOW = "the largest over loads 1.0/1.3/1.5 of thr(CoreSync)/thr({}) − 1, paired per seed"


def _upto(cid: str, exp: str, others: tuple[str, ...], paper: float, ref: str, quote: str, claim: str) -> ClaimSpec:
    return ClaimSpec(id=cid, claim=claim, paper_ref=ref, kind=GAIN, paper=paper, quote=quote,
                     how=_UPTO_HOW.format(" / ".join(NAMES[p] for p in others)) + ("" if len(others) == 1 else
                                                                                   ", over the policies"),
                     measure=gain_upto(exp, others), cause=overload_cause, group=ref)


OVERLOAD_CLAIMS = [
    _upto("table1/exp-gain-vs-shenango", "exp10", (SH,), 0.058, _T1, _Q_T1_EXP,
          "Exp. 10 µs, near/beyond capacity: CoreSync's throughput is up to 5.8 % above Shenango's"),
    _upto("table1/exp-gain-vs-urange", "exp10", (UR,), 0.03, _T1, _Q_T1_EXP,
          "Exp. 10 µs, near/beyond capacity: CoreSync's throughput is up to 3 % above Utilization Range's"),
    _upto("table1/exp-gain-vs-drange", "exp10", (DR,), 0.04, _T1, _Q_T1_EXP,
          "Exp. 10 µs, near/beyond capacity: CoreSync's throughput is up to 4 % above Delay Range's"),
    ClaimSpec(id="table1/exp-caladan-within",
              claim="Exp. 10 µs, near/beyond capacity: Caladan's throughput is at most 2.9 % above CoreSync's",
              paper_ref=_T1, kind=GAIN, paper=0.029, quote=_Q_T1_EXP,
              how="the largest over loads 1.0/1.3/1.5 of thr(Caladan)/thr(CoreSync) − 1, paired per seed",
              measure=gain_upto("exp10", (CAL,), cs_over=False), cause=overload_cause, group=_T1),
    _upto("table1/bim-gain-vs-shenango", "bim10", (SH,), 0.06, _T1, _Q_T1_BIM,
          "Bimodal 10 µs, near/beyond capacity: CoreSync's throughput is up to 6 % above Shenango's"),
    _upto("table1/bim-gain-vs-urange", "bim10", (UR,), 0.026, _T1, _Q_T1_BIM,
          "Bimodal 10 µs, near/beyond capacity: CoreSync's throughput is up to 2.6 % above Utilization Range's"),
    _upto("table1/bim-gain-vs-drange", "bim10", (DR,), 0.038, _T1, _Q_T1_BIM,
          "Bimodal 10 µs, near/beyond capacity: CoreSync's throughput is up to 3.8 % above Delay Range's"),
    ClaimSpec(id="table1/bim-caladan-within",
              claim="Bimodal 10 µs, beyond capacity: Caladan's and CoreSync's throughput are within half a percent",
              paper_ref=_T1, kind=BOUND, paper=0.005, side="upper", quote=_Q_T1_BIM,
              how="the largest over loads 1.3/1.5 (\"when load exceeds capacity\"; the paper's own Table I has "
                  "0.991 at 100 %) of |thr(Caladan)/thr(CoreSync) − 1|, paired per seed",
              measure=largest_deviation(_caladan_points("bim10", BEYOND), THR), cause=overload_cause, group=_T1),
    ClaimSpec(id="table1/bim-coresync-matches-or-beats-all",
              claim="Bimodal 10 µs, near/beyond capacity: CoreSync's throughput matches or beats every other policy's "
                    "(Table I's worst case is Caladan at 1.002)",
              paper_ref=_T1, kind=BOUND, paper=-0.002, side="lower",
              quote="When load exceeds capacity, CoreSync outperforms or exactly matches all existing policies in "
                    "terms of throughput",
              how="the smallest over policies and loads 1.0/1.3/1.5 of thr(CoreSync)/thr(other) − 1, paired per seed",
              measure=gain_upto("bim10", (SH, CAL, UR, DR), largest=False), cause=overload_cause, group=_T1),
    _upto("table2/memcached-gain-up-to", "mc", (SH, UR, DR), 0.03, _T2, _Q_T2,
          "Memcached-like, near/beyond capacity: CoreSync's throughput is up to 3 % above Shenango's, Utilization "
          "Range's and Delay Range's"),
    ClaimSpec(id="table2/memcached-caladan-within",
              claim="Memcached-like, near/beyond capacity: CoreSync's throughput is within 0.4 % of Caladan's",
              paper_ref=_T2, kind=BOUND, paper=0.004, side="upper", quote=_Q_T2,
              how="the largest over loads 1.0/1.3/1.5 of |thr(Caladan)/thr(CoreSync) − 1|, paired per seed",
              measure=largest_deviation(_caladan_points("mc", ABOVE), THR), cause=overload_cause, group=_T2),
    ClaimSpec(id="overload/coresync-at-least-shenango",
              claim="Near/beyond capacity CoreSync's throughput is not below Shenango's (exp./bimodal 10 µs; "
                    "1 000 and 10 000 sessions)",
              paper_ref="§IV-B, Table I; §IV-D", kind=BOUND, paper=0.0, side="lower",
              quote="CoreSync delivers up to 6% higher throughput than Shenango, Utilization Range, and Delay Range",
              how="the smallest over loads 1.0/1.3/1.5 of thr(CoreSync)/thr(Shenango) − 1, paired per seed "
                  "(Memcached left out: the paper's Table II has Shenango 1.9 % ahead at 100 %)",
              measure=at_least_shenango, cause=overload_cause, group=_T1),
    ClaimSpec(id="fig5/1us-no-clear-advantage-overload",
              claim="1 µs requests, near/beyond capacity: no policy has a clear throughput advantage over CoreSync "
                    "(taken as: within the paper's own 1 % of comparable throughput, §IV-A)",
              paper_ref=_F5, kind=BOUND, paper=0.01, side="upper",
              quote="For short requests, we find that no policy has a clear advantage when load is beyond capacity",
              how="the largest over policies, loads 1.0/1.3/1.5 and both 1 µs distributions of "
                  "|thr(policy)/thr(CoreSync) − 1|, paired per seed",
              measure=largest_deviation(_us_points, THR), cause=deviation_cause, group=_F5),
    ClaimSpec(id="similar/throughput-below-capacity",
              claim="Below capacity every policy's throughput is within 1 % of CoreSync's",
              paper_ref="§IV-A", kind=BOUND, paper=0.01, side="upper",
              quote="throughput is almost identical for all policies when load is below capacity (i.e., within 1% "
                    "differences)",
              how="the largest over workloads, policies and loads 0.2/0.5/0.8 of |thr(policy)/thr(CoreSync) − 1|, "
                  "paired per seed", measure=largest_deviation(_below_points, THR), cause=deviation_cause,
              group="§IV-A"),
    ClaimSpec(id="similar/p99-beyond-capacity",
              claim="Beyond capacity every policy's p99 is within 3 % of CoreSync's (exp./bimodal 10 µs)",
              paper_ref="§IV-A", kind=BOUND, paper=0.03, side="upper",
              quote="tail latency is similar for all policies when load is near or beyond capacity (i.e., within 3% "
                    "differences)",
              how="the largest over exp./bimodal 10 µs, policies and loads 1.3/1.5 of "
                  "|p99(policy)/p99(CoreSync) − 1|, paired per seed", measure=largest_deviation(_beyond_points, P99),
              cause=deviation_cause, group="§IV-A"),
    ClaimSpec(id="sec2/urange-vs-caladan-throughput",
              claim="Exp. 10 µs, near/beyond capacity: the proactive Utilization Range has 2–4 % less throughput "
                    "than the reactive Caladan",
              paper_ref="§II-B", kind=GAIN, paper=-0.03,
              tolerance=Tolerance(abs=0.01, source="the paper's range, 2 to 4 %"),
              quote="Proactive core scheduling policies achieve 2-4% worse throughput than reactive policies",
              how="thr(Utilization Range)/thr(Caladan) − 1, per seed the mean over loads 1.0/1.3/1.5",
              measure=urange_vs_caladan, cause=urange_caladan_cause, group="§II-B"),
    ClaimSpec(id="fig8/more-sessions-more-cores-kept",
              claim="Beyond capacity CoreSync keeps more cores with 10 000 sessions than with 100 (a drained "
                    "session is likelier and delays deallocation)",
              paper_ref="§III-B, §IV-D", kind=ORDER, side="above", unit="cores",
              quote="With a very large number of clients, it is highly likely that at least one will have zero "
                    "credits, indicating persistent overload. Thus, the system will not park any cores",
              how="cores(10 000 sessions) − cores(100 sessions) of CoreSync, per seed the mean over loads "
                  "1.0/1.3/1.5",
              measure=sessions_order(CORES, "diff"), cause=SESSIONS_CORES_CAUSE, group="§IV-D, Fig. 8"),
    ClaimSpec(id="fig8/throughput-gain-grows-with-sessions",
              claim="Beyond capacity CoreSync's throughput gain over Shenango is larger with 10 000 sessions than "
                    "with 100",
              paper_ref="§IV-D", kind=ORDER, side="above",
              quote="Throughput improves at high connection counts above capacity because there's a higher chance of "
                    "at least one drained session, which delays core deallocation",
              how="thr(CoreSync)/thr(Shenango) with 10 000 sessions minus with 100, per seed the mean over loads "
                  "1.0/1.3/1.5", measure=sessions_order(THR, "ratio"), cause=SESSIONS_THR_CAUSE,
              group="§IV-D, Fig. 8"),
]

TABLE_CLAIMS = [
    ClaimSpec(id=f"{tab}/{exp}/{p}@{int(round(100 * x))}",
              claim=f"{EXPERIMENTS[exp][0].upper()}{EXPERIMENTS[exp][1:]}, load {x:g}: {NAMES[p]}'s throughput is "
                    f"{paper[exp][p][i]:.3f}× CoreSync's",
              paper_ref=ref, kind=GAIN, paper=round(paper[exp][p][i] - 1, 3),
              quote=f"{NAMES[p]}: {paper[exp][p][i]:.3f} (normalized throughput at {int(round(100 * x))}% load)",
              how=f"thr({NAMES[p]})/thr(CoreSync) − 1 at load {x:g}, paired per seed",
              measure=table_cell(exp, p, x), cause=overload_cause, group=ref)
    for tab, ref, paper in (("table1", _T1, PAPER_TABLE1), ("table2", _T2, {"mc": PAPER_TABLE2}))
    for exp in paper for p in POLICIES if p != CS for i, x in enumerate(TABLE_LOADS)
]

MECHANISM_CLAIMS = [
    ClaimSpec(id="mechanism/partial-proportionality-below-capacity",
              claim="Below capacity most issued credits are proportional to the allocated cores and a minority is "
                    "overcommitted: C_issued − N ≤ R·K, so idle cores may park",
              paper_ref="§III-C", kind=BOUND, paper=1.0, side="upper", unit="×",
              quote="when load is below capacity, a fraction of the credits are strictly overcommitted while the "
                    "remaining credits are allocated proportional to the number of allocated cores",
              how="(C_issued − N)/(R·K) of CoreSync, exp. 10 µs, load 0.5, per seed (N = 100, R = 50, K = LC cores "
                  "allocated)", measure=partial_proportionality, cause=PROPORTIONALITY_CAUSE, group="§III-C"),
    ClaimSpec(id="timeseries/issued-within-bound-at-steady-state",
              claim="From a cold start (pool at its floor) to steady state below capacity, CoreSync's issued credits "
                    "settle within its bound C_issued − N ≤ R·K",
              paper_ref="§III-C", kind=BOUND, paper=1.0, side="upper", unit="×",
              quote="CoreSync employs partial proportionality where the majority of admitted load is proportional to "
                    "allocated cores and a minority is overcommitted",
              how="(C_issued − N)/(R·K) over the last 100 ms of an 800 ms cold-start run, exp. 10 µs, R = 50, "
                  "seed 1 (fig_coresync_timeseries.png), the larger of loads 0.2 and 0.5",
              measure=timeseries_gate, cause=TIMESERIES_CAUSE, group="§III-C"),
    ClaimSpec(id="mechanism/no-park-while-drained",
              claim="Model check: CoreSync never parks a core while a session is drained (Algorithm 1's veto)",
              paper_ref="§III-B, Algorithm 1", kind=CHECK, paper=0.0, side="upper", unit="parks",
              how="parks while drained, summed over every CoreSync run (all workloads, loads, R, sessions, seeds)",
              measure=no_park_while_drained, group="checks"),
    ClaimSpec(id="method/steady-state-from-pool-ceiling",
              claim="Method check: starting Breakwater's pool at its ceiling gives the same utilization as growing "
                    "into it from max_cores over a 650 ms warm-up (CoreSync, exp. 10 µs, every load)",
              paper_ref="method", kind=CHECK, paper=0.05, side="upper", unit="of 16 cores",
              how="the largest over loads of |util(cold start) − util(pool ceiling)|, paired per seed",
              measure=steady_state(UTIL), cause=STEADY_CAUSE, group="checks"),
    ClaimSpec(id="method/steady-state-p99-from-pool-ceiling",
              claim="Method check: starting Breakwater's pool at its ceiling gives the same p99 as growing into it "
                    "(CoreSync, exp. 10 µs, every load)",
              paper_ref="method", kind=CHECK, paper=0.05, side="upper",
              how="the largest over loads of |p99(cold start)/p99(pool ceiling) − 1|, paired per seed",
              measure=steady_state(P99), cause=STEADY_CAUSE, group="checks"),
]

CLAIMS: list[ClaimSpec] = [*FIG1_CLAIMS, *MEDIUM_CLAIMS, *OTHER_BELOW_CLAIMS, *OVERLOAD_CLAIMS, *TABLE_CLAIMS,
                           *MECHANISM_CLAIMS]


# ---------------------------------------------------------------------------------------------
# testbed conditions (issue 12, 44): what the testbed may have had that the published semantics,
# as our model runs them, lack. Each is `reproduce coresync --condition NAME`; none is a default.


def _is_coresync(variant) -> bool:
    return any('kind="coresync"' in x for x in variant.set)


SLOW_WAKE_US = 50.0
CAPPED_POOL_PER_SESSION = 6

COLD_START = (f"policy.overload.initial_pool={COLD_POOL}", f"warmup_ms={COLD_WARMUP_MS}")
START_COLD, START_WARM = "cold", "warm"
# Claims judged on cold-start runs even in the warm (published) run, and the checks that compare both.
START_OF_CLAIM = {"timeseries/issued-within-bound-at-steady-state": START_COLD,
                  "method/steady-state-from-pool-ceiling": f"{START_COLD}+{START_WARM}",
                  "method/steady-state-p99-from-pool-ceiling": f"{START_COLD}+{START_WARM}"}


# Conditions that keep the published start (the pool at its ceiling), so that their runs pair
# point for point with the published run's: bursty clients change the clients, not the start.
BURSTY_CLIENTS = "bursty-clients"
WARM_CONDITIONS = (BURSTY_CLIENTS,)


def claim_start(claim_id: str, condition: str | None) -> str:
    """Whether a claim is judged from a cold start (every condition but the warm ones), warm,
    or both."""
    if condition and condition not in WARM_CONDITIONS:
        return START_COLD
    return START_OF_CLAIM.get(claim_id, START_WARM)


_COLD_TEXT = (f"; every policy from a cold start (pool {COLD_POOL} credits, {COLD_WARMUP_MS / 1000:g} s warm-up, as "
              "the artifact ran each load point)")

CONDITIONS = (
    ("cold-start", RunCondition(
        description="the published semantics" + _COLD_TEXT,
        sets=lambda var: COLD_START)),
    ("slow-wake", RunCondition(
        description=f"every core wake-up takes {SLOW_WAKE_US:g} µs instead of 5 µs (server.wake_latency), for every "
                    "policy: delay spikes while a granted core wakes make Breakwater cut its pool" + _COLD_TEXT,
        sets=lambda var: (*COLD_START, f'server.wake_latency={{dist="constant", value_us={SLOW_WAKE_US:g}}}'))),
    ("keep-cut", RunCondition(
        description="CoreSync keeps the cut: a core that parked with C_sub withheld does not give it back when it "
                    "wakes (policy.allocator.keep_cut, the pre-publication variant); other policies unchanged"
                    + _COLD_TEXT,
        sets=lambda var: (*COLD_START, *(("policy.allocator.keep_cut=true",) if _is_coresync(var) else ())))),
    ("capped-pool", RunCondition(
        description=f"Breakwater's pool ceiling {CAPPED_POOL_PER_SESSION} credits per session instead of 64 "
                    "(policy.overload.max_pool_per_session), for every policy: below CoreSync's parking bound "
                    "2(N + R·K) + R at K = 4 cores (650 for 100 sessions, R = 50)" + _COLD_TEXT,
        sets=lambda var: (*COLD_START, f"policy.overload.max_pool_per_session={CAPPED_POOL_PER_SESSION}"))),
    # Issue 44: the paper puts Shenango's tail on bursts of overcommitted credits (§II-B: "all
    # clients send a large burst simultaneously, fully utilizing the overcommitted credits");
    # the artifact's clients (netbench.cc) are open-loop Poisson and send each request when it is
    # generated, so the published semantics have no such bursts.
    (BURSTY_CLIENTS, RunCondition(
        description="clients that burst as CoreSync's §II-B argument has them: each arrival of a session is a "
                    "burst of every credit the session holds free (at most its 16-entry queue, CRPC_QLEN), sent at "
                    "once and reaching the server together, the offered rate unchanged (clients.burst = "
                    "\"credits\"), for every policy; from the published start (pool at its ceiling), so its "
                    "runs pair with the published run's",
        sets=lambda var: ('clients.burst="credits"',))),
)


# ---------------------------------------------------------------------------------------------
# judging


CONTRADICTION = (
    "The paper contradicts itself here: §II-B/Fig. 1 says CoreSync dominates Caladan (p99 and utilization both no "
    "higher, poll 2, 5 and 10 µs, every load below capacity), while §IV-B says Caladan (poll 2 µs) offers slightly "
    "better utilization than CoreSync (2 %) on the same exponential 10 µs workload. Both cannot hold at once for "
    "poll 2 µs; both claims are kept, each judged on its own, so at most one of them can be reproduced")
CONTRADICTING = ("fig1/coresync-dominates-caladan", "fig3/caladan-util-vs-coresync")


def judge_claims(data: Any, specs: Sequence[ClaimSpec] = CLAIMS) -> list[Claim]:
    """:func:`judge_all` (claims.py's verdicts), with the two claims that contradict each other
    marked as such."""
    claims = judge_all(specs, data)
    ids = {c.id for c in claims}
    for c in claims:
        if c.id in CONTRADICTING:
            other = [x for x in CONTRADICTING if x != c.id][0]
            c.extra["contradiction"] = CONTRADICTION
            c.extra["contradicts"] = other if other in ids else None
    return claims


# ---------------------------------------------------------------------------------------------
# model costs (`reproduce coresync --sensitivity`)
#
# The costs of the cores' own work that no CoreSync parameter sets: the wake-up of a granted core
# and the work search's probe and steal. The allocators' interval, threshold, poll period and R
# are the paper's settings, not costs. The network stack's cost (the caladan-coresync profile,
# 3.0 µs fitted on §IV-A's 4 M req/s at 1 µs) is not charged by this grid: its loads are fractions
# of the simulated capacity without it (sweep.toml), so there is no default of it to scale here.


def _wake(variant: Any, us: float) -> tuple[str, ...]:
    """Every grant's wake-up at ``us`` (a variant with its own wake-up distribution keeps it)."""
    if any(x.startswith("server.wake_latency") for x in variant.set):
        return ()
    return (f"server.allocation_delay_us={us:g}",)


def _probe(variant: Any, ns: float) -> tuple[str, ...]:
    """The work search's probe at ``ns``: the probe search that `auto` is on this grid (per-core
    queues with stealing), made explicit (identical runs at the default)."""
    if any(x.startswith(("server.search", "server.queue", "server.steal=")) for x in variant.set):
        return ()
    return (f'server.search={{kind="probe", probe_ns={ns:g}}}',)


def _steal(variant: Any, ns: float) -> tuple[str, ...]:
    """A successful steal at ``ns`` (a variant that sets its own stealing keeps it)."""
    return () if any(x.startswith("server.steal") for x in variant.set) else (f"server.steal_cost_ns={ns:g}",)


COSTS = (
    Cost("server.allocation_delay_us", 5.0,
         "a granted core's wake-up: the simulator's default and base.toml's 5 µs, the allocation delay the "
         "simulation study states for its simulator; the reproduction has no measurement of it on CoreSync's "
         "testbed ([inference])",
         _wake),
    Cost("server.search.probe_ns", 100.0,
         "one probe of another core's queue: WORK_STEAL_CHECK_TIME of the simulation study's simulator "
         "(estuhr1206/scheduling-policies-sim, after McClure et al.'s), the default search's; not measured on "
         "CoreSync's testbed",
         _probe),
    Cost("server.steal_cost_ns", 100.0,
         "a successful steal before the stolen work runs: the simulator's default; no source gives it for "
         "CoreSync's testbed ([inference])",
         _steal),
)


# ---------------------------------------------------------------------------------------------
# registration


# The paper's central claim, as its abstract makes it, and the claims that decide it.
THESIS = Thesis(
    statement="CoreSync outperforms state-of-the-art core schedulers deployed with an overload controller: in "
              "overload it improves throughput by up to 6 %; at low loads it reduces the p99 latency by up to 1.7× "
              "and improves CPU utilization by up to 1.4×, on the latency/utilization Pareto frontier",
    source="abstract",
    claims=("table1/bim-gain-vs-shenango", "fig3/p99-shenango-vs-coresync", "fig3/util-urange-vs-coresync",
            "pareto/coresync-on-frontier"))

FIGURES = (
    Figure("fig3_exp10.png", "Fig. 3 (headline): exponential 10 µs: p99 latency against CPU utilization per policy, "
           "one panel per load (mean over seeds, bars: 95 % CI; lower-left is better)"),
    Figure("fig4_bimodal10.png", "Fig. 4: bimodal 10 µs: p99 latency against CPU utilization per policy and load"),
    Figure("fig5_1us.png", "Fig. 5: 1 µs requests: p99 latency against CPU utilization per policy and load"),
    Figure("fig6_memcached.png", "Fig. 6: Memcached-like: p99 latency against the best-effort co-tenant's "
           "throughput below capacity (lower-right is better)"),
    Figure("fig1_caladan_poll.png", "Fig. 1: CoreSync against Caladan's poll periods, exponential 10 µs: p99 "
           "against CPU utilization, labelled by load"),
    Figure("fig7_r_sensitivity.png", "Fig. 7: CoreSync's proportionality parameter R: throughput, p99 latency and "
           "CPU utilization against load, one line per R"),
    Figure("fig8_sessions.png", "Fig. 8: p99 against CPU utilization across session counts at loads 0.2, 0.5, 0.8"),
    Figure("fig_coresync_timeseries.png", "Why CoreSync parks or not: issued credits against the parking bound "
           "R·K and the cores allocated over time, at each load"),
)


def extra_runs(ctx: Context) -> list[ExtraRuns]:
    """The cold-start time series and the timeline's traced runs, declared before the sweep."""
    from ..sweep.worker import series_of, summary_of

    out = []
    if (ts := series.tasks(ctx)) is not None:
        out.append(ExtraRuns(series_of, tuple(ts)))
    if (tl := coresync_timeline.tasks(ctx)) is not None:
        out.append(ExtraRuns(summary_of, tuple(tl), kept=coresync_timeline.kept))
    return out


@register("coresync", paper="CoreSync (Pardeshi et al., ICNP'25)",
          figure="§II-B, §IV: Fig. 1, 3, 4, 5, 6, 7, 8, Table I, Table II",
          description="CoreSync vs Shenango, Caladan, Utilization Range, Delay Range, all with Breakwater; "
                      "16 cores, 100 sessions; exp./bimodal 10 µs and 1 µs, Memcached-like; R and session sweeps",
          spec="coresync/sweep.toml", group_by=("variant",), conditions=CONDITIONS, claims=CLAIMS,
          costs=COSTS, thesis=THESIS,
          figures=FIGURES, extra_runs=extra_runs)
def analyze(ctx: Context) -> list[Claim]:
    runs = Runs(ctx.results)
    report.write_all(ctx, runs.d)
    runs.timeseries = series.write(ctx)
    # A timeline of the key point: CoreSync and Shenango at load 0.5, one above the other.
    coresync_timeline.write(ctx)
    claims = judge_claims(runs)
    for c in claims:
        if ctx.condition:
            c.extra["condition"] = ctx.condition
        c.extra["start"] = claim_start(c.id, ctx.condition)
    return claims

