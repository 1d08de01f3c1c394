"""``microsched reproduce load-shift``: Fig. 1 of the simulation study "core allocation vs
overload control" (``shared/papers/core-allocation-vs-overload-control.md`` §2–§3).

Breakwater (target 10 µs, drop 20 µs, α = 1 absolute, β = 0.08, RTT 30 µs) over a Caladan-style
core allocator (32 cores, delay threshold 10 µs every 5 µs, allocation delay 5 µs), bimodal
requests with a 1 µs mean, 1000 sessions, load 0.2 → 1.2 → 0.5 → 1.2 every 25 ms
(``experiments/load-shift/``). Variants: the baseline, the study's fix (``core_fix``), and the
baseline started from Breakwater's own initial pool (32) instead of the study simulator's 1025.

The module reads as the study's claims (:data:`CLAIMS`, each with the paper's number where the
paper gives one), the functions that measure them on :class:`Data` (:func:`build_data`: the
sweep's rows plus per-phase and per-shift tables made from the runs' time series, each read per
point and per seed through :class:`~microsched.reproduce.stats.Seeds`), and :func:`analyze`,
which re-runs the points for their time series (bit-identical: same scenario and seed; the
sweep's rows hold whole-run summaries only), draws the figures and judges the claims
(verdicts, confidence intervals and causes: :mod:`.claims`).

Figures: ``loadshift_timeseries.png`` (throughput, credit pool, cores, queued tasks over the run,
baseline vs fix, like the study's top panel), ``loadshift_closeup.png`` (the first shift at the
sampling resolution, like its bottom panel) and ``loadshift_phases.png`` (each phase's throughput
against its offered load, per variant, with 95 % CIs over seeds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from .claims import (BOUND, GAIN, ORDER, RATIO, VALUE, Cause, ClaimSpec, Condition, Measured, judge_all,
                     rounded as _r)
from .framework import Context, Figure, Thesis, register
from .runner import mean_ci95
from .stats import Seeds
from .spec import Point

BASE, FIX, INIT32 = "baseline", "fix", "baseline-init32"
PAPER_REF = "core allocation vs overload control"
BIN_MS = 0.1                 # the top panel's resolution (100 µs)
RAMP_LEVEL = 0.8             # "ramped up": 80 % of the capacity a load above 1 can use
TAIL_MS = 5.0                # "the end of a phase": its last 5 ms (the state the shift starts from)
BURST_MS = 1.0               # "the burst": the first ms after the shift (~33 round trips)
SERVED_REGIME = 0.9          # the paper's Fig. 1 baseline serves its low load before the shift
TS_COLS = ("t_ms", "throughput_rps", "offered_rps", "credit_pool", "credits_issued", "cores_allocated",
           "cores_busy", "cores_parked", "queue_len", "oldest_delay_us", "in_system", "client_queued", "drops",
           "arrivals", "completions", "drained_sessions")
COLORS = {BASE: "tab:red", FIX: "tab:blue", INIT32: "tab:orange"}


# ---------------------------------------------------------------------------------------------
# time series (shared with the collapse reproduction)


def timeseries_tasks(points: Sequence[Point], extra_overrides: Sequence[str] = ()) -> list[tuple]:
    """The time series runs of ``points`` (each with ``extra_overrides`` appended), as
    ``series_of`` takes them."""
    from ..sweep.worker import series_task

    return [series_task(p, TS_COLS, extra_overrides) for p in points]


def run_timeseries(ctx: Context, points: Sequence[Point], extra_overrides: Sequence[str] = ()) -> pd.DataFrame:
    """The time series of ``points`` (each with ``extra_overrides`` appended), one frame with the
    point's parameters as columns: extra runs on the framework's pool (:meth:`Context.run_extra`;
    the workers return the columns, the frames are made here)."""
    from ..sweep.worker import series_of

    columns = ctx.run_extra(series_of, timeseries_tasks(points, extra_overrides))
    frames = []
    for p, cols in zip(points, columns):
        ts = pd.DataFrame(cols)
        for k, v in p.params.items():
            ts[k] = v
        frames.append(ts)
    return pd.concat(frames, ignore_index=True)


def binned(ts: pd.DataFrame, bin_ms: float) -> pd.DataFrame:
    """Means over bins of ``bin_ms`` (the samples' end times in (k·bin, (k+1)·bin]); counts
    (drops, arrivals, completions) are summed."""
    b = np.ceil(np.round(ts["t_ms"].to_numpy(float) / bin_ms, 6)).astype(int)
    g = ts.assign(_bin=b).groupby("_bin")
    sums = [c for c in ("drops", "arrivals", "completions") if c in ts.columns]
    means = [c for c in ts.columns if c not in (*sums, "_bin", "t_ms") and pd.api.types.is_numeric_dtype(ts[c])]
    out = pd.concat([g[means].mean(), g[sums].sum()], axis=1).reset_index()
    out["t_ms"] = out["_bin"] * bin_ms
    return out.drop(columns="_bin")


def setup_plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def mean_service_us(scenario: Mapping[str, Any]) -> float:
    """The mean service time of a validated scenario's workload (µs), over its request types."""
    types = scenario["workload"]["types"]
    total = sum(float(t.get("ratio", 1.0)) for t in types)
    m = 0.0
    for t in types:
        s = t["service"]
        if s.get("modes"):
            mu = sum(float(x["value_us"]) * float(x["prob"]) for x in s["modes"])
        elif s.get("mean_us") is not None:
            mu = float(s["mean_us"])
        else:
            mu = float(s.get("value_us", math.nan))
        m += float(t.get("ratio", 1.0)) / total * mu
    return m


def scenario_params(scenario: Mapping[str, Any]) -> dict[str, Any]:
    """The scenario's numbers the claims and causes use (from the validated scenario as run)."""
    ov = scenario["policy"]["overload"]
    svc = mean_service_us(scenario)
    cores = int(scenario["server"]["max_cores"])
    rtt = float(scenario["network"]["rtt_us"])
    return {"max_cores": cores, "service_us": svc, "capacity_rps": cores / (svc * 1e-6), "rtt_us": rtt,
            "target_us": float(ov["target_us"]), "drop_us": float(ov.get("drop_us") or math.nan),
            "alloc_delay_us": float(scenario["server"]["allocation_delay_us"]),
            "duration_ms": float(scenario["duration_ms"]), "warmup_ms": float(scenario["warmup_ms"]),
            "drop_gate": ov.get("core_fix_drop_gate"), "search": scenario["server"]["search"].get("kind"),
            "client_timeout_us": scenario.get("clients", {}).get("timeout_us"),
            "sessions": int(scenario.get("clients", {}).get("sessions", 1)),
            "pool_ceiling": ov.get("max_pool") or (ov.get("max_pool_per_session") or math.nan)
            * scenario.get("clients", {}).get("sessions", math.nan),
            # credits one core needs to stay busy: one request in flight per round trip + service
            "credits_per_core": (rtt + svc) / svc}


def phases_of(scenario: Mapping[str, Any]) -> list[tuple[float, float, float]]:
    """(start ms, end ms, load fraction) of each phase of the scenario's load schedule."""
    load = scenario["load"]
    steps = [(0.0, float(load["fraction"]))] + [(float(s["at_ms"]), float(s["fraction"])) for s in load["schedule"]]
    end = float(scenario["warmup_ms"]) + float(scenario["duration_ms"])
    out = []
    for i, (at, frac) in enumerate(steps):
        nxt = steps[i + 1][0] if i + 1 < len(steps) else end
        if nxt > at:
            out.append((at, nxt, frac))
    return out


# ---------------------------------------------------------------------------------------------
# the data the claims are measured on: tables made from the time series, then Data


def phase_table(ts: pd.DataFrame, phases: Sequence[tuple[float, float, float]], params: Mapping[str, Any]
                ) -> pd.DataFrame:
    """One row per (variant, seed, phase): the phase's load and its means from the time series
    (throughput and offered load as fractions of capacity, cores, pool mean and maximum, credits
    issued, sessions drained of credits, drops per arrival), the same over its last ``TAIL_MS`` ms
    (``tail_*``)."""
    cap = params["capacity_rps"]
    rows = []
    for (v, seed), g in ts.groupby(["variant", "seed"]):
        t = g["t_ms"].to_numpy(float)
        for i, (lo, hi, load) in enumerate(phases):
            w = g[(t > lo) & (t <= hi + 1e-9)]
            tail = g[(t > max(lo, hi - TAIL_MS)) & (t <= hi + 1e-9)]
            if not len(w):
                continue
            arr = float(w["arrivals"].sum())
            rows.append({
                "variant": v, "seed": seed, "phase": i + 1, "load": load, "start_ms": lo, "end_ms": hi,
                "throughput": float(w["throughput_rps"].mean()) / cap,
                "offered": float(w["offered_rps"].mean()) / cap,
                "cores_allocated": float(w["cores_allocated"].mean()), "cores_busy": float(w["cores_busy"].mean()),
                "pool_mean": float(w["credit_pool"].mean()), "pool_max": float(w["credit_pool"].max()),
                "issued_mean": float(w["credits_issued"].mean()),
                "drained_mean": float(w["drained_sessions"].mean()) if "drained_sessions" in w else math.nan,
                "drop_fraction": float(w["drops"].sum()) / arr if arr > 0 else math.nan,
                "tail_throughput": float(tail["throughput_rps"].mean()) / cap,
                "tail_offered": float(tail["offered_rps"].mean()) / cap,
                "tail_cores": float(tail["cores_allocated"].mean()), "tail_pool": float(tail["credit_pool"].mean()),
            })
    return pd.DataFrame(rows)


def ramp_time_ms(ts: pd.DataFrame, shift_ms: float, level_rps: float, phase_ms: float) -> float:
    """Time after ``shift_ms`` until the 100 µs-binned throughput first reaches ``level_rps``;
    ``phase_ms`` (the phase's length) if it never does within the phase (censored)."""
    b = binned(ts, BIN_MS)
    seg = b[(b["t_ms"] > shift_ms) & (b["t_ms"] <= shift_ms + phase_ms + 1e-9)]
    hit = seg[seg["throughput_rps"] >= level_rps]
    return float(hit["t_ms"].iloc[0] - shift_ms) if len(hit) else phase_ms


def shift_table(ts: pd.DataFrame, phases: Sequence[tuple[float, float, float]], params: Mapping[str, Any]
                ) -> pd.DataFrame:
    """One row per (variant, seed, shift): every phase start where the load rises. The time to
    reach ``RAMP_LEVEL`` of capacity, the phase's peak, the state before the shift (the last
    ``TAIL_MS`` ms of the phase before: served / offered, cores; the 100 µs before: cores, pool) and
    the burst (the first ``BURST_MS`` ms: drops per arrival, the least cores allocated in a 100 µs
    bin, the longest sampled queueing delay, the most requests queued at the server and at the
    clients, credits issued)."""
    cap = params["capacity_rps"]
    shifts = [(i, phases[i - 1], phases[i]) for i in range(1, len(phases)) if phases[i][2] > phases[i - 1][2]]
    rows = []
    for (v, seed), g in ts.groupby(["variant", "seed"]):
        b = binned(g, BIN_MS)
        t, bt = g["t_ms"].to_numpy(float), b["t_ms"].to_numpy(float)
        for k, (i, (plo, phi, pload), (lo, hi, load)) in enumerate(shifts):
            pre = g[(t > max(plo, lo - TAIL_MS)) & (t <= lo + 1e-9)]
            pre_bin = b[(bt > lo - BIN_MS - 1e-9) & (bt <= lo + 1e-9)]
            burst = g[(t > lo) & (t <= lo + BURST_MS + 1e-9)]
            burst_bins = b[(bt > lo + 1e-9) & (bt <= lo + BURST_MS + 1e-9)]
            phase_bins = b[(bt > lo + 1e-9) & (bt <= hi + 1e-9)]
            arr = float(burst["arrivals"].sum())
            pre_off = float(pre["offered_rps"].mean())
            rows.append({
                "variant": v, "seed": seed, "shift": k + 1, "shift_ms": lo, "from_load": pload, "to_load": load,
                "phase_ms": hi - lo,
                "ramp_ms": ramp_time_ms(g, lo, RAMP_LEVEL * cap, hi - lo),
                "peak": float(phase_bins["throughput_rps"].max()) / cap,
                "phase_cores": float(phase_bins["cores_allocated"].mean()),
                "phase_pool": float(phase_bins["credit_pool"].mean()),
                "pre_served": float(pre["throughput_rps"].mean()) / pre_off if pre_off > 0 else math.nan,
                "pre_cores": float(pre_bin["cores_allocated"].mean()),
                "pre_pool": float(pre_bin["credit_pool"].mean()),
                "burst_arrivals": arr, "burst_drops": float(burst["drops"].sum()),
                "burst_drop_fraction": float(burst["drops"].sum()) / arr if arr > 0 else math.nan,
                "burst_min_cores": float(burst_bins["cores_allocated"].min()),
                "burst_max_cores": float(burst_bins["cores_allocated"].max()),
                "burst_busy": float(burst["cores_busy"].mean()),
                "burst_delay_max": float(burst["oldest_delay_us"].max()) if "oldest_delay_us" in burst else math.nan,
                "burst_queue_max": float(burst["queue_len"].max()),
                "burst_client_queued_max": float(burst["client_queued"].max()),
                "burst_issued_mean": float(burst["credits_issued"].mean()),
            })
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Data:
    """What the claims are measured on, per point and per seed: ``runs``, the sweep's rows (one
    point per variant); ``phases``, by phase (:func:`phase_table`); ``shifts``, by load rise
    (:func:`shift_table`); ``params``, the scenario's numbers (:func:`scenario_params`)."""

    runs: Seeds
    phases: Seeds
    shifts: Seeds
    params: Mapping[str, Any]

    @classmethod
    def of(cls, results: pd.DataFrame, phases: pd.DataFrame, shifts: pd.DataFrame,
           params: Mapping[str, Any]) -> "Data":
        """From the frames: the sweep's rows and the tables :func:`phase_table` and
        :func:`shift_table` make."""
        return cls(Seeds(results), Seeds(phases, key="phase"), Seeds(shifts, key="shift"), params)


def build_data(results: pd.DataFrame, ts: pd.DataFrame, scenario: Mapping[str, Any],
               semantics: str | None = None) -> Data:
    """:class:`Data` from the sweep's rows, their time series and the validated scenario."""
    params = {**scenario_params(scenario), "semantics": semantics or "default"}
    ph = phases_of(scenario)
    return Data.of(results, phase_table(ts, ph, params), shift_table(ts, ph, params), params)


# ---------------------------------------------------------------------------------------------
# helpers of the measure functions


def _stat(values: Sequence[float] | pd.Series) -> tuple[float | None, float | None, int]:
    m, ci, n = mean_ci95(list(values))
    return (None if not math.isfinite(m) else m), (None if not math.isfinite(ci) else ci), n


def _phase_loads(data: Data) -> dict[int, float]:
    """Each phase's load (of capacity), in order: the schedule's, the same in every variant's rows."""
    ph = data.phases
    loads = {}
    for i in ph.points():
        xs = [float(x) for v in sorted(ph.names()) for x in ph.values(v, i, "load")]
        if xs:
            loads[int(i)] = max(xs)
    return loads


def _low_phase(data: Data) -> int:
    """The first phase: the low load the first shift starts from."""
    return int(data.phases.points()[0])


def _high_phases(data: Data) -> list[int]:
    """The phases at the schedule's highest load."""
    loads = _phase_loads(data)
    top = max(loads.values())
    return [i for i, x in loads.items() if np.isclose(x, top)]


def _wakes_per_ms(runs: Seeds, variant: str, alloc_delay_us: float) -> float:
    """Core wake-ups per ms of the run: the cores' transition time over the allocation delay."""
    tr = runs.mean(variant, None, "core_time.transition_ns")
    dur = runs.mean(variant, None, "duration_s")
    return tr / (alloc_delay_us * 1e3) / (dur * 1e3) if dur > 0 and alloc_delay_us > 0 else math.nan


def _regime_served(data: Data, shift: int) -> Condition:
    s = data.shifts
    v = s.mean(BASE, shift, "pre_served")
    return Condition("the baseline's throughput / offered load at the end of the phase before the shift", _r(v),
                     ">=", SERVED_REGIME)


def _variant_figures(data: Data, prefix: str, variant: str) -> dict[str, Any]:
    r, p = data.runs, data.params
    return {
        f"{prefix}_cores": _r(r.mean(variant, None, "cores.allocated_mean"), 2),
        f"{prefix}_busy": _r(r.mean(variant, None, "cores.busy_mean"), 2),
        f"{prefix}_pool": _r(r.mean(variant, None, "credits.pool_mean"), 1),
        f"{prefix}_p99_us": _r(r.mean(variant, None, "latency_us.p99"), 1),
        f"{prefix}_qd99_us": _r(r.mean(variant, None, "queueing_delay_us.p99"), 1),
        f"{prefix}_drop_rate": _r(r.mean(variant, None, "drop_rate"), 3),
        f"{prefix}_aqm_drops": _r(r.mean(variant, None, "credits.aqm_drops"), 0),
        f"{prefix}_client_timeouts": _r(r.mean(variant, None, "credits.client_timeouts"), 0),
        f"{prefix}_wakes_per_ms": _r(_wakes_per_ms(r, variant, p["alloc_delay_us"]), 1),
    }


def _light_phases(data: Data) -> list[int]:
    """The phases whose load is below capacity (the ones any allocator can carry)."""
    return [i for i, x in _phase_loads(data).items() if x < 1.0]


def credit_starvation(data: Data) -> Cause:
    """Why a light phase is not carried, from the run: per light phase and variant, the sessions
    holding no credit (drained), the pool per session and the share served; with the run's
    client timeouts against AQM drops. Breakwater grants a session its pending and queued
    requests plus ``max((pool − issued) / sessions, 1)``, so with a pool below twice the
    session count a session holds at most one spare credit and many hold none; a request that
    finds no spare credit waits at least a round trip for one (the next response or wake-up),
    and when the client timeout is shorter than that the client drops it. The study's
    simulator has one client, whose single window takes the whole pool (``--semantics study``;
    ``study-client`` puts that client and the study's pool on the default server model)."""
    ph, r, p = data.phases, data.runs, data.params
    n = p["sessions"]
    ev: dict[str, Any] = {"sessions": n, "rtt_us": p["rtt_us"], "client_timeout_us": p.get("client_timeout_us")}
    parts, starved = [], False
    lone, needs = [], []
    for i in _light_phases(data):
        # A session holding a single credit has none for a request that follows its previous one
        # within a round trip (Poisson arrivals per session): that share is lost even undrained.
        rate = ph.mean(BASE, i, "offered") * p["capacity_rps"] / n
        ev[f"lone{i}"] = _r(1 - math.exp(-rate * (p["rtt_us"] + p["service_us"]) * 1e-6), 3)
        ev[f"lone{i}_load"] = _r(ph.mean(BASE, i, "load"), 3)
        lone.append(f"{{lone{i}}} at load {{lone{i}_load}}")
        # credits in flight the phase's offered load needs at the bare round trip (Little's law)
        ev[f"need{i}"] = _r(rate * n * (p["rtt_us"] + p["service_us"]) * 1e-6, 0)
        needs.append(f"{{need{i}}} credits at load {{lone{i}_load}}")
    for v, pre in ((BASE, "b"), (FIX, "f")):
        ev[f"{pre}_client_timeouts"] = _r(r.mean(v, None, "credits.client_timeouts"), 0)
        ev[f"{pre}_aqm_drops"] = _r(r.mean(v, None, "credits.aqm_drops"), 0)
        for i in _light_phases(data):
            k = f"{pre}{i}"
            pool, drained = ph.mean(v, i, "pool_mean"), ph.mean(v, i, "drained_mean")
            ev[f"{k}_load"] = _r(ph.mean(v, i, "load"), 3)
            ev[f"{k}_served"] = _r(ph.mean(v, i, "throughput") / ph.mean(v, i, "offered"), 3)
            ev[f"{k}_drained"] = _r(drained, 0)
            ev[f"{k}_pool"] = _r(pool, 0)
            ev[f"{k}_per_session"] = _r(pool / n, 2)
            starved |= pool < 2 * n
            label = {BASE: "baseline", FIX: "fix"}[v]
            parts.append(f"{label} at load {{{k}_load}}: serves {{{k}_served}}, {{{k}_drained}} sessions drained, "
                         f"pool {{{k}_pool}} ({{{k}_per_session}} a session)")
    text = ("Light phases, share of the offered load served, sessions without any credit (of {sessions}) and mean "
            "pool: " + "; ".join(parts) + " (in flight at the bare round trip the offered load needs "
            + ", ".join(needs) + "). ")
    tmo = p.get("client_timeout_us")
    if not (starved and tmo is not None and float(tmo) < p["rtt_us"]):
        return Cause(text + "Client timeouts over the run: baseline {b_client_timeouts} ({b_aqm_drops} AQM drops), "
                     "fix {f_client_timeouts} ({f_aqm_drops} AQM drops)", ev)
    text += ("Breakwater grants a session its pending and queued requests plus an equal share of the unissued "
             "pool, at least one credit, so a pool below twice the session count leaves a session at most one "
             "spare credit and many sessions none; a request that finds no spare credit at its session waits "
             "at least a round trip ({rtt_us} µs) for one, longer than the client timeout ({client_timeout_us} "
             "µs), so the client drops it, even at a session holding one credit when the request follows "
             "the previous one within a round trip (" + ", ".join(lone) + " of the requests at the offered "
             "rate a session): over the run the baseline's clients time out {b_client_timeouts} "
             "requests against {b_aqm_drops} AQM drops, the fix's {f_client_timeouts} against {f_aqm_drops}. "
             "The study's simulator has one client, whose window takes the whole pool: --semantics "
             "study-client runs that client and the study's pool on this server model")
    gate = p.get("drop_gate")
    if isinstance(gate, (int, float)):
        # The gate reads the server's AQM drops, so the load the clients lose cannot open the
        # ramp that would lift the fix's pool past the session count.
        ev["gate"] = gate
        text += (". The fix's ramp waits for a period whose AQM drops reach {gate} of the pool "
                 "(core_fix_drop_gate); the requests its clients time out do not count")
    return Cause(text, ev)


# ---------------------------------------------------------------------------------------------
# claims: measure functions and causes


def measure_gain(data: Data) -> Measured:
    r = data.runs
    b, f = r.values(BASE, None, "throughput_rps"), r.values(FIX, None, "throughput_rps")
    both = pd.concat([b, f], axis=1, join="inner").dropna()
    gains = [fx / bx - 1 for bx, fx in both.itertuples(index=False) if bx > 0]
    m, ci, n = _stat(gains)
    cap = data.params["capacity_rps"]
    ev = {"base_fraction": _r(float(b.mean()) / cap, 3), "fix_fraction": _r(float(f.mean()) / cap, 3),
          "offered_fraction": _r(r.mean(BASE, None, "offered_rps") / cap, 3)}
    extra = {"throughput_mrps": {v: _r(r.mean(v, None, "throughput_rps") / 1e6, 3)
                                 for v in (BASE, FIX, INIT32) if r.has(v)},
             "by_seed": [_r(g) for g in gains], "semantics": data.params["semantics"]}
    return Measured(m, ci, n, evidence=ev, extra=extra)


def cause_gain(data: Data, m: Measured) -> Cause:
    """Where the gain comes from: each phase's throughput against its offered load, per variant,
    and the phase of the largest difference with both variants' cores and pool there."""
    ph = data.phases
    ev: dict[str, Any] = {"measured": m.value, "ci95": m.ci95, "paper": CLAIM_GAIN_PAPER, **m.evidence,
                          **{k: v for k, v in _variant_figures(data, "base", BASE).items()
                             if k.endswith(("aqm_drops", "client_timeouts"))}}
    parts = []
    diffs = {}
    for i in (int(x) for x in ph.points()):
        ev[f"load{i}"] = _r(ph.mean(BASE, i, "load"), 3)
        ev[f"base{i}"] = _r(ph.mean(BASE, i, "throughput"), 3)
        ev[f"fix{i}"] = _r(ph.mean(FIX, i, "throughput"), 3)
        diffs[i] = ph.mean(FIX, i, "throughput") - ph.mean(BASE, i, "throughput")
        parts.append(f"load {{load{i}}}: baseline {{base{i}}}, fix {{fix{i}}}")
    k = max(diffs, key=lambda i: abs(diffs[i]) if math.isfinite(diffs[i]) else -1)
    for v, pre in ((BASE, "b"), (FIX, "f")):
        ev[f"{pre}_cores"] = _r(ph.mean(v, k, "cores_allocated"), 2)
        ev[f"{pre}_pool"] = _r(ph.mean(v, k, "pool_mean"), 0)
        ev[f"{pre}_pool_max"] = _r(ph.mean(v, k, "pool_max"), 0)
        ev[f"{pre}_drops"] = _r(ph.mean(v, k, "drop_fraction"), 3)
    ev["k_load"], ev["k_start"], ev["k_end"] = ev[f"load{k}"], _r(ph.mean(BASE, k, "start_ms")), \
        _r(ph.mean(BASE, k, "end_ms"))
    ev["ceiling"] = _r(data.params.get("pool_ceiling"), 0)
    ev["low_served"] = _r(ph.mean(BASE, _low_phase(data), "throughput")
                          / ph.mean(BASE, _low_phase(data), "offered"), 3)
    text = ("the fix gains {measured} ± {ci95} over the run against the paper's {paper}: it serves {fix_fraction} "
            "of capacity and the baseline {base_fraction} (offered {offered_fraction}). Throughput per phase as a "
            "fraction of capacity: " + "; ".join(parts) + ". The largest difference is in the load-{k_load} phase "
            "({k_start}–{k_end} ms): the baseline has {b_cores} cores allocated, a pool of mean {b_pool} (max "
            "{b_pool_max}) and drops {b_drops} of the arrivals; the fix {f_cores} cores, a pool of mean {f_pool} "
            "(max {f_pool_max}, of a ceiling of {ceiling}) and drops {f_drops}. In the first phase the baseline serves {low_served} of its "
            "offered load (over the run: {base_client_timeouts} client timeouts, {base_aqm_drops} AQM drops)")
    st = credit_starvation(data)
    return Cause(f"{text}. {st.text}", {**ev, **st.evidence})


CLAIM_GAIN_PAPER = 0.07


def measure_ramp(shift: int):
    def measure(data: Data) -> Measured:
        s = data.shifts
        b, f = s.values(BASE, shift, "ramp_ms"), s.values(FIX, shift, "ramp_ms")
        both = pd.concat([b, f], axis=1, join="inner").dropna()
        diffs = [bx - fx for bx, fx in both.itertuples(index=False)]
        m, ci, n = _stat(diffs)
        phase_ms = s.mean(BASE, shift, "phase_ms")
        cens = both[(both.iloc[:, 0] >= phase_ms) & (both.iloc[:, 1] >= phase_ms)]
        ev = {"base_ramp": _r(float(b.mean()), 2), "fix_ramp": _r(float(f.mean()), 2), "phase_ms": _r(phase_ms),
              "shift_ms": _r(s.mean(BASE, shift, "shift_ms")),
              "from_load": _r(s.mean(BASE, shift, "from_load")),
              "to_load": _r(s.mean(BASE, shift, "to_load")), "level": RAMP_LEVEL,
              "both_censored": len(cens), "n": len(both),
              "base_peak": _r(s.mean(BASE, shift, "peak"), 3),
              "fix_peak": _r(s.mean(FIX, shift, "peak"), 3),
              "base_cores": _r(s.mean(BASE, shift, "phase_cores"), 1),
              "fix_cores": _r(s.mean(FIX, shift, "phase_cores"), 1),
              "base_pool": _r(s.mean(BASE, shift, "phase_pool"), 0),
              "fix_pool": _r(s.mean(FIX, shift, "phase_pool"), 0),
              "base_pre_pool": _r(s.mean(BASE, shift, "pre_pool"), 0),
              "base_pre_served": _r(s.mean(BASE, shift, "pre_served"), 3)}
        return Measured(m, ci, n, evidence=ev,
                        extra={"by_variant_ms": {"baseline": ev["base_ramp"], "fix": ev["fix_ramp"]},
                               "by_seed_ms": [_r(d, 2) for d in diffs]})
    return measure


CAUSE_RAMP = (
    "after the load-{from_load} → load-{to_load} shift at {shift_ms} ms the baseline reaches {level} of capacity "
    "after {base_ramp} ms and the fix after {fix_ramp} ms (a variant that never does within the {phase_ms} ms "
    "phase counts the whole phase; neither does in {both_censored} of {n} seeds), a difference of {measured} ± "
    "{ci95} ms. In the phase the baseline peaks at {base_peak} of capacity with {base_cores} cores allocated and "
    "a mean pool of {base_pool} (it starts from a pool of {base_pre_pool}, serving {base_pre_served} of the "
    "offered load before the shift); the fix peaks at {fix_peak} with {fix_cores} cores and a mean pool of "
    "{fix_pool}")


def measure_burst_drops(data: Data) -> Measured:
    s, p = data.shifts, data.params
    vals = s.values(BASE, 1, "burst_drop_fraction")
    m, ci, n = _stat(vals)
    ev = {"window_ms": BURST_MS, "arrivals": _r(s.mean(BASE, 1, "burst_arrivals"), 0),
          "drops": _r(s.mean(BASE, 1, "burst_drops"), 0),
          "pool": _r(s.mean(BASE, 1, "pre_pool"), 0),
          "issued": _r(s.mean(BASE, 1, "burst_issued_mean"), 0),
          "client_queued_max": _r(s.mean(BASE, 1, "burst_client_queued_max"), 0),
          "queue_max": _r(s.mean(BASE, 1, "burst_queue_max"), 0),
          "delay_max": _r(s.mean(BASE, 1, "burst_delay_max"), 1), "drop_us": p["drop_us"],
          "client_timeout_us": p.get("client_timeout_us"),
          "pre_served": _r(s.mean(BASE, 1, "pre_served"), 3),
          "fix_drop_fraction": _r(s.mean(FIX, 1, "burst_drop_fraction"), 3)}
    return Measured(m, ci, n, evidence=ev, regime=[_regime_served(data, 1)],
                    extra={"by_variant": {v: _r(s.mean(v, 1, "burst_drop_fraction"), 3)
                                          for v in (BASE, FIX, INIT32) if s.has(v)}})


CAUSE_BURST_DROPS = (
    "in the first {window_ms} ms after the shift the baseline drops {measured} ± {ci95} of the {arrivals} requests "
    "its clients generate ({drops} dropped, AQM and client timeouts together: the simulator does not export them "
    "apart per sample; a client gives up on a request after {client_timeout_us} µs). Its pool is {pool} credits at the shift and {issued} are issued on average in the window, so "
    "the rest of the burst waits at the clients (up to {client_queued_max} queued there) rather than at the server, "
    "where at most {queue_max} requests queue and the oldest waits at most {delay_max} µs against the AQM's drop "
    "threshold of {drop_us} µs")


def measure_burst_park(data: Data) -> Measured:
    s = data.shifts
    pre, low = s.values(BASE, 1, "pre_cores"), s.values(BASE, 1, "burst_min_cores")
    both = pd.concat([low, pre], axis=1, join="inner").dropna()
    m, ci, n = _stat([a - b for a, b in both.itertuples(index=False)])
    ev = {"pre_cores": _r(float(pre.mean()), 2), "min_cores": _r(float(low.mean()), 2),
          "max_cores": _r(s.mean(BASE, 1, "burst_max_cores"), 2), "window_ms": BURST_MS,
          "bin_us": BIN_MS * 1000, "drop_fraction": _r(s.mean(BASE, 1, "burst_drop_fraction"), 3),
          "delay_max": _r(s.mean(BASE, 1, "burst_delay_max"), 1),
          "busy": _r(s.mean(BASE, 1, "burst_busy"), 2)}
    return Measured(m, ci, n, evidence=ev, regime=[_regime_served(data, 1)])


CAUSE_BURST_PARK = (
    "the baseline's allocation does not fall below its level before the shift: {pre_cores} cores in the last "
    "{bin_us} µs before it, at least {min_cores} in every {bin_us} µs bin of the first {window_ms} ms after it "
    "(up to {max_cores}), {busy} of them busy on average in that window: the drops ({drop_fraction} of the "
    "arrivals) leave work queued at the server (oldest sampled wait {delay_max} µs), so its cores keep finding work")


def measure_latency(data: Data) -> Measured:
    r = data.runs
    b, f = r.values(BASE, None, "latency_us.p99"), r.values(FIX, None, "latency_us.p99")
    both = pd.concat([f, b], axis=1, join="inner").dropna()
    m, ci, n = _stat([fx / bx for fx, bx in both.itertuples(index=False) if bx > 0])
    ev = {**_variant_figures(data, "base", BASE), **_variant_figures(data, "fix", FIX)}
    mean_ratio = r.mean(FIX, None, "latency_us.mean") / r.mean(BASE, None, "latency_us.mean")
    return Measured(m, ci, n, evidence=ev, extra={"mean_latency_ratio": _r(mean_ratio),
                                                  "p99_us": {BASE: ev["base_p99_us"], FIX: ev["fix_p99_us"]}})


CAUSE_LATENCY = (
    "p99 latency of completed requests: fix {fix_p99_us} µs, baseline {base_p99_us} µs (a ratio of {measured} ± "
    "{ci95}); the requests each drops are not in it (drop rate fix {fix_drop_rate}, baseline {base_drop_rate}). "
    "Queueing delay p99: fix {fix_qd99_us} µs on {fix_cores} cores allocated ({fix_busy} busy, {fix_wakes_per_ms} "
    "core wake-ups per ms), baseline {base_qd99_us} µs on {base_cores} cores ({base_busy} busy, "
    "{base_wakes_per_ms} wake-ups per ms); mean pool fix {fix_pool}, baseline {base_pool}")


def measure_low_load_cores(data: Data) -> Measured:
    ph = data.phases
    i = _low_phase(data)
    m, ci, n = _stat(ph.values(BASE, i, "cores_allocated"))
    served = ph.mean(BASE, i, "throughput") / ph.mean(BASE, i, "offered")
    ev = {"load": _r(ph.mean(BASE, i, "load")), "served": _r(served, 3),
          "pool": _r(ph.mean(BASE, i, "pool_mean"), 0), "pool_max": _r(ph.mean(BASE, i, "pool_max"), 0),
          "busy": _r(ph.mean(BASE, i, "cores_busy"), 2),
          "drop_fraction": _r(ph.mean(BASE, i, "drop_fraction"), 3),
          "needed": _r(ph.mean(BASE, i, "offered") * data.params["max_cores"], 2)}
    return Measured(m, ci, n, evidence=ev)


CAUSE_LOW_LOAD = (
    "in the load-{load} phase the baseline keeps {measured} ± {ci95} cores allocated ({busy} busy) where the "
    "offered load needs {needed} cores of work: it serves {served} of the offered load, drops {drop_fraction} of "
    "the arrivals, with a pool of mean {pool} credits (max {pool_max})")


def cause_low_load(data: Data, m: Measured) -> Cause:
    """Few cores because little load is admitted: :data:`CAUSE_LOW_LOAD`, then why
    (:func:`credit_starvation`)."""
    spec = next(s for s in CLAIMS if s.id == "low-load-cores")
    lo, hi = spec.tol.band(spec.paper)
    # the evidence a template cause gets from the verdict (claims.py _cause), then the reason's
    ev = {"measured": m.value, "ci95": m.ci95, "paper": spec.paper, "band_lo": lo, "band_hi": hi, **m.evidence}
    st = credit_starvation(data)
    return Cause(f"{CAUSE_LOW_LOAD}. {st.text}", {**ev, **st.evidence})


def measure_pool_tracks(data: Data) -> Measured:
    ph, p = data.phases, data.params
    i = _low_phase(data)
    pool, cores = ph.values(BASE, i, "tail_pool"), ph.values(BASE, i, "tail_cores")
    both = pd.concat([pool, cores], axis=1, join="inner").dropna()
    m, ci, n = _stat([a / (c * p["credits_per_core"]) for a, c in both.itertuples(index=False) if c > 0])
    ev = {"tail_ms": TAIL_MS, "load": _r(ph.mean(BASE, i, "load")), "pool": _r(float(pool.mean()), 0),
          "cores": _r(float(cores.mean()), 2), "need": _r(float(cores.mean()) * p["credits_per_core"], 0),
          "full_need": _r(p["max_cores"] * p["credits_per_core"], 0), "max_cores": p["max_cores"],
          "rtt_us": p["rtt_us"], "service_us": _r(p["service_us"], 3),
          "served": _r(ph.mean(BASE, i, "tail_throughput") / ph.mean(BASE, i, "tail_offered"), 3)}
    return Measured(m, ci, n, evidence=ev)


CAUSE_POOL_TRACKS = (
    "over the last {tail_ms} ms of the load-{load} phase the baseline's pool averages {pool} credits with {cores} "
    "cores allocated, which need {need} credits to stay busy (one request in flight per round trip of {rtt_us} µs "
    "plus {service_us} µs of service); all {max_cores} cores would need {full_need}. The baseline serves {served} of "
    "the offered load there")


def measure_high_load_cores(data: Data) -> Measured:
    ph, r, p = data.phases, data.runs, data.params
    idx = _high_phases(data)

    def over(metric: str) -> float:  # the mean over seeds of each seed's mean over the high phases
        return float(ph.over(FIX, idx, metric).mean())

    m, ci, n = _stat(ph.over(FIX, idx, "cores_allocated"))
    ev = {"load": _r(max(_phase_loads(data)[i] for i in idx)), "busy": _r(over("cores_busy"), 2),
          "served": _r(over("throughput") / over("offered"), 3),
          "throughput": _r(over("throughput"), 3),
          "pool": _r(over("pool_mean"), 0), "pool_max": _r(over("pool_max"), 0),
          "issued": _r(over("issued_mean"), 0), "drop_fraction": _r(over("drop_fraction"), 3),
          "wakes_per_ms": _r(_wakes_per_ms(r, FIX, p["alloc_delay_us"]), 1), "max_cores": p["max_cores"],
          "gate": str(p.get("drop_gate")), "search": str(p.get("search"))}
    return Measured(m, ci, n, evidence=ev)


CAUSE_HIGH_LOAD = (
    "in the load-{load} phases the fix keeps {measured} ± {ci95} of {max_cores} cores allocated ({busy} busy, "
    "{wakes_per_ms} core wake-ups per ms over the run), serving {throughput} of capacity "
    "({served} of the offered load) and dropping {drop_fraction} of the arrivals; its pool averages {pool} credits "
    "(max {pool_max}), {issued} issued. Work search {search}, fix ramp drop gate {gate}")


_QUOTE_SLOW = "the credit pool takes time to reach the level needed to achieve high throughput after the change in load"

CLAIMS: list[ClaimSpec] = [
    ClaimSpec(
        id="fix-throughput-improvement", kind=GAIN, paper=CLAIM_GAIN_PAPER, paper_ref="§3", unit="",
        claim="The fix improves overall throughput over the load-shift run by 7 %",
        quote="The solution yields a 7% improvement in overall throughput",
        how="throughput(fix) / throughput(baseline) − 1 over the whole run, per seed (common random numbers), "
            "mean over seeds", measure=measure_gain, cause=cause_gain, group="Fig. 1"),
    ClaimSpec(
        id="baseline-slow-ramp", kind=ORDER, side="above", paper_ref="Fig. 1 (top), §2", unit="ms",
        claim="After the 0.2 → 1.2 shift the baseline's throughput ramps up slowly; the fix's much faster",
        quote=_QUOTE_SLOW,
        how=f"per seed: the baseline's time to reach {RAMP_LEVEL:.0%} of capacity in 100 µs bins after the first "
            "shift minus the fix's (a variant that never does counts the whole phase), mean over seeds; "
            "reproduced if the interval lies above 0",
        measure=measure_ramp(1), cause=CAUSE_RAMP, group="Fig. 1"),
    ClaimSpec(
        id="baseline-slow-ramp@second-shift", kind=ORDER, side="above", paper_ref="Fig. 1 (top), §2", unit="ms",
        claim="After the 0.5 → 1.2 shift the baseline's throughput ramps up slowly too; the fix's much faster",
        quote=_QUOTE_SLOW,
        how=f"as baseline-slow-ramp, after the second rise of the load: the baseline's time to {RAMP_LEVEL:.0%} of "
            "capacity minus the fix's, mean over seeds; reproduced if the interval lies above 0",
        measure=measure_ramp(2), cause=CAUSE_RAMP, group="Fig. 1"),
    ClaimSpec(
        id="low-load-cores", kind=VALUE, paper=7, paper_ref="§2", unit="cores",
        claim="At load 0.2 the core allocator keeps about 7 of the 32 cores",
        quote="from 0.2, requiring only 7 cores ... even though the system has 32 cores, only 7 are active",
        how="the baseline's mean allocated cores over the first (load 0.2) phase, mean over seeds",
        measure=measure_low_load_cores, cause=cause_low_load, group="Fig. 1"),
    ClaimSpec(
        id="pool-tracks-allocated-cores", kind=RATIO, paper=1.0, paper_ref="§2", unit="×",
        claim="At low load the overload controller shrinks its credit pool to the allocated capacity (7 cores), "
              "not the total (32 cores)",
        quote="reduce its credit pool size to a level corresponding to the allocated capacity, not the total "
              "available capacity (i.e., the 7 cores not the 32 cores)",
        how=f"the baseline's mean pool over the last {TAIL_MS:g} ms of the first phase / (its mean allocated cores "
            "there × (RTT + mean service) / mean service: the credits that keep those cores busy), per seed, mean "
            "over seeds; 1 = the pool corresponds to the allocated cores",
        measure=measure_pool_tracks, cause=CAUSE_POOL_TRACKS, group="Fig. 1"),
    ClaimSpec(
        id="high-load-all-cores", kind=VALUE, paper=32, paper_ref="§2", unit="cores",
        claim="Load 1.2 requires all 32 cores (the fix, which ramps up, allocates them)",
        quote="to 1.2 requiring all 32 cores",
        how="the fix's mean allocated cores over the load-1.2 phases, mean over seeds",
        measure=measure_high_load_cores, cause=CAUSE_HIGH_LOAD, group="Fig. 1"),
    ClaimSpec(
        id="burst-dropped-cores-park", kind=BOUND, side="lower", paper=0.5, paper_ref="Fig. 1 (bottom), §2",
        unit="of arrivals",
        claim="Much of the burst after the 0.2 → 1.2 shift is dropped (read: at least half)",
        quote="Much of the burst gets dropped",
        how=f"the baseline's drops / arrivals in the first {BURST_MS:g} ms after the first shift (drops = AQM + "
            "client timeouts, the time series does not split them), mean over seeds; bound: at least half; "
            f"regime: the baseline serves ≥ {SERVED_REGIME:g} of its offered load before the shift",
        measure=measure_burst_drops, cause=CAUSE_BURST_DROPS, group="Fig. 1"),
    ClaimSpec(
        id="burst-cores-park", kind=ORDER, side="below", paper_ref="Fig. 1 (bottom), §2", unit="cores",
        claim="After the burst the baseline's cores park: its allocation falls although the load rose to 1.2",
        quote="cores don't find work and park, reducing capacity when load increases",
        how=f"per seed: the least allocated cores in a 100 µs bin of the first {BURST_MS:g} ms after the first "
            "shift minus the mean over the 100 µs before it (baseline), mean over seeds; reproduced if the "
            f"interval lies below 0; regime: the baseline serves ≥ {SERVED_REGIME:g} of its offered load before "
            "the shift",
        measure=measure_burst_park, cause=CAUSE_BURST_PARK, group="Fig. 1"),
    ClaimSpec(
        id="similar-latency", kind=RATIO, paper=1.0, paper_ref="§3", unit="×",
        claim="The fix keeps latency at levels similar to the baseline's",
        quote="while maintaining similar latency levels to the baseline",
        how="p99 end-to-end latency of completed requests, fix / baseline, per seed, mean over seeds; "
            "\"similar\" = a ratio of 1 within the default tolerance",
        measure=measure_latency, cause=CAUSE_LATENCY, group="Fig. 1"),
]


# ---------------------------------------------------------------------------------------------
# the reproduction


# No model costs for --sensitivity: the study is itself a simulation, so its allocation delay
# (5 µs), its simulator's work search (100 ns a probe) and its service times are the paper's own
# parameters, not costs measured on or fitted to a testbed: halving one would change the
# experiment, not test a cost the verdicts rest on. No network stack cost is charged (the study
# has none).
# The study's abstract states its question, not a result; its central claim is §2–3's.
THESIS = Thesis(
    statement="Overload control and dynamic core allocation interfere at microsecond timescales: at low load "
              "Breakwater shrinks its credit pool to the few cores allocated, so after a load shift too little is "
              "admitted for the allocator to add cores and throughput ramps up slowly; growing the pool with the "
              "allocated cores (the study's fix) improves throughput (by 7 %)",
    source="abstract (the question), §2–3 (the finding)",
    claims=("pool-tracks-allocated-cores", "baseline-slow-ramp", "fix-throughput-improvement"))

FIGURES = (
    Figure("loadshift_phases.png", "Throughput per load phase as a fraction of capacity, per policy (mean over "
           "seeds, bars: 95 % CI): the study's Fig. 1 comparison"),
    Figure("loadshift_timeseries.png", "A whole run over time (100 µs bins, one seed): throughput, credit pool, LC "
           "cores allocated and queued tasks, the load shifts marked in red"),
    Figure("loadshift_closeup.png", "Close-up of one load shift (every sample, one seed): queue, cores, drops and "
           "credit pool in the microseconds after the shift"),
)


@register("load-shift", paper="Core allocation vs overload control (simulation study)", figure="Fig. 1",
          description="Breakwater + Caladan-style allocation, 32 cores, bimodal 1 µs, RTT 30 µs, load "
                      "0.2→1.2→0.5→1.2 every 25 ms: baseline vs the study's core fix",
          spec="load-shift/sweep.toml", claims=CLAIMS, thesis=THESIS,
          # The study is a simulation and its simulator its artifact: its semantics are the
          # default; this project's own client and server model is --semantics ours.
          default_semantics="study",
          figures=FIGURES,
          # its time series are of the sweep's own points (run_timeseries, no extra overrides)
          sweep_series=TS_COLS)
def analyze(ctx: Context):
    from ..api import validate

    ctx.require_variants(BASE, FIX)
    points = ctx.spec.points()
    ts = run_timeseries(ctx, points)
    ts.to_parquet(ctx.out / "timeseries.parquet", index=False)
    fix_point = next(p for p in points if p.params.get("variant") == FIX)
    scenario = validate(fix_point.scenario, list(fix_point.overrides))
    data = build_data(ctx.results, ts, scenario, ctx.semantics)
    data.phases.df.to_parquet(ctx.out / "phases.parquet", index=False)
    data.shifts.df.to_parquet(ctx.out / "shifts.parquet", index=False)
    plot_timeseries(ctx, ts)
    plot_closeup(ctx, ts, shift_ms=float(data.shifts.df["shift_ms"].min()))
    plot_phases(ctx, data.phases)
    return judge_all(CLAIMS, data)


# ---------------------------------------------------------------------------------------------
# figures


def _seed1(ts: pd.DataFrame, variant: str) -> pd.DataFrame:
    sel = ts[ts["variant"] == variant]
    return sel[sel["seed"] == sel["seed"].min()]


def plot_timeseries(ctx: Context, ts: pd.DataFrame) -> None:
    plt = setup_plt()
    fig, axes = plt.subplots(4, 1, figsize=(12, 11), sharex=True, constrained_layout=True)
    for v in (BASE, FIX):
        b = binned(_seed1(ts, v), BIN_MS)
        kw = dict(color=COLORS[v], lw=1, label=ctx.spec.label(v))
        axes[0].plot(b["t_ms"], b["throughput_rps"] / 1e6, **kw)
        axes[1].plot(b["t_ms"], b["credit_pool"], **kw)
        axes[2].plot(b["t_ms"], b["cores_allocated"], **kw)
        axes[3].plot(b["t_ms"], b["queue_len"], **kw)
    b = binned(_seed1(ts, BASE), BIN_MS)
    axes[0].plot(b["t_ms"], b["offered_rps"] / 1e6, color="gray", ls="--", lw=1, label="offered")
    axes[0].set_ylabel("throughput (M req/s)")
    axes[1].set_ylabel("credit pool C_total")
    axes[1].set_yscale("log")
    axes[2].set_ylabel("LC cores allocated")
    axes[2].set_ylim(bottom=0)
    axes[3].set_ylabel("tasks queued at the server")
    axes[3].set_xlabel("time (ms)")
    shifts = sorted(set(np.round(b.loc[b["offered_rps"].diff().fillna(0) != 0, "t_ms"] - BIN_MS, 6)))
    for ax in axes:
        for s in shifts:
            ax.axvline(s, color="red", lw=0.6, alpha=0.5)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8, loc="upper left")
    fig.suptitle("Load shifts (red lines), Breakwater + Caladan-style allocation; 100 µs bins, seed "
                 f"{int(ts['seed'].min())}", fontsize=9)
    ctx.save_figure(fig, "loadshift_timeseries.png")


