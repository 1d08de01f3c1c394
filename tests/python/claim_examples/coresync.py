"""Claim examples of the ``coresync`` reproduction: a synthetic run whose numbers are the paper's
(Fig. 1, 3–8, Table I and II, §II-B, §III-C) on which every claim is reproduced, and for each
claim a realistic miss, most of them what our model measures (CoreSync keeping every core below
capacity, Utilization Range only 1.1× CoreSync's cores, no throughput difference beyond capacity,
Breakwater's pool at its ceiling with the issued credits far above R·K + N, ...)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from claim_examples.synth import frame
from microsched.reproduce.coresync import (CLAIMS, FULL_WINDOW_MS, LOAD, PAPER_TABLE1, PAPER_TABLE2, POLICIES, TABLE_LOADS, Runs,
                                           v)

BELOW = (0.2, 0.5, 0.8)
ABOVE = (1.0, 1.3, 1.5)
T = 1_000_000.0  # CoreSync's throughput beyond capacity (req/s); below capacity every policy's is offered load

# Below capacity: (LC cores at load 0.5, p99 µs) per variant; cores at the other loads scale with
# the busy cores (16 × load), capped at 16. CoreSync keeps 9 cores for 8 busy at load 0.5.
CS_CORES = 9.0
BELOW_PTS = {
    "exp10": {"coresync": (9.0, 50.0), "shenango": (8.9, 85.0), "caladan": (8.82, 58.0),
              "utilization_range": (12.6, 51.0), "delay_range": (10.8, 56.82)},
    "bim10": {"coresync": (9.0, 60.0), "shenango": (8.9, 120.0), "caladan": (8.85, 66.67),
              "utilization_range": (11.7, 62.0), "delay_range": (10.8, 63.0)},
    "exp1": {"coresync": (9.0, 15.0), "shenango": (8.9, 24.0), "caladan": (8.85, 19.5),
             "utilization_range": (9.9, 16.0), "delay_range": (9.45, 16.0)},
    "bim1": {"coresync": (9.0, 16.0), "shenango": (8.9, 27.2), "caladan": (8.85, 19.2),
             "utilization_range": (9.9, 17.0), "delay_range": (9.63, 17.0)},
    "mc": {"coresync": (9.0, 12.0), "shenango": (10.17, 19.2), "caladan": (9.5, 15.0),
           "utilization_range": (9.5, 14.0), "delay_range": (9.5, 14.0)},
    "n1000": {"coresync": (9.0, 50.0), "shenango": (8.9, 75.0), "utilization_range": (12.6, 51.0)},
    "n10000": {"coresync": (9.0, 50.0), "shenango": (8.9, 75.0), "utilization_range": (12.6, 51.0)},
}
EXTRA_BELOW = {"exp10/caladan-5": (9.2, 55.0), "exp10/caladan-10": (10.17, 52.0), "exp10/coresync-r10": (9.3, 48.0),
               "exp10/coresync-r20": (9.15, 49.0), "exp10/coresync-r100": (8.7, 52.0),
               "exp10/coresync-cold": (9.0, 50.0)}
# Memcached-like: at high load CoreSync favours latency over the best-effort task (the paper)
MC_HIGH = {"coresync": 14.5, "shenango": 14.0, "caladan": 14.0, "utilization_range": 14.0, "delay_range": 14.0}

SESSIONS = {"n1000": 1000, "n10000": 10000}
R = {"mc": 20.0, "n1000": 500.0, "n10000": 5000.0}


def _norm(exp: str, policy: str, i: int) -> float:
    """The paper's normalized throughput beyond capacity (1 where the paper has no table)."""
    if exp in PAPER_TABLE1:
        return PAPER_TABLE1[exp][policy][i]
    if exp == "mc":
        return PAPER_TABLE2[policy][i]
    if exp in ("n1000", "n10000") and policy == "shenango":
        return {"n1000": 0.95, "n10000": 0.93}[exp]
    return 1.0


def _row(exp: str, var: str, policy: str, x: float, cores: float, p99: float, thr: float) -> dict[str, Any]:
    n = SESSIONS.get(exp, 100)
    r = R.get(exp, 50.0)
    busy = min(cores, 16.0 * x) if x < 1 else 15.5
    cs = policy.startswith("coresync")
    issued = n + 0.8 * r * cores if cs else 500.0
    return {"cores.allocated_mean": cores, "cores.busy_mean": busy, "cores.transition_mean": 0.05,
            "cpu_utilization": cores / 16.0, "be_cores_mean": 16.0 - cores, "latency_us.p99": p99,
            "queueing_delay_us.p99": 5.0, "throughput_rps": thr, "credits.pool_mean": 2.0 * issued,
            "credits.issued_mean": issued, "credits.drained_mean": (50.0 if exp == "n10000" and x >= 1 and cs else 0.0),
            "credits.parks_while_drained": 0.0, "policy.overload.target_us": 80.0}


