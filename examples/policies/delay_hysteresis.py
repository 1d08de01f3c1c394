"""Delay Range with hysteresis: the tutorial's allocator (docs/policies.md).

Delay Range (McClure et al., NSDI'22) keeps the average queueing delay inside [lower, upper]: add
a core at or above `upper`, revoke one at or below `lower`. Here a decision needs the signal to
stay out of the band for several ticks in a row, so a short burst does not wake a core that
parks again two ticks later.
"""

from dataclasses import dataclass

from microsched.policy import GRANT, Allocator, ParkRule, Yield


class DelayHysteresis(Allocator):
    @dataclass
    class Params:
        interval_us: float = 5.0   # period of the delay check
        lower_us: float = 0.5      # revoke a core after `down_ticks` ticks at or below this...
        upper_us: float = 2.0      # ...add one after `up_ticks` ticks at or above this
        up_ticks: int = 1
        down_ticks: int = 4

        def __post_init__(self):
            if not 0 <= self.lower_us < self.upper_us:
                raise ValueError(f"lower_us = {self.lower_us}, upper_us = {self.upper_us}: use 0 <= lower_us < upper_us")
            if self.up_ticks < 1 or self.down_ticks < 1:
                raise ValueError("up_ticks and down_ticks must be at least 1")

    name = "delay-hysteresis"

    def __init__(self, env, params):
        super().__init__(env, params)
        self.interval_us = params.interval_us
        self.above = self.below = 0    # consecutive ticks above / below the band
        self.avg_delay_ns = None

    def park_rule(self):
        # Cores are revoked by the policy; only the last one parks by itself when it runs dry.
        return ParkRule("only_last_core", min_poll_us=0.0, min_passes=1)

    def tick(self, view):
        now = view.now
        queued = view.queued_cores()  # parked cores too: their stranded work is delay as well
        total = sum(now - c.oldest_enqueued_at for c in queued if c.oldest_enqueued_at is not None)
        self.avg_delay_ns = total / max(view.active, 1)
        self.above = self.above + 1 if self.avg_delay_ns >= self.params.upper_us * 1e3 else 0
        self.below = self.below + 1 if self.avg_delay_ns <= self.params.lower_us * 1e3 else 0
        stranded = any(c.state == "parked" for c in queued)
        if (self.above >= self.params.up_ticks or stranded) and view.any_parked():
            self.above = 0
            return GRANT
        if self.below >= self.params.down_ticks and view.active > 1:
            self.below = 0
            # Revoke the active core with the least waiting work.
            core = min(view.active_loads(), key=lambda load: (load[1], load[2]))[0]
            return Yield(core)
        return None

    def signal(self):
        return self.avg_delay_ns
