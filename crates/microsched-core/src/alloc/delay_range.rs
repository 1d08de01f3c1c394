//! Delay Range (McClure et al., NSDI'22): proactive allocation that keeps the average queueing
//! delay inside `[lower, upper]`.
//!
//! Every interval: average delay = Σ over *all* cores (parked ones included: their stranded work
//! is delay too) of the oldest waiting request's age, divided by the active cores (or the plain Σ
//! when none is active), as in Caladan's `avg_delay_ns`. At or above `upper` (or when a parked
//! core holds work): add a core; at or below `lower` with more than one core active: revoke the
//! one with the least delay. Cores do not park by themselves, except the last.

use super::common::{core_delay, RangeRule, RangeSignal, RANGE_PARK_RULE};
use super::{AllocAction, AllocView, CoreAllocator, ParkRule};
use crate::time::Nanos;

#[derive(Debug, Clone)]
pub struct DelayRangeAllocator {
    interval: Nanos,
    /// Band in nanoseconds, kept fractional so that sub-nanosecond settings are not rounded.
    lower_ns: f64,
    upper_ns: f64,
    rule: RangeRule,
    /// Average delay at the last tick; see [`CoreAllocator::signal`].
    avg_delay: Option<f64>,
}

impl DelayRangeAllocator {
    /// `lower_ns < upper_ns`, both in nanoseconds.
    pub fn new(interval: Nanos, lower_ns: f64, upper_ns: f64) -> Self {
        Self { interval, lower_ns, upper_ns, rule: RangeRule::new(interval), avg_delay: None }
    }
}

impl CoreAllocator for DelayRangeAllocator {
    fn interval(&self) -> Option<Nanos> {
        Some(self.interval)
    }

    fn tick(&mut self, obs: &dyn AllocView) -> AllocAction {
        // Cores with empty queues add nothing to the sum.
        let now = obs.now();
        let mut sum: Nanos = 0;
        obs.for_each_queued(&mut |_, c| sum += core_delay(now, c));
        let avg = sum as f64 / obs.active().max(1) as f64;
        self.avg_delay = Some(avg);
        let s = RangeSignal { above: avg >= self.upper_ns, below: avg <= self.lower_ns, zero: sum == 0 };
        self.rule.decide(obs, s)
    }

    fn park_rule(&self) -> ParkRule {
        RANGE_PARK_RULE
    }

    /// Average queueing delay at the last tick (Σ over all cores / active cores), in nanoseconds.
    /// `None` before the first tick.
    fn signal(&self) -> Option<f64> {
        self.avg_delay
    }

    fn name(&self) -> &'static str {
        "delay_range"
    }
}

// ---------------------------------------------------------------------------------------------
// Configuration: the `[policy.allocator]` table of `kind = "delay_range"`.

/// McClure et al.'s Delay Range: keep the average queueing delay within [lower_us, upper_us].
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Period of the delay check.
    pub interval_us: f64,
    /// At or below this average queueing delay a core is revoked.
    pub lower_us: f64,
    /// At or above this average queueing delay a core is added.
    pub upper_us: f64,
}

impl Default for Config {
    fn default() -> Self {
        Self { interval_us: 5.0, lower_us: 0.5, upper_us: 1.0 }
    }
}

impl super::AllocatorConfig for Config {
    /// Checks the parameters; `field` is the table's dotted path.
    fn validate(&self, field: &str) -> Result<(), crate::error::ScenarioError> {
        use super::common::{check_non_negative_us, check_positive_us, check_range};
        check_positive_us(format!("{field}.interval_us"), self.interval_us)?;
        check_non_negative_us(format!("{field}.lower_us"), self.lower_us)?;
        check_non_negative_us(format!("{field}.upper_us"), self.upper_us)?;
        check_range(field, "lower_us", self.lower_us, "upper_us", self.upper_us)
    }

    /// The allocator; the configuration must have passed [`Config::validate`].
    fn build(&self, _env: &crate::env::AllocEnv) -> Box<dyn CoreAllocator> {
        use crate::time::us;
        Box::new(DelayRangeAllocator::new(us(self.interval_us), self.lower_us * 1e3, self.upper_us * 1e3))
    }
}

