"""``microsched reproduce synergy``: Synergy (Berghetti et al., IFIP Networking 2026; issue 15).

Fig. 3-5: p99.9 slowdown and p99.9 latency against offered load on High (1/100 µs, 50/50),
Extreme (0.5/500 µs, 99.5/0.5) and ZippyDB (0.5/2.5/500 µs, 78/19/3) for Synergy, Shinjuku,
Shinjuku-CI, Concord, Tiny Quanta, c-FCFS and d-FCFS, 14 workers, RTT 10 µs, 512 flows
(``experiments/synergy/``; variants are ``WORKLOAD/SYSTEM``). The maximum load at p99.9
slowdown <= 50 of each system comes from the max-load finder (:mod:`microsched.maxload`: a
bisection per seed, which also rejects loads the run did not keep up with). Fig. 7: the
ablation ladder on ZippyDB (rss, rss-ci, +ws, +wq, +cp, +qa) with the share of quantum expiries
whose interrupt conditional preemption avoided. Fig. 9: Synergy on High with signal, kmod IPI,
UINTR (Table I p50 costs) and compiler interrupts. Fig. 10: 8 vs 512 flows on High, per-worker
utilisation spread.

How the baselines are modelled (and what is left out) is in ``experiments/synergy/sweep.toml``
and the policy files (``crates/microsched-core/src/sched/{synergy,shinjuku,concord,tiny_quanta,darc}.rs``:
Concord with JBSQ(2) mailboxes and a dispatcher that runs requests in its slack, Tiny Quanta with
8 coroutines per worker, new requests first, its ring read every 4 runs); claims that do not hold
carry their cause.
"""

from __future__ import annotations

import math
import pandas as pd

from .claims import Claim, rounded as _r
from .framework import Context, register

LOAD = "load.fraction"
SLO = 50.0
WORKLOADS = ("high", "extreme", "zippydb")
SYSTEMS = ("synergy", "shinjuku", "shinjuku-ci", "concord", "tq", "darc", "c-fcfs", "d-fcfs")
LADDER = ("rss", "rss-ci", "rss-ci+ws", "rss-ci+ws+wq", "rss-ci+ws+wq+cp", "synergy")
# Paper's max loads at p99.9 slowdown <= 50 (Fig. 3-5, 7), in kRPS.
PAPER_KRPS = {
    "high": {"synergy": 266, "shinjuku": 211, "shinjuku-ci": 239, "concord": 239, "tq": 239},
    # Perséphone (DARC): 2.1 MRPS at slowdown 50 (Fig. 8, the same Extreme workload).
    "extreme": {"synergy": 3790, "shinjuku": 2370, "shinjuku-ci": 2610, "concord": 2840, "darc": 2100},
    "zippydb": {"synergy": 843, "shinjuku": 538, "shinjuku-ci": 628, "concord": 673, "tq": 717},
}
PAPER_LADDER_KRPS = {"rss-ci": 89, "rss-ci+ws": 538, "rss-ci+ws+wq": 763, "rss-ci+ws+wq+cp": 843}


def _variant_sets(ctx: Context) -> dict[str, list[str]]:
    return {v.name: list(v.set) for v in ctx.spec.variants}


HI = 1.0  # the top of the searched loads


def _tol(ctx: Context) -> float:
    return 0.02 if ctx.quick else 0.01


def _search(ctx: Context, variant: str) -> dict:
    """The max-load finder on one variant, with the sweep's seeds and run length."""
    from ..maxload import max_load

    return max_load(str(ctx.spec.base), slo=SLO, seeds=ctx.spec.seeds,
                    overrides=[*ctx.spec.overrides, *_variant_sets(ctx)[variant]], lo=0.05, hi=HI, tol=_tol(ctx))


def _crossing(agg: pd.DataFrame, variant: str, metric: str = "slowdown.p999") -> float:
    """The load at which the mean curve first exceeds the SLO (linear interpolation between grid
    loads); the highest grid load if it never does, the lowest if it starts above."""
    d = agg[agg["variant"] == variant].sort_values(LOAD)
    x, y = d[LOAD].astype(float).to_numpy(), d[metric].astype(float).to_numpy()
    if len(x) == 0:
        return math.nan
    if y[0] > SLO:
        return float(x[0])
    for i in range(1, len(x)):
        if y[i] > SLO:
            return float(x[i - 1] + (SLO - y[i - 1]) * (x[i] - x[i - 1]) / (y[i] - y[i - 1]))
    return float(x[-1])


