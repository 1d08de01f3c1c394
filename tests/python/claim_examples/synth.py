"""Synthetic result rows for the claim examples: the columns a reproduction's results have
(``variant``, ``seed``, a grid key, metrics), a few seeds with a small spread so that every
comparison has a confidence interval."""

from __future__ import annotations

from typing import Any, Mapping

import pandas as pd


def frame(points: Mapping[Any, Mapping[str, Any]], key: str | None = None, seeds: int = 3, spread: float = 0.01,
          **columns: Any) -> pd.DataFrame:
    """Rows for ``points``: ``{(variant, at): {metric: value}}`` with a grid ``key`` (``at`` its
    value), or ``{variant: {metric: value}}`` without one. Seed ``s`` gets each numeric value
    times ``1 + spread·(s − (seeds + 1)/2)``; ``columns`` are constant columns of every row."""
    rows = []
    for k, metrics in points.items():
        variant, at = (k if key is not None else (k, None))
        for s in range(1, seeds + 1):
            f = 1 + spread * (s - (seeds + 1) / 2)
            row: dict[str, Any] = {"variant": variant, "seed": s, **columns}
            if key is not None:
                row[key] = at
            for m, v in metrics.items():
                row[m] = v * f if isinstance(v, (int, float)) and not isinstance(v, bool) else v
            rows.append(row)
    return pd.DataFrame(rows)


def scaled(points: Mapping[Any, Mapping[str, Any]], changes: Mapping[Any, Mapping[str, float]]) -> dict:
    """A copy of ``points`` with some metrics multiplied: ``changes = {point: {metric: factor}}``."""
    out = {k: dict(v) for k, v in points.items()}
    for k, m in changes.items():
        for name, factor in m.items():
            out[k][name] = out[k][name] * factor
    return out
