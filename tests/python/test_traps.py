"""The small traps of issue 45, each closed with a test that failed before its fix:

* `compare --variant NAME` with no settings, not the baseline, ran the baseline again under
  that name and printed "0 ± 0": an error now;
* a TOML syntax error had no line or column, and `compare` named its temporary spec instead of
  the user's file and variant;
* at 80 columns the compare table cut the metric to `latency_us.…` (and printed the table of
  the scenario's own load once per seed);
* `real` printed "CPU utilization (LC share)" for the share of cores allocated, "0 sqrt/s" for a
  run without best-effort threads, an ambiguous datagram count, and no warning when its load
  generator and controller took CPU the workers needed.

None of them runs a simulation of more than a few milliseconds.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import pandas as pd
import pytest

from conftest import REPO, run_cli

MMC = REPO / "experiments" / "validation" / "mmc.toml"


def test_compare_variant_without_settings_is_an_error():
    r = run_cli("compare", MMC, "--variant", "static", "--variant", "caladan", "--seeds", "2")
    assert r.code == 2
    assert "--variant 'caladan' sets nothing the baseline 'static' does not" in r.err
    assert "caladan:policy.allocator.kind=caladan" in r.err
    # the same settings as the baseline are the same trap
    r = run_cli("compare", MMC, "--variant", "a:server.steal=true", "--variant", "b:server.steal=true", "--seeds", "2")
    assert r.code == 2 and "'b' sets nothing the baseline 'a' does not" in r.err
    # a variant with no settings against a baseline with some is the scenario as written: allowed
    from microsched.comparison import CompareError, compare

    with pytest.raises(ValueError, match="server.nope"):  # past the variant check, stops at validation
        compare(MMC, ["tuned:server.steal=true", "plain"], seeds=2, overrides=["server.nope=1"])
    with pytest.raises(CompareError, match="sets nothing"):
        compare(MMC, {"a": [], "b": []}, seeds=2)


def _bad_toml(tmp_path: Path) -> Path:
    p = tmp_path / "mine.toml"
    p.write_text('duration_ms = 10\n\n[server\nmax_cores = 2\n', encoding="utf-8")
    return p


def test_toml_syntax_error_has_line_column_and_the_users_file(tmp_path):
    bad = _bad_toml(tmp_path)
    r = run_cli("validate", bad)
    assert r.code == 2
    assert "invalid TOML at line 3, column" in r.err and str(bad) in r.err, r.err
    r = run_cli("compare", bad, "--variant", "a", "--variant", "b:server.max_cores=3", "--seeds", "2")
    assert r.code == 2
    assert "invalid TOML at line 3, column" in r.err and str(bad) in r.err, r.err
    assert "microsched-compare-" not in r.err and "compare.toml" not in r.err, r.err


def test_compare_errors_name_the_users_file_and_variant():
    r = run_cli("compare", MMC, "--variant", "a", "--variant", "b:server.nope=3", "--seeds", "2")
    assert r.code == 2
    assert "server.nope" in r.err and f"(in {MMC.resolve()}, --variant b" in r.err, r.err
    assert "microsched-compare-" not in r.err and "compare.toml" not in r.err, r.err


def _comparison(metrics: list[str], load: float) -> object:
    from microsched.comparison import Comparison

    rows = [{"load.fraction": load, "metric": m, "variant": "percore", "baseline": "central", "mean": 123456.789,
             "baseline_mean": 120000.5, "diff": 3456.2, "diff_ci95": 123.4, "ratio": 1.0288, "ratio_ci95": 0.0012,
             "n": 5, "significant": True} for m in metrics]
    return Comparison(results=pd.DataFrame(), aggregate=pd.DataFrame(), paired=pd.DataFrame(rows),
                      baseline="central", load_key="load.fraction")


@pytest.mark.parametrize("load", [0.9, math.nan])
def test_compare_table_keeps_the_metric_whole_at_80_columns(load):
    from rich.console import Console

    from microsched.cli.compare import print_paired
    from microsched.comparison import DEFAULT_METRICS

    buf = io.StringIO()
    con = Console(file=buf, width=80, force_terminal=False, color_system=None)
    cmp = _comparison(list(DEFAULT_METRICS), load)
    print_paired(cmp, con)
    text = buf.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    for m in DEFAULT_METRICS:
        assert m in text, f"{m} cut: {text}"
    assert "…" not in text


def test_compare_table_of_the_scenarios_own_load_printed_once():
    from microsched.cli.compare import _loads_of
    from microsched.comparison import paired_table

    df = pd.DataFrame({"variant": ["a", "a", "b", "b"], "seed": [1, 2, 1, 2], "load.fraction": [math.nan] * 4,
                       "latency_us.p99": [10.0, 12.0, 11.0, 14.0]})
    p = paired_table(df, "a", "load.fraction", ["latency_us.p99"])
    assert len(p) == 1  # one row per metric and variant, not one per NaN
    assert len(_loads_of(p["load.fraction"])) == 1


def _real_summary(be_threads: int, allocated: float = 2.0, harness_cpus: float = 0.8) -> dict:
    return {"scenario": "real", "seed": 1, "cpu_utilization": 1.0, "be_cores_mean": 0.0,
            "cores": {"max": 2, "allocated_mean": allocated, "busy_mean": 1.28},
            "sim": {"events": 3201, "wall_s": 0.35, "requests_per_wall_s": 31808},
            "runtime": {"be": {"threads": be_threads, "ops_per_s": 1234.0 if be_threads else 0.0},
                        "accounting": {"client_sent": 1054, "server_requests": 1054, "agree": True},
                        "client": {"datagrams_out": 2095, "datagrams_in": 1131, "schedule_lag_us": {"p99": 33.2}},
                        "harness": {"measured": {"cpus": harness_cpus}}}}


def test_real_labels_say_what_the_numbers_are(capsys):
    from microsched.cli.real import runtime_line
    from microsched.cli.render import print_summary

    s = _real_summary(be_threads=0)
    print_summary(s)
    out = capsys.readouterr().out
    assert "CPU utilization" not in out  # it is the share of cores allocated, not how busy they were
    assert "cores allocated to LC (share of max)" in out
    assert "parked cores (mean; no best-effort threads)" in out
    assert "2,095 datagrams sent (requests, credit requests, connects) and 1,131 received" in out
    line = runtime_line(s)
    assert "sqrt/s" not in line and "no best-effort threads (runtime.be_threads = 0)" in line
    line = runtime_line(_real_summary(be_threads=2))
    assert "best-effort work 1,234 square roots/s on 2 thread(s)" in line


def test_real_warns_when_the_harness_takes_the_workers_cpus():
    from microsched.cli.real import _starvation_warning

    w = _starvation_warning(_real_summary(0, allocated=2.0, harness_cpus=0.82), cpus=2)
    assert w and "0.82 CPUs" in w and "2.00 cores on this 2-CPU machine" in w
    assert _starvation_warning(_real_summary(0, allocated=1.0, harness_cpus=0.5), cpus=2) is None
    assert _starvation_warning(_real_summary(0, allocated=2.0, harness_cpus=0.8), cpus=4) is None
    assert _starvation_warning({"cores": {"allocated_mean": 2.0}}, cpus=2) is None  # the simulator's summary
