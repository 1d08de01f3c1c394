"""A planted fault for `microsched check-policy` (tests/python/test_check_policy.py): a queueing
policy that starves request type 1.

Each type has its own central queue, but `next` only ever looks at type 0's (a priority policy
whose low class was forgotten): type-1 requests wait forever while type 0 is served. The
checker's `no-starvation` invariant catches it on its mixed-workload scenario.
"""

from microsched.policy import IDLE, QueuePolicy, klass, run


class StarveType1(QueuePolicy):
    name = "starve-type1"

    def steer(self, flow, rtype, view):
        return klass(rtype)

    def notify(self, place, view):
        # An idle core woken for a request runs it: wake one for type 0 only.
        idle = view.spinners()
        return idle[0] if idle and place == klass(0) else None

    def next(self, core, view):
        if view.queue_len(klass(0)):
            return run(klass(0))
        return IDLE  # the fault: klass(1) is never served

    def requeue(self, core, why, view):
        return klass(0)
