"""CoreSync against the baselines (issue 5) and `microsched reproduce coresync`.

Scaled-down runs of the reproduction's own scenarios (experiments/coresync/: 16 cores, 100
sessions, RTT 10 µs, Breakwater 80/160 µs on every allocator, exponential 10 µs requests):
loads 0.5 (below capacity) and 1.3 (beyond), seeds 1–3, 40 ms warm-up from the pool ceiling and
100 ms measured (the full reproduction: 6 loads, 5 seeds, 300 ms). Every policy sees the same
requests for a given seed (common random numbers), so comparisons are paired by seed.

Asserted, because it holds robustly in our model (the reproduction's claims.json judges the
paper's numbers, with the verdict model of ``reproduce/claims.py``; its claims can fail is shown by
test_claims_can_fail.py with claim_examples/coresync.py):

* CoreSync is on the latency/utilization Pareto frontier below capacity: no policy has both a
  lower mean p99 and a lower mean utilization at load 0.5. (In our model this holds because
  CoreSync keeps nearly every core and has the lowest p99, not because it also matches the
  reactive policies' utilization as in the paper: see claims.json, `fig3/util-*`.)
* CoreSync never parks a core while a session is drained (`credits.parks_while_drained` = 0), on
  runs where drained sessions do occur (1 000 sessions beyond capacity).
* Under overload CoreSync's throughput is at least Shenango's within a tolerance derived from the
  seed-to-seed spread: the per-seed ratio thr(CoreSync)/thr(Shenango) must not be below 1 by
  more than its 95 % confidence half-width (t with n − 1 degrees of freedom over the seeds),
  i.e. CoreSync is not significantly worse. Asserted with 1 000 and 10 000 sessions, where
  drained sessions occur and CoreSync keeps every core. With the paper's 100 sessions no
  session drains in our model and CoreSync parks like Caladan; the paper's "up to 6 % better" is
  judged in claims.json, not asserted here.
* `reproduce coresync --quick` writes well-formed outputs (claims.json layout, every declared
  claim with a verdict, the figures, Table I and II in CSV and Markdown), and every claim that is
  not reproduced carries a cause whose numbers come from its evidence, read from the run.
"""

from __future__ import annotations

import json
import math
import re
from functools import lru_cache

import pandas as pd
import pytest

import microsched
from conftest import REPO
from microsched.api import validate
from microsched.reproduce import SweepSpec, mean_ci95, run_reproduction
from microsched.reproduce.claims import VERDICTS, check_claims, fmt_number, judge
from microsched.reproduce.coresync import CLAIMS

BASE = REPO / "experiments" / "coresync" / "base.toml"
SWEEP = REPO / "experiments" / "coresync" / "sweep.toml"
SHORT = ("warmup_ms=40", "duration_ms=100")
SEEDS = (1, 2, 3)
BELOW, ABOVE = 0.5, 1.3
POLICIES = ("coresync", "shenango", "caladan", "utilization_range", "delay_range")


@lru_cache(maxsize=None)
def variant_sets() -> dict[str, tuple[str, ...]]:
    """Every variant's settings, exactly as the reproduction runs them."""
    return {v.name: v.set for v in SweepSpec.load(SWEEP).variants}


@lru_cache(maxsize=None)
def summary(variant: str, load: float, seed: int) -> dict:
    # the variant's own run length (duration_ms for 1 µs workloads) is replaced by SHORT
    ovr = [*variant_sets()[variant], f"load.fraction={load}", *SHORT]
    return microsched.run(BASE, seed=seed, overrides=ovr).summary


def metric(variant: str, load: float, seed: int, key: str) -> float:
    s = summary(variant, load, seed)
    for part in key.split("."):
        s = s[part]
    return float(s)


