//! Pieces the dynamic allocators share: parameter checks, per-interval differencing of the
//! cumulative core counters, and the choice of the core to revoke.

use super::{AllocAction, AllocView, CoreId, CoreObs, ParkMode, ParkRule};
use crate::error::ScenarioError;
use crate::time::{us, Nanos, NS_PER_US};

/// Longest period any allocator parameter may name, in µs (one second). Core allocation works at
/// microsecond scale; a longer value is almost surely a unit mistake (ms or ns written as µs).
pub(crate) const MAX_PERIOD_US: f64 = 1_000_000.0;

/// A period that must be strictly positive (an interval, a threshold): finite, > 0, at least one
/// nanosecond once rounded, and at most one second.
pub(crate) fn check_positive_us(field: String, v: f64) -> Result<(), ScenarioError> {
    if !v.is_finite() || v <= 0.0 || us(v) == 0 || v > MAX_PERIOD_US {
        return Err(ScenarioError::new(
            field,
            format!(
                "{v} is not allowed: must be a number of µs > 0 (at least 0.001) and <= {MAX_PERIOD_US} (one second)"
            ),
        ));
    }
    Ok(())
}

/// A period that may be zero (a poll period: park right after a failed pass): finite, >= 0, and at
/// most one second.
pub(crate) fn check_non_negative_us(field: String, v: f64) -> Result<(), ScenarioError> {
    if !(0.0..=MAX_PERIOD_US).contains(&v) {
        return Err(ScenarioError::new(
            field,
            format!("{v} is not allowed: must be a number of µs >= 0 and <= {MAX_PERIOD_US} (one second)"),
        ));
    }
    Ok(())
}

/// A harvesting controller's window, in ms: finite, > 0 and at most a minute.
pub(crate) fn check_window_ms(field: String, v: f64) -> Result<(), ScenarioError> {
    if !(v.is_finite() && v > 0.0 && v <= 60_000.0) {
        return Err(ScenarioError::new(field, format!("{v} is not allowed: must be a number of ms > 0 and <= 60000")));
    }
    Ok(())
}

/// `lower < upper`. Equal bounds are rejected too: with no band between "add" and "revoke" the
/// policy would change the allocation at every interval.
pub(crate) fn check_range(
    field: &str,
    lower_key: &str,
    lower: f64,
    upper_key: &str,
    upper: f64,
) -> Result<(), ScenarioError> {
    if lower >= upper {
        return Err(ScenarioError::new(
            format!("{field}.{lower_key}"),
            format!("{lower} is not allowed: must be below {field}.{upper_key} ({upper})"),
        ));
    }
    Ok(())
}

/// Queueing delay of a core's oldest waiting request at `now` (0 if its queues are empty).
pub(crate) fn core_delay(now: Nanos, c: &CoreObs) -> Nanos {
    c.oldest_enqueued_at.map_or(0, |t| now.saturating_sub(t))
}

/// Range policies skip the interval after a grant only when the interval is short (Caladan's
/// `simple` policy: `poll_interval < 10`), since then the new core has not had time to act.
pub(crate) const WAKING_SKIP_BELOW_NS: Nanos = 10 * NS_PER_US;

/// Busy and search time over the last interval, from the cumulative counters the driver
/// reports. Parked and waking cores accumulate neither, so parked time counts in neither.
#[derive(Debug, Clone, Default)]
pub(crate) struct IntervalWindow {
    /// Σ over cores of the cumulative (busy, search) at the previous call; the first call
    /// measures from the start of the run, which is the first interval when ticks start one
    /// interval in.
    prev: (Nanos, Nanos),
}

impl IntervalWindow {
    /// Moves the window to now; returns Σ busy and Σ search over all cores in the last interval.
    pub(crate) fn advance(&mut self, obs: &dyn AllocView) -> (Nanos, Nanos) {
        let now = obs.busy_search_totals();
        // saturating: a driver that resets its counters must not make a window wrap around.
        let delta = (now.0.saturating_sub(self.prev.0), now.1.saturating_sub(self.prev.1));
        self.prev = now;
        delta
    }
}

