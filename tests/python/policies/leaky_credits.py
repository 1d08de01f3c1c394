"""A planted fault for `microsched check-policy` (tests/python/test_check_policy.py): an overload
controller that leaks credits.

It hands each session one credit per response, but takes a credit out of its pool for every
request it admits and never puts it back: the pool drifts below zero, which no credit pool can
be. The checker's `bounds` invariant catches it (credit_pool >= 0 at every sample).
"""

from microsched.policy import Controller


class LeakCredits(Controller):
    name = "leak-credits"

    def on_request(self, now, session, demand, delay_ns):
        self.pool -= 1  # the fault: never returned when the request completes
        self.issued += 1
        return True

    def on_response(self, now, session, dropped, delay_ns):
        self.issued = max(self.issued - 1, 0)
        return 1  # the session may keep one request outstanding

    def on_credit_request(self, now, session, demand):
        return 1
