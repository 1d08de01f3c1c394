"""Running points on a local process pool and statistics over seeds (moved to
:mod:`microsched.sweep.runner`, shared with ``microsched sweep``).

This module re-exports every name of :mod:`microsched.sweep.runner` (the same objects)."""

from ..sweep import runner as _impl
from ..sweep.runner import *  # noqa: F401,F403

globals().update({k: v for k, v in vars(_impl).items() if not k.startswith("__")})
