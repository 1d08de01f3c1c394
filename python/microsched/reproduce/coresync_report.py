"""Figures and tables of ``microsched reproduce coresync`` (see :mod:`.coresync`)."""

from __future__ import annotations

import math

import pandas as pd

from .coresync_data import (ABOVE, BE, BELOW, CALADAN_POLL, CS, NAMES, P99, PAPER_TABLE1, PAPER_TABLE2, POLICIES,
                       R_VARIANTS, SESSIONS, THR, UTIL, Data, norm_throughput, v)
from .framework import Context
from .runner import mean_ci95

COLORS = {"coresync": "tab:red", "shenango": "tab:blue", "caladan": "tab:orange", "utilization_range": "tab:green",
          "delay_range": "tab:purple"}
MARKERS = {"coresync": "*", "shenango": "o", "caladan": "^", "utilization_range": "D", "delay_range": "P"}


def write_all(ctx: Context, d: Data) -> None:
    plt = _plt()
    if plt is None:
        return
    _latency_vs_util(ctx, d, ["exp10"], "fig3_exp10.png",
                     "Fig. 3: p99 latency vs CPU utilization below capacity, exponential 10 µs")
    _latency_vs_util(ctx, d, ["bim10"], "fig4_bimodal10.png",
                     "Fig. 4: p99 latency vs CPU utilization below capacity, bimodal 10 µs (5/55 µs, p = 0.9/0.1)")
    _latency_vs_util(ctx, d, ["exp1", "bim1"], "fig5_1us.png",
                     "Fig. 5: p99 latency vs CPU utilization below capacity, 1 µs (exponential, bimodal 0.5/5.5 µs)")
    _memcached(ctx, d)
    _caladan_poll(ctx, d)
    _r_sensitivity(ctx, d)
    _sessions(ctx, d)
    write_tables(ctx, d)


def _plt():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover
        return None
    return plt


def _wrap(text: str, panels: int) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width=max(60, min(150, 60 * panels))))


def _err(x: float) -> float:
    return 0.0 if x is None or not math.isfinite(x) else float(x)


def _point(ax, d: Data, variant: str, x: float, xmetric: str, color: str, marker: str, label: str | None,
           xscale: float = 100.0) -> None:
    xs = d.values(variant, x, xmetric)
    if xs.empty:
        return
    xm, xc, _ = mean_ci95(xs * xscale)
    ym, yc = d.stat(variant, x, P99)
    ax.errorbar([xm], [ym], xerr=[_err(xc)], yerr=[_err(yc)], color=color, marker=marker,
                ms=11 if marker == "*" else 6, capsize=2, lw=1, label=label)


def _latency_vs_util(ctx: Context, d: Data, exps: list[str], filename: str, title: str) -> None:
    plt = _plt()
    loads = d.loads_in(BELOW)
    if not loads or not any(d.has(v(e, CS)) for e in exps):
        return
    fig, axes = plt.subplots(len(exps), len(loads), figsize=(4.2 * len(loads), 3.8 * len(exps)), squeeze=False,
                             constrained_layout=True)
    for i, exp in enumerate(exps):
        for j, x in enumerate(loads):
            ax = axes[i][j]
            for p in POLICIES:
                if d.has(v(exp, p)):
                    _point(ax, d, v(exp, p), x, UTIL, COLORS[p], MARKERS[p], NAMES[p] if (i, j) == (0, 0) else None)
            ax.set_title(f"{exp}: load {x:g}", fontsize=10)
            ax.set_xlabel("CPU utilization (% of 16 cores)")
            ax.set_ylabel("p99 latency (µs)")
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(_wrap(f"{title}; mean of {len(d.seeds)} seed(s), bars 95 % CI; lower-left is better", len(loads)),
                 fontsize=10)
    ctx.save_figure(fig, filename)


