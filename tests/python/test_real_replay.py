"""Per-request records of a real run and their replay in the simulator (issue 46): `real
--record` writes one row per request to Parquet, `workload.replay` makes the simulator offer
exactly those requests, and `real --compare-sim --replay` compares the two request by request.
One short real run (0.6 s of load on loopback)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from conftest import REPO, microsched_cli as cli, one_line_error

SCEN = str(REPO / "experiments" / "real" / "overload-2x-none.toml")
SHORT = ["--set", "duration_ms=500", "--set", "warmup_ms=100", "--set", "runtime.drain_ms=300",
         "--set", "load.rps=4000"]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    d = tmp_path_factory.mktemp("replay")
    rec = d / "record.parquet"
    r = cli("real", SCEN, "--record", str(rec), "--compare-sim", "--replay", "--json", "--out", str(d / "out"), *SHORT)
    assert r.returncode == 0, r.stderr
    return rec, json.loads(r.stdout), d


def test_the_record_has_one_row_per_generated_request(recorded):
    rec, summary, d = recorded
    df = pd.read_parquet(rec)
    for col in ("id", "created_ns", "session", "type", "service_ns", "replica", "tries", "outcome", "latency_ns",
                "server_queue_ns", "server_service_ns", "measured"):
        assert col in df.columns, col
    gen = summary["runtime"]["client"]["generated"]
    assert len(df) == gen and gen > 1500
    assert df["id"].tolist() == list(range(gen)), "generation order, every request once"
    assert df["created_ns"].is_monotonic_increasing
    ok = df[df["outcome"] == "ok"]
    assert len(ok) == summary["runtime"]["client"]["completed"]
    assert (ok["latency_ns"] > 0).all()
    # The server's time (queueing, then from the first start to the response) is part of the
    # latency the client saw, and a served request ran at least what it asked for (the server's
    # clock and the client's are the same clock on loopback).
    assert (ok["latency_ns"] >= ok["server_queue_ns"] + ok["server_service_ns"]).all()
    assert (ok["server_service_ns"] >= ok["service_ns"]).all()
    never_ran = ~df["outcome"].isin(["ok", "lock_dropped", "start_dropped"])
    assert (df.loc[never_ran, "server_service_ns"] == 0).all()
    assert set(df["tries"]) == {1} and set(df["replica"]) == {0}
    # --out keeps them too.
    assert len(pd.read_parquet(d / "out" / "requests.parquet")) == gen


def test_the_simulator_replays_exactly_the_recorded_requests(recorded):
    from microsched.api import run

    rec, _, _ = recorded
    real = pd.read_parquet(rec)
    # A different seed: the replay, not the seed, decides what is offered.
    sim = run(SCEN, seed=999, overrides=[f'workload.replay="{rec}"', "metrics.record_requests=true",
                                         "duration_ms=500", "warmup_ms=100", "load.rps=4000"]).requests
    keys = ["created_ns", "session", "type", "service_ns"]
    s = sim[keys].astype("int64").sort_values(keys).reset_index(drop=True)
    r = real[keys].astype("int64").sort_values(keys).reset_index(drop=True)
    # The simulator logs every request that ended in its run (all of them here: far below capacity).
    assert len(s) >= 0.99 * len(r)
    assert s.merge(r, on=keys, how="left", indicator=True)["_merge"].eq("both").all(), "only recorded requests"
    # Without the replay the same seed offers other requests.
    other = run(SCEN, seed=999, overrides=["metrics.record_requests=true", "duration_ms=500", "warmup_ms=100",
                                           "load.rps=4000"]).requests
    assert not other[keys].astype("int64").head(50).equals(r.head(50))


def test_compare_sim_replay_reports_the_difference_request_by_request(recorded):
    _, summary, d = recorded
    div = summary["replay_divergence"]
    assert div["matched"] >= 0.95 * div["real_completed"] > 0, div
    q = div["diff_us"]
    assert q["p1"] <= q["p50"] <= q["p99"]
    top = div["top"]
    assert 0 < len(top) <= 10
    # Sorted by how much they differ, and each one's time accounted for on both sides.
    assert [abs(t["diff_us"]) for t in top] == sorted((abs(t["diff_us"]) for t in top), reverse=True)
    for t in top:
        assert t["latency_real_us"] - t["latency_sim_us"] == pytest.approx(t["diff_us"])
        assert t["real_queue_us"] + t["real_service_us"] + t["real_rest_us"] == pytest.approx(t["latency_real_us"])
        assert t["real_service_us"] >= t["service_us"]
    assert json.loads((d / "out" / "replay_divergence.json").read_text())["matched"] == div["matched"]


def test_a_bad_replay_file_is_named(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("created_ns,session,type,service_ns\n10,0,7,1000\n")
    r = cli("run", SCEN, "--set", f'workload.replay="{bad}"')
    one_line_error(r, "workload.replay", "type = 7")
    r = cli("real", SCEN, "--replay", *SHORT)
    one_line_error(r, "--replay", "--compare-sim")
