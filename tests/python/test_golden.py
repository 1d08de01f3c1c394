"""Every existing scenario, reproduction (--quick) and the smoke sweep give the very numbers
recorded in tests/golden/expected.json (wall-clock fields aside): engine changes that are meant
to add capability must not move a single existing result. Regenerate the file only for a
change that is meant to move results, and say so in the commit."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "golden"
spec = importlib.util.spec_from_file_location("golden_record", GOLDEN_DIR / "record.py")
golden = importlib.util.module_from_spec(spec)
spec.loader.exec_module(golden)
EXPECTED = json.loads((GOLDEN_DIR / "expected.json").read_text())["results"]

# Summary fields added since the golden file was recorded (extensions of the schema, which
# existing tooling ignores): a new field is accepted only if it is named here. `cause`: the
# measured cause a reproduction now adds to more failing claims (claims.json).
ADDED_FIELDS = ("core_time.overhead_ns", "sched.", "applications", "nodes", "lock_control", "histograms", "credits.start_drops", "cause",
                "parking", "credits.pool_max", "credits.pool_floor", "credits.pool_ceiling", "harvest.harvest_window_low",
                "harvest.harvest_window_high", "harvest.observations", "harvest.refill_us")


def _added(path: str) -> bool:
    return any(f".{a}" in f".{path}" for a in ADDED_FIELDS)


def _diff(expected, actual, path=""):
    """Field-by-field differences, as readable lines."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        out = []
        for k in sorted(set(expected) | set(actual)):
            if k not in actual:
                out.append(f"{path}{k}: missing (expected {expected[k]!r:.80})")
            elif k not in expected:
                if not _added(f"{path}{k}"):
                    out.append(f"{path}{k}: new field {actual[k]!r:.80}")
            else:
                out += _diff(expected[k], actual[k], f"{path}{k}.")
        return out
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        return [d for i, (e, a) in enumerate(zip(expected, actual)) for d in _diff(e, a, f"{path}{i}.")]
    same = expected == actual or (
        isinstance(expected, float) and isinstance(actual, float) and math.isnan(expected) and math.isnan(actual)
    )
    return [] if same else [f"{path.rstrip('.')}: expected {expected!r}, got {actual!r}"]


@pytest.mark.parametrize("name", golden.names())
def test_results_identical_to_golden(name, tmp_path, request):
    # The reproductions are read from the suite's one `reproduce --all --quick` run.
    reproduced = request.getfixturevalue("all_quick") if name.startswith("reproduce ") else None
    actual = golden.compute(only=name, reproduced=reproduced)[name]
    diffs = _diff(EXPECTED[name], actual)
    assert not diffs, f"{name}: {len(diffs)} fields differ from tests/golden/expected.json:\n" + "\n".join(diffs[:40])


def test_golden_covers_every_scenario_file():
    """A new scenario under experiments/ must be added to the golden set (or be a sweep spec)."""
    repo = GOLDEN_DIR.parents[1]
    scenario_files = {
        str(p.relative_to(repo))
        for p in (repo / "experiments").rglob("*.toml")
        if "[workload" in p.read_text() or "workload." in p.read_text()
    }
    sweep_specs = {s for s in scenario_files if "sweep" in Path(s).name or Path(s).parent.name == "sweeps"}
    missing = scenario_files - sweep_specs - set(golden.SCENARIOS)
    assert not missing, f"scenario files not in tests/golden/record.py SCENARIOS: {sorted(missing)}"
