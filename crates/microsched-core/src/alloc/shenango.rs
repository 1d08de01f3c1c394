//! Shenango (NSDI'19): reactive allocation on a "standing queue" signal.
//!
//! Every interval the IOKernel checks each active core: if an item that was already queued at the
//! previous check has still not been dequeued, the application is congested and gets one more
//! core (`cores_is_proc_congested` in shenango `iokernel/cores.c`). Cores give themselves back:
//! a core parks after at least `min_passes` fruitless work-search passes *and* `poll` time.

use super::{AllocAction, AllocView, CoreAllocator, CoreState, ParkMode, ParkRule};
use crate::time::Nanos;

#[derive(Debug, Clone)]
pub struct ShenangoAllocator {
    interval: Nanos,
    poll: Nanos,
    min_passes: u32,
    /// Congested cores at the last tick; see [`CoreAllocator::signal`].
    congested_cores: Option<u32>,
}

impl ShenangoAllocator {
    /// `interval`: check period; `poll`/`min_passes`: the park rule. Shenango's IOKernel runs the
    /// check when more than 5 µs (integer microseconds) have passed, so about every 6 µs; we
    /// take the interval as given rather than copying that off-by-one.
    pub fn new(interval: Nanos, poll: Nanos, min_passes: u32) -> Self {
        Self { interval, poll, min_passes, congested_cores: None }
    }
}

impl CoreAllocator for ShenangoAllocator {
    fn interval(&self) -> Option<Nanos> {
        Some(self.interval)
    }

    fn tick(&mut self, obs: &dyn AllocView) -> AllocAction {
        let mut congested = 0u32;
        // Both tests need queued work now (a standing queue is a non-empty one), so the cores
        // without any cannot count.
        obs.for_each_queued(&mut |i, c| {
            match c.state {
                CoreState::Active => {
                    // The previous check is judged only on a window the core was active for at
                    // both ends: this is Shenango's "waking" pass, which gives a just-woken core
                    // one check to start draining the queue it was handed. Any item enqueued
                    // before that check is older than one interval, so dequeued below the
                    // enqueued count of then means such an item is still waiting (queues are
                    // FIFO; steals count as dequeues).
                    let p = obs.prev(i);
                    if p.state == CoreState::Active && c.dequeued_total < p.enqueued_total {
                        congested += 1;
                    }
                }
                // A parked core holding work is congestion too (Caladan's `parked_thread_busy`;
                // Shenango's fast path rewakes such a core).
                CoreState::Parked => congested += 1,
                CoreState::Waking => {}
            }
        });
        self.congested_cores = Some(congested);
        if congested > 0 && obs.any_parked() {
            AllocAction::Grant
        } else {
            AllocAction::Nothing
        }
    }

    fn park_rule(&self) -> ParkRule {
        ParkRule { mode: ParkMode::AfterPoll, min_poll_ns: self.poll, min_passes: self.min_passes }
    }

    /// Number of cores found congested at the last tick (active cores with a standing queue plus
    /// parked cores with queued work); unit: cores. `None` before the first tick.
    fn signal(&self) -> Option<f64> {
        self.congested_cores.map(f64::from)
    }

    fn name(&self) -> &'static str {
        "shenango"
    }
}

// ---------------------------------------------------------------------------------------------
// Configuration: the `[policy.allocator]` table of `kind = "shenango"`.

/// Shenango: add a core when an item stays queued across two checks; park after at least
/// `min_passes` fruitless work-search passes and `poll_us`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Period of the congestion check.
    pub interval_us: f64,
    /// Time an idle core polls before it may park (and at least `min_passes` passes).
    pub poll_us: f64,
    /// Fruitless work-search passes an idle core makes before it may park (Shenango: 4).
    pub min_passes: u32,
}

impl Default for Config {
    fn default() -> Self {
        Self { interval_us: 5.0, poll_us: 2.0, min_passes: 4 }
    }
}

impl super::AllocatorConfig for Config {
    /// Checks the parameters; `field` is the table's dotted path.
    fn validate(&self, field: &str) -> Result<(), crate::error::ScenarioError> {
        use super::common::{check_non_negative_us, check_positive_us};
        check_positive_us(format!("{field}.interval_us"), self.interval_us)?;
        check_non_negative_us(format!("{field}.poll_us"), self.poll_us)
    }