def plot_closeup(ctx: Context, ts: pd.DataFrame, shift_ms: float = 25.0, before_us: float = 100,
                 after_us: float = 600) -> None:
    plt = setup_plt()
    lo, hi = shift_ms - before_us / 1000, shift_ms + after_us / 1000
    fig, axes = plt.subplots(4, 1, figsize=(12, 10), sharex=True, constrained_layout=True)
    for v in (BASE, FIX):
        s = _seed1(ts, v)
        s = s[(s["t_ms"] >= lo) & (s["t_ms"] <= hi)]
        t = (s["t_ms"] - shift_ms) * 1000
        kw = dict(color=COLORS[v], lw=1, label=ctx.spec.label(v), where="post")
        axes[0].step(t, s["queue_len"], **kw)
        axes[1].step(t, s["cores_allocated"], **kw)
        axes[2].step(t, s["drops"], **kw)
        axes[3].step(t, s["credit_pool"], **kw)
    axes[0].set_ylabel("tasks queued\nat the server")
    axes[1].set_ylabel("LC cores allocated")
    axes[1].set_ylim(bottom=0)
    axes[2].set_ylabel("drops per sample\n(AQM + client)")
    axes[3].set_ylabel("credit pool")
    axes[3].set_yscale("log")
    axes[3].set_xlabel(f"time since the load shift at {shift_ms:g} ms (µs)")
    for ax in axes:
        ax.axvline(0, color="red", lw=1)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8, loc="upper right")
    interval = float(ts["t_ms"].diff().dropna().median() * 1000)
    fig.suptitle(f"Close-up of the load shift at {shift_ms:g} ms (samples every {interval:g} µs, seed "
                 f"{int(ts['seed'].min())})", fontsize=9)
    ctx.save_figure(fig, "loadshift_closeup.png")


