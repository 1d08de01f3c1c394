"""The verdict model (reproduce/claims.py): each kind's verdicts at the edges of its tolerance,
regimes, model checks, causes built only from evidence, and the claims.json layout."""

from __future__ import annotations

import math

import pytest

from microsched.reproduce.claims import (
    BOUND, CHECK, DIFFERENCE, DIRECTION, FRACTION, GAIN, MODEL_CHECK, MONOTONE, NOT_REPRODUCED, ORDER,
    OUT_OF_REGIME, RATIO, REPRODUCED, VALUE, Cause, ClaimSpec, Condition, Measured, Tolerance, check_claims,
    counts, judge,
)
from microsched.reproduce.framework import make_summary, summary_markdown


def spec(kind, paper=None, **kw):
    return ClaimSpec(id="c", claim="a claim", paper_ref="Fig. 1", kind=kind, paper=paper,
                     measure=lambda d: d if isinstance(d, Measured) else Measured(*d), **kw)


@pytest.mark.parametrize("kind,paper,measured,ci,verdict", [
    (RATIO, 3.3, (3.0,), 0.1, REPRODUCED),            # inside ×/÷ 1.25
    (RATIO, 3.3, (2.55,), 0.1, DIRECTION),            # 2.55 + 0.1 reaches 3.3 / 1.25 = 2.64, the mean does not
    (RATIO, 3.3, (2.65,), 0.1, REPRODUCED),           # the mean inside the band
    (RATIO, 3.3, (2.5,), 0.05, DIRECTION),            # does not
    (RATIO, 3.3, (1.29,), 0.05, DIRECTION),           # Protego Fig. 6's 1.29× against 3.3×
    (RATIO, 3.3, (1.02,), 0.05, NOT_REPRODUCED),      # CI includes no effect
    (RATIO, 3.3, (0.8,), 0.05, NOT_REPRODUCED),       # the other way
    (RATIO, 0.77, (0.985,), 0.01, DIRECTION),         # below 1, but not 0.77 within ×/÷ 1.25 (> 0.9625)
    (RATIO, 0.77, (0.9,), 0.01, DIRECTION),           # within ×/÷ 1.25, but its effect 0.10 is < half of 0.23
    (RATIO, 0.77, (0.85,), 0.01, REPRODUCED),         # effect 0.15: within 0.5-1.5× of 0.23
    (VALUE, 200.0, (245.0,), 5.0, REPRODUCED),        # 240 <= 250
    (VALUE, 200.0, (260.0,), 5.0, NOT_REPRODUCED),    # a value has no direction
    (FRACTION, 0.81, (0.97,), 0.01, NOT_REPRODUCED),  # headroom 0.03 against the paper's 0.19
    (FRACTION, 0.81, (0.84,), 0.01, REPRODUCED),      # share 0.84 within 0.7625-0.848
    (FRACTION, 0.1, (0.12,), 0.0, REPRODUCED),        # a small share: its own ×/÷ 1.25 decides
    (FRACTION, 0.5, (0.97,), 0.01, NOT_REPRODUCED),
    (RATIO, 1.113, (1.006,), 0.027, NOT_REPRODUCED),  # within ×/÷ 1.25 of 1.113, but no effect shown
    (RATIO, 1.113, (1.06,), 0.027, REPRODUCED),
    (GAIN, 0.0, (0.01,), 0.02, NOT_REPRODUCED),       # "no change": a zero-width band, the CI is wider
    (GAIN, 0.0, (0.01,), 0.0, NOT_REPRODUCED),
    (FRACTION, 1.0, (0.95,), 0.01, REPRODUCED),       # all of it: 0.8 to 1
    (FRACTION, 1.0, (0.584,), 0.653, NOT_REPRODUCED), # the interval is wider than the band: inconclusive
    (RATIO, 1.0, (1.77,), 2.13, NOT_REPRODUCED),
    (GAIN, 0.13, (0.07,), 0.0, REPRODUCED),           # within half of 0.13: 0.065 to 0.195
    (GAIN, 0.13, (0.036,), 0.01, DIRECTION),
    (GAIN, 0.13, (0.0,), 0.0, NOT_REPRODUCED),        # the ladder's gain of 0.0
    (GAIN, -0.23, (-0.01,), 0.005, DIRECTION),
    (DIFFERENCE, 2.4, (0.3,), 0.1, DIRECTION),
    (BOUND, 200.0, (190.0,), 5.0, REPRODUCED),
    (BOUND, 200.0, (210.0,), 5.0, NOT_REPRODUCED),
    (BOUND, 200.0, (204.0,), 5.0, NOT_REPRODUCED),    # above the bound: the CI reaching it is not enough
    (BOUND, 200.0, (197.0,), 5.0, NOT_REPRODUCED),    # inconclusive: the mean meets it, the interval crosses it
    (BOUND, 200.0, (190.0,), 10.0, REPRODUCED),       # the whole interval within the bound
])
def test_verdict_per_kind(kind, paper, measured, ci, verdict):
    c = judge(spec(kind, paper), Measured(measured[0], ci, 3))
    assert c.verdict == verdict
    assert c.holds is (verdict == REPRODUCED)
    if verdict != REPRODUCED:
        assert c.extra["cause"]["text"]


