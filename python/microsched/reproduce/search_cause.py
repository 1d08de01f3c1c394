"""Measured causes of the claims that the default switch of issue 12 item 6 moved: the probe-cost
work search (``server.search = auto``: 100 ns probes, own queue every 1 µs, park after the
allocator's poll period of fruitless search, Caladan's rule) and the core fix's drop-gated ramp
(``core_fix_drop_gate = 0.05``, the study's simulator).

The text of a cause is built from the run's own numbers (cores, core wake-ups, credit pool, AQM
drops, queueing delay), so it states what this run measured, whatever the seeds and durations.
``--semantics instant`` runs a reproduction with the model before the switch (instant search,
ungated ramp) for the side-by-side comparison the README reports.
"""

from __future__ import annotations

import math

from .stats import Seeds

SWITCH = ("`--semantics instant` runs the instant search and the ungated fix ramp (the model before issue 12 "
          "item 6) for comparison")


def _m(s: Seeds, variant: str, at: float | None, metric: str) -> float:
    try:
        return float(s.mean(variant, at, metric))
    except (KeyError, ValueError, ZeroDivisionError):
        return math.nan


def wakes_per_ms(s: Seeds, variant: str, at: float | None, wake_us: float) -> float:
    """Core wake-ups per ms of the measured window: the transition time over the wake latency."""
    return _m(s, variant, at, "core_time.transition_ns") / (wake_us * 1e3) / (_m(s, variant, at, "duration_s") * 1e3)


def gated_fix_churn(s: Seeds, fix: str, at: float | None, *, max_cores: int, wake_us: float,
                    target_us: float, drop_us: float) -> str:
    """Why the fix variant loses throughput with the gated ramp and the probe search: the admitted
    load queues on too few cores, which keep parking and waking (numbers of this run)."""
    cores = _m(s, fix, at, "cores.allocated_mean")
    busy = _m(s, fix, at, "cores.busy_mean")
    pool = _m(s, fix, at, "credits.pool_mean")
    issued = _m(s, fix, at, "credits.issued_mean")
    aqm = _m(s, fix, at, "credits.aqm_drops")
    qd99 = _m(s, fix, at, "queueing_delay_us.p99")
    drop = _m(s, fix, at, "drop_rate")
    wakes = wakes_per_ms(s, fix, at, wake_us)
    return (f"fix variant: {cores:.1f} of {max_cores} cores allocated ({busy:.1f} busy) with {wakes:.0f} core "
            f"wake-ups per ms (transition time / {wake_us:g} µs): granted cores park again after a fruitless "
            f"poll period; the admitted load then queues on those few cores "
            f"(queueing delay p99 {qd99:.0f} µs against the {target_us:g} µs target and {drop_us:g} µs AQM "
            f"threshold), the AQM drops {aqm:.0f} requests (drop rate {drop:.2f}), and once a period's drops "
            f"reach 5 % of the pool the gated ramp adds credits whatever the delay (pool {pool:.0f}, issued "
            f"{issued:.0f}), which keeps the queue long. Neither switch alone does it, and the regime is fragile (README \"Work "
            f"search\": the four combinations and the probe parameters measured); {SWITCH}")


def point_figures(s: Seeds, variant: str, at: float | None) -> str:
    """Cores, p99 and queueing delay p99 of one variant at one point (this run's numbers)."""
    return (f"{variant} {_m(s, variant, at, 'cores.allocated_mean'):.2f} cores, p99 "
            f"{_m(s, variant, at, 'latency_us.p99'):.1f} µs, queueing delay p99 "
            f"{_m(s, variant, at, 'queueing_delay_us.p99'):.1f} µs")
