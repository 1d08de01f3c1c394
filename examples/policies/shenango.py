"""Shenango's core allocator (NSDI'19), written again in Python on microsched's policy interface.

Every interval the IOKernel checks each core: an item already queued at the previous check and
still not dequeued means a standing queue, and the application gets one more core. Idle cores
give themselves back after polling. The Rust original is crates/microsched-core/src/alloc/
shenango.rs; `tests/python/test_policy_ports.py` checks that both give bit-identical results.
"""

from dataclasses import dataclass

from microsched.policy import GRANT, Allocator, ParkRule


class Shenango(Allocator):
    @dataclass
    class Params:
        interval_us: float = 5.0   # period of the congestion check
        poll_us: float = 2.0       # an idle core polls this long before it may park...
        min_passes: int = 4        # ...and makes this many fruitless work-search passes

    name = "shenango-py"

    def __init__(self, env, params):
        super().__init__(env, params)
        self.interval_us = params.interval_us
        self.congested = None

    def park_rule(self):
        return ParkRule("after_poll", self.params.poll_us, self.params.min_passes)

    def tick(self, view):
        congested = 0
        for c in view.queued_cores():
            if c.state == "active":
                # Judged only on a window the core was active at both ends: a just-woken core
                # gets one check to start draining the queue it was handed.
                p = view.prev(c.core)
                if p.state == "active" and c.dequeued_total < p.enqueued_total:
                    congested += 1
            elif c.state == "parked":
                congested += 1  # a parked core holding work is congestion too
        self.congested = congested
        return GRANT if congested and view.any_parked() else None

    def signal(self):
        return None if self.congested is None else float(self.congested)
