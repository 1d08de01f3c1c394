"""Parameter sweeps: ``microsched sweep SPEC.toml``.

A sweep spec (:mod:`microsched.sweep.spec`) names a base scenario, overrides for every point,
a grid, named variants and seeds. :func:`run_sweep` runs its points on a local process pool or
on a Ray cluster and keeps one Parquet part per finished point, consolidated into
``results.parquet`` (:mod:`microsched.sweep.engine`). :mod:`microsched.sweep.runner` holds the
in-memory pool runner and the statistics over seeds that ``microsched reproduce`` uses.

    from microsched.sweep import run_sweep
    outcome = run_sweep("experiments/sweeps/smoke.toml", "out/smoke", jobs=2)
    outcome.results[["load.fraction", "variant", "seed", "latency_us.p99"]]
"""

from .engine import (
    BACKENDS,
    PARTS_DIR,
    RESULTS_FILE,
    WALL_COLUMNS,
    PointFailed,
    SweepError,
    SweepOutcome,
    Task,
    check_keys_used,
    point_id,
    prepare,
    run_sweep,
    run_task,
    validate_points,
)
from .runner import aggregate, default_jobs, flatten, mean_ci95, run_points
from .spec import Point, SpecError, SweepSpec, Variant

__all__ = [
    "BACKENDS", "PARTS_DIR", "RESULTS_FILE", "WALL_COLUMNS", "Point", "PointFailed", "SpecError", "SweepError",
    "SweepOutcome", "SweepSpec", "Task", "Variant", "aggregate", "check_keys_used", "default_jobs", "flatten",
    "mean_ci95", "point_id", "prepare", "run_points", "run_sweep", "run_task", "validate_points",
]
