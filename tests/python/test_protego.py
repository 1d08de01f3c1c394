"""Protego (issue 14) on scaled-down seeded runs: lock-level drops (ASQM, try_lock), Protego's
admission control, SEDA, and `microsched reproduce protego --quick`.

Bounds are the paper's qualitative claims, each with the reason for its margin beside it; the
runs are short (hundreds of ms simulated) and deterministic (seed 1).
"""

from __future__ import annotations

import json
import math

import pytest

from conftest import REPO, run_cli
from microsched.api import run
from microsched.reproduce.claims import REQUIRED_KEYS, check_claims

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
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("repro") / "protego"
    r = run_cli("reproduce", "protego", "--quick", "--out", out, "--jobs", "2")
    assert r.code == 0, r.err
    return out


def test_reproduce_protego_quick(quick):
    claims = json.loads((quick / "claims.json").read_text(encoding="utf-8"))
    check_claims(claims)
    by = {c["id"]: c for c in claims}
    for c in claims:
        assert set(REQUIRED_KEYS) <= c.keys()
        assert c["measured"] is None or math.isfinite(c["measured"])
    for must in ("fig9-breakwater-collapse", "fig11-no-control-collapses", "fig11-ac-alone-misses-target",
                 "fig7-dropped-set-cleanup"):
        assert by[must]["holds"], by[must]
    for f in ("results.parquet", "fig7.parquet", "protego_fig9_fig11.png", "protego_fig7.png", "protego_fig12.png",
              "protego_fig13.png"):
        assert (quick / f).is_file(), f
