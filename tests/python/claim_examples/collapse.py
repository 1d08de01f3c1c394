"""Passing and failing synthetic results for every claim of ``reproduce collapse``
(``microsched.reproduce.collapse.CLAIMS``): the :class:`collapse.Data` that
:func:`collapse.build_data` makes (the sweep's rows with ``frac`` = throughput / capacity, the
baseline's per-seed cycle table, the scenario's numbers), changed the way a real miss looks (a
pool that grows to 66, 1.66 cores on average, a fix that serves 0.58 of capacity, ...)."""

from __future__ import annotations

from typing import Any

from claim_examples.synth import frame
from microsched.reproduce.collapse import Data

RTT = "network.rtt_us"
BASE, FIX, STATIC = "baseline", "fix", "static"
PARAMS = {"max_cores": 32, "service_us": 1.0, "capacity_rps": 32e6, "rtt_us": 30.0, "target_us": 10.0,
          "drop_us": 20.0, "alloc_delay_us": 5.0, "duration_ms": 10.0, "warmup_ms": 20.0, "drop_gate": 0.05,
          "search": "auto", "client_timeout_us": 10.0, "pool_ceiling": 64000, "credits_per_core": 31.0,
          "initial_pool": 40, "floor": 32, "alpha": 1.0}


def point(frac: float, cores: float, pool: float = 40.0) -> dict[str, Any]:
    return {"frac": frac, "throughput_rps": frac * 32e6, "cores.allocated_mean": cores,
            "cores.busy_mean": 0.7 * cores, "credits.pool_mean": pool, "credits.issued_mean": pool,
            "queueing_delay_us.p99": 20.0, "drop_rate": 1 - frac, "credits.aqm_drops": 100.0,
            "credits.client_timeouts": 3e5, "core_time.transition_ns": 1e6, "duration_s": 0.01}


def results(collapse25: float = 0.033, collapse30: float = 0.033, cores30: float = 1.1, pool30: float = 41.0,
            fix: float = 0.93, short5: float = 0.87, static30: float = 0.5) -> dict:
    return {
        (BASE, 5.0): point(short5, 30.0, 700.0), (BASE, 10.0): point(0.89, 32.0, 1200.0),
        (BASE, 25.0): point(collapse25, 1.2), (BASE, 30.0): point(collapse30, cores30, pool30),
        (FIX, 5.0): point(0.85, 30.0, 500.0), (FIX, 10.0): point(0.89, 32.0, 1200.0),
        (FIX, 25.0): point(fix, 31.0, 900.0), (FIX, 30.0): point(fix, 31.0, 900.0),
        (STATIC, 30.0): point(static30, 32.0, 870.0),
    }


def cycles(high: float = 0.95, autocorrelation: float = 0.2, period: float = 57.0) -> dict:
    return {BASE: {"period_us": period, "autocorrelation": autocorrelation, "high_delay_fraction": high,
                   "periods": 333.0, "one_core_fraction": 0.9, "cores_median": 1.0, "cores_max": 5.0,
                   "busy_mean": 1.0, "pool_min": 32.0, "pool_max": 45.0, "delay_median": 14.0}}


def data(res: dict | None = None, cyc: dict | None = None) -> Data:
    c = frame(cyc or cycles(), rtt_us=30.0)
    return Data.of(frame(res or results(), key=RTT), c, dict(PARAMS))


GOOD = data()
NAN = float("nan")

EXAMPLES = {
    # 1/32 of capacity; a miss: a partial collapse at 0.117
    "collapse@rtt25": (GOOD, data(res=results(collapse25=0.117))),
    "collapse@rtt30": (GOOD, data(res=results(collapse30=0.117))),
    # 1.1 cores on average; a miss: 1.66
    "collapse-one-core@rtt30": (GOOD, data(res=results(cores30=1.66))),
    # a pool of 41; a miss: it grows to 66
    "collapse-pool-stays@rtt30": (GOOD, data(res=results(pool30=66.0))),
    # 95 % of the round trips see the target; a miss: 65 %
    "collapse-bursts-high-delay@rtt30": (GOOD, data(cyc=cycles(high=0.65))),
    # a 57 µs cycle; a miss: no cycle at all
    "collapse-cycle@rtt30": (GOOD, data(cyc=cycles(autocorrelation=NAN))),
    # the fix at 0.93 of capacity; a miss: 0.58
    "fix-no-collapse@rtt25": (GOOD, data(res=results(fix=0.58))),
    "fix-no-collapse@rtt30": (GOOD, data(res=results(fix=0.58))),
    # 0.87 of capacity at RTT 5 µs; a miss: 0.4
    "short-rtt-no-collapse": (GOOD, data(res=results(short5=0.4))),
    # static 0.5 against the baseline's 0.033; a miss: static no better than the baseline
    "collapse-needs-core-allocation@rtt30": (GOOD, data(res=results(static30=0.033, collapse30=0.033))),
}
