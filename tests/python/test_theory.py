"""The shipped validation scenario against queueing theory, through the Python API.

Tolerances are 4 batch-means standard errors of the run itself (a false-alarm rate below 1e-3
with 32 batches), not picked numbers.
"""

import math
from pathlib import Path

import numpy as np

import microsched

MMC = Path(__file__).resolve().parents[2] / "experiments" / "validation" / "mmc.toml"
Z = 4.0


def erlang_c(c: int, a: float) -> float:
    head = sum(a**k / math.factorial(k) for k in range(c))
    tail = a**c / math.factorial(c) * c / (c - a)
    return tail / (head + tail)


def batch_means(x: np.ndarray, k: int = 32) -> tuple[float, float]:
    n = len(x) // k
    means = x[: n * k].reshape(k, n).mean(axis=1)
    return float(means.mean()), float(means.std(ddof=1) / math.sqrt(k))


def test_mmc_toml_matches_erlang_c():
    res = microsched.run(
        MMC, seed=3, overrides=["duration_ms=500", "warmup_ms=20", "metrics.record_requests=true"]
    )
    df = res.requests
    df = df[(df.created_ns >= 20_000_000) & (df.dropped == 0)].sort_values("id")
    wait = (df.start_ns - df.server_arrival_ns).to_numpy(dtype=float)
    c, lam, mu = 16, 1.28e-3, 1e-4  # per ns: 1.28 M/s arrivals, 10 µs mean service
    p_wait = erlang_c(c, lam / mu)
    wq = p_wait / (c * mu - lam)
    m, se = batch_means(wait)
    assert abs(m - wq) < Z * se, (m, wq, se)
    pw, se_pw = batch_means((wait > 0).astype(float))
    assert abs(pw - p_wait) < Z * se_pw, (pw, p_wait, se_pw)
    # Offered load is what the scenario says: 1.28 M/s, Poisson count sd = sqrt(N).
    n = res.summary["offered_rps"] * res.summary["duration_s"]
    assert abs(n - 1.28e6 * 0.5) < Z * math.sqrt(1.28e6 * 0.5)


def test_core_time_and_requests_are_conserved():
    s = microsched.run(MMC, seed=1, overrides=["duration_ms=50"]).summary
    r = s["requests"]
    assert r["generated"] == r["completed"] + r["dropped"] + r["in_flight"]
    ct = s["core_time"]
    assert ct["busy_ns"] + ct["search_ns"] + ct["parked_ns"] + ct["transition_ns"] == ct["total_ns"]
    assert ct["total_ns"] == 16 * (50 + 50) * 1_000_000  # cores x (warm-up + window)
