"""Sweep specs: a base scenario, overrides for every point, a grid, named variants and seeds.

``microsched sweep SPEC.toml`` runs a spec; a reproduction (``microsched reproduce NAME``) is a
spec (``experiments/NAME/sweep.toml``) plus its claims and figures, so a reproduction's grid can
be run, resumed or distributed like any other sweep::

    name = "allocators"
    base = "base.toml"                 # scenario file, relative to the spec file
    seeds = 5                          # K (seeds 1..K) or a list of seeds
    overrides = ["duration_ms=1000"]   # `dotted.key=value` applied to every point (as --set)

    [grid]                             # cartesian product of dotted key = list of values
    "load.fraction" = [0.1, 0.5, 0.9]

    [[variants]]                       # named settings, each crossed with the grid (optional:
    name = "caladan-5"                 # without variants the grid alone makes the points)
    label = "Caladan (poll 5 µs)"      # for plots (default: the name)
    set = ["policy.allocator.kind=caladan", "policy.allocator.poll_us=5"]

    [quick]                            # replaces seeds / overrides / grid for --quick
    seeds = 1
    overrides = ["duration_ms=50"]
    [quick.grid]
    "load.fraction" = [0.5]

A point's overrides are, in order: the spec's ``overrides``, the variant's ``set``, then the
grid values, so a grid key wins over a variant setting of the same key. Unknown keys and
empty lists (and an empty ``[grid]`` table) are rejected with an error naming the spec field.
"""

from __future__ import annotations

import itertools
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..scenario import plain

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,99}")
_TOP_KEYS = {"name", "base", "seeds", "overrides", "grid", "variants", "quick", "description"}
_PROFILE_KEYS = {"seeds", "overrides", "grid"}
_VARIANT_KEYS = {"name", "label", "set"}


class SpecError(ValueError):
    """A malformed sweep spec; the message starts with the spec file and the field at fault."""


