"""Imports the compiled Rust extension with an actionable message when it is missing."""

from __future__ import annotations

import importlib
from types import ModuleType

_native: ModuleType | None = None


def native() -> ModuleType:
    """Returns ``microsched._native``, importing it on first use."""
    global _native
    if _native is None:
        try:
            _native = importlib.import_module("microsched._native")
        except ImportError as e:  # pragma: no cover - depends on the build
            raise ImportError(
                "the compiled simulator (microsched._native) is not built: run "
                "`python3 -m pip install -e .` (or `maturin develop --release`) at the repository root"
                f" ({e})"
            ) from e
    return _native
