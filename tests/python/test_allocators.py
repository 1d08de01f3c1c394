"""Dynamic core allocation on the simulator (issue 3) and `microsched reproduce allocators`.

Scenario tests: 16 cores, exponential 10 µs requests, per-core queues with stealing, 100
sessions, RTT 10 µs, no overload control (experiments/allocators/base.toml), at CoreSync's low,
medium and high loads 0.2 / 0.5 / 0.8, fixed seeds, 200 ms runs. Every policy sees the same
requests for a given seed (common random numbers), so the comparisons are paired. "shenango" is
the CoreSync artifact's (Caladan's `simple` policy with the delay rule), "caladan" the `ias`
policy, as the sweep runs them.

What is asserted about the model is what holds robustly in it (directions with a margin over
the seeds' spread). How close the paper's numbers come is the reproduction's verdict
(claims.json), asserted here only as the verdict model's contract: every claim declared, model
checks passed, and every claim that is not reproduced carries a cause read from the run.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path

import pandas as pd
import pytest

import microsched
from conftest import REPO, run_cli
from microsched.reproduce import SpecError, SweepSpec, mean_ci95
from microsched.reproduce.allocators import CLAIMS, Data
from microsched.reproduce.claims import (CHECK, DIRECTION, MODEL_CHECK, NOT_REPRODUCED, OUT_OF_REGIME, REPRODUCED,
                                         VERDICTS, check_claims, judge)

BASE = REPO / "experiments" / "allocators" / "base.toml"
SWEEP = REPO / "experiments" / "allocators" / "sweep.toml"
LOADS = (0.2, 0.5, 0.8)
SHORT = ["duration_ms=200", "warmup_ms=10"]
DYNAMIC = ("shenango", "shenango-original", "caladan", "caladan-5", "caladan-10", "caladan-20", "utilization_range",
           "delay_range", "delay_range-1-4")
REACTIVE = ("shenango", "caladan")
PROACTIVE = ("utilization_range", "delay_range", "delay_range-1-4")


@lru_cache(maxsize=None)
def variant_sets() -> dict[str, list[str]]:
    """The allocator settings of every variant, exactly as the reproduction runs them."""
    return {v.name: list(v.set) for v in SweepSpec.load(SWEEP).variants}


@lru_cache(maxsize=None)
def summary(variant: str, load: float, seed: int = 1, extra: tuple[str, ...] = ()) -> dict:
    ovr = [*SHORT, f"load.fraction={load}", *variant_sets()[variant], *extra]
    return microsched.run(BASE, seed=seed, overrides=ovr).summary


def cores(variant: str, load: float, seed: int = 1) -> float:
    return summary(variant, load, seed)["cores"]["allocated_mean"]


def p99(variant: str, load: float, seed: int = 1) -> float:
    return summary(variant, load, seed)["latency_us"]["p99"]


# ---------------------------------------------------------------------------------------------
# scenario tests


@pytest.mark.parametrize("load", LOADS)
def test_every_dynamic_policy_allocates_fewer_cores_than_static(load):
    static = cores("static", load)
    assert static == pytest.approx(16.0, abs=1e-9)
    for v in DYNAMIC:
        got = cores(v, load)
        # the work needs load × 16 busy cores; a dynamic policy stays below 16 by far more than the
        # seeds' spread (~0.01 cores); the closest is Caladan with a 20 µs poll at load 0.8 (~15.6)
        assert got < static - 0.25, f"{v} at load {load}: {got:.2f} cores, static {static}"
        assert got >= summary(v, load)["cores"]["busy_mean"] - 1e-9


@pytest.mark.parametrize("load", LOADS)
def test_proactive_policies_allocate_more_cores_than_reactive(load):
    # The paper's settings (utilization 75-95 %, delay 0.5-1 µs). Seed-to-seed noise of the mean
    # allocation is ~0.03 cores, so 0.1 is several noise widths.
    reactive = max(cores(r, load) for r in REACTIVE)
    for p in [p for p in PROACTIVE if p != "delay_range-1-4"]:
        assert cores(p, load) > reactive + 0.1, (
            f"{p} at load {load}: {cores(p, load):.3f} cores, reactive max {reactive:.3f}")


@pytest.mark.parametrize("load", LOADS)
def test_proactive_policies_have_lower_p99_than_shenango(load):
    # Mean over three seeds; the margin is 5-20 % here (a p99 histogram bucket is ~1 %).
    sh = sum(p99("shenango", load, s) for s in (1, 2, 3)) / 3
    for p in ("utilization_range", "delay_range"):
        got = sum(p99(p, load, s) for s in (1, 2, 3)) / 3
        assert got < 0.97 * sh, f"{p} p99 {got:.1f} µs, shenango {sh:.1f} µs at load {load}"


@pytest.mark.parametrize("load", LOADS)
def test_longer_caladan_poll_keeps_more_cores(load):
    # Fig. 1's knob: 2 -> 5 -> 10 -> 20 µs of fruitless polling before a core parks.
    got = [cores(v, load) for v in ("caladan", "caladan-5", "caladan-10", "caladan-20")]
    assert all(b > a + 0.1 for a, b in zip(got, got[1:])), got


@pytest.mark.parametrize("variant", ["static", *DYNAMIC])
@pytest.mark.parametrize("load", LOADS)
def test_best_effort_plus_lc_is_the_machine_without_allocation_delay(variant, load):
    s = summary(variant, load, 1, ("server.allocation_delay_us=0",))
    total = s["cores"]["allocated_mean"] + s["be_cores_mean"]
    assert total == pytest.approx(16.0, abs=1e-9), f"LC {s['cores']['allocated_mean']} + BE {s['be_cores_mean']}"
    assert s["core_time"]["transition_ns"] == 0


@pytest.mark.parametrize("variant", DYNAMIC)
@pytest.mark.parametrize("load", LOADS)
def test_best_effort_plus_lc_is_the_machine_with_allocation_delay(variant, load):
    # warm-up 0: the summary's window is the whole run, so core_time (whole run) applies to it.
    s = summary(variant, load, 1, ("warmup_ms=0",))
    window_ns = s["duration_s"] * 1e9
    in_transition = s["core_time"]["transition_ns"] / window_ns
    total = s["cores"]["allocated_mean"] + s["be_cores_mean"]
    assert total == pytest.approx(16.0, abs=1e-9)
    assert in_transition > 0, "with a 5 µs allocation delay, some core time is spent in transition"
    assert s["cores"]["transition_mean"] == pytest.approx(in_transition, rel=1e-12)
    ct = s["core_time"]
    assert ct["busy_ns"] + ct["search_ns"] + ct["parked_ns"] + ct["transition_ns"] == 16 * round(window_ns)


def test_static_gives_nothing_to_best_effort():
    for load in LOADS:
        s = summary("static", load)
        assert s["be_cores_mean"] == 0.0
        assert s["cpu_utilization"] == pytest.approx(1.0)


# ---------------------------------------------------------------------------------------------
# the reproduction command


@pytest.fixture(scope="module")
def quick_run(all_quick) -> tuple[Path, None]:
    """The quick reproduction, from the suite's one `reproduce --all --quick` run (the same
    deterministic runs as `reproduce allocators --quick`, which test_robust's resume test runs
    on its own and whose console output it checks)."""
    return all_quick / "allocators", None


def test_reproduce_quick_writes_results_figures_and_claims(quick_run):
    out, _ = quick_run
    for f in ("results.parquet", "aggregate.parquet", "claims.json", "meta.json",
              "latency_vs_utilization.png", "cores_vs_load.png"):
        assert (out / f).is_file(), f
        assert (out / f).stat().st_size > 0, f
    assert (out / "latency_vs_utilization.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    df = pd.read_parquet(out / "results.parquet")
    spec = SweepSpec.load(SWEEP, quick=True)
    assert len(spec.seeds) >= 3, "the quick profile runs at least 3 seeds, so every verdict has a CI"
    assert len(df) == len(spec.variants) * 3 * len(spec.seeds)  # variants × loads 0.2/0.5/0.8 × seeds
    for col in ("variant", "load.fraction", "seed", "policy.allocator.kind", "latency_us.p99",
                "cpu_utilization", "cores.allocated_mean", "be_cores_mean", "core_time.transition_ns",
                "requests.completed", "requests.generated", "core_time.search_ns"):
        assert col in df.columns, col
    assert set(df["load.fraction"]) == set(LOADS)
    assert set(df["variant"]) == {v.name for v in spec.variants}
    assert df["duration_s"].eq(0.5).all(), "--quick runs 500 ms"

    agg = pd.read_parquet(out / "aggregate.parquet")
    assert {"latency_us.p99", "latency_us.p99.ci95", "n"} <= set(agg.columns)
    assert len(agg) == len(df) / len(spec.seeds)  # one row per point


def test_reproduce_quick_claims_follow_the_verdict_model(quick_run):
    out, _ = quick_run
    claims = json.loads((out / "claims.json").read_text(encoding="utf-8"))
    check_claims(claims)
    by_id = {c["id"]: c for c in claims}
    assert list(by_id) == [s.id for s in CLAIMS], "every declared claim is judged, in order"
    for c, spec in zip(claims, CLAIMS):
        assert c["verdict"] in VERDICTS and c["kind"] == spec.kind and c["paper_ref"] == spec.paper_ref
        assert c["paper"] == (None if spec.paper is None else pytest.approx(spec.paper))
        assert c["measured"] is None or (isinstance(c["measured"], (int, float)) and math.isfinite(c["measured"]))
        if spec.kind != CHECK:
            assert c["n"] == 3 and isinstance(c["ci95"], (int, float)), c["id"]  # a CI over the 3 seeds
        if c["verdict"] in (DIRECTION, NOT_REPRODUCED, OUT_OF_REGIME):
            cause = c["cause"]
            assert cause["text"] and cause["evidence"], c["id"]
    # The paper's ratios are judged by their number: the tolerance band is the paper's ×/÷ 1.25,
    # narrowed to the ratios whose effect (1 − ratio) is within 0.5–1.5× the paper's.
    cal = by_id["caladan-lower-p99-than-shenango"]
    assert cal["paper"] == pytest.approx(1.16 / 1.7)
    effect = 1 - 1.16 / 1.7
    assert cal["band"] == [pytest.approx(1.16 / 1.7 / 1.25, abs=1e-4), pytest.approx(1 - 0.5 * effect, abs=1e-4)]
    assert cal["derived_at_one_point"] is True and cal["verdict"] != "derived"
    # numbers the paper composes from statements at different points are shown, not judged
    assert by_id["proactive-lower-p99/delay_range"]["verdict"] == "derived"
    # The model checks hold exactly, and say so as model checks (not paper claims).
    for cid in ("be-plus-lc-equals-machine", "core-time-conservation"):
        assert by_id[cid]["verdict"] == MODEL_CHECK and by_id[cid]["passed"] is True
    assert by_id["be-plus-lc-equals-machine"]["measured"] < 1e-6
    assert by_id["core-time-conservation"]["measured"] == 0
    # Robust in the model (margins of many CIs): dynamic allocators give cores away.
    for load in LOADS:
        assert by_id[f"dynamic-fewer-cores@{load}"]["verdict"] == REPRODUCED


def test_a_cause_is_read_from_the_run(quick_run):
    """Change the run's numbers and the cause changes with them: static's p99 (the floor the
    Caladan / Shenango p99 cause cites) and Caladan's p99 at load 0.5."""
    out, _ = quick_run
    df = pd.read_parquet(out / "results.parquet")
    spec = next(s for s in CLAIMS if s.id == "caladan-lower-p99-than-shenango")

    def cause_of(runs: pd.DataFrame) -> dict:
        c = judge(spec, Data(runs=runs, run_ns=None))
        assert c.verdict != REPRODUCED or "cause" not in c.extra
        return c.extra.get("cause") or {}

    # a run where Caladan is 1.3x slower than measured: certainly not the paper's 0.68
    slow = df.copy()
    at = (slow["variant"] == "caladan") & (slow["load.fraction"] == 0.5)
    slow.loc[at, "latency_us.p99"] *= 1.3
    a = cause_of(slow)
    floor = slow.copy()
    st = (floor["variant"] == "static") & (floor["load.fraction"] == 0.5)
    floor.loc[st, "latency_us.p99"] *= 0.8
    b = cause_of(floor)
    assert a["text"] != b["text"]
    assert b["evidence"]["static_p99"] == pytest.approx(0.8 * a["evidence"]["static_p99"])
    for c in (a, b):
        assert f"{c['evidence']['static_p99']:.1f} µs" in c["text"]
    assert b["evidence"]["floor"] < a["evidence"]["floor"]