#[cfg(test)]
mod tests {
    use super::super::common::test_util::*;
    use super::super::ParkMode;
    use super::*;

    fn alloc() -> Driven<DelayRangeAllocator> {
        // The CoreSync setting: 0.5–1 µs.
        Driven::new(DelayRangeAllocator::new(5_000, 500.0, 1_000.0))
    }

    fn tick(a: &mut Driven<DelayRangeAllocator>, now: Nanos, cores: &[super::super::CoreObs]) -> AllocAction {
        a.tick_at(now, cores)
    }

    #[test]
    fn adds_at_the_upper_bound_on_the_average_over_active_cores() {
        let mut a = alloc();
        assert_eq!(a.signal(), None);
        // Delays 1500 + 400 over 2 active = 950 ns: inside the band.
        let c = [queued(active(), 2, 8_500), queued(active(), 1, 9_600), parked()];
        assert_eq!(tick(&mut a, 10_000, &c), AllocAction::Nothing);
        assert_eq!(a.signal(), Some(950.0));
        // 1600 + 400 = 1000 ns average: congested (>=).
        let c = [queued(active(), 2, 13_400), queued(active(), 1, 14_600), parked()];
        assert_eq!(tick(&mut a, 15_000, &c), AllocAction::Grant);
        assert_eq!(a.signal(), Some(1_000.0));
        // Next interval skipped after the grant even if still high.
        let c = [queued(active(), 2, 15_000), active(), parked()];
        assert_eq!(tick(&mut a, 20_000, &c), AllocAction::Nothing);
    }

    #[test]
    fn parked_cores_count_in_the_numerator_and_their_work_is_congestion() {
        let mut a = alloc();
        // 300 ns on a parked core over 2 active cores: 150 ns, below the band, but it holds work.
        let c = [active(), active(), queued(parked(), 1, 9_700)];
        assert_eq!(tick(&mut a, 10_000, &c), AllocAction::Grant);
        assert_eq!(a.signal(), Some(150.0));
    }

    #[test]
    fn revokes_the_least_delayed_core_at_most_every_other_interval() {
        let mut a = alloc();
        // Average (600 + 200 + 0) / 3 = 266.7 ns <= 500: revoke core 2 (zero delay).
        let low = |now: Nanos| [queued(active(), 1, now - 600), queued(active(), 1, now - 200), active(), parked()];
        assert_eq!(tick(&mut a, 5_000, &low(5_000)), AllocAction::Yield(2));
        assert_eq!(tick(&mut a, 10_000, &low(10_000)), AllocAction::Nothing);
        assert_eq!(tick(&mut a, 15_000, &low(15_000)), AllocAction::Yield(2));
        // Exactly at the lower bound counts (<=): (700 + 300) / 2 = 500.
        let mut a = alloc();
        let c = [queued(active(), 1, 9_300), queued(active(), 1, 9_700)];
        assert_eq!(tick(&mut a, 10_000, &c), AllocAction::Yield(1));
    }

    #[test]
    fn keeps_the_last_core_unless_there_is_no_delay_at_all() {
        let mut a = alloc();
        let c = [queued(active(), 1, 9_900), parked()];
        assert_eq!(tick(&mut a, 10_000, &c), AllocAction::Nothing);
        let c = [active(), parked()];
        assert_eq!(tick(&mut a, 15_000, &c), AllocAction::Yield(0));
        assert_eq!(a.signal(), Some(0.0));
        // With every core parked the average is the plain sum; nothing to revoke.
        let mut a = alloc();
        assert_eq!(tick(&mut a, 5_000, &[parked(), parked()]), AllocAction::Nothing);
    }

    #[test]
    fn long_interval_has_no_waking_skip() {
        let mut a = Driven::new(DelayRangeAllocator::new(10_000, 500.0, 1_000.0));
        let c = |now: Nanos| [queued(active(), 3, now - 5_000), parked(), parked()];
        assert_eq!(tick(&mut a, 10_000, &c(10_000)), AllocAction::Grant);
        assert_eq!(tick(&mut a, 20_000, &c(20_000)), AllocAction::Grant);
    }

    #[test]
    fn only_the_last_core_parks_by_itself() {
        assert_eq!(alloc().park_rule().mode, ParkMode::OnlyLastCore);
    }
}