def test_order_and_monotone_need_the_interval_to_exclude_no_effect():
    above = spec(ORDER, side="above")
    assert judge(above, Measured(0.5, 0.1, 3)).verdict == REPRODUCED
    assert judge(above, Measured(0.05, 0.1, 3)).verdict == NOT_REPRODUCED
    assert judge(spec(ORDER, side="below"), Measured(-0.5, 0.1, 3)).verdict == REPRODUCED
    assert judge(spec(MONOTONE), Measured(0.0, 0.0, 3)).verdict == NOT_REPRODUCED  # a gain of 0.0 is no rise
    assert judge(spec(MONOTONE), Measured(0.1, 0.02, 3)).verdict == REPRODUCED


def test_lower_bound_and_own_tolerance():
    assert judge(spec(BOUND, 0.9, side="lower"), Measured(0.95, 0.01, 3)).verdict == REPRODUCED
    near = judge(spec(BOUND, 0.9, side="lower"), Measured(0.91, 0.02, 3))
    assert near.verdict == NOT_REPRODUCED and near.extra["cause"]["text"].startswith("inconclusive")
    assert judge(spec(BOUND, 0.9, side="lower"), Measured(0.8, 0.01, 3)).verdict == NOT_REPRODUCED
    bars = spec(VALUE, 4.56, tolerance=Tolerance(abs=0.25, source="the paper's error bars"))
    assert judge(bars, Measured(4.35, 0.2, 3)).verdict == REPRODUCED
    assert judge(bars, Measured(4.2, 0.2, 3)).verdict == NOT_REPRODUCED  # the interval touches the bars, the mean not
    assert judge(bars, Measured(3.97, 0.05, 3)).verdict == NOT_REPRODUCED


def test_out_of_regime_is_not_judged_and_says_why():
    m = Measured(3.3, 0.1, 3, regime=[Condition("cores busy of 4 at the top demand", 1.99, ">=", 3.6)])
    c = judge(spec(RATIO, 3.3), m)
    assert c.verdict == OUT_OF_REGIME and not c.holds
    assert c.extra["cause"]["evidence"]["pre0_value"] == 1.99
    assert "1.99" in c.extra["cause"]["text"] and "3.6" in c.extra["cause"]["text"]
    assert c.extra["verdict_if_judged"] == REPRODUCED
    miss = judge(spec(RATIO, 3.3), Measured(1.0, 0.01, 3, regime=m.regime))
    assert miss.extra["verdict_if_judged"] == NOT_REPRODUCED and "judged all the same" in miss.extra["cause"]["text"]
    ok = Measured(3.3, 0.1, 3, regime=[Condition("cores busy", 3.9, ">=", 3.6)])
    assert judge(spec(RATIO, 3.3), ok).verdict == REPRODUCED


def test_model_check_is_apart_and_can_fail():
    chk = spec(CHECK, 0.01)
    assert judge(chk, Measured(0.001, None, 1)).extra["passed"] is True
    bad = judge(chk, Measured(0.2, None, 1))
    assert bad.verdict == MODEL_CHECK and bad.extra["passed"] is False and not bad.holds
    n = counts([bad.to_dict()])
    assert n[MODEL_CHECK] == 1 and n[NOT_REPRODUCED] == 0


def test_unmeasured_claim_is_not_reproduced_with_the_reason():
    c = judge(spec(VALUE, 1.0), Measured(None, missing="no run at the paper's load"))
    assert c.verdict == NOT_REPRODUCED
    assert "paper's load" in c.extra["cause"]["text"]
    assert judge(spec(VALUE, 1.0), Measured(math.nan, 0.1, 3)).verdict == NOT_REPRODUCED


