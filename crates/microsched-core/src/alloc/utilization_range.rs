//! Utilization Range (McClure et al., NSDI'22): proactive allocation that keeps the fraction of
//! allocated core time spent running requests inside `[lower, upper]`.
//!
//! Every interval: utilization = Σ busy / Σ (busy + search) over the interval, across cores
//! (parked time counts in neither; no data reads as 1.0, "fully used"). Above `upper`: add a
//! core; at or below `lower` with more than one core active: revoke the least-loaded one. Cores do
//! not park by themselves, except the last (see [`RANGE_PARK_RULE`]).

use super::common::{IntervalWindow, RangeRule, RangeSignal, RANGE_PARK_RULE};
use super::{AllocAction, AllocView, CoreAllocator, ParkRule};
use crate::time::Nanos;

#[derive(Debug, Clone)]
pub struct UtilizationRangeAllocator {
    interval: Nanos,
    lower: f64,
    upper: f64,
    window: IntervalWindow,
    rule: RangeRule,
    /// Utilization over the last interval; see [`CoreAllocator::signal`].
    utilization: Option<f64>,
}

impl UtilizationRangeAllocator {
    /// `lower` and `upper` are fractions in [0, 1], `lower < upper`.
    pub fn new(interval: Nanos, lower: f64, upper: f64) -> Self {
        Self { interval, lower, upper, window: IntervalWindow::default(), rule: RangeRule::new(interval), utilization: None }
    }
}

impl CoreAllocator for UtilizationRangeAllocator {
    fn interval(&self) -> Option<Nanos> {
        Some(self.interval)
    }

    fn tick(&mut self, obs: &dyn AllocView) -> AllocAction {
        let (busy, search) = self.window.advance(obs);
        // No busy or search time at all (every core parked): nothing says the cores are
        // underused, so read it as fully used, as Caladan does; the parked-work rule then adds.
        let u = if busy + search == 0 { 1.0 } else { busy as f64 / (busy + search) as f64 };
        self.utilization = Some(u);
        let s = RangeSignal { above: u > self.upper, below: u <= self.lower, zero: u == 0.0 };
        self.rule.decide(obs, s)
    }

    fn park_rule(&self) -> ParkRule {
        RANGE_PARK_RULE
    }

    /// Utilization over the last interval, a fraction in [0, 1]. `None` before the first tick.
    fn signal(&self) -> Option<f64> {
        self.utilization
    }

    fn name(&self) -> &'static str {
        "utilization_range"
    }
}

// ---------------------------------------------------------------------------------------------
// Configuration: the `[policy.allocator]` table of `kind = "utilization_range"`.

/// McClure et al.'s Utilization Range: keep busy/(busy+search) within [lower, upper].
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Period of the utilization check.
    pub interval_us: f64,
    /// At or below this utilization (a fraction in [0, 1]) a core is revoked.
    pub lower: f64,
    /// Above this utilization (a fraction in [0, 1]) a core is added.
    pub upper: f64,
}

impl Default for Config {
    fn default() -> Self {
        Self { interval_us: 5.0, lower: 0.75, upper: 0.95 }
    }
}

impl super::AllocatorConfig for Config {
    /// Checks the parameters; `field` is the table's dotted path.
    fn validate(&self, field: &str) -> Result<(), crate::error::ScenarioError> {
        use super::common::{check_positive_us, check_range};
        check_positive_us(format!("{field}.interval_us"), self.interval_us)?;
        for (key, v) in [("lower", self.lower), ("upper", self.upper)] {
            if !(0.0..=1.0).contains(&v) {
                return Err(crate::error::ScenarioError::new(
                    format!("{field}.{key}"),
                    format!("{v} is not allowed: must be a utilization fraction in [0, 1] (0.75 means 75 %)"),
                ));
            }
        }
        check_range(field, "lower", self.lower, "upper", self.upper)
    }

    /// The allocator; the configuration must have passed [`Config::validate`].
    fn build(&self, _env: &crate::env::AllocEnv) -> Box<dyn CoreAllocator> {
        use crate::time::us;
        Box::new(UtilizationRangeAllocator::new(us(self.interval_us), self.lower, self.upper))
    }
}

#[cfg(test)]
mod tests {
    use super::super::common::test_util::*;
    use super::super::{CoreObs, CoreState, ParkMode};
    use super::*;

    /// Cores whose cumulative counters advance by (busy, search) per tick from `base`.
    struct Feed {
        acc: Vec<(Nanos, Nanos)>,
    }
    impl Feed {
        fn new(n: usize) -> Self {
            Self { acc: vec![(0, 0); n] }
        }
        /// `per_core[i]`: (state, busy, search) of core i during the interval.
        fn step(&mut self, per_core: &[(CoreState, Nanos, Nanos)]) -> Vec<CoreObs> {
            per_core
                .iter()
                .zip(self.acc.iter_mut())
                .map(|(&(st, b, s), acc)| {
                    acc.0 += b;
                    acc.1 += s;
                    times(core(st), acc.0, acc.1)
                })
                .collect()
        }
    }

