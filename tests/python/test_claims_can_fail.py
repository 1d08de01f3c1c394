"""Every claim of every reproduction can fail: each has a synthetic result on which it is
reproduced and one on which it is not (``claim_examples/NAME.py``). A claim declared without
both examples fails here: a verdict that cannot fail is no verdict."""

from __future__ import annotations

import importlib

import pytest

from microsched import reproduce
from microsched.reproduce.claims import CHECK, MODEL_CHECK, REPRODUCED, judge


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
    assert ok.verdict == REPRODUCED, (ok.measured, ok.extra.get("cause"))
    assert ko.verdict != REPRODUCED, ko.measured
    cause = ko.extra.get("cause")
    assert cause and cause["text"], "a claim that is not reproduced carries a cause"
