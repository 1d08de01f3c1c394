"""Dynamic core allocation on the simulator (issue 3) and `microsched reproduce allocators`.

Scenario tests: 16 cores, exponential 10 µs requests, per-core queues with stealing, 100
sessions, RTT 10 µs, no overload control (experiments/allocators/base.toml), at CoreSync's low,
medium and high loads 0.2 / 0.5 / 0.8, fixed seeds, 200 ms runs. Every policy sees the same
requests for a given seed (common random numbers), so the comparisons are paired.

What is asserted is what holds robustly in our model (checked over seeds 1–6 and run lengths
100–1000 ms, see the `allocators` reproduction's claims.json). Two claims of the brief do not
hold as stated, and are reported by the reproduction (holds = false) instead of asserted:

* "proactive p99 < Shenango p99" holds for Utilization Range (ratio ≤ 0.96 at every load), but
  Delay Range 0.5–1 µs only ties Shenango at load 0.2 (ratio 0.99–1.02 depending on the seed),
  and Delay Range 1–4 µs is ~5 % *worse* than Shenango at every load: with a 1–4 µs target it
  keeps only 0.2–0.3 more cores than the reactive policies. Asserted here: Utilization Range at
  all three loads, Delay Range 0.5–1 µs at 0.5 and 0.8 on the mean over three seeds (margin 2–3 %).
* "BE cores + LC allocated = machine": a core being handed to the LC application
  (server.allocation_delay_us = 5 µs) is counted as LC-allocated during its allocation delay
  (`cores.transition_mean` says how much of the allocation that is). Asserted here: BE + LC =
  machine exactly, with and without an allocation delay.
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
from microsched.reproduce.claims import REQUIRED_KEYS, check_claims

BASE = REPO / "experiments" / "allocators" / "base.toml"
SWEEP = REPO / "experiments" / "allocators" / "sweep.toml"
LOADS = (0.2, 0.5, 0.8)
SHORT = ["duration_ms=200", "warmup_ms=10"]
DYNAMIC = ("shenango", "caladan", "caladan-5", "caladan-10", "utilization_range", "delay_range", "delay_range-1-4")
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
        # the work needs load × 16 busy cores; a dynamic policy must stay clearly below 16
        assert got < static - 1.0, f"{v} at load {load}: {got:.2f} cores, static {static}"
        assert got >= summary(v, load)["cores"]["busy_mean"] - 1e-9


@pytest.mark.parametrize("load", LOADS)
def test_proactive_policies_allocate_more_cores_than_reactive(load):
    # The paper's settings (utilization 75-95 %, delay 0.5-1 µs). Seed-to-seed noise of the mean
    # allocation is ~0.02 cores, so 0.1 is five noise widths. Delay range 1-4 µs keeps only
    # 0.03-0.2 more cores (waking cores count as allocated): reported by the reproduction only.
    reactive = max(cores(r, load) for r in REACTIVE)
    for p in [p for p in PROACTIVE if p != "delay_range-1-4"]:
        assert cores(p, load) > reactive + 0.1, (
            f"{p} at load {load}: {cores(p, load):.3f} cores, reactive max {reactive:.3f}")


@pytest.mark.parametrize("load", LOADS)
def test_utilization_range_has_lower_p99_than_shenango(load):
    # Ratio 0.87-0.96 over seeds 1-6 at these loads.
    assert p99("utilization_range", load) < p99("shenango", load)


@pytest.mark.parametrize("load", [0.5, 0.8])
def test_delay_range_has_lower_p99_than_shenango_at_medium_and_high_load(load):
    # Mean over three seeds (per-seed ratios 0.97-1.00); at load 0.2 the two tie (0.99-1.02,
    # reported by the reproduction, not asserted), and delay range 1-4 µs is ~5 % worse.
    dr = sum(p99("delay_range", load, s) for s in (1, 2, 3)) / 3
    sh = sum(p99("shenango", load, s) for s in (1, 2, 3)) / 3
    assert dr < sh, f"delay_range p99 {dr:.1f} µs, shenango {sh:.1f} µs at load {load}"


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
def quick_run(tmp_path_factory) -> tuple[Path, object]:
    out = tmp_path_factory.mktemp("repro") / "allocators"
    r = run_cli("reproduce", "allocators", "--quick", "--out", out, "--jobs", "2")
    return out, r


def test_reproduce_quick_writes_results_figures_and_claims(quick_run):
    out, r = quick_run
    assert r.code == 0, r.err
    for f in ("results.parquet", "aggregate.parquet", "claims.json", "meta.json",
              "latency_vs_utilization.png", "cores_vs_load.png"):
        assert (out / f).is_file(), f
        assert (out / f).stat().st_size > 0, f
    assert (out / "latency_vs_utilization.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "claims hold" in r.out

    df = pd.read_parquet(out / "results.parquet")
    spec = SweepSpec.load(SWEEP, quick=True)
    assert len(df) == len(spec.variants) * 3 * 1  # variants × loads 0.2/0.5/0.8 × one seed
    for col in ("variant", "load.fraction", "seed", "policy.allocator.kind", "latency_us.p99",
                "cpu_utilization", "cores.allocated_mean", "be_cores_mean", "core_time.transition_ns"):
        assert col in df.columns, col
    assert set(df["load.fraction"]) == set(LOADS)
    assert set(df["variant"]) == {v.name for v in spec.variants}
    assert df["duration_s"].eq(0.05).all(), "--quick runs 50 ms"

    agg = pd.read_parquet(out / "aggregate.parquet")
    assert {"latency_us.p99", "latency_us.p99.ci95", "n"} <= set(agg.columns)
    assert len(agg) == len(df)  # one seed: one row per point


def test_reproduce_quick_claims_are_well_formed(quick_run):
    out, _ = quick_run
    claims = json.loads((out / "claims.json").read_text(encoding="utf-8"))
    check_claims(claims)
    assert claims, "at least one claim"
    for c in claims:
        assert set(REQUIRED_KEYS) <= c.keys()
        assert isinstance(c["id"], str) and isinstance(c["claim"], str)
        assert c["paper"] is None or isinstance(c["paper"], (int, float))
        assert c["measured"] is None or (isinstance(c["measured"], (int, float)) and math.isfinite(c["measured"]))
        assert isinstance(c["holds"], bool)
    by_id = {c["id"]: c for c in claims}
    for load in LOADS:
        assert by_id[f"dynamic-fewer-cores@{load}"]["holds"] is True
    for p in ("utilization_range", "delay_range"):
        assert by_id[f"proactive-more-cores/{p}"]["holds"] is True
    assert by_id["proactive-lower-p99/utilization_range"]["holds"] is True
    assert by_id["core-time-conservation"]["holds"] is True
    gap = by_id["be-plus-lc-equals-machine"]
    assert gap["holds"] is True and gap["measured"] < 1e-6


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
    (["reproduce", "coresync", "--condition", "nope"], ["unknown condition 'nope'", "slow-wake", "keep-cut", "capped-pool"]),
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
    assert "load.fraction=0.5" in p.overrides and "duration_ms=50" in p.overrides


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