def test_a_claims_own_cause_follows_the_models_diagnosis():
    s = spec(RATIO, 1.113, cause="Concord's dispatcher runs requests in its slack ({slack})")
    c = judge(s, Measured(1.006, 0.027, 3, evidence={"slack": 0.02}))
    assert c.extra["cause"]["text"].startswith("measured 1.01 ± 0.027 is within 0.89 to 1.39 of the paper's 1.11, "
                                               "but the interval includes no effect")
    assert c.extra["cause"]["text"].endswith("Concord's dispatcher runs requests in its slack (0.02)")


def test_cause_text_comes_from_the_evidence_and_follows_it():
    s = spec(RATIO, 3.3, cause="SEDA's bucket rejects {drop:.3f} of the requests at {load} rps")
    a = judge(s, Measured(1.3, 0.05, 3, evidence={"drop": 0.203, "load": 500}))
    b = judge(s, Measured(1.3, 0.05, 3, evidence={"drop": 0.296, "load": 1000}))
    assert a.extra["cause"]["text"] == "SEDA's bucket rejects 0.203 of the requests at 500 rps"
    assert b.extra["cause"]["text"] != a.extra["cause"]["text"]
    assert a.extra["cause"]["evidence"]["drop"] == 0.203


@pytest.mark.parametrize("template", ["at 30 µs RTT the pool stays at {x}", "gain of 0.0", "up to 1.6× the budget {x}",
                                      "JBSQ(2) is full {x}"])
def test_a_cause_template_with_a_numeric_literal_is_refused(template):
    with pytest.raises(ValueError, match="numeric literal"):
        Cause(template, {"x": 1})
    with pytest.raises(ValueError, match="numeric literal"):
        spec(RATIO, 2.0, cause=template)


@pytest.mark.parametrize("template", ["p99 of {x} and c-FCFS at t_e {x}", "the p99.9 slowdown is {x:.2f}"])
def test_names_with_digits_are_not_literals(template):
    assert Cause(template, {"x": 1.5}).render()


def test_a_cause_field_missing_from_the_evidence_is_refused():
    with pytest.raises(ValueError, match="not in its evidence"):
        Cause("pool {pool}", {"other": 1})


def test_declaration_errors_name_the_field():
    with pytest.raises(ValueError, match="needs the paper's number"):
        spec(RATIO, None)
    with pytest.raises(ValueError, match="kind 'bigger'"):
        spec("bigger", 1.0)
    with pytest.raises(ValueError, match="side"):
        spec(ORDER, side="upper")


def test_claims_json_layout_ties_holds_to_the_verdict_and_requires_causes():
    good = judge(spec(RATIO, 3.3), Measured(1.3, 0.05, 3)).to_dict()
    check_claims([good])
    with pytest.raises(ValueError, match="holds"):
        check_claims([dict(good, holds=True)])
    with pytest.raises(ValueError, match="needs a cause"):
        check_claims([{k: v for k, v in good.items() if k != "cause"}])
    with pytest.raises(ValueError, match="verdict"):
        check_claims([dict(good, verdict="holds")])


def test_summary_counts_per_paper_and_lists_what_is_not_reproduced():
    ok = judge(spec(RATIO, 3.3), Measured(3.2, 0.1, 3)).to_dict()
    miss = judge(spec(RATIO, 3.3, cause="bucket {b}"), Measured(1.3, 0.1, 3, evidence={"b": 1})).to_dict()
    miss["id"] = "m"
    runs = [{"name": "protego", "wall_s": 10.0, "claims": [ok, miss]},
            {"name": "collapse", "wall_s": 2.0, "claims": [ok]},
            {"name": "load-shift", "wall_s": 3.0, "error": "ValueError: boom", "claims": []}]
    s = make_summary(runs, quick=True, wall_s=15.0, jobs=2)
    by = {p["paper"]: p for p in s["papers"]}
    assert by["protego"]["counts"][REPRODUCED] == 1 and by["protego"]["counts"][DIRECTION] == 1
    assert by["protego"]["not_reproduced"][0]["cause"] == "bucket 1"
    assert by["study"]["reproductions"] == ["collapse", "load-shift"] and by["study"]["wall_s"] == 5.0
    assert by["study"]["errors"] == {"load-shift": "ValueError: boom"} and s["ok"] is False
    assert s["counts"][REPRODUCED] == 2
    md = summary_markdown(s)
    assert "| **all** |" in md and "Protego" in md
    q = make_summary(runs, quick=True, wall_s=4.0, jobs=2)
    with_quick = summary_markdown(s, quick=q)
    assert "| full (s) | quick (s) |" in with_quick and "| 15 | 4 |" in with_quick


