"""The timeline figure of ``microsched reproduce coresync`` (issue 45): CoreSync and Shenango at
load 0.5 (exponential 10 µs, 16 cores, 100 sessions, Breakwater), one above the other over the
same 1 ms of the measured window: what each core does (running, polling, parked, waking), where
the cores park and where CoreSync's gate cuts credits, with cores allocated, queue length and
the credit pool and issued credits below.

Each policy runs once (seed 1) with ``--trace``, on the reproduction's worker pool with its other
extra runs (:meth:`~microsched.reproduce.framework.Context.run_extra`: counted in its progress,
kept for ``--resume``); the traces are kept beside the figure (``trace_exp10_coresync_0.5.json``,
``trace_exp10_shenango_0.5.json``) and open in Perfetto. Writes ``fig_timeline_load0.5.png``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from ..sweep.worker import summary_of
from .framework import Context

VARIANTS = ("exp10/coresync", "exp10/shenango")
LOAD = 0.5
# A short run: the base scenario starts the credit pool at its ceiling (its steady state), so a
# few ms after a short warm-up show the policies as the measured window does.
WARMUP_MS, DURATION_MS = 20, 5
WINDOW_MS = (WARMUP_MS + 1.0, WARMUP_MS + 2.0)
FIGURE = "fig_timeline_load0.5.png"


def tasks(ctx: Context, variants: tuple[str, ...] = VARIANTS, load: float = LOAD) -> list[tuple] | None:
    """The traced runs, one per variant, as ``summary_of`` takes them (the trace written beside
    the figure); None if the spec lacks one of the variants (a filtered run). Needs only the spec
    as run: declared before the sweep (``extra_runs``)."""
    by_name = {x.name: x for x in ctx.spec.variants}
    if any(v not in by_name for v in variants):
        return None
    sem: list[str] = []
    if ctx.semantics:
        sem = tomllib.loads((Path(ctx.spec.path).parent / f"semantics-{ctx.semantics}.toml").read_text())["overrides"]
    todo = []
    for name in variants:
        path = ctx.out / f"trace_{name.replace('/', '_')}_{load:g}.json"
        ovr = (*sem, *by_name[name].set, f"warmup_ms={WARMUP_MS}", f"duration_ms={DURATION_MS}", f"load.fraction={load}")
        todo.append((str(ctx.spec.base), 1, ovr, str(path), WINDOW_MS))
    return todo


def kept(task: tuple) -> bool:
    """A saved summary is used only with its trace file (it is the figure's input)."""
    return Path(task[3]).is_file()


def write(ctx: Context, variants: tuple[str, ...] = VARIANTS, load: float = LOAD) -> Path | None:
    """Runs each variant once with a trace (:func:`tasks`) and draws them one above the other;
    None if the spec lacks one of them (a filtered run)."""
    from ..trace import render_timelines

    todo = tasks(ctx, variants, load)
    if todo is None:
        return None
    summaries = ctx.run_extra(summary_of, todo, kept=kept)
    traces = []
    for name, task, summary in zip(variants, todo, summaries):
        parks = (summary.get("parking") or {}).get("parks")
        traces.append((Path(task[3]), f"{name.split('/')[1]} at load {load:g}: {summary['cores']['allocated_mean']:.1f} "
                                      f"cores allocated on average, {parks if parks is not None else 'no'} parks in "
                                      f"{DURATION_MS} ms"))
    out = render_timelines(traces, ctx.out / FIGURE, window=WINDOW_MS,
                           suptitle=f"CoreSync vs Shenango at load {load:g}, exp. 10 µs, 16 cores "
                                    f"(seed 1; simulated ms {WINDOW_MS[0]:g}–{WINDOW_MS[1]:g})")
    ctx.figures.append(out)
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m microsched.reproduce.coresync_timeline OUT_DIR``: the figure and its traces
    alone, without the reproduction (how docs/img/timeline-coresync-shenango.png is made)."""
    import sys
    from types import SimpleNamespace

    from ..sweep.spec import SweepSpec
    from .framework import experiments_dir

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m microsched.reproduce.coresync_timeline OUT_DIR\n")
        return 2
    out = Path(args[0])
    out.mkdir(parents=True, exist_ok=True)
    spec = SweepSpec.load(experiments_dir() / "coresync" / "sweep.toml")
    # alone, in this process: no reproduction's pool to share
    ctx = SimpleNamespace(spec=spec, semantics=None, out=out, figures=[],
                          run_extra=lambda fn, args, kept=None: [fn(a) for a in args])
    path = write(ctx)  # type: ignore[arg-type]
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