def points(changes: dict | None = None) -> dict:
    """The paper world's rows ``{(variant, load): metrics}``; ``changes`` sets metrics of some
    points afterwards (``{(variant, load): {metric: value}}``)."""
    out: dict[tuple[str, float], dict[str, Any]] = {}
    variants = [(exp, p, v(exp, p), c, p99) for exp, pols in BELOW_PTS.items() for p, (c, p99) in pols.items()]
    variants += [("exp10", name.split("/")[1], name, c, p99) for name, (c, p99) in EXTRA_BELOW.items()]
    for exp, p, var, c05, p99 in variants:
        for x in BELOW:
            cores = min(16.0, 16.0 * x * c05 / 8.0)
            if exp == "mc" and x == 0.8:
                cores = MC_HIGH[p]
            if var == "exp10/caladan-10" and x == 0.8:
                cores = 15.4  # one core more than CoreSync's 14.4 (a 7 % better utilization there)
            out[(var, x)] = _row(exp, var, p, x, cores, p99, 1.6e6 * x)
        for i, x in enumerate(ABOVE):
            pol = p if p in POLICIES else ("caladan" if p.startswith("caladan") else "coresync")
            cores = 16.0 if exp == "n10000" and pol == "coresync" else 15.5
            out[(var, x)] = _row(exp, var, p, x, cores, 95.0, T * _norm(exp, pol, i))
    for k, m in (changes or {}).items():
        out[k].update(m)
        if "cores.allocated_mean" in m and "cpu_utilization" not in m:
            out[k]["cpu_utilization"] = m["cores.allocated_mean"] / 16.0
            out[k]["be_cores_mean"] = 16.0 - m["cores.allocated_mean"]
    return out


def timeseries(issued: float = 400.0) -> pd.DataFrame:
    rows = [{"load": x, "t_ms": float(t), "credit_pool": 1000.0, "credits_issued": issued, "cores_allocated": 8.0,
             "cores_busy": 16 * x, "drained_sessions": 0.0, "bound_rk_n": 50.0 * 8 + 100} for x in (0.2, 0.5)
            for t in range(1, 801)]
    return pd.DataFrame(rows)


def data(changes: dict | None = None, ts: pd.DataFrame | None = None) -> Runs:
    # every run measured over the full profile's window: Table I/II's cells are judged only there
    return Runs(frame(points(changes), key=LOAD, duration_s=FULL_WINDOW_MS / 1e3),
                timeseries(400.0) if ts is None else ts)


def merge(*changes: dict) -> dict:
    """Several changes as one (metrics of the same point combined)."""
    out: dict = {}
    for c in changes:
        for k, m in c.items():
            out.setdefault(k, {}).update(m)
    return out


def at(var: str, x: float, **metrics: float) -> dict:
    return {(var, x): {k.replace("__", "."): val for k, val in metrics.items()}}


def every(var: str, loads, **metrics: float) -> dict:
    out: dict = {}
    for x in loads:
        out.update(at(var, x, **metrics))
    return out


def cores(var: str, x: float, c: float) -> dict:
    return {(var, x): {"cores.allocated_mean": c}}


def p99(var: str, x: float, val: float) -> dict:
    return {(var, x): {"latency_us.p99": val}}


def thr(exp: str, policy: str, x: float, norm: float) -> dict:
    return {(v(exp, policy), x): {"throughput_rps": T * norm}}


GOOD = data()
# Fig. 1 and §IV-B disagree about Caladan (poll 2 µs): dominance needs Caladan's utilization no lower
FIG1 = merge(*(cores("exp10/caladan", x, min(16.0, 16 * x * CS_CORES / 8)) for x in BELOW))
FIG1_GOOD = data(FIG1)
# The paper's Table I has Caladan 0.991 at 100 % (bimodal); "within half a percent" is about beyond capacity
MC_CAL_GOOD = data({(v("mc", "caladan"), 1.5): {"throughput_rps": T * 1.0039}})

FROZEN = {"cores.allocated_mean": 16.0, "cores.transition_mean": 0.0}

