"""`microsched reproduce load-shift` and `microsched reproduce collapse` (issues 4 and 23): the
simulation study "core allocation vs overload control", Fig. 1 and Fig. 2, on their --quick
profiles (3 seeds, common random numbers across variants: deterministic numbers).

The claims are judged by the one verdict model (reproduce/claims.py): these tests check that
every declared claim is judged with the paper's number, that a claim that is not reproduced
carries a cause whose numbers come from the run (its evidence), that a cause follows the
results it is read from, and the measurement helpers. They do not pin a verdict the model could
honestly change; where they state a measured fact (the baseline collapses in the 0.2 phase under
this project's own semantics, `--semantics ours`), the reason is beside it. load-shift runs
under the study simulator's semantics by default (`--semantics study`).
"""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import REPO, run_cli
from microsched.api import run, validate
from microsched.reproduce import collapse as C
from microsched.reproduce import get
from microsched.reproduce import loadshift as L
from microsched.reproduce.claims import (DIRECTION, MODEL_CHECK, NOT_REPRODUCED, OUT_OF_REGIME, REPRODUCED,
                                         REQUIRED_KEYS, VERDICTS, check_claims, judge)
from microsched.reproduce.collapse import cycle_period_us
from microsched.reproduce.loadshift import binned
from microsched.reproduce.stats import Seeds

PNG = b"\x89PNG\r\n\x1a\n"


def _claims(out: Path, name: str) -> dict[str, dict]:
    claims = json.loads((out / "claims.json").read_text(encoding="utf-8"))
    check_claims(claims)
    declared = [s.id for s in get(name).claims]
    assert [c["id"] for c in claims] == declared, "every declared claim is judged, in order"
    for c in claims:
        assert set(REQUIRED_KEYS) <= c.keys()
        assert c["verdict"] in VERDICTS and c["verdict"] != MODEL_CHECK
        assert c["n"] == 3 or c["measured"] is None, f"{c['id']}: judged over the 3 quick seeds"
        assert c["measured"] is None or (isinstance(c["measured"], (int, float)) and math.isfinite(c["measured"]))
        assert c.get("quote") and c.get("paper_ref") and c.get("measure")
        assert "note" not in c, f"{c['id']}: no fixed prose: causes are read from the run"
        if c["verdict"] != REPRODUCED:
            cause = c["cause"]
            assert cause["text"] and cause["evidence"], c["id"]
    return {c["id"]: c for c in claims}


def _files(out: Path, names: tuple[str, ...]) -> None:
    for f in ("results.parquet", "aggregate.parquet", "claims.json", "meta.json", "timeseries.parquet", *names):
        assert (out / f).is_file() and (out / f).stat().st_size > 0, f
    for f in names:
        if f.endswith(".png"):
            assert (out / f).read_bytes()[:8] == PNG, f


# ---------------------------------------------------------------------------------------------
# load-shift (Fig. 1)


# The simulations the `loadshift` fixture's reproduction ran (it runs in this process: --jobs 1).
LOADSHIFT_SIMULATIONS: list[int] = []


