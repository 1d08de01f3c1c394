"""Harvesting (HarvestContainers, issue 16) through the Python front: the reproduction's spec is
what gen.py writes and every point validates; a short run reports the `harvest` section; a
bad controller parameter names its dotted field. The controllers' properties are asserted on
seeded runs in crates/microsched-sim/tests/harvest.rs; the reproduction's claims run in
`microsched reproduce harvest --quick` (about a minute). The claims' verdicts are asserted on
synthetic results (claim_examples/harvest.py's paper world): the "p99 within 4 %" claims are
judged only where their control, a static buffer of 0, misses the bound, and causes are read from
the results."""

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
    # 90 (9 Primary × load points × 10 controllers) + 27 IRQ (Fig. 8, Table 1) + 12 three-Primary
    # (Fig. 5, §5.6) + 8 Memcached 80 k (Fig. 7, 11, 12) + 6 MySQL 5 k (Fig. 2) + 1 Xapian 2 k (Fig. 3)
    assert len(spec.variants) == 144 and len(points) == 144 * 3  # the quick profile runs 3 seeds
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


def test_the_cores_plot_gives_the_secondary_its_time_on_lc_cores():
    """Under harvest_cfs the Secondary runs on waking cores, which the time series leaves out of
    the allocated ones: the plot's best-effort line is the unallocated cores (its window mean is
    the summary's be_cores_mean) and adds up with the allocated line to the maximum, where the
    parked cores alone would show a sixth of it."""
    import numpy as np
    from microsched.plots import core_lines

    res = microsched.run(HARVEST / "base.toml", overrides=["duration_ms=1000", "policy.allocator.kind=harvest_cfs"])
    s, ts = res.summary, res.timeseries
    lines = dict(core_lines(s, ts))
    be = lines["best effort (parked + its time on LC cores)"]
    window = ts["t_ms"].to_numpy() > 400  # warmup_ms
    assert be[window].mean() == pytest.approx(s["be_cores_mean"], abs=1e-3)
    assert np.allclose(ts["cores_allocated"].to_numpy() + be, s["cores"]["max"])
    assert be[window].mean() > ts["cores_parked"].to_numpy()[window].mean() + 2.0
    lc_only = microsched.run(HARVEST / "base.toml", overrides=["duration_ms=100", "warmup_ms=20",
                                                              "policy.allocator.kind=static"])
    assert [lab for lab, _ in core_lines(lc_only.summary, lc_only.timeseries)] == ["allocated to LC", "busy", "parked (BE)"]


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


# ---------------------------------------------------------------------------------------------
# the claims (verdict model of issue 23) on synthetic results


def _claim(cid: str, df):
    from microsched.reproduce import harvest
    from microsched.reproduce.claims import judge

    return judge(next(s for s in harvest.CLAIMS if s.id == cid), df)


def _zero_buffer_meets_the_bound():
    """The paper world with a static buffer of 0 costing +1 % everywhere (no interference)."""
    from claim_examples.harvest import APPS, LEVELS, P, world

    ch = {f"{a}/{l}/static-0": {"latency_us.p99": P[a] * 1.01} for a in APPS for l in LEVELS}
    ch.update({f"three/{l}/static-0": {f"applications.{a}.latency_us.p99": P[a] * 1.01 for a in APPS} for l in LEVELS})
    ch.update({"memcached/80k/static-0": {"latency_us.p99": 80.0 * 1.01}, "mysql/5k/static-0": {"latency_us.p99": 411 * 1.01}})
    return world(ch)


P99_CLAIMS = ("p99-within-4pct/acbf", "p99-within-4pct/acbf-artifact", "three-primaries-p99-within-4pct/acbf",
              "three-primaries-p99-within-4pct/acbf-artifact", "fig7-p99-protected@memcached-80k",
              "fig11-buffer-6-protects@memcached-80k", "fig2-harvest-same-p99@mysql-5k")


@pytest.mark.parametrize("cid", P99_CLAIMS)
def test_p99_claims_are_out_of_regime_when_a_zero_buffer_meets_the_bound(cid):
    from claim_examples.harvest import PAPER

    assert _claim(cid, PAPER).verdict == "reproduced"
    c = _claim(cid, _zero_buffer_meets_the_bound())
    assert c.verdict == "out_of_regime"
    assert c.extra["cause"]["evidence"]["control"] == pytest.approx(1.01)
    assert "zero buffer" in c.extra["cause"]["text"] and "1.01" in c.extra["cause"]["text"]


def test_p99_claim_is_judged_only_where_the_control_misses():
    """MySQL- and Xapian-like: a buffer of 0 keeps p99 within 4 %, so a miss there is not judged
    (the model cannot tell); Memcached-like: it misses, so a miss there fails the claim."""
    from claim_examples.harvest import LEVELS, P, world

    quiet = {f"{a}/{l}/static-0": {"latency_us.p99": P[a] * 1.01} for a in ("mysql", "xapian") for l in LEVELS}
    c = _claim("p99-within-4pct/acbf", world({**quiet, "mysql/high/acbf": {"latency_us.p99": P["mysql"] * 1.1}}))
    assert c.verdict == "reproduced" and c.extra["judged_points"] == [f"memcached/{l}" for l in LEVELS]
    c = _claim("p99-within-4pct/acbf", world({**quiet, "memcached/mid/acbf": {"latency_us.p99": P["memcached"] * 1.1}}))
    assert c.verdict == "not_reproduced" and c.extra["at"] == "memcached/mid"
    assert c.extra["cause"]["evidence"]["at"] == "memcached/mid" and "memcached/mid" in c.extra["cause"]["text"]


