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
    assert len(points) == 124  # 88 + 27 IRQ (Fig. 8, Table 1) + 9 three-Primary (Fig. 5)
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


def _variant(name: str) -> list[str]:
    spec = SweepSpec.load(HARVEST / "sweep.toml", quick=True)
    return list(next(v for v in spec.variants if v.name == name).set)


def test_three_primaries_have_their_own_nodes_and_columns():
    from microsched.sweep.runner import flatten

    res = microsched.run(HARVEST / "base.toml", overrides=_variant("three/mid/acbf") + ["duration_ms=200", "warmup_ms=50"])
    s = res.summary
    assert [a["name"] for a in s["applications"]] == ["memcached", "mysql", "xapian"]
    assert len(s["nodes"]) == 3 and s["core_time"]["total_ns"] == 3 * 8 * 250_000_000
    assert s["be_cores_mean"] == pytest.approx(sum(n["be_cores_mean"] for n in s["nodes"]))
    row = flatten(s)
    for a in ("memcached", "mysql", "xapian"):
        assert f"applications.{a}.latency_us.p99" in row
    assert "nodes.2.be_cores_mean" in row and "nodes.2.harvest.buffer_mean" in row


def test_irq_variants_report_the_irq_section():
    spread = microsched.run(HARVEST / "base.toml", overrides=_variant("memcached/mid/acbf-irq") + ["duration_ms=200"]).summary
    steered = microsched.run(HARVEST / "base.toml",
                             overrides=_variant("memcached/mid/acbf-irq-steer") + ["duration_ms=200"]).summary
    assert spread["irq"]["steering"] == "spread" and spread["irq"]["in_service_ns"] > 0
    assert steered["irq"]["in_service_ns"] == 0 and steered["irq"]["secondary_cores_mean"] == pytest.approx(0.6)
    with pytest.raises(Exception) as e:
        microsched.run(HARVEST / "base.toml", overrides=["server.irq.steering=nic", "duration_ms=10"])
    assert "server.irq.steering" in str(e.value)
