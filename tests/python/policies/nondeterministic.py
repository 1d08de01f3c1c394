"""A planted fault for `microsched check-policy` (tests/python/test_check_policy.py): an allocator
that draws from Python's global `random` (seeded from the OS at import) instead of its own
seeded stream `env.stream(...)`.

Two runs with the same seed grant and revoke cores at different ticks; the checker's
`deterministic` invariant catches it.
"""

import random

from microsched.policy import GRANT, Allocator


class CoinFlip(Allocator):
    """Shenango's congestion test, with a coin flip deciding whether a congested tick grants."""

    name = "coin-flip"
    interval_us = 5.0

    def tick(self, view):
        congested = any(c.state == "parked" or c.queued > 1 for c in view.queued_cores())
        heads = random.random() < 0.5  # the fault: not self.env.stream("coin").random()
        return GRANT if congested and heads and view.any_parked() else None
