"""The registry of reproductions and the common driver behind ``microsched reproduce NAME``.

A reproduction is a sweep spec (``experiments/NAME/sweep.toml``: base scenario, grid,
variants, seeds, a ``[quick]`` profile) plus an ``analyze`` function that turns the result
rows into claims and figures. The driver runs the grid on a local process pool, writes

    OUT/results.parquet    one row per run: parameters + every summary metric (flattened)
    OUT/aggregate.parquet  means over seeds, with 95 % confidence half-widths (``M.ci95``) and n
    OUT/claims.json        [{"id", "claim", "paper", "measured", "holds", ...}]
    OUT/*.png              the figures
    OUT/meta.json          what was run: the spec as run, the paper and figure, jobs, wall time

and returns them. Results are written before the analysis runs, so a failing analysis never
loses a finished sweep.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import pandas as pd

from .claims import Claim, ClaimSpec, write_claims
from .parts import RowStore
from ..sweep.runner import _tidy
from .runner import SERIES_KEY, aggregate, default_jobs, run_points, run_tasks
from .spec import SpecError, SweepSpec

RESULTS_FILE = "results.parquet"
AGGREGATE_FILE = "aggregate.parquet"
CLAIMS_FILE = "claims.json"
META_FILE = "meta.json"
EXTRA_DIR = "parts/extra"  # the extra runs' results (Context.run_extra), kept for --resume
THESIS_FILE = "thesis.json"  # the paper's thesis judged on this run, for a reproduction that declares it


@dataclass
class Context:
    """What an ``analyze`` function gets: the spec as run, the rows, their means over seeds,
    and the output directory (save figures with :meth:`save_figure`)."""

    name: str
    spec: SweepSpec
    results: pd.DataFrame
    aggregate: pd.DataFrame
    out: Path
    quick: bool
    figures: list[Path] = field(default_factory=list)
    condition: str | None = None  # the named condition the variants ran under, if any
    semantics: str | None = None  # --semantics NAME: experiments/NAME/semantics-NAME.toml applied
    # A sensitivity run's cost setting (already in the spec's variants); a reproduction that runs
    # sweeps of its own beside the spec applies it to their variants too.
    extra: Condition | None = None
    # The reproduction's --jobs: what runs it adds beside the spec's sweep may use at once.
    jobs: int = 1
    # The reproduction's progress (runs done, runs known): its extra runs count too.
    progress: Callable[[int, int], None] | None = None
    n_runs: int = 0  # the runs known so far (the spec's points, the declared extra runs, then any other)
    n_done: int = 0  # the runs finished (or found saved) so far
    # The keys (:func:`extra_key`) of the extra runs the reproduction declared before its sweep
    # (``register(extra_runs=...)``): counted in ``n_runs`` from the start and run by
    # :meth:`run_declared`, so that the analysis's ``run_extra`` of them only reads them.
    declared: set[str] = field(default_factory=set)
    undeclared: int = 0  # the extra runs the analysis ran that were not declared (nor the sweep's)

    def _tick(self, n: int = 1) -> None:
        self.n_done += n
        if self.progress:
            self.progress(self.n_done, self.n_runs)

    def _save(self, key: str, result: Any) -> None:
        save_extra_as(self.out, key, result)
        self._tick()

    def _saved(self, key: str) -> Path:
        return self.out / EXTRA_DIR / f"{key}.pickle"

    def declare(self, batches: Sequence[ExtraRuns]) -> int:
        """Counts ``batches`` in the reproduction's runs before anything runs; returns how many."""
        new = {extra_key(b.fn, a) for b in batches for a in b.args} - self.declared
        self.declared |= new
        self.n_runs += len(new)
        return len(new)

    def run_declared(self, batches: Sequence[ExtraRuns]) -> None:
        """Runs the declared ``batches`` together, ``jobs`` at a time on one pool (one start-up
        for them all), each saved at once as :meth:`run_extra` saves it; what is saved already
        (``--resume``) is not run again."""
        from ..sweep.worker import call

        tasks: dict[str, tuple[Callable[[Any], Any], Any]] = {}
        seen: set[str] = set()
        for b in batches:
            for a in b.args:
                k = extra_key(b.fn, a)
                if k in seen:
                    continue
                seen.add(k)
                if not (self._saved(k).is_file() and (b.kept is None or b.kept(a))):
                    tasks[k] = (b.fn, a)
        self._tick(len(seen) - len(tasks))  # saved (--resume): done
        keys = list(tasks)
        run_tasks(call, list(tasks.values()), self.jobs, on_result=lambda j, r: self._save(keys[j], r))

    def run_extra(self, fn: Callable[[Any], Any], args: Sequence[Any],
                  kept: Callable[[Any], bool] | None = None) -> list[Any]:
        """The extra runs a reproduction needs beside its spec's sweep (time series, bisections,
        sub-sweeps, traced runs): ``fn(a)`` for every ``a`` of ``args`` (``fn`` a module-level
        function of picklable arguments), ``jobs`` at a time on the framework's one worker pool
        (:func:`microsched.sweep.runner.run_tasks`), the results in order. Each result is saved
        at once in ``OUT/parts/extra/`` so that ``--resume`` runs only the missing ones (the parts
        of a fresh reproduction are cleared, so a saved result is always this profile's), and
        each counts in the reproduction's progress. With ``kept``, a saved result is used only
        where ``kept(a)`` holds (what the run wrote beside its result, a trace file, is still
        there); otherwise it runs again. Runs the reproduction declared (``register(extra_runs=
        ...)``) ran after the sweep and are read here, counted once."""
        import pickle

        keys = [extra_key(fn, a) for a in args]
        results: dict[int, Any] = {}
        fresh = [k not in self.declared for k in keys]
        self.n_runs += sum(fresh)
        for i, k in enumerate(keys):
            if self._saved(k).is_file() and (kept is None or kept(args[i])):
                results[i] = pickle.loads(self._saved(k).read_bytes())
        self._tick(sum(fresh[i] for i in results))  # what was saved counts as done, in one report
        todo = [i for i in range(len(args)) if i not in results]
        self.undeclared += sum(fresh[i] for i in todo)

        def save(j: int, result: Any) -> None:
            i = todo[j]
            results[i] = result
            save_extra_as(self.out, keys[i], result)
            # A declared run that runs again here (its trace file went missing) was counted.
            self._tick(1 if fresh[i] else 0)

        run_tasks(fn, [args[i] for i in todo], self.jobs, on_result=save)
        return [results[i] for i in range(len(args))]

    def save_figure(self, fig: Any, filename: str) -> Path:
        import matplotlib.pyplot as plt

        path = self.out / filename
        fig.savefig(path, dpi=130)
        plt.close(fig)
        self.figures.append(path)
        return path

    def require_variants(self, *names: str) -> None:
        """Raises ``ValueError`` naming the spec when it lacks a variant the analysis compares."""
        missing = set(names) - set(self.results["variant"])
        if missing:
            raise ValueError(f"{self.spec.path}: variants: {self.name} needs {' and '.join(names)}; missing "
                             f"{', '.join(sorted(missing))}")