def test_spec_has_every_experiment():
    names = set(variant_sets())
    for exp in ("exp10", "bim10", "exp1", "bim1", "mc"):
        for p in POLICIES:
            assert f"{exp}/{p}" in names
    for extra in ("exp10/caladan-5", "exp10/caladan-10", "exp10/coresync-r10", "exp10/coresync-r20",
                  "exp10/coresync-r100", "exp10/coresync-cold", "n1000/coresync", "n10000/coresync"):
        assert extra in names
    spec = SweepSpec.load(SWEEP)
    assert spec.grid["load.fraction"] == [0.2, 0.5, 0.8, 1.0, 1.3, 1.5]
    assert len(spec.seeds) >= 3


def test_paper_parameters():
    sc = validate(BASE, overrides=list(variant_sets()["mc/coresync"]))
    assert sc["server"]["max_cores"] == 16 and sc["clients"]["sessions"] == 100 and sc["network"]["rtt_us"] == 10
    assert sc["policy"]["allocator"]["r"] == 20
    ov = sc["policy"]["overload"]
    assert (ov["target_us"], ov["drop_us"], ov["alpha"], ov["beta"]) == (25, 50, 0.001, 0.02)
    sc = validate(BASE, overrides=list(variant_sets()["exp1/caladan"]))
    assert (sc["policy"]["overload"]["target_us"], sc["policy"]["overload"]["drop_us"]) == (45, 90)
    al = sc["policy"]["allocator"]
    assert (al["interval_us"], al["delay_threshold_us"], al["poll_us"]) == (5, 5, 2)


def test_coresync_on_pareto_frontier_below_capacity():
    def mean(variant: str, key: str) -> float:
        return sum(metric(variant, BELOW, s, key) for s in SEEDS) / len(SEEDS)

    cs_p99, cs_util = mean("exp10/coresync", "latency_us.p99"), mean("exp10/coresync", "cpu_utilization")
    for p in POLICIES[1:]:
        p99, util = mean(f"exp10/{p}", "latency_us.p99"), mean(f"exp10/{p}", "cpu_utilization")
        assert not (p99 < cs_p99 and util < cs_util), \
            f"{p} dominates CoreSync at load {BELOW}: p99 {p99:.1f} < {cs_p99:.1f} µs and util {util:.3f} < {cs_util:.3f}"


def test_coresync_never_parks_while_drained():
    drained_seen = 0.0
    for variant in ("n1000/coresync", "exp10/coresync"):
        for load in (BELOW, ABOVE):
            for seed in SEEDS:
                s = summary(variant, load, seed)
                assert s["credits"]["parks_while_drained"] == 0, (variant, load, seed)
                drained_seen += s["credits"]["drained_mean"]
    # the check is not vacuous: with 1 000 sessions beyond capacity sessions do get drained
    assert drained_seen > 1.0


@pytest.mark.parametrize("exp", ["n1000", "n10000"])
def test_overload_throughput_at_least_shenangos(exp):
    """Where CoreSync's overload signal works (drained sessions: 1 000 and more sessions), its
    throughput beyond capacity is not significantly below Shenango's. With 100 sessions no session
    drains in our model, CoreSync parks like Caladan and is 0.1–0.9 % *below* Shenango at loads
    1.0–1.3 (claims.json: overload/coresync-at-least-shenango, holds = false): not asserted."""
    ratios = [metric(f"{exp}/coresync", ABOVE, s, "throughput_rps") / metric(f"{exp}/shenango", ABOVE, s, "throughput_rps")
              for s in SEEDS]
    m, ci, n = mean_ci95(ratios)
    assert n == len(SEEDS) and math.isfinite(ci)
    assert m >= 1 - ci, f"{exp}: CoreSync/Shenango throughput at load {ABOVE}: {m:.4f} ± {ci:.4f} (per seed {ratios})"


@pytest.fixture(scope="module")
def quick_outcome(all_quick):
    """The quick reproduction, from the suite's one `reproduce --all --quick` run."""
    from conftest import outcome_of

    return outcome_of(all_quick / "coresync")