def _claim(cid: str, verdict: str, measured: float = 1.0, paper: float = 1.5) -> dict:
    d = {"id": cid, "claim": cid, "paper": paper, "measured": measured, "holds": verdict == REPRODUCED,
         "verdict": verdict, "ci95": 0.01}
    if verdict != REPRODUCED:
        d["cause"] = {"text": f"the cause of {cid}; more", "evidence": {}}
    return d


def test_each_papers_thesis_is_judged_on_the_claims_that_decide_it():
    from microsched import reproduce
    from microsched.reproduce.framework import thesis_of

    name, thesis = thesis_of("protego")
    assert name == "protego" and thesis.source == "abstract"
    ids = list(thesis.claims)
    all_ok = [_claim(i, REPRODUCED) for i in ids] + [_claim("other", NOT_REPRODUCED)]
    one_dir = [_claim(ids[0], DIRECTION, 1.2, 3.3)] + [_claim(i, REPRODUCED) for i in ids[1:]]
    one_miss = [_claim(ids[0], NOT_REPRODUCED, 0.9, 3.3)] + [_claim(i, REPRODUCED) for i in ids[1:]]
    verdicts = []
    for claims in (all_ok, one_dir, one_miss):
        s = make_summary([{"name": "protego", "wall_s": 1.0, "claims": claims}], quick=True, wall_s=1.0, jobs=1)
        t = s["papers"][0]["thesis"]
        assert set(t) == {"statement", "source", "verdict", "evidence", "claims"}
        assert t["claims"] == ids and t["statement"] == thesis.statement
        assert s["theses"] == [{"paper": "protego", "title": s["papers"][0]["title"], "statement": thesis.statement,
                                "verdict": t["verdict"], "evidence": t["evidence"]}]
        verdicts.append(t["verdict"])
    assert verdicts == ["shown", "direction", "not_shown"]
    # the evidence is read from the run: the failing claim, its measured value and its cause
    assert ids[0] in t["evidence"] and "0.9" in t["evidence"] and f"the cause of {ids[0]}" in t["evidence"]
    assert "more" not in t["evidence"]  # only the cause's first clause
    # a thesis whose reproduction failed, or lacks a deciding claim, is not shown
    failed = make_summary([{"name": "protego", "wall_s": 1.0, "error": "ValueError: boom", "claims": []}],
                          quick=True, wall_s=1.0, jobs=1)
    assert failed["papers"][0]["thesis"]["verdict"] == "not_shown" and "boom" in failed["papers"][0]["thesis"]["evidence"]
    # a paper whose declaring reproduction did not run has no thesis
    only_collapse = make_summary([{"name": "collapse", "wall_s": 1.0, "claims": []}], quick=True, wall_s=1.0, jobs=1)
    assert "thesis" not in only_collapse["papers"][0] and only_collapse["theses"] == []
    md = summary_markdown(s)
    assert md.splitlines()[0].endswith("| thesis |") and "| not shown |" in md
    # every paper has one, declared by one reproduction, on claims that reproduction declares
    for key in ("coresync", "study", "protego", "synergy", "harvest"):
        name, th = thesis_of(key)
        assert set(th.claims) <= {c.id for c in reproduce.get(name).claims}


def test_a_thesis_on_undeclared_claims_is_refused():
    from microsched.reproduce.framework import Thesis, register

    with pytest.raises(ValueError, match="does not declare"):
        register("thesis-test", paper="p", figure="f", description="d", spec="x.toml", claims=[spec(RATIO, 2.0)],
                 thesis=Thesis("s", "abstract", ("nope",)))(lambda ctx: [])


def test_reproduce_all_prints_each_thesis_with_its_verdict():
    from rich.console import Console

    from microsched.cli.reproduce import print_summary
    from microsched.reproduce.framework import thesis_of

    _, thesis = thesis_of("protego")
    claims = [_claim(thesis.claims[0], NOT_REPRODUCED, 0.9, 3.3)] + [_claim(i, REPRODUCED) for i in thesis.claims[1:]]
    s = make_summary([{"name": "protego", "wall_s": 1.0, "claims": claims}], quick=True, wall_s=1.0, jobs=1)
    con = Console(record=True, width=300)
    print_summary(s, con, "/tmp/x")
    text = con.export_text()
    assert "theses" in text and "not shown" in text and thesis.statement[:60] in text
    assert s["theses"][0]["evidence"][:60] in text
