"""Breakwater's server-side credit controller (OSDI'20), written again in Python on microsched's
policy interface.

A credit pool C_total follows the queueing delay by AIMD (additive increase below the target,
multiplicative decrease above it), each session is granted a window of credits out of the pool
(Breakwater's ``srpc_update_window``), a request arriving while the delay exceeds the drop
threshold is dropped (AQM), and a session left with no credits and nothing at the server waits
on a FIFO drained list until a pool update wakes it with an explicit credit message.

The Rust original is crates/microsched-core/src/overload/breakwater.rs; its module docs say
where this follows Breakwater's code. ``tests/python/test_policy_ports.py`` checks that both
give bit-identical results. Everything the original computes is here (both triggers, both α
modes, the core fix with or without its drop gate, the pool bounds), with the same arithmetic:
integers where it counts in integers, floats where it multiplies by β or accumulates α.
Not here: ``latency_budget_us`` (v2's worker-start drop), which the simulator's server applies,
not the controller.
"""

from collections import OrderedDict
from dataclasses import dataclass
import math

from microsched.policy import Controller

NS_PER_US = 1000
#: The shortest control period (a zero RTT would make a zero-period timer).
MIN_PERIOD_NS = NS_PER_US
#: Rounding tolerance of the additive-increase carry (ten additions of 0.1 sum to 0.999…).
CARRY_EPS = 1e-9


def us_to_ns(v: float) -> int:
    """Microseconds to whole nanoseconds, rounding half away from zero as the engine does
    (Python's round() rounds half to even)."""
    x = float(v) * NS_PER_US
    whole = math.floor(x)
    return int(whole) + (1 if x - whole >= 0.5 else 0)


@dataclass
class BreakwaterParams:
    target_us: float = 80.0            # queueing-delay target d_t
    drop_us: float | None = None       # AQM threshold; default 2 × target
    alpha: float = 0.001               # additive increase per period (see alpha_mode)
    alpha_mode: str = "per_session"    # "per_session" (Breakwater's code) or "absolute" (the study)
    beta: float = 0.02                 # multiplicative-decrease gain, in (0, 1)
    rtt_us: float | None = None        # control period; default: the network RTT
    trigger: str = "periodic"          # "periodic" (v1) or "completion" (v2)
    max_window: int = 63               # credits one session may hold
    max_pool_per_session: int = 64     # pool ceiling per session
    min_pool: int | None = None        # pool floor; default max_cores
    initial_pool: int | None = None    # pool at the start, clamped to [floor, ceiling]
    core_fix: bool = False             # the simulation study's fix
    max_pool: int | None = None        # absolute ceiling replacing sessions × max_pool_per_session
    core_fix_drop_gate: float | str = 0.05  # a fraction of the pool, or "none" (the ungated ramp)

    def __post_init__(self):
        def positive(name, v):
            if not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name} = {v!r} is not allowed: must be a finite number > 0")
            return float(v)

        self.target_us = positive("target_us", self.target_us)
        if self.drop_us is not None:
            self.drop_us = positive("drop_us", self.drop_us)
            if self.drop_us < self.target_us:
                raise ValueError(f"drop_us = {self.drop_us} is not allowed: the AQM drop threshold must be >= target_us ({self.target_us})")
        if self.rtt_us is not None:
            self.rtt_us = positive("rtt_us", self.rtt_us)
        if not (math.isfinite(self.alpha) and self.alpha >= 0):
            raise ValueError(f"alpha = {self.alpha} is not allowed: must be a finite number >= 0")
        if not (math.isfinite(self.beta) and 0 < self.beta < 1):
            raise ValueError(f"beta = {self.beta} is not allowed: must be in (0, 1)")
        if self.alpha_mode not in ("per_session", "absolute"):
            raise ValueError(f"alpha_mode = {self.alpha_mode!r} is not allowed: use \"per_session\" or \"absolute\"")
        if self.trigger not in ("periodic", "completion"):
            raise ValueError(f"trigger = {self.trigger!r} is not allowed: use \"periodic\" or \"completion\"")
        for name in ("max_window", "max_pool_per_session", "min_pool", "initial_pool", "max_pool"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 2**32 - 1):
                raise ValueError(f"{name} = {v!r} is not allowed: must be a whole number >= 1")
        gate = self.core_fix_drop_gate
        if gate is None or gate == "none":
            # Kept as the word: a None would be dropped when the resolved scenario is written
            # as TOML (no null there), and come back as the default gate.
            self.core_fix_drop_gate = "none"
        else:
            if isinstance(gate, bool) or not isinstance(gate, (int, float)) or not (math.isfinite(gate) and gate >= 0):
                raise ValueError(f"core_fix_drop_gate = {gate!r} is not allowed: a fraction of the pool >= 0, or \"none\"")
            self.core_fix_drop_gate = float(gate)


