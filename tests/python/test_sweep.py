"""Sweeps (`microsched sweep`), plots (`microsched plot`) and the HTML report (`microsched
report`), issue 7.

* the smoke spec writes one row per run with every parameter and every summary metric;
* the same points give identical rows on the local pool and on a local Ray cluster started
  here (wall-clock columns aside);
* a sweep killed midway (SIGKILL of its process group once the first parts exist) loses no
  finished point, and `--resume` completes it without duplicates, with the rows an
  uninterrupted sweep gives;
* malformed specs (unknown parameter, empty grid, unknown spec key) fail with one line and
  exit status 2 before anything runs (the output directory is not even created);
* `plot` writes PNG + SVG of every kind; `report` renders in headless chromium (DOM has the
  tables, the screenshot is not blank) and needs no network.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import REPO, run_cli
from microsched.sweep import WALL_COLUMNS, SpecError, SweepSpec, point_id, prepare
from microsched.sweep.engine import PARTS_DIR

SMOKE = REPO / "experiments" / "sweeps" / "smoke.toml"
BASE = REPO / "experiments" / "allocators" / "base.toml"


def write_spec(tmp_path: Path, body: str, name: str = "spec.toml") -> Path:
    p = tmp_path / name
    p.write_text(f'base = "{BASE}"\n' + body, encoding="utf-8")
    return p


def without_wall(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=[c for c in WALL_COLUMNS if c in df.columns])


@pytest.fixture(scope="module")
def smoke_dir(tmp_path_factory) -> Path:
    """The smoke sweep, run once on the local pool with 2 jobs."""
    out = tmp_path_factory.mktemp("smoke") / "out"
    r = run_cli("sweep", SMOKE, "--out", out, "--jobs", "2")
    assert r.code == 0, r.err
    return out


# ---------------------------------------------------------------------------------------------
# the result store


def test_smoke_sweep_writes_one_row_per_run(smoke_dir: Path) -> None:
    spec = SweepSpec.load(SMOKE)
    n = len(spec.points())
    assert n == 3 * 2 * 2  # loads × policies × seeds
    df = pd.read_parquet(smoke_dir / "results.parquet")
    assert len(df) == n and df["point_id"].is_unique
    assert len(list((smoke_dir / PARTS_DIR).glob("*.parquet"))) == n
    # every parameter ...
    for c in ("variant", "load.fraction", "policy.allocator.kind", "duration_ms", "seed"):
        assert c in df.columns, c
    assert sorted(df["variant"].unique()) == ["caladan", "shenango"]
    assert sorted(df["load.fraction"].unique()) == [0.3, 0.6, 0.9]
    assert sorted(df["seed"].unique()) == [1, 2]
    # ... and every summary metric, flattened
    for c in ("throughput_rps", "goodput_rps", "drop_rate", "latency_us.p50", "latency_us.p99",
              "latency_us.p999", "slowdown.p99", "cores.allocated_mean", "cpu_utilization", "be_cores_mean",
              "requests.generated", "core_time.total_ns", *WALL_COLUMNS):
        assert c in df.columns, c
    assert (df["requests.completed"] > 0).all()
    # rows are in spec order; the point id is the hash of the overrides and seed
    pts = spec.points()
    assert df["point_id"].tolist() == [point_id(p.overrides, p.seed) for p in pts]
    agg = pd.read_parquet(smoke_dir / "aggregate.parquet")
    assert len(agg) == n // 2 and (agg["n"] == 2).all() and "latency_us.p99.ci95" in agg
    meta = json.loads((smoke_dir / "sweep.json").read_text())
    assert meta["finished"] and meta["points"] == n and "seed" in meta["params"]
    assert (smoke_dir / "spec.toml").is_file() and (smoke_dir / "scenario.json").is_file()


def test_point_id_is_stable_and_distinct() -> None:
    a = point_id(["load.fraction=0.5", "policy.allocator.kind=caladan"], 1)
    assert a == point_id(("load.fraction=0.5", "policy.allocator.kind=caladan"), 1)
    assert a != point_id(["load.fraction=0.5", "policy.allocator.kind=caladan"], 2)
    assert a != point_id(["policy.allocator.kind=caladan", "load.fraction=0.5"], 1)  # order: the last wins
    assert len(a) == 16


def test_same_rows_on_local_pool_and_ray(tmp_path: Path, smoke_dir: Path) -> None:
    ray = pytest.importorskip("ray", reason="ray is in the test extra: pip install -e '.[test]'")
    local1 = tmp_path / "local1"
    r = run_cli("sweep", SMOKE, "--out", local1, "--jobs", "1")
    assert r.code == 0, r.err
    # address="local": a new local cluster, whatever else runs on this machine
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING")
    try:
        r = run_cli("sweep", SMOKE, "--out", tmp_path / "ray", "--backend", "ray", "--jobs", "2")
        assert r.code == 0, r.err
        assert ray.is_initialized()  # a session started by the caller is left to the caller
    finally:
        ray.shutdown()
    pool = pd.read_parquet(smoke_dir / "results.parquet")
    serial = pd.read_parquet(local1 / "results.parquet")
    on_ray = pd.read_parquet(tmp_path / "ray" / "results.parquet")
    assert len(on_ray) == len(pool) == 12
    pd.testing.assert_frame_equal(without_wall(pool), without_wall(on_ray))
    pd.testing.assert_frame_equal(without_wall(pool), without_wall(serial))
    # and the parts themselves are the same rows
    for p in (smoke_dir / PARTS_DIR).glob("*.parquet"):
        q = tmp_path / "ray" / PARTS_DIR / p.name
        pd.testing.assert_frame_equal(without_wall(pd.read_parquet(p)), without_wall(pd.read_parquet(q)))


def test_killed_sweep_resumes_without_duplicates(tmp_path: Path) -> None:
    # 16 points of ~0.2 s each on 2 workers: several seconds, killed after the first parts land.
    spec = write_spec(tmp_path, """