def test_quick_outputs_well_formed(quick_outcome):
    out = quick_outcome.out
    claims = json.loads((out / "claims.json").read_text())
    check_claims(claims)
    assert [c["id"] for c in claims] == [s.id for s in CLAIMS]  # every declared claim, judged
    for c in claims:
        assert c["measured"] is None or math.isfinite(c["measured"])
        assert c["verdict"] in VERDICTS and c["paper_ref"] and c["kind"]
        if c["kind"] in ("ratio", "gain", "difference", "bound", "check"):
            assert c["paper"] is not None, c["id"]
    drained = next(c for c in claims if c["id"] == "mechanism/no-park-while-drained")
    assert drained["verdict"] == "model_check" and drained["passed"] and drained["measured"] == 0
    for name in ("fig1_caladan_poll.png", "fig3_exp10.png", "fig4_bimodal10.png", "fig5_1us.png",
                 "fig6_memcached.png", "fig7_r_sensitivity.png", "fig8_sessions.png"):
        assert (out / name).stat().st_size > 1000, name
    for t in ("table1", "table2"):
        df = pd.read_csv(out / f"{t}.csv")
        assert list(df["policy"]) == ["CoreSync", "Shenango", "Caladan", "Utilization Range", "Delay Range"]
        norm = [c for c in df.columns if c != "policy" and not c.endswith(".ci95")]
        assert norm and all(df.loc[0, c] == 1.0 for c in norm)  # normalized to CoreSync
        assert "| Policy |" in (out / f"{t}.md").read_text()
    res = pd.read_parquet(out / "results.parquet")
    assert len(res) == quick_outcome.n_points == len(SweepSpec.load(SWEEP, quick=True).points())
    meta = json.loads((out / "meta.json").read_text())
    assert meta["quick"] is True and meta["reproduction"] == "coresync"


# ---- issue 12: the artifact's baselines and Breakwater v2, causes, conditions, wake latency


def test_artifact_baselines_and_breakwater_v2():
    """"Shenango" is the artifact's (Caladan simple + delay rule 5/5/2), "Caladan" and CoreSync run
    on ias, and Breakwater is v2 as CoreSync ran it."""
    sets = variant_sets()
    for exp in ("exp10", "bim10", "exp1", "bim1", "mc", "n1000", "n10000"):
        if f"{exp}/shenango" in sets:
            al = validate(BASE, overrides=list(sets[f"{exp}/shenango"]))["policy"]["allocator"]
            assert al["kind"] == "shenango_artifact"
            assert (al["interval_us"], al["delay_threshold_us"], al["poll_us"]) == (5, 5, 2)
    for name, ss in sets.items():
        al = validate(BASE, overrides=list(ss))["policy"]["allocator"]
        if al["kind"] in ("caladan", "coresync"):
            assert al["waking_skip"] == "ias", name
            if al["kind"] == "coresync":
                assert al["keep_quirk"] is True, name
    for name, budget in (("exp10/coresync", 160), ("exp1/caladan", 90), ("mc/shenango", 50)):
        sc = validate(BASE, overrides=list(sets[name]))
        ov = sc["policy"]["overload"]
        assert (ov["trigger"], ov["latency_budget_us"]) == ("completion", budget), name
        assert ov["latency_budget_us"] == ov["drop_us"]
        assert sc["clients"]["first_request_only"] is True


def test_shenango_artifact_runs_as_caladan_simple():
    """The named parameter set changes nothing but the name: bit-identical to caladan simple 5/5/2."""
    common = [*SHORT, "load.fraction=0.5"]
    a = microsched.run(BASE, seed=1, overrides=[*common, 'policy.allocator={kind="shenango_artifact"}']).summary
    b = microsched.run(BASE, seed=1, overrides=[*common, 'policy.allocator={kind="caladan", interval_us=5, '
                                                         'delay_threshold_us=5, poll_us=2}']).summary
    for key in ("latency_us", "requests", "cores"):
        assert a[key] == b[key], key