class Breakwater(Controller):
    Params = BreakwaterParams
    name = "breakwater-py"

    def __init__(self, env, params):
        super().__init__(env, params)
        p = params
        max_cores, sessions, rtt_ns = env.max_cores, env.sessions, env.rtt_ns
        self.target_ns = max(us_to_ns(p.target_us), 1)
        self.drop_ns = us_to_ns(p.drop_us) if p.drop_us is not None else 2 * self.target_ns
        self.period_ns = max(us_to_ns(p.rtt_us) if p.rtt_us is not None else rtt_ns, MIN_PERIOD_NS)
        self.alpha = p.alpha
        self.absolute_alpha = p.alpha_mode == "absolute"
        self.beta = p.beta
        self.completion = p.trigger == "completion"
        self.max_window = p.max_window
        self.max_cores = max_cores
        self.core_fix = p.core_fix
        min_pool = p.min_pool if p.min_pool is not None else max_cores
        if p.core_fix:
            min_pool = max(min_pool, self.core_fix_min_pool(max_cores, rtt_ns, self.target_ns))
        self.min_pool = min_pool
        self.max_pool = p.max_pool if p.max_pool is not None else sessions * p.max_pool_per_session
        start = p.initial_pool if p.initial_pool is not None else min_pool
        self.pool = min(max(start, min_pool), self.max_pool)
        self.issued = 0
        self.carry = 0.0
        self.last_update = None
        # Per-session state, one list per field: the credits granted (in flight included), the
        # requests at the server, the client's last reported queue, the window last advertised.
        self.win = [0] * sessions
        self.pending = [0] * sessions
        self.demand = [0] * sessions
        self.advertised = [0] * sessions
        # The drained list, FIFO: an OrderedDict leaves from anywhere and pops its oldest in O(1).
        self.drained_list = OrderedDict()
        self.drained = 0
        self.wakeups = []
        self.aqm_drops = 0
        self.active_cores = max_cores
        self.cores_at_update = max_cores
        self.drop_gate = p.core_fix_drop_gate if p.core_fix and p.core_fix_drop_gate != "none" else None
        self.drops_at_update = 0
        self.pending_ramp = 0
        # The driver converts back with the same rounding: us_to_ns(period_ns / 1000) == period_ns.
        self.timer_interval_us = None if self.completion else self.period_ns / NS_PER_US

    @staticmethod
    def core_fix_min_pool(max_cores, rtt_ns, target_ns):
        """The study's minimum pool ⌈max_cores · (RTT + d_t) / d_t⌉."""
        t = max(target_ns, 1)
        return -(-(max_cores * (rtt_ns + t)) // t)

    def pool_bounds(self):
        return (self.min_pool, self.max_pool)

    def clamp_pool(self, pool):
        return min(max(pool, self.min_pool), self.max_pool)

    # -- the pool -----------------------------------------------------------------------------

    def decreased_pool(self, delay_ns):
        dt = float(self.target_ns)
        over = float(max(delay_ns - self.target_ns, 0))
        f = max(1.0 - self.beta * over / dt, 0.5)
        p = int(float(self.pool) * f)  # truncation toward zero, as Rust's `as i64`
        if self.completion:
            p = min(p, self.pool - 1)
        self.carry = 0.0
        return self.clamp_pool(p)

    def increased_pool(self):
        self.carry += self.alpha if self.absolute_alpha else float(len(self.win)) * self.alpha
        p = self.pool
        whole = math.floor(self.carry + CARRY_EPS)
        if whole >= 1:
            p += whole
            self.carry = max(self.carry - whole, 0.0)
        return self.clamp_pool(p)

    def update_pool(self, now, delay_ns):
        self.last_update = now
        gained = max(self.active_cores - self.cores_at_update, 0)
        self.cores_at_update = self.active_cores
        if self.drop_gate is not None:
            return self.update_pool_gated(self.drop_gate, gained, delay_ns)
        if delay_ns >= self.target_ns:
            new_pool = self.decreased_pool(delay_ns)
        elif self.core_fix and gained > 0:
            p = self.increased_pool()
            new_pool = self.clamp_pool(p + gained * max(p, 0) // self.active_cores)
        else:
            new_pool = self.increased_pool()
        self.apply_pool(new_pool)

    def update_pool_gated(self, gate, gained, delay_ns):
        ramp, self.pending_ramp = self.pending_ramp, 0
        if ramp > 0:
            new_pool = self.clamp_pool(self.increased_pool() + ramp)
        elif delay_ns >= self.target_ns:
            new_pool = self.decreased_pool(delay_ns)
        else:
            new_pool = self.increased_pool()
        drops = self.aqm_drops - self.drops_at_update
        self.drops_at_update = self.aqm_drops
        if gained > 0 and self.active_cores > 0 and float(drops) >= gate * float(max(new_pool, 1)):
            self.pending_ramp = gained * max(new_pool, 0) // self.active_cores
        self.apply_pool(new_pool)

    def apply_pool(self, new_pool):
        # Wake up to C_total − C_issued drained sessions with one credit each (a drained session
        # holds none)...
        open_ = new_pool - self.issued
        woken = []
        drained = self.drained_list
        while open_ > 0 and drained:
            sid, _ = drained.popitem(last=False)
            self.drained -= 1
            self.issued += 1 - self.win[sid]
            self.win[sid] = 1
            woken.append(sid)
            open_ -= 1
        self.pool = new_pool
        # ...then each woken session's sender runs its pass with `wake_up` set and sends an
        # explicit credit message if it now holds more than it last advertised.
        for sid in woken:
            self.update_window(sid, False, True)
            if self.advertised[sid] < self.win[sid]:
                self.advertised[sid] = self.win[sid]
                self.wakeups.append((sid, self.win[sid]))

    def due(self, now):
        return self.last_update is None or max(now - self.last_update, 0) >= self.period_ns

    # -- sessions -----------------------------------------------------------------------------

    def push_drained(self, sid):
        if sid not in self.drained_list:
            self.drained_list[sid] = None
            self.drained += 1

    def remove_drained(self, sid):
        if self.drained_list.pop(sid, False) is None:
            self.drained -= 1

    def update_window(self, sid, req_dropped, wake_up):
        """Breakwater's per-session credit computation (see the Rust original's docs)."""
        if sid in self.drained_list:
            return
        n = max(len(self.win), 1)
        pool, issued = self.pool, self.issued
        old, pending, demand = self.win[sid], self.pending[sid], self.demand[sid]
        open_ = pool - issued
        # Rust's i64 division truncates toward zero and Python's floors: they differ only for a
        # negative `open_`, where both are < 1 and the max gives 1.
        o = max(open_ // n, 1)
        win = old
        if issued < pool:
            win = min(pending + demand + o, win + open_)
        elif issued > pool:
            win -= 1
        if wake_up or n <= self.max_cores:
            win = max(win, o)
        if old > 0 and win == 0 and not req_dropped:
            win = o
        win = max(win, pending)
        win = min(win, self.max_window)
        win = min(win, pending + demand + o)
        self.win[sid] = win
        self.issued += win - old

    def shrink_to_demand(self, sid):
        cap = self.pending[sid] + self.demand[sid]
        if self.win[sid] > cap:
            self.issued -= self.win[sid] - cap
            self.win[sid] = cap

    def maybe_drain(self, sid):
        if self.win[sid] == 0 and self.pending[sid] == 0:
            self.push_drained(sid)

    # -- the driver's events --------------------------------------------------------------------

    def on_timer(self, now, delay_ns):
        if not self.completion:
            self.update_pool(now, delay_ns)

    def on_request(self, now, session, demand, delay_ns):
        if session >= len(self.win):
            return False
        self.remove_drained(session)
        self.demand[session] = demand
        self.pending[session] += 1
        self.shrink_to_demand(session)
        if delay_ns >= self.drop_ns:
            self.aqm_drops += 1
            if self.completion and self.due(now):
                # v2's `srpc_handle_req_drop`: an immediate decrease, no wake-ups.
                self.last_update = now
                self.pool = self.decreased_pool(delay_ns)
            return False
        return True

    def on_response(self, now, session, dropped, delay_ns):
        if session >= len(self.win):
            return 0
        if self.completion and not dropped and self.due(now):
            self.update_pool(now, delay_ns)
        self.pending[session] = max(self.pending[session] - 1, 0)
        self.update_window(session, dropped, False)
        win = self.win[session]
        self.advertised[session] = win
        self.maybe_drain(session)
        return win

    def on_credit_request(self, now, session, demand):
        if session >= len(self.win):
            return None
        old_demand = self.demand[session]
        self.demand[session] = demand
        need = self.pending[session] == 0 and demand > 0
        if demand == 0:
            self.advertised[session] = 0
        if old_demand > 0 and demand == 0:
            self.remove_drained(session)
        self.shrink_to_demand(session)
        if not need:
            return None
        # The sender's pass for an explicit credit need (no responses in it).
        self.update_window(session, False, False)
        if self.advertised[session] < self.win[session]:
            self.advertised[session] = self.win[session]
            return self.win[session]
        self.maybe_drain(session)
        return None

    def take_wakeups(self):
        out, self.wakeups = self.wakeups, []
        return out

    def on_cores_changed(self, now, active):
        # The core fix reads the net gain at the next pool update.
        self.active_cores = active
