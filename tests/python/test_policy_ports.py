"""The interface exposes enough (issue 43): Shenango's allocator, Breakwater's controller and
d-FCFS with stealing, written again in Python under examples/policies/, give results
bit-identical to their Rust originals: the whole summary, the time series and the latency CDF,
everything but the policy's name and the wall-clock fields.

The d-FCFS comparison runs with ``server.search.kind = "instant"`` on both sides: the default
search on per-core queues with stealing (the probe-cost search) applies only to the built-in
``policy.sched.kind = "queue"``, so a Python queueing policy always runs with the instant one.

Windows are short (a few ms of simulated time) so that each test takes a few seconds; seeds
are pinned.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pandas as pd
import pytest

from microsched.api import run

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "policies"
SEED = 7


def load_toml(rel: str) -> dict:
    import tomllib

    return tomllib.loads((ROOT / rel).read_text())


def flatten(d, prefix=""):
    out = {}
    if isinstance(d, dict):
        for k, v in d.items():
            out.update(flatten(v, f"{prefix}{k}."))
    elif isinstance(d, list):
        for i, v in enumerate(d):
            out.update(flatten(v, f"{prefix}{i}."))
    else:
        out[prefix[:-1]] = d
    return out


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def assert_identical(rust, py, rust_name: str, py_name: str):
    """Everything equal, bit for bit, except the wall-clock fields and the policy's name (a
    field may differ only by holding the two names)."""
    a, b = flatten(rust.summary), flatten(py.summary)
    wall = {k for k in a.keys() | b.keys() if "wall" in k}
    assert a.keys() - wall == b.keys() - wall, f"summary keys differ: {sorted((a.keys() ^ b.keys()) - wall)}"
    named = 0
    for k in sorted(a.keys() - wall):
        if (a[k], b[k]) == (rust_name, py_name):
            named += 1
            continue
        assert same(a[k], b[k]), f"summary.{k}: Rust {a[k]!r}, Python {b[k]!r}"
    assert named >= 1, "the policy's name appears in the summary: the two runs ran different policies"
    pd.testing.assert_frame_equal(rust.timeseries, py.timeseries, check_exact=True)
    pd.testing.assert_frame_equal(rust.latency_cdf, py.latency_cdf, check_exact=True)
    # Not vacuous: the runs measured something.
    assert rust.summary["requests"]["completed"] > 1000
    assert len(rust.timeseries) > 10 and len(rust.latency_cdf) > 10


def python_policy(file: str, cls: str, params: dict | None = None) -> dict:
    return {"kind": "python", "class": f"{EXAMPLES / file}:{cls}", "params": params or {}}


def test_shenango_port_matches_rust_on_the_allocators_scenario():
    base = load_toml("experiments/allocators/base.toml")
    # A short window at a load where Shenango grants and parks cores all the time.
    base.update(duration_ms=20, warmup_ms=5)
    base["load"]["fraction"] = 0.7
    base["metrics"]["sample_interval_us"] = 100
    rust = copy.deepcopy(base)
    rust["policy"]["allocator"] = {"kind": "shenango"}
    py = copy.deepcopy(base)
    py["policy"]["allocator"] = python_policy("shenango.py", "Shenango")
    r, p = run(rust, seed=SEED), run(py, seed=SEED)
    assert_identical(r, p, "shenango", "shenango-py")
    # The allocator did work: cores moved.
    assert r.timeseries["cores_allocated"].nunique() > 3


# The collapse scenario as it is, with the study's fix (gated ramp, the default), with the
# ungated ramp, and with v2's completion trigger and a per-session α whose fractional carry
# matters (1000 sessions × 0.0015 = 1.5 credits a period).
BREAKWATER_VARIANTS = {
    "collapse": {},
    "core-fix": {"core_fix": True},
    "core-fix-ungated": {"core_fix": True, "core_fix_drop_gate": "none"},
    "completion-per-session": {"trigger": "completion", "alpha_mode": "per_session", "alpha": 0.0015},
}


@pytest.mark.filterwarnings("ignore:policy.overload.alpha_mode")
@pytest.mark.parametrize("variant", list(BREAKWATER_VARIANTS))
def test_breakwater_port_matches_rust_on_the_collapse_scenario(variant):
    base = load_toml("experiments/collapse/base.toml")
    base.update(duration_ms=3, warmup_ms=3)
    base["policy"]["overload"].update(BREAKWATER_VARIANTS[variant])
    params = {k: v for k, v in base["policy"]["overload"].items() if k != "kind"}
    rust = copy.deepcopy(base)
    py = copy.deepcopy(base)
    py["policy"]["overload"] = python_policy("breakwater.py", "Breakwater", params)
    r, p = run(rust, seed=SEED), run(py, seed=SEED)
    assert_identical(r, p, "breakwater", "breakwater-py")
    # The controller did work: the pool moved, requests were dropped.
    assert r.timeseries["credit_pool"].nunique() > 5
    assert r.summary["requests"]["dropped"] > 0


def test_breakwater_port_defaults_are_the_rust_defaults():
    """With no parameters, both sides run Breakwater's defaults (per-session α, target 80 µs)."""
    base = load_toml("experiments/collapse/base.toml")
    base.update(duration_ms=2, warmup_ms=1)
    rust = copy.deepcopy(base)
    rust["policy"]["overload"] = {"kind": "breakwater"}
    py = copy.deepcopy(base)
    py["policy"]["overload"] = python_policy("breakwater.py", "Breakwater")
    assert_identical(run(rust, seed=SEED), run(py, seed=SEED), "breakwater", "breakwater-py")


def exp32_instant(duration_ms: float) -> dict:
    from microsched.cli.bench import bench_scenarios

    (exp32,) = [s for name, s, _ in bench_scenarios(quick=True) if name == "exp32-instant"]
    s = copy.deepcopy(exp32)
    s.update(duration_ms=duration_ms, warmup_ms=1.0)
    s["server"]["search"] = {"kind": "instant"}
    s["metrics"]["sample_interval_us"] = 100.0
    return s


@pytest.mark.parametrize("steal", [True, False])
def test_dfcfs_port_matches_rust_on_exp32_with_the_instant_search(steal):
    rust = exp32_instant(4.0 if steal else 1.0)
    rust["server"]["steal"] = steal
    py = copy.deepcopy(rust)
    py.setdefault("policy", {})["sched"] = python_policy("dfcfs.py", "DistributedFcfs")
    r, p = run(rust, seed=SEED), run(py, seed=SEED)
    assert_identical(r, p, "d-fcfs+steal" if steal else "d-fcfs", "d-fcfs-py")
    assert r.summary["requests"]["completed"] > (50_000 if steal else 10_000)


@pytest.mark.filterwarnings("ignore:policy.overload.alpha_mode")
def test_ports_are_checked_not_vacuous():
    """The comparison can fail: a Breakwater port one credit off at its start differs."""
    base = load_toml("experiments/collapse/base.toml")
    base.update(duration_ms=2, warmup_ms=1)
    params = {k: v for k, v in base["policy"]["overload"].items() if k != "kind"}
    py = copy.deepcopy(base)
    py["policy"]["overload"] = python_policy("breakwater.py", "Breakwater", dict(params, initial_pool=41))
    with pytest.raises(AssertionError):
        assert_identical(run(base, seed=SEED), run(py, seed=SEED), "breakwater", "breakwater-py")
