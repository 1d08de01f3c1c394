"""Claim examples of the ``synergy`` reproduction: a synthetic run whose numbers are the paper's
(Synergy Fig. 3-11: max loads as fractions of the 14-worker capacity, the p99.9 values at the
paper's loads, the ladder's 89 → 538 → 763 → 843 kRPS, Fig. 8's knobs, Fig. 9's gains, Fig. 11 at
8 and 30 workers) on which every claim is reproduced, and for each claim a realistic miss, most
of them what our model measures (Synergy and Concord both at capacity on High, a ladder rung
that adds no load, d10-f5 changing the latency by a microsecond, Concord's p99.9 slowdown 21.7
at 239 kRPS instead of 42.55, no loss for DARC at 30 workers, ...)."""

from __future__ import annotations

import copy
import math
from typing import Any, Callable

import pandas as pd

from claim_examples.synth import frame
from microsched.reproduce import synergy as S

LOAD = S.LOAD
GRID = (0.65, 0.76, 0.78, 0.812, 0.862, 0.95)
SEEDS = 3
SPREAD = 0.01
ML_SPREAD = 0.002  # the searches' seed spread: a share near 1 has a narrow band (its headroom's ×/÷ 1.25)
STEP = 0.002  # the synthetic bisection's last bracket
SD, LAT = "slowdown.p999", "latency_us.p999"

# Max loads (of capacity) that Fig. 9 implies: S-CI (Synergy) 13 % over signals, S-IPI 5 %,
# S-UINTR 10 %; Perséphone 1/1.07 of S-CI.
_CI = S.paper_load("high", S.PAPER_KRPS["high"]["synergy"])
_SIGNAL = _CI / 1.13


def _variants() -> list[str]:
    out = [f"{w}/{s}" for w in S.WORKLOADS for s in S.SYSTEMS]
    out += [f"zippydb/{r}" for r in S.LADDER] + [f"extreme/{k}" for k in S.KNOBS]
    out += [f"high/{m}" for m in S.MECHANISMS] + ["high/flows8"]
    return sorted(set(out))


def _default_metrics(variant: str) -> dict[str, float]:
    w, s = variant.split("/", 1)
    short, long = S.TYPES[w]
    syn = s in ("synergy", "d10-f5", "d10-f10", "d15-f20", "flows8", "signal", "kmod_ipi", "uintr")
    return {SD: 20.0, LAT: 500.0 if syn else 2000.0,
            f"by_type.{short}.slowdown.p999": 20.0, f"by_type.{short}.queueing_delay_us.p999": 5.0,
            f"by_type.{long}.latency_us.p999": 900.0, f"by_type.{long}.queueing_delay_us.p999": 300.0,
            f"by_type.{long}.completed": 1000.0, "sched.preemptions": 5.0, "sched.avoided_preemptions": 95.0,
            "sched.worker_utilization.mean": 0.8, "sched.worker_utilization.min": 0.78,
            "sched.worker_utilization.max": 0.81, "clients.sessions": 8.0 if s == "flows8" else 512.0}


def _near(load: float) -> float:
    return min(GRID, key=lambda x: abs(x - load))