@register("synergy", paper="Synergy (IFIP Networking 2026)", figure="Fig. 3-5, 7, 9, 10",
          description="Synergy vs Shinjuku, Shinjuku-CI, Concord, Tiny Quanta, c-FCFS, d-FCFS on High, Extreme "
                      "and ZippyDB (p99.9 slowdown, max load at slowdown <= 50), the ablation ladder, interrupt "
                      "mechanisms, 8 vs 512 flows",
          spec="synergy/sweep.toml")
def analyze(ctx: Context) -> list[Claim]:
    df, agg = ctx.results, ctx.aggregate
    have = set(df["variant"])
    plot_curves(ctx, agg, have)
    claims: list[Claim] = []
    searches: dict[str, dict] = {}
    for w in WORKLOADS:
        for s in PAPER_KRPS[w]:
            v = f"{w}/{s}"
            if v in have:
                searches[v] = _search(ctx, v)
    rows = [{"variant": v, "load": r["load"], "load_ci95": r["load_ci95"], "krps": r["rps"] / 1e3,
             "krps_ci95": r["rps_ci95"] / 1e3, "n": r["n"]} for v, r in searches.items()]
    pd.DataFrame(rows).to_csv(ctx.out / "max_load.csv", index=False)
    for w in WORKLOADS:
        syn = searches.get(f"{w}/synergy")
        if syn is None:
            continue
        for s, paper in PAPER_KRPS[w].items():
            if s == "synergy" or f"{w}/{s}" not in searches:
                continue
            other = searches[f"{w}/{s}"]
            ratio = syn["rps"] / other["rps"] if other["rps"] > 0 else math.inf
            paper_ratio = PAPER_KRPS[w]["synergy"] / paper
            claims.append(Claim(
                id=f"maxload/{w}/synergy-vs-{s}",
                claim=f"{w}: Synergy sustains more offered load than {s} at p99.9 slowdown <= {SLO:g} "
                      f"(paper: {PAPER_KRPS[w]['synergy']} vs {paper} kRPS); holds if our ratio > 1",
                paper=_r(paper_ratio, 3), measured=_r(ratio, 3), holds=bool(ratio > 1.0),
                extra={"measure": "max load of Synergy / of the other system", "unit": "×",
                       "synergy_krps": _r(syn["rps"] / 1e3, 1), f"{s}_krps": _r(other["rps"] / 1e3, 1),
                       "synergy_krps_ci95": _r(syn["rps_ci95"] / 1e3, 1),
                       "cause": _cause(w, s, ratio, syn["load"], other["load"], _tol(ctx))}))
    claims += ladder_claims(ctx, agg, df, have)
    claims += mechanism_claims(agg, have)
    claims += flow_claims(agg, have)
    claims += knob_claims(ctx, agg, have)
    claims += scaling_claims(ctx)
    return claims


# What lets a baseline reach Synergy's load in this model, measured (full run, 3 seeds).
_BASELINE_CAUSE = {
    "concord": "Concord's dispatcher runs requests itself when every JBSQ(2) mailbox is full and no worker began a "
               "request in the last 0.5 µs, a 15th core's work at high load (High: max load 0.948 without it, 0.965 "
               "with it; Synergy 0.985)",
}


def _cause(w: str, s: str, ratio: float, syn_load: float, other_load: float, tol: float) -> str | None:
    if ratio > 1.0:
        return None
    if min(syn_load, other_load) >= HI - 2 * tol:
        return (f"both meet the SLO up to the top of the searched loads (Synergy {syn_load:.3f}, {s} {other_load:.3f} "
                f"of the workers' capacity, search step {tol}): this run cannot order them. "
                + _BASELINE_CAUSE.get(s, "No per-request packet or dispatcher work beyond the dispatcher's cost is "
                                         "modelled, so every system gets close to full capacity"))
    return ("in this model Synergy's shorts run ahead of longs almost perfectly (conditional preemption at a "
            "quantum of 2 × the short EMA, preempted longs parked in the wait queue); the gap to the paper is in "
            "what the model leaves out of the baselines' costs or Synergy's (per-request packet and "
            "dispatcher work, the NIC/soft-ring split)")