def test_conditions_add_their_overrides():
    from dataclasses import replace

    from microsched.reproduce import get

    repro = get("coresync")
    spec = SweepSpec.load(SWEEP)
    cs = next(x for x in spec.variants if x.name == "exp10/coresync")
    sh = next(x for x in spec.variants if x.name == "exp10/shenango")
    # every condition starts as the artifact did: pool at max_cores (bw_server.c), 4 s warm-up (netbench.cc)
    cold = ("policy.overload.initial_pool=16", "warmup_ms=4000")
    assert repro.condition("keep-cut").sets(cs) == (*cold, "policy.allocator.keep_cut=true")
    assert repro.condition("keep-cut").sets(sh) == cold
    assert repro.condition("cold-start").sets(cs) == repro.condition("cold-start").sets(sh) == cold
    for name in ("slow-wake", "capped-pool"):
        for var in (cs, sh):
            extra = repro.condition(name).sets(var)
            assert extra[:2] == cold and len(extra) == 3, (name, var.name)
            validate(BASE, overrides=[*replace(var, set=tuple(var.set) + tuple(extra)).set])
    # bursty clients (issue 44): the clients' option only, from the published start
    for var in (cs, sh):
        assert repro.condition("bursty-clients").sets(var) == ('clients.burst="credits"',)
        sc = validate(BASE, overrides=[*replace(var, set=tuple(var.set) + repro.condition("bursty-clients").sets(var)).set])
        assert sc["clients"]["burst"] == "credits"
    with pytest.raises(KeyError, match="slow-wake"):
        repro.condition("no-such")


def test_claims_say_whether_they_are_judged_warm_or_cold():
    from microsched.reproduce.coresync import claim_start

    assert claim_start("fig3/util-urange-vs-coresync", None) == "warm"
    assert claim_start("timeseries/issued-within-bound-at-steady-state", None) == "cold"
    assert claim_start("method/steady-state-from-pool-ceiling", None) == "cold+warm"
    for cid in ("fig3/util-urange-vs-coresync", "method/steady-state-from-pool-ceiling"):
        assert claim_start(cid, "keep-cut") == "cold"
    # bursty-clients keeps the published start
    assert claim_start("fig3/util-urange-vs-coresync", "bursty-clients") == "warm"
    assert claim_start("method/steady-state-from-pool-ceiling", "bursty-clients") == "cold+warm"


def test_bursty_clients_send_their_credits_together_at_the_same_offered_rate():
    """clients.burst = "credits" (issue 44): requests of a session leave in groups created at one
    instant (none without it), and the number generated stays that of the offered load."""
    import collections

    common = [*SHORT, "load.fraction=0.5", *variant_sets()["exp10/shenango"], "metrics.record_requests=true"]
    off = microsched.run(BASE, seed=1, overrides=common)
    on = microsched.run(BASE, seed=1, overrides=[*common, 'clients.burst="credits"'])

    def grouped(r) -> float:
        log = r.requests
        sizes = collections.Counter(zip(log["session"].tolist(), log["created_ns"].tolist()))
        return sum(n for n in sizes.values() if n > 1) / len(log)

    assert grouped(off) < 0.01 and grouped(on) > 0.5, (grouped(off), grouped(on))
    g_off, g_on = off.summary["requests"]["generated"], on.summary["requests"]["generated"]
    assert abs(g_on / g_off - 1) < 0.05, (g_on, g_off)


def test_slow_wake_keeps_a_granted_core_waking_longer():
    """A 50 µs wake-up instead of 5 µs: the reactive baseline's cores spend ~10x as long waking
    per grant, so more core time is in the waking state (conservation: allocated includes it)."""
    common = [*SHORT, "load.fraction=0.5", *variant_sets()["exp10/shenango"]]
    fast = microsched.run(BASE, seed=1, overrides=common).summary
    slow = microsched.run(BASE, seed=1, overrides=[*common, 'server.wake_latency={dist="constant", value_us=50}']).summary
    same = microsched.run(BASE, seed=1, overrides=[*common, 'server.wake_latency={dist="constant", value_us=5}']).summary
    assert same["latency_us"] == fast["latency_us"] and same["cores"] == fast["cores"]
    assert slow["latency_us"]["p99"] > fast["latency_us"]["p99"]
    ln = microsched.run(BASE, seed=1, overrides=[*common, 'server.wake_latency={dist="lognormal", mean_us=5, '
                                                          'p99_us=50}']).summary
    assert ln["requests"]["generated"] == fast["requests"]["generated"]  # arrivals untouched (own stream)