/// The active core to revoke: smallest queueing delay (Caladan's `min_delay_core`), then fewest
/// queued requests, then least busy in the last interval, then lowest index (determinism).
pub(crate) fn least_loaded(obs: &dyn AllocView) -> Option<CoreId> {
    let mut best: Option<(Nanos, u32, Nanos, CoreId)> = None;
    obs.for_each_active_load(&mut |i, l| {
        let key = (l.delay, l.queued, l.busy, i);
        if best.is_none_or(|b| key < b) {
            best = Some(key);
        }
    });
    best.map(|b| b.3)
}

/// Where a range policy's signal stands this interval relative to its band.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RangeSignal {
    /// Above the band: add a core.
    pub above: bool,
    /// At or below the lower bound: revoke a core (when more than one is active).
    pub below: bool,
    /// Exactly zero: the last active core may go too.
    pub zero: bool,
}

/// The add/revoke rule both range policies share (McClure et al., as in Caladan's `simple`
/// policy with `range_policy`): at most one revoke every two intervals, the last core only at a
/// zero signal, a grant skipped after a grant when the interval is short.
#[derive(Debug, Clone)]
pub(crate) struct RangeRule {
    waking_skip: bool,
    granted_last: bool,
    yielded_last: bool,
}

impl RangeRule {
    pub(crate) fn new(interval: Nanos) -> Self {
        Self { waking_skip: interval < WAKING_SKIP_BELOW_NS, granted_last: false, yielded_last: false }
    }

    pub(crate) fn decide(&mut self, obs: &dyn AllocView, s: RangeSignal) -> AllocAction {
        // A revoke asked for last interval is withdrawn now (Caladan clears the yield request),
        // and no new one is made: this is the "at most one revoke every two intervals".
        let may_revoke = !std::mem::take(&mut self.yielded_last);
        let woke_last = std::mem::take(&mut self.granted_last) && self.waking_skip;
        let parked_work = obs.parked_with_work();
        // Add first: Caladan can add and revoke in the same interval, a driver carries out one
        // action, and when both apply a parked core holds work that must not wait.
        if (s.above || parked_work) && !woke_last && obs.any_parked() {
            self.granted_last = true;
            return AllocAction::Grant;
        }
        let active = obs.active();
        let revoke = may_revoke && ((active > 1 && s.below) || (active == 1 && s.zero && !parked_work));
        match revoke.then(|| least_loaded(obs)).flatten() {
            Some(core) => {
                self.yielded_last = true;
                AllocAction::Yield(core)
            }
            None => AllocAction::Nothing,
        }
    }
}

/// Range policies: cores spin and steal while more than one is active (they are revoked instead);
/// the last one parks as soon as one work-search pass fails, with no poll-time minimum.
pub(crate) const RANGE_PARK_RULE: ParkRule = ParkRule { mode: ParkMode::OnlyLastCore, min_poll_ns: 0, min_passes: 1 };

#[cfg(test)]
pub(crate) mod test_util {
    //! Hand-built observations for the policies' unit tests.
    use super::super::{AllocAction, CoreAllocator, CoreObs, CoreState, SliceView};
    use crate::time::Nanos;

    /// A policy driven tick by tick, as a driver does: each tick's previous observations are the
    /// last tick's (zero counters before the first).
    pub struct Driven<A> {
        pub a: A,
        prev: Vec<CoreObs>,
    }

    impl<A: CoreAllocator> Driven<A> {
        pub fn new(a: A) -> Self {
            Self { a, prev: Vec::new() }
        }
        pub fn tick_at(&mut self, now: Nanos, cores: &[CoreObs]) -> AllocAction {
            if self.prev.len() != cores.len() {
                self.prev = cores.iter().map(|c| CoreObs::new(c.state)).collect();
            }
            let action = self.a.tick(&SliceView { now, cores, prev: &self.prev });
            self.prev = cores.to_vec();
            action
        }
    }

    impl<A> std::ops::Deref for Driven<A> {
        type Target = A;
        fn deref(&self) -> &A {
            &self.a
        }
    }
    impl<A> std::ops::DerefMut for Driven<A> {
        fn deref_mut(&mut self) -> &mut A {
            &mut self.a
        }
    }

