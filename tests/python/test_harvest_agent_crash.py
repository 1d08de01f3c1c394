"""A harvesting agent killed without a chance to restore (SIGKILL: an OOM kill) leaves the
Primary's lent core with the Secondary, or the Secondary stopped. Every change is first written
to the agent's state file, and the next agent started on that file puts everything back before
it reads any mask as an original. Killed at random instants of its loop, and between a state
write and the change it announces (the agent's crash hook), every Primary and Secondary is back
as it was after a restart."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_procs import ENV, allowed, sleeper, state, wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or (os.cpu_count() or 1) < 2,
                                reason="the agent needs Linux and 2 CPUs")

SLEEPER = sleeper(120)
CRASH = "MICROSCHED_HARVEST_CRASH_AFTER_WRITES"


def test_sigkilled_agent_is_repaired_by_a_restart(tmp_path: Path) -> None:
    rng = random.Random(48)
    primary = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    sec = subprocess.Popen([sys.executable, "-c", SLEEPER])
    state_f = tmp_path / "state.json"
    agents: list[subprocess.Popen] = []

    def agent(*flags: str, env: dict | None = None, log: Path | None = None) -> subprocess.Popen:
        argv = [sys.executable, "-m", "microsched", "harvest", "--state-file", str(state_f), "--poll-ms", "5",
                "--controller", '{"kind": "harvest_static", "buffer": 1}', *flags, "--json"]
        if log is not None:
            argv += ["--log", str(log)]
        a = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env or ENV)
        agents.append(a)
        return a

    tenants = ("--primary", str(primary.pid), "--primary-cores", "0-1", "--secondary", str(sec.pid))
    try:
        assert wait_for(lambda: len(os.listdir(f"/proc/{sec.pid}/task")) >= 3)
        before_sec, before_pri = allowed(sec.pid), allowed(primary.pid)
        assert set(before_sec.values()) != {"1"}, "the test needs a Secondary not already on core 1 alone"
        left_changed, repairs = 0, 0
        for i in range(8):
            log = tmp_path / f"log{i}.jsonl"
            if i % 2 == 0:
                # Between a state write and its change: write 1 empties the file at start-up,
                # 2 records the stop (no core yet), 3 the masks before the lend, 4 the resume.
                n = rng.randint(2, 4)
                a = agent(*tenants, env={**ENV, CRASH: str(n)}, log=log)
                try:
                    a.wait(20)
                except subprocess.TimeoutExpired:
                    pytest.fail(f"the crash hook after write {n} did not fire")
                assert a.returncode == -9, a.stderr.read().decode() if a.stderr else ""
            else:
                # At a random instant of its loop, once it has started.
                a = agent(*tenants, log=log)
                assert wait_for(lambda: log.exists() and log.stat().st_size > 0)
                time.sleep(rng.uniform(0.0, 0.3))
                a.kill()
                a.wait(10)
            left_changed += allowed(sec.pid) != before_sec or state(sec.pid) == "T"
            # The restart: alternately a bare agent (the repair alone) and one given the same
            # tenants, which must record the true originals and put them back at its end.
            b = agent(*(tenants if i % 4 in (1, 2) else ()), "--duration", "0.3")
            out, err = b.communicate(timeout=60)
            assert b.returncode == 0, err.decode()
            rep = json.loads(out)
            repairs += rep["state"]["repaired"] is not None
            assert rep["state"]["errors"] == [], rep["state"]
            assert (rep["state"]["repaired"] or {}).get("errors", []) == [], rep["state"]
            assert allowed(sec.pid) == before_sec, (i, allowed(sec.pid))
            assert state(sec.pid) != "T", i
            assert allowed(primary.pid) == before_pri, i
            assert state(primary.pid) != "T", i
            assert not state_f.exists(), "a clean exit leaves nothing to repair"
        # The kills did leave changes behind (else this test would prove nothing), and the
        # restarts found them in the state file.
        assert left_changed >= 6, left_changed
        assert repairs >= left_changed, (repairs, left_changed)
    finally:
        for p in [*agents, sec, primary]:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_a_second_agent_on_the_same_state_file_is_refused(tmp_path: Path) -> None:
    state_f = tmp_path / "state.json"
    argv = [sys.executable, "-m", "microsched", "harvest", "--state-file", str(state_f)]
    a = subprocess.Popen([*argv, "--duration", "30"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    try:
        assert wait_for(lambda: Path(f"{state_f}.lock").exists())
        time.sleep(0.3)
        r = subprocess.run([*argv, "--duration", "0.1"], capture_output=True, text=True, env=ENV, timeout=60)
        assert r.returncode == 2, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "--state-file" in lines[0] and "in use by another running agent" in lines[0], r.stderr
    finally:
        a.kill()
        a.wait()
