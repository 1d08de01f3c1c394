"""Which CoreSync claims hold under the published semantics, under each testbed condition, under
none (issue 12): a Markdown table from the ``claims.json`` of ``reproduce coresync`` runs.

    microsched reproduce coresync [--quick]
    microsched reproduce coresync [--quick] --condition slow-wake     # and keep-cut, capped-pool
    python -m microsched.reproduce.coresync_conditions results/coresync results/coresync-slow-wake \\
        results/coresync-keep-cut results/coresync-capped-pool > conditions.md

Each directory's condition is read from its ``meta.json`` (none: the published semantics).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

PUBLISHED = "published"


def load(dirs: list[Path]) -> dict[str, dict[str, dict]]:
    """{condition: {claim id: claim}} of each reproduction output directory."""
    out: dict[str, dict[str, dict]] = {}
    for d in dirs:
        meta = json.loads((d / "meta.json").read_text(encoding="utf-8"))
        cond = meta.get("condition") or PUBLISHED
        out[cond] = {c["id"]: c for c in json.loads((d / "claims.json").read_text(encoding="utf-8"))}
    return out


def table(by_cond: dict[str, dict[str, dict]]) -> str:
    conds = sorted(by_cond, key=lambda c: (c != PUBLISHED, c))
    ids = list(dict.fromkeys(i for c in conds for i in by_cond[c]))

    def cell(c: str, i: str) -> str:
        x = by_cond[c].get(i)
        if x is None:
            return "–"
        m = x.get("measured")
        return f"{'✓' if x['holds'] else '✗'} {m if m is not None else ''}".strip()

    lines = ["| claim | paper | " + " | ".join(conds) + " | holds under |", "|---|---|" + "---|" * (len(conds) + 1)]
    groups: dict[str, list[str]] = {"published": [], "none": []}
    for i in ids:
        held = [c for c in conds if by_cond[c].get(i, {}).get("holds")]
        if PUBLISHED in held:
            where = "published" + (f" (+ {', '.join(h for h in held if h != PUBLISHED)})" if len(held) > 1 else "")
            groups["published"].append(i)
        elif held:
            where = "only " + ", ".join(held)
            for h in held:
                groups.setdefault(f"only {h}", []).append(i)
        else:
            where = "none"
            groups["none"].append(i)
        paper = next((by_cond[c][i].get("paper") for c in conds if i in by_cond[c]), None)
        lines.append(f"| `{i}` | {paper if paper is not None else ''} | "
                     + " | ".join(cell(c, i) for c in conds) + f" | {where} |")
    counts = ", ".join(f"{k}: {len(v)}" for k, v in groups.items())
    return "\n".join(lines) + f"\n\nClaims by where they hold — {counts} (of {len(ids)}).\n"


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    print(table(load([Path(a) for a in argv])), end="")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(sys.argv[1:]))
