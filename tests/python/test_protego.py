"""Protego (issue 14) on scaled-down seeded runs: lock-level drops (ASQM, try_lock), Protego's
admission control, SEDA, and `microsched reproduce protego --quick`.

Bounds are the paper's qualitative claims, each with the reason for its margin beside it; the
runs are short (hundreds of ms simulated) and deterministic (seed 1).
"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from conftest import REPO, run_cli
from microsched.api import run
from microsched.reproduce import protego
from microsched.reproduce.claims import REQUIRED_KEYS, check_claims, judge

EXP = REPO / "experiments" / "protego"
P50 = EXP / "synthetic-p50.toml"
TARGET_US = 200.0
ASQM = ['server.lock_control.mode="asqm"', "server.lock_control.budget_us=134"]
PROTEGO = ['policy.overload.kind="protego"', "policy.overload.budget_us=134", "policy.overload.initial_pool=1000"]
BREAKWATER = ['policy.overload.kind="breakwater"', "policy.overload.target_us=80", "policy.overload.drop_us=160",
              'policy.overload.trigger="completion"']


def _run(path, *overrides, short=True):
    o = ["duration_ms=300", "warmup_ms=300"] if short else ["duration_ms=1000", "warmup_ms=1000"]
    return run(path, overrides=[*o, *overrides]).summary


def _conserved(s):
    r = s["requests"]
    assert r["generated"] == r["completed"] + r["dropped"] + r["in_flight"], r


def test_breakwater_collapses_when_only_locks_are_congested():
    """Fig. 9 / §2.2: the locks serve 200 kRPS, the 4 cores 400 kRPS; Breakwater's signal is CPU
    queueing, which the blocked waiters never build up, so at 2× the lock capacity it admits
    everything and goodput collapses while cores idle."""
    low = _run(P50, "load.rps=150000", *BREAKWATER)
    high = _run(P50, "load.rps=400000", *BREAKWATER)
    assert low["goodput_rps"] > 0.9 * 150000, low["goodput_rps"]  # below the lock capacity: all good
    assert high["goodput_rps"] < 0.1 * low["goodput_rps"], high["goodput_rps"]  # collapse
    assert high["cores"]["busy_mean"] < 0.9 * 4, high["cores"]  # the CPU is not what saturates
    assert high["credits"]["aqm_drops"] == 0  # its AQM never fired
    _conserved(high)


def test_protego_keeps_p99_within_target_under_lock_overload():
    """Fig. 9 / 11 at 1.5× the lock capacity: AC + ASQM within the target (10 % margin: the oldest
    waiter's age underestimates a joiner's wait, see claims), AC alone far above it, and ASQM adds
    goodput over AC alone."""
    full = _run(P50, "load.rps=300000", *PROTEGO, *ASQM, short=False)
    ac = _run(P50, "load.rps=300000", *PROTEGO, short=False)
    assert full["latency_us"]["p99"] <= 1.1 * TARGET_US, full["latency_us"]
    assert ac["latency_us"]["p99"] > 2 * TARGET_US, ac["latency_us"]
    assert full["goodput_rps"] > ac["goodput_rps"]
    assert full["lock_control"]["drops"] > 0
    for s in (full, ac):
        _conserved(s)


def test_asqm_drops_before_waiting_and_failure_replies_come_within_the_target():
    """ASQM decides when a request reaches a lock: a dropped request never waits at that lock, so
    with one lock per path and no CPU queueing (measured accumulated delay) a drop's queueing is
    what it waited before reaching the lock, within the budget, and its failure reply reaches the
    client within one RTT of the drop. try_lock never waits at a lock at all."""
    s = run(P50, overrides=["duration_ms=200", "warmup_ms=100", "load.rps=300000", "metrics.record_requests=true",
                            "server.max_cores=64", "server.lock_control.seed=\"measured\"", *ASQM])
    log = s.requests
    dropped = log[log["dropped"] == 1]
    assert len(dropped) > 0
    budget_ns = 134_000
    assert (dropped["queued_ns"] <= budget_ns).all(), dropped["queued_ns"].max()
    assert s.summary["lock_control"]["failure_reply_us"]["p999"] <= TARGET_US
    # Joined requests: every lock wait of theirs started when the lock's queue was within budget.
    waits = s.summary["lock_control"]["locks"]
    assert sum(l["waits"] for l in waits) > 0
    t = _run(P50, "load.rps=300000", 'server.lock_control.mode="try_lock"')
    assert all(l["waits"] == 0 for l in t["lock_control"]["locks"]), "try_lock joined a queue"
    assert t["lock_control"]["drops"] > 0
    _conserved(t)


def test_dropped_set_cleanup_takes_the_slab_lock():
    """Memcached-like VAR above the slab lock's capacity: a SET dropped at its item lock has
    allocated under the slab lock and must re-take it (never dropped) to free its chunk; a SET
    dropped at the slab lock has nothing to free."""
    s = _run(EXP / "memcached-var.toml", "load.rps=1000000", "duration_ms=100", "warmup_ms=50", *ASQM[:1],
             "server.lock_control.budget_us=70", 'server.lock_control.cleanup_lock="slab"',
             "server.lock_control.cleanup_ns=500")
    locks = {l["name"]: l for l in s["lock_control"]["locks"]}
    assert locks["item"]["drops"] > 0 and locks["slab"]["drops"] > 0
    # GETs dropped at an item lock allocated nothing: cleanups are the SETs among the item drops.
    assert 0 < locks["slab"]["cleanups"] <= locks["item"]["drops"]
    assert locks["item"]["cleanups"] == 0
    _conserved(s)


def test_conservation_with_lock_drops_replicas_and_retries():
    """Cleanup threads are no client's requests: they never count as in flight, and every request
    is completed, dropped (after its retry) or in flight, across two replicas, with failure replies
    and credit timeouts both resent (Fig. 8's clients)."""
    s = _run(EXP / "memcached-var.toml", "load.rps=1000000", "duration_ms=100", "warmup_ms=50", *PROTEGO[:1],
             "policy.overload.budget_us=70", "policy.overload.initial_pool=1000", *ASQM[:1],
             "server.lock_control.budget_us=70", 'server.lock_control.cleanup_lock="slab"',
             "server.lock_control.cleanup_ns=500", "server.replicas=2", "clients.retries=1",
             'clients.replica_choice="primary"', "clients.retry_timeouts=true")
    _conserved(s)
    assert s["lock_control"]["drops"] > 0
    assert s["applications"][0]["retries"] > 0
    assert s["nodes"][1]["cores"]["busy_mean"] > 0, "the second replica serves the resent requests"


def test_seda_limits_rates_on_observed_p99():
    """SEDA reacts to the most congested path: bounded tail (within a few targets, the paper's
    incast), but less goodput than Protego at 1.5× the lock capacity (Fig. 9)."""
    seda = _run(P50, "load.rps=300000", 'policy.overload.kind="seda"', "policy.overload.target_us=200",
                short=False)
    prot = _run(P50, "load.rps=300000", *PROTEGO, *ASQM, short=False)
    assert seda["latency_us"]["p99"] < 10 * TARGET_US, seda["latency_us"]
    assert prot["goodput_rps"] > seda["goodput_rps"]


def test_bad_lock_control_names_the_field():
    r = run_cli("run", str(P50), "--set", 'server.lock_control.mode="asqm"')
    assert r.code != 0 and "server.lock_control.budget_us" in r.err
    r = run_cli("run", str(P50), "--set", "server.lock_control.budget_us=10", "--set",
                'server.lock_control.cleanup_lock="nope"')
    assert r.code != 0 and "server.lock_control.cleanup_lock" in r.err
    r = run_cli("run", str(P50), "--set", 'policy.overload.kind="protego"', "--set",
                "policy.overload.efficiency_threshold=2")
    assert r.code != 0 and "policy.overload.efficiency_threshold" in r.err


@pytest.fixture(scope="module")
def quick(all_quick):
    """The quick reproduction, from the suite's one `reproduce --all --quick` run."""
    return all_quick / "protego"


def test_reproduce_protego_quick(quick):
    """The quick run judges every declared claim with the one verdict model: 3 seeds (a CI on
    every verdict), a cause with its evidence on everything not reproduced, and the verdicts the
    model gives by construction (the collapses with goodput 0; Fig. 10 in the paper's regime: the
    requests' work outside the locks saturates the 4 cores at 2 M req/s, as the paper's did from
    1.1 M)."""
    claims = json.loads((quick / "claims.json").read_text(encoding="utf-8"))
    check_claims(claims)
    by = {c["id"]: c for c in claims}
    assert set(by) == {s.id for s in protego.CLAIMS}
    for c in claims:
        assert set(REQUIRED_KEYS) <= c.keys()
        assert c["measured"] is None or math.isfinite(c["measured"])
        assert c["n"] == 3 or c["verdict"] == "out_of_regime" or c["measured"] is None, c
        if c["verdict"] not in ("reproduced", "model_check"):
            assert c["cause"]["evidence"] and "{" not in c["cause"]["text"], c
    for must in ("fig9-breakwater-collapse", "fig11-no-control-collapses"):
        assert by[must]["verdict"] == "reproduced", by[must]
    for fig10 in ("fig10-1us-p99-within-target", "fig10-protego-drops-below-1pct", "fig10-seda-p99-vs-target"):
        c = by[fig10]
        assert c["verdict"] != "out_of_regime", c
        assert c["regime"][0]["value"] >= protego.CPU_SATURATED and c["regime"][0]["holds"], c["regime"]
    for fig13 in ("fig13-usr-below-breakwater", "fig13-usr-below-seda"):
        assert all(r["holds"] for r in by[fig13]["regime"]), by[fig13]["regime"]  # overloaded, CPU-bound
    # Phase I's loss is the sessions left without a credit: the bound the cause quotes holds.
    ev = by["fig9-protego-phase1-served"]["cause"]["evidence"]
    assert ev["predicted_krps"] == pytest.approx(ev["admitted_krps"], rel=0.03), ev
    assert by["fig7-dropped-set-cleanup"]["verdict"] == "model_check" and by["fig7-dropped-set-cleanup"]["passed"]
    # Paper numbers, not directions.
    assert by["fig6-lucene-goodput-vs-seda"]["paper"] == 3.3 and by["fig6-lucene-p99-vs-seda"]["paper"] == 17.0
    assert by["fig11-ac-alone-misses-target"]["paper"] == 3.0 and by["fig13-usr-below-breakwater"]["paper"] == 0.77
    fig7 = pd.read_parquet(quick / "fig7.parquet")
    for col in ("lock_control.locks.slab.cleanups", "lock_control.locks.item.drops", "requests.retried"):
        assert col in fig7.columns, col
    for f in ("results.parquet", "fig7.parquet", "protego_fig9_fig11.png", "protego_fig7.png", "protego_fig12.png",
              "protego_fig13.png"):
        assert (quick / f).is_file(), f


def test_protego_admits_what_its_credited_sessions_send():
    """Below the lock-bound capacity (150 kRPS of 200) a session's one credit idles between its
    requests (150 req/s each), and a session without one loses its requests to the client's
    10 µs timeout (a credit takes a 10 µs round trip): Algorithm 1's pool sinks below the 1000
    sessions (a decrease takes ~20 credits, an increase adds 1) and the sessions it leaves
    uncredited lose their demand; the artifact's rule (grow while every credit is out) keeps
    nearly every session credited."""
    at = ["load.rps=150000", *PROTEGO, *ASQM]
    paper = _run(P50, *at, short=False)
    art = _run(P50, *at, 'policy.overload.variant="artifact"', short=False)
    demand = paper["offered_rps"] * paper["duration_s"]
    c = paper["credits"]
    assert c["pool_mean"] < 1000 and c["drained_mean"] > 30, c
    assert c["client_timeouts"] > 0.03 * demand, c
    admitted = paper["throughput_rps"] + paper["lock_control"]["drops"] / paper["duration_s"]
    assert admitted == pytest.approx((1000 - c["drained_mean"]) * 150, rel=0.03), (admitted, c)
    a = art["credits"]
    assert a["drained_mean"] < 10 and a["client_timeouts"] < 0.015 * demand, a
    assert art["goodput_rps"] > paper["goodput_rps"] + 0.03 * 150000, (art["goodput_rps"], paper["goodput_rps"])


def test_causes_are_read_from_the_results():
    """The same claim on two results gives two causes, each quoting its own run's numbers."""
    from claim_examples.protego import miss

    spec = next(s for s in protego.CLAIMS if s.id == "fig11-ac-alone-misses-target")
    a = judge(spec, miss({("main", ("protego_ac", 400000)): {"latency_us.p99": 5200}}))
    b = judge(spec, miss({("main", ("protego_ac", 400000)): {"latency_us.p99": 4000, "credits.pool_mean": 900.0}}))
    assert a.verdict == b.verdict == "not_reproduced"
    ta, tb = a.extra["cause"]["text"], b.extra["cause"]["text"]
    assert ta != tb
    assert "5,200 µs" in ta and "26×" in ta and "600 credits" in ta
    assert "4,000 µs" in tb and "20×" in tb and "900 credits" in tb
    assert a.extra["cause"]["evidence"]["p99_us"] == pytest.approx(5200, rel=0.02)


def test_server_and_client_drop_rates_are_told_apart():
    """The paper's drop rate is the server's drops over what it received; requests clients gave
    up for lack of a credit are the rest of drop_rate."""
    df = pd.DataFrame([{"throughput_rps": 600.0, "duration_s": 1.0, "lock_control.drops": 200.0,
                        "credits.aqm_drops": 0.0, "drop_rate": 0.4}])
    d = protego.derived(df).iloc[0]
    assert d["server_drop_rate"] == pytest.approx(0.25)  # 200 / (600 + 200)
    # ended = 600 / 0.6 = 1000: 400 dropped, 200 at the server, 200 at the clients
    assert d["client_drop_rate"] == pytest.approx(0.2)


def test_lock_bound_capacities_come_from_the_scenarios():
    c = protego.capacities()
    assert c["main"]["capacity"] == pytest.approx(200000)  # two 10 µs locks, half the requests each
    assert (c["fig5"]["capacity"], c["fig5"]["last"]) == (pytest.approx(125000), pytest.approx(500000))
    assert c["fig6"]["capacity"] == pytest.approx(1e6 / 600) and c["fig6"]["lock"] == "termdocs"
