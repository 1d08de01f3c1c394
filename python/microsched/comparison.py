"""Compare policies on your own workload: :func:`compare` (and ``microsched compare``).

Every variant runs the same scenario at every load with the same seeds, so every seed sees
the very same requests under every variant (common random numbers). Each variant is compared
with the baseline seed by seed (difference and ratio), then summarised as a mean over seeds
with its 95 % confidence half-width: the noise the seeds share cancels out of the comparison.

    from microsched import compare
    c = compare("my.toml", {"fcfs": [], "caladan": ["policy.allocator.kind=caladan"]},
                loads=[0.3, 0.6, 0.9], seeds=5)
    c.paired        # DataFrame: load, metric, variant, baseline, diff, diff_ci95, ratio, ratio_ci95, ...
    c.aggregate     # DataFrame: per variant and load, every metric's mean and M.ci95
    c.plot("out/")  # latency-vs-load and cores-vs-load figures
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import pandas as pd

from .reproduce.stats import safe_ratio
from .sweep.runner import aggregate, default_jobs, mean_ci95, run_points
from .sweep.spec import SpecError, SweepSpec, format_value

DEFAULT_METRICS = ("latency_us.p50", "latency_us.p99", "latency_us.p999", "throughput_rps", "goodput_rps",
                   "drop_rate", "cores.allocated_mean", "cpu_utilization")
LOAD_KEY = "load.fraction"


class CompareError(ValueError):
    """Bad input to :func:`compare`; the message names the argument."""


@dataclass
class Comparison:
    """The outcome of :func:`compare`.

    Attributes:
        results: one row per run (variant, load, seed, every summary metric).
        aggregate: per variant and load, each metric's mean over seeds, ``M.ci95`` and ``n``.
        paired: per load, metric and variant (other than the baseline): the variant's and the
            baseline's means, the paired difference and ratio with their 95 % CIs, and ``n``.
        baseline: the variant every other is compared with.
        load_key: the dotted key the loads set.
    """

    results: pd.DataFrame
    aggregate: pd.DataFrame
    paired: pd.DataFrame
    baseline: str
    load_key: str

    def plot(self, out: str | os.PathLike) -> list[Path]:
        """Draws ``compare_latency.png`` (p50/p99/p99.9 against load) and ``compare_cores.png``
        (cores allocated and throughput against load) into ``out``; returns their paths."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        out_dir = Path(out)
        out_dir.mkdir(parents=True, exist_ok=True)
        agg = self.aggregate.sort_values(self.load_key)
        paths = []
        for filename, panels in (
                ("compare_latency.png", [("latency_us.p50", "p50 latency (µs)"), ("latency_us.p99", "p99 latency (µs)"),
                                         ("latency_us.p999", "p99.9 latency (µs)")]),
                ("compare_cores.png", [("cores.allocated_mean", "cores allocated (mean)"),
                                       ("throughput_rps", "throughput (req/s)"), ("drop_rate", "drop rate")])):
            panels = [(m, lab) for m, lab in panels if m in agg.columns]
            if not panels:
                continue
            fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.8), constrained_layout=True,
                                     squeeze=False)
            for ax, (m, lab) in zip(axes[0], panels):
                for v in agg["variant"].unique():
                    d = agg[agg["variant"] == v]
                    err = d.get(f"{m}.ci95")
                    ax.errorbar(d[self.load_key], d[m], yerr=None if err is None else err.fillna(0), marker="o",
                                capsize=2, label=v)
                ax.set_xlabel(self.load_key)
                ax.set_ylabel(lab)
                ax.grid(alpha=0.3)
                if m.startswith("latency"):
                    ax.set_yscale("log")
            axes[0][0].legend(fontsize=8)
            fig.suptitle("means over seeds, bars: 95 % CI", fontsize=9)
            path = out_dir / filename
            fig.savefig(path, dpi=120)
            plt.close(fig)
            paths.append(path)
        return paths

    def save(self, out: str | os.PathLike) -> Path:
        """Writes ``results.parquet``, ``aggregate.parquet``, ``paired.csv`` and the figures."""
        d = Path(out)
        d.mkdir(parents=True, exist_ok=True)
        self.results.to_parquet(d / "results.parquet", index=False)
        self.aggregate.to_parquet(d / "aggregate.parquet", index=False)
        self.paired.to_csv(d / "paired.csv", index=False)
        self.plot(d)
        return d

    def _repr_html_(self) -> str:
        return self.paired.to_html(index=False, float_format=lambda x: f"{x:.4g}")


def parse_variant(text: str) -> tuple[str, list[str]]:
    """``NAME`` or ``NAME:KEY=VALUE[,KEY=VALUE...]`` (a variant with no settings runs the scenario
    as it is)."""
    name, _, rest = text.partition(":")
    name = name.strip()
    if not name:
        raise CompareError(f"--variant {text!r}: give NAME or NAME:KEY=VALUE[,KEY=VALUE...]")
    sets = [s.strip() for s in rest.split(",") if s.strip()] if rest else []
    bad = [s for s in sets if "=" not in s]
    if bad:
        raise CompareError(f"--variant {text!r}: {bad[0]!r} is not KEY=VALUE")
    return name, sets


