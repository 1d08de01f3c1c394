"""d-FCFS with work stealing (Shenango's and Caladan's queueing), written again in Python on
microsched's policy interface.

RSS hashes a session to a home core (steered to an active core while its home is parked, as
the IOKernel does); an idle core runs its own queue, else steals the older half of a random
victim's; a spinning core is sent to steal as soon as work queues behind a busy one; a request
that goes back to a runqueue joins the queue of the core it was on.

The Rust original is crates/microsched-core/src/sched/dfcfs.rs (the `queue` policy on per-core
queues). ``tests/python/test_policy_ports.py`` checks that both give bit-identical results with
``server.search.kind = "instant"``: the simulator's default search on per-core queues with
stealing, the probe-cost search, models the built-in `queue` policy only (it needs
``policy.sched.kind = "queue"``), so a Python policy runs with the instant search, and the
comparison sets it on both sides.
"""

from microsched.policy import IDLE, QueuePolicy, run, steal

MASK64 = (1 << 64) - 1


def splitmix64(z: int) -> int:
    """The engine's RSS hash (microsched_core::rng::hash), in 64-bit wrapping arithmetic."""
    z = (z + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


class DistributedFcfs(QueuePolicy):
    name = "d-fcfs-py"

    def __init__(self, env, params):
        super().__init__(env, params)
        if env.queue != "per_core":
            raise ValueError(f"d-FCFS needs server.queue = \"per_core\", not {env.queue!r}")
        self.stealing = env.steal
        # The stream the built-in draws from, so that the draws are the same. (The built-in's
        # `server.steering = "random"` is the simulator's option for the `queue` policy only:
        # a Python policy always sees "rss".)
        self.rng = env.legacy_stream("steal")
        # A session's hash, computed once: the hash in Python costs more than the rest of steer.
        self.hashes = {}

    def steer(self, flow, rtype, view):
        h = self.hashes.get(flow)
        if h is None:
            h = self.hashes[flow] = splitmix64(flow)
        home = h % view.max_cores
        # The active set only when the home is parked.
        if view.is_active(home):
            return home
        active = view.active()
        return active[h % len(active)] if active else home

    def notify(self, place, view):
        # The most recent spinner is sent to steal when work queues behind a busy core (not
        # behind a core in the middle of its own steal: it is not among the victims).
        if not self.stealing:
            return None
        spinners = view.spinners()
        if not spinners:
            return None
        if place >= 0 and place not in view.victims():
            return None
        return spinners[-1]

    def next(self, core, view):
        if view.queue_len(core) > 0:
            return run(core)
        if self.stealing and view.queued() > 0:
            victims = view.victims()
            if victims:
                return steal(victims[self.rng.randrange(len(victims))])
        return IDLE

    def requeue(self, core, why, view):
        return core
