"""The Python API: microsched.run accepts a path, a dict or a Scenario and returns a RunResult."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import microsched
from microsched import RunResult, Scenario
from conftest import SMALL, small, without_wall

TIMESERIES_COLUMNS = {"t_ms", "cores_allocated", "cores_busy", "queue_len", "oldest_delay_us", "arrivals",
                      "completions", "drops"}


def test_exports():
    assert set(microsched.__all__) >= {"run", "Scenario", "RunResult", "schema"}


def test_run_accepts_path_dict_and_scenario(write_scenario):
    path = write_scenario(SMALL)
    results = [
        microsched.run(str(path), seed=3),
        microsched.run(Path(path), seed=3),
        microsched.run(SMALL, seed=3),
        microsched.run(Scenario.from_dict(SMALL), seed=3),
        microsched.run(Scenario.load(path), seed=3),
    ]
    for r in results:
        assert isinstance(r, RunResult)
        assert isinstance(r.summary, dict)
        assert isinstance(r.timeseries, pd.DataFrame)
        assert TIMESERIES_COLUMNS <= set(r.timeseries.columns)
        assert r.requests is None
        assert r.scenario["server"]["max_cores"] == 4
    # the same scenario, however given, is the same run
    first = without_wall(results[0].summary)
    for r in results[1:]:
        assert without_wall(r.summary) == first


def test_run_seed_and_overrides(write_scenario):
    r = microsched.run(SMALL, seed=9, overrides=["server.max_cores=2"])
    assert r.summary["seed"] == 9
    assert r.summary["cores"]["max"] == 2
    assert r.scenario["server"]["max_cores"] == 2
    again = microsched.run(SMALL, seed=9, overrides=["server.max_cores=2"])
    assert without_wall(again.summary) == without_wall(r.summary)


def test_requests_recorded_on_demand():
    r = microsched.run(small(**{"metrics.record_requests": True}))
    assert isinstance(r.requests, pd.DataFrame) and len(r.requests) > 0
    assert {"id", "created_ns", "response_ns", "dropped"} <= set(r.requests.columns)


def test_latency_cdf_is_a_cdf():
    cdf = microsched.run(SMALL).latency_cdf
    assert list(cdf.columns) == ["latency_us", "fraction"]
    assert len(cdf) > 0
    f = cdf["fraction"].to_numpy()
    x = cdf["latency_us"].to_numpy()
    assert np.all(np.diff(f) >= 0) and np.all(np.diff(x) >= 0)
    assert 0 <= f[0] and f[-1] == pytest.approx(1.0, abs=1e-6)


def test_save(tmp_path):
    r = microsched.run(small(**{"metrics.record_requests": True}))
    out = r.save(tmp_path / "res")
    for name in ("summary.json", "scenario.json", "timeseries.parquet", "latency_cdf.png", "requests.parquet"):
        assert (out / name).is_file(), name
    assert json.loads((out / "summary.json").read_text()) == r.summary
    pd.testing.assert_frame_equal(pd.read_parquet(out / "timeseries.parquet"), r.timeseries)


def test_invalid_input_raises_value_error_naming_the_field():
    with pytest.raises(ValueError, match=r"^server\.max_cores: "):
        microsched.run(small(**{"server.max_cores": 0}))
    with pytest.raises(ValueError, match="duration_ms"):
        microsched.run(SMALL, overrides=["duration_ms=-1"])
    with pytest.raises(ValueError, match="bogus"):
        microsched.run(small(bogus=True))
    with pytest.raises(ValueError, match="seed"):
        microsched.run(SMALL, seed=-1)
    # NaN cannot cross JSON: it is encoded and refused by the Rust loader, by field, as in TOML.
    with pytest.raises(ValueError, match=r"^duration_ms: NaN is not allowed"):
        microsched.run(small(duration_ms=float("nan")))


def test_missing_file_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        microsched.run(tmp_path / "missing.toml")
    with pytest.raises(FileNotFoundError):
        Scenario.load(tmp_path / "missing.toml")


def test_run_rejects_other_types():
    with pytest.raises(TypeError):
        microsched.run(42)  # type: ignore[arg-type]


class TestScenario:
    def test_set_returns_a_new_scenario(self):
        s = Scenario.from_dict(SMALL)
        t = s.set("server.max_cores", 8).set("policy.allocator.kind", "static")
        assert s.get("server.max_cores") == 4
        assert t.get("server.max_cores") == 8
        assert t.get("policy.allocator") == {"kind": "static"}
        assert t.to_dict()["load"] == SMALL["load"]
        assert s != t and s == Scenario.from_dict(SMALL)

    def test_set_rejects_bad_keys(self):
        s = Scenario.from_dict(SMALL)
        for key in ("", "a..b", ".a"):
            with pytest.raises(ValueError):
                s.set(key, 1)
        with pytest.raises(ValueError, match="duration_ms"):
            s.set("duration_ms.x", 1)  # duration_ms is a number, not a table

    def test_lists_are_indexed_by_position(self):
        s = Scenario.from_dict(SMALL)
        t = s.set("workload.types.0.service.mean_us", 7)
        assert t.get("workload.types.0.service.mean_us") == 7
        assert s.get("workload.types.0.service.mean_us") != 7
        assert microsched.run(t.set("duration_ms", 5)).scenario["workload"]["types"][0]["service"]["mean_us"] == 7
        with pytest.raises(ValueError, match="out of range"):
            s.set("workload.types.5.name", "x")
        with pytest.raises(ValueError, match="is a list"):
            s.set("workload.types.first.name", "x")
        # The same through --set-style overrides, handled by the native loader.
        r = microsched.run(SMALL | {"duration_ms": 5}, overrides=["workload.types.0.service.mean_us=7"])
        assert r.scenario["workload"]["types"][0]["service"]["mean_us"] == 7

    def test_to_dict_is_a_copy(self):
        s = Scenario.from_dict(SMALL)
        d = s.to_dict()
        d["server"]["max_cores"] = 99
        assert s.get("server.max_cores") == 4
        src = small()
        s2 = Scenario.from_dict(src)
        src["server"]["max_cores"] = 99
        assert s2.get("server.max_cores") == 4

    def test_validate_returns_resolved_dict(self):
        resolved = Scenario.from_dict(SMALL).validate()
        assert resolved["server"]["max_cores"] == 4
        assert "steal_cost_ns" in resolved["server"]  # a default, filled in by the Rust schema
        assert "rtt_us" in resolved["network"]

    def test_validate_raises_naming_the_field(self):
        with pytest.raises(ValueError, match=r"^server\.max_cores"):
            Scenario.from_dict(SMALL).set("server.max_cores", 0).validate()

    def test_load_toml_and_json(self, write_scenario):
        from conftest import to_toml

        t = Scenario.load(write_scenario(to_toml(SMALL), "a.toml"))
        j = Scenario.load(write_scenario(json.dumps(SMALL), "a.json"))
        assert t.to_dict() == j.to_dict() == SMALL
        assert t.base_dir == write_scenario(SMALL).parent

    def test_load_invalid_syntax(self, write_scenario):
        with pytest.raises(ValueError, match="invalid TOML"):
            Scenario.load(write_scenario("duration_ms = = 3\n"))

    def test_base_dir_resolves_relative_csv(self, tmp_path):
        (tmp_path / "s.csv").write_text("1.0\n2.0\n3.0\n")
        d = small(**{"workload.types": [{"name": "e", "service": {"dist": "empirical", "csv": "s.csv"}}]})
        Scenario.from_dict(d, base_dir=tmp_path).validate()
        with pytest.raises(ValueError, match="csv"):
            Scenario.from_dict(d, base_dir=tmp_path / "elsewhere").validate()


def test_schema():
    sch = microsched.schema()
    assert "server" in sch["properties"]
