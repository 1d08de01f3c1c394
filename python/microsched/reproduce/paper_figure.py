"""The figure that draws a paper's own numbers beside ours: one row per claim with a number, the
measured value (mean over seeds, 95 % CI bar) divided by the paper's number, so every claim of a
reproduction, whatever its unit, sits on one axis where 1 is the paper. The claim's tolerance
band is shaded around 1 and the measured point is coloured by its verdict.

Every reproduction writes it (``claims_vs_paper.png``, first in its figure list); the report
draws it from ``claims.json`` for runs made before it existed.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

FILENAME = "claims_vs_paper.png"
CAPTION = ("The paper's numbers beside ours: each claim with a number, our measurement (mean over seeds, bar: "
           "95 % CI) divided by the paper's number, so 1 (◆) is the paper; shaded: the claim's tolerance band; "
           "colour: the verdict; ★: a claim the paper's thesis rests on")

# Where the axis is cut: a measurement more than 4× the paper's (or of the opposite sign) is drawn
# at the edge with an arrow, so one outlier does not squeeze every other row against 1.
X_MIN, X_MAX = -1.0, 4.0

VERDICT_COLOURS = {"reproduced": "#1e8a3c", "direction": "#d49a00", "not_reproduced": "#c62828",
                   "out_of_regime": "#8e44ad"}
VERDICT_LABELS = {"reproduced": "reproduced", "direction": "direction only", "not_reproduced": "not reproduced",
                  "out_of_regime": "out of regime (not judged)"}


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def numeric_claims(claims: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The paper's claims with a nonzero number and a measurement (model checks and claims with
    no number, an order or a rise, have nothing to divide by)."""
    out = []
    for c in claims:
        paper, measured = _num(c.get("paper")), _num(c.get("measured"))
        if c.get("verdict") in VERDICT_COLOURS and paper not in (None, 0.0) and measured is not None:
            out.append(c)
    return out


def draw(claims: Sequence[Mapping[str, Any]], title: str, highlight: Sequence[str] = ()) -> Any:
    """The figure (matplotlib), or None when no claim has a number to draw."""
    import matplotlib

    matplotlib.use("Agg")  # headless: reproductions and reports run without a display
    import matplotlib.pyplot as plt

    rows = numeric_claims(claims)
    if not rows:
        return None
    starred = set(highlight)
    rows = sorted(rows, key=lambda c: (c.get("id") not in starred,))  # the thesis's claims first, else in order
    height = 0.28 * len(rows) + 1.9
    fig, ax = plt.subplots(figsize=(11, height))
    for i, c in enumerate(rows):
        paper, measured = float(c["paper"]), float(c["measured"])
        ci = _num(c.get("ci95")) or 0.0
        band = c.get("band")
        if isinstance(band, (list, tuple)) and len(band) == 2 and None not in band:
            lo, hi = sorted((float(band[0]) / paper, float(band[1]) / paper))
            ax.fill_between([max(lo, X_MIN), min(hi, X_MAX)], i - 0.4, i + 0.4, color="#dfe7f3", lw=0)
        x = measured / paper
        xl, xh = sorted(((measured - ci) / paper, (measured + ci) / paper))
        colour = VERDICT_COLOURS[c["verdict"]]
        clipped = x < X_MIN or x > X_MAX
        xc = min(max(x, X_MIN), X_MAX)
        ax.plot([max(xl, X_MIN), min(xh, X_MAX)], [i, i], color=colour, lw=1.6)
        ax.plot([xc], [i], marker=("<" if x < X_MIN else ">") if clipped else "o", color=colour, ms=6)
        ax.plot([1.0], [i], marker="D", color="black", ms=4)
        unit = f" {c['unit']}" if c.get("unit") else ""
        bound = {"upper": "≤ ", "lower": "≥ "}.get(str(c.get("side")), "") if c.get("kind") in ("bound", "check") else ""
        ax.text(1.01, i, f"paper {bound}{_short(paper)}{unit}, ours {_short(measured)} ± {_short(ci)}",
                va="center", fontsize=7, color="#333", transform=ax.get_yaxis_transform())
    ax.axvline(1.0, color="black", lw=0.6, ls=":")
    ax.axvline(0.0, color="#999", lw=0.5)
    ax.set_yticks(range(len(rows)), [("★ " if c.get("id") in starred else "") + str(c.get("id")) for c in rows],
                  fontsize=7)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(X_MIN - 0.1, X_MAX + 0.1)
    ax.set_xlabel("ours ÷ the paper's number (1: the paper; 0: no value; ◆ the paper)")
    ax.grid(axis="x", alpha=0.3)
    handles = [plt.Line2D([], [], marker="o", ls="", color=col, label=VERDICT_LABELS[v])
               for v, col in VERDICT_COLOURS.items() if any(c["verdict"] == v for c in rows)]
    # Title, then the legend, above the axes, each on its own line.
    fig.suptitle(title, fontsize=10, y=1 - 0.12 / height, va="top")
    fig.legend(handles=handles, fontsize=7, loc="upper center", bbox_to_anchor=(0.45, 1 - 0.5 / height),
               ncol=len(handles), frameon=False)
    fig.subplots_adjust(left=0.2, right=0.7, top=1 - 1.05 / height, bottom=0.75 / height)
    return fig


def _short(v: float) -> str:
    from .claims import fmt_number

    return fmt_number(v)


def save(claims: Sequence[Mapping[str, Any]], path: Path, title: str, highlight: Sequence[str] = ()) -> Path | None:
    """Draws the figure into ``path``; None (and no file) when no claim has a number."""
    fig = draw(claims, title, highlight)
    if fig is None:
        return None
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
