"""Golden results: every scenario under experiments/ (run in the simulator), every
`reproduce NAME --quick` and the smoke sweep, reduced to plain JSON with the wall-clock fields
left out. `python3 tests/golden/record.py` rewrites expected.json; tests/python/test_golden.py
recomputes the same and compares field by field, so an engine change that moves any number of
an existing scenario is caught (the count of events the engine handled is its work, not a result). Recorded at the commit named in expected.json's "commit"."""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[2]
EXPECTED = Path(__file__).with_name("expected.json")

# Simulator scenario files (sweep specs are run through `reproduce`/`sweep` below).
SCENARIOS = [
    "experiments/validation/mmc.toml",
    "experiments/allocators/base.toml",
    "experiments/collapse/base.toml",
    "experiments/coresync/base.toml",
    "experiments/load-shift/base.toml",
    "experiments/real/overload-2x.toml",
    "experiments/real/overload-2x-none.toml",
    "experiments/real/dispatcher.toml",
    "experiments/protego/real-synthetic.toml",
    "experiments/protego/real-synthetic-breakwater.toml",
    "experiments/protego/real-memcached-var.toml",
    "experiments/protego/real-condvar.toml",
    "experiments/synergy/high.toml",
    "experiments/synergy/extreme.toml",
    "experiments/synergy/zippydb.toml",
    "experiments/synergy/leveldb.toml",
    "experiments/synergy/real-high.toml",
    "experiments/synergy/real-extreme.toml",
    "experiments/harvest/base.toml",
    "experiments/protego/synthetic.toml",
    "experiments/protego/synthetic-p50.toml",
    "experiments/protego/synthetic-100us.toml",
    "experiments/protego/synthetic-p50-1us.toml",
    "experiments/protego/memcached-var.toml",
    "experiments/protego/memcached-usr.toml",
    "experiments/protego/lucene.toml",
]
REPRODUCTIONS = ["allocators", "collapse", "coresync", "harvest", "load-shift", "protego", "synergy"]
SWEEPS = ["experiments/sweeps/smoke.toml"]

# Reproductions with more runs than this are recorded as one digest per run.
MAX_FULL_ROWS = 120

# Measurements of the machine, not of the model.
WALL_CLOCK = {"sim.wall_s", "sim.requests_per_wall_s"}
# The engine's own work (events handled), not a result of the model: an engine that reaches the
# same results with fewer events must pass.
ENGINE_WORK = {"sim.events"}
LEFT_OUT = WALL_CLOCK | ENGINE_WORK


def _flatten(d, prefix=""):
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def _plain(v):
    """JSON-comparable value: NaN as the string "nan" (NaN != NaN), numpy scalars as Python."""
    if hasattr(v, "tolist"):
        v = v.tolist()
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def _digest(v) -> str | None:
    return None if v is None else "sha256:" + hashlib.sha256(str(v).encode()).hexdigest()[:24]


def _frame_digest(df: pd.DataFrame) -> str:
    h = hashlib.sha256()
    for col in sorted(df.columns):
        h.update(col.encode())
        h.update(pd.util.hash_pandas_object(df[col], index=False).values.tobytes())
    return h.hexdigest()


def scenario_result(path: str) -> dict:
    import microsched

    res = microsched.run(REPO / path)
    flat = {k: _plain(v) for k, v in _flatten(res.summary).items() if k not in LEFT_OUT}
    flat["timeseries.sha256"] = _frame_digest(res.timeseries)
    flat["latency_cdf.sha256"] = _frame_digest(res.latency_cdf)
    return flat


def _rows(results: Path) -> dict:
    df = pd.read_parquet(results)
    keep = [c for c in df.columns if c not in LEFT_OUT]
    key = "point_id" if "point_id" in df.columns else None
    rows = {}
    for i, row in enumerate(df[keep].to_dict(orient="records")):
        rid = str(row[key]) if key else str(i)
        # An exported histogram is kilobytes of encoded counts: its digest moves when any count does.
        plain = {k: (_digest(v) if k.startswith("histograms.") else _plain(v)) for k, v in row.items()}
        # A large sweep keeps one digest per run (which runs moved); a small one every field.
        rows[rid] = plain if len(df) <= MAX_FULL_ROWS else _digest(json.dumps(plain, sort_keys=True))
    return rows


def reproduction_result(name: str, out: Path, run: bool = True) -> dict:
    """A quick reproduction's rows and claims; ``run=False`` reads them from ``out``, a finished
    `reproduce NAME --quick` (the test suite's `reproduce --all --quick` run)."""
    if run:
        subprocess.run(
            [sys.executable, "-m", "microsched", "reproduce", name, "--quick", "--jobs", "2", "--out", str(out)],
            check=True, cwd=REPO, stdout=subprocess.DEVNULL,
        )
    claims = json.loads((out / "claims.json").read_text())
    return {"rows": _rows(out / "results.parquet"), "claims": _plain_tree(claims)}


def sweep_result(spec: str, out: Path) -> dict:
    subprocess.run(
        [sys.executable, "-m", "microsched", "sweep", spec, "--jobs", "2", "--out", str(out)],
        check=True, cwd=REPO, stdout=subprocess.DEVNULL,
    )
    return {"rows": _rows(out / "results.parquet")}


def _plain_tree(v):
    if isinstance(v, dict):
        return {k: _plain_tree(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain_tree(x) for x in v]
    return _plain(v)


def compute(only: str | None = None, reproduced: Path | None = None) -> dict:
    """Every golden entry (or the one named `only`); ``reproduced``: a `reproduce --all --quick`
    output directory to read the reproductions from instead of running them."""
    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for p in SCENARIOS:
            if only in (None, p):
                out[p] = scenario_result(p)
        for r in REPRODUCTIONS:
            if only in (None, f"reproduce {r}"):
                if reproduced is not None:
                    out[f"reproduce {r}"] = reproduction_result(r, reproduced / r, run=False)
                else:
                    out[f"reproduce {r}"] = reproduction_result(r, Path(tmp) / r)
        for s in SWEEPS:
            if only in (None, f"sweep {s}"):
                out[f"sweep {s}"] = sweep_result(s, Path(tmp) / Path(s).stem)
    return out


def names() -> list[str]:
    return SCENARIOS + [f"reproduce {r}" for r in REPRODUCTIONS] + [f"sweep {s}" for s in SWEEPS]


if __name__ == "__main__":
    # record.py [ALL_QUICK_DIR]: read the reproductions from a finished `reproduce --all --quick`
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    data = {"commit": commit, "results": compute(reproduced=Path(sys.argv[1]) if len(sys.argv) > 1 else None)}
    EXPECTED.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {EXPECTED} ({EXPECTED.stat().st_size // 1024} KiB)")
