"""Issue 44, Synergy: the dispatcher cost fitted on Shinjuku's published 2.37 MRPS on Extreme, the
claim it is fitted on shown as the fit's input (never judged), and the compiler interrupts'
overhead charged under a named condition."""

from __future__ import annotations

import tomllib
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from microsched.api import run_summary
from microsched.maxload import metric_value
from microsched.reproduce import synergy as syn
from microsched.reproduce import synergy_fit as fit
from microsched.reproduce.claims import (FIT_INPUT, FRACTION, PAPER_VERDICTS, REPRODUCED, ClaimSpec, Measured,
                                         counts, judge, verdict_of)
from microsched.reproduce.framework import get

REPO = Path(__file__).resolve().parents[2]
SWEEP = tomllib.loads((REPO / "experiments" / "synergy" / "sweep.toml").read_text())
FIT_ID = "maxload/extreme/shinjuku/capacity-share"


def _variant(name: str) -> SimpleNamespace:
    v = next(v for v in SWEEP["variants"] if v["name"] == name)
    return SimpleNamespace(name=v["name"], set=tuple(v["set"]))


@pytest.fixture(scope="module")
def fitted() -> dict:
    return fit.fit_dispatcher_cost(jobs=2)


def test_the_fit_reproduces_the_documented_cost(fitted):
    """The bisection, re-run on the documented seeds and run length, lands on FITTED_NS: each
    seed's bracket is narrower than the tolerance, and the mean of the brackets' midpoints is the
    documented cost within half a bracket (the midpoint's own uncertainty) plus its rounding."""
    r = fitted
    assert [s["seed"] for s in r["seeds"]] == list(fit.FITTED_SEEDS)
    assert all(s["fail_ns"] - s["pass_ns"] <= fit.TOL_NS for s in r["seeds"])
    assert r["step_ns"] <= fit.TOL_NS
    assert abs(r["cost_ns"] - fit.FITTED_NS) <= r["step_ns"] / 2 + 0.05, r
    # The fit moves the cost: the inferred 200 ns misses the published rate on every seed.
    assert all(s["fail_ns"] < fit.INFERRED_NS for s in r["seeds"])


def test_the_fitted_cost_meets_the_slo_at_the_published_rate_and_misses_it_above(fitted):
    """What the fit claims, checked on its first seed: at the bracket's pass bound Shinjuku meets
    p99.9 slowdown <= 50 at 2.37 MRPS and keeps up; at its fail bound it does not."""
    from microsched.maxload import _probe

    r = fitted["seeds"][0]
    base = str(REPO / "experiments" / "synergy" / "extreme.toml")
    sets = (*fit.variant_sets(), *fit.FITTED_OVERRIDES)
    ok, ko = (_probe(base, (*sets, f"server.dispatcher.cost_ns={c:.6g}"), r["seed"], fit.target_load(),
                     "slowdown.p999") for c in (r["pass_ns"], r["fail_ns"]))
    assert ok["offered_rps"] == pytest.approx(2.37e6, rel=0.005)
    assert ok["value"] <= fit.SLO and ok["stable"]
    assert ko["value"] > fit.SLO or not ko["stable"]


def test_a_fit_input_is_shown_never_judged():
    """A claim a parameter was fitted on gets fit_input whether the run matches the paper or not,
    keeps what it would be if judged, and is not counted with the paper's claims."""
    spec = ClaimSpec(id="x", claim="x", paper_ref="Fig. 4", kind=FRACTION, paper=0.5, measure=lambda d: d,
                     fit_input="server.dispatcher.cost_ns: fitted on this number")
    on = verdict_of(spec, Measured(0.5, 0.01, 3))
    off = verdict_of(spec, Measured(0.2, 0.01, 3))
    assert on.verdict == off.verdict == FIT_INPUT
    assert on.extra["verdict_if_judged"] == REPRODUCED and off.extra["verdict_if_judged"] != REPRODUCED
    assert on.extra["fit_input"] == spec.fit_input and "fitted" in on.extra["cause"]["text"]
    assert FIT_INPUT not in PAPER_VERDICTS and counts([on])[FIT_INPUT] == 1
    assert not on.holds
    with pytest.raises(ValueError, match="fit"):
        ClaimSpec(id="y", claim="y", paper_ref="r", kind=FRACTION, paper=0.5, measure=lambda d: d,
                  derived="a / b", fit_input="z")