def truth() -> dict:
    """The paper's world: runs ``{(variant, load): metrics}``, max loads ``{search: load}`` and
    scaling runs ``{(system, workers): metrics}``."""
    runs = {(v, x): _default_metrics(v) for v in _variants() for x in GRID}
    for _, w, s, krps, metric, value, _ in S.POINTS:
        runs[(f"{w}/{s}", _near(S.paper_load(w, krps)))][metric] = float(value)
    # Fig. 8 at 3.66 MRPS: d0-f0 32.9, d10-f5 56.8 and 530 µs less, d10-f10 72.9 and 670 µs less
    at = _near(S.paper_load("extreme", 3660))
    for k, sd, lat in (("synergy", 32.9, 1500.0), ("d10-f5", 56.8, 970.0), ("d10-f10", 72.9, 830.0)):
        runs[(f"extreme/{k}", at)].update({SD: sd, LAT: lat})
    # Fig. 7 at 95 %: +cp 40.2, +qa 30.5; rss-ci at 89 kRPS: 46.1, 1,075 µs
    runs[("zippydb/rss-ci+ws+wq+cp", 0.95)][SD] = 40.2
    runs[("zippydb/synergy", 0.95)][SD] = 30.5
    rss = S.FIXED_POINTS[0][1]
    runs[("zippydb/rss-ci", rss)] = {**_default_metrics("zippydb/rss-ci"), SD: 46.1, LAT: 1075.0}
    # Fig. 10 at 65 %: eight flows within 3 % of each other
    runs[("high/flows8", 0.65)].update({"sched.worker_utilization.min": 0.64, "sched.worker_utilization.max": 0.67})

    ml = {f"{w}/{s}": S.paper_load(w, k) for w, d in S.PAPER_KRPS.items() for s, k in d.items()}
    ml.update({f"zippydb/{r}": S.paper_load("zippydb", k) for r, k in S.PAPER_LADDER_KRPS.items()})
    ml.update({"high/signal": _SIGNAL, "high/kmod_ipi": _SIGNAL * 1.05, "high/uintr": _SIGNAL * 1.10,
               "high/darc": _CI / 1.07,
               "extreme/d10-f10@80": S.paper_load("extreme", 3750), "extreme/darc@80": S.paper_load("extreme", 2370)})

    sc = {}
    for n in (8, 30):
        sc[("synergy", n)] = {SD: 13.0, LAT: 598.0, "loss": 0.0}
        sc[("darc", n)] = {SD: 16.0, LAT: 826.0, "loss": 0.0 if n == 8 else 0.01}
        sc[("c-fcfs", n)] = {SD: 596.0, LAT: 3000.0, "loss": 0.0 if n == 8 else 0.01}
    return {"runs": runs, "maxload": ml, "scaling": sc}


def build(t: dict) -> S.Data:
    runs = frame(t["runs"], key=LOAD, seeds=SEEDS, spread=SPREAD)
    rows = []
    for search, load in t["maxload"].items():
        variant, _, slo = search.partition("@")
        for s in range(1, SEEDS + 1):
            f = 1 + ML_SPREAD * (s - (SEEDS + 1) / 2)
            rows.append({"search": search, "variant": variant, "slo": float(slo or S.SLO), "seed": s,
                         "load": load * f, "step": STEP, "pass_load": load * f - STEP / 2,
                         "fail_load": load * f + STEP / 2, "censored": False, "probes": 8,
                         "fail_value": 55.0, "fail_util": 0.95, "fail_stable": True, "capacity_rps": math.nan})
    sc_rows = []
    for (system, n), m in t["scaling"].items():
        for s in range(1, SEEDS + 1):
            f = 1 + SPREAD * (s - (SEEDS + 1) / 2)
            sc_rows.append({"system": system, "workers": n, "seed": s, "cores.max": float(n + (system == "darc")),
                            "sched.worker_utilization.max": 0.6, "sched.worker_utilization.min": 0.4,
                            **{k: v * f for k, v in m.items()}})
    return S.Data.of(runs, pd.DataFrame(rows), pd.DataFrame(sc_rows))


# ---------------------------------------------------------------------------------------------
# the misses


def _set_ratio(a: str, b: str, ratio: float) -> Callable[[dict], None]:
    """a's max load = b's × ratio."""
    return lambda t: t["maxload"].__setitem__(a, t["maxload"][b] * ratio)


def _ratio_miss(paper: float) -> float:
    """A realistic miss of a max-load ratio: no gain where the paper's is large, the other system
    ahead where it is small (so that the miss lies outside ×/÷ 1.25 of the paper's ratio)."""
    return 1.02 if paper >= 1.3 else 0.8


def _set_run(variant: str, load: float, metric: str, value: float) -> Callable[[dict], None]:
    def f(t: dict) -> None:
        t["runs"][(variant, _near(load))][metric] = value
    return f


def _set_scaling(system: str, workers: int, metric: str, value: float) -> Callable[[dict], None]:
    def f(t: dict) -> None:
        t["scaling"][(system, workers)][metric] = value
    return f


