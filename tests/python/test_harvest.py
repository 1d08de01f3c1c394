"""Harvesting (HarvestContainers, issue 16) through the Python front: the reproduction's spec is
what gen.py writes and every point validates; a short run reports the `harvest` section; a
bad controller parameter names its dotted field. The controllers' properties are asserted on
seeded runs in crates/microsched-sim/tests/harvest.rs; the reproduction's claims run in
`microsched reproduce harvest --quick` (about a minute)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import microsched
from conftest import REPO
from microsched.reproduce import SweepSpec

HARVEST = REPO / "experiments" / "harvest"


def test_sweep_is_generated_by_gen_py(tmp_path):
    before = (HARVEST / "sweep.toml").read_text()
    subprocess.run([sys.executable, str(HARVEST / "gen.py")], check=True)
    assert (HARVEST / "sweep.toml").read_text() == before, "sweep.toml is stale: run experiments/harvest/gen.py"


def test_every_point_of_the_sweep_validates():
    from microsched.sweep.engine import validate_points

    spec = SweepSpec.load(HARVEST / "sweep.toml", quick=True)
    points = spec.points()
    assert len(points) == 88
    validate_points(spec, points)


def test_short_run_reports_the_harvest_section():
    res = microsched.run(HARVEST / "base.toml", overrides=["duration_ms=200", "warmup_ms=50",
                                                          "policy.allocator.kind=harvest_static",
                                                          "policy.allocator.buffer=2"])
    s = res.summary
    h = s["harvest"]
    assert h["buffer_mean"] == pytest.approx(2.0)
    assert h["lends"] > 0 and h["evictions"] > 0 and h["evict_us"] == 30.0
    assert s["be_cores_mean"] > 3.0  # 8 cores, ~0.75 busy, buffer 2
    alone = microsched.run(HARVEST / "base.toml", overrides=["duration_ms=200", "warmup_ms=50",
                                                            "policy.allocator.kind=static"]).summary
    assert "harvest" not in alone


def test_bad_parameters_name_their_field():
    for key, value in [("policy.allocator.min_buffer", 9), ("policy.allocator.window_ms", 0),
                       ("policy.allocator.mechanism.lend_us", -1), ("load.on_off.duty", 0)]:
        with pytest.raises(Exception) as e:
            microsched.run(HARVEST / "base.toml", overrides=[f"{key}={value}", "duration_ms=10"])
        assert key in str(e.value), str(e.value)