def extra_key(fn: Callable[[Any], Any], arg: Any) -> str:
    """The name of ``fn(arg)``'s saved result in ``OUT/parts/extra/`` (:meth:`Context.run_extra`)."""
    import hashlib
    import pickle

    what = f"{fn.__module__}.{fn.__qualname__}"
    return hashlib.sha256(pickle.dumps((what, arg), protocol=4)).hexdigest()[:24]


def save_extra(out: Path, fn: Callable[[Any], Any], arg: Any, result: Any) -> None:
    """Saves ``result`` as ``fn(arg)``'s in ``OUT/parts/extra/``, as :meth:`Context.run_extra`
    does: a later ``run_extra(fn, [arg])`` reads it instead of running it."""
    save_extra_as(out, extra_key(fn, arg), result)


def save_extra_as(out: Path, key: str, result: Any) -> None:
    """Saves ``result`` under ``key`` (:func:`extra_key`) in ``OUT/parts/extra/``, atomically."""
    import pickle

    store = out / EXTRA_DIR
    store.mkdir(parents=True, exist_ok=True)
    tmp = store / f".{key}.{os.getpid()}.tmp"
    tmp.write_bytes(pickle.dumps(result, protocol=4))
    os.replace(tmp, store / f"{key}.pickle")


@dataclass(frozen=True)
class ExtraRuns:
    """Extra runs a reproduction declares before its sweep (``register(extra_runs=...)``):
    ``fn(a)`` for every ``a`` of ``args``, as its analysis will ask for them with
    ``ctx.run_extra(fn, args, kept)``."""

    fn: Callable[[Any], Any]
    args: tuple[Any, ...]
    kept: Callable[[Any], bool] | None = None


@dataclass(frozen=True)
class Condition:
    """A named variation of a reproduction's runs (``reproduce NAME --condition C``): extra
    overrides appended to each variant's own, as ``sets(variant)`` returns them (a condition may
    apply to some variants only)."""

    description: str
    sets: Callable[[Any], tuple[str, ...]]


SHOWN = "shown"
THESIS_DIRECTION = "direction"
NOT_SHOWN = "not_shown"
THESIS_VERDICTS = (SHOWN, THESIS_DIRECTION, NOT_SHOWN)