def parse_value(text: str) -> Any:
    """The value of a ``dotted.key=value`` override as the scenario loader reads it: a TOML
    literal (``5``, ``0.5``, ``true``, ``"x"``), else the bare string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def split_override(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    return key.strip(), parse_value(value.strip())


def format_value(v: Any) -> str:
    """A value as an override's right-hand side (a TOML literal); numpy numbers as the Python
    numbers they hold."""
    v = plain(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return v
    raise TypeError(f"grid values must be numbers, booleans or strings, not {type(v).__name__}")


def policy_file_absolute(override: str, folder: Path) -> str:
    """``policy.X.class=FILE.py:Class`` with a relative FILE made absolute: beside ``folder``
    (the spec's) if it is there, else from the current directory. A point runs in a worker
    process, on a Ray node in another directory even: the path must not depend on where."""
    key, sep, value = override.partition("=")
    if not sep or not key.strip().endswith(".class"):
        return override
    text = parse_value(value.strip())
    if not isinstance(text, str):
        return override
    file, colon, cls = text.rpartition(":")
    if not colon or not file.endswith(".py") or Path(file).is_absolute():
        return override
    for where in (folder / file, Path(file)):
        if where.is_file():
            return f"{key}={where.resolve()}:{cls}"
    return override  # not found: the scenario loader names the field and the path


@dataclass(frozen=True)
class Variant:
    name: str
    label: str
    set: tuple[str, ...] = ()


@dataclass(frozen=True)
class Point:
    """One run: the scenario file, the seed and the overrides, plus the parameters that name
    the point (``variant``, the grid keys, every key the variant sets, ``seed``)."""

    index: int
    scenario: str
    seed: int
    overrides: tuple[str, ...]
    params: Mapping[str, Any]


@dataclass
class SweepSpec:
    name: str
    path: Path
    base: Path
    seeds: list[int]
    overrides: list[str]
    grid: dict[str, list[Any]]
    variants: list[Variant]
    description: str = ""
    raw: dict = field(default_factory=dict, repr=False)

    # -----------------------------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | Path, quick: bool = False, seeds: int | None = None) -> "SweepSpec":
        """Reads a spec file; ``quick`` applies its ``[quick]`` table, ``seeds`` (K) replaces
        its seeds by 1..K."""
        from .._files import read_text

        p = Path(path)
        if not p.exists():
            raise FileNotFoundError(f"sweep spec not found: {p}")
        try:
            text = read_text(p, "sweep spec")
        except ValueError as e:
            raise SpecError(str(e)) from None
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise SpecError(f"{p}: invalid TOML: {e}") from None
        return cls.from_dict(raw, p, quick=quick, seeds=seeds)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], path: Path, quick: bool = False,
                  seeds: int | None = None) -> "SweepSpec":
        def err(key: str, msg: str) -> SpecError:
            return SpecError(f"{path}: {key}: {msg}")

        unknown = set(raw) - _TOP_KEYS
        if unknown:
            raise err(sorted(unknown)[0], f"unknown field: use {', '.join(sorted(_TOP_KEYS))}")
        if "base" not in raw or not isinstance(raw["base"], str):
            raise err("base", "required: the scenario file, relative to the spec")
        base = (path.parent / raw["base"]).resolve()
        if not base.is_file():
            raise err("base", f"scenario file not found: {base}")

        prof: dict[str, Any] = {k: raw[k] for k in _PROFILE_KEYS if k in raw}
        if quick:
            q = raw.get("quick", {})
            if not isinstance(q, dict):
                raise err("quick", "must be a table")
            bad = set(q) - _PROFILE_KEYS
            if bad:
                raise err(f"quick.{sorted(bad)[0]}", f"unknown field: use {', '.join(sorted(_PROFILE_KEYS))}")
            prof.update(q)

        seed_list = cls._seeds(prof.get("seeds", 1), err)
        if seeds is not None:
            if seeds < 1:
                raise err("seeds", f"{seeds} is not allowed: use 1 or more")
            seed_list = list(range(1, seeds + 1))

        ovr = prof.get("overrides", [])
        if not isinstance(ovr, list) or not all(isinstance(o, str) and "=" in o for o in ovr):
            raise err("overrides", "must be a list of `dotted.key=value` strings")

        grid = prof.get("grid", {})
        if not isinstance(grid, dict):
            raise err("grid", "must be a table of dotted key = list of values")
        if "grid" in prof and not grid:
            raise err("grid", "empty: give at least one dotted key = list of values, or leave the table out")
        grid = {k: plain(vs) for k, vs in grid.items()}  # numpy arrays and numbers as Python's
        for k, vs in grid.items():
            if not isinstance(vs, list) or not vs:
                raise err(f"grid.{k}", "must be a non-empty list of values")
            for v in vs:
                try:
                    format_value(v)
                except TypeError as e:
                    raise err(f"grid.{k}", str(e)) from None

        variants = []
        seen = set()
        for i, v in enumerate(raw.get("variants", [])):
            if not isinstance(v, dict):
                raise err(f"variants[{i}]", "must be a table")
            bad = set(v) - _VARIANT_KEYS
            if bad:
                raise err(f"variants[{i}].{sorted(bad)[0]}", f"unknown field: use {', '.join(sorted(_VARIANT_KEYS))}")
            name = v.get("name")
            if not isinstance(name, str) or not name:
                raise err(f"variants[{i}].name", "required: a non-empty string")
            if name in seen:
                raise err(f"variants[{i}].name", f"duplicate variant {name!r}")
            seen.add(name)
            sets = v.get("set", [])
            if not isinstance(sets, list) or not all(isinstance(o, str) and "=" in o for o in sets):
                raise err(f"variants[{i}].set", "must be a list of `dotted.key=value` strings")
            variants.append(Variant(name=name, label=str(v.get("label", name)), set=tuple(sets)))
        if "variants" in raw and not variants:
            raise err("variants", "empty: give at least one variant or leave the field out")

        name = raw.get("name", path.stem)
        # The name becomes a directory (results/sweeps/NAME): nothing that could climb out of it.
        if not isinstance(name, str) or not _SAFE_NAME.fullmatch(name) or ".." in name:
            raise err("name", f"{name!r} is not allowed: use letters, digits, '.', '_' and '-' "
                              f"(not starting with '.' or '-', at most 100 characters)")
        return cls(name=name, path=path, base=base, seeds=seed_list,
                   overrides=list(ovr), grid={k: list(v) for k, v in grid.items()}, variants=variants,
                   description=str(raw.get("description", "")), raw=dict(raw))

    @staticmethod
    def _seeds(v: Any, err) -> list[int]:
        v = plain(v)  # numpy integers are integers
        if isinstance(v, bool):
            raise err("seeds", "must be a count or a list of seeds")
        if isinstance(v, int):
            if v < 1:
                raise err("seeds", f"{v} is not allowed: use 1 or more")
            return list(range(1, v + 1))
        if isinstance(v, list) and v and all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 2**64
                                             for s in v):
            return list(v)
        raise err("seeds", "must be a count K (seeds 1..K) or a non-empty list of seeds in 0..2^64-1")

    # -----------------------------------------------------------------------------------------

    def label(self, variant: str) -> str:
        return next((v.label for v in self.variants if v.name == variant), variant)

    def n_points(self) -> int:
        """How many points :meth:`points` makes, without making them."""
        return max(1, len(self.variants)) * math.prod(len(v) for v in self.grid.values()) * len(self.seeds)

    def points(self) -> list[Point]:
        """Every run of the sweep, in a fixed order: variant, then grid (row-major), then seed."""
        variants = self.variants or [Variant(name="", label="")]
        keys = list(self.grid)
        combos = list(itertools.product(*(self.grid[k] for k in keys))) if keys else [()]
        out: list[Point] = []
        for var in variants:
            var_params = dict(split_override(o) for o in var.set)
            for combo in combos:
                grid_ovr = [f"{k}={format_value(v)}" for k, v in zip(keys, combo)]
                for seed in self.seeds:
                    params: dict[str, Any] = {}
                    if self.variants:
                        params["variant"] = var.name
                    params.update(var_params)
                    params.update(dict(zip(keys, combo)))
                    params["seed"] = seed
                    ovr = tuple(self.overrides) + var.set + tuple(grid_ovr)
                    ovr = tuple(policy_file_absolute(o, self.path.parent) for o in ovr)
                    out.append(Point(index=len(out), scenario=str(self.base), seed=seed, overrides=ovr, params=params))
        return out

    def to_dict(self) -> dict:
        """The spec as run (after --quick / --seeds), for ``meta.json``."""
        return {
            "name": self.name, "spec": str(self.path), "base": str(self.base), "seeds": self.seeds,
            "overrides": self.overrides, "grid": self.grid,
            "variants": [{"name": v.name, "label": v.label, "set": list(v.set)} for v in self.variants],
        }