name = "killme"
seeds = 2
overrides = ["duration_ms=300", "warmup_ms=5", "policy.allocator.kind=shenango"]
[grid]
"load.fraction" = [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
""")
    n = 16
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    proc = subprocess.Popen([sys.executable, "-m", "microsched.cli", "sweep", str(spec), "--out", str(out),
                             "--jobs", "2"], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    parts = out / PARTS_DIR
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if parts.is_dir() and len(list(parts.glob("*.parquet"))) >= 2:
                break
            time.sleep(0.02)
        assert proc.poll() is None, f"the sweep ended before it could be killed: {proc.communicate()}"
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its pool workers, at once
    finally:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.communicate(timeout=60)
    done = {p.stem for p in parts.glob("*.parquet")}
    assert 2 <= len(done) < n, len(done)
    assert not (out / "results.parquet").exists()
    saved = {pid: pd.read_parquet(parts / f"{pid}.parquet") for pid in done}

    # without --resume the directory is refused (nothing is overwritten) ...
    r = run_cli("sweep", spec, "--out", out, "--jobs", "2")
    assert r.code == 2 and "--resume" in r.err and len(r.err.strip().splitlines()) == 1
    # ... with --resume only the missing points run
    r = run_cli("sweep", spec, "--out", out, "--jobs", "2", "--resume")
    assert r.code == 0, r.err
    assert f"{len(done)} of {n} points already done" in " ".join(r.out.split())
    df = pd.read_parquet(out / "results.parquet")
    assert len(df) == n and df["point_id"].is_unique
    assert len(list(parts.glob("*.parquet"))) == n and not list(parts.glob(".*"))
    for pid, row in saved.items():  # finished points were kept, not re-run
        pd.testing.assert_frame_equal(pd.read_parquet(parts / f"{pid}.parquet"), row)
    meta = json.loads((out / "sweep.json").read_text())
    assert meta["skipped_points"] == len(done) and meta["run_points"] == n - len(done)

    # the resumed dataset is the one an uninterrupted sweep gives
    fresh = tmp_path / "fresh"
    r = run_cli("sweep", spec, "--out", fresh, "--jobs", "2")
    assert r.code == 0, r.err
    pd.testing.assert_frame_equal(without_wall(df), without_wall(pd.read_parquet(fresh / "results.parquet")))

    # a second --resume runs nothing and changes nothing
    r = run_cli("sweep", spec, "--out", out, "--resume")
    assert r.code == 0 and "0 point(s) run" in " ".join(r.out.split())
    assert len(pd.read_parquet(out / "results.parquet")) == n


# ---------------------------------------------------------------------------------------------
# malformed specs: one line, exit 2, nothing run


BAD_SPECS = {
    "unknown-parameter-grid": ('[grid]\n"load.fractio" = [0.5, 0.6]\n', "load.fractio"),
    "unknown-parameter-variant": ('[grid]\n"load.fraction" = [0.5]\n[[variants]]\nname = "x"\n'
                                  'set = ["policy.allocator.kind=shenango", "policy.allocator.bogus=1"]\n',
                                  "policy.allocator"),
    # a static allocator has no poll period: the native schema would ignore the key, the sweep refuses it
    "parameter-of-another-kind": ('overrides = ["policy.allocator.kind=static"]\n'
                                  '[grid]\n"policy.allocator.poll_us" = [2, 5]\n', "policy.allocator.poll_us"),
    "bad-value": ('[grid]\n"server.max_cores" = [4, 0]\n', "server.max_cores"),
    "empty-grid-list": ('[grid]\n"load.fraction" = []\n', "grid.load.fraction"),
    "empty-grid-table": ("[grid]\n", "grid"),
    "unknown-spec-key": ('gird = 1\n[grid]\n"load.fraction" = [0.5]\n', "gird"),
    "duplicate-point": ('[grid]\n"load.fraction" = [0.5, 0.5]\n', "same run"),
    "missing-base": (None, "base"),
}


@pytest.mark.parametrize("case", sorted(BAD_SPECS))
def test_malformed_spec_fails_before_anything_runs(tmp_path: Path, case: str) -> None:
    body, needle = BAD_SPECS[case]
    if body is None:
        spec = tmp_path / "spec.toml"
        spec.write_text('base = "nope.toml"\n[grid]\n"load.fraction" = [0.5]\n', encoding="utf-8")
    else:
        spec = write_spec(tmp_path, 'overrides = ["duration_ms=5"]\n' + body if not body.startswith("overrides")
                          else body.replace('overrides = ["', 'overrides = ["duration_ms=5", "'))
    out = tmp_path / "out"
    r = run_cli("sweep", spec, "--out", out)
    assert r.code == 2, (r.code, r.out, r.err)
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("microsched: error: "), r.err
    assert needle in lines[0], lines[0]
    assert not out.exists(), "nothing may run (or be written) for a malformed spec"


def test_every_reproduction_is_a_valid_sweep_spec() -> None:
    from microsched import reproduce
    from microsched.reproduce.framework import spec_path

    assert reproduce.names()
    for name in reproduce.names():
        spec, tasks = prepare(spec_path(reproduce.get(name)), quick=True)
        assert tasks, name
        full = SweepSpec.load(spec_path(reproduce.get(name)))
        assert len(full.points()) >= len(tasks), name
    r = run_cli("reproduce", "--list")
    assert r.code == 0 and "experiments/" in r.out


def test_bad_backend_arguments(tmp_path: Path) -> None:
    r = run_cli("sweep", SMOKE, "--address", "auto", "--out", tmp_path / "a")
    assert r.code == 2 and "--address" in r.err
    # an address nobody listens on fails at once (Ray itself would retry for minutes), writing nothing
    t0 = time.monotonic()
    r = run_cli("sweep", SMOKE, "--backend", "ray", "--address", "127.0.0.1:1", "--out", tmp_path / "b")
    assert r.code == 2 and "no Ray cluster answers" in r.err and time.monotonic() - t0 < 30
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    r = run_cli("sweep", SMOKE, "--backend", "spark")
    assert r.code == 2 and "invalid choice" in r.err
    with pytest.raises(SpecError):
        SweepSpec.from_dict({"base": str(BASE), "grid": {}}, SMOKE)


def test_real_driver_runs_points_on_the_real_runtime_one_at_a_time(tmp_path: Path) -> None:
    """`--driver real`: every point is a `microsched real` run (server and load generator
    processes on loopback); rows carry the summary keys of the simulator's plus `runtime.*`."""
    base = REPO / "experiments" / "real" / "overload-2x-none.toml"
    spec = tmp_path / "real.toml"
    spec.write_text(f'base = "{base}"\nseeds = 1\noverrides = ["duration_ms=300", "warmup_ms=50", '
                    f'"runtime.drain_ms=100"]\n[grid]\n"load.rps" = [1000, 3000]\n', encoding="utf-8")
    # One at a time on this machine: anything else is refused before anything runs.
    for extra, needle in ((["--jobs", "2"], "--jobs: 2 is not allowed with --driver real"),
                          (["--backend", "ray"], "--backend local")):
        r = run_cli("sweep", spec, "--driver", "real", "--out", tmp_path / "bad", *extra)
        assert r.code == 2 and needle in r.err, r.err
    assert not (tmp_path / "bad").exists()
    out = tmp_path / "out"
    r = run_cli("sweep", spec, "--driver", "real", "--out", out)
    assert r.code == 0, r.err
    df = pd.read_parquet(out / "results.parquet")
    assert list(df["load.rps"]) == [1000, 3000]
    # Below capacity every request completes, and client and server agree on the count.
    assert (df["requests.completed"] == df["requests.generated"]).all()
    assert (df["runtime.accounting.agree"]).all()
    assert (df["runtime.server.completed_rps"] > 0).all()
    assert json.loads((out / "sweep.json").read_text())["driver"] == "real"
    # The simulator's results cannot complete a real sweep, nor the other way round.
    r = run_cli("sweep", spec, "--out", out, "--resume")
    assert r.code == 2 and "--driver real" in r.err, r.err


# ---------------------------------------------------------------------------------------------
# plots


def _is_png(p: Path) -> bool:
    return p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_writes_png_and_svg_for_every_kind(smoke_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "plots"
    r = run_cli("plot", smoke_dir, "--out", out)
    assert r.code == 0, r.err
    for kind in ("latency", "throughput", "pareto", "slowdown"):
        png, svg = out / f"{kind}.png", out / f"{kind}.svg"
        assert _is_png(png) and png.stat().st_size > 10_000, kind
        assert "<svg" in svg.read_text(encoding="utf-8")[:2000], kind
    svg = (out / "latency.svg").read_text(encoding="utf-8")
    assert "µs" in svg and "Shenango" in svg  # axis units and the variant labels
    # explicit --kind / --x / --hue on the results file
    r = run_cli("plot", smoke_dir / "results.parquet", "--kind", "latency", "--x", "load.fraction",
                "--hue", "policy.allocator.kind", "--out", tmp_path / "p2")
    assert r.code == 0, r.err
    assert sorted(p.name for p in (tmp_path / "p2").iterdir()) == ["latency.png", "latency.svg"]
    for args, needle in ((["--kind", "nope"], "unknown kind"), (["--x", "nope"], "nope"),
                         (["--kind", "timeseries"], "single run")):
        r = run_cli("plot", smoke_dir, *args, "--out", tmp_path / "bad")
        assert r.code == 2 and needle in r.err and len(r.err.strip().splitlines()) == 1, r.err


def test_a_figure_with_more_curves_than_the_limit_is_refused_with_the_count(smoke_dir: Path, tmp_path: Path) -> None:
    from microsched import plots as P

    # The smoke sweep has two curves (one per policy): a limit of one refuses each figure by
    # name and count; the limit the report uses draws them.
    with pytest.raises(P.PlotError, match=r"2 curves \(one per variant\), more than one figure shows legibly \(1\)"):
        P.plot(smoke_dir, kinds=["latency"], out=tmp_path / "one", max_curves=1)
    assert not (tmp_path / "one").exists() or not list((tmp_path / "one").iterdir())
    assert [p.name for p in P.plot(smoke_dir, kinds=["latency"], out=tmp_path / "two", formats=("png",), max_curves=2)] \
        == ["latency.png"]


def test_plot_time_series_of_a_run(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    r = run_cli("run", BASE, "--set", "duration_ms=20", "--set", "warmup_ms=2", "--set", "load.fraction=1.1",
                "--set", "policy.allocator.kind=caladan", "--set", "policy.overload.kind=breakwater",
                "--out", run_dir)
    assert r.code == 0, r.err
    r = run_cli("plot", run_dir)
    assert r.code == 0, r.err
    assert _is_png(run_dir / "plots" / "timeseries.png")
    svg = (run_dir / "plots" / "timeseries.svg").read_text(encoding="utf-8")
    for label in ("cores", "credits", "queued requests", "drops", "simulated time (ms)"):
        assert label in svg, label
    r = run_cli("plot", run_dir, "--kind", "latency")
    assert r.code == 2 and "results.parquet" in r.err


def test_pareto_front() -> None:
    from microsched.plots import pareto_front

    u = np.array([10.0, 20.0, 30.0, 15.0, 25.0])
    p = np.array([100.0, 50.0, 60.0, 120.0, 40.0])
    assert pareto_front(u, p).tolist() == [0, 1, 4]


# ---------------------------------------------------------------------------------------------
# the HTML report, in a real headless browser


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("chromium not found: apt-get install -y chromium (scripts/test installs it)")


def _browser(html: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    try:
        return subprocess.run(
            [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", *args, html.resolve().as_uri()],
            capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def reproduce_like_dir(smoke_dir: Path, tmp_path_factory) -> Path:
    """The smoke sweep plus a claims.json (one claim holds, one does not), as a reproduction
    writes them."""
    d = tmp_path_factory.mktemp("repro") / "out"
    shutil.copytree(smoke_dir, d)
    shutil.rmtree(d / "plots", ignore_errors=True)
    claims = [
        {"id": "caladan-more-cores", "claim": "Caladan allocates more cores than Shenango", "paper": None,
         "measured": 0.4, "holds": True, "verdict": "reproduced", "kind": "order", "unit": "cores"},
        {"id": "p99-ratio", "claim": "Caladan's p99 is 0.68× Shenango's", "paper": 0.68, "measured": 1.13,
         "holds": False, "verdict": "not_reproduced", "kind": "ratio", "unit": "×", "ci95": 0.02,
         "tolerance": "×/÷ 1.25", "cause": {"text": "Caladan polls every 2 µs", "evidence": {"poll_us": 2}}},
    ]
    (d / "claims.json").write_text(json.dumps(claims), encoding="utf-8")
    return d


def test_report_renders_in_headless_chromium(reproduce_like_dir: Path, tmp_path: Path) -> None:
    r = run_cli("report", reproduce_like_dir)
    assert r.code == 0, r.err
    html = reproduce_like_dir / "report.html"
    text = html.read_text(encoding="utf-8")
    # self-contained: no script, no stylesheet link, no remote resource; figures are data URIs
    low = text.lower()
    assert "<script" not in low and "<link" not in low
    assert 'src="http' not in low and "url(http" not in low and 'href="http' not in low
    assert low.count('src="data:image/png;base64,') >= 4

    dom = _browser(html, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    page = dom.stdout
    assert 'id="claims"' in page and 'id="results"' in page
    assert "caladan-more-cores" in page and "not reproduced" in page
    assert "1 of 2 paper claims reproduced" in page and "cause: Caladan polls every 2 µs" in page
    assert page.count("<img") >= 4
    assert "Shenango" in page or "shenango" in page

    shot = tmp_path / "report.png"
    res = _browser(html, f"--screenshot={shot}", "--window-size=1200,2000")
    assert res.returncode == 0 and shot.is_file(), res.stderr[-2000:]
    import matplotlib.image as mpimg

    img = mpimg.imread(shot)
    assert img.shape[0] >= 1000 and img.shape[1] >= 1000
    rgb = img[..., :3]
    assert float(rgb.std()) > 0.05, "the screenshot is blank"
    # the claims table's colours are there: green (reproduced) and red (not reproduced) backgrounds
    px = rgb.reshape(-1, 3)
    greenish = ((px[:, 1] > px[:, 0] + 0.03) & (px[:, 1] > px[:, 2] + 0.03)).mean()
    reddish = ((px[:, 0] > px[:, 1] + 0.03) & (px[:, 0] > px[:, 2] + 0.03)).mean()
    assert greenish > 0.001 and reddish > 0.001, (greenish, reddish)


def test_report_of_a_run_and_errors(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    assert run_cli("run", BASE, "--set", "duration_ms=10", "--out", run_dir).code == 0
    r = run_cli("report", run_dir, "--out", tmp_path / "r.html")
    assert r.code == 0, r.err
    text = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert 'id="summary"' in text and "latency_us.p99" in text and "data:image/png;base64," in text
    r = run_cli("report", tmp_path / "nowhere")
    assert r.code == 2 and "not found" in r.err
    (tmp_path / "empty").mkdir()
    r = run_cli("report", tmp_path / "empty")
    assert r.code == 2 and "nothing to report" in r.err


def test_resume_refuses_results_of_a_changed_base_scenario(tmp_path: Path) -> None:
    base = tmp_path / "base.toml"
    shutil.copyfile(BASE, base)
    spec = tmp_path / "spec.toml"
    spec.write_text('base = "base.toml"\noverrides = ["duration_ms=5"]\n[grid]\n"load.fraction" = [0.5]\n',
                    encoding="utf-8")
    out = tmp_path / "out"
    assert run_cli("sweep", spec, "--out", out, "--jobs", "1").code == 0
    base.write_text(base.read_text(encoding="utf-8").replace("max_cores = 16", "max_cores = 8"), encoding="utf-8")
    r = run_cli("sweep", spec, "--out", out, "--resume")
    assert r.code == 2 and "base scenario" in r.err, r.err


def test_aggregate_groups_list_valued_parameters():
    # A variant that sets a list (`workload.types=[...]`) used to crash the aggregation.
    from microsched.sweep.runner import aggregate

    types = [{"name": "a", "service": {"dist": "constant", "value_us": 1}}]
    df = pd.DataFrame({"variant": ["v", "v", "w"], "workload.types": [types, types, None], "seed": [1, 2, 1],
                       "x": [1.0, 3.0, 5.0]})
    agg = aggregate(df, ["variant", "workload.types"])
    assert list(agg["variant"]) == ["v", "w"]
    assert agg["workload.types"].iloc[0] == types and agg["x"].tolist() == [2.0, 5.0]
    assert agg["n"].tolist() == [2, 1]


def test_an_absurd_grid_is_refused_at_once_with_bounded_memory(tmp_path):
    # 10^10 points: refused from the spec's shape, before a point is built (it used to list and
    # check every point, its memory growing by 45 MB/s).
    import resource
    import subprocess
    import sys
    import time

    from conftest import REPO

    vals = ", ".join(str(0.1 + i * 0.001) for i in range(10))
    grid = "".join(f'"server.k{i}" = [{vals}]\n' for i in range(10))
    spec = tmp_path / "huge.toml"
    spec.write_text(f'name = "huge"\nbase = "{REPO / "experiments" / "allocators" / "base.toml"}"\n[grid]\n{grid}')
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "microsched", "sweep", str(spec), "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=120, cwd=REPO)
    took = time.monotonic() - t0
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("microsched: error: --max-points:"), r.stderr
    assert "10,000,000,000 points" in lines[0] and "raise --max-points" in lines[0]
    assert took < 60, took
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss < 1_000_000, "KB: bounded memory"
    assert not (tmp_path / "out").exists(), "nothing written"


def test_max_points_and_max_hours_are_limits_the_user_sets(tmp_path):
    from conftest import REPO, microsched_cli as cli

    smoke = str(REPO / "experiments" / "sweeps" / "smoke.toml")
    r = cli("sweep", smoke, "--out", str(tmp_path / "a"), "--max-points", "11")
    assert r.returncode == 2 and "--max-points: " in r.stderr and "12 points" in r.stderr, r.stderr
    r = cli("sweep", smoke, "--out", str(tmp_path / "b"), "--max-hours", "1e-9")
    assert r.returncode == 2 and "--max-hours: " in r.stderr, r.stderr
    r = cli("sweep", smoke, "--out", str(tmp_path / "c"), "--max-hours", "0")
    assert r.returncode == 2 and "--max-hours: 0.0 is not allowed" in r.stderr, r.stderr
    # Raised (or at the default), the same sweep is not refused for its size.
    from microsched.sweep import engine
    from microsched.sweep.spec import SweepSpec

    spec = SweepSpec.load(smoke)
    engine.check_size(spec, jobs=1, max_points=12, max_hours=1.0)
    engine.check_size(spec, jobs=1)
