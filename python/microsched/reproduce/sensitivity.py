"""Which of a reproduction's verdicts depend on a model cost: the reproduction rerun with each of
the costs it declares (``register(..., costs=...)``) at ½× and 2× its default, one cost at a time,
and its claims' verdicts side by side.

    microsched reproduce harvest --quick --sensitivity     # writes OUT/sensitivity.{json,md}

A claim whose verdict moves when a cost halves or doubles "depends on" that cost: its verdict is
only as good as the cost's source."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from .framework import Condition, get, run_reproduction

FACTORS = (0.5, 2.0)
SENSITIVITY_JSON = "sensitivity.json"
SENSITIVITY_MD = "sensitivity.md"


@dataclass(frozen=True)
class Cost:
    """A model cost a reproduction's verdicts may depend on. ``key`` names it (its scenario
    field), ``default`` is its value where the variants leave it unset, ``source`` says where the
    default comes from, and ``sets(variant, value)`` gives the overrides that set it on a variant
    (none for a variant it does not apply to)."""

    key: str
    default: float
    source: str
    sets: Callable[[Any, float], tuple[str, ...]]


def _label(factor: float) -> str:
    return f"{factor:g}x"


def run_sensitivity(name: str, out: str | Path, quick: bool = False, jobs: int | None = None,
                    seeds: int | None = None, factors: Sequence[float] = FACTORS,
                    baseline: Sequence[dict] | None = None,
                    progress: Callable[[str, int, int], None] | None = None) -> dict:
    """Reruns reproduction ``name`` with each declared cost at each of ``factors`` × its default
    (into ``out/sensitivity/KEY-FACTORx``) and writes ``out/sensitivity.json`` and ``.md``.
    ``baseline`` is the claims of the run at the defaults (run here when not given)."""
    repro = get(name)
    if not repro.costs:
        raise ValueError(f"--sensitivity: reproduction {name!r} declares no model costs; those that do: "
                         f"{', '.join(n for n in _with_costs()) or 'none'}")
    out_dir = Path(out)
    if baseline is None:
        baseline = run_reproduction(name, out=out_dir, quick=quick, jobs=jobs, seeds=seeds).claims
    rows: dict[str, dict] = {c["id"]: {"id": c["id"], "verdict": c["verdict"], "measured": c.get("measured"),
                                       "paper": c.get("paper"), "by_cost": {}} for c in baseline}
    for cost in repro.costs:
        for f in factors:
            value = cost.default * f
            extra = Condition(description=f"{cost.key} = {value:g} ({_label(f)} its default {cost.default:g})",
                              sets=lambda v, cost=cost, value=value: cost.sets(v, value))
            tick = (lambda d, t, k=f"{cost.key} {_label(f)}": progress(k, d, t)) if progress else None
            o = run_reproduction(name, out=out_dir / "sensitivity" / f"{cost.key}-{_label(f)}", quick=quick,
                                 jobs=jobs, seeds=seeds, extra=extra, progress=tick)
            for c in o.claims:
                row = rows.setdefault(c["id"], {"id": c["id"], "verdict": None, "measured": None,
                                                "paper": c.get("paper"), "by_cost": {}})
                row["by_cost"].setdefault(cost.key, {})[_label(f)] = {"verdict": c["verdict"],
                                                                      "measured": c.get("measured")}
    for row in rows.values():
        row["depends_on"] = [k for k, by in row["by_cost"].items()
                             if any(x["verdict"] != row["verdict"] for x in by.values())]
    result = {
        "reproduction": name, "quick": quick, "factors": list(factors),
        "costs": [{"key": c.key, "default": c.default, "source": c.source} for c in repro.costs],
        "claims": list(rows.values()),
    }
    (out_dir / SENSITIVITY_JSON).write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (out_dir / SENSITIVITY_MD).write_text(markdown(result), encoding="utf-8")
    return result


def _with_costs() -> list[str]:
    from .framework import REGISTRY

    return sorted(n for n, r in REGISTRY.items() if r.costs)


SHORT = {"reproduced": "✓", "direction": "~", "not_reproduced": "✗", "out_of_regime": "∅", "model_check": "·", "derived": "≈", "fit_input": "⊙", None: "–"}


def markdown(result: dict) -> str:
    """The sensitivity table: one row per claim, its verdict at the defaults and at each factor of
    each cost; the claims whose verdict moves first."""
    costs = [c["key"] for c in result["costs"]]
    labels = [_label(f) for f in result["factors"]]
    head = ["claim", "default"] + [f"{k} {lab}" for k in costs for lab in labels] + ["depends on"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    ordered = sorted(result["claims"], key=lambda r: (not r["depends_on"], r["id"]))
    for r in ordered:
        cells = [f"`{r['id']}`", SHORT.get(r["verdict"], "?")]
        for k in costs:
            for lab in labels:
                x = r["by_cost"].get(k, {}).get(lab)
                cells.append(SHORT.get(x["verdict"], "?") if x else "–")
        cells.append(", ".join(f"`{k}`" for k in r["depends_on"]) or "")
        lines.append("| " + " | ".join(cells) + " |")
    moved = sum(1 for r in result["claims"] if r["depends_on"])
    defaults = "; ".join(f"`{c['key']}` = {c['default']:g} ({c['source']})" for c in result["costs"])
    legend = ", ".join(f"{sym} {name.replace('_', ' ')}" for name, sym in SHORT.items() if name)
    return ("\n".join(lines) + f"\n\n{moved} of {len(result['claims'])} claims change verdict when a cost is "
            f"halved or doubled. Defaults: {defaults}. {legend}.\n")
