"""The bridge calls a policy's optional method only if the policy overrides it (a method left as
the base class's is answered by the bridge with the base class's answer, to save a Python call
per event): an override, on the class or on the instance, is still called and still decides.
"""

from __future__ import annotations

import copy
import textwrap
from pathlib import Path

import microsched.policy as mp
from microsched.api import run

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "policies"
SEED = 3

POLICIES = f'''
import sys
sys.path.insert(0, {str(EXAMPLES)!r})
from shenango import Shenango
from dfcfs import DistributedFcfs

class NeverPark(Shenango):
    calls = 0
    def on_park_attempt(self, now, core, active, credits):
        NeverPark.calls += 1
        return False

class NeverParkOnInstance(Shenango):
    calls = 0
    def __init__(self, env, params):
        super().__init__(env, params)
        def refuse(now, core, active, credits):
            NeverParkOnInstance.calls += 1
            return False
        self.on_park_attempt = refuse

class Clocked(DistributedFcfs):
    calls = {{"clock": 0, "quantum": 0, "finished": 0}}
    def clock(self, now):
        Clocked.calls["clock"] += 1
    def quantum(self, core, rtype, service_ns, default_ns):
        Clocked.calls["quantum"] += 1
        return default_ns
    def finished(self, core, service_ns):
        Clocked.calls["finished"] += 1
'''


def allocators(alloc: dict) -> dict:
    import tomllib

    s = tomllib.loads((ROOT / "experiments/allocators/base.toml").read_text())
    s.update(duration_ms=5, warmup_ms=1)
    s["policy"]["allocator"] = alloc
    return s


def test_overridden_optional_methods_are_called(tmp_path):
    f = tmp_path / "bridge_policies.py"
    f.write_text(textwrap.dedent(POLICIES))
    py = lambda cls: {"kind": "python", "class": f"{f}:{cls}"}  # noqa: E731
    plain = run(allocators(py("Shenango")), seed=SEED)
    assert plain.summary["cores"]["allocated_mean"] < 15, "Shenango parks cores at load 0.5"
    for cls in ("NeverPark", "NeverParkOnInstance"):
        r = run(allocators(py(cls)), seed=SEED)
        assert mp._loaded[f"{f}:{cls}"].calls > 100, f"{cls}.on_park_attempt was called"
        assert r.summary["cores"]["allocated_mean"] > plain.summary["cores"]["allocated_mean"], f"{cls}: refusing to park keeps cores"

    from microsched.cli.bench import bench_scenarios

    (exp32,) = [s for name, s, _ in bench_scenarios(quick=True) if name == "exp32-instant"]
    exp32 = copy.deepcopy(exp32)
    exp32.update(duration_ms=1.0, warmup_ms=0.5)
    exp32["server"]["search"] = {"kind": "instant"}
    exp32.setdefault("policy", {})["sched"] = py("DistributedFcfs")
    base = run(exp32, seed=SEED)
    exp32["policy"]["sched"] = py("Clocked")
    clocked = run(exp32, seed=SEED)
    calls = mp._loaded[f"{f}:Clocked"].calls
    done = clocked.summary["requests"]["completed"]
    assert calls["quantum"] >= done and calls["finished"] >= done and calls["clock"] > done, calls
    # Overrides that give the default answers change nothing.
    assert clocked.summary["latency_us"] == base.summary["latency_us"]
    assert clocked.summary["requests"] == base.summary["requests"]