def _memcached(ctx: Context, d: Data) -> None:
    plt = _plt()
    loads = d.loads_in(BELOW)
    if not loads or not d.has(v("mc", CS)):
        return
    fig, axes = plt.subplots(1, len(loads), figsize=(4.2 * len(loads), 3.8), squeeze=False, constrained_layout=True)
    for j, x in enumerate(loads):
        ax = axes[0][j]
        for p in POLICIES:
            if d.has(v("mc", p)):
                _point(ax, d, v("mc", p), x, BE, COLORS[p], MARKERS[p], NAMES[p] if j == 0 else None, xscale=1.0)
        ax.set_title(f"Memcached-like: load {x:g}", fontsize=10)
        ax.set_xlabel("best-effort throughput (core-equivalents)")
        ax.set_ylabel("p99 latency (µs)")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(_wrap("Fig. 6: Memcached-like latency vs best-effort co-tenant throughput below capacity (lower-right "
                       "is better); log-normal 0.8 µs, Breakwater 25/50 µs, CoreSync R = 20; mean of "
                       f"{len(d.seeds)} seed(s)", len(loads)), fontsize=10)
    ctx.save_figure(fig, "fig6_memcached.png")


def _caladan_poll(ctx: Context, d: Data) -> None:
    plt = _plt()
    loads = d.loads_in(BELOW)
    if not loads or not d.has(v("exp10", CS)):
        return
    fig, ax = plt.subplots(figsize=(6.5, 4.6), constrained_layout=True)
    series = [("CoreSync (R = 50)", v("exp10", CS), "tab:red", "*")]
    series += [(f"Caladan (poll {p} µs)", var, c, "^") for (p, var), c in
               zip(CALADAN_POLL.items(), ("tab:orange", "tab:brown", "black"))]
    for label, var, color, marker in series:
        if not d.has(var):
            continue
        xs = [100 * d.mean(var, x, UTIL) for x in loads]
        ys = [d.mean(var, x, P99) for x in loads]
        ax.plot(xs, ys, color=color, marker=marker, ms=10 if marker == "*" else 6, label=label)
        for x, xx, yy in zip(loads, xs, ys):
            ax.annotate(f"{x:g}", (xx, yy), textcoords="offset points", xytext=(4, 4), fontsize=7, color="gray")
    ax.set_xlabel("CPU utilization (% of 16 cores)")
    ax.set_ylabel("p99 latency (µs)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("Fig. 1: CoreSync vs Caladan poll periods, exp. 10 µs (labels: load)", fontsize=10)
    ctx.save_figure(fig, "fig1_caladan_poll.png")


def _r_sensitivity(ctx: Context, d: Data) -> None:
    plt = _plt()
    rs = {r: x for r, x in R_VARIANTS.items() if d.has(x)}
    if not rs:
        return
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4), constrained_layout=True)
    cmap = plt.get_cmap("viridis")
    for i, (r, var) in enumerate(sorted(rs.items())):
        loads = d.loads
        kw = dict(color=cmap(i / max(1, len(rs) - 1)), marker="o", label=f"R = {r}")
        axes[0].plot(loads, [d.mean(var, x, THR) / 1e6 for x in loads], **kw)
        axes[1].plot(loads, [d.mean(var, x, P99) for x in loads], **kw)
        axes[2].plot(loads, [100 * d.mean(var, x, UTIL) for x in loads], **kw)
    for ax, yl in zip(axes, ("throughput (M req/s)", "p99 latency (µs)", "CPU utilization (%)")):
        ax.set_xlabel("offered load (fraction of 1.6 M req/s)")
        ax.set_ylabel(yl)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Fig. 7: CoreSync's proportionality parameter R, exp. 10 µs, 100 sessions; mean of {len(d.seeds)} seed(s)",
                 fontsize=10)
    ctx.save_figure(fig, "fig7_r_sensitivity.png")


def _sessions(ctx: Context, d: Data) -> None:
    plt = _plt()
    exps = [e for e in SESSIONS if d.has(v(e, CS))]
    loads = d.loads_in(BELOW)
    if not exps or not loads:
        return
    fig, axes = plt.subplots(1, len(exps), figsize=(5 * len(exps), 4.2), squeeze=False, constrained_layout=True)
    for j, e in enumerate(exps):
        ax = axes[0][j]
        for p in ("coresync", "shenango", "utilization_range"):
            var = v(e, p)
            if not d.has(var):
                continue
            xs = [100 * d.mean(var, x, UTIL) for x in loads]
            ys = [d.mean(var, x, P99) for x in loads]
            ax.plot(xs, ys, color=COLORS[p], marker=MARKERS[p], ms=10 if p == CS else 6, label=NAMES[p])
            for x, xx, yy in zip(loads, xs, ys):
                ax.annotate(f"{x:g}", (xx, yy), textcoords="offset points", xytext=(4, 4), fontsize=7, color="gray")
        r = SESSIONS[e] // 2
        ax.set_title(f"{SESSIONS[e]} sessions (CoreSync R = {r})", fontsize=10)
        ax.set_xlabel("CPU utilization (% of 16 cores)")
        ax.set_ylabel("p99 latency (µs)")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(_wrap("Fig. 8: latency vs utilization across session counts, exp. 10 µs, loads 0.2/0.5/0.8 "
                       f"(labels); mean of {len(d.seeds)} seed(s)", len(exps)), fontsize=10)
    ctx.save_figure(fig, "fig8_sessions.png")