def plot_phases(ctx: Context, phases: Seeds) -> None:
    plt = setup_plt()
    fig, ax = plt.subplots(figsize=(9, 4.5), constrained_layout=True)
    idx = [int(x) for x in phases.points()]
    variants = [v for v in (BASE, FIX, INIT32) if phases.has(v)]
    width = 0.8 / (len(variants) + 1)
    for j, v in enumerate(variants):
        ms, cis = [], []
        for i in idx:
            m, ci, _ = mean_ci95(phases.values(v, i, "throughput"))
            ms.append(m)
            cis.append(ci if math.isfinite(ci) else 0)
        ax.bar(np.arange(len(idx)) + j * width, ms, width, yerr=cis, capsize=3, color=COLORS[v],
               label=ctx.spec.label(v))
    off = [phases.mean(BASE, i, "offered") for i in idx]
    ax.bar(np.arange(len(idx)) + len(variants) * width, off, width, color="lightgray", label="offered")
    loads = [phases.mean(BASE, i, "load") for i in idx]
    ax.set_xticks(np.arange(len(idx)) + width * len(variants) / 2)
    ax.set_xticklabels([f"phase {i}\nload {l:g}" for i, l in zip(idx, loads)])
    ax.set_ylabel("throughput (fraction of capacity)")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    fig.suptitle(f"Throughput per phase, mean of {len(phases.seeds)} seed(s), bars: 95 % CI", fontsize=9)
    ctx.save_figure(fig, "loadshift_phases.png")