def test_worker_start_drop_bounds_the_queueing_delay():
    """Breakwater v2's worker-start drop: beyond capacity with a small budget, requests that would
    start late are answered with failures, so the admitted requests' queueing delay shrinks."""
    common = [*SHORT, "load.fraction=1.5", *variant_sets()["exp10/caladan"], "policy.overload.drop_us=1000",
              "policy.overload.target_us=500"]
    off = microsched.run(BASE, seed=1, overrides=[*common, "policy.overload.latency_budget_us=1000"]).summary
    on = microsched.run(BASE, seed=1, overrides=[*common, "policy.overload.latency_budget_us=20"]).summary
    assert on["requests"]["dropped"] > off["requests"]["dropped"]
    assert on["latency_us"]["p99"] < off["latency_us"]["p99"]
    # reported as their own kind of drop, not as AQM drops (issue 12 (e))
    assert on["credits"]["start_drops"] > off["credits"]["start_drops"] >= 0


def _numbers(text: str) -> list[str]:
    return re.findall(r"(?<![A-Za-z_\d.\-])\d+(?:,\d{3})*(?:\.\d+)?(?:e[+-]\d+)?", text)


def test_quick_claims_explain_failures(quick_outcome):
    out = quick_outcome.out
    claims = {c["id"]: c for c in json.loads((out / "claims.json").read_text())}
    for c in claims.values():
        if c["verdict"] in ("direction", "not_reproduced", "out_of_regime"):
            cause = c.get("cause")
            assert cause and cause["text"] and cause["evidence"], f"{c['id']} is {c['verdict']} without a cause"
            ev = list(_flat(cause["evidence"]))
            shown = {fmt_number(x) for x in ev} | {n for x in ev if isinstance(x, str) for n in _numbers(x)}
            for num in _numbers(cause["text"]):  # every number of the text is one of its evidence values
                assert num in shown or num.replace(",", "") in shown, (c["id"], num, cause["text"])
        if c["verdict"] == "out_of_regime":
            assert c["regime"] and not all(r["holds"] for r in c["regime"]), c["id"]
            assert c["verdict_if_judged"] in ("reproduced", "direction", "not_reproduced"), c["id"]
    a, b = claims["fig1/coresync-dominates-caladan"], claims["fig3/caladan-util-vs-coresync"]
    assert a["contradicts"] == b["id"] and b["contradicts"] == a["id"] and "contradicts itself" in a["contradiction"]
    assert "timeseries/issued-within-bound-at-steady-state" in claims
    # issue 23: the paper's core saving against Utilization Range is judged by its number, and its
    # cause gives the bound Utilization Range's own cores put on it
    ur = claims["fig3/util-urange-vs-coresync"]
    assert ur["kind"] == "ratio" and ur["paper"] == 1.4
    ev = ur["cause"]["evidence"]
    assert ev["cap"] == pytest.approx(ev["other_cores"] / ev["cs_busy"], rel=1e-3)
    assert ur["verdict"] != "reproduced" and ev["cap"] < 1.4  # Utilization Range's own cores cap it in our model
    assert (out / "fig_coresync_timeseries.png").stat().st_size > 1000
    ts = pd.read_parquet(out / "timeseries_coresync.parquet")
    assert set(ts["load"]) == {0.2, 0.5} and (ts["bound_rk_n"] == 50 * ts["cores_allocated"] + 100).all()


def _flat(ev):
    for x in ev.values():
        if isinstance(x, dict):
            yield from _flat(x)
        else:
            yield x


def _spec(cid):
    return next(s for s in CLAIMS if s.id == cid)