EXAMPLES: dict[str, tuple[Runs, Runs]] = {
    # Fig. 1
    "fig1/coresync-dominates-caladan": (FIG1_GOOD, data(merge(FIG1, p99("exp10/caladan-10", 0.5, 45.0)))),
    "fig1/util-up-to-vs-caladan10": (GOOD, data({**cores("exp10/caladan-10", 0.5, 9.3),
                                                 **cores("exp10/caladan-10", 0.2, 3.7),
                                                 **cores("exp10/caladan-10", 0.8, 14.8)})),
    "fig1/one-core-fewer-than-caladan10": (GOOD, data({**cores("exp10/caladan-10", 0.5, 9.2),
                                                       **cores("exp10/caladan-10", 0.2, 3.7),
                                                       **cores("exp10/caladan-10", 0.8, 14.5)})),
    # Fig. 3-5 at medium load: misses as our model measures them
    "fig3/p99-shenango-vs-coresync": (GOOD, data(p99("exp10/shenango", 0.5, 65.0))),
    # CoreSync parks but keeps 12 cores for 8 busy: Utilization Range only 1.05× its cores
    "fig3/util-urange-vs-coresync": (GOOD, data(cores("exp10/coresync", 0.5, 12.0))),
    # CoreSync parks, but keeps more cores than Delay Range does
    "fig3/util-drange-vs-coresync": (GOOD, data(cores("exp10/coresync", 0.5, 14.0))),
    "fig3/p99-urange-similar": (GOOD, data(p99("exp10/utilization_range", 0.5, 70.0))),
    "fig3/caladan-util-vs-coresync": (GOOD, data(cores("exp10/caladan", 0.5, 8.0))),
    "fig3/caladan-p99-vs-coresync": (GOOD, data(p99("exp10/caladan", 0.5, 70.0))),
    "fig4/util-urange-vs-coresync": (GOOD, data(cores("bim10/coresync", 0.5, 12.0))),
    "fig4/util-drange-vs-coresync": (GOOD, data(cores("bim10/coresync", 0.5, 14.0))),
    "fig4/p99-reduction-vs-shenango": (GOOD, data(p99("bim10/shenango", 0.5, 70.0))),
    "fig4/p99-reduction-vs-caladan": (GOOD, data(p99("bim10/caladan", 0.5, 90.0))),
    "fig5/exp1-p99-shenango-vs-coresync": (GOOD, data(p99("exp1/shenango", 0.5, 17.0))),
    "fig5/exp1-p99-caladan-vs-coresync": (GOOD, data(p99("exp1/caladan", 0.5, 15.5))),
    "fig5/exp1-util-urange-vs-coresync": (GOOD, data(cores("exp1/coresync", 0.5, 14.5))),
    "fig5/exp1-util-drange-vs-coresync": (GOOD, data(cores("exp1/delay_range", 0.5, 11.0))),
    "fig5/bim1-p99-shenango-vs-coresync": (GOOD, data(p99("bim1/shenango", 0.5, 18.0))),
    "fig5/bim1-p99-caladan-vs-coresync": (GOOD, data(p99("bim1/caladan", 0.5, 30.0))),
    "fig5/bim1-util-urange-vs-coresync": (GOOD, data(cores("bim1/coresync", 0.5, 15.0))),
    "fig5/bim1-util-drange-vs-coresync": (GOOD, data(cores("bim1/delay_range", 0.5, 9.0))),
    "fig3/p99-reduction-vs-drange": (GOOD, data(p99("exp10/delay_range", 0.2, 80.0))),
    # a baseline with both a lower p99 and fewer cores
    "pareto/coresync-on-frontier": (GOOD, data(merge(cores("bim10/caladan", 0.5, 8.5),
                                                     p99("bim10/caladan", 0.5, 55.0)))),
    # Shenango's tail barely above CoreSync's; CoreSync keeping more cores than every baseline
    "fig6/memcached-p99-up-to": (GOOD, data(merge(*(p99("mc/shenango", x, 13.0) for x in BELOW)))),
    "fig6/memcached-be-up-to": (GOOD, data(merge(cores("mc/coresync", 0.2, 12.0), cores("mc/coresync", 0.5, 12.0)))),
    "fig8/p99-vs-shenango-all-sessions": (GOOD, data(p99("n10000/shenango", 0.5, 55.0))),
    "fig8/util-vs-urange-all-sessions": (GOOD, data(cores("n1000/utilization_range", 0.5, 10.0))),
    # R changes nothing: every R keeps the same cores and the same tail
    "fig7/lower-r-lower-latency": (GOOD, data(p99("exp10/coresync-r10", 0.8, 52.0))),
    "fig7/lower-r-higher-utilization": (GOOD, data(cores("exp10/coresync-r10", 0.2, 3.48))),
    # beyond capacity: every policy within a fraction of a percent of CoreSync (our model)
    "table1/exp-gain-vs-shenango": (GOOD, data({**thr("exp10", "shenango", 1.0, 0.995),
                                               **thr("exp10", "shenango", 1.3, 0.998),
                                               **thr("exp10", "shenango", 1.5, 0.999)})),
    "table1/exp-gain-vs-urange": (GOOD, data({**thr("exp10", "utilization_range", 1.3, 0.999),
                                             **thr("exp10", "utilization_range", 1.5, 0.999)})),
    "table1/exp-gain-vs-drange": (GOOD, data(merge(*(thr("exp10", "delay_range", x, 0.999) for x in ABOVE)))),
    "table1/exp-caladan-within": (GOOD, data(thr("exp10", "caladan", 1.0, 1.001))),
    "table1/bim-gain-vs-shenango": (GOOD, data(merge(*(thr("bim10", "shenango", x, 0.999) for x in ABOVE)))),
    "table1/bim-gain-vs-urange": (GOOD, data(merge(*(thr("bim10", "utilization_range", x, 1.006) for x in ABOVE)))),
    "table1/bim-gain-vs-drange": (GOOD, data(merge(*(thr("bim10", "delay_range", x, 1.004) for x in ABOVE)))),
    "table1/bim-caladan-within": (GOOD, data(thr("bim10", "caladan", 1.3, 1.012))),
    "table1/bim-coresync-matches-or-beats-all": (GOOD, data(thr("bim10", "utilization_range", 1.3, 1.012))),
    "table2/memcached-gain-up-to": (GOOD, data(merge(*(thr("mc", p, x, 1.0) for p in ("shenango", "utilization_range",
                                                                                 "delay_range") for x in ABOVE)))),
    "table2/memcached-caladan-within": (MC_CAL_GOOD, data(thr("mc", "caladan", 1.0, 1.02))),
    "overload/coresync-at-least-shenango": (GOOD, data(thr("exp10", "shenango", 1.3, 1.009))),
    "fig5/1us-no-clear-advantage-overload": (GOOD, data(thr("bim1", "delay_range", 1.5, 0.97))),
    "similar/throughput-below-capacity": (GOOD, data(at("mc/shenango", 0.8, throughput_rps=1.6e6 * 0.8 * 0.97))),
    "similar/p99-beyond-capacity": (GOOD, data(p99("bim10/shenango", 1.3, 101.0))),
    "sec2/urange-vs-caladan-throughput": (GOOD, data(merge(*(thr("exp10", "utilization_range", x,
                                                                 _norm("exp10", "caladan", i))
                                                             for i, x in enumerate(ABOVE))))),
    "fig8/more-sessions-more-cores-kept": (GOOD, data(merge(*(cores("n10000/coresync", x, 15.5) for x in ABOVE)))),
    "fig8/throughput-gain-grows-with-sessions": (GOOD, data(merge(*(thr("n10000", "shenango", x, 0.99)
                                                                    for x in ABOVE)))),
    # mechanism: the pool at its ceiling, the issued credits far above R·K + N
    "mechanism/partial-proportionality-below-capacity": (GOOD, data(at("exp10/coresync", 0.5,
                                                                         credits__issued_mean=2979.0,
                                                                         credits__pool_mean=6237.0))),
    "timeseries/issued-within-bound-at-steady-state": (GOOD, data(ts=timeseries(2688.0))),
    "mechanism/no-park-while-drained": (GOOD, data(at("n10000/coresync", 1.3, credits__parks_while_drained=3.0))),
    "method/steady-state-from-pool-ceiling": (GOOD, data(cores("exp10/coresync-cold", 0.2, 5.4))),
    "method/steady-state-p99-from-pool-ceiling": (GOOD, data(p99("exp10/coresync-cold", 0.2, 56.0))),
}

# Each table cell: the paper's value passes; no difference from CoreSync (our model's finding) fails
for _spec in CLAIMS:
    if _spec.id.startswith(("table1/", "table2/")) and _spec.id.count("/") == 2:
        _, _exp, _rest = _spec.id.split("/")
        _pol, _pct = _rest.split("@")
        _x = TABLE_LOADS[[int(round(100 * y)) for y in TABLE_LOADS].index(int(_pct))]
        _good = MC_CAL_GOOD if (_exp, _pol, _x) == ("mc", "caladan", 1.5) else GOOD
        _bad_norm = 1.0 if abs(_spec.paper) >= 0.005 else 1.0 + 20 * _spec.paper
        EXAMPLES[_spec.id] = (_good, data(thr(_exp, _pol, _x, _bad_norm)))
