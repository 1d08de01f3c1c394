"""A planted fault for `microsched check-policy` (tests/python/test_check_policy.py): an allocator
that leaks cores.

The engine does not let an allocator break the core bounds (a Yield of a core that is not
active, or a grant with none parked, does nothing; the last active core is never taken; core
time always adds up), so the leak a policy *can* make is the logical one: it takes cores back
(Yield) and never grants them again, even while work piles up in their queues. The checker's
`keeps-up` invariant catches it: below capacity, requests pile up in flight instead of being
served.
"""

from microsched.policy import Allocator, ParkRule, Yield


class LeakCores(Allocator):
    name = "leak-cores"
    interval_us = 5.0

    def park_rule(self):
        return ParkRule("never")

    def tick(self, view):
        active = view.active_cores()
        if len(active) > 1:
            return Yield(active[-1].core)  # taken back...
        return None                        # ...and never granted again (no GRANT anywhere)