def test_irq_steering_p99_is_out_of_regime_when_no_handler_reaches_a_held_core():
    from claim_examples.harvest import APPS, LEVELS, world

    df = world({f"{a}/{l}/acbf-irq-steer": {"irq.held_core_rate_per_s": 0.0} for a in APPS for l in LEVELS})
    c = _claim("irq-steering-keeps-p99-within-4pct", df)
    assert c.verdict == "out_of_regime" and "held Primary core" in c.extra["cause"]["text"]


def test_causes_are_read_from_the_results():
    """The same miss with other numbers in the run: the cause's text and evidence follow them."""
    from claim_examples.harvest import world

    def cause(wait, harvest):
        df = world({"mysql/5k/cfs-8": {"latency_us.p99": 411.0 * 1.65, "harvest.eviction_wait_ms": wait,
                                       "be_cores_mean": harvest}})
        c = _claim("fig2-cgroups-shares-p99@mysql-5k", df)
        assert c.verdict == "direction"
        return c.extra["cause"]

    a, b = cause(4000.0, 4.2), cause(900.0, 3.1)
    assert a["text"] != b["text"]
    assert a["evidence"]["wait_ms"] == pytest.approx(4000.0, rel=0.02) and "4,000" in a["text"]
    assert b["evidence"]["harvest"] == pytest.approx(3.1, rel=0.02) and "3.1" in b["text"]


def test_acbf_cause_says_what_the_run_shows():
    """The paper ACBF's cause: windows above the harvest window when lending measurably raises
    the all-busy fraction, the buffer's slow descent otherwise (both from the run's numbers)."""
    from claim_examples.harvest import APPS, LEVELS, world

    low = {f"{a}/{l}/acbf": {"be_cores_mean": lambda h: h * 0.4} for a in APPS for l in LEVELS}
    same = world({**low, "memcached/low/acbf": {"be_cores_mean": 2.4, "harvest.all_busy_fraction": 0.0001}})
    c = _claim("harvest-up-to-75pct/acbf", same)
    assert c.verdict == "not_reproduced" and "not measurably more" in c.extra["cause"]["text"]
    above = world({**low, "memcached/low/acbf": {"be_cores_mean": 2.4, "harvest.all_busy_fraction": 0.01}})
    c = _claim("harvest-up-to-75pct/acbf", above)
    assert "grow the buffer back" in c.extra["cause"]["text"]
    assert c.extra["cause"]["evidence"]["acbf_lending"] == pytest.approx(0.01, rel=0.02)


def test_every_claim_not_reproduced_carries_evidence():
    from claim_examples.harvest import EXAMPLES
    from microsched.reproduce import harvest
    from microsched.reproduce.claims import judge

    for spec in harvest.CLAIMS:
        c = judge(spec, EXAMPLES[spec.id][1])
        if c.verdict in ("direction", "not_reproduced", "out_of_regime"):
            assert c.extra["cause"]["evidence"], spec.id


# ---------------------------------------------------------------------------------------------
# issue 44: the IRQ load tied to the Primary's packets (conditions irq-per-request[-bully])


def test_irq_per_request_conditions_change_the_irq_variants_only():
    from microsched.reproduce import get

    repro = get("harvest")
    spec = SweepSpec.load(HARVEST / "sweep.toml", quick=True)
    per_request = "server.irq.per_request={handlers=3, cost_us=1}"
    for v in spec.variants:
        alone, bully = repro.condition("irq-per-request").sets(v), repro.condition("irq-per-request-bully").sets(v)
        if v.name.endswith(("-irq", "-irq-steer")):
            assert alone == ("server.irq.rate_per_s=0", per_request) and bully == (per_request,), v.name
        else:
            assert alone == bully == (), v.name
    with pytest.raises(KeyError, match="irq-per-request"):
        repro.condition("no-such")
    # Under the condition the Primary's packets are the IRQ load: 3 handler runs per request.
    base = _variant("memcached/mid/acbf-irq") + ["duration_ms=300"]
    s = microsched.run(HARVEST / "base.toml", overrides=base + ["server.irq.rate_per_s=0", per_request]).summary
    assert s["irq"]["per_request_rate_per_s"] == pytest.approx(150_000, rel=0.05)
    assert s["irq"]["in_service_ns"] > 0
    doubled = microsched.run(HARVEST / "base.toml",
                             overrides=base + ["load.rps=100000", "server.irq.rate_per_s=0", per_request]).summary
    assert doubled["irq"]["per_request_rate_per_s"] == pytest.approx(300_000, rel=0.05)
    # Without it, no per-request key (the summary is the constant model's, unchanged).
    plain = microsched.run(HARVEST / "base.toml", overrides=base).summary
    assert "per_request_rate_per_s" not in plain["irq"]
    with pytest.raises(Exception, match="server.irq.per_request.handlers"):
        microsched.run(HARVEST / "base.toml", overrides=base + ["server.irq.per_request={handlers=0, cost_us=1}"])