@dataclass(frozen=True)
class Thesis:
    """A paper's central claim (the one its abstract makes), declared by one of its
    reproductions with the ids of its claims that decide it. :meth:`judge` gives

    ``shown``      every deciding claim is reproduced;
    ``direction``  every deciding claim holds at least in direction (reproduced or direction);
    ``not_shown``  otherwise (a claim not reproduced, out of regime, derived or not run).
    """

    statement: str
    source: str  # where the paper makes it, e.g. "abstract"
    claims: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.statement or not self.source:
            raise ValueError("Thesis: statement and source must be non-empty")
        if not self.claims:
            raise ValueError("Thesis: claims: name the claim ids that decide it")

    def judge(self, claims: Sequence[dict], error: str | None = None) -> dict:
        """The thesis object of ``summary.json`` and ``thesis.json``, judged on ``claims`` (the
        declaring reproduction's claims.json); ``error`` when that reproduction failed to run."""
        from .claims import DIRECTION, REPRODUCED, fmt_number

        by_id = {c["id"]: c for c in claims}
        deciding = [by_id.get(i) for i in self.claims]
        out = {"statement": self.statement, "source": self.source, "claims": list(self.claims)}
        if error is not None or any(c is None for c in deciding):
            missing = [i for i, c in zip(self.claims, deciding) if c is None]
            why = error or f"the run has no claim {', '.join(missing)}"
            return {**out, "verdict": NOT_SHOWN, "evidence": f"Not tested: {why}."}
        verdicts = [c["verdict"] for c in deciding]
        n_rep = verdicts.count(REPRODUCED)
        if n_rep == len(verdicts):
            verdict = SHOWN
        elif all(v in (REPRODUCED, DIRECTION) for v in verdicts):
            verdict = THESIS_DIRECTION
        else:
            verdict = NOT_SHOWN
        n_dir = verdicts.count(DIRECTION)
        first = f"{n_rep} of {len(verdicts)} deciding claims reproduced" + (f", {n_dir} in direction only" if n_dir else "")
        worst = next((c for c in deciding if c["verdict"] not in (REPRODUCED, DIRECTION)), None) \
            or next((c for c in deciding if c["verdict"] == DIRECTION), None)
        if worst is None:
            shown = "; ".join(f"{c['id']} {fmt_number(c.get('measured'))} (paper {fmt_number(c.get('paper'))})"
                              for c in deciding if c.get("paper") is not None)
            evidence = f"{first}: {shown}." if shown else f"{first}."
        else:
            ci = f" ± {fmt_number(worst['ci95'])}" if worst.get("ci95") is not None else ""
            paper = f" against the paper's {fmt_number(worst['paper'])}" if worst.get("paper") is not None else ""
            # the cause's first clause: the evidence stays one or two sentences
            cause = re.split(r"; |\. ", (worst.get("cause") or {}).get("text") or "")[0].rstrip(".")
            evidence = (f"{first}. {worst['id']} is {worst['verdict'].replace('_', ' ')}: measured "
                        f"{fmt_number(worst.get('measured'))}{ci}{paper}" + (f" ({cause})" if cause else "") + ".")
        return {**out, "verdict": verdict, "evidence": evidence}


@dataclass(frozen=True)
class Figure:
    """A figure a reproduction draws, as its report shows it: the file, a caption that says what
    is shown, and whether it draws the paper's own numbers beside ours (those lead the list)."""

    file: str
    caption: str
    paper_numbers: bool = False


@dataclass(frozen=True)
class Reproduction:
    name: str
    paper: str
    figure: str
    description: str
    spec: str  # path of the sweep spec, relative to the repository's experiments/ directory
    analyze: Callable[[Context], list[Claim]]
    group_by: tuple[str, ...] = ("variant",)  # aggregate over seeds within (group_by + grid keys)
    conditions: tuple[tuple[str, Condition], ...] = ()
    claims: tuple[ClaimSpec, ...] = ()  # the claims it judges, declared before any run
    costs: tuple[Any, ...] = ()  # the model costs its verdicts may depend on (sensitivity.Cost)
    thesis: Thesis | None = None  # its paper's central claim, when this reproduction decides it
    # The semantics it runs under by default (a semantics-NAME.toml next to its spec): a paper whose
    # artifact is a simulator is reproduced under that simulator's semantics, as an artifact is the
    # default everywhere; this project's own model is then the named semantics "ours".
    default_semantics: str | None = None

    figures: tuple[Figure, ...] = ()  # the figures it draws, with their captions, in the report's order
    # Time series columns its analysis needs of every point of its sweep, as they are run
    # (``series_of((point.scenario, point.seed, point.overrides, sweep_series))``): kept from the
    # sweep's own runs, so that the analysis's run_extra finds them saved instead of running each
    # point a second time.
    sweep_series: tuple[str, ...] = ()
    # The extra runs its analysis needs beside the sweep (time series, traced runs, sub-sweeps,
    # bisections), declared from the spec as run (a Context without results): counted in the
    # progress from the start and run on one pool right after the sweep.
    extra_runs: Callable[[Context], Sequence[ExtraRuns]] | None = None

    def figure_list(self, drawn: Sequence[str]) -> list[dict[str, Any]]:
        """The figures drawn (file names), in the order the report shows them: the paper's
        numbers beside ours first (the claims figure, then the declared ones), then the rest as
        declared, then any figure drawn but not declared (caption empty: the report says so)."""
        from .paper_figure import CAPTION, FILENAME

        declared = {f.file: f for f in self.figures}
        if FILENAME not in declared:
            declared = {FILENAME: Figure(FILENAME, CAPTION, paper_numbers=True), **declared}
        order = [f for f in declared.values() if f.paper_numbers] + [f for f in declared.values() if not f.paper_numbers]
        there = set(drawn)
        out = [{"file": f.file, "caption": f.caption, "paper_numbers": f.paper_numbers} for f in order
               if f.file in there]
        out += [{"file": name, "caption": "", "paper_numbers": False} for name in drawn if name not in declared]
        return out

    @property
    def paper_key(self) -> str:
        """The paper this reproduction is about (a key of :data:`PAPERS`)."""
        return PAPER_OF[self.name]

    def condition(self, name: str) -> Condition:
        """The condition ``name``; ``KeyError`` with the allowed names otherwise."""
        for n, c in self.conditions:
            if n == name:
                return c
        if not self.conditions:
            raise KeyError(f"unknown condition {name!r}: reproduction {self.name!r} has no conditions")
        allowed = ", ".join(n for n, _ in self.conditions)
        raise KeyError(f"unknown condition {name!r} for reproduction {self.name!r}: use one of {allowed}")


