"""Percentiles pooled across runs, from the HDR histograms every run exports.

Each run's summary carries its measured window's histograms (``summary["histograms"]``,
flattened in a sweep's rows as ``histograms.latency_ns``, ``histograms.queueing_delay_ns``,
``histograms.slowdown_milli`` and, with several request types, ``histograms.by_type.NAME.*``):
HdrHistogram's compressed V2 text, which any HdrHistogram implementation decodes. Merging the
histograms of several seeds (bucket counts add: exact) gives the percentile of all their requests
together, ``latency_us.p99_pooled``, beside the mean of the per-seed p99s (``latency_us.p99``).
The merge is the simulator's own (``_native.merge_histograms``, the Rust hdrhistogram crate), so
a pooled percentile of one run is that run's percentile to the last digit.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

PREFIX = "histograms."
# Histogram column suffix -> (the metric prefix it pools into, the factor to that metric's unit).
KINDS = {
    "latency_ns": ("latency_us", 1e-3),
    "queueing_delay_ns": ("queueing_delay_us", 1e-3),
    "slowdown_milli": ("slowdown", 1e-3),
}
# Quantile of each pooled percentile column, as the summary names its percentiles.
QUANTILES = {"p50": 0.5, "p99": 0.99, "p999": 0.999}


def merge(texts: Iterable[str], quantiles: Iterable[float] = (0.5, 0.99, 0.999)) -> dict[str, Any]:
    """Merges exported histograms: ``{"count", "values" (one per quantile, in the histograms'
    unit), "histogram" (the union as text)}``."""
    from ._native_loader import native

    return native().merge_histograms([str(t) for t in texts], [float(q) for q in quantiles])


def pooled_metric(column: str) -> tuple[str, float] | None:
    """``histograms.latency_ns`` -> ("latency_us", 1e-3); ``histograms.by_type.A.slowdown_milli``
    -> ("by_type.A.slowdown", 1e-3); None for a column that is not an exported histogram."""
    if not column.startswith(PREFIX):
        return None
    rest = column[len(PREFIX):]
    for suffix, (metric, scale) in KINDS.items():
        if rest == suffix:
            return metric, scale
        if rest.startswith("by_type.") and rest.endswith("." + suffix):
            return rest[: -len(suffix)] + metric, scale
    return None


def pooled_columns(rows: Mapping[str, Iterable[Any]]) -> dict[str, float]:
    """For every histogram column of ``rows`` (a column name -> its values over the runs to pool,
    e.g. a DataFrame group), ``M.p50_pooled``, ``M.p99_pooled`` and ``M.p999_pooled`` of the
    metric M it records (NaN where no run recorded anything)."""
    out: dict[str, float] = {}
    for col in rows.keys():
        target = pooled_metric(str(col))
        if target is None:
            continue
        metric, scale = target
        texts = [t for t in rows[col] if isinstance(t, str) and t]
        res = merge(texts, QUANTILES.values()) if texts else {"count": 0, "values": [0] * len(QUANTILES)}
        for name, v in zip(QUANTILES, res["values"]):
            out[f"{metric}.{name}_pooled"] = v * scale if res["count"] else math.nan
    return out


def pooled(texts: Iterable[str], quantile: float, scale: float = 1.0) -> float:
    """The ``quantile`` of the union of exported histograms, times ``scale`` (NaN if empty)."""
    texts = [t for t in texts if isinstance(t, str) and t]
    if not texts:
        return math.nan
    res = merge(texts, [quantile])
    return res["values"][0] * scale if res["count"] else math.nan
