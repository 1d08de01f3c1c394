"""Reproductions of the papers' figures and claims: ``microsched reproduce NAME``.

Each reproduction is registered with :func:`register` (name, paper, figure, description, its
sweep spec under ``experiments/`` and an ``analyze`` function that returns its claims and saves
its figures). :func:`run_reproduction` runs the sweep on a local process pool and writes
``results.parquet``, ``aggregate.parquet``, ``claims.json``, ``meta.json`` and the PNGs.

    from microsched.reproduce import run_reproduction, REGISTRY
    outcome = run_reproduction("allocators", out="results/allocators", quick=True, jobs=2)
    [c for c in outcome.claims if not c["holds"]]
"""

from .claims import Claim, check_claims, print_claims, write_claims
from .framework import (
    REGISTRY,
    Context,
    ExtraRuns,
    Outcome,
    Reproduction,
    get,
    names,
    register,
    run_reproduction,
)
from .runner import aggregate, flatten, mean_ci95, run_points
from .spec import Point, SpecError, SweepSpec

# Built-in reproductions register themselves on import.
from . import allocators  # noqa: E402,F401
from . import loadshift  # noqa: E402,F401
from . import collapse  # noqa: E402,F401
from . import coresync  # noqa: E402,F401
from . import synergy  # noqa: E402,F401
from . import harvest  # noqa: E402,F401
from . import protego  # noqa: E402,F401

__all__ = [
    "REGISTRY", "Claim", "Context", "ExtraRuns", "Outcome", "Point", "Reproduction", "SpecError", "SweepSpec",
    "aggregate", "check_claims", "flatten", "get", "mean_ci95", "names", "print_claims", "register",
    "run_points", "run_reproduction", "write_claims",
]