    use CoreState::{Active as A, Parked as P};

    fn alloc() -> Driven<UtilizationRangeAllocator> {
        Driven::new(UtilizationRangeAllocator::new(5_000, 0.75, 0.95))
    }

    #[test]
    fn adds_above_the_band_and_holds_inside_it() {
        let mut a = alloc();
        let mut f = Feed::new(3);
        assert_eq!(a.signal(), None);
        // 9.6 of 10 µs busy: 0.96 > 0.95.
        let c = f.step(&[(A, 4_800, 200), (A, 4_800, 200), (P, 0, 0)]);
        assert_eq!(a.tick_at(5_000, &c), AllocAction::Grant);
        assert_eq!(a.signal(), Some(0.96));
        // The interval after a grant is skipped (5 µs < 10 µs), even though still above.
        let c = f.step(&[(A, 5_000, 0), (A, 5_000, 0), (P, 0, 0)]);
        assert_eq!(a.tick_at(10_000, &c), AllocAction::Nothing);
        // Exactly 0.95 is inside the band (the add test is strict).
        let c = f.step(&[(A, 4_750, 250), (A, 4_750, 250), (P, 0, 0)]);
        assert_eq!(a.tick_at(15_000, &c), AllocAction::Nothing);
        assert_eq!(a.signal(), Some(0.95));
    }

    #[test]
    fn revokes_at_most_once_every_two_intervals() {
        let mut a = alloc();
        let mut f = Feed::new(4);
        // 0.5 utilization with 3 active: revoke the least busy core (delays are all zero).
        let low = [(A, 3_000, 2_000), (A, 2_000, 3_000), (A, 2_500, 2_500), (P, 0, 0)];
        let c = f.step(&low);
        assert_eq!(a.tick_at(5_000, &c), AllocAction::Yield(1));
        assert_eq!(a.signal(), Some(0.5));
        // Still low next interval: no second revoke yet.
        let c = f.step(&low);
        assert_eq!(a.tick_at(10_000, &c), AllocAction::Nothing);
        let c = f.step(&low);
        assert_eq!(a.tick_at(15_000, &c), AllocAction::Yield(1));
        // Exactly at the lower bound counts as below (<=).
        let mut a = alloc();
        let c = Feed::new(2).step(&[(A, 3_750, 1_250), (A, 3_750, 1_250)]);
        assert_eq!(a.tick_at(5_000, &c), AllocAction::Yield(0));
    }

    #[test]
    fn revokes_the_core_with_the_least_delay() {
        let mut a = alloc();
        let mut c = Feed::new(2).step(&[(A, 1_000, 4_000), (A, 3_000, 2_000)]);
        c[0] = queued(c[0], 1, 4_000);
        assert_eq!(a.tick_at(5_000, &c), AllocAction::Yield(1));
    }

    #[test]
    fn last_core_goes_only_at_zero_utilization() {
        let mut a = alloc();
        let mut f = Feed::new(2);
        let c = f.step(&[(A, 100, 4_900), (P, 0, 0)]);
        assert_eq!(a.tick_at(5_000, &c), AllocAction::Nothing);
        let c = f.step(&[(A, 0, 5_000), (P, 0, 0)]);
        assert_eq!(a.tick_at(10_000, &c), AllocAction::Yield(0));
        assert_eq!(a.signal(), Some(0.0));
        // ... but not while a parked core holds work: that core is granted instead.
        let mut a = alloc();
        let mut c = Feed::new(2).step(&[(A, 0, 5_000), (P, 0, 0)]);
        c[1] = queued(c[1], 1, 4_000);
        assert_eq!(a.tick_at(5_000, &c), AllocAction::Grant);
    }

    #[test]
    fn no_data_reads_as_fully_used_and_grants_need_a_parked_core() {
        let mut a = alloc();
        // Everything parked: utilization 1.0 -> add.
        let c = [parked(), parked()];
        assert_eq!(a.tick_at(5_000, &c), AllocAction::Grant);
        assert_eq!(a.signal(), Some(1.0));
        // Busy, but every core already allocated: nothing to grant.
        let mut a = alloc();
        let c = Feed::new(2).step(&[(A, 5_000, 0), (A, 5_000, 0)]);
        assert_eq!(a.tick_at(5_000, &c), AllocAction::Nothing);
    }

    #[test]
    fn parked_time_counts_in_neither() {
        let mut a = alloc();
        let mut f = Feed::new(3);
        // Cores 1 and 2 parked all interval (no counters move): utilization is core 0's alone.
        let c = f.step(&[(A, 4_000, 1_000), (P, 0, 0), (P, 0, 0)]);
        a.tick_at(5_000, &c);
        assert_eq!(a.signal(), Some(0.8));
    }

    #[test]
    fn only_the_last_core_parks_by_itself() {
        let r = alloc().park_rule();
        assert_eq!(r.mode, ParkMode::OnlyLastCore);
        assert_eq!((r.min_poll_ns, r.min_passes), (0, 1));
    }
}
