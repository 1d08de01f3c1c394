"""Rough edges of issue 24, one test (or a few) per edge:

1. `plot` / `report` of a result dataset with a list-valued parameter column
   (`workload.types`, as the coresync and synergy reproductions write);
2. `run_sweep` from a script without a `__main__` guard, and from stdin;
3. numpy scalars wherever a Python number is accepted;
4. `SweepOutcome._repr_html_` shows the key metrics, not the histogram columns;
5. `maxload --json` is valid JSON, and a search whose lowest load misses the SLO says so;
6. a run in which nothing completes reports its latencies as null, not 0;
7. a real run's table does not call the runtime's counters a simulator's;
8. `microsched --help` lists every command once;
9. two request types with the same name are refused, naming the field;
10. LICENSE, py.typed and the stub of the native module exist and are packaged.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import microsched
from conftest import REPO, SMALL, run_cli, small, to_toml

# ---------------------------------------------------------------------------------------------
# 1. list-valued parameter columns


def _types(mean_us: float, name: str = "exp") -> list[dict]:
    return [{"name": name, "service": {"dist": "exponential", "mean_us": mean_us}}]


def _list_column_dataset(d: Path) -> Path:
    """A small results.parquet as a reproduction writes it (no schema metadata: the parameters
    are the columns before `scenario`), whose `workload.types` column holds lists of tables
    and takes two values."""
    rows = []
    for i, (mean, name) in enumerate([(10.0, "exp10"), (1.0, "exp1")]):
        for load in (0.3, 0.6):
            for seed in (1, 2):
                lat = mean * (1 + load) * (1 + 0.01 * seed)
                rows.append({
                    "point": len(rows), "variant": "v", "workload.types": _types(mean, name),
                    "load.fraction": load, "seed": seed, "scenario": "s", "offered_rps": 1e5 * load,
                    "throughput_rps": 1e5 * load, "goodput_rps": 0.99e5 * load, "drop_rate": 0.0,
                    "latency_us.p50": lat, "latency_us.p99": 3 * lat, "latency_us.p999": 5 * lat,
                    "slowdown.p99": 3.0 + load, "cores.allocated_mean": 4.0 * load, "cpu_utilization": load,
                })
    d.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(d / "results.parquet", index=False)
    return d


def test_plot_and_report_of_a_list_valued_column(tmp_path):
    from microsched import plots
    from microsched.report import build_report

    d = _list_column_dataset(tmp_path / "repro")
    data = plots.load(d)
    assert "workload.types" in data.params
    assert "workload.types" in data.varying  # two distinct lists of types
    paths = plots.plot(d, out=tmp_path / "figs")
    assert sorted(p.name for p in paths if p.suffix == ".png") == [
        "latency.png", "pareto.png", "slowdown.png", "throughput.png"]
    page = build_report(d).read_text(encoding="utf-8")
    assert "exp10" in page and "exp1" in page  # the parameter's values label the rows
    assert "figure latency skipped" not in page and "cannot read" not in page


def test_plot_and_report_cli_of_a_list_valued_column(tmp_path):
    d = _list_column_dataset(tmp_path / "repro")
    r = run_cli("plot", d, "--kind", "latency")
    assert r.code == 0, r.err
    assert (d / "plots" / "latency.png").is_file()
    r = run_cli("report", d)
    assert r.code == 0, r.err
    assert (d / "report.html").is_file()


def test_aggregate_groups_on_array_valued_parameters():
    """A list read back from Parquet is a numpy array; grouping on it must not fail."""
    from microsched.sweep.runner import aggregate

    df = pd.DataFrame({"types": [np.array([1, 2]), np.array([1, 2]), np.array([3])], "x": [1.0, 3.0, 5.0]})
    agg = aggregate(df, ["types"], ["x"])
    assert agg["x"].tolist() == [2.0, 5.0]
    assert agg["n"].tolist() == [2, 1]


# ---------------------------------------------------------------------------------------------
# 2. run_sweep at the top level of a script, and from stdin


def _sweep_script(tmp_path: Path) -> str:
    (tmp_path / "base.toml").write_text(to_toml(small(duration_ms=5.0, warmup_ms=1.0)), encoding="utf-8")
    spec = {"name": "top", "base": "base.toml", "grid": {"load.fraction": [0.3, 0.5]}, "seeds": [1, 2]}
    # No `if __name__ == "__main__":` guard: spawned workers must not run this again.
    return (f"import microsched\n"
            f"out = microsched.run_sweep({spec!r}, 'out', jobs=2)\n"
            f"print('ROWS', len(out.results), sorted(out.results['load.fraction'].unique().tolist()))\n")


def _run_python(args: list[str], cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONWARNINGS="default")
    return subprocess.run([sys.executable, *args], cwd=cwd, input=stdin, capture_output=True, text=True,
                          timeout=300, env=env)


def test_run_sweep_at_the_top_level_of_a_script(tmp_path):
    (tmp_path / "sweep_script.py").write_text(_sweep_script(tmp_path), encoding="utf-8")
    p = _run_python(["sweep_script.py"], tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "ROWS 4 [0.3, 0.5]" in p.stdout
    assert p.stdout.count("ROWS") == 1  # the script ran once, not once per worker
    assert len(list((tmp_path / "out" / "parts").glob("*.parquet"))) == 4


def test_run_sweep_from_stdin(tmp_path):
    p = _run_python(["-"], tmp_path, stdin=_sweep_script(tmp_path))
    assert p.returncode == 0, p.stderr[-3000:]
    assert "ROWS 4 [0.3, 0.5]" in p.stdout


# ---------------------------------------------------------------------------------------------
# 3. numpy scalars


def test_scenario_set_accepts_numpy_scalars():
    s = microsched.Scenario.from_dict(SMALL)
    s = (s.set("server.max_cores", np.int64(2)).set("load.fraction", np.float32(0.25))
         .set("network.rtt_us", np.float64(12.0)).set("clients.sessions", np.uint16(7)))
    resolved = s.validate()
    assert resolved["server"]["max_cores"] == 2 and isinstance(resolved["server"]["max_cores"], int)
    assert resolved["load"]["fraction"] == 0.25
    assert resolved["network"]["rtt_us"] == 12.0
    assert resolved["clients"]["sessions"] == 7
    # a numpy array as a whole list value, and a numpy bool
    s2 = microsched.Scenario.from_dict(small(**{"metrics.record_requests": np.bool_(True)}))
    assert s2.validate()["metrics"]["record_requests"] is True
    assert json.loads(s.to_json())["server"]["max_cores"] == 2


def test_run_accepts_a_numpy_seed():
    a = microsched.run(SMALL, seed=np.int64(3)).summary
    b = microsched.run(SMALL, seed=3).summary
    assert a["seed"] == 3
    assert a["latency_us"] == b["latency_us"]
    with pytest.raises(ValueError, match=r"seed: .* use an integer in 0..2\^64-1"):
        microsched.run(SMALL, seed=np.float64(3.5))
    with pytest.raises(ValueError, match=r"seed: .* use an integer"):
        microsched.run(SMALL, seed=np.int64(-1))


def test_sweep_spec_accepts_numpy_values(tmp_path):
    from microsched.sweep import SweepSpec

    (tmp_path / "base.toml").write_text(to_toml(SMALL), encoding="utf-8")
    spec = SweepSpec.from_dict({"name": "np", "base": str(tmp_path / "base.toml"),
                                "grid": {"load.fraction": list(np.array([0.25, 0.5])),
                                         "server.max_cores": [np.int64(2)],
                                         "metrics.record_requests": [np.bool_(False)]},
                                "seeds": np.int64(2)}, tmp_path / "spec.toml")
    points = spec.points()
    assert len(points) == 4
    assert "load.fraction=0.25" in points[0].overrides
    assert "server.max_cores=2" in points[0].overrides
    assert "metrics.record_requests=false" in points[0].overrides
    assert [p.seed for p in points[:2]] == [1, 2]
    spec = SweepSpec.from_dict({"name": "np", "base": str(tmp_path / "base.toml"),
                                "seeds": [np.uint64(5), np.int32(6)]}, tmp_path / "spec.toml")
    assert [p.seed for p in spec.points()] == [5, 6]


def test_max_load_accepts_numpy_numbers():
    from microsched.maxload import metric_value

    assert metric_value({"a": {"b": np.float32(2.5)}}, "a.b") == 2.5
    assert metric_value({"a": np.int64(3)}, "a") == 3.0


# ---------------------------------------------------------------------------------------------
# 4. SweepOutcome in Jupyter


def test_sweep_outcome_html_shows_key_metrics_not_histograms(tmp_path):
    (tmp_path / "base.toml").write_text(to_toml(small(duration_ms=5.0)), encoding="utf-8")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        out = microsched.run_sweep({"name": "html", "base": "base.toml", "grid": {"load.fraction": [0.3, 0.6]},
                                    "seeds": [1]}, tmp_path / "out", jobs=1)
    finally:
        os.chdir(cwd)
    assert any(c.startswith("histograms.") for c in out.results.columns)  # they are in the data
    page = out._repr_html_()
    assert "histograms." not in page
    assert len(page) < 20_000  # no base64 blobs
    for header in ("load.fraction", "p50 (µs)", "p99 (µs)", "p99.9 (µs)", "throughput (req/s)",
                   "goodput (req/s)", "drop rate", "LC cores"):
        assert header in page, header
    p99 = out.results["latency_us.p99"].tolist()
    assert f"{p99[0]:,.1f}" in page or f"{p99[0]:.3g}" in page


# ---------------------------------------------------------------------------------------------
# 5. maxload


def test_maxload_json_is_valid_json_and_says_when_no_load_meets_the_slo(write_scenario):
    path = write_scenario(small(duration_ms=5.0))
    # An SLO no load can meet (a slowdown below 1): even --lo misses it.
    r = run_cli("maxload", path, "--slo", "0.5", "--seeds", "1", "--lo", "0.3", "--hi", "0.6", "--json")
    assert r.code == 0, r.err
    assert "NaN" not in r.out and "Infinity" not in r.out
    res = json.loads(r.out)  # strict JSON
    assert res["meets_slo"] is False
    assert res["load"] is None and res["rps"] is None
    assert res["load_ci95"] is None
    assert res["seeds"][0]["meets_at_lo"] is False
    r = run_cli("maxload", path, "--slo", "0.5", "--seeds", "1", "--lo", "0.3", "--hi", "0.6")
    assert r.code == 0, r.err
    head = r.out.splitlines()[0]
    assert "no load in [0.300, 0.600]" in head and "meets" in head, head
    assert "of capacity =" not in head


def test_maxload_json_one_seed_has_null_ci(write_scenario):
    path = write_scenario(small(duration_ms=5.0))
    r = run_cli("maxload", path, "--metric", "latency_us.p99", "--slo", "10000", "--seeds", "1", "--lo", "0.2",
                "--hi", "0.4", "--json")
    assert r.code == 0, r.err
    res = json.loads(r.out)
    assert res["meets_slo"] is True
    assert res["load"] == pytest.approx(0.4)
    assert res["load_ci95"] is None and res["rps_ci95"] is None  # one seed: no interval
    assert res["rps"] > 0


# ---------------------------------------------------------------------------------------------
# 6. nothing completes


def _nothing_completes() -> dict:
    # The round trip (RTT 50 ms) is longer than the run: requests are sent, none comes back.
    return small(**{"network.rtt_us": 50_000.0, "duration_ms": 5.0, "warmup_ms": 0.0})


def test_a_run_where_nothing_completes_reports_null_latency():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = microsched.run(_nothing_completes()).summary
    assert s["requests"]["completed"] == 0
    for section in ("latency_us", "queueing_delay_us", "slowdown"):
        assert s[section] and all(v is None for v in s[section].values()), (section, s[section])
    for t in s["by_type"]:
        assert t["completed"] == 0 and t["latency_us"]["p99"] is None
    # a run where requests complete keeps its numbers
    ok = microsched.run(SMALL).summary
    assert ok["latency_us"]["p99"] > 0 and ok["slowdown"]["p50"] >= 1


def test_a_sweep_row_where_nothing_completes_has_missing_latency(tmp_path):
    from microsched.sweep.engine import Task, run_task

    text = json.dumps(_nothing_completes())
    row = run_task(Task(id="x", index=0, text=text, fmt="json", base_dir=str(tmp_path), overrides=(), seed=1))
    assert row["requests.completed"] == 0
    assert row["latency_us.p99"] is None and row["slowdown.p999"] is None


def test_cli_run_json_where_nothing_completes(write_scenario):
    r = run_cli("run", write_scenario(_nothing_completes()), "--json")
    assert r.code == 0, r.err
    s = json.loads(r.out)
    assert s["latency_us"]["p99"] is None


# ---------------------------------------------------------------------------------------------
# 9. duplicate request type names


def _two_types(second: str) -> dict:
    return small(**{"workload.types": [
        {"name": "get", "ratio": 0.5, "service": {"dist": "exponential", "mean_us": 5.0}},
        {"name": second, "ratio": 0.5, "service": {"dist": "exponential", "mean_us": 50.0}}]})


DUP = r"workload\.types\[1\]\.name: `get` is already the name of workload\.types\[0\]"


def test_duplicate_request_type_names_are_refused():
    with pytest.raises(ValueError, match=DUP):
        microsched.validate(_two_types("get"))
    with pytest.raises(ValueError, match=DUP):
        microsched.run(_two_types("get"))
    with pytest.raises(ValueError, match=DUP):
        microsched.Scenario.from_dict(_two_types("get")).validate()
    # set by an override, too
    with pytest.raises(ValueError, match=DUP):
        microsched.run(_two_types("put"), overrides=["workload.types.1.name=get"])
    assert microsched.validate(_two_types("put"))["workload"]["types"][1]["name"] == "put"


def test_duplicate_request_type_names_in_an_application_are_refused():
    d = small()
    app = {"name": "b", "load": {"fraction": 0.2}, "workload": _two_types("get")["workload"]}
    d["applications"] = [app]
    with pytest.raises(ValueError, match=r"applications\[0\]\.workload\.types\[1\]\.name: `get`"):
        microsched.validate(d)


def test_duplicate_request_type_names_cli_and_sweep(write_scenario, tmp_path):
    path = write_scenario(_two_types("get"))
    r = run_cli("validate", path)
    assert r.code == 2
    assert "workload.types[1].name: `get` is already the name of workload.types[0]" in r.err
    r = run_cli("run", path)
    assert r.code == 2 and "workload.types[1].name" in r.err
    ok = write_scenario(_two_types("put"), name="ok.toml")
    spec = tmp_path / "spec.toml"
    spec.write_text(f'name = "dup"\nbase = "{ok.name}"\nseeds = 1\n[grid]\n"workload.types.1.name" = ["x", "get"]\n',
                    encoding="utf-8")
    r = run_cli("sweep", spec, "--out", tmp_path / "out")
    assert r.code == 2, r.err
    assert "workload.types[1].name: `get`" in r.err
    assert not (tmp_path / "out" / "parts").exists() or not any((tmp_path / "out" / "parts").iterdir())


# ---------------------------------------------------------------------------------------------
# 10. license, py.typed, the native module's stub


def test_license_file_is_mit_and_declared():
    import tomllib

    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License")
    assert "Copyright (c) 2026 microsched developers" in text
    assert "THE SOFTWARE IS PROVIDED \"AS IS\"" in text
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == "MIT"
    assert project["license-files"] == ["LICENSE"]


def test_package_is_typed():
    pkg = Path(microsched.__file__).parent
    assert (pkg / "py.typed").is_file()
    assert (pkg / "_native.pyi").is_file()


def test_native_stub_matches_the_module():
    """Every function of microsched._native is in the stub, with the same parameters and
    defaults (`...` in the stub where the native default is a fresh list), and nothing else."""
    import ast
    import inspect

    import microsched._native as native

    tree = ast.parse((Path(microsched.__file__).parent / "_native.pyi").read_text(encoding="utf-8"))
    stubs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    exceptions = [n for n in native.__all__ if isinstance(getattr(native, n), type)]
    assert sorted(stubs) == sorted(n for n in native.__all__ if n not in exceptions)
    assert set(exceptions) <= classes
    for name, node in stubs.items():
        params = inspect.signature(getattr(native, name)).parameters
        args = node.args.args
        assert [a.arg for a in args] == list(params), name
        defaults = [None] * (len(args) - len(node.args.defaults)) + node.args.defaults
        for a, d in zip(args, defaults):
            want = params[a.arg].default
            if want is inspect.Parameter.empty:
                assert d is None, (name, a.arg)
            else:
                assert d is not None, (name, a.arg)
                got = ast.literal_eval(d)
                assert got == want or (got is Ellipsis and want is Ellipsis), (name, a.arg, got, want)
    assert ast.literal_eval(next(n.value for n in tree.body if isinstance(n, ast.Assign)
                                 and n.targets[0].id == "__all__")) == list(native.__all__)


def test_source_distribution_holds_license_and_typing_files(tmp_path):
    """With maturin at hand (the build backend), the source distribution carries LICENSE (and
    PKG-INFO declares it), py.typed and the stub; the wheel takes the same python/ tree."""
    import shutil
    import tarfile

    maturin = shutil.which("maturin")
    if maturin is None:
        pytest.skip("maturin is not installed (pip install maturin to run this check)")
    p = subprocess.run([maturin, "sdist", "-o", str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    (sdist,) = tmp_path.glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
        pkg_info = tar.extractfile(next(m for m in tar.getmembers() if m.name.endswith("/PKG-INFO"))).read().decode()
    assert {"LICENSE", "python/microsched/py.typed", "python/microsched/_native.pyi"} <= names
    assert "License-Expression: MIT" in pkg_info and "License-File: LICENSE" in pkg_info


# ---------------------------------------------------------------------------------------------
# 8. microsched --help


def test_help_lists_every_command_once():
    from microsched.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    commands = list(sub.choices)
    assert {"run", "sweep", "harvest", "harvest-pods", "real"} <= set(commands)
    r = run_cli("--help")
    assert r.code == 0 and r.err == ""
    lines = r.out.splitlines()
    for name in commands:
        # each command heads exactly one line of the listing: its name, then its summary
        heads = [ln for ln in lines if ln.split()[:1] == [name]]
        assert len(heads) == 1, (name, heads)
    assert r.out.count("commands:") == 1
    assert "positional arguments" not in r.out
    # no command without its summary on the same line (argparse wraps names longer than the column)
    for ln in lines:
        if ln.split()[:1] and ln.split()[0] in commands:
            assert len(ln.split()) > 1, ln
    # the "a command is required" message names every command too
    r = run_cli()
    assert r.code == 2
    for name in commands:
        assert name in r.err, name


# ---------------------------------------------------------------------------------------------
# 7. a real run's table


def test_a_real_run_table_does_not_call_the_runtime_a_simulator(capsys):
    from microsched.cli.render import print_summary

    sim = microsched.run(SMALL).summary
    print_summary(sim)
    out = capsys.readouterr().out
    assert "simulator: " in out and " events" in out  # a simulated run keeps its line
    # A real run's summary (`microsched real`): a runtime section, and the load generator's
    # datagrams counted in `sim.events`.
    real = dict(sim, runtime={"accounting": {}, "client": {}},
                sim={"events": 1696, "wall_s": 1.25, "requests_per_wall_s": 800.0})
    print_summary(real)
    out = capsys.readouterr().out
    assert "simulator" not in out and "sim. requests" not in out
    assert "load generator: 1,696 datagrams" in out


def test_a_scenario_warning_is_said_once_per_sweep_not_once_per_point(recwarn):
    from microsched.reproduce.spec import SweepSpec
    from microsched.sweep.runner import run_points

    spec = SweepSpec.load(REPO / "experiments" / "collapse" / "sweep.toml", quick=True)
    points = [p for p in spec.points() if p.params.get("variant") == "baseline"][:3]
    points = [type(p)(**{**p.__dict__, "overrides": tuple(p.overrides) + ("duration_ms=2", "warmup_ms=1")})
              for p in points]
    df = run_points(points, jobs=1)
    assert len(df) == 3 and "__warnings__" not in df.columns
    msgs = [str(w.message) for w in recwarn.list if "alpha_mode" in str(w.message)]
    assert len(msgs) == 1, msgs


def test_the_experiments_ship_with_the_package_and_reproduce_finds_them_anywhere(tmp_path):
    """A wheel (`pip install .`, not editable) has no checkout around it: the experiment specs
    live in the package (`microsched/experiments`, which the repository's `experiments` links to),
    and `reproduce` finds them from any directory."""
    pkg = Path(microsched.__file__).parent / "experiments"
    assert (REPO / "experiments").resolve() == pkg.resolve()
    assert (pkg / "coresync" / "sweep.toml").is_file()
    r = subprocess.run([sys.executable, "-c", "import microsched.reproduce; "
                        "from microsched.reproduce.framework import experiments_dir, REGISTRY, spec_path; "
                        "print(experiments_dir()); print(sum(spec_path(x).is_file() for x in REGISTRY.values()))"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    where, n = r.stdout.split()
    assert Path(where).resolve() == pkg.resolve() and int(n) >= 7, r.stdout


def test_the_claims_table_in_a_pipe_is_log_width_not_stretched():
    """In a pipe the console is unbounded so that messages never wrap; the claims table must not
    stretch its claim column to that width (it used to pad each line to hundreds of columns)."""
    import io

    from rich.console import Console

    from microsched.cli.render import UNWRAPPED_WIDTH
    from microsched.reproduce.claims import PIPE_TABLE_WIDTH, print_claims

    claim = {"id": "c", "claim": "a claim " * 60, "paper": 1.0, "kind": "ratio", "verdict": "not_reproduced",
             "measured": 2.0, "ci95": 0.1, "tolerance": "×/÷ 1.25",
             "cause": {"text": "a cause " * 80, "evidence": {}}}
    buf = io.StringIO()
    print_claims([claim], console=Console(file=buf, width=UNWRAPPED_WIDTH, soft_wrap=True))
    lines = buf.getvalue().splitlines()
    assert max(map(len, lines)) <= PIPE_TABLE_WIDTH
    assert any("a cause" in line for line in lines[3:]) and len(lines) > 6  # wrapped inside its cell


def test_a_sweep_spec_given_as_a_scenario_is_named_as_such(tmp_path):
    # `run`/`validate` of a sweep spec used to fail on the scenario schema's "unknown field `base`".
    spec = tmp_path / "spec.toml"
    spec.write_text('name = "x"\nbase = "base.toml"\nseeds = 2\n[grid]\n"load.fraction" = [0.5]\n')
    for cmd in ("run", "validate"):
        p = subprocess.run([sys.executable, "-m", "microsched", cmd, str(spec)], capture_output=True, text=True)
        assert p.returncode == 2, p.stderr
        assert "a sweep spec" in p.stderr and "microsched sweep" in p.stderr and "base.toml" in p.stderr, p.stderr
    import microsched

    with pytest.raises(ValueError, match="a sweep spec"):
        microsched.Scenario.load(spec)
    with pytest.raises(ValueError, match="a sweep spec"):
        microsched.run(spec)


def test_reproduce_all_shares_an_odd_jobs_count_without_an_idle_core():
    from microsched.reproduce.framework import next_share

    # Two started together on 3 jobs: 2 then 1; when the first ends, its successor gets 2 back.
    assert next_share(3, [], 2) == 2
    assert next_share(3, [2], 2) == 1
    assert next_share(3, [1], 2) == 2
    assert [next_share(4, [], 2), next_share(4, [2], 2)] == [2, 2]
    assert next_share(2, [1], 2) == 1