    /// The allocator; the configuration must have passed [`Config::validate`].
    fn build(&self, _env: &crate::env::AllocEnv) -> Box<dyn CoreAllocator> {
        use crate::time::us;
        Box::new(ShenangoAllocator::new(us(self.interval_us), us(self.poll_us), self.min_passes))
    }
}

#[cfg(test)]
mod tests {
    use super::super::common::test_util::*;
    use super::super::CoreObs;
    use super::*;

    fn counts(mut c: CoreObs, enq: u64, deq: u64) -> CoreObs {
        c.enqueued_total = enq;
        c.dequeued_total = deq;
        c.queued = (enq - deq) as u32;
        c
    }

    fn tick(a: &mut Driven<ShenangoAllocator>, now: Nanos, cores: &[CoreObs]) -> AllocAction {
        a.tick_at(now, cores)
    }

    fn alloc() -> Driven<ShenangoAllocator> {
        Driven::new(ShenangoAllocator::new(5_000, 2_000, 4))
    }

    #[test]
    fn standing_queue_adds_a_core() {
        let mut a = alloc();
        assert_eq!(a.signal(), None);
        // First check: items queued, but nothing to compare with yet.
        assert_eq!(tick(&mut a, 5_000, &[counts(active(), 3, 1), parked()]), AllocAction::Nothing);
        assert_eq!(a.signal(), Some(0.0));
        // 2 dequeued of the 3 that were there: one of them is still waiting -> congested.
        assert_eq!(tick(&mut a, 10_000, &[counts(active(), 5, 2), parked()]), AllocAction::Grant);
        assert_eq!(a.signal(), Some(1.0));
    }

    #[test]
    fn queue_that_turns_over_is_not_standing() {
        let mut a = alloc();
        tick(&mut a, 5_000, &[counts(active(), 3, 1), parked()]);
        // The queue is never empty, but everything seen at the last check has been dequeued.
        assert_eq!(tick(&mut a, 10_000, &[counts(active(), 6, 3), parked()]), AllocAction::Nothing);
        assert_eq!(tick(&mut a, 15_000, &[counts(active(), 9, 6), parked()]), AllocAction::Nothing);
        assert_eq!(a.signal(), Some(0.0));
    }

    #[test]
    fn just_woken_core_gets_one_pass() {
        let mut a = alloc();
        // Core 1 is waking, then parked -> active: its first active check is skipped.
        tick(&mut a, 5_000, &[active(), counts(core(CoreState::Waking), 4, 0), parked()]);
        assert_eq!(tick(&mut a, 10_000, &[active(), counts(active(), 4, 0), parked()]), AllocAction::Nothing);
        // Next check: the items it had at the pass are still there -> congested.
        assert_eq!(tick(&mut a, 15_000, &[active(), counts(active(), 4, 1), parked()]), AllocAction::Grant);
        // A core that was parked at the last check and is active now gets the pass too.
        let mut a = alloc();
        tick(&mut a, 5_000, &[active(), parked(), parked()]);
        assert_eq!(tick(&mut a, 10_000, &[active(), counts(active(), 2, 0), parked()]), AllocAction::Nothing);
        assert_eq!(a.signal(), Some(0.0));
        assert_eq!(tick(&mut a, 15_000, &[active(), counts(active(), 2, 0), parked()]), AllocAction::Grant);
    }

    #[test]
    fn parked_core_with_work_is_congestion() {
        let mut a = alloc();
        assert_eq!(tick(&mut a, 5_000, &[active(), queued(parked(), 1, 4_000)]), AllocAction::Grant);
        assert_eq!(a.signal(), Some(1.0));
    }

    #[test]
    fn never_grants_without_a_parked_core() {
        let mut a = alloc();
        tick(&mut a, 5_000, &[counts(active(), 3, 0), active()]);
        assert_eq!(tick(&mut a, 10_000, &[counts(active(), 3, 0), active()]), AllocAction::Nothing);
        assert_eq!(a.signal(), Some(1.0));
    }

    #[test]
    fn park_rule_needs_passes_and_poll_time() {
        let r = alloc().park_rule();
        assert_eq!(r, ParkRule { mode: ParkMode::AfterPoll, min_poll_ns: 2_000, min_passes: 4 });
        assert_eq!(alloc().interval(), Some(5_000));
    }
}
