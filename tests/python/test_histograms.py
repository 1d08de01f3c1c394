"""Percentiles pooled across seeds from the HDR histograms every run exports (issue 13): the
pooled p99 of N seeds is the p99 of all their requests together, within the histograms'
precision (3 significant digits), and the sweep aggregation and the reproduction statistics
report it beside the mean of the per-seed p99s."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import microsched
from microsched.histograms import merge, pooled, pooled_columns
from microsched.reproduce.stats import Seeds
from microsched.sweep.runner import aggregate, flatten

# Short, with a visible tail: M/M/4 at load 0.9, per-request records kept.
SCENARIO = {
    "name": "pool",
    "duration_ms": 20,
    "warmup_ms": 2,
    "server": {"max_cores": 4, "queue": "central"},
    "network": {"rtt_us": 10},
    "load": {"fraction": 0.9},
    "workload": {"types": [{"name": "exp", "service": {"dist": "exponential", "mean_us": 10}}]},
    "metrics": {"record_requests": True},
}
SEEDS = (1, 2, 3, 4)
# 3 significant digits: a recorded value and the bucket bound reported for it differ by less
# than one part in 2^10 (HdrHistogram's sub-bucket resolution for 3 digits is 2048 per octave).
PRECISION = 2.0 ** -10


def _measured_latencies_ns(res) -> np.ndarray:
    """End-to-end latency of every request that completed in the measured window (what the
    summary's histograms record)."""
    r = res.requests
    warmup_ns = SCENARIO["warmup_ms"] * 1e6
    end_ns = warmup_ns + SCENARIO["duration_ms"] * 1e6
    done = r[(r["dropped"] == 0) & (r["response_ns"] >= warmup_ns) & (r["response_ns"] <= end_ns)]
    return np.maximum((done["response_ns"] - done["created_ns"]).to_numpy(dtype=np.int64), 1)


def _exact_quantile(values: np.ndarray, q: float) -> int:
    """HdrHistogram's quantile definition on exact values: the smallest value with at least
    ceil(q * n) values at or below it."""
    v = np.sort(values)
    return int(v[max(1, math.ceil(q * len(v))) - 1])


@pytest.fixture(scope="module")
def runs():
    return {s: microsched.run(SCENARIO, seed=s) for s in SEEDS}


def test_every_run_exports_its_histograms(runs):
    h = runs[1].summary["histograms"]
    assert set(h) == {"latency_ns", "queueing_delay_ns", "slowdown_milli"}
    assert all(v.startswith("HISTFAAA") for v in h.values()), "HdrHistogram's compressed V2 text"
    # A single run pooled is that run, to the last digit.
    s = runs[1].summary
    res = merge([h["latency_ns"]])
    assert [v / 1e3 for v in res["values"]] == [s["latency_us"][k] for k in ("p50", "p99", "p999")]
    assert res["count"] == len(_measured_latencies_ns(runs[1]))
    assert pooled([h["slowdown_milli"]], 0.999, 1e-3) == s["slowdown"]["p999"]


@pytest.mark.parametrize("q", [0.5, 0.99, 0.999])
def test_pooled_percentile_is_the_percentile_of_the_union(runs, q):
    union = np.concatenate([_measured_latencies_ns(r) for r in runs.values()])
    exact = _exact_quantile(union, q)
    res = merge([r.summary["histograms"]["latency_ns"] for r in runs.values()], [q])
    assert res["count"] == len(union)
    got = res["values"][0]
    # The histogram reports the upper bound of the value's bucket: never below, within precision.
    assert exact <= got <= exact * (1 + PRECISION) + 1, (q, exact, got)
    # A quantile of a mixture lies between its components' quantiles (the mean of the per-seed
    # p99s is another statistic: one seed with a long tail moves the two apart).
    key = {0.5: "p50", 0.99: "p99", 0.999: "p999"}[q]
    per_seed = [r.summary["latency_us"][key] * 1e3 for r in runs.values()]
    assert min(per_seed) <= got <= max(per_seed)


def test_sweep_aggregation_and_seed_statistics_pool_the_histograms(runs):
    rows = [{"variant": "a", "seed": s, **{k: v for k, v in flatten(r.summary).items() if k != "seed"}}
            for s, r in runs.items()]
    df = pd.DataFrame(rows)
    agg = aggregate(df, ["variant"])
    union = np.concatenate([_measured_latencies_ns(r) for r in runs.values()])
    row = agg.iloc[0]
    # The contract columns stay: the mean over seeds of each seed's p99, with its CI.
    assert row["latency_us.p99"] == pytest.approx(np.mean(df["latency_us.p99"]))
    assert "latency_us.p99.ci95" in agg.columns
    for name, q in (("p50", 0.5), ("p99", 0.99), ("p999", 0.999)):
        exact = _exact_quantile(union, q) / 1e3
        assert exact <= row[f"latency_us.{name}_pooled"] <= exact * (1 + PRECISION) + 1e-3
    assert {"queueing_delay_us.p99_pooled", "slowdown.p999_pooled"} <= set(agg.columns)
    seeds = Seeds(df)
    assert seeds.pooled("a", None, "latency_us.p99") == row["latency_us.p99_pooled"]
    assert seeds.pooled("a", None, "slowdown.p99") == row["slowdown.p99_pooled"]
    with pytest.raises(ValueError, match="not a pooled percentile"):
        seeds.pooled("a", None, "throughput_rps")


def test_several_types_pool_per_type():
    sc = dict(SCENARIO, metrics={"record_requests": False}, workload={"types": [
        {"name": "short", "ratio": 0.9, "service": {"dist": "constant", "value_us": 2}},
        {"name": "long", "ratio": 0.1, "service": {"dist": "constant", "value_us": 50}},
    ]})
    runs = [microsched.run(sc, seed=s) for s in (1, 2)]
    by_type = runs[0].summary["histograms"]["by_type"]
    assert [t["name"] for t in by_type] == ["short", "long"]
    df = pd.DataFrame([{"variant": "a", **flatten(r.summary)} for r in runs])
    cols = pooled_columns({c: df[c] for c in df.columns if c.startswith("histograms.")})
    assert {"by_type.short.latency_us.p99_pooled", "by_type.long.slowdown.p50_pooled", "latency_us.p99_pooled"} <= set(cols)
    # Pooled per type, then overall: the overall union contains both types' requests.
    lo = cols["by_type.short.latency_us.p50_pooled"]
    hi = cols["by_type.long.latency_us.p50_pooled"]
    assert lo < cols["latency_us.p999_pooled"] and hi > lo


def test_not_a_histogram_is_a_clear_error():
    with pytest.raises(ValueError, match="histogram 0: not base64"):
        merge(["not a histogram!"])
    with pytest.raises(ValueError, match="quantiles"):
        merge([], [1.5])
    assert math.isnan(pooled([], 0.99))
