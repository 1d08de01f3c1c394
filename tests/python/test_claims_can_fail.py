"""Every claim of every reproduction can fail: each has a synthetic result on which it is
reproduced and one on which it is not (``claim_examples/NAME.py``). A claim declared without
both examples fails here: a verdict that cannot fail is no verdict."""

from __future__ import annotations

import importlib

import pytest

from microsched import reproduce
from microsched.reproduce.claims import CHECK, DERIVED, FIT_INPUT, MODEL_CHECK, REPRODUCED, judge


def _examples(name: str) -> dict:
    try:
        mod = importlib.import_module(f"claim_examples.{name.replace('-', '_')}")
    except ModuleNotFoundError:
        return {}
    return mod.EXAMPLES


CASES = [(name, spec) for name in reproduce.names() for spec in reproduce.get(name).claims]


@pytest.mark.parametrize("name", reproduce.names())
def test_every_reproduction_declares_its_claims_and_their_examples(name):
    repro = reproduce.get(name)
    declared = {s.id for s in repro.claims}
    assert declared, f"{name} declares no claims (register(..., claims=CLAIMS))"
    examples = set(_examples(name))
    assert declared - examples == set(), f"{name}: claims without a passing and a failing example"
    assert examples - declared == set(), f"{name}: examples of claims it does not declare"


@pytest.mark.parametrize("name,spec", CASES, ids=[f"{n}:{s.id}" for n, s in CASES])
def test_claim_passes_on_its_passing_example_and_fails_on_its_failing_one(name, spec):
    ex = _examples(name)
    if spec.id not in ex:
        pytest.fail(f"{name}: {spec.id} has no examples")
    good, bad = ex[spec.id]
    ok, ko = judge(spec, good), judge(spec, bad)
    if spec.kind == CHECK:
        assert ok.verdict == ko.verdict == MODEL_CHECK
        assert ok.extra["passed"] is True and ko.extra["passed"] is False
        return
    if spec.fit_input:
        # a number a model parameter was fitted on is shown with its fit, never judged
        assert ok.verdict == ko.verdict == FIT_INPUT
        assert ok.extra["verdict_if_judged"] == REPRODUCED and ko.extra["verdict_if_judged"] != REPRODUCED
        assert ok.extra["fit_input"] == spec.fit_input
        return
    if not spec.judged:
        # a number composed from statements at different points is shown, never judged
        assert ok.verdict == ko.verdict == DERIVED
        assert ok.extra["verdict_if_judged"] == REPRODUCED and ko.extra["verdict_if_judged"] != REPRODUCED
        assert spec.derived in ok.extra["cause"]["text"]
        return
    assert ok.verdict == REPRODUCED, (ok.measured, ok.extra.get("cause"))
    assert ko.verdict != REPRODUCED, ko.measured
    cause = ko.extra.get("cause")
    assert cause and cause["text"], "a claim that is not reproduced carries a cause"


# ---------------------------------------------------------------------------------------------
# The rules that weigh the effect (README, "How claims are judged"): each can fail.

from microsched.reproduce.claims import (DIRECTION, PAPER_VERDICTS, RATIO, ClaimSpec, Measured, claim_band,  # noqa: E402
                                         counts, verdict_of)


def _spec(repro: str, cid: str) -> ClaimSpec:
    """The reproduction's own claim, without its cause (which reads evidence from a run)."""
    from dataclasses import replace

    return replace(next(s for s in reproduce.get(repro).claims if s.id == cid), cause=None)


def _ratio(paper: float, **kw) -> ClaimSpec:
    return ClaimSpec(id="r", claim="a ratio", paper_ref="Fig. 0", kind=RATIO, paper=paper,
                     measure=lambda d: Measured(None), **kw)


def test_a_small_effect_does_not_pass_for_the_papers_large_one():
    # Synergy, LevelDB: "27 % more throughput than Concord" (1.268) measured 1.033 ± 0.020. The
    # ×/÷ 1.25 band alone (1.014 to 1.585) holds it; its effect (0.033) is an eighth of the paper's.
    spec = _spec("synergy", "maxload/leveldb/synergy-vs-concord")
    assert spec.tol.band(spec.paper)[0] < 1.033
    c = verdict_of(spec, Measured(1.033, 0.020, 5))
    assert c.verdict == DIRECTION
    assert "effect" in c.extra["cause"]["text"] or "outside" in c.extra["cause"]["text"]
    assert verdict_of(spec, Measured(1.25, 0.020, 5)).verdict == REPRODUCED
    # an effect 1.5× too large fails as well
    assert verdict_of(spec, Measured(1.45, 0.020, 5)).verdict == DIRECTION


