"""Sweep specs (moved to :mod:`microsched.sweep.spec`, shared with ``microsched sweep``).

This module re-exports every name of :mod:`microsched.sweep.spec` (the same objects: a
:class:`SpecError` raised there is the one caught here)."""

from ..sweep import spec as _impl
from ..sweep.spec import *  # noqa: F401,F403

globals().update({k: v for k, v in vars(_impl).items() if not k.startswith("__")})
