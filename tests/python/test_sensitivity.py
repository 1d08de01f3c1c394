"""The sensitivity table (`reproduce NAME --sensitivity`): each declared cost at ½× and 2× its
default, one at a time; a claim whose verdict moves "depends on" that cost. The machinery is
checked on a stand-in for the runs; every declared cost's overrides validate on every point of
its reproduction; a reproduction without costs is refused by name."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from conftest import microsched_cli as cli, one_line_error
from microsched.reproduce import SweepSpec, get
from microsched.reproduce import sensitivity as sens
from microsched.reproduce.framework import spec_path


def test_a_claim_depends_on_a_cost_when_its_verdict_moves(monkeypatch, tmp_path):
    repro = get("harvest")
    calls = []

    def fake_run(name, out, quick, jobs, seeds, extra=None, progress=None):
        calls.append(extra.description)
        # "p99" flips when the eviction doubles; "harvest" never moves.
        flips = "mechanism.evict_us = 60" in extra.description
        claims = [{"id": "p99", "verdict": "not_reproduced" if flips else "reproduced", "measured": 1.0},
                  {"id": "harvest", "verdict": "direction", "measured": 2.0}]
        return SimpleNamespace(claims=claims)

    monkeypatch.setattr(sens, "run_reproduction", fake_run)
    base = [{"id": "p99", "verdict": "reproduced", "measured": 1.0, "paper": 1.04},
            {"id": "harvest", "verdict": "direction", "measured": 2.0, "paper": 2.4}]
    result = sens.run_sensitivity("harvest", out=tmp_path, quick=True, baseline=base)
    assert len(calls) == 2 * len(repro.costs)
    by_id = {r["id"]: r for r in result["claims"]}
    assert by_id["p99"]["depends_on"] == ["mechanism.evict_us"]
    assert by_id["p99"]["by_cost"]["mechanism.evict_us"]["2x"]["verdict"] == "not_reproduced"
    assert by_id["harvest"]["depends_on"] == []
    md = (tmp_path / sens.SENSITIVITY_MD).read_text()
    assert md.splitlines()[2].startswith("| `p99` |"), "claims that move come first"
    assert "1 of 2 claims change verdict" in md
    assert (tmp_path / sens.SENSITIVITY_JSON).is_file()


@pytest.mark.parametrize("name", ["harvest", "synergy"])
def test_every_declared_cost_sets_valid_fields_on_every_point(name):
    from dataclasses import replace

    from microsched.sweep.engine import validate_points

    repro = get(name)
    spec = SweepSpec.load(spec_path(repro), quick=True)
    touched = 0
    for cost in repro.costs:
        for f in sens.FACTORS:
            extra = [cost.sets(v, cost.default * f) for v in spec.variants]
            touched += sum(1 for e in extra if e)
            s2 = SweepSpec.load(spec_path(repro), quick=True)
            s2.variants = [replace(v, set=tuple(v.set) + e) for v, e in zip(s2.variants, extra)]
            validate_points(s2, s2.points())
    assert touched > 0


def test_a_reproduction_without_costs_is_refused_by_name():
    r = cli("reproduce", "collapse", "--quick", "--sensitivity")
    one_line_error(r, "--sensitivity")
    assert "harvest" in r.stderr
