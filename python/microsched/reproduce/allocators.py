"""``microsched reproduce allocators``: the core allocators of CoreSync's baselines (issue 3).

Static, Shenango, Caladan (poll 2, 5 and 10 µs), Utilization Range (75–95 %) and Delay Range
(0.5–1 µs and 1–4 µs) on 16 cores, exponential 10 µs requests, per-core queues with work
stealing, 100 sessions, RTT 10 µs, no overload control, loads 0.1–0.9
(``experiments/allocators/sweep.toml``).

Figures: p99 latency against CPU utilization, one curve per policy (CoreSync Fig. 3's baselines
and Fig. 1's Caladan poll periods), and allocated LC / best-effort cores against load.

Claims are checked at CoreSync's low, medium and high loads (0.2, 0.5, 0.8) on means over
seeds; every seed runs the same requests under every policy (common random numbers), so the
per-seed differences between two policies are paired and their 95 % intervals are reported
(``ci95``, with two or more seeds). CoreSync states no number for these baselines on their own
(its 1.7×, 1.4×, ... compare them with CoreSync), so ``paper`` is null throughout.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .claims import Claim, rounded as _r
from .framework import Context, register
from .search_cause import SWITCH, point_figures, wakes_per_ms
from .stats import Seeds, by_point, extreme

LOAD = "load.fraction"
LOADS_CHECKED = (0.2, 0.5, 0.8)
STATIC = "static"
REACTIVE = ("shenango", "caladan")  # the reactive baselines with CoreSync's parameters (poll 2 µs)
PROACTIVE = ("utilization_range", "delay_range", "delay_range-1-4")
CALADAN_POLL = (("caladan", 2), ("caladan-5", 5), ("caladan-10", 10))
FIG3 = ("static", "shenango", "caladan", "utilization_range", "delay_range", "delay_range-1-4")
FIG1 = ("caladan", "caladan-5", "caladan-10")

COLORS = {
    "static": "black", "shenango": "tab:blue", "caladan": "tab:orange", "caladan-5": "tab:red",
    "caladan-10": "tab:brown", "utilization_range": "tab:green", "delay_range": "tab:purple",
    "delay_range-1-4": "tab:pink",
}
MARKERS = {
    "static": "s", "shenango": "o", "caladan": "^", "caladan-5": "v", "caladan-10": "<",
    "utilization_range": "D", "delay_range": "P", "delay_range-1-4": "X",
}

P99 = "latency_us.p99"
CORES = "cores.allocated_mean"
UTIL = "cpu_utilization"
BE = "be_cores_mean"
EPS_CORES = 1e-6  # "= machine" to float precision (the summary's means are f64 sums)


@register("allocators", paper="CoreSync (Pardeshi et al.)", figure="Fig. 1 and Fig. 3 (baselines)",
          description="p99 latency vs CPU utilization of Static, Shenango, Caladan (poll 2/5/10 µs), "
                      "Utilization Range and Delay Range; 16 cores, exp. 10 µs, loads 0.1–0.9, no overload control",
          spec="allocators/sweep.toml")
def analyze(ctx: Context) -> list[Claim]:
    df = ctx.results
    _require(df, ctx)
    plot_latency_vs_utilization(ctx)
    plot_cores_vs_load(ctx)
    seeds = Seeds(df, key=LOAD)
    claims: list[Claim] = []
    claims += claims_dynamic_fewer_cores(seeds)
    claims += claims_proactive_vs_reactive(seeds)
    add_proactive_causes(seeds, claims)
    claims += claims_caladan_poll(seeds)
    claims += claims_caladan_vs_shenango(seeds)
    claims += claims_core_accounting(df, ctx)
    return claims


def _require(df: pd.DataFrame, ctx: Context) -> None:
    variants = set(df["variant"])
    need = set(FIG3) | set(FIG1)
    if not need <= variants:
        raise ValueError(f"{ctx.spec.path}: variants: the allocators reproduction needs {', '.join(sorted(need))}; "
                         f"missing {', '.join(sorted(need - variants))}")
    loads = set(np.round(df[LOAD].astype(float), 9))
    if not set(LOADS_CHECKED) <= loads:
        raise ValueError(f"{ctx.spec.path}: grid.{LOAD}: must include {', '.join(map(str, LOADS_CHECKED))}")


def _loads_note(s: Seeds) -> str:
    return f"loads {', '.join(map(str, LOADS_CHECKED))}; mean over {len(s.seeds)} seed(s)"


# ---------------------------------------------------------------------------------------------
# claims


def claims_dynamic_fewer_cores(s: Seeds) -> list[Claim]:
    dynamic = sorted(v for v in set(s.df["variant"]) if v != STATIC)
    out = []
    for load in LOADS_CHECKED:
        static = s.mean(STATIC, load, CORES)
        by = {v: s.mean(v, load, CORES) for v in dynamic}
        worst = max(by, key=by.get)
        _, ci = s.stat(worst, load, CORES)
        out.append(Claim(
            id=f"dynamic-fewer-cores@{load}",
            claim=f"At load {load}, every dynamic allocator allocates fewer LC cores than static ({static:g})",
            paper=None, measured=_r(by[worst]), holds=bool(by[worst] < static),
            extra={"measure": "the most LC cores any dynamic policy allocates (mean)", "unit": "cores", "ci95": _r(ci), "static": _r(static), "worst": worst,
                   "by_variant": {v: _r(x) for v, x in by.items()}},
        ))
    return out


def claims_proactive_vs_reactive(s: Seeds) -> list[Claim]:
    out = []
    for p in PROACTIVE:
        # cores: margin over the more generous of the two reactive policies, per seed
        margins = {load: s.paired(load, CORES, lambda a, b, c: a - max(b, c), p, *REACTIVE) for load in LOADS_CHECKED}
        worst, m, ci = extreme(margins, largest=False)
        out.append(Claim(
            id=f"proactive-more-cores/{p}",
            claim=f"{p} (proactive) allocates more LC cores than Shenango and Caladan (reactive, poll 2 µs) "
                  f"at loads 0.2, 0.5, 0.8 (CoreSync §II-B)",
            paper=None, measured=_r(m), holds=bool(all(v[0] > 0 for v in margins.values())),
            extra={"measure": f"the smallest margin cores({p}) − max(cores(shenango), cores(caladan))",
                   "unit": "cores", "ci95": _r(ci), "at_load": worst, "note": _loads_note(s),
                   "by_load": by_point(margins)},
        ))
    for p in PROACTIVE:
        ratios = {load: s.paired(load, P99, lambda a, b: a / b, p, "shenango") for load in LOADS_CHECKED}
        worst, m, ci = extreme(ratios, largest=True)
        out.append(Claim(
            id=f"proactive-lower-p99/{p}",
            claim=f"{p} (proactive) gives a lower p99 latency than Shenango at loads 0.2, 0.5, 0.8 "
                  f"(CoreSync §II-B, Fig. 3)",
            paper=None, measured=_r(m), holds=bool(all(v[0] < 1 for v in ratios.values())),
            extra={"measure": f"the largest ratio p99({p}) / p99(shenango)", "unit": "×", "ci95": _r(ci), "at_load": worst, "note": _loads_note(s),
                   "by_load": by_point(ratios)},
        ))
    return out


def add_proactive_causes(s: Seeds, claims: list[Claim]) -> None:
    """A measured `cause` on each proactive claim that fails: the numbers at the load that decides
    it. Three of these claims changed verdict with the probe-cost search (README "Work search")."""
    for c in claims:
        if c.holds or not c.id.startswith("proactive-") or "cause" in c.extra:
            continue
        p = c.id.split("/", 1)[1]
        load = c.extra.get("at_load")
        if load is None:
            continue
        load = float(load)
        rows = "; ".join(point_figures(s, v, load) for v in (p, *REACTIVE))
        wakes = ", ".join(f"{v} {wakes_per_ms(s, v, load, 5):.1f}" for v in (p, *REACTIVE))
        c.extra["cause"] = (f"at load {load:g}: {rows}; core wake-ups per ms: {wakes}. The proactive policy's "
                            f"margin is a fraction of a core (or a p99 histogram bucket) here, and the work "
                            f"search decides it: with the probe search queued work waits for an idle core's "
                            f"probe instead of being stolen at once, so the reactive allocators, which grant on "
                            f"queued work, grant more often and keep more cores; {SWITCH}")


def claims_caladan_poll(s: Seeds) -> list[Claim]:
    pairs = list(zip(CALADAN_POLL, CALADAN_POLL[1:]))
    util: dict[str, float] = {}
    lat: dict[str, float] = {}
    util_ci: dict[str, float] = {}
    lat_ci: dict[str, float] = {}
    for load in LOADS_CHECKED:
        for (a, pa), (b, pb) in pairs:
            key = f"{load}:{pa}->{pb}us"
            util[key], util_ci[key] = s.paired(load, UTIL, lambda x, y: 100 * (y - x), a, b)
            lat[key], lat_ci[key] = s.paired(load, P99, lambda x, y: y / x, a, b)
    wu = min(util, key=util.get)
    wl = max(lat, key=lat.get)
    return [
        Claim(
            id="caladan-longer-poll-more-utilization",
            claim="A longer Caladan poll period (2 → 5 → 10 µs) gives a higher CPU utilization at loads "
                  "0.2, 0.5, 0.8 (CoreSync Fig. 1)",
            paper=None, measured=_r(util[wu]), holds=bool(all(v > 0 for v in util.values())),
            extra={"measure": "the smallest increase of utilization from one poll period to the next, in "
                              "percentage points of the 16 cores", "unit": "pp", "ci95": _r(util_ci[wu]), "at": wu, "note": _loads_note(s),
                   "by_step": {k: _r(v) for k, v in util.items()}},
        ),
        Claim(
            id="caladan-longer-poll-lower-p99",
            claim="A longer Caladan poll period (2 → 5 → 10 µs) gives a lower p99 latency at loads 0.2, 0.5, 0.8 "
                  "(CoreSync Fig. 1)",
            paper=None, measured=_r(lat[wl]), holds=bool(all(v < 1 for v in lat.values())),
            extra={"measure": "the largest ratio p99(longer poll) / p99(shorter poll)", "unit": "×", "ci95": _r(lat_ci[wl]), "at": wl, "note": _loads_note(s),
                   "by_step": {k: _r(v) for k, v in lat.items()}},
        ),
    ]


def claims_caladan_vs_shenango(s: Seeds) -> list[Claim]:
    ratios = {load: s.paired(load, P99, lambda a, b: a / b, "caladan", "shenango") for load in LOADS_CHECKED}
    worst, m, ci = extreme(ratios, largest=True)
    return [Claim(
        id="caladan-lower-p99-than-shenango",
        claim="Caladan (poll 2 µs, delay threshold 5 µs) gives a lower p99 latency than Shenango at loads "
              "0.2, 0.5, 0.8 (implied by CoreSync §IV-B, Fig. 3)",
        paper=None, measured=_r(m), holds=bool(all(v[0] < 1 for v in ratios.values())),
        extra={"measure": "the largest ratio p99(caladan) / p99(shenango)", "unit": "×", "ci95": _r(ci),
               "at_load": worst, "by_load": by_point(ratios),
               "note": "not stated as such: CoreSync reports Shenango's p99 1.7× and Caladan's 1.16× its own "
                       "(with Breakwater), i.e. about 0.68× for Caladan / Shenango; this reproduction runs "
                       "without overload control"},
    )]


def claims_core_accounting(df: pd.DataFrame, ctx: Context) -> list[Claim]:
    gap = df["cores.max"].astype(float) - df[CORES].astype(float) - df[BE].astype(float)
    i = int(gap.abs().idxmax())
    worst = df.loc[i]
    by_variant = {v: _r(float(g.abs().max())) for v, g in gap.groupby(df["variant"])}
    # whole-run core time in transition (core_time covers warm-up + window), for comparison
    run_ns = df["core_time.total_ns"].astype(float) / df["cores.max"].astype(float)
    trans = df["core_time.transition_ns"].astype(float) / run_ns
    claims = [Claim(
        id="be-plus-lc-equals-machine",
        claim="Best-effort cores + LC allocated cores = max cores (16) in every run, to float precision",
        paper=None, measured=_r(float(gap.abs().max()), 6), holds=bool(gap.abs().max() < EPS_CORES),
        extra={"measure": "the largest gap max − LC − BE (mean cores over the window) over all runs",
               "unit": "cores", "worst": f"{worst['variant']} at load {worst[LOAD]}, seed {worst['seed']}",
               "by_variant": by_variant,
               "transition_cores_max": _r(float(trans.max()), 6),
               "note": "a core in its allocation delay (server.allocation_delay_us = 5 µs) counts as "
                       "LC-allocated (cores.transition_mean); transition_cores_max is that share"},
    )]
    # Conservation over the whole run: busy + search + parked + transition = cores × time, exactly.
    from ..api import validate

    sc = validate(str(ctx.spec.base), overrides=ctx.spec.overrides)
    expect_ns = df["cores.max"].astype(float) * round((float(sc["duration_ms"]) + float(sc["warmup_ms"])) * 1e6)
    parts = sum(df[f"core_time.{k}_ns"].astype(float) for k in ("busy", "search", "parked", "transition"))
    err = float((parts - expect_ns).abs().max())
    claims.append(Claim(
        id="core-time-conservation",
        claim="Core time busy + searching + parked (BE) + in transition = cores × simulated time, exactly, "
              "in every run (DESIGN.md conservation)",
        paper=None, measured=err, holds=bool(err == 0.0),
        extra={"measure": "the largest error over all runs", "unit": "ns"},
    ))
    return claims


# ---------------------------------------------------------------------------------------------
# figures


def _setup_plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _curve(agg: pd.DataFrame, variant: str) -> pd.DataFrame:
    return agg[agg["variant"] == variant].sort_values(LOAD)


def _err(series: pd.Series) -> np.ndarray | None:
    e = series.to_numpy(float)
    return None if np.all(~np.isfinite(e)) else np.nan_to_num(e)


def plot_latency_vs_utilization(ctx: Context) -> None:
    plt = _setup_plt()
    agg = ctx.aggregate
    seeds = len(ctx.spec.seeds)
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.2), constrained_layout=True, sharey=True)
    panels = [
        (axes[0], FIG3, "baselines of CoreSync Fig. 3 (poll 2 µs, thresholds 5 µs)"),
        (axes[1], FIG1, "Caladan poll period, as CoreSync Fig. 1"),
    ]
    for ax, variants, title in panels:
        for v in variants:
            c = _curve(agg, v)
            if c.empty:
                continue
            ax.errorbar(100 * c[UTIL], c[P99], xerr=_err(100 * c[f"{UTIL}.ci95"]), yerr=_err(c[f"{P99}.ci95"]),
                        color=COLORS.get(v), marker=MARKERS.get(v, "o"), ms=5, lw=1.5, capsize=2,
                        label=ctx.spec.label(v))
        ref = _curve(agg, "shenango" if "shenango" in variants else variants[0])
        for _, r in ref.iterrows():
            ax.annotate(f"{r[LOAD]:g}", (100 * r[UTIL], r[P99]), textcoords="offset points", xytext=(4, -10),
                        fontsize=7, color="gray")
        ax.set_xlabel("CPU utilization: LC allocated cores / 16 (%)")
        ax.set_title(title, fontsize=10)
        ax.set_xlim(0, 105)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    axes[0].set_ylabel("p99 end-to-end latency (µs)")
    fig.suptitle(f"p99 latency vs CPU utilization, loads {_load_range(agg)} (gray: load of the Shenango/Caladan 2 µs "
                 f"points); 16 cores, exp. 10 µs, RTT 10 µs, no overload control; mean of {seeds} seed(s), "
                 f"bars: 95 % CI", fontsize=9)
    ctx.save_figure(fig, "latency_vs_utilization.png")


def plot_cores_vs_load(ctx: Context) -> None:
    plt = _setup_plt()
    agg = ctx.aggregate
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(17, 5), constrained_layout=True)
    order = list(dict.fromkeys([*FIG3, *FIG1]))
    for v in order:
        c = _curve(agg, v)
        if c.empty:
            continue
        kw = dict(color=COLORS.get(v), marker=MARKERS.get(v, "o"), ms=4, lw=1.3, capsize=2, label=ctx.spec.label(v))
        ax1.errorbar(c[LOAD], c[CORES], yerr=_err(c[f"{CORES}.ci95"]), **kw)
        ax2.errorbar(c[LOAD], c[BE], yerr=_err(c[f"{BE}.ci95"]), **kw)
        if v != STATIC:
            ax3.plot(c[LOAD], c[CORES] - c["cores.busy_mean"], **{k: x for k, x in kw.items() if k != "capsize"})
    busy = _curve(agg, STATIC)
    if not busy.empty:
        ax1.plot(busy[LOAD], busy["cores.busy_mean"], color="gray", ls="--", lw=1, label="busy cores (work)")
    ax1.set_ylabel("LC cores allocated (mean)")
    ax2.set_ylabel("best-effort cores (mean)")
    ax3.set_ylabel("LC cores allocated but not busy (mean)")
    for ax in (ax1, ax2, ax3):
        ax.set_xlabel("offered load (fraction of 16 cores × 100 k req/s)")
        ax.grid(alpha=0.3)
    ax1.legend(fontsize=8, loc="lower right")
    ax1.set_title("cores allocated to the latency-critical application", fontsize=10)
    ax2.set_title("cores given to the best-effort co-tenant", fontsize=10)
    ax3.set_title("allocated − busy: spinning / searching for work (dynamic policies)", fontsize=10)
    ctx.save_figure(fig, "cores_vs_load.png")


def _load_range(agg: pd.DataFrame) -> str:
    loads = sorted(set(agg[LOAD].astype(float)))
    return f"{loads[0]:g}–{loads[-1]:g}" if len(loads) > 1 else f"{loads[0]:g}"