REGISTRY: dict[str, Reproduction] = {}

# The five papers, and which reproduction is about which.
PAPERS = {
    "coresync": "CoreSync (Pardeshi et al., ICNP'25)",
    "study": "Core allocation vs overload control (simulation study)",
    "protego": "Protego (NSDI'23)",
    "synergy": "Synergy (IFIP Networking 2026)",
    "harvest": "HarvestContainers (Hall et al., NSDI'26)",
}
PAPER_OF = {"allocators": "coresync", "coresync": "coresync", "collapse": "study", "load-shift": "study",
            "protego": "protego", "synergy": "synergy", "harvest": "harvest"}


def register(name: str, *, paper: str, figure: str, description: str, spec: str,
             group_by: tuple[str, ...] = ("variant",),
             conditions: tuple[tuple[str, Condition], ...] = (),
             claims: Sequence[ClaimSpec] = (),
             costs: Sequence[Any] = (),
             thesis: Thesis | None = None,
             default_semantics: str | None = None,
             figures: Sequence[Figure] = (),
             sweep_series: Sequence[str] = (),
             extra_runs: Callable[[Context], Sequence[ExtraRuns]] | None = None) -> Callable[[Callable[[Context], list[Claim]]],
                                                         Callable[[Context], list[Claim]]]:
    """Decorator: registers ``analyze`` as the reproduction ``name``."""

    def deco(fn: Callable[[Context], list[Claim]]) -> Callable[[Context], list[Claim]]:
        if name in REGISTRY:
            raise ValueError(f"reproduction {name!r} registered twice")
        if thesis is not None:
            unknown = set(thesis.claims) - {c.id for c in claims}
            if unknown:
                raise ValueError(f"reproduction {name!r}: its thesis names claims it does not declare: "
                                 f"{', '.join(sorted(unknown))}")
        REGISTRY[name] = Reproduction(name=name, paper=paper, figure=figure, description=description,
                                      spec=spec, analyze=fn, group_by=group_by, conditions=conditions,
                                      claims=tuple(claims), costs=tuple(costs), thesis=thesis,
                                      default_semantics=default_semantics, figures=tuple(figures),
                                      sweep_series=tuple(sweep_series), extra_runs=extra_runs)
        return fn

    return deco


def names() -> list[str]:
    return sorted(REGISTRY)


