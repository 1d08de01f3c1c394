"""`--trace` on run, real and serve (issue 45): the trace reads back with the run's own counts,
its bounds are honoured and said, and the timeline renders."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from microsched import api
from microsched.trace import DEFAULT_MAX_EVENTS, read_trace, render_timeline

REPO = Path(__file__).resolve().parents[2]
CORESYNC = str(REPO / "experiments" / "coresync" / "base.toml")
REAL = str(REPO / "experiments" / "real" / "overload-2x-none.toml")
SHORT = ["--set", "warmup_ms=2", "--set", "duration_ms=6"]


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "microsched", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=timeout)


def test_run_trace_reads_back_with_the_summary(tmp_path):
    path = tmp_path / "t.json"
    r = cli("run", CORESYNC, "--json", *SHORT, "--trace", str(path), "--trace-window", "2:8")
    assert r.returncode == 0, r.stderr
    assert f"written to {path}" in r.stderr
    summary = json.loads(r.stdout)
    tl = read_trace(path)
    assert tl.meta["source"] == "simulator" and tl.meta["window_ms"] == [2.0, 8.0]
    assert tl.meta["truncated"] is None
    # A track per core, parks and credit cuts as the summary counts them over its window (the
    # trace's window is the measured window here).
    assert tl.core_tracks() == [f"core {k}" for k in range(summary["cores"]["max"])]
    parks = tl.instants[tl.instants["name"] == "park"]
    assert len(parks) == summary["parking"]["parks"]
    assert set(parks["arg"]) <= {"parked at once", "parked after cut", "parked without credits"}
    cuts = tl.instants[tl.instants["name"] == "credit cut"]
    assert len(cuts) == summary["parking"]["gate"]["cuts"] > 0
    assert cuts["arg"].sum() == summary["parking"]["gate"]["credits_cut"]
    # Every core's slices tile the window: no gap, no overlap.
    cores = tl.slices[tl.slices["track"].str.startswith("core ")]
    for _, g in cores.groupby("track"):
        g = g.sort_values("start_us")
        ends = (g["start_us"] + g["dur_us"]).round(3).tolist()
        assert g["start_us"].round(3).tolist()[1:] == ends[:-1]
        assert g["start_us"].iloc[0] == 2000.0 and ends[-1] == 8000.0
    assert {"cores allocated", "queue length", "credit pool", "credits issued"} <= set(tl.counters["name"])


def test_traced_and_untraced_runs_give_the_same_summary(tmp_path):
    over = ["warmup_ms=2", "duration_ms=4"]
    plain = api.run(CORESYNC, seed=5, overrides=over).summary
    traced = api.run(CORESYNC, seed=5, overrides=over, trace=tmp_path / "t.json")
    assert traced.trace["path"].endswith("t.json") and traced.trace["window_ms"] == (2.0, 6.0)
    for s in (plain, traced.summary):
        s.pop("sim")
    assert plain == traced.summary


def test_the_size_cap_is_said_on_stderr_and_in_the_metadata(tmp_path):
    path = tmp_path / "t.json"
    r = cli("run", CORESYNC, *SHORT, "--trace", str(path), "--trace-max-events", "300")
    assert r.returncode == 0, r.stderr
    assert "the size cap (--trace-max-events) cut the trace at" in r.stderr
    tl = read_trace(path)
    assert tl.meta["truncated"]["at_ms"] >= 2.0 and tl.meta["events"] == 300


@pytest.mark.parametrize("flag, value, needle", [
    ("--trace-window", "5", "--trace-window"),
    ("--trace-window", "8:3", "--trace-window"),
    ("--trace-max-events", "0", "--trace-max-events"),
])
def test_bad_trace_bounds_are_one_line_errors(tmp_path, flag, value, needle):
    r = cli("run", CORESYNC, *SHORT, "--trace", str(tmp_path / "t.json"), flag, value)
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.stderr


def test_a_window_after_the_run_names_the_flag(tmp_path):
    r = cli("run", CORESYNC, *SHORT, "--trace", str(tmp_path / "t.json"), "--trace-window", "50:60")
    assert r.returncode != 0 and "--trace-window: starts at 50 ms" in r.stderr
    assert not (tmp_path / "t.json").exists()


def test_help_states_the_defaults():
    out = cli("run", "--help").stdout
    assert "--trace-max-events" in out and f"{DEFAULT_MAX_EVENTS:,}" in out and "first 20 ms" in out


def test_render_timeline_draws_a_png(tmp_path):
    path = tmp_path / "t.json"
    api.run(CORESYNC, seed=1, overrides=["warmup_ms=2", "duration_ms=3"], trace=path)
    png = render_timeline(path, tmp_path / "t.png", window=(2.0, 3.0))
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_real_trace_on_loopback_has_the_simulators_layout(tmp_path):
    # One worker, 1 s: the runtime's trace has the simulator's track names and reads back.
    path = tmp_path / "real.json"
    r = cli("real", REAL, "--set", "server.max_cores=1", "--set", "load.rps=2000", "--set", "warmup_ms=100",
            "--set", "duration_ms=1000", "--json", "--trace", str(path), "--oversubscribe", timeout=90)
    assert r.returncode == 0, r.stderr
    assert "trace: " in r.stderr and "written to" in r.stderr
    summary = json.loads(r.stdout)
    tl = read_trace(path)
    assert tl.meta["source"] == "runtime" and tl.meta["truncated"] is None
    assert tl.core_tracks() == ["core 0"]
    done = tl.slices[tl.slices["cat"] == "request"]
    served = tl.slices[tl.slices["activity"] == "request"]
    # The default window is the whole run: every request the server completed has its slice
    # (or is counted as not drawn, when more than 256 were in the server at once), and ran on
    # core 0.
    completed = summary["runtime"]["accounting"]["server_completed"]
    assert completed > 500 and len(done) + tl.meta["requests_not_drawn"] == completed
    assert set(done["request"]) <= set(served["request"])
    assert "cores allocated" in set(tl.counters["name"])


def test_coresync_timeline_figure_draws_both_policies(tmp_path):
    from microsched.reproduce import coresync_timeline

    assert coresync_timeline.main([str(tmp_path)]) == 0
    png = tmp_path / coresync_timeline.FIGURE
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    cs = read_trace(tmp_path / "trace_exp10_coresync_0.5.json")
    sh = read_trace(tmp_path / "trace_exp10_shenango_0.5.json")
    assert cs.meta["allocator"] == "coresync" and sh.meta["allocator"] != "coresync"
    assert cs.meta["window_ms"] == sh.meta["window_ms"] == list(coresync_timeline.WINDOW_MS)


def test_coresync_timeline_runs_are_extra_runs_of_its_reproduction(tmp_path, monkeypatch):
    """The timeline's two traced runs go through the reproduction's pool (Context.run_extra): they
    count in its progress, a resumed reproduction reads them saved instead of running them again,
    and one whose trace file is gone runs again (the figure is drawn from the traces)."""
    import pandas as pd

    import microsched.api as api
    from microsched.reproduce import coresync_timeline
    from microsched.reproduce.framework import Context, experiments_dir
    from microsched.sweep.spec import SweepSpec

    spec = SweepSpec.load(experiments_dir() / "coresync" / "sweep.toml")
    runs: list[int] = []
    simulate = api._simulate

    def counted(*args, **kwargs):
        runs.append(1)
        return simulate(*args, **kwargs)

    monkeypatch.setattr(api, "_simulate", counted)

    def context(ticks: list) -> Context:  # jobs=1: the runs happen in this process, where they are counted
        return Context(name="coresync", spec=spec, results=pd.DataFrame(), aggregate=pd.DataFrame(), out=tmp_path,
                       quick=True, jobs=1, progress=lambda done, total: ticks.append((done, total)))

    ticks: list = []
    assert coresync_timeline.write(context(ticks)) == tmp_path / coresync_timeline.FIGURE
    assert len(runs) == 2 and ticks[-1] == (2, 2)
    ticks = []
    coresync_timeline.write(context(ticks))
    assert len(runs) == 2 and ticks == [(2, 2)], "saved: read, not run again"
    gone = tmp_path / "trace_exp10_shenango_0.5.json"
    gone.unlink()
    coresync_timeline.write(context([]))
    assert len(runs) == 3 and gone.is_file()