def ladder_claims(ctx: Context, agg: pd.DataFrame, df: pd.DataFrame, have: set) -> list[Claim]:
    rungs = [r for r in LADDER if f"zippydb/{r}" in have]
    if len(rungs) < 2:
        return []
    loads = {r: _crossing(agg, f"zippydb/{r}") for r in rungs}
    monotone = all(loads[a] <= loads[b] + 0.02 for a, b in zip(rungs, rungs[1:]))
    out = [Claim(
        id="ladder/zippydb/monotone",
        claim="ZippyDB: each component of Synergy (ws, wq, cp, qa) adds sustainable load at p99.9 slowdown <= 50 "
              "(paper: 89 → 538 → 763 → 843 kRPS); holds if no rung loses more than 0.02 of load to the previous",
        paper=None, measured=_r(min(loads[b] - loads[a] for a, b in zip(rungs, rungs[1:])), 3), holds=monotone,
        extra={"by_rung_load": {r: _r(v, 3) for r, v in loads.items()},
               "measure": "smallest load gain between consecutive rungs (grid interpolation)", "unit": "load"})]
    cp = df[df["variant"] == "zippydb/synergy"]
    if len(cp):
        top = cp[cp[LOAD].astype(float) == cp[LOAD].astype(float).max()]
        avoided = top["sched.avoided_preemptions"].astype(float).sum()
        done = top["sched.preemptions"].astype(float).sum()
        share = avoided / (avoided + done) if avoided + done > 0 else math.nan
        out.append(Claim(
            id="ladder/zippydb/avoided-interrupts",
            claim="ZippyDB: conditional preemption avoids more than 90 % of the interrupts quantum expiries would send",
            paper=0.9, measured=_r(share, 4), holds=bool(share > 0.9),
            extra={"measure": "avoided / (avoided + preemptions) at the highest load", "unit": "share"}))
    return out


def mechanism_claims(agg: pd.DataFrame, have: set) -> list[Claim]:
    mech = {m: f"high/{m}" for m in ("signal", "kmod_ipi", "uintr")}
    mech["ci"] = "high/synergy"
    if not all(v in have for v in mech.values()):
        return []
    top = agg[LOAD].astype(float).max()
    sd = {m: float(agg[(agg["variant"] == v) & (agg[LOAD].astype(float) == top)]["slowdown.p999"].iloc[0])
          for m, v in mech.items()}
    worst = max(sd, key=sd.get)
    return [Claim(
        id="mechanisms/high/signal-worst",
        claim="High: Synergy with signals performs worst of the interrupt mechanisms (highest p99.9 slowdown at the "
              "highest load; paper: IPI, UINTR and CI sustain 5, 10, 13 % more load than signals)",
        paper=None, measured=_r(sd["signal"], 3), holds=worst == "signal",
        extra={"by_mechanism_slowdown_p999": {m: _r(v, 3) for m, v in sd.items()}, "load": top,
               "cause": None if worst == "signal" else
               "with conditional preemption few interrupts are sent, so the mechanism's cost barely shows"})]


def flow_claims(agg: pd.DataFrame, have: set) -> list[Claim]:
    if "high/flows8" not in have:
        return []
    d = agg[agg["variant"] == "high/flows8"].copy()
    d["gap"] = d["sched.worker_utilization.max"].astype(float) - d["sched.worker_utilization.min"].astype(float)
    row = d.iloc[(d[LOAD].astype(float) - 0.65).abs().argsort().iloc[0]]
    gap = float(row["gap"])
    return [Claim(
        id="flows/high/8-flows-balanced",
        claim="High with 8 flows (some workers get no RSS traffic): work stealing evens worker utilisation, the gap "
              "max - min falls below 5 % by 65 % load",
        paper=0.05, measured=_r(gap, 4), holds=bool(gap < 0.05),
        extra={"load": float(row[LOAD]), "measure": "max - min worker utilisation", "unit": "share",
               "cause": None if gap < 0.05 else
               "8 flows hash onto a few workers, whose NIC queues thieves cannot see: only a burst's remainder in "
               "the soft ring is stealable, so a hot worker keeps most of its traffic (measured at load 0.65, 300 ms: "
               "utilisation 0.59-0.79 with 8 flows, 0.61-0.68 with 512; 0.56-0.88 with the whole queue stealable, "
               "policy.sched.nic_ring = false). The paper's balance needs more stealing than the code's rules give "
               "in this model"})]


KNOBS = ("synergy", "d15-f20", "d10-f5", "d10-f10")


