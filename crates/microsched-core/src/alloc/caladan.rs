//! Caladan (OSDI'20): reactive allocation on the queueing-delay signal.
//!
//! Every interval the IOKernel measures the maximum queueing delay over the application's cores;
//! at or above the threshold (or when a parked core holds work) it adds one core. Cores give
//! themselves back after polling and stealing for the poll period without finding work.

use super::{AllocAction, AllocView, CoreAllocator, ParkMode, ParkRule};
use crate::time::Nanos;

#[derive(Debug, Clone)]
pub struct CaladanAllocator {
    interval: Nanos,
    threshold: Nanos,
    poll: Nanos,
    /// A core was granted at the previous tick: Caladan's `waking` flag. The new core has not had
    /// an interval to drain the queues yet, so the delay it is meant to fix is still visible.
    granted_last: bool,
    waking_skip: WakingSkip,
    /// Max queueing delay at the last tick; see [`CoreAllocator::signal`].
    max_delay: Option<Nanos>,
    /// For results: a named parameter set (`shenango_artifact`) reports its own name.
    name: &'static str,
}

impl CaladanAllocator {
    pub fn new(interval: Nanos, threshold: Nanos, poll: Nanos) -> Self {
        Self { interval, threshold, poll, granted_last: false, waking_skip: WakingSkip::Simple, max_delay: None, name: "caladan" }
    }

    pub fn with_waking_skip(mut self, waking_skip: WakingSkip) -> Self {
        self.waking_skip = waking_skip;
        self
    }

    pub fn with_name(mut self, name: &'static str) -> Self {
        self.name = name;
        self
    }
}

/// Where the IOKernel's "a core was woken last interval" skip sits relative to the congestion
/// test (iokernel/simple.c vs ias.c).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WakingSkip {
    /// `simple`: the skip comes first and is spent on the next interval, congested or not.
    Simple,
    /// `ias`: the congestion test comes first; the skip is kept until a congested interval
    /// spends it.
    Ias,
    /// `none`: no skip, a core every congested interval: the simulation study's simulator
    /// (estuhr1206/scheduling-policies-sim, `reallocate_threads_default`), whose new core is
    /// still on its way (the allocation delay) when the next interval grants another.
    None,
}

impl CoreAllocator for CaladanAllocator {
    fn interval(&self) -> Option<Nanos> {
        Some(self.interval)
    }

    fn tick(&mut self, obs: &dyn AllocView) -> AllocAction {
        let delay = obs.max_delay();
        self.max_delay = Some(delay);
        let congested = delay >= self.threshold || obs.parked_with_work();
        if self.waking_skip == WakingSkip::Ias && !congested {
            return AllocAction::Nothing;
        }
        if std::mem::take(&mut self.granted_last) {
            return AllocAction::Nothing;
        }
        // Caladan would mark the process congested when no core is free, to get the next idle
        // one; here every free core is parked, so there is nothing to wait for.
        if congested && obs.any_parked() {
            self.granted_last = self.waking_skip != WakingSkip::None;
            AllocAction::Grant
        } else {
            AllocAction::Nothing
        }
    }

    fn park_rule(&self) -> ParkRule {
        // RUNTIME_SCHED_POLL_ITERS is 0 in Caladan: only the poll time counts.
        ParkRule { mode: ParkMode::AfterPoll, min_poll_ns: self.poll, min_passes: 0 }
    }

    /// Max over cores of the oldest waiting request's age at the last tick, in nanoseconds.
    /// `None` before the first tick.
    fn signal(&self) -> Option<f64> {
        self.max_delay.map(|d| d as f64)
    }

    fn name(&self) -> &'static str {
        self.name
    }
}

// ---------------------------------------------------------------------------------------------
// Configuration: the `[policy.allocator]` table of `kind = "caladan"`.

/// Caladan: add a core when the max queueing delay reaches `delay_threshold_us` (or a parked
/// core has work); park after polling and stealing for `poll_us`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Period of the congestion check (Caladan's IOKernel poll).
    pub interval_us: f64,
    /// Max queueing delay at or above which one core is added.
    pub delay_threshold_us: f64,
    /// Time an idle core polls and steals without finding work before it parks.
    pub poll_us: f64,
    /// The IOKernel policy's order of the post-wake skip and the congestion test: `simple`
    /// (simple.c) or `ias` (ias.c, which the CoreSync artifact's Caladan baselines ran); `none`:
    /// no skip (the simulation study's simulator).
    pub waking_skip: WakingSkip,
}

impl Default for Config {
    fn default() -> Self {
        Self { interval_us: 5.0, delay_threshold_us: 5.0, poll_us: 2.0, waking_skip: WakingSkip::Simple }
    }
}

impl super::AllocatorConfig for Config {
    /// Checks the parameters; `field` is the table's dotted path.
    fn validate(&self, field: &str) -> Result<(), crate::error::ScenarioError> {
        use super::common::{check_non_negative_us, check_positive_us};
        check_positive_us(format!("{field}.interval_us"), self.interval_us)?;
        // Zero would mean "always congested" here; in Caladan it selects Shenango's signal,
        // which is `kind = "shenango"`.
        check_positive_us(format!("{field}.delay_threshold_us"), self.delay_threshold_us).map_err(|mut e| {
            e.message.push_str("; for Shenango's standing-queue signal use kind = \"shenango\"");
            e
        })?;
        check_non_negative_us(format!("{field}.poll_us"), self.poll_us)
    }

