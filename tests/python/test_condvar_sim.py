"""Condition variables in request programs, from Python (the simulator): the summary's
`condvars` of the shipped producer/consumer scenario, its sweep columns, and a bad step refused
with its field named."""

from __future__ import annotations

import pytest

import microsched
from conftest import REPO
from microsched.sweep.worker import flatten

SCEN = REPO / "experiments" / "protego" / "real-condvar.toml"
SHORT = ["duration_ms=300", "warmup_ms=50"]


def test_the_summary_reports_each_condvar_and_sweeps_flatten_it():
    s = microsched.run(str(SCEN), seed=1, overrides=SHORT).summary
    (cv,) = s["condvars"]
    assert cv["name"] == "items" and cv["waits"] > 0 and 0 < cv["wakeups"] <= cv["signals"], cv
    assert cv["drops"] > 0 and s["lock_control"]["drops"] >= cv["drops"], cv
    cols = flatten(s)
    assert cols["condvars.items.waits"] == cv["waits"] and cols["condvars.items.wait_us.p99"] == cv["wait_us"]["p99"]


def test_a_step_naming_an_unknown_condvar_is_refused_with_its_field():
    with pytest.raises(ValueError) as e:
        microsched.run(str(SCEN), seed=1, overrides=SHORT + ['workload.types.1.paths.0.steps.1.condvar="nope"'])
    msg = str(e.value)
    assert "workload.types[1].paths[0].steps[1].condvar" in msg and "declared: items" in msg, msg
