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
    ("workload.types.0.service.mean_us=1e-9", "this run is too large"),
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
                                                                 "disagree"))]
    print("corpus:", totals)
    assert totals["scenarios"] == 600
    assert totals["crashes"] == 0 and totals["hangs"] == 0, bad[:5]
    assert totals["non_finite_accepted"] == 0, bad[:5]
    assert totals["error_without_field"] == 0, bad[:5]
    assert totals["doors_disagree"] == 0, bad[:5]
    assert totals["validated_but_run_failed"] == 0, bad[:5]
    assert totals["ran"] >= 30 and totals["errors"] >= 300, totals


def test_progress_callback_and_partial_results():
    seen = []
    res = microsched.run(small(duration_ms=2000.0), progress=lambda done, total: seen.append((done, total)))
    assert seen, "a 2 s simulation takes more than 0.1 s: progress is reported"
    assert all(0 <= d <= t for d, t in seen) and seen[-1][1] == pytest.approx(2003.0)
    assert "interrupted_at_ms" not in res.summary["sim"]

    class Stop(Exception):
        pass

    def stop(done, total):
        raise Stop

    with pytest.raises(Stop):
        microsched.run(small(duration_ms=2000.0), progress=stop)


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
