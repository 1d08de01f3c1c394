"""Issue 12 item 6's default switch: the probe-cost search (`server.search = auto`) and the
drop-gated fix ramp are the defaults, and `reproduce NAME --semantics instant` restores the
model before the switch (instant search, ungated ramp) for every reproduction it moved."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import microsched

REPO = Path(__file__).resolve().parents[2]


def test_defaults_are_the_probe_search_and_the_gated_ramp():
    v = microsched.validate(REPO / "experiments/collapse/base.toml", ["policy.overload.core_fix=true"])
    assert v["server"]["search"] == {"kind": "auto"}
    assert v["policy"]["overload"]["core_fix_drop_gate"] == 0.05


@pytest.mark.parametrize("name", ["allocators", "collapse", "coresync", "load-shift"])
def test_semantics_instant_restores_the_model_before_the_switch(name):
    spec = tomllib.loads((REPO / "experiments" / name / "sweep.toml").read_text())
    overrides = tomllib.loads((REPO / "experiments" / name / "semantics-instant.toml").read_text())["overrides"]
    v = microsched.validate(REPO / "experiments" / name / spec["base"], overrides)
    assert v["server"]["search"] == {"kind": "instant"}
    if v["policy"]["overload"].get("kind") == "breakwater" and "core_fix_drop_gate" in " ".join(overrides):
        assert v["policy"]["overload"]["core_fix_drop_gate"] == "none"


def test_ungated_ramp_survives_set_reserialisation():
    """`--set` re-serialises the scenario: the ungated ramp must not come back as the default gate."""
    ovr = ['policy.overload.core_fix_drop_gate="none"', "policy.overload.core_fix=true", "duration_ms=1", "warmup_ms=0"]
    v = microsched.validate(REPO / "experiments/collapse/base.toml", ovr)
    assert v["policy"]["overload"]["core_fix_drop_gate"] == "none"
    with pytest.raises(ValueError, match="core_fix_drop_gate"):
        microsched.validate(REPO / "experiments/collapse/base.toml", ['policy.overload.core_fix_drop_gate="off"'])