def test_cause_is_read_from_the_run():
    """Another run, another cause: the Utilization Range claim's cause quotes the run's cores,
    busy cores, bound and credits, and changes when they change."""
    from claim_examples.coresync import cores, data, merge

    spec = _spec("fig3/util-urange-vs-coresync")
    one = judge(spec, data(cores("exp10/coresync", 0.5, 12.0)))
    two = judge(spec, data(merge(cores("exp10/coresync", 0.5, 13.0), cores("exp10/utilization_range", 0.5, 12.0))))
    assert one.verdict != "reproduced" and two.verdict != "reproduced"
    t1, t2 = one.extra["cause"]["text"], two.extra["cause"]["text"]
    assert t1 != t2
    assert "12" in t1 and "13" in t2 and one.extra["cause"]["evidence"]["cs_cores"] == pytest.approx(12.0)
    assert two.extra["cause"]["evidence"]["cap"] == pytest.approx(12.0 / 8.0, rel=1e-3)


def test_coresync_that_never_parks_is_out_of_regime():
    """CoreSync frozen at every core below capacity (our model at the pool ceiling): its
    below-capacity claims are not judged; the regime's values and what the number would give are."""
    from microsched.reproduce.coresync import judge_claims
    from claim_examples.coresync import at, data

    run = data(at("exp10/coresync", 0.5, cores__allocated_mean=16.0, cores__transition_mean=0.0,
                  cpu_utilization=1.0, be_cores_mean=0.0))
    specs = [_spec("fig3/util-urange-vs-coresync"), _spec("fig3/p99-shenango-vs-coresync")]
    c = {x.id: x for x in judge_claims(run, specs)}
    ur = c["fig3/util-urange-vs-coresync"]
    assert ur.verdict == "out_of_regime" and ur.extra["verdict_if_judged"] == "not_reproduced"
    assert [r["holds"] for r in ur.extra["regime"]] == [False, False]
    assert "judged all the same it would be not reproduced" in ur.extra["cause"]["text"]
    assert "cap" in ur.extra["cause"]["evidence"]
    assert c["fig3/p99-shenango-vs-coresync"].verdict == "out_of_regime"


def _fake_run(d, condition, holds, start=None):
    d.mkdir()
    (d / "meta.json").write_text(json.dumps({"reproduction": "coresync", "condition": condition}))
    claims = [{"id": i, "paper": 1.5, "measured": 1.0 + h, "holds": h} if isinstance(h, bool) else
              {"id": i, "paper": 1.5, "measured": 1.2, "holds": h == "reproduced", "verdict": h} for i, h in holds.items()]
    for c in claims if start else ():
        c["start"] = start
    (d / "claims.json").write_text(json.dumps(claims))
    return d


def test_conditions_table_sorts_claims_by_where_they_hold(tmp_path, capsys):
    from microsched.reproduce.coresync_conditions import main

    pub = _fake_run(tmp_path / "pub", None, {"a": True, "b": False, "c": False, "d": "out_of_regime"})
    cap = _fake_run(tmp_path / "cap", "capped-pool", {"a": False, "b": True, "c": False, "d": "reproduced"})
    assert main([str(pub), str(cap)]) == 0
    out = capsys.readouterr().out
    assert "| `a` | 1.5 | ✓ 2.0 | ✗ 1.0 | published |" in out
    assert "∅ out of regime" in out
    assert "| `b` | 1.5 | ✗ 1.0 | ✓ 2.0 | only capped-pool |" in out
    assert "| `c` | 1.5 | ✗ 1.0 | ✗ 1.0 | none |" in out
    assert "| `d` | 1.5 | ∅ 1.2 | ✓ 1.2 | only capped-pool |" in out
    assert "published: 1, none: 1, only capped-pool: 2 (of 4)" in out
    with pytest.raises(SystemExit) as e:
        main([str(pub), str(tmp_path)])
    assert e.value.code == 2
    assert "no meta.json or claims.json" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([str(pub), str(pub)])
    assert "a second run of condition 'published'" in capsys.readouterr().err
    assert "Start:" not in out  # claims.json from before claims recorded their start


def test_conditions_table_names_each_runs_start(tmp_path, capsys):
    from microsched.reproduce.coresync_conditions import main

    pub = _fake_run(tmp_path / "pub", None, {"a": True, "b": False}, start="warm")
    cut = _fake_run(tmp_path / "cut", "keep-cut", {"a": False, "b": True}, start="cold")
    assert main([str(pub), str(cut)]) == 0
    out = capsys.readouterr().out
    assert "| claim | paper | published (warm) | keep-cut (cold) | reproduced under |" in out
    assert "cold = at max_cores with a 4 s warm-up" in out


