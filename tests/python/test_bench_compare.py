"""scripts/bench-compare's instruction mode: the counts it reads and the ratios it prints."""

import importlib.machinery
import importlib.util
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_script():
    loader = importlib.machinery.SourceFileLoader("bench_compare", str(ROOT / "scripts" / "bench-compare"))
    spec = importlib.util.spec_from_loader("bench_compare", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def row(scenario, base, current, same=True):
    def side(instructions, requests=1000, events=3000):
        return {"instructions": instructions, "requests": requests, "events": events,
                "instructions_per_request": instructions / requests, "events_per_request": events / requests}
    return {"scenario": scenario, "base": side(*base), "current": side(*current), "same_results": same}


def test_the_targets_divide_the_slower_scenario_by_the_faster_per_request():
    bc = load_script()
    rows = [
        row("exp32, default search", (6_000_000,), (5_000_000,)),
        # Twice the requests in the same instructions: half the cost per request.
        row("exp32, instant search", (2_000_000, 1000), (4_000_000, 2000)),
    ]
    lines = bc.instruction_targets(rows).splitlines()
    line = next(t for t in lines if t.startswith("default / instant search, exp32"))
    # Issue 47's targets, counted in instructions: the ratio at most 1.5, exp32 at most 3 250.
    assert "instructions per request (target <= 1.5)" in line
    assert "base 3.00" in line and "current 2.50" in line and line.endswith("(not met)"), line
    ceiling = next(t for t in lines if t.startswith("exp32, default search"))
    assert "(target <= 3,250): base 6,000, current 5,000 (not met)" in ceiling, ceiling
    # Met when the current tree is at or below it.
    rows[0] = row("exp32, default search", (6_000_000,), (3_000_000,))
    lines = bc.instruction_targets(rows).splitlines()
    assert next(t for t in lines if t.startswith("exp32, default search")).endswith("(met)")
    assert next(t for t in lines if t.startswith("default / instant")).endswith("current 1.50 (met)")


def test_the_table_flags_moved_results_and_reports_errors():
    bc = load_script()
    rows = [row("mmc", (2_000_000,), (1_500_000,), same=False),
            {"scenario": "broken", "base": {"error": "error: server.queue: unknown variant"}, "current": {"instructions": 1}}]
    table = bc.instructions_table(rows)
    mmc = next(line for line in table.splitlines() if line.startswith("| mmc"))
    assert "| 2,000 | 1,500 | 0.750 |" in mmc and "**no**" in mmc, mmc
    assert "unknown variant" in table


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")
def test_a_failed_run_reports_the_simulators_error(tmp_path):
    bc = load_script()
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\nduration_ms = 1\n[server]\nqueue = "bogus"\n')
    # Any binary stands in for the simulator's: what is read is its last words, not valgrind's.
    fake = tmp_path / "runfile"
    fake.write_text("#!/bin/sh\necho 'error: server.queue: unknown variant' >&2\nexit 2\n")
    fake.chmod(0o755)
    said = bc.count(fake, bad, [])
    assert said == "error: server.queue: unknown variant", said