    /// The allocator; the configuration must have passed [`Config::validate`].
    fn build(&self, _env: &crate::env::AllocEnv) -> Box<dyn CoreAllocator> {
        use crate::time::us;
        Box::new(CaladanAllocator::new(us(self.interval_us), us(self.delay_threshold_us), us(self.poll_us)).with_waking_skip(self.waking_skip))
    }
}

#[cfg(test)]
mod tests {
    use super::super::common::test_util::*;
    use super::super::CoreObs;
    use super::*;

    fn tick(a: &mut Driven<CaladanAllocator>, now: Nanos, cores: &[CoreObs]) -> AllocAction {
        a.tick_at(now, cores)
    }

    fn alloc() -> Driven<CaladanAllocator> {
        Driven::new(CaladanAllocator::new(5_000, 5_000, 2_000))
    }

    #[test]
    fn adds_a_core_at_the_threshold_not_below() {
        let mut a = alloc();
        assert_eq!(a.signal(), None);
        // 4.999 µs: below.
        assert_eq!(tick(&mut a, 10_000, &[queued(active(), 2, 5_001), parked()]), AllocAction::Nothing);
        assert_eq!(a.signal(), Some(4_999.0));
        // Exactly 5 µs: congested (>=).
        assert_eq!(tick(&mut a, 15_000, &[queued(active(), 2, 10_000), parked()]), AllocAction::Grant);
        assert_eq!(a.signal(), Some(5_000.0));
    }

    #[test]
    fn skips_the_interval_after_a_grant() {
        let mut a = alloc();
        let congested = |now: Nanos| [queued(active(), 9, now - 20_000), parked(), parked()];
        assert_eq!(tick(&mut a, 20_000, &congested(20_000)), AllocAction::Grant);
        assert_eq!(tick(&mut a, 25_000, &congested(25_000)), AllocAction::Nothing);
        // The signal is still measured during the skip.
        assert_eq!(a.signal(), Some(20_000.0));
        assert_eq!(tick(&mut a, 30_000, &congested(30_000)), AllocAction::Grant);
        // The skip is spent even on an uncongested interval (simple ordering).
        let mut a = alloc();
        assert_eq!(tick(&mut a, 20_000, &congested(20_000)), AllocAction::Grant);
        assert_eq!(tick(&mut a, 25_000, &[active(), active(), parked()]), AllocAction::Nothing);
        assert_eq!(tick(&mut a, 30_000, &congested(30_000)), AllocAction::Grant);
    }

    #[test]
    fn ias_keeps_the_skip_until_a_congested_interval() {
        let congested = |now: Nanos| [queued(active(), 9, now - 20_000), parked(), parked()];
        let mut a = Driven::new(CaladanAllocator::new(5_000, 5_000, 2_000).with_waking_skip(WakingSkip::Ias));
        assert_eq!(tick(&mut a, 20_000, &congested(20_000)), AllocAction::Grant);
        // Uncongested: nothing, and the skip is kept (simple would spend it here).
        assert_eq!(tick(&mut a, 25_000, &[active(), active(), parked()]), AllocAction::Nothing);
        // The first congested interval spends it; the next one grants.
        assert_eq!(tick(&mut a, 30_000, &congested(30_000)), AllocAction::Nothing);
        assert_eq!(tick(&mut a, 35_000, &congested(35_000)), AllocAction::Grant);
    }

    #[test]
    fn none_grants_every_congested_interval() {
        let congested = |now: Nanos| [queued(active(), 9, now - 20_000), parked(), parked()];
        let mut a = Driven::new(CaladanAllocator::new(5_000, 5_000, 2_000).with_waking_skip(WakingSkip::None));
        assert_eq!(tick(&mut a, 20_000, &congested(20_000)), AllocAction::Grant);
        assert_eq!(tick(&mut a, 25_000, &congested(25_000)), AllocAction::Grant);
        assert_eq!(tick(&mut a, 30_000, &[active(), active(), parked()]), AllocAction::Nothing);
        assert_eq!(tick(&mut a, 35_000, &congested(35_000)), AllocAction::Grant);
    }

    #[test]
    fn parked_core_with_work_is_congestion() {
        let mut a = alloc();
        assert_eq!(tick(&mut a, 5_000, &[active(), queued(parked(), 1, 4_900)]), AllocAction::Grant);
    }

    #[test]
    fn never_grants_without_a_parked_core() {
        let mut a = alloc();
        let cores = [queued(active(), 9, 0), active()];
        assert_eq!(tick(&mut a, 50_000, &cores), AllocAction::Nothing);
        // And since nothing was granted, there is no skip to spend afterwards.
        assert_eq!(tick(&mut a, 55_000, &[queued(active(), 9, 0), parked()]), AllocAction::Grant);
    }

    #[test]
    fn park_rule_is_poll_time_only() {
        let r = alloc().park_rule();
        assert_eq!(r, ParkRule { mode: ParkMode::AfterPoll, min_poll_ns: 2_000, min_passes: 0 });
    }
}
