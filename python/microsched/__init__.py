"""microsched: a deterministic discrete-event simulator of microsecond-scale servers.

Quick start::

    import microsched
    res = microsched.run("experiments/validation/mmc.toml", seed=7)
    print(res.summary["latency_us"]["p99"])
    res.timeseries.plot(x="t_ms", y="cores_busy")
    res.save("out/mmc")

The simulation engine is Rust (``microsched._native``); this package is the typed front:
:class:`Scenario`, :func:`run`, :class:`RunResult`, :func:`schema`, plots and the CLI.
"""

from .api import RunResult, estimate, run, schema, validate
from .scenario import Scenario

__all__ = ["run", "run_sweep", "compare", "Scenario", "RunResult", "schema", "validate", "estimate"]


def compare(scenario, variants, loads=None, **kwargs):
    """Compares policies on a scenario, paired by seed: :func:`microsched.comparison.compare`
    (returns a :class:`~microsched.comparison.Comparison` of DataFrames)."""
    from .comparison import compare as _compare

    return _compare(scenario, variants, loads, **kwargs)


def run_sweep(spec, out, **kwargs):
    """Runs a sweep: :func:`microsched.sweep.run_sweep` (a spec file or dict, an output
    directory; keyword options as there)."""
    from .sweep.engine import run_sweep as _run_sweep

    return _run_sweep(spec, out, **kwargs)
