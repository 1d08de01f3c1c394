"""Claims: what a paper says, what our model measures, and whether the claim holds.

``claims.json`` is a list of objects with the keys ``id``, ``claim``, ``paper``, ``measured``,
``holds`` (always present) and optional extra keys (``unit``, ``note``, ``ci95``, ``by_load``,
...). ``paper`` is the number the paper states for the claim, ``null`` where it gives none;
``measured`` is the number our model gives (``null`` only if it could not be measured);
``holds`` is a boolean. A claim that does not hold is reported as such, never tuned away.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

REQUIRED_KEYS = ("id", "claim", "paper", "measured", "holds")


def rounded(x: Any, nd: int = 4) -> float | None:
    """A measured number as a claim shows it: rounded, and None when missing or not finite."""
    if x is None:
        return None
    x = float(x)
    return round(x, nd) if math.isfinite(x) else None


def _jsonable(v: Any) -> Any:
    """numpy scalars → Python numbers, NaN/inf → None, containers recursively."""
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        try:
            v = v.item()
        except (ValueError, AttributeError):
            pass
    if isinstance(v, bool) or v is None or isinstance(v, (str, int)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    return str(v)


@dataclass
class Claim:
    id: str
    claim: str
    measured: float | None
    holds: bool
    paper: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = {"id": self.id, "claim": self.claim, "paper": self.paper, "measured": self.measured,
             "holds": bool(self.holds)}
        for k, v in self.extra.items():
            if k in d:
                raise ValueError(f"claim {self.id}: extra key {k!r} clashes with a required key")
            d[k] = v
        return _jsonable(d)


def write_claims(claims: Iterable[Claim], path: Path) -> Path:
    data = [c.to_dict() for c in claims]
    check_claims(data)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def check_claims(data: Any) -> None:
    """Raises ``ValueError`` unless ``data`` has the claims.json layout."""
    if not isinstance(data, list):
        raise ValueError("claims: must be a list")
    ids = set()
    for i, c in enumerate(data):
        if not isinstance(c, dict):
            raise ValueError(f"claims[{i}]: must be an object")
        missing = [k for k in REQUIRED_KEYS if k not in c]
        if missing:
            raise ValueError(f"claims[{i}]: missing {', '.join(missing)}")
        if not isinstance(c["id"], str) or not c["id"] or c["id"] in ids:
            raise ValueError(f"claims[{i}].id: must be a unique non-empty string")
        ids.add(c["id"])
        if not isinstance(c["claim"], str) or not c["claim"]:
            raise ValueError(f"claims[{i}].claim: must be a non-empty string")
        for k in ("paper", "measured"):
            v = c[k]
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise ValueError(f"claims[{i}].{k}: must be a number or null")
        if not isinstance(c["holds"], bool):
            raise ValueError(f"claims[{i}].holds: must be a boolean")


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        a = abs(v)
        if a != 0 and (a < 1e-3 or a >= 1e6):
            return f"{v:.3g}"
        return f"{v:.3f}" if a < 10 else f"{v:.2f}" if a < 1000 else f"{v:,.0f}"
    return str(v)


def print_claims(claims: Sequence[dict], title: str = "claims", console=None) -> None:
    """The claims as a rich table: id, claim, paper, measured (± ci95, unit), holds."""
    from rich.console import Console
    from rich.table import Table

    con = console or Console(highlight=False)
    t = Table(title=title, title_justify="left", show_lines=True)
    t.add_column("claim (id, statement; measured = ...)", ratio=1, min_width=40)
    t.add_column("paper", justify="right", no_wrap=True)
    t.add_column("measured", justify="right", no_wrap=True)
    t.add_column("holds", justify="center", no_wrap=True)
    for c in claims:
        m = _fmt(c.get("measured"))
        if isinstance(c.get("ci95"), (int, float)):
            m += f" ± {_fmt(float(c['ci95']))}"
        if c.get("unit"):
            m += f" {c['unit']}"
        holds = "[green]yes[/green]" if c.get("holds") else "[bold red]NO[/bold red]"
        text = f"[bold]{c.get('id')}[/bold]\n{c.get('claim')}"
        if c.get("measure"):
            text += f"\n[dim]measured = {c['measure']}[/dim]"
        t.add_row(text, _fmt(c.get("paper")), m, holds)
    con.print(t)
    n_hold = sum(bool(c.get("holds")) for c in claims)
    con.print(f"{n_hold} of {len(claims)} claims hold")
