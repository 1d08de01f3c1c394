"""Which CoreSync claims are reproduced under the published semantics, under each testbed condition,
under none (issue 12): a Markdown table from the ``claims.json`` of ``reproduce coresync`` runs.
Each cell is the claim's verdict (✓ reproduced, ~ direction only, ✗ not reproduced, ∅ out of the
paper's regime, · model check) and its measured value.

    microsched reproduce coresync [--quick]
    microsched reproduce coresync [--quick] --condition slow-wake     # and cold-start, keep-cut, capped-pool,
                                                                      # bursty-clients
    python -m microsched.reproduce.coresync_conditions results/coresync results/coresync-cold-start \\
        results/coresync-slow-wake results/coresync-keep-cut results/coresync-capped-pool > conditions.md

Every condition but bursty-clients runs from the artifact's cold start (Breakwater's pool at
max_cores, 4 s warm-up); the published run and bursty-clients from the pool ceiling. Each column says which (``start`` of its claims).

Each directory's condition is read from its ``meta.json`` (none: the published semantics).
``--versus`` prints Shenango against CoreSync in each run instead (p99s and their ratio below
capacity, CoreSync's throughput gain above, per experiment and load: issue 44's question).
``--summary`` prints one row per condition instead: its start, its verdict counts, and CoreSync's
cores, busy cores and parking counts at one load (exponential 10 µs, R = 50; load 0.5 unless
``--load``), means over seeds from the run's ``results.parquet``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

PUBLISHED = "published"
SYMBOL = {"reproduced": "✓", "direction": "~", "not_reproduced": "✗", "out_of_regime": "∅", "model_check": "·", "derived": "≈", "fit_input": "⊙"}


def verdict(claim: dict) -> str:
    """The claim's verdict (claims.json of before the verdict model: from ``holds``)."""
    return claim.get("verdict") or ("reproduced" if claim.get("holds") else "not_reproduced")


def load(dirs: list[Path]) -> dict[str, dict[str, dict]]:
    """{condition: {claim id: claim}} of each reproduction output directory."""
    out: dict[str, dict[str, dict]] = {}
    for d in dirs:
        files = [d / "meta.json", d / "claims.json"]
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            raise ValueError(f"{d}: no {' or '.join(missing)} there: give the output directories of finished "
                             f"`microsched reproduce coresync` runs")
        meta = json.loads(files[0].read_text(encoding="utf-8"))
        if meta.get("reproduction", "coresync") != "coresync":
            raise ValueError(f"{d}: a `reproduce {meta['reproduction']}` run, not `reproduce coresync`")
        cond = meta.get("condition") or PUBLISHED
        if cond in out:
            raise ValueError(f"{d}: a second run of condition {cond!r}: give one directory per condition")
        out[cond] = {c["id"]: c for c in json.loads(files[1].read_text(encoding="utf-8"))}
    return out


START_LEGEND = ("Start: warm = Breakwater's pool starts at its ceiling; cold = at max_cores with a 4 s warm-up, as the "
                "artifact started every load point (the claims of a run judged otherwise say so in their `start`).")


def _start(claims: dict[str, dict]) -> str:
    """The start most of a run's claims are judged from, as a column suffix (none in claims.json
    from before claims recorded it)."""
    starts = [c["start"] for c in claims.values() if c.get("start")]
    return f" ({Counter(starts).most_common(1)[0][0]})" if starts else ""


def table(by_cond: dict[str, dict[str, dict]]) -> str:
    conds = sorted(by_cond, key=lambda c: (c != PUBLISHED, c))
    ids = list(dict.fromkeys(i for c in conds for i in by_cond[c]))

    def cell(c: str, i: str) -> str:
        x = by_cond[c].get(i)
        if x is None:
            return "–"
        m = x.get("measured")
        return f"{SYMBOL.get(verdict(x), '?')} {m if m is not None else ''}".strip()

    lines = ["| claim | paper | " + " | ".join(f"{c}{_start(by_cond[c])}" for c in conds) + " | reproduced under |",
             "|---|---|" + "---|" * (len(conds) + 1)]
    groups: dict[str, list[str]] = {"published": [], "none": []}
    for i in ids:
        held = [c for c in conds if i in by_cond[c] and verdict(by_cond[c][i]) == "reproduced"]
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
    legend = ", ".join(f"{sym} {name.replace('_', ' ')}" for name, sym in SYMBOL.items())
    starts = "" if all(not _start(by_cond[c]) for c in conds) else f" {START_LEGEND}"
    return ("\n".join(lines) + f"\n\n{legend}.{starts} Claims by where they are reproduced — {counts} "
            f"(of {len(ids)}).\n")


SUMMARY_VARIANT = "exp10/coresync"
SUMMARY_COLUMNS = (("cores.allocated_mean", "cores", "{:.2f}"), ("cores.busy_mean", "busy", "{:.2f}"),
                   ("parking.attempts", "park attempts", "{:,.0f}"), ("parking.parks", "parks", "{:,.0f}"),
                   ("parking.gate.waited_for_parker", "waited for a parker", "{:,.0f}"),
                   ("parking.gate.waited_for_revocation", "waited for revocation", "{:,.0f}"),
                   ("parking.gate.cuts", "cuts", "{:,.0f}"))


