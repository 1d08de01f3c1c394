"""Write your own policy in Python: a core allocator, an overload controller or a queueing policy.

A policy is a class. It declares its parameters as a dataclass called ``Params`` (names, types,
defaults), receives a narrow environment and its parameters when built, and answers the
driver's events with decisions. Name it in a scenario::

    [policy.allocator]
    kind = "python"
    class = "my_policies.py:HysteresisAllocator"   # FILE.py:Class (relative to the scenario) or module:Class
    params = { lower_us = 2.0, upper_us = 8.0 }

and it runs wherever a built-in does: ``run``, ``compare``, ``sweep``, ``maxload``, the Python
API, and for allocators and controllers the real runtime (``real``, ``serve``).

Events in, decisions out, per kind (times are integer nanoseconds of the driver's clock):

Core allocator (:class:`Allocator`)
    ``tick(view) -> None | GRANT | Yield(core)`` every ``interval_us``;
    ``on_park_attempt(now, core, active, credits) -> bool`` when an idle core has met
    ``park_rule()`` (True: it parks); ``on_park_abort(now, core, credits)``.
Overload controller (:class:`Controller`)
    ``on_request(now, session, demand, delay_ns) -> bool`` (False: drop it);
    ``on_response(now, session, dropped, delay_ns) -> int`` (credits the client may hold);
    ``on_credit_request(now, session, demand) -> int | None``; ``on_timer(now, delay_ns)``
    every ``timer_interval_us``; ``take_wakeups() -> [(session, credits)]``;
    ``on_cores_changed(now, active)``; the credit state ``pool``/``issued``/``sessions``/
    ``drained`` (a core allocator such as CoreSync reads and sets ``pool``).
Queueing policy (:class:`QueuePolicy`)
    ``steer(flow, rtype, view) -> place``; ``notify(place, view) -> core | None``;
    ``next(core, view) -> run(place) | steal(core) | IDLE``; ``steal(thief, victim, n) -> int``;
    ``requeue(core, why, view) -> place``; ``preempt_at_quantum(core, view) -> bool``;
    ``quantum(core, rtype, service_ns, default_ns) -> ns``; ``finished(core, service_ns)``;
    ``clock(now)``. A place is a core number, :data:`SHARED`, or :func:`klass` ``(k)``.

Determinism: a policy draws random numbers only from ``env.stream(name)`` (a seeded stream of
its own; the same seed gives the same run) and reads no wall clock. Its decisions are checked
(a core that does not exist, negative credits): a bad one stops the run with an error naming
the policy, the call, the value and the simulated time; so does an exception in its code, with
its traceback.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

__all__ = [
    "Allocator", "Controller", "QueuePolicy", "ParkRule", "GRANT", "Yield", "SHARED", "IDLE",
    "klass", "run", "steal", "PolicyError", "load_class", "fit_params",
]

#: An allocator's decision: grant one more core (the driver picks a parked one).
GRANT = "grant"
#: A queueing policy's place: the queue every core may serve.
SHARED = -1
#: ``next``'s answer when a core finds nothing to do.
IDLE = None


class PolicyError(ValueError):
    """A policy that cannot be loaded or whose parameters do not fit; ``field`` is the dotted
    scenario field at fault."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclasses.dataclass(frozen=True)
class Yield:
    """An allocator's decision: ask active core ``core`` to park at its next idle point."""

    core: int


@dataclasses.dataclass(frozen=True)
class ParkRule:
    """When an idle core may ask to park: ``mode`` is ``"never"``, ``"after_poll"`` (after
    ``min_poll_us`` of polling and ``min_passes`` fruitless work-search passes) or
    ``"only_last_core"``."""

    mode: str = "after_poll"
    min_poll_us: float = 2.0
    min_passes: int = 0


def klass(k: int) -> int:
    """The place of central queue ``k`` (a request class)."""
    return -2 - int(k)