@pytest.fixture(scope="module")
def loadshift(tmp_path_factory):
    """The quick reproduction under this project's own model (`--semantics ours`, a named
    semantics since the study simulator's is the default)."""
    import microsched.api as api

    out = tmp_path_factory.mktemp("load-shift-ours") / "load-shift"
    simulate = api._simulate

    def counted(*args, **kwargs):
        LOADSHIFT_SIMULATIONS.append(1)
        return simulate(*args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(api, "_simulate", counted)
        r = run_cli("reproduce", "load-shift", "--quick", "--semantics", "ours", "--out", out, "--jobs", "1")
    assert r.code == 0, r.err
    return out


def test_loadshift_runs_each_point_once(loadshift):
    """The time series the analysis reads are those of the sweep's own runs (kept as they run,
    Reproduction.sweep_series), not a second simulation of every point: one run per point."""
    n_points = json.loads((loadshift / "meta.json").read_text(encoding="utf-8"))["points"]
    assert n_points == 9 and len(LOADSHIFT_SIMULATIONS) == n_points
    ts = pd.read_parquet(loadshift / "timeseries.parquet")
    assert ts.groupby(["variant", "seed"]).ngroups == n_points


def _loadshift_data(out: Path) -> L.Data:
    """The data the claims were judged on, rebuilt from the run's files."""
    meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
    fix = next(v for v in meta["spec"]["variants"] if v["name"] == "fix")
    scenario = validate(meta["spec"]["base"], [*meta["spec"]["overrides"], *fix["set"]])
    return L.build_data(pd.read_parquet(out / "results.parquet"), pd.read_parquet(out / "timeseries.parquet"),
                        scenario, meta.get("semantics", {}).get("name"))


def test_loadshift_quick_writes_results_figures_and_claims(loadshift):
    _files(loadshift, ("loadshift_timeseries.png", "loadshift_closeup.png", "loadshift_phases.png",
                       "phases.parquet", "shifts.parquet"))
    df = pd.read_parquet(loadshift / "results.parquet")
    assert set(df["variant"]) == {"baseline", "fix", "baseline-init32"}
    assert set(df["seed"]) == {1, 2, 3}
    ts = pd.read_parquet(loadshift / "timeseries.parquet")
    for col in ("t_ms", "throughput_rps", "credit_pool", "cores_allocated", "queue_len", "oldest_delay_us",
                "variant", "seed"):
        assert col in ts.columns, col
    # the whole 100 ms schedule at 10 µs samples, per variant and seed
    assert ts.groupby(["variant", "seed"]).size().eq(10_000).all()
    ph = pd.read_parquet(loadshift / "phases.parquet")
    assert sorted(set(ph["load"])) == [0.2, 0.5, 1.2] and set(ph["phase"]) == {1, 2, 3, 4}
    assert ph["drained_mean"].between(0, 1000).all()  # sessions drained of credits, of the 1000
    sh = pd.read_parquet(loadshift / "shifts.parquet")
    assert sorted(set(sh["shift_ms"])) == [25.0, 75.0]  # the two rises of the load


def test_loadshift_quick_claims(loadshift):
    c = _claims(loadshift, "load-shift")
    gain = c["fix-throughput-improvement"]
    assert gain["paper"] == 0.07 and gain["kind"] == "gain"
    if gain["verdict"] != REPRODUCED:
        # the cause compares every phase's throughput and cites the pool's maximum against its ceiling
        ev = gain["cause"]["evidence"]
        for k in ("base1", "fix1", "base4", "fix4", "f_pool_max", "ceiling", "base_client_timeouts"):
            assert k in ev, k
        assert f"{ev['f_pool_max']:,.0f}" in gain["cause"]["text"] or str(ev["f_pool_max"]) in gain["cause"]["text"]
    assert c["low-load-cores"]["paper"] == 7 and c["high-load-all-cores"]["paper"] == 32
    assert c["pool-tracks-allocated-cores"]["paper"] == 1.0 and c["similar-latency"]["paper"] == 1.0
    # Measured, default semantics: the baseline collapses in the first (0.2) phase and serves
    # about a tenth of its offered load before the shift, so the burst claims are outside the
    # paper's regime (its baseline serves the low load with ~7 cores).
    # Measured (issue 25): the light phases' load is lost at the clients. The cause says so from
    # the run: most of the 1000 sessions drained of credits in the load-0.2 phase, and far more
    # client timeouts than AQM drops.
    low = c["low-load-cores"]["cause"]
    ev = low["evidence"]
    assert ev["sessions"] == 1000 and ev["b1_drained"] > 500 and ev["b1_served"] < 0.5
    assert ev["b_client_timeouts"] > 10 * ev["b_aqm_drops"]
    assert "longer than the client timeout" in low["text"] and f"{ev['b1_drained']:,.0f}" in low["text"]
    for cid in ("burst-dropped-cores-park", "burst-cores-park"):
        reg = c[cid]["regime"][0]
        assert reg["value"] < 0.5 and reg["holds"] is False
        assert c[cid]["verdict"] == OUT_OF_REGIME and str(reg["value"]) in c[cid]["cause"]["text"]


def test_loadshift_cause_follows_the_results(loadshift):
    """A cause is read from the run: change the results and its text changes with them."""
    data = _loadshift_data(loadshift)
    spec = next(s for s in L.CLAIMS if s.id == "fix-throughput-improvement")
    before = judge(spec, data)
    saved = json.loads((loadshift / "claims.json").read_text(encoding="utf-8"))
    assert before.to_dict()["cause"] == next(x for x in saved if x["id"] == spec.id)["cause"]
    r = data.runs.df.copy()
    base = r["variant"] == "baseline"
    r.loc[base, "throughput_rps"] = r.loc[base, "throughput_rps"] * 3
    r.loc[base, "credits.client_timeouts"] = 12345.0
    after = judge(spec, replace(data, runs=Seeds(r)))
    assert after.extra["cause"]["text"] != before.extra["cause"]["text"]
    assert "12,345" in after.extra["cause"]["text"]


def test_loadshift_study_semantics_every_miss_has_a_cause(all_quick):
    """The default, the study simulator's semantics (`--semantics study`): the gain and the burst
    claim had no cause before issue 23; now every claim not reproduced carries one from the run."""
    out = all_quick / "load-shift"
    meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
    assert meta["semantics"]["name"] == "study" and meta["semantics"]["default"] is True
    c = _claims(out, "load-shift")
    gain = c["fix-throughput-improvement"]
    assert gain["semantics"] == "study"
    # measured: the fix wins under the study's semantics (about +17 %, CI ~±4 %)
    assert gain["verdict"] in (REPRODUCED, DIRECTION)
    burst = c["burst-dropped-cores-park"]
    if burst["verdict"] == NOT_REPRODUCED:
        ev = burst["cause"]["evidence"]
        assert {"client_queued_max", "delay_max", "pool", "drop_us"} <= ev.keys()


def _light(overrides: list[str]) -> dict:
    """The load-shift scenario held at its first phase's load 0.2 for 15 ms, seed 1: the share
    served, sessions drained of credits and the pool over its last 10 ms, and the run's drops."""
    r = run(REPO / "experiments" / "load-shift" / "base.toml", seed=1,
            overrides=["load.schedule=[]", "duration_ms=15", *overrides])
    w = r.timeseries[r.timeseries["t_ms"] > 5]
    cr = r.summary["credits"]
    return {"served": w["throughput_rps"].mean() / w["offered_rps"].mean(), "drained": w["drained_sessions"].mean(),
            "pool": w["credit_pool"].mean(), "timeouts": cr["client_timeouts"], "aqm": cr["aqm_drops"]}


@pytest.mark.parametrize("fix", [False, True])
def test_loadshift_light_load_is_lost_at_the_clients_not_at_the_server(fix):
    """Issue 25: under the default semantics load 0.2 (6.4 of 32 cores of work) is not carried,
    and the requests are lost at Breakwater's 1000 clients, not at the server: a pool that tracks
    the allocated cores leaves sessions without a spare credit, one takes a round trip (30 µs)
    to come, and the client gives up after 10 µs. The study's client and pool on the same server
    model (`--semantics study-client`) carry it; so does the fix with its ramp ungated."""
    sem = tomllib.loads((REPO / "experiments" / "load-shift" / "semantics-study-client.toml").read_text())
    variant = [f"policy.overload.core_fix={str(fix).lower()}"]
    d = _light(variant)
    assert d["timeouts"] > 10 * d["aqm"], d  # dropped at the clients
    if fix:
        # The fix keeps about one credit a session (pool ~ sessions): hardly a session is drained,
        # yet a request following its session's previous one within a round trip finds no credit.
        # At 6.4 k req/s a session that is 1 - exp(-0.198) = 18 % of the requests.
        lone = 1 - math.exp(-0.2 * 32e6 / 1000 * 31e-6)
        assert d["drained"] < 50 and 1 - lone - 0.05 <= d["served"] <= 0.93, d
        # Its ramp is gated on AQM drops, which the clients' timeouts are not: ungated, the ramp
        # lifts the pool far past the session count and the clients keep spare credits.
        u = _light([*variant, 'policy.overload.core_fix_drop_gate="none"'])
        assert u["pool"] > 10_000 and u["served"] >= 0.95, u
    else:
        # The baseline's pool sinks far below the 1000 sessions: most are drained, and the
        # sessions holding any credit bound what is served.
        assert d["pool"] < 500 and d["drained"] > 500 and d["served"] < 0.5, d
        assert d["served"] <= 1 - d["drained"] / 1000 + 0.05, d
    s = _light([*sem["overrides"], *variant])
    assert s["served"] >= 0.95 and s["timeouts"] == 0, s


def test_binned_sums_counts_and_averages_levels():
    ts = pd.DataFrame({"t_ms": [0.05, 0.1, 0.15, 0.2], "throughput_rps": [1.0, 3.0, 5.0, 7.0],
                       "drops": [1, 2, 3, 4]})
    b = binned(ts, 0.1)
    assert b["t_ms"].tolist() == pytest.approx([0.1, 0.2])
    assert b["throughput_rps"].tolist() == [2.0, 6.0]
    assert b["drops"].tolist() == [3, 7]


def test_phases_and_ramp_of_a_synthetic_series():
    scenario = validate(REPO / "experiments" / "load-shift" / "base.toml")
    ph = L.phases_of(scenario)
    assert ph == [(0.0, 25.0, 0.2), (25.0, 50.0, 1.2), (50.0, 75.0, 0.5), (75.0, 100.0, 1.2)]
    t = np.round(np.arange(1, 10_001) * 0.01, 6)
    # throughput reaches 0.9 of capacity 3 ms after the 25 ms shift, never after the 75 ms one
    thr = np.where((t > 28) & (t <= 50), 0.9 * 32e6, 0.1 * 32e6)
    ts = pd.DataFrame({"t_ms": t, "throughput_rps": thr})
    assert L.ramp_time_ms(ts, 25.0, 0.8 * 32e6, 25.0) == pytest.approx(3.1)
    assert L.ramp_time_ms(ts, 75.0, 0.8 * 32e6, 25.0) == 25.0  # censored: the whole phase


# ---------------------------------------------------------------------------------------------
# collapse (Fig. 2)


@pytest.fixture(scope="module")
def collapse(all_quick):
    """The quick reproduction, from the suite's one `reproduce --all --quick` run."""
    return all_quick / "collapse"


def test_collapse_quick_writes_results_figures_and_claims(collapse):
    _files(collapse, ("collapse_timeseries.png", "collapse_vs_rtt.png", "cycles.parquet"))
    df = pd.read_parquet(collapse / "results.parquet")
    assert set(df["variant"]) == {"baseline", "fix", "static"}
    assert set(df["network.rtt_us"]) == {5, 10, 25, 30}
    cyc = pd.read_parquet(collapse / "cycles.parquet")
    assert set(cyc["seed"]) == {1, 2, 3} and set(cyc["variant"]) == {"baseline"}


def test_collapse_quick_claims(collapse):
    c = _claims(collapse, "collapse")
    assert c["collapse@rtt30"]["paper"] == pytest.approx(1 / 32)
    assert c["collapse-one-core@rtt30"]["paper"] == 1 and c["collapse-pool-stays@rtt30"]["paper"] == 40
    assert c["fix-no-collapse@rtt30"]["paper"] == 1.0
    # Measured: the baseline at RTT 30 µs serves a few % of capacity (one core's worth is 1/32):
    # the collapse itself; ~0.035 in the quick run, far below the short RTTs' ~0.87.
    assert c["collapse@rtt30"]["measured"] < 0.1 < c["short-rtt-no-collapse"]["measured"]
    pool = c["collapse-pool-stays@rtt30"]
    if pool["verdict"] != REPRODUCED:
        ev = pool["cause"]["evidence"]
        assert {"low_delay_fraction", "pool_max", "start"} <= ev.keys() and ev["start"] == 40


def test_collapse_cause_follows_the_results(collapse):
    meta = json.loads((collapse / "meta.json").read_text(encoding="utf-8"))
    scenario = validate(meta["spec"]["base"], meta["spec"]["overrides"])
    data = C.build_data(pd.read_parquet(collapse / "results.parquet"),
                        pd.read_parquet(collapse / "timeseries.parquet"), scenario)
    spec = next(s for s in C.CLAIMS if s.id == "collapse-pool-stays@rtt30")
    r = data.runs.df.copy()
    sel = (r["variant"] == "baseline") & (r["network.rtt_us"] == 30)
    texts = []
    for pool in (90.0, 120.0):
        r.loc[sel, "credits.pool_mean"] = pool
        got = judge(spec, replace(data, runs=Seeds(r.copy(), key=C.RTT)))
        assert got.verdict == NOT_REPRODUCED
        texts.append(got.extra["cause"]["text"])
    assert texts[0] != texts[1] and "90" in texts[0] and "120" in texts[1]


def test_cycle_period_of_a_periodic_signal():
    t = np.arange(1, 3001) * 1e-3  # 1 µs samples, in ms
    x = (np.sin(2 * np.pi * t * 1000 / 57) > 0.5).astype(float) * 20
    period, peak = cycle_period_us(pd.DataFrame({"t_ms": t, "queue_len": x}), 120)
    assert period == pytest.approx(57, abs=1) and peak > 0.5
    flat = pd.DataFrame({"t_ms": t, "queue_len": np.zeros_like(t)})
    assert all(math.isnan(v) for v in cycle_period_us(flat, 120))


def test_fix_min_pool_matches_the_simulator():
    p = {"max_cores": 32, "target_us": 10.0}
    assert C.min_pool(p, 30.0) == 128 and C.min_pool(p, 25.0) == 112  # breakwater.rs core_fix_min_pool


def test_initial_pool_is_validated():
    base = REPO / "experiments" / "collapse" / "base.toml"
    assert validate(base)["policy"]["overload"]["initial_pool"] == 40
    with pytest.raises(ValueError, match=r"policy\.overload\.initial_pool: 0 is not allowed"):
        validate(base, ["policy.overload.initial_pool=0"])


def test_collapse_fix_with_instant_semantics(tmp_path):
    """`--semantics instant` (instant search, ungated ramp: the model before issue 12 item 6): the
    fix (minimum pool 128) runs near capacity at RTT 30 µs (~0.93 measured); > 0.7 is far from the
    collapse's 0.03 and leaves room for the AQM's drops at load 1.0."""
    out = tmp_path / "collapse-instant"
    r = run_cli("reproduce", "collapse", "--quick", "--semantics", "instant", "--out", out, "--jobs", "1")
    assert r.code == 0, r.err
    fix = _claims(out, "collapse")["fix-no-collapse@rtt30"]
    assert fix["measured"] > 0.7


def test_loadshift_defaults_to_the_study_simulators_semantics_and_ours_is_named():
    """The study is a simulation: its simulator's semantics are the reproduction's default, and
    this project's own model is the named semantics `ours` (no overrides of its own)."""
    from microsched.reproduce.framework import OURS, prepared_spec, semantics_names
    from microsched.reproduce.spec import SpecError

    repro = get("load-shift")
    assert repro.default_semantics == "study" and OURS in semantics_names(repro)
    study = tomllib.loads((REPO / "experiments" / "load-shift" / "semantics-study.toml").read_text())["overrides"]
    default, sem = prepared_spec(repro, quick=True)
    ours, sem_ours = prepared_spec(repro, quick=True, semantics=OURS)
    assert sem["name"] == "study" and sem["default"] is True and sem_ours["default"] is False
    assert default.overrides[-len(study):] == study
    assert ours.overrides == default.overrides[:-len(study)]
    # the other reproductions keep their own model as the default and offer no "ours"
    assert prepared_spec(get("collapse"), quick=True)[1] is None
    assert OURS not in semantics_names(get("collapse"))
    with pytest.raises(SpecError, match="ours"):
        prepared_spec(get("collapse"), quick=True, semantics=OURS)