def knob_claims(ctx: Context, agg: pd.DataFrame, have: set) -> list[Claim]:
    """Fig. 8: THRESH_WQD / CONGESTED_QUANTUM_FACTOR on Extreme."""
    if not all(f"extreme/{k}" in have for k in KNOBS):
        return []
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, figsize=(6.5, 6), sharex=True)
    for k in KNOBS:
        d = agg[agg["variant"] == f"extreme/{k}"].sort_values(LOAD)
        label = "d0-f0 (synergy)" if k == "synergy" else k
        axes[0].plot(d[LOAD], d["slowdown.p999"], marker="o", ms=3, label=label)
        axes[1].plot(d[LOAD], d["latency_us.p999"], marker="o", ms=3, label=label)
    axes[0].set_ylabel("p99.9 slowdown")
    axes[1].set_ylabel("p99.9 latency (µs)")
    axes[1].set_xlabel("offered load")
    axes[0].legend(fontsize=7)
    axes[0].set_title("Synergy Fig. 8: wait-queue congestion knobs (Extreme)")
    ctx.save_figure(fig, "fig8_knobs.png")
    loads = sorted(set(agg[LOAD].astype(float)))
    at = min(loads, key=lambda x: abs(x - 0.78))

    def get(k: str, m: str) -> float:
        d = agg[(agg["variant"] == f"extreme/{k}") & (agg[LOAD].astype(float) == at)]
        return float(d[m].iloc[0])

    dsd = get("d10-f5", "slowdown.p999") - get("synergy", "slowdown.p999")
    dlat = get("d10-f5", "latency_us.p999") - get("synergy", "latency_us.p999")
    holds = dsd > 0 and dlat < 0
    return [Claim(
        id="knobs/extreme/d10-f5-trades-slowdown-for-latency",
        claim="Extreme at ~78 % load: THRESH_WQD = 10 µs with CONGESTED_QUANTUM_FACTOR = 5 raises the p99.9 slowdown "
              "(paper 32.9 → 56.8) and lowers the p99.9 latency (paper: by 530 µs) against d0-f0",
        paper=-530.0, measured=_r(dlat, 1), holds=bool(holds),
        extra={"load": at, "slowdown_change": _r(dsd, 3), "measure": "p99.9 latency change (d10-f5 − d0-f0)",
               "unit": "µs",
               "cause": None if holds else
               "in this model preempted requests seldom wait 10 µs in the wait queue at this load (an idle worker "
               "resumes one at once), so the queue is rarely congested and the knob changes little; with "
               "thresh_wqd_us = 1 the trade-off appears (tested at load 0.95: slowdown 25 → 1657, latency "
               "1237 → 899 µs)"})]


