"""Paired comparisons across seeds, shared by every reproduction.

Every seed runs the very same requests under every variant (common random numbers), so two
variants are compared seed by seed (a ratio, a difference) and only then summarised as a mean
over seeds with its 95 % confidence half-width: the variation the seeds share cancels out of
the comparison instead of widening its interval.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, TypeVar

import numpy as np
import pandas as pd

from .claims import rounded
from .runner import mean_ci95

K = TypeVar("K")


def safe_ratio(a: float, b: float) -> float:
    """a / b, NaN (left out of the mean) where b is not positive."""
    return a / b if b > 0 else math.nan


class Seeds:
    """A reproduction's result rows by variant and seed, at the values ``at`` of the grid key
    ``key`` (``None`` where every variant has a single point; ``at`` is then ignored)."""

    def __init__(self, df: pd.DataFrame, key: str | None = None):
        self.df = df
        self.key = key
        self.seeds = sorted(set(df["seed"]))
        # A reproduction asks for hundreds of (variant, point, metric) triples: each point's rows
        # are selected once, not once per metric.
        self._variants: dict[str, pd.DataFrame] = {}
        self._points: dict[tuple[str, float | None], pd.DataFrame] = {}

    def rows(self, variant: str, at: float | None) -> pd.DataFrame:
        """The rows of ``variant`` at ``at``, indexed by seed in order."""
        key = (variant, None if self.key is None else at)
        rows = self._points.get(key)
        if rows is None:
            of_variant = self._variants.get(variant)
            if of_variant is None:
                of_variant = self._variants[variant] = self.df[self.df["variant"] == variant]
            if self.key is not None:
                of_variant = of_variant[np.isclose(of_variant[self.key].astype(float), at)]
            rows = self._points[key] = of_variant.set_index("seed").sort_index()
        return rows

    def values(self, variant: str, at: float | None, metric: str) -> pd.Series:
        """``metric`` of ``variant`` at ``at``, indexed by seed (empty without that column)."""
        if metric not in self.df.columns:
            return pd.Series(dtype=float)
        return self.rows(variant, at)[metric].astype(float)

    def mean(self, variant: str, at: float | None, metric: str) -> float:
        s = self.values(variant, at, metric)
        return float(s.mean()) if len(s) else math.nan

    def stat(self, variant: str, at: float | None, metric: str) -> tuple[float, float]:
        """(mean, ci95) over seeds of one variant's ``metric``."""
        m, ci, _ = mean_ci95(self.values(variant, at, metric))
        return m, ci

    def pooled(self, variant: str, at: float | None, metric: str) -> float:
        """``metric`` (a percentile: ``latency_us.p99``, ``slowdown.p999``,
        ``by_type.A.latency_us.p50``, ...) of ``variant`` at ``at`` over the requests of every
        seed together, from the runs' merged histograms: the percentile of the pooled requests,
        not the mean of the per-seed percentiles (NaN without exported histograms)."""
        from ..histograms import KINDS, PREFIX, QUANTILES, pooled

        base, _, name = metric.rpartition(".")
        head, _, kind = base.rpartition(".")
        col = next((PREFIX + (f"{head}." if head else "") + suffix
                    for suffix, (m, _) in KINDS.items() if m == kind), None)
        if col is None or name not in QUANTILES:
            raise ValueError(f"{metric}: not a pooled percentile: use latency_us, queueing_delay_us or slowdown "
                             f"with {', '.join(QUANTILES)}")
        texts = self.values_raw(variant, at, col)
        return pooled(texts, QUANTILES[name], KINDS[col.rsplit(".", 1)[1]][1])

    def values_raw(self, variant: str, at: float | None, column: str) -> list:
        """``column`` of ``variant`` at ``at`` for every seed, as stored (empty without it)."""
        d = self.df
        if column not in d.columns:
            return []
        sel = d["variant"] == variant
        if self.key is not None:
            sel &= np.isclose(d[self.key].astype(float), at)
        return list(d.loc[sel, column])

    def per_seed(self, at: float | None, metric: str, fn: Callable[..., float], *variants: str) -> list[float]:
        """``fn(x_1, x_2, ...)`` on every seed all ``variants`` ran, x_i the metric of the i-th."""
        cols = pd.concat([self.values(x, at, metric) for x in variants], axis=1, join="inner")
        return [fn(*row) for row in cols.itertuples(index=False)]

    def paired(self, at: float | None, metric: str, fn: Callable[..., float], *variants: str) -> tuple[float, float]:
        """(mean, ci95) over seeds of :meth:`per_seed`."""
        m, ci, _ = mean_ci95(self.per_seed(at, metric, fn, *variants))
        return m, ci

    def ratio(self, at: float | None, metric: str, num: str, den: str) -> tuple[float, float]:
        """(mean, ci95) over seeds of metric(num) / metric(den)."""
        return self.paired(at, metric, safe_ratio, num, den)


def extreme(stats: Mapping[K, tuple[float, float]], largest: bool) -> tuple[K, float, float]:
    """(point, mean, ci95) of the point with the largest (or smallest) mean: the one a claim made
    "at every point" stands or falls by."""
    at = (max if largest else min)(stats, key=lambda k: stats[k][0])
    return (at, *stats[at])


def by_point(stats: Mapping[Any, tuple[float, float]]) -> dict[str, float | None]:
    """Every point's mean as a claim shows it (its ``by_load``, ``by_sessions``, ...)."""
    return {str(k): rounded(m) for k, (m, _) in stats.items()}
