"""``microsched reproduce harvest``: HarvestContainers (Hall et al., NSDI'26), issue 16.

A Primary provisioned with 8 cores (Memcached-, MySQL- or Xapian-like, Table 2's low/mid/high
RPS, bursty arrivals) lends its idle cores to CPUBully (always runnable: its progress is the core
time it gets, ``be_cores_mean``). Every variant is APP/LEVEL/CONTROLLER
(``experiments/harvest/sweep.toml``, written by ``gen.py``); every seed runs the same requests
under every controller (common random numbers), so comparisons are paired per seed and reported
with 95 % intervals over seeds (``ci95``).

Figures: Fig. 5 (cores harvested and p99 vs standalone per Primary and load, ACBF; one Primary
at a time, and the three together, each on its own 8 cores: APP "three"), Fig. 6 (dynamic vs
static buffers), Fig. 7 (cpuset vs two-phase affinity, Memcached 80 k RPS), Fig. 8 and Table 1
(NIC IRQ interference, spread over the node's cores or steered onto the Secondary's; see
``microsched_core::sched::irq`` for the model), Fig. 10 (cgroups), Fig. 11–12 (SmartHarvest-like).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .claims import Claim, rounded as _r
from .framework import Context, register
from .stats import Seeds, safe_ratio

APPS = ("memcached", "mysql", "xapian")
LEVELS = ("low", "mid", "high")
P99 = "latency_us.p99"
BE = "be_cores_mean"
BUSY = "cores.busy_mean"
CORES = 8
TOLERANCE = 0.04  # "within 4 % of standalone"
STATIC = ("static-2", "static-4", "static-6")
IRQ = ("standalone-irq", "acbf-irq", "acbf-irq-steer")
THREE = ("standalone", "acbf", "acbf-artifact")
TABLE1 = {"memcached": 0.33, "mysql": 0.22, "xapian": 0.21}  # Table 1, at the mid loads
CFS = ("cfs-6", "cfs-4")


_CAUSE_HARVEST = {
    "acbf": "the paper's Current Harvest Window is bounded by the ACBF seen with nothing lent; here a Primary "
            "alone rarely fills all 8 cores (ACBF 0 to 0.01), so lending that creates any all-busy time moves "
            "ACBF above the window and the buffer grows back (mean buffer in buffer_mean)",
    "acbf-artifact": "the artifact's absolute ACBF thresholds (0.001 / 0.002 / 0.33) are calibrated to its "
                     "kernel-level activity monitor; here they are exceeded at higher loads and the buffer stays "
                     "near its maximum",
}


_CAUSE_MONOTONE = {
    "acbf": "the paper's Current Harvest Window is the range of ACBF seen with nothing lent: at mid load the "
            "Primary alone almost never fills all 8 cores (window ≈ [0, 0]), so any all-busy time grows the buffer "
            "back, while at high load it sometimes does and the wider window lets the buffer shrink further "
            "(compare buffer_mean of harvest-up-to-75pct/acbf)",
}


def _v(app: str, level: str, ctl: str) -> str:
    return f"{app}/{level}/{ctl}"


@register("harvest", paper="HarvestContainers (Hall et al., NSDI'26)", figure="Fig. 5, 6, 7, 8, 10, 11-12",
          description="cores harvested from an 8-core Primary (Memcached/MySQL/Xapian-like, low/mid/high load) "
                      "for CPUBully and the Primary's p99 vs standalone: ACBF (paper, artifact), static buffers, "
                      "cgroups quota, SmartHarvest-like, cpuset vs two-phase affinity, NIC IRQs with and without "
                      "steering, three Primaries together",
          spec="harvest/sweep.toml")
def analyze(ctx: Context) -> list[Claim]:
    df = ctx.results
    need = {_v(a, l, c) for a in APPS for l in LEVELS for c in ("standalone", "acbf", *STATIC, *CFS, "smartharvest", *IRQ)}
    need |= {_v("three", l, c) for l in LEVELS for c in THREE}
    missing = need - set(df["variant"])
    if missing:
        raise ValueError(f"{ctx.spec.path}: variants: missing {', '.join(sorted(missing)[:5])} ...")
    s = Seeds(df)
    _plots(ctx, s)
    _plots_fig8_three(ctx, s)
    claims: list[Claim] = []
    claims += _claims_fig5(s)
    claims += _claims_fig6(s)
    claims += _claims_fig7_11_12(s)
    claims += _claims_fig8(s)
    claims += _claims_three(s)
    claims += _claims_fig10(s)
    claims += _claims_accounting(df)
    for c in claims:
        if not c.holds and "cause" not in c.extra:
            c.extra["cause"] = "not analysed further: see the per-point values of this claim"
    return claims


def _p99_ratio(s: Seeds, app: str, level: str, ctl: str) -> tuple[float, float]:
    return s.paired(None, P99, safe_ratio, _v(app, level, ctl), _v(app, level, "standalone"))


def _harvest(s: Seeds, app: str, level: str, ctl: str) -> tuple[float, float]:
    return s.stat(_v(app, level, ctl), None, BE)


def _unused(s: Seeds, app: str, level: str) -> float:
    return CORES - s.mean(_v(app, level, "standalone"), None, BUSY)


# ---------------------------------------------------------------------------------------------
# claims


def _claims_fig5(s: Seeds) -> list[Claim]:
    out = []
    for ctl in ("acbf", "acbf-artifact"):
        ratios = {f"{a}/{l}": _p99_ratio(s, a, l, ctl) for a in APPS for l in LEVELS}
        worst = max(ratios, key=lambda k: ratios[k][0])
        out.append(Claim(
            id=f"p99-within-4pct/{ctl}",
            claim=f"With {ctl} harvesting, every Primary's p99 stays within 4 % of standalone at low, mid and "
                  f"high load (§5.3, Fig. 5)",
            paper=1.04, measured=_r(ratios[worst][0]), holds=bool(all(m <= 1 + TOLERANCE for m, _ in ratios.values())),
            extra={"measure": "largest p99(harvest) / p99(standalone), paired per seed", "unit": "×",
                   "ci95": _r(ratios[worst][1]), "at": worst, "by_point": {k: _r(m) for k, (m, _) in ratios.items()}},
        ))
        frac = {f"{a}/{l}": _harvest(s, a, l, ctl)[0] / _unused(s, a, l) for a in APPS for l in LEVELS}
        best = max(frac, key=frac.get)
        out.append(Claim(
            id=f"harvest-up-to-75pct/{ctl}",
            claim=f"{ctl} harvests up to 75 % of the Primary's unused cores (abstract; the buffer floor of 2 of 8 "
                  f"cores caps it at 75 %); holds if the best point reaches 60 %",
            paper=0.75, measured=_r(frac[best]), holds=bool(frac[best] >= 0.6),
            extra={"measure": "max over Primary × load of cores harvested / (8 − standalone busy cores)",
                   "at": best, "by_point": {k: _r(v) for k, v in frac.items()},
                   "buffer_mean": {f"{a}/{l}": _r(s.mean(_v(a, l, ctl), None, "harvest.buffer_mean"))
                                   for a in APPS for l in LEVELS},
                   **({} if frac[best] >= 0.6 else {"cause": _CAUSE_HARVEST[ctl]})},
        ))
        for a in APPS:
            h = [_harvest(s, a, l, ctl)[0] for l in LEVELS]
            out.append(Claim(
                id=f"harvest-grows-as-load-falls/{ctl}/{a}",
                claim=f"{a}: as the load falls (high → mid → low) the buffer shrinks and {ctl} harvests more "
                      f"cores (Fig. 5)",
                paper=None, measured=_r(h[0] - h[2]), holds=bool(h[0] > h[1] > h[2]),
                extra={"measure": "cores harvested at low minus at high", "unit": "cores",
                       "by_level": dict(zip(LEVELS, map(_r, h))),
                       **({} if h[0] > h[1] > h[2] else {"cause": _CAUSE_MONOTONE.get(ctl, "not monotone between two "
                           "adjacent loads: the buffer moves by one core per window on a noisy per-window ACBF")})},
            ))
    return out


def _claims_fig6(s: Seeds) -> list[Claim]:
    out = []
    for a in APPS:
        # "A fixed size that matches its needs under peak demand": the smallest static buffer
        # whose p99 at high load is within 4 % of standalone (mean over seeds).
        ok = [c for c in STATIC if _p99_ratio(s, a, "high", c)[0] <= 1 + TOLERANCE]
        peak = min(ok, key=lambda c: int(c.split("-")[1])) if ok else None
        if peak is None:
            out.append(Claim(
                id=f"dynamic-vs-static/{a}", claim=f"{a}: the dynamic buffer harvests more than a static buffer sized "
                f"for peak demand (up to 260 % more, Fig. 6)", paper=2.6, measured=None, holds=False,
                extra={"cause": "no static buffer of 2, 4 or 6 cores keeps p99 within 4 % at high load"}))
            continue
        gain = {l: s.paired(None, BE, lambda d, st: d / st - 1 if st > 0 else math.nan,
                            _v(a, l, "acbf"), _v(a, l, peak)) for l in LEVELS}
        best = max(gain, key=lambda k: gain[k][0] if not math.isnan(gain[k][0]) else -1e9)
        out.append(Claim(
            id=f"dynamic-vs-static/{a}",
            claim=f"{a}: the dynamic (ACBF) buffer harvests more than a static buffer sized for peak demand, "
                  f"up to 260 % more (§5.4, Fig. 6)",
            paper=2.6, measured=_r(gain[best][0]), holds=bool(gain[best][0] > 0),
            extra={"measure": f"max over loads of harvest(acbf) / harvest({peak}) − 1", "ci95": _r(gain[best][1]),
                   "at": best, "static_peak": peak, "by_level": {k: _r(m) for k, (m, _) in gain.items()},
                   "static_p99_ratio_high": {c: _r(_p99_ratio(s, a, "high", c)[0]) for c in STATIC},
       **({} if gain[best][0] > 0 else {"cause": f"in this model a static buffer of {peak.split('-')[1]} "
                "already keeps p99 within 4 % at high load (a 30 µs eviction is short next to the service "
                "time, and bursts rarely use up the idle cores held back), so the buffer 'sized for peak demand' is "
                "that small and a dynamic buffer, which never goes below 2 and mostly stays larger, cannot harvest more"})},
        ))
    return out


def _claims_fig7_11_12(s: Seeds) -> list[Claim]:
    out = []
    v = lambda c: _v("memcached", "80k", c)  # noqa: E731
    if v("acbf-cpuset") not in set(s.df["variant"]):
        return out
    fast, fast_ci = s.stat(v("acbf"), None, BE)
    slow, slow_ci = s.stat(v("acbf-cpuset"), None, BE)
    r_fast = s.paired(None, P99, safe_ratio, v("acbf"), v("standalone"))[0]
    r_slow = s.paired(None, P99, safe_ratio, v("acbf-cpuset"), v("standalone"))[0]
    out.append(Claim(
        id="cpuset-vs-two-phase@memcached-80k",
        claim="At 80 k RPS Memcached, cpuset harvests ~0.1 cores vs ~2.4 with two-phase affinity, both keeping "
              "p99 (§5.4, Fig. 7); holds if cpuset harvests under half of 2PA and both p99 within 4 %",
        paper=0.1, measured=_r(slow),
        holds=bool(slow < 0.5 * fast and r_fast <= 1 + TOLERANCE and r_slow <= 1 + TOLERANCE),
        extra={"measure": "cores harvested with cpuset (ACBF)", "unit": "cores", "ci95": _r(slow_ci),
               "two_phase": _r(fast), "two_phase_ci95": _r(fast_ci), "paper_two_phase": 2.4,
               "p99_ratio_cpuset": _r(r_slow), "p99_ratio_two_phase": _r(r_fast)},
    ))
    sh = {c: (s.mean(v(c), None, BE), s.paired(None, P99, safe_ratio, v(c), v("standalone"))[0])
          for c in ("sh-cpuset-4", "sh-cpuset-5", "sh-cpuset-6")}
    out.append(Claim(
        id="simulated-smartharvest-buffers@memcached-80k",
        claim="Simulated SmartHarvest (cpuset, static buffer 4/5/6 of 8) at 80 k RPS harvests at most ~0.2 cores "
              "(§5.8, Fig. 11); holds if every buffer harvests under 0.5 cores",
        paper=0.2, measured=_r(max(h for h, _ in sh.values())), holds=bool(all(h < 0.5 for h, _ in sh.values())),
        extra={"unit": "cores", "by_buffer": {c: {"harvest": _r(h), "p99_ratio": _r(r)} for c, (h, r) in sh.items()},
               "note": "the paper also reports p99 up to +14 % with 4 or 5 buffer cores"},
    ))
    gains = {}
    for lv in ("80k", *LEVELS):
        if v("smartharvest").replace("80k", lv) in set(s.df["variant"]):
            gains[lv] = s.paired(None, BE, lambda h, p: h - p, _v("memcached", lv, "acbf"), _v("memcached", lv, "smartharvest"))
    best = max(gains, key=lambda k: gains[k][0])
    out.append(Claim(
        id="acbf-vs-smartharvest-predictor/memcached",
        claim="HarvestContainers harvests more than a SmartHarvest-like predictor (peak of the last 25 ms "
              "window, cpuset), which over-predicts after transient bursts (§5.8, Fig. 12: 30 % more)",
        paper=None, measured=_r(gains[best][0]), holds=bool(all(m > 0 for m, _ in gains.values())),
        extra={"measure": "harvest(acbf) − harvest(smartharvest), cores, per load", "ci95": _r(gains[best][1]),
               "by_level": {k: _r(m) for k, (m, _) in gains.items()},
               **({} if all(m > 0 for m, _ in gains.values()) else {"cause": "at low load the last window's peak is a "
            "few cores, so the predictor lends the rest for the whole window while ACBF (paper) keeps a large "
            "buffer; the predictor only loses where bursts fill all 8 cores in a window (mid and high load)"})},
    ))
    return out


_CAUSE_IRQ_SMALL = (
    "the IRQ load is ours (the paper gives no NetworkBully packet rate): 600 k handlers/s of 1 µs spread over "
    "8 cores is 7.5 % of each core, which stretches a request's service by 1/(1 − 0.075) ≈ 8 % on average; the "
    "p99 also holds the RTT and the queueing, which the handlers barely change at these loads, so it inflates by "
    "less (see by_point); the paper's +21–41 % implies a per-core IRQ load several times larger")


def _claims_fig8(s: Seeds) -> list[Claim]:
    out = []
    pts = [(a, l) for a in APPS for l in LEVELS]
    spread = {f"{a}/{l}": _p99_ratio(s, a, l, "acbf-irq") for a, l in pts}
    steer = {f"{a}/{l}": _p99_ratio(s, a, l, "acbf-irq-steer") for a, l in pts}
    alone = {f"{a}/{l}": _p99_ratio(s, a, l, "standalone-irq") for a, l in pts}
    worst = max(spread, key=lambda k: spread[k][0])
    infl = spread[worst][0] - 1
    ok = 0.33 / 2 <= infl <= 0.33 * 2
    out.append(Claim(
        id="irq-inflates-p99-up-to-33pct",
        claim="Without steering, NIC IRQ handling on the Primary's cores inflates its p99 by up to 33 % (Table 1; "
              "41 % in §5.5, Fig. 8); holds if the largest inflation over Primary × load is within a factor 2 of 33 %",
        paper=0.33, measured=_r(infl), holds=bool(ok),
        extra={"measure": "max over Primary × load of p99(ACBF + IRQs spread) / p99(standalone, no IRQ) − 1, "
                          "paired per seed", "ci95": _r(spread[worst][1]), "at": worst,
               "by_point": {k: _r(m - 1) for k, (m, _) in spread.items()},
               "table1_standalone_with_irq": {a: {"measured": _r(alone[f"{a}/mid"][0] - 1), "paper": TABLE1[a]}
                                              for a in APPS},
               "irq_model": "600 k handlers/s × 1 µs on the node (NetworkBully, ours), Poisson, preemptive-resume",
               **({} if ok else {"cause": _CAUSE_IRQ_SMALL})},
    ))
    sig = {k: spread[k][0] - 1 - (spread[k][1] if math.isfinite(spread[k][1]) else 0) for k in spread}
    out.append(Claim(
        id="irq-inflation-is-real",
        claim="IRQs spread over the node's cores inflate the p99 of every Primary at some load (Table 1, Fig. 8); "
              "holds if, for each Primary, the paired inflation's 95 % interval is above 0 at one load at least",
        paper=None, measured=_r(max(sig.values())),
        holds=bool(all(any(sig[f"{a}/{l}"] > 0 for l in LEVELS) for a in APPS)),
        extra={"measure": "lower end of the 95 % interval of p99(ACBF + IRQs) / p99(standalone) − 1",
               "by_point": {k: _r(v) for k, v in sig.items()}},
    ))
    worst_s = max(steer, key=lambda k: steer[k][0])
    acbf = {f"{a}/{l}": _p99_ratio(s, a, l, "acbf") for a, l in pts}
    out.append(Claim(
        id="irq-steering-keeps-p99-within-4pct",
        claim="With IRQs steered onto the Secondary's cores, the Primary's p99 stays within 4 % of standalone "
              "(§5.5, Fig. 8)",
        paper=1.04, measured=_r(steer[worst_s][0]), holds=bool(all(m <= 1 + TOLERANCE for m, _ in steer.values())),
        extra={"measure": "largest p99(ACBF + IRQs steered) / p99(standalone), paired per seed", "unit": "×",
               "ci95": _r(steer[worst_s][1]), "at": worst_s, "by_point": {k: _r(m) for k, (m, _) in steer.items()},
               "acbf_without_irq": {k: _r(m) for k, (m, _) in acbf.items()},
               "note": "steered handlers never run on a held core, so the Primary sees exactly its no-IRQ latencies: "
                       "this claim stands or falls with p99-within-4pct/acbf"},
    ))
    lower = {k: s.paired(None, P99, lambda a, b: a / b if b > 0 else math.nan, _v(*k.split("/"), "acbf-irq-steer"),
                         _v(*k.split("/"), "acbf-irq"))[0] for k in spread}
    out.append(Claim(
        id="irq-steering-lowers-p99",
        claim="Steering IRQs onto the Secondary's cores lowers the Primary's p99 relative to spreading them (Fig. 8); "
              "holds if it is not higher at any Primary × load and lower at one at least",
        paper=None, measured=_r(min(lower.values())),
        holds=bool(all(v <= 1 for v in lower.values()) and any(v < 1 for v in lower.values())),
        extra={"measure": "min over Primary × load of p99(steered) / p99(spread), paired per seed", "unit": "×",
               "by_point": {k: _r(v) for k, v in lower.items()}},
    ))
    gap = {}
    for a, l in pts:
        base = s.mean(_v(a, l, "acbf"), None, BE)
        st = s.mean(_v(a, l, "acbf-irq-steer"), None, BE)
        net = st - s.mean(_v(a, l, "acbf-irq-steer"), None, "irq.secondary_cores_mean")
        sp = s.mean(_v(a, l, "acbf-irq"), None, BE)
        gap[f"{a}/{l}"] = {"acbf": _r(base), "steered": _r(st), "steered_net_of_irq": _r(net), "spread": _r(sp)}
    diff = max(abs(g["steered"] - g["acbf"]) for g in gap.values())
    out.append(Claim(
        id="irq-steering-keeps-harvest",
        claim="With IRQ shielding the number of cores harvested stays approximately the same (§5.5); holds if the "
              "cores granted to the Secondary with steered IRQs differ from those without IRQs by under 0.25 cores",
        paper=None, measured=_r(diff), holds=bool(diff < 0.25),
        extra={"measure": "max over Primary × load of |harvest(steered) − harvest(ACBF, no IRQ)|", "unit": "cores",
               "by_point": gap,
               "note": "with steering the Primary's cores see no handler, so the cores granted are those without "
                       "IRQs by construction; steered_net_of_irq subtracts the handlers' time (0.6 cores, on the "
                       "Secondary's dedicated core and its harvested cores, which this model does not tell apart: "
                       "negative where the harvest is below 0.6 cores, i.e. the dedicated core absorbs it); 'spread' "
                       "harvests less where the handlers make the Primary busier and ACBF keeps a larger buffer "
                       "(§2.3: IRQs 'necessitate reserving an even larger buffer')"},
    ))
    return out


def _app_p99(s: Seeds, level: str, ctl: str, app: str) -> tuple[float, float]:
    col = f"applications.{app}.latency_us.p99"
    return s.paired(None, col, safe_ratio, _v("three", level, ctl), _v("three", level, "standalone"))


def _claims_three(s: Seeds) -> list[Claim]:
    out = []
    for ctl in ("acbf", "acbf-artifact"):
        ratios = {f"{a}/{l}": _app_p99(s, l, ctl, a) for a in APPS for l in LEVELS}
        worst = max(ratios, key=lambda k: ratios[k][0])
        h = {l: s.stat(_v("three", l, ctl), None, BE) for l in LEVELS}
        alone = {l: sum(s.mean(_v(a, l, ctl), None, BE) for a in APPS) for l in LEVELS}
        out.append(Claim(
            id=f"three-primaries-p99-within-4pct/{ctl}",
            claim=f"Three Primaries together (Memcached-, MySQL-, Xapian-like, 8 cores each) with CPUBully under "
                  f"{ctl}: every Primary's p99 within 4 % of standalone (Fig. 5, §5.6)",
            paper=1.04, measured=_r(ratios[worst][0]), holds=bool(all(m <= 1 + TOLERANCE for m, _ in ratios.values())),
            extra={"measure": "largest p99(harvest) / p99(standalone) of a Primary in the three-Primary run, paired "
                              "per seed", "unit": "×", "ci95": _r(ratios[worst][1]), "at": worst,
                   "by_point": {k: _r(m) for k, (m, _) in ratios.items()}},
        ))
        hl = [h[l][0] for l in LEVELS]
        out.append(Claim(
            id=f"three-primaries-harvest/{ctl}",
            claim=f"The cores harvested from three Primaries together (summed over their core sets) grow as the load "
                  f"falls (Fig. 5: 0.2 to 6 cores per Primary); holds if the total at low load exceeds the total at "
                  f"high load (by_level compares it with the sum of the one-Primary runs)",
            paper=None, measured=_r(hl[0]), holds=bool(hl[0] > hl[2]),
            extra={"measure": "cores harvested in all (sum over the three nodes) at low load", "unit": "cores",
                   "by_level": {l: {"together": _r(h[l][0]), "ci95": _r(h[l][1]),
                                    "sum_of_one_at_a_time": _r(alone[l])} for l in LEVELS},
                   "by_primary": {l: {a: _r(s.mean(_v("three", l, ctl), None, f"nodes.{i}.be_cores_mean"))
                                      for i, a in enumerate(APPS)} for l in LEVELS},
                   "note": "each Primary has its own node (core set, queue, controller); the Primaries only share "
                           "the Secondary, which is always runnable, so the total is the sum of independent harvests"},
        ))
    return out


def _claims_fig10(s: Seeds) -> list[Claim]:
    out = []
    for a in APPS:
        pts = {}
        for l in LEVELS:
            acbf = s.mean(_v(a, l, "acbf"), None, BE)
            for c in CFS:
                pts[f"{l}/{c}"] = (s.mean(_v(a, l, c), None, BE), _p99_ratio(s, a, l, c)[0], acbf)
        # Fails when some cgroups setting both keeps p99 within tolerance and harvests at least
        # as much as ACBF at that load.
        good = [k for k, (h, r, ac) in pts.items() if r <= 1 + TOLERANCE and h >= ac]
        worst = max(pts, key=lambda k: pts[k][1])
        out.append(Claim(
            id=f"cgroups-trade-off/{a}",
            claim=f"{a}: no cgroups shares/quota setting both keeps p99 within 4 % of standalone and harvests as "
                  f"much as ACBF (§2.1, §5.7, Fig. 10)",
            paper=None, measured=_r(pts[worst][1]), holds=not good,
            extra={"measure": "largest p99(cgroups) / p99(standalone)", "at": worst,
                   "by_point": {k: {"harvest": _r(h), "p99_ratio": _r(r), "acbf_harvest": _r(ac)}
                                for k, (h, r, ac) in pts.items()}},
        ))
    return out


def _claims_accounting(df: pd.DataFrame) -> list[Claim]:
    t = df
    total = t["core_time.busy_ns"] + t["core_time.search_ns"] + t["core_time.parked_ns"] + \
        t["core_time.transition_ns"] + t["core_time.overhead_ns"]
    gap = (total - t["core_time.total_ns"]).abs().max()
    return [Claim(
        id="core-time-conserved",
        claim="Primary busy + held idle (buffer) + Secondary + eviction core time = 8 cores × run time in every run",
        paper=None, measured=_r(float(gap)), holds=bool(gap == 0),
        extra={"measure": "largest |sum − total| over runs", "unit": "ns"},
    )]


# ---------------------------------------------------------------------------------------------
# figures


def _plots(ctx: Context, s: Seeds) -> None:
    import matplotlib.pyplot as plt

    ctls = (("acbf", "ACBF (paper)"), ("acbf-artifact", "ACBF (artifact)"), ("static-4", "static 4"),
            ("cfs-6", "cgroups quota 6"), ("smartharvest", "SmartHarvest-like"))
    fig, axes = plt.subplots(2, 3, figsize=(13, 6.5))
    _bars_by_primary(s, axes, ctls, "p99 / standalone")
    for j in range(len(APPS)):
        axes[0, j].set_yscale("log")
    axes[1, 0].legend(fontsize=7)
    fig.suptitle("HarvestContainers Fig. 5/6/10/11 shape: harvest and p99 cost per Primary and load")
    fig.tight_layout()
    ctx.save_figure(fig, "harvest_by_primary.png")

    vs = [c for c in ("standalone", "acbf", "acbf-cpuset", "sh-cpuset-4", "sh-cpuset-5", "sh-cpuset-6", "smartharvest")
          if _v("memcached", "80k", c) in set(s.df["variant"])]
    if len(vs) > 1:
        fig, (a0, a1) = plt.subplots(1, 2, figsize=(10, 3.5))
        h = [s.mean(_v("memcached", "80k", c), None, BE) for c in vs]
        p = [s.mean(_v("memcached", "80k", c), None, P99) for c in vs]
        a0.bar(vs, h)
        a0.set_ylabel("cores harvested")
        a1.bar(vs, p)
        a1.set_ylabel("p99 (µs)")
        for ax in (a0, a1):
            ax.tick_params(axis="x", rotation=45, labelsize=7)
        fig.suptitle("Memcached-like at 80 k RPS: two-phase affinity vs cpuset (Fig. 7, 11)")
        fig.tight_layout()
        ctx.save_figure(fig, "harvest_memcached_80k.png")


def _bars_by_primary(s: Seeds, axes, ctls, p99_label: str) -> None:
    """One column per Primary: the p99 over standalone (top, the tolerance dashed) and the cores
    harvested (bottom) per load level, a bar per controller with its 95 % interval."""
    x = np.arange(len(LEVELS))
    w = 0.8 / len(ctls)
    for j, a in enumerate(APPS):
        for i, (c, label) in enumerate(ctls):
            for row, stats in ((0, [_p99_ratio(s, a, l, c) for l in LEVELS]),
                               (1, [s.stat(_v(a, l, c), None, BE) for l in LEVELS])):
                axes[row, j].bar(x + i * w, [m for m, _ in stats], w,
                                 yerr=[e if np.isfinite(e) else 0 for _, e in stats], label=label)
        axes[0, j].axhline(1 + TOLERANCE, color="k", ls="--", lw=0.8)
        axes[0, j].set_title(f"{a}-like")
        axes[0, j].set_ylabel(p99_label)
        axes[1, j].set_ylabel("cores harvested")
        for ax in axes[:, j]:
            ax.set_xticks(x + 0.4 - w / 2, LEVELS)


def _plots_fig8_three(ctx: Context, s: Seeds) -> None:
    import matplotlib.pyplot as plt

    ctls = (("acbf", "ACBF, no IRQ"), ("standalone-irq", "standalone + IRQs"), ("acbf-irq", "ACBF + IRQs spread"),
            ("acbf-irq-steer", "ACBF + IRQs steered"))
    fig, axes = plt.subplots(2, 3, figsize=(13, 6.5))
    _bars_by_primary(s, axes, ctls, "p99 / standalone (no IRQ)")
    axes[0, 0].legend(fontsize=7)
    fig.suptitle("HarvestContainers Fig. 8 shape: NIC IRQ interference with and without steering")
    fig.tight_layout()
    ctx.save_figure(fig, "harvest_irq.png")

    fig, (a0, a1) = plt.subplots(1, 2, figsize=(11, 3.8))
    x = np.arange(len(LEVELS))
    for i, c in enumerate(("acbf", "acbf-artifact")):
        for k, a in enumerate(APPS):
            r = [_app_p99(s, l, c, a)[0] for l in LEVELS]
            a0.plot(LEVELS, r, marker="o", ls="-" if i == 0 else "--", color=f"C{k}", label=f"{a} ({c})")
            hs = [s.mean(_v("three", l, c), None, f"nodes.{k}.be_cores_mean") for l in LEVELS]
            bottom = [sum(s.mean(_v("three", l, c), None, f"nodes.{q}.be_cores_mean") for q in range(k)) for l in LEVELS]
            a1.bar(x + i * 0.4, hs, 0.4, bottom=bottom, color=f"C{k}", alpha=1 if i == 0 else 0.5,
                   label=f"{a} ({c})")
    a0.axhline(1 + TOLERANCE, color="k", ls="--", lw=0.8)
    a0.set_ylabel("p99 / standalone")
    a1.set_ylabel("cores harvested (stacked by Primary)")
    a1.set_xticks(x + 0.2, LEVELS)
    a0.legend(fontsize=6)
    fig.suptitle("Three Primaries together, 8 cores each, CPUBully (Fig. 5, §5.6)")
    fig.tight_layout()
    ctx.save_figure(fig, "harvest_three_primaries.png")
