"""A typed handle on a scenario.

The schema lives in exactly one place, the Rust crate ``microsched-core`` (serde, unknown
fields rejected); this class does not duplicate it. A :class:`Scenario` is the scenario
tree (plain dicts, lists and scalars, exactly the structure of the TOML file) plus the
directory that relative paths in it (an empirical CSV) are resolved against. Validation,
defaults and error messages come from Rust through :meth:`Scenario.validate`.
"""

from __future__ import annotations

import copy
import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from ._native_loader import native

PathLike = str | os.PathLike


def _format_of(path: Path) -> str:
    return "json" if path.suffix.lower() == ".json" else "toml"


def _parse(text: str, fmt: str) -> dict:
    """Parses scenario text into a tree; syntax errors become ``ValueError("scenario: ...")``."""
    try:
        tree = json.loads(text) if fmt == "json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as e:
        raise ValueError(f"scenario: invalid {fmt.upper()}: {e}") from None
    if not isinstance(tree, dict):
        raise ValueError("scenario: the top level must be a table")
    return tree


NON_FINITE_KEY = "$nonfinite"  # the Rust loader's marker (scenario::NON_FINITE_KEY)


def is_numpy(v: Any) -> bool:
    """A numpy scalar (``np.int64(4)``, ``np.float32(0.5)``, ``np.bool_(True)``) or array,
    without importing numpy."""
    return type(v).__module__ == "numpy" and hasattr(v, "tolist")


def plain(v: Any) -> Any:
    """``v`` with numpy scalars as the Python numbers (bools) they hold and numpy arrays as
    lists, inside lists and tables too: everywhere a Python number is accepted, a numpy one
    is as well."""
    if is_numpy(v):
        return v.tolist()  # a scalar's .tolist() is its Python value
    if isinstance(v, Mapping):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    return v


def _encode_non_finite(node: Any) -> Any:
    """JSON cannot carry NaN or infinities; they are written as ``{"$nonfinite": "NaN"}`` so
    that the Rust loader refuses them naming the field, exactly as it does in a TOML file."""
    if is_numpy(node):
        node = plain(node)
    if isinstance(node, float) and not math.isfinite(node):
        return {NON_FINITE_KEY: "NaN" if math.isnan(node) else ("inf" if node > 0 else "-inf")}
    if isinstance(node, Mapping):
        return {k: _encode_non_finite(v) for k, v in node.items()}
    if isinstance(node, (list, tuple)):
        return [_encode_non_finite(v) for v in node]
    return node


def _to_json(tree: Mapping[str, Any]) -> str:
    """Serialises a scenario tree for the native loader. Non-finite numbers are encoded for
    Rust to refuse by field; anything else unusual (a TOML date) is passed on as a string so
    that the Rust schema names the field that does not accept it."""
    try:
        return json.dumps(_encode_non_finite(tree), allow_nan=False, default=str)
    except (TypeError, ValueError) as e:
        raise ValueError(f"scenario: {e}") from None


def check_names(resolved: Mapping[str, Any]) -> Any:
    """Checks what the Rust schema leaves to Python: that the request types of a workload (the
    top level's, each application's) have distinct names, which name their results
    (``by_type``, the sweep columns ``by_type.NAME.*``: a second type of the same name would
    silently replace the first). Returns ``resolved``; raises ``ValueError`` naming the field."""
    workloads = [("", resolved.get("workload"))]
    for i, app in enumerate(resolved.get("applications") or ()):
        if isinstance(app, Mapping):
            workloads.append((f"applications[{i}].", app.get("workload")))
    for prefix, w in workloads:
        types = w.get("types") if isinstance(w, Mapping) else None
        seen: dict[Any, int] = {}
        for i, t in enumerate(types if isinstance(types, list) else ()):
            name = t.get("name") if isinstance(t, Mapping) else None
            if name is None:
                continue
            if name in seen:
                where = f"{prefix}workload.types"
                raise ValueError(f"{where}[{i}].name: `{name}` is already the name of {where}[{seen[name]}]: "
                                 f"request types need distinct names (they name the per-type results, by_type); "
                                 f"rename one of them")
            seen[name] = i
    return resolved


def refuse_sweep_spec(tree: Any, path: Path) -> None:
    """A sweep spec names its scenario in ``base``, which no scenario has: say what the file is
    instead of the scenario schema's "unknown field"."""
    if isinstance(tree, Mapping) and isinstance(tree.get("base"), str):
        raise ValueError(f"{path}: a sweep spec (its `base` is the scenario {tree['base']!r}), not a scenario: "
                         f"run it with `microsched sweep {path}` (or its reproduction), or simulate "
                         f"{path.parent / tree['base']} itself")