def get(name: str) -> Reproduction:
    """The reproduction ``name``; ``KeyError`` with the allowed names otherwise."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown reproduction {name!r}: use one of {', '.join(names())}") from None


def experiments_dir() -> Path:
    """``experiments/``: under the current directory (a checkout, or a user's own copy), else the
    one installed with the package (``microsched/experiments``; the repository's ``experiments``
    is a link to it), so that ``reproduce`` works from any directory and from a wheel."""
    for p in (Path.cwd() / "experiments", Path(__file__).resolve().parents[1] / "experiments"):
        if p.is_dir():
            return p
    raise FileNotFoundError("experiments/ not found: neither under the current directory nor installed with "
                            "the package")


def spec_path(repro: Reproduction) -> Path:
    p = experiments_dir() / repro.spec
    if not p.is_file():
        raise FileNotFoundError(f"experiment spec of {repro.name!r} not found: {p}")
    return p


@dataclass
class Outcome:
    name: str
    out: Path
    claims: list[dict]
    figures: list[Path]
    n_points: int
    jobs: int
    wall_s: float


# The named semantics of this project's own model, for a reproduction whose default is another's.
OURS = "ours"


def semantics_names(repro: Reproduction) -> list[str]:
    """The alternative semantics a reproduction offers: ``semantics-NAME.toml`` next to its spec,
    and ``ours`` (this project's model) where its default is another model's."""
    names_ = sorted(p.stem.removeprefix("semantics-") for p in spec_path(repro).parent.glob("semantics-*.toml"))
    return names_ + [OURS] if repro.default_semantics else names_


def apply_semantics(spec: SweepSpec, repro: Reproduction, semantics: str) -> dict:
    """Appends the overrides of ``semantics-NAME.toml`` (another model's semantics) to the spec's
    own, so that every point and the variants' own settings on top of them use it."""
    allowed = semantics_names(repro)
    if semantics not in allowed:
        raise SpecError(f"--semantics: {semantics!r} is not offered by {repro.name}: use "
                        f"{', '.join(allowed) or 'none (it has no alternative semantics)'}")
    if semantics == OURS:
        return {"name": OURS, "file": None, "description": "this project's own model: the sweep's overrides only"}
    p = spec_path(repro).parent / f"semantics-{semantics}.toml"
    raw = tomllib.loads(p.read_text(encoding="utf-8"))
    unknown = set(raw) - {"description", "overrides"}
    if unknown:
        raise SpecError(f"{p}: {sorted(unknown)[0]}: unknown field: use description, overrides")
    spec.overrides = [*spec.overrides, *raw.get("overrides", [])]
    return {"name": semantics, "file": str(p), "description": raw.get("description", "")}


def prepared_spec(repro: Reproduction, quick: bool = False, seeds: int | None = None,
                  semantics: str | None = None) -> tuple[SweepSpec, dict | None]:
    """The reproduction's sweep spec as it runs: under ``semantics``, else under its default
    semantics (``ours``: none applied); with the semantics' record for ``meta.json``."""
    spec = SweepSpec.load(spec_path(repro), quick=quick, seeds=seeds)
    chosen = semantics if semantics is not None else repro.default_semantics
    sem = apply_semantics(spec, repro, chosen) if chosen else None
    if sem is not None:
        sem["default"] = chosen == repro.default_semantics
    return spec, sem


def run_reproduction(name: str, out: str | Path | None = None, quick: bool = False, jobs: int | None = None,
                     seeds: int | None = None, progress: Callable[[int, int], None] | None = None,
                     resume: bool = False, condition: str | None = None, semantics: str | None = None,
                     extra: Condition | None = None) -> Outcome:
    """Runs reproduction ``name`` and writes its results, claims and figures to ``out``
    (default ``results/NAME``).

    Finished runs are saved in batches in ``out/parts/`` (:mod:`.parts`), and the extra runs
    of the analysis in ``out/parts/extra/`` (:meth:`Context.run_extra`); ``resume`` reuses
    those of an interrupted reproduction and runs only the rest (refused if the profile or seed
    set differs), with the results an uninterrupted reproduction gives. ``condition`` names one of the reproduction's conditions: its overrides
    are added to every variant (default ``out``: ``results/NAME-CONDITION``). ``extra`` is an
    unnamed condition (a sensitivity run's cost setting), recorded in ``meta.json``."""
    from ..sweep.engine import PARTS_DIR, SweepError, finished_ids, point_id

    repro = get(name)
    spec, sem = prepared_spec(repro, quick, seeds, semantics)
    named = semantics if semantics != repro.default_semantics else None  # the default names no output
    semantics = sem["name"] if sem else None
    if condition is not None:
        from dataclasses import replace

        cond = repro.condition(condition)
        spec.variants = [replace(v, set=tuple(v.set) + tuple(cond.sets(v))) for v in spec.variants]
    if extra is not None:
        from dataclasses import replace

        spec.variants = [replace(v, set=tuple(v.set) + tuple(extra.sets(v))) for v in spec.variants]
    points = spec.points()
    _validate_points(spec, points)
    jobs = default_jobs() if jobs is None else jobs
    suffix = "".join(f"-{x}" for x in (named, condition) if x)
    out_dir = Path(out) if out is not None else Path("results") / f"{name}{suffix}"
    parts = out_dir / PARTS_DIR
    stamp = {"reproduction": name, "quick": quick, "condition": condition,
             **({"extra": extra.description} if extra else {}),
             "spec": {k: v for k, v in spec.to_dict().items() if k != "spec"}}
    stamp_path = parts / "profile.json"
    if resume and stamp_path.is_file():
        old = json.loads(stamp_path.read_text(encoding="utf-8"))
        if json.dumps(old, sort_keys=True, default=str) != json.dumps(stamp, sort_keys=True, default=str):
            raise SweepError(f"--resume: the runs in {parts} were made with another profile, seed set or spec "
                             f"(quick={old.get('quick')}, seeds={old.get('spec', {}).get('seeds')}): use the same "
                             f"options, or another --out")
    elif parts.is_dir():
        shutil.rmtree(parts)  # a fresh reproduction starts from nothing
    parts.mkdir(parents=True, exist_ok=True)
    stamp_path.write_text(json.dumps(stamp, indent=2, default=str) + "\n", encoding="utf-8")
    ids = [point_id(p.overrides, p.seed) for p in points]
    store = RowStore(parts)
    saved: dict[int, dict] = {}
    if resume:
        found = store.load(ids, finished_ids(out_dir))
        saved = {i: found[pid] for i, pid in enumerate(ids) if pid in found}
    todo = [p for i, p in enumerate(points) if i not in saved]

    # The analysis's context, its results still empty: the extra runs it declares are counted
    # from the start.
    ctx = Context(name=name, spec=spec, results=pd.DataFrame(), aggregate=pd.DataFrame(), out=out_dir, quick=quick,
                  condition=condition, semantics=semantics, extra=extra, jobs=jobs, progress=progress,
                  n_runs=len(points))
    declared = list(repro.extra_runs(ctx)) if repro.extra_runs else []
    n_declared = ctx.declare(declared)
    from ..sweep.worker import series_of, series_task

    if repro.sweep_series:
        # The series the sweep's own runs return: read by the analysis, counted as the sweep's.
        ctx.declared |= {extra_key(series_of, series_task(p, repro.sweep_series)) for p in points}

    def save(point: Any, row: dict) -> None:
        series = row.pop(SERIES_KEY, None)
        if series is not None:
            save_extra(out_dir, series_of, series_task(point, repro.sweep_series), series)
        saved[point.index] = row
        store.add(ids[point.index], row)

    already = len(saved)  # `saved` grows as runs finish: the ticks count from what was there before

    def tick(n: int, total: int) -> None:
        if progress:
            progress(already + n, ctx.n_runs)

    t0 = time.perf_counter()
    if progress:
        progress(len(saved), ctx.n_runs)
    if todo:
        try:
            run_points(todo, jobs=jobs, progress=tick, on_row=save, series_columns=repro.sweep_series)
        finally:
            store.flush()  # what finished is kept, also when a point failed or Ctrl-C stopped the rest
    # Built as run_points builds it, so that a resumed reproduction equals an uninterrupted one.
    df = _tidy(pd.DataFrame([saved[i] for i in range(len(points))]))
    sweep_s = time.perf_counter() - t0
    df.to_parquet(out_dir / RESULTS_FILE, index=False)
    by = [c for c in (*repro.group_by, *spec.grid) if c in df.columns]
    agg = aggregate(df, by)
    agg.to_parquet(out_dir / AGGREGATE_FILE, index=False)

    meta = {
        "reproduction": name, "paper": repro.paper, "figure": repro.figure, "description": repro.description,
        "quick": quick, "condition": condition, "jobs": jobs, "points": len(points), "sweep_wall_s": round(sweep_s, 3),
        "microsched_version": _version(), "spec": spec.to_dict(),
        **({"semantics": sem} if sem else {}),
        **({"extra": extra.description} if extra else {}),
    }
    (out_dir / META_FILE).write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

    ctx.results, ctx.aggregate, ctx.n_done = df, agg, len(points)
    ctx.run_declared(declared)
    claims = repro.analyze(ctx)
    # Every extra run declared up front is the check of the declaration: the analysis ran none
    # beside them (tests/python assert it of every reproduction).
    meta["extra_runs"] = {"declared": n_declared, "undeclared": ctx.undeclared}
    write_claims(claims, out_dir / CLAIMS_FILE)
    if repro.thesis is not None:
        # claims.json stays a list (its layout is a contract): the thesis goes beside it
        meta["thesis"] = repro.thesis.judge([c.to_dict() for c in claims])
        (out_dir / THESIS_FILE).write_text(json.dumps(meta["thesis"], indent=2, ensure_ascii=False) + "\n",
                                           encoding="utf-8")

    from . import paper_figure

    drawn = paper_figure.save([c.to_dict() for c in claims], out_dir / paper_figure.FILENAME,
                              f"{repro.paper}, {name}: the paper's numbers beside ours")
    if drawn is not None:
        ctx.figures.insert(0, drawn)
    wall = time.perf_counter() - t0
    meta["wall_s"] = round(wall, 3)
    meta["figures"] = [p.name for p in ctx.figures]
    meta["figure_list"] = repro.figure_list(meta["figures"])
    (out_dir / META_FILE).write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return Outcome(name=name, out=out_dir, claims=[c.to_dict() for c in claims], figures=list(ctx.figures),
                   n_points=len(points), jobs=jobs, wall_s=wall)


def _validate_points(spec: SweepSpec, points) -> None:
    """Every distinct scenario of the sweep is validated before anything runs, so that a bad
    override fails at once with the field at fault (shared with ``microsched sweep``)."""
    from ..sweep.engine import validate_points

    validate_points(spec, points)


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("microsched")
    except Exception:  # noqa: BLE001
        return "unknown"


SUMMARY_FILE = "summary.json"


def run_all(out: str | Path | None = None, quick: bool = False, jobs: int | None = None, seeds: int | None = None,
            progress: Callable[[str, int, int], None] | None = None, resume: bool = False,
            only: Sequence[str] | None = None) -> dict:
    """Runs every reproduction (or those in ``only``), each into ``out/NAME`` as
    ``reproduce NAME`` writes it, and writes ``out/summary.json``: per paper, the counts by
    verdict and the claims not reproduced with their causes. A reproduction that fails is
    recorded with its error and the others still run. Returns the summary.

    With ``jobs`` > 1, two reproductions run at once (each in its own worker process, the
    heaviest first), sharing the ``jobs`` cores (an odd one to the heavier): a reproduction's
    analysis, figures and pool start-up then overlap the other's simulations, where one at a
    time on ``jobs`` cores left all but one core idle through them. The results are the same
    either way."""
    out_dir = Path(out) if out is not None else Path("results") / "all"
    out_dir.mkdir(parents=True, exist_ok=True)
    todo = list(only) if only else names()
    for n in todo:
        get(n)  # unknown names fail before anything runs
    jobs = default_jobs() if jobs is None else jobs
    t0 = time.perf_counter()
    if jobs > 1 and len(todo) > 1:
        runs = _run_side_by_side(todo, out_dir, quick, jobs, seeds, progress, resume)
    else:
        runs = [_run_one(n, out_dir, quick, jobs, seeds, (lambda d, t, n=n: progress(n, d, t)) if progress else None,
                         resume) for n in todo]
    summary = make_summary(runs, quick=quick, wall_s=time.perf_counter() - t0, jobs=jobs)
    (out_dir / SUMMARY_FILE).write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return summary


def _run_one(name: str, out_dir: Path, quick: bool, jobs: int, seeds: int | None,
             tick: Callable[[int, int], None] | None, resume: bool) -> dict:
    """One reproduction of ``run_all``: its outcome, or the error that stopped it."""
    t1 = time.perf_counter()
    try:
        o = run_reproduction(name, out=out_dir / name, quick=quick, jobs=jobs, seeds=seeds, progress=tick, resume=resume)
        return {"name": name, "out": str(o.out), "wall_s": round(o.wall_s, 1), "points": o.n_points, "claims": o.claims}
    except KeyboardInterrupt:
        raise
    except Exception as e:  # noqa: BLE001 - recorded, the others still run
        return {"name": name, "out": str(out_dir / name), "wall_s": round(time.perf_counter() - t1, 1),
                "error": f"{type(e).__name__}: {e}", "claims": []}


# The order in which `run_all` starts reproductions side by side: the longest first (quick profile
# on this project's 2-core machine kind: coresync ~100 s of one core, protego ~75 s, synergy and
# harvest ~70 s), so that the last to finish are short. Only the wall time depends on it.
HEAVIEST_FIRST = ("coresync", "protego", "synergy", "harvest", "allocators", "collapse", "load-shift")

def next_share(jobs: int, running: Sequence[int], at_once: int) -> int:
    """The jobs of a reproduction starting beside ``running`` (their jobs) under ``run_all``:
    what they leave, shared out rounding up, so that with an odd ``jobs`` the first of two
    started together (the heavier) takes the odd core and no core stays idle."""
    free = jobs - sum(running)
    return max(1, -(-free // (at_once - len(running))))


def _side_worker(queue: Any, parent_pid: int, name: str, out_dir: Path, quick: bool, jobs: int,
                 seeds: int | None, resume: bool) -> None:
    """A reproduction of ``run_all`` in its own process: its progress and its outcome go to
    ``queue``."""
    from ..sweep.runner import die_with_parent

    die_with_parent(parent_pid)
    try:
        run = _run_one(name, out_dir, quick, jobs, seeds, lambda done, total: queue.put(("tick", name, done, total)),
                       resume)
    except KeyboardInterrupt:
        return  # the driver was interrupted too: it stops the others and says where to resume
    queue.put(("done", name, run))


def _run_side_by_side(todo: list[str], out_dir: Path, quick: bool, jobs: int, seeds: int | None,
                      progress: Callable[[str, int, int], None] | None, resume: bool) -> list[dict]:
    import queue as queues

    from ..sweep.runner import main_hidden_from_spawn, mp_context

    mp = mp_context()  # the start method of every worker; each dies with this driver (_side_worker)
    messages = mp.Queue()
    waiting = sorted(todo, key=lambda n: HEAVIEST_FIRST.index(n) if n in HEAVIEST_FIRST else -1)
    # Two at a time, not one per core: the longest reproduction alone is about half of the work
    # (coresync), so more at once on fewer cores each would only make it the last to finish.
    at_once = min(2, len(todo))
    running: dict[str, Any] = {}
    runs: dict[str, dict] = {}
    started: dict[str, float] = {}
    held: dict[str, int] = {}  # the jobs each running reproduction was given
    silent: dict[str, float] = {}  # when a worker was first seen ended without its outcome
    try:
        while waiting or running:
            while waiting and len(running) < at_once:
                name = waiting.pop(0)
                held[name] = next_share(jobs, [held[r] for r in running], at_once)
                p = mp.Process(target=_side_worker, name=f"microsched-{name}",
                               args=(messages, os.getpid(), name, out_dir, quick, held[name], seeds, resume))
                with main_hidden_from_spawn():
                    p.start()
                running[name], started[name] = p, time.perf_counter()
            try:
                kind, name, *rest = messages.get(timeout=2.0)
            except queues.Empty:
                # A worker that ended without its outcome (killed, crashed, or interrupted alone):
                # its last messages are read first, so one that just finished is not taken for it.
                for name, p in list(running.items()):
                    if p.exitcode is not None and silent.setdefault(name, time.monotonic()) < time.monotonic() - 5:
                        runs[name] = {"name": name, "out": str(out_dir / name),
                                      "wall_s": round(time.perf_counter() - started[name], 1),
                                      "error": f"its worker process ended (exit code {p.exitcode}) without its "
                                               f"results", "claims": []}
                        del running[name]
                continue
            if kind == "tick":
                if progress:
                    progress(name, *rest)
            else:
                runs[name] = rest[0]
                p = running.pop(name, None)
                if p is not None:
                    p.join()
    except BaseException:
        for p in running.values():
            p.terminate()
        for p in running.values():
            p.join()
        raise
    return [runs[n] for n in todo]


def thesis_of(paper: str) -> tuple[str, Thesis] | None:
    """The reproduction declaring ``paper``'s thesis and the thesis; None if none does."""
    for n in names():
        r = REGISTRY[n]
        if r.paper_key == paper and r.thesis is not None:
            return n, r.thesis
    return None


def make_summary(runs: list[dict], quick: bool, wall_s: float, jobs: int) -> dict:
    from .claims import DERIVED, FIT_INPUT, REPRODUCED, VERDICTS, counts

    papers = []
    for key, title in PAPERS.items():
        mine = [r for r in runs if PAPER_OF.get(r["name"]) == key]
        if not mine:
            continue
        claims = [dict(c, reproduction=r["name"]) for r in mine for c in r["claims"]]
        papers.append({
            "paper": key, "title": title, "reproductions": [r["name"] for r in mine],
            "wall_s": round(sum(r["wall_s"] for r in mine), 1),
            "figures": {r["name"]: get(r["name"]).figure for r in mine},
            "counts": counts(claims),
            "errors": {r["name"]: r["error"] for r in mine if "error" in r},
            "not_reproduced": [
                {"reproduction": c["reproduction"], "id": c["id"], "verdict": c["verdict"], "paper": c.get("paper"),
                 "paper_ref": c.get("paper_ref"), "measured": c.get("measured"), "ci95": c.get("ci95"),
                 "unit": c.get("unit"), "cause": (c.get("cause") or {}).get("text")}
                for c in claims if c["verdict"] not in (REPRODUCED, "model_check", DERIVED, FIT_INPUT)],
        })
        declared = thesis_of(key)
        run = next((r for r in mine if declared and r["name"] == declared[0]), None)
        if run is not None:
            papers[-1]["thesis"] = declared[1].judge(run["claims"], run.get("error"))
    total = {v: sum(p["counts"][v] for p in papers) for v in VERDICTS}
    theses = [{"paper": p["paper"], "title": p["title"], "statement": p["thesis"]["statement"],
               "verdict": p["thesis"]["verdict"], "evidence": p["thesis"]["evidence"]}
              for p in papers if "thesis" in p]
    return {"quick": quick, "jobs": jobs, "wall_s": round(wall_s, 1), "counts": total, "papers": papers,
            "theses": theses,
            "reproductions": [{k: v for k, v in r.items() if k != "claims"} | {"counts": counts(r["claims"])}
                              for r in runs],
            "microsched_version": _version(), "ok": bool(runs) and not any("error" in r for r in runs)}


def summary_markdown(summary: dict, quick: dict | None = None) -> str:
    """The README's reproduction table: per paper, its reproductions, figures, time, counts and
    the verdict of its thesis;
    with ``quick`` (a ``reproduce --all --quick`` summary) also the quick profiles' times."""
    quick_s = {p["title"]: p["wall_s"] for p in quick["papers"]} if quick else {}
    time_head, time_align = ("full (s) | quick (s)", "---:|---:") if quick else ("time (s)", "---:")
    lines = [f"| paper | reproduction (`microsched reproduce NAME`) | figures | {time_head} | reproduced | direction "
             "| not reproduced | out of regime | model checks | thesis |",
             f"|---|---|---|{time_align}|---:|---:|---:|---:|---:|---|"]

    def times(full: float, q: float | None) -> str:
        return f"{full:.0f} | {q:.0f}" if quick else f"{full:.0f}"

    for p in summary["papers"]:
        n = p["counts"]
        figs = "; ".join(p["figures"][r] for r in p["reproductions"])
        lines.append(f"| {p['title']} | {', '.join(p['reproductions'])} | {figs} | "
                     f"{times(p['wall_s'], quick_s.get(p['title'], math.nan))} | "
                     f"{n['reproduced']} | {n['direction']} | {n['not_reproduced']} | {n['out_of_regime']} | "
                     f"{n['model_check']} | {p['thesis']['verdict'].replace('_', ' ') if p.get('thesis') else '–'} |")
    n = summary["counts"]
    lines.append(f"| **all** | | | {times(summary['wall_s'], quick['wall_s'] if quick else None)} | "
                 f"**{n['reproduced']}** | {n['direction']} | {n['not_reproduced']} | {n['out_of_regime']} | "
                 f"{n['model_check']} | |")
    # The theses' statements and evidence are in summary.json and printed by reproduce --all: the
    # README's first screen has room for their verdicts only.
    return "\n".join(lines) + "\n"