def compare(scenario: str | os.PathLike | Mapping[str, Any], variants: Mapping[str, Sequence[str]] | Sequence[str],
            loads: Sequence[float] | None = None, *, load_key: str = LOAD_KEY, seeds: int = 3,
            baseline: str | None = None, metrics: Sequence[str] = DEFAULT_METRICS, overrides: Iterable[str] = (),
            jobs: int | None = None, progress: Callable[[int, int], None] | None = None) -> Comparison:
    """Runs every variant of ``scenario`` at every load with seeds 1..``seeds`` and compares
    each with ``baseline`` (default: the first variant), seed by seed.

    ``variants`` maps a name to its ``dotted.key=value`` settings, or is a list of
    ``NAME:KEY=VALUE,...`` strings as the CLI takes them. ``loads`` are values of ``load_key``
    (default ``load.fraction``, the offered load as a fraction of capacity); without them the
    scenario's own load is used."""
    if isinstance(variants, Mapping):
        var = {str(k): [str(s) for s in v] for k, v in variants.items()}
    else:
        var = dict(parse_variant(str(t)) for t in variants)
        if len(var) != len(variants):
            raise CompareError("variants: two variants have the same name")
    if len(var) < 2:
        raise CompareError(f"variants: give at least two to compare, got {len(var)}")
    base = baseline if baseline is not None else next(iter(var))
    if base not in var:
        raise CompareError(f"baseline: {base!r} is not a variant: use one of {', '.join(var)}")
    if isinstance(seeds, bool) or int(seeds) != seeds or seeds < 2:
        raise CompareError(f"seeds: {seeds!r}: use 2 or more (a confidence interval needs two seeds)")
    seeds = int(seeds)
    load_list = [float(x) for x in loads] if loads else None
    if load_list is not None and any(not math.isfinite(x) or x <= 0 for x in load_list):
        raise CompareError(f"loads: {loads!r}: every load must be a positive number")
    for name, sets in var.items():
        # A variant that sets what the baseline sets (nothing, usually) runs the baseline again
        # under another name and compares it with itself: "0 ± 0", never what was meant.
        if name != base and sorted(sets) == sorted(var[base]):
            example = f"{name}:policy.allocator.kind={name}" if not sets else f"{name}:KEY=VALUE"
            raise CompareError(
                f"--variant {name!r} sets nothing the baseline {base!r} does not, so it would run the baseline "
                f"again: give its settings as NAME:KEY=VALUE,... (e.g. {example})")

    with tempfile.TemporaryDirectory(prefix="microsched-compare-") as tmp:
        base_path = _scenario_file(scenario, Path(tmp))
        # Errors name what the user gave (their scenario file, the --variant), never the
        # temporary sweep spec compare writes for itself.
        source = str(base_path) if not isinstance(scenario, Mapping) and base_path.parent != Path(tmp) \
            else "the scenario"
        raw: dict[str, Any] = {"base": str(base_path), "seeds": seeds, "overrides": list(overrides),
                               "variants": [{"name": n, "set": s} for n, s in var.items()]}
        if load_list:
            raw["grid"] = {load_key: load_list}
        spec_path = Path(tmp) / "compare.toml"
        try:
            spec = SweepSpec.from_dict(raw, path=spec_path)
        except SpecError as e:
            raise CompareError(str(e).replace(f"{spec_path}: ", "", 1)) from None
        from .sweep.engine import validate_points

        points = spec.points()
        validate_points(spec, points, source=source)
        df = run_points(points, jobs=default_jobs() if jobs is None else jobs, progress=progress)
    key = load_key if load_list else None
    if key is None:
        df[load_key] = math.nan
    agg = aggregate(df, ["variant", load_key])
    return Comparison(results=df, aggregate=agg, paired=paired_table(df, base, load_key, metrics), baseline=base,
                      load_key=load_key)


def paired_table(df: pd.DataFrame, baseline: str, load_key: str, metrics: Sequence[str]) -> pd.DataFrame:
    """Per load, metric and non-baseline variant: the paired difference and ratio over seeds."""
    rows = []
    present = [m for m in metrics if m in df.columns]
    values = df[load_key].astype(float)
    # NaN (the scenario's own load) once: a set of floats keeps every NaN apart.
    loads = sorted(set(values.dropna())) + ([math.nan] if values.isna().any() else [])
    for at in loads:
        here = df[df[load_key].isna()] if math.isnan(at) else df[df[load_key].astype(float) == at]
        b = here[here["variant"] == baseline].set_index("seed")
        for v in [v for v in here["variant"].unique() if v != baseline]:
            o = here[here["variant"] == v].set_index("seed")
            both = o.index.intersection(b.index)
            for m in present:
                x, y = o.loc[both, m].astype(float), b.loc[both, m].astype(float)
                d_mean, d_ci, n = mean_ci95(list(x - y))
                r_mean, r_ci, _ = mean_ci95([safe_ratio(a, c) for a, c in zip(x, y)])
                rows.append({load_key: at, "metric": m, "variant": v, "baseline": baseline,
                             "mean": float(x.mean()), "baseline_mean": float(y.mean()),
                             "diff": d_mean, "diff_ci95": d_ci, "ratio": r_mean, "ratio_ci95": r_ci, "n": n,
                             "significant": bool(math.isfinite(d_ci) and abs(d_mean) > d_ci)})
    return pd.DataFrame(rows)


def _scenario_file(scenario: Any, tmp: Path) -> Path:
    from .scenario import Scenario

    if isinstance(scenario, Scenario):
        scenario = scenario.to_dict()
    if isinstance(scenario, Mapping):
        p = tmp / "scenario.json"
        p.write_text(json.dumps(scenario), encoding="utf-8")
        return p
    p = Path(scenario)
    if not p.is_file():
        raise CompareError(f"scenario: file not found: {p}")
    return p.resolve()


def format_load(v: float) -> str:
    return "–" if math.isnan(v) else format_value(v)