def scaling_claims(ctx: Context) -> list[Claim]:
    """Fig. 11: ZippyDB at 50 % load on 8-30 workers, Synergy against c-FCFS and Perséphone's DARC
    (each with its dispatcher core, as in the sweep's variants)."""
    import matplotlib.pyplot as plt

    from ..api import run

    workers = (8, 30) if ctx.quick else (8, 14, 22, 30)
    sets = _variant_sets(ctx)
    rows = []
    systems = [x for x in ("synergy", "c-fcfs", "darc") if f"zippydb/{x}" in sets]
    for sysname in systems:
        for n in workers:
            # A dispatcher core comes on top of the n workers.
            cores = n + any(o.startswith("server.dispatcher") for o in sets[f"zippydb/{sysname}"])
            ovr = [*ctx.spec.overrides, *sets[f"zippydb/{sysname}"], f"server.max_cores={cores}", "load.fraction=0.5"]
            for seed in ctx.spec.seeds:
                s = run(str(ctx.spec.base), seed=seed, overrides=ovr).summary
                rows.append({"system": sysname, "workers": n, "seed": seed, "slowdown.p999": s["slowdown"]["p999"],
                             "latency_us.p999": s["latency_us"]["p999"], "offered_rps": s["offered_rps"]})
    df = pd.DataFrame(rows)
    df.to_csv(ctx.out / "fig11_scaling.csv", index=False)
    m = df.groupby(["system", "workers"], as_index=False)[["slowdown.p999", "latency_us.p999"]].mean()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for sysname, d in m.groupby("system"):
        ax.plot(d["workers"], d["slowdown.p999"], marker="o", label=sysname)
    ax.set_yscale("log")
    ax.set_xlabel("workers")
    ax.set_ylabel("p99.9 slowdown at 50 % load")
    ax.legend()
    ax.set_title("Synergy Fig. 11: scaling (ZippyDB)")
    ctx.save_figure(fig, "fig11_scaling.png")
    syn = m[m["system"] == "synergy"].set_index("workers")["slowdown.p999"]
    cf = m[m["system"] == "c-fcfs"].set_index("workers")["slowdown.p999"]
    worst = float((syn / cf).max())
    out = []
    if "darc" in systems:
        dc = m[m["system"] == "darc"].set_index("workers")["slowdown.p999"]
        ratio = float((syn / dc).max())
        out.append(Claim(
            id="scaling/zippydb/synergy-vs-darc",
            claim="ZippyDB at 50 % load: Synergy's p99.9 slowdown is no worse than Perséphone's (DARC) on 8 to 30 "
                  "workers (paper at 8 workers: 13 vs 16); holds if the largest ratio is ≤ 1.1",
            paper=13 / 16, measured=_r(ratio, 4), holds=bool(ratio <= 1.1),
            extra={"cause": None if ratio <= 1.1 else
                   "at 50 % load DARC's central per-type queues hand every short request to the first free core "
                   "reserved for it (its 200 ns dispatcher is far from saturated), while Synergy's shorts wait behind "
                   "other shorts in their RSS queue until it holds 2 for a thief; the model charges DARC nothing for "
                   "profiling or for the dispatcher's packet handling beyond its per-request cost",
                   "by_workers_darc": {int(k): _r(v, 2) for k, v in dc.items()},
                   "measure": "largest ratio slowdown(Synergy) / slowdown(DARC) over worker counts", "unit": "×"}))
    return out + [Claim(
        id="scaling/zippydb/synergy-below-cfcfs",
        claim="ZippyDB at 50 % load: Synergy's p99.9 slowdown stays below c-FCFS's on 8 to 30 workers (paper at 8 "
              "workers: 13 vs 596)",
        paper=13 / 596, measured=_r(worst, 4), holds=bool(worst < 1.0),
        extra={"cause": None if worst < 1.0 else
               "our c-FCFS has no dispatcher core (a free central queue, near-ideal with many workers at 50 % load); "
               "the paper's c-FCFS is Perséphone's, whose dispatcher fails beyond 22 workers",
               "by_workers_synergy": {int(k): _r(v, 2) for k, v in syn.items()},
               "by_workers_cfcfs": {int(k): _r(v, 2) for k, v in cf.items()},
               "measure": "largest ratio slowdown(Synergy) / slowdown(c-FCFS) over worker counts", "unit": "×"})]


def plot_curves(ctx: Context, agg: pd.DataFrame, have: set) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for fig_name, w in (("fig3_high.png", "high"), ("fig4_extreme.png", "extreme"), ("fig5_zippydb.png", "zippydb")):
        fig, axes = plt.subplots(2, 1, figsize=(6.5, 7), sharex=True)
        for s in SYSTEMS:
            d = agg[agg["variant"] == f"{w}/{s}"].sort_values(LOAD)
            if len(d) == 0:
                continue
            axes[0].plot(d[LOAD], d["slowdown.p999"], marker="o", ms=3, label=s)
            axes[1].plot(d[LOAD], d["latency_us.p999"], marker="o", ms=3, label=s)
        axes[0].axhline(SLO, color="gray", ls="--", lw=0.8)
        axes[0].set_yscale("log")
        axes[1].set_yscale("log")
        axes[0].set_ylabel("p99.9 slowdown")
        axes[1].set_ylabel("p99.9 latency (µs)")
        axes[1].set_xlabel("offered load (fraction of 14 workers)")
        axes[0].legend(fontsize=7)
        axes[0].set_title(f"Synergy Fig. {fig_name[3]}: {w}")
        ctx.save_figure(fig, fig_name)
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for r in LADDER:
        d = agg[agg["variant"] == f"zippydb/{r}"].sort_values(LOAD)
        if len(d):
            ax.plot(d[LOAD], d["slowdown.p999"], marker="o", ms=3, label=r if r != "synergy" else "+qa (synergy)")
    ax.axhline(SLO, color="gray", ls="--", lw=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("offered load")
    ax.set_ylabel("p99.9 slowdown")
    ax.legend(fontsize=7)
    ax.set_title("Synergy Fig. 7: ablation ladder (ZippyDB)")
    ctx.save_figure(fig, "fig7_ladder.png")