def test_reproduce_list_names_the_paper_and_figure():
    r = run_cli("reproduce", "--list")
    assert r.code == 0, r.err
    assert "allocators" in r.out and "CoreSync" in r.out and "Fig. 1" in r.out


@pytest.mark.parametrize("args, fragments", [
    (["reproduce", "nope"], ["unknown reproduction 'nope'", "allocators"]),
    (["reproduce"], ["NAME is required", "allocators"]),
    (["reproduce", "allocators", "--jobs", "0"], ["--jobs"]),
    (["reproduce", "allocators", "--seeds", "x"], ["--seeds"]),
    (["reproduce", "allocators", "--condition", "slow-wake"], ["'allocators' has no conditions"]),
    (["reproduce", "coresync", "--condition", "nope"], ["unknown condition 'nope'", "slow-wake", "keep-cut", "capped-pool", "bursty-clients"]),
])
def test_reproduce_bad_input_exits_2_with_one_line(args, fragments, tmp_path):
    r = run_cli(*args, "--out", tmp_path / "o") if "allocators" in args else run_cli(*args)
    assert r.code == 2, r.err
    lines = r.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("microsched: error: "), r.err
    for f in fragments:
        assert f in lines[0]
    assert r.out == ""


# ---------------------------------------------------------------------------------------------
# the spec format and the statistics