def test_conditions_summary_counts_verdicts_and_reads_coresyncs_parks_from_each_run(tmp_path, capsys):
    import pandas as pd

    from microsched.reproduce.coresync_conditions import main

    pub = _fake_run(tmp_path / "pub", None, {"a": True, "b": False, "c": "out_of_regime"}, start="warm")
    cut = _fake_run(tmp_path / "cut", "keep-cut", {"a": True, "b": True, "c": "direction"}, start="cold")
    for d, cores, parks in ((pub, 16.0, 0), (cut, 8.76, 18475)):
        pd.DataFrame([{"variant": "exp10/coresync", "load.fraction": f, "seed": s, "cores.allocated_mean": cores + s * 0.01,
                       "cores.busy_mean": 8.0, "parking.attempts": 1000 + s, "parking.parks": parks,
                       "parking.gate.waited_for_parker": 10, "parking.gate.waited_for_revocation": 5,
                       "parking.gate.cuts": 2} for f in (0.2, 0.5) for s in (0, 1)]).to_parquet(d / "results.parquet")
    assert main(["--summary", str(cut), str(pub)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    # The published run first, then the conditions; counts and the means over seeds read from each run.
    assert lines[2] == "| published (warm) | 1 / 0 / 1 / 1 | 16.01 | 8.00 | 1,000 | 0 | 10 | 5 | 2 |", out
    assert lines[3] == "| keep-cut (cold) | 2 / 1 / 0 / 0 | 8.77 | 8.00 | 1,000 | 18,475 | 10 | 5 | 2 |", out
    with pytest.raises(SystemExit) as e:
        main(["--summary", "--load", "0.7", str(pub)])
    assert e.value.code == 2 and "no exp10/coresync run at load 0.7" in capsys.readouterr().err


def test_conditions_versus_sets_shenango_against_coresync_in_each_run(tmp_path, capsys):
    """--versus (issue 44): per run, Shenango's and CoreSync's p99 and their ratio below capacity,
    CoreSync's throughput gain above, read from each run's aggregate.parquet."""
    import pandas as pd

    from microsched.reproduce.coresync_conditions import main

    pub = _fake_run(tmp_path / "pub", None, {"a": True}, start="warm")
    bur = _fake_run(tmp_path / "bur", "bursty-clients", {"a": False}, start="warm")
    for d, p99_sh in ((pub, 80.0), (bur, 160.0)):
        rows = [{"variant": f"exp10/{p}", "load.fraction": 0.5, "latency_us.p99": p99_sh if p == "shenango" else 40.0,
                 "cores.allocated_mean": 9.0 if p == "shenango" else 16.0, "throughput_rps": 0.0} for p in ("shenango", "coresync")]
        rows += [{"variant": f"exp10/{p}", "load.fraction": 1.3, "latency_us.p99": 200.0, "cores.allocated_mean": 16.0,
                  "throughput_rps": 1.0e6 if p == "shenango" else 1.05e6} for p in ("shenango", "coresync")]
        pd.DataFrame(rows).to_parquet(d / "aggregate.parquet")
    assert main(["--versus", str(bur), str(pub)]) == 0
    out = capsys.readouterr().out
    assert "| exp10 | 0.5 | 80.0 / 40.0 µs (2.00×); 9.0 / 16.0 | 160.0 / 40.0 µs (4.00×); 9.0 / 16.0 |" in out, out
    assert "| exp10 | 1.3 | throughput CoreSync / Shenango − 1 = +5.00 % | throughput CoreSync / Shenango − 1 = +5.00 % |" in out
    assert "published (warm)" in out.splitlines()[0] and "bursty-clients (warm)" in out.splitlines()[0]
    assert "bim10" not in out  # experiments a run lacks are left out
    with pytest.raises(SystemExit):
        main(["--versus", "--summary", str(pub)])
