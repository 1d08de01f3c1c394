"""Policies that break the interface's rules, for tests/python/test_python_policy.py: a decision
out of bounds, an exception in policy code, a parameter table to get wrong, and a slow policy
to interrupt. Each fails only after a few simulated milliseconds, so the error's time is known."""

from dataclasses import dataclass

from microsched.policy import Allocator, Controller, Yield

AFTER_NS = 2_000_000  # 2 ms of simulated time


class Core99(Allocator):
    """Asks core 99 (of 16) to yield."""

    def tick(self, view):
        return Yield(99) if view.now >= AFTER_NS else None


class Raises(Allocator):
    """Raises in its own helper: the traceback must show this file's lines."""

    def tick(self, view):
        return self.decide(view.now)

    def decide(self, now):
        if now >= AFTER_NS:
            raise RuntimeError(f"bad policy state at {now}")
        return None


class NegativeCredits(Controller):
    """Grants -3 credits with every response."""

    def on_response(self, now, session, dropped, delay_ns):
        return -3 if now >= AFTER_NS else 1

    def on_credit_request(self, now, session, demand):
        return 1


class Tunable(Allocator):
    """Has parameters, with defaults, to validate."""

    @dataclass
    class Params:
        lower_us: float = 1.0
        ticks: int = 3


class Drawing(Allocator):
    """Grants or stays on its own seeded stream's coin: deterministic per seed."""

    def __init__(self, env, params):
        super().__init__(env, params)
        self.coin = env.stream("coin")

    def tick(self, view):
        return "grant" if self.coin.random() < 0.5 and view.any_parked() else None


class Slow(Allocator):
    """Spends a while in Python at every tick, for the Ctrl-C test."""

    interval_us = 1.0

    def tick(self, view):
        x = 0
        for i in range(2000):
            x += i
        return None
