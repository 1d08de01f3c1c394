"""The tutorial's Python allocator (examples/policies/delay_hysteresis.py) goes wherever a
built-in goes (issue 43): `run`, `compare` (runs in a process pool), a local `sweep` (process
pool) whose spec names the policy's file relative to itself while the sweep runs from another
folder, `maxload`, and a sweep on a local Ray cluster, whose workers run in a directory of their
own: the rows are the local pool's, bit for bit (wall-clock columns aside)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from conftest import REPO, run_cli
from microsched.sweep import WALL_COLUMNS

TUTORIAL = REPO / "examples" / "policies" / "delay_hysteresis.py"
CLASS = "DelayHysteresis"
BASE = REPO / "experiments" / "allocators" / "base.toml"
SHORT = ["--set", "duration_ms=10", "--set", "warmup_ms=2"]


def without_wall(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=[c for c in WALL_COLUMNS if c in df.columns])


def test_run(tmp_path: Path) -> None:
    r = run_cli("run", BASE, "--json", *SHORT, "--set", "policy.allocator.kind=python",
                "--set", f"policy.allocator.class={TUTORIAL}:{CLASS}", "--set", "load.fraction=0.3")
    assert r.code == 0, r.err
    s = json.loads(r.out)
    assert 1 <= s["cores"]["allocated_mean"] < 16  # it revokes cores the load does not need
    assert s["requests"]["completed"] > 0


def test_compare_on_a_process_pool() -> None:
    # The class path relative to the current folder (the repository), as a user types it.
    r = run_cli("compare", REPO / "examples" / "my-server.toml", "--variant", "shenango:policy.allocator.kind=shenango",
                "--variant", f"hysteresis:policy.allocator.kind=python,policy.allocator.class="
                             f"examples/policies/delay_hysteresis.py:{CLASS}",
                "--loads", "0.5", "--seeds", "2", "--jobs", "2", "--json", "--set", "duration_ms=10")
    assert r.code == 0, r.err
    rows = json.loads(r.out)
    assert {x["variant"] for x in rows} == {"hysteresis"} and {x["baseline"] for x in rows} == {"shenango"}
    cores = next(x for x in rows if x["metric"] == "cores.allocated_mean")
    assert cores["mean"] != cores["baseline_mean"]  # not the baseline run twice


def write_spec(folder: Path) -> Path:
    """A spec beside its own copy of the policy, named relative to the spec."""
    (folder / "pol").mkdir(parents=True)
    (folder / "pol" / "hyst.py").write_text(TUTORIAL.read_text(encoding="utf-8"), encoding="utf-8")
    spec = folder / "spec.toml"
    spec.write_text(f'''name = "py-policy"
base = "{BASE}"
seeds = 2
overrides = ["duration_ms=5", "warmup_ms=1"]
[grid]
"load.fraction" = [0.3, 0.9]
[[variants]]
name = "shenango"
set = ["policy.allocator.kind=shenango"]
[[variants]]
name = "hysteresis"
set = ["policy.allocator.kind=python", "policy.allocator.class=pol/hyst.py:{CLASS}"]
''', encoding="utf-8")
    return spec


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("spec")
    spec = write_spec(folder)
    out = folder / "local"
    r = run_cli("sweep", spec, "--out", out, "--jobs", "2")  # from the repository, not the spec's folder
    assert r.code == 0, r.err
    return spec, out


def test_local_sweep_finds_the_file_relative_to_the_spec(local_sweep: tuple[Path, Path]) -> None:
    spec, out = local_sweep
    df = pd.read_parquet(out / "results.parquet")
    assert len(df) == 8 and sorted(df["variant"].unique()) == ["hysteresis", "shenango"]
    hyst = df[df["variant"] == "hysteresis"]
    # the file the spec names, made absolute; the policy ran (its own cores, not Shenango's)
    assert set(hyst["policy.allocator.class"]) == {f"{spec.parent.resolve() / 'pol' / 'hyst.py'}:{CLASS}"}
    shen = df[df["variant"] == "shenango"].set_index(["load.fraction", "seed"])["cores.allocated_mean"]
    assert (hyst.set_index(["load.fraction", "seed"])["cores.allocated_mean"] != shen).all()


def test_maxload(tmp_path: Path) -> None:
    # Relative to the scenario's folder, as in a scenario file.
    r = run_cli("maxload", REPO / "examples" / "my-server.toml", "--set", "duration_ms=10",
                "--set", "policy.allocator.kind=python", "--set", f"policy.allocator.class=policies/delay_hysteresis.py:{CLASS}",
                "--seeds", "2", "--jobs", "2", "--metric", "latency_us.p99", "--slo", "100", "--tol", "0.05", "--json",
                cwd=tmp_path)
    assert r.code == 0, r.err
    res = json.loads(r.out)
    assert res["meets_slo"] and 0.05 < res["load"] < 1.0 and res["n"] == 2, res


def test_sweep_on_a_local_ray_cluster(local_sweep: tuple[Path, Path], tmp_path: Path) -> None:
    ray = pytest.importorskip("ray", reason="ray is in the test extra: pip install -e '.[test]'")
    spec, out = local_sweep
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING")
    try:
        r = run_cli("sweep", spec, "--out", tmp_path / "ray", "--backend", "ray", "--jobs", "2")
        assert r.code == 0, r.err
    finally:
        ray.shutdown()
    pool = pd.read_parquet(out / "results.parquet")
    on_ray = pd.read_parquet(tmp_path / "ray" / "results.parquet")
    pd.testing.assert_frame_equal(without_wall(pool), without_wall(on_ray))