def test_spec_points_cross_variants_grid_and_seeds():
    spec = SweepSpec.load(SWEEP, quick=True, seeds=2)
    pts = spec.points()
    assert len(pts) == len(spec.variants) * 3 * 2
    p = next(p for p in pts if p.params["variant"] == "caladan-10" and p.params["load.fraction"] == 0.5)
    assert p.params["policy.allocator.poll_us"] == 10
    assert "load.fraction=0.5" in p.overrides and "duration_ms=500" in p.overrides


@pytest.mark.parametrize("text, field", [
    ('base = "base.toml"\nbogus = 1\n', "bogus"),
    ('base = "base.toml"\n[grid]\n"load.fraction" = []\n', "grid.load.fraction"),
    ('base = "missing.toml"\n', "base"),
    ('base = "base.toml"\nseeds = 0\n', "seeds"),
    ('base = "base.toml"\n[[variants]]\nname = "a"\nset = "x=1"\n', "variants[0].set"),
])
def test_malformed_spec_names_the_field(tmp_path, text, field):
    (tmp_path / "base.toml").write_text(BASE.read_text(encoding="utf-8"), encoding="utf-8")
    p = tmp_path / "spec.toml"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError, match=field.replace("[", r"\[").replace("]", r"\]")):
        SweepSpec.load(p)


def test_mean_ci95_uses_student_t():
    m, ci, n = mean_ci95([1.0, 2.0, 3.0])
    assert (m, n) == (2.0, 3)
    # t(0.975, 2 df) = 4.302652729911275 (tables print 4.303).
    assert ci == pytest.approx(4.302652729911275 * 1.0 / math.sqrt(3), rel=1e-9)
    m, ci, n = mean_ci95([5.0])
    assert m == 5.0 and n == 1 and math.isnan(ci)
