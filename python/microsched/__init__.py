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

from .api import RunResult, run, schema
from .scenario import Scenario

__all__ = ["run", "Scenario", "RunResult", "schema"]
