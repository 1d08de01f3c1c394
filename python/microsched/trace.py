"""Timelines of a run (``--trace``): read a trace back and draw it.

``microsched run|real|serve --trace FILE`` writes Chrome trace-event JSON (Perfetto opens it:
https://ui.perfetto.dev). The simulator and the runtime write the same layout: one process per
server node (``node N``), in it a thread per core (``core K``), the ``dispatcher`` when there is
one and ``requests L`` lanes of request slices; counters (``cores allocated``, ``queue length``,
``oldest queueing delay (us)``, ``credit pool``, ``credits issued``, ...) and instants (``park``
with its ``reason``, ``park vetoed``, ``credit cut``, ``drop``, ``preemption``, ``steal``,
``wake``). :func:`read_trace` loads one as pandas frames; :func:`render_timeline` draws one as a
Gantt chart of its cores with its counters below, :func:`render_timelines` several one above
the other (the same window), e.g. CoreSync and Shenango at one load.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

#: The trace's size cap when none is given (`--trace-max-events`); the engines' default too.
DEFAULT_MAX_EVENTS = 500_000
#: How much of the measured window a trace records when no window is given.
DEFAULT_WINDOW_MS = 20.0

# What a core does, by slice name (the first word, or the whole name): its colour.
ACTIVITY_COLOURS = {
    "request": "#1f77b4",
    "busy": "#6baed6",
    "waiting on lock": "#9467bd",
    "preempting": "#d62728",
    "searching": "#d9d9d9",
    "stealing": "#ffbf00",
    "waking": "#ff7f0e",
    "parked": "#ffffff",
    "dispatching": "#2ca02c",
    "bookkeeping": "#98df8a",
}
ACTIVITY_LABELS = {
    "request": "running a request",
    "busy": "busy (no client request)",
    "waiting on lock": "waiting on a lock",
    "preempting": "preempting",
    "searching": "searching (polling)",
    "stealing": "stealing",
    "waking": "waking",
    "parked": "parked (best-effort)",
    "dispatching": "dispatching",
    "bookkeeping": "dispatcher bookkeeping",
}


def parse_window(text: str) -> tuple[float, float]:
    """``START_MS:END_MS`` (argparse type of ``--trace-window``)."""
    try:
        return check_window(_split(text))
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _split(text: str) -> tuple[float, float]:
    a, sep, b = text.partition(":")
    try:
        if not sep:
            raise ValueError
        return float(a), float(b)
    except ValueError:
        raise ValueError(f"--trace-window: {text!r} is not START_MS:END_MS with 0 <= START_MS < END_MS "
                         "(e.g. 0:20)") from None


def check_window(window: Sequence[float]) -> tuple[float, float]:
    """A window ``(start_ms, end_ms)`` with ``0 <= start < end``, both finite; else ValueError."""
    try:
        a, b = (float(window[0]), float(window[1]))
        if len(window) != 2:
            raise ValueError
    except (TypeError, ValueError, IndexError):
        raise ValueError(f"--trace-window: {window!r} is not (START_MS, END_MS)") from None
    if not (math.isfinite(a) and math.isfinite(b) and 0 <= a < b):
        raise ValueError(f"--trace-window: {a:g}:{b:g} is not START_MS:END_MS with 0 <= START_MS < END_MS "
                         "(e.g. 0:20)")
    return a, b


@dataclass
class Timeline:
    """A trace read back. Times are in µs since the run's start (the trace's own unit).

    Attributes:
        meta: ``metadata.microsched`` (source, scenario, window_ms, events, truncated, ...).
        threads: one row per track: ``node``, ``tid``, ``name`` (``core K``, ``dispatcher``,
            ``requests L``).
        slices: ``node``, ``tid``, ``track``, ``name``, ``activity`` (the name without the
            request id), ``request`` (id or NaN), ``start_us``, ``dur_us``, ``cat``.
        counters: ``node``, ``name``, ``t_us``, ``value``.
        instants: ``node``, ``tid`` (NaN: node-wide), ``name``, ``t_us`` and the argument
            (``reason``, ``credits``, ``request``...) in ``arg``.
    """

    meta: dict
    threads: Any
    slices: Any
    counters: Any
    instants: Any

    def core_tracks(self, node: int = 0) -> list[str]:
        t = self.threads
        names = t[(t["node"] == node) & t["name"].str.startswith("core ")]
        return list(names.sort_values("tid")["name"])


def read_trace(path: str | os.PathLike) -> Timeline:
    """Loads a trace written by ``--trace`` (ValueError if it is not one)."""
    import pandas as pd

    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
        events = doc["traceEvents"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{p}: not a trace-event JSON file written by --trace ({e})") from None
    meta = (doc.get("metadata") or {}).get("microsched") or {}
    threads, slices, counters, instants = [], [], [], []
    for e in events:
        ph = e.get("ph")
        node = int(e.get("pid", 1)) - 1
        if ph == "M" and e.get("name") == "thread_name":
            threads.append({"node": node, "tid": e["tid"], "name": e["args"]["name"]})
        elif ph == "X":
            name = e["name"]
            req = (e.get("args") or {}).get("request")
            activity = name.rsplit(" ", 1)[0] if req is not None else name
            slices.append({"node": node, "tid": e["tid"], "name": name, "activity": activity,
                           "request": float("nan") if req is None else float(req),
                           "start_us": float(e["ts"]), "dur_us": float(e["dur"]), "cat": e.get("cat", "")})
        elif ph == "C":
            counters.append({"node": node, "name": e["name"], "t_us": float(e["ts"]),
                             "value": float(e["args"]["value"])})
        elif ph == "i":
            args = e.get("args") or {}
            arg = next(iter(args.values()), None)
            instants.append({"node": node, "tid": e["tid"] if e.get("s") == "t" else float("nan"),
                             "name": e["name"], "t_us": float(e["ts"]), "arg": arg})
    threads_df = pd.DataFrame(threads, columns=["node", "tid", "name"])
    slices_df = pd.DataFrame(slices, columns=["node", "tid", "name", "activity", "request", "start_us", "dur_us", "cat"])
    names = {(r.node, r.tid): r.name for r in threads_df.itertuples()}
    slices_df["track"] = [names.get((n, t), f"tid {t}") for n, t in zip(slices_df["node"], slices_df["tid"])]
    return Timeline(meta=meta, threads=threads_df, slices=slices_df,
                    counters=pd.DataFrame(counters, columns=["node", "name", "t_us", "value"]),
                    instants=pd.DataFrame(instants, columns=["node", "tid", "name", "t_us", "arg"]))


def render_timeline(trace_path: str | os.PathLike, png_path: str | os.PathLike,
                    window: tuple[float, float] | None = None, *, title: str | None = None,
                    node: int = 0) -> Path:
    """Draws a trace's cores as a Gantt chart (one row per core, the dispatcher on top,
    coloured by activity, parks and credit cuts marked) with its counters below (cores
    allocated and queue length; credit pool and issued credits when the run has them), and
    writes it to ``png_path``. ``window`` = ``(start_ms, end_ms)`` narrows what is drawn
    (default: the whole trace)."""
    return render_timelines([(trace_path, title)], png_path, window=window, node=node)


def render_timelines(traces: Iterable[tuple[str | os.PathLike, str | None]], png_path: str | os.PathLike,
                     window: tuple[float, float] | None = None, *, node: int = 0,
                     suptitle: str | None = None) -> Path:
    """Several traces one above the other on one time axis (each: its cores, then its
    counters), e.g. two policies at one load: ``traces`` = ``[(path, label), ...]``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    loaded = [(read_trace(p), label) for p, label in traces]
    if not loaded:
        raise ValueError("render_timelines: no trace given")
    if window is not None:
        window = check_window(window)
    heights: list[float] = []
    for tl, _ in loaded:
        rows = len(tl.core_tracks(node)) + int(_has_dispatcher(tl, node))
        heights += [max(1.6, 0.22 * rows), 1.3]
    fig, axes = plt.subplots(len(heights), 1, figsize=(12, sum(heights) + 1.2), sharex=True,
                             gridspec_kw={"height_ratios": heights})
    used: set[str] = set()
    for i, (tl, label) in enumerate(loaded):
        lo, hi = _window_us(tl, window)
        used |= _draw_cores(axes[2 * i], tl, node, lo, hi, label)
        _draw_counters(axes[2 * i + 1], tl, node, lo, hi)
    axes[-1].set_xlabel("time since the run's start (ms)")
    handles = [Patch(facecolor=ACTIVITY_COLOURS[a], edgecolor="#888888", label=ACTIVITY_LABELS[a])
               for a in ACTIVITY_COLOURS if a in used]
    from matplotlib.lines import Line2D

    handles += [Line2D([], [], marker="v", linestyle="", color="black", label="park"),
                Line2D([], [], marker="x", linestyle="", color="#d62728", label="credit cut")]
    # Title, then the legend, above the panels (in inches from the top, whatever the height).
    height = fig.get_size_inches()[1]
    top = 1.0
    if suptitle:
        fig.suptitle(suptitle, y=1 - 0.08 / height, fontsize=10, va="top")
        top -= 0.3 / height
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, top - 0.02 / height),
               ncol=len(handles), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, top - 0.35 / height))
    out = Path(png_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def _has_dispatcher(tl: Timeline, node: int) -> bool:
    t = tl.threads
    return bool(((t["node"] == node) & (t["name"] == "dispatcher")).any())


def _window_us(tl: Timeline, window: tuple[float, float] | None) -> tuple[float, float]:
    if window is not None:
        return window[0] * 1e3, window[1] * 1e3
    w = tl.meta.get("window_ms")
    if w:
        return float(w[0]) * 1e3, float(w[1]) * 1e3
    s = tl.slices
    return float(s["start_us"].min()), float((s["start_us"] + s["dur_us"]).max())


def _draw_cores(ax: Any, tl: Timeline, node: int, lo: float, hi: float, label: str | None) -> set[str]:
    """One row per core track (dispatcher on top): broken bars coloured by activity."""
    rows = (["dispatcher"] if _has_dispatcher(tl, node) else []) + tl.core_tracks(node)
    y = {name: len(rows) - 1 - i for i, name in enumerate(rows)}
    s = tl.slices
    s = s[(s["node"] == node) & (s["cat"] != "request") & s["track"].isin(y)]
    s = s[(s["start_us"] + s["dur_us"] > lo) & (s["start_us"] < hi)]
    used: set[str] = set()
    for (track, activity), g in s.groupby(["track", "activity"]):
        colour = ACTIVITY_COLOURS.get(activity, "#7f7f7f")
        if activity != "parked":
            used.add(activity)
        spans = list(zip(g["start_us"] / 1e3, g["dur_us"] / 1e3))
        ax.broken_barh(spans, (y[track] - 0.4, 0.8), facecolors=colour, edgecolor="none")
    used.add("parked")
    inst = tl.instants
    inst = inst[(inst["node"] == node) & (inst["t_us"] >= lo) & (inst["t_us"] < hi)]
    tid_row = {r.tid: y[r.name] for r in tl.threads[tl.threads["node"] == node].itertuples() if r.name in y}
    for name, marker, colour in (("park", "v", "black"), ("credit cut", "x", "#d62728")):
        g = inst[inst["name"] == name]
        rows_of = [tid_row.get(t, len(rows) - 0.5) for t in g["tid"]]
        ax.scatter(g["t_us"] / 1e3, [r + 0.45 for r in rows_of], marker=marker, s=14, color=colour, zorder=3,
                   linewidths=0.8)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(list(reversed(rows)), fontsize=6)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_xlim(lo / 1e3, hi / 1e3)
    ax.set_facecolor("#f7f7f7")
    meta = tl.meta
    head = label or f"{meta.get('scenario', '')} ({meta.get('allocator', meta.get('source', ''))})"
    trunc = meta.get("truncated")
    if trunc:
        head += f" — trace cut at {trunc.get('at_ms', float('nan')):.3f} ms by its size cap"
    ax.set_title(head, fontsize=9, loc="left")
    return used


def _draw_counters(ax: Any, tl: Timeline, node: int, lo: float, hi: float) -> None:
    """Cores allocated and queue length as steps; credit pool and issued on a second axis."""
    c = tl.counters
    c = c[c["node"] == node]

    def steps(name: str) -> tuple[list[float], list[float]]:
        g = c[c["name"] == name].sort_values("t_us")
        xs = list(g["t_us"] / 1e3)
        vs = list(g["value"])
        if xs:
            xs.append(hi / 1e3)
            vs.append(vs[-1])
        return xs, vs

    for name, colour in (("cores allocated", "#1f77b4"), ("queue length", "#ff7f0e")):
        xs, vs = steps(name)
        if xs:
            ax.step(xs, vs, where="post", color=colour, lw=0.9, label=name)
    ax.set_ylabel("cores / requests", fontsize=7)
    ax.tick_params(labelsize=7)
    ax.set_xlim(lo / 1e3, hi / 1e3)
    credit = [(n, col) for n, col in (("credit pool", "#2ca02c"), ("credits issued", "#9467bd")) if (c["name"] == n).any()]
    lines, labels = ax.get_legend_handles_labels()
    if credit:
        ax2 = ax.twinx()
        for name, colour in credit:
            xs, vs = steps(name)
            ax2.step(xs, vs, where="post", color=colour, lw=0.9, ls="--", label=name)
        ax2.set_ylabel("credits", fontsize=7)
        ax2.tick_params(labelsize=7)
        l2, lab2 = ax2.get_legend_handles_labels()
        lines, labels = lines + l2, labels + lab2
    if lines:
        ax.legend(lines, labels, fontsize=6, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=4, frameon=False,
                  borderaxespad=0.1)
