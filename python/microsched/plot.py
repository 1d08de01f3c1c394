"""Plots of a run. Matplotlib with the non-interactive Agg backend (no display needed)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

if TYPE_CHECKING:  # pragma: no cover
    from .api import RunResult


def latency_cdf_points(result: "RunResult") -> tuple[np.ndarray, np.ndarray, str]:
    """(latency µs, cumulative fraction, source) of the end-to-end latency distribution.

    The HDR histogram's CDF that the simulator returns is preferred; without it, the
    per-request records (if kept) give an empirical CDF."""
    cdf = result.latency_cdf
    if cdf is not None and len(cdf) > 0:
        return cdf["latency_us"].to_numpy(float), cdf["fraction"].to_numpy(float), "HDR histogram"
    req = result.requests
    if req is not None and len(req) > 0 and {"response_ns", "created_ns"} <= set(req.columns):
        ok = req[~req["dropped"].astype(bool)] if "dropped" in req.columns else req
        lat = np.sort((ok["response_ns"].to_numpy(float) - ok["created_ns"].to_numpy(float)) / 1e3)
        if len(lat):
            return lat, np.arange(1, len(lat) + 1) / len(lat), "per-request records"
    return np.array([]), np.array([]), "none"


def _title(result: "RunResult") -> str:
    s = result.summary
    name = s.get("scenario") or result.scenario.get("name") or "scenario"
    parts = [str(name)]
    if "allocator" in s:
        parts.append(f"allocator={s['allocator']}")
    if "overload" in s:
        parts.append(f"overload={s['overload']}")
    if "seed" in s:
        parts.append(f"seed={s['seed']}")
    return ", ".join(parts)


def plot_latency_cdf(result: "RunResult", path: str | os.PathLike) -> Path:
    """Writes a PNG with the end-to-end latency CDF (left, linear) and its tail, the
    complementary CDF on log-log axes (right), p50/p99/p99.9 marked. Returns the path."""
    x, f, source = latency_cdf_points(result)
    lat = result.summary.get("latency_us", {}) or {}
    marks = [(k, lat.get(k)) for k in ("p50", "p99", "p999")]
    labels = {"p50": "p50", "p99": "p99", "p999": "p99.9"}
    colors = {"p50": "tab:green", "p99": "tab:orange", "p999": "tab:red"}

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    fig.suptitle(f"End-to-end latency: {_title(result)}", fontsize=11)
    if len(x) == 0:
        for ax in (ax1, ax2):
            ax.text(0.5, 0.5, "no completed requests in the measured window", ha="center", va="center",
                    transform=ax.transAxes)
    else:
        ax1.step(x, f, where="post", color="tab:blue", lw=1.5)
        ax1.set_ylim(0, 1.02)
        hi = lat.get("p999") or x[-1]
        ax1.set_xlim(0, max(float(hi) * 1.25, float(x[0]) * 1.1, 1e-3))
        ccdf = np.clip(1.0 - f, 0, 1)
        keep = (ccdf > 0) & (x > 0)
        if keep.any():
            ax2.step(x[keep], ccdf[keep], where="post", color="tab:blue", lw=1.5)
            ax2.set_xscale("log")
            ax2.set_yscale("log")
        for k, v in marks:
            if v is None or not np.isfinite(v) or v <= 0:
                continue
            for ax in (ax1, ax2):
                ax.axvline(v, color=colors[k], ls="--", lw=1, label=f"{labels[k]} = {v:,.1f} µs")
        ax1.legend(loc="lower right", fontsize=9)
    ax1.set_xlabel("latency (µs)")
    ax1.set_ylabel("fraction of requests ≤ latency")
    ax1.set_title(f"CDF ({source})", fontsize=10)
    ax1.grid(alpha=0.3)
    ax2.set_xlabel("latency (µs, log scale)")
    ax2.set_ylabel("fraction of requests > latency (log scale)")
    ax2.set_title("tail: complementary CDF", fontsize=10)
    ax2.grid(alpha=0.3, which="both")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
