"""Replicas and retries in the real runtime (issue 46): `microsched real` with
`server.replicas = 2` starts two `serve` processes on loopback and one load generator that talks
to both (sessions hashed over them, as the simulator does), and the merged summary reports each
replica. One short real run (0.4 s of load at a fifth of one worker's capacity)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from conftest import REPO, microsched_cli as cli, one_line_error

SCEN = str(REPO / "experiments" / "real" / "overload-2x-none.toml")
# One worker per replica: two spinning workers in all, as many as the 2-CPU machine's CPUs.
TWO = ["--set", "server.replicas=2", "--set", "server.max_cores=1", "--set", "clients.retries=1",
       "--set", "duration_ms=400", "--set", "warmup_ms=100", "--set", "runtime.drain_ms=300",
       "--set", "load.rps=2000"]


@pytest.fixture(scope="module")
def two_replicas(tmp_path_factory):
    d = tmp_path_factory.mktemp("replicas")
    rec = d / "record.parquet"
    r = cli("real", SCEN, *TWO, "--record", str(rec), "--json", "--out", str(d / "out"))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout), rec, d


def test_real_starts_one_server_per_replica_and_reports_each(two_replicas):
    s, _, d = two_replicas
    servers = s["runtime"]["servers"]
    assert len(servers) == 2 and servers[0]["addr"] != servers[1]["addr"]
    assert all(a["addr"].startswith("127.") for a in servers)
    assert [n["node"] for n in s["nodes"]] == [0, 1]
    assert s["cores"]["max"] == 2, "the flat cores are the replicas' total"
    # The totals are the simulator's merge of nodes: core time and allocation add up.
    nodes = s["nodes"]
    assert s["core_time"]["total_ns"] == sum(n["core_time"]["total_ns"] for n in nodes)
    assert s["cores"]["allocated_mean"] == pytest.approx(sum(n["cores"]["allocated_mean"] for n in nodes))
    assert s["cpu_utilization"] == pytest.approx(s["cores"]["allocated_mean"] / 2)
    client = s["runtime"]["client"]
    assert s["runtime"]["accounting"]["client_conserved"]
    # Both replicas served (20 sessions hashed over 2) and their completions are the client's.
    done = [a["counters"]["completed"] for a in servers]
    assert min(done) > 0.1 * client["completed"], done
    assert sum(done) >= client["completed"] and s["runtime"]["accounting"]["agree"], s["runtime"]["accounting"]
    per = client["replicas"]
    assert [p["addr"] for p in per] == [a["addr"] for a in servers]
    assert sum(p["completed"] for p in per) == client["completed"]
    assert (d / "out" / "server_report.json").exists() and (d / "out" / "server_report_1.json").exists()


def test_the_records_name_the_replica(two_replicas):
    s, rec, _ = two_replicas
    df = pd.read_parquet(rec)
    ok = df[df["outcome"] == "ok"]
    assert set(ok["replica"]) == {0, 1}
    # A session stays on its replica (no failures here: nothing was retried).
    assert (ok.groupby("session")["replica"].nunique() == 1).all()
    assert set(df["tries"]) == {1} and s["runtime"]["client"]["retries"] == 0


def test_real_counts_every_replicas_workers_against_the_cpus():
    import os

    cpus = len(os.sched_getaffinity(0))
    one_line_error(cli("real", SCEN, "--set", "server.replicas=2", "--set", f"server.max_cores={cpus}",
                       "--set", "duration_ms=100"),
                   "server.max_cores", "server.replicas", "--oversubscribe")


def test_loadgen_needs_one_addr_per_replica():
    one_line_error(cli("loadgen", SCEN, "--set", "server.replicas=2", "--addr", "127.0.0.1:9", "--set",
                       "duration_ms=100"),
                   "--addr", "server.replicas = 2")