class Scenario:
    """A scenario: the tree of a scenario file plus the directory relative paths refer to.

    Build one with :meth:`load` (a ``.toml`` or ``.json`` file) or :meth:`from_dict`; derive
    variants with :meth:`set` (which returns a new Scenario, the original is unchanged).
    """

    __slots__ = ("_tree", "base_dir", "source")

    def __init__(self, tree: Mapping[str, Any], base_dir: PathLike = ".", source: str | None = None):
        if not isinstance(tree, Mapping):
            raise TypeError(f"a scenario is a mapping, not {type(tree).__name__}")
        self._tree: dict = copy.deepcopy(dict(tree))
        self.base_dir: Path = Path(base_dir)
        self.source: str | None = source

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def load(cls, path: PathLike) -> "Scenario":
        """Reads a scenario file (TOML, or JSON if the name ends in ``.json``). Relative paths
        inside it are resolved against the file's directory. Raises ``FileNotFoundError`` or
        ``ValueError`` (syntax)."""
        from ._files import read_text

        p = Path(path)
        text = read_text(p, "scenario")  # regular files only, at most 16 MiB
        tree = _parse(text, _format_of(p))
        refuse_sweep_spec(tree, p)
        return cls(tree, base_dir=p.parent, source=str(p))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], base_dir: PathLike = ".") -> "Scenario":
        """Wraps a scenario tree (the TOML structure as dicts). The dict is copied."""
        return cls(d, base_dir=base_dir)

    # -- access ---------------------------------------------------------------------------

    def to_dict(self) -> dict:
        """A deep copy of the scenario tree, as written (no defaults filled in)."""
        return copy.deepcopy(self._tree)

    def get(self, key: str, default: Any = None) -> Any:
        """The value at a dotted key (``"server.max_cores"``; lists by position,
        ``"workload.types.0.service"``), or ``default`` if absent."""
        node: Any = self._tree
        for part in key.split("."):
            if isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            elif isinstance(node, dict) and part in node:
                node = node[part]
            else:
                return default
        return copy.deepcopy(node)

    def set(self, key: str, value: Any) -> "Scenario":
        """A new Scenario with ``value`` at the dotted ``key``; missing tables are created, lists
        are indexed by position (``"workload.types.0.service.mean_us"``).

        ``value`` is a Python value (``4``, ``0.5``, ``"central"``, a dict or a list), not a
        string to parse: ``s.set("server.max_cores", 4)``; numpy numbers are stored as the
        Python numbers they hold. Nothing is validated until the scenario is run or
        :meth:`validate` is called.
        """
        parts = key.split(".") if isinstance(key, str) else []
        if not parts or any(not p.strip() for p in parts):
            raise ValueError(f"--set: `{key}` is not a dotted key")
        tree = self.to_dict()
        node: Any = tree
        for i, part in enumerate(parts):
            last = i + 1 == len(parts)
            if isinstance(node, list):
                at = ".".join(parts[:i])
                if not part.isdigit():
                    raise ValueError(f"{at}: is a list: index it by position (0..{len(node)}), e.g. `{at}.0`, not `{part}`")
                n = int(part)
                if n >= len(node):
                    raise ValueError(f"{at}: has {len(node)} entries: index {n} is out of range (0..{len(node)})")
                if last:
                    node[n] = plain(copy.deepcopy(value))
                else:
                    node = node[n]
                continue
            if not isinstance(node, dict):
                raise ValueError(f"{'.'.join(parts[:i])}: is not a table, cannot set a key inside it")
            if last:
                node[part] = plain(copy.deepcopy(value))
            else:
                node = node.setdefault(part, {})
        return Scenario(tree, base_dir=self.base_dir, source=self.source)

    # -- native bridge --------------------------------------------------------------------

    def to_json(self) -> str:
        """The scenario tree as JSON text (what is handed to the simulator)."""
        return _to_json(self._tree)

    def validate(self, overrides: list[str] | tuple[str, ...] = (), force: bool = False) -> dict:
        """Validates with the Rust schema and returns the resolved scenario (defaults filled
        in). Raises ``ValueError("field.path: message")`` naming the field at fault, also when
        the run's cost estimate is over the machine's limits (unless ``force``)."""
        text = native().validate(self.to_json(), "json", str(self.base_dir), list(overrides), force)
        return check_names(json.loads(text))

    # -- dunder ---------------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Scenario):
            return NotImplemented
        return self._tree == other._tree and self.base_dir == other.base_dir

    def __repr__(self) -> str:
        name = self._tree.get("name") or self.source or "<dict>"
        return f"Scenario({name!r}, base_dir={str(self.base_dir)!r})"
