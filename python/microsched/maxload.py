"""The highest offered load at which a scenario meets a service-level objective.

``max_load(scenario, slo=50)`` bisects over ``load.fraction`` (of the workers' capacity), one
bisection per seed, for the highest load whose summary metric (default ``slowdown.p999``, the
p99.9 of end-to-end latency / nominal service time) is at most ``slo``. The metric is assumed to
grow with load (it does for queueing systems below and beyond saturation). A load also fails
if the run did not keep up with it (:func:`backlog_excess`: the paper discards runs losing more
than 0.1 % of requests) or saturated its workers (mean utilisation ≥ 0.99). The seeds' results
give a mean and a 95 % confidence interval (Student t). Seeds run in parallel on a local
process pool (``jobs``); every probe of a seed is one ``microsched.run``.

Metric names are dotted paths into the summary; a list of named sections is indexed by name:
``by_type.short.slowdown.p999``, ``latency_us.p999``, ``sched.preemptions``.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Sequence

from .scenario import plain


def metric_value(summary: dict, metric: str) -> float:
    """The value of a dotted metric path in a summary dict (lists of sections by ``name``);
    NaN where the summary has no value (``null``: a latency of a run in which nothing
    completed), so that it meets no SLO."""
    node: Any = summary
    for part in metric.split("."):
        if isinstance(node, list):
            match = [x for x in node if isinstance(x, dict) and x.get("name") == part]
            if not match:
                raise ValueError(f"metric {metric!r}: no section named {part!r} (have "
                                 f"{', '.join(str(x.get('name')) for x in node)})")
            node = match[0]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            raise ValueError(f"metric {metric!r}: the summary has no {part!r}")
    node = plain(node)  # a numpy number is a number
    if node is None:
        return math.nan
    if not isinstance(node, (int, float)):
        raise ValueError(f"metric {metric!r} is not a number")
    return float(node)


# Mean worker utilisation at which a run counts as saturated: its queues never empty, so the
# load is not sustainable however good a short run's percentiles look.
SATURATED = 0.99


def backlog_excess(s: dict) -> float:
    """How far the requests still in flight at the end exceed what a stable system holds: the
    paper's 0.1 % loss bound (of generated requests) plus three times Little's law's number in
    system (offered rate × mean latency), plus 10. Positive: the run did not keep up (a short
    run's percentiles can hide a queue that grows without bound, e.g. starved long requests)."""
    r = s["requests"]
    in_system = s["offered_rps"] * (s["latency_us"]["mean"] or 0.0) * 1e-6  # null: nothing completed
    return r["in_flight"] - (0.001 * r["generated"] + 3 * in_system + 10)


def _probe(scenario: Any, overrides: Sequence[str], seed: int, load: float, metric: str) -> dict:
    from .api import run_summary

    s = run_summary(scenario, seed=seed, overrides=[*overrides, f"load.fraction={load:.6g}"])
    util = (s.get("sched") or {}).get("worker_utilization", {}).get("mean", 0.0)
    excess = backlog_excess(s)
    return {"value": metric_value(s, metric), "offered_rps": float(s["offered_rps"]),
            "stable": excess <= 0 and util < SATURATED, "utilization": float(util), "backlog_excess": float(excess)}


def bisect_seed(scenario: Any, seed: int, slo: float, metric: str = "slowdown.p999",
                overrides: Sequence[str] = (), lo: float = 0.05, hi: float = 1.0, tol: float = 0.01) -> dict:
    """One seed's bisection: the highest load in [lo, hi] (to within ``tol``) that meets the SLO,
    with the probes made (each with its metric ``value``, ``offered_rps``, ``stable``, mean worker
    ``utilization`` and :func:`backlog_excess`). ``load`` is ``lo`` (``meets_at_lo`` false) if even
    ``lo`` misses it; ``fail_load`` is the lowest load that missed it (``None`` if ``hi`` met it),
    so the SLO crossing lies in [``load``, ``fail_load``]."""
    probes = []

    def ok(x: float) -> bool:
        p = _probe(scenario, overrides, seed, x, metric)
        probes.append({"load": x, **p})
        return p["value"] <= slo and p["stable"]

    if ok(hi):
        return {"seed": seed, "load": hi, "fail_load": None, "meets_at_lo": True, "probes": probes}
    if not ok(lo):
        return {"seed": seed, "load": lo, "fail_load": lo, "meets_at_lo": False, "probes": probes}
    a, b = bisect_bracket(ok, lo, hi, tol)
    return {"seed": seed, "load": a, "fail_load": b, "meets_at_lo": True, "probes": probes}


def bisect_bracket(ok: Callable[[float], bool], passing: float, failing: float, tol: float) -> tuple[float, float]:
    """Narrows the bracket [``passing``, ``failing``] of a monotone pass/fail predicate (``ok``
    holds at ``passing``, not at ``failing``; the caller has checked both) by halving it until it
    is no wider than ``tol``; returns the last passing and the last failing point. Shared by the
    max-load search and by fits that bisect a cost the same way (reproduce/synergy_fit.py)."""
    a, b = passing, failing
    while b - a > tol:
        m = (a + b) / 2
        if ok(m):
            a = m
        else:
            b = m
    return a, b


def _bisect_args(args: tuple) -> dict:
    return bisect_seed(*args)


def max_load(scenario: Any, slo: float, metric: str = "slowdown.p999", seeds: Iterable[int] = (1, 2, 3),
             overrides: Sequence[str] = (), lo: float = 0.05, hi: float = 1.0, tol: float = 0.01,
             jobs: int | None = None) -> dict:
    """The highest ``load.fraction`` meeting ``metric <= slo``: mean over seeds, 95 % CI
    half-width, and the same in requests per second (``rps`` = load × the scenario's capacity).

    ``scenario`` is a path, dict or :class:`~microsched.Scenario`; ``overrides`` apply to every
    probe (``"dotted.key=value"``). Returns ``{"load", "load_ci95", "rps", "rps_ci95", "n",
    "meets_slo", "missing_at_lo", "capacity_rps", "seeds": [per-seed results with their probes],
    "metric", "slo", "lo", "hi"}``.

    ``meets_slo`` is false if some seed misses the SLO even at ``lo`` (``missing_at_lo`` lists
    those seeds): if every seed does, no load in [lo, hi] meets it and ``load`` and ``rps`` are
    ``None``; if only some do, their load counts as ``lo`` (an upper bound) in the mean. A value
    that cannot be computed (the interval with one seed) is ``None``, never NaN.
    """
    from .api import validate
    # Here, not at the top: a worker that runs a bisection (:func:`_bisect_args`) imports this
    # module, and the pool's runner would bring pandas with it.
    from .sweep.runner import default_jobs, mean_ci95, run_tasks

    seeds = [plain(s) for s in seeds]
    if not seeds:
        raise ValueError("seeds: give at least one seed")
    if not (0 < lo < hi):
        raise ValueError(f"lo, hi: need 0 < lo < hi, got {lo}, {hi}")
    if isinstance(scenario, (str, bytes)) or hasattr(scenario, "__fspath__"):
        scenario = str(scenario)
    validate(scenario, overrides=list(overrides))  # a bad scenario fails here, once
    args = [(scenario, s, slo, metric, tuple(overrides), lo, hi, tol) for s in seeds]
    jobs = min(jobs or default_jobs(), len(seeds))
    per_seed = run_tasks(_bisect_args, args, jobs)
    missing = [r["seed"] for r in per_seed if not r["meets_at_lo"]]
    load, ci, n = mean_ci95(r["load"] for r in per_seed)
    if len(missing) == len(per_seed):  # no load in [lo, hi] meets the SLO
        load = ci = math.nan
    # Capacity in req/s: a probe's offered rate over its load (the same for every probe).
    p = per_seed[0]["probes"][0]
    capacity = p["offered_rps"] / p["load"] if p["load"] > 0 else math.nan
    return {
        "metric": metric, "slo": slo, "lo": lo, "hi": hi, "meets_slo": not missing, "missing_at_lo": missing,
        "load": _number(load), "load_ci95": _number(ci), "n": n,
        "rps": _number(load * capacity), "rps_ci95": _number(ci * capacity), "capacity_rps": _number(capacity),
        "seeds": per_seed,
    }


def _number(x: float) -> float | None:
    """``x``, or ``None`` if it is not a finite number (JSON has no NaN)."""
    return float(x) if x is not None and math.isfinite(x) else None
