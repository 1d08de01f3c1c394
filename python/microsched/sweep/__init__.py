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

# The names are loaded on first use: `microsched` commands that do not sweep never import
# pandas or pyarrow through this package.
_WHERE = {
    **dict.fromkeys(["BACKENDS", "PARTS_DIR", "RESULTS_FILE", "WALL_COLUMNS", "PointFailed", "SweepError",
                     "SweepOutcome", "Task", "check_keys_used", "point_id", "prepare", "run_sweep", "run_task",
                     "validate_points"], "engine"),
    **dict.fromkeys(["aggregate", "default_jobs", "flatten", "mean_ci95", "run_points"], "runner"),
    **dict.fromkeys(["Point", "SpecError", "SweepSpec", "Variant"], "spec"),
}


def __getattr__(name: str):
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BACKENDS", "PARTS_DIR", "RESULTS_FILE", "WALL_COLUMNS", "Point", "PointFailed", "SpecError", "SweepError",
    "SweepOutcome", "SweepSpec", "Task", "Variant", "aggregate", "check_keys_used", "default_jobs", "flatten",
    "mean_ci95", "point_id", "prepare", "run_points", "run_sweep", "run_task", "validate_points",
]
