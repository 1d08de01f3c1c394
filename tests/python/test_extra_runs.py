"""Extra runs declared before a reproduction's sweep (``register(extra_runs=...)``): counted in
its progress from the start, run on one pool after the sweep, read (not run again) by the
analysis, and kept for ``--resume``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from microsched.reproduce.framework import Context, ExtraRuns
from microsched.sweep.spec import SweepSpec

RAN: list[int] = []


def square(x: int) -> int:
    RAN.append(x)
    return x * x


def context(tmp_path: Path, ticks: list, spec: SweepSpec) -> Context:
    # jobs=1: the runs happen in this process, where RAN sees them
    return Context(name="t", spec=spec, results=pd.DataFrame(), aggregate=pd.DataFrame(), out=tmp_path, quick=True,
                   jobs=1, progress=lambda done, total: ticks.append((done, total)), n_runs=3)


@pytest.fixture
def spec() -> SweepSpec:
    from microsched.reproduce.framework import experiments_dir

    return SweepSpec.load(experiments_dir() / "collapse" / "sweep.toml", quick=True)


def test_declared_runs_are_counted_first_run_once_and_read_by_the_analysis(tmp_path, spec):
    RAN.clear()
    ticks: list = []
    ctx = context(tmp_path, ticks, spec)
    batches = [ExtraRuns(square, (2, 3)), ExtraRuns(square, (3, 4))]  # 3 twice: one run
    assert ctx.declare(batches) == 3 and ctx.n_runs == 6
    ctx.n_done = 3  # the sweep's three points
    ctx.run_declared(batches)
    assert sorted(RAN) == [2, 3, 4] and ticks[-1] == (6, 6)
    assert ctx.run_extra(square, [4, 2, 3]) == [16, 4, 9]
    assert sorted(RAN) == [2, 3, 4], "read, not run again"
    assert ctx.undeclared == 0 and ticks[-1] == (6, 6), "counted once"
    # An undeclared run is run, counted on top and reported.
    assert ctx.run_extra(square, [5]) == [25]
    assert ctx.undeclared == 1 and ticks[-1] == (7, 7)


def test_a_resumed_reproduction_reads_its_declared_runs_saved(tmp_path, spec):
    RAN.clear()
    batches = [ExtraRuns(square, (2, 3))]
    first = context(tmp_path, [], spec)
    first.declare(batches)
    first.run_declared(batches)
    RAN.clear()
    ticks: list = []
    again = context(tmp_path, ticks, spec)
    again.declare(batches)
    again.n_done = 3
    again.run_declared(batches)
    assert RAN == [] and ticks == [(5, 5)]
    # A saved run whose side product is gone (kept says no) runs again.
    gone = [ExtraRuns(square, (2, 3), kept=lambda a: a != 3)]
    again.run_declared(gone)
    assert RAN == [3]


def test_the_reproductions_declare_what_their_analysis_runs(tmp_path):
    """Each reproduction's declared runs, from its quick spec alone (no sweep run): the same
    tasks its analysis asks for (checked end to end on the main job: test_main_job)."""
    from microsched.reproduce import get
    from microsched.reproduce.framework import prepared_spec

    from microsched.reproduce import collapse, coresync_timeline, coresync_timeseries, protego

    declared = {}
    for name in ("coresync", "collapse", "protego", "synergy"):
        repro = get(name)
        spec, _ = prepared_spec(repro, quick=True)
        ctx = Context(name=name, spec=spec, results=pd.DataFrame(), aggregate=pd.DataFrame(), out=tmp_path, quick=True)
        declared[name] = (ctx.declare(repro.extra_runs(ctx)), ctx, spec)
    # CoreSync: a series per load and a traced run per timeline variant.
    assert declared["coresync"][0] == len(coresync_timeseries.LOADS) + len(coresync_timeline.VARIANTS)
    # Collapse: Fig. 2's runs at one RTT (every base seed, the fix's first).
    assert declared["collapse"][0] == len(collapse.series_points(declared["collapse"][1])[0]) == len(declared["collapse"][2].seeds) + 1
    # Protego: every point of its sub-sweeps.
    assert declared["protego"][0] == sum(len(p) for p in protego.sub_points(declared["protego"][1], protego.SUBSWEEPS).values()) > 0
    # Synergy: fixed points, one bisection per search and seed, the scaling runs.
    assert declared["synergy"][0] > 3 * len(declared["synergy"][2].seeds)
