"""The reproductions' data path (issue 47): one way to start worker processes, workers that import
only what they use, finished runs saved in batches that read back exactly, and coresync's modules
without an import circle."""

from __future__ import annotations

import ast
import math
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from conftest import REPO

PKG = REPO / "python" / "microsched"
MMC = REPO / "experiments" / "validation" / "mmc.toml"
SHORT = ("duration_ms=3", "warmup_ms=1")
ENV = dict(os.environ, PYTHONPATH=str(REPO / "python"), PYTHONWARNINGS="ignore")


def _calls(path: Path) -> set[str]:
    """The dotted names a module calls (``multiprocessing.get_context``, ``ProcessPoolExecutor``)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            f = node.func
            parts = []
            while isinstance(f, ast.Attribute):
                parts.append(f.attr)
                f = f.value
            if isinstance(f, ast.Name):
                parts.append(f.id)
            names.add(".".join(reversed(parts)))
    return names


def test_worker_processes_start_in_one_place() -> None:
    """Every pool and start method is sweep.runner's (spawn, workers that die with their driver):
    no other module builds a ProcessPoolExecutor or picks a start method (synergy and maxload
    forked a default pool without PR_SET_PDEATHSIG, protego's spawned workers outlived a killed
    driver)."""
    starts = {"ProcessPoolExecutor", "multiprocessing.get_context", "multiprocessing.Pool", "mp.Pool",
              "multiprocessing.Process", "os.fork"}
    where = {str(p.relative_to(PKG)): sorted(_calls(p) & starts) for p in PKG.rglob("*.py")
             if p.name != "harvest_agent.py"}  # the agent's own helper processes are not workers
    offenders = {k: v for k, v in where.items() if v and k != "sweep/runner.py"}
    assert not offenders, offenders
    assert where["sweep/runner.py"], "the pool lives in sweep/runner.py"


def test_coresync_modules_import_each_other_at_the_top_only() -> None:
    """No import of a coresync module inside a function (what used to break the circle), and
    coresync_data, which the others read, imports none of them."""
    for p in PKG.glob("reproduce/coresync*.py"):
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and node.level == 1:
                    assert not (node.module or "").startswith("coresync") and not any(
                        a.name.startswith("coresync") for a in node.names), (p.name, fn.name, ast.unparse(node))
    data = ast.parse((PKG / "reproduce" / "coresync_data.py").read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(data) if isinstance(n, ast.ImportFrom)}
    assert not any((m or "").startswith("coresync") for m in imported), imported


@pytest.mark.parametrize("module", ["coresync_report", "coresync_timeseries", "coresync"])
def test_each_coresync_module_imports_first(module: str) -> None:
    """Any of them can be the first imported (a circle broken by late imports fails one order)."""
    code = f"import microsched.reproduce.{module} as m; print(m.__name__)"
    r = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def _imports_of(code: str) -> set[str]:
    r = subprocess.run([sys.executable, "-c", code + "\nimport sys; print(' '.join(sorted(sys.modules)))"],
                       env=ENV, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return set(r.stdout.split())


def test_a_point_worker_runs_without_pandas() -> None:
    """A sweep's or reproduction's worker runs its point without importing pandas, pyarrow or
    the reproductions (0.6–0.8 s per worker before)."""
    code = ("from microsched.sweep.worker import run_point\nfrom microsched.sweep.spec import Point\n"
            f"row = run_point(Point(0, {str(MMC)!r}, 1, {SHORT!r}, {{'variant': 'a'}}))\n"
            "assert row['variant'] == 'a' and row['throughput_rps'] > 0")
    mods = _imports_of(code)
    assert not {"pandas", "pyarrow", "microsched.reproduce", "matplotlib"} & mods, \
        sorted({"pandas", "pyarrow", "microsched.reproduce", "matplotlib"} & mods)


def test_extra_run_workers_run_without_pandas() -> None:
    """The extra runs' tasks (a time series, a summary, a bisection) import neither pandas nor
    the reproductions in the worker."""
    code = ("from microsched.sweep.worker import series_of, summary_of\nfrom microsched.maxload import _bisect_args\n"
            f"cols = series_of(({str(MMC)!r}, 1, {SHORT!r}, ('t_ms', 'cores_busy')))\n"
            f"s = summary_of(({str(MMC)!r}, 1, {SHORT!r}))\n"
            f"b = _bisect_args(({str(MMC)!r}, 1, 1e9, 'latency_us.p99', {SHORT!r}, 0.5, 0.6, 0.2))\n"
            "assert len(cols['t_ms']) > 0 and s['throughput_rps'] > 0 and b['probes']")
    mods = _imports_of(code)
    assert not {"pandas", "pyarrow", "microsched.reproduce"} & mods


def test_worker_results_equal_the_api_run() -> None:
    """What the lean workers return is what ``run`` gives: the summary, the time-series columns."""
    from microsched.api import run, run_series, run_summary

    res = run(MMC, seed=3, overrides=list(SHORT))
    s = run_summary(MMC, seed=3, overrides=list(SHORT))
    assert {k: v for k, v in s.items() if k != "sim"} == {k: v for k, v in res.summary.items() if k != "sim"}
    cols = run_series(MMC, ("t_ms", "cores_busy", "no_such_column"), seed=3, overrides=list(SHORT))
    pd.testing.assert_frame_equal(pd.DataFrame(cols), res.timeseries[["t_ms", "cores_busy"]].copy())


def test_saved_rows_read_back_exactly(tmp_path: Path) -> None:
    """A batch's rows read back as written (an int stays an int, NaN stays NaN, a key absent from
    one row stays absent, a string column beside a number one), older single-row parts too, and a
    batch cut short (its temporary file) is dropped."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from microsched.reproduce.parts import RowStore

    parts = tmp_path / "parts"
    store = RowStore(parts)
    rows = {"a": {"variant": "x", "n": 3, "v": math.nan, "s": "on"}, "b": {"variant": "y", "n": 2.5, "s": 7}}
    for pid, row in rows.items():
        store.add(pid, row)
    store.flush()
    pq.write_table(pa.Table.from_pylist([{"point_id": "c", "variant": "z", "n": 1}]), parts / "c.parquet")
    (parts / "batches" / ".00009.123.tmp").write_bytes(b"cut")
    got = RowStore(parts).load(["a", "b", "c", "d"], single_row_parts=["c"])
    assert set(got) == {"a", "b", "c"}
    assert got["a"]["n"] == 3 and isinstance(got["a"]["n"], int) and math.isnan(got["a"]["v"])
    assert got["b"] == {"variant": "y", "n": 2.5, "s": 7} and got["c"] == {"variant": "z", "n": 1}
    assert not list((parts / "batches").glob(".*.tmp"))
    # A second store on the same directory appends batches, it does not overwrite them.
    more = RowStore(parts)
    more.add("d", {"variant": "w"})
    more.flush()
    assert set(RowStore(parts).load(["a", "b", "d"])) == {"a", "b", "d"}
