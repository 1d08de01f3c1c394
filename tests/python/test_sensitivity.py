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


def _specs(name: str, sets=None) -> list:
    """The quick profile's sweeps of reproduction ``name`` with ``sets(variant)`` appended to each
    variant: its spec and, for protego, the figures' sweeps it runs beside it (their variants
    reach the setter as FIG/NAME)."""
    from dataclasses import replace

    spec = SweepSpec.load(spec_path(get(name)), quick=True)
    if sets is not None:
        spec.variants = [replace(v, set=tuple(v.set) + tuple(sets(v))) for v in spec.variants]
    specs = [spec]
    if name == "protego":
        from microsched.reproduce import protego
        from microsched.reproduce.framework import Condition

        extra = Condition(description="", sets=sets) if sets is not None else None
        specs += [protego.sub_spec(s, quick=True, extra=extra) for s in protego.SUBSWEEPS]
    return specs


@pytest.mark.parametrize("name", ["harvest", "synergy", "protego", "coresync"])
def test_every_declared_cost_sets_valid_fields_on_every_point(name):
    from microsched.sweep.engine import validate_points

    repro = get(name)
    plain = _specs(name)
    for cost in repro.costs:
        touched = 0
        for f in sens.FACTORS:
            for s0, s2 in zip(plain, _specs(name, lambda v, cost=cost, f=f: cost.sets(v, cost.default * f))):
                touched += sum(1 for a, b in zip(s0.variants, s2.variants) if a.set != b.set)
                validate_points(s2, s2.points())
        assert touched > 0, f"{cost.key} applies to no variant"


def test_protego_stack_cost_reaches_the_cpu_bound_figures_only():
    from microsched.reproduce import protego

    cost = next(c for c in get("protego").costs if c.key == "stack_ns")
    by_sweep = {s.path.stem if s.path.name != "sweep.toml" else "main": s
                for s in _specs("protego", lambda v: cost.sets(v, cost.default * 2))}
    fig10 = {x for v in by_sweep["fig10"].variants for x in v.set if x.startswith("workload.types.")}
    assert fig10 == {f"workload.types.{i}.paths.0.steps.0.time.value_us=5.28" for i in (0, 1)}
    assert all("server.packet_cost_ns=5280" in v.set for v in by_sweep["fig13"].variants)
    untouched = [n for n in ("main", *protego.SUBSWEEPS) if n not in ("fig10", "fig13")]
    for n in untouched:
        assert not any("packet_cost_ns" in x or x.startswith("workload.types.") for v in by_sweep[n].variants
                       for x in v.set), n


def test_a_reproduction_without_costs_is_refused_by_name():
    r = cli("reproduce", "collapse", "--quick", "--sensitivity")
    one_line_error(r, "--sensitivity")
    assert "harvest" in r.stderr