def summary(dirs: list[Path], load_fraction: float = 0.5) -> str:
    """One row per condition: start, verdict counts, and CoreSync's cores and park counts at
    ``load_fraction`` (means over seeds of the measured window)."""
    import pandas as pd

    by_cond = load(dirs)
    rows = []
    for d in dirs:
        meta = json.loads((d / "meta.json").read_text(encoding="utf-8"))
        cond = meta.get("condition") or PUBLISHED
        n = Counter(verdict(c) for c in by_cond[cond].values())
        df = pd.read_parquet(d / "results.parquet")
        at = df[(df["variant"] == SUMMARY_VARIANT) & ((df["load.fraction"] - load_fraction).abs() < 1e-9)]
        if at.empty:
            raise ValueError(f"{d}: no {SUMMARY_VARIANT} run at load {load_fraction:g}: give a load of its grid")
        cells = [fmt.format(at[col].mean()) if col in at and at[col].notna().any() else "–"
                 for col, _, fmt in SUMMARY_COLUMNS]
        rows.append((cond != PUBLISHED, cond, f"| {cond}{_start(by_cond[cond])} | "
                     + " / ".join(str(n[v]) for v in ("reproduced", "direction", "not_reproduced", "out_of_regime"))
                     + " | " + " | ".join(cells) + " |"))
    head = ("| condition (start) | reproduced / direction / not / out of regime | "
            + " | ".join(name for _, name, _ in SUMMARY_COLUMNS) + " |")
    lines = [head, "|---|---|" + "---:|" * len(SUMMARY_COLUMNS)] + [r for *_, r in sorted(rows)]
    return "\n".join(lines) + (f"\n\nCoreSync ({SUMMARY_VARIANT}) at load {load_fraction:g} of capacity, 16 cores: means over "
                               f"seeds of the measured window. {START_LEGEND}\n")


VERSUS_EXPERIMENTS = ("exp10", "bim10", "exp1", "bim1", "mc")


def versus(dirs: list[Path]) -> str:
    """Shenango against CoreSync in every run, per experiment and load: below capacity each one's
    p99 and cores allocated and the p99 ratio Shenango / CoreSync (the paper's "CoreSync improves
    tail latency by 1.7× compared to Shenango" is 1.7), above it CoreSync's throughput gain over
    Shenango (Table I). Means over seeds of the measured window (``aggregate.parquet``)."""
    import pandas as pd

    by_cond = load(dirs)
    runs = {}
    for d in dirs:
        meta = json.loads((d / "meta.json").read_text(encoding="utf-8"))
        runs[meta.get("condition") or PUBLISHED] = pd.read_parquet(d / "aggregate.parquet")
    conds = sorted(runs, key=lambda c: (c != PUBLISHED, c))

    def at(df, variant: str, lf: float, col: str) -> float | None:
        x = df[(df["variant"] == variant) & ((df["load.fraction"] - lf).abs() < 1e-9)]
        return float(x[col].iloc[0]) if len(x) and col in x and x[col].notna().iloc[0] else None

    head = "| experiment | load | " + " | ".join(
        f"{c}{_start(by_cond[c])}: Shenango p99 / CoreSync p99 (ratio); cores" for c in conds) + " |"
    lines = [head, "|---|---:|" + "---|" * len(conds)]
    for exp in VERSUS_EXPERIMENTS:
        for lf in (0.2, 0.5, 0.8, 1.0, 1.3, 1.5):
            cells = []
            for c in conds:
                df = runs[c]
                sh, cs = f"{exp}/shenango", f"{exp}/coresync"
                if lf < 1.0:
                    p_sh, p_cs = at(df, sh, lf, "latency_us.p99"), at(df, cs, lf, "latency_us.p99")
                    k_sh, k_cs = at(df, sh, lf, "cores.allocated_mean"), at(df, cs, lf, "cores.allocated_mean")
                    cells.append("–" if p_sh is None or p_cs is None else
                                 f"{p_sh:.1f} / {p_cs:.1f} µs ({p_sh / p_cs:.2f}×); {k_sh:.1f} / {k_cs:.1f}")
                else:
                    t_sh, t_cs = at(df, sh, lf, "throughput_rps"), at(df, cs, lf, "throughput_rps")
                    cells.append("–" if t_sh is None or t_cs is None else
                                 f"throughput CoreSync / Shenango − 1 = {100 * (t_cs / t_sh - 1):+.2f} %")
            if any(x != "–" for x in cells):
                lines.append(f"| {exp} | {lf:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + ("\n\nBelow capacity: p99 latency of Shenango and CoreSync, their ratio (above 1: "
                               "CoreSync's tail is lower), and their mean cores allocated; above it, CoreSync's "
                               "throughput gain over Shenango. Means over seeds of the measured window. "
                               f"{START_LEGEND}\n")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m microsched.reproduce.coresync_conditions",
                                 description=__doc__.split("\n\n")[0],
                                 epilog="Each directory's condition is read from its meta.json (none: the published "
                                        "semantics).")
    ap.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="output directory of a `reproduce coresync` run")
    ap.add_argument("--summary", action="store_true",
                    help="one row per condition: verdict counts and CoreSync's cores and parks at --load")
    ap.add_argument("--versus", action="store_true",
                    help="Shenango against CoreSync in each run: p99s and their ratio below capacity, throughput "
                         "gain above, per experiment and load")
    ap.add_argument("--load", type=float, default=0.5, metavar="F",
                    help="the load (fraction of capacity) of the --summary columns (default 0.5)")
    args = ap.parse_args(argv)
    try:
        if args.summary and args.versus:
            ap.error("--summary and --versus: give one of them")
        out = summary(args.dirs, args.load) if args.summary else versus(args.dirs) if args.versus else table(load(args.dirs))
        print(out, end="")
    except ValueError as e:
        ap.exit(2, f"{ap.prog}: error: {e}\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(sys.argv[1:]))
