"""Paired comparisons across seeds, shared by every reproduction.

Every seed runs the very same requests under every variant (common random numbers), so two
variants are compared seed by seed (a ratio, a difference) and only then summarised as a mean
over seeds with its 95 % confidence half-width: the variation the seeds share cancels out of
the comparison instead of widening its interval.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Mapping, TypeVar

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
    ``key`` (``None`` where every variant has a single point; ``at`` is then ignored): the one
    results type the claim measures read (per point, per seed).

    The rows are a run's (``results.parquet``) or a table derived from them with a ``seed``
    column (phases, shifts, cycles, max-load searches, ...); ``by`` is the column naming what is
    compared (``variant``, or a table's own: ``search``, ``system``). A seed with several rows at
    one point reads as their mean; rows without a ``seed`` column (nothing was run) read as no
    values."""

    def __init__(self, df: pd.DataFrame, key: str | None = None, by: str = "variant"):
        self.df = df
        self.key = key
        self.by = by
        self.seeds = sorted(set(df["seed"])) if "seed" in df.columns else []
        # A reproduction asks for hundreds of (variant, point, metric) triples: each point's rows
        # are selected once, not once per metric.
        self._variants: dict[str, pd.DataFrame] = {}
        self._points: dict[tuple[str, float | None], pd.DataFrame] = {}
        self._names: set[str] | None = None
        self._grid: list[float] | None = None

    def names(self) -> set[str]:
        """The variants (the values of the ``by`` column) the rows hold."""
        if self._names is None:
            self._names = set(self.df[self.by]) if self.by in self.df.columns else set()
        return self._names

    def has(self, *variants: str) -> bool:
        """Whether the rows hold every one of ``variants``."""
        return set(variants) <= self.names()

    def points(self) -> list[float]:
        """The values of the grid key the rows hold, in order (rounded to 9 digits)."""
        if self._grid is None:
            self._grid = (sorted(set(np.round(self.df[self.key].astype(float), 9)))
                          if self.key is not None and self.key in self.df.columns else [])
        return self._grid

    def points_of(self, variant: str | None = None) -> list[float]:
        """The values of the grid key ``variant``'s rows hold (every row's without one), in order,
        as run (not rounded)."""
        rows = self.df if variant is None else self._of_variant(variant)
        if self.key is None or self.key not in rows.columns:
            return []
        return sorted(set(rows[self.key].astype(float)))

    def nearest(self, variant: str, at: float) -> float | None:
        """The point of ``variant`` nearest ``at`` (None if it has no rows)."""
        xs = self.points_of(variant)
        return min(xs, key=lambda x: abs(x - at)) if xs else None

    def has_point(self, at: float) -> bool:
        return any(math.isclose(at, x) for x in self.points())

    def missing(self, variants: Iterable[str], points: Iterable[float], what: str = "load") -> str | None:
        """Why a claim cannot be measured on these rows (a variant or a ``what`` it needs is not
        there), or None."""
        gone = [x for x in variants if not self.has(x)]
        if gone:
            return f"the run has no variant {', '.join(gone)}"
        lost = [x for x in points if not self.has_point(x)]
        if lost:
            return f"the run has no {what} {', '.join(f'{x:g}' for x in lost)}"
        return None

    def _of_variant(self, variant: str) -> pd.DataFrame:
        rows = self._variants.get(variant)
        if rows is None:
            d = self.df
            rows = self._variants[variant] = d[d[self.by] == variant] if self.by in d.columns else d.iloc[:0]
        return rows

    def rows(self, variant: str, at: float | None) -> pd.DataFrame:
        """The rows of ``variant`` at ``at``, indexed by seed in order."""
        key = (variant, None if self.key is None else at)
        rows = self._points.get(key)
        if rows is None:
            of_variant = self._of_variant(variant)
            if self.key is not None:
                of_variant = (of_variant[np.isclose(of_variant[self.key].astype(float), at)]
                              if self.key in of_variant.columns else of_variant.iloc[:0])
            rows = self._points[key] = (of_variant.set_index("seed").sort_index() if "seed" in of_variant.columns
                                        else of_variant)
        return rows

    def values(self, variant: str, at: float | None, metric: str) -> pd.Series:
        """``metric`` of ``variant`` at ``at``, indexed by seed (empty without that column)."""
        if metric not in self.df.columns:
            return pd.Series(dtype=float)
        s = self.rows(variant, at)[metric].astype(float)
        return s if s.index.is_unique else s.groupby(level=0).mean()

    def over(self, variant: str, points: Iterable[float], metric: str) -> pd.Series:
        """``metric`` of ``variant`` over several points, one value per seed (the mean of that
        seed's values at those points), indexed by seed in order."""
        parts = [x for x in (self.values(variant, at, metric) for at in points) if len(x)]
        return pd.concat(parts).groupby(level=0).mean() if parts else pd.Series(dtype=float)

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
        sel = d[self.by] == variant
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