def misses() -> dict[str, Callable[[dict], None]]:
    out: dict[str, Callable[[dict], None]] = {}
    for w, d in S.PAPER_KRPS.items():
        for s, krps in d.items():
            ml_frac = S.paper_load(w, krps)
            # our model puts most systems near capacity: a paper share far below it is missed by
            # ~0.99, a share near capacity by a system that stops at 0.6
            target = 0.99 if ml_frac < 0.78 else 0.6
            out[f"maxload/{w}/{s}/capacity-share"] = (lambda k, v: lambda t: t["maxload"].__setitem__(k, v))(
                f"{w}/{s}", target)
            if s != "synergy":
                out[f"maxload/{w}/synergy-vs-{s}"] = _set_ratio(f"{w}/synergy", f"{w}/{s}",
                                                                _ratio_miss(d["synergy"] / krps))
    out["maxload/high/shinjuku-ci-vs-shinjuku"] = _set_ratio("high/shinjuku-ci", "high/shinjuku", 0.8)
    for cid, w, s, krps, metric, value, _q in S.POINTS:
        out[cid] = _set_run(f"{w}/{s}", S.paper_load(w, krps), metric, value / 2)
    for cid, w, s, krps, metric, value, _q in S.POINT_RATIOS:
        load = S.paper_load(w, krps)
        out[cid] = (lambda w, s, load, metric, value: lambda t: t["runs"][(f"{w}/{s}", _near(load))].__setitem__(
            metric, t["runs"][(f"{w}/synergy", _near(load))][metric] * value / 1.6))(w, s, load, metric, value)
    out["order/extreme/lowest-latency-to-3560k"] = _set_run("extreme/shinjuku-ci", 0.76, LAT, 450.0)
    out["order/zippydb/lowest-latency-all-loads"] = _set_run("zippydb/concord", 0.95, LAT, 450.0)
    # the ladder
    for r, krps in S.PAPER_LADDER_KRPS.items():
        frac = S.paper_load("zippydb", krps)
        out[f"ladder/zippydb/{r}/capacity-share"] = (lambda k, v: lambda t: t["maxload"].__setitem__(k, v))(
            f"zippydb/{r}", 0.26 if frac < 0.2 else frac / 1.6)
    rungs = list(S.PAPER_LADDER_KRPS)
    for (a, b), label, gain in zip(zip(rungs, rungs[1:]), ("ws", "wq", "cp"), (1.8, 0.0, 0.0)):
        out[f"ladder/zippydb/gain-{label}"] = _set_ratio(f"zippydb/{b}", f"zippydb/{a}", 1 + gain)
    out["ladder/zippydb/monotone"] = _set_ratio("zippydb/rss-ci+ws+wq+cp", "zippydb/rss-ci+ws+wq", 1.0)

    def avoided(t: dict) -> None:
        for x in GRID:
            t["runs"][("zippydb/rss-ci+ws+wq+cp", x)].update({"sched.avoided_preemptions": 74.0,
                                                               "sched.preemptions": 26.0})
    out["ladder/zippydb/avoided-interrupts"] = avoided
    out["ladder/zippydb/qa-slowdown-gain"] = _set_run("zippydb/synergy", 0.95, SD, 40.2)
    out["ladder/zippydb/cp-slowdown-at-95"] = _set_run("zippydb/rss-ci+ws+wq+cp", 0.95, SD, 20.0)
    out["ladder/zippydb/qa-slowdown-at-95"] = _set_run("zippydb/synergy", 0.95, SD, 15.0)
    rss = S.FIXED_POINTS[0][1]
    out["ladder/zippydb/rss-ci-slowdown-at-89k"] = lambda t: t["runs"][("zippydb/rss-ci", rss)].__setitem__(SD, 12.0)
    out["ladder/zippydb/rss-ci-latency-at-89k"] = lambda t: t["runs"][("zippydb/rss-ci", rss)].__setitem__(LAT, 400.0)
    # the knobs (Fig. 8): d10-f5/d10-f10 as d0-f0, as our model gives them
    knob = S.paper_load("extreme", 3660)
    out["knobs/extreme/d0-f0-slowdown"] = _set_run("extreme/synergy", knob, SD, 24.2)
    out["knobs/extreme/d10-f5-slowdown"] = _set_run("extreme/d10-f5", knob, SD, 24.7)
    out["knobs/extreme/d10-f10-slowdown"] = _set_run("extreme/d10-f10", knob, SD, 26.4)
    out["knobs/extreme/d10-f5-trades-slowdown-for-latency"] = _set_run("extreme/d10-f5", knob, LAT, 1499.0)
    out["knobs/extreme/d10-f10-latency"] = _set_run("extreme/d10-f10", knob, LAT, 1497.0)
    out["knobs/extreme/d10-f10-vs-darc-at-80"] = _set_ratio("extreme/d10-f10@80", "extreme/darc@80", 1.05)
    out["knobs/extreme/d10-f10-capacity-share-at-80"] = lambda t: t["maxload"].__setitem__("extreme/d10-f10@80", 0.5)
    out["knobs/extreme/darc-capacity-share-at-80"] = lambda t: t["maxload"].__setitem__("extreme/darc@80", 0.93)
    # Fig. 9: the mechanisms as close as our model puts them
    out["mechanisms/high/kmod_ipi-gain-over-signal"] = _set_ratio("high/kmod_ipi", "high/signal", 1.0)
    out["mechanisms/high/uintr-gain-over-signal"] = _set_ratio("high/uintr", "high/signal", 1.02)
    out["mechanisms/high/ci-gain-over-signal"] = _set_ratio("high/synergy", "high/signal", 1.03)
    out["mechanisms/high/signal-worst"] = _set_ratio("high/signal", "high/kmod_ipi", 1.02)
    out["mechanisms/high/ci-vs-darc"] = _set_ratio("high/synergy", "high/darc", 0.8)
    out["mechanisms/high/uintr-vs-darc"] = _set_ratio("high/uintr", "high/darc", 0.8)
    # Fig. 10, Fig. 11
    out["flows/high/8-flows-balanced"] = lambda t: t["runs"][("high/flows8", 0.65)].update(
        {"sched.worker_utilization.min": 0.53, "sched.worker_utilization.max": 0.80})
    out["scaling/zippydb/synergy-vs-darc"] = _set_scaling("synergy", 8, SD, 16.0 * 1.13)
    out["scaling/zippydb/synergy-below-cfcfs"] = _set_scaling("c-fcfs", 8, SD, 13.0 / 0.084)
    out["scaling/zippydb/darc-vs-synergy-latency"] = _set_scaling("darc", 8, LAT, 598.0)
    out["scaling/zippydb/synergy-slowdown-8-workers"] = _set_scaling("synergy", 8, SD, 29.0)
    out["scaling/zippydb/darc-slowdown-8-workers"] = _set_scaling("darc", 8, SD, 25.6)
    out["scaling/zippydb/c-fcfs-slowdown-8-workers"] = _set_scaling("c-fcfs", 8, SD, 120.0)
    out["scaling/zippydb/synergy-latency-8-workers"] = _set_scaling("synergy", 8, LAT, 300.0)
    out["scaling/zippydb/darc-latency-8-workers"] = _set_scaling("darc", 8, LAT, 590.0 / 1.5)
    out["scaling/zippydb/darc-loss-30-workers"] = _set_scaling("darc", 30, "loss", 0.0)
    out["scaling/zippydb/c-fcfs-loss-30-workers"] = _set_scaling("c-fcfs", 30, "loss", 0.0)
    out["scaling/zippydb/synergy-loss-30-workers"] = _set_scaling("synergy", 30, "loss", 0.01)
    return out


def failing(claim_id: str) -> S.Data:
    t = copy.deepcopy(truth())
    misses()[claim_id](t)
    return build(t)


def _examples() -> dict[str, tuple[Any, Any]]:
    good = build(truth())
    return {cid: (good, failing(cid)) for cid in misses()}


EXAMPLES = _examples()
