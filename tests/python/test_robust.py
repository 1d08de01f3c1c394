"""Bad input never crashes and long runs can be stopped: the fuzzer cases of issue 13, a seeded
corpus of mutated scenarios (fuzz_scenarios.py), the cost estimate, bounded time-series memory,
Ctrl-C and the progress callback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pandas as pd
import pytest

import microsched
from microsched.api import estimate, validate
from conftest import REPO, SMALL, run_cli, small, to_toml

HERE = Path(__file__).resolve().parent
MMC = REPO / "experiments" / "validation" / "mmc.toml"
ENV = dict(os.environ, PYTHONPATH=str(REPO / "python"), PYTHONWARNINGS="ignore")


def cli_error(*args: str) -> str:
    r = run_cli("validate", *args)
    assert r.code == 2, (r.code, r.err)
    assert "Traceback" not in r.err and "panicked" not in r.err
    return r.err.strip()


# The cases the fuzzer of issue 13 found: each is now an error naming the field, before any
# simulation (they used to abort with an out-of-memory backtrace, hang, or run silently).
ISSUE_CASES = [
    ("clients.sessions=1000000000", "clients.sessions: this run is too large"),
    ("load.fraction=1e9", "load.fraction: this run is too large"),
    ("load.fraction=1e6", "load.fraction: this run is too large"),
    # Below the 1 ns resolution: refused by name before the size check (issue 48).
    ("workload.types.0.service.mean_us=1e-9", "workload.types[0].service.mean_us: 0.000000001 µs is not allowed"),
    ("workload.types.0.service.mean_us=0.002", "this run is too large"),
    ("warmup_ms=1e9", "warmup_ms: this run is too large"),
    ("duration_ms=2e16", "duration_ms: 2e+16 is not allowed"),
    ("duration_ms=9223372036854775807", "duration_ms: 9.223372036854776e+18 is not allowed"),
    ("slo_us=nan", "slo_us: NaN is not allowed"),
    ("network.rtt_us=inf", "network.rtt_us: inf is not allowed"),
    ("load.fraction=nan", "load.fraction: NaN is not allowed"),
    ("load.fraction=-inf", "load.fraction: -inf is not allowed"),
    ('policy.overload={kind="breakwater", target_us="abc"}', "policy.overload.target_us: invalid type"),
    ('policy.allocator={kind="shenango", bogus=1}', "policy.allocator.bogus: unknown field"),
    ('workload.types.0.service={dist="pareto"}', "workload.types[0].service.dist: unknown variant"),
]


@pytest.mark.parametrize("override,expected", ISSUE_CASES)
def test_issue_cases_are_errors_naming_the_field(override, expected):
    err = cli_error(str(MMC), "--set", override)
    assert expected in err, err


def test_rps_case_and_force():
    # load.rps = 1e15 (the issue's hang): refused by the estimate; --force lets validate pass.
    err = cli_error(str(MMC), "--set", "load={rps=1e15}")
    assert "load.rps: this run is too large" in err and "--force" in err
    assert run_cli("validate", str(MMC), "--set", "load={rps=1e15}", "--force").code == 0
    with pytest.raises(ValueError, match="too large"):
        microsched.run(MMC, overrides=["load={rps=1e15}"])


def test_both_front_doors_refuse_non_finite_by_field(tmp_path):
    for value, shown in ((float("nan"), "NaN"), (float("inf"), "inf"), (float("-inf"), "-inf")):
        d = small(slo_us=value)
        with pytest.raises(ValueError, match=rf"^slo_us: {shown} is not allowed"):
            validate(d)
        p = tmp_path / "s.toml"
        p.write_text(to_toml(d), encoding="utf-8")
        with pytest.raises(ValueError, match=rf"^slo_us: {shown} is not allowed"):
            validate(p)
    # Inside a list of tables, and through --set.
    d = small()
    d["workload"]["types"][0]["service"]["mean_us"] = float("nan")
    with pytest.raises(ValueError, match=r"^workload\.types\[0\]\.service\.mean_us: NaN"):
        validate(d)
    with pytest.raises(ValueError, match=r"^network\.jitter_us: NaN"):
        validate(SMALL, overrides=["network.jitter_us=nan"])


def test_empirical_csv_with_huge_values_is_refused(tmp_path):
    (tmp_path / "s.csv").write_text("5\n1e300\n", encoding="utf-8")
    d = small(**{"workload.types": [{"name": "e", "service": {"dist": "empirical", "csv": "s.csv"}}]})
    with pytest.raises(ValueError, match=r"^workload\.types\[0\]\.service\.csv: line 2: 1e300 µs is more than"):
        validate(microsched.Scenario(d, base_dir=tmp_path))


def test_runs_that_produce_nothing_warn():
    with pytest.warns(UserWarning, match="network.rtt_us: a round trip .* longer than the whole run"):
        res = microsched.run(small(**{"network.rtt_us": 1e9}))
    assert res.summary["throughput_rps"] == 0
    with pytest.warns(UserWarning, match="offered load is 0"):
        microsched.run(small(**{"load.fraction": 0.0}))
    r = run_cli("validate", str(MMC), "--set", "network.rtt_us=1e15")  # the issue's case
    assert r.code == 0 and "microsched: warning: network.rtt_us" in r.err


def test_time_series_rows_are_capped():
    cap = 1 << 18
    d = small(duration_ms=300.0, warmup_ms=0.0, **{"metrics.sample_interval_us": 0.5, "load.fraction": 0.05})
    cost = estimate(d)
    assert cost["samples"] <= cap and cost["sample_interval_ns"] == -(-300_000_000 // cap)
    with pytest.warns(UserWarning, match="sampling every"):
        res = microsched.run(d)
    assert len(res.timeseries) <= cap
    # Below the cap nothing changes: the asked interval is kept.
    assert estimate(SMALL)["sample_interval_ns"] == 1_000_000


def test_corpus_of_mutated_scenarios():
    """≥ 500 seeded mutations through both front doors (dict/JSON and TOML), the valid ones
    run: 0 crashes, 0 hangs, 0 non-finite accepted, every error naming a field of the input."""
    p = subprocess.run([sys.executable, str(HERE / "fuzz_scenarios.py"), "600", "13"], capture_output=True,
                       text=True, timeout=600, env=ENV)
    assert p.returncode == 0, f"the corpus run died (rc {p.returncode}): {p.stderr[-2000:]}"
    lines = p.stdout.strip().splitlines()
    totals = json.loads(lines[-1])["totals"]
    bad = [ln for ln in lines[:-1] if any(k in ln for k in ("CRASH", "HANG", "no_field", "misnamed", "accepted",
                                                                 "disagree", "EMPTY_STATS"))]
    print("corpus:", totals)
    assert totals["scenarios"] == 600
    assert totals["crashes"] == 0 and totals["hangs"] == 0, bad[:5]
    assert totals["non_finite_accepted"] == 0, bad[:5]
    assert totals["error_without_field"] == 0, bad[:5]
    assert totals["doors_disagree"] == 0, bad[:5]
    assert totals["validated_but_run_failed"] == 0, bad[:5]
    assert totals["empty_stats_printed"] == 0, bad[:5]
    assert totals["ran"] >= 30 and totals["errors"] >= 300, totals


def test_progress_callback_and_partial_results():
    seen = []
    # 20 s simulated: ~1 s of wall time at this simulator's speed (2 s took only 0.1 s), so more
    # than one report arrives on any machine of this kind.
    res = microsched.run(small(duration_ms=20000.0), progress=lambda done, total: seen.append((done, total)))
    assert seen, "a 20 s simulation takes more than 0.1 s: progress is reported"
    assert all(0 <= d <= t for d, t in seen) and seen[-1][1] == pytest.approx(20003.0)
    assert "interrupted_at_ms" not in res.summary["sim"]

    class Stop(Exception):
        pass

    def stop(done, total):
        raise Stop

    with pytest.raises(Stop):
        microsched.run(small(duration_ms=20000.0), progress=stop)


def _start_long_run(*extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "microsched", "run", str(MMC), "--set", "duration_ms=600000",
                             "--json", *extra], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=REPO)


@pytest.mark.parametrize("keep", [False, True])
def test_ctrl_c_stops_a_long_run_within_a_second(keep):
    p = _start_long_run(*(["--keep-partial", "--force"] if keep else ["--force"]))
    time.sleep(3.0)
    assert p.poll() is None, p.stderr.read()
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    elapsed = time.monotonic() - t0
    assert p.returncode == 130, err
    assert elapsed < 1.0, f"took {elapsed:.2f} s to stop"
    assert "Traceback" not in err
    if keep:
        s = json.loads(out)
        assert s["sim"]["interrupted_at_ms"] > 50
        assert s["throughput_rps"] > 0
        assert "interrupted at" in err
    else:
        assert out == "" and "interrupted" in err


# ---------------------------------------------------------------------------------------------
# sweeps

SWEEP_BASE = REPO / "experiments" / "allocators" / "base.toml"


def sweep_spec(tmp_path: Path, body: str = "", name: str = "robust") -> Path:
    p = tmp_path / "spec.toml"
    p.write_text(f'name = "{name}"\nbase = "{SWEEP_BASE}"\nseeds = 2\noverrides = ["duration_ms=2", "warmup_ms=1"]\n'
                 f'[grid]\n"load.fraction" = [0.3, 0.6]\n[quick]\nseeds = 1\noverrides = ["duration_ms=1"]\n' + body,
                 encoding="utf-8")
    return p


def test_sweep_resume_refuses_another_profile_or_seed_set(tmp_path):
    spec, out = sweep_spec(tmp_path), tmp_path / "out"
    assert run_cli("sweep", spec, "--out", out, "--jobs", "1").code == 0
    before = (out / "results.parquet").read_bytes()
    r = run_cli("sweep", spec, "--out", out, "--resume", "--quick")
    assert r.code == 2 and "made without --quick" in r.err, r.err
    r = run_cli("sweep", spec, "--out", out, "--resume", "--seeds", "3")
    assert r.code == 2 and "seed set (--seeds) differs" in r.err, r.err
    assert (out / "results.parquet").read_bytes() == before, "nothing overwritten"
    assert run_cli("sweep", spec, "--out", out, "--resume").code == 0


def test_sweep_reruns_empty_or_corrupt_parts(tmp_path):
    spec, out = sweep_spec(tmp_path), tmp_path / "out"
    assert run_cli("sweep", spec, "--out", out, "--jobs", "1").code == 0
    full = pd.read_parquet(out / "results.parquet")
    parts = sorted((out / "parts").glob("*.parquet"))
    assert len(parts) == 4
    parts[0].write_bytes(b"")
    parts[1].write_bytes(parts[1].read_bytes()[:50])
    r = run_cli("sweep", spec, "--out", out, "--resume", "--jobs", "1")
    assert r.code == 0, r.err
    assert "2 of 4 points already done" in r.out
    again = pd.read_parquet(out / "results.parquet")
    wall = [c for c in again.columns if c.startswith("wall") or c.endswith("wall_s")]
    pd.testing.assert_frame_equal(full.drop(columns=wall), again.drop(columns=wall))


def test_sweep_names_cannot_escape_the_output_directory(tmp_path):
    for name in ("../../../escape", "/abs", ".hidden", "a/b"):
        r = run_cli("sweep", sweep_spec(tmp_path, name=name), cwd=tmp_path)
        assert r.code == 2 and "name:" in r.err and "is not allowed" in r.err, r.err
    assert not (tmp_path.parent / "escape").exists()


def test_huge_sweep_prints_its_size_first(tmp_path):
    spec = sweep_spec(tmp_path)
    text = spec.read_text().replace('"load.fraction" = [0.3, 0.6]',
                                    '"load.fraction" = [' + ", ".join(str(0.1 + i * 1e-4) for i in range(3000)) + "]")
    spec.write_text(text)
    p = subprocess.Popen([sys.executable, "-m", "microsched", "sweep", str(spec), "--out", str(tmp_path / "o")],
                         env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    # Ctrl-C as soon as the size is said (not after a fixed sleep): the line must come before the
    # 6 000 points are checked and run, which would take minutes.
    first = p.stderr.readline()
    p.send_signal(signal.SIGINT)
    out, rest = p.communicate(timeout=60)
    err = first + rest
    assert "6,000 points (3000 load.fraction × 2 seeds)" in first, err
    assert "roughly" in first


def _descendants(pid: int) -> set[int]:
    out = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == pid:
                out.add(int(d.name))
    return out | {g for c in out for g in _descendants(c)} if out else out


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_sweep_workers_die_with_a_killed_driver(tmp_path):
    spec = sweep_spec(tmp_path).read_text().replace('overrides = ["duration_ms=2", "warmup_ms=1"]',
                                                    'overrides = ["duration_ms=3000", "warmup_ms=1"]')
    (tmp_path / "spec.toml").write_text(spec)
    p = subprocess.Popen([sys.executable, "-m", "microsched", "sweep", str(tmp_path / "spec.toml"), "--out",
                          str(tmp_path / "o"), "--jobs", "2"], env=ENV, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, cwd=tmp_path, start_new_session=True)
    deadline = time.monotonic() + 60
    workers: set[int] = set()
    while time.monotonic() < deadline and len(workers) < 2:
        time.sleep(0.5)
        workers = {w for w in _descendants(p.pid) if "spawn_main" in (Path("/proc") / str(w) / "cmdline").read_text()}
    assert workers, "the pool workers started"
    p.kill()  # kill -9 of the driver alone, not its process group
    p.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_alive(w) for w in workers):
        time.sleep(0.2)
    alive = [w for w in workers if _alive(w)]
    for w in alive:
        os.kill(w, signal.SIGKILL)
    assert not alive, f"workers {alive} outlived their driver by 5 s"


def _saved_runs(out: Path) -> int:
    """The runs a reproduction has saved for --resume: the rows of its batches in OUT/parts."""
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(f).num_rows for f in (out / "parts" / "batches").glob("*.parquet"))


def test_reproduce_resume_after_interruption_gives_the_uninterrupted_results(tmp_path, all_quick):
    """Ctrl-C in the middle of `reproduce allocators --quick`, then `--resume`: the same
    results.parquet (wall-clock columns aside) and claims as a reproduction run in one go (the
    suite's `reproduce --all --quick` run: the same runs, deterministic)."""
    ref, cut = all_quick / "allocators", tmp_path / "cut"
    args = [sys.executable, "-m", "microsched", "reproduce", "allocators", "--quick", "--jobs", "2", "--out"]
    p = subprocess.Popen([*args, str(cut)], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         cwd=REPO)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and _saved_runs(cut) < 6:
        time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "continue with --resume" in err
    n_saved = _saved_runs(cut)
    assert 6 <= n_saved < 24 and not (cut / "claims.json").exists()
    # Another profile cannot resume these runs.
    r = subprocess.run([*args[:5], "--out", str(cut), "--resume"], env=ENV, capture_output=True, text=True,
                       timeout=600, cwd=REPO)
    assert r.returncode == 2 and "another profile" in r.stderr, r.stderr
    r = subprocess.run([*args, str(cut), "--resume"], env=ENV, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert "paper claims reproduced" in r.stdout  # the one reproduction's console summary
    a, b = pd.read_parquet(ref / "results.parquet"), pd.read_parquet(cut / "results.parquet")
    wall = [c for c in a.columns if c.startswith("sim.")]
    pd.testing.assert_frame_equal(a.drop(columns=wall), b.drop(columns=wall))
    ca, cb = (json.loads((d / "claims.json").read_text()) for d in (ref, cut))
    assert [(c["id"], c["holds"], c.get("measured")) for c in ca] == [(c["id"], c["holds"], c.get("measured"))
                                                                       for c in cb]


# ---------------------------------------------------------------------------------------------
# notebook use and start-up


def test_notebook_html_and_sweep_from_a_dict(tmp_path):
    res = microsched.run(SMALL)
    h = res._repr_html_()
    assert h.startswith("<table>") and "small-mm4" in h and "latency" in h
    spec = {"name": "nb", "base": str(SWEEP_BASE), "seeds": 1, "overrides": ["duration_ms=2", "warmup_ms=1"],
            "grid": {"load.fraction": [0.3, 0.6]}}
    out = microsched.run_sweep(spec, tmp_path / "o", jobs=1)
    assert len(out.results) == 2 and (tmp_path / "o" / "spec.json").is_file()
    assert "<table" in out._repr_html_() and "sweep nb" in out._repr_html_()


def test_cli_validate_does_not_import_pandas():
    code = ("import sys, runpy; sys.argv = ['microsched', 'validate', %r];\n"
            "try:\n    runpy.run_module('microsched', run_name='__main__')\nexcept SystemExit: pass\n"
            "assert 'pandas' not in sys.modules, 'pandas imported'\nprint('ok')") % str(MMC)
    p = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True, timeout=60)
    assert p.stdout.strip().endswith("ok"), p.stderr


class _PartWithFinaliser:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)


def _write_a_part() -> str:
    _PartWithFinaliser()
    return "written"


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_ctrl_c_inside_a_finaliser_while_a_part_is_written_still_stops_the_sweep():
    """Python swallows an exception raised in a finaliser (pyarrow's ParquetWriter.__del__ runs
    while each part is written): unshielded, a Ctrl-C landing there is lost."""
    from microsched.sweep.engine import _ctrl_c_after

    try:
        _write_a_part()
    except KeyboardInterrupt:  # pragma: no cover - the interpreter's behaviour changed
        pytest.fail("a finaliser's KeyboardInterrupt is not swallowed any more: the shield is not needed")
    written = None
    with pytest.raises(KeyboardInterrupt):
        with _ctrl_c_after():
            written = _write_a_part()
    assert written == "written", "the part is finished before the Ctrl-C is raised"
