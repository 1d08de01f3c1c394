"""``compare``: policies side by side on a user's scenario, paired by seed (CLI and Python)."""

from __future__ import annotations

import json

import pytest

import microsched
from microsched.comparison import CompareError

from conftest import run_cli, small


def test_python_compare_returns_paired_dataframes_and_figures(tmp_path):
    scen = small(**{"duration_ms": 20.0})
    c = microsched.compare(scen, {"central": [], "percore": ["server.queue=per_core"]}, loads=[0.5, 0.9], seeds=3,
                           jobs=1)
    assert set(c.results["variant"]) == {"central", "percore"} and len(c.results) == 2 * 2 * 3
    p99 = c.paired[(c.paired["metric"] == "latency_us.p99")]
    assert sorted(p99["load.fraction"]) == [0.5, 0.9] and set(p99["variant"]) == {"percore"}
    assert (p99["n"] == 3).all()
    # per-core queues wait longer than one central queue at high load (a core can idle while another queues)
    hi = p99[p99["load.fraction"] == 0.9].iloc[0]
    assert hi["ratio"] > 1.1 and hi["significant"]
    paths = c.plot(tmp_path)
    assert [p.name for p in paths] == ["compare_latency.png", "compare_cores.png"]
    assert all(p.stat().st_size > 5000 for p in paths)


def test_the_same_seed_offers_the_same_requests_to_every_variant():
    scen = small(**{"duration_ms": 10.0})
    c = microsched.compare(scen, {"a": [], "b": ["server.max_cores=4"]}, loads=[0.5], seeds=2, jobs=1)
    g = c.paired[c.paired["metric"] == "throughput_rps"].iloc[0]
    assert g["diff"] == 0 and g["diff_ci95"] == 0  # identical variants: every paired difference is exactly 0


def test_cli_compare_prints_a_table_per_load_and_writes_json(tmp_path, write_scenario):
    scen = write_scenario(small(**{"duration_ms": 10.0}))
    r = run_cli("compare", str(scen), "--variant", "central", "--variant", "percore:server.queue=per_core",
            "--loads", "0.4,0.8", "--seeds", "2", "--jobs", "1", "--json", "--out", str(tmp_path / "o"))
    assert r.code == 0, r.err
    rows = json.loads(r.out)
    assert {x["load.fraction"] for x in rows} == {0.4, 0.8} and {x["variant"] for x in rows} == {"percore"}
    assert (tmp_path / "o" / "paired.csv").is_file() and (tmp_path / "o" / "compare_latency.png").is_file()
    r = run_cli("compare", str(scen), "--variant", "central", "--variant", "percore:server.queue=per_core",
                "--seeds", "2", "--jobs", "1")
    assert r.code == 0 and "paired by seed" in r.out


@pytest.mark.parametrize("variants,kw,match", [
    ({"only": []}, {}, "at least two"),
    ({"a": [], "b": []}, {"baseline": "c"}, "baseline"),
    ({"a": [], "b": []}, {"seeds": 1}, "seeds"),
    ({"a": [], "b": []}, {"loads": [0.5, -1]}, "loads"),
])
def test_bad_input_names_the_argument(variants, kw, match):
    with pytest.raises(CompareError, match=match):
        microsched.compare(small(), variants, **kw)


def test_cli_bad_variant_is_one_line(write_scenario):
    scen = write_scenario(small())
    r = run_cli("compare", str(scen), "--variant", "a", "--variant", "b:server.queue")
    assert r.code == 2 and "is not KEY=VALUE" in r.err and r.err.count("\n") == 1
