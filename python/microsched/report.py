"""``microsched report DIR``: one self-contained HTML page of a sweep, a reproduction or a run.

The page needs no network and no JavaScript: the figures are PNGs embedded as base64 ``data:``
URIs, the CSS is inline. It holds, depending on what ``DIR`` contains:

* ``claims.json`` (a reproduction): the claims table, paper vs measured, holds or not, colored;
* ``results.parquet`` (a sweep or a reproduction): the figures of :mod:`microsched.plots`, the
  results aggregated over seeds (mean ± 95 % CI half-width, n seeds), every run in a folded
  table, and the settings common to every point;
* ``summary.json`` (a run directory of ``microsched run --out``): the summary metrics and the
  time-series figure;
* the spec and the scenario as run (``spec.toml``, ``base.toml``, ``scenario.json``,
  ``meta.json`` / ``sweep.json``), and every other PNG in ``DIR`` (a reproduction's figures, in
  the order and with the captions it declares: :class:`~microsched.reproduce.framework.Figure`).

The page of ``reproduce --all`` (``summary.json`` with ``papers``, :func:`build_all_report`) reads
like a paper's evaluation: the five theses and their verdicts on its first screen, then per paper
its thesis, why its claims miss, its figures (the paper's numbers beside ours first; none
dropped) and its claims folded by verdict.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import json
import math
import os
from pathlib import Path
from typing import Any, Iterable, Sequence

import pandas as pd

REPORT_FILE = "report.html"
MAX_RUN_ROWS = 2000

# The metrics shown in the aggregated table (those present), with their headers.
KEY_METRICS: list[tuple[str, str]] = [
    ("offered_rps", "offered (req/s)"),
    ("throughput_rps", "throughput (req/s)"),
    ("goodput_rps", "goodput (req/s)"),
    ("drop_rate", "drop rate"),
    ("latency_us.p50", "p50 (µs)"),
    ("latency_us.p99", "p99 (µs)"),
    ("latency_us.p999", "p99.9 (µs)"),
    ("slowdown.p99", "p99 slowdown"),
    ("cores.allocated_mean", "LC cores"),
    ("cpu_utilization", "CPU util."),
    ("be_cores_mean", "BE cores"),
]

CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0 auto; max-width: 1180px;
       padding: 1.2em 2em 3em; color: #1d2330; background: #fff; line-height: 1.45; }
h1 { font-size: 1.6em; margin-bottom: .2em; border-bottom: 3px solid #2b5cab; padding-bottom: .2em; }
h2 { font-size: 1.25em; margin-top: 1.8em; color: #2b5cab; border-bottom: 1px solid #d5dbe5; }
h3 { font-size: 1.05em; margin-bottom: .3em; }
.meta { color: #5a6577; font-size: .92em; }
table { border-collapse: collapse; font-size: .86em; margin: .6em 0 1em; }
th, td { border: 1px solid #d5dbe5; padding: .28em .55em; vertical-align: top; }
th { background: #eef2f8; text-align: left; position: sticky; top: 0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr:nth-child(even) td { background: #f8f9fb; }
tr.holds td { background: #e7f6ea; }
tr.direction td { background: #fdf6dd; }
tr.check td { background: #f1f1f1; }
tr.fails td { background: #fde8e8; }
td.yes { color: #11702d; font-weight: bold; text-align: center; }
td.no { color: #b3141b; font-weight: bold; text-align: center; }
.ci { color: #7a8496; font-size: .9em; }
.badge { display: inline-block; padding: .15em .6em; border-radius: .8em; font-weight: bold; color: #fff; }
.badge.ok { background: #1e8a3c; } .badge.bad { background: #c62828; } .badge.mid { background: #c98a00; }
.badge.none { background: #7a8496; }
figure { margin: 1em 0 1.6em; }
figure img { max-width: 100%; border: 1px solid #d5dbe5; }
figcaption { color: #5a6577; font-size: .88em; }
pre { background: #f4f6fa; border: 1px solid #d5dbe5; padding: .8em; overflow-x: auto; font-size: .82em; }
details { margin: .6em 0; } summary { cursor: pointer; font-weight: bold; }
.scroll { max-height: 34em; overflow: auto; }
.note { color: #8a5a00; }
"""