def run(place: int) -> tuple[str, int]:
    """``next``'s answer: run the head of queue ``place``."""
    return ("run", place)


def steal(victim: int) -> tuple[str, int]:
    """``next``'s answer: steal from core ``victim``'s queue."""
    return ("steal", victim)


class _Policy:
    #: The parameters: a dataclass whose fields have defaults (``params = {...}`` in a scenario
    #: sets them). ``None``: the policy has none.
    Params: Any = None
    #: The name in results; the class name if unset.
    name: str | None = None

    def __init__(self, env: Any, params: Any):
        self.env = env
        self.params = params


class Allocator(_Policy):
    """A core allocator. ``env`` has ``max_cores`` and ``stream(name)``. Override ``tick`` and,
    to gate parking, ``on_park_attempt``."""

    #: Period of ``tick`` in microseconds; ``None``: the allocation never changes.
    interval_us: float | None = 5.0

    def park_rule(self) -> ParkRule:
        return ParkRule()

    def tick(self, view: Any) -> Any:
        return None

    def on_park_attempt(self, now: int, core: int, active: int, credits: Any) -> bool:
        return True

    def on_park_abort(self, now: int, core: int, credits: Any) -> None:
        pass

    def signal(self) -> float | None:
        """The signal decided on at the last tick, for the time series (``None``: none)."""
        return None


class Controller(_Policy):
    """A credit-based overload controller. ``env`` has ``sessions``, ``max_cores``, ``rtt_ns``
    and ``stream(name)``. Sessions ``0..env.sessions`` are connected from the start, holding no
    credits. Keep ``pool``, ``issued`` and ``drained`` current: the driver reads them for its
    statistics and a core allocator may read (and set) the pool."""

    #: Period of ``on_timer`` in microseconds; ``None``: no timer.
    timer_interval_us: float | None = None

    def __init__(self, env: Any, params: Any):
        super().__init__(env, params)
        self.pool = env.max_cores
        self.issued = 0
        self.sessions = env.sessions
        self.drained = 0
        self.aqm_drops = 0

    def set_pool(self, credits: int) -> None:
        self.pool = credits

    def on_timer(self, now: int, delay_ns: int) -> None:
        pass

    def on_request(self, now: int, session: int, demand: int, delay_ns: int) -> bool:
        return True

    def on_response(self, now: int, session: int, dropped: bool, delay_ns: int) -> int:
        raise NotImplementedError

    def on_credit_request(self, now: int, session: int, demand: int) -> int | None:
        raise NotImplementedError

    def take_wakeups(self) -> list[tuple[int, int]]:
        return []

    def on_cores_changed(self, now: int, active: int) -> None:
        pass

    def pool_bounds(self) -> tuple[int, int] | None:
        return None


class QueuePolicy(_Policy):
    """A queueing policy. ``env`` has ``workers``, ``types`` (name, ratio, mean_us),
    ``quantum_ns``, ``dispatcher``, ``queue``, ``steal``, ``steering`` and ``stream(name)``."""

    def steer(self, flow: int, rtype: int, view: Any) -> int:
        raise NotImplementedError

    def notify(self, place: int, view: Any) -> int | None:
        return None

    def next(self, core: int, view: Any) -> Any:
        raise NotImplementedError

    def steal(self, thief: int, victim: int, n: int) -> int:
        return (n + 1) // 2

    def requeue(self, core: int, why: str, view: Any) -> int:
        return core

    def preempt_at_quantum(self, core: int, view: Any) -> bool:
        return True

    def clock(self, now: int) -> None:
        pass

    def quantum(self, core: int, rtype: int, service_ns: int, default_ns: int) -> int:
        return default_ns

    def finished(self, core: int, service_ns: int) -> None:
        pass


_BASES = {"allocator": Allocator, "overload": Controller, "sched": QueuePolicy}
_loaded: dict[str, type] = {}


