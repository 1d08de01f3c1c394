"""Synergy and its baselines, scaled down (issue 15): the paper's qualitative claims on short
seeded runs of the shipped scenarios, and the max-load-at-SLO finder."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import microsched
from microsched.maxload import max_load, metric_value
from microsched.reproduce.spec import SweepSpec

REPO = Path(__file__).resolve().parents[2]
EXTREME = REPO / "experiments/synergy/extreme.toml"
SHORT = ["duration_ms=30", "warmup_ms=5"]


@pytest.fixture(scope="module")
def systems() -> dict[str, list[str]]:
    spec = SweepSpec.load(REPO / "experiments/synergy/sweep.toml")
    return {v.name: list(v.set) for v in spec.variants}


def _run(variant_sets: list[str], load: float) -> dict:
    return microsched.run(EXTREME, seed=1, overrides=[*SHORT, *variant_sets, f"load.fraction={load}"]).summary


def test_synergy_has_the_lowest_tail_slowdown_on_extreme_at_high_load(systems):
    syn = _run(systems["extreme/synergy"], 0.9)["slowdown"]["p999"]
    for other in ("shinjuku", "shinjuku-ci", "concord", "d-fcfs"):
        o = _run(systems[f"extreme/{other}"], 0.9)["slowdown"]["p999"]
        assert syn * 1.3 < o, f"synergy {syn} vs {other} {o}"


def test_synergy_sustains_more_load_than_shinjuku_on_extreme(systems):
    kw = dict(slo=50, seeds=[1], tol=0.02, lo=0.3)
    syn = max_load(EXTREME, overrides=[*SHORT, *systems["extreme/synergy"]], **kw)
    shj = max_load(EXTREME, overrides=[*SHORT, *systems["extreme/shinjuku"]], **kw)
    assert syn["load"] > shj["load"] + 0.05, (syn["load"], shj["load"])
    assert syn["rps"] == pytest.approx(syn["load"] * syn["capacity_rps"])


def test_conditional_preemption_avoids_most_interrupts(systems):
    # The paper's Fig. 7 claim, on ZippyDB.
    s = _run(systems["zippydb/synergy"], 0.8)["sched"]
    assert s["avoided_preemptions"] / (s["avoided_preemptions"] + s["preemptions"]) > 0.9
    off = _run([*systems["zippydb/synergy"], "policy.sched.conditional=false"], 0.8)["sched"]
    assert off["avoided_preemptions"] == 0 and off["preemptions"] > 5 * s["preemptions"]


def test_metric_paths_and_their_errors():
    s = {"slowdown": {"p999": 3.0}, "by_type": [{"name": "short", "slowdown": {"p999": 2.0}}]}
    assert metric_value(s, "slowdown.p999") == 3.0
    assert metric_value(s, "by_type.short.slowdown.p999") == 2.0
    with pytest.raises(ValueError, match="no section named 'long'"):
        metric_value(s, "by_type.long.slowdown.p999")
    with pytest.raises(ValueError, match="no 'p42'"):
        metric_value(s, "slowdown.p42")


def test_maxload_cli(tmp_path):
    cmd = [sys.executable, "-m", "microsched", "maxload", str(EXTREME), "--seeds", "1", "--tol", "0.05",
           "--set", "duration_ms=10", "--set", "warmup_ms=2", "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    r = json.loads(out)
    assert 0.05 <= r["load"] <= 1.0 and r["metric"] == "slowdown.p999"
    bad = subprocess.run(cmd[:-1] + ["--metric", "nope.p99"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("microsched: error: metric 'nope.p99'")


def test_shinjuku_picks_the_head_with_the_largest_wait_over_slo(systems):
    # Equal SLOs: the oldest head (c-FCFS order); SLOs proportional to service: shorts first.
    high = [*systems["high/shinjuku"], "workload.types.0.name=short"]
    base = microsched.run(EXTREME, seed=1, overrides=[*SHORT, *high, "load.fraction=0.9"]).summary
    slo = microsched.run(EXTREME, seed=1, overrides=[*SHORT, *high, "load.fraction=0.9",
                                                    "policy.sched.slo_us=[50, 5000]"]).summary
    assert base["sched"]["queue_policy"] == "shinjuku"
    assert slo["by_type"][0]["slowdown"]["p999"] * 2 < base["by_type"][0]["slowdown"]["p999"]
    from microsched.api import validate

    with pytest.raises(ValueError, match=r"policy.sched.slo_us: 3 values for 2 request types"):
        validate(EXTREME, overrides=[*high, "policy.sched.slo_us=[1, 2, 3]"])


def test_darc_reserves_cores_and_is_not_work_conserving(systems):
    # Extreme: 2 cores for the shorts, 12 for the longs, which never use the shorts' cores.
    s = microsched.run(EXTREME, seed=1, overrides=[*SHORT, *systems["extreme/darc"], "load.fraction=0.4"]).summary
    assert s["sched"]["queue_policy"] == "darc"
    r = s["requests"]
    assert r["generated"] == r["completed"] + r["dropped"] + r["in_flight"]
    u = s["sched"]["worker_utilization"]
    assert u["max"] - u["min"] > 0.3, u  # the reserved short cores idle while long cores work


def test_concord_dispatcher_runs_requests_in_its_slack_and_tq_knobs_validate(systems):
    # High at load 0.9: every JBSQ(2) mailbox is often full, so Concord's dispatcher runs some
    # requests itself; with dispatcher_work = false it runs none (and the field is left out).
    high = REPO / "experiments/synergy/high.toml"
    on = microsched.run(high, seed=1, overrides=[*SHORT, *systems["high/concord"], "load.fraction=0.9"]).summary
    assert on["sched"]["queue_policy"] == "concord"
    assert on["sched"]["dispatcher_requests"] > 0 and on["sched"]["dispatcher_work_ns"] > 0
    off = microsched.run(high, seed=1, overrides=[*SHORT, *systems["high/concord"], "load.fraction=0.9",
                                                   "policy.sched.dispatcher_work=false"]).summary
    assert "dispatcher_requests" not in off["sched"]
    # Tiny Quanta's artifact knobs are checked with their field named.
    with pytest.raises(Exception, match="ring_poll_quanta"):
        microsched.run(EXTREME, overrides=[*SHORT, *systems["extreme/tq"], "policy.sched.ring_poll_quanta=0"])
    with pytest.raises(Exception, match="policy.sched.jbsq"):
        microsched.run(EXTREME, overrides=[*SHORT, *systems["extreme/concord"], "policy.sched.jbsq=0"])