    pub fn core(state: CoreState) -> CoreObs {
        CoreObs::new(state)
    }
    pub fn active() -> CoreObs {
        core(CoreState::Active)
    }
    pub fn parked() -> CoreObs {
        core(CoreState::Parked)
    }
    /// `c` with `n` requests queued, the oldest enqueued at `at`.
    pub fn queued(mut c: CoreObs, n: u32, at: Nanos) -> CoreObs {
        c.queued = n;
        c.oldest_enqueued_at = if n > 0 { Some(at) } else { None };
        c
    }
    pub fn times(mut c: CoreObs, busy: Nanos, search: Nanos) -> CoreObs {
        c.busy_ns = busy;
        c.search_ns = search;
        c
    }
}

#[cfg(test)]
mod tests {
    use super::super::SliceView;
    use super::test_util::*;
    use super::*;

    #[test]
    fn period_checks() {
        assert!(check_positive_us("f".into(), 5.0).is_ok());
        assert!(check_positive_us("f".into(), MAX_PERIOD_US).is_ok());
        for bad in [0.0, -1.0, 0.0001, f64::NAN, f64::INFINITY, MAX_PERIOD_US + 1.0] {
            let e = check_positive_us("a.b".into(), bad).unwrap_err();
            assert_eq!(e.field, "a.b", "{bad}");
        }
        assert!(check_non_negative_us("f".into(), 0.0).is_ok());
        for bad in [-0.5, f64::NAN, 2e6] {
            assert!(check_non_negative_us("f".into(), bad).is_err(), "{bad}");
        }
        assert!(check_range("p", "lower", 1.0, "upper", 2.0).is_ok());
        let e = check_range("p", "lower", 2.0, "upper", 2.0).unwrap_err();
        assert_eq!(e.field, "p.lower");
        assert!(e.message.contains("p.upper"));
    }

    #[test]
    fn window_differences_counters_and_least_loaded_breaks_ties() {
        let mut w = IntervalWindow::default();
        let start = [active(), active(), parked()];
        let first = [times(active(), 100, 50), times(active(), 10, 5), times(parked(), 0, 0)];
        assert_eq!(w.advance(&SliceView { now: 500, cores: &first, prev: &start }), (110, 55));
        let cores = [times(active(), 130, 60), times(active(), 15, 9), parked()];
        let obs = SliceView { now: 1000, cores: &cores, prev: &first };
        assert_eq!(w.advance(&obs), (35, 14));
        let mut busy = vec![];
        obs.for_each_active_load(&mut |i, l| busy.push((i, l.busy)));
        assert_eq!(busy, [(0, 30), (1, 5)]);
        // Both active cores idle with empty queues: the one less busy in the interval goes.
        assert_eq!(least_loaded(&obs), Some(1));
        // Delay dominates busy time.
        let cores = [times(active(), 130, 60), queued(times(active(), 15, 9), 1, 900), parked()];
        let obs = SliceView { now: 1000, cores: &cores, prev: &first };
        assert_eq!(least_loaded(&obs), Some(0));
        // Equal keys: the lowest index, whatever order the view lists the cores in.
        let cores = [active(), active(), active()];
        let obs = SliceView { now: 1000, cores: &cores, prev: &cores };
        assert_eq!(least_loaded(&Reversed(obs)), Some(0));
    }

    /// A view that lists cores from the last, as a driver's unordered sets may.
    struct Reversed<'a>(SliceView<'a>);

    impl AllocView for Reversed<'_> {
        fn now(&self) -> Nanos {
            self.0.now
        }
        fn active(&self) -> usize {
            self.0.active()
        }
        fn waking(&self) -> usize {
            self.0.waking()
        }
        fn parked(&self) -> usize {
            self.0.parked()
        }
        fn busy_search_totals(&self) -> (Nanos, Nanos) {
            self.0.busy_search_totals()
        }
        fn for_each_queued(&self, f: &mut dyn FnMut(CoreId, &CoreObs)) {
            let mut all = Vec::new();
            self.0.for_each_queued(&mut |i, c| all.push((i, *c)));
            all.iter().rev().for_each(|(i, c)| f(*i, c));
        }
        fn for_each_active(&self, f: &mut dyn FnMut(CoreId, &CoreObs)) {
            let mut all = Vec::new();
            self.0.for_each_active(&mut |i, c| all.push((i, *c)));
            all.iter().rev().for_each(|(i, c)| f(*i, c));
        }
        fn prev(&self, core: CoreId) -> CoreObs {
            self.0.prev(core)
        }
    }
}
