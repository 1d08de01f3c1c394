"""What the harvesting agent's tests on real processes share: the environment a `microsched`
child needs, a Secondary to act on, and its threads' masks and run state as /proc shows them."""

from __future__ import annotations

import os
import time

from conftest import REPO

ENV = {**os.environ, "PYTHONPATH": str(REPO / "python")}


def sleeper(seconds: int) -> str:
    """A Secondary of three threads that sleep (masks readable without it spinning)."""
    return ("import threading,time\nfor _ in range(2): threading.Thread(target=time.sleep, "
            f"args=({seconds},), daemon=True).start()\ntime.sleep({seconds})")


def allowed(pid: int) -> dict[str, str]:
    """Each thread's `Cpus_allowed_list`."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        for line in open(f"/proc/{pid}/task/{tid}/status"):
            if line.startswith("Cpus_allowed_list:"):
                out[tid] = line.split(":", 1)[1].strip()
    return out


def state(pid: int) -> str:
    """The process's run state letter (`T`: stopped)."""
    s = open(f"/proc/{pid}/stat").read()
    return s[s.rfind(")") + 2]


def wait_for(cond, timeout: float = 20.0) -> bool:
    """Polls `cond` until it holds (True) or `timeout` seconds pass (False)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return False
