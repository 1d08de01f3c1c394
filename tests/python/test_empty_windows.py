"""A statistic with nothing under it is null, with a warning saying why: judged on the measured
window (requests that completed during the warm-up, or after the window in a real run's drain,
do not count), in the simulator and in `microsched real`, which counts a request's completion in
the window when it completes inside it, as the simulator does."""

from __future__ import annotations

import json

from conftest import REPO, microsched_cli as cli, to_toml

COLLAPSE = str(REPO / "experiments" / "collapse" / "base.toml")


def _json(stdout: str) -> dict:
    return json.loads(stdout)


def test_sim_requests_completed_only_in_the_warmup_give_null_latency_and_a_warning():
    # The case: 33 requests complete in the warm-up, none in the window.
    r = cli("run", COLLAPSE, "--set", "duration_ms=10", "--set", "warmup_ms=2", "--set", "server.steal_cost_ns=1e15",
            "--json", timeout=120)
    assert r.returncode == 0, r.stderr
    s = _json(r.stdout)
    assert s["requests"]["completed"] > 0, "the case needs completions outside the window"
    assert s["throughput_rps"] == 0
    for key in ("latency_us", "queueing_delay_us", "slowdown"):
        assert all(v is None for v in s[key].values()), (key, s[key])
    assert all(v is None for v in s["by_type"][0]["latency_us"].values())
    assert "no request completed in the measured window" in r.stderr and "warm-up" in r.stderr, r.stderr


def test_sim_jitter_longer_than_the_run_warns_before_and_after():
    r = cli("run", COLLAPSE, "--set", "duration_ms=20", "--set", "network.jitter_us=1e15", "--json", timeout=120)
    assert r.returncode == 0, r.stderr
    s = _json(r.stdout)
    assert s["throughput_rps"] == 0 and s["latency_us"]["p99"] is None
    assert "network.jitter_us:" in r.stderr and "no request completed in the measured window" in r.stderr, r.stderr


def test_sim_normal_run_has_no_empty_window_warning():
    r = cli("run", str(REPO / "experiments" / "collapse" / "base.toml"), "--set", "duration_ms=5", "--set",
            "warmup_ms=1", "--json", timeout=120)
    assert r.returncode == 0, r.stderr
    assert _json(r.stdout)["latency_us"]["p99"] > 0
    assert "no request completed" not in r.stderr


def test_real_counts_completions_inside_the_window_as_the_simulator(tmp_path):
    # Requests of 90 ms sent during a 60 ms window: every one completes after it (in the drain).
    # Counted by send time (as before), they gave a latency for a window in which nothing
    # completed; counted by completion time, as the simulator does, the window is empty.
    scen = tmp_path / "late.toml"
    scen.write_text(to_toml({
        "name": "late", "duration_ms": 60.0, "warmup_ms": 0.0, "slo_us": 1e6,
        "server": {"max_cores": 2}, "network": {"rtt_us": 50.0}, "clients": {"sessions": 4},
        "load": {"rps": 200.0},
        "workload": {"types": [{"name": "c90ms", "service": {"dist": "constant", "value_us": 90000.0}}]},
        "policy": {"allocator": {"kind": "static"}, "overload": {"kind": "none"}},
        "runtime": {"request_timeout_ms": 5000.0, "drain_ms": 2000.0},
    }), encoding="utf-8")
    r = cli("real", str(scen), "--json", timeout=120)
    assert r.returncode == 0, r.stderr
    s = _json(r.stdout)
    assert s["requests"]["completed"] > 0, s["requests"]
    assert s["throughput_rps"] == 0
    assert all(v is None for v in s["latency_us"].values()), s["latency_us"]
    assert "no request completed in the measured window" in r.stderr, r.stderr
    # The simulator agrees: nothing completes in its window either.
    r = cli("run", str(scen), "--json", timeout=120)
    assert _json(r.stdout)["throughput_rps"] == 0 and "no request completed" in r.stderr