def load_class(class_path: str, kind: str, field: str) -> type:
    """The class ``class_path`` names (``FILE.py:Class`` or ``module:Class``), checked to be a
    policy of ``kind`` ("allocator", "overload", "sched"). A file is loaded once per process."""
    base = _BASES[kind]
    if class_path in _loaded:
        cls = _loaded[class_path]
        # The cache holds the class, not its kind: a class of another kind is still refused.
        if not issubclass(cls, base):
            raise PolicyError(f"{field}.class", f"`{class_path}` is not a subclass of microsched.policy.{base.__name__}")
        return cls
    where, sep, name = class_path.rpartition(":")
    if not sep or not where or not name.isidentifier():
        raise PolicyError(f"{field}.class", f"`{class_path}` is not allowed: use FILE.py:Class or module:Class")
    if where.endswith(".py"):
        path = Path(where)
        if not path.is_file():
            raise PolicyError(f"{field}.class", f"`{where}` is not a file")
        module_name = f"microsched_policy_{abs(hash(str(path.resolve())))}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module  # dataclasses resolve their module through it
        try:
            spec.loader.exec_module(module)
        except Exception as e:
            del sys.modules[module_name]
            raise PolicyError(f"{field}.class", f"loading `{where}` failed: {type(e).__name__}: {e}") from e
    else:
        try:
            module = importlib.import_module(where)
        except Exception as e:
            raise PolicyError(f"{field}.class", f"importing `{where}` failed: {type(e).__name__}: {e}") from e
    cls = getattr(module, name, None)
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise PolicyError(f"{field}.class", f"`{class_path}` is not a subclass of microsched.policy.{base.__name__}")
    _loaded[class_path] = cls
    return cls


def fit_params(cls: type, given: dict, field: str) -> tuple[Any, dict]:
    """``cls.Params`` built from ``given`` (unknown names and values of the wrong type are errors
    naming ``field.params.NAME``), and the parameters filled in, as plain values."""
    params_cls = getattr(cls, "Params", None)
    if params_cls is None:
        if given:
            raise PolicyError(f"{field}.params.{next(iter(given))}", f"is not allowed: {cls.__name__} has no parameters")
        return None, {}
    if not dataclasses.is_dataclass(params_cls):
        raise PolicyError(f"{field}.class", f"{cls.__name__}.Params must be a dataclass")
    fields = {f.name: f for f in dataclasses.fields(params_cls)}
    for key in given:
        if key not in fields:
            raise PolicyError(f"{field}.params.{key}", f"is not a parameter of {cls.__name__}: use one of {', '.join(fields) or 'none'}")
    values = {}
    for key, value in given.items():
        want = fields[key].type
        want = want if isinstance(want, type) else {"float": float, "int": int, "bool": bool, "str": str}.get(str(want))
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if want is not None and not isinstance(value, want) or (want in (int, float) and isinstance(value, bool)):
            wanted = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(
                want, f"a {want.__name__}" if want else "a value")
            raise PolicyError(f"{field}.params.{key}", f"{value!r} is not allowed: use {wanted}")
        values[key] = value
    try:
        params = params_cls(**values)
    except TypeError as e:
        raise PolicyError(f"{field}.params", f"{e}") from e
    except ValueError as e:  # a __post_init__ check of the policy's own
        raise PolicyError(f"{field}.params", f"{e}") from e
    return params, dataclasses.asdict(params)


def check(class_path: str, kind: str, given: dict, field: str) -> dict:
    """What the engine calls to validate a Python policy's table: the parameters filled in."""
    cls = load_class(class_path, kind, field)
    return fit_params(cls, given, field)[1]


def build(class_path: str, kind: str, given: dict, field: str, env: Any) -> Any:
    """What the engine calls to build a Python policy: the instance."""
    cls = load_class(class_path, kind, field)
    params, _ = fit_params(cls, given, field)
    return cls(env, params)


def policy_name(obj: Any) -> str:
    return getattr(obj, "name", None) or type(obj).__name__