def test_the_effect_of_a_ratio_below_one_is_weighed_too():
    # "2 % fewer cores" (0.98) measured 0.997: within ×/÷ 1.25, but a sixth of the effect
    spec = _ratio(0.98)
    assert verdict_of(spec, Measured(0.997, 0.001, 5)).verdict != REPRODUCED
    assert verdict_of(spec, Measured(0.981, 0.001, 5)).verdict == REPRODUCED
    lo, hi = claim_band(spec)
    assert (round(lo, 4), round(hi, 4)) == (0.97, 0.99)


def test_a_large_effect_keeps_the_factor_band():
    # 3.3×: the effect band (2.15 to 4.45) is wider than ×/÷ 1.25, which decides
    lo, hi = claim_band(_ratio(3.3))
    assert (round(lo, 3), round(hi, 3)) == (2.64, 4.125)


def test_an_interval_touching_the_band_with_its_mean_outside_does_not_pass():
    # proactive-lower-p99/delay_range: 0.836 against [0.527, 0.824] passed by its interval alone
    spec = _ratio(0.659)
    lo, hi = claim_band(spec)
    assert hi < 0.836 < hi + 0.02
    c = verdict_of(spec, Measured(0.836, 0.02, 5))
    assert c.verdict != REPRODUCED
    assert "outside" in c.extra["cause"]["text"]
    assert verdict_of(spec, Measured(hi - 0.005, 0.02, 5)).verdict == REPRODUCED


def test_up_to_is_a_value_not_a_bound():
    # Protego Fig. 9, "dropping up to 40 %": the largest drop rate over the sweep is compared with
    # 0.40 as a value, so 5.8 % (which meets the bound ≤ 0.40) is not the paper's number
    spec = _spec("protego", "fig9-protego-drop-rate")
    assert spec.kind != "bound"
    assert verdict_of(spec, Measured(0.058, 0.005, 5)).verdict != REPRODUCED
    assert verdict_of(spec, Measured(0.37, 0.02, 5)).verdict == REPRODUCED


def test_a_number_composed_at_different_points_is_shown_not_judged():
    spec = _spec("allocators", "proactive-lower-p99/delay_range")
    assert spec.derived and not spec.derived_at_one_point
    c = verdict_of(spec, Measured(0.66, 0.01, 5))
    assert c.verdict == "derived" and c.extra["derived"] == spec.derived
    assert "derived" not in PAPER_VERDICTS and counts([c])["derived"] == 1
    # the same formula with both parts at one point is judged like any other number
    from dataclasses import replace
    judged = replace(spec, derived_at_one_point=True)
    assert verdict_of(judged, Measured(0.66, 0.01, 5)).verdict == REPRODUCED
    assert verdict_of(judged, Measured(0.95, 0.01, 5)).verdict != REPRODUCED
    with pytest.raises(ValueError, match="derived"):
        _ratio(1.5, derived_at_one_point=True)


def test_table_cells_are_judged_on_full_length_points_only():
    """CoreSync's Table I/II cells (a few percent from 1) are judged on the full profile's window;
    the quick profile's 20 ms points leave them out of regime, saying why."""
    import tomllib
    from dataclasses import replace as dc_replace

    from claim_examples import coresync as ex
    from microsched.reproduce import coresync as cs
    from microsched.reproduce.claims import OUT_OF_REGIME, judge as judge_one
    from microsched.reproduce.framework import experiments_dir

    full = tomllib.loads((experiments_dir() / "coresync" / "sweep.toml").read_text(encoding="utf-8"))
    assert f"duration_ms={cs.FULL_WINDOW_MS:g}" in full["overrides"]
    cell = next(s for s in cs.CLAIMS if s.id == "table1/exp10/shenango@100")
    good = ex.EXAMPLES[cell.id][0]
    assert judge_one(cell, good).verdict == REPRODUCED
    quick = dc_replace(good, results=good.results.assign(duration_s=0.02), _d=None)
    c = judge_one(cell, quick)
    assert c.verdict == OUT_OF_REGIME and c.extra["verdict_if_judged"] == REPRODUCED
    assert "measured window" in c.extra["cause"]["text"] and "20" in c.extra["cause"]["text"]