# ---------------------------------------------------------------------------------------------
# Table I and Table II


def table_frame(d: Data, exps: list[str]) -> pd.DataFrame:
    """Normalized throughput (mean over seeds of the per-seed ratio to CoreSync) and its ci95,
    one row per policy, one column pair per (experiment, load)."""
    rows = []
    loads = d.loads_in(ABOVE)
    for p in POLICIES:
        row = {"policy": NAMES[p]}
        for e in exps:
            for x in loads:
                if d.has(v(e, p), v(e, CS)):
                    m, ci = norm_throughput(d, e, p, x)
                else:
                    m, ci = math.nan, math.nan
                row[f"{e}@{int(round(100 * x))}%"] = round(m, 4) if math.isfinite(m) else m
                row[f"{e}@{int(round(100 * x))}%.ci95"] = round(ci, 4) if math.isfinite(ci) else ci
        rows.append(row)
    return pd.DataFrame(rows)


def _md_table(d: Data, exps: list[str], paper: dict[str, dict[str, tuple]], title: str) -> str:
    loads = d.loads_in(ABOVE)
    head = "| Policy | " + " | ".join(f"{e} {int(round(100 * x))} % load" for e in exps for x in loads) + " |"
    sep = "|---|" + "---:|" * (len(exps) * len(loads))
    lines = [f"### {title}", "", "Measured (mean ± 95 % CI over seeds of the per-seed ratio to CoreSync):", "", head, sep]
    for p in POLICIES:
        cells = []
        for e in exps:
            for x in loads:
                if d.has(v(e, p), v(e, CS)):
                    m, ci = norm_throughput(d, e, p, x)
                    cells.append(f"{m:.3f}" + (f" ± {ci:.3f}" if math.isfinite(ci) and p != CS else ""))
                else:
                    cells.append("–")
        lines.append(f"| {NAMES[p]} | " + " | ".join(cells) + " |")
    paper_loads = (1.0, 1.3, 1.5)
    lines += ["", "Paper:", "", "| Policy | " + " | ".join(f"{e} {int(100 * x)} % load" for e in exps for x in paper_loads) + " |",
              "|---|" + "---:|" * (len(exps) * 3)]
    for p in POLICIES:
        lines.append(f"| {NAMES[p]} | " + " | ".join(f"{paper[e][p][i]:.3f}" for e in exps for i in range(3)) + " |")
    absolute = []
    for e in exps:
        if d.has(v(e, CS)):
            absolute.append(f"{e}: " + ", ".join(f"{int(round(100 * x))} %: {d.mean(v(e, CS), x, THR) / 1e6:.3f} M req/s"
                                                 for x in loads))
    lines += ["", "CoreSync's throughput (the normalization): " + "; ".join(absolute) + ".", ""]
    return "\n".join(lines)


def write_tables(ctx: Context, d: Data) -> None:
    if not d.loads_in(ABOVE):
        return
    for exps, name, paper, title in (
        (["exp10", "bim10"], "table1", PAPER_TABLE1,
         "Table I: normalized throughput near and beyond capacity, 10 µs requests (exponential, bimodal)"),
        (["mc"], "table2", {"mc": PAPER_TABLE2}, "Table II: normalized throughput near and beyond capacity, Memcached-like"),
    ):
        if not any(d.has(v(e, CS)) for e in exps):
            continue
        table_frame(d, exps).to_csv(ctx.out / f"{name}.csv", index=False)
        (ctx.out / f"{name}.md").write_text(_md_table(d, exps, paper, title), encoding="utf-8")