def test_the_synergy_claim_the_cost_is_fitted_on_is_its_input():
    """Shinjuku's 2.37 MRPS on Extreme is the fit's input, as a claims.json row; its ratio to
    Synergy and every other max load stay judged."""
    specs = {c.id: c for c in syn.CLAIMS}
    assert specs[FIT_ID].fit_input and str(fit.FITTED_NS) in specs[FIT_ID].fit_input
    assert [c.id for c in syn.CLAIMS if c.fit_input] == [FIT_ID]
    paper = specs[FIT_ID].paper
    maxload = pd.DataFrame([{"search": "extreme/shinjuku", "seed": s, "load": paper, "step": 0.01,
                             "censored": False, "fail_value": 60.0, "fail_util": 0.5,
                             "fail_stable": True} for s in (1, 2, 3)])
    data = syn.Data.of(pd.DataFrame(), maxload, pd.DataFrame())
    d = judge(specs[FIT_ID], data).to_dict()
    assert d["verdict"] == FIT_INPUT and d["holds"] is False and d["fit_input"]
    assert {"id", "claim", "paper", "measured", "holds", "verdict"} <= set(d)


def test_the_fit_is_the_default_and_the_inferred_costs_a_condition():
    # The project's rule (shared/reference): the fitted cost by default; the spec's costs are the
    # fit's, in the inferred proportions (200 / 150 / 100 / 200 ns × 0.528).
    costs = {x.split("=")[1] for v in SWEEP["variants"] for x in v["set"] if x.startswith("server.dispatcher.cost_ns=")}
    assert costs == {f"{fit.FITTED_NS:g}", "79.2", "52.8"}, costs
    cond = get("synergy").condition("inferred-dispatcher")
    scale = fit.INFERRED_NS / fit.FITTED_NS
    for v in SWEEP["variants"]:
        var = SimpleNamespace(name=v["name"], set=tuple(v["set"]))
        own = [x for x in v["set"] if x.startswith("server.dispatcher.cost_ns=")]
        got = cond.sets(var)
        if not own:
            assert got == (), v["name"]
        else:
            assert got == (f"server.dispatcher.cost_ns={float(own[0].split('=')[1]) * scale:g}",), v["name"]
    assert cond.sets(_variant("extreme/shinjuku")) == (f"server.dispatcher.cost_ns={fit.INFERRED_NS:g}",)
    assert cond.sets(_variant("extreme/concord")) == ("server.dispatcher.cost_ns=150",)
    assert cond.sets(_variant("high/tq")) == ("server.dispatcher.cost_ns=100",)


def test_ci_overhead_charges_the_ci_built_systems_only():
    cond = get("synergy").condition("ci-overhead")
    charged = {v["name"] for v in SWEEP["variants"] if cond.sets(_variant(v["name"]))}
    for name in ("extreme/synergy", "high/shinjuku-ci", "zippydb/concord", "zippydb/tq", "leveldb/concord",
                 "zippydb/rss-ci", "extreme/d10-f10"):
        assert name in charged
    for name in ("extreme/shinjuku", "high/signal", "high/kmod_ipi", "high/uintr", "zippydb/rss", "high/c-fcfs",
                 "high/d-fcfs", "extreme/darc"):
        assert name not in charged
    assert cond.sets(_variant("high/synergy")) == ("server.preemption.service_inflation=0.2",)


def test_service_inflation_stretches_run_time_not_the_slowdowns_denominator():
    """The option ci-overhead sets, as stated: every request runs 20 % longer (core busy time
    ×1.2 for the same requests), and slowdown still divides by the nominal service time (a lone
    100 µs request's slowdown grows from (100 + RTT) / 100 to (120 + RTT) / 100)."""
    base = str(REPO / "experiments" / "synergy" / "high.toml")
    ovr = ["policy.sched.kind=queue", "server.queue=per_core", "load.fraction=0.3", "duration_ms=20", "warmup_ms=0"]
    plain = run_summary(base, seed=1, overrides=ovr)
    charged = run_summary(base, seed=1, overrides=[*ovr, f"server.preemption.service_inflation={syn.CI_OVERHEAD}"])
    assert charged["requests"] == plain["requests"]
    assert charged["core_time"]["busy_ns"] / plain["core_time"]["busy_ns"] == pytest.approx(1.2, abs=0.005)
    assert metric_value(plain, "by_type.long.slowdown.p50") == pytest.approx(1.10, abs=0.01)
    assert metric_value(charged, "by_type.long.slowdown.p50") == pytest.approx(1.30, abs=0.01)