class ReportError(ValueError):
    """``DIR`` is not something a report can be made of (the message names it)."""


def _e(v: Any) -> str:
    return html.escape(str(v), quote=True)


def fmt(v: Any) -> str:
    """A cell value: numbers with sensible precision, NaN/None as an en dash."""
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int,)) and not isinstance(v, bool):
        return f"{v:,}"
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    if not math.isfinite(f):
        return "–"
    if f == int(f) and abs(f) < 1e15 and not isinstance(v, float):
        return f"{int(f):,}"
    a = abs(f)
    if a == 0:
        return "0"
    if a >= 1000:
        return f"{f:,.0f}"
    if a >= 100:
        return f"{f:,.1f}"
    if a >= 1:
        return f"{f:.3g}" if a < 10 else f"{f:.1f}"
    return f"{f:.3g}"


def _img(path: Path, caption: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return (f'<figure><img alt="{_e(caption)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{_e(caption)}</figcaption></figure>")


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], cls: Sequence[str] | None = None,
           row_classes: Sequence[str] | None = None, table_id: str | None = None) -> str:
    """``rows`` are already-escaped HTML cells."""
    out = [f'<table{f" id={chr(34)}{table_id}{chr(34)}" if table_id else ""}><thead><tr>']
    out += [f"<th>{_e(h)}</th>" for h in headers]
    out.append("</tr></thead><tbody>")
    for i, r in enumerate(rows):
        rc = f' class="{row_classes[i]}"' if row_classes and row_classes[i] else ""
        out.append(f"<tr{rc}>")
        for j, c in enumerate(r):
            cc = f' class="{cls[j]}"' if cls and cls[j] else ""
            out.append(f"<td{cc}>{c}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _read_json(p: Path) -> Any:
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------------------------------------
# sections


def claims_section(claims: list[dict], table_id: str = "claims", heading: bool = True) -> str:
    from .reproduce.claims import MODEL_CHECK, REPRODUCED, counts_line, measured_text, paper_text

    rows, rcls = [], []
    for c in claims:
        verdict = c.get("verdict") or (REPRODUCED if c.get("holds") else "not_reproduced")
        text = f"<b>{_e(c.get('id'))}</b><br>{_e(c.get('claim'))}"
        if c.get("quote"):
            text += f'<br><span class="note">paper: “{_e(c["quote"])}”</span>'
        if c.get("measure"):
            text += f'<br><span class="ci">measured = {_e(c["measure"])}</span>'
        cause = c.get("cause")
        if isinstance(cause, dict) and cause.get("text"):
            text += f'<br><span class="note">cause: {_e(cause["text"])}</span>'
        if verdict == MODEL_CHECK:
            shown = "model check: " + ("passed" if c.get("passed") else "FAILED")
        else:
            shown = verdict.replace("_", " ")
        rows.append([text, _e(paper_text(c)), _e(measured_text(c)), _e(c.get("tolerance") or ""), _e(shown)])
        rcls.append({REPRODUCED: "holds", "direction": "direction", MODEL_CHECK: "check", "derived": "check",
                     "fit_input": "check"}
                    .get(verdict, "fails"))
    table = _table(["claim", "paper", "measured", "tolerance", "verdict"], rows, cls=["", "num", "num", "num", ""],
                   row_classes=rcls, table_id=table_id)
    if not heading:
        return table
    n_rep = sum(c.get("verdict") == REPRODUCED for c in claims)
    n_judged = sum(c.get("verdict") in (REPRODUCED, "direction", "not_reproduced") for c in claims)
    badge = share_class(n_rep, n_judged)
    return (f'<h2>Claims</h2><p><span class="badge {badge}">{_e(counts_line(claims))}</span> '
            f'<span class="meta">(paper: the number the paper states and where; measured: mean over seeds ± '
            f'95 % CI; reproduced = the paper\'s number within the tolerance of the measured interval)</span>'
            f'</p>{table}')


def _metric_cols(df: pd.DataFrame) -> list[tuple[str, str]]:
    return [(c, h) for c, h in KEY_METRICS if c in df.columns]


def results_section(df: pd.DataFrame, params: list[str]) -> str:
    from .sweep.engine import aggregate_results

    varying = [c for c in params if c != "seed" and df[c].nunique(dropna=False) > 1]
    constant = [c for c in params if c != "seed" and c not in varying]
    metrics = _metric_cols(df)
    agg = aggregate_results(df, params)
    seeds = sorted(df["seed"].unique().tolist()) if "seed" in df else []
    out = [f"<h2>Results</h2><p class='meta'>{len(df)} runs: {len(agg)} points × {len(seeds) or 1} seed(s) "
           f"({_e(', '.join(map(str, seeds)) or '-')}); means over seeds, "
           f'<span class="ci">± half-width of the 95 % confidence interval</span> (Student t; none with one '
           f"seed).</p>"]
    if constant:
        out.append("<p><b>Common to every point:</b> " + ", ".join(
            f"<code>{_e(c)} = {_e(fmt(df[c].iloc[0]))}</code>" for c in constant) + "</p>")
    headers = varying + [h for _, h in metrics] + ["n"]
    rows = []
    for _, r in agg.iterrows():
        cells = [_e(fmt(r[c])) for c in varying]
        for c, _h in metrics:
            cell = _e(fmt(r.get(c)))
            ci = r.get(f"{c}.ci95")
            if ci is not None and isinstance(ci, (int, float)) and math.isfinite(float(ci)):
                cell += f' <span class="ci">± {_e(fmt(float(ci)))}</span>'
            cells.append(cell)
        cells.append(_e(fmt(r.get("n"))))
        rows.append(cells)
    out.append('<div class="scroll">' + _table(headers, rows, cls=[""] * len(varying) + ["num"] * (len(metrics) + 1),
                                               table_id="results") + "</div>")
    # every run
    run_cols = [c for c in ("point_id",) if c in df.columns] + varying + (["seed"] if "seed" in df else []) \
        + [c for c, _ in metrics]
    shown = df.head(MAX_RUN_ROWS)
    rows = [[_e(fmt(v)) for v in r] for r in shown[run_cols].itertuples(index=False)]
    more = f" (first {MAX_RUN_ROWS} of {len(df)})" if len(df) > MAX_RUN_ROWS else ""
    out.append(f"<details><summary>every run ({len(df)} rows{more}; all columns are in results.parquet)</summary>"
               f'<div class="scroll">{_table(run_cols, rows, table_id="runs")}</div></details>')
    return "".join(out)


def summary_section(s: dict) -> str:
    from .sweep.runner import flatten

    flat = flatten(s)
    # The exported histograms are data for pooling, not figures to read.
    rows = [[f"<code>{_e(k)}</code>", _e(fmt(v))] for k, v in flat.items() if not k.startswith("histograms.")]
    return "<h2>Summary</h2>" + _table(["metric", "value"], rows, cls=["", "num"], table_id="summary")


def _pre(title: str, text: str, open_: bool = False) -> str:
    return f"<details{' open' if open_ else ''}><summary>{_e(title)}</summary><pre>{_e(text)}</pre></details>"


# ---------------------------------------------------------------------------------------------
# the page


def build_report(directory: str | os.PathLike, out: str | os.PathLike | None = None,
                 make_plots: bool = True) -> Path:
    """Writes the HTML report of ``directory`` to ``out`` (default ``DIR/report.html``) and
    returns its path. Figures are (re)drawn into ``DIR/plots`` (as PNG, the format the page embeds)
    unless ``make_plots`` is false."""
    from . import plots as P

    d = Path(directory)
    if not d.exists():
        raise FileNotFoundError(f"not found: {d}")
    if not d.is_dir():
        raise ReportError(f"{d}: not a directory (give a sweep, reproduce or run output directory)")
    every = _read_json(d / "summary.json")
    if isinstance(every, dict) and "papers" in every:
        return build_all_report(d, every, out)
    has_results = (d / "results.parquet").is_file()
    has_run = (d / "summary.json").is_file()
    claims_path = d / "claims.json"
    if not (has_results or has_run or claims_path.is_file()):
        raise ReportError(f"{d}: nothing to report: no results.parquet, claims.json or summary.json")

    meta = _read_json(d / "meta.json") or _read_json(d / "sweep.json") or {}
    title = str(meta.get("reproduction") or meta.get("name") or d.resolve().name)
    sub = []
    if meta.get("paper") or meta.get("figure"):
        sub.append(f"{meta.get('paper', '')}, {meta.get('figure', '')}")
    if meta.get("description"):
        sub.append(str(meta["description"]))
    if meta.get("quick"):
        sub.append(QUICK_NOTE)

    body: list[str] = []
    notes: list[str] = []

    if claims_path.is_file():
        claims = _read_json(claims_path)
        if isinstance(claims, list):
            body.append(claims_section([c for c in claims if isinstance(c, dict)]))
        else:
            notes.append(f"{claims_path.name} is not a list of claims")

    figures: list[tuple[Path, str]] = []
    plot_dir = d / "plots"
    data = None
    if has_results or has_run:
        try:
            data = P.load(d)
        except (P.PlotError, OSError) as e:
            notes.append(f"cannot read the results: {e}")
    if data is not None and make_plots:
        kinds = P.RUN_KINDS if isinstance(data, P.RunData) else P.SWEEP_KINDS
        for k in kinds:
            try:
                # PNG only: the page embeds PNG (an SVG as well would cost a third of the drawing
                # for a file nothing reads; `microsched plot` writes both).
                # At most as many curves as a legend labels: more cannot be read
                # (HarvestContainers' 144 variants) and were most of the page's drawing time;
                # the reproduction's own figures show those runs (`microsched plot` draws all).
                paths = P.plot(d, kinds=[k], out=plot_dir, formats=("png",), max_curves=P.MAX_LABELLED_CURVES)
            except (P.PlotError, ValueError, KeyError) as e:
                notes.append(f"figure {k} skipped: {e}")
                continue
            figures += [(p, _CAPTIONS.get(k, k)) for p in paths if p.suffix == ".png"]
    elif plot_dir.is_dir():
        figures += [(p, p.stem) for p in sorted(plot_dir.glob("*.png"))]
    extra_figures = ""
    if meta.get("reproduction") and claims_path.is_file():
        # A reproduction's own figures, in its declared order and with its captions.
        claims = _read_json(claims_path)
        claims = [c for c in claims if isinstance(c, dict)] if isinstance(claims, list) else []
        extra_figures = "".join(figure_html(p, c, link=p.name, paper_numbers=pn)
                                for p, c, pn in reproduction_figures(d, str(meta["reproduction"]), claims))
    else:
        for p in sorted(d.glob("*.png")):  # a run's latency CDF
            figures.append((p, p.stem.replace("_", " ")))

    if figures or extra_figures:
        body.append("<h2>Figures</h2>" + extra_figures + "".join(_img(p, c) for p, c in figures))
    if isinstance(data, P.SweepData):
        body.append(results_section(data.df, data.params))
    elif isinstance(data, P.RunData):
        body.append(summary_section(data.summary))

    spec_parts = []
    for name, label in (("spec.toml", "sweep spec (spec.toml)"), ("base.toml", "base scenario (base.toml)")):
        if (d / name).is_file():
            spec_parts.append(_pre(label, (d / name).read_text(encoding="utf-8"), open_=name == "spec.toml"))
    if meta:
        spec_parts.append(_pre("meta.json" if (d / "meta.json").is_file() else "sweep.json",
                               json.dumps(meta, indent=2, ensure_ascii=False), open_=not spec_parts))
    if (d / "scenario.json").is_file():
        spec_parts.append(_pre("resolved scenario (scenario.json: every default filled in)",
                               (d / "scenario.json").read_text(encoding="utf-8")))
    if spec_parts:
        body.append("<h2>Spec and scenario</h2>" + "".join(spec_parts))
    if notes:
        body.append("<h2>Notes</h2><ul>" + "".join(f'<li class="note">{_e(n)}</li>' for n in notes) + "</ul>")

    now = _dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    page = (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{_e(title)} — microsched report</title>"
        f"<style>{CSS}</style></head><body>"
        f"<h1>{_e(title)}</h1>"
        + "".join(f'<p class="meta">{_e(s)}</p>' for s in sub)
        + f'<p class="meta">microsched {_e(_version())} · report of <code>{_e(d.resolve())}</code> · {now}</p>'
        + "".join(body)
        + "</body></html>\n"
    )
    path = Path(out) if out is not None else d / REPORT_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path


QUICK_NOTE = ("Quick profile (--quick): fewer points, shorter runs, 3 seeds. Its verdicts have wide confidence "
              "intervals; the full profile is the reproduction's result.")

THESIS_VERDICTS = {"shown": ("shown", "ok"), "direction": ("direction only", "mid"), "not_shown": ("not shown", "bad")}

ALL_CSS = """
body { max-width: 1500px; }
.theses { width: 100%; font-size: .92em; }
.theses td { vertical-align: middle; }
.badge.mid { background: #c98a00; } .badge.none { background: #7a8496; }
.thesis { border-left: 4px solid #2b5cab; padding: .3em .9em; margin: .6em 0; background: #f6f8fc; }
.why { margin: .4em 0 .8em; }
figure.wide img { width: 100%; }
figure a { display: block; }
figure .missing { color: #8a5a00; }
details.verdict > summary { font-weight: normal; }
details.verdict > summary b { font-weight: bold; }
"""


def share_class(reproduced: int, judged: int) -> str:
    """A badge's colour by the share of the paper's claims reproduced: green from two thirds,
    amber from one third, red below (grey when nothing was judged)."""
    if judged <= 0:
        return "none"
    share = reproduced / judged
    return "ok" if share >= 2 / 3 else "mid" if share >= 1 / 3 else "bad"


class _Ids:
    """Ids unique within a page (a reproduction's tables, a paper's anchor), so that anchors
    and the page's HTML stay valid however many reproductions it shows."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def __call__(self, *parts: Any) -> str:
        import re

        base = re.sub(r"[^A-Za-z0-9_-]+", "-", "-".join(str(p) for p in parts)).strip("-") or "x"
        name, i = base, 2
        while name in self.used:
            name, i = f"{base}-{i}", i + 1
        self.used.add(name)
        return name


def _thesis_of(paper: dict) -> dict | None:
    """The paper's thesis as summary.json declares it, or None (older summaries have none)."""
    t = paper.get("thesis")
    if isinstance(t, dict) and t.get("statement"):
        return t
    return None


def _verdict_badge(verdict: Any) -> str:
    label, cls = THESIS_VERDICTS.get(str(verdict), (str(verdict or "no verdict").replace("_", " "), "none"))
    return f'<span class="badge {cls}">{_e(label)}</span>'


def _counts_badge(counts: dict) -> str:
    judged = sum(int(counts.get(v, 0)) for v in ("reproduced", "direction", "not_reproduced"))
    rep = int(counts.get("reproduced", 0))
    return (f'<span class="badge {share_class(rep, judged)}">{rep} of {judged} reproduced</span>')


def theses_section(summary: dict, ids: "_Ids") -> str:
    """The first screen: each paper's thesis, its verdict and its claims' share reproduced."""
    rows = []
    for p in summary.get("papers", []):
        t = _thesis_of(p)
        anchor = f'<a href="#{_e(p.get("_anchor", ""))}">{_e(p.get("title"))}</a>'
        if t is None:
            statement, verdict = '<span class="note">thesis not declared</span>', _verdict_badge(None)
        else:
            statement, verdict = _e(t.get("statement")), _verdict_badge(t.get("verdict"))
        rows.append([anchor, statement, verdict, _counts_badge(p.get("counts", {}))])
    head = ('<p class="meta">Each paper\'s thesis, judged from the claims it rests on (shown: they reproduce; '
            "direction only: the effect is there, not its size; not shown: they do not). The badge on the right "
            "counts every claim of the paper.</p>")
    return ("<h2>The five theses</h2>" + head
            + _table(["paper", "thesis", "verdict", "claims"], rows, cls=["", "", "", ""], table_id=ids("theses"))
            .replace("<table", '<table class="theses"', 1))


def why_claims_miss(claims: Sequence[dict]) -> str:
    """Two or three lines on why the paper's claims miss, from their causes: how many measure
    another number, are inconclusive (interval wider than the band), show only the direction, or
    fall outside the regime, and the cause that recurs most (numbers aside), in its own words."""
    import re
    from collections import Counter

    misses = [c for c in claims if c.get("verdict") in ("direction", "not_reproduced", "out_of_regime")]
    if not misses:
        return "Every claim with a verdict reproduces." if claims else ""
    kinds: Counter = Counter()
    recurring: Counter = Counter()
    example: dict[str, str] = {}
    for c in misses:
        text = " ".join(str((c.get("cause") or {}).get("text") or "").split())
        if c.get("verdict") == "out_of_regime":
            kinds["fall outside the paper's regime (not judged)"] += 1
        elif c.get("verdict") == "direction":
            kinds["show the effect's direction, not its size"] += 1
        elif text.startswith("inconclusive"):
            kinds["are inconclusive (the interval is wider than the tolerance band)"] += 1
        elif text.startswith("not measured"):
            kinds["are not measured"] += 1
        elif "the paper's effect is not shown" in text:
            kinds["lie within the band but show no effect"] += 1
        else:
            kinds["measure a different number"] += 1
        # The claim's own cause, after the verdict model's diagnosis; numbers stripped, the same
        # mechanism named by several claims is what the reader should know first.
        own = text
        for end in ("would decide; ", "is not shown; ", "crosses it; "):
            if end in own:
                own = own.split(end, 1)[1]
                break
        else:
            if own.startswith(("inconclusive", "measured ", "not measured")):
                own = ""
        if own:
            key = re.sub(r"[-+]?\d[\d,.]*(?:e[-+]?\d+)?", "#", own)[:100]
            recurring[key] += 1
            example.setdefault(key, own)
    line = f"Of {len(misses)} claims that miss, " + ", ".join(f"{n} {k}" for k, n in kinds.most_common()) + "."
    if recurring:
        key, n = recurring.most_common(1)[0]
        line += (" Most frequent cause" if n > 1 else " For example") + f": “{_shorten(example[key], 200)}”" \
            + (f" (×{n})." if n > 1 else ".")
    return line


def _shorten(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1].rsplit(" ", 1)[0] + "…"


def _png_width(path: Path) -> int:
    """The PNG's width in pixels (its IHDR), 0 if unreadable."""
    try:
        with open(path, "rb") as f:
            head = f.read(24)
        return int.from_bytes(head[16:20], "big") if head[:8] == b"\x89PNG\r\n\x1a\n" else 0
    except OSError:
        return 0


def figure_html(path: Path, caption: str, link: str | None = None, paper_numbers: bool = False) -> str:
    """A figure with its caption. Wide figures (multi-panel ones) take the page's full width;
    the image links to the PNG itself, which the browser shows at full size."""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    wide = _png_width(path) >= 1100
    label = caption or f"{path.name} (no caption declared by the reproduction)"
    if paper_numbers:
        label = "◆ " + label
    img = f'<img alt="{_e(label)}" src="data:image/png;base64,{data}">'
    if link:
        img = f'<a href="{_e(link)}" title="open at full size">{img}</a>'
    return f'<figure class="{"wide" if wide else ""}">{img}<figcaption>{_e(label)}</figcaption></figure>'


def claims_by_verdict(claims: list[dict], ids: "_Ids", name: str) -> str:
    """The claims table folded by verdict: one <details> per verdict with its count."""
    from .reproduce.claims import MODEL_CHECK, VERDICTS, counts_line

    out = []
    judged = [c for c in claims if c.get("verdict") != MODEL_CHECK]
    rep = sum(c.get("verdict") == "reproduced" for c in judged)
    out.append(f'<p><span class="badge {share_class(rep, sum(c.get("verdict") in ("reproduced", "direction", "not_reproduced") for c in judged))}">'
               f"{_e(counts_line(claims))}</span></p>")
    for v in VERDICTS:
        group = [c for c in claims if (c.get("verdict") or ("reproduced" if c.get("holds") else "not_reproduced")) == v]
        if not group:
            continue
        table = claims_section(group, table_id=ids("claims", name, v), heading=False)
        out.append(f'<details class="verdict"><summary><b>{_e(v.replace("_", " "))}</b> ({len(group)})</summary>'
                   f"{table}</details>")
    return "".join(out)


def _thesis_figure(d: Path, paper: dict, claims: list[dict]) -> Path | None:
    """The paper's lead figure: the claims its thesis rests on, the paper's numbers beside ours
    (drawn into DIR/plots/ from the claims; None without a thesis or a numeric claim)."""
    from .reproduce import paper_figure

    t = _thesis_of(paper)
    if t is None or not t.get("claims"):
        return None
    wanted = {str(x) for x in t["claims"]}
    mine = [c for c in claims if str(c.get("id")) in wanted]
    if not paper_figure.numeric_claims(mine):
        return None
    out = d / "plots"
    out.mkdir(parents=True, exist_ok=True)
    return paper_figure.save(mine, out / f"{paper.get('paper')}_thesis_vs_paper.png",
                             f"{paper.get('title')}: the thesis's claims, the paper's numbers beside ours",
                             highlight=sorted(wanted))


def reproduction_figures(rd: Path, name: str, claims: list[dict]) -> list[tuple[Path, str, bool]]:
    """A reproduction's figures in the order it declares (the paper's numbers beside ours
    first), every PNG of its directory included: an undeclared one comes last, captioned as
    such. The claims figure is drawn from claims.json when the run predates it."""
    from .reproduce import paper_figure
    from .reproduce.framework import REGISTRY

    pngs = {p.name: p for p in sorted(rd.glob("*.png"))}
    if paper_figure.FILENAME not in pngs and claims:
        drawn = paper_figure.save(claims, rd / paper_figure.FILENAME, f"{name}: the paper's numbers beside ours")
        if drawn is not None:
            pngs = {drawn.name: drawn, **pngs}
    repro = REGISTRY.get(name)
    if repro is not None:
        listed = repro.figure_list(list(pngs))
    else:
        listed = [{"file": n, "caption": paper_figure.CAPTION if n == paper_figure.FILENAME else "",
                   "paper_numbers": n == paper_figure.FILENAME} for n in sorted(pngs, key=lambda n: n != paper_figure.FILENAME)]
    return [(pngs[f["file"]], f["caption"], bool(f["paper_numbers"])) for f in listed if f["file"] in pngs]


def build_all_report(d: Path, summary: dict, out: str | os.PathLike | None = None) -> Path:
    """The page of ``reproduce --all``, laid out as a paper's evaluation: first the five theses
    and their verdicts, then per paper its thesis, why its claims miss, its figures (the paper's
    numbers beside ours first, every figure of every reproduction, captioned) and its claims
    folded by verdict."""
    from .reproduce.claims import VERDICTS

    import matplotlib

    matplotlib.use("Agg")
    from .reproduce import framework  # noqa: F401  (registers the reproductions and their figures)

    ids = _Ids()
    labels = {v: v.replace("_", " ") for v in VERDICTS}
    papers = [dict(p) for p in summary.get("papers", []) if isinstance(p, dict)]
    # The theses may also come as the top-level list only (the contract has both).
    listed = {t.get("paper"): t for t in summary.get("theses") or [] if isinstance(t, dict)}
    for p in papers:
        p["_anchor"] = ids("paper", p.get("paper"))
        if _thesis_of(p) is None and isinstance(listed.get(p.get("paper")), dict):
            p["thesis"] = listed[p.get("paper")]
    n = summary.get("counts", {})
    body = [theses_section(dict(summary, papers=papers), ids)]

    rows = []
    for p in papers:
        c = p.get("counts", {})
        link = f'<a href="#{_e(p["_anchor"])}">{_e(p.get("title"))}</a>'
        rows.append([link, _e(", ".join(p.get("reproductions", []))), _e(fmt(p.get("wall_s")))]
                    + [_e(str(c.get(v, 0))) for v in VERDICTS])
    rows.append(["<b>all papers</b>", "", _e(fmt(summary.get("wall_s")))] + [f"<b>{n.get(v, 0)}</b>" for v in VERDICTS])
    front = _table(["paper", "reproductions", "time (s)", *[labels[v] for v in VERDICTS]], rows,
                   cls=["", "", "num"] + ["num"] * len(VERDICTS), table_id=ids("counts"))
    body.append("<h2>Verdicts per paper</h2>"
                '<p class="meta">reproduced: the paper\'s number lies within the claim\'s tolerance of the measured '
                "95 % confidence interval; direction: the paper's direction with the interval excluding no effect, "
                "not its magnitude; out of regime: a precondition of the paper's experiment does not hold in the run "
                "(not judged); model checks test our own model and are not counted with the paper's claims. "
                "◆ marks figures that draw the paper's own numbers beside ours; click a figure for its full "
                "size.</p>" + front)

    for p in papers:
        body.append(f'<h2 id="{_e(p["_anchor"])}">{_e(p.get("title"))}</h2>')
        t = _thesis_of(p)
        every: list[dict] = []
        per_repro: list[tuple[str, Path, dict, list[dict]]] = []
        for name in p.get("reproductions", []):
            rd = d / name
            claims = _read_json(rd / "claims.json")
            claims = [c for c in claims if isinstance(c, dict)] if isinstance(claims, list) else []
            every += claims
            per_repro.append((name, rd, _read_json(rd / "meta.json") or {}, claims))
        if t is None:
            body.append('<div class="thesis"><p><b>Thesis:</b> <span class="note">thesis not declared</span> '
                        f'{_counts_badge(p.get("counts", {}))}</p></div>')
        else:
            src = f' <span class="meta">({_e(t["source"])})</span>' if t.get("source") else ""
            ev = f'<p class="meta">{_e(t["evidence"])}</p>' if t.get("evidence") else ""
            body.append(f'<div class="thesis"><p><b>Thesis:</b> {_e(t["statement"])}{src}</p>'
                        f"<p><b>Verdict:</b> {_verdict_badge(t.get('verdict'))} {_counts_badge(p.get('counts', {}))}"
                        f"</p>{ev}</div>")
        why = why_claims_miss([c for c in every if c.get("verdict") != "model_check"])
        if why:
            body.append(f'<p class="why"><b>Why claims miss.</b> {_e(why)}</p>')
        for name, err in (p.get("errors") or {}).items():
            body.append(f'<p class="note">{_e(name)} failed to run: {_e(err)}</p>')
        lead = _thesis_figure(d, p, every)
        if lead is not None:
            body.append(figure_html(lead, "The claims the thesis rests on: the paper's numbers beside ours (ours ÷ "
                                          "the paper's, 1 = the paper; bar: 95 % CI; shaded: tolerance)",
                                    link=os.path.relpath(lead, d), paper_numbers=True))
        for name, rd, meta, claims in per_repro:
            body.append(f'<h3 id="{_e(ids("repro", name))}">{_e(name)}: {_e(meta.get("figure", ""))}</h3>')
            if meta.get("description"):
                body.append(f'<p class="meta">{_e(meta["description"])}</p>')
            for path, caption, paper_numbers in reproduction_figures(rd, name, claims):
                body.append(figure_html(path, caption, link=os.path.relpath(path, d), paper_numbers=paper_numbers))
            if claims:
                body.append(claims_by_verdict(claims, ids, name))
    title = "microsched: the five papers, reproduced"
    sub = [QUICK_NOTE] if summary.get("quick") else []
    now = _dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    page = (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{_e(title)}</title>"
        f"<style>{CSS}{ALL_CSS}</style></head><body><h1>{_e(title)}</h1>"
        + "".join(f'<p class="meta"><b>{_e(s)}</b></p>' for s in sub)
        + f'<p class="meta">microsched {_e(_version())} · <code>{_e(d.resolve())}</code> · {now}</p>'
        + "".join(body) + "</body></html>\n")
    path = Path(out) if out is not None else d / REPORT_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path


_CAPTIONS = {
    "latency": "End-to-end latency p50 / p99 / p99.9 vs load (means over seeds, 95 % CI error bars)",
    "throughput": "Throughput (solid) and goodput within the SLO (dashed) vs offered load",
    "pareto": "p99 latency vs CPU utilization; circled: the Pareto front (no point has both lower)",
    "slowdown": "p99 slowdown (latency / service time) vs load, per request type",
    "timeseries": "Cores, credits, queues and drops over simulated time (grey: warm-up)",
}


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("microsched")
    except Exception:  # noqa: BLE001
        return "unknown"
