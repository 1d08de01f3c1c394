"""`microsched reproduce load-shift` and `microsched reproduce collapse` (issue 4): the simulation
study "core allocation vs overload control", Fig. 1 and Fig. 2, on their --quick profiles.

The quick runs use fixed seeds (seed 1, common random numbers across variants), so their
numbers are deterministic; the bounds below are the qualitative claims with margins wide enough
to survive small model changes, each bound's reason beside it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import REPO, run_cli
from microsched.api import validate
from microsched.reproduce.claims import REQUIRED_KEYS, check_claims
from microsched.reproduce.collapse import cycle_period_us
from microsched.reproduce.loadshift import binned

PNG = b"\x89PNG\r\n\x1a\n"


def _claims(out: Path) -> dict[str, dict]:
    claims = json.loads((out / "claims.json").read_text(encoding="utf-8"))
    check_claims(claims)
    assert claims
    for c in claims:
        assert set(REQUIRED_KEYS) <= c.keys()
        assert c["paper"] is None or isinstance(c["paper"], (int, float))
        assert c["measured"] is None or (isinstance(c["measured"], (int, float)) and math.isfinite(c["measured"]))
        assert isinstance(c["holds"], bool)
        if not c["holds"]:
            # `note` (the study's reasons) or `cause` (a measured mechanism, issue 12)
            assert c.get("note") or c.get("cause"), f"{c['id']}: a claim that does not hold explains why"
    return {c["id"]: c for c in claims}


def _files(out: Path, pngs: tuple[str, ...]) -> None:
    for f in ("results.parquet", "aggregate.parquet", "claims.json", "meta.json", "timeseries.parquet", *pngs):
        assert (out / f).is_file() and (out / f).stat().st_size > 0, f
    for f in pngs:
        assert (out / f).read_bytes()[:8] == PNG, f


# ---------------------------------------------------------------------------------------------
# load-shift (Fig. 1)


@pytest.fixture(scope="module")
def loadshift(tmp_path_factory):
    out = tmp_path_factory.mktemp("repro") / "load-shift"
    r = run_cli("reproduce", "load-shift", "--quick", "--out", out, "--jobs", "2")
    assert r.code == 0, r.err
    return out


def test_loadshift_quick_writes_results_figures_and_claims(loadshift):
    _files(loadshift, ("loadshift_timeseries.png", "loadshift_closeup.png"))
    df = pd.read_parquet(loadshift / "results.parquet")
    assert set(df["variant"]) == {"baseline", "fix", "baseline-init32"}
    assert df["seed"].eq(1).all()
    ts = pd.read_parquet(loadshift / "timeseries.parquet")
    for col in ("t_ms", "throughput_rps", "credit_pool", "cores_allocated", "queue_len", "variant", "seed"):
        assert col in ts.columns, col
    # the whole 100 ms schedule at 10 µs samples, per variant
    assert ts.groupby("variant").size().eq(10_000).all()
    assert ts["t_ms"].max() == pytest.approx(100.0)


def test_loadshift_quick_claims(loadshift):
    c = _claims(loadshift)
    imp = c["fix-throughput-improvement"]
    assert imp["paper"] == 7.0
    # Direction: the fix must beat the baseline (the magnitude is reported, holds or not).
    assert imp["measured"] > 0
    assert imp["holds"] == (3.5 <= imp["measured"] <= 14.0)
    # The baseline is slower to reach 80 % of capacity after the 25 ms shift than the fix (it does
    # not get there at all within the phase in our model). With the defaults of issue 12 item 6
    # the fix's cores churn and in the quick run it does not get there either (peak ~70 % of
    # capacity, ~20 of 32 cores allocated): the failure must carry that measured cause.
    ramp = c["baseline-slow-ramp"]
    assert ramp["baseline_censored"] is True and ramp["measured"] == 25.0
    assert ramp["holds"] or ("does not reach 80% of capacity" in ramp["cause"] and "tighter limit" in ramp["cause"] and ramp["fix_ms"] == 25.0), ramp
    # Bottom panel: most of the burst is dropped (measured ~0.9; bound 0.25 = "a significant portion").
    assert c["burst-dropped-cores-park"]["holds"] is True
    # Similar latency (the claim's band is [2/3, 1.5]): p99 ratio ~0.9 with the instant search and
    # the ungated ramp; with the defaults of issue 12 item 6 (probe search + drop-gated ramp) the
    # fix's cores churn and its p99 rises (~2.4 measured): a failure must carry its measured cause.
    lat = c["similar-latency"]
    assert lat["holds"] or "wake-ups per ms" in lat["cause"], lat


def test_binned_sums_counts_and_averages_levels():
    ts = pd.DataFrame({"t_ms": [0.05, 0.1, 0.15, 0.2], "throughput_rps": [1.0, 3.0, 5.0, 7.0],
                       "drops": [1, 2, 3, 4]})
    b = binned(ts, 0.1)
    assert b["t_ms"].tolist() == pytest.approx([0.1, 0.2])
    assert b["throughput_rps"].tolist() == [2.0, 6.0]
    assert b["drops"].tolist() == [3, 7]


# ---------------------------------------------------------------------------------------------
# collapse (Fig. 2)


@pytest.fixture(scope="module")
def collapse(tmp_path_factory):
    out = tmp_path_factory.mktemp("repro") / "collapse"
    r = run_cli("reproduce", "collapse", "--quick", "--out", out, "--jobs", "2")
    assert r.code == 0, r.err
    return out


def test_collapse_quick_writes_results_figures_and_claims(collapse):
    _files(collapse, ("collapse_timeseries.png", "collapse_vs_rtt.png"))
    df = pd.read_parquet(collapse / "results.parquet")
    assert set(df["variant"]) == {"baseline", "fix", "static"}
    assert set(df["network.rtt_us"]) == {5, 30}


def test_collapse_quick_claims(collapse):
    c = _claims(collapse)
    base = c["collapse@rtt30"]
    # The study: one core of 32 stays active (~3 % of capacity); we measure ~3 %. Below 25 % with
    # fewer than 8 cores is unambiguously "collapsed" (8× margin).
    assert base["holds"] is True and base["measured"] < 0.25
    assert base["cores_allocated_mean"] < 8
    fix = c["fix-no-collapse@rtt30"]
    # With the defaults (probe search + drop-gated ramp) the fix collapses too at RTT 30 µs in
    # the quick run (~0.31 measured: its cores churn, README "Work search"); a failure must carry
    # its measured cause. The model before the switch: test_collapse_fix_holds_with_instant_semantics.
    assert fix["min_pool"] == 128
    assert fix["holds"] or "wake-ups per ms" in fix["cause"], fix
    # A short RTT (5 µs) with the same pool does not collapse (~0.93 measured).
    assert c["short-rtt-no-collapse"]["holds"] is True
    # Static cores with the same pool: no collapse (the interaction needs the allocator).
    assert c["collapse-needs-core-allocation@rtt30"]["holds"] is True
    # The cycle is at least one round trip long (a burst's responses must travel back first).
    cyc = c["collapse-cycle@rtt30"]
    assert cyc["autocorrelation_at_period"] > 0 and cyc["measured"] >= 30


def test_cycle_period_of_a_periodic_signal():
    t = np.arange(1, 3001) * 1e-3  # 1 µs samples, in ms
    x = (np.sin(2 * np.pi * t * 1000 / 57) > 0.5).astype(float) * 20
    period, peak = cycle_period_us(pd.DataFrame({"t_ms": t, "queue_len": x}), 120)
    assert period == pytest.approx(57, abs=1) and peak > 0.5
    flat = pd.DataFrame({"t_ms": t, "queue_len": np.zeros_like(t)})
    assert all(math.isnan(v) for v in cycle_period_us(flat, 120))


def test_initial_pool_is_validated():
    base = REPO / "experiments" / "collapse" / "base.toml"
    assert validate(base)["policy"]["overload"]["initial_pool"] == 40
    with pytest.raises(ValueError, match=r"policy\.overload\.initial_pool: 0 is not allowed"):
        validate(base, ["policy.overload.initial_pool=0"])


def test_collapse_fix_holds_with_instant_semantics(tmp_path):
    """`--semantics instant` (instant search, ungated ramp: the model before issue 12 item 6):
    the fix (minimum pool 128) runs near capacity (~0.93 measured); > 0.7 is far from the
    collapse's 0.03 and leaves room for the AQM's drops at load 1.0."""
    out = tmp_path / "collapse-instant"
    r = run_cli("reproduce", "collapse", "--quick", "--semantics", "instant", "--out", out, "--jobs", "1")
    assert r.code == 0, r.err
    fix = _claims(out)["fix-no-collapse@rtt30"]
    assert fix["holds"] is True and fix["measured"] > 0.7 and fix["min_pool"] == 128
