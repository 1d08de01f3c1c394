"""The error paths of the Python policy interface (issue 43), as a user meets them on the
command line and in the Python API:

* a decision out of bounds (an allocator yielding core 99 of 16, a controller granting -3
  credits) stops the run with one line naming the policy, the call, the value and the simulated
  time: exit status 2, no traceback, no Rust panic;
* an exception in policy code prints that line, then the Python traceback with the policy's own
  frames;
* parameters that do not fit (an unknown name, a wrong type) are one line naming
  `policy.allocator.params.NAME`; `validate` prints the parameters with the defaults filled in;
* a policy drawing from its seeded stream gives identical runs for a seed and different runs
  for different seeds;
* Ctrl-C during a run whose time goes into a Python policy stops it like any other run.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, one_line_error, run_cli, small

import microsched
from microsched._native import PolicyFailed

BROKEN = REPO / "tests" / "python" / "policies" / "broken.py"


def scenario(cls: str, section: str = "allocator", **changes) -> dict:
    """SMALL on 16 cores with the allocator (or controller) `broken.py:cls`."""
    s = small(**{"server.max_cores": 16, "server.queue": "per_core", "server.steal": True, **changes})
    s.setdefault("policy", {})[section] = {"kind": "python", "class": f"{BROKEN}:{cls}"}
    return s


def write(tmp_path: Path, s: dict) -> Path:
    p = tmp_path / "s.json"
    p.write_text(json.dumps(s), encoding="utf-8")
    return p


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "microsched", *map(str, args)], capture_output=True, text=True,
                          timeout=120, cwd=REPO)


def test_core_out_of_range_is_one_line_naming_policy_call_value_and_time(tmp_path: Path) -> None:
    r = cli("run", write(tmp_path, scenario("Core99")))
    line = one_line_error(r, "policy Core99", "tick", "Yield(99)", "cores are 0..16", "simulated time 2.0")
    assert "panick" not in r.stderr and "Traceback" not in r.stderr, line
    with pytest.raises(PolicyFailed, match=r"policy Core99: tick at simulated time 2\.0\d+ ms"):
        microsched.run(scenario("Core99"))


def test_negative_credits_are_one_line_naming_policy_call_value_and_time(tmp_path: Path) -> None:
    s = scenario("NegativeCredits", section="overload")
    r = cli("run", write(tmp_path, s))
    one_line_error(r, "policy NegativeCredits", "on_response", "returned -3 credits", "simulated time 2.0")


def test_exception_in_policy_code_shows_its_traceback_and_the_time(tmp_path: Path) -> None:
    r = cli("run", write(tmp_path, scenario("Raises")))
    assert r.returncode == 2, r.stderr
    first, *rest = r.stderr.strip().splitlines()
    assert first.startswith("microsched: error: policy Raises: tick at simulated time 2.0"), first
    assert first.endswith("RuntimeError: bad policy state at 2000000"), first
    tb = "\n".join(rest)
    # the policy's own frames, through its helper, as Python prints them
    assert rest[0] == "Traceback (most recent call last):", r.stderr
    assert f'File "{BROKEN}"' in tb and "in decide" in tb and "raise RuntimeError" in tb, tb
    assert "panick" not in r.stderr and "internal error" not in r.stderr


@pytest.mark.parametrize("params, field, message", [
    ({"nope": 1}, "policy.allocator.params.nope", "is not a parameter of Tunable: use one of lower_us, ticks"),
    ({"ticks": "x"}, "policy.allocator.params.ticks", "'x' is not allowed: use an integer"),
    ({"ticks": 1.5}, "policy.allocator.params.ticks", "1.5 is not allowed: use an integer"),
    ({"lower_us": True}, "policy.allocator.params.lower_us", "True is not allowed: use a number"),
])
def test_bad_params_name_the_field(tmp_path: Path, params: dict, field: str, message: str) -> None:
    s = scenario("Tunable")
    s["policy"]["allocator"]["params"] = params
    one_line_error(cli("run", write(tmp_path, s)), f"{field}: {message}")
    with pytest.raises(ValueError, match=field):
        microsched.validate(s)


def test_validate_prints_the_params_with_defaults_filled_in(tmp_path: Path) -> None:
    s = scenario("Tunable")
    s["policy"]["allocator"]["params"] = {"ticks": 5}
    r = run_cli("validate", write(tmp_path, s))
    assert r.code == 0, r.err
    alloc = json.loads(r.out)["policy"]["allocator"]
    assert alloc == {"kind": "python", "class": f"{BROKEN}:Tunable", "params": {"lower_us": 1.0, "ticks": 5}}


def test_a_policy_drawing_from_its_stream_is_deterministic_per_seed() -> None:
    s = scenario("Drawing")
    a, b, c = (microsched.run(s, seed=seed) for seed in (1, 1, 2))
    assert a.summary["cores"]["allocated_mean"] < 16  # the coin decides something
    for key in ("latency_us", "cores", "requests", "core_time"):
        assert a.summary[key] == b.summary[key], key
    assert a.timeseries.equals(b.timeseries)
    assert a.summary["cores"] != c.summary["cores"]


def test_ctrl_c_during_a_python_policy_stops_cleanly(tmp_path: Path) -> None:
    # Most of the run's wall time is in the policy's Python code, so the signal lands there.
    s = scenario("Slow", duration_ms=20000.0)
    for extra in ([], ["--keep-partial", "--json"]):
        p = subprocess.Popen([sys.executable, "-m", "microsched", "run", str(write(tmp_path, s)), "--force", *extra],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
        time.sleep(3.0)
        assert p.poll() is None, p.stderr.read()
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
        assert p.returncode == 130, err
        assert time.monotonic() - t0 < 5.0
        assert "Traceback" not in err and "policy Slow" not in err, err
        if extra:
            assert json.loads(out)["sim"]["interrupted_at_ms"] > 0
        else:
            assert "interrupted" in err


def test_a_class_of_another_kind_is_refused_also_once_loaded(tmp_path: Path) -> None:
    # Loaded as a queueing policy first, the class is cached; as an allocator it is still refused.
    queue_policy = f"{REPO / 'tests' / 'python' / 'policies' / 'starving.py'}:StarveType1"
    s = small()
    s["policy"] = {"sched": {"kind": "python", "class": queue_policy}}
    microsched.validate(s)
    s["policy"] = {"allocator": {"kind": "python", "class": queue_policy}}
    with pytest.raises(ValueError, match=r"policy.allocator.class: .* is not a subclass of microsched.policy.Allocator"):
        microsched.validate(s)


def test_a_policy_failing_in_a_worker_process_is_reported_as_in_run(tmp_path: Path) -> None:
    # The failure crosses a process boundary (pickled), in a sweep and in compare.
    spec = tmp_path / "spec.toml"
    spec.write_text(f'''name = "broken"
base = "{REPO / 'experiments' / 'allocators' / 'base.toml'}"
seeds = 2
overrides = ["duration_ms=5", "warmup_ms=1", "policy.allocator.kind=python", "policy.allocator.class={BROKEN}:Raises"]
''', encoding="utf-8")
    r = cli("sweep", spec, "--out", tmp_path / "out", "--jobs", "2")
    assert r.returncode == 2, r.stderr
    first, *rest = r.stderr.strip().splitlines()
    assert first.startswith("microsched: error: point ") and "policy Raises: tick at simulated time 2.0" in first
    assert "RuntimeError: bad policy state" in first and "--resume" in first
    assert rest[0] == "Traceback (most recent call last):" and "in decide" in "\n".join(rest), r.stderr
    r = cli("compare", REPO / "examples" / "my-server.toml", "--variant", "static",
            "--variant", f"core99:policy.allocator.kind=python,policy.allocator.class={BROKEN}:Core99",
            "--seeds", "2", "--jobs", "2", "--set", "duration_ms=5")
    one_line_error(r, "policy Core99: tick at simulated time 2.0", "Yield(99), but the cores are 0..8")
